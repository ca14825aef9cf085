"""Test helpers: build small ONNX models, compile them with aotc and compare every output
with an oracle: onnxruntime, or onnx.reference (the ONNX node suite's own oracle) where
onnxruntime cannot run the model or a test asks for it."""
import numpy as np
import onnxruntime as ort
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import aotc

ORACLES = ("onnxruntime", "onnx.reference")


def tensor_info(name, dtype, shape):
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), shape)


def make_model(nodes, inputs, outputs, initializers=None, opset=17, name="test"):
    """nodes: NodeProtos; inputs/outputs: (name, dtype, shape) tuples (shape None for
    outputs lets onnx leave it unset); initializers: {name: array}."""
    graph = helper.make_graph(
        nodes, name,
        [tensor_info(*i) for i in inputs],
        [tensor_info(*o) for o in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in (initializers or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 10)
    return model


def run_ort(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, feeds)))


def run_reference(model, feeds):
    names = [o.name for o in model.graph.output]
    return dict(zip(names, ReferenceEvaluator(model).run(None, feeds)))


def reference(model, feeds, oracle="onnxruntime"):
    """(outputs by name, name of the oracle that gave them): onnxruntime's, or
    onnx.reference's when onnxruntime cannot run the model or `oracle` asks for it."""
    if oracle not in ORACLES:
        raise ValueError(f"oracle {oracle!r} is not one of {ORACLES}")
    if oracle == "onnxruntime":
        try:
            return run_ort(model, feeds), "onnxruntime"
        except Exception:   # NOT_IMPLEMENTED, an opset or a type onnxruntime lacks
            pass
    return run_reference(model, feeds), "onnx.reference"


def _is_float(dtype):
    # the ml_dtypes floats (bfloat16, float8_*, float4_*) have kind "V"
    return dtype.kind == "f" or dtype.name.startswith(("bfloat16", "float8", "float4"))


def assert_outputs_match(got, want, rtol=1e-5, atol=1e-6, oracle=""):
    """Same output names in the same order; every output's dtype and shape exactly; real
    floats within rtol/atol compared in float64 (NaN where NaN), complex within
    tolerance, everything else equal."""
    assert list(got) == list(want), f"outputs {list(got)} != {list(want)} ({oracle})"
    for name, w in want.items():
        g, w = got[name], np.asarray(w)
        where = f"{name} ({oracle})" if oracle else name
        assert g.dtype == w.dtype, f"{where}: dtype {g.dtype} != {w.dtype}"
        assert g.shape == w.shape, f"{where}: shape {g.shape} != {w.shape}"
        if _is_float(w.dtype):
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol,
                                       err_msg=where)
        elif w.dtype.kind == "c":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=where)
        else:
            np.testing.assert_array_equal(g, w, err_msg=where)


def check(model, feeds, oracle="onnxruntime", rtol=1e-5, atol=1e-6, **compile_options):
    """Compile with aotc, run, and compare every output with `reference(model, feeds,
    oracle)` (see assert_outputs_match); returns aotc's outputs."""
    got = aotc.compile(model, **compile_options).run(feeds)
    want, used = reference(model, feeds, oracle)
    assert_outputs_match(got, want, rtol, atol, used)
    return got


def check_reference(model, feeds, rtol=1e-5, atol=1e-6, **compile_options):
    """check against onnx.reference: for operators or cases where onnxruntime lacks the
    operator or departs from the ONNX definition."""
    return check(model, feeds, "onnx.reference", rtol, atol, **compile_options)


def assert_matches_ort(model, feeds, rtol=1e-5, atol=1e-6, **compile_options):
    """Like check, but onnxruntime only (no fallback): the model must run there."""
    got = aotc.compile(model, **compile_options).run(feeds)
    assert_outputs_match(got, run_ort(model, feeds), rtol, atol, "onnxruntime")
    return got


def relative_error(got, want):
    """max |got - want| / max |want| (the accuracy measure of the issues)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    scale = max(float(np.max(np.abs(want))) if want.size else 0.0, 1e-30)
    return float(np.max(np.abs(got - want))) / scale if want.size else 0.0


def random(shape, dtype=np.float32, seed=0, low=-2.0, high=2.0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.uniform(low, high, size=shape).astype(dtype)
    if np.dtype(dtype) == np.bool_:
        return rng.random(size=shape) < 0.5
    return rng.integers(int(low), int(high) + 1, size=shape).astype(dtype)
