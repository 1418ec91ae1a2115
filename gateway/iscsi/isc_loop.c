// SPDX-License-Identifier: MIT
/*
 * The engine's loops: which per-loop part (struct isc_loop) serves a connection, running a
 * function on one loop's thread or on each in turn, and the gateway-wide counters read that
 * way. The bottom of the iSCSI engine's files: it calls none of the others.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "isc_priv.h"

static void isc_sync_loop(struct isc_loop *lp, void *arg)
{
	(void)lp;
	(void)arg;
}

void isc_gw_sync(struct isc_gw *gw)
{
	isc_gw_each_loop(gw, isc_sync_loop, NULL);
}

struct isc_loop *isc_gw_loop_of(struct isc_gw *gw, const struct gw_loop *loop)
{
	int i = gw->loops ? gw_loops_index(gw->loops, loop) : 0;

	return &gw->lps[i > 0 ? i : 0];
}

unsigned isc_gw_nloops(const struct isc_gw *gw)
{
	return gw->loops ? gw->loops->n : 1;
}

struct isc_each_call {
	struct isc_loop *lp;
	void (*fn)(struct isc_loop *lp, void *arg);
	void *arg;
};

static int isc_each_one(void *arg)
{
	struct isc_each_call *c = arg;

	c->fn(c->lp, c->arg);
	return 0;
}

void isc_gw_each_loop(struct isc_gw *gw, void (*fn)(struct isc_loop *lp, void *arg), void *arg)
{
	for (unsigned i = 0; i < isc_gw_nloops(gw); i++) {
		struct isc_each_call c = { &gw->lps[i], fn, arg };

		gw_loop_call(gw->lps[i].loop, isc_each_one, &c);
	}
}

struct isc_on_loop {
	struct isc_gw *gw;
	struct isc_loop *lp;
	void (*fn)(struct isc_loop *lp, const void *arg);
	max_align_t arg[];
};

static void isc_on_loop_msg(void *arg)
{
	struct isc_on_loop *m = arg;
	struct isc_gw *gw = m->gw;

	m->fn(m->lp, m->arg);
	free(m);
	__atomic_fetch_sub(&gw->msgs, 1, __ATOMIC_RELEASE);
}

int isc_gw_on_loop(struct isc_gw *gw, struct isc_loop *lp,
		   void (*fn)(struct isc_loop *lp, const void *arg), const void *arg, size_t len)
{
	struct isc_on_loop *m;
	int rc;

	if (gw_loop_current() == lp->loop || !gw->loops) {
		fn(lp, arg);
		return 0;
	}
	m = malloc(sizeof(*m) + len);
	if (!m)
		return -ENOMEM;
	*m = (struct isc_on_loop){ gw, lp, fn };
	memcpy(m->arg, arg, len);
	__atomic_fetch_add(&gw->msgs, 1, __ATOMIC_RELAXED);
	rc = gw_loop_send(lp->loop, isc_on_loop_msg, m);
	if (rc) {
		__atomic_fetch_sub(&gw->msgs, 1, __ATOMIC_RELEASE);
		free(m);
	}
	return rc;
}

bool isc_gw_stopping(const struct isc_gw *gw)
{
	return __atomic_load_n(&gw->stopping, __ATOMIC_ACQUIRE);
}

unsigned int isc_gw_nconns(const struct isc_gw *gw)
{
	return __atomic_load_n(&gw->nconns, __ATOMIC_RELAXED);
}

/* One loop's counters, read on that loop. */
struct isc_totals_call {
	struct isc_loop *lp;
	struct isc_gw_totals *out;
};

static int isc_loop_totals(void *arg)
{
	struct isc_totals_call *c = arg;

	c->out->tasks += c->lp->ntasks;
	c->out->tasks_cached += c->lp->ntask_free;
	c->out->pdus_in_use += c->lp->pdus.live;
	c->out->data_mem += c->lp->data_mem;
	c->out->task_set_full += c->lp->task_set_full;
	c->out->pdus_cached += c->lp->pdus.nfree;
	c->out->pdu_cache_bytes += pdu_pool_cached_bytes(&c->lp->pdus);
	return 0;
}

void isc_gw_totals(struct isc_gw *gw, struct isc_gw_totals *out)
{
	unsigned n = gw->loops ? gw->loops->n : 1;

	memset(out, 0, sizeof(*out));
	for (unsigned i = 0; i < n; i++) {
		struct isc_totals_call c = { &gw->lps[i], out };

		if (gw->lps[i].loop)
			gw_loop_call(gw->lps[i].loop, isc_loop_totals, &c);
		else
			isc_loop_totals(&c);
	}
}
