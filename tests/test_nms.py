"""NonMaxSuppression against onnxruntime: both box formats, several batches and classes,
ties, flipped corners, thresholds and limits given at run time (the row count is known
only then), absent optional inputs; the C under -Werror and sanitizers."""
import numpy as np
import pytest
from onnx import helper

import aotc
from oracle import check, make_model, reference
from sanitize import CC, assert_clean_c

INPUTS = ["boxes", "scores", "max_out", "iou", "score_threshold"]


def _boxes(batches, n, seed, center=False):
    rng = np.random.default_rng(seed)
    corner = rng.uniform(0, 10, (batches, n, 2))
    size = rng.uniform(0.5, 4, (batches, n, 2))
    if center:
        return np.concatenate([corner, size], axis=2).astype(np.float32)
    boxes = np.concatenate([corner, corner + size], axis=2)
    boxes[:, ::3] = boxes[:, ::3][..., [2, 3, 0, 1]]      # some boxes give their corners flipped
    return boxes.astype(np.float32)


def _model(batches, classes, n, center=0, inputs=INPUTS):
    node = helper.make_node("NonMaxSuppression", inputs, ["selected"], center_point_box=center)
    shapes = {"boxes": (batches, n, 4), "scores": (batches, classes, n), "max_out": (1,), "iou": (1,),
              "score_threshold": (1,)}
    types = {"max_out": np.int64}
    graph_inputs = [(name, types.get(name, np.float32), shapes[name]) for name in inputs if name]
    return make_model([node], graph_inputs, [("selected", np.int64, None)], opset=11)


@pytest.mark.parametrize("center", [0, 1])
@pytest.mark.parametrize("limit, iou, threshold", [(3, 0.3, 0.2), (100, 0.6, 0.0), (0, 0.5, 0.1)])
def test_against_onnxruntime(center, limit, iou, threshold):
    batches, classes, n = 2, 3, 17
    rng = np.random.default_rng(5)
    scores = rng.uniform(0, 1, (batches, classes, n)).astype(np.float32)
    scores[0, 0, :4] = 0.5          # ties go to the lower index
    feeds = {"boxes": _boxes(batches, n, 6, center), "scores": scores,
             "max_out": np.array([limit], np.int64), "iou": np.array([iou], np.float32),
             "score_threshold": np.array([threshold], np.float32)}
    check(_model(batches, classes, n, center), feeds)


def test_one_compile_serves_every_run_time_count():
    sess = aotc.compile(_model(1, 2, 9))
    rng = np.random.default_rng(7)
    for limit in (1, 4, 9):
        feeds = {"boxes": _boxes(1, 9, 8), "scores": rng.uniform(0, 1, (1, 2, 9)).astype(np.float32),
                 "max_out": np.array([limit], np.int64), "iou": np.array([0.4], np.float32),
                 "score_threshold": np.array([0.3], np.float32)}
        got = sess.run(feeds)["selected"]
        want, _ = reference(_model(1, 2, 9), feeds)
        np.testing.assert_array_equal(got, want["selected"])


def test_without_optional_inputs():
    boxes = _boxes(1, 6, 9)
    scores = np.random.default_rng(10).uniform(0, 1, (1, 1, 6)).astype(np.float32)
    check(_model(1, 1, 6, inputs=["boxes", "scores", "max_out"]),
          {"boxes": boxes, "scores": scores, "max_out": np.array([6], np.int64)})


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_runs_clean_under_sanitizers_and_warnings(tmp_path):
    assert_clean_c(tmp_path, _model(2, 2, 5, center=1), "nmssan")


@pytest.mark.parametrize("boxes_shape, scores_shape, words", [
    ((1, 5, 3), (1, 1, 5), "boxes must be"),
    ((1, 5, 4), (1, 1, 4), "does not fit"),
])
def test_invalid_shapes_are_named(boxes_shape, scores_shape, words):
    node = helper.make_node("NonMaxSuppression", ["boxes", "scores"], ["selected"])
    model = make_model([node], [("boxes", np.float32, boxes_shape), ("scores", np.float32, scores_shape)],
                       [("selected", np.int64, None)], opset=11)
    with pytest.raises(aotc.errors.InvalidModel, match=words):
        aotc.compile(model)
