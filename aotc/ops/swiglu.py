"""SwiGLU (opset 28): Y = A * sigmoid(alpha * A) * B, for A and B of one shape and type.

One element-wise loop (AOTC_BINARY of runtime_c/aotc_elementwise.h); float16 and
bfloat16 are computed in float and rounded once.
"""
import numpy as np

from .. import dtypes
from .base import OpDef, TensorType
from .broadcast import loop_args
from .unary import in_compute_types, literal, math_fn, to_dtype


def _alpha(ctx):
    return float(np.float32(ctx.attr("alpha", 1.0)))


def _infer(ctx):
    ctx.require_inputs(2)
    dt = ctx.require_dtype(0, dtypes.FLOATS)
    a, b = ctx.inputs
    if np.dtype(b.dtype) != dt or a.shape != b.shape:
        raise ctx.fail(f"A ({dtypes.name(a.dtype)} {list(a.shape)}) and B ({dtypes.name(b.dtype)} "
                       f"{list(b.shape)}) must have one type and one shape")
    return [TensorType(dt, a.shape)]


def _evaluate(ctx, arrays):
    a, b = in_compute_types(arrays)
    with np.errstate(all="ignore"):
        y = a * (1 / (1 + np.exp(-_alpha(ctx) * a))) * b
    return [to_dtype(y, arrays[0].dtype)]


def _emit(ctx):
    y = ctx.outputs[0]
    if y.numel == 0:
        return ""
    dt = np.dtype(y.dtype)
    ct = dtypes.c_kernel_type(dt)
    expr = f"(A * (1 / (1 + {math_fn(dt, 'exp')}(-{literal(dt, _alpha(ctx))} * A))) * B)"
    args = [ct, ct, ct, ctx.y(0), ctx.x(0), ctx.x(1)] + loop_args(ctx, [0, 1]) + [expr]
    return f"AOTC_BINARY({', '.join(args)});"


OPS = [OpDef("SwiGLU", _infer, _emit, _evaluate, since=28, checked_through=28,
             in_place_inputs=(0, 1))]
