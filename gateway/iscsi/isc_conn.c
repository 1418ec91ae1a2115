// SPDX-License-Identifier: MIT
/*
 * iSCSI connections: created when a datamover accepts, they receive PDUs through the dmv
 * up-calls, dispatch them by state and opcode to the PDU handlers (isc_login, isc_text,
 * isc_scsi, isc_tmf, isc_nop), and tear themselves down (two-phase) when the initiator leaves,
 * logs out or breaks the protocol. Building and sending PDUs is isc_xmit.c's.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "gw_log.h"
#include "isc_priv.h"

static struct isc_conn *isc_conn_of(struct dmv_conn *dc)
{
	return dc->priv;
}

static void isc_conn_do_enter_ffp(struct isc_conn *c)
{
	isc_conn_apply_params(c);
	c->state = ISC_CONN_FFP;
	gw_timer_disarm(&c->nop_timer);
	isc_nop_start(c);
}

static void isc_conn_do_close(struct isc_conn *c, const char *why);

/* What the handlers ask of the connection (isc_conn_close / isc_conn_enter_ffp). */
static const struct isc_conn_ops isc_conn_ops = {
	.close = isc_conn_do_close,
	.enter_ffp = isc_conn_do_enter_ffp,
};

/* ---------------------------------------------------------------------------------------- */
/* Up-calls from the datamover */

static void isc_conn_rx_pdu(struct dmv_conn *dc, struct pdu *pdu)
{
	struct isc_conn *c = isc_conn_of(dc);
	uint8_t op = pdu_bhs_opcode(pdu->bhs);

	c->last_rx_ms = c->lp->loop->now_ms;
	if (c->state == ISC_CONN_LOGIN) {
		if (op != ISC_OP_LOGIN_REQ) {
			gw_warn_rl("iscsi", "%s: %s during login: closing", dc->peer,
				   pdu_opcode_name(op));
			isc_conn_close(c, "non-login PDU during login");
			return;
		}
		isc_login_rx(c, pdu);
		return;
	}
	if (c->state != ISC_CONN_FFP)
		return;
	/* ExpStatSN acknowledges status; at ERL 0 there is nothing to retransmit, so it is only
	 * recorded. Data-Out never comes here. */
	c->exp_stat_sn = pdu_get32(pdu->bhs, 28);
	if (c->async_out)
		isc_async_acked(c);
	switch (op) {
	case ISC_OP_NOP_OUT:
		isc_nop_rx(c, pdu);
		break;
	case ISC_OP_SCSI_CMD:
		if (!c->sess->target) {
			gw_warn_rl("iscsi", "%s: SCSI command in a discovery session", dc->peer);
			isc_conn_reject(c, pdu->bhs, ISC_REJ_PROTOCOL);
			break;
		}
		isc_scsi_rx_cmd(c, pdu);
		break;
	case ISC_OP_TMF_REQ:
		if (!c->sess->target) {
			isc_conn_reject(c, pdu->bhs, ISC_REJ_PROTOCOL);
			break;
		}
		isc_tmf_rx(c, pdu);
		break;
	case ISC_OP_TEXT_REQ:
		isc_text_rx(c, pdu);
		break;
	case ISC_OP_LOGOUT_REQ:
		isc_logout_rx(c, pdu);
		break;
	case ISC_OP_SNACK:
		/* ErrorRecoveryLevel 0: no SNACK support. */
		isc_conn_reject(c, pdu->bhs, ISC_REJ_SNACK);
		break;
	case ISC_OP_LOGIN_REQ:
		gw_warn_rl("iscsi", "%s: Login Request in full feature phase", dc->peer);
		isc_conn_reject(c, pdu->bhs, ISC_REJ_PROTOCOL);
		break;
	default:
		isc_conn_reject(c, pdu->bhs, ISC_REJ_CMD_NOT_SUPPORTED);
		break;
	}
}

static struct dmv_task *isc_conn_dmv_find_task(struct dmv_conn *dc, uint32_t itt)
{
	struct isc_task *t = isc_conn_find_task(isc_conn_of(dc), itt);

	return t ? &t->dt : NULL;
}

static void isc_conn_dmv_stamp(struct dmv_conn *dc, uint8_t *bhs)
{
	isc_conn_stamp(isc_conn_of(dc), bhs, false);
}

static void isc_conn_dmv_reject(struct dmv_conn *dc, const uint8_t *bhs, uint8_t reason)
{
	struct isc_conn *c = isc_conn_of(dc);

	if (c->state != ISC_CONN_FFP) {
		/* Before full feature phase there is no Reject: the login fails. */
		isc_conn_close(c, "protocol error during login");
		return;
	}
	/*
	 * A command whose immediate data failed its digest is discarded whole (RFC 7143 §7.8).
	 * Plugging the hole by re-sending the command is a retry (§6.2.1), which is error
	 * recovery above level 0: at ErrorRecoveryLevel 0 an initiator does not re-send it (Linux
	 * waits for its command timeout, ~30 s), and its CmdSN leaves a hole in the window that
	 * holds back every later command of the session. §7.8 lets either side escalate a digest
	 * error to session recovery: the Reject goes out, then the connection closes, and the
	 * initiator logs in again and re-issues its commands at once.
	 */
	if (reason == ISC_REJ_DATA_DIGEST && pdu_bhs_opcode(bhs) == ISC_OP_SCSI_CMD && c->sess &&
	    !c->sess->params.error_recovery_level) {
		gw_warn_rl("iscsi", "%s: ITT 0x%x: data digest error on immediate data at "
			   "ErrorRecoveryLevel 0: closing the connection (session recovery)",
			   c->dc->peer, pdu_bhs_itt(bhs));
		isc_conn_reject_close(c, bhs, reason);
		return;
	}
	isc_conn_reject(c, bhs, reason);
}

static void isc_conn_lost(struct dmv_conn *dc, int err)
{
	(void)err;
	isc_conn_close(isc_conn_of(dc), "connection lost");
}

static const struct dmv_conn_cb isc_conn_cb = {
	.rx_pdu = isc_conn_rx_pdu,
	.find_task = isc_conn_dmv_find_task,
	.stamp = isc_conn_dmv_stamp,
	.reject = isc_conn_dmv_reject,
	.lost = isc_conn_lost,
};

/* ---------------------------------------------------------------------------------------- */
/* Life cycle */

/* A connection must finish its login in bounded time (the portal's login_timeout): half-open
 * logins hold memory and a place under max_connections. The same timer does NOP pings later. */
static void isc_conn_login_timeout(struct gw_timer *t)
{
	struct isc_conn *c = gw_container_of(t, struct isc_conn, nop_timer);

	if (c->state == ISC_CONN_LOGIN) {
		__atomic_fetch_add(&c->gw->login_timeouts, 1, __ATOMIC_RELAXED);
		gw_warn_rl("iscsi", "%s: login not completed within %u s: closing", c->dc->peer,
			   c->portal->conf->login_timeout);
		isc_conn_close(c, "login timeout");
	}
}

int isc_conn_admit(struct dmv_portal *dp, struct dmv_conn *dc)
{
	struct isc_portal *p = dp->priv;
	unsigned int n;

	if (isc_gw_stopping(p->gw))
		return -ESHUTDOWN;
	/* Taken at once (atomic): connections on several loops count together. */
	n = __atomic_fetch_add(&p->nconns, 1, __ATOMIC_RELAXED);
	if (p->conf->max_connections && n >= p->conf->max_connections) {
		/* Nothing was received to answer: a Login Response needs a request. Closing at
		 * once costs a flood of connections nothing but the accept. */
		__atomic_fetch_sub(&p->nconns, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&p->conns_refused, 1, __ATOMIC_RELAXED);
		gw_warn_rl("iscsi", "%s: portal %s has %u connections (max_connections): closing",
			   dc->peer, p->conf->name, n);
		return -EBUSY;
	}
	return 0;
}

void isc_conn_unadmit(struct dmv_portal *dp, bool timed_out)
{
	struct isc_portal *p = dp->priv;

	__atomic_fetch_sub(&p->nconns, 1, __ATOMIC_RELAXED);
	/* The datamover waited login_timeout for its first PDU (ctl sets place_timeout_ms). */
	if (timed_out)
		__atomic_fetch_add(&p->gw->login_timeouts, 1, __ATOMIC_RELAXED);
}

void isc_conn_accept(struct dmv_portal *dp, struct dmv_conn *dc)
{
	struct isc_portal *p = dp->priv;
	struct isc_gw *gw = p->gw;
	struct isc_conn *c;

	/* Counted in p->nconns from here (admitted by the datamover already, or now). */
	if (!dc->admitted && isc_conn_admit(dp, dc) < 0) {
		dmv_conn_close(dc);
		return;
	}
	dc->admitted = false;
	if (isc_gw_stopping(gw)) {
		__atomic_fetch_sub(&p->nconns, 1, __ATOMIC_RELAXED);
		dmv_conn_close(dc);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		gw_err("iscsi", "%s: out of memory for a connection", dc->peer);
		__atomic_fetch_sub(&p->nconns, 1, __ATOMIC_RELAXED);
		dmv_conn_close(dc);
		return;
	}
	c->ops = &isc_conn_ops;
	c->gw = gw;
	c->lp = isc_gw_loop_of(gw, dc->loop);
	c->portal = p;
	c->dc = dc;
	c->state = ISC_CONN_LOGIN;
	gw_list_init(&c->tasks);
	gw_list_init(&c->tmfs);
	gw_buf_init(&c->text_in);
	gw_buf_init(&c->text_out);
	c->text_ttt = ISC_RSVD_TAG;
	c->last_rx_ms = c->lp->loop->now_ms;
	if (gw_timer_init(&c->nop_timer, c->lp->loop, isc_conn_login_timeout) < 0 ||
	    gw_timer_arm(&c->nop_timer, (uint64_t)p->conf->login_timeout * 1000, 0) < 0) {
		gw_timer_fini(&c->nop_timer);
		free(c);
		__atomic_fetch_sub(&p->nconns, 1, __ATOMIC_RELAXED);
		dmv_conn_close(dc);
		return;
	}
	dc->cb = &isc_conn_cb;
	dc->priv = c;
	gw_list_add_tail(&c->lp->login_conns, &c->node);
	__atomic_fetch_add(&gw->nconns, 1, __ATOMIC_RELAXED);
	gw_dbg("iscsi", "%s: new connection on portal %s", dc->peer, dp->name);
}

static void isc_conn_free(struct gw_close *cl)
{
	struct isc_conn *c = gw_container_of(cl, struct isc_conn, cl);

	gw_buf_fini(&c->text_in);
	gw_buf_fini(&c->text_out);
	free(c);
}

static void isc_conn_do_close(struct isc_conn *c, const char *why)
{
	struct isc_session *s = c->sess;

	if (c->state == ISC_CONN_CLOSED)
		return;
	if (s && s->target)
		gw_info("iscsi", "%s: %s: closing connection %u of session 0x%x (%s)",
			c->dc->peer, why, c->cid, s->tsih, s->initiator);
	else
		gw_dbg("iscsi", "%s: %s: closing connection", c->dc->peer, why);
	c->state = ISC_CONN_CLOSED;
	isc_nop_stop(c);
	gw_timer_fini(&c->nop_timer);
	/* The datamover first: once it is closed nothing it queued refers to task buffers. */
	dmv_conn_close(c->dc);
	isc_conn_orphan_tasks(c);
	isc_tmf_conn_gone(c);
	isc_login_free(c);
	if (c->neg) {
		isc_neg_destroy(c->neg);
		c->neg = NULL;
	}
	gw_list_del(&c->node);
	__atomic_fetch_sub(&c->gw->nconns, 1, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&c->portal->nconns, 1, __ATOMIC_RELAXED);
	if (s) {
		isc_session_del_conn(s, c);
		/* ErrorRecoveryLevel 0: the failed session's commands still waiting for their
		 * CmdSN turn go with it. */
		if (!s->nconns)
			isc_task_drop_pending(s);
	}
	c->sess = NULL;
	gw_loop_close(c->lp->loop, &c->cl, isc_conn_free);
}

/*
 * A new session's loop: the least loaded (fewest connections), and among those equally
 * loaded the one owning most of the target's LUs, so a session alone on its target does not
 * send every command across to another loop (docs/PERFORMANCE.md, "Messages between loops").
 * -1 (the datamover's own least-loaded pick) when the first PDU names no target this gateway
 * has (discovery, a Login split over several PDUs).
 */
static int isc_conn_place_new(struct isc_gw *gw, const struct pdu *first)
{
	const struct gw_loops *set = gw->loops;
	struct isc_kvlist keys;
	const struct isc_target *t = NULL;
	const char *name;
	unsigned min = UINT_MAX, lus = 0;
	int best = -1;

	if (!set || set->n < 2 || !first->data_len)
		return -1;
	isc_kvlist_init(&keys);
	if (!isc_kvlist_parse(&keys, first->data, first->data_len)) {
		name = isc_kvlist_get(&keys, "TargetName");
		/* Targets come and go on this loop (apply), where place runs: t stays valid. */
		if (name)
			t = isc_gw_find_target(gw, name);
	}
	isc_kvlist_fini(&keys);
	if (!t || !t->dev)
		return -1;
	for (unsigned i = 0; i < set->n; i++) {
		unsigned load = __atomic_load_n(&set->load[i], __ATOMIC_RELAXED);
		unsigned n = scsi_dev_lus_on_loop(t->dev, i);

		if (load < min || (load == min && n > lus)) {
			min = load;
			lus = n;
			best = (int)i;
		}
	}
	return best;
}

int isc_conn_place(struct dmv_portal *dp, const struct pdu *first)
{
	struct isc_portal *p = dp->priv;
	struct isc_gw *gw = p->gw;
	const struct isc_session *s;
	uint16_t tsih;
	int li = -1;

	if (pdu_bhs_opcode(first->bhs) != ISC_OP_LOGIN_REQ)
		return -1;
	tsih = pdu_get16(first->bhs, 14);
	if (!tsih)
		return isc_conn_place_new(gw, first);
	/* A later connection of a session: on the session's loop, where its login looks the
	 * session up (the registry says which). */
	pthread_mutex_lock(&gw->reg_lock);
	gw_list_for_each_entry(s, &gw->sessions, node) {
		if (s->tsih == tsih && !s->closing && !memcmp(s->isid, first->bhs + 8, 6)) {
			li = (int)s->lp->idx;
			break;
		}
	}
	pthread_mutex_unlock(&gw->reg_lock);
	return li;
}
