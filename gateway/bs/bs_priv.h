/* SPDX-License-Identifier: MIT */
/*
 * Private to gateway/bs/: the ops tables of each backstore kind and helpers they share.
 */
#ifndef BS_PRIV_H
#define BS_PRIV_H

#include <sys/uio.h>

#include "bs.h"
#include "gw_iov.h"

extern const struct bs_ops bs_file_ops;
extern const struct bs_ops bs_ram_ops;
extern const struct bs_ops bs_null_ops;
extern const struct bs_ops bs_remote_ops;

#endif
