/* aotc runtime: convolutions over channels-last activations (NHWC).
 *
 * Where the plan runs a chain of depthwise and pointwise convs channels-last
 * (aotc/plan/channels_last.py), each pixel's channels lie side by side:
 *   aotc_conv_depthwise_nhwc  AOTC_VW channels across the lanes, each output pixel the
 *                             taps' sum in tap order: no idle lanes on small planes,
 *                             where a plane's pixels as lanes left up to a quarter idle;
 *   aotc_conv_pointwise_nhwc  one GEMM: pixels as rows against the weights packed at
 *                             compile time, each tile stored as computed (the NCHW rows
 *                             kernel stores its tiles transposed).
 * Geometry as aotc_conv_geom says (2-D: in[0] = out[0] = 1); X, Y and the residual are
 * [N, H, W, C]. Bias, then the residual, then the activation (Relu and Clip in
 * registers, others after the store). Fast mode only: the plan keeps exact mode NCHW. */
#ifndef AOTC_CONV_NHWC_H_
#define AOTC_CONV_NHWC_H_

#include "aotc_base.h"
#include "aotc_threads.h"
#include "aotc_gemm.h"
#include "aotc_conv.h"

/* A 1x1, stride-1, unpadded conv of one group: w is W^T [Cin, Cout] in the packed-B
 * layout. Scratch: aotc_sgemm_packed_scratch_bytes(N * H * W, Cout, Cin). */
AOTC_ENGINE_FN void aotc_conv_pointwise_nhwc(aotc_pool *pool, const aotc_conv_geom *g, const float *x,
                                             const float *w, const float *bias, const float *residual,
                                             float *y, const aotc_activation *act, unsigned char *scratch);

/* A depthwise conv (group = Cin = Cout): w is [kh * kw, C], tap by tap, channels innermost. */
AOTC_ENGINE_FN void aotc_conv_depthwise_nhwc(aotc_pool *pool, const aotc_conv_geom *g, const float *x,
                                             const float *w, const float *bias, const float *residual,
                                             float *y, const aotc_activation *act);

#ifndef AOTC_ENGINE_EXTERN

/* The product's tasks are cut by pixels (its rows) before channels, so each thread's
 * share is a run of rows of the image, as are the depthwise convs' tasks around it: with
 * the pool's threads taking tasks from the two ends, each thread reads what it wrote
 * the step before from its own core's caches. Cut by channels first, a thread wrote part
 * of every pixel and the depthwise conv after it read the rest from the other core:
 * MobileNetV2 at two threads took 0.943x the time cut by pixels (0.996x at one). */
AOTC_ENGINE_FN void aotc_conv_pointwise_nhwc(aotc_pool *pool, const aotc_conv_geom *g, const float *x,
                                             const float *w, const float *bias, const float *residual,
                                             float *y, const aotc_activation *act, unsigned char *scratch) {
  const aotc_sgemm_extras extras = {.residual = residual, .rows_first = 1};
  aotc_sgemm_run_(pool, g->batch * aotc_conv_volume_(g->out), g->cout_g, g->cin_g, x, g->cin_g, 0, NULL, 0, 0,
                  w, y, g->cout_g, NULL, bias, act, &extras, scratch);
}

typedef struct {
  const aotc_conv_geom *g;
  const float *x, *w, *bias, *residual;
  const aotc_activation *act;
  float *y;
  int64_t rows_per_task;
  int64_t inner_lo, inner_hi;   /* output columns whose every tap column is inside a row */
} aotc_conv_depthwise_nhwc_args_;

/* Output pixel (oy, ox) of one image, channels [c0, c0 + n) (n <= AOTC_VW), for any
 * kernel: the taps inside the input, in order, the weights read from w. */
AOTC_FN aotc_v_ aotc_conv_depthwise_nhwc_sum_(const aotc_conv_geom *g, const float *x, const float *w,
                                              int64_t c, int64_t c0, int64_t n, int64_t oy, int64_t ox) {
  const int64_t iy0 = oy * g->stride[1] - g->pad[1], ix0 = ox * g->stride[2] - g->pad[2];
  aotc_v_ acc = AOTC_V_ZERO();
  int64_t ky, kx;
  for (ky = 0; ky < g->kernel[1]; ky++) {
    const int64_t iy = iy0 + ky * g->dilation[1];
    if (iy < 0 || iy >= g->in[1]) continue;
    for (kx = 0; kx < g->kernel[2]; kx++) {
      const int64_t ix = ix0 + kx * g->dilation[2];
      if (ix < 0 || ix >= g->in[2]) continue;
      acc = AOTC_V_MADD(AOTC_V_LOADN(w + (ky * g->kernel[2] + kx) * c + c0, n),
                        AOTC_V_LOADN(x + (iy * g->in[2] + ix) * c + c0, n), acc);
    }
  }
  return acc;
}

/* The taps [lo, hi) of 0..2 whose input row (or column) i0 + k * d lies in [0, size). */
AOTC_INLINE_ALWAYS void aotc_conv_depthwise_nhwc_taps_(int64_t i0, int64_t d, int64_t size, int *lo, int *hi) {
  for (*lo = 0; *lo < 3 && i0 + *lo * d < 0; ++*lo) {}
  for (*hi = 3; *hi > *lo && i0 + (*hi - 1) * d >= size; --*hi) {}
}

/* One output pixel of a 3x3 conv over tap rows [ky_lo, ky_hi) and columns [kx_lo,
 * kx_hi), in order: p is its tap (ky_lo, kx_lo) in X, w that tap's weights (tap t at
 * w + t * c), dy and dx the steps to the next tap row and column. */
AOTC_INLINE_ALWAYS aotc_v_ aotc_conv_depthwise_nhwc_part3_(const float *p, const float *w, int64_t c, int64_t dy,
                                                           int64_t dx, int ky_lo, int ky_hi, int kx_lo, int kx_hi,
                                                           int64_t n) {
  aotc_v_ v = AOTC_V_ZERO();
  int ky, kx;
  for (ky = ky_lo; ky < ky_hi; ky++, p += dy, w += 3 * c)
    for (kx = kx_lo; kx < kx_hi; kx++)
      v = AOTC_V_MADD(AOTC_V_LOADN(w + (kx - kx_lo) * c, n), AOTC_V_LOADN(p + (kx - kx_lo) * dx, n), v);
  return v;
}

/* v + bias (+ the residual's vector at res, if any), activated, stored at y. */
AOTC_INLINE_ALWAYS void aotc_conv_depthwise_nhwc_store_(float *y, aotc_v_ v, aotc_v_ bias, const float *res,
                                                        int64_t n, int kind, aotc_v_ lo, aotc_v_ hi) {
  v = AOTC_V_ADD(v, bias);
  if (res) v = AOTC_V_ADD(v, AOTC_V_LOADN(res, n));
  AOTC_V_STOREN(y, aotc_sgemm_act_v_(AOTC_V_FINISH(v), kind, lo, hi), n);
}

/* Output rows [r0, r1) of a 3x3 conv, channels [c0, c0 + n). Pixels whose nine taps all
 * lie inside the input go through a loop of three row pointers and fixed steps, the
 * weights in registers; the others through the taps inside, their row and column
 * ranges worked out once a row and once a pixel (the same taps in the same order either
 * way). (With bounds checks per tap for the border, the kernel took 1.5-1.8x the time:
 * a 7x7 plane has half its pixels on the border.) */
AOTC_INLINE_ALWAYS void aotc_conv_depthwise_nhwc_rows3_(const aotc_conv_depthwise_nhwc_args_ *a, int64_t r0,
                                                        int64_t r1, int64_t c0, int64_t n, int kind,
                                                        aotc_v_ lo, aotc_v_ hi) {
  const aotc_conv_geom *g = a->g;
  const int64_t c = g->group, oh = g->out[1], ow = g->out[2], step = g->stride[2] * c;
  const int64_t dy = g->dilation[1] * g->in[2] * c, dx = g->dilation[2] * c;
  const aotc_v_ bias = a->bias ? AOTC_V_LOADN(a->bias + c0, n) : AOTC_V_ZERO();
  const float *w = a->w + c0;
  aotc_v_ wv[9];
  int64_t r, ox, t;
  for (t = 0; t < 9; t++) wv[t] = AOTC_V_LOADN(w + t * c, n);
  for (r = r0; r < r1; r++) {
    const int64_t oy = r % oh, iy0 = oy * g->stride[1] - g->pad[1];
    const float *x = a->x + r / oh * aotc_conv_volume_(g->in) * c + c0;   /* the image's first pixel */
    const float *res = a->residual ? a->residual + r * ow * c + c0 : NULL;
    float *y = a->y + r * ow * c + c0;
    int ky_lo, ky_hi, kx_lo, kx_hi;
    aotc_conv_depthwise_nhwc_taps_(iy0, g->dilation[1], g->in[1], &ky_lo, &ky_hi);
    for (ox = 0; ox < ow;) {
      const int64_t ix0 = ox * g->stride[2] - g->pad[2];
      aotc_v_ v;
      if (ox == a->inner_lo && ky_lo == 0 && ky_hi == 3 && a->inner_lo < a->inner_hi) {   /* the interior's run */
        const float *p0 = x + (iy0 * g->in[2] + ix0) * c, *p1 = p0 + dy, *p2 = p0 + 2 * dy;
        for (; ox < a->inner_hi; ox++, p0 += step, p1 += step, p2 += step) {
          v = AOTC_V_ZERO();
          v = AOTC_V_MADD(wv[0], AOTC_V_LOADN(p0, n), v);
          v = AOTC_V_MADD(wv[1], AOTC_V_LOADN(p0 + dx, n), v);
          v = AOTC_V_MADD(wv[2], AOTC_V_LOADN(p0 + 2 * dx, n), v);
          v = AOTC_V_MADD(wv[3], AOTC_V_LOADN(p1, n), v);
          v = AOTC_V_MADD(wv[4], AOTC_V_LOADN(p1 + dx, n), v);
          v = AOTC_V_MADD(wv[5], AOTC_V_LOADN(p1 + 2 * dx, n), v);
          v = AOTC_V_MADD(wv[6], AOTC_V_LOADN(p2, n), v);
          v = AOTC_V_MADD(wv[7], AOTC_V_LOADN(p2 + dx, n), v);
          v = AOTC_V_MADD(wv[8], AOTC_V_LOADN(p2 + 2 * dx, n), v);
          aotc_conv_depthwise_nhwc_store_(y + ox * c, v, bias, res ? res + ox * c : NULL, n, kind, lo, hi);
        }
        continue;
      }
      aotc_conv_depthwise_nhwc_taps_(ix0, g->dilation[2], g->in[2], &kx_lo, &kx_hi);
      v = ky_lo < ky_hi && kx_lo < kx_hi
              ? aotc_conv_depthwise_nhwc_part3_(x + ((iy0 + ky_lo * g->dilation[1]) * g->in[2] + ix0 +
                                                     kx_lo * g->dilation[2]) * c,
                                                w + (ky_lo * 3 + kx_lo) * c, c, dy, dx, ky_lo, ky_hi, kx_lo, kx_hi, n)
              : AOTC_V_ZERO();
      aotc_conv_depthwise_nhwc_store_(y + ox * c, v, bias, res ? res + ox * c : NULL, n, kind, lo, hi);
      ox++;
    }
  }
}

/* Output rows [r0, r1) of all images (row r: image r / OH, row r % OH), every channel. */
AOTC_FN void aotc_conv_depthwise_nhwc_task_(void *arg, int64_t t) {
  const aotc_conv_depthwise_nhwc_args_ *a = (const aotc_conv_depthwise_nhwc_args_ *)arg;
  const aotc_conv_geom *g = a->g;
  const int64_t c = g->group, oh = g->out[1], ow = g->out[2];
  const int64_t r0 = t * a->rows_per_task, r1 = AOTC_MIN(r0 + a->rows_per_task, g->batch * oh);
  const int kind = aotc_sgemm_act_in_registers_(a->act);
  const aotc_v_ lo = AOTC_V_SET1(a->act ? a->act->a : 0.0f), hi = AOTC_V_SET1(a->act ? a->act->b : 0.0f);
  int64_t r, ox, c0;
  for (c0 = 0; c0 < c; c0 += AOTC_VW) {
    const int64_t lanes = AOTC_MIN(AOTC_VW, c - c0);
    if (g->kernel[1] == 3 && g->kernel[2] == 3) {   /* (whole vectors unmasked) */
      if (lanes == AOTC_VW) aotc_conv_depthwise_nhwc_rows3_(a, r0, r1, c0, AOTC_VW, kind, lo, hi);
      else aotc_conv_depthwise_nhwc_rows3_(a, r0, r1, c0, lanes, kind, lo, hi);
      continue;
    }
    for (r = r0; r < r1; r++) {
      const float *x = a->x + r / oh * aotc_conv_volume_(g->in) * c;
      const aotc_v_ bias = a->bias ? AOTC_V_LOADN(a->bias + c0, lanes) : AOTC_V_ZERO();
      for (ox = 0; ox < ow; ox++) {
        const int64_t at = (r * ow + ox) * c + c0;
        aotc_conv_depthwise_nhwc_store_(a->y + at, aotc_conv_depthwise_nhwc_sum_(g, x, a->w, c, c0, lanes, r % oh, ox),
                                        bias, a->residual ? a->residual + at : NULL, lanes, kind, lo, hi);
      }
    }
  }
  if (!aotc_sgemm_act_all_in_registers_(a->act)) aotc_activation_apply(a->act, a->y + r0 * ow * c, (r1 - r0) * ow * c);
}

/* Output rows per task, about: enough work to hide the dispatch. */
#define AOTC_CONV_DEPTHWISE_NHWC_TASK 16384

AOTC_ENGINE_FN void aotc_conv_depthwise_nhwc(aotc_pool *pool, const aotc_conv_geom *g, const float *x,
                                             const float *w, const float *bias, const float *residual,
                                             float *y, const aotc_activation *act) {
  aotc_conv_depthwise_nhwc_args_ a;
  const int64_t rows = g->batch * g->out[1], row = AOTC_MAX(g->out[2] * g->group, 1);
  int64_t unused;
  a.g = g;
  a.x = x;
  a.w = w;
  a.bias = bias;
  a.residual = residual;
  a.act = act;
  a.y = y;
  a.rows_per_task = AOTC_MAX(1, AOTC_MIN(rows, AOTC_CONV_DEPTHWISE_NHWC_TASK / row));
  aotc_conv_valid_range_(-g->pad[2], g->stride[2], g->in[2], g->out[2], &a.inner_lo, &unused);
  aotc_conv_valid_range_((g->kernel[2] - 1) * g->dilation[2] - g->pad[2], g->stride[2], g->in[2], g->out[2],
                         &unused, &a.inner_hi);
  aotc_parallel_for(pool, aotc_sgemm_div_up_(rows, a.rows_per_task), aotc_conv_depthwise_nhwc_task_, &a);
}

#endif /* AOTC_ENGINE_EXTERN */

#endif
