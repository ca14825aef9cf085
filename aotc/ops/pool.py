"""MaxPool, AveragePool, GlobalMaxPool and GlobalAveragePool (1-D to 3-D): float32
through the vectorized kernels, double / float16 / bfloat16 (and int8 / uint8 for
MaxPool) through the plain typed ones of runtime_c/aotc_pool.h.

The windows are resolved here (auto_pad, ceil_mode, dilations) into one 3-D geometry
that runtime_c/aotc_pool.h walks; global pools are reductions over the spatial dims.

NhwcGlobalMaxPool and NhwcGlobalAveragePool (domain ai.aotc), made by the plan's
channels-last rewrite: the global pools of a channels-last value X [N, H, W, C], with
the NCHW pool's output Y [N, C, 1, 1] (the same memory as [N, 1, 1, C]), so the value
needs no Transpose back to NCHW (MobileNetV2's last: 1280 x 7 x 7 floats, a Transpose
of 28 us).
"""
from dataclasses import dataclass

import numpy as np

from .. import dtypes
from ..ir import AOTC_DOMAIN
from .base import OpDef, TensorType
from .reduce import reduce_call, reduce_scratch_bytes

FLOAT = (np.float32, np.float64, np.float16, dtypes.BFLOAT16)
MAX_TYPES = FLOAT + (np.int8, np.uint8)
AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


@dataclass
class Window:
    """Per spatial dim (outermost first): the resolved pooling windows."""
    kernel: list
    stride: list
    dilation: list
    pad: list
    pad_end: list
    out: list


def _ints(ctx, key, n, default):
    v = ctx.attr(key)
    if v is None:
        return [default] * n
    v = [int(a) for a in v]
    if len(v) != n:
        raise ctx.fail(f"{key} has {len(v)} values, expected {n}")
    return v


def _output_extent(ctx, size, kernel, stride, dilation, pad, pad_end, ceil_mode):
    span = (kernel - 1) * dilation + 1
    room = size + pad + pad_end - span
    if room < 0:
        raise ctx.fail(f"the window (extent {span}) does not fit the padded input "
                       f"(extent {size + pad + pad_end})")
    out = (-(-room // stride) if ceil_mode else room // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1      # the last window must start inside the input or its leading pad
    return out


def window(ctx):
    x = ctx.inputs[0]
    nd = x.rank - 2
    if not 1 <= nd <= 3:
        raise ctx.unsupported(f"pooling over {nd} spatial dims of shape {list(x.shape)} "
                              f"(1 to 3 supported)")
    kernel = ctx.attr("kernel_shape")
    if kernel is None:
        raise ctx.fail("kernel_shape is required")
    kernel = _ints(ctx, "kernel_shape", nd, 1)
    stride = _ints(ctx, "strides", nd, 1)
    dilation = _ints(ctx, "dilations", nd, 1)
    pads = _ints(ctx, "pads", 2 * nd, 0)
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    ceil_mode = int(ctx.attr("ceil_mode", 0))
    if auto_pad not in AUTO_PADS:
        raise ctx.fail(f"auto_pad {auto_pad!r} is not one of {', '.join(AUTO_PADS)}")
    if min(kernel + stride + dilation) < 1 or min(pads) < 0:
        raise ctx.fail(f"kernel_shape {kernel}, strides {stride}, dilations {dilation} must be "
                       f"positive and pads {pads} non-negative")
    w = Window(kernel, stride, dilation, [], [], [])
    for d in range(nd):
        size = x.shape[2 + d]
        span = (kernel[d] - 1) * dilation[d] + 1
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            out = -(-size // stride[d])
            total = max(0, (out - 1) * stride[d] + span - size)
            small, big = total // 2, total - total // 2
            pad, pad_end = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
        elif auto_pad == "VALID":
            pad, pad_end = 0, 0
        else:
            pad, pad_end = pads[d], pads[nd + d]
        if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
            out = _output_extent(ctx, size, kernel[d], stride[d], dilation[d], pad, pad_end, ceil_mode)
        w.pad.append(pad)
        w.pad_end.append(pad_end)
        w.out.append(out)
    return w


def _geometry(ctx, w, count_include_pad=0, column_major=False):
    x = ctx.inputs[0]
    lead = 3 - len(w.kernel)

    def three(values, fill):
        return ", ".join(str(v) for v in [fill] * lead + list(values))

    spatial = [1] * lead + list(x.shape[2:])
    if column_major:    # Indices with storage_order=1: the first spatial dim varies fastest
        istride = [0] * lead + [int(np.prod(x.shape[2:2 + d])) for d in range(len(w.kernel))]
    else:
        istride = [int(np.prod(spatial[d + 1:])) for d in range(3)]
    return (f"&(const aotc_pooling_geom){{.planes = {x.shape[0] * x.shape[1]}, "
            f".in = {{{', '.join(str(v) for v in spatial)}}}, .out = {{{three(w.out, 1)}}}, "
            f".kernel = {{{three(w.kernel, 1)}}}, .stride = {{{three(w.stride, 1)}}}, "
            f".dilation = {{{three(w.dilation, 1)}}}, .pad = {{{three(w.pad, 0)}}}, "
            f".pad_end = {{{three(w.pad_end, 0)}}}, .count_include_pad = {count_include_pad}, "
            f".index_stride = {{{', '.join(str(v) for v in istride)}}}}}")


def _wants_indices(ctx):
    outs = ctx.node.outputs
    return len(outs) > 1 and bool(outs[1])


def _pool_infer(ctx):
    ctx.require_inputs(1)
    ctx.require_dtype(0, MAX_TYPES if ctx.node.op_type == "MaxPool" else FLOAT)
    x = ctx.inputs[0]
    w = window(ctx)
    shape = tuple(x.shape[:2]) + tuple(w.out)
    outputs = [TensorType(x.dtype, shape)]
    if ctx.node.op_type == "MaxPool" and len(ctx.node.outputs) > 1:
        outputs.append(TensorType(np.dtype(np.int64), shape))
    return outputs


def _max_pool_emit(ctx):
    if ctx.outputs[0].numel == 0:
        return ""
    indices = _wants_indices(ctx)
    geom = _geometry(ctx, window(ctx), column_major=indices and ctx.attr("storage_order", 0) == 1)
    return (f"{_kernel(ctx)}({ctx.pool}, {geom}, 1, {ctx.x(0)}, {ctx.y(0)}, "
            f"{ctx.y(1) if indices else 'NULL'});")


def _average_pool_emit(ctx):
    if ctx.outputs[0].numel == 0:
        return ""
    geom = _geometry(ctx, window(ctx), int(ctx.attr("count_include_pad", 0)))
    return f"{_kernel(ctx)}({ctx.pool}, {geom}, 0, {ctx.x(0)}, {ctx.y(0)}, NULL);"


def _kernel(ctx):
    return f"aotc_pooling_{dtypes.short(ctx.inputs[0].dtype)}"


def _global_infer(channels_last=False):
    """Infer of a global pool: NCHW's output [N, C, 1, ...], also from NHWC (float32 only:
    the channels-last rewrite's values)."""
    def infer(ctx):
        ctx.require_inputs(1)
        ctx.require_dtype(0, (np.float32,) if channels_last else FLOAT)
        x = ctx.inputs[0]
        if x.rank < 3:
            raise ctx.fail(f"input of shape {list(x.shape)} has no spatial dims")
        channels = x.shape[-1] if channels_last else x.shape[1]
        return [TensorType(x.dtype, (x.shape[0], channels) + (1,) * (x.rank - 2))]
    return infer


def _global_scratch(kernel):
    def scratch(ctx):
        return reduce_scratch_bytes(kernel, ctx.inputs[0].dtype, ctx.outputs[0].numel)
    return scratch


def _global(kernel, channels_last=False):
    """Emit of a global pool over NCHW's spatial dims (2, 3, ...), or NHWC's (1, 2, ...)."""
    def emit(ctx):
        x = ctx.inputs[0]
        if ctx.outputs[0].numel == 0:
            return ""
        first = 1 if channels_last else 2
        return reduce_call(ctx, kernel, x.shape, tuple(range(first, first + x.rank - 2)))
    return emit


OPS = [
    OpDef("MaxPool", _pool_infer, _max_pool_emit, since=1, supports_exact=True),
    OpDef("AveragePool", _pool_infer, _average_pool_emit, since=1, supports_exact=True),
    OpDef("GlobalMaxPool", _global_infer(), _global("max"), scratch=_global_scratch("max"), since=1,
          supports_exact=True),
    OpDef("GlobalAveragePool", _global_infer(), _global("mean"), scratch=_global_scratch("mean"),
          since=1, supports_exact=True),
    OpDef("NhwcGlobalMaxPool", _global_infer(channels_last=True), _global("max", channels_last=True),
          domain=AOTC_DOMAIN, since=1),
    OpDef("NhwcGlobalAveragePool", _global_infer(channels_last=True), _global("mean", channels_last=True),
          domain=AOTC_DOMAIN, since=1),
]
