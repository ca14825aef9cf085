/* aotc runtime: arg-reductions (ArgMax, ArgMin) and Hardmax.
 *
 * The input is seen as [outer, n, inner]: each of the outer x inner lines of n elements
 * (element stride inner) gives the position of its first (or last) greatest or least
 * element. NaN counts as the extreme value, as in numpy (and onnx.reference): the first
 * NaN wins, or the last one with `last`. Statement macros over the element-wise type
 * names (aotc_elementwise.h), so every element type shares one loop. */
#ifndef AOTC_ARGREDUCE_H_
#define AOTC_ARGREDUCE_H_

#include "aotc_base.h"
#include "aotc_elementwise.h"
#include "aotc_reduce.h"

/* True when v replaces b as the extreme so far. */
#define AOTC_ARG_BETTER_(TX, v, b, largest, last)                                      \
  ((largest) ? ((last) ? ((v) >= (b) || AOTC_ISNAN_##TX(v))                              \
                       : ((v) > (b) || (AOTC_ISNAN_##TX(v) && !AOTC_ISNAN_##TX(b))))      \
             : ((last) ? ((v) <= (b) || AOTC_ISNAN_##TX(v))                              \
                       : ((v) < (b) || (AOTC_ISNAN_##TX(v) && !AOTC_ISNAN_##TX(b)))))

/* pos_ = the position in [0, n) of line (o, i)'s extreme element (n >= 1). */
#define AOTC_ARG_LINE_(TX, x_, o_, i_, n_, inner_, largest, last, pos_)                \
  do {                                                                                  \
    const TX *line__ = (x_) + (o_) * (n_) * (inner_) + (i_);                            \
    AOTC_CT_##TX best__ = AOTC_LD_##TX(line__[0]);                                      \
    int64_t j__;                                                                        \
    pos_ = 0;                                                                           \
    for (j__ = 1; j__ < (n_); j__++) {                                                  \
      AOTC_CT_##TX v__ = AOTC_LD_##TX(line__[j__ * (inner_)]);                          \
      if (AOTC_ARG_BETTER_(TX, v__, best__, largest, last)) {                           \
        best__ = v__;                                                                   \
        pos_ = j__;                                                                     \
      }                                                                                 \
    }                                                                                   \
  } while (0)

/* y[o, i] (int64) = the position of line (o, i)'s extreme. */
#define AOTC_ARGREDUCE(TX, y_, x_, outer_, n_, inner_, largest, last)                  \
  do {                                                                                  \
    int64_t *ya__ = (y_);                                                               \
    int64_t o__, i__;                                                                   \
    for (o__ = 0; o__ < (outer_); o__++)                                                \
      for (i__ = 0; i__ < (inner_); i__++) {                                            \
        int64_t p__;                                                                    \
        AOTC_ARG_LINE_(TX, (x_), o__, i__, (n_), (inner_), largest, last, p__);         \
        ya__[o__ * (inner_) + i__] = p__;                                               \
      }                                                                                 \
  } while (0)

/* y (same shape and type as x) = 1 at each line's first greatest element, 0 elsewhere. */
#define AOTC_HARDMAX(TX, y_, x_, outer_, n_, inner_)                                   \
  do {                                                                                  \
    TX *yh__ = (y_);                                                                    \
    int64_t o__, i__, k__;                                                              \
    for (k__ = 0; k__ < (outer_) * (n_) * (inner_); k__++) yh__[k__] = AOTC_ST_##TX(0); \
    for (o__ = 0; o__ < (outer_); o__++)                                                \
      for (i__ = 0; i__ < (inner_); i__++) {                                            \
        int64_t p__;                                                                    \
        AOTC_ARG_LINE_(TX, (x_), o__, i__, (n_), (inner_), 1, 0, p__);                  \
        yh__[(o__ * (n_) + p__) * (inner_) + i__] = AOTC_ST_##TX(1);                    \
      }                                                                                 \
  } while (0)

#endif
