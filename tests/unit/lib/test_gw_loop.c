// SPDX-License-Identifier: MIT
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "gw_loop.h"

static struct gw_loop loop;

static void setup(void)
{
	cr_assert_eq(gw_loop_init(&loop), 0);
}

static void teardown(void)
{
	gw_loop_fini(&loop);
}

TestSuite(loop, .init = setup, .fini = teardown);

struct piper {
	struct gw_watch w;
	int fds[2];
	int calls;
	char got[16];
};

static void piper_read(struct gw_watch *w, uint32_t events)
{
	struct piper *p = gw_container_of(w, struct piper, w);
	ssize_t n;

	cr_expect(events & EPOLLIN);
	n = read(w->fd, p->got, sizeof(p->got) - 1);
	if (n > 0)
		p->got[n] = '\0';
	p->calls++;
}

Test(loop, watch_fires_on_pipe)
{
	struct piper p = { 0 };

	cr_assert_eq(pipe(p.fds), 0);
	gw_watch_init(&p.w, &loop, p.fds[0], piper_read);
	cr_assert_eq(gw_watch_set(&p.w, EPOLLIN), 0);
	cr_expect_eq(p.w.events, EPOLLIN);
	cr_expect_eq(gw_loop_run_once(&loop, 0), 0, "event with nothing written");
	cr_assert_eq(write(p.fds[1], "ping", 4), 4);
	cr_expect_eq(gw_loop_run_once(&loop, 1000), 1);
	cr_expect_eq(p.calls, 1);
	cr_expect_str_eq(p.got, "ping");

	/* Stopped: writes no longer reach the callback. */
	gw_watch_stop(&p.w);
	cr_expect_eq(p.w.events, 0);
	cr_assert_eq(write(p.fds[1], "x", 1), 1);
	cr_expect_eq(gw_loop_run_once(&loop, 0), 0);
	cr_expect_eq(p.calls, 1);
	/* And set again (ADD after DEL), then changed (MOD). */
	cr_expect_eq(gw_watch_set(&p.w, EPOLLIN), 0);
	cr_expect_eq(gw_watch_set(&p.w, EPOLLIN | EPOLLRDHUP), 0);
	cr_expect_eq(gw_loop_run_once(&loop, 1000), 1);
	cr_expect_eq(p.calls, 2);
	cr_expect_eq(gw_watch_set(&p.w, 0), 0);
	cr_expect_eq(p.w.events, 0);
	close(p.fds[0]);
	close(p.fds[1]);
}

Test(loop, watch_set_bad_fd_fails)
{
	struct gw_watch w;

	gw_watch_init(&w, &loop, 9999, NULL);
	cr_expect_lt(gw_watch_set(&w, EPOLLIN), 0);
	cr_expect_eq(w.events, 0);
}

struct ticker {
	struct gw_timer t;
	int fired;
	uint64_t when[8];
};

static void ticker_fn(struct gw_timer *t)
{
	struct ticker *k = gw_container_of(t, struct ticker, t);

	if (k->fired < 8)
		k->when[k->fired] = gw_now_ms();
	k->fired++;
	if (k->fired == 3)
		gw_loop_stop(t->w.loop, 42);
}

Test(loop, timer_one_shot)
{
	struct ticker k = { 0 };
	uint64_t start = gw_now_ms();

	cr_assert_eq(gw_timer_init(&k.t, &loop, ticker_fn), 0);
	cr_assert_eq(gw_timer_arm(&k.t, 30, 0), 0);
	while (gw_now_ms() - start < 150)
		gw_loop_run_once(&loop, 20);
	cr_expect_eq(k.fired, 1, "one-shot fired %d times", k.fired);
	cr_expect_geq(k.when[0] - start, 29);
	gw_timer_fini(&k.t);
}

Test(loop, timer_periodic_and_stop)
{
	struct ticker k = { 0 };
	uint64_t start = gw_now_ms();

	cr_assert_eq(gw_timer_init(&k.t, &loop, ticker_fn), 0);
	cr_assert_eq(gw_timer_arm(&k.t, 10, 20), 0);
	cr_expect_eq(gw_loop_run(&loop), 42, "gw_loop_run did not return the stop code");
	cr_expect_eq(k.fired, 3);
	cr_expect_geq(gw_now_ms() - start, 49);
	gw_timer_fini(&k.t);
}

Test(loop, timer_disarm)
{
	struct ticker k = { 0 };

	cr_assert_eq(gw_timer_init(&k.t, &loop, ticker_fn), 0);
	cr_assert_eq(gw_timer_arm(&k.t, 10, 10), 0);
	gw_timer_disarm(&k.t);
	usleep(40 * 1000);
	gw_loop_run_once(&loop, 0);
	cr_expect_eq(k.fired, 0);
	gw_timer_fini(&k.t);
}

struct job {
	struct gw_defer d;
	int runs;
	int requeue;
	uint64_t ran_at;
};

static void job_fn(struct gw_defer *d)
{
	struct job *j = gw_container_of(d, struct job, d);

	j->runs++;
	j->ran_at = gw_now_ms();
	if (j->requeue-- > 0)
		gw_defer_queue(&loop, d);
}

Test(loop, deferred_runs_before_sleeping)
{
	struct job j = { 0 };
	uint64_t start = gw_now_ms();

	gw_defer_init(&j.d, job_fn);
	gw_defer_queue(&loop, &j.d);
	gw_defer_queue(&loop, &j.d);	/* twice: still once */
	/* The loop would sleep 10 s: work run before sleeping comes far sooner, also on a loaded
	 * machine (the bound is half the sleep, not a measured figure). */
	cr_expect_eq(gw_loop_run_once(&loop, 10000), 0);
	cr_expect_eq(j.runs, 1);
	cr_expect_lt(j.ran_at - start, 5000, "deferred work ran only after the loop slept");
}

Test(loop, deferred_requeued_during_run_does_not_block)
{
	struct job j = { .requeue = 3 };
	uint64_t start = gw_now_ms();

	gw_defer_init(&j.d, job_fn);
	gw_defer_queue(&loop, &j.d);
	/* Each pass would sleep 10 s if requeued work waited for epoll: the bound is half of one. */
	for (int i = 0; i < 3; i++)
		gw_loop_run_once(&loop, 10000);
	cr_expect_eq(j.runs, 3);
	cr_expect_lt(gw_now_ms() - start, 5000, "requeued work waited for epoll timeout");
	cr_expect(j.d.queued);
	gw_defer_cancel(&j.d);	/* j is on this stack; fini runs after we return */
}

Test(loop, deferred_cancel)
{
	struct job j = { 0 };

	gw_defer_init(&j.d, job_fn);
	gw_defer_queue(&loop, &j.d);
	gw_defer_cancel(&j.d);
	cr_expect_not(j.d.queued);
	gw_loop_run_once(&loop, 0);
	cr_expect_eq(j.runs, 0);
}

/* Two connections, both readable in the same batch; whichever runs first closes the other. */
struct conn {
	struct gw_watch w;
	struct gw_close c;
	struct conn *peer;
	int fds[2];
	int calls;
	bool closed;
	bool freed;
	int *free_order;
};

static int freed_count;
static int dispatched_total;

static void conn_free(struct gw_close *c)
{
	struct conn *k = gw_container_of(c, struct conn, c);

	close(k->fds[0]);
	close(k->fds[1]);
	freed_count++;
	free(k);
}

static void conn_close(struct conn *k)
{
	if (k->closed)
		return;
	k->closed = true;
	gw_watch_stop(&k->w);
	gw_loop_close(&loop, &k->c, conn_free);
}

static void conn_ready(struct gw_watch *w, uint32_t events)
{
	struct conn *k = gw_container_of(w, struct conn, w);

	(void)events;
	k->calls++;
	dispatched_total++;
	/* Touching the peer here would be a use after free if it were freed immediately. */
	cr_expect_eq(freed_count, 0, "object freed inside the dispatch batch");
	conn_close(k->peer);
	conn_close(k);
}

Test(loop, close_is_deferred_past_batch)
{
	struct conn *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));

	a->peer = b;
	b->peer = a;
	cr_assert_eq(pipe(a->fds), 0);
	cr_assert_eq(pipe(b->fds), 0);
	gw_watch_init(&a->w, &loop, a->fds[0], conn_ready);
	gw_watch_init(&b->w, &loop, b->fds[0], conn_ready);
	cr_assert_eq(gw_watch_set(&a->w, EPOLLIN), 0);
	cr_assert_eq(gw_watch_set(&b->w, EPOLLIN), 0);
	cr_assert_eq(write(a->fds[1], "a", 1), 1);
	cr_assert_eq(write(b->fds[1], "b", 1), 1);
	/* Both events come back in one epoll_wait batch. */
	cr_expect_eq(gw_loop_run_once(&loop, 1000), 2);
	cr_expect_eq(dispatched_total, 1, "closed object's pending event was dispatched");
	cr_expect_eq(freed_count, 2, "closed objects not freed after the batch");
}

struct waker {
	struct gw_notify n;
	int calls;
};

static void waker_fn(struct gw_notify *n)
{
	struct waker *wk = gw_container_of(n, struct waker, n);

	wk->calls++;
	gw_loop_stop(n->w.loop, 7);
}

static void *waker_thread(void *arg)
{
	struct waker *wk = arg;

	usleep(50 * 1000);
	for (int i = 0; i < 5; i++)
		gw_notify_signal(&wk->n);
	return NULL;
}

Test(loop, notify_from_thread_wakes_loop, .timeout = 10)
{
	struct waker wk = { 0 };
	pthread_t th;

	cr_assert_eq(gw_notify_init(&wk.n, &loop, waker_fn), 0);
	cr_assert_eq(pthread_create(&th, NULL, waker_thread, &wk), 0);
	cr_expect_eq(gw_loop_run(&loop), 7);
	pthread_join(th, NULL);
	cr_expect_eq(wk.calls, 1, "five signals before the loop ran gave %d calls", wk.calls);
	gw_notify_fini(&wk.n);
}

struct sigcatch {
	struct gw_signal s;
	int last;
	int count;
};

static void sig_fn(struct gw_signal *s, int signo)
{
	struct sigcatch *c = gw_container_of(s, struct sigcatch, s);

	c->last = signo;
	c->count++;
}

Test(loop, signal_via_raise, .timeout = 10)
{
	static const int sigs[] = { SIGUSR1, SIGHUP };
	struct sigcatch c = { 0 };

	cr_assert_eq(gw_signal_init(&c.s, &loop, sigs, 2, sig_fn), 0);
	/* Blocked now, so raise() leaves it pending instead of killing the test. */
	raise(SIGUSR1);
	cr_expect_eq(gw_loop_run_once(&loop, 1000), 1);
	cr_expect_eq(c.last, SIGUSR1);
	raise(SIGHUP);
	gw_loop_run_once(&loop, 1000);
	cr_expect_eq(c.last, SIGHUP);
	cr_expect_eq(c.count, 2);
	gw_signal_fini(&c.s);
}

Test(loop, now_is_monotonic)
{
	uint64_t a = gw_now_ns(), b;

	usleep(2000);
	b = gw_now_ns();
	cr_expect_gt(b, a + 1000000);
	cr_expect_geq(gw_now_ms(), a / 1000000);
}

/* An owner that frees its object at once (no gw_loop_close) after stopping the watch: the
 * object's event later in the same batch is dropped, not dispatched into freed memory (ASan
 * would see the read; here the victim's callback must not run). */
struct victim {
	struct gw_watch w;
	int fds[2];
};

static struct victim *victim;
static int victim_calls;
static bool killed_unrun;	/* the killer freed the victim before its event was dispatched */

static void victim_ready(struct gw_watch *w, uint32_t events)
{
	(void)w;
	(void)events;
	victim_calls++;
}

static void killer_ready(struct gw_watch *w, uint32_t events)
{
	(void)events;
	if (victim) {
		killed_unrun = victim_calls == 0;
		gw_watch_stop(&victim->w);
		close(victim->fds[0]);
		close(victim->fds[1]);
		free(victim);
		victim = NULL;
	}
	gw_watch_stop(w);
}

Test(loop, a_watch_stopped_and_freed_in_a_batch_gets_no_later_event)
{
	struct piper k = { 0 };

	for (int round = 0; round < 2; round++) {
		/* Both orders of the two events in the batch; the victim-after case is the one
		 * that matters. */
		victim = calloc(1, sizeof(*victim));
		victim_calls = 0;
		killed_unrun = false;
		cr_assert_eq(pipe(victim->fds), 0);
		cr_assert_eq(pipe(k.fds), 0);
		gw_watch_init(&k.w, &loop, k.fds[0], killer_ready);
		gw_watch_init(&victim->w, &loop, victim->fds[0], victim_ready);
		cr_assert_eq(gw_watch_set(&k.w, EPOLLIN), 0);
		cr_assert_eq(gw_watch_set(&victim->w, EPOLLIN), 0);
		/* epoll hands events back in the order the fds became ready. */
		if (round == 0) {
			cr_assert_eq(write(k.fds[1], "k", 1), 1);
			cr_assert_eq(write(victim->fds[1], "v", 1), 1);
		} else {
			cr_assert_eq(write(victim->fds[1], "v", 1), 1);
			cr_assert_eq(write(k.fds[1], "k", 1), 1);
		}
		cr_expect_eq(gw_loop_run_once(&loop, 1000), 2);
		if (victim) {
			/* The victim came first in the batch: it ran, and the killer ran too. */
			cr_expect_eq(victim_calls, 1);
			gw_watch_stop(&victim->w);
			close(victim->fds[0]);
			close(victim->fds[1]);
			free(victim);
			victim = NULL;
		}
		if (round == 0)
			cr_expect(killed_unrun, "the killer's event came second");
		if (killed_unrun)
			cr_expect_eq(victim_calls, 0, "a freed watch's event was dispatched");
		close(k.fds[0]);
		close(k.fds[1]);
	}
}
