"""Constant, ConstantOfShape, Shape, Size, Cast and CastLike."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import aotc
from aotc.ops.constants import cast_array
from oracle import assert_matches_ort, make_model, random

INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
TYPES = [np.float32, np.float64] + INTS + [np.bool_]


def _onnx_type(dtype):
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


# ---- Constant -----------------------------------------------------------------------

@pytest.mark.parametrize("attr,value,dtype", [
    ("value", numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5), np.float32),
    ("value", numpy_helper.from_array(np.array(-7, np.int64)), np.int64),
    ("value_float", 0.25, np.float32),
    ("value_floats", [1.0, -2.0, 3.5], np.float32),
    ("value_int", -3, np.int64),
    ("value_ints", [4, 5, -6], np.int64),
])
def test_constant_forms(attr, value, dtype):
    nodes = [helper.make_node("Constant", [], ["c"], **{attr: value}),
             helper.make_node("Add", ["x", "c"], ["y"])]
    m = make_model(nodes, [("x", dtype, (2, 3))], [("y", dtype, None)], opset=13)
    assert_matches_ort(m, {"x": random((2, 3), dtype, low=-5, high=5)})


def test_constant_straight_to_an_output():
    node = helper.make_node("Constant", [], ["y"], value=numpy_helper.from_array(np.array([[1, 2]], np.int32)))
    m = make_model([node], [], [("y", np.int32, None)])
    got = aotc.compile(m).run({})
    np.testing.assert_array_equal(got["y"], [[1, 2]])


def test_sparse_constant_is_unsupported():
    sparse = helper.make_sparse_tensor(numpy_helper.from_array(np.array([5.0], np.float32), "v"),
                                       numpy_helper.from_array(np.array([1], np.int64), "i"), [3])
    nodes = [helper.make_node("Constant", [], ["c"], sparse_value=sparse),
             helper.make_node("Add", ["x", "c"], ["y"])]
    m = make_model(nodes, [("x", np.float32, (3,))], [("y", np.float32, None)])
    with pytest.raises(aotc.Unsupported, match="sparse"):
        aotc.compile(m)


# ---- ConstantOfShape ----------------------------------------------------------------

@pytest.mark.parametrize("value", [None, np.array([2.5], np.float32), np.array([-9], np.int64),
                                   np.array([1], np.bool_), np.array([3], np.int32)])
@pytest.mark.parametrize("shape", [[2, 3], [0], [], [200, 300]])
def test_constant_of_shape(value, shape):
    attrs = {} if value is None else {"value": numpy_helper.from_array(value)}
    dtype = np.float32 if value is None else value.dtype
    nodes = [helper.make_node("ConstantOfShape", ["s"], ["c"], **attrs),
             helper.make_node("Identity", ["c"], ["y"])]
    m = make_model(nodes, [], [("y", dtype, None)], {"s": np.array(shape, np.int64)}, opset=13)
    sess = aotc.compile(m)
    got = sess.run({})["y"]
    want = np.full(shape, 0 if value is None else value[0], dtype)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    big = want.nbytes > 64 * 1024
    assert ("ConstantOfShape" in sess.report["nodes_after"]) == big   # too big to fold: filled


def test_constant_of_shape_from_a_shape_feeds_an_add():
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("ConstantOfShape", ["s"], ["c"], value=numpy_helper.from_array(np.array([0.5], np.float32))),
             helper.make_node("Add", ["x", "c"], ["y"])]
    m = make_model(nodes, [("x", np.float32, (40, 50, 30))], [("y", np.float32, None)], opset=13)
    assert_matches_ort(m, {"x": random((40, 50, 30))})


# ---- Shape, Size --------------------------------------------------------------------

@pytest.mark.parametrize("start,end", [(None, None), (1, None), (-2, None), (0, -1), (-100, 100),
                                       (2, 1), (3, 3)])
def test_shape_start_end(start, end):
    attrs = {k: v for k, v in (("start", start), ("end", end)) if v is not None}
    nodes = [helper.make_node("Shape", ["x"], ["s"], **attrs), helper.make_node("Identity", ["s"], ["y"])]
    m = make_model(nodes, [("x", np.float32, (2, 3, 5))], [("y", np.int64, None)], opset=15)
    sess = aotc.compile(m)
    assert not sess.report["nodes_after"]
    assert_matches_ort(m, {"x": random((2, 3, 5))})


@pytest.mark.parametrize("opset", [7, 13])
def test_shape_and_size_are_constants(opset):
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Size", ["x"], ["n"]),
             helper.make_node("Mul", ["s", "n"], ["y"])]
    m = make_model(nodes, [("x", np.float32, (4, 1, 6))], [("y", np.int64, None)], opset=opset)
    sess = aotc.compile(m)
    assert not sess.report["nodes_after"]
    assert_matches_ort(m, {"x": random((4, 1, 6))})


# ---- Cast ---------------------------------------------------------------------------

def _in_range_values(src, dst, shape=(3, 7)):
    """Values of type src that every implementation converts to dst the same way."""
    lo, hi = -100, 100
    for t in (src, dst):
        if np.dtype(t).kind == "u" or np.dtype(t) == np.bool_:
            lo = 0
        if np.dtype(t) == np.int8:
            hi = 100
    if np.dtype(src) == np.bool_:
        return random(shape, np.bool_)
    x = random(shape, src, low=lo, high=hi)
    if np.dtype(src).kind == "f":
        x = x.astype(src)
        x.flat[0] = 0
    return x


@pytest.mark.parametrize("src", TYPES)
@pytest.mark.parametrize("dst", TYPES)
def test_cast_between_types(src, dst):
    node = helper.make_node("Cast", ["x"], ["y"], to=_onnx_type(dst))
    m = make_model([node], [("x", src, (3, 7))], [("y", dst, None)], opset=13)
    assert_matches_ort(m, {"x": _in_range_values(src, dst)})


SPECIAL = np.array([np.nan, np.inf, -np.inf, 1e30, -1e30, 3.99, -3.99, -0.5, 127.9, 128.0,
                    -128.7, 255.5, 65535.9, 2.0**31, -2.0**31 - 1000, 2.0**63, -2.0**63, 2.0**64,
                    1.5e19, 0.0], np.float64)


@pytest.mark.parametrize("src", [np.float32, np.float64])
@pytest.mark.parametrize("dst", INTS + [np.bool_])
def test_cast_of_nan_and_out_of_range_is_defined_and_folds_the_same(src, dst):
    x = SPECIAL.astype(src)
    node = helper.make_node("Cast", ["x"], ["y"], to=_onnx_type(dst))
    run_time = make_model([node], [("x", src, x.shape)], [("y", dst, None)], opset=13)
    folded = make_model([node], [], [("y", dst, None)], {"x": x}, opset=13)
    got = aotc.compile(run_time).run({"x": x})["y"]
    sess = aotc.compile(folded)
    assert not sess.report["nodes_after"]
    np.testing.assert_array_equal(got, sess.run({})["y"])
    np.testing.assert_array_equal(got, cast_array(x, dst))


def test_cast_saturates_and_maps_nan_to_zero():
    x = np.array([np.nan, 300.0, -300.0, 12.9, -12.9, np.inf], np.float32)
    np.testing.assert_array_equal(cast_array(x, np.int8), [0, 127, -128, 12, -12, 127])
    np.testing.assert_array_equal(cast_array(x, np.uint8), [0, 255, 0, 12, 0, 255])
    big = np.array([2.0**70, -2.0**70], np.float64)
    np.testing.assert_array_equal(cast_array(big, np.int64), [2**63 - 1, -2**63])
    np.testing.assert_array_equal(cast_array(big, np.uint64), [2**64 - 1, 0])
    np.testing.assert_array_equal(cast_array(x, np.bool_), [True, True, True, True, True, True])


def test_cast_to_bool_is_not_zero():
    x = np.array([[0.0, -0.0, 0.1, -3.0, np.nan]], np.float32)
    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.BOOL)
    m = make_model([node], [("x", np.float32, x.shape)], [("y", np.bool_, None)], opset=13)
    assert_matches_ort(m, {"x": x})


def test_cast_like():
    node = helper.make_node("CastLike", ["x", "like"], ["y"])
    m = make_model([node], [("x", np.float32, (4, 5))], [("y", np.int32, None)],
                   {"like": np.array([0], np.int32)}, opset=15)
    assert_matches_ort(m, {"x": random((4, 5), low=-50, high=50)})


def test_cast_chain_in_place():
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Cast", ["r"], ["i"], to=TensorProto.INT32),
             helper.make_node("Cast", ["i"], ["f"], to=TensorProto.FLOAT),
             helper.make_node("Cast", ["f"], ["y"], to=TensorProto.FLOAT)]
    m = make_model(nodes, [("x", np.float32, (5, 6))], [("y", np.float32, None)], opset=13)
    assert_matches_ort(m, {"x": random((5, 6), low=-40, high=40)})


def test_casts_of_nan_and_huge_values_run_clean_under_sanitizers(tmp_path):
    from sanitize import CC, run_sanitized
    if CC is None:
        pytest.skip("no C compiler")
    targets = [TensorProto.INT8, TensorProto.INT32, TensorProto.INT64, TensorProto.UINT8,
               TensorProto.UINT64, TensorProto.BOOL]
    nodes = [helper.make_node("Mul", ["x", "big"], ["huge"]),
             helper.make_node("Sqrt", ["x"], ["nan"]),
             helper.make_node("Cast", ["huge"], ["wide"], to=TensorProto.DOUBLE)]
    outputs = []
    for src in ("huge", "nan", "wide"):
        for to in targets:
            name = f"{src}_{to}"
            nodes.append(helper.make_node("Cast", [src], [name], to=to))
            outputs.append((name, helper.tensor_dtype_to_np_dtype(to), None))
    nodes.append(helper.make_node("ConstantOfShape", ["shape"], ["fill"],
                                  value=numpy_helper.from_array(np.array([7], np.int16))))
    outputs.append(("fill", np.int16, None))
    m = make_model(nodes, [("x", np.float32, (4, 9))], outputs,
                   {"big": np.array(1e30, np.float32), "shape": np.array([300, 200], np.int64)})
    sess = aotc.compile(m, out_dir=tmp_path, name="casts")
    # gcc's -fsanitize=undefined leaves out float -> int overflow: ask for it
    lines = run_sanitized(tmp_path, sess.name, ["-fsanitize=float-cast-overflow"]).splitlines()
    assert [ln.split()[0] for ln in lines] == [name for name, _, _ in outputs]
