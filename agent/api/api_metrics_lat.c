// SPDX-License-Identifier: MIT
/*
 * The per-LUN latency histograms of /metrics: the gateway counts commands per log2 bucket
 * (include/gw_hist.h, reported by "state" as {"counts":[...],"sum_ns":N}); Prometheus wants
 * cumulative buckets with an "le" label in seconds, then _sum and _count.
 */
#include <stdio.h>

#include "api_agent.h"
#include "api_r.h"
#include "gw_hist.h"

static void series(struct gw_buf *b, const char *name, const char *suffix, const char *target,
		   long long lun)
{
	gw_buf_printf(b, "%s%s{target=\"", name, suffix);
	api_prom_label(b, target);
	gw_buf_printf(b, "\",lun=\"%lld\"", lun);
}

static void one(struct gw_buf *b, const char *name, const char *target, long long lun,
		const json_t *h)
{
	const json_t *counts = json_object_get(h, "counts");
	unsigned long long cum = 0;
	unsigned int i;

	/* A gateway built with other buckets reports nothing rather than wrong numbers. */
	if (json_array_size(counts) != GW_HIST_BUCKETS + 1)
		return;
	for (i = 0; i <= GW_HIST_BUCKETS; i++) {
		cum += (unsigned long long)json_integer_value(json_array_get(counts, i));
		series(b, name, "_bucket", target, lun);
		if (i < GW_HIST_BUCKETS)
			gw_buf_printf(b, ",le=\"%.6f\"} %llu\n", gw_hist_bound_ns(i) / 1e9, cum);
		else
			gw_buf_printf(b, ",le=\"+Inf\"} %llu\n", cum);
	}
	series(b, name, "_sum", target, lun);
	gw_buf_printf(b, "} %.9f\n",
		      (double)json_integer_value(json_object_get(h, "sum_ns")) / 1e9);
	series(b, name, "_count", target, lun);
	gw_buf_printf(b, "} %llu\n", cum);
}

void api_metrics_latency(struct gw_buf *b, const json_t *state)
{
	static const char *const kinds[][3] = {
	    {"read_latency", "isergw_lun_read_latency_seconds",
	     "Latency of READ commands on the LUN, from delivery to completion."},
	    {"write_latency", "isergw_lun_write_latency_seconds",
	     "Latency of WRITE commands on the LUN, write data included."},
	};
	const json_t *t, *l;
	size_t k, i, j;

	for (k = 0; k < GW_ARRAY_SIZE(kinds); k++) {
		gw_buf_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", kinds[k][1], kinds[k][2],
			      kinds[k][1]);
		json_array_foreach(json_object_get(state, "targets"), i, t) {
			json_array_foreach(json_object_get(t, "luns"), j, l) {
				const json_t *h = json_object_get(l, kinds[k][0]);

				if (json_is_object(h))
					one(b, kinds[k][1],
					    json_string_value(json_object_get(t, "name")),
					    (long long)json_integer_value(json_object_get(l, "lun")),
					    h);
			}
		}
	}
}
