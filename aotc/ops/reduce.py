"""Reductions: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceSumSquare,
ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp.

All share one kernel (runtime_c/aotc_reduce.h): the input shape is collapsed to
alternating runs of kept and reduced dims and walked once in memory order. The axes
are an attribute before the opset that made them an input (ReduceSum: 13, the others:
18); the input form must be a compile-time constant. float16 and bfloat16 accumulate
in float (in scratch) and round once; integers wrap. A reduction over no elements
gives the identity (0, 1, the lowest or highest value, -inf for the logarithms).
`reduce_call` is also how the global pools are emitted.
"""
import numpy as np

from .. import dtypes
from .base import OpDef, TensorType

FLOAT = dtypes.FLOATS
ARITHMETIC_INTS = tuple(np.dtype(t) for t in (np.int64, np.int32, np.uint64, np.uint32))
ORDERED = FLOAT + ARITHMETIC_INTS + tuple(np.dtype(t) for t in (np.int8, np.uint8))
MAX_RANK = 16
TASK_ELEMENTS = 32768     # input elements per task: enough to hide the dispatch


def _compute(x):
    """x as the kernels compute it: 16-bit floats in float32."""
    return x.astype(dtypes.compute_dtype(x.dtype), copy=False)


def _sum(x, axes, keepdims):
    return np.sum(_compute(x), axis=axes, keepdims=keepdims, dtype=_compute(x).dtype)


def _mean(x, axes, keepdims):
    s = _sum(x, axes, keepdims)
    n = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    if x.dtype.kind not in "iu":
        return s / s.dtype.type(n) if n else np.full_like(s, np.nan)
    if n == 0:
        return np.zeros_like(s)
    if x.dtype.kind == "u":
        return s // s.dtype.type(n)
    return (np.sign(s) * (np.abs(s.astype(np.int64)) // n)).astype(x.dtype)   # truncates


def _l2(x, axes, keepdims):
    s = _sum(x * x, axes, keepdims)
    if x.dtype.kind in "iu":
        return np.where(s > 0, np.sqrt(np.maximum(s, 0).astype(np.float64)), 0).astype(x.dtype)
    return np.sqrt(s)


def _l1(x, axes, keepdims):
    return _sum(np.abs(_compute(x)), axes, keepdims)


def _log_sum(x, axes, keepdims):
    return np.log(_sum(x, axes, keepdims))


def _log_sum_exp(x, axes, keepdims):
    x = _compute(x)
    finite = np.where(np.isfinite(x), x, -np.inf)
    shift = np.max(finite, axis=axes, keepdims=True, initial=-np.inf)
    shift = np.where(shift == -np.inf, 0, shift).astype(x.dtype)
    s = np.log(np.sum(np.exp(x - shift), axis=axes, keepdims=True, dtype=x.dtype)) + shift
    return s if keepdims else np.squeeze(s, axis=axes)


def _extreme(x, high):
    """The identity of max (high=False) or min (high=True) for x's type."""
    if x.dtype == np.bool_:
        return high
    if x.dtype.kind in "iu":
        info = np.iinfo(x.dtype)
        return info.max if high else info.min
    return np.inf if high else -np.inf


def _max(x, axes, keepdims):
    x = _compute(x)
    return np.max(x, axis=axes, keepdims=keepdims, initial=_extreme(x, False))


def _min(x, axes, keepdims):
    x = _compute(x)
    return np.min(x, axis=axes, keepdims=keepdims, initial=_extreme(x, True))


def _prod(x, axes, keepdims):
    return np.prod(_compute(x), axis=axes, keepdims=keepdims, dtype=_compute(x).dtype)


# op type: (kernel name, opset where axes became an input, element types, numpy fn)
_TABLE = {
    "ReduceSum": ("sum", 13, FLOAT + ARITHMETIC_INTS, _sum),
    "ReduceMean": ("mean", 18, FLOAT + ARITHMETIC_INTS, _mean),
    "ReduceMax": ("max", 18, ORDERED + dtypes.BOOL, _max),
    "ReduceMin": ("min", 18, ORDERED + dtypes.BOOL, _min),
    "ReduceProd": ("prod", 18, FLOAT + ARITHMETIC_INTS, _prod),
    "ReduceSumSquare": ("sumsquare", 18, FLOAT + ARITHMETIC_INTS,
                        lambda x, a, k: _sum(_compute(x) * _compute(x), a, k)),
    "ReduceL1": ("l1", 18, FLOAT + ARITHMETIC_INTS, _l1),
    "ReduceL2": ("l2", 18, FLOAT + ARITHMETIC_INTS, _l2),
    "ReduceLogSum": ("logsum", 18, FLOAT, _log_sum),
    "ReduceLogSumExp": ("logsumexp", 18, FLOAT, _log_sum_exp),
}
# kernels made of correctly rounded operations only (the others need exact exp and log)
_EXACT_KERNELS = ("sum", "mean", "max", "min", "prod", "sumsquare", "l1", "l2")


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


def reduce_scratch_bytes(kernel, dtype, out_numel):
    """Workspace scratch of aotc_reduce_<kernel>_<type>: float accumulators for the
    16-bit floats, the per-output shifts of log-sum-exp."""
    arrays = (1 if kernel == "logsumexp" else 0) + (1 if np.dtype(dtype) in dtypes.HALVES else 0)
    return arrays * out_numel * np.dtype(dtypes.compute_dtype(dtype)).itemsize


def reduce_call(ctx, kernel, shape, reduced):
    """One call of aotc_reduce_<kernel>_<type> from input 0 into output 0 (in exact mode
    the logarithms take aotc's exact exp and log, which exist in float only)."""
    dt = ctx.inputs[0].dtype
    geom = reduce_geometry(ctx, shape, reduced)
    scratch = ctx.scratch if reduce_scratch_bytes(kernel, dt, 1) else "NULL"
    fn = f"aotc_reduce_{kernel}_{dtypes.short(dt)}"
    if ctx.exact and kernel not in _EXACT_KERNELS:
        fn += "_exact"
    return f"{fn}({ctx.pool}, {geom}, {ctx.x(0)}, {ctx.y(0)}, {scratch});"


def _exact_support(kernel):
    """OpDef.supports_exact: every kernel, but the logarithms only where they compute
    in float (aotc's exact exp and log)."""
    if kernel in _EXACT_KERNELS:
        return True
    return lambda ctx: dtypes.compute_dtype(ctx.inputs[0].dtype) == np.float32


def _reduced_axes(ctx, axes_input_opset):
    """The normalized, sorted axes this node reduces (empty: none)."""
    rank = ctx.inputs[0].rank
    if ctx.opset < axes_input_opset:
        axes, noop = ctx.attr("axes"), False
    else:
        axes = ctx.const_input(1, "axes") if ctx.has_input(1) else None
        noop = bool(ctx.attr("noop_with_empty_axes", 0))
    if axes is None or len(np.asarray(axes).reshape(-1)) == 0:
        return () if noop else tuple(range(rank))
    normalized = sorted(ctx.axis(a, rank, "reduction axis") for a in np.asarray(axes).reshape(-1))
    if len(set(normalized)) != len(normalized):
        raise ctx.fail(f"axes {list(np.asarray(axes).reshape(-1))} repeat an axis")
    return tuple(normalized)


def _reduction(op_type):
    kernel, axes_input_opset, accepted, fn = _TABLE[op_type]

    def infer(ctx):
        ctx.require_inputs(1, 1 if ctx.opset < axes_input_opset else 2)
        dt = np.dtype(ctx.inputs[0].dtype)
        if kernel.startswith("log") and dt in ARITHMETIC_INTS:
            raise ctx.unsupported(f"{op_type} of {dtypes.name(dt)}: only floating types "
                                  "(integer inputs were removed from the operator in opset 28)")
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
        return reduce_scratch_bytes(kernel, ctx.inputs[0].dtype, ctx.outputs[0].numel)

    return OpDef(op_type, infer, emit, evaluate, scratch=scratch, since=1, checked_through=28,
                 supports_exact=_exact_support(kernel))


OPS = [_reduction(name) for name in _TABLE]
