"""Data movement: Transpose, Concat, Slice, Expand, Gather and Pad.

Transpose, Slice, Expand and each piece of a Concat are one strided N-d copy
(`aotc_copy_nd` in runtime_c/aotc_layout.h) whose shape and strides are worked out
here and collapsed to the fewest dimensions. Gather checks its indices at run time;
Pad maps every output position to a source position per dimension. Every operator
has a numpy `evaluate`, so shape computations through them fold at compile time.
"""
import numpy as np

from .base import OpDef, TensorType, broadcast_shapes, c_ints, strides

MAX_RANK = 16          # AOTC_LAYOUT_MAX_RANK
INDEX_TYPES = (np.int32, np.int64)


def collapse(shape, stride_lists):
    """Fewest dims that walk `shape` with each stride list: size-1 dims go, and
    neighbours merge where every stride list steps over both as one."""
    dims = [d for d in range(len(shape)) if shape[d] != 1]
    out = [int(shape[d]) for d in dims]
    strd = [[int(s[d]) for d in dims] for s in stride_lists]
    if not out:
        return [1], [[1] for _ in stride_lists]
    for i in range(len(out) - 1, 0, -1):
        if all(s[i - 1] == s[i] * out[i] for s in strd):
            out[i - 1:i + 1] = [out[i - 1] * out[i]]
            for s in strd:
                s[i - 1:i + 1] = [s[i]]
    return out, strd


def copy_call(ctx, dst, dst_strides, src, src_strides, shape, dtype):
    """One `aotc_copy_nd` statement; '' when there is nothing to copy."""
    if int(np.prod(shape, dtype=np.int64)) == 0:
        return ""
    shape, (ds, ss) = collapse(shape, [dst_strides, src_strides])
    if len(shape) > MAX_RANK:
        raise ctx.unsupported(f"a copy over {len(shape)} dimensions (at most {MAX_RANK})")
    return (f"aotc_copy_nd({ctx.pool}, {dst}, {c_ints(ds)}, {src}, {c_ints(ss)}, "
            f"{len(shape)}, {c_ints(shape)}, {np.dtype(dtype).itemsize});")


def _const_ints(ctx, i, what):
    """A compile-time int32/int64 input as a list of Python ints."""
    value = ctx.const_input(i, what)
    if np.dtype(value.dtype) not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise ctx.fail(f"{what} must be int32 or int64, is {value.dtype}")
    return [int(v) for v in value.reshape(-1)]


# ---- Transpose ----------------------------------------------------------------------

def _perm(ctx):
    rank = ctx.inputs[0].rank
    perm = ctx.attr("perm")
    perm = list(range(rank))[::-1] if perm is None else [int(p) for p in perm]
    if sorted(perm) != list(range(rank)):
        raise ctx.fail(f"perm {perm} is not a permutation of the {rank} axes")
    return perm


def _transpose_infer(ctx):
    ctx.require_inputs(1)
    x = ctx.inputs[0]
    return [TensorType(x.dtype, tuple(x.shape[p] for p in _perm(ctx)))]


def _transpose_emit(ctx):
    x, y = ctx.inputs[0], ctx.outputs[0]
    in_strides = strides(x.shape)
    return copy_call(ctx, ctx.y(0), strides(y.shape), ctx.x(0),
                     [in_strides[p] for p in _perm(ctx)], y.shape, y.dtype)


# ---- Concat -------------------------------------------------------------------------

def _concat_axis(ctx):
    if ctx.attr("axis") is None:
        raise ctx.fail("Concat needs the axis attribute")
    return ctx.axis(ctx.attr("axis"), ctx.inputs[0].rank)


def _concat_infer(ctx):
    if not ctx.inputs or any(t is None for t in ctx.inputs):
        raise ctx.fail("Concat needs at least one input and no omitted ones")
    first = ctx.inputs[0]
    axis = _concat_axis(ctx)
    total = 0
    for i, t in enumerate(ctx.inputs):
        if t.dtype != first.dtype:
            raise ctx.fail(f"input {i} is {t.dtype}, input 0 is {first.dtype}")
        if t.rank != first.rank or any(a != b for k, (a, b) in enumerate(zip(t.shape, first.shape))
                                       if k != axis):
            raise ctx.fail(f"input {i} has shape {list(t.shape)}, which does not fit "
                           f"{list(first.shape)} outside axis {axis}")
        total += t.shape[axis]
    shape = list(first.shape)
    shape[axis] = total
    return [TensorType(first.dtype, tuple(shape))]


def _concat_evaluate(ctx, arrays):
    return [np.concatenate(arrays, axis=_concat_axis(ctx))]


def _concat_emit(ctx):
    y = ctx.outputs[0]
    axis = _concat_axis(ctx)
    out_strides = strides(y.shape)
    lines, at = [], 0
    for i, t in enumerate(ctx.inputs):
        dst = f"{ctx.y(0)} + {at * out_strides[axis]}"
        lines.append(copy_call(ctx, dst, out_strides, ctx.x(i), strides(t.shape), t.shape, y.dtype))
        at += t.shape[axis]
    return "\n".join(line for line in lines if line)


# ---- Slice --------------------------------------------------------------------------

def _slice_params(ctx):
    """Per dim (start, step, count), clamped exactly as ONNX says."""
    x = ctx.inputs[0]
    if ctx.opset < 10:
        starts, ends = ctx.attr("starts"), ctx.attr("ends")
        if starts is None or ends is None:
            raise ctx.fail("Slice needs the starts and ends attributes")
        starts, ends = [int(v) for v in starts], [int(v) for v in ends]
        axes = ctx.attr("axes")
        axes = list(range(len(starts))) if axes is None else [int(a) for a in axes]
        steps = [1] * len(starts)
    else:
        ctx.require_inputs(3, 5)
        starts = _const_ints(ctx, 1, "starts")
        ends = _const_ints(ctx, 2, "ends")
        axes = _const_ints(ctx, 3, "axes") if ctx.has_input(3) else list(range(len(starts)))
        steps = _const_ints(ctx, 4, "steps") if ctx.has_input(4) else [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ctx.fail(f"starts, ends, axes and steps differ in length: "
                       f"{len(starts)}, {len(ends)}, {len(axes)}, {len(steps)}")
    params = [(0, 1, d) for d in x.shape]
    seen = set()
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis = ctx.axis(axis, x.rank)
        if axis in seen:
            raise ctx.fail(f"axis {axis} is sliced twice")
        seen.add(axis)
        if step == 0:
            raise ctx.fail("a step of 0")
        dim = x.shape[axis]
        start = start + dim if start < 0 else start
        end = end + dim if end < 0 else end
        if step > 0:
            start, end = min(max(start, 0), dim), min(max(end, 0), dim)
            count = max(0, (end - start + step - 1) // step)
        else:
            start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
            count = max(0, (start - end + (-step) - 1) // (-step))
        params[axis] = (start, step, count)
    return params


def _slice_infer(ctx):
    x = ctx.inputs[0]
    if x is None:
        raise ctx.fail("input 0 is required")
    return [TensorType(x.dtype, tuple(c for _, _, c in _slice_params(ctx)))]


def _slice_evaluate(ctx, arrays):
    index = tuple(np.arange(count, dtype=np.int64) * step + start for start, step, count in
                  _slice_params(ctx))
    return [arrays[0][np.ix_(*index)] if index else arrays[0].copy()]


def _slice_emit(ctx):
    x, y = ctx.inputs[0], ctx.outputs[0]
    in_strides = strides(x.shape)
    params = _slice_params(ctx)
    offset = sum(start * s for (start, _, count), s in zip(params, in_strides) if count)
    src_strides = [step * s for (_, step, _), s in zip(params, in_strides)]
    return copy_call(ctx, ctx.y(0), strides(y.shape), f"{ctx.x(0)} + {offset}", src_strides,
                     y.shape, y.dtype)


# ---- Expand -------------------------------------------------------------------------

def _expand_infer(ctx):
    ctx.require_inputs(2)
    x = ctx.inputs[0]
    shape = [int(d) for d in ctx.const_input(1, "shape").reshape(-1)]
    return [TensorType(x.dtype, broadcast_shapes(ctx, x.shape, shape))]


def _expand_evaluate(ctx, arrays):
    shape = broadcast_shapes(ctx, arrays[0].shape, [int(d) for d in arrays[1].reshape(-1)])
    return [np.broadcast_to(arrays[0], shape).copy()]


def _expand_emit(ctx):
    x, y = ctx.inputs[0], ctx.outputs[0]
    padded = (1,) * (y.rank - x.rank) + tuple(x.shape)
    src = [0 if padded[d] == 1 and y.shape[d] != 1 else s for d, s in enumerate(strides(padded))]
    return copy_call(ctx, ctx.y(0), strides(y.shape), ctx.x(0), src, y.shape, y.dtype)


# ---- Gather -------------------------------------------------------------------------

def _gather_axis(ctx):
    return ctx.axis(ctx.attr("axis", 0), ctx.inputs[0].rank)


def _gather_infer(ctx):
    ctx.require_inputs(2)
    data, indices = ctx.inputs
    ctx.require_dtype(1, INDEX_TYPES)
    if data.rank == 0:
        raise ctx.fail("Gather needs data of rank 1 or more")
    axis = _gather_axis(ctx)
    dim = data.shape[axis]
    if indices.value is not None and indices.value.size:
        lo, hi = int(indices.value.min()), int(indices.value.max())
        if lo < -dim or hi >= dim:
            raise ctx.fail(f"index {lo if lo < -dim else hi} is out of range for axis {axis} "
                           f"of size {dim}")
    shape = data.shape[:axis] + tuple(indices.shape) + data.shape[axis + 1:]
    return [TensorType(data.dtype, shape)]


def _gather_evaluate(ctx, arrays):
    return [np.take(arrays[0], arrays[1].astype(np.int64), axis=_gather_axis(ctx))]


def _gather_emit(ctx):
    data, indices = ctx.inputs
    y = ctx.outputs[0]
    axis = _gather_axis(ctx)
    outer = int(np.prod(data.shape[:axis], dtype=np.int64))
    inner = int(np.prod(data.shape[axis + 1:], dtype=np.int64))
    if indices.numel == 0:
        return ""
    if y.numel == 0:   # nothing to move, but indices are still checked
        outer = inner = 0
    return (f"if (aotc_gather({ctx.y(0)}, {ctx.x(0)}, {ctx.x(1)}, {np.dtype(indices.dtype).itemsize}, "
            f"{indices.numel}, {outer}, {data.shape[axis]}, {inner}, {np.dtype(y.dtype).itemsize}) != AOTC_OK) "
            f"return AOTC_ERR_INDEX;")


# ---- Pad ----------------------------------------------------------------------------

PAD_MODES = {"constant": 0, "reflect": 1, "edge": 2, "wrap": 3}


def _pad_spec(ctx):
    """(mode, pads per dim as (begin, end))."""
    x = ctx.inputs[0]
    mode = ctx.attr("mode", "constant")
    if mode not in PAD_MODES or (mode == "wrap" and ctx.opset < 19):
        raise ctx.unsupported(f"Pad mode {mode!r} (supported: constant, reflect, edge; wrap from opset 19)")
    if ctx.opset < 11:
        pads = ctx.attr("pads", ctx.attr("paddings"))
        if pads is None:
            raise ctx.fail("Pad needs the pads attribute")
        pads = [int(p) for p in pads]
        axes = list(range(x.rank))
    else:
        ctx.require_inputs(2, 4)
        pads = _const_ints(ctx, 1, "pads")
        axes = list(range(x.rank))
        if ctx.has_input(3):
            if ctx.opset < 18:
                raise ctx.fail("the axes input of Pad exists from opset 18")
            axes = [ctx.axis(a, x.rank) for a in _const_ints(ctx, 3, "axes")]
            if len(set(axes)) != len(axes):
                raise ctx.fail(f"axes {axes} name a dimension twice")
    if len(pads) != 2 * len(axes):
        raise ctx.fail(f"{len(pads)} pads for {len(axes)} axes (need twice as many)")
    per_dim = [(0, 0)] * x.rank
    for i, axis in enumerate(axes):
        per_dim[axis] = (pads[i], pads[i + len(axes)])
    for axis, (begin, end) in enumerate(per_dim):
        kept = x.shape[axis] + min(begin, 0) + min(end, 0)
        if kept < 0:
            raise ctx.fail(f"pads {begin}, {end} crop more than axis {axis} of size {x.shape[axis]} holds")
        if mode != "constant" and kept == 0 and (begin > 0 or end > 0):
            raise ctx.fail(f"{mode} padding of axis {axis}, which has no elements")
        if mode == "reflect" and max(begin, end) > kept - 1:
            raise ctx.fail(f"reflect padding {max(begin, end)} of axis {axis} exceeds its size "
                           f"{kept} minus 1")
    return mode, per_dim


def _pad_value(ctx, arrays=None):
    """The constant as a numpy scalar of the data type (a compile-time one), or None
    when it is a run-time input."""
    dtype = np.dtype(ctx.inputs[0].dtype)
    if ctx.opset < 11:
        return np.array(ctx.attr("value", 0.0)).astype(dtype)
    if not ctx.has_input(2):
        return np.zeros((), dtype)
    value = arrays[2] if arrays is not None else ctx.inputs[2].value
    return None if value is None else np.asarray(value).reshape(-1)[0].astype(dtype)


def _pad_infer(ctx):
    x = ctx.inputs[0]
    if x is None:
        raise ctx.fail("input 0 is required")
    if ctx.opset >= 11 and ctx.has_input(2):
        c = ctx.inputs[2]
        if c.numel != 1 or c.dtype != x.dtype:
            raise ctx.fail(f"constant_value must be one {x.dtype} element, is {c.dtype} {list(c.shape)}")
    _, pads = _pad_spec(ctx)
    return [TensorType(x.dtype, tuple(d + b + e for d, (b, e) in zip(x.shape, pads)))]


def _pad_evaluate(ctx, arrays):
    mode, pads = _pad_spec(ctx)
    x = arrays[0][tuple(slice(-min(b, 0), d + min(e, 0)) for d, (b, e) in zip(arrays[0].shape, pads))]
    width = [(max(b, 0), max(e, 0)) for b, e in pads]
    if mode == "constant":
        return [np.pad(x, width, mode="constant", constant_values=_pad_value(ctx, arrays))]
    return [np.pad(x, width, mode=mode)]


def _pad_emit(ctx):
    x, y = ctx.inputs[0], ctx.outputs[0]
    if y.numel == 0:
        return ""
    mode, pads = _pad_spec(ctx)
    value = _pad_value(ctx)
    value_ptr = ctx.x(2) if value is None else ctx.const(np.asarray(value).reshape(1))
    # dims that neither pad nor crop merge into their outer neighbour when it is unpadded too
    out_shape, in_strides, in_start, in_len, begin = [], [], [], [], []
    for d, ((b, e), stride) in enumerate(zip(pads, strides(x.shape))):
        dim_in = x.shape[d]
        row = (dim_in + b + e, stride, -min(b, 0), dim_in + min(b, 0) + min(e, 0), max(b, 0))
        if out_shape and b == e == 0 and begin[-1] == 0 and in_len[-1] == out_shape[-1] \
                and in_start[-1] == 0 and in_strides[-1] == stride * dim_in:
            out_shape[-1] *= dim_in
            in_len[-1] *= dim_in
            in_strides[-1] = stride
            continue
        for lst, v in zip((out_shape, in_strides, in_start, in_len, begin), row):
            lst.append(v)
    if not out_shape:
        out_shape, in_strides, in_start, in_len, begin = [1], [1], [0], [1], [0]
    if len(out_shape) > MAX_RANK:
        raise ctx.unsupported(f"Pad over {len(out_shape)} dimensions (at most {MAX_RANK})")
    return (f"aotc_pad({ctx.pool}, {ctx.y(0)}, {ctx.x(0)}, {value_ptr}, {PAD_MODES[mode]}, "
            f"{len(out_shape)}, {c_ints(out_shape)}, {c_ints(in_strides)}, {c_ints(in_start)}, "
            f"{c_ints(in_len)}, {c_ints(begin)}, {np.dtype(y.dtype).itemsize});")


# Transpose and Pad at opsets 23-28 only add element types; Concat, Slice, Expand and
# Gather have not changed since opset 13.
OPS = [
    OpDef("Transpose", _transpose_infer, _transpose_emit,
          lambda ctx, a: [np.transpose(a[0], _perm(ctx))], since=1, checked_through=28,
          supports_exact=True),
    OpDef("Concat", _concat_infer, _concat_emit, _concat_evaluate, since=1, supports_exact=True),
    OpDef("Slice", _slice_infer, _slice_emit, _slice_evaluate, since=1, supports_exact=True),
    OpDef("Expand", _expand_infer, _expand_emit, _expand_evaluate, since=8, supports_exact=True),
    OpDef("Gather", _gather_infer, _gather_emit, _gather_evaluate, since=1, supports_exact=True),
    OpDef("Pad", _pad_infer, _pad_emit, _pad_evaluate, since=2, checked_through=28,
          supports_exact=True),
]
