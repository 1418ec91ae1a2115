// SPDX-License-Identifier: MIT
/*
 * Live changes to a running gateway (what the control socket's "apply" does) and its live state.
 * A new configuration is compared with the running one object by object: what is the same keeps
 * running undisturbed (sessions, commands), what differs is replaced, what is gone is closed.
 * Everything that can fail (opening backstores, building targets, binding portals) happens
 * before anything running is touched, so a failed apply leaves the gateway as it was.
 * (Moved here from the iSCSI layer: applying is composition, iSCSI + SCSI + backstores.)
 */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bs.h"
#include "ctl.h"
#include "gw_log.h"
#include "isc.h"
#include "scsi.h"

/* An old configuration kept alive for removed targets whose sessions still drain. */
struct ctl_conf_hold {
	struct isc_gw_conf *conf;
	int refs;
};

static void ctl_conf_hold_put(struct ctl_conf_hold *h)
{
	if (!h || --h->refs > 0)
		return;
	conf_gw_free(h->conf);
	free(h->conf);
	free(h);
}

static bool ctl_str_eq(const char *a, const char *b)
{
	return !strcmp(a ? a : "", b ? b : "");
}

static bool ctl_lun_same(const struct isc_lun_conf *a, const struct isc_lun_conf *b)
{
	json_t *ja, *jb;
	bool same;

	/* Owner and ALUA group change in place (a cluster failover must not reopen the LU). */
	ja = gw_conf_to_json(conf_lu_keys, &a->lu, false);
	jb = gw_conf_to_json(conf_lu_keys, &b->lu, false);
	json_object_del(ja, "owner");
	json_object_del(ja, "alua_group");
	json_object_del(ja, "alua_pending");
	json_object_del(jb, "owner");
	json_object_del(jb, "alua_group");
	json_object_del(jb, "alua_pending");
	same = ja && jb && json_equal(ja, jb);
	json_decref(ja);
	json_decref(jb);
	if (!same)
		return false;
	/* The whole backstore object: a remote one's paths and policies are not in
	 * conf_bs_keys. */
	ja = conf_bs_to_json(&a->bs, false);
	jb = conf_bs_to_json(&b->bs, false);
	same = ja && jb && json_equal(ja, jb);
	json_decref(ja);
	json_decref(jb);
	return same;
}

static bool ctl_portal_same(const struct isc_portal_conf *a, const struct isc_portal_conf *b)
{
	return a->transport == b->transport && a->port == b->port &&
	       ctl_str_eq(a->address, b->address);
}

static const struct isc_lun_conf *ctl_find_lun(const struct isc_target_conf *tc, uint64_t lun)
{
	size_t i;

	for (i = 0; i < tc->nluns; i++)
		if (tc->luns[i].lu.lun == lun)
			return &tc->luns[i];
	return NULL;
}

static struct isc_portal *ctl_find_portal(struct isc_gw *gw, const char *name)
{
	struct isc_portal *p;

	gw_list_for_each_entry(p, &gw->portals, node)
		if (!strcmp(p->conf->name, name))
			return p;
	return NULL;
}

/* ---------------------------------------------------------------------------------------- */
/* LUN removals that wait for commands */

/* A LUN removal waiting for its commands to drain, and what replaces it (if anything). */
struct ctl_lun_pending {
	struct isc_lun_block blk;	/* in target->pending_luns: new commands kept off it */
	struct bs *bs;			/* replacement backstore, NULL: plain removal */
	struct scsi_lu_conf lu;		/* replacement LU settings (owned) */
};

static void ctl_lun_pending_free(struct ctl_lun_pending *lp)
{
	gw_list_del(&lp->blk.node);
	if (lp->bs)
		ctl_bs_close(lp->bs);
	gw_conf_free(conf_lu_keys, &lp->lu);
	free(lp);
}

void ctl_target_release(struct isc_target *t)
{
	struct isc_lun_block *lb;

	while (!gw_list_empty(&t->pending_luns)) {
		lb = gw_list_first_entry(&t->pending_luns, struct isc_lun_block, node);
		ctl_lun_pending_free(gw_container_of(lb, struct ctl_lun_pending, blk));
	}
	if (t->owner_data) {
		ctl_conf_hold_put(t->owner_data);
		t->owner_data = NULL;
	}
}

/* Tries to finish one pending removal: true when done. */
static bool ctl_lun_pending_try(struct isc_target *t, struct ctl_lun_pending *lp)
{
	struct gw_errlist errs;
	int r = scsi_dev_del_lu(t->dev, lp->blk.lun);

	if (r == -EBUSY)
		return false;
	if (lp->bs) {
		gw_errlist_init(&errs);
		r = scsi_dev_add_lu(t->dev, &lp->lu, lp->bs, &errs);
		if (r)
			gw_err("iscsi", "%s: LUN %llu could not be added back: %s", t->conf->name,
			       (unsigned long long)lp->blk.lun, strerror(-r));
		else
			lp->bs = NULL;	/* the LU owns it */
		gw_errlist_fini(&errs);
	}
	ctl_lun_pending_free(lp);
	return true;
}

static void ctl_lun_timer_fn(struct gw_timer *tm)
{
	struct isc_gw *gw = gw_container_of(tm, struct isc_gw, lun_timer);
	struct ctl_lun_pending *lp, *tmp;
	struct isc_target *t;
	bool left = false;

	gw_list_for_each_entry(t, &gw->targets, node) {
		gw_list_for_each_entry_safe(lp, tmp, &t->pending_luns, blk.node)
			if (!ctl_lun_pending_try(t, lp))
				left = true;
	}
	if (!left) {
		gw_timer_disarm(&gw->lun_timer);
		gw->lun_timer_on = false;
	}
}

static void ctl_lun_timer_start(struct isc_gw *gw)
{
	if (gw->lun_timer_on)
		return;
	if (gw->lun_timer.w.fd < 0 && gw_timer_init(&gw->lun_timer, gw->loop, ctl_lun_timer_fn))
		return;
	if (gw_timer_arm(&gw->lun_timer, 50, 50) == 0)
		gw->lun_timer_on = true;
}

/* Removes (and with bs, replaces) a LUN now, or once its commands drained. */
static void ctl_lun_replace(struct isc_target *t, uint64_t lun, const struct scsi_lu_conf *lu,
			    struct bs *bs)
{
	struct ctl_lun_pending *lp = calloc(1, sizeof(*lp));

	if (!lp) {
		gw_err("iscsi", "%s: out of memory removing LUN %llu", t->conf->name,
		       (unsigned long long)lun);
		if (bs)
			ctl_bs_close(bs);
		return;
	}
	lp->blk.lun = lun;
	lp->bs = bs;
	if (lu) {
		/* A copy through the table, so the pending entry owns its strings. */
		json_t *j = gw_conf_to_json(conf_lu_keys, lu, false);
		struct gw_errlist errs;

		gw_errlist_init(&errs);
		gw_conf_defaults(conf_lu_keys, &lp->lu);
		if (j)
			gw_conf_parse(conf_lu_keys, &lp->lu, j, "", NULL, &errs);
		json_decref(j);
		gw_errlist_fini(&errs);
	}
	gw_list_add_tail(&t->pending_luns, &lp->blk.node);
	if (!ctl_lun_pending_try(t, lp)) {
		gw_info("iscsi", "%s: LUN %llu: waiting for commands in flight before removing it",
			t->conf->name, (unsigned long long)lun);
		ctl_lun_timer_start(t->gw);
	}
}

/* A removed target's sessions drain on the old configuration, which it holds until then. */
static void ctl_retire_target(struct isc_target *t, struct ctl_conf_hold *h)
{
	t->owner_data = h;
	h->refs++;
	isc_target_retire(t);
}

/* ---------------------------------------------------------------------------------------- */
/* Apply */

struct ctl_apply_lun {
	struct isc_target *t;		/* running target */
	const struct isc_lun_conf *conf;	/* in the new configuration */
	bool replace;			/* an LU with this number runs now */
	struct bs *bs;
};

/* Opens the backstores of LUNs that are new or changed in a kept target (tc, index ti). */
static int ctl_apply_open_luns(struct isc_target *ot,
			       const struct isc_target_conf *tc, size_t ti,
			       struct ctl_apply_lun **luns, size_t *nluns, struct gw_errlist *errs)
{
	char path[128];
	size_t j;
	int r;

	/* A failed apply's picks are not LUs: each LU of this one counts those before it. */
	scsi_dev_forget_lu_picks(ot->dev);
	for (j = 0; j < tc->nluns; j++) {
		const struct isc_lun_conf *nl = &tc->luns[j];
		const struct isc_lun_conf *ol = ctl_find_lun(ot->conf, nl->lu.lun);
		struct ctl_apply_lun *al;

		if (ol && ctl_lun_same(ol, nl))
			continue;
		if (isc_target_lun_blocked(ot, nl->lu.lun)) {
			snprintf(path, sizeof(path), "targets[%zu].luns[%zu]", ti, j);
			gw_errlist_add(errs, path, "LUN %llu is still being removed; try again",
				       (unsigned long long)nl->lu.lun);
			return -EBUSY;
		}
		al = realloc(*luns, (*nluns + 1) * sizeof(**luns));
		if (!al)
			return -ENOMEM;
		*luns = al;
		al = &al[*nluns];
		al->t = ot;
		al->conf = nl;
		al->replace = ol != NULL;
		al->bs = NULL;
		snprintf(path, sizeof(path), "targets[%zu].luns[%zu].backstore", ti, j);
		r = ctl_bs_open(scsi_dev_next_lu_loop(ot->dev), &nl->bs, path, errs, &al->bs);
		if (r)
			return r;
		(*nluns)++;
	}
	return 0;
}

int ctl_gw_apply(struct isc_gw *gw, struct isc_gw_conf *nc, struct gw_errlist *errs)
{
	struct isc_target **new_t = NULL, **keep_t = NULL, *t, *ttmp;
	struct isc_portal **new_p = NULL, *p, *ptmp;
	struct ctl_apply_lun *luns = NULL;
	struct ctl_conf_hold *hold = NULL;
	size_t nluns = 0, i, j, before = errs->n;
	int r = 0;

	new_t = calloc(nc->ntargets + 1, sizeof(*new_t));
	keep_t = calloc(nc->ntargets + 1, sizeof(*keep_t));
	new_p = calloc(nc->nportals + 1, sizeof(*new_p));
	hold = calloc(1, sizeof(*hold));
	if (!new_t || !keep_t || !new_p || !hold) {
		r = -ENOMEM;
		goto fail;
	}

	/* Phase 1: open everything new; nothing running changes yet. */
	for (i = 0; i < nc->ntargets; i++) {
		struct isc_target_conf *tc = &nc->targets[i];
		struct isc_target *ot = isc_gw_find_target(gw, tc->name);

		/* Joining or leaving a cluster renumbers the target's ports: a new target. */
		if (ot && ot->conf->tpgt == tc->tpgt && !gw->conf->ngroups == !nc->ngroups) {
			keep_t[i] = ot;
			r = ctl_apply_open_luns(ot, tc, i, &luns, &nluns, errs);
			if (r)
				goto fail;
			continue;
		}
		r = ctl_target_new(gw, tc, i, errs, &new_t[i]);
		if (r)
			goto fail;
	}
	for (i = 0; i < nc->nportals; i++) {
		struct isc_portal_conf *pc = &nc->portals[i];

		p = ctl_find_portal(gw, pc->name);
		if (p && ctl_portal_same(p->conf, pc))
			continue;
		new_p[i] = isc_portal_new(gw, pc);
		if (!new_p[i]) {
			r = -ENOMEM;
			goto fail;
		}
	}

	/* Phase 2: retire what is gone or changed. */
	hold->conf = gw->conf;
	hold->refs = 1;
	gw_list_for_each_entry_safe(p, ptmp, &gw->portals, node) {
		bool kept = false;

		for (i = 0; i < nc->nportals; i++)
			if (!strcmp(nc->portals[i].name, p->conf->name) && !new_p[i]) {
				p->conf = &nc->portals[i];
				kept = true;
			}
		if (kept)
			continue;
		isc_portal_remove(p);
	}
	gw_list_for_each_entry_safe(t, ttmp, &gw->targets, node) {
		bool kept = false;

		for (i = 0; i < nc->ntargets; i++)
			if (keep_t[i] == t)
				kept = true;
		if (!kept)
			ctl_retire_target(t, hold);
	}

	/* Phase 3: the kept targets follow their new settings, new things start. */
	for (i = 0; i < nc->ntargets; i++) {
		struct isc_target_conf *oc;

		t = keep_t[i];
		if (!t)
			continue;
		oc = t->conf;
		for (j = 0; j < oc->nluns; j++)
			if (!ctl_find_lun(&nc->targets[i], oc->luns[j].lu.lun))
				ctl_lun_replace(t, oc->luns[j].lu.lun, NULL, NULL);
		t->conf = &nc->targets[i];
		isc_target_enforce_acl(t);
		for (j = 0; j < t->conf->nluns; j++) {
			const struct scsi_lu_conf *lc = &t->conf->luns[j].lu;

			/* -ENOENT: a LUN added or replaced below, with its new settings. */
			if (scsi_dev_set_lu_alua(t->dev, lc->lun, lc->alua_group,
						 lc->alua_pending, lc->owner) ==
			    -ENOMEM)
				gw_err("iscsi", "%s: LUN %llu: out of memory setting its owner",
				       t->conf->name, (unsigned long long)lc->lun);
		}
	}
	for (i = 0; i < nluns; i++) {
		struct ctl_apply_lun *al = &luns[i];

		if (isc_target_lun_register(al->t, al->conf->lu.lun))
			gw_err("iscsi", "%s: LUN %llu: out of memory listing its counters",
			       al->t->conf->name, (unsigned long long)al->conf->lu.lun);
		if (al->replace)
			ctl_lun_replace(al->t, al->conf->lu.lun, &al->conf->lu, al->bs);
		else if (ctl_lu_add(al->t->dev, &al->conf->lu, al->bs, al->t->conf->name, errs))
			ctl_bs_close(al->bs);
		al->bs = NULL;
	}
	for (i = 0; i < nc->ntargets; i++) {
		t = keep_t[i] ? keep_t[i] : new_t[i];
		if (t && ctl_target_set_groups(t, nc))
			gw_err("iscsi", "%s: out of memory setting the cluster's port groups",
			       t->conf->name);
		if (!new_t[i])
			continue;
		isc_gw_add_target(gw, new_t[i]);
		gw_info("iscsi", "target %s added", new_t[i]->conf->name);
		new_t[i] = NULL;
	}
	for (i = 0; i < nc->nportals; i++) {
		if (!new_p[i])
			continue;
		isc_gw_add_portal(gw, new_p[i]);
		new_p[i] = NULL;
	}
	gw->conf = nc;
	/* No loop still reads the old configuration once each has been through a message. */
	isc_gw_sync(gw);
	ctl_conf_hold_put(hold);
	free(new_t);
	free(keep_t);
	free(new_p);
	free(luns);
	/* Portals listen last: a bind failure is reported, the rest of the change stands. */
	r = ctl_gw_listen(gw);
	if (r)
		gw_errlist_add(errs, "portals", "cannot listen: %s", strerror(-r));
	return r;

fail:
	for (i = 0; i < nluns; i++)
		if (luns[i].bs)
			ctl_bs_close(luns[i].bs);
	for (i = 0; new_t && i < nc->ntargets; i++)
		if (new_t[i])
			isc_target_destroy(new_t[i]);
	for (i = 0; new_p && i < nc->nportals; i++)
		free(new_p[i]);
	if (errs->n == before)
		gw_errlist_add(errs, "", "cannot apply: %s", strerror(-r));
	free(new_t);
	free(keep_t);
	free(new_p);
	free(luns);
	free(hold);
	conf_gw_free(nc);
	free(nc);
	return r ? r : -EINVAL;
}

/* ---------------------------------------------------------------------------------------- */
/* State */

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

json_t *ctl_gw_state(struct isc_gw *gw)
{
	json_t *portals = json_array(), *targets = json_array(), *sessions;
	struct isc_gw_totals tot;
	struct isc_portal *p;
	struct isc_target *t;

	gw_list_for_each_entry(p, &gw->portals, node) {
		json_t *po = json_pack(
			"{s:s, s:s, s:s, s:i, s:b, s:s?}", "name", p->conf->name,
			"transport", conf_transport_name(p->conf->transport),
			"address", p->conf->address ? p->conf->address : "",
			"port", (int)p->conf->port, "listening", p->dp && p->dp->listening,
			"bound", p->dp && p->dp->listening ? p->dp->addr : NULL);

		/* What the transport holds for this portal: counts that must fall back to zero. */
		if (po && p->dp && (p->dp->tp->caps & DMV_CAP_RDMA)) {
			const struct dmv_portal_res *r = &p->dp->res;

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
	gw_list_for_each_entry(t, &gw->targets, node) {
		json_t *luns = json_array();
		unsigned int n = isc_target_nsessions(t);
		struct isc_lun_stats *sums = calloc(t->nstat_luns ? t->nstat_luns : 1,
						    sizeof(*sums));
		size_t i;

		if (sums)
			isc_target_stats(t, sums);
		for (i = 0; sums && i < t->nstat_luns; i++) {
			const struct isc_lun_stats *st = &sums[i];
			json_t *lo, *bst;

			if (!scsi_dev_find_lu(t->dev, st->lun))
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
			bst = scsi_dev_lu_state(t->dev, st->lun);
			if (lo && bst)
				json_object_set_new(lo, "status", bst);
			else
				json_decref(bst);
			json_array_append_new(luns, lo);
		}
		free(sums);
		json_array_append_new(targets, json_pack("{s:s, s:i, s:o}", "name", t->conf->name,
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
			 (json_int_t)gw->data_mem_max, "task_set_full", (json_int_t)tot.task_set_full,
			 "tasks", (json_int_t)tot.tasks, "tasks_cached", (json_int_t)tot.tasks_cached,
			 "pdus_in_use", (json_int_t)tot.pdus_in_use,
			 "pdu_cache", "pdus", (json_int_t)tot.pdus_cached, "bytes",
			 (json_int_t)tot.pdu_cache_bytes, "heap", ctl_state_heap());
}
