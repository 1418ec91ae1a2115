/* fixture: bs may not import scsi */

#include "scsi.h"
