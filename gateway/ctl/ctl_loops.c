// SPDX-License-Identifier: MIT
/*
 * The gateway's event loops (gateway.loops, docs/ARCHITECTURE.md "Several event loops"): loop 0
 * is the caller's (the main thread's), loops 1..n-1 run on threads of their own. With more than
 * one loop every loop is pinned to one CPU of the process's affinity mask, in the mask's order,
 * loop 0 (the calling thread) to the first. With one loop nothing is started or pinned: loop 0
 * stays today's loop, wherever the scheduler puts it.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "gw_log.h"

/* The CPUs of mask in order, at most max of them (cpus NULL: none); returns how many there are
 * in all. */
static unsigned ctl_loops_cpus(const cpu_set_t *mask, int *cpus, unsigned max)
{
	unsigned n = 0;
	int c;

	for (c = 0; c < CPU_SETSIZE; c++) {
		if (!CPU_ISSET(c, mask))
			continue;
		if (cpus && n < max)
			cpus[n] = c;
		n++;
	}
	return n;
}

int ctl_loops_start(struct gw_loop *loop0, unsigned n, struct ctl_loops **out,
		    struct gw_errlist *errs)
{
	struct ctl_loops *ls;
	cpu_set_t mask, one;
	char name[16];
	unsigned i, ncpus;
	int r;

	*out = NULL;
	if (n > GW_LOOPS_MAX) {
		gw_errlist_add(errs, "gateway.loops", "must be 0 (one per CPU) or 1..%d",
			       GW_LOOPS_MAX);
		return -EINVAL;
	}
	if (n == 0) {
		/* One per CPU this process may run on, at most GW_LOOPS_MAX; one if the mask
		 * cannot be read. */
		n = 1;
		if (!sched_getaffinity(0, sizeof(mask), &mask))
			n = ctl_loops_cpus(&mask, NULL, 0);
		if (n < 1)
			n = 1;
		if (n > GW_LOOPS_MAX)
			n = GW_LOOPS_MAX;
	}
	ls = calloc(1, sizeof(*ls));
	if (!ls)
		return -ENOMEM;
	ls->set.n = n;
	ls->set.loop[0] = loop0;
	ls->cpu[0] = -1;
	if (n == 1) {
		*out = ls;
		return 0;
	}
	if (sched_getaffinity(0, sizeof(mask), &mask) < 0) {
		r = -errno;
		gw_errlist_add(errs, "gateway.loops", "cannot read the CPU affinity mask: %s",
			       strerror(-r));
		free(ls);
		return r;
	}
	ncpus = ctl_loops_cpus(&mask, ls->cpu, n);
	if (n > ncpus) {
		gw_errlist_add(errs, "gateway.loops",
			       "%u loops, but this process may run on %u CPU%s only (its affinity "
			       "mask): at most one loop per CPU", n, ncpus, ncpus == 1 ? "" : "s");
		free(ls);
		return -EINVAL;
	}
	ls->saved_mask = mask;
	for (i = 1; i < n; i++) {
		ls->set.loop[i] = &ls->extra[i - 1];
		r = gw_loop_init(ls->set.loop[i]);
		if (r) {
			ls->set.loop[i] = NULL;
			goto fail;
		}
		snprintf(name, sizeof(name), "isergw-loop%u", i);
		r = gw_loop_thread_start(ls->set.loop[i], ls->cpu[i], name);
		if (r) {
			gw_loop_fini(ls->set.loop[i]);
			ls->set.loop[i] = NULL;
			goto fail;
		}
		ls->nstarted = i;
	}
	/* Loop 0 last: a failure above leaves the main thread as it was. Threads the main thread
	 * starts from now on inherit its CPU. */
	i = 0;
	CPU_ZERO(&one);
	CPU_SET(ls->cpu[0], &one);
	r = -pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
	if (r)
		goto fail;
	ls->pinned0 = true;
	for (i = 0; i < n; i++)
		gw_info("ctl", "loop %u on CPU %d", i, ls->cpu[i]);
	*out = ls;
	return 0;
fail:
	gw_errlist_add(errs, "gateway.loops", "cannot start loop %u on CPU %d: %s", i, ls->cpu[i],
		       strerror(-r));
	ls->set.n = ls->nstarted + 1;
	ctl_loops_destroy(ls);
	return r;
}

void ctl_loops_stop(struct ctl_loops *ls)
{
	unsigned i;

	if (!ls)
		return;
	for (i = ls->nstarted; i >= 1; i--) {
		if (ls->set.loop[i]->has_thread)
			gw_loop_thread_stop(ls->set.loop[i]);
	}
}

void ctl_loops_drain(struct ctl_loops *ls)
{
	bool ran;
	int rounds = 0;

	if (!ls)
		return;
	/* Each loop's leftovers may post to another (a nexus forgotten by every LU owner): round
	 * until no loop has anything left. */
	do {
		ran = false;
		for (unsigned i = 0; i < ls->set.n; i++)
			ran |= gw_loop_drain(ls->set.loop[i]);
	} while (ran && ++rounds < 100);
}

void ctl_loops_destroy(struct ctl_loops *ls)
{
	unsigned i;

	if (!ls)
		return;
	ctl_loops_stop(ls);
	for (i = ls->nstarted; i >= 1; i--)
		gw_loop_fini(ls->set.loop[i]);
	/* The main thread runs on whatever the process could run on before. */
	if (ls->pinned0)
		pthread_setaffinity_np(pthread_self(), sizeof(ls->saved_mask), &ls->saved_mask);
	free(ls);
}

static int ctl_loops_poll_fn(void *arg)
{
	gw_loop_set_poll(gw_loop_current(), *(unsigned *)arg);
	return 0;
}

void ctl_loops_set_poll(struct ctl_loops *ls, unsigned poll_us)
{
	unsigned i;

	if (!ls)
		return;
	for (i = 0; i < ls->set.n; i++) {
		struct gw_loop *l = ls->set.loop[i];

		if (l->has_thread)
			gw_loop_call(l, ctl_loops_poll_fn, &poll_us);
		else
			gw_loop_set_poll(l, poll_us);
	}
}

json_t *ctl_loops_state(const struct ctl_loops *ls)
{
	json_t *a = json_array();
	unsigned i;

	if (!a || !ls)
		return a;
	for (i = 0; i < ls->set.n; i++) {
		const struct gw_loop *l = ls->set.loop[i];
		json_t *o = json_pack("{s:i, s:i, s:i, s:i, s:I, s:I, s:I}", "loop", (int)i,
				      "cpu", ls->cpu[i], "connections",
				      (int)__atomic_load_n(&ls->set.load[i], __ATOMIC_RELAXED),
				      "poll_us",
				      (int)(__atomic_load_n(&l->poll_max_ns, __ATOMIC_RELAXED) /
					    1000u),
				      "sleeps",
				      (json_int_t)__atomic_load_n(&l->sleeps, __ATOMIC_RELAXED),
				      "polls",
				      (json_int_t)__atomic_load_n(&l->polls, __ATOMIC_RELAXED),
				      "poll_hits",
				      (json_int_t)__atomic_load_n(&l->poll_hits, __ATOMIC_RELAXED));

		if (!o || json_array_append_new(a, o)) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}
