"""The compile cache under interruption and contention: a compile killed part way never
leaves an entry that later loads broken, and processes compiling one model at once all
succeed. Each test uses a cache folder of its own."""
import os
import random
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

import aotc
from aotc import cache as cache_module, compiler
from oracle import make_model

ROOT = Path(__file__).resolve().parent.parent
X = np.linspace(-2, 2, 4 * 16, dtype=np.float32).reshape(4, 16)
COMPILE_AND_RUN = """
import sys, numpy as np, aotc
sess = aotc.compile(sys.argv[1], threads=1)
x = np.linspace(-2, 2, 64, dtype=np.float32).reshape(4, 16)
print(repr(sess.run(x).tolist()))
"""


def _model(tmp_path):
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Tanh", ["h"], ["t"]),
             helper.make_node("Add", ["t", "x"], ["y"])]
    w = np.cos(np.arange(256, dtype=np.float32)).reshape(16, 16)
    path = tmp_path / "model.onnx"
    onnx.save(make_model(nodes, [("x", np.float32, (4, 16))], [("y", np.float32, (4, 16))], {"w": w}), path)
    return path, np.tanh(X @ w) + X


@pytest.fixture
def slow_cc(tmp_path):
    """A C compiler that, while AOTC_TEST_CC_MARKER is set, leaves a marker and waits
    before compiling: a window in which the build can be killed. Its path is part of the
    cache key, so the in-process compile must use it too."""
    script = tmp_path / "slow-cc"
    real = os.environ.get("CC", "cc")
    script.write_text('#!/bin/sh\nif [ -n "$AOTC_TEST_CC_MARKER" ]; then\n'
                      '  touch "$AOTC_TEST_CC_MARKER.$$"\n  sleep "${AOTC_TEST_CC_SLEEP:-60}"\nfi\n'
                      f'exec {real} "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def _start(model_path, cache, cc=None, **env_extra):
    env = dict(os.environ, AOTC_CACHE_DIR=str(cache), AOTC_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]), **env_extra)
    if cc is not None:
        env["CC"] = str(cc)
    return subprocess.Popen([sys.executable, "-c", COMPILE_AND_RUN, str(model_path)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _kill(proc):
    """SIGKILL the process we started and the compiler it runs (its own session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.communicate(timeout=60)


def _wait_for(predicate, timeout, proc):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        if proc.poll() is not None:
            raise AssertionError(f"the compile ended early: {proc.communicate()[1][-2000:]}")
        time.sleep(0.05)
    return False


def _assert_every_entry_loads(cache, expected):
    """Whatever the cache holds with a manifest must load and compute the right thing
    (a compile killed before it made the cache folder leaves nothing to check)."""
    if not Path(cache).is_dir():
        return
    for entry in Path(cache).iterdir():
        if (entry / "manifest.json").is_file():
            sess = aotc.load(entry, threads=1)
            np.testing.assert_allclose(sess.run(X), expected, rtol=1e-5, atol=1e-6)


def _compile_here(monkeypatch, model_path, cache, cc=None):
    # The subprocesses hashed aotc's sources just now; hash them afresh here too.
    monkeypatch.setattr(compiler, "_SOURCE_DIGEST", None)
    monkeypatch.setenv("AOTC_CACHE_DIR", str(cache))
    monkeypatch.delenv("AOTC_TEST_CC_MARKER", raising=False)
    if cc is not None:
        monkeypatch.setenv("CC", str(cc))
    return aotc.compile(model_path, threads=1)


def test_a_compile_killed_in_the_c_build_leaves_no_entry(tmp_path, monkeypatch, slow_cc):
    model_path, expected = _model(tmp_path)
    cache, marker = tmp_path / "cache", tmp_path / "marker"
    proc = _start(model_path, cache, slow_cc, AOTC_TEST_CC_MARKER=str(marker))
    try:
        assert _wait_for(lambda: list(tmp_path.glob("marker.*")), 120, proc), "the C build never started"
    finally:
        _kill(proc)
    assert proc.returncode == -signal.SIGKILL
    leftovers = [p for p in cache.iterdir() if p.name != cache_module.OBJECTS_DIR]
    assert leftovers and all(p.name.startswith(".") for p in leftovers), leftovers
    assert not any((p / "manifest.json").exists() for p in leftovers)

    sess = _compile_here(monkeypatch, model_path, cache, slow_cc)
    assert Path(sess.out_dir).parent == cache and not Path(sess.out_dir).name.startswith(".")
    np.testing.assert_allclose(sess.run(X), expected, rtol=1e-5, atol=1e-6)
    _assert_every_entry_loads(cache, expected)


def test_compiles_killed_at_random_moments_never_leave_a_broken_entry(tmp_path, monkeypatch):
    model_path, expected = _model(tmp_path)
    cache = tmp_path / "cache"
    rng = random.Random(11)
    for _ in range(6):
        proc = _start(model_path, cache)
        time.sleep(rng.uniform(0.2, 2.5))
        finished = proc.poll() is not None
        _kill(proc)
        _assert_every_entry_loads(cache, expected)
        if finished:
            break
    sess = _compile_here(monkeypatch, model_path, cache)
    np.testing.assert_allclose(sess.run(X), expected, rtol=1e-5, atol=1e-6)
    _assert_every_entry_loads(cache, expected)


@pytest.mark.parametrize("processes", [2, 4])
def test_processes_compiling_one_model_at_once_all_succeed(tmp_path, monkeypatch, slow_cc, processes):
    model_path, expected = _model(tmp_path)
    cache, marker = tmp_path / "cache", tmp_path / "marker"
    # Every process holds in its C build until all have reached it: the builds overlap.
    procs = [_start(model_path, cache, slow_cc, AOTC_TEST_CC_MARKER=str(marker), AOTC_TEST_CC_SLEEP="3")
             for _ in range(processes)]
    results = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=600)
            results.append((proc.returncode, out, err))
    finally:
        for proc in procs:
            if proc.poll() is None:
                _kill(proc)
    for code, out, err in results:
        assert code == 0, err[-3000:]
        np.testing.assert_allclose(np.array(eval(out)), expected, rtol=1e-5, atol=1e-6)  # noqa: S307
    assert len(list(tmp_path.glob("marker.*"))) >= 2 * processes    # the model compiled and linked, each
    entries = [p for p in cache.iterdir() if not p.name.startswith(".") and p.name != cache_module.OBJECTS_DIR]
    assert len(entries) == 1
    assert [p for p in cache.iterdir() if p.name.startswith(".") and p.is_dir()] == []   # temporary folders removed
    # The entry is the one this process finds too (unless aotc's sources changed meanwhile).
    sess = _compile_here(monkeypatch, model_path, cache, slow_cc)
    np.testing.assert_allclose(sess.run(X), expected, rtol=1e-5, atol=1e-6)
    _assert_every_entry_loads(cache, expected)


def test_the_engine_is_compiled_once_and_stays_inside_each_library(tmp_path, monkeypatch):
    """Models with a matrix product link one cached object of the engine per compiler
    and flags; its symbols are not exported, so libraries built with other flags (exact
    mode, another target) loaded in one process never share them."""
    import ctypes
    model_path, expected = _model(tmp_path)
    cache = tmp_path / "cache"
    sessions = [_compile_here(monkeypatch, model_path, cache)]
    other = tmp_path / "other.onnx"
    w = np.eye(16, dtype=np.float32)[::-1]
    onnx.save(make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [("x", np.float32, (4, 16))],
                         [("y", np.float32, (4, 16))], {"w": w}), other)
    sessions.append(aotc.compile(other, threads=1))
    sessions.append(aotc.compile(other, threads=1, mode="exact"))
    np.testing.assert_allclose(sessions[0].run(X), expected, rtol=1e-5, atol=1e-6)
    for sess in sessions[1:]:
        np.testing.assert_array_equal(sess.run(X), X @ w)
    objects = sorted(p.name for p in (cache / cache_module.OBJECTS_DIR).glob("*.o"))
    assert len(objects) == 2 and all(n.startswith("aotc_engine-") for n in objects)
    for sess in sessions:
        library = ctypes.CDLL(str(next(Path(sess.out_dir).glob("*.so"))))
        assert not hasattr(library, "aotc_sgemm") and not hasattr(library, "aotc_sgemm_tile_1_")
