"""Variadic element-wise operators: Max, Min, Sum and Mean over 1..N broadcast inputs.

Each is a chain of the binary family's pairwise expression: y = x0 op x1 over the
full output shape, then y = y op xi for each further input (Mean divides in the last
step). Only inputs 0 and 1 may share the output's storage: they are read before y is
first written, every later input is read after.
"""
import functools

import numpy as np

from .. import dtypes
from .base import OpDef, TensorType, broadcast_shapes, c_ints
from .binary import PAIRWISE, evaluate_pair
from .broadcast import collapse
from .unary import canonical_nan, literal, to_dtype, unary_loop


def _pair_loop(ctx, out_shape, operands, expr):
    """AOTC_BINARY writing output 0 from two (pointer, shape) operands."""
    (pa, sa), (pb, sb) = operands
    shape, strd = collapse(out_shape, [sa, sb])
    if len(shape) > 16:
        raise ctx.unsupported(f"broadcast over {len(shape)} dimensions (at most 16)")
    t = dtypes.c_kernel_type(ctx.outputs[0].dtype)
    args = [t, t, t, ctx.y(0), pa, pb, str(len(shape)), c_ints(shape)] + [c_ints(s) for s in strd] + \
        [canonical_nan(ctx.outputs[0].dtype, expr)]
    return f"AOTC_BINARY({', '.join(args)});"


def _variadic(op_type, pair, mean=False):
    def infer(ctx):
        if not ctx.inputs or any(t is None for t in ctx.inputs):
            raise ctx.fail(f"{op_type} needs at least one input, and no omitted ones")
        dt = ctx.require_dtype(0, pair.accepted)
        for i, t in enumerate(ctx.inputs):
            if np.dtype(t.dtype) != dt:
                raise ctx.fail(f"input {i} has element type {dtypes.name(t.dtype)}, "
                               f"input 0 has {dtypes.name(dt)}")
        shape = broadcast_shapes(ctx, *[t.shape for t in ctx.inputs])
        return [TensorType(dt, shape)]

    def evaluate(ctx, arrays):
        out = functools.reduce(lambda a, b: evaluate_pair(ctx, pair, a, b), arrays)
        if mean:
            out = to_dtype(out.astype(dtypes.compute_dtype(out.dtype)) / len(arrays), out.dtype)
        return [np.broadcast_to(out, ctx.outputs[0].shape).copy() if ctx.outputs else out]

    def emit(ctx):
        y = ctx.outputs[0]
        if y.numel == 0:
            return ""
        dt, n = np.dtype(y.dtype), len(ctx.inputs)
        expr = pair.c(ctx, dt)
        if n == 1:
            return unary_loop(ctx, "X")
        lines = []
        shapes = [tuple(t.shape) for t in ctx.inputs]
        for i in range(1, n):
            a = (ctx.x(0), shapes[0]) if i == 1 else (ctx.y(0), tuple(y.shape))
            step = expr
            if mean and i == n - 1:
                step = f"({expr} / {literal(dt, n)})"
            lines.append(_pair_loop(ctx, y.shape, [a, (ctx.x(i), shapes[i])], step))
        return "\n".join(lines)

    return OpDef(op_type, infer, emit, evaluate, since=6, in_place_inputs=(0, 1), supports_exact=pair.exact)


OPS = [
    _variadic("Max", PAIRWISE["Max"]),
    _variadic("Min", PAIRWISE["Min"]),
    _variadic("Sum", PAIRWISE["Sum"]),
    _variadic("Mean", PAIRWISE["Sum"], mean=True),
]
