"""Conv against onnxruntime: 1-D, 2-D and 3-D, groups, strides, dilations, pads and
auto_pad, bias, and the six kernels (pointwise GEMM, direct depthwise, implicit GEMM over
phase planes, "pixels": output pixels over the same planes against compile-time packed
weights, im2col, and "rows": output pixels as GEMM rows against those weights)."""
import re
import subprocess

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import aotc
from oracle import assert_matches_ort, make_model, random, relative_error, run_ort
from sanitize import CC, run_sanitized

# Sums of up to a few hundred products of values in [-2, 2]: compare relative to the
# output's scale, since the GEMM may block its accumulation differently from ORT.
RTOL, ATOL = 1e-4, 1e-4


def conv_model(x_shape, w_shape, bias=True, opset=17, weight_input=False, **attrs):
    inputs = ["x", "w"] + (["b"] if bias else [])
    inits = {"b": random((w_shape[0],), seed=2)} if bias else {}
    graph_inputs = [("x", np.float32, x_shape)]
    if weight_input:
        graph_inputs.append(("w", np.float32, w_shape))
    else:
        inits["w"] = random(w_shape, seed=1, low=-0.5, high=0.5)
    return make_model([helper.make_node("Conv", inputs, ["y"], **attrs)], graph_inputs,
                      [("y", np.float32, None)], inits, opset=opset)


def check(x_shape, w_shape, bias=True, opset=17, **attrs):
    model = conv_model(x_shape, w_shape, bias, opset, **attrs)
    return assert_matches_ort(model, {"x": random(x_shape)}, rtol=RTOL, atol=ATOL)


def check_many(x_shape, convs, opset=17):
    """Several convs of one input in one model (one compile): convs are
    (weight shape, with bias, attributes)."""
    nodes, inits, outputs = [], {}, []
    for i, (w_shape, bias, attrs) in enumerate(convs):
        inits[f"w{i}"] = random(w_shape, seed=10 + i, low=-0.5, high=0.5)
        if bias:
            inits[f"b{i}"] = random((w_shape[0],), seed=50 + i)
        inputs = ["x", f"w{i}"] + ([f"b{i}"] if bias else [])
        nodes.append(helper.make_node("Conv", inputs, [f"y{i}"], name=f"conv{i}", **attrs))
        outputs.append((f"y{i}", np.float32, None))
    model = make_model(nodes, [("x", np.float32, x_shape)], outputs, inits, opset=opset)
    return assert_matches_ort(model, {"x": random(x_shape)}, rtol=RTOL, atol=ATOL)


def kernel_used(tmp_path, model):
    """Which conv kernel the generated C calls (exactly one conv node in the model)."""
    sess = aotc.compile(model, out_dir=tmp_path, name="convk")
    code = (tmp_path / "convk.c").read_text()
    kinds = [k for k in ("pointwise", "direct", "implicit", "pixels", "im2col", "rows", "winograd")
             if f"aotc_conv_{k}(" in code]
    assert len(kinds) == 1, kinds
    return kinds[0], sess


# ---- 2-D, every attribute form -----------------------------------------------------

def test_2d_pads_odd_sizes_batch_2_with_and_without_bias():
    check_many((2, 5, 13, 11), [((4, 5, 3, 3), bias, {"pads": pads}) for bias in (True, False)
                                for pads in ([0, 0, 0, 0], [1, 1, 1, 1], [1, 0, 2, 3], [0, 2, 1, 0])])


def test_2d_strides_and_dilations():
    check_many((2, 5, 13, 11), [((3, 5, 3, 2), True, {"strides": s, "dilations": d, "pads": [1, 2, 0, 1]})
                                for s, d in [([2, 2], [1, 1]), ([1, 3], [1, 1]), ([1, 1], [2, 2]),
                                             ([2, 1], [1, 3]), ([3, 2], [2, 2])]])


@pytest.mark.parametrize("auto_pad", ["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"])
def test_2d_auto_pad(auto_pad):
    # even kernel dims make SAME_UPPER and SAME_LOWER pad differently
    check_many((2, 5, 13, 11), [((4, 5, 4, 3), True, {"auto_pad": auto_pad, "strides": s})
                                for s in ([1, 1], [2, 2], [3, 2])])


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
def test_same_padding_with_dilation(auto_pad):
    # onnxruntime refuses dilation with SAME padding; onnx.reference follows the spec
    model = conv_model((1, 3, 12, 9), (2, 3, 3, 2), auto_pad=auto_pad, dilations=[2, 3], strides=[2, 1])
    x = random((1, 3, 12, 9))
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    got = aotc.compile(model).run({"x": x})["y"]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def test_groups():
    check_many((2, 6, 13, 11), [((12, 6 // g, 3, 3), True, {"group": g, "pads": [1, 1, 0, 2], "strides": [1, 2]})
                                for g in (1, 2, 3)])


def test_depthwise():
    check_many((2, 7, 13, 11), [((7, 1, 3, 3), bias, {"group": 7, "strides": s, "pads": p})
                                for bias in (True, False)
                                for s, p in [([1, 1], [1, 1, 1, 1]), ([2, 2], [1, 1, 1, 1]),
                                             ([2, 2], [0, 0, 1, 1]), ([1, 2], [2, 0, 1, 1])]])


def test_one_input_channel_per_group_variants():
    check_many((2, 4, 13, 11), [((8, 1, 3, 5), True, {"group": 4, "dilations": [2, 1], "pads": [2, 2, 2, 2]}),
                                ((4, 1, 5, 5), False, {"group": 4, "strides": [3, 2]}),
                                ((4, 1, 1, 1), True, {"group": 4}),
                                ((4, 1, 3, 3), True, {"group": 4, "dilations": [2, 3], "pads": [2, 1, 3, 2],
                                                      "strides": [1, 2]})])
    check((2, 1, 13, 11), (6, 1, 5, 5), pads=[2, 2, 2, 2], strides=[2, 2])


def test_kernel_larger_than_input_with_padding():
    check((1, 2, 3, 2), (3, 2, 5, 5), pads=[2, 2, 2, 3])


# ---- 1-D and 3-D -------------------------------------------------------------------

def test_1d():
    cases = [{}, {"pads": [2, 1]}, {"strides": [2], "dilations": [2]},
             {"auto_pad": "SAME_UPPER", "strides": [2]}, {"auto_pad": "SAME_LOWER"},
             {"auto_pad": "VALID", "strides": [3]}, {"group": 5, "pads": [1, 1]}]
    check_many((2, 5, 29), [((5, 1 if a.get("group") else 5, 4), True, a) for a in cases]
               + [((3, 5, 1), False, {})])


def test_3d():
    cases = [{"pads": [1, 0, 1, 0, 1, 1]}, {"strides": [2, 1, 2], "auto_pad": "SAME_LOWER"},
             {"group": 3, "dilations": [1, 2, 1]}]
    check_many((2, 3, 6, 7, 5), [((3, 1 if a.get("group") else 3, 3, 2, 3), True, a) for a in cases]
               + [((4, 3, 1, 1, 1), True, {})])


# ---- the shapes of real models ------------------------------------------------------

def test_resnet_stem_7x7_stride_2():
    check((1, 3, 224, 224), (16, 3, 7, 7), pads=[3, 3, 3, 3], strides=[2, 2], kernel_shape=[7, 7])


def test_projection_1x1_stride_2():
    check((2, 16, 14, 14), (32, 16, 1, 1), strides=[2, 2])


def test_pointwise():
    check_many((2, 6, 13, 11), [((8, 6 // g, 1, 1), bias, {"group": g}) for g, bias in [(1, True), (2, False)]])


@pytest.mark.parametrize("mode", ["fast", "exact"])
@pytest.mark.parametrize("x_shape, w_shape, group", [
    ((1, 300, 20, 30), (37, 300, 1, 1), 1),   # two K-blocks, ragged panels, 600 pixels
    ((2, 64, 5, 7), (90, 32, 1, 1), 2),       # groups and images
])
def test_pointwise_weights_packed_at_compile_time_give_the_bits_of_weights_fed_at_run(tmp_path, mode, x_shape,
                                                                                       w_shape, group):
    """Weights known at compile time come in the GEMM's packed-A layout; fed at run time
    they are read (or packed by the GEMM) as they are: the same sums."""
    from aotc import build
    from aotc.ops.matmul import PANEL_ROWS
    packed = aotc.compile(conv_model(x_shape, w_shape, group=group), mode=mode, out_dir=tmp_path / "c", name="pw")
    fed = aotc.compile(conv_model(x_shape, w_shape, group=group, weight_input=True), mode=mode,
                       out_dir=tmp_path / "f", name="pw")
    for folder, rows in (("c", PANEL_ROWS[build.resolve_target("native")]), ("f", 0)):
        assert _pointwise_panel_rows((tmp_path / folder / "pw.c").read_text()) == rows
    x, w = random(x_shape), random(w_shape, seed=1, low=-0.5, high=0.5)
    np.testing.assert_array_equal(packed.run(x).view(np.uint32), fed.run({"x": x, "w": w})["y"].view(np.uint32))


def _pointwise_panel_rows(c_source):
    """The panel rows of the packed weights a generated aotc_conv_pointwise call passes
    (its fifth argument), 0 for weights as they are."""
    return int(re.search(r"aotc_conv_pointwise\(.*?[\])]\), (\d+), ", c_source).group(1))


@pytest.mark.parametrize("target, built_as", [("avx512", "generic"), ("generic", "avx2")])
def test_pointwise_weights_packed_for_another_path_give_its_exact_bits(monkeypatch, target, built_as):
    """C generated for one target but built with another path's flags (its GEMM's panels
    of other heights) makes its panels from the packed weights: exact mode's bits, the
    same on every path, come out."""
    from aotc import build
    if built_as == "avx2" and build.resolve_target("native") == "generic":
        pytest.skip("this machine runs no AVX2 code")
    model, x = conv_model((1, 300, 6, 7), (37, 300, 1, 1)), random((1, 300, 6, 7))
    want = aotc.compile(model, mode="exact", target=built_as).run(x)
    monkeypatch.setitem(build._TARGET_FLAGS, target, build._TARGET_FLAGS[built_as])
    got = aotc.compile(model, mode="exact", target=target).run(x)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_im2col_cut_into_ragged_column_blocks():
    # K = 64 * 9: the 40x40 output is cut into blocks that end mid-row (a depth of one
    # with a depth dilation keeps the conv off the implicit kernel)
    check((1, 64, 1, 40, 40), (8, 64, 1, 3, 3), pads=[0, 1, 1, 0, 1, 1], dilations=[2, 1, 1])


@pytest.mark.parametrize("kernel", ["pixels", "implicit"])
def test_phase_plane_kernels_strides_phases_and_several_k_blocks(kernel, request):
    # K = 30 * 5 * 4 = 600: three K-blocks; strides 2 and 3 read 2 x 3 phase planes,
    # stride 4 across a 3-wide kernel reads 3 of its 4; wide pads; ragged panels and
    # strips (pixels: rows of 7 to 10 output pixels, each cut in one tile; 19 and 33
    # channels, strips of 32 with padding)
    if kernel == "implicit":
        request.getfixturevalue("without_pixels_kernel")
    check_many((2, 30, 23, 29), [((19, 30, 5, 4), True, {"strides": [2, 3], "pads": [2, 1, 3, 2]}),
                                 ((33, 30, 3, 3), False, {"strides": [1, 4], "pads": [1, 2, 0, 1]}),
                                 ((7, 30, 2, 2), True, {"strides": [3, 3]})])


def test_pixels_implicit_and_im2col_give_the_same_bits_in_exact_mode(request):
    # the same conv as 2-D (pixels, then implicit) and as 3-D of depth 1 with a depth
    # dilation (im2col); K = 24 * 3 * 4 = 288: two K-blocks, and three pieces of the
    # pixels kernel (AOTC_CONV_PIXELS_PIECE), the last ragged
    x = random((2, 24, 33, 31))
    w = random((10, 24, 3, 4), seed=3, low=-0.5, high=0.5)
    b = random((10,), seed=4)
    outputs = []
    for kind in ("pixels", "implicit", "im2col"):
        depth = kind == "im2col"
        if kind == "implicit":
            request.getfixturevalue("without_pixels_kernel")
        shape = (2, 24, 1, 33, 31) if depth else x.shape
        attrs = {"strides": [1, 2, 1] if depth else [2, 1],
                 "pads": [0, 1, 2, 0, 0, 1] if depth else [1, 2, 0, 1]}
        if depth:
            attrs["dilations"] = [3, 1, 1]
        model = make_model([helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs)],
                           [("x", np.float32, shape)], [("y", np.float32, None)],
                           {"w": w[:, :, None] if depth else w, "b": b})
        sess = aotc.compile(model, mode="exact", threads=2)
        assert f"aotc_conv_{kind}(" in open(f"{sess.out_dir}/{sess.name}.c").read()
        y = sess.run({"x": x.reshape(shape)})["y"]
        outputs.append(y[:, :, 0] if depth else y)
    assert outputs[0].tobytes() == outputs[1].tobytes() == outputs[2].tobytes()


def test_mobilenet_pad_then_depthwise_stride_2():
    nodes = [helper.make_node("Pad", ["x", "p"], ["xp"]),
             helper.make_node("Conv", ["xp", "w", "b"], ["y"], group=8, strides=[2, 2])]
    inits = {"p": np.array([0, 0, 0, 0, 0, 0, 1, 1], np.int64), "w": random((8, 1, 3, 3), seed=1),
             "b": random((8,), seed=2)}
    model = make_model(nodes, [("x", np.float32, (1, 8, 16, 16))], [("y", np.float32, None)], inits)
    assert_matches_ort(model, {"x": random((1, 8, 16, 16))}, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("opset", [7, 11, 22])
def test_opsets(opset):
    check((2, 5, 13, 11), (4, 5, 3, 3), opset=opset, auto_pad="SAME_UPPER")


def test_weights_as_run_time_input():
    for w_shape, attrs in [((4, 5, 3, 3), {"pads": [1, 1, 1, 1]}), ((5, 1, 3, 3), {"group": 5}),
                           ((4, 5, 1, 1), {})]:
        model = conv_model((2, 5, 13, 11), w_shape, weight_input=True, **attrs)
        feeds = {"x": random((2, 5, 13, 11)), "w": random(w_shape, seed=7)}
        assert_matches_ort(model, feeds, rtol=RTOL, atol=ATOL)


# ---- the rows kernel (deep layers: few pixels, many weights) ---------------------------

def test_rows_kernel_pointwise_strided_grouped_and_batched(without_pixels_kernel):
    check_many((2, 64, 6, 7), [((40, 64, 1, 1), True, {}),                       # reads X itself
                               ((20, 32, 3, 3), True, {"group": 2, "pads": [1, 1, 1, 1]}),
                               ((24, 64, 3, 3), False, {"strides": [2, 2], "pads": [0, 1, 1, 0]}),
                               ((16, 64, 1, 1), True, {"strides": [2, 2]})])


def test_rows_kernel_cut_into_ragged_pixel_tiles(without_pixels_kernel):
    # More pixels than channels: the GEMM unfolds panel by panel, and the product tiles
    # (784 pixels x 700 channels) are cut to fit scratch, the last one ragged
    check((1, 256, 28, 28), (700, 256, 3, 3), pads=[1, 1, 1, 1])
    # Fewer: the unfolded tiles are stored (K = 512 * 9 floats a pixel), cut likewise
    check((1, 512, 14, 14), (256, 512, 3, 3), pads=[1, 1, 1, 1])
    # 16 pixels: two GEMM row panels of 8 (a 14-row panel and a 2-row one, evened out)
    check((1, 64, 4, 4), (8, 64, 3, 3), pads=[1, 1, 1, 1])
    # one pixel, one channel: a single made row goes through the tiles
    check((1, 8, 3, 3), (1, 8, 3, 3))
    # one pixel read from X itself: a product of one row (the M = 1 path), stored whole
    check((1, 64, 1, 1), (40, 64, 1, 1))


def test_rows_kernel_with_run_time_weights():
    model = conv_model((2, 40, 5, 4), (8, 40, 3, 3), weight_input=True, pads=[1, 1, 1, 1])
    feeds = {"x": random((2, 40, 5, 4)), "w": random((8, 40, 3, 3), seed=7)}
    assert_matches_ort(model, feeds, rtol=RTOL, atol=ATOL)


# ---- kernel choice, threads, sanitizers ---------------------------------------------

@pytest.mark.parametrize("x_shape, w_shape, attrs, kind", [
    ((1, 6, 9, 9), (8, 6, 1, 1), {}, "pointwise"),
    ((1, 40, 20, 20), (8, 40, 1, 1), {"strides": [2, 2]}, "implicit"),
    ((1, 40, 9, 9), (8, 40, 1, 1), {"pads": [0, 0, 1, 0]}, "implicit"),
    ((1, 6, 9, 9), (6, 1, 3, 3), {"group": 6}, "direct"),
    # 2-D, wider than 1x1, weights known and at most PIXELS_MAX_WEIGHT_BYTES: pixels
    ((1, 6, 9, 9), (8, 6, 3, 3), {"pads": [1, 1, 1, 1]}, "pixels"),
    ((1, 6, 33, 33), (8, 6, 5, 5), {"strides": [2, 2]}, "pixels"),
    # strided, with more weights per output channel (K) than output pixels: rows
    ((1, 6, 9, 9), (8, 6, 5, 5), {"strides": [2, 2]}, "rows"),
    ((1, 3, 32, 32), (8, 3, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}, "pixels"),
    # larger weights (1.2-1.4 MB): channels as rows, or pixels as rows where K >= pixels
    ((1, 128, 40, 40), (400, 128, 3, 2), {"pads": [1, 1, 1, 1]}, "implicit"),
    ((1, 128, 6, 6), (300, 128, 3, 3), {"pads": [1, 1, 1, 1]}, "rows"),
    ((1, 6, 20, 20), (8, 6, 3, 3), {"dilations": [2, 2]}, "im2col"),
    ((1, 4, 4, 12, 12), (8, 4, 3, 3, 3), {}, "im2col"),
    # 1x1 with more weights per output channel (K) than output pixels: pixels as rows,
    # from registers for one K-block over rows of 14 or more, else through the rows
    # kernel's scratch
    ((1, 48, 5, 7), (8, 48, 1, 1), {}, "rows"),
    ((1, 240, 3, 15), (40, 240, 1, 1), {}, "pixels"),
    ((1, 300, 3, 15), (8, 300, 1, 1), {}, "rows"),
    ((1, 6, 9, 9), (8, 6, 1, 1), {"strides": [2, 2]}, "implicit"),
    # 3x3 stride 1 with 32 or more channels in and out and 49 or more 2x2 output tiles, or
    # 128 channels and 16 tiles, and transformed weights within 16 MiB (64 bytes per
    # channel pair)
    ((1, 128, 40, 40), (128, 128, 3, 3), {"pads": [1, 1, 1, 1]}, "winograd"),
    ((1, 256, 14, 14), (256, 256, 3, 3), {"pads": [1, 1, 1, 1]}, "winograd"),
    ((1, 512, 7, 7), (512, 512, 3, 3), {"pads": [1, 1, 1, 1]}, "winograd"),
    ((1, 512, 7, 7), (513, 512, 3, 3), {"pads": [1, 1, 1, 1]}, "rows"),
    ((1, 128, 7, 7), (128, 128, 3, 3), {"pads": [1, 1, 1, 1]}, "winograd"),
    ((1, 128, 6, 7), (128, 128, 3, 3), {"pads": [1, 1, 1, 1]}, "pixels"),   # 12 tiles
    ((1, 127, 7, 7), (128, 127, 3, 3), {"pads": [1, 1, 1, 1]}, "pixels"),
    ((1, 32, 13, 14), (32, 32, 3, 3), {"pads": [1, 1, 1, 1]}, "winograd"),
    ((1, 31, 13, 14), (32, 31, 3, 3), {"pads": [1, 1, 1, 1]}, "pixels"),
    ((1, 32, 12, 12), (32, 32, 3, 3), {"pads": [1, 1, 1, 1]}, "pixels"),   # 36 tiles
    ((1, 64, 14, 14), (64, 64, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}, "rows"),
    ((1, 64, 14, 14), (64, 32, 3, 3), {"pads": [1, 1, 1, 1], "group": 2}, "pixels"),
])
def test_kernel_choice(tmp_path, x_shape, w_shape, attrs, kind):
    model = conv_model(x_shape, w_shape, **attrs)
    used, sess = kernel_used(tmp_path, model)
    assert used == kind
    x = random(x_shape)
    want = run_ort(model, {"x": x})["y"]
    tolerance = WINOGRAD_4X4_TOLERANCE if kind == "winograd" else 1e-5
    assert relative_error(sess.run({"x": x})["y"], want) < tolerance


def test_pointwise_on_the_pixels_kernel_adds_a_residual_in_place(tmp_path):
    """A 1x1 conv of one K-block (two pieces of the pixels kernel: 128 and 112 rows of
    K) on the pixels kernel, its residual Add fused and the sum written over the
    residual (a buffer that dies there): ONNX Runtime's values, the same bits at 1 and 2
    threads."""
    n = helper.make_node
    model = make_model([n("Sigmoid", ["r"], ["s"]), n("Conv", ["x", "w", "b"], ["c"]),
                        n("Add", ["c", "s"], ["a"]), n("Relu", ["a"], ["t"]), n("Mul", ["t", "t"], ["y"])],
                       [("x", np.float32, (1, 240, 3, 15)), ("r", np.float32, (1, 40, 3, 15))],
                       [("y", np.float32, None)],
                       {"w": random((40, 240, 1, 1), seed=1, low=-0.2, high=0.2), "b": random((40,), seed=2)})
    used, sess = kernel_used(tmp_path, model)
    assert used == "pixels"
    call = (tmp_path / "convk.c").read_text().split("aotc_conv_pixels(")[1].split(";")[0]
    assert call.count("(ws + 0)") == 2   # the residual, and the output over it
    feeds = {"x": random((1, 240, 3, 15), seed=3), "r": random((1, 40, 3, 15), seed=4)}
    two = aotc.compile(model, threads=2).run(feeds)["y"]
    assert sess.run(feeds)["y"].tobytes() == two.tobytes()
    assert relative_error(two, run_ort(model, feeds)["y"]) < 1e-5


@pytest.mark.parametrize("width", [45, 121])
def test_stem_on_the_pixels_kernel_with_a_residual_and_an_activation_after_the_store(tmp_path, width):
    """A stem (K = 27, 36 output channels: two groups of 16, then 4 of a run of 8 whose
    other 4 read the weights' zero padding) takes, on AVX-512, the pixels kernel's
    vectors of output pixels: rows of 23 (a run of two vectors, the second ragged) or of
    61 (a run of three whole vectors, then one ragged), in two images; its fused residual
    Add and a Sigmoid after it: ONNX Runtime's values, the same bits at 1 and 2 threads,
    and in exact mode the generic path's bits."""
    from aotc import build
    n = helper.make_node
    out_w = (width + 1) // 2
    model = make_model([n("Conv", ["x", "w", "b"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1]),
                        n("Add", ["c", "r"], ["a"]), n("Sigmoid", ["a"], ["y"])],
                       [("x", np.float32, (2, 3, 19, width)), ("r", np.float32, (2, 36, 10, out_w))],
                       [("y", np.float32, None)],
                       {"w": random((36, 3, 3, 3), seed=1, low=-0.3, high=0.3), "b": random((36,), seed=2)})
    used, sess = kernel_used(tmp_path, model)
    assert used == "pixels"
    feeds = {"x": random((2, 3, 19, width), seed=3), "r": random((2, 36, 10, out_w), seed=4)}
    two = aotc.compile(model, threads=2).run(feeds)["y"]
    assert sess.run(feeds)["y"].tobytes() == two.tobytes()
    assert relative_error(two, run_ort(model, feeds)["y"]) < 1e-5
    want = aotc.compile(model, mode="exact", target="generic", threads=1).run(feeds)["y"]
    got = aotc.compile(model, mode="exact", target=build.resolve_target("native"), threads=2).run(feeds)["y"]
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("x_shape, w_shape, attrs", [
    ((2, 64, 40, 40), (16, 64, 3, 3), {"pads": [1, 1, 1, 1]}),     # pixels, tasks of pixel rows
    ((1, 64, 40, 40), (16, 64, 3, 3), {"pads": [1, 1, 1, 1], "dilations": [2, 2]}),   # im2col
    ((2, 3, 64, 64), (16, 3, 7, 7), {"pads": [3, 3, 3, 3], "strides": [2, 2]}),
    ((1, 256, 14, 14), (24, 256, 3, 3), {"pads": [1, 1, 1, 1]}),   # pixels, tasks of strips
    ((1, 128, 40, 40), (400, 128, 3, 2), {"pads": [1, 1, 1, 1]}),  # implicit
    ((2, 32, 56, 56), (64, 32, 1, 1), {}),
    ((2, 32, 57, 57), (32, 1, 3, 3), {"group": 32, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 256, 12, 12), (140, 256, 3, 3), {"pads": [1, 1, 1, 1]}),     # rows, tasks of one made panel
    ((2, 48, 17, 13), (40, 48, 3, 3), {"pads": [1, 0, 2, 1]}),        # winograd
    ((1, 256, 7, 7), (150, 256, 3, 3), {"pads": [1, 1, 1, 1]}),       # rows, unfolded tile stored
    ((1, 256, 4, 4), (150, 256, 3, 3), {"pads": [1, 1, 1, 1]}),       # rows, the same in 2 panels
    ((1, 256, 14, 14), (300, 256, 1, 1), {"strides": [2, 2]}),        # rows, unfolded tile stored
])
def test_bit_identical_across_thread_counts(x_shape, w_shape, attrs):
    model = conv_model(x_shape, w_shape, **attrs)
    x = random(x_shape)
    one = aotc.compile(model, threads=1).run({"x": x})["y"]
    two = aotc.compile(model, threads=2).run({"x": x})["y"]
    assert one.tobytes() == two.tobytes()
    assert relative_error(two, run_ort(model, {"x": x})["y"]) < 1e-5


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_runs_clean_under_sanitizers_and_warnings(tmp_path):
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 0, 2, 1], strides=[2, 1]),
             helper.make_node("Conv", ["a", "w2", "b2"], ["d"], group=4, pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["d", "w3", "b3"], ["p"]),
             helper.make_node("Conv", ["p", "w4"], ["z"], pads=[1, 1, 1, 1], strides=[2, 2]),  # rows
             helper.make_node("MaxPool", ["z"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 1, 1])]
    inits = {"w1": random((4, 3, 3, 3), seed=1), "w2": random((4, 1, 3, 3), seed=2),
             "b2": random((4,), seed=3), "w3": random((5, 4, 1, 1), seed=4), "b3": random((5,), seed=5),
             "w4": random((6, 5, 5, 5), seed=6)}
    outputs = [("y", np.float32, None)]
    for dtype, tag in ((np.float16, "h"), (np.float64, "d")):   # staged and double convs, typed pools
        inits[f"w{tag}"] = random((4, 3, 3, 2), seed=7).astype(dtype)
        inits[f"b{tag}"] = random((4,), seed=8).astype(dtype)
        nodes += [helper.make_node("Cast", ["x"], [f"x{tag}"], to=helper.np_dtype_to_tensor_dtype(np.dtype(dtype))),
                  helper.make_node("Conv", [f"x{tag}", f"w{tag}", f"b{tag}"], [f"c{tag}"], pads=[1, 0, 2, 1]),
                  helper.make_node("Relu", [f"c{tag}"], [f"r{tag}"]),
                  helper.make_node("AveragePool", [f"r{tag}"], [f"y{tag}"], kernel_shape=[3, 2], pads=[1, 1, 0, 0])]
        outputs.append((f"y{tag}", dtype, None))
    nodes += [helper.make_node("Cast", ["x"], ["xi"], to=helper.np_dtype_to_tensor_dtype(np.dtype(np.int8))),
              helper.make_node("MaxPool", ["xi"], ["yi", "ii"], kernel_shape=[2, 3], strides=[2, 1])]
    outputs += [("yi", np.int8, None), ("ii", np.int64, None)]
    model = make_model(nodes, [("x", np.float32, (2, 3, 13, 11))], outputs, inits)
    sess = aotc.compile(model, out_dir=tmp_path, name="convsan")
    assert run_sanitized(tmp_path, sess.name).split()[0] == "y"
    warnings = subprocess.run([CC, "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-I.", "-Wa,-I.",
                               "-c", "convsan.c", "-o", "warnings.o"],
                              cwd=tmp_path, capture_output=True, text=True)
    assert warnings.returncode == 0, warnings.stderr


# Winograd's F(4x4, 3x3) rounds more than the direct sums and F(2x2, 3x3): 1.0e-5 of
# onnxruntime on 128 channels of the tests' random data (ResNet-50's logits: 1.4e-6,
# as with F(2x2)).
WINOGRAD_4X4_TOLERANCE = 3e-5


def _winograd_tile(c_source):
    """The tile side m of the generated aotc_conv_winograd call (its third argument)."""
    return int(re.search(r"aotc_conv_winograd\(.*?\}\}, (\d+), ", c_source).group(1))


def _winograd_model(x_shape, w_shape, pads, act, residual):
    """Conv (3x3, stride 1) [+ Add of the input r] + act."""
    out = (x_shape[0], w_shape[0], x_shape[2] + pads[0] + pads[2] - 2, x_shape[3] + pads[1] + pads[3] - 2)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=pads)]
    inputs = [("x", np.float32, x_shape)]
    if residual:
        nodes.append(helper.make_node("Add", ["c", "r"], ["s"]))
        inputs.append(("r", np.float32, out))
    nodes.append(helper.make_node(act, [nodes[-1].output[0]], ["y"]) if act != "Clip" else
                 helper.make_node("Clip", [nodes[-1].output[0], "lo", "hi"], ["y"]))
    inits = {"w": random(w_shape, seed=1, low=-0.2, high=0.2), "b": random((w_shape[0],), seed=2),
             "lo": np.array(-0.5, np.float32), "hi": np.array(0.75, np.float32)}
    feeds = {"x": random(x_shape, seed=3)}
    if residual:
        feeds["r"] = random(out, seed=4)
    return make_model(nodes, inputs, [("y", np.float32, None)], inits), feeds


@pytest.mark.parametrize("x_shape, w_shape, pads, act, residual, tile", [
    ((2, 48, 17, 13), (40, 48, 3, 3), [1, 0, 2, 1], "Clip", False, 2),    # odd sizes: ragged tiles
    ((1, 32, 15, 16), (36, 32, 3, 3), [0, 2, 0, 1], "Sigmoid", True, 2),  # activation after the store
    ((1, 40, 14, 15), (32, 40, 3, 3), [1, 1, 1, 1], "Identity", False, 2),
    ((1, 300, 14, 14), (32, 300, 3, 3), [1, 1, 1, 1], "Relu", False, 2),     # two K-blocks
    ((1, 32, 3, 191), (32, 32, 3, 3), [1, 1, 1, 1], "Relu", True, 2),       # rows across blocks
    ((1, 96, 10, 26), (96, 96, 3, 3), [1, 1, 1, 1], "Relu", True, 2),       # a last block of one tile
    ((1, 40, 14, 15), (32, 40, 3, 3), [1, 1, 1, 1], "Relu", True, 2),       # one block: three dispatches
    ((1, 136, 13, 14), (130, 136, 3, 3), [1, 1, 1, 1], "Relu", True, 2),    # weights past 1 MiB: one block
    # 49 or more 4x4 tiles an image: F(4x4, 3x3)
    ((1, 64, 28, 28), (64, 64, 3, 3), [1, 1, 1, 1], "Relu", True, 4),       # one block
    ((2, 40, 30, 29), (36, 40, 3, 3), [1, 0, 2, 1], "Relu", False, 4),      # ragged tiles, two images
    ((1, 32, 29, 31), (36, 32, 3, 3), [0, 2, 0, 1], "Sigmoid", True, 4),    # activation after the store
    ((1, 300, 28, 28), (32, 300, 3, 3), [1, 1, 1, 1], "Identity", False, 4),  # two K-blocks
    ((1, 32, 10, 150), (32, 32, 3, 3), [1, 1, 1, 1], "Relu", True, 4),      # rows across blocks
    ((1, 32, 20, 52), (32, 32, 3, 3), [1, 1, 1, 1], "Relu", True, 4),       # a last block of one tile
])
def test_winograd_matches_ort_in_fast_mode_and_is_not_used_in_exact_mode(tmp_path, x_shape, w_shape, pads,
                                                                         act, residual, tile):
    """Fast mode's 3x3 stride-1 convs by Winograd's F(2x2, 3x3), or F(4x4, 3x3) on
    larger planes: within 1e-5 of onnxruntime (its sums round differently from the
    direct kernels', by a few ulps), or WINOGRAD_4X4_TOLERANCE, with bias, a fused
    residual and each kind of activation; the same bits at 1 and 2 threads. Exact mode
    keeps the direct kernels."""
    model, feeds = _winograd_model(x_shape, w_shape, pads, act, residual)
    fast = aotc.compile(model, out_dir=tmp_path / "fast", name="wino", threads=1)
    assert _winograd_tile((tmp_path / "fast" / "wino.c").read_text()) == tile
    got = fast.run(feeds)["y"]
    assert relative_error(got, run_ort(model, feeds)["y"]) < (1e-5 if tile == 2 else WINOGRAD_4X4_TOLERANCE)
    assert aotc.compile(model, threads=2).run(feeds)["y"].tobytes() == got.tobytes()
    aotc.compile(model, out_dir=tmp_path / "exact", name="wino", mode="exact")
    assert "aotc_conv_winograd(" not in (tmp_path / "exact" / "wino.c").read_text()


def test_taking_lines_for_far_threads_keeps_the_bits(tmp_path, without_pixels_kernel, monkeypatch):
    """Built for threads far apart (-DAOTC_POOL_FAR=1), the tasks that take the lines
    they write with streamed zeros first give the same bits as built for near threads,
    at one thread and at two: a one-block Winograd conv (F(4x4): 49 tiles); the rows
    kernel's whole unfolded tile (a strided 3x3 conv to fewer pixels, 7x7, than
    channels) and its GEMM's packing of X^T (a 1x1 conv after it, K = 256, N = 512);
    the GEMM's blocks of C, in a pointwise conv with a fused residual and in a MatMul
    whose rows (333 floats) share lines between the tasks' columns."""
    from aotc import build
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Conv", ["r", "w2", "b2"], ["s"], pads=[1, 1, 1, 1], strides=[4, 4]),
             helper.make_node("Conv", ["s", "w3", "b3"], ["y"]),
             helper.make_node("Conv", ["c", "w4"], ["p"]),
             helper.make_node("Add", ["p", "x"], ["z"])]
    inits = {"w1": random((64, 64, 3, 3), seed=1, low=-0.2, high=0.2), "b1": random((64,), seed=2),
             "w2": random((256, 64, 3, 3), seed=3, low=-0.1, high=0.1), "b2": random((256,), seed=4),
             "w3": random((512, 256, 1, 1), seed=6, low=-0.1, high=0.1), "b3": random((512,), seed=7),
             "w4": random((64, 64, 1, 1), seed=8, low=-0.2, high=0.2)}
    convs = make_model(nodes, [("x", np.float32, (1, 64, 28, 28))], [("y", np.float32, None), ("z", np.float32, None)],
                       inits)
    matmul = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], [("a", np.float32, (50, 70))],
                        [("y", np.float32, None)], {"b": random((70, 333), seed=9)})
    cases = [(convs, {"x": random((1, 64, 28, 28), seed=5)}), (matmul, {"a": random((50, 70), seed=10)})]
    near = [aotc.compile(model, out_dir=tmp_path / f"near{i}", name="taken", threads=2) for i, (model, _) in
            enumerate(cases)]
    code = (tmp_path / "near0" / "taken.c").read_text()
    tile, block = map(int, re.search(r"aotc_conv_winograd\(.*?\}\}, (\d+), (\d+), ", code).groups())
    assert (tile, block) == (4, 64) and code.count("aotc_conv_rows(") == 2   # 49 tiles: one block
    assert code.count("aotc_conv_pointwise(") == 1
    assert "aotc_sgemm_packed" in (tmp_path / "near1" / "taken.c").read_text()
    expected = [session.run(feeds) for session, (_, feeds) in zip(near, cases)]
    assert relative_error(expected[0]["y"], run_ort(convs, cases[0][1])["y"]) < WINOGRAD_4X4_TOLERANCE
    c_flags = build.c_flags
    monkeypatch.setattr(build, "c_flags", lambda *args, **kwargs: c_flags(*args, **kwargs) + ["-DAOTC_POOL_FAR=1"])
    monkeypatch.setenv("AOTC_CACHE_DIR", str(tmp_path / "far-cache"))
    for threads in (1, 2):
        for i, ((model, feeds), want) in enumerate(zip(cases, expected)):
            got = aotc.compile(model, out_dir=tmp_path / f"far{threads}{i}", name="taken", threads=threads).run(feeds)
            assert all(got[k].tobytes() == want[k].tobytes() for k in want)


@pytest.mark.parametrize("channels, size, tile, one_block", [(256, 14, 2, True), (128, 28, 4, True),
                                                             (64, 56, 4, False), (256, 28, 2, False),
                                                             (512, 7, 2, True)])
def test_winograd_tiles_and_blocks_follow_the_planes_and_weights(channels, size, tile, one_block):
    """ResNet-50's 3x3 convs at 56x56 and 28x28 take 4x4 tiles; at 14x14 (16 such
    tiles) 2x2 ones; so does a 256 -> 256 conv at 28x28, whose weights transformed for
    4x4 tiles (9 MiB) pass WINOGRAD_4X4_MAX_WEIGHT_BYTES; so do its 512 -> 512 convs at
    7x7. Its 256 -> 256 convs at 14x14 (4 MiB of transformed weights), 128 -> 128 ones at
    28x28 (2.3 MiB) and 512 -> 512 ones at 7x7 (16 MiB) read them once: the image's tiles
    in one block, its products shared out in lanes; 64 -> 64 at 56x56 (4 MiB of
    transformed tiles and products, past WINOGRAD_IMAGE_BLOCK_BYTES) keeps blocks that fit
    L2, as does the 256 -> 256 conv at 28x28 (3.5 MiB)."""
    from aotc.ops import conv

    def geometry(batch=1):
        return conv.ConvGeometry(batch, 1, channels, channels, 2, (1, size, size), (1, size, size),
                                 (1, 3, 3), (1, 1, 1), (1, 1, 1), (0, 1, 1), const_weights=True)
    g, tiles = geometry(), (size // tile) ** 2
    assert g.kind() == "winograd" and g.winograd_tile == tile
    assert g.winograd_one_block() == one_block and (g.winograd_block() >= tiles) == one_block
    if one_block:
        assert g.winograd_lanes() == conv.WINOGRAD_LANES
        assert not geometry(batch=2).winograd_one_block()


@pytest.mark.parametrize("target", ["avx2", "generic"])
@pytest.mark.parametrize("x_shape, w_shape, tile, act", [((2, 33, 9, 65), (34, 33, 3, 3), 2, "Clip"),
                                                         ((1, 40, 14, 15), (32, 40, 3, 3), 2, "Clip"),  # one block
                                                         ((2, 33, 9, 135), (34, 33, 3, 3), 4, "Relu"),
                                                         ((1, 64, 27, 26), (64, 64, 3, 3), 4, "Relu")])  # one block
def test_winograd_transforms_off_avx512_match_ort(tmp_path, target, x_shape, w_shape, tile, act):
    """The AVX2 and portable builds' transforms (loops over runs of tiles, where
    AVX-512 takes 16 tiles a vector), for 2x2 and 4x4 tiles: ragged tiles, pads, a
    residual, rows across blocks, a conv of one block. (Not clipped to [-0.5, 0.75] with
    4x4 tiles: the error is measured against the output's largest value, and F(4x4)'s
    on sums ten times that would exceed its tolerance.)"""
    from aotc import build
    if target == "avx2" and build.resolve_target("native") == "generic":
        pytest.skip("this machine runs no AVX2 code")
    model, feeds = _winograd_model(x_shape, w_shape, [2, 0, 1, 1], act, True)
    sess = aotc.compile(model, out_dir=tmp_path, name="wino", target=target)
    assert _winograd_tile((tmp_path / "wino.c").read_text()) == tile
    tolerance = 1e-5 if tile == 2 else WINOGRAD_4X4_TOLERANCE
    assert relative_error(sess.run(feeds)["y"], run_ort(model, feeds)["y"]) < tolerance


@pytest.mark.skipif(CC is None, reason="no C compiler")
@pytest.mark.parametrize("x_shape, w_shape", [((2, 33, 17, 13), (34, 33, 3, 3)),
                                              ((1, 40, 14, 15), (32, 40, 3, 3)),   # one block
                                              ((1, 33, 30, 29), (34, 33, 3, 3)),   # 4x4 tiles
                                              ((1, 64, 27, 26), (64, 64, 3, 3))])  # 4x4, one block
def test_winograd_runs_clean_under_sanitizers(tmp_path, x_shape, w_shape):
    """Its patch rows past X's edges, ragged tiles and residual in place, a conv of one
    block, for 2x2 and 4x4 tiles: clean under AddressSanitizer and UBSan on the native
    path."""
    from aotc import build
    model, feeds = _winograd_model(x_shape, w_shape, [2, 0, 1, 1], "Relu", True)
    sess = aotc.compile(model, out_dir=tmp_path, name="winosan")
    assert "aotc_conv_winograd(" in (tmp_path / "winosan.c").read_text()
    target = build.resolve_target("native")
    flags = [f for f in build.c_flags(target, "fast") if not f.startswith("-O")]
    assert run_sanitized(tmp_path, sess.name, flags).split()[0] == "y"


# ---- invalid and unsupported models -------------------------------------------------

@pytest.mark.parametrize("x_shape, w_shape, attrs, words", [
    ((1, 6, 8, 8), (4, 4, 3, 3), {"group": 2}, "channels"),
    ((1, 6, 8, 8), (5, 3, 3, 3), {"group": 2}, "multiple of group"),
    ((1, 6, 8, 8), (4, 6, 3, 3), {"kernel_shape": [3, 2]}, "kernel_shape"),
    ((1, 6, 8, 8), (4, 6, 3, 3), {"strides": [1]}, "strides"),
    ((1, 6, 2, 8), (4, 6, 3, 3), {}, "exceeds"),
])
def test_invalid_shapes_are_named(x_shape, w_shape, attrs, words):
    with pytest.raises(aotc.errors.InvalidModel, match=words):
        aotc.compile(conv_model(x_shape, w_shape, bias=False, **attrs))


# ---- element types ----------------------------------------------------------------

# (weight shape, attributes): one conv per float32 kernel (direct, pointwise, implicit, rows)
TYPED_CONVS = [((6, 1, 3, 3), dict(group=6, pads=[1, 1, 1, 1])),
               ((5, 6, 1, 1), {}),
               ((4, 6, 3, 2), dict(strides=[2, 1], pads=[1, 0, 0, 1])),
               ((40, 6, 3, 3), dict(pads=[1, 1, 1, 1], strides=[3, 3]))]


def _typed_model(dtype, activation=None):
    """The TYPED_CONVS of one input in `dtype`, each with a bias, each optionally
    followed by an activation node (which the conv-activation pass fuses)."""
    nodes, inits, outputs = [], {}, []
    for i, (w_shape, attrs) in enumerate(TYPED_CONVS):
        inits[f"w{i}"] = random(w_shape, seed=10 + i, low=-0.5, high=0.5).astype(dtype)
        inits[f"b{i}"] = random((w_shape[0],), seed=50 + i).astype(dtype)
        out = f"c{i}" if activation else f"y{i}"
        nodes.append(helper.make_node("Conv", ["x", f"w{i}", f"b{i}"], [out], name=f"conv{i}", **attrs))
        if activation:
            nodes.append(helper.make_node(activation, [out], [f"y{i}"]))
        outputs.append((f"y{i}", dtype, None))
    return make_model(nodes, [("x", dtype, (2, 6, 8, 7))], outputs, inits)


@pytest.mark.parametrize("dtype", [np.float16, "bfloat16"])
def test_16_bit_floats_compute_in_float32_and_round_once(dtype):
    """float16 / bfloat16: the float32 conv of the same (widened) values, rounded once."""
    from aotc.dtypes import BFLOAT16
    dtype = BFLOAT16 if dtype == "bfloat16" else np.dtype(dtype)
    model = _typed_model(dtype)
    x = random((2, 6, 8, 7)).astype(dtype)
    wide = _typed_model(np.float32)
    for init in wide.graph.initializer:    # the 16-bit values, widened
        from onnx import numpy_helper
        value = numpy_helper.to_array(init).astype(dtype).astype(np.float32)
        init.CopyFrom(numpy_helper.from_array(value, init.name))
    want = run_ort(wide, {"x": x.astype(np.float32)})
    for threads in (1, 2):
        got = aotc.compile(model, threads=threads).run({"x": x})
        for name in want:
            assert got[name].dtype == dtype
            np.testing.assert_allclose(got[name].astype(np.float32), want[name].astype(dtype).astype(np.float32),
                                       rtol=1e-2 if dtype == BFLOAT16 else 2e-3, atol=1e-2, err_msg=name)


def test_float16_fused_activation_gives_the_separate_operators_bits():
    model = _typed_model(np.float16, activation="Sigmoid")
    x = random((2, 6, 8, 7)).astype(np.float16)
    fused = aotc.compile(model, opt_level="all")
    assert fused.report["nodes_after"].get("FusedConv") == len(TYPED_CONVS)
    separate = aotc.compile(model, opt_level="none").run({"x": x})
    got = fused.run({"x": x})
    for name in separate:
        assert got[name].tobytes() == separate[name].tobytes(), name


def test_float64_sums_in_double():
    model = _typed_model(np.float64, activation="Relu")
    x = random((2, 6, 8, 7)).astype(np.float64)
    want = ReferenceEvaluator(model).run(None, {"x": x})
    for threads in (1, 2):
        got = aotc.compile(model, threads=threads).run({"x": x})
        for (name, _, _), ref in zip(_typed_outputs(), want):
            assert got[name].dtype == np.float64
            np.testing.assert_allclose(got[name], ref, rtol=1e-12, atol=1e-12, err_msg=name)


def _typed_outputs():
    return [(f"y{i}", None, None) for i in range(len(TYPED_CONVS))]


def test_other_element_types_are_refused_clearly():
    model = make_model([helper.make_node("Conv", ["x", "w"], ["y"])], [("x", np.int32, (1, 2, 5, 5))],
                       [("y", np.int32, None)], {"w": np.ones((1, 2, 3, 3), np.int32)})
    with pytest.raises(aotc.errors.Unsupported, match="int32"):
        aotc.compile(model)


# ---- the conv-pad-fold pass ---------------------------------------------------------

def test_conv_pad_fold_folds_only_zero_spatial_constant_pads():
    """Pad -> Conv (exported MobileNets): zero constant pads on the spatial dims move
    into the Conv; padding with a value, on channels, or reflecting stays a Pad."""
    from aotc.onnx_export import export_graph
    from aotc.onnx_import import import_model
    from aotc.passes import PassContext, conv_pad_fold

    def pads(*v):
        return np.array(v, np.int64)
    cases = [("fold", pads(0, 0, 1, 2, 0, 0, 2, 1), None, "constant", [1, 0, 0, 1]),
             ("value", pads(0, 0, 1, 1, 0, 0, 1, 1), 0.5, "constant", [0, 0, 0, 0]),
             ("channels", pads(0, 1, 1, 1, 0, 0, 1, 1), None, "constant", [0, 0, 0, 0]),
             ("reflect", pads(0, 0, 1, 1, 0, 0, 1, 1), None, "reflect", [0, 0, 0, 0])]
    nodes, inits, outputs = [], {}, []
    for tag, p, value, mode, conv_pads in cases:
        inits[f"p_{tag}"] = p
        pad_inputs = ["x", f"p_{tag}"]
        if value is not None:
            inits[f"v_{tag}"] = np.array(value, np.float32)
            pad_inputs.append(f"v_{tag}")
        inits[f"w_{tag}"] = random((4, 3 if tag != "channels" else 4, 3, 3), seed=3, low=-0.5, high=0.5)
        nodes += [helper.make_node("Pad", pad_inputs, [f"xp_{tag}"], mode=mode),
                  helper.make_node("Conv", [f"xp_{tag}", f"w_{tag}"], [f"y_{tag}"], pads=conv_pads)]
        outputs.append((f"y_{tag}", np.float32, None))
    model = make_model(nodes, [("x", np.float32, (1, 3, 7, 6))], outputs, inits)
    graph = import_model(model)
    assert conv_pad_fold.run(graph, PassContext("fast")) == 1
    assert sum(n.op_type == "Pad" for n in graph.nodes) == 3
    feeds = {"x": random((1, 3, 7, 6))}
    want, got = run_ort(model, feeds), run_ort(export_graph(graph), feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5)


def test_fused_conv_with_residual_matches_conv_add_relu():
    """FusedConv(X, W, B, R) with a Relu is Relu(Conv(X, W, B) + R)."""
    x_shape, w_shape = (2, 64, 6, 5), (24, 64, 3, 3)
    inits = {"w": random(w_shape, seed=1, low=-0.5, high=0.5), "b": random((24,), seed=2)}
    graph_inputs = [("x", np.float32, x_shape), ("r", np.float32, (2, 24, 6, 5))]
    fused = make_model([helper.make_node("FusedConv", ["x", "w", "b", "r"], ["y"], domain="ai.aotc",
                                         pads=[1, 1, 1, 1], activation="Relu")],
                       graph_inputs, [("y", np.float32, None)], inits)
    fused.opset_import.append(helper.make_opsetid("ai.aotc", 1))
    plain = make_model([helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                        helper.make_node("Add", ["c", "r"], ["s"]),
                        helper.make_node("Relu", ["s"], ["y"])],
                       graph_inputs, [("y", np.float32, None)], inits)
    feeds = {"x": random(x_shape), "r": random((2, 24, 6, 5), seed=5)}
    for threads in (1, 2):
        got = aotc.compile(fused, threads=threads).run(feeds)["y"]
        np.testing.assert_allclose(got, run_ort(plain, feeds)["y"], rtol=RTOL, atol=ATOL)
    bad = make_model([helper.make_node("FusedConv", ["x", "w", "b", "r"], ["y"], domain="ai.aotc")],
                     [("x", np.float32, x_shape), ("r", np.float32, (1, 24, 1, 1))],
                     [("y", np.float32, None)], inits)
    bad.opset_import.append(helper.make_opsetid("ai.aotc", 1))
    with pytest.raises(aotc.errors.Unsupported, match="residual"):
        aotc.compile(bad)


@pytest.mark.parametrize("pixels", [True, False])
def test_simd_kernels_run_clean_under_sanitizers(tmp_path, pixels, request):
    """The native path's kernels that read whole vectors near the ends of rows and
    planes: on AVX-512 by masked loads (the masked lanes are never touched), the flat
    depthwise kernel and the rows kernel's unfolding; on AVX2 the depthwise kernels over
    zero-bordered bands (the slack past a band, bands cut from planes too large for one)
    and on small planes eight channels at a time; on both, small stride-2 planes a
    vector of channels at a time (channels left over, groups across images).
    Register and stored activations, odd pads, stride 2 with phase planes wider than the
    output too, planes smaller than a vector; clean under AddressSanitizer and UBSan.
    The other sanitizer tests build the generic path. The 2-D convs go to the pixels
    kernel (its masked loads and stores of runs of pixels; the 1x1 ones read X itself),
    or else to the rows one."""
    from aotc import build
    if not pixels:
        request.getfixturevalue("without_pixels_kernel")
    target = build.resolve_target("native")
    if target == "generic":
        pytest.skip("needs a machine with AVX2 or AVX-512")
    depthwise = [((1, 6, 3, 5), [1, 1, 1, 1], 1, "Clip"), ((1, 6, 3, 5), [2, 0, 0, 2], 1, "Sigmoid"),
                 ((2, 4, 9, 20), [0, 2, 2, 0], 1, "Relu"), ((1, 2, 70, 70), [1, 1, 1, 1], 1, "Relu"),
                 ((1, 6, 7, 9), [1, 1, 1, 1], 2, "Clip"), ((2, 3, 8, 11), [0, 0, 0, 0], 2, "Sigmoid"),
                 ((1, 2, 80, 80), [0, 0, 1, 1], 2, "Relu"), ((1, 3, 75, 75), [1, 1, 1, 1], 2, "Sigmoid"),
                 ((1, 2, 100, 97), [1, 0, 1, 2], 1, "Clip"), ((1, 2, 130, 129), [1, 1, 1, 1], 1, "Relu"),
                 ((2, 12, 14, 13), [1, 0, 0, 1], 2, "Clip"), ((1, 20, 7, 7), [1, 1, 1, 1], 1, "Sigmoid"),
                 ((2, 24, 13, 15), [1, 0, 0, 1], 2, "Clip"), ((1, 40, 14, 14), [0, 2, 1, 0], 2, "Sigmoid")]
    cases = [(x, (x[1], 1, 3, 3), dict(group=x[1], pads=p, strides=[s, s]), act) for x, p, s, act in depthwise]
    cases += [((1, 64, 5, 6), (16, 64, 3, 3), dict(pads=[1, 1, 1, 1]), "Relu"),          # rows
              ((1, 64, 7, 7), (8, 64, 3, 3), dict(pads=[1, 0, 0, 1], strides=[2, 2]), "Tanh"),
              ((1, 64, 4, 5), (24, 64, 3, 3), dict(pads=[1, 1, 0, 0]), "Clip"),   # rows
              ((1, 64, 7, 9), (24, 64, 1, 1), dict(pads=[1, 1, 0, 0], strides=[2, 2]), "Clip"),   # stored
              ((1, 8, 9, 11), (16, 8, 1, 1), dict(pads=[0, 1, 1, 0], strides=[2, 2]), "Relu"),   # 1x1 GEMM
              ((1, 64, 3, 15), (24, 64, 1, 1), dict(), "Relu"),    # pixels: X itself, by vectors
              ((1, 64, 3, 15), (80, 64, 1, 1), dict(), "Clip")]    # pixels: X itself, by tiles
    nodes, inits, outputs = [], {}, []
    for i, (x_shape, w_shape, attrs, act) in enumerate(cases):
        inits[f"w{i}"], inits[f"b{i}"] = random(w_shape, seed=i), random((w_shape[0],), seed=10 + i)
        nodes += [helper.make_node("Conv", [f"x{i}", f"w{i}", f"b{i}"], [f"c{i}"], **attrs),
                  helper.make_node(act, [f"c{i}"], [f"y{i}"])]
        outputs.append((f"y{i}", np.float32, None))
    model = make_model(nodes, [(f"x{i}", np.float32, case[0]) for i, case in enumerate(cases)], outputs, inits)
    sess = aotc.compile(model, out_dir=tmp_path, name="simdsan")
    assert f"aotc_conv_{'pixels' if pixels else 'rows'}(" in (tmp_path / "simdsan.c").read_text()
    flags = [f for f in build.c_flags(target, "fast") if not f.startswith("-O")]
    assert run_sanitized(tmp_path, sess.name, flags).split()[0] == "y0"


@pytest.mark.parametrize("x_shape", [(1, 4, 90, 93), (1, 3, 115, 118)])
def test_depthwise_stride_2_rows_in_exact_mode_match_the_generic_path(x_shape):
    """Stride-2 depthwise planes too large for the flat kernel's phase planes (AVX-512:
    16 columns a vector from even/odd windows, padding masked out), outputs from 56x56
    on cut into halves of rows: ONNX Runtime's values, and in exact mode the generic
    path's bits."""
    from aotc import build
    n = helper.make_node
    c = x_shape[1]
    inits = {f"w{i}": random((c, 1, 3, 3), seed=i) for i in range(2)}
    inits.update({f"b{i}": random((c,), seed=5 + i) for i in range(2)})
    model = make_model([n("Conv", ["x", "w0", "b0"], ["y0"], group=c, strides=[2, 2], pads=[1, 1, 1, 1]),
                        n("Conv", ["x", "w1", "b1"], ["y1"], group=c, strides=[2, 2], pads=[0, 0, 1, 1])],
                       [("x", np.float32, x_shape)], [("y0", np.float32, None), ("y1", np.float32, None)],
                       inits)
    x = random(x_shape, seed=3)
    assert_matches_ort(model, {"x": x}, rtol=RTOL, atol=ATOL)
    want = aotc.compile(model, mode="exact", target="generic", threads=1).run({"x": x})
    got = aotc.compile(model, mode="exact", target=build.resolve_target("native"), threads=2).run({"x": x})
    for name in want:
        assert got[name].tobytes() == want[name].tobytes(), name


def _assert_native_bits(model, feed):
    """Exact mode on the native path at 2 threads gives the generic path's bits; fast
    mode gives the same bits at 1 and 2 threads. Returns the exact and fast outputs."""
    from aotc import build
    native = build.resolve_target("native")
    want = aotc.compile(model, mode="exact", target="generic", threads=1).run(feed)
    got = aotc.compile(model, mode="exact", target=native, threads=2).run(feed)
    fast_1 = aotc.compile(model, target=native, threads=1).run(feed)
    fast_2 = aotc.compile(model, target=native, threads=2).run(feed)
    for name in want:
        assert got[name].tobytes() == want[name].tobytes(), name
        assert fast_2[name].tobytes() == fast_1[name].tobytes(), name
    return want, fast_1


def test_depthwise_inner_vectors_without_masks_keep_the_bits():
    """AVX-512 depthwise: in planes with rows of 56 columns or more, the flat kernel's
    16-pixel chunks whose taps all fall inside the plane, and in the stride-2 rows the
    blocks whose windows do, run without masks; the stride-2 rows go two at a time where
    both have all their input rows, from wherever a task's rows start (the 330 x 330
    plane: tasks of 49 rows). Wide planes of both, even and odd pads, infinities and a
    NaN in the input: ONNX Runtime's values; in exact mode the generic path's bits; in
    fast mode the same bits at 1 and 2 threads."""
    n = helper.make_node
    convs = [((1, 1, 1, 1), 1, (1, 3, 60, 70)), ((0, 1, 2, 1), 1, (1, 2, 57, 112)),
             ((1, 1, 1, 1), 2, (1, 3, 90, 120)), ((0, 1, 1, 0), 2, (1, 2, 41, 113)),
             ((1, 1, 1, 1), 2, (1, 2, 330, 330))]
    nodes, inits, inputs, outputs = [], {}, [], []
    for i, (pads, stride, x_shape) in enumerate(convs):
        c = x_shape[1]
        inits[f"w{i}"], inits[f"b{i}"] = random((c, 1, 3, 3), seed=i), random((c,), seed=10 + i)
        nodes += [n("Conv", [f"x{i}", f"w{i}", f"b{i}"], [f"c{i}"], group=c, pads=list(pads),
                    strides=[stride, stride]),
                  n("Sigmoid" if i % 2 else "Identity", [f"c{i}"], [f"y{i}"])]
        inputs.append((f"x{i}", np.float32, x_shape))
        outputs.append((f"y{i}", np.float32, None))
    model = make_model(nodes, inputs, outputs, inits)
    feed = {name: random(shape, seed=20 + i) for i, (name, _, shape) in enumerate(inputs)}
    assert_matches_ort(model, feed, rtol=RTOL, atol=ATOL)
    for x in feed.values():
        x[0, 0, 20, 40], x[0, 0, 21, 40], x[0, -1, 30, 50] = np.inf, -np.inf, np.nan
    want, _ = _assert_native_bits(model, feed)
    for name in want:
        assert np.isnan(want[name]).any(), name


def test_depthwise_slide_kernel_keeps_the_row_kernels_bits():
    """AVX-512 stride-1 3x3 depthwise planes that keep their size and are at least 12
    columns wide go three output rows at a time, each input row slid a lane each way.
    Heights that leave one or two rows over, a single row, widths of one ragged vector
    to several, planes from 56x56 on cut into halves of rows (odd heights: halves of
    29 and 28), Clip in registers, Sigmoid after the store, a residual Add, infinities
    and a NaN in the input: ONNX Runtime's values; in exact mode the generic path's
    bits; in fast mode the same bits at 1 and 2 threads."""
    n = helper.make_node
    shapes = [(1, 3, 1, 16), (1, 2, 2, 33), (1, 4, 5, 12), (2, 3, 8, 14), (1, 3, 10, 24),
              (1, 2, 11, 56), (1, 2, 4, 112), (1, 1, 7, 130), (1, 2, 57, 60), (2, 1, 59, 64),
              (1, 2, 61, 56)]
    nodes, inits, inputs, outputs = [], {}, [], []
    for i, x_shape in enumerate(shapes):
        c = x_shape[1]
        inits[f"w{i}"], inits[f"b{i}"] = random((c, 1, 3, 3), seed=i), random((c,), seed=10 + i)
        nodes.append(n("Conv", [f"x{i}", f"w{i}", f"b{i}"], [f"c{i}"], group=c, pads=[1, 1, 1, 1]))
        if i % 3 == 0:
            nodes.append(n("Clip", [f"c{i}", "lo", "hi"], [f"y{i}"]))
        elif i % 3 == 1:
            nodes.append(n("Sigmoid", [f"c{i}"], [f"y{i}"]))
        else:
            nodes.append(n("Add", [f"c{i}", f"x{i}"], [f"y{i}"]))
        inputs.append((f"x{i}", np.float32, x_shape))
        outputs.append((f"y{i}", np.float32, None))
    inits["lo"], inits["hi"] = np.array(0.0, np.float32), np.array(1.5, np.float32)
    model = make_model(nodes, inputs, outputs, inits)
    feed = {name: random(shape, seed=20 + i) for i, (name, _, shape) in enumerate(inputs)}
    assert_matches_ort(model, feed, rtol=RTOL, atol=ATOL)
    for x in list(feed.values())[4:]:
        x[0, 0, 2, 0], x[0, 0, 3, -1], x[0, -1, 1, 5] = np.inf, -np.inf, np.nan
    want, _ = _assert_native_bits(model, feed)
    for name in list(want)[4:]:
        assert np.isnan(want[name]).any(), name


def test_depthwise_bands_and_lanes_give_the_row_kernels_bits_and_skip_non_finite_weights():
    """The depthwise kernels over zero-bordered copies read zero borders where the row
    kernel skips the padding: the same sums while the weights are finite, so a channel
    (AVX2 bands) or a conv (a channel to each lane) with an infinite or NaN weight goes
    channel by channel. Planes cut into several bands; small planes (AVX2) and small
    stride-2 planes (AVX-512) a vector of channels at a time, with channels left over
    and groups across images; stride 1 and 2, odd pads: in exact mode the generic path's
    bits on every path; in fast mode the same bits at 1 and 2 threads."""
    n = helper.make_node
    # (pads, stride, input, all weights finite: these run a vector of channels at a time)
    convs = [((1, 1, 1, 1), 1, (1, 3, 100, 97), False), ((0, 1, 2, 1), 2, (1, 3, 101, 90), False),
             ((1, 1, 1, 1), 1, (1, 3, 7, 7), False),
             ((1, 1, 1, 1), 1, (1, 20, 7, 7), False), ((1, 0, 0, 1), 2, (2, 12, 14, 13), False),
             ((1, 1, 1, 1), 1, (1, 16, 28, 28), False), ((0, 0, 0, 0), 1, (1, 8, 5, 9), False),
             ((1, 1, 1, 1), 2, (1, 40, 14, 14), True), ((1, 0, 0, 1), 2, (2, 24, 13, 15), True),
             ((0, 2, 1, 0), 2, (1, 16, 27, 20), True)]
    nodes, inits, inputs, outputs = [], {}, [], []
    for i, (pads, stride, x_shape, finite) in enumerate(convs):
        c = x_shape[1]
        w = random((c, 1, 3, 3), seed=i)
        if not finite:
            w[1, 0, 0, 0], w[2, 0, 2, 1] = np.inf, np.nan
        inits[f"w{i}"], inits[f"b{i}"] = w, random((c,), seed=10 + i)
        nodes.append(n("Conv", [f"x{i}", f"w{i}", f"b{i}"], [f"y{i}"], group=c, pads=list(pads),
                       strides=[stride, stride]))
        inputs.append((f"x{i}", np.float32, x_shape))
        outputs.append((f"y{i}", np.float32, None))
    model = make_model(nodes, inputs, outputs, inits)
    feed = {name: random(shape, seed=20 + i) for i, (name, _, shape) in enumerate(inputs)}
    want, fast_1 = _assert_native_bits(model, feed)
    for i, (*_, finite) in enumerate(convs):
        name = f"y{i}"
        if finite:
            assert np.isfinite(want[name]).all(), name
            np.testing.assert_allclose(fast_1[name], want[name], rtol=1e-5, atol=1e-5)
            continue
        assert np.isfinite(want[name][:, 0]).all() and not np.isfinite(want[name][:, 1:3]).all(), name
        rest = np.r_[0, 3:want[name].shape[1]]
        assert np.isfinite(want[name][:, rest]).all(), name
        np.testing.assert_allclose(fast_1[name][:, rest], want[name][:, rest], rtol=1e-5, atol=1e-5)


# ---- exact mode ---------------------------------------------------------------------

@pytest.mark.parametrize("pixels", [True, False])
def test_exact_mode_gives_the_same_bits_on_every_path_with_canonical_nans(pixels, request):
    """Every kernel (the depthwise ones: flat planes (AVX-512) and row by row; pointwise;
    pixels, or else implicit and rows; im2col; with a fused Sigmoid), float16 and double,
    in exact mode: the same bits on the generic path with 1 thread and the native path
    with 2, and each NaN made of +inf and -inf in one window written as 0x7FC00000."""
    from aotc import build
    if not pixels:
        request.getfixturevalue("without_pixels_kernel")
    n = helper.make_node
    convs = [((8, 1, 3, 3), dict(group=8, pads=[1, 1, 1, 1])),
             ((8, 1, 3, 3), dict(group=8, pads=[1, 1, 1, 1], strides=[1, 2])),
             ((8, 1, 5, 3), dict(group=8, pads=[2, 1, 2, 1])),
             ((6, 8, 1, 1), {}), ((5, 8, 3, 2), dict(pads=[1, 0, 1, 1])),
             ((70, 8, 3, 3), dict(pads=[1, 1, 1, 1], strides=[4, 4])),
             ((6, 8, 3, 3), dict(strides=[3, 3])),
             ((8, 1, 3, 3), dict(group=8, pads=[2, 0, 0, 2])),
             ((8, 1, 3, 3), dict(group=8, pads=[1, 1, 1, 1], strides=[2, 2])),
             ((8, 1, 3, 3), dict(group=8, strides=[2, 2]))]
    nodes, inits, outputs = [], {}, []
    for i, (w_shape, attrs) in enumerate(convs):
        inits[f"w{i}"] = random(w_shape, seed=10 + i, low=0.1, high=0.5)
        inits[f"b{i}"] = random((w_shape[0],), seed=50 + i)
        nodes.append(n("Conv", ["x", f"w{i}", f"b{i}"], [f"c{i}"], **attrs))
        nodes.append(n("Sigmoid", [f"c{i}"], [f"y{i}"]) if i % 2 else n("Identity", [f"c{i}"], [f"y{i}"]))
        outputs.append((f"y{i}", np.float32, None))
    for dtype, tag in ((np.float16, "h"), (np.float64, "d")):
        inits[f"w{tag}"] = random((4, 8, 3, 3), seed=9, low=0.1, high=0.5).astype(dtype)
        nodes += [n("Cast", ["x"], [f"x{tag}"], to=helper.np_dtype_to_tensor_dtype(np.dtype(dtype))),
                  n("Conv", [f"x{tag}", f"w{tag}"], [f"y{tag}"], pads=[1, 1, 1, 1])]
        outputs.append((f"y{tag}", dtype, None))
    model = make_model(nodes, [("x", np.float32, (1, 8, 9, 20))], outputs, inits)
    x = random((1, 8, 9, 20), seed=3)
    x[0, :4, 4, 10], x[0, :4, 4, 11] = np.inf, -np.inf     # NaN within a channel's window
    x[0, 4:, 4, 10], x[0, 4:, 4, 11] = -np.inf, np.inf     # and across channels
    want = aotc.compile(model, mode="exact", target="generic", threads=1).run({"x": x})
    got = aotc.compile(model, mode="exact", target=build.resolve_target("native"), threads=2).run({"x": x})
    for name in want:
        assert got[name].tobytes() == want[name].tobytes(), name
        nans = np.isnan(want[name])
        assert nans.any(), name
        bits = want[name][nans].view(np.uint32 if want[name].itemsize == 4 else
                                     np.uint64 if want[name].itemsize == 8 else np.uint16)
        assert (bits == {4: 0x7FC00000, 8: 0x7FF8000000000000, 2: 0x7E00}[want[name].itemsize]).all(), name


@pytest.mark.parametrize("dtype", [np.float16, "bfloat16"])
def test_conv_transpose_16_bit_floats_round_the_float32_result_once(dtype):
    from aotc.dtypes import BFLOAT16
    dtype = BFLOAT16 if dtype == "bfloat16" else np.dtype(dtype)
    w = random((4, 3, 3, 2), seed=1, low=-0.5, high=0.5).astype(dtype)
    b = random((6,), seed=2).astype(dtype)

    def model(t, wv, bv):
        return make_model([helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], group=2, strides=[2, 1],
                                            pads=[1, 0, 0, 1])],
                          [("x", t, (2, 4, 5, 4)), ("w", t, (4, 3, 3, 2))], [("y", t, None)], {"b": bv})
    x = random((2, 4, 5, 4)).astype(dtype)
    got = aotc.compile(model(dtype, w, b), threads=2).run({"x": x, "w": w})["y"]
    want = run_ort(model(np.float32, None, b.astype(np.float32)),
                   {"x": x.astype(np.float32), "w": w.astype(np.float32)})["y"]
    assert got.dtype == dtype
    np.testing.assert_allclose(got.astype(np.float32), want.astype(dtype).astype(np.float32),
                               rtol=1e-2 if dtype == BFLOAT16 else 2e-3, atol=1e-2)
