/* fixture: mpath may not import bs, and this makes a cycle */

#include "bs.h"
