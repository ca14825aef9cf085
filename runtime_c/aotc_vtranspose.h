/* aotc runtime: square blocks of floats transposed in vector registers, 16 x 16 in
 * AVX-512 and 8 x 8 in AVX, for the GEMM's transposed tiles, the convs' lanes and the
 * layout movers' transposes. Defines AOTC_HAVE_TRANSPOSE16 and AOTC_HAVE_TRANSPOSE8
 * where each exists (a target that takes the ISA, built for it). */
#ifndef AOTC_VTRANSPOSE_H_
#define AOTC_VTRANSPOSE_H_

#include "aotc_base.h"

#if (defined(AOTC_TARGET_AVX512) || defined(AOTC_TARGET_AVX2)) && defined(__AVX__)
#include <immintrin.h>
#define AOTC_HAVE_TRANSPOSE8 1

/* r[i] <- column i of the 8 x 8 block whose rows are r[0..7]. */
AOTC_INLINE_ALWAYS void aotc_v_transpose8_(__m256 r[8]) {
  __m256 t[8];
  int i;
  for (i = 0; i < 4; i++) {   /* pairs of rows interleaved, then quads, then 128-bit lanes */
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (i = 0; i < 2; i++) {
    r[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    r[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    r[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    r[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (i = 0; i < 4; i++) {
    t[i] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x20);
    t[i + 4] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x31);
  }
  for (i = 0; i < 8; i++) r[i] = t[i];
}
#endif

#if defined(AOTC_TARGET_AVX512) && defined(__AVX512F__)
#include <immintrin.h>
#define AOTC_HAVE_TRANSPOSE16 1

/* r[i] <- column i of the 16 x 16 block whose rows are r[0..15]. */
AOTC_INLINE_ALWAYS void aotc_v_transpose16_(__m512 r[16]) {
  __m512 t[16];
  int i;
  for (i = 0; i < 8; i++) {   /* pairs of rows interleaved, then quads, then 128-bit lanes */
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (i = 0; i < 4; i++) {
    const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
    r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  for (i = 0; i < 4; i++) {
    t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xdd);
    t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xdd);
  }
  for (i = 0; i < 8; i++) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
  }
}

#endif
#endif
