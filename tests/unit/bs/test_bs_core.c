// SPDX-License-Identifier: MIT
/*
 * What every backstore kind calls (bs_core.c), on a bare struct bs: an I/O finished "later"
 * completes on the loop after its submit has returned, never inside it, in the order the kind
 * finished them, each dropping the in-flight count once; a done callback that finishes another
 * I/O does not run it from inside itself; events reach the listener the SCSI core registered,
 * and nobody once it has gone; and the ops' names in logs.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "bs.h"
#include "bs_priv.h"
#include "gw_loop.h"

static struct gw_loop loop;
static struct bs bs;
static struct bs_io ios[3];
static int order[3], nr_done;

static void on_done(struct bs_io *io)
{
	order[nr_done++] = (int)(io - ios);
}

static void setup(void)
{
	cr_assert_eq(gw_loop_init(&loop), 0);
	memset(&bs, 0, sizeof(bs));
	memset(ios, 0, sizeof(ios));
	bs.loop = &loop;
	bs_core_init(&bs);
	for (int i = 0; i < 3; i++) {
		ios[i].bs = &bs;
		ios[i].done = on_done;
	}
	nr_done = 0;
}

static void teardown(void)
{
	bs_core_fini(&bs);
	gw_loop_fini(&loop);
}

TestSuite(bs_core, .init = setup, .fini = teardown);

static void run(void)
{
	for (int i = 0; i < 4; i++)
		gw_loop_run_once(&loop, 0);
}

Test(bs_core, later_completes_on_the_loop_in_order_each_once)
{
	bs.inflight = 3;
	bs_complete_later(&ios[1]);
	bs_complete_later(&ios[0]);
	bs_complete_later(&ios[2]);
	cr_expect_eq(nr_done, 0, "nothing completes inside the kind's submit");
	run();
	cr_assert_eq(nr_done, 3);
	cr_expect_eq(order[0], 1);
	cr_expect_eq(order[1], 0);
	cr_expect_eq(order[2], 2);
	cr_expect_eq(bs.inflight, 0);
	run();
	cr_expect_eq(nr_done, 3, "each once");
}

Test(bs_core, complete_is_at_once_and_drops_inflight)
{
	bs.inflight = 1;
	bs_complete(&ios[0]);
	cr_expect_eq(nr_done, 1);
	cr_expect_eq(bs.inflight, 0);
}

/* A host's done that submits again: the new I/O's completion does not run inside it. */
static bool inside;

static void resubmit_done(struct bs_io *io)
{
	on_done(io);
	inside = true;
	bs_complete_later(&ios[1]);
	inside = false;
}

static void outside_done(struct bs_io *io)
{
	cr_expect_not(inside, "completed from inside another I/O's done");
	on_done(io);
}

Test(bs_core, a_done_that_finishes_another_io_does_not_run_it_inside_itself)
{
	bs.inflight = 2;
	ios[0].done = resubmit_done;
	ios[1].done = outside_done;
	bs_complete_later(&ios[0]);
	run();
	cr_assert_eq(nr_done, 2);
	cr_expect_eq(order[0], 0);
	cr_expect_eq(order[1], 1);
	cr_expect_eq(bs.inflight, 0);
}

Test(bs_core, a_backstore_destroyed_with_completions_queued_runs_none)
{
	bs.inflight = 1;
	bs_complete_later(&ios[0]);
	bs_core_fini(&bs);
	run();
	cr_expect_eq(nr_done, 0);
}

static int events;
static enum bs_event last_ev;
static void *last_arg;

static void on_event(struct bs *b, enum bs_event ev, void *arg)
{
	cr_expect_eq(b, &bs);
	events++;
	last_ev = ev;
	last_arg = arg;
}

Test(bs_core, events_reach_the_listener_and_nobody_after_it_left)
{
	int tag;

	bs_event(&bs, BS_EV_CAPACITY);		/* nobody listens yet: nothing happens */
	bs_set_event_cb(&bs, on_event, &tag);
	bs_event(&bs, BS_EV_CAPACITY);
	cr_expect_eq(events, 1);
	cr_expect_eq(last_ev, BS_EV_CAPACITY);
	cr_expect_eq(last_arg, &tag);
	bs_set_event_cb(&bs, NULL, NULL);
	bs_event(&bs, BS_EV_CAPACITY);
	cr_expect_eq(events, 1);
}

Test(bs_core, operation_names)
{
	cr_expect_str_eq(bs_op_name(BS_READ), "read");
	cr_expect_str_eq(bs_op_name(BS_WRITE), "write");
	cr_expect_str_eq(bs_op_name(BS_FLUSH), "flush");
	cr_expect_str_eq(bs_op_name(BS_UNMAP), "unmap");
	cr_expect_str_eq(bs_op_name(BS_WRITE_ZEROES), "write-zeroes");
}
