// SPDX-License-Identifier: MIT
/* The latency buckets behind /metrics: a command lands in the bucket whose bound it does not
 * exceed, exactly at the edges, or the dashboard's percentiles are off by a bucket. */
#include <criterion/criterion.h>

#include "../../../lib/gw_hist.c"

/* The obvious linear search, to compare the clz arithmetic against. */
static unsigned int slow_bucket(uint64_t ns)
{
	unsigned int i;

	for (i = 0; i < GW_HIST_BUCKETS; i++)
		if (ns <= gw_hist_bound_ns(i))
			return i;
	return GW_HIST_BUCKETS;
}

Test(hist, bounds_are_powers_of_two_microseconds)
{
	cr_expect_eq(gw_hist_bound_ns(0), 8000u);
	cr_expect_eq(gw_hist_bound_ns(1), 16000u);
	cr_expect_eq(gw_hist_bound_ns(GW_HIST_BUCKETS - 1), 16777216000ull);
}

Test(hist, edges)
{
	unsigned int i;

	cr_expect_eq(gw_hist_bucket(0), 0u);
	cr_expect_eq(gw_hist_bucket(1), 0u);
	cr_expect_eq(gw_hist_bucket(8000), 0u);
	cr_expect_eq(gw_hist_bucket(8001), 1u);
	for (i = 0; i < GW_HIST_BUCKETS; i++) {
		uint64_t b = gw_hist_bound_ns(i);

		cr_expect_eq(gw_hist_bucket(b), i, "at bound %u", i);
		cr_expect_eq(gw_hist_bucket(b + 1), i + 1, "just above bound %u", i);
		if (i)
			cr_expect_eq(gw_hist_bucket(b - 1), i, "just below bound %u", i);
	}
	cr_expect_eq(gw_hist_bucket(UINT64_MAX), (unsigned int)GW_HIST_BUCKETS);
	cr_expect_eq(gw_hist_bucket(3600ull * 1000000000ull), (unsigned int)GW_HIST_BUCKETS);
}

Test(hist, matches_linear_search)
{
	uint64_t x = 88172645463325252ull;
	unsigned int n;

	for (n = 0; n < 200000; n++) {
		uint64_t ns;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		ns = x >> (x & 63);	/* every magnitude */
		cr_assert_eq(gw_hist_bucket(ns), slow_bucket(ns), "ns %llu",
			     (unsigned long long)ns);
	}
}

Test(hist, add_counts_and_sums)
{
	struct gw_hist h = { { 0 }, 0 };

	gw_hist_add(&h, 5000);
	gw_hist_add(&h, 9000);
	gw_hist_add(&h, 9000);
	gw_hist_add(&h, 100ull * 1000000000ull);
	cr_expect_eq(h.count[0], 1u);
	cr_expect_eq(h.count[1], 2u);
	cr_expect_eq(h.count[GW_HIST_BUCKETS], 1u);
	cr_expect_eq(gw_hist_total(&h), 4u);
	cr_expect_eq(h.sum_ns, 5000u + 18000u + 100000000000ull);
}
