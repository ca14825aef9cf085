/* aotc runtime: single-precision matrix product.
 *
 * C[i,j] = act(sum_k A[i,k] * B[k,j] (+ bias_m[i]) (+ bias_n[j])), act optional.
 *
 * Layout of packed operands (shared with the compile-time packer in aotc/ops/matmul.py):
 * - packed B: K cut into blocks of AOTC_SGEMM_KC rows; within a block, strips of
 *   AOTC_SGEMM_NR = 32 columns, each strip a kc x 32 panel stored row by row; ragged
 *   strips padded with +0. Block pc starts at pc * strips * 32 floats, strip s at
 *   s * kc * 32 within it. Every path's register tile is 32 columns wide (two zmm, four
 *   ymm, or 32 floats in C), so compile-time packing needs no target.
 * - packed A (scratch, only where it pays): per K-block, each row panel stored k-major
 *   (a[k * rows + i]), M * kc floats per block; no padding, so its size is target-free.
 *
 * Order of the arithmetic: every C element is one accumulator summed over k = 0..K-1
 * in order (blocks only store and reload it), then + bias_m, then + bias_n, then the
 * activation, applied to each finished tile by the thread that computed it. Every path
 * (tiles of any row count, ragged edges, the M = 1 and N = 1 paths) keeps that order,
 * so results depend neither on tiling nor on the thread count; exact mode gives the
 * same bits on every path (aotc_gemm_kernels.h). The work split is a function of the
 * shape only. */
#ifndef AOTC_GEMM_H_
#define AOTC_GEMM_H_

#include "aotc_base.h"
#include "aotc_math.h"
#include "aotc_activation.h"
#include "aotc_threads.h"

/* ---- entry points -------------------------------------------------------------------- */

/* C[i,j] = sum_k A[i,k] * B[k,j]  (+ bias_m[i]) (+ bias_n[j]);  i < M, j < N, k < K.
 * A is M x K with row stride lda (or, when trans_a, stored K x M with row stride lda);
 * B is K x N with row stride ldb (or, when trans_b, stored N x K with row stride ldb);
 * C is M x N with row stride ldc. bias_m / bias_n may be NULL. `scratch` holds at
 * least aotc_sgemm_scratch_bytes(M, N, K) bytes, 64-byte aligned. */
AOTC_ENGINE_FN void aotc_sgemm(aotc_pool *pool, int64_t M, int64_t N, int64_t K,
                               const float *A, int64_t lda, int trans_a,
                               const float *B, int64_t ldb, int trans_b,
                               float *C, int64_t ldc,
                               const float *bias_m, const float *bias_n,
                               unsigned char *scratch);

/* aotc_sgemm, then the activation `act` (NULL: none) on every element of C, in the
 * tile epilogue. */
AOTC_ENGINE_FN void aotc_sgemm_act(aotc_pool *pool, int64_t M, int64_t N, int64_t K,
                                   const float *A, int64_t lda, int trans_a,
                                   const float *B, int64_t ldb, int trans_b,
                                   float *C, int64_t ldc,
                                   const float *bias_m, const float *bias_n,
                                   const aotc_activation *act, unsigned char *scratch);

/* The same with B already packed (layout above, e.g. at compile time); the results are
 * bit-identical to aotc_sgemm on the unpacked B. `scratch` holds at least
 * aotc_sgemm_packed_scratch_bytes(M, N, K) bytes, 64-byte aligned. */
AOTC_ENGINE_FN void aotc_sgemm_packed(aotc_pool *pool, int64_t M, int64_t N, int64_t K,
                                      const float *A, int64_t lda, int trans_a, const float *packed_b,
                                      float *C, int64_t ldc,
                                      const float *bias_m, const float *bias_n,
                                      unsigned char *scratch);

/* aotc_sgemm_packed with the activation `act` (NULL: none) in the tile epilogue. */
AOTC_ENGINE_FN void aotc_sgemm_packed_act(aotc_pool *pool, int64_t M, int64_t N, int64_t K,
                                          const float *A, int64_t lda, int trans_a,
                                          const float *packed_b, float *C, int64_t ldc,
                                          const float *bias_m, const float *bias_n,
                                          const aotc_activation *act, unsigned char *scratch);

/* What builds A for a caller that never stores it: fn(ctx, dst, pc, kc, i0, rows)
 * writes rows [i0, i0 + rows) (at most AOTC_SGEMM_MR) of columns [pc, pc + kc) (one
 * K-block) k-major into dst (dst[k * rows + i]). */
typedef struct {
  void (*fn)(const void *ctx, float *dst, int64_t pc, int64_t kc, int64_t i0, int64_t rows);
  const void *ctx;
} aotc_sgemm_a_maker;

/* What takes each finished tile of C from the thread that computed it, right after the
 * tile stored it (so in L1): fn(ctx, c, ldc, i0, rows, j0, cols) gets C's rows
 * [i0, i0 + rows) by columns [j0, j0 + cols), at c (C's element (i0, j0)), row stride ldc.
 * Tiles are disjoint and of any size: the M = 1 path's runs of its row, a product with
 * K = 0 or of one column whole. */
typedef struct {
  void (*fn)(const void *ctx, const float *c, int64_t ldc, int64_t i0, int64_t rows, int64_t j0, int64_t cols);
  const void *ctx;
} aotc_sgemm_c_taker;

/* The parts of a product that only the engine's own kernels (the convs) use, each NULL
 * when unused: A already packed (aotc_sgemm_a_panel_'s layout: a caller that builds A
 * writes it there directly; scratch then needs no room for packing A) or made panel by
 * panel right before the tiles that read it (each task makes its panels, so a product
 * cut across its columns makes them more than once); a residual laid out as C (row
 * stride ldc) added after the bias, before the activation (a fused Add): it may be C
 * itself when K <= AOTC_SGEMM_KC (otherwise C holds partial sums between K-blocks),
 * and must not otherwise overlap C; what takes C's finished tiles (C is then the caller's
 * scratch: the rows conv kernel stores them transposed). And, not a pointer, whether
 * the tasks go by C's columns first (aotc_sgemm_task_at_), and whether the split cuts C's
 * rows before its columns (aotc_sgemm_split_). */
typedef struct {
  const float *packed_a;
  const aotc_sgemm_a_maker *make_a;
  const float *residual;
  const aotc_sgemm_c_taker *take_c;
  int columns_first;   /* tasks ordered by C's columns first: aotc_sgemm_task_at_ */
  int rows_first;      /* C's rows cut first: aotc_sgemm_split_ */
} aotc_sgemm_extras;

/* Y = alpha * Y (+ beta * C[i * csi + j * csj]) over an M x N row-major Y; C may be NULL
 * (strides 0 broadcast C): the epilogue of Gemm when C does not fit a bias vector. */
AOTC_ENGINE_FN void aotc_sgemm_scale_add(int64_t M, int64_t N, float *Y, float alpha, const float *C,
                                         int64_t csi, int64_t csj, float beta);

#ifndef AOTC_ENGINE_EXTERN   /* the bodies: here, or in the engine object (aotc_base.h) */
#include "aotc_gemm_kernels.h"

#define AOTC_SGEMM_KC 256
/* A product is cut finer when the tiles allow, so that threads balance, into at least
 * this many tasks. At 8 rather than 16, in builds.py at two threads, ResNet-50 took
 * 0.985-0.998x the time (four runs), MobileNetV2 0.997x, BERT-base 0.985x, the
 * 784-1024-1024-10 MLP 0.983x (0.986x at 64 rows); at one thread the five 0.991-1.003x;
 * gemm.py's shapes within 1% either way. At 4: ResNet-50 0.973-0.988x, MobileNetV2
 * 1.005x. */
#define AOTC_SGEMM_MIN_TASKS 8
#define AOTC_SGEMM_PACK_A_STRIPS 4     /* A may be packed past this many strips */
#ifndef AOTC_SGEMV_ROWS_NC
#define AOTC_SGEMV_ROWS_NC 512  /* columns per task on the M = 1 path over row-major B */
#endif

AOTC_FN int64_t aotc_sgemm_round_up_(int64_t n, int64_t m) { return (n + m - 1) / m * m; }
AOTC_FN int64_t aotc_sgemm_div_up_(int64_t n, int64_t m) { return (n + m - 1) / m; }

/* Floats of a packed B for an N-column, K-row operand. */
AOTC_FN int64_t aotc_sgemm_packed_b_floats(int64_t N, int64_t K) {
  return K * aotc_sgemm_round_up_(N, AOTC_SGEMM_NR);
}

/* Where strip s of the K-block at row pc starts in a packed B of `strips` strips and
 * K rows: the K-blocks one after another, in each its strips (kc x 32 each). */
AOTC_FN int64_t aotc_sgemm_packed_strip_(int64_t strips, int64_t K, int64_t pc, int64_t s) {
  return pc * strips * AOTC_SGEMM_NR + s * AOTC_MIN(AOTC_SGEMM_KC, K - pc) * AOTC_SGEMM_NR;
}

/* Where row k of strip s starts in the same packed B: any k, inside its K-block's strip. */
AOTC_FN int64_t aotc_sgemm_packed_row_(int64_t strips, int64_t K, int64_t k, int64_t s) {
  const int64_t pc = k / AOTC_SGEMM_KC * AOTC_SGEMM_KC;
  return aotc_sgemm_packed_strip_(strips, K, pc, s) + (k - pc) * AOTC_SGEMM_NR;
}

/* Scratch for packed A is reserved when each row panel meets enough strips of B to
 * repay the copy (a function of the shape, so callers can size scratch) ... */
AOTC_FN int aotc_sgemm_may_pack_a_(int64_t M, int64_t N) {
  return M > 1 && N > AOTC_SGEMM_PACK_A_STRIPS * AOTC_SGEMM_NR;
}

/* ... and used when reading A in place would be slow: rows (or, transposed, columns)
 * whose stride is a multiple of 2 KiB, which share few L1 sets; or long rows that each
 * panel reads again for many strips (a transformer's 768 -> 3072 product: 128 x 3072 x
 * 768 took 0.97-0.99 of the time on Zen 4, paired, at one and two threads; at N = 768
 * packing lost there (AOTC_SGEMM_PACK_A_MANY_N), but on a Xeon, whose tiles take a packed A
 * K-block by K-block (AOTC_SGEMM_WHOLE_K_PACKED_BLOCKS), BERT-base's 768 -> 768
 * products packed took the model 0.945x the time at one thread and 0.941x at two, the
 * 784-1024-1024-10 MLP at 64 rows 0.972x, 128 x 768 x 768 alone 0.989x, ResNet-50 and
 * MobileNetV2 within 1%). From K = 256 on: ResNet-50's 256 -> 64 and 256 -> 128
 * pointwise convs at 56x56 (W as A, 64 or 128 KiB a K-block, past L1 beside the strip
 * read in place from X) took 0.94x and 0.95x the time alone at one thread, 0.95x at
 * two (C harness: 140 -> 156-160 GFLOP/s with X out of cache); at K = 128 packing
 * gained nothing. A transposed A is otherwise read in place too, its tile's
 * rows side by side in each of its rows: the pack cost ResNet-50's 1024 -> 256
 * pointwise conv at 14x14 (X^T as A) 12% more. */
#define AOTC_SGEMM_PACK_A_LONG_K 256
/* Long rows are packed from this many columns of C on. On cores with 32 KiB of L1,
 * whose tiles take all of K at once from A in place (aotc_sgemm_whole_k_), the pass
 * that packs A first cost more than it saved below 2048: on Zen 4, in place, 128 x 768
 * x 768 took 0.991x and 0.989x the time at one thread and 0.972x at two, 64 x 1024 x
 * 784 (the MLP's first layer at 64 rows) 0.994x and 0.967x (C loop, alternating, eight
 * runs each); 128 x 3072 x 768 0.995x and 0.993x, within the noise, so it keeps its
 * pack. */
#define AOTC_SGEMM_PACK_A_MANY_N (AOTC_L1D_BYTES >= (48 << 10) ? 512 : 2048)
AOTC_FN int aotc_sgemm_packs_a_(int64_t M, int64_t N, int64_t K, int64_t lda) {
  return aotc_sgemm_may_pack_a_(M, N) &&
         (lda % 512 == 0 || (K >= AOTC_SGEMM_PACK_A_LONG_K && N >= AOTC_SGEMM_PACK_A_MANY_N));
}

/* A row-major B is read in place by the tiles, 32 columns of a row at a time, unless
 * its rows share L1 sets as above: packing it would read and write all of it once
 * more (20% of a ResNet pointwise conv's product). Its ragged last strip is packed
 * all the same, so nothing is read past a row's end. */
AOTC_FN int aotc_sgemm_reads_b_in_place_(int64_t ldb, int trans_b) {
  return !trans_b && ldb % 512 != 0;
}

AOTC_FN size_t aotc_sgemm_packed_scratch_bytes(int64_t M, int64_t N, int64_t K) {
  if (!aotc_sgemm_may_pack_a_(M, N)) return 0;
  return (size_t)aotc_sgemm_round_up_(K * M * 4, 64);
}

/* Packed A, then packed B (with N = 1, A^T is the packed operand: see aotc_sgemm_run_). */
AOTC_FN size_t aotc_sgemm_scratch_bytes(int64_t M, int64_t N, int64_t K) {
  int64_t b_floats = aotc_sgemm_packed_b_floats(N == 1 ? AOTC_MAX(M, 1) : N, K);
  return aotc_sgemm_packed_scratch_bytes(M, N, K) + (size_t)aotc_sgemm_round_up_(b_floats * 4, 64);
}

/* NaN results in exact mode: the one canonical NaN (aotc_base.h). */
#define AOTC_SGEMM_CANON_(v) AOTC_CANON_F32(v)

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

/* Rows [i0, i0 + rows) of K-block pc of A (M x K, or K x M when trans), k-major. */
AOTC_FN void aotc_sgemm_pack_a_panel_(float *AOTC_RESTRICT dst, const float *AOTC_RESTRICT A,
                                      int64_t lda, int trans, int64_t pc, int64_t kc,
                                      int64_t i0, int64_t rows) {
  int64_t k, i;
  if (trans) {
    for (k = 0; k < kc; k++)
      for (i = 0; i < rows; i++) dst[k * rows + i] = A[(pc + k) * lda + i0 + i];
  } else {
    int64_t k0 = 0;
#if defined(AOTC_SGEMM_PATH_AVX512)
    /* 16 columns of the panel's rows at a time, transposed in registers: the scalar
     * copy's scattered stores were 12% of a 1024^3 product's samples. */
    for (; k0 + 16 <= kc; k0 += 16) {
      __m512 r[16];
      for (i = 0; i < 16; i++)
        r[i] = i < rows ? _mm512_loadu_ps(A + (i0 + i) * lda + pc + k0) : _mm512_setzero_ps();
      aotc_v_transpose16_(r);
      for (k = 0; k < 16; k++) _mm512_mask_storeu_ps(dst + (k0 + k) * rows, aotc_v_mask_(rows), r[k]);
    }
#endif
    for (i = 0; i < rows; i++) {
      const float *src = A + (i0 + i) * lda + pc;
      for (k = k0; k < kc; k++) dst[k * rows + i] = src[k];
    }
  }
}

/* All of B (K x N, or N x K when trans) packed into dst (aotc_sgemm_packed_b_floats). */
AOTC_FN void aotc_sgemm_pack_b(int64_t N, int64_t K, const float *B, int64_t ldb, int trans,
                               float *dst) {
  int64_t strips = (N + AOTC_SGEMM_NR - 1) / AOTC_SGEMM_NR, pc, s;
  for (pc = 0; pc < K; pc += AOTC_SGEMM_KC) {
    int64_t kc = AOTC_MIN(AOTC_SGEMM_KC, K - pc);
    for (s = 0; s < strips; s++)
      aotc_sgemm_pack_b_strip_(dst + aotc_sgemm_packed_strip_(strips, K, pc, s), B, ldb, trans, N, pc, kc, s);
  }
}

/* ---- row panels ------------------------------------------------------------------ */

/* Row panels of an M-row product: as few as AOTC_SGEMM_MR rows allow. Even, their
 * heights as close as can be (the first ones a row taller): a short last panel left
 * threads uneven, as in 128 rows cut 14 x 8 + 8 + 8, whose 16 tasks at two threads
 * gave one of them 70 rows (128 x 768 x 768 took 0.969x the time even, BERT-base
 * 0.970x). A made A goes even too: a task then takes a panel's strips whole
 * (aotc_sgemm_split_), and ResNet-50's 3x3 convs at 7x7 (49 rows) in 14 + 14 + 14 + 7
 * left two threads 28 rows against 21 (even: 0.92x the time at two threads, 1.02x at
 * one; the model 0.993x and 1.004x). Otherwise, where A is read transposed in place
 * (the rows kernel's pixels of a 1x1 conv, read from X), MR rows each, except that a
 * remainder shorter than MR / 2 is merged with the last full panel and the two split
 * evenly (a tile of very few rows runs far below the FMA rate). A function of M and the
 * kind of A only. */
AOTC_FN int64_t aotc_sgemm_panels_(int64_t M) { return aotc_sgemm_div_up_(M, AOTC_SGEMM_MR); }

/* Panel p of M rows cut evenly into panels of at most panel_rows rows (the first
 * M % panels of them a row taller): its first row and rows. */
AOTC_FN void aotc_sgemm_even_panel_(int64_t M, int64_t panel_rows, int64_t p, int64_t *start, int64_t *rows) {
  const int64_t panels = aotc_sgemm_div_up_(M, panel_rows), base = M / panels, taller = M % panels;
  *start = p * base + AOTC_MIN(p, taller);
  *rows = base + (p < taller);
}

/* The even panel (as above) that holds row r. */
AOTC_FN int64_t aotc_sgemm_even_panel_of_(int64_t M, int64_t panel_rows, int64_t r) {
  const int64_t panels = aotc_sgemm_div_up_(M, panel_rows), base = M / panels, taller = M % panels;
  return r < taller * (base + 1) ? r / (base + 1) : taller + (r - taller * (base + 1)) / base;
}

AOTC_FN void aotc_sgemm_panel_(int64_t M, int even, int64_t p, int64_t *start, int64_t *rows) {
  int64_t full = M / AOTC_SGEMM_MR, rem = M % AOTC_SGEMM_MR, half;
  if (even) {
    aotc_sgemm_even_panel_(M, AOTC_SGEMM_MR, p, start, rows);
    return;
  }
  if (rem == 0 || 2 * rem >= AOTC_SGEMM_MR || full == 0 || p < full - 1) {
    *start = p * AOTC_SGEMM_MR;
    *rows = AOTC_MIN(AOTC_SGEMM_MR, M - *start);
    return;
  }
  half = (AOTC_SGEMM_MR + rem + 1) / 2;
  *start = (full - 1) * AOTC_SGEMM_MR + (p == full - 1 ? 0 : half);
  *rows = p == full - 1 ? half : AOTC_SGEMM_MR + rem - half;
}

/* Packed A (M x K): K-blocks of AOTC_SGEMM_KC columns, each the row panels of
 * aotc_sgemm_panel_ in order, a panel k-major ([kc][rows]). Where the panel that starts
 * at row i0 of the K-block at column pc begins: */
AOTC_FN int64_t aotc_sgemm_a_panel_(int64_t M, int64_t K, int64_t pc, int64_t i0) {
  return pc * M + i0 * AOTC_MIN(AOTC_SGEMM_KC, K - pc);
}

/* ---- the driver ---------------------------------------------------------------- */

typedef struct {
  int64_t M, N, K, lda, ldb, ldc, panels, strips, kblocks;
  int even_panels;     /* the panels' heights (aotc_sgemm_panel_) */
  int64_t panel_tasks, strip_tasks;   /* C's panels and strips cut in so many ranges */
  int columns_first;   /* aotc_sgemm_task_at_ */
  int rows_first;      /* aotc_sgemm_split_ */
  const float *A, *B, *bias_m, *bias_n;
  const float *residual;        /* NULL, or added after the bias: laid out as C (ldc) */
  const aotc_activation *act;   /* NULL: none */
  aotc_sgemm_epilogue_ ep;      /* the tiles' activation (aotc_sgemm_epilogue_init_) */
  const aotc_activation *act_after;   /* what the tiles leave for after the store */
  int trans_a, trans_b;
  float *C;
  const float *pa;     /* packed A (scratch or the caller's), NULL when A is read in place */
  float *pa_out;       /* where to pack A, NULL when A comes packed or is read in place */
  int packs_a_in_tasks;   /* pa_out is filled by the tasks, not by a pass before them */
  const aotc_sgemm_a_maker *make_a;   /* NULL, or what makes each panel of A */
  const aotc_sgemm_c_taker *take_c;   /* NULL, or what takes each finished tile of C */
  const float *pb;     /* packed B (scratch or compile time) */
  float *pb_out;       /* where to pack B, NULL when B comes packed */
  int b_in_place;      /* full strips read from B itself (aotc_sgemm_reads_b_in_place_) */
  int far;             /* the threads are far apart (aotc_pool_far): they take the lines they write */
} aotc_sgemm_job_;

/* Of an activation (or NULL), what runs in registers (aotc_sgemm_act_v_): Relu or Clip. */
AOTC_FN int aotc_sgemm_act_in_registers_(const aotc_activation *act) {
  aotc_act_kind kind = act ? act->kind : AOTC_ACT_NONE;
  return kind == AOTC_ACT_RELU ? AOTC_SGEMM_ACT_RELU
         : kind == AOTC_ACT_CLIP ? AOTC_SGEMM_ACT_CLIP : AOTC_SGEMM_ACT_NONE;
}

/* Whether all of an activation (or NULL) runs in registers: none, Relu or Clip. */
AOTC_FN int aotc_sgemm_act_all_in_registers_(const aotc_activation *act) {
  return aotc_sgemm_act_in_registers_(act) != AOTC_SGEMM_ACT_NONE || !act || act->kind == AOTC_ACT_NONE;
}

/* Relu and Clip run in the tiles' registers; other activations after the store. */
AOTC_FN void aotc_sgemm_epilogue_init_(aotc_sgemm_job_ *j) {
  j->ep.bias_m = j->ep.bias_n = j->ep.residual = NULL;
  j->ep.ldr = j->ldc;
  j->ep.act = aotc_sgemm_act_in_registers_(j->act);
  j->ep.lo = j->act ? j->act->a : 0.0f;
  j->ep.hi = j->act ? j->act->b : 0.0f;
  j->act_after = j->ep.act == AOTC_SGEMM_ACT_NONE ? j->act : NULL;
}

/* The epilogue of the tile at row i, column c (on the last K-block). */
AOTC_FN aotc_sgemm_epilogue_ aotc_sgemm_epilogue_at_(const aotc_sgemm_job_ *j, int64_t i, int64_t c) {
  aotc_sgemm_epilogue_ ep = j->ep;
  ep.bias_m = j->bias_m ? j->bias_m + i : NULL;
  ep.bias_n = j->bias_n ? j->bias_n + c : NULL;
  ep.residual = j->residual ? j->residual + i * j->ldc + c : NULL;
  return ep;
}

/* Strips of B to pack, the last ones: all, or only a ragged one when B is read in place. */
AOTC_FN int64_t aotc_sgemm_packed_strips_(const aotc_sgemm_job_ *j) {
  if (!j->pb_out) return 0;
  return j->b_in_place ? (j->N % AOTC_SGEMM_NR != 0) : j->strips;
}

/* Of the packing done before the product: A's (K-block, panel) pieces, none where the
 * tasks pack A themselves (AOTC_SGEMM_PACK_A_IN_TASKS). */
AOTC_FN int64_t aotc_sgemm_a_pack_tasks_(const aotc_sgemm_job_ *j) {
  return j->pa_out && !j->packs_a_in_tasks ? j->kblocks * j->panels : 0;
}

/* Panel p of K-block pc (kc columns) of A into pa_out. Threads far apart take the
 * panel's lines first (aotc_take_lines), the other's after its last read of them: in
 * ResNet-50 at two threads on two L3s the 1x1 convs at 7x7 that pack X^T took 60-100 us
 * less each. */
AOTC_FN void aotc_sgemm_pack_a_at_(const aotc_sgemm_job_ *j, int64_t pc, int64_t kc, int64_t p) {
  int64_t i0, rows;
  float *panel;
  aotc_sgemm_panel_(j->M, j->even_panels, p, &i0, &rows);
  panel = j->pa_out + aotc_sgemm_a_panel_(j->M, j->K, pc, i0);
  aotc_take_range(j->far, panel, (size_t)(kc * rows) * sizeof(float));
  aotc_sgemm_pack_a_panel_(panel, j->A, j->lda, j->trans_a, pc, kc, i0, rows);
}

/* Packing before the product: one task per (K-block, panel) of A, then one per
 * (K-block, packed strip) of B. */
AOTC_FN void aotc_sgemm_pack_task_(void *arg, int64_t t) {
  const aotc_sgemm_job_ *j = (const aotc_sgemm_job_ *)arg;
  int64_t a_tasks = aotc_sgemm_a_pack_tasks_(j);
  if (t < a_tasks) {
    int64_t pc = t / j->panels * AOTC_SGEMM_KC;
    aotc_sgemm_pack_a_at_(j, pc, AOTC_MIN(AOTC_SGEMM_KC, j->K - pc), t % j->panels);
  } else {
    int64_t packed = aotc_sgemm_packed_strips_(j), u = t - a_tasks;
    int64_t pc = u / packed * AOTC_SGEMM_KC, s = j->strips - packed + u % packed;
    int64_t kc = AOTC_MIN(AOTC_SGEMM_KC, j->K - pc);
    aotc_sgemm_pack_b_strip_(j->pb_out + aotc_sgemm_packed_strip_(j->strips, j->K, pc, s), j->B, j->ldb,
                             j->trans_b, j->N, pc, kc, s);
  }
}

/* Where strip s of K-block pc is read: from B itself when it is read in place, else
 * from packed B. *step is its row stride. */
AOTC_FN const float *aotc_sgemm_strip_at_(const aotc_sgemm_job_ *j, int64_t pc, int64_t s, int64_t *step) {
  int64_t c = s * AOTC_SGEMM_NR;
  if (j->b_in_place && j->N - c >= AOTC_SGEMM_NR) {
    *step = j->ldb;
    return j->B + pc * j->ldb + c;
  }
  *step = AOTC_SGEMM_NR;
  return j->pb + aotc_sgemm_packed_strip_(j->strips, j->K, pc, s);
}

/* A block of C: panels p0 .. p0 + np - 1 by strips s0 .. s0 + ns - 1, its tiles
 * numbered u = 0 .. np * ns - 1 within each K-block, strip by strip or panel by panel. */
typedef struct {
  int64_t p0, np, s0, ns;
  int panel_outer;
} aotc_sgemm_block_;

/* Tile u of a block: its panel and strip. */
AOTC_INLINE_ALWAYS void aotc_sgemm_block_tile_(const aotc_sgemm_block_ *blk, int64_t u, int64_t *p, int64_t *s) {
  *p = blk->p0 + (blk->panel_outer ? u / blk->ns : u % blk->np);
  *s = blk->s0 + (blk->panel_outer ? u % blk->ns : u / blk->np);
}

/* The residual lines of the block's tile after u, fetched a tile ahead: the tile's own
 * fetch at its start came too late where the residual is out of cache, as in ResNet-50's
 * pointwise convs with their fused Add (short tiles: K = 64 to 128); a 64 -> 256 conv
 * at 56x56 with its residual out of cache took 0.74-0.88x the time. */
AOTC_INLINE_ALWAYS void aotc_sgemm_prefetch_next_residual_(const aotc_sgemm_job_ *j,
                                                           const aotc_sgemm_block_ *blk, int64_t u) {
  int64_t p, s, i, rows;
  if (u + 1 >= blk->np * blk->ns) return;
  aotc_sgemm_block_tile_(blk, u + 1, &p, &s);
  aotc_sgemm_panel_(j->M, j->even_panels, p, &i, &rows);
  aotc_sgemm_prefetch_tile_(j->residual + i * j->ldc + s * AOTC_SGEMM_NR, j->ldc, (int)rows, 0);
}

/* Tile `part` of the np on a strip fetches rows [kc * part / np, kc * (part + 1) / np)
 * of strip s's K-block from pc (kc rows): where they start, their step and count. */
AOTC_FN const float *aotc_sgemm_fetch_share_(const aotc_sgemm_job_ *j, int64_t pc, int64_t s, int64_t part,
                                             int64_t np, int64_t *step, int64_t *count) {
  const int64_t kc = AOTC_MIN(AOTC_SGEMM_KC, j->K - pc), k0 = kc * part / np;
  *count = kc * (part + 1) / np - k0;
  return aotc_sgemm_strip_at_(j, pc, s, step) + k0 * *step;
}

/* What tile u of K-block pc (kc rows) prefetches when the block goes strip by strip:
 * its share of the next strip, split between the np tiles on this strip; nothing after
 * the last. Where the tiles run over all of K (whole), the share of the next strip's
 * first K-block, and aotc_sgemm_more_k_ gives the share of each one after; nothing after
 * the block's last strip. Whole-K tiles fetched nothing before, and each strip's first
 * tile streamed it from L3: with the fetch, builds.py --matmul 128,768,768 took 0.984x
 * the time at one thread (five repeats), 128,3072,768 0.975x; BERT-base 0.981x at one
 * thread and 0.978x at two, the MLP at 64 rows 0.972x, ResNet-50 1.001x, MobileNetV2
 * 0.998x (builds.py --model). Panel by panel, nothing: B is in cache there, and short
 * tiles lost 5-8%; except a made A's block of one panel, whose order is the
 * strip-by-strip one and whose B (a deep conv's weights) comes from L3 once for each
 * panel (ResNet-50's 3x3 conv at 7x7, when it made its panels: 1.18x the time without
 * the fetch, 0.99x with it, against its unfold stored with the tasks then cut by panels
 * too). */
AOTC_FN aotc_sgemm_prefetch_ aotc_sgemm_prefetch_at_(const aotc_sgemm_job_ *j, const aotc_sgemm_block_ *blk,
                                                     int64_t pc, int64_t kc, int64_t u, int whole) {
  int64_t next_s = blk->s0 + u / blk->np + 1, next_pc = pc;
  aotc_sgemm_prefetch_ pf = {.p = NULL};
  if (blk->panel_outer && !(j->make_a && blk->np == 1)) return pf;
  if (next_s == blk->s0 + blk->ns) {
    if (whole) return pf;   /* (the block's last strip: its tiles took all of K) */
    next_s = blk->s0, next_pc = pc + kc;
  }
  if (next_pc >= j->K) return pf;
  pf.p = aotc_sgemm_fetch_share_(j, next_pc, next_s, u % blk->np, blk->np, &pf.step, &pf.count);
  pf.count = AOTC_MIN(pf.count, kc);   /* the tile's loop runs kc rows */
  return pf;
}

/* Where A is read transposed in place (X^T: the rows kernel's 1x1 convs) and the block
 * goes strip by strip, the rows of A that the tile after u reads first: on the block's
 * first strip the next panel's, after the K-block's last tile the first panel's in the
 * next K-block. Each row of a panel is up to 14 floats of one input channel, one
 * channel's row apart from the next: no stream the hardware's prefetch follows, and
 * where the conv before had run those channels on the other thread, each line was a
 * miss to the other core's cache. Fetched a row a step by tile u (as the conv pixels
 * kernel fetches its next tile's rows), ResNet-50's 14x14 stage alone (five of its
 * blocks) took 0.966x the time at two threads (the GEMM's part alone: 0.959, 0.963 and
 * 0.996 in three runs), 1.000x at one; the whole model moved within the noise (1.002x
 * at two, 1.000x at one). */
AOTC_FN void aotc_sgemm_next_a_rows_(const aotc_sgemm_job_ *j, const aotc_sgemm_block_ *blk, int64_t u,
                                     int64_t pc, int64_t kc, aotc_sgemm_prefetch_ *pf) {
  int64_t p, s, i, rows;
  if (!j->trans_a || j->pa || j->make_a || blk->panel_outer) return;
  aotc_sgemm_block_tile_(blk, u, &p, &s);
  if (s == blk->s0 && p + 1 < blk->p0 + blk->np) {
    p++;
  } else if (u == blk->np * blk->ns - 1 && pc + kc < j->K) {
    p = blk->p0, pc += kc;
  } else {
    return;
  }
  aotc_sgemm_panel_(j->M, j->even_panels, p, &i, &rows);
  pf->a_next = j->A + pc * j->lda + i;
  pf->a_step = j->lda;
  pf->a_count = AOTC_MIN(kc, AOTC_MIN(AOTC_SGEMM_KC, j->K - pc));
  pf->a_width = rows;
}

/* Where A is read in place row by row and the block goes panel by panel, K-block by
 * K-block, as a panel starts: the first AOTC_SGEMM_A_AHEAD of the next panel's columns
 * [pc, pc + kc) (the block's first panel on the next K-block after its last), fetched
 * into L2, the panel's first tile fetching the rest (aotc_sgemm_prefetch_'s a_ahead).
 * The tiles' 14 row streams outran the hardware's prefetch (3136 x 64 x 576 with A in
 * L3, when its tiles went K-block by K-block: 195 -> 209 GFLOP/s). */
/* The first `cols` floats of `rows` rows of a row-major A (lda apart) into L2. */
AOTC_FN void aotc_sgemm_prefetch_a_rows_(const float *a, int64_t lda, int64_t rows, int64_t cols) {
  int64_t r, k;
  for (r = 0; r < rows; r++)
    for (k = 0; k < cols; k += 16) AOTC_PREFETCH_L2(a + r * lda + k);
}

AOTC_FN void aotc_sgemm_prefetch_next_panel_(const aotc_sgemm_job_ *j, const aotc_sgemm_block_ *blk,
                                             int64_t p, int64_t pc, int64_t kc) {
  int64_t i, rows;
  if (p + 1 < blk->p0 + blk->np) {
    p++;
  } else {
    p = blk->p0, pc += kc;
    if (pc >= j->K) return;
    kc = AOTC_MIN(AOTC_SGEMM_KC, j->K - pc);
  }
  aotc_sgemm_panel_(j->M, j->even_panels, p, &i, &rows);
  aotc_sgemm_prefetch_a_rows_(j->A + i * j->lda + pc, j->lda, rows, AOTC_MIN(kc, AOTC_SGEMM_A_AHEAD));
}

/* Where A is read in place row by row, the block goes panel by panel and its tiles run
 * over all of K: the next panel of the block (none after its last) for the panel's
 * first tile to fetch into L2 over its first K-block, as many lines a step as that
 * takes (aotc_sgemm_prefetch_'s next_panel). */
AOTC_FN void aotc_sgemm_fetch_next_panel_(const aotc_sgemm_job_ *j, const aotc_sgemm_block_ *blk,
                                          int64_t p, aotc_sgemm_prefetch_ *pf) {
  int64_t i;
  if (p + 1 >= blk->p0 + blk->np) return;
  aotc_sgemm_panel_(j->M, j->even_panels, p + 1, &i, &pf->next_panel_rows);
  pf->next_panel = j->A + i * j->lda;
  pf->next_panel_ld = j->lda;
  pf->next_panel_cols = j->K;
  pf->next_panel_per_step = aotc_sgemm_div_up_(pf->next_panel_rows * aotc_sgemm_div_up_(j->K, 16),
                                               AOTC_SGEMM_KC);   /* (its lines over the first K-block) */
}

/* Whether each tile of the block runs over all of K at once (aotc_sgemm_kseg_) rather
 * than storing and reloading its sums at every K-block: where A is read in place, panel
 * by panel or (A row-major) strip by strip, or packed, over at most
 * AOTC_SGEMM_WHOLE_K_PACKED_BLOCKS K-blocks. On an AMD Zen (its caches not recorded),
 * 3136 x 64 x 576 took 0.98x the time at one thread, 128 x 768 x 768 0.99x at one and
 * 0.98x at two, 1024^3 (A packed) 0.98x at one and two (paired); a transposed A strip
 * by strip (the rows kernel's 1x1 convs over X) lost: MobileNetV2 1.015x; and so did a
 * packed A over 12 K-blocks (BERT-base's 3072 -> 768 products: the model 1.015x), each
 * tile then streaming a strip of B too long for L1 that the next panel reads again.
 * Where L1 holds a K-block's strip (32 KiB) beside a panel, 48 KiB of data on a Xeon,
 * K-block by K-block the strip stays there for the panels: with a packed A over 3 or 4
 * K-blocks taken so, BERT-base (K = 768) took 0.956x the time at one thread and 0.950x
 * at two (paired), its 128 x 768 x 768 product alone, 1024^3, ResNet-50 and the
 * 784-1024-1024-10 MLP at 64 rows within 1% either way. Over 2 K-blocks it lost as
 * well where B is read in place (a pointwise conv's X, each row of the strip a row of
 * the image apart): in ResNet-50 at two threads, K-block by K-block, its 512 -> 128
 * convs at 28x28 took 347-359 us each, not 407-424, the 512 -> 256 one 730-751, not
 * 821-858 (per node, two runs; the model 0.988x and 0.996x, paired; at one thread
 * 0.993x and 0.999x); where B is packed it made no difference (128 x 768 x 512, 64 x
 * 1024 x 512, 512^3, 1024 x 1024 x 512: 0.99-1.01x in a C loop). So never there (1). */
#define AOTC_SGEMM_WHOLE_K_BLOCKS 16   /* K-blocks at most (K <= 4096) */
#define AOTC_SGEMM_WHOLE_K_PACKED_BLOCKS (AOTC_L1D_BYTES >= (48 << 10) ? 1 : 4)
AOTC_FN int aotc_sgemm_whole_k_(const aotc_sgemm_job_ *j, const aotc_sgemm_block_ *blk) {
  return j->kblocks > 1 && j->kblocks <= AOTC_SGEMM_WHOLE_K_BLOCKS && !j->make_a &&
         (!j->pa || j->kblocks <= AOTC_SGEMM_WHOLE_K_PACKED_BLOCKS) && (blk->panel_outer || !j->trans_a);
}

/* The K-blocks after the first of strip s, for a tile over all of K from row i (at most
 * AOTC_SGEMM_WHOLE_K_BLOCKS entries, the last with kc = 0); with fetch_s >= 0, the tile
 * is `part` of the np on its strip and fetches its share of strip fetch_s in each. */
AOTC_FN void aotc_sgemm_more_k_(const aotc_sgemm_job_ *j, int64_t s, int64_t i, int64_t fetch_s, int64_t part,
                                int64_t np, aotc_sgemm_kseg_ *more) {
  int64_t pc, step;
  for (pc = AOTC_SGEMM_KC; pc < j->K; pc += AOTC_SGEMM_KC, more++) {
    more->b = aotc_sgemm_strip_at_(j, pc, s, &step);
    more->kc = AOTC_MIN(AOTC_SGEMM_KC, j->K - pc);
    more->a = j->pa ? j->pa + aotc_sgemm_a_panel_(j->M, j->K, pc, i) : NULL;   /* packed: its own place */
    more->fetch = NULL;
    if (fetch_s < 0) continue;
    more->fetch = aotc_sgemm_fetch_share_(j, pc, fetch_s, part, np, &more->fetch_step, &more->fetch_count);
    more->fetch_count = AOTC_MIN(more->fetch_count, more->kc / 4);   /* a row every four steps */
  }
  more->kc = 0;
}

/* A (not made) of the panel at row i (rows rows) from column pc: packed, transposed or
 * row-major, with its row and column steps. */
AOTC_FN const float *aotc_sgemm_a_at_(const aotc_sgemm_job_ *j, int64_t pc, int64_t i, int64_t rows,
                                      int64_t *ars, int64_t *aks) {
  if (j->pa) {
    *ars = 1, *aks = rows;
    return j->pa + aotc_sgemm_a_panel_(j->M, j->K, pc, i);
  }
  if (j->trans_a) {
    *ars = 1, *aks = j->lda;
    return j->A + pc * j->lda + i;
  }
  *ars = j->lda, *aks = 1;
  return j->A + i * j->lda + pc;
}

/* The block's strips of all 32 columns (all but a ragged last one). */
AOTC_FN int64_t aotc_sgemm_full_strips_(const aotc_sgemm_job_ *j, const aotc_sgemm_block_ *blk) {
  return blk->ns - (blk->s0 + blk->ns == j->strips && j->N % AOTC_SGEMM_NR != 0);
}

/* Whether the block's panels each take their full strips in one call (a run,
 * aotc_sgemm_tile_run_for_): panel by panel, K-block by K-block, with nothing to do
 * between the tiles (no activation after the store, no taker of C, no made A).
 * MobileNetV2 took 0.974x the time at one thread and 0.990x at two; ResNet-50 0.997x
 * and 0.996x (paired, builds.py --model). */
AOTC_FN int aotc_sgemm_runs_(const aotc_sgemm_job_ *j, const aotc_sgemm_block_ *blk, int whole) {
  return blk->panel_outer && !whole && !j->make_a && !j->act_after && !j->take_c &&
         aotc_sgemm_full_strips_(j, blk) > 1;
}

/* Panel p's full strips of the block over the K-block from pc (kc columns) in one run;
 * fetch_a: its first tile fetches A ahead (aotc_sgemm_prefetch_). */
AOTC_FN void aotc_sgemm_panel_run_(const aotc_sgemm_job_ *j, const aotc_sgemm_block_ *blk, int64_t p,
                                   int64_t pc, int64_t kc, int first, int last, int fetch_a) {
  const aotc_sgemm_prefetch_ pf = {.a_ahead = 1};
  const int64_t c = blk->s0 * AOTC_SGEMM_NR;
  int64_t i, rows, ars, aks, bks, next;
  const float *a, *b = aotc_sgemm_strip_at_(j, pc, blk->s0, &bks);
  aotc_sgemm_epilogue_ ep;
  aotc_sgemm_panel_(j->M, j->even_panels, p, &i, &rows);
  a = aotc_sgemm_a_at_(j, pc, i, rows, &ars, &aks);
  ep = aotc_sgemm_epilogue_at_(j, i, c);
  next = aotc_sgemm_strip_at_(j, pc, blk->s0 + 1, &bks) - b;   /* from a full strip to the next */
  aotc_sgemm_tile_run_for_(rows)(kc, a, ars, aks, b, bks, next, j->C + i * j->ldc + c, j->ldc,
                                 aotc_sgemm_full_strips_(j, blk), first, last ? &ep : NULL, fetch_a ? &pf : NULL);
}

/* Task t's panels [*p0, *p1) and strips [*s0, *s1): range r of n over `count` items is
 * [r * count / n, (r + 1) * count / n), so the ranges differ by one item at most. The
 * pool's threads take the tasks from the two ends of their order, so each thread's
 * share is a share of C's rows (panel groups outermost) or, with columns_first, of its
 * columns: the pixels of a conv whose C is channels x pixels, so that a thread works
 * the part of the image it worked in the steps before and after (pixels as rows,
 * Winograd's tile blocks) and reads what it wrote from its own caches. That matters
 * where the two cores share no L3 (a host that puts two vCPUs on different dies: a
 * core-to-core round trip of 330 ns, not 56): there ResNet-50 at two threads took
 * 0.988x the time with its pointwise convs' tasks by pixels, MobileNetV2 0.986x; on one
 * die, and at one thread, the same. Shape only. */
AOTC_FN void aotc_sgemm_task_at_(const aotc_sgemm_job_ *j, int64_t t, int64_t *p0, int64_t *p1,
                                 int64_t *s0, int64_t *s1) {
  const int64_t p = j->columns_first ? t % j->panel_tasks : t / j->strip_tasks;
  const int64_t s = j->columns_first ? t / j->panel_tasks : t % j->strip_tasks;
  *p0 = p * j->panels / j->panel_tasks, *p1 = (p + 1) * j->panels / j->panel_tasks;
  *s0 = s * j->strips / j->strip_tasks, *s1 = (s + 1) * j->strips / j->strip_tasks;
}

AOTC_FN int64_t aotc_sgemm_tasks_(const aotc_sgemm_job_ *j) { return j->panel_tasks * j->strip_tasks; }

/* Where the threads are far apart (aotc_pool_far), a task takes the lines of its block
 * of C before its tiles write them (aotc_take_lines): the workspace holds one tensor
 * after another, so those lines were mostly last read by the other thread, and each
 * store would wait for the other die to let go of its copy. Only the lines wholly in
 * the block's columns of a row: a line shared with the next block is the other task's
 * too. Not where C is the residual itself (read before it is written), nor where a
 * taker gets the tiles (C is then the caller's scratch). In per-step profiles of
 * ResNet-50 at two threads on two L3s (medians of 23 and 18) its strided 1x1 conv took
 * 130 us less, its pointwise convs 10-45 us each, the model 42.3 -> 42.0 ms. */
AOTC_FN void aotc_sgemm_take_block_(const aotc_sgemm_job_ *j, const aotc_sgemm_block_ *blk) {
  const int64_t c0 = blk->s0 * AOTC_SGEMM_NR, c1 = AOTC_MIN((blk->s0 + blk->ns) * AOTC_SGEMM_NR, j->N);
  int64_t first, last, rows, r;
  aotc_sgemm_panel_(j->M, j->even_panels, blk->p0, &first, &rows);
  aotc_sgemm_panel_(j->M, j->even_panels, blk->p0 + blk->np - 1, &last, &rows);
  for (r = first; r < last + rows; r++) aotc_take_lines(j->C + r * j->ldc + c0, (size_t)(c1 - c0) * sizeof(float));
  aotc_lines_taken();
}

/* Block t of C over all of K, K outermost so C accumulates in order; or, where
 * aotc_sgemm_whole_k_ says, one pass with each tile over all of K. Within a pass the
 * tiles go strip by strip, or panel by panel below
 * AOTC_SGEMM_PANEL_OUTER_BELOW_K, or when M > N for blocks of at most
 * AOTC_SGEMM_PANEL_OUTER_MAX_STRIPS strips (aotc_gemm_kernels.h), or when A is made
 * (into `made`, a panel's worth, before the panel's first tile); strip by strip, each
 * tile prefetches part of the next strip (aotc_sgemm_prefetch_at_); panel by panel, a
 * panel's full strips may go in one run (aotc_sgemm_runs_). */
AOTC_FN void aotc_sgemm_block_tiles_(const aotc_sgemm_job_ *j, int64_t t, float *made) {
  aotc_sgemm_block_ blk;
  aotc_sgemm_kseg_ more[AOTC_SGEMM_WHOLE_K_BLOCKS];
  int64_t pc, u, pass, p1, s1;
  int a_rows_in_place, whole, runs;
  aotc_sgemm_task_at_(j, t, &blk.p0, &p1, &blk.s0, &s1);
  blk.np = p1 - blk.p0;
  blk.ns = s1 - blk.s0;
  blk.panel_outer = j->make_a || j->K < AOTC_SGEMM_PANEL_OUTER_BELOW_K ||
                    (j->M > j->N && blk.ns <= AOTC_SGEMM_PANEL_OUTER_MAX_STRIPS);
  whole = aotc_sgemm_whole_k_(j, &blk);
  pass = whole ? j->K : AOTC_SGEMM_KC;   /* the columns of A one pass over the tiles takes */
  a_rows_in_place = blk.panel_outer && !j->make_a && !j->pa && !j->trans_a;
  runs = aotc_sgemm_runs_(j, &blk, whole);
  if (j->far && !j->take_c && j->residual != j->C) aotc_sgemm_take_block_(j, &blk);
  for (pc = 0; pc < j->K; pc += pass) {
    int64_t kc = AOTC_MIN(AOTC_SGEMM_KC, j->K - pc);
    int first = pc == 0, last = pc + pass >= j->K;
    int64_t q;   /* the pass's K-blocks of the block's panels, where the tasks pack A */
    for (q = pc; j->packs_a_in_tasks && q < AOTC_MIN(pc + pass, j->K); q += AOTC_SGEMM_KC)
      for (u = 0; u < blk.np; u++) aotc_sgemm_pack_a_at_(j, q, AOTC_MIN(AOTC_SGEMM_KC, j->K - q), blk.p0 + u);
    for (u = 0; u < blk.np * blk.ns; u++) {
      int64_t p, s, c, cols, i, rows, ars, aks, bks;
      int fetches;
      const float *a, *b;
      float *cp;
      aotc_sgemm_epilogue_ ep;
      aotc_sgemm_prefetch_ pf = {.p = NULL};
      aotc_sgemm_block_tile_(&blk, u, &p, &s);
      if (runs && u % blk.ns == 0) {   /* (panel by panel: u is the panel's first tile) */
        const int64_t full = aotc_sgemm_full_strips_(j, &blk);
        if (a_rows_in_place) aotc_sgemm_prefetch_next_panel_(j, &blk, p, pc, kc);
        if (last && j->residual) aotc_sgemm_prefetch_next_residual_(j, &blk, u + full - 1);
        aotc_sgemm_panel_run_(j, &blk, p, pc, kc, first, last, a_rows_in_place);
        u += full - 1;
        if (full == blk.ns) continue;
        u++, s += full;   /* then the ragged strip on its own, below */
      }
      pf = aotc_sgemm_prefetch_at_(j, &blk, pc, kc, u, whole);
      pf.a_ahead = a_rows_in_place && !whole && u % blk.ns == 0;   /* (the panel's first tile) */
      c = s * AOTC_SGEMM_NR, cols = AOTC_MIN(AOTC_SGEMM_NR, j->N - c);
      b = aotc_sgemm_strip_at_(j, pc, s, &bks);
      aotc_sgemm_panel_(j->M, j->even_panels, p, &i, &rows);
      if (!whole) aotc_sgemm_next_a_rows_(j, &blk, u, pc, kc, &pf);
      if (j->make_a) {
        if (u % blk.ns == 0) j->make_a->fn(j->make_a->ctx, made, pc, kc, i, rows);
        a = made, ars = 1, aks = rows;
      } else {
        a = aotc_sgemm_a_at_(j, pc, i, rows, &ars, &aks);
      }
      if (a_rows_in_place && u % blk.ns == 0) {
        if (whole)
          aotc_sgemm_fetch_next_panel_(j, &blk, p, &pf);
        else
          aotc_sgemm_prefetch_next_panel_(j, &blk, p, pc, kc);
      }
      if (whole) aotc_sgemm_more_k_(j, s, i, pf.p ? s + 1 : -1, u % blk.np, blk.np, more);
      cp = j->C + i * j->ldc + c;
      ep = aotc_sgemm_epilogue_at_(j, i, c);
      if (last && j->residual) aotc_sgemm_prefetch_next_residual_(j, &blk, u);
      fetches = pf.count > 0 || pf.a_ahead || pf.a_next || pf.next_panel;
      aotc_sgemm_tile_for_(rows, cols)(kc, a, ars, aks, b, bks, cp, j->ldc, cols, first, last ? &ep : NULL,
                                       fetches ? &pf : NULL, whole ? more : NULL);
      if (!last) continue;
      aotc_activation_apply_2d(j->act_after, cp, j->ldc, rows, cols);   /* still in L1 */
      if (j->take_c) j->take_c->fn(j->take_c->ctx, cp, j->ldc, i, rows, c, cols);
    }
  }
}

AOTC_FN void aotc_sgemm_block_task_(void *arg, int64_t t) {
  aotc_sgemm_block_tiles_((const aotc_sgemm_job_ *)arg, t, NULL);
}

/* The same where A is made: the panel on this thread's stack (AOTC_SGEMM_MR x
 * AOTC_SGEMM_KC floats, 14 KiB on AVX-512), so it stays in L1. */
AOTC_FN void aotc_sgemm_made_a_task_(void *arg, int64_t t) {
  float made[AOTC_SGEMM_MR * AOTC_SGEMM_KC] AOTC_ALIGNED(64);
  aotc_sgemm_block_tiles_((const aotc_sgemm_job_ *)arg, t, made);
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
    float abuf[AOTC_SGEMM_KC];   /* this K-block of a strided vector, contiguous */
    for (pc = 0; pc < j->K; pc += AOTC_SGEMM_KC) {
      int64_t kc = AOTC_MIN(AOTC_SGEMM_KC, j->K - pc), gstride = kc * AOTC_SGEMM_NR, k;
      const float *a = j->A + pc;
      if (astep != 1) {
        for (k = 0; k < kc; k++) abuf[k] = j->A[(pc + k) * astep];
        a = abuf;
      }
      aotc_sgemv_strips_(kc, a, j->pb + aotc_sgemm_packed_strip_(j->strips, j->K, pc, c0 / AOTC_SGEMM_NR),
                         gstride, (int)aotc_sgemm_div_up_(cols, AOTC_SGEMM_NR), acc);
    }
  }
  for (c = 0; c < cols; c++) {
    float v = acc[c];
    if (j->bias_m) v += j->bias_m[0];
    if (j->bias_n) v += j->bias_n[c0 + c];
    if (j->residual) v += j->residual[c0 + c];
    j->C[c0 + c] = AOTC_SGEMM_CANON_(v);
  }
  aotc_activation_apply(j->act, j->C + c0, cols);
  if (j->take_c) j->take_c->fn(j->take_c->ctx, j->C + c0, j->ldc, 0, 1, c0, cols);
}

/* Tasks of at most AOTC_SGEMM_PANELS_PER_TASK panels x AOTC_SGEMM_STRIPS_PER_TASK strips
 * (per path: aotc_gemm_kernels.h), the panels and strips shared out evenly, or all the
 * strips where the tasks pack A (no two tasks share a panel then);
 * a small product is cut finer, the larger side of a task first (where A is made or
 * packed by the tasks, the panels first: each task makes its panels once more; with
 * more than 2 * AOTC_SGEMM_PANELS_PER_TASK panels the panels alone reach the count;
 * with rows_first, the panels first too: a channels-last pointwise conv's rows are
 * its pixels, aotc_conv_nhwc.h),
 * until there are AOTC_SGEMM_MIN_TASKS tasks or single tiles, and on while their count
 * is odd (below AOTC_SGEMM_EVEN_TASKS_BELOW): two threads then take as many each, where
 * an odd count left one of them a whole task to wait through (MobileNetV2's pointwise
 * convs in 25 or 17 tasks of 10-22 us at two threads; the caller's waits at the end of
 * its dispatches went from about 210 to 134 us a run); where A is made, its
 * strips are cut only while there are fewer than AOTC_SGEMM_MADE_A_MIN_TASKS tasks of
 * one panel (each cut makes every panel once more: ResNet-50's 3x3 conv at 14x14, 14
 * panels, took 2% longer cut in two). Shape only: a tile's sums never depend on
 * which task (or thread) computes it. */
#define AOTC_SGEMM_MADE_A_MIN_TASKS 4
#define AOTC_SGEMM_EVEN_TASKS_BELOW (4 * AOTC_SGEMM_MIN_TASKS)
AOTC_FN void aotc_sgemm_split_(aotc_sgemm_job_ *j) {
  int64_t np = aotc_sgemm_div_up_(j->panels, AOTC_SGEMM_PANELS_PER_TASK);
  int64_t ns = j->packs_a_in_tasks ? 1 : aotc_sgemm_div_up_(j->strips, AOTC_SGEMM_STRIPS_PER_TASK);
  for (;;) {
    /* (the largest range of each: ranges differ by one at most) */
    int64_t pp = aotc_sgemm_div_up_(j->panels, np), sp = aotc_sgemm_div_up_(j->strips, ns);
    int64_t tasks = np * ns;
    /* (strips are never cut where the tasks pack A: two tasks would write one panel) */
    const int enough = tasks >= AOTC_SGEMM_MIN_TASKS && (tasks % 2 == 0 || tasks >= AOTC_SGEMM_EVEN_TASKS_BELOW);
    if (enough || (pp == 1 && (sp == 1 || j->packs_a_in_tasks))) break;
    if (j->make_a && pp == 1 && tasks >= AOTC_SGEMM_MADE_A_MIN_TASKS) break;
    if ((j->make_a || j->packs_a_in_tasks || j->rows_first) && pp > 1) np++;
    else if (sp * AOTC_SGEMM_NR >= pp * AOTC_SGEMM_MR && sp > 1) ns++;
    else if (pp > 1) np++;
    else ns++;
  }
  j->panel_tasks = np;
  j->strip_tasks = ns;
}

/* The common driver: packed_b NULL or B already packed (then B/ldb/trans_b are
 * unused); `extras` NULL or as aotc_sgemm_extras says (with A packed or made,
 * A/lda/trans_a are unused). */
AOTC_FN void aotc_sgemm_run_(aotc_pool *pool, int64_t M, int64_t N, int64_t K,
                             const float *A, int64_t lda, int trans_a,
                             const float *B, int64_t ldb, int trans_b, const float *packed_b,
                             float *C, int64_t ldc, const float *bias_m, const float *bias_n,
                             const aotc_activation *act, const aotc_sgemm_extras *extras,
                             unsigned char *scratch) {
  static const aotc_sgemm_extras none = {.packed_a = NULL};
  aotc_sgemm_extras x = extras ? *extras : none;
  const float *residual = x.residual;
  aotc_sgemm_job_ j;
  if (M <= 0 || N <= 0) return;
  if (x.packed_a && M == 1) {   /* one row packed is the row itself */
    A = x.packed_a, lda = K, trans_a = 0;
    x.packed_a = NULL;
  }
  if (K <= 0) {
    int64_t i, c;
    for (i = 0; i < M; i++)
      for (c = 0; c < N; c++) {
        float v = 0.0f;
        if (bias_m) v += bias_m[i];
        if (bias_n) v += bias_n[c];
        if (residual) v += residual[i * ldc + c];
        C[i * ldc + c] = AOTC_SGEMM_CANON_(v);
      }
    aotc_activation_apply_2d(act, C, ldc, M, N);
    if (x.take_c) x.take_c->fn(x.take_c->ctx, C, ldc, 0, M, 0, N);
    return;
  }
  /* A single column of C (contiguous) is a row of C^T = B^T A^T: the M = 1 path. */
  if (N == 1 && M > 1 && ldc == 1 && !packed_b && !x.packed_a && !x.make_a) {
    const aotc_sgemm_extras transposed = {.residual = residual};
    aotc_sgemm_run_(pool, 1, M, K, B, ldb, !trans_b, A, lda, !trans_a, NULL, C, 1,
                    bias_n, bias_m, act, &transposed, scratch);
    if (x.take_c) x.take_c->fn(x.take_c->ctx, C, 1, 0, M, 0, 1);
    return;
  }
  memset(&j, 0, sizeof j);
  j.M = M; j.N = N; j.K = K; j.lda = lda; j.ldb = ldb; j.ldc = ldc;
  j.A = A; j.B = B; j.C = C; j.trans_a = trans_a; j.trans_b = trans_b;
  j.bias_m = bias_m; j.bias_n = bias_n; j.residual = residual; j.act = act;
  aotc_sgemm_epilogue_init_(&j);
  j.panels = aotc_sgemm_panels_(M);
  j.strips = aotc_sgemm_div_up_(N, AOTC_SGEMM_NR);
  j.kblocks = aotc_sgemm_div_up_(K, AOTC_SGEMM_KC);
  j.pb = packed_b;
  j.make_a = x.make_a;
  j.take_c = x.take_c;
  j.columns_first = x.columns_first;
  j.rows_first = x.rows_first;
  if (x.packed_a) j.pa = x.packed_a;
  else if (!x.make_a && aotc_sgemm_packs_a_(M, N, K, lda)) j.pa = j.pa_out = (float *)(void *)scratch;
  j.far = aotc_pool_far(pool);
  j.even_panels = x.make_a || j.pa || !trans_a;   /* (all but A read transposed) */
  if (!packed_b && (M > 1 || trans_b)) {
    j.pb_out = (float *)(void *)(scratch + (x.packed_a || x.make_a ? 0 : aotc_sgemm_packed_scratch_bytes(M, N, K)));
    j.pb = j.pb_out;
    j.b_in_place = M > 1 && aotc_sgemm_reads_b_in_place_(ldb, trans_b);
  }
  j.packs_a_in_tasks = AOTC_SGEMM_PACK_A_IN_TASKS && j.pa_out &&
                       j.panels > 2 * AOTC_SGEMM_PANELS_PER_TASK;
  if (aotc_sgemm_a_pack_tasks_(&j) || aotc_sgemm_packed_strips_(&j))
    aotc_parallel_for(pool, aotc_sgemm_a_pack_tasks_(&j) + j.kblocks * aotc_sgemm_packed_strips_(&j),
                      aotc_sgemm_pack_task_, &j);
  if (M == 1 && !x.make_a) {   /* (a made row goes through the tiles) */
    int64_t width = j.pb ? AOTC_SGEMV_NC : AOTC_SGEMV_ROWS_NC;
    aotc_parallel_for(pool, aotc_sgemm_div_up_(N, width), aotc_sgemv_task_, &j);
    return;
  }
  aotc_sgemm_split_(&j);
  aotc_parallel_for(pool, aotc_sgemm_tasks_(&j),
                    x.make_a ? aotc_sgemm_made_a_task_ : aotc_sgemm_block_task_, &j);
}

/* ---- the entry points' bodies (each documented above) ------------------------------ */

AOTC_ENGINE_FN void aotc_sgemm(aotc_pool *pool, int64_t M, int64_t N, int64_t K,
                               const float *A, int64_t lda, int trans_a,
                               const float *B, int64_t ldb, int trans_b,
                               float *C, int64_t ldc,
                               const float *bias_m, const float *bias_n,
                               unsigned char *scratch) {
  aotc_sgemm_run_(pool, M, N, K, A, lda, trans_a, B, ldb, trans_b, NULL, C, ldc, bias_m, bias_n,
                  NULL, NULL, scratch);
}

AOTC_ENGINE_FN void aotc_sgemm_act(aotc_pool *pool, int64_t M, int64_t N, int64_t K,
                                   const float *A, int64_t lda, int trans_a,
                                   const float *B, int64_t ldb, int trans_b,
                                   float *C, int64_t ldc,
                                   const float *bias_m, const float *bias_n,
                                   const aotc_activation *act, unsigned char *scratch) {
  aotc_sgemm_run_(pool, M, N, K, A, lda, trans_a, B, ldb, trans_b, NULL, C, ldc, bias_m, bias_n,
                  act, NULL, scratch);
}

AOTC_ENGINE_FN void aotc_sgemm_packed(aotc_pool *pool, int64_t M, int64_t N, int64_t K,
                                      const float *A, int64_t lda, int trans_a, const float *packed_b,
                                      float *C, int64_t ldc,
                                      const float *bias_m, const float *bias_n,
                                      unsigned char *scratch) {
  aotc_sgemm_run_(pool, M, N, K, A, lda, trans_a, NULL, 0, 0, packed_b, C, ldc, bias_m, bias_n,
                  NULL, NULL, scratch);
}

AOTC_ENGINE_FN void aotc_sgemm_packed_act(aotc_pool *pool, int64_t M, int64_t N, int64_t K,
                                          const float *A, int64_t lda, int trans_a,
                                          const float *packed_b, float *C, int64_t ldc,
                                          const float *bias_m, const float *bias_n,
                                          const aotc_activation *act, unsigned char *scratch) {
  aotc_sgemm_run_(pool, M, N, K, A, lda, trans_a, NULL, 0, 0, packed_b, C, ldc, bias_m, bias_n,
                  act, NULL, scratch);
}

AOTC_ENGINE_FN void aotc_sgemm_scale_add(int64_t M, int64_t N, float *Y, float alpha, const float *C,
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

#endif /* AOTC_ENGINE_EXTERN */

/* C = A B (M x K times K x N, row-major), each output summed in ACC over k in index
 * order: LOAD(element) widens, STORE(CANON(sum)) writes (a cast or a function-like
 * macro name each; CANON may be empty). */
#define AOTC_MATMUL_LOOP_(T, ACC, LOAD, STORE, CANON, M, N, K, A, B, C)             \
  do {                                                                              \
    const T *aotc_a_ = (A), *aotc_b_ = (B);                                         \
    T *aotc_c_ = (C);                                                               \
    int64_t aotc_i_, aotc_j_, aotc_k_;                                              \
    for (aotc_i_ = 0; aotc_i_ < (M); aotc_i_++)                                     \
      for (aotc_j_ = 0; aotc_j_ < (N); aotc_j_++) {                                 \
        ACC aotc_s_ = 0;                                                            \
        for (aotc_k_ = 0; aotc_k_ < (K); aotc_k_++)                                 \
          aotc_s_ += LOAD(aotc_a_[aotc_i_ * (K) + aotc_k_]) *                       \
                     LOAD(aotc_b_[aotc_k_ * (N) + aotc_j_]);                        \
        aotc_c_[aotc_i_ * (N) + aotc_j_] = STORE(CANON(aotc_s_));                   \
      }                                                                             \
  } while (0)

/* The other float types (T stored, TK its load/store name of aotc_elementwise.h): in
 * double, rounded once. */
#define AOTC_MATMUL_WIDE(T, TK, M, N, K, A, B, C) \
  AOTC_MATMUL_LOOP_(T, double, (double)AOTC_LD_##TK, AOTC_ST_##TK, aotc_canon_nan_f64, M, N, K, A, B, C)

/* Integers, wrapping like the element-wise ops. */
#define AOTC_MATMUL_INT(T, M, N, K, A, B, C) \
  AOTC_MATMUL_LOOP_(T, uint64_t, (uint64_t), (T), , M, N, K, A, B, C)

#endif
