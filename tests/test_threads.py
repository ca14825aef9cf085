"""The thread pool (runtime_c/aotc_threads.h) on its own: tests/c/pool_stress.c runs
thousands of dispatches of every small size while the thread count changes and a
second caller shares the pool; every piece must run exactly once per dispatch, also
under ThreadSanitizer, and on the portable path (a mutex in place of atomics)."""
import os
import shutil
import subprocess

import pytest

from aotc import resources

CC = shutil.which(os.environ.get("CC", "cc"))
STRESS = os.path.join(os.path.dirname(__file__), "c", "pool_stress.c")


@pytest.mark.skipif(CC is None, reason="no C compiler")
@pytest.mark.parametrize("flags", [[], ["-DAOTC_POOL_PORTABLE"], ["-fsanitize=thread"],
                                   ["-DAOTC_POOL_PORTABLE", "-fsanitize=thread"],
                                   ["-fsanitize=address,undefined"]],
                         ids=["atomics", "portable", "tsan", "portable-tsan", "asan-ubsan"])
def test_every_piece_runs_once_per_dispatch(tmp_path, flags):
    exe = tmp_path / "pool_stress"
    build = subprocess.run([CC, "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-g",
                            f"-I{resources.runtime_dir()}", *flags, STRESS, "-o", str(exe),
                            "-lpthread"], capture_output=True, text=True)
    if build.returncode != 0 and any("sanitize" in f for f in flags):
        pytest.skip(f"this compiler cannot build {flags}: {build.stderr[-300:]}")
    assert build.returncode == 0, build.stderr
    env = dict(os.environ, TSAN_OPTIONS="halt_on_error=1", ASAN_OPTIONS="detect_leaks=1")
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr[-3000:]
