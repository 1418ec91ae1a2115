// SPDX-License-Identifier: MIT
/*
 * Server-sent events (GET /api/v1/events). Each subscriber has a byte queue; MHD pulls from it
 * through a content reader, and when it is empty the connection is suspended until the next
 * event resumes it, so an idle stream costs nothing. A subscriber that stops reading is cut
 * off once its queue passes 1 MiB. A subscriber whose client goes away (closes, half-closes or
 * resets the connection) is dropped at once: the server watches a suspended stream's socket and
 * resumes it, and the read ends the connection. One address may hold a quarter of its
 * connection limit in streams (docs/REST.md, "Limits"). Events: hello, config, gateway, apply,
 * session, and the network model's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_http.h"
#include "gw_log.h"

#define SSE_QUEUE_MAX (1u << 20)
#define SSE_KEEPALIVE_MS 15000

struct api_sse {
	struct gw_list node;		/* in ev->subscribers */
	struct api_events *ev;
	struct api_req *r;		/* NULL once the request is gone */
	char peer[64];			/* the client's address */
	struct gw_buf q;
	bool closed;
};

static void sse_kick(struct api_sse *s)
{
	if (s->r && s->r->suspended)
		api_req_resume(s->r);
}

static void sse_push(struct api_sse *s, const char *text, size_t len)
{
	if (s->closed)
		return;
	if (s->q.len + len > SSE_QUEUE_MAX) {
		gw_warn("events", "a subscriber is not reading: closing its stream");
		s->closed = true;
		gw_buf_reset(&s->q);
	} else {
		gw_buf_append(&s->q, text, len);
	}
	sse_kick(s);
}

void api_event(struct api_events *ev, const char *type, json_t *data)
{
	struct api_sse *s;
	struct gw_buf b;
	char *j;

	if (!data)
		return;
	ev->event_id++;
	if (gw_list_empty(&ev->subscribers)) {
		json_decref(data);
		return;
	}
	json_object_set_new(data, "time_ms", json_integer((json_int_t)gw_now_ms()));
	j = json_dumps(data, JSON_COMPACT);
	json_decref(data);
	if (!j)
		return;
	gw_buf_init(&b);
	gw_buf_printf(&b, "id: %llu\nevent: %s\ndata: %s\n\n", (unsigned long long)ev->event_id,
		      type, j);
	free(j);
	gw_list_for_each_entry(s, &ev->subscribers, node)
		sse_push(s, (const char *)b.data, b.len);
	gw_buf_fini(&b);
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct api_sse *s = cls;
	size_t n;

	(void)pos;
	/* The client went away: nobody reads what is queued. */
	if (s->r && s->r->gone)
		return API_STREAM_ABORT;
	if (s->q.len) {
		n = s->q.len < max ? s->q.len : max;
		memcpy(buf, s->q.data, n);
		gw_buf_consume(&s->q, n);
		return (ssize_t)n;
	}
	if (s->closed || !s->r)
		return API_STREAM_END;
	/* Nothing to send: stop polling this connection until an event resumes it. */
	api_req_suspend(s->r);
	return 0;
}

static void sse_free(void *cls)
{
	struct api_sse *s = cls;

	s->ev->n--;
	gw_list_del(&s->node);
	if (s->r)
		s->r->stream = NULL;
	gw_buf_fini(&s->q);
	free(s);
}

static void sse_detach(void *cls)
{
	struct api_sse *s = cls;

	s->r = NULL;
}

static const struct api_stream_ops sse_ops = {
	.read = sse_read,
	.free = sse_free,
	.detach = sse_detach,
};

/* An address's streams may hold a quarter of its connections (--max-connections-per-ip): a
 * dashboard needs one per tab, and the rest stay free for its REST calls. */
static unsigned int streams_max(struct api_req *r)
{
	unsigned int n = api_http_conf(r->http)->max_conns_per_ip / 4;

	return n ? n : 1;
}

int api_events_subscribe(struct api_events *ev, struct api_req *r, const char *hello,
			 size_t len)
{
	unsigned int n = 0, max = streams_max(r);
	struct api_sse *s;
	char peer[64];

	api_req_peer(r, peer, sizeof(peer));
	gw_list_for_each_entry(s, &ev->subscribers, node)
		if (s->r && !strcmp(s->peer, peer))
			n++;
	if (n >= max) {
		api_reply_err(r, API_E_RATE_LIMITED, NULL, "%s has %u event streams open, the most "
			      "one address may (a quarter of --max-connections-per-ip): close one "
			      "first", peer, n);
		return 0;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	snprintf(s->peer, sizeof(s->peer), "%s", peer);
	s->ev = ev;
	s->r = r;
	gw_buf_init(&s->q);
	gw_list_add_tail(&ev->subscribers, &s->node);
	ev->n++;
	gw_buf_append(&s->q, hello, len);
	api_reply_header(r, "Cache-Control", "no-cache");
	api_reply_stream(r, &sse_ops, s, "text/event-stream");
	return 0;
}

static void on_keepalive(struct gw_timer *t)
{
	struct api_events *ev = gw_container_of(t, struct api_events, keepalive);
	struct api_sse *s;

	/* A comment line keeps proxies from timing the stream out and finds dead clients. */
	gw_list_for_each_entry(s, &ev->subscribers, node)
		sse_push(s, ": keepalive\n\n", 13);
}

int api_events_init(struct api_events *ev, struct gw_loop *loop)
{
	int r;

	gw_list_init(&ev->subscribers);
	ev->n = 0;
	ev->event_id = 0;
	r = gw_timer_init(&ev->keepalive, loop, on_keepalive);
	if (!r)
		r = gw_timer_arm(&ev->keepalive, SSE_KEEPALIVE_MS, SSE_KEEPALIVE_MS);
	return r;
}

void api_events_fini(struct api_events *ev)
{
	struct api_sse *s;

	gw_list_for_each_entry(s, &ev->subscribers, node) {
		s->closed = true;
		sse_kick(s);
	}
	gw_timer_fini(&ev->keepalive);
}
