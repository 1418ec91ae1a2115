/* SPDX-License-Identifier: MIT */
/*
 * Test harness for the iSCSI engine over the fake datamover: a gateway built from a JSON
 * configuration (ram LUs), connections through a fake portal, and an initiator-side login.
 * Header-only (static functions) so no other unit binary links engine code because of it.
 */
#ifndef ISC_HARNESS_H
#define ISC_HARNESS_H

#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "conf.h"
#include "ctl.h"
#include "fake_dmv.h"
#include "isc_priv.h"

#define H_TARGET "iqn.2026-11.org.isergw:t1"
#define H_INITIATOR "iqn.2026-11.org.example:host1"

#define H_CONF_DEFAULT                                                                      \
	"{ \"portals\": [ { \"name\": \"p0\", \"address\": \"127.0.0.1\", \"port\": 3260 } ],"   \
	"  \"targets\": [ { \"name\": \"" H_TARGET "\", \"portals\": [\"p0\"],"               \
	"    \"allow_any_initiator\": false,"                                                  \
	"    \"initiators\": [ { \"name\": \"" H_INITIATOR "\" } ],"                           \
	"    \"params\": { \"queue_depth\": 4, \"nop_interval\": 0, \"nop_timeout\": 0,"       \
	"                  \"FirstBurstLength\": 8192, \"MaxBurstLength\": 16384 },"          \
	"    \"luns\": [ { \"lun\": 0, \"backstore\": { \"type\": \"ram\", \"size\": \"4M\" } } ]"  \
	"  }, { \"name\": \"iqn.2026-11.org.isergw:t2\", \"portals\": [\"p0\"],"              \
	"    \"allow_any_initiator\": true,"                                                   \
	"    \"luns\": [ { \"lun\": 0, \"backstore\": { \"type\": \"ram\", \"size\": \"1M\" } } ]"  \
	"  } ] }"

struct h {
	struct gw_loop loop;
	struct gw_loop *loop1;		/* a second loop, settled with loop when set */
	struct ctl_gw *cg;		/* the gateway as ctl builds it */
	struct isc_gw *gw;		/* its iSCSI engine */
	struct dmv_portal *dp;
	uint32_t itt;
	uint32_t cmdsn;
	uint32_t max_cmdsn;		/* from the last login's final response */
	uint32_t exp_statsn;
	struct fake_conn *conns[32];
	int nconns;
};

/* A new connection, freed by h_teardown (after the engine let go of it). */
static inline struct fake_conn *h_connect(struct h *h)
{
	struct fake_conn *c = fake_dmv_connect(h->dp);

	cr_assert_lt(h->nconns, 32);
	h->conns[h->nconns++] = c;
	return c;
}

static inline void h_setup(struct h *h, const char *conf)
{
	struct ctl_config cfg;
	struct gw_errlist errs;
	json_error_t jerr;
	json_t *root = json_loads(conf, 0, &jerr);
	struct isc_portal *p;

	memset(h, 0, sizeof(*h));
	cr_assert_not_null(root, "bad test JSON: %s", jerr.text);
	gw_errlist_init(&errs);
	if (conf_parse(root, &cfg, &errs)) {
		char *s = gw_errlist_join(&errs);

		cr_assert_fail("config: %s", s);
	}
	json_decref(root);
	cr_assert_eq(gw_loop_init(&h->loop), 0);
	cr_assert_eq(ctl_gw_create(&h->loop, cfg.isc, &h->cg, &errs), 0);
	h->gw = ctl_gw_engine(h->cg);
	cfg.isc = NULL;
	conf_free(&cfg);
	gw_errlist_fini(&errs);
	p = isc_gw_next_portal(h->gw, NULL);
	h->dp = fake_dmv_portal_new(&h->loop, &h->gw->lps[0].pdus);
	h->dp->accept = isc_conn_accept;
	h->dp->priv = p;
	p->dp = h->dp;
	h->itt = 0x1000;
	h->cmdsn = 1;
}

/* h_setup, then l1 as the gateway's second loop  through ls: both loops run on the
 * test's thread, settled in turn (h_login settles l1 too), unless the test starts l1's thread. */
static inline void h_setup_loops(struct h *h, const char *conf, struct gw_loop *l1,
				 struct gw_loops *ls)
{
	h_setup(h, conf);
	cr_assert_eq(gw_loop_init(l1), 0);
	ls->n = 2;
	ls->loop[0] = &h->loop;
	ls->loop[1] = l1;
	cr_assert_eq(isc_gw_set_loops(h->gw, ls), 0);
	h->loop1 = l1;
}

static inline void h_teardown(struct h *h)
{
	isc_gw_stop(h->gw);
	fake_dmv_settle(&h->loop);
	/* Captured PDUs go back to the gateway's pool before the pool goes. */
	for (int i = 0; i < h->nconns; i++)
		fake_dmv_drain(h->conns[i]);
	ctl_gw_destroy(h->cg);
	gw_loop_fini(&h->loop);
	for (int i = 0; i < h->nconns; i++)
		fake_dmv_conn_free(h->conns[i]);
}

/* The value of key in a PDU's text data, into buf ("" if absent). */
static inline const char *h_key(const struct pdu *pdu, const char *key, char *buf, size_t len)
{
	struct isc_kvlist l;
	const char *v;

	buf[0] = '\0';
	isc_kvlist_init(&l);
	if (pdu->data_len && isc_kvlist_parse(&l, pdu->data, pdu->data_len) == 0) {
		v = isc_kvlist_get(&l, key);
		if (v)
			snprintf(buf, len, "%s", v);
	}
	isc_kvlist_fini(&l);
	return buf;
}

/* Sends one Login Request and returns the response (caller puts it), or NULL. */
static inline struct pdu *h_login_req(struct h *h, struct fake_conn *c, uint8_t flags,
					  uint8_t isid_last, uint16_t tsih, uint16_t cid,
					  const char *text, size_t len)
{
	uint8_t bhs[ISC_BHS_LEN];

	fake_bhs(bhs, ISC_OP_LOGIN_REQ | ISC_BHS_I, flags, h->itt);
	bhs[8] = 0x80;
	bhs[13] = isid_last;
	pdu_put16(bhs, 14, tsih);
	pdu_put16(bhs, 20, cid);
	pdu_put32(bhs, 24, h->cmdsn);
	pdu_put32(bhs, 28, h->exp_statsn);
	fake_dmv_rx(c, bhs, text, (uint32_t)len);
	fake_dmv_settle(&h->loop);
	for (int i = 0; h->loop1 && i < 2; i++) {
		fake_dmv_settle(h->loop1);
		fake_dmv_settle(&h->loop);
	}
	return fake_dmv_pop(c);
}

static inline uint16_t h_status(const struct pdu *rsp)
{
	return (uint16_t)(rsp->bhs[36] << 8 | rsp->bhs[37]);
}

/*
 * Full login (security without authentication, then operational) of `initiator` to `target`
 * (NULL: discovery). Returns the TSIH, or 0 with *status set when the target refused.
 */
static inline uint16_t h_login(struct h *h, struct fake_conn *c, const char *initiator,
			       const char *target, uint8_t isid_last, uint16_t tsih, uint16_t cid,
			       uint16_t *status)
{
	char text[512];
	int n;
	struct pdu *rsp;
	uint16_t out = 0;

	if (target)
		n = snprintf(text, sizeof(text), "InitiatorName=%s%cTargetName=%s%c"
			     "SessionType=Normal%cAuthMethod=None%c", initiator, 0, target, 0, 0, 0);
	else
		n = snprintf(text, sizeof(text), "InitiatorName=%s%cSessionType=Discovery%c"
			     "AuthMethod=None%c", initiator, 0, 0, 0);
	*status = 0;
	rsp = h_login_req(h, c, ISC_FL_T | (0 << 2) | 1, isid_last, tsih, cid, text, (size_t)n);
	cr_assert_not_null(rsp, "no Login Response");
	cr_assert_eq(pdu_bhs_opcode(rsp->bhs), ISC_OP_LOGIN_RSP);
	h->exp_statsn = pdu_get32(rsp->bhs, 24) + 1;
	*status = h_status(rsp);
	if (*status) {
		pdu_put(rsp);
		return 0;
	}
	cr_assert(rsp->bhs[1] & ISC_FL_T, "no transit to the operational stage");
	pdu_put(rsp);
	/* Leading-only keys only on the leading connection. */
	if (tsih)
		n = snprintf(text, sizeof(text), "HeaderDigest=None%cDataDigest=None%c"
			     "MaxRecvDataSegmentLength=8192%c", 0, 0, 0);
	else
		n = snprintf(text, sizeof(text), "HeaderDigest=None%cDataDigest=None%c"
			     "MaxRecvDataSegmentLength=8192%cInitialR2T=No%cImmediateData=Yes%c"
			     "MaxBurstLength=16384%cFirstBurstLength=8192%cMaxOutstandingR2T=2%c"
			     "MaxConnections=4%c", 0, 0, 0, 0, 0, 0, 0, 0, 0);
	for (int i = 0; i < 3; i++) {
		rsp = h_login_req(h, c, ISC_FL_T | (1 << 2) | 3, isid_last, tsih, cid, text,
				  (size_t)n);
		cr_assert_not_null(rsp, "no Login Response");
		h->exp_statsn = pdu_get32(rsp->bhs, 24) + 1;
		*status = h_status(rsp);
		if (*status) {
			pdu_put(rsp);
			return 0;
		}
		if (rsp->bhs[1] & ISC_FL_T) {
			out = pdu_get16(rsp->bhs, 14);
			h->max_cmdsn = pdu_get32(rsp->bhs, 32);
			pdu_put(rsp);
			return out;
		}
		pdu_put(rsp);
		n = 0;
	}
	cr_assert_fail("login never reached full feature phase");
	return 0;
}

/* A SCSI Command (non-immediate) with CmdSN = h->cmdsn++. */
static inline void h_scsi_cmd(struct h *h, struct fake_conn *c, uint32_t itt, uint8_t flags,
			      const uint8_t *cdb, size_t cdb_len, uint32_t edtl,
			      const void *imm, uint32_t imm_len)
{
	uint8_t bhs[ISC_BHS_LEN];

	fake_bhs(bhs, ISC_OP_SCSI_CMD, flags, itt);
	pdu_put32(bhs, 20, edtl);
	pdu_put32(bhs, 24, h->cmdsn++);
	pdu_put32(bhs, 28, h->exp_statsn);
	memcpy(bhs + 32, cdb, cdb_len);
	fake_dmv_rx(c, bhs, imm, imm_len);
}

/* Runs loop 0 (and the second loop of h_setup_loops, in turn) until nothing is pending:
 * every message between the two loops is seen to arrive. */
static inline void h_settle(struct h *h)
{
	fake_dmv_settle(&h->loop);
	for (int i = 0; h->loop1 && i < 3; i++) {
		fake_dmv_settle(h->loop1);
		fake_dmv_settle(&h->loop);
	}
}

/* A new connection handed to the second loop (h_setup_loops), freed by h_teardown. */
static inline struct fake_conn *h_connect_on_loop1(struct h *h)
{
	struct fake_conn *c = fake_dmv_connect_on(h->dp, h->loop1, &h->gw->lps[1].pdus);

	cr_assert_lt(h->nconns, 32);
	h->conns[h->nconns++] = c;
	return c;
}

/* h_teardown after h_setup_loops: the sessions on both loops end first, then both loops go. */
static inline void h_teardown_loops(struct h *h)
{
	struct gw_loop *l1 = h->loop1;

	isc_gw_stop(h->gw);
	h_settle(h);
	h_teardown(h);
	gw_loop_fini(l1);
}

/* TEST UNIT READY until GOOD: clears the power-on unit attention of a new I_T nexus (on either
 * loop). */
static inline void h_clear_ua(struct h *h, struct fake_conn *c)
{
	static const uint8_t tur[16];

	for (int i = 0; i < 4; i++) {
		struct pdu *rsp;
		int st;

		h_scsi_cmd(h, c, 0xfff0 + (uint32_t)i, ISC_FL_F, tur, 16, 0, NULL, 0);
		h_settle(h);
		rsp = fake_dmv_pop(c);
		cr_assert_not_null(rsp, "no answer to TEST UNIT READY");
		st = rsp->bhs[3];
		h->exp_statsn = pdu_get32(rsp->bhs, 24) + 1;
		pdu_put(rsp);
		fake_dmv_drain(c);
		if (st == SCSI_GOOD)
			return;
	}
	cr_assert_fail("unit attention does not clear");
}

/* Pops c's PDUs until the status for itt; collects Data-In into buf. Returns the status byte. */
static inline int h_collect(struct h *h, struct fake_conn *c, uint32_t itt, uint8_t *buf,
			    uint32_t *got, struct pdu **rsp_out)
{
	struct pdu *p;
	uint32_t expect_datasn = 0;

	*got = 0;
	h_settle(h);
	while ((p = fake_dmv_pop(c))) {
		uint8_t op = pdu_bhs_opcode(p->bhs);

		cr_assert_eq(pdu_bhs_itt(p->bhs), itt, "PDU for another task");
		if (op == ISC_OP_DATA_IN) {
			cr_expect_eq(pdu_get32(p->bhs, 36), expect_datasn++, "DataSN in order");
			memcpy(buf + pdu_get32(p->bhs, 40), p->data, p->data_len);
			*got += p->data_len;
			if (p->bhs[1] & ISC_FL_S) {
				int st = p->bhs[3];

				if (rsp_out)
					*rsp_out = p;
				else
					pdu_put(p);
				return st;
			}
			pdu_put(p);
			continue;
		}
		cr_assert_eq(op, ISC_OP_SCSI_RSP, "unexpected %s", pdu_opcode_name(op));
		{
			int st = p->bhs[3];

			if (rsp_out)
				*rsp_out = p;
			else
				pdu_put(p);
			return st;
		}
	}
	return -1;
}

/* A new connection on loop 0, or on the second loop of h_setup_loops (loop 1), logged in as
 * H_INITIATOR with ISID ending in isid_last: h_login's answer. */
static inline uint16_t h_login_on(struct h *h, struct fake_conn **out, int loop, uint8_t isid_last,
				  uint16_t tsih, uint16_t cid, uint16_t *st)
{
	*out = loop ? h_connect_on_loop1(h) : h_connect(h);
	return h_login(h, *out, H_INITIATOR, H_TARGET, isid_last, tsih, cid, st);
}

/* The live (not closing) session with this TSIH, NULL when there is none. */
static inline struct isc_session *h_session_of(struct h *h, uint16_t tsih)
{
	struct isc_session *s;

	gw_list_for_each_entry(s, &h->gw->sessions, node)
		if (s->tsih == tsih && !s->closing)
			return s;
	return NULL;
}

/* h_setup on conf, then one connection logged in as H_INITIATOR to H_TARGET (ISID ...01),
 * with the new nexus's power-on unit attention cleared when clear_ua: the usual start of a
 * test that sends commands. */
static inline struct fake_conn *h_setup_session(struct h *h, const char *conf, bool clear_ua)
{
	struct fake_conn *c;
	uint16_t st;

	h_setup(h, conf);
	c = h_connect(h);
	h_login(h, c, H_INITIATOR, H_TARGET, 1, 0, 0, &st);
	cr_assert_eq(st, 0, "login refused: status 0x%04x", st);
	if (clear_ua)
		h_clear_ua(h, c);
	return c;
}

/* TEST UNIT READY with this CmdSN (not h's next one), as a SCSI Command PDU on c. */
static inline void h_tur(struct fake_conn *c, uint32_t itt, uint32_t cmdsn)
{
	uint8_t bhs[ISC_BHS_LEN];

	fake_bhs(bhs, ISC_OP_SCSI_CMD, ISC_FL_F, itt);
	pdu_put32(bhs, 24, cmdsn);
	fake_dmv_rx(c, bhs, NULL, 0);	/* CDB all zero: TEST UNIT READY */
}

static inline void h_cdb_rw10(uint8_t *cdb, uint8_t op, uint32_t lba, uint16_t blocks)
{
	memset(cdb, 0, 16);
	cdb[0] = op;
	pdu_put32(cdb, 2, lba);
	pdu_put16(cdb, 7, blocks);
}

#endif
