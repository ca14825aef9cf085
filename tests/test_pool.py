import numpy as np
import pytest
from onnx import helper

import aotc
from oracle import assert_matches_ort, make_model, random


def _model(shape, attrs, opset=19, max_attrs=None, avg_attrs=None, indices=False):
    """MaxPool and AveragePool of one input, sharing the window attributes."""
    max_outputs = ["y_max", "i_max"] if indices else ["y_max"]
    nodes = [helper.make_node("MaxPool", ["x"], max_outputs, **attrs, **(max_attrs or {})),
             helper.make_node("AveragePool", ["x"], ["y_avg"], **attrs, **(avg_attrs or {}))]
    outputs = [("y_max", np.float32, None), ("y_avg", np.float32, None)]
    if indices:
        outputs.insert(1, ("i_max", np.int64, None))
    return make_model(nodes, [("x", np.float32, shape)], outputs, opset=opset)


def _check(shape, attrs, **kw):
    m = _model(shape, attrs, **kw)
    return assert_matches_ort(m, {"x": random(shape, seed=11)})


WINDOWS_2D = [
    dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    dict(kernel_shape=[2, 2], strides=[2, 2]),
    dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
    dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1),
    dict(kernel_shape=[3, 2], strides=[2, 1], pads=[0, 1, 2, 0]),
    dict(kernel_shape=[2, 3], strides=[1, 3], pads=[1, 0, 0, 2], ceil_mode=1),
    dict(kernel_shape=[2, 2], dilations=[2, 2]),
    dict(kernel_shape=[3, 2], strides=[2, 2], dilations=[2, 3], pads=[2, 1, 1, 1]),
    dict(kernel_shape=[3, 3], strides=[3, 2], dilations=[1, 2], pads=[1, 1, 0, 1], ceil_mode=1),
    dict(kernel_shape=[1, 1], strides=[2, 2]),
]


@pytest.mark.parametrize("attrs", WINDOWS_2D)
@pytest.mark.parametrize("shape", [(1, 3, 7, 9), (2, 2, 10, 11)])
@pytest.mark.parametrize("include_pad", [0, 1])
def test_2d_windows(attrs, shape, include_pad):
    _check(shape, attrs, avg_attrs={"count_include_pad": include_pad})


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID", "NOTSET"])
@pytest.mark.parametrize("window", [([3, 3], [2, 2]), ([2, 4], [2, 1]), ([4, 4], [1, 1])])
@pytest.mark.parametrize("include_pad", [0, 1])
def test_auto_pad(auto_pad, window, include_pad):
    kernel, strides = window
    attrs = dict(kernel_shape=kernel, strides=strides, auto_pad=auto_pad)
    _check((1, 2, 9, 8), attrs, avg_attrs={"count_include_pad": include_pad})


@pytest.mark.parametrize("attrs", [
    dict(kernel_shape=[3], strides=[2], pads=[1, 1]),
    dict(kernel_shape=[4], strides=[3], pads=[1, 2], ceil_mode=1),
    dict(kernel_shape=[2], dilations=[3], pads=[0, 1]),
    dict(kernel_shape=[5], auto_pad="SAME_LOWER"),
])
@pytest.mark.parametrize("include_pad", [0, 1])
def test_1d(attrs, include_pad):
    _check((2, 3, 13), attrs, avg_attrs={"count_include_pad": include_pad})


@pytest.mark.parametrize("attrs", [
    dict(kernel_shape=[2, 3, 2], strides=[1, 2, 2], pads=[0, 1, 1, 1, 0, 0]),
    dict(kernel_shape=[3, 3, 3], strides=[2, 2, 2], ceil_mode=1, pads=[1, 1, 1, 1, 1, 1]),
])
def test_3d(attrs):
    _check((1, 2, 5, 6, 7), attrs, avg_attrs={"count_include_pad": 1})
    _check((1, 2, 5, 6, 7), attrs)


@pytest.mark.parametrize("opset", [7, 10, 12])
def test_older_opsets(opset):
    attrs = dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 0, 1, 0])
    if opset >= 10:
        attrs["ceil_mode"] = 1
    _check((1, 3, 8, 9), attrs, opset=opset)


@pytest.mark.parametrize("storage_order", [0, 1])
@pytest.mark.parametrize("shape,attrs", [
    ((2, 3, 7, 8), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ((1, 2, 11), dict(kernel_shape=[3], strides=[2], ceil_mode=1)),
    ((1, 2, 4, 5, 6), dict(kernel_shape=[2, 2, 3], strides=[2, 1, 2])),
])
def test_max_pool_indices(storage_order, shape, attrs):
    # rounded values make ties; the first maximum in window order wins
    m = _model(shape, attrs, opset=12, max_attrs={"storage_order": storage_order}, indices=True)
    assert_matches_ort(m, {"x": np.round(random(shape, seed=2) * 2)})


def test_padding_is_never_a_maximum():
    m = _model((1, 1, 5, 5), dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
    x = -np.ones((1, 1, 5, 5), np.float32) - random((1, 1, 5, 5), low=0, high=1)
    got = assert_matches_ort(m, {"x": x})
    assert (got["y_max"] < 0).all()


def test_big_pool_is_identical_for_any_thread_count():
    shape, attrs = (1, 64, 56, 56), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    m = _model(shape, attrs)
    x = random(shape, seed=7)
    many = assert_matches_ort(m, {"x": x}, threads=2)
    one = aotc.compile(m, threads=1).run({"x": x})
    for name in one:
        np.testing.assert_array_equal(many[name], one[name])


@pytest.mark.parametrize("shape", [(2, 3, 7, 9), (1, 4, 13), (1, 2, 3, 4, 5), (1, 16, 1, 1)])
def test_global_pools(shape):
    nodes = [helper.make_node("GlobalMaxPool", ["x"], ["y_max"]),
             helper.make_node("GlobalAveragePool", ["x"], ["y_avg"])]
    m = make_model(nodes, [("x", np.float32, shape)],
                   [("y_max", np.float32, None), ("y_avg", np.float32, None)])
    assert_matches_ort(m, {"x": random(shape, seed=5)})


def test_window_larger_than_input_is_invalid():
    m = _model((1, 1, 3, 3), dict(kernel_shape=[5, 5]))
    with pytest.raises(aotc.AotcError, match="does not fit"):
        aotc.compile(m)


# ---- element types ----------------------------------------------------------------

def _typed_pools(dtype, shape, max_only=False):
    """MaxPool with indices (column-major), a padded strided MaxPool and, for the floats,
    AveragePool both ways and the global pools, all of one input."""
    n = helper.make_node
    window = dict(kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 1, 1])
    nodes = [n("MaxPool", ["x"], ["m", "mi"], kernel_shape=[2, 3], storage_order=1),
             n("MaxPool", ["x"], ["mp"], **window, ceil_mode=1)]
    outputs = [("m", dtype, None), ("mi", np.int64, None), ("mp", dtype, None)]
    if not max_only:
        nodes += [n("AveragePool", ["x"], ["a0"], **window), n("GlobalMaxPool", ["x"], ["gm"]),
                  n("AveragePool", ["x"], ["a1"], **window, count_include_pad=1),
                  n("GlobalAveragePool", ["x"], ["ga"])]
        outputs += [(name, dtype, None) for name in ("a0", "gm", "a1", "ga")]
    return make_model(nodes, [("x", dtype, shape)], outputs, opset=19)


@pytest.mark.parametrize("dtype", [np.float64, np.float16, "bfloat16", np.int8, np.uint8])
def test_element_types_match_the_float32_pools(dtype):
    """Every type against the float32 pools of the same values (exact for the maxima,
    rounded once for the averages), on 2 threads."""
    from aotc.dtypes import BFLOAT16
    dtype = BFLOAT16 if dtype == "bfloat16" else np.dtype(dtype)
    shape = (2, 3, 7, 6)
    ints = np.issubdtype(dtype, np.integer)
    x = (np.random.default_rng(3).integers(np.iinfo(dtype).min, np.iinfo(dtype).max + 1, shape).astype(dtype)
         if ints else random(shape, seed=4).astype(dtype))
    got = aotc.compile(_typed_pools(dtype, shape, max_only=ints), threads=2).run({"x": x})
    want = aotc.compile(_typed_pools(np.float32, shape, max_only=ints)).run({"x": x.astype(np.float32)})
    for name, value in want.items():
        if name == "mi":
            np.testing.assert_array_equal(got[name], value)
            continue
        assert got[name].dtype == dtype, name
        if dtype == np.float64 or name in ("m", "mp", "gm"):
            exact = value.astype(dtype)
            if dtype == np.float64 and name not in ("m", "mp", "gm"):
                np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-6, err_msg=name)
            else:
                np.testing.assert_array_equal(got[name], exact, err_msg=name)
        else:
            np.testing.assert_allclose(got[name].astype(np.float32), value.astype(dtype).astype(np.float32),
                                       rtol=1e-2, atol=1e-2, err_msg=name)


def test_uint8_max_pool_matches_onnxruntime():
    m = _typed_pools(np.uint8, (1, 2, 5, 5), max_only=True)
    x = np.random.default_rng(5).integers(0, 256, (1, 2, 5, 5)).astype(np.uint8)
    assert_matches_ort(m, {"x": x})


def test_integer_average_pool_is_refused():
    m = make_model([helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2])],
                   [("x", np.int8, (1, 1, 4, 4))], [("y", np.int8, None)])
    with pytest.raises(aotc.AotcError, match="int8"):
        aotc.compile(m)
