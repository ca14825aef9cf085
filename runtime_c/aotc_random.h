/* aotc runtime: random numbers for RandomUniform(Like), RandomNormal(Like), Bernoulli
 * and Multinomial.
 *
 * Counter-based: element i of a node's output is a hash of (key, i), so values never
 * depend on the thread count or the order of work. A node with a seed uses a key made
 * from it (the same values every run); without one, each run takes a fresh key. */
#ifndef AOTC_RANDOM_H_
#define AOTC_RANDOM_H_

#include "aotc_base.h"
#include "aotc_elementwise.h"

AOTC_FN uint64_t aotc_mix64(uint64_t z) {
  z += UINT64_C(0x9E3779B97F4A7C15);
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}

/* A key for a node without a seed: differs from run to run. */
AOTC_FN uint64_t aotc_random_fresh_key(uint64_t stream) {
  static uint64_t runs;
#if defined(__GNUC__) || defined(__clang__)
  uint64_t n = __atomic_fetch_add(&runs, 1, __ATOMIC_RELAXED);
#else
  uint64_t n = runs++;
#endif
  return aotc_mix64(stream ^ aotc_mix64(n + UINT64_C(0x5851F42D4C957F2D)));
}

/* Uniform in [0, 1) with 53 random bits. */
AOTC_FN double aotc_random_uniform(uint64_t key, uint64_t i) {
  return (double)(aotc_mix64(key ^ aotc_mix64(i)) >> 11) * (1.0 / 9007199254740992.0);
}

/* Standard normal (Box-Muller on two uniforms). */
AOTC_FN double aotc_random_normal(uint64_t key, uint64_t i) {
  const double u1 = 1.0 - aotc_random_uniform(key, 2 * i);   /* (0, 1]: log is finite */
  const double u2 = aotc_random_uniform(key, 2 * i + 1);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

#define AOTC_RANDOM_UNIFORM(T, y_, n_, key_, low_, high_)                            \
  do {                                                                               \
    T *y__ = (y_);                                                                   \
    int64_t i__;                                                                     \
    for (i__ = 0; i__ < (n_); i__++)                                                 \
      y__[i__] = AOTC_ST_##T((low_) + ((high_) - (low_)) * aotc_random_uniform((key_), (uint64_t)i__)); \
  } while (0)

#define AOTC_RANDOM_NORMAL(T, y_, n_, key_, mean_, scale_)                           \
  do {                                                                               \
    T *y__ = (y_);                                                                   \
    int64_t i__;                                                                     \
    for (i__ = 0; i__ < (n_); i__++)                                                 \
      y__[i__] = AOTC_ST_##T((mean_) + (scale_) * aotc_random_normal((key_), (uint64_t)i__)); \
  } while (0)

/* y = 1 with probability x (a uniform draw below x), else 0. */
#define AOTC_BERNOULLI(TY, TX, y_, x_, n_, key_)                                     \
  do {                                                                               \
    TY *y__ = (y_);                                                                  \
    const TX *x__ = (x_);                                                            \
    int64_t i__;                                                                     \
    for (i__ = 0; i__ < (n_); i__++)                                                 \
      y__[i__] = AOTC_ST_##TY(aotc_random_uniform((key_), (uint64_t)i__) <          \
                              (double)AOTC_LD_##TX(x__[i__]) ? 1 : 0);               \
  } while (0)

/* Per row of x [batch, classes] (unnormalized log-probabilities): `samples` class
 * indices drawn from softmax(row), by inverting the cumulative distribution. */
#define AOTC_MULTINOMIAL(TY, TX, y_, x_, batch_, classes_, samples_, key_)            \
  do {                                                                               \
    TY *y__ = (y_);                                                                  \
    const TX *x__ = (x_);                                                            \
    int64_t b__, s__, c__;                                                           \
    for (b__ = 0; b__ < (batch_); b__++) {                                           \
      const TX *row__ = x__ + b__ * (classes_);                                      \
      double top__ = (double)AOTC_LD_##TX(row__[0]), total__ = 0.0;                  \
      for (c__ = 1; c__ < (classes_); c__++)                                         \
        if ((double)AOTC_LD_##TX(row__[c__]) > top__) top__ = (double)AOTC_LD_##TX(row__[c__]); \
      for (c__ = 0; c__ < (classes_); c__++) total__ += exp((double)AOTC_LD_##TX(row__[c__]) - top__); \
      for (s__ = 0; s__ < (samples_); s__++) {                                       \
        double target__ = total__ * aotc_random_uniform((key_), (uint64_t)(b__ * (samples_) + s__)); \
        double run__ = 0.0;                                                          \
        int64_t pick__ = (classes_) - 1;                                             \
        for (c__ = 0; c__ < (classes_); c__++) {                                     \
          run__ += exp((double)AOTC_LD_##TX(row__[c__]) - top__);                    \
          if (target__ < run__) { pick__ = c__; break; }                             \
        }                                                                            \
        y__[b__ * (samples_) + s__] = (TY)pick__;                                    \
      }                                                                              \
    }                                                                                \
  } while (0)

#endif
