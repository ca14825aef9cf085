"""ONNX Attention, RotaryEmbedding, LinearAttention, CausalConvWithState and SwiGLU
against onnx.reference (the oracle of the node suite; onnxruntime lacks most of these
opsets): several variants per model, every floating type, two threads, bad nodes."""
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import aotc
from oracle import make_model, random
from sanitize import run_sanitized

BF16 = ml_dtypes.bfloat16
RTOL = {np.float16: 2e-3, BF16: 2 ** -6}
ATOL = {np.float16: 1e-3, BF16: 1e-2}    # sums of terms near 1 that cancel


def _check(model, feeds, dtype=np.float32, **options):
    got = aotc.compile(model, **options).run(feeds)
    names = [o.name for o in model.graph.output]
    want = dict(zip(names, ReferenceEvaluator(model).run(None, feeds)))
    for name in names:
        g, w = got[name], want[name]
        assert g.dtype == w.dtype and g.shape == w.shape, (name, g.dtype, w.dtype, g.shape, w.shape)
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64),
                                   rtol=RTOL.get(dtype, 1e-5), atol=ATOL.get(dtype, 1e-6),
                                   err_msg=name)


def _inputs(spec, dtype, seed=0):
    """spec: {name: shape}; values of dtype in [-1, 1]."""
    return {name: random(shape, seed=seed + k, low=-1, high=1).astype(dtype)
            for k, (name, shape) in enumerate(spec.items())}


def _attention(inputs, outputs, **attrs):
    return helper.make_node("Attention", inputs, outputs, **attrs)


# ---- Attention ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, BF16])
def test_attention_4d_variants_in_every_type(dtype):
    """GQA with a bool mask, causal, softcap and the softmax probabilities out; a float
    mask of rank 3 with qk output after the bias; a sliding window; odd sizes."""
    b, hq, hkv, sq, sk, d, dv = 2, 6, 3, 5, 7, 9, 11
    spec = {"q": (b, hq, sq, d), "k": (b, hkv, sk, d), "v": (b, hkv, sk, dv), "fm": (hq, sq, sk)}
    feeds = _inputs(spec, dtype)
    feeds["bm"] = random((b, 1, sq, sk), seed=9) > -0.6
    nodes = [
        _attention(["q", "k", "v", "bm"], ["y1", "", "", "p1"], is_causal=1, softcap=1.5,
                   qk_matmul_output_mode=3),
        _attention(["q", "k", "v", "fm"], ["y2", "", "", "s2"], scale=0.2, qk_matmul_output_mode=2),
        _attention(["q", "k", "v"], ["y3"], left_window_size=2, right_window_size=1),
    ]
    outs = [(n, dtype, None) for n in ("y1", "p1", "y2", "s2", "y3")]
    m = make_model(nodes, [(k, v.dtype, v.shape) for k, v in feeds.items()], outs, opset=25)
    _check(m, feeds, dtype, threads=2)


def test_attention_3d_with_cache_padding_and_softmax_precision():
    b, hq, hkv, sq, sk, past, d, dv = 2, 4, 2, 3, 4, 5, 8, 6
    spec = {"q": (b, sq, hq * d), "k": (b, sk, hkv * d), "v": (b, sk, hkv * dv),
            "pk": (b, hkv, past, d), "pv": (b, hkv, past, dv), "mask": (sq, past + 2)}
    feeds = _inputs(spec, np.float16, seed=20)
    feeds["q4"] = random((b, hq, sq, d), seed=30).astype(np.float16)
    feeds["k4"] = random((b, hkv, 8, d), seed=31).astype(np.float16)
    feeds["v4"] = random((b, hkv, 8, dv), seed=32).astype(np.float16)
    feeds["nonpad"] = np.array([5, 2], np.int64)
    heads = {"q_num_heads": hq, "kv_num_heads": hkv}
    nodes = [
        _attention(["q", "k", "v", "mask", "pk", "pv"], ["y1", "present_k", "present_v", "qk1"],
                   softmax_precision=TensorProto.FLOAT, **heads),
        _attention(["q", "k", "v", "", "pk", "pv"], ["y2", "pk2", "pv2"], is_causal=1, **heads),
        _attention(["q4", "k4", "v4", "", "", "", "nonpad"], ["y3"], is_causal=1),
    ]
    outs = [(n, np.float16, None) for n in ("y1", "present_k", "present_v", "qk1", "y2", "pk2",
                                            "pv2", "y3")]
    m = make_model(nodes, [(k, v.dtype, v.shape) for k, v in feeds.items()], outs, opset=24)
    _check(m, feeds, np.float16)


def test_attention_fully_masked_rows_are_zero():
    feeds = _inputs({"q": (1, 2, 3, 4), "k": (1, 2, 3, 4), "v": (1, 2, 3, 4)}, np.float32, seed=40)
    feeds["m"] = np.array([[False] * 3, [True, False, True], [False] * 3])
    node = _attention(["q", "k", "v", "m"], ["y", "", "", "p"], qk_matmul_output_mode=3)
    m = make_model([node], [(k, v.dtype, v.shape) for k, v in feeds.items()],
                   [("y", np.float32, None), ("p", np.float32, None)], opset=23)
    got = aotc.compile(m).run(feeds)
    assert not got["y"][:, :, [0, 2]].any() and not got["p"][:, :, [0, 2]].any()
    _check(m, feeds)


@pytest.mark.parametrize("inputs, shapes, attrs, match", [
    (["q", "k", "v"], [(1, 2, 8), (1, 2, 8), (1, 2, 8)], {}, "q_num_heads"),
    (["q", "k", "v"], [(1, 2, 3, 4)] * 3, {"q_num_heads": 2, "kv_num_heads": 2}, "must not be"),
    (["q", "k", "v", "", "pk"], [(1, 2, 3, 4)] * 3 + [(1, 2, 1, 4)], {}, "together"),
    (["q", "k", "v"], [(1, 3, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4)], {}, "multiple"),
    (["q", "k", "v"], [(1, 2, 3, 4), (1, 2, 3, 5), (1, 2, 3, 4)], {}, "head size"),
])
def test_attention_invalid_nodes_are_refused_by_name(inputs, shapes, attrs, match):
    names = [n for n in inputs if n]
    node = _attention(inputs, ["y"], name="attn", **attrs)
    m = make_model([node], [(n, np.float32, s) for n, s in zip(names, shapes)],
                   [("y", np.float32, None)], opset=25)
    with pytest.raises(aotc.AotcError, match=match) as info:
        aotc.compile(m)
    assert "attn" in str(info.value)


# ---- RotaryEmbedding ---------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16])
def test_rotary_embedding_forms(dtype):
    b, h, s, d = 2, 3, 5, 10
    feeds = _inputs({"x": (b, h, s, d), "x3": (b, s, h * d), "cos": (20, 5), "sin": (20, 5),
                     "cos6": (20, 3), "sin6": (20, 3), "cb": (b, s, 5), "sb": (b, s, 5)},
                    dtype, seed=50)
    feeds["pos"] = np.array([[0, 3, 19, 7, -1], [4, 4, 1, 0, 12]], np.int64)
    nodes = [
        helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["full"]),
        helper.make_node("RotaryEmbedding", ["x", "cos6", "sin6", "pos"], ["part"], interleaved=1,
                         rotary_embedding_dim=6),
        helper.make_node("RotaryEmbedding", ["x3", "cos", "sin", "pos"], ["three"], num_heads=h),
        helper.make_node("RotaryEmbedding", ["x", "cb", "sb"], ["nopos"], interleaved=1),
    ]
    outs = [(n.output[0], dtype, None) for n in nodes]
    m = make_model(nodes, [(k, v.dtype, v.shape) for k, v in feeds.items()], outs, opset=23)
    _check(m, feeds, dtype, threads=2)


def test_rotary_position_out_of_range_is_an_error_code():
    node = helper.make_node("RotaryEmbedding", ["x", "c", "s", "pos"], ["y"])
    m = make_model([node], [("x", np.float32, (1, 1, 2, 4)), ("c", np.float32, (3, 2)),
                            ("s", np.float32, (3, 2)), ("pos", np.int64, (1, 2))],
                   [("y", np.float32, None)], opset=23)
    sess = aotc.compile(m)
    feeds = _inputs({"x": (1, 1, 2, 4), "c": (3, 2), "s": (3, 2)}, np.float32)
    feeds["pos"] = np.array([[0, 3]], np.int64)
    with pytest.raises(aotc.AotcError):
        sess.run(feeds)


# ---- LinearAttention, CausalConvWithState, SwiGLU ---------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_linear_attention_update_rules(dtype):
    b, t, hq, hkv, dk, dv = 2, 3, 4, 2, 5, 3
    feeds = _inputs({"q": (b, t, hq * dk), "k": (b, t, hkv * dk), "v": (b, t, hkv * dv),
                     "past": (b, hkv, dk, dv), "decay": (b, t, hkv * dk), "hdecay": (b, t, hkv),
                     "beta": (b, t, hkv)}, dtype, seed=60)
    heads = {"q_num_heads": hq, "kv_num_heads": hkv}
    nodes = [
        helper.make_node("LinearAttention", ["q", "k", "v", "past", "decay", "beta"], ["y1", "s1"],
                         **heads),
        helper.make_node("LinearAttention", ["q", "k", "v"], ["y2", "s2"], update_rule="linear",
                         scale=0.5, **heads),
        helper.make_node("LinearAttention", ["q", "k", "v", "past", "hdecay"], ["y3", "s3"],
                         update_rule="gated", **heads),
        helper.make_node("LinearAttention", ["q", "k", "v", "", "", "beta"], ["y4", "s4"],
                         update_rule="delta", **heads),
    ]
    outs = [(o, dtype, None) for n in nodes for o in n.output]
    m = make_model(nodes, [(k, v.dtype, v.shape) for k, v in feeds.items()], outs, opset=27)
    _check(m, feeds, dtype, threads=2)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16])
def test_causal_conv_with_state(dtype):
    feeds = _inputs({"x": (2, 3, 6), "w": (3, 1, 4), "bias": (3,), "past": (2, 3, 3),
                     "x1": (2, 3, 2), "w1": (3, 1, 1)}, dtype, seed=70)
    nodes = [
        helper.make_node("CausalConvWithState", ["x", "w", "bias", "past"], ["y1", "s1"],
                         activation="silu"),
        helper.make_node("CausalConvWithState", ["x1", "w"], ["y2", "s2"]),
        helper.make_node("CausalConvWithState", ["x", "w1"], ["y3", "s3"]),
    ]
    outs = [(o, dtype, None) for n in nodes for o in n.output]
    m = make_model(nodes, [(k, v.dtype, v.shape) for k, v in feeds.items()], outs, opset=27)
    _check(m, feeds, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, BF16])
def test_swiglu(dtype):
    feeds = _inputs({"a": (3, 17), "b": (3, 17)}, dtype, seed=80)
    nodes = [helper.make_node("SwiGLU", ["a", "b"], ["y"]),
             helper.make_node("SwiGLU", ["a", "b"], ["z"], alpha=1.7)]
    m = make_model(nodes, [(k, v.dtype, v.shape) for k, v in feeds.items()],
                   [("y", dtype, None), ("z", dtype, None)], opset=28)
    _check(m, feeds, dtype)


def test_plain_float_attention_takes_the_streamed_kernel():
    """float32 without cache, extra outputs or masks but a causal one: the fused kernel
    of the ai.aotc Attention, for 4D GQA and 3D operands, over several key tiles."""
    b, hq, hkv, s, d = 1, 4, 2, 70, 16
    feeds = _inputs({"q": (b, hq, s, d), "k": (b, hkv, s, d), "v": (b, hkv, s, d),
                     "q3": (b, s, hq * d), "k3": (b, s, hq * d), "v3": (b, s, hq * 8)},
                    np.float32, seed=90)
    nodes = [_attention(["q", "k", "v"], ["y1"], is_causal=1),
             _attention(["q3", "k3", "v3"], ["y2"], q_num_heads=hq, kv_num_heads=hq, scale=0.3)]
    m = make_model(nodes, [(k, v.dtype, v.shape) for k, v in feeds.items()],
                   [("y1", np.float32, None), ("y2", np.float32, None)], opset=23)
    sess = aotc.compile(m, threads=2)
    source = Path(sess.out_dir, f"{sess.name}.c").read_text()
    assert source.count("aotc_attention_f32(") == 2 and "aotc_onnx_attention(" not in source
    _check(m, feeds, threads=2)


def test_kernels_are_clean_under_sanitizers_and_warnings(tmp_path):
    """One model through every kernel of these operators (the generic Attention with a
    cache and a mask, rotary, linear attention, causal convolution, the set
    normalizations, LRN, a float16 softmax, a training Dropout), built with -Wall -Wextra -Werror under
    AddressSanitizer and UBSan."""
    f = {"q": (1, 2, 3, 4), "k": (1, 1, 2, 4), "v": (1, 1, 2, 4), "pk": (1, 1, 3, 4),
         "pv": (1, 1, 3, 4), "m": (3, 5), "cos": (6, 2), "sin": (6, 2), "x": (1, 3, 12),
         "w": (3, 1, 3), "la": (1, 3, 8), "n": (2, 4, 3)}
    inits = {name: random(shape, seed=k).astype(np.float32) for k, (name, shape) in enumerate(f.items())}
    inits["pos"] = np.array([[0, 5, 2]], np.int64)
    inits["g"] = np.ones((4,), np.float32)
    inits["h"] = random((2, 5), seed=99).astype(np.float16)
    inits["ratio"], inits["t"] = np.array(0.5, np.float32), np.array(True)
    nodes = [
        _attention(["q", "k", "v", "m", "pk", "pv"], ["a", "pk2", "pv2", "qk"], is_causal=1,
                   softcap=2.0, qk_matmul_output_mode=3),
        helper.make_node("RotaryEmbedding", ["q", "cos", "sin", "pos"], ["r"]),
        helper.make_node("CausalConvWithState", ["x", "w"], ["c", "cs"], activation="silu"),
        helper.make_node("LinearAttention", ["la", "la", "la", "", "la"], ["l", "ls"],
                         q_num_heads=2, kv_num_heads=2, update_rule="gated"),
        helper.make_node("RMSNormalization", ["n", "n"], ["rms"], axis=0),
        helper.make_node("GroupNormalization", ["n", "g", "g"], ["gn"], num_groups=2),
        helper.make_node("LRN", ["n"], ["lrn"], size=3),
        helper.make_node("Softmax", ["h"], ["sm"]),
        helper.make_node("Dropout", ["n", "ratio", "t"], ["drop", "keep"], seed=3),
    ]
    outs = ["a", "pk2", "pv2", "qk", "r", "c", "cs", "l", "ls", "rms", "gn", "lrn", "sm", "drop",
            "keep"]
    inputs = [(k, v.dtype, v.shape) for k, v in inits.items()]
    types = {"sm": np.float16, "keep": np.bool_}
    m = make_model(nodes, inputs, [(o, types.get(o, np.float32), None) for o in outs], opset=27)
    sess = aotc.compile(m, out_dir=tmp_path, name="transformer_ops")
    assert run_sanitized(tmp_path, sess.name, ["-Wall", "-Wextra", "-Werror"]).split()[0] == "a"
