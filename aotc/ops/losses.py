"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (runtime_c/aotc_losses.h).

Both view the scores as [N, C, D] (D the product of the trailing dims) and the target
as [N, D]. SoftmaxCrossEntropyLoss takes the log-softmax over C into its scratch (in
the compute type; float32 for the 16-bit floats) and, when asked, into its second
output, then the negative log-likelihood of that. Targets are checked at run time: one
outside [0, C) that is not ignore_index makes the run return AOTC_ERR_INDEX.
"""
import math

import numpy as np

from .. import dtypes
from .base import OpDef, TensorType
from .unary import literal

REDUCTIONS = {"none": 0, "sum": 1, "mean": 2}
TARGET_TYPES = (np.int32, np.int64)


def _reduction(ctx):
    reduction = ctx.attr("reduction", "mean")
    if isinstance(reduction, bytes):
        reduction = reduction.decode()
    if reduction not in REDUCTIONS:
        raise ctx.fail(f"reduction {reduction!r} is not none, sum or mean")
    return reduction


def _dims(ctx):
    """(N, C, D) of the scores, with the inputs checked against each other."""
    x, target = ctx.inputs[0], ctx.inputs[1]
    if x.rank < 2:
        raise ctx.fail(f"the scores must be [N, C, ...], have shape {list(x.shape)}")
    n, c = x.shape[:2]
    if tuple(target.shape) != (n,) + tuple(x.shape[2:]):
        raise ctx.fail(f"target shape {list(target.shape)} must be the scores' shape "
                       f"{list(x.shape)} without axis 1")
    if ctx.has_input(2):
        w = ctx.inputs[2]
        if tuple(w.shape) != (c,) or w.dtype != x.dtype:
            raise ctx.fail(f"weight must be {dtypes.name(x.dtype)} [{c}], is "
                           f"{dtypes.name(w.dtype)} {list(w.shape)}")
    return int(n), int(c), math.prod(int(d) for d in x.shape[2:])


def _infer(ctx):
    ctx.require_inputs(2, 3)
    x = ctx.inputs[0]
    ctx.require_dtype(0, dtypes.FLOATS)
    ctx.require_dtype(1, TARGET_TYPES)
    _dims(ctx)
    shape = tuple(ctx.inputs[1].shape) if _reduction(ctx) == "none" else ()
    outputs = [TensorType(x.dtype, shape)]
    if ctx.node.op_type == "SoftmaxCrossEntropyLoss" and len(ctx.node.outputs) > 1:
        outputs.append(TensorType(x.dtype, x.shape))
    return outputs


# ---- numpy, for constant evaluation ---------------------------------------------------

def _log_softmax(x):
    shifted = x - np.max(x, axis=1, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))


def _nll(ctx, logp, target, weight):
    shape = logp.shape
    n, c, d = logp.shape[0], logp.shape[1], int(np.prod(logp.shape[2:], dtype=np.int64))
    logp = logp.reshape(n, c, d).astype(np.float64)
    target = target.reshape(n, d).astype(np.int64)
    ignore = ctx.attr("ignore_index")
    kept = np.ones_like(target, bool) if ignore is None else target != int(ignore)
    if np.any(kept & ((target < 0) | (target >= c))):
        raise ctx.fail(f"a target is outside [0, {c})")
    safe = np.where(kept, target, 0)
    w = np.where(kept, 1.0 if weight is None else weight.astype(np.float64)[safe], 0.0)
    picked = np.take_along_axis(logp, safe[:, None, :], axis=1)[:, 0, :]
    loss = -picked * w
    reduction = _reduction(ctx)
    if reduction == "none":
        return loss.reshape(target.shape[:1] + tuple(shape[2:]))
    with np.errstate(all="ignore"):
        return np.asarray(loss.sum() if reduction == "sum" else loss.sum() / w.sum())


def _evaluate(ctx, arrays):
    x = arrays[0]
    weight = arrays[2] if len(arrays) > 2 else None
    compute = x.astype(dtypes.compute_dtype(x.dtype))
    logp = _log_softmax(compute) if ctx.node.op_type == "SoftmaxCrossEntropyLoss" else compute
    out = [np.asarray(_nll(ctx, logp, arrays[1], weight)).astype(x.dtype)]
    if len(ctx.node.outputs) > 1:
        out.append(logp.astype(x.dtype))
    return out


# ---- C --------------------------------------------------------------------------------

def _call_args(ctx, logp):
    n, c, d = _dims(ctx)
    ignore = ctx.attr("ignore_index")
    weight = ctx.x(2) if ctx.has_input(2) else "NULL"
    is_64 = int(np.dtype(ctx.inputs[1].dtype) == np.int64)
    return (f"({logp}, {ctx.x(1)}, {is_64}, {weight}, {ctx.y(0)}, {n}, {c}, {d}, "
            f"{int(ignore is not None)}, {literal(np.int64, ignore or 0)}, "
            f"{REDUCTIONS[_reduction(ctx)]})")


def _nll_emit(ctx):
    short = dtypes.short(ctx.inputs[0].dtype)
    return f"if (aotc_nll_loss_{short}{_call_args(ctx, ctx.x(0))} != AOTC_OK) return AOTC_ERR_INDEX;"


def _sce_scratch(ctx):
    n, c, d = _dims(ctx)
    return n * c * d * dtypes.compute_dtype(ctx.inputs[0].dtype).itemsize


def _sce_emit(ctx):
    x = ctx.inputs[0]
    short = dtypes.short(x.dtype)
    n, c, d = _dims(ctx)
    if n * c * d == 0:    # nothing to normalize; the loss is still written
        return _nll_emit(ctx)
    compute = dtypes.c_type(dtypes.compute_dtype(x.dtype))
    logp = f"(({compute} *){ctx.scratch})"
    stored = ctx.y(1) if len(ctx.outputs) > 1 and ctx.node.outputs[1] else "NULL"
    return (f"aotc_log_softmax_axis1_{short}({ctx.x(0)}, {logp}, {stored}, {n}, {c}, {d});\n"
            f"if (aotc_nll_loss_ct_{short}{_call_args(ctx, logp)} != AOTC_OK) return AOTC_ERR_INDEX;")


OPS = [
    OpDef("NegativeLogLikelihoodLoss", _infer, _nll_emit, _evaluate, since=12, checked_through=28),
    OpDef("SoftmaxCrossEntropyLoss", _infer, _sce_emit, _evaluate, scratch=_sce_scratch, since=12,
          checked_through=28),
]
