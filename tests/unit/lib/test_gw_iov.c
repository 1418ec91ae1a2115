// SPDX-License-Identifier: MIT
/* The iovec <-> flat buffer copies every backstore and the SCSI core move data with: a read's
 * bytes land where the initiator's buffer segments are, in order, whatever the split. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "gw_iov.h"

/* Three segments of 3, 0 and 5 bytes: 8 in all, with an empty one in the middle. */
static uint8_t seg_a[3], seg_b[1], seg_c[5];

static void split_iov(struct iovec iov[3])
{
	memset(seg_a, '.', sizeof(seg_a));
	memset(seg_b, '.', sizeof(seg_b));
	memset(seg_c, '.', sizeof(seg_c));
	iov[0] = (struct iovec){ .iov_base = seg_a, .iov_len = sizeof(seg_a) };
	iov[1] = (struct iovec){ .iov_base = seg_b, .iov_len = 0 };
	iov[2] = (struct iovec){ .iov_base = seg_c, .iov_len = sizeof(seg_c) };
}

Test(iov, buf_to_iov_fills_the_segments_in_order)
{
	struct iovec iov[3];

	split_iov(iov);
	cr_assert_eq(gw_buf_to_iov(iov, 3, 0, "ABCDEFGH", 8), 8);
	cr_expect_eq(memcmp(seg_a, "ABC", 3), 0);
	cr_expect_eq(seg_b[0], '.', "an empty segment is not written");
	cr_expect_eq(memcmp(seg_c, "DEFGH", 5), 0);
}

Test(iov, skip_starts_inside_a_later_segment)
{
	struct iovec iov[3];

	split_iov(iov);
	/* skip 4: past segment a (3 bytes) and the empty one, one byte into segment c */
	cr_assert_eq(gw_buf_to_iov(iov, 3, 4, "xy", 2), 2);
	cr_expect_eq(memcmp(seg_a, "...", 3), 0);
	cr_expect_eq(memcmp(seg_c, ".xy..", 5), 0);
}

Test(iov, copy_across_a_segment_boundary_reads_back)
{
	struct iovec iov[3];
	char out[8];

	split_iov(iov);
	gw_buf_to_iov(iov, 3, 0, "ABCDEFGH", 8);
	memset(out, 0, sizeof(out));
	cr_assert_eq(gw_iov_to_buf(iov, 3, 2, out, 4), 4);
	cr_expect_eq(memcmp(out, "CDEF", 4), 0);
}

Test(iov, short_vector_moves_what_it_holds)
{
	struct iovec iov[3];
	char out[16];

	split_iov(iov);
	gw_buf_to_iov(iov, 3, 0, "ABCDEFGH", 8);
	cr_expect_eq(gw_iov_to_buf(iov, 3, 6, out, sizeof(out)), 2);
	cr_expect_eq(memcmp(out, "GH", 2), 0);
	cr_expect_eq(gw_iov_to_buf(iov, 3, 8, out, sizeof(out)), 0, "skip past the end");
	cr_expect_eq(gw_buf_to_iov(iov, 3, 20, "z", 1), 0);
	cr_expect_eq(gw_iov_to_buf(NULL, 0, 0, out, sizeof(out)), 0, "no vector");
}

Test(iov, zero_clears_only_the_window)
{
	struct iovec iov[3];

	split_iov(iov);
	gw_buf_to_iov(iov, 3, 0, "ABCDEFGH", 8);
	cr_assert_eq(gw_iov_zero(iov, 3, 1, 5), 5);
	cr_expect_eq(memcmp(seg_a, "A\0\0", 3), 0);
	cr_expect_eq(memcmp(seg_c, "\0\0\0GH", 5), 0);
}

Test(iov, slice_covers_a_range_across_segments)
{
	struct iovec iov[3], out[3];
	uint64_t covered;

	split_iov(iov);
	/* bytes 2..6: the last of a, none of the empty one, the first four of c */
	cr_assert_eq(gw_iov_slice(iov, 3, 2, 5, out, 3, &covered), 2);
	cr_expect_eq(covered, 5);
	cr_expect_eq(out[0].iov_base, seg_a + 2);
	cr_expect_eq(out[0].iov_len, 1);
	cr_expect_eq(out[1].iov_base, seg_c);
	cr_expect_eq(out[1].iov_len, 4);
	cr_expect_eq(gw_iov_slice(iov, 3, 2, 5, NULL, 3, NULL), 2, "counting only");
}

Test(iov, slice_stops_at_max_entries_or_the_vector_end)
{
	struct iovec iov[3], out[3];
	uint64_t covered;

	split_iov(iov);
	cr_expect_eq(gw_iov_slice(iov, 3, 0, 8, out, 1, &covered), 1);
	cr_expect_eq(covered, 3, "one entry holds segment a only");
	cr_expect_eq(gw_iov_slice(iov, 3, 4, 100, out, 3, &covered), 1);
	cr_expect_eq(covered, 4, "the vector ends 4 bytes later");
	cr_expect_eq(gw_iov_slice(iov, 3, 8, 1, out, 3, &covered), 0);
	cr_expect_eq(covered, 0);
}
