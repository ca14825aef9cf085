/* aotc runtime: BatchNormalization (inference), Softmax / LogSoftmax and
 * LayerNormalization, fp32.
 *
 * Row sums and maxima use the 16-lane row reductions of aotc_reduce.h, so every
 * result has one accumulation order fixed by the shape. Work is split into blocks of
 * rows (or of columns for a softmax over a strided axis) sized from the shape only. */
#ifndef AOTC_NORM_H_
#define AOTC_NORM_H_

#include "aotc_base.h"
#include "aotc_threads.h"
#include "aotc_reduce.h"

#define AOTC_NORM_TASK_ELEMENTS 16384   /* per task: enough to hide the dispatch */

AOTC_FN int64_t aotc_norm_rows_per_task_(int64_t row_length) {
  return AOTC_MAX(1, AOTC_NORM_TASK_ELEMENTS / AOTC_MAX(row_length, 1));
}

/* ---- BatchNormalization: y = x * a[c] + b[c] over [outer, channels, inner] ------- */

/* a = scale / sqrt(var + eps), b = bias - mean * a: what the compiler precomputes when
 * the statistics are constants. */
AOTC_FN void aotc_batchnorm_coefficients_f32(const float *scale, const float *bias,
                                             const float *mean, const float *var, float eps,
                                             int64_t channels, float *a, float *b) {
  int64_t c;
  for (c = 0; c < channels; c++) {
    a[c] = scale[c] / sqrtf(var[c] + eps);
    b[c] = bias[c] - mean[c] * a[c];
  }
}

typedef struct {
  const float *x, *a, *b;
  float *y;     /* may be x */
  int64_t rows, channels, inner, rows_per_task;
} aotc_channel_affine_args_;

AOTC_FN void aotc_channel_affine_task_(void *arg, int64_t task) {
  const aotc_channel_affine_args_ *p = (const aotc_channel_affine_args_ *)arg;
  int64_t r0 = task * p->rows_per_task, r1 = AOTC_MIN(r0 + p->rows_per_task, p->rows), r, i;
  for (r = r0; r < r1; r++) {
    const float a = p->a[r % p->channels], b = p->b[r % p->channels];
    const float *xr = p->x + r * p->inner;
    float *yr = p->y + r * p->inner;
    for (i = 0; i < p->inner; i++) yr[i] = xr[i] * a + b;
  }
}

/* One multiply-add per element; y may be x. */
AOTC_FN void aotc_channel_affine_f32(aotc_pool *pool, const float *x, const float *a,
                                     const float *b, float *y, int64_t outer, int64_t channels,
                                     int64_t inner) {
  aotc_channel_affine_args_ p;
  p.x = x;
  p.a = a;
  p.b = b;
  p.y = y;
  p.rows = outer * channels;
  p.channels = channels;
  p.inner = inner;
  p.rows_per_task = aotc_norm_rows_per_task_(inner);
  aotc_parallel_for(pool, (p.rows + p.rows_per_task - 1) / p.rows_per_task,
                    aotc_channel_affine_task_, &p);
}

/* ---- Softmax and LogSoftmax over the middle dim of [outer, n, inner] ------------- */

#define AOTC_SOFTMAX_COLUMNS 64   /* columns per task when inner > 1 */

/* exp(x) for the softmax (x <= 0 there): 2^n * exp(r), n = round(x / ln 2), with a
 * degree-6 polynomial for exp(r) (relative error about 1e-7). Plain arithmetic, so the
 * compiler vectorizes it and the result is the same everywhere. Inputs are clamped to
 * [-87, 88], where 2^n is a normal float (NaN becomes exp(-87)). */
AOTC_FN float aotc_softmax_exp_(float x) {
  const float round_magic = 12582912.0f;   /* 1.5 * 2^23: adding it rounds to an integer */
  float n, r, p, scale;
  uint32_t bits;
  x = AOTC_MIN(AOTC_MAX(x, -87.0f), 88.0f);
  n = (x * 1.44269504088896341f + round_magic) - round_magic;
  r = x - n * 0.693359375f;          /* ln 2 in two parts: exact product, then the rest */
  r = r - n * -2.12194440e-4f;
  p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  bits = (uint32_t)((int32_t)n + 127) << 23;
  memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

typedef struct {
  const float *x;
  float *y;
  int64_t outer, n, inner, rows_per_task, blocks;
  int log;
} aotc_softmax_args_;

AOTC_FN void aotc_softmax_row_(const float *AOTC_RESTRICT x, float *AOTC_RESTRICT y, int64_t n,
                               int log) {
  const float m = aotc_reduce_max_f32_row_(x, n, 0.0f);
  float s;
  int64_t j;
  for (j = 0; j < n; j++) y[j] = aotc_softmax_exp_(x[j] - m);
  s = aotc_reduce_sum_f32_row_(y, n, 0.0f);
  if (log) {
    const float shift = m + logf(s);
    for (j = 0; j < n; j++) y[j] = x[j] - shift;
  } else {
    const float r = 1.0f / s;
    for (j = 0; j < n; j++) y[j] *= r;
  }
}

/* Columns [c0, c0 + w) of one [n, inner] block: the axis is strided by inner. */
AOTC_FN void aotc_softmax_columns_(const float *AOTC_RESTRICT x, float *AOTC_RESTRICT y,
                                   int64_t n, int64_t inner, int64_t w, int log) {
  float m[AOTC_SOFTMAX_COLUMNS], s[AOTC_SOFTMAX_COLUMNS];
  int64_t i, c;
  for (c = 0; c < w; c++) {
    m[c] = -AOTC_INF;
    s[c] = 0.0f;
  }
  for (i = 0; i < n; i++)
    for (c = 0; c < w; c++) m[c] = AOTC_MAX(x[i * inner + c], m[c]);
  for (i = 0; i < n; i++)
    for (c = 0; c < w; c++) {
      float e = aotc_softmax_exp_(x[i * inner + c] - m[c]);
      y[i * inner + c] = e;
      s[c] += e;
    }
  if (log) {
    for (c = 0; c < w; c++) m[c] += logf(s[c]);
    for (i = 0; i < n; i++)
      for (c = 0; c < w; c++) y[i * inner + c] = x[i * inner + c] - m[c];
  } else {
    for (c = 0; c < w; c++) s[c] = 1.0f / s[c];
    for (i = 0; i < n; i++)
      for (c = 0; c < w; c++) y[i * inner + c] *= s[c];
  }
}

AOTC_FN void aotc_softmax_task_(void *arg, int64_t task) {
  const aotc_softmax_args_ *p = (const aotc_softmax_args_ *)arg;
  if (p->inner == 1) {
    int64_t r0 = task * p->rows_per_task, r1 = AOTC_MIN(r0 + p->rows_per_task, p->outer), r;
    for (r = r0; r < r1; r++) aotc_softmax_row_(p->x + r * p->n, p->y + r * p->n, p->n, p->log);
  } else {
    int64_t o = task / p->blocks, c0 = (task % p->blocks) * AOTC_SOFTMAX_COLUMNS;
    int64_t off = o * p->n * p->inner + c0;
    aotc_softmax_columns_(p->x + off, p->y + off, p->n, p->inner,
                          AOTC_MIN(AOTC_SOFTMAX_COLUMNS, p->inner - c0), p->log);
  }
}

/* y = softmax (log = 0) or log-softmax (log = 1) of x over n; y must not be x. */
AOTC_FN void aotc_softmax_f32(aotc_pool *pool, const float *x, float *y, int64_t outer,
                              int64_t n, int64_t inner, int log) {
  aotc_softmax_args_ p;
  int64_t tasks;
  p.x = x;
  p.y = y;
  p.outer = outer;
  p.n = n;
  p.inner = inner;
  p.log = log;
  p.rows_per_task = aotc_norm_rows_per_task_(n);
  p.blocks = (inner + AOTC_SOFTMAX_COLUMNS - 1) / AOTC_SOFTMAX_COLUMNS;
  tasks = inner == 1 ? (outer + p.rows_per_task - 1) / p.rows_per_task : outer * p.blocks;
  aotc_parallel_for(pool, tasks, aotc_softmax_task_, &p);
}

/* ---- LayerNormalization over rows of n ----------------------------------------- */

/* sum of (x - a)^2 over a row, in the 16 lanes of aotc_reduce.h */
#define AOTC_NORM_SQDEV_(v, a) (((v) - (a)) * ((v) - (a)))
AOTC_REDUCE_DEFINE_(aotc_norm_sqdev_f32, float, 0.0f, AOTC_NORM_SQDEV_, AOTC_RED_ADD_, AOTC_RED_KEEP_)

typedef struct {
  const float *x, *scale, *bias;   /* bias may be NULL */
  float *y, *mean, *inv_std;       /* mean, inv_std may be NULL */
  int64_t rows, n, rows_per_task;
  float eps;
} aotc_layernorm_args_;

AOTC_FN void aotc_layernorm_task_(void *arg, int64_t task) {
  const aotc_layernorm_args_ *p = (const aotc_layernorm_args_ *)arg;
  int64_t r0 = task * p->rows_per_task, r1 = AOTC_MIN(r0 + p->rows_per_task, p->rows), r, j;
  const int64_t n = p->n;
  const float *AOTC_RESTRICT scale = p->scale;
  const float *AOTC_RESTRICT bias = p->bias;
  for (r = r0; r < r1; r++) {
    const float *AOTC_RESTRICT x = p->x + r * n;
    float *AOTC_RESTRICT y = p->y + r * n;
    const float mean = aotc_reduce_sum_f32_row_(x, n, 0.0f) / (float)n;
    const float var = aotc_norm_sqdev_f32_row_(x, n, mean) / (float)n;
    const float inv = 1.0f / sqrtf(var + p->eps);
    if (bias) {
      for (j = 0; j < n; j++) y[j] = (x[j] - mean) * inv * scale[j] + bias[j];
    } else {
      for (j = 0; j < n; j++) y[j] = (x[j] - mean) * inv * scale[j];
    }
    if (p->mean) p->mean[r] = mean;
    if (p->inv_std) p->inv_std[r] = inv;
  }
}

AOTC_FN void aotc_layernorm_f32(aotc_pool *pool, const float *x, const float *scale,
                                const float *bias, float *y, float *mean, float *inv_std,
                                int64_t rows, int64_t n, float eps) {
  aotc_layernorm_args_ p;
  p.x = x;
  p.scale = scale;
  p.bias = bias;
  p.y = y;
  p.mean = mean;
  p.inv_std = inv_std;
  p.rows = rows;
  p.n = n;
  p.eps = eps;
  p.rows_per_task = aotc_norm_rows_per_task_(n);
  aotc_parallel_for(pool, (rows + p.rows_per_task - 1) / p.rows_per_task,
                    aotc_layernorm_task_, &p);
}

#endif
