/* SPDX-License-Identifier: MIT */
/*
 * The event loop: one epoll set per thread. Objects that own a file descriptor embed a
 * struct gw_watch and get it back in the callback (epoll_data.ptr points at it). Timers are
 * timerfds, cross-thread wake-ups are eventfds, signals are a signalfd, all watched the same way.
 * Deferred work runs before the loop sleeps. Objects are closed in two phases: gw_loop_close()
 * marks them, and they are freed only once the current batch of events has been dispatched, so
 * a later event in the same batch never touches freed memory.
 */
#ifndef GW_LOOP_H
#define GW_LOOP_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "gw_list.h"

struct gw_loop;
struct gw_watch;

typedef void (*gw_watch_fn)(struct gw_watch *w, uint32_t events);

struct gw_watch {
	struct gw_loop *loop;
	int fd;
	uint32_t events;	/* EPOLLIN | EPOLLOUT | ... currently registered, 0 if none */
	gw_watch_fn fn;
};

struct gw_defer {
	struct gw_list node;
	void (*fn)(struct gw_defer *d);
	bool queued;
};

struct gw_close {
	struct gw_list node;
	void (*free_fn)(struct gw_close *c);
};

struct gw_loop {
	int epfd;
	bool stopping;
	int exit_code;
	struct gw_list deferred;
	struct gw_list closing;
	uint64_t now_ms;	/* monotonic, refreshed each iteration */
	/* The epoll batch being dispatched: a watch stopped in it has its later events dropped
	 * there, so its owner may free it at once (a portal removed by an apply, say). */
	struct epoll_event *batch;
	int batch_i, batch_n;
};

int gw_loop_init(struct gw_loop *loop);
/* Runs what is still deferred or closing, then closes the epoll fd. */
void gw_loop_fini(struct gw_loop *loop);
/* Dispatches until gw_loop_stop(); returns the code given to it. */
int gw_loop_run(struct gw_loop *loop);
/* One iteration: deferred work, one epoll_wait of at most timeout_ms (-1: forever), dispatch,
 * then frees closed objects. Returns the number of events dispatched or -errno. */
int gw_loop_run_once(struct gw_loop *loop, int timeout_ms);
void gw_loop_stop(struct gw_loop *loop, int exit_code);

uint64_t gw_now_ms(void);
uint64_t gw_now_ns(void);

/* fd watchers. The loop never closes the fd: its owner does, after gw_watch_stop(). */
void gw_watch_init(struct gw_watch *w, struct gw_loop *loop, int fd, gw_watch_fn fn);
/* Registers or changes the event mask; events == 0 is the same as gw_watch_stop(). */
int gw_watch_set(struct gw_watch *w, uint32_t events);
void gw_watch_stop(struct gw_watch *w);

/* Deferred work: runs once, on the loop thread, before the loop next sleeps. */
void gw_defer_init(struct gw_defer *d, void (*fn)(struct gw_defer *d));
void gw_defer_queue(struct gw_loop *loop, struct gw_defer *d);
void gw_defer_cancel(struct gw_defer *d);

/* Two-phase close: free_fn(c) runs after the current dispatch round. */
void gw_loop_close(struct gw_loop *loop, struct gw_close *c, void (*free_fn)(struct gw_close *c));

/* Timers on CLOCK_MONOTONIC. */
struct gw_timer {
	struct gw_watch w;
	void (*fn)(struct gw_timer *t);
};

int gw_timer_init(struct gw_timer *t, struct gw_loop *loop, void (*fn)(struct gw_timer *t));
/* First expiry after first_ms (0 disarms), then every interval_ms (0: one-shot). */
int gw_timer_arm(struct gw_timer *t, uint64_t first_ms, uint64_t interval_ms);
void gw_timer_disarm(struct gw_timer *t);
void gw_timer_fini(struct gw_timer *t);

/* Wake-ups from other threads (backstore workers): gw_notify_signal() is async-signal and
 * thread safe; fn runs on the loop thread, once for any number of signals since the last run. */
struct gw_notify {
	struct gw_watch w;
	void (*fn)(struct gw_notify *n);
};

int gw_notify_init(struct gw_notify *n, struct gw_loop *loop, void (*fn)(struct gw_notify *n));
void gw_notify_signal(struct gw_notify *n);
void gw_notify_fini(struct gw_notify *n);

/* Signals through a signalfd; the signals in `set` are blocked in the calling thread. */
struct gw_signal {
	struct gw_watch w;
	sigset_t set;
	void (*fn)(struct gw_signal *s, int signo);
};

int gw_signal_init(struct gw_signal *s, struct gw_loop *loop, const int *signals, int n,
		   void (*fn)(struct gw_signal *s, int signo));
void gw_signal_fini(struct gw_signal *s);

#endif
