/* aotc runtime: the recurrent cells RNN, GRU and LSTM (float32, reference kernels).
 *
 * One direction of one batch item at a time: its state walks the sequence, each step
 * computing the gates as dot products in a fixed order (so results never depend on
 * the thread count) and applying the cell's activations. Gate order is ONNX's: GRU
 * z, r, h; LSTM i, o, f, c (peepholes i, o, f). */
#ifndef AOTC_RNN_H_
#define AOTC_RNN_H_

#include "aotc_base.h"

enum {
  AOTC_RNN_ACT_RELU, AOTC_RNN_ACT_TANH, AOTC_RNN_ACT_SIGMOID, AOTC_RNN_ACT_AFFINE, AOTC_RNN_ACT_LEAKY_RELU,
  AOTC_RNN_ACT_THRESHOLDED_RELU, AOTC_RNN_ACT_SCALED_TANH, AOTC_RNN_ACT_HARD_SIGMOID, AOTC_RNN_ACT_ELU,
  AOTC_RNN_ACT_SOFTSIGN, AOTC_RNN_ACT_SOFTPLUS
};
enum { AOTC_CELL_RNN, AOTC_CELL_GRU, AOTC_CELL_LSTM };

typedef struct aotc_rnn_desc {
  int cell;                 /* AOTC_CELL_* */
  int64_t seq, batch, input, hidden, dirs;
  int reverse;              /* with one direction: it runs backwards */
  int layout;               /* 0: [seq, batch, ...]; 1: [batch, seq, ...] */
  int linear_before_reset;  /* GRU */
  int input_forget;         /* LSTM: f = 1 - i */
  float clip;               /* > 0: gate inputs clipped to [-clip, clip] */
  int act[6];               /* per direction: the cell's 1, 2 or 3 activations */
  float alpha[6], beta[6];
} aotc_rnn_desc;

AOTC_FN float aotc_rnn_act(int kind, float alpha, float beta, float x) {
  switch (kind) {
    case AOTC_RNN_ACT_RELU: return x > 0 ? x : 0.0f;
    case AOTC_RNN_ACT_TANH: return tanhf(x);
    case AOTC_RNN_ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case AOTC_RNN_ACT_AFFINE: return alpha * x + beta;
    case AOTC_RNN_ACT_LEAKY_RELU: return x >= 0 ? x : alpha * x;
    case AOTC_RNN_ACT_THRESHOLDED_RELU: return x > alpha ? x : 0.0f;
    case AOTC_RNN_ACT_SCALED_TANH: return alpha * tanhf(beta * x);
    case AOTC_RNN_ACT_HARD_SIGMOID: {
      float v = alpha * x + beta;
      return v < 0 ? 0.0f : (v > 1 ? 1.0f : v);
    }
    case AOTC_RNN_ACT_ELU: return x >= 0 ? x : alpha * (expf(x) - 1.0f);
    case AOTC_RNN_ACT_SOFTSIGN: return x / (1.0f + fabsf(x));
    default: return x > 20.0f ? x : log1pf(expf(x));   /* softplus */
  }
}

AOTC_FN float aotc_rnn_gate(const aotc_rnn_desc *d, int dir, int which, float x) {
  const int k = dir * 3 + which;
  if (d->clip > 0) x = x < -d->clip ? -d->clip : (x > d->clip ? d->clip : x);
  return aotc_rnn_act(d->act[k], d->alpha[k], d->beta[k], x);
}

/* out[r] = bias[r] (or 0) + dot(w[r, :], v) for r < rows. */
AOTC_FN void aotc_rnn_matvec(const float *w, const float *v, const float *bias, float *out,
                             int64_t rows, int64_t cols) {
  int64_t r, c;
  for (r = 0; r < rows; r++) {
    float acc = bias ? bias[r] : 0.0f;
    for (c = 0; c < cols; c++) acc += w[r * cols + c] * v[c];
    out[r] = acc;
  }
}

/* Scratch: 2 * gates * hidden + 3 * hidden floats. Returns AOTC_ERR_INDEX when a
 * sequence length is outside [0, seq]. */
AOTC_FN int aotc_rnn(const aotc_rnn_desc *d, const float *x, const float *w, const float *r,
                     const float *b, const int32_t *seq_lens, const float *h0, const float *c0,
                     const float *p, float *y, float *yh, float *yc, float *scratch) {
  const int64_t H = d->hidden, G = d->cell == AOTC_CELL_RNN ? 1 : (d->cell == AOTC_CELL_GRU ? 3 : 4);
  float *xw = scratch, *hr = xw + G * H, *h = hr + G * H, *c = h + H, *tmp = c + H;
  int64_t dir, bi, t, j;
  if (seq_lens)
    for (bi = 0; bi < d->batch; bi++)
      if (seq_lens[bi] < 0 || seq_lens[bi] > d->seq) return AOTC_ERR_INDEX;
  if (y) memset(y, 0, (size_t)(d->seq * d->dirs * d->batch * H) * sizeof(float));
  for (dir = 0; dir < d->dirs; dir++) {
    const int backwards = d->dirs == 2 ? dir == 1 : d->reverse;
    const float *wd = w + dir * G * H * d->input, *rd = r + dir * G * H * H;
    const float *wb = b ? b + dir * 2 * G * H : NULL, *rb = b ? wb + G * H : NULL;
    const float *pd = p ? p + dir * 3 * H : NULL;
    for (bi = 0; bi < d->batch; bi++) {
      const int64_t len = seq_lens ? seq_lens[bi] : d->seq;
      const int64_t state = d->layout ? (bi * d->dirs + dir) * H : (dir * d->batch + bi) * H;
      int64_t step;
      for (j = 0; j < H; j++) {
        h[j] = h0 ? h0[state + j] : 0.0f;
        c[j] = c0 ? c0[state + j] : 0.0f;
      }
      for (step = 0; step < len; step++) {
        const float *xt;
        t = backwards ? len - 1 - step : step;
        xt = x + (d->layout ? bi * d->seq + t : t * d->batch + bi) * d->input;
        aotc_rnn_matvec(wd, xt, wb, xw, G * H, d->input);
        aotc_rnn_matvec(rd, h, rb, hr, G * H, H);
        if (d->cell == AOTC_CELL_RNN) {
          for (j = 0; j < H; j++) h[j] = aotc_rnn_gate(d, (int)dir, 0, xw[j] + hr[j]);
        } else if (d->cell == AOTC_CELL_GRU) {
          float *z = tmp;
          for (j = 0; j < H; j++) {
            z[j] = aotc_rnn_gate(d, (int)dir, 0, xw[j] + hr[j]);
            hr[H + j] = aotc_rnn_gate(d, (int)dir, 0, xw[H + j] + hr[H + j]);   /* r */
          }
          if (d->linear_before_reset) {
            for (j = 0; j < H; j++) xw[2 * H + j] += hr[H + j] * hr[2 * H + j];
          } else {
            /* (r . h) R_h^T + Rb_h: reuse hr's z slot for r . h */
            for (j = 0; j < H; j++) hr[j] = hr[H + j] * h[j];
            aotc_rnn_matvec(rd + 2 * H * H, hr, rb ? rb + 2 * H : NULL, hr + 2 * H, H, H);
            for (j = 0; j < H; j++) xw[2 * H + j] += hr[2 * H + j];
          }
          for (j = 0; j < H; j++) {
            const float hh = aotc_rnn_gate(d, (int)dir, 1, xw[2 * H + j]);
            h[j] = (1.0f - z[j]) * hh + z[j] * h[j];
          }
        } else {
          for (j = 0; j < H; j++) {
            const float gi = xw[j] + hr[j] + (pd ? pd[j] * c[j] : 0.0f);
            const float gf = xw[2 * H + j] + hr[2 * H + j] + (pd ? pd[2 * H + j] * c[j] : 0.0f);
            const float i_ = aotc_rnn_gate(d, (int)dir, 0, gi);
            const float f_ = d->input_forget ? 1.0f - i_ : aotc_rnn_gate(d, (int)dir, 0, gf);
            const float g_ = aotc_rnn_gate(d, (int)dir, 1, xw[3 * H + j] + hr[3 * H + j]);
            float o_;
            c[j] = f_ * c[j] + i_ * g_;
            o_ = aotc_rnn_gate(d, (int)dir, 0, xw[H + j] + hr[H + j] + (pd ? pd[H + j] * c[j] : 0.0f));
            h[j] = o_ * aotc_rnn_act(d->act[dir * 3 + 2], d->alpha[dir * 3 + 2], d->beta[dir * 3 + 2], c[j]);
          }
        }
        if (y) {
          const int64_t row = d->layout ? (bi * d->seq + t) * d->dirs + dir : (t * d->dirs + dir) * d->batch + bi;
          memcpy(y + row * H, h, (size_t)H * sizeof(float));
        }
      }
      if (len == 0)   /* an empty sequence has no last state: zeros, as onnxruntime gives */
        for (j = 0; j < H; j++) h[j] = c[j] = 0.0f;
      if (yh) memcpy(yh + state, h, (size_t)H * sizeof(float));
      if (yc) memcpy(yc + state, c, (size_t)H * sizeof(float));
    }
  }
  return AOTC_OK;
}

#endif
