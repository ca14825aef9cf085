"""BitCast (opset 26): the input's bits read as another element type of the same width.

The bytes are copied unchanged, except into bool: a byte other than 0 or 1 is no valid
C bool (nor numpy bool), so any nonzero byte becomes 1 there. The 4- and 2-bit types
keep their bits in the low end of a byte (aotc/dtypes.py), so between two of the same
width the byte copies as it is.
"""
import numpy as np

from .. import dtypes
from .base import OpDef, TensorType


def _target(ctx):
    to = ctx.attr("to")
    if to is None:
        raise ctx.fail("BitCast needs the 'to' attribute")
    return dtypes.from_onnx(int(to), f"the 'to' attribute of {ctx.node.name!r}")


def _bitcast_infer(ctx):
    ctx.require_inputs(1)
    x = ctx.inputs[0]
    target = _target(ctx)
    if dtypes.bits(x.dtype) != dtypes.bits(target):
        raise ctx.fail(f"BitCast from {dtypes.name(x.dtype)} ({dtypes.bits(x.dtype)} bits) to "
                       f"{dtypes.name(target)} ({dtypes.bits(target)} bits): the widths differ")
    return [TensorType(target, x.shape)]


def _bitcast_evaluate(ctx, arrays):
    x, target = np.ascontiguousarray(arrays[0]), _target(ctx)
    if target == np.bool_:
        return [x.view(np.uint8) != 0]
    return [x.view(target).copy()]


def _bitcast_emit(ctx):
    x, y = ctx.inputs[0], ctx.outputs[0]
    if y.numel == 0:
        return ""
    if np.dtype(y.dtype) == np.bool_:
        return (f"AOTC_UNARY(bool, uint8_t, {ctx.y(0)}, (const uint8_t *){ctx.x(0)}, {y.numel}, "
                f"(X != 0));")
    return f"memmove({ctx.y(0)}, {ctx.x(0)}, {y.nbytes});"


OPS = [
    OpDef("BitCast", _bitcast_infer, _bitcast_emit, _bitcast_evaluate, since=26,
          checked_through=28, supports_exact=True),
]
