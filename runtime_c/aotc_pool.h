/* aotc runtime: MaxPool and AveragePool, fp32, NC + 1-D/2-D/3-D spatial.
 *
 * Every pool is described as a 3-D one (1-D and 2-D pools get leading spatial dims of
 * extent 1). One output row (fixed plane, od, oh) is computed at a time: for each
 * kernel tap (kz, ky, kx) in that order, the output columns whose input column lies
 * inside the image are updated in one loop the compiler vectorizes. Padding is never
 * read: it is never a max candidate and adds nothing to a sum. The average divides
 * by the number of taps inside the image, or with count_include_pad by the number
 * inside the padded image [-pad, in + pad_end). Work is split over (plane, block of
 * output rows), a function of the shape only. Global pools are reductions
 * (aotc_reduce.h).
 *
 * The other element types (double, float16, bfloat16, int8, uint8) take one plain
 * loop per output (aotc_pooling_<type>): the same taps in the same order, computed in
 * A (double for double, float for the 16-bit floats, int for the integers; MaxPool
 * only) and stored once. Exact mode: NaN averages are written canonical. */
#ifndef AOTC_POOL_H_
#define AOTC_POOL_H_

#include <float.h>

#include "aotc_base.h"
#include "aotc_half.h"
#include "aotc_threads.h"

typedef struct aotc_pooling_geom {
  int64_t planes;                                  /* N * C */
  int64_t in[3], out[3], kernel[3], stride[3], dilation[3];
  int64_t pad[3], pad_end[3];
  int64_t count_include_pad;
  int64_t index_stride[3];   /* MaxPool Indices: element stride of each spatial dim */
} aotc_pooling_geom;

AOTC_FN int64_t aotc_pooling_volume_(const int64_t *dims) { return dims[0] * dims[1] * dims[2]; }

/* Number of taps k in [0, kernel) with lo <= start + k * dilation < hi. */
AOTC_FN int64_t aotc_pooling_taps_(int64_t start, int64_t kernel, int64_t dilation,
                                   int64_t lo, int64_t hi) {
  int64_t k0 = start >= lo ? 0 : (lo - start + dilation - 1) / dilation;
  int64_t k1 = start >= hi ? 0 : AOTC_MIN(kernel, (hi - start + dilation - 1) / dilation);
  return k1 > k0 ? k1 - k0 : 0;
}

/* Output columns [lo, hi) within [0, n) whose input column o * stride + offset is in
 * [0, width). */
AOTC_FN void aotc_pooling_columns_(int64_t offset, int64_t stride, int64_t width, int64_t n,
                                   int64_t *lo, int64_t *hi) {
  int64_t a = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  int64_t b = offset >= width ? 0 : (width - offset + stride - 1) / stride;
  *lo = AOTC_MIN(a, n);
  *hi = AOTC_MAX(AOTC_MIN(b, n), *lo);
}

/* Divisor of output (od, oh, ow) along one dim d. */
AOTC_FN int64_t aotc_pooling_count_(const aotc_pooling_geom *g, int d, int64_t o) {
  int64_t start = o * g->stride[d] - g->pad[d];
  if (g->count_include_pad)
    return aotc_pooling_taps_(start, g->kernel[d], g->dilation[d], -g->pad[d],
                              g->in[d] + g->pad_end[d]);
  return aotc_pooling_taps_(start, g->kernel[d], g->dilation[d], 0, g->in[d]);
}

/* One output row of one plane. is_max: max (and, when irow is set, the index of the
 * first maximum, offset by index_base); otherwise average. */
AOTC_FN void aotc_pooling_row_(const aotc_pooling_geom *g, int is_max,
                               const float *AOTC_RESTRICT plane, float *AOTC_RESTRICT yrow,
                               int64_t *AOTC_RESTRICT irow, int64_t index_base,
                               int64_t od, int64_t oh) {
  const int64_t ow_n = g->out[2], sw = g->stride[2];
  int64_t kz, ky, kx, ow, lo, hi;
  for (ow = 0; ow < ow_n; ow++) yrow[ow] = is_max ? -FLT_MAX : 0.0f;
  if (irow)
    for (ow = 0; ow < ow_n; ow++) irow[ow] = index_base;
  for (kz = 0; kz < g->kernel[0]; kz++) {
    int64_t iz = od * g->stride[0] - g->pad[0] + kz * g->dilation[0];
    if (iz < 0 || iz >= g->in[0]) continue;
    for (ky = 0; ky < g->kernel[1]; ky++) {
      int64_t iy = oh * g->stride[1] - g->pad[1] + ky * g->dilation[1];
      const float *src;
      if (iy < 0 || iy >= g->in[1]) continue;
      src = plane + (iz * g->in[1] + iy) * g->in[2];
      for (kx = 0; kx < g->kernel[2]; kx++) {
        int64_t offset = kx * g->dilation[2] - g->pad[2];
        aotc_pooling_columns_(offset, sw, g->in[2], ow_n, &lo, &hi);
        if (irow) {
          int64_t base = index_base + iz * g->index_stride[0] + iy * g->index_stride[1];
          for (ow = lo; ow < hi; ow++) {
            float v = src[ow * sw + offset];
            if (v > yrow[ow]) {
              yrow[ow] = v;
              irow[ow] = base + (ow * sw + offset) * g->index_stride[2];
            }
          }
        } else if (is_max) {
          if (sw == 1) {
            for (ow = lo; ow < hi; ow++) yrow[ow] = AOTC_MAX(src[ow + offset], yrow[ow]);
          } else if (sw == 2) {   /* a literal stride: even/odd shuffles, no gathers */
            for (ow = lo; ow < hi; ow++) yrow[ow] = AOTC_MAX(src[2 * ow + offset], yrow[ow]);
          } else {
            for (ow = lo; ow < hi; ow++) yrow[ow] = AOTC_MAX(src[ow * sw + offset], yrow[ow]);
          }
        } else {
          if (sw == 1) {
            for (ow = lo; ow < hi; ow++) yrow[ow] += src[ow + offset];
          } else if (sw == 2) {
            for (ow = lo; ow < hi; ow++) yrow[ow] += src[2 * ow + offset];
          } else {
            for (ow = lo; ow < hi; ow++) yrow[ow] += src[ow * sw + offset];
          }
        }
      }
    }
  }
  if (!is_max) {
    int64_t dh = aotc_pooling_count_(g, 0, od) * aotc_pooling_count_(g, 1, oh);
    for (ow = 0; ow < ow_n; ow++)
      yrow[ow] = AOTC_CANON_F32(yrow[ow] / (float)(dh * aotc_pooling_count_(g, 2, ow)));
  }
}

/* The widest padded row the separable max keeps on the stack. */
#define AOTC_POOLING_ROW_MAX 4096

/* v[i] = max(src[i], v[i]) for i < n: one input row into the row buffer. */
AOTC_FN void aotc_pooling_max_pass_(float *AOTC_RESTRICT v, const float *AOTC_RESTRICT src, int64_t n) {
  int64_t i;
  for (i = 0; i < n; i++) v[i] = AOTC_MAX(src[i], v[i]);
}

/* v[i] = the max of rows[0..count)[i] (count <= 3) from -FLT_MAX, in that order, each
 * column written once. */
AOTC_FN void aotc_pooling_max_of_rows_(float *AOTC_RESTRICT v, const float *const *rows, int count, int64_t n) {
  const float *AOTC_RESTRICT r0 = rows[0], *AOTC_RESTRICT r1 = rows[1], *AOTC_RESTRICT r2 = rows[2];
  int64_t i;
  if (count == 3)
    for (i = 0; i < n; i++) v[i] = AOTC_MAX(r2[i], AOTC_MAX(r1[i], AOTC_MAX(r0[i], -FLT_MAX)));
  else if (count == 2)
    for (i = 0; i < n; i++) v[i] = AOTC_MAX(r1[i], AOTC_MAX(r0[i], -FLT_MAX));
  else if (count == 1)
    for (i = 0; i < n; i++) v[i] = AOTC_MAX(r0[i], -FLT_MAX);
}

/* Max is separable: one output row (plane, od, oh) as the max over the window's input
 * rows, column by column (contiguous, vectorized), then over each window's columns of
 * that row, padded with -FLT_MAX. NaN is skipped and ties keep the value first seen,
 * as in the tap-by-tap loop. Needs the padded span `width` <= AOTC_POOLING_ROW_MAX.
 * A window of up to AOTC_POOLING_ROWS_AT_ONCE input rows is taken in one pass that
 * writes each column once (aotc_pooling_max_of_rows_); more rows go a pass each. A pass
 * per row, each reading and writing the whole row buffer, was 60% of the time of
 * ResNet-50's 3x3 max pool (alone at one thread: 0.21 -> 0.16 ms, onnxruntime's 0.16;
 * at two 0.12 -> 0.10). */
#define AOTC_POOLING_ROWS_AT_ONCE 3
AOTC_FN void aotc_pooling_max_row_separable_(const aotc_pooling_geom *g,
                                             const float *AOTC_RESTRICT plane,
                                             float *AOTC_RESTRICT yrow, int64_t od, int64_t oh,
                                             int64_t width) {
  float buf[AOTC_POOLING_ROW_MAX] AOTC_ALIGNED(64);
  const int64_t pw = g->pad[2], in_w = g->in[2], ow_n = g->out[2], sw = g->stride[2];
  const int64_t dw = g->dilation[2], kw = g->kernel[2];
  float *v = buf + pw;   /* v[iw] for iw in [-pw, width - pw) */
  const float *held[AOTC_POOLING_ROWS_AT_ONCE] = {NULL, NULL, NULL};   /* rows not yet taken */
  int64_t kz, ky, i, ow, kx;
  int nheld = 0, row_by_row = 0;
  for (i = 0; i < width; i++) buf[i] = -FLT_MAX;
  for (kz = 0; kz < g->kernel[0]; kz++) {
    int64_t iz = od * g->stride[0] - g->pad[0] + kz * g->dilation[0];
    if (iz < 0 || iz >= g->in[0]) continue;
    for (ky = 0; ky < g->kernel[1]; ky++) {
      int64_t iy = oh * g->stride[1] - g->pad[1] + ky * g->dilation[1];
      const float *src;
      if (iy < 0 || iy >= g->in[1]) continue;
      src = plane + (iz * g->in[1] + iy) * in_w;
      if (!row_by_row && nheld < AOTC_POOLING_ROWS_AT_ONCE) {
        held[nheld++] = src;
        continue;
      }
      if (!row_by_row) {   /* one row more than a pass takes: the held ones first, in order */
        for (i = 0; i < nheld; i++) aotc_pooling_max_pass_(v, held[i], in_w);
        row_by_row = 1;
      }
      aotc_pooling_max_pass_(v, src, in_w);
    }
  }
  if (!row_by_row) aotc_pooling_max_of_rows_(v, held, nheld, in_w);
  if (sw == 2 && dw == 1 && kw == 3) {
    for (ow = 0; ow < ow_n; ow++) {
      float m = buf[2 * ow];
      m = AOTC_MAX(buf[2 * ow + 1], m);
      yrow[ow] = AOTC_MAX(buf[2 * ow + 2], m);
    }
    return;
  }
  for (ow = 0; ow < ow_n; ow++) yrow[ow] = -FLT_MAX;
  for (kx = 0; kx < kw; kx++)
    for (ow = 0; ow < ow_n; ow++) yrow[ow] = AOTC_MAX(buf[ow * sw + kx * dw], yrow[ow]);
}

/* The padded row span the separable max reads: through the last window's last tap. */
AOTC_FN int64_t aotc_pooling_span_(const aotc_pooling_geom *g) {
  int64_t last = (g->out[2] - 1) * g->stride[2] + (g->kernel[2] - 1) * g->dilation[2] + 1;
  return AOTC_MAX(last, g->pad[2] + g->in[2]);
}

typedef struct {
  const aotc_pooling_geom *g;
  int is_max;
  const float *x;
  float *y;
  int64_t *indices;
  int64_t rows_per_task, tasks_per_plane;
} aotc_pooling_args_;

AOTC_FN void aotc_pooling_task_(void *arg, int64_t task) {
  const aotc_pooling_args_ *a = (const aotc_pooling_args_ *)arg;
  const aotc_pooling_geom *g = a->g;
  int64_t plane = task / a->tasks_per_plane, rows = g->out[0] * g->out[1];
  int64_t r0 = (task % a->tasks_per_plane) * a->rows_per_task;
  int64_t r1 = AOTC_MIN(r0 + a->rows_per_task, rows), r;
  int64_t in_vol = aotc_pooling_volume_(g->in), out_vol = aotc_pooling_volume_(g->out);
  int64_t span = aotc_pooling_span_(g);
  if (a->is_max && !a->indices && span <= AOTC_POOLING_ROW_MAX) {
    for (r = r0; r < r1; r++)
      aotc_pooling_max_row_separable_(g, a->x + plane * in_vol,
                                      a->y + plane * out_vol + r * g->out[2], r / g->out[1],
                                      r % g->out[1], span);
    return;
  }
  for (r = r0; r < r1; r++) {
    int64_t yoff = plane * out_vol + r * g->out[2];
    aotc_pooling_row_(g, a->is_max, a->x + plane * in_vol, a->y + yoff,
                      a->indices ? a->indices + yoff : NULL, plane * in_vol,
                      r / g->out[1], r % g->out[1]);
  }
}

/* is_max: MaxPool (indices: NULL or the Indices output), else AveragePool. */
AOTC_FN void aotc_pooling_f32(aotc_pool *pool, const aotc_pooling_geom *g, int is_max,
                              const float *x, float *y, int64_t *indices) {
  aotc_pooling_args_ a;
  int64_t rows = g->out[0] * g->out[1];
  a.g = g;
  a.is_max = is_max;
  a.x = x;
  a.y = y;
  a.indices = indices;
  /* about 8K outputs per task: enough to hide the dispatch, small enough to spread */
  a.rows_per_task = AOTC_MAX(1, AOTC_MIN(rows, 8192 / AOTC_MAX(g->out[2], 1)));
  a.tasks_per_plane = (rows + a.rows_per_task - 1) / a.rows_per_task;
  aotc_parallel_for(pool, g->planes * a.tasks_per_plane, aotc_pooling_task_, &a);
}


/* One output (plane, od, oh, ow) of the typed pools; *index: the first maximum. */
#define AOTC_POOLING_TYPED_(SUF, T, A, LOAD, STORE, LOWEST)                                   \
  AOTC_FN void aotc_pooling_one_##SUF##_(const aotc_pooling_geom *g, int is_max,             \
                                         const T *plane, int64_t index_base, int64_t od,     \
                                         int64_t oh, int64_t ow, T *y, int64_t *index) {     \
    A best = LOWEST, sum = 0;                                                                 \
    int64_t kz, ky, kx, at = index_base, found = 0;                                           \
    for (kz = 0; kz < g->kernel[0]; kz++) {                                                   \
      int64_t iz = od * g->stride[0] - g->pad[0] + kz * g->dilation[0];                       \
      if (iz < 0 || iz >= g->in[0]) continue;                                                 \
      for (ky = 0; ky < g->kernel[1]; ky++) {                                                 \
        int64_t iy = oh * g->stride[1] - g->pad[1] + ky * g->dilation[1];                     \
        if (iy < 0 || iy >= g->in[1]) continue;                                               \
        for (kx = 0; kx < g->kernel[2]; kx++) {                                               \
          int64_t ix = ow * g->stride[2] - g->pad[2] + kx * g->dilation[2];                   \
          A v;                                                                                \
          if (ix < 0 || ix >= g->in[2]) continue;                                             \
          v = LOAD(plane[(iz * g->in[1] + iy) * g->in[2] + ix]);                              \
          if (!is_max) {                                                                      \
            sum = sum + v;                                                                    \
          } else if (v > best || (!found && v == best)) {                                     \
            best = v;                                                                         \
            found = 1;                                                                        \
            at = index_base + iz * g->index_stride[0] + iy * g->index_stride[1] +             \
                 ix * g->index_stride[2];                                                     \
          }                                                                                   \
        }                                                                                     \
      }                                                                                       \
    }                                                                                         \
    if (is_max) {                                                                             \
      *y = STORE(best);                                                                       \
      if (index) *index = at;                                                                 \
    } else {                                                                                  \
      A count = (A)(aotc_pooling_count_(g, 0, od) * aotc_pooling_count_(g, 1, oh) *           \
                    aotc_pooling_count_(g, 2, ow));                                           \
      *y = STORE(sum / count);                                                                \
    }                                                                                         \
  }                                                                                           \
                                                                                              \
  typedef struct {                                                                            \
    const aotc_pooling_geom *g;                                                               \
    int is_max;                                                                               \
    const T *x;                                                                               \
    T *y;                                                                                     \
    int64_t *indices;                                                                         \
  } aotc_pooling_##SUF##_args_;                                                               \
                                                                                              \
  AOTC_FN void aotc_pooling_##SUF##_task_(void *arg, int64_t plane) {                         \
    const aotc_pooling_##SUF##_args_ *a = (const aotc_pooling_##SUF##_args_ *)arg;            \
    const aotc_pooling_geom *g = a->g;                                                        \
    int64_t in_vol = aotc_pooling_volume_(g->in), out_vol = aotc_pooling_volume_(g->out);     \
    int64_t od, oh, ow, o = plane * out_vol;                                                  \
    for (od = 0; od < g->out[0]; od++)                                                        \
      for (oh = 0; oh < g->out[1]; oh++)                                                      \
        for (ow = 0; ow < g->out[2]; ow++, o++)                                               \
          aotc_pooling_one_##SUF##_(g, a->is_max, a->x + plane * in_vol, plane * in_vol, od,  \
                                    oh, ow, a->y + o, a->indices ? a->indices + o : NULL);    \
  }                                                                                           \
                                                                                              \
  AOTC_FN void aotc_pooling_##SUF(aotc_pool *pool, const aotc_pooling_geom *g, int is_max,    \
                                  const T *x, T *y, int64_t *indices) {                       \
    aotc_pooling_##SUF##_args_ a;                                                             \
    a.g = g;                                                                                  \
    a.is_max = is_max;                                                                        \
    a.x = x;                                                                                  \
    a.y = y;                                                                                  \
    a.indices = indices;                                                                      \
    aotc_parallel_for(pool, g->planes, aotc_pooling_##SUF##_task_, &a);                       \
  }

#define AOTC_POOLING_ID_(v) (v)
#define AOTC_POOLING_F64_(v) AOTC_CANON_F64(v)
#define AOTC_POOLING_F16_(v) aotc_f32_to_f16(AOTC_CANON_F32(v))
#define AOTC_POOLING_BF16_(v) aotc_f32_to_bf16(AOTC_CANON_F32(v))
#define AOTC_POOLING_I8_(v) ((int8_t)(v))
#define AOTC_POOLING_U8_(v) ((uint8_t)(v))
AOTC_POOLING_TYPED_(f64, double, double, AOTC_POOLING_ID_, AOTC_POOLING_F64_, -DBL_MAX)
AOTC_POOLING_TYPED_(f16, aotc_f16, float, aotc_f16_to_f32, AOTC_POOLING_F16_, -FLT_MAX)
AOTC_POOLING_TYPED_(bf16, aotc_bf16, float, aotc_bf16_to_f32, AOTC_POOLING_BF16_, -FLT_MAX)
AOTC_POOLING_TYPED_(i8, int8_t, int, AOTC_POOLING_ID_, AOTC_POOLING_I8_, INT8_MIN)
AOTC_POOLING_TYPED_(u8, uint8_t, int, AOTC_POOLING_ID_, AOTC_POOLING_U8_, 0)

#endif
