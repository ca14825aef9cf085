"""Element types: ONNX enum <-> numpy dtype <-> C type, in one table."""
import numpy as np
from onnx import TensorProto

from .errors import Unsupported

# onnx enum: (numpy dtype, C type, short name used in kernel names)
_TABLE = {
    TensorProto.FLOAT: (np.float32, "float", "f32"),
    TensorProto.DOUBLE: (np.float64, "double", "f64"),
    TensorProto.INT64: (np.int64, "int64_t", "i64"),
    TensorProto.INT32: (np.int32, "int32_t", "i32"),
    TensorProto.INT16: (np.int16, "int16_t", "i16"),
    TensorProto.INT8: (np.int8, "int8_t", "i8"),
    TensorProto.UINT64: (np.uint64, "uint64_t", "u64"),
    TensorProto.UINT32: (np.uint32, "uint32_t", "u32"),
    TensorProto.UINT16: (np.uint16, "uint16_t", "u16"),
    TensorProto.UINT8: (np.uint8, "uint8_t", "u8"),
    TensorProto.BOOL: (np.bool_, "bool", "bool"),
}
_BY_DTYPE = {np.dtype(v[0]): k for k, v in _TABLE.items()}


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
