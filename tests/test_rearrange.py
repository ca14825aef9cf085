"""Split, Tile, DepthToSpace, SpaceToDepth, CenterCropPad, ReverseSequence, Col2Im,
Trilu, EyeLike, OneHot and Range against onnxruntime (onnx.reference where
onnxruntime lacks an opset, mode or type): odd sizes, negative axes, every mode and
the cases the node suite leaves out."""
import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

import aotc
from oracle import check, make_model

F16, BF16 = np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)


def _node(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, **attrs)


def test_split_every_form():
    x = np.arange(2 * 7 * 3, dtype=np.int8).reshape(2, 7, 3)
    nodes = [_node("Split", ["x"], ["a0", "a1", "a2"], axis=1, num_outputs=3),      # 3, 3, 1
             _node("Split", ["x", "s"], ["b0", "b1", "b2"], axis=-2),                # 0, 5, 2
             _node("Split", ["x"], ["c0", "c1", "c2"], axis=2)]                      # equal
    outs = [o for n in nodes for o in n.output]
    m = make_model(nodes, [("x", np.int8, x.shape)], [(o, np.int8, None) for o in outs],
                   {"s": np.array([0, 5, 2], np.int64)}, opset=18)
    check(m, {"x": x})
    m = make_model([_node("Split", ["x"], ["a", "b"], axis=1, split=[2, 5])], [("x", np.int8, x.shape)],
                   [("a", np.int8, None), ("b", np.int8, None)], opset=11)
    check(m, {"x": x})


def test_split_that_does_not_divide_is_refused():
    m = make_model([_node("Split", ["x"], ["a", "b"], axis=0)], [("x", np.float32, (5,))],
                   [("a", np.float32, None), ("b", np.float32, None)], opset=13)
    with pytest.raises(aotc.InvalidModel, match="does not split evenly"):
        aotc.compile(m)


@pytest.mark.parametrize("dtype", [np.float32, np.bool_, F16])
def test_tile_with_ones_and_a_zero_repeat(dtype):
    x = (np.arange(2 * 3 * 5) % 3).astype(dtype).reshape(2, 3, 5)
    nodes = [_node("Tile", ["x", "r0"], ["y0"]), _node("Tile", ["x", "r1"], ["y1"])]
    m = make_model(nodes, [("x", dtype, x.shape)], [("y0", dtype, None), ("y1", dtype, None)],
                   {"r0": np.array([3, 1, 2], np.int64), "r1": np.array([1, 0, 2], np.int64)}, opset=13)
    check(m, {"x": x}, threads=2)


@pytest.mark.parametrize("opset", [13, 28])
def test_depth_to_space_and_space_to_depth_both_modes(opset):
    x = np.arange(2 * 8 * 2 * 3, dtype=np.float32).reshape(2, 8, 2, 3)
    s = np.arange(1 * 3 * 4 * 6, dtype=np.float32).reshape(1, 3, 4, 6)
    nodes = [_node("DepthToSpace", ["x"], ["dcr"], blocksize=2, mode="DCR"),
             _node("DepthToSpace", ["x"], ["crd"], blocksize=2, mode="CRD"),
             _node("SpaceToDepth", ["s"], ["s2d"], blocksize=2)]
    if opset >= 28:
        nodes.append(_node("SpaceToDepth", ["s"], ["s2d_crd"], blocksize=2, mode="CRD"))
    m = make_model(nodes, [("x", np.float32, x.shape), ("s", np.float32, s.shape)],
                   [(n.output[0], np.float32, None) for n in nodes], opset=opset)
    check(m, {"x": x, "s": s}, oracle="onnxruntime" if opset < 28 else "onnx.reference")


def test_center_crop_pad_axes_and_odd_differences():
    x = np.arange(5 * 6 * 3, dtype=np.float32).reshape(5, 6, 3)
    nodes = [_node("CenterCropPad", ["x", "s0"], ["y0"]),                       # crop, pad, same
             _node("CenterCropPad", ["x", "s1"], ["y1"], axes=[-2, 0]),          # pad 6->9, crop 5->2
             _node("CenterCropPad", ["x", "s2"], ["y2"], axes=[2])]
    m = make_model(nodes, [("x", np.float32, x.shape)], [(n.output[0], np.float32, None) for n in nodes],
                   {"s0": np.array([2, 9, 3], np.int64), "s1": np.array([9, 2], np.int64),
                    "s2": np.array([8], np.int64)}, opset=18)
    check(m, {"x": x}, oracle="onnx.reference")


@pytest.mark.parametrize("time_axis,batch_axis", [(0, 1), (1, 0)])
def test_reverse_sequence_with_inner_dims(time_axis, batch_axis):
    x = np.arange(5 * 4 * 2 * 3, dtype=np.float32).reshape(5, 4, 2, 3)
    lens = np.array([1, 0, 4, 3, 2][:x.shape[batch_axis]], np.int64)
    m = make_model([_node("ReverseSequence", ["x", "l"], ["y"], time_axis=time_axis, batch_axis=batch_axis)],
                   [("x", np.float32, x.shape), ("l", np.int64, lens.shape)], [("y", np.float32, None)])
    check(m, {"x": x, "l": lens})
    bad = lens.copy()
    bad[0] = x.shape[time_axis] + 1
    with pytest.raises(aotc.AotcError, match="code 3"):
        aotc.compile(m).run({"x": x, "l": bad})


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_col2im_3d_with_strides_pads_and_dilations(dtype):
    image, block = [5, 6, 4], [2, 2, 1]
    pads, strides, dil = [1, 0, 0, 0, 1, 0], [2, 1, 1], [1, 2, 1]
    blocks = [(image[d] + pads[d] + pads[d + 3] - dil[d] * (block[d] - 1) - 1) // strides[d] + 1 for d in range(3)]
    x = np.random.default_rng(0).standard_normal((2, 3 * 4, int(np.prod(blocks)))).astype(dtype)
    m = make_model([_node("Col2Im", ["x", "i", "b"], ["y"], pads=pads, strides=strides, dilations=dil)],
                   [("x", dtype, x.shape)], [("y", dtype, None)],
                   {"i": np.array(image, np.int64), "b": np.array(block, np.int64)}, opset=18)
    check(m, {"x": x}, oracle="onnx.reference", rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.bool_, BF16, np.int64])
def test_trilu_batches_and_extreme_k(dtype):
    x = (np.arange(2 * 3 * 4 * 5) % 4 + 1).astype(dtype).reshape(2, 3, 4, 5)
    nodes, inits = [], {}
    for j, (k, upper) in enumerate([(-2, 1), (3, 1), (9, 1), (-9, 0), (1, 0), (-100, 1)]):
        inits[f"k{j}"] = np.array(k, np.int64)
        nodes.append(_node("Trilu", ["x", f"k{j}"], [f"y{j}"], upper=upper))
    nodes.append(_node("Trilu", ["x"], ["lower"], upper=0))
    m = make_model(nodes, [("x", dtype, x.shape)], [(n.output[0], dtype, None) for n in nodes], inits, opset=14)
    check(m, {"x": x}, oracle="onnx.reference")


def test_eye_like_types_and_offsets():
    nodes = [_node("EyeLike", ["x"], ["y0"]),
             _node("EyeLike", ["x"], ["y1"], k=-2, dtype=TensorProto.INT32),
             _node("EyeLike", ["x"], ["y2"], k=5, dtype=TensorProto.BOOL),
             _node("EyeLike", ["x"], ["y3"], k=1, dtype=TensorProto.FLOAT16)]
    m = make_model(nodes, [("x", np.float64, (4, 6))],
                   [("y0", np.float64, None), ("y1", np.int32, None), ("y2", np.bool_, None),
                    ("y3", F16, None)], opset=9)
    check(m, {"x": np.zeros((4, 6))}, oracle="onnx.reference")


@pytest.mark.parametrize("index_type", [np.int64, np.float32, np.uint8, np.int8])
def test_one_hot_axes_negative_and_out_of_range_indices(index_type):
    indices = np.array([[0, -1, 3], [7, -4, 2]]).astype(index_type) if np.dtype(index_type).kind != "u" \
        else np.array([[0, 1, 3], [7, 200, 2]], index_type)
    nodes = [_node("OneHot", ["i", "d", "v"], ["y0"], axis=0),
             _node("OneHot", ["i", "d", "v"], ["y1"], axis=1),
             _node("OneHot", ["i", "d", "v"], ["y2"])]
    m = make_model(nodes, [("i", index_type, indices.shape), ("v", np.int32, (2,))],
                   [(n.output[0], np.int32, None) for n in nodes], {"d": np.array(4, np.int64)}, opset=11)
    check(m, {"i": indices, "v": np.array([-3, 9], np.int32)}, oracle="onnx.reference")


def test_range_types_and_a_range_too_large_to_fold():
    cases = {"f": (np.float32, 1.5, -2.25, -0.5), "i": (np.int32, -7, 20, 3), "l": (np.int64, 5, 5, 1),
             "d": (np.float64, 0, 1, 0.1), "big": (np.int64, 0, 20000, 1)}
    nodes, inits = [], {}
    for key, (dtype, start, limit, delta) in cases.items():
        for part, v in zip("sld", (start, limit, delta)):
            inits[f"{key}_{part}"] = np.array(v, dtype)
        nodes.append(_node("Range", [f"{key}_s", f"{key}_l", f"{key}_d"], [key]))
    nodes.append(_node("Neg", ["big"], ["y"]))      # consumed: stays a value of the plan
    m = make_model(nodes, [], [(k, v[0], None) for k, v in cases.items() if k != "big"] +
                   [("y", np.int64, None)], inits, opset=11)
    check(m, {})
