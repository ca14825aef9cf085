"""Test helpers for the index, rearrange and data-dependent operators: compile with
aotc, compare every output with onnxruntime, or with onnx.reference where
onnxruntime cannot run the model."""
import numpy as np
from onnx.reference import ReferenceEvaluator

import aotc
from oracle import make_model, run_ort

__all__ = ["check", "make_model", "reference"]


def reference(model, feeds, oracle="ort"):
    if oracle == "ort":
        try:
            return run_ort(model, feeds)
        except Exception:   # NOT_IMPLEMENTED, an opset or type onnxruntime lacks
            pass
    names = [o.name for o in model.graph.output]
    return dict(zip(names, ReferenceEvaluator(model).run(None, feeds)))


def check(model, feeds, oracle="ort", rtol=1e-6, atol=1e-6, **options):
    """Every output equal (floats within rtol/atol) in dtype, shape and value."""
    got = aotc.compile(model, **options).run(feeds)
    want = reference(model, feeds, oracle)
    assert sorted(got) == sorted(want)
    for name, w in want.items():
        g, w = got[name], np.asarray(w)
        assert g.dtype == w.dtype, f"{name}: dtype {g.dtype} != {w.dtype}"
        assert g.shape == w.shape, f"{name}: shape {g.shape} != {w.shape}"
        if w.dtype.kind == "f" or w.dtype.name == "bfloat16":
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol,
                                       err_msg=name)
        else:
            np.testing.assert_array_equal(g, w, err_msg=name)
    return got
