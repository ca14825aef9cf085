/* aotc runtime: reference kernels of linear quantization (QuantizeLinear,
 * DequantizeLinear, DynamicQuantizeLinear) and of integer matmul and conv
 * (MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv).
 *
 * Integer products are summed exactly (int64, stored wrapped to int32 as ONNX's int32
 * outputs do); rounding to the quantized grid is rint (half to even in the default
 * rounding mode) and saturates to the type's range, NaN giving the zero point.
 *
 * Scales and zero points: a tensor is seen as [outer, D, inner] around the quantized
 * axis; its parameter for element (o, a, i) is one value (D = 1), the value of index a
 * (per axis) or, blocked, the value (o, a / block, i) of a [outer, ceil(D / block),
 * inner] tensor. */
#ifndef AOTC_QUANT_H_
#define AOTC_QUANT_H_

#include "aotc_base.h"
#include "aotc_elementwise.h"

AOTC_FN int64_t aotc_qparam_index(int64_t o, int64_t a, int64_t i, int64_t d, int64_t inner,
                                  int64_t block, int blocked) {
  if (!blocked) return a;
  return (o * ((d + block - 1) / block) + a / block) * inner + i;
}

/* rint(v) + zp saturated to [lo, hi]; NaN gives zp. */
AOTC_FN double aotc_quantize_value(double v, double zp, double lo, double hi) {
  double r;
  if (v != v) return zp;
  r = rint(v) + zp;
  return r < lo ? lo : (r > hi ? hi : r);
}

/* The statements after the layout once per element k__ of an (outer, d, inner) tensor,
 * with q__ the index of that element's scale and zero point. */
#define AOTC_QPARAM_FOR_EACH_(outer_, d_, inner_, block_, blocked_, ...)              \
  do {                                                                               \
    int64_t o__, a__, i__, k__ = 0;                                                  \
    for (o__ = 0; o__ < (outer_); o__++)                                             \
      for (a__ = 0; a__ < (d_); a__++)                                               \
        for (i__ = 0; i__ < (inner_); i__++, k__++) {                                \
          int64_t q__ = aotc_qparam_index(o__, a__, i__, (d_), (inner_), (block_), (blocked_)); \
          __VA_ARGS__                                                                \
        }                                                                            \
  } while (0)

/* y = EXPR for each element, where EXPR sees V = x / scale (in float, ONNX's float32
 * division) and Z = the zero point in its compute type (0 without one); the caller's
 * EXPR rounds and saturates for integer outputs, converts for the narrow floats. */
#define AOTC_QUANTIZE_LINEAR(TY, TX, TS, TZ, y_, x_, s_, zp_, outer_, d_, inner_, block_, blocked_, EXPR) \
  do {                                                                               \
    TY *y__ = (y_);                                                                  \
    const TX *x__ = (x_);                                                            \
    const TS *s__ = (s_);                                                            \
    const TZ *zp__ = (zp_);                                                          \
    AOTC_QPARAM_FOR_EACH_(outer_, d_, inner_, block_, blocked_,                      \
      const float V = (float)AOTC_LD_##TX(x__[k__]) / (float)AOTC_LD_##TS(s__[q__]);   \
      const AOTC_CT_##TZ Z = zp__ ? AOTC_LD_##TZ(zp__[q__]) : (AOTC_CT_##TZ)0;         \
      (void)Z;                                                                       \
      y__[k__] = (EXPR););                                                           \
  } while (0)

/* y = (x - zp) * scale, the difference in float (as ONNX's reference), rounded once. */
#define AOTC_DEQUANTIZE_LINEAR(TY, TX, TS, y_, x_, s_, zp_, outer_, d_, inner_, block_, blocked_) \
  do {                                                                               \
    TY *y__ = (y_);                                                                  \
    const TX *x__ = (x_);                                                            \
    const TS *s__ = (s_);                                                            \
    const TX *zp__ = (zp_);                                                          \
    AOTC_QPARAM_FOR_EACH_(outer_, d_, inner_, block_, blocked_,                      \
      float d__ = (float)AOTC_LD_##TX(x__[k__]) - (zp__ ? (float)AOTC_LD_##TX(zp__[q__]) : 0.0f); \
      y__[k__] = AOTC_ST_##TY(d__ * (float)AOTC_LD_##TS(s__[q__])););               \
  } while (0)

/* DynamicQuantizeLinear to uint8: the range [min(x, 0), max(x, 0)] onto [0, 255]. */
AOTC_FN void aotc_dynamic_quantize_u8(const float *x, int64_t n, uint8_t *y, float *scale,
                                      uint8_t *zero_point) {
  float lo = 0.0f, hi = 0.0f, s, zp;
  int64_t i;
  for (i = 0; i < n; i++) {
    if (x[i] < lo) lo = x[i];
    if (x[i] > hi) hi = x[i];
  }
  s = (hi == lo ? 1.0f : hi - lo) / 255.0f;
  zp = 0.0f - lo / s;
  zp = (float)aotc_quantize_value((double)zp, 0.0, 0.0, 255.0);
  for (i = 0; i < n; i++) y[i] = (uint8_t)aotc_quantize_value((double)(x[i] / s), zp, 0.0, 255.0);
  *scale = s;
  *zero_point = (uint8_t)zp;
}

/* dst = src - zp as int32, the zero point per index a of [outer, D, inner] (NULL: 0). */
#define AOTC_WIDEN_SUB(TX, dst_, src_, zp_, n_, d_, inner_)                          \
  do {                                                                               \
    int32_t *dst__ = (dst_);                                                         \
    const TX *src__ = (src_);                                                        \
    const TX *zp__ = (zp_);                                                          \
    int64_t k__;                                                                     \
    for (k__ = 0; k__ < (n_); k__++)                                                 \
      dst__[k__] = (int32_t)src__[k__] - (zp__ ? (int32_t)zp__[(k__ / (inner_)) % (d_)] : 0); \
  } while (0)

/* Sum of products, exact in int64, stored as int32 with wrap-around. */
AOTC_FN int32_t aotc_wrap_i32(int64_t v) {
  uint32_t u = (uint32_t)((uint64_t)v & 0xFFFFFFFFu);
  return u <= 0x7FFFFFFFu ? (int32_t)u : (int32_t)(int64_t)((int64_t)u - 4294967296LL);
}

/* y[b] = a[a_off[b]] (M x K) times b[b_off[b]] (K x N), for each of `batches`. */
AOTC_FN void aotc_matmul_i32(const int32_t *a, const int32_t *b, int32_t *y, int64_t batches,
                             const int64_t *a_off, const int64_t *b_off, int64_t m, int64_t k,
                             int64_t n) {
  int64_t t, i, j, p;
  for (t = 0; t < batches; t++) {
    const int32_t *at = a + a_off[t], *bt = b + b_off[t];
    int32_t *yt = y + t * m * n;
    for (i = 0; i < m; i++)
      for (j = 0; j < n; j++) {
        int64_t acc = 0;
        for (p = 0; p < k; p++) acc += (int64_t)at[i * k + p] * bt[p * n + j];
        yt[i * n + j] = aotc_wrap_i32(acc);
      }
  }
}

/* Direct integer conv over zero-point-free int32 operands (padding contributes 0). */
typedef struct aotc_qconv_geom {
  int64_t batch, group, cin_g, cout_g;
  int64_t in[3], out[3], kernel[3], stride[3], dilation[3], pad[3];
} aotc_qconv_geom;

AOTC_FN void aotc_conv_i32(const aotc_qconv_geom *g, const int32_t *x, const int32_t *w,
                           const int32_t *bias, int32_t *y) {
  const int64_t in_px = g->in[0] * g->in[1] * g->in[2];
  const int64_t out_px = g->out[0] * g->out[1] * g->out[2];
  const int64_t k_px = g->kernel[0] * g->kernel[1] * g->kernel[2];
  int64_t n, gr, m, od, oh, ow, c, kd, kh, kw;
  for (n = 0; n < g->batch; n++)
    for (gr = 0; gr < g->group; gr++)
      for (m = 0; m < g->cout_g; m++) {
        const int64_t oc = gr * g->cout_g + m;
        const int32_t *wm = w + oc * g->cin_g * k_px;
        int32_t *ym = y + (n * g->group * g->cout_g + oc) * out_px;
        for (od = 0; od < g->out[0]; od++)
          for (oh = 0; oh < g->out[1]; oh++)
            for (ow = 0; ow < g->out[2]; ow++) {
              int64_t acc = bias ? bias[oc] : 0;
              for (c = 0; c < g->cin_g; c++) {
                const int32_t *xc = x + (n * g->group * g->cin_g + gr * g->cin_g + c) * in_px;
                const int32_t *wc = wm + c * k_px;
                for (kd = 0; kd < g->kernel[0]; kd++) {
                  const int64_t id = od * g->stride[0] + kd * g->dilation[0] - g->pad[0];
                  if (id < 0 || id >= g->in[0]) continue;
                  for (kh = 0; kh < g->kernel[1]; kh++) {
                    const int64_t ih = oh * g->stride[1] + kh * g->dilation[1] - g->pad[1];
                    if (ih < 0 || ih >= g->in[1]) continue;
                    for (kw = 0; kw < g->kernel[2]; kw++) {
                      const int64_t iw = ow * g->stride[2] + kw * g->dilation[2] - g->pad[2];
                      if (iw < 0 || iw >= g->in[2]) continue;
                      acc += (int64_t)xc[(id * g->in[1] + ih) * g->in[2] + iw] *
                             wc[(kd * g->kernel[1] + kh) * g->kernel[2] + kw];
                    }
                  }
                }
              }
              ym[(od * g->out[1] + oh) * g->out[2] + ow] = aotc_wrap_i32(acc);
            }
      }
}

/* y = saturate(rint(acc * multiplier[(k / inner) % D]) + zp): the requantization step
 * of QLinearMatMul / QLinearConv, multiplier computed by the caller. */
#define AOTC_REQUANTIZE(TY, y_, acc_, mult_, zp_, n_, d_, inner_, lo_, hi_)           \
  do {                                                                               \
    TY *y__ = (y_);                                                                  \
    const int32_t *acc__ = (acc_);                                                   \
    const double *mult__ = (mult_);                                                  \
    int64_t k__;                                                                     \
    for (k__ = 0; k__ < (n_); k__++)                                                 \
      y__[k__] = (TY)aotc_quantize_value((double)acc__[k__] * mult__[(k__ / (inner_)) % (d_)], \
                                         (double)(zp_), (lo_), (hi_));               \
  } while (0)

/* mult[c] = a_scale * b_scale[c] / y_scale (b_scale per channel when per_channel),
 * each operation rounded in the scales' own type as ONNX's reference does. */
#define AOTC_QLINEAR_MULTIPLIER(TS, mult_, as_, bs_, ys_, count_, per_channel_)        \
  do {                                                                               \
    double *mult__ = (mult_);                                                        \
    int64_t c__;                                                                     \
    for (c__ = 0; c__ < (count_); c__++) {                                           \
      AOTC_CT_##TS p__ = AOTC_LD_##TS(AOTC_ST_##TS(AOTC_LD_##TS((as_)[0]) *           \
                                                    AOTC_LD_##TS((bs_)[(per_channel_) ? c__ : 0]))); \
      mult__[c__] = (double)AOTC_LD_##TS(AOTC_ST_##TS(p__ / AOTC_LD_##TS((ys_)[0]))); \
    }                                                                                \
  } while (0)

#endif
