/* Runs any aotc-generated model and reports its outputs: the C side of the sanitizer
 * and cross-build tests. Build with
 *   -DMODEL_HEADER='"name.h"' -DMODEL=name -DMODEL_UPPER=NAME
 * next to the model's .c file.
 *   harness                  deterministic inputs; prints a checksum of each output
 *   harness IN OUT THREADS   inputs read from IN (raw, one after another, in input
 *                            order), outputs written to OUT the same way */
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

static size_t nbytes(const SYM(_tensor_info) *t) { return numel(t) * element_size(t->onnx_type); }

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

/* Reads (or writes) the data of `count` tensors from (to) the file at path, raw, one
 * after another; returns whether every byte went through. */
static int transfer(const char *path, int writing, const SYM(_tensor_info) *tensors, int count, void **data) {
  FILE *f = fopen(path, writing ? "wb" : "rb");
  int i, ok = f != NULL;
  for (i = 0; ok && i < count; i++) {
    size_t bytes = nbytes(&tensors[i]);
    ok = (writing ? fwrite(data[i], 1, bytes, f) : fread(data[i], 1, bytes, f)) == bytes;
  }
  if (f && fclose(f) != 0 && writing) ok = 0;
  return ok;
}

static void print_checksums(void **outputs) {
  int i;
  for (i = 0; i < MACRO(_NUM_OUTPUTS); i++) {
    const SYM(_tensor_info) *t = &SYM(_outputs)[i];
    size_t k, bytes = nbytes(t);
    uint32_t sum = 0;
    for (k = 0; k < bytes; k++) sum = sum * 31u + ((unsigned char *)outputs[i])[k];
    printf("%s %08x\n", t->name, (unsigned)sum);
  }
}

/* Bytes the last run wrote of output i: fewer than its buffer's when its shape depends
 * on the data. */
static size_t written_bytes(const void *workspace, int i) {
  const SYM(_tensor_info) *t = &SYM(_outputs)[i];
  int64_t *shape = malloc(sizeof(int64_t) * (size_t)(t->rank + 1));
  size_t n = element_size(t->onnx_type);
  int32_t k;
  if (!shape || SYM(_output_shape)(workspace, i, shape) != 0) n = 0;
  for (k = 0; n && k < t->rank; k++) n *= (size_t)shape[k];
  free(shape);
  return n;
}

/* Runs again reading a heap copy of the weights (so the sanitizers also check every read
 * of them) and checks that outputs which repeated between the first two runs (all but
 * unseeded random ones) keep their bytes; a misaligned copy is refused. */
static int same_from_a_weights_copy(void *workspace, void **inputs, void **first, void **outputs) {
  void *copy = NULL, *again[MACRO(_NUM_OUTPUTS) + 1];
  int i, same = 1;
  if (posix_memalign(&copy, 64, MACRO(_WEIGHTS_BYTES) + 64) != 0) return 0;
  memcpy(copy, SYM(_weights_data)(), MACRO(_WEIGHTS_BYTES));
  /* misaligned: 1, AOTC_ERR_ALIGNMENT (the model's header documents the codes by value) */
  if (SYM(_use_weights)((char *)copy + 4) != 1 || SYM(_use_weights)(copy) != 0) same = 0;
  for (i = 0; i < MACRO(_NUM_OUTPUTS); i++) again[i] = malloc(nbytes(&SYM(_outputs)[i]) + 1);
  if (same && SYM(_run_array)(workspace, (const void **)inputs, again) != 0) same = 0;
  for (i = 0; i < MACRO(_NUM_OUTPUTS); i++) {
    size_t bytes = written_bytes(workspace, i);
    if (same && memcmp(first[i], outputs[i], bytes) == 0 && memcmp(again[i], outputs[i], bytes) != 0) {
      printf("%s differs when the weights are read from a copy\n", SYM(_outputs)[i].name);
      same = 0;
    }
    free(again[i]);
  }
  SYM(_use_weights)(NULL);
  free(copy);
  return same;
}

int main(int argc, char **argv) {
  void *inputs[MACRO(_NUM_INPUTS) + 1];
  void *outputs[MACRO(_NUM_OUTPUTS) + 1], *first[MACRO(_NUM_OUTPUTS) + 1];
  void *workspace = NULL;
  int i, threads, rc, from_files = argc == 4;
  for (i = 0; i < MACRO(_NUM_INPUTS); i++) {
    const SYM(_tensor_info) *t = &SYM(_inputs)[i];
    inputs[i] = malloc(nbytes(t) + 1);
    if (!from_files) fill(inputs[i], t);
  }
  for (i = 0; i < MACRO(_NUM_OUTPUTS); i++) {
    outputs[i] = malloc(nbytes(&SYM(_outputs)[i]) + 1);
    first[i] = malloc(nbytes(&SYM(_outputs)[i]) + 1);
  }
  if (posix_memalign(&workspace, 64, SYM(_workspace_bytes)() + 64) != 0) return 3;
  if (from_files && !transfer(argv[1], 0, SYM(_inputs), MACRO(_NUM_INPUTS), inputs)) {
    printf("cannot read the inputs from %s\n", argv[1]);
    return 2;
  }
  /* without files: one and two threads, so the sanitizers see both */
  for (threads = from_files ? atoi(argv[3]) : 1; threads <= (from_files ? atoi(argv[3]) : 2); threads++) {
    SYM(_set_threads)(threads);
    rc = SYM(_run_array)(workspace, (const void **)inputs, outputs);
    if (rc != 0) {
      printf("run failed: %d\n", rc);
      return 1;
    }
    for (i = 0; i < MACRO(_NUM_OUTPUTS) && threads == 1; i++)
      memcpy(first[i], outputs[i], nbytes(&SYM(_outputs)[i]));
  }
  if (from_files) {
    if (!transfer(argv[2], 1, SYM(_outputs), MACRO(_NUM_OUTPUTS), outputs)) {
      printf("cannot write the outputs to %s\n", argv[2]);
      return 2;
    }
  } else {
    print_checksums(outputs);
    if (!same_from_a_weights_copy(workspace, inputs, first, outputs)) return 1;
  }
  for (i = 0; i < MACRO(_NUM_OUTPUTS); i++) {
    free(outputs[i]);
    free(first[i]);
  }
  for (i = 0; i < MACRO(_NUM_INPUTS); i++) free(inputs[i]);
  SYM(_set_threads)(1);
  free(workspace);
  return 0;
}
