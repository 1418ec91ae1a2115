// SPDX-License-Identifier: MIT
/*
 * Live changes to a running gateway (what the control socket's "apply" does) and its live state.
 * A new configuration is compared with the running one object by object: what is the same keeps
 * running undisturbed (sessions, commands), what differs is replaced, what is gone is closed.
 * Everything that can fail (opening backstores, building targets, binding portals) happens
 * before anything running is touched, so a failed apply leaves the gateway as it was.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_log.h"
#include "isc.h"

/* An old configuration kept alive for removed targets whose sessions still drain. */
struct isc_conf_hold {
	struct isc_gw_conf *conf;
	int refs;
};

static void isc_conf_hold_put(struct isc_conf_hold *h)
{
	if (!h || --h->refs > 0)
		return;
	isc_gw_conf_free(h->conf);
	free(h->conf);
	free(h);
}

static bool isc_str_eq(const char *a, const char *b)
{
	return !strcmp(a ? a : "", b ? b : "");
}

/* Same settings, compared through the tables that define them. */
static bool isc_conf_same(const struct gw_conf_key *tbl, const void *a, const void *b)
{
	json_t *ja = gw_conf_to_json(tbl, a, false), *jb = gw_conf_to_json(tbl, b, false);
	bool same = ja && jb && json_equal(ja, jb);

	json_decref(ja);
	json_decref(jb);
	return same;
}

static bool isc_lun_same(const struct isc_lun_conf *a, const struct isc_lun_conf *b)
{
	json_t *ja, *jb;
	bool same;

	if (!isc_conf_same(scsi_lu_conf_keys, &a->lu, &b->lu))
		return false;
	/* The whole backstore object: a remote one's paths and policies are not in
	 * bs_conf_keys. */
	ja = bs_conf_to_json(&a->bs, false);
	jb = bs_conf_to_json(&b->bs, false);
	same = ja && jb && json_equal(ja, jb);
	json_decref(ja);
	json_decref(jb);
	return same;
}

static bool isc_portal_same(const struct isc_portal_conf *a, const struct isc_portal_conf *b)
{
	return a->transport == b->transport && a->port == b->port &&
	       isc_str_eq(a->address, b->address);
}

static const struct isc_lun_conf *isc_find_lun(const struct isc_target_conf *tc, uint64_t lun)
{
	size_t i;

	for (i = 0; i < tc->nluns; i++)
		if (tc->luns[i].lu.lun == lun)
			return &tc->luns[i];
	return NULL;
}

static struct isc_portal *isc_find_portal(struct isc_gw *gw, const char *name)
{
	struct isc_portal *p;

	gw_list_for_each_entry(p, &gw->portals, node)
		if (!strcmp(p->conf->name, name))
			return p;
	return NULL;
}

/* ---------------------------------------------------------------------------------------- */
/* LUN removals that wait for commands */

bool isc_target_lun_blocked(const struct isc_target *t, uint64_t lun)
{
	const struct isc_lun_pending *lp;

	gw_list_for_each_entry(lp, &t->pending_luns, node)
		if (lp->lun == lun)
			return true;
	return false;
}

static void isc_lun_pending_free(struct isc_lun_pending *lp)
{
	gw_list_del(&lp->node);
	if (lp->bs)
		bs_destroy(lp->bs);
	gw_conf_free(scsi_lu_conf_keys, &lp->lu);
	free(lp);
}

void isc_target_pending_free(struct isc_target *t)
{
	while (!gw_list_empty(&t->pending_luns))
		isc_lun_pending_free(gw_list_first_entry(&t->pending_luns, struct isc_lun_pending,
							 node));
	if (t->hold) {
		isc_conf_hold_put(t->hold);
		t->hold = NULL;
	}
}

/* Tries to finish one pending removal: true when done. */
static bool isc_lun_pending_try(struct isc_target *t, struct isc_lun_pending *lp)
{
	struct gw_errlist errs;
	int r = scsi_dev_del_lu(t->dev, lp->lun);

	if (r == -EBUSY)
		return false;
	if (lp->bs) {
		gw_errlist_init(&errs);
		r = scsi_dev_add_lu(t->dev, &lp->lu, lp->bs, &errs);
		if (r)
			gw_err("iscsi", "%s: LUN %llu could not be added back: %s", t->conf->name,
			       (unsigned long long)lp->lun, strerror(-r));
		else
			lp->bs = NULL;	/* the LU owns it */
		gw_errlist_fini(&errs);
	}
	isc_lun_pending_free(lp);
	return true;
}

static void isc_lun_timer_fn(struct gw_timer *tm)
{
	struct isc_gw *gw = gw_container_of(tm, struct isc_gw, lun_timer);
	struct isc_lun_pending *lp, *tmp;
	struct isc_target *t;
	bool left = false;

	gw_list_for_each_entry(t, &gw->targets, node) {
		gw_list_for_each_entry_safe(lp, tmp, &t->pending_luns, node)
			if (!isc_lun_pending_try(t, lp))
				left = true;
	}
	if (!left) {
		gw_timer_disarm(&gw->lun_timer);
		gw->lun_timer_on = false;
	}
}

static void isc_lun_timer_start(struct isc_gw *gw)
{
	if (gw->lun_timer_on)
		return;
	if (gw->lun_timer.w.fd < 0 && gw_timer_init(&gw->lun_timer, gw->loop, isc_lun_timer_fn))
		return;
	if (gw_timer_arm(&gw->lun_timer, 50, 50) == 0)
		gw->lun_timer_on = true;
}

/* Removes (and with bs, replaces) a LUN now, or once its commands drained. */
static void isc_lun_replace(struct isc_target *t, uint64_t lun, const struct scsi_lu_conf *lu,
			    struct bs *bs)
{
	struct isc_lun_pending *lp = calloc(1, sizeof(*lp));

	if (!lp) {
		gw_err("iscsi", "%s: out of memory removing LUN %llu", t->conf->name,
		       (unsigned long long)lun);
		if (bs)
			bs_destroy(bs);
		return;
	}
	lp->lun = lun;
	lp->bs = bs;
	if (lu) {
		/* A copy through the table, so the pending entry owns its strings. */
		json_t *j = gw_conf_to_json(scsi_lu_conf_keys, lu, false);
		struct gw_errlist errs;

		gw_errlist_init(&errs);
		gw_conf_defaults(scsi_lu_conf_keys, &lp->lu);
		if (j)
			gw_conf_parse(scsi_lu_conf_keys, &lp->lu, j, "", NULL, &errs);
		json_decref(j);
		gw_errlist_fini(&errs);
	}
	gw_list_add_tail(&t->pending_luns, &lp->node);
	if (!isc_lun_pending_try(t, lp)) {
		gw_info("iscsi", "%s: LUN %llu: waiting for commands in flight before removing it",
			t->conf->name, (unsigned long long)lun);
		isc_lun_timer_start(t->gw);
	}
}

/* ---------------------------------------------------------------------------------------- */
/* Closing what a change takes away */

static void isc_close_portal_conns(struct isc_gw *gw, struct isc_portal *p)
{
	struct isc_conn *c, *ctmp;
	struct isc_session *s;

	gw_list_for_each_entry_safe(c, ctmp, &gw->login_conns, node)
		if (c->portal == p)
			isc_conn_close(c, "portal removed");
	gw_list_for_each_entry(s, &gw->sessions, node)
		gw_list_for_each_entry_safe(c, ctmp, &s->conns, node)
			if (c->portal == p)
				isc_conn_close(c, "portal removed");
}

static void isc_retire_target(struct isc_gw *gw, struct isc_target *t, struct isc_conf_hold *h)
{
	struct isc_session *s, *stmp;
	struct isc_conn *c, *ctmp;

	gw_info("iscsi", "target %s removed", t->conf->name);
	gw_list_for_each_entry_safe(c, ctmp, &gw->login_conns, node)
		if (isc_login_uses_target(c, t))
			isc_conn_close(c, "target removed");
	gw_list_del(&t->node);
	t->removing = true;
	if (gw_list_empty(&t->sessions)) {
		isc_target_destroy(t);
		return;
	}
	gw_list_add_tail(&gw->dying_targets, &t->node);
	t->hold = h;
	h->refs++;
	gw_list_for_each_entry_safe(s, stmp, &t->sessions, tnode)
		isc_session_close(s, "target removed");
}

/* Sessions of initiators the new ACL no longer admits. */
static void isc_enforce_acl(struct isc_target *t)
{
	const struct isc_chap_conf *chap;
	struct isc_session *s, *stmp;

	gw_list_for_each_entry_safe(s, stmp, &t->sessions, tnode)
		if (!s->closing && isc_target_admit(t, s->initiator, &chap))
			isc_session_close(s, "initiator no longer allowed");
}

/* ---------------------------------------------------------------------------------------- */
/* Apply */

struct isc_apply_lun {
	struct isc_target *t;		/* running target */
	const struct isc_lun_conf *conf;	/* in the new configuration */
	bool replace;			/* an LU with this number runs now */
	struct bs *bs;
};

/* Opens the backstores of LUNs that are new or changed in a kept target (tc, index ti). */
static int isc_apply_open_luns(struct isc_gw *gw, struct isc_target *ot,
			       const struct isc_target_conf *tc, size_t ti,
			       struct isc_apply_lun **luns, size_t *nluns, struct gw_errlist *errs)
{
	char path[128];
	size_t j;
	int r;

	for (j = 0; j < tc->nluns; j++) {
		const struct isc_lun_conf *nl = &tc->luns[j];
		const struct isc_lun_conf *ol = isc_find_lun(ot->conf, nl->lu.lun);
		struct isc_apply_lun *al;

		if (ol && isc_lun_same(ol, nl))
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
		r = isc_bs_open(gw->loop, &nl->bs, path, errs, &al->bs);
		if (r)
			return r;
		(*nluns)++;
	}
	return 0;
}

int isc_gw_apply(struct isc_gw *gw, struct isc_gw_conf *nc, struct gw_errlist *errs)
{
	struct isc_target **new_t = NULL, **keep_t = NULL, *t, *ttmp;
	struct isc_portal **new_p = NULL, *p, *ptmp;
	struct isc_apply_lun *luns = NULL;
	struct isc_conf_hold *hold = NULL;
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

		if (ot && ot->conf->tpgt == tc->tpgt) {
			keep_t[i] = ot;
			r = isc_apply_open_luns(gw, ot, tc, i, &luns, &nluns, errs);
			if (r)
				goto fail;
			continue;
		}
		r = isc_target_new(gw, tc, i, errs, &new_t[i]);
		if (r)
			goto fail;
	}
	for (i = 0; i < nc->nportals; i++) {
		struct isc_portal_conf *pc = &nc->portals[i];

		p = isc_find_portal(gw, pc->name);
		if (p && isc_portal_same(p->conf, pc))
			continue;
		new_p[i] = calloc(1, sizeof(*new_p[i]));
		if (!new_p[i]) {
			r = -ENOMEM;
			goto fail;
		}
		new_p[i]->gw = gw;
		new_p[i]->conf = pc;
		gw_list_init(&new_p[i]->node);
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
		gw_info("iscsi", "portal %s removed", p->conf->name);
		isc_close_portal_conns(gw, p);
		if (p->dp)
			dmv_portal_destroy(p->dp);
		gw_list_del(&p->node);
		free(p);
	}
	gw_list_for_each_entry_safe(t, ttmp, &gw->targets, node) {
		bool kept = false;

		for (i = 0; i < nc->ntargets; i++)
			if (keep_t[i] == t)
				kept = true;
		if (!kept)
			isc_retire_target(gw, t, hold);
	}

	/* Phase 3: the kept targets follow their new settings, new things start. */
	for (i = 0; i < nc->ntargets; i++) {
		struct isc_target_conf *oc;

		t = keep_t[i];
		if (!t)
			continue;
		oc = t->conf;
		for (j = 0; j < oc->nluns; j++)
			if (!isc_find_lun(&nc->targets[i], oc->luns[j].lu.lun))
				isc_lun_replace(t, oc->luns[j].lu.lun, NULL, NULL);
		t->conf = &nc->targets[i];
		isc_enforce_acl(t);
	}
	for (i = 0; i < nluns; i++) {
		struct isc_apply_lun *al = &luns[i];

		isc_target_lun_stats(al->t, al->conf->lu.lun);
		if (al->replace)
			isc_lun_replace(al->t, al->conf->lu.lun, &al->conf->lu, al->bs);
		else if (isc_lu_add(al->t->dev, &al->conf->lu, al->bs, al->t->conf->name, errs))
			bs_destroy(al->bs);
		al->bs = NULL;
	}
	for (i = 0; i < nc->ntargets; i++) {
		if (!new_t[i])
			continue;
		gw_list_add_tail(&gw->targets, &new_t[i]->node);
		gw_info("iscsi", "target %s added", new_t[i]->conf->name);
		new_t[i] = NULL;
	}
	for (i = 0; i < nc->nportals; i++) {
		if (!new_p[i])
			continue;
		gw_list_add_tail(&gw->portals, &new_p[i]->node);
		new_p[i] = NULL;
	}
	gw->conf = nc;
	isc_conf_hold_put(hold);
	free(new_t);
	free(keep_t);
	free(new_p);
	free(luns);
	/* Portals listen last: a bind failure is reported, the rest of the change stands. */
	r = isc_gw_listen(gw);
	if (r)
		gw_errlist_add(errs, "portals", "cannot listen: %s", strerror(-r));
	return r;

fail:
	for (i = 0; i < nluns; i++)
		if (luns[i].bs)
			bs_destroy(luns[i].bs);
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
	isc_gw_conf_free(nc);
	free(nc);
	return r ? r : -EINVAL;
}

/* ---------------------------------------------------------------------------------------- */
/* State */

static json_t *isc_state_conn(const struct isc_conn *c)
{
	const struct dmv_conn *dc = c->dc;

	return json_pack("{s:i, s:s, s:s, s:s, s:b, s:b, s:I, s:I, s:I, s:I}",
			 "cid", (int)c->cid, "transport", dc->tp->name, "peer", dc->peer,
			 "local", dc->local, "header_digest", dc->params.header_digest,
			 "data_digest", dc->params.data_digest,
			 "rx_pdus", (json_int_t)dc->rx_pdus, "tx_pdus", (json_int_t)dc->tx_pdus,
			 "rx_bytes", (json_int_t)dc->rx_bytes,
			 "tx_bytes", (json_int_t)dc->tx_bytes);
}

static json_t *isc_state_session(const struct isc_session *s)
{
	const struct isc_conn *c;
	char isid[16];
	json_t *conns = json_array(), *o;

	snprintf(isid, sizeof(isid), "%02x%02x%02x%02x%02x%02x", s->isid[0], s->isid[1],
		 s->isid[2], s->isid[3], s->isid[4], s->isid[5]);
	gw_list_for_each_entry(c, &s->conns, node)
		json_array_append_new(conns, isc_state_conn(c));
	o = json_pack("{s:i, s:s, s:s?, s:s, s:s, s:o, s:I, s:i, s:i, s:I, s:I, s:I}",
		      "tsih", (int)s->tsih, "type", s->target ? "normal" : "discovery",
		      "target", s->target ? s->target->conf->name : NULL,
		      "initiator", s->initiator, "isid", isid, "connections", conns,
		      "exp_cmdsn", (json_int_t)s->exp_cmdsn, "queue_depth", (int)s->queue_depth,
		      "active", (int)s->active, "commands", (json_int_t)s->cmds,
		      "read_bytes", (json_int_t)s->read_bytes,
		      "write_bytes", (json_int_t)s->write_bytes);
	return o;
}

json_t *isc_gw_state(struct isc_gw *gw)
{
	static const char *const tnames[] = { "tcp", "iser" };
	json_t *portals = json_array(), *targets = json_array(), *sessions = json_array();
	struct isc_session *s;
	struct isc_portal *p;
	struct isc_target *t;

	gw_list_for_each_entry(p, &gw->portals, node) {
		json_t *po = json_pack(
			"{s:s, s:s, s:s, s:i, s:b, s:s?}", "name", p->conf->name,
			"transport", tnames[p->conf->transport == ISC_PORTAL_ISER],
			"address", p->conf->address ? p->conf->address : "",
			"port", (int)p->conf->port, "listening", p->dp && p->dp->listening,
			"bound", p->dp && p->dp->listening ? p->dp->addr : NULL);

		/* What the transport holds for this portal: counts that must fall back to zero. */
		if (po && p->dp && (p->dp->tp->caps & DMV_CAP_RDMA)) {
			const struct dmv_portal_res *r = &p->dp->res;

			json_object_set_new(po, "resources", json_pack(
				"{s:i, s:i, s:i, s:i, s:i, s:I, s:I, s:I}", "connections",
				(int)r->conns, "qps", (int)r->qps, "mrs", (int)r->mrs,
				"buffers", (int)r->bufs, "buffers_in_use", (int)r->bufs_in_use,
				"registered_bytes", (json_int_t)r->reg_bytes,
				"rdma_writes", (json_int_t)r->rdma_writes,
				"rdma_reads", (json_int_t)r->rdma_reads));
		}
		json_array_append_new(portals, po);
	}
	gw_list_for_each_entry(t, &gw->targets, node) {
		json_t *luns = json_array();
		size_t i, n = 0;

		for (i = 0; i < t->nstats; i++) {
			const struct isc_lun_stats *st = &t->stats[i];

			if (!scsi_dev_find_lu(t->dev, st->lun))
				continue;
			json_array_append_new(luns, json_pack(
				"{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:b}",
				"lun", (json_int_t)st->lun, "read_ops", (json_int_t)st->read_ops,
				"write_ops", (json_int_t)st->write_ops,
				"other_ops", (json_int_t)st->other_ops,
				"read_bytes", (json_int_t)st->read_bytes,
				"write_bytes", (json_int_t)st->write_bytes,
				"errors", (json_int_t)st->errors,
				"removing", isc_target_lun_blocked(t, st->lun)));
		}
		gw_list_for_each_entry(s, &t->sessions, tnode)
			n++;
		json_array_append_new(targets, json_pack("{s:s, s:i, s:o}", "name", t->conf->name,
							 "sessions", (int)n, "luns", luns));
	}
	gw_list_for_each_entry(s, &gw->sessions, node)
		json_array_append_new(sessions, isc_state_session(s));
	return json_pack("{s:o, s:o, s:o, s:i}", "portals", portals, "targets", targets,
			 "sessions", sessions, "connections", (int)gw->nconns);
}

int isc_gw_drop_session(struct isc_gw *gw, uint16_t tsih)
{
	struct isc_session *s;

	gw_list_for_each_entry(s, &gw->sessions, node) {
		if (s->tsih != tsih || s->closing)
			continue;
		isc_session_close(s, "dropped by the administrator");
		return 0;
	}
	return -ENOENT;
}
