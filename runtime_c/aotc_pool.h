#ifndef AOTC_POOL_H_
#define AOTC_POOL_H_
#include "aotc_base.h"
#endif
