/* aotc runtime: the transformer operators of the ONNX default domain (Attention,
 * LinearAttention, RotaryEmbedding, CausalConvWithState) and the normalizations they
 * and other models use beyond aotc_norm.h (RMS-, Instance-, Group-, Lp-, MeanVariance-
 * Normalization, LRN, BatchNormalization in training) and Dropout. */
#ifndef AOTC_TRANSFORMER_H_
#define AOTC_TRANSFORMER_H_

#include "aotc_onnx_attention.h"
#include "aotc_norm_sets.h"
#include "aotc_sequence_ops.h"
#include "aotc_dropout.h"

#endif
