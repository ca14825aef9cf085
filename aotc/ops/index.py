"""Index and scatter operators: GatherElements, GatherND, ScatterElements (and the
deprecated Scatter), ScatterND and TensorScatter.

Each is one call into runtime_c/aotc_index.h with the shapes baked in. The kernels
check every index at run time and return AOTC_ERR_INDEX before writing anything when
one is out of range; indices known at compile time are checked here instead. Scatters
first copy the data into the output (memmove: the plan may give the output the data's
own block) and then write the updates in row-major order, so repeated indices resolve
as in the ONNX reference.
"""
import math

import numpy as np

from .. import dtypes
from .base import OpDef, TensorType, c_ints, strides

INDEX_TYPES = (np.int32, np.int64)
MAX_RANK = 16                     # AOTC_INDEX_MAX_RANK
REDUCTIONS = {"none": 0, "add": 1, "mul": 2, "max": 3, "min": 4}
_TYPE_CODES = {"float32": 1, "float64": 2, "float16": 3, "bfloat16": 4, "int8": 5, "int16": 6,
               "int32": 7, "int64": 8, "uint8": 9, "uint16": 10, "uint32": 11, "uint64": 12, "bool": 13}


def type_code(dtype):
    """The AOTC_T_* code of an element type (runtime_c/aotc_index.h)."""
    return _TYPE_CODES[np.dtype(dtype).name]


def width(dtype):
    return np.dtype(dtype).itemsize


def numel(shape):
    return math.prod(int(d) for d in shape)


def checked(call):
    """A kernel call returning AOTC_OK or AOTC_ERR_INDEX, as one statement."""
    return f"if ({call} != AOTC_OK) return AOTC_ERR_INDEX;"


def copy_into_output(ctx, i=0):
    """The output starts as a copy of input i (a no-op when the plan aliased them)."""
    t = ctx.inputs[i]
    return f"memmove({ctx.y(0)}, {ctx.x(i)}, {t.nbytes});" if t.nbytes else ""


def check_known_indices(ctx, i, dim, what="index"):
    """Indices known at compile time must be in [-dim, dim)."""
    value = ctx.inputs[i].value
    if value is not None and value.size:
        lo, hi = int(value.min()), int(value.max())
        if lo < -dim or hi >= dim:
            raise ctx.fail(f"{what} {lo if lo < -dim else hi} is out of range [{-dim}, {dim})")


def wrap(indices, dim):
    indices = np.asarray(indices).astype(np.int64)
    if indices.size and (indices.min() < -dim or indices.max() >= dim):
        raise IndexError(f"index out of range [{-dim}, {dim})")
    return np.where(indices < 0, indices + dim, indices)


def _reduction(ctx):
    reduction = ctx.attr("reduction", "none")
    if isinstance(reduction, bytes):
        reduction = reduction.decode()
    allowed = ("none",) if ctx.node.op_type == "Scatter" or ctx.opset < 16 else \
        ("none", "add", "mul") if ctx.opset < 18 else tuple(REDUCTIONS)
    if reduction not in allowed:
        raise ctx.fail(f"reduction {reduction!r} (opset {ctx.opset} allows {', '.join(allowed)})")
    return reduction


_UFUNCS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _apply_updates(out, where, updates, reduction):
    """out[where] op= updates, one update at a time in order (repeats accumulate)."""
    if reduction == "none":
        for k in range(updates.shape[0]):
            out[where[k]] = updates[k]
    else:
        for k in range(updates.shape[0]):
            out[where[k]] = _UFUNCS[reduction](out[where[k]], updates[k])


# ---- GatherElements / ScatterElements -------------------------------------------------

def _elements_axis(ctx):
    return ctx.axis(ctx.attr("axis", 0), ctx.inputs[0].rank)


def _check_elements(ctx, updates=None):
    data, indices = ctx.inputs[0], ctx.inputs[1]
    ctx.require_dtype(1, INDEX_TYPES)
    if data.rank == 0 or indices.rank != data.rank:
        raise ctx.fail(f"data (rank {data.rank}) and indices (rank {indices.rank}) need the same rank, 1 or more")
    if data.rank > MAX_RANK:
        raise ctx.unsupported(f"rank {data.rank} (at most {MAX_RANK})")
    axis = _elements_axis(ctx)
    for d in range(data.rank):
        if d != axis and indices.shape[d] > data.shape[d]:
            raise ctx.fail(f"indices shape {list(indices.shape)} exceeds data shape {list(data.shape)} "
                           f"in dim {d}")
    if updates is not None and tuple(updates.shape) != tuple(indices.shape):
        raise ctx.fail(f"updates shape {list(updates.shape)} differs from indices shape {list(indices.shape)}")
    if updates is not None and updates.dtype != data.dtype:
        raise ctx.fail(f"updates are {dtypes.name(updates.dtype)}, data is {dtypes.name(data.dtype)}")
    check_known_indices(ctx, 1, data.shape[axis])
    return axis


def _element_positions(ctx, indices, dim_size):
    """Full index tuples (one array per dim) addressing the data from `indices`."""
    axis = _elements_axis(ctx)
    grid = list(np.indices(indices.shape, sparse=False))
    grid[axis] = wrap(indices, dim_size)
    return grid


def _gather_elements_infer(ctx):
    ctx.require_inputs(2)
    _check_elements(ctx)
    return [TensorType(ctx.inputs[0].dtype, ctx.inputs[1].shape)]


def _gather_elements_evaluate(ctx, arrays):
    data, indices = arrays
    return [data[tuple(_element_positions(ctx, indices, data.shape[_elements_axis(ctx)]))]]


def _gather_elements_emit(ctx):
    data, indices = ctx.inputs
    if indices.numel == 0:
        return ""
    axis = _elements_axis(ctx)
    return checked(f"aotc_gather_elements({ctx.y(0)}, {ctx.x(0)}, {ctx.x(1)}, {width(indices.dtype)}, "
                   f"{data.rank}, {c_ints(indices.shape)}, {c_ints(strides(data.shape))}, {axis}, "
                   f"{data.shape[axis]}, {width(data.dtype)})")


def _scatter_elements_infer(ctx):
    ctx.require_inputs(3)
    _reduction(ctx)
    _check_elements(ctx, ctx.inputs[2])
    data = ctx.inputs[0]
    return [TensorType(data.dtype, data.shape)]


def _scatter_elements_evaluate(ctx, arrays):
    data, indices, updates = arrays
    out = data.copy()
    grid = _element_positions(ctx, indices, data.shape[_elements_axis(ctx)])
    where = list(zip(*(g.reshape(-1) for g in grid)))
    _apply_updates(out, where, updates.reshape(-1), _reduction(ctx))
    return [out]


def _scatter_elements_emit(ctx):
    data, indices, _ = ctx.inputs
    if indices.numel == 0:
        return copy_into_output(ctx)
    axis = _elements_axis(ctx)
    return copy_into_output(ctx) + "\n" + checked(
        f"aotc_scatter_elements({ctx.y(0)}, {ctx.x(2)}, {ctx.x(1)}, {width(indices.dtype)}, {data.rank}, "
        f"{c_ints(indices.shape)}, {c_ints(strides(data.shape))}, {axis}, {data.shape[axis]}, "
        f"{type_code(data.dtype)}, {width(data.dtype)}, {REDUCTIONS[_reduction(ctx)]})")


# ---- GatherND / ScatterND ---------------------------------------------------------------

def _nd_layout(ctx, batch_dims=0):
    """(k, data dims indexed by a tuple, their element strides within one batch)."""
    data, indices = ctx.inputs[0], ctx.inputs[1]
    ctx.require_dtype(1, (np.int64,))
    if indices.rank < 1:
        raise ctx.fail("indices need rank 1 or more")
    k = indices.shape[-1]
    if not 0 <= batch_dims < min(data.rank, indices.rank):
        raise ctx.fail(f"batch_dims {batch_dims} must be below the ranks of data ({data.rank}) "
                       f"and indices ({indices.rank})")
    if tuple(data.shape[:batch_dims]) != tuple(indices.shape[:batch_dims]):
        raise ctx.fail(f"batch dims differ: data {list(data.shape)}, indices {list(indices.shape)}")
    if k > data.rank - batch_dims:
        raise ctx.fail(f"index tuples of length {k} for data of rank {data.rank} "
                       f"with {batch_dims} batch dims")
    dims = data.shape[batch_dims:batch_dims + k]
    tuple_strides = strides(data.shape[batch_dims:])[:k]
    value = indices.value
    if value is not None and value.size and k:
        bounds = np.array(dims, np.int64)
        if np.any(value < -bounds) or np.any(value >= bounds):
            raise ctx.fail(f"an index tuple is out of range for dims {list(dims)}")
    return k, dims, tuple_strides


def _tuples(indices, dims):
    """Index tuples (n, k) wrapped into range."""
    flat = indices.reshape(numel(indices.shape[:-1]), len(dims)).astype(np.int64)
    return np.stack([wrap(flat[:, d], dim) for d, dim in enumerate(dims)], axis=1) if dims else flat


def _gather_nd_infer(ctx):
    ctx.require_inputs(2)
    data, indices = ctx.inputs
    b = int(ctx.attr("batch_dims", 0))
    k, _, _ = _nd_layout(ctx, b)
    return [TensorType(data.dtype, tuple(indices.shape[:-1]) + tuple(data.shape[b + k:]))]


def _gather_nd_evaluate(ctx, arrays):
    data, indices = arrays
    b = int(ctx.attr("batch_dims", 0))
    k = indices.shape[-1]
    batch = numel(data.shape[:b])
    flat_data = data.reshape((batch,) + data.shape[b:])
    tuples = _tuples(indices, data.shape[b:b + k]).reshape(batch, numel(indices.shape[b:-1]), k)
    out = [flat_data[i][tuple(tuples[i].T)] if k else     # k = 0: each tuple takes everything
           np.broadcast_to(flat_data[i], (tuples.shape[1],) + flat_data[i].shape) for i in range(batch)]
    shape = indices.shape[:-1] + data.shape[b + k:]
    return [np.asarray(out, data.dtype).reshape(shape)]


def _gather_nd_emit(ctx):
    data, indices = ctx.inputs
    y = ctx.outputs[0]
    b = int(ctx.attr("batch_dims", 0))
    k, dims, tuple_strides = _nd_layout(ctx, b)
    batch = numel(data.shape[:b])
    tuples = numel(indices.shape[b:-1])
    if batch * tuples == 0:
        return ""
    inner = numel(data.shape[b + k:]) if y.numel else 0
    return checked(f"aotc_gather_nd({ctx.y(0)}, {ctx.x(0)}, {ctx.x(1)}, {batch}, {tuples}, {k}, "
                   f"{c_ints(dims)}, {c_ints(tuple_strides)}, {numel(data.shape[b:])}, {inner}, "
                   f"{width(data.dtype)})")


def _scatter_nd_infer(ctx):
    ctx.require_inputs(3)
    _reduction(ctx)
    data, indices, updates = ctx.inputs
    k, _, _ = _nd_layout(ctx)
    want = tuple(indices.shape[:-1]) + tuple(data.shape[k:])
    if tuple(updates.shape) != want:
        raise ctx.fail(f"updates shape {list(updates.shape)}, expected {list(want)}")
    if updates.dtype != data.dtype:
        raise ctx.fail(f"updates are {dtypes.name(updates.dtype)}, data is {dtypes.name(data.dtype)}")
    return [TensorType(data.dtype, data.shape)]


def _scatter_nd_evaluate(ctx, arrays):
    data, indices, updates = arrays
    k = indices.shape[-1]
    out = data.copy()
    where = [tuple(t) for t in _tuples(indices, data.shape[:k])]
    _apply_updates(out, where, updates.reshape((len(where),) + data.shape[k:]), _reduction(ctx))
    return [out]


def _scatter_nd_emit(ctx):
    data, indices, _ = ctx.inputs
    k, dims, tuple_strides = _nd_layout(ctx)
    tuples = numel(indices.shape[:-1])
    if tuples == 0 or data.numel == 0:
        return copy_into_output(ctx)
    return copy_into_output(ctx) + "\n" + checked(
        f"aotc_scatter_nd({ctx.y(0)}, {ctx.x(2)}, {ctx.x(1)}, {tuples}, {k}, {c_ints(dims)}, "
        f"{c_ints(tuple_strides)}, {numel(data.shape[k:])}, {type_code(data.dtype)}, "
        f"{width(data.dtype)}, {REDUCTIONS[_reduction(ctx)]})")


# ---- TensorScatter ----------------------------------------------------------------------

def _tensor_scatter_spec(ctx):
    """(axis, circular)."""
    past, update = ctx.inputs[0], ctx.inputs[1]
    axis = ctx.axis(ctx.attr("axis", -2), past.rank)
    mode = ctx.attr("mode", "linear")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode not in ("linear", "circular"):
        raise ctx.fail(f"mode {mode!r}; expected 'linear' or 'circular'")
    if axis == 0:
        raise ctx.fail("axis 0 is the batch dimension; the sequence axis must come after it")
    if update.rank != past.rank or update.dtype != past.dtype or any(
            a != b for d, (a, b) in enumerate(zip(update.shape, past.shape)) if d != axis):
        raise ctx.fail(f"update {dtypes.name(update.dtype)} {list(update.shape)} does not fit past_cache "
                       f"{dtypes.name(past.dtype)} {list(past.shape)} outside axis {axis}")
    if update.shape[axis] > past.shape[axis]:
        raise ctx.fail(f"update has {update.shape[axis]} positions on axis {axis}, the cache {past.shape[axis]}")
    if ctx.has_input(2):
        ctx.require_dtype(2, (np.int64,))
        if tuple(ctx.inputs[2].shape) != (past.shape[0],):
            raise ctx.fail(f"write_indices shape {list(ctx.inputs[2].shape)}, expected [{past.shape[0]}]")
    return axis, mode == "circular"


def _tensor_scatter_infer(ctx):
    ctx.require_inputs(2, 3)
    _tensor_scatter_spec(ctx)
    return [TensorType(ctx.inputs[0].dtype, ctx.inputs[0].shape)]


def _tensor_scatter_evaluate(ctx, arrays):
    past, update = arrays[0], arrays[1]
    axis, circular = _tensor_scatter_spec(ctx)
    write = arrays[2] if len(arrays) > 2 and arrays[2] is not None else np.zeros(past.shape[0], np.int64)
    out = past.copy()
    max_seq, seq = past.shape[axis], update.shape[axis]
    for prefix in np.ndindex(*past.shape[:axis]):
        for s in range(seq):
            at = int(write[prefix[0]]) + s
            if circular:
                at %= max_seq
            elif not 0 <= at < max_seq:
                raise IndexError(f"write index {at} past the cache")
            out[prefix + (at,)] = update[prefix + (s,)]
    return [out]


def _tensor_scatter_emit(ctx):
    past, update = ctx.inputs[0], ctx.inputs[1]
    axis, circular = _tensor_scatter_spec(ctx)
    write = ctx.x(2) if ctx.has_input(2) else "NULL"
    return copy_into_output(ctx) + "\n" + checked(
        f"aotc_tensor_scatter({ctx.y(0)}, {ctx.x(1)}, {write}, {past.shape[0]}, "
        f"{numel(past.shape[1:axis])}, {past.shape[axis]}, {update.shape[axis]}, "
        f"{numel(past.shape[axis + 1:])}, {int(circular)}, {width(past.dtype)})")


def _op(op_type, infer, emit, evaluate, since, checked_through=28, writes_in_place=False):
    """Every operator here copies elements as they are (so is exact); the scatters may
    write into their data input's storage."""
    return OpDef(op_type, infer, emit, evaluate, since=since, checked_through=checked_through,
                 supports_exact=True, in_place_inputs=(0,) if writes_in_place else ())


_SCATTER_ELEMENTS = (_scatter_elements_infer, _scatter_elements_emit, _scatter_elements_evaluate)

OPS = [
    _op("GatherElements", _gather_elements_infer, _gather_elements_emit, _gather_elements_evaluate, since=11),
    _op("ScatterElements", *_SCATTER_ELEMENTS, since=11, writes_in_place=True),
    _op("Scatter", *_SCATTER_ELEMENTS, since=9, checked_through=10, writes_in_place=True),
    _op("GatherND", _gather_nd_infer, _gather_nd_emit, _gather_nd_evaluate, since=11),
    _op("ScatterND", _scatter_nd_infer, _scatter_nd_emit, _scatter_nd_evaluate, since=11, writes_in_place=True),
    _op("TensorScatter", _tensor_scatter_infer, _tensor_scatter_emit, _tensor_scatter_evaluate, since=24,
        writes_in_place=True),
]
