// SPDX-License-Identifier: MIT
/*
 * I/O vector <-> flat buffer copies. One walker finds each segment's part of the window
 * [skip, skip + len) and hands it to the copy, the reverse copy or the zeroing; the slicer
 * hands the same parts back as a vector.
 */
#include <stdint.h>
#include <string.h>

#include "gw_iov.h"

enum gw_iov_op {
	GW_IOV_TO_BUF,
	GW_IOV_FROM_BUF,
	GW_IOV_ZERO,
};

static size_t gw_iov_walk(const struct iovec *iov, int iovcnt, size_t skip, uint8_t *buf,
			  size_t len, enum gw_iov_op op)
{
	size_t done = 0;

	for (int i = 0; i < iovcnt && done < len; i++) {
		size_t n = iov[i].iov_len;
		uint8_t *seg;

		if (skip >= n) {
			skip -= n;
			continue;
		}
		n -= skip;
		if (n > len - done)
			n = len - done;
		seg = (uint8_t *)iov[i].iov_base + skip;
		switch (op) {
		case GW_IOV_TO_BUF:
			memcpy(buf + done, seg, n);
			break;
		case GW_IOV_FROM_BUF:
			memcpy(seg, buf + done, n);
			break;
		case GW_IOV_ZERO:
			memset(seg, 0, n);
			break;
		}
		done += n;
		skip = 0;
	}
	return done;
}

size_t gw_iov_to_buf(const struct iovec *iov, int iovcnt, size_t skip, void *buf, size_t len)
{
	return gw_iov_walk(iov, iovcnt, skip, buf, len, GW_IOV_TO_BUF);
}

size_t gw_buf_to_iov(const struct iovec *iov, int iovcnt, size_t skip, const void *buf,
		     size_t len)
{
	/* The walker writes only to the vector for this direction. */
	return gw_iov_walk(iov, iovcnt, skip, (uint8_t *)(uintptr_t)buf, len, GW_IOV_FROM_BUF);
}

size_t gw_iov_zero(const struct iovec *iov, int iovcnt, size_t skip, size_t len)
{
	return gw_iov_walk(iov, iovcnt, skip, NULL, len, GW_IOV_ZERO);
}

int gw_iov_slice(const struct iovec *iov, int iovcnt, uint64_t skip, uint64_t len,
		 struct iovec *out, int max, uint64_t *covered)
{
	uint64_t left = len;
	int n = 0;

	for (int i = 0; i < iovcnt && n < max && left; i++) {
		uint64_t l = iov[i].iov_len;

		if (skip >= l) {
			skip -= l;
			continue;
		}
		l -= skip;
		if (l > left)
			l = left;
		if (out) {
			out[n].iov_base = (uint8_t *)iov[i].iov_base + skip;
			out[n].iov_len = (size_t)l;
		}
		n++;
		left -= l;
		skip = 0;
	}
	if (covered)
		*covered = len - left;
	return n;
}
