/* SPDX-License-Identifier: MIT */
/*
 * Copies between an I/O vector and a flat buffer, the one loop the backstores and the SCSI
 * core share, and the slice of a vector covering a byte range. Each starts `skip` bytes into
 * the vector and covers at most len bytes: fewer when the vector ends first.
 */
#ifndef GW_IOV_H
#define GW_IOV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

size_t gw_iov_to_buf(const struct iovec *iov, int iovcnt, size_t skip, void *buf, size_t len);
size_t gw_buf_to_iov(const struct iovec *iov, int iovcnt, size_t skip, const void *buf,
		     size_t len);
size_t gw_iov_zero(const struct iovec *iov, int iovcnt, size_t skip, size_t len);
/*
 * The entries of iov covering bytes [skip, skip + len), at most max of them, written to out
 * (when not NULL; out never aliases iov). Returns how many; *covered (when not NULL) gets the
 * bytes they hold: less than len when the vector or max ran out first.
 */
int gw_iov_slice(const struct iovec *iov, int iovcnt, uint64_t skip, uint64_t len,
		 struct iovec *out, int max, uint64_t *covered);

#endif
