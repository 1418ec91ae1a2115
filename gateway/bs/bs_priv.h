/* SPDX-License-Identifier: MIT */
/*
 * Private to gateway/bs/: the ops tables of each backstore kind and helpers they share.
 */
#ifndef BS_PRIV_H
#define BS_PRIV_H

#include <sys/uio.h>

#include "bs.h"

extern const struct bs_ops bs_file_ops;
extern const struct bs_ops bs_ram_ops;
extern const struct bs_ops bs_null_ops;
extern const struct bs_ops bs_remote_ops;

/* Copies between a flat buffer and an iovec starting `skip` bytes into the iovec. Return the
 * bytes copied (less than len only when the iovec is shorter). */
size_t bs_iov_to_buf(const struct iovec *iov, int iovcnt, size_t skip, void *buf, size_t len);
size_t bs_buf_to_iov(const struct iovec *iov, int iovcnt, size_t skip, const void *buf,
		     size_t len);
/* Zeroes len bytes of the iovec from `skip`. */
size_t bs_iov_zero(const struct iovec *iov, int iovcnt, size_t skip, size_t len);

#endif
