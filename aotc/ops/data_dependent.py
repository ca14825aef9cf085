"""Operators whose output shape depends on the data: NonZero, Unique and Compress.

aotc compiles for fixed shapes, so such an output is planned at its upper bound
(NonZero: rank x numel; Unique and Compress: the input's extent) and the kernel
writes the actual tensor densely at the start of that buffer and its actual shape
into the value's dims record (`ctx.dims(k)`, in the workspace). The generated
`<name>_output_shape` and the Session read the record back; the plan refuses any
node that reads such a value, so only graph outputs may have one. On constant inputs
the plan folds these operators like any other (their result is then a constant).
"""
import numpy as np

from .. import dtypes
from .base import OpDef, TensorType, c_ints
from .index import checked, numel, type_code, width

ALL_TYPES = dtypes.NUMERIC + dtypes.BOOL


def _store_dims(ctx, k, dims):
    """C statements writing the actual dims (C expressions) of output k to its record."""
    record = ctx.dims(k)
    if record is None:
        return ""
    return " ".join(f"{record}[{d}] = {expr};" for d, expr in enumerate(dims))


# ---- NonZero ------------------------------------------------------------------------------

def _nonzero_infer(ctx):
    ctx.require_inputs(1)
    ctx.require_dtype(0, ALL_TYPES)
    x = ctx.inputs[0]
    return [TensorType(np.dtype(np.int64), (max(x.rank, 1), x.numel))]


def _nonzero_evaluate(ctx, arrays):
    return [np.array(np.nonzero(np.atleast_1d(arrays[0])), dtype=np.int64)]


def _nonzero_emit(ctx):
    x = ctx.inputs[0]
    record = ctx.dims(0)
    if record is None:
        return ""
    return (f"aotc_nonzero({ctx.y(0)}, {ctx.x(0)}, {type_code(x.dtype)}, {width(x.dtype)}, {x.rank}, "
            f"{c_ints(x.shape)}, {record});")


# ---- Compress -----------------------------------------------------------------------------

def _compress_layout(ctx):
    """(axis of the output, (outer, dim, inner) of the input around it)."""
    ctx.require_inputs(2)
    x, cond = ctx.inputs
    ctx.require_dtype(1, dtypes.BOOL)
    if cond.rank != 1:
        raise ctx.fail(f"condition must be 1-d, has shape {list(cond.shape)}")
    if ctx.attr("axis") is None:
        return 0, (1, x.numel, 1)
    axis = ctx.axis(ctx.attr("axis"), x.rank)
    return axis, (numel(x.shape[:axis]), x.shape[axis], numel(x.shape[axis + 1:]))


def _compress_shape(ctx, kept):
    x = ctx.inputs[0]
    if ctx.attr("axis") is None:
        return (kept,)
    axis, _ = _compress_layout(ctx)
    return x.shape[:axis] + (kept,) + x.shape[axis + 1:]


def _compress_is_dynamic(ctx):
    return ctx.inputs[1] is not None and ctx.inputs[1].value is None


def _compress_infer(ctx):
    _, (_, dim, _) = _compress_layout(ctx)
    cond = ctx.inputs[1].value
    if cond is None:
        return [TensorType(ctx.inputs[0].dtype, _compress_shape(ctx, dim))]
    if cond[dim:].any():
        raise ctx.fail(f"condition is true at position {int(np.argmax(cond[dim:])) + dim}, past the "
                       f"{dim} positions it selects from")
    return [TensorType(ctx.inputs[0].dtype, _compress_shape(ctx, int(cond[:dim].sum())))]


def _compress_evaluate(ctx, arrays):
    return [np.compress(arrays[1], arrays[0], axis=ctx.attr("axis"))]


def _compress_emit(ctx):
    x, cond = ctx.inputs
    axis, (outer, dim, inner) = _compress_layout(ctx)
    rank = len(_compress_shape(ctx, 0))
    shape = _compress_shape(ctx, dim)
    record = ctx.dims(0)
    call = checked(f"aotc_compress({ctx.y(0)}, {ctx.x(0)}, {ctx.x(1)}, {cond.numel}, {outer}, {dim}, "
                   f"{inner}, {width(x.dtype)}, {rank}, {c_ints(shape)}, {axis}, {record or 'aotc_dims_'})")
    if record is not None:
        return call
    # a constant condition: the shape is static, the dims go nowhere
    return "{\n  int64_t aotc_dims_[" + str(rank) + "];\n  " + call + "\n}"


# ---- Unique -------------------------------------------------------------------------------

UNIQUE_DYNAMIC = (0, 1, 3)       # Y, indices, counts; inverse_indices has the input's extent


def _unique_layout(ctx):
    """(axis or None, (outer, dim, inner) of the input around it)."""
    ctx.require_inputs(1)
    ctx.require_dtype(0, ALL_TYPES)
    x = ctx.inputs[0]
    if int(ctx.attr("sorted", 1)) not in (0, 1):
        raise ctx.fail(f"sorted {ctx.attr('sorted')}; expected 0 or 1")
    if ctx.attr("axis") is None:
        return None, (1, x.numel, 1)
    axis = ctx.axis(ctx.attr("axis"), x.rank)
    return axis, (numel(x.shape[:axis]), x.shape[axis], numel(x.shape[axis + 1:]))


def _unique_y_shape(ctx, count):
    x = ctx.inputs[0]
    axis, _ = _unique_layout(ctx)
    return (count,) if axis is None else x.shape[:axis] + (count,) + x.shape[axis + 1:]


def _unique_infer(ctx):
    _, (_, dim, _) = _unique_layout(ctx)
    x = ctx.inputs[0]
    i64 = np.dtype(np.int64)
    return [TensorType(x.dtype, _unique_y_shape(ctx, dim)), TensorType(i64, (dim,)),
            TensorType(i64, (dim,)), TensorType(i64, (dim,))]


def _unique_evaluate(ctx, arrays):
    x = arrays[0]
    axis, _ = _unique_layout(ctx)
    y, first, inverse, counts = np.unique(x, True, True, True, axis=axis)
    inverse = inverse.reshape(-1)
    if not int(ctx.attr("sorted", 1)):
        order = np.argsort(first, kind="stable")
        position = np.empty_like(order)
        position[order] = np.arange(order.size)
        first, counts, inverse = first[order], counts[order], position[inverse]
        y = np.take(x.reshape(-1) if axis is None else x, first, axis=0 if axis is None else axis)
    return [y, first.astype(np.int64), inverse.astype(np.int64), counts.astype(np.int64)]


def _unique_scratch(ctx):
    _, (_, dim, _) = _unique_layout(ctx)
    return 8 * (4 * dim + 1)


def _unique_emit(ctx):
    x = ctx.inputs[0]
    axis, (outer, dim, inner) = _unique_layout(ctx)
    present = [k < len(ctx.node.outputs) and bool(ctx.node.outputs[k]) for k in range(4)]
    out = [ctx.y(k) if present[k] else "NULL" for k in range(4)]
    y_dims = [str(d) for d in _unique_y_shape(ctx, dim)]
    y_dims[0 if axis is None else axis] = "aotc_count_"
    stores = [_store_dims(ctx, 0, y_dims), _store_dims(ctx, 1, ["aotc_count_"]),
              _store_dims(ctx, 3, ["aotc_count_"])]
    call = (f"aotc_unique({out[0]}, {out[1]}, {out[2]}, {out[3]}, {ctx.x(0)}, {outer}, {dim}, {inner}, "
            f"{type_code(x.dtype)}, {width(x.dtype)}, {int(ctx.attr('sorted', 1))}, (int64_t *){ctx.scratch})")
    stores = " ".join(s for s in stores if s)
    if not stores:
        return f"(void){call};"
    return "{\n  int64_t aotc_count_ = " + call + ";\n  " + stores + "\n}"


OPS = [
    OpDef("NonZero", _nonzero_infer, _nonzero_emit, _nonzero_evaluate, since=9, supports_exact=True,
          outputs_data_dependent=True, checked_through=28),
    OpDef("Compress", _compress_infer, _compress_emit, _compress_evaluate, since=9, supports_exact=True,
          outputs_data_dependent=_compress_is_dynamic, checked_through=28),
    OpDef("Unique", _unique_infer, _unique_emit, _unique_evaluate, scratch=_unique_scratch, since=11,
          supports_exact=True, outputs_data_dependent=lambda ctx: UNIQUE_DYNAMIC, checked_through=28),
]
