import numpy as np
import pytest
from onnx import helper

import aotc
from oracle import assert_matches_ort, make_model, random

FLOAT_OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
             "ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceLogSumExp"]
AXES_INPUT_OPSET = {"ReduceSum": 13}

# (shape, axes): single, multiple, negative, non-adjacent, all, inner and outer runs
CASES = [((3, 5, 7), [1]), ((3, 5, 7), [-1]), ((3, 5, 7), [0]), ((2, 3, 4, 5), [0, 2]),
         ((2, 3, 4, 5), [1, -1]), ((4, 1, 6), [1]), ((37,), [0]), ((2, 3, 33), [0, 1, 2]),
         ((2, 70, 9), [-2]), ((5, 1, 3, 2), [-4, 1, 3])]


def _node(op, axes, opset, keepdims, noop, inits):
    attrs = {"keepdims": keepdims}
    if noop is not None:
        attrs["noop_with_empty_axes"] = noop
    inputs = ["x"]
    if opset >= AXES_INPUT_OPSET.get(op, 18):
        if axes is not None:
            inits["axes"] = np.array(axes, np.int64)
            inputs.append("axes")
    elif axes is not None:
        attrs["axes"] = axes
    return helper.make_node(op, inputs, [f"y_{op}"], **attrs)


def _model(ops, shape, axes, opset, keepdims=1, dtype=np.float32, noop=None):
    """One model with one output per reduction in `ops`, all over the same input."""
    inits = {}
    nodes = [_node(op, axes, opset, keepdims, noop, inits) for op in ops]
    return make_model(nodes, [("x", dtype, shape)], [(f"y_{op}", dtype, None) for op in ops],
                      inits, opset=opset)


def _input(shape, dtype=np.float32):
    """Values near 1 keep ReduceProd in range; the signs exercise Max/Min/L1."""
    x = random(shape, dtype, seed=3, low=0.8, high=1.2)
    return x * np.where(random(shape, np.bool_, seed=5), 1, -1).astype(dtype)


def _check(ops, shape, axes, opset, keepdims=1, noop=None):
    m = _model(ops, shape, axes, opset, keepdims, noop=noop)
    assert_matches_ort(m, {"x": _input(shape)}, rtol=2e-5, atol=1e-5)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("keepdims", [0, 1])
def test_axes_as_attribute(case, keepdims):
    shape, axes = case
    _check(["ReduceSum"], shape, axes, 11, keepdims)
    _check(FLOAT_OPS[1:], shape, axes, 13, keepdims)


@pytest.mark.parametrize("case", CASES)
def test_axes_as_input(case):
    shape, axes = case
    _check(["ReduceSum"], shape, axes, 13)
    _check(FLOAT_OPS, shape, axes, 18)


@pytest.mark.parametrize("opset", [11, 13, 18])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_missing_axes_reduce_everything(opset, keepdims):
    _check(FLOAT_OPS, (3, 4, 5), None, opset, keepdims)


@pytest.mark.parametrize("noop", [0, 1])
def test_empty_axes_with_noop_flag(noop):
    _check(FLOAT_OPS, (3, 4, 5), [], 18, noop=noop)


def test_reduce_sum_axes_input_with_noop():
    _check(["ReduceSum"], (2, 3), [], 13, noop=1)


INT_OPS = {np.int64: ["ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1"],
           np.int32: ["ReduceMax", "ReduceMin", "ReduceProd", "ReduceMean", "ReduceSumSquare"]}


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
@pytest.mark.parametrize("case", [((4, 5, 6), [1]), ((4, 5, 6), [0, 2]), ((40, 3), [0]),
                                  ((3, 35), [-1])])
def test_integer_reductions(dtype, case):
    shape, axes = case
    x = random(shape, dtype, seed=4, low=-2, high=2)
    m = _model(["ReduceSum"], shape, axes, 11, dtype=dtype)
    assert_matches_ort(m, {"x": x})
    m = _model(INT_OPS[dtype], shape, axes, 13, dtype=dtype)
    assert_matches_ort(m, {"x": x})


def test_big_reduction_splits_work_and_matches():
    ops = ["ReduceMean", "ReduceMax"]
    m = _model(ops, (64, 128, 96), [-1], 13)
    x = random((64, 128, 96), seed=8)
    got = assert_matches_ort(m, {"x": x}, rtol=1e-5, atol=1e-6, threads=2)
    one = aotc.compile(m, threads=1).run({"x": x})
    for op in ops:
        np.testing.assert_array_equal(got[f"y_{op}"], one[f"y_{op}"])


def test_log_sum_exp_is_stable_for_large_values():
    m = _model(["ReduceLogSumExp"], (3, 8), [1], 13)
    assert_matches_ort(m, {"x": random((3, 8), low=80, high=120)})


def test_axes_must_be_constant():
    node = helper.make_node("ReduceMean", ["x", "axes"], ["y"])
    m = make_model([node], [("x", np.float32, (2, 3)), ("axes", np.int64, (1,))],
                   [("y", np.float32, None)], opset=18)
    with pytest.raises(aotc.AotcError, match="compile-time constant"):
        aotc.compile(m)


def test_out_of_range_axis_is_an_invalid_model():
    m = _model(["ReduceMax"], (2, 3), [2], 13)
    with pytest.raises(aotc.AotcError, match="out of range"):
        aotc.compile(m)


def test_shape_chain_folds_to_a_constant():
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("ReduceProd", ["s"], ["n"], keepdims=1),
             helper.make_node("Reshape", ["x", "n"], ["y"])]
    m = make_model(nodes, [("x", np.float32, (2, 3, 4))], [("y", np.float32, None)], opset=13)
    try:
        sess = aotc.compile(m)
    except aotc.AotcError as e:   # Shape/Reshape live in other modules
        pytest.skip(f"needs Shape and Reshape: {e}")
    assert sess.report["nodes_after"].get("ReduceProd", 0) == 0
    x = random((2, 3, 4))
    np.testing.assert_array_equal(sess.run({"x": x})["y"], x.reshape(-1))
