"""Unary element-wise operators: activations and math functions.

Each row gives the numpy function (for constant evaluation) and the C expression
over X, built from the node's attributes. Outputs may take over their input's
storage (the loop reads x[i] before writing y[i]).
"""
import numpy as np

from .. import dtypes
from .base import OpDef, TensorType, c_double, c_float

FLOAT = (np.float32,)
FLOATS = (np.float32, np.float64)
SIGNED = (np.float32, np.float64, np.int8, np.int16, np.int32, np.int64)


def _lit(ctx, value):
    return c_float(value) if np.dtype(ctx.inputs[0].dtype) == np.float32 else c_double(value)


def _fn(ctx, name):
    """libm function for the input's float type."""
    return name + "f" if np.dtype(ctx.inputs[0].dtype) == np.float32 else name


def _erf(x):
    from math import erf
    return np.vectorize(erf, otypes=[np.float64])(x.astype(np.float64)).astype(x.dtype)


def _hard_sigmoid(ctx, x):
    a, b = ctx.attr("alpha", 0.2), ctx.attr("beta", 0.5)
    return np.clip(x * x.dtype.type(a) + x.dtype.type(b), 0, 1).astype(x.dtype)


# op type: (since, accepted types, numpy fn(ctx, x), C expr(ctx))
_TABLE = {
    "Relu": (6, SIGNED, lambda ctx, x: np.maximum(x, 0).astype(x.dtype),
             lambda ctx: "(X > 0 ? X : 0)"),
    "LeakyRelu": (6, FLOATS, lambda ctx, x: np.where(x >= 0, x, x * x.dtype.type(ctx.attr("alpha", 0.01))),
                  lambda ctx: f"(X >= 0 ? X : X * {_lit(ctx, ctx.attr('alpha', 0.01))})"),
    "Sigmoid": (6, FLOATS, lambda ctx, x: (1 / (1 + np.exp(-x))).astype(x.dtype),
                lambda ctx: f"(1 / (1 + {_fn(ctx, 'exp')}(-X)))"),
    "Tanh": (6, FLOATS, lambda ctx, x: np.tanh(x), lambda ctx: f"{_fn(ctx, 'tanh')}(X)"),
    "Exp": (6, FLOATS, lambda ctx, x: np.exp(x), lambda ctx: f"{_fn(ctx, 'exp')}(X)"),
    "Log": (6, FLOATS, lambda ctx, x: np.log(x), lambda ctx: f"{_fn(ctx, 'log')}(X)"),
    "Sqrt": (6, FLOATS, lambda ctx, x: np.sqrt(x), lambda ctx: f"{_fn(ctx, 'sqrt')}(X)"),
    "Erf": (9, FLOATS, lambda ctx, x: _erf(x), lambda ctx: f"{_fn(ctx, 'erf')}(X)"),
    "Neg": (6, SIGNED, lambda ctx, x: np.negative(x), lambda ctx: "(-X)"),
    "Abs": (6, SIGNED, lambda ctx, x: np.abs(x), lambda ctx: "(X < 0 ? -X : X)"),
    "Reciprocal": (6, FLOATS, lambda ctx, x: np.reciprocal(x), lambda ctx: "(1 / X)"),
    "Floor": (6, FLOATS, lambda ctx, x: np.floor(x), lambda ctx: f"{_fn(ctx, 'floor')}(X)"),
    "Ceil": (6, FLOATS, lambda ctx, x: np.ceil(x), lambda ctx: f"{_fn(ctx, 'ceil')}(X)"),
    "Not": (1, (np.bool_,), lambda ctx, x: np.logical_not(x), lambda ctx: "(!X)"),
    "HardSigmoid": (6, FLOATS, _hard_sigmoid,
                    lambda ctx: (f"AOTC_MIN(AOTC_MAX(X * {_lit(ctx, ctx.attr('alpha', 0.2))} + "
                                 f"{_lit(ctx, ctx.attr('beta', 0.5))}, 0), 1)")),
    "HardSwish": (14, FLOATS, lambda ctx, x: (x * np.clip(x / 6 + 0.5, 0, 1)).astype(x.dtype),
                  lambda ctx: f"(X * AOTC_MIN(AOTC_MAX(X * {_lit(ctx, 1 / 6)} + {_lit(ctx, 0.5)}, 0), 1))"),
}


def _unary(op_type):
    since, accepted, fn, expr = _TABLE[op_type]

    def infer(ctx):
        ctx.require_inputs(1)
        ctx.require_dtype(0, accepted)
        x = ctx.inputs[0]
        return [TensorType(x.dtype, x.shape)]

    def evaluate(ctx, arrays):
        with np.errstate(all="ignore"):
            return [np.asarray(fn(ctx, arrays[0])).astype(arrays[0].dtype)]

    def emit(ctx):
        y = ctx.outputs[0]
        if y.numel == 0:
            return ""
        t = dtypes.c_type(y.dtype)
        return f"AOTC_UNARY({t}, {t}, {ctx.y(0)}, {ctx.x(0)}, {y.numel}, {expr(ctx)});"

    return OpDef(op_type, infer, emit, evaluate, since=since, supports_exact=False,
                 in_place_inputs=(0,))


def _clip_bounds(ctx):
    """(min, max) as C expressions or None: attributes before opset 11, inputs after."""
    if ctx.opset < 11:
        lo, hi = ctx.attr("min"), ctx.attr("max")
        return (None if lo is None else _lit(ctx, lo)), (None if hi is None else _lit(ctx, hi))
    bounds = []
    for i in (1, 2):
        if not ctx.has_input(i):
            bounds.append(None)
        elif ctx.inputs[i].value is not None:
            v = ctx.inputs[i].value.reshape(-1)[0]
            bounds.append(_lit(ctx, v) if ctx.inputs[0].dtype.kind == "f" else str(int(v)))
        else:
            bounds.append(f"({ctx.x(i)})[0]")
    return bounds


def _clip_infer(ctx):
    ctx.require_inputs(1, 3)
    ctx.require_dtype(0, SIGNED + (np.uint8, np.uint16, np.uint32, np.uint64))
    for i in (1, 2):
        if ctx.has_input(i) and ctx.inputs[i].numel != 1:
            raise ctx.fail(f"input {i} of Clip must be a scalar, has shape {list(ctx.inputs[i].shape)}")
    x = ctx.inputs[0]
    return [TensorType(x.dtype, x.shape)]


def _clip_evaluate(ctx, arrays):
    x = arrays[0]
    if ctx.opset < 11:
        lo, hi = ctx.attr("min"), ctx.attr("max")
    else:
        lo = arrays[1].reshape(-1)[0] if len(arrays) > 1 and arrays[1] is not None else None
        hi = arrays[2].reshape(-1)[0] if len(arrays) > 2 and arrays[2] is not None else None
    if lo is not None:
        x = np.where(x < lo, x.dtype.type(lo), x)
    if hi is not None:
        x = np.where(x > hi, x.dtype.type(hi), x)
    return [x]


def _clip_emit(ctx):
    y = ctx.outputs[0]
    if y.numel == 0:
        return ""
    lo, hi = _clip_bounds(ctx)
    e = "X"
    if lo is not None:
        e = f"({e} < {lo} ? {lo} : {e})"
    if hi is not None:
        e = f"({e} > {hi} ? {hi} : {e})"
    t = dtypes.c_type(y.dtype)
    return f"AOTC_UNARY({t}, {t}, {ctx.y(0)}, {ctx.x(0)}, {y.numel}, {e});"


OPS = [_unary(name) for name in _TABLE] + [
    OpDef("Clip", _clip_infer, _clip_emit, _clip_evaluate, since=6, in_place_inputs=(0,)),
]
