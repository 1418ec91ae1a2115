// SPDX-License-Identifier: MIT
/*
 * Targets, portals and the isc_gw object that owns the iSCSI side of the gateway: the runtime
 * objects' life cycle (their keyword tables are in gateway/conf/conf_isc.c).
 * Building them from a configuration (SCSI devices, LUs, backstores) is gateway/ctl/'s job.
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

void isc_gw_add_portal(struct isc_gw *gw, struct isc_portal *p)
{
	pthread_mutex_lock(&gw->reg_lock);
	gw_list_add_tail(&gw->portals, &p->node);
	pthread_mutex_unlock(&gw->reg_lock);
}

void isc_portal_set_dmv(struct isc_portal *p, struct dmv_portal *dp)
{
	pthread_mutex_lock(&p->gw->reg_lock);
	p->dp = dp;
	pthread_mutex_unlock(&p->gw->reg_lock);
}

static void isc_sync_loop(struct isc_loop *lp, void *arg)
{
	(void)lp;
	(void)arg;
}

void isc_gw_sync(struct isc_gw *gw)
{
	isc_gw_each_loop(gw, isc_sync_loop, NULL);
}

void isc_gw_add_target(struct isc_gw *gw, struct isc_target *t)
{
	pthread_mutex_lock(&gw->reg_lock);
	gw_list_add_tail(&gw->targets, &t->node);
	pthread_mutex_unlock(&gw->reg_lock);
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

void isc_target_stats(struct isc_target *t, struct isc_lun_stats *out)
{
	struct isc_stats_sum m = { t, out };

	memset(out, 0, t->nstat_luns * sizeof(*out));
	for (size_t i = 0; i < t->nstat_luns; i++)
		out[i].lun = t->stat_luns[i];
	isc_gw_each_loop(t->gw, isc_stats_loop, &m);
}

void isc_target_destroy(struct isc_target *t)
{
	pthread_mutex_lock(&t->gw->reg_lock);
	gw_list_del(&t->node);
	pthread_mutex_unlock(&t->gw->reg_lock);
	if (t->release)
		t->release(t);
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

/* Loop 0 walks every loop's sessions and logins: each loop's part runs on its thread. */
struct isc_walk {
	struct isc_target *target;	/* its sessions / logins (NULL: any) */
	struct isc_portal *portal;	/* its connections (NULL: any) */
	bool acl;			/* only sessions the target no longer admits */
	uint16_t tsih;			/* only this session (0: any) */
	const char *why;
	int found;
};

static void isc_walk_loop(struct isc_loop *lp, void *arg)
{
	struct isc_walk *w = arg;
	struct isc_session *s, *stmp;
	struct isc_conn *c, *ctmp;
	const struct isc_chap_conf *chap;

	gw_list_for_each_entry_safe(c, ctmp, &lp->login_conns, node)
		if ((w->target && !w->acl && isc_login_uses_target(c, w->target)) ||
		    (w->portal && c->portal == w->portal) || (!w->target && !w->portal && !w->tsih))
			isc_conn_close(c, w->why);
	gw_list_for_each_entry_safe(s, stmp, &lp->sessions, lnode) {
		if (w->portal) {
			gw_list_for_each_entry_safe(c, ctmp, &s->conns, node)
				if (c->portal == w->portal)
					isc_conn_close(c, w->why);
			continue;
		}
		if (s->closing || (w->target && s->target != w->target) ||
		    (w->tsih && s->tsih != w->tsih))
			continue;
		if (w->acl && !isc_target_admit(w->target, s->initiator, &chap))
			continue;
		w->found++;
		isc_session_close(s, w->why);
	}
}

void isc_target_retire(struct isc_target *t)
{
	struct isc_gw *gw = t->gw;
	struct isc_walk w = { .target = t, .why = "target removed" };
	bool empty;

	gw_info("iscsi", "target %s removed", t->conf->name);
	/* Out of the list first: no login on any loop finds it after the walk below. */
	pthread_mutex_lock(&gw->reg_lock);
	gw_list_del(&t->node);
	pthread_mutex_unlock(&gw->reg_lock);
	isc_gw_each_loop(gw, isc_walk_loop, &w);
	pthread_mutex_lock(&gw->reg_lock);
	t->removing = true;
	empty = gw_list_empty(&t->sessions);
	if (!empty)
		gw_list_add_tail(&gw->dying_targets, &t->node);
	pthread_mutex_unlock(&gw->reg_lock);
	/* Else the last session to end takes it along (on loop 0, isc_session.c). */
	if (empty)
		isc_target_destroy(t);
}

void isc_target_enforce_acl(struct isc_target *t)
{
	struct isc_walk w = { .target = t, .acl = true, .why = "initiator no longer allowed" };

	/* Also the barrier after the target's new configuration: once every loop has run this,
	 * none still reads the old one. */
	isc_gw_each_loop(t->gw, isc_walk_loop, &w);
}

int isc_gw_drop_session(struct isc_gw *gw, uint16_t tsih)
{
	struct isc_walk w = { .tsih = tsih, .why = "dropped by the administrator" };

	if (!tsih)
		return -ENOENT;
	isc_gw_each_loop(gw, isc_walk_loop, &w);
	return w.found ? 0 : -ENOENT;
}

struct isc_portal *isc_portal_new(struct isc_gw *gw, struct isc_portal_conf *conf)
{
	struct isc_portal *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->gw = gw;
	p->conf = conf;
	gw_list_init(&p->node);
	return p;
}

void isc_portal_remove(struct isc_portal *p)
{
	struct isc_gw *gw = p->gw;
	struct isc_walk w = { .portal = p, .why = "portal removed" };
	struct dmv_portal *dp;

	gw_info("iscsi", "portal %s removed", p->conf->name);
	isc_gw_each_loop(gw, isc_walk_loop, &w);
	pthread_mutex_lock(&gw->reg_lock);
	dp = p->dp;
	p->dp = NULL;
	gw_list_del(&p->node);
	pthread_mutex_unlock(&gw->reg_lock);
	/* Outside the lock: destroying a portal may wait for its other loops. */
	if (dp)
		dmv_portal_destroy(dp);
	free(p);
}

struct isc_gw *isc_gw_alloc(struct gw_loop *loop, struct isc_gw_conf *conf)
{
	struct isc_gw *gw = calloc(1, sizeof(*gw));

	if (!gw)
		return NULL;
	gw->loop = loop;
	gw->conf = conf;
	gw->data_mem_max = ISC_DATA_MEM_DEFAULT;
	for (unsigned i = 0; i < GW_LOOPS_MAX; i++) {
		gw->lps[i].idx = i;
		pdu_pool_init(&gw->lps[i].pdus, 0);
		gw_list_init(&gw->lps[i].task_free);
		gw_list_init(&gw->lps[i].sessions);
		gw_list_init(&gw->lps[i].login_conns);
	}
	gw->lps[0].loop = loop;
	pthread_mutex_init(&gw->reg_lock, NULL);
	gw_list_init(&gw->portals);
	gw_list_init(&gw->targets);
	gw_list_init(&gw->sessions);
	gw_list_init(&gw->dying_targets);
	gw->lun_timer.w.fd = -1;
	gw->next_tsih = 1;
	return gw;
}

int isc_gw_set_loops(struct isc_gw *gw, struct gw_loops *loops)
{
	if (loops && (!loops->n || loops->n > GW_LOOPS_MAX || loops->loop[0] != gw->loop))
		return -EINVAL;
	gw->loops = loops && loops->n > 1 ? loops : NULL;
	for (unsigned i = 1; gw->loops && i < loops->n; i++)
		gw->lps[i].loop = loops->loop[i];
	return 0;
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

void isc_gw_stop(struct isc_gw *gw)
{
	struct isc_portal *p;
	struct isc_walk w = { .why = "gateway stopping" };

	__atomic_store_n(&gw->stopping, true, __ATOMIC_RELEASE);
	gw_list_for_each_entry(p, &gw->portals, node) {
		struct dmv_portal *dp;

		pthread_mutex_lock(&gw->reg_lock);
		dp = p->dp;
		p->dp = NULL;
		pthread_mutex_unlock(&gw->reg_lock);
		if (dp)
			dmv_portal_destroy(dp);
	}
	/* Every session and login, each on its loop (before the loop threads stop). */
	isc_gw_each_loop(gw, isc_walk_loop, &w);
}

bool isc_gw_idle(const struct isc_gw *gw)
{
	struct isc_gw *g = (struct isc_gw *)gw;
	bool idle;

	pthread_mutex_lock(&g->reg_lock);
	idle = gw_list_empty(&gw->sessions) && !isc_gw_nconns(gw) &&
	       !__atomic_load_n(&gw->msgs, __ATOMIC_ACQUIRE);
	pthread_mutex_unlock(&g->reg_lock);
	return idle;
}

void isc_gw_destroy(struct isc_gw *gw)
{
	struct isc_portal *p, *ptmp;
	struct isc_target *t, *ttmp;

	if (!gw)
		return;
	if (!isc_gw_stopping(gw))
		isc_gw_stop(gw);
	if (!isc_gw_idle(gw))
		gw_warn("iscsi", "destroying with sessions still alive");
	gw_list_for_each_entry_safe(t, ttmp, &gw->targets, node)
		isc_target_destroy(t);
	gw_list_for_each_entry_safe(t, ttmp, &gw->dying_targets, node)
		isc_target_destroy(t);
	gw_timer_fini(&gw->lun_timer);
	gw_list_for_each_entry_safe(p, ptmp, &gw->portals, node) {
		gw_list_del(&p->node);
		free(p);
	}
	for (unsigned i = 0; i < GW_LOOPS_MAX; i++) {
		struct isc_loop *lp = &gw->lps[i];

		while (!gw_list_empty(&lp->task_free)) {
			struct isc_task *tk = gw_list_first_entry(&lp->task_free, struct isc_task,
								  cnode);

			gw_list_del(&tk->cnode);
			free(tk->buf);
			free(tk);
		}
		pdu_pool_fini(&lp->pdus);
	}
	conf_gw_free(gw->conf);
	free(gw->conf);
	pthread_mutex_destroy(&gw->reg_lock);
	free(gw);
}
