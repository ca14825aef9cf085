/* aotc runtime: single-precision matrix product.
 *
 * C[i,j] = act(sum_k A[i,k] * B[k,j] (+ bias_m[i]) (+ bias_n[j])), act optional.
 *
 * Layout of packed operands (shared with the compile-time packer in aotc/ops/matmul.py):
 * - packed B: K cut into blocks of AOTC_SGEMM_KC rows; within a block, strips of
 *   AOTC_SGEMM_NR columns, each strip a kc x NR panel stored row by row; ragged strips
 *   padded with +0. Block pc starts at pc * strips * NR floats, strip s at s * kc * NR
 *   within it. NR is the same on every target, so compile-time packing needs no target.
 * - packed A (scratch only): the same with panels of MR rows stored k-major
 *   (a[k * MR + i]); MR depends on the target's register file.
 *
 * Order of the arithmetic: every C element is one accumulator summed over k = 0..K-1
 * in order (blocks only store and reload it), then + bias_m, then + bias_n, then the
 * activation, applied to each finished tile by the thread that computed it. Every path
 * (tiles, ragged edges, the M = 1 and N = 1 paths) keeps that order, so results do not
 * depend on tiling or on the thread count; the work split is a function of the shape. */
#ifndef AOTC_GEMM_H_
#define AOTC_GEMM_H_

#include "aotc_base.h"
#include "aotc_math.h"
#include "aotc_threads.h"

#define AOTC_SGEMM_KC 256
#define AOTC_SGEMM_NR 32
#define AOTC_SGEMM_MR_MAX 8   /* scratch is sized for this; every MR divides it */
#if defined(AOTC_TARGET_AVX512)
#define AOTC_SGEMM_MR 8
#elif defined(AOTC_TARGET_AVX2)
#define AOTC_SGEMM_MR 4
#else
#define AOTC_SGEMM_MR 2
#endif
#define AOTC_SGEMM_MC 96      /* rows of C per task (a multiple of every MR) */
#define AOTC_SGEMM_NC 256     /* columns of C per task (a multiple of NR) */
#define AOTC_SGEMV_NC 128     /* columns of C per task on the M = 1 path */
#define AOTC_SGEMV_STRIPS (AOTC_SGEMV_NC / AOTC_SGEMM_NR)
#ifndef AOTC_SGEMV_ROWS_NC
#define AOTC_SGEMV_ROWS_NC 512  /* columns per task on the M = 1 path over row-major B */
#endif

/* Full unrolling keeps the register tile in registers. */
#define AOTC_PRAGMA_(x) _Pragma(#x)
#if defined(__clang__)
#define AOTC_UNROLL(n) AOTC_PRAGMA_(unroll n)
#elif defined(__GNUC__)
#define AOTC_UNROLL(n) AOTC_PRAGMA_(GCC unroll n)
#else
#define AOTC_UNROLL(n)
#endif
#if defined(__GNUC__) || defined(__clang__)
#define AOTC_NOINLINE static __attribute__((noinline, unused))
#else
#define AOTC_NOINLINE AOTC_FN
#endif


AOTC_FN int64_t aotc_sgemm_round_up_(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

/* Floats of a packed B for an N-column, K-row operand. */
AOTC_FN int64_t aotc_sgemm_packed_b_floats(int64_t N, int64_t K) {
  return K * aotc_sgemm_round_up_(N, AOTC_SGEMM_NR);
}

AOTC_FN size_t aotc_sgemm_packed_scratch_bytes(int64_t M, int64_t N, int64_t K) {
  (void)N;
  if (M <= 1) return 0;
  return (size_t)aotc_sgemm_round_up_(K * aotc_sgemm_round_up_(M, AOTC_SGEMM_MR_MAX) * 4, 64);
}

AOTC_FN size_t aotc_sgemm_scratch_bytes(int64_t M, int64_t N, int64_t K) {
  return aotc_sgemm_packed_scratch_bytes(M, N, K) +
         (size_t)aotc_sgemm_round_up_(aotc_sgemm_packed_b_floats(N, K) * 4, 64);
}

#ifdef AOTC_EXACT
#define AOTC_SGEMM_CANON_(v) ((v) != (v) ? aotc_sgemm_nan_() : (v))
AOTC_FN float aotc_sgemm_nan_(void) {
  union { uint32_t u; float f; } nan = {0x7FC00000u};
  return nan.f;
}
#else
#define AOTC_SGEMM_CANON_(v) (v)
#endif

/* ---- activations of the tile epilogue ------------------------------------------- */

/* Each activation as one expression over X, with the same arithmetic as the standalone
 * operator (aotc/ops/activations.py, aotc/ops/gelu.py), so fused and separate give the
 * same bits. A, B: LeakyRelu's alpha; HardSigmoid's alpha, beta; Clip's min, max
 * (-inf, +inf when absent: the comparison is then never true, as without the bound).
 * In exact mode the transcendental functions are aotc's own (aotc_math.h). */
#ifdef AOTC_EXACT
#define AOTC_ACT_EXPF_ aotc_exact_expf
#define AOTC_ACT_TANHF_ aotc_exact_tanhf
#define AOTC_ACT_ERFF_ aotc_exact_erff
#else
#define AOTC_ACT_EXPF_ expf
#define AOTC_ACT_TANHF_ tanhf
#define AOTC_ACT_ERFF_ erff
#endif
#define AOTC_ACT_NONE_EXPR(X, A, B) (X)
#define AOTC_ACT_RELU_EXPR(X, A, B) ((X) > 0 ? (X) : 0)
#define AOTC_ACT_LEAKY_RELU_EXPR(X, A, B) ((X) >= 0 ? (X) : (X) * (A))
#define AOTC_ACT_CLIP_EXPR(X, A, B) \
  (((X) < (A) ? (A) : (X)) > (B) ? (B) : ((X) < (A) ? (A) : (X)))
#define AOTC_ACT_HARD_SIGMOID_EXPR(X, A, B) AOTC_MIN(AOTC_MAX((X) * (A) + (B), 0), 1)
#define AOTC_ACT_HARD_SWISH_EXPR(X, A, B) \
  ((X) * AOTC_ACT_HARD_SIGMOID_EXPR(X, 0.1666666716337204f, 0.5f))
#define AOTC_ACT_SIGMOID_EXPR(X, A, B) (1 / (1 + AOTC_ACT_EXPF_(-(X))))
#define AOTC_ACT_TANH_EXPR(X, A, B) AOTC_ACT_TANHF_(X)
#define AOTC_ACT_GELU_EXPR(X, A, B) (0.5f * (X) * (1 + AOTC_ACT_ERFF_((X) * 0.7071067690849304f)))
#define AOTC_ACT_GELU_TANH_EXPR(X, A, B) \
  (0.5f * (X) *                          \
   (1 + AOTC_ACT_TANHF_(0.7978845834732056f * ((X) + 0.044714998453855515f * (X) * (X) * (X)))))

/* The activation KIND (NONE, RELU, ...; a name of aotc_act_kind without AOTC_ACT_) of the
 * float X: the one spelling of every activation formula. */
#define AOTC_ACTIVATION(KIND, X, A, B) AOTC_ACT_##KIND##_EXPR(X, A, B)

typedef enum {
  AOTC_ACT_NONE, AOTC_ACT_RELU, AOTC_ACT_LEAKY_RELU, AOTC_ACT_CLIP, AOTC_ACT_HARD_SIGMOID,
  AOTC_ACT_HARD_SWISH, AOTC_ACT_SIGMOID, AOTC_ACT_TANH, AOTC_ACT_GELU, AOTC_ACT_GELU_TANH
} aotc_act_kind;

/* An activation and its two parameters (see the expressions above). */
typedef struct {
  aotc_act_kind kind;
  float a, b;
} aotc_activation;

#define AOTC_ACT_CASE_(KIND)                                                      \
  case AOTC_ACT_##KIND:                                                           \
    for (i = 0; i < n; i++) {                                                     \
      float X = y[i];                                                             \
      y[i] = AOTC_SGEMM_CANON_(AOTC_ACTIVATION(KIND, X, a, b));                   \
    }                                                                             \
    break

/* y[i] = act(y[i]) for i < n; act may be NULL (nothing to do). One switch per run of
 * values, so each loop is the plain expression and vectorizes where it can. */
AOTC_FN void aotc_activation_apply(const aotc_activation *act, float *y, int64_t n) {
  float a, b;
  int64_t i;
  if (!act || act->kind == AOTC_ACT_NONE) return;
  a = act->a;
  b = act->b;
  switch (act->kind) {
    AOTC_ACT_CASE_(RELU);
    AOTC_ACT_CASE_(LEAKY_RELU);
    AOTC_ACT_CASE_(CLIP);
    AOTC_ACT_CASE_(HARD_SIGMOID);
    AOTC_ACT_CASE_(HARD_SWISH);
    AOTC_ACT_CASE_(SIGMOID);
    AOTC_ACT_CASE_(TANH);
    AOTC_ACT_CASE_(GELU);
    AOTC_ACT_CASE_(GELU_TANH);
    default: break;
  }
}

/* The same over an M x N block of rows with stride ld. */
AOTC_FN void aotc_activation_apply_2d(const aotc_activation *act, float *y, int64_t ld,
                                      int64_t rows, int64_t cols) {
  int64_t i;
  if (!act || act->kind == AOTC_ACT_NONE) return;
  for (i = 0; i < rows; i++) aotc_activation_apply(act, y + i * ld, cols);
}

/* ---- packing ------------------------------------------------------------------- */

/* Strip s of K-block pc of packed B, from B (K x N, or N x K when trans). */
AOTC_FN void aotc_sgemm_pack_b_strip_(float *AOTC_RESTRICT dst, const float *AOTC_RESTRICT B,
                                      int64_t ldb, int trans, int64_t N, int64_t pc,
                                      int64_t kc, int64_t s) {
  int64_t j0 = s * AOTC_SGEMM_NR, cols = AOTC_MIN(AOTC_SGEMM_NR, N - j0), k, j;
  if (!trans) {
    for (k = 0; k < kc; k++) {
      const float *src = B + (pc + k) * ldb + j0;
      float *row = dst + k * AOTC_SGEMM_NR;
      for (j = 0; j < cols; j++) row[j] = src[j];
      for (; j < AOTC_SGEMM_NR; j++) row[j] = 0.0f;
    }
  } else {
    for (j = 0; j < cols; j++) {
      const float *src = B + (j0 + j) * ldb + pc;
      for (k = 0; k < kc; k++) dst[k * AOTC_SGEMM_NR + j] = src[k];
    }
    for (k = 0; k < kc; k++)
      for (j = cols; j < AOTC_SGEMM_NR; j++) dst[k * AOTC_SGEMM_NR + j] = 0.0f;
  }
}

/* Panel p of K-block pc of packed A, from A (M x K, or K x M when trans). */
AOTC_FN void aotc_sgemm_pack_a_panel_(float *AOTC_RESTRICT dst, const float *AOTC_RESTRICT A,
                                      int64_t lda, int trans, int64_t M, int64_t pc,
                                      int64_t kc, int64_t p) {
  int64_t i0 = p * AOTC_SGEMM_MR, rows = AOTC_MIN(AOTC_SGEMM_MR, M - i0), k, i;
  if (trans) {
    for (k = 0; k < kc; k++) {
      const float *src = A + (pc + k) * lda + i0;
      float *col = dst + k * AOTC_SGEMM_MR;
      for (i = 0; i < rows; i++) col[i] = src[i];
      for (; i < AOTC_SGEMM_MR; i++) col[i] = 0.0f;
    }
  } else {
    for (i = 0; i < rows; i++) {
      const float *src = A + (i0 + i) * lda + pc;
      for (k = 0; k < kc; k++) dst[k * AOTC_SGEMM_MR + i] = src[k];
    }
    for (k = 0; k < kc; k++)
      for (i = rows; i < AOTC_SGEMM_MR; i++) dst[k * AOTC_SGEMM_MR + i] = 0.0f;
  }
}

/* All of B (K x N, or N x K when trans) packed into dst (aotc_sgemm_packed_b_floats). */
AOTC_FN void aotc_sgemm_pack_b(int64_t N, int64_t K, const float *B, int64_t ldb, int trans,
                               float *dst) {
  int64_t strips = (N + AOTC_SGEMM_NR - 1) / AOTC_SGEMM_NR, pc, s;
  for (pc = 0; pc < K; pc += AOTC_SGEMM_KC) {
    int64_t kc = AOTC_MIN(AOTC_SGEMM_KC, K - pc);
    for (s = 0; s < strips; s++)
      aotc_sgemm_pack_b_strip_(dst + pc * strips * AOTC_SGEMM_NR + s * kc * AOTC_SGEMM_NR,
                               B, ldb, trans, N, pc, kc, s);
  }
}

/* ---- register tile -------------------------------------------------------------- */

/* One MR x NR tile of C over one K-block: starts from 0 (first) or from C, and on the
 * last block adds the biases (full-length here; edges pass padded copies). */
AOTC_NOINLINE void aotc_sgemm_tile_(int64_t kc, const float *AOTC_RESTRICT a,
                                    const float *AOTC_RESTRICT b, float *AOTC_RESTRICT c,
                                    int64_t ldc, int first, int last,
                                    const float *AOTC_RESTRICT bias_m,
                                    const float *AOTC_RESTRICT bias_n) {
  float acc[AOTC_SGEMM_MR][AOTC_SGEMM_NR];
  int64_t k;
  int i, j;
  AOTC_UNROLL(8)
  for (i = 0; i < AOTC_SGEMM_MR; i++) {
    AOTC_UNROLL(32)
    for (j = 0; j < AOTC_SGEMM_NR; j++) acc[i][j] = first ? 0.0f : c[i * ldc + j];
  }
  for (k = 0; k < kc; k++) {
    const float *bk = b + k * AOTC_SGEMM_NR;
    AOTC_UNROLL(8)
    for (i = 0; i < AOTC_SGEMM_MR; i++) {
      float av = a[k * AOTC_SGEMM_MR + i];
      AOTC_UNROLL(32)
      for (j = 0; j < AOTC_SGEMM_NR; j++) acc[i][j] += av * bk[j];
    }
  }
  if (last) {
    if (bias_m)
      for (i = 0; i < AOTC_SGEMM_MR; i++)
        for (j = 0; j < AOTC_SGEMM_NR; j++) acc[i][j] += bias_m[i];
    if (bias_n)
      for (i = 0; i < AOTC_SGEMM_MR; i++)
        for (j = 0; j < AOTC_SGEMM_NR; j++) acc[i][j] += bias_n[j];
    for (i = 0; i < AOTC_SGEMM_MR; i++)
      for (j = 0; j < AOTC_SGEMM_NR; j++) acc[i][j] = AOTC_SGEMM_CANON_(acc[i][j]);
  }
  AOTC_UNROLL(8)
  for (i = 0; i < AOTC_SGEMM_MR; i++) {
    AOTC_UNROLL(32)
    for (j = 0; j < AOTC_SGEMM_NR; j++) c[i * ldc + j] = acc[i][j];
  }
}

/* A ragged tile (rows x cols of C): through a full tile in local memory. */
AOTC_FN void aotc_sgemm_edge_tile_(int64_t kc, const float *a, const float *b, float *c,
                                   int64_t ldc, int64_t rows, int64_t cols, int first, int last,
                                   const float *bias_m, const float *bias_n) {
  float tile[AOTC_SGEMM_MR * AOTC_SGEMM_NR] AOTC_ALIGNED(64);
  float bm[AOTC_SGEMM_MR], bn[AOTC_SGEMM_NR];
  int64_t i, j;
  for (i = 0; i < AOTC_SGEMM_MR; i++) {
    bm[i] = bias_m && i < rows ? bias_m[i] : 0.0f;
    for (j = 0; j < AOTC_SGEMM_NR; j++)
      tile[i * AOTC_SGEMM_NR + j] = !first && i < rows && j < cols ? c[i * ldc + j] : 0.0f;
  }
  for (j = 0; j < AOTC_SGEMM_NR; j++) bn[j] = bias_n && j < cols ? bias_n[j] : 0.0f;
  aotc_sgemm_tile_(kc, a, b, tile, AOTC_SGEMM_NR, first, last, bias_m ? bm : NULL,
                   bias_n ? bn : NULL);
  for (i = 0; i < rows; i++)
    for (j = 0; j < cols; j++) c[i * ldc + j] = tile[i * AOTC_SGEMM_NR + j];
}

/* ---- M = 1: one row of C, streaming B once ---------------------------------------- */

/* acc[g * NR + j] += sum over k < kc of a[k] * b[g * gstride + k * NR + j]:
 * AOTC_SGEMV_STRIPS strips of one packed K-block against the vector a, in registers.
 * (a is read as volatile: one scalar load per k, and it keeps gcc from also
 * vectorizing the k loop, which multiplied the code and compile time twentyfold.) */
AOTC_NOINLINE void aotc_sgemv_strips_(int64_t kc, const volatile float *a,
                                      const float *AOTC_RESTRICT b, int64_t gstride,
                                      float *AOTC_RESTRICT acc_io) {
  float acc[AOTC_SGEMV_STRIPS][AOTC_SGEMM_NR];
  int64_t k;
  int g, j;
  AOTC_UNROLL(4)
  for (g = 0; g < AOTC_SGEMV_STRIPS; g++) {
    AOTC_UNROLL(32)
    for (j = 0; j < AOTC_SGEMM_NR; j++) acc[g][j] = acc_io[g * AOTC_SGEMM_NR + j];
  }
  for (k = 0; k < kc; k++) {
    float av = a[k];
    AOTC_UNROLL(4)
    for (g = 0; g < AOTC_SGEMV_STRIPS; g++) {
      const float *bk = b + g * gstride + k * AOTC_SGEMM_NR;
      AOTC_UNROLL(32)
      for (j = 0; j < AOTC_SGEMM_NR; j++) acc[g][j] += av * bk[j];
    }
  }
  AOTC_UNROLL(4)
  for (g = 0; g < AOTC_SGEMV_STRIPS; g++) {
    AOTC_UNROLL(32)
    for (j = 0; j < AOTC_SGEMM_NR; j++) acc_io[g * AOTC_SGEMM_NR + j] = acc[g][j];
  }
}

/* The same for `cols` < AOTC_SGEMV_NC columns (the ragged end of a row). */
AOTC_FN void aotc_sgemv_narrow_(int64_t kc, const float *AOTC_RESTRICT a,
                                const float *AOTC_RESTRICT b, int64_t gstride, int64_t cols,
                                float *AOTC_RESTRICT acc) {
  int64_t k, c;
  for (c = 0; c < cols; c += AOTC_SGEMM_NR) {
    const float *strip = b + c / AOTC_SGEMM_NR * gstride;
    float *out = acc + c;
    int64_t j, width = AOTC_MIN(AOTC_SGEMM_NR, cols - c);
    for (k = 0; k < kc; k++) {
      float av = a[k];
      for (j = 0; j < width; j++) out[j] += av * strip[k * AOTC_SGEMM_NR + j];
    }
  }
}

/* ---- the driver ---------------------------------------------------------------- */

typedef struct {
  int64_t M, N, K, lda, ldb, ldc, mblocks, nblocks, panels, strips, kblocks;
  const float *A, *B, *bias_m, *bias_n;
  const aotc_activation *act;   /* NULL: none */
  int trans_a, trans_b;
  float *C, *pa;       /* pa: packed A (scratch) */
  const float *pb;     /* packed B (scratch or compile time) */
  float *pb_out;       /* where to pack B, NULL when B comes packed */
} aotc_sgemm_job_;

/* Packing tasks: one per (K-block, panel) of A, then one per (K-block, strip) of B. */
AOTC_FN void aotc_sgemm_pack_task_(void *arg, int64_t t) {
  const aotc_sgemm_job_ *j = (const aotc_sgemm_job_ *)arg;
  int64_t a_tasks = j->pa ? j->kblocks * j->panels : 0;
  if (t < a_tasks) {
    int64_t pc = t / j->panels * AOTC_SGEMM_KC, p = t % j->panels;
    int64_t kc = AOTC_MIN(AOTC_SGEMM_KC, j->K - pc);
    aotc_sgemm_pack_a_panel_(j->pa + pc * j->panels * AOTC_SGEMM_MR + p * kc * AOTC_SGEMM_MR,
                             j->A, j->lda, j->trans_a, j->M, pc, kc, p);
  } else {
    int64_t u = t - a_tasks, pc = u / j->strips * AOTC_SGEMM_KC, s = u % j->strips;
    int64_t kc = AOTC_MIN(AOTC_SGEMM_KC, j->K - pc);
    aotc_sgemm_pack_b_strip_(j->pb_out + pc * j->strips * AOTC_SGEMM_NR + s * kc * AOTC_SGEMM_NR,
                             j->B, j->ldb, j->trans_b, j->N, pc, kc, s);
  }
}

/* One MC x NC block of C over all of K: K-blocks outermost so C accumulates in order. */
AOTC_FN void aotc_sgemm_block_task_(void *arg, int64_t t) {
  const aotc_sgemm_job_ *j = (const aotc_sgemm_job_ *)arg;
  int64_t i0 = t / j->nblocks * AOTC_SGEMM_MC, c0 = t % j->nblocks * AOTC_SGEMM_NC;
  int64_t i1 = AOTC_MIN(i0 + AOTC_SGEMM_MC, j->M), c1 = AOTC_MIN(c0 + AOTC_SGEMM_NC, j->N);
  int64_t pc, i, c;
  for (pc = 0; pc < j->K; pc += AOTC_SGEMM_KC) {
    int64_t kc = AOTC_MIN(AOTC_SGEMM_KC, j->K - pc);
    int first = pc == 0, last = pc + kc == j->K;
    const float *ablk = j->pa + pc * j->panels * AOTC_SGEMM_MR;
    const float *bblk = j->pb + pc * j->strips * AOTC_SGEMM_NR;
    for (i = i0; i < i1; i += AOTC_SGEMM_MR) {
      const float *ap = ablk + i / AOTC_SGEMM_MR * kc * AOTC_SGEMM_MR;
      const float *bm = last && j->bias_m ? j->bias_m + i : NULL;
      for (c = c0; c < c1; c += AOTC_SGEMM_NR) {
        const float *bp = bblk + c / AOTC_SGEMM_NR * kc * AOTC_SGEMM_NR;
        const float *bn = last && j->bias_n ? j->bias_n + c : NULL;
        float *cp = j->C + i * j->ldc + c;
        int64_t rows = AOTC_MIN(AOTC_SGEMM_MR, j->M - i), cols = AOTC_MIN(AOTC_SGEMM_NR, j->N - c);
        if (rows == AOTC_SGEMM_MR && cols == AOTC_SGEMM_NR)
          aotc_sgemm_tile_(kc, ap, bp, cp, j->ldc, first, last, bm, bn);
        else
          aotc_sgemm_edge_tile_(kc, ap, bp, cp, j->ldc, rows, cols, first, last, bm, bn);
        if (last) aotc_activation_apply_2d(j->act, cp, j->ldc, rows, cols);   /* still in L1 */
      }
    }
  }
}

/* acc[c] += sum over k < K of a[k * astep] * B[k * ldb + c] for c < cols: row-major B
 * read in runs of whole rows (4 rows per pass over acc, each sum still in k order). */
AOTC_FN void aotc_sgemv_rows_(int64_t K, const float *AOTC_RESTRICT a, int64_t astep,
                              const float *AOTC_RESTRICT B, int64_t ldb, int64_t cols,
                              float *AOTC_RESTRICT acc) {
  int64_t k = 0, c;
  for (; k + 4 <= K; k += 4) {
    const float *b0 = B + k * ldb, *b1 = b0 + ldb, *b2 = b1 + ldb, *b3 = b2 + ldb;
    float a0 = a[k * astep], a1 = a[(k + 1) * astep], a2 = a[(k + 2) * astep];
    float a3 = a[(k + 3) * astep];
    for (c = 0; c < cols; c++) {
      float v = acc[c];
      v += a0 * b0[c];
      v += a1 * b1[c];
      v += a2 * b2[c];
      v += a3 * b3[c];
      acc[c] = v;
    }
  }
  for (; k < K; k++) {
    const float *bk = B + k * ldb;
    float av = a[k * astep];
    for (c = 0; c < cols; c++) acc[c] += av * bk[c];
  }
}

/* One piece of the single row of C (M = 1): AOTC_SGEMV_NC columns of packed B, or
 * AOTC_SGEMV_ROWS_NC columns of row-major B. */
AOTC_FN void aotc_sgemv_task_(void *arg, int64_t t) {
  const aotc_sgemm_job_ *j = (const aotc_sgemm_job_ *)arg;
  float acc[AOTC_SGEMV_ROWS_NC] AOTC_ALIGNED(64);
  int64_t width = j->pb ? AOTC_SGEMV_NC : AOTC_SGEMV_ROWS_NC;
  int64_t c0 = t * width, cols = AOTC_MIN(width, j->N - c0), c, pc;
  int64_t astep = j->trans_a ? j->lda : 1;
  for (c = 0; c < width; c++) acc[c] = 0.0f;
  if (!j->pb) {
    aotc_sgemv_rows_(j->K, j->A, astep, j->B + c0, j->ldb, cols, acc);
  } else {
    float a[AOTC_SGEMM_KC];   /* this K-block of the vector, contiguous */
    for (pc = 0; pc < j->K; pc += AOTC_SGEMM_KC) {
      int64_t kc = AOTC_MIN(AOTC_SGEMM_KC, j->K - pc), gstride = kc * AOTC_SGEMM_NR, k;
      const float *b = j->pb + pc * j->strips * AOTC_SGEMM_NR + c0 / AOTC_SGEMM_NR * gstride;
      for (k = 0; k < kc; k++) a[k] = j->A[(pc + k) * astep];
      if (cols == AOTC_SGEMV_NC)
        aotc_sgemv_strips_(kc, a, b, gstride, acc);
      else
        aotc_sgemv_narrow_(kc, a, b, gstride, cols, acc);
    }
  }
  for (c = 0; c < cols; c++) {
    float v = acc[c];
    if (j->bias_m) v += j->bias_m[0];
    if (j->bias_n) v += j->bias_n[c0 + c];
    j->C[c0 + c] = AOTC_SGEMM_CANON_(v);
  }
  aotc_activation_apply(j->act, j->C + c0, cols);
}

/* The common driver: packed_b is B already packed (then B/ldb/trans_b are unused). */
AOTC_FN void aotc_sgemm_run_(aotc_pool *pool, int64_t M, int64_t N, int64_t K,
                             const float *A, int64_t lda, int trans_a,
                             const float *B, int64_t ldb, int trans_b, const float *packed_b,
                             float *C, int64_t ldc, const float *bias_m, const float *bias_n,
                             const aotc_activation *act, unsigned char *scratch) {
  aotc_sgemm_job_ j;
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    int64_t i, c;
    for (i = 0; i < M; i++)
      for (c = 0; c < N; c++) {
        float v = 0.0f;
        if (bias_m) v += bias_m[i];
        if (bias_n) v += bias_n[c];
        C[i * ldc + c] = AOTC_SGEMM_CANON_(v);
      }
    aotc_activation_apply_2d(act, C, ldc, M, N);
    return;
  }
  /* A single column of C (contiguous) is a row of C^T = B^T A^T: the M = 1 path. */
  if (N == 1 && M > 1 && ldc == 1 && !packed_b) {
    aotc_sgemm_run_(pool, 1, M, K, B, ldb, !trans_b, A, lda, !trans_a, NULL, C, 1,
                    bias_n, bias_m, act, scratch);
    return;
  }
  memset(&j, 0, sizeof j);
  j.M = M; j.N = N; j.K = K; j.lda = lda; j.ldb = ldb; j.ldc = ldc;
  j.A = A; j.B = B; j.C = C; j.trans_a = trans_a; j.trans_b = trans_b;
  j.bias_m = bias_m; j.bias_n = bias_n; j.act = act;
  j.panels = (M + AOTC_SGEMM_MR - 1) / AOTC_SGEMM_MR;
  j.strips = (N + AOTC_SGEMM_NR - 1) / AOTC_SGEMM_NR;
  j.kblocks = (K + AOTC_SGEMM_KC - 1) / AOTC_SGEMM_KC;
  j.pb = packed_b;
  if (M > 1) j.pa = (float *)(void *)scratch;
  if (!packed_b && (M > 1 || trans_b)) {
    j.pb_out = (float *)(void *)(scratch + aotc_sgemm_packed_scratch_bytes(M, N, K));
    j.pb = j.pb_out;
  }
  if (j.pa || j.pb_out)
    aotc_parallel_for(pool, (j.pa ? j.kblocks * j.panels : 0) + (j.pb_out ? j.kblocks * j.strips : 0),
                      aotc_sgemm_pack_task_, &j);
  if (M == 1) {
    int64_t width = j.pb ? AOTC_SGEMV_NC : AOTC_SGEMV_ROWS_NC;
    aotc_parallel_for(pool, (N + width - 1) / width, aotc_sgemv_task_, &j);
    return;
  }
  j.mblocks = (M + AOTC_SGEMM_MC - 1) / AOTC_SGEMM_MC;
  j.nblocks = (N + AOTC_SGEMM_NC - 1) / AOTC_SGEMM_NC;
  aotc_parallel_for(pool, j.mblocks * j.nblocks, aotc_sgemm_block_task_, &j);
}

/* C[i,j] = sum_k A[i,k] * B[k,j]  (+ bias_m[i]) (+ bias_n[j]);  i < M, j < N, k < K.
 * A is M x K with row stride lda (or, when trans_a, stored K x M with row stride lda);
 * B is K x N with row stride ldb (or, when trans_b, stored N x K with row stride ldb);
 * C is M x N with row stride ldc. bias_m / bias_n may be NULL. `scratch` holds at
 * least aotc_sgemm_scratch_bytes(M, N, K) bytes, 64-byte aligned. */
AOTC_FN void aotc_sgemm(aotc_pool *pool, int64_t M, int64_t N, int64_t K,
                        const float *A, int64_t lda, int trans_a,
                        const float *B, int64_t ldb, int trans_b,
                        float *C, int64_t ldc,
                        const float *bias_m, const float *bias_n,
                        unsigned char *scratch) {
  aotc_sgemm_run_(pool, M, N, K, A, lda, trans_a, B, ldb, trans_b, NULL, C, ldc,
                  bias_m, bias_n, NULL, scratch);
}

/* aotc_sgemm, then the activation `act` (NULL: none) on every element of C, in the
 * tile epilogue. */
AOTC_FN void aotc_sgemm_act(aotc_pool *pool, int64_t M, int64_t N, int64_t K,
                            const float *A, int64_t lda, int trans_a,
                            const float *B, int64_t ldb, int trans_b,
                            float *C, int64_t ldc,
                            const float *bias_m, const float *bias_n,
                            const aotc_activation *act, unsigned char *scratch) {
  aotc_sgemm_run_(pool, M, N, K, A, lda, trans_a, B, ldb, trans_b, NULL, C, ldc,
                  bias_m, bias_n, act, scratch);
}

/* The same with B already packed (layout above, e.g. at compile time); the results are
 * bit-identical to aotc_sgemm on the unpacked B. `scratch` holds at least
 * aotc_sgemm_packed_scratch_bytes(M, N, K) bytes, 64-byte aligned. */
AOTC_FN void aotc_sgemm_packed(aotc_pool *pool, int64_t M, int64_t N, int64_t K,
                               const float *A, int64_t lda, int trans_a, const float *packed_b,
                               float *C, int64_t ldc,
                               const float *bias_m, const float *bias_n,
                               unsigned char *scratch) {
  aotc_sgemm_run_(pool, M, N, K, A, lda, trans_a, NULL, 0, 0, packed_b, C, ldc,
                  bias_m, bias_n, NULL, scratch);
}

/* aotc_sgemm_packed with the activation `act` (NULL: none) in the tile epilogue. */
AOTC_FN void aotc_sgemm_packed_act(aotc_pool *pool, int64_t M, int64_t N, int64_t K,
                                   const float *A, int64_t lda, int trans_a,
                                   const float *packed_b, float *C, int64_t ldc,
                                   const float *bias_m, const float *bias_n,
                                   const aotc_activation *act, unsigned char *scratch) {
  aotc_sgemm_run_(pool, M, N, K, A, lda, trans_a, NULL, 0, 0, packed_b, C, ldc,
                  bias_m, bias_n, act, scratch);
}

/* Y = alpha * Y (+ beta * C[i * csi + j * csj]) over an M x N row-major Y; C may be NULL
 * (strides 0 broadcast C): the epilogue of Gemm when C does not fit a bias vector. */
AOTC_FN void aotc_sgemm_scale_add(int64_t M, int64_t N, float *Y, float alpha, const float *C,
                                  int64_t csi, int64_t csj, float beta) {
  int64_t i, j;
  for (i = 0; i < M; i++) {
    float *y = Y + i * N;
    if (C) {
      const float *c = C + i * csi;
      for (j = 0; j < N; j++) y[j] = AOTC_SGEMM_CANON_(alpha * y[j] + beta * c[j * csj]);
    } else {
      for (j = 0; j < N; j++) y[j] = AOTC_SGEMM_CANON_(alpha * y[j]);
    }
  }
}

/* Integer C = A B (M x K times K x N, row-major), wrapping like the element-wise ops. */
#define AOTC_MATMUL_INT(T, M, N, K, A, B, C)                                        \
  do {                                                                              \
    const T *aotc_a_ = (A), *aotc_b_ = (B);                                         \
    T *aotc_c_ = (C);                                                               \
    int64_t aotc_i_, aotc_j_, aotc_k_;                                              \
    for (aotc_i_ = 0; aotc_i_ < (M); aotc_i_++)                                     \
      for (aotc_j_ = 0; aotc_j_ < (N); aotc_j_++) {                                 \
        uint64_t aotc_s_ = 0;                                                       \
        for (aotc_k_ = 0; aotc_k_ < (K); aotc_k_++)                                 \
          aotc_s_ += (uint64_t)aotc_a_[aotc_i_ * (K) + aotc_k_] *                   \
                     (uint64_t)aotc_b_[aotc_k_ * (N) + aotc_j_];                    \
        aotc_c_[aotc_i_ * (N) + aotc_j_] = (T)aotc_s_;                              \
      }                                                                             \
  } while (0)

#endif
