// SPDX-License-Identifier: MIT
/*
 * Building the gateway from its configuration: the iSCSI gateway object, a portal per
 * portals[] entry (listening through a datamover), and per target a SCSI device with its
 * target port and its LUs over the backstores opened here. Moved out of the iSCSI layer, which
 * now gets its SCSI devices from here and never opens a backstore.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bs.h"
#include "ctl.h"
#include "dmv.h"
#include "gw_log.h"
#include "isc.h"
#include "scsi.h"

/* Moves the errors of a lower layer, which names fields relative to its own object, into errs
 * under path ("targets[0].luns[1].backstore" + ".path"). */
static void ctl_errs_prefix(struct gw_errlist *errs, const struct gw_errlist *sub, const char *path)
{
	char field[256];
	size_t i;

	for (i = 0; i < sub->n; i++) {
		if (sub->v[i].field && *sub->v[i].field)
			snprintf(field, sizeof(field), "%s.%s", path, sub->v[i].field);
		else
			snprintf(field, sizeof(field), "%s", path);
		gw_errlist_add(errs, field, "%s", sub->v[i].msg);
	}
}

struct ctl_bs_call {
	struct gw_loop *loop;
	const struct bs_conf *conf;
	struct bs **out;
	struct gw_errlist *errs;
};

static int ctl_bs_open_fn(void *arg)
{
	struct ctl_bs_call *c = arg;

	return bs_create(c->loop, c->conf, c->out, c->errs);
}

static int ctl_bs_close_fn(void *arg)
{
	bs_destroy(arg);
	return 0;
}

void ctl_bs_close(struct bs *bs)
{
	if (bs)
		gw_loop_call(bs->loop, ctl_bs_close_fn, bs);
}

int ctl_bs_open(struct gw_loop *loop, const struct bs_conf *conf, const char *path,
		struct gw_errlist *errs, struct bs **out)
{
	struct ctl_bs_call c = { .loop = loop, .conf = conf, .out = out };
	struct gw_errlist sub;
	int r;

	gw_errlist_init(&sub);
	c.errs = &sub;
	/* On the loop that will own it: its eventfds and ring join that loop's epoll set. */
	r = gw_loop_call(loop, ctl_bs_open_fn, &c);
	if (r) {
		if (sub.n)
			ctl_errs_prefix(errs, &sub, path);
		else
			gw_errlist_add(errs, path, "cannot open: %s", strerror(-r));
	}
	gw_errlist_fini(&sub);
	return r;
}

int ctl_lu_add(struct scsi_dev *dev, const struct scsi_lu_conf *conf, struct bs *bs,
	       const char *path, struct gw_errlist *errs)
{
	struct gw_errlist sub;
	int r;

	gw_errlist_init(&sub);
	r = scsi_dev_add_lu(dev, conf, bs, &sub);
	if (r) {
		if (sub.n)
			ctl_errs_prefix(errs, &sub, path);
		else
			gw_errlist_add(errs, path, "cannot add LUN %llu: %s",
				       (unsigned long long)conf->lun, strerror(-r));
	}
	gw_errlist_fini(&sub);
	return r;
}

/* Builds a target and its LUs; not linked anywhere yet. */
int ctl_target_new(struct isc_gw *gw, struct isc_target_conf *tc, size_t idx,
		   struct gw_errlist *errs, struct isc_target **out)
{
	struct isc_target *t = isc_target_alloc(gw, tc);
	char pname[ISC_NAME_MAX + 16], path[96];
	size_t i;
	int r;

	if (!t)
		return -ENOMEM;
	t->release = ctl_target_release;
	*out = t;
	t->dev = scsi_dev_create(gw->loop, tc->name);
	if (!t->dev) {
		snprintf(path, sizeof(path), "targets[%zu]", idx);
		gw_errlist_add(errs, path, "cannot create the SCSI device");
		return -ENOMEM;
	}
	snprintf(pname, sizeof(pname), "%s,t,0x%04x", tc->name, tc->tpgt);
	t->port = scsi_dev_add_port(t->dev, pname, (uint16_t)tc->tpgt);
	if (!t->port) {
		snprintf(path, sizeof(path), "targets[%zu]", idx);
		gw_errlist_add(errs, path, "cannot create the SCSI target port");
		return -ENOMEM;
	}
	scsi_dev_set_event_cb(t->dev, isc_target_scsi_event, t);
	/* The LUs spread over the loops (each opened on the loop owning fewest); with one loop
	 * every LU is loop 0's, as before. */
	scsi_dev_set_loops(t->dev, gw->loops);
	for (i = 0; i < tc->nluns; i++) {
		struct bs *bs;

		snprintf(path, sizeof(path), "targets[%zu].luns[%zu].backstore", idx, i);
		r = ctl_bs_open(scsi_dev_next_lu_loop(t->dev), &tc->luns[i].bs, path, errs, &bs);
		if (r)
			return r;
		snprintf(path, sizeof(path), "targets[%zu].luns[%zu]", idx, i);
		r = ctl_lu_add(t->dev, &tc->luns[i].lu, bs, path, errs);
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
	r = scsi_dev_set_groups(t->dev, g, c->ngroups);
	free(g);
	return r;
}

int ctl_gw_create(struct gw_loop *loop, struct isc_gw_conf *conf, struct isc_gw **out,
		  struct gw_errlist *errs)
{
	return ctl_gw_create_loops(loop, NULL, conf, out, errs);
}

int ctl_gw_create_loops(struct gw_loop *loop, struct gw_loops *loops, struct isc_gw_conf *conf,
			struct isc_gw **out, struct gw_errlist *errs)
{
	struct isc_gw *gw = isc_gw_alloc(loop, conf);
	size_t i;
	int r;

	if (!gw) {
		conf_gw_free(conf);
		free(conf);
		return -ENOMEM;
	}
	r = isc_gw_set_loops(gw, loops);
	if (r) {
		gw_errlist_add(errs, "gateway.loops", "the loops do not start with the main loop");
		goto fail;
	}
	for (i = 0; i < conf->nportals; i++) {
		struct isc_portal *p = isc_portal_new(gw, &conf->portals[i]);

		if (!p) {
			r = -ENOMEM;
			goto fail;
		}
		gw_list_add_tail(&gw->portals, &p->node);
	}
	for (i = 0; i < conf->ntargets; i++) {
		struct isc_target *t = NULL;

		r = ctl_target_new(gw, &conf->targets[i], i, errs, &t);
		if (t)
			gw_list_add_tail(&gw->targets, &t->node);
		if (!r && t)
			r = ctl_target_set_groups(t, conf);
		if (r)
			goto fail;
	}
	*out = gw;
	return 0;
fail:
	isc_gw_destroy(gw);
	return r;
}

int ctl_gw_listen(struct isc_gw *gw)
{
	struct isc_portal *p;
	int r;

	gw_list_for_each_entry(p, &gw->portals, node) {
		struct dmv_portal_conf pc = {
			.name = p->conf->name,
			.address = p->conf->address,
			.port = (uint16_t)p->conf->port,
		};
		const char *tn = conf_transport_name(p->conf->transport);
		struct dmv_portal *dp;

		if (p->dp)
			continue;
		/* With several loops the listener hands each connection to one (the datamover's
		 * placement, isc_conn_place), which serves it with its own PDU pool. */
		pc.loops = gw->loops;
		pc.place_timeout_ms = p->conf->login_timeout * 1000;
		for (unsigned i = 0; gw->loops && i < gw->loops->n; i++)
			pc.pools[i] = &gw->lps[i].pdus;
		r = dmv_listen(tn, gw->loop, &pc, &gw->lps[0].pdus, &dp);
		if (r == -EPROTONOSUPPORT) {
			/* A configuration written for a transport this build lacks (iSER) still
			 * brings up the portals it can serve. */
			gw_warn("iscsi", "portal %s skipped: no %s datamover in this build",
				p->conf->name, tn);
			continue;
		}
		if (r)
			return r;
		dp->accept = isc_conn_accept;
		dp->priv = p;
		dp->place = isc_conn_place;
		dp->admit = isc_conn_admit;
		dp->unadmit = isc_conn_unadmit;
		isc_portal_set_dmv(p, dp);
		/* One not bound yet said why, and says so again once it listens. */
		if (p->dp->listening)
			gw_info("iscsi", "listening on %s (%s)", p->dp->addr, tn);
	}
	return 0;
}



bool ctl_gw_settled(const struct isc_gw *gw)
{
	const struct isc_target *t;

	gw_list_for_each_entry(t, &gw->targets, node)
		if (!scsi_dev_bs_settled(t->dev))
			return false;
	return true;
}

int ctl_gw_boot_wait(struct gw_loop *loop, const struct isc_gw *gw, uint64_t bound_ms)
{
	uint64_t end = gw_now_ms() + bound_ms;

	for (;;) {
		uint64_t now;

		if (ctl_gw_settled(gw))
			return 0;
		if (loop->stopping)
			return -EINTR;
		now = gw_now_ms();
		if (now >= end)
			return -ETIMEDOUT;
		/* The LUNs tick every 100 ms; a shorter wait keeps the bound close. */
		gw_loop_run_once(loop, (int)(end - now < 100 ? end - now : 100));
	}
}

void ctl_gw_bs_shutdown(struct isc_gw *gw)
{
	struct isc_target *t;

	gw_list_for_each_entry(t, &gw->targets, node)
		scsi_dev_bs_shutdown(t->dev);
	gw_list_for_each_entry(t, &gw->dying_targets, node)
		scsi_dev_bs_shutdown(t->dev);
}

