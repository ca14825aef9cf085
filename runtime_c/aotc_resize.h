/* aotc runtime: Resize, one axis at a time.
 *
 * aotc_resize_axis reads src as [outer, in_len, inner] and writes dst as
 * [outer, out_len, inner]: output position j along the axis is the sum over t < taps
 * of weight[j * taps + t] * src[index[j * taps + t]], or `fill` where outside[j] is set
 * (outside may be NULL). The tables come from the compiler. Work is cut into pieces of
 * whole output rows, a number fixed by the shape, and every element is summed in tap
 * order, so results do not depend on the thread count.
 *
 * aotc_resize_load_<T> / aotc_resize_store_<T> convert the integer types to float and
 * back (rounded half to even and clamped to their range); the 16-bit floats go through
 * aotc_widen_<T> / aotc_narrow_<T> of aotc_half.h. */
#ifndef AOTC_RESIZE_H_
#define AOTC_RESIZE_H_

#include "aotc_base.h"
#include "aotc_half.h"
#include "aotc_threads.h"

#define AOTC_RESIZE_GRAIN 32768 /* multiply-adds per parallel piece, at least */

typedef struct {
  const float *src;
  float *dst;
  int64_t in_len, out_len, inner, taps, rows, rows_per_piece;
  const int32_t *index;
  const float *weight;
  const unsigned char *outside;
  float fill;
} aotc_resize_job_;

AOTC_FN void aotc_resize_rows_(void *arg, int64_t piece) {
  const aotc_resize_job_ *job = (const aotc_resize_job_ *)arg;
  int64_t row, end = AOTC_MIN((piece + 1) * job->rows_per_piece, job->rows);
  for (row = piece * job->rows_per_piece; row < end; row++) {
    const int64_t o = row / job->out_len, j = row % job->out_len;
    const float *src = job->src + o * job->in_len * job->inner;
    float *dst = job->dst + row * job->inner;
    const int32_t *index = job->index + j * job->taps;
    const float *weight = job->weight + j * job->taps;
    int64_t i, t;
    if (job->outside && job->outside[j]) {
      for (i = 0; i < job->inner; i++) dst[i] = job->fill;
      continue;
    }
    if (job->inner == 1) {
      float sum = 0.0f;
      for (t = 0; t < job->taps; t++) sum += weight[t] * src[index[t]];
      dst[0] = sum;
      continue;
    }
    for (i = 0; i < job->inner; i++) dst[i] = weight[0] * src[(int64_t)index[0] * job->inner + i];
    for (t = 1; t < job->taps; t++) {
      const float w = weight[t];
      const float *line = src + (int64_t)index[t] * job->inner;
      for (i = 0; i < job->inner; i++) dst[i] += w * line[i];
    }
  }
}

AOTC_FN void aotc_resize_axis(aotc_pool *pool, const float *src, float *dst, int64_t outer,
                              int64_t in_len, int64_t out_len, int64_t inner, int64_t taps,
                              const int32_t *index, const float *weight,
                              const unsigned char *outside, float fill) {
  aotc_resize_job_ job;
  int64_t work = outer * out_len * inner * taps, pieces;
  job.src = src;
  job.dst = dst;
  job.in_len = in_len;
  job.out_len = out_len;
  job.inner = inner;
  job.taps = taps;
  job.rows = outer * out_len;
  job.index = index;
  job.weight = weight;
  job.outside = outside;
  job.fill = fill;
  pieces = AOTC_MAX(AOTC_MIN(work / AOTC_RESIZE_GRAIN, job.rows), 1);
  job.rows_per_piece = (job.rows + pieces - 1) / pieces;
  aotc_parallel_for(pool, (job.rows + job.rows_per_piece - 1) / job.rows_per_piece,
                    aotc_resize_rows_, &job);
}

/* float to an integer type: round half to even, clamp (NaN gives 0). */
AOTC_FN double aotc_resize_round_clamp_(float v, double lo, double hi) {
  double r;
  if (v != v) return 0.0;
  r = rint((double)v);  /* halves to even in the default rounding mode */
  return r < lo ? lo : (r > hi ? hi : r);
}

AOTC_FN void aotc_resize_load_i8(const int8_t *x, float *y, int64_t n) {
  int64_t i;
  for (i = 0; i < n; i++) y[i] = (float)x[i];
}
AOTC_FN void aotc_resize_store_i8(const float *x, int8_t *y, int64_t n) {
  int64_t i;
  for (i = 0; i < n; i++) y[i] = (int8_t)aotc_resize_round_clamp_(x[i], -128.0, 127.0);
}
AOTC_FN void aotc_resize_load_u8(const uint8_t *x, float *y, int64_t n) {
  int64_t i;
  for (i = 0; i < n; i++) y[i] = (float)x[i];
}
AOTC_FN void aotc_resize_store_u8(const float *x, uint8_t *y, int64_t n) {
  int64_t i;
  for (i = 0; i < n; i++) y[i] = (uint8_t)aotc_resize_round_clamp_(x[i], 0.0, 255.0);
}

#endif
