"""Unary element-wise math operators, and the one mechanism every element-wise
family (this one, activations, binary, variadic) builds its operators with.

Each row gives the numpy function (for constant evaluation) and the C expression
over X for the input's element type. float16 and bfloat16 are computed in float
(X is a float in C, and numpy evaluates them in float32) and rounded once on store.
Outputs may take over their input's storage (the loop reads x[i] before writing y[i]).
"""
import math
from collections import namedtuple

import numpy as np

from .. import dtypes
from .base import OpDef, TensorType, c_double, c_float
from .constants import cast_array

# ---- helpers shared by the element-wise modules --------------------------------------


def literal(dtype, value):
    """A C constant of `value` in the compute type of `dtype`."""
    ct = dtypes.compute_dtype(dtype)
    if ct == np.float32:
        return c_float(value)
    if ct == np.float64:
        return c_double(value)
    if ct == np.bool_:
        return "1" if value else "0"
    value = int(value)
    if ct.kind == "u":
        return f"UINT64_C({value})"
    return "INT64_MIN" if value == -2**63 else f"INT64_C({value})"


# float functions of aotc_math.h: the AOTC_<F>F macros call the exact version in exact
# mode and the fast, vectorizable one otherwise
EXACT_FLOAT_FUNCTIONS = ("exp", "log", "tanh", "erf")


def math_fn(dtype, name):
    """The C function `name` for dtype's compute type (expf for float, exp for double)."""
    if dtypes.compute_dtype(dtype) != np.float32:
        return name
    return f"AOTC_{name.upper()}F" if name in EXACT_FLOAT_FUNCTIONS else name + "f"


def canonical_nan(dtype, expr):
    """expr, with NaN results written as the one canonical NaN in exact mode (the
    AOTC_CANON macros are the identity in fast mode)."""
    ct = dtypes.compute_dtype(dtype)
    if ct == np.float32:
        return f"AOTC_CANON_F32({expr})"
    if ct == np.float64:
        return f"AOTC_CANON_F64({expr})"
    return expr


# Row.exact: EXACT for results that are the same everywhere (integer and correctly
# rounded float arithmetic, and the exact functions above in float); FLOAT32_EXACT for
# those exact only where the compute type is float32 (no exact double functions).
EXACT, FLOAT32_EXACT = True, "float32"


def exact_support(exact):
    """OpDef.supports_exact for a row's exact mark."""
    if exact != FLOAT32_EXACT:
        return bool(exact)
    return lambda ctx: dtypes.compute_dtype(ctx.inputs[0].dtype) == np.float32


def saturate(dtype, expr):
    """C conversion of a double expression to integer dtype: truncates, NaN gives 0 and
    out-of-range values saturate (the rule of Cast)."""
    info = np.iinfo(dtype)
    return (f"AOTC_SATURATE({dtypes.c_kernel_type(dtype)}, {expr}, {float(info.min)!r}, "
            f"{float(int(info.max) + 1)!r}, {np.dtype(dtype).name.upper()}_MAX)")


def to_dtype(array, dtype):
    """A numpy result in its output type, converted with the C kernel's rules."""
    array = np.asarray(array)
    dtype = np.dtype(dtype)
    if dtype.kind in "iu" and array.dtype.kind == "f":
        return cast_array(array, dtype)
    return array.astype(dtype)


def in_compute_types(arrays):
    """Inputs as the kernels see them: 16-bit floats widened to float32."""
    return [None if a is None else np.asarray(a).astype(dtypes.compute_dtype(a.dtype), copy=False)
            for a in arrays]


def input_dtype(ctx, i=0):
    return np.dtype(ctx.inputs[i].dtype)


def unary_loop(ctx, expr, i=0):
    """AOTC_UNARY over input i with this expression, writing output 0 (on the thread
    pool when large: see parallel_loop)."""
    y, x = ctx.outputs[0], ctx.inputs[i]
    if y.numel == 0:
        return ""
    ty, tx = dtypes.c_kernel_type(y.dtype), dtypes.c_kernel_type(x.dtype)
    expr = canonical_nan(y.dtype, expr)
    if parallel_loop(ctx, [x]):
        return parallel_loop_call(ctx, [
            f"AOTC_UNARY({ty}, {tx}, ({dtypes.c_type(y.dtype)} *)r->y + first, "
            f"(const {dtypes.c_type(x.dtype)} *)r->a + first, count, {expr});"], [ctx.x(i)])
    return f"AOTC_UNARY({ty}, {tx}, {ctx.y(0)}, {ctx.x(i)}, {y.numel}, {expr});"


PARALLEL_LOOP_MIN = 2 * 16384   # elements: two of the runtime's tasks (AOTC_EW_TASK)


def parallel_loop(ctx, operands):
    """Whether output 0's element-wise loop runs on the thread pool: large, and every
    operand of the output's shape (no broadcast)."""
    y = ctx.outputs[0]
    return (ctx.task_function is not None and y.numel >= PARALLEL_LOOP_MIN
            and all(tuple(v.shape) == tuple(y.shape) for v in operands))


def parallel_loop_call(ctx, loop, pointers):
    """The call that runs `loop` (C lines over r->y, r->a, r->b at elements [first,
    first + count)) in tasks of aotc_ew_parallel, the operands at `pointers`."""
    name = ctx.task_function(["const aotc_ew_range *r = (const aotc_ew_range *)arg;",
                              "int64_t count, first = aotc_ew_first(r, t, &count);", *loop])
    b = pointers[1] if len(pointers) > 1 else "NULL"
    return f"aotc_ew_parallel({ctx.pool}, {name}, {ctx.y(0)}, {pointers[0]}, {b}, {ctx.outputs[0].numel});"


# A table row. numpy(ctx, x) sees x in its compute type; c(ctx, dtype) is the C
# expression over X; out is the output type (None: the input's); exact: EXACT,
# FLOAT32_EXACT or False (see exact_support).
Row = namedtuple("Row", "since accepted numpy c out exact", defaults=(None, False))


def unary_op(op_type, row):
    """The OpDef of one table row."""

    def infer(ctx):
        ctx.require_inputs(1)
        ctx.require_dtype(0, row.accepted)
        x = ctx.inputs[0]
        row.c(ctx, input_dtype(ctx))        # attribute errors surface at compile time
        return [TensorType(np.dtype(row.out or x.dtype), x.shape)]

    def evaluate(ctx, arrays):
        (x,) = in_compute_types(arrays[:1])
        with np.errstate(all="ignore"):
            return [to_dtype(row.numpy(ctx, x), row.out or arrays[0].dtype)]

    def emit(ctx):
        return unary_loop(ctx, row.c(ctx, input_dtype(ctx)))

    return OpDef(op_type, infer, emit, evaluate, since=row.since, supports_exact=exact_support(row.exact),
                 in_place_inputs=(0,) if row.out is None else ())


def libm(name):
    """A C expression builder calling one libm function on X."""
    return lambda ctx, dt: f"{math_fn(dt, name)}(X)"


# ---- the math table ----------------------------------------------------------------


def _abs_c(ctx, dt):
    if dt in dtypes.UNSIGNED_INTS:
        return "X"
    if dt in dtypes.SIGNED_INTS:     # in unsigned: the lowest value wraps, as in numpy
        return f"(X < 0 ? ({dtypes.c_kernel_type(dt)})(0 - (uint64_t)X) : X)"
    return f"{math_fn(dt, 'fabs')}(X)"


def _neg_c(ctx, dt):
    if dt in dtypes.SIGNED_INTS:
        return f"(({dtypes.c_kernel_type(dt)})(0 - (uint64_t)X))"
    return "(-X)"


def _sign_c(ctx, dt):
    if dt in dtypes.UNSIGNED_INTS:
        return "(X > 0)"
    if dt in dtypes.SIGNED_INTS:
        return "((X > 0) - (X < 0))"
    return "(X > 0 ? 1 : (X < 0 ? -1 : X))"     # zeros and NaN pass through


def _is_inf_c(ctx, dt):
    tests = []
    if ctx.attr("detect_positive", 1):
        tests.append("X == AOTC_INF")
    if ctx.attr("detect_negative", 1):
        tests.append("X == -AOTC_INF")
    return f"({' || '.join(tests)})" if tests else "((void)X, 0)"


def _is_inf(ctx, x):
    return (np.isposinf(x) & bool(ctx.attr("detect_positive", 1))) | (
        np.isneginf(x) & bool(ctx.attr("detect_negative", 1)))


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64))


F = dtypes.FLOATS
_MATH = {
    "Abs": Row(6, dtypes.NUMERIC, lambda ctx, x: np.abs(x), _abs_c, None, EXACT),
    "Neg": Row(6, dtypes.SIGNED, lambda ctx, x: np.negative(x), _neg_c, None, EXACT),
    "Sign": Row(9, dtypes.NUMERIC, lambda ctx, x: np.sign(x), _sign_c, None, EXACT),
    "Reciprocal": Row(6, F, lambda ctx, x: np.reciprocal(x), lambda ctx, dt: "(1 / X)", None, EXACT),
    "Floor": Row(6, F, lambda ctx, x: np.floor(x), libm("floor"), None, EXACT),
    "Ceil": Row(6, F, lambda ctx, x: np.ceil(x), libm("ceil"), None, EXACT),
    # rint rounds halves to even in the default rounding mode, as Round asks
    "Round": Row(11, F, lambda ctx, x: np.round(x), libm("rint"), None, EXACT),
    "Sqrt": Row(6, F, lambda ctx, x: np.sqrt(x), libm("sqrt"), None, EXACT),
    "Exp": Row(6, F, lambda ctx, x: np.exp(x), libm("exp"), None, FLOAT32_EXACT),
    "Log": Row(6, F, lambda ctx, x: np.log(x), libm("log"), None, FLOAT32_EXACT),
    "Erf": Row(9, F, lambda ctx, x: _erf(x), libm("erf"), None, FLOAT32_EXACT),
    "Sin": Row(7, F, lambda ctx, x: np.sin(x), libm("sin")),
    "Cos": Row(7, F, lambda ctx, x: np.cos(x), libm("cos")),
    "Tan": Row(7, F, lambda ctx, x: np.tan(x), libm("tan")),
    "Asin": Row(7, F, lambda ctx, x: np.arcsin(x), libm("asin")),
    "Acos": Row(7, F, lambda ctx, x: np.arccos(x), libm("acos")),
    "Atan": Row(7, F, lambda ctx, x: np.arctan(x), libm("atan")),
    "Sinh": Row(9, F, lambda ctx, x: np.sinh(x), libm("sinh")),
    "Cosh": Row(9, F, lambda ctx, x: np.cosh(x), libm("cosh")),
    "Asinh": Row(9, F, lambda ctx, x: np.arcsinh(x), libm("asinh")),
    "Acosh": Row(9, F, lambda ctx, x: np.arccosh(x), libm("acosh")),
    "Atanh": Row(9, F, lambda ctx, x: np.arctanh(x), libm("atanh")),
    "IsNaN": Row(9, F, lambda ctx, x: np.isnan(x), lambda ctx, dt: "(X != X)", np.bool_, True),
    "IsInf": Row(10, F, _is_inf, _is_inf_c, np.bool_, True),
    "Not": Row(1, dtypes.BOOL, lambda ctx, x: np.logical_not(x), lambda ctx, dt: "(!X)", None, True),
    "BitwiseNot": Row(18, dtypes.INTS, lambda ctx, x: np.invert(x), lambda ctx, dt: "(~X)", None, True),
}

OPS = [unary_op(name, row) for name, row in _MATH.items()]
