// SPDX-License-Identifier: MIT
/*
 * relay: what a cut-through could save the gateway on a proxied 512 KiB read (issue 13;
 * docs/PERFORMANCE.md, "A cut-through for proxied reads: what it would save"). Three roles, one
 * process each, as the proxy rig has them:
 *
 *   send  -- the back end: listens, then writes framed records for SECS seconds: each record is
 *            two Data-In PDUs (a 48-byte header + 256 KiB, F on the second), as tgtd answers a
 *            512 KiB read; then an end header carrying the record count.
 *   fwd   -- the gateway: connects to the sender and to the receiver and forwards every PDU
 *            with its header rewritten (ITT mapped, StatSN set), in one of three modes:
 *              copy   recv into a buffer, the two PDUs of a record in one writev (what the
 *                     gateway does: a receive copy and a send copy per byte);
 *              splice the header through recv/send, the payload socket -> pipe -> socket with
 *                     splice(2) (the pipe sized with F_SETPIPE_SZ): the bytes never cross user
 *                     memory;
 *              zc     recv into a ring of buffers, sendmsg(MSG_ZEROCOPY) (the receive copy
 *                     stays; the send copy goes where the kernel does not copy at delivery:
 *                     not on loopback or veth, measured rather than assumed).
 *            At the end it prints its own CPU (getrusage, user + system) per record.
 *   recv  -- the host: listens, reads and checks every header (ITT, DataSN, offset, length,
 *            flags) and every payload byte (a pattern per record and segment), then the count in
 *            the end header; exits 1 on any wrong byte, missing record or early end.
 *
 * Sockets are blocking (one stream each way, nothing to multiplex); TCP_NODELAY as the gateway
 * sets it. FWD's -x N spoils record N on purpose (a payload byte in copy and zc, the mapped ITT
 * in splice, where the relay never sees the payload): the receiver must then fail.
 *
 *   cc -std=gnu11 -O2 -Wall -Wextra -Werror -o build/relay tests/bench/relay.c
 *   relay recv ADDR:PORT
 *   relay send [-t SECS] ADDR:PORT
 *   relay fwd [-m copy|splice|zc] [-p PIPE_BYTES] [-x N] SRC_ADDR:PORT DST_ADDR:PORT
 * tests/bench/relay.sh runs them over a veth between two namespaces and loopback, as
 * tests/bench/proxy-ab.sh builds its rig, with the modes interleaved.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif
#ifndef MSG_ZEROCOPY
#define MSG_ZEROCOPY 0x4000000
#endif
#ifndef SO_EE_ORIGIN_ZEROCOPY
#define SO_EE_ORIGIN_ZEROCOPY 5
#endif
#ifndef SO_EE_CODE_ZEROCOPY_COPIED
#define SO_EE_CODE_ZEROCOPY_COPIED 1
#endif

#define RL_HDR 48
#define RL_SEG (256u << 10)		/* one Data-In's payload, as tgtd sends it to us */
#define RL_SEGS 2
#define RL_REC (RL_SEG * RL_SEGS)	/* one 512 KiB read */
#define RL_NPAT 5			/* payload patterns, one per record modulo this */
#define RL_STAMP 4096			/* every 4 KiB starts with the record's stamp */
#define RL_OP_DATA_IN 0x25
#define RL_OP_END 0x3e			/* not iSCSI: the sender's last header, the count in ITT */
#define RL_F 0x80
#define RL_ITT_MAP 0x5a5a5a5au		/* what the relay maps the back end's ITT to */
#define RL_ZC_SLOTS 8			/* records in flight under MSG_ZEROCOPY */

static void rl_die(const char *what)
{
	fprintf(stderr, "relay: %s: %s\n", what, strerror(errno));
	exit(2);
}

static void rl_put32(uint8_t *p, uint32_t v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}

static uint32_t rl_get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void rl_put_dsl(uint8_t *h, uint32_t len)
{
	h[5] = len >> 16;
	h[6] = len >> 8;
	h[7] = len;
}

static uint32_t rl_get_dsl(const uint8_t *h)
{
	return (uint32_t)h[5] << 16 | (uint32_t)h[6] << 8 | h[7];
}

static double rl_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* This process's CPU so far, user + system, in µs. */
static double rl_cpu_us(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec * 1e6 + ru.ru_utime.tv_usec + ru.ru_stime.tv_sec * 1e6 +
	       ru.ru_stime.tv_usec;
}

static int rl_addr(const char *s, struct sockaddr_in *sa)
{
	char host[64];
	const char *colon = strrchr(s, ':');

	if (!colon || (size_t)(colon - s) >= sizeof(host))
		return -EINVAL;
	memcpy(host, s, colon - s);
	host[colon - s] = 0;
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons(atoi(colon + 1));
	return inet_pton(AF_INET, host, &sa->sin_addr) == 1 ? 0 : -EINVAL;
}

static void rl_nodelay(int fd)
{
	int one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
		rl_die("TCP_NODELAY");
}

/* Listens on ADDR:PORT and returns the one connection accepted. */
static int rl_accept(const char *addr)
{
	struct sockaddr_in sa;
	int one = 1, lfd, fd;

	if (rl_addr(addr, &sa) < 0) {
		fprintf(stderr, "relay: bad address %s\n", addr);
		exit(2);
	}
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0)
		rl_die("socket");
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 1) < 0)
		rl_die(addr);
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		rl_die("accept");
	close(lfd);
	rl_nodelay(fd);
	return fd;
}

/* Connects to ADDR:PORT, retrying for up to 10 s while nobody listens there yet. */
static int rl_connect(const char *addr)
{
	struct sockaddr_in sa;
	double end = rl_now() + 10;
	int fd;

	if (rl_addr(addr, &sa) < 0) {
		fprintf(stderr, "relay: bad address %s\n", addr);
		exit(2);
	}
	for (;;) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0)
			rl_die("socket");
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			break;
		if (errno != ECONNREFUSED || rl_now() > end)
			rl_die(addr);
		close(fd);
		usleep(20000);
	}
	rl_nodelay(fd);
	return fd;
}

/* Reads exactly LEN bytes; 0 when the peer closed before the first, -1 (errno) otherwise. */
static int rl_read_all(int fd, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = recv(fd, (char *)buf + got, len - got, MSG_WAITALL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0) {
			if (got)
				errno = EPIPE;
			return got ? -1 : 0;
		}
		got += n;
	}
	return 1;
}

static uint64_t rl_zc_calls;		/* sendmsg calls with MSG_ZEROCOPY that sent bytes */

/* Writes every byte of IOV[0..CNT) (the array is consumed); FLAGS as for sendmsg. */
static ssize_t rl_send_iov(int fd, struct iovec *iov, int cnt, int flags)
{
	ssize_t total = 0;

	while (cnt > 0) {
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = cnt };
		ssize_t n = sendmsg(fd, &mh, flags);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if ((flags & MSG_ZEROCOPY) && n > 0)
			rl_zc_calls++;	/* each such call is one notification id */
		total += n;
		while (cnt > 0 && (size_t)n >= iov->iov_len) {
			n -= iov->iov_len;
			iov++;
			cnt--;
		}
		if (cnt > 0) {
			iov->iov_base = (char *)iov->iov_base + n;
			iov->iov_len -= n;
		}
	}
	return total;
}

/* The pattern of a record: RL_NPAT buffers of pseudo-random words, one RL_REC each. */
static uint8_t *rl_patterns(void)
{
	uint8_t *p = malloc((size_t)RL_NPAT * RL_REC);
	uint64_t x = 0x9e3779b97f4a7c15ull;

	if (!p)
		rl_die("malloc");
	for (size_t i = 0; i < (size_t)RL_NPAT * RL_REC / 8; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(p + i * 8, &x, 8);
	}
	return p;
}

static uint64_t rl_stamp(uint64_t rec, size_t off)
{
	return rec << 24 ^ off ^ 0xc0ffee0000000000ull;
}

static void rl_header(uint8_t *h, uint8_t op, uint8_t flags, uint32_t itt, uint32_t len,
		      uint32_t datasn, uint32_t off)
{
	memset(h, 0, RL_HDR);
	h[0] = op;
	h[1] = flags;
	rl_put_dsl(h, len);
	rl_put32(h + 16, itt);
	rl_put32(h + 36, datasn);
	rl_put32(h + 40, off);
}

static int rl_send_main(double secs, const char *addr)
{
	uint8_t *pat = rl_patterns(), h[RL_HDR];
	int fd = rl_accept(addr);
	double end = rl_now() + secs;
	uint64_t rec = 0;

	while (rl_now() < end) {
		uint8_t *p = pat + (rec % RL_NPAT) * (size_t)RL_REC;

		for (size_t off = 0; off < RL_REC; off += RL_STAMP) {
			uint64_t s = rl_stamp(rec, off);

			memcpy(p + off, &s, 8);
		}
		for (uint32_t seg = 0; seg < RL_SEGS; seg++) {
			struct iovec iov[2] = { { h, RL_HDR }, { p + seg * RL_SEG, RL_SEG } };

			rl_header(h, RL_OP_DATA_IN, seg == RL_SEGS - 1 ? RL_F : 0, (uint32_t)rec,
				  RL_SEG, seg, seg * RL_SEG);
			if (rl_send_iov(fd, iov, 2, 0) < 0)
				rl_die("send");
		}
		rec++;
	}
	rl_header(h, RL_OP_END, RL_F, (uint32_t)rec, 0, 0, 0);
	struct iovec iov = { h, RL_HDR };
	if (rl_send_iov(fd, &iov, 1, 0) < 0)
		rl_die("send end");
	shutdown(fd, SHUT_WR);
	/* Wait for the relay to close: the bytes are then out of our socket. */
	while (recv(fd, h, sizeof(h), 0) > 0)
		;
	printf("send: records=%llu cpu_us=%.0f\n", (unsigned long long)rec, rl_cpu_us());
	close(fd);
	free(pat);
	return 0;
}

/* What the relay does to a header: the back end's ITT mapped to the host's, StatSN set. */
static void rl_rewrite(uint8_t *h, uint32_t statsn)
{
	rl_put32(h + 16, rl_get32(h + 16) ^ RL_ITT_MAP);
	rl_put32(h + 24, statsn);
}

enum rl_mode { RL_COPY, RL_SPLICE, RL_ZC };

struct rl_fwd {
	enum rl_mode mode;
	int src, dst;
	int pipe[2];
	size_t pipe_sz;
	long long spoil;		/* the record to spoil, -1 none */
	uint64_t records, statsn;
	uint64_t zc_sent, zc_done, zc_copied, zc_notes;
};

/* Checks a header from the back end; returns its payload length, or -1 for the end header. */
static long rl_fwd_header(struct rl_fwd *f, uint8_t *h)
{
	uint32_t len = rl_get_dsl(h);

	if (h[0] == RL_OP_END) {
		rl_rewrite(h, (uint32_t)f->statsn);
		return -1;
	}
	if (h[0] != RL_OP_DATA_IN || len > RL_SEG) {
		fprintf(stderr, "relay: fwd: bad header (opcode 0x%02x, length %u)\n", h[0], len);
		exit(2);
	}
	rl_rewrite(h, (uint32_t)f->statsn++);
	return len;
}

/* MSG_ZEROCOPY completions: reads the error queue; WAIT blocks until one arrives. */
static void rl_zc_reap(struct rl_fwd *f, bool wait)
{
	for (;;) {
		char ctl[128];
		struct msghdr mh = { .msg_control = ctl, .msg_controllen = sizeof(ctl) };
		struct pollfd pfd = { .fd = f->dst, .events = 0 };

		if (recvmsg(f->dst, &mh, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				rl_die("MSG_ERRQUEUE");
			if (!wait)
				return;
			if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
				rl_die("poll");
			continue;
		}
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
			struct sock_extended_err ee;

			memcpy(&ee, CMSG_DATA(cm), sizeof(ee));
			if (ee.ee_origin != SO_EE_ORIGIN_ZEROCOPY)
				continue;
			f->zc_done = (uint64_t)ee.ee_data + 1 > f->zc_done ? ee.ee_data + 1 : f->zc_done;
			f->zc_notes++;
			if (ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED)
				f->zc_copied++;
		}
		return;
	}
}

/* copy and zc: a record's two PDUs received into a buffer, sent in one sendmsg. */
static void rl_fwd_buffered(struct rl_fwd *f)
{
	int slots = f->mode == RL_ZC ? RL_ZC_SLOTS : 1;
	uint8_t *buf = malloc((size_t)slots * RL_REC);
	uint8_t (*hdr)[RL_SEGS][RL_HDR] = calloc(slots, sizeof(*hdr));
	uint64_t *zc_mark = calloc(slots, sizeof(*zc_mark));
	uint8_t h[RL_HDR];

	if (!buf || !hdr || !zc_mark)
		rl_die("malloc");
	for (;;) {
		int slot = f->records % slots, seg = 0;
		uint8_t *b = buf + (size_t)slot * RL_REC;
		size_t off = 0;
		long len;

		/* Under MSG_ZEROCOPY a slot is free once the sendmsg calls of the record it last
		 * held completed (zc_mark: the ids issued up to the end of that record). */
		while (f->mode == RL_ZC && f->zc_done < zc_mark[slot])
			rl_zc_reap(f, true);
		for (;;) {
			int r = rl_read_all(f->src, h, RL_HDR);

			if (r <= 0)
				rl_die("fwd: back end closed before the end header");
			len = rl_fwd_header(f, h);
			if (len < 0) {
				struct iovec iov = { h, RL_HDR };

				if (rl_send_iov(f->dst, &iov, 1, 0) < 0)
					rl_die("fwd: send end");
				/* The buffers are the kernel's until every zerocopy send completed. */
				while (f->mode == RL_ZC && f->zc_done < rl_zc_calls)
					rl_zc_reap(f, true);
				free(zc_mark);
				free(hdr);
				free(buf);
				return;
			}
			if (seg >= RL_SEGS || off + len > RL_REC) {
				fprintf(stderr, "relay: fwd: record larger than %u bytes\n", RL_REC);
				exit(2);
			}
			if (len && rl_read_all(f->src, b + off, len) <= 0)
				rl_die("fwd: payload");
			memcpy(hdr[slot][seg], h, RL_HDR);
			seg++;
			off += len;
			if (h[1] & RL_F)
				break;
		}
		if ((long long)f->records == f->spoil)
			b[off / 2] ^= 0x01;
		struct iovec iov[2 * RL_SEGS];
		size_t o = 0;
		for (int i = 0; i < seg; i++) {
			uint32_t l = rl_get_dsl(hdr[slot][i]);

			iov[2 * i] = (struct iovec){ hdr[slot][i], RL_HDR };
			iov[2 * i + 1] = (struct iovec){ b + o, l };
			o += l;
		}
		if (rl_send_iov(f->dst, iov, 2 * seg, f->mode == RL_ZC ? MSG_ZEROCOPY : 0) < 0)
			rl_die("fwd: send");
		if (f->mode == RL_ZC) {
			f->zc_sent = zc_mark[slot] = rl_zc_calls;
			rl_zc_reap(f, false);
		}
		f->records++;
	}
}

/* splice: LEN payload bytes from the back-end socket through the pipe to the host's socket. */
static void rl_splice_payload(struct rl_fwd *f, size_t len, bool more)
{
	while (len > 0) {
		size_t want = len < f->pipe_sz ? len : f->pipe_sz;
		ssize_t in = splice(f->src, NULL, f->pipe[1], NULL, want, SPLICE_F_MOVE | SPLICE_F_MORE);

		if (in < 0 && errno == EINTR)
			continue;
		if (in < 0)
			rl_die("splice from the back end");
		if (in == 0) {
			errno = EPIPE;
			rl_die("splice: back end closed mid-payload");
		}
		len -= in;
		/* Drain what came in: a splice to a socket may move less than asked. */
		while (in > 0) {
			unsigned int fl = SPLICE_F_MOVE | (more || len ? SPLICE_F_MORE : 0);
			ssize_t out = splice(f->pipe[0], NULL, f->dst, NULL, in, fl);

			if (out < 0 && errno == EINTR)
				continue;
			if (out <= 0)
				rl_die("splice to the host");
			in -= out;
		}
	}
}

static void rl_fwd_splice(struct rl_fwd *f)
{
	uint8_t h[RL_HDR];

	for (;;) {
		int r = rl_read_all(f->src, h, RL_HDR);
		long len;

		if (r <= 0)
			rl_die("fwd: back end closed before the end header");
		len = rl_fwd_header(f, h);
		if (len >= 0 && (long long)f->records == f->spoil)
			h[16] ^= 0x01;
		/* The header first, corked with MSG_MORE so it leaves with the payload. */
		if (send(f->dst, h, RL_HDR, len > 0 ? MSG_MORE : 0) != RL_HDR)
			rl_die("fwd: send header");
		if (len < 0)
			return;
		rl_splice_payload(f, len, false);
		if (h[1] & RL_F)
			f->records++;
	}
}

static int rl_fwd_main(struct rl_fwd *f, const char *src, const char *dst)
{
	struct rusage ru;
	double t0 = rl_now(), cpu_us;
	int one = 1;

	f->src = rl_connect(src);
	f->dst = rl_connect(dst);
	if (f->mode == RL_SPLICE) {
		int sz;

		if (pipe2(f->pipe, O_CLOEXEC) < 0)
			rl_die("pipe");
		sz = fcntl(f->pipe[1], F_SETPIPE_SZ, (int)f->pipe_sz);
		if (sz < 0)
			rl_die("F_SETPIPE_SZ");
		f->pipe_sz = sz;
	}
	if (f->mode == RL_ZC && setsockopt(f->dst, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)) < 0)
		rl_die("SO_ZEROCOPY");
	if (f->mode == RL_SPLICE)
		rl_fwd_splice(f);
	else
		rl_fwd_buffered(f);
	getrusage(RUSAGE_SELF, &ru);
	cpu_us = ru.ru_utime.tv_sec * 1e6 + ru.ru_utime.tv_usec + ru.ru_stime.tv_sec * 1e6 +
		 ru.ru_stime.tv_usec;
	printf("fwd: mode=%s records=%llu cpu_us=%.0f user_us=%ld sys_us=%ld us_per_rec=%.1f"
	       " secs=%.3f pipe=%zu", f->mode == RL_COPY ? "copy" : f->mode == RL_SPLICE ? "splice" : "zc",
	       (unsigned long long)f->records, cpu_us,
	       (long)(ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec),
	       (long)(ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec),
	       f->records ? cpu_us / f->records : 0.0, rl_now() - t0,
	       f->mode == RL_SPLICE ? f->pipe_sz : 0);
	if (f->mode == RL_ZC)
		printf(" zc_sends=%llu zc_notes=%llu zc_copied_notes=%llu",
		       (unsigned long long)f->zc_sent, (unsigned long long)f->zc_notes,
		       (unsigned long long)f->zc_copied);
	printf("\n");
	close(f->dst);
	close(f->src);
	return 0;
}

/* The host: every header and byte checked; 1 on any error. */
static int rl_recv_main(const char *addr)
{
	uint8_t *pat = rl_patterns(), *buf = malloc(RL_SEG), h[RL_HDR];
	int fd = rl_accept(addr);
	uint64_t rec = 0, errors = 0, bytes = 0;
	double t0 = 0;
	int seg = 0;

	if (!buf)
		rl_die("malloc");
	for (;;) {
		int r = rl_read_all(fd, h, RL_HDR);
		uint32_t len, want_itt;

		if (r <= 0) {
			fprintf(stderr, "recv: the stream ended without the end header (%s)\n",
				r < 0 ? strerror(errno) : "closed");
			errors++;
			break;
		}
		if (!t0)
			t0 = rl_now();
		len = rl_get_dsl(h);
		if (h[0] == RL_OP_END) {
			if ((rl_get32(h + 16) ^ RL_ITT_MAP) != rec || seg) {
				fprintf(stderr, "recv: end header counts %u records, %llu received%s\n",
					rl_get32(h + 16) ^ RL_ITT_MAP, (unsigned long long)rec,
					seg ? " (one cut short)" : "");
				errors++;
			}
			break;
		}
		want_itt = (uint32_t)rec ^ RL_ITT_MAP;
		if (h[0] != RL_OP_DATA_IN || len != RL_SEG || rl_get32(h + 16) != want_itt ||
		    rl_get32(h + 36) != (uint32_t)seg || rl_get32(h + 40) != seg * RL_SEG ||
		    (h[1] & RL_F) != (seg == RL_SEGS - 1 ? RL_F : 0)) {
			fprintf(stderr, "recv: record %llu segment %d: bad header (opcode 0x%02x, "
				"length %u, ITT 0x%08x, DataSN %u, offset %u, flags 0x%02x)\n",
				(unsigned long long)rec, seg, h[0], len, rl_get32(h + 16),
				rl_get32(h + 36), rl_get32(h + 40), h[1]);
			errors++;
			if (len > RL_SEG)
				break;
		}
		if (len && rl_read_all(fd, buf, len) <= 0) {
			fprintf(stderr, "recv: record %llu: the stream ended mid-payload\n",
				(unsigned long long)rec);
			errors++;
			break;
		}
		bytes += len;
		const uint8_t *p = pat + (rec % RL_NPAT) * (size_t)RL_REC + (size_t)seg * RL_SEG;
		for (size_t off = 0; off < len; off += RL_STAMP) {
			uint64_t s = rl_stamp(rec, seg * RL_SEG + off), got;
			size_t n = len - off < RL_STAMP ? len - off : RL_STAMP;

			memcpy(&got, buf + off, 8);
			if (got != s || memcmp(buf + off + 8, p + off + 8, n - 8)) {
				fprintf(stderr, "recv: record %llu segment %d: wrong data in bytes "
					"%zu-%zu\n", (unsigned long long)rec, seg, off, off + n - 1);
				errors++;
				break;
			}
		}
		if (++seg == RL_SEGS) {
			seg = 0;
			rec++;
		}
	}
	double secs = t0 ? rl_now() - t0 : 0;
	printf("recv: records=%llu mib=%.1f secs=%.3f mibps=%.1f errors=%llu cpu_us=%.0f\n",
	       (unsigned long long)rec, bytes / 1048576.0, secs,
	       secs > 0 ? bytes / 1048576.0 / secs : 0.0, (unsigned long long)errors, rl_cpu_us());
	close(fd);
	free(buf);
	free(pat);
	return errors ? 1 : 0;
}

static int rl_usage(void)
{
	fprintf(stderr, "usage: relay recv ADDR:PORT\n"
			"       relay send [-t SECS] ADDR:PORT\n"
			"       relay fwd [-m copy|splice|zc] [-p PIPE_BYTES] [-x N] SRC DST\n");
	return 2;
}

int main(int argc, char **argv)
{
	struct rl_fwd f = { .mode = RL_COPY, .pipe_sz = 1u << 20, .spoil = -1 };
	double secs = 3;
	const char *role;
	int c;

	if (argc < 2)
		return rl_usage();
	role = argv[1];
	optind = 2;
	while ((c = getopt(argc, argv, "t:m:p:x:")) != -1) {
		switch (c) {
		case 't':
			secs = atof(optarg);
			break;
		case 'm':
			if (!strcmp(optarg, "copy"))
				f.mode = RL_COPY;
			else if (!strcmp(optarg, "splice"))
				f.mode = RL_SPLICE;
			else if (!strcmp(optarg, "zc"))
				f.mode = RL_ZC;
			else
				return rl_usage();
			break;
		case 'p':
			f.pipe_sz = strtoul(optarg, NULL, 0);
			break;
		case 'x':
			f.spoil = atoll(optarg);
			break;
		default:
			return rl_usage();
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(role, "recv") && argc - optind == 1)
		return rl_recv_main(argv[optind]);
	if (!strcmp(role, "send") && argc - optind == 1)
		return rl_send_main(secs, argv[optind]);
	if (!strcmp(role, "fwd") && argc - optind == 2)
		return rl_fwd_main(&f, argv[optind], argv[optind + 1]);
	return rl_usage();
}
