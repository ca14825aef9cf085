#ifndef AOTC_LAYOUT_H_
#define AOTC_LAYOUT_H_
#include "aotc_base.h"
#endif
