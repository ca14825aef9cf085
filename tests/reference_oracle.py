"""Test helper: compare aotc with the ONNX reference evaluator, the oracle of the ONNX
node suite, for operators or cases where onnxruntime is missing or departs from it."""
import numpy as np
from onnx.reference import ReferenceEvaluator

import aotc


def assert_matches_reference(model, feeds, rtol=1e-5, atol=1e-6, **compile_options):
    """Compile with aotc, run both, compare every output (dtype and shape exactly);
    values in float64 so 16-bit floats compare too."""
    got = aotc.compile(model, **compile_options).run(feeds)
    want = ReferenceEvaluator(model).run(None, feeds)
    assert len(got) == len(want)
    for (name, g), w in zip(got.items(), want):
        w = np.asarray(w)
        assert g.dtype == w.dtype, f"{name}: dtype {g.dtype} != {w.dtype}"
        assert g.shape == w.shape, f"{name}: shape {g.shape} != {w.shape}"
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol,
                                   err_msg=name)
    return got
