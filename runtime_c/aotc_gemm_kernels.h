/* aotc runtime: the register tiles of the matrix product (included by aotc_gemm.h).
 *
 * One tile is `rows` (<= AOTC_SGEMM_MR) x 32 columns of C over one K-block (16 for a
 * ragged last strip that narrow): every path reads the same packed B strips
 * (AOTC_SGEMM_NR = 32 columns, +0 padded), so packing never depends on the path.
 * Paths, chosen by the target macro and what the compiler was told the machine has (a
 * build without -mavx512f falls back, never fails):
 *   AVX-512  14 x 32: 28 zmm accumulators, 2 for B, A broadcast from memory;
 *   AVX2      3 x 32: 12 ymm accumulators, 4 for B;
 *   generic   4 x 32 in plain C (the compiler vectorizes the 32 columns as it can).
 * Arithmetic: each C element is one accumulator, acc = acc + a[k] * b[k] for k in
 * order; fast mode fuses that into one FMA where the ISA has it, exact mode rounds the
 * product and the sum separately. Masked loads and stores handle ragged columns. */
/* Nothing here for a model compiled against the engine object (AOTC_ENGINE_EXTERN). */
#if !defined(AOTC_GEMM_KERNELS_H_) && !defined(AOTC_ENGINE_EXTERN)
#define AOTC_GEMM_KERNELS_H_

#include "aotc_base.h"

#if defined(AOTC_TARGET_AVX512) && defined(__AVX512F__)
#define AOTC_SGEMM_PATH_AVX512 1
#elif (defined(AOTC_TARGET_AVX512) || defined(AOTC_TARGET_AVX2)) && defined(__AVX2__) && \
    (defined(__FMA__) || defined(AOTC_EXACT))
#define AOTC_SGEMM_PATH_AVX2 1
#else
#define AOTC_SGEMM_PATH_GENERIC 1
#endif

#define AOTC_SGEMM_NR 32

/* One core's L1 data cache and L2, which the blocking follows: aotc's build passes the
 * build machine's (build.cache_bytes); C built without them takes 32 KiB and 1 MiB. */
#ifndef AOTC_L1D_BYTES
#define AOTC_L1D_BYTES (32 << 10)
#endif
#ifndef AOTC_L2_BYTES
#define AOTC_L2_BYTES (1 << 20)
#endif

/* ---- vectors of each path: AOTC_VW floats ------------------------------------------ */

#if defined(AOTC_SGEMM_PATH_AVX512)
#include <immintrin.h>
#include "aotc_vtranspose.h"
#define AOTC_SGEMM_MR 14   /* tiles exist for 1..3, 4 and 5..14 rows: see below */
#define AOTC_VW 16
/* A task: 140 rows (a transformer's 128 tokens in one task, so each strip of its
 * weights comes from memory once) by 512 columns, at most. */
#define AOTC_SGEMM_PANELS_PER_TASK 10
#define AOTC_SGEMM_STRIPS_PER_TASK 16
/* Below this K, panel by panel: short tiles, and the output is the traffic that
 * counts, written in runs along each panel's rows (pointwise convs with K = 64 up to
 * 45% slower strip by strip); from it on, strip by strip: the strip stays in L1 while
 * the panels pass it (with the prefetch, on a Xeon: BERT's FFN products 5.9 -> 4.9 ms,
 * ResNet-50's deep convs 8-18% faster). */
#define AOTC_SGEMM_PANEL_OUTER_BELOW_K AOTC_SGEMM_KC
/* ... and at any K when A is the larger operand (M > N) and a block has at most this
 * many strips: a panel of A then stays in L1 across the block's strips, where strip by
 * strip each strip read the panels again (3136 x 64 x 576, A read in place from L3:
 * 3.5-9% faster in four paired runs on Zen 5; 3 and 4 strips within the noise; with
 * M < N, as 64 x 1024 x 1024, B is the stream and its prefetch counts: 5% slower). */
#define AOTC_SGEMM_PANEL_OUTER_MAX_STRIPS 2
/* Where A is packed (aotc_gemm.h) and M spans more than two tasks of panels, each task
 * may take all the strips and pack its own panels at the start of each K-block, where
 * otherwise one pass packs all of A first. Which is faster depends on the core. 1024^3,
 * a one-node MatMul against onnxruntime: on an AMD Zen (1 MiB of L2 a core), the tasks'
 * packing took 181-183 -> 202-203 GFLOP/s at one thread (the panels reach the tiles
 * through L2, where the pass sent them out to L3 and back), 344-349 -> 386 at two; on a
 * Xeon with 2 MiB, the pass first took 0.91x the time at one thread and 0.92x at two
 * (paired), neutral on ResNet-50 and on 3136 x 64 x 576. So the tasks pack A on cores
 * with less L2 than 2 MiB. At 128 or 64 rows, where a task's strips would all stream B
 * once per task, 3-5% slower, hence the bound on M. On the Xeon the pass is about 8% of
 * 1024^3's time (with it skipped, for timing only, 0.92x), but two other ways to pack
 * lost there: tasks cut by strips as usual, each packing the panels it reads into its own
 * part of the scratch K-block by K-block (two tasks pack each panel; the next K-block's
 * rows fetched into L2 ahead), 1.027-1.035x the time; tasks of 5 panels over all the
 * strips, so each panel is packed once, 1.017x (paired, in a C loop at one thread). */
#define AOTC_SGEMM_PACK_A_IN_TASKS (AOTC_L2_BYTES < (2 << 20))
typedef __m512 aotc_v_;
AOTC_INLINE_ALWAYS __mmask16 aotc_v_mask_(int64_t n) {
  return (__mmask16)(n >= 16 ? 0xFFFFu : n <= 0 ? 0u : (1u << n) - 1u);
}
#define AOTC_V_ZERO() _mm512_setzero_ps()
#define AOTC_V_SET1(x) _mm512_set1_ps(x)
#define AOTC_V_LOAD(p) _mm512_loadu_ps(p)
#define AOTC_V_LOADN(p, n) _mm512_maskz_loadu_ps(aotc_v_mask_(n), p)
#define AOTC_V_STOREN(p, v, n) _mm512_mask_storeu_ps(p, aotc_v_mask_(n), v)
#define AOTC_V_ADD(x, y) _mm512_add_ps(x, y)
#define AOTC_V_MUL(x, y) _mm512_mul_ps(x, y)
#define AOTC_V_MAX(x, y) _mm512_max_ps(x, y)
#define AOTC_V_MIN(x, y) _mm512_min_ps(x, y)
#define AOTC_V_FMA(x, y, z) _mm512_fmadd_ps(x, y, z)
#define AOTC_V_CANON(v) \
  _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000)))

#elif defined(AOTC_SGEMM_PATH_AVX2)
#include <immintrin.h>
#define AOTC_SGEMM_MR 3
#define AOTC_VW 8
/* A task: 192 rows by 128 columns, at most: its panels of A (192 KiB a K-block) and
 * strips of B (128 KiB) stay in L2; with 512 columns B came from L3. */
#define AOTC_SGEMM_PANELS_PER_TASK 64
#define AOTC_SGEMM_STRIPS_PER_TASK 4
/* Strip by strip always: a 32 KiB strip of B stays in L1 while the panels pass it
 * (panel by panel, 0-6% slower at 1 thread on Zen 3, best of repeated runs). */
#define AOTC_SGEMM_PANEL_OUTER_BELOW_K 0
#define AOTC_SGEMM_PANEL_OUTER_MAX_STRIPS 0
#define AOTC_SGEMM_PACK_A_IN_TASKS 0   /* one pass packs A first: not measured against it */
typedef __m256 aotc_v_;
AOTC_INLINE_ALWAYS __m256i aotc_v_mask_(int64_t n) {
  int m = (int)(n >= 8 ? 8 : n <= 0 ? 0 : n);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(m), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
#define AOTC_V_ZERO() _mm256_setzero_ps()
#define AOTC_V_SET1(x) _mm256_set1_ps(x)
#define AOTC_V_LOAD(p) _mm256_loadu_ps(p)
/* Masked moves only for a ragged vector: a masked store is many times slower than a
 * plain one on some AVX2 machines (AMD Zen), and tiles store whole vectors. */
AOTC_INLINE_ALWAYS __m256 aotc_v_loadn_(const float *p, int64_t n) {
  return n >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, aotc_v_mask_(n));
}
AOTC_INLINE_ALWAYS void aotc_v_storen_(float *p, __m256 v, int64_t n) {
  if (n >= 8) _mm256_storeu_ps(p, v);
  else _mm256_maskstore_ps(p, aotc_v_mask_(n), v);
}
#define AOTC_V_LOADN(p, n) aotc_v_loadn_(p, n)
#define AOTC_V_STOREN(p, v, n) aotc_v_storen_(p, v, n)
#define AOTC_V_ADD(x, y) _mm256_add_ps(x, y)
#define AOTC_V_MUL(x, y) _mm256_mul_ps(x, y)
#define AOTC_V_MAX(x, y) _mm256_max_ps(x, y)
#define AOTC_V_MIN(x, y) _mm256_min_ps(x, y)
#define AOTC_V_FMA(x, y, z) _mm256_fmadd_ps(x, y, z)
#define AOTC_V_CANON(v) \
  _mm256_blendv_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000)), _mm256_cmp_ps(v, v, _CMP_UNORD_Q))

#else
#define AOTC_SGEMM_MR 4
#define AOTC_VW 1
#define AOTC_SGEMM_PANELS_PER_TASK 8
#define AOTC_SGEMM_STRIPS_PER_TASK 16
#define AOTC_SGEMM_PANEL_OUTER_BELOW_K 0   /* strip by strip, as always: not measured against the other */
#define AOTC_SGEMM_PANEL_OUTER_MAX_STRIPS 0
#define AOTC_SGEMM_PACK_A_IN_TASKS 0
typedef float aotc_v_;
#define AOTC_V_ZERO() 0.0f
#define AOTC_V_SET1(x) (x)
#define AOTC_V_LOAD(p) (*(p))
#define AOTC_V_LOADN(p, n) ((n) > 0 ? *(p) : 0.0f)
#define AOTC_V_STOREN(p, v, n) do { if ((n) > 0) *(p) = (v); } while (0)
#define AOTC_V_ADD(x, y) ((x) + (y))
#define AOTC_V_MUL(x, y) ((x) * (y))
#define AOTC_V_MAX(x, y) ((x) > (y) ? (x) : (y))   /* as the SIMD max: y when unordered */
#define AOTC_V_MIN(x, y) ((x) < (y) ? (x) : (y))
#define AOTC_V_FMA(x, y, z) ((x) * (y) + (z))   /* contracted only in fast mode */
#define AOTC_V_CANON(v) ((v) != (v) ? aotc_f32_from_bits(0x7FC00000u) : (v))
#endif

#define AOTC_NV (AOTC_SGEMM_NR / AOTC_VW)   /* vectors per tile row */

/* acc + x * y: one rounding in fast mode (FMA), two in exact mode. */
#ifdef AOTC_EXACT
#define AOTC_V_MADD(x, y, acc) AOTC_V_ADD(acc, AOTC_V_MUL(x, y))
#define AOTC_V_FINISH(v) AOTC_V_CANON(v)
#define AOTC_V_FINISH_CANONS_ 1   /* whether AOTC_V_FINISH does anything */
#else
#define AOTC_V_MADD(x, y, acc) AOTC_V_FMA(x, y, acc)
#define AOTC_V_FINISH(v) (v)
#define AOTC_V_FINISH_CANONS_ 0
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

/* ---- the tile ------------------------------------------------------------------------ */

/* What a tile does after its last K-block, in registers: + bias_m[i], + bias_n[j],
 * + residual[i * ldr + j] (each NULL or not), NaN rewritten in exact mode, then Relu or
 * Clip (the activations that are a max and a min: the bits of their expressions in
 * aotc_activation.h, NaN included; others run after the store). */
enum { AOTC_SGEMM_ACT_NONE, AOTC_SGEMM_ACT_RELU, AOTC_SGEMM_ACT_CLIP };
typedef struct {
  const float *bias_m, *bias_n, *residual;
  int64_t ldr;      /* the residual's row stride */
  int act;          /* AOTC_SGEMM_ACT_* */
  float lo, hi;     /* Clip's bounds */
} aotc_sgemm_epilogue_;

/* x after Relu or Clip (AOTC_SGEMM_ACT_*, Clip's bounds in lo and hi), in registers:
 * the bits of their expressions in aotc_activation.h, NaN included (max and min return
 * their second operand when unordered: Relu's NaN gives 0, Clip's stays NaN). Written
 * as assignments, not returns: with returns the tiles' epilogue compiled 4% larger and
 * MobileNetV2, whose short-K tiles make the epilogue count, ran 2-3% slower. */
AOTC_INLINE_ALWAYS aotc_v_ aotc_sgemm_act_v_(aotc_v_ x, int act, aotc_v_ lo, aotc_v_ hi) {
  if (act == AOTC_SGEMM_ACT_RELU) x = AOTC_V_MAX(x, AOTC_V_ZERO());   /* x > 0 ? x : 0 */
  if (act == AOTC_SGEMM_ACT_CLIP) x = AOTC_V_MIN(hi, AOTC_V_MAX(lo, x));
  return x;
}

/* Rows k < count of a strip of B that a later tile reads, at p + k * step: fetched into
 * L2 while this tile computes, so that weights streamed from memory arrive in time.
 * And a_ahead: the tile is the first of its panel's tiles on a row-major A read in
 * place (panel by panel), so it fetches its rows ahead (AOTC_SGEMM_A_AHEAD). And
 * a_next (or NULL): a_count rows of a_width floats, a_step apart, of a transposed A read
 * in place that a later tile reads first (aotc_sgemm_next_a_rows_). And next_panel (or
 * NULL): the tile is the first of its panel's over all of K on a row-major A read in
 * place, and fetches the next panel: next_panel_rows rows of next_panel_cols floats,
 * next_panel_ld apart (aotc_sgemm_fetch_next_panel_). */
typedef struct {
  const float *p;
  int64_t step, count;
  int a_ahead;
  const float *a_next;
  int64_t a_step, a_count, a_width;
  const float *next_panel;
  int64_t next_panel_ld, next_panel_rows, next_panel_cols, next_panel_per_step;
} aotc_sgemm_prefetch_;

/* The K-blocks a tile goes on to after its first, in order, ended by one with kc = 0:
 * each a strip of B (rows bks apart, as the first's) and its rows, and A: where the
 * block before left it (read in place), or its own panel (packed). The sums stay in
 * registers from block to block, where a tile per K-block stored them and loaded them
 * back (the same sums in the same order). And fetch (or NULL): fetch_count <= kc / 4
 * rows of the next strip in this K-block, fetch_step apart, that the tile fetches into
 * L2 as it goes (as pf's p, step and count in the first K-block). */
typedef struct {
  const float *b;
  int64_t kc;
  const float *a;   /* NULL: A goes on where the block before left it; else A's panel here */
  const float *fetch;
  int64_t fetch_step, fetch_count;
} aotc_sgemm_kseg_;

#if defined(__GNUC__) || defined(__clang__)
#define AOTC_PREFETCH_L2(p) __builtin_prefetch((p), 0, 2)
#define AOTC_PREFETCH_L1(p) __builtin_prefetch((p), 0, 3)
#define AOTC_PREFETCH_W(p) __builtin_prefetch((p), 1, 3)
#else
#define AOTC_PREFETCH_L2(p) ((void)(p))
#define AOTC_PREFETCH_L1(p) ((void)(p))
#define AOTC_PREFETCH_W(p) ((void)(p))
#endif
/* The lines (one or two) of n <= 16 floats from p, into L2. */
#define AOTC_PREFETCH_L2_SPAN(p, n) (AOTC_PREFETCH_L2(p), AOTC_PREFETCH_L2((p) + (n) - 1))

/* Takes the whole cache lines in [p, p + bytes) from every other core before this
 * thread writes them, without waiting on each: zeros streamed over them (non-temporal
 * stores, which go around the caches and drop every cached copy). A store to a line
 * that a core on another die last read waits for that core to let go, one line after
 * another: ResNet-50's 7x7 convs unfolded their 900 KB in 270 us on two L3s, 74 on
 * one, 100 with the lines taken first. The streamed zeros go to memory, and the
 * writes after them miss the cache, so it pays only where aotc_pool_far. Call
 * aotc_lines_taken() once, after the last, before writing. A no-op on the portable
 * path. */
AOTC_INLINE_ALWAYS void aotc_take_lines(void *p, size_t bytes) {
#if defined(AOTC_SGEMM_PATH_AVX512) || defined(AOTC_SGEMM_PATH_AVX2)
  char *line = (char *)(((uintptr_t)p + 63u) & ~(uintptr_t)63u), *end = (char *)p + bytes;
  for (; line + 64 <= end; line += 64) {
#if defined(AOTC_SGEMM_PATH_AVX512)
    _mm512_stream_ps((float *)(void *)line, _mm512_setzero_ps());
#else
    _mm256_stream_ps((float *)(void *)line, _mm256_setzero_ps());
    _mm256_stream_ps((float *)(void *)(line + 32), _mm256_setzero_ps());
#endif
  }
#else
  (void)p;
  (void)bytes;
#endif
}

/* Orders the streamed zeros before the writes that follow. */
AOTC_INLINE_ALWAYS void aotc_lines_taken(void) {
#if defined(AOTC_SGEMM_PATH_AVX512) || defined(AOTC_SGEMM_PATH_AVX2)
  _mm_sfence();
#endif
}

/* One range taken and fenced, where `far` (aotc_pool_far); else nothing. */
AOTC_INLINE_ALWAYS void aotc_take_range(int far, void *p, size_t bytes) {
  if (!far) return;
  aotc_take_lines(p, bytes);
  aotc_lines_taken();
}

/* The 32 floats (two lines) of each of `rows` rows, `ld` apart, into L1, to be
 * written or read. */
AOTC_INLINE_ALWAYS void aotc_sgemm_prefetch_tile_(const float *p, int64_t ld, const int rows, const int write) {
  int i;
  AOTC_UNROLL(16)
  for (i = 0; i < rows; i++) {
    if (write) {
      AOTC_PREFETCH_W(p + i * ld);
      AOTC_PREFETCH_W(p + i * ld + 16);
    } else {
      AOTC_PREFETCH_L1(p + i * ld);
      AOTC_PREFETCH_L1(p + i * ld + 16);
    }
  }
}

/* One k of the tile body below: acc[i] += a(i, k) * B row k, then a and b step on. */
#define AOTC_SGEMM_TILE_STEP_()                                                            \
  do {                                                                                     \
    aotc_v_ bv[AOTC_NV];                                                                   \
    AOTC_UNROLL(32)                                                                        \
    for (v = 0; v < nv; v++) bv[v] = AOTC_V_LOAD(b + v * AOTC_VW);                         \
    AOTC_UNROLL(16)                                                                        \
    for (i = 0; i < rows; i++) {                                                           \
      aotc_v_ av = AOTC_V_SET1(a[i * ars]);                                                \
      AOTC_UNROLL(32)                                                                      \
      for (v = 0; v < nv; v++) acc[i][v] = AOTC_V_MADD(av, bv[v], acc[i][v]);             \
    }                                                                                      \
    a += aks;                                                                              \
    b += bks;                                                                              \
  } while (0)

/* Where A is read in place row by row, panel by panel, the first tile of a panel reads
 * its rows from memory (the transformed weights of a Winograd conv, a panel of 13 rows
 * meeting only two strips at 14x14). The panel's first AOTC_SGEMM_A_AHEAD columns come
 * with the panel before (aotc_sgemm_prefetch_next_panel_); the tile fetches the rest
 * this many columns ahead, where the whole panel came before it at once: ResNet-50 took
 * 0.972x the time at one thread, 0.970x at two (builds.py --model, paired), MobileNetV2
 * 1.002x and 1.005x. Done in every tile of a panel, MobileNetV2 took 1.02-1.04x (its
 * panels meet up to 16 strips, A then in L1). */
#define AOTC_SGEMM_A_AHEAD 64

/* STATEMENT for each sum acc[i][v] of a tile's rows x nv vectors, both loops fully
 * unrolled (the sums stay in registers). */
#define AOTC_SGEMM_EACH_SUM_(STATEMENT)         \
  do {                                          \
    AOTC_UNROLL(16)                             \
    for (i = 0; i < rows; i++) {                \
      AOTC_UNROLL(32)                           \
      for (v = 0; v < nv; v++) { STATEMENT; }   \
    }                                           \
  } while (0)

/* C[i, 0:cols] for i < rows over one K-block of kc: A element (i, k) at a[i * ars + k * aks]
 * (a packed or transposed A has ars = 1, a row-major A has aks = 1), B the kc x 32 strip
 * b with row k at b + k * bks (bks = 32 packed; a row-major B's row stride when read in
 * place; with `boff`, row k at b + boff[k] instead), of which the first nv vectors
 * (cols <= nv * AOTC_VW). Starts from 0 (first) or from C; `ep` on the last block, else
 * NULL (its residual may be c itself: each element is read before it is written, so c
 * is not restrict); `pf` NULL or as it says (always NULL with `boff`: its rows step by
 * bks). (Both by pointer: a struct passed by value is copied through the stack with a
 * wide load that waits for the last tile's stores to drain, which cost short tiles
 * 10%.) */
AOTC_INLINE_ALWAYS void aotc_sgemm_tile_body_(const int rows, const int nv, int64_t kc,
                                             const float *AOTC_RESTRICT a, int64_t ars,
                                             int64_t aks, const float *AOTC_RESTRICT b, int64_t bks,
                                             float *c, int64_t ldc, int64_t cols,
                                             int first, const aotc_sgemm_epilogue_ *ep,
                                             const aotc_sgemm_prefetch_ *pf, const int64_t *boff,
                                             const aotc_sgemm_kseg_ *more) {
  const float *b0 = b;
  aotc_v_ acc[AOTC_SGEMM_MR][AOTC_NV];
  int64_t k;
  int i, v;
  AOTC_SGEMM_EACH_SUM_(acc[i][v] = first ? AOTC_V_ZERO()
                                         : AOTC_V_LOADN(c + i * ldc + v * AOTC_VW, cols - v * AOTC_VW));
  /* The lines this tile ends on, fetched while it computes: the residual where one is
   * added (its loads waited on memory: ResNet-50's 64 -> 256 pointwise convs took
   * 1.4 ms with a fused Add, 0.8 ms without), and C where it is only written. */
  if (first) aotc_sgemm_prefetch_tile_(c, ldc, rows, 1);
  if (ep && ep->residual) aotc_sgemm_prefetch_tile_(ep->residual, ep->ldr, rows, 0);
  /* The pf->count rows (<= kc) of the next strip, two lines each, are fetched a line
   * every other step where the tile's kc steps allow, else a row a step. Spread so, where
   * the rows came two lines a step (the steps after them fetching nothing), weights
   * streamed from L3 arrived in time: 128 x 768 x 768 with its B past L2 went from
   * 132-143 to 152-162 GFLOP/s at one thread, 128 x 768 x 3072 from 131-134 to 157-163,
   * 128 x 3072 x 768 from 155-159 to 173-177 (a line a step: 148-158, 148-152, 164-168;
   * every fourth step: 140-144, 133-137, 172-177); in builds.py --model at one thread,
   * ResNet-50 took 0.937x and 0.975x the time, BERT-base 0.982x, the MLP at 64 rows
   * 0.978x; at two, ResNet-50 1.000x, BERT-base 0.990x. */
#define AOTC_SGEMM_FETCH_B_SPREAD_(p, step, k) AOTC_PREFETCH_L2((p) + ((k) >> 2) * (step) + (((k) >> 1) & 1) * 16)
  /* The next panel's lines row by row, next_panel_per_step a step over the first K-block.
   * Where the panel before fetched all of it as it started (504 lines at 3136 x 64 x
   * 576), that shape took 0.963x the time at one thread (builds.py --matmul, four
   * repeats; 1.004x at two). A first version, its loop placed after the B fetches
   * below and going on through the later K-blocks, took 1.13x the time in a C loop,
   * whether it fetched a line a step or two, over all of K or over the first K-block
   * (not understood). */
  if (pf && pf->next_panel) {
    int64_t line_row = 0, line_col = 0;
    for (k = 0; k < kc; k++) {
      int64_t q;
      AOTC_SGEMM_TILE_STEP_();
      for (q = 0; q < pf->next_panel_per_step && line_row < pf->next_panel_rows; q++) {
        AOTC_PREFETCH_L2(pf->next_panel + line_row * pf->next_panel_ld + line_col);
        line_col += 16;
        if (line_col >= pf->next_panel_cols) line_col = 0, line_row++;
      }
    }
  } else if (pf && pf->a_next && 4 * pf->count <= kc) {   /* the same, and a row of A's a step */
    for (k = 0; k < kc; k++) {
      AOTC_SGEMM_TILE_STEP_();
      if (!(k & 1) && k < 4 * pf->count) AOTC_SGEMM_FETCH_B_SPREAD_(pf->p, pf->step, k);
      if (k < pf->a_count) AOTC_PREFETCH_L2_SPAN(pf->a_next + k * pf->a_step, pf->a_width);
    }
  } else if (pf && 4 * pf->count <= kc) {
    for (k = 0; k < 4 * pf->count; k++) {
      AOTC_SGEMM_TILE_STEP_();
      if (!(k & 1)) AOTC_SGEMM_FETCH_B_SPREAD_(pf->p, pf->step, k);
    }
  } else {
    for (k = 0; pf && k < pf->count; k++) {
      AOTC_SGEMM_TILE_STEP_();
      AOTC_PREFETCH_L2(pf->p + k * pf->step);
      AOTC_PREFETCH_L2(pf->p + k * pf->step + 16);
    }
  }
  /* (each step, of one of the tile's rows in turn, the line AOTC_SGEMM_A_AHEAD columns
   * on: a row's line lasts 16 steps, and a tile has at most 16 rows on every path) */
  if (pf && pf->a_ahead && aks == 1) {
    for (; k < kc - AOTC_SGEMM_A_AHEAD; k++) {
      if ((k & 15) < rows) AOTC_PREFETCH_L2(a + (k & 15) * ars + AOTC_SGEMM_A_AHEAD);
      AOTC_SGEMM_TILE_STEP_();
    }
  }
  for (; k < kc; k++) {
    if (boff) b = b0 + boff[k];
    AOTC_SGEMM_TILE_STEP_();
  }
  for (; more && more->kc > 0; more++) {
    if (more->a) a = more->a;
    b = more->b, k = 0;
    if (more->fetch) {
      for (; k < 4 * more->fetch_count; k++) {
        AOTC_SGEMM_TILE_STEP_();
        if (!(k & 1)) AOTC_SGEMM_FETCH_B_SPREAD_(more->fetch, more->fetch_step, k);
      }
    }
    for (; k < more->kc; k++) AOTC_SGEMM_TILE_STEP_();
  }
#undef AOTC_SGEMM_FETCH_B_SPREAD_
  /* Each part of the epilogue is tested once and then applied to every sum, in the
   * order bias_m, bias_n, residual, activation: tested sum by sum, the tests and their
   * branches cost a short tile as much as a fifth of its FMAs (224 x 128 x 24 at 85
   * GFLOP/s, 94 tested once; 196 x 576 x 96 104-108 -> 110). */
  if (ep) {
    const aotc_v_ lo = AOTC_V_SET1(ep->lo), hi = AOTC_V_SET1(ep->hi);
    if (ep->bias_m) AOTC_SGEMM_EACH_SUM_(acc[i][v] = AOTC_V_ADD(acc[i][v], AOTC_V_SET1(ep->bias_m[i])));
    if (ep->bias_n) {   /* (each vector of it loaded once) */
      AOTC_UNROLL(32)
      for (v = 0; v < nv; v++) {
        const aotc_v_ bn = AOTC_V_LOADN(ep->bias_n + v * AOTC_VW, cols - v * AOTC_VW);
        AOTC_UNROLL(16)
        for (i = 0; i < rows; i++) acc[i][v] = AOTC_V_ADD(acc[i][v], bn);
      }
    }
    if (ep->residual)
      AOTC_SGEMM_EACH_SUM_(acc[i][v] = AOTC_V_ADD(acc[i][v], AOTC_V_LOADN(ep->residual + i * ep->ldr +
                                                                         v * AOTC_VW, cols - v * AOTC_VW)));
    if (AOTC_V_FINISH_CANONS_) AOTC_SGEMM_EACH_SUM_(acc[i][v] = AOTC_V_FINISH(acc[i][v]));
    if (ep->act == AOTC_SGEMM_ACT_RELU)   /* (each kind a constant in its own loop) */
      AOTC_SGEMM_EACH_SUM_(acc[i][v] = aotc_sgemm_act_v_(acc[i][v], AOTC_SGEMM_ACT_RELU, lo, hi));
    else if (ep->act == AOTC_SGEMM_ACT_CLIP)
      AOTC_SGEMM_EACH_SUM_(acc[i][v] = aotc_sgemm_act_v_(acc[i][v], AOTC_SGEMM_ACT_CLIP, lo, hi));
  }
  AOTC_SGEMM_EACH_SUM_(AOTC_V_STOREN(c + i * ldc + v * AOTC_VW, acc[i][v], cols - v * AOTC_VW));
}

typedef void (*aotc_sgemm_tile_fn_)(int64_t kc, const float *a, int64_t ars, int64_t aks,
                                    const float *b, int64_t bks, float *c, int64_t ldc, int64_t cols,
                                    int first, const aotc_sgemm_epilogue_ *ep, const aotc_sgemm_prefetch_ *pf,
                                    const aotc_sgemm_kseg_ *more);

#define AOTC_SGEMM_TILE_HEAD_(R)                                                           \
  AOTC_NOINLINE void aotc_sgemm_tile_##R##_(                                                \
      int64_t kc, const float *a, int64_t ars, int64_t aks, const float *b, int64_t bks,    \
      float *c, int64_t ldc, int64_t cols, int first, const aotc_sgemm_epilogue_ *ep,        \
      const aotc_sgemm_prefetch_ *pf, const aotc_sgemm_kseg_ *more)

/* One compiled tile per row count and width (the whole strip, or its first half for a
 * ragged last strip of at most 16 columns: a 14 x 196 output's seventh strip computed
 * 32 columns for 4, and the product took as long as a 14 x 224 one), each with its
 * loops fully unrolled; A is k-major (ars = 1) or row-major (aks = 1). */
#define AOTC_SGEMM_TILE_OF_WIDTH_(NAME, R, NV)                                             \
  AOTC_SGEMM_TILE_HEAD_(NAME) {                                                            \
    if (ars == 1) /* k-major A: rows at fixed offsets */                                  \
      aotc_sgemm_tile_body_(R, NV, kc, a, 1, aks, b, bks, c, ldc, cols, first, ep, pf, NULL, more); \
    else                                                                                   \
      aotc_sgemm_tile_body_(R, NV, kc, a, ars, 1, b, bks, c, ldc, cols, first, ep, pf, NULL, more); \
  }
#define AOTC_SGEMM_TILE_ROWS_(R) AOTC_SGEMM_TILE_OF_WIDTH_(R, R, AOTC_NV)
#define AOTC_SGEMM_TILE_HALF_ROWS_(R) AOTC_SGEMM_TILE_OF_WIDTH_(half_##R, R, AOTC_NV / 2)

/* X(R) for every tile height R of this path. */
#if AOTC_SGEMM_MR >= 14
#define AOTC_SGEMM_EACH_ROWS_(X) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14)
#elif AOTC_SGEMM_MR >= 4
#define AOTC_SGEMM_EACH_ROWS_(X) X(1) X(2) X(3) X(4)
#else
#define AOTC_SGEMM_EACH_ROWS_(X) X(1) X(2) X(3)
#endif
AOTC_SGEMM_EACH_ROWS_(AOTC_SGEMM_TILE_ROWS_)
AOTC_SGEMM_EACH_ROWS_(AOTC_SGEMM_TILE_HALF_ROWS_)

/* A run of n full-width tiles along one panel: tile t reads the strip at b + t * bnext
 * and writes C's columns from 32 t on, its epilogue's bias_n and residual 32 t further
 * on (each fetching the next tile's residual as it starts); A, the K-block and the
 * flags are the run's. One call for the run saves each tile the call and the set-up
 * around it, which count in short tiles (K = 16 to 160: MobileNetV2's pointwise convs;
 * 256 x 3136 x 64 took 0.978x the time in runs). The same sums as tile by tile. */
typedef void (*aotc_sgemm_tile_run_fn_)(int64_t kc, const float *a, int64_t ars, int64_t aks,
                                        const float *b, int64_t bks, int64_t bnext, float *c,
                                        int64_t ldc, int64_t n, int first, const aotc_sgemm_epilogue_ *ep,
                                        const aotc_sgemm_prefetch_ *pf);
#define AOTC_SGEMM_TILE_RUN_(R)                                                                   \
  AOTC_NOINLINE void aotc_sgemm_tile_run_##R##_(int64_t kc, const float *a, int64_t ars, int64_t aks, \
                                                const float *b, int64_t bks, int64_t bnext, float *c, \
                                                int64_t ldc, int64_t n, int first,                   \
                                                const aotc_sgemm_epilogue_ *ep,                      \
                                                const aotc_sgemm_prefetch_ *pf) {                    \
    aotc_sgemm_epilogue_ e = {NULL, NULL, NULL, 0, AOTC_SGEMM_ACT_NONE, 0.0f, 0.0f};               \
    int64_t t;                                                                                     \
    if (ep) e = *ep;                                                                               \
    for (t = 0; t < n; t++, b += bnext, c += AOTC_SGEMM_NR) {                                     \
      if (e.residual && t + 1 < n) aotc_sgemm_prefetch_tile_(e.residual + AOTC_SGEMM_NR, e.ldr, R, 0); \
      if (ars == 1)                                                                                \
        aotc_sgemm_tile_body_(R, AOTC_NV, kc, a, 1, aks, b, bks, c, ldc, AOTC_SGEMM_NR, first,    \
                              ep ? &e : NULL, NULL, NULL, NULL);                                   \
      else                                                                                         \
        aotc_sgemm_tile_body_(R, AOTC_NV, kc, a, ars, 1, b, bks, c, ldc, AOTC_SGEMM_NR, first,    \
                              ep ? &e : NULL, t == 0 ? pf : NULL, NULL, NULL);                     \
      if (e.bias_n) e.bias_n += AOTC_SGEMM_NR;                                                     \
      if (e.residual) e.residual += AOTC_SGEMM_NR;                                                 \
    }                                                                                              \
  }
AOTC_SGEMM_EACH_ROWS_(AOTC_SGEMM_TILE_RUN_)

/* The same tiles with a row-major A and B's row k at b + boff[k]: the rows of an
 * unfolded matrix read where they lie (the implicit conv kernel). */
typedef void (*aotc_sgemm_tile_ind_fn_)(int64_t kc, const float *a, int64_t ars, const float *b,
                                        const int64_t *boff, float *c, int64_t ldc, int64_t cols,
                                        int first, const aotc_sgemm_epilogue_ *ep);
#define AOTC_SGEMM_TILE_IND_(R)                                                              \
  AOTC_NOINLINE void aotc_sgemm_tile_ind_##R##_(                                              \
      int64_t kc, const float *a, int64_t ars, const float *b, const int64_t *boff, float *c, \
      int64_t ldc, int64_t cols, int first, const aotc_sgemm_epilogue_ *ep) {                  \
    aotc_sgemm_tile_body_(R, AOTC_NV, kc, a, ars, 1, b, 0, c, ldc, cols, first, ep, NULL, boff, NULL); \
  }
AOTC_SGEMM_EACH_ROWS_(AOTC_SGEMM_TILE_IND_)

/* The tile for `rows` (1..AOTC_SGEMM_MR) rows and `cols` columns, of each kind. */
#define AOTC_SGEMM_TILE_NAME_(R) aotc_sgemm_tile_##R##_,
#define AOTC_SGEMM_TILE_HALF_NAME_(R) aotc_sgemm_tile_half_##R##_,
#define AOTC_SGEMM_TILE_IND_NAME_(R) aotc_sgemm_tile_ind_##R##_,
AOTC_FN aotc_sgemm_tile_fn_ aotc_sgemm_tile_for_(int64_t rows, int64_t cols) {
  static const aotc_sgemm_tile_fn_ tiles[] = {AOTC_SGEMM_EACH_ROWS_(AOTC_SGEMM_TILE_NAME_)};
  static const aotc_sgemm_tile_fn_ halves[] = {AOTC_SGEMM_EACH_ROWS_(AOTC_SGEMM_TILE_HALF_NAME_)};
  return cols <= AOTC_SGEMM_NR / 2 ? halves[rows - 1] : tiles[rows - 1];
}

#define AOTC_SGEMM_TILE_RUN_NAME_(R) aotc_sgemm_tile_run_##R##_,
AOTC_FN aotc_sgemm_tile_run_fn_ aotc_sgemm_tile_run_for_(int64_t rows) {
  static const aotc_sgemm_tile_run_fn_ runs[] = {AOTC_SGEMM_EACH_ROWS_(AOTC_SGEMM_TILE_RUN_NAME_)};
  return runs[rows - 1];
}

AOTC_FN aotc_sgemm_tile_ind_fn_ aotc_sgemm_tile_ind_for_(int64_t rows) {
  static const aotc_sgemm_tile_ind_fn_ tiles[] = {AOTC_SGEMM_EACH_ROWS_(AOTC_SGEMM_TILE_IND_NAME_)};
  return tiles[rows - 1];
}

/* ---- one row of C (M = 1) -------------------------------------------------------------- */

#define AOTC_SGEMV_STRIPS 4   /* strips of packed B per pass over a K-block */
#define AOTC_SGEMV_NC (AOTC_SGEMV_STRIPS * AOTC_SGEMM_NR)

/* acc[g * 32 + j] += sum over k < kc, in order, of a[k] * strip_g[k * 32 + j], for the
 * `strips` (<= AOTC_SGEMV_STRIPS) strips at b + g * gstride: B read once, in order. */
AOTC_NOINLINE void aotc_sgemv_strips_(int64_t kc, const float *AOTC_RESTRICT a,
                                      const float *AOTC_RESTRICT b, int64_t gstride,
                                      int strips, float *AOTC_RESTRICT acc_io) {
  aotc_v_ acc[AOTC_SGEMV_STRIPS][AOTC_NV];
  int64_t k;
  int g, v;
  if (strips == AOTC_SGEMV_STRIPS) {
    AOTC_UNROLL(4)
    for (g = 0; g < AOTC_SGEMV_STRIPS; g++) {
      AOTC_UNROLL(32)
      for (v = 0; v < AOTC_NV; v++) acc[g][v] = AOTC_V_LOAD(acc_io + g * AOTC_SGEMM_NR + v * AOTC_VW);
    }
    for (k = 0; k < kc; k++) {
      aotc_v_ av = AOTC_V_SET1(a[k]);
      AOTC_UNROLL(4)
      for (g = 0; g < AOTC_SGEMV_STRIPS; g++) {
        AOTC_UNROLL(32)
        for (v = 0; v < AOTC_NV; v++)
          acc[g][v] = AOTC_V_MADD(av, AOTC_V_LOAD(b + g * gstride + k * AOTC_SGEMM_NR + v * AOTC_VW),
                                  acc[g][v]);
      }
    }
    AOTC_UNROLL(4)
    for (g = 0; g < AOTC_SGEMV_STRIPS; g++) {
      AOTC_UNROLL(32)
      for (v = 0; v < AOTC_NV; v++) AOTC_V_STOREN(acc_io + g * AOTC_SGEMM_NR + v * AOTC_VW, acc[g][v], AOTC_VW);
    }
    return;
  }
  for (g = 0; g < strips; g++) {   /* the ragged end of the row: one strip at a time */
    const float *strip = b + g * gstride;
    AOTC_UNROLL(32)
    for (v = 0; v < AOTC_NV; v++) acc[0][v] = AOTC_V_LOAD(acc_io + g * AOTC_SGEMM_NR + v * AOTC_VW);
    for (k = 0; k < kc; k++) {
      aotc_v_ av = AOTC_V_SET1(a[k]);
      AOTC_UNROLL(32)
      for (v = 0; v < AOTC_NV; v++)
        acc[0][v] = AOTC_V_MADD(av, AOTC_V_LOAD(strip + k * AOTC_SGEMM_NR + v * AOTC_VW), acc[0][v]);
    }
    AOTC_UNROLL(32)
    for (v = 0; v < AOTC_NV; v++) AOTC_V_STOREN(acc_io + g * AOTC_SGEMM_NR + v * AOTC_VW, acc[0][v], AOTC_VW);
  }
}

#endif
