"""Gelu (ONNX opset 20, and ai.aotc's for the gelu pass on older models).

approximate='none': 0.5 x (1 + erf(x / sqrt 2)); 'tanh': 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
"""
import math

import numpy as np

from .. import dtypes
from ..ir import AOTC_DOMAIN
from .activations import epilogue_expression, epilogue_params
from .base import OpDef, TensorType, c_double
from .unary import FLOAT32_EXACT, canonical_nan, exact_support, math_fn

FLOATS = (np.float32, np.float64)
SQRT_HALF = math.sqrt(0.5)
SQRT_2_OVER_PI = math.sqrt(2 / math.pi)


def _approximate(ctx):
    mode = ctx.attr("approximate", "none")
    if mode not in ("none", "tanh"):
        raise ctx.fail(f"approximate={mode!r}; expected 'none' or 'tanh'")
    return mode


def _infer(ctx):
    ctx.require_inputs(1)
    ctx.require_dtype(0, FLOATS)
    _approximate(ctx)
    x = ctx.inputs[0]
    return [TensorType(x.dtype, x.shape)]


def evaluate(ctx, arrays):
    x = arrays[0].astype(np.float64)
    if _approximate(ctx) == "tanh":
        y = 0.5 * x * (1 + np.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x ** 3)))
    else:
        erf = np.vectorize(math.erf, otypes=[np.float64])
        y = 0.5 * x * (1 + erf(x * SQRT_HALF))
    return [y.astype(arrays[0].dtype)]


def expression(ctx):
    """The C expression of Gelu over X, for the input's float type."""
    dt = np.dtype(ctx.inputs[0].dtype)
    if dt == np.float32:      # the tile epilogue's spelling, so a fused Gelu gives these bits
        return epilogue_expression(*epilogue_params("Gelu", ctx.attr))
    lit = c_double
    if _approximate(ctx) == "tanh":
        inner = f"{lit(SQRT_2_OVER_PI)} * (X + {lit(0.044715)} * X * X * X)"
        return f"({lit(0.5)} * X * (1 + {math_fn(dt, 'tanh')}({inner})))"
    return f"({lit(0.5)} * X * (1 + {math_fn(dt, 'erf')}(X * {lit(SQRT_HALF)})))"


def _emit(ctx):
    y = ctx.outputs[0]
    if y.numel == 0:
        return ""
    t = dtypes.c_type(y.dtype)
    return f"AOTC_UNARY({t}, {t}, {ctx.y(0)}, {ctx.x(0)}, {y.numel}, {canonical_nan(y.dtype, expression(ctx))});"


OPS = [
    OpDef("Gelu", _infer, _emit, evaluate, since=20, in_place_inputs=(0,),
          supports_exact=exact_support(FLOAT32_EXACT)),
    OpDef("Gelu", _infer, _emit, evaluate, domain=AOTC_DOMAIN, since=1, in_place_inputs=(0,),
          supports_exact=exact_support(FLOAT32_EXACT)),
]
