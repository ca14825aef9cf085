"""Dropout: the output is the input and the mask all ones, unless training_mode (an input
from opset 12) is true and the ratio nonzero; then elements are dropped at random and the
rest scaled by 1 / (1 - ratio).

The random mask is drawn at run time as the ONNX reference draws it (numpy's legacy
RandomState(seed).uniform; runtime_c/aotc_dropout.h), so with the node's seed the
result is the reference's. Before opset 12 Dropout is taken in inference form whatever
its attributes say, as runtimes do.
"""
import numpy as np

from .. import dtypes
from ._kinds import c_kind, input_or_null, output_or_null, struct_call
from .base import OpDef, TensorType

RNG_BYTES = 2560          # sizeof(aotc_mt19937), rounded up


def _mask_dtype(ctx):
    return np.dtype(np.bool_) if ctx.opset >= 10 else np.dtype(ctx.inputs[0].dtype)


def _may_train(ctx):
    """False when training_mode is absent or a constant false."""
    if ctx.opset < 12 or not ctx.has_input(2):
        return False
    value = ctx.inputs[2].value
    return value is None or bool(np.asarray(value).reshape(-1)[0])


def _infer(ctx):
    ctx.require_inputs(1, 3 if ctx.opset >= 12 else 1)
    ctx.require_dtype(0, dtypes.FLOATS)
    if ctx.has_input(1):
        ctx.require_dtype(1, dtypes.FLOATS)
        if ctx.inputs[1].numel != 1:
            raise ctx.fail(f"ratio has shape {list(ctx.inputs[1].shape)}; expected a scalar")
    if ctx.has_input(2):
        ctx.require_dtype(2, dtypes.BOOL)
        if ctx.inputs[2].numel != 1:
            raise ctx.fail(f"training_mode has shape {list(ctx.inputs[2].shape)}; expected a scalar")
    seed = ctx.attr("seed", 0)
    if not 0 <= seed < 2 ** 32:
        raise ctx.fail(f"seed={seed}; expected 0 to 2^32 - 1")
    x = ctx.inputs[0]
    return [TensorType(x.dtype, x.shape), TensorType(_mask_dtype(ctx), x.shape)]


def _evaluate(ctx, arrays):
    x = arrays[0]
    ratio = arrays[1] if len(arrays) > 1 and arrays[1] is not None else np.float32(0.5)
    ratio = np.asarray(ratio).reshape(())
    if not _may_train(ctx) or not bool(np.asarray(arrays[2]).reshape(-1)[0]) or ratio == 0:
        return [x.copy(), np.ones(x.shape, _mask_dtype(ctx))]
    keep = np.random.RandomState(int(ctx.attr("seed", 0))).uniform(0, 1, x.shape) >= ratio
    scale = (1 / (1 - ratio.astype(np.float64))).astype(ratio.dtype)
    return [(x * keep * scale).astype(x.dtype), keep.astype(_mask_dtype(ctx))]


def _scratch(ctx):
    return RNG_BYTES if _may_train(ctx) else 0


def _one_bits(dtype):
    """C literal of 1 in dtype's storage, and the storage's C type."""
    one = np.ones((), dtype)
    if dtype in dtypes.HALVES:
        return f"{int(one.view(np.uint16))}u", "uint16_t"
    return ("1" if dtype == np.bool_ else "1.0"), dtypes.c_type(dtype)


def _emit(ctx):
    x = ctx.inputs[0]
    if x.numel == 0:
        return ""
    if _may_train(ctx):
        fields = {"x": ctx.x(0), "ratio": input_or_null(ctx, 1), "training": ctx.x(2),
                  "y": ctx.y(0), "mask": output_or_null(ctx, 1), "kind": c_kind(x.dtype),
                  "ratio_kind": c_kind(ctx.inputs[1].dtype) if ctx.has_input(1) else "AOTC_KIND_F32",
                  "mask_kind": c_kind(_mask_dtype(ctx)), "n": x.numel,
                  "seed": f"{int(ctx.attr('seed', 0))}u",
                  "rng": f"(aotc_mt19937 *)(void *){ctx.scratch}"}
        return struct_call("aotc_dropout_args", "aotc_dropout", fields)
    code = [f"if ((const void *){ctx.y(0)} != (const void *){ctx.x(0)}) "
            f"memcpy({ctx.y(0)}, {ctx.x(0)}, {x.nbytes});"]
    if len(ctx.node.outputs) > 1 and ctx.node.outputs[1]:
        one, c_type = _one_bits(_mask_dtype(ctx))
        code.append(f"{{ int64_t i; for (i = 0; i < {x.numel}; i++) (({c_type} *){ctx.y(1)})[i] = {one}; }}")
    return "\n".join(code)


OPS = [OpDef("Dropout", _infer, _emit, _evaluate, scratch=_scratch, since=1, checked_through=28,
             supports_exact=True, in_place_inputs=(0,))]
