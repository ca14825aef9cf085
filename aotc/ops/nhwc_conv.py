"""NhwcConv (domain ai.aotc): a conv over channels-last activations, made by the plan's
channels-last rewrite (aotc/plan/channels_last.py).

    NhwcConv(X, W, [B], [R]):  Y = act(Conv(X, W, B) + R), with X [N, H, W, Cin] and Y, R
                               [N, OH, OW, Cout]; W, B, Conv's attributes and the
                               activation as FusedConv's (ops/fused.py).

Two kinds, both float32 with weights known at compile time (runtime_c/aotc_conv_nhwc.h):
pointwise (1x1, stride 1, unpadded, one group), one GEMM over the pixels against W^T
packed here; depthwise (group = Cin = Cout), channels across the vector lanes, W as
[taps, C]. Fast mode only: the rewrite leaves exact mode's convs NCHW.
"""
import copy

import numpy as np

from ..ir import AOTC_DOMAIN
from . import conv
from .base import OpDef, TensorType
from .fused import activation_struct
from .matmul import KC, sgemm_packed_scratch_bytes

NCHW_AXES = (0, 3, 1, 2)   # NCHW's dims, as axes of NHWC
NHWC_AXES = (0, 2, 3, 1)   # NHWC's dims, as axes of NCHW


def kind_of(g):
    """'pointwise', 'depthwise', or None for a conv this operator does not run."""
    if g.spatial != 2 or not g.const_weights:
        return None
    if g.group == 1 and g.reads_x:
        return "pointwise"
    if g.cin_g == 1 and g.cout_g == 1:
        return "depthwise"
    return None


def geometry(ctx):
    """The conv's geometry (ops/conv.py), from X's shape read as NHWC."""
    x = ctx.inputs[0]
    if x.rank != 4:
        raise ctx.fail(f"X must be [N, H, W, C], has shape {list(x.shape)}")
    view = copy.copy(ctx)
    view.inputs = [TensorType(x.dtype, tuple(x.shape[a] for a in NCHW_AXES))] + list(ctx.inputs[1:3])
    return conv.geometry(view)


def _infer(ctx):
    ctx.require_dtype(0, (np.float32,))
    g = geometry(ctx)
    if kind_of(g) is None:
        raise ctx.unsupported("NhwcConv runs 2-D pointwise (1x1, stride 1, unpadded, one group) "
                              "and depthwise convs with constant weights")
    shape = (g.batch,) + tuple(g.out_dims[1:]) + (g.cout_g * g.group,)
    if conv.has_residual(ctx):
        r = ctx.inputs[3]
        if tuple(r.shape) != shape or np.dtype(r.dtype) != np.float32:
            raise ctx.fail(f"the residual ({r.dtype} {list(r.shape)}) must be float32 of the "
                           f"output's shape {list(shape)}")
    return [TensorType(ctx.inputs[0].dtype, shape)]


def _emit(ctx):
    if ctx.outputs[0].numel == 0:
        return ""
    g = geometry(ctx)
    bias = ctx.x(2) if ctx.has_input(2) else "NULL"
    residual = ctx.x(3) if conv.has_residual(ctx) else "NULL"
    act = activation_struct(ctx)
    w = np.asarray(ctx.inputs[1].value, np.float32)
    if kind_of(g) == "pointwise":
        return (f"aotc_conv_pointwise_nhwc({ctx.pool}, {g.c_literal()}, {ctx.x(0)}, "
                f"{ctx.const(conv.pack_weights(g, w))}, {bias}, {residual}, {ctx.y(0)}, {act}, "
                f"{ctx.scratch});")
    taps = w.reshape(g.group, -1).T   # [kh * kw, C]
    return (f"aotc_conv_depthwise_nhwc({ctx.pool}, {g.c_literal()}, {ctx.x(0)}, {ctx.const(taps)}, "
            f"{bias}, {residual}, {ctx.y(0)}, {act});")


def _scratch(ctx):
    g = geometry(ctx)
    if kind_of(g) != "pointwise":
        return 0
    return sgemm_packed_scratch_bytes(g.batch * g.out_pixels, g.cout_g, g.cin_g)


def _residual_in_place(ctx):
    """Y may take the residual's storage where each residual element is read before that
    element of Y is written: the depthwise kernel, and a GEMM of one K-block (more keep
    partial sums in Y)."""
    if not conv.has_residual(ctx):
        return ()
    g = geometry(ctx)
    return (3,) if kind_of(g) == "depthwise" or g.cin_g <= KC else ()


def _stores_fast(ctx):
    return kind_of(geometry(ctx)) == "depthwise"


OPS = [OpDef("NhwcConv", _infer, _emit, scratch=_scratch, domain=AOTC_DOMAIN, since=1,
             in_place_inputs=_residual_in_place, stores_fast=_stores_fast)]
