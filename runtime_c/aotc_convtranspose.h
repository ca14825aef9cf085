/* aotc runtime: ConvTranspose (float32, NCHW, 1 to 3 spatial dims as 3 with leading 1s).
 *
 * Per image, group and block of input pixels: one GEMM cols = W_g^T X_g ([cout_g *
 * kernel volume, block pixels], the weight read transposed in place), then col2im adds
 * every column into the output position it lands on. col2im runs one task per output
 * channel; every output element is summed in a fixed order (blocks, then taps, then
 * pixels) and blocks are a function of the shape, so results do not depend on the
 * thread count. */
#ifndef AOTC_CONVTRANSPOSE_H_
#define AOTC_CONVTRANSPOSE_H_

#include "aotc_base.h"
#include "aotc_gemm.h"
#include "aotc_threads.h"

typedef struct {
  int64_t batch, group, cin_g, cout_g;
  int64_t in[3], out[3], kernel[3], stride[3], dilation[3], pad[3];
} aotc_convt_geom;

typedef struct {
  const aotc_convt_geom *g;
  const float *cols, *bias;
  float *y;  /* the group's first output channel of this image */
  int64_t first_channel, first_pixel, pixels;
} aotc_convt_job_;

/* Output channel c of the group: its plane starts as the bias (with the first block of
 * input pixels), then every column row (c, tap) of the block adds into it. */
AOTC_FN void aotc_convt_col2im_(void *arg, int64_t c) {
  const aotc_convt_job_ *job = (const aotc_convt_job_ *)arg;
  const aotc_convt_geom *g = job->g;
  const int64_t out_vol = g->out[0] * g->out[1] * g->out[2];
  const int64_t kvol = g->kernel[0] * g->kernel[1] * g->kernel[2];
  float *plane = job->y + c * out_vol;
  int64_t k0, k1, k2, p;
  if (job->first_pixel == 0) {
    const float init = job->bias ? job->bias[job->first_channel + c] : 0.0f;
    for (p = 0; p < out_vol; p++) plane[p] = init;
  }
  for (k0 = 0; k0 < g->kernel[0]; k0++)
    for (k1 = 0; k1 < g->kernel[1]; k1++)
      for (k2 = 0; k2 < g->kernel[2]; k2++) {
        const int64_t tap = (k0 * g->kernel[1] + k1) * g->kernel[2] + k2;
        const float *row = job->cols + (c * kvol + tap) * job->pixels;
        /* the input position of the block's first pixel, then stepped along */
        int64_t i2 = job->first_pixel % g->in[2];
        int64_t i1 = job->first_pixel / g->in[2] % g->in[1];
        int64_t i0 = job->first_pixel / (g->in[2] * g->in[1]);
        for (p = 0; p < job->pixels; p++) {
          const int64_t o0 = i0 * g->stride[0] + k0 * g->dilation[0] - g->pad[0];
          const int64_t o1 = i1 * g->stride[1] + k1 * g->dilation[1] - g->pad[1];
          const int64_t o2 = i2 * g->stride[2] + k2 * g->dilation[2] - g->pad[2];
          if (o0 >= 0 && o0 < g->out[0] && o1 >= 0 && o1 < g->out[1] && o2 >= 0 && o2 < g->out[2])
            plane[(o0 * g->out[1] + o1) * g->out[2] + o2] += row[p];
          if (++i2 == g->in[2]) {
            i2 = 0;
            if (++i1 == g->in[1]) {
              i1 = 0;
              i0++;
            }
          }
        }
      }
}

/* x [batch, group * cin_g, in], w [group * cin_g, cout_g, kernel], bias [group * cout_g]
 * or NULL, y [batch, group * cout_g, out]. Input pixels go in blocks of block_pixels
 * (a function of the shape): `scratch` holds the block's columns (cout_g * kernel
 * volume * block_pixels floats, cols_bytes rounded to 64) then aotc_sgemm's scratch. */
AOTC_FN void aotc_conv_transpose(aotc_pool *pool, const aotc_convt_geom *g, const float *x,
                                 const float *w, const float *bias, float *y, int64_t block_pixels,
                                 unsigned char *scratch, size_t cols_bytes) {
  const int64_t in_vol = g->in[0] * g->in[1] * g->in[2];
  const int64_t out_vol = g->out[0] * g->out[1] * g->out[2];
  const int64_t rows = g->cout_g * g->kernel[0] * g->kernel[1] * g->kernel[2];
  float *cols = (float *)(void *)scratch;
  int64_t n, grp, first;
  for (n = 0; n < g->batch; n++) {
    for (grp = 0; grp < g->group; grp++) {
      aotc_convt_job_ job;
      const float *xg = x + (n * g->group + grp) * g->cin_g * in_vol;
      const float *wg = w + grp * g->cin_g * rows;
      job.g = g;
      job.cols = cols;
      job.bias = bias;
      job.first_channel = grp * g->cout_g;
      job.y = y + (n * g->group + grp) * g->cout_g * out_vol;
      for (first = 0; first < in_vol; first += block_pixels) {
        const int64_t pixels = AOTC_MIN(block_pixels, in_vol - first);
        aotc_sgemm(pool, rows, pixels, g->cin_g, wg, rows, 1, xg + first, in_vol, 0, cols, pixels, NULL,
                   NULL, scratch + cols_bytes);
        job.first_pixel = first;
        job.pixels = pixels;
        aotc_parallel_for(pool, g->cout_g, aotc_convt_col2im_, &job);
      }
    }
  }
}

/* No input pixels or channels: every output is its channel's bias (or 0). */
AOTC_FN void aotc_conv_transpose_fill(const aotc_convt_geom *g, const float *bias, float *y) {
  const int64_t out_vol = g->out[0] * g->out[1] * g->out[2];
  const int64_t channels = g->group * g->cout_g;
  int64_t i, p;
  for (i = 0; i < g->batch * channels; i++)
    for (p = 0; p < out_vol; p++) y[i * out_vol + p] = bias ? bias[i % channels] : 0.0f;
}

#endif
