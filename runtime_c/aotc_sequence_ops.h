/* aotc runtime: RotaryEmbedding, LinearAttention and CausalConvWithState, for any
 * floating type (run-time kinds of aotc_kinds.h, arithmetic in double). */
#ifndef AOTC_SEQUENCE_OPS_H_
#define AOTC_SEQUENCE_OPS_H_

#include "aotc_base.h"
#include "aotc_kinds.h"
#include "aotc_threads.h"

/* ---- RotaryEmbedding ------------------------------------------------------------------
 * x and y: logical [batch, seq, heads, head_size] through element strides xs. The first
 * `rot` values of each head rotate in pairs (k, k + rot/2), or (2k, 2k + 1) when
 * interleaved, by the angle whose cos and sin are row pos[b, s] of the caches (row
 * b * seq + s without position ids); the rest are copied. Products and sums are rounded
 * to the element type as the reference rounds them. */
typedef struct {
  const void *x, *cos, *sin;
  const int64_t *pos;                 /* [batch, seq] or NULL */
  void *y;
  int kind;
  int64_t batch, seq, heads, size, rot, rows;   /* rows: cache rows */
  int interleaved;
  int64_t xs[4];
} aotc_rotary_args;

AOTC_FN void aotc_rotary_task_(void *arg, int64_t task) {
  const aotc_rotary_args *a = (const aotc_rotary_args *)arg;
  const int kind = a->kind;
  const int64_t b = task / a->seq, s = task % a->seq, half = a->rot / 2;
  int64_t row = task, h, k;
  if (a->pos) row = a->pos[task] < 0 ? a->pos[task] + a->rows : a->pos[task];
  for (h = 0; h < a->heads; h++) {
    const int64_t base = b * a->xs[0] + s * a->xs[1] + h * a->xs[2];
    for (k = 0; k < half; k++) {
      const int64_t i1 = base + (a->interleaved ? 2 * k : k) * a->xs[3];
      const int64_t i2 = base + (a->interleaved ? 2 * k + 1 : k + half) * a->xs[3];
      const double c = aotc_kind_load(a->cos, row * half + k, kind);
      const double sn = aotc_kind_load(a->sin, row * half + k, kind);
      const double x1 = aotc_kind_load(a->x, i1, kind), x2 = aotc_kind_load(a->x, i2, kind);
      const double real = aotc_kind_round(c * x1, kind) - aotc_kind_round(sn * x2, kind);
      const double imag = aotc_kind_round(sn * x1, kind) + aotc_kind_round(c * x2, kind);
      aotc_kind_store(a->y, i1, kind, aotc_kind_round(real, kind));
      aotc_kind_store(a->y, i2, kind, aotc_kind_round(imag, kind));
    }
    for (k = a->rot; k < a->size; k++)
      aotc_kind_store(a->y, base + k * a->xs[3], kind, aotc_kind_load(a->x, base + k * a->xs[3], kind));
  }
}

/* AOTC_ERR_INDEX when a position id is outside [-rows, rows). */
AOTC_FN int aotc_rotary(aotc_pool *pool, const aotc_rotary_args *a) {
  int64_t i;
  if (a->pos)
    for (i = 0; i < a->batch * a->seq; i++)
      if (a->pos[i] < -a->rows || a->pos[i] >= a->rows) return AOTC_ERR_INDEX;
  aotc_parallel_for(pool, a->batch * a->seq, aotc_rotary_task_, (void *)a);
  return AOTC_OK;
}

/* ---- LinearAttention ------------------------------------------------------------------
 * Per (batch, kv head) a state S [dk, dv], from past_state or zeros; for each step t:
 *   S *= exp(decay_t)                       (gated rules; per key dim or per head)
 *   v_t = beta_t * (v_t - S^T k_t)          (delta rules)
 *   S += k_t v_t^T
 *   o_t = scale * q_t S                     (for each query head of the group)
 * q, k, v, decay, beta are [batch, T, heads * size] (decay's size dk or 1, beta's heads
 * kv heads or 1). Scratch per task: dk * dv + dv doubles. */
typedef struct {
  const void *q, *k, *v, *past, *decay, *beta;   /* past, decay, beta may be NULL */
  void *y, *present;
  double *scratch;
  int kind, state_kind;
  int64_t batch, steps, hq, hkv, dk, dv;
  int64_t decay_size, beta_heads;               /* 1 or dk; 1 or hkv */
  double scale;
} aotc_linear_attention_args;

AOTC_FN void aotc_linear_attention_task_(void *arg, int64_t task) {
  const aotc_linear_attention_args *a = (const aotc_linear_attention_args *)arg;
  const int kind = a->kind;
  const int64_t b = task / a->hkv, g = task % a->hkv, group = a->hq / a->hkv;
  const int64_t dk = a->dk, dv = a->dv;
  double *state = a->scratch + task * (dk * dv + dv), *vt = state + dk * dv;
  int64_t t, d, m, h;
  for (d = 0; d < dk * dv; d++)
    state[d] = a->past ? aotc_kind_load(a->past, task * dk * dv + d, a->state_kind) : 0.0;
  for (t = 0; t < a->steps; t++) {
    const int64_t row = b * a->steps + t;
    const int64_t k0 = (row * a->hkv + g) * dk, v0 = (row * a->hkv + g) * dv;
    if (a->decay)
      for (d = 0; d < dk; d++) {
        const int64_t at = (row * a->hkv + g) * a->decay_size + (a->decay_size == 1 ? 0 : d);
        const double f = exp(aotc_kind_load(a->decay, at, kind));
        for (m = 0; m < dv; m++) state[d * dv + m] *= f;
      }
    for (m = 0; m < dv; m++) vt[m] = aotc_kind_load(a->v, v0 + m, kind);
    if (a->beta) {
      const double beta = aotc_kind_load(a->beta, row * a->beta_heads + (a->beta_heads == 1 ? 0 : g), kind);
      for (m = 0; m < dv; m++) {
        double retrieved = 0.0;
        for (d = 0; d < dk; d++) retrieved += state[d * dv + m] * aotc_kind_load(a->k, k0 + d, kind);
        vt[m] = beta * (vt[m] - retrieved);
      }
    }
    for (d = 0; d < dk; d++) {
      const double kd = aotc_kind_load(a->k, k0 + d, kind);
      for (m = 0; m < dv; m++) state[d * dv + m] += kd * vt[m];
    }
    for (h = g * group; h < (g + 1) * group; h++)
      for (m = 0; m < dv; m++) {
        double o = 0.0;
        for (d = 0; d < dk; d++)
          o += aotc_kind_load(a->q, (row * a->hq + h) * dk + d, kind) * state[d * dv + m];
        aotc_kind_store(a->y, (row * a->hq + h) * dv + m, kind, aotc_kind_round(a->scale * o, kind));
      }
  }
  if (a->present)
    for (d = 0; d < dk * dv; d++)
      aotc_kind_store(a->present, task * dk * dv + d, a->state_kind,
                      aotc_kind_round(state[d], a->state_kind));
}

AOTC_FN void aotc_linear_attention(aotc_pool *pool, const aotc_linear_attention_args *a) {
  aotc_parallel_for(pool, a->batch * a->hkv, aotc_linear_attention_task_, (void *)a);
}

/* ---- CausalConvWithState --------------------------------------------------------------
 * Depthwise causal convolution of x [batch, channels, length] with w [channels, 1, k]
 * over the past state [batch, channels, k - 1] (zeros when NULL) followed by x; the
 * present state is the last k - 1 values of that sequence. silu: y = c * sigmoid(c). */
typedef struct {
  const void *x, *w, *bias, *past;   /* bias, past may be NULL */
  void *y, *present;
  int kind, silu;
  int64_t batch, channels, length, k;
} aotc_causal_conv_args;

/* Value i of the padded sequence of one (batch, channel): past first, then x. */
AOTC_FN double aotc_causal_conv_at_(const aotc_causal_conv_args *a, int64_t task, int64_t i) {
  const int64_t keep = a->k - 1;
  if (i >= keep) return aotc_kind_load(a->x, task * a->length + i - keep, a->kind);
  return a->past ? aotc_kind_load(a->past, task * keep + i, a->kind) : 0.0;
}

AOTC_FN void aotc_causal_conv_task_(void *arg, int64_t task) {
  const aotc_causal_conv_args *a = (const aotc_causal_conv_args *)arg;
  const int kind = a->kind;
  const int64_t c = task % a->channels, keep = a->k - 1;
  int64_t l, j;
  for (l = 0; l < a->length; l++) {
    double y = a->bias ? aotc_kind_load(a->bias, c, kind) : 0.0;
    for (j = 0; j < a->k; j++)
      y += aotc_kind_load(a->w, c * a->k + j, kind) * aotc_causal_conv_at_(a, task, l + j);
    y = aotc_kind_round(y, kind);
    if (a->silu) y = aotc_kind_round(y / (1.0 + exp(-y)), kind);
    aotc_kind_store(a->y, task * a->length + l, kind, y);
  }
  if (a->present)
    for (j = 0; j < keep; j++)
      aotc_kind_store(a->present, task * keep + j, kind, aotc_causal_conv_at_(a, task, a->length + j));
}

AOTC_FN void aotc_causal_conv(aotc_pool *pool, const aotc_causal_conv_args *a) {
  aotc_parallel_for(pool, a->batch * a->channels, aotc_causal_conv_task_, (void *)a);
}

#endif
