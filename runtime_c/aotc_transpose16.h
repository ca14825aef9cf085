/* aotc runtime: a 16 x 16 block of floats transposed in AVX-512 registers, for the
 * GEMM's transposed tiles and the layout movers' transposes. Defines
 * AOTC_HAVE_TRANSPOSE16 where it exists (an AVX-512 target built for AVX-512). */
#ifndef AOTC_TRANSPOSE16_H_
#define AOTC_TRANSPOSE16_H_

#include "aotc_base.h"

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
