/* aotc runtime: cumulative sums and products (CumSum, CumProd).
 *
 * The input is seen as [outer, n, inner]; each of the outer x inner lines of n elements
 * (element stride inner) is scanned in order (backwards with `reverse`), in the
 * accumulator type of its element type (aotc_reduce.h: float for the 16-bit floats,
 * wrapping uint64_t for integers), each output rounded once. With `exclusive` an
 * output holds the scan of the elements before it. y may be x. */
#ifndef AOTC_SCAN_H_
#define AOTC_SCAN_H_

#include "aotc_base.h"
#include "aotc_elementwise.h"
#include "aotc_reduce.h"

#define AOTC_SCAN(TX, y_, x_, outer_, n_, inner_, product, exclusive, reverse)         \
  do {                                                                                  \
    TX *ys__ = (y_);                                                                    \
    const TX *xs__ = (x_);                                                              \
    int64_t o__, i__, jj__;                                                             \
    for (o__ = 0; o__ < (outer_); o__++)                                                \
      for (i__ = 0; i__ < (inner_); i__++) {                                            \
        AOTC_ACC_##TX acc__ = (AOTC_ACC_##TX)((product) ? 1 : 0);                       \
        for (jj__ = 0; jj__ < (n_); jj__++) {                                           \
          const int64_t j__ = (reverse) ? (n_) - 1 - jj__ : jj__;                       \
          const int64_t at__ = (o__ * (n_) + j__) * (inner_) + i__;                     \
          const AOTC_ACC_##TX v__ = (AOTC_ACC_##TX)AOTC_LD_##TX(xs__[at__]);            \
          if (exclusive) ys__[at__] = AOTC_ST_##TX(AOTC_CANON_##TX(acc__));             \
          acc__ = (product) ? acc__ * v__ : acc__ + v__;                                \
          if (!(exclusive)) ys__[at__] = AOTC_ST_##TX(AOTC_CANON_##TX(acc__));          \
        }                                                                               \
      }                                                                                 \
  } while (0)

#endif
