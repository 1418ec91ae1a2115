/* SPDX-License-Identifier: MIT */
/*
 * Latency histograms with fixed log2 buckets, cheap enough for every command: recording is a
 * division, a count-leading-zeros and two additions. Bucket i (0 <= i < GW_HIST_BUCKETS)
 * counts latencies <= gw_hist_bound_ns(i) = 2^(i + GW_HIST_MIN_SHIFT) microseconds (and above
 * the previous bound); the last slot, index GW_HIST_BUCKETS, counts everything slower than the
 * largest bound. Counts are per bucket, not cumulative: whoever exports them (the agent's
 * Prometheus histograms) accumulates.
 */
#ifndef GW_HIST_H
#define GW_HIST_H

#include <stdint.h>

/* Bounds from 8 us (2^3) to 16.8 s (2^24 us): loopback RAM I/O to a remote path's timeout. */
#define GW_HIST_MIN_SHIFT 3
#define GW_HIST_BUCKETS 22

struct gw_hist {
	uint64_t count[GW_HIST_BUCKETS + 1];	/* the last one: above every bound */
	uint64_t sum_ns;
};

/* Upper bound of bucket i in nanoseconds (i < GW_HIST_BUCKETS). */
static inline uint64_t gw_hist_bound_ns(unsigned int i)
{
	return 1000ull << (i + GW_HIST_MIN_SHIFT);
}

/* The slot a latency falls in: the smallest i with ns <= bound(i), or GW_HIST_BUCKETS. */
unsigned int gw_hist_bucket(uint64_t ns);

static inline void gw_hist_add(struct gw_hist *h, uint64_t ns)
{
	h->count[gw_hist_bucket(ns)]++;
	h->sum_ns += ns;
}

/* Every observation so far. */
uint64_t gw_hist_total(const struct gw_hist *h);

#endif
