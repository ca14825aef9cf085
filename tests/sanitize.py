"""Build an aotc output folder with tests/c/harness.c under AddressSanitizer and UBSan
and run it: any invalid access or undefined behaviour in the generated C fails."""
import os
import shutil
import subprocess
from pathlib import Path

HARNESS = Path(__file__).parent / "c" / "harness.c"
CC = shutil.which(os.environ.get("CC", "cc"))
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]


def run_sanitized(out_dir, name, extra_flags=()):
    """Returns the harness's stdout (a checksum line per output); asserts a clean run."""
    out_dir = Path(out_dir)
    cmd = [CC, "-std=c99", "-O1", "-g", *SANITIZE, *extra_flags, "-I.", "-Wa,-I.",
           f"-DMODEL_HEADER=\"{name}.h\"", f"-DMODEL={name}", f"-DMODEL_UPPER={name.upper()}", str(HARNESS), f"{name}.c",
           "-o", "harness", "-lpthread", "-lm"]
    build = subprocess.run(cmd, cwd=out_dir, capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    run = subprocess.run([str(out_dir / "harness")], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0 and "runtime error" not in run.stderr, run.stdout + run.stderr
    return run.stdout
