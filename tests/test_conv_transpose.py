"""ConvTranspose against onnxruntime: 1-D to 3-D, group, strides, dilations, pads,
output_padding, output_shape, auto_pad, bias; errors; threads; sanitizers."""
import numpy as np
import pytest
from onnx import helper

import aotc
from oracle import assert_matches_ort, check_reference, make_model, random
from sanitize import CC, run_sanitized


def _model(x_shape, w_shape, variants, bias=True):
    """One ConvTranspose per attribute set, all on x and w (and b)."""
    ins = ["x", "w"] + (["b"] if bias else [])
    nodes = [helper.make_node("ConvTranspose", ins, [f"y{i}"], **attrs) for i, attrs in enumerate(variants)]
    cout = w_shape[1] * max(a.get("group", 1) for a in variants)
    inputs = [("x", np.float32, x_shape), ("w", np.float32, w_shape)] + ([("b", np.float32, (cout,))] if bias else [])
    return make_model(nodes, inputs, [(f"y{i}", np.float32, None) for i in range(len(variants))], opset=22)


def _feeds(x_shape, w_shape, cout=None):
    feeds = {"x": random(x_shape, seed=1), "w": random(w_shape, seed=2)}
    feeds["b"] = random((cout or w_shape[1],), seed=3)
    return feeds


def test_2d_attributes():
    variants = [{}, {"strides": [2, 3]}, {"strides": [2, 2], "pads": [1, 0, 2, 1]},
                {"dilations": [2, 1], "pads": [1, 1, 1, 1]},
                {"strides": [3, 2], "output_padding": [2, 1]},
                {"strides": [2, 2], "output_shape": [12, 9]},
                {"strides": [2, 2], "auto_pad": "SAME_UPPER"},
                {"strides": [2, 2], "auto_pad": "SAME_LOWER"},
                {"strides": [2, 1], "auto_pad": "VALID"},
                {"kernel_shape": [3, 2], "strides": [1, 2], "pads": [2, 1, 2, 1]}]
    x_shape, w_shape = (2, 3, 5, 4), (3, 4, 3, 2)
    assert_matches_ort(_model(x_shape, w_shape, variants), _feeds(x_shape, w_shape), rtol=1e-4, atol=1e-5)


def test_same_lower_with_uneven_padding_matches_the_reference():
    """The output is input x stride (the spec's rule, kept by the reference and the suite);
    onnxruntime makes it one shorter here."""
    x_shape, w_shape = (1, 2, 3, 4), (2, 3, 3, 2)
    check_reference(_model(x_shape, w_shape, [{"strides": [2, 3], "auto_pad": "SAME_LOWER"}]),
                             _feeds(x_shape, w_shape), rtol=1e-4, atol=1e-5)


def test_groups_1d_3d_and_no_bias():
    """Three inputs of different ranks in one model: one compile checks them all."""
    cases = [((1, 6, 5, 3), (6, 2, 3, 3), {"group": 3, "strides": [2, 1], "pads": [1, 1, 0, 2]}, True),
             ((2, 2, 7), (2, 3, 4), {"strides": [3], "dilations": [2]}, False),
             ((1, 2, 3, 4, 2), (2, 2, 2, 3, 2), {"strides": [2, 1, 2], "pads": [0, 1, 1, 1, 0, 0]}, True)]
    nodes, inputs, outputs, feeds = [], [], [], {}
    for i, (x_shape, w_shape, attrs, bias) in enumerate(cases):
        names = [f"x{i}", f"w{i}"] + ([f"b{i}"] if bias else [])
        shapes = [x_shape, w_shape, (w_shape[1] * attrs.get("group", 1),)]
        nodes.append(helper.make_node("ConvTranspose", names, [f"y{i}"], **attrs))
        outputs.append((f"y{i}", np.float32, None))
        for k, (name, shape) in enumerate(zip(names, shapes)):
            inputs.append((name, np.float32, shape))
            feeds[name] = random(shape, seed=10 * i + k)
    model = make_model(nodes, inputs, outputs, opset=22)
    assert_matches_ort(model, feeds, rtol=1e-4, atol=1e-5)


def test_blocks_of_columns_and_threads():
    """Big enough for two blocks of columns; bit-identical for 1 and 2 threads."""
    x_shape, w_shape = (1, 8, 70, 70), (8, 8, 4, 4)
    model = _model(x_shape, w_shape, [{"strides": [2, 2], "pads": [1, 1, 1, 1]}])
    feeds = _feeds(x_shape, w_shape)
    one = assert_matches_ort(model, feeds, rtol=1e-4, atol=1e-4, threads=1)["y0"]
    two = aotc.compile(model, threads=2).run(feeds)["y0"]
    assert one.tobytes() == two.tobytes()


@pytest.mark.parametrize("x_shape, w_shape, attrs, words", [
    ((1, 4, 5, 5), (3, 2, 3, 3), {}, "channels"),
    ((1, 4, 5, 5), (4, 2, 3, 3), {"group": 3}, "group"),
    ((1, 4, 5, 5), (4, 2, 3, 3), {"kernel_shape": [3, 2]}, "kernel_shape"),
    ((1, 4, 5, 5), (4, 2, 3, 3), {"strides": [1]}, "strides"),
    ((1, 4, 5, 5), (4, 2, 3, 3), {"pads": [4, 4, 4, 4]}, "not positive"),
    ((1, 4, 5, 5), (4, 2, 3, 3), {"auto_pad": "SAME"}, "auto_pad"),
])
def test_invalid_models(x_shape, w_shape, attrs, words):
    with pytest.raises(aotc.InvalidModel, match=words):
        aotc.compile(_model(x_shape, w_shape, [attrs], bias=False))


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_runs_clean_under_sanitizers(tmp_path):
    model = _model((1, 4, 5, 3), (4, 3, 3, 2), [{"group": 2, "strides": [2, 3], "pads": [1, 0, 0, 2],
                                                 "output_padding": [1, 1]}])
    sess = aotc.compile(model, out_dir=tmp_path, name="convt")
    assert run_sanitized(tmp_path, sess.name).split()[0] == "y0"
