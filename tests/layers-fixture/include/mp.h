/* fixture */

#include "gw_x.h"
