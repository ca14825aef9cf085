"""RMSNormalization, InstanceNormalization, GroupNormalization, LpNormalization,
MeanVarianceNormalization and LRN, for float, double, float16 and bfloat16.

All but LRN are one kernel (aotc_norm_set, runtime_c/aotc_norm_sets.h): the input seen
as kept dims times reduced dims, each dim given as (size, stride in x, stride in the
scale and bias), a statistic per kept index, every element of its set rewritten.
Computed in double and rounded once, as close to the ONNX reference as it gets.
"""
import numpy as np

from .. import dtypes
from ._kinds import c_kind, struct_call
from .base import OpDef, TensorType, c_double, strides

FLOATS = tuple(dtypes.FLOATS)
RANK_MAX = 8          # AOTC_NORM_SET_RANK


def _prod(dims):
    return int(np.prod(dims, dtype=np.int64))


def norm_set(ctx, mode, kept, reduced, scale=None, bias=None, eps=0.0, extra=None):
    """The aotc_norm_set call for input 0 into output 0. kept, reduced: lists of
    (size, x stride, parameter stride); scale, bias: input indices or None; extra: more
    struct fields (the running statistics of BatchNormalization)."""
    if ctx.outputs[0].numel == 0:
        return ""
    if len(kept) > RANK_MAX or len(reduced) > RANK_MAX:
        raise ctx.unsupported(f"a normalization over {len(kept)} kept and {len(reduced)} "
                              f"reduced dims (at most {RANK_MAX} each)")
    kept = kept or [(1, 0, 0)]
    reduced = reduced or [(1, 0, 0)]
    fields = {
        "x": ctx.x(0), "y": ctx.y(0),
        "scale": ctx.x(scale) if scale is not None else "NULL",
        "bias": ctx.x(bias) if bias is not None else "NULL",
        "kind": c_kind(ctx.inputs[0].dtype), "mode": f"AOTC_NORM_{mode}",
        "kept_rank": len(kept), "red_rank": len(reduced),
        "kept_shape": [d[0] for d in kept], "kept_x": [d[1] for d in kept],
        "kept_p": [d[2] for d in kept],
        "red_shape": [d[0] for d in reduced], "red_x": [d[1] for d in reduced],
        "red_p": [d[2] for d in reduced],
        "eps": c_double(np.float32(eps)),
    }
    fields.update(extra or {})
    return struct_call("aotc_norm_set_args", "aotc_norm_set", fields, [ctx.pool])


def _dims(shape, axes, param_strides=None):
    """(size, x stride, parameter stride) of the given axes of a row-major shape."""
    st = strides(shape)
    param_strides = param_strides or {}
    return [(int(shape[a]), st[a], param_strides.get(a, 0)) for a in axes]


def _require_same_type(ctx, indices):
    dt = ctx.require_dtype(0, FLOATS)
    for i in indices:
        if ctx.has_input(i) and np.dtype(ctx.inputs[i].dtype) != dt:
            raise ctx.unsupported(f"input {i} has element type {dtypes.name(ctx.inputs[i].dtype)}, "
                                  f"the input {dtypes.name(dt)} (one type for all only)")
    return dt


def _same_shape(ctx):
    x = ctx.inputs[0]
    return [TensorType(x.dtype, x.shape)]


def _check_channel_params(ctx, indices, count, what="channels"):
    for i in indices:
        if ctx.inputs[i].numel != count or ctx.inputs[i].rank != 1:
            raise ctx.fail(f"input {i} has shape {list(ctx.inputs[i].shape)}, expected "
                           f"[{count}] (one value per {what[:-1]})")


# ---- RMSNormalization ------------------------------------------------------------------

def _rms_axis(ctx):
    return ctx.axis(ctx.attr("axis", -1), ctx.inputs[0].rank)


def _rms_infer(ctx):
    ctx.require_inputs(2)
    _require_same_type(ctx, [1])
    x, w = ctx.inputs
    normalized = x.shape[_rms_axis(ctx):]
    if w.rank > len(normalized) or any(d not in (1, n) for d, n in
                                       zip(reversed(w.shape), reversed(normalized))):
        raise ctx.fail(f"scale of shape {list(w.shape)} does not broadcast to the normalized "
                       f"shape {list(normalized)}")
    return _same_shape(ctx)


def _rms_emit(ctx):
    x, w = ctx.inputs
    axis = _rms_axis(ctx)
    normalized = x.shape[axis:]
    padded = (1,) * (len(normalized) - w.rank) + tuple(w.shape)
    w_strides = {axis + k: (0 if n == 1 else s) for k, (n, s) in enumerate(zip(padded, strides(padded)))}
    return norm_set(ctx, "RMS", _dims(x.shape, range(axis)),
                    _dims(x.shape, range(axis, x.rank), w_strides), scale=1,
                    eps=ctx.attr("epsilon", 1e-5))


# ---- InstanceNormalization, GroupNormalization -------------------------------------------

def _channels_infer(ctx):
    ctx.require_inputs(3)
    _require_same_type(ctx, [1, 2])
    if ctx.inputs[0].rank < 2:
        raise ctx.fail(f"input of shape {list(ctx.inputs[0].shape)} has no channel dim")
    return _same_shape(ctx)


def _instance_infer(ctx):
    _channels_infer(ctx)
    _check_channel_params(ctx, (1, 2), ctx.inputs[0].shape[1])
    return _same_shape(ctx)


def _instance_emit(ctx):
    shape = ctx.inputs[0].shape
    return norm_set(ctx, "MEANVAR", _dims(shape, (0, 1), {1: 1}), _dims(shape, range(2, len(shape))),
                    scale=1, bias=2, eps=ctx.attr("epsilon", 1e-5))


def _groups(ctx):
    channels, groups = ctx.inputs[0].shape[1], ctx.attr("num_groups")
    if groups is None or groups <= 0 or channels % groups:
        raise ctx.fail(f"num_groups={groups} does not divide the {channels} channels")
    return int(groups)


def _group_infer(ctx):
    _channels_infer(ctx)
    groups = _groups(ctx)
    per_channel = ctx.opset >= 21
    _check_channel_params(ctx, (1, 2), ctx.inputs[0].shape[1] if per_channel else groups,
                          "channels" if per_channel else "groups")
    return _same_shape(ctx)


def _group_emit(ctx):
    shape = ctx.inputs[0].shape
    groups = _groups(ctx)
    per_group = shape[1] // groups
    spatial = _prod(shape[2:])
    split = (shape[0], groups, per_group, spatial)     # channels split into groups
    per_channel = ctx.opset >= 21
    params = {1: per_group if per_channel else 1, 2: 1 if per_channel else 0}
    return norm_set(ctx, "MEANVAR", _dims(split, (0, 1), params), _dims(split, (2, 3), params),
                    scale=1, bias=2, eps=ctx.attr("epsilon", 1e-5))


# ---- LpNormalization, MeanVarianceNormalization -----------------------------------------

def _lp_infer(ctx):
    ctx.require_inputs(1)
    ctx.require_dtype(0, FLOATS)
    ctx.axis(ctx.attr("axis", -1), ctx.inputs[0].rank)
    if ctx.attr("p", 2) not in (1, 2):
        raise ctx.fail(f"p={ctx.attr('p')}; LpNormalization takes p 1 or 2")
    return _same_shape(ctx)


def _lp_emit(ctx):
    shape = ctx.inputs[0].shape
    axis = ctx.axis(ctx.attr("axis", -1), len(shape))
    return norm_set(ctx, f"L{ctx.attr('p', 2)}", _dims(shape, [a for a in range(len(shape)) if a != axis]),
                    _dims(shape, [axis]))


def _mvn_axes(ctx):
    rank = ctx.inputs[0].rank
    axes = sorted({ctx.axis(a, rank) for a in ctx.attr("axes", [0, 2, 3])})
    return axes


def _mvn_infer(ctx):
    ctx.require_inputs(1)
    ctx.require_dtype(0, FLOATS)
    _mvn_axes(ctx)
    return _same_shape(ctx)


def _mvn_emit(ctx):
    shape = ctx.inputs[0].shape
    axes = _mvn_axes(ctx)
    return norm_set(ctx, "MVN", _dims(shape, [a for a in range(len(shape)) if a not in axes]),
                    _dims(shape, axes), eps=1e-9)


# ---- LRN ---------------------------------------------------------------------------------

def _lrn_infer(ctx):
    ctx.require_inputs(1)
    ctx.require_dtype(0, FLOATS)
    size = ctx.attr("size")
    if size is None or size <= 0:
        raise ctx.fail(f"size={size}; LRN needs a positive size")
    if ctx.inputs[0].rank < 3:
        raise ctx.fail(f"input of shape {list(ctx.inputs[0].shape)}; LRN takes [N, C, D1, ...]")
    return _same_shape(ctx)


def _lrn_emit(ctx):
    shape = ctx.inputs[0].shape
    if ctx.outputs[0].numel == 0:
        return ""
    size = int(ctx.attr("size"))
    fields = {"x": ctx.x(0), "y": ctx.y(0), "kind": c_kind(ctx.inputs[0].dtype),
              "n": shape[0], "c": shape[1], "inner": _prod(shape[2:]),
              "before": (size - 1) // 2, "after": size // 2,
              "alpha_over_size": c_double(np.float32(ctx.attr("alpha", 1e-4)) / size),
              "beta": c_double(np.float32(ctx.attr("beta", 0.75))),
              "bias": c_double(np.float32(ctx.attr("bias", 1.0)))}
    return struct_call("aotc_lrn_args", "aotc_lrn", fields, [ctx.pool])


OPS = [
    OpDef("RMSNormalization", _rms_infer, _rms_emit, since=23, checked_through=28),
    OpDef("InstanceNormalization", _instance_infer, _instance_emit, since=1, checked_through=28),
    OpDef("GroupNormalization", _group_infer, _group_emit, since=18, checked_through=28),
    OpDef("LpNormalization", _lp_infer, _lp_emit, since=1, checked_through=28),
    OpDef("MeanVarianceNormalization", _mvn_infer, _mvn_emit, since=9, checked_through=28),
    OpDef("LRN", _lrn_infer, _lrn_emit, since=1, checked_through=28),
]
