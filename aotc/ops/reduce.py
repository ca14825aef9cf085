"""Reductions: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceSumSquare,
ReduceL1, ReduceL2, ReduceLogSumExp.

All share one kernel (runtime_c/aotc_reduce.h): the input shape is collapsed to
alternating runs of kept and reduced dims and walked once in memory order. The axes
are an attribute before the opset that made them an input (ReduceSum: 13, the others:
18); the input form must be a compile-time constant. `reduce_call` is also how the
global pools are emitted.
"""
import numpy as np

from .. import dtypes
from .base import OpDef, TensorType

FLOAT = (np.float32,)
INTEGER = (np.int64, np.int32)
MAX_RANK = 16
TASK_ELEMENTS = 32768     # input elements per task: enough to hide the dispatch


def _int_mean(x, axes, keepdims):
    s = np.sum(x, axis=axes, keepdims=keepdims, dtype=x.dtype)
    n = int(np.prod([x.shape[a] for a in axes], dtype=np.int64)) if axes else 1
    if n == 0:
        return np.zeros_like(s)
    return (np.sign(s) * (np.abs(s) // n)).astype(x.dtype)


def _mean(x, axes, keepdims):
    if x.dtype.kind in "iu":
        return _int_mean(x, axes, keepdims)
    return np.mean(x, axis=axes, keepdims=keepdims, dtype=x.dtype)


def _log_sum_exp(x, axes, keepdims):
    m = np.max(x, axis=axes, keepdims=True, initial=-np.inf)
    with np.errstate(all="ignore"):
        s = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m
    return s if keepdims else np.squeeze(s, axis=axes)


def _identity_of(x, high):
    if x.dtype.kind == "f":
        return np.inf if high else -np.inf
    info = np.iinfo(x.dtype)
    return info.max if high else info.min


# op type: (kernel name, since, opset where axes became an input, element types, numpy fn)
_TABLE = {
    "ReduceSum": ("sum", 1, 13, FLOAT + INTEGER,
                  lambda x, a, k: np.sum(x, axis=a, keepdims=k, dtype=x.dtype)),
    "ReduceMean": ("mean", 1, 18, FLOAT + INTEGER, _mean),
    "ReduceMax": ("max", 1, 18, FLOAT + INTEGER,
                  lambda x, a, k: np.max(x, axis=a, keepdims=k, initial=_identity_of(x, False))),
    "ReduceMin": ("min", 1, 18, FLOAT + INTEGER,
                  lambda x, a, k: np.min(x, axis=a, keepdims=k, initial=_identity_of(x, True))),
    "ReduceProd": ("prod", 1, 18, FLOAT + INTEGER,
                   lambda x, a, k: np.prod(x, axis=a, keepdims=k, dtype=x.dtype)),
    "ReduceSumSquare": ("sumsquare", 1, 18, FLOAT + INTEGER,
                        lambda x, a, k: np.sum(x * x, axis=a, keepdims=k, dtype=x.dtype)),
    "ReduceL1": ("l1", 1, 18, FLOAT + INTEGER,
                 lambda x, a, k: np.sum(np.abs(x), axis=a, keepdims=k, dtype=x.dtype)),
    "ReduceL2": ("l2", 1, 18, FLOAT,
                 lambda x, a, k: np.sqrt(np.sum(x * x, axis=a, keepdims=k, dtype=x.dtype))),
    "ReduceLogSumExp": ("logsumexp", 1, 18, FLOAT, _log_sum_exp),
}


def collapse(shape, reduced):
    """[(extent, is_reduced)] with size-1 dims dropped and equal neighbours merged;
    at least two entries (padded in front with kept dims of extent 1)."""
    dims = []
    for d, n in enumerate(shape):
        if n == 1:
            continue
        r = d in reduced
        if dims and dims[-1][1] == r:
            dims[-1] = (dims[-1][0] * int(n), r)
        else:
            dims.append((int(n), r))
    while len(dims) < 2:
        dims.insert(0, (1, False))
    return dims


def reduce_geometry(ctx, shape, reduced):
    """C expression of the aotc_reduce_geom for reducing `shape` over the axes `reduced`."""
    dims = collapse(shape, set(reduced))
    if len(dims) > MAX_RANK:
        raise ctx.unsupported(f"a reduction over {len(dims)} alternating kept/reduced "
                              f"dimension runs (at most {MAX_RANK})")
    ystride, acc = [], 1
    for n, r in reversed(dims):
        ystride.append(0 if r else acc)
        acc *= 1 if r else n
    ystride.reverse()
    numel = int(np.prod(shape, dtype=np.int64))
    count = int(np.prod([shape[a] for a in reduced], dtype=np.int64))
    per_index = max(numel // max(dims[0][0], 1), 1)
    chunk = dims[0][0] if dims[0][1] else max(1, -(-TASK_ELEMENTS // per_index))
    return (f"&(const aotc_reduce_geom){{.rank = {len(dims)}, "
            f".shape = {{{', '.join(str(n) for n, _ in dims)}}}, "
            f".ystride = {{{', '.join(str(s) for s in ystride)}}}, "
            f".count = {count}, .out_numel = {acc}, .chunk = {chunk}}}")


def reduce_call(ctx, kernel, shape, reduced):
    """One call of aotc_reduce_<kernel>_<type> from input 0 into output 0."""
    dt = ctx.inputs[0].dtype
    geom = reduce_geometry(ctx, shape, reduced)
    fn = f"aotc_reduce_{kernel}_{dtypes.short(dt)}"
    if kernel == "logsumexp":
        return f"{fn}({ctx.pool}, {geom}, {ctx.x(0)}, {ctx.y(0)}, {ctx.scratch});"
    return f"{fn}({ctx.pool}, {geom}, {ctx.x(0)}, {ctx.y(0)}, NULL);"


def _reduced_axes(ctx, axes_input_opset):
    """The normalized, sorted axes this node reduces (empty: none)."""
    rank = ctx.inputs[0].rank
    if ctx.opset < axes_input_opset:
        axes, noop = ctx.attr("axes"), False
    else:
        axes = ctx.const_input(1, "axes") if ctx.has_input(1) else None
        noop = bool(ctx.attr("noop_with_empty_axes", 0))
    if axes is None or len(axes) == 0:
        return () if noop else tuple(range(rank))
    normalized = sorted(ctx.axis(a, rank, "reduction axis") for a in np.asarray(axes).reshape(-1))
    if len(set(normalized)) != len(normalized):
        raise ctx.fail(f"axes {list(np.asarray(axes).reshape(-1))} repeat an axis")
    return tuple(normalized)


def _reduction(op_type):
    kernel, since, axes_input_opset, accepted, fn = _TABLE[op_type]

    def infer(ctx):
        ctx.require_inputs(1, 1 if ctx.opset < axes_input_opset else 2)
        ctx.require_dtype(0, accepted)
        if ctx.has_input(1) and np.dtype(ctx.inputs[1].dtype) != np.int64:
            raise ctx.fail(f"axes must be int64, not {dtypes.name(ctx.inputs[1].dtype)}")
        x = ctx.inputs[0]
        axes = _reduced_axes(ctx, axes_input_opset)
        keep = bool(ctx.attr("keepdims", 1))
        shape = tuple(1 if d in axes else n for d, n in enumerate(x.shape) if keep or d not in axes)
        return [TensorType(x.dtype, shape)]

    def evaluate(ctx, arrays):
        axes = _reduced_axes(ctx, axes_input_opset)
        with np.errstate(all="ignore"):
            y = fn(arrays[0], axes, bool(ctx.attr("keepdims", 1)))
        return [np.asarray(y).astype(arrays[0].dtype)]

    def emit(ctx):
        if ctx.outputs[0].numel == 0:
            return ""
        return reduce_call(ctx, kernel, ctx.inputs[0].shape, _reduced_axes(ctx, axes_input_opset))

    def scratch(ctx):
        return ctx.outputs[0].numel * 4 if kernel == "logsumexp" else 0

    return OpDef(op_type, infer, emit, evaluate, scratch=scratch, since=since,
                 supports_exact=kernel != "logsumexp")


OPS = [_reduction(name) for name in _TABLE]
