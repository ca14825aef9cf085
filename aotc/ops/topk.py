"""TopK: the k largest (or smallest) elements along an axis, with their positions.

k is an attribute before opset 10 and an input after, needed at compile time. The
outputs are always sorted (allowed for sorted=0); equal values come in increasing
position and NaN counts as the largest value, as in onnx.reference (numpy's order).
Kernel: runtime_c/aotc_sort.h.
"""
import math

import numpy as np

from .. import dtypes
from .base import OpDef, TensorType


def _params(ctx):
    """(axis, k, largest)."""
    x = ctx.inputs[0]
    axis = ctx.axis(ctx.attr("axis", -1), x.rank)
    if ctx.opset < 10:
        k = ctx.attr("k")
        if k is None:
            raise ctx.fail("TopK needs the k attribute")
    else:
        value = ctx.const_input(1, "k")
        if np.dtype(value.dtype) != np.int64 or value.size != 1:
            raise ctx.fail(f"k must be one int64 value, is {dtypes.name(value.dtype)} of "
                           f"{value.size} elements")
        k = value.reshape(-1)[0]
    k = int(k)
    if not 0 <= k <= x.shape[axis]:
        raise ctx.fail(f"k = {k} is outside [0, {x.shape[axis]}] (the size of axis {axis})")
    return axis, k, bool(ctx.attr("largest", 1))


def _infer(ctx):
    ctx.require_inputs(1 if ctx.opset < 10 else 2)
    ctx.require_dtype(0, dtypes.NUMERIC)
    x = ctx.inputs[0]
    if x.rank == 0:
        raise ctx.fail("TopK needs an input of rank 1 or more")
    axis, k, _ = _params(ctx)
    shape = x.shape[:axis] + (k,) + x.shape[axis + 1:]
    return [TensorType(x.dtype, shape), TensorType(np.dtype(np.int64), shape)]


def _evaluate(ctx, arrays):
    axis, k, largest = _params(ctx)
    x = arrays[0]
    values = x.astype(dtypes.compute_dtype(x.dtype), copy=False)
    values = np.where(values == 0, 0, values) if values.dtype.kind == "f" else values
    position = np.indices(x.shape)[axis]
    order = np.lexsort((-position if largest else position, values), axis=axis)
    if largest:
        order = np.flip(order, axis)
    order = np.take(order, np.arange(k), axis=axis).astype(np.int64)
    return [np.take_along_axis(x, order, axis=axis), order]


def _emit(ctx):
    x = ctx.inputs[0]
    axis, k, largest = _params(ctx)
    outer, n, inner = math.prod(x.shape[:axis]), x.shape[axis], math.prod(x.shape[axis + 1:])
    if k == 0 or outer * inner == 0:
        return ""
    return (f"AOTC_TOPK({dtypes.c_kernel_type(x.dtype)}, {ctx.y(0)}, {ctx.y(1)}, {ctx.x(0)}, "
            f"INT64_C({outer}), INT64_C({n}), INT64_C({inner}), INT64_C({k}), {int(largest)}, "
            f"{ctx.scratch});")


def _scratch(ctx):
    x = ctx.inputs[0]
    return 24 * x.shape[ctx.axis(ctx.attr("axis", -1), x.rank)]


OPS = [OpDef("TopK", _infer, _emit, _evaluate, scratch=_scratch, since=1, checked_through=28,
             supports_exact=True)]
