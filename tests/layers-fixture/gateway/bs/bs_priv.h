/* fixture */

#include "bs.h"
