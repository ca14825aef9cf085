/* aotc runtime: 3x3 stride-1 convolution by Winograd's F(m x m, 3x3), m = 2 or 4,
 * fp32, fast mode.
 *
 * Each m x m block of output pixels (a tile) comes from an (m + 2) x (m + 2) patch of
 * the input, d, and each 3x3 kernel g, as Y = A^T [(G g G^T) .* (B^T d B)] A: 16
 * products per 2x2 tile and channel pair where the direct sum takes 36, or 36 per 4x4
 * tile where it takes 144. The (m + 2)^2 elementwise products (the terms), summed over
 * input channels, are as many matrix products U[e] (Cout x Cin, the weights
 * transformed at compile time: aotc/ops/conv.py) times V[e] (Cin x tiles, the input
 * transformed here, straight into the GEMM's packed-B layout); the output transform
 * then adds the bias, the residual and the activation. An image's tiles (row by row)
 * go in blocks of `block` (whole strips of the GEMM), each transformed, multiplied and
 * transformed back by one thread, in one of `lanes` runs of consecutive blocks, each
 * lane with its own scratch: the whole conv is one dispatch (a dispatch per transform
 * and product cost ResNet-50 7% at two threads). A conv of one block (one image, its
 * tiles in one block: the weights are read once) goes in three dispatches instead, so
 * that threads share it: the input transform by channels, the products in `lanes`
 * runs of terms, each with its own GEMM scratch, the output transform by channels.
 * A tile's sums depend neither on its block nor on its lane, so neither do the results. The sums are not the direct
 * kernels' (their rounding differs by a few ulps of the largest term), so exact mode
 * never comes here. Tiles past the output's last row or column are computed and
 * dropped; input outside X is 0. ResNet-50's 3x3 convs ran at the FMA peak in
 * onnxruntime's direct kernel and within 8% of it in aotc's: only fewer multiplies
 * beat that.
 *
 * F(4x4, 3x3) rounds more: within 1e-5 of the direct sum over 256 channels of random
 * data, where F(2x2, 3x3) stays within 2e-6.
 *
 * F(2x2, 3x3):  B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]   A^T = [1 1 1 0; 0 1 -1 -1]
 * F(4x4, 3x3):  B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0;
 *                      0 2 -1 -2 1 0; 0 4 0 -5 0 1]
 *               A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1] */
#ifndef AOTC_CONV_WINOGRAD_H_
#define AOTC_CONV_WINOGRAD_H_

#include "aotc_base.h"
#include "aotc_threads.h"
#include "aotc_activation.h"
#include "aotc_gemm.h"
#include "aotc_conv.h"

/* `m`: the tile's side, 2 or 4; `u`: the transformed weights [(m + 2)^2][Cout][Cin];
 * `block`: tiles per block, a multiple of AOTC_SGEMM_NR; `residual`: NULL, or a tensor
 * shaped as y (it may be y itself) added before `act`. The conv: one group, 2-D, 3x3,
 * stride 1, no dilation. Scratch: aotc_conv_winograd_scratch_bytes(g, m, block, lanes). */
AOTC_ENGINE_FN void aotc_conv_winograd(aotc_pool *pool, const aotc_conv_geom *g, int64_t m, int64_t block,
                                       int64_t lanes, const float *x, const float *u, const float *bias,
                                       const float *residual, float *y, const aotc_activation *act,
                                       unsigned char *scratch);

#ifndef AOTC_ENGINE_EXTERN

/* The terms of F(m x m, 3x3): one per element of the (m + 2) x (m + 2) patch. */
AOTC_FN int64_t aotc_conv_winograd_terms_(int64_t m) { return (m + 2) * (m + 2); }

/* Floats from one term's operand (V or M: channels x block) to the next: a cache line
 * more than the operand, so that the terms of a tile, written or read together by
 * the transforms, do not lie a multiple of 4 KiB apart and share an L1 set (64 -> 64
 * at 56x56: the transforms took 0.65-0.75x the time). */
AOTC_FN int64_t aotc_conv_winograd_plane_(int64_t channels, int64_t block) {
  return channels * block + 64 / (int64_t)sizeof(float);
}

/* Bytes of `terms` channels x block operands (V or M) in a lane's scratch, 64-byte
 * aligned. */
AOTC_FN size_t aotc_conv_winograd_part_bytes_(int64_t terms, int64_t channels, int64_t block) {
  return aotc_conv_round64_((size_t)(terms * aotc_conv_winograd_plane_(channels, block)) * sizeof(float));
}

/* A lane's scratch: V (the terms' packed Cin x block operands), M (their Cout x block
 * ones), each term aotc_conv_winograd_plane_ floats after the last, then the products'
 * own scratch. */
AOTC_FN size_t aotc_conv_winograd_lane_bytes(int64_t terms, int64_t cin, int64_t cout, int64_t block) {
  return aotc_conv_winograd_part_bytes_(terms, cin, block) + aotc_conv_winograd_part_bytes_(terms, cout, block) +
         aotc_sgemm_packed_scratch_bytes(cout, block, cin);
}

/* Whether the conv is one block: one image, all its m x m tiles in `block`. */
AOTC_FN int aotc_conv_winograd_one_block_(const aotc_conv_geom *g, int64_t m, int64_t block) {
  return g->batch == 1 && ((g->out[1] + m - 1) / m) * ((g->out[2] + m - 1) / m) <= block;
}

/* The conv's scratch: a lane's for each lane, or for a conv of one block its V and M
 * once and the products' scratch for each lane. */
AOTC_FN size_t aotc_conv_winograd_scratch_bytes(const aotc_conv_geom *g, int64_t m, int64_t block, int64_t lanes) {
  const int64_t cin = g->cin_g, cout = g->cout_g, terms = aotc_conv_winograd_terms_(m);
  if (aotc_conv_winograd_one_block_(g, m, block))
    return aotc_conv_winograd_part_bytes_(terms, cin, block) + aotc_conv_winograd_part_bytes_(terms, cout, block) +
           (size_t)lanes * aotc_sgemm_packed_scratch_bytes(cout, block, cin);
  return (size_t)lanes * aotc_conv_winograd_lane_bytes(terms, cin, cout, block);
}

typedef struct {
  const aotc_conv_geom *g;
  const float *x, *u, *bias, *residual;
  float *y;
  const aotc_activation *act;
  unsigned char *scratch;
  int64_t m, terms;   /* the tile's side; the terms, (m + 2)^2 */
  int64_t block, lanes, rows, cols, blocks_per_image, blocks;
  int far;   /* a conv of one block: aotc_pool_far, the tasks take V's and M's lines first */
} aotc_conv_winograd_args_;

/* A run of tiles along one tile row: row ty, columns [tx0, tx1), at column `at` of
 * the block. */
typedef struct {
  int64_t ty, tx0, tx1, at;
} aotc_conv_winograd_run_;

/* The tiles of a strip, from tile t0 of the image's rows x cols grid (column `at` of
 * the block), as runs: at most AOTC_SGEMM_NR tiles in all, none past the grid.
 * Returns the count. */
AOTC_FN int aotc_conv_winograd_runs_(int64_t rows, int64_t cols, int64_t t0, int64_t at,
                                     aotc_conv_winograd_run_ *runs) {
  const int64_t end = AOTC_MIN(t0 + AOTC_SGEMM_NR, rows * cols);
  int64_t t = t0;
  int n = 0;
  while (t < end) {
    aotc_conv_winograd_run_ *r = &runs[n++];
    r->ty = t / cols;
    r->tx0 = t % cols;
    r->tx1 = AOTC_MIN(cols, r->tx0 + end - t);
    r->at = at + t - t0;
    t += r->tx1 - r->tx0;
  }
  return n;
}

#if defined(AOTC_SGEMM_PATH_AVX512)
/* n <= 16 tiles of tile row ty from tile column tx on, one to a lane, of plane xc:
 * each patch row's four columns from two pairs of masked loads (columns outside X
 * and rows outside are 0) split into even and odd columns, then B^T d B in
 * registers, element e into v + e * plane. */
AOTC_INLINE_ALWAYS void aotc_conv_winograd_input16_(const aotc_conv_geom *g, const float *xc, int64_t ty,
                                                    int64_t tx, int64_t n, float *v, int64_t plane) {
  const int64_t in_h = g->in[1], in_w = g->in[2], c0 = 2 * tx - g->pad[2];
  const __m512i evens = aotc_conv_even_lanes_(), odds = _mm512_add_epi32(evens, _mm512_set1_epi32(1));
  const __mmask16 out = aotc_v_mask_(n);
  __m512 d[4][4], t[4][4];
  int i, j;
  for (i = 0; i < 4; i++) {   /* d[i][j]: patch element (i, j) of each lane's tile */
    const int64_t iy = 2 * ty - g->pad[1] + i;
    if (iy < 0 || iy >= in_h) {
      for (j = 0; j < 4; j++) d[i][j] = _mm512_setzero_ps();
      continue;
    }
    for (j = 0; j < 2; j++) {   /* windows at columns c0 + 2 j and 16 past it */
      const int64_t c = c0 + 2 * j;
      const float *row = xc + iy * in_w + c;
      const __m512 lo = _mm512_maskz_loadu_ps(aotc_conv_lane_mask_(-c, in_w - c), row);
      const __m512 hi = _mm512_maskz_loadu_ps(aotc_conv_lane_mask_(-c - 16, in_w - c - 16), row + 16);
      d[i][2 * j] = _mm512_permutex2var_ps(lo, evens, hi);
      d[i][2 * j + 1] = _mm512_permutex2var_ps(lo, odds, hi);
    }
  }
  for (j = 0; j < 4; j++) {   /* B^T d */
    t[0][j] = _mm512_sub_ps(d[0][j], d[2][j]);
    t[1][j] = _mm512_add_ps(d[1][j], d[2][j]);
    t[2][j] = _mm512_sub_ps(d[2][j], d[1][j]);
    t[3][j] = _mm512_sub_ps(d[1][j], d[3][j]);
  }
  for (i = 0; i < 4; i++) {   /* (B^T d) B */
    float *vi = v + 4 * i * plane;
    _mm512_mask_storeu_ps(vi, out, _mm512_sub_ps(t[i][0], t[i][2]));
    _mm512_mask_storeu_ps(vi + plane, out, _mm512_add_ps(t[i][1], t[i][2]));
    _mm512_mask_storeu_ps(vi + 2 * plane, out, _mm512_sub_ps(t[i][2], t[i][1]));
    _mm512_mask_storeu_ps(vi + 3 * plane, out, _mm512_sub_ps(t[i][1], t[i][3]));
  }
}
#endif

/* F(4x4, 3x3)'s B^T times a column of six values, x[k xs] (k < 6), into r[k rs]. */
AOTC_INLINE_ALWAYS void aotc_conv_winograd_bt4_(const float *x, int64_t xs, float *r, int64_t rs) {
  const float a = x[4 * xs] - 4.0f * x[2 * xs], b = x[3 * xs] - 4.0f * x[xs];
  const float c = x[4 * xs] - x[2 * xs], d = 2.0f * (x[3 * xs] - x[xs]);
  r[0] = 4.0f * (x[0] - x[2 * xs]) + c;
  r[rs] = a + b;
  r[2 * rs] = a - b;
  r[3 * rs] = c + d;
  r[4 * rs] = c - d;
  r[5 * rs] = 4.0f * (x[xs] - x[3 * xs]) + (x[5 * xs] - x[3 * xs]);
}

#if defined(AOTC_SGEMM_PATH_AVX512)
/* The same, six vectors into r. */
AOTC_INLINE_ALWAYS void aotc_conv_winograd_bt4v_(const __m512 *x, __m512 *r) {
  const __m512 four = _mm512_set1_ps(4.0f);
  const __m512 a = _mm512_fnmadd_ps(four, x[2], x[4]), b = _mm512_fnmadd_ps(four, x[1], x[3]);
  const __m512 c = _mm512_sub_ps(x[4], x[2]), d = _mm512_add_ps(_mm512_sub_ps(x[3], x[1]), _mm512_sub_ps(x[3], x[1]));
  r[0] = _mm512_fmadd_ps(four, _mm512_sub_ps(x[0], x[2]), c);
  r[1] = _mm512_add_ps(a, b);
  r[2] = _mm512_sub_ps(a, b);
  r[3] = _mm512_add_ps(c, d);
  r[4] = _mm512_sub_ps(c, d);
  r[5] = _mm512_fmadd_ps(four, _mm512_sub_ps(x[1], x[3]), _mm512_sub_ps(x[5], x[3]));
}

AOTC_INLINE_ALWAYS __m512 aotc_conv_next_lanes_(__m512 hi, __m512 lo) {   /* lo[1..15], hi[0] */
  return _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(hi), _mm512_castps_si512(lo), 1));
}

/* F(4x4, 3x3): n <= 16 tiles of tile row ty from tile column tx on, one to a lane, of
 * plane xc. Column j of a patch row is the row's floats 4 t + j: for j < 4 picked from
 * four loads of 16 (columns outside X and rows outside are 0), for j = 4 and 5 the
 * next tile's columns 0 and 1, with a fifth load's first two floats in lane 15. Each
 * patch row times B, then B^T times each column of that, into v + e * plane. */
AOTC_INLINE_ALWAYS void aotc_conv_winograd_input4x16_(const aotc_conv_geom *g, const float *xc, int64_t ty,
                                                      int64_t tx, int64_t n, float *v, int64_t plane) {
  const int64_t in_h = g->in[1], in_w = g->in[2], c0 = 4 * tx - g->pad[2];
  const __m512i fours = _mm512_slli_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), 2);
  const __mmask16 out = aotc_v_mask_(n);
  __m512 w[6][6];   /* w[i][j]: (d B)[i][j] of each lane's tile */
  int i, j, q;
  for (i = 0; i < 6; i++) {
    const int64_t iy = 4 * ty - g->pad[1] + i;
    __m512 d[6], l[5];
    if (iy < 0 || iy >= in_h) {
      for (j = 0; j < 6; j++) w[i][j] = _mm512_setzero_ps();
      continue;
    }
    for (q = 0; q < 5; q++) {
      const int64_t c = c0 + 16 * q;
      l[q] = _mm512_maskz_loadu_ps(aotc_conv_lane_mask_(-c, in_w - c), xc + iy * in_w + c);
    }
    for (j = 0; j < 4; j++) {   /* lanes 0-7 from floats 0-31, lanes 8-15 from 32-63 */
      const __m512i at = _mm512_and_si512(_mm512_add_epi32(fours, _mm512_set1_epi32(j)), _mm512_set1_epi32(31));
      d[j] = _mm512_mask_blend_ps(0xFF00, _mm512_permutex2var_ps(l[0], at, l[1]),
                                  _mm512_permutex2var_ps(l[2], at, l[3]));
    }
    d[4] = aotc_conv_next_lanes_(l[4], d[0]);
    d[5] = aotc_conv_next_lanes_(aotc_conv_next_lanes_(l[4], l[4]), d[1]);
    aotc_conv_winograd_bt4v_(d, w[i]);
  }
  for (j = 0; j < 6; j++) {
    __m512 col[6], r[6];
    for (i = 0; i < 6; i++) col[i] = w[i][j];
    aotc_conv_winograd_bt4v_(col, r);
    for (i = 0; i < 6; i++) _mm512_mask_storeu_ps(v + (6 * i + j) * plane, out, r[i]);
  }
}
#else
/* F(4x4, 3x3) over one run of `cols` tiles (row ty, from column tx0), into v + e * plane
 * from column 0: the patch rows combined first (whole rows, B^T d), then each tile's
 * six columns of them. */
AOTC_FN void aotc_conv_winograd_input4_run_(const aotc_conv_geom *g, const float *xc, int64_t ty, int64_t tx0,
                                            int64_t cols, float *v, int64_t plane) {
  enum { W = 4 * AOTC_SGEMM_NR + 2 };
  const int64_t in_h = g->in[1], in_w = g->in[2], width = 4 * cols + 2, s = 4 * tx0 - g->pad[2];
  const int64_t lo = AOTC_MIN(AOTC_MAX(-s, 0), width), hi = AOTC_MAX(AOTC_MIN(in_w - s, width), lo);
  float r[6][W], t[6][W], e[36];
  int64_t i, j, tx;
  for (i = 0; i < 6; i++) {   /* the patch rows: columns [lo, hi) from X, 0 elsewhere */
    const int64_t iy = 4 * ty - g->pad[1] + i;
    for (j = 0; j < width; j++) r[i][j] = 0.0f;
    if (iy >= 0 && iy < in_h && hi > lo)
      memcpy(&r[i][lo], xc + iy * in_w + s + lo, (size_t)(hi - lo) * sizeof(float));
  }
  for (j = 0; j < width; j++) aotc_conv_winograd_bt4_(&r[0][j], W, &t[0][j], W);   /* B^T d */
  for (tx = 0; tx < cols; tx++)
    for (i = 0; i < 6; i++) {   /* (B^T d) B: row i of the 6x6 result, e = 6 i + 0..5 */
      aotc_conv_winograd_bt4_(&t[i][4 * tx], 1, e, 1);
      for (j = 0; j < 6; j++) v[(6 * i + j) * plane + tx] = e[j];
    }
}
#endif

/* Input channel c of image n over a strip's runs of m x m tiles: B^T d B of each patch
 * into row c of the strip's panels in V (`v`: the strip's panel of e = 0 at the K-block
 * of c, `plane` floats to the next e; columns past the runs 0). On AVX-512 16 tiles at
 * a time, one to a lane (a third of the time of the loops below, which the compiler left
 * half scalar); elsewhere the patch rows are combined first (whole rows, d's columns side
 * by side), then the columns, for F(2x2) from the row's even and odd columns apart so
 * that every loop is contiguous. */
AOTC_FN void aotc_conv_winograd_input_(const aotc_conv_geom *g, int64_t m, const float *x, int64_t n, int64_t c,
                                       const aotc_conv_winograd_run_ *runs, int nruns, float *v,
                                       int64_t plane) {
  enum { NR = AOTC_SGEMM_NR };
  const int64_t in_h = g->in[1], in_w = g->in[2];
  const float *xc = x + (n * g->cin_g + c) * in_h * in_w;
  int64_t tx, e, used = 0;
  int k;
#if !defined(AOTC_SGEMM_PATH_AVX512)
  float r[4][2 * NR + 2], t[4][2 * NR + 2], even[NR + 1], odd[NR + 1];
  int64_t i, j;
#endif
  for (k = 0; k < nruns; k++) {
    const aotc_conv_winograd_run_ *run = &runs[k];
    const int64_t cols = run->tx1 - run->tx0;
    used = run->at % NR + cols;
#if defined(AOTC_SGEMM_PATH_AVX512)
    for (tx = 0; tx < cols; tx += 16) {
      const int64_t count = AOTC_MIN(16, cols - tx);
      if (m == 4) aotc_conv_winograd_input4x16_(g, xc, run->ty, run->tx0 + tx, count, v + run->at % NR + tx, plane);
      else aotc_conv_winograd_input16_(g, xc, run->ty, run->tx0 + tx, count, v + run->at % NR + tx, plane);
    }
#else
    if (m == 4) {
      aotc_conv_winograd_input4_run_(g, xc, run->ty, run->tx0, cols, v + run->at % NR, plane);
      continue;
    }
    const int64_t width = 2 * cols + 2, s = 2 * run->tx0 - g->pad[2];
    const int64_t lo = AOTC_MIN(AOTC_MAX(-s, 0), width), hi = AOTC_MAX(AOTC_MIN(in_w - s, width), lo);
    for (i = 0; i < 4; i++) {   /* the patch rows: columns [lo, hi) from X, 0 elsewhere */
      const int64_t iy = 2 * run->ty - g->pad[1] + i;
      for (j = 0; j < width; j++) r[i][j] = 0.0f;
      if (iy >= 0 && iy < in_h && hi > lo)
        memcpy(&r[i][lo], xc + iy * in_w + s + lo, (size_t)(hi - lo) * sizeof(float));
    }
    for (j = 0; j < width; j++) {   /* B^T d */
      t[0][j] = r[0][j] - r[2][j];
      t[1][j] = r[1][j] + r[2][j];
      t[2][j] = r[2][j] - r[1][j];
      t[3][j] = r[1][j] - r[3][j];
    }
    for (i = 0; i < 4; i++) {   /* (B^T d) B: row i of the 4x4 result, e = 4 i + 0..3 */
      float *v0 = v + 4 * i * plane + run->at % NR, *v1 = v0 + plane, *v2 = v1 + plane, *v3 = v2 + plane;
      for (j = 0; j <= cols; j++) {
        even[j] = t[i][2 * j];
        odd[j] = t[i][2 * j + 1];
      }
      for (tx = 0; tx < cols; tx++) {
        v0[tx] = even[tx] - even[tx + 1];
        v1[tx] = odd[tx] + even[tx + 1];
        v2[tx] = even[tx + 1] - odd[tx];
        v3[tx] = odd[tx] - odd[tx + 1];
      }
    }
#endif
  }
  for (e = 0; e < aotc_conv_winograd_terms_(m); e++)
    for (tx = used; tx < NR; tx++) v[e * plane + tx] = 0.0f;
}

#if defined(AOTC_SGEMM_PATH_AVX512)
/* n <= 16 tiles of output channel o's tile row ty from tile column tx on, one to a lane
 * (`m`: their products of e = 0, `plane` floats to the next e): A^T m A in registers,
 * + bias, each output row's two columns interleaved into 32 floats and stored with the
 * residual and the activation (aotc_conv_store_run_). */
AOTC_INLINE_ALWAYS void aotc_conv_winograd_output16_(const aotc_conv_winograd_args_ *a, int64_t n, int64_t o,
                                                     int64_t ty, int64_t tx, int64_t count, const float *m,
                                                     int64_t plane) {
  const aotc_conv_geom *g = a->g;
  const int64_t oh_n = g->out[1], ow_n = g->out[2], x0 = 2 * tx, width = AOTC_MIN(2 * count, ow_n - x0);
  const __m512i first = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i second = _mm512_add_epi32(first, _mm512_set1_epi32(8));
  const __m512 bias = _mm512_set1_ps(a->bias ? a->bias[o] : 0.0f);
  const __mmask16 in = aotc_v_mask_(count);
  __m512 s[2][4];
  int i, j;
  for (j = 0; j < 4; j++) {   /* A^T m: column j of the 2x4 result */
    const __m512 m0 = _mm512_maskz_loadu_ps(in, m + j * plane);
    const __m512 m1 = _mm512_maskz_loadu_ps(in, m + (4 + j) * plane);
    const __m512 m2 = _mm512_maskz_loadu_ps(in, m + (8 + j) * plane);
    const __m512 m3 = _mm512_maskz_loadu_ps(in, m + (12 + j) * plane);
    s[0][j] = _mm512_add_ps(_mm512_add_ps(m0, m1), m2);
    s[1][j] = _mm512_sub_ps(_mm512_sub_ps(m1, m2), m3);
  }
  for (i = 0; i < 2 && 2 * ty + i < oh_n; i++) {   /* (A^T m) A, row i of the 2x2 */
    const int64_t at = ((n * g->cout_g + o) * oh_n + 2 * ty + i) * ow_n + x0;
    const __m512 even = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(s[i][0], s[i][1]), s[i][2]), bias);
    const __m512 odd = _mm512_add_ps(_mm512_sub_ps(_mm512_sub_ps(s[i][1], s[i][2]), s[i][3]), bias);
    const float *res = a->residual ? a->residual + at : NULL;
    aotc_conv_store_run_(a->y + at, _mm512_permutex2var_ps(even, first, odd), res, AOTC_MIN(16, width), a->act);
    if (width > 16)
      aotc_conv_store_run_(a->y + at + 16, _mm512_permutex2var_ps(even, second, odd), res ? res + 16 : NULL,
                           width - 16, a->act);
  }
}
#endif

/* F(4x4, 3x3)'s A^T times a column of six values, m[k ms] (k < 6), into o[k os] (k < 4). */
AOTC_INLINE_ALWAYS void aotc_conv_winograd_at4_(const float *m, int64_t ms, float *o, int64_t os) {
  const float s12 = m[ms] + m[2 * ms], d12 = m[ms] - m[2 * ms];
  const float s34 = m[3 * ms] + m[4 * ms], d34 = m[3 * ms] - m[4 * ms];
  o[0] = m[0] + s12 + s34;
  o[os] = d12 + 2.0f * d34;
  o[2 * os] = s12 + 4.0f * s34;
  o[3 * os] = d12 + 8.0f * d34 + m[5 * ms];
}

#if defined(AOTC_SGEMM_PATH_AVX512)
/* The same, six vectors into four. */
AOTC_INLINE_ALWAYS void aotc_conv_winograd_at4v_(const __m512 *m, __m512 *o) {
  const __m512 s12 = _mm512_add_ps(m[1], m[2]), d12 = _mm512_sub_ps(m[1], m[2]);
  const __m512 s34 = _mm512_add_ps(m[3], m[4]), d34 = _mm512_sub_ps(m[3], m[4]);
  o[0] = _mm512_add_ps(_mm512_add_ps(m[0], s12), s34);
  o[1] = _mm512_fmadd_ps(_mm512_set1_ps(2.0f), d34, d12);
  o[2] = _mm512_fmadd_ps(_mm512_set1_ps(4.0f), s34, s12);
  o[3] = _mm512_add_ps(_mm512_fmadd_ps(_mm512_set1_ps(8.0f), d34, d12), m[5]);
}

/* F(4x4, 3x3): n <= 16 tiles of output channel o's tile row ty from tile column tx on,
 * one to a lane (`m`: their products of e = 0, `plane` floats to the next e): A^T m A
 * in registers, + bias, each output row's four columns interleaved into 64 floats (two
 * rounds of pairs) and stored with the residual and the activation. */
AOTC_INLINE_ALWAYS void aotc_conv_winograd_output4x16_(const aotc_conv_winograd_args_ *a, int64_t n, int64_t o,
                                                       int64_t ty, int64_t tx, int64_t count, const float *m,
                                                       int64_t plane) {
  static const int32_t pairs[2][16] AOTC_ALIGNED(64) = {   /* a[t], b[t] for t in 0-7, or 8-15 */
      {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23},
      {8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31}};
  static const int32_t quads[2][16] AOTC_ALIGNED(64) = {   /* pairs t of a, then of b, t in 0-3 or 4-7 */
      {0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23},
      {8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31}};
  const aotc_conv_geom *g = a->g;
  const int64_t oh_n = g->out[1], ow_n = g->out[2], x0 = 4 * tx, width = AOTC_MIN(4 * count, ow_n - x0);
  const __m512 bias = _mm512_set1_ps(a->bias ? a->bias[o] : 0.0f);
  const __mmask16 in = aotc_v_mask_(count);
  __m512 s[4][6];
  int i, j, h, q;
  for (j = 0; j < 6; j++) {   /* A^T m: column j of the 4x6 result */
    __m512 col[6], r[4];
    for (i = 0; i < 6; i++) col[i] = _mm512_maskz_loadu_ps(in, m + (6 * i + j) * plane);
    aotc_conv_winograd_at4v_(col, r);
    for (i = 0; i < 4; i++) s[i][j] = r[i];
  }
  for (i = 0; i < 4 && 4 * ty + i < oh_n; i++) {   /* (A^T m) A, row i of the 4x4 */
    const int64_t at = ((n * g->cout_g + o) * oh_n + 4 * ty + i) * ow_n + x0;
    const float *res = a->residual ? a->residual + at : NULL;
    __m512 r[4], ab[2][2];
    aotc_conv_winograd_at4v_(s[i], r);
    for (j = 0; j < 4; j++) r[j] = _mm512_add_ps(r[j], bias);
    for (h = 0; h < 2; h++) {   /* ab[0][h]: columns 0 and 1 of tiles 8h..8h+7, ab[1][h]: 2 and 3 */
      const __m512i pick = _mm512_load_si512((const void *)pairs[h]);
      ab[0][h] = _mm512_permutex2var_ps(r[0], pick, r[1]);
      ab[1][h] = _mm512_permutex2var_ps(r[2], pick, r[3]);
    }
    for (q = 0; q < 4 && 16 * q < width; q++) {   /* floats 16q.. of the row: tiles 4q..4q+3 */
      const __m512i pick = _mm512_load_si512((const void *)quads[q % 2]);
      const __m512 run = _mm512_permutex2var_ps(ab[0][q / 2], pick, ab[1][q / 2]);
      aotc_conv_store_run_(a->y + at + 16 * q, run, res ? res + 16 * q : NULL, AOTC_MIN(16, width - 16 * q),
                           a->act);
    }
  }
}
#else
/* F(4x4, 3x3) over one run of `cols` tiles (row ty, from column tx0) of output channel
 * o (`mo`: their products of e = 0, `plane` floats to the next e): A^T m A, + bias,
 * + residual, then the activation, row by row into Y. */
AOTC_FN void aotc_conv_winograd_output4_run_(const aotc_conv_winograd_args_ *a, int64_t n, int64_t o, int64_t ty,
                                             int64_t tx0, int64_t cols, const float *mo, int64_t plane) {
  enum { W = 4 * AOTC_SGEMM_NR };
  const aotc_conv_geom *g = a->g;
  const int64_t oh_n = g->out[1], ow_n = g->out[2], x0 = 4 * tx0, width = AOTC_MIN(4 * cols, ow_n - x0);
  const float bias = a->bias ? a->bias[o] : 0.0f;
  float p[4][W], e[36], s[24];
  int64_t i, j, tx;
  for (tx = 0; tx < cols; tx++) {
    for (j = 0; j < 36; j++) e[j] = mo[j * plane + tx];
    for (j = 0; j < 6; j++) aotc_conv_winograd_at4_(&e[j], 6, &s[j], 6);   /* A^T m, 4x6 */
    for (i = 0; i < 4; i++) aotc_conv_winograd_at4_(&s[6 * i], 1, &p[i][4 * tx], 1);   /* (A^T m) A */
  }
  for (i = 0; i < 4 && 4 * ty + i < oh_n; i++) {
    const int64_t at = ((n * g->cout_g + o) * oh_n + 4 * ty + i) * ow_n + x0;
    float *yr = a->y + at;
    for (j = 0; j < width; j++) yr[j] = p[i][j] + bias + (a->residual ? a->residual[at + j] : 0.0f);
    aotc_activation_apply(a->act, yr, width);
  }
}
#endif

/* Output channel o of image n over a strip's runs: A^T m A of each tile, + bias,
 * + residual, then the activation, into Y (`m`: M of e = 0). On AVX-512 16 tiles at a
 * time, one to a lane. */
AOTC_FN void aotc_conv_winograd_output_(const aotc_conv_winograd_args_ *a, int64_t n, int64_t o,
                                        const aotc_conv_winograd_run_ *runs, int nruns, const float *m) {
  const aotc_conv_geom *g = a->g;
  const int64_t plane = aotc_conv_winograd_plane_(g->cout_g, a->block);
  int k;
#if !defined(AOTC_SGEMM_PATH_AVX512)
  enum { NR = AOTC_SGEMM_NR };
  const int64_t oh_n = g->out[1], ow_n = g->out[2];
  const float bias = a->bias ? a->bias[o] : 0.0f;
  float s[2][4][NR], p[2 * NR];
  int64_t i, j, tx;
#endif
  for (k = 0; k < nruns; k++) {
    const aotc_conv_winograd_run_ *run = &runs[k];
    const int64_t cols = run->tx1 - run->tx0;
    const float *mo = m + o * a->block + run->at;
#if defined(AOTC_SGEMM_PATH_AVX512)
    int64_t tx;
    for (tx = 0; tx < cols; tx += 16) {
      const int64_t count = AOTC_MIN(16, cols - tx);
      if (a->m == 4) aotc_conv_winograd_output4x16_(a, n, o, run->ty, run->tx0 + tx, count, mo + tx, plane);
      else aotc_conv_winograd_output16_(a, n, o, run->ty, run->tx0 + tx, count, mo + tx, plane);
    }
#else
    if (a->m == 4) {
      aotc_conv_winograd_output4_run_(a, n, o, run->ty, run->tx0, cols, mo, plane);
      continue;
    }
    const int64_t x0 = 2 * run->tx0, width = AOTC_MIN(2 * cols, ow_n - x0);
    for (j = 0; j < 4; j++) {   /* A^T m: column j of the 2x4 result */
      const float *m0 = mo + j * plane, *m1 = m0 + 4 * plane, *m2 = m1 + 4 * plane, *m3 = m2 + 4 * plane;
      for (tx = 0; tx < cols; tx++) {
        s[0][j][tx] = m0[tx] + m1[tx] + m2[tx];
        s[1][j][tx] = m1[tx] - m2[tx] - m3[tx];
      }
    }
    for (i = 0; i < 2 && 2 * run->ty + i < oh_n; i++) {   /* (A^T m) A, row i of the 2x2 */
      const int64_t at = ((n * g->cout_g + o) * oh_n + 2 * run->ty + i) * ow_n + x0;
      float *yr = a->y + at;
      for (tx = 0; tx < cols; tx++) {
        p[2 * tx] = s[i][0][tx] + s[i][1][tx] + s[i][2][tx] + bias;
        p[2 * tx + 1] = s[i][1][tx] - s[i][2][tx] - s[i][3][tx] + bias;
      }
      if (a->residual)
        for (j = 0; j < width; j++) p[j] += a->residual[at + j];
      for (j = 0; j < width; j++) yr[j] = p[j];
      aotc_activation_apply(a->act, yr, width);
    }
#endif
  }
}

/* A block's products M[e] = U[e] V[e] for terms e in [e0, e1) over its first `tiles`
 * columns (V packed for that many), on this thread (no pool). Where Cin is one K-block,
 * the GEMM's tiles are called here as its driver calls them for a shorter K (panel by
 * panel, a panel's full strips in one run, its rows of U fetched ahead), without the
 * driver's set-up for every product and task of one tile: 64 -> 64 at 56x56 (blocks of
 * 32 tiles) took 0.93x the time at one thread, 128 -> 128 at 28x28 0.97x, ResNet-50
 * 0.983x at one thread and 0.975x at two. With K = 256 the driver goes strip by strip;
 * panel by panel here, each panel of U is read once for the block's strips: 256 -> 256
 * at 14x14 took 0.92x the time at one thread and 0.93x at two. Not inlined: into the lane,
 * GCC followed the driver's packing of B (never taken: V comes packed) and warned of a
 * loop it could not bound. */
AOTC_NOINLINE void aotc_conv_winograd_products_(int64_t cout, int64_t cin, int64_t block, int64_t tiles,
                                                int64_t e0, int64_t e1, const float *u, const float *v,
                                                float *m, unsigned char *scratch) {
  enum { NR = AOTC_SGEMM_NR };
  int64_t e;
  if (cin <= AOTC_SGEMM_KC) {
    const aotc_sgemm_prefetch_ ahead = {.a_ahead = 1};
    const int64_t panels = aotc_sgemm_panels_(cout), full = tiles / NR, ragged = tiles % NR;
    const int64_t vplane = aotc_conv_winograd_plane_(cin, block), mplane = aotc_conv_winograd_plane_(cout, block);
    int64_t p, i, rows, next, next_rows;
    for (e = e0; e < e1; e++)
      for (p = 0; p < panels; p++) {
        const float *a = u + e * cout * cin, *b = v + e * vplane;
        float *c = m + e * mplane;
        aotc_sgemm_panel_(cout, 1, p, &i, &rows);
        /* the first AOTC_SGEMM_A_AHEAD columns of the next panel's rows (or of the next
         * term's first), into L2; the tiles fetch the rest as they go */
        aotc_sgemm_panel_(cout, 1, (p + 1) % panels, &next, &next_rows);
        if (e + (p + 1) / panels < e1)
          aotc_sgemm_prefetch_a_rows_(a + (p + 1 == panels ? cout * cin : 0) + next * cin, cin, next_rows,
                                      AOTC_MIN(cin, AOTC_SGEMM_A_AHEAD));
        if (full > 0)
          aotc_sgemm_tile_run_for_(rows)(cin, a + i * cin, cin, 1, b, NR, cin * NR, c + i * block, block, full, 1,
                                         NULL, &ahead);
        if (ragged > 0)
          aotc_sgemm_tile_for_(rows, ragged)(cin, a + i * cin, cin, 1, b + full * cin * NR, NR,
                                             c + i * block + full * NR, block, ragged, 1, NULL, NULL, NULL);
      }
    return;
  }
  for (e = e0; e < e1; e++)
    aotc_sgemm_packed(NULL, cout, tiles, cin, u + e * cout * cin, cin, 0,
                      v + e * aotc_conv_winograd_plane_(cin, block),
                      m + e * aotc_conv_winograd_plane_(cout, block), block, NULL, NULL, scratch);
}

/* Input channels [c0, c1) of image n's block of `tiles` tiles from tile t0: B^T d B
 * into V, strip by strip. A channel writes a row of 32 floats in each of its 16 or 36
 * terms' planes, more streams than the hardware's prefetch follows, so each channel's
 * rows are fetched for writing (PREFETCHW: aotc/build.py's -mprfchw) while the channel
 * before is transformed, as a GEMM tile fetches its C: in builds.py ResNet-50 took
 * 0.992-0.995x the time at two threads on one L3 (43 and 48 pairs), 1.000x on two (5
 * pairs; in per-step profiles there its eight Winograd convs of one block 10-40 us
 * faster each, the three at 56x56 1-27), 0.978x at one thread. */
AOTC_FN void aotc_conv_winograd_inputs_(const aotc_conv_winograd_args_ *a, int64_t n, int64_t t0, int64_t tiles,
                                        int64_t c0, int64_t c1, float *v) {
  enum { NR = AOTC_SGEMM_NR };
  const int64_t cin = a->g->cin_g, strips = (tiles + NR - 1) / NR, plane = aotc_conv_winograd_plane_(cin, a->block);
  aotc_conv_winograd_run_ runs[NR];
  int64_t s, c;
  for (s = 0; s < strips; s++) {
    const int nruns = aotc_conv_winograd_runs_(a->rows, a->cols, t0 + s * NR, s * NR, runs);
    for (c = c0; c < c1; c++) {
      if (c + 1 < c1)
        aotc_sgemm_prefetch_tile_(v + aotc_sgemm_packed_row_(strips, cin, c + 1, s), plane, (int)a->terms, 1);
      aotc_conv_winograd_input_(a->g, a->m, a->x, n, c, runs, nruns, v + aotc_sgemm_packed_row_(strips, cin, c, s),
                                plane);
    }
  }
}

/* Output channels [o0, o1) of the same block: A^T m A from M into Y, each channel's
 * rows of M and of Y (for writing) fetched while the channel before is transformed, as
 * the input's rows of V. */
AOTC_FN void aotc_conv_winograd_outputs_(const aotc_conv_winograd_args_ *a, int64_t n, int64_t t0, int64_t tiles,
                                         int64_t o0, int64_t o1, const float *m) {
  enum { NR = AOTC_SGEMM_NR };
  const aotc_conv_geom *g = a->g;
  const int64_t strips = (tiles + NR - 1) / NR, plane = aotc_conv_winograd_plane_(g->cout_g, a->block);
  aotc_conv_winograd_run_ runs[NR];
  int64_t s, o, f;
  for (s = 0; s < strips; s++) {
    const int nruns = aotc_conv_winograd_runs_(a->rows, a->cols, t0 + s * NR, s * NR, runs);
    /* the output rows the strip's tiles cover, in each channel */
    const int64_t y0 = runs[0].ty * a->m, y1 = AOTC_MIN(g->out[1], (runs[nruns - 1].ty + 1) * a->m);
    for (o = o0; o < o1; o++) {
      if (o + 1 < o1) {
        const float *y = a->y + ((n * g->cout_g + o + 1) * g->out[1] + y0) * g->out[2];
        aotc_sgemm_prefetch_tile_(m + (o + 1) * a->block + s * NR, plane, (int)a->terms, 0);
        for (f = 0; f < (y1 - y0) * g->out[2]; f += 16) AOTC_PREFETCH_W(y + f);
      }
      aotc_conv_winograd_output_(a, n, o, runs, nruns, m);
    }
  }
}

/* Lane l: its run of blocks, each transformed in (strip by strip), multiplied and
 * transformed out through the lane's scratch. An image's last block multiplies only
 * the tiles it has: computed whole, ResNet-50's 128 -> 128 conv at 28x28 (six blocks
 * and four tiles) cost a seventh block, and two threads took four blocks to three. */
AOTC_FN void aotc_conv_winograd_lane_(void *arg, int64_t l) {
  const aotc_conv_winograd_args_ *a = (const aotc_conv_winograd_args_ *)arg;
  const int64_t cin = a->g->cin_g, cout = a->g->cout_g, block = a->block;
  const size_t v_bytes = aotc_conv_winograd_part_bytes_(a->terms, cin, block);
  const size_t m_bytes = aotc_conv_winograd_part_bytes_(a->terms, cout, block);
  unsigned char *scratch = a->scratch + (size_t)l * aotc_conv_winograd_lane_bytes(a->terms, cin, cout, block);
  float *v = (float *)(void *)scratch, *m = (float *)(void *)(scratch + v_bytes);
  int64_t b;
  for (b = a->blocks * l / a->lanes; b < a->blocks * (l + 1) / a->lanes; b++) {
    const int64_t n = b / a->blocks_per_image, t0 = b % a->blocks_per_image * block;
    const int64_t tiles = AOTC_MIN(block, a->rows * a->cols - t0);
    aotc_conv_winograd_inputs_(a, n, t0, tiles, 0, cin, v);
    aotc_conv_winograd_products_(cout, cin, block, tiles, 0, a->terms, a->u, v, m, scratch + v_bytes + m_bytes);
    aotc_conv_winograd_outputs_(a, n, t0, tiles, 0, cout, m);
  }
}

/* A conv of one block, in three dispatches (each a function of the shape alone). The
 * transforms go AOTC_CONV_WINOGRAD_CHANNELS channels a task; V, then M, lie at the
 * start of the scratch, the lanes' GEMM scratch after them. Every line of V and M is
 * written by one thread and read by the other, so where the threads are far apart
 * (aotc_pool_far) each task takes the lines it writes first (aotc_take_lines): in
 * per-step profiles of ResNet-50 at two threads on two L3s its eight such convs took
 * 140-200 us less each; taken on one L3 too, they had taken 100-170 us more there. */
#define AOTC_CONV_WINOGRAD_CHANNELS 16

AOTC_FN float *aotc_conv_winograd_m_(const aotc_conv_winograd_args_ *a) {
  return (float *)(void *)(a->scratch + aotc_conv_winograd_part_bytes_(a->terms, a->g->cin_g, a->block));
}

AOTC_FN void aotc_conv_winograd_input_task_(void *arg, int64_t t) {
  const aotc_conv_winograd_args_ *a = (const aotc_conv_winograd_args_ *)arg;
  const int64_t c0 = t * AOTC_CONV_WINOGRAD_CHANNELS, c1 = AOTC_MIN(a->g->cin_g, c0 + AOTC_CONV_WINOGRAD_CHANNELS);
  float *v = (float *)(void *)a->scratch;
  if (a->far) {   /* the task's rows of each strip and term: one run (16 channels divide a K-block) */
    const int64_t cin = a->g->cin_g, strips = (a->rows * a->cols + AOTC_SGEMM_NR - 1) / AOTC_SGEMM_NR;
    const int64_t plane = aotc_conv_winograd_plane_(cin, a->block);
    int64_t e, s;
    for (e = 0; e < a->terms; e++)
      for (s = 0; s < strips; s++)
        aotc_take_lines(v + e * plane + aotc_sgemm_packed_row_(strips, cin, c0, s),
                        (size_t)((c1 - c0) * AOTC_SGEMM_NR) * sizeof(float));
    aotc_lines_taken();
  }
  aotc_conv_winograd_inputs_(a, 0, 0, a->rows * a->cols, c0, c1, v);
}

AOTC_FN void aotc_conv_winograd_products_task_(void *arg, int64_t l) {
  const aotc_conv_winograd_args_ *a = (const aotc_conv_winograd_args_ *)arg;
  const int64_t cin = a->g->cin_g, cout = a->g->cout_g, block = a->block;
  const int64_t e0 = a->terms * l / a->lanes, e1 = a->terms * (l + 1) / a->lanes;
  float *m = aotc_conv_winograd_m_(a);
  unsigned char *gemm_scratch = (unsigned char *)m + aotc_conv_winograd_part_bytes_(a->terms, cout, block) +
                                (size_t)l * aotc_sgemm_packed_scratch_bytes(cout, block, cin);
  const int64_t plane = aotc_conv_winograd_plane_(cout, block);
  aotc_take_range(a->far, m + e0 * plane, (size_t)((e1 - e0) * plane) * sizeof(float));
  aotc_conv_winograd_products_(cout, cin, block, a->rows * a->cols, e0, e1, a->u, (const float *)(void *)a->scratch,
                               m, gemm_scratch);
}

AOTC_FN void aotc_conv_winograd_output_task_(void *arg, int64_t t) {
  const aotc_conv_winograd_args_ *a = (const aotc_conv_winograd_args_ *)arg;
  const int64_t o0 = t * AOTC_CONV_WINOGRAD_CHANNELS, o1 = AOTC_MIN(a->g->cout_g, o0 + AOTC_CONV_WINOGRAD_CHANNELS);
  aotc_conv_winograd_outputs_(a, 0, 0, a->rows * a->cols, o0, o1, aotc_conv_winograd_m_(a));
}

AOTC_ENGINE_FN void aotc_conv_winograd(aotc_pool *pool, const aotc_conv_geom *g, int64_t m, int64_t block,
                                       int64_t lanes, const float *x, const float *u, const float *bias,
                                       const float *residual, float *y, const aotc_activation *act,
                                       unsigned char *scratch) {
  const int64_t rows = (g->out[1] + m - 1) / m, cols = (g->out[2] + m - 1) / m;
  const int64_t blocks_per_image = (rows * cols + block - 1) / block;
  aotc_conv_winograd_args_ a = {.g = g, .x = x, .u = u, .bias = bias, .residual = residual, .y = y,
                                .act = act, .scratch = scratch, .m = m, .terms = aotc_conv_winograd_terms_(m),
                                .block = block, .lanes = lanes, .rows = rows, .cols = cols,
                                .blocks_per_image = blocks_per_image, .blocks = g->batch * blocks_per_image};
  if (aotc_conv_winograd_one_block_(g, m, block)) {
    const int64_t c = AOTC_CONV_WINOGRAD_CHANNELS;
    a.far = aotc_pool_far(pool);
    aotc_parallel_for(pool, (g->cin_g + c - 1) / c, aotc_conv_winograd_input_task_, &a);
    aotc_parallel_for(pool, lanes, aotc_conv_winograd_products_task_, &a);
    aotc_parallel_for(pool, (g->cout_g + c - 1) / c, aotc_conv_winograd_output_task_, &a);
    return;
  }
  aotc_parallel_for(pool, lanes, aotc_conv_winograd_lane_, &a);
}

#endif /* AOTC_ENGINE_EXTERN */

#endif
