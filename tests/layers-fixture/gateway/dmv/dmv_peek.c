/* fixture: another module's private header, and one that is nowhere */

#include "mp_dm.h"
#include "nowhere.h"
