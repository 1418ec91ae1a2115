/* fixture: a public header reaching a private one */

#include "scsi_priv.h"
