/* aotc runtime: rearranging and pattern kernels (ReverseSequence, Trilu, EyeLike,
 * OneHot, Col2Im). Split, Tile, DepthToSpace, SpaceToDepth and CenterCropPad are
 * strided copies (aotc_copy_nd in aotc_layout.h). Included from aotc_index.h. */
#ifndef AOTC_REARRANGE_H_
#define AOTC_REARRANGE_H_

#include "aotc_index.h"

/* x is (time, batch) in either order (strides in elements) with `inner` contiguous
 * elements per (time, batch) pair; the first lens[b] steps of batch b are reversed,
 * the rest copied. AOTC_ERR_INDEX when a length is outside [0, seq]. */
AOTC_FN int aotc_reverse_sequence(void *dst, const void *src, const int64_t *lens, int64_t seq,
                                  int64_t batch, int64_t time_stride, int64_t batch_stride, int64_t inner,
                                  int width) {
  unsigned char *d = (unsigned char *)dst;
  const unsigned char *s = (const unsigned char *)src;
  const size_t run = (size_t)(inner * width);
  int64_t b, t;
  for (b = 0; b < batch; b++)
    if (lens[b] < 0 || lens[b] > seq) return AOTC_ERR_INDEX;
  for (b = 0; b < batch; b++)
    for (t = 0; t < seq; t++) {
      int64_t from = t < lens[b] ? lens[b] - 1 - t : t;
      memcpy(d + (b * batch_stride + t * time_stride) * width,
             s + (b * batch_stride + from * time_stride) * width, run);
    }
  return AOTC_OK;
}

/* `mats` matrices of rows x cols: element (i, j) kept where j - i >= k (upper) or
 * j - i <= k (lower), else zero (all-bits-zero is 0 for every element type). */
AOTC_FN void aotc_trilu(void *dst, const void *src, int64_t mats, int64_t rows, int64_t cols, int64_t k,
                        int upper, int width) {
  unsigned char *d = (unsigned char *)dst;
  const unsigned char *s = (const unsigned char *)src;
  int64_t m, i;
  for (m = 0; m < mats * rows; m++) {
    int64_t lo, hi;   /* kept columns [lo, hi) of this row */
    i = m % rows;
    if (upper) {
      lo = AOTC_MIN(AOTC_MAX(i + k, 0), cols);
      hi = cols;
    } else {
      lo = 0;
      hi = AOTC_MIN(AOTC_MAX(i + k + 1, 0), cols);
    }
    if (hi < lo) hi = lo;
    memset(d + m * cols * width, 0, (size_t)(lo * width));
    memcpy(d + (m * cols + lo) * width, s + (m * cols + lo) * width, (size_t)((hi - lo) * width));
    memset(d + (m * cols + hi) * width, 0, (size_t)((cols - hi) * width));
  }
}

/* rows x cols zeros with the element at `one` on diagonal k. */
AOTC_FN void aotc_eye_like(void *dst, int64_t rows, int64_t cols, int64_t k, const void *one, int width) {
  unsigned char *d = (unsigned char *)dst;
  int64_t i;
  memset(d, 0, (size_t)(rows * cols * width));
  for (i = 0; i < rows; i++)
    if (i + k >= 0 && i + k < cols) memcpy(d + (i * cols + i + k) * width, one, (size_t)width);
}

/* An index element of any numeric type, as double (OneHot compares it exactly). */
AOTC_FN double aotc_load_number_(const void *p, int type) {
  if (aotc_type_is_float_(type)) return aotc_load_float_(p, type);
  if (type == AOTC_T_U64) {
    uint64_t v;
    memcpy(&v, p, 8);
    return (double)v;
  }
  return (double)aotc_load_int_(p, type);
}

/* y[o, d, i] = values[1] where index[o, i] (wrapped once when negative) == d, else
 * values[0]; an index outside [-depth, depth) matches nothing. */
AOTC_FN void aotc_one_hot(void *dst, const void *indices, int index_type, int index_width, int64_t outer,
                          int64_t depth, int64_t inner, const void *values, int width) {
  unsigned char *d = (unsigned char *)dst;
  const unsigned char *v = (const unsigned char *)values;
  const unsigned char *ix = (const unsigned char *)indices;
  int64_t o, i, c;
  for (o = 0; o < outer; o++) {
    for (c = 0; c < depth * inner; c++) memcpy(d + (o * depth * inner + c) * width, v, (size_t)width);
    for (i = 0; i < inner; i++) {
      double at = aotc_load_number_(ix + (o * inner + i) * index_width, index_type);
      if (at < 0) at += (double)depth;
      if (!(at >= 0 && at < (double)depth)) continue;
      c = (int64_t)at;
      if ((double)c == at) memcpy(d + ((o * depth + c) * inner + i) * width, v + width, (size_t)width);
    }
  }
}

/* Col2Im over `rank` spatial dims: x is (n*c, prod(kernel), prod(blocks)), y is
 * (n*c, prod(image)); each column element is added to its image position (summed in
 * the element type, in column order). Kernel offsets and block positions are walked
 * row-major. */
#define AOTC_COL2IM_(T)                                                                          \
  AOTC_FN void aotc_col2im_##T(T *y, const T *x, int64_t planes, int rank, const int64_t *image,  \
                               const int64_t *kernel, const int64_t *blocks, const int64_t *strides, \
                               const int64_t *pads, const int64_t *dilations) {                  \
    int64_t image_size = 1, kernel_size = 1, block_count = 1, p, kk, bb;                         \
    int d;                                                                                       \
    for (d = 0; d < rank; d++) {                                                                 \
      image_size *= image[d];                                                                    \
      kernel_size *= kernel[d];                                                                  \
      block_count *= blocks[d];                                                                  \
    }                                                                                            \
    memset(y, 0, (size_t)(planes * image_size) * sizeof(T));                                     \
    for (p = 0; p < planes; p++)                                                                 \
      for (kk = 0; kk < kernel_size; kk++)                                                       \
        for (bb = 0; bb < block_count; bb++) {                                                   \
          int64_t krem = kk, brem = bb, at = 0, scale = 1;                                       \
          int inside = 1;                                                                        \
          for (d = rank - 1; d >= 0; d--) {                                                      \
            int64_t kd = krem % kernel[d], bd = brem % blocks[d];                                \
            int64_t pos = bd * strides[d] - pads[d] + kd * dilations[d];                         \
            krem /= kernel[d];                                                                   \
            brem /= blocks[d];                                                                   \
            if (pos < 0 || pos >= image[d]) inside = 0;                                          \
            at += pos * scale;                                                                   \
            scale *= image[d];                                                                   \
          }                                                                                      \
          if (inside) y[p * image_size + at] += x[(p * kernel_size + kk) * block_count + bb];    \
        }                                                                                        \
  }
AOTC_COL2IM_(float)
AOTC_COL2IM_(double)

#endif
