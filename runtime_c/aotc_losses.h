/* aotc runtime: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
 *
 * Inputs are viewed as x [n, c, d] (d = product of the trailing dims), target [n, d]
 * (int32 or int64), optional weight [c]. Each variant is defined for one storage type
 * T with its compute type CT (float for float16 and bfloat16): values are loaded into
 * CT, sums run in double in a fixed order, and results are rounded once on store.
 * A target outside [0, c) that is not ignore_index makes the node return
 * AOTC_ERR_INDEX before the loss is written. */
#ifndef AOTC_LOSSES_H_
#define AOTC_LOSSES_H_

#include "aotc_base.h"
#include "aotc_elementwise.h"

#define AOTC_LOSS_NONE 0
#define AOTC_LOSS_SUM 1
#define AOTC_LOSS_MEAN 2

AOTC_FN int64_t aotc_loss_target_(const void *target, int target_is_64, int64_t i) {
  return target_is_64 ? ((const int64_t *)target)[i] : (int64_t)((const int32_t *)target)[i];
}

/* AOTC_OK when every target is a class in [0, c) or (has_ignore) ignore_index. */
AOTC_FN int aotc_loss_check_targets(const void *target, int target_is_64, int64_t count, int64_t c,
                                    int has_ignore, int64_t ignore_index) {
  int64_t i;
  for (i = 0; i < count; i++) {
    int64_t t = aotc_loss_target_(target, target_is_64, i);
    if (!(has_ignore && t == ignore_index) && (t < 0 || t >= c)) return AOTC_ERR_INDEX;
  }
  return AOTC_OK;
}

/* NAME: loss from log-probabilities `logp` [n, c, d] stored as LT (loaded by LLD). With
 * reduction none `loss` (type T) gets n * d values, else one: the sum, or the sum over
 * the sum of the weights of the targets not ignored (mean). has_ignore = 0: no index
 * is ignored. */
#define AOTC_DEFINE_NLL_LOSS_(NAME, LT, LLD, T, CT, LD, ST)                                          \
  AOTC_FN int NAME(const LT *logp, const void *target, int target_is_64, const T *weight, T *loss,   \
                   int64_t n, int64_t c, int64_t d, int has_ignore, int64_t ignore_index,           \
                   int reduction) {                                                                 \
    double total = 0.0, weight_total = 0.0;                                                         \
    int64_t i, j;                                                                                   \
    if (aotc_loss_check_targets(target, target_is_64, n * d, c, has_ignore, ignore_index) != AOTC_OK) \
      return AOTC_ERR_INDEX;                                                                        \
    for (i = 0; i < n; i++) {                                                                       \
      for (j = 0; j < d; j++) {                                                                     \
        int64_t t = aotc_loss_target_(target, target_is_64, i * d + j);                             \
        CT w = 0, value = 0;                                                                        \
        if (!(has_ignore && t == ignore_index)) {                                                   \
          w = weight ? (CT)LD(weight[t]) : (CT)1;                                                   \
          value = -(CT)LLD(logp[(i * c + t) * d + j]) * w;                                          \
        }                                                                                           \
        if (reduction == AOTC_LOSS_NONE) {                                                          \
          loss[i * d + j] = ST(value);                                                              \
        } else {                                                                                    \
          total += (double)value;                                                                   \
          weight_total += (double)w;                                                                \
        }                                                                                           \
      }                                                                                             \
    }                                                                                               \
    if (reduction == AOTC_LOSS_SUM) loss[0] = ST((CT)total);                                        \
    if (reduction == AOTC_LOSS_MEAN) loss[0] = ST((CT)(total / weight_total));                      \
    return AOTC_OK;                                                                                 \
  }

/* aotc_log_softmax_axis1_<SUF>: log-softmax over the middle axis of x [n, c, d] into
 * `out` (compute type) and, when `stored` is not NULL, into `stored` (type T). */
#define AOTC_DEFINE_LOG_SOFTMAX_AXIS1_(SUF, T, CT, LD, ST, EXP, LOG)                                 \
  AOTC_FN void aotc_log_softmax_axis1_##SUF(const T *x, CT *out, T *stored, int64_t n, int64_t c,   \
                                            int64_t d) {                                            \
    int64_t i, j, k;                                                                                \
    for (i = 0; i < n; i++) {                                                                       \
      for (j = 0; j < d; j++) {                                                                     \
        const T *row = x + i * c * d + j;                                                           \
        CT max = (CT)LD(row[0]), shift;                                                             \
        double sum = 0.0;                                                                           \
        for (k = 1; k < c; k++) max = AOTC_MAX(max, (CT)LD(row[k * d]));                            \
        for (k = 0; k < c; k++) sum += (double)EXP((CT)LD(row[k * d]) - max);                       \
        shift = max + (CT)LOG((CT)sum);                                                             \
        for (k = 0; k < c; k++) {                                                                   \
          CT v = (CT)LD(row[k * d]) - shift;                                                        \
          out[i * c * d + k * d + j] = v;                                                           \
          if (stored) stored[i * c * d + k * d + j] = ST(v);                                        \
        }                                                                                           \
      }                                                                                             \
    }                                                                                               \
  }

/* aotc_nll_loss_<type>: log-probabilities stored in the tensor type; aotc_nll_loss_ct_<type>:
 * in the compute type (the SoftmaxCrossEntropyLoss tail, from its scratch). */
AOTC_DEFINE_NLL_LOSS_(aotc_nll_loss_f32, float, AOTC_LD_float, float, float, AOTC_LD_float, AOTC_ST_float)
AOTC_DEFINE_NLL_LOSS_(aotc_nll_loss_f64, double, AOTC_LD_double, double, double, AOTC_LD_double, AOTC_ST_double)
AOTC_DEFINE_NLL_LOSS_(aotc_nll_loss_f16, aotc_f16, AOTC_LD_aotc_f16, aotc_f16, float, AOTC_LD_aotc_f16,
                      AOTC_ST_aotc_f16)
AOTC_DEFINE_NLL_LOSS_(aotc_nll_loss_bf16, aotc_bf16, AOTC_LD_aotc_bf16, aotc_bf16, float, AOTC_LD_aotc_bf16,
                      AOTC_ST_aotc_bf16)
AOTC_DEFINE_NLL_LOSS_(aotc_nll_loss_ct_f16, float, AOTC_LD_float, aotc_f16, float, AOTC_LD_aotc_f16,
                      AOTC_ST_aotc_f16)
AOTC_DEFINE_NLL_LOSS_(aotc_nll_loss_ct_bf16, float, AOTC_LD_float, aotc_bf16, float, AOTC_LD_aotc_bf16,
                      AOTC_ST_aotc_bf16)
#define aotc_nll_loss_ct_f32 aotc_nll_loss_f32
#define aotc_nll_loss_ct_f64 aotc_nll_loss_f64

AOTC_DEFINE_LOG_SOFTMAX_AXIS1_(f32, float, float, AOTC_LD_float, AOTC_ST_float, expf, logf)
AOTC_DEFINE_LOG_SOFTMAX_AXIS1_(f64, double, double, AOTC_LD_double, AOTC_ST_double, exp, log)
AOTC_DEFINE_LOG_SOFTMAX_AXIS1_(f16, aotc_f16, float, AOTC_LD_aotc_f16, AOTC_ST_aotc_f16, expf, logf)
AOTC_DEFINE_LOG_SOFTMAX_AXIS1_(bf16, aotc_bf16, float, AOTC_LD_aotc_bf16, AOTC_ST_aotc_bf16, expf, logf)

#endif
