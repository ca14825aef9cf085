#ifndef AOTC_REDUCE_H_
#define AOTC_REDUCE_H_
#include "aotc_base.h"
#endif
