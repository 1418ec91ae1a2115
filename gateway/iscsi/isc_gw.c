// SPDX-License-Identifier: MIT
/*
 * The iSCSI engine object (struct isc_gw) and the handles ctl gets of it: its life cycle, every
 * change to its lists of portals and targets (under reg_lock, on loop 0), a portal's listener
 * and a target's device wired to the engine, and the walks over every loop's sessions and
 * logins that taking a target, a portal or an initiator out of service needs. The top of the
 * engine's files: it may call any of them, none of them calls it (the task queue reaches the
 * SCSI and TMF handlers through the ops it installs here).
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_log.h"
#include "isc_priv.h"

/* The task layer hands a command whose turn came to the SCSI handler, and a task a TMF waited
 * for back to task management. */
static const struct isc_task_ops isc_gw_task_ops = {
	.deliver = isc_task_deliver,
	.tmf_ended = isc_tmf_task_ended,
};

void isc_gw_add_portal(struct isc_gw *gw, struct isc_portal *p)
{
	pthread_mutex_lock(&gw->reg_lock);
	gw_list_add_tail(&gw->portals, &p->node);
	pthread_mutex_unlock(&gw->reg_lock);
}

static void isc_portal_set_dmv(struct isc_portal *p, struct dmv_portal *dp)
{
	pthread_mutex_lock(&p->gw->reg_lock);
	p->dp = dp;
	pthread_mutex_unlock(&p->gw->reg_lock);
}

void isc_gw_add_target(struct isc_gw *gw, struct isc_target *t)
{
	pthread_mutex_lock(&gw->reg_lock);
	gw_list_add_tail(&gw->targets, &t->node);
	pthread_mutex_unlock(&gw->reg_lock);
}

struct isc_target *isc_gw_next_target(struct isc_gw *gw, const struct isc_target *prev)
{
	const struct gw_list *n = prev ? prev->node.next : gw->targets.next;

	return n == &gw->targets ? NULL : gw_list_entry(n, struct isc_target, node);
}

struct isc_target *isc_gw_next_draining(struct isc_gw *gw, const struct isc_target *prev)
{
	const struct gw_list *n = prev ? prev->node.next : gw->dying_targets.next;

	return n == &gw->dying_targets ? NULL : gw_list_entry(n, struct isc_target, node);
}

struct isc_portal *isc_gw_next_portal(struct isc_gw *gw, const struct isc_portal *prev)
{
	const struct gw_list *n = prev ? prev->node.next : gw->portals.next;

	return n == &gw->portals ? NULL : gw_list_entry(n, struct isc_portal, node);
}

struct isc_portal *isc_gw_find_portal(struct isc_gw *gw, const char *name)
{
	struct isc_portal *p;

	gw_list_for_each_entry(p, &gw->portals, node)
		if (p->conf && p->conf->name && !strcmp(p->conf->name, name))
			return p;
	return NULL;
}

void isc_gw_set_conf(struct isc_gw *gw, struct isc_gw_conf *conf)
{
	gw->conf = conf;
}

void isc_gw_set_data_memory(struct isc_gw *gw, uint64_t bytes)
{
	__atomic_store_n(&gw->data_mem_max, bytes, __ATOMIC_RELAXED);
}

uint64_t isc_gw_data_memory(const struct isc_gw *gw)
{
	return __atomic_load_n(&gw->data_mem_max, __ATOMIC_RELAXED);
}

struct isc_portal_conf *isc_portal_conf(const struct isc_portal *p)
{
	return p->conf;
}

void isc_portal_set_conf(struct isc_portal *p, struct isc_portal_conf *conf)
{
	p->conf = conf;
}

struct dmv_portal *isc_portal_dmv(const struct isc_portal *p)
{
	return p->dp;
}

void isc_portal_free(struct isc_portal *p)
{
	free(p);
}

int isc_portal_listen(struct isc_portal *p)
{
	struct isc_gw *gw = p->gw;
	struct dmv_portal_conf pc = {
		.name = p->conf->name,
		.address = p->conf->address,
		.port = (uint16_t)p->conf->port,
	};
	const char *tn = conf_transport_name(p->conf->transport);
	struct dmv_portal *dp;
	int r;

	if (p->dp)
		return 0;
	/* With several loops the listener hands each connection to one (the datamover's
	 * placement, isc_conn_place), which serves it with its own PDU pool. */
	pc.loops = gw->loops;
	pc.place_timeout_ms = p->conf->login_timeout * 1000;
	for (unsigned i = 0; gw->loops && i < gw->loops->n; i++)
		pc.pools[i] = &gw->lps[i].pdus;
	r = dmv_listen(tn, gw->loop, &pc, &gw->lps[0].pdus, &dp);
	if (r == -EPROTONOSUPPORT) {
		/* A configuration written for a transport this build lacks (iSER) still brings
		 * up the portals it can serve. */
		gw_warn("iscsi", "portal %s skipped: no %s datamover in this build", p->conf->name,
			tn);
		return 0;
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
	if (dp->listening)
		gw_info("iscsi", "listening on %s (%s)", dp->addr, tn);
	return 0;
}

void isc_target_set_dev(struct isc_target *t, struct scsi_dev *dev, struct scsi_port *port)
{
	t->dev = dev;
	t->port = port;
	scsi_dev_set_event_cb(dev, isc_target_scsi_event, t);
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

struct isc_gw *isc_gw_alloc(struct gw_loop *loop)
{
	struct isc_gw *gw = calloc(1, sizeof(*gw));

	if (!gw)
		return NULL;
	gw->loop = loop;
	gw->task_ops = &isc_gw_task_ops;
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
	gw_list_init(&gw->mem_shares);
	gw_list_init(&gw->dying_targets);
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
	pthread_mutex_destroy(&gw->reg_lock);
	free(gw);
}
