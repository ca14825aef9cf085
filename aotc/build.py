"""Build: the generated C -> an object file -> a shared library in OUT_DIR.

The model's C is compiled here with flags chosen by target and mode and linked into
lib<name>.so, which session.py opens with cffi (ABI mode: no wrapper to compile). The
engine (GEMM, convolution, attention), most of the compile time of any model that uses
it, is compiled once per compiler and flags into a cached object and linked in
(AOTC_ENGINE_EXTERN, aotc_base.h).
"""
import fcntl
import functools
import hashlib
import os
import subprocess
import tempfile

from . import cache, resources
from .codegen.runtime_headers import WHOLE_RUNTIME
from .errors import BuildError, Unsupported

ENGINE_HEADERS = ("aotc_gemm.h", "aotc_conv.h", "aotc_conv_winograd.h", "aotc_conv_nhwc.h", "aotc_attention.h")

TARGETS = ("native", "avx512", "avx2", "generic")
MODES = ("fast", "exact")

# -mprfchw (AVX-512): the kernels' fetches of lines they are about to write (C's tiles) become
# PREFETCHW, which takes the line for writing; without it GCC emits a plain fetch, which
# leaves a line the other core holds shared there, and the store then waits on a second
# round trip. In builds.py at two threads, where the host put the two CPUs on two L3s,
# ResNet-50 took 0.982x the time (8 pairs; 0.992 on one L3), BERT-base 0.987x (23 pairs);
# MobileNetV2, and ResNet-50 at one thread, the same. Every CPU with AVX-512's x86-64-v4
# has the instruction; not every AVX2 one does, so that path keeps the plain fetch.
_TARGET_FLAGS = {
    "avx512": ["-march=x86-64-v4", "-mprefer-vector-width=512", "-mprfchw", "-DAOTC_TARGET_AVX512"],
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


@functools.lru_cache(maxsize=None)
def cache_bytes(cpu_dir="/sys/devices/system/cpu/cpu0/cache"):
    """One core's caches as Linux lists them, {(level, type): bytes} (type "Data",
    "Instruction" or "Unified"); empty where it does not say. The engine's blocking
    follows the build machine's L1 data cache and L2 (aotc_gemm_kernels.h)."""
    sizes = {}
    try:
        for index in sorted(n for n in os.listdir(cpu_dir) if n.startswith("index")):
            fields = {}
            for field in ("level", "type", "size"):
                with open(os.path.join(cpu_dir, index, field)) as f:
                    fields[field] = f.read().strip()
            size = fields["size"].upper()
            scale = {"K": 1 << 10, "M": 1 << 20}.get(size[-1:], 1)
            sizes[int(fields["level"]), fields["type"]] = int(size.rstrip("KM")) * scale
    except (OSError, ValueError):
        return {}
    return sizes


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
    caches = cache_bytes()
    for macro, cache in (("AOTC_L1D_BYTES", (1, "Data")), ("AOTC_L2_BYTES", (2, "Unified"))):
        if cache in caches:
            flags.append(f"-D{macro}={caches[cache]}")
    if sanitize:
        flags += ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all"]
    return flags


def compiler():
    return os.environ.get("CC", "cc")


def _run(cmd, cwd, what):
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        raise BuildError(f"{what} failed:\n{' '.join(cmd)}\n{result.stderr[-4000:]}")


def compile_object(out_dir, name, target, mode, sanitize=False, extra_flags=()):
    """<name>.c -> <name>.o, run in out_dir so the assembler finds the weights."""
    cmd = [compiler(), *c_flags(target, mode, sanitize), *extra_flags, "-I.", "-Wa,-I.", "-c",
           f"{name}.c", "-o", f"{name}.o"]
    _run(cmd, out_dir, f"compiling {name}.c")
    return os.path.join(out_dir, f"{name}.o")


def uses_engine(out_dir, name):
    """Whether <name>.c includes the engine (its runtime headers are listed in it)."""
    with open(os.path.join(out_dir, f"{name}.c")) as f:
        source = f.read()
    return any(f'"aotc_runtime/{header}"' in source for header in (*ENGINE_HEADERS, WHOLE_RUNTIME))


@functools.lru_cache(maxsize=None)
def _compiler_identity(cc):
    try:
        return subprocess.run([cc, "--version"], capture_output=True, text=True).stdout
    except OSError:
        return ""


def engine_object(cache_dir, target, mode, sanitize=False):
    """The engine compiled with the model's flags, cached in cache_dir under a hash of
    the compiler, the flags, the engine's header list and the runtime's headers."""
    flags = c_flags(target, mode, sanitize)
    runtime = resources.runtime_dir()
    key = hashlib.sha256("\0".join([compiler(), _compiler_identity(compiler()), *flags, *ENGINE_HEADERS]).encode())
    for header in sorted(os.listdir(runtime)):
        if header.endswith(".h"):
            with open(os.path.join(runtime, header), "rb") as f:
                key.update(header.encode() + f.read())
    path = os.path.join(cache_dir, f"aotc_engine-{key.hexdigest()[:20]}.o")
    if os.path.isfile(path):
        cache.touch(path)
        return path
    os.makedirs(cache_dir, exist_ok=True)
    # Parallel builds wait for the one compiling (tens of seconds) rather than repeat it.
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.isfile(path):
            with tempfile.TemporaryDirectory(prefix="aotc-engine-", dir=cache_dir) as tmp:
                with open(os.path.join(tmp, "engine.c"), "w") as f:
                    # _GNU_SOURCE as in the generated C: the pool's Linux calls (aotc_threads.h)
                    f.write("#define _GNU_SOURCE\n#define AOTC_ENGINE_DEFINE\n" + "".join(f'#include "{h}"\n' for h in ENGINE_HEADERS))
                _run([compiler(), *flags, "-ffunction-sections", f"-I{runtime}", "-c", "engine.c",
                      "-o", "engine.o"], tmp, "compiling the engine")
                os.replace(os.path.join(tmp, "engine.o"), path)   # atomic: readers see all or nothing
    return path


def build_library(out_dir, name, target, mode, sanitize=False, engine_cache=None):
    """Compile the model and link it into the shared library out_dir/lib<name>.so, which
    session.py opens through cffi (no wrapper to compile); returns its file name.
    engine_cache: a folder for the cached engine object (None: compiled into the model)."""
    objects = []
    if engine_cache is not None and uses_engine(out_dir, name):
        objects.append(engine_object(engine_cache, target, mode, sanitize))
    obj = compile_object(out_dir, name, target, mode, sanitize,
                         ["-DAOTC_ENGINE_EXTERN"] if objects else [])
    library = f"lib{name}.so"
    link = [compiler(), "-shared", "-Wl,--gc-sections", "-o", library, obj, *objects, "-lpthread", "-lm"]
    _run(link + (["-fsanitize=address,undefined"] if sanitize else []), out_dir, f"linking {library}")
    os.remove(obj)
    return library
