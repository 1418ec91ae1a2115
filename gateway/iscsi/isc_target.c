// SPDX-License-Identifier: MIT
/*
 * Targets: the runtime object of a configured target (its SCSI device and port, its sessions,
 * its per-LUN counters on every loop), what a login asks of it (lookup by name, admission,
 * portals) and its end. Below sessions; calls only isc_loop.c. Linking it into the gateway and
 * taking it out of service is isc_gw.c's; building it from a configuration (SCSI devices, LUs,
 * backstores) is gateway/ctl/'s.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_log.h"
#include "isc_priv.h"

/* ---------------------------------------------------------------------------------------- */
/* Runtime */

struct isc_target *isc_gw_find_target(struct isc_gw *gw, const char *name)
{
	struct isc_target *t, *found = NULL;

	/* iSCSI names compare case-insensitively once normalised (RFC 3722): the config holds
	 * the normalised lower-case form, so a case-insensitive compare accepts what stringprep
	 * would have produced from the initiator's spelling. */
	pthread_mutex_lock(&gw->reg_lock);
	gw_list_for_each_entry(t, &gw->targets, node) {
		if (!strcasecmp(t->conf->name, name)) {
			found = t;
			break;
		}
	}
	pthread_mutex_unlock(&gw->reg_lock);
	return found;
}

bool isc_target_on_portal(const struct isc_target *t, const struct isc_portal *p)
{
	return gw_strlist_has(&t->conf->portals, p->conf->name);
}

static bool isc_chap_set(const struct isc_chap_conf *c)
{
	return c->user && *c->user;
}

int isc_target_admit(const struct isc_target *t, const char *initiator,
		     const struct isc_chap_conf **chap)
{
	const struct isc_target_conf *tc = t->conf;
	size_t i;

	*chap = isc_chap_set(&tc->chap) ? &tc->chap : NULL;
	for (i = 0; i < tc->ninitiators; i++) {
		if (strcasecmp(tc->initiators[i].name, initiator))
			continue;
		/* Per-initiator credentials win over the target's. */
		if (isc_chap_set(&tc->initiators[i].chap))
			*chap = &tc->initiators[i].chap;
		return 0;
	}
	return tc->allow_any_initiator ? 0 : -EACCES;
}

int isc_target_lun_register(struct isc_target *t, uint64_t lun)
{
	uint64_t *n;
	size_t i;

	for (i = 0; i < t->nstat_luns; i++)
		if (t->stat_luns[i] == lun)
			return 0;
	n = realloc(t->stat_luns, (t->nstat_luns + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	t->stat_luns = n;
	n[t->nstat_luns++] = lun;
	return 0;
}

struct isc_stats_sum {
	struct isc_target *t;
	struct isc_lun_stats *out;
};

static void isc_hist_sum(struct gw_hist *to, const struct gw_hist *from)
{
	for (unsigned int b = 0; b <= GW_HIST_BUCKETS; b++)
		to->count[b] += from->count[b];
	to->sum_ns += from->sum_ns;
}

/* One loop's table, on its thread, added into the sums. */
static void isc_stats_loop(struct isc_loop *lp, void *arg)
{
	struct isc_stats_sum *m = arg;
	const struct isc_loop_stats *ls = &m->t->lstats[lp->idx];

	for (size_t i = 0; i < m->t->nstat_luns; i++) {
		struct isc_lun_stats *o = &m->out[i];

		for (size_t k = 0; k < ls->n; k++) {
			const struct isc_lun_stats *st = &ls->v[k];

			if (st->lun != o->lun)
				continue;
			o->read_ops += st->read_ops;
			o->write_ops += st->write_ops;
			o->other_ops += st->other_ops;
			o->read_bytes += st->read_bytes;
			o->write_bytes += st->write_bytes;
			o->errors += st->errors;
			isc_hist_sum(&o->read_lat, &st->read_lat);
			isc_hist_sum(&o->write_lat, &st->write_lat);
			break;
		}
	}
}

int isc_target_stats(struct isc_target *t, struct isc_lun_stats **out, size_t *n)
{
	struct isc_stats_sum m = { t, calloc(t->nstat_luns ? t->nstat_luns : 1, sizeof(**out)) };

	if (!m.out)
		return -ENOMEM;
	for (size_t i = 0; i < t->nstat_luns; i++)
		m.out[i].lun = t->stat_luns[i];
	isc_gw_each_loop(t->gw, isc_stats_loop, &m);
	*out = m.out;
	*n = t->nstat_luns;
	return 0;
}

void isc_target_destroy(struct isc_target *t)
{
	pthread_mutex_lock(&t->gw->reg_lock);
	gw_list_del(&t->node);
	pthread_mutex_unlock(&t->gw->reg_lock);
	if (t->release)
		t->release(t, t->owner);
	if (t->dev)
		scsi_dev_destroy(t->dev);
	for (unsigned int i = 0; i < GW_LOOPS_MAX; i++)
		free(t->lstats[i].v);
	free(t->stat_luns);
	free(t);
}

struct isc_target *isc_target_alloc(struct isc_gw *gw, struct isc_target_conf *tc)
{
	struct isc_target *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->gw = gw;
	t->conf = tc;
	gw_list_init(&t->node);
	gw_list_init(&t->sessions);
	gw_list_init(&t->pending_luns);
	return t;
}

bool isc_target_lun_blocked(const struct isc_target *t, uint64_t lun)
{
	const struct isc_lun_block *lb;

	gw_list_for_each_entry(lb, &t->pending_luns, node)
		if (lb->lun == lun)
			return true;
	return false;
}

struct scsi_dev *isc_target_dev(const struct isc_target *t)
{
	return t->dev;
}

struct isc_target_conf *isc_target_conf(const struct isc_target *t)
{
	return t->conf;
}

void isc_target_set_conf(struct isc_target *t, struct isc_target_conf *tc)
{
	t->conf = tc;
}

void isc_target_set_owner(struct isc_target *t, void (*release)(struct isc_target *t, void *data),
			  void *data)
{
	t->release = release;
	t->owner = data;
}

void *isc_target_owner(const struct isc_target *t)
{
	return t->owner;
}

void isc_target_block_lun(struct isc_target *t, struct isc_lun_block *b)
{
	gw_list_add_tail(&t->pending_luns, &b->node);
}

void isc_lun_unblock(struct isc_lun_block *b)
{
	gw_list_del(&b->node);
	gw_list_init(&b->node);
}
