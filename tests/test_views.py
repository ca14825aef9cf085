"""Reshape, Flatten, Squeeze, Unsqueeze and Identity: views that share storage."""
import numpy as np
import pytest
from onnx import helper

import aotc
from aotc.plan.memory import STAGGER, align
from oracle import assert_matches_ort, make_model, random


def _relu_then(node, x_shape, inits=None, opset=17, dtype=np.float32, extra_inputs=()):
    """x -> Relu -> node -> Neg: the view sits between two emitted nodes."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), node, helper.make_node("Neg", ["v"], ["y"])]
    return make_model(nodes, [("x", dtype, x_shape)] + list(extra_inputs), [("y", dtype, None)],
                      inits, opset=opset)


@pytest.mark.parametrize("x_shape,shape", [
    ((2, 3, 4), [4, -1]), ((2, 3, 4), [0, 0, -1]), ((2, 3, 4), [-1]), ((6, 5), [3, 0, 2, -1]),
    ((1, 7), [7]), ((3, 5, 1), [0, 5]), ((24,), [2, 3, 2, 2]),
])
def test_reshape(x_shape, shape):
    node = helper.make_node("Reshape", ["r", "s"], ["v"])
    m = _relu_then(node, x_shape, {"s": np.array(shape, np.int64)})
    assert_matches_ort(m, {"x": random(x_shape)})


def test_reshape_allowzero_keeps_zero_dims():
    node = helper.make_node("Reshape", ["x", "s"], ["y"], allowzero=1)
    m = make_model([node], [("x", np.float32, (0, 3))], [("y", np.float32, None)],
                   {"s": np.array([3, 0], np.int64)}, opset=14)
    got = assert_matches_ort(m, {"x": np.zeros((0, 3), np.float32)}, shapes={"x": (0, 3)})
    assert got["y"].shape == (3, 0)


def test_reshape_of_an_input_straight_to_an_output():
    m = make_model([helper.make_node("Reshape", ["x", "s"], ["y"])], [("x", np.int64, (3, 4))],
                   [("y", np.int64, None)], {"s": np.array([2, -1, 2], np.int64)})
    assert_matches_ort(m, {"x": random((3, 4), np.int64, low=-100, high=100)})


def test_reshape_with_a_run_time_shape_is_unsupported():
    m = make_model([helper.make_node("Reshape", ["x", "s"], ["y"])],
                   [("x", np.float32, (2, 3)), ("s", np.int64, (2,))], [("y", np.float32, None)])
    with pytest.raises(aotc.Unsupported, match=r"input 1 \(shape\) must be a compile-time constant"):
        aotc.compile(m)


@pytest.mark.parametrize("shape", [[-1, -1], [5, -1], [7]])
def test_reshape_rejects_impossible_shapes(shape):
    m = make_model([helper.make_node("Reshape", ["x", "s"], ["y"])], [("x", np.float32, (2, 3))],
                   [("y", np.float32, None)], {"s": np.array(shape, np.int64)})
    with pytest.raises(aotc.InvalidModel):
        aotc.compile(m)


@pytest.mark.parametrize("axis", [-3, -2, -1, 0, 1, 2, 3])
@pytest.mark.parametrize("opset", [9, 13])
def test_flatten(axis, opset):
    if opset < 11 and axis < 0:
        pytest.skip("negative axes exist from opset 11")
    node = helper.make_node("Flatten", ["r"], ["v"], axis=axis)
    m = _relu_then(node, (2, 3, 5), opset=opset)
    assert_matches_ort(m, {"x": random((2, 3, 5))})


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("x_shape,axes", [((1, 3, 1, 5), [0]), ((1, 3, 1, 5), [-2, 0]),
                                           ((1, 3, 1, 5), None), ((1, 1), None), ((4, 1), [1])])
def test_squeeze(opset, x_shape, axes):
    inits = {}
    if axes is None:
        node = helper.make_node("Squeeze", ["r"], ["v"])
    elif opset < 13:
        node = helper.make_node("Squeeze", ["r"], ["v"], axes=axes)
    else:
        node = helper.make_node("Squeeze", ["r", "axes"], ["v"])
        inits = {"axes": np.array(axes, np.int64)}
    m = _relu_then(node, x_shape, inits, opset=opset)
    assert_matches_ort(m, {"x": random(x_shape)})


def test_squeeze_rejects_an_axis_that_is_not_1():
    m = make_model([helper.make_node("Squeeze", ["x"], ["y"], axes=[1])],
                   [("x", np.float32, (1, 3))], [("y", np.float32, None)], opset=11)
    with pytest.raises(aotc.InvalidModel, match="size is not 1"):
        aotc.compile(m)


@pytest.mark.parametrize("opset", [9, 11, 13, 21])
@pytest.mark.parametrize("x_shape,axes", [((3, 5), [0]), ((3, 5), [-1]), ((3, 5), [3, 0]),
                                           ((), [0, 1]), ((2,), [1, -1])])
def test_unsqueeze(opset, x_shape, axes):
    if opset < 11 and any(a < 0 for a in axes):
        pytest.skip("negative axes exist from opset 11")
    inits = {}
    if opset < 13:
        node = helper.make_node("Unsqueeze", ["r"], ["v"], axes=axes)
    else:
        node = helper.make_node("Unsqueeze", ["r", "axes"], ["v"])
        inits = {"axes": np.array(axes, np.int64)}
    m = _relu_then(node, x_shape, inits, opset=opset)
    assert_matches_ort(m, {"x": random(x_shape)})


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_identity_from_input_to_output(dtype):
    m = make_model([helper.make_node("Identity", ["x"], ["y"])], [("x", dtype, (3, 4))],
                   [("y", dtype, None)])
    assert_matches_ort(m, {"x": random((3, 4), dtype, low=-9, high=9)})


def test_views_share_storage_and_are_not_emitted():
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Unsqueeze", ["r", "a"], ["u"]),
             helper.make_node("Flatten", ["u"], ["f"], axis=2),
             helper.make_node("Identity", ["f"], ["i"]),
             helper.make_node("Reshape", ["i", "s"], ["v"]),
             helper.make_node("Add", ["v", "v"], ["y"])]
    m = make_model(nodes, [("x", np.float32, (4, 6))], [("y", np.float32, None)],
                   {"a": np.array([0], np.int64), "s": np.array([6, 4], np.int64)})
    sess = aotc.compile(m)
    assert set(sess.report["nodes_after"]) == {"Relu", "Add"}
    assert sess.report["workspace_bytes"] <= align(4 * 6 * 4) + STAGGER   # one block: views add none
    assert_matches_ort(m, {"x": random((4, 6))})


def test_views_of_constants_fold():
    nodes = [helper.make_node("Reshape", ["w", "s"], ["t"]),
             helper.make_node("Squeeze", ["t"], ["u"], axes=[0]),
             helper.make_node("Add", ["x", "u"], ["y"])]
    m = make_model(nodes, [("x", np.float32, (3, 4))], [("y", np.float32, None)],
                   {"w": random((12,), seed=3), "s": np.array([1, 3, 4], np.int64)}, opset=11)
    sess = aotc.compile(m)
    assert sess.report["nodes_after"] == {"Add": 1}
    assert_matches_ort(m, {"x": random((3, 4))})


def test_shape_gather_concat_reshape_chain_folds():
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
             helper.make_node("Unsqueeze", ["batch", "axes0"], ["batch1"]),
             helper.make_node("Cast", ["batch1"], ["batch_f"], to=1),
             helper.make_node("Cast", ["batch_f"], ["batch_i"], to=7),
             helper.make_node("Concat", ["batch_i", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["flat"]),
             helper.make_node("Relu", ["flat"], ["y"])]
    m = make_model(nodes, [("x", np.float32, ("n", 3, 5))], [("y", np.float32, None)],
                   {"zero": np.array(0, np.int64), "axes0": np.array([0], np.int64),
                    "minus1": np.array([-1], np.int64)}, opset=13)
    sess = aotc.compile(m, shapes={"x": (4, 3, 5)})
    after = sess.report["nodes_after"]
    assert not {"Shape", "Gather", "Concat", "Cast", "Unsqueeze"} & set(after), after
    assert after == {"Relu": 1}
    assert_matches_ort(m, {"x": random((4, 3, 5))}, shapes={"x": (4, 3, 5)})


def test_views_at_opset_25():
    """Opsets 23-28 only add element types to these: the same answers as before."""
    x = random((2, 1, 3, 4))
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"]),
             helper.make_node("Reshape", ["empty", "s0"], ["r0"], allowzero=1),
             helper.make_node("Flatten", ["x"], ["f"], axis=-2),
             helper.make_node("Squeeze", ["x", "a1"], ["sq"]),
             helper.make_node("Unsqueeze", ["x", "a2"], ["un"]),
             helper.make_node("Identity", ["x"], ["i"])]
    inits = {"s": np.array([0, -1, 2], np.int64), "s0": np.array([3, 0], np.int64),
             "a1": np.array([1], np.int64), "a2": np.array([0, -1], np.int64)}
    feeds = {"x": x, "empty": np.zeros((0, 3), np.float32)}
    outs = [(n.output[0], np.float32, None) for n in nodes]
    m = make_model(nodes, [(k, v.dtype, v.shape) for k, v in feeds.items()], outs, inits, opset=25)
    got = assert_matches_ort(m, feeds, shapes={k: v.shape for k, v in feeds.items()})
    assert got["r0"].shape == (3, 0)
