// SPDX-License-Identifier: MIT
/*
 * Splitting of READ/WRITE for back ends that cannot take a whole host command (iSER paths
 * through libiscsi 1.19: 256 KiB per command): the iovec slicer gives each part exactly its
 * bytes, across entry boundaries, and refuses a range the iovec does not hold.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "mp_priv.h"

static uint8_t buf[4096];

Test(mp_iov_slice, parts_cover_exactly_their_range)
{
	struct iovec iov[3] = {
		{ buf, 1000 }, { buf + 1000, 24 }, { buf + 1024, 3072 },
	};
	struct iovec out[3];
	uint64_t total = 0;

	/* Inside the first entry. */
	cr_assert_eq(mp_iov_slice(iov, 3, 100, 200, out), 1);
	cr_assert_eq(out[0].iov_base, buf + 100);
	cr_assert_eq(out[0].iov_len, 200);
	/* Across all three. */
	cr_assert_eq(mp_iov_slice(iov, 3, 512, 1024, NULL), 3);
	cr_assert_eq(mp_iov_slice(iov, 3, 512, 1024, out), 3);
	cr_assert_eq(out[0].iov_base, buf + 512);
	cr_assert_eq(out[0].iov_len, 488);
	cr_assert_eq(out[1].iov_base, buf + 1000);
	cr_assert_eq(out[1].iov_len, 24);
	cr_assert_eq(out[2].iov_base, buf + 1024);
	cr_assert_eq(out[2].iov_len, 512);
	/* Consecutive parts of 512 bytes tile the buffer, each exactly 512 bytes long. */
	for (uint64_t off = 0; off < sizeof(buf); off += 512) {
		int n = mp_iov_slice(iov, 3, off, 512, out);
		uint64_t len = 0;

		cr_assert_gt(n, 0);
		for (int i = 0; i < n; i++)
			len += out[i].iov_len;
		cr_assert_eq(len, 512, "part at %llu", (unsigned long long)off);
		cr_assert_eq(out[0].iov_base, buf + off);
		total += len;
	}
	cr_assert_eq(total, sizeof(buf));
}

Test(mp_iov_slice, a_range_beyond_the_iovec_is_refused)
{
	struct iovec iov[2] = { { buf, 512 }, { buf + 512, 512 } };
	struct iovec out[2];

	cr_assert_eq(mp_iov_slice(iov, 2, 512, 1024, out), -EINVAL);
	cr_assert_eq(mp_iov_slice(iov, 2, 2048, 512, out), -EINVAL);
	/* An iovec longer than the I/O (allowed by mp_io) gives a part of the I/O's length. */
	cr_assert_eq(mp_iov_slice(iov, 2, 0, 512, out), 1);
	cr_assert_eq(out[0].iov_len, 512);
}
