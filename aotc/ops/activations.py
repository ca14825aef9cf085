"""Activation functions: unary element-wise operators with attributes, and Clip.

Built with the element-wise table mechanism of unary.py: each row is the numpy
function (x in its compute type) and the C expression over X. Attribute defaults
are the ONNX ones.
"""
import dataclasses
import numpy as np

from .. import dtypes
from .base import OpDef, TensorType, c_float
from .unary import (EXACT, FLOAT32_EXACT, Row, in_compute_types, literal, math_fn, saturate, to_dtype, unary_loop,
                    unary_op)

F = dtypes.FLOATS
SELU_ALPHA = 1.67326319217681884765625
SELU_GAMMA = 1.05070102214813232421875
HARD_SWISH_ALPHA = float(np.float32(1 / 6))    # as the float32 constant of its definition


def _attr(ctx, name, default):
    """A float attribute: ONNX stores them as float32, defaults included."""
    return float(np.float32(ctx.attr(name, default)))


def _lit_attr(ctx, dt, name, default):
    return literal(dt, _attr(ctx, name, default))


def _softplus_c(dt):
    """log(1 + exp(x)) without overflow for large x."""
    exp, log1p = math_fn(dt, "exp"), math_fn(dt, "log1p")
    return f"(X > 0 ? X + {log1p}({exp}(-X)) : {log1p}({exp}(X)))"


def _softplus(x):
    return np.where(x > 0, x + np.log1p(np.exp(-np.abs(x))), np.log1p(np.exp(np.minimum(x, 0))))


def _elu_c(ctx, dt):
    return f"(X >= 0 ? X : {_lit_attr(ctx, dt, 'alpha', 1.0)} * ({math_fn(dt, 'exp')}(X) - 1))"


def _selu_c(ctx, dt):
    a, g = _lit_attr(ctx, dt, "alpha", SELU_ALPHA), _lit_attr(ctx, dt, "gamma", SELU_GAMMA)
    return f"(X > 0 ? {g} * X : {g} * ({a} * {math_fn(dt, 'exp')}(X) - {a}))"


def _selu(ctx, x):
    a, g = _attr(ctx, "alpha", SELU_ALPHA), _attr(ctx, "gamma", SELU_GAMMA)
    return np.where(x > 0, g * x, g * (a * np.exp(x) - a))


def _celu_c(ctx, dt):
    a = _lit_attr(ctx, dt, "alpha", 1.0)
    return f"(AOTC_MAX(X, 0) + AOTC_MIN(0, {a} * ({math_fn(dt, 'exp')}(X / {a}) - 1)))"


def _celu(ctx, x):
    a = _attr(ctx, "alpha", 1.0)
    return np.maximum(x, 0) + np.minimum(0, a * (np.exp(x / a) - 1))


def _shrink_c(ctx, dt):
    lambd, bias = _attr(ctx, "lambd", 0.5), _attr(ctx, "bias", 0.0)
    if dt in dtypes.INTS:     # in double, then converted as Cast converts
        lit = lambda v: literal(np.float64, v)   # noqa: E731
        return saturate(dt, f"(X < {lit(-lambd)} ? X + {lit(bias)} : "
                            f"(X > {lit(lambd)} ? X - {lit(bias)} : 0.0))")
    lit = lambda v: literal(dt, v)   # noqa: E731
    return f"(X < {lit(-lambd)} ? X + {lit(bias)} : (X > {lit(lambd)} ? X - {lit(bias)} : 0))"


def _shrink(ctx, x):
    lambd, bias = _attr(ctx, "lambd", 0.5), _attr(ctx, "bias", 0.0)
    if x.dtype.kind in "iu":
        x = x.astype(np.float64)
    return np.where(x < -lambd, x + x.dtype.type(bias), np.where(x > lambd, x - x.dtype.type(bias), 0))


def _hard_sigmoid_attrs(ctx):
    return _attr(ctx, "alpha", 0.2), _attr(ctx, "beta", 0.5)


def _hard_sigmoid_c(dt, alpha, beta):
    return f"AOTC_MIN(AOTC_MAX(X * {literal(dt, alpha)} + {literal(dt, beta)}, 0), 1)"


def _hard_sigmoid(x, alpha, beta):
    return np.clip(x * x.dtype.type(alpha) + x.dtype.type(beta), 0, 1)


# ---- the activations a product's tile epilogue applies (runtime_c/aotc_activation.h):
# computed in float, the standalone operator is the same AOTC_ACTIVATION expression, so
# a fused activation gives the bits of the separate one

EPILOGUE_KINDS = {"Relu": "RELU", "LeakyRelu": "LEAKY_RELU", "Clip": "CLIP", "HardSigmoid": "HARD_SIGMOID",
                  "HardSwish": "HARD_SWISH", "Sigmoid": "SIGMOID", "Tanh": "TANH", "Gelu": "GELU"}


def epilogue_params(op_type, attr):
    """(aotc_act_kind without AOTC_ACT_, a, b) of an activation whose attributes (ONNX
    names; Clip's bounds as min/max) `attr(key, default)` reads."""
    if op_type == "LeakyRelu":
        return "LEAKY_RELU", float(np.float32(attr("alpha", 0.01))), 0.0
    if op_type == "HardSigmoid":
        return "HARD_SIGMOID", float(np.float32(attr("alpha", 0.2))), float(np.float32(attr("beta", 0.5)))
    if op_type == "Clip":
        return "CLIP", attr("min", -np.inf), attr("max", np.inf)
    if op_type == "Gelu" and attr("approximate", "none") in ("tanh", b"tanh"):
        return "GELU_TANH", 0.0, 0.0
    return EPILOGUE_KINDS[op_type], 0.0, 0.0


def epilogue_expression(kind, a, b, x="X"):
    """AOTC_ACTIVATION over the float `x`; a, b numbers or C expressions."""
    a, b = (c_float(v) if isinstance(v, (int, float)) else v for v in (a, b))
    return f"AOTC_ACTIVATION({kind}, {x}, {a}, {b})"


def _in_float_as_epilogue(op_type, c_other):
    """A row's C builder: the epilogue's expression where the compute type is float."""
    def c(ctx, dt):
        if dtypes.compute_dtype(dt) != np.float32:
            return c_other(ctx, dt)
        return epilogue_expression(*epilogue_params(op_type, ctx.attr))
    return c


def _sigmoid_c(dt, scale="X"):
    return f"(1 / (1 + {math_fn(dt, 'exp')}(-{scale})))"


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


ACTIVATIONS = {
    "Relu": Row(6, dtypes.SIGNED, lambda ctx, x: np.maximum(x, 0),
                _in_float_as_epilogue("Relu", lambda ctx, dt: "(X > 0 ? X : 0)"), None, EXACT),
    "LeakyRelu": Row(6, F, lambda ctx, x: np.where(x >= 0, x, x * x.dtype.type(_attr(ctx, "alpha", 0.01))),
                     _in_float_as_epilogue("LeakyRelu", lambda ctx, dt:
                                           f"(X >= 0 ? X : X * {_lit_attr(ctx, dt, 'alpha', 0.01)})"),
                     None, EXACT),
    "Elu": Row(6, F, lambda ctx, x: np.where(x >= 0, x, _attr(ctx, "alpha", 1.0) * (np.exp(x) - 1)), _elu_c,
               None, FLOAT32_EXACT),
    "Selu": Row(6, F, _selu, _selu_c, None, FLOAT32_EXACT),
    "Celu": Row(12, F, _celu, _celu_c, None, FLOAT32_EXACT),
    "ThresholdedRelu": Row(10, F, lambda ctx, x: np.where(x > _attr(ctx, "alpha", 1.0), x, 0),
                           lambda ctx, dt: f"(X > {_lit_attr(ctx, dt, 'alpha', 1.0)} ? X : 0)", None, EXACT),
    "Shrink": Row(9, dtypes.NUMERIC, _shrink, _shrink_c, None, EXACT),
    "Softplus": Row(1, F, lambda ctx, x: _softplus(x), lambda ctx, dt: _softplus_c(dt)),
    "Softsign": Row(1, F, lambda ctx, x: x / (1 + np.abs(x)),
                    lambda ctx, dt: f"(X / (1 + {math_fn(dt, 'fabs')}(X)))", None, EXACT),
    "Mish": Row(18, F, lambda ctx, x: x * np.tanh(_softplus(x)),
                lambda ctx, dt: f"(X * {math_fn(dt, 'tanh')}({_softplus_c(dt)}))"),
    "HardSigmoid": Row(6, F, lambda ctx, x: _hard_sigmoid(x, *_hard_sigmoid_attrs(ctx)),
                       _in_float_as_epilogue("HardSigmoid",
                                             lambda ctx, dt: _hard_sigmoid_c(dt, *_hard_sigmoid_attrs(ctx))),
                       None, EXACT),
    "HardSwish": Row(14, F, lambda ctx, x: x * _hard_sigmoid(x, HARD_SWISH_ALPHA, 0.5),
                     _in_float_as_epilogue("HardSwish",
                                           lambda ctx, dt: f"(X * {_hard_sigmoid_c(dt, HARD_SWISH_ALPHA, 0.5)})"),
                     None, EXACT),
    "Sigmoid": Row(6, F, lambda ctx, x: _sigmoid(x), _in_float_as_epilogue("Sigmoid", lambda ctx, dt: _sigmoid_c(dt)),
                   None, FLOAT32_EXACT),
    "Tanh": Row(6, F, lambda ctx, x: np.tanh(x),
                _in_float_as_epilogue("Tanh", lambda ctx, dt: f"{math_fn(dt, 'tanh')}(X)"), None, FLOAT32_EXACT),
    "Swish": Row(24, F, lambda ctx, x: x * _sigmoid(x * x.dtype.type(_attr(ctx, "alpha", 1.0))),
                 lambda ctx, dt: f"(X * {_sigmoid_c(dt, _lit_attr(ctx, dt, 'alpha', 1.0) + ' * X')})",
                 None, FLOAT32_EXACT),
}


# ---- Clip: bounds are attributes before opset 11, optional scalar inputs after -------

def _clip_bounds(ctx):
    """(min, max) as C expressions in the compute type, or None where absent."""
    dt = np.dtype(ctx.inputs[0].dtype)
    if ctx.opset < 11:
        lo, hi = ctx.attr("min"), ctx.attr("max")
        return tuple(None if v is None else literal(dt, v) for v in (lo, hi))
    bounds = []
    for i in (1, 2):
        if not ctx.has_input(i):
            bounds.append(None)
        elif ctx.inputs[i].value is not None:
            v = ctx.inputs[i].value.reshape(-1)[0]
            bounds.append(literal(dt, float(v) if dtypes.is_float(dt) else int(v)))
        else:
            bounds.append(dtypes.c_load(dt, f"({ctx.x(i)})[0]"))
    return tuple(bounds)


def _clip_infer(ctx):
    ctx.require_inputs(1, 3)
    dt = ctx.require_dtype(0, dtypes.NUMERIC)
    for i in (1, 2):
        if not ctx.has_input(i):
            continue
        if ctx.inputs[i].numel != 1:
            raise ctx.fail(f"input {i} of Clip must be a scalar, has shape {list(ctx.inputs[i].shape)}")
        if np.dtype(ctx.inputs[i].dtype) != dt:
            raise ctx.fail(f"input {i} of Clip has element type {dtypes.name(ctx.inputs[i].dtype)}, "
                           f"input 0 has {dtypes.name(dt)}")
    x = ctx.inputs[0]
    return [TensorType(x.dtype, x.shape)]


def clip_evaluate(ctx, arrays):
    x = in_compute_types(arrays[:1])[0]
    if ctx.opset < 11:
        lo, hi = ctx.attr("min"), ctx.attr("max")
    else:
        bounds = in_compute_types((list(arrays[1:3]) + [None, None])[:2])
        lo, hi = (None if b is None else b.reshape(-1)[0] for b in bounds)
    if lo is not None:
        x = np.where(x < lo, x.dtype.type(lo), x)
    if hi is not None:
        x = np.where(x > hi, x.dtype.type(hi), x)
    return [to_dtype(x, arrays[0].dtype)]


def _clip_emit(ctx):
    lo, hi = _clip_bounds(ctx)
    if dtypes.compute_dtype(ctx.inputs[0].dtype) == np.float32:
        return unary_loop(ctx, epilogue_expression("CLIP", "(-AOTC_INF)" if lo is None else lo,
                                                   "AOTC_INF" if hi is None else hi))
    e = "X"
    if lo is not None:
        e = f"({e} < {lo} ? {lo} : {e})"
    if hi is not None:
        e = f"({e} > {hi} ? {hi} : {e})"
    return unary_loop(ctx, e)


# Implemented to their newest definitions (Celu-28 adds types; Swish is new in 24).
FOLLOWS_OPSET_28 = ("Celu", "Swish")

OPS = [dataclasses.replace(unary_op(name, row), checked_through=28 if name in FOLLOWS_OPSET_28 else 22)
       for name, row in ACTIVATIONS.items()] + [
    OpDef("Clip", _clip_infer, _clip_emit, clip_evaluate, since=6, in_place_inputs=(0,), supports_exact=True),
]
