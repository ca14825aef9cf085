"""RotaryEmbedding (opset 23), LinearAttention and CausalConvWithState (opset 27), for
float, float16 and bfloat16 (and double where the schema allows it).

Kernels in runtime_c/aotc_sequence_ops.h, computing in double and rounding to the
element type where the ONNX reference does.
"""
import numpy as np

from .. import dtypes
from ._kinds import c_kind, input_or_null, output_or_null, struct_call
from .base import OpDef, TensorType, c_double

FLOATS = tuple(dtypes.FLOATS)


def _same_type(ctx, indices):
    dt = ctx.require_dtype(indices[0], FLOATS)
    for i in indices[1:]:
        if ctx.has_input(i) and np.dtype(ctx.inputs[i].dtype) != dt:
            raise ctx.fail(f"input {i} has element type {dtypes.name(ctx.inputs[i].dtype)}, "
                           f"input {indices[0]} has {dtypes.name(dt)}")
    return dt


# ---- RotaryEmbedding -------------------------------------------------------------------

class _Rotary:
    """Dims of one RotaryEmbedding node: x as [batch, seq, heads, size], rot rotated."""

    def __init__(self, ctx):
        ctx.require_inputs(3, 4)
        _same_type(ctx, [0, 1, 2])
        x, cos, sin = ctx.inputs[:3]
        if x.rank == 4:
            self.batch, self.heads, self.seq, self.size = x.shape
            self.xs = [x.shape[1] * x.shape[2] * x.shape[3], x.shape[3], x.shape[2] * x.shape[3], 1]
        elif x.rank == 3:
            heads = ctx.attr("num_heads")
            if not heads or heads <= 0 or x.shape[2] % heads:
                raise ctx.fail(f"a 3D input needs num_heads dividing its hidden size "
                               f"{x.shape[2]}; num_heads={heads}")
            self.batch, self.seq = x.shape[:2]
            self.heads, self.size = int(heads), x.shape[2] // heads
            self.xs = [self.seq * x.shape[2], x.shape[2], self.size, 1]
        else:
            raise ctx.fail(f"input of rank {x.rank}; RotaryEmbedding takes 3D or 4D")
        self.rot = int(ctx.attr("rotary_embedding_dim", 0)) or self.size
        if self.rot % 2 or self.rot > self.size:
            raise ctx.fail(f"rotary_embedding_dim={self.rot} must be even and at most the head "
                           f"size {self.size}")
        half = self.rot // 2
        if ctx.has_input(3):
            ctx.require_dtype(3, (np.int64,))
            if ctx.inputs[3].shape != (self.batch, self.seq):
                raise ctx.fail(f"position_ids has shape {list(ctx.inputs[3].shape)}, expected "
                               f"[{self.batch}, {self.seq}]")
            expected = (cos.shape[0] if cos.rank == 2 else "max_position", half)
        else:
            expected = (self.batch, self.seq, half)
        self.rows = int(np.prod(cos.shape[:-1], dtype=np.int64))
        for t, what in ((cos, "cos_cache"), (sin, "sin_cache")):
            if t.shape != expected:
                raise ctx.fail(f"{what} has shape {list(t.shape)}, expected {list(expected)}")


def _rotary_infer(ctx):
    _Rotary(ctx)
    x = ctx.inputs[0]
    return [TensorType(x.dtype, x.shape)]


def _rotary_emit(ctx):
    r = _Rotary(ctx)
    if ctx.outputs[0].numel == 0:
        return ""
    fields = {"x": ctx.x(0), "cos": ctx.x(1), "sin": ctx.x(2), "pos": input_or_null(ctx, 3),
              "y": ctx.y(0), "kind": c_kind(ctx.inputs[0].dtype), "batch": r.batch, "seq": r.seq,
              "heads": r.heads, "size": r.size, "rot": r.rot, "rows": r.rows,
              "interleaved": int(bool(ctx.attr("interleaved", 0))), "xs": r.xs}
    return struct_call("aotc_rotary_args", "aotc_rotary", fields, [ctx.pool], may_fail=True)


# ---- LinearAttention ---------------------------------------------------------------------

_RULES = {"linear": (False, False), "gated": (True, False), "delta": (False, True),
          "gated_delta": (True, True)}
QUERY, KEY, VALUE, PAST, DECAY, BETA = range(6)


class _Linear:
    def __init__(self, ctx):
        ctx.require_inputs(3, 6)
        self.dtype = _same_type(ctx, [QUERY, KEY, VALUE, DECAY, BETA])
        rule = ctx.attr("update_rule", "gated_delta")
        rule = rule.decode() if isinstance(rule, bytes) else rule
        if rule not in _RULES:
            raise ctx.fail(f"update_rule={rule!r}; expected one of {', '.join(_RULES)}")
        gated, delta = _RULES[rule]
        for i, what, needed in ((DECAY, "decay", gated), (BETA, "beta", delta)):
            if ctx.has_input(i) != needed:
                raise ctx.fail(f"update_rule {rule!r} {'requires' if needed else 'forbids'} {what}")
        hq, hkv = ctx.attr("q_num_heads"), ctx.attr("kv_num_heads")
        if not hq or not hkv or hq <= 0 or hkv <= 0 or hq % hkv:
            raise ctx.fail(f"q_num_heads={hq} must be a positive multiple of kv_num_heads={hkv}")
        q, k, v = (ctx.inputs[i] for i in (QUERY, KEY, VALUE))
        if not q.rank == k.rank == v.rank == 3:
            raise ctx.fail("query, key and value must be 3D [batch, steps, heads * size]")
        self.batch, self.steps = q.shape[:2]
        if k.shape[:2] != q.shape[:2] or v.shape[:2] != q.shape[:2]:
            raise ctx.fail(f"query {list(q.shape)}, key {list(k.shape)} and value {list(v.shape)} "
                           f"differ in batch or steps")
        if q.shape[2] % hq or k.shape[2] % hkv or v.shape[2] % hkv:
            raise ctx.fail("hidden sizes are not multiples of the head counts")
        self.hq, self.hkv = int(hq), int(hkv)
        self.dk, self.dv = q.shape[2] // hq, v.shape[2] // hkv
        if k.shape[2] // hkv != self.dk:
            raise ctx.fail(f"key head size {k.shape[2] // hkv} differs from the query's {self.dk}")
        self.decay_size = self._last(ctx, DECAY, "decay", (self.hkv * self.dk, self.hkv)) // self.hkv
        self.beta_heads = self._last(ctx, BETA, "beta", (self.hkv, 1))
        self.state_dtype = self.dtype
        if ctx.has_input(PAST):
            ctx.require_dtype(PAST, (np.float32, np.float16, dtypes.BFLOAT16))
            self.state_dtype = np.dtype(ctx.inputs[PAST].dtype)
            if ctx.inputs[PAST].shape != self.state_shape:
                raise ctx.fail(f"past_state has shape {list(ctx.inputs[PAST].shape)}, expected "
                               f"{list(self.state_shape)}")

    @property
    def state_shape(self):
        return (self.batch, self.hkv, self.dk, self.dv)

    def _last(self, ctx, i, what, allowed):
        """The last dim of decay or beta, checked (1 when absent)."""
        if not ctx.has_input(i):
            return self.hkv
        t = ctx.inputs[i]
        if t.rank != 3 or t.shape[:2] != (self.batch, self.steps) or t.shape[2] not in allowed:
            raise ctx.fail(f"{what} has shape {list(t.shape)}, expected [{self.batch}, "
                           f"{self.steps}, {' or '.join(str(a) for a in allowed)}]")
        return t.shape[2]


def _linear_infer(ctx):
    la = _Linear(ctx)
    return [TensorType(la.dtype, (la.batch, la.steps, la.hq * la.dv)),
            TensorType(la.state_dtype, la.state_shape)]


def _linear_scratch(ctx):
    la = _Linear(ctx)
    return la.batch * la.hkv * (la.dk * la.dv + la.dv) * 8


def _linear_emit(ctx):
    la = _Linear(ctx)
    if la.batch * la.hkv == 0:
        return ""
    scale = float(np.float32(ctx.attr("scale", 0.0))) or 1.0 / np.sqrt(la.dk)
    fields = {"q": ctx.x(QUERY), "k": ctx.x(KEY), "v": ctx.x(VALUE),
              "past": input_or_null(ctx, PAST), "decay": input_or_null(ctx, DECAY),
              "beta": input_or_null(ctx, BETA), "y": ctx.y(0), "present": output_or_null(ctx, 1),
              "scratch": f"(double *)(void *){ctx.scratch}",
              "kind": c_kind(la.dtype), "state_kind": c_kind(la.state_dtype),
              "batch": la.batch, "steps": la.steps, "hq": la.hq, "hkv": la.hkv, "dk": la.dk,
              "dv": la.dv, "decay_size": la.decay_size, "beta_heads": la.beta_heads,
              "scale": c_double(scale)}
    return struct_call("aotc_linear_attention_args", "aotc_linear_attention", fields, [ctx.pool])


# ---- CausalConvWithState -------------------------------------------------------------------

def _conv_infer(ctx):
    ctx.require_inputs(2, 4)
    dt = _same_type(ctx, [0, 1, 2, 3])
    x, w = ctx.inputs[:2]
    activation = ctx.attr("activation", "none")
    activation = activation.decode() if isinstance(activation, bytes) else activation
    if activation not in ("none", "silu", "swish"):
        raise ctx.fail(f"activation={activation!r}; expected 'none', 'silu' or 'swish'")
    if x.rank != 3 or w.rank != 3 or w.shape[:2] != (x.shape[1], 1) or w.shape[2] < 1:
        raise ctx.fail(f"input {list(x.shape)} and weight {list(w.shape)}: expected "
                       f"[batch, channels, length] and [channels, 1, k]")
    batch, channels, _ = x.shape
    state = (batch, channels, w.shape[2] - 1)
    if ctx.has_input(2) and ctx.inputs[2].shape != (channels,):
        raise ctx.fail(f"bias has shape {list(ctx.inputs[2].shape)}, expected [{channels}]")
    if ctx.has_input(3) and ctx.inputs[3].shape != state:
        raise ctx.fail(f"past_state has shape {list(ctx.inputs[3].shape)}, expected {list(state)}")
    return [TensorType(dt, x.shape), TensorType(dt, state)]


def _conv_emit(ctx):
    x, w = ctx.inputs[:2]
    if x.shape[0] * x.shape[1] == 0:
        return ""
    activation = ctx.attr("activation", "none")
    activation = activation.decode() if isinstance(activation, bytes) else activation
    fields = {"x": ctx.x(0), "w": ctx.x(1), "bias": input_or_null(ctx, 2),
              "past": input_or_null(ctx, 3), "y": ctx.y(0), "present": output_or_null(ctx, 1),
              "kind": c_kind(x.dtype), "silu": int(activation != "none"),
              "batch": x.shape[0], "channels": x.shape[1], "length": x.shape[2], "k": w.shape[2]}
    return struct_call("aotc_causal_conv_args", "aotc_causal_conv", fields, [ctx.pool])


OPS = [
    OpDef("RotaryEmbedding", _rotary_infer, _rotary_emit, since=23, checked_through=28,
          in_place_inputs=(0,)),
    OpDef("LinearAttention", _linear_infer, _linear_emit, scratch=_linear_scratch, since=27,
          checked_through=28),
    OpDef("CausalConvWithState", _conv_infer, _conv_emit, since=27, checked_through=28),
]
