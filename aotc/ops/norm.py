"""BatchNormalization (inference), Softmax, LogSoftmax and LayerNormalization (fp32).

Kernels in runtime_c/aotc_norm.h. BatchNormalization with constant statistics (as in
every exported model) becomes one multiply-add per element: the per-channel scale and
shift are computed here, with the same float32 arithmetic the run-time path uses.
"""
import dataclasses

import numpy as np

from .. import dtypes
from ..ir import AOTC_DOMAIN
from .base import OpDef, TensorType, c_double, c_float
from .norms_extra import norm_set

FLOAT = (np.float32,)


def _prod(dims):
    return int(np.prod(dims, dtype=np.int64))


def _output_pointer(ctx, i):
    """C pointer of optional output i, or NULL when the node does not ask for it."""
    outs = ctx.node.outputs
    return ctx.y(i) if len(outs) > i and outs[i] else "NULL"


def _require_floats(ctx, indices):
    for i in indices:
        if ctx.has_input(i):
            ctx.require_dtype(i, FLOAT)


# ---- BatchNormalization ----------------------------------------------------------------

def _bn_layout(ctx):
    """(outer, channels, inner) of x, where channels is what the statistics index."""
    x = ctx.inputs[0]
    if ctx.opset < 9 and ctx.attr("spatial", 1) == 0:
        return x.shape[0], _prod(x.shape[1:]), 1
    return x.shape[0], x.shape[1], _prod(x.shape[2:])


def _bn_training(ctx):
    """True for the training form (opset 14 on): batch statistics, running ones out."""
    return ctx.opset >= 14 and bool(ctx.attr("training_mode", 0))


def _bn_infer(ctx):
    ctx.require_inputs(5)
    training = _bn_training(ctx)
    if training:
        ctx.require_dtype(0, dtypes.FLOATS)
        for i in range(1, 5):
            if np.dtype(ctx.inputs[i].dtype) != np.dtype(ctx.inputs[0].dtype):
                raise ctx.unsupported("BatchNormalization in training with statistics of "
                                      "another type than the input")
    else:
        _require_floats(ctx, range(5))
        if ctx.attr("training_mode", 0):
            raise ctx.unsupported("BatchNormalization with training_mode=1 before opset 14")
        if len([o for o in ctx.node.outputs if o]) > 1:
            raise ctx.unsupported("BatchNormalization with running-statistics outputs "
                                  "outside training mode")
    x = ctx.inputs[0]
    if x.rank < 2:
        raise ctx.fail(f"input of shape {list(x.shape)} has no channel dim")
    channels = _bn_layout(ctx)[1]
    for i, what in zip(range(1, 5), ("scale", "B", "mean", "var")):
        if ctx.inputs[i].numel != channels:
            raise ctx.fail(f"{what} has shape {list(ctx.inputs[i].shape)}, expected "
                           f"{channels} values (one per channel)")
    stats = TensorType(ctx.inputs[3].dtype, ctx.inputs[3].shape)
    return [TensorType(x.dtype, x.shape)] + ([stats, stats] if training else [])


def _bn_training_emit(ctx):
    """y from the batch's mean and variance; running statistics blended by momentum."""
    shape = ctx.inputs[0].shape
    st = [int(np.prod(shape[k + 1:], dtype=np.int64)) for k in range(len(shape))]
    reduced = [(shape[0], st[0], 0)] + [(shape[k], st[k], 0) for k in range(2, len(shape))]
    extra = {"mean_in": ctx.x(3), "var_in": ctx.x(4),
             "mean_out": _output_pointer(ctx, 1), "var_out": _output_pointer(ctx, 2),
             "momentum": c_double(np.float32(ctx.attr("momentum", 0.9)))}
    return norm_set(ctx, "MEANVAR", [(shape[1], st[1], 1)], reduced, scale=1, bias=2,
                    eps=ctx.attr("epsilon", 1e-5), extra=extra)


def _bn_coefficients(scale, bias, mean, var, eps):
    """Per-channel (a, b) with y = x * a + b, in float32 as the C kernel computes them."""
    f = np.float32
    scale, bias, mean, var = (np.asarray(v, f).reshape(-1) for v in (scale, bias, mean, var))
    a = scale / np.sqrt(var + f(eps))
    return a, bias - mean * a


def _bn_emit(ctx):
    if _bn_training(ctx):
        return _bn_training_emit(ctx)
    if ctx.outputs[0].numel == 0:
        return ""
    outer, channels, inner = _bn_layout(ctx)
    eps = ctx.attr("epsilon", 1e-5)
    shape = f"{outer}, {channels}, {inner}"
    if all(ctx.inputs[i].value is not None for i in range(1, 5)):
        a, b = _bn_coefficients(*(ctx.inputs[i].value for i in range(1, 5)), eps)
        return (f"aotc_channel_affine_f32({ctx.pool}, {ctx.x(0)}, {ctx.const(a)}, "
                f"{ctx.const(b)}, {ctx.y(0)}, {shape});")
    a = f"((float *)(void *){ctx.scratch})"
    b = f"((float *)(void *){ctx.scratch} + {channels})"
    return (f"aotc_batchnorm_coefficients_f32({ctx.x(1)}, {ctx.x(2)}, {ctx.x(3)}, {ctx.x(4)}, "
            f"{c_float(eps)}, {channels}, {a}, {b});\n"
            f"aotc_channel_affine_f32({ctx.pool}, {ctx.x(0)}, {a}, {b}, {ctx.y(0)}, {shape});")


def _bn_scratch(ctx):
    if _bn_training(ctx) or all(ctx.inputs[i].value is not None for i in range(1, 5)):
        return 0
    return 2 * 4 * _bn_layout(ctx)[1]


def _bn_evaluate(ctx, arrays):
    x = arrays[0]
    if _bn_training(ctx):
        return _bn_training_evaluate(ctx, *arrays[:5])
    outer, channels, inner = _bn_layout(ctx)
    a, b = _bn_coefficients(*arrays[1:5], ctx.attr("epsilon", 1e-5))
    y = x.reshape(outer, channels, inner) * a[:, None] + b[:, None]
    return [y.reshape(x.shape).astype(x.dtype)]


def _bn_training_evaluate(ctx, x, scale, bias, mean, var):
    axes = (0,) + tuple(range(2, x.ndim))
    wide = x.astype(np.float64)
    batch_mean, batch_var = wide.mean(axis=axes), wide.var(axis=axes)
    channel = (-1,) + (1,) * (x.ndim - 2)
    y = (wide - batch_mean.reshape(channel)) / np.sqrt(batch_var.reshape(channel) + ctx.attr("epsilon", 1e-5))
    y = y * scale.astype(np.float64).reshape(channel) + bias.astype(np.float64).reshape(channel)
    momentum = float(np.float32(ctx.attr("momentum", 0.9)))
    return [y.astype(x.dtype), (mean * momentum + batch_mean * (1 - momentum)).astype(mean.dtype),
            (var * momentum + batch_var * (1 - momentum)).astype(var.dtype)]


# ---- Softmax, LogSoftmax -----------------------------------------------------------------

def _softmax_layout(ctx):
    """(outer, n, inner): normalize over n. Before opset 13 every dim from `axis` on is
    one flattened n; from 13 only `axis` is."""
    x = ctx.inputs[0]
    if ctx.opset < 13:
        axis = ctx.axis(ctx.attr("axis", 1), x.rank)
        return _prod(x.shape[:axis]), _prod(x.shape[axis:]), 1
    axis = ctx.axis(ctx.attr("axis", -1), x.rank)
    return _prod(x.shape[:axis]), x.shape[axis], _prod(x.shape[axis + 1:])


def _softmax_infer(ctx):
    ctx.require_inputs(1)
    dt = ctx.require_dtype(0, dtypes.FLOATS)
    if ctx.mode == "exact" and dt != np.float32:
        raise ctx.unsupported(f"{ctx.node.op_type} of {dtypes.name(dt)} in exact mode (float32 only)")
    _softmax_layout(ctx)
    x = ctx.inputs[0]
    return [TensorType(x.dtype, x.shape)]


def _softmax(log):
    def emit(ctx):
        if ctx.outputs[0].numel == 0:
            return ""
        outer, n, inner = _softmax_layout(ctx)
        if np.dtype(ctx.inputs[0].dtype) != np.float32:     # the other types in double
            dims = [(outer, n * inner, 0), (inner, 1, 0)]
            return norm_set(ctx, "LOGSOFTMAX" if log else "SOFTMAX", dims, [(n, inner, 0)])
        return (f"aotc_softmax_f32({ctx.pool}, {ctx.x(0)}, {ctx.y(0)}, {outer}, {n}, {inner}, "
                f"{int(log)});")

    def evaluate(ctx, arrays):
        x = arrays[0]
        outer, n, inner = _softmax_layout(ctx)
        v = x.reshape(outer, n, inner).astype(np.float64 if x.dtype == np.float64 else np.float32)
        shifted = v - v.max(axis=1, keepdims=True)
        s = np.exp(shifted).sum(axis=1, keepdims=True)
        y = shifted - np.log(s) if log else np.exp(shifted) / s
        return [y.reshape(x.shape).astype(x.dtype)]

    return emit, evaluate


# ---- LayerNormalization ------------------------------------------------------------------

def _ln_axis(ctx):
    return ctx.axis(ctx.attr("axis", -1), ctx.inputs[0].rank)


def _ln_infer(ctx):
    ctx.require_inputs(2, 3)
    _require_floats(ctx, range(3))
    if ctx.attr("stash_type", 1) != 1:
        raise ctx.unsupported(f"LayerNormalization with stash_type {ctx.attr('stash_type')} "
                              f"(float statistics, stash_type=1, only)")
    x = ctx.inputs[0]
    axis = _ln_axis(ctx)
    normalized = x.shape[axis:]
    for i, what in ((1, "Scale"), (2, "B")):
        if not ctx.has_input(i):
            continue
        t = ctx.inputs[i]
        if len(t.shape) > len(normalized) or any(
                d not in (1, n) for d, n in zip(reversed(t.shape), reversed(normalized))):
            raise ctx.fail(f"{what} of shape {list(t.shape)} does not broadcast to the "
                           f"normalized shape {list(normalized)}")
        if t.numel != _prod(normalized) and t.value is None:
            raise ctx.unsupported(f"a broadcast {what} ({list(t.shape)} over {list(normalized)}) "
                                  f"that is not a compile-time constant")
    stats = tuple(x.shape[:axis]) + (1,) * (x.rank - axis)
    f32 = np.dtype(np.float32)
    return [TensorType(x.dtype, x.shape), TensorType(f32, stats), TensorType(f32, stats)]


def _ln_param(ctx, i):
    """Pointer to Scale (1) or B (2) with one value per normalized element."""
    if not ctx.has_input(i):
        return "NULL"
    t = ctx.inputs[i]
    normalized = ctx.inputs[0].shape[_ln_axis(ctx):]
    if t.numel == _prod(normalized):
        return ctx.x(i)
    return ctx.const(np.broadcast_to(t.value, normalized).astype(np.float32))


def _ln_emit(ctx):
    x = ctx.inputs[0]
    if x.numel == 0:
        return ""
    axis = _ln_axis(ctx)
    rows, n = _prod(x.shape[:axis]), _prod(x.shape[axis:])
    return (f"aotc_layernorm_f32({ctx.pool}, {ctx.x(0)}, {_ln_param(ctx, 1)}, "
            f"{_ln_param(ctx, 2)}, {ctx.y(0)}, {_output_pointer(ctx, 1)}, "
            f"{_output_pointer(ctx, 2)}, {rows}, {n}, {c_float(ctx.attr('epsilon', 1e-5))});")


_softmax_emit, _softmax_evaluate = _softmax(log=False)
_log_softmax_emit, _log_softmax_evaluate = _softmax(log=True)

OPS = [
    OpDef("BatchNormalization", _bn_infer, _bn_emit, _bn_evaluate, scratch=_bn_scratch,
          since=7, supports_exact=True, in_place_inputs=(0,)),
    OpDef("Softmax", _softmax_infer, _softmax_emit, _softmax_evaluate, since=1,
          supports_exact=True),
    OpDef("LogSoftmax", _softmax_infer, _log_softmax_emit, _log_softmax_evaluate, since=1),
    OpDef("LayerNormalization", _ln_infer, _ln_emit, since=17, supports_exact=True),
]
# the layernorm pass makes it for models of any opset
OPS.append(dataclasses.replace(OPS[-1], domain=AOTC_DOMAIN, since=1))
