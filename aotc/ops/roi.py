"""RoiAlign, MaxRoiPool and DeformConv (float32; runtime_c/aotc_sampling.h).

RoiAlign and MaxRoiPool pool boxes given at run time; a box's batch index outside
the batch makes the run return AOTC_ERR_INDEX. DeformConv samples the input
bilinearly at the kernel taps moved by the offsets (times the mask), per image and
group and block of output pixels, into columns that one GEMM with the weights turns
into the output.
"""
import numpy as np

from .base import OpDef, TensorType, c_float
from .conv_transpose import block_pixels

FLOAT = (np.float32,)


def _text(ctx, key, default):
    value = ctx.attr(key, default)
    return value.decode() if isinstance(value, bytes) else value


# ---- RoiAlign ----------------------------------------------------------------------

def _roi_align_params(ctx):
    ctx.require_inputs(3)
    ctx.require_dtype(0, FLOAT)
    ctx.require_dtype(1, FLOAT)
    ctx.require_dtype(2, (np.int64,))
    x, rois, index = ctx.inputs
    if x.rank != 4:
        raise ctx.fail(f"X must be [N, C, H, W], has shape {list(x.shape)}")
    if rois.rank != 2 or rois.shape[1] != 4 or tuple(index.shape) != (rois.shape[0],):
        raise ctx.fail(f"rois {list(rois.shape)} must be [R, 4] and batch_indices "
                       f"{list(index.shape)} [R]")
    mode = _text(ctx, "mode", "avg")
    if mode not in ("avg", "max"):
        raise ctx.fail(f"mode {mode!r} is not avg or max")
    transform = _text(ctx, "coordinate_transformation_mode",
                      "half_pixel" if ctx.opset >= 16 else "output_half_pixel")
    if transform not in ("half_pixel", "output_half_pixel"):
        raise ctx.fail(f"coordinate_transformation_mode {transform!r} is not half_pixel or "
                       f"output_half_pixel")
    out_h, out_w = int(ctx.attr("output_height", 1)), int(ctx.attr("output_width", 1))
    ratio = int(ctx.attr("sampling_ratio", 0))
    if out_h < 1 or out_w < 1 or ratio < 0:
        raise ctx.fail(f"output_height {out_h} and output_width {out_w} must be positive, "
                       f"sampling_ratio {ratio} non-negative")
    return mode, transform == "half_pixel", out_h, out_w, ratio


def _roi_align_infer(ctx):
    _, _, out_h, out_w, _ = _roi_align_params(ctx)
    x, rois = ctx.inputs[0], ctx.inputs[1]
    return [TensorType(x.dtype, (rois.shape[0], x.shape[1], out_h, out_w))]


def _roi_align_emit(ctx):
    if ctx.outputs[0].numel == 0:
        return ""
    mode, half_pixel, out_h, out_w, ratio = _roi_align_params(ctx)
    n, c, h, w = ctx.inputs[0].shape
    if h == 0 or w == 0:
        raise ctx.unsupported("RoiAlign over an empty feature map")
    scale = float(ctx.attr("spatial_scale", 1.0))
    return (f"if (aotc_roi_align({ctx.pool}, {ctx.x(0)}, {ctx.x(1)}, {ctx.x(2)}, {ctx.y(0)}, {n}, {c}, "
            f"{h}, {w}, {ctx.inputs[1].shape[0]}, {out_h}, {out_w}, {ratio}, {c_float(scale)}, "
            f"{int(mode == 'max')}, {int(half_pixel)}) != AOTC_OK) return AOTC_ERR_INDEX;")


# ---- MaxRoiPool --------------------------------------------------------------------

def _max_roi_pool_params(ctx):
    ctx.require_inputs(2)
    ctx.require_dtype(0, FLOAT)
    ctx.require_dtype(1, FLOAT)
    x, rois = ctx.inputs
    if x.rank != 4 or rois.rank != 2 or rois.shape[1] != 5:
        raise ctx.fail(f"X {list(x.shape)} must be [N, C, H, W] and rois {list(rois.shape)} [R, 5]")
    pooled = ctx.attr("pooled_shape")
    if pooled is None or len(pooled) != 2 or min(int(p) for p in pooled) < 1:
        raise ctx.fail("pooled_shape must be two positive sizes")
    return [int(p) for p in pooled]


def _max_roi_pool_infer(ctx):
    ph, pw = _max_roi_pool_params(ctx)
    x, rois = ctx.inputs
    return [TensorType(x.dtype, (rois.shape[0], x.shape[1], ph, pw))]


def _max_roi_pool_emit(ctx):
    if ctx.outputs[0].numel == 0:
        return ""
    ph, pw = _max_roi_pool_params(ctx)
    n, c, h, w = ctx.inputs[0].shape
    scale = float(ctx.attr("spatial_scale", 1.0))
    return (f"if (aotc_max_roi_pool({ctx.x(0)}, {ctx.x(1)}, {ctx.y(0)}, {n}, {c}, {h}, {w}, "
            f"{ctx.inputs[1].shape[0]}, {ph}, {pw}, {c_float(scale)}) != AOTC_OK) return AOTC_ERR_INDEX;")


# ---- DeformConv --------------------------------------------------------------------

def _pair(ctx, key, default, count=2):
    values = ctx.attr(key)
    values = [default] * count if values is None else [int(v) for v in values]
    if len(values) != count:
        raise ctx.fail(f"{key} has {len(values)} values, expected {count}")
    return values


def _deform_geometry(ctx):
    ctx.require_inputs(3, 5)
    for i in range(5):
        if ctx.has_input(i):
            ctx.require_dtype(i, FLOAT)
    x, w, offset = ctx.inputs[:3]
    if x.rank != 4:
        raise ctx.unsupported(f"DeformConv over {x.rank - 2} spatial dims (2 supported)")
    if w.rank != 4:
        raise ctx.fail(f"W {list(w.shape)} must be [M, C / group, kH, kW]")
    batch, cin, ih, iw = (int(d) for d in x.shape)
    cout, cin_g, kh, kw = (int(d) for d in w.shape)
    group, offset_group = int(ctx.attr("group", 1)), int(ctx.attr("offset_group", 1))
    if group < 1 or offset_group < 1 or cin != cin_g * group or cout % group or cin % offset_group:
        raise ctx.fail(f"X has {cin} channels, W {list(w.shape)}: group {group} and offset_group "
                       f"{offset_group} must divide them")
    kernel = _pair(ctx, "kernel_shape", 0)
    if ctx.attr("kernel_shape") is not None and kernel != [kh, kw]:
        raise ctx.fail(f"kernel_shape {kernel} does not match W's [{kh}, {kw}]")
    strides, dilations = _pair(ctx, "strides", 1), _pair(ctx, "dilations", 1)
    pads = _pair(ctx, "pads", 0, 4)
    if min(strides + dilations) < 1 or min(pads) < 0:
        raise ctx.fail(f"strides {strides} and dilations {dilations} must be positive, pads {pads} "
                       f"non-negative")
    out = [(size + pads[d] + pads[d + 2] - (k - 1) * dilations[d] - 1) // strides[d] + 1
           for d, (size, k) in enumerate(((ih, kh), (iw, kw)))]
    if min(out) < 1:
        raise ctx.fail(f"the kernel does not fit the padded input: output {out}")
    taps = kh * kw
    if tuple(offset.shape) != (batch, offset_group * taps * 2, *out):
        raise ctx.fail(f"offset {list(offset.shape)} must be {[batch, offset_group * taps * 2, *out]}")
    if ctx.has_input(3) and tuple(ctx.inputs[3].shape) != (cout,):
        raise ctx.fail(f"B {list(ctx.inputs[3].shape)} must be [{cout}]")
    if ctx.has_input(4) and tuple(ctx.inputs[4].shape) != (batch, offset_group * taps, *out):
        raise ctx.fail(f"mask {list(ctx.inputs[4].shape)} must be {[batch, offset_group * taps, *out]}")
    return dict(batch=batch, group=group, offset_group=offset_group, cin=cin, cin_g=cin_g,
                cout_g=cout // group, inp=(ih, iw), out=tuple(out), kernel=(kh, kw),
                stride=tuple(strides), dilation=tuple(dilations), pad=tuple(pads[:2]))


def _deform_infer(ctx):
    g = _deform_geometry(ctx)
    return [TensorType(ctx.inputs[0].dtype, (g["batch"], g["cout_g"] * g["group"]) + g["out"])]


def _deform_sizes(g):
    """(GEMM depth, output pixels per block of columns, bytes of a block)."""
    k = g["cin_g"] * g["kernel"][0] * g["kernel"][1]
    pixels = block_pixels(k, g["out"][0] * g["out"][1])
    return k, pixels, (k * pixels * 4 + 63) // 64 * 64


def _deform_scratch(ctx):
    from .matmul import sgemm_scratch_bytes
    g = _deform_geometry(ctx)
    k, pixels, cols = _deform_sizes(g)
    return cols + sgemm_scratch_bytes(g["cout_g"], pixels, k)


def _deform_emit(ctx):
    if ctx.outputs[0].numel == 0:
        return ""
    g = _deform_geometry(ctx)
    if g["cin_g"] == 0 or 0 in g["inp"]:
        raise ctx.unsupported("DeformConv over an empty input")

    def arr(values):
        return "{" + ", ".join(str(int(v)) for v in values) + "}"
    geom = (f"&(const aotc_deform_geom){{.batch = {g['batch']}, .group = {g['group']}, "
            f".offset_group = {g['offset_group']}, .cin = {g['cin']}, .cin_g = {g['cin_g']}, "
            f".cout_g = {g['cout_g']}, .in = {arr(g['inp'])}, .out = {arr(g['out'])}, "
            f".kernel = {arr(g['kernel'])}, .stride = {arr(g['stride'])}, "
            f".dilation = {arr(g['dilation'])}, .pad = {arr(g['pad'])}}}")
    bias = ctx.x(3) if ctx.has_input(3) else "NULL"
    mask = ctx.x(4) if ctx.has_input(4) else "NULL"
    return (f"aotc_deform_conv({ctx.pool}, {geom}, {ctx.x(0)}, {ctx.x(1)}, {ctx.x(2)}, {mask}, {bias}, "
            f"{ctx.y(0)}, {_deform_sizes(g)[1]}, {ctx.scratch}, {_deform_sizes(g)[2]});")


OPS = [
    OpDef("RoiAlign", _roi_align_infer, _roi_align_emit, since=10, checked_through=28),
    OpDef("MaxRoiPool", _max_roi_pool_infer, _max_roi_pool_emit, since=1, checked_through=28),
    OpDef("DeformConv", _deform_infer, _deform_emit, scratch=_deform_scratch, since=19,
          checked_through=28),
]
