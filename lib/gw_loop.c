// SPDX-License-Identifier: MIT
/*
 * The epoll loop. One iteration: run deferred work, wait (not at all if more work was queued),
 * dispatch a batch of events, then free what was closed during the batch. Watchers stopped
 * during a batch are skipped for the rest of it, and nothing closed is freed until the batch is
 * over, so a callback may tear down any object, including ones with events still pending.
 *
 * Messages from other threads (and from the loop to itself): posters push onto an intrusive
 * list with a compare-and-swap, newest first; the loop takes the whole list with one exchange,
 * reverses it and runs it, so each poster's messages run in the order it posted them. The
 * eventfd is written only when a push finds the list empty while the loop says it may sleep.
 * The loop says so (msg_sleeping = 1) before looking at the list one last time and calling
 * epoll_wait; the poster pushes before reading the flag. Both are sequentially consistent, so
 * at least one of them sees the other: either the loop sees the message and does not sleep, or
 * the poster sees the flag and wakes it. A wake-up too many is harmless, none too few.
 *
 * Busy polling (gw_loop_set_poll, off unless set): while most of the loop's last 8 waits for
 * work were short (GW_POLL_SHORT_MIN of them ended within poll_max_ns), and on every
 * GW_POLL_PROBE-th wait otherwise, it checks its fds (epoll_wait with no timeout) and its
 * message list for up to poll_max_ns before it sleeps, calling sched_yield between checks. The
 * flag stays 0 meanwhile, so posters do not write the eventfd; the list is looked at on every
 * check instead. A sleep and its wake-up cost more than a few checks (context switches, the
 * eventfd or socket wake-up), and a loop serving one busy session sleeps between each of its
 * bursts (docs/PERFORMANCE.md, "Busy polling: the loop rows with and without it").
 */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "gw_log.h"
#include "gw_loop.h"

#define GW_LOOP_BATCH 64
/* msg_head once gw_loop_fini has run: posting fails. */
#define GW_MSG_CLOSED ((struct gw_msg *)(uintptr_t)1)

static __thread struct gw_loop *gw_loop_cur;

struct gw_loop *gw_loop_current(void)
{
	return gw_loop_cur;
}

static void gw_msg_ready(struct gw_watch *w, uint32_t events);

uint64_t gw_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t gw_now_ms(void)
{
	return gw_now_ns() / 1000000ull;
}

int gw_loop_init(struct gw_loop *loop)
{
	int fd, r;

	memset(loop, 0, sizeof(*loop));
	gw_list_init(&loop->deferred);
	gw_list_init(&loop->closing);
	loop->msg_w.fd = -1;
	loop->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (loop->epfd < 0) {
		int err = errno;

		gw_err("loop", "epoll_create1: %s", strerror(err));
		return -err;
	}
	loop->now_ms = gw_now_ms();
	fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		gw_err("loop", "eventfd: %s", strerror(-r));
		goto fail;
	}
	gw_watch_init(&loop->msg_w, loop, fd, gw_msg_ready);
	r = gw_watch_set(&loop->msg_w, EPOLLIN);
	if (r < 0) {
		close(fd);
		goto fail;
	}
	return 0;
fail:
	close(loop->epfd);
	loop->epfd = -1;
	return r;
}

/* Messages */

int gw_loop_post(struct gw_loop *loop, struct gw_msg *m)
{
	struct gw_msg *head = __atomic_load_n(&loop->msg_head, __ATOMIC_RELAXED);

	do {
		if (head == GW_MSG_CLOSED)
			return -ESHUTDOWN;
		m->next = head;
	} while (!__atomic_compare_exchange_n(&loop->msg_head, &head, m, true, __ATOMIC_SEQ_CST,
					      __ATOMIC_RELAXED));
	/* A non-empty list has had its wake-up already, or the loop has yet to look at it. */
	if (!head && __atomic_load_n(&loop->msg_sleeping, __ATOMIC_SEQ_CST)) {
		uint64_t one = 1;
		int saved = errno;

		__atomic_fetch_add(&loop->msg_wakeups, 1, __ATOMIC_RELAXED);
		/* EAGAIN: the counter is saturated, a wake-up is pending anyway. Nothing here
		 * logs: posters may be worker threads in the middle of anything. */
		if (write(loop->msg_w.fd, &one, sizeof(one)) < 0) {
			/* ignored, see above */
		}
		errno = saved;
	}
	return 0;
}

struct gw_msg_call {
	struct gw_msg m;
	void (*fn)(void *arg);
	void *arg;
};

static void gw_msg_call_fn(struct gw_msg *m)
{
	struct gw_msg_call *c = gw_container_of(m, struct gw_msg_call, m);
	void (*fn)(void *arg) = c->fn;
	void *arg = c->arg;

	free(c);
	fn(arg);
}

int gw_loop_send(struct gw_loop *loop, void (*fn)(void *arg), void *arg)
{
	struct gw_msg_call *c = malloc(sizeof(*c));
	int r;

	if (!c)
		return -ENOMEM;
	c->m.fn = gw_msg_call_fn;
	c->fn = fn;
	c->arg = arg;
	r = gw_loop_post(loop, &c->m);
	if (r)
		free(c);
	return r;
}

/* The synchronous call: the caller waits on a condition variable its message signals. */
struct gw_msg_sync {
	struct gw_msg m;
	int (*fn)(void *arg);
	void *arg;
	int rc;
	bool done;
	pthread_mutex_t lock;
	pthread_cond_t cond;
};

static void gw_msg_sync_fn(struct gw_msg *m)
{
	struct gw_msg_sync *c = gw_container_of(m, struct gw_msg_sync, m);
	int rc = c->fn(c->arg);

	pthread_mutex_lock(&c->lock);
	c->rc = rc;
	c->done = true;
	pthread_cond_signal(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

int gw_loop_call(struct gw_loop *loop, int (*fn)(void *arg), void *arg)
{
	struct gw_msg_sync c = { .m.fn = gw_msg_sync_fn, .fn = fn, .arg = arg };
	int r;

	if (gw_loop_current() == loop || !loop->has_thread)
		return fn(arg);
	pthread_mutex_init(&c.lock, NULL);
	pthread_cond_init(&c.cond, NULL);
	r = gw_loop_post(loop, &c.m);
	if (!r) {
		pthread_mutex_lock(&c.lock);
		while (!c.done)
			pthread_cond_wait(&c.cond, &c.lock);
		pthread_mutex_unlock(&c.lock);
		r = c.rc;
	}
	pthread_cond_destroy(&c.cond);
	pthread_mutex_destroy(&c.lock);
	return r;
}

/* The set of loops */

unsigned gw_loops_pick(const struct gw_loops *set)
{
	unsigned best = 0, best_load = UINT_MAX;

	for (unsigned i = 0; i < set->n; i++) {
		unsigned l = __atomic_load_n(&set->load[i], __ATOMIC_RELAXED);

		if (l < best_load) {
			best = i;
			best_load = l;
		}
	}
	return best;
}

void gw_loops_load_add(struct gw_loops *set, unsigned i, int delta)
{
	if (i < set->n)
		__atomic_fetch_add(&set->load[i], (unsigned)delta, __ATOMIC_RELAXED);
}

int gw_loops_index(const struct gw_loops *set, const struct gw_loop *loop)
{
	for (unsigned i = 0; i < set->n; i++)
		if (set->loop[i] == loop)
			return (int)i;
	return -1;
}

/* Runs what was posted up to now, oldest first. What these messages post waits for the next
 * call, as deferred work does. */
static bool gw_loop_run_msgs(struct gw_loop *loop)
{
	struct gw_msg *m, *next, *fifo = NULL;

	if (!__atomic_load_n(&loop->msg_head, __ATOMIC_RELAXED))
		return false;
	m = __atomic_exchange_n(&loop->msg_head, NULL, __ATOMIC_ACQUIRE);
	for (; m; m = next) {
		next = m->next;
		m->next = fifo;
		fifo = m;
	}
	for (m = fifo; m; m = next) {
		next = m->next;
		loop->msg_runs++;
		m->fn(m);
	}
	return true;
}

static void gw_msg_ready(struct gw_watch *w, uint32_t events)
{
	uint64_t count;

	(void)events;
	if (read(w->fd, &count, sizeof(count)) < 0) {
		/* EAGAIN: read already, by an earlier round; the list is what counts */
	}
	gw_loop_run_msgs(w->loop);
}

static bool gw_loop_run_deferred(struct gw_loop *loop)
{
	struct gw_list batch;
	bool ran = false;

	/* Work queued by this round's callbacks waits for the next round, so a callback that
	 * requeues itself cannot starve the fds. */
	if (gw_list_empty(&loop->deferred))
		return false;
	batch.next = loop->deferred.next;
	batch.prev = loop->deferred.prev;
	batch.next->prev = &batch;
	batch.prev->next = &batch;
	gw_list_init(&loop->deferred);
	while (!gw_list_empty(&batch)) {
		struct gw_defer *d = gw_list_first_entry(&batch, struct gw_defer, node);

		gw_list_del(&d->node);
		d->queued = false;
		d->fn(d);
		ran = true;
	}
	return ran;
}

static void gw_loop_free_closed(struct gw_loop *loop)
{
	/* free_fn may close further objects; they are freed in the same pass. */
	while (!gw_list_empty(&loop->closing)) {
		struct gw_close *c = gw_list_first_entry(&loop->closing, struct gw_close, node);

		gw_list_del(&c->node);
		c->free_fn(c);
	}
}

/* Runs what is posted, deferred or closing until nothing is, counting rounds on from `rounds`
 * up to 1000 (past it: returns more than 1000 with work left); returns the count. The caller
 * owns the loop and has set gw_loop_cur. */
static int gw_loop_run_pending(struct gw_loop *loop, int rounds)
{
	while ((__atomic_load_n(&loop->msg_head, __ATOMIC_ACQUIRE) ||
		!gw_list_empty(&loop->deferred) || !gw_list_empty(&loop->closing)) &&
	       rounds++ < 1000) {
		gw_loop_run_msgs(loop);
		gw_loop_run_deferred(loop);
		gw_loop_free_closed(loop);
	}
	return rounds;
}

bool gw_loop_drain(struct gw_loop *loop)
{
	struct gw_loop *outer = gw_loop_cur;
	int rounds;

	if (loop->epfd < 0)
		return false;
	gw_loop_cur = loop;
	rounds = gw_loop_run_pending(loop, 0);
	gw_loop_cur = outer;
	return rounds > 0;
}

void gw_loop_fini(struct gw_loop *loop)
{
	struct gw_loop *outer = gw_loop_cur;
	struct gw_msg *none;
	int rounds = 0;

	if (loop->epfd < 0)
		return;
	/* What is still posted runs here, on this thread, which owns the loop now; then the list
	 * is closed, unless something was posted meanwhile (run that too). */
	gw_loop_cur = loop;
	for (;;) {
		rounds = gw_loop_run_pending(loop, rounds);
		none = NULL;
		if (__atomic_compare_exchange_n(&loop->msg_head, &none, GW_MSG_CLOSED, false,
						__ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
			break;
		if (rounds >= 1000) {
			/* Still posting to itself: what is left is dropped, not run forever. */
			gw_warn("loop", "messages still posted at shutdown: dropped");
			__atomic_store_n(&loop->msg_head, GW_MSG_CLOSED, __ATOMIC_SEQ_CST);
			break;
		}
	}
	gw_loop_cur = outer;
	if (!gw_list_empty(&loop->deferred))
		gw_warn("loop", "deferred work still requeueing itself at shutdown");
	gw_watch_stop(&loop->msg_w);
	close(loop->msg_w.fd);
	loop->msg_w.fd = -1;
	close(loop->epfd);
	loop->epfd = -1;
}

void gw_loop_set_poll(struct gw_loop *loop, unsigned poll_us)
{
	__atomic_store_n(&loop->poll_max_ns, (uint64_t)poll_us * 1000u, __ATOMIC_RELAXED);
	loop->poll_hist = 0;
	loop->poll_skips = 0;
}

static void gw_count(uint64_t *c)
{
	__atomic_store_n(c, *c + 1, __ATOMIC_RELAXED);
}

/* Checks for fds ready and messages until one is there or poll_max_ns has passed since start:
 * what epoll_wait returned (0: nothing ready, maybe a message). */
static int gw_loop_poll(struct gw_loop *loop, struct epoll_event *ev, uint64_t start)
{
	uint64_t end = start + loop->poll_max_ns;
	int n;

	for (;;) {
		n = epoll_wait(loop->epfd, ev, GW_LOOP_BATCH, 0);
		if (n || __atomic_load_n(&loop->msg_head, __ATOMIC_SEQ_CST) || gw_now_ns() >= end)
			return n;
		sched_yield();
	}
}

int gw_loop_run_once(struct gw_loop *loop, int timeout_ms)
{
	struct epoll_event ev[GW_LOOP_BATCH], *outer;
	struct gw_loop *outer_loop = gw_loop_cur;
	int n = 0, i, outer_i, outer_n;
	uint64_t start = 0, now;
	bool waited = false;

	gw_loop_cur = loop;
	gw_loop_run_msgs(loop);
	gw_loop_run_deferred(loop);
	if (!gw_list_empty(&loop->deferred) || !gw_list_empty(&loop->closing) || loop->stopping)
		timeout_ms = 0;
	if (timeout_ms && loop->poll_max_ns) {
		start = gw_now_ns();
		if (__builtin_popcount(loop->poll_hist) >= GW_POLL_SHORT_MIN ||
		    ++loop->poll_skips >= GW_POLL_PROBE) {
			loop->poll_skips = 0;
			gw_count(&loop->polls);
			n = gw_loop_poll(loop, ev, start);
			if (n > 0 || __atomic_load_n(&loop->msg_head, __ATOMIC_SEQ_CST)) {
				/* Found: no sleep. Messages run at the start of the next round. */
				gw_count(&loop->poll_hits);
				goto polled;
			}
		}
	}
	if (timeout_ms) {
		/* See the top of the file: the flag first, then one last look at the list. */
		__atomic_store_n(&loop->msg_sleeping, 1, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&loop->msg_head, __ATOMIC_SEQ_CST))
			timeout_ms = 0;
	}
	waited = timeout_ms != 0;
	n = epoll_wait(loop->epfd, ev, GW_LOOP_BATCH, timeout_ms);
	__atomic_store_n(&loop->msg_sleeping, 0, __ATOMIC_RELAXED);
polled:
	now = gw_now_ns();
	if (start) {
		/* Remember whether this wait for work (polling included) ended soon enough that
		 * a poll would have caught what ended it: a hit did, a miss and a long sleep did
		 * not (a timer's timeout is at least 1 ms). */
		loop->poll_hist = (uint8_t)(loop->poll_hist << 1 |
					    (now - start <= loop->poll_max_ns));
	}
	if (waited)
		gw_count(&loop->sleeps);
	if (n < 0) {
		int err = errno;

		if (err != EINTR) {
			gw_err("loop", "epoll_wait: %s", strerror(err));
			gw_loop_cur = outer_loop;
			return -err;
		}
		n = 0;
	}
	loop->now_ms = now / 1000000ull;
	/* A run_once nested in a callback (none today) would hide the outer batch: keep it. */
	outer = loop->batch;
	outer_i = loop->batch_i;
	outer_n = loop->batch_n;
	loop->batch = ev;
	loop->batch_n = n;
	for (i = 0; i < n; i++) {
		struct gw_watch *w = ev[i].data.ptr;

		/* Stopped earlier in this batch (gw_watch_stop dropped it): maybe freed already. */
		if (!w || !w->events)
			continue;
		loop->batch_i = i;
		w->fn(w, ev[i].events);
	}
	loop->batch = outer;
	loop->batch_i = outer_i;
	loop->batch_n = outer_n;
	gw_loop_free_closed(loop);
	gw_loop_cur = outer_loop;
	return n;
}

int gw_loop_run(struct gw_loop *loop)
{
	int r;

	while (!loop->stopping) {
		r = gw_loop_run_once(loop, -1);
		if (r < 0) {
			loop->stopping = false;
			return r;
		}
	}
	loop->stopping = false;
	return loop->exit_code;
}

void gw_loop_stop(struct gw_loop *loop, int exit_code)
{
	loop->stopping = true;
	loop->exit_code = exit_code;
}

/* A loop on a thread of its own */

static void *gw_loop_thread_main(void *arg)
{
	struct gw_loop *loop = arg;

	loop->thread_rc = gw_loop_run(loop);
	return NULL;
}

int gw_loop_thread_start(struct gw_loop *loop, int cpu, const char *name)
{
	pthread_attr_t attr;
	cpu_set_t set;
	int r;

	if (loop->has_thread)
		return -EBUSY;
	if (cpu >= CPU_SETSIZE)
		return -EINVAL;
	r = pthread_attr_init(&attr);
	if (r)
		return -r;
	if (cpu >= 0) {
		/* Pinned from its first instruction: nothing it allocates lands on another node. */
		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		r = pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
		if (r)
			goto out;
	}
	loop->thread_rc = 0;
	r = pthread_create(&loop->thread, &attr, gw_loop_thread_main, loop);
	if (r)
		goto out;
	loop->has_thread = true;
	if (name)
		pthread_setname_np(loop->thread, name);	/* cosmetic: ERANGE past 15 chars */
out:
	pthread_attr_destroy(&attr);
	if (r)
		gw_err("loop", "thread %s on CPU %d: %s", name ? name : "(loop)", cpu, strerror(r));
	return -r;
}

static void gw_loop_stop_msg(struct gw_msg *m)
{
	struct gw_loop *loop = gw_container_of(m, struct gw_loop, stop_msg);

	/* A stop asked for earlier in the same round keeps its code. */
	if (!loop->stopping)
		gw_loop_stop(loop, 0);
}

int gw_loop_thread_stop(struct gw_loop *loop)
{
	if (!loop->has_thread)
		return -ESRCH;
	/* Behind every message posted before this one; a loop that stopped by itself already
	 * leaves the message to gw_loop_fini, which runs it harmlessly. */
	loop->stop_msg.fn = gw_loop_stop_msg;
	gw_loop_post(loop, &loop->stop_msg);
	pthread_join(loop->thread, NULL);
	loop->has_thread = false;
	return loop->thread_rc;
}

void gw_watch_init(struct gw_watch *w, struct gw_loop *loop, int fd, gw_watch_fn fn)
{
	w->loop = loop;
	w->fd = fd;
	w->events = 0;
	w->fn = fn;
}

int gw_watch_set(struct gw_watch *w, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = w };
	int op;

	if (!events) {
		gw_watch_stop(w);
		return 0;
	}
	if (events == w->events)
		return 0;
	op = w->events ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
	if (epoll_ctl(w->loop->epfd, op, w->fd, &ev) < 0) {
		int err = errno;

		gw_err("loop", "epoll_ctl(%s, fd %d): %s", op == EPOLL_CTL_ADD ? "add" : "mod",
		       w->fd, strerror(err));
		return -err;
	}
	w->events = events;
	return 0;
}

void gw_watch_stop(struct gw_watch *w)
{
	if (!w->events)
		return;
	/* ENOENT/EBADF: the owner closed the fd first, which removed it from the set anyway. */
	if (epoll_ctl(w->loop->epfd, EPOLL_CTL_DEL, w->fd, NULL) < 0 && errno != ENOENT &&
	    errno != EBADF)
		gw_warn("loop", "epoll_ctl(del, fd %d): %s", w->fd, strerror(errno));
	w->events = 0;
	/* Its events still waiting in the batch being dispatched go: the owner may free w. */
	if (w->loop->batch)
		for (int i = w->loop->batch_i + 1; i < w->loop->batch_n; i++)
			if (w->loop->batch[i].data.ptr == w)
				w->loop->batch[i].data.ptr = NULL;
}

void gw_defer_init(struct gw_defer *d, void (*fn)(struct gw_defer *d))
{
	gw_list_init(&d->node);
	d->fn = fn;
	d->queued = false;
}

void gw_defer_queue(struct gw_loop *loop, struct gw_defer *d)
{
	if (d->queued)
		return;
	d->queued = true;
	gw_list_add_tail(&loop->deferred, &d->node);
}

void gw_defer_cancel(struct gw_defer *d)
{
	if (!d->queued)
		return;
	gw_list_del(&d->node);
	d->queued = false;
}

void gw_loop_close(struct gw_loop *loop, struct gw_close *c, void (*free_fn)(struct gw_close *c))
{
	c->free_fn = free_fn;
	gw_list_add_tail(&loop->closing, &c->node);
}

/* Timers */

static void gw_timer_ready(struct gw_watch *w, uint32_t events)
{
	struct gw_timer *t = gw_container_of(w, struct gw_timer, w);
	uint64_t expirations;

	(void)events;
	/* EAGAIN: re-armed or disarmed since the fd became readable; nothing is due. */
	if (read(w->fd, &expirations, sizeof(expirations)) != sizeof(expirations))
		return;
	t->fn(t);
}

int gw_timer_init(struct gw_timer *t, struct gw_loop *loop, void (*fn)(struct gw_timer *t))
{
	int fd, r;

	t->fn = fn;
	fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		gw_err("loop", "timerfd_create: %s", strerror(-r));
		gw_watch_init(&t->w, loop, -1, gw_timer_ready);
		return r;
	}
	gw_watch_init(&t->w, loop, fd, gw_timer_ready);
	r = gw_watch_set(&t->w, EPOLLIN);
	if (r < 0) {
		close(fd);
		t->w.fd = -1;
	}
	return r;
}

static void gw_ms_to_ts(uint64_t ms, struct timespec *ts)
{
	ts->tv_sec = (time_t)(ms / 1000);
	ts->tv_nsec = (long)(ms % 1000) * 1000000L;
}

int gw_timer_arm(struct gw_timer *t, uint64_t first_ms, uint64_t interval_ms)
{
	struct itimerspec its;

	memset(&its, 0, sizeof(its));
	if (first_ms) {
		gw_ms_to_ts(first_ms, &its.it_value);
		gw_ms_to_ts(interval_ms, &its.it_interval);
	}
	if (timerfd_settime(t->w.fd, 0, &its, NULL) < 0) {
		int err = errno;

		gw_err("loop", "timerfd_settime: %s", strerror(err));
		return -err;
	}
	return 0;
}

void gw_timer_disarm(struct gw_timer *t)
{
	if (t->w.fd >= 0)
		gw_timer_arm(t, 0, 0);
}

void gw_timer_fini(struct gw_timer *t)
{
	if (t->w.fd < 0)
		return;
	gw_watch_stop(&t->w);
	close(t->w.fd);
	t->w.fd = -1;
}

/* Cross-thread notification */

static void gw_notify_ready(struct gw_watch *w, uint32_t events)
{
	struct gw_notify *n = gw_container_of(w, struct gw_notify, w);
	uint64_t count;

	(void)events;
	/* Reading resets the counter, so any number of signals gives one call. */
	if (read(w->fd, &count, sizeof(count)) != sizeof(count))
		return;
	n->fn(n);
}

int gw_notify_init(struct gw_notify *n, struct gw_loop *loop, void (*fn)(struct gw_notify *n))
{
	int fd, r;

	n->fn = fn;
	fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		gw_err("loop", "eventfd: %s", strerror(-r));
		gw_watch_init(&n->w, loop, -1, gw_notify_ready);
		return r;
	}
	gw_watch_init(&n->w, loop, fd, gw_notify_ready);
	r = gw_watch_set(&n->w, EPOLLIN);
	if (r < 0) {
		close(fd);
		n->w.fd = -1;
	}
	return r;
}

void gw_notify_signal(struct gw_notify *n)
{
	uint64_t one = 1;
	int saved = errno;

	/* EAGAIN means the counter is saturated: a wake-up is pending anyway. Nothing here may
	 * log or allocate: this runs in worker threads and signal handlers. */
	if (write(n->w.fd, &one, sizeof(one)) < 0) {
		/* ignored, see above */
	}
	errno = saved;
}

void gw_notify_fini(struct gw_notify *n)
{
	if (n->w.fd < 0)
		return;
	gw_watch_stop(&n->w);
	close(n->w.fd);
	n->w.fd = -1;
}

/* Signals */

static void gw_signal_ready(struct gw_watch *w, uint32_t events)
{
	struct gw_signal *s = gw_container_of(w, struct gw_signal, w);
	struct signalfd_siginfo si;

	(void)events;
	while (w->events && read(w->fd, &si, sizeof(si)) == sizeof(si))
		s->fn(s, (int)si.ssi_signo);
}

int gw_signal_init(struct gw_signal *s, struct gw_loop *loop, const int *signals, int n,
		   void (*fn)(struct gw_signal *s, int signo))
{
	int fd, r, i;

	s->fn = fn;
	sigemptyset(&s->set);
	gw_watch_init(&s->w, loop, -1, gw_signal_ready);
	for (i = 0; i < n; i++) {
		if (sigaddset(&s->set, signals[i]) < 0) {
			gw_err("loop", "bad signal number %d", signals[i]);
			return -EINVAL;
		}
	}
	/* Blocked, or the default action would run before the signalfd could be read. */
	r = pthread_sigmask(SIG_BLOCK, &s->set, NULL);
	if (r) {
		gw_err("loop", "pthread_sigmask: %s", strerror(r));
		return -r;
	}
	fd = signalfd(-1, &s->set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		gw_err("loop", "signalfd: %s", strerror(-r));
		return r;
	}
	s->w.fd = fd;
	r = gw_watch_set(&s->w, EPOLLIN);
	if (r < 0) {
		close(fd);
		s->w.fd = -1;
	}
	return r;
}

void gw_signal_fini(struct gw_signal *s)
{
	/* The signals stay blocked: unblocking a pending SIGTERM at shutdown would kill us
	 * before main() returns its exit code. */
	if (s->w.fd < 0)
		return;
	gw_watch_stop(&s->w);
	close(s->w.fd);
	s->w.fd = -1;
}
