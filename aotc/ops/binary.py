"""Binary element-wise operators with numpy broadcasting, PRelu and Where.

One table gives each operator its numpy function (for constant evaluation), the
element types it accepts and its C expression over A and B for the operands'
element type. Signed integer arithmetic wraps (it is done in unsigned), integer
division or modulo by zero gives 0 and shifts past the width follow BitShift-28,
so no operand value is undefined behaviour in C. float16 and bfloat16 are computed
in float and rounded once on store.
"""
from collections import namedtuple

import numpy as np

from .. import dtypes
from .base import OpDef, TensorType, broadcast_shapes
from .broadcast import loop_args
from .unary import (canonical_nan, in_compute_types, math_fn, parallel_loop, parallel_loop_call, saturate,
                    to_dtype)

INTS, SIGNED_INTS, UNSIGNED_INTS = dtypes.INTS, dtypes.SIGNED_INTS, dtypes.UNSIGNED_INTS


def _ct(dt):
    return dtypes.c_kernel_type(dt)


def wrapping(op):
    """A op B; signed integers in unsigned arithmetic, so overflow wraps."""
    def expr(ctx, dt):
        if dt in SIGNED_INTS:
            return f"(({_ct(dt)})((uint64_t)A {op} (uint64_t)B))"
        return f"(A {op} B)"
    return expr


def _div_c(ctx, dt):
    if dt in SIGNED_INTS:
        return f"(B == 0 ? 0 : (B == -1 ? ({_ct(dt)})(0 - (uint64_t)A) : A / B))"
    if dt in UNSIGNED_INTS:
        return "(B == 0 ? 0 : A / B)"
    return "(A / B)"


def _int_div(a, b):
    if a.dtype.kind == "f":
        return a / b
    with np.errstate(all="ignore"):
        q = np.where(b == 0, 0, np.abs(a) // np.where(b == 0, 1, np.abs(b)))
        return (np.sign(a) * np.sign(b) * q).astype(a.dtype)


def _pow_c(ctx, dt):
    b = np.dtype(ctx.inputs[1].dtype)
    if dtypes.is_float(dt):
        return f"{math_fn(dt, 'pow')}(A, ({dtypes.c_compute_type(dt)})B)"
    if b in INTS:
        return "aotc_ipow_i64((int64_t)A, (int64_t)B)"
    return saturate(dt, "pow((double)A, (double)B)")


def _pow(a, b):
    if a.dtype.kind == "f":
        return np.power(a, b.astype(a.dtype))
    if b.dtype.kind == "f":
        return np.power(a.astype(np.float64), b.astype(np.float64))
    # integer powers wrap; a negative exponent leaves only 1 and -1 nonzero
    a, b = a.astype(np.int64), b.astype(np.int64)
    positive = np.power(a, np.where(b < 0, 0, b))
    negative = np.where(a == 1, 1, np.where(a == -1, np.where(b % 2 == 0, 1, -1), 0))
    return np.where(b < 0, negative, positive)


def _truncated(ctx):
    """Mod's fmod attribute: True for C's fmod, False for the floored (Python) modulo."""
    fmod = ctx.attr("fmod", 0)
    if fmod not in (0, 1):
        raise ctx.fail(f"fmod={fmod}; expected 0 or 1")
    return bool(fmod)


def _mod_c(ctx, dt):
    if dtypes.is_float(dt):
        return f"{math_fn(dt, 'fmod')}(A, B)" if _truncated(ctx) else \
            f"aotc_fmod_floor_{'f64' if dt == np.float64 else 'f32'}(A, B)"
    if dt in UNSIGNED_INTS:
        return "(B == 0 ? 0 : A % B)"
    if _truncated(ctx):
        return "((B == 0 || B == -1) ? 0 : A % B)"
    # floored: the result takes the divisor's sign
    return "((B == 0 || B == -1) ? 0 : ((A % B != 0 && ((A % B < 0) != (B < 0))) ? A % B + B : A % B))"


def _mod(ctx, a, b):
    return np.fmod(a, b) if _truncated(ctx) else np.mod(a, b)


def _direction(ctx):
    direction = ctx.attr("direction")
    if direction not in ("LEFT", "RIGHT"):
        raise ctx.fail(f"direction={direction!r}; expected 'LEFT' or 'RIGHT'")
    return direction


def _bitshift_c(ctx, dt):
    width = dt.itemsize * 8
    signed = dt in SIGNED_INTS
    out_of_range = f"(B < 0 || B >= {width})" if signed else f"(B >= {width})"
    if _direction(ctx) == "LEFT":
        return f"({out_of_range} ? 0 : ((uint64_t)A << B))"
    fill = "(A < 0 ? -1 : 0)" if signed else "0"
    return f"({out_of_range} ? {fill} : (A >> B))"


def _bitshift(ctx, a, b):
    width = a.dtype.itemsize * 8
    valid = (b >= 0) & (b < width) if a.dtype.kind == "i" else b < width
    shift = np.where(valid, b, 0).astype(np.uint64)
    if _direction(ctx) == "LEFT":
        return np.where(valid, np.left_shift(a.astype(np.uint64), shift).astype(a.dtype), 0)
    fill = np.where(a < 0, -1, 0) if a.dtype.kind == "i" else 0
    return np.where(valid, np.right_shift(a, shift.astype(a.dtype)), fill)


def _max_c(ctx, dt):
    return "((A > B || A != A) ? A : B)" if dtypes.is_float(dt) else "(A > B ? A : B)"


def _min_c(ctx, dt):
    return "((A < B || A != A) ? A : B)" if dtypes.is_float(dt) else "(A < B ? A : B)"


def _prelu_c(ctx, dt):
    if dt in UNSIGNED_INTS:
        return "((void)B, A)"
    return f"(A < 0 ? {wrapping('*')(ctx, dt)} : A)"


def _same(expr):
    return lambda ctx, dt: expr


# A table row: numpy(ctx, a, b) on compute-type arrays; accepted types of A; out: the
# output type (None: A's); c(ctx, dtype of A): the C expression over A and B; exact:
# the same results everywhere (integer and correctly rounded float arithmetic; NaN
# results are made canonical in exact mode). Max and Min are here for the variadic family to use.
Row = namedtuple("Row", "numpy accepted out c since exact", defaults=(7, False))
B = dtypes.BOOL
N = dtypes.NUMERIC
# Implemented to their opset-28 definitions (signed shifts, floored float Mod).
FOLLOWS_OPSET_28 = ("Mod", "BitShift")

_TABLE = {
    "Add": Row(lambda ctx, a, b: a + b, N, None, wrapping("+"), 7, True),
    "Sub": Row(lambda ctx, a, b: a - b, N, None, wrapping("-"), 7, True),
    "Mul": Row(lambda ctx, a, b: a * b, N, None, wrapping("*"), 7, True),
    "Div": Row(lambda ctx, a, b: _int_div(a, b), N, None, _div_c, 7, True),
    "Pow": Row(lambda ctx, a, b: _pow(a, b), N, None, _pow_c),
    "Mod": Row(_mod, N, None, _mod_c, 10, True),
    "BitShift": Row(_bitshift, INTS, None, _bitshift_c, 11, True),
    "BitwiseAnd": Row(lambda ctx, a, b: a & b, INTS, None, _same("(A & B)"), 18, True),
    "BitwiseOr": Row(lambda ctx, a, b: a | b, INTS, None, _same("(A | B)"), 18, True),
    "BitwiseXor": Row(lambda ctx, a, b: a ^ b, INTS, None, _same("(A ^ B)"), 18, True),
    "PRelu": Row(lambda ctx, a, b: np.where(a < 0, a * b, a), N, None, _prelu_c, 7, True),
    "Equal": Row(lambda ctx, a, b: a == b, N + B, np.bool_, _same("(A == B)"), 7, True),
    "Less": Row(lambda ctx, a, b: a < b, N, np.bool_, _same("(A < B)"), 7, True),
    "Greater": Row(lambda ctx, a, b: a > b, N, np.bool_, _same("(A > B)"), 7, True),
    "LessOrEqual": Row(lambda ctx, a, b: a <= b, N, np.bool_, _same("(A <= B)"), 12, True),
    "GreaterOrEqual": Row(lambda ctx, a, b: a >= b, N, np.bool_, _same("(A >= B)"), 12, True),
    "And": Row(lambda ctx, a, b: a & b, B, np.bool_, _same("(A && B)"), 7, True),
    "Or": Row(lambda ctx, a, b: a | b, B, np.bool_, _same("(A || B)"), 7, True),
    "Xor": Row(lambda ctx, a, b: a != b, B, np.bool_, _same("(A != B)"), 7, True),
}
# used by the variadic family (Max, Min, Sum, Mean), which chains them pairwise
PAIRWISE = {
    "Max": Row(lambda ctx, a, b: np.maximum(a, b), N, None, _max_c, 7, True),
    "Min": Row(lambda ctx, a, b: np.minimum(a, b), N, None, _min_c, 7, True),
    "Sum": _TABLE["Add"]._replace(accepted=dtypes.FLOATS),
}


def evaluate_pair(ctx, row, a, b):
    """numpy of one row on two arrays, in compute types, returned in the output type."""
    out = row.out or a.dtype
    a, b = in_compute_types([a, b])
    with np.errstate(all="ignore"):
        return to_dtype(row.numpy(ctx, a, b), out)


def _binary(op_type):
    row = _TABLE[op_type]

    def infer(ctx):
        ctx.require_inputs(2)
        a, b = ctx.inputs
        dt = ctx.require_dtype(0, row.accepted)
        if op_type == "Pow":
            ctx.require_dtype(1, dtypes.NUMERIC)
        elif a.dtype != b.dtype:
            raise ctx.fail(f"operand types differ: {dtypes.name(a.dtype)} and {dtypes.name(b.dtype)}")
        shape = broadcast_shapes(ctx, a.shape, b.shape)
        if op_type == "PRelu" and shape != tuple(a.shape):
            raise ctx.fail(f"slope shape {list(b.shape)} does not broadcast to input shape {list(a.shape)}")
        row.c(ctx, dt)           # attribute errors surface at compile time
        return [TensorType(np.dtype(row.out or a.dtype), shape)]

    def evaluate(ctx, arrays):
        return [evaluate_pair(ctx, row, arrays[0], arrays[1])]

    def emit(ctx):
        a, b = ctx.inputs
        y = ctx.outputs[0]
        if y.numel == 0:
            return ""
        types = [_ct(y.dtype), _ct(a.dtype), _ct(b.dtype)]
        expr = canonical_nan(y.dtype, row.c(ctx, np.dtype(a.dtype)))
        if parallel_loop(ctx, [a, b]):
            c_types = [dtypes.c_type(v.dtype) for v in (y, a, b)]
            pointers = [f"({c_types[0]} *)r->y + first", f"(const {c_types[1]} *)r->a + first",
                        f"(const {c_types[2]} *)r->b + first"]
            flat = ["1", "((const int64_t[]){count})", "((const int64_t[]){1})", "((const int64_t[]){1})"]
            return parallel_loop_call(ctx, [f"AOTC_BINARY({', '.join(types + pointers + flat + [expr])});"],
                                      [ctx.x(0), ctx.x(1)])
        args = types + [ctx.y(0), ctx.x(0), ctx.x(1)] + loop_args(ctx, [0, 1]) + [expr]
        return f"AOTC_BINARY({', '.join(args)});"

    return OpDef(op_type, infer, emit, evaluate, since=row.since, supports_exact=row.exact,
                 in_place_inputs=(0, 1) if row.out is None else (),
                 checked_through=28 if op_type in FOLLOWS_OPSET_28 else 22)


def _where_infer(ctx):
    ctx.require_inputs(3)
    ctx.require_dtype(0, dtypes.BOOL)
    c, a, b = ctx.inputs
    ctx.require_dtype(1, dtypes.NUMERIC + dtypes.BOOL)
    if a.dtype != b.dtype:
        raise ctx.fail(f"operand types differ: {dtypes.name(a.dtype)} and {dtypes.name(b.dtype)}")
    return [TensorType(a.dtype, broadcast_shapes(ctx, c.shape, a.shape, b.shape))]


def _where_emit(ctx):
    c, a, b = ctx.inputs
    y = ctx.outputs[0]
    if y.numel == 0:
        return ""
    args = [_ct(y.dtype), "bool", _ct(a.dtype), _ct(b.dtype),
            ctx.y(0), ctx.x(0), ctx.x(1), ctx.x(2)] + loop_args(ctx, [0, 1, 2]) + ["(A ? B : C)"]
    return f"AOTC_TERNARY({', '.join(args)});"


OPS = [_binary(name) for name in _TABLE] + [
    OpDef("Where", _where_infer, _where_emit, lambda ctx, v: [np.where(v[0], v[1], v[2])],
          since=9, supports_exact=True),
]
