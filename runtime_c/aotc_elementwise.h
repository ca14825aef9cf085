/* aotc runtime: element-wise loops with numpy broadcasting.
 *
 * These are macros, expanded in place by the generated code with the node's element
 * types and expression, so every operator and element type shares one loop and the
 * compiler sees the node's constant extents. The compiler collapses the broadcast to
 * the fewest dimensions before emitting (aotc/ops/broadcast.py).
 *
 * Element types are passed as their C type names. Each name has a compute type, a
 * load and a store (AOTC_CT_<T>, AOTC_LD_<T>, AOTC_ST_<T>): the expression sees
 * operands in the compute type, so float16 and bfloat16 are computed in float and
 * rounded once when stored; every other type is its own compute type. */
#ifndef AOTC_ELEMENTWISE_H_
#define AOTC_ELEMENTWISE_H_

#include "aotc_base.h"
#include "aotc_half.h"
#include "aotc_threads.h"

#define AOTC_CT_float float
#define AOTC_LD_float(v) (v)
#define AOTC_ST_float(v) ((float)(v))
#define AOTC_CT_double double
#define AOTC_LD_double(v) (v)
#define AOTC_ST_double(v) ((double)(v))
#define AOTC_CT_aotc_f16 float
#define AOTC_LD_aotc_f16(v) aotc_f16_to_f32(v)
#define AOTC_ST_aotc_f16(v) aotc_f32_to_f16((float)(v))
#define AOTC_CT_aotc_bf16 float
#define AOTC_LD_aotc_bf16(v) aotc_bf16_to_f32(v)
#define AOTC_ST_aotc_bf16(v) aotc_f32_to_bf16((float)(v))
#define AOTC_CT_int8_t int8_t
#define AOTC_LD_int8_t(v) (v)
#define AOTC_ST_int8_t(v) ((int8_t)(v))
#define AOTC_CT_int16_t int16_t
#define AOTC_LD_int16_t(v) (v)
#define AOTC_ST_int16_t(v) ((int16_t)(v))
#define AOTC_CT_int32_t int32_t
#define AOTC_LD_int32_t(v) (v)
#define AOTC_ST_int32_t(v) ((int32_t)(v))
#define AOTC_CT_int64_t int64_t
#define AOTC_LD_int64_t(v) (v)
#define AOTC_ST_int64_t(v) ((int64_t)(v))
#define AOTC_CT_uint8_t uint8_t
#define AOTC_LD_uint8_t(v) (v)
#define AOTC_ST_uint8_t(v) ((uint8_t)(v))
#define AOTC_CT_uint16_t uint16_t
#define AOTC_LD_uint16_t(v) (v)
#define AOTC_ST_uint16_t(v) ((uint16_t)(v))
#define AOTC_CT_uint32_t uint32_t
#define AOTC_LD_uint32_t(v) (v)
#define AOTC_ST_uint32_t(v) ((uint32_t)(v))
#define AOTC_CT_uint64_t uint64_t
#define AOTC_LD_uint64_t(v) (v)
#define AOTC_ST_uint64_t(v) ((uint64_t)(v))
/* bool is a macro for _Bool: a name passed through one more macro level arrives as _Bool */
#define AOTC_CT_bool bool
#define AOTC_LD_bool(v) (v)
#define AOTC_ST_bool(v) ((bool)(v))
#define AOTC_CT__Bool bool
#define AOTC_LD__Bool(v) (v)
#define AOTC_ST__Bool(v) ((bool)(v))

/* Integer power by squaring in unsigned arithmetic (wraps like the other integer
 * operators); a negative exponent leaves only bases 1 and -1 nonzero. */
AOTC_FN int64_t aotc_ipow_i64(int64_t base, int64_t exponent) {
  uint64_t result = 1, b = (uint64_t)base, e;
  if (exponent < 0) {
    if (base == 1) return 1;
    if (base == -1) return (exponent & 1) ? -1 : 1;
    return 0;
  }
  for (e = (uint64_t)exponent; e; e >>= 1) {
    if (e & 1u) result *= b;
    b *= b;
  }
  return (int64_t)result;
}

/* Floored modulo (Mod with fmod=0 on floats): the result has the divisor's sign, a
 * zero result the divisor's sign too; infinities and NaN as in ONNX Mod-28. */
AOTC_FN float aotc_fmod_floor_f32(float a, float b) {
  float r = fmodf(a, b);
  if (r == 0) return copysignf(0.0f, b);
  return ((r < 0) != (b < 0)) ? r + b : r;
}

AOTC_FN double aotc_fmod_floor_f64(double a, double b) {
  double r = fmod(a, b);
  if (r == 0) return copysign(0.0, b);
  return ((r < 0) != (b < 0)) ? r + b : r;
}

/* Large element-wise loops over operands of the output's shape run on the thread pool:
 * the generated code puts the node's loop (one of the macros below, over elements
 * [t * AOTC_EW_TASK, ...)) in a task function of its own and hands it the operands
 * here. The pieces depend on the size only, and every element's expression is the
 * one the loop would compute inline: the same bits at any thread count. */
#define AOTC_EW_TASK 16384   /* elements per task */

typedef struct {
  void *y;
  const void *a, *b;   /* b: NULL for a unary loop */
  int64_t n;
} aotc_ew_range;

/* The elements [first, first + *count) of task t. */
AOTC_FN int64_t aotc_ew_first(const aotc_ew_range *r, int64_t t, int64_t *count) {
  *count = AOTC_MIN(AOTC_EW_TASK, r->n - t * AOTC_EW_TASK);
  return t * AOTC_EW_TASK;
}

AOTC_FN void aotc_ew_parallel(aotc_pool *pool, aotc_task_fn task, void *y, const void *a,
                              const void *b, int64_t n) {
  aotc_ew_range r;
  r.y = y;
  r.a = a;
  r.b = b;
  r.n = n;
  aotc_parallel_for(pool, (n + AOTC_EW_TASK - 1) / AOTC_EW_TASK, task, &r);
}

/* y[i] = EXPR for i in [0, n), where EXPR reads X (= x[i] in its compute type). */
#define AOTC_UNARY(TY, TX, y_, x_, n_, EXPR)                      \
  do {                                                            \
    TY *y__ = (y_);                                               \
    const TX *x__ = (x_);                                         \
    int64_t i__, n__ = (n_);                                      \
    for (i__ = 0; i__ < n__; i__++) {                             \
      AOTC_CT_##TX X = AOTC_LD_##TX(x__[i__]);                    \
      y__[i__] = AOTC_ST_##TY(EXPR);                              \
    }                                                             \
  } while (0)

/* Broadcast iteration over `rank` output dims (rank >= 1): EXPR reads A, B (and C for
 * the ternary form), each operand with its own element strides (0 where broadcast).
 * The innermost dimension is a plain loop with the operands' innermost strides. */
#define AOTC_BROADCAST_BEGIN_(rank_, shape_)                      \
  int64_t idx__[16] = {0}, o__ = 0, outer__ = 1, r__;             \
  const int rank__ = (rank_);                                     \
  const int64_t *shape__ = (shape_);                              \
  const int64_t inner__ = shape__[rank__ - 1];                    \
  for (r__ = 0; r__ < rank__ - 1; r__++) outer__ *= shape__[r__]; \
  for (o__ = 0; o__ < outer__; o__++)

#define AOTC_BROADCAST_OFFSET_(strides_, dst)                     \
  do {                                                            \
    int64_t k__;                                                  \
    dst = 0;                                                      \
    for (k__ = 0; k__ < rank__ - 1; k__++) dst += idx__[k__] * (strides_)[k__]; \
  } while (0)

#define AOTC_BROADCAST_NEXT_()                                    \
  do {                                                            \
    int64_t k__;                                                  \
    for (k__ = rank__ - 2; k__ >= 0; k__--) {                     \
      if (++idx__[k__] < shape__[k__]) break;                     \
      idx__[k__] = 0;                                             \
    }                                                             \
  } while (0)

#define AOTC_BINARY(TY, TA, TB, y_, a_, b_, rank_, shape_, sa_, sb_, EXPR) \
  do {                                                            \
    TY *y__ = (y_);                                               \
    const TA *a__ = (a_);                                         \
    const TB *b__ = (b_);                                         \
    const int64_t *sa__ = (sa_), *sb__ = (sb_);                   \
    AOTC_BROADCAST_BEGIN_(rank_, shape_) {                        \
      int64_t oa__, ob__, j__;                                    \
      const int64_t ia__ = sa__[rank__ - 1], ib__ = sb__[rank__ - 1]; \
      TY *yr__ = y__ + o__ * inner__;                             \
      AOTC_BROADCAST_OFFSET_(sa__, oa__);                         \
      AOTC_BROADCAST_OFFSET_(sb__, ob__);                         \
      if (ia__ == 1 && ib__ == 1) {                               \
        for (j__ = 0; j__ < inner__; j__++) {                     \
          AOTC_CT_##TA A = AOTC_LD_##TA(a__[oa__ + j__]);         \
          AOTC_CT_##TB B = AOTC_LD_##TB(b__[ob__ + j__]);         \
          yr__[j__] = AOTC_ST_##TY(EXPR);                         \
        }                                                         \
      } else if (ib__ == 0) {                                     \
        const AOTC_CT_##TB B = AOTC_LD_##TB(b__[ob__]);           \
        for (j__ = 0; j__ < inner__; j__++) {                     \
          AOTC_CT_##TA A = AOTC_LD_##TA(a__[oa__ + j__ * ia__]);  \
          yr__[j__] = AOTC_ST_##TY(EXPR);                         \
        }                                                         \
      } else {                                                    \
        for (j__ = 0; j__ < inner__; j__++) {                     \
          AOTC_CT_##TA A = AOTC_LD_##TA(a__[oa__ + j__ * ia__]);  \
          AOTC_CT_##TB B = AOTC_LD_##TB(b__[ob__ + j__ * ib__]);  \
          yr__[j__] = AOTC_ST_##TY(EXPR);                         \
        }                                                         \
      }                                                           \
      AOTC_BROADCAST_NEXT_();                                     \
    }                                                             \
  } while (0)

#define AOTC_TERNARY(TY, TA, TB, TC, y_, a_, b_, c_, rank_, shape_, sa_, sb_, sc_, EXPR) \
  do {                                                            \
    TY *y__ = (y_);                                               \
    const TA *a__ = (a_);                                         \
    const TB *b__ = (b_);                                         \
    const TC *c__ = (c_);                                         \
    const int64_t *sa__ = (sa_), *sb__ = (sb_), *sc__ = (sc_);    \
    AOTC_BROADCAST_BEGIN_(rank_, shape_) {                        \
      int64_t oa__, ob__, oc__, j__;                              \
      const int64_t ia__ = sa__[rank__ - 1], ib__ = sb__[rank__ - 1], ic__ = sc__[rank__ - 1]; \
      TY *yr__ = y__ + o__ * inner__;                             \
      AOTC_BROADCAST_OFFSET_(sa__, oa__);                         \
      AOTC_BROADCAST_OFFSET_(sb__, ob__);                         \
      AOTC_BROADCAST_OFFSET_(sc__, oc__);                         \
      for (j__ = 0; j__ < inner__; j__++) {                       \
        AOTC_CT_##TA A = AOTC_LD_##TA(a__[oa__ + j__ * ia__]);    \
        AOTC_CT_##TB B = AOTC_LD_##TB(b__[ob__ + j__ * ib__]);    \
        AOTC_CT_##TC C = AOTC_LD_##TC(c__[oc__ + j__ * ic__]);    \
        yr__[j__] = AOTC_ST_##TY(EXPR);                           \
      }                                                           \
      AOTC_BROADCAST_NEXT_();                                     \
    }                                                             \
  } while (0)

#endif
