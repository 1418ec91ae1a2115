/* SPDX-License-Identifier: MIT */
/*
 * tool_sync.h: one-command-at-a-time iSCSI calls for the test tools, on libiscsi's async API and
 * a poll loop of our own instead of libiscsi's synchronous calls.
 *
 * libiscsi 1.19's synchronous calls wait in lib/sync.c's event_loop(): poll(fd, 1000 ms), then
 * iscsi_service(revents) with revents 0 when the poll timed out. Over TCP that 0 runs the
 * timeout scan; its iSER transport (iscsi_iser_service) refuses anything but POLLIN, sets
 * "revents is not POLLIN" and the command fails -- so over iSER every command, login and logout
 * that sees no completion within 1 s fails, whatever the target does. Here a poll timeout goes
 * to the transport only over TCP (as libiscsi's loop does), and a wait fails after limit_s
 * seconds without its completion (0: no limit), over either transport.
 *
 * Every wait's length is kept (the slowest, how many took 1 s or more), and each one of 1 s or
 * more is logged with its wall-clock time on stderr, so a tool can say how slow the target was.
 */
#ifndef TOOL_SYNC_H
#define TOOL_SYNC_H

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

/* Filled by tool_sync_cb. */
struct tool_wait {
	int done;
	int status;
	void *data;
};

struct tool_sync {
	struct iscsi_context *iscsi;
	const char *name;	/* the tool's, for its log lines */
	int iser;		/* the URL was iser:// */
	int limit_s;		/* a wait fails after this long without its completion; 0: never */
	double max_s;		/* the slowest wait so far */
	uint64_t waits, over_1s;
	/* The one call in flight. It lives as long as the tool, not on a stack: a call given up
	 * on (limit_s) is still libiscsi's, and destroying the context fires its callback. */
	struct tool_wait w;
	char err[128];		/* why the last wait failed, when libiscsi does not say */
};

/* Why the last call failed: ours (poll, no completion in time) or libiscsi's error. */
static inline const char *tool_sync_error(struct tool_sync *s)
{
	return s->err[0] ? s->err : iscsi_get_error(s->iscsi);
}

static inline void tool_sync_cb(struct iscsi_context *iscsi, int status, void *data, void *priv)
{
	struct tool_wait *w = priv;

	(void)iscsi;
	w->done = 1;
	w->status = status;
	w->data = data;
}

static inline double tool_sync_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The callback argument for the next call: s->w, cleared. */
static inline struct tool_wait *tool_sync_arm(struct tool_sync *s)
{
	memset(&s->w, 0, sizeof(s->w));
	s->err[0] = 0;
	return &s->w;
}

/* Serves the connection until w is done: 0, or -1 (tool_sync_error says why) when the
 * connection failed or nothing completed it within s->limit_s. */
static inline int tool_sync_wait(struct tool_sync *s, struct tool_wait *w, const char *what)
{
	double t0 = tool_sync_now(), t;

	while (!w->done) {
		struct pollfd pfd = { .fd = iscsi_get_fd(s->iscsi),
				      .events = (short)iscsi_which_events(s->iscsi) };
		int n = poll(&pfd, 1, 1000);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(s->err, sizeof(s->err), "%s: poll: %s", what, strerror(errno));
			return -1;
		}
		if ((n > 0 || !s->iser) && iscsi_service(s->iscsi, n > 0 ? pfd.revents : 0) < 0)
			return -1;
		if (!w->done && s->limit_s > 0 && tool_sync_now() - t0 > s->limit_s) {
			snprintf(s->err, sizeof(s->err), "%s: no completion in %d s", what,
				 s->limit_s);
			return -1;
		}
	}
	t = tool_sync_now() - t0;
	s->waits++;
	if (t > s->max_s)
		s->max_s = t;
	if (t >= 1.0) {
		struct timeval tv;
		struct tm tm;
		char at[32];

		s->over_1s++;
		gettimeofday(&tv, NULL);
		gmtime_r(&tv.tv_sec, &tm);
		strftime(at, sizeof(at), "%H:%M:%S", &tm);
		fprintf(stderr, "%s: slow: %s took %.3f s, done at %s.%03d UTC\n", s->name, what, t,
			at, (int)(tv.tv_usec / 1000));
	}
	return 0;
}

/* Login (iscsi_full_connect_sync's work): 0 or -1. */
static inline int tool_sync_connect(struct tool_sync *s, const char *portal, int lun)
{
	if (iscsi_full_connect_async(s->iscsi, portal, lun, tool_sync_cb, tool_sync_arm(s)) != 0)
		return -1;
	if (tool_sync_wait(s, &s->w, "login") != 0)
		return -1;
	return s->w.status == SCSI_STATUS_GOOD ? 0 : -1;
}

/* Logout (iscsi_logout_sync's work): 0 or -1. */
static inline int tool_sync_logout(struct tool_sync *s)
{
	if (iscsi_logout_async(s->iscsi, tool_sync_cb, tool_sync_arm(s)) != 0)
		return -1;
	if (tool_sync_wait(s, &s->w, "logout") != 0)
		return -1;
	return s->w.status == SCSI_STATUS_GOOD ? 0 : -1;
}

/* The task that `sent` (an iscsi_*_task(..., tool_sync_cb, tool_sync_arm(s)) call's result)
 * became, with its status, as iscsi_*_sync returns it; NULL when it was not sent, or the wait
 * failed. */
static inline struct scsi_task *tool_sync_task(struct tool_sync *s, struct scsi_task *sent,
					       const char *what)
{
	struct scsi_task *task;

	if (sent == NULL || tool_sync_wait(s, &s->w, what) != 0)
		return NULL;
	task = s->w.data;
	task->status = s->w.status;
	return task;
}

#endif
