/* aotc runtime: the conv's element types other than float32.
 *
 * A double conv sums each output directly in double (aotc_conv_f64). A float16 /
 * bfloat16 conv widens its operands into float32 scratch (exactly), runs
 * the float32 kernel and rounds each result once on the store. With a fused
 * activation the sum is rounded first, widened again and only then activated and
 * rounded: the bits of the separate Conv and activation operators. */
#ifndef AOTC_CONV_TYPES_H_
#define AOTC_CONV_TYPES_H_

#include "aotc_base.h"
#include "aotc_half.h"
#include "aotc_conv.h"

/* v = float(round(v)) in place: the value the 16-bit tensor would hold. */
AOTC_FN void aotc_stage_round_f16(float *v, int64_t n) {
  int64_t i;
  for (i = 0; i < n; i++) v[i] = aotc_f16_to_f32(aotc_f32_to_f16(v[i]));
}

AOTC_FN void aotc_stage_round_bf16(float *v, int64_t n) {
  int64_t i;
  for (i = 0; i < n; i++) v[i] = aotc_bf16_to_f32(aotc_f32_to_bf16(v[i]));
}

/* ---- double: a direct sum per output ------------------------------------------------ */

/* Each output: +0, plus w * x over the taps inside the input in (input channel, kz, ky,
 * kx) order, in double, then + bias; one task per (image, output channel). */
typedef struct {
  const aotc_conv_geom *g;
  const double *x, *w, *bias;
  double *y;
} aotc_conv_f64_args_;

AOTC_FN void aotc_conv_f64_task_(void *arg, int64_t channel) {
  const aotc_conv_f64_args_ *a = (const aotc_conv_f64_args_ *)arg;
  const aotc_conv_geom *g = a->g;
  int64_t cout = g->cout_g * g->group, co = channel % cout, n = channel / cout;
  int64_t in_px = aotc_conv_volume_(g->in), kvol = aotc_conv_volume_(g->kernel);
  const double *xg = a->x + (n * g->group + co / g->cout_g) * g->cin_g * in_px;
  const double *wk = a->w + co * g->cin_g * kvol;
  double *y = a->y + channel * aotc_conv_volume_(g->out);
  int64_t od, oh, ow, ci, kz, ky, kx;
  for (od = 0; od < g->out[0]; od++)
    for (oh = 0; oh < g->out[1]; oh++)
      for (ow = 0; ow < g->out[2]; ow++) {
        double acc = 0.0;
        for (ci = 0; ci < g->cin_g; ci++)
          for (kz = 0; kz < g->kernel[0]; kz++) {
            int64_t iz = od * g->stride[0] - g->pad[0] + kz * g->dilation[0];
            if (iz < 0 || iz >= g->in[0]) continue;
            for (ky = 0; ky < g->kernel[1]; ky++) {
              int64_t iy = oh * g->stride[1] - g->pad[1] + ky * g->dilation[1];
              const double *src, *wx;
              if (iy < 0 || iy >= g->in[1]) continue;
              src = xg + ((ci * g->in[0] + iz) * g->in[1] + iy) * g->in[2];
              wx = wk + ((ci * g->kernel[0] + kz) * g->kernel[1] + ky) * g->kernel[2];
              for (kx = 0; kx < g->kernel[2]; kx++) {
                int64_t iw = ow * g->stride[2] - g->pad[2] + kx * g->dilation[2];
                if (iw >= 0 && iw < g->in[2]) acc += wx[kx] * src[iw];
              }
            }
          }
        if (a->bias) acc += a->bias[co];
        y[(od * g->out[1] + oh) * g->out[2] + ow] = AOTC_CANON_F64(acc);
      }
}

AOTC_FN void aotc_conv_f64(aotc_pool *pool, const aotc_conv_geom *g, const double *x,
                           const double *w, const double *bias, double *y) {
  aotc_conv_f64_args_ a;
  a.g = g;
  a.x = x;
  a.w = w;
  a.bias = bias;
  a.y = y;
  aotc_parallel_for(pool, g->batch * g->group * g->cout_g, aotc_conv_f64_task_, &a);
}

#endif
