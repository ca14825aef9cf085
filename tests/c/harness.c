/* Runs any aotc-generated model on deterministic inputs and prints a checksum of each
 * output: the C side of the sanitizer tests. Build with
 *   -DMODEL_HEADER='"name.h"' -DMODEL=name -DMODEL_UPPER=NAME
 * next to the model's .c file. */
#define _POSIX_C_SOURCE 200112L   /* posix_memalign */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include MODEL_HEADER

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define SYM(suffix) CAT(MODEL, suffix)
#define MACRO(suffix) CAT(MODEL_UPPER, suffix)

static size_t element_size(int32_t onnx_type) {
  switch (onnx_type) {
    case 1: case 6: case 12: return 4;     /* float, int32, uint32 */
    case 7: case 11: case 13: return 8;    /* int64, double, uint64 */
    case 5: case 4: case 10: case 16: return 2;
    default: return 1;                     /* int8, uint8, bool */
  }
}

static size_t numel(const SYM(_tensor_info) *t) {
  size_t n = 1;
  int32_t i;
  for (i = 0; i < t->rank; i++) n *= (size_t)t->shape[i];
  return n;
}

static void fill(void *data, const SYM(_tensor_info) *t) {
  size_t i, n = numel(t);
  for (i = 0; i < n; i++) {
    double v = (double)((i * 7919u) % 211u) / 53.0 - 1.9;
    switch (t->onnx_type) {
      case 1: ((float *)data)[i] = (float)v; break;
      case 11: ((double *)data)[i] = v; break;
      case 7: ((int64_t *)data)[i] = 0; break;     /* valid as an index anywhere */
      case 6: ((int32_t *)data)[i] = 0; break;
      case 9: ((unsigned char *)data)[i] = (unsigned char)(i % 3 == 0); break;
      default: memset((char *)data + i * element_size(t->onnx_type), 0, element_size(t->onnx_type));
    }
  }
}

int main(void) {
  const void *inputs[MACRO(_NUM_INPUTS) + 1];
  void *outputs[MACRO(_NUM_OUTPUTS) + 1];
  void *workspace = NULL;
  int i, threads, rc;
  for (i = 0; i < MACRO(_NUM_INPUTS); i++) {
    const SYM(_tensor_info) *t = &SYM(_inputs)[i];
    void *p = malloc(numel(t) * element_size(t->onnx_type) + 1);
    fill(p, t);
    inputs[i] = p;
  }
  for (i = 0; i < MACRO(_NUM_OUTPUTS); i++) {
    const SYM(_tensor_info) *t = &SYM(_outputs)[i];
    outputs[i] = malloc(numel(t) * element_size(t->onnx_type) + 1);
  }
  if (posix_memalign(&workspace, 64, SYM(_workspace_bytes)() + 64) != 0) return 3;
  for (threads = 1; threads <= 2; threads++) {
    SYM(_set_threads)(threads);
    rc = SYM(_run_array)(workspace, inputs, outputs);
    if (rc != 0) {
      printf("run failed: %d\n", rc);
      return 1;
    }
  }
  for (i = 0; i < MACRO(_NUM_OUTPUTS); i++) {
    const SYM(_tensor_info) *t = &SYM(_outputs)[i];
    size_t k, bytes = numel(t) * element_size(t->onnx_type);
    uint32_t sum = 0;
    for (k = 0; k < bytes; k++) sum = sum * 31u + ((unsigned char *)outputs[i])[k];
    printf("%s %08x\n", t->name, (unsigned)sum);
    free(outputs[i]);
  }
  for (i = 0; i < MACRO(_NUM_INPUTS); i++) free((void *)inputs[i]);
  SYM(_set_threads)(1);
  free(workspace);
  return 0;
}
