"""The fused operators Linear and FusedConv, made by the linear-pack-fuse and
conv-activation passes and the plan's conv-residual fusion, with the activation (and
the residual) in the product's tile epilogue.

Each model is compiled fused and unfused (opt_level "none"); the two must give the same
bits (the epilogue and the standalone activation are one expression, aotc_activation.h)
and both must match onnxruntime. Ragged sizes, the single row
path, K past one 256-row block and every conv kernel (1x1 GEMM, depthwise direct,
im2col) are exercised; two threads must give the bits of one.
"""
import re

import numpy as np
import pytest
from onnx import helper

import aotc
from aotc import passes
from aotc.onnx_export import export_graph
from aotc.onnx_import import import_model
from aotc.passes import conv_activation, linear_pack_fuse
from aotc.passes.graph_tools import remove_unused
from oracle import make_model, random, run_ort
from sanitize import run_sanitized

ORT_TOL = dict(rtol=1e-5, atol=1e-5)

# Every activation form, in groups that share an opset: a test builds one model with a
# branch (and an output) per activation of the group, to compile once.
ACTIVATION_GROUPS = {
    "opset20": (20, [
        ("Relu", {}), ("LeakyRelu", {}), ("LeakyRelu", {"alpha": 0.3}), ("HardSigmoid", {}),
        ("HardSigmoid", {"alpha": 0.35, "beta": 0.4}), ("HardSwish", {}), ("Sigmoid", {}),
        ("Tanh", {}), ("Gelu", {}), ("Gelu", {"approximate": "tanh"}),
        ("Clip", {"bounds": (-0.25, 1.0)}), ("Clip", {"bounds": (None, 1.0)}),   # constant inputs
        ("Clip", {"bounds": (-0.5, None)}), ("Clip", {"bounds": ()})]),
    "opset7": (7, [   # Clip's bounds as attributes
        ("Clip", {"min": -0.5, "max": 0.75}), ("Clip", {"min": -0.5}), ("Clip", {"max": 0.5}),
        ("Relu", {}), ("Sigmoid", {})]),
}


def _activation_nodes(op_type, attrs, src, dst, inits):
    """The activation node reading `src` (Clip's constant bounds go into inits)."""
    if "bounds" in attrs:
        names = []
        for value, name in zip(attrs["bounds"], (dst + "_lo", dst + "_hi")):
            if value is not None:
                inits[name] = np.array(value, np.float32)
            names.append(name if value is not None else "")
        while names and not names[-1]:
            names.pop()
        return [helper.make_node("Clip", [src] + names, [dst])]
    return [helper.make_node(op_type, [src], [dst], **attrs)]


def _fused_session(model, module, **options):
    """The model compiled with `module`'s pass: through the pass table at opt_level
    "all" once the pass is in it, otherwise the pass run on the imported graph."""
    if any(m is module for m, *_ in passes.PASSES):
        return aotc.compile(model, opt_level="all", **options)
    graph = import_model(model)
    graph.opsets.setdefault(passes.FUSED_DOMAIN, 1)
    module.run(graph, passes.PassContext(options.get("mode", "fast")))
    remove_unused(graph)
    return aotc.compile(export_graph(graph), opt_level="none", **options)


def _check(model, feeds, module, fused_op, compare_unfused=True, count=1, **options):
    """Fused (`count` nodes of fused_op) vs unfused vs onnxruntime; returns the fused
    session's outputs."""
    fused = _fused_session(model, module, threads=1, **options)
    assert fused.report["nodes_after"].get(fused_op) == count, fused.report["nodes_after"]
    got = fused.run(feeds)
    want = run_ort(model, feeds)
    assert list(got) == list(want)
    for name in want:
        assert got[name].shape == want[name].shape
        np.testing.assert_allclose(got[name], want[name], err_msg=name, **ORT_TOL)
    if compare_unfused:
        plain = aotc.compile(model, opt_level="none", threads=1, **options)
        assert fused_op not in plain.report["nodes_after"]
        ref = plain.run(feeds)
        for name in want:      # the passes preserve bits: the same expression, the same order
            np.testing.assert_array_equal(got[name], ref[name], err_msg=name)
    return got


# ---- Linear ---------------------------------------------------------------------------

def _linear_branch(i, k, n, activation, bias, inits):
    """MatMul(a, B_i) [+ bias_i] [-> activation] -> y_i."""
    inits[f"B{i}"] = random((k, n), seed=10 * i + 1)
    nodes = [helper.make_node("MatMul", ["a", f"B{i}"], [f"p{i}"])]
    last = f"p{i}"
    if bias:
        inits[f"bias{i}"] = random((n,), seed=10 * i + 2)
        nodes.append(helper.make_node("Add", [last, f"bias{i}"], [f"q{i}"]))
        last = f"q{i}"
    if activation is not None:
        nodes += _activation_nodes(*activation, last, f"y{i}", inits)
    else:
        nodes[-1].output[0] = f"y{i}"
    return nodes


def _linear_model(a_shape, n, activations=(None,), bias=True, opset=17):
    """One Linear candidate per activation, all reading the input a."""
    inits, nodes = {}, []
    for i, act in enumerate(activations):
        nodes += _linear_branch(i, a_shape[-1], n, act, bias, inits)
    outputs = [(f"y{i}", np.float32, None) for i in range(len(activations))]
    return make_model(nodes, [("a", np.float32, list(a_shape))], outputs, inits, opset=opset)


@pytest.mark.parametrize("group", list(ACTIVATION_GROUPS))
@pytest.mark.parametrize("a_shape,n", [((3, 5, 37), 45), ((1, 300), 70)], ids=["rows", "one-row"])
def test_matmul_bias_activation_becomes_linear(group, a_shape, n):
    opset, acts = ACTIVATION_GROUPS[group]
    model = _linear_model(a_shape, n, acts, opset=opset)
    _check(model, {"a": random(a_shape, seed=7, low=-3, high=3)}, linear_pack_fuse, "Linear",
           count=len(acts))


@pytest.mark.parametrize("a_shape,n,bias", [((37,), 19, True), ((20, 257), 1, True), ((9, 1), 33, False),
                                            ((2, 3, 40, 33), 65, False)])
def test_linear_shapes_without_activation(a_shape, n, bias):
    model = _linear_model(a_shape, n, bias=bias)
    _check(model, {"a": random(a_shape, seed=3)}, linear_pack_fuse, "Linear")


def test_matmul_activation_without_bias():
    model = _linear_model((6, 50), 31, [None, ("Relu", {}), ("Sigmoid", {})], bias=False)
    _check(model, {"a": random((6, 50), seed=5)}, linear_pack_fuse, "Linear", count=3)


def _gemm_model(m, k, n, trans_b, beta, c_shape, activation=None, opset=13):
    b_shape = (n, k) if trans_b else (k, n)
    inits = {"B": random(b_shape, seed=11)}
    inputs = ["a", "B"]
    if c_shape is not None:
        inits["C"] = random(c_shape, seed=12)
        inputs.append("C")
    gemm_out = "y" if activation is None else "g"
    nodes = [helper.make_node("Gemm", inputs, [gemm_out], transB=trans_b, beta=beta)]
    if activation is not None:
        nodes += _activation_nodes(*activation, gemm_out, "y", inits)
    return make_model(nodes, [("a", np.float32, [m, k])], [("y", np.float32, None)], inits, opset=opset)


@pytest.mark.parametrize("trans_b,beta,c_shape,act", [
    (0, 1.0, (23,), ("Relu", {})),
    (1, 1.0, (23,), None),
    (1, 0.5, (1, 23), ("Tanh", {})),
    (0, 2.0, (1,), ("HardSigmoid", {"alpha": 0.1})),
    (1, 1.0, None, ("Sigmoid", {})),
    (0, 0.0, (23,), ("LeakyRelu", {"alpha": 0.2})),
])
def test_gemm_becomes_linear(trans_b, beta, c_shape, act):
    model = _gemm_model(13, 290, 23, trans_b, beta, c_shape, act)
    _check(model, {"a": random((13, 290), seed=9)}, linear_pack_fuse, "Linear")


def test_gemm_with_alpha_is_not_fused():
    model = make_model([helper.make_node("Gemm", ["a", "B"], ["y"], alpha=0.5)],
                       [("a", np.float32, [4, 6])], [("y", np.float32, None)], {"B": random((6, 5))})
    graph = import_model(model)
    assert linear_pack_fuse.run(graph, passes.PassContext("fast")) == 0


def test_linear_in_exact_mode():
    """The epilogue keeps the exact rules (aotc's own exp/tanh/erf, canonical NaN): fused
    and unfused give the same bits, on 1 and 2 threads."""
    opset, acts = ACTIVATION_GROUPS["opset20"]
    model = _linear_model((7, 300), 40, [None] + acts, opset=opset)
    feeds = {"a": random((7, 300), seed=4)}
    got = _check(model, feeds, linear_pack_fuse, "Linear", count=len(acts) + 1, mode="exact")
    again = _fused_session(model, linear_pack_fuse, mode="exact", threads=2).run(feeds)
    for name in got:
        assert np.array_equal(got[name], again[name]), name


def test_linear_nan_is_canonical_in_exact_mode():
    inits = {"B": np.eye(4, dtype=np.float32)}
    model = make_model([helper.make_node("MatMul", ["a", "B"], ["p"]), helper.make_node("Sigmoid", ["p"], ["y"])],
                       [("a", np.float32, [2, 4])], [("y", np.float32, None)], inits)
    a = np.array([[np.nan, 1, 2, 3], [0, -0.0, 3, -3]], np.float32)
    a[0, 0] = np.frombuffer(np.uint32(0xFFC01234).tobytes(), np.float32)[0]   # a negative payload
    y = _fused_session(model, linear_pack_fuse, mode="exact", threads=1).run(a)
    assert (y[0].view(np.uint32) == 0x7FC00000).all()      # NaN * 0 spreads over the row
    np.testing.assert_allclose(y[1], 1 / (1 + np.exp(-a[1])), rtol=1e-6)


@pytest.mark.parametrize("mode", ["fast", "exact"])
def test_relu_and_clip_in_the_tile_keep_the_bits_of_nan_inf_and_bounds(mode):
    """Relu and Clip run in the tile's registers as a max and a min: the same bits as
    the separate operators for NaN (payload included), infinities, zeros and values on
    the bounds."""
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 0.75, 1.0, -2.0, 3.0], np.float32)
    specials[0] = np.frombuffer(np.uint32(0xFFC01234).tobytes(), np.float32)[0]
    a = np.concatenate([specials, np.linspace(-1, 1, 9, dtype=np.float32)]).reshape(-1, 1)
    nodes, inits = [], {"B": np.array([[1.0, -1.0, 0.5, 2.0, -0.25] * 7 + [1.0, 3.0]], np.float32)}
    acts = [("Relu", {}), ("Clip", {"bounds": (-0.5, 0.75)}), ("Clip", {"bounds": (None, 1.0)}),
            ("Clip", {"bounds": (-0.5, None)})]
    for i, act in enumerate(acts):
        nodes += [helper.make_node("MatMul", ["a", "B"], [f"p{i}"])] + _activation_nodes(*act, f"p{i}", f"y{i}", inits)
    model = make_model(nodes, [("a", np.float32, list(a.shape))],
                       [(f"y{i}", np.float32, None) for i in range(len(acts))], inits, opset=13)
    fused = _fused_session(model, linear_pack_fuse, mode=mode, threads=1)
    assert fused.report["nodes_after"] == {"Linear": len(acts)}
    got, want = fused.run({"a": a}), aotc.compile(model, opt_level="none", mode=mode, threads=1).run({"a": a})
    for name in want:
        assert got[name].view(np.uint32).tobytes() == want[name].view(np.uint32).tobytes(), name


def test_linear_threads_give_the_same_bits():
    model = _linear_model((230, 300), 530, [("Gelu", {}), ("Relu", {})], opset=20)
    feeds = {"a": random((230, 300), seed=2)}
    one = _fused_session(model, linear_pack_fuse, threads=1).run(feeds)
    two = _fused_session(model, linear_pack_fuse, threads=2)
    assert two.report["nodes_after"] == {"Linear": 2}
    for name in one:
        assert np.array_equal(one[name], two.run(feeds)[name]), name


# ---- FusedConv ------------------------------------------------------------------------

CONVS = {   # X shape, W shape, attributes: one per kernel the shape selects
    "pointwise": ((2, 16, 9, 11), (24, 16, 1, 1), {}),
    "depthwise": ((1, 12, 13, 10), (12, 1, 3, 3), {"group": 12, "pads": [1, 1, 1, 1]}),
    "im2col": ((1, 5, 14, 12), (7, 5, 3, 3), {"strides": [2, 1], "pads": [1, 0, 1, 2]}),
    "grouped-1d": ((2, 6, 30), (8, 3, 5), {"group": 2, "dilations": [2]}),
}


def _conv_model(kind, activations, bias=True, opset=17):
    """One Conv -> activation branch per activation, all reading the input x."""
    x_shape, w_shape, attrs = CONVS[kind]
    inits, nodes = {}, []
    for i, act in enumerate(activations):
        inits[f"W{i}"] = random(w_shape, seed=10 * i + 1)
        inputs = ["x", f"W{i}"]
        if bias:
            inits[f"Bc{i}"] = random((w_shape[0],), seed=10 * i + 2)
            inputs.append(f"Bc{i}")
        nodes.append(helper.make_node("Conv", inputs, [f"c{i}"], **attrs))
        nodes += _activation_nodes(*act, f"c{i}", f"y{i}", inits)
    outputs = [(f"y{i}", np.float32, None) for i in range(len(activations))]
    return make_model(nodes, [("x", np.float32, list(x_shape))], outputs, inits, opset=opset)


@pytest.mark.parametrize("group", list(ACTIVATION_GROUPS))
@pytest.mark.parametrize("kind", ["pointwise", "depthwise", "im2col"])
def test_conv_activation_becomes_fused_conv(kind, group):
    opset, acts = ACTIVATION_GROUPS[group]
    model = _conv_model(kind, acts, opset=opset)
    x_shape = CONVS[kind][0]
    _check(model, {"x": random(x_shape, seed=8, low=-3, high=3)}, conv_activation, "FusedConv",
           count=len(acts))


@pytest.mark.parametrize("kind", ["pointwise", "depthwise", "im2col"])
def test_conv_activation_in_exact_mode(kind):
    """Exact mode's conv kernels with the activation in their epilogue: the bits of the
    unfused Conv then activation, on 1 and 2 threads."""
    opset, acts = ACTIVATION_GROUPS["opset20"]
    model = _conv_model(kind, acts, opset=opset)
    feeds = {"x": random(CONVS[kind][0], seed=9, low=-3, high=3)}
    got = _check(model, feeds, conv_activation, "FusedConv", count=len(acts), mode="exact")
    again = _fused_session(model, conv_activation, mode="exact", threads=2).run(feeds)
    for name in got:
        assert np.array_equal(got[name], again[name]), name


@pytest.mark.parametrize("kind", list(CONVS))
def test_fused_conv_without_bias(kind):
    model = _conv_model(kind, [("Relu", {}), ("Tanh", {})], bias=False)
    _check(model, {"x": random(CONVS[kind][0], seed=3)}, conv_activation, "FusedConv", count=2)


@pytest.mark.parametrize("x_shape,w_shape,attrs", [
    ((1, 40, 60, 61), (48, 40, 1, 1), {}),
    ((1, 32, 70, 70), (32, 1, 3, 3), {"group": 32, "pads": [1, 1, 1, 1]}),
    ((1, 30, 40, 41), (20, 30, 3, 3), {"pads": [1, 1, 1, 1]}),
], ids=["pointwise", "depthwise", "im2col"])
def test_fused_conv_threads_give_the_same_bits(x_shape, w_shape, attrs):
    inits = {"W": random(w_shape, seed=1), "Bc": random((w_shape[0],), seed=2)}
    model = make_model([helper.make_node("Conv", ["x", "W", "Bc"], ["c"], **attrs),
                        helper.make_node("HardSwish", ["c"], ["y"])],
                       [("x", np.float32, list(x_shape))], [("y", np.float32, None)], inits)
    feeds = {"x": random(x_shape, seed=3)}
    one = _fused_session(model, conv_activation, threads=1).run(feeds)
    two = _fused_session(model, conv_activation, threads=2)
    assert two.report["nodes_after"] == {"FusedConv": 1}
    assert np.array_equal(one["y"], two.run(feeds)["y"])


# ---- conv-residual (a plan fusion: it needs the shapes) -------------------------------

RESIDUAL_ORT_TOL = dict(rtol=1e-4, atol=1e-4)   # sums of up to 360 products of ~1
RESIDUAL_CONVS = {   # X shape, W shape, attributes: every kernel the shape selects
    "pointwise": ((2, 16, 9, 11), (24, 16, 1, 1), {}),
    "implicit": ((2, 6, 13, 10), (10, 6, 3, 3), {"pads": [1, 1, 1, 1]}),
    "implicit-k-past-a-block": ((1, 40, 20, 21), (12, 40, 3, 3), {"pads": [1, 1, 1, 1]}),
    "implicit-in-row": ((1, 8, 6, 70), (16, 8, 3, 3), {"pads": [1, 1, 1, 1]}),   # strips in a row
    "implicit-1x1-strided": ((2, 16, 9, 11), (24, 16, 1, 1), {"strides": [2, 2], "pads": [0, 1, 1, 0]}),
    "im2col": ((1, 5, 14, 12), (7, 5, 3, 3), {"dilations": [2, 2], "pads": [2, 2, 2, 2]}),
    "rows": ((1, 64, 5, 6), (40, 64, 3, 3), {"pads": [1, 1, 1, 1]}),
    "depthwise": ((1, 12, 13, 10), (12, 1, 3, 3), {"group": 12, "pads": [1, 1, 1, 1]}),
    "one-output-channel": ((1, 3, 7, 9), (1, 3, 3, 3), {"pads": [1, 1, 1, 1]}),
    "pointwise-one-output-channel": ((1, 8, 5, 7), (1, 8, 1, 1), {}),   # the M = 1 path
    "pixels": ((2, 6, 13, 10), (10, 6, 3, 3), {"pads": [1, 1, 1, 1]}),
    "pixels-k-past-a-block": ((1, 40, 20, 21), (12, 40, 3, 3), {"pads": [1, 1, 1, 1]}),
    "pixels-tasks-of-strips": ((1, 64, 5, 6), (40, 64, 3, 3), {"pads": [1, 1, 1, 1]}),
}
# The kinds whose shapes the pixels kernel takes unless told not to (weights known here)
WITHOUT_PIXELS = {"implicit", "implicit-k-past-a-block", "implicit-in-row", "rows", "one-output-channel"}


def _select_kernel(kind, request):
    if kind in WITHOUT_PIXELS:
        request.getfixturevalue("without_pixels_kernel")


def _residual_model(kind, activation="Relu", residual_first=False, residual_shape=None,
                    activation_attrs=None):
    """Conv(x) + r [-> activation]: the residual r a graph input."""
    x_shape, w_shape, attrs = RESIDUAL_CONVS[kind]
    conv_only = make_model([helper.make_node("Conv", ["x", "W"], ["c"], **attrs)],
                           [("x", np.float32, list(x_shape))], [("c", np.float32, None)],
                           {"W": random(w_shape)})
    y_shape = list(run_ort(conv_only, {"x": random(x_shape)})["c"].shape)
    r_shape = residual_shape or y_shape
    inits = {"W": random(w_shape, seed=1), "Bc": random((w_shape[0],), seed=2)}
    nodes = [helper.make_node("Conv", ["x", "W", "Bc"], ["c"], **attrs),
             helper.make_node("Add", ["r", "c"] if residual_first else ["c", "r"], ["s"])]
    if activation:
        nodes += _activation_nodes(activation, activation_attrs or {}, "s", "y", inits)
    model = make_model(nodes, [("x", np.float32, list(x_shape)), ("r", np.float32, list(r_shape))],
                       [("y" if activation else "s", np.float32, None)], inits)
    feeds = {"x": random(x_shape, seed=3), "r": random(r_shape, seed=4)}
    return model, feeds


@pytest.mark.parametrize("kind", list(RESIDUAL_CONVS))
def test_residual_add_goes_into_every_conv_kernel(kind, request):
    """Conv -> Add -> Relu becomes one FusedConv on each kernel: onnxruntime's values,
    and the bits of the unfused graph in fast and exact mode on 1 and 2 threads."""
    _select_kernel(kind, request)
    model, feeds = _residual_model(kind, residual_first=kind == "implicit")
    want = run_ort(model, feeds)["y"]
    for mode in ("fast", "exact"):
        plain = aotc.compile(model, opt_level="basic", mode=mode).run(feeds)["y"]
        for threads in (1, 2):
            fused = aotc.compile(model, mode=mode, threads=threads)
            assert fused.report["nodes_after"] == {"FusedConv": 1}, fused.report["nodes_after"]
            assert fused.report["passes"]["conv-residual"] == 1
            got = fused.run(feeds)["y"]
            np.testing.assert_allclose(got, want, **RESIDUAL_ORT_TOL)
            np.testing.assert_array_equal(got.view(np.uint32), plain.view(np.uint32))


# the kernels that read each residual element before writing Y's (aotc_conv.h)
RESIDUAL_IN_PLACE = set(RESIDUAL_CONVS) - {"depthwise", "implicit-k-past-a-block"}


def _residual_and_y_offsets(c_file):
    """Workspace offsets of the residual and of Y in the generated conv call (every conv
    kernel takes them as its last two tensors, the residual first)."""
    call = re.search(r"aotc_conv_\w+\(.*\(\(const float \*\)\(ws \+ (\d+)\)\), "
                     r"\(\(float \*\)\(ws \+ (\d+)\)\)", c_file.read_text())
    return call.groups()


@pytest.mark.parametrize("kind", list(RESIDUAL_CONVS))
def test_a_residual_dying_at_the_conv_gives_y_its_storage(kind, tmp_path, request):
    """A residual made in the workspace and read last by the fused conv becomes its
    output's storage on the kernels that allow it (and only there), with onnxruntime's
    values and the unfused graph's bits in fast and exact mode on 1 and 2 threads."""
    _select_kernel(kind, request)
    x_shape, w_shape, attrs = RESIDUAL_CONVS[kind]
    model, feeds = _residual_model(kind)
    c_shape = list(run_ort(model, feeds)["y"].shape)
    inits = {"W": random(w_shape, seed=1), "Bc": random((w_shape[0],), seed=2)}
    nodes = [helper.make_node("Sigmoid", ["r_in"], ["r"]),
             helper.make_node("Conv", ["x", "W", "Bc"], ["c"], **attrs),
             helper.make_node("Add", ["c", "r"], ["s"]), helper.make_node("Relu", ["s"], ["t"]),
             helper.make_node("Neg", ["t"], ["y"])]
    model = make_model(nodes, [("x", np.float32, list(x_shape)), ("r_in", np.float32, c_shape)],
                       [("y", np.float32, None)], inits)
    feeds = {"x": random(x_shape, seed=3), "r_in": random(c_shape, seed=4)}
    want = run_ort(model, feeds)["y"]
    for mode in ("fast", "exact"):
        plain = aotc.compile(model, opt_level="basic", mode=mode).run(feeds)["y"]
        for threads in (1, 2):
            out = tmp_path / f"{mode}{threads}"
            fused = aotc.compile(model, mode=mode, threads=threads, out_dir=out, name="m")
            assert fused.report["passes"]["conv-residual"] == 1
            residual_at, y_at = _residual_and_y_offsets(out / "m.c")
            assert (residual_at == y_at) == (kind in RESIDUAL_IN_PLACE), (residual_at, y_at)
            got = fused.run(feeds)["y"]
            np.testing.assert_allclose(got, want, **RESIDUAL_ORT_TOL)
            np.testing.assert_array_equal(got.view(np.uint32), plain.view(np.uint32))


def test_a_residual_that_is_also_the_conv_input_keeps_its_storage(tmp_path):
    """Conv(x) + x with x dying there: x is still read by the product, so Y gets storage
    of its own."""
    nodes = [helper.make_node("Sigmoid", ["x_in"], ["x"]), helper.make_node("Conv", ["x", "W"], ["c"]),
             helper.make_node("Add", ["c", "x"], ["s"]), helper.make_node("Neg", ["s"], ["y"])]
    model = make_model(nodes, [("x_in", np.float32, [1, 16, 9, 11])], [("y", np.float32, None)],
                       {"W": random((16, 16, 1, 1), seed=1)})
    feeds = {"x_in": random((1, 16, 9, 11), seed=3)}
    sess = aotc.compile(model, out_dir=tmp_path / "m", name="m")
    assert sess.report["passes"]["conv-residual"] == 1
    residual_at, y_at = _residual_and_y_offsets(tmp_path / "m" / "m.c")
    assert residual_at != y_at
    np.testing.assert_allclose(sess.run(feeds)["y"], run_ort(model, feeds)["y"], **ORT_TOL)


@pytest.mark.parametrize("kind", ["pointwise", "rows"])
@pytest.mark.parametrize("activation,attrs", [(None, None), ("Sigmoid", None),
                                              ("Clip", {"bounds": (-0.5, 0.75)})])
def test_residual_add_with_no_or_another_activation(kind, activation, attrs):
    """No activation after the Add, one left for after the store, and Clip (which the
    rows kernel's transposed store applies in registers): onnxruntime's values and
    the unfused graph's bits."""
    model, feeds = _residual_model(kind, activation=activation, activation_attrs=attrs)
    fused = aotc.compile(model)
    assert fused.report["nodes_after"] == {"FusedConv": 1}
    got = list(fused.run(feeds).values())[0]
    tolerance = ORT_TOL if kind == "pointwise" else RESIDUAL_ORT_TOL   # rows: 576 products a sum
    np.testing.assert_allclose(got, list(run_ort(model, feeds).values())[0], **tolerance)
    plain = list(aotc.compile(model, opt_level="basic").run(feeds).values())[0]
    np.testing.assert_array_equal(got.view(np.uint32), plain.view(np.uint32))


def test_broadcasting_or_shared_adds_stay_adds():
    """A residual that broadcasts, a conv output read twice and a conv with an
    activation of its own before the Add are left alone (and still right)."""
    model, feeds = _residual_model("pointwise", residual_shape=[1, 24, 1, 1])
    sess = aotc.compile(model)
    assert sess.report["passes"]["conv-residual"] == 0 and "Add" in sess.report["nodes_after"]
    np.testing.assert_allclose(sess.run(feeds)["y"], run_ort(model, feeds)["y"], **ORT_TOL)

    x_shape, w_shape, _ = RESIDUAL_CONVS["pointwise"]
    inits = {"W": random(w_shape, seed=1)}
    twice = make_model([helper.make_node("Conv", ["x", "W"], ["c"]),
                        helper.make_node("Add", ["c", "r"], ["s"]),
                        helper.make_node("Mul", ["s", "c"], ["y"])],
                       [("x", np.float32, list(x_shape)), ("r", np.float32, [2, 24, 9, 11])],
                       [("y", np.float32, None)], inits)
    relu_first = make_model([helper.make_node("Conv", ["x", "W"], ["c"]),
                             helper.make_node("Relu", ["c"], ["a"]),
                             helper.make_node("Add", ["a", "r"], ["y"])],
                            [("x", np.float32, list(x_shape)), ("r", np.float32, [2, 24, 9, 11])],
                            [("y", np.float32, None)], inits)
    feeds = {"x": random(x_shape, seed=3), "r": random((2, 24, 9, 11), seed=4)}
    for model in (twice, relu_first):
        sess = aotc.compile(model)
        assert sess.report["passes"]["conv-residual"] == 0 and "Add" in sess.report["nodes_after"]
        np.testing.assert_allclose(sess.run(feeds)["y"], run_ort(model, feeds)["y"], **ORT_TOL)


# ---- the operators on their own -------------------------------------------------------

def _linear_node_model(attrs, a_shape=(4, 6), n=5):
    inits = {"B": random((a_shape[-1], n), seed=1)}
    model = make_model([helper.make_node("Linear", ["a", "B"], ["y"], domain="ai.aotc", **attrs)],
                       [("a", np.float32, list(a_shape))], [("y", np.float32, None)], inits)
    model.opset_import.append(helper.make_opsetid("ai.aotc", 1))
    return model


def test_unknown_activation_is_refused():
    with pytest.raises(aotc.errors.Unsupported, match="Softplus"):
        aotc.compile(_linear_node_model({"activation": "Softplus"}), opt_level="none")


def test_bad_gelu_approximate_is_refused():
    with pytest.raises(aotc.errors.InvalidModel, match="gelu_approximate"):
        aotc.compile(_linear_node_model({"activation": "Gelu", "gelu_approximate": "fast"}),
                     opt_level="none")


def test_linear_on_a_constant_input_folds():
    """A constant A makes the whole node a compile-time constant (numpy evaluation)."""
    a = random((3, 6), seed=5)
    b = random((6, 4), seed=6)
    model = make_model([helper.make_node("Linear", ["a", "B"], ["p"], domain="ai.aotc",
                                         activation="Clip", clip_min=-0.5, clip_max=0.5),
                        helper.make_node("Add", ["p", "x"], ["y"])],
                       [("x", np.float32, [3, 4])], [("y", np.float32, None)], {"a": a, "B": b})
    model.opset_import.append(helper.make_opsetid("ai.aotc", 1))
    sess = aotc.compile(model, opt_level="basic")
    x = random((3, 4), seed=7)
    np.testing.assert_allclose(sess.run(x), np.clip(a @ b, -0.5, 0.5) + x, rtol=1e-6, atol=1e-6)
    assert "Linear" not in sess.report["nodes_after"]


@pytest.mark.parametrize("module", [linear_pack_fuse, conv_activation], ids=["linear", "conv"])
def test_fused_operators_are_clean_under_sanitizers(module, tmp_path):
    if module is linear_pack_fuse:
        model = _linear_model((1, 37), 45, [("Gelu", {}), ("Clip", {"bounds": (-0.5, None)})], opset=20)
        model_rows = _linear_model((9, 300), 33, [("HardSwish", {})], opset=20)
        models = [model, model_rows]
    else:
        models = [_conv_model(kind, [("LeakyRelu", {})]) for kind in CONVS]
    for i, model in enumerate(models):
        out = tmp_path / f"m{i}"
        sess = _fused_session(model, module, out_dir=out, name="fz")
        assert sess.report["nodes_after"].get("Linear" if module is linear_pack_fuse else "FusedConv")
        run_sanitized(out, "fz", ["-Wall", "-Wextra", "-Werror"])
