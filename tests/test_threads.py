"""The thread pool (runtime_c/aotc_threads.h) on its own: tests/c/pool_stress.c runs
thousands of dispatches of every small size while the thread count changes and a
second caller shares the pool; every piece must run exactly once per dispatch, the
caller's pieces before the workers' (so each thread keeps its end of every step), also
under ThreadSanitizer, on the portable path (a mutex in place of atomics) and without
the Linux calls that move a worker off the caller's core (tests/c/pool_leave_cpu.c
checks that move)."""
import os
import shutil
import subprocess
import sys

import pytest

from aotc import resources

CC = shutil.which(os.environ.get("CC", "cc"))
STRESS = os.path.join(os.path.dirname(__file__), "c", "pool_stress.c")
LEAVE_CPU = os.path.join(os.path.dirname(__file__), "c", "pool_leave_cpu.c")
FAR = os.path.join(os.path.dirname(__file__), "c", "pool_far.c")


def build_and_run(tmp_path, source, flags):
    """Build source with the runtime headers (skip if this compiler lacks a sanitizer it
    asks for) and run it; its stdout."""
    exe = tmp_path / "program"
    build = subprocess.run([CC, "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-g",
                            f"-I{resources.runtime_dir()}", *flags, source, "-o", str(exe),
                            "-lpthread"], capture_output=True, text=True)
    if build.returncode != 0 and any("sanitize" in f for f in flags):
        pytest.skip(f"this compiler cannot build {flags}: {build.stderr[-300:]}")
    assert build.returncode == 0, build.stderr
    env = dict(os.environ, TSAN_OPTIONS="halt_on_error=1", ASAN_OPTIONS="detect_leaks=1")
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    return run.stdout.strip()


@pytest.mark.skipif(CC is None, reason="no C compiler")
@pytest.mark.parametrize("flags", [[], ["-DAOTC_POOL_PORTABLE"], ["-fsanitize=thread"],
                                   ["-DAOTC_POOL_PORTABLE", "-fsanitize=thread"],
                                   ["-fsanitize=address,undefined"], ["-DWITHOUT_GNU_SOURCE"]],
                         ids=["atomics", "portable", "tsan", "portable-tsan", "asan-ubsan",
                              "no-affinity"])
def test_every_piece_runs_once_per_dispatch(tmp_path, flags):
    assert build_and_run(tmp_path, STRESS, flags) == "ok"


@pytest.mark.skipif(CC is None, reason="no C compiler")
@pytest.mark.skipif(not sys.platform.startswith("linux") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs Linux and two allowed cores")
def test_a_worker_leaves_the_callers_core_and_keeps_its_mask(tmp_path):
    assert build_and_run(tmp_path, LEAVE_CPU, []) == "ok"


@pytest.mark.skipif(CC is None, reason="no C compiler")
@pytest.mark.parametrize("flags", [[], ["-DAOTC_POOL_PORTABLE"], ["-fsanitize=thread"], ["-DAOTC_POOL_FAR=1"]],
                         ids=["atomics", "portable", "tsan", "fixed"])
def test_the_far_probe_answers_without_hanging(tmp_path, flags):
    """aotc_pool_far (whether the pool's threads are on different dies, measured by a
    cache line's round trips) answers 0 or 1 with a worker asleep, with one thread
    running both ends of the probe and from inside a dispatch; fixed by its macro."""
    assert build_and_run(tmp_path, FAR, flags) == "ok"

