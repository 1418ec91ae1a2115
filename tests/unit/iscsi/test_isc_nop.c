// SPDX-License-Identifier: MIT
/* Connection upkeep: target pings and the NOP timeout, Asynchronous Messages for LUN changes,
 * and a session with two connections (MC/S) keeping CmdSN order across them. */
#include "harness.h"

#define CONF_FAST_NOP                                                                       \
	"{ \"portals\": [ { \"name\": \"p0\", \"address\": \"127.0.0.1\" } ],"                  \
	"  \"targets\": [ { \"name\": \"" H_TARGET "\", \"portals\": [\"p0\"],"               \
	"    \"allow_any_initiator\": true,"                                                   \
	"    \"params\": { \"nop_interval\": 1, \"nop_timeout\": 2, \"MaxConnections\": 2 },"  \
	"    \"luns\": [ { \"lun\": 0, \"backstore\": { \"type\": \"ram\", \"size\": \"1M\" } } ]"  \
	"  } ] }"

static struct h H;

static void setup(void)
{
	h_setup(&H, CONF_FAST_NOP);
}

static void teardown(void)
{
	h_teardown(&H);
}

TestSuite(isc_nop, .init = setup, .fini = teardown);

/* Runs the loop for about ms milliseconds. */
static void run_for(int ms)
{
	uint64_t end = gw_now_ms() + (uint64_t)ms;

	while (gw_now_ms() < end)
		gw_loop_run_once(&H.loop, 20);
}

Test(isc_nop, idle_connection_is_pinged_and_dropped_without_answer, .timeout = 10)
{
	struct fake_conn *c = h_connect(&H);
	uint8_t bhs[ISC_BHS_LEN];
	struct pdu *ping;
	uint32_t ttt;
	uint16_t st;

	h_login(&H, c, H_INITIATOR, H_TARGET, 1, 0, 0, &st);
	cr_assert_eq(st, 0);
	run_for(2300);
	ping = fake_dmv_pop(c);
	cr_assert_not_null(ping, "no NOP-In after nop_interval of silence");
	cr_expect_eq(pdu_bhs_opcode(ping->bhs), ISC_OP_NOP_IN);
	cr_expect_eq(pdu_bhs_itt(ping->bhs), ISC_RSVD_TAG);
	ttt = pdu_get32(ping->bhs, 20);
	cr_expect_neq(ttt, ISC_RSVD_TAG);
	cr_expect_eq(pdu_get32(ping->bhs, 24), H.exp_statsn, "a ping does not advance StatSN");
	pdu_put(ping);
	/* Answered: the connection lives on. */
	fake_bhs(bhs, ISC_OP_NOP_OUT | ISC_BHS_I, ISC_FL_F, ISC_RSVD_TAG);
	pdu_put32(bhs, 20, ttt);
	pdu_put32(bhs, 24, H.cmdsn);
	fake_dmv_rx(c, bhs, NULL, 0);
	cr_expect_eq(c->nsent, 0, "no answer to an answer");
	run_for(1500);
	cr_expect_not(c->closed);
	/* Now silent: pinged again, then dropped after nop_timeout. */
	run_for(3500);
	cr_expect(c->closed, "dropped after nop_timeout without an answer");
}

Test(isc_nop, new_lun_sends_an_asynchronous_message)
{
	struct fake_conn *c = h_connect(&H);
	struct isc_target *t = isc_gw_next_target(H.gw, NULL);
	struct scsi_lu_conf lc;
	struct bs_conf bc;
	struct gw_errlist errs;
	struct pdu *msg;
	struct bs *bs;
	uint16_t st;

	h_login(&H, c, H_INITIATOR, H_TARGET, 1, 0, 0, &st);
	cr_assert_eq(st, 0);
	gw_errlist_init(&errs);
	memset(&lc, 0, sizeof(lc));
	memset(&bc, 0, sizeof(bc));
	gw_conf_defaults(conf_lu_keys, &lc);
	gw_conf_defaults(conf_bs_keys, &bc);
	lc.lun = 7;
	bc.type = BS_TYPE_RAM;
	bc.size = 1 << 20;
	cr_assert_eq(bs_create(&H.loop, &bc, &bs, &errs), 0);
	cr_assert_eq(scsi_dev_add_lu(t->dev, &lc, bs, &errs), 0);
	fake_dmv_settle(&H.loop);
	msg = fake_dmv_pop(c);
	cr_assert_not_null(msg, "no Asynchronous Message");
	cr_expect_eq(pdu_bhs_opcode(msg->bhs), ISC_OP_ASYNC);
	cr_expect_eq(msg->bhs[36], 0, "AsyncEvent 0: SCSI asynchronous event");
	cr_expect_eq(scsi_lun_decode(msg->bhs + 8), 7);
	cr_assert_geq(msg->data_len, 2 + 14);
	cr_expect_eq(msg->data[2 + 2] & 0xf, SCSI_SK_UNIT_ATTENTION);
	cr_expect_eq(msg->data[2 + 12], 0x3f);
	cr_expect_eq(msg->data[2 + 13], 0x0e);
	cr_expect_eq(pdu_get32(msg->bhs, 24), H.exp_statsn, "StatSN assigned");
	pdu_put(msg);
	gw_conf_free(conf_lu_keys, &lc);
	gw_conf_free(conf_bs_keys, &bc);
	gw_errlist_fini(&errs);
}

Test(isc_nop, two_connections_share_one_cmdsn_order)
{
	struct fake_conn *c1 = h_connect(&H), *c2 = h_connect(&H);
	static const uint8_t tur[16];
	struct pdu *rsp;
	uint32_t first;
	uint16_t st, tsih;

	tsih = h_login(&H, c1, H_INITIATOR, H_TARGET, 1, 0, 0, &st);
	cr_assert_eq(st, 0);
	cr_assert_eq(h_login(&H, c2, H_INITIATOR, H_TARGET, 1, tsih, 1, &st), tsih);
	cr_assert_eq(st, 0, "second connection refused: 0x%04x", st);
	h_clear_ua(&H, c1);
	first = H.cmdsn;
	/* CmdSN first+1 on connection 2 arrives before first on connection 1. */
	H.cmdsn = first + 1;
	h_scsi_cmd(&H, c2, 0xb2, ISC_FL_F, tur, 16, 0, NULL, 0);
	fake_dmv_settle(&H.loop);
	cr_expect_eq(c2->nsent, 0, "held until CmdSN %u arrives", first);
	H.cmdsn = first;
	h_scsi_cmd(&H, c1, 0xb1, ISC_FL_F, tur, 16, 0, NULL, 0);
	fake_dmv_settle(&H.loop);
	rsp = fake_dmv_pop(c1);
	cr_assert_not_null(rsp);
	cr_expect_eq(pdu_bhs_itt(rsp->bhs), 0xb1);
	pdu_put(rsp);
	rsp = fake_dmv_pop(c2);
	cr_assert_not_null(rsp, "the response goes back on the connection the command came on");
	cr_expect_eq(pdu_bhs_itt(rsp->bhs), 0xb2);
	cr_expect_eq(pdu_get32(rsp->bhs, 28), first + 2);
	pdu_put(rsp);
	/* Logging out one connection leaves the session up. */
	{
		uint8_t bhs[ISC_BHS_LEN];

		fake_bhs(bhs, ISC_OP_LOGOUT_REQ | ISC_BHS_I, ISC_FL_F | 1, 0xb3);
		pdu_put16(bhs, 20, 1);
		pdu_put32(bhs, 24, first + 2);
		fake_dmv_rx(c2, bhs, NULL, 0);
		rsp = fake_dmv_pop(c2);
		cr_assert_not_null(rsp);
		cr_expect_eq(rsp->bhs[2], 0);
		pdu_put(rsp);
		cr_expect(c2->closed);
		cr_expect_not(c1->closed);
	}
}

/* Acknowledges StatSNs below exp with a NOP-Out that asks for no answer (ITT and TTT reserved). */
static void ack_statsn(struct fake_conn *c, uint32_t exp)
{
	uint8_t bhs[ISC_BHS_LEN];

	fake_bhs(bhs, ISC_OP_NOP_OUT | ISC_BHS_I, ISC_FL_F, ISC_RSVD_TAG);
	pdu_put32(bhs, 20, ISC_RSVD_TAG);
	pdu_put32(bhs, 24, H.cmdsn);
	pdu_put32(bhs, 28, exp);
	fake_dmv_rx(c, bhs, NULL, 0);
	fake_dmv_settle(&H.loop);
}

/* Pops an Asynchronous Message and returns its LUN and StatSN (-1: none was sent). */
static int64_t pop_async(struct fake_conn *c, uint32_t *statsn)
{
	struct pdu *msg = fake_dmv_pop(c);
	int64_t lun;

	if (!msg)
		return -1;
	cr_assert_eq(pdu_bhs_opcode(msg->bhs), ISC_OP_ASYNC);
	lun = (int64_t)scsi_lun_decode(msg->bhs + 8);
	*statsn = pdu_get32(msg->bhs, 24);
	pdu_put(msg);
	return lun;
}

/* MaxOutstandingUnexpectedPDUs=2 (RFC 7145 §6.6): one Asynchronous Message at a time (the other
 * place is a ping's); the next waits until ExpStatSN acknowledges it, identical news waits once,
 * and nothing is lost. */
Test(isc_nop, asynchronous_messages_wait_for_room_under_max_outstanding_unexpected_pdus)
{
	struct fake_conn *c = h_connect(&H);
	struct isc_target *t = isc_gw_next_target(H.gw, NULL);
	struct isc_conn *ic;
	uint32_t sn1, sn2, sn3;
	uint16_t st;

	h_login(&H, c, H_INITIATOR, H_TARGET, 1, 0, 0, &st);
	cr_assert_eq(st, 0);
	ic = c->base.priv;
	ic->sess->params.max_outstanding_unexpected_pdus = 2;	/* as an iSER login negotiates */
	isc_target_scsi_event(NULL, SCSI_EV_CAPACITY_CHANGED, 1, t);
	isc_target_scsi_event(NULL, SCSI_EV_CAPACITY_CHANGED, 2, t);
	isc_target_scsi_event(NULL, SCSI_EV_CAPACITY_CHANGED, 2, t);
	isc_target_scsi_event(NULL, SCSI_EV_LUNS_CHANGED, 3, t);
	fake_dmv_settle(&H.loop);
	cr_assert_eq(pop_async(c, &sn1), 1);
	cr_expect_eq(c->nsent, 0, "a second message before the first was acknowledged");
	/* An ExpStatSN that does not pass it changes nothing. */
	ack_statsn(c, sn1);
	cr_expect_eq(c->nsent, 0);
	ack_statsn(c, sn1 + 1);
	cr_assert_eq(pop_async(c, &sn2), 2);
	cr_expect_eq(c->nsent, 0, "LUN 2's news twice is one message");
	ack_statsn(c, sn2 + 1);
	cr_assert_eq(pop_async(c, &sn3), 3);
	ack_statsn(c, sn3 + 1);
	cr_expect_eq(c->nsent, 0, "nothing else was waiting");
	cr_expect_not(c->closed);
}

/* Without the key (TCP, or an initiator that does not declare it) nothing is held back. */
Test(isc_nop, asynchronous_messages_are_not_held_without_the_key)
{
	struct fake_conn *c = h_connect(&H);
	struct isc_target *t = isc_gw_next_target(H.gw, NULL);
	uint32_t sn;
	uint16_t st;

	h_login(&H, c, H_INITIATOR, H_TARGET, 1, 0, 0, &st);
	cr_assert_eq(st, 0);
	isc_target_scsi_event(NULL, SCSI_EV_CAPACITY_CHANGED, 1, t);
	isc_target_scsi_event(NULL, SCSI_EV_CAPACITY_CHANGED, 2, t);
	isc_target_scsi_event(NULL, SCSI_EV_CAPACITY_CHANGED, 3, t);
	fake_dmv_settle(&H.loop);
	cr_expect_eq(pop_async(c, &sn), 1);
	cr_expect_eq(pop_async(c, &sn), 2);
	cr_expect_eq(pop_async(c, &sn), 3);
}

/* ---- The NOP timer on loop 1: it reads its connection's loop clock, which stamped
 * the connection's last PDU, not loop 0's. Loop 0 sleeps while loop 1 serves I/O, so its clock
 * lags: read against loop 1's stamps it made a busy session look idle (pinged every second)
 * and an idle one look busy. Both loops are settled on the test's thread; the clocks are set
 * by hand and the timer's tick is called directly, so no real second has to pass. */

static struct gw_loop L1;
static struct gw_loops LS;

static void loops_setup(void)
{
	h_setup_loops(&H, CONF_FAST_NOP, &L1, &LS);
}

static void loops_teardown(void)
{
	isc_gw_stop(H.gw);
	for (int i = 0; i < 3; i++) {
		fake_dmv_settle(&H.loop);
		fake_dmv_settle(&L1);
	}
	teardown();
	gw_loop_fini(&L1);
}

TestSuite(isc_nop_loops, .init = loops_setup, .fini = loops_teardown);

Test(isc_nop_loops, the_timer_reads_the_connection_s_loop_clock_not_loop_0_s)
{
	struct fake_conn *c = fake_dmv_connect_on(H.dp, &L1, &H.gw->lps[1].pdus);
	void (*tick)(struct gw_timer *);
	struct isc_conn *ic;
	struct pdu *ping;
	uint64_t rx;
	uint16_t st;

	H.conns[H.nconns++] = c;
	h_login(&H, c, H_INITIATOR, H_TARGET, 1, 0, 0, &st);
	cr_assert_eq(st, 0);
	ic = c->base.priv;
	cr_assert_eq(ic->lp->loop, &L1, "the connection runs on loop 1");
	cr_assert(ic->nop_timer_on, "nop_interval 1: the timer runs");
	/* The test owns the clocks from here: the real timer stops, its tick is called by hand. */
	tick = ic->nop_timer.fn;
	isc_nop_stop(ic);
	fake_dmv_drain(c);
	/* A PDU on loop 1, stamped with loop 1's clock; loop 0's is an hour behind. */
	L1.now_ms = H.loop.now_ms + 3600 * 1000;
	ack_statsn(c, H.exp_statsn);
	rx = ic->last_rx_ms;
	cr_assert_eq(rx, L1.now_ms, "the PDU is stamped with its loop's clock");
	H.loop.now_ms = rx - 3600 * 1000;
	L1.now_ms = rx + 200;
	tick(&ic->nop_timer);
	cr_expect_eq(c->nsent, 0, "pinged 0.2 s after a PDU: loop 0's clock was read");
	cr_expect_eq(ic->ping_sent_ms, 0);
	/* Idle past nop_interval on loop 1's clock; loop 0's has not moved since the PDU. */
	H.loop.now_ms = rx;
	L1.now_ms = rx + 1500;
	tick(&ic->nop_timer);
	ping = fake_dmv_pop(c);
	cr_assert_not_null(ping, "not pinged 1.5 s after the last PDU: loop 0's clock was read");
	cr_expect_eq(pdu_bhs_opcode(ping->bhs), ISC_OP_NOP_IN);
	pdu_put(ping);
	cr_expect_eq(ic->ping_sent_ms, rx + 1500, "the ping is stamped with loop 1's clock");
	/* Unanswered for nop_timeout (2 s) on loop 1's clock: dropped, whatever loop 0's says. */
	L1.now_ms = rx + 1500 + 1900;
	tick(&ic->nop_timer);
	cr_expect_not(c->closed, "dropped before nop_timeout");
	L1.now_ms = rx + 1500 + 2000;
	tick(&ic->nop_timer);
	cr_expect(c->closed, "not dropped after nop_timeout: loop 0's clock was read");
}

/* A device event (raised on loop 0, where the configuration changes) reaches a session on
 * loop 1 as a message to loop 1: the connection's send queue is touched only there. And the
 * LUN counters of a target's sessions on two loops are two tables, each its loop's own. */
Test(isc_nop_loops, events_and_counters_stay_on_the_session_s_loop)
{
	struct fake_conn *c0 = h_connect(&H);
	struct fake_conn *c1 = fake_dmv_connect_on(H.dp, &L1, &H.gw->lps[1].pdus);
	struct isc_target *t = isc_gw_next_target(H.gw, NULL);
	uint32_t sn, cs;
	uint16_t st;

	H.conns[H.nconns++] = c1;
	h_login(&H, c0, H_INITIATOR, H_TARGET, 1, 0, 0, &st);
	cr_assert_eq(st, 0);
	h_login(&H, c1, H_INITIATOR, H_TARGET, 2, 0, 0, &st);
	cr_assert_eq(st, 0);
	cr_assert_eq(((struct isc_conn *)c1->base.priv)->lp->idx, 1);
	fake_dmv_drain(c0);
	fake_dmv_drain(c1);
	isc_target_scsi_event(NULL, SCSI_EV_CAPACITY_CHANGED, 1, t);
	fake_dmv_settle(&H.loop);
	cr_expect_eq(pop_async(c0, &sn), 1, "loop 0's session told");
	cr_expect_eq(c1->nsent, 0, "loop 1's connection was written from loop 0");
	fake_dmv_settle(&L1);
	cr_expect_eq(pop_async(c1, &sn), 1, "loop 1's session not told");

	/* Both sessions' first command takes the CmdSN their logins started at. */
	cs = H.cmdsn;
	h_clear_ua(&H, c0);
	H.cmdsn = cs;
	h_clear_ua(&H, c1);
	for (int i = 0; i < 2; i++) {
		const struct isc_loop_stats *ls = &t->lstats[i];

		cr_assert_eq(ls->n, 1, "loop %d: %zu LUN tables", i, ls->n);
		cr_expect_eq(ls->v[0].lun, 0);
		cr_expect_geq(ls->v[0].other_ops + ls->v[0].errors, 1, "loop %d counted nothing", i);
	}
}
