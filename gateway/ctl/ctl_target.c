// SPDX-License-Identifier: MIT
/*
 * One target as ctl builds and keeps it: its SCSI device, target port and LUs over their
 * backstores; what ctl hangs on it (struct ctl_target: the old configuration a removed target
 * drains on); and LUN removals that wait for commands in flight (struct ctl_lun_pending, in the
 * gateway's list, retried by its timer). Calls ctl_lu.c below it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_priv.h"
#include "gw_log.h"

/* What ctl hangs on each target (isc_target_set_owner), freed with it. */
struct ctl_target {
	struct ctl_gw *g;
	struct ctl_conf_hold *hold;	/* a removed target's old configuration, or NULL */
};

/* A LUN removal waiting for its commands to drain, and what replaces it (if anything). */
struct ctl_lun_pending {
	struct gw_list node;		/* in g->pending */
	struct isc_target *t;
	struct isc_lun_block blk;	/* new commands kept off the LUN meanwhile */
	struct bs *bs;			/* replacement backstore, NULL: plain removal */
	struct scsi_lu_conf lu;		/* replacement LU settings (owned) */
};

void ctl_conf_hold_put(struct ctl_conf_hold *h)
{
	if (!h || --h->refs > 0)
		return;
	conf_gw_free(h->conf);
	free(h->conf);
	free(h);
}

static void ctl_lun_pending_free(struct ctl_lun_pending *lp)
{
	gw_list_del(&lp->node);
	isc_lun_unblock(&lp->blk);
	if (lp->bs)
		ctl_bs_close(lp->bs);
	gw_conf_free(conf_lu_keys, &lp->lu);
	free(lp);
}

/* The target is being destroyed: what ctl keeps for it goes first. */
static void ctl_target_release(struct isc_target *t, void *data)
{
	struct ctl_target *ct = data;
	struct ctl_lun_pending *lp, *tmp;

	gw_list_for_each_entry_safe(lp, tmp, &ct->g->pending, node)
		if (lp->t == t)
			ctl_lun_pending_free(lp);
	ctl_conf_hold_put(ct->hold);
	free(ct);
}

/* Builds a target and its LUs; not linked anywhere yet. */
int ctl_target_new(struct ctl_gw *g, struct isc_target_conf *tc, size_t idx,
		   struct gw_errlist *errs, struct isc_target **out)
{
	struct isc_target *t = isc_target_alloc(g->isc, tc);
	struct ctl_target *ct = calloc(1, sizeof(*ct));
	char pname[ISC_NAME_MAX + 16], path[96];
	struct scsi_port *port;
	struct scsi_dev *dev;
	size_t i;
	int r;

	if (!t || !ct) {
		free(ct);
		if (t)
			isc_target_destroy(t);
		return -ENOMEM;
	}
	ct->g = g;
	isc_target_set_owner(t, ctl_target_release, ct);
	*out = t;
	snprintf(path, sizeof(path), "targets[%zu]", idx);
	dev = scsi_dev_create(g->loop, tc->name);
	if (!dev) {
		gw_errlist_add(errs, path, "cannot create the SCSI device");
		return -ENOMEM;
	}
	snprintf(pname, sizeof(pname), "%s,t,0x%04x", tc->name, tc->tpgt);
	port = scsi_dev_add_port(dev, pname, (uint16_t)tc->tpgt);
	/* The target owns the device from here, port or not. */
	isc_target_set_dev(t, dev, port);
	if (!port) {
		gw_errlist_add(errs, path, "cannot create the SCSI target port");
		return -ENOMEM;
	}
	/* The LUs spread over the loops (each opened on the loop owning fewest); with one loop
	 * every LU is loop 0's. */
	scsi_dev_set_loops(dev, g->loops);
	for (i = 0; i < tc->nluns; i++) {
		struct bs *bs;

		snprintf(path, sizeof(path), "targets[%zu].luns[%zu].backstore", idx, i);
		r = ctl_bs_open(scsi_dev_next_lu_loop(dev), &tc->luns[i].bs, path, errs, &bs);
		if (r)
			return r;
		snprintf(path, sizeof(path), "targets[%zu].luns[%zu]", idx, i);
		r = ctl_lu_add(dev, &tc->luns[i].lu, bs, path, errs);
		if (r) {
			ctl_bs_close(bs);	/* only a successful add takes it over */
			return r;
		}
		if (isc_target_lun_register(t, tc->luns[i].lu.lun))
			return -ENOMEM;
	}
	return 0;
}

int ctl_target_set_groups(struct isc_target *t, const struct isc_gw_conf *c)
{
	struct scsi_tpg_conf *g;
	size_t i;
	int r;

	if (!c->ngroups)
		return 0;
	g = calloc(c->ngroups, sizeof(*g));
	if (!g)
		return -ENOMEM;
	for (i = 0; i < c->ngroups; i++) {
		g[i].id = (uint16_t)c->groups[i].id;
		g[i].state = (enum scsi_alua_state)c->groups[i].state;
	}
	r = scsi_dev_set_groups(isc_target_dev(t), g, c->ngroups);
	free(g);
	return r;
}

void ctl_target_retire(struct isc_target *t, struct ctl_conf_hold *h)
{
	struct ctl_target *ct = isc_target_owner(t);

	ct->hold = h;
	h->refs++;
	isc_target_retire(t);
}

/* Tries to finish one pending removal: true when done. */
static bool ctl_lun_pending_try(struct ctl_lun_pending *lp)
{
	struct scsi_dev *dev = isc_target_dev(lp->t);
	struct gw_errlist errs;
	int r = scsi_dev_del_lu(dev, lp->blk.lun);

	if (r == -EBUSY)
		return false;
	if (lp->bs) {
		gw_errlist_init(&errs);
		r = scsi_dev_add_lu(dev, &lp->lu, lp->bs, &errs);
		if (r)
			gw_err("iscsi", "%s: LUN %llu could not be added back: %s",
			       isc_target_conf(lp->t)->name, (unsigned long long)lp->blk.lun,
			       strerror(-r));
		else
			lp->bs = NULL;	/* the LU owns it */
		gw_errlist_fini(&errs);
	}
	ctl_lun_pending_free(lp);
	return true;
}

static void ctl_lun_timer_fn(struct gw_timer *tm)
{
	struct ctl_gw *g = gw_container_of(tm, struct ctl_gw, lun_timer);
	struct ctl_lun_pending *lp, *tmp;

	gw_list_for_each_entry_safe(lp, tmp, &g->pending, node)
		ctl_lun_pending_try(lp);
	if (gw_list_empty(&g->pending)) {
		gw_timer_disarm(&g->lun_timer);
		g->lun_timer_on = false;
	}
}

static void ctl_lun_timer_start(struct ctl_gw *g)
{
	if (g->lun_timer_on)
		return;
	if (g->lun_timer.w.fd < 0 && gw_timer_init(&g->lun_timer, g->loop, ctl_lun_timer_fn))
		return;
	if (gw_timer_arm(&g->lun_timer, 50, 50) == 0)
		g->lun_timer_on = true;
}

void ctl_lun_replace(struct ctl_gw *g, struct isc_target *t, uint64_t lun,
		     const struct scsi_lu_conf *lu, struct bs *bs)
{
	struct ctl_lun_pending *lp = calloc(1, sizeof(*lp));

	if (!lp) {
		gw_err("iscsi", "%s: out of memory removing LUN %llu", isc_target_conf(t)->name,
		       (unsigned long long)lun);
		if (bs)
			ctl_bs_close(bs);
		return;
	}
	lp->t = t;
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
	gw_list_add_tail(&g->pending, &lp->node);
	isc_target_block_lun(t, &lp->blk);
	if (!ctl_lun_pending_try(lp)) {
		gw_info("iscsi", "%s: LUN %llu: waiting for commands in flight before removing it",
			isc_target_conf(t)->name, (unsigned long long)lun);
		ctl_lun_timer_start(g);
	}
}
