"""Constants and type facts: Constant, ConstantOfShape, Shape, Size, Cast, CastLike.

Constant, Shape and Size state their output value in `infer`, so they are always
folded. ConstantOfShape folds when small, else fills at run time. Cast defines every
conversion, including the ones C leaves undefined: a float going to an integer type
gives 0 for NaN and saturates out of range, in C and in the numpy evaluation alike.
Casts to and from the 8-, 4- and 2-bit types follow the ONNX reference bit for bit
(ml_dtypes' rounding from float32, `saturate`, float8e8m0's `round_mode`); the C side
is runtime_c/aotc_cast.h.
"""
import ml_dtypes
import numpy as np
from onnx import numpy_helper

from .. import dtypes
from .base import OpDef, TensorType


# ---- Constant -----------------------------------------------------------------------

def _constant_value(ctx):
    attrs = ctx.node.attrs
    if "sparse_value" in attrs:
        raise ctx.unsupported("Constant with a sparse_value is not supported")
    for key in ("value_string", "value_strings"):
        if key in attrs:
            raise ctx.unsupported(f"Constant with {key}: string tensors are not supported")
    forms = {
        "value": lambda v: np.asarray(v),
        "value_float": lambda v: np.array(v, np.float32),
        "value_floats": lambda v: np.array(v, np.float32).reshape(-1),
        "value_int": lambda v: np.array(v, np.int64),
        "value_ints": lambda v: np.array(v, np.int64).reshape(-1),
    }
    present = [k for k in forms if k in attrs]
    if len(present) != 1:
        raise ctx.fail(f"Constant needs exactly one value attribute, has {present or 'none'}")
    return np.asarray(forms[present[0]](attrs[present[0]]), order="C")   # keeps 0-d


def _constant_infer(ctx):
    ctx.require_inputs(0)
    return [TensorType.of(_constant_value(ctx))]


# ---- ConstantOfShape ----------------------------------------------------------------

def _fill_value(ctx):
    """The one-element fill value (default float32 0)."""
    value = ctx.attr("value")
    if value is None:
        return np.zeros(1, np.float32)
    value = np.asarray(value)
    if value.size != 1:
        raise ctx.fail(f"the value attribute must hold one element, holds {value.size}")
    return value.reshape(1)


def _constant_of_shape_infer(ctx):
    ctx.require_inputs(1)
    shape = ctx.const_input(0, "shape").reshape(-1)
    if np.dtype(ctx.inputs[0].dtype) != np.int64:
        raise ctx.fail(f"the shape input must be int64, is {dtypes.name(ctx.inputs[0].dtype)}")
    if np.any(shape < 0):
        raise ctx.fail(f"shape {shape.tolist()} has a negative dimension")
    return [TensorType(_fill_value(ctx).dtype, tuple(int(d) for d in shape))]


def _constant_of_shape_evaluate(ctx, arrays):
    shape = tuple(int(d) for d in arrays[0].reshape(-1))
    return [np.full(shape, _fill_value(ctx)[0])]


def _constant_of_shape_emit(ctx):
    y = ctx.outputs[0]
    if y.numel == 0:
        return ""
    value = ctx.const(_fill_value(ctx))
    return f"aotc_fill({ctx.y(0)}, {y.numel}, {value}, {np.dtype(y.dtype).itemsize});"


# ---- Shape, Size --------------------------------------------------------------------

def _shape_infer(ctx):
    ctx.require_inputs(1)
    shape = ctx.inputs[0].shape
    rank = len(shape)

    def clamp(v):
        v = int(v)
        return min(max(v + rank if v < 0 else v, 0), rank)
    start, end = 0, rank
    if ctx.opset >= 15:
        start = clamp(ctx.attr("start", 0))
        end = clamp(ctx.attr("end", rank))
    return [TensorType.of(np.array(shape[start:end], np.int64).reshape(-1))]


def _size_infer(ctx):
    ctx.require_inputs(1)
    return [TensorType.of(np.array(ctx.inputs[0].numel, np.int64))]


# ---- Cast ---------------------------------------------------------------------------

CASTABLE = dtypes.NUMERIC + dtypes.BOOL + dtypes.SMALL
ROUND_MODES = {"up": "AOTC_E8M0_UP", "down": "AOTC_E8M0_DOWN", "nearest": "AOTC_E8M0_NEAREST"}
# the C format arguments of each narrow float (runtime_c/aotc_cast.h)
_NARROW_FORMAT = dict(zip(dtypes.FLOAT8 + (dtypes.FLOAT4E2M1,),
                          ("AOTC_FP_E4M3FN", "AOTC_FP_E4M3FNUZ", "AOTC_FP_E5M2", "AOTC_FP_E5M2FNUZ",
                           "AOTC_FP_E2M1")))
_LOW_BITS_MASK = {t: 2 ** dtypes.bits(t) - 1 for t in dtypes.SMALL_INTS}


def _int_range(dtype):
    """(lowest, highest) of an integer type, and highest + 1 as a float (exact: a
    power of two)."""
    info = np.iinfo(dtype)
    return int(info.min), int(info.max), float(int(info.max) + 1)


def _float_to_low_bits(x, mask):
    """Floats to a 4- or 2-bit integer's bits: rounded to float32 (as ml_dtypes does),
    truncated and wrapped; NaN and values outside the int32 range give 0 (what ml_dtypes
    gives on x86, defined here)."""
    wide = x.astype(np.float32).astype(np.float64)
    inside = (wide > -2147483649.0) & (wide < 2147483648.0)
    return np.where(inside, np.trunc(np.where(inside, wide, 0)), 0).astype(np.int64) & mask


def cast_array(x, dtype, saturate=True, round_mode="up"):
    """numpy conversion with the C kernel's rules: float -> integer truncates, NaN
    gives 0 and out-of-range values saturate; -> bool is x != 0; integers wrap. The
    8- and 4-bit floats, bfloat16 and float8e8m0 are rounded from float32 (as
    ml_dtypes and the ONNX reference do); `saturate` and `round_mode` as in Cast."""
    x = np.asarray(x)
    dtype = np.dtype(dtype)
    x = x.astype(dtypes.compute_dtype(x.dtype), copy=False)   # narrow types widen exactly
    if dtype == np.bool_:
        return x != 0
    if dtype in _LOW_BITS_MASK:
        mask = _LOW_BITS_MASK[dtype]
        bits = _float_to_low_bits(x, mask) if x.dtype.kind == "f" else x.astype(np.int64) & mask
        return bits.astype(np.uint8).view(dtype)
    if dtype == np.float16 and x.dtype != np.float64:
        return x.astype(np.float32).astype(dtype)
    if dtype in dtypes.SMALL_FLOATS or dtype == dtypes.BFLOAT16:
        x = x.astype(np.float32)
        if dtype == dtypes.FLOAT8E8M0:
            return numpy_helper.to_float8e8m0(x, bool(saturate), round_mode).view(dtype)
        if saturate and dtype in dtypes.FLOAT8:
            top = np.float32(ml_dtypes.finfo(dtype).max)
            x = np.clip(x, -top, top)
        return x.astype(dtype)
    if x.dtype.kind != "f" or dtype.kind not in "iu":
        return x.astype(dtype)
    lo, hi, hi_excl = _int_range(dtype)
    wide = x.astype(np.float64)
    nan, low, high = np.isnan(wide), wide <= lo, wide >= hi_excl
    out = np.where(nan | low | high, 0, np.trunc(wide)).astype(dtype)
    out[low] = lo
    out[high] = hi
    return out


def _int_literal(value, dtype):
    """A C integer constant of exactly this value, valid for the full int64/uint64 range."""
    value = int(value)
    if np.dtype(dtype).kind == "u":
        return f"UINT64_C({value})"
    if value == -2**63:
        return "INT64_MIN"
    return f"INT64_C({value})"


def _cast_expr(src, dst, saturate, round_mode):
    """C expression converting X (src loaded into its compute type) to dst's storage."""
    src, dst = np.dtype(src), np.dtype(dst)
    from_float = dtypes.compute_dtype(src).kind == "f"
    ct = dtypes.c_type(dst)
    sat = 1 if saturate else 0
    if dst == np.bool_:
        return "(X != 0)"
    if dst in _LOW_BITS_MASK:
        mask = _LOW_BITS_MASK[dst]
        if from_float:
            return f"aotc_float_to_low_bits((float)X, {mask:#x}u)"
        return f"((uint8_t)((uint64_t)X & {mask:#x}u))"
    if dst == np.float16:
        return "aotc_f64_to_f16(X)" if src == np.float64 else "aotc_f32_to_f16((float)X)"
    if dst == dtypes.BFLOAT16:
        return "aotc_f32_to_bf16((float)X)"
    if dst == dtypes.FLOAT8E8M0:
        return f"aotc_f32_to_e8m0((float)X, {sat}, {ROUND_MODES[round_mode]})"
    if dst in _NARROW_FORMAT:
        return f"aotc_fp_encode((float)X, {_NARROW_FORMAT[dst]}, {sat})"
    if from_float and dst.kind in "iu":
        lo, hi, hi_excl = _int_range(dst)
        return (f"AOTC_SATURATE({ct}, X, {float(lo)!r}, {hi_excl!r}, "
                f"{_int_literal(hi, dst)})")
    return f"(({ct})X)"


def _cast_target(ctx):
    if ctx.node.op_type == "CastLike":
        return np.dtype(ctx.inputs[1].dtype)
    to = ctx.attr("to")
    if to is None:
        raise ctx.fail("Cast needs the 'to' attribute")
    return dtypes.from_onnx(int(to), f"the 'to' attribute of {ctx.node.name!r}")


def _cast_options(ctx):
    """(saturate, round_mode): attributes from opset 19 and 24, defaults before."""
    saturate = bool(int(ctx.attr("saturate", 1))) if ctx.opset >= 19 else True
    round_mode = ctx.attr("round_mode", "up") if ctx.opset >= 24 else "up"
    if round_mode not in ROUND_MODES:
        raise ctx.fail(f"round_mode {round_mode!r} is not one of {', '.join(ROUND_MODES)}")
    return saturate, round_mode


def _cast_infer(ctx):
    if ctx.node.op_type == "CastLike":
        ctx.require_inputs(2)
    else:
        ctx.require_inputs(1)
    ctx.require_dtype(0, CASTABLE)
    target = _cast_target(ctx)
    if target not in CASTABLE:
        raise ctx.unsupported(f"Cast to {dtypes.name(target)} is not supported")
    _cast_options(ctx)
    return [TensorType(target, ctx.inputs[0].shape)]


def _cast_evaluate(ctx, arrays):
    with np.errstate(all="ignore"):
        return [cast_array(arrays[0], _cast_target(ctx), *_cast_options(ctx))]


def _cast_emit(ctx):
    x, y = ctx.inputs[0], ctx.outputs[0]
    if y.numel == 0:
        return ""
    expr = _cast_expr(x.dtype, y.dtype, *_cast_options(ctx))
    return (f"AOTC_UNARY({dtypes.c_type(y.dtype)}, {dtypes.c_kernel_type(x.dtype)}, {ctx.y(0)}, "
            f"{ctx.x(0)}, {y.numel}, {expr});")


# Opsets 23-28 add element types (float4e2m1, float8e8m0, int2/uint2, float6) and
# Cast's round_mode (24); float6 stays refused by from_onnx.
OPS = [
    OpDef("Constant", _constant_infer, since=1, checked_through=28, supports_exact=True),
    OpDef("ConstantOfShape", _constant_of_shape_infer, _constant_of_shape_emit,
          _constant_of_shape_evaluate, since=9, checked_through=28, supports_exact=True),
    OpDef("Shape", _shape_infer, since=1, checked_through=28, supports_exact=True),
    OpDef("Size", _size_infer, since=1, checked_through=28, supports_exact=True),
    OpDef("Cast", _cast_infer, _cast_emit, _cast_evaluate, since=6, checked_through=28,
          supports_exact=True, in_place_inputs=(0,)),
    OpDef("CastLike", _cast_infer, _cast_emit, _cast_evaluate, since=15, checked_through=28,
          supports_exact=True, in_place_inputs=(0,)),
]
