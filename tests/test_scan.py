"""CumSum and CumProd."""
import ml_dtypes
import numpy as np
import pytest
from onnx import helper

import aotc
from oracle import check, make_model, random
from sanitize import assert_clean_c

SHAPE = (3, 4, 17)


def _scan_model(op, dtype, shape, opset, axis_dtype=np.int64):
    """The scan over every axis with every exclusive/reverse combination: one model."""
    nodes, outputs, inits = [], [], {}
    for axis in range(-len(shape), len(shape)):
        inits[f"axis{axis + len(shape)}"] = np.array(axis, axis_dtype)
        for exclusive in (0, 1):
            for reverse in (0, 1):
                out = f"y{axis + len(shape)}_{exclusive}{reverse}"
                nodes.append(helper.make_node(op, ["x", f"axis{axis + len(shape)}"], [out],
                                              exclusive=exclusive, reverse=reverse))
                outputs.append((out, dtype, None))
    return make_model(nodes, [("x", dtype, shape)], outputs, inits, opset=opset)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
@pytest.mark.parametrize("axis_dtype", [np.int32, np.int64])
def test_cumsum_matches_onnxruntime(dtype, axis_dtype):
    x = random(SHAPE, dtype, seed=1, low=-5, high=5)
    check(_scan_model("CumSum", dtype, SHAPE, 14, axis_dtype), {"x": x}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint32, np.uint64])
def test_cumprod_matches_the_reference(dtype):
    x = random(SHAPE, dtype, seed=2, low=0 if np.dtype(dtype).kind == "u" else -2, high=2)
    if np.dtype(dtype).kind == "f":
        x = (np.abs(x) + 0.5) * np.sign(x)
    check(_scan_model("CumProd", dtype, SHAPE, 26), {"x": x}, oracle="onnx.reference", rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
def test_cumsum_unsigned(dtype):
    check(_scan_model("CumSum", dtype, (5, 6), 14), {"x": random((5, 6), dtype, seed=3, low=0, high=9)},
          oracle="onnx.reference")


def test_integer_sums_wrap():
    x = np.array([2**31 - 1, 1, 5, -2**31], np.int32)
    got = aotc.compile(_scan_model("CumSum", np.int32, (4,), 14)).run({"x": x})
    np.testing.assert_array_equal(got["y0_00"], np.cumsum(x, dtype=np.int32))


@pytest.mark.parametrize("dtype, ulp", [(np.float16, 2.0 ** -10), (ml_dtypes.bfloat16, 2.0 ** -7)])
def test_half_floats_accumulate_in_float(dtype, ulp):
    """The float32 scan rounded once to the 16-bit type, within one unit in the last place."""
    x = random((2, 200), np.float32, seed=4).astype(dtype)
    got = aotc.compile(_scan_model("CumSum", dtype, (2, 200), 14)).run({"x": x})
    want = np.cumsum(x.astype(np.float32), axis=1).astype(dtype)
    np.testing.assert_allclose(got["y1_00"].astype(np.float64), want.astype(np.float64), rtol=ulp,
                               atol=ulp)


def test_axis_must_be_known_and_in_range():
    node = helper.make_node("CumSum", ["x", "axis"], ["y"])
    m = make_model([node], [("x", np.float32, (2, 3))], [("y", np.float32, None)],
                   {"axis": np.array(2, np.int64)}, opset=14)
    with pytest.raises(aotc.AotcError, match="out of range"):
        aotc.compile(m)


def test_generated_c_is_clean(tmp_path):
    nodes = [helper.make_node("CumSum", ["x", "a"], ["s"], reverse=1),
             helper.make_node("CumProd", ["i", "a"], ["p"], exclusive=1),
             helper.make_node("CumSum", ["h", "a"], ["hs"])]
    m = make_model(nodes, [("x", np.float32, (5, 9)), ("i", np.int64, (5, 9)), ("h", np.float16, (5, 9))],
                   [("s", np.float32, None), ("p", np.int64, None), ("hs", np.float16, None)],
                   {"a": np.array(1, np.int32)}, opset=26)
    assert_clean_c(tmp_path, m, "scan")


def test_exact_mode_writes_the_canonical_nan():
    x = np.array([1, 2, 3], np.float32)
    x.view(np.uint32)[1] = 0xFFC00001      # a negative NaN with a payload
    got = aotc.compile(_scan_model("CumSum", np.float32, (3,), 14), mode="exact").run({"x": x})
    assert list(got["y0_00"].view(np.uint32)) == [np.float32(1).view(np.uint32), 0x7FC00000, 0x7FC00000]
