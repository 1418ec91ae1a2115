/* SPDX-License-Identifier: MIT */
/*
 * Copies between an I/O vector and a flat buffer, the one loop the backstores and the SCSI
 * core share. Each starts `skip` bytes into the vector, moves at most len bytes and returns
 * how many it moved: fewer when the vector ends first.
 */
#ifndef GW_IOV_H
#define GW_IOV_H

#include <stddef.h>
#include <sys/uio.h>

size_t gw_iov_to_buf(const struct iovec *iov, int iovcnt, size_t skip, void *buf, size_t len);
size_t gw_buf_to_iov(const struct iovec *iov, int iovcnt, size_t skip, const void *buf,
		     size_t len);
size_t gw_iov_zero(const struct iovec *iov, int iovcnt, size_t skip, size_t len);

#endif
