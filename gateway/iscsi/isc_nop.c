// SPDX-License-Identifier: MIT
/*
 * Connection upkeep: NOP-Out/NOP-In (RFC 7143 §11.18, §11.19) both ways, with a target ping
 * every nop_interval seconds of silence and a drop after nop_timeout seconds without an
 * answer; Logout (§11.14, §11.15); Asynchronous Messages (§11.9) for SCSI events.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gw_log.h"
#include "isc_priv.h"

/* ---------------------------------------------------------------------------------------- */
/* NOP */

void isc_nop_rx(struct isc_conn *c, struct pdu *pdu)
{
	const uint8_t *bhs = pdu->bhs;
	uint32_t itt = pdu_bhs_itt(bhs), ttt = pdu_get32(bhs, 20);
	struct pdu *rsp;

	if (itt == ISC_RSVD_TAG && !pdu_bhs_immediate(bhs)) {
		/* A NOP-Out that wants no answer must be immediate (§11.18). */
		isc_conn_reject(c, bhs, ISC_REJ_PROTOCOL);
		return;
	}
	if (!isc_cmdsn_take(c, bhs))
		return;
	if (ttt != ISC_RSVD_TAG) {
		if (c->ping_sent_ms && ttt == c->ping_ttt)
			c->ping_sent_ms = 0;
		else
			gw_dbg("iscsi", "%s: NOP-Out answers unknown TTT 0x%x", c->dc->peer, ttt);
	}
	if (itt == ISC_RSVD_TAG)
		return;
	rsp = isc_conn_new_pdu(c, ISC_OP_NOP_IN, itt);
	if (!rsp)
		return;
	memcpy(rsp->bhs + 8, bhs + 8, 8);
	pdu_put32(rsp->bhs, 20, ISC_RSVD_TAG);
	isc_conn_stamp(c, rsp->bhs, true);
	/* The ping data comes back as it was sent. */
	if (pdu->data_len && pdu_set_data(rsp, pdu->data, pdu->data_len)) {
		pdu_put(rsp);
		return;
	}
	isc_conn_send(c, rsp);
}

static void isc_nop_tick(struct gw_timer *tm)
{
	struct isc_conn *c = gw_container_of(tm, struct isc_conn, nop_timer);
	const struct isc_param_conf *pc;
	/* The connection's loop's clock, which last_rx_ms and ping_sent_ms come from: loop 0's
	 * lags behind while it sleeps (a session on loop 1 was pinged every second under I/O). */
	uint64_t now = c->lp->loop->now_ms;
	struct pdu *ping;

	if (c->state != ISC_CONN_FFP || !c->sess || !c->sess->target)
		return;
	pc = &c->sess->target->conf->params;
	if (c->ping_sent_ms) {
		if (pc->nop_timeout && now - c->ping_sent_ms >= (uint64_t)pc->nop_timeout * 1000) {
			gw_warn("iscsi", "%s: no answer to NOP-In for %u s", c->dc->peer,
				pc->nop_timeout);
			isc_conn_close(c, "NOP timeout");
		}
		return;
	}
	if (!pc->nop_interval || now - c->last_rx_ms < (uint64_t)pc->nop_interval * 1000)
		return;
	ping = isc_conn_new_pdu(c, ISC_OP_NOP_IN, ISC_RSVD_TAG);
	if (!ping)
		return;
	c->ping_ttt = isc_conn_next_ttt(c);
	pdu_put32(ping->bhs, 20, c->ping_ttt);
	/* ITT 0xffffffff: StatSN is not advanced (§11.19.1). */
	isc_conn_stamp(c, ping->bhs, false);
	c->ping_sent_ms = now ? now : 1;
	isc_conn_send(c, ping);
}

void isc_nop_start(struct isc_conn *c)
{
	const struct isc_param_conf *pc;

	if (!c->sess || !c->sess->target)
		return;
	pc = &c->sess->target->conf->params;
	if (!pc->nop_interval && !pc->nop_timeout)
		return;
	c->nop_timer.fn = isc_nop_tick;
	/* One-second ticks: pings and timeouts are counted in whole seconds. */
	if (gw_timer_arm(&c->nop_timer, 1000, 1000) == 0)
		c->nop_timer_on = true;
}

void isc_nop_stop(struct isc_conn *c)
{
	if (!c->nop_timer_on)
		return;
	gw_timer_disarm(&c->nop_timer);
	c->nop_timer_on = false;
}

/* ---------------------------------------------------------------------------------------- */
/* Logout */

enum {
	ISC_LOGOUT_CLOSE_SESSION = 0,
	ISC_LOGOUT_CLOSE_CONN = 1,
	ISC_LOGOUT_RECOVERY = 2,
};

static void isc_logout_sent(struct pdu *pdu, int status)
{
	struct isc_conn *c = pdu->priv;

	(void)status;
	if (c->state == ISC_CONN_CLOSED)
		return;
	if (c->logout_session && c->sess)
		isc_session_close(c->sess, "logout");
	else
		isc_conn_close(c, "logout");
}

void isc_logout_rx(struct isc_conn *c, struct pdu *pdu)
{
	const uint8_t *bhs = pdu->bhs;
	uint8_t reason = bhs[1] & 0x7f, response = 0;
	uint16_t cid = pdu_get16(bhs, 20);
	struct isc_session *s = c->sess;
	struct isc_conn *target = NULL, *oc;
	struct pdu *rsp;

	if (!isc_cmdsn_take(c, bhs))
		return;
	switch (reason) {
	case ISC_LOGOUT_CLOSE_SESSION:
		target = c;
		c->logout_session = true;
		break;
	case ISC_LOGOUT_CLOSE_CONN:
		gw_list_for_each_entry(oc, &s->conns, node)
			if (oc->cid == cid)
				target = oc;
		if (!target)
			response = 1;	/* CID not found */
		break;
	case ISC_LOGOUT_RECOVERY:
		response = 2;		/* connection recovery is not supported (ERL 0) */
		break;
	default:
		isc_conn_reject(c, bhs, ISC_REJ_INVALID_FIELD);
		return;
	}
	rsp = isc_conn_new_pdu(c, ISC_OP_LOGOUT_RSP, pdu_bhs_itt(bhs));
	if (!rsp) {
		isc_conn_close(c, "out of memory");
		return;
	}
	rsp->bhs[2] = response;
	isc_conn_stamp(c, rsp->bhs, true);
	/* Time2Wait / Time2Retain 0: at ERL 0 nothing is kept for reconnection. */
	gw_dbg("iscsi", "%s: logout reason %u CID %u: response %u", c->dc->peer, reason, cid,
	       response);
	if (target && target != c) {
		isc_conn_close(target, "logged out by another connection");
		isc_conn_send(c, rsp);
		return;
	}
	if (target == c) {
		c->state = ISC_CONN_LOGOUT;
		rsp->done = isc_logout_sent;
		rsp->priv = c;
	}
	isc_conn_send(c, rsp);
}

/* ---------------------------------------------------------------------------------------- */
/* Asynchronous Messages */

/*
 * RFC 7145 §6.6: over iSER the initiator may declare how many unexpected PDUs (target pings,
 * Asynchronous Messages) it can take at once, MaxOutstandingUnexpectedPDUs. An Asynchronous
 * Message is outstanding until ExpStatSN passes its StatSN; at most limit - 1 are, one place
 * staying free for a ping (the key is at least 2). Beyond that, events wait (identical ones
 * once) and go out as acknowledgements come in. Without the key nothing is held back.
 */
static unsigned int isc_async_room(const struct isc_conn *c)
{
	uint32_t limit = c->sess ? c->sess->params.max_outstanding_unexpected_pdus : 0;

	if (!limit)
		return ISC_ASYNC_MAX;	/* not tracked: always room */
	limit = limit - 1 < ISC_ASYNC_MAX ? limit - 1 : ISC_ASYNC_MAX;
	return c->async_out < limit ? limit - c->async_out : 0;
}

static void isc_async_send_now(struct isc_conn *c, const struct isc_async_ev *ev)
{
	uint8_t sense[2 + 18];
	struct pdu *pdu;

	memset(sense, 0, sizeof(sense));
	sense[1] = 18;
	sense[2] = 0x70;			/* fixed format, current */
	sense[4] = SCSI_SK_UNIT_ATTENTION;
	sense[9] = 10;				/* additional sense length */
	sense[14] = ev->asc;
	sense[15] = ev->ascq;
	pdu = isc_conn_new_pdu(c, ISC_OP_ASYNC, ISC_RSVD_TAG);
	if (!pdu)
		return;
	scsi_lun_encode(ev->lun, pdu->bhs + 8);
	pdu_put32(pdu->bhs, 20, ISC_RSVD_TAG);
	pdu->bhs[36] = 0;			/* AsyncEvent 0: SCSI asynchronous event */
	if (pdu_set_data(pdu, sense, sizeof(sense))) {
		pdu_put(pdu);
		return;
	}
	if (c->sess->params.max_outstanding_unexpected_pdus)
		c->async_sn[c->async_out++] = c->stat_sn;
	isc_conn_stamp(c, pdu->bhs, true);
	gw_dbg("iscsi", "%s: asynchronous message, LUN %llu sense 6/%02x/%02x", c->dc->peer,
	       (unsigned long long)ev->lun, ev->asc, ev->ascq);
	isc_conn_send(c, pdu);
}

static void isc_async_post(struct isc_conn *c, const struct isc_async_ev *ev)
{
	unsigned int i;

	if (!c->async_nwait && isc_async_room(c)) {
		isc_async_send_now(c, ev);
		return;
	}
	for (i = 0; i < c->async_nwait; i++) {
		const struct isc_async_ev *w = &c->async_wait[i];

		if (w->lun == ev->lun && w->asc == ev->asc && w->ascq == ev->ascq)
			return;		/* the same news is already waiting */
	}
	if (c->async_nwait == ISC_ASYNC_MAX) {
		gw_warn_rl("iscsi", "%s: %u Asynchronous Messages wait for the initiator's "
			   "acknowledgement (MaxOutstandingUnexpectedPDUs); dropping one for LUN "
			   "%llu", c->dc->peer, c->async_nwait, (unsigned long long)ev->lun);
		return;
	}
	c->async_wait[c->async_nwait++] = *ev;
}

void isc_async_acked(struct isc_conn *c)
{
	unsigned int i, n = 0, sent = 0;

	for (i = 0; i < c->async_out; i++)
		if (!pdu_sn_lt(c->async_sn[i], c->exp_stat_sn))
			c->async_sn[n++] = c->async_sn[i];
	c->async_out = n;
	while (sent < c->async_nwait && isc_async_room(c))
		isc_async_send_now(c, &c->async_wait[sent++]);
	if (sent) {
		memmove(c->async_wait, c->async_wait + sent,
			(c->async_nwait - sent) * sizeof(c->async_wait[0]));
		c->async_nwait -= sent;
	}
}

/* An event for the sessions of one target on one loop, queued there: a session's connections
 * and their send queues are its loop's alone. */
struct isc_async_msg {
	const struct isc_target *target;	/* compared, never read */
	struct isc_async_ev ev;
};

static void isc_async_walk(struct isc_loop *lp, const void *arg)
{
	const struct isc_async_msg *m = arg;
	struct isc_session *s;

	gw_list_for_each_entry(s, &lp->sessions, lnode) {
		struct isc_conn *c;

		if (s->target != m->target || s->closing)
			continue;
		/* One message per session, on its first connection in full feature phase. */
		gw_list_for_each_entry(c, &s->conns, node) {
			if (c->state != ISC_CONN_FFP)
				continue;
			isc_async_post(c, &m->ev);
			break;
		}
	}
}

/* The device's events (on the loop that changed it, loop 0 for the configuration's changes)
 * reach every session of the target on the session's own loop. */
void isc_target_scsi_event(struct scsi_dev *dev, enum scsi_event ev, uint64_t lun, void *arg)
{
	struct isc_target *t = arg;
	struct isc_gw *gw = t->gw;
	struct isc_async_ev e = { .lun = lun };

	(void)dev;
	if (ev == SCSI_EV_LUNS_CHANGED) {
		e.asc = 0x3f;			/* REPORTED LUNS DATA HAS CHANGED */
		e.ascq = 0x0e;
	} else {
		e.asc = 0x2a;			/* CAPACITY DATA HAS CHANGED */
		e.ascq = 0x09;
	}
	for (unsigned int i = 0; i < isc_gw_nloops(gw); i++) {
		struct isc_async_msg m = { t, e };

		if (isc_gw_on_loop(gw, &gw->lps[i], isc_async_walk, &m, sizeof(m)) == -ENOMEM)
			gw_err("iscsi", "out of memory telling loop %u's sessions of LUN %llu's "
			       "change", i, (unsigned long long)lun);
	}
}
