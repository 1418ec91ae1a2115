// SPDX-License-Identifier: MIT
/*
 * What every PDU handler needs to answer: a new target PDU, the StatSN/ExpCmdSN/MaxCmdSN
 * stamp, sending, Reject, target transfer tags, and handing negotiated parameters to the
 * datamover; and closing a connection or moving it to full feature phase, through what the
 * dispatcher registered (isc_priv.h). It calls nothing in the dispatcher (isc_conn.c) or the
 * handlers by name, so they all sit above it.
 */
#include <errno.h>
#include <string.h>

#include "gw_log.h"
#include "isc_priv.h"

/* Here rather than in isc_session.c: every PDU sent carries it, and the stamp must not call
 * up into the session layer. */
uint32_t isc_session_max_cmdsn(const struct isc_session *s)
{
	uint32_t room = s->queue_depth > s->active ? s->queue_depth - s->active : 0;

	return s->exp_cmdsn - 1 + room;
}

void isc_conn_stamp(struct isc_conn *c, uint8_t *bhs, bool advance)
{
	struct isc_session *s = c->sess;

	pdu_put32(bhs, 24, c->stat_sn);
	if (advance)
		c->stat_sn++;
	if (s) {
		pdu_put32(bhs, 28, s->exp_cmdsn);
		pdu_put32(bhs, 32, isc_session_max_cmdsn(s));
	}
}

struct pdu *isc_conn_new_pdu(struct isc_conn *c, uint8_t opcode, uint32_t itt)
{
	struct pdu *pdu = pdu_get(&c->lp->pdus);

	if (!pdu) {
		gw_err_rl("iscsi", "%s: out of memory for a PDU", c->dc->peer);
		return NULL;
	}
	pdu->bhs[0] = opcode;
	pdu->bhs[1] = ISC_FL_F;
	pdu_put32(pdu->bhs, 16, itt);
	return pdu;
}

int isc_conn_send(struct isc_conn *c, struct pdu *pdu)
{
	if (c->state == ISC_CONN_CLOSED) {
		pdu_put(pdu);
		return -ECONNRESET;
	}
	return dmv_send_pdu(c->dc, pdu);
}

uint32_t isc_conn_next_ttt(struct isc_conn *c)
{
	/* TTTs from the datamover's space, so R2T and NOP/Text tags never collide. */
	return dmv_conn_next_ttt(c->dc);
}

static void isc_reject_sent_close(struct pdu *pdu, int status)
{
	struct isc_conn *c = pdu->priv;

	(void)status;
	if (c->state != ISC_CONN_CLOSED)
		isc_conn_close(c, "data digest error on a command at ErrorRecoveryLevel 0");
}

static void isc_conn_reject_do(struct isc_conn *c, const uint8_t *bhs, uint8_t reason,
			       bool then_close)
{
	struct pdu *pdu;

	/* Before full feature phase there is no Reject: the dispatcher closes the connection
	 * instead (isc_conn.c). A closed connection sends nothing. */
	if (c->state != ISC_CONN_FFP)
		return;
	pdu = isc_conn_new_pdu(c, ISC_OP_REJECT, ISC_RSVD_TAG);
	if (!pdu) {
		if (then_close)
			isc_conn_close(c, "out of memory for a Reject");
		return;
	}
	pdu->bhs[2] = reason;
	isc_conn_stamp(c, pdu->bhs, true);
	if (pdu_set_data(pdu, bhs, ISC_BHS_LEN)) {
		pdu_put(pdu);
		if (then_close)
			isc_conn_close(c, "out of memory for a Reject");
		return;
	}
	gw_dbg("iscsi", "%s: Reject reason 0x%02x for %s ITT 0x%x%s", c->dc->peer, reason,
	       pdu_opcode_name(pdu_bhs_opcode(bhs)), pdu_bhs_itt(bhs),
	       then_close ? ", then the connection closes" : "");
	if (then_close) {
		pdu->priv = c;
		pdu->done = isc_reject_sent_close;
	}
	isc_conn_send(c, pdu);
}

void isc_conn_reject(struct isc_conn *c, const uint8_t *bhs, uint8_t reason)
{
	isc_conn_reject_do(c, bhs, reason, false);
}

void isc_conn_reject_close(struct isc_conn *c, const uint8_t *bhs, uint8_t reason)
{
	isc_conn_reject_do(c, bhs, reason, true);
}

void isc_conn_apply_params(struct isc_conn *c)
{
	/* This connection's own negotiation: digests and MaxRecvDataSegmentLength are
	 * connection-scoped (a second MC/S connection may differ from the leading one); the
	 * session-wide keys were fixed to the session's values on non-leading connections. */
	const struct isc_params *p = c->neg ? isc_neg_params(c->neg) : &c->sess->params;
	struct dmv_conn_params dp;

	memset(&dp, 0, sizeof(dp));
	dp.header_digest = p->header_digest;
	dp.data_digest = p->data_digest;
	dp.max_recv_dsl = p->max_recv_dsl;
	dp.max_xmit_dsl = p->max_xmit_dsl;
	dp.max_burst_length = p->max_burst_length;
	dp.first_burst_length = p->first_burst_length;
	dp.max_outstanding_r2t = p->max_outstanding_r2t;
	if (p->rdma_extensions) {
		/* iSER replaces MaxRecvDataSegmentLength with a key per direction (RFC 7145 §6). */
		dp.max_recv_dsl = p->target_recv_dsl;
		dp.max_xmit_dsl = p->initiator_recv_dsl;
	}
	/* A discovery session still receives at least the login-time 8192 bytes per PDU. */
	if (dp.max_recv_dsl < 8192)
		dp.max_recv_dsl = 8192;
	dmv_conn_set_params(c->dc, &dp);
}

void isc_conn_close(struct isc_conn *c, const char *why)
{
	c->ops->close(c, why);
}

void isc_conn_enter_ffp(struct isc_conn *c)
{
	c->ops->enter_ffp(c);
}
