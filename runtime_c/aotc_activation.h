/* aotc runtime: the activations a product's tile epilogue applies (GEMM, conv), and
 * the one spelling of each formula: the standalone operators (aotc/ops/activations.py,
 * aotc/ops/gelu.py) emit these same expressions for float, so a fused activation gives
 * the bits of the separate one. */
#ifndef AOTC_ACTIVATION_H_
#define AOTC_ACTIVATION_H_

#include "aotc_base.h"
#include "aotc_math.h"

/* Each activation as one expression over X, with the same arithmetic as the standalone
 * operator (aotc/ops/activations.py, aotc/ops/gelu.py), so fused and separate give the
 * same bits. A, B: LeakyRelu's alpha; HardSigmoid's alpha, beta; Clip's min, max
 * (-inf, +inf when absent: the comparison is then never true, as without the bound).
 * In exact mode the transcendental functions are aotc's own (aotc_math.h). */
#define AOTC_ACT_NONE_EXPR(X, A, B) (X)
#define AOTC_ACT_RELU_EXPR(X, A, B) ((X) > 0 ? (X) : 0)
#define AOTC_ACT_LEAKY_RELU_EXPR(X, A, B) ((X) >= 0 ? (X) : (X) * (A))
#define AOTC_ACT_CLIP_EXPR(X, A, B) \
  (((X) < (A) ? (A) : (X)) > (B) ? (B) : ((X) < (A) ? (A) : (X)))
#define AOTC_ACT_HARD_SIGMOID_EXPR(X, A, B) AOTC_MIN(AOTC_MAX((X) * (A) + (B), 0), 1)
#define AOTC_ACT_HARD_SWISH_EXPR(X, A, B) \
  ((X) * AOTC_ACT_HARD_SIGMOID_EXPR(X, 0.1666666716337204f, 0.5f))
#define AOTC_ACT_SIGMOID_EXPR(X, A, B) (1 / (1 + AOTC_EXPF(-(X))))
#define AOTC_ACT_TANH_EXPR(X, A, B) AOTC_TANHF(X)
#define AOTC_ACT_GELU_EXPR(X, A, B) (0.5f * (X) * (1 + AOTC_ERFF((X) * 0.7071067690849304f)))
#define AOTC_ACT_GELU_TANH_EXPR(X, A, B) \
  (0.5f * (X) *                          \
   (1 + AOTC_TANHF(0.7978845834732056f * ((X) + 0.044714998453855515f * (X) * (X) * (X)))))

/* The activation KIND (NONE, RELU, ...; a name of aotc_act_kind without AOTC_ACT_) of the
 * float X: the one spelling of every activation formula. */
#define AOTC_ACTIVATION(KIND, X, A, B) AOTC_ACT_##KIND##_EXPR(X, A, B)

typedef enum {
  AOTC_ACT_NONE, AOTC_ACT_RELU, AOTC_ACT_LEAKY_RELU, AOTC_ACT_CLIP, AOTC_ACT_HARD_SIGMOID,
  AOTC_ACT_HARD_SWISH, AOTC_ACT_SIGMOID, AOTC_ACT_TANH, AOTC_ACT_GELU, AOTC_ACT_GELU_TANH
} aotc_act_kind;

/* An activation and its two parameters (see the expressions above). */
typedef struct {
  aotc_act_kind kind;
  float a, b;
} aotc_activation;

#define AOTC_ACT_CASE_(KIND)                                                      \
  case AOTC_ACT_##KIND:                                                           \
    for (i = 0; i < n; i++) {                                                     \
      float X = y[i];                                                             \
      y[i] = AOTC_CANON_F32(AOTC_ACTIVATION(KIND, X, a, b));                   \
    }                                                                             \
    break

/* y[i] = act(y[i]) for i < n; act may be NULL (nothing to do). One switch per run of
 * values, so each loop is the plain expression and vectorizes where it can. */
AOTC_FN void aotc_activation_apply(const aotc_activation *act, float *y, int64_t n) {
  float a, b;
  int64_t i;
  if (!act || act->kind == AOTC_ACT_NONE) return;
  a = act->a;
  b = act->b;
  switch (act->kind) {
    AOTC_ACT_CASE_(RELU);
    AOTC_ACT_CASE_(LEAKY_RELU);
    AOTC_ACT_CASE_(CLIP);
    AOTC_ACT_CASE_(HARD_SIGMOID);
    AOTC_ACT_CASE_(HARD_SWISH);
    AOTC_ACT_CASE_(SIGMOID);
    AOTC_ACT_CASE_(TANH);
    AOTC_ACT_CASE_(GELU);
    AOTC_ACT_CASE_(GELU_TANH);
    default: break;
  }
}

/* The same over an M x N block of rows with stride ld. */
AOTC_FN void aotc_activation_apply_2d(const aotc_activation *act, float *y, int64_t ld,
                                      int64_t rows, int64_t cols) {
  int64_t i;
  if (!act || act->kind == AOTC_ACT_NONE) return;
  for (i = 0; i < rows; i++) aotc_activation_apply(act, y + i * ld, cols);
}

#endif
