// SPDX-License-Identifier: MIT
/*
 * Name lookups off the event loop (gw_resolve.h). One queue of lookups per process, each
 * lookup a (host, port) with the requests waiting for it; up to GW_RESOLVE_THREADS detached
 * threads take lookups off the queue, run getaddrinfo and post the answer to each waiting
 * request's loop. Threads rather than glibc's getaddrinfo_a: that starts a thread per request
 * with no bound of ours, cannot share one lookup between requests, and signals completion by a
 * signal or a thread of its own, which would still have to reach the loop; here the queue, the
 * dedupe and the cap are a few lines under one mutex, and the answer is an ordinary loop message.
 *
 * The process-wide state below is the one mutable global outside main.c: a resolver per
 * process is the point (one bound on stuck lookups for every loop), and its threads outlive
 * anything that could own it. A lookup that has run GW_RESOLVE_STUCK_MS no longer counts
 * against GW_RESOLVE_THREADS (rs_thread_more): a dead DNS server holding every thread would
 * otherwise hold up the names behind it, a host in /etc/hosts included.
 *
 * A request's life: queued on its lookup (lk set) until the lookup ends; then "posted" (its
 * message on the loop's list; only the message frees it, or the thread if the post fails).
 * gw_resolve_cancel before the post unlinks and frees it; after, it only marks it cancelled,
 * and the message frees it without calling back. Cancel and the message both run on the
 * loop's thread, so "fn never runs after cancel returns" needs no more than the mutex.
 */
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_list.h"
#include "gw_log.h"
#include "gw_loop.h"
#include "gw_resolve.h"

struct rs_lookup {
	struct gw_list node;		/* rs.queue or rs.running */
	struct gw_list waiters;		/* struct gw_resolve */
	char *host, *port;
	bool running;
	uint64_t started_ms;		/* when a thread took it (gw_now_ms) */
};

struct gw_resolve {
	struct gw_msg msg;
	struct gw_list node;		/* its lookup's waiters */
	struct rs_lookup *lk;		/* NULL once posted */
	struct gw_loop *loop;
	gw_resolve_fn fn;
	void *arg;
	bool posted;
	bool cancelled;
	int err;
	struct gw_addr addr;
};

typedef int (*rs_gai_fn)(const char *host, const char *port, const struct addrinfo *hints,
			 struct addrinfo **res);

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool ready;
	struct gw_list queue;		/* struct rs_lookup, not started */
	struct gw_list running;
	unsigned nqueued, idle, threads, pending;
	unsigned long lookups, joined, refused;
	rs_gai_fn gai;			/* getaddrinfo; a unit test's fake */
} rs = {
	.mu = PTHREAD_MUTEX_INITIALIZER,
	.cv = PTHREAD_COND_INITIALIZER,
	.gai = getaddrinfo,
};

static void rs_lookup_free(struct rs_lookup *lk)
{
	free(lk->host);
	free(lk->port);
	free(lk);
}

static int rs_err(int gai)
{
	switch (gai) {
	case 0:
		return 0;
	case EAI_NONAME:
#ifdef EAI_NODATA
	case EAI_NODATA:
#endif
#ifdef EAI_ADDRFAMILY
	case EAI_ADDRFAMILY:
#endif
		return -ENOENT;
	case EAI_AGAIN:
		return -EAGAIN;
	case EAI_MEMORY:
		return -ENOMEM;
	default:
		return -EIO;
	}
}

const char *gw_resolve_strerror(int err)
{
	switch (err) {
	case 0:
		return "resolved";
	case -ENOENT:
		return "no such name";
	case -EAGAIN:
		return "no answer from the DNS server (temporary failure in name resolution)";
	case -ENOMEM:
		return "out of memory";
	default:
		return "name resolution failed";
	}
}

static void rs_copy(struct gw_addr *out, const struct addrinfo *ai)
{
	memset(out, 0, sizeof(*out));
	memcpy(&out->ss, ai->ai_addr, ai->ai_addrlen);
	out->len = ai->ai_addrlen;
}

int gw_resolve_numeric(const char *host, const char *port, struct gw_addr *out)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV }, *ai;

	if (!host || !*host || !port || !*port)
		return -EINVAL;
	if (getaddrinfo(host, port, &hints, &ai) != 0)
		return -EINVAL;
	rs_copy(out, ai);
	freeaddrinfo(ai);
	return 0;
}

char *gw_addr_str(const struct gw_addr *a, char *buf, size_t len)
{
	char h[NI_MAXHOST], s[NI_MAXSERV];

	if (getnameinfo((const struct sockaddr *)&a->ss, a->len, h, sizeof(h), s, sizeof(s),
			NI_NUMERICHOST | NI_NUMERICSERV) != 0)
		snprintf(buf, len, "?");
	else if (a->ss.ss_family == AF_INET6)
		snprintf(buf, len, "[%s]:%s", h, s);
	else
		snprintf(buf, len, "%s:%s", h, s);
	return buf;
}

static void rs_msg_fn(struct gw_msg *m)
{
	struct gw_resolve *r = gw_container_of(m, struct gw_resolve, msg);
	bool cancelled;

	pthread_mutex_lock(&rs.mu);
	cancelled = r->cancelled;
	pthread_mutex_unlock(&rs.mu);
	if (!cancelled)
		r->fn(r->arg, r->err, r->err ? NULL : &r->addr);
	free(r);
}

static void *rs_thread(void *unused)
{
	(void)unused;
	pthread_mutex_lock(&rs.mu);
	for (;;) {
		struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
		struct addrinfo *ai = NULL;
		struct gw_list done;
		struct gw_resolve *r, *t;
		struct rs_lookup *lk;
		struct gw_addr addr = { .len = 0 };
		int err;

		while (gw_list_empty(&rs.queue)) {
			rs.idle++;
			pthread_cond_wait(&rs.cv, &rs.mu);
			rs.idle--;
		}
		lk = gw_list_first_entry(&rs.queue, struct rs_lookup, node);
		gw_list_del(&lk->node);
		rs.nqueued--;
		gw_list_add_tail(&rs.running, &lk->node);
		lk->running = true;
		lk->started_ms = gw_now_ms();
		rs.lookups++;
		pthread_mutex_unlock(&rs.mu);

		err = rs_err(rs.gai(lk->host, lk->port, &hints, &ai));
		if (!err && ai)
			rs_copy(&addr, ai);
		else if (!err)
			err = -ENOENT;
		if (ai)
			freeaddrinfo(ai);

		pthread_mutex_lock(&rs.mu);
		gw_list_del(&lk->node);
		rs.pending--;
		gw_list_init(&done);
		gw_list_for_each_entry_safe(r, t, &lk->waiters, node) {
			gw_list_del(&r->node);
			r->lk = NULL;
			r->posted = true;
			r->err = err;
			r->addr = addr;
			gw_list_add_tail(&done, &r->node);
		}
		pthread_mutex_unlock(&rs.mu);
		rs_lookup_free(lk);
		/* Once posted, a request belongs to its message: next is read first. */
		gw_list_for_each_entry_safe(r, t, &done, node) {
			r->msg.fn = rs_msg_fn;
			if (gw_loop_post(r->loop, &r->msg) < 0)
				free(r);	/* the loop is gone, and its owner with it */
		}
		pthread_mutex_lock(&rs.mu);
	}
	return NULL;
}

/* Under rs.mu: threads held by lookups that have run GW_RESOLVE_STUCK_MS or longer. */
static unsigned rs_stuck(void)
{
	uint64_t now = gw_now_ms();
	const struct rs_lookup *lk;
	unsigned n = 0;

	gw_list_for_each_entry(lk, &rs.running, node)
		if (now - lk->started_ms >= GW_RESOLVE_STUCK_MS)
			n++;
	return n;
}

/*
 * Under rs.mu: one more thread if lookups wait for one and none is idle, while fewer than
 * GW_RESOLVE_THREADS threads are busy with lookups that still look like answering. A thread
 * stuck in a lookup (a DNS server that does not answer holds it for up to a minute) does not
 * count, so names behind it go on being looked up, up to GW_RESOLVE_THREADS_MAX threads.
 */
static int rs_thread_more(void)
{
	pthread_attr_t attr;
	pthread_t tid;
	sigset_t all, old;
	int rc;

	if (rs.nqueued <= rs.idle || rs.threads >= GW_RESOLVE_THREADS_MAX ||
	    rs.threads - rs_stuck() >= GW_RESOLVE_THREADS)
		return 0;
	/* The resolver takes no signal: they are the loops' (signalfd) business. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&tid, &attr, rs_thread, NULL);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0)
		return -rc;
	pthread_setname_np(tid, "gw-resolve");
	rs.threads++;
	return 0;
}

int gw_resolve_start(struct gw_loop *loop, const char *host, const char *port, gw_resolve_fn fn,
		     void *arg, struct gw_addr *out, struct gw_resolve **req)
{
	struct rs_lookup *lk = NULL, *it;
	struct gw_resolve *r;
	int rc;

	if (!host || !*host || !port || !*port || strlen(host) >= NI_MAXHOST)
		return -EINVAL;
	if (gw_resolve_numeric(host, port, out) == 0)
		return 1;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->loop = loop;
	r->fn = fn;
	r->arg = arg;
	pthread_mutex_lock(&rs.mu);
	if (!rs.ready) {
		gw_list_init(&rs.queue);
		gw_list_init(&rs.running);
		rs.ready = true;
	}
	gw_list_for_each_entry(it, &rs.queue, node)
		if (!strcmp(it->host, host) && !strcmp(it->port, port))
			lk = it;
	if (!lk)
		gw_list_for_each_entry(it, &rs.running, node)
			if (!strcmp(it->host, host) && !strcmp(it->port, port))
				lk = it;
	if (lk) {
		rs.joined++;
		/* A name still queued behind stuck lookups may get a thread of its own now. */
		if (!lk->running && rs_thread_more() == 0)
			pthread_cond_signal(&rs.cv);
	} else {
		rc = -EAGAIN;
		if (rs.pending >= GW_RESOLVE_MAX_PENDING) {
			rs.refused++;
			goto fail;
		}
		rc = -ENOMEM;
		lk = calloc(1, sizeof(*lk));
		if (!lk)
			goto fail;
		lk->host = strdup(host);
		lk->port = strdup(port);
		if (!lk->host || !lk->port) {
			rs_lookup_free(lk);
			goto fail;
		}
		gw_list_init(&lk->waiters);
		gw_list_add_tail(&rs.queue, &lk->node);
		rs.nqueued++;
		rs.pending++;
		rc = rs_thread_more();
		if (rc < 0 && rs.threads == 0) {
			gw_list_del(&lk->node);
			rs.nqueued--;
			rs.pending--;
			rs_lookup_free(lk);
			goto fail;
		}
		pthread_cond_signal(&rs.cv);
	}
	r->lk = lk;
	gw_list_add_tail(&lk->waiters, &r->node);
	pthread_mutex_unlock(&rs.mu);
	*req = r;
	return 0;
fail:
	pthread_mutex_unlock(&rs.mu);
	free(r);
	return rc;
}

void gw_resolve_cancel(struct gw_resolve *r)
{
	struct rs_lookup *lk;

	if (!r)
		return;
	pthread_mutex_lock(&rs.mu);
	if (r->posted) {
		r->cancelled = true;	/* its message frees it, calling nothing */
		pthread_mutex_unlock(&rs.mu);
		return;
	}
	lk = r->lk;
	gw_list_del(&r->node);
	if (gw_list_empty(&lk->waiters) && !lk->running) {
		gw_list_del(&lk->node);
		rs.nqueued--;
		rs.pending--;
		rs_lookup_free(lk);
	}
	pthread_mutex_unlock(&rs.mu);
	free(r);
}

void gw_resolve_stats(struct gw_resolve_stats *st)
{
	pthread_mutex_lock(&rs.mu);
	st->lookups = rs.lookups;
	st->joined = rs.joined;
	st->refused = rs.refused;
	st->threads = rs.threads;
	st->pending = rs.pending;
	pthread_mutex_unlock(&rs.mu);
}
