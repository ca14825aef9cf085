"""CumSum and CumProd: cumulative sums and products along one axis.

The axis is an input (int32 or int64, one element) needed at compile time; exclusive
and reverse are attributes. Sums and products run in float for the 16-bit floats
and wrap for integers (runtime_c/aotc_scan.h); each output is rounded once.
"""
import math

import numpy as np

from .. import dtypes
from .argreduce import require_axis_input
from .base import OpDef, TensorType

SCAN_TYPES = dtypes.FLOATS + tuple(np.dtype(t) for t in (np.int32, np.int64, np.uint32, np.uint64))
AXIS_TYPES = (np.int32, np.int64)


def _params(ctx):
    """(axis, exclusive, reverse)."""
    x = ctx.inputs[0]
    axis = ctx.const_input(1, "axis")
    if np.dtype(axis.dtype) not in [np.dtype(t) for t in AXIS_TYPES]:
        raise ctx.fail(f"axis must be int32 or int64, is {dtypes.name(axis.dtype)}")
    if axis.size != 1:
        raise ctx.fail(f"axis must hold one value, holds {axis.size}")
    return (ctx.axis(int(axis.reshape(-1)[0]), max(x.rank, 1)),
            bool(ctx.attr("exclusive", 0)), bool(ctx.attr("reverse", 0)))


def _scan_op(op_type, since, product):
    def infer(ctx):
        ctx.require_inputs(2)
        x = require_axis_input(ctx, SCAN_TYPES)
        _params(ctx)
        return [TensorType(x.dtype, x.shape)]

    def evaluate(ctx, arrays):
        axis, exclusive, reverse = _params(ctx)
        x = arrays[0]
        acc = dtypes.compute_dtype(x.dtype)
        if reverse:
            x = np.flip(x, axis)
        if exclusive:
            identity = np.ones_like if product else np.zeros_like
            first = identity(np.take(x, [0], axis=axis))
            x = np.concatenate([first, np.take(x, range(x.shape[axis] - 1), axis=axis)], axis)
        with np.errstate(all="ignore"):
            scan = np.cumprod if product else np.cumsum
            y = scan(x.astype(acc, copy=False), axis=axis, dtype=acc)
        if reverse:
            y = np.flip(y, axis)
        return [np.ascontiguousarray(y).astype(arrays[0].dtype)]

    def emit(ctx):
        x = ctx.inputs[0]
        if x.numel == 0:
            return ""
        axis, exclusive, reverse = _params(ctx)
        outer, n, inner = math.prod(x.shape[:axis]), x.shape[axis], math.prod(x.shape[axis + 1:])
        return (f"AOTC_SCAN({dtypes.c_kernel_type(x.dtype)}, {ctx.y(0)}, {ctx.x(0)}, "
                f"INT64_C({outer}), INT64_C({n}), INT64_C({inner}), {int(product)}, "
                f"{int(exclusive)}, {int(reverse)});")

    return OpDef(op_type, infer, emit, evaluate, since=since, checked_through=28,
                 supports_exact=True, in_place_inputs=(0,))


OPS = [_scan_op("CumSum", 11, False), _scan_op("CumProd", 26, True)]
