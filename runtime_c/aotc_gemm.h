#ifndef AOTC_GEMM_H_
#define AOTC_GEMM_H_
#include "aotc_base.h"
#endif
