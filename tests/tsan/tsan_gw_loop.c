// SPDX-License-Identifier: MIT
/*
 * tsan_gw_loop: messages between loops on their own threads, for `make test-tsan` (Criterion
 * cannot run under ThreadSanitizer: see tsan_bs_file.c). What tests/unit/lib/test_gw_loop.c
 * checks for order and stop, under TSan's eye for the memory handed over with a message:
 *   - two loops, each on its own thread, bounce WINDOW commands back and forth ROUNDS times;
 *     each side writes the command's payload and the other reads it (the post is the only
 *     synchronisation, which is what issue 13's SCSI command crossing loops relies on);
 *   - meanwhile SENDERS plain threads post numbered messages to both loops, whose order per
 *     sender is checked;
 *   - the main thread makes CALLS synchronous calls (gw_loop_call) into loop b, each reading
 *     what the previous one and the caller wrote to plain memory;
 *   - the loops stop with messages still arriving; gw_loop_fini runs the rest.
 * Exit 0 when every message ran once, in order, on its loop; TSan's reports fail the run.
 *
 *   tsan_gw_loop [DIR]      (DIR is ignored: tests/tsan/run.sh passes one to every program)
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gw_loop.h"

#define WINDOW 32
#define ROUNDS 3000
#define SENDERS 3
#define PER_SENDER 20000
#define CALLS 2000

static struct gw_loop a, b;
static unsigned long bad;	/* atomic: every thread may count one */

static void fail(void)
{
	__atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
}

struct bounce {
	struct gw_msg m;
	int hops;
	uint64_t payload[8];	/* written by the side that posts, read by the other */
};

static struct bounce cmds[WINDOW];
static int bounces_done;	/* on loop a */

static void bounce_fn(struct gw_msg *m)
{
	struct bounce *c = gw_container_of(m, struct bounce, m);
	struct gw_loop *here = gw_loop_current(), *there = here == &a ? &b : &a;

	if (here != &a && here != &b) {
		fail();
		return;
	}
	for (int i = 0; i < 8; i++)
		if (c->payload[i] != (uint64_t)c->hops * 8 + (uint64_t)i) {
			fprintf(stderr, "tsan_gw_loop: payload %d of hop %d wrong\n", i, c->hops);
			fail();
			break;
		}
	c->hops++;
	if (here == &a && c->hops >= 2 * ROUNDS) {
		bounces_done++;
		return;
	}
	for (int i = 0; i < 8; i++)
		c->payload[i] = (uint64_t)c->hops * 8 + (uint64_t)i;
	if (gw_loop_post(there, m)) {
		fprintf(stderr, "tsan_gw_loop: post failed\n");
		fail();
	}
}

/* Written by the caller and by the call on b, with no other synchronisation than the call. */
static struct {
	uint64_t by_caller, by_loop;
} shared_cfg;

static int call_fn(void *arg)
{
	(void)arg;
	if (gw_loop_current() != &b || shared_cfg.by_loop + 1 != shared_cfg.by_caller)
		return -1;
	shared_cfg.by_loop = shared_cfg.by_caller;
	return 0;
}

struct numbered {
	struct gw_msg m;
	int sender, seq;
};

static struct numbered *sent[2][SENDERS];
static int last[2][SENDERS], got[2];

static void numbered_fn(struct gw_msg *m)
{
	struct numbered *n = gw_container_of(m, struct numbered, m);
	int l = gw_loop_current() == &a ? 0 : 1;

	if (n->seq != last[l][n->sender] + 1)
		fail();
	last[l][n->sender] = n->seq;
	got[l]++;
}

static void *sender(void *arg)
{
	int id = (int)(intptr_t)arg;

	for (int i = 0; i < PER_SENDER; i++) {
		for (int l = 0; l < 2; l++) {
			struct numbered *n = &sent[l][id][i];

			n->m.fn = numbered_fn;
			n->sender = id;
			n->seq = i + 1;
			if (gw_loop_post(l ? &b : &a, &n->m))
				fail();
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[SENDERS];
	unsigned long errors;
	int i;

	(void)argc;
	(void)argv;
	if (gw_loop_init(&a) || gw_loop_init(&b))
		return 1;
	for (i = 0; i < SENDERS; i++) {
		sent[0][i] = calloc(PER_SENDER, sizeof(struct numbered));
		sent[1][i] = calloc(PER_SENDER, sizeof(struct numbered));
		if (!sent[0][i] || !sent[1][i])
			return 1;
	}
	if (gw_loop_thread_start(&a, -1, "tsan-a") || gw_loop_thread_start(&b, -1, "tsan-b"))
		return 1;
	/* The window starts from this thread: the post hands the payload over. */
	for (i = 0; i < WINDOW; i++) {
		cmds[i].m.fn = bounce_fn;
		cmds[i].hops = 0;
		for (int k = 0; k < 8; k++)
			cmds[i].payload[k] = (uint64_t)k;
		if (gw_loop_post(&b, &cmds[i].m))
			return 1;
	}
	for (i = 0; i < SENDERS; i++)
		if (pthread_create(&th[i], NULL, sender, (void *)(intptr_t)i))
			return 1;
	for (i = 0; i < CALLS; i++) {
		shared_cfg.by_caller++;
		if (gw_loop_call(&b, call_fn, NULL) || shared_cfg.by_loop != shared_cfg.by_caller) {
			fprintf(stderr, "tsan_gw_loop: synchronous call %d went wrong\n", i);
			fail();
			break;
		}
	}
	for (i = 0; i < SENDERS; i++)
		pthread_join(th[i], NULL);
	/* Wait for the bounces on a's own terms: a message reads its counter there. */
	for (;;) {
		int done;

		if (gw_loop_thread_stop(&a) < 0)
			return 1;
		done = bounces_done;
		if (done == WINDOW)
			break;
		/* Not yet: b may still hold some; let a run again. */
		if (gw_loop_thread_start(&a, -1, "tsan-a"))
			return 1;
		usleep(20 * 1000);
	}
	gw_loop_thread_stop(&b);
	gw_loop_fini(&a);
	gw_loop_fini(&b);
	for (i = 0; i < WINDOW; i++)
		if (cmds[i].hops != 2 * ROUNDS)
			fail();
	if (got[0] != SENDERS * PER_SENDER || got[1] != SENDERS * PER_SENDER) {
		fprintf(stderr, "tsan_gw_loop: %d and %d of %d numbered messages ran\n", got[0],
			got[1], SENDERS * PER_SENDER);
		fail();
	}
	for (i = 0; i < SENDERS; i++) {
		free(sent[0][i]);
		free(sent[1][i]);
	}
	errors = __atomic_load_n(&bad, __ATOMIC_RELAXED);
	printf("tsan_gw_loop: %d commands x %d round trips between two loops, %d senders x %d "
	       "messages to each, %d synchronous calls, %lu errors\n", WINDOW, ROUNDS, SENDERS,
	       PER_SENDER, CALLS, errors);
	return errors ? 1 : 0;
}
