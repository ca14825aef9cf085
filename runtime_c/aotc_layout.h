/* aotc runtime: data movement and fills (Transpose, Slice, Expand, Concat, Gather, Pad,
 * ConstantOfShape, Cast).
 *
 * The movers never interpret elements, only move `width`-byte units (1, 2, 4 or 8
 * bytes), so one kernel serves every element type. The compiler collapses the shape
 * to the fewest dimensions before calling them (aotc/ops/layout.py), so the innermost
 * dimension is as long as possible and is moved with memcpy where it is contiguous.
 *
 * Big moves are cut into pieces of whole rows, the number of pieces a function of
 * the shape only, and spread over the thread pool. */
#ifndef AOTC_LAYOUT_H_
#define AOTC_LAYOUT_H_

#include "aotc_base.h"
#include "aotc_elementwise.h"
#include "aotc_threads.h"
#include "aotc_vtranspose.h"

#define AOTC_LAYOUT_MAX_RANK 16
#define AOTC_LAYOUT_GRAIN 65536 /* elements per parallel piece, at least */
/* ... and per piece of a transpose, which moves fewer elements a microsecond: MobileNetV2's
 * one (24 x 56 x 56 to channels-last, in one piece) took 30 us at two threads, half
 * its input in the other core's cache; in four, 16.5 (the model 0.993x the time). */
#define AOTC_TRANSPOSE_GRAIN 16384

/* ---- rows over a thread pool ---------------------------------------------------- */

typedef void (*aotc_rows_fn_)(const void *args, int64_t first_row, int64_t end_row);

typedef struct {
  aotc_rows_fn_ fn;
  const void *args;
  int64_t rows, rows_per_piece;
} aotc_rows_job_;

AOTC_FN void aotc_rows_piece_(void *job_arg, int64_t piece) {
  const aotc_rows_job_ *job = (const aotc_rows_job_ *)job_arg;
  int64_t first = piece * job->rows_per_piece;
  job->fn(job->args, first, AOTC_MIN(first + job->rows_per_piece, job->rows));
}

/* fn(args, first, end) over [0, rows), rows of total/rows elements each, in pieces of
 * at least `grain` elements. */
AOTC_FN void aotc_for_rows_(aotc_pool *pool, int64_t rows, int64_t total, int64_t grain, aotc_rows_fn_ fn,
                            const void *args) {
  aotc_rows_job_ job;
  int64_t pieces = AOTC_MIN(total / grain, rows);
  if (pieces <= 1) {
    fn(args, 0, rows);
    return;
  }
  job.fn = fn;
  job.args = args;
  job.rows = rows;
  job.rows_per_piece = (rows + pieces - 1) / pieces;
  aotc_parallel_for(pool, (rows + job.rows_per_piece - 1) / job.rows_per_piece, aotc_rows_piece_, &job);
}

/* The index over dims [0, rank - 1) of row `row`, row-major. */
AOTC_FN void aotc_row_index_(int rank, const int64_t *shape, int64_t row, int64_t *idx) {
  int k;
  for (k = rank - 2; k >= 0; k--) {
    idx[k] = row % shape[k];
    row /= shape[k];
  }
}

/* Advance a row index by one. */
AOTC_FN void aotc_row_next_(int rank, const int64_t *shape, int64_t *idx) {
  int k;
  for (k = rank - 2; k >= 0; k--) {
    if (++idx[k] < shape[k]) return;
    idx[k] = 0;
  }
}

/* ---- element moves by width ----------------------------------------------------- */

#define AOTC_STRIDED_RUN_(T, dst, ds, src, ss, n)                   \
  do {                                                              \
    T *d__ = (T *)(dst);                                            \
    const T *s__ = (const T *)(src);                                \
    int64_t j__;                                                    \
    for (j__ = 0; j__ < (n); j__++) d__[j__ * (ds)] = s__[j__ * (ss)]; \
  } while (0)

#define AOTC_FILL_RUN_(T, dst, ds, value, n)                        \
  do {                                                              \
    T *d__ = (T *)(dst);                                            \
    T v__;                                                          \
    int64_t j__;                                                    \
    memcpy(&v__, (value), sizeof(T));                               \
    for (j__ = 0; j__ < (n); j__++) d__[j__ * (ds)] = v__;          \
  } while (0)

/* n units: dst[j * ds] = src[j * ss] (strides in units; ss may be 0 or negative). */
AOTC_FN void aotc_move_run_(unsigned char *dst, int64_t ds, const unsigned char *src, int64_t ss,
                            int64_t n, int width) {
  if (ds == 1 && ss == 1) {
    memcpy(dst, src, (size_t)(n * width));
    return;
  }
  switch (width) {
    case 1: AOTC_STRIDED_RUN_(uint8_t, dst, ds, src, ss, n); break;
    case 2: AOTC_STRIDED_RUN_(uint16_t, dst, ds, src, ss, n); break;
    case 4: AOTC_STRIDED_RUN_(uint32_t, dst, ds, src, ss, n); break;
    default: AOTC_STRIDED_RUN_(uint64_t, dst, ds, src, ss, n); break;
  }
}

/* n units of dst (stride ds) set to the unit at `value`. */
AOTC_FN void aotc_fill_run_(unsigned char *dst, int64_t ds, const void *value, int64_t n, int width) {
  switch (width) {
    case 1: AOTC_FILL_RUN_(uint8_t, dst, ds, value, n); break;
    case 2: AOTC_FILL_RUN_(uint16_t, dst, ds, value, n); break;
    case 4: AOTC_FILL_RUN_(uint32_t, dst, ds, value, n); break;
    default: AOTC_FILL_RUN_(uint64_t, dst, ds, value, n); break;
  }
}

/* ---- strided N-d copy: Transpose, Slice, Expand, Concat ---------------------------- */

typedef struct {
  unsigned char *dst;
  const unsigned char *src;
  int rank, width;
  const int64_t *shape, *dst_strides, *src_strides;
} aotc_copy_args_;

AOTC_FN void aotc_copy_rows_(const void *args, int64_t first, int64_t end) {
  const aotc_copy_args_ *a = (const aotc_copy_args_ *)args;
  const int last = a->rank - 1, w = a->width;
  int64_t idx[AOTC_LAYOUT_MAX_RANK], r;
  aotc_row_index_(a->rank, a->shape, first, idx);
  for (r = first; r < end; r++) {
    int64_t od = 0, os = 0;
    int k;
    for (k = 0; k < last; k++) {
      od += idx[k] * a->dst_strides[k];
      os += idx[k] * a->src_strides[k];
    }
    if (a->src_strides[last] == 0)
      aotc_fill_run_(a->dst + od * w, a->dst_strides[last], a->src + os * w, a->shape[last], w);
    else
      aotc_move_run_(a->dst + od * w, a->dst_strides[last], a->src + os * w, a->src_strides[last],
                     a->shape[last], w);
    aotc_row_next_(a->rank, a->shape, idx);
  }
}

/* ---- transposes: square tiles ------------------------------------------------------ */

/* Where one side runs along the last dimension and the other along dimension `across`
 * (a transpose of the two), moving row by row reads (or writes) a cache line for every
 * element, 1-4 GB/s here (a quarter of onnxruntime's rate on NCHW <-> NHWC). So the
 * plane of the two goes in tiles of AOTC_TRANSPOSE_TILE x AOTC_TRANSPOSE_TILE, whose
 * lines stay in L1 until each is used whole. */
#define AOTC_TRANSPOSE_TILE 16

typedef struct {
  aotc_copy_args_ c;
  int across;          /* the dimension run along by the side not running along the last */
  int64_t bands;       /* bands of AOTC_TRANSPOSE_TILE indices of `across` */
} aotc_transpose_args_;

#define AOTC_TRANSPOSE_TILE_(T, dst, dl, da, src, sl, sa, n_across, n_last)     \
  do {                                                                         \
    T *d__ = (T *)(dst);                                                       \
    const T *s__ = (const T *)(src);                                           \
    int64_t i__, j__;                                                          \
    for (j__ = 0; j__ < (n_last); j__++)                                       \
      for (i__ = 0; i__ < (n_across); i__++)                                   \
        d__[i__ * (da) + j__ * (dl)] = s__[i__ * (sa) + j__ * (sl)];            \
  } while (0)

/* One full tile of 4-byte units where each side runs along one of the two dimensions:
 * its 16 rows (each contiguous on the side read) loaded at src_step, transposed in
 * registers, stored at dst_step. Returns whether it could (else the caller moves the
 * tile unit by unit). */
AOTC_FN int aotc_transpose_tile16_(unsigned char *dst, int64_t dl, int64_t da, const unsigned char *src,
                                   int64_t sl, int64_t sa) {
#if defined(AOTC_HAVE_TRANSPOSE16)
  __m512 r[16];
  int64_t src_step, dst_step;
  int i;
  if (dl == 1 && sa == 1) src_step = sl, dst_step = da;   /* a row: 16 of `across` */
  else if (sl == 1 && da == 1) src_step = sa, dst_step = dl;   /* a row: 16 of the last */
  else return 0;
  for (i = 0; i < 16; i++) r[i] = _mm512_loadu_ps((const float *)(const void *)src + i * src_step);
  aotc_v_transpose16_(r);
  for (i = 0; i < 16; i++) _mm512_storeu_ps((float *)(void *)dst + i * dst_step, r[i]);
  return 1;
#else
  (void)dst, (void)dl, (void)da, (void)src, (void)sl, (void)sa;
  return 0;
#endif
}

/* Rows [first, end): each a band of `across` (every index of the other dimensions but
 * the last, then the band), tile by tile along the last dimension. */
AOTC_FN void aotc_transpose_rows_(const void *args, int64_t first, int64_t end) {
  const aotc_transpose_args_ *t = (const aotc_transpose_args_ *)args;
  const aotc_copy_args_ *a = &t->c;
  const int last = a->rank - 1, w = a->width;
  const int64_t n_last = a->shape[last];
  int64_t r;
  for (r = first; r < end; r++) {
    int64_t rest = r / t->bands, i0 = r % t->bands * AOTC_TRANSPOSE_TILE, od, os, j0;
    const int64_t ni = AOTC_MIN(AOTC_TRANSPOSE_TILE, a->shape[t->across] - i0);
    int k;
    od = i0 * a->dst_strides[t->across];
    os = i0 * a->src_strides[t->across];
    for (k = last - 1; k >= 0; k--) {   /* the other dimensions, row-major */
      if (k == t->across) continue;
      od += rest % a->shape[k] * a->dst_strides[k];
      os += rest % a->shape[k] * a->src_strides[k];
      rest /= a->shape[k];
    }
    for (j0 = 0; j0 < n_last; j0 += AOTC_TRANSPOSE_TILE) {
      const int64_t nj = AOTC_MIN(AOTC_TRANSPOSE_TILE, n_last - j0);
      unsigned char *d = a->dst + (od + j0 * a->dst_strides[last]) * w;
      const unsigned char *s = a->src + (os + j0 * a->src_strides[last]) * w;
      const int64_t dl = a->dst_strides[last], da = a->dst_strides[t->across];
      const int64_t sl = a->src_strides[last], sa = a->src_strides[t->across];
      if (w == 4 && ni == AOTC_TRANSPOSE_TILE && nj == AOTC_TRANSPOSE_TILE &&
          aotc_transpose_tile16_(d, dl, da, s, sl, sa))
        continue;
      switch (w) {
        case 1: AOTC_TRANSPOSE_TILE_(uint8_t, d, dl, da, s, sl, sa, ni, nj); break;
        case 2: AOTC_TRANSPOSE_TILE_(uint16_t, d, dl, da, s, sl, sa, ni, nj); break;
        case 4: AOTC_TRANSPOSE_TILE_(uint32_t, d, dl, da, s, sl, sa, ni, nj); break;
        default: AOTC_TRANSPOSE_TILE_(uint64_t, d, dl, da, s, sl, sa, ni, nj); break;
      }
    }
  }
}

/* The dimension a transpose runs along on the side that does not run along the last
 * one (stride 1 there, not along the last), or -1 where no side does. */
AOTC_FN int aotc_transpose_across_(const aotc_copy_args_ *a) {
  const int last = a->rank - 1;
  const int64_t *other;
  int k;
  if (a->dst_strides[last] == 1 && a->src_strides[last] != 1 && a->src_strides[last] != 0)
    other = a->src_strides;
  else if (a->src_strides[last] == 1 && a->dst_strides[last] != 1)
    other = a->dst_strides;
  else
    return -1;
  for (k = 0; k < last; k++)   /* (a few rows share their lines row by row: 8x64x64x3 to NCHW) */
    if (other[k] == 1 && a->shape[k] >= AOTC_TRANSPOSE_TILE) return k;
  return -1;
}

/* dst[sum_k i_k * dst_strides[k]] = src[sum_k i_k * src_strides[k]] for every index i
 * of `shape` (1 <= rank <= AOTC_LAYOUT_MAX_RANK; strides in elements of `width` bytes;
 * src strides may be 0 (broadcast) or negative). dst and src must not overlap. */
AOTC_FN void aotc_copy_nd(aotc_pool *pool, void *dst, const int64_t *dst_strides, const void *src,
                          const int64_t *src_strides, int rank, const int64_t *shape, int width) {
  aotc_copy_args_ a;
  int64_t rows = 1;
  int k;
  a.dst = (unsigned char *)dst;
  a.src = (const unsigned char *)src;
  a.rank = rank;
  a.width = width;
  a.shape = shape;
  a.dst_strides = dst_strides;
  a.src_strides = src_strides;
  for (k = 0; k < rank - 1; k++) rows *= shape[k];
  if (rank >= 2 && shape[rank - 1] > 1) {
    aotc_transpose_args_ t;
    t.c = a;
    t.across = aotc_transpose_across_(&a);
    if (t.across >= 0) {
      t.bands = (shape[t.across] + AOTC_TRANSPOSE_TILE - 1) / AOTC_TRANSPOSE_TILE;
      aotc_for_rows_(pool, rows / shape[t.across] * t.bands, rows * shape[rank - 1], AOTC_TRANSPOSE_GRAIN,
                     aotc_transpose_rows_, &t);
      return;
    }
  }
  aotc_for_rows_(pool, rows, rows * shape[rank - 1], AOTC_LAYOUT_GRAIN, aotc_copy_rows_, &a);
}

/* ---- fill: ConstantOfShape -------------------------------------------------------- */

/* n elements of `width` bytes set to the element at `value`. */
AOTC_FN void aotc_fill(void *dst, int64_t n, const void *value, int width) {
  aotc_fill_run_((unsigned char *)dst, 1, value, n, width);
}

/* ---- Gather ------------------------------------------------------------------------ */

AOTC_FN int64_t aotc_index_at_(const void *indices, int index_bytes, int64_t j) {
  if (index_bytes == 8) return ((const int64_t *)indices)[j];
  return (int64_t)((const int32_t *)indices)[j];
}

/* y[o, j, :] = x[o, indices[j], :] with x of shape (outer, axis_dim, inner) and
 * indices (int32 or int64, `index_bytes`) in [-axis_dim, axis_dim). Checks every
 * index before writing anything: AOTC_ERR_INDEX when one is out of range. */
AOTC_FN int aotc_gather(void *dst, const void *src, const void *indices, int index_bytes,
                        int64_t n_indices, int64_t outer, int64_t axis_dim, int64_t inner, int width) {
  unsigned char *d = (unsigned char *)dst;
  const unsigned char *s = (const unsigned char *)src;
  const size_t run = (size_t)(inner * width);
  int64_t o, j;
  for (j = 0; j < n_indices; j++) {
    int64_t i = aotc_index_at_(indices, index_bytes, j);
    if (i < -axis_dim || i >= axis_dim) return AOTC_ERR_INDEX;
  }
  for (o = 0; o < outer; o++) {
    for (j = 0; j < n_indices; j++) {
      int64_t i = aotc_index_at_(indices, index_bytes, j);
      if (i < 0) i += axis_dim;
      memcpy(d + (o * n_indices + j) * (int64_t)run, s + (o * axis_dim + i) * (int64_t)run, run);
    }
  }
  return AOTC_OK;
}

/* ---- Pad --------------------------------------------------------------------------- */

#define AOTC_PAD_CONSTANT 0
#define AOTC_PAD_REFLECT 1
#define AOTC_PAD_EDGE 2
#define AOTC_PAD_WRAP 3

/* The source position of output position o along a dim whose kept input is `len`
 * long and padded by `begin` before it; -1 for the constant. */
AOTC_FN int64_t aotc_pad_source_(int64_t o, int64_t begin, int64_t len, int mode) {
  int64_t i = o - begin, period;
  if (i >= 0 && i < len) return i;
  switch (mode) {
    case AOTC_PAD_EDGE: return i < 0 ? 0 : len - 1;
    case AOTC_PAD_REFLECT:
      if (len == 1) return 0;
      period = 2 * (len - 1);
      i %= period;
      if (i < 0) i += period;
      return i < len ? i : period - i;
    case AOTC_PAD_WRAP:
      i %= len;
      return i < 0 ? i + len : i;
    default: return -1;
  }
}

typedef struct {
  unsigned char *dst;
  const unsigned char *src;
  const void *value;
  int rank, width, mode;
  /* per dim: output size, input stride (elements), first kept input position, kept
   * length, padding before the kept part */
  const int64_t *out_shape, *in_strides, *in_start, *in_len, *pad_begin;
} aotc_pad_args_;

AOTC_FN void aotc_pad_rows_(const void *args, int64_t first, int64_t end) {
  const aotc_pad_args_ *a = (const aotc_pad_args_ *)args;
  const int last = a->rank - 1, w = a->width, mode = a->mode;
  const int64_t n = a->out_shape[last], begin = a->pad_begin[last], len = a->in_len[last];
  const int64_t inner_start = a->in_start[last], inner_stride = a->in_strides[last];
  int64_t idx[AOTC_LAYOUT_MAX_RANK], r;
  aotc_row_index_(a->rank, a->out_shape, first, idx);
  for (r = first; r < end; r++) {
    unsigned char *d = a->dst + r * n * w;
    int64_t os = 0, j;
    int k, filled = 0;
    for (k = 0; k < last; k++) {
      int64_t s = aotc_pad_source_(idx[k], a->pad_begin[k], a->in_len[k], mode);
      if (s < 0) {
        filled = 1;
        break;
      }
      os += (a->in_start[k] + s) * a->in_strides[k];
    }
    aotc_row_next_(a->rank, a->out_shape, idx);
    if (filled) {
      aotc_fill_run_(d, 1, a->value, n, w);
      continue;
    }
    os += inner_start * inner_stride;
    for (j = 0; j < n; j++) {
      int64_t s;
      if (j == begin && len > 0) {   /* the kept part: one run */
        aotc_move_run_(d + j * w, 1, a->src + os * w, inner_stride, len, w);
        j += len - 1;
        continue;
      }
      s = aotc_pad_source_(j, begin, len, mode);
      if (s < 0)
        aotc_fill_run_(d + j * w, 1, a->value, 1, w);
      else
        memcpy(d + j * w, a->src + (os + s * inner_stride) * w, (size_t)w);
    }
  }
}

/* Pad: every output element (row-major over out_shape) from its source position per
 * dim, or the element at `value` where a dim's source is outside the kept input. */
AOTC_FN void aotc_pad(aotc_pool *pool, void *dst, const void *src, const void *value, int mode,
                      int rank, const int64_t *out_shape, const int64_t *in_strides,
                      const int64_t *in_start, const int64_t *in_len, const int64_t *pad_begin,
                      int width) {
  aotc_pad_args_ a;
  int64_t rows = 1;
  int k;
  a.dst = (unsigned char *)dst;
  a.src = (const unsigned char *)src;
  a.value = value;
  a.rank = rank;
  a.width = width;
  a.mode = mode;
  a.out_shape = out_shape;
  a.in_strides = in_strides;
  a.in_start = in_start;
  a.in_len = in_len;
  a.pad_begin = pad_begin;
  for (k = 0; k < rank - 1; k++) rows *= out_shape[k];
  aotc_for_rows_(pool, rows, rows * out_shape[rank - 1], AOTC_LAYOUT_GRAIN, aotc_pad_rows_, &a);
}

/* ---- Cast -------------------------------------------------------------------------- */

/* A float X converted to an integer type with range [LO, HI_EXCL): NaN gives 0, values
 * out of range saturate, the rest truncate toward zero (never undefined behaviour). */
#define AOTC_SATURATE(T, X, LO, HI_EXCL, MAX)                        \
  ((X) != (X) ? (T)0                                                 \
   : (double)(X) <= (LO) ? (T)(LO)                                   \
   : (double)(X) >= (HI_EXCL) ? (T)(MAX)                             \
   : (T)(X))

#endif
