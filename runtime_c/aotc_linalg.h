/* aotc runtime: Einsum and Det.
 *
 * Einsum is one strided sum of products over labels: labels [0, nout) are the output
 * dims in order (y is contiguous over them), labels [nout, nall) are summed. Each
 * operand has one element stride per label (the sum of the strides of its dims with that
 * label, which makes repeated labels diagonals; 0 where the label is absent or
 * broadcast). The last summed label is the innermost loop. Every output sees its terms
 * in one fixed order; sums run in the accumulator type of aotc_reduce.h.
 *
 * Det: LU factorization with partial pivoting in double, per matrix of the batch. */
#ifndef AOTC_LINALG_H_
#define AOTC_LINALG_H_

#include "aotc_base.h"
#include "aotc_elementwise.h"
#include "aotc_reduce.h"

#define AOTC_EINSUM_MAX_OPERANDS 16
#define AOTC_EINSUM_MAX_LABELS 64

/* One step of the odometer idx over labels [lo, hi) (the last fastest), moving each
 * operand's offset along; 1 when it wrapped back to all zeros. */
AOTC_FN int aotc_einsum_step_(int64_t *idx, int64_t *off, const int64_t *ext, const int64_t *str,
                              int nops, int nall, int lo, int hi) {
  int l, k;
  for (l = hi - 1; l >= lo; l--) {
    if (++idx[l] < ext[l]) {
      for (k = 0; k < nops; k++) off[k] += str[k * nall + l];
      return 0;
    }
    idx[l] = 0;
    for (k = 0; k < nops; k++) off[k] -= (ext[l] - 1) * str[k * nall + l];
  }
  return 1;
}

/* y[o] = sum over the summed labels of the product of every operand's element. */
#define AOTC_EINSUM(TX, y_, x_, nops_, nout_, nall_, ext_, str_)                        \
  do {                                                                                  \
    TX *ye__ = (y_);                                                                    \
    const TX *const *xe__ = (x_);                                                       \
    const int64_t *ext__ = (ext_), *str__ = (str_);                                     \
    const int nops__ = (nops_), nout__ = (nout_), nall__ = (nall_);                     \
    const int has_sum__ = nall__ > nout__;                                              \
    const int64_t inner__ = has_sum__ ? ext__[nall__ - 1] : 1;                          \
    int64_t idx__[AOTC_EINSUM_MAX_LABELS] = {0}, off__[AOTC_EINSUM_MAX_OPERANDS] = {0};  \
    int64_t step__[AOTC_EINSUM_MAX_OPERANDS] = {0}, total__ = 1, o__, j__;              \
    int k__, l__, empty__ = 0;                                                          \
    for (l__ = 0; l__ < nout__; l__++) total__ *= ext__[l__];                           \
    for (l__ = nout__; l__ < nall__; l__++) empty__ |= ext__[l__] == 0;                 \
    for (k__ = 0; k__ < nops__ && has_sum__; k__++)                                     \
      step__[k__] = str__[k__ * nall__ + nall__ - 1];                                   \
    for (o__ = 0; o__ < total__; o__++) {                                               \
      AOTC_ACC_##TX acc__ = 0;                                                          \
      if (!empty__) do {                                                                \
        for (j__ = 0; j__ < inner__; j__++) {                                           \
          AOTC_ACC_##TX p__ = (AOTC_ACC_##TX)AOTC_LD_##TX(xe__[0][off__[0] + j__ * step__[0]]); \
          for (k__ = 1; k__ < nops__; k__++)                                            \
            p__ *= (AOTC_ACC_##TX)AOTC_LD_##TX(xe__[k__][off__[k__] + j__ * step__[k__]]); \
          acc__ += p__;                                                                 \
        }                                                                               \
      } while (!aotc_einsum_step_(idx__, off__, ext__, str__, nops__, nall__, nout__,   \
                                  nall__ - has_sum__));                                 \
      ye__[o__] = AOTC_ST_##TX(AOTC_CANON_##TX(acc__));                                \
      aotc_einsum_step_(idx__, off__, ext__, str__, nops__, nall__, 0, nout__);         \
    }                                                                                   \
  } while (0)

/* The determinant of the n x n matrix a (row-major doubles, overwritten). */
AOTC_FN double aotc_det_lu_(double *a, int64_t n) {
  double det = 1.0;
  int64_t i, j, r;
  for (i = 0; i < n; i++) {
    int64_t pivot = i;
    for (r = i + 1; r < n; r++)
      if (fabs(a[r * n + i]) > fabs(a[pivot * n + i])) pivot = r;
    if (a[pivot * n + i] == 0) return 0.0;
    if (pivot != i) {
      for (j = 0; j < n; j++) {
        const double t = a[i * n + j];
        a[i * n + j] = a[pivot * n + j];
        a[pivot * n + j] = t;
      }
      det = -det;
    }
    det *= a[i * n + i];
    for (r = i + 1; r < n; r++) {
      const double f = a[r * n + i] / a[i * n + i];
      for (j = i + 1; j < n; j++) a[r * n + j] -= f * a[i * n + j];
    }
  }
  return det;
}

/* y[b] = det(x[b]) for each of `batch` n x n matrices; scratch: n * n doubles. */
#define AOTC_DET(TX, y_, x_, batch_, n_, scratch_)                                     \
  do {                                                                                  \
    double *a__ = (double *)(void *)(scratch_);                                         \
    const TX *xd__ = (x_);                                                              \
    TX *yd__ = (y_);                                                                    \
    int64_t b__, e__, nn__ = (n_) * (n_);                                               \
    for (b__ = 0; b__ < (batch_); b__++) {                                              \
      for (e__ = 0; e__ < nn__; e__++) a__[e__] = (double)AOTC_LD_##TX(xd__[b__ * nn__ + e__]); \
      yd__[b__] = AOTC_ST_##TX(AOTC_CANON_##TX(aotc_det_lu_(a__, (n_))));               \
    }                                                                                   \
  } while (0)

#endif
