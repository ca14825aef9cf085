"""Build an aotc output folder with tests/c/harness.c and run it: under AddressSanitizer
and UBSan (any invalid access or undefined behaviour in the generated C fails), or with
another compiler, flags or CPU (a cross build run under an emulator) on given inputs;
and check that a model's C builds without a warning and runs clean under the sanitizers."""
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np

import aotc

HARNESS = Path(__file__).parent / "c" / "harness.c"
CC = shutil.which(os.environ.get("CC", "cc"))
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]


def build_harness(out_dir, name, cc=None, flags=(), exe="harness"):
    """tests/c/harness.c linked with the model's C in out_dir; returns the executable."""
    out_dir = Path(out_dir)
    cmd = [cc or CC, "-std=c99", *flags, "-I.", "-Wa,-I.",
           f"-DMODEL_HEADER=\"{name}.h\"", f"-DMODEL={name}", f"-DMODEL_UPPER={name.upper()}",
           str(HARNESS), f"{name}.c", "-o", exe, "-lpthread", "-lm"]
    build = subprocess.run(cmd, cwd=out_dir, capture_output=True, text=True)
    assert build.returncode == 0, " ".join(cmd) + "\n" + build.stderr
    return out_dir / exe


def run_sanitized(out_dir, name, extra_flags=()):
    """Returns the harness's stdout (a checksum line per output); asserts a clean run."""
    exe = build_harness(out_dir, name, flags=["-O1", "-g", *SANITIZE, *extra_flags])
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    run = subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0 and "runtime error" not in run.stderr, run.stdout + run.stderr
    return run.stdout


def assert_clean_c(tmp_path, model, name):
    """The model's generated C compiles under -Wall -Wextra -Werror and runs clean under
    AddressSanitizer and UBSan (tests/c/harness.c feeds it inputs)."""
    sess = aotc.compile(model, out_dir=tmp_path, name=name)
    run_sanitized(tmp_path, sess.name)
    build = subprocess.run([CC, "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-I.", "-Wa,-I.",
                            "-c", f"{name}.c", "-o", "warnings.o"], cwd=tmp_path, capture_output=True,
                           text=True)
    assert build.returncode == 0, build.stderr


def run_on_files(exe, inputs, outputs, threads=1, runner=()):
    """Run a harness on `inputs` (arrays in input order); returns the outputs as arrays
    shaped and typed like `outputs` (arrays or (dtype, shape) pairs)."""
    exe = Path(exe)
    in_path, out_path = exe.with_suffix(".in"), exe.with_suffix(".out")
    in_path.write_bytes(b"".join(np.ascontiguousarray(a).tobytes() for a in inputs))
    run = subprocess.run([*runner, str(exe), str(in_path), str(out_path), str(threads)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    data, got, offset = out_path.read_bytes(), [], 0
    for dtype, shape in outputs:
        count = int(np.prod(shape, dtype=np.int64))
        got.append(np.frombuffer(data, dtype, count, offset).reshape(shape))
        offset += count * np.dtype(dtype).itemsize
    assert offset == len(data)
    return got
