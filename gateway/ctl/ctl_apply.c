// SPDX-License-Identifier: MIT
/*
 * Live changes to a running gateway (what the control socket's "apply" does). A new
 * configuration is compared with the running one object by object: what is the same keeps
 * running undisturbed (sessions, commands), what differs is replaced, what is gone is closed.
 * Everything that can fail (opening backstores, building targets, binding portals) happens
 * before anything running is touched, so a failed apply leaves the gateway as it was.
 * ctl_gw_apply is that sequence of steps; each step is a function here. Calls ctl_gw.c,
 * ctl_target.c and ctl_lu.c below it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_priv.h"
#include "gw_log.h"

static bool ctl_str_eq(const char *a, const char *b)
{
	return !strcmp(a ? a : "", b ? b : "");
}

/* How a LUN's new settings differ from the running ones. */
enum ctl_lun_diff {
	CTL_LUN_SAME,		/* owner and ALUA group at most: changed in place */
	CTL_LUN_SIZE,		/* the backstore's size too: resized in service if it can be */
	CTL_LUN_OTHER,		/* anything else: the LU is replaced */
};

/* a and b (taken) are equal once the skip keys are out of both. */
static bool ctl_json_same(json_t *a, json_t *b, const char *const *skip)
{
	bool same;

	for (; *skip; skip++) {
		json_object_del(a, *skip);
		json_object_del(b, *skip);
	}
	same = a && b && json_equal(a, b);
	json_decref(a);
	json_decref(b);
	return same;
}

static enum ctl_lun_diff ctl_lun_diff(const struct isc_lun_conf *a, const struct isc_lun_conf *b)
{
	/* Owner and ALUA group change in place (a cluster failover must not reopen the LU). */
	static const char *const lu_live[] = { "owner", "alua_group", "alua_pending", NULL };
	static const char *const size[] = { "size", NULL };
	json_t *ja, *jb;

	if (!ctl_json_same(gw_conf_to_json(conf_lu_keys, &a->lu, false),
			   gw_conf_to_json(conf_lu_keys, &b->lu, false), lu_live))
		return CTL_LUN_OTHER;
	/* The whole backstore object: a remote one's paths and policies are not in
	 * conf_bs_keys. Equal, or equal but for its size. */
	ja = conf_bs_to_json(&a->bs, false);
	jb = conf_bs_to_json(&b->bs, false);
	if (ja && jb && json_equal(ja, jb)) {
		json_decref(ja);
		json_decref(jb);
		return CTL_LUN_SAME;
	}
	return ctl_json_same(ja, jb, size) ? CTL_LUN_SIZE : CTL_LUN_OTHER;
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

/* ---------------------------------------------------------------------------------------- */
/* Apply */

struct ctl_apply_lun {
	struct isc_target *t;		/* running target */
	const struct isc_lun_conf *conf;	/* in the new configuration */
	bool replace;			/* an LU with this number runs now */
	struct bs *bs;
	bool resize;			/* ... and keeps running at a new size: */
	uint64_t size;			/* bytes, prepared (bs_resize_prepare) */
	struct bs *running;		/* its backstore */
};

/* What an apply opened before touching anything running, by the new configuration's index. */
struct ctl_plan {
	struct isc_target **new_t;	/* a target built anew (new, or its ports renumbered) */
	struct isc_target **keep_t;	/* a running target that stays */
	struct isc_portal **new_p;	/* a portal that is new or changed */
	struct ctl_apply_lun *luns;	/* LUNs new or changed in kept targets, opened */
	size_t nluns;
	struct ctl_conf_hold *hold;	/* the old configuration, for targets that drain */
	unsigned flags;			/* CTL_APPLY_* */
};

/* Opens the backstores of LUNs that are new or changed in a kept target (tc, index ti). */
static int ctl_apply_open_luns(struct ctl_plan *pl, struct isc_target *ot,
			       const struct isc_target_conf *tc, size_t ti, struct gw_errlist *errs)
{
	const struct isc_target_conf *oc = isc_target_conf(ot);
	struct scsi_dev *dev = isc_target_dev(ot);
	char path[128];
	size_t j;
	int r;

	/* A failed apply's picks are not LUs: each LU of this one counts those before it. */
	scsi_dev_forget_lu_picks(dev);
	for (j = 0; j < tc->nluns; j++) {
		const struct isc_lun_conf *nl = &tc->luns[j];
		const struct isc_lun_conf *ol = ctl_find_lun(oc, nl->lu.lun);
		struct ctl_apply_lun *al;

		enum ctl_lun_diff d = ol ? ctl_lun_diff(ol, nl) : CTL_LUN_OTHER;
		struct bs *running = scsi_dev_lu_bs(dev, nl->lu.lun);

		if (d == CTL_LUN_SAME)
			continue;
		if (isc_target_lun_blocked(ot, nl->lu.lun)) {
			snprintf(path, sizeof(path), "targets[%zu].luns[%zu]", ti, j);
			gw_errlist_add(errs, path, "LUN %llu is still being removed; try again",
				       (unsigned long long)nl->lu.lun);
			return -EBUSY;
		}
		al = realloc(pl->luns, (pl->nluns + 1) * sizeof(*al));
		if (!al)
			return -ENOMEM;
		pl->luns = al;
		al = &al[pl->nluns];
		*al = (struct ctl_apply_lun){ .t = ot, .conf = nl, .replace = ol != NULL };
		if (d == CTL_LUN_SIZE && running && bs_can_resize(running)) {
			struct gw_errlist sub;
			unsigned f = (pl->flags & CTL_APPLY_SHRINK ? BS_RESIZE_SHRINK : 0) |
				     (nl->lu.thin ? 0 : BS_RESIZE_ALLOCATE);

			gw_errlist_init(&sub);
			r = bs_resize_prepare(running, nl->bs.size, f, &al->size, &sub);
			snprintf(path, sizeof(path), "targets[%zu].luns[%zu].backstore", ti, j);
			ctl_errs_prefix(errs, &sub, path);
			gw_errlist_fini(&sub);
			if (r)
				return r;
			al->resize = true;
			al->running = running;
			pl->nluns++;
			continue;
		}
		snprintf(path, sizeof(path), "targets[%zu].luns[%zu].backstore", ti, j);
		r = ctl_bs_open(scsi_dev_next_lu_loop(dev), &nl->bs, path, errs, &al->bs);
		if (r)
			return r;
		pl->nluns++;
	}
	return 0;
}

static void ctl_plan_free(struct ctl_plan *pl)
{
	free(pl->new_t);
	free(pl->keep_t);
	free(pl->new_p);
	free(pl->luns);
	free(pl->hold);
}

/* Step 1: everything new is opened (targets built, backstores of changed LUNs, portal
 * objects); nothing running changes. On error the caller undoes it (ctl_plan_undo). */
static int ctl_plan_open(struct ctl_gw *g, struct isc_gw_conf *nc, struct ctl_plan *pl,
			 struct gw_errlist *errs)
{
	size_t i;
	int r;

	pl->new_t = calloc(nc->ntargets + 1, sizeof(*pl->new_t));
	pl->keep_t = calloc(nc->ntargets + 1, sizeof(*pl->keep_t));
	pl->new_p = calloc(nc->nportals + 1, sizeof(*pl->new_p));
	pl->hold = calloc(1, sizeof(*pl->hold));
	if (!pl->new_t || !pl->keep_t || !pl->new_p || !pl->hold)
		return -ENOMEM;
	for (i = 0; i < nc->ntargets; i++) {
		struct isc_target_conf *tc = &nc->targets[i];
		struct isc_target *ot = isc_gw_find_target(g->isc, tc->name);

		/* Joining or leaving a cluster renumbers the target's ports: a new target. */
		if (ot && isc_target_conf(ot)->tpgt == tc->tpgt &&
		    !g->conf->ngroups == !nc->ngroups) {
			pl->keep_t[i] = ot;
			r = ctl_apply_open_luns(pl, ot, tc, i, errs);
		} else {
			r = ctl_target_new(g, tc, i, errs, &pl->new_t[i]);
		}
		if (r)
			return r;
	}
	for (i = 0; i < nc->nportals; i++) {
		struct isc_portal_conf *pc = &nc->portals[i];
		struct isc_portal *p = isc_gw_find_portal(g->isc, pc->name);

		if (p && ctl_portal_same(isc_portal_conf(p), pc))
			continue;
		pl->new_p[i] = isc_portal_new(g->isc, pc);
		if (!pl->new_p[i])
			return -ENOMEM;
	}
	return 0;
}

static void ctl_plan_undo(struct ctl_plan *pl, const struct isc_gw_conf *nc)
{
	size_t i;

	for (i = 0; i < pl->nluns; i++)
		if (pl->luns[i].bs)
			ctl_bs_close(pl->luns[i].bs);
	for (i = 0; pl->new_t && i < nc->ntargets; i++)
		if (pl->new_t[i])
			isc_target_destroy(pl->new_t[i]);
	for (i = 0; pl->new_p && i < nc->nportals; i++)
		if (pl->new_p[i])
			isc_portal_free(pl->new_p[i]);
}

/* Step 2: what is gone or changed leaves service: portals (connections closed), targets
 * (sessions drain on the old configuration, which the plan's hold keeps). */
static void ctl_apply_retire(struct ctl_gw *g, struct isc_gw_conf *nc, struct ctl_plan *pl)
{
	struct isc_portal *p, *pnext;
	struct isc_target *t, *tnext;
	size_t i;

	pl->hold->conf = g->conf;
	pl->hold->refs = 1;
	for (p = isc_gw_next_portal(g->isc, NULL); p; p = pnext) {
		bool kept = false;

		pnext = isc_gw_next_portal(g->isc, p);
		for (i = 0; i < nc->nportals; i++)
			if (!strcmp(nc->portals[i].name, isc_portal_conf(p)->name) && !pl->new_p[i]) {
				isc_portal_set_conf(p, &nc->portals[i]);
				kept = true;
			}
		if (!kept)
			isc_portal_remove(p);
	}
	for (t = isc_gw_next_target(g->isc, NULL); t; t = tnext) {
		bool kept = false;

		tnext = isc_gw_next_target(g->isc, t);
		for (i = 0; i < nc->ntargets; i++)
			if (pl->keep_t[i] == t)
				kept = true;
		if (!kept)
			ctl_target_retire(t, pl->hold);
	}
}

/* Step 3: the kept targets follow their new settings: LUNs gone are removed, the ACL holds
 * for sessions already in, each LU's owner and ALUA group move in place. */
static void ctl_apply_targets(struct ctl_gw *g, struct isc_gw_conf *nc, struct ctl_plan *pl)
{
	size_t i, j;

	for (i = 0; i < nc->ntargets; i++) {
		struct isc_target *t = pl->keep_t[i];
		struct isc_target_conf *oc, *tc = &nc->targets[i];

		if (!t)
			continue;
		oc = isc_target_conf(t);
		for (j = 0; j < oc->nluns; j++)
			if (!ctl_find_lun(tc, oc->luns[j].lu.lun))
				ctl_lun_replace(g, t, oc->luns[j].lu.lun, NULL, NULL);
		isc_target_set_conf(t, tc);
		isc_target_enforce_acl(t);
		for (j = 0; j < tc->nluns; j++) {
			const struct scsi_lu_conf *lc = &tc->luns[j].lu;

			/* -ENOENT: a LUN added or replaced below, with its new settings. */
			if (scsi_dev_set_lu_alua(isc_target_dev(t), lc->lun, lc->alua_group,
						 lc->alua_pending, lc->owner) == -ENOMEM)
				gw_err("iscsi", "%s: LUN %llu: out of memory setting its owner",
				       tc->name, (unsigned long long)lc->lun);
		}
	}
}

/* Step 4: LUNs new or changed in kept targets go in, over the backstores step 1 opened. */
static void ctl_apply_luns(struct ctl_gw *g, struct ctl_plan *pl, struct gw_errlist *errs)
{
	for (size_t i = 0; i < pl->nluns; i++) {
		struct ctl_apply_lun *al = &pl->luns[i];
		const char *name = isc_target_conf(al->t)->name;

		if (al->resize) {
			gw_info("iscsi", "%s: LUN %llu resized in service", name,
				(unsigned long long)al->conf->lu.lun);
			bs_resize_commit(al->running, al->size);
			continue;
		}
		if (isc_target_lun_register(al->t, al->conf->lu.lun))
			gw_err("iscsi", "%s: LUN %llu: out of memory listing its counters", name,
			       (unsigned long long)al->conf->lu.lun);
		if (al->replace)
			ctl_lun_replace(g, al->t, al->conf->lu.lun, &al->conf->lu, al->bs);
		else if (ctl_lu_add(isc_target_dev(al->t), &al->conf->lu, al->bs, name, errs))
			ctl_bs_close(al->bs);
		al->bs = NULL;
	}
}

/* Step 5: every target gets the cluster's port groups; new targets and portals go into
 * service. */
static void ctl_apply_start(struct ctl_gw *g, struct isc_gw_conf *nc, struct ctl_plan *pl)
{
	size_t i;

	for (i = 0; i < nc->ntargets; i++) {
		struct isc_target *t = pl->keep_t[i] ? pl->keep_t[i] : pl->new_t[i];

		if (t && ctl_target_set_groups(t, nc))
			gw_err("iscsi", "%s: out of memory setting the cluster's port groups",
			       nc->targets[i].name);
		if (!pl->new_t[i])
			continue;
		isc_gw_add_target(g->isc, pl->new_t[i]);
		gw_info("iscsi", "target %s added", nc->targets[i].name);
		pl->new_t[i] = NULL;
	}
	for (i = 0; i < nc->nportals; i++) {
		if (!pl->new_p[i])
			continue;
		isc_gw_add_portal(g->isc, pl->new_p[i]);
		pl->new_p[i] = NULL;
	}
}

/* Step 6: the new configuration is the running one; the old one goes once no loop still
 * reads it and no draining target needs it. */
static void ctl_apply_commit(struct ctl_gw *g, struct isc_gw_conf *nc, struct ctl_plan *pl)
{
	g->conf = nc;
	isc_gw_set_conf(g->isc, nc);
	/* No loop still reads the old configuration once each has been through a message. */
	isc_gw_sync(g->isc);
	ctl_conf_hold_put(pl->hold);
	pl->hold = NULL;
}

int ctl_gw_apply(struct ctl_gw *g, struct isc_gw_conf *nc, unsigned flags,
		 struct gw_errlist *errs)
{
	struct ctl_plan pl = { .flags = flags };
	size_t before = errs->n;
	int r;

	r = ctl_plan_open(g, nc, &pl, errs);
	if (r) {
		ctl_plan_undo(&pl, nc);
		ctl_plan_free(&pl);
		if (errs->n == before)
			gw_errlist_add(errs, "", "cannot apply: %s", strerror(-r));
		conf_gw_free(nc);
		free(nc);
		return r;
	}
	ctl_apply_retire(g, nc, &pl);
	ctl_apply_targets(g, nc, &pl);
	ctl_apply_luns(g, &pl, errs);
	ctl_apply_start(g, nc, &pl);
	ctl_apply_commit(g, nc, &pl);
	ctl_plan_free(&pl);
	/* Portals listen last: a bind failure is reported, the rest of the change stands. */
	r = ctl_gw_listen(g);
	if (r)
		gw_errlist_add(errs, "portals", "cannot listen: %s", strerror(-r));
	return r;
}

int ctl_gw_lun_rescan(struct ctl_gw *g, const char *target, uint64_t lun, unsigned flags,
		      uint64_t *size, bool *pending, struct gw_errlist *errs)
{
	struct isc_target *t = target ? isc_gw_find_target(g->isc, target) : NULL;
	const struct isc_lun_conf *lc;
	struct bs *bs;
	int r;

	if (!t) {
		gw_errlist_add(errs, "target", "no target %s", target ? target : "(none given)");
		return -ENOENT;
	}
	lc = ctl_find_lun(isc_target_conf(t), lun);
	bs = scsi_dev_lu_bs(isc_target_dev(t), lun);
	if (!lc || !bs) {
		gw_errlist_add(errs, "lun", "target %s has no LUN %llu", target,
			       (unsigned long long)lun);
		return -ENOENT;
	}
	*pending = false;
	if (!bs_can_resize(bs) && bs_recheck_capacity(bs) == 0) {
		/* A remote LUN: its paths read the back end's size now; a change follows. */
		*size = bs->size;
		*pending = true;
		gw_info("iscsi", "%s: LUN %llu: the back end's capacity is read again", target,
			(unsigned long long)lun);
		return 0;
	}
	if (lc->bs.size) {
		/* The configured size rules: a device grown under it does not change the LU. */
		gw_errlist_add(errs, "size", "LUN %llu has a configured size (%llu bytes): give "
			       "the new size instead of measuring", (unsigned long long)lun,
			       (unsigned long long)lc->bs.size);
		return -EINVAL;
	}
	r = bs_resize_prepare(bs, 0, flags & CTL_APPLY_SHRINK ? BS_RESIZE_SHRINK : 0, size,
			      errs);
	if (r)
		return r;
	gw_info("iscsi", "%s: LUN %llu measured again: %llu bytes", target,
		(unsigned long long)lun, (unsigned long long)*size);
	bs_resize_commit(bs, *size);
	return 0;
}
