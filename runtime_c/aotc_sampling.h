/* aotc runtime: sampling at computed positions (float32): GridSample, AffineGrid,
 * RoiAlign, MaxRoiPool and DeformConv.
 *
 * Coordinates follow the ONNX reference operators. Every parallel piece is a fixed
 * function of the shape and every output is summed in one fixed order, so results do
 * not depend on the thread count. Positions are clamped into a safe range before any
 * float to integer conversion, so hostile inputs (huge, infinite, NaN) never convert
 * out of range. */
#ifndef AOTC_SAMPLING_H_
#define AOTC_SAMPLING_H_

#include "aotc_base.h"
#include "aotc_gemm.h"
#include "aotc_threads.h"
#include <float.h>

#define AOTC_SAMPLE_NEAREST 0
#define AOTC_SAMPLE_LINEAR 1
#define AOTC_SAMPLE_CUBIC 2
#define AOTC_PAD_ZEROS 0
#define AOTC_PAD_BORDER 1
#define AOTC_PAD_REFLECTION 2
#define AOTC_SAMPLE_LIMIT 1.0e9f /* positions beyond this are equally far outside */

/* Reflect x by the nearer border until it lies in [lo, hi]. */
AOTC_FN float aotc_sample_reflect_(float x, double lo, double hi) {
  const double range = hi - lo;
  double fx = x, dx, r;
  int64_t n;
  if (range <= 0) return (float)lo;
  if (fx < lo) {
    dx = lo - fx;
    n = (int64_t)(dx / range);
    r = dx - (double)n * range;
    fx = n % 2 == 0 ? lo + r : hi - r;
  } else if (fx > hi) {
    dx = fx - hi;
    n = (int64_t)(dx / range);
    r = dx - (double)n * range;
    fx = n % 2 == 0 ? hi - r : lo + r;
  }
  return (float)fx;
}

AOTC_FN float aotc_sample_clampf_(float x, float lo, float hi) {
  if (!(x >= lo)) return lo;  /* NaN too */
  return x > hi ? hi : x;
}

/* Keys cubic convolution weights of the 4 taps around fraction t (A = -0.75). */
AOTC_FN void aotc_sample_cubic_(float t, float *w) {
  const float a = -0.75f;
  const float t1 = t + 1, t2 = 1 - t, t3 = 2 - t;
  w[0] = ((a * t1 - 5 * a) * t1 + 8 * a) * t1 - 4 * a;
  w[1] = ((a + 2) * t - (a + 3)) * t * t + 1;
  w[2] = ((a + 2) * t2 - (a + 3)) * t2 * t2 + 1;
  w[3] = ((a * t3 - 5 * a) * t3 + 8 * a) * t3 - 4 * a;
}

/* The taps of one sampling dimension: input indices, weights, and whether each tap
 * reads the input (zeros padding reads nothing outside). */
typedef struct {
  int n;
  int64_t index[4];
  float weight[4];
  int valid[4];
} aotc_sample_taps_;

AOTC_FN void aotc_sample_axis_(float normalized, int64_t size, int mode, int padding, int align,
                               aotc_sample_taps_ *taps) {
  const float lo = align ? 0.0f : -0.5f, hi = align ? (float)size - 1.0f : (float)size - 0.5f;
  float x = align ? (normalized + 1) / 2.0f * (float)(size - 1) : ((normalized + 1) * (float)size - 1) / 2.0f;
  int64_t first;
  int t;
  x = x != x ? -AOTC_SAMPLE_LIMIT : aotc_sample_clampf_(x, -AOTC_SAMPLE_LIMIT, AOTC_SAMPLE_LIMIT);
  if (mode == AOTC_SAMPLE_NEAREST) x = rintf(x);  /* halves to even, as the reference */
  if (x < lo || x > hi) {
    if (padding == AOTC_PAD_BORDER) x = aotc_sample_clampf_(x, 0.0f, (float)(size - 1));
    if (padding == AOTC_PAD_REFLECTION) x = aotc_sample_reflect_(x, lo, hi);
  }
  if (mode == AOTC_SAMPLE_NEAREST) {
    taps->n = 1;
    taps->index[0] = (int64_t)x;  /* truncation, as the reference */
    taps->weight[0] = 1.0f;
  } else {
    const float fl = floorf(x), frac = x - fl;
    first = (int64_t)fl;
    if (mode == AOTC_SAMPLE_LINEAR) {
      taps->n = 2;
      taps->weight[0] = 1 - frac;
      taps->weight[1] = frac;
    } else {
      taps->n = 4;
      first -= 1;
      aotc_sample_cubic_(frac, taps->weight);
    }
    for (t = 0; t < taps->n; t++) taps->index[t] = first + t;
  }
  for (t = 0; t < taps->n; t++) {
    int64_t i = taps->index[t];
    taps->valid[t] = 1;
    if (i >= 0 && i < size) continue;
    if (padding == AOTC_PAD_ZEROS) {
      taps->valid[t] = 0;
      taps->index[t] = 0;
    } else if (padding == AOTC_PAD_BORDER) {
      taps->index[t] = i < 0 ? 0 : size - 1;
    } else {
      i = (int64_t)aotc_sample_reflect_((float)i, lo, hi);
      taps->index[t] = i < 0 ? 0 : (i >= size ? size - 1 : i);
    }
  }
}

/* ---- GridSample ---------------------------------------------------------------- */

typedef struct {
  const float *x, *grid;
  float *y;
  int64_t channels, points, points_per_piece, pieces_per_image;
  int64_t dims[3]; /* input spatial dims, leading 1s up to 3 */
  int nd, mode, padding, align;
} aotc_grid_sample_job_;

AOTC_FN void aotc_grid_sample_piece_(void *arg, int64_t piece) {
  const aotc_grid_sample_job_ *job = (const aotc_grid_sample_job_ *)arg;
  const int64_t n = piece / job->pieces_per_image;
  const int64_t first = (piece % job->pieces_per_image) * job->points_per_piece;
  const int64_t end = AOTC_MIN(first + job->points_per_piece, job->points);
  const int64_t plane = job->dims[0] * job->dims[1] * job->dims[2];
  int64_t p, c;
  for (p = first; p < end; p++) {
    const float *g = job->grid + (n * job->points + p) * job->nd;
    aotc_sample_taps_ taps[3];
    int d, lead = 3 - job->nd;
    for (d = 0; d < lead; d++) {
      taps[d].n = 1;
      taps[d].index[0] = 0;
      taps[d].weight[0] = 1.0f;
      taps[d].valid[0] = 1;
    }
    /* the grid lists coordinates innermost dimension first */
    for (d = lead; d < 3; d++)
      aotc_sample_axis_(g[2 - d], job->dims[d], job->mode, job->padding, job->align, &taps[d]);
    for (c = 0; c < job->channels; c++) {
      const float *x = job->x + (n * job->channels + c) * plane;
      float sum0 = 0.0f;
      int a, b, e;
      for (a = 0; a < taps[0].n; a++) {
        float sum1 = 0.0f;
        for (b = 0; b < taps[1].n; b++) {
          const float *row = x + (taps[0].index[a] * job->dims[1] + taps[1].index[b]) * job->dims[2];
          float sum2 = 0.0f;
          if (!taps[0].valid[a] || !taps[1].valid[b]) continue;
          for (e = 0; e < taps[2].n; e++)
            if (taps[2].valid[e]) sum2 += taps[2].weight[e] * row[taps[2].index[e]];
          sum1 += taps[1].weight[b] * sum2;
        }
        sum0 += taps[0].weight[a] * sum1;
      }
      job->y[(n * job->channels + c) * job->points + p] = sum0;
    }
  }
}

/* x [batch, channels, dims], grid [batch, points, nd] (nd = 1..3 coordinates, the
 * innermost dimension first), y [batch, channels, points]. */
AOTC_FN void aotc_grid_sample(aotc_pool *pool, const float *x, const float *grid, float *y,
                              int64_t batch, int64_t channels, int nd, const int64_t *dims,
                              int64_t points, int mode, int padding, int align) {
  aotc_grid_sample_job_ job;
  int d;
  job.x = x;
  job.grid = grid;
  job.y = y;
  job.channels = channels;
  job.points = points;
  job.nd = nd;
  job.mode = mode;
  job.padding = padding;
  job.align = align;
  for (d = 0; d < 3; d++) job.dims[d] = d < 3 - nd ? 1 : dims[d - (3 - nd)];
  job.points_per_piece = AOTC_MAX(1, 4096 / AOTC_MAX(channels, 1));
  job.pieces_per_image = (points + job.points_per_piece - 1) / job.points_per_piece;
  aotc_parallel_for(pool, batch * job.pieces_per_image, aotc_grid_sample_piece_, &job);
}

/* ---- AffineGrid ---------------------------------------------------------------- */

/* grid[n, p, i] = sum_j theta[n, i, j] * base[p, j], i < nd, j <= nd (base holds the
 * homogeneous coordinates of every output point), summed in double. */
AOTC_FN void aotc_affine_grid(const float *theta, const double *base, float *grid, int64_t batch,
                              int64_t points, int nd) {
  int64_t n, p;
  int i, j;
  for (n = 0; n < batch; n++)
    for (p = 0; p < points; p++)
      for (i = 0; i < nd; i++) {
        double sum = 0.0;
        for (j = 0; j <= nd; j++) sum += (double)theta[(n * nd + i) * (nd + 1) + j] * base[p * (nd + 1) + j];
        grid[(n * points + p) * nd + i] = (float)sum;
      }
}

/* ---- RoiAlign ------------------------------------------------------------------ */

typedef struct {
  const float *x, *rois;
  const int64_t *batch_index;
  float *y;
  int64_t channels, height, width, out_h, out_w, sampling_ratio;
  double spatial_scale, offset;
  int is_max, half_pixel;
} aotc_roi_align_job_;

/* One bilinear sample: 4 positions in the plane and their weights (all 0 outside). */
typedef struct {
  int64_t pos[4];
  double w[4];
} aotc_roi_point_;

AOTC_FN void aotc_roi_sample_(double y, double x, int64_t height, int64_t width, aotc_roi_point_ *s) {
  int64_t y_low, x_low, y_high, x_high;
  double ly, lx;
  if (!(y >= -1.0 && y <= (double)height && x >= -1.0 && x <= (double)width)) {
    memset(s, 0, sizeof *s);
    return;
  }
  y = AOTC_MAX(y, 0.0);
  x = AOTC_MAX(x, 0.0);
  y_low = (int64_t)y;
  x_low = (int64_t)x;
  if (y_low >= height - 1) {
    y_high = y_low = height - 1;
    y = (double)y_low;
  } else {
    y_high = y_low + 1;
  }
  if (x_low >= width - 1) {
    x_high = x_low = width - 1;
    x = (double)x_low;
  } else {
    x_high = x_low + 1;
  }
  ly = y - (double)y_low;
  lx = x - (double)x_low;
  s->pos[0] = y_low * width + x_low;
  s->pos[1] = y_low * width + x_high;
  s->pos[2] = y_high * width + x_low;
  s->pos[3] = y_high * width + x_high;
  s->w[0] = (1.0 - ly) * (1.0 - lx);
  s->w[1] = (1.0 - ly) * lx;
  s->w[2] = ly * (1.0 - lx);
  s->w[3] = ly * lx;
}

AOTC_FN void aotc_roi_align_one_(void *arg, int64_t r) {
  const aotc_roi_align_job_ *job = (const aotc_roi_align_job_ *)arg;
  const float *roi = job->rois + r * 4;
  const double start_w = (double)roi[0] * job->spatial_scale - job->offset;
  const double start_h = (double)roi[1] * job->spatial_scale - job->offset;
  double roi_w = (double)roi[2] * job->spatial_scale - job->offset - start_w;
  double roi_h = (double)roi[3] * job->spatial_scale - job->offset - start_h;
  double bin_h, bin_w;
  int64_t grid_h, grid_w, count, ph, pw, iy, ix, c;
  const float *x = job->x + job->batch_index[r] * job->channels * job->height * job->width;
  float *y = job->y + r * job->channels * job->out_h * job->out_w;
  if (!job->half_pixel) {  /* malformed ROIs are forced to 1x1 */
    roi_w = AOTC_MAX(roi_w, 1.0);
    roi_h = AOTC_MAX(roi_h, 1.0);
  }
  bin_h = roi_h / (double)job->out_h;
  bin_w = roi_w / (double)job->out_w;
  if (job->sampling_ratio > 0) {
    grid_h = grid_w = job->sampling_ratio;
  } else {  /* ceil of the bin size, kept in a sane range for hostile boxes */
    grid_h = (int64_t)ceil(AOTC_MIN(AOTC_MAX(bin_h, 0.0), 1.0e6));
    grid_w = (int64_t)ceil(AOTC_MIN(AOTC_MAX(bin_w, 0.0), 1.0e6));
  }
  count = AOTC_MAX(grid_h * grid_w, 1);
  for (ph = 0; ph < job->out_h; ph++)
    for (pw = 0; pw < job->out_w; pw++) {
      const int64_t out = ph * job->out_w + pw;
      for (c = 0; c < job->channels; c++) y[c * job->out_h * job->out_w + out] = 0.0f;
      for (iy = 0; iy < grid_h; iy++) {
        const double yy = start_h + (double)ph * bin_h + ((double)iy + 0.5) * bin_h / (double)grid_h;
        for (ix = 0; ix < grid_w; ix++) {
          const double xx = start_w + (double)pw * bin_w + ((double)ix + 0.5) * bin_w / (double)grid_w;
          aotc_roi_point_ s;
          aotc_roi_sample_(yy, xx, job->height, job->width, &s);
          for (c = 0; c < job->channels; c++) {
            const float *plane = x + c * job->height * job->width;
            float *dst = y + c * job->out_h * job->out_w + out;
            if (job->is_max) {
              double v = s.w[0] * plane[s.pos[0]];
              v = AOTC_MAX(v, s.w[1] * plane[s.pos[1]]);
              v = AOTC_MAX(v, s.w[2] * plane[s.pos[2]]);
              v = AOTC_MAX(v, s.w[3] * plane[s.pos[3]]);
              *dst = (iy == 0 && ix == 0) ? (float)v : AOTC_MAX(*dst, (float)v);
            } else {
              *dst += (float)(s.w[0] * plane[s.pos[0]] + s.w[1] * plane[s.pos[1]] +
                              s.w[2] * plane[s.pos[2]] + s.w[3] * plane[s.pos[3]]);
            }
          }
        }
      }
      if (!job->is_max)
        for (c = 0; c < job->channels; c++) y[c * job->out_h * job->out_w + out] /= (float)count;
    }
}

/* x [batch, channels, height, width], rois [num_rois, 4] (x1, y1, x2, y2), batch_index
 * [num_rois] (int64, checked: AOTC_ERR_INDEX when outside [0, batch)), y [num_rois,
 * channels, out_h, out_w]. */
AOTC_FN int aotc_roi_align(aotc_pool *pool, const float *x, const float *rois, const int64_t *batch_index,
                           float *y, int64_t batch, int64_t channels, int64_t height, int64_t width,
                           int64_t num_rois, int64_t out_h, int64_t out_w, int64_t sampling_ratio,
                           float spatial_scale, int is_max, int half_pixel) {
  aotc_roi_align_job_ job;
  int64_t r;
  for (r = 0; r < num_rois; r++)
    if (batch_index[r] < 0 || batch_index[r] >= batch) return AOTC_ERR_INDEX;
  job.x = x;
  job.rois = rois;
  job.batch_index = batch_index;
  job.y = y;
  job.channels = channels;
  job.height = height;
  job.width = width;
  job.out_h = out_h;
  job.out_w = out_w;
  job.sampling_ratio = sampling_ratio;
  job.spatial_scale = spatial_scale;
  job.offset = half_pixel ? 0.5 : 0.0;
  job.is_max = is_max;
  job.half_pixel = half_pixel;
  aotc_parallel_for(pool, num_rois, aotc_roi_align_one_, &job);
  return AOTC_OK;
}

/* ---- MaxRoiPool ---------------------------------------------------------------- */

/* rois [num_rois, 5] (batch index, x1, y1, x2, y2) scaled and rounded to pixels; each
 * of the pooled_h x pooled_w bins takes the max of its pixels (0 for an empty bin).
 * AOTC_ERR_INDEX for a batch index outside [0, batch). */
AOTC_FN int aotc_max_roi_pool(const float *x, const float *rois, float *y, int64_t batch,
                              int64_t channels, int64_t height, int64_t width, int64_t num_rois,
                              int64_t pooled_h, int64_t pooled_w, float spatial_scale) {
  int64_t r, c, ph, pw, h, w;
  for (r = 0; r < num_rois; r++) {
    const float *roi = rois + r * 5;
    if (!(roi[0] >= 0.0f && roi[0] < (float)batch)) return AOTC_ERR_INDEX;
  }
  for (r = 0; r < num_rois; r++) {
    const float *roi = rois + r * 5;
    const int64_t n = (int64_t)roi[0];
    const int64_t start_w = (int64_t)roundf(aotc_sample_clampf_(roi[1] * spatial_scale, -1e9f, 1e9f));
    const int64_t start_h = (int64_t)roundf(aotc_sample_clampf_(roi[2] * spatial_scale, -1e9f, 1e9f));
    const int64_t end_w = (int64_t)roundf(aotc_sample_clampf_(roi[3] * spatial_scale, -1e9f, 1e9f));
    const int64_t end_h = (int64_t)roundf(aotc_sample_clampf_(roi[4] * spatial_scale, -1e9f, 1e9f));
    const double bin_h = (double)AOTC_MAX(end_h - start_h + 1, 1) / (double)pooled_h;
    const double bin_w = (double)AOTC_MAX(end_w - start_w + 1, 1) / (double)pooled_w;
    for (c = 0; c < channels; c++) {
      const float *plane = x + (n * channels + c) * height * width;
      float *out = y + (r * channels + c) * pooled_h * pooled_w;
      for (ph = 0; ph < pooled_h; ph++)
        for (pw = 0; pw < pooled_w; pw++) {
          int64_t h0 = (int64_t)floor((double)ph * bin_h) + start_h;
          int64_t h1 = (int64_t)ceil((double)(ph + 1) * bin_h) + start_h;
          int64_t w0 = (int64_t)floor((double)pw * bin_w) + start_w;
          int64_t w1 = (int64_t)ceil((double)(pw + 1) * bin_w) + start_w;
          float best = -FLT_MAX;
          h0 = AOTC_MIN(AOTC_MAX(h0, 0), height);
          h1 = AOTC_MIN(AOTC_MAX(h1, 0), height);
          w0 = AOTC_MIN(AOTC_MAX(w0, 0), width);
          w1 = AOTC_MIN(AOTC_MAX(w1, 0), width);
          if (h1 <= h0 || w1 <= w0) best = 0.0f;
          for (h = h0; h < h1; h++)
            for (w = w0; w < w1; w++) best = AOTC_MAX(best, plane[h * width + w]);
          out[ph * pooled_w + pw] = best;
        }
    }
  }
  return AOTC_OK;
}

/* ---- DeformConv ---------------------------------------------------------------- */

typedef struct {
  int64_t batch, group, offset_group, cin, cin_g, cout_g;
  int64_t in[2], out[2], kernel[2], stride[2], dilation[2], pad[2];
} aotc_deform_geom;

/* Bilinear sample of a plane at (h, w) in pixels; 0 outside. */
AOTC_FN float aotc_deform_sample_(const float *plane, int64_t height, int64_t width, float h, float w) {
  float fh, fw, th, tw, sum = 0.0f;
  int64_t h0, w0, a, b;
  h = h != h ? -2.0f : aotc_sample_clampf_(h, -2.0f, (float)height + 1.0f);
  w = w != w ? -2.0f : aotc_sample_clampf_(w, -2.0f, (float)width + 1.0f);
  fh = floorf(h);
  fw = floorf(w);
  th = h - fh;
  tw = w - fw;
  h0 = (int64_t)fh;
  w0 = (int64_t)fw;
  for (a = 0; a < 2; a++) {
    float row = 0.0f;
    const int64_t hh = h0 + a;
    if (hh < 0 || hh >= height) continue;
    for (b = 0; b < 2; b++) {
      const int64_t ww = w0 + b;
      if (ww >= 0 && ww < width) row += (b ? tw : 1 - tw) * plane[hh * width + ww];
    }
    sum += (a ? th : 1 - th) * row;
  }
  return sum;
}

typedef struct {
  const aotc_deform_geom *g;
  const float *x, *offset, *mask;
  float *cols;
  int64_t n, first_channel, first_pixel, pixels;
} aotc_deform_job_;

/* Rows of the columns for one input channel of the group: [kernel taps, block pixels]. */
AOTC_FN void aotc_deform_unfold_(void *arg, int64_t ci) {
  const aotc_deform_job_ *job = (const aotc_deform_job_ *)arg;
  const aotc_deform_geom *g = job->g;
  const int64_t c = job->first_channel + ci;
  const int64_t og = c / (g->cin / g->offset_group);
  const int64_t taps = g->kernel[0] * g->kernel[1], total = g->out[0] * g->out[1];
  const float *plane = job->x + (job->n * g->cin + c) * g->in[0] * g->in[1];
  const float *off = job->offset + (job->n * g->offset_group + og) * taps * 2 * total;
  const float *mask = job->mask ? job->mask + (job->n * g->offset_group + og) * taps * total : NULL;
  int64_t ka, kb, q;
  for (ka = 0; ka < g->kernel[0]; ka++)
    for (kb = 0; kb < g->kernel[1]; kb++) {
      const int64_t tap = ka * g->kernel[1] + kb;
      float *col = job->cols + (ci * taps + tap) * job->pixels;
      for (q = 0; q < job->pixels; q++) {
        const int64_t p = job->first_pixel + q, i = p / g->out[1], j = p % g->out[1];
        const float h = (float)(i * g->stride[0] - g->pad[0] + ka * g->dilation[0]) + off[(tap * 2) * total + p];
        const float w = (float)(j * g->stride[1] - g->pad[1] + kb * g->dilation[1]) + off[(tap * 2 + 1) * total + p];
        float v = aotc_deform_sample_(plane, g->in[0], g->in[1], h, w);
        if (mask) v *= mask[tap * total + p];
        col[q] = v;
      }
    }
}

/* x [batch, cin, in], w [group * cout_g, cin_g, kernel], offset [batch, offset_group *
 * taps * 2, out], mask [batch, offset_group * taps, out] or NULL, bias or NULL. Per
 * image, group and block of block_pixels output pixels (a function of the shape): the
 * sampled columns [cin_g * taps, block] in `scratch`, then one GEMM (its scratch after
 * the columns, at cols_bytes). */
AOTC_FN void aotc_deform_conv(aotc_pool *pool, const aotc_deform_geom *g, const float *x, const float *w,
                              const float *offset, const float *mask, const float *bias, float *y,
                              int64_t block_pixels, unsigned char *scratch, size_t cols_bytes) {
  const int64_t taps = g->kernel[0] * g->kernel[1], total = g->out[0] * g->out[1];
  const int64_t k = g->cin_g * taps;
  int64_t n, grp, first;
  for (n = 0; n < g->batch; n++)
    for (grp = 0; grp < g->group; grp++)
      for (first = 0; first < total; first += block_pixels) {
        aotc_deform_job_ job;
        job.g = g;
        job.x = x;
        job.offset = offset;
        job.mask = mask;
        job.cols = (float *)(void *)scratch;
        job.n = n;
        job.first_channel = grp * g->cin_g;
        job.first_pixel = first;
        job.pixels = AOTC_MIN(block_pixels, total - first);
        aotc_parallel_for(pool, g->cin_g, aotc_deform_unfold_, &job);
        aotc_sgemm(pool, g->cout_g, job.pixels, k, w + grp * g->cout_g * k, k, 0, job.cols, job.pixels, 0,
                   y + (n * g->group + grp) * g->cout_g * total + first, total,
                   bias ? bias + grp * g->cout_g : NULL, NULL, scratch + cols_bytes);
      }
}

#endif
