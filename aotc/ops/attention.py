"""Attention (ai.aotc): softmax(Q Kt * scale + mask) V in one node, made by the
`attention` pass (aotc/passes/attention.py) from the unfused MatMul/Softmax/MatMul chain.

    Attention(q_input, k_input, v_input[, mask]), attributes scale, q_perm, k_perm,
    v_perm, out_perm (an empty perm is the identity):
    Q = transpose(q_input, q_perm) [.., sq, d]    Kt = transpose(k_input, k_perm) [.., d, sk]
    V = transpose(v_input, v_perm) [.., sk, dv]
    out = transpose(softmax(Q Kt * scale + mask, axis=-1) V, out_perm)

Ranks 2 to 4; batch dims (and the mask) broadcast as MatMul and Add do. The kernel
(runtime_c/aotc_attention.h) streams over key tiles and reads every operand through the
strides the perms give, so no transpose is ever copied.
"""
import numpy as np

from ..ir import AOTC_DOMAIN
from .base import OpDef, TensorType, broadcast_shapes, c_float, c_ints, strides

FLOAT = (np.float32,)
BATCH_DIMS = 2            # the kernel's logical [b, h]
BLOCK_ROWS_MAX = 128      # query rows per task: each packs every key tile once
ROWS_MULTIPLE = 8         # AOTC_ATTN_ROWS_MAX
KEY_TILE = 64             # AOTC_ATTN_BK


def _perm(ctx, name, rank):
    perm = [int(p) for p in (ctx.attr(name) or [])]
    if not perm:
        return list(range(rank))
    if sorted(perm) != list(range(rank)):
        raise ctx.fail(f"{name}={perm} is not a permutation of the {rank} dims of its input")
    return perm


def _logical(ctx, i, name):
    """(logical shape, perm) of operand i: its input shape seen through the perm."""
    shape = ctx.inputs[i].shape
    if not 2 <= len(shape) <= 4:
        raise ctx.unsupported(f"{name} has rank {len(shape)}; Attention takes ranks 2 to 4")
    perm = _perm(ctx, f"{name[0].lower()}_perm", len(shape))
    return tuple(shape[p] for p in perm), perm


class _Layout:
    """Everything infer and emit need: logical shapes, the broadcast batch, the output."""

    def __init__(self, ctx):
        self.q, self.q_perm = _logical(ctx, 0, "Q")
        self.k, self.k_perm = _logical(ctx, 1, "K")
        self.v, self.v_perm = _logical(ctx, 2, "V")
        sq, d = self.q[-2:]
        d_k, sk = self.k[-2:]
        sk_v, dv = self.v[-2:]
        if d != d_k:
            raise ctx.fail(f"Q {list(self.q)} and Kt {list(self.k)} (after their perms) do not "
                           f"multiply: head size {d} against {d_k}")
        if sk != sk_v:
            raise ctx.fail(f"Kt {list(self.k)} has {sk} keys but V {list(self.v)} has {sk_v} rows")
        scores = broadcast_shapes(ctx, self.q[:-2], self.k[:-2]) + (sq, sk)
        self.mask = None
        if ctx.has_input(3):
            self.mask = ctx.inputs[3].shape
            summed = broadcast_shapes(ctx, scores, self.mask)
            if summed[-2:] != (sq, sk):
                raise ctx.unsupported(f"a mask of shape {list(self.mask)} that widens the "
                                      f"scores {list(scores)}")
            scores = summed
        batch = broadcast_shapes(ctx, scores[:-2], self.v[:-2])
        if len(batch) > BATCH_DIMS:
            raise ctx.unsupported(f"{len(batch)} batch dims {list(batch)}; Attention takes "
                                  f"at most {BATCH_DIMS}")
        self.batch, self.sq, self.sk, self.d, self.dv = batch, sq, sk, d, dv
        self.out = batch + (sq, dv)
        self.out_perm = _perm(ctx, "out_perm", len(self.out))
        self.y = tuple(self.out[p] for p in self.out_perm)

    @property
    def dims(self):
        b, h = (1,) * (BATCH_DIMS - len(self.batch)) + tuple(self.batch)
        return [b, h, self.sq, self.sk, self.d, self.dv]


def _operand_strides(shape, perm, logical):
    """Element strides of the 4 kernel dims of a logical operand stored as transpose(x,
    perm) of a row-major x; broadcast (size-1) batch dims get 0."""
    x_shape = [0] * len(perm)
    for k, p in enumerate(perm):
        x_shape[p] = logical[k]
    x_strides = strides(x_shape)
    out = [x_strides[p] for p in perm]
    out = [0] * (4 - len(out)) + out
    dims = (1,) * (4 - len(logical)) + tuple(logical)
    return [0 if dims[k] == 1 and k < 2 else s for k, s in enumerate(out)]


def _mask_strides(mask_shape):
    dims = (1,) * (4 - len(mask_shape)) + tuple(mask_shape)
    return [0 if n == 1 else s for n, s in zip(dims, strides(dims))]


def _output_strides(layout):
    """Strides in the output tensor of the logical out dims [b, h, sq, dv]."""
    y_strides = strides(layout.y)
    logical = [0] * len(layout.out)
    for k, p in enumerate(layout.out_perm):
        logical[p] = y_strides[k]
    return [0] * (4 - len(logical)) + logical


def _block_rows(sq):
    rows = -(-sq // ROWS_MULTIPLE) * ROWS_MULTIPLE
    return min(rows, BLOCK_ROWS_MAX)


def _infer(ctx):
    ctx.require_inputs(3, 4)
    for i in range(len(ctx.inputs)):
        if ctx.has_input(i):
            ctx.require_dtype(i, FLOAT)
    layout = _Layout(ctx)
    return [TensorType(ctx.inputs[0].dtype, layout.y)]


def fused_scratch(dims):
    """Scratch bytes of aotc_attention_f32 for dims [b, h, sq, sk, d, dv]."""
    b, h, sq, _, d, dv = dims
    if sq == 0:
        return 0
    rows = _block_rows(sq)
    per_task = rows * (dv + 2 + d) + d * KEY_TILE
    per_task = -(-per_task // 16) * 16          # aotc_attention_task_floats_
    return b * h * -(-sq // rows) * per_task * 4


def fused_call(pool, pointers, scratch, dims, operand_strides, mask_strides, y_strides, scale):
    """The aotc_attention_f32 call. pointers: q, kt, v, mask (or NULL), y; the strides are
    those of the kernel's logical [b, h, ...] dims of Q, Kt, V, the mask and the output."""
    q, k, v, mask, y = pointers
    args = [pool, q, k, v, mask, y, scratch, c_ints(dims)]
    args += [c_ints(s) for s in operand_strides] + [c_ints(mask_strides), c_ints(y_strides),
                                                    c_float(scale), str(_block_rows(dims[2]))]
    return f"aotc_attention_f32({', '.join(args)});"


def _scratch(ctx):
    return fused_scratch(_Layout(ctx).dims)


def _emit(ctx):
    layout = _Layout(ctx)
    if ctx.outputs[0].numel == 0:
        return ""
    if layout.sk == 0:        # softmax over no keys times no rows of V
        return f"memset({ctx.y(0)}, 0, {ctx.outputs[0].nbytes});"
    operands = [_operand_strides(ctx.inputs[i].shape, perm, shape) for i, perm, shape in
                ((0, layout.q_perm, layout.q), (1, layout.k_perm, layout.k), (2, layout.v_perm, layout.v))]
    mask = ctx.x(3) if layout.mask is not None else "NULL"
    mask_strides = _mask_strides(layout.mask) if layout.mask is not None else []
    return fused_call(ctx.pool, (ctx.x(0), ctx.x(1), ctx.x(2), mask, ctx.y(0)), ctx.scratch,
                      layout.dims, operands, mask_strides, _output_strides(layout),
                      float(ctx.attr("scale", 1.0)))


def _evaluate(ctx, arrays):
    layout = _Layout(ctx)
    q = np.transpose(arrays[0], layout.q_perm).astype(np.float64)
    kt = np.transpose(arrays[1], layout.k_perm).astype(np.float64)
    v = np.transpose(arrays[2], layout.v_perm).astype(np.float64)
    scores = np.matmul(q, kt) * float(np.float32(ctx.attr("scale", 1.0)))
    if layout.mask is not None:
        scores = scores + arrays[3]
    scores = scores - scores.max(axis=-1, keepdims=True)
    probs = np.exp(scores)
    probs /= probs.sum(axis=-1, keepdims=True)
    out = np.matmul(probs, v).reshape(layout.out)
    return [np.transpose(out, layout.out_perm).astype(arrays[0].dtype)]


OPS = [
    OpDef("Attention", _infer, _emit, _evaluate, scratch=_scratch, domain=AOTC_DOMAIN, since=1),
]
