"""aotc.backend (the onnx.backend interface) and the conformance command over it."""
import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.backend.test.case.node import collect_testcases

import aotc
import aotc.backend as backend
from aotc.errors import Unsupported
from aotc import conformance

REPO_ROOT = Path(__file__).resolve().parent.parent


@functools.lru_cache(maxsize=None)
def onnx_node_cases():
    """ONNX's own node test cases by name (collect_testcases only works once per process)."""
    return {case.name: case for case in collect_testcases()}


def _assert_like_onnx_runner(outputs, expected, rtol, atol):
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", ["test_add_bcast", "test_add_uint8", "test_relu",
                                  "test_clip_default_inbounds_expanded", "test_where_example"])
def test_onnx_node_cases_pass(name):
    case = onnx_node_cases()[name]
    rep = backend.prepare(case.model, "CPU")
    for inputs, expected in case.data_sets:
        _assert_like_onnx_runner(rep.run(inputs), expected, case.rtol, case.atol)


def _dynamic_model():
    """y = relu(x + b), s = x * 2, over an x of free batch size."""
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    nodes = [helper.make_node("Add", ["x", "b"], ["t"]), helper.make_node("Relu", ["t"], ["y"]),
             helper.make_node("Mul", ["x", "two"], ["s"])]
    graph = helper.make_graph(
        nodes, "dynamic",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("s", TensorProto.FLOAT, ["n", 3]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])],
        [two])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_rep_compiles_once_per_set_of_input_shapes():
    rep = backend.prepare(_dynamic_model())
    assert rep.sessions == {}                      # shapes unknown: nothing compiled yet
    b = np.array([0.5, -1.0, 2.0], np.float32)
    for n in (2, 5, 2):
        x = np.linspace(-3, 3, 3 * n, dtype=np.float32).reshape(n, 3)
        s, y = rep.run([x, b])
        np.testing.assert_array_equal(s, x * 2)
        np.testing.assert_array_equal(y, np.maximum(x + b, 0))
    assert sorted(rep.sessions) == [(((2, 3), (3,)), ()), (((5, 3), (3,)), ())]
    first = rep.sessions[(((2, 3), (3,)), ())]
    rep.run([np.zeros((2, 3), np.float32), b])
    assert rep.sessions[(((2, 3), (3,)), ())] is first


def test_an_input_needed_at_compile_time_is_frozen_to_each_value_given():
    graph = helper.make_graph(
        [helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)], "reduce",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]),
         helper.make_tensor_value_info("axes", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    rep = backend.prepare(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for axis in (1, -1, 1):
        (y,) = rep.run([x, np.array([axis], np.int64)])
        np.testing.assert_array_equal(y, x.sum(axis=axis))
    assert rep.frozen == ["axes"]
    assert len(rep.sessions) == 2


def test_an_input_behind_a_computed_value_is_frozen_too():
    nodes = [helper.make_node("Neg", ["axes"], ["neg"]), helper.make_node("Neg", ["neg"], ["pos"]),
             helper.make_node("ReduceSum", ["x", "pos"], ["y"])]
    graph = helper.make_graph(
        nodes, "reduce",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("axes", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    rep = backend.prepare(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (y,) = rep.run([x, np.array([0], np.int64)])
    np.testing.assert_array_equal(y, x.sum(axis=0, keepdims=True))
    assert rep.frozen == ["axes"]


def test_a_value_computed_from_data_is_still_refused():
    nodes = [helper.make_node("ArgMax", ["x"], ["pos"], keepdims=0),
             helper.make_node("ReduceSum", ["x", "pos"], ["y"])]
    graph = helper.make_graph(
        nodes, "reduce",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    with pytest.raises(Unsupported, match="compile-time constant"):
        backend.prepare(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))


def test_outputs_come_in_graph_order_and_by_name_from_a_dict_feed():
    rep = backend.prepare(_dynamic_model())
    x, b = -np.ones((1, 3), np.float32), np.ones(3, np.float32)
    outputs = rep.run({"b": b, "x": x})
    assert outputs._fields == ("s", "y")
    np.testing.assert_array_equal(outputs[0], x * 2)
    np.testing.assert_array_equal(outputs["y"], np.zeros((1, 3), np.float32))


def test_prepare_compiles_a_static_model_and_fails_there():
    model = helper.make_model(helper.make_graph(
        [helper.make_node("NoSuchOp", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])]),
        opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(aotc.UnsupportedOperator, match=r"NoSuchOp \(opset 17\)"):
        backend.prepare(model)
    relu = onnx_node_cases()["test_relu"].model
    assert len(backend.prepare(relu).sessions) == 1


@pytest.mark.parametrize("value, message", [
    (np.ones((1, 3), np.complex64), "input 'x' has element type complex64, which aotc does not support"),
    (np.array([["a", "b", "c"]]), "input 'x' has element type <U1"),
    ([np.ones(3, np.float32)], "input 'x' is a sequence"),
    (None, "input 'x' is an empty optional"),
])
def test_unsupported_inputs_are_aotc_errors(value, message):
    rep = backend.prepare(_dynamic_model())
    with pytest.raises(aotc.Unsupported, match=re.escape(message)):
        rep.run([value, np.ones(3, np.float32)])


def test_a_model_declaring_an_unsupported_element_type_fails_in_prepare():
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.COMPLEX64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.COMPLEX64, [2])]),
        opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(aotc.Unsupported, match="COMPLEX64 of input 'x'"):
        backend.prepare(model)


@pytest.mark.parametrize("inputs, message", [
    ([np.ones((1, 3), np.float32)], "the model has 2 inputs, 1 were given"),
    ({"x": np.ones((1, 3), np.float32)}, "input 'b' is missing"),
    ({"x": np.ones((1, 3), np.float32), "b": np.ones(3, np.float32), "c": 1}, "unknown input 'c'"),
])
def test_wrong_inputs_are_refused(inputs, message):
    with pytest.raises(aotc.InvalidInput, match=message):
        backend.prepare(_dynamic_model()).run(inputs)


def test_devices_and_options():
    assert backend.supports_device("CPU")
    assert not backend.supports_device("CUDA")
    with pytest.raises(aotc.Unsupported, match="device 'CUDA'"):
        backend.prepare(_dynamic_model(), "CUDA")
    with pytest.raises(aotc.Unsupported, match="unknown prepare\\(\\) options bogus"):
        backend.prepare(_dynamic_model(), bogus=1)
    rep = backend.prepare(_dynamic_model(), opt_level="none", threads=2)
    rep.run([np.ones((1, 3), np.float32), np.ones(3, np.float32)])
    (session,) = rep.sessions.values()
    assert session.report["opt_level"] == "none" and session.threads == 2


def test_run_model_and_run_node():
    x, b = np.arange(6, dtype=np.float32).reshape(2, 3) - 3, np.ones(3, np.float32)
    s, y = backend.run_model(_dynamic_model(), [x, b])
    np.testing.assert_array_equal(y, np.maximum(x + 1, 0))
    (c,) = backend.run_node(helper.make_node("Sub", ["a", "b"], ["c"]), [x, b])
    np.testing.assert_array_equal(c, x - 1)
    (c,) = backend.run_node(helper.make_node("Less", ["a", "b"], ["c"]), [x, b],
                            outputs_info=[(np.bool_, (2, 3))])
    np.testing.assert_array_equal(c, x < 1)
    high = np.array(1.5, np.float32)           # min omitted: an empty input name
    (c,) = backend.run_node(helper.make_node("Clip", ["a", "", "high"], ["c"]), [x, high],
                            opset_version=13)
    np.testing.assert_array_equal(c, np.minimum(x, 1.5))


# ---- python -m aotc.conformance ------------------------------------------------------

def _shared_scripts_present():
    return (REPO_ROOT.parent / "shared" / "conformance" / "run_suite.py").is_file() or \
        bool(os.environ.get("AOTC_SHARED_DIR"))


@pytest.mark.skipif(not _shared_scripts_present(), reason="the shared conformance scripts are absent")
def test_conformance_command_reports_totals_and_writes_docs(tmp_path):
    results, docs, floor = tmp_path / "results.json", tmp_path / "operators.md", tmp_path / "floor.json"
    floor.write_text(json.dumps({"onnx": "1.23.2", "pass": 0}))
    command = [sys.executable, "-m", "aotc.conformance", "--data", str(tmp_path / "data"),
               "--filter", "^test_(add|relu)", "--out", str(results), "--write-docs",
               "--docs", str(docs), "--floor", str(floor), "--check-floor"]
    proc = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    # a filtered run never satisfies the floor, which is for the whole suite
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "the floor is for the whole suite" in proc.stdout

    cases = json.loads(results.read_text())["cases"]
    assert cases and all(re.search("^test_(add|relu)", name) for name in cases)
    counts = re.search(r"^pass (\d+)  fail (\d+)  error (\d+)  timeout (\d+)$", proc.stdout, re.M)
    assert counts, proc.stdout
    assert sum(int(n) for n in counts.groups()) == len(cases)
    assert int(counts.group(1)) == sum(c["status"] == "pass" for c in cases.values())
    for name in ("test_add", "test_add_bcast", "test_add_uint64", "test_relu"):
        assert cases[name]["status"] == "pass", cases[name]
    assert re.search(r"^Add\s+8\s+8\s+0\s+0\s+0", proc.stdout, re.M), proc.stdout

    text = docs.read_text()
    assert re.search(r"^\| Add \| [0-9, ]+ \| since \d+ \| 8/8 \| - \| .*float32.*\|$", text, re.M)
    assert re.search(r"^\| Acos \| [0-9, ]+ \| [^|]+ \| - \| - \|  \|$", text, re.M)   # no cases run


def _fake_results(tmp_path, statuses, onnx_version="1.23.2", in_data_dir=None):
    cases = {f"test_op_{i}": {"status": s, "op": "Op", "expanded": False, "message": f"Boom {i}"}
             for i, s in enumerate(statuses)}
    meta = {"onnx": onnx_version, "cases_in_data_dir": in_data_dir or len(cases), "partial": False}
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"meta": meta, "cases": cases}))
    return path


@pytest.mark.parametrize("statuses, floor_pass, code", [
    (["pass", "pass", "error"], 2, 0),
    (["pass", "fail", "error"], 2, 1),
    (["pass", "pass", "timeout"], 3, 1),
])
def test_check_floor_compares_the_pass_count(tmp_path, statuses, floor_pass, code, capsys):
    floor = tmp_path / "floor.json"
    floor.write_text(json.dumps({"onnx": "1.23.2", "pass": floor_pass}))
    out = _fake_results(tmp_path, statuses)
    assert conformance.main(["--report-only", "--out", str(out), "--floor", str(floor),
                             "--check-floor"]) == code
    assert ("FAILED" in capsys.readouterr().out) == bool(code)


def test_check_floor_refuses_another_onnx_version_and_partial_results(tmp_path, capsys):
    floor = tmp_path / "floor.json"
    floor.write_text(json.dumps({"onnx": "1.23.2", "pass": 1}))
    args = ["--report-only", "--floor", str(floor), "--check-floor", "--out"]
    assert conformance.main(args + [str(_fake_results(tmp_path, ["pass"], "1.99.0"))]) == 1
    assert "recorded for onnx 1.23.2" in capsys.readouterr().out
    assert conformance.main(args + [str(_fake_results(tmp_path, ["pass"], in_data_dir=5))]) == 1
    assert "cover 1 of 5 cases" in capsys.readouterr().out


def test_write_floor_then_docs_list_every_failing_case(tmp_path):
    out = _fake_results(tmp_path, ["pass", "fail", "error"])
    floor, docs = tmp_path / "floor.json", tmp_path / "operators.md"
    assert conformance.main(["--report-only", "--out", str(out), "--floor", str(floor),
                             "--write-floor", "--docs", str(docs), "--write-docs"]) == 0
    recorded = json.loads(floor.read_text())
    assert (recorded["pass"], recorded["cases"], recorded["counts"]["error"]) == (1, 3, 1)
    text = docs.read_text()
    assert "- test_op_1 (fail): `Boom 1`" in text and "- test_op_2 (error): `Boom 2`" in text
    assert "test_op_0 (" not in text
    assert re.search(r"^\| Op \| - \| 1/3 \| - \|$", text, re.M)    # not an ONNX operator


def test_the_recorded_floor_matches_the_pinned_onnx():
    floor = json.loads((REPO_ROOT / "conformance" / "floor.json").read_text())
    assert floor["onnx"] == "1.23.2" and 0 < floor["pass"] <= floor["cases"]
