"""The operator table: every module of this package that defines OPS.

Adding an operator: write its module here (OPS = [OpDef(...)]), its kernel in
runtime_c/ (included from aotc_runtime.h) and its tests. Modules are found by name,
so operator families never edit a shared list.
"""
import functools
import importlib
import pkgutil

import onnx.defs

# modules of this package that are helpers, not operator families
_NOT_OPERATORS = {"base", "broadcast"}

MODULES = [importlib.import_module(f"{__name__}.{info.name}")
           for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name)
           if info.name not in _NOT_OPERATORS and not info.name.startswith("_")]

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
