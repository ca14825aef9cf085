/* aotc runtime: Dropout, in inference and in training.
 *
 * Training draws the mask the way the ONNX reference does, numpy's legacy
 * RandomState(seed).uniform(0, 1, shape) >= ratio: MT19937 seeded by init_genrand,
 * each uniform made of two 32-bit draws (53 bits), in element order. So with the
 * node's seed the result is the reference's, bit for bit in the mask. Sequential. */
#ifndef AOTC_DROPOUT_H_
#define AOTC_DROPOUT_H_

#include "aotc_base.h"
#include "aotc_kinds.h"

#define AOTC_MT_N 624

typedef struct {
  uint32_t key[AOTC_MT_N];
  int pos;
} aotc_mt19937;

AOTC_FN void aotc_mt19937_seed(aotc_mt19937 *mt, uint32_t seed) {
  int i;
  for (i = 0; i < AOTC_MT_N; i++) {
    mt->key[i] = seed;
    seed = 1812433253u * (seed ^ (seed >> 30)) + (uint32_t)i + 1u;
  }
  mt->pos = AOTC_MT_N;
}

AOTC_FN uint32_t aotc_mt19937_next(aotc_mt19937 *mt) {
  uint32_t y;
  if (mt->pos == AOTC_MT_N) {
    int i;
    for (i = 0; i < AOTC_MT_N; i++) {
      const uint32_t bits = (mt->key[i] & 0x80000000u) | (mt->key[(i + 1) % AOTC_MT_N] & 0x7fffffffu);
      mt->key[i] = mt->key[(i + 397) % AOTC_MT_N] ^ (bits >> 1) ^ ((bits & 1u) ? 0x9908b0dfu : 0u);
    }
    mt->pos = 0;
  }
  y = mt->key[mt->pos++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  return y ^ (y >> 18);
}

/* A uniform double in [0, 1) from 53 random bits, as numpy's random_sample. */
AOTC_FN double aotc_mt19937_uniform(aotc_mt19937 *mt) {
  const uint32_t a = aotc_mt19937_next(mt) >> 5, b = aotc_mt19937_next(mt) >> 6;
  return ((double)a * 67108864.0 + (double)b) / 9007199254740992.0;
}

typedef struct {
  const void *x, *ratio;     /* ratio may be NULL (0.5) */
  const bool *training;      /* NULL: inference */
  void *y, *mask;            /* mask may be NULL */
  int kind, ratio_kind, mask_kind;
  int64_t n;
  uint32_t seed;
  aotc_mt19937 *rng;         /* scratch */
} aotc_dropout_args;

AOTC_FN void aotc_dropout(const aotc_dropout_args *a) {
  const double ratio = a->ratio ? aotc_kind_load(a->ratio, 0, a->ratio_kind) : 0.5;
  const int drop = a->training && a->training[0] && ratio != 0.0;
  /* 1 / (1 - ratio) in the ratio's type, as the reference computes it */
  const double scale = aotc_kind_round(1.0 / aotc_kind_round(1.0 - ratio, a->ratio_kind), a->ratio_kind);
  int64_t i;
  if (drop) aotc_mt19937_seed(a->rng, a->seed);
  for (i = 0; i < a->n; i++) {
    const int keep = !drop || aotc_mt19937_uniform(a->rng) >= ratio;
    const double x = aotc_kind_load(a->x, i, a->kind);
    if (drop) aotc_kind_store(a->y, i, a->kind, aotc_kind_round(x * (double)keep * scale, a->kind));
    else if (a->y != a->x) aotc_kind_store(a->y, i, a->kind, x);
    if (a->mask) aotc_kind_store(a->mask, i, a->mask_kind, keep ? 1.0 : 0.0);
  }
}

#endif
