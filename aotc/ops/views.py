"""Views: operators whose output is input 0 with another shape (Reshape, Flatten,
Squeeze, Unsqueeze, Identity).

The data never moves: the plan lets the output share the input's storage, so these
have no `emit`. Each has an `evaluate` so that constant chains through them fold.
"""
import numpy as np

from .base import OpDef, TensorType

# Opsets 23-28 only add element types (float4e2m1, float8e8m0, int2, uint2) to these.
CHECKED_THROUGH = 28


def _axes_list(ctx, attr_before, what="axes"):
    """The `axes` of Squeeze/Unsqueeze: an attribute before opset `attr_before`, an
    optional (compile-time constant) input from then on. None when absent."""
    if ctx.opset < attr_before:
        axes = ctx.attr("axes")
        return None if axes is None else [int(a) for a in axes]
    if not ctx.has_input(1):
        return None
    return [int(a) for a in ctx.const_input(1, what).reshape(-1)]


def _normalized_axes(ctx, axes, rank):
    out = [ctx.axis(a, rank) for a in axes]
    if len(set(out)) != len(out):
        raise ctx.fail(f"axes {axes} name a dimension twice")
    return out


def reshape_target(ctx, in_shape, shape, allowzero):
    """The output shape of Reshape: 0 copies the input dim (unless allowzero), one -1
    takes what is left."""
    shape = [int(d) for d in shape]
    out, infer_at = [], None
    for i, d in enumerate(shape):
        if d == -1:
            if infer_at is not None:
                raise ctx.fail(f"shape {shape} has more than one -1")
            infer_at = i
            out.append(1)
        elif d == 0 and not allowzero:
            if i >= len(in_shape):
                raise ctx.fail(f"shape {shape}: 0 at position {i} copies a dimension the "
                               f"rank-{len(in_shape)} input does not have")
            out.append(int(in_shape[i]))
        elif d < 0:
            raise ctx.fail(f"shape {shape} has the invalid dimension {d}")
        else:
            out.append(d)
    if allowzero and infer_at is not None and 0 in shape:
        raise ctx.fail(f"shape {shape} has both 0 and -1 while allowzero=1")
    numel = int(np.prod(in_shape, dtype=np.int64))
    known = int(np.prod(out, dtype=np.int64))
    if infer_at is not None:
        if known == 0 or numel % known:
            raise ctx.fail(f"cannot reshape {list(in_shape)} into {shape}: -1 has no whole size")
        out[infer_at] = numel // known
    elif known != numel:
        raise ctx.fail(f"cannot reshape {list(in_shape)} ({numel} elements) into {shape} "
                       f"({known} elements)")
    return tuple(out)


def _reshape_infer(ctx):
    ctx.require_inputs(2)
    x, s = ctx.inputs
    ctx.const_input(1, "shape")
    if s.rank != 1 or np.dtype(s.dtype) != np.int64:
        raise ctx.fail(f"the shape input must be a 1-D int64 tensor, is {s.dtype} {list(s.shape)}")
    allowzero = ctx.opset >= 14 and int(ctx.attr("allowzero", 0)) == 1
    return [TensorType(x.dtype, reshape_target(ctx, x.shape, s.value, allowzero))]


def _flatten_infer(ctx):
    ctx.require_inputs(1)
    x = ctx.inputs[0]
    axis = int(ctx.attr("axis", 1))
    if not -x.rank <= axis <= x.rank:
        raise ctx.fail(f"axis {axis} is out of range for rank {x.rank}")
    axis = axis + x.rank if axis < 0 else axis
    outer = int(np.prod(x.shape[:axis], dtype=np.int64))
    inner = int(np.prod(x.shape[axis:], dtype=np.int64))
    return [TensorType(x.dtype, (outer, inner))]


def _squeeze_infer(ctx):
    ctx.require_inputs(1, 2)
    x = ctx.inputs[0]
    axes = _axes_list(ctx, 13)
    if axes is None:
        shape = tuple(d for d in x.shape if d != 1)
    else:
        axes = _normalized_axes(ctx, axes, x.rank)
        for a in axes:
            if x.shape[a] != 1:
                raise ctx.fail(f"cannot squeeze axis {a} of shape {list(x.shape)}: its size is not 1")
        shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    return [TensorType(x.dtype, shape)]


def _unsqueeze_infer(ctx):
    ctx.require_inputs(1 if ctx.opset < 13 else 2, 1 if ctx.opset < 13 else 2)
    x = ctx.inputs[0]
    axes = _axes_list(ctx, 13)
    if axes is None:
        raise ctx.fail("Unsqueeze needs axes")
    rank = x.rank + len(axes)
    axes = _normalized_axes(ctx, axes, rank)
    dims = iter(x.shape)
    return [TensorType(x.dtype, tuple(1 if i in axes else next(dims) for i in range(rank)))]


def _identity_infer(ctx):
    ctx.require_inputs(1)
    x = ctx.inputs[0]
    return [TensorType(x.dtype, x.shape)]


def _view(op_type, infer, since=1):
    def evaluate(ctx, arrays):   # input 0's data in the inferred output shape
        shape = infer(ctx)[0].shape
        return [np.asarray(arrays[0]).reshape(shape)]
    return OpDef(op_type, infer, None, evaluate, since=since, checked_through=CHECKED_THROUGH,
                 supports_exact=True, view_of_input=True)


OPS = [
    _view("Reshape", _reshape_infer, since=5),
    _view("Flatten", _flatten_infer),
    _view("Squeeze", _squeeze_infer),
    _view("Unsqueeze", _unsqueeze_infer),
    _view("Identity", _identity_infer),
]
