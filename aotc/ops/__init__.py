"""The operator table: every operator module, named once, in one list.

Adding an operator: write its module (OPS = [OpDef(...)]), add it to MODULES below,
add its kernel to runtime_c/ and its tests.
"""
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
    """The OpDef implementing op_type at this opset, or None."""
    op = _TABLE.get((domain, op_type))
    if op is None or opset < op.since:
        return None
    return op


def all_ops():
    return list(_TABLE.values())
