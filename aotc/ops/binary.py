"""Binary element-wise operators with numpy broadcasting, and Where.

One table gives each operator its numpy function (for constant evaluation), the
element types it accepts and its C expression over A and B. Signed integer
arithmetic wraps (it is done in unsigned), and integer division by zero gives 0
instead of undefined behaviour.
"""
import numpy as np

from .. import dtypes
from .base import OpDef, TensorType, broadcast_shapes
from .broadcast import loop_args

FLOATS = (np.float32, np.float64)
INTS = (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)
NUMERIC = FLOATS + INTS
BOOL = (np.bool_,)


def _wrapping(op):
    def expr(dt):
        if np.dtype(dt).kind == "i":
            return f"(({dtypes.c_type(dt)})((uint64_t)A {op} (uint64_t)B))"
        return f"(A {op} B)"
    return expr


def _div_expr(dt):
    if np.dtype(dt).kind == "f":
        return "(A / B)"
    if np.dtype(dt).kind == "i":
        return f"(B == 0 ? 0 : (B == -1 ? ({dtypes.c_type(dt)})(0 - (uint64_t)A) : A / B))"
    return "(B == 0 ? 0 : A / B)"


def _pow_expr(dt):
    if np.dtype(dt) == np.float32:
        return "powf(A, (float)B)"
    return "pow((double)A, (double)B)"


def _int_div(a, b):
    if a.dtype.kind == "f":
        return a / b
    with np.errstate(all="ignore"):
        q = np.where(b == 0, 0, np.abs(a) // np.where(b == 0, 1, np.abs(b)))
        return (np.sign(a) * np.sign(b) * q).astype(a.dtype)


def _pow(a, b):
    if a.dtype.kind == "f":
        return np.power(a, b.astype(a.dtype))
    return np.power(a.astype(np.float64), b.astype(np.float64)).astype(a.dtype)


# name: (numpy function, accepted element types, output type (None: as input), C expr)
_TABLE = {
    "Add": (np.add, NUMERIC, None, _wrapping("+")),
    "Sub": (np.subtract, NUMERIC, None, _wrapping("-")),
    "Mul": (np.multiply, NUMERIC, None, _wrapping("*")),
    "Div": (_int_div, NUMERIC, None, _div_expr),
    "Pow": (_pow, NUMERIC, None, _pow_expr),
    "Equal": (np.equal, NUMERIC + BOOL, np.bool_, lambda dt: "(A == B)"),
    "Less": (np.less, NUMERIC, np.bool_, lambda dt: "(A < B)"),
    "Greater": (np.greater, NUMERIC, np.bool_, lambda dt: "(A > B)"),
    "LessOrEqual": (np.less_equal, NUMERIC, np.bool_, lambda dt: "(A <= B)"),
    "GreaterOrEqual": (np.greater_equal, NUMERIC, np.bool_, lambda dt: "(A >= B)"),
    "And": (np.logical_and, BOOL, np.bool_, lambda dt: "(A && B)"),
    "Or": (np.logical_or, BOOL, np.bool_, lambda dt: "(A || B)"),
    "Xor": (np.logical_xor, BOOL, np.bool_, lambda dt: "(A != B)"),
}


def _binary(op_type):
    fn, accepted, out_type, expr = _TABLE[op_type]

    def infer(ctx):
        ctx.require_inputs(2)
        a, b = ctx.inputs
        ctx.require_dtype(0, accepted)
        if op_type != "Pow" and a.dtype != b.dtype:
            raise ctx.fail(f"operand types differ: {dtypes.name(a.dtype)} and {dtypes.name(b.dtype)}")
        if op_type == "Pow":
            ctx.require_dtype(1, NUMERIC)
        shape = broadcast_shapes(ctx, a.shape, b.shape)
        return [TensorType(np.dtype(out_type or a.dtype), shape)]

    def evaluate(ctx, arrays):
        with np.errstate(all="ignore"):
            return [fn(arrays[0], arrays[1])]

    def emit(ctx):
        a, b = ctx.inputs
        y = ctx.outputs[0]
        if y.numel == 0:
            return ""
        args = [dtypes.c_type(y.dtype), dtypes.c_type(a.dtype), dtypes.c_type(b.dtype),
                ctx.y(0), ctx.x(0), ctx.x(1)] + loop_args(ctx, [0, 1]) + [expr(a.dtype)]
        return f"AOTC_BINARY({', '.join(args)});"

    # Comparisons and logic are exact by nature; float arithmetic becomes exact once its
    # kernels rewrite NaN results canonically (exact mode's rule).
    return OpDef(op_type, infer, emit, evaluate, since=7, supports_exact=out_type is not None,
                 in_place_inputs=(0, 1) if out_type is None else ())


def _where_infer(ctx):
    ctx.require_inputs(3)
    ctx.require_dtype(0, BOOL)
    c, a, b = ctx.inputs
    if a.dtype != b.dtype:
        raise ctx.fail(f"operand types differ: {dtypes.name(a.dtype)} and {dtypes.name(b.dtype)}")
    return [TensorType(a.dtype, broadcast_shapes(ctx, c.shape, a.shape, b.shape))]


def _where_emit(ctx):
    c, a, b = ctx.inputs
    y = ctx.outputs[0]
    if y.numel == 0:
        return ""
    args = [dtypes.c_type(y.dtype), "bool", dtypes.c_type(a.dtype), dtypes.c_type(b.dtype),
            ctx.y(0), ctx.x(0), ctx.x(1), ctx.x(2)] + loop_args(ctx, [0, 1, 2]) + ["(A ? B : C)"]
    return f"AOTC_TERNARY({', '.join(args)});"


OPS = [_binary(name) for name in _TABLE] + [
    OpDef("Where", _where_infer, _where_emit, lambda ctx, v: [np.where(v[0], v[1], v[2])],
          since=9, supports_exact=True),
]
