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
 * Every (operation, element type) pair is one instantiation of AOTC_REDUCE_DEFINE_,
 * named aotc_reduce_<op>_<type>; integer arithmetic wraps (done in unsigned). */
#ifndef AOTC_REDUCE_H_
#define AOTC_REDUCE_H_

#include "aotc_base.h"
#include "aotc_threads.h"

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

/* NAME: function prefix; T: element type; INIT: identity; MAP(v, a): an input value
 * before merging (a: the auxiliary value of its output, used by log-sum-exp);
 * MERGE(p, q): combine two partial results; FINISH(s, n, a): the output from the
 * merged result s of n inputs. */
#define AOTC_REDUCE_DEFINE_(NAME, T, INIT, MAP, MERGE, FINISH)                          \
  /* The reduction of row x[0, n) with auxiliary value a, in 16 lanes. */              \
  AOTC_FN T NAME##_row_(const T *AOTC_RESTRICT x, int64_t n, T a) {                     \
    T lane[AOTC_REDUCE_LANES], acc;                                                     \
    int64_t j = 0;                                                                      \
    int l;                                                                              \
    (void)a;                                                                            \
    for (l = 0; l < AOTC_REDUCE_LANES; l++) lane[l] = (INIT);                           \
    for (; j + AOTC_REDUCE_LANES <= n; j += AOTC_REDUCE_LANES)                          \
      for (l = 0; l < AOTC_REDUCE_LANES; l++) lane[l] = MERGE(lane[l], MAP(x[j + l], a)); \
    for (; j < n; j++) lane[0] = MERGE(lane[0], MAP(x[j], a));                          \
    acc = lane[0];                                                                      \
    for (l = 1; l < AOTC_REDUCE_LANES; l++) acc = MERGE(acc, lane[l]);                  \
    return acc;                                                                         \
  }                                                                                     \
                                                                                        \
  /* Outputs of dim-0 indices [i0, i1) (all outputs when dim 0 is reduced). */         \
  AOTC_FN void NAME##_range_(const aotc_reduce_geom *g, const T *x, T *y, const T *aux, \
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
        T a = aux ? aux[yoff] : (T)0;                                                   \
        y[yoff] = MERGE(y[yoff], NAME##_row_(xr, inner, a));                            \
      } else {                                                                          \
        T *AOTC_RESTRICT yr = y + yoff;                                                 \
        const T *ar = aux ? aux + yoff : NULL;                                          \
        int64_t j;                                                                      \
        if (ar) {                                                                       \
          for (j = 0; j < inner; j++) yr[j] = MERGE(yr[j], MAP(xr[j], ar[j]));          \
        } else {                                                                        \
          for (j = 0; j < inner; j++) yr[j] = MERGE(yr[j], MAP(xr[j], (T)0));           \
        }                                                                               \
      }                                                                                 \
      xoff += inner;                                                                    \
      for (d = rank - 2; d > 0; d--) {                                                  \
        if (++idx[d] < g->shape[d]) break;                                              \
        idx[d] = 0;                                                                     \
      }                                                                                 \
      if (d == 0) idx[0]++;                                                             \
    }                                                                                   \
    for (k = y0; k < y1; k++) y[k] = FINISH(y[k], g->count, (aux ? aux[k] : (T)0));     \
  }                                                                                     \
                                                                                        \
  typedef struct {                                                                      \
    const aotc_reduce_geom *g;                                                          \
    const T *x, *aux;                                                                   \
    T *y;                                                                               \
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
  AOTC_FN void NAME(aotc_pool *pool, const aotc_reduce_geom *g, const T *x, T *y,       \
                    const T *aux) {                                                     \
    NAME##_args_ a;                                                                     \
    a.g = g;                                                                            \
    a.x = x;                                                                            \
    a.aux = aux;                                                                        \
    a.y = y;                                                                            \
    aotc_parallel_for(pool, aotc_reduce_tasks_(g), NAME##_task_, &a);                   \
  }

/* ---- the operations ------------------------------------------------------------------ */

#define AOTC_RED_ID_(v, a) (v)
#define AOTC_RED_ADD_(p, q) ((p) + (q))
#define AOTC_RED_MUL_(p, q) ((p) * (q))
#define AOTC_RED_MAX_(p, q) ((q) > (p) ? (q) : (p))
#define AOTC_RED_MIN_(p, q) ((q) < (p) ? (q) : (p))
#define AOTC_RED_KEEP_(s, n, a) (s)

#define AOTC_RED_SQUARE_F_(v, a) ((v) * (v))
#define AOTC_RED_ABS_F_(v, a) fabsf(v)
#define AOTC_RED_EXP_F_(v, a) expf((v) - (a))
#define AOTC_RED_MEAN_F_(s, n, a) ((s) / (float)(n))
#define AOTC_RED_SQRT_F_(s, n, a) sqrtf(s)
#define AOTC_RED_LOG_F_(s, n, a) (logf(s) + (a))

AOTC_REDUCE_DEFINE_(aotc_reduce_sum_f32, float, 0.0f, AOTC_RED_ID_, AOTC_RED_ADD_, AOTC_RED_KEEP_)
AOTC_REDUCE_DEFINE_(aotc_reduce_mean_f32, float, 0.0f, AOTC_RED_ID_, AOTC_RED_ADD_, AOTC_RED_MEAN_F_)
AOTC_REDUCE_DEFINE_(aotc_reduce_sumsquare_f32, float, 0.0f, AOTC_RED_SQUARE_F_, AOTC_RED_ADD_, AOTC_RED_KEEP_)
AOTC_REDUCE_DEFINE_(aotc_reduce_l1_f32, float, 0.0f, AOTC_RED_ABS_F_, AOTC_RED_ADD_, AOTC_RED_KEEP_)
AOTC_REDUCE_DEFINE_(aotc_reduce_l2_f32, float, 0.0f, AOTC_RED_SQUARE_F_, AOTC_RED_ADD_, AOTC_RED_SQRT_F_)
AOTC_REDUCE_DEFINE_(aotc_reduce_prod_f32, float, 1.0f, AOTC_RED_ID_, AOTC_RED_MUL_, AOTC_RED_KEEP_)
AOTC_REDUCE_DEFINE_(aotc_reduce_max_f32, float, (-AOTC_INF), AOTC_RED_ID_, AOTC_RED_MAX_, AOTC_RED_KEEP_)
AOTC_REDUCE_DEFINE_(aotc_reduce_min_f32, float, AOTC_INF, AOTC_RED_ID_, AOTC_RED_MIN_, AOTC_RED_KEEP_)
/* second pass of log-sum-exp: aux holds each output's maximum */
AOTC_REDUCE_DEFINE_(aotc_reduce_sumexp_f32, float, 0.0f, AOTC_RED_EXP_F_, AOTC_RED_ADD_, AOTC_RED_LOG_F_)

/* log(sum(exp(x))) computed as max + log(sum(exp(x - max))); scratch: out_numel floats. */
AOTC_FN void aotc_reduce_logsumexp_f32(aotc_pool *pool, const aotc_reduce_geom *g,
                                       const float *x, float *y, unsigned char *scratch) {
  float *max = (float *)(void *)scratch;
  aotc_reduce_max_f32(pool, g, x, max, NULL);
  aotc_reduce_sumexp_f32(pool, g, x, y, max);
}

/* Integers: wrapping arithmetic through the unsigned type U; the mean truncates. */
#define AOTC_RED_INT_OPS_(T, U, SUF)                                        \
  AOTC_FN T aotc_red_add_##SUF##_(T p, T q) { return (T)((U)p + (U)q); }                \
  AOTC_FN T aotc_red_mul_##SUF##_(T p, T q) { return (T)((U)p * (U)q); }                \
  AOTC_FN T aotc_red_abs_##SUF##_(T v) { return v < 0 ? (T)((U)0 - (U)v) : v; }         \
  AOTC_FN T aotc_red_mean_##SUF##_(T s, int64_t n) {                                    \
    return n <= 0 ? (T)0 : (n == 1 ? s : (T)((int64_t)s / n));                          \
  }

AOTC_RED_INT_OPS_(int64_t, uint64_t, i64)
AOTC_RED_INT_OPS_(int32_t, uint32_t, i32)

#define AOTC_RED_INT_DEFINE_(T, SUF, TMIN, TMAX)                                                    \
  AOTC_REDUCE_DEFINE_(aotc_reduce_sum_##SUF, T, 0, AOTC_RED_ID_, aotc_red_add_##SUF##_, AOTC_RED_KEEP_) \
  AOTC_REDUCE_DEFINE_(aotc_reduce_mean_##SUF, T, 0, AOTC_RED_ID_, aotc_red_add_##SUF##_, \
                      AOTC_RED_INT_MEAN_##SUF##_)                                       \
  AOTC_REDUCE_DEFINE_(aotc_reduce_sumsquare_##SUF, T, 0, AOTC_RED_INT_SQUARE_##SUF##_,  \
                      aotc_red_add_##SUF##_, AOTC_RED_KEEP_)                            \
  AOTC_REDUCE_DEFINE_(aotc_reduce_l1_##SUF, T, 0, AOTC_RED_INT_ABS_##SUF##_,            \
                      aotc_red_add_##SUF##_, AOTC_RED_KEEP_)                            \
  AOTC_REDUCE_DEFINE_(aotc_reduce_prod_##SUF, T, 1, AOTC_RED_ID_, aotc_red_mul_##SUF##_, AOTC_RED_KEEP_) \
  AOTC_REDUCE_DEFINE_(aotc_reduce_max_##SUF, T, TMIN, AOTC_RED_ID_, AOTC_RED_MAX_, \
                      AOTC_RED_KEEP_)                                                   \
  AOTC_REDUCE_DEFINE_(aotc_reduce_min_##SUF, T, TMAX, AOTC_RED_ID_, AOTC_RED_MIN_, \
                      AOTC_RED_KEEP_)

#define AOTC_RED_INT_MEAN_i64_(s, n, a) aotc_red_mean_i64_(s, n)
#define AOTC_RED_INT_MEAN_i32_(s, n, a) aotc_red_mean_i32_(s, n)
#define AOTC_RED_INT_SQUARE_i64_(v, a) aotc_red_mul_i64_(v, v)
#define AOTC_RED_INT_SQUARE_i32_(v, a) aotc_red_mul_i32_(v, v)
#define AOTC_RED_INT_ABS_i64_(v, a) aotc_red_abs_i64_(v)
#define AOTC_RED_INT_ABS_i32_(v, a) aotc_red_abs_i32_(v)

AOTC_RED_INT_DEFINE_(int64_t, i64, INT64_MIN, INT64_MAX)
AOTC_RED_INT_DEFINE_(int32_t, i32, INT32_MIN, INT32_MAX)

#endif
