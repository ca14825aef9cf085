/* aotc runtime: the discrete Fourier transform of DFT and STFT.
 *
 * A reference transform: every output bin is a direct sum over the input, in double,
 * with twiddle factors from a table (cos, sin of 2 pi t / n for t < n) computed at
 * compile time, so no libm call runs and the sum order is fixed. Signals are complex
 * interleaved (re, im) doubles in scratch; the typed wrappers gather and scatter. */
#ifndef AOTC_SIGNAL_H_
#define AOTC_SIGNAL_H_

#include "aotc_base.h"
#include "aotc_elementwise.h"

/* out[k] for k < len_out (complex) of the length-n DFT of in[0 .. len_in) (complex,
 * zero beyond len_in, cut at n). inverse: e^{+i}, scaled by 1 / n. hermitian: `in` is
 * the one-sided half of a Hermitian spectrum (inverse real transform); the result's
 * imaginary parts are then zero. */
AOTC_FN void aotc_dft_line(const double *in, int64_t len_in, double *out, int64_t len_out,
                           int64_t n, int inverse, int hermitian, const double *tw) {
  const int64_t used = len_in < n ? len_in : n;
  const int64_t half = n / 2;
  const double sign = inverse ? 1.0 : -1.0;
  int64_t k, j;
  for (k = 0; k < len_out; k++) {
    double re = 0.0, im = 0.0;
    if (!hermitian) {
      for (j = 0; j < used; j++) {
        const int64_t t = (j * k) % n;
        const double c = tw[2 * t], s = sign * tw[2 * t + 1];
        const double xr = in[2 * j], xi = in[2 * j + 1];
        re += xr * c - xi * s;
        im += xr * s + xi * c;
      }
    } else {
      for (j = 0; j < n; j++) {
        const int64_t src = j <= half ? j : n - j;
        const int64_t t = (j * k) % n;
        double xr = 0.0, xi = 0.0;
        if (src < len_in) {
          xr = in[2 * src];
          /* the DC bin (and the Nyquist bin of an even n) of a real signal are real */
          xi = (src == 0 || 2 * src == n) ? 0.0 : (j <= half ? in[2 * src + 1] : -in[2 * src + 1]);
        }
        re += xr * tw[2 * t] - xi * tw[2 * t + 1];
      }
    }
    if (inverse) {
      re /= (double)n;
      im /= (double)n;
    }
    out[2 * k] = re;
    out[2 * k + 1] = hermitian ? 0.0 : im;
  }
}

/* in_[j_] (a complex double) = the element at p_ (real: cin_ 1, complex: cin_ 2) times
 * scale_. */
#define AOTC_SIGNAL_LOAD_(T, in_, j_, p_, cin_, scale_)                                \
  do {                                                                               \
    (in_)[2 * (j_)] = (double)AOTC_LD_##T((p_)[0]) * (scale_);                       \
    (in_)[2 * (j_) + 1] = (cin_) == 2 ? (double)AOTC_LD_##T((p_)[1]) * (scale_) : 0.0; \
  } while (0)

/* DFT along the middle axis of x [outer, len_in, inner, cin] into y [outer, len_out,
 * inner, cout] (cin, cout: 1 for real, 2 for complex); scratch holds 2 * (len_in +
 * len_out) doubles. */
#define AOTC_DFT(T, y_, x_, outer_, len_in_, inner_, cin_, len_out_, cout_, n_, inverse_, hermitian_, tw_, \
                 scratch_)                                                           \
  do {                                                                               \
    T *y__ = (y_);                                                                   \
    const T *x__ = (x_);                                                             \
    double *in__ = (double *)(void *)(scratch_);                                     \
    double *out__ = in__ + 2 * (len_in_);                                            \
    int64_t o__, i__, j__;                                                           \
    for (o__ = 0; o__ < (outer_); o__++)                                             \
      for (i__ = 0; i__ < (inner_); i__++) {                                         \
        for (j__ = 0; j__ < (len_in_); j__++) {                                      \
          const T *p__ = x__ + ((o__ * (len_in_) + j__) * (inner_) + i__) * (cin_);  \
          AOTC_SIGNAL_LOAD_(T, in__, j__, p__, (cin_), 1.0);                         \
        }                                                                            \
        aotc_dft_line(in__, (len_in_), out__, (len_out_), (n_), (inverse_), (hermitian_), (tw_)); \
        for (j__ = 0; j__ < (len_out_); j__++) {                                     \
          T *q__ = y__ + ((o__ * (len_out_) + j__) * (inner_) + i__) * (cout_);      \
          q__[0] = AOTC_ST_##T(out__[2 * j__]);                                      \
          if ((cout_) == 2) q__[1] = AOTC_ST_##T(out__[2 * j__ + 1]);                \
        }                                                                            \
      }                                                                              \
  } while (0)

/* STFT of x [batch, length, cin] into y [batch, frames, bins, 2]: frame f is x[f * step
 * .. f * step + frame_len) times the window (NULL: ones), transformed at length
 * frame_len; scratch holds 2 * (frame_len + bins) doubles. */
#define AOTC_STFT(T, y_, x_, window_, batch_, length_, cin_, frames_, step_, frame_len_, bins_, tw_, scratch_) \
  do {                                                                               \
    T *y__ = (y_);                                                                   \
    const T *x__ = (x_);                                                             \
    const T *w__ = (window_);                                                        \
    double *in__ = (double *)(void *)(scratch_);                                     \
    double *out__ = in__ + 2 * (frame_len_);                                         \
    int64_t b__, f__, j__;                                                           \
    for (b__ = 0; b__ < (batch_); b__++)                                             \
      for (f__ = 0; f__ < (frames_); f__++) {                                        \
        for (j__ = 0; j__ < (frame_len_); j__++) {                                   \
          const T *p__ = x__ + (b__ * (length_) + f__ * (step_) + j__) * (cin_);     \
          const double w_ = w__ ? (double)AOTC_LD_##T(w__[j__]) : 1.0;               \
          AOTC_SIGNAL_LOAD_(T, in__, j__, p__, (cin_), w_);                          \
        }                                                                            \
        aotc_dft_line(in__, (frame_len_), out__, (bins_), (frame_len_), 0, 0, (tw_)); \
        for (j__ = 0; j__ < 2 * (bins_); j__++)                                      \
          y__[(b__ * (frames_) + f__) * 2 * (bins_) + j__] = AOTC_ST_##T(out__[j__]); \
      }                                                                              \
  } while (0)

/* MelWeightMatrix [dft_length / 2 + 1, bins] for band edges known at run time, as
 * ONNX's reference computes it: bins + 2 points equally spaced in mel between the
 * edges, each mapped to a spectrogram bin, with a triangle between neighbours. `points`
 * holds bins + 2 entries. Returns AOTC_ERR_INDEX when an edge maps past the last bin
 * (as the reference's indexing fails). */
#define AOTC_MEL_WEIGHT_MATRIX(T, TE, y_, lo_, hi_, bins_, dft_length_, rate_, points_)  \
  do {                                                                               \
    T *y__ = (y_);                                                                   \
    int64_t *pt__ = (points_);                                                       \
    const int64_t spec__ = (dft_length_) / 2 + 1;                                    \
    const double lo_mel__ = 2595.0 * log1p((double)AOTC_LD_##TE((lo_)[0]) / 700.0) / log(10.0); \
    const double hi_mel__ = 2595.0 * log1p((double)AOTC_LD_##TE((hi_)[0]) / 700.0) / log(10.0); \
    const double step__ = (hi_mel__ - lo_mel__) / (double)((bins_) + 2);             \
    int64_t p__, j__, m__;                                                           \
    for (p__ = 0; p__ < (bins_) + 2; p__++) {                                        \
      const double hz__ = 700.0 * expm1(((double)p__ * step__ + lo_mel__) / 2595.0 * log(10.0)); \
      const double at__ = floor((double)((dft_length_) + 1) * hz__ / (double)(rate_)); \
      /* the last point only bounds the last triangle: it may be one past the end */   \
      if (!(at__ >= 0.0 && at__ < (double)(spec__ + (p__ == (bins_) + 1)))) return AOTC_ERR_INDEX; \
      pt__[p__] = (int64_t)at__;                                                     \
    }                                                                                \
    for (j__ = 0; j__ < spec__ * (bins_); j__++) y__[j__] = AOTC_ST_##T(0.0);       \
    for (m__ = 0; m__ < (bins_); m__++) {                                            \
      const int64_t l__ = pt__[m__], c__ = pt__[m__ + 1], r__ = pt__[m__ + 2];       \
      if (c__ == l__) {                                                              \
        y__[c__ * (bins_) + m__] = AOTC_ST_##T(1.0);                                 \
      } else {                                                                       \
        for (j__ = l__; j__ <= c__; j__++)                                           \
          y__[j__ * (bins_) + m__] = AOTC_ST_##T((double)(j__ - l__) / (double)(c__ - l__)); \
      }                                                                              \
      for (j__ = c__; j__ < r__; j__++)                                              \
        y__[j__ * (bins_) + m__] = AOTC_ST_##T((double)(r__ - j__) / (double)(r__ - c__)); \
    }                                                                                \
  } while (0)

#endif
