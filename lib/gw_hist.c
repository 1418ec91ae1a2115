// SPDX-License-Identifier: MIT
/* Log2 latency buckets (gw_hist.h). */
#include "gw_hist.h"

unsigned int gw_hist_bucket(uint64_t ns)
{
	/* ns <= 1000 * 2^k exactly when ceil(ns / 1000) <= 2^k, as 2^k is a whole number. */
	uint64_t us = ns / 1000 + (ns % 1000 != 0);
	unsigned int k;

	if (us <= 1)
		return 0;
	k = 64 - (unsigned int)__builtin_clzll(us - 1);	/* smallest k with us <= 2^k */
	if (k <= GW_HIST_MIN_SHIFT)
		return 0;
	k -= GW_HIST_MIN_SHIFT;
	return k < GW_HIST_BUCKETS ? k : GW_HIST_BUCKETS;
}

uint64_t gw_hist_total(const struct gw_hist *h)
{
	uint64_t n = 0;
	unsigned int i;

	for (i = 0; i <= GW_HIST_BUCKETS; i++)
		n += h->count[i];
	return n;
}
