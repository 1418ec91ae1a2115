// SPDX-License-Identifier: MIT
/* The CmdSN window: ExpCmdSN/MaxCmdSN on responses, commands out of the window dropped,
 * commands ahead of ExpCmdSN held until the gap fills, then run in CmdSN order. */
#include "harness.h"

static struct h H;
static struct fake_conn *C;

static void setup(void)
{
	uint16_t st;

	h_setup(&H, H_CONF_DEFAULT);	/* queue_depth 4 */
	C = h_connect(&H);
	h_login(&H, C, H_INITIATOR, H_TARGET, 1, 0, 0, &st);
	cr_assert_eq(st, 0);
}

static void teardown(void)
{
	h_teardown(&H);
}

TestSuite(isc_session, .init = setup, .fini = teardown);

static void tur(uint32_t itt, uint32_t cmdsn)
{
	uint8_t bhs[ISC_BHS_LEN];

	fake_bhs(bhs, ISC_OP_SCSI_CMD, ISC_FL_F, itt);
	isc_put32(bhs, 24, cmdsn);
	fake_dmv_rx(C, bhs, NULL, 0);	/* CDB all zero: TEST UNIT READY */
}

Test(isc_session, responses_carry_the_window)
{
	struct isc_pdu *rsp;
	uint32_t first = H.cmdsn;

	tur(1, first);
	fake_dmv_settle(&H.loop);
	rsp = fake_dmv_pop(C);
	cr_assert_not_null(rsp);
	cr_expect_eq(isc_get32(rsp->bhs, 28), first + 1, "ExpCmdSN past the command");
	cr_expect_eq(isc_get32(rsp->bhs, 32), first + 4, "MaxCmdSN = ExpCmdSN + queue_depth - 1");
	isc_pdu_put(rsp);
}

Test(isc_session, command_beyond_max_cmdsn_is_dropped)
{
	uint32_t first = H.cmdsn;

	tur(1, first + 10);
	fake_dmv_settle(&H.loop);
	cr_expect_eq(C->nsent, 0, "silently ignored (RFC 7143 4.2.2.1)");
	/* And one below ExpCmdSN (a duplicate) too. */
	tur(2, first - 1);
	fake_dmv_settle(&H.loop);
	cr_expect_eq(C->nsent, 0);
	cr_expect_not(C->closed);
}

Test(isc_session, out_of_order_commands_wait_for_the_gap)
{
	struct isc_pdu *rsp;
	uint32_t first = H.cmdsn;

	tur(0x22, first + 2);
	tur(0x21, first + 1);
	fake_dmv_settle(&H.loop);
	cr_expect_eq(C->nsent, 0, "nothing runs before CmdSN %u arrives", first);
	tur(0x20, first);
	fake_dmv_settle(&H.loop);
	cr_assert_eq(C->nsent, 3);
	for (uint32_t i = 0; i < 3; i++) {
		rsp = fake_dmv_pop(C);
		cr_expect_eq(isc_bhs_itt(rsp->bhs), 0x20 + i, "answered in CmdSN order");
		isc_pdu_put(rsp);
	}
	tur(0x23, first + 3);
	fake_dmv_settle(&H.loop);
	rsp = fake_dmv_pop(C);
	cr_assert_not_null(rsp);
	cr_expect_eq(isc_get32(rsp->bhs, 28), first + 4);
	isc_pdu_put(rsp);
}

Test(isc_session, immediate_commands_do_not_use_the_window)
{
	uint8_t bhs[ISC_BHS_LEN];
	struct isc_pdu *rsp;
	uint32_t first = H.cmdsn;

	fake_bhs(bhs, ISC_OP_SCSI_CMD | ISC_BHS_I, ISC_FL_F, 0x30);
	isc_put32(bhs, 24, first);
	fake_dmv_rx(C, bhs, NULL, 0);
	fake_dmv_settle(&H.loop);
	rsp = fake_dmv_pop(C);
	cr_assert_not_null(rsp);
	cr_expect_eq(isc_get32(rsp->bhs, 28), first, "ExpCmdSN unchanged by an immediate command");
	isc_pdu_put(rsp);
}

Test(isc_session, full_window_admits_nothing_until_a_command_completes)
{
	struct isc_session *s = gw_list_first_entry(&H.gw->sessions, struct isc_session, node);
	uint32_t first = H.cmdsn;

	/* Pretend queue_depth (4) commands are in the backstore. */
	s->active = 4;
	cr_expect_eq(isc_session_max_cmdsn(s), first - 1);
	tur(0x40, first);
	fake_dmv_settle(&H.loop);
	cr_expect_eq(C->nsent, 0, "CmdSN beyond MaxCmdSN is ignored");
	s->active = 3;
	cr_expect_eq(isc_session_max_cmdsn(s), first, "a completion opens one slot");
	tur(0x41, first);
	fake_dmv_settle(&H.loop);
	cr_expect_eq(C->nsent, 1);
	s->active = 0;
}

/* A transport with fewer receive buffers than queue_depth (iSER posts a fixed number) gets a
 * window it can hold: commands beyond what it could receive would stall or be lost there.
 * Here queue_depth is 4 and the transport takes 2 requests at once. */
Test(isc_session_window, the_window_stays_within_what_the_transport_can_receive,
     .fini = teardown)
{
	static struct dmv_transport small_rx;
	struct isc_pdu *rsp;
	uint32_t first;
	uint16_t st;

	small_rx = fake_dmv_transport;
	small_rx.max_unexpected = 2;
	h_setup(&H, H_CONF_DEFAULT);
	C = h_connect(&H);
	C->base.tp = &small_rx;
	h_login(&H, C, H_INITIATOR, H_TARGET, 1, 0, 0, &st);
	cr_assert_eq(st, 0);
	first = H.cmdsn;
	cr_expect_eq(H.max_cmdsn, first + 1, "the login's MaxCmdSN: a window of 2");
	tur(1, first + 2);
	fake_dmv_settle(&H.loop);
	cr_expect_eq(C->nsent, 0, "a command beyond the transport's window is dropped");
	tur(2, first);
	fake_dmv_settle(&H.loop);
	rsp = fake_dmv_pop(C);
	cr_assert_not_null(rsp);
	cr_expect_eq(isc_get32(rsp->bhs, 32), first + 2, "MaxCmdSN = ExpCmdSN + 2 - 1");
	isc_pdu_put(rsp);
}

Test(isc_session_window, the_smallest_limit_wins)
{
	cr_expect_eq(isc_session_window(128, 0, 0), 128, "no limits: queue_depth");
	cr_expect_eq(isc_session_window(512, 144, 0), 144, "the transport's receive buffers");
	cr_expect_eq(isc_session_window(512, 144, 16), 16, "MaxOutstandingUnexpectedPDUs");
	cr_expect_eq(isc_session_window(8, 144, 16), 8, "queue_depth below both");
	cr_expect_eq(isc_session_window(0, 0, 0), 1, "never an empty window");
}
