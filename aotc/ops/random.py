"""Random-number operators: RandomUniform, RandomNormal, their -Like forms, Bernoulli and
Multinomial.

Values come from a counter-based generator (runtime_c/aotc_random.h): a node with a
`seed` gives the same values on every run, one without a seed new values each run.
They are never folded at compile time: a constant would repeat its draw forever.
"""
import hashlib

import numpy as np

from .. import dtypes
from .base import OpDef, TensorType, c_double

FLOAT_OUT = dtypes.FLOATS
BERNOULLI_OUT = dtypes.FLOATS + dtypes.INTS + dtypes.BOOL


def _dtype(ctx, default, allowed, what="dtype"):
    value = ctx.attr("dtype")
    dt = np.dtype(default) if value is None else dtypes.from_onnx(int(value), what)
    if dt not in allowed:
        raise ctx.unsupported(f"output type {dtypes.name(dt)} (supported: "
                              f"{', '.join(dtypes.name(t) for t in allowed)})")
    return dt


def _key(ctx):
    """C expression of the node's generator key."""
    seed = ctx.attr("seed")
    if seed is not None:
        bits = int(np.float32(seed).view(np.uint32))
        return f"aotc_mix64(UINT64_C({bits}) ^ UINT64_C(0xA076E0A1A5B2C3D4))"
    stream = int.from_bytes(hashlib.sha256(ctx.node.name.encode()).digest()[:8], "little")
    return f"aotc_random_fresh_key(UINT64_C({stream}))"


def _block(ctx, call):
    if ctx.outputs[0].numel == 0:
        return ""
    return f"{{\n  const uint64_t key = {_key(ctx)};\n  {call};\n}}"


def _distribution_args(ctx, kind):
    if kind == "uniform":
        return float(ctx.attr("low", 0.0)), float(ctx.attr("high", 1.0))
    return float(ctx.attr("mean", 0.0)), float(ctx.attr("scale", 1.0))


def _random(kind, like):
    def infer(ctx):
        if like:
            ctx.require_inputs(1)
            x = ctx.inputs[0]
            dt = _dtype(ctx, x.dtype if dtypes.is_float(x.dtype) else np.float32, FLOAT_OUT)
            if ctx.attr("dtype") is None and not dtypes.is_float(x.dtype):
                raise ctx.fail(f"input is {dtypes.name(x.dtype)}: a dtype attribute is needed")
            shape = tuple(x.shape)
        else:
            ctx.require_inputs(0)
            dt = _dtype(ctx, np.float32, FLOAT_OUT)
            shape = ctx.attr("shape")
            if shape is None or any(int(d) < 0 for d in shape):
                raise ctx.fail(f"shape attribute {shape} must be given and not negative")
            shape = tuple(int(d) for d in shape)
        return [TensorType(dt, shape)]

    def emit(ctx):
        y = ctx.outputs[0]
        a, b = _distribution_args(ctx, kind)
        macro = "AOTC_RANDOM_UNIFORM" if kind == "uniform" else "AOTC_RANDOM_NORMAL"
        return _block(ctx, f"{macro}({dtypes.c_kernel_type(y.dtype)}, {ctx.y(0)}, {y.numel}, key, "
                           f"{c_double(a)}, {c_double(b)})")
    return infer, emit


def _bernoulli_infer(ctx):
    ctx.require_inputs(1)
    ctx.require_dtype(0, FLOAT_OUT)
    x = ctx.inputs[0]
    return [TensorType(_dtype(ctx, x.dtype, BERNOULLI_OUT), x.shape)]


def _bernoulli_emit(ctx):
    x, y = ctx.inputs[0], ctx.outputs[0]
    return _block(ctx, f"AOTC_BERNOULLI({dtypes.c_kernel_type(y.dtype)}, {dtypes.c_kernel_type(x.dtype)}, "
                       f"{ctx.y(0)}, {ctx.x(0)}, {y.numel}, key)")


def _multinomial_infer(ctx):
    ctx.require_inputs(1)
    ctx.require_dtype(0, FLOAT_OUT)
    x = ctx.inputs[0]
    if x.rank != 2 or x.shape[1] < 1:
        raise ctx.fail(f"input must be [batch, classes] with classes >= 1, has shape {list(x.shape)}")
    samples = int(ctx.attr("sample_size", 1))
    if samples < 1:
        raise ctx.fail(f"sample_size {samples} must be at least 1")
    dt = _dtype(ctx, np.int32, (np.dtype(np.int32), np.dtype(np.int64)))
    return [TensorType(dt, (x.shape[0], samples))]


def _multinomial_emit(ctx):
    x, y = ctx.inputs[0], ctx.outputs[0]
    return _block(ctx, f"AOTC_MULTINOMIAL({dtypes.c_type(y.dtype)}, {dtypes.c_kernel_type(x.dtype)}, "
                       f"{ctx.y(0)}, {ctx.x(0)}, {x.shape[0]}, {x.shape[1]}, {y.shape[1]}, key)")


OPS = [
    OpDef("RandomUniform", *_random("uniform", False), since=1, checked_through=28, supports_exact=True),
    OpDef("RandomNormal", *_random("normal", False), since=1, checked_through=28),
    OpDef("RandomUniformLike", *_random("uniform", True), since=1, checked_through=28,
          supports_exact=True),
    OpDef("RandomNormalLike", *_random("normal", True), since=1, checked_through=28),
    OpDef("Bernoulli", _bernoulli_infer, _bernoulli_emit, since=15, checked_through=28,
          supports_exact=True),
    OpDef("Multinomial", _multinomial_infer, _multinomial_emit, since=7, checked_through=28),
]
