// SPDX-License-Identifier: MIT
/*
 * The login phase (RFC 7143 §6.3, §11.12, §11.13): stages (security, operational, full
 * feature), transit and continue bits, target selection and initiator admission, CHAP through
 * isc_chap, key negotiation through isc_param, TSIH allocation, session reinstatement (same
 * initiator + ISID with TSIH 0 replaces the old session), connection reinstatement (same CID)
 * and new connections of an existing session up to MaxConnections.
 *
 * A failed login answers one Login Response with the status class/detail and closes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gw_log.h"
#include "isc_priv.h"

/* Login status values not in isc_param.h (RFC 7143 §11.13.5) */
#define ISC_LOGIN_ST_AUTHZ_FAILED	0x0202
#define ISC_LOGIN_ST_BAD_VERSION	0x0205
#define ISC_LOGIN_ST_TOO_MANY_CONNS	0x0206
#define ISC_LOGIN_ST_SESSION_MISSING	0x020a
#define ISC_LOGIN_ST_CANT_INCLUDE	0x0208
#define ISC_LOGIN_ST_BAD_SESSION_TYPE	0x0209
#define ISC_LOGIN_ST_UNAVAILABLE	0x0301
#define ISC_LOGIN_ST_OUT_OF_RESOURCES	0x0302
/* Not a status: the last step waits for another loop (isc_login_complete). */
#define ISC_LOGIN_WAIT			0xffff

struct isc_reinstate_msg;

struct isc_login {
	bool started;
	enum isc_stage stage;
	uint8_t isid[6];
	uint16_t tsih;
	uint16_t cid;
	uint32_t cmdsn;
	bool leading;
	struct isc_target *target;
	enum isc_session_type type;
	char initiator[ISC_NAME_MAX + 1];
	struct isc_neg *neg;
	struct isc_chap chap;
	bool chap_inited;
	struct gw_buf req;
	struct gw_buf resp;
	uint32_t exp_cmdsn, max_cmdsn;
	/* Reinstating a session of another loop: the last step waits until that loop has closed
	 * it (today's order: the old session ends before the new one begins), then resumes with
	 * the final request's BHS and flags. */
	struct isc_reinstate_msg *wait;
	bool reinstated;
	uint8_t wait_bhs[ISC_BHS_LEN];
	uint8_t wait_flags;
};

struct isc_reinstate_msg {
	struct isc_gw *gw;
	struct isc_loop *old_lp;
	uint16_t old_tsih;
	struct isc_loop *lp;		/* the login's */
	struct isc_conn *conn;		/* NULL once it closed (set on lp's thread) */
};

bool isc_login_uses_target(const struct isc_conn *c, const struct isc_target *t)
{
	return c->login && c->login->target == t;
}

void isc_login_free(struct isc_conn *c)
{
	struct isc_login *l = c->login;

	if (!l)
		return;
	if (l->wait)
		l->wait->conn = NULL;
	if (l->neg)
		isc_neg_destroy(l->neg);
	if (l->chap_inited)
		isc_chap_fini(&l->chap);
	gw_buf_fini(&l->req);
	gw_buf_fini(&l->resp);
	free(l);
	c->login = NULL;
}

/* ---------------------------------------------------------------------------------------- */
/* Failed logins per source address (the portal's login_fail_limit, _window, login_backoff) */

/* The address part of "addr:port" / "[v6]:port". */
static void isc_login_src_addr(const char *peer, char *buf, size_t len)
{
	const char *colon = strrchr(peer, ':');
	size_t n = colon ? (size_t)(colon - peer) : strlen(peer);

	if (n >= 2 && peer[0] == '[' && peer[n - 1] == ']') {
		peer++;
		n -= 2;
	}
	if (n >= len)
		n = len - 1;
	memcpy(buf, peer, n);
	buf[n] = '\0';
}

/* The entry of c's source address; with `add`, a new one (evicting the entry idle longest,
 * preferring those not in back-off) when it has none. Under gw->reg_lock (the table is every
 * loop's). */
static struct isc_login_src *isc_login_src_get(struct isc_conn *c, bool add)
{
	struct isc_gw *gw = c->gw;
	struct isc_login_src *e, *victim = NULL;
	uint64_t now = c->lp->loop->now_ms;
	char addr[sizeof(e->addr)];
	size_t i;

	isc_login_src_addr(c->dc->peer, addr, sizeof(addr));
	for (i = 0; i < ISC_LOGIN_SRC_MAX; i++) {
		e = &gw->login_src[i];
		if (e->addr[0] && !strcmp(e->addr, addr))
			return e;
	}
	if (!add)
		return NULL;
	for (i = 0; i < ISC_LOGIN_SRC_MAX; i++) {
		e = &gw->login_src[i];
		if (!e->addr[0]) {
			victim = e;
			break;
		}
		if (!victim || (victim->backoff_until_ms > now && e->backoff_until_ms <= now) ||
		    ((victim->backoff_until_ms > now) == (e->backoff_until_ms > now) &&
		     e->last_ms < victim->last_ms))
			victim = e;
	}
	memset(victim, 0, sizeof(*victim));
	snprintf(victim->addr, sizeof(victim->addr), "%s", addr);
	return victim;
}

/* Whether a failed login with this status counts against its source: what a guessing or
 * broken initiator causes (class 2), not the target's own limits and errors. */
static bool isc_login_status_counts(uint16_t status)
{
	return (status >> 8) == 0x02 && status != ISC_LOGIN_ST_TOO_MANY_CONNS;
}

static void isc_login_src_failed(struct isc_conn *c, uint16_t status)
{
	const struct isc_portal_conf *pc = c->portal->conf;
	uint64_t now = c->lp->loop->now_ms;
	struct isc_login_src *e;
	unsigned int fails;
	char addr[sizeof(e->addr)];

	if (!isc_login_status_counts(status))
		return;
	pthread_mutex_lock(&c->gw->reg_lock);
	e = isc_login_src_get(c, true);
	e->failed++;
	e->last_ms = now;
	if (!pc->login_fail_limit || e->backoff_until_ms > now)
		goto out;
	if (!e->window_fails || now - e->window_start_ms >= (uint64_t)pc->login_fail_window * 1000) {
		e->window_start_ms = now;
		e->window_fails = 0;
	}
	if (++e->window_fails < pc->login_fail_limit)
		goto out;
	fails = e->window_fails;
	memcpy(addr, e->addr, sizeof(addr));
	e->backoff_until_ms = now + (uint64_t)pc->login_backoff * 1000;
	e->backoffs++;
	e->window_fails = 0;
	pthread_mutex_unlock(&c->gw->reg_lock);
	/* Logged once per back-off: at most one line per address per login_backoff. */
	gw_warn("iscsi", "%s: %u failed logins within %u s: refusing logins from %s for %u s",
		c->dc->peer, fails, pc->login_fail_window, addr, pc->login_backoff);
	return;
out:
	pthread_mutex_unlock(&c->gw->reg_lock);
}

/* True (and counted) when c's source address is in a back-off. */
static bool isc_login_src_refused(struct isc_conn *c)
{
	uint64_t now = c->lp->loop->now_ms;
	struct isc_login_src *e;
	bool refused = false;

	pthread_mutex_lock(&c->gw->reg_lock);
	e = isc_login_src_get(c, false);
	if (e && e->backoff_until_ms > now) {
		e->refused++;
		e->last_ms = now;
		refused = true;
	}
	pthread_mutex_unlock(&c->gw->reg_lock);
	return refused;
}

/* ---------------------------------------------------------------------------------------- */

static struct pdu *isc_login_rsp(struct isc_conn *c, const uint8_t *req, uint8_t flags,
				     uint16_t tsih, uint16_t status)
{
	struct isc_login *l = c->login;
	struct pdu *pdu = isc_conn_new_pdu(c, ISC_OP_LOGIN_RSP, pdu_bhs_itt(req));

	if (!pdu)
		return NULL;
	pdu->bhs[1] = flags;
	pdu->bhs[2] = 0x00;	/* Version-max */
	pdu->bhs[3] = 0x00;	/* Version-active */
	memcpy(pdu->bhs + 8, req + 8, 6);
	pdu_put16(pdu->bhs, 14, tsih);
	pdu_put32(pdu->bhs, 24, c->stat_sn++);
	pdu_put32(pdu->bhs, 28, l ? l->exp_cmdsn : pdu_get32(req, 24));
	pdu_put32(pdu->bhs, 32, l ? l->max_cmdsn : pdu_get32(req, 24));
	pdu->bhs[36] = (uint8_t)(status >> 8);
	pdu->bhs[37] = (uint8_t)status;
	return pdu;
}

static void isc_login_fail(struct isc_conn *c, const uint8_t *req, uint16_t status,
			   const char *why)
{
	struct isc_login *l = c->login;
	struct pdu *pdu;

	gw_warn("iscsi", "%s: login of %s%s%s refused (status 0x%04x): %s", c->dc->peer,
		l && l->initiator[0] ? l->initiator : "initiator",
		l && l->target ? " to " : "", l && l->target ? l->target->conf->name : "", status,
		why);
	isc_login_src_failed(c, status);
	pdu = isc_login_rsp(c, req, 0, l ? l->tsih : 0, status);
	if (pdu)
		isc_conn_send(c, pdu);
	isc_conn_close(c, "login failed");
}

/* A new session of initiator on target t within max_sessions and max_sessions_per_initiator?
 * A login that reinstates a session (same initiator and ISID) takes its place. 0 or 0x0302. */
static uint16_t isc_login_session_limits(struct isc_conn *c, const struct isc_target *t,
					 const char *initiator, const char **why)
{
	const struct isc_target_conf *tc = t->conf;
	const struct isc_session *s;
	unsigned int all = 0, mine = 0;
	uint16_t status = 0;

	/* Every loop's sessions of the target: the registry's list. */
	pthread_mutex_lock(&c->gw->reg_lock);
	gw_list_for_each_entry(s, &t->sessions, tnode) {
		if (s->closing)
			continue;
		if (!strcmp(s->initiator, initiator)) {
			if (!memcmp(s->isid, c->login->isid, sizeof(s->isid)))
				goto out;
			mine++;
		}
		all++;
	}
	if (tc->max_sessions && all >= tc->max_sessions) {
		*why = "max_sessions reached on the target";
	} else if (tc->max_sessions_per_initiator && mine >= tc->max_sessions_per_initiator) {
		*why = "max_sessions_per_initiator reached";
	} else {
		goto out;
	}
	c->gw->login_refused_sessions++;
	status = ISC_LOGIN_ST_OUT_OF_RESOURCES;
out:
	pthread_mutex_unlock(&c->gw->reg_lock);
	return status;
}

/* First request: who logs in, to what, in which session. 0 or a login status. */
static uint16_t isc_login_first(struct isc_conn *c, const uint8_t *req,
				const struct isc_kvlist *keys, const char **why)
{
	struct isc_login *l = c->login;
	struct isc_gw *gw = c->gw;
	const struct isc_chap_conf *chap = NULL;
	const char *iname = isc_kvlist_get(keys, "InitiatorName");
	const char *tname = isc_kvlist_get(keys, "TargetName");
	const char *stype = isc_kvlist_get(keys, "SessionType");
	struct isc_session *s = NULL;
	struct isc_neg_init ni;
	uint16_t status;
	int r;

	if (req[3] > 0x00 || req[2] < req[3]) {
		*why = "unsupported iSCSI version";
		return ISC_LOGIN_ST_BAD_VERSION;
	}
	memcpy(l->isid, req + 8, 6);
	l->tsih = pdu_get16(req, 14);
	l->cid = pdu_get16(req, 20);
	l->cmdsn = pdu_get32(req, 24);
	l->exp_cmdsn = l->cmdsn;
	l->max_cmdsn = l->cmdsn;
	if (!iname || !*iname) {
		*why = "no InitiatorName";
		return ISC_PARAM_ST_MISSING_PARAM;
	}
	snprintf(l->initiator, sizeof(l->initiator), "%s", iname);
	if (stype && !strcmp(stype, "Discovery")) {
		l->type = ISC_SESSION_DISCOVERY;
		if (gw->conf->discovery.auth == ISC_DISC_AUTH_CHAP)
			chap = &gw->conf->discovery.chap;
	} else if (stype && strcmp(stype, "Normal")) {
		*why = "unsupported SessionType";
		return ISC_LOGIN_ST_BAD_SESSION_TYPE;
	} else {
		l->type = ISC_SESSION_NORMAL;
		if (!tname || !*tname) {
			*why = "no TargetName";
			return ISC_PARAM_ST_MISSING_PARAM;
		}
		l->target = isc_gw_find_target(gw, tname);
		if (!l->target || !isc_target_on_portal(l->target, c->portal)) {
			l->target = NULL;
			*why = "no such target on this portal";
			return ISC_PARAM_ST_NOT_FOUND;
		}
		if (isc_target_admit(l->target, iname, &chap)) {
			*why = "initiator not allowed";
			return ISC_LOGIN_ST_AUTHZ_FAILED;
		}
	}
	l->leading = l->tsih == 0;
	if (l->leading && l->target) {
		status = isc_login_session_limits(c, l->target, iname, why);
		if (status)
			return status;
	}
	if (!l->leading) {
		struct isc_session_ref ref;
		struct isc_conn *oc;
		bool same_cid = false;

		s = isc_session_find(gw, c->lp, iname, l->isid, l->tsih, &ref);
		if (!ref.lp || ref.target != l->target) {
			*why = "no session with this TSIH";
			return ISC_LOGIN_ST_SESSION_MISSING;
		}
		if (!s) {
			/* Its session runs on another loop and this connection cannot move there
			 * (iSER is placed at its connect request, before any PDU): Service
			 * Unavailable, which initiators retry (RFC 7143 §11.13.5). */
			*why = "the session runs on another event loop";
			return ISC_LOGIN_ST_UNAVAILABLE;
		}
		gw_list_for_each_entry(oc, &s->conns, node)
			if (oc->cid == l->cid)
				same_cid = true;
		if (!same_cid && s->nconns >= s->params.max_connections) {
			*why = "MaxConnections reached";
			return ISC_LOGIN_ST_TOO_MANY_CONNS;
		}
		l->exp_cmdsn = s->exp_cmdsn;
		l->max_cmdsn = isc_session_max_cmdsn(s);
	} else {
		uint32_t qd = l->target ? l->target->conf->params.queue_depth : 16;

		l->max_cmdsn = l->cmdsn + isc_session_window(qd, c->dc->tp->max_unexpected, 0) - 1;
	}
	memset(&ni, 0, sizeof(ni));
	ni.conf = l->target ? &l->target->conf->params : NULL;
	ni.target_alias = l->target ? l->target->conf->alias : NULL;
	ni.tpgt = l->target ? (uint16_t)l->target->conf->tpgt : 1;
	ni.leading = l->leading;
	ni.transport_caps = (c->dc->tp->caps & DMV_CAP_RDMA) ? ISC_TRANSPORT_RDMA : 0;
	ni.transport_max_recv_dsl = c->dc->tp->max_recv_dsl;
	ni.transport_max_unexpected = c->dc->tp->max_unexpected;
	ni.session = s ? &s->params : NULL;
	c->tpgt = ni.tpgt;
	r = isc_neg_create(&ni, &l->neg);
	if (r) {
		*why = "cannot start negotiation";
		return ISC_PARAM_ST_TARGET_ERR;
	}
	r = isc_chap_init(&l->chap, chap, NULL, 0);
	if (r) {
		*why = "cannot start authentication";
		return ISC_PARAM_ST_TARGET_ERR;
	}
	l->chap_inited = true;
	return 0;
}

static void isc_login_last(struct isc_conn *c, const uint8_t *req, uint8_t flags);

/* Back on the login's loop: the old session is closed; the login goes on. */
static void isc_reinstate_done(void *arg)
{
	struct isc_reinstate_msg *m = arg;
	struct isc_gw *gw = m->gw;
	struct isc_conn *c = m->conn;

	if (c) {
		c->login->wait = NULL;
		c->login->reinstated = true;
		isc_login_last(c, c->login->wait_bhs, c->login->wait_flags);
	}
	free(m);
	__atomic_fetch_sub(&gw->msgs, 1, __ATOMIC_RELEASE);
}

/* On the old session's loop: close it, then answer the login's loop. */
static void isc_reinstate_close(void *arg)
{
	struct isc_reinstate_msg *m = arg;

	struct isc_gw *gw = m->gw;

	isc_loop_close_session(m->old_lp, m->old_tsih, "session reinstatement");
	if (gw_loop_send(m->lp->loop, isc_reinstate_done, m)) {
		/* Shutting down: the login's loop has stopped, its connection with it. */
		free(m);
		__atomic_fetch_sub(&gw->msgs, 1, __ATOMIC_RELEASE);
	}
}

/* Asks the old session's loop to close it; ISC_LOGIN_WAIT, or 0 to go on at once. */
static uint16_t isc_login_reinstate_on(struct isc_conn *c, const struct isc_session_ref *ref)
{
	struct isc_reinstate_msg *m = malloc(sizeof(*m));

	if (!m) {
		isc_session_close_on(c->gw, ref->lp, ref->tsih, "session reinstatement");
		return 0;
	}
	*m = (struct isc_reinstate_msg){ c->gw, ref->lp, ref->tsih, c->lp, c };
	__atomic_fetch_add(&c->gw->msgs, 1, __ATOMIC_RELAXED);
	if (gw_loop_send(ref->lp->loop, isc_reinstate_close, m)) {
		__atomic_fetch_sub(&c->gw->msgs, 1, __ATOMIC_RELEASE);
		free(m);
		return 0;
	}
	c->login->wait = m;
	return ISC_LOGIN_WAIT;
}

/* The initiator may enter full feature phase: make or join the session. 0, a status or
 * ISC_LOGIN_WAIT. */
static uint16_t isc_login_complete(struct isc_conn *c, const char **why)
{
	struct isc_login *l = c->login;
	const struct isc_params *p = isc_neg_params(l->neg);
	struct isc_session *s, *old;
	struct isc_session_ref ref;
	uint32_t window;
	int r;

	if (l->leading) {
		/* Session reinstatement: the old session of this I_T nexus goes (ERL 0), on its
		 * own loop. */
		old = isc_session_find(c->gw, c->lp, l->initiator, l->isid, 0, &ref);
		if (ref.lp && ref.target == l->target) {
			gw_info("iscsi", "%s: reinstating session 0x%x of %s", c->dc->peer,
				ref.tsih, l->initiator);
			if (old)
				isc_session_close(old, "session reinstatement");
			else if (!l->reinstated && isc_login_reinstate_on(c, &ref))
				return ISC_LOGIN_WAIT;
		}
		r = isc_session_create(c->gw, c->lp, l->target, l->isid, l->initiator, p,
				       l->cmdsn, &s);
		if (r) {
			*why = "cannot create the session";
			return ISC_LOGIN_ST_OUT_OF_RESOURCES;
		}
		if (l->target && isc_session_shares_attach(s, c->dc->peer))
			gw_warn("iscsi", "%s: out of memory: the session's data buffers are not "
				"counted for its initiator and address", c->dc->peer);
		window = isc_session_window(s->queue_depth, c->dc->tp->max_unexpected,
					    p->max_outstanding_unexpected_pdus);
		if (window < s->queue_depth) {
			gw_info("iscsi", "%s: command window %u, not queue_depth %u: %s",
				c->dc->peer, window, s->queue_depth,
				window == p->max_outstanding_unexpected_pdus ?
				"MaxOutstandingUnexpectedPDUs" : "what the connection can receive");
			s->queue_depth = window;
		}
	} else {
		struct isc_conn *oc, *tmp;

		s = isc_session_find(c->gw, c->lp, l->initiator, l->isid, l->tsih, &ref);
		if (!s) {
			*why = "session went away during login";
			return ISC_LOGIN_ST_SESSION_MISSING;
		}
		/* Connection reinstatement: the new connection joins first, so the session never
		 * drops to zero connections (which at ERL 0 would end it). */
		isc_session_add_conn(s, c);
		gw_list_for_each_entry_safe(oc, tmp, &s->conns, node)
			if (oc != c && oc->cid == l->cid)
				isc_conn_close(oc, "connection reinstatement");
	}
	if (!c->sess)
		isc_session_add_conn(s, c);
	c->cid = l->cid;
	c->neg = l->neg;
	l->neg = NULL;
	if (s->target)
		gw_info("iscsi", "%s: %s logged in to %s (session 0x%x, connection %u%s%s)",
			c->dc->peer, s->initiator, s->target->conf->name, s->tsih, c->cid,
			p->header_digest ? ", header digest" : "",
			p->data_digest ? ", data digest" : "");
	else
		gw_dbg("iscsi", "%s: discovery session 0x%x for %s", c->dc->peer, s->tsih,
		       s->initiator);
	return 0;
}

void isc_login_rx(struct isc_conn *c, struct pdu *pdu)
{
	const uint8_t *req = pdu->bhs;
	bool transit = req[1] & ISC_FL_T, cont = req[1] & ISC_FL_C;
	enum isc_stage csg = (enum isc_stage)((req[1] >> 2) & 3);
	enum isc_stage nsg = (enum isc_stage)(req[1] & 3);
	struct isc_kvlist keys;
	struct isc_login *l = c->login;
	const char *why = "";
	uint16_t status = 0, tsih;
	struct pdu *rsp;
	uint8_t flags;
	int r;

	if (l && l->wait) {
		/* The initiator waits for the answer to its last request before sending more. */
		isc_conn_close(c, "Login Request while the last one is being answered");
		return;
	}
	if (!l) {
		l = calloc(1, sizeof(*l));
		if (!l) {
			isc_conn_close(c, "out of memory");
			return;
		}
		gw_buf_init(&l->req);
		gw_buf_init(&l->resp);
		c->login = l;
		/* The first Login Response starts the connection's StatSN sequence. */
		c->stat_sn = pdu_get32(req, 28);
		if (isc_login_src_refused(c)) {
			/* Not isc_login_fail: a refusal neither logs a line per attempt nor
			 * counts as a new failure (the back-off would never end). */
			struct pdu *rsp0;

			l->exp_cmdsn = l->max_cmdsn = pdu_get32(req, 24);
			rsp0 = isc_login_rsp(c, req, 0, 0, ISC_LOGIN_ST_UNAVAILABLE);

			gw_dbg("iscsi", "%s: login refused: source in back-off", c->dc->peer);
			if (rsp0)
				isc_conn_send(c, rsp0);
			isc_conn_close(c, "source address in login back-off");
			return;
		}
	} else if (memcmp(l->isid, req + 8, 6) || l->tsih != pdu_get16(req, 14) ||
		   l->cid != pdu_get16(req, 20)) {
		isc_login_fail(c, req, ISC_PARAM_ST_INITIATOR_ERR, "ISID, TSIH or CID changed");
		return;
	}
	if (gw_buf_append(&l->req, pdu->data, pdu->data_len) || l->req.len > 64 * 1024) {
		isc_login_fail(c, req, ISC_PARAM_ST_INITIATOR_ERR, "login text too long");
		return;
	}
	if (cont) {
		/* More text follows: an empty response asks for it (RFC 7143 §6.3). */
		if (!l->started) {
			memcpy(l->isid, req + 8, 6);
			l->tsih = pdu_get16(req, 14);
			l->cid = pdu_get16(req, 20);
			l->exp_cmdsn = l->max_cmdsn = pdu_get32(req, 24);
		}
		rsp = isc_login_rsp(c, req, (uint8_t)(csg << 2), l->tsih, 0);
		if (rsp)
			isc_conn_send(c, rsp);
		return;
	}
	isc_kvlist_init(&keys);
	r = isc_kvlist_parse(&keys, l->req.data, l->req.len);
	gw_buf_reset(&l->req);
	if (r) {
		isc_login_fail(c, req, r == -ENOMEM ? ISC_PARAM_ST_TARGET_ERR :
			       ISC_PARAM_ST_INITIATOR_ERR, "malformed login text");
		return;
	}
	if (!l->started) {
		l->started = true;
		status = isc_login_first(c, req, &keys, &why);
		if (status)
			goto fail;
		l->stage = csg;
	}
	if (csg != l->stage || csg == 2 || csg == ISC_STAGE_FFP) {
		status = ISC_PARAM_ST_INITIATOR_ERR;
		why = "login stage out of sequence";
		goto fail;
	}
	gw_buf_reset(&l->resp);
	r = isc_neg_process(l->neg, csg, &keys, &l->resp, &status);
	if (r < 0) {
		why = "negotiation failed";
		goto fail;
	}
	if (csg == ISC_STAGE_SECURITY) {
		r = isc_chap_process(&l->chap, &keys, &l->resp);
		if (r < 0) {
			status = r == -ENOMEM ? ISC_PARAM_ST_TARGET_ERR : ISC_PARAM_ST_AUTH_FAILED;
			why = isc_chap_fail_name(l->chap.fail);
			goto fail;
		}
		if (r != ISC_CHAP_DONE)
			transit = false;
	} else if (!isc_chap_done(&l->chap)) {
		status = ISC_PARAM_ST_AUTH_FAILED;
		why = "authentication required";
		goto fail;
	}
	if (transit) {
		if (nsg == 2 || (unsigned int)nsg <= (unsigned int)csg) {
			status = ISC_PARAM_ST_INITIATOR_ERR;
			why = "bad next stage";
			goto fail;
		}
		r = isc_neg_transit(l->neg, csg, nsg, &l->resp, &status);
		if (r < 0) {
			why = "negotiation cannot complete";
			goto fail;
		}
		transit = r == 1;
	}
	isc_kvlist_fini(&keys);
	flags = (uint8_t)(csg << 2);
	tsih = l->tsih;
	if (transit) {
		flags |= ISC_FL_T | nsg;
		l->stage = nsg;
		if (nsg == ISC_STAGE_FFP) {
			isc_login_last(c, req, flags);
			return;
		}
	}
	rsp = isc_login_rsp(c, req, flags, tsih, 0);
	if (!rsp || pdu_set_data(rsp, l->resp.data, (uint32_t)l->resp.len)) {
		pdu_put(rsp);
		isc_conn_close(c, "out of memory");
		return;
	}
	isc_conn_send(c, rsp);
	return;
fail:
	isc_kvlist_fini(&keys);
	isc_login_fail(c, req, status ? status : ISC_PARAM_ST_INITIATOR_ERR, why);
}

/* The last step: the session made or joined, the final Login Response, full feature phase.
 * Resumed here when it had to wait for another loop (req is then the saved BHS). */
static void isc_login_last(struct isc_conn *c, const uint8_t *req, uint8_t flags)
{
	struct isc_login *l = c->login;
	const char *why = "";
	struct pdu *rsp;
	uint16_t status;

	status = isc_login_complete(c, &why);
	if (status == ISC_LOGIN_WAIT) {
		memcpy(l->wait_bhs, req, ISC_BHS_LEN);
		l->wait_flags = flags;
		return;
	}
	if (status) {
		isc_login_fail(c, req, status, why);
		return;
	}
	l->exp_cmdsn = c->sess->exp_cmdsn;
	l->max_cmdsn = isc_session_max_cmdsn(c->sess);
	rsp = isc_login_rsp(c, req, flags, c->sess->tsih, 0);
	if (!rsp || pdu_set_data(rsp, l->resp.data, (uint32_t)l->resp.len)) {
		pdu_put(rsp);
		isc_conn_close(c, "out of memory");
		return;
	}
	isc_conn_send(c, rsp);
	isc_login_free(c);
	isc_conn_enter_ffp(c);
}
