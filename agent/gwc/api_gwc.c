// SPDX-License-Identifier: MIT
/*
 * Gateway control socket client. Connecting to a unix socket completes at once or fails at
 * once, so "connecting" only waits for EPOLLOUT when the gateway's backlog is full. One timer
 * serves both reconnecting (while disconnected) and the oldest request's deadline (while
 * connected): requests are answered in order, so only the head can be late.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "api_gwc.h"
#include "gw_log.h"

#define API_GWC_LINE_MAX (16u << 20)

struct api_gwc_req {
	struct gw_list node;
	api_gwc_cb cb;
	void *ctx;
	uint64_t deadline_ms;
};

static void gwc_arm(struct api_gwc *g)
{
	uint64_t now = gw_now_ms();

	if (!g->connected) {
		gw_timer_arm(&g->timer, g->retry_ms, 0);
	} else if (!gw_list_empty(&g->pending)) {
		struct api_gwc_req *q = gw_list_first_entry(&g->pending, struct api_gwc_req, node);

		gw_timer_arm(&g->timer, q->deadline_ms > now ? q->deadline_ms - now : 1, 0);
	} else {
		gw_timer_disarm(&g->timer);
	}
}

static void gwc_fail_all(struct api_gwc *g, int err)
{
	while (!gw_list_empty(&g->pending)) {
		struct api_gwc_req *q = gw_list_first_entry(&g->pending, struct api_gwc_req, node);

		gw_list_del(&q->node);
		q->cb(q->ctx, err, NULL);
		free(q);
	}
}

void api_gwc_disconnect(struct api_gwc *g, int err)
{
	bool was = g->connected;

	if (g->fd >= 0) {
		gw_watch_stop(&g->w);
		close(g->fd);
		g->fd = -1;
	}
	g->connected = false;
	g->connecting = false;
	gw_buf_reset(&g->in);
	gw_buf_reset(&g->out);
	gwc_fail_all(g, err);
	if (was) {
		gw_warn("gwc", "gateway control socket %s lost: %s", g->path, strerror(-err));
		if (g->ops && g->ops->disconnected)
			g->ops->disconnected(g, g->arg);
	}
	gwc_arm(g);
}

static void gwc_update_events(struct api_gwc *g)
{
	uint32_t ev = EPOLLIN | EPOLLRDHUP;

	if (g->out.len || g->connecting)
		ev |= EPOLLOUT;
	gw_watch_set(&g->w, ev);
}

static void gwc_flush(struct api_gwc *g)
{
	while (g->out.len) {
		ssize_t n = send(g->fd, g->out.data, g->out.len, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			api_gwc_disconnect(g, -errno);
			return;
		}
		gw_buf_consume(&g->out, (size_t)n);
	}
	gwc_update_events(g);
}

static void gwc_became_connected(struct api_gwc *g)
{
	g->connecting = false;
	g->connected = true;
	gw_info("gwc", "connected to the gateway at %s", g->path);
	gwc_arm(g);
	gwc_update_events(g);
	if (g->ops && g->ops->connected)
		g->ops->connected(g, g->arg);
}

static void gwc_handle_line(struct api_gwc *g, const char *line, size_t len)
{
	struct api_gwc_req *q;
	json_error_t jerr;
	json_t *reply;

	reply = json_loadb(line, len, 0, &jerr);
	if (!reply || !json_is_object(reply)) {
		gw_err("gwc", "the gateway sent a line that is not a JSON object: %s",
		       reply ? "not an object" : jerr.text);
		json_decref(reply);
		api_gwc_disconnect(g, -EPROTO);
		return;
	}
	/* A watch event (docs/CONTROL.md): not a reply, whatever is pending. */
	if (json_is_string(json_object_get(reply, "event")) && !json_object_get(reply, "id")) {
		if (g->ops && g->ops->event)
			g->ops->event(g, json_string_value(json_object_get(reply, "event")),
				      json_object_get(reply, "data"), g->arg);
		json_decref(reply);
		return;
	}
	if (gw_list_empty(&g->pending)) {
		gw_warn("gwc", "unexpected reply from the gateway (no request pending)");
		json_decref(reply);
		return;
	}
	q = gw_list_first_entry(&g->pending, struct api_gwc_req, node);
	gw_list_del(&q->node);
	gwc_arm(g);
	q->cb(q->ctx, 0, reply);
	free(q);
	json_decref(reply);
}

static void gwc_read(struct api_gwc *g)
{
	for (;;) {
		ssize_t n;
		uint8_t *nl;

		if (gw_buf_reserve(&g->in, 65536)) {
			api_gwc_disconnect(g, -ENOMEM);
			return;
		}
		n = recv(g->fd, g->in.data + g->in.len, g->in.cap - g->in.len, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return;
			api_gwc_disconnect(g, -errno);
			return;
		}
		if (n == 0) {
			api_gwc_disconnect(g, -ECONNRESET);
			return;
		}
		g->in.len += (size_t)n;
		while (g->fd >= 0 && (nl = memchr(g->in.data, '\n', g->in.len))) {
			size_t l = (size_t)(nl - g->in.data);

			gwc_handle_line(g, (const char *)g->in.data, l);
			if (g->fd < 0)
				return;
			gw_buf_consume(&g->in, l + 1);
		}
		if (g->fd < 0)
			return;
		if (g->in.len > API_GWC_LINE_MAX) {
			gw_err("gwc", "reply line over %u bytes", API_GWC_LINE_MAX);
			api_gwc_disconnect(g, -EMSGSIZE);
			return;
		}
	}
}

static void gwc_on_io(struct gw_watch *w, uint32_t events)
{
	struct api_gwc *g = gw_container_of(w, struct api_gwc, w);

	if (g->connecting && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
		int err = 0;
		socklen_t l = sizeof(err);

		getsockopt(g->fd, SOL_SOCKET, SO_ERROR, &err, &l);
		if (err) {
			api_gwc_disconnect(g, -err);
			return;
		}
		gwc_became_connected(g);
	}
	if (events & EPOLLIN)
		gwc_read(g);
	if (g->fd >= 0 && (events & (EPOLLERR | EPOLLHUP | EPOLLRDHUP)) && !(events & EPOLLIN)) {
		api_gwc_disconnect(g, -ECONNRESET);
		return;
	}
	if (g->fd >= 0 && (events & EPOLLOUT))
		gwc_flush(g);
}

static void gwc_try_connect(struct api_gwc *g)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(g->path) >= sizeof(sa.sun_path))
		return;
	strcpy(sa.sun_path, g->path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		gwc_arm(g);
		return;
	}
	g->fd = fd;
	gw_watch_init(&g->w, g->loop, fd, gwc_on_io);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		gwc_became_connected(g);
		return;
	}
	if (errno == EINPROGRESS || errno == EAGAIN) {
		g->connecting = true;
		gwc_update_events(g);
		return;
	}
	/* Quietly: the gateway may simply not be up yet. */
	close(fd);
	g->fd = -1;
	gwc_arm(g);
}

static void gwc_on_timer(struct gw_timer *t)
{
	struct api_gwc *g = gw_container_of(t, struct api_gwc, timer);

	if (!g->connected) {
		if (!g->connecting)
			gwc_try_connect(g);
		return;
	}
	if (!gw_list_empty(&g->pending)) {
		struct api_gwc_req *q = gw_list_first_entry(&g->pending, struct api_gwc_req, node);

		if (q->deadline_ms <= gw_now_ms()) {
			gw_err("gwc", "the gateway did not answer within %u ms", g->timeout_ms);
			/* Replies are matched by order: after a lost one, only a new connection can
			 * be trusted again. */
			api_gwc_disconnect(g, -ETIMEDOUT);
			return;
		}
	}
	gwc_arm(g);
}

int api_gwc_init(struct api_gwc *g, struct gw_loop *loop, const char *path,
		 const struct api_gwc_ops *ops, void *arg)
{
	int r;

	memset(g, 0, sizeof(*g));
	g->loop = loop;
	g->fd = -1;
	g->ops = ops;
	g->arg = arg;
	g->timeout_ms = 30000;
	g->retry_ms = 500;
	gw_buf_init(&g->in);
	gw_buf_init(&g->out);
	gw_list_init(&g->pending);
	g->path = strdup(path);
	if (!g->path)
		return -ENOMEM;
	r = gw_timer_init(&g->timer, loop, gwc_on_timer);
	if (r)
		return r;
	/* First attempt from the loop, so `connected` never fires inside init. */
	return gw_timer_arm(&g->timer, 1, 0);
}

void api_gwc_fini(struct api_gwc *g)
{
	g->ops = NULL;
	api_gwc_disconnect(g, -ECANCELED);
	gw_timer_fini(&g->timer);
	gw_buf_fini(&g->in);
	gw_buf_fini(&g->out);
	free(g->path);
	g->path = NULL;
}

bool api_gwc_connected(const struct api_gwc *g)
{
	return g && g->connected;
}

int api_gwc_call(struct api_gwc *g, json_t *req, api_gwc_cb cb, void *ctx)
{
	struct api_gwc_req *q;
	char *text;
	int r;

	if (!req)
		return -ENOMEM;
	if (!g->connected) {
		json_decref(req);
		return -ENOTCONN;
	}
	json_object_set_new(req, "id", json_integer((json_int_t)++g->next_id));
	text = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	q = calloc(1, sizeof(*q));
	if (!text || !q) {
		free(text);
		free(q);
		return -ENOMEM;
	}
	r = gw_buf_append(&g->out, text, strlen(text));
	if (!r)
		r = gw_buf_append(&g->out, "\n", 1);
	free(text);
	if (r) {
		free(q);
		return r;
	}
	q->cb = cb;
	q->ctx = ctx;
	q->deadline_ms = gw_now_ms() + g->timeout_ms;
	gw_list_add_tail(&g->pending, &q->node);
	if (q->node.prev == &g->pending)
		gwc_arm(g);
	/* Sent from the loop: a send error here would fail the request inside this call. */
	gwc_update_events(g);
	return 0;
}
