/* fixture */

#include "mp.h"
