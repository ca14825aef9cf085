#ifndef AOTC_NORM_H_
#define AOTC_NORM_H_
#include "aotc_base.h"
#endif
