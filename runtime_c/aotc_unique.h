/* aotc runtime: operators whose output shape depends on the data (NonZero, Compress,
 * Unique). Included from aotc_index.h.
 *
 * The compiler reserves each output at its upper bound (NonZero rank x numel, Compress
 * and Unique the input's extent); a kernel writes the actual tensor densely at the
 * start of its output buffer and its actual shape into `dims` (one int64 per dim),
 * which the generated code keeps in the workspace for the caller. */
#ifndef AOTC_UNIQUE_H_
#define AOTC_UNIQUE_H_

#include "aotc_index.h"

/* True when an element is not zero: for floats any bit but the sign (so -0.0 is zero
 * and NaN is not), for integers and bool any bit. */
AOTC_FN int aotc_is_nonzero_(const unsigned char *p, int type, int width) {
  int b;
  for (b = 0; b < width; b++) {
    unsigned char byte = p[b];
    if (aotc_type_is_float_(type) && b == width - 1) byte &= 0x7f;   /* little-endian sign */
    if (byte) return 1;
  }
  return 0;
}

/* NonZero: dst is (rank, count) int64, the coordinates of the nonzero elements in
 * row-major order; dims = {rank, count}. A scalar counts as shape [1]. */
AOTC_FN void aotc_nonzero(int64_t *dst, const void *src, int type, int width, int rank,
                          const int64_t *shape, int64_t *dims) {
  const unsigned char *s = (const unsigned char *)src;
  int64_t n = 1, count = 0, j, at = 0;
  int k, r = rank > 0 ? rank : 1;
  for (k = 0; k < rank; k++) n *= shape[k];
  for (j = 0; j < n; j++) count += aotc_is_nonzero_(s + j * width, type, width);
  for (j = 0; j < n; j++) {
    int64_t rest = j;
    if (!aotc_is_nonzero_(s + j * width, type, width)) continue;
    if (rank == 0) dst[at] = 0;
    for (k = rank - 1; k >= 0; k--) {
      dst[k * count + at] = rest % shape[k];
      rest /= shape[k];
    }
    at++;
  }
  dims[0] = r;
  dims[1] = count;
}

/* Compress: x is (outer, dim, inner); y is (outer, kept, inner) with the positions k <
 * dim where cond[k]; dims = shape with dims[axis] = kept. AOTC_ERR_INDEX when a true
 * condition lies past the axis. */
AOTC_FN int aotc_compress(void *dst, const void *src, const bool *cond, int64_t n_cond, int64_t outer,
                          int64_t dim, int64_t inner, int width, int rank, const int64_t *shape, int axis,
                          int64_t *dims) {
  unsigned char *d = (unsigned char *)dst;
  const unsigned char *s = (const unsigned char *)src;
  const size_t run = (size_t)(inner * width);
  int64_t kept = 0, o, k;
  int r;
  for (k = 0; k < n_cond; k++) {
    if (!cond[k]) continue;
    if (k >= dim) return AOTC_ERR_INDEX;
    kept++;
  }
  for (o = 0; o < outer; o++) {
    int64_t at = 0;
    for (k = 0; k < AOTC_MIN(n_cond, dim); k++)
      if (cond[k]) memcpy(d + ((o * kept + at++) * inner) * width, s + ((o * dim + k) * inner) * width, run);
  }
  for (r = 0; r < rank; r++) dims[r] = r == axis ? kept : shape[r];
  return AOTC_OK;
}

/* ---- a stable merge sort of int64 keys by a comparison ------------------------------ */

typedef int (*aotc_compare_fn_)(const void *ctx, int64_t a, int64_t b);

/* Sorts items[0..n) by cmp (stable), with tmp[0..n) as workspace. */
AOTC_FN void aotc_merge_sort_(int64_t *items, int64_t *tmp, int64_t n, aotc_compare_fn_ cmp, const void *ctx) {
  int64_t width, i;
  int64_t *from = items, *to = tmp, *swap;
  for (width = 1; width < n; width *= 2) {
    for (i = 0; i < n; i += 2 * width) {
      int64_t a = i, mid = AOTC_MIN(i + width, n), end = AOTC_MIN(i + 2 * width, n), b = mid, at = i;
      while (a < mid && b < end) to[at++] = cmp(ctx, from[b], from[a]) < 0 ? from[b++] : from[a++];
      while (a < mid) to[at++] = from[a++];
      while (b < end) to[at++] = from[b++];
    }
    swap = from;
    from = to;
    to = swap;
  }
  if (from != items) memcpy(items, from, (size_t)n * sizeof(int64_t));
}

/* ---- Unique ------------------------------------------------------------------------- */

typedef struct {
  const unsigned char *x;
  int64_t outer, dim, inner;
  int type, width;
} aotc_slices_;

/* -1, 0, 1: element a against element b; floats by value with every NaN equal and
 * after all numbers (numpy's order). */
AOTC_FN int aotc_compare_elements_(const unsigned char *a, const unsigned char *b, int type) {
  if (aotc_type_is_float_(type)) {
    double x = aotc_load_float_(a, type), y = aotc_load_float_(b, type);
    if (x != x || y != y) return (x != x) - (y != y);
    return (x > y) - (x < y);
  } else {
    int64_t x = aotc_load_int_(a, type), y = aotc_load_int_(b, type);
    return aotc_int_less_(y, x, type) - aotc_int_less_(x, y, type);
  }
}

/* Slices k of x (outer, dim, inner): all (o, k, i), compared in (o, i) order. */
AOTC_FN int aotc_compare_slices_(const void *ctx, int64_t a, int64_t b) {
  const aotc_slices_ *s = (const aotc_slices_ *)ctx;
  int64_t o, i;
  for (o = 0; o < s->outer; o++)
    for (i = 0; i < s->inner; i++) {
      int64_t base = o * s->dim * s->inner + i;
      int c = aotc_compare_elements_(s->x + (base + a * s->inner) * s->width,
                                     s->x + (base + b * s->inner) * s->width, s->type);
      if (c) return c;
    }
  return 0;
}

typedef struct {
  const int64_t *perm, *group_start;
} aotc_groups_;

/* Groups by their first occurrence in the input. */
AOTC_FN int aotc_compare_groups_(const void *ctx, int64_t a, int64_t b) {
  const aotc_groups_ *g = (const aotc_groups_ *)ctx;
  int64_t x = g->perm[g->group_start[a]], y = g->perm[g->group_start[b]];
  return (x > y) - (x < y);
}

/* Unique over slices of x (outer, dim, inner) along the middle axis. Outputs (any may
 * be NULL): y (outer, count, inner), first (count), inverse (dim), counts (count);
 * sorted by value or in order of first occurrence. Returns count. scratch: 4 * dim + 1
 * int64. */
AOTC_FN int64_t aotc_unique(void *y, int64_t *first, int64_t *inverse, int64_t *counts, const void *x,
                            int64_t outer, int64_t dim, int64_t inner, int type, int width, int sorted,
                            int64_t *scratch) {
  int64_t *perm = scratch, *tmp = scratch + dim, *group_start = scratch + 2 * dim;
  int64_t *order = scratch + 3 * dim + 1;
  int64_t groups = 0, j, m, o;
  aotc_slices_ slices;
  aotc_groups_ by_first;
  slices.x = (const unsigned char *)x;
  slices.outer = outer;
  slices.dim = dim;
  slices.inner = inner;
  slices.type = type;
  slices.width = width;
  for (j = 0; j < dim; j++) perm[j] = j;
  aotc_merge_sort_(perm, tmp, dim, aotc_compare_slices_, &slices);
  for (j = 0; j < dim; j++)
    if (j == 0 || aotc_compare_slices_(&slices, perm[j - 1], perm[j]) != 0) group_start[groups++] = j;
  group_start[groups] = dim;
  for (j = 0; j < groups; j++) order[j] = j;
  if (!sorted) {
    by_first.perm = perm;
    by_first.group_start = group_start;
    aotc_merge_sort_(order, tmp, groups, aotc_compare_groups_, &by_first);
  }
  for (j = 0; j < groups; j++) {
    int64_t g = order[j], at = perm[group_start[g]];
    if (first) first[j] = at;
    if (counts) counts[j] = group_start[g + 1] - group_start[g];
    if (inverse)
      for (m = group_start[g]; m < group_start[g + 1]; m++) inverse[perm[m]] = j;
    if (y)
      for (o = 0; o < outer; o++)
        memcpy((unsigned char *)y + ((o * groups + j) * inner) * width,
               (const unsigned char *)x + ((o * dim + at) * inner) * width, (size_t)(inner * width));
  }
  return groups;
}

#endif
