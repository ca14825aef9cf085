"""Test helpers: build small ONNX models and compare aotc with onnxruntime."""
import numpy as np
import onnxruntime as ort
from onnx import helper, numpy_helper

import aotc


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


def relative_error(got, want):
    """max |got - want| / max |want| (the accuracy measure of the issues)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    scale = max(float(np.max(np.abs(want))) if want.size else 0.0, 1e-30)
    return float(np.max(np.abs(got - want))) / scale if want.size else 0.0


def assert_matches_ort(model, feeds, rtol=1e-5, atol=1e-6, **compile_options):
    """Compile with aotc, run both, compare every output (dtype and shape exactly)."""
    sess = aotc.compile(model, **compile_options)
    got = sess.run(feeds)
    want = run_ort(model, feeds)
    assert list(got) == list(want)
    for name in want:
        g, w = got[name], want[name]
        assert g.dtype == w.dtype, f"{name}: dtype {g.dtype} != {w.dtype}"
        assert g.shape == w.shape, f"{name}: shape {g.shape} != {w.shape}"
        if w.dtype.kind in "fc":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=name)
        else:
            np.testing.assert_array_equal(g, w, err_msg=name)
    return got


def random(shape, dtype=np.float32, seed=0, low=-2.0, high=2.0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.uniform(low, high, size=shape).astype(dtype)
    if np.dtype(dtype) == np.bool_:
        return rng.random(size=shape) < 0.5
    return rng.integers(int(low), int(high) + 1, size=shape).astype(dtype)
