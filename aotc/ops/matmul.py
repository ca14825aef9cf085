"""MatMul (numpy semantics) and Gemm, over the runtime's sgemm (runtime_c/aotc_gemm.h).

A constant 2-D float32 B is packed here, at compile time, into the kernel's panel
layout (`pack_b`), so the run skips the per-call packing; the packed and unpacked
paths give the same bits. (`pack_a` does the same for a constant A: the pointwise
convs' weights, aotc/ops/conv.py.) Batched MatMul runs one sgemm per batch entry,
except that batches sharing one B fold into the rows of a single product.
"""
import numpy as np

from .. import dtypes
from .base import OpDef, TensorType, broadcast_shapes, c_float, c_ints, strides

# Must match runtime_c/aotc_gemm.h and aotc_gemm_kernels.h.
KC = 256          # rows of B per K-block
NR = 32           # columns per strip of packed B: every path's register tile width
PACK_A_STRIPS = 4  # scratch for packed A is reserved when N exceeds this many strips

FLOAT = (np.float32,)
WIDE = (np.float64,) + tuple(dtypes.HALVES)     # summed in double by a plain loop
INTS = (np.int32, np.int64, np.uint32, np.uint64)


def _round_up(n, m):
    return (n + m - 1) // m * m


def sgemm_packed_scratch_bytes(M, N, K):
    """Scratch of aotc_sgemm_packed: room for A packed k-major (M * K floats) where the
    kernel may pack it; none for one row or few columns."""
    if M <= 1 or N <= PACK_A_STRIPS * NR:
        return 0
    return _round_up(K * M * 4, 64)


def sgemm_scratch_bytes(M, N, K):
    """Scratch of aotc_sgemm(M, N, K): packed A, then packed B (for N = 1 the product
    runs transposed and A^T is the packed operand)."""
    b_cols = max(M, 1) if N == 1 else N
    return sgemm_packed_scratch_bytes(M, N, K) + _round_up(K * _round_up(b_cols, NR) * 4, 64)


# Rows of a panel of packed A per target (AOTC_SGEMM_MR of its GEMM path).
PANEL_ROWS = {"avx512": 14, "avx2": 3, "generic": 4}


def panels(M, panel_rows):
    """The (first row, rows) of A's panels in packed A: as even as they go, at most
    panel_rows each (aotc_sgemm_panel_ with even panels)."""
    count = -(-M // panel_rows)
    base, taller = divmod(M, count)
    return [(p * base + min(p, taller), base + (p < taller)) for p in range(count)]


def pack_a(a, panel_rows):
    """A (M x K, float32) in the packed layout: K-blocks of KC columns, each A's panels
    in order, a panel k-major (aotc_sgemm_a_panel_); as many floats as A."""
    a = np.asarray(a, np.float32)
    M, K = a.shape
    parts = [a[i0:i0 + rows, pc:pc + KC].T.ravel()
             for pc in range(0, K, KC) for i0, rows in panels(M, panel_rows)]
    return np.concatenate(parts) if parts else np.zeros(0, np.float32)


def pack_b(b):
    """B (K x N, float32) in the packed layout: K-blocks of KC rows, each a run of
    kc x NR strips, the last strip padded with +0."""
    b = np.asarray(b, np.float32)
    K, N = b.shape
    padded = np.zeros((K, _round_up(N, NR)), np.float32)
    padded[:, :N] = b
    blocks = [padded[pc:pc + KC].reshape(-1, padded.shape[1] // NR, NR).transpose(1, 0, 2).ravel()
              for pc in range(0, K, KC)]
    return np.concatenate(blocks) if blocks else np.zeros(0, np.float32)


# ---- MatMul -------------------------------------------------------------------------

class _Product:
    """The shape of one MatMul: batch shape, M, N, K and each operand's batch offsets
    (in elements), with 1-D operands promoted."""

    def __init__(self, ctx, a_shape, b_shape):
        if not a_shape or not b_shape:
            raise ctx.fail("MatMul operands must have rank >= 1")
        a = tuple(a_shape) if len(a_shape) > 1 else (1,) + tuple(a_shape)
        b = tuple(b_shape) if len(b_shape) > 1 else tuple(b_shape) + (1,)
        if a[-1] != b[-2]:
            raise ctx.fail(f"MatMul inner dimensions differ: {list(a_shape)} x {list(b_shape)}")
        self.M, self.K, self.N = a[-2], a[-1], b[-1]
        self.batch = broadcast_shapes(ctx, a[:-2], b[:-2])
        out = self.batch + (self.M, self.N)
        if len(a_shape) == 1:
            out = out[:-2] + out[-1:]
        if len(b_shape) == 1:
            out = out[:-1]
        self.out_shape = tuple(int(d) for d in out)
        self.a_offsets = self._offsets(a[:-2], self.M * self.K)
        self.b_offsets = self._offsets(b[:-2], self.K * self.N)

    def _offsets(self, batch_shape, matrix_size):
        """Element offset of each output batch entry's matrix in an operand."""
        padded = (1,) * (len(self.batch) - len(batch_shape)) + tuple(batch_shape)
        st = strides(padded)
        index = np.zeros(self.batch, np.int64)
        for d, n in enumerate(padded):
            if n != 1:
                shape = [1] * len(self.batch)
                shape[d] = n
                index = index + np.arange(n, dtype=np.int64).reshape(shape) * st[d]
        return (index.ravel() * matrix_size).tolist()

    @property
    def count(self):
        return len(self.a_offsets)

    @property
    def shared_b(self):
        """Every batch entry uses the same B: the entries are rows of one product."""
        return all(o == 0 for o in self.b_offsets)


def _matmul_infer(ctx):
    ctx.require_inputs(2)
    dt = ctx.require_dtype(0, FLOAT + WIDE + INTS)
    if np.dtype(ctx.inputs[1].dtype) != dt:
        raise ctx.fail(f"operand types differ: {dtypes.name(dt)} and "
                       f"{dtypes.name(ctx.inputs[1].dtype)}")
    p = _Product(ctx, ctx.inputs[0].shape, ctx.inputs[1].shape)
    return [TensorType(dt, p.out_shape)]


def _matmul_evaluate(ctx, arrays):
    a, b = arrays
    if a.dtype.kind in "iu":   # wraps like the kernel
        return [np.matmul(a.astype(np.uint64), b.astype(np.uint64)).astype(a.dtype)]
    if a.dtype != np.float32:  # summed in double, rounded once, like the kernel
        return [np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(a.dtype)]
    return [np.matmul(a, b)]


def _constant_b(ctx, p):
    """The 2-D constant float32 B to pack at compile time, or None."""
    b = ctx.inputs[1]
    if b.value is None or np.dtype(b.dtype) != np.float32 or not p.shared_b or p.M * p.N == 0:
        return None
    return np.asarray(b.value, np.float32).reshape(p.K, p.N)


def _matmul_rows(p):
    """Rows of one product: batches sharing B are stacked into M."""
    return p.M * p.count if p.shared_b else p.M


def _matmul_scratch(ctx):
    p = _Product(ctx, ctx.inputs[0].shape, ctx.inputs[1].shape)
    if np.dtype(ctx.inputs[0].dtype) != np.float32:
        return 0
    M = _matmul_rows(p)
    if _constant_b(ctx, p) is not None:
        return sgemm_packed_scratch_bytes(M, p.N, p.K)
    return sgemm_scratch_bytes(M, p.N, p.K)


def _batch_loop(p, call):
    """C running `call` (which uses offsets ao[t], bo[t]) once per batch entry."""
    c_stride = p.M * p.N
    return (f"{{ const int64_t *ao = {c_ints(p.a_offsets)}, *bo = {c_ints(p.b_offsets)}; int64_t t;\n"
            f"  for (t = 0; t < {p.count}; t++) {call.replace('@C', f't * {c_stride}')} }}")


def _matmul_emit(ctx):
    p = _Product(ctx, ctx.inputs[0].shape, ctx.inputs[1].shape)
    if ctx.outputs[0].numel == 0:
        return ""
    a, b, y = ctx.x(0), ctx.x(1), ctx.y(0)
    dt = np.dtype(ctx.inputs[0].dtype)
    if dt in [np.dtype(t) for t in WIDE]:
        call = (f"AOTC_MATMUL_WIDE({dtypes.c_type(dt)}, {dtypes.c_kernel_type(dt)}, {p.M}, {p.N}, {p.K}, "
                f"{a} + ao[t], {b} + bo[t], {y} + @C);")
        return _batch_loop(p, call)
    if dt != np.float32:
        call = (f"AOTC_MATMUL_INT({dtypes.c_type(dt)}, {p.M}, {p.N}, {p.K}, {a} + ao[t], "
                f"{b} + bo[t], {y} + @C);")
        return _batch_loop(p, call)
    packed = _constant_b(ctx, p)
    if p.shared_b:
        M = _matmul_rows(p)
        if packed is not None:
            return (f"aotc_sgemm_packed({ctx.pool}, {M}, {p.N}, {p.K}, {a}, {p.K}, 0, "
                    f"{ctx.const(pack_b(packed))}, {y}, {p.N}, NULL, NULL, {ctx.scratch});")
        return (f"aotc_sgemm({ctx.pool}, {M}, {p.N}, {p.K}, {a}, {p.K}, 0, {b}, {p.N}, 0, "
                f"{y}, {p.N}, NULL, NULL, {ctx.scratch});")
    call = (f"aotc_sgemm({ctx.pool}, {p.M}, {p.N}, {p.K}, {a} + ao[t], {p.K}, 0, {b} + bo[t], "
            f"{p.N}, 0, {y} + @C, {p.N}, NULL, NULL, {ctx.scratch});")
    return _batch_loop(p, call)


# ---- Gemm ---------------------------------------------------------------------------

def _gemm_dims(ctx):
    a, b = ctx.inputs[0].shape, ctx.inputs[1].shape
    if len(a) != 2 or len(b) != 2:
        raise ctx.fail(f"Gemm operands must be 2-D, got {list(a)} and {list(b)}")
    M, K = (a[1], a[0]) if ctx.attr("transA", 0) else a
    Kb, N = (b[1], b[0]) if ctx.attr("transB", 0) else b
    if K != Kb:
        raise ctx.fail(f"Gemm inner dimensions differ: A gives {K}, B gives {Kb}")
    return int(M), int(N), int(K)


def _gemm_c(ctx):
    """C's shape, or None when C is absent or multiplied by beta = 0."""
    if not ctx.has_input(2) or float(ctx.attr("beta", 1.0)) == 0.0:
        return None
    return tuple(ctx.inputs[2].shape)


def _gemm_infer(ctx):
    ctx.require_inputs(2 if ctx.opset >= 11 else 3, 3)
    dt = ctx.require_dtype(0, FLOAT)
    for i in range(1, len(ctx.inputs)):
        if ctx.has_input(i) and np.dtype(ctx.inputs[i].dtype) != dt:
            raise ctx.fail(f"input {i} has element type {dtypes.name(ctx.inputs[i].dtype)}, "
                           f"A has {dtypes.name(dt)}")
    M, N, K = _gemm_dims(ctx)
    if ctx.has_input(2):
        c = tuple(ctx.inputs[2].shape)
        if len(c) > 2 or any(d not in (1, t) for d, t in zip(c[::-1], (N, M))):
            raise ctx.fail(f"Gemm C of shape {list(c)} does not broadcast to [{M}, {N}]")
    return [TensorType(dt, (M, N))]


def _gemm_evaluate(ctx, arrays):
    a, b = arrays[0], arrays[1]
    a = a.T if ctx.attr("transA", 0) else a
    b = b.T if ctx.attr("transB", 0) else b
    y = np.float32(ctx.attr("alpha", 1.0)) * (a @ b)
    if _gemm_c(ctx) is not None:
        y = y + np.float32(ctx.attr("beta", 1.0)) * arrays[2]
    return [y.astype(a.dtype)]


def _gemm_bias(ctx, M, N):
    """How C joins the product: ("n" | "m", pointer) for a kernel bias, ("epilogue", None)
    for the general loop, or (None, None) without C."""
    c = _gemm_c(ctx)
    if c is None:
        return None, None
    alpha, beta = float(ctx.attr("alpha", 1.0)), float(ctx.attr("beta", 1.0))
    value = ctx.inputs[2].value
    if alpha != 1.0:
        return "epilogue", None
    if value is not None:   # beta * C formed once, rounded as the loop would
        scaled = (np.float32(beta) * np.asarray(value, np.float32)).astype(np.float32)
        full = np.broadcast_to(scaled, (M, N))
        if np.array_equal(full, np.broadcast_to(full[:1, :], (M, N))):
            return "n", np.ascontiguousarray(full[0])
        if np.array_equal(full, np.broadcast_to(full[:, :1], (M, N))):
            return "m", np.ascontiguousarray(full[:, 0])
        return "epilogue", None
    if beta != 1.0:
        return "epilogue", None
    if c in ((N,), (1, N)):
        return "n", None
    if c == (M, 1):
        return "m", None
    return "epilogue", None


def _gemm_packed_b(ctx, M, N, K):
    b = ctx.inputs[1].value
    if b is None or M * N == 0:
        return None
    b = np.asarray(b, np.float32)
    return pack_b(b.T if ctx.attr("transB", 0) else b)


def _gemm_scratch(ctx):
    M, N, K = _gemm_dims(ctx)
    if ctx.inputs[1].value is not None:
        return sgemm_packed_scratch_bytes(M, N, K)
    return sgemm_scratch_bytes(M, N, K)


def _gemm_emit(ctx):
    M, N, K = _gemm_dims(ctx)
    if M * N == 0:
        return ""
    ta, tb = int(ctx.attr("transA", 0)), int(ctx.attr("transB", 0))
    a, b, y = ctx.x(0), ctx.x(1), ctx.y(0)
    lda = M if ta else K
    kind, const_bias = _gemm_bias(ctx, M, N)
    bias_m = bias_n = "NULL"
    if kind in ("m", "n"):
        pointer = ctx.x(2) if const_bias is None else ctx.const(np.asarray(const_bias, np.float32))
        if kind == "m":
            bias_m = pointer
        else:
            bias_n = pointer
    packed = _gemm_packed_b(ctx, M, N, K)
    if packed is not None:
        code = (f"aotc_sgemm_packed({ctx.pool}, {M}, {N}, {K}, {a}, {lda}, {ta}, {ctx.const(packed)}, "
                f"{y}, {N}, {bias_m}, {bias_n}, {ctx.scratch});")
    else:
        code = (f"aotc_sgemm({ctx.pool}, {M}, {N}, {K}, {a}, {lda}, {ta}, {b}, {N if not tb else K}, "
                f"{tb}, {y}, {N}, {bias_m}, {bias_n}, {ctx.scratch});")
    alpha = float(ctx.attr("alpha", 1.0))
    if kind == "epilogue" or (kind is None and alpha != 1.0):
        c_ptr, csi, csj = "NULL", 0, 0
        if kind == "epilogue":
            c = (1,) * (2 - len(_gemm_c(ctx))) + _gemm_c(ctx)
            c_ptr = ctx.x(2)
            csi, csj = (c[1] if c[0] != 1 else 0), (1 if c[1] != 1 else 0)
        code += (f"\naotc_sgemm_scale_add({M}, {N}, {y}, {c_float(alpha)}, {c_ptr}, {csi}, {csj}, "
                 f"{c_float(ctx.attr('beta', 1.0))});")
    return code


OPS = [
    OpDef("MatMul", _matmul_infer, _matmul_emit, _matmul_evaluate, scratch=_matmul_scratch,
          since=1, supports_exact=True),
    OpDef("Gemm", _gemm_infer, _gemm_emit, _gemm_evaluate, scratch=_gemm_scratch,
          since=7, supports_exact=True),
]
