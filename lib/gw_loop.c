// SPDX-License-Identifier: MIT
/*
 * The epoll loop. One iteration: run deferred work, wait (not at all if more work was queued),
 * dispatch a batch of events, then free what was closed during the batch. Watchers stopped
 * during a batch are skipped for the rest of it, and nothing closed is freed until the batch is
 * over, so a callback may tear down any object, including ones with events still pending.
 */
#include <errno.h>
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
	memset(loop, 0, sizeof(*loop));
	gw_list_init(&loop->deferred);
	gw_list_init(&loop->closing);
	loop->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (loop->epfd < 0) {
		int err = errno;

		gw_err("loop", "epoll_create1: %s", strerror(err));
		return -err;
	}
	loop->now_ms = gw_now_ms();
	return 0;
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

void gw_loop_fini(struct gw_loop *loop)
{
	int rounds = 0;

	if (loop->epfd < 0)
		return;
	while ((!gw_list_empty(&loop->deferred) || !gw_list_empty(&loop->closing)) &&
	       rounds++ < 1000) {
		gw_loop_run_deferred(loop);
		gw_loop_free_closed(loop);
	}
	if (!gw_list_empty(&loop->deferred))
		gw_warn("loop", "deferred work still requeueing itself at shutdown");
	close(loop->epfd);
	loop->epfd = -1;
}

int gw_loop_run_once(struct gw_loop *loop, int timeout_ms)
{
	struct epoll_event ev[GW_LOOP_BATCH], *outer;
	int n, i, outer_i, outer_n;

	gw_loop_run_deferred(loop);
	if (!gw_list_empty(&loop->deferred) || !gw_list_empty(&loop->closing) || loop->stopping)
		timeout_ms = 0;
	n = epoll_wait(loop->epfd, ev, GW_LOOP_BATCH, timeout_ms);
	if (n < 0) {
		int err = errno;

		if (err != EINTR) {
			gw_err("loop", "epoll_wait: %s", strerror(err));
			return -err;
		}
		n = 0;
	}
	loop->now_ms = gw_now_ms();
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
