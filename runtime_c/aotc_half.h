/* aotc runtime: 16-bit floating point storage types.
 *
 * float16 (IEEE binary16) and bfloat16 are stored as 16-bit words; kernels load them
 * into float, compute in float and round once on store. Conversions are exact: to
 * float is lossless, from float rounds to nearest even, keeps infinities and keeps NaN
 * a (quiet) NaN with its sign and the payload bits that fit. Plain integer code, so
 * the result does not depend on the FPU's rounding mode or flush-to-zero setting. */
#ifndef AOTC_HALF_H_
#define AOTC_HALF_H_

#include "aotc_base.h"

typedef uint16_t aotc_f16;
typedef uint16_t aotc_bf16;

AOTC_FN float aotc_f16_to_f32(aotc_f16 h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0x1fu) return aotc_f32_from_bits(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    /* zero or subnormal: mantissa * 2^-24, exact in float */
    const float magnitude = (float)mantissa * 5.9604644775390625e-8f;
    return aotc_f32_from_bits(sign | aotc_f32_bits(magnitude));
  }
  return aotc_f32_from_bits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

AOTC_FN aotc_f16 aotc_f32_to_f16(float f) {
  const uint32_t bits = aotc_f32_bits(f);
  const uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
  const uint32_t x = bits & 0x7fffffffu;
  if (x > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((x >> 13) & 0x3ffu));  /* NaN */
  if (x >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  /* rounds to >= 65520: inf */
  if (x < 0x38800000u) {
    /* below the smallest normal: a subnormal in units of 2^-24, rounded to even */
    const uint32_t shift = 126u - (x >> 23);
    uint32_t mantissa, result, rest, half;
    if (shift > 24u) return sign;
    mantissa = (x & 0x7fffffu) | 0x800000u;
    result = mantissa >> shift;
    rest = mantissa & ((1u << shift) - 1u);
    half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (result & 1u))) result++;
    return (uint16_t)(sign | result);
  }
  {
    /* rebias the exponent, round the 13 dropped bits to even (a carry may raise the
     * exponent, which is the correct result) */
    uint32_t r = x - 0x38000000u;
    r += 0x0fffu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
  }
}

/* double -> float16 in one rounding (through float would round twice), as numpy. */
AOTC_FN aotc_f16 aotc_f64_to_f16(double d) {
  uint64_t bits, x;
  uint16_t sign;
  memcpy(&bits, &d, sizeof bits);
  sign = (uint16_t)((bits >> 48) & 0x8000u);
  x = bits & UINT64_C(0x7fffffffffffffff);
  if (x > UINT64_C(0x7ff0000000000000)) return (uint16_t)(sign | 0x7e00u | ((x >> 42) & 0x3ffu));
  if (x >= UINT64_C(0x40effe0000000000)) return (uint16_t)(sign | 0x7c00u);  /* >= 65520: inf */
  if (x < UINT64_C(0x3f10000000000000)) {
    /* below 2^-14: a subnormal in units of 2^-24, rounded to even */
    const unsigned shift = 1051u - (unsigned)(x >> 52);
    uint64_t mantissa, result, rest, half;
    if (shift > 53u) return sign;
    mantissa = (x & UINT64_C(0xfffffffffffff)) | UINT64_C(0x10000000000000);
    result = mantissa >> shift;
    rest = mantissa & ((UINT64_C(1) << shift) - 1u);
    half = UINT64_C(1) << (shift - 1u);
    if (rest > half || (rest == half && (result & 1u))) result++;
    return (uint16_t)(sign | result);
  }
  {
    uint64_t r = x - UINT64_C(0x3f00000000000000);   /* rebias 1023 -> 15 */
    r += UINT64_C(0x1ffffffffff) + ((r >> 42) & 1u);
    return (uint16_t)(sign | (r >> 42));
  }
}

AOTC_FN float aotc_bf16_to_f32(aotc_bf16 h) { return aotc_f32_from_bits((uint32_t)h << 16); }

AOTC_FN aotc_bf16 aotc_f32_to_bf16(float f) {
  const uint32_t bits = aotc_f32_bits(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x0040u);  /* NaN */
  return (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

/* Whole arrays between the 16-bit floats and float, each value converted as above: the
 * staging of kernels that compute 16-bit tensors in float. */
AOTC_FN void aotc_widen_f16(const aotc_f16 *src, float *dst, int64_t n) {
  int64_t i;
  for (i = 0; i < n; i++) dst[i] = aotc_f16_to_f32(src[i]);
}
AOTC_FN void aotc_widen_bf16(const aotc_bf16 *src, float *dst, int64_t n) {
  int64_t i;
  for (i = 0; i < n; i++) dst[i] = aotc_bf16_to_f32(src[i]);
}
AOTC_FN void aotc_narrow_f16(const float *src, aotc_f16 *dst, int64_t n) {
  int64_t i;
  for (i = 0; i < n; i++) dst[i] = aotc_f32_to_f16(src[i]);
}
AOTC_FN void aotc_narrow_bf16(const float *src, aotc_bf16 *dst, int64_t n) {
  int64_t i;
  for (i = 0; i < n; i++) dst[i] = aotc_f32_to_bf16(src[i]);
}

#endif
