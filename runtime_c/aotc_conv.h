#ifndef AOTC_CONV_H_
#define AOTC_CONV_H_
#include "aotc_base.h"
#endif
