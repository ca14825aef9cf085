/* aotc runtime: normalizations over a set of elements, for any floating type.
 *
 * The input is seen as kept dims times reduced dims, each dim with its element stride
 * in x (and y, laid out alike) and in the per-element parameters (scale, bias; stride
 * 0 broadcasts). For each kept index the kernel computes the statistic of its reduced
 * set and rewrites every element of the set:
 *   MEANVAR  y = (x - mean) / sqrt(var + eps) * scale + bias   (Instance-, Group-,
 *            BatchNormalization in training); optionally writes the batch statistics
 *            blended into running ones: r = r_in * momentum + stat * (1 - momentum)
 *   MVN      y = (x - mean) / (sqrt(var) + eps)
 *   RMS      y = x / sqrt(mean(x^2) + eps) * scale
 *   L1, L2   y = x / norm (0 where the norm is 0)
 *   SOFTMAX, LOGSOFTMAX over the set (after subtracting its maximum)
 * In double, rounded once to the element type. One task per kept index. */
#ifndef AOTC_NORM_SETS_H_
#define AOTC_NORM_SETS_H_

#include "aotc_base.h"
#include "aotc_kinds.h"
#include "aotc_threads.h"

#define AOTC_NORM_SET_RANK 8
#define AOTC_NORM_MEANVAR 0
#define AOTC_NORM_MVN 1
#define AOTC_NORM_RMS 2
#define AOTC_NORM_L1 3
#define AOTC_NORM_L2 4
#define AOTC_NORM_SOFTMAX 5
#define AOTC_NORM_LOGSOFTMAX 6

typedef struct {
  const void *x, *scale, *bias;           /* scale, bias may be NULL */
  void *y;
  const void *mean_in, *var_in;           /* running statistics per kept index, or NULL */
  void *mean_out, *var_out;
  int kind, mode, kept_rank, red_rank;
  int64_t kept_shape[AOTC_NORM_SET_RANK], kept_x[AOTC_NORM_SET_RANK], kept_p[AOTC_NORM_SET_RANK];
  int64_t red_shape[AOTC_NORM_SET_RANK], red_x[AOTC_NORM_SET_RANK], red_p[AOTC_NORM_SET_RANK];
  double eps, momentum;
} aotc_norm_set_args;

/* Walks the reduced set: x and p are the element's offsets in x and the parameters. */
typedef struct {
  int64_t idx[AOTC_NORM_SET_RANK], x, p;
} aotc_norm_set_walk_;

AOTC_FN void aotc_norm_set_start_(aotc_norm_set_walk_ *w, int64_t x, int64_t p) {
  int d;
  for (d = 0; d < AOTC_NORM_SET_RANK; d++) w->idx[d] = 0;
  w->x = x;
  w->p = p;
}

AOTC_FN void aotc_norm_set_next_(const aotc_norm_set_args *a, aotc_norm_set_walk_ *w) {
  int d;
  for (d = a->red_rank - 1; d >= 0; d--) {
    w->x += a->red_x[d];
    w->p += a->red_p[d];
    if (++w->idx[d] < a->red_shape[d]) return;
    w->x -= a->red_x[d] * a->red_shape[d];
    w->p -= a->red_p[d] * a->red_shape[d];
    w->idx[d] = 0;
  }
}

/* Softmax or log-softmax of one set. */
AOTC_FN void aotc_norm_set_softmax_(const aotc_norm_set_args *a, int64_t n, int64_t x0, int64_t p0) {
  const int kind = a->kind;
  double m = -(double)AOTC_INF, sum = 0.0, shift;
  aotc_norm_set_walk_ w;
  int64_t r;
  aotc_norm_set_start_(&w, x0, p0);
  for (r = 0; r < n; r++, aotc_norm_set_next_(a, &w)) {
    const double x = aotc_kind_load(a->x, w.x, kind);
    if (m == m && (x > m || x != x)) m = x;   /* a NaN wins */
  }
  aotc_norm_set_start_(&w, x0, p0);
  for (r = 0; r < n; r++, aotc_norm_set_next_(a, &w)) sum += exp(aotc_kind_load(a->x, w.x, kind) - m);
  shift = a->mode == AOTC_NORM_LOGSOFTMAX ? m + log(sum) : m;
  aotc_norm_set_start_(&w, x0, p0);
  for (r = 0; r < n; r++, aotc_norm_set_next_(a, &w)) {
    const double x = aotc_kind_load(a->x, w.x, kind) - shift;
    const double y = a->mode == AOTC_NORM_LOGSOFTMAX ? x : exp(x) / sum;
    aotc_kind_store(a->y, w.x, kind, aotc_kind_round(y, kind));
  }
}

AOTC_FN void aotc_norm_set_task_(void *arg, int64_t task) {
  const aotc_norm_set_args *a = (const aotc_norm_set_args *)arg;
  const int kind = a->kind;
  int64_t x0 = 0, p0 = 0, rest = task, n = 1, r;
  double sum = 0.0, dev = 0.0, mean, var, scale = 1.0, shift = 0.0;
  aotc_norm_set_walk_ w;
  int d;
  for (d = a->kept_rank - 1; d >= 0; d--) {
    const int64_t i = rest % a->kept_shape[d];
    rest /= a->kept_shape[d];
    x0 += i * a->kept_x[d];
    p0 += i * a->kept_p[d];
  }
  for (d = 0; d < a->red_rank; d++) n *= a->red_shape[d];
  if (a->mode >= AOTC_NORM_SOFTMAX) {
    aotc_norm_set_softmax_(a, n, x0, p0);
    return;
  }
  aotc_norm_set_start_(&w, x0, p0);
  for (r = 0; r < n; r++, aotc_norm_set_next_(a, &w)) {
    const double x = aotc_kind_load(a->x, w.x, kind);
    sum += a->mode == AOTC_NORM_L1 ? fabs(x) : a->mode >= AOTC_NORM_RMS ? x * x : x;
  }
  mean = n > 0 ? sum / (double)n : 0.0;
  if (a->mode <= AOTC_NORM_MVN) {
    aotc_norm_set_start_(&w, x0, p0);
    for (r = 0; r < n; r++, aotc_norm_set_next_(a, &w)) {
      const double x = aotc_kind_load(a->x, w.x, kind) - mean;
      dev += x * x;
    }
  }
  var = n > 0 ? dev / (double)n : 0.0;
  switch (a->mode) {
    case AOTC_NORM_MEANVAR: scale = 1.0 / sqrt(var + a->eps); shift = mean; break;
    case AOTC_NORM_MVN: scale = 1.0 / (sqrt(var) + a->eps); shift = mean; break;
    case AOTC_NORM_RMS: scale = 1.0 / sqrt(mean + a->eps); break;
    case AOTC_NORM_L1: scale = sum == 0.0 ? 0.0 : 1.0 / sum; break;
    default: scale = sum == 0.0 ? 0.0 : 1.0 / sqrt(sum); break;
  }
  aotc_norm_set_start_(&w, x0, p0);
  for (r = 0; r < n; r++, aotc_norm_set_next_(a, &w)) {
    double y = (aotc_kind_load(a->x, w.x, kind) - shift) * scale;
    if (a->scale) y *= aotc_kind_load(a->scale, w.p, kind);
    if (a->bias) y += aotc_kind_load(a->bias, w.p, kind);
    aotc_kind_store(a->y, w.x, kind, aotc_kind_round(y, kind));
  }
  if (a->mean_out)
    aotc_kind_store(a->mean_out, task, kind, aotc_kind_round(
        aotc_kind_load(a->mean_in, task, kind) * a->momentum + mean * (1.0 - a->momentum), kind));
  if (a->var_out)
    aotc_kind_store(a->var_out, task, kind, aotc_kind_round(
        aotc_kind_load(a->var_in, task, kind) * a->momentum + var * (1.0 - a->momentum), kind));
}

AOTC_FN void aotc_norm_set(aotc_pool *pool, const aotc_norm_set_args *a) {
  int64_t tasks = 1;
  int d;
  for (d = 0; d < a->kept_rank; d++) tasks *= a->kept_shape[d];
  aotc_parallel_for(pool, tasks, aotc_norm_set_task_, (void *)a);
}

/* ---- LRN over the channels of [n, c, inner] ---------------------------------------- */

typedef struct {
  const void *x;
  void *y;
  int kind;
  int64_t n, c, inner, before, after;   /* window: channels [ch - before, ch + after] */
  double alpha_over_size, beta, bias;
} aotc_lrn_args;

AOTC_FN void aotc_lrn_task_(void *arg, int64_t task) {
  const aotc_lrn_args *a = (const aotc_lrn_args *)arg;
  const int64_t b = task / a->c, ch = task % a->c;
  const int64_t lo = AOTC_MAX(0, ch - a->before), hi = AOTC_MIN(a->c - 1, ch + a->after);
  int64_t i, k;
  for (i = 0; i < a->inner; i++) {
    double sq = 0.0, x;
    for (k = lo; k <= hi; k++) {
      x = aotc_kind_load(a->x, (b * a->c + k) * a->inner + i, a->kind);
      sq += x * x;
    }
    x = aotc_kind_load(a->x, task * a->inner + i, a->kind);
    aotc_kind_store(a->y, task * a->inner + i, a->kind,
                    aotc_kind_round(x / pow(a->bias + a->alpha_over_size * sq, a->beta), a->kind));
  }
}

AOTC_FN void aotc_lrn(aotc_pool *pool, const aotc_lrn_args *a) {
  aotc_parallel_for(pool, a->n * a->c, aotc_lrn_task_, (void *)a);
}

#endif
