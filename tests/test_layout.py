"""Transpose, Concat, Slice, Gather, Expand and Pad against onnxruntime."""
import ml_dtypes
import numpy as np
import pytest
from onnx import helper

import aotc
from oracle import assert_matches_ort, make_model, random

INT64_MAX, INT64_MIN = 2**63 - 1, -2**63


def _single(node, inputs, inits=None, opset=17, out_dtype=np.float32):
    return make_model([node], inputs, [("y", out_dtype, None)], inits, opset=opset)


# ---- Transpose ----------------------------------------------------------------------

@pytest.mark.parametrize("shape,perm", [
    ((2, 3), None), ((2, 3, 4), [2, 0, 1]), ((2, 3, 4), [0, 2, 1]), ((2, 3, 4), None),
    ((1, 5, 1, 7), [3, 1, 0, 2]), ((2, 3, 4, 5, 3), [0, 3, 1, 4, 2]), ((7,), [0]),
    ((64, 48, 40), [2, 1, 0]), ((1, 128, 12, 64), [0, 2, 1, 3]),
])
def test_transpose(shape, perm):
    attrs = {} if perm is None else {"perm": perm}
    m = _single(helper.make_node("Transpose", ["x"], ["y"], **attrs), [("x", np.float32, shape)])
    assert_matches_ort(m, {"x": random(shape)})


@pytest.mark.parametrize("dtype", [np.int64, np.int8, np.bool_, np.float64, np.uint16])
def test_transpose_other_element_types(dtype):
    m = _single(helper.make_node("Transpose", ["x"], ["y"], perm=[1, 2, 0]),
                [("x", dtype, (3, 4, 5))], out_dtype=dtype)
    assert_matches_ort(m, {"x": random((3, 4, 5), dtype, low=0, high=100)})


# Two dimensions of 16 and more swapped go in 16 x 16 tiles (aotc_transpose_rows_), whole
# ones in registers on AVX-512: ragged tiles, a dimension between or around the two,
# three channels to the last, every unit width, threads, and the generic path.
TILED = [((1, 37, 19, 23), [0, 2, 3, 1]), ((1, 19, 23, 37), [0, 3, 1, 2]), ((32, 48), [1, 0]),
         ((50, 70), [1, 0]), ((3, 33, 17), [0, 2, 1]), ((33, 3, 17), [2, 1, 0]),
         ((1, 3, 40, 40), [0, 2, 3, 1])]


@pytest.mark.parametrize("target", ["native", "generic"])
@pytest.mark.parametrize("shape,perm", TILED)
def test_transpose_in_tiles(shape, perm, target):
    m = _single(helper.make_node("Transpose", ["x"], ["y"], perm=perm), [("x", np.float32, shape)])
    x = random(shape)
    np.testing.assert_array_equal(aotc.compile(m, target=target).run(x), x.transpose(perm))


@pytest.mark.parametrize("dtype", [np.int8, np.float16, np.int64])
def test_transpose_in_tiles_of_other_widths(dtype):
    m = _single(helper.make_node("Transpose", ["x"], ["y"], perm=[2, 1, 0]),
                [("x", dtype, (20, 18, 17))], out_dtype=dtype)
    x = random((20, 18, 17), dtype, low=0, high=100)
    np.testing.assert_array_equal(aotc.compile(m).run(x), x.transpose(2, 1, 0))


# (24 channels: 75264 elements, in pieces from AOTC_TRANSPOSE_GRAIN on, each with a
# ragged tile of 8 channels)
@pytest.mark.parametrize("shape", [(1, 64, 56, 56), (1, 24, 56, 56)])
@pytest.mark.parametrize("perm", [[0, 2, 3, 1], [0, 3, 1, 2]])
def test_transpose_in_tiles_over_two_threads(perm, shape):
    m = _single(helper.make_node("Transpose", ["x"], ["y"], perm=perm), [("x", np.float32, shape)])
    x = random(shape)
    np.testing.assert_array_equal(aotc.compile(m, threads=2).run(x), x.transpose(perm))


# ---- Concat -------------------------------------------------------------------------

@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_concat(axis):
    shapes = []
    for extra in (1, 3, 2):
        s = [2, 3, 4]
        s[axis] = extra
        shapes.append(tuple(s))
    inputs = [(f"x{i}", np.float32, s) for i, s in enumerate(shapes)]
    m = _single(helper.make_node("Concat", ["x0", "x1", "x2"], ["y"], axis=axis), inputs)
    assert_matches_ort(m, {f"x{i}": random(s, seed=i) for i, s in enumerate(shapes)})


def test_concat_with_a_constant_and_an_empty_piece():
    node = helper.make_node("Concat", ["a", "w", "e"], ["y"], axis=1)
    m = _single(node, [("a", np.int64, (2, 3)), ("e", np.int64, (2, 0))], {"w": np.arange(10).reshape(2, 5)},
                out_dtype=np.int64)
    assert_matches_ort(m, {"a": random((2, 3), np.int64, low=-9, high=9),
                           "e": np.zeros((2, 0), np.int64)}, shapes={"e": (2, 0)})


def test_concat_of_big_inputs_uses_several_pieces():
    node = helper.make_node("Concat", ["a", "b"], ["y"], axis=2)
    m = _single(node, [("a", np.float32, (4, 300, 100)), ("b", np.float32, (4, 300, 57))])
    assert_matches_ort(m, {"a": random((4, 300, 100)), "b": random((4, 300, 57), seed=1)}, threads=4)


# ---- Slice --------------------------------------------------------------------------

SLICES = [  # starts, ends, axes, steps on a (5, 6, 7) input
    ([1, 0], [4, 6], None, None),
    ([0], [-1], [1], None),
    ([-3, 1], [INT64_MAX, -2], [2, 0], None),
    ([4], [INT64_MIN], [-1], [-1]),
    ([INT64_MAX, 0, 1], [INT64_MIN, 6, 7], [0, 1, 2], [-2, 3, 2]),
    ([-1], [-100], [0], [-3]),
    ([2], [2], [1], None),                      # empty
    ([10], [20], [0], None),                    # start past the end: empty
    ([-100], [100], [2], [4]),
    ([5], [0], [2], [-2]),
]


@pytest.mark.parametrize("starts,ends,axes,steps", SLICES)
@pytest.mark.parametrize("index_type", [np.int64, np.int32])
def test_slice(starts, ends, axes, steps, index_type):
    if index_type == np.int32 and any(abs(v) > 2**31 - 1 for v in starts + ends):
        pytest.skip("bounds do not fit int32")
    names = ["x", "starts", "ends"]
    inits = {"starts": np.array(starts, index_type), "ends": np.array(ends, index_type)}
    if axes is not None or steps is not None:
        names.append("axes")
        inits["axes"] = np.array(axes if axes is not None else list(range(len(starts))), index_type)
    if steps is not None:
        names.append("steps")
        inits["steps"] = np.array(steps, index_type)
    m = _single(helper.make_node("Slice", names, ["y"]), [("x", np.float32, (5, 6, 7))], inits, opset=13)
    assert_matches_ort(m, {"x": random((5, 6, 7))})


@pytest.mark.parametrize("axes", [None, [1], [0, -1]])
def test_slice_before_opset_10_takes_attributes(axes):
    starts, ends = ([1, 2, 0][:len(axes or [0, 1, 2])], [3, 100, -1][:len(axes or [0, 1, 2])])
    attrs = {"starts": starts, "ends": ends}
    if axes is not None:
        attrs["axes"] = axes
    m = _single(helper.make_node("Slice", ["x"], ["y"], **attrs), [("x", np.float32, (4, 5, 6))], opset=9)
    assert_matches_ort(m, {"x": random((4, 5, 6))})


def test_slice_with_run_time_starts_is_unsupported():
    node = helper.make_node("Slice", ["x", "s", "e"], ["y"])
    m = _single(node, [("x", np.float32, (4, 5)), ("s", np.int64, (1,))], {"e": np.array([3], np.int64)})
    with pytest.raises(aotc.Unsupported, match="starts"):
        aotc.compile(m)


def test_slice_of_int64_shape_values_folds():
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Slice", ["s", "b", "e"], ["hw"]),
             helper.make_node("Reshape", ["x", "hw2"], ["y"])]
    nodes.insert(2, helper.make_node("Concat", ["hw", "one"], ["hw2"], axis=0))
    m = make_model(nodes, [("x", np.float32, (2, 3, 4))], [("y", np.float32, None)],
                   {"b": np.array([-2], np.int64), "e": np.array([INT64_MAX], np.int64),
                    "one": np.array([-1], np.int64)}, opset=13)
    sess = aotc.compile(m)
    assert not sess.report["nodes_after"]
    assert_matches_ort(m, {"x": random((2, 3, 4))})


# ---- Gather -------------------------------------------------------------------------

@pytest.mark.parametrize("data_shape,indices,axis", [
    ((5, 4), [0, 4, -1, 2], 0),
    ((5, 4), [[1, -4], [3, 3]], 1),
    ((3, 4, 5), [2, 0], -1),
    ((3, 4, 5), 1, 1),                          # a scalar index drops the axis
    ((3, 4, 5), [[0]], -2),
    ((6,), [5, 0, -6], 0),
])
@pytest.mark.parametrize("index_type", [np.int64, np.int32])
def test_gather_with_run_time_indices(data_shape, indices, axis, index_type):
    idx = np.array(indices, index_type)
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=axis)
    m = _single(node, [("x", np.float32, data_shape), ("i", index_type, idx.shape)])
    assert_matches_ort(m, {"x": random(data_shape), "i": idx})


def test_gather_embedding_lookup_from_a_constant_table():
    table = random((30, 16), seed=4)
    node = helper.make_node("Gather", ["w", "ids"], ["y"])
    m = _single(node, [("ids", np.int64, (2, 7))], {"w": table})
    assert_matches_ort(m, {"ids": np.random.default_rng(0).integers(0, 30, (2, 7))})


@pytest.mark.parametrize("bad", [30, -31, INT64_MAX, INT64_MIN])
def test_gather_out_of_range_run_time_index_is_an_error(bad):
    node = helper.make_node("Gather", ["w", "ids"], ["y"])
    m = _single(node, [("ids", np.int64, (3,))], {"w": random((30, 16))})
    sess = aotc.compile(m)
    assert sess.run({"ids": np.array([1, 2, 3], np.int64)})["y"].shape == (3, 16)
    with pytest.raises(aotc.AotcError, match="code 3"):
        sess.run({"ids": np.array([1, bad, 3], np.int64)})


def test_gather_out_of_range_constant_index_is_invalid():
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=1)
    m = _single(node, [("x", np.float32, (3, 4))], {"i": np.array([4], np.int64)})
    with pytest.raises(aotc.InvalidModel, match="out of range"):
        aotc.compile(m)


def test_gather_of_int64_data():
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=0)
    m = _single(node, [("x", np.int64, (6, 2)), ("i", np.int32, (4,))], out_dtype=np.int64)
    assert_matches_ort(m, {"x": random((6, 2), np.int64, low=-1000, high=1000),
                           "i": np.array([5, -1, 0, 2], np.int32)})


# ---- Expand -------------------------------------------------------------------------

@pytest.mark.parametrize("x_shape,shape", [
    ((3, 1), [2, 3, 4]), ((2, 1, 4), [3, 1]), ((1,), [5]), ((), [2, 3]), ((4, 5), [1, 1]),
    ((1, 1, 128), [2, 12, 128, 128]),
])
def test_expand(x_shape, shape):
    node = helper.make_node("Expand", ["x", "s"], ["y"])
    m = _single(node, [("x", np.float32, x_shape)], {"s": np.array(shape, np.int64)})
    assert_matches_ort(m, {"x": random(x_shape)})


def test_expand_bool_and_int64():
    nodes = [helper.make_node("Expand", ["b", "s"], ["y"]), helper.make_node("Expand", ["i", "s"], ["z"])]
    m = make_model(nodes, [("b", np.bool_, (1, 4)), ("i", np.int64, (3, 1))],
                   [("y", np.bool_, None), ("z", np.int64, None)], {"s": np.array([3, 4], np.int64)})
    assert_matches_ort(m, {"b": random((1, 4), np.bool_), "i": random((3, 1), np.int64, low=-5, high=5)})


def test_expand_with_a_run_time_shape_is_unsupported():
    m = _single(helper.make_node("Expand", ["x", "s"], ["y"]),
                [("x", np.float32, (3, 1)), ("s", np.int64, (2,))])
    with pytest.raises(aotc.Unsupported, match=r"input 1 \(shape\) must be a compile-time constant"):
        aotc.compile(m)


# ---- Pad ----------------------------------------------------------------------------

PADS = [  # on a (2, 3, 5, 6) input, all dims
    [0, 0, 1, 2, 0, 0, 1, 2],
    [0, 0, 2, 3, 0, 0, 0, 1],
    [1, 0, 0, 0, 0, 2, 0, 0],
    [0, 0, -1, 2, 0, 0, 3, -2],
    [0, 1, 1, 1, 1, 0, 1, 1],
    [0, 0, 0, 0, 0, 0, 0, 0],
]


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
@pytest.mark.parametrize("pads", PADS)
def test_pad_modes(mode, pads):
    if mode == "reflect" and (pads[0] or pads[4]):
        pytest.skip("reflect over a dim of size 2 pads by at most 1")
    node = helper.make_node("Pad", ["x", "p", "c"], ["y"], mode=mode)
    inits = {"p": np.array(pads, np.int64), "c": np.array(1.5, np.float32)}
    m = _single(node, [("x", np.float32, (2, 3, 5, 6))], inits, opset=13)
    assert_matches_ort(m, {"x": random((2, 3, 5, 6))})


@pytest.mark.parametrize("opset", [7, 10])
def test_pad_before_opset_11_takes_attributes(opset):
    node = helper.make_node("Pad", ["x"], ["y"], pads=[1, 0, 2, 2], value=-3.0)
    m = _single(node, [("x", np.float32, (3, 4))], opset=opset)
    assert_matches_ort(m, {"x": random((3, 4))})


def test_pad_with_a_run_time_constant_value():
    node = helper.make_node("Pad", ["x", "p", "c"], ["y"])
    m = _single(node, [("x", np.float32, (3, 4)), ("c", np.float32, ())], {"p": np.array([1, 2, 0, 1], np.int64)})
    assert_matches_ort(m, {"x": random((3, 4)), "c": np.array(7.25, np.float32)})


@pytest.mark.parametrize("axes", [[2, 3], [-1], [0, -2]])
def test_pad_axes_from_opset_18(axes):
    pads = [1] * len(axes) + [2] * len(axes)
    node = helper.make_node("Pad", ["x", "p", "", "a"], ["y"], mode="edge")
    m = _single(node, [("x", np.float32, (2, 3, 4, 5))],
                {"p": np.array(pads, np.int64), "a": np.array(axes, np.int64)}, opset=18)
    assert_matches_ort(m, {"x": random((2, 3, 4, 5))})


def test_pad_wrap_from_opset_19():
    node = helper.make_node("Pad", ["x", "p"], ["y"], mode="wrap")
    m = _single(node, [("x", np.float32, (3, 4))], {"p": np.array([1, 3, 2, -1], np.int64)}, opset=19)
    assert_matches_ort(m, {"x": random((3, 4))})


@pytest.mark.parametrize("dtype", [np.int64, np.uint8, np.bool_])
def test_pad_other_element_types(dtype):
    node = helper.make_node("Pad", ["x", "p"], ["y"])
    m = _single(node, [("x", dtype, (3, 4))], {"p": np.array([1, 0, 0, 2], np.int64)}, out_dtype=dtype)
    assert_matches_ort(m, {"x": random((3, 4), dtype, low=1, high=9)})


def test_pad_of_a_big_activation_with_threads():
    node = helper.make_node("Pad", ["x", "p"], ["y"])
    m = _single(node, [("x", np.float32, (1, 32, 111, 113))], {"p": np.array([0, 0, 0, 1, 0, 0, 2, 1], np.int64)})
    assert_matches_ort(m, {"x": random((1, 32, 111, 113))}, threads=4)


def test_pad_reflect_wider_than_the_axis_is_invalid():
    node = helper.make_node("Pad", ["x", "p"], ["y"], mode="reflect")
    m = _single(node, [("x", np.float32, (3, 4))], {"p": np.array([0, 4, 0, 0], np.int64)})
    with pytest.raises(aotc.InvalidModel, match="reflect"):
        aotc.compile(m)


def test_pad_amounts_computed_from_shapes_fold():
    """The same-padding pattern of exported MobileNets: pad amounts from Shape arithmetic."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Slice", ["s", "two", "four"], ["hw"]),
             helper.make_node("Sub", ["hw", "one"], ["p1"]),
             helper.make_node("ConstantOfShape", ["len2"], ["zeros"], value=helper.make_tensor("v", 7, [1], [0])),
             helper.make_node("Concat", ["zeros", "p1"], ["begin"], axis=0),
             helper.make_node("Concat", ["begin", "begin"], ["p8"], axis=0),
             helper.make_node("Cast", ["p8"], ["pads"], to=7),
             helper.make_node("Pad", ["x", "pads"], ["y"])]
    m = make_model(nodes, [("x", np.float32, (1, 2, 3, 4))], [("y", np.float32, None)],
                   {"two": np.array([2], np.int64), "four": np.array([4], np.int64),
                    "one": np.array(1, np.int64), "len2": np.array([2], np.int64)}, opset=13)
    sess = aotc.compile(m)
    assert sess.report["nodes_after"] == {"Pad": 1}
    assert_matches_ort(m, {"x": random((1, 2, 3, 4))})


def test_movers_run_clean_under_sanitizers(tmp_path):
    from sanitize import CC, run_sanitized
    if CC is None:
        pytest.skip("no C compiler")
    f = np.float32
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[2, 0, 1]),
             helper.make_node("Slice", ["t", "s", "e", "a", "st"], ["sl"]),
             helper.make_node("Expand", ["sl", "shape"], ["ex"]),
             helper.make_node("Concat", ["ex", "ex"], ["cat"], axis=-1),
             helper.make_node("Pad", ["cat", "p"], ["pr"], mode="reflect"),
             helper.make_node("Pad", ["pr", "p2", "c"], ["pc"]),
             helper.make_node("Gather", ["pc", "ids"], ["g"], axis=1),
             helper.make_node("Gather", ["w", "ids"], ["y"])]
    inits = {"s": np.array([-1, 0], np.int64), "e": np.array([INT64_MIN, INT64_MAX], np.int64),
             "a": np.array([0, 2], np.int64), "st": np.array([-2, 1], np.int64),
             "shape": np.array([3, 1, 1, 1], np.int64), "p": np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64),
             "p2": np.array([0, 1, -1, 0, 1, 0, 0, -2], np.int64), "c": np.array(0.5, f),
             "w": random((7, 3), seed=2)}
    m = make_model(nodes, [("x", f, (3, 4, 5)), ("ids", np.int64, (2, 2))],
                   [("g", f, None), ("y", f, None)], inits, opset=18)
    sess = aotc.compile(m, out_dir=tmp_path, name="movers")
    lines = run_sanitized(tmp_path, sess.name).splitlines()
    assert [ln.split()[0] for ln in lines] == ["g", "y"]


@pytest.mark.parametrize("flags", [[], ["-march=x86-64-v4", "-DAOTC_TARGET_AVX512"]])
def test_transposes_in_tiles_run_clean_under_sanitizers(tmp_path, flags):
    from sanitize import CC, run_sanitized
    if CC is None:
        pytest.skip("no C compiler")
    if flags and aotc.build.resolve_target("native") != "avx512":
        pytest.skip("this machine runs no AVX-512")
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]),
             helper.make_node("Transpose", ["t"], ["y"], perm=[2, 1, 0, 3]),
             helper.make_node("Cast", ["x"], ["h"], to=10),
             helper.make_node("Transpose", ["h"], ["z"], perm=[0, 3, 1, 2])]
    m = make_model(nodes, [("x", np.float32, (1, 35, 32, 18))],
                   [("y", np.float32, None), ("z", np.float16, None)])
    sess = aotc.compile(m, out_dir=tmp_path, name="tiles")
    lines = run_sanitized(tmp_path, sess.name, flags).splitlines()
    assert [ln.split()[0] for ln in lines] == ["y", "z"]


# ---- opsets 23-28: the same definitions with more element types ---------------------

def test_movers_at_opset_25():
    x = random((2, 3, 4))
    nodes = [helper.make_node("Transpose", ["x"], ["t"]),
             helper.make_node("Pad", ["x", "p", "", "a"], ["edge"], mode="edge"),
             helper.make_node("Pad", ["x", "p", "", "a"], ["reflect"], mode="reflect"),
             helper.make_node("Pad", ["x", "p", "", "a"], ["wrap"], mode="wrap"),
             helper.make_node("Pad", ["x", "p", "c", "a"], ["constant"]),
             helper.make_node("Concat", ["x", "x"], ["cat"], axis=-1),
             helper.make_node("Slice", ["x", "s", "e"], ["sl"]),
             helper.make_node("Gather", ["x", "i"], ["g"], axis=1),
             helper.make_node("Expand", ["x", "shape"], ["ex"])]
    inits = {"p": np.array([1, 2, 2, 1], np.int64), "a": np.array([-1, 1], np.int64),
             "c": np.array(9.5, np.float32), "s": np.array([1], np.int64), "e": np.array([3], np.int64),
             "i": np.array([2, 0], np.int64), "shape": np.array([3, 2, 1, 1], np.int64)}
    outs = [(n.output[0], np.float32, None) for n in nodes]
    assert_matches_ort(make_model(nodes, [("x", np.float32, x.shape)], outs, inits, opset=25), {"x": x})


def test_small_types_pad_with_their_own_constant_and_expand():
    """float8 / int4 data with a constant_value of the same type, against the ONNX reference."""
    from onnx.reference import ReferenceEvaluator
    nodes, outs, feeds, inits = [], [], {}, {"p": np.array([0, 1, 2, 0], np.int64),
                                             "shape": np.array([2, 1, 3], np.int64)}
    for dtype in (ml_dtypes.float8_e4m3fn, ml_dtypes.int4, ml_dtypes.float4_e2m1fn):
        n = np.dtype(dtype).name
        feeds[f"x_{n}"] = np.array([[1, -2, 3], [0.5, 4, -1]], np.float32).astype(dtype)
        inits[f"c_{n}"] = np.array(-3, np.float32).astype(dtype)
        nodes += [helper.make_node("Pad", [f"x_{n}", "p", f"c_{n}"], [f"pad_{n}"]),
                  helper.make_node("Expand", [f"x_{n}", "shape"], [f"ex_{n}"])]
        outs += [(f"pad_{n}", dtype, None), (f"ex_{n}", dtype, None)]
    m = make_model(nodes, [(k, v.dtype, v.shape) for k, v in feeds.items()], outs, inits, opset=25)
    got = aotc.compile(m).run(feeds)
    want = ReferenceEvaluator(m).run(None, feeds)
    for (name, dtype, _), w in zip(outs, want):
        assert got[name].dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got[name].view(np.uint8), w.view(np.uint8), err_msg=name)
