// SPDX-License-Identifier: MIT
/* The engine's loops (isc_loop.c): work for a loop runs at once on that loop's own thread, and
 * as a message carrying a copy of its argument otherwise, counted until it ran. */
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

TestSuite(isc_loop, .init = setup, .fini = teardown);

struct ran {
	int value;
	unsigned idx;
	int calls;
};

static struct ran Ran;

static void note(struct isc_loop *lp, const void *arg)
{
	const int *v = arg;

	Ran.value = *v;
	Ran.idx = lp->idx;
	Ran.calls++;
}

static int Sent = 7;
static int Calls_on_return;

/* Run by loop 0: its own loop's work before the call returns, loop 1's sent along. */
static void from_loop0(struct gw_defer *d)
{
	(void)d;
	cr_assert_eq(isc_gw_on_loop(H.gw, &H.gw->lps[0], note, &Sent, sizeof(Sent)), 0);
	Calls_on_return = Ran.calls;
	cr_assert_eq(isc_gw_on_loop(H.gw, &H.gw->lps[1], note, &Sent, sizeof(Sent)), 0);
	Sent = 8;
}

Test(isc_loop, work_for_another_loop_is_a_message_with_a_copy)
{
	struct gw_defer d;

	memset(&Ran, 0, sizeof(Ran));
	cr_assert_eq(isc_gw_nloops(H.gw), 2);
	gw_defer_init(&d, from_loop0);
	gw_defer_queue(&H.loop, &d);
	fake_dmv_settle(&H.loop);
	cr_expect_eq(Calls_on_return, 1, "loop 0's own work ran at once");
	cr_expect_eq(Ran.idx, 0);
	cr_expect_eq(Ran.calls, 1, "loop 1's not on loop 0's thread");
	cr_expect_eq(H.gw->msgs, 1, "counted while in flight");
	cr_expect_not(isc_gw_idle(H.gw), "a message in flight: not idle");
	fake_dmv_settle(&L1);
	cr_expect_eq(Ran.calls, 2);
	cr_expect_eq(Ran.idx, 1);
	cr_expect_eq(Ran.value, 7, "the copy taken when it was sent");
	cr_expect_eq(H.gw->msgs, 0);
	cr_expect(isc_gw_idle(H.gw));
}

Test(isc_loop, a_connection_s_loop_part_is_found_by_its_loop)
{
	struct gw_loop other;

	cr_expect_eq(isc_gw_loop_of(H.gw, &H.loop), &H.gw->lps[0]);
	cr_expect_eq(isc_gw_loop_of(H.gw, &L1), &H.gw->lps[1]);
	/* A loop not among the gateway's (as with one loop) gets loop 0's part. */
	cr_expect_eq(isc_gw_loop_of(H.gw, &other), &H.gw->lps[0]);
}
