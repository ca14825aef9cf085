"""ONNX Attention (opsets 23 to 25): scaled dot-product attention with multi-head, group-
query and multi-query heads, 3D or 4D operands, a bool or float mask, causal and sliding
window masking, softcap, a key/value cache (past inputs, present outputs), padded caches
(nonpad_kv_seqlen) and the qk_matmul_output debug output.

The kernel (runtime_c/aotc_onnx_attention.h) follows the ONNX reference step by step,
rounding to the operands' type where the reference does, so float16 and bfloat16 results
match it. (The `attention` pass makes the fast ai.aotc Attention from unfused graphs.)
"""
import numpy as np
from onnx import TensorProto

from .. import dtypes
from ._kinds import c_kind, input_or_null, output_or_null, output_wanted, struct_call
from .attention import fused_call, fused_scratch
from .base import OpDef, TensorType, broadcast_shapes, c_double, strides

FLOATS = tuple(dtypes.FLOATS)
_SOFTMAX_PRECISIONS = {TensorProto.FLOAT: np.float32, TensorProto.FLOAT16: np.float16,
                       TensorProto.DOUBLE: np.float64, TensorProto.BFLOAT16: dtypes.BFLOAT16}
Q, K, V, MASK, PAST_K, PAST_V, NONPAD = range(7)
CAUSAL_MASK_MAX = 1 << 18     # elements of a causal mask the streamed kernel gets as a constant


class _Layout:
    """Heads, lengths and sizes of one Attention node, checked."""

    def __init__(self, ctx):
        ctx.require_inputs(3, 7)
        q, k, v = (ctx.inputs[i] for i in (Q, K, V))
        self.dtype = ctx.require_dtype(Q, FLOATS)
        for i, what in ((K, "K"), (V, "V")):
            if np.dtype(ctx.inputs[i].dtype) != self.dtype:
                raise ctx.unsupported(f"{what} has element type {dtypes.name(ctx.inputs[i].dtype)}, "
                                      f"Q has {dtypes.name(self.dtype)} (one type for Q, K and V "
                                      f"only)")
        if not q.rank == k.rank == v.rank or q.rank not in (3, 4):
            raise ctx.fail(f"Q, K and V must all be 3D or all 4D; they have ranks "
                           f"{q.rank}, {k.rank}, {v.rank}")
        self.rank = q.rank
        heads_given = ctx.attr("q_num_heads") is not None or ctx.attr("kv_num_heads") is not None
        if self.rank == 4:
            if heads_given and ctx.opset >= 25:
                raise ctx.fail("q_num_heads and kv_num_heads must not be given with 4D inputs")
            self.batch, self.hq, self.sq, self.d = q.shape
            _, self.hkv, self.skv, d_k = k.shape
            _, h_v, skv_v, self.dv = v.shape
            if h_v != self.hkv:
                raise ctx.fail(f"K has {self.hkv} heads but V has {h_v}")
        else:
            self.hq, self.hkv = self._heads_3d(ctx)
            self.batch, self.sq = q.shape[:2]
            self.skv, skv_v = k.shape[1], v.shape[1]
            self.d, d_k, self.dv = self._head_size(ctx, q, self.hq, "Q"), \
                self._head_size(ctx, k, self.hkv, "K"), self._head_size(ctx, v, self.hkv, "V")
        if k.shape[0] != self.batch or v.shape[0] != self.batch:
            raise ctx.fail(f"batch sizes differ: Q {q.shape[0]}, K {k.shape[0]}, V {v.shape[0]}")
        if d_k != self.d:
            raise ctx.fail(f"Q has head size {self.d} but K has {d_k}")
        if skv_v != self.skv:
            raise ctx.fail(f"K has {self.skv} positions but V has {skv_v}")
        if self.hkv == 0 or self.hq % self.hkv:
            raise ctx.fail(f"{self.hq} query heads are not a multiple of {self.hkv} key/value heads")
        self.past = self._past(ctx)
        self.total = self.past + self.skv
        self.nonpad = self._nonpad(ctx)
        self.mask = self._mask(ctx)
        self.softmax_dtype = self._softmax_dtype(ctx)

    @staticmethod
    def _heads_3d(ctx):
        hq, hkv = ctx.attr("q_num_heads"), ctx.attr("kv_num_heads")
        if hq is None or hkv is None:
            raise ctx.fail("3D inputs need the q_num_heads and kv_num_heads attributes")
        if hq <= 0 or hkv <= 0:
            raise ctx.fail(f"q_num_heads={hq} and kv_num_heads={hkv} must be positive")
        return int(hq), int(hkv)

    @staticmethod
    def _head_size(ctx, t, heads, what):
        if t.shape[2] % heads:
            raise ctx.fail(f"{what} hidden size {t.shape[2]} is not a multiple of {heads} heads")
        return t.shape[2] // heads

    def _past(self, ctx):
        has_k, has_v = ctx.has_input(PAST_K), ctx.has_input(PAST_V)
        if has_k != has_v:
            raise ctx.fail("past_key and past_value must be given together")
        if not has_k:
            return 0
        pk, pv = ctx.inputs[PAST_K], ctx.inputs[PAST_V]
        for t, what, size in ((pk, "past_key", self.d), (pv, "past_value", self.dv)):
            if np.dtype(t.dtype) != self.dtype:
                raise ctx.unsupported(f"{what} has element type {dtypes.name(t.dtype)}, Q has "
                                      f"{dtypes.name(self.dtype)}")
            if t.rank != 4 or t.shape[:2] != (self.batch, self.hkv) or t.shape[3] != size:
                raise ctx.fail(f"{what} has shape {list(t.shape)}, expected "
                               f"[{self.batch}, {self.hkv}, past, {size}]")
        if pk.shape[2] != pv.shape[2]:
            raise ctx.fail(f"past_key has {pk.shape[2]} positions but past_value has {pv.shape[2]}")
        return pk.shape[2]

    def _nonpad(self, ctx):
        if not ctx.has_input(NONPAD):
            return False
        if self.past:
            raise ctx.fail("nonpad_kv_seqlen cannot be combined with past_key and past_value")
        ctx.require_dtype(NONPAD, (np.int64,))
        if ctx.inputs[NONPAD].shape != (self.batch,):
            raise ctx.fail(f"nonpad_kv_seqlen has shape {list(ctx.inputs[NONPAD].shape)}, "
                           f"expected [{self.batch}]")
        return True

    def _mask(self, ctx):
        """The mask's shape, or None."""
        if not ctx.has_input(MASK):
            return None
        m = ctx.inputs[MASK]
        dt = np.dtype(m.dtype)
        if dt != np.bool_ and dt != self.dtype:
            raise ctx.unsupported(f"attn_mask of element type {dtypes.name(dt)} (bool, or Q's "
                                  f"type {dtypes.name(self.dtype)}, only)")
        if not 1 <= m.rank <= 4:
            raise ctx.fail(f"attn_mask has rank {m.rank}; expected 1 to 4")
        if m.shape[-1] > self.total:
            raise ctx.fail(f"attn_mask covers {m.shape[-1]} keys, more than the {self.total} "
                           f"there are")
        scores = (self.batch, self.hq, self.sq, m.shape[-1])
        if broadcast_shapes(ctx, scores, m.shape) != scores:
            raise ctx.fail(f"attn_mask of shape {list(m.shape)} does not broadcast to the "
                           f"scores {list(scores)}")
        return tuple(m.shape)

    def _softmax_dtype(self, ctx):
        precision = ctx.attr("softmax_precision")
        if precision is None:
            return self.dtype
        if precision not in _SOFTMAX_PRECISIONS:
            raise ctx.fail(f"softmax_precision={precision}; expected one of "
                           f"{sorted(_SOFTMAX_PRECISIONS)}")
        return np.dtype(_SOFTMAX_PRECISIONS[precision])

    def y_shape(self):
        if self.rank == 3:
            return (self.batch, self.sq, self.hq * self.dv)
        return (self.batch, self.hq, self.sq, self.dv)

    def operand_strides(self, heads, length, size):
        """Element strides of the logical [b, h, s, d] of a Q/K/V/Y operand."""
        if self.rank == 3:
            return [length * heads * size, size, heads * size, 1]
        return list(strides((self.batch, heads, length, size)))

    def mask_strides(self):
        dims = (1,) * (4 - len(self.mask)) + self.mask
        return [0 if n == 1 else s for n, s in zip(dims, strides(dims))]


def _check_attributes(ctx):
    mode = ctx.attr("qk_matmul_output_mode", 0)
    if mode not in (0, 1, 2, 3):
        raise ctx.fail(f"qk_matmul_output_mode={mode}; expected 0 to 3")
    if ctx.attr("is_causal", 0) not in (0, 1):
        raise ctx.fail(f"is_causal={ctx.attr('is_causal')}; expected 0 or 1")
    for name in ("left_window_size", "right_window_size"):
        if ctx.attr(name, -1) < -1:
            raise ctx.fail(f"{name}={ctx.attr(name)}; expected -1 or a size >= 0")
    if ctx.attr("softcap", 0.0) < 0:
        raise ctx.fail(f"softcap={ctx.attr('softcap')} is negative")


def _infer(ctx):
    _check_attributes(ctx)
    lay = _Layout(ctx)
    if lay.total == 0 and lay.sq * lay.hq * lay.batch:
        raise ctx.unsupported("attention over no keys")
    dt = lay.dtype
    return [TensorType(dt, lay.y_shape()),
            TensorType(dt, (lay.batch, lay.hkv, lay.total, lay.d)),
            TensorType(dt, (lay.batch, lay.hkv, lay.total, lay.dv)),
            TensorType(dt, (lay.batch, lay.hq, lay.sq, lay.total))][:max(1, len(ctx.node.outputs))]


def _task_doubles(lay):
    return lay.total * (lay.d + lay.dv + 1) + lay.d + lay.dv


def _fused_form(ctx, lay):
    """(dims, Q, Kt, V and Y strides) for the streamed float kernel of the ai.aotc
    Attention (aotc_attention_f32) when this node needs nothing else: float, no cache,
    no extra outputs, no softcap, window or padding, and no mask but a causal one
    without an offset (where no row is fully masked) and small enough to be a constant.
    None otherwise."""
    plain = (lay.dtype == np.float32 and lay.softmax_dtype == np.float32 and not lay.past
             and not lay.nonpad and lay.mask is None and lay.sq * lay.total > 0
             and not any(output_wanted(ctx, i) for i in (1, 2, 3))
             and not ctx.attr("softcap", 0.0)
             and ctx.attr("left_window_size", -1) == -1 and ctx.attr("right_window_size", -1) == -1)
    causal_too_big = ctx.attr("is_causal", 0) and lay.sq * lay.total > CAUSAL_MASK_MAX
    if not plain or causal_too_big or (lay.rank == 3 and lay.hq != lay.hkv):
        return None
    group = lay.hq // lay.hkv
    q = lay.operand_strides(lay.hq, lay.sq, lay.d)
    k = lay.operand_strides(lay.hkv, lay.skv, lay.d)
    v = lay.operand_strides(lay.hkv, lay.skv, lay.dv)
    y = lay.operand_strides(lay.hq, lay.sq, lay.dv)
    # [b, h] become [b * kv heads, heads per kv head]; with 3D operands there is one group
    dims = [lay.batch * lay.hkv, group, lay.sq, lay.total, lay.d, lay.dv]
    if lay.rank == 3:
        dims = [lay.batch, lay.hq, lay.sq, lay.total, lay.d, lay.dv]
        return dims, q, [k[0], k[1], k[3], k[2]], v, y
    return (dims, [q[1] * group, q[1], q[2], q[3]], [k[1], 0, k[3], k[2]], [v[1], 0, v[2], v[3]],
            [y[1] * group, y[1], y[2], y[3]])


def _scratch(ctx):
    lay = _Layout(ctx)
    fused = _fused_form(ctx, lay)
    if fused:
        return fused_scratch(fused[0])
    return lay.batch * lay.hkv * _task_doubles(lay) * 8


def _fused_emit(ctx, lay, fused):
    dims, q, k, v, y = fused
    mask, mask_strides = "NULL", []
    if ctx.attr("is_causal", 0):
        causal = np.triu(np.full((lay.sq, lay.total), -np.inf, np.float32), k=1)
        mask, mask_strides = ctx.const(causal), [0, 0, lay.total, 1]
    scale = ctx.attr("scale")
    scale = 1.0 / np.sqrt(lay.d) if scale is None else scale
    return fused_call(ctx.pool, (ctx.x(Q), ctx.x(K), ctx.x(V), mask, ctx.y(0)), ctx.scratch, dims,
                      [q, k, v], mask_strides, y, scale)


def _scale(ctx, lay):
    """sqrt(scale) in the operands' type: the reference scales Q and K by it."""
    scale = ctx.attr("scale")
    scale = 1.0 / np.sqrt(np.float64(lay.d)) if scale is None else np.float64(scale)
    return float(np.asarray(np.sqrt(scale)).astype(lay.dtype).astype(np.float64))


def _emit(ctx):
    lay = _Layout(ctx)
    if all(ctx.outputs[i].numel == 0 for i in range(len(ctx.outputs)) if output_wanted(ctx, i)):
        return ""
    fused = _fused_form(ctx, lay)
    if fused:
        return _fused_emit(ctx, lay, fused)

    def x(i):
        return input_or_null(ctx, i)

    def y(i):
        return output_or_null(ctx, i)

    fields = {
        "q": x(Q), "k": x(K), "v": x(V), "past_k": x(PAST_K), "past_v": x(PAST_V),
        "mask": x(MASK), "nonpad": x(NONPAD),
        "y": y(0), "present_k": y(1), "present_v": y(2), "qk": y(3),
        "scratch": f"(double *)(void *){ctx.scratch}",
        "kind": c_kind(lay.dtype),
        "mask_kind": c_kind(ctx.inputs[MASK].dtype) if lay.mask else "AOTC_KIND_BOOL",
        "softmax_kind": c_kind(lay.softmax_dtype),
        "causal": int(ctx.attr("is_causal", 0)),
        "qk_mode": int(ctx.attr("qk_matmul_output_mode", 0)),
        "batch": lay.batch, "hq": lay.hq, "hkv": lay.hkv, "sq": lay.sq, "skv": lay.skv,
        "past": lay.past, "d": lay.d, "dv": lay.dv,
        "qs": lay.operand_strides(lay.hq, lay.sq, lay.d),
        "ks": lay.operand_strides(lay.hkv, lay.skv, lay.d),
        "vs": lay.operand_strides(lay.hkv, lay.skv, lay.dv),
        "ys": lay.operand_strides(lay.hq, lay.sq, lay.dv),
        "ms": lay.mask_strides() if lay.mask else [0, 0, 0, 0],
        "mask_len": lay.mask[-1] if lay.mask else lay.total,
        "left": int(ctx.attr("left_window_size", -1)),
        "right": int(ctx.attr("right_window_size", -1)),
        "scale": c_double(_scale(ctx, lay)),
        "softcap": c_double(np.float32(ctx.attr("softcap", 0.0))),
    }
    return struct_call("aotc_onnx_attention_args", "aotc_onnx_attention", fields, [ctx.pool])


OPS = [OpDef("Attention", _infer, _emit, scratch=_scratch, since=23, checked_through=28)]
