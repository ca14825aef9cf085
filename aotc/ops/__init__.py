"""The operator table: every operator module, named once, in one list.

Adding an operator: write its module (OPS = [OpDef(...)]), add it to MODULES below,
add its kernel to runtime_c/ and its tests.
"""
import functools

import onnx.defs

from . import (activations, attention, binary, constants, conv, gelu, layout, matmul, norm, pool, reduce, unary,
               variadic, views, fused)

MODULES = [
    binary,
    unary,
    activations,
    variadic,
    gelu,
    constants,
    views,
    layout,
    matmul,
    conv,
    pool,
    norm,
    reduce,
    attention,
    fused,
]

_TABLE = {}
for _module in MODULES:
    for _op in _module.OPS:
        _key = (_op.domain, _op.op_type)
        assert _key not in _TABLE, f"operator {_key} defined twice"
        _TABLE[_key] = _op


def find(domain, op_type, opset):
    """The OpDef implementing op_type at this opset, or None. An ONNX operator whose
    definition changed after the opset the OpDef was checked against is not taken:
    a newer definition may mean something else."""
    op = _TABLE.get((domain, op_type))
    if op is None or opset < op.since:
        return None
    if domain == "" and opset > op.checked_through and _since_version(op_type, opset) > op.checked_through:
        return None
    return op


@functools.lru_cache(maxsize=None)
def _since_version(op_type, opset):
    try:
        return onnx.defs.get_schema(op_type, opset, "").since_version
    except onnx.defs.SchemaError:
        return 0


def all_ops():
    return list(_TABLE.values())
