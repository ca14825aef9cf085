"""RoiAlign, MaxRoiPool and DeformConv against onnxruntime: modes, coordinate
transformations, sampling ratios, boxes reaching outside the map; groups, offset
groups, masks, strides, pads, dilations; bad batch indices; sanitizers."""
import numpy as np
import pytest
from onnx import helper

import aotc
from oracle import assert_matches_ort, make_model, random
from sanitize import CC, run_sanitized

X_SHAPE = (2, 3, 9, 11)
ROIS = np.array([[0.5, 1.0, 6.0, 7.5], [-2.0, -1.0, 4.0, 3.0], [3.0, 2.0, 12.0, 10.0],
                 [5.0, 5.0, 5.2, 5.1], [1.0, 1.0, 9.5, 8.0]], np.float32)
BATCH = np.array([0, 1, 1, 0, 1], np.int64)


def _roi_align_model():
    nodes, outputs = [], []
    for mode in ("avg", "max"):
        for transform in ("half_pixel", "output_half_pixel"):
            for ratio, scale in ((0, 1.0), (2, 0.5)):
                name = f"y_{mode}_{transform}_{ratio}"
                nodes.append(helper.make_node("RoiAlign", ["x", "rois", "idx"], [name], mode=mode,
                                              coordinate_transformation_mode=transform, sampling_ratio=ratio,
                                              spatial_scale=scale, output_height=3, output_width=4))
                outputs.append((name, np.float32, None))
    inputs = [("x", np.float32, X_SHAPE), ("rois", np.float32, ROIS.shape), ("idx", np.int64, BATCH.shape)]
    return make_model(nodes, inputs, outputs, opset=21)


def test_roi_align():
    feeds = {"x": random(X_SHAPE), "rois": ROIS, "idx": BATCH}
    assert_matches_ort(_roi_align_model(), feeds, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("bad", [2, -1])
def test_roi_align_bad_batch_index_is_a_run_time_error(bad):
    sess = aotc.compile(_roi_align_model())
    with pytest.raises(aotc.AotcError, match="code 3"):
        sess.run({"x": random(X_SHAPE), "rois": ROIS, "idx": np.array([0, 1, bad, 0, 1], np.int64)})


def test_max_roi_pool():
    rois = np.concatenate([BATCH[:, None].astype(np.float32), ROIS * 1.3], axis=1)
    nodes = [helper.make_node("MaxRoiPool", ["x", "rois"], ["y0"], pooled_shape=[2, 3]),
             helper.make_node("MaxRoiPool", ["x", "rois"], ["y1"], pooled_shape=[4, 1], spatial_scale=0.5)]
    model = make_model(nodes, [("x", np.float32, X_SHAPE), ("rois", np.float32, rois.shape)],
                       [("y0", np.float32, None), ("y1", np.float32, None)], opset=21)
    assert_matches_ort(model, {"x": random(X_SHAPE), "rois": rois})
    rois[2, 0] = 2.0
    with pytest.raises(aotc.AotcError, match="code 3"):
        aotc.compile(model).run({"x": random(X_SHAPE), "rois": rois})


def _deform_model(x_shape, w_shape, out_hw, offset_group, attrs, mask=True, bias=True, prefix=""):
    """One DeformConv whose inputs and output are named with `prefix`, and its feeds."""
    taps = w_shape[2] * w_shape[3]
    batch = x_shape[0]
    shapes = {"x": x_shape, "w": w_shape, "off": (batch, offset_group * taps * 2) + out_hw,
              "b": (w_shape[0],), "m": (batch, offset_group * taps) + out_hw}
    used = ["x", "w", "off"] + (["b"] if bias or mask else []) + (["m"] if mask else [])
    ins = [prefix + k if (k != "b" or bias) else "" for k in used]
    node = helper.make_node("DeformConv", ins, [prefix + "y"], offset_group=offset_group, **attrs)
    ranges = {"off": (-1.7, 1.7), "m": (0.0, 1.0)}      # offsets reach past the borders
    feeds = {}
    for i, k in enumerate(used):
        if k != "b" or bias:
            low, high = ranges.get(k, (-2.0, 2.0))
            feeds[prefix + k] = random(shapes[k], seed=i + 1, low=low, high=high)
    inputs = [(name, np.float32, feeds[name].shape) for name in ins if name]
    return make_model([node], inputs, [(prefix + "y", np.float32, None)], opset=22), feeds


def _merge(model, other):
    """Add other's nodes, inputs and outputs (named apart) to model."""
    model.graph.node.extend(other.graph.node)
    model.graph.input.extend(other.graph.input)
    model.graph.output.extend(other.graph.output)


DEFORM_CASES = [   # x shape, w shape, output size, offset_group, attributes, mask, bias
    ((2, 4, 6, 7), (6, 2, 3, 3), (4, 5), 2, {"group": 2}, True, True),
    ((1, 3, 7, 6), (2, 3, 2, 3), (4, 2), 3, {"strides": [2, 2], "pads": [1, 0, 1, 1], "dilations": [1, 2]},
     False, False),
    ((1, 64, 34, 34), (2, 64, 3, 3), (32, 32), 1, {}, True, True),     # two blocks of columns
]


def test_deform_conv():
    """Every case in one model (inputs named per case): one compile checks them all."""
    models = [_deform_model(*case, prefix=f"c{i}_") for i, case in enumerate(DEFORM_CASES)]
    model, feeds = models[0]
    for other, other_feeds in models[1:]:
        _merge(model, other)
        feeds.update(other_feeds)
    assert_matches_ort(model, feeds, rtol=1e-4, atol=1e-5)


def test_deform_conv_offset_shape_is_checked():
    model, _ = _deform_model((1, 2, 5, 5), (2, 2, 3, 3), (4, 4), 1, {})     # output is 3 x 3
    with pytest.raises(aotc.InvalidModel, match="offset"):
        aotc.compile(model)


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_runs_clean_under_sanitizers(tmp_path):
    model = _roi_align_model()
    _merge(model, _deform_model(*DEFORM_CASES[0], prefix="d_")[0])
    sess = aotc.compile(model, out_dir=tmp_path, name="roi")
    assert run_sanitized(tmp_path, sess.name).split()[0].startswith("y_")
