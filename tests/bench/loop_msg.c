// SPDX-License-Identifier: MIT
/*
 * loop_msg: what a message between two event loops costs (issue 13; docs/PERFORMANCE.md,
 * "Messages between loops"). Two loops, each on its own thread pinned to its own CPU, bounce
 * WINDOW messages back and forth for SECS seconds, as commands crossing from a session's loop to
 * an LU's owner and back would (WINDOW is the queue depth crossing). Reports messages per
 * second (each hop counts one), the process's CPU per message (user + system, both threads,
 * getrusage), eventfd wake-ups per message, and at window 1 the round trip. "same" runs the
 * window on one loop posting to itself, the case the design replaces with a direct call.
 *
 *   make && cc -std=gnu11 -O2 -D_GNU_SOURCE -Iinclude -o build/loop_msg tests/bench/loop_msg.c \
 *       build/libgw.a -lpthread
 *   build/loop_msg [SECS [CPU_A CPU_B]]      (default 3 s; the first two CPUs of the process)
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "gw_loop.h"

struct hop {
	struct gw_msg m;
};

static struct gw_loop a, b;
static bool same;		/* every hop on loop a */
static int stopping;		/* atomic: no more hops */
static int home;		/* atomic: messages back on a after stopping */
static uint64_t hops[2];	/* per loop, its own thread */

static void hop_fn(struct gw_msg *m)
{
	struct gw_loop *here = gw_loop_current();
	struct gw_loop *there = same ? here : (here == &a ? &b : &a);

	hops[here == &a ? 0 : 1]++;
	if (here == &a && __atomic_load_n(&stopping, __ATOMIC_RELAXED)) {
		__atomic_fetch_add(&home, 1, __ATOMIC_RELEASE);
		return;
	}
	if (gw_loop_post(there, m))
		abort();
}

static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static int run(int window, bool one_loop, double secs, int cpu_a, int cpu_b)
{
	struct hop *h = calloc((size_t)window, sizeof(*h));
	uint64_t t0, t1, n, wakes;
	double c0, c1, el;

	if (!h || gw_loop_init(&a) || gw_loop_init(&b))
		return 1;
	same = one_loop;
	stopping = 0;
	home = 0;
	hops[0] = hops[1] = 0;
	if (gw_loop_thread_start(&a, cpu_a, "bench-a") ||
	    gw_loop_thread_start(&b, cpu_b, "bench-b"))
		return 1;
	t0 = gw_now_ns();
	c0 = cpu_s();
	for (int i = 0; i < window; i++) {
		h[i].m.fn = hop_fn;
		if (gw_loop_post(&a, &h[i].m))
			return 1;
	}
	usleep((useconds_t)(secs * 1e6));
	__atomic_store_n(&stopping, 1, __ATOMIC_RELAXED);
	while (__atomic_load_n(&home, __ATOMIC_ACQUIRE) < window)
		usleep(1000);
	t1 = gw_now_ns();
	c1 = cpu_s();
	gw_loop_thread_stop(&a);
	gw_loop_thread_stop(&b);
	n = hops[0] + hops[1];
	wakes = a.msg_wakeups + b.msg_wakeups;
	el = (double)(t1 - t0) / 1e9;
	printf("loop_msg: %-5s window %3d: %9.0f msgs/s, %6.3f us CPU/msg, %5.3f wake-ups/msg",
	       one_loop ? "same" : "cross", window, (double)n / el, (c1 - c0) * 1e6 / (double)n,
	       (double)wakes / (double)n);
	if (window == 1 && !one_loop)
		printf(", round trip %.2f us", el * 1e6 / ((double)n / 2));
	printf("\n");
	gw_loop_fini(&a);
	gw_loop_fini(&b);
	free(h);
	return 0;
}

int main(int argc, char **argv)
{
	static const int windows[] = { 1, 8, 32, 128 };
	double secs = argc > 1 ? atof(argv[1]) : 3;
	int cpu_a = -1, cpu_b = -1;
	cpu_set_t set;

	if (argc > 3) {
		cpu_a = atoi(argv[2]);
		cpu_b = atoi(argv[3]);
	} else if (sched_getaffinity(0, sizeof(set), &set) == 0) {
		for (int c = 0; c < CPU_SETSIZE; c++) {
			if (!CPU_ISSET(c, &set))
				continue;
			if (cpu_a < 0)
				cpu_a = c;
			else if (cpu_b < 0)
				cpu_b = c;
		}
		if (cpu_b < 0)
			cpu_b = cpu_a;
	}
	printf("loop_msg: loops pinned to CPUs %d and %d, %.1f s per row\n", cpu_a, cpu_b, secs);
	for (size_t i = 0; i < sizeof(windows) / sizeof(windows[0]); i++)
		if (run(windows[i], false, secs, cpu_a, cpu_b))
			return 1;
	if (run(32, true, secs, cpu_a, cpu_b))
		return 1;
	return 0;
}
