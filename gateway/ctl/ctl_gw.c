// SPDX-License-Identifier: MIT
/*
 * The gateway object (struct ctl_gw, ctl_priv.h) and its life cycle: built from a
 * configuration (the iSCSI engine, a portal per portals[] entry, a target per targets[] entry
 * with its SCSI device and LUs), listening, the bounded start-up wait for remote back ends, and
 * shutdown. The iSCSI engine gets its SCSI devices from here and never opens a backstore.
 * Calls ctl_target.c and ctl_lu.c below it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_priv.h"
#include "gw_log.h"

int ctl_gw_create(struct gw_loop *loop, struct isc_gw_conf *conf, struct ctl_gw **out,
		  struct gw_errlist *errs)
{
	return ctl_gw_create_loops(loop, NULL, conf, out, errs);
}

int ctl_gw_create_loops(struct gw_loop *loop, struct gw_loops *loops, struct isc_gw_conf *conf,
			struct ctl_gw **out, struct gw_errlist *errs)
{
	struct ctl_gw *g = calloc(1, sizeof(*g));
	size_t i;
	int r;

	if (g)
		g->isc = isc_gw_alloc(loop);
	if (!g || !g->isc) {
		free(g);
		conf_gw_free(conf);
		free(conf);
		return -ENOMEM;
	}
	g->loop = loop;
	g->conf = conf;
	gw_list_init(&g->pending);
	g->lun_timer.w.fd = -1;
	isc_gw_set_conf(g->isc, conf);
	isc_gw_set_data_memory(g->isc, ISC_DATA_MEM_DEFAULT);
	r = isc_gw_set_loops(g->isc, loops);
	if (r) {
		gw_errlist_add(errs, "gateway.loops", "the loops do not start with the main loop");
		goto fail;
	}
	g->loops = loops && loops->n > 1 ? loops : NULL;
	for (i = 0; i < conf->nportals; i++) {
		struct isc_portal *p = isc_portal_new(g->isc, &conf->portals[i]);

		if (!p) {
			r = -ENOMEM;
			goto fail;
		}
		isc_gw_add_portal(g->isc, p);
	}
	for (i = 0; i < conf->ntargets; i++) {
		struct isc_target *t = NULL;

		r = ctl_target_new(g, &conf->targets[i], i, errs, &t);
		if (t)
			isc_gw_add_target(g->isc, t);
		if (!r && t)
			r = ctl_target_set_groups(t, conf);
		if (r)
			goto fail;
	}
	*out = g;
	return 0;
fail:
	ctl_gw_destroy(g);
	return r;
}

void ctl_gw_destroy(struct ctl_gw *g)
{
	if (!g)
		return;
	isc_gw_destroy(g->isc);
	gw_timer_fini(&g->lun_timer);
	conf_gw_free(g->conf);
	free(g->conf);
	free(g);
}

struct isc_gw *ctl_gw_engine(const struct ctl_gw *g)
{
	return g->isc;
}

const struct isc_gw_conf *ctl_gw_conf(const struct ctl_gw *g)
{
	return g->conf;
}

void ctl_gw_set_data_memory(struct ctl_gw *g, uint64_t bytes)
{
	isc_gw_set_data_memory(g->isc, bytes);
}

uint64_t ctl_gw_data_memory(const struct ctl_gw *g)
{
	return isc_gw_data_memory(g->isc);
}

int ctl_gw_listen(struct ctl_gw *g)
{
	struct isc_portal *p = NULL;
	int r;

	while ((p = isc_gw_next_portal(g->isc, p))) {
		r = isc_portal_listen(p);
		if (r)
			return r;
	}
	return 0;
}

bool ctl_gw_settled(const struct ctl_gw *g)
{
	const struct isc_target *t = NULL;

	while ((t = isc_gw_next_target(g->isc, t)))
		if (!scsi_dev_bs_settled(isc_target_dev(t)))
			return false;
	return true;
}

int ctl_gw_boot_wait(struct gw_loop *loop, const struct ctl_gw *g, uint64_t bound_ms)
{
	uint64_t end = gw_now_ms() + bound_ms;

	for (;;) {
		uint64_t now;

		if (ctl_gw_settled(g))
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

void ctl_gw_stop(struct ctl_gw *g)
{
	struct isc_target *t = NULL;

	isc_gw_stop(g->isc);
	/* Remote backstores stop queueing and fail what is left after their drain time. */
	while ((t = isc_gw_next_target(g->isc, t)))
		scsi_dev_bs_shutdown(isc_target_dev(t));
	while ((t = isc_gw_next_draining(g->isc, t)))
		scsi_dev_bs_shutdown(isc_target_dev(t));
}

bool ctl_gw_idle(const struct ctl_gw *g)
{
	return isc_gw_idle(g->isc);
}
