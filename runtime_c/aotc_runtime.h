/* aotc runtime: everything a generated model includes. */
#ifndef AOTC_RUNTIME_H_
#define AOTC_RUNTIME_H_

#include "aotc_base.h"
#include "aotc_half.h"
#include "aotc_cast.h"
#include "aotc_threads.h"
#include "aotc_elementwise.h"
#include "aotc_math.h"
#include "aotc_layout.h"
#include "aotc_index.h"
#include "aotc_gemm.h"
#include "aotc_conv.h"
#include "aotc_pool.h"
#include "aotc_norm.h"
#include "aotc_reduce.h"
#include "aotc_argreduce.h"
#include "aotc_scan.h"
#include "aotc_sort.h"
#include "aotc_linalg.h"
#include "aotc_attention.h"
#include "aotc_losses.h"
#include "aotc_resize.h"
#include "aotc_sampling.h"
#include "aotc_convtranspose.h"
#include "aotc_unpool.h"
#include "aotc_quant.h"
#include "aotc_signal.h"
#include "aotc_rnn.h"
#include "aotc_nms.h"
#include "aotc_random.h"

#endif
