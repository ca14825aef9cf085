/* aotc runtime: convolution, fp32, NCHW (1-D, 2-D and 3-D).
 *
 * Every conv is described as a 3-D one: 1-D and 2-D convs get leading spatial dims of
 * extent 1. Weights are [Cout, Cin/group, kd, kh, kw] row-major, which is already the
 * A operand of a GEMM per group: [Cout_g, K] with K = Cin_g * kd * kh * kw.
 *
 * Six kernels, chosen at compile time by the shape (aotc/ops/conv.py):
 *   aotc_conv_pointwise   1x1 kernel, stride 1, no pad: one GEMM per image and group;
 *   aotc_conv_direct      one input channel per group (depthwise): direct loops,
 *                         parallel over blocks of channels or of output rows; 3x3
 *                         kernels on AVX-512 by masked vectors of 16 output columns
 *                         (stride-1 planes of 12 columns or more three rows at a time,
 *                         input rows slid a lane each way), on AVX2 by vectors of 8
 *                         over zero-bordered bands, and on small (AVX2) or small
 *                         stride-2 (AVX-512) planes a channel to each lane;
 *   aotc_conv_implicit    2-D convs, channels as GEMM rows: the tiles read the unfolded
 *                         matrix where it lies, in zero-bordered phase planes of X;
 *   aotc_conv_pixels      2-D convs with weights known at compile time: tiles of output
 *                         pixels over the same planes against the packed weights,
 *                         stored transposed from registers;
 *   aotc_conv_im2col      output pixels cut into column blocks, each block unfolded
 *                         into scratch (im2col) straight into the GEMM's packed-B
 *                         layout and multiplied by one aotc_sgemm_packed;
 *   aotc_conv_rows        the deep layers: pixels as GEMM rows against weights packed
 *                         at compile time, the product stored transposed (below).
 * (Fast mode's 3x3 stride-1 convs by Winograd's F(2x2, 3x3): aotc_conv_winograd.h.)
 * Every output is a sum over (input channel, kz, ky, kx) in that order, plus the bias,
 * plus the residual (a tensor shaped as y, or NULL: a fused Add), then the activation
 * `act` (NULL: none; aotc_gemm.h), applied by the thread that computed the value, right
 * after it; no work split depends on the thread count. The residual must not overlap
 * y, except that it may be y itself for aotc_conv_rows, and for the other GEMM kernels
 * when K = Cin_g * kernel volume is one K-block (AOTC_SGEMM_KC): those read each
 * residual element before writing y's. Never for aotc_conv_direct (it adds the residual
 * to the sums already in y).
 *
 * Exact mode (AOTC_EXACT, built with -ffp-contract=off): each output is one float
 * accumulator starting at +0, plus each product w * x (rounded, then added) over the
 * taps in (input channel, kz, ky, kx) order, then + bias, then the activation; SIMD
 * runs only across independent outputs. The GEMM kernels keep that order in their own
 * exact path (aotc_gemm.h); the direct kernels skip taps in the padding. NaN results
 * are written as AOTC_CANON_F32. Which sums are formed, in which order, is a function
 * of the shape, never of the target, so the bits are the same on every path. */
#ifndef AOTC_CONV_H_
#define AOTC_CONV_H_

#include "aotc_base.h"
#include "aotc_threads.h"
#include "aotc_gemm.h"
#include "aotc_vtranspose.h"

typedef struct aotc_conv_geom {
  int64_t batch, group, cin_g, cout_g;
  int64_t in[3], out[3], kernel[3], stride[3], dilation[3];
  int64_t pad[3];   /* leading pads; trailing pads only shape `out` */
} aotc_conv_geom;

AOTC_FN int64_t aotc_conv_volume_(const int64_t *dims) { return dims[0] * dims[1] * dims[2]; }

/* 1x1, stride 1, unpadded: X itself is what the kernels would unfold or copy (the rows
 * kernel's transposed A, the pixels kernel's phase planes). */
AOTC_FN int aotc_conv_reads_x_(const aotc_conv_geom *g) {
  int d;
  for (d = 0; d < 3; d++)
    if (g->kernel[d] != 1 || g->stride[d] != 1 || g->pad[d] != 0 || g->in[d] != g->out[d]) return 0;
  return 1;
}

/* Where group grp of image n starts in X, and in Y (and a residual laid out as Y). */
AOTC_FN int64_t aotc_conv_x_at_(const aotc_conv_geom *g, int64_t n, int64_t grp) {
  return (n * g->group + grp) * g->cin_g * aotc_conv_volume_(g->in);
}
AOTC_FN int64_t aotc_conv_y_at_(const aotc_conv_geom *g, int64_t n, int64_t grp) {
  return (n * g->group + grp) * g->cout_g * aotc_conv_volume_(g->out);
}

/* ---- entry points: the kernels of the comment at the top ----------------------------- */

/* w_panel_rows: 0, W as it is, or W's [Cout_g, Cin_g] of each group in the GEMM's
 * packed-A layout (aotc_sgemm_a_panel_) with even panels of at most so many rows,
 * packed at compile time for the target's path (aotc/ops/matmul.py's pack_a). Where
 * that is AOTC_SGEMM_MR, the GEMM reads it as its packed A (and the scratch needs no
 * room for packing A); in a build for another path, the tiles' panels are made from it. */
AOTC_ENGINE_FN void aotc_conv_pointwise(aotc_pool *pool, const aotc_conv_geom *g, const float *x,
                                        const float *w, int64_t w_panel_rows, const float *bias,
                                        const float *residual, float *y, const aotc_activation *act,
                                        unsigned char *scratch);

AOTC_ENGINE_FN void aotc_conv_direct(aotc_pool *pool, const aotc_conv_geom *g, const float *x,
                                     const float *w, const float *bias, const float *residual, float *y,
                                     const aotc_activation *act);

/* Output pixels in blocks of block_cols; each block unfolded into scratch and multiplied.
 * scratch: aotc_conv_im2col_bytes(g, block_cols), then
 * aotc_sgemm_packed_scratch_bytes(Cout_g, block_cols, K). */
AOTC_ENGINE_FN void aotc_conv_im2col(aotc_pool *pool, const aotc_conv_geom *g, int64_t block_cols,
                                     const float *x, const float *w, const float *bias,
                                     const float *residual, float *y, const aotc_activation *act,
                                     unsigned char *scratch);

AOTC_ENGINE_FN void aotc_conv_implicit(aotc_pool *pool, const aotc_conv_geom *g, const float *x,
                                       const float *w, const float *bias, const float *residual,
                                       float *y, const aotc_activation *act, unsigned char *scratch);

/* Output pixels as tile rows over phase planes of X, against weights packed at compile
 * time: `w` is W^T [K, Cout_g] per group in the packed-B layout (aotc_sgemm_packed_b_floats
 * apart). Scratch: aotc_conv_pixels_scratch_bytes(g). `residual`: NULL, or a tensor
 * shaped as y (it may be y itself) added before `act`. */
AOTC_ENGINE_FN void aotc_conv_pixels(aotc_pool *pool, const aotc_conv_geom *g, const float *x,
                                     const float *w, const float *bias, const float *residual,
                                     float *y, const aotc_activation *act, unsigned char *scratch);

/* Scratch, in order: the product tile [tile, Cout_g]; the unfolded tile, K * tile
 * floats (none when X is read itself); the GEMM's own scratch (when X is read itself:
 * aotc_sgemm_packed_scratch_bytes(tile, Cout_g, K), or aotc_sgemm_scratch_bytes for
 * run-time weights; otherwise, A coming packed, only the latter's packed B for run-time
 * weights); each 64-byte aligned. `w_packed`: w is W^T [K, Cout_g] per group
 * in the packed-B layout (aotc_sgemm_packed_b_floats apart); otherwise w is the ONNX
 * weight tensor. `residual`: NULL, or a tensor shaped as y added before `act`. */
AOTC_ENGINE_FN void aotc_conv_rows(aotc_pool *pool, const aotc_conv_geom *g, int64_t tile,
                                   const float *x, const float *w, int w_packed, const float *bias,
                                   const float *residual, float *y, const aotc_activation *act,
                                   unsigned char *scratch);

#ifndef AOTC_ENGINE_EXTERN   /* the bodies: here, or in the engine object (aotc_base.h) */

/* Exact mode: NaN results as the one canonical NaN (a no-op otherwise). */
AOTC_FN void aotc_conv_canon_(float *y, int64_t n) {
#ifdef AOTC_EXACT
  int64_t i;
  for (i = 0; i < n; i++) y[i] = AOTC_CANON_F32(y[i]);
#else
  (void)y;
  (void)n;
#endif
}

/* y[i] = act(s[i] + r[i]) for i < n: a residual added after the sum and bias s. y may
 * be s or r (each element is read before it is written). */
AOTC_FN void aotc_conv_add_residual_(float *y, const float *s, const float *r, int64_t n,
                                     const aotc_activation *act) {
  int64_t i;
  for (i = 0; i < n; i++) y[i] = AOTC_CANON_F32(s[i] + r[i]);
  aotc_activation_apply(act, y, n);
}

#if defined(AOTC_SGEMM_PATH_AVX512)
/* One output channel's run of n <= 16 pixels at y from its sums: + its run of the
 * residual (NULL: none), NaN canonical in exact mode, then the activation, Relu and
 * Clip in registers, others after the store. The kernels that store transposed tiles
 * (rows, pixels) end each channel's run here. */
AOTC_INLINE_ALWAYS void aotc_conv_store_run_(float *y, __m512 sum, const float *residual, int64_t n,
                                             const aotc_activation *act) {
  const __mmask16 m = aotc_v_mask_(n);
  const __m512 lo = _mm512_set1_ps(act ? act->a : 0.0f), hi = _mm512_set1_ps(act ? act->b : 0.0f);
  if (residual) sum = _mm512_add_ps(sum, _mm512_maskz_loadu_ps(m, residual));
  _mm512_mask_storeu_ps(y, m, aotc_sgemm_act_v_(AOTC_V_FINISH(sum), aotc_sgemm_act_in_registers_(act), lo, hi));
  if (!aotc_sgemm_act_all_in_registers_(act)) aotc_activation_apply(act, y, n);
}
#endif

/* The smallest o >= 0 with o * stride + offset >= bound (stride > 0). */
AOTC_FN int64_t aotc_conv_first_at_least_(int64_t offset, int64_t stride, int64_t bound) {
  return offset >= bound ? 0 : (bound - offset + stride - 1) / stride;
}

/* Output columns [lo, hi) within [0, n) whose input column o*stride+offset is in [0, width). */
AOTC_FN void aotc_conv_valid_range_(int64_t offset, int64_t stride, int64_t width, int64_t n,
                                    int64_t *lo, int64_t *hi) {
  *lo = AOTC_MIN(aotc_conv_first_at_least_(offset, stride, 0), n);
  *hi = AOTC_MAX(AOTC_MIN(aotc_conv_first_at_least_(offset, stride, width), n), *lo);
}

/* ---- 1x1, stride 1, no pad --------------------------------------------------------- */

/* A of M rows and K columns packed with even panels of at most panel_rows rows. */
typedef struct {
  const float *a;
  int64_t M, K, panel_rows;
} aotc_conv_packed_a_;

/* The GEMM's aotc_sgemm_a_maker over an A packed for another path's panels: rows
 * [i0, i0 + rows) of K-block pc, k-major, each from the panel that holds it. */
AOTC_FN void aotc_conv_repanel_a_(const void *ctx, float *dst, int64_t pc, int64_t kc, int64_t i0, int64_t rows) {
  const aotc_conv_packed_a_ *p = (const aotc_conv_packed_a_ *)ctx;
  int64_t i, k, r, start, height;
  const float *src;
  for (i = 0; i < rows; i++) {
    r = i0 + i;
    aotc_sgemm_even_panel_(p->M, p->panel_rows, aotc_sgemm_even_panel_of_(p->M, p->panel_rows, r), &start, &height);
    src = p->a + aotc_sgemm_a_panel_(p->M, p->K, pc, start) + (r - start);
    for (k = 0; k < kc; k++) dst[k * rows + i] = src[k * height];
  }
}

AOTC_ENGINE_FN void aotc_conv_pointwise(aotc_pool *pool, const aotc_conv_geom *g, const float *x,
                                        const float *w, int64_t w_panel_rows, const float *bias,
                                        const float *residual, float *y, const aotc_activation *act,
                                        unsigned char *scratch) {
  int64_t pixels = aotc_conv_volume_(g->in), n, grp;
  for (n = 0; n < g->batch; n++)
    for (grp = 0; grp < g->group; grp++) {
      int64_t yoff = aotc_conv_y_at_(g, n, grp);
      const float *wg = w + grp * g->cout_g * g->cin_g;   /* (packed A takes as many floats) */
      const aotc_conv_packed_a_ packed = {.a = wg, .M = g->cout_g, .K = g->cin_g, .panel_rows = w_panel_rows};
      const aotc_sgemm_a_maker repanel = {.fn = aotc_conv_repanel_a_, .ctx = &packed};
      const int ours = w_panel_rows == AOTC_SGEMM_MR;
      const aotc_sgemm_extras extras = {.packed_a = ours ? wg : NULL,
                                        .make_a = w_panel_rows && !ours ? &repanel : NULL,
                                        .residual = residual ? residual + yoff : NULL, .columns_first = 1};
      aotc_sgemm_run_(pool, g->cout_g, pixels, g->cin_g, wg, g->cin_g, 0,
                      x + aotc_conv_x_at_(g, n, grp), pixels, 0, NULL, y + yoff, pixels,
                      bias ? bias + grp * g->cout_g : NULL, NULL, act, &extras, scratch);
    }
}

/* ---- one input channel per group: direct ------------------------------------------- */

typedef struct {
  const aotc_conv_geom *g;
  const float *x, *w, *bias;
  const float *residual;        /* NULL, or added after the planes, then res_act */
  const aotc_activation *act, *res_act;
  float *y;
  int64_t rows_per_task, channels_per_task, channel_tasks;   /* a task: channels x rows */
  int64_t inner_lo, inner_hi;   /* output columns where every kx tap is inside the row */
  const struct aotc_conv_flat_ *flat;   /* AVX-512 3x3 planes, NULL: row by row */
  int slide;                            /* AVX-512 3x3 stride-1 planes by sliding rows */
  const struct aotc_conv_s2_ *s2;       /* AVX-512 3x3 stride-2 rows, NULL: the row kernel */
  const struct aotc_conv_band_ *band;   /* 3x3 over zero-bordered bands, NULL: the row kernel */
  const struct aotc_conv_lanes_ *lanes; /* 3x3 small planes, AOTC_VW channels at once, or NULL */
} aotc_conv_direct_args_;

/* yrow[ow] += sum over kx in order of wx[kx] * src[ow * sw + kx * dw - pw], for the
 * columns [ow0, ow1) where every tap is inside the input row. */
AOTC_FN void aotc_conv_direct_interior_(const aotc_conv_geom *g, const float *AOTC_RESTRICT src,
                                        const float *AOTC_RESTRICT wx,
                                        float *AOTC_RESTRICT yrow, int64_t ow0, int64_t ow1) {
  int64_t sw = g->stride[2], dw = g->dilation[2], kx, ow;
  const float *s = src + (ow0 * sw - g->pad[2]);   /* in range: ow0 is interior */
  float *y = yrow + ow0;
  int64_t n = ow1 - ow0;
  if (g->kernel[2] == 3) {   /* the common case, fused so each output is loaded once */
    float w0 = wx[0], w1 = wx[1], w2 = wx[2];
    if (sw == 1 && dw == 1) {
      for (ow = 0; ow < n; ow++) {
        float acc = y[ow];
        acc += w0 * s[ow];
        acc += w1 * s[ow + 1];
        acc += w2 * s[ow + 2];
        y[ow] = acc;
      }
    } else {
      for (ow = 0; ow < n; ow++) {
        float acc = y[ow];
        acc += w0 * s[ow * sw];
        acc += w1 * s[ow * sw + dw];
        acc += w2 * s[ow * sw + 2 * dw];
        y[ow] = acc;
      }
    }
    return;
  }
  for (kx = 0; kx < g->kernel[2]; kx++) {
    const float *t = s + kx * dw;
    float wv = wx[kx];
    if (sw == 1) {
      for (ow = 0; ow < n; ow++) y[ow] += wv * t[ow];
    } else {
      for (ow = 0; ow < n; ow++) y[ow] += wv * t[ow * sw];
    }
  }
}

/* One output row of a 3x3 kernel whose three input rows all exist: the nine taps in one
 * pass, in the order of the general path (0, then ky and kx in order, then the bias). */
AOTC_FN void aotc_conv_direct_row_3x3_(const aotc_conv_geom *g, const float *AOTC_RESTRICT r0,
                                       const float *AOTC_RESTRICT r1, const float *AOTC_RESTRICT r2,
                                       const float *AOTC_RESTRICT w, float bias,
                                       float *AOTC_RESTRICT yrow, int64_t inner_lo, int64_t inner_hi) {
  int64_t sw = g->stride[2], dw = g->dilation[2], pw = g->pad[2], ow, ky, kx;
  int64_t n = inner_hi - inner_lo, base = inner_lo * sw - pw;
  const float *rows[3];
  float *y = yrow + inner_lo;
  if (sw == 1 && dw == 1) {
    const float *a = r0 + base, *b = r1 + base, *c = r2 + base;
    for (ow = 0; ow < n; ow++) {
      float acc = 0.0f;
      acc += w[0] * a[ow];
      acc += w[1] * a[ow + 1];
      acc += w[2] * a[ow + 2];
      acc += w[3] * b[ow];
      acc += w[4] * b[ow + 1];
      acc += w[5] * b[ow + 2];
      acc += w[6] * c[ow];
      acc += w[7] * c[ow + 1];
      acc += w[8] * c[ow + 2];
      y[ow] = acc + bias;
    }
  } else if (sw == 2 && dw == 1) {   /* a literal stride: even/odd shuffles, no gathers */
    const float *a = r0 + base, *b = r1 + base, *c = r2 + base;
    for (ow = 0; ow < n; ow++) {
      float acc = 0.0f;
      acc += w[0] * a[2 * ow];
      acc += w[1] * a[2 * ow + 1];
      acc += w[2] * a[2 * ow + 2];
      acc += w[3] * b[2 * ow];
      acc += w[4] * b[2 * ow + 1];
      acc += w[5] * b[2 * ow + 2];
      acc += w[6] * c[2 * ow];
      acc += w[7] * c[2 * ow + 1];
      acc += w[8] * c[2 * ow + 2];
      y[ow] = acc + bias;
    }
  } else {
    const float *a = r0 + base, *b = r1 + base, *c = r2 + base;
    for (ow = 0; ow < n; ow++) {
      int64_t i = ow * sw;
      float acc = 0.0f;
      acc += w[0] * a[i];
      acc += w[1] * a[i + dw];
      acc += w[2] * a[i + 2 * dw];
      acc += w[3] * b[i];
      acc += w[4] * b[i + dw];
      acc += w[5] * b[i + 2 * dw];
      acc += w[6] * c[i];
      acc += w[7] * c[i + dw];
      acc += w[8] * c[i + 2 * dw];
      y[ow] = acc + bias;
    }
  }
  rows[0] = r0;
  rows[1] = r1;
  rows[2] = r2;
  for (ow = 0; ow < g->out[2]; ow++) {   /* the border columns, tap by tap */
    float acc = 0.0f;
    if (ow == inner_lo && n > 0) ow = inner_hi;
    if (ow >= g->out[2]) break;
    for (ky = 0; ky < 3; ky++)
      for (kx = 0; kx < 3; kx++) {
        int64_t iw = ow * sw + kx * dw - pw;
        if (iw >= 0 && iw < g->in[2]) acc += w[ky * 3 + kx] * rows[ky][iw];
      }
    yrow[ow] = acc + bias;
  }
}

/* One output row (fixed od, oh) of one output channel. */
AOTC_FN void aotc_conv_direct_row_(const aotc_conv_geom *g, const float *AOTC_RESTRICT plane,
                                   const float *AOTC_RESTRICT wk, float bias,
                                   float *AOTC_RESTRICT yrow, int64_t od, int64_t oh,
                                   int64_t inner_lo, int64_t inner_hi) {
  int64_t kz, ky, kx, ow, ow_n = g->out[2], kw = g->kernel[2];
  int64_t sw = g->stride[2], dw = g->dilation[2], pw = g->pad[2];
  if (g->kernel[0] == 1 && g->kernel[1] == 3 && kw == 3) {
    int64_t iz = od * g->stride[0] - g->pad[0];
    int64_t iy = oh * g->stride[1] - g->pad[1], dh = g->dilation[1];
    if (iz >= 0 && iz < g->in[0] && iy >= 0 && iy + 2 * dh < g->in[1]) {
      const float *r0 = plane + (iz * g->in[1] + iy) * g->in[2];
      aotc_conv_direct_row_3x3_(g, r0, r0 + dh * g->in[2], r0 + 2 * dh * g->in[2], wk, bias,
                                yrow, inner_lo, inner_hi);
      return;
    }
  }
  for (ow = 0; ow < ow_n; ow++) yrow[ow] = 0.0f;
  for (kz = 0; kz < g->kernel[0]; kz++) {
    int64_t iz = od * g->stride[0] - g->pad[0] + kz * g->dilation[0];
    if (iz < 0 || iz >= g->in[0]) continue;
    for (ky = 0; ky < g->kernel[1]; ky++) {
      int64_t iy = oh * g->stride[1] - g->pad[1] + ky * g->dilation[1];
      const float *src, *wx;
      if (iy < 0 || iy >= g->in[1]) continue;
      src = plane + (iz * g->in[1] + iy) * g->in[2];
      wx = wk + (kz * g->kernel[1] + ky) * kw;
      if (inner_hi > inner_lo) aotc_conv_direct_interior_(g, src, wx, yrow, inner_lo, inner_hi);
      for (ow = 0; ow < ow_n; ow++) {   /* the border columns, tap by tap */
        float acc;
        if (ow == inner_lo && inner_hi > inner_lo) ow = inner_hi;
        if (ow >= ow_n) break;
        acc = yrow[ow];
        for (kx = 0; kx < kw; kx++) {
          int64_t iw = ow * sw + kx * dw - pw;
          if (iw >= 0 && iw < g->in[2]) acc += wx[kx] * src[iw];
        }
        yrow[ow] = acc;
      }
    }
  }
  for (ow = 0; ow < ow_n; ow++) yrow[ow] += bias;
}

#if defined(AOTC_SGEMM_PATH_AVX512)
/* Lane indices 0, 2, .., 30: _mm512_permutex2var_ps(lo, these, hi) takes the even
 * elements of the 32 in lo and hi (with 1 added to each, the odd ones). */
AOTC_INLINE_ALWAYS __m512i aotc_conv_even_lanes_(void) {
  return _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
}

/* ---- 3x3 depthwise planes, AVX-512: 16 output pixels a vector ----------------------- */

/* The row kernel leaves planes of 7 to 56 columns mostly to loop set-up and scalar
 * border code, and stride 2 to per-element shuffles. Here each channel's output plane
 * is one flat run of pixels, 16 to a vector, and each of the nine taps one masked load
 * at a fixed offset from the pixel: at stride 1 from the input plane itself (when the
 * output has its height and width), at stride 2 from four phase planes copied per
 * channel, q[py][px][i][j] = x[2i + py][2j + px]. The run's rows are `width` apart:
 * the output's width, or at stride 2 the phase planes' when that is wider (the output
 * then goes through a buffer). A lane whose tap falls in the padding is masked out of
 * that tap's add, so every output sums the same products in the same order as the row
 * kernel (from +0, taps in (ky, kx) order, then the bias) and exact mode keeps its
 * bits. The masks depend on the shape only: they are made once per call, for all
 * channels. Relu and Clip run in registers. */
/* Pixels of a run, at most (larger planes go row by row): MobileNetV2's stride-1 112x112
 * planes ran 1.4x faster here than row by row. The masks take 2 bytes per 16 pixels. */
#define AOTC_CONV_FLAT_PIXELS 16384
#define AOTC_CONV_FLAT_PHASES 4096   /* floats of the four phase planes (on the stack) */

typedef struct aotc_conv_flat_ {
  int64_t stride, width, phase_rows, chunks;
  int64_t offset[9];   /* of tap t's input from the output pixel, in its plane */
  int phase[9];        /* tap t's phase plane at stride 2: row parity * 2 + column parity */
  __mmask16 mask[9][AOTC_CONV_FLAT_PIXELS / 16];   /* [tap][chunk]: lanes whose tap is inside */
  unsigned char inside[AOTC_CONV_FLAT_PIXELS / 16];   /* [chunk]: no lane of a tap outside */
  int any_inside;
} aotc_conv_flat_;

/* Rows at least this wide have runs of chunks inside (narrower planes ran 3-16% slower
 * when their few inner chunks went apart from the others). */
#define AOTC_CONV_FLAT_INNER_WIDTH 56

/* Lanes [lo, hi) of 16, clipped. */
AOTC_INLINE_ALWAYS __mmask16 aotc_conv_lane_mask_(int64_t lo, int64_t hi) {
  lo = AOTC_MAX(lo, 0);
  hi = AOTC_MIN(hi, 16);
  return hi <= lo ? (__mmask16)0 : (__mmask16)(((1u << hi) - 1u) & ~((1u << lo) - 1u));
}

/* Sets bits [lo, hi) of a bitmap of 16-bit words (0 <= lo): the words in between
 * whole (bit by bit, the plan of a 112x112 plane took a quarter of an 8-channel
 * conv's time). */
AOTC_FN void aotc_conv_set_bits_(__mmask16 *words, int64_t lo, int64_t hi) {
  int64_t first = lo / 16, last = (hi - 1) / 16, i;
  if (hi <= lo) return;
  if (first == last) {
    words[first] = (__mmask16)(words[first] | aotc_conv_lane_mask_(lo % 16, hi - 16 * first));
    return;
  }
  words[first] = (__mmask16)(words[first] | aotc_conv_lane_mask_(lo % 16, 16));
  for (i = first + 1; i < last; i++) words[i] = (__mmask16)0xFFFF;
  words[last] = (__mmask16)(words[last] | aotc_conv_lane_mask_(0, hi - 16 * last));
}

/* Plans the flat kernel for this shape; 0 when it does not apply. */
AOTC_FN int aotc_conv_flat_plan_(const aotc_conv_geom *g, aotc_conv_flat_ *f) {
  const int64_t in_h = g->in[1], in_w = g->in[2], oh_n = g->out[1], ow_n = g->out[2];
  const int64_t s = g->stride[2];
  int64_t t, oh, c;
  if (!(g->kernel[0] == 1 && g->in[0] == 1 && g->out[0] == 1 && g->kernel[1] == 3 &&
        g->kernel[2] == 3 && g->dilation[1] == 1 && g->dilation[2] == 1 && g->stride[1] == s))
    return 0;
  f->stride = s;
  if (s == 1) {
    if (oh_n != in_h || ow_n != in_w) return 0;
    f->width = ow_n;
    f->phase_rows = 0;
  } else if (s == 2) {   /* every input row and column has its place in a phase plane */
    f->width = AOTC_MAX(ow_n, (in_w + 1) / 2);
    f->phase_rows = AOTC_MAX(oh_n, (in_h + 1) / 2);
    if (4 * f->phase_rows * f->width > AOTC_CONV_FLAT_PHASES) return 0;
  } else {
    return 0;
  }
  if (oh_n * f->width > AOTC_CONV_FLAT_PIXELS) return 0;
  f->chunks = (oh_n * f->width + 15) / 16;
  for (t = 0; t < 9; t++) {
    const int64_t ry = t / 3 - g->pad[1], rx = t % 3 - g->pad[2];   /* input - s * output */
    const int64_t py = ry & (s - 1), px = rx & (s - 1);   /* the parities at stride 2 */
    int64_t lo, hi;
    aotc_conv_valid_range_(rx, s, in_w, ow_n, &lo, &hi);
    f->offset[t] = (ry - py) / s * f->width + (rx - px) / s;
    f->phase[t] = (int)(py * 2 + px);
    memset(f->mask[t], 0, (size_t)f->chunks * sizeof(__mmask16));
    for (oh = 0; oh < oh_n; oh++) {
      const int64_t iy = oh * s + ry;
      if (iy >= 0 && iy < in_h && hi > lo)
        aotc_conv_set_bits_(f->mask[t], oh * f->width + lo, oh * f->width + hi);
    }
  }
  f->any_inside = 0;
  for (c = 0; c < f->chunks; c++) {
    f->inside[c] = f->width >= AOTC_CONV_FLAT_INNER_WIDTH;
    for (t = 0; t < 9; t++) f->inside[c] = (unsigned char)(f->inside[c] && f->mask[t][c] == 0xFFFF);
    f->any_inside |= f->inside[c];
  }
  return 1;
}

/* The four phase planes of one stride-2 input plane, each phase_rows x width. */
AOTC_FN void aotc_conv_phases_(const aotc_conv_geom *g, const aotc_conv_flat_ *f,
                               const float *plane, float *q) {
  const int64_t in_h = g->in[1], in_w = g->in[2], pw = f->width, n = f->phase_rows * pw;
  const __m512i evens = aotc_conv_even_lanes_();
  const __m512i odds = _mm512_add_epi32(evens, _mm512_set1_epi32(1));
  int64_t iy, j;
  for (iy = 0; iy < in_h; iy++) {
    const float *row = plane + iy * in_w;
    float *even = q + (iy & 1) * 2 * n + (iy >> 1) * pw, *odd = even + n;
    for (j = 0; j < pw; j += 16) {
      const __m512 lo = _mm512_maskz_loadu_ps(aotc_v_mask_(in_w - 2 * j), row + 2 * j);
      const __m512 hi = _mm512_maskz_loadu_ps(aotc_v_mask_(in_w - 2 * j - 16), row + 2 * j + 16);
      _mm512_mask_storeu_ps(even + j, aotc_v_mask_(pw - j), _mm512_permutex2var_ps(lo, evens, hi));
      _mm512_mask_storeu_ps(odd + j, aotc_v_mask_(pw - j), _mm512_permutex2var_ps(lo, odds, hi));
    }
  }
}

AOTC_INLINE_ALWAYS __m512 aotc_conv_flat_tap_(__m512 acc, __mmask16 m, __m512 w, __m512 x) {
#ifdef AOTC_EXACT
  return _mm512_mask_add_ps(acc, m, acc, _mm512_mul_ps(w, x));
#else
  return _mm512_mask3_fmadd_ps(w, x, acc, m);
#endif
}

/* The bias, then Relu or Clip in registers as the GEMM tile's epilogue applies them
 * (the activations' bits, NaN included); other activations run after the store. */
typedef struct {
  int act, in_registers;   /* act: AOTC_SGEMM_ACT_* */
  __m512 bias, lo, hi;
} aotc_conv_dw_epilogue_;

AOTC_FN aotc_conv_dw_epilogue_ aotc_conv_dw_epilogue_init_(const aotc_activation *act, float bias) {
  aotc_conv_dw_epilogue_ e;
  e.act = aotc_sgemm_act_in_registers_(act);
  e.in_registers = aotc_sgemm_act_all_in_registers_(act);
  e.bias = _mm512_set1_ps(bias);
  e.lo = _mm512_set1_ps(e.act == AOTC_SGEMM_ACT_CLIP ? act->a : 0.0f);
  e.hi = _mm512_set1_ps(e.act == AOTC_SGEMM_ACT_CLIP ? act->b : 0.0f);
  return e;
}

AOTC_INLINE_ALWAYS __m512 aotc_conv_dw_finish_(const aotc_conv_dw_epilogue_ *e, __m512 acc) {
  acc = _mm512_add_ps(acc, e->bias);
  return e->in_registers ? aotc_sgemm_act_v_(AOTC_V_FINISH(acc), e->act, e->lo, e->hi) : acc;
}

/* Chunks [c0, c1) of the run (16 pixels each) into out, from the taps' inputs
 * src[0..9). Inlined with `inside` constant: chunks whose taps all fall inside the
 * plane go without masks (the same sums: every lane of every tap counts). With nine
 * mask moves per chunk, MobileNetV2's 112x112 stride-1 conv took 0.13 ms, without
 * them in its inner chunks 0.12. */
AOTC_INLINE_ALWAYS void aotc_conv_flat_run_(const aotc_conv_flat_ *f, int64_t c0, int64_t c1,
                                            const float *const *src, const __m512 *wv,
                                            const aotc_conv_dw_epilogue_ *e, float *out, int64_t pixels,
                                            int inside) {
  int64_t c;
  for (c = c0; c < c1; c++) {
    __m512 acc = _mm512_setzero_ps();
    int t;
    for (t = 0; t < 9; t++) {
      if (inside) {
        acc = AOTC_V_MADD(wv[t], _mm512_loadu_ps(src[t] + c * 16), acc);
      } else {
        const __mmask16 m = f->mask[t][c];
        acc = aotc_conv_flat_tap_(acc, m, wv[t], _mm512_maskz_loadu_ps(m, src[t] + c * 16));
      }
    }
    _mm512_mask_storeu_ps(out + c * 16, aotc_v_mask_(pixels - c * 16), aotc_conv_dw_finish_(e, acc));
  }
}

/* One channel's output plane y from its input plane. */
AOTC_INLINE_ALWAYS void aotc_conv_flat_plane_(const aotc_conv_geom *g, const aotc_conv_flat_ *f,
                                              const float *plane, const float *w, float bias, float *y,
                                              const aotc_activation *act) {
  float phases[AOTC_CONV_FLAT_PHASES] AOTC_ALIGNED(64);
  float run[AOTC_CONV_FLAT_PHASES / 4] AOTC_ALIGNED(64);   /* when width > out_w */
  const int64_t oh_n = g->out[1], ow_n = g->out[2], pixels = oh_n * f->width;
  float *out = f->width == ow_n ? y : run;
  const aotc_conv_dw_epilogue_ e = aotc_conv_dw_epilogue_init_(act, bias);
  const float *src[9];
  __m512 wv[9];
  int64_t t, c;
  if (f->stride == 2) aotc_conv_phases_(g, f, plane, phases);
  for (t = 0; t < 9; t++) {
    wv[t] = _mm512_set1_ps(w[t]);
    src[t] = (f->stride == 2 ? phases + f->phase[t] * f->phase_rows * f->width : plane) + f->offset[t];
  }
  if (!f->any_inside)   /* (looking for runs cost 7x7 planes 10%) */
    aotc_conv_flat_run_(f, 0, f->chunks, src, wv, &e, out, pixels, 0);
  for (c = 0; c < f->chunks && f->any_inside;) {   /* runs of chunks inside or not */
    const int inside = f->inside[c];
    int64_t end = c + 1;
    while (end < f->chunks && f->inside[end] == inside) end++;
    if (inside) aotc_conv_flat_run_(f, c, end, src, wv, &e, out, pixels, 1);
    else aotc_conv_flat_run_(f, c, end, src, wv, &e, out, pixels, 0);
    c = end;
  }
  if (out != y) {   /* rows width apart -> out_w apart */
    int64_t oh, j;
    for (oh = 0; oh < oh_n; oh++)
      for (j = 0; j < ow_n; j += 16)
        _mm512_mask_storeu_ps(y + oh * ow_n + j, aotc_v_mask_(ow_n - j),
                              _mm512_maskz_loadu_ps(aotc_v_mask_(ow_n - j), run + oh * f->width + j));
  }
  if (!e.in_registers) {
    aotc_activation_apply(act, y, oh_n * ow_n);
    aotc_conv_canon_(y, oh_n * ow_n);
  }
}

/* Stride-2 planes too large for the phase planes (MobileNetV2's 112x112 -> 56x56) go
 * row by row: 16 output columns a vector, each row of taps two 32-column windows of
 * the input row split by permutes into the even and odd columns, the padding masked
 * out as in the flat kernel (the same sums in the same order). The masks depend on
 * the column block only: made once per call. */
#define AOTC_CONV_S2_BLOCKS 64   /* 16-column blocks of an output row, at most */

typedef struct aotc_conv_s2_ {
  int64_t blocks;
  __mmask16 tap[AOTC_CONV_S2_BLOCKS][3];    /* lanes whose tap kx is inside the row */
  __mmask16 load[AOTC_CONV_S2_BLOCKS][4];   /* the windows' columns inside the row */
} aotc_conv_s2_;

AOTC_FN int aotc_conv_s2_plan_(const aotc_conv_geom *g, aotc_conv_s2_ *s2) {
  const int64_t in_w = g->in[2], ow_n = g->out[2];
  int64_t b, kx;
  if (!(g->kernel[0] == 1 && g->in[0] == 1 && g->out[0] == 1 && g->kernel[1] == 3 && g->kernel[2] == 3 &&
        g->dilation[1] == 1 && g->dilation[2] == 1 && g->stride[2] == 2 &&
        ow_n <= 16 * AOTC_CONV_S2_BLOCKS))
    return 0;
  s2->blocks = (ow_n + 15) / 16;
  for (kx = 0; kx < 3; kx++) {
    int64_t lo, hi;
    aotc_conv_valid_range_(kx - g->pad[2], 2, in_w, ow_n, &lo, &hi);
    for (b = 0; b < s2->blocks; b++) s2->tap[b][kx] = aotc_conv_lane_mask_(lo - 16 * b, hi - 16 * b);
  }
  for (b = 0; b < s2->blocks; b++) {
    const int64_t base = 32 * b - g->pad[2];   /* input column of lane 0, tap kx = 0 */
    int w;
    for (w = 0; w < 4; w++) {   /* windows at base and base + 2, 16 + 16 columns each */
      const int64_t c = base + (w / 2) * 2 + (w % 2) * 16;
      s2->load[b][w] = aotc_conv_lane_mask_(-c, in_w - c);
    }
  }
  return 1;
}

/* Whether block b's taps and windows all lie inside the row: no masks at all. */
AOTC_FN int aotc_conv_s2_inside_(const aotc_conv_s2_ *s2, int64_t b) {
  int i;
  for (i = 0; i < 3; i++)
    if (s2->tap[b][i] != 0xFFFF) return 0;
  for (i = 0; i < 4; i++)
    if (s2->load[b][i] != 0xFFFF) return 0;
  return 1;
}

/* The three taps of input row `row` (from its column -pad on) for block b: its two
 * 32-column windows split by permutes into the even and odd columns, the columns
 * outside the row masked to zero unless the block is `inside`. */
AOTC_INLINE_ALWAYS void aotc_conv_s2_taps_(const aotc_conv_s2_ *s2, int64_t b, const float *row, int inside,
                                           __m512 *x) {
  const __m512i evens = aotc_conv_even_lanes_();
  const __m512i odds = _mm512_add_epi32(evens, _mm512_set1_epi32(1));
  const __mmask16 *l = s2->load[b];
  __m512 a0, a1, b0, b1;
  row += 32 * b;
  if (inside) {
    a0 = _mm512_loadu_ps(row), a1 = _mm512_loadu_ps(row + 16);
    b0 = _mm512_loadu_ps(row + 2), b1 = _mm512_loadu_ps(row + 18);
  } else {
    a0 = _mm512_maskz_loadu_ps(l[0], row), a1 = _mm512_maskz_loadu_ps(l[1], row + 16);
    b0 = _mm512_maskz_loadu_ps(l[2], row + 2), b1 = _mm512_maskz_loadu_ps(l[3], row + 18);
  }
  x[0] = _mm512_permutex2var_ps(a0, evens, a1);
  x[1] = _mm512_permutex2var_ps(a0, odds, a1);
  x[2] = _mm512_permutex2var_ps(b0, evens, b1);
}

/* acc + the three taps x of one row with weights w[0..3), kx in order; outside the
 * block's `inside` runs, the lanes whose tap falls in the padding keep acc. */
AOTC_INLINE_ALWAYS __m512 aotc_conv_s2_add_row_(const aotc_conv_s2_ *s2, int64_t b, __m512 acc,
                                                const __m512 *w, const __m512 *x, int inside) {
  const __mmask16 *m = s2->tap[b];
  int kx;
  for (kx = 0; kx < 3; kx++)
    acc = inside ? AOTC_V_MADD(w[kx], x[kx], acc) : aotc_conv_flat_tap_(acc, m[kx], w[kx], x[kx]);
  return acc;
}

/* The sums of block b (16 output columns) over `n` rows of taps from input rows
 * rows[0..n) (each from its column -pad on) with weights wv[0 .. 3 n). Inlined with n
 * and `inside` constant: the three rows of an inner output row unrolled, and no masks
 * where no window or tap reaches past the row (the same sums). With the rows looped
 * over and seven masks moved per block, MobileNetV2's 112 -> 56 conv (96 channels)
 * took 0.25 ms alone and 0.23 in the model; so, 0.17 and 0.16. */
AOTC_INLINE_ALWAYS __m512 aotc_conv_s2_block_(const aotc_conv_s2_ *s2, int64_t b, const float *const *rows,
                                              int n, const __m512 *wv, int inside) {
  __m512 acc = _mm512_setzero_ps(), x[3];
  int i;
  for (i = 0; i < n; i++) {
    aotc_conv_s2_taps_(s2, b, rows[i], inside, x);
    acc = aotc_conv_s2_add_row_(s2, b, acc, wv + 3 * i, x, inside);
  }
  return acc;
}

/* The sums of block b of two output rows at once, both with all three rows of taps:
 * input rows rows[0..5), rows 0-2 the first output row's and 2-4 the second's, so row
 * 2's taps are loaded and split once for both, and the two sums' chains of nine FMAs
 * run side by side. Each output's taps still add in (ky, kx) order: the same sums.
 * MobileNetV2's 112 -> 56 conv (96 channels) alone took 0.88x the time of one row at a
 * time (one thread; 0.89-0.92x in the model). */
AOTC_INLINE_ALWAYS void aotc_conv_s2_block_pair_(const aotc_conv_s2_ *s2, int64_t b, const float *const *rows,
                                                 const __m512 *wv, int inside, __m512 *acc) {
  __m512 x[3];
  int i, o;
  acc[0] = acc[1] = _mm512_setzero_ps();
  for (i = 0; i < 5; i++) {
    aotc_conv_s2_taps_(s2, b, rows[i], inside, x);
    for (o = 0; o < 2; o++)   /* input row i is tap row i - 2 o of output row o */
      if (i - 2 * o >= 0 && i - 2 * o <= 2)
        acc[o] = aotc_conv_s2_add_row_(s2, b, acc[o], wv + 3 * (i - 2 * o), x, inside);
  }
}

/* Output rows [r0, r1) of one channel (y: its output plane). Compiled on its own, as
 * aotc_conv_planes_ (below) is. */
AOTC_NOINLINE void aotc_conv_s2_rows_(const aotc_conv_geom *g, const aotc_conv_s2_ *s2, const float *plane,
                                      const float *w, float bias, float *y, int64_t r0, int64_t r1,
                                      const aotc_activation *act) {
  const int64_t in_h = g->in[1], in_w = g->in[2], ow_n = g->out[2];
  const aotc_conv_dw_epilogue_ e = aotc_conv_dw_epilogue_init_(act, bias);
  int64_t inside_lo = 0, inside_hi, r, b, t;   /* blocks [inside_lo, inside_hi): no masks */
  __m512 wv[9];
  while (inside_lo < s2->blocks && !aotc_conv_s2_inside_(s2, inside_lo)) inside_lo++;
  for (inside_hi = inside_lo; inside_hi < s2->blocks && aotc_conv_s2_inside_(s2, inside_hi);) inside_hi++;
  for (t = 0; t < 9; t++) wv[t] = _mm512_set1_ps(w[t]);
  for (r = r0; r < r1;) {
    const int64_t iy0 = r * g->stride[1] - g->pad[1];
    const int ky0 = (int)AOTC_MAX(0, -iy0), ky1 = (int)AOTC_MIN(3, in_h - iy0);   /* rows inside */
    /* rows r and r + 1 at once where both have all their input rows */
    const int pair = g->stride[1] == 2 && r + 1 < r1 && iy0 >= 0 && iy0 + 5 <= in_h;
    const int64_t in_rows = pair ? 5 : ky1 - ky0;
    /* The input rows of output row r + 2 (of a pair, those of the next pair it does not
     * share with this one), past the plane the next channel's first, fetched now:
     * without, these rows waited on memory or a shared L3 (MobileNetV2's 112 -> 56 conv,
     * 96 channels: in the model 0.33-0.86 ms without, 0.21-0.28 with; from memory
     * 0.8-1.1 ms, 0.22-0.24 with). Fetching the next plane so made the flat kernel
     * 20-40% slower: not done there. */
    const float *ahead = plane + (iy0 + 2 * g->stride[1] + pair) * in_w;
    const float *rows[5];
    float *yrow = y + r * ow_n;
    int64_t q;
    int i;
    for (q = 0; q < (3 + pair) * in_w; q += 16) AOTC_PREFETCH_L1(ahead + q);
    for (i = 0; i < in_rows; i++) rows[i] = plane + (iy0 + ky0 + i) * in_w - g->pad[2];
    if (pair) {   /* (a loop of its own: one loop over both kinds of rows took 1.2x the time) */
      for (b = 0; b < s2->blocks; b++) {
        const __mmask16 store = aotc_v_mask_(ow_n - 16 * b);
        __m512 acc[2];
        if (b >= inside_lo && b < inside_hi) aotc_conv_s2_block_pair_(s2, b, rows, wv, 1, acc);
        else aotc_conv_s2_block_pair_(s2, b, rows, wv, 0, acc);
        _mm512_mask_storeu_ps(yrow + 16 * b, store, aotc_conv_dw_finish_(&e, acc[0]));
        _mm512_mask_storeu_ps(yrow + ow_n + 16 * b, store, aotc_conv_dw_finish_(&e, acc[1]));
      }
    } else {
      for (b = 0; b < s2->blocks; b++) {
        __m512 acc;
        if (ky1 - ky0 < 3) acc = aotc_conv_s2_block_(s2, b, rows, ky1 - ky0, wv + 3 * ky0, 0);
        else if (b >= inside_lo && b < inside_hi) acc = aotc_conv_s2_block_(s2, b, rows, 3, wv, 1);
        else acc = aotc_conv_s2_block_(s2, b, rows, 3, wv, 0);
        _mm512_mask_storeu_ps(yrow + 16 * b, aotc_v_mask_(ow_n - 16 * b), aotc_conv_dw_finish_(&e, acc));
      }
    }
    if (!e.in_registers) {
      aotc_activation_apply(act, yrow, (1 + pair) * ow_n);
      aotc_conv_canon_(yrow, (1 + pair) * ow_n);
    }
    r += 1 + pair;
  }
}
#endif

/* Whether the sums over a zero-bordered copy (the band and lanes kernels) are the
 * row kernel's for these weights: w * 0 adds nothing when w is finite. */
AOTC_FN int aotc_conv_weights_finite_(const float *w, int64_t n) {
  int64_t i;
  int finite = 1;
  for (i = 0; i < n; i++) finite &= w[i] - w[i] == 0.0f;   /* not inf or NaN */
  return finite;
}

#if defined(AOTC_SGEMM_PATH_AVX2)
/* ---- 3x3 depthwise, stride 1, over zero-bordered bands, AVX2: 8 pixels a vector ---- */

/* Large stride-1 planes, one channel at a time (smaller planes and stride 2 take eight
 * channels at a time, below). A band of output rows is made from a copy of the input
 * rows it reads, the padding written as zeros, `pitch` = out_w + 2 columns a row.
 * Output pixel (oh, ow) of the band taken as flat index q = oh * pitch + ow, tap
 * (ky, kx) is the element ky * pitch + kx past q: every tap is one plain vector load,
 * and the band's outputs land in a run of rows `pitch` apart, copied to Y without the
 * columns past the output. A padding tap adds w * 0, which leaves the sum as it was
 * (the sum is never -0) when w is finite, so the sums are the row kernel's, in its
 * order (from +0, taps in (ky, kx) order, then the bias); a channel with a non-finite
 * weight goes to the row kernel. */
#define AOTC_CONV_BAND_FLOATS 4096   /* floats of a band's input copy (on the stack) */
#define AOTC_CONV_BAND_VECTORS 4     /* independent sums at once: an FMA's latency hidden */

typedef struct aotc_conv_band_ {
  int64_t pitch, rows;   /* rows: output rows per band, at most */
} aotc_conv_band_;

/* Floats of the copy for a band of `rows` output rows, plus the slack that the last
 * vectors read past it (two taps' columns and the lanes past the band, up to a whole
 * group of AOTC_CONV_BAND_VECTORS vectors). */
AOTC_FN int64_t aotc_conv_band_floats_(int64_t pitch, int64_t rows) {
  return (rows + 2) * pitch + (AOTC_CONV_BAND_VECTORS + 1) * AOTC_VW;
}

/* Plans the band kernel for this shape; 0 when it does not apply. */
AOTC_FN int aotc_conv_band_plan_(const aotc_conv_geom *g, aotc_conv_band_ *b) {
  if (!(g->kernel[0] == 1 && g->in[0] == 1 && g->out[0] == 1 && g->kernel[1] == 3 &&
        g->kernel[2] == 3 && g->dilation[1] == 1 && g->dilation[2] == 1 && g->stride[1] == 1 &&
        g->stride[2] == 1))
    return 0;
  b->pitch = g->out[2] + 2;
  b->rows = AOTC_MIN(g->out[1], AOTC_CONV_BAND_FLOATS / b->pitch - 2);
  return b->rows >= 1 && aotc_conv_band_floats_(b->pitch, b->rows) <= AOTC_CONV_BAND_FLOATS;
}

/* The copy for the band whose output rows start at oh0, from one input plane. */
AOTC_FN void aotc_conv_band_fill_(const aotc_conv_geom *g, const aotc_conv_band_ *b, const float *plane,
                                  int64_t oh0, float *AOTC_RESTRICT q) {
  const int64_t pitch = b->pitch, in_h = g->in[1], in_w = g->in[2];
  int64_t lo, hi, r, j;   /* lo, hi: the columns that fall inside the input row */
  aotc_conv_valid_range_(-g->pad[2], 1, in_w, pitch, &lo, &hi);
  for (r = 0; r < b->rows + 2; r++, q += pitch) {
    const int64_t iy = oh0 + r - g->pad[1];
    const float *AOTC_RESTRICT src = plane + iy * in_w - g->pad[2];
    if (iy < 0 || iy >= in_h) {
      for (j = 0; j < pitch; j++) q[j] = 0.0f;
      continue;
    }
    for (j = 0; j < lo; j++) q[j] = 0.0f;
    for (j = lo; j < hi; j++) q[j] = src[j];
    for (j = hi; j < pitch; j++) q[j] = 0.0f;
  }
  for (j = 0; j < (AOTC_CONV_BAND_VECTORS + 1) * AOTC_VW; j++) q[j] = 0.0f;   /* the slack */
}

/* Output rows [r0, r1) of one channel (y: its output plane), band by band. */
AOTC_FN void aotc_conv_band_rows_(const aotc_conv_geom *g, const aotc_conv_band_ *b, const float *plane,
                                  const float *w, float bias, float *y, int64_t r0, int64_t r1,
                                  const aotc_activation *act) {
  float q[AOTC_CONV_BAND_FLOATS] AOTC_ALIGNED(64);
  float run[AOTC_CONV_BAND_FLOATS] AOTC_ALIGNED(64);   /* the band's outputs, pitch apart */
  const int64_t ow_n = g->out[2], pitch = b->pitch;
  const aotc_v_ bv = AOTC_V_SET1(bias);
  int64_t oh0, t;
  for (oh0 = r0; oh0 < r1; oh0 += b->rows) {
    const int64_t rows = AOTC_MIN(b->rows, r1 - oh0), n = rows * pitch;
    int64_t p, r;
    aotc_conv_band_fill_(g, b, plane, oh0, q);
    for (p = 0; p < n; p += AOTC_CONV_BAND_VECTORS * AOTC_VW) {   /* may run past n: slack */
      aotc_v_ acc[AOTC_CONV_BAND_VECTORS];
      int v;
      AOTC_UNROLL(4)
      for (v = 0; v < AOTC_CONV_BAND_VECTORS; v++) acc[v] = AOTC_V_ZERO();
      AOTC_UNROLL(9)
      for (t = 0; t < 9; t++) {
        const float *src = q + (t / 3) * pitch + t % 3 + p;
        const aotc_v_ wt = AOTC_V_SET1(w[t]);
        AOTC_UNROLL(4)
        for (v = 0; v < AOTC_CONV_BAND_VECTORS; v++)
          acc[v] = AOTC_V_MADD(wt, AOTC_V_LOAD(src + v * AOTC_VW), acc[v]);
      }
      AOTC_UNROLL(4)
      for (v = 0; v < AOTC_CONV_BAND_VECTORS; v++)
        AOTC_V_STOREN(run + p + v * AOTC_VW, AOTC_V_ADD(acc[v], bv), AOTC_VW);
    }
    aotc_activation_apply(act, run, n);
    aotc_conv_canon_(run, n);
    for (r = 0; r < rows; r++)
      memcpy(y + (oh0 + r) * ow_n, run + r * pitch, (size_t)ow_n * sizeof(float));
  }
}

#endif

#if defined(AOTC_SGEMM_PATH_AVX2) || defined(AOTC_SGEMM_PATH_AVX512)
/* ---- 3x3 depthwise, SIMD: a channel to each lane of a vector ------------------------- */

/* AOTC_VW channels go together, one to a lane: the input rows a band of output rows
 * reads are transposed (blocks of AOTC_VW x AOTC_VW in registers) into one bordered
 * buffer of pixels of AOTC_VW floats, zeros in the padding; an output pixel is then
 * nine vector products, one per tap, at any stride, and AOTC_VW output pixels are
 * transposed back into their channels' output planes. No per-channel set-up, no ragged
 * vectors, no even/odd split at stride 2: on AVX2, planes of 7 to 28 columns and
 * stride-2 planes ran 1.7-3x faster than in bands of one channel (large stride-1
 * planes 10-20% slower: they stay in bands). On AVX-512 the transposes cost more than
 * the flat kernel's masks but for stride-2 planes of few columns, whose phase planes
 * are mostly set-up: MobileNetV2's 14 -> 7 conv (576 channels) took 0.74x the flat
 * kernel's time and its 28 -> 14 one 0.93x; 56 -> 28 1.14x, 7x7 stride-1 planes 1.14x.
 * Each lane sums the same products in the same order as the row kernel (the padding
 * adds w * 0: a conv with a weight that is not finite goes channel by channel, as in
 * the bands). */
#define AOTC_CONV_LANES_FLOATS 8192   /* floats of the bordered buffer (on the stack) */
#define AOTC_CONV_LANES_AVX512_MAX_WIDTH 14   /* output columns, at most, on AVX-512 */

typedef struct aotc_conv_lanes_ {
  int64_t cols;        /* pixels of a buffer row: the input columns the taps read */
  int64_t band_rows;   /* output rows per band, at most */
} aotc_conv_lanes_;

/* Plans the lanes kernel for this shape; 0 when it does not apply. */
AOTC_FN int aotc_conv_lanes_plan_(const aotc_conv_geom *g, aotc_conv_lanes_ *l) {
  if (!(g->kernel[0] == 1 && g->in[0] == 1 && g->out[0] == 1 && g->kernel[1] == 3 &&
        g->kernel[2] == 3 && g->dilation[1] == 1 && g->dilation[2] == 1))
    return 0;
  l->cols = (g->out[2] - 1) * g->stride[2] + 3;
  if (3 * l->cols * AOTC_VW > AOTC_CONV_LANES_FLOATS) return 0;   /* one output row must fit */
  l->band_rows =
      AOTC_MIN(g->out[1], (AOTC_CONV_LANES_FLOATS / (l->cols * AOTC_VW) - 3) / g->stride[1] + 1);
  return 1;
}

/* r[i] <- lane i of each of r[0 .. AOTC_VW): the square block transposed. */
AOTC_INLINE_ALWAYS void aotc_conv_lanes_transpose_(aotc_v_ *r) {
#if defined(AOTC_SGEMM_PATH_AVX512)
  aotc_v_transpose16_(r);
#else
  aotc_v_transpose8_(r);
#endif
}

/* Buffer rows [0, rows) from input row iy0 on of the AOTC_VW input planes `in`. */
AOTC_FN void aotc_conv_lanes_fill_(const aotc_conv_geom *g, const aotc_conv_lanes_ *l,
                                   const float *const *in, int64_t iy0, int64_t rows, float *buf) {
  const int64_t in_h = g->in[1], in_w = g->in[2], pl = g->pad[2];
  const int64_t end = AOTC_MAX(0, AOTC_MIN(in_w, l->cols - pl));   /* input columns read */
  int64_t r, ix, c;
  int lane;
  for (r = 0; r < rows; r++) {
    const int64_t iy = iy0 + r;
    float *row = buf + r * l->cols * AOTC_VW;
    if (iy < 0 || iy >= in_h) {
      for (c = 0; c < l->cols; c++) AOTC_V_STOREN(row + c * AOTC_VW, AOTC_V_ZERO(), AOTC_VW);
      continue;
    }
    for (c = 0; c < pl; c++) AOTC_V_STOREN(row + c * AOTC_VW, AOTC_V_ZERO(), AOTC_VW);
    for (c = pl + end; c < l->cols; c++) AOTC_V_STOREN(row + c * AOTC_VW, AOTC_V_ZERO(), AOTC_VW);
    for (ix = 0; ix < end; ix += AOTC_VW) {   /* the last block ragged */
      const int64_t n = AOTC_MIN(AOTC_VW, end - ix);
      aotc_v_ v[AOTC_VW];
      for (lane = 0; lane < AOTC_VW; lane++) v[lane] = AOTC_V_LOADN(in[lane] + iy * in_w + ix, n);
      aotc_conv_lanes_transpose_(v);
      for (c = 0; c < n; c++) AOTC_V_STOREN(row + (ix + pl + c) * AOTC_VW, v[c], AOTC_VW);
    }
  }
}

/* Output channels [channel, channel + AOTC_VW) (of any images), whole planes. */
AOTC_FN void aotc_conv_lanes_planes_(const aotc_conv_direct_args_ *a, int64_t channel) {
  const aotc_conv_geom *g = a->g;
  const aotc_conv_lanes_ *l = a->lanes;
  const int64_t cout = g->cout_g * g->group, oh_n = g->out[1], ow_n = g->out[2];
  const int64_t pixels = oh_n * ow_n, sh = g->stride[1], sw = g->stride[2];
  float buf[AOTC_CONV_LANES_FLOATS] AOTC_ALIGNED(64);
  float wl[9][AOTC_VW] AOTC_ALIGNED(64), bl[AOTC_VW] AOTC_ALIGNED(64);
  const float *in[AOTC_VW];
  float *out[AOTC_VW];
  const int act = aotc_sgemm_act_in_registers_(a->act), in_registers = aotc_sgemm_act_all_in_registers_(a->act);
  const aotc_v_ lo = AOTC_V_SET1(act == AOTC_SGEMM_ACT_CLIP ? a->act->a : 0.0f);
  const aotc_v_ hi = AOTC_V_SET1(act == AOTC_SGEMM_ACT_CLIP ? a->act->b : 0.0f);
  aotc_v_ wv[9], bv;
  int64_t oh0, tap[9];
  int lane, t;
  for (lane = 0; lane < AOTC_VW; lane++) {
    const int64_t ch = channel + lane, co = ch % cout, n = ch / cout;
    in[lane] = a->x + (n * g->group + co / g->cout_g) * g->in[1] * g->in[2];
    out[lane] = a->y + ch * pixels;
    for (t = 0; t < 9; t++) wl[t][lane] = a->w[co * 9 + t];
    bl[lane] = a->bias ? a->bias[co] : 0.0f;
  }
  for (t = 0; t < 9; t++) {
    wv[t] = AOTC_V_LOAD(wl[t]);
    tap[t] = ((t / 3) * l->cols + t % 3) * AOTC_VW;
  }
  bv = AOTC_V_LOAD(bl);
  for (oh0 = 0; oh0 < oh_n; oh0 += l->band_rows) {
    const int64_t oh1 = AOTC_MIN(oh_n, oh0 + l->band_rows), end = oh1 * ow_n;
    int64_t q, oh = oh0, ow = 0;   /* the group's first pixel */
    aotc_conv_lanes_fill_(g, l, in, oh0 * sh - g->pad[1], (oh1 - oh0 - 1) * sh + 3, buf);
    for (q = oh0 * ow_n; q < end; q += AOTC_VW) {   /* AOTC_VW pixels, then into the planes */
      const int64_t n = AOTC_MIN(AOTC_VW, end - q);
      int64_t at[AOTC_VW];   /* of each pixel's first tap in buf (past n: the last's) */
      aotc_v_ res[AOTC_VW];
      int j;
      for (j = 0; j < AOTC_VW; j++) {   /* (oh, ow) stepped, not divided out: 4% faster */
        at[j] = ((oh - oh0) * sh * l->cols + ow * sw) * AOTC_VW;
        if (j + 1 < n && ++ow == ow_n) ow = 0, oh++;
      }
      if (++ow == ow_n) ow = 0, oh++;   /* the next group's first */
      /* taps outer, pixels inner: AOTC_VW independent sums hide the FMA's latency */
      AOTC_UNROLL(16)
      for (j = 0; j < AOTC_VW; j++) res[j] = AOTC_V_ZERO();
      AOTC_UNROLL(9)
      for (t = 0; t < 9; t++) {
        AOTC_UNROLL(16)
        for (j = 0; j < AOTC_VW; j++) res[j] = AOTC_V_MADD(wv[t], AOTC_V_LOAD(buf + tap[t] + at[j]), res[j]);
      }
      AOTC_UNROLL(16)
      for (j = 0; j < AOTC_VW; j++) {
        res[j] = AOTC_V_ADD(res[j], bv);
        if (in_registers) res[j] = aotc_sgemm_act_v_(AOTC_V_FINISH(res[j]), act, lo, hi);
      }
      aotc_conv_lanes_transpose_(res);
      for (lane = 0; lane < AOTC_VW; lane++) AOTC_V_STOREN(out[lane] + q, res[lane], n);
    }
  }
  for (lane = 0; lane < AOTC_VW && !in_registers; lane++) {
    aotc_activation_apply(a->act, out[lane], pixels);
    aotc_conv_canon_(out[lane], pixels);
  }
}
#endif

/* Output rows [r0, r1) of one channel, row by row, from yrow on. */
AOTC_FN void aotc_conv_direct_rows_(const aotc_conv_direct_args_ *a, const float *plane, const float *wk,
                                    float bias, float *yrow, int64_t r0, int64_t r1) {
  const aotc_conv_geom *g = a->g;
  int64_t r;
  for (r = r0; r < r1; r++, yrow += g->out[2]) {
    aotc_conv_direct_row_(g, plane, wk, bias, yrow, r / g->out[1], r % g->out[1], a->inner_lo,
                          a->inner_hi);
    aotc_activation_apply(a->act, yrow, g->out[2]);
    aotc_conv_canon_(yrow, g->out[2]);
  }
}

#if defined(AOTC_SGEMM_PATH_AVX512)
/* ---- 3x3 depthwise, stride 1, AVX-512: rows slid a lane each way -------------------- */

/* Planes that keep their size (pad 1 all round) and are at least 12 columns wide (no
 * more than a quarter of a row's lanes idle): AOTC_CONV_SLIDE_ROWS output rows at a
 * time, 16 columns a vector. Each input row they read is loaded once per 16 columns;
 * its left and right taps are that vector slid one lane with its neighbour (valignd),
 * the lanes past either end of the row zeros. The flat kernel's nine unaligned, masked
 * loads per 16 outputs, each output's nine products one chain, took 1.4x the time at
 * 56 and 112 columns, 1.2-1.3x at 28 and 14 (one thread, alone, inputs from L3); it is
 * kept for narrower planes, whose rows would leave most lanes idle. A padding column
 * adds w * 0, which leaves the sum as it was (it is never -0) for finite w, and padding
 * rows are skipped: every output is the row kernel's sum in its order (from +0, taps in
 * (ky, kx) order, then the bias). A channel with a weight that is not finite goes row
 * by row. */
#define AOTC_CONV_SLIDE_ROWS 3   /* output rows at a time: 2 and 4 were no faster */

AOTC_FN int aotc_conv_slide_fits_(const aotc_conv_geom *g) {
  return g->kernel[0] == 1 && g->in[0] == 1 && g->out[0] == 1 && g->kernel[1] == 3 && g->kernel[2] == 3 &&
         g->dilation[1] == 1 && g->dilation[2] == 1 && g->stride[1] == 1 && g->stride[2] == 1 &&
         g->pad[1] == 1 && g->pad[2] == 1 && g->out[1] == g->in[1] && g->out[2] == g->in[2] &&
         4 * g->out[2] >= 3 * 16 * ((g->out[2] + 15) / 16);
}

/* [prev[15], cur[0..14]] and [cur[1..15], next[0]]: the row's left and right taps. */
AOTC_INLINE_ALWAYS __m512 aotc_conv_slide_left_(__m512 cur, __m512 prev) {
  return _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(cur), _mm512_castps_si512(prev), 15));
}
AOTC_INLINE_ALWAYS __m512 aotc_conv_slide_right_(__m512 next, __m512 cur) {
  return _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(next), _mm512_castps_si512(cur), 1));
}

/* Output rows [r0, r1) of one channel's output plane y from its input plane (h x w both). */
AOTC_FN void aotc_conv_slide_rows_(int64_t h, int64_t w, const float *plane, const float *wk, float bias,
                                   float *y, int64_t r0, int64_t r1, const aotc_activation *act) {
  enum { R = AOTC_CONV_SLIDE_ROWS, IN = AOTC_CONV_SLIDE_ROWS + 2 };   /* output, input rows */
  const int64_t blocks = (w + 15) / 16;
  const __mmask16 last = aotc_v_mask_(w - 16 * (blocks - 1));   /* the last block's columns */
  const aotc_conv_dw_epilogue_ e = aotc_conv_dw_epilogue_init_(act, bias);
  __m512 wv[9];
  int64_t oh, b;
  int t, i, j;
  for (t = 0; t < 9; t++) wv[t] = _mm512_set1_ps(wk[t]);
  for (oh = r0; oh < r1; oh += R) {
    const int rows = (int)AOTC_MIN(R, r1 - oh);
    const float *row[IN];
    int inside[IN];   /* input row oh - 1 + i is in the plane and read */
    __m512 prev[IN], cur[IN], next[IN];
    for (i = 0; i < IN; i++) {
      const int64_t iy = oh - 1 + i;
      inside[i] = iy >= 0 && iy < h && i < rows + 2;
      row[i] = plane + (inside[i] ? iy : 0) * w;
      prev[i] = _mm512_setzero_ps();
      cur[i] = _mm512_maskz_loadu_ps(blocks == 1 ? last : (__mmask16)0xFFFF, row[i]);
    }
    for (b = 0; b < blocks; b++) {
      const __mmask16 ahead = b + 1 >= blocks ? 0 : b + 2 == blocks ? last : (__mmask16)0xFFFF;
      const __mmask16 store = b + 1 == blocks ? last : (__mmask16)0xFFFF;
      __m512 acc[R];
      AOTC_UNROLL(3)
      for (j = 0; j < R; j++) acc[j] = _mm512_setzero_ps();
      AOTC_UNROLL(5)
      for (i = 0; i < IN; i++) {
        __m512 left, right;
        next[i] = _mm512_maskz_loadu_ps(ahead, row[i] + 16 * (b + 1));
        if (!inside[i]) continue;
        left = aotc_conv_slide_left_(cur[i], prev[i]);
        right = aotc_conv_slide_right_(next[i], cur[i]);
        AOTC_UNROLL(3)
        for (j = 0; j < R; j++) {   /* input row i is tap row i - j of output row j */
          const int ky = i - j;
          if (ky < 0 || ky > 2) continue;
          acc[j] = AOTC_V_MADD(wv[3 * ky], left, acc[j]);
          acc[j] = AOTC_V_MADD(wv[3 * ky + 1], cur[i], acc[j]);
          acc[j] = AOTC_V_MADD(wv[3 * ky + 2], right, acc[j]);
        }
      }
      for (j = 0; j < rows; j++)
        _mm512_mask_storeu_ps(y + (oh + j) * w + 16 * b, store, aotc_conv_dw_finish_(&e, acc[j]));
      AOTC_UNROLL(5)
      for (i = 0; i < IN; i++) {
        prev[i] = cur[i];
        cur[i] = next[i];
      }
    }
  }
  if (!e.in_registers) {
    aotc_activation_apply(act, y + r0 * w, (r1 - r0) * w);
    aotc_conv_canon_(y + r0 * w, (r1 - r0) * w);
  }
}

/* Output rows [r0, r1) of planes [c0, c1) (n * Cout + co) by the slide kernel, else
 * whole planes by the flat one (else row by row). Compiled once, on its own: inlined
 * into its callers, its loop's registers went with theirs (it took 1.3x the time after a
 * change to the stride-2 kernel beside it); called per channel, 7x7 planes paid for
 * the call. */
AOTC_NOINLINE void aotc_conv_planes_(const aotc_conv_direct_args_ *a, int64_t c0, int64_t c1, int64_t r0,
                                     int64_t r1) {
  const aotc_conv_geom *g = a->g;
  const int64_t cout = g->cout_g * g->group, plane_out = aotc_conv_volume_(g->out);
  int64_t channel;
  for (channel = c0; channel < c1; channel++) {
    const int64_t co = channel % cout, n = channel / cout;
    const float *plane = a->x + (n * g->group + co / g->cout_g) * aotc_conv_volume_(g->in);
    const float *wk = a->w + co * aotc_conv_volume_(g->kernel);
    const float bias = a->bias ? a->bias[co] : 0.0f;
    const int64_t first = channel * plane_out + r0 * g->out[2], count = (r1 - r0) * g->out[2];
    float *y = a->y + channel * plane_out;
    if (a->slide && aotc_conv_weights_finite_(wk, 9))
      aotc_conv_slide_rows_(g->out[1], g->out[2], plane, wk, bias, y, r0, r1, a->act);
    else if (a->flat) aotc_conv_flat_plane_(g, a->flat, plane, wk, bias, y, a->act);   /* (all rows) */
    else aotc_conv_direct_rows_(a, plane, wk, bias, y + r0 * g->out[2], r0, r1);
    if (a->residual)
      aotc_conv_add_residual_(a->y + first, a->y + first, a->residual + first, count, a->res_act);
  }
}
#endif

/* One block of channels (small planes, whole) or of output rows of one channel; the
 * tasks go by rows first (all channels' first rows, then the next rows), so that the
 * pool's threads, taking tasks from the two ends, each work a part of the image. */
AOTC_FN void aotc_conv_direct_task_(void *arg, int64_t task) {
  const aotc_conv_direct_args_ *a = (const aotc_conv_direct_args_ *)arg;
  const aotc_conv_geom *g = a->g;
  int64_t cout = g->cout_g * g->group, rows = g->out[0] * g->out[1], ow_n = g->out[2];
  int64_t c0 = task % a->channel_tasks * a->channels_per_task;
  int64_t c1 = AOTC_MIN(c0 + a->channels_per_task, g->batch * cout), channel;
  int64_t r0 = task / a->channel_tasks * a->rows_per_task;
  int64_t r1 = AOTC_MIN(r0 + a->rows_per_task, rows);
#if defined(AOTC_SGEMM_PATH_AVX2) || defined(AOTC_SGEMM_PATH_AVX512)
  for (; a->lanes && c0 + AOTC_VW <= c1; c0 += AOTC_VW) {   /* whole groups; the rest below */
    aotc_conv_lanes_planes_(a, c0);
    if (a->residual)
      aotc_conv_add_residual_(a->y + c0 * rows * ow_n, a->y + c0 * rows * ow_n,
                              a->residual + c0 * rows * ow_n, AOTC_VW * rows * ow_n, a->res_act);
  }
#endif
#if defined(AOTC_SGEMM_PATH_AVX512)
  if (a->slide || a->flat) {   /* whole planes, or the slide kernel's rows of one */
    aotc_conv_planes_(a, c0, c1, r0, r1);
    return;
  }
#endif
  for (channel = c0; channel < c1; channel++) {   /* n * Cout + co */
    int64_t co = channel % cout, n = channel / cout;
    int64_t ci = n * g->group + co / g->cout_g;   /* n * Cin + input channel */
    const float *plane = a->x + ci * aotc_conv_volume_(g->in);
    const float *wk = a->w + co * aotc_conv_volume_(g->kernel);
    float bias = a->bias ? a->bias[co] : 0.0f;
    int64_t first = channel * aotc_conv_volume_(g->out) + r0 * ow_n;
    float *yrow = a->y + first;
#if defined(AOTC_SGEMM_PATH_AVX512)
    if (a->s2)
      aotc_conv_s2_rows_(g, a->s2, plane, wk, bias, yrow - r0 * ow_n, r0, r1, a->act);
    else
#elif defined(AOTC_SGEMM_PATH_AVX2)
    if (a->band && aotc_conv_weights_finite_(wk, 9))
      aotc_conv_band_rows_(g, a->band, plane, wk, bias, yrow - r0 * ow_n, r0, r1, a->act);
    else
#endif
      aotc_conv_direct_rows_(a, plane, wk, bias, yrow, r0, r1);
    if (a->residual)   /* the rows just made, still in cache */
      aotc_conv_add_residual_(a->y + first, a->y + first, a->residual + first, (r1 - r0) * ow_n,
                              a->res_act);
  }
}

/* Outputs per task, about: enough to hide the dispatch (a task taken by another thread
 * costs a shared counter's cache line), small enough to spread. */
#define AOTC_CONV_DIRECT_TASK 8192
/* The slide and stride-2 kernels cut output planes of this many pixels or more into two
 * halves of rows: each thread then works the half of the image that the convs around it
 * give it and take from it (a stem's row tasks, a pointwise conv's tasks by pixels),
 * where each thread took whole planes, half of every plane's input in the other core's
 * cache. MobileNetV2 at two threads, per node: its 112x112 depthwise conv 79 -> 64 us,
 * the pointwise convs after the two 11-20 us faster each, the stride-2 one 9 us slower;
 * the model 0.987x the time (1.003x at one thread). */
#define AOTC_CONV_DIRECT_HALVES_MIN (56 * 56)

AOTC_ENGINE_FN void aotc_conv_direct(aotc_pool *pool, const aotc_conv_geom *g, const float *x,
                                     const float *w, const float *bias, const float *residual, float *y,
                                     const aotc_activation *act) {
  aotc_conv_direct_args_ a;
  int64_t rows = g->out[0] * g->out[1], ow_n = AOTC_MAX(g->out[2], 1), unused;
#if defined(AOTC_SGEMM_PATH_AVX512)
  aotc_conv_flat_ flat;
  aotc_conv_s2_ s2;
#elif defined(AOTC_SGEMM_PATH_AVX2)
  aotc_conv_band_ band;
#endif
#if defined(AOTC_SGEMM_PATH_AVX2) || defined(AOTC_SGEMM_PATH_AVX512)
  aotc_conv_lanes_ lanes;
  int lanes_pay;   /* whether this path runs such planes a channel to each lane */
#endif
  a.g = g;
  a.x = x;
  a.w = w;
  a.bias = bias;
  a.residual = residual;
  a.act = residual ? NULL : act;
  a.res_act = act;
  a.y = y;
  a.flat = NULL;
  a.slide = 0;
  a.s2 = NULL;
  a.band = NULL;
  a.lanes = NULL;
#if defined(AOTC_SGEMM_PATH_AVX512)
  if (aotc_conv_slide_fits_(g)) a.slide = 1;
  else if (aotc_conv_flat_plan_(g, &flat)) a.flat = &flat;
  else if (aotc_conv_s2_plan_(g, &s2)) a.s2 = &s2;
  /* 16 channels at a time for stride-2 planes of at most 14 output columns */
  lanes_pay = g->stride[1] == 2 && g->stride[2] == 2 && g->out[2] <= AOTC_CONV_LANES_AVX512_MAX_WIDTH;
#elif defined(AOTC_SGEMM_PATH_AVX2)
  if (aotc_conv_band_plan_(g, &band)) a.band = &band;
  /* eight channels at a time but for large stride-1 planes, where bands were faster */
  lanes_pay = g->stride[1] * g->stride[2] > 1 || g->out[2] <= 28;
#endif
#if defined(AOTC_SGEMM_PATH_AVX2) || defined(AOTC_SGEMM_PATH_AVX512)
  if (lanes_pay && aotc_conv_lanes_plan_(g, &lanes) && aotc_conv_weights_finite_(w, g->cout_g * g->group * 9))
    a.lanes = &lanes;
#endif
  a.rows_per_task = a.flat || a.lanes || a.slide ? rows   /* whole planes */
                                                 : AOTC_MAX(1, AOTC_MIN(rows, AOTC_CONV_DIRECT_TASK / ow_n));
  if ((a.slide || a.s2) && rows * ow_n >= AOTC_CONV_DIRECT_HALVES_MIN)
    a.rows_per_task = AOTC_MIN(a.rows_per_task, (rows + 1) / 2);
  /* parts of planes smaller than a task: several planes to a task */
  a.channels_per_task = AOTC_MAX(1, AOTC_CONV_DIRECT_TASK / AOTC_MAX(a.rows_per_task * ow_n, 1));
  if (a.lanes) a.channels_per_task = (a.channels_per_task + AOTC_VW - 1) / AOTC_VW * AOTC_VW;   /* whole groups */
  a.channel_tasks = (g->batch * g->group * g->cout_g + a.channels_per_task - 1) / a.channels_per_task;
  aotc_conv_valid_range_(-g->pad[2], g->stride[2], g->in[2], g->out[2], &a.inner_lo, &unused);
  aotc_conv_valid_range_((g->kernel[2] - 1) * g->dilation[2] - g->pad[2], g->stride[2], g->in[2],
                         g->out[2], &unused, &a.inner_hi);
  a.inner_hi = AOTC_MAX(a.inner_hi, a.inner_lo);
  aotc_parallel_for(pool, a.channel_tasks * ((rows + a.rows_per_task - 1) / a.rows_per_task),
                    aotc_conv_direct_task_, &a);
}

/* ---- general: im2col by column blocks, then GEMM ---------------------------------- */

/* Row k = (ci, kz, ky, kx) of the unfolded matrix, output pixels [p, end): the input
 * value under that kernel tap for each pixel (0 where it falls in the padding). */
AOTC_FN void aotc_conv_unfold_(const aotc_conv_geom *g, const float *x, int64_t k, int64_t p,
                               int64_t end, float *AOTC_RESTRICT dst) {
  int64_t kvol = aotc_conv_volume_(g->kernel), tap = k % kvol;
  int64_t kz = tap / (g->kernel[1] * g->kernel[2]);
  int64_t ky = (tap / g->kernel[2]) % g->kernel[1], kx = tap % g->kernel[2];
  int64_t oh_n = g->out[1], ow_n = g->out[2], sw = g->stride[2];
  int64_t offset = kx * g->dilation[2] - g->pad[2], lo, hi;
  const float *plane = x + (k / kvol) * aotc_conv_volume_(g->in);
  aotc_conv_valid_range_(offset, sw, g->in[2], ow_n, &lo, &hi);
  while (p < end) {   /* one segment [ow0, ow1) of one output row at a time */
    int64_t row = p / ow_n, ow0 = p % ow_n, ow1 = AOTC_MIN(ow_n, ow0 + (end - p));
    int64_t od = row / oh_n, oh = row % oh_n, ow;
    int64_t iz = od * g->stride[0] - g->pad[0] + kz * g->dilation[0];
    int64_t iy = oh * g->stride[1] - g->pad[1] + ky * g->dilation[1];
    if (iz < 0 || iz >= g->in[0] || iy < 0 || iy >= g->in[1]) {
      for (ow = ow0; ow < ow1; ow++) dst[ow - ow0] = 0.0f;
    } else {
      const float *src = plane + (iz * g->in[1] + iy) * g->in[2];
      int64_t a0 = AOTC_MIN(AOTC_MAX(ow0, lo), ow1), a1 = AOTC_MAX(AOTC_MIN(ow1, hi), a0);
      for (ow = ow0; ow < a0; ow++) dst[ow - ow0] = 0.0f;
      if (sw == 1) {
        if (a1 > a0) memcpy(dst + (a0 - ow0), src + (a0 + offset), (size_t)(a1 - a0) * sizeof(float));
      } else {
        for (ow = a0; ow < a1; ow++) dst[ow - ow0] = src[ow * sw + offset];
      }
      for (ow = a1; ow < ow1; ow++) dst[ow - ow0] = 0.0f;
    }
    dst += ow1 - ow0;
    p += ow1 - ow0;
  }
}

typedef struct {
  const aotc_conv_geom *g;
  const float *x;      /* first input channel of this image and group */
  float *packed;       /* the unfolded block [K, ncols] in the GEMM's packed-B layout */
  int64_t k, first, ncols, strips;
} aotc_conv_im2col_args_;

#define AOTC_CONV_STRIP_GROUP 16   /* strips unfolded per call: 512 pixels per input run */

/* Strips [16g, 16g + 16) of one K-block of the packed unfolded block: the GEMM's
 * packed-B layout (runtime_c/aotc_gemm.h), written directly so the GEMM skips its own
 * packing. Each row k is unfolded once for the whole group of strips (long runs, few
 * index divisions), then dealt into the strips' panels. */
AOTC_FN void aotc_conv_im2col_panel_(void *arg, int64_t t) {
  const aotc_conv_im2col_args_ *a = (const aotc_conv_im2col_args_ *)arg;
  float row[AOTC_CONV_STRIP_GROUP * AOTC_SGEMM_NR] AOTC_ALIGNED(64);
  int64_t groups = (a->strips + AOTC_CONV_STRIP_GROUP - 1) / AOTC_CONV_STRIP_GROUP;
  int64_t pc = t / groups * AOTC_SGEMM_KC, s0 = t % groups * AOTC_CONV_STRIP_GROUP;
  int64_t s1 = AOTC_MIN(s0 + AOTC_CONV_STRIP_GROUP, a->strips);
  int64_t kc = AOTC_MIN(AOTC_SGEMM_KC, a->k - pc), i, j, s;
  int64_t c0 = s0 * AOTC_SGEMM_NR, c1 = AOTC_MIN(s1 * AOTC_SGEMM_NR, a->ncols);
  float *block = a->packed + pc * a->strips * AOTC_SGEMM_NR;
  for (j = c1 - c0; j < (s1 - s0) * AOTC_SGEMM_NR; j++) row[j] = 0.0f;   /* ragged: +0 */
  for (i = 0; i < kc; i++) {
    aotc_conv_unfold_(a->g, a->x, pc + i, a->first + c0, a->first + c1, row);
    for (s = s0; s < s1; s++)
      memcpy(block + (s * kc + i) * AOTC_SGEMM_NR, row + (s - s0) * AOTC_SGEMM_NR,
             AOTC_SGEMM_NR * sizeof(float));
  }
}

/* Bytes of scratch before the GEMM's own: the packed [K, block_cols] unfolded block. */
AOTC_FN size_t aotc_conv_im2col_bytes(const aotc_conv_geom *g, int64_t block_cols) {
  int64_t floats = aotc_sgemm_packed_b_floats(block_cols, g->cin_g * aotc_conv_volume_(g->kernel));
  return ((size_t)floats * sizeof(float) + 63u) / 64u * 64u;
}

AOTC_ENGINE_FN void aotc_conv_im2col(aotc_pool *pool, const aotc_conv_geom *g, int64_t block_cols,
                                     const float *x, const float *w, const float *bias,
                                     const float *residual, float *y, const aotc_activation *act,
                                     unsigned char *scratch) {
  aotc_conv_im2col_args_ a;
  int64_t out_px = aotc_conv_volume_(g->out), n, grp;
  unsigned char *gemm_scratch = scratch + aotc_conv_im2col_bytes(g, block_cols);
  a.g = g;
  a.k = g->cin_g * aotc_conv_volume_(g->kernel);
  a.packed = (float *)(void *)scratch;
  for (n = 0; n < g->batch; n++)
    for (grp = 0; grp < g->group; grp++)
      for (a.first = 0; a.first < out_px; a.first += block_cols) {
        int64_t yoff = aotc_conv_y_at_(g, n, grp) + a.first;
        a.ncols = AOTC_MIN(block_cols, out_px - a.first);
        a.strips = (a.ncols + AOTC_SGEMM_NR - 1) / AOTC_SGEMM_NR;
        a.x = x + aotc_conv_x_at_(g, n, grp);
        aotc_parallel_for(pool, (a.k + AOTC_SGEMM_KC - 1) / AOTC_SGEMM_KC *
                                    ((a.strips + AOTC_CONV_STRIP_GROUP - 1) / AOTC_CONV_STRIP_GROUP),
                          aotc_conv_im2col_panel_, &a);
        const aotc_sgemm_extras extras = {.residual = residual ? residual + yoff : NULL, .columns_first = 1};
        aotc_sgemm_run_(pool, g->cout_g, a.ncols, a.k, w + grp * g->cout_g * a.k, a.k, 0, NULL, 0, 0,
                        a.packed, y + yoff, out_px, bias ? bias + grp * g->cout_g : NULL, NULL, act,
                        &extras, gemm_scratch);
      }
}

/* ---- no dilation: implicit GEMM over zero-bordered phase planes ---------------------- */

/* A 2-D (or 1-D) conv without dilation (in[0] = out[0] = kernel[0] = 1, dilations 1:
 * aotc/ops/conv.py checks) reads its unfolded matrix straight from a zero-bordered
 * copy of X cut into phase planes: for strides (sh, sw), phase (py, px)
 * of an input channel holds the padded input's rows r * sh + py and columns c * sw + px,
 * hq x wq = (out_h + (kh - 1) / sh) x (out_w + (kw - 1) / sw) of them (one plane per
 * channel at stride 1; only the phases some tap reads). Output pixel (oh, ow) taken as
 * flat column q = oh * wq + ow, row k = (ci, ky, kx) of the unfolded matrix is the run
 * of phase (ky % sh, kx % sw) of channel ci at (ky / sh) * wq + kx / sw + q: a strip of
 * the unfolded matrix is 32 contiguous floats per k, which the tiles read straight from
 * the phase planes through the table of row offsets (aotc_sgemm_tile_ind_for_; copying
 * each strip into an L1 buffer first cost the 7x7 stem and 3x3 convs 8-9%), and no
 * unfolded matrix is ever stored. A strip that lies inside one output row is a run of
 * Y itself, where its tiles sum over the K-blocks with the whole epilogue in registers;
 * a strip that crosses a row has its last K-block land in an L1 buffer and go from there
 * to Y, dropping the wq - out_w columns of each row that fall past the output (its
 * earlier K-blocks keep their sums in scratch). Sums, bias
 * and activation as in the GEMM (k in (ci, ky, kx) order): the bits of aotc_conv_im2col. */

typedef struct {
  aotc_sgemm_job_ j;       /* the product: W [Cout_g, K] times the unfolded matrix */
  const aotc_conv_geom *g;
  const float *x;          /* first input channel of this image and group */
  float *xp;               /* its phase planes, then AOTC_SGEMM_NR floats of 0 */
  const int64_t *koff;     /* row k of the unfolded matrix starts at xp + koff[k] */
  float *y;                /* first output channel of this image and group */
  const float *residual;   /* NULL, or laid out as y (from this image and group on) */
  const aotc_activation *res_act;   /* with a residual: after it, at the store */
  aotc_sgemm_epilogue_ in_row_ep;   /* a tile written straight to y: all of the epilogue */
  const aotc_activation *in_row_after;   /* what that epilogue leaves for after the store */
  int64_t sy, sx, hq, wq;  /* phases per channel down and across; a plane's extent */
  int64_t bands;           /* tasks per channel that make its planes (row bands) */
} aotc_conv_implicit_args_;

/* Rows [0, rows) of a finished tile (flat columns [c, c + cols), row stride
 * AOTC_SGEMM_NR) into output channels from `channel` on, without the columns past the
 * output; the residual added there, when there is one. */
AOTC_FN void aotc_conv_implicit_store_(const aotc_conv_implicit_args_ *a, const float *tile,
                                       int64_t rows, int64_t c, int64_t cols, int64_t channel) {
  const int64_t ow_n = a->g->out[2], out_px = a->g->out[1] * ow_n, end = c + cols;
  int64_t q = c, i;
  while (q < end) {
    int64_t oh = q / a->wq, ow = q % a->wq, run;
    if (ow >= ow_n) {
      q += a->wq - ow;
      continue;
    }
    run = AOTC_MIN(ow_n - ow, end - q);
    for (i = 0; i < rows; i++) {
      int64_t at = (channel + i) * out_px + oh * ow_n + ow;
      const float *sums = tile + i * AOTC_SGEMM_NR + q - c;
      if (a->residual) aotc_conv_add_residual_(a->y + at, sums, a->residual + at, run, a->res_act);
      else memcpy(a->y + at, sums, (size_t)run * sizeof(float));
    }
    q += run;
  }
}

AOTC_FN void aotc_conv_implicit_task_(void *arg, int64_t t) {
  const aotc_conv_implicit_args_ *a = (const aotc_conv_implicit_args_ *)arg;
  const aotc_sgemm_job_ *j = &a->j;
  float tile[AOTC_SGEMM_MR * AOTC_SGEMM_NR] AOTC_ALIGNED(64);
  int64_t p0, s0, p1, s1, pc, p, s;
  aotc_sgemm_task_at_(j, t, &p0, &p1, &s0, &s1);
  for (pc = 0; pc < j->K; pc += AOTC_SGEMM_KC) {
    int64_t kc = AOTC_MIN(AOTC_SGEMM_KC, j->K - pc);
    int first = pc == 0, last = pc + kc == j->K;
    for (s = s0; s < s1; s++) {
      int64_t c = s * AOTC_SGEMM_NR, cols = AOTC_MIN(AOTC_SGEMM_NR, j->N - c);
      /* A strip inside one output row is that row's run of y: its tiles sum there,
       * with all of the epilogue in registers (one out of two to three strips of
       * 56- to 112-column outputs would cross a row and go through the L1 tile). */
      const int64_t oh = c / a->wq, ow = c % a->wq, out_px = a->g->out[1] * a->g->out[2];
      const int in_row = ow + cols <= a->g->out[2];
      for (p = p0; p < p1; p++) {
        int64_t i, rows, r, x;
        aotc_sgemm_epilogue_ ep;
        aotc_sgemm_tile_ind_fn_ fn;
        float *sums;   /* the sums of earlier K-blocks */
        aotc_sgemm_panel_(j->M, j->even_panels, p, &i, &rows);
        fn = aotc_sgemm_tile_ind_for_(rows);
        if (in_row) {
          const int64_t at = i * out_px + oh * a->g->out[2] + ow;
          ep = a->in_row_ep;
          ep.bias_m = j->bias_m ? j->bias_m + i : NULL;
          ep.residual = a->residual ? a->residual + at : NULL;
          fn(kc, j->A + i * j->lda + pc, j->lda, a->xp + c, a->koff + pc, a->y + at, out_px, cols, first,
             last ? &ep : NULL);
          if (last) aotc_activation_apply_2d(a->in_row_after, a->y + at, out_px, rows, cols);
          continue;
        }
        sums = j->C + i * j->ldc + c;
        if (!last) {
          fn(kc, j->A + i * j->lda + pc, j->lda, a->xp + c, a->koff + pc, sums, j->ldc, cols, first, NULL);
          continue;
        }
        if (!first)
          for (r = 0; r < rows; r++)
            for (x = 0; x < cols; x++) tile[r * AOTC_SGEMM_NR + x] = sums[r * j->ldc + x];
        ep = aotc_sgemm_epilogue_at_(j, i, c);
        fn(kc, j->A + i * j->lda + pc, j->lda, a->xp + c, a->koff + pc, tile, AOTC_SGEMM_NR, cols,
           first, &ep);
        aotc_activation_apply_2d(j->act_after, tile, AOTC_SGEMM_NR, rows, cols);
        aotc_conv_implicit_store_(a, tile, rows, c, cols, i);
      }
    }
  }
}

/* dst[c] = src[2 c] for c < n; on AVX-512 16 at a time, by a permute of the two
 * vectors that hold them (the scalar gather was 2.4% of MobileNetV2's perf samples
 * with its stem on this kernel). Reads no element past src[2 n - 2]. */
AOTC_FN void aotc_conv_even_columns_(float *AOTC_RESTRICT dst, const float *AOTC_RESTRICT src, int64_t n) {
  int64_t c = 0;
#if defined(AOTC_SGEMM_PATH_AVX512)
  const __m512i evens = aotc_conv_even_lanes_();
  for (; c < n; c += 16) {
    const int64_t m = AOTC_MIN(16, n - c), reads = 2 * m - 1;
    const __m512 lo = _mm512_maskz_loadu_ps(aotc_v_mask_(reads), src + 2 * c);
    const __m512 hi = _mm512_maskz_loadu_ps(aotc_v_mask_(reads - 16), src + 2 * c + 16);
    _mm512_mask_storeu_ps(dst + c, aotc_v_mask_(m), _mm512_permutex2var_ps(lo, evens, hi));
  }
#endif
  for (; c < n; c++) dst[c] = src[2 * c];
}

/* Phase rows [r0, r1) of one input channel's planes at dst (all its phases). Input
 * rows are read in order, each for all its phases across at once (the second time
 * from L1): phase by phase, a stride-2 stem read its input four times over, every
 * other row, and its input comes from memory (MobileNetV2's stem at one thread: 0.41 ->
 * 0.37 ms). */
AOTC_FN void aotc_conv_phase_rows_(const aotc_conv_implicit_args_ *a, const float *plane, float *dst,
                                   int64_t r0, int64_t r1) {
  const aotc_conv_geom *g = a->g;
  const int64_t hq = a->hq, wq = a->wq, sh = g->stride[1], sw = g->stride[2];
  const int64_t in_h = g->in[1], in_w = g->in[2];
  int64_t r, py, px, c;
  for (r = r0; r < r1; r++)
    for (py = 0; py < a->sy; py++) {
      const int64_t iy = r * sh + py - g->pad[1];
      for (px = 0; px < a->sx; px++) {
        float *row = dst + ((py * a->sx + px) * hq + r) * wq;
        const float *src = plane + iy * in_w + px - g->pad[2];
        int64_t lo, hi;   /* the plane's columns that fall inside the input row */
        if (iy < 0 || iy >= in_h) {
          for (c = 0; c < wq; c++) row[c] = 0.0f;
          continue;
        }
        aotc_conv_valid_range_(px - g->pad[2], sw, in_w, wq, &lo, &hi);
        for (c = 0; c < lo; c++) row[c] = 0.0f;
        if (sw == 1)
          for (c = lo; c < hi; c++) row[c] = src[c];
        else if (sw == 2)
          aotc_conv_even_columns_(row + lo, src + 2 * lo, hi - lo);
        else
          for (c = lo; c < hi; c++) row[c] = src[c * sw];
        for (c = hi; c < wq; c++) row[c] = 0.0f;
      }
    }
}

/* Band t % bands of input channel t / bands's phase planes; the last task
 * (t == Cin_g * bands) zeroes the slack after the planes. */
AOTC_FN void aotc_conv_phases_task_(void *arg, int64_t t) {
  const aotc_conv_implicit_args_ *a = (const aotc_conv_implicit_args_ *)arg;
  const aotc_conv_geom *g = a->g;
  const int64_t ci = t / a->bands, band = t % a->bands;
  float *dst = a->xp + ci * a->sy * a->sx * a->hq * a->wq;
  int64_t c;
  if (ci == g->cin_g) {
    for (c = 0; c < AOTC_SGEMM_NR; c++) dst[c] = 0.0f;
    return;
  }
  aotc_conv_phase_rows_(a, a->x + ci * g->in[1] * g->in[2], dst, band * a->hq / a->bands,
                        (band + 1) * a->hq / a->bands);
}

/* The tasks of aotc_conv_phases_task_. */
AOTC_FN int64_t aotc_conv_phase_tasks_(const aotc_conv_geom *g, const aotc_conv_implicit_args_ *a) {
  return g->cin_g * a->bands + 1;
}

AOTC_FN size_t aotc_conv_implicit_bytes_(int64_t floats) { return ((size_t)floats * 4u + 63u) / 64u * 64u; }

#define AOTC_CONV_PHASES_MIN_TASKS 16   /* tasks that make the planes, where rows allow */

/* The phase layout of g (aotc_conv_implicit_args_). */
AOTC_FN void aotc_conv_implicit_shape_(const aotc_conv_geom *g, aotc_conv_implicit_args_ *a) {
  a->sy = AOTC_MIN(g->stride[1], g->kernel[1]);
  a->sx = AOTC_MIN(g->stride[2], g->kernel[2]);
  a->hq = g->out[1] + (g->kernel[1] - 1) / g->stride[1];
  a->wq = g->out[2] + (g->kernel[2] - 1) / g->stride[2];
  /* a few input channels (a stem's three) cut into bands of rows, so threads balance */
  a->bands = AOTC_MIN(a->hq, aotc_sgemm_div_up_(AOTC_CONV_PHASES_MIN_TASKS, g->cin_g));
}

/* Floats of the phase planes of g's input channels, then AOTC_SGEMM_NR of slack. */
AOTC_FN int64_t aotc_conv_planes_floats_(const aotc_conv_geom *g, const aotc_conv_implicit_args_ *a) {
  return g->cin_g * a->sy * a->sx * a->hq * a->wq + AOTC_SGEMM_NR;
}

/* koff[k]: where tap k = (input channel, ky, kx) of an output pixel reads, from the
 * pixel's own place in the phase planes. */
AOTC_FN void aotc_conv_tap_offsets_(const aotc_conv_geom *g, const aotc_conv_implicit_args_ *a, int64_t *koff) {
  const int64_t sh = g->stride[1], sw = g->stride[2], plane = a->hq * a->wq;
  int64_t ci, ky, kx, i = 0;
  for (ci = 0; ci < g->cin_g; ci++)
    for (ky = 0; ky < g->kernel[1]; ky++)
      for (kx = 0; kx < g->kernel[2]; kx++)
        koff[i++] = ((ci * a->sy + ky % sh) * a->sx + kx % sw) * plane + ky / sh * a->wq + kx / sw;
}

/* A 1x1 kernel (strided or padded) reads one phase plane per channel, X subsampled and
 * bordered, laid out as Y: the product is a plain GEMM over the planes, whose tiles
 * write Y directly with the residual and activation in registers (through the L1
 * buffer and the copy to Y, ResNet-50's stride-2 1x1 conv with its fused Add took
 * 1.35x onnxruntime's time). */
AOTC_FN int aotc_conv_implicit_is_gemm_(const aotc_conv_geom *g) { return g->kernel[1] == 1 && g->kernel[2] == 1; }

/* Floats of the sums kept between K-blocks: none when K is one block. */
AOTC_FN int64_t aotc_conv_implicit_sums_(const aotc_conv_geom *g, const aotc_conv_implicit_args_ *a) {
  return g->cin_g * g->kernel[1] * g->kernel[2] > AOTC_SGEMM_KC ? g->cout_g * g->out[1] * a->wq : 0;
}

/* Scratch, in order: the phase planes (+ AOTC_SGEMM_NR floats), then the GEMM's
 * scratch for a 1x1 kernel, else the sums between K-blocks (rows of wq columns) and the
 * K row offsets; each 64-byte aligned. */
AOTC_FN size_t aotc_conv_implicit_scratch_bytes(const aotc_conv_geom *g) {
  aotc_conv_implicit_args_ a;
  aotc_conv_implicit_shape_(g, &a);
  if (aotc_conv_implicit_is_gemm_(g))
    return aotc_conv_implicit_bytes_(aotc_conv_planes_floats_(g, &a)) +
           aotc_sgemm_scratch_bytes(g->cout_g, a.hq * a.wq, g->cin_g);
  return aotc_conv_implicit_bytes_(aotc_conv_planes_floats_(g, &a)) +
         aotc_conv_implicit_bytes_(aotc_conv_implicit_sums_(g, &a)) +
         aotc_conv_implicit_bytes_(2 * g->cin_g * g->kernel[1] * g->kernel[2]);
}

AOTC_ENGINE_FN void aotc_conv_implicit(aotc_pool *pool, const aotc_conv_geom *g, const float *x,
                                       const float *w, const float *bias, const float *residual,
                                       float *y, const aotc_activation *act, unsigned char *scratch) {
  aotc_conv_implicit_args_ a;
  const int64_t k = g->cin_g * g->kernel[1] * g->kernel[2], out_px = g->out[1] * g->out[2];
  const int is_gemm = aotc_conv_implicit_is_gemm_(g);
  int64_t n, grp;
  float *sums;
  int64_t *koff;
  memset(&a, 0, sizeof a);
  aotc_conv_implicit_shape_(g, &a);
  sums = (float *)(void *)(scratch + aotc_conv_implicit_bytes_(aotc_conv_planes_floats_(g, &a)));
  koff = (int64_t *)(void *)((unsigned char *)sums + aotc_conv_implicit_bytes_(aotc_conv_implicit_sums_(g, &a)));
  if (!is_gemm) aotc_conv_tap_offsets_(g, &a, koff);   /* (a 1x1 kernel's GEMM reads none) */
  a.g = g;
  a.xp = (float *)(void *)scratch;
  a.koff = koff;
  a.j.M = g->cout_g;
  a.j.N = (g->out[1] - 1) * a.wq + g->out[2];   /* the last row's dropped columns: not computed */
  a.j.K = k;
  a.j.lda = k;
  a.j.C = sums;
  a.j.act = act;   /* first the epilogue of a tile written straight to y */
  a.j.ldc = out_px;
  aotc_sgemm_epilogue_init_(&a.j);
  a.in_row_ep = a.j.ep;
  a.in_row_after = a.j.act_after;
  a.j.ldc = g->out[1] * a.wq;
  a.j.act = residual ? NULL : act;
  a.res_act = act;
  aotc_sgemm_epilogue_init_(&a.j);
  a.j.panels = aotc_sgemm_panels_(a.j.M);
  a.j.even_panels = 1;   /* (A: the weights) */
  a.j.columns_first = 1;   /* (the columns: pixels) */
  a.j.strips = aotc_sgemm_div_up_(a.j.N, AOTC_SGEMM_NR);
  aotc_sgemm_split_(&a.j);
  for (n = 0; n < g->batch; n++)
    for (grp = 0; grp < g->group; grp++) {
      a.x = x + aotc_conv_x_at_(g, n, grp);
      a.y = y + aotc_conv_y_at_(g, n, grp);
      a.residual = residual ? residual + aotc_conv_y_at_(g, n, grp) : NULL;
      a.j.A = w + grp * g->cout_g * k;
      a.j.bias_m = bias ? bias + grp * g->cout_g : NULL;
      aotc_parallel_for(pool, aotc_conv_phase_tasks_(g, &a), aotc_conv_phases_task_, &a);
      if (is_gemm) {   /* planes hq x wq = out_h x out_w */
        const aotc_sgemm_extras extras = {.residual = a.residual, .columns_first = 1};
        unsigned char *gemm_scratch = (unsigned char *)sums;   /* right after the planes */
        aotc_sgemm_run_(pool, g->cout_g, out_px, k, a.j.A, k, 0, a.xp, out_px, 0, NULL, a.y, out_px,
                        a.j.bias_m, NULL, act, &extras, gemm_scratch);
        continue;
      }
      aotc_parallel_for(pool, aotc_sgemm_tasks_(&a.j), aotc_conv_implicit_task_, &a);
    }
}

/* ---- pixels as tile rows, read where they lie in the phase planes -------------------- */

/* A 2-D conv with weights known at compile time (aotc/ops/conv.py says which): a tile
 * is up to AOTC_SGEMM_MR output pixels of one output row by the 32 output channels of
 * one strip of W^T, packed at compile time in the packed-B layout. Tap k of the tile's
 * pixels is a run of consecutive floats of a phase plane (the implicit kernel's,
 * koff[k] from each pixel's place), broadcast one by one against the strip's row k.
 * So nothing is unfolded (the rows kernel's cost) and no tile computes the columns
 * past the output (the implicit kernel's). A 1x1 stride-1 unpadded conv's one phase
 * plane per channel is X's plane: it reads X itself, with no copy and no dispatch for
 * it. Pixel groups take each piece of K of a strip in turn, AOTC_CONV_PIXELS_CHUNK at a
 * time, their sums between pieces in a buffer on the stack; the last piece's tile is
 * transposed in registers and stored as runs of the output channels' rows, bias,
 * residual and activation on the way. In ResNet-50 its 3x3 convs at 56x56 and 28x28
 * took 0.92-0.95x the time of the implicit and rows kernels; with weights past L2 (the
 * 14x14 and 7x7 stages) 1.03-1.26x, so those stay on the rows kernel. Each output is
 * one sum over k in order, then + bias, then + the residual: the bits of the other
 * kernels. */

typedef struct {
  aotc_conv_implicit_args_ ph;   /* the phase planes: g, x, xp, sy, sx, hq, wq */
  const float *planes;     /* where the taps are read: ph.xp, or X itself (aotc_conv_reads_x_) */
  const int64_t *koff;     /* tap k of a pixel reads its place in the planes + koff[k] */
  const float *w;          /* this group's W^T, packed */
  const float *bias;       /* NULL, or this group's */
  const float *residual;   /* NULL, or laid out as y, from this image and group on */
  float *y;                /* first output channel of this image and group */
  const aotc_activation *act;
  int64_t per_row, groups, strips;   /* pixel groups per output row and in all; strips */
  int64_t groups_per_task, strips_per_task, group_tasks;
} aotc_conv_pixels_args_;

#if defined(AOTC_SGEMM_PATH_AVX512)
#define AOTC_CONV_PIXELS_STORES_FROM_REGISTERS 1   /* the last piece's tile, transposed */
#else
#define AOTC_CONV_PIXELS_STORES_FROM_REGISTERS 0   /* through its sums, channel by channel */
#endif
#define AOTC_CONV_PIXELS_CHUNK 8   /* pixel groups that take each piece of a strip in turn */
#define AOTC_CONV_PIXELS_PIECE 128   /* rows of K a tile takes at once: a divisor of AOTC_SGEMM_KC */
#define AOTC_CONV_PIXELS_MIN_TASKS 16

/* The rows of K from pc that a tile takes at once: a piece of AOTC_CONV_PIXELS_PIECE, half
 * a K-block, so that a piece of the strip and the tile's inputs (a row of up to 14
 * floats of each input channel, a line or two) stay in L1 together for the chunk's
 * tiles: at K = 256 the whole strip (32 KiB) beside the inputs (up to 32 KiB) outgrew
 * a Xeon's 48 KiB. ResNet-50's 14x14 stage alone (its 256 -> 1024 convs on this
 * kernel) took 0.979x the time at two threads and 0.978x at one (paired, the same
 * bits), those convs 407-429 -> 359-373 us each at two threads; in the whole model,
 * where their weights and residual come from further away, 2-4% less each and the
 * model 0.999x and 0.997x. Pieces of 64: the same as 128. */
AOTC_FN int64_t aotc_conv_pixels_piece_(int64_t K, int64_t pc) {
  return AOTC_MIN(AOTC_CONV_PIXELS_PIECE, K - pc);
}

/* Group `gi` is output row oh's pixels [ow0, ow0 + rows): each row cut evenly. */
AOTC_FN void aotc_conv_pixels_group_(const aotc_conv_pixels_args_ *a, int64_t gi, int64_t *oh,
                                     int64_t *ow0, int64_t *rows) {
  const int64_t ow_n = a->ph.g->out[2], j = gi % a->per_row;
  *oh = gi / a->per_row;
  *ow0 = j * ow_n / a->per_row;
  *rows = (j + 1) * ow_n / a->per_row - *ow0;
}

/* What a tile fetches of the next tile's inputs: `count` of its piece's rows (one per
 * step), each `rows` floats at src + off[k]. */
typedef struct {
  const float *src;
  const int64_t *off;
  int64_t count, rows;
} aotc_conv_pixels_next_;

/* For the tile of group gi (of the chunk from gc, groups below g1) over the piece from
 * pc: the inputs of the task's next tile, which it reads first on the task's first strip
 * (the strips after it find them in L2): the chunk's next group, else the chunk's first
 * group over the next piece, else the next chunk's first group. Each row of a group is
 * up to 14 floats of one input channel, a channel's plane apart from the next: no stream
 * the hardware's prefetch follows (as the rows kernel's X^T: aotc_sgemm_next_a_rows_). */
AOTC_FN void aotc_conv_pixels_next_at_(const aotc_conv_pixels_args_ *a, int64_t gi, int64_t gc, int64_t g1,
                                       int64_t pc, aotc_conv_pixels_next_ *next) {
  const aotc_conv_geom *g = a->ph.g;
  const int64_t K = g->cin_g * g->kernel[1] * g->kernel[2], kc = aotc_conv_pixels_piece_(K, pc);
  int64_t oh, ow0;
  next->count = 0;
  if (gi + 1 < AOTC_MIN(gc + AOTC_CONV_PIXELS_CHUNK, g1)) gi++;
  else if (pc + kc < K) gi = gc, pc += kc;
  else if (gc + AOTC_CONV_PIXELS_CHUNK < g1) gi = gc + AOTC_CONV_PIXELS_CHUNK, pc = 0;
  else return;
  aotc_conv_pixels_group_(a, gi, &oh, &ow0, &next->rows);
  next->src = a->planes + oh * a->ph.wq + ow0;
  next->off = a->koff + pc;
  next->count = AOTC_MIN(kc, aotc_conv_pixels_piece_(K, pc));
}

/* The tile of `rows` pixels over the piece of K from pc of strip s: pixel i's inputs at
 * src + koff[k] + i. It starts from its sums (rows x 32) but on the first piece,
 * leaves them there but on the last, which stores output channels 32 s.. from output
 * pixel `pixel` on. */
AOTC_INLINE_ALWAYS void aotc_conv_pixels_tile_body_(const int rows, const aotc_conv_pixels_args_ *a,
                                                    const float *AOTC_RESTRICT src, int64_t s, int64_t pc,
                                                    float *AOTC_RESTRICT sums, int64_t pixel,
                                                    const aotc_conv_pixels_next_ *next) {
  const aotc_conv_geom *g = a->ph.g;
  const int64_t K = g->cin_g * g->kernel[1] * g->kernel[2], out_px = g->out[1] * g->out[2];
  const int64_t c0 = s * AOTC_SGEMM_NR, cols = AOTC_MIN(AOTC_SGEMM_NR, g->cout_g - c0);
  const int64_t kc = aotc_conv_pixels_piece_(K, pc);
  const float *AOTC_RESTRICT b = a->w + aotc_sgemm_packed_row_(a->strips, K, pc, s);
  const int64_t *off = a->koff + pc;
  aotc_v_ acc[AOTC_SGEMM_MR][AOTC_NV];
  int64_t k, c;
  int i, v;
  AOTC_UNROLL(16)
  for (i = 0; i < rows; i++) {
    AOTC_UNROLL(32)
    for (v = 0; v < AOTC_NV; v++)
      acc[i][v] = pc == 0 ? AOTC_V_ZERO() : AOTC_V_LOAD(sums + i * AOTC_SGEMM_NR + v * AOTC_VW);
  }
  /* The end of the next tile's run in each output channel, fetched for writing while
   * this one computes: a tile writes 32 runs a plane apart, more streams than the
   * hardware prefetcher follows, and each line it starts waited on memory (stems with
   * their output out of cache, paired: MobileNetV2's 3x3 0.78-0.83, ResNet-50's 7x7
   * 0.90-0.95, a 3x3 at 56x56 0.97-1.00; MobileNetV2 0.987). */
  if (pc + kc == K && pixel + rows < out_px)
    for (c = 0; c < cols; c++) AOTC_PREFETCH_W(a->y + (c0 + c) * out_px + pixel + rows + rows - 1);
#define AOTC_CONV_PIXELS_STEP_()                                                  \
  do {                                                                            \
    const float *at = src + off[k];                                               \
    aotc_v_ bv[AOTC_NV];                                                          \
    AOTC_UNROLL(32)                                                               \
    for (v = 0; v < AOTC_NV; v++) bv[v] = AOTC_V_LOAD(b + v * AOTC_VW);           \
    AOTC_UNROLL(16)                                                               \
    for (i = 0; i < rows; i++) {                                                  \
      const aotc_v_ av = AOTC_V_SET1(at[i]);                                      \
      AOTC_UNROLL(32)                                                             \
      for (v = 0; v < AOTC_NV; v++) acc[i][v] = AOTC_V_MADD(av, bv[v], acc[i][v]); \
    }                                                                             \
  } while (0)
  /* the first next->count steps each fetch a row of the next tile's inputs (a ragged
   * strip's padding: +0 weights) */
  for (k = 0; k < next->count; k++, b += AOTC_SGEMM_NR) {
    AOTC_CONV_PIXELS_STEP_();
    AOTC_PREFETCH_L2_SPAN(next->src + next->off[k], next->rows);
  }
  for (; k < kc; k++, b += AOTC_SGEMM_NR) AOTC_CONV_PIXELS_STEP_();
#undef AOTC_CONV_PIXELS_STEP_
  /* the sums kept for the next piece (and, off AVX-512, for the store below) */
  if (pc + kc < K || !AOTC_CONV_PIXELS_STORES_FROM_REGISTERS) {
    AOTC_UNROLL(16)
    for (i = 0; i < rows; i++) {
      AOTC_UNROLL(32)
      for (v = 0; v < AOTC_NV; v++) AOTC_V_STOREN(sums + i * AOTC_SGEMM_NR + v * AOTC_VW, acc[i][v], AOTC_VW);
    }
  }
  if (pc + kc < K) return;
#if !defined(AOTC_SGEMM_PATH_AVX512)
  for (c = 0; c < cols; c++) {   /* each channel's run of pixels read down its column */
    const int64_t at = (c0 + c) * out_px + pixel;
    for (i = 0; i < rows; i++) {
      float sum = sums[i * AOTC_SGEMM_NR + c];
      if (a->bias) sum += a->bias[c0 + c];
      if (a->residual) sum += a->residual[at + i];
      a->y[at + i] = AOTC_CANON_F32(sum);
    }
    aotc_activation_apply(a->act, a->y + at, rows);
  }
#else
  AOTC_UNROLL(2)
  for (v = 0; v < AOTC_NV; v++) {   /* 16 channels at a time, their sums transposed */
    __m512 r[16];
    AOTC_UNROLL(16)
    for (i = 0; i < 16; i++) r[i] = i < rows ? acc[i][v] : _mm512_setzero_ps();
    aotc_v_transpose16_(r);
    for (c = 0; c < 16 && v * 16 + c < cols; c++) {
      const int64_t at = (c0 + v * 16 + c) * out_px + pixel;
      const __m512 sum = a->bias ? _mm512_add_ps(r[c], _mm512_set1_ps(a->bias[c0 + v * 16 + c])) : r[c];
      aotc_conv_store_run_(a->y + at, sum, a->residual ? a->residual + at : NULL, rows, a->act);
    }
  }
#endif
}

typedef void (*aotc_conv_pixels_tile_fn_)(const aotc_conv_pixels_args_ *a, const float *src, int64_t s,
                                          int64_t pc, float *sums, int64_t pixel,
                                          const aotc_conv_pixels_next_ *next);
#define AOTC_CONV_PIXELS_TILE_(R)                                                                  \
  AOTC_NOINLINE void aotc_conv_pixels_tile_##R##_(const aotc_conv_pixels_args_ *a, const float *src, \
                                                   int64_t s, int64_t pc, float *sums, int64_t pixel, \
                                                   const aotc_conv_pixels_next_ *next) {            \
    aotc_conv_pixels_tile_body_(R, a, src, s, pc, sums, pixel, next);                              \
  }
AOTC_SGEMM_EACH_ROWS_(AOTC_CONV_PIXELS_TILE_)
#define AOTC_CONV_PIXELS_TILE_NAME_(R) aotc_conv_pixels_tile_##R##_,

/* Task t: its strips one by one, each over its pixel groups a chunk at a time (with
 * all of K per tile instead, a strip's weights and a stride-2 conv's planes outgrew
 * L2 between the tiles that read them). */
AOTC_FN void aotc_conv_pixels_task_(void *arg, int64_t t) {
  static const aotc_conv_pixels_tile_fn_ tiles[] = {AOTC_SGEMM_EACH_ROWS_(AOTC_CONV_PIXELS_TILE_NAME_)};
  const aotc_conv_pixels_args_ *a = (const aotc_conv_pixels_args_ *)arg;
  const aotc_conv_geom *g = a->ph.g;
  const int64_t K = g->cin_g * g->kernel[1] * g->kernel[2];
  const int64_t g0 = t % a->group_tasks * a->groups_per_task, s0 = t / a->group_tasks * a->strips_per_task;
  const int64_t g1 = AOTC_MIN(g0 + a->groups_per_task, a->groups);
  const int64_t s1 = AOTC_MIN(s0 + a->strips_per_task, a->strips);
  float sums[AOTC_CONV_PIXELS_CHUNK * AOTC_SGEMM_MR * AOTC_SGEMM_NR] AOTC_ALIGNED(64);
  int64_t s, gc, gi, pc;
  for (s = s0; s < s1; s++)
    for (gc = g0; gc < g1; gc += AOTC_CONV_PIXELS_CHUNK)
      for (pc = 0; pc < K; pc += aotc_conv_pixels_piece_(K, pc))
        for (gi = gc; gi < AOTC_MIN(gc + AOTC_CONV_PIXELS_CHUNK, g1); gi++) {
          int64_t oh, ow0, rows;
          aotc_conv_pixels_next_ next;
          aotc_conv_pixels_next_at_(a, gi, gc, g1, pc, &next);
          aotc_conv_pixels_group_(a, gi, &oh, &ow0, &rows);
          tiles[rows - 1](a, a->planes + oh * a->ph.wq + ow0, s, pc,
                          sums + (gi - gc) * AOTC_SGEMM_MR * AOTC_SGEMM_NR, oh * g->out[2] + ow0, &next);
        }
}

#if defined(AOTC_SGEMM_PATH_AVX512)
/* A stem (a short K and few output channels) goes the other way round: runs of 16
 * output pixels of a row a vector, read from the phase planes, times output channels'
 * weights broadcast, so each channel's sums land in vectors stored as they are. The
 * tiles above spent a third of MobileNetV2's 3 -> 32 stem (K = 27) transposing their
 * 14 x 32 sums for the store: alone 0.33 -> 0.27 ms at one thread (onnxruntime's 0.27);
 * ResNet-50's 7x7 stem (K = 147) took 0.95x the time. The same sums in the same order
 * (k in order from +0, then the bias, the residual): the same bits. */
#define AOTC_CONV_PIXELS_VECTORS_MAX_K 160
#define AOTC_CONV_PIXELS_VECTORS_MAX_COUT 64
#define AOTC_CONV_PIXELS_VECTORS_MAX_PV 3   /* pixel vectors a run, at most (below) */
AOTC_FN int aotc_conv_pixels_vectors_fit_(const aotc_conv_geom *g) {
  return g->cin_g * g->kernel[1] * g->kernel[2] <= AOTC_CONV_PIXELS_VECTORS_MAX_K &&
         g->cout_g <= AOTC_CONV_PIXELS_VECTORS_MAX_COUT;
}

/* Output pixels [ow0, ow0 + n) of row oh, `pv` vectors (16 (pv - 1) < n <= 16 pv), by
 * output channels c0 .. c0 + ch of the packed W^T (those past Cout_g read its zero
 * padding and are not stored; c0 % 32 + ch <= 32). Each k loads pv vectors of inputs
 * and broadcasts ch weights for pv * ch products: 3 x 8 loads 11 values for 24, where
 * 1 x 16 loaded 17 for 16 (ResNet-50's stem and max pool: 0.91x the time at one
 * thread and at two). */
AOTC_INLINE_ALWAYS void aotc_conv_pixels_vectors_body_(const int pv, const int ch,
                                                       const aotc_conv_pixels_args_ *a, int64_t oh,
                                                       int64_t ow0, int64_t n, int64_t c0) {
  const aotc_conv_geom *g = a->ph.g;
  const int64_t K = g->cin_g * g->kernel[1] * g->kernel[2], out_px = g->out[1] * g->out[2];
  const int64_t pixel = oh * g->out[2] + ow0;
  const float *AOTC_RESTRICT src = a->planes + oh * a->ph.wq + ow0;
  const float *AOTC_RESTRICT w = a->w + aotc_sgemm_packed_strip_(a->strips, K, 0, c0 / AOTC_SGEMM_NR) +
                                 c0 % AOTC_SGEMM_NR;
  const __mmask16 last = aotc_v_mask_(n - 16 * (pv - 1));
  __m512 acc[AOTC_CONV_PIXELS_VECTORS_MAX_PV][16];
  int64_t k;
  int c, v;
  AOTC_UNROLL(3)
  for (v = 0; v < pv; v++) {
    AOTC_UNROLL(16)
    for (c = 0; c < ch; c++) acc[v][c] = _mm512_setzero_ps();
  }
  for (k = 0; k < K; k++, w += AOTC_SGEMM_NR) {
    const float *x_k = src + a->koff[k];
    __m512 x[AOTC_CONV_PIXELS_VECTORS_MAX_PV];
    AOTC_UNROLL(3)
    for (v = 0; v < pv; v++)
      x[v] = v < pv - 1 ? _mm512_loadu_ps(x_k + 16 * v) : _mm512_maskz_loadu_ps(last, x_k + 16 * v);
    AOTC_UNROLL(16)
    for (c = 0; c < ch; c++) {
      const __m512 wc = _mm512_set1_ps(w[c]);
      AOTC_UNROLL(3)
      for (v = 0; v < pv; v++) acc[v][c] = AOTC_V_MADD(wc, x[v], acc[v][c]);
    }
  }
  AOTC_UNROLL(16)
  for (c = 0; c < ch; c++) {   /* (fixed counts: acc stays in registers) */
    if (c0 + c < g->cout_g) {
      const __m512 b = _mm512_set1_ps(a->bias ? a->bias[c0 + c] : 0.0f);
      AOTC_UNROLL(3)
      for (v = 0; v < pv; v++) {
        const int64_t at = (c0 + c) * out_px + pixel + 16 * v;
        const __m512 sum = a->bias ? _mm512_add_ps(acc[v][c], b) : acc[v][c];
        aotc_conv_store_run_(a->y + at, sum, a->residual ? a->residual + at : NULL,
                             v < pv - 1 ? 16 : n - 16 * (pv - 1), a->act);
      }
    }
  }
}

/* Not inlined: in their caller, six of 16 sums went to the stack at every k (the time
 * 1.5x). */
#define AOTC_CONV_PIXELS_VECTORS_(PV, CH)                                                      \
  AOTC_NOINLINE void aotc_conv_pixels_vectors_##PV##x##CH##_(const aotc_conv_pixels_args_ *a,   \
                                                             int64_t oh, int64_t ow0, int64_t n, \
                                                             int64_t c0) {                       \
    aotc_conv_pixels_vectors_body_(PV, CH, a, oh, ow0, n, c0);                                  \
  }
AOTC_CONV_PIXELS_VECTORS_(3, 8)
AOTC_CONV_PIXELS_VECTORS_(2, 8)
AOTC_CONV_PIXELS_VECTORS_(1, 16)

/* Output rows per task of the vectors path: AOTC_CONV_PIXELS_MIN_TASKS tasks, where the
 * rows allow. */
AOTC_FN int64_t aotc_conv_pixels_vector_rows_(const aotc_conv_geom *g) {
  return aotc_sgemm_div_up_(g->out[1], AOTC_CONV_PIXELS_MIN_TASKS);
}

/* Task t: its output rows (aotc_conv_pixels_vector_rows_), all their pixels and
 * channels; in each row, 16 channels at a time across the row, so that those
 * channels' weights (K rows of a strip's 16 columns, 9.4 KiB for a 7x7 stem) stay in L1
 * beside the row's inputs. With every channel at each 16 pixels in turn (the weights of
 * 64 channels, 38 KiB, beside 19 KiB of inputs), ResNet-50's stem and max pool took
 * 1.05x the time at one thread and 1.08x at two. The 16 go as two runs of 8 channels
 * over the row's runs of 48 pixels; its last 1 to 32 pixels as 2 vectors by 8 channels
 * or 1 by 16. */
AOTC_FN void aotc_conv_pixels_vectors_task_(void *arg, int64_t t) {
  const aotc_conv_pixels_args_ *a = (const aotc_conv_pixels_args_ *)arg;
  const aotc_conv_geom *g = a->ph.g;
  const int64_t ow_n = g->out[2], rows = aotc_conv_pixels_vector_rows_(g);
  const int64_t r1 = AOTC_MIN((t + 1) * rows, g->out[1]), whole = ow_n - ow_n % 48, rest = ow_n - whole;
  int64_t oh, ow0, c16, c0;
  for (oh = t * rows; oh < r1; oh++)
    for (c16 = 0; c16 < g->cout_g; c16 += 16) {
      for (c0 = c16; c0 < AOTC_MIN(c16 + 16, g->cout_g); c0 += 8)
        for (ow0 = 0; ow0 < whole; ow0 += 48) aotc_conv_pixels_vectors_3x8_(a, oh, ow0, 48, c0);
      if (rest > 16)
        for (c0 = c16; c0 < AOTC_MIN(c16 + 16, g->cout_g); c0 += 8)
          aotc_conv_pixels_vectors_2x8_(a, oh, whole, rest, c0);
      else if (rest > 0)
        aotc_conv_pixels_vectors_1x16_(a, oh, whole, rest, c16);
    }
}
#endif

/* The fixed split of g's tiles: where the weights outweigh the phase planes, a task is
 * one strip over all the pixels, so each strip comes from memory once; otherwise a run
 * of pixel groups over all the strips, the weights coming again from L2. */
AOTC_FN void aotc_conv_pixels_split_(const aotc_conv_geom *g, aotc_conv_pixels_args_ *a) {
  const int64_t weights = g->cin_g * g->kernel[1] * g->kernel[2] * g->cout_g;
  a->per_row = aotc_sgemm_div_up_(g->out[2], AOTC_SGEMM_MR);
  a->groups = g->out[1] * a->per_row;
  a->strips = aotc_sgemm_div_up_(g->cout_g, AOTC_SGEMM_NR);
  if (weights >= aotc_conv_planes_floats_(g, &a->ph)) {
    a->groups_per_task = a->groups;
    a->strips_per_task = 1;
  } else {
    a->groups_per_task = aotc_sgemm_div_up_(a->groups, AOTC_CONV_PIXELS_MIN_TASKS);
    a->strips_per_task = a->strips;
  }
  a->group_tasks = aotc_sgemm_div_up_(a->groups, a->groups_per_task);
}

/* Bytes of the phase planes the kernel copies X into: none where it reads X itself. */
AOTC_FN size_t aotc_conv_pixels_planes_bytes_(const aotc_conv_geom *g, const aotc_conv_implicit_args_ *a) {
  return aotc_conv_reads_x_(g) ? 0 : aotc_conv_implicit_bytes_(aotc_conv_planes_floats_(g, a));
}

/* Scratch: the phase planes, then the K tap offsets; each 64-byte aligned. */
AOTC_FN size_t aotc_conv_pixels_scratch_bytes(const aotc_conv_geom *g) {
  aotc_conv_implicit_args_ a;
  aotc_conv_implicit_shape_(g, &a);
  return aotc_conv_pixels_planes_bytes_(g, &a) + aotc_conv_implicit_bytes_(2 * g->cin_g * g->kernel[1] * g->kernel[2]);
}

AOTC_ENGINE_FN void aotc_conv_pixels(aotc_pool *pool, const aotc_conv_geom *g, const float *x,
                                     const float *w, const float *bias, const float *residual,
                                     float *y, const aotc_activation *act, unsigned char *scratch) {
  const int reads_x = aotc_conv_reads_x_(g);   /* its one phase plane per channel is X's */
  aotc_conv_pixels_args_ a;
  int64_t n, grp, *koff;
  memset(&a, 0, sizeof a);
  aotc_conv_implicit_shape_(g, &a.ph);
  a.ph.g = g;
  a.ph.xp = (float *)(void *)scratch;
  koff = (int64_t *)(void *)(scratch + aotc_conv_pixels_planes_bytes_(g, &a.ph));
  aotc_conv_tap_offsets_(g, &a.ph, koff);
  a.koff = koff;
  a.act = act;
  aotc_conv_pixels_split_(g, &a);
  for (n = 0; n < g->batch; n++)
    for (grp = 0; grp < g->group; grp++) {
      a.ph.x = x + aotc_conv_x_at_(g, n, grp);
      a.y = y + aotc_conv_y_at_(g, n, grp);
      a.residual = residual ? residual + aotc_conv_y_at_(g, n, grp) : NULL;
      a.w = w + grp * aotc_sgemm_packed_b_floats(g->cout_g, g->cin_g * g->kernel[1] * g->kernel[2]);
      a.bias = bias ? bias + grp * g->cout_g : NULL;
      a.planes = reads_x ? a.ph.x : a.ph.xp;
      if (!reads_x) aotc_parallel_for(pool, aotc_conv_phase_tasks_(g, &a.ph), aotc_conv_phases_task_, &a.ph);
#if defined(AOTC_SGEMM_PATH_AVX512)
      if (aotc_conv_pixels_vectors_fit_(g)) {
        aotc_parallel_for(pool, aotc_sgemm_div_up_(g->out[1], aotc_conv_pixels_vector_rows_(g)),
                          aotc_conv_pixels_vectors_task_, &a);
        continue;
      }
#endif
      aotc_parallel_for(pool, a.group_tasks * aotc_sgemm_div_up_(a.strips, a.strips_per_task),
                        aotc_conv_pixels_task_, &a);
    }
}

/* ---- pixels as rows: Y^T = unfold(X)^T W^T, the weights as the GEMM's B ---------- */

/* For convs whose weights outweigh their output pixels (the deep layers), the product
 * runs the other way round: rows are output pixels, columns output channels, so the
 * weights are the GEMM's B operand and come packed from compile time (or, for run-time
 * weights, W [Cout_g, K] is B stored transposed). Pixels are cut into tiles; a tile's
 * input is unfolded into the GEMM's packed-A layout (a 1x1 stride-1 unpadded conv reads
 * X itself as A transposed): where the pixels are at least the output channels, the
 * GEMM unfolds each panel (one K-block of its rows) right before the tiles that read
 * it, so it goes to them through L1 and the unfolded matrix is never stored (ResNet-50's
 * 28x28 3x3 conv and stride-2 56x56 one 5% and 9% faster). With fewer pixels than
 * channels the whole tile is unfolded into scratch first, and the GEMM's tasks are
 * strips of channels over all its pixels, so the weights come from memory once. Made
 * panel by panel, the tasks were the few panels (a GEMM task that makes A makes each of
 * its panels once more), each reading all the weights: ResNet-50's 3x3 convs at 7x7
 * (4 panels, 9.4 MB of weights) took 2.10-2.29 ms each at one thread that way and
 * 1.75-1.90 stored, the model 0.954x the time at one thread and 0.965x at two; its
 * 1024 -> 2048 strided 1x1 conv had taken 1.03x the time made per panel. The tile's
 * product [tile, Cout_g] lands in scratch with bias and activation applied, each GEMM
 * tile of it stored transposed into Y (NCHW) as soon as it is done, adding the residual
 * first when there is one (then the activation runs at the store, after the add). */

typedef struct {
  const aotc_conv_geom *g;
  const float *x;          /* first input channel of this image and group */
  int64_t first;           /* the tile's first output pixel */
  float *packed;           /* where the whole tile [cols, K] is unfolded, if it is */
  int64_t cols, k, panels;
  int far;                 /* aotc_pool_far: each task takes its panel's lines first */
} aotc_conv_unfold_args_;

/* Whether the rows kernel's GEMM unfolds each panel as it goes (see above). */
AOTC_FN int aotc_conv_rows_unfold_panels_(const aotc_conv_geom *g) {
  return aotc_conv_volume_(g->out) >= g->cout_g;
}

/* For each of `count` input channels (in_plane apart in src, dst_step apart in dst):
 * dst[i] = src[i * sw] for i < n, 0 for the lanes i outside [lo, hi) (the padding). */
AOTC_FN void aotc_conv_unfold_runs_(float *AOTC_RESTRICT dst, int64_t dst_step,
                                    const float *AOTC_RESTRICT src, int64_t in_plane,
                                    int64_t count, int64_t sw, int64_t n, int64_t lo, int64_t hi) {
  int64_t c, i;
#if defined(AOTC_SGEMM_PATH_AVX512)
  if (n <= 16 && sw <= 2) {   /* one masked vector each (stride 2: even lanes of two) */
    const __mmask16 inside = (__mmask16)(aotc_v_mask_(hi) & ~aotc_v_mask_(lo)), out = aotc_v_mask_(n);
    if (sw == 1) {
      for (c = 0; c < count; c++, src += in_plane, dst += dst_step)
        _mm512_mask_storeu_ps(dst, out, _mm512_maskz_loadu_ps(inside, src));
    } else {
      const __m512i evens = aotc_conv_even_lanes_();
      const __mmask16 inside_lo = (__mmask16)(aotc_v_mask_(2 * hi - 1) & ~aotc_v_mask_(2 * lo));
      const __mmask16 inside_hi = (__mmask16)(aotc_v_mask_(2 * hi - 17) & ~aotc_v_mask_(2 * lo - 16));
      for (c = 0; c < count; c++, src += in_plane, dst += dst_step)
        _mm512_mask_storeu_ps(dst, out, _mm512_maskz_mov_ps(inside, _mm512_permutex2var_ps(
                                  _mm512_maskz_loadu_ps(inside_lo, src), evens,
                                  _mm512_maskz_loadu_ps(inside_hi, src + 16))));
    }
    return;
  }
#endif
  for (c = 0; c < count; c++, src += in_plane, dst += dst_step)
    for (i = 0; i < n; i++) dst[i] = i >= lo && i < hi ? src[i * sw] : 0.0f;
}

/* The GEMM's A maker (aotc_sgemm_a_maker): rows k = (input channel, kz, ky, kx) in
 * [pc, pc + kc) of the unfolded matrix over the tile's pixels [start, start + rows),
 * k-major into `panel`, with the padding as zeros. The pixels are cut into runs along
 * output rows; for each run and tap, the block's rows of that tap (one per input
 * channel) are one strided loop of copies with the same mask. */
AOTC_FN void aotc_conv_unfold_panel_(const void *ctx, float *panel, int64_t pc, int64_t kc,
                                     int64_t start, int64_t rows) {
  const aotc_conv_unfold_args_ *a = (const aotc_conv_unfold_args_ *)ctx;
  const aotc_conv_geom *g = a->g;
  const int64_t ow_n = g->out[2], sw = g->stride[2];
  const int64_t kvol = aotc_conv_volume_(g->kernel), in_plane = aotc_conv_volume_(g->in);
  int64_t p, end, tap;
  for (p = a->first + start, end = p + rows; p < end;) {   /* one run: pixels [p, p + n) */
    const int64_t row = p / ow_n, ow0 = p % ow_n, n = AOTC_MIN(ow_n - ow0, end - p);
    const int64_t oz = row / g->out[1], oy = row % g->out[1];
    float *run = panel + (p - a->first - start);
    for (tap = 0; tap < kvol; tap++) {
      const int64_t kz = tap / (g->kernel[1] * g->kernel[2]), ky = tap / g->kernel[2] % g->kernel[1];
      const int64_t kx = tap % g->kernel[2];
      const int64_t iz = oz * g->stride[0] - g->pad[0] + kz * g->dilation[0];
      const int64_t iy = oy * g->stride[1] - g->pad[1] + ky * g->dilation[1];
      const int64_t offset = kx * g->dilation[2] - g->pad[2];
      /* the block's rows of this tap: input channels [c0, c1) */
      const int64_t c0 = aotc_conv_first_at_least_(tap, kvol, pc);
      const int64_t c1 = aotc_conv_first_at_least_(tap, kvol, pc + kc);
      float *dst = run + (c0 * kvol + tap - pc) * rows;
      const float *src = a->x + c0 * in_plane;   /* read nowhere when the run is padding */
      int64_t lo = 0, hi = 0;
      if (c1 <= c0) continue;
      if (iz >= 0 && iz < g->in[0] && iy >= 0 && iy < g->in[1]) {
        aotc_conv_valid_range_(offset, sw, g->in[2], ow_n, &lo, &hi);
        lo = AOTC_MIN(AOTC_MAX(lo - ow0, 0), n);
        hi = AOTC_MAX(AOTC_MIN(hi - ow0, n), lo);
        src += (iz * g->in[1] + iy) * g->in[2] + ow0 * sw + offset;
      }
      aotc_conv_unfold_runs_(dst, kvol * rows, src, in_plane, c1 - c0, sw, n, lo, hi);
    }
    p += n;
  }
}

/* Row panel `t % panels` of K-block `t / panels` of the whole tile, into packed. */
AOTC_FN void aotc_conv_unfold_task_(void *arg, int64_t t) {
  const aotc_conv_unfold_args_ *a = (const aotc_conv_unfold_args_ *)arg;
  const int64_t pc = t / a->panels * AOTC_SGEMM_KC, kc = AOTC_MIN(AOTC_SGEMM_KC, a->k - pc);
  int64_t start, rows;
  float *panel;
  aotc_sgemm_panel_(a->cols, 1, t % a->panels, &start, &rows);   /* (packed A: even panels) */
  panel = a->packed + aotc_sgemm_a_panel_(a->cols, a->k, pc, start);
  /* both threads read the whole tile: every line is the other's too */
  aotc_take_range(a->far, panel, (size_t)(kc * rows) * sizeof(float));
  aotc_conv_unfold_panel_(a, panel, pc, kc, start, rows);
}

typedef struct {
  const float *residual;   /* NULL, or laid out as y */
  const aotc_activation *act;   /* applied here only with a residual */
  float *y;                /* channel 0, pixel 0 of the tile; channel stride pixels */
  int64_t pixels;
} aotc_conv_store_args_;

/* The GEMM's finished tile of pixels [i0, i0 + rows) by channels [j0, j0 + cols) of the
 * product at c (row stride ldc), stored transposed into y by the thread that computed it
 * (an aotc_sgemm_c_taker): 16 x 16 blocks at a time, in registers on AVX-512, then the
 * residual and activation (on AVX-512 still in registers when the activation is none,
 * Relu or Clip). As a pass of its own after the product (a dispatch more, and each
 * thread reading tiles the other had computed) MobileNetV2 took 1.007x the time at two
 * threads; the transposed store itself is about 3% of it there (0.963x with none). */
AOTC_FN void aotc_conv_store_tile_(const void *ctx, const float *c, int64_t ldc, int64_t i0, int64_t rows,
                                   int64_t j0, int64_t cols) {
  const aotc_conv_store_args_ *a = (const aotc_conv_store_args_ *)ctx;
  int64_t p0, c0, i, ch;
  for (p0 = 0; p0 < rows; p0 += 16) {
    const int64_t np = AOTC_MIN(16, rows - p0);
    for (c0 = 0; c0 < cols; c0 += 16) {
      const int64_t nc = AOTC_MIN(16, cols - c0);
      const int64_t at = (j0 + c0) * a->pixels + i0 + p0;   /* y's offset of the block's start */
#if defined(AOTC_SGEMM_PATH_AVX512)
      __m512 r[16];
      for (i = 0; i < 16; i++)   /* row i: pixel p0 + i, channels c0.. */
        r[i] = i < np ? _mm512_maskz_loadu_ps(aotc_v_mask_(nc), c + (p0 + i) * ldc + c0) : _mm512_setzero_ps();
      aotc_v_transpose16_(r);
      for (ch = 0; ch < nc; ch++) {
        float *dst = a->y + at + ch * a->pixels;
        if (a->residual)   /* the add in registers, and the activation too where it can */
          aotc_conv_store_run_(dst, r[ch], a->residual + at + ch * a->pixels, np, a->act);
        else
          _mm512_mask_storeu_ps(dst, aotc_v_mask_(np), r[ch]);
      }
#else
      for (ch = 0; ch < nc; ch++) {
        const float *src = c + p0 * ldc + c0 + ch;
        const float *res = a->residual ? a->residual + at + ch * a->pixels : NULL;
        float *dst = a->y + at + ch * a->pixels;
        for (i = 0; i < np; i++) dst[i] = res ? AOTC_CANON_F32(src[i * ldc] + res[i]) : src[i * ldc];
        if (res) aotc_activation_apply(a->act, dst, np);
      }
#endif
    }
  }
}

AOTC_FN size_t aotc_conv_round64_(size_t n) { return (n + 63u) / 64u * 64u; }

AOTC_ENGINE_FN void aotc_conv_rows(aotc_pool *pool, const aotc_conv_geom *g, int64_t tile,
                                   const float *x, const float *w, int w_packed, const float *bias,
                                   const float *residual, float *y, const aotc_activation *act,
                                   unsigned char *scratch) {
  int64_t in_px = aotc_conv_volume_(g->in), out_px = aotc_conv_volume_(g->out);
  int64_t k = g->cin_g * aotc_conv_volume_(g->kernel), n, grp;
  int reads_x = aotc_conv_reads_x_(g);
  float *ctile = (float *)(void *)scratch;
  size_t ctile_bytes = aotc_conv_round64_((size_t)(tile * g->cout_g) * sizeof(float));
  int by_panel = aotc_conv_rows_unfold_panels_(g);
  float *unfolded = (float *)(void *)(scratch + ctile_bytes);
  unsigned char *gemm_scratch = scratch + ctile_bytes +
      (reads_x || by_panel ? 0 : aotc_conv_round64_((size_t)(k * tile) * sizeof(float)));
  aotc_conv_unfold_args_ u;
  const aotc_sgemm_a_maker unfold = {aotc_conv_unfold_panel_, &u};
  aotc_conv_store_args_ s;
  const aotc_sgemm_c_taker store = {aotc_conv_store_tile_, &s};
  u.g = g;
  u.k = k;
  s.pixels = out_px;
  s.act = act;
  for (n = 0; n < g->batch; n++)
    for (grp = 0; grp < g->group; grp++) {
      const float *xg = x + aotc_conv_x_at_(g, n, grp);
      const float *bg = bias ? bias + grp * g->cout_g : NULL;
      int64_t yoff = aotc_conv_y_at_(g, n, grp), first;
      for (first = 0; first < out_px; first += tile) {
        int64_t cols = AOTC_MIN(tile, out_px - first);
        const float *wg = w + grp * (w_packed ? aotc_sgemm_packed_b_floats(g->cout_g, k) : g->cout_g * k);
        aotc_sgemm_extras extras = {.take_c = &store};
        u.x = xg;
        s.y = y + yoff + first;
        s.residual = residual ? residual + yoff + first : NULL;
        u.first = first;
        if (!reads_x && by_panel) {
          extras.make_a = &unfold;
        } else if (!reads_x) {
          u.packed = unfolded;
          u.cols = cols;
          u.panels = aotc_sgemm_panels_(cols);
          u.far = aotc_pool_far(pool);
          aotc_parallel_for(pool, aotc_sgemm_div_up_(k, AOTC_SGEMM_KC) * u.panels, aotc_conv_unfold_task_, &u);
          extras.packed_a = unfolded;
        }
        /* A is X^T where the conv reads X itself, else unfolded; W^T is B, packed at
         * compile time or stored transposed */
        aotc_sgemm_run_(pool, cols, g->cout_g, k, xg + first, in_px, 1, w_packed ? NULL : wg, k, 1,
                        w_packed ? wg : NULL, ctile, g->cout_g, NULL, bg, residual ? NULL : act, &extras,
                        gemm_scratch);
      }
    }
}

#endif /* AOTC_ENGINE_EXTERN */

#endif
