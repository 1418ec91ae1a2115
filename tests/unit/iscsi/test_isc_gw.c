// SPDX-License-Identifier: MIT
/* The engine object (isc_gw.c): dropping a session and stopping the gateway reach the sessions
 * of every loop, each on its own loop's thread. */
#include "harness.h"

static struct h H;
static struct gw_loop L1;
static struct gw_loops LS;

static void setup(void)
{
	h_setup_loops(&H, H_CONF_DEFAULT, &L1, &LS);
}

static void teardown(void)
{
	h_teardown_loops(&H);
}

TestSuite(isc_gw_loops, .init = setup, .fini = teardown);

Test(isc_gw_loops, drop_and_stop_reach_sessions_on_loop_1)
{
	struct fake_conn *a, *b;
	uint16_t st, tb;

	h_login_on(&H, &a, 0, 1, 0, 0, &st);
	cr_assert_eq(st, 0);
	tb = h_login_on(&H, &b, 1, 2, 0, 0, &st);
	cr_assert_eq(st, 0);
	cr_expect_eq(isc_gw_drop_session(H.gw, tb), 0);
	cr_expect_eq(isc_gw_drop_session(H.gw, tb), -ENOENT, "already closing");
	h_settle(&H);
	cr_expect(b->closed);
	cr_expect_not(a->closed);
	isc_gw_stop(H.gw);
	h_settle(&H);
	cr_expect(a->closed);
	cr_expect(isc_gw_idle(H.gw), "no session, connection or message left");
}

/* The same walks with loop 1 on a thread of its own: the state gather, drop and stop run on
 * loop 1's thread (gw_loop_call from this thread, loop 0's), and the sessions there end on it. */
Test(isc_gw_loops, walks_run_on_a_loop_thread)
{
	struct fake_conn *a, *b;
	uint16_t st, tb;
	json_t *state;
	bool idle = false;

	h_login_on(&H, &a, 0, 1, 0, 0, &st);
	cr_assert_eq(st, 0);
	tb = h_login_on(&H, &b, 1, 2, 0, 0, &st);
	cr_assert_eq(st, 0);
	H.loop1 = NULL;
	cr_assert_eq(gw_loop_thread_start(&L1, -1, "t-loop1"), 0);
	state = isc_gw_sessions_state(H.gw);
	cr_expect_eq(json_array_size(state), 2, "both loops' sessions gathered");
	json_decref(state);
	cr_expect_eq(isc_gw_drop_session(H.gw, tb), 0);
	cr_expect(b->closed, "closed on loop 1 before the call returned");
	cr_expect_not(a->closed);
	isc_gw_stop(H.gw);
	cr_expect(a->closed);
	for (int i = 0; i < 500 && !idle; i++) {
		fake_dmv_settle(&H.loop);
		idle = isc_gw_idle(H.gw);
	}
	cr_expect(idle, "loop 1 freed its session on its own thread");
	gw_loop_thread_stop(&L1);
	H.loop1 = &L1;
}
