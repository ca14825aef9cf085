/* aotc runtime: common definitions for every kernel header.
 *
 * The runtime is a set of headers of static functions: each generated model includes
 * them into its own translation unit, so two models (even built for different
 * targets) link into one program without symbol clashes, and a firmware build needs
 * nothing but the model's .c/.h files and this folder. C99; pthreads only in
 * aotc_threads.h and only without AOTC_NO_THREADS. */
#ifndef AOTC_BASE_H_
#define AOTC_BASE_H_

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Every runtime function: private to the including model, no warning when unused. */
#define AOTC_FN static inline

/* Functions that must be inlined (a scalar function inside a loop the compiler should
 * vectorize; a register tile) or must not be (one compiled copy per tile shape). */
#if defined(__GNUC__) || defined(__clang__)
#define AOTC_INLINE_ALWAYS static inline __attribute__((always_inline, unused))
#define AOTC_NOINLINE static __attribute__((noinline, unused))
#else
#define AOTC_INLINE_ALWAYS AOTC_FN
#define AOTC_NOINLINE AOTC_FN
#endif

/* The engine (the GEMM, convolution and attention headers) takes most of a model's C
 * compile time, seconds at -O3, so a build may compile it once apart from its models
 * (aotc/build.py keeps the object per compiler and flags): a model compiled with
 * AOTC_ENGINE_EXTERN sees only the engine's entry points, declared with AOTC_ENGINE_FN,
 * and the one file that defines AOTC_ENGINE_DEFINE compiles their bodies. Either way
 * they stay inside the shared library (hidden). Without either, the engine is static
 * like everything else. */
#if (defined(AOTC_ENGINE_EXTERN) || defined(AOTC_ENGINE_DEFINE)) && (defined(__GNUC__) || defined(__clang__))
#define AOTC_ENGINE_FN __attribute__((visibility("hidden")))
#else
#define AOTC_ENGINE_FN AOTC_FN
#endif

#if defined(__GNUC__) || defined(__clang__)
#define AOTC_RESTRICT __restrict__
#define AOTC_ALIGNED(n) __attribute__((aligned(n)))
#else
#define AOTC_RESTRICT
#define AOTC_ALIGNED(n)
#endif

#define AOTC_INF (1.0f / 0.0f)
#define AOTC_NAN (0.0f / 0.0f)

/* Return codes of <name>_run. */
#define AOTC_OK 0
#define AOTC_ERR_ALIGNMENT 1  /* the workspace is not 64-byte aligned */
#define AOTC_ERR_NULL 2       /* a required pointer is NULL */
#define AOTC_ERR_INDEX 3      /* an index input (Gather, ...) is out of range */

/* A float's bits and back, without aliasing tricks. */
AOTC_FN uint32_t aotc_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

AOTC_FN float aotc_f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Exact mode writes every NaN result as the one quiet NaN (float 0x7FC00000, double
 * 0x7FF8000000000000): x86 and Arm make NaNs of different bits. Identity otherwise. */
AOTC_FN float aotc_canon_nan_f32(float v) { return v != v ? aotc_f32_from_bits(0x7FC00000u) : v; }

AOTC_FN double aotc_canon_nan_f64(double v) {
  uint64_t u = UINT64_C(0x7FF8000000000000);
  double nan;
  memcpy(&nan, &u, sizeof nan);
  return v != v ? nan : v;
}

#ifdef AOTC_EXACT
#define AOTC_CANON_F32(v) aotc_canon_nan_f32(v)
#define AOTC_CANON_F64(v) aotc_canon_nan_f64(v)
#else
#define AOTC_CANON_F32(v) (v)
#define AOTC_CANON_F64(v) (v)
#endif

#define AOTC_MIN(a, b) ((a) < (b) ? (a) : (b))
#define AOTC_MAX(a, b) ((a) > (b) ? (a) : (b))

#endif
