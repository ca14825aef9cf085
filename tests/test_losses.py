"""SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss against onnxruntime (and the
ONNX reference for bfloat16): every reduction, weights, ignore_index, the log_prob
output, int32 and int64 targets, odd shapes; bad targets at run time."""
import ml_dtypes
import numpy as np
import pytest
from onnx import helper

import aotc
from oracle import assert_matches_ort, check_reference, make_model, random
from sanitize import CC, run_sanitized

SHAPE = (3, 5, 2, 3)           # N, C, d1, d2
VARIANTS = [                   # (op, attributes, with weight, with log_prob)
    ("SoftmaxCrossEntropyLoss", {"reduction": "none"}, False, True),
    ("SoftmaxCrossEntropyLoss", {"reduction": "sum", "ignore_index": 2}, True, False),
    ("SoftmaxCrossEntropyLoss", {"reduction": "mean", "ignore_index": -1}, False, True),
    ("SoftmaxCrossEntropyLoss", {"reduction": "mean"}, True, False),
    ("NegativeLogLikelihoodLoss", {"reduction": "none", "ignore_index": 4}, True, False),
    ("NegativeLogLikelihoodLoss", {"reduction": "sum"}, False, False),
    ("NegativeLogLikelihoodLoss", {"reduction": "mean", "ignore_index": 1}, True, False),
    ("NegativeLogLikelihoodLoss", {}, False, False),
]


def _model(dtype, target_dtype=np.int64, shape=SHAPE, variants=VARIANTS, opset=22):
    nodes, outputs = [], []
    for i, (op, attrs, weighted, log_prob) in enumerate(variants):
        ins = ["x", "t"] + (["w"] if weighted else [])
        outs = [f"loss{i}"] + ([f"logp{i}"] if log_prob else [])
        nodes.append(helper.make_node(op, ins, outs, **attrs))
        outputs += [(name, dtype, None) for name in outs]
    inputs = [("x", dtype, shape), ("t", target_dtype, (shape[0],) + shape[2:]), ("w", dtype, (shape[1],))]
    return make_model(nodes, inputs, outputs, opset=opset)


def _feeds(dtype, target_dtype=np.int64, shape=SHAPE, seed=0):
    rng = np.random.default_rng(seed)
    target = rng.integers(0, shape[1], size=(shape[0],) + shape[2:]).astype(target_dtype)
    target.flat[::4] = 2      # some ignored entries for the variants ignoring 2
    target.flat[1] = -1
    target.flat[-1] = 4
    target = np.minimum(target, shape[1] - 1)
    # -1 is valid only where it is ignored: keep it for those variants, 0 elsewhere
    return {"x": random(shape, dtype, seed=seed), "t": target,
            "w": random((shape[1],), dtype, seed=seed + 1, low=0.1, high=1.5)}


def _valid_everywhere(feeds):
    feeds = dict(feeds)
    feeds["t"] = np.where(feeds["t"] < 0, 0, feeds["t"]).astype(feeds["t"].dtype)
    return feeds


@pytest.mark.parametrize("dtype, tol", [(np.float32, 1e-5), (np.float64, 1e-12)])
@pytest.mark.parametrize("target_dtype", [np.int64, np.int32])
def test_matches_onnxruntime(dtype, tol, target_dtype):
    feeds = _valid_everywhere(_feeds(dtype, target_dtype))
    assert_matches_ort(_model(dtype, target_dtype), feeds, rtol=tol, atol=tol)


def test_ignore_index_minus_one_with_negative_targets():
    variants = [v for v in VARIANTS if v[1].get("ignore_index") == -1]
    assert_matches_ort(_model(np.float32, variants=variants), _feeds(np.float32))


@pytest.mark.parametrize("shape", [(4, 3), (2, 7, 5), (1, 2, 1, 1, 3)])
def test_shapes(shape):
    assert_matches_ort(_model(np.float32, shape=shape), _valid_everywhere(_feeds(np.float32, shape=shape)))


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_half_types_match_the_reference(dtype):
    model = _model(dtype)
    feeds = _valid_everywhere(_feeds(np.float32))
    feeds = {k: (v.astype(dtype) if v.dtype == np.float32 else v) for k, v in feeds.items()}
    check_reference(model, feeds, rtol=2e-2, atol=2e-2)


def test_all_targets_ignored_gives_nan_mean():
    variants = [("NegativeLogLikelihoodLoss", {"reduction": "mean", "ignore_index": 1}, False, False)]
    feeds = _feeds(np.float32)
    feeds["t"][...] = 1
    got = aotc.compile(_model(np.float32, variants=variants)).run(feeds)
    assert np.isnan(got["loss0"])


@pytest.mark.parametrize("bad", [5, -1, 2**62, -2**63])
def test_target_out_of_range_is_a_run_time_error(bad):
    variants = VARIANTS[:2] + VARIANTS[4:6]
    sess = aotc.compile(_model(np.float32, variants=variants))
    feeds = _valid_everywhere(_feeds(np.float32))
    feeds["t"] = np.where(feeds["t"] == 2, 3, feeds["t"])    # nothing ignored by ignore_index=2
    sess.run(feeds)
    feeds["t"].flat[3] = bad
    with pytest.raises(aotc.AotcError, match="code 3"):
        sess.run(feeds)


@pytest.mark.parametrize("target_shape, weight_shape, attrs, words", [
    ((3, 2), (5,), {}, "target shape"),
    ((3, 2, 3), (4,), {}, "weight"),
    ((3, 2, 3), (5,), {"reduction": "avg"}, "reduction"),
])
def test_invalid_models(target_shape, weight_shape, attrs, words):
    node = helper.make_node("SoftmaxCrossEntropyLoss", ["x", "t", "w"], ["y"], **attrs)
    model = make_model([node], [("x", np.float32, SHAPE[:3] + (3,)), ("t", np.int64, target_shape),
                                ("w", np.float32, weight_shape)], [("y", np.float32, None)], opset=13)
    with pytest.raises(aotc.InvalidModel, match=words):
        aotc.compile(model)


def test_constant_inputs_fold():
    node = helper.make_node("SoftmaxCrossEntropyLoss", ["c", "t"], ["loss", "logp"], reduction="sum")
    add = helper.make_node("Add", ["x", "loss"], ["y"])
    feeds = _valid_everywhere(_feeds(np.float32))
    model = make_model([node, add], [("x", np.float32, ())], [("y", np.float32, None), ("logp", np.float32, None)],
                       {"c": feeds["x"], "t": feeds["t"]}, opset=13)
    assert_matches_ort(model, {"x": np.array(1.5, np.float32)})


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_runs_clean_under_sanitizers(tmp_path):
    sess = aotc.compile(_model(np.float32), out_dir=tmp_path, name="losses")
    assert run_sanitized(tmp_path, sess.name).split()[0] == "loss0"
