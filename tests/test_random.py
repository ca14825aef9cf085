"""RandomUniform, RandomNormal, their -Like forms, Bernoulli and Multinomial: shapes and
element types as ONNX's shape inference gives them (onnxruntime lacks several of these
types), seeds (same values every run; without a seed, new values), distributions within
statistical bounds, the edge probabilities exactly; the C under -Werror and sanitizers."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import aotc
from oracle import make_model
from sanitize import CC, assert_clean_c


def _model():
    nodes = [helper.make_node("RandomUniform", [], ["u"], shape=[200, 50], low=-2.0, high=3.0, seed=1.0),
             helper.make_node("RandomNormal", [], ["n"], shape=[100, 100], mean=1.5, scale=2.0, seed=2.0,
                              dtype=TensorProto.DOUBLE),
             helper.make_node("RandomUniformLike", ["x"], ["ul"], dtype=TensorProto.FLOAT16),
             helper.make_node("RandomNormalLike", ["x"], ["nl"]),
             helper.make_node("Bernoulli", ["p"], ["b"], seed=3.0),
             helper.make_node("Bernoulli", ["p"], ["bi"], dtype=TensorProto.INT32),
             helper.make_node("Multinomial", ["logits"], ["m"], sample_size=400, seed=4.0,
                              dtype=TensorProto.INT64)]
    outputs = [("u", np.float32, None), ("n", np.float64, None), ("ul", np.float16, None),
               ("nl", np.float32, None), ("b", np.float32, None), ("bi", np.int32, None),
               ("m", np.int64, None)]
    inputs = [("x", np.float32, (3, 7)), ("p", np.float32, (4, 1000)), ("logits", np.float32, (2, 3))]
    return make_model(nodes, inputs, outputs, opset=15)


FEEDS = {"x": np.zeros((3, 7), np.float32),
         "p": np.repeat(np.array([[0.0], [1.0], [0.25], [0.9]], np.float32), 1000, axis=1),
         "logits": np.log(np.array([[0.2, 0.3, 0.5], [1e-6, 1.0, 1e-6]], np.float32))}


@pytest.fixture(scope="module")
def runs():
    sess = aotc.compile(_model(), threads=2)
    return sess.run(FEEDS), sess.run(FEEDS)


def test_shapes_and_types_match_onnx_inference(runs):
    first, _ = runs
    inferred = onnx.shape_inference.infer_shapes(_model(), strict_mode=True)
    for out in inferred.graph.output:
        t = out.type.tensor_type
        got = first[out.name]
        assert got.dtype == helper.tensor_dtype_to_np_dtype(t.elem_type), out.name
        assert got.shape == tuple(d.dim_value for d in t.shape.dim), out.name


def test_seeded_nodes_repeat_and_unseeded_ones_do_not(runs):
    first, second = runs
    for name in ("u", "n", "b", "m"):
        np.testing.assert_array_equal(first[name], second[name], err_msg=name)
    for name in ("ul", "nl"):
        assert not np.array_equal(first[name], second[name]), name


def test_distributions(runs):
    out, _ = runs
    u, n = out["u"], out["n"]
    assert u.min() >= -2.0 and u.max() < 3.0 and abs(u.mean() - 0.5) < 0.05
    assert abs(n.mean() - 1.5) < 0.1 and abs(n.std() - 2.0) < 0.1
    assert out["ul"].min() >= 0 and out["ul"].max() <= 1
    b = out["b"]
    assert set(np.unique(b)) <= {0.0, 1.0}
    assert b[0].sum() == 0 and b[1].sum() == 1000          # p = 0 and p = 1 exactly
    assert abs(b[2].mean() - 0.25) < 0.05 and abs(b[3].mean() - 0.9) < 0.05
    counts = np.bincount(out["m"][0], minlength=3) / 400
    np.testing.assert_allclose(counts, [0.2, 0.3, 0.5], atol=0.08)
    assert (out["m"][1] == 1).all()


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_runs_clean_under_sanitizers_and_warnings(tmp_path):
    assert_clean_c(tmp_path, _model(), "randomsan")


def test_unsupported_output_type_is_named():
    model = make_model([helper.make_node("RandomUniform", [], ["u"], shape=[2], dtype=TensorProto.INT32)],
                       [], [("u", np.int32, None)], opset=15)
    with pytest.raises(aotc.errors.Unsupported, match="int32"):
        aotc.compile(model)
