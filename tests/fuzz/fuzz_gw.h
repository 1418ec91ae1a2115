/* SPDX-License-Identifier: MIT */
/*
 * Shared by the fuzzers that talk to a whole gateway: the process moves into a network namespace
 * of its own (when it may: root), so portals a fuzzed configuration opens and the ports the
 * harness listens on touch nothing else on the machine; a gateway is built in-process from a
 * JSON configuration exactly as isergwd builds it (conf_parse, ctl_gw_create,
 * ctl_gw_listen), and a loopback TCP client talks to its portal while the harness runs the loop.
 * Header-only: each harness is one translation unit.
 */
#ifndef FUZZ_GW_H
#define FUZZ_GW_H

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conf.h"
#include "ctl.h"
#include "gw_buf.h"
#include "gw_log.h"
#include "gw_loop.h"
#include "isc.h"

struct fgw {
	struct gw_loop loop;
	struct ctl_gw *gw;
	int fd;			/* the client's socket, -1 when closed */
	uint16_t port;
};

/* Once per process: a private network namespace with loopback up (root only; else the host's). */
static bool fgw_own_netns;

static inline void fgw_netns(void)
{
	static int done;
	struct ifreq ifr = { 0 };
	int s;

	if (done)
		return;
	done = 1;
	if (unshare(CLONE_NEWNET) < 0) {
		fprintf(stderr, "fuzz: no network namespace of its own (%s): using the host's\n",
			strerror(errno));
		return;
	}
	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		abort();
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		abort();
	close(s);
	fgw_own_netns = true;
}

/* The portal's port: 3260 in a namespace of our own (nothing else there, and the same port for
 * every input: no race with the last input's connections); else a loopback port nobody holds. */
static inline uint16_t fgw_free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd;

	fgw_netns();
	if (fgw_own_netns)
		return 3260;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0)
		abort();
	close(fd);
	return ntohs(a.sin_port);
}

/* Builds and starts the gateway of configuration `conf`, whose portal listens on port (from
 * fgw_free_port). */
static inline void fgw_start(struct fgw *f, const char *conf, uint16_t port)
{
	struct ctl_config cfg;
	struct gw_errlist errs;
	json_error_t jerr;
	json_t *root;
	int r;

	memset(f, 0, sizeof(*f));
	f->fd = -1;
	f->port = port;
	gw_log_set_level(GW_LOG_ERR - 1);
	root = json_loads(conf, 0, &jerr);
	if (!root) {
		fprintf(stderr, "fuzz: bad configuration: %s\n", jerr.text);
		abort();
	}
	gw_errlist_init(&errs);
	if (conf_parse(root, &cfg, &errs)) {
		fprintf(stderr, "fuzz: configuration refused: %s\n", gw_errlist_join(&errs));
		abort();
	}
	json_decref(root);
	if (gw_loop_init(&f->loop) || ctl_gw_create(&f->loop, cfg.isc, &f->gw, &errs))
		abort();
	r = ctl_gw_listen(f->gw);
	if (r) {
		fprintf(stderr, "fuzz: the portal cannot listen on port %u: %s\n", port,
			strerror(-r));
		abort();
	}
	cfg.isc = NULL;
	conf_free(&cfg);
	gw_errlist_fini(&errs);
}

/* Runs the loop without sleeping (nothing here waits on a timer). */
static inline void fgw_spin(struct fgw *f, int rounds)
{
	for (int i = 0; i < rounds; i++)
		gw_loop_run_once(&f->loop, 0);
}

/* Connects the client and lets the gateway accept it. The connect does not block: the server
 * runs on this thread, so a connect that had to wait (a SYN handled late on a loaded machine,
 * a full backlog) would wait for nobody, and libFuzzer's SIGALRM would end it with EINTR. The
 * loop runs while the connection completes, for at most about 10 s. */
static inline void fgw_connect(struct fgw *f)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				 .sin_port = htons(f->port) };
	int one = 1, err = 0;
	socklen_t el = sizeof(err);

	f->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (f->fd < 0 || (connect(f->fd, (struct sockaddr *)&a, sizeof(a)) < 0 &&
			  errno != EINPROGRESS && errno != EINTR)) {
		fprintf(stderr, "fuzz: cannot connect to the portal: %s\n", strerror(errno));
		abort();
	}
	for (int i = 0;; i++) {
		struct pollfd p = { .fd = f->fd, .events = POLLOUT };

		if (poll(&p, 1, 0) > 0)
			break;
		if (i == 10000) {
			fprintf(stderr, "fuzz: the connection to the portal did not complete\n");
			abort();
		}
		gw_loop_run_once(&f->loop, 1);
	}
	if (getsockopt(f->fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err) {
		fprintf(stderr, "fuzz: cannot connect to the portal: %s\n", strerror(err ? err : errno));
		abort();
	}
	setsockopt(f->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	fgw_spin(f, 4);
}

/* Reads what the gateway sent into out (NULL: discard). false once the gateway closed. */
static inline bool fgw_drain(struct fgw *f, struct gw_buf *out)
{
	uint8_t buf[65536];
	ssize_t n;

	if (f->fd < 0)
		return false;
	for (;;) {
		n = recv(f->fd, buf, sizeof(buf), 0);
		if (n > 0) {
			if (out)
				gw_buf_append(out, buf, (size_t)n);
			continue;
		}
		return !(n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR));
	}
}

/* Sends len bytes while the loop runs (the gateway reads as it goes; its answers are read
 * into out or dropped so that neither side blocks). false if the gateway closed first. */
static inline bool fgw_send(struct fgw *f, const void *p, size_t len, struct gw_buf *out)
{
	const uint8_t *b = p;
	size_t off = 0;
	int idle = 0;

	while (off < len && f->fd >= 0) {
		ssize_t n = send(f->fd, b + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n > 0) {
			off += (size_t)n;
			idle = 0;
		} else if (n < 0 && errno != EAGAIN && errno != EINTR) {
			return false;
		} else if (++idle > 10000) {
			return false;	/* the gateway stopped reading: a stalled connection */
		}
		gw_loop_run_once(&f->loop, 0);
		if (!fgw_drain(f, out))
			return false;
	}
	return true;
}

/* Runs the loop until the gateway has said all it will say for now. */
static inline void fgw_settle(struct fgw *f, struct gw_buf *out)
{
	for (int i = 0; i < 64; i++) {
		gw_loop_run_once(&f->loop, 0);
		if (!fgw_drain(f, out))
			break;
	}
}

/* Stops the gateway as isergwd does at SIGTERM; it must go idle (every session and task gone). */
static inline void fgw_stop(struct fgw *f)
{
	int i;

	if (f->fd >= 0) {
		close(f->fd);
		f->fd = -1;
	}
	fgw_spin(f, 8);
	ctl_gw_stop(f->gw);
	for (i = 0; i < 20000 && !ctl_gw_idle(f->gw); i++)
		gw_loop_run_once(&f->loop, i < 10000 ? 0 : 1);
	if (!ctl_gw_idle(f->gw))
		__builtin_trap();	/* isergwd would exit 1 with I/O still in flight */
	ctl_gw_destroy(f->gw);
	gw_loop_fini(&f->loop);
}

/* iSCSI framing helpers (RFC 7143 §11: big-endian fields, 4-byte padding). */
static inline void fgw_put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline uint32_t fgw_get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint32_t fgw_dsl(const uint8_t *bhs)
{
	return (uint32_t)bhs[5] << 16 | (uint32_t)bhs[6] << 8 | bhs[7];
}

#endif
