/* aotc runtime: ONNX Attention (opsets 23 to 25), as the ONNX reference computes it.
 *
 *   scores = (Q * sqrt(scale)) (K * sqrt(scale))^T      [b, hq, sq, total]
 *   scores = softcap * tanh(scores / softcap)            (softcap > 0)
 *   scores = scores + bias                               (attn_mask, causal, window, padding)
 *   P = softmax(scores) in the softmax type, a row with every key masked gives 0
 *   Y = P V
 *
 * K and V are past_key / past_value followed by the new keys and values (what the
 * present outputs hold). Group-query attention reads kv head h / (hq / hkv). Operands
 * of 16-bit or 32-bit types are rounded to their type where the reference rounds
 * (after each scaling, each product, softcap step, bias addition and softmax step);
 * the arithmetic itself is in double. Q, K, V and Y are read and written through
 * element strides of their logical [b, h, s, d] dims, so the 3D layouts cost nothing.
 *
 * Tasks are (batch, kv head): each converts its keys and values once (into its own
 * scratch, writing the present outputs on the way) and runs every query head of its
 * group. Scratch per task: aotc_onnx_attention_task_doubles(...) doubles. */
#ifndef AOTC_ONNX_ATTENTION_H_
#define AOTC_ONNX_ATTENTION_H_

#include "aotc_base.h"
#include "aotc_kinds.h"
#include "aotc_threads.h"

typedef struct {
  const void *q, *k, *v, *past_k, *past_v, *mask;   /* mask, past_k, past_v may be NULL */
  const int64_t *nonpad;                            /* [batch] or NULL */
  void *y, *present_k, *present_v, *qk;             /* all but y may be NULL */
  double *scratch;
  int kind;              /* of Q, K, V, Y, past and present */
  int mask_kind;         /* AOTC_KIND_BOOL or a float kind */
  int softmax_kind;
  int causal;
  int qk_mode;           /* what qk holds: 0, 1 after softcap, 2 after the bias, 3 P */
  int64_t batch, hq, hkv, sq, skv, past, d, dv;
  int64_t qs[4], ks[4], vs[4], ys[4];   /* element strides of [b, h, s, d] */
  int64_t ms[4];                        /* mask element strides of [b, h, i, j]; 0 broadcasts */
  int64_t mask_len;                     /* keys the mask covers; later keys are masked */
  int64_t left, right;                  /* window bounds, -1 for none */
  double scale;                         /* sqrt(scale), rounded to the kind */
  double softcap;                       /* 0 for none */
} aotc_onnx_attention_args;

AOTC_FN int64_t aotc_onnx_attention_task_doubles(int64_t total, int64_t d, int64_t dv) {
  return total * (d + dv + 1) + d + dv;
}

/* Keys and values of one (batch, kv head), past first, into k [total, d] and v
 * [total, dv] (keys scaled), and into the present outputs. */
AOTC_FN void aotc_onnx_attention_load_kv_(const aotc_onnx_attention_args *a, int64_t b,
                                          int64_t h, double *k, double *v) {
  const int kind = a->kind;
  const int64_t total = a->past + a->skv;
  int64_t t, c;
  for (t = 0; t < total; t++) {
    for (c = 0; c < a->d; c++) {
      const int64_t at = ((b * a->hkv + h) * total + t) * a->d + c;
      const double x = t < a->past
          ? aotc_kind_load(a->past_k, ((b * a->hkv + h) * a->past + t) * a->d + c, kind)
          : aotc_kind_load(a->k, b * a->ks[0] + h * a->ks[1] + (t - a->past) * a->ks[2] + c * a->ks[3], kind);
      if (a->present_k) aotc_kind_store(a->present_k, at, kind, x);
      k[t * a->d + c] = aotc_kind_round(x * a->scale, kind);
    }
    for (c = 0; c < a->dv; c++) {
      const int64_t at = ((b * a->hkv + h) * total + t) * a->dv + c;
      const double x = t < a->past
          ? aotc_kind_load(a->past_v, ((b * a->hkv + h) * a->past + t) * a->dv + c, kind)
          : aotc_kind_load(a->v, b * a->vs[0] + h * a->vs[1] + (t - a->past) * a->vs[2] + c * a->vs[3], kind);
      if (a->present_v) aotc_kind_store(a->present_v, at, kind, x);
      v[t * a->dv + c] = x;
    }
  }
}

/* The additive bias of key j for query i of (b, h): the mask, then -inf for keys the
 * causal frontier, the window or the padding exclude (added, as the reference does). */
AOTC_FN double aotc_onnx_attention_bias_(const aotc_onnx_attention_args *a, int64_t b, int64_t h,
                                         int64_t i, int64_t j, int64_t offset, int64_t valid) {
  const double neg_inf = -(double)AOTC_INF;
  double bias = 0.0;
  const int64_t diff = i + offset - j;   /* query position minus key position */
  if (a->mask) {
    if (j >= a->mask_len) {
      bias = neg_inf;
    } else {
      const double m = aotc_kind_load(a->mask, b * a->ms[0] + h * a->ms[1] + i * a->ms[2] + j * a->ms[3],
                                      a->mask_kind);
      bias = a->mask_kind == AOTC_KIND_BOOL ? (m != 0.0 ? 0.0 : neg_inf) : m;
    }
  }
  if (a->causal && diff < 0) bias += neg_inf;
  if ((a->left >= 0 && diff > a->left) || (a->right >= 0 && -diff > a->right)) bias += neg_inf;
  if (j >= valid) bias += neg_inf;
  return bias;
}

/* One query row i of head h: y row and qk row. */
AOTC_FN void aotc_onnx_attention_row_(const aotc_onnx_attention_args *a, int64_t b, int64_t h,
                                      int64_t i, int64_t offset, int64_t valid, const double *k,
                                      const double *v, double *q, double *s, double *acc) {
  const int kind = a->kind, sk = a->softmax_kind;
  const int64_t total = a->past + a->skv, d = a->d, dv = a->dv;
  const int64_t qk_row = ((b * a->hq + h) * a->sq + i) * total;
  double m = -(double)AOTC_INF, sum = 0.0, shift;
  int all_masked = 1;
  int64_t j, c;
  for (c = 0; c < d; c++) {
    const int64_t at = b * a->qs[0] + h * a->qs[1] + i * a->qs[2] + c * a->qs[3];
    q[c] = aotc_kind_round(aotc_kind_load(a->q, at, kind) * a->scale, kind);
  }
  for (j = 0; j < total; j++) {
    const double bias = aotc_onnx_attention_bias_(a, b, h, i, j, offset, valid);
    const double *kr = k + j * d;
    double x = 0.0;
    for (c = 0; c < d; c++) x += q[c] * kr[c];
    x = aotc_kind_round(x, kind);
    if (a->softcap > 0.0) {
      x = aotc_kind_round(x / a->softcap, kind);
      x = aotc_kind_round(aotc_kind_round(tanh(x), kind) * a->softcap, kind);
    }
    if (a->qk && a->qk_mode <= 1) aotc_kind_store(a->qk, qk_row + j, kind, x);
    x = aotc_kind_round(x + bias, kind);
    if (a->qk && a->qk_mode == 2) aotc_kind_store(a->qk, qk_row + j, kind, x);
    s[j] = aotc_kind_round(x, sk);
    all_masked &= bias == -(double)AOTC_INF;
    if (m == m && (s[j] > m || s[j] != s[j])) m = s[j];   /* a NaN wins, as in np.max */
  }
  shift = m == -(double)AOTC_INF ? 0.0 : m;
  for (j = 0; j < total; j++) {
    s[j] = aotc_kind_round(exp(aotc_kind_round(s[j] - shift, sk)), sk);
    sum += s[j];
  }
  sum = aotc_kind_round(sum, sk);
  if (sum == 0.0) sum = 1.0;
  for (c = 0; c < dv; c++) acc[c] = 0.0;
  for (j = 0; j < total; j++) {
    const double *vr = v + j * dv;
    const double p = all_masked ? 0.0 : aotc_kind_round(aotc_kind_round(s[j] / sum, sk), kind);
    if (a->qk && a->qk_mode == 3) aotc_kind_store(a->qk, qk_row + j, kind, p);
    for (c = 0; c < dv; c++) acc[c] += p * vr[c];
  }
  for (c = 0; c < dv; c++)
    aotc_kind_store(a->y, b * a->ys[0] + h * a->ys[1] + i * a->ys[2] + c * a->ys[3], kind,
                    aotc_kind_round(acc[c], kind));
}

AOTC_FN void aotc_onnx_attention_task_(void *arg, int64_t task) {
  const aotc_onnx_attention_args *a = (const aotc_onnx_attention_args *)arg;
  const int64_t total = a->past + a->skv, group = a->hq / a->hkv;
  const int64_t b = task / a->hkv, g = task % a->hkv;
  double *k = a->scratch + task * aotc_onnx_attention_task_doubles(total, a->d, a->dv);
  double *v = k + total * a->d, *s = v + total * a->dv, *q = s + total, *acc = q + a->d;
  /* the causal and window frontiers are offset by the keys before the query block;
   * values far out of range are clamped where they no longer change a comparison */
  const int64_t far = 2 * (total + a->sq + 1);
  int64_t offset = a->past, valid = total, h, i;
  if (a->nonpad) {
    valid = AOTC_MAX(-far, AOTC_MIN(a->nonpad[b], far));
    offset = valid - a->sq;
  }
  aotc_onnx_attention_load_kv_(a, b, g, k, v);
  for (h = g * group; h < (g + 1) * group; h++)
    for (i = 0; i < a->sq; i++) aotc_onnx_attention_row_(a, b, h, i, offset, valid, k, v, q, s, acc);
}

AOTC_FN void aotc_onnx_attention(aotc_pool *pool, const aotc_onnx_attention_args *a) {
  aotc_parallel_for(pool, a->batch * a->hkv, aotc_onnx_attention_task_, (void *)a);
}

#endif
