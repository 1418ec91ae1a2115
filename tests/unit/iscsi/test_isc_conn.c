// SPDX-License-Identifier: MIT
/* Connection-level handling: Rejects for malformed or unsupported PDUs, logout, loss of the
 * connection with a command in flight. */
#include "harness.h"

static struct h H;
static struct fake_conn *C;

static void setup(void)
{
	C = h_setup_session(&H, H_CONF_DEFAULT, false);
}

static void teardown(void)
{
	h_teardown(&H);
}

TestSuite(isc_conn, .init = setup, .fini = teardown);

static void expect_reject(uint8_t opcode, uint8_t reason)
{
	uint8_t bhs[ISC_BHS_LEN];
	struct pdu *rej;

	fake_bhs(bhs, opcode | ISC_BHS_I, ISC_FL_F, 0x42);
	fake_dmv_rx(C, bhs, NULL, 0);
	rej = fake_dmv_pop(C);
	cr_assert_not_null(rej, "no Reject for opcode 0x%02x", opcode);
	cr_expect_eq(pdu_bhs_opcode(rej->bhs), ISC_OP_REJECT);
	cr_expect_eq(rej->bhs[2], reason);
	cr_expect_eq(pdu_bhs_itt(rej->bhs), ISC_RSVD_TAG);
	cr_assert_eq(rej->data_len, ISC_BHS_LEN);
	cr_expect_eq(memcmp(rej->data, bhs, ISC_BHS_LEN), 0, "the offending header comes back");
	pdu_put(rej);
	cr_expect_not(C->closed);
}

Test(isc_conn, snack_is_rejected_at_erl0)
{
	expect_reject(ISC_OP_SNACK, ISC_REJ_SNACK);
}

Test(isc_conn, login_in_full_feature_phase_is_a_protocol_error)
{
	expect_reject(ISC_OP_LOGIN_REQ, ISC_REJ_PROTOCOL);
}

Test(isc_conn, reject_advances_statsn)
{
	uint8_t bhs[ISC_BHS_LEN];
	struct pdu *a, *b;

	fake_bhs(bhs, ISC_OP_SNACK, ISC_FL_F, 1);
	fake_dmv_rx(C, bhs, NULL, 0);
	fake_dmv_rx(C, bhs, NULL, 0);
	a = fake_dmv_pop(C);
	b = fake_dmv_pop(C);
	cr_assert(a && b);
	cr_expect_eq(pdu_get32(b->bhs, 24), pdu_get32(a->bhs, 24) + 1);
	pdu_put(a);
	pdu_put(b);
}

Test(isc_conn, bhs_check_verdicts)
{
	uint8_t bhs[ISC_BHS_LEN], reason;
	const char *why;

	fake_bhs(bhs, 0x1c, ISC_FL_F, 1);
	cr_expect_eq(pdu_bhs_check(bhs, 8192, &reason, &why), ISC_BHS_BAD_OPCODE);
	cr_expect_eq(reason, ISC_REJ_CMD_NOT_SUPPORTED);
	fake_bhs(bhs, ISC_OP_TEXT_REQ, ISC_FL_F | ISC_FL_C, 1);
	cr_expect_eq(pdu_bhs_check(bhs, 8192, &reason, &why), ISC_BHS_BAD_FIELD);
	cr_expect_eq(reason, ISC_REJ_PROTOCOL);
	fake_bhs(bhs, ISC_OP_SCSI_CMD, ISC_FL_F, 1);
	pdu_put24(bhs, 5, 8193);
	cr_expect_eq(pdu_bhs_check(bhs, 8192, &reason, &why), ISC_BHS_FATAL,
		     "a segment longer than declared cannot be trusted");
	pdu_put24(bhs, 5, 8192);
	cr_expect_eq(pdu_bhs_check(bhs, 8192, &reason, &why), ISC_BHS_OK);
}

Test(isc_conn, logout_closes_the_session_after_the_response)
{
	uint8_t bhs[ISC_BHS_LEN];
	struct pdu *rsp;

	fake_bhs(bhs, ISC_OP_LOGOUT_REQ | ISC_BHS_I, ISC_FL_F | 0, 0x50);
	pdu_put32(bhs, 24, H.cmdsn);
	fake_dmv_rx(C, bhs, NULL, 0);
	rsp = fake_dmv_pop(C);
	cr_assert_not_null(rsp);
	cr_expect_eq(pdu_bhs_opcode(rsp->bhs), ISC_OP_LOGOUT_RSP);
	cr_expect_eq(rsp->bhs[2], 0, "closed successfully");
	pdu_put(rsp);
	cr_expect(C->closed);
	fake_dmv_settle(&H.loop);
	cr_expect(gw_list_empty(&H.gw->sessions), "the session is gone");
}

Test(isc_conn, logout_for_recovery_is_not_supported)
{
	uint8_t bhs[ISC_BHS_LEN];
	struct pdu *rsp;

	fake_bhs(bhs, ISC_OP_LOGOUT_REQ | ISC_BHS_I, ISC_FL_F | 2, 0x51);
	fake_dmv_rx(C, bhs, NULL, 0);
	rsp = fake_dmv_pop(C);
	cr_assert_not_null(rsp);
	cr_expect_eq(rsp->bhs[2], 2);
	pdu_put(rsp);
	cr_expect_not(C->closed);
}

Test(isc_conn, connection_loss_with_io_in_flight_ends_the_session)
{
	uint8_t cdb[16];

	h_cdb_rw10(cdb, 0x28, 0, 8);
	h_scsi_cmd(&H, C, 0x60, ISC_FL_F | ISC_FL_R, cdb, 10, 4096, NULL, 0);
	/* Lost before the backstore completes. */
	fake_dmv_lose(C);
	cr_expect(C->closed);
	fake_dmv_settle(&H.loop);
	cr_expect(gw_list_empty(&H.gw->sessions));
	cr_expect(isc_gw_idle(H.gw));
}

/* ---------------------------------------------------------------------------------------- */
/* Portal limits: max_connections, login_timeout */

#define P_CONF                                                                              \
	"{ \"portals\": [ { \"name\": \"p0\", \"address\": \"127.0.0.1\", \"port\": 3260,"    \
	"    \"max_connections\": 3, \"login_timeout\": 1 } ],"                                \
	"  \"targets\": [ { \"name\": \"" H_TARGET "\", \"portals\": [\"p0\"],"               \
	"    \"initiators\": [ { \"name\": \"" H_INITIATOR "\" } ],"                           \
	"    \"params\": { \"nop_interval\": 0, \"nop_timeout\": 0 },"                         \
	"    \"luns\": [ { \"lun\": 0, \"backstore\": { \"type\": \"ram\", \"size\": \"1M\" } } ]"  \
	"  } ] }"

static void portal_setup(void)
{
	h_setup(&H, P_CONF);
}

TestSuite(isc_portal_limits, .init = portal_setup, .fini = teardown);

Test(isc_portal_limits, connections_past_max_connections_are_closed_at_accept)
{
	struct isc_portal *p = isc_gw_next_portal(H.gw, NULL);
	struct fake_conn *a = h_connect(&H), *b = h_connect(&H), *c = h_connect(&H), *d;
	uint16_t st;

	cr_expect(!a->closed && !b->closed && !c->closed);
	cr_expect_eq(p->nconns, 3);
	d = h_connect(&H);
	fake_dmv_settle(&H.loop);
	cr_expect(d->closed, "a fourth connection stays open");
	cr_expect_eq(p->conns_refused, 1);
	cr_expect_eq(p->nconns, 3);
	/* One leaves: there is room again, counted logged in or not. */
	fake_dmv_lose(a);
	fake_dmv_settle(&H.loop);
	cr_expect_eq(p->nconns, 2);
	d = h_connect(&H);
	h_login(&H, d, H_INITIATOR, H_TARGET, 1, 0, 0, &st);
	cr_expect_eq(st, 0);
	cr_expect_eq(p->nconns, 3);
}

Test(isc_portal_limits, a_login_not_finished_within_login_timeout_is_closed)
{
	struct fake_conn *idle = h_connect(&H), *done = h_connect(&H);
	uint64_t t0 = gw_now_ms();
	uint16_t st;

	h_login(&H, done, H_INITIATOR, H_TARGET, 1, 0, 0, &st);
	cr_assert_eq(st, 0);
	while (!idle->closed && gw_now_ms() - t0 < 3000)
		gw_loop_run_once(&H.loop, 50);
	fake_dmv_settle(&H.loop);
	cr_expect(idle->closed, "idle login still open after 3 s (login_timeout 1 s)");
	cr_expect_geq(gw_now_ms() - t0, 900, "closed before login_timeout");
	cr_expect(!done->closed, "the logged-in connection was closed too");
	cr_expect_eq(H.gw->login_timeouts, 1);
}

/* With several loops the TCP portal asks where a new connection goes: a login
 * naming a live session's TSIH goes to that session's loop, any other to the least loaded. */
Test(isc_conn, place_sends_a_tsih_to_its_session_s_loop)
{
	struct h h;
	struct gw_loop l1;
	struct gw_loops ls = { .n = 2 };
	struct pdu_pool *pool;
	struct isc_session *s;
	struct pdu *pdu;
	struct fake_conn *c;
	uint16_t st, tsih;

	h_setup(&h, H_CONF_DEFAULT);
	cr_assert_eq(gw_loop_init(&l1), 0);
	ls.loop[0] = &h.loop;
	ls.loop[1] = &l1;
	cr_assert_eq(isc_gw_set_loops(h.gw, &ls), 0);
	pool = &h.gw->lps[0].pdus;
	c = fake_dmv_connect_on(h.dp, &l1, &h.gw->lps[1].pdus);
	h.conns[h.nconns++] = c;
	tsih = h_login(&h, c, H_INITIATOR, H_TARGET, 1, 0, 0, &st);
	cr_assert_eq(st, 0);
	s = gw_list_first_entry(&h.gw->sessions, struct isc_session, node);
	cr_assert_eq(s->lp->idx, 1);

	pdu = pdu_get(pool);
	cr_assert_not_null(pdu);
	memset(pdu->bhs, 0, ISC_BHS_LEN);
	pdu->bhs[0] = ISC_OP_LOGIN_REQ | ISC_BHS_I;
	pdu->bhs[8] = 0x80;
	pdu->bhs[13] = 1;
	pdu_put16(pdu->bhs, 14, tsih);
	cr_expect_eq(isc_conn_place(h.dp, pdu), 1, "the session's loop");
	pdu_put16(pdu->bhs, 14, 0);
	cr_expect_eq(isc_conn_place(h.dp, pdu), -1, "a new session: the least loaded");
	pdu_put16(pdu->bhs, 14, (uint16_t)(tsih + 1));
	cr_expect_eq(isc_conn_place(h.dp, pdu), -1, "no such session");
	pdu->bhs[13] = 2;
	pdu_put16(pdu->bhs, 14, tsih);
	cr_expect_eq(isc_conn_place(h.dp, pdu), -1, "a TSIH with another ISID is not its");
	pdu_put(pdu);

	isc_gw_stop(h.gw);
	for (int i = 0; i < 3; i++) {
		fake_dmv_settle(&h.loop);
		fake_dmv_settle(&l1);
	}
	fake_dmv_drain(c);
	ctl_gw_destroy(h.cg);
	gw_loop_fini(&l1);
	gw_loop_fini(&h.loop);
	fake_dmv_conn_free(c);
}
