"""LpPool and MaxUnpool against onnxruntime (MaxUnpool with output_shape against the
ONNX reference): windows in 1-D to 3-D, p = 1, 2, 3; unpooling MaxPool's indices;
bad indices at run time; sanitizers."""
import numpy as np
import pytest
from onnx import helper

import aotc
from oracle import assert_matches_ort, check_reference, make_model, random
from sanitize import CC, run_sanitized

LP_2D = [dict(kernel_shape=[3, 3], p=2),
         dict(kernel_shape=[2, 3], p=1, strides=[2, 1], pads=[1, 0, 1, 2]),
         dict(kernel_shape=[3, 2], p=3, strides=[2, 2], dilations=[2, 1], pads=[1, 1, 1, 1]),
         dict(kernel_shape=[2, 2], p=2, strides=[2, 2], ceil_mode=1),
         dict(kernel_shape=[3, 3], p=2, strides=[2, 2], auto_pad="SAME_UPPER"),
         dict(kernel_shape=[2, 4], p=2, auto_pad="SAME_LOWER")]


def _lp_model(shape, variants):
    nodes = [helper.make_node("LpPool", ["x"], [f"y{i}"], **attrs) for i, attrs in enumerate(variants)]
    return make_model(nodes, [("x", np.float32, shape)], [(f"y{i}", np.float32, None) for i in range(len(variants))],
                      opset=18)


def test_lp_pool_windows():
    assert_matches_ort(_lp_model((2, 3, 7, 9), LP_2D), {"x": random((2, 3, 7, 9))}, rtol=1e-5, atol=1e-5)
    assert_matches_ort(_lp_model((1, 2, 11), [dict(kernel_shape=[4], strides=[3], pads=[2, 1], p=3)]),
                       {"x": random((1, 2, 11))}, rtol=1e-5, atol=1e-5)
    assert_matches_ort(_lp_model((1, 2, 4, 5, 3), [dict(kernel_shape=[2, 3, 2], pads=[1, 0, 1, 0, 1, 0])]),
                       {"x": random((1, 2, 4, 5, 3))}, rtol=1e-5, atol=1e-5)


def test_lp_pool_p_below_one_is_invalid():
    with pytest.raises(aotc.InvalidModel, match="p = 0"):
        aotc.compile(_lp_model((1, 1, 4, 4), [dict(kernel_shape=[2, 2], p=0)]))


def _unpool_model(shape, pool_attrs, output_shape=None):
    """MaxPool with indices, then MaxUnpool of its values and indices."""
    nodes = [helper.make_node("MaxPool", ["x"], ["v", "i"], **pool_attrs),
             helper.make_node("MaxUnpool", ["v", "i"] + (["s"] if output_shape else []), ["y"], **pool_attrs)]
    inits = {"s": np.array(output_shape, np.int64)} if output_shape else {}
    return make_model(nodes, [("x", np.float32, shape)], [("y", np.float32, None)], inits, opset=22)


@pytest.mark.parametrize("shape, attrs", [
    ((2, 3, 6, 8), dict(kernel_shape=[2, 2], strides=[2, 2])),
    ((1, 2, 7, 5), dict(kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 1, 1])),
    ((1, 2, 9), dict(kernel_shape=[3], strides=[3])),
])
def test_max_unpool_of_max_pool(shape, attrs):
    assert_matches_ort(_unpool_model(shape, attrs), {"x": random(shape)})


def test_max_unpool_output_shape_matches_the_reference():
    """The unpooled block sits at the start of the larger output (the reference and the
    suite); onnxruntime instead reads the indices in the output's own layout."""
    model = _unpool_model((1, 2, 6, 6), dict(kernel_shape=[2, 2], strides=[2, 2]), [1, 2, 7, 8])
    check_reference(model, {"x": random((1, 2, 6, 6))})


@pytest.mark.parametrize("bad", [16, -1])
def test_max_unpool_bad_index_is_a_run_time_error(bad):
    node = helper.make_node("MaxUnpool", ["v", "i"], ["y"], kernel_shape=[2, 2], strides=[2, 2])
    model = make_model([node], [("v", np.float32, (1, 1, 2, 2)), ("i", np.int64, (1, 1, 2, 2))],
                       [("y", np.float32, None)], opset=22)
    sess = aotc.compile(model)
    v = random((1, 1, 2, 2))
    assert sess.run({"v": v, "i": np.array([0, 3, 12, 15], np.int64).reshape(1, 1, 2, 2)})["y"].shape == (1, 1, 4, 4)
    with pytest.raises(aotc.AotcError, match="code 3"):
        sess.run({"v": v, "i": np.array([0, 3, bad, 15], np.int64).reshape(1, 1, 2, 2)})


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_runs_clean_under_sanitizers(tmp_path):
    model = _unpool_model((1, 2, 7, 5), dict(kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 1, 1]), [1, 2, 8, 7])
    lp = _lp_model((1, 2, 7, 5), LP_2D[1:3])
    model.graph.node.extend(lp.graph.node)
    model.graph.output.extend(lp.graph.output)
    sess = aotc.compile(model, out_dir=tmp_path, name="unpool")
    assert run_sanitized(tmp_path, sess.name).split()[0] == "y"
