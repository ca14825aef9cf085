/* Runs the example model from plain C: link the generated tiny_cnn.c, call one function.
 *
 * The input comes from the formula in examples/example_input.py, so Python and C run
 * the model on the same bits. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "tiny_cnn.h"

#define INPUT_SIZE (1 * 3 * 32 * 32)
#define OUTPUT_SIZE (1 * 10)

/* The workspace: any 64-byte aligned memory of TINY_CNN_WORKSPACE_BYTES; here static,
 * over-allocated so it can be aligned by hand (C99 has no alignas). */
static unsigned char workspace_storage[TINY_CNN_WORKSPACE_BYTES + TINY_CNN_WORKSPACE_ALIGN];
static float input[INPUT_SIZE];
static float output[OUTPUT_SIZE];

static int64_t element_count(const tiny_cnn_tensor_info *info) {
  int64_t n = 1;
  int32_t i;
  for (i = 0; i < info->rank; i++) n *= info->shape[i];
  return n;
}

int main(void) {
  uintptr_t address = (uintptr_t)workspace_storage;
  void *workspace = workspace_storage + (TINY_CNN_WORKSPACE_ALIGN - address % TINY_CNN_WORKSPACE_ALIGN) %
                                        TINY_CNN_WORKSPACE_ALIGN;
  const char *threads = getenv("AOTC_NUM_THREADS");
  int i, best = 0, code;

  /* The tensor-info tables describe the model; check they match the sizes used here. */
  if (element_count(&tiny_cnn_inputs[0]) != INPUT_SIZE || element_count(&tiny_cnn_outputs[0]) != OUTPUT_SIZE) {
    fprintf(stderr, "the compiled model does not have the expected input and output sizes\n");
    return 1;
  }
  for (i = 0; i < INPUT_SIZE; i++) input[i] = (float)((i * 37 + 11) % 101) / 50.0f - 1.0f;

  tiny_cnn_set_threads(threads ? atoi(threads) : 1);
  code = tiny_cnn_run(workspace, input, output);
  if (code != 0) {
    fprintf(stderr, "tiny_cnn_run failed with code %d\n", code);
    return 1;
  }

  printf("%s [1, 10], workspace %u bytes:\n", tiny_cnn_outputs[0].name, (unsigned)TINY_CNN_WORKSPACE_BYTES);
  for (i = 0; i < OUTPUT_SIZE; i++) {
    printf("%s[%d] = %.6g\n", tiny_cnn_outputs[0].name, i, (double)output[i]);
    if (output[i] > output[best]) best = i;
  }
  printf("class %d\n", best);
  return 0;
}
