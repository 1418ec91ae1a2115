// SPDX-License-Identifier: MIT
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
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

/* No test here sets Criterion's .timeout: with several of them running in parallel workers
 * (--jobs 2), Criterion 2.4's runner leaks 48 bytes of its own, which LeakSanitizer reports and
 * the sanitized run fails on (seen in a fresh-clone make test). A hang is bounded by make test. */
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

Test(loop, notify_from_thread_wakes_loop)
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

Test(loop, signal_via_raise)
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

/* Every deadline in the tree (timers, the cluster's lease and takeover holds, the gateway's
 * fence) is on gw_now_ms() and timerfds: both must count CLOCK_MONOTONIC, which a wall-clock
 * jump (settimeofday, NTP stepping) does not move. */
Test(loop, the_clock_is_monotonic_not_the_wall_clock)
{
	struct timespec mono, wall;
	uint64_t now = gw_now_ns(), m, w;

	clock_gettime(CLOCK_MONOTONIC, &mono);
	clock_gettime(CLOCK_REALTIME, &wall);
	m = (uint64_t)mono.tv_sec * 1000000000ull + (uint64_t)mono.tv_nsec;
	w = (uint64_t)wall.tv_sec * 1000000000ull + (uint64_t)wall.tv_nsec;
	cr_assert_leq(now, m);
	cr_assert_lt(m - now, 1000000000ull, "gw_now_ns reads CLOCK_MONOTONIC");
	cr_assert_gt(w - m, 365ull * 24 * 3600 * 1000000000ull,
		     "and not the wall clock (years apart unless the host has run for decades)");
}

/* Messages between loops (issue 13) */

struct note {
	struct gw_msg m;
	int sender;
	int seq;
	struct gw_loop *ran_on;	/* gw_loop_current() inside fn */
	int runs;
};

static int notes_run;

static void note_fn(struct gw_msg *m)
{
	struct note *n = gw_container_of(m, struct note, m);

	n->ran_on = gw_loop_current();
	n->runs++;
	notes_run++;
}

Test(loop, a_posted_message_runs_later_on_the_loop_not_in_the_post)
{
	struct note n = { .m.fn = note_fn };

	notes_run = 0;
	cr_expect_null(gw_loop_current(), "no loop runs outside a callback");
	cr_assert_eq(gw_loop_post(&loop, &n.m), 0);
	cr_expect_eq(n.runs, 0, "ran inside gw_loop_post");
	gw_loop_run_once(&loop, 0);
	cr_expect_eq(n.runs, 1);
	cr_expect_eq(n.ran_on, &loop, "gw_loop_current() is not the loop running the message");
	gw_loop_run_once(&loop, 0);
	cr_expect_eq(n.runs, 1, "ran twice");
	cr_expect_null(gw_loop_current());
}

/* Posted by the loop's own deferred work, after the round's messages ran and before it waits,
 * so no eventfd write: the wait must not sleep on it. */
static struct note late_note = { .m.fn = note_fn };

static void post_late(struct gw_defer *d)
{
	(void)d;
	cr_assert_eq(gw_loop_post(&loop, &late_note.m), 0);
}

Test(loop, a_message_posted_just_before_the_wait_does_not_wait_for_the_timeout)
{
	struct gw_defer d;
	uint64_t start = gw_now_ms();

	late_note.runs = 0;
	gw_defer_init(&d, post_late);
	gw_defer_queue(&loop, &d);
	/* The bound is half the 10 s sleep, not a measured figure. */
	gw_loop_run_once(&loop, 10000);
	cr_expect_lt(gw_now_ms() - start, 5000, "the loop slept with a message posted");
	cr_expect_eq(__atomic_load_n(&loop.msg_wakeups, __ATOMIC_RELAXED), 0,
		     "an awake loop was woken through its eventfd");
	gw_loop_run_once(&loop, 0);
	cr_expect_eq(late_note.runs, 1);
}

/* A loop asleep in epoll_wait is woken by a post from another thread. */
static void *post_once_asleep(void *arg)
{
	/* Once the loop says it may sleep, this post must write the eventfd (the list is empty). */
	while (!__atomic_load_n(&loop.msg_sleeping, __ATOMIC_SEQ_CST))
		usleep(1000);
	cr_assert_eq(gw_loop_post(&loop, arg), 0);
	return NULL;
}

Test(loop, a_post_from_another_thread_wakes_a_sleeping_loop)
{
	struct note n = { .m.fn = note_fn };
	uint64_t start = gw_now_ms();
	pthread_t th;

	cr_assert_eq(pthread_create(&th, NULL, post_once_asleep, &n), 0);
	/* Sleeps up to 10 s unless the eventfd wakes it; the wake-up's round runs the message. */
	while (!n.runs && gw_now_ms() - start < 10000)
		gw_loop_run_once(&loop, 10000);
	pthread_join(th, NULL);
	cr_expect_eq(n.runs, 1);
	cr_expect_lt(gw_now_ms() - start, 5000, "the post did not wake the loop");
	cr_expect_geq(__atomic_load_n(&loop.msg_wakeups, __ATOMIC_RELAXED), 1);
}

struct bouncer {
	struct gw_msg m;
	int left;
	int runs;
};

static void bouncer_fn(struct gw_msg *m)
{
	struct bouncer *b = gw_container_of(m, struct bouncer, m);

	b->runs++;
	if (b->left-- > 0)
		cr_assert_eq(gw_loop_post(gw_loop_current(), m), 0);
}

Test(loop, a_message_posted_to_its_own_loop_runs_in_the_next_round)
{
	struct bouncer b = { .m.fn = bouncer_fn, .left = 3 };
	uint64_t start = gw_now_ms();

	cr_assert_eq(gw_loop_post(&loop, &b.m), 0);
	/* Rounds 1-3 re-post it: none of them may sleep; round 4 runs it for the last time. */
	for (int i = 1; i <= 4; i++) {
		gw_loop_run_once(&loop, i < 4 ? 10000 : 0);
		cr_expect_eq(b.runs, i, "round %d ran the message %d times", i, b.runs);
	}
	cr_expect_lt(gw_now_ms() - start, 5000, "a re-posted message waited for the timeout");
}

/* Many threads post to a loop on its own thread: everything runs, once each, on the loop's
 * thread, and each sender's messages in the order it posted them. */
#define SENDERS 4
#define PER_SENDER 20000

static int last_seq[SENDERS];
static int order_errors, off_loop, seen;
static struct note *sent[SENDERS];

static void ordered_fn(struct gw_msg *m)
{
	struct note *n = gw_container_of(m, struct note, m);

	if (gw_loop_current() != &loop)
		off_loop++;
	if (n->seq != last_seq[n->sender] + 1)
		order_errors++;
	last_seq[n->sender] = n->seq;
	n->runs++;
	seen++;
}

static void *sender_thread(void *arg)
{
	int id = (int)(intptr_t)arg;

	for (int i = 0; i < PER_SENDER; i++) {
		struct note *n = &sent[id][i];

		n->m.fn = ordered_fn;
		n->sender = id;
		n->seq = i + 1;
		if (gw_loop_post(&loop, &n->m))
			return (void *)1;
		if (i % 1000 == 0)
			sched_yield();	/* let the loop catch up and sleep now and then */
	}
	return NULL;
}

Test(loop, many_senders_each_in_order_on_the_loop_thread)
{
	pthread_t th[SENDERS];
	void *rc;
	int total = 0;

	seen = order_errors = off_loop = 0;
	for (int s = 0; s < SENDERS; s++) {
		last_seq[s] = 0;
		sent[s] = calloc(PER_SENDER, sizeof(struct note));
		cr_assert_not_null(sent[s]);
	}
	cr_assert_eq(gw_loop_thread_start(&loop, -1, "test-loop"), 0);
	for (int s = 0; s < SENDERS; s++)
		cr_assert_eq(pthread_create(&th[s], NULL, sender_thread, (void *)(intptr_t)s), 0);
	for (int s = 0; s < SENDERS; s++) {
		pthread_join(th[s], &rc);
		cr_expect_null(rc, "sender %d: a post failed", s);
	}
	/* Every message posted before the stop has run when it returns. */
	cr_expect_eq(gw_loop_thread_stop(&loop), 0);
	cr_expect_eq(seen, SENDERS * PER_SENDER, "%d of %d messages ran", seen,
		     SENDERS * PER_SENDER);
	cr_expect_eq(order_errors, 0, "%d messages ran out of their sender's order", order_errors);
	cr_expect_eq(off_loop, 0, "%d messages ran off the loop's thread", off_loop);
	for (int s = 0; s < SENDERS; s++) {
		for (int i = 0; i < PER_SENDER; i++)
			total += sent[s][i].runs == 1;
		free(sent[s]);
	}
	cr_expect_eq(total, SENDERS * PER_SENDER, "a message ran twice or never");
	cr_expect_eq(loop.msg_runs, (uint64_t)SENDERS * PER_SENDER + 1, "the stop message too");
}

/* Messages that own memory: those posted after the loop's thread stopped run in gw_loop_fini,
 * so nothing is leaked (LeakSanitizer checks the frees in the sanitized build); once the loop
 * is finished a post fails and never runs. */
static int payloads_freed;

static void payload_fn(void *arg)
{
	free(arg);
	payloads_freed++;
}

Test(loop, stop_with_messages_pending_runs_them_all_and_leaks_nothing)
{
	struct note late = { .m.fn = note_fn };
	int posted = 0;

	payloads_freed = 0;
	notes_run = 0;
	cr_assert_eq(gw_loop_thread_start(&loop, -1, NULL), 0);
	for (int i = 0; i < 5000; i++) {
		cr_assert_eq(gw_loop_send(&loop, payload_fn, malloc(64)), 0);
		posted++;
	}
	cr_expect_eq(gw_loop_thread_stop(&loop), 0);
	cr_expect_eq(payloads_freed, posted, "stop returned before the messages posted ran");
	/* The thread is gone: these wait for gw_loop_fini. */
	for (int i = 0; i < 100; i++) {
		cr_assert_eq(gw_loop_send(&loop, payload_fn, malloc(64)), 0);
		posted++;
	}
	cr_expect_eq(payloads_freed, posted - 100);
	gw_loop_fini(&loop);
	cr_expect_eq(payloads_freed, posted, "gw_loop_fini dropped %d messages",
		     posted - payloads_freed);
	cr_expect_eq(gw_loop_post(&loop, &late.m), -ESHUTDOWN, "posted to a finished loop");
	cr_expect_eq(notes_run, 0);
	/* teardown's gw_loop_fini finds it finished; init again for it to be symmetric */
	cr_assert_eq(gw_loop_init(&loop), 0);
}

/* A loop that stopped by itself (gw_loop_stop from a callback) gives its code to the stop. */
static void stop_with_9(void *arg)
{
	gw_loop_stop(arg, 9);
}

Test(loop, thread_stop_returns_the_code_the_loop_stopped_with)
{
	cr_assert_eq(gw_loop_thread_start(&loop, -1, NULL), 0);
	cr_assert_eq(gw_loop_send(&loop, stop_with_9, &loop), 0);
	cr_expect_eq(gw_loop_thread_stop(&loop), 9);
	cr_expect_eq(gw_loop_thread_stop(&loop), -ESRCH, "stopped twice");
}

static int ran_on_cpu = -2;

static void where_fn(void *arg)
{
	(void)arg;
	ran_on_cpu = sched_getcpu();
}

Test(loop, a_pinned_loop_runs_on_its_cpu)
{
	cpu_set_t set;
	int cpu = -1;

	cr_assert_eq(sched_getaffinity(0, sizeof(set), &set), 0);
	/* The last CPU this process may use: not the first, so the pinning shows. */
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set))
			cpu = c;
	cr_assert_geq(cpu, 0);
	cr_assert_eq(gw_loop_thread_start(&loop, cpu, "test-pinned"), 0);
	cr_assert_eq(gw_loop_send(&loop, where_fn, NULL), 0);
	cr_expect_eq(gw_loop_thread_stop(&loop), 0);
	cr_expect_eq(ran_on_cpu, cpu, "the loop pinned to CPU %d ran on CPU %d", cpu, ran_on_cpu);
	cr_expect_lt(gw_loop_thread_start(&loop, CPU_SETSIZE, NULL), 0, "an impossible CPU");
	cr_expect_not(loop.has_thread);
}

/* The synchronous call runs fn on the loop's own thread and hands its result back. */
struct call_probe {
	pthread_t ran_on;
	struct gw_loop *current;
	int calls;
};

static int probe_fn(void *arg)
{
	struct call_probe *p = arg;

	p->ran_on = pthread_self();
	p->current = gw_loop_current();
	p->calls++;
	return 42;
}

Test(loop, a_synchronous_call_runs_on_the_loops_thread_and_returns_its_result)
{
	struct call_probe p = { 0 };

	/* Without a thread: directly, in the caller. */
	cr_expect_eq(gw_loop_call(&loop, probe_fn, &p), 42);
	cr_expect_eq(p.calls, 1);
	cr_expect(pthread_equal(p.ran_on, pthread_self()));

	cr_assert_eq(gw_loop_thread_start(&loop, -1, "test-call"), 0);
	for (int i = 0; i < 50; i++)
		cr_assert_eq(gw_loop_call(&loop, probe_fn, &p), 42);
	cr_expect_eq(p.calls, 51, "a call returned before its function ran");
	cr_expect_not(pthread_equal(p.ran_on, pthread_self()), "the call ran in the caller");
	cr_expect(pthread_equal(p.ran_on, loop.thread), "the call ran on another thread");
	cr_expect_eq(p.current, &loop, "inside the call the current loop is not the loop");
	cr_expect_eq(gw_loop_thread_stop(&loop), 0);
	gw_loop_fini(&loop);
	cr_expect_eq(gw_loop_call(&loop, probe_fn, &p), 42, "no thread: direct, even finished");
	cr_assert_eq(gw_loop_init(&loop), 0);
}

Test(loop, the_set_picks_the_least_loaded_loop)
{
	struct gw_loop other;
	struct gw_loops set = { .n = 3, .loop = { &loop, &other, &loop } };

	cr_expect_eq(gw_loops_pick(&set), 0, "equals: the lowest index");
	gw_loops_load_add(&set, 0, 2);
	gw_loops_load_add(&set, 1, 1);
	cr_expect_eq(gw_loops_pick(&set), 2);
	gw_loops_load_add(&set, 2, 3);
	cr_expect_eq(gw_loops_pick(&set), 1);
	gw_loops_load_add(&set, 0, -2);
	cr_expect_eq(gw_loops_pick(&set), 0, "a connection gone makes its loop the choice again");
	gw_loops_load_add(&set, 7, 1);	/* out of the set: ignored */
	cr_expect_eq(gw_loops_index(&set, &other), 1);
	cr_expect_eq(gw_loops_index(&set, NULL), -1);
	struct gw_loops one = { .n = 1, .loop = { &loop } };
	cr_expect_eq(gw_loops_pick(&one), 0);
}

/* Shutdown: the loops' last messages to each other run (on the calling thread, each as its own
 * loop) before what they name is freed, and the loop stays open for more (gw_loop_drain). */
static struct gw_loop other;
static int drained_here, drained_other;

static void drain_other_fn(void *arg)
{
	(void)arg;
	if (gw_loop_current() == &other)
		drained_other++;
}

static void drain_here_fn(void *arg)
{
	(void)arg;
	if (gw_loop_current() == &loop)
		drained_here++;
	/* As a nexus forgotten by every owner does: a message to the other loop. */
	cr_expect_eq(gw_loop_send(&other, drain_other_fn, NULL), 0);
}

Test(loop, drain_runs_what_is_posted_as_the_loop_and_keeps_it_open)
{
	drained_here = drained_other = 0;
	cr_assert_eq(gw_loop_init(&other), 0);
	cr_assert_eq(gw_loop_thread_start(&other, -1, NULL), 0);
	cr_expect_eq(gw_loop_thread_stop(&other), 0);
	cr_expect_not(gw_loop_drain(&loop), "nothing posted, nothing ran");
	cr_assert_eq(gw_loop_send(&loop, drain_here_fn, NULL), 0);
	cr_assert_eq(gw_loop_send(&loop, drain_here_fn, NULL), 0);
	cr_expect(gw_loop_drain(&loop));
	cr_expect_eq(drained_here, 2, "ran %d of 2 on the loop", drained_here);
	cr_expect_eq(drained_other, 0, "the other loop's messages wait for its drain");
	cr_expect(gw_loop_drain(&other), "the stopped loop drained from this thread");
	cr_expect_eq(drained_other, 2);
	cr_expect_not(gw_loop_drain(&other));
	cr_expect_eq(gw_loop_send(&loop, drain_here_fn, NULL), 0, "the drained loop is still open");
	cr_expect(gw_loop_drain(&loop));
	gw_loop_fini(&other);
	cr_expect_eq(drained_other, 3, "gw_loop_fini ran the last one");
}

/* Busy polling (gw_loop_set_poll) */

static uint64_t ld(const uint64_t *c)
{
	return __atomic_load_n(c, __ATOMIC_RELAXED);
}

/* A pipe whose read end the loop watches (piper_read). */
static void piper_open(struct piper *p)
{
	cr_assert_eq(pipe(p->fds), 0);
	gw_watch_init(&p->w, &loop, p->fds[0], piper_read);
	cr_assert_eq(gw_watch_set(&p->w, EPOLLIN), 0);
}

static void piper_close(struct piper *p)
{
	gw_watch_stop(&p->w);
	close(p->fds[0]);
	close(p->fds[1]);
}

/* n waits for work that end at once (a byte already in the pipe). */
static void short_waits(struct piper *p, int n)
{
	for (int i = 0; i < n; i++) {
		cr_assert_eq(write(p->fds[1], "s", 1), 1);
		cr_assert_eq(gw_loop_run_once(&loop, 1000), 1);
	}
}

Test(loop, polling_starts_after_mostly_short_waits_and_stops_when_they_grow_long)
{
	struct piper p = { 0 };

	piper_open(&p);
	gw_loop_set_poll(&loop, 1000);
	/* GW_POLL_SHORT_MIN short waits: each one slept (briefly), none polled. */
	short_waits(&p, GW_POLL_SHORT_MIN);
	cr_expect_eq(ld(&loop.sleeps), GW_POLL_SHORT_MIN);
	cr_expect_eq(ld(&loop.polls), 0);
	/* From then on a wait polls first, and the poll finds the byte: no sleep. */
	short_waits(&p, 2);
	cr_expect_eq(p.calls, GW_POLL_SHORT_MIN + 2);
	cr_expect_eq(ld(&loop.polls), 2);
	cr_expect_eq(ld(&loop.poll_hits), 2);
	cr_expect_eq(ld(&loop.sleeps), GW_POLL_SHORT_MIN,
		     "the loop slept although the poll found work");
	/* Nothing comes: each poll misses and the loop sleeps out its 20 ms, until fewer than
	 * GW_POLL_SHORT_MIN of the last 8 waits were short (8 - GW_POLL_SHORT_MIN + 1 misses)... */
	for (int i = 0; i < 8 - GW_POLL_SHORT_MIN + 1; i++)
		cr_expect_eq(gw_loop_run_once(&loop, 20), 0);
	cr_expect_eq(ld(&loop.polls), 2 + 8 - GW_POLL_SHORT_MIN + 1);
	cr_expect_eq(ld(&loop.poll_hits), 2);
	/* ... then the loop sleeps at once. */
	cr_expect_eq(gw_loop_run_once(&loop, 20), 0);
	cr_expect_eq(ld(&loop.polls), 2 + 8 - GW_POLL_SHORT_MIN + 1, "an idle loop polled");
	cr_expect_eq(ld(&loop.sleeps), GW_POLL_SHORT_MIN + 8 - GW_POLL_SHORT_MIN + 2);
	/* Off: short waits start no poll. */
	gw_loop_set_poll(&loop, 0);
	short_waits(&p, 10);
	cr_expect_eq(ld(&loop.polls), 2 + 8 - GW_POLL_SHORT_MIN + 1,
		     "a loop with polling off polled");
	piper_close(&p);
}

Test(loop, waits_half_short_half_long_poll_only_to_probe)
{
	struct piper p = { 0 };

	piper_open(&p);
	gw_loop_set_poll(&loop, 1000);
	/* A wait for work that comes at once, then one that does not come within 2 ms: a poll
	 * would miss every other time and cost its whole window. Only the probes poll (every
	 * GW_POLL_PROBE-th wait, each one of the long ones here: a miss). */
	for (int i = 0; i < 12; i++) {
		short_waits(&p, 1);
		cr_expect_eq(gw_loop_run_once(&loop, 2), 0);
	}
	cr_expect_eq(ld(&loop.polls), 24 / GW_POLL_PROBE);
	cr_expect_eq(ld(&loop.poll_hits), 0);
	cr_expect_eq(ld(&loop.sleeps), 24);
	piper_close(&p);
}

/* Posts once the loop has started polling (its flag says awake: no eventfd write is due). */
static void *post_while_polling(void *arg)
{
	while (!__atomic_load_n(&loop.polls, __ATOMIC_RELAXED))
		sched_yield();
	cr_assert_eq(gw_loop_post(&loop, arg), 0);
	return NULL;
}

Test(loop, a_message_posted_while_the_loop_polls_ends_the_poll_without_a_sleep)
{
	struct note n = { .m.fn = note_fn };
	struct piper p = { 0 };
	pthread_t th;

	piper_open(&p);
	/* A long window (2 s), so the poster's post lands in it however slowly it is scheduled. */
	gw_loop_set_poll(&loop, 2000000);
	short_waits(&p, GW_POLL_SHORT_MIN);
	cr_assert_eq(ld(&loop.polls), 0);
	cr_assert_eq(pthread_create(&th, NULL, post_while_polling, &n), 0);
	gw_loop_run_once(&loop, 10000);
	gw_loop_run_once(&loop, 0);
	pthread_join(th, NULL);
	cr_expect_eq(n.runs, 1);
	/* A poll that missed it would have ended in its 2 s, without a hit. */
	cr_expect_eq(ld(&loop.poll_hits), 1, "the poll did not notice the message");
	cr_expect_eq(ld(&loop.sleeps), GW_POLL_SHORT_MIN, "the loop slept with a message posted");
	cr_expect_eq(__atomic_load_n(&loop.msg_wakeups, __ATOMIC_RELAXED), 0,
		     "a polling loop was woken through its eventfd");
	piper_close(&p);
}
