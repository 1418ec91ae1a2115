/* fixture: climbs out of its folder */

#include "../bs/bs_priv.h"
