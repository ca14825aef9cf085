"""Operators that write a pattern: Trilu, EyeLike, OneHot and Range.

Trilu, EyeLike and OneHot have kernels in runtime_c/aotc_rearrange.h. Range depends
only on its three scalars, which must be known at compile time (aotc.backend freezes
graph inputs that hold them): its output is a constant, folded at compile time, and
copied from the weights when it is too large to fold.
"""
import numpy as np

from .. import dtypes
from .base import OpDef, TensorType
from .index import numel, type_code, width


# ---- Trilu ------------------------------------------------------------------------------

def _trilu_k(ctx, arrays=None):
    ctx.require_inputs(1, 2)
    if ctx.inputs[0].rank < 2:
        raise ctx.fail(f"needs rank 2 or more, has shape {list(ctx.inputs[0].shape)}")
    if not ctx.has_input(1):
        return 0
    ctx.require_dtype(1, (np.int64,))
    k = arrays[1] if arrays is not None else ctx.const_input(1, "k")
    if np.asarray(k).size != 1:
        raise ctx.fail(f"k must hold one value, has shape {list(np.shape(k))}")
    return int(np.asarray(k).reshape(-1)[0])


def _upper(ctx):
    upper = int(ctx.attr("upper", 1))
    if upper not in (0, 1):
        raise ctx.fail(f"upper {upper}; expected 0 or 1")
    return upper


def _trilu_infer(ctx):
    _trilu_k(ctx)
    _upper(ctx)
    x = ctx.inputs[0]
    return [TensorType(x.dtype, x.shape)]


def _trilu_evaluate(ctx, arrays):
    k = _trilu_k(ctx, arrays)
    return [np.triu(arrays[0], k) if _upper(ctx) else np.tril(arrays[0], k)]


def _trilu_emit(ctx):
    x = ctx.inputs[0]
    if x.numel == 0:
        return ""
    rows, cols = x.shape[-2:]
    # k beyond +-(rows + cols) acts like it: keeps the literal within int64
    k = max(min(_trilu_k(ctx), rows + cols), -(rows + cols))
    return (f"aotc_trilu({ctx.y(0)}, {ctx.x(0)}, {numel(x.shape[:-2])}, {rows}, {cols}, {k}, "
            f"{_upper(ctx)}, {width(x.dtype)});")


# ---- EyeLike ----------------------------------------------------------------------------

def _eye_dtype(ctx):
    ctx.require_inputs(1)
    x = ctx.inputs[0]
    if x.rank != 2:
        raise ctx.fail(f"needs a 2-d input, has shape {list(x.shape)}")
    dtype = ctx.attr("dtype")
    return np.dtype(x.dtype) if dtype is None else dtypes.from_onnx(int(dtype), "the dtype attribute")


def _eye_infer(ctx):
    return [TensorType(_eye_dtype(ctx), ctx.inputs[0].shape)]


def _eye_evaluate(ctx, arrays):
    rows, cols = arrays[0].shape
    return [np.eye(rows, cols, int(ctx.attr("k", 0)), dtype=_eye_dtype(ctx))]


def _eye_emit(ctx):
    y = ctx.outputs[0]
    if y.numel == 0:
        return ""
    rows, cols = y.shape
    k = max(min(int(ctx.attr("k", 0)), cols), -rows)
    one = ctx.const(np.ones(1, y.dtype))
    return f"aotc_eye_like({ctx.y(0)}, {rows}, {cols}, {k}, {one}, {width(y.dtype)});"


# ---- OneHot -----------------------------------------------------------------------------

def _one_hot_spec(ctx, arrays=None):
    """(axis, depth)."""
    ctx.require_inputs(3)
    indices, _, values = ctx.inputs
    ctx.require_dtype(0, dtypes.NUMERIC)
    if values.numel != 2:
        raise ctx.fail(f"values must hold [off, on], has shape {list(values.shape)}")
    axis = ctx.axis(ctx.attr("axis", -1), indices.rank + 1)
    depth = arrays[1] if arrays is not None else ctx.const_input(1, "depth")
    if np.asarray(depth).size != 1:
        raise ctx.fail(f"depth must hold one value, has shape {list(np.shape(depth))}")
    depth = np.asarray(depth).reshape(-1)[0]
    if not np.isfinite(depth) or depth < 1:
        raise ctx.fail(f"depth {depth} must be 1 or more")
    return axis, int(depth)


def _one_hot_infer(ctx):
    axis, depth = _one_hot_spec(ctx)
    shape = ctx.inputs[0].shape
    return [TensorType(ctx.inputs[2].dtype, shape[:axis] + (depth,) + shape[axis:])]


def _one_hot_evaluate(ctx, arrays):
    indices, _, values = arrays
    axis, depth = _one_hot_spec(ctx, arrays)
    at = np.where(indices < 0, indices + depth, indices)
    hot = np.expand_dims(at, axis) == np.arange(depth).reshape((-1,) + (1,) * (indices.ndim - axis))
    flat = values.reshape(-1)
    return [np.where(hot, flat[1], flat[0]).astype(values.dtype)]


def _one_hot_emit(ctx):
    indices, _, values = ctx.inputs
    y = ctx.outputs[0]
    if y.numel == 0:
        return ""
    axis, depth = _one_hot_spec(ctx)
    outer, inner = numel(indices.shape[:axis]), numel(indices.shape[axis:])
    return (f"aotc_one_hot({ctx.y(0)}, {ctx.x(0)}, {type_code(indices.dtype)}, {width(indices.dtype)}, "
            f"{outer}, {depth}, {inner}, {ctx.x(2)}, {width(values.dtype)});")


# ---- Range ------------------------------------------------------------------------------

RANGE_TYPES = (np.float32, np.float64, np.int16, np.int32, np.int64)
STASH_TYPES = {1: np.float32, 11: np.float64}


def _range_values(ctx, arrays=None):
    ctx.require_inputs(3)
    dtype = ctx.require_dtype(0, RANGE_TYPES + (dtypes.HALVES if ctx.opset >= 27 else ()))
    scalars = []
    for i, what in enumerate(("start", "limit", "delta")):
        t = ctx.inputs[i]
        if t.dtype != dtype or t.numel != 1:
            raise ctx.fail(f"{what} must be one {dtypes.name(dtype)} value, is {dtypes.name(t.dtype)} "
                           f"{list(t.shape)}")
        scalars.append(np.asarray(arrays[i] if arrays is not None else ctx.const_input(i, what)).reshape(-1)[0])
    start, limit, delta = scalars
    if delta == 0:
        raise ctx.fail("delta is 0")
    if dtype in dtypes.HALVES:
        stash = STASH_TYPES.get(int(ctx.attr("stash_type", 1)))
        if stash is None:
            raise ctx.fail(f"stash_type {ctx.attr('stash_type')}; expected 1 (float) or 11 (double)")
        return np.arange(stash(start), stash(limit), stash(delta), dtype=stash).astype(dtype)
    return np.arange(start.item(), limit.item(), delta.item()).astype(dtype)


def _range_infer(ctx):
    values = _range_values(ctx)
    return [TensorType(values.dtype, values.shape)]


def _range_emit(ctx):
    values = _range_values(ctx)
    return f"memcpy({ctx.y(0)}, {ctx.const(values)}, {values.nbytes});" if values.size else ""


OPS = [
    OpDef("Trilu", _trilu_infer, _trilu_emit, _trilu_evaluate, since=14, supports_exact=True,
          checked_through=28),
    OpDef("EyeLike", _eye_infer, _eye_emit, _eye_evaluate, since=9, supports_exact=True,
          checked_through=28),
    OpDef("OneHot", _one_hot_infer, _one_hot_emit, _one_hot_evaluate, since=9, supports_exact=True,
          checked_through=28),
    OpDef("Range", _range_infer, _range_emit, lambda ctx, a: [_range_values(ctx, a)], since=11,
          supports_exact=True, checked_through=28),
]
