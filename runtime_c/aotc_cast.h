/* aotc runtime: the 8-, 4- and 2-bit storage types and their conversions.
 *
 * Every such element takes one byte, laid out as ml_dtypes lays it out in numpy: the
 * float8 types use the whole byte; float4e2m1, int4/uint4 and int2/uint2 keep their
 * bits in the low end of the byte with the rest zero (reads ignore the rest). The
 * kernel type names below (aotc_f8e4m3fn, aotc_i4, ...) select a load into float (the
 * floats) or int8_t / uint8_t (the small integers) and a store from it, as
 * aotc_elementwise.h does for the 16-bit floats.
 *
 * Conversions to a narrow float round to nearest even from float32, like ml_dtypes (a
 * double is first rounded to float, as ml_dtypes and the ONNX reference do). The ONNX
 * Cast rules are in the functions: `saturate` clamps out-of-range values (infinities
 * included) to the largest finite value; without it they become infinity (E5M2) or
 * NaN (the types without infinities). Plain integer code: the result does not depend
 * on the FPU's rounding mode or flush-to-zero setting. */
#ifndef AOTC_CAST_H_
#define AOTC_CAST_H_

#include "aotc_base.h"

typedef uint8_t aotc_f8e4m3fn;
typedef uint8_t aotc_f8e4m3fnuz;
typedef uint8_t aotc_f8e5m2;
typedef uint8_t aotc_f8e5m2fnuz;
typedef uint8_t aotc_f8e8m0;
typedef uint8_t aotc_f4e2m1;
typedef uint8_t aotc_i4;
typedef uint8_t aotc_u4;
typedef uint8_t aotc_i2;
typedef uint8_t aotc_u2;

/* What a narrow float does with the values outside its finite range. */
#define AOTC_FP_IEEE 0 /* infinity and NaNs at the top exponent, as IEEE (E5M2) */
#define AOTC_FP_FN 1   /* no infinity; only the all-ones pattern is NaN (E4M3FN) */
#define AOTC_FP_FNUZ 2 /* no infinity, no -0; the pattern of -0 (0x80) is NaN */
#define AOTC_FP_NONE 3 /* no infinity, no NaN: out of range saturates (float4e2m1) */

/* Rounding of Cast to float8e8m0 (its round_mode attribute). */
#define AOTC_E8M0_UP 0
#define AOTC_E8M0_DOWN 1
#define AOTC_E8M0_NEAREST 2

/* A narrow float with `ebits` exponent bits, `mbits` mantissa bits and exponent bias
 * `bias`, widened to float (always exact). */
AOTC_FN float aotc_fp_decode(uint32_t v, int ebits, int mbits, int bias, int kind) {
  const uint32_t sign = (v >> (ebits + mbits)) & 1u;
  const uint32_t emax = (1u << ebits) - 1u, mmask = (1u << mbits) - 1u;
  const uint32_t e = (v >> mbits) & emax, m = v & mmask;
  const uint32_t sbit = sign << 31;
  if (kind == AOTC_FP_FNUZ && sign && e == 0 && m == 0) return aotc_f32_from_bits(0xffc00000u);
  if (kind == AOTC_FP_IEEE && e == emax) return aotc_f32_from_bits(sbit | 0x7f800000u | (m ? 0x400000u : 0u));
  if (kind == AOTC_FP_FN && e == emax && m == mmask) return aotc_f32_from_bits(sbit | 0x7fc00000u);
  if (e == 0) {
    /* zero or subnormal: m units of 2^(1 - bias - mbits), exact in float */
    const float unit = aotc_f32_from_bits((uint32_t)(127 + 1 - bias - mbits) << 23);
    return aotc_f32_from_bits(sbit | aotc_f32_bits((float)m * unit));
  }
  return aotc_f32_from_bits(sbit | ((e + 127u - (uint32_t)bias) << 23) | (m << (23 - mbits)));
}

/* float -> the narrow float's bit pattern, rounded to nearest even. */
AOTC_FN uint8_t aotc_fp_encode(float f, int ebits, int mbits, int bias, int kind, int saturate) {
  const uint32_t bits = aotc_f32_bits(f);
  const uint32_t sign = (bits >> 31) << (ebits + mbits);
  const uint32_t x = bits & 0x7fffffffu;
  const uint32_t all = (1u << (ebits + mbits)) - 1u;   /* every bit but the sign */
  const uint32_t inf = ((1u << ebits) - 1u) << mbits;  /* the IEEE infinity */
  const uint32_t max = kind == AOTC_FP_IEEE ? inf - 1u : kind == AOTC_FP_FN ? all - 1u : all;
  const uint32_t nan = kind == AOTC_FP_FNUZ ? 1u << (ebits + mbits) : sign | all;
  uint32_t code;
  if (kind == AOTC_FP_NONE) saturate = 1;
  if (x > 0x7f800000u) {
    /* NaN; a type without NaN gives the zero of the opposite sign, as ml_dtypes */
    if (kind == AOTC_FP_NONE) return (uint8_t)(sign ^ (1u << (ebits + mbits)));
    return (uint8_t)(kind == AOTC_FP_IEEE ? sign | inf | (1u << (mbits - 1)) : nan);
  }
  if (x >= ((uint32_t)(127 + 1 - bias) << 23)) {
    /* normal in the target: rebias, round the dropped bits to even (a carry into the
     * exponent is the right result); infinity lands above `max` */
    const int shift = 23 - mbits;
    uint32_t r = x - ((uint32_t)(127 - bias) << 23);
    r += (1u << (shift - 1)) - 1u + ((r >> shift) & 1u);
    code = x == 0x7f800000u ? all + 1u : r >> shift;
  } else {
    /* a subnormal (or zero) of the target, in units of 2^(1 - bias - mbits) */
    const int shift = 151 - bias - mbits - (int)(x >> 23);
    const uint32_t mantissa = (x & 0x7fffffu) | 0x800000u;
    if (x < 0x800000u || shift > 24) {
      code = 0;   /* below half the smallest subnormal (float subnormals included) */
    } else {
      const uint32_t rest = mantissa & ((1u << shift) - 1u), half = 1u << (shift - 1);
      code = mantissa >> shift;
      if (rest > half || (rest == half && (code & 1u))) code++;
    }
  }
  if (code > max) {
    if (saturate) return (uint8_t)(sign | max);
    return (uint8_t)(kind == AOTC_FP_IEEE ? sign | inf : nan);
  }
  if (kind == AOTC_FP_FNUZ && code == 0) return 0;   /* no negative zero */
  return (uint8_t)(sign | code);
}

/* float8e8m0: a power of two 2^(v - 127); 0xff is NaN. */
AOTC_FN float aotc_e8m0_to_f32(uint8_t v) {
  if (v == 0xffu) return aotc_f32_from_bits(0x7fc00000u);
  return aotc_f32_from_bits(v ? (uint32_t)v << 23 : 0x400000u);
}

/* float -> float8e8m0 from the float's exponent, rounding on its mantissa bits as the
 * ONNX reference (onnx.numpy_helper.to_float8e8m0) does; the sign is ignored. */
AOTC_FN uint8_t aotc_f32_to_e8m0(float f, int saturate, int mode) {
  const uint32_t bits = aotc_f32_bits(f);
  const uint32_t e = (bits >> 23) & 0xffu;
  uint32_t up = 0;
  if (e == 0xffu) return 0xffu;
  if (mode == AOTC_E8M0_UP) {
    up = (bits & 0x7fffffu) != 0;
  } else if (mode == AOTC_E8M0_NEAREST) {
    const uint32_t guard = (bits >> 22) & 1u, round = (bits >> 21) & 1u;
    const uint32_t sticky = (bits & 0x1fffffu) != 0;
    up = guard && (round || sticky || e > 0);
  }
  if (saturate && e == 0xfeu) up = 0;
  return (uint8_t)(e + up);
}

/* The small integers: two's complement in the low `bits` bits of the byte. */
AOTC_FN int8_t aotc_i4_to_i8(uint8_t v) { return (int8_t)((int)((v & 0xfu) ^ 0x8u) - 8); }
AOTC_FN int8_t aotc_i2_to_i8(uint8_t v) { return (int8_t)((int)((v & 0x3u) ^ 0x2u) - 2); }

/* A float to a small integer's bits: truncated toward zero and wrapped; NaN and values
 * outside the int32 range give 0 (ml_dtypes' result on x86, never undefined here). A
 * double is rounded to float first, as ml_dtypes does. */
AOTC_FN uint8_t aotc_float_to_low_bits(float x, unsigned mask) {
  if (!(x > -2147483649.0 && x < 2147483648.0)) return 0;
  return (uint8_t)((uint64_t)(int64_t)x & mask);
}

#define AOTC_FP_E4M3FN 4, 3, 7, AOTC_FP_FN
#define AOTC_FP_E4M3FNUZ 4, 3, 8, AOTC_FP_FNUZ
#define AOTC_FP_E5M2 5, 2, 15, AOTC_FP_IEEE
#define AOTC_FP_E5M2FNUZ 5, 2, 16, AOTC_FP_FNUZ
#define AOTC_FP_E2M1 2, 1, 1, AOTC_FP_NONE

/* Loads into the compute type and stores from it (saturating, the ONNX default; the
 * small integers store integer values, wrapped). */
#define AOTC_CT_aotc_f8e4m3fn float
#define AOTC_LD_aotc_f8e4m3fn(v) aotc_fp_decode((v), AOTC_FP_E4M3FN)
#define AOTC_ST_aotc_f8e4m3fn(v) aotc_fp_encode((float)(v), AOTC_FP_E4M3FN, 1)
#define AOTC_CT_aotc_f8e4m3fnuz float
#define AOTC_LD_aotc_f8e4m3fnuz(v) aotc_fp_decode((v), AOTC_FP_E4M3FNUZ)
#define AOTC_ST_aotc_f8e4m3fnuz(v) aotc_fp_encode((float)(v), AOTC_FP_E4M3FNUZ, 1)
#define AOTC_CT_aotc_f8e5m2 float
#define AOTC_LD_aotc_f8e5m2(v) aotc_fp_decode((v), AOTC_FP_E5M2)
#define AOTC_ST_aotc_f8e5m2(v) aotc_fp_encode((float)(v), AOTC_FP_E5M2, 1)
#define AOTC_CT_aotc_f8e5m2fnuz float
#define AOTC_LD_aotc_f8e5m2fnuz(v) aotc_fp_decode((v), AOTC_FP_E5M2FNUZ)
#define AOTC_ST_aotc_f8e5m2fnuz(v) aotc_fp_encode((float)(v), AOTC_FP_E5M2FNUZ, 1)
#define AOTC_CT_aotc_f4e2m1 float
#define AOTC_LD_aotc_f4e2m1(v) aotc_fp_decode((v), AOTC_FP_E2M1)
#define AOTC_ST_aotc_f4e2m1(v) aotc_fp_encode((float)(v), AOTC_FP_E2M1, 1)
#define AOTC_CT_aotc_f8e8m0 float
#define AOTC_LD_aotc_f8e8m0(v) aotc_e8m0_to_f32(v)
#define AOTC_ST_aotc_f8e8m0(v) aotc_f32_to_e8m0((float)(v), 1, AOTC_E8M0_UP)
#define AOTC_CT_aotc_i4 int8_t
#define AOTC_LD_aotc_i4(v) aotc_i4_to_i8(v)
#define AOTC_ST_aotc_i4(v) ((uint8_t)((uint64_t)(v) & 0xfu))
#define AOTC_CT_aotc_u4 uint8_t
#define AOTC_LD_aotc_u4(v) ((uint8_t)((v) & 0xfu))
#define AOTC_ST_aotc_u4(v) ((uint8_t)((uint64_t)(v) & 0xfu))
#define AOTC_CT_aotc_i2 int8_t
#define AOTC_LD_aotc_i2(v) aotc_i2_to_i8(v)
#define AOTC_ST_aotc_i2(v) ((uint8_t)((uint64_t)(v) & 0x3u))
#define AOTC_CT_aotc_u2 uint8_t
#define AOTC_LD_aotc_u2(v) ((uint8_t)((v) & 0x3u))
#define AOTC_ST_aotc_u2(v) ((uint8_t)((uint64_t)(v) & 0x3u))

#endif
