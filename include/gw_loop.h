/* SPDX-License-Identifier: MIT */
/*
 * The event loop: one epoll set per thread. Objects that own a file descriptor embed a
 * struct gw_watch and get it back in the callback (epoll_data.ptr points at it). Timers are
 * timerfds, cross-thread wake-ups are eventfds, signals are a signalfd, all watched the same way.
 * Deferred work runs before the loop sleeps. Objects are closed in two phases: gw_loop_close()
 * marks them, and they are freed only once the current batch of events has been dispatched, so
 * a later event in the same batch never touches freed memory.
 *
 * Several loops (issue 13, docs/ARCHITECTURE.md "Several event loops"): a loop may run on a
 * thread of its own, pinned to a CPU (gw_loop_thread_start), and any thread may post it a
 * message (gw_loop_post, gw_loop_send) that runs on the loop's thread. Everything else here is
 * for the loop's own thread only.
 */
#ifndef GW_LOOP_H
#define GW_LOOP_H

#include <pthread.h>
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

/* A message: embedded in the object it concerns (no allocation), posted to a loop from any
 * thread; fn(m) runs on that loop's thread. One post at a time: the message may be posted again
 * once its fn has begun (from inside fn, say), not before. */
struct gw_msg {
	struct gw_msg *next;
	void (*fn)(struct gw_msg *m);
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
	/* Messages from any thread: a lock-free list, newest first (atomic), and the eventfd that
	 * wakes the loop when the list stops being empty while the loop sleeps (or may). */
	struct gw_msg *msg_head;
	int msg_sleeping;		/* atomic: in, or about to enter, epoll_wait */
	struct gw_watch msg_w;
	uint64_t msg_runs;		/* messages run (the loop's thread) */
	uint64_t msg_wakeups;		/* eventfd writes by posters (atomic) */
	/* Busy polling (gw_loop_set_poll): before sleeping the loop checks its fds and messages
	 * for up to poll_max_ns, yielding the CPU between checks, while most of its recent waits
	 * were that short (poll_hist). Written by its thread; the counters are read by others
	 * (atomic, relaxed). */
	uint64_t poll_max_ns;		/* 0: never polls */
	uint8_t poll_hist;		/* the last 8 waits, newest in bit 0: 1 = short */
	uint8_t poll_skips;		/* waits not polled since the last poll */
	uint64_t polls;			/* polls started */
	uint64_t poll_hits;		/* ... that found work: a sleep and wake-up saved */
	uint64_t sleeps;		/* waits in epoll_wait with a timeout */
	/* The loop's own thread, when gw_loop_thread_start gave it one. */
	pthread_t thread;
	bool has_thread;
	int thread_rc;
	struct gw_msg stop_msg;
};

int gw_loop_init(struct gw_loop *loop);
/* Runs what is posted, deferred or closing until nothing is (at most 1000 rounds), on the
 * calling thread, which must own the loop (its own thread, or any once the loop's thread has
 * stopped); the loop stays open. True if anything ran. For shutdown: the loops' last
 * messages to each other run before the objects they name are freed. */
bool gw_loop_drain(struct gw_loop *loop);
/* Runs what is still posted, deferred or closing (on the calling thread, which owns the loop
 * from then on: never while the loop's thread runs), then closes the epoll fd; a post that
 * begins after it fails with -ESHUTDOWN. Posts still under way in other threads when it is
 * called are a bug of the caller's, as for any object being finished. */
void gw_loop_fini(struct gw_loop *loop);
/* Dispatches until gw_loop_stop(); returns the code given to it. */
int gw_loop_run(struct gw_loop *loop);
/* One iteration: deferred work, one epoll_wait of at most timeout_ms (-1: forever), dispatch,
 * then frees closed objects. Returns the number of events dispatched or -errno. */
int gw_loop_run_once(struct gw_loop *loop, int timeout_ms);
/*
 * Busy polling before sleeping, for at most poll_us microseconds (0: never, the default). It is
 * adaptive: the loop polls only while at least GW_POLL_SHORT_MIN of its last 8 waits for work
 * ended within poll_us, so a busy loop trades a sleep and a wake-up for a few epoll_wait(0)
 * calls, and a loop whose waits are mostly longer (idle, or waiting on a disk or a back end)
 * sleeps at once. Between checks it yields the CPU, so a thread runnable on the same CPU (a
 * client, a worker) runs instead of the spin. Before the loop's thread starts, or on it.
 */
void gw_loop_set_poll(struct gw_loop *loop, unsigned poll_us);
#define GW_POLL_SHORT_MIN 6
/* A loop that does not poll still polls every GW_POLL_PROBE-th wait: a sleep's length includes
 * its wake-up, so sleeps alone may never look short enough to start polling again. */
#define GW_POLL_PROBE 8
/* From the loop's thread (another thread: gw_loop_thread_stop, or a message that calls it). */
void gw_loop_stop(struct gw_loop *loop, int exit_code);

/* The loop whose callback, deferred work or message this thread is running (NULL outside any):
 * the owner of an object is the current loop, so a direct call may replace a message. */
struct gw_loop *gw_loop_current(void);

/*
 * Messages. From any thread, the loop's own included. 0: m->fn(m) runs exactly once, later,
 * never inside the call, on the loop's thread (or in gw_loop_fini, see there); -ESHUTDOWN (the
 * loop was finished): it never runs. Messages from one thread run in the order it posted them;
 * a message posted by the loop to itself runs in the next round, so it cannot starve the fds.
 * A burst costs one eventfd write, and none while the loop is awake.
 */
int gw_loop_post(struct gw_loop *loop, struct gw_msg *m);
/* The same for fn(arg), allocating the message: -ENOMEM too. */
int gw_loop_send(struct gw_loop *loop, void (*fn)(void *arg), void *arg);

/*
 * The synchronous call, for configuration and state only (never on the I/O path): runs fn(arg)
 * on the loop's thread and waits for it, returning what fn returned (-ESHUTDOWN: the loop was
 * finished, fn never ran). Directly, in the caller, when the loop is the current loop or has no
 * thread of its own. Only loop 0's thread (the control socket, apply, start-up and shutdown)
 * may call it, and fn must not call it: no loop but loop 0 ever waits for another, so waits
 * cannot form a cycle.
 */
int gw_loop_call(struct gw_loop *loop, int (*fn)(void *arg), void *arg);

/*
 * The gateway's loops (gateway.loops): loop 0 is the main thread's. load[i] counts what was
 * placed on loop i (connections): read without a lock, so a stale read only makes the balance
 * slightly worse.
 */
#define GW_LOOPS_MAX 16

struct gw_loops {
	unsigned n;
	struct gw_loop *loop[GW_LOOPS_MAX];
	unsigned load[GW_LOOPS_MAX];	/* atomic */
	/* Logical units owned, and picked for an LU not added yet, across every device (the
	 * SCSI core's, on loop 0 only): the LUs of many targets spread as one set. */
	unsigned lus[GW_LOOPS_MAX];
	unsigned lus_picked[GW_LOOPS_MAX];
};

/* The least loaded loop's index (the lowest among equals); 0 for a set of one. */
unsigned gw_loops_pick(const struct gw_loops *set);
/* Counts delta more (or fewer) connections on loop i; any thread. */
void gw_loops_load_add(struct gw_loops *set, unsigned i, int delta);
/* The index of loop in the set, -1 if it is not one of them. */
int gw_loops_index(const struct gw_loops *set, const struct gw_loop *loop);

/*
 * The loop on a thread of its own, pinned to cpu (-1: not pinned), named name (for top and
 * perf; NULL: none). Start it after gw_signal_init, so it inherits the blocked signals. 0 or
 * -errno (-EINVAL: cpu is not one this process may run on).
 */
int gw_loop_thread_start(struct gw_loop *loop, int cpu, const char *name);
/* Stops the loop's thread and joins it: every message posted before the call has run when it
 * returns. Returns the loop's exit code (gw_loop_stop's, 0 for this stop); -ESRCH without a
 * thread. Messages posted after it, and what is still deferred, are run by gw_loop_fini: no
 * message is dropped (only messages that keep re-posting themselves for 1000 rounds are, with
 * a warning). A loop whose thread ended by itself (gw_loop_stop in a callback) is finished with
 * gw_loop_fini before it gets a thread again. */
int gw_loop_thread_stop(struct gw_loop *loop);

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
