/* fixture: bs may import mpath */

#include "mp.h"
