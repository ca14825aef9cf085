/* aotc runtime: element-wise loops with numpy broadcasting.
 *
 * These are macros, expanded in place by the generated code with the node's element
 * types and expression, so every operator and element type shares one loop and the
 * compiler sees the node's constant extents. The compiler collapses the broadcast to
 * the fewest dimensions before emitting (aotc/ops/elementwise.py). */
#ifndef AOTC_ELEMENTWISE_H_
#define AOTC_ELEMENTWISE_H_

#include "aotc_base.h"

/* y[i] = EXPR for i in [0, n), where EXPR reads X (= x[i]). */
#define AOTC_UNARY(TY, TX, y_, x_, n_, EXPR)                        \
  do {                                                              \
    TY *y__ = (y_);                                                 \
    const TX *x__ = (x_);                                           \
    int64_t i__, n__ = (n_);                                        \
    for (i__ = 0; i__ < n__; i__++) {                               \
      TX X = x__[i__];                                              \
      y__[i__] = (TY)(EXPR);                                        \
    }                                                               \
  } while (0)

/* Broadcast iteration over `rank` output dims (rank >= 1): EXPR reads A, B (and C for
 * the ternary form), each operand with its own element strides (0 where broadcast).
 * The innermost dimension is a plain loop with the operands' innermost strides. */
#define AOTC_BROADCAST_BEGIN_(rank_, shape_)                        \
  int64_t idx__[16] = {0}, o__ = 0, outer__ = 1, r__;               \
  const int rank__ = (rank_);                                       \
  const int64_t *shape__ = (shape_);                                \
  const int64_t inner__ = shape__[rank__ - 1];                      \
  for (r__ = 0; r__ < rank__ - 1; r__++) outer__ *= shape__[r__];   \
  for (o__ = 0; o__ < outer__; o__++)

#define AOTC_BROADCAST_OFFSET_(strides_, dst)                       \
  do {                                                              \
    int64_t k__;                                                    \
    dst = 0;                                                        \
    for (k__ = 0; k__ < rank__ - 1; k__++) dst += idx__[k__] * (strides_)[k__]; \
  } while (0)

#define AOTC_BROADCAST_NEXT_()                                      \
  do {                                                              \
    int64_t k__;                                                    \
    for (k__ = rank__ - 2; k__ >= 0; k__--) {                       \
      if (++idx__[k__] < shape__[k__]) break;                       \
      idx__[k__] = 0;                                               \
    }                                                               \
  } while (0)

#define AOTC_BINARY(TY, TA, TB, y_, a_, b_, rank_, shape_, sa_, sb_, EXPR) \
  do {                                                              \
    TY *y__ = (y_);                                                 \
    const TA *a__ = (a_);                                           \
    const TB *b__ = (b_);                                           \
    const int64_t *sa__ = (sa_), *sb__ = (sb_);                     \
    AOTC_BROADCAST_BEGIN_(rank_, shape_) {                          \
      int64_t oa__, ob__, j__;                                      \
      const int64_t ia__ = sa__[rank__ - 1], ib__ = sb__[rank__ - 1]; \
      TY *yr__ = y__ + o__ * inner__;                               \
      AOTC_BROADCAST_OFFSET_(sa__, oa__);                           \
      AOTC_BROADCAST_OFFSET_(sb__, ob__);                           \
      if (ia__ == 1 && ib__ == 1) {                                 \
        for (j__ = 0; j__ < inner__; j__++) {                       \
          TA A = a__[oa__ + j__]; TB B = b__[ob__ + j__];           \
          yr__[j__] = (TY)(EXPR);                                   \
        }                                                           \
      } else if (ib__ == 0) {                                       \
        const TB B = b__[ob__];                                     \
        for (j__ = 0; j__ < inner__; j__++) {                       \
          TA A = a__[oa__ + j__ * ia__];                            \
          yr__[j__] = (TY)(EXPR);                                   \
        }                                                           \
      } else {                                                      \
        for (j__ = 0; j__ < inner__; j__++) {                       \
          TA A = a__[oa__ + j__ * ia__]; TB B = b__[ob__ + j__ * ib__]; \
          yr__[j__] = (TY)(EXPR);                                   \
        }                                                           \
      }                                                             \
      AOTC_BROADCAST_NEXT_();                                       \
    }                                                               \
  } while (0)

#define AOTC_TERNARY(TY, TA, TB, TC, y_, a_, b_, c_, rank_, shape_, sa_, sb_, sc_, EXPR) \
  do {                                                              \
    TY *y__ = (y_);                                                 \
    const TA *a__ = (a_);                                           \
    const TB *b__ = (b_);                                           \
    const TC *c__ = (c_);                                           \
    const int64_t *sa__ = (sa_), *sb__ = (sb_), *sc__ = (sc_);      \
    AOTC_BROADCAST_BEGIN_(rank_, shape_) {                          \
      int64_t oa__, ob__, oc__, j__;                                \
      const int64_t ia__ = sa__[rank__ - 1], ib__ = sb__[rank__ - 1], ic__ = sc__[rank__ - 1]; \
      TY *yr__ = y__ + o__ * inner__;                               \
      AOTC_BROADCAST_OFFSET_(sa__, oa__);                           \
      AOTC_BROADCAST_OFFSET_(sb__, ob__);                           \
      AOTC_BROADCAST_OFFSET_(sc__, oc__);                           \
      for (j__ = 0; j__ < inner__; j__++) {                         \
        TA A = a__[oa__ + j__ * ia__];                              \
        TB B = b__[ob__ + j__ * ib__];                              \
        TC C = c__[oc__ + j__ * ic__];                              \
        yr__[j__] = (TY)(EXPR);                                     \
      }                                                             \
      AOTC_BROADCAST_NEXT_();                                       \
    }                                                               \
  } while (0)

#endif
