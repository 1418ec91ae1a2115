// SPDX-License-Identifier: MIT
/*
 * Text Requests in full feature phase (RFC 7143 §11.10, §11.11): key negotiation through
 * isc_param and SendTargets (Appendix C). Long requests arrive in pieces (C bit) and long
 * answers leave in pieces no larger than the initiator's MaxRecvDataSegmentLength, each
 * continued by an empty Text Request carrying the Target Transfer Tag.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_log.h"
#include "isc_priv.h"

/* "host" of an "host:port" / "[v6]:port" string, into buf. */
static const char *isc_text_host(const char *hostport, char *buf, size_t len)
{
	const char *colon = strrchr(hostport, ':');
	size_t n = colon ? (size_t)(colon - hostport) : strlen(hostport);

	if (n >= len)
		n = len - 1;
	memcpy(buf, hostport, n);
	buf[n] = '\0';
	return buf;
}

static int isc_text_add_target(struct isc_conn *c, const struct isc_target *t, struct gw_buf *out)
{
	struct isc_portal *p;
	char host[96], val[160];
	int r;

	r = isc_kv_append(out, "TargetName", t->conf->name);
	if (r)
		return r;
	gw_list_for_each_entry(p, &c->gw->portals, node) {
		const char *a = p->conf->address;

		/* Only portals that listen: one skipped at start-up (iSER) is not advertised. */
		if (!p->dp || !p->dp->listening || !isc_target_on_portal(t, p))
			continue;
		/* A wildcard portal answers with the address the initiator reached us on. */
		if (!a || !*a || !strcmp(a, "0.0.0.0") || !strcmp(a, "::"))
			isc_text_host(c->dc->local, host, sizeof(host));
		else if (strchr(a, ':'))
			snprintf(host, sizeof(host), "[%s]", a);
		else
			snprintf(host, sizeof(host), "%s", a);
		snprintf(val, sizeof(val), "%s:%u,%u", host, p->conf->port, t->conf->tpgt);
		r = isc_kv_append(out, "TargetAddress", val);
		if (r)
			return r;
	}
	return 0;
}

int isc_text_send_targets(struct isc_conn *c, const char *what, struct gw_buf *out)
{
	struct isc_session *s = c->sess;
	struct isc_target *t;
	int r;

	if (s->target) {
		/* Normal session: only its own target is reported (RFC 7143 Appendix C). */
		if (!*what || !strcmp(what, s->target->conf->name))
			return isc_text_add_target(c, s->target, out);
		if (!strcmp(what, "All"))
			return isc_text_add_target(c, s->target, out);
		return 0;
	}
	/* Loop 0 changes the lists (and a portal's dp) under the registry's lock. */
	r = 0;
	pthread_mutex_lock(&c->gw->reg_lock);
	gw_list_for_each_entry(t, &c->gw->targets, node) {
		const struct isc_chap_conf *chap;
		bool on_any = false;
		struct isc_portal *p;

		if (*what && strcmp(what, "All") && strcmp(what, t->conf->name))
			continue;
		if (isc_target_admit(t, s->initiator, &chap))
			continue;
		gw_list_for_each_entry(p, &c->gw->portals, node)
			if (p->dp && isc_target_on_portal(t, p))
				on_any = true;
		if (!on_any)
			continue;
		r = isc_text_add_target(c, t, out);
		if (r)
			break;
	}
	pthread_mutex_unlock(&c->gw->reg_lock);
	return r;
}

/* Sends the next piece of c->text_out. */
static void isc_text_send_piece(struct isc_conn *c, uint32_t itt)
{
	size_t left = c->text_out.len - c->text_out_off;
	uint32_t max = c->dc->params.max_xmit_dsl ? c->dc->params.max_xmit_dsl : 8192;
	struct pdu *pdu = isc_conn_new_pdu(c, ISC_OP_TEXT_RSP, itt);
	uint32_t n = left > max ? max : (uint32_t)left;

	if (!pdu)
		return;
	if (left > max) {
		pdu->bhs[1] = ISC_FL_C;
		c->text_ttt = isc_conn_next_ttt(c);
		c->text_itt = itt;
		pdu_put32(pdu->bhs, 20, c->text_ttt);
	} else {
		pdu->bhs[1] = ISC_FL_F;
		c->text_ttt = ISC_RSVD_TAG;
		pdu_put32(pdu->bhs, 20, ISC_RSVD_TAG);
	}
	isc_conn_stamp(c, pdu->bhs, true);
	/* An empty answer has no buffer at all: no arithmetic on its NULL. */
	if (pdu_set_data(pdu, n ? c->text_out.data + c->text_out_off : NULL, n)) {
		pdu_put(pdu);
		isc_conn_close(c, "out of memory");
		return;
	}
	c->text_out_off += n;
	if (c->text_out_off == c->text_out.len) {
		gw_buf_reset(&c->text_out);
		c->text_out_off = 0;
	}
	isc_conn_send(c, pdu);
}

void isc_text_rx(struct isc_conn *c, struct pdu *pdu)
{
	const uint8_t *bhs = pdu->bhs;
	uint32_t itt = pdu_bhs_itt(bhs), ttt = pdu_get32(bhs, 20);
	struct isc_kvlist keys;
	const char *st;
	uint16_t status = 0;
	int r;

	if (!isc_cmdsn_take(c, bhs))
		return;
	if (ttt != ISC_RSVD_TAG && c->text_in.len == 0) {
		/* Continuation of a long answer of ours. */
		if (ttt != c->text_ttt || itt != c->text_itt || !c->text_out.len) {
			isc_conn_reject(c, bhs, ISC_REJ_INVALID_FIELD);
			return;
		}
		isc_text_send_piece(c, itt);
		return;
	}
	/* A new request drops whatever was left of an answer the initiator gave up on. */
	gw_buf_reset(&c->text_out);
	c->text_out_off = 0;
	c->text_ttt = ISC_RSVD_TAG;
	if (gw_buf_append(&c->text_in, pdu->data, pdu->data_len) || c->text_in.len > 64 * 1024) {
		gw_buf_reset(&c->text_in);
		isc_conn_reject(c, bhs, ISC_REJ_PROTOCOL);
		return;
	}
	if (bhs[1] & ISC_FL_C) {
		/* An empty answer with a TTT asks for the rest of the request. */
		struct pdu *rsp = isc_conn_new_pdu(c, ISC_OP_TEXT_RSP, itt);

		if (!rsp)
			return;
		rsp->bhs[1] = 0;
		pdu_put32(rsp->bhs, 20, isc_conn_next_ttt(c));
		isc_conn_stamp(c, rsp->bhs, true);
		isc_conn_send(c, rsp);
		return;
	}
	isc_kvlist_init(&keys);
	r = isc_kvlist_parse(&keys, c->text_in.data, c->text_in.len);
	gw_buf_reset(&c->text_in);
	if (r == 0)
		r = isc_neg_process(c->neg, ISC_STAGE_FFP, &keys, &c->text_out, &status);
	isc_kvlist_fini(&keys);
	if (r == 0) {
		st = isc_neg_send_targets(c->neg);
		if (st)
			r = isc_text_send_targets(c, st, &c->text_out);
	}
	if (r) {
		gw_warn_rl("iscsi", "%s: Text Request refused (%s, status 0x%04x)", c->dc->peer,
			   strerror(-r), status);
		gw_buf_reset(&c->text_out);
		isc_conn_reject(c, bhs, ISC_REJ_PROTOCOL);
		return;
	}
	c->text_out_off = 0;
	isc_text_send_piece(c, itt);
	/* Values negotiated here (MaxRecvDataSegmentLength...) hold from the next PDU on. */
	if (c->state == ISC_CONN_FFP)
		isc_conn_apply_params(c);
}
