/* aotc runtime: 3x3 stride-1 convolution by Winograd's F(2x2, 3x3), fp32, fast mode.
 *
 * Each 2x2 block of output pixels (a tile) comes from a 4x4 patch of the input,
 * d, and each 3x3 kernel g, as Y = A^T [(G g G^T) .* (B^T d B)] A: 16 products per
 * tile and channel pair where the direct sum takes 36. The 16 elementwise products,
 * summed over input channels, are 16 matrix products U[e] (Cout x Cin, the weights
 * transformed at compile time: aotc/ops/conv.py) times V[e] (Cin x tiles, the input
 * transformed here), run by aotc_sgemm; the output transform then adds the bias, the
 * residual and the activation. An image's tiles go in chunks of `chunk_rows` rows of
 * tiles (aotc/ops/conv.py sizes them: V and M of a chunk about L2-sized), each chunk
 * transformed, multiplied and transformed back in turn. The sums are not the direct kernels' (their rounding
 * differs by a few ulps of the largest term), so exact mode never comes here. Tiles
 * past the output's last row or column are computed and dropped; input outside X is 0.
 * ResNet-50's 3x3 convs ran at the FMA peak in onnxruntime's direct kernel and within
 * 8% of it in aotc's: only fewer multiplies beat that.
 *
 *   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]   A^T = [1 1 1 0; 0 1 -1 -1] */
#ifndef AOTC_CONV_WINOGRAD_H_
#define AOTC_CONV_WINOGRAD_H_

#include "aotc_base.h"
#include "aotc_threads.h"
#include "aotc_activation.h"
#include "aotc_gemm.h"
#include "aotc_conv.h"

/* `u`: the transformed weights [16][Cout][Cin]; `residual`: NULL, or a tensor shaped as
 * y (it may be y itself) added before `act`. The conv: one group, 2-D, 3x3, stride 1,
 * no dilation, output rows of at most AOTC_CONV_WINOGRAD_MAX_WIDTH. Scratch, each part
 * 64-byte aligned: V [16][Cin][tiles], M [16][Cout][tiles] (tiles: a chunk's 2x2
 * output blocks, chunk_rows * ceil(out width / 2), ragged ones included), then
 * aotc_sgemm_scratch_bytes(Cout, tiles, Cin). */
AOTC_ENGINE_FN void aotc_conv_winograd(aotc_pool *pool, const aotc_conv_geom *g, int64_t chunk_rows,
                                       const float *x, const float *u, const float *bias,
                                       const float *residual, float *y, const aotc_activation *act,
                                       unsigned char *scratch);

#define AOTC_CONV_WINOGRAD_MAX_WIDTH 256   /* output columns: rows kept on the stack */

#ifndef AOTC_ENGINE_EXTERN

typedef struct {
  const aotc_conv_geom *g;
  const float *x, *bias, *residual;
  float *v, *m, *y;
  const aotc_activation *act;
  int64_t n, r0, r1, cols, tiles;   /* the chunk: image n's tile rows [r0, r1), its tiles */
} aotc_conv_winograd_args_;

/* Input channel c (task c) of the chunk: B^T d B of each patch into V. The
 * patch rows are combined first (whole rows, d's columns side by side), then the
 * columns, from the row's even and odd columns apart so that every loop is
 * contiguous. */
AOTC_FN void aotc_conv_winograd_input_task_(void *arg, int64_t task) {
  const aotc_conv_winograd_args_ *a = (const aotc_conv_winograd_args_ *)arg;
  const aotc_conv_geom *g = a->g;
  const int64_t c = task, in_h = g->in[1], in_w = g->in[2];
  const int64_t cols = a->cols, width = 2 * cols + 2, plane = g->cin_g * a->tiles;
  const int64_t lo = AOTC_MIN(g->pad[2], width), hi = AOTC_MAX(AOTC_MIN(g->pad[2] + in_w, width), lo);
  const float *xc = a->x + (a->n * g->cin_g + c) * in_h * in_w;
  float r[4][AOTC_CONV_WINOGRAD_MAX_WIDTH + 4], t[4][AOTC_CONV_WINOGRAD_MAX_WIDTH + 4];
  float even[AOTC_CONV_WINOGRAD_MAX_WIDTH / 2 + 2], odd[AOTC_CONV_WINOGRAD_MAX_WIDTH / 2 + 2];
  int64_t ty, i, j, tx;
  for (ty = a->r0; ty < a->r1; ty++) {
    float *v = a->v + c * a->tiles + (ty - a->r0) * cols;
    for (i = 0; i < 4; i++) {   /* the patch rows: columns [lo, hi) from X, 0 elsewhere */
      const int64_t iy = 2 * ty - g->pad[1] + i;
      const int inside = iy >= 0 && iy < in_h;
      for (j = 0; j < width; j++) r[i][j] = 0.0f;
      if (inside && hi > lo) memcpy(&r[i][lo], xc + iy * in_w + lo - g->pad[2], (size_t)(hi - lo) * sizeof(float));
    }
    for (j = 0; j < width; j++) {   /* B^T d */
      t[0][j] = r[0][j] - r[2][j];
      t[1][j] = r[1][j] + r[2][j];
      t[2][j] = r[2][j] - r[1][j];
      t[3][j] = r[1][j] - r[3][j];
    }
    for (i = 0; i < 4; i++) {   /* (B^T d) B: row i of the 4x4 result, e = 4 i + 0..3 */
      float *v0 = v + 4 * i * plane, *v1 = v0 + plane, *v2 = v1 + plane, *v3 = v2 + plane;
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
  }
}

/* Output channel o (task o) of the chunk: A^T m A of each tile, + bias, + residual,
 * then the activation, into Y. */
AOTC_FN void aotc_conv_winograd_output_task_(void *arg, int64_t task) {
  const aotc_conv_winograd_args_ *a = (const aotc_conv_winograd_args_ *)arg;
  const aotc_conv_geom *g = a->g;
  const int64_t n = a->n, o = task, oh_n = g->out[1], ow_n = g->out[2];
  const int64_t cols = a->cols, plane = g->cout_g * a->tiles;
  const float bias = a->bias ? a->bias[o] : 0.0f;
  float s[2][4][AOTC_CONV_WINOGRAD_MAX_WIDTH / 2 + 1], p[AOTC_CONV_WINOGRAD_MAX_WIDTH + 2];
  int64_t ty, i, j, tx;
  for (ty = a->r0; ty < a->r1; ty++) {
    const float *m = a->m + o * a->tiles + (ty - a->r0) * cols;
    for (j = 0; j < 4; j++) {   /* A^T m: column j of the 2x4 result */
      const float *m0 = m + j * plane, *m1 = m0 + 4 * plane, *m2 = m1 + 4 * plane, *m3 = m2 + 4 * plane;
      for (tx = 0; tx < cols; tx++) {
        s[0][j][tx] = m0[tx] + m1[tx] + m2[tx];
        s[1][j][tx] = m1[tx] - m2[tx] - m3[tx];
      }
    }
    for (i = 0; i < 2 && 2 * ty + i < oh_n; i++) {   /* (A^T m) A, row i of the 2x2 */
      const int64_t at = ((n * g->cout_g + o) * oh_n + 2 * ty + i) * ow_n;
      float *yr = a->y + at;
      for (tx = 0; tx < cols; tx++) {
        p[2 * tx] = s[i][0][tx] + s[i][1][tx] + s[i][2][tx] + bias;
        p[2 * tx + 1] = s[i][1][tx] - s[i][2][tx] - s[i][3][tx] + bias;
      }
      if (a->residual)
        for (j = 0; j < ow_n; j++) p[j] += a->residual[at + j];
      for (j = 0; j < ow_n; j++) yr[j] = p[j];
      aotc_activation_apply(a->act, yr, ow_n);
    }
  }
}

AOTC_ENGINE_FN void aotc_conv_winograd(aotc_pool *pool, const aotc_conv_geom *g, int64_t chunk_rows,
                                       const float *x, const float *u, const float *bias,
                                       const float *residual, float *y, const aotc_activation *act,
                                       unsigned char *scratch) {
  const int64_t cin = g->cin_g, cout = g->cout_g, rows = (g->out[1] + 1) / 2, cols = (g->out[2] + 1) / 2;
  const size_t v_bytes = aotc_conv_round64_((size_t)(16 * cin * chunk_rows * cols) * sizeof(float));
  const size_t m_bytes = aotc_conv_round64_((size_t)(16 * cout * chunk_rows * cols) * sizeof(float));
  aotc_conv_winograd_args_ a = {.g = g, .x = x, .bias = bias, .residual = residual, .y = y, .act = act,
                                .cols = cols};
  int e;
  a.v = (float *)(void *)scratch;
  a.m = (float *)(void *)(scratch + v_bytes);
  for (a.n = 0; a.n < g->batch; a.n++)
    for (a.r0 = 0; a.r0 < rows; a.r0 = a.r1) {
      a.r1 = AOTC_MIN(a.r0 + chunk_rows, rows);
      a.tiles = (a.r1 - a.r0) * a.cols;
      aotc_parallel_for(pool, cin, aotc_conv_winograd_input_task_, &a);
      for (e = 0; e < 16; e++)
        aotc_sgemm(pool, cout, a.tiles, cin, u + e * cout * cin, cin, 0, a.v + e * cin * a.tiles, a.tiles, 0,
                   a.m + e * cout * a.tiles, a.tiles, NULL, NULL, scratch + v_bytes + m_bytes);
      aotc_parallel_for(pool, cout, aotc_conv_winograd_output_task_, &a);
    }
}

#endif /* AOTC_ENGINE_EXTERN */

#endif
