"""ArgMax, ArgMin and Hardmax: the position of each line's extreme element.

The input is viewed as [outer, n, inner] around the axis (Hardmax before opset 13
flattens everything from the axis on into n). Ties go to the first position (the last
with select_last_index); NaN counts as the extreme, as in numpy. Kernels:
runtime_c/aotc_argreduce.h.
"""
import math

import numpy as np

from .. import dtypes
from .base import OpDef, TensorType

ARG_TYPES = dtypes.NUMERIC


def _nan_extreme_arg(x, axis, largest):
    """numpy's argmax/argmin (the first NaN wins) along axis."""
    x = x.astype(dtypes.compute_dtype(x.dtype), copy=False)
    return np.argmax(x, axis=axis) if largest else np.argmin(x, axis=axis)


def _split(shape, axis, flatten_tail=False):
    """(outer, n, inner) of shape around axis."""
    outer = math.prod(shape[:axis])
    if flatten_tail:
        return outer, math.prod(shape[axis:]), 1
    return outer, shape[axis], math.prod(shape[axis + 1:])


def require_axis_input(ctx, types):
    """Input 0 (returned), of one of `types`, with an axis to run along (rank 1 or more)."""
    ctx.require_dtype(0, types)
    x = ctx.inputs[0]
    if x.rank == 0:
        raise ctx.fail(f"{ctx.node.op_type} needs an input of rank 1 or more")
    return x


# ---- ArgMax / ArgMin ----------------------------------------------------------------

def _arg_params(ctx):
    x = ctx.inputs[0]
    axis = ctx.axis(ctx.attr("axis", 0), x.rank)
    return axis, bool(ctx.attr("keepdims", 1)), bool(ctx.attr("select_last_index", 0))


def _arg_op(op_type, largest):
    def infer(ctx):
        ctx.require_inputs(1)
        x = require_axis_input(ctx, ARG_TYPES)
        axis, keep, _ = _arg_params(ctx)
        if x.shape[axis] == 0:
            raise ctx.fail(f"{op_type} over axis {axis}, which has no elements")
        shape = tuple(1 if d == axis else n for d, n in enumerate(x.shape) if keep or d != axis)
        return [TensorType(np.dtype(np.int64), shape)]

    def evaluate(ctx, arrays):
        axis, keep, last = _arg_params(ctx)
        x = arrays[0]
        if last:
            n = x.shape[axis]
            y = n - 1 - _nan_extreme_arg(np.flip(x, axis), axis, largest)
        else:
            y = _nan_extreme_arg(x, axis, largest)
        y = np.asarray(y, np.int64)
        return [np.expand_dims(y, axis) if keep else y]

    def emit(ctx):
        x = ctx.inputs[0]
        if ctx.outputs[0].numel == 0:
            return ""
        axis, _, last = _arg_params(ctx)
        outer, n, inner = _split(x.shape, axis)
        return (f"AOTC_ARGREDUCE({dtypes.c_kernel_type(x.dtype)}, {ctx.y(0)}, {ctx.x(0)}, "
                f"INT64_C({outer}), INT64_C({n}), INT64_C({inner}), {int(largest)}, {int(last)});")

    return OpDef(op_type, infer, emit, evaluate, since=1, checked_through=28, supports_exact=True)


# ---- Hardmax ------------------------------------------------------------------------

def _hardmax_split(ctx):
    x = ctx.inputs[0]
    default = -1 if ctx.opset >= 13 else 1
    axis = ctx.axis(ctx.attr("axis", default), x.rank)
    return _split(x.shape, axis, flatten_tail=ctx.opset < 13)


def _hardmax_infer(ctx):
    ctx.require_inputs(1)
    x = require_axis_input(ctx, dtypes.FLOATS)
    _hardmax_split(ctx)
    return [TensorType(x.dtype, x.shape)]


def _hardmax_evaluate(ctx, arrays):
    x = arrays[0]
    outer, n, inner = _hardmax_split(ctx)
    y = np.zeros((outer, n, inner), dtypes.compute_dtype(x.dtype))
    if y.size:
        pos = _nan_extreme_arg(x.reshape(outer, n, inner), 1, True)
        np.put_along_axis(y, pos[:, None, :], 1, axis=1)
    return [y.reshape(x.shape).astype(x.dtype)]


def _hardmax_emit(ctx):
    x = ctx.inputs[0]
    if x.numel == 0:
        return ""
    outer, n, inner = _hardmax_split(ctx)
    return (f"AOTC_HARDMAX({dtypes.c_kernel_type(x.dtype)}, {ctx.y(0)}, {ctx.x(0)}, "
            f"INT64_C({outer}), INT64_C({n}), INT64_C({inner}));")


OPS = [
    _arg_op("ArgMax", True),
    _arg_op("ArgMin", False),
    OpDef("Hardmax", _hardmax_infer, _hardmax_emit, _hardmax_evaluate, since=1,
          checked_through=28, supports_exact=True),
]
