/* aotc runtime: index and scatter kernels (GatherElements, GatherND, ScatterElements,
 * ScatterND, TensorScatter), and the element helpers they share with
 * aotc_rearrange.h and aotc_unique.h (included at the end).
 *
 * Every kernel checks all of its indices before it writes anything and returns
 * AOTC_ERR_INDEX when one is out of range, so a bad index never reads or writes out of
 * bounds. Elements are moved as `width`-byte units; scatter reductions load them by
 * their element type (AOTC_T_* codes, from aotc/ops/index.py), combine in a wide type
 * (double for floats, 64-bit wrapping for integers) and round once on store. */
#ifndef AOTC_INDEX_H_
#define AOTC_INDEX_H_

#include "aotc_base.h"
#include "aotc_half.h"
#include "aotc_layout.h"

#define AOTC_INDEX_MAX_RANK 16

/* element type codes */
#define AOTC_T_F32 1
#define AOTC_T_F64 2
#define AOTC_T_F16 3
#define AOTC_T_BF16 4
#define AOTC_T_I8 5
#define AOTC_T_I16 6
#define AOTC_T_I32 7
#define AOTC_T_I64 8
#define AOTC_T_U8 9
#define AOTC_T_U16 10
#define AOTC_T_U32 11
#define AOTC_T_U64 12
#define AOTC_T_BOOL 13

/* scatter reductions */
#define AOTC_REDUCE_NONE 0
#define AOTC_REDUCE_ADD 1
#define AOTC_REDUCE_MUL 2
#define AOTC_REDUCE_MAX 3
#define AOTC_REDUCE_MIN 4

AOTC_FN int aotc_type_is_float_(int type) { return type >= AOTC_T_F32 && type <= AOTC_T_BF16; }

AOTC_FN int aotc_type_is_signed_(int type) { return type >= AOTC_T_I8 && type <= AOTC_T_I64; }

/* A float element as double (exact for every float type). */
AOTC_FN double aotc_load_float_(const void *p, int type) {
  switch (type) {
    case AOTC_T_F32: { float v; memcpy(&v, p, sizeof v); return (double)v; }
    case AOTC_T_F64: { double v; memcpy(&v, p, sizeof v); return v; }
    case AOTC_T_F16: { uint16_t v; memcpy(&v, p, sizeof v); return (double)aotc_f16_to_f32(v); }
    default: { uint16_t v; memcpy(&v, p, sizeof v); return (double)aotc_bf16_to_f32(v); }
  }
}

/* Store a double rounded to the float type. 16-bit types go through float: for one sum
 * or product of two 16-bit values that still gives the correctly rounded result, as
 * float has more than twice their precision. */
AOTC_FN void aotc_store_float_(void *p, int type, double value) {
  switch (type) {
    case AOTC_T_F32: { float v = (float)value; memcpy(p, &v, sizeof v); break; }
    case AOTC_T_F64: memcpy(p, &value, sizeof value); break;
    case AOTC_T_F16: { uint16_t v = aotc_f32_to_f16((float)value); memcpy(p, &v, sizeof v); break; }
    default: { uint16_t v = aotc_f32_to_bf16((float)value); memcpy(p, &v, sizeof v); break; }
  }
}

/* An integer (or bool) element as int64 bits: sign-extended for signed types. */
AOTC_FN int64_t aotc_load_int_(const void *p, int type) {
  switch (type) {
    case AOTC_T_I8: { int8_t v; memcpy(&v, p, 1); return v; }
    case AOTC_T_I16: { int16_t v; memcpy(&v, p, 2); return v; }
    case AOTC_T_I32: { int32_t v; memcpy(&v, p, 4); return v; }
    case AOTC_T_I64: { int64_t v; memcpy(&v, p, 8); return v; }
    case AOTC_T_U16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case AOTC_T_U32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case AOTC_T_U64: { int64_t v; memcpy(&v, p, 8); return v; }  /* the bits; see aotc_int_less_ */
    case AOTC_T_BOOL: { uint8_t v; memcpy(&v, p, 1); return v != 0; }
    default: { uint8_t v; memcpy(&v, p, 1); return v; }
  }
}

/* The low bytes of an integer stored into an element of `width` bytes. */
AOTC_FN void aotc_store_int_(void *p, int type, uint64_t bits, int width) {
  if (type == AOTC_T_BOOL) {
    uint8_t b = bits != 0;
    memcpy(p, &b, 1);
    return;
  }
  switch (width) {
    case 1: { uint8_t v = (uint8_t)bits; memcpy(p, &v, 1); break; }
    case 2: { uint16_t v = (uint16_t)bits; memcpy(p, &v, 2); break; }
    case 4: { uint32_t v = (uint32_t)bits; memcpy(p, &v, 4); break; }
    default: memcpy(p, &bits, 8); break;
  }
}

/* Unsigned 64-bit elements compare as unsigned: their int64 bits, with the sign flipped. */
AOTC_FN int aotc_int_less_(int64_t a, int64_t b, int type) {
  if (type == AOTC_T_U64) return ((uint64_t)a ^ 0x8000000000000000u) < ((uint64_t)b ^ 0x8000000000000000u);
  return a < b;
}

/* *dst = reduction(*dst, *src) for one element of `type`, `width` bytes. */
AOTC_FN void aotc_combine_(unsigned char *dst, const unsigned char *src, int type, int width,
                           int reduction) {
  if (reduction == AOTC_REDUCE_NONE) {
    memcpy(dst, src, (size_t)width);
    return;
  }
  if (aotc_type_is_float_(type)) {
    double a = aotc_load_float_(dst, type), b = aotc_load_float_(src, type), r;
    switch (reduction) {
      case AOTC_REDUCE_ADD: r = a + b; break;
      case AOTC_REDUCE_MUL: r = a * b; break;
      case AOTC_REDUCE_MAX: r = (a > b || a != a) ? a : b; break;
      default: r = (a < b || a != a) ? a : b; break;
    }
    aotc_store_float_(dst, type, r);
  } else {
    int64_t a = aotc_load_int_(dst, type), b = aotc_load_int_(src, type);
    uint64_t r;
    if (type == AOTC_T_BOOL) {
      r = (reduction == AOTC_REDUCE_ADD || reduction == AOTC_REDUCE_MAX) ? (uint64_t)(a | b) : (uint64_t)(a & b);
    } else {
      switch (reduction) {
        case AOTC_REDUCE_ADD: r = (uint64_t)a + (uint64_t)b; break;
        case AOTC_REDUCE_MUL: r = (uint64_t)a * (uint64_t)b; break;
        case AOTC_REDUCE_MAX: r = (uint64_t)(aotc_int_less_(a, b, type) ? b : a); break;
        default: r = (uint64_t)(aotc_int_less_(b, a, type) ? b : a); break;
      }
    }
    aotc_store_int_(dst, type, r, width);
  }
}

/* AOTC_OK when every one of n int32/int64 indices is in [-dim, dim). */
AOTC_FN int aotc_check_indices_(const void *indices, int index_bytes, int64_t n, int64_t dim) {
  int64_t j;
  for (j = 0; j < n; j++) {
    int64_t i = aotc_index_at_(indices, index_bytes, j);
    if (i < -dim || i >= dim) return AOTC_ERR_INDEX;
  }
  return AOTC_OK;
}

/* ---- GatherElements / ScatterElements ---------------------------------------------- */

/* Walks every position p of `shape` (the indices' shape) row-major; the element p of
 * `big` (data for Gather, the output for Scatter) is at sum_{d != axis} p[d] *
 * big_strides[d] + index(p) * big_strides[axis]. gather: dst[p] = big[...];
 * scatter: big[...] = reduction(big[...], small[p]). */
AOTC_FN int aotc_elements_(unsigned char *big, unsigned char *small_dst, const unsigned char *small_src,
                           const void *indices, int index_bytes, int rank, const int64_t *shape,
                           const int64_t *big_strides, int axis, int64_t axis_dim, int type,
                           int width, int reduction, int scatter) {
  int64_t pos[AOTC_INDEX_MAX_RANK], n = 1, j;
  int k;
  for (k = 0; k < rank; k++) {
    n *= shape[k];
    pos[k] = 0;
  }
  if (aotc_check_indices_(indices, index_bytes, n, axis_dim) != AOTC_OK) return AOTC_ERR_INDEX;
  for (j = 0; j < n; j++) {
    int64_t i = aotc_index_at_(indices, index_bytes, j), off = 0;
    if (i < 0) i += axis_dim;
    for (k = 0; k < rank; k++) off += (k == axis ? i : pos[k]) * big_strides[k];
    if (scatter)
      aotc_combine_(big + off * width, small_src + j * width, type, width, reduction);
    else
      memcpy(small_dst + j * width, big + off * width, (size_t)width);
    for (k = rank - 1; k >= 0; k--) {
      if (++pos[k] < shape[k]) break;
      pos[k] = 0;
    }
  }
  return AOTC_OK;
}

AOTC_FN int aotc_gather_elements(void *dst, const void *data, const void *indices, int index_bytes,
                                 int rank, const int64_t *indices_shape, const int64_t *data_strides,
                                 int axis, int64_t axis_dim, int width) {
  return aotc_elements_((unsigned char *)(uintptr_t)data, (unsigned char *)dst, NULL, indices, index_bytes,
                        rank, indices_shape, data_strides, axis, axis_dim, 0, width, AOTC_REDUCE_NONE, 0);
}

/* out already holds the data; the updates (of the indices' shape) go into it. */
AOTC_FN int aotc_scatter_elements(void *out, const void *updates, const void *indices, int index_bytes,
                                  int rank, const int64_t *indices_shape, const int64_t *out_strides,
                                  int axis, int64_t axis_dim, int type, int width, int reduction) {
  return aotc_elements_((unsigned char *)out, NULL, (const unsigned char *)updates, indices, index_bytes,
                        rank, indices_shape, out_strides, axis, axis_dim, type, width, reduction, 1);
}

/* ---- GatherND / ScatterND ------------------------------------------------------------ */

/* The element offset of an index tuple (k int64 values, each possibly negative) into
 * dims `dims` with element strides `strides`; -1 when one is out of range. */
AOTC_FN int64_t aotc_tuple_offset_(const int64_t *tuple, int k, const int64_t *dims, const int64_t *strides) {
  int64_t off = 0;
  int d;
  for (d = 0; d < k; d++) {
    int64_t i = tuple[d];
    if (i < -dims[d] || i >= dims[d]) return -1;
    off += (i < 0 ? i + dims[d] : i) * strides[d];
  }
  return off;
}

/* Data is (batch, dims[0..k), inner...) with batch_stride elements per batch; indices
 * (batch, tuples, k). dst[b, t, :inner] = data[b, tuple(b, t), :inner]. */
AOTC_FN int aotc_gather_nd(void *dst, const void *data, const int64_t *indices, int64_t batch,
                           int64_t tuples, int k, const int64_t *dims, const int64_t *strides,
                           int64_t batch_stride, int64_t inner, int width) {
  unsigned char *d = (unsigned char *)dst;
  const unsigned char *s = (const unsigned char *)data;
  int64_t t;
  for (t = 0; t < batch * tuples; t++)
    if (aotc_tuple_offset_(indices + t * k, k, dims, strides) < 0) return AOTC_ERR_INDEX;
  for (t = 0; t < batch * tuples; t++) {
    int64_t off = (t / tuples) * batch_stride + aotc_tuple_offset_(indices + t * k, k, dims, strides);
    memcpy(d + t * inner * width, s + off * width, (size_t)(inner * width));
  }
  return AOTC_OK;
}

/* out already holds the data; out[tuple(t), :inner] = reduction(.., updates[t, :inner]). */
AOTC_FN int aotc_scatter_nd(void *out, const void *updates, const int64_t *indices, int64_t tuples, int k,
                            const int64_t *dims, const int64_t *strides, int64_t inner, int type,
                            int width, int reduction) {
  unsigned char *o = (unsigned char *)out;
  const unsigned char *u = (const unsigned char *)updates;
  int64_t t, e;
  for (t = 0; t < tuples; t++)
    if (aotc_tuple_offset_(indices + t * k, k, dims, strides) < 0) return AOTC_ERR_INDEX;
  for (t = 0; t < tuples; t++) {
    int64_t off = aotc_tuple_offset_(indices + t * k, k, dims, strides);
    if (reduction == AOTC_REDUCE_NONE) {
      memcpy(o + off * width, u + t * inner * width, (size_t)(inner * width));
      continue;
    }
    for (e = 0; e < inner; e++)
      aotc_combine_(o + (off + e) * width, u + (t * inner + e) * width, type, width, reduction);
  }
  return AOTC_OK;
}

/* ---- TensorScatter ------------------------------------------------------------------ */

/* out (already holding the past cache) is (batch, prefix, max_seq, inner), update is
 * (batch, prefix, seq, inner). Sequence position s of batch b goes to write[b] + s
 * (modulo max_seq when circular); write_indices NULL means 0. */
AOTC_FN int aotc_tensor_scatter(void *out, const void *update, const int64_t *write_indices, int64_t batch,
                                int64_t prefix, int64_t max_seq, int64_t seq, int64_t inner, int circular,
                                int width) {
  unsigned char *o = (unsigned char *)out;
  const unsigned char *u = (const unsigned char *)update;
  const size_t run = (size_t)(inner * width);
  int64_t b, p, s;
  for (b = 0; b < batch; b++) {
    int64_t w = write_indices ? write_indices[b] : 0;
    if (circular ? (w < 0 || max_seq == 0) : (w < 0 || w > max_seq - seq)) return AOTC_ERR_INDEX;
  }
  for (b = 0; b < batch; b++) {
    int64_t w = write_indices ? write_indices[b] : 0;
    for (p = 0; p < prefix; p++) {
      int64_t row = b * prefix + p;
      for (s = 0; s < seq; s++) {
        int64_t at = circular ? (w % max_seq + s) % max_seq : w + s;
        memcpy(o + ((row * max_seq + at) * inner) * width, u + ((row * seq + s) * inner) * width, run);
      }
    }
  }
  return AOTC_OK;
}

#include "aotc_rearrange.h"
#include "aotc_unique.h"

#endif
