// SPDX-License-Identifier: MIT
/*
 * gateway.loops (ctl_loops.c): one loop starts no thread and pins nothing; several run on
 * threads of their own, each pinned to its CPU of the affinity mask (the calling thread to the
 * first), answer calls from loop 0, and are stopped and unpinned cleanly; more loops than CPUs
 * is refused with the key named.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>

#include "ctl.h"

static bool has_error(const struct gw_errlist *e, const char *field, const char *msg_part)
{
	for (size_t i = 0; i < e->n; i++)
		if (!strcmp(e->v[i].field, field) && (!msg_part || strstr(e->v[i].msg, msg_part)))
			return true;
	return false;
}

static unsigned mask_cpus(cpu_set_t *m)
{
	cr_assert_eq(sched_getaffinity(0, sizeof(*m), m), 0);
	return (unsigned)CPU_COUNT(m);
}

struct where {
	struct gw_loop *loop;
	int cpu;
	cpu_set_t mask;
};

static int where_am_i(void *arg)
{
	struct where *w = arg;

	w->loop = gw_loop_current();
	w->cpu = sched_getcpu();
	pthread_getaffinity_np(pthread_self(), sizeof(w->mask), &w->mask);
	return 42;
}

Test(ctl_loops, one_loop_starts_no_thread_and_pins_nothing)
{
	struct gw_loop l0;
	struct ctl_loops *ls;
	struct gw_errlist errs;
	cpu_set_t before, after;

	mask_cpus(&before);
	cr_assert_eq(gw_loop_init(&l0), 0);
	gw_errlist_init(&errs);
	cr_assert_eq(ctl_loops_start(&l0, 1, &ls, &errs), 0, "%s", gw_errlist_join(&errs));
	cr_expect_eq(ls->set.n, 1);
	cr_expect_eq(ls->set.loop[0], &l0);
	cr_expect_eq(ls->cpu[0], -1);
	cr_expect_eq(gw_loops_pick(&ls->set), 0);
	mask_cpus(&after);
	cr_expect(CPU_EQUAL(&before, &after), "one loop pinned the main thread");
	ctl_loops_destroy(ls);
	gw_errlist_fini(&errs);
	gw_loop_fini(&l0);
}

Test(ctl_loops, two_loops_run_pinned_and_stop_cleanly)
{
	struct gw_loop l0;
	struct ctl_loops *ls;
	struct gw_errlist errs;
	struct where w = { 0 };
	cpu_set_t before, now;
	unsigned ncpus = mask_cpus(&before);

	cr_assert_eq(gw_loop_init(&l0), 0);
	gw_errlist_init(&errs);
	if (ncpus < 2) {
		/* One CPU: two loops are refused, the main thread is left as it was. */
		cr_expect_eq(ctl_loops_start(&l0, 2, &ls, &errs), -EINVAL);
		cr_expect_null(ls);
		mask_cpus(&now);
		cr_expect(CPU_EQUAL(&before, &now));
		goto out;
	}
	cr_assert_eq(ctl_loops_start(&l0, 2, &ls, &errs), 0, "%s", gw_errlist_join(&errs));
	cr_assert_eq(ls->set.n, 2);
	cr_expect_eq(ls->set.loop[0], &l0);
	cr_expect_neq(ls->set.loop[1], &l0);
	cr_expect(CPU_ISSET(ls->cpu[0], &before) && CPU_ISSET(ls->cpu[1], &before));
	cr_expect_lt(ls->cpu[0], ls->cpu[1], "loops take the mask's CPUs in order");
	/* Loop 0 is the calling thread, pinned to the first CPU alone. */
	mask_cpus(&now);
	cr_expect_eq(CPU_COUNT(&now), 1);
	cr_expect(CPU_ISSET(ls->cpu[0], &now));
	/* Loop 1 runs on its own thread, pinned to the second. */
	cr_expect_eq(gw_loop_call(ls->set.loop[1], where_am_i, &w), 42);
	cr_expect_eq(w.loop, ls->set.loop[1]);
	cr_expect_eq(w.cpu, ls->cpu[1]);
	cr_expect_eq(CPU_COUNT(&w.mask), 1);
	cr_expect(CPU_ISSET(ls->cpu[1], &w.mask));
	cr_expect(ls->set.loop[1]->has_thread);
	/* Stopping joins the thread: later calls run in the caller, on the stopped loop. */
	ctl_loops_stop(ls);
	cr_expect_not(ls->set.loop[1]->has_thread);
	memset(&w, 0, sizeof(w));
	cr_expect_eq(gw_loop_call(ls->set.loop[1], where_am_i, &w), 42);
	cr_expect_eq(w.cpu, ls->cpu[0], "a stopped loop's call ran on another thread");
	ctl_loops_destroy(ls);
	/* The main thread may run where it could before. */
	mask_cpus(&now);
	cr_expect(CPU_EQUAL(&before, &now));
out:
	gw_errlist_fini(&errs);
	gw_loop_fini(&l0);
}

/* 0, the default: one loop per CPU of the affinity mask (at most GW_LOOPS_MAX). */
Test(ctl_loops, zero_starts_one_loop_per_cpu_of_the_mask)
{
	struct gw_loop l0;
	struct ctl_loops *ls;
	struct gw_errlist errs;
	cpu_set_t before;
	unsigned ncpus = mask_cpus(&before);
	unsigned want = ncpus < GW_LOOPS_MAX ? ncpus : GW_LOOPS_MAX;

	cr_assert_eq(gw_loop_init(&l0), 0);
	gw_errlist_init(&errs);
	cr_assert_eq(ctl_loops_start(&l0, 0, &ls, &errs), 0, "%s", gw_errlist_join(&errs));
	cr_expect_eq(ls->set.n, want, "%u loops for %u CPUs", ls->set.n, ncpus);
	for (unsigned i = 1; i < ls->set.n; i++)
		cr_expect(ls->set.loop[i]->has_thread, "loop %u has no thread", i);
	ctl_loops_destroy(ls);
	gw_errlist_fini(&errs);
	gw_loop_fini(&l0);
}

Test(ctl_loops, more_loops_than_cpus_is_refused_by_name)
{
	struct gw_loop l0;
	struct ctl_loops *ls = (void *)1;
	struct gw_errlist errs;
	cpu_set_t before, now;
	unsigned ncpus = mask_cpus(&before);
	char count[32];

	cr_assert_eq(gw_loop_init(&l0), 0);
	if (ncpus < GW_LOOPS_MAX) {
		gw_errlist_init(&errs);
		cr_expect_eq(ctl_loops_start(&l0, ncpus + 1, &ls, &errs), -EINVAL);
		cr_expect_null(ls);
		snprintf(count, sizeof(count), "%u CPU", ncpus);
		cr_expect(has_error(&errs, "gateway.loops", count), "%s", gw_errlist_join(&errs));
		mask_cpus(&now);
		cr_expect(CPU_EQUAL(&before, &now), "a refused start pinned the main thread");
		gw_errlist_fini(&errs);
	}
	gw_errlist_init(&errs);
	cr_expect_eq(ctl_loops_start(&l0, GW_LOOPS_MAX + 1, &ls, &errs), -EINVAL);
	cr_expect(has_error(&errs, "gateway.loops", NULL), "%s", gw_errlist_join(&errs));
	gw_errlist_fini(&errs);
	gw_loop_fini(&l0);
}
