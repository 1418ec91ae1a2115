// SPDX-License-Identifier: MIT
/*
 * Live state of the iSCSI side: sessions with their connections and counters. gateway/ctl/
 * puts it together with portals, targets and LUNs for the control socket's "state" (its shape
 * is in docs/CONTROL.md).
 */
#include <stdio.h>

#include "isc_priv.h"

static json_t *isc_state_conn(const struct isc_conn *c)
{
	const struct dmv_conn *dc = c->dc;

	return json_pack("{s:i, s:i, s:s, s:s, s:s, s:b, s:b, s:I, s:I, s:I, s:I}",
			 "cid", (int)c->cid, "loop", (int)c->lp->idx, "transport", dc->tp->name,
			 "peer", dc->peer,
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
	o = json_pack("{s:i, s:i, s:s, s:s?, s:s, s:s, s:o, s:I, s:i, s:i, s:I, s:I, s:I}",
		      "tsih", (int)s->tsih, "loop", (int)s->lp->idx,
		      "type", s->target ? "normal" : "discovery",
		      "target", s->target ? s->target->conf->name : NULL,
		      "initiator", s->initiator, "isid", isid, "connections", conns,
		      "exp_cmdsn", (json_int_t)s->exp_cmdsn, "queue_depth", (int)s->queue_depth,
		      "active", (int)s->active, "commands", (json_int_t)s->cmds,
		      "read_bytes", (json_int_t)s->read_bytes,
		      "write_bytes", (json_int_t)s->write_bytes);
	return o;
}

/* One loop's sessions, read on its thread. */
static void isc_state_loop(struct isc_loop *lp, void *arg)
{
	const struct isc_session *s;

	gw_list_for_each_entry(s, &lp->sessions, lnode)
		json_array_append_new(arg, isc_state_session(s));
}

json_t *isc_gw_sessions_state(const struct isc_gw *gw)
{
	json_t *sessions = json_array();

	/* Loop 0 gathers: each loop lists its own sessions (ordered by loop, then age). */
	isc_gw_each_loop((struct isc_gw *)gw, isc_state_loop, sessions);
	return sessions;
}

unsigned int isc_target_nsessions(const struct isc_target *t)
{
	struct isc_gw *gw = t->gw;
	const struct isc_session *s;
	unsigned int n = 0;

	pthread_mutex_lock(&gw->reg_lock);
	gw_list_for_each_entry(s, &t->sessions, tnode)
		n++;
	pthread_mutex_unlock(&gw->reg_lock);
	return n;
}

json_t *isc_gw_login_state(const struct isc_gw *gw)
{
	json_t *portals = json_array(), *sources = json_array();
	const struct isc_portal *p;
	uint64_t now = gw->loop->now_ms, refused;
	size_t i;

	gw_list_for_each_entry(p, &gw->portals, node)
		json_array_append_new(portals, json_pack(
			"{s:s, s:i, s:i, s:I}", "name", p->conf->name, "connections",
			(int)__atomic_load_n(&p->nconns, __ATOMIC_RELAXED), "max_connections",
			(int)p->conf->max_connections, "refused",
			(json_int_t)__atomic_load_n(&p->conns_refused, __ATOMIC_RELAXED)));
	pthread_mutex_lock(&((struct isc_gw *)gw)->reg_lock);
	for (i = 0; i < ISC_LOGIN_SRC_MAX; i++) {
		const struct isc_login_src *e = &gw->login_src[i];

		if (!e->addr[0])
			continue;
		json_array_append_new(sources, json_pack(
			"{s:s, s:I, s:I, s:I, s:I}", "address", e->addr, "failed",
			(json_int_t)e->failed, "refused", (json_int_t)e->refused, "backoffs",
			(json_int_t)e->backoffs, "backoff_ms",
			(json_int_t)(e->backoff_until_ms > now ? e->backoff_until_ms - now : 0)));
	}
	refused = gw->login_refused_sessions;
	pthread_mutex_unlock(&((struct isc_gw *)gw)->reg_lock);
	return json_pack("{s:o, s:o, s:I, s:I}", "portals", portals, "sources", sources,
			 "sessions_refused", (json_int_t)refused, "timeouts",
			 (json_int_t)__atomic_load_n(&gw->login_timeouts, __ATOMIC_RELAXED));
}
