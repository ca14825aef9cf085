/* aotc runtime: fused attention, out = softmax(Q Kt * scale + mask) V, streamed.
 *
 * Logical operands (any layout: every one is read or written through element strides,
 * so the head-split and head-merge transposes of a model cost nothing):
 *   Q [b, h, sq, d], Kt [b, h, d, sk], V [b, h, sk, dv], mask [b, h, sq, sk] (optional),
 *   out [b, h, sq, dv]; a stride of 0 broadcasts a dim.
 *
 * The s x s score matrix is never held: a task owns one block of query rows of one
 * (b, h) and walks the keys in tiles of AOTC_ATTN_BK. For each tile it packs Kt's
 * columns (d x BK, zero padded), and for each group of AOTC_ATTN_ROWS query rows forms
 * the score tile, updates the row's running max and sum (rescaling the accumulator when
 * the max grows) and adds P_tile V_tile to the accumulator; the end divides by the sum.
 * Tasks are (b, h, query block) with the block size chosen by the compiler from the
 * shape, so the results do not depend on the thread count.
 *
 * The score and value products are register tiles (ROWS x BK, ROWS x DVW); a dv that
 * is not a multiple of DVW, or V strided along dv, takes a plain loop for the value
 * product. exp is aotc_fast_expf (aotc_math.h), vectorized.
 *
 * Scratch: aotc_attention_task_floats_ floats per task (accumulator, running max and
 * sum, the packed query block, the packed key tile), 64-byte aligned;
 * aotc/ops/attention.py sizes it the same way. */
#ifndef AOTC_ATTENTION_H_
#define AOTC_ATTENTION_H_

#include "aotc_base.h"
#include "aotc_math.h"
#include "aotc_threads.h"

/* ---- the entry point ------------------------------------------------------------------ */

/* dims: b, h, sq, sk, d, dv. Strides (elements) of logical Q, Kt, V, mask and out, four
 * each in the order of their dims. block_rows: query rows per task, a multiple of
 * AOTC_ATTN_ROWS_MAX. mask may be NULL. scratch: b * h * ceil(sq / block_rows) *
 * aotc_attention_task_floats_(block_rows, d, dv) floats, 64-byte aligned. */
AOTC_ENGINE_FN void aotc_attention_f32(aotc_pool *pool, const float *q, const float *k, const float *v,
                                       const float *mask, float *y, unsigned char *scratch,
                                       const int64_t *dims, const int64_t *q_strides,
                                       const int64_t *k_strides, const int64_t *v_strides,
                                       const int64_t *mask_strides, const int64_t *y_strides,
                                       float scale, int64_t block_rows);

#ifndef AOTC_ENGINE_EXTERN   /* the body: here, or in the engine object (aotc_base.h) */

#define AOTC_ATTN_BK 64          /* keys per tile */
#define AOTC_ATTN_ROWS_MAX 8     /* query blocks are a multiple of this; every ROWS divides it */
#if defined(AOTC_TARGET_AVX512)
#define AOTC_ATTN_ROWS 4         /* query rows per register tile */
#define AOTC_ATTN_DVW 64         /* output columns per register tile */
#elif defined(AOTC_TARGET_AVX2)
#define AOTC_ATTN_ROWS 2
#define AOTC_ATTN_DVW 32
#else
#define AOTC_ATTN_ROWS 2
#define AOTC_ATTN_DVW 16
#endif

/* Register tiles are fully unrolled so that they stay in registers; the micro-kernels
 * are kept out of line so that the compiler allocates registers for them alone. */
#define AOTC_ATTN_PRAGMA_(x) _Pragma(#x)
#if defined(__clang__)
#define AOTC_ATTN_UNROLL_(n) AOTC_ATTN_PRAGMA_(unroll n)
#elif defined(__GNUC__)
#define AOTC_ATTN_UNROLL_(n) AOTC_ATTN_PRAGMA_(GCC unroll n)
#else
#define AOTC_ATTN_UNROLL_(n)
#endif
#if defined(__GNUC__) || defined(__clang__)
#define AOTC_ATTN_KERNEL_ static __attribute__((noinline, unused))
#else
#define AOTC_ATTN_KERNEL_ AOTC_FN
#endif

typedef struct {
  const float *q, *k, *v, *mask;
  float *y;
  float *scratch;
  int64_t heads, sq, sk, d, dv, block_rows, blocks, task_floats;
  int64_t qs[4], ks[4], vs[4], ms[4], ys[4];
  float scale;
} aotc_attention_args_;

/* Floats of scratch one task uses. */
AOTC_FN int64_t aotc_attention_task_floats_(int64_t block_rows, int64_t d, int64_t dv) {
  int64_t n = block_rows * (dv + 2 + d) + d * AOTC_ATTN_BK;
  return (n + 15) / 16 * 16;
}

/* exp for the softmax; results below the normal range become 0, so no subnormal ever
 * reaches the products (masked keys would otherwise make them); NaN stays NaN. A
 * bit-mask select: a product by the comparison left a branch in the loop, which kept
 * gcc from vectorizing it. */
AOTC_FN float aotc_attention_exp_(float x) {
  return aotc_math_select_(!(x < -87.0f), aotc_fast_expf(x), 0.0f);
}

/* Columns [k0, k0 + bk) of Kt (strides ks_d, ks_k) as a d x BK tile, zero padded. */
AOTC_FN void aotc_attention_pack_keys_(const float *AOTC_RESTRICT kt, int64_t ks_d, int64_t ks_k,
                                       int64_t d, int64_t bk, float *AOTC_RESTRICT kp) {
  int64_t j, c;
  for (j = 0; j < bk; j++) {
    const float *col = kt + j * ks_k;
    for (c = 0; c < d; c++) kp[c * AOTC_ATTN_BK + j] = col[c * ks_d];
  }
  for (c = 0; c < d; c++)
    for (j = bk; j < AOTC_ATTN_BK; j++) kp[c * AOTC_ATTN_BK + j] = 0.0f;
}

/* s[r][:] = row r of the packed query panel (qp[c * ROWS + r]) times the packed key
 * tile, for ROWS rows. (The scalar operands of the register tiles here and below are
 * read as volatile: one scalar load each, and it keeps gcc from also vectorizing the
 * outer loop, which multiplies the code and spills the tile.) */
AOTC_ATTN_KERNEL_ void aotc_attention_scores_(int64_t d, const volatile float *qp,
                                              const float *AOTC_RESTRICT kp, float *AOTC_RESTRICT s) {
  float acc[AOTC_ATTN_ROWS][AOTC_ATTN_BK];
  int64_t c;
  int r, j;
  AOTC_ATTN_UNROLL_(8)
  for (r = 0; r < AOTC_ATTN_ROWS; r++) {
    AOTC_ATTN_UNROLL_(64)
    for (j = 0; j < AOTC_ATTN_BK; j++) acc[r][j] = 0.0f;
  }
  for (c = 0; c < d; c++) {
    const float *kr = kp + c * AOTC_ATTN_BK;
    AOTC_ATTN_UNROLL_(8)
    for (r = 0; r < AOTC_ATTN_ROWS; r++) {
      const float a = qp[c * AOTC_ATTN_ROWS + r];
      AOTC_ATTN_UNROLL_(64)
      for (j = 0; j < AOTC_ATTN_BK; j++) acc[r][j] += a * kr[j];
    }
  }
  AOTC_ATTN_UNROLL_(8)
  for (r = 0; r < AOTC_ATTN_ROWS; r++) {
    AOTC_ATTN_UNROLL_(64)
    for (j = 0; j < AOTC_ATTN_BK; j++) s[r * AOTC_ATTN_BK + j] = acc[r][j];
  }
}

/* Max and sum of a BK tile by halving: elementwise steps of constant length, which
 * gcc vectorizes (a running max over lanes it does not), in a fixed order. */
#define AOTC_ATTN_HALVE_(h, n, OP) \
  for (l = 0; l < (n); l++) h[l] = OP(h[l], h[l + (n)])
#define AOTC_ATTN_MAX_(a, b) ((a) > (b) ? (a) : (b))
#define AOTC_ATTN_ADD_(a, b) ((a) + (b))
#define AOTC_ATTN_TILE_REDUCE_(s, OP)                                   \
  float h[AOTC_ATTN_BK];                                                \
  int l;                                                                \
  for (l = 0; l < AOTC_ATTN_BK; l++) h[l] = s[l];                       \
  AOTC_ATTN_HALVE_(h, 32, OP);                                          \
  AOTC_ATTN_HALVE_(h, 16, OP);                                          \
  AOTC_ATTN_HALVE_(h, 8, OP);                                           \
  AOTC_ATTN_HALVE_(h, 4, OP);                                           \
  AOTC_ATTN_HALVE_(h, 2, OP);                                           \
  return OP(h[0], h[1])
#if AOTC_ATTN_BK != 64
#error "the tile reductions below halve a tile of 64"
#endif

AOTC_FN float aotc_attention_tile_max_(const float *AOTC_RESTRICT s) {
  AOTC_ATTN_TILE_REDUCE_(s, AOTC_ATTN_MAX_);
}

AOTC_FN float aotc_attention_tile_sum_(const float *AOTC_RESTRICT s) {
  AOTC_ATTN_TILE_REDUCE_(s, AOTC_ATTN_ADD_);
}

/* One row of scores: scale, add the mask row, then fold the tile into the running max
 * and sum. Leaves the probabilities (relative to the new max) in s and returns the
 * factor the row's accumulator must be scaled by. */
AOTC_FN float aotc_attention_softmax_step_(float *AOTC_RESTRICT s, const float *mask, int64_t ms_k,
                                           int64_t bk, float scale, float *row_max, float *row_sum) {
  float m, base, total, alpha;
  int64_t j;
  if (mask != NULL) {
    for (j = 0; j < bk; j++) s[j] = s[j] * scale + mask[j * ms_k];
  } else {
    for (j = 0; j < bk; j++) s[j] *= scale;
  }
  for (j = bk; j < AOTC_ATTN_BK; j++) s[j] = -AOTC_INF;
  m = aotc_attention_tile_max_(s);
  m = m > *row_max ? m : *row_max;
  base = m == -AOTC_INF ? 0.0f : m;   /* a row masked so far keeps sum 0, not NaN */
  for (j = 0; j < AOTC_ATTN_BK; j++) s[j] = aotc_attention_exp_(s[j] - base);
  total = aotc_attention_tile_sum_(s);
  alpha = aotc_attention_exp_(*row_max - base);
  *row_sum = *row_sum * alpha + total;
  *row_max = m;
  return alpha;
}

/* acc[r][:] = acc[r][:] * alpha[r] + sum_j p[r][j] V[j][:], V rows contiguous, dv a
 * multiple of AOTC_ATTN_DVW: the register tile is ROWS x DVW. */
AOTC_ATTN_KERNEL_ void aotc_attention_pv_tiled_(float *AOTC_RESTRICT acc, int64_t dv,
                                                const float *AOTC_RESTRICT alpha,
                                                const volatile float *p,
                                                const float *AOTC_RESTRICT v, int64_t vs_k,
                                                int64_t bk) {
  int64_t c0, j;
  int r, w;
  for (c0 = 0; c0 < dv; c0 += AOTC_ATTN_DVW) {
    float o[AOTC_ATTN_ROWS][AOTC_ATTN_DVW];
    AOTC_ATTN_UNROLL_(8)
    for (r = 0; r < AOTC_ATTN_ROWS; r++) {
      AOTC_ATTN_UNROLL_(64)
      for (w = 0; w < AOTC_ATTN_DVW; w++) o[r][w] = acc[r * dv + c0 + w] * alpha[r];
    }
    for (j = 0; j < bk; j++) {
      const float *vr = v + j * vs_k + c0;
      AOTC_ATTN_UNROLL_(8)
      for (r = 0; r < AOTC_ATTN_ROWS; r++) {
        const float pr = p[r * AOTC_ATTN_BK + j];
        AOTC_ATTN_UNROLL_(64)
        for (w = 0; w < AOTC_ATTN_DVW; w++) o[r][w] += pr * vr[w];
      }
    }
    AOTC_ATTN_UNROLL_(8)
    for (r = 0; r < AOTC_ATTN_ROWS; r++) {
      AOTC_ATTN_UNROLL_(64)
      for (w = 0; w < AOTC_ATTN_DVW; w++) acc[r * dv + c0 + w] = o[r][w];
    }
  }
}

/* The same for any dv and V strides: the plain path (an odd head size). */
AOTC_FN void aotc_attention_pv_plain_(float *AOTC_RESTRICT acc, int64_t dv, const float *alpha,
                                      const float *p, const float *v, int64_t vs_k, int64_t vs_c,
                                      int64_t bk) {
  int64_t c, j;
  int r;
  for (r = 0; r < AOTC_ATTN_ROWS; r++) {
    float *ar = acc + r * dv;
    for (c = 0; c < dv; c++) ar[c] *= alpha[r];
    for (j = 0; j < bk; j++) {
      const float pr = p[r * AOTC_ATTN_BK + j];
      const float *vr = v + j * vs_k;
      for (c = 0; c < dv; c++) ar[c] += pr * vr[c * vs_c];
    }
  }
}

/* Rows [i0, i0 + rows) of Q as panels of ROWS rows, qp[(g * d + c) * ROWS + r]; rows
 * past the end repeat the last one (their results are never stored). */
AOTC_FN void aotc_attention_pack_queries_(const float *AOTC_RESTRICT q, int64_t qs_i, int64_t qs_c,
                                          int64_t rows, int64_t padded_rows, int64_t d,
                                          float *AOTC_RESTRICT qp) {
  int64_t i, c;
  for (i = 0; i < padded_rows; i++) {
    const float *row = q + AOTC_MIN(i, rows - 1) * qs_i;
    float *panel = qp + i / AOTC_ATTN_ROWS * d * AOTC_ATTN_ROWS + i % AOTC_ATTN_ROWS;
    for (c = 0; c < d; c++) panel[c * AOTC_ATTN_ROWS] = row[c * qs_c];
  }
}

AOTC_FN void aotc_attention_task_(void *arg, int64_t task) {
  const aotc_attention_args_ *p = (const aotc_attention_args_ *)arg;
  const int64_t bh = task / p->blocks, b = bh / p->heads, h = bh % p->heads;
  const int64_t i0 = (task % p->blocks) * p->block_rows, d = p->d, dv = p->dv;
  const int64_t rows = AOTC_MIN(p->block_rows, p->sq - i0);
  const int64_t padded_rows = (rows + AOTC_ATTN_ROWS - 1) / AOTC_ATTN_ROWS * AOTC_ATTN_ROWS;
  const int tiled = dv % AOTC_ATTN_DVW == 0 && p->vs[3] == 1;
  float *acc = p->scratch + task * p->task_floats;
  float *row_max = acc + p->block_rows * dv, *row_sum = row_max + p->block_rows;
  float *qp = row_sum + p->block_rows, *kp = qp + p->block_rows * d;
  const float *kt = p->k + b * p->ks[0] + h * p->ks[1];
  const float *v = p->v + b * p->vs[0] + h * p->vs[1];
  const float *mask = p->mask == NULL ? NULL : p->mask + b * p->ms[0] + h * p->ms[1] + i0 * p->ms[2];
  float *y = p->y + b * p->ys[0] + h * p->ys[1] + i0 * p->ys[2];
  int64_t k0, r0, i, c;
  aotc_attention_pack_queries_(p->q + b * p->qs[0] + h * p->qs[1] + i0 * p->qs[2], p->qs[2],
                               p->qs[3], rows, padded_rows, d, qp);
  for (i = 0; i < padded_rows * dv; i++) acc[i] = 0.0f;
  for (i = 0; i < padded_rows; i++) {
    row_max[i] = -AOTC_INF;
    row_sum[i] = 0.0f;
  }
  for (k0 = 0; k0 < p->sk; k0 += AOTC_ATTN_BK) {
    const int64_t bk = AOTC_MIN(AOTC_ATTN_BK, p->sk - k0);
    const float *vk = v + k0 * p->vs[2];
    aotc_attention_pack_keys_(kt + k0 * p->ks[3], p->ks[2], p->ks[3], d, bk, kp);
    for (r0 = 0; r0 < padded_rows; r0 += AOTC_ATTN_ROWS) {
      float s[AOTC_ATTN_ROWS * AOTC_ATTN_BK] AOTC_ALIGNED(64), alpha[AOTC_ATTN_ROWS];
      int r;
      aotc_attention_scores_(d, qp + r0 * d, kp, s);
      for (r = 0; r < AOTC_ATTN_ROWS; r++) {
        const int64_t row = AOTC_MIN(r0 + r, rows - 1);
        const float *mr = mask == NULL ? NULL : mask + row * p->ms[2] + k0 * p->ms[3];
        alpha[r] = aotc_attention_softmax_step_(s + r * AOTC_ATTN_BK, mr, p->ms[3], bk, p->scale,
                                                row_max + r0 + r, row_sum + r0 + r);
      }
      if (tiled)
        aotc_attention_pv_tiled_(acc + r0 * dv, dv, alpha, s, vk, p->vs[2], bk);
      else
        aotc_attention_pv_plain_(acc + r0 * dv, dv, alpha, s, vk, p->vs[2], p->vs[3], bk);
    }
  }
  for (i = 0; i < rows; i++) {
    const float inv = 1.0f / row_sum[i];
    float *yr = y + i * p->ys[2];
    for (c = 0; c < dv; c++) yr[c * p->ys[3]] = acc[i * dv + c] * inv;
  }
}

AOTC_ENGINE_FN void aotc_attention_f32(aotc_pool *pool, const float *q, const float *k, const float *v,
                                       const float *mask, float *y, unsigned char *scratch,
                                       const int64_t *dims, const int64_t *q_strides,
                                       const int64_t *k_strides, const int64_t *v_strides,
                                       const int64_t *mask_strides, const int64_t *y_strides,
                                       float scale, int64_t block_rows) {
  aotc_attention_args_ p;
  int i;
  p.q = q;
  p.k = k;
  p.v = v;
  p.mask = mask;
  p.y = y;
  p.scratch = (float *)(void *)scratch;
  p.heads = dims[1];
  p.sq = dims[2];
  p.sk = dims[3];
  p.d = dims[4];
  p.dv = dims[5];
  p.block_rows = block_rows;
  p.blocks = (p.sq + block_rows - 1) / block_rows;
  p.task_floats = aotc_attention_task_floats_(block_rows, p.d, p.dv);
  for (i = 0; i < 4; i++) {
    p.qs[i] = q_strides[i];
    p.ks[i] = k_strides[i];
    p.vs[i] = v_strides[i];
    p.ms[i] = mask == NULL ? 0 : mask_strides[i];
    p.ys[i] = y_strides[i];
  }
  p.scale = scale;
  aotc_parallel_for(pool, dims[0] * p.heads * p.blocks, aotc_attention_task_, &p);
}

#endif /* AOTC_ENGINE_EXTERN */

#endif
