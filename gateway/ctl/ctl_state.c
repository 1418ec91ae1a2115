// SPDX-License-Identifier: MIT
/*
 * The gateway's live state (the control socket's "state"): portals and what their transports
 * hold, targets with their per-LUN counters and latency histograms, sessions, the engine's
 * totals and the C heap. Calls no other file of ctl.
 */
#include <malloc.h>
#include <stdlib.h>

#include "ctl_priv.h"

/* {"counts":[per bucket, GW_HIST_BUCKETS + 1 of them],"sum_ns":N} (docs/CONTROL.md). */
static json_t *ctl_state_hist(const struct gw_hist *h)
{
	json_t *a = json_array();
	unsigned int i;

	for (i = 0; i <= GW_HIST_BUCKETS; i++)
		json_array_append_new(a, json_integer((json_int_t)h->count[i]));
	return json_pack("{s:o, s:I}", "counts", a, "sum_ns", (json_int_t)h->sum_ns);
}

/* The C heap as glibc's malloc sees it (every arena): what the soak logs per round to tell a
 * leak (in_use grows) from a heap that keeps freed memory (free grows, arena high). Bytes. */
static json_t *ctl_state_heap(void)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
	struct mallinfo2 mi = mallinfo2();

	return json_pack("{s:I, s:I, s:I, s:I, s:I}", "arena", (json_int_t)mi.arena, "mmapped",
			 (json_int_t)mi.hblkhd, "in_use", (json_int_t)(mi.uordblks + mi.hblkhd),
			 "free", (json_int_t)mi.fordblks, "releasable", (json_int_t)mi.keepcost);
#else
	return json_object();
#endif
}

json_t *ctl_gw_state(struct ctl_gw *g)
{
	json_t *portals = json_array(), *targets = json_array(), *sessions;
	struct isc_gw *gw = g->isc;
	struct isc_gw_totals tot;
	struct isc_portal *p = NULL;
	struct isc_target *t = NULL;

	while ((p = isc_gw_next_portal(gw, p))) {
		const struct isc_portal_conf *pc = isc_portal_conf(p);
		const struct dmv_portal *dp = isc_portal_dmv(p);
		json_t *po = json_pack(
			"{s:s, s:s, s:s, s:i, s:b, s:s?}", "name", pc->name,
			"transport", conf_transport_name(pc->transport),
			"address", pc->address ? pc->address : "",
			"port", (int)pc->port, "listening", dp && dp->listening,
			"bound", dp && dp->listening ? dp->addr : NULL);

		/* What the transport holds for this portal: counts that must fall back to zero. */
		if (po && dp && (dp->tp->caps & DMV_CAP_RDMA)) {
			const struct dmv_portal_res *r = &dp->res;

			/* buffers_lent: task buffers the transport lent (buf_get); zero_copy_ops /
			 * staged_ops: RDMA operations on them in place, or staged through a chunk
			 * with a copy. */
			json_object_set_new(po, "resources", json_pack(
				"{s:i, s:i, s:i, s:i, s:i, s:I, s:I, s:I, s:i, s:I, s:I}",
				"connections", (int)r->conns, "qps", (int)r->qps, "mrs", (int)r->mrs,
				"buffers", (int)r->bufs, "buffers_in_use", (int)r->bufs_in_use,
				"registered_bytes", (json_int_t)r->reg_bytes,
				"rdma_writes", (json_int_t)r->rdma_writes,
				"rdma_reads", (json_int_t)r->rdma_reads,
				"buffers_lent", (int)r->bufs_lent,
				"zero_copy_ops", (json_int_t)r->zcopy_ops,
				"staged_ops", (json_int_t)r->staged_ops));
		}
		json_array_append_new(portals, po);
	}
	while ((t = isc_gw_next_target(gw, t))) {
		struct scsi_dev *dev = isc_target_dev(t);
		json_t *luns = json_array();
		unsigned int n = isc_target_nsessions(t);
		struct isc_lun_stats *sums = NULL;
		size_t i, nsums = 0;

		if (isc_target_stats(t, &sums, &nsums))
			nsums = 0;
		for (i = 0; i < nsums; i++) {
			const struct isc_lun_stats *st = &sums[i];
			json_t *lo, *bst;

			if (!scsi_dev_find_lu(dev, st->lun))
				continue;
			lo = json_pack(
				"{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:b}",
				"lun", (json_int_t)st->lun, "read_ops", (json_int_t)st->read_ops,
				"write_ops", (json_int_t)st->write_ops,
				"other_ops", (json_int_t)st->other_ops,
				"read_bytes", (json_int_t)st->read_bytes,
				"write_bytes", (json_int_t)st->write_bytes,
				"errors", (json_int_t)st->errors,
				"removing", isc_target_lun_blocked(t, st->lun));
			json_object_set_new(lo, "read_latency", ctl_state_hist(&st->read_lat));
			json_object_set_new(lo, "write_latency", ctl_state_hist(&st->write_lat));
			/* The backstore's own live state (remote: paths; block: dm-multipath), and
			 * how the LU does its atomics here (every LU), read on the LU's loop. */
			bst = scsi_dev_lu_state(dev, st->lun);
			if (lo && bst)
				json_object_set_new(lo, "status", bst);
			else
				json_decref(bst);
			json_array_append_new(luns, lo);
		}
		free(sums);
		json_array_append_new(targets, json_pack("{s:s, s:i, s:o}", "name", isc_target_conf(t)->name,
							 "sessions", (int)n, "luns", luns));
	}
	sessions = isc_gw_sessions_state(gw);
	isc_gw_totals(gw, &tot);
	/* tasks and pdus_in_use fall back to 0 once every initiator is gone; data_memory.used to
	 * what the task cache keeps (cached tasks x their buffers), pdu_cache to what the PDU
	 * pools keep: the soak checks the first two and counts the last two as kept for reuse. */
	return json_pack("{s:o, s:o, s:o, s:i, s:o, s:{s:I, s:I, s:I}, s:I, s:I, s:I, "
			 "s:{s:I, s:I}, s:o}",
			 "portals", portals, "targets", targets, "sessions", sessions,
			 "connections", (int)isc_gw_nconns(gw), "login", isc_gw_login_state(gw),
			 "data_memory", "used", (json_int_t)tot.data_mem, "limit",
			 (json_int_t)isc_gw_data_memory(gw), "task_set_full", (json_int_t)tot.task_set_full,
			 "tasks", (json_int_t)tot.tasks, "tasks_cached", (json_int_t)tot.tasks_cached,
			 "pdus_in_use", (json_int_t)tot.pdus_in_use,
			 "pdu_cache", "pdus", (json_int_t)tot.pdus_cached, "bytes",
			 (json_int_t)tot.pdu_cache_bytes, "heap", ctl_state_heap());
}
