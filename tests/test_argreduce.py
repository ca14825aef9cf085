"""ArgMax, ArgMin, Hardmax and TopK."""
import ml_dtypes
import numpy as np
import pytest
from onnx import helper

import aotc
from oracle import check, make_model, random
from sanitize import assert_clean_c

SHAPE = (3, 7, 33)


def _arg_model(dtype, shape, opset=13):
    """ArgMax and ArgMin over every axis, both keepdims and both tie rules: one model."""
    nodes, outputs = [], []
    for op in ("ArgMax", "ArgMin"):
        for axis in range(-len(shape), len(shape)):
            for keepdims in (0, 1):
                for last in (0, 1):
                    out = f"{op}_{axis + len(shape)}_{keepdims}_{last}"
                    nodes.append(helper.make_node(op, ["x"], [out], axis=axis, keepdims=keepdims,
                                                  select_last_index=last))
                    outputs.append((out, np.int64, None))
    return make_model(nodes, [("x", dtype, shape)], outputs, opset=opset)


def _with_ties(dtype, shape, seed=0):
    """Few distinct values, so every line has ties."""
    return random(shape, dtype, seed=seed, low=0, high=3).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.int32, np.uint8, np.float64])
def test_arg_reductions_match_onnxruntime(dtype):
    x = np.round(random(SHAPE, np.float64, seed=3, low=0, high=3)).astype(dtype)
    check(_arg_model(dtype, SHAPE), {"x": x})


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.int8, np.uint64])
def test_arg_reductions_of_other_types_match_the_reference(dtype):
    check(_arg_model(dtype, (4, 5)), {"x": _with_ties(dtype, (4, 5), seed=1)}, oracle="onnx.reference")


def test_nan_is_the_extreme_of_both():
    x = random((4, 6), seed=2)
    x[0, 2] = x[0, 4] = x[2, 5] = x[3, 0] = np.nan
    check(_arg_model(np.float32, (4, 6)), {"x": x}, oracle="onnx.reference")


def test_arg_over_an_empty_axis_is_invalid():
    m = make_model([helper.make_node("ArgMax", ["x"], ["y"], axis=1)], [("x", np.float32, (2, 0))],
                   [("y", np.int64, None)], opset=13)
    with pytest.raises(aotc.AotcError, match="no elements"):
        aotc.compile(m, shapes={"x": (2, 0)})


# ---- Hardmax ------------------------------------------------------------------------

@pytest.mark.parametrize("opset", [11, 13])
def test_hardmax_every_axis(opset):
    """Before opset 13 Hardmax flattens the dims from the axis on; from 13 it is per axis."""
    nodes = [helper.make_node("Hardmax", ["x"], [f"y{a}"], axis=a) for a in (-3, 0, 1, 2)]
    nodes.append(helper.make_node("Hardmax", ["x"], ["ydefault"]))
    outputs = [(n.output[0], np.float32, None) for n in nodes]
    m = make_model(nodes, [("x", np.float32, SHAPE)], outputs, opset=opset)
    check(m, {"x": _with_ties(np.float32, SHAPE, seed=4)})


@pytest.mark.parametrize("dtype", [np.float64, np.float16, ml_dtypes.bfloat16])
def test_hardmax_types(dtype):
    m = make_model([helper.make_node("Hardmax", ["x"], ["y"], axis=1)], [("x", dtype, (3, 4, 5))],
                   [("y", dtype, None)], opset=13)
    check(m, {"x": _with_ties(dtype, (3, 4, 5), seed=5)}, oracle="onnx.reference")


# ---- TopK ---------------------------------------------------------------------------

def _topk_model(dtype, shape, ks, opset=11):
    """TopK over every axis, largest and smallest, one k per axis: one model."""
    nodes, outputs, inits = [], [], {}
    for axis, k in enumerate(ks):
        inits[f"k{axis}"] = np.array([k], np.int64)
        for largest in (0, 1):
            v, i = f"v{axis}_{largest}", f"i{axis}_{largest}"
            nodes.append(helper.make_node("TopK", ["x", f"k{axis}"], [v, i], axis=axis - len(shape),
                                          largest=largest))
            outputs += [(v, dtype, None), (i, np.int64, None)]
    return make_model(nodes, [("x", dtype, shape)], outputs, inits, opset=opset)


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.int32, np.float64])
def test_topk_matches_onnxruntime(dtype):
    x = _with_ties(dtype, SHAPE, seed=6) if dtype != np.float32 else random(SHAPE, seed=6)
    check(_topk_model(dtype, SHAPE, [2, 7, 5]), {"x": x})


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.uint64, np.int8, np.uint16])
def test_topk_other_types_match_the_reference(dtype):
    check(_topk_model(dtype, (5, 9), [5, 9]), {"x": _with_ties(dtype, (5, 9), seed=7)},
          oracle="onnx.reference")


def test_topk_ties_zeros_and_nan_follow_the_reference():
    """Equal values in increasing position (-0 equals +0); NaN above +inf."""
    x = np.array([[1, np.nan, -0.0, 0.0, np.inf, 1, np.nan, -np.inf],
                  [0.0, -0.0, 0.0, -0.0, 2, 2, -1, -1]], np.float32)
    check(_topk_model(np.float32, x.shape, [2, 8]), {"x": x}, oracle="onnx.reference")


def test_topk_k_as_attribute_and_zero():
    nodes = [helper.make_node("TopK", ["x"], ["v", "i"], axis=1, k=3),
             helper.make_node("Identity", ["x"], ["x_copy"])]
    m = make_model(nodes, [("x", np.float32, (4, 10))],
                   [("v", np.float32, None), ("i", np.int64, None), ("x_copy", np.float32, None)], opset=9)
    check(m, {"x": random((4, 10), seed=8)})
    check(_topk_model(np.float32, (4, 10), [0, 0]), {"x": random((4, 10), seed=8)}, oracle="onnx.reference")


def test_topk_with_k_too_large_is_invalid():
    with pytest.raises(aotc.AotcError, match="outside"):
        aotc.compile(_topk_model(np.float32, (4, 10), [5, 11]))


def test_generated_c_is_clean(tmp_path):
    nodes = [helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1),
             helper.make_node("ArgMin", ["x"], ["a"], axis=0, select_last_index=1),
             helper.make_node("Hardmax", ["x"], ["h"], axis=1)]
    m = make_model(nodes, [("x", np.float16, (6, 11))],
                   [("v", np.float16, None), ("i", np.int64, None), ("a", np.int64, None),
                    ("h", np.float16, None)], {"k": np.array([4], np.int64)}, opset=13)
    assert_clean_c(tmp_path, m, "argreduce")
