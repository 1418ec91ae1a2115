// SPDX-License-Identifier: MIT
/* The CmdSN window: ExpCmdSN/MaxCmdSN on responses, commands out of the window dropped,
 * commands ahead of ExpCmdSN held until the gap fills, then run in CmdSN order. */
#include "harness.h"

static struct h H;
static struct fake_conn *C;

static void setup(void)
{
	C = h_setup_session(&H, H_CONF_DEFAULT, false);	/* queue_depth 4 */
}

static void teardown(void)
{
	h_teardown(&H);
}

TestSuite(isc_session, .init = setup, .fini = teardown);

Test(isc_session, responses_carry_the_window)
{
	struct pdu *rsp;
	uint32_t first = H.cmdsn;

	h_tur(C, 1, first);
	fake_dmv_settle(&H.loop);
	rsp = fake_dmv_pop(C);
	cr_assert_not_null(rsp);
	cr_expect_eq(pdu_get32(rsp->bhs, 28), first + 1, "ExpCmdSN past the command");
	cr_expect_eq(pdu_get32(rsp->bhs, 32), first + 4, "MaxCmdSN = ExpCmdSN + queue_depth - 1");
	pdu_put(rsp);
}

Test(isc_session, command_beyond_max_cmdsn_is_dropped)
{
	uint32_t first = H.cmdsn;

	h_tur(C, 1, first + 10);
	fake_dmv_settle(&H.loop);
	cr_expect_eq(C->nsent, 0, "silently ignored (RFC 7143 4.2.2.1)");
	/* And one below ExpCmdSN (a duplicate) too. */
	h_tur(C, 2, first - 1);
	fake_dmv_settle(&H.loop);
	cr_expect_eq(C->nsent, 0);
	cr_expect_not(C->closed);
}

Test(isc_session, immediate_commands_do_not_use_the_window)
{
	uint8_t bhs[ISC_BHS_LEN];
	struct pdu *rsp;
	uint32_t first = H.cmdsn;

	fake_bhs(bhs, ISC_OP_SCSI_CMD | ISC_BHS_I, ISC_FL_F, 0x30);
	pdu_put32(bhs, 24, first);
	fake_dmv_rx(C, bhs, NULL, 0);
	fake_dmv_settle(&H.loop);
	rsp = fake_dmv_pop(C);
	cr_assert_not_null(rsp);
	cr_expect_eq(pdu_get32(rsp->bhs, 28), first, "ExpCmdSN unchanged by an immediate command");
	pdu_put(rsp);
}

Test(isc_session, full_window_admits_nothing_until_a_command_completes)
{
	struct isc_session *s = gw_list_first_entry(&H.gw->sessions, struct isc_session, node);
	uint32_t first = H.cmdsn;

	/* Pretend queue_depth (4) commands are in the backstore. */
	s->active = 4;
	cr_expect_eq(isc_session_max_cmdsn(s), first - 1);
	h_tur(C, 0x40, first);
	fake_dmv_settle(&H.loop);
	cr_expect_eq(C->nsent, 0, "CmdSN beyond MaxCmdSN is ignored");
	s->active = 3;
	cr_expect_eq(isc_session_max_cmdsn(s), first, "a completion opens one slot");
	h_tur(C, 0x41, first);
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
	struct pdu *rsp;
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
	h_tur(C, 1, first + 2);
	fake_dmv_settle(&H.loop);
	cr_expect_eq(C->nsent, 0, "a command beyond the transport's window is dropped");
	h_tur(C, 2, first);
	fake_dmv_settle(&H.loop);
	rsp = fake_dmv_pop(C);
	cr_assert_not_null(rsp);
	cr_expect_eq(pdu_get32(rsp->bhs, 32), first + 2, "MaxCmdSN = ExpCmdSN + 2 - 1");
	pdu_put(rsp);
}

Test(isc_session_window, the_smallest_limit_wins)
{
	cr_expect_eq(isc_session_window(128, 0, 0), 128, "no limits: queue_depth");
	cr_expect_eq(isc_session_window(512, 144, 0), 144, "the transport's receive buffers");
	cr_expect_eq(isc_session_window(512, 144, 16), 16, "MaxOutstandingUnexpectedPDUs");
	cr_expect_eq(isc_session_window(8, 144, 16), 8, "queue_depth below both");
	cr_expect_eq(isc_session_window(0, 0, 0), 1, "never an empty window");
}

/* ---- Sessions on two loops: the registry, reinstatement and walks across loops.
 * Both loops run on the test's thread (no loop thread: gw_loop_call runs directly), each
 * settled in turn, so every message between them is seen to arrive. */

static struct gw_loop L1;
static struct gw_loops LS;

static void loops_setup(void)
{
	h_setup_loops(&H, H_CONF_DEFAULT, &L1, &LS);
}

static void settle_both(void)
{
	for (int i = 0; i < 3; i++) {
		fake_dmv_settle(&H.loop);
		fake_dmv_settle(&L1);
	}
}

static void loops_teardown(void)
{
	isc_gw_stop(H.gw);
	settle_both();
	for (int i = 0; i < H.nconns; i++)
		fake_dmv_drain(H.conns[i]);
	ctl_gw_destroy(H.cg);
	gw_loop_fini(&L1);
	gw_loop_fini(&H.loop);
	for (int i = 0; i < H.nconns; i++)
		fake_dmv_conn_free(H.conns[i]);
}

TestSuite(isc_session_loops, .init = loops_setup, .fini = loops_teardown);

Test(isc_session_loops, each_session_lives_on_its_connection_s_loop)
{
	struct fake_conn *a, *b;
	uint16_t st, ta, tb;
	json_t *state, *s;
	size_t i;
	int seen[2] = { 0, 0 };

	ta = h_login_on(&H, &a, 0, 1, 0, 0, &st);
	cr_assert_eq(st, 0);
	tb = h_login_on(&H, &b, 1, 2, 0, 0, &st);
	cr_assert_eq(st, 0);
	cr_assert_neq(ta, tb, "one TSIH space for both loops");
	cr_expect_eq(h_session_of(&H, ta)->lp->idx, 0);
	cr_expect_eq(h_session_of(&H, tb)->lp->idx, 1);
	cr_expect_eq(gw_list_first_entry(&H.gw->lps[1].sessions, struct isc_session, lnode),
		     h_session_of(&H, tb), "loop 1's own list has its session");
	cr_expect_eq(isc_target_nsessions(h_session_of(&H, ta)->target), 2, "the target counts both");
	/* The state reports each session and connection with its loop. */
	state = isc_gw_sessions_state(H.gw);
	cr_assert_eq(json_array_size(state), 2);
	json_array_foreach(state, i, s) {
		json_t *c0 = json_array_get(json_object_get(s, "connections"), 0);
		int li = (int)json_integer_value(json_object_get(s, "loop"));

		cr_assert(li == 0 || li == 1);
		seen[li]++;
		cr_expect_eq(json_integer_value(json_object_get(c0, "loop")), li);
	}
	json_decref(state);
	cr_expect(seen[0] == 1 && seen[1] == 1, "one session on each loop");
}

Test(isc_session_loops, a_second_connection_on_another_loop_is_refused_service_unavailable)
{
	struct fake_conn *a, *b;
	uint16_t st, ta;

	ta = h_login_on(&H, &a, 0, 1, 0, 0, &st);
	cr_assert_eq(st, 0);
	/* The same session (its TSIH) from a connection that landed on loop 1 (iSER cannot
	 * move): 0x0301, which initiators retry; the session itself is untouched. */
	h_login_on(&H, &b, 1, 1, ta, 1, &st);
	cr_expect_eq(st, 0x0301);
	settle_both();
	cr_expect(b->closed);
	cr_expect_not(a->closed);
	cr_expect_not_null(h_session_of(&H, ta));
}

Test(isc_session_loops, reinstatement_closes_the_old_session_on_its_own_loop)
{
	struct fake_conn *a, *b;
	uint16_t st, ta, tb;

	ta = h_login_on(&H, &a, 0, 1, 0, 0, &st);
	cr_assert_eq(st, 0);
	/* Same initiator and ISID, TSIH 0, on loop 1: the session on loop 0 is closed by a
	 * message to loop 0, whose answer lets the login go on: the new one lives on loop 1. */
	tb = h_login_on(&H, &b, 1, 1, 0, 0, &st);
	cr_assert_eq(st, 0);
	cr_assert_neq(ta, tb);
	settle_both();
	cr_expect(a->closed, "the old session's connection was closed on loop 0");
	cr_expect_null(h_session_of(&H, ta));
	cr_expect_eq(h_session_of(&H, tb)->lp->idx, 1);
	cr_expect_not(b->closed);
}

Test(isc_session_loops, target_cold_reset_answers_once_the_other_loop_answered)
{
	struct fake_conn *a, *b;
	uint8_t bhs[ISC_BHS_LEN];
	struct pdu *rsp;
	uint16_t st;

	h_login_on(&H, &a, 0, 1, 0, 0, &st);
	cr_assert_eq(st, 0);
	h_login_on(&H, &b, 1, 2, 0, 0, &st);
	cr_assert_eq(st, 0);
	fake_bhs(bhs, ISC_OP_TMF_REQ | ISC_BHS_I, (uint8_t)(ISC_FL_F | 7), 0x77);
	pdu_put32(bhs, 20, ISC_RSVD_TAG);
	pdu_put32(bhs, 24, H.cmdsn);
	fake_dmv_rx(a, bhs, NULL, 0);
	fake_dmv_settle(&H.loop);
	cr_expect_eq(a->nsent, 0, "no response before loop 1 has aborted its sessions' tasks");
	fake_dmv_settle(&L1);
	fake_dmv_settle(&H.loop);
	rsp = fake_dmv_pop(a);
	cr_assert_not_null(rsp, "answered after loop 1's answer");
	cr_expect_eq(pdu_bhs_opcode(rsp->bhs), ISC_OP_TMF_RSP);
	cr_expect_eq(rsp->bhs[2], 0, "function complete");
	pdu_put(rsp);
	settle_both();
	cr_expect(a->closed, "a cold reset ends the asker's session");
	cr_expect(b->closed, "and the session on the other loop");
}

