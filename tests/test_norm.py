import numpy as np
import pytest
from onnx import helper

import aotc
from oracle import assert_matches_ort, make_model, random


# ---- BatchNormalization -------------------------------------------------------------------

def _bn_stats(channels, seed=0):
    return {"scale": random((channels,), seed=seed + 1), "bias": random((channels,), seed=seed + 2),
            "mean": random((channels,), seed=seed + 3),
            "var": random((channels,), seed=seed + 4, low=0.1, high=3.0)}


@pytest.mark.parametrize("opset", [7, 9, 14, 15])
@pytest.mark.parametrize("shape", [(2, 3, 5, 7), (1, 4), (2, 5, 9), (1, 2, 3, 4, 5)])
def test_batch_norm_with_constant_statistics(opset, shape):
    stats = _bn_stats(shape[1])
    node = helper.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["y"],
                            epsilon=1e-3)
    m = make_model([node], [("x", np.float32, shape)], [("y", np.float32, None)], stats, opset=opset)
    assert_matches_ort(m, {"x": random(shape)}, rtol=1e-5, atol=1e-5)


def test_batch_norm_with_runtime_statistics():
    shape = (2, 3, 4, 5)
    stats = _bn_stats(3, seed=5)
    node = helper.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["y"])
    m = make_model([node], [("x", np.float32, shape)] + [(k, np.float32, (3,)) for k in stats],
                   [("y", np.float32, None)], opset=15)
    assert_matches_ort(m, {"x": random(shape), **stats}, rtol=1e-5, atol=1e-5)


def test_batch_norm_with_statistics_outputs_before_opset_14_is_refused():
    node = helper.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"],
                            ["y", "running_mean", "running_var"])
    m = make_model([node], [("x", np.float32, (2, 3, 4))], [("y", np.float32, None)], _bn_stats(3),
                   opset=9)
    with pytest.raises(aotc.AotcError, match="running-statistics outputs"):
        aotc.compile(m)


# ---- Softmax, LogSoftmax ------------------------------------------------------------------

@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("shape,axis", [((3, 7), None), ((2, 3, 5), 0), ((2, 3, 5), 1),
                                        ((2, 3, 5), -1), ((2, 70, 3), -2), ((4, 3, 130), 1),
                                        ((2, 3, 4, 5), 2), ((37,), 0)])
def test_softmax_and_log_softmax(opset, shape, axis):
    attrs = {} if axis is None else {"axis": axis}
    nodes = [helper.make_node("Softmax", ["x"], ["y"], **attrs),
             helper.make_node("LogSoftmax", ["x"], ["z"], **attrs)]
    m = make_model(nodes, [("x", np.float32, shape)], [("y", np.float32, None), ("z", np.float32, None)],
                   opset=opset)
    assert_matches_ort(m, {"x": random(shape, seed=3, low=-6, high=6)}, rtol=1e-5, atol=1e-6)


def test_softmax_subtracts_the_maximum_first():
    m = make_model([helper.make_node("Softmax", ["x"], ["y"])], [("x", np.float32, (2, 9))],
                   [("y", np.float32, None)], opset=13)
    got = assert_matches_ort(m, {"x": random((2, 9), low=95, high=110)})
    assert np.isfinite(got["y"]).all()


def test_big_softmax_is_identical_for_any_thread_count():
    nodes = [helper.make_node("Softmax", ["x"], ["y"], axis=-1),
             helper.make_node("Softmax", ["x"], ["z"], axis=1)]
    shape = (2, 12, 128, 128)
    m = make_model(nodes, [("x", np.float32, shape)], [("y", np.float32, None), ("z", np.float32, None)],
                   opset=13)
    x = random(shape, seed=4)
    many = assert_matches_ort(m, {"x": x}, threads=2)
    one = aotc.compile(m, threads=1).run({"x": x})
    for name in one:
        np.testing.assert_array_equal(many[name], one[name])


# ---- LayerNormalization --------------------------------------------------------------------

def _layer_norm(shape, axis, bias=True, outputs=1, scale_shape=None, runtime_params=False):
    normalized = shape[axis:]
    scale_shape = scale_shape or normalized
    params = {"scale": random(scale_shape, seed=6), "bias": random(scale_shape, seed=7)}
    if not bias:
        del params["bias"]
    names = ["y", "mean", "inv_std"][:outputs]
    node = helper.make_node("LayerNormalization", ["x"] + list(params), names, axis=axis,
                            epsilon=1e-4)
    outs = [("y", np.float32, None)] + [(n, np.float32, None) for n in names[1:]]
    if runtime_params:
        ins = [("x", np.float32, shape)] + [(k, np.float32, v.shape) for k, v in params.items()]
        return make_model([node], ins, outs, opset=17), params
    return make_model([node], [("x", np.float32, shape)], outs, params, opset=17), {}


@pytest.mark.parametrize("shape,axis", [((2, 5, 33), -1), ((2, 5, 33), -2), ((3, 4, 5, 6), 1),
                                        ((7, 16), 0), ((1, 128, 768), -1)])
@pytest.mark.parametrize("bias", [True, False])
def test_layer_norm(shape, axis, bias):
    m, feeds = _layer_norm(shape, axis, bias)
    assert_matches_ort(m, {"x": random(shape, seed=8, low=-3, high=5), **feeds}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("outputs", [2, 3])
def test_layer_norm_mean_and_inv_std_outputs(outputs):
    m, feeds = _layer_norm((3, 4, 10), -2, outputs=outputs)
    assert_matches_ort(m, {"x": random((3, 4, 10), seed=9), **feeds}, rtol=1e-4, atol=1e-5)


def test_layer_norm_with_runtime_scale_and_bias():
    m, feeds = _layer_norm((4, 6, 20), -1, runtime_params=True)
    assert_matches_ort(m, {"x": random((4, 6, 20), seed=10), **feeds}, rtol=1e-4, atol=1e-5)


def test_layer_norm_with_broadcast_constant_scale():
    m, feeds = _layer_norm((2, 3, 4, 5), -2, scale_shape=(1, 5))
    assert_matches_ort(m, {"x": random((2, 3, 4, 5), seed=12)}, rtol=1e-4, atol=1e-5)


def test_big_layer_norm_is_identical_for_any_thread_count():
    m, _ = _layer_norm((4, 128, 768), -1)
    x = random((4, 128, 768), seed=13)
    many = assert_matches_ort(m, {"x": x}, rtol=1e-4, atol=1e-5, threads=2)
    one = aotc.compile(m, threads=1).run({"x": x})
    np.testing.assert_array_equal(many["y"], one["y"])
