"""Element types: ONNX enum <-> numpy dtype <-> C type, in one table.

float16 and bfloat16 are stored as 16-bit words: their C type is uint16_t wherever
values are only stored or moved (pointers, the generated header, layout kernels), and
element-wise kernels name them aotc_f16 / aotc_bf16 (runtime_c/aotc_half.h, same
storage) to load them into float, compute in float and round once on store.

The 8-, 4- and 2-bit types (float8 variants, float4e2m1, int4/uint4, int2/uint2) are
storage types: one element per byte, in the byte layout ml_dtypes gives them in numpy
(4- and 2-bit values in the low bits, the rest zero), so arrays cross the Session
boundary as they are. Their C type is uint8_t; the kernel type names (aotc_f8e4m3fn,
aotc_i4, ...; runtime_c/aotc_cast.h) load them into float (the float types) or
int8_t/uint8_t (the small integers). ONNX's packed form (two 4-bit or four 2-bit values
a byte) exists only in TensorProto, and onnx.numpy_helper unpacks it at import.
"""
import ml_dtypes
import numpy as np
from onnx import TensorProto

from .errors import Unsupported

# onnx enum: (numpy dtype, C type, short name used in kernel names)
_TABLE = {
    TensorProto.FLOAT: (np.float32, "float", "f32"),
    TensorProto.DOUBLE: (np.float64, "double", "f64"),
    TensorProto.FLOAT16: (np.float16, "uint16_t", "f16"),
    TensorProto.BFLOAT16: (ml_dtypes.bfloat16, "uint16_t", "bf16"),
    TensorProto.INT64: (np.int64, "int64_t", "i64"),
    TensorProto.INT32: (np.int32, "int32_t", "i32"),
    TensorProto.INT16: (np.int16, "int16_t", "i16"),
    TensorProto.INT8: (np.int8, "int8_t", "i8"),
    TensorProto.UINT64: (np.uint64, "uint64_t", "u64"),
    TensorProto.UINT32: (np.uint32, "uint32_t", "u32"),
    TensorProto.UINT16: (np.uint16, "uint16_t", "u16"),
    TensorProto.UINT8: (np.uint8, "uint8_t", "u8"),
    TensorProto.BOOL: (np.bool_, "bool", "bool"),
    TensorProto.FLOAT8E4M3FN: (ml_dtypes.float8_e4m3fn, "uint8_t", "f8e4m3fn"),
    TensorProto.FLOAT8E4M3FNUZ: (ml_dtypes.float8_e4m3fnuz, "uint8_t", "f8e4m3fnuz"),
    TensorProto.FLOAT8E5M2: (ml_dtypes.float8_e5m2, "uint8_t", "f8e5m2"),
    TensorProto.FLOAT8E5M2FNUZ: (ml_dtypes.float8_e5m2fnuz, "uint8_t", "f8e5m2fnuz"),
    TensorProto.FLOAT8E8M0: (ml_dtypes.float8_e8m0fnu, "uint8_t", "f8e8m0"),
    TensorProto.FLOAT4E2M1: (ml_dtypes.float4_e2m1fn, "uint8_t", "f4e2m1"),
    TensorProto.INT4: (ml_dtypes.int4, "uint8_t", "i4"),
    TensorProto.UINT4: (ml_dtypes.uint4, "uint8_t", "u4"),
    TensorProto.INT2: (ml_dtypes.int2, "uint8_t", "i2"),
    TensorProto.UINT2: (ml_dtypes.uint2, "uint8_t", "u2"),
}
_BY_DTYPE = {np.dtype(v[0]): k for k, v in _TABLE.items()}

FLOAT16 = np.dtype(np.float16)
BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
HALVES = (FLOAT16, BFLOAT16)
# Groups of element types, as operators list what they accept.
FLOATS = (np.dtype(np.float32), np.dtype(np.float64)) + HALVES
SIGNED_INTS = tuple(np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
UNSIGNED_INTS = tuple(np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
INTS = SIGNED_INTS + UNSIGNED_INTS
NUMERIC = FLOATS + INTS
SIGNED = FLOATS + SIGNED_INTS
BOOL = (np.dtype(np.bool_),)
# The storage-only types: moved by every layout operator, converted by Cast.
FLOAT8 = tuple(np.dtype(t) for t in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz,
                                     ml_dtypes.float8_e5m2, ml_dtypes.float8_e5m2fnuz))
FLOAT8E8M0 = np.dtype(ml_dtypes.float8_e8m0fnu)
FLOAT4E2M1 = np.dtype(ml_dtypes.float4_e2m1fn)
SMALL_FLOATS = FLOAT8 + (FLOAT8E8M0, FLOAT4E2M1)
SMALL_INTS = tuple(np.dtype(t) for t in (ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.int2, ml_dtypes.uint2))
SMALL = SMALL_FLOATS + SMALL_INTS
_KERNEL_TYPE = {FLOAT16: "aotc_f16", BFLOAT16: "aotc_bf16",
                **{t: "aotc_" + _TABLE[_BY_DTYPE[t]][2] for t in SMALL}}
_SUB_BYTE_BITS = {FLOAT4E2M1: 4, **dict(zip(SMALL_INTS, (4, 4, 2, 2)))}
_SMALL_INT_COMPUTE = {t: np.dtype(np.int8 if ml_dtypes.iinfo(t).min < 0 else np.uint8) for t in SMALL_INTS}


def from_onnx(elem_type, what=""):
    """numpy dtype of an ONNX element type; Unsupported for types aotc does not handle."""
    if elem_type not in _TABLE:
        name = TensorProto.DataType.Name(elem_type) if elem_type in TensorProto.DataType.values() else elem_type
        raise Unsupported(f"element type {name} of {what} is not supported")
    return np.dtype(_TABLE[elem_type][0])


def to_onnx(dtype):
    return _BY_DTYPE[np.dtype(dtype)]


def c_type(dtype):
    return _TABLE[to_onnx(dtype)][1]


def short(dtype):
    """Short name used in kernel names: f32, i64, bool, ..."""
    return _TABLE[to_onnx(dtype)][2]


def is_supported(dtype):
    return np.dtype(dtype) in _BY_DTYPE


def name(dtype):
    """The ONNX spelling, as shown to users: 'float32', 'int64', ..."""
    return np.dtype(dtype).name


def is_float(dtype):
    """True for every floating type, bfloat16 and the 8- and 4-bit floats included
    (whose numpy kind is 'V')."""
    return np.dtype(dtype) in FLOATS or np.dtype(dtype) in SMALL_FLOATS


def bits(dtype):
    """Bits of one element as ONNX counts them (4 for int4, 8 for float8, ...)."""
    dtype = np.dtype(dtype)
    return _SUB_BYTE_BITS.get(dtype, 8 * dtype.itemsize)


def compute_dtype(dtype):
    """The numpy type kernels compute this type in: float32 for the 16-, 8- and 4-bit
    floats, int8 / uint8 for the 4- and 2-bit integers."""
    dtype = np.dtype(dtype)
    if dtype in HALVES or dtype in SMALL_FLOATS:
        return np.dtype(np.float32)
    return _SMALL_INT_COMPUTE.get(dtype, dtype)


def c_kernel_type(dtype):
    """The C type name element-wise kernels take: it selects how values are loaded and
    stored (AOTC_LD_<name>, AOTC_ST_<name>); c_type except for the 16-bit floats."""
    return _KERNEL_TYPE.get(np.dtype(dtype)) or c_type(dtype)


def c_compute_type(dtype):
    """The C type an element-wise expression sees this type as."""
    return c_type(compute_dtype(dtype))


def c_load(dtype, element):
    """C expression converting one stored element to its compute type."""
    return f"AOTC_LD_{c_kernel_type(dtype)}({element})"
