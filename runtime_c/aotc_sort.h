/* aotc runtime: sorting for TopK.
 *
 * Each value is mapped to an unsigned 64-bit key with the same order (floats through
 * their bits, with -0 taken as +0 and every NaN above +inf, as numpy sorts; signed
 * integers with the sign bit flipped), then positions are merge-sorted by key: stable,
 * so equal values keep the lower position first. The input is seen as [outer, n, inner];
 * each line of n elements (stride inner) is sorted in scratch and its first k entries
 * are written out. */
#ifndef AOTC_SORT_H_
#define AOTC_SORT_H_

#include "aotc_base.h"
#include "aotc_elementwise.h"

AOTC_FN uint64_t aotc_sort_key_real_(double v) {
  uint64_t bits;
  if (v != v) return UINT64_MAX;
  if (v == 0) v = 0.0;
  memcpy(&bits, &v, sizeof bits);
  return (bits >> 63) ? ~bits : bits | (UINT64_C(1) << 63);
}

AOTC_FN uint64_t aotc_sort_key_signed_(int64_t v) { return (uint64_t)v ^ (UINT64_C(1) << 63); }

/* the key of one value in its compute type, per element-wise type name */
#define AOTC_SORT_KEY_float(v) aotc_sort_key_real_((double)(v))
#define AOTC_SORT_KEY_double(v) aotc_sort_key_real_(v)
#define AOTC_SORT_KEY_aotc_f16(v) aotc_sort_key_real_((double)(v))
#define AOTC_SORT_KEY_aotc_bf16(v) aotc_sort_key_real_((double)(v))
#define AOTC_SORT_KEY_int8_t(v) aotc_sort_key_signed_(v)
#define AOTC_SORT_KEY_int16_t(v) aotc_sort_key_signed_(v)
#define AOTC_SORT_KEY_int32_t(v) aotc_sort_key_signed_(v)
#define AOTC_SORT_KEY_int64_t(v) aotc_sort_key_signed_(v)
#define AOTC_SORT_KEY_uint8_t(v) ((uint64_t)(v))
#define AOTC_SORT_KEY_uint16_t(v) ((uint64_t)(v))
#define AOTC_SORT_KEY_uint32_t(v) ((uint64_t)(v))
#define AOTC_SORT_KEY_uint64_t(v) ((uint64_t)(v))

/* idx[0, n) = the positions 0..n-1 ordered by key (descending when `descending`),
 * equal keys in increasing position; tmp: n entries of scratch. */
AOTC_FN void aotc_sort_positions(const uint64_t *key, int64_t *idx, int64_t *tmp, int64_t n,
                                 int descending) {
  int64_t width, i, *src = idx, *dst = tmp;
  for (i = 0; i < n; i++) idx[i] = i;
  for (width = 1; width < n; width *= 2) {
    for (i = 0; i < n; i += 2 * width) {
      int64_t a = i, mid = AOTC_MIN(i + width, n), b = mid, end = AOTC_MIN(i + 2 * width, n), o = i;
      while (a < mid && b < end) {
        const uint64_t ka = key[src[a]], kb = key[src[b]];
        const int take_b = descending ? kb > ka : kb < ka;   /* ties: the left run first */
        dst[o++] = take_b ? src[b++] : src[a++];
      }
      while (a < mid) dst[o++] = src[a++];
      while (b < end) dst[o++] = src[b++];
    }
    { int64_t *t = src; src = dst; dst = t; }
  }
  if (src != idx) memcpy(idx, src, (size_t)n * sizeof *idx);
}

/* values (TX), indices (int64) [outer, k, inner] = the k largest (or smallest) of each
 * line, in order (either output may be NULL); scratch: 24 * n bytes. */
#define AOTC_TOPK(TX, values_, indices_, x_, outer_, n_, inner_, k_, largest, scratch_) \
  do {                                                                                  \
    uint64_t *key__ = (uint64_t *)(void *)(scratch_);                                   \
    int64_t *pos__ = (int64_t *)(void *)(key__ + (n_));                                 \
    int64_t *tmp__ = pos__ + (n_);                                                      \
    const TX *xt__ = (x_);                                                              \
    TX *vt__ = (values_);                                                               \
    int64_t *it__ = (indices_);                                                         \
    int64_t o__, i__, j__;                                                              \
    for (o__ = 0; o__ < (outer_); o__++)                                                \
      for (i__ = 0; i__ < (inner_); i__++) {                                            \
        const TX *line__ = xt__ + o__ * (n_) * (inner_) + i__;                          \
        for (j__ = 0; j__ < (n_); j__++)                                                \
          key__[j__] = AOTC_SORT_KEY_##TX(AOTC_LD_##TX(line__[j__ * (inner_)]));        \
        aotc_sort_positions(key__, pos__, tmp__, (n_), (largest));                      \
        for (j__ = 0; j__ < (k_); j__++) {                                              \
          const int64_t at__ = (o__ * (k_) + j__) * (inner_) + i__;                     \
          if (vt__) vt__[at__] = line__[pos__[j__] * (inner_)];                         \
          if (it__) it__[at__] = pos__[j__];                                            \
        }                                                                               \
      }                                                                                 \
  } while (0)

#endif
