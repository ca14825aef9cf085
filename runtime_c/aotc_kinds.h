/* aotc runtime: values of any floating type (or bool) through one run-time kind.
 *
 * Kernels for the less common operators load every element as a double, compute in
 * double and round to the element type where the ONNX reference does; one kernel then
 * serves float, double, float16 and bfloat16. */
#ifndef AOTC_KINDS_H_
#define AOTC_KINDS_H_

#include "aotc_base.h"
#include "aotc_half.h"

/* Element kinds of the floating types (and bool, for masks). */
#define AOTC_KIND_F32 0
#define AOTC_KIND_F64 1
#define AOTC_KIND_F16 2
#define AOTC_KIND_BF16 3
#define AOTC_KIND_BOOL 4

AOTC_FN double aotc_kind_load(const void *p, int64_t i, int kind) {
  switch (kind) {
    case AOTC_KIND_F32: return ((const float *)p)[i];
    case AOTC_KIND_F64: return ((const double *)p)[i];
    case AOTC_KIND_F16: return aotc_f16_to_f32(((const uint16_t *)p)[i]);
    case AOTC_KIND_BF16: return aotc_bf16_to_f32(((const uint16_t *)p)[i]);
    default: return ((const bool *)p)[i] ? 1.0 : 0.0;
  }
}

/* x, already representable in the kind (see aotc_kind_round), stored. */
AOTC_FN void aotc_kind_store(void *p, int64_t i, int kind, double x) {
  switch (kind) {
    case AOTC_KIND_F32: ((float *)p)[i] = (float)x; break;
    case AOTC_KIND_F64: ((double *)p)[i] = x; break;
    case AOTC_KIND_F16: ((uint16_t *)p)[i] = aotc_f32_to_f16((float)x); break;
    case AOTC_KIND_BF16: ((uint16_t *)p)[i] = aotc_f32_to_bf16((float)x); break;
    default: ((bool *)p)[i] = x != 0.0; break;
  }
}

/* x rounded to the precision of the kind. */
AOTC_FN double aotc_kind_round(double x, int kind) {
  switch (kind) {
    case AOTC_KIND_F32: return (float)x;
    case AOTC_KIND_F16: return aotc_f16_to_f32(aotc_f32_to_f16((float)x));
    case AOTC_KIND_BF16: return aotc_bf16_to_f32(aotc_f32_to_bf16((float)x));
    default: return x;
  }
}

#endif
