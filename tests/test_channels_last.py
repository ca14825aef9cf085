"""The plan's channels-last rewrite (aotc/plan/channels_last.py) and its NhwcConv kernels
(runtime_c/aotc_conv_nhwc.h): MobileNet-style chains on small planes run NHWC and
still match onnxruntime, on every path and thread count; chains without a depthwise
conv, large planes and exact mode stay NCHW."""
import numpy as np
import pytest
from onnx import helper

import aotc
from oracle import assert_matches_ort, make_model, random, run_ort
from sanitize import assert_clean_c

TOL = dict(rtol=1e-4, atol=1e-5)


class _Builder:
    """Nodes and initializers of a test network, conv by conv."""

    def __init__(self):
        self.nodes, self.inits = [], {}
        self.rng = np.random.default_rng(0)

    def conv(self, x, cin, cout, k=1, stride=1, group=1, pads=None, dilation=1, act="Relu"):
        name = f"conv{len(self.nodes)}"
        scale = 1.0 / np.sqrt(cin // group * k * k)
        self.inits[name + "_w"] = (self.rng.standard_normal((cout, cin // group, k, k)) * scale).astype(np.float32)
        self.inits[name + "_b"] = (self.rng.standard_normal(cout) * 0.1).astype(np.float32)
        pads = [k // 2 * dilation] * 4 if pads is None else pads
        self.nodes.append(helper.make_node("Conv", [x, name + "_w", name + "_b"], [name], strides=[stride] * 2,
                                           pads=pads, group=group, dilations=[dilation] * 2))
        return self.activation(name, act)

    def activation(self, x, act):
        if act is None:
            return x
        y = f"{x}_{act}"
        if act == "Clip":   # ReLU6, MobileNetV2's
            self.inits[y + "_lo"], self.inits[y + "_hi"] = np.float32(0), np.float32(6)
            self.nodes.append(helper.make_node("Clip", [x, y + "_lo", y + "_hi"], [y]))
        else:
            self.nodes.append(helper.make_node(act, [x], [y]))
        return y

    def block(self, x, cin, cout, expand, stride, act, pads=None, residual=False):
        """Expand 1x1, depthwise 3x3, project 1x1 (+ x)."""
        wide = cin * expand
        h = self.conv(x, cin, wide, act=act)
        h = self.conv(h, wide, wide, 3, stride, group=wide, pads=pads, act=act)
        y = self.conv(h, wide, cout, act=None)
        if residual:
            self.nodes.append(helper.make_node("Add", [y, x], [y + "_res"]))
            y += "_res"
        return y

    def model(self, x_shape, outputs):
        return make_model(self.nodes, [("x", np.float32, x_shape)], [(o, np.float32, None) for o in outputs],
                          self.inits)


def mobilenet_like(batch=2, size=28):
    """A stem conv to size x size, four inverted residual blocks (72 and 120 channels:
    ragged vectors; a stride-2 one with TensorFlow's asymmetric pads; Relu, Clip and
    HardSwish), a last 1x1 conv and a global pool: 13 convs for the rewrite."""
    b = _Builder()
    x = b.conv("x", 3, 16, 3, 2)
    x = b.block(x, 16, 24, 4, 1, "Relu")
    x = b.block(x, 24, 24, 3, 1, "Clip", residual=True)
    x = b.block(x, 24, 40, 3, 2, "HardSwish", pads=[0, 0, 1, 1])
    x = b.block(x, 40, 40, 3, 1, "Clip", residual=True)
    x = b.conv(x, 40, 64)
    b.nodes.append(helper.make_node("GlobalAveragePool", [x], ["y"]))
    return b.model([batch, 3, 2 * size, 2 * size], ["y"])


def _channels_last(sess):
    return sess.report["passes"].get("channels-last", 0)


@pytest.mark.parametrize("target", ["native", "avx2", "generic"])
def test_mobilenet_like_runs_channels_last_and_matches_onnxruntime(target):
    model = mobilenet_like()
    feeds = {"x": random((2, 3, 56, 56))}
    sess = aotc.compile(model, target=target)
    assert _channels_last(sess) == 13
    assert sess.report["nodes_after"]["NhwcConv"] == 13
    assert sess.report["nodes_after"]["Transpose"] == 1   # into the chain; the pool reads NHWC
    assert sess.report["nodes_after"]["NhwcGlobalAveragePool"] == 1
    np.testing.assert_allclose(sess.run(feeds)["y"], run_ort(model, feeds)["y"], **TOL)


def test_two_threads_give_the_bits_of_one():
    model, feeds = mobilenet_like(), {"x": random((2, 3, 56, 56), seed=1)}
    one = aotc.compile(model, threads=1).run(feeds)["y"]
    two = aotc.compile(model, threads=2).run(feeds)["y"]
    assert _channels_last(aotc.compile(model, threads=2)) == 13
    np.testing.assert_array_equal(one, two)


def test_exact_mode_stays_nchw():
    model, feeds = mobilenet_like(batch=1), {"x": random((1, 3, 56, 56))}
    sess = aotc.compile(model, mode="exact")
    assert _channels_last(sess) == 0 and "NhwcConv" not in sess.report["nodes_after"]
    np.testing.assert_allclose(sess.run(feeds)["y"], run_ort(model, feeds)["y"], **TOL)


@pytest.mark.parametrize("size, nhwc", [(56, 13), (112, 4)])
def test_chains_go_nhwc_on_planes_up_to_56x56(size, nhwc):
    """At size 56 every conv but the stem (its input at 112x112) is in the chain; at 112
    only the last block's three and the last 1x1 conv: the stride-2 depthwise conv reads
    a 112x112 plane, and the 1x1 projection after it enters the chain narrowing."""
    model = mobilenet_like(batch=1, size=size)
    sess = aotc.compile(model)
    assert _channels_last(sess) == nhwc
    feeds = {"x": random((1, 3, 2 * size, 2 * size), seed=3)}
    np.testing.assert_allclose(sess.run(feeds)["y"], run_ort(model, feeds)["y"], **TOL)


def test_large_planes_stay_nchw():
    model = mobilenet_like(batch=1, size=224)   # its last blocks at 112x112
    sess = aotc.compile(model)
    assert _channels_last(sess) == 0


def test_a_pointwise_conv_that_enters_a_chain_narrowing_stays_nchw():
    """Its output, the smaller tensor, is what the Transpose in moves."""
    b = _Builder()
    h = b.conv("x", 64, 16)
    y = b.block(h, 16, 16, 4, 1, "Relu")
    model = b.model([1, 64, 14, 14], [y])
    sess = aotc.compile(model)
    assert _channels_last(sess) == 3
    assert sess.report["nodes_after"]["NhwcConv"] == 3
    feeds = {"x": random((1, 64, 14, 14))}
    np.testing.assert_allclose(sess.run(feeds)[y], run_ort(model, feeds)[y], **TOL)


def test_a_depthwise_conv_alone_stays_nchw():
    b = _Builder()
    b.conv("x", 32, 32, 3, group=32, act=None)
    sess = aotc.compile(b.model([1, 32, 14, 14], ["conv0"]))
    assert _channels_last(sess) == 0


def test_a_chain_without_a_depthwise_conv_stays_nchw():
    """A ResNet bottleneck at 14x14: its 3x3 conv is a full one."""
    b = _Builder()
    h = b.conv("x", 64, 32)
    h = b.conv(h, 32, 32, 3)
    y = b.conv(h, 32, 64, act=None)
    b.nodes.append(helper.make_node("Add", [y, "x"], ["y"]))
    model = b.model([1, 64, 14, 14], ["y"])
    sess = aotc.compile(model)
    assert _channels_last(sess) == 0
    feeds = {"x": random((1, 64, 14, 14))}
    np.testing.assert_allclose(sess.run(feeds)["y"], run_ort(model, feeds)["y"], **TOL)


@pytest.mark.parametrize("channels, size, k, stride, pads, dilation", [
    (20, 9, 3, 1, [1, 1, 1, 1], 1),    # a ragged last vector
    (32, 10, 3, 2, [1, 1, 1, 1], 1),
    (48, 7, 3, 2, [0, 0, 1, 1], 1),    # asymmetric pads
    (24, 12, 3, 1, [2, 2, 2, 2], 2),   # dilated
    (16, 11, 5, 1, [2, 1, 2, 1], 1),   # not 3x3: the general kernel
    (8, 4, 3, 1, [0, 0, 0, 0], 1),     # no interior columns
])
def test_depthwise_convs_match_onnxruntime(channels, size, k, stride, pads, dilation):
    """A depthwise conv then a pointwise one, between Transposes; the depthwise conv's
    output is also a graph output (taken back to NCHW)."""
    b = _Builder()
    h = b.conv("x", channels, channels, k, stride, group=channels, pads=pads, dilation=dilation, act="Clip")
    y = b.conv(h, channels, 8, act="Sigmoid")
    model = b.model([2, channels, size, size], [h, y])
    feeds = {"x": random((2, channels, size, size))}
    sess = aotc.compile(model)
    assert _channels_last(sess) == 2
    got, want = sess.run(feeds), run_ort(model, feeds)
    for name in (h, y):
        np.testing.assert_allclose(got[name], want[name], **TOL)


def test_c_is_warning_free_and_clean_under_sanitizers(tmp_path):
    assert_clean_c(tmp_path, mobilenet_like(batch=1, size=14), "mobilenet_like")


def test_matches_onnxruntime_through_the_test_helpers():
    """The same network through oracle's comparison (output names, dtypes and shapes)."""
    model = mobilenet_like(batch=1, size=14)
    assert_matches_ort(model, {"x": random((1, 3, 28, 28), seed=2)}, **TOL)


@pytest.mark.parametrize("pool", ["GlobalAveragePool", "GlobalMaxPool"])
def test_a_global_pool_reads_the_chain_nhwc_beside_an_nchw_reader(pool):
    """The pool needs no Transpose; another reader of the same value still gets one."""
    b = _Builder()
    y = b.block("x", 16, 24, 4, 1, "Clip")
    b.nodes.append(helper.make_node(pool, [y], ["pooled"]))
    b.nodes.append(helper.make_node("Relu", [y], ["other"]))
    model = b.model([2, 16, 14, 14], ["pooled", "other"])
    sess = aotc.compile(model)
    assert _channels_last(sess) == 3
    assert sess.report["nodes_after"]["Nhwc" + pool] == 1
    assert sess.report["nodes_after"]["Transpose"] == 2
    feeds = {"x": random((2, 16, 14, 14))}
    got, want = sess.run(feeds), run_ort(model, feeds)
    for name in ("pooled", "other"):
        np.testing.assert_allclose(got[name], want[name], **TOL)
