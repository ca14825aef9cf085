"""LpPool and MaxUnpool (float32, 1 to 3 spatial dims; runtime_c/aotc_unpool.h).

LpPool resolves its windows with the pooling module's rules (auto_pad, ceil_mode,
dilations) and takes (sum of |x|^p)^(1/p) over the input elements of each window.
MaxUnpool follows the ONNX reference: indices address the unpooled shape
((in - 1) * stride - pads + kernel per spatial dim); an output_shape input only
enlarges the output, the unpooled values staying at the start of every dimension.
"""
import math

import numpy as np

from .base import OpDef, TensorType, c_ints, strides
from .pool import window

FLOAT = (np.float32,)


# ---- LpPool ------------------------------------------------------------------------

def _lp_p(ctx):
    p = ctx.attr("p", 2)
    if float(p) != int(float(p)):       # LpPool-1 took a float
        raise ctx.unsupported(f"LpPool with p = {p} (integers supported)")
    if int(float(p)) < 1:
        raise ctx.fail(f"p = {p} must be at least 1")
    return int(float(p))


def _lp_infer(ctx):
    ctx.require_inputs(1)
    ctx.require_dtype(0, FLOAT)
    _lp_p(ctx)
    x = ctx.inputs[0]
    w = window(ctx)
    return [TensorType(x.dtype, tuple(x.shape[:2]) + tuple(w.out))]


def _lp_emit(ctx):
    x, y = ctx.inputs[0], ctx.outputs[0]
    if y.numel == 0:
        return ""
    w = window(ctx)
    lead = 3 - len(w.kernel)

    def three(values, fill):
        return "{" + ", ".join(str(int(v)) for v in [fill] * lead + list(values)) + "}"
    geom = (f"&(const aotc_lp_pool_geom){{.planes = {x.shape[0] * x.shape[1]}, "
            f".in = {three(x.shape[2:], 1)}, .out = {three(w.out, 1)}, .kernel = {three(w.kernel, 1)}, "
            f".stride = {three(w.stride, 1)}, .dilation = {three(w.dilation, 1)}, "
            f".pad = {three(w.pad, 0)}, .p = {_lp_p(ctx)}}}")
    return f"aotc_lp_pool({ctx.pool}, {geom}, {ctx.x(0)}, {ctx.y(0)});"


# ---- MaxUnpool ---------------------------------------------------------------------

def _ints(ctx, key, default, count):
    values = ctx.attr(key)
    values = [default] * count if values is None else [int(v) for v in values]
    if len(values) != count:
        raise ctx.fail(f"{key} has {len(values)} values, expected {count}")
    return values


def _unpool_shapes(ctx):
    """(unpooled shape, output shape)."""
    ctx.require_inputs(2, 3)
    ctx.require_dtype(0, FLOAT)
    ctx.require_dtype(1, (np.int64,))
    x, indices = ctx.inputs[:2]
    if tuple(indices.shape) != tuple(x.shape):
        raise ctx.fail(f"indices {list(indices.shape)} must have X's shape {list(x.shape)}")
    nd = x.rank - 2
    if not 1 <= nd <= 3:
        raise ctx.unsupported(f"MaxUnpool over {nd} spatial dims (1 to 3 supported)")
    if ctx.attr("kernel_shape") is None:
        raise ctx.fail("kernel_shape is required")
    kernel = _ints(ctx, "kernel_shape", 1, nd)
    stride = _ints(ctx, "strides", 1, nd)
    pads = _ints(ctx, "pads", 0, 2 * nd)
    if min(kernel + stride) < 1 or min(pads) < 0:
        raise ctx.fail(f"kernel_shape {kernel} and strides {stride} must be positive, pads {pads} "
                       f"non-negative")
    unpooled = tuple(int(d) for d in x.shape[:2]) + tuple(
        (x.shape[2 + d] - 1) * stride[d] - pads[d] - pads[nd + d] + kernel[d] for d in range(nd))
    if min(unpooled) < 0:
        raise ctx.fail(f"the unpooled shape {list(unpooled)} is negative")
    out = unpooled
    if ctx.has_input(2):
        out = tuple(int(v) for v in ctx.const_input(2, "output_shape").reshape(-1))
        if len(out) != x.rank:
            raise ctx.fail(f"output_shape {list(out)} must have rank {x.rank}")
        if any(o < u for o, u in zip(out, unpooled)):
            raise ctx.unsupported(f"output_shape {list(out)} smaller than the unpooled shape "
                                  f"{list(unpooled)}")
    return unpooled, out


def _unpool_infer(ctx):
    _, out = _unpool_shapes(ctx)
    return [TensorType(ctx.inputs[0].dtype, out)]


def _unpool_emit(ctx):
    y = ctx.outputs[0]
    if y.numel == 0:
        return ""
    unpooled, out = _unpool_shapes(ctx)
    return (f"if (aotc_max_unpool({ctx.x(0)}, {ctx.x(1)}, {ctx.y(0)}, {ctx.inputs[0].numel}, "
            f"{len(unpooled)}, {c_ints(unpooled)}, {c_ints(strides(out))}, {math.prod(out)}) != AOTC_OK) "
            f"return AOTC_ERR_INDEX;")


OPS = [
    OpDef("LpPool", _lp_infer, _lp_emit, since=1, checked_through=28),
    OpDef("MaxUnpool", _unpool_infer, _unpool_emit, since=9, checked_through=28),
]
