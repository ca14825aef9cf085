/* aotc runtime: LpPool and MaxUnpool (float32).
 *
 * LpPool: every window's (sum of |x|^p)^(1/p) over the input elements it covers
 * (padding adds nothing), windows resolved by the compiler into a 3-D geometry with
 * leading 1s. MaxUnpool: a zero output, then every input value written at the position
 * its index names in the unpooled shape, which sits at the start of every dimension of
 * the output. Indices are checked before anything is written. */
#ifndef AOTC_UNPOOL_H_
#define AOTC_UNPOOL_H_

#include "aotc_base.h"
#include "aotc_threads.h"

typedef struct {
  int64_t planes;
  int64_t in[3], out[3], kernel[3], stride[3], dilation[3], pad[3];
  int64_t p;
} aotc_lp_pool_geom;

typedef struct {
  const aotc_lp_pool_geom *g;
  const float *x;
  float *y;
} aotc_lp_pool_job_;

AOTC_FN double aotc_lp_power_(float v, int64_t p) {
  const double a = fabs((double)v);
  return p == 1 ? a : (p == 2 ? a * a : pow(a, (double)p));
}

AOTC_FN void aotc_lp_pool_plane_(void *arg, int64_t plane) {
  const aotc_lp_pool_job_ *job = (const aotc_lp_pool_job_ *)arg;
  const aotc_lp_pool_geom *g = job->g;
  const float *x = job->x + plane * g->in[0] * g->in[1] * g->in[2];
  float *y = job->y + plane * g->out[0] * g->out[1] * g->out[2];
  int64_t o[3], k[3];
  for (o[0] = 0; o[0] < g->out[0]; o[0]++)
    for (o[1] = 0; o[1] < g->out[1]; o[1]++)
      for (o[2] = 0; o[2] < g->out[2]; o[2]++) {
        double sum = 0.0;
        for (k[0] = 0; k[0] < g->kernel[0]; k[0]++) {
          const int64_t i0 = o[0] * g->stride[0] - g->pad[0] + k[0] * g->dilation[0];
          if (i0 < 0 || i0 >= g->in[0]) continue;
          for (k[1] = 0; k[1] < g->kernel[1]; k[1]++) {
            const int64_t i1 = o[1] * g->stride[1] - g->pad[1] + k[1] * g->dilation[1];
            if (i1 < 0 || i1 >= g->in[1]) continue;
            for (k[2] = 0; k[2] < g->kernel[2]; k[2]++) {
              const int64_t i2 = o[2] * g->stride[2] - g->pad[2] + k[2] * g->dilation[2];
              if (i2 >= 0 && i2 < g->in[2]) sum += aotc_lp_power_(x[(i0 * g->in[1] + i1) * g->in[2] + i2], g->p);
            }
          }
        }
        y[(o[0] * g->out[1] + o[1]) * g->out[2] + o[2]] =
            (float)(g->p == 1 ? sum : (g->p == 2 ? sqrt(sum) : pow(sum, 1.0 / (double)g->p)));
      }
}

AOTC_FN void aotc_lp_pool(aotc_pool *pool, const aotc_lp_pool_geom *g, const float *x, float *y) {
  aotc_lp_pool_job_ job;
  job.g = g;
  job.x = x;
  job.y = y;
  aotc_parallel_for(pool, g->planes, aotc_lp_pool_plane_, &job);
}

/* x and indices: count elements; an index addresses the unpooled shape `dims` (rank
 * dims, row-major, batch and channel included); out_strides are the output's strides
 * for those dims (the output is at least as large in every dim). */
AOTC_FN int aotc_max_unpool(const float *x, const int64_t *indices, float *y, int64_t count, int rank,
                            const int64_t *dims, const int64_t *out_strides, int64_t out_numel) {
  int64_t i, total = 1;
  int d;
  for (d = 0; d < rank; d++) total *= dims[d];
  for (i = 0; i < count; i++)
    if (indices[i] < 0 || indices[i] >= total) return AOTC_ERR_INDEX;
  for (i = 0; i < out_numel; i++) y[i] = 0.0f;
  for (i = 0; i < count; i++) {
    int64_t rest = indices[i], offset = 0;
    for (d = rank - 1; d >= 0; d--) {
      offset += (rest % dims[d]) * out_strides[d];
      rest /= dims[d];
    }
    y[offset] = x[i];
  }
  return AOTC_OK;
}

#endif
