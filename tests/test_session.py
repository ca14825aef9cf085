"""Session: the run forms, input checks before anything runs, threads, reloading."""
import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from onnx import helper

import aotc
from oracle import make_model, random


def _two_inputs():
    nodes = [helper.make_node("Mul", ["a", "b"], ["m"]), helper.make_node("Tanh", ["m"], ["y"]),
             helper.make_node("Add", ["a", "b"], ["s"])]
    return make_model(nodes, [("a", np.float32, (4, 8)), ("b", np.float32, (8,))],
                      [("y", np.float32, (4, 8)), ("s", np.float32, (4, 8))])


def _one_input(shape=(64, 256)):
    return make_model([helper.make_node("Sigmoid", ["x"], ["y"])], [("x", np.float32, shape)],
                      [("y", np.float32, shape)])


@pytest.fixture(scope="module")
def two():
    return aotc.compile(_two_inputs())


def test_run_with_one_array_returns_the_first_output():
    sess = aotc.compile(_one_input())
    x = random((64, 256))
    np.testing.assert_allclose(sess.run(x), 1 / (1 + np.exp(-x)), rtol=1e-6)


def test_run_with_a_dict_returns_every_output_by_name(two):
    a, b = random((4, 8)), random((8,), seed=1)
    out = two.run({"a": a, "b": b})
    assert list(out) == ["y", "s"]
    np.testing.assert_allclose(out["y"], np.tanh(a * b), rtol=1e-6)
    np.testing.assert_array_equal(out["s"], a + b)


def test_outputs_past_4_kib_start_on_a_64_byte_boundary():
    # numpy alone aligns to 16 bytes: the tiles' vector stores would straddle cache lines
    for shape in [(1, 1025), (3, 1000), (64, 256)]:
        sess = aotc.compile(_one_input(shape))
        for seed in range(4):
            y = sess.run(random(shape, seed=seed))
            assert y.ctypes.data % 64 == 0 and y.flags.c_contiguous and y.flags.writeable


def test_outputs_are_the_callers_own(two):
    kept = []
    for seed in range(8):
        a, b = random((4, 8), seed=seed), random((8,), seed=seed + 1)
        out = two.run({"a": a, "b": b})
        assert all(r.flags.c_contiguous and r.flags.writeable for r in out.values())
        kept.append((a + b, out["s"]))
    for want, got in kept:   # no later run wrote into an earlier run's outputs
        np.testing.assert_array_equal(got, want)


def test_inputs_and_outputs_describe_the_model(two):
    assert [(t.name, t.dtype, t.shape) for t in two.inputs] == [
        ("a", np.float32, (4, 8)), ("b", np.float32, (8,))]
    assert [t.name for t in two.outputs] == ["y", "s"]


@pytest.mark.parametrize("feed, message", [
    ({"a": np.zeros((4, 8), np.float32)}, "input 'b' is missing"),
    ({"a": np.zeros((4, 8), np.float32), "b": np.zeros(8, np.float32), "c": 1}, "unknown input 'c'"),
    ({"a": np.zeros((4, 8), np.float64), "b": np.zeros(8, np.float32)}, "element type float64"),
    ({"a": np.zeros((4, 9), np.float32), "b": np.zeros(8, np.float32)}, "shape [4, 9]"),
    ({"a": np.zeros((4, 8, 1), np.float32), "b": np.zeros(8, np.float32)}, "shape [4, 8, 1]"),
])
def test_bad_inputs_are_refused_before_running(two, feed, message):
    with pytest.raises(aotc.InvalidInput, match=message.replace("[", r"\[").replace("]", r"\]")):
        two.run(feed)


def test_a_single_array_for_a_two_input_model_is_refused(two):
    with pytest.raises(aotc.InvalidInput, match="pass a dict"):
        two.run(np.zeros((4, 8), np.float32))


def test_non_contiguous_and_read_only_inputs_are_accepted_and_never_modified(two):
    a = random((8, 4)).T                 # a transposed view: not C-contiguous
    b = random((8,), seed=2)
    b.setflags(write=False)
    a_before, b_before = a.copy(), b.copy()
    out = two.run({"a": a, "b": b})
    np.testing.assert_array_equal(out["s"], a_before + b_before)
    np.testing.assert_array_equal(a, a_before)
    np.testing.assert_array_equal(b, b_before)


def test_concurrent_runs_give_the_sequential_results():
    sess = aotc.compile(_two_inputs(), threads=2)
    feeds = [{"a": random((4, 8), seed=i), "b": random((8,), seed=100 + i)} for i in range(8)]
    expected = [sess.run(f) for f in feeds]
    failures = []

    def worker(k):
        for _ in range(50):
            got = sess.run(feeds[k])
            if not all(np.array_equal(got[n], expected[k][n]) for n in got):
                failures.append(k)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_thread_count_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("AOTC_NUM_THREADS", "1")
    assert aotc.compile(_one_input()).threads == 1
    monkeypatch.delenv("AOTC_NUM_THREADS")
    assert aotc.compile(_one_input()).threads == (os.cpu_count() or 1)
    assert aotc.compile(_one_input(), threads=2).threads == 2


def test_report_has_the_documented_facts(two):
    for key in ("passes", "nodes_before", "nodes_after", "workspace_bytes", "intermediate_bytes",
                "mode", "target", "opt_level"):
        assert key in two.report
    assert two.report["mode"] == "fast" and two.report["opt_level"] == "all"


def test_load_reopens_an_output_folder(tmp_path):
    aotc.compile(_two_inputs(), out_dir=tmp_path / "out")
    sess = aotc.load(tmp_path / "out")
    a, b = random((4, 8)), random((8,))
    np.testing.assert_array_equal(sess.run({"a": a, "b": b})["s"], a + b)


def _unary(op, shape):
    return make_model([helper.make_node(op, ["x"], ["y"])], [("x", np.float32, shape)],
                      [("y", np.float32, shape)])


def test_a_model_compiled_again_into_a_folder_runs_its_own_code(tmp_path):
    """The loader hands back the library it opened before by the same path: a second
    model compiled into the folder (same name, same library path) ran the first one's
    code on its own buffers."""
    first = aotc.compile(_unary("Relu", (3,)), out_dir=tmp_path / "out", name="m")
    second = aotc.compile(_unary("Neg", (64, 256)), out_dir=tmp_path / "out", name="m")
    small, large = random((3,)), random((64, 256))
    np.testing.assert_array_equal(second.run(large), -large)
    np.testing.assert_array_equal(first.run(small), np.maximum(small, 0))
    np.testing.assert_array_equal(aotc.load(tmp_path / "out").run(large), -large)


def test_a_folder_from_an_earlier_aotc_is_refused_by_name(tmp_path):
    """Folders built before the shared library (a cffi extension module, no "library" in
    the manifest) get an aotc error saying to compile again, not a KeyError."""
    out = tmp_path / "out"
    aotc.compile(_one_input((3,)), out_dir=out)
    manifest = json.loads((out / "manifest.json").read_text())
    del manifest["library"]
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(aotc.AotcError, match="earlier aotc"):
        aotc.load(out)


def test_the_output_folder_imports_without_aotc(tmp_path):
    out = tmp_path / "out"
    aotc.compile(_one_input((3,)), out_dir=out, name="standalone")
    script = ("import sys; sys.modules['aotc'] = None; sys.path.insert(0, sys.argv[1]);"
              "import numpy as np, standalone;"
              "s = standalone.load(threads=1);"
              "print(s.run(np.zeros(3, np.float32)).tolist())")
    result = subprocess.run([sys.executable, "-c", script, str(out)], capture_output=True, text=True,
                            cwd=tmp_path, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[0.5, 0.5, 0.5]"


def test_a_repeated_compile_comes_from_the_cache():
    a = aotc.compile(_one_input((5,)))
    b = aotc.compile(_one_input((5,)))
    assert a.out_dir == b.out_dir
    c = aotc.compile(_one_input((6,)))
    assert c.out_dir != a.out_dir


def test_exact_mode_names_every_operator_without_an_exact_kernel():
    # libm's sin and cosh differ between machines; float64 has no exact exp
    nodes = [helper.make_node("Sin", ["x"], ["s"]), helper.make_node("Cosh", ["s"], ["t"]),
             helper.make_node("Exp", ["d"], ["e"]), helper.make_node("Greater", ["t", "x"], ["y"])]
    model = make_model(nodes, [("x", np.float32, (3,)), ("d", np.float64, (3,))],
                       [("y", np.bool_, (3,)), ("e", np.float64, (3,))])
    with pytest.raises(aotc.ExactModeUnavailable) as e:
        aotc.compile(model, mode="exact")
    assert e.value.operators == ["Cosh", "Exp", "Sin"]
