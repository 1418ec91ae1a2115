/* SPDX-License-Identifier: MIT */
/*
 * Name lookups off the event loop. getaddrinfo() of a DNS name blocks for as long as the DNS
 * server takes to answer or not (resolv.conf: timeout x attempts x servers, seconds to a
 * minute): on a loop it would stall every session and LU on it. So a name is looked up by the
 * process's resolver threads (at most GW_RESOLVE_THREADS, started on demand, kept for the
 * process's life) and the answer comes back as a message (gw_loop_post) on the requesting
 * loop's thread. A numeric address never goes to a thread: gw_resolve_start answers it at once.
 *
 * Bounded: requests for the same host and port wait for one lookup (a path that keeps retrying
 * a dead name joins the lookup still running rather than queueing another), a lookup stuck on a
 * dead DNS server does not hold up other names (GW_RESOLVE_STUCK_MS), and at most
 * GW_RESOLVE_MAX_PENDING different names wait or run at a time; a request beyond that is
 * refused with -EAGAIN. How long the caller waits is the caller's bound: it cancels the request
 * when its own deadline passes. Nothing waits for a thread stuck in getaddrinfo: the threads are
 * detached and end with the process.
 *
 * docs/ARCHITECTURE.md, "Name lookups".
 */
#ifndef GW_RESOLVE_H
#define GW_RESOLVE_H

#include <stddef.h>
#include <sys/socket.h>

struct gw_loop;
struct gw_resolve;

/* Threads busy with lookups that may still answer; one running GW_RESOLVE_STUCK_MS or longer
 * no longer counts, and another thread takes the names waiting behind it, up to
 * GW_RESOLVE_THREADS_MAX threads in all. */
#define GW_RESOLVE_THREADS 4
#define GW_RESOLVE_STUCK_MS 1000
#define GW_RESOLVE_THREADS_MAX 16
#define GW_RESOLVE_MAX_PENDING 64

/* One address, as connect() takes it. */
struct gw_addr {
	struct sockaddr_storage ss;
	socklen_t len;
};

/* err 0: a is the first address of the answer (getaddrinfo's order); -ENOENT: no such name;
 * -EAGAIN: no answer (the DNS server did not reply, or said "try again"); -EIO otherwise
 * (gw_resolve_strerror says which). The request is over when fn runs: it is freed after fn
 * returns and must not be cancelled from fn. */
typedef void (*gw_resolve_fn)(void *arg, int err, const struct gw_addr *a);

/*
 * Looks up host (a name, or a numeric IPv4/IPv6 address without brackets) and the numeric
 * port, for a TCP connection. From loop's thread.
 *   1: host was numeric: *out is filled, nothing was started, fn never runs.
 *   0: a lookup is under way: *req is set; fn(arg, ...) runs once, later, on loop's thread,
 *      unless gw_resolve_cancel(*req) comes first.
 *   < 0: -EINVAL (empty or malformed host or port), -EAGAIN (GW_RESOLVE_MAX_PENDING names
 *      already waiting), -ENOMEM; fn never runs.
 */
int gw_resolve_start(struct gw_loop *loop, const char *host, const char *port, gw_resolve_fn fn,
		     void *arg, struct gw_addr *out, struct gw_resolve **req);
/* Ends a request that has not called back yet, from the loop's thread: when it returns, fn will
 * never run and req is freed (a lookup still running goes on for the others waiting on it, or
 * for nobody, and its answer is dropped). */
void gw_resolve_cancel(struct gw_resolve *req);

/* The numeric form only, never a lookup: 0 and *out, or -EINVAL (host is a name). */
int gw_resolve_numeric(const char *host, const char *port, struct gw_addr *out);
/* "192.0.2.1:3260" or "[2001:db8::1]:3260" into buf; buf. */
char *gw_addr_str(const struct gw_addr *a, char *buf, size_t len);
/* What an err of gw_resolve_fn means, for a log line. */
const char *gw_resolve_strerror(int err);

/* Counters, for tests and state: lookups run by the threads, requests that joined a running
 * or queued lookup, requests refused for the cap, threads started. */
struct gw_resolve_stats {
	unsigned long lookups;
	unsigned long joined;
	unsigned long refused;
	unsigned threads;
	unsigned pending;	/* names waiting or being looked up now */
};
void gw_resolve_stats(struct gw_resolve_stats *st);

#endif
