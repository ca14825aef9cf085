/* aotc runtime: reductions (ReduceSum, ReduceMean, ..., ReduceLogSumExp, global pools).
 *
 * A reduction is described by its input shape collapsed to the fewest dims (adjacent
 * reduced dims merged, adjacent kept dims merged, size-1 dims dropped; rank >= 2) and,
 * per dim, the element stride of the output (0 where the dim is reduced). The input
 * is walked once in memory order, one innermost row at a time:
 *   innermost dim reduced: the row is reduced in 16 independent lanes (which the
 *     compiler vectorizes), the lanes combined in a fixed order, then merged into
 *     its output element;
 *   innermost dim kept: the row is merged element by element into an output row.
 * Each output element therefore sees its inputs in one order fixed by the shape.
 * Work is split over the outermost dim when it is kept (each task owns a block of
 * outputs); a reduction over the outermost dim runs as one task.
 *
 * Every (operation, element type) pair is one public function
 *   aotc_reduce_<op>_<type>(pool, geom, x, y, scratch)
 * Values are accumulated in a compute type A: the element type itself, except float for
 * float16 and bfloat16, whose results are accumulated in scratch (out_numel floats) and
 * rounded once. Log-sum-exp needs out_numel values of A more scratch for the shifts.
 * Integer arithmetic wraps (it is done in unsigned); a reduction over no elements gives
 * the operation's identity (0, 1, the lowest or highest value, -inf for the logs). */
#ifndef AOTC_REDUCE_H_
#define AOTC_REDUCE_H_

#include "aotc_base.h"
#include "aotc_elementwise.h"
#include "aotc_half.h"
#include "aotc_math.h"
#include "aotc_threads.h"

/* ---- accumulators of the statement-macro kernels (scans, arg-reductions, einsum) ------
 * Per kernel type name (the AOTC_LD_/AOTC_ST_ names of aotc_elementwise.h), the type
 * sums and products run in: float for float and the 16-bit floats, double for double,
 * uint64_t for every integer (wrapping, and exact modulo 2^width once stored back). */
#define AOTC_ACC_float float
#define AOTC_ACC_double double
#define AOTC_ACC_aotc_f16 float
#define AOTC_ACC_aotc_bf16 float
#define AOTC_ACC_int8_t uint64_t
#define AOTC_ACC_int16_t uint64_t
#define AOTC_ACC_int32_t uint64_t
#define AOTC_ACC_int64_t uint64_t
#define AOTC_ACC_uint8_t uint64_t
#define AOTC_ACC_uint16_t uint64_t
#define AOTC_ACC_uint32_t uint64_t
#define AOTC_ACC_uint64_t uint64_t
/* Exact mode's canonical NaN of a value in its compute type (identity for integers) */
#define AOTC_CANON_float(v) AOTC_CANON_F32(v)
#define AOTC_CANON_double(v) AOTC_CANON_F64(v)
#define AOTC_CANON_aotc_f16(v) AOTC_CANON_F32(v)
#define AOTC_CANON_aotc_bf16(v) AOTC_CANON_F32(v)
#define AOTC_CANON_int8_t(v) (v)
#define AOTC_CANON_int16_t(v) (v)
#define AOTC_CANON_int32_t(v) (v)
#define AOTC_CANON_int64_t(v) (v)
#define AOTC_CANON_uint8_t(v) (v)
#define AOTC_CANON_uint16_t(v) (v)
#define AOTC_CANON_uint32_t(v) (v)
#define AOTC_CANON_uint64_t(v) (v)
#define AOTC_CANON_bool(v) (v)
#define AOTC_CANON__Bool(v) (v) /* bool after one more macro level */
/* NaN tests that compile to 0 for integers (a self-comparison of an integer warns) */
#define AOTC_ISNAN_float(v) ((v) != (v))
#define AOTC_ISNAN_double(v) ((v) != (v))
#define AOTC_ISNAN_aotc_f16(v) ((v) != (v))
#define AOTC_ISNAN_aotc_bf16(v) ((v) != (v))
#define AOTC_ISNAN_int8_t(v) 0
#define AOTC_ISNAN_int16_t(v) 0
#define AOTC_ISNAN_int32_t(v) 0
#define AOTC_ISNAN_int64_t(v) 0
#define AOTC_ISNAN_uint8_t(v) 0
#define AOTC_ISNAN_uint16_t(v) 0
#define AOTC_ISNAN_uint32_t(v) 0
#define AOTC_ISNAN_uint64_t(v) 0

#define AOTC_REDUCE_MAX_RANK 16
#define AOTC_REDUCE_LANES 16

typedef struct aotc_reduce_geom {
  int64_t rank;                           /* >= 2 */
  int64_t shape[AOTC_REDUCE_MAX_RANK];    /* collapsed input dims */
  int64_t ystride[AOTC_REDUCE_MAX_RANK];  /* output element stride per dim; 0: reduced */
  int64_t count;                          /* input elements reduced into each output */
  int64_t out_numel;
  int64_t chunk;                          /* dim-0 indices per task */
} aotc_reduce_geom;

AOTC_FN int64_t aotc_reduce_tasks_(const aotc_reduce_geom *g) {
  return g->ystride[0] == 0 ? 1 : (g->shape[0] + g->chunk - 1) / g->chunk;
}

/* NAME: function prefix; T: element type; A: compute type; LOAD(v): an element as A;
 * INIT: identity; MAP(v, a): an input value before merging (a: the auxiliary value of
 * its output, used by log-sum-exp); MERGE(p, q): combine two partial results;
 * FINISH(s, n, a): the output from the merged result s of n inputs.
 * Defines NAME##_run_(pool, g, x, y, aux) with y of type A. */
#define AOTC_REDUCE_DEFINE_TYPED_(NAME, T, A, LOAD, INIT, MAP, MERGE, FINISH)           \
  /* The reduction of row x[0, n) with auxiliary value a, in 16 lanes. */              \
  AOTC_FN A NAME##_row_(const T *AOTC_RESTRICT x, int64_t n, A a) {                     \
    const int64_t full = n - n % AOTC_REDUCE_LANES;                                     \
    A lane[AOTC_REDUCE_LANES], acc;                                                     \
    int64_t j;                                                                          \
    int l;                                                                              \
    (void)a;                                                                            \
    for (l = 0; l < AOTC_REDUCE_LANES; l++) lane[l] = (INIT);                           \
    for (j = 0; j < full; j += AOTC_REDUCE_LANES)                                       \
      for (l = 0; l < AOTC_REDUCE_LANES; l++)                                           \
        lane[l] = MERGE(lane[l], MAP(LOAD(x[j + l]), a));                               \
    /* The tail into lane 0, in order, bounded by the lane count: counted on from j,   \
     * GCC at -O3 saw a 2^62nd iteration of it where it cannot run, a warning. */       \
    for (l = 0; l < n - full; l++) lane[0] = MERGE(lane[0], MAP(LOAD(x[full + l]), a)); \
    acc = lane[0];                                                                      \
    for (l = 1; l < AOTC_REDUCE_LANES; l++) acc = MERGE(acc, lane[l]);                  \
    return acc;                                                                         \
  }                                                                                     \
                                                                                        \
  /* Outputs of dim-0 indices [i0, i1) (all outputs when dim 0 is reduced). */         \
  AOTC_FN void NAME##_range_(const aotc_reduce_geom *g, const T *x, A *y, const A *aux, \
                             int64_t i0, int64_t i1) {                                  \
    const int64_t rank = g->rank, inner = g->shape[rank - 1];                           \
    const int reduced_inner = g->ystride[rank - 1] == 0;                                \
    int64_t y0 = g->ystride[0] ? i0 * g->ystride[0] : 0;                                \
    int64_t y1 = g->ystride[0] ? i1 * g->ystride[0] : g->out_numel;                     \
    int64_t idx[AOTC_REDUCE_MAX_RANK] = {0}, rows_per_i0 = 1, xoff, k, d;               \
    for (k = y0; k < y1; k++) y[k] = (INIT);                                            \
    for (d = 1; d < rank - 1; d++) rows_per_i0 *= g->shape[d];                          \
    for (d = 0; d < rank; d++)                                                          \
      if (g->shape[d] == 0) i1 = i0; /* nothing to read */                              \
    idx[0] = i0;                                                                        \
    xoff = i0 * rows_per_i0 * inner;                                                    \
    while (idx[0] < i1) {                                                               \
      int64_t yoff = 0;                                                                 \
      const T *AOTC_RESTRICT xr = x + xoff;                                             \
      for (d = 0; d < rank - 1; d++) yoff += idx[d] * g->ystride[d];                    \
      if (reduced_inner) {                                                              \
        A a = aux ? aux[yoff] : (A)0;                                                   \
        y[yoff] = MERGE(y[yoff], NAME##_row_(xr, inner, a));                            \
      } else {                                                                          \
        A *AOTC_RESTRICT yr = y + yoff;                                                 \
        const A *ar = aux ? aux + yoff : NULL;                                          \
        int64_t j;                                                                      \
        if (ar) {                                                                       \
          for (j = 0; j < inner; j++) yr[j] = MERGE(yr[j], MAP(LOAD(xr[j]), ar[j]));    \
        } else {                                                                        \
          for (j = 0; j < inner; j++) yr[j] = MERGE(yr[j], MAP(LOAD(xr[j]), (A)0));     \
        }                                                                               \
      }                                                                                 \
      xoff += inner;                                                                    \
      for (d = rank - 2; d > 0; d--) {                                                  \
        if (++idx[d] < g->shape[d]) break;                                              \
        idx[d] = 0;                                                                     \
      }                                                                                 \
      if (d == 0) idx[0]++;                                                             \
    }                                                                                   \
    for (k = y0; k < y1; k++) y[k] = FINISH(y[k], g->count, (aux ? aux[k] : (A)0));     \
  }                                                                                     \
                                                                                        \
  typedef struct {                                                                      \
    const aotc_reduce_geom *g;                                                          \
    const T *x;                                                                         \
    const A *aux;                                                                       \
    A *y;                                                                               \
  } NAME##_args_;                                                                       \
                                                                                        \
  AOTC_FN void NAME##_task_(void *arg, int64_t task) {                                  \
    const NAME##_args_ *a = (const NAME##_args_ *)arg;                                  \
    const aotc_reduce_geom *g = a->g;                                                   \
    int64_t i0 = task * g->chunk;                                                       \
    int64_t i1 = g->ystride[0] ? AOTC_MIN(i0 + g->chunk, g->shape[0]) : g->shape[0];    \
    NAME##_range_(g, a->x, a->y, a->aux, i0, i1);                                       \
  }                                                                                     \
                                                                                        \
  /* aux: NULL, or one value per output passed to MAP and FINISH. */                   \
  AOTC_FN void NAME##_run_(aotc_pool *pool, const aotc_reduce_geom *g, const T *x, A *y, \
                           const A *aux) {                                              \
    NAME##_args_ a;                                                                     \
    a.g = g;                                                                            \
    a.x = x;                                                                            \
    a.aux = aux;                                                                        \
    a.y = y;                                                                            \
    aotc_parallel_for(pool, aotc_reduce_tasks_(g), NAME##_task_, &a);                   \
  }

/* The row reduction of element type T computed in T (other kernels' row sums). */
#define AOTC_REDUCE_DEFINE_(NAME, T, INIT, MAP, MERGE, FINISH) \
  AOTC_REDUCE_DEFINE_TYPED_(NAME, T, T, AOTC_LOAD_ID_, INIT, MAP, MERGE, FINISH)

#define AOTC_LOAD_ID_(v) (v)

/* Exact mode writes NaN results as the one canonical NaN (aotc_base.h); a no-op for
 * integers and in fast mode. */
#ifdef AOTC_EXACT
#define AOTC_REDUCE_CANON_(T, y, n)                                                     \
  do {                                                                                  \
    int64_t c__;                                                                        \
    for (c__ = 0; c__ < (n); c__++) (y)[c__] = AOTC_CANON_##T((y)[c__]);                \
  } while (0)
#else
#define AOTC_REDUCE_CANON_(T, y, n) ((void)0)
#endif

/* The public function of a reduction whose compute type is its element type. */
#define AOTC_REDUCE_PUBLIC_DIRECT_(NAME, T)                                              \
  AOTC_FN void NAME(aotc_pool *pool, const aotc_reduce_geom *g, const T *x, T *y,       \
                    unsigned char *scratch) {                                           \
    (void)scratch;                                                                      \
    NAME##_run_(pool, g, x, y, NULL);                                                   \
    AOTC_REDUCE_CANON_(T, y, g->out_numel);                                             \
  }

/* The public function of a 16-bit float reduction: accumulate in scratch, round once. */
#define AOTC_REDUCE_PUBLIC_HALF_(NAME, STORE)                                            \
  AOTC_FN void NAME(aotc_pool *pool, const aotc_reduce_geom *g, const uint16_t *x,      \
                    uint16_t *y, unsigned char *scratch) {                              \
    float *acc = (float *)(void *)scratch;                                              \
    int64_t k;                                                                          \
    NAME##_run_(pool, g, x, acc, NULL);                                                 \
    for (k = 0; k < g->out_numel; k++) y[k] = STORE(AOTC_CANON_F32(acc[k]));            \
  }

/* ---- the operations ------------------------------------------------------------------ */

#define AOTC_RED_ID_(v, a) (v)
#define AOTC_RED_ADD_(p, q) ((p) + (q))
#define AOTC_RED_MUL_(p, q) ((p) * (q))
#define AOTC_RED_KEEP_(s, n, a) (s)
#define AOTC_RED_SQUARE_(v, a) ((v) * (v))
/* floats: a NaN wins, as in numpy and onnx.reference */
#define AOTC_RED_FMAX_(p, q) (((q) > (p) || (q) != (q)) ? (q) : (p))
#define AOTC_RED_FMIN_(p, q) (((q) < (p) || (q) != (q)) ? (q) : (p))
#define AOTC_RED_IMAX_(p, q) ((q) > (p) ? (q) : (p))
#define AOTC_RED_IMIN_(p, q) ((q) < (p) ? (q) : (p))

/* Floating families: SUF, element type T, compute type A, LOAD, the libm functions of A
 * and their infinity. */
#define AOTC_RED_FLOAT_DEFINE_(SUF, T, A, LOAD, ABS, SQRT, INF)                          \
  AOTC_FN A aotc_red_mean_##SUF##_(A s, int64_t n, A a) { (void)a; return s / (A)n; }   \
  AOTC_FN A aotc_red_abs_##SUF##_(A v, A a) { (void)a; return ABS(v); }                 \
  AOTC_FN A aotc_red_sqrt_##SUF##_(A s, int64_t n, A a) { (void)n; (void)a; return SQRT(s); } \
  AOTC_REDUCE_DEFINE_TYPED_(aotc_reduce_sum_##SUF, T, A, LOAD, (A)0, AOTC_RED_ID_,      \
                            AOTC_RED_ADD_, AOTC_RED_KEEP_)                              \
  AOTC_REDUCE_DEFINE_TYPED_(aotc_reduce_mean_##SUF, T, A, LOAD, (A)0, AOTC_RED_ID_,     \
                            AOTC_RED_ADD_, aotc_red_mean_##SUF##_)                      \
  AOTC_REDUCE_DEFINE_TYPED_(aotc_reduce_sumsquare_##SUF, T, A, LOAD, (A)0, AOTC_RED_SQUARE_, \
                            AOTC_RED_ADD_, AOTC_RED_KEEP_)                              \
  AOTC_REDUCE_DEFINE_TYPED_(aotc_reduce_l1_##SUF, T, A, LOAD, (A)0, aotc_red_abs_##SUF##_, \
                            AOTC_RED_ADD_, AOTC_RED_KEEP_)                              \
  AOTC_REDUCE_DEFINE_TYPED_(aotc_reduce_l2_##SUF, T, A, LOAD, (A)0, AOTC_RED_SQUARE_,   \
                            AOTC_RED_ADD_, aotc_red_sqrt_##SUF##_)                      \
  AOTC_REDUCE_DEFINE_TYPED_(aotc_reduce_prod_##SUF, T, A, LOAD, (A)1, AOTC_RED_ID_,     \
                            AOTC_RED_MUL_, AOTC_RED_KEEP_)                              \
  AOTC_REDUCE_DEFINE_TYPED_(aotc_reduce_max_##SUF, T, A, LOAD, -(INF), AOTC_RED_ID_,    \
                            AOTC_RED_FMAX_, AOTC_RED_KEEP_)                             \
  AOTC_REDUCE_DEFINE_TYPED_(aotc_reduce_min_##SUF, T, A, LOAD, (INF), AOTC_RED_ID_,     \
                            AOTC_RED_FMIN_, AOTC_RED_KEEP_)

AOTC_RED_FLOAT_DEFINE_(f32, float, float, AOTC_LOAD_ID_, fabsf, sqrtf, AOTC_INF)
AOTC_RED_FLOAT_DEFINE_(f64, double, double, AOTC_LOAD_ID_, fabs, sqrt, (double)AOTC_INF)
AOTC_RED_FLOAT_DEFINE_(f16, uint16_t, float, aotc_f16_to_f32, fabsf, sqrtf, AOTC_INF)
AOTC_RED_FLOAT_DEFINE_(bf16, uint16_t, float, aotc_bf16_to_f32, fabsf, sqrtf, AOTC_INF)

/* The public entry points of the six arithmetic reductions of one type (floats and
 * integers alike). */
#define AOTC_RED_ARITH_PUBLIC_(PUBLIC, SUF, ARG)                                        \
  PUBLIC(aotc_reduce_sum_##SUF, ARG)                                                    \
  PUBLIC(aotc_reduce_mean_##SUF, ARG)                                                   \
  PUBLIC(aotc_reduce_sumsquare_##SUF, ARG)                                              \
  PUBLIC(aotc_reduce_l1_##SUF, ARG)                                                     \
  PUBLIC(aotc_reduce_l2_##SUF, ARG)                                                     \
  PUBLIC(aotc_reduce_prod_##SUF, ARG)

#define AOTC_RED_FLOAT_PUBLIC_(PUBLIC, SUF, ARG)                                        \
  AOTC_RED_ARITH_PUBLIC_(PUBLIC, SUF, ARG)                                              \
  PUBLIC(aotc_reduce_max_##SUF, ARG)                                                    \
  PUBLIC(aotc_reduce_min_##SUF, ARG)

AOTC_RED_FLOAT_PUBLIC_(AOTC_REDUCE_PUBLIC_DIRECT_, f32, float)
AOTC_RED_FLOAT_PUBLIC_(AOTC_REDUCE_PUBLIC_DIRECT_, f64, double)
AOTC_RED_FLOAT_PUBLIC_(AOTC_REDUCE_PUBLIC_HALF_, f16, aotc_f32_to_f16)
AOTC_RED_FLOAT_PUBLIC_(AOTC_REDUCE_PUBLIC_HALF_, bf16, aotc_f32_to_bf16)

/* The logarithmic reductions, per exp/log pair: libm's (aotc_reduce_logsum_<type>), or
 * aotc's exact ones in exact mode (aotc_reduce_logsum_<type>_exact). Log-sum-exp is
 * shift + log(sum(exp(x - shift))) with the largest finite value of each output as its
 * shift (0 when there is none), so infinities give inf or -inf, never NaN. Scratch:
 * out_numel values of A for the shifts, and out_numel more for the 16-bit floats. */
#define AOTC_RED_LOG_DEFINE_(SUF, T, A, LOAD, EXP, LOG, INF)                             \
  AOTC_FN A aotc_red_log_##SUF##_(A s, int64_t n, A a) { (void)n; return LOG(s) + a; }  \
  AOTC_FN A aotc_red_exp_##SUF##_(A v, A a) { return EXP(v - a); }                      \
  AOTC_FN A aotc_red_finite_##SUF##_(A v, A a) { (void)a; return (v - v == 0) ? v : -(INF); } \
  AOTC_FN A aotc_red_shift_##SUF##_(A s, int64_t n, A a) {                              \
    (void)n; (void)a;                                                                   \
    return s == -(INF) ? (A)0 : s;                                                      \
  }                                                                                     \
  AOTC_REDUCE_DEFINE_TYPED_(aotc_reduce_logsum_##SUF, T, A, LOAD, (A)0, AOTC_RED_ID_,   \
                            AOTC_RED_ADD_, aotc_red_log_##SUF##_)                       \
  AOTC_REDUCE_DEFINE_TYPED_(aotc_reduce_shift_##SUF, T, A, LOAD, -(INF),                \
                            aotc_red_finite_##SUF##_, AOTC_RED_IMAX_, aotc_red_shift_##SUF##_) \
  AOTC_REDUCE_DEFINE_TYPED_(aotc_reduce_sumexp_##SUF, T, A, LOAD, (A)0, aotc_red_exp_##SUF##_, \
                            AOTC_RED_ADD_, aotc_red_log_##SUF##_)                       \
  AOTC_FN void aotc_reduce_logsumexp_##SUF##_run_(aotc_pool *pool, const aotc_reduce_geom *g, \
                                                  const T *x, A *y, A *shift) {         \
    aotc_reduce_shift_##SUF##_run_(pool, g, x, shift, NULL);                            \
    aotc_reduce_sumexp_##SUF##_run_(pool, g, x, y, shift);                              \
  }

/* Public log reductions: DIRECT writes y (scratch holds the shifts); HALF accumulates
 * after the shifts in scratch and rounds once. */
#define AOTC_RED_LOG_PUBLIC_DIRECT_(SUF, T)                                              \
  AOTC_FN void aotc_reduce_logsum_##SUF(aotc_pool *pool, const aotc_reduce_geom *g,     \
                                        const T *x, T *y, unsigned char *scratch) {     \
    (void)scratch;                                                                      \
    aotc_reduce_logsum_##SUF##_run_(pool, g, x, y, NULL);                               \
  }                                                                                     \
  AOTC_FN void aotc_reduce_logsumexp_##SUF(aotc_pool *pool, const aotc_reduce_geom *g,  \
                                           const T *x, T *y, unsigned char *scratch) {  \
    aotc_reduce_logsumexp_##SUF##_run_(pool, g, x, y, (T *)(void *)scratch);            \
    AOTC_REDUCE_CANON_(T, y, g->out_numel);                                             \
  }

#define AOTC_RED_LOG_PUBLIC_HALF_(SUF, STORE)                                            \
  AOTC_REDUCE_PUBLIC_HALF_(aotc_reduce_logsum_##SUF, STORE)                             \
  AOTC_FN void aotc_reduce_logsumexp_##SUF(aotc_pool *pool, const aotc_reduce_geom *g,  \
                                           const uint16_t *x, uint16_t *y,              \
                                           unsigned char *scratch) {                    \
    float *acc = (float *)(void *)scratch + g->out_numel;                               \
    int64_t k;                                                                          \
    aotc_reduce_logsumexp_##SUF##_run_(pool, g, x, acc, (float *)(void *)scratch);      \
    for (k = 0; k < g->out_numel; k++) y[k] = STORE(AOTC_CANON_F32(acc[k]));            \
  }

AOTC_RED_LOG_DEFINE_(f32, float, float, AOTC_LOAD_ID_, expf, logf, AOTC_INF)
AOTC_RED_LOG_DEFINE_(f64, double, double, AOTC_LOAD_ID_, exp, log, (double)AOTC_INF)
AOTC_RED_LOG_DEFINE_(f16, uint16_t, float, aotc_f16_to_f32, expf, logf, AOTC_INF)
AOTC_RED_LOG_DEFINE_(bf16, uint16_t, float, aotc_bf16_to_f32, expf, logf, AOTC_INF)
AOTC_RED_LOG_DEFINE_(f32_exact, float, float, AOTC_LOAD_ID_, aotc_exact_expf, aotc_exact_logf, AOTC_INF)
AOTC_RED_LOG_DEFINE_(f16_exact, uint16_t, float, aotc_f16_to_f32, aotc_exact_expf, aotc_exact_logf, AOTC_INF)
AOTC_RED_LOG_DEFINE_(bf16_exact, uint16_t, float, aotc_bf16_to_f32, aotc_exact_expf, aotc_exact_logf, AOTC_INF)

AOTC_RED_LOG_PUBLIC_DIRECT_(f32, float)
AOTC_RED_LOG_PUBLIC_DIRECT_(f64, double)
AOTC_RED_LOG_PUBLIC_DIRECT_(f32_exact, float)
AOTC_RED_LOG_PUBLIC_HALF_(f16, aotc_f32_to_f16)
AOTC_RED_LOG_PUBLIC_HALF_(bf16, aotc_f32_to_bf16)
AOTC_RED_LOG_PUBLIC_HALF_(f16_exact, aotc_f32_to_f16)
AOTC_RED_LOG_PUBLIC_HALF_(bf16_exact, aotc_f32_to_bf16)

/* Integers: wrapping arithmetic through the unsigned type U; the mean truncates toward
 * zero; L2 is the truncated square root of the (wrapped) sum of squares. */
#define AOTC_RED_INT_DEFINE_(T, U, SUF, TMIN, TMAX)                                     \
  AOTC_FN T aotc_red_add_##SUF##_(T p, T q) { return (T)((U)p + (U)q); }                \
  AOTC_FN T aotc_red_mul_##SUF##_(T p, T q) { return (T)((U)p * (U)q); }                \
  AOTC_FN T aotc_red_square_##SUF##_(T v, T a) { (void)a; return (T)((U)v * (U)v); }    \
  AOTC_FN T aotc_red_abs_##SUF##_(T v, T a) {                                           \
    (void)a;                                                                            \
    return v < (T)1 && v != 0 ? (T)((U)0 - (U)v) : v; /* negative: wraps like numpy */ \
  }                                                                                     \
  AOTC_FN T aotc_red_mean_##SUF##_(T s, int64_t n, T a) {                               \
    (void)a;                                                                            \
    if (n <= 1) return n == 1 ? s : (T)0;                                               \
    return (TMIN) < 0 ? (T)((int64_t)s / n) : (T)((uint64_t)s / (uint64_t)n);            \
  }                                                                                     \
  AOTC_FN T aotc_red_sqrt_##SUF##_(T s, int64_t n, T a) {                               \
    (void)n; (void)a;                                                                   \
    return s > 0 ? (T)sqrt((double)s) : (T)0;                                           \
  }                                                                                     \
  AOTC_REDUCE_DEFINE_TYPED_(aotc_reduce_sum_##SUF, T, T, AOTC_LOAD_ID_, (T)0, AOTC_RED_ID_,   \
                      aotc_red_add_##SUF##_, AOTC_RED_KEEP_)                            \
  AOTC_REDUCE_DEFINE_TYPED_(aotc_reduce_mean_##SUF, T, T, AOTC_LOAD_ID_, (T)0, AOTC_RED_ID_,  \
                      aotc_red_add_##SUF##_, aotc_red_mean_##SUF##_)                    \
  AOTC_REDUCE_DEFINE_TYPED_(aotc_reduce_sumsquare_##SUF, T, T, AOTC_LOAD_ID_, (T)0,           \
                      aotc_red_square_##SUF##_, aotc_red_add_##SUF##_, AOTC_RED_KEEP_)  \
  AOTC_REDUCE_DEFINE_TYPED_(aotc_reduce_l1_##SUF, T, T, AOTC_LOAD_ID_, (T)0, aotc_red_abs_##SUF##_, \
                      aotc_red_add_##SUF##_, AOTC_RED_KEEP_)                            \
  AOTC_REDUCE_DEFINE_TYPED_(aotc_reduce_l2_##SUF, T, T, AOTC_LOAD_ID_, (T)0,                  \
                      aotc_red_square_##SUF##_, aotc_red_add_##SUF##_, aotc_red_sqrt_##SUF##_) \
  AOTC_REDUCE_DEFINE_TYPED_(aotc_reduce_prod_##SUF, T, T, AOTC_LOAD_ID_, (T)1, AOTC_RED_ID_,  \
                      aotc_red_mul_##SUF##_, AOTC_RED_KEEP_)                            \
  AOTC_RED_ARITH_PUBLIC_(AOTC_REDUCE_PUBLIC_DIRECT_, SUF, T)

/* Max and min, for every integer type and bool. */
#define AOTC_RED_ORDER_DEFINE_(T, SUF, TMIN, TMAX)                                      \
  AOTC_REDUCE_DEFINE_TYPED_(aotc_reduce_max_##SUF, T, T, AOTC_LOAD_ID_, (T)(TMIN), AOTC_RED_ID_, \
                      AOTC_RED_IMAX_, AOTC_RED_KEEP_)                                   \
  AOTC_REDUCE_DEFINE_TYPED_(aotc_reduce_min_##SUF, T, T, AOTC_LOAD_ID_, (T)(TMAX), AOTC_RED_ID_, \
                      AOTC_RED_IMIN_, AOTC_RED_KEEP_)                                   \
  AOTC_REDUCE_PUBLIC_DIRECT_(aotc_reduce_max_##SUF, T)                                  \
  AOTC_REDUCE_PUBLIC_DIRECT_(aotc_reduce_min_##SUF, T)

AOTC_RED_INT_DEFINE_(int64_t, uint64_t, i64, INT64_MIN, INT64_MAX)
AOTC_RED_INT_DEFINE_(int32_t, uint32_t, i32, INT32_MIN, INT32_MAX)
AOTC_RED_INT_DEFINE_(uint64_t, uint64_t, u64, 0, UINT64_MAX)
AOTC_RED_INT_DEFINE_(uint32_t, uint32_t, u32, 0, UINT32_MAX)

AOTC_RED_ORDER_DEFINE_(int64_t, i64, INT64_MIN, INT64_MAX)
AOTC_RED_ORDER_DEFINE_(int32_t, i32, INT32_MIN, INT32_MAX)
AOTC_RED_ORDER_DEFINE_(uint64_t, u64, 0, UINT64_MAX)
AOTC_RED_ORDER_DEFINE_(uint32_t, u32, 0, UINT32_MAX)
AOTC_RED_ORDER_DEFINE_(int8_t, i8, INT8_MIN, INT8_MAX)
AOTC_RED_ORDER_DEFINE_(uint8_t, u8, 0, UINT8_MAX)
AOTC_RED_ORDER_DEFINE_(bool, bool, 0, 1)

#endif
