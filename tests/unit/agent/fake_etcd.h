/* SPDX-License-Identifier: MIT */
/*
 * A fake etcd endpoint for the agent's unit tests: a listening socket on loopback served from
 * the test's own loop (the client under test runs in the same loop, so nothing blocks). Every
 * request is read whole (headers and Content-Length body), its body kept as the last one, and
 * answered with one canned HTTP answer; a test may leave requests unanswered (the connection
 * stays open, as a stalled etcd does) and change the answer between calls.
 *
 * Linked into every agent unit binary (the helpers of tests/unit/agent/ are).
 */
#ifndef FAKE_ETCD_H
#define FAKE_ETCD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "gw_loop.h"

#define FAKE_ETCD_CONNS 8

struct fake_etcd {
	struct gw_watch w;
	int lfd, port;
	const char *reply;		/* the whole HTTP answer, NULL: silent */
	char replybuf[4096];
	int silent_first;		/* this many more requests are never answered */
	struct fake_etcd_conn {
		struct gw_watch w;
		struct fake_etcd *f;
		char buf[16384];
		size_t len;
		bool on;
	} c[FAKE_ETCD_CONNS];
	int served;			/* requests read whole */
	json_t *last;			/* the last request's body */
};

/* A loopback port; fd_out NULL: nothing listens there (connections are refused). */
int fake_etcd_port(int *fd_out);
/* Listens on a new port in loop; body: what every request is answered (200, JSON), NULL:
 * nothing. */
void fake_etcd_start(struct fake_etcd *f, struct gw_loop *loop, const char *body);
/* From now on requests are answered body (200, JSON), NULL: nothing. */
void fake_etcd_reply(struct fake_etcd *f, const char *body);
/* A whole raw HTTP answer (kept by reference), for status lines and bodies that are not etcd's. */
void fake_etcd_reply_raw(struct fake_etcd *f, const char *http);
void fake_etcd_stop(struct fake_etcd *f);

#endif
