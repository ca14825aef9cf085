"""Build: the generated C -> an object file -> a cffi extension module in OUT_DIR.

The model's C is compiled here with flags chosen by target and mode; cffi then only
compiles its small wrapper and links the object in.
"""
import os
import subprocess
import tempfile

from .errors import BuildError, Unsupported

TARGETS = ("native", "avx512", "avx2", "generic")
MODES = ("fast", "exact")

_TARGET_FLAGS = {
    "avx512": ["-march=x86-64-v4", "-mprefer-vector-width=512", "-DAOTC_TARGET_AVX512"],
    "avx2": ["-march=x86-64-v3", "-DAOTC_TARGET_AVX2"],
    "generic": ["-DAOTC_TARGET_GENERIC"],
}
_MODE_FLAGS = {
    "fast": ["-ffp-contract=fast"],
    "exact": ["-ffp-contract=off", "-DAOTC_EXACT"],
}


def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def resolve_target(target):
    """'native' -> the best path this machine runs; others are checked and kept."""
    if target not in TARGETS:
        raise Unsupported(f"target {target!r} is not one of {', '.join(TARGETS)}")
    if target != "native":
        return target
    flags = _cpu_flags()
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        return "avx512"
    if {"avx2", "fma"} <= flags:
        return "avx2"
    return "generic"


def c_flags(target, mode, sanitize=False):
    if mode not in MODES:
        raise Unsupported(f"mode {mode!r} is not one of {', '.join(MODES)}")
    # A call to an undeclared function must stop the build, not fail when the module loads.
    flags = ["-std=c99", "-O3", "-fPIC", "-fno-math-errno", "-Wall", "-Wextra",
             "-Werror=implicit-function-declaration"]
    flags += _TARGET_FLAGS[target] + _MODE_FLAGS[mode]
    if sanitize:
        flags += ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all"]
    return flags


def compiler():
    return os.environ.get("CC", "cc")


def compile_object(out_dir, name, target, mode, sanitize=False):
    """<name>.c -> <name>.o, run in out_dir so the assembler finds the weights."""
    cmd = [compiler(), *c_flags(target, mode, sanitize), "-I.", "-Wa,-I.", "-c", f"{name}.c", "-o", f"{name}.o"]
    result = subprocess.run(cmd, cwd=out_dir, capture_output=True, text=True)
    if result.returncode != 0:
        raise BuildError(f"compiling {name}.c failed:\n{' '.join(cmd)}\n{result.stderr[-4000:]}")
    return os.path.join(out_dir, f"{name}.o")


def build_extension(out_dir, name, module_name, target, mode, sanitize=False):
    """Compile the model and its cffi wrapper; returns the extension's file name."""
    import cffi   # imported here: a compiled model runs without cffi's compiler part

    obj = compile_object(out_dir, name, target, mode, sanitize)
    ffi = cffi.FFI()
    ffi.cdef(f"""
        int {name}_run_array(void *workspace, const void *const *inputs, void *const *outputs);
        void {name}_set_threads(int threads);
        size_t {name}_workspace_bytes(void);
    """)
    link = ["-lpthread", "-lm"] + (["-fsanitize=address,undefined"] if sanitize else [])
    ffi.set_source(module_name, f'#include "{name}.h"', include_dirs=[out_dir],
                   extra_objects=[obj], extra_link_args=link)
    with tempfile.TemporaryDirectory(prefix="aotc-cffi-") as tmp:
        try:
            built = ffi.compile(tmpdir=tmp, verbose=False)
        except Exception as e:
            raise BuildError(f"building the Python module for {name} failed: {e}") from e
        target_path = os.path.join(out_dir, os.path.basename(built))
        os.replace(built, target_path)
    os.remove(obj)
    return os.path.basename(target_path)
