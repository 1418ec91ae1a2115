// SPDX-License-Identifier: MIT
/*
 * The multipathd client of block backstores on dm-multipath maps (see mp_dm.h). One query at a
 * time per map: a non-blocking connect to multipathd's abstract socket, one framed command,
 * the framed reply read as it comes in on the loop. A query still unanswered when the next is
 * due is dropped, so a hung multipathd costs a file descriptor for one interval, never a stall.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include "gw_buf.h"
#include "gw_log.h"
#include "mp_dm.h"

#define MP_DM_LOG "mpath"
#define MP_DM_REPLY_MAX (16u << 20)	/* multipathd's own cap on a reply is lower */

struct mp_dm {
	struct gw_loop *loop;
	char *label;
	char *name;
	char *sock;
	struct gw_timer timer;
	struct gw_watch w;
	int fd;			/* the query in flight, or -1 */
	struct gw_buf in;
	json_t *last;		/* the map as last parsed, or NULL */
	char error[160];	/* why there is no fresh answer, "" when there is one */
	uint64_t answered_ms;	/* when last answered */
	uint64_t answers;
	bool warned_unreachable;
	char *warned;		/* the hang warning last logged */
	struct gw_close cl;
};

/* ---- sysfs ------------------------------------------------------------------------------- */

static int read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	size_t n;

	if (!f)
		return -errno;
	n = fgets(buf, (int)len, f) ? strcspn(buf, "\n") : 0;
	buf[n] = 0;
	fclose(f);
	return 0;
}

int mp_dm_probe(const char *sysfs, dev_t rdev, char *name, size_t len)
{
	char path[256], uuid[160];
	int r;

	snprintf(path, sizeof(path), "%s/dev/block/%u:%u/dm/uuid", sysfs, major(rdev),
		 minor(rdev));
	r = read_line(path, uuid, sizeof(uuid));
	if (r == -ENOENT)
		return 0;	/* not a dm device at all */
	if (r < 0)
		return r;
	/* multipath-tools names its maps' dm uuids "mpath-<wwid>"; LVM, crypt... use others. */
	if (strncmp(uuid, "mpath-", 6) != 0)
		return 0;
	snprintf(path, sizeof(path), "%s/dev/block/%u:%u/dm/name", sysfs, major(rdev),
		 minor(rdev));
	r = read_line(path, name, len);
	if (r < 0)
		return r;
	return name[0] ? 1 : -ENODATA;
}

/* ---- parsing ----------------------------------------------------------------------------- */

const char *mp_dm_hang_warning(const char *features, const char *queueing)
{
	if (!features || !strstr(features, "queue_if_no_path"))
		return NULL;
	/* queueing is multipathd's view of no_path_retry: "off" (fail), "N chk" or "N sec"
	 * (bounded), "on" (queue) or "-" (not set, so the feature alone rules: forever). */
	if (queueing && (strstr(queueing, "chk") || strstr(queueing, "sec") ||
			 !strcmp(queueing, "off")))
		return NULL;
	return "queue_if_no_path without a no_path_retry limit: with every path gone, I/O to "
	       "this map queues forever and the gateway's hosts hang; set no_path_retry to a "
	       "number in multipath.conf";
}

static const char *str_or(const json_t *o, const char *key, const char *dflt)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s ? s : dflt;
}

/* Copies a string member, as it is, when present. */
static void copy_str(json_t *to, const char *tkey, const json_t *from, const char *fkey)
{
	json_t *v = json_object_get(from, fkey);

	if (json_is_string(v))
		json_object_set_new(to, tkey, json_string(json_string_value(v)));
}

static void copy_int(json_t *to, const char *tkey, const json_t *from, const char *fkey)
{
	json_t *v = json_object_get(from, fkey);

	if (json_is_integer(v))
		json_object_set_new(to, tkey, json_integer(json_integer_value(v)));
}

/* multipathd prints path states as "ready" (newer) or "[ready]" (older releases). */
static bool state_is(const char *s, const char *want)
{
	size_t n = strlen(want);

	if (*s == '[')
		s++;
	return !strncmp(s, want, n) && (!s[n] || s[n] == ']');
}

static json_t *parse_map(const json_t *m)
{
	json_t *o = json_object(), *paths = json_array(), *pg, *p;
	size_t i, j, up = 0, n = 0;
	const char *warn;

	if (!o || !paths) {
		json_decref(o);
		json_decref(paths);
		return NULL;
	}
	json_object_set_new(o, "type", json_string("dm-multipath"));
	copy_str(o, "map", m, "name");
	copy_str(o, "uuid", m, "uuid");
	copy_str(o, "sysfs", m, "sysfs");
	copy_str(o, "dm_st", m, "dm_st");
	copy_str(o, "features", m, "features");
	copy_str(o, "hwhandler", m, "hwhandler");
	copy_str(o, "queueing", m, "queueing");
	copy_str(o, "failback", m, "failback");
	copy_str(o, "write_prot", m, "write_prot");
	copy_int(o, "path_faults", m, "path_faults");
	copy_int(o, "switch_grp", m, "switch_grp");
	copy_int(o, "queueing_timeouts", m, "q_timeouts");
	json_array_foreach(json_object_get(m, "path_groups"), i, pg) {
		json_array_foreach(json_object_get(pg, "paths"), j, p) {
			const char *dm = str_or(p, "dm_st", "undef");
			const char *chk = str_or(p, "chk_st", "undef");
			bool ok = state_is(dm, "active") && state_is(chk, "ready");
			json_t *q = json_object();

			if (!q)
				continue;
			copy_str(q, "dev", p, "dev");
			copy_str(q, "dev_t", p, "dev_t");
			copy_str(q, "dm_st", p, "dm_st");
			copy_str(q, "chk_st", p, "chk_st");
			copy_str(q, "dev_st", p, "dev_st");
			copy_str(q, "checker", p, "checker");
			copy_int(q, "priority", p, "pri");
			if (json_is_integer(json_object_get(pg, "group")))
				copy_int(q, "group", pg, "group");
			else
				json_object_set_new(q, "group", json_integer((json_int_t)i + 1));
			copy_str(q, "group_state", pg, "dm_st");
			copy_str(q, "selector", pg, "selector");
			json_object_set_new(q, "state", json_string(ok ? "active" :
								    state_is(chk, "ghost") ?
								    "standby" : "down"));
			json_object_set_new(q, "up", json_boolean(ok));
			json_array_append_new(paths, q);
			n++;
			up += ok;
		}
	}
	json_object_set_new(o, "paths", paths);
	json_object_set_new(o, "state", json_string(!n || !up ? "no-path" : up < n ? "degraded" :
						    "ready"));
	warn = mp_dm_hang_warning(json_string_value(json_object_get(o, "features")),
				  json_string_value(json_object_get(o, "queueing")));
	if (warn)
		json_object_set_new(o, "warning", json_string(warn));
	return o;
}

json_t *mp_dm_parse(const char *reply, size_t len, const char *name, const char **err)
{
	json_error_t jerr;
	json_t *root, *m, *one, *out = NULL;
	size_t i;

	/* The framed reply carries its NUL; a JSON text never contains one. */
	while (len && (reply[len - 1] == 0 || reply[len - 1] == '\n'))
		len--;
	root = json_loadb(reply, len, 0, &jerr);
	if (!json_is_object(root)) {
		if (err)
			*err = (len >= 4 && !memcmp(reply, "fail", 4)) ||
			       (len >= 5 && !memcmp(reply, "error", 5)) ?
			       "multipathd refused the command" :
			       "multipathd's answer is not JSON";
		json_decref(root);
		return NULL;
	}
	one = json_object_get(root, "map");
	if (json_is_object(one) && !strcmp(str_or(one, "name", ""), name))
		out = parse_map(one);
	json_array_foreach(json_object_get(root, "maps"), i, m) {
		if (!out && json_is_object(m) && !strcmp(str_or(m, "name", ""), name))
			out = parse_map(m);
	}
	if (!out && err)
		*err = "multipathd does not know the map";
	json_decref(root);
	return out;
}

/* ---- the client -------------------------------------------------------------------------- */

static void query_end(struct mp_dm *dm)
{
	if (dm->fd < 0)
		return;
	gw_watch_stop(&dm->w);
	close(dm->fd);
	dm->fd = -1;
	gw_buf_reset(&dm->in);
}

static void set_error(struct mp_dm *dm, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void set_error(struct mp_dm *dm, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(dm->error, sizeof(dm->error), fmt, ap);
	va_end(ap);
	if (!dm->warned_unreachable) {
		gw_warn(MP_DM_LOG, "%s: dm-multipath map %s: multipathd not reachable: map state "
			"not shown (%s)", dm->label, dm->name, dm->error);
		dm->warned_unreachable = true;
	}
}

static void answered(struct mp_dm *dm, const char *reply, size_t len)
{
	const char *err = NULL, *warn;
	json_t *st = mp_dm_parse(reply, len, dm->name, &err);

	if (!st) {
		set_error(dm, "%s", err ? err : "out of memory");
		return;
	}
	if (dm->warned_unreachable || !dm->answers)
		gw_info(MP_DM_LOG, "%s: dm-multipath map %s: %s, %zu paths, features '%s', "
			"no_path_retry '%s'", dm->label, dm->name,
			json_string_value(json_object_get(st, "state")),
			json_array_size(json_object_get(st, "paths")),
			str_or(st, "features", "?"), str_or(st, "queueing", "?"));
	dm->warned_unreachable = false;
	warn = json_string_value(json_object_get(st, "warning"));
	if (warn && (!dm->warned || strcmp(dm->warned, warn))) {
		gw_warn(MP_DM_LOG, "%s: dm-multipath map %s: %s", dm->label, dm->name, warn);
		free(dm->warned);
		dm->warned = strdup(warn);
	} else if (!warn) {
		free(dm->warned);
		dm->warned = NULL;
	}
	json_decref(dm->last);
	dm->last = st;
	dm->error[0] = 0;
	dm->answered_ms = gw_now_ms();
	dm->answers++;
}

static void on_reply(struct gw_watch *w, uint32_t events)
{
	struct mp_dm *dm = gw_container_of(w, struct mp_dm, w);
	size_t want;
	ssize_t n;

	(void)events;
	for (;;) {
		if (gw_buf_reserve(&dm->in, 65536)) {
			set_error(dm, "%s", "out of memory");
			query_end(dm);
			return;
		}
		n = recv(dm->fd, dm->in.data + dm->in.len, dm->in.cap - dm->in.len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			set_error(dm, "%s", n < 0 ? strerror(errno) : "multipathd closed the socket");
			query_end(dm);
			return;
		}
		dm->in.len += (size_t)n;
		if (dm->in.len < sizeof(size_t))
			continue;
		memcpy(&want, dm->in.data, sizeof(want));
		if (want > MP_DM_REPLY_MAX) {
			set_error(dm, "%s", "multipathd's reply length is not plausible");
			query_end(dm);
			return;
		}
		if (dm->in.len >= sizeof(size_t) + want) {
			answered(dm, (const char *)dm->in.data + sizeof(size_t), want);
			query_end(dm);
			return;
		}
	}
}

static void query_start(struct mp_dm *dm)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char cmd[320];
	size_t n = strlen(dm->sock), clen;
	socklen_t alen;
	struct iovec iov[2];
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 2 };
	ssize_t sent;

	/* libmpathcmd's framing: the length (with the NUL), then the command and its NUL. */
	clen = (size_t)snprintf(cmd, sizeof(cmd), "show map %s json", dm->name) + 1;
	if (n + 1 > sizeof(sa.sun_path) || clen > sizeof(cmd)) {
		set_error(dm, "%s", "socket or map name too long");
		return;
	}
	memcpy(sa.sun_path + 1, dm->sock, n);	/* abstract: sun_path[0] stays 0 */
	alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
	dm->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (dm->fd < 0) {
		set_error(dm, "socket: %s", strerror(errno));
		return;
	}
	if (connect(dm->fd, (struct sockaddr *)&sa, alen) < 0) {
		set_error(dm, "%s", strerror(errno));
		query_end(dm);
		return;
	}
	iov[0].iov_base = &clen;
	iov[0].iov_len = sizeof(clen);
	iov[1].iov_base = cmd;
	iov[1].iov_len = clen;
	/* A few hundred bytes into an empty socket buffer: all or nothing. */
	sent = sendmsg(dm->fd, &msg, MSG_NOSIGNAL);
	if (sent != (ssize_t)(sizeof(clen) + clen)) {
		set_error(dm, "send: %s", sent < 0 ? strerror(errno) : "short write");
		query_end(dm);
		return;
	}
	gw_watch_init(&dm->w, dm->loop, dm->fd, on_reply);
	if (gw_watch_set(&dm->w, EPOLLIN) < 0) {
		set_error(dm, "%s", "cannot watch the socket");
		query_end(dm);
	}
}

static void on_timer(struct gw_timer *t)
{
	struct mp_dm *dm = gw_container_of(t, struct mp_dm, timer);

	if (dm->fd >= 0) {
		/* Still unanswered after a whole interval: multipathd is stuck. */
		query_end(dm);
		set_error(dm, "%s", "no answer within the polling interval");
	}
	query_start(dm);
}

int mp_dm_create(struct gw_loop *loop, const char *label, const char *name, const char *sock,
		 uint64_t interval_ms, struct mp_dm **out)
{
	struct mp_dm *dm = calloc(1, sizeof(*dm));
	int r;

	if (!dm)
		return -ENOMEM;
	dm->loop = loop;
	dm->fd = -1;
	gw_buf_init(&dm->in);
	dm->label = strdup(label);
	dm->name = strdup(name);
	dm->sock = strdup(sock ? sock : MP_DM_SOCKET);
	if (!dm->label || !dm->name || !dm->sock) {
		r = -ENOMEM;
		goto fail;
	}
	snprintf(dm->error, sizeof(dm->error), "not asked yet");
	r = gw_timer_init(&dm->timer, loop, on_timer);
	if (r < 0)
		goto fail;
	r = gw_timer_arm(&dm->timer, 1, interval_ms ? interval_ms : 5000);
	if (r < 0) {
		gw_timer_fini(&dm->timer);
		goto fail;
	}
	*out = dm;
	return 0;
fail:
	free(dm->label);
	free(dm->name);
	free(dm->sock);
	free(dm);
	return r;
}

static void mp_dm_free(struct gw_close *cl)
{
	struct mp_dm *dm = gw_container_of(cl, struct mp_dm, cl);

	gw_buf_fini(&dm->in);
	json_decref(dm->last);
	free(dm->warned);
	free(dm->label);
	free(dm->name);
	free(dm->sock);
	free(dm);
}

void mp_dm_destroy(struct mp_dm *dm)
{
	if (!dm)
		return;
	query_end(dm);
	gw_timer_fini(&dm->timer);
	/* An event of this round may still name the watch: free after the dispatch. */
	gw_loop_close(dm->loop, &dm->cl, mp_dm_free);
}

json_t *mp_dm_status(const struct mp_dm *dm)
{
	json_t *o = dm->last ? json_deep_copy(dm->last) : json_object();

	if (!o)
		return NULL;
	if (!dm->last) {
		json_object_set_new(o, "type", json_string("dm-multipath"));
		json_object_set_new(o, "map", json_string(dm->name));
		json_object_set_new(o, "state", json_string("unknown"));
	}
	json_object_set_new(o, "multipathd", json_string(dm->error[0] ? dm->error : "ok"));
	if (dm->answers)
		json_object_set_new(o, "age_ms",
				    json_integer((json_int_t)(gw_now_ms() - dm->answered_ms)));
	return o;
}

uint64_t mp_dm_answers(const struct mp_dm *dm)
{
	return dm->answers;
}
