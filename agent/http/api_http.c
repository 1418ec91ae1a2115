// SPDX-License-Identifier: MIT
/*
 * The HTTP server: libmicrohttpd with its own epoll set (MHD_USE_EPOLL), which sits in our
 * loop as one fd; MHD_run() when it is readable, and a timer for MHD's own timeouts. Requests
 * that wait for the gateway or for an earlier write are suspended, and resumed from the loop.
 * Every reply goes through api_reply_*(): JSON bodies, errors from the one table in api_err.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "api_http.h"
#include "gw_log.h"

/* One client connection (MHD's socket context): how long its current request has been
 * arriving, so that a client trickling headers or a body is cut off (request_timeout). */
struct api_conn {
	struct gw_list node;		/* in api_http.conns */
	struct api_http *h;
	int fd;
	/* While its request is suspended MHD does not poll the socket: the loop watches it for
	 * the peer going away (EPOLLRDHUP, HUP, ERR), stopped before MHD may close the fd (on
	 * resume, and at the latest on MHD_CONNECTION_NOTIFY_CLOSED). */
	struct gw_watch gone_w;
	struct api_req *req;		/* the suspended request gone_w watches for, or NULL */
	uint64_t since_ms;		/* the connection's start or its previous reply */
	bool busy;			/* a request arrived whole: no deadline until it ends */
	bool line;			/* the current request's line arrived (it is under way) */
	bool served;			/* a request was answered: between two it is idle */
	bool cut;
};

struct api_hook_slot {
	const struct api_http_hook *ops;
	void *ctx;
};

struct api_http {
	struct api_agent *app;		/* handed to every request, opaque here */
	struct gw_loop *loop;
	struct api_http_conf conf;
	const struct api_route *routes;
	struct api_hook_slot hooks[API_HTTP_HOOKS_MAX];
	unsigned int nhooks;
	uint64_t requests;
	struct MHD_Daemon *d;
	struct gw_watch w;
	struct gw_timer t;
	struct gw_defer run;
	struct gw_list suspended;	/* struct api_req.snode */
	struct gw_list conns;		/* struct api_conn.node */
	unsigned int nconns, nsuspended;
	uint64_t gone;			/* suspended requests whose client went away */
	struct gw_timer deadline;	/* every second: cuts off requests over request_timeout */
	uint64_t cut;
	char *cert, *key;
	bool stopping;
};

/* ---- hooks --------------------------------------------------------------------------- */

int api_http_hook(struct api_http *h, const struct api_http_hook *ops, void *ctx)
{
	if (h->nhooks == API_HTTP_HOOKS_MAX)
		return -ENOSPC;
	h->hooks[h->nhooks].ops = ops;
	h->hooks[h->nhooks].ctx = ctx;
	h->nhooks++;
	return 0;
}

void api_http_routes(struct api_http *h, const struct api_route *tbl)
{
	h->routes = tbl;
}

uint64_t api_http_requests(const struct api_http *h)
{
	return h->requests;
}

uint64_t api_http_cut(const struct api_http *h)
{
	return h->cut;
}

unsigned int api_http_conns(const struct api_http *h)
{
	return h->nconns;
}

unsigned int api_http_suspended(const struct api_http *h)
{
	return h->nsuspended;
}

uint64_t api_http_gone(const struct api_http *h)
{
	return h->gone;
}

const struct api_http_conf *api_http_conf(const struct api_http *h)
{
	return &h->conf;
}

static void hooks_release(struct api_req *r)
{
	struct api_http *h = r->http;
	unsigned int i;

	for (i = 0; i < h->nhooks; i++)
		if (h->hooks[i].ops->release)
			h->hooks[i].ops->release(h->hooks[i].ctx, r);
}

static void hooks_gone(struct api_req *r)
{
	struct api_http *h = r->http;
	unsigned int i;

	for (i = 0; i < h->nhooks; i++)
		if (h->hooks[i].ops->gone)
			h->hooks[i].ops->gone(h->hooks[i].ctx, r);
}

static bool hooks_serve(struct api_req *r, const char *path)
{
	struct api_http *h = r->http;
	unsigned int i;

	for (i = 0; i < h->nhooks; i++)
		if (h->hooks[i].ops->serve && h->hooks[i].ops->serve(h->hooks[i].ctx, r, path))
			return true;
	return false;
}

/* Every access hook must let the request in; without any, a route that needs a role is
 * refused (401): the server never opens what nobody guards. */
static bool hooks_access(struct api_req *r, enum api_role need)
{
	struct api_http *h = r->http;
	bool asked = false;
	unsigned int i;

	for (i = 0; i < h->nhooks; i++) {
		if (!h->hooks[i].ops->access)
			continue;
		asked = true;
		if (h->hooks[i].ops->access(h->hooks[i].ctx, r, need))
			return false;
	}
	if (!asked)
		api_reply_err(r, API_E_UNAUTHORIZED, NULL, NULL);
	return asked;
}

/* 0: run the handler; > 0: a hook parked the request (suspended); < 0: -errno reply. */
static int hooks_admit(struct api_req *r)
{
	struct api_http *h = r->http;
	unsigned int i;
	int rc;

	for (i = 0; i < h->nhooks; i++) {
		if (!h->hooks[i].ops->admit)
			continue;
		rc = h->hooks[i].ops->admit(h->hooks[i].ctx, r);
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- replies ------------------------------------------------------------------------- */

static void drop_header(struct api_req *r, const char *name)
{
	unsigned int i;

	for (i = 0; i < r->nhdr; i++) {
		if (strcasecmp(r->hdr_name[i], name))
			continue;
		free(r->hdr_name[i]);
		free(r->hdr_value[i]);
		r->nhdr--;
		r->hdr_name[i] = r->hdr_name[r->nhdr];
		r->hdr_value[i] = r->hdr_value[r->nhdr];
		return;
	}
}

static void reply_set(struct api_req *r, unsigned int status, char *body, size_t len,
		      const char *type)
{
	free(r->resp_body);
	r->resp_body = body;
	r->resp_len = len;
	r->resp_type = type;
	r->status = status;
	r->replied = true;
	if (status >= 400)
		drop_header(r, "Location");
	hooks_release(r);
}

void api_reply_text(struct api_req *r, unsigned int status, const char *type, char *text,
		    size_t len)
{
	reply_set(r, status, text, len, type);
}

void api_reply_json(struct api_req *r, unsigned int status, json_t *body)
{
	char *text = NULL;

	if (body) {
		text = json_dumps(body, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		json_decref(body);
		if (!text) {
			api_reply_err(r, API_E_INTERNAL, NULL, "out of memory");
			return;
		}
		/* A final newline makes curl output readable; JSON does not care. */
		size_t n = strlen(text);
		char *t2 = realloc(text, n + 2);

		if (t2) {
			text = t2;
			text[n] = '\n';
			text[n + 1] = 0;
		}
	}
	reply_set(r, status, text, text ? strlen(text) : 0, "application/json");
}

void api_reply_err(struct api_req *r, enum api_err e, const char *field, const char *fmt, ...)
{
	char *msg = NULL;
	json_t *body;
	va_list ap;

	if (fmt) {
		va_start(ap, fmt);
		if (vasprintf(&msg, fmt, ap) < 0)
			msg = NULL;
		va_end(ap);
	}
	body = api_err_body(e, field, msg);
	free(msg);
	if (!body) {
		static const char oom[] = "{\"error\": {\"code\": \"internal\", "
					  "\"message\": \"out of memory\"}}\n";
		reply_set(r, 500, strdup(oom), sizeof(oom) - 1, "application/json");
		return;
	}
	api_reply_json(r, api_err_status(e), body);
}

void api_reply_errno(struct api_req *r, int err, const char *field)
{
	enum api_err e = api_err_from_errno(err);

	if (e == API_E_INTERNAL)
		gw_err("http", "%s %s: %s", r->method, r->url, strerror(err < 0 ? -err : err));
	api_reply_err(r, e, field, NULL);
}

static const char *strip_prefix(const char *field, const char *prefix)
{
	size_t n;

	if (!prefix || !*prefix || !field)
		return field;
	n = strlen(prefix);
	if (strncmp(field, prefix, n))
		return field;
	if (field[n] == '.')
		return field + n + 1;
	if (field[n] == 0)
		return "";
	return field;
}

json_t *api_errlist_body(enum api_err e, const struct gw_errlist *errs, const char *prefix)
{
	json_t *body, *list = json_array();
	const char *first = NULL, *msg = NULL;
	char *joined = NULL;
	size_t i;

	if (!list)
		return NULL;
	for (i = 0; i < errs->n; i++) {
		const char *f = strip_prefix(errs->v[i].field, prefix);

		json_array_append_new(list, json_pack("{s:s, s:s}", "field", f, "message",
						      errs->v[i].msg));
		if (!first) {
			first = f;
			msg = errs->v[i].msg;
		}
	}
	if (errs->n > 1) {
		if (asprintf(&joined, "%zu errors; the first: %s%s%s", errs->n,
			     first && *first ? first : "", first && *first ? ": " : "", msg) < 0)
			joined = NULL;
	} else if (errs->n == 1) {
		if (asprintf(&joined, "%s%s%s", first && *first ? first : "",
			     first && *first ? ": " : "", msg) < 0)
			joined = NULL;
	}
	body = api_err_body(e, first, joined);
	free(joined);
	if (!body) {
		json_decref(list);
		return NULL;
	}
	json_object_set_new(body, "errors", list);
	return body;
}

void api_reply_errlist(struct api_req *r, enum api_err e, const struct gw_errlist *errs,
		       const char *prefix)
{
	json_t *body = api_errlist_body(e, errs, prefix);

	if (!body) {
		api_reply_err(r, API_E_INTERNAL, NULL, "out of memory");
		return;
	}
	api_reply_json(r, api_err_status(e), body);
}

void api_reply_header(struct api_req *r, const char *name, const char *value)
{
	unsigned int i;

	for (i = 0; i < r->nhdr; i++) {
		if (!strcasecmp(r->hdr_name[i], name)) {
			free(r->hdr_value[i]);
			r->hdr_value[i] = strdup(value);
			return;
		}
	}
	if (r->nhdr == API_MAX_HEADERS)
		return;
	r->hdr_name[r->nhdr] = strdup(name);
	r->hdr_value[r->nhdr] = strdup(value);
	r->nhdr++;
}

/* ---- request helpers ----------------------------------------------------------------- */

const char *api_req_header(struct api_req *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

void api_req_peer(struct api_req *r, char *buf, size_t len)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;
	const void *a = NULL;

	if (sa && sa->sa_family == AF_INET)
		a = &((const struct sockaddr_in *)(const void *)sa)->sin_addr;
	else if (sa && sa->sa_family == AF_INET6)
		a = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
	if (!a || !inet_ntop(sa->sa_family, a, buf, (socklen_t)len))
		snprintf(buf, len, "?");
}

const char *api_req_query(struct api_req *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

bool api_req_flag(struct api_req *r, const char *name)
{
	const char *v = api_req_query(r, name);

	if (!v)
		return false;
	/* "?dry_run" alone means true. */
	return !*v || !strcasecmp(v, "true") || !strcmp(v, "1") || !strcasecmp(v, "yes");
}

json_t *api_req_json(struct api_req *r)
{
	json_error_t jerr;
	json_t *j;

	if (!r->body.len) {
		api_reply_err(r, API_E_MALFORMED_JSON, NULL, "a JSON object body is required");
		return NULL;
	}
	j = json_loadb((const char *)r->body.data, r->body.len, JSON_REJECT_DUPLICATES, &jerr);
	if (!j) {
		api_reply_err(r, API_E_MALFORMED_JSON, NULL, "line %d column %d: %s", jerr.line,
			      jerr.column, jerr.text);
		return NULL;
	}
	if (!json_is_object(j)) {
		json_decref(j);
		api_reply_err(r, API_E_INVALID, "", "expected a JSON object");
		return NULL;
	}
	return j;
}

static struct api_conn *conn_of(struct MHD_Connection *c);

static void suspend_as(struct api_req *r, bool parked)
{
	struct api_http *h = r->http;
	struct api_conn *k;

	if (r->suspended)
		return;
	r->suspended = true;
	r->parked = parked;
	h->nsuspended++;
	gw_list_add_tail(&h->suspended, &r->snode);
	MHD_suspend_connection(r->conn);
	/* Added now, a peer that went before the suspension is reported at once too. */
	k = conn_of(r->conn);
	if (k && k->fd >= 0 && !r->gone && !gw_watch_set(&k->gone_w, EPOLLRDHUP))
		k->req = r;
}

void api_req_suspend(struct api_req *r)
{
	suspend_as(r, false);
}

void api_req_park(struct api_req *r)
{
	suspend_as(r, true);
}

static void unwatch(struct api_req *r)
{
	struct api_conn *k = conn_of(r->conn);

	if (k && k->req == r) {
		gw_watch_stop(&k->gone_w);
		k->req = NULL;
	}
}

void api_req_resume(struct api_req *r)
{
	struct api_http *h = r->http;

	if (!r->suspended)
		return;
	r->suspended = false;
	h->nsuspended--;
	unwatch(r);
	gw_list_del(&r->snode);
	MHD_resume_connection(r->conn);
	/* MHD's ITC wakes its epoll set too; running it from the loop does not depend on it. */
	gw_defer_queue(h->loop, &h->run);
}

/* ---- the MHD side -------------------------------------------------------------------- */

static void http_run(struct api_http *h)
{
	MHD_UNSIGNED_LONG_LONG to;

	MHD_run(h->d);
	if (MHD_get_timeout(h->d, &to) == MHD_YES)
		gw_timer_arm(&h->t, to ? (uint64_t)to : 1, 0);
	else
		gw_timer_disarm(&h->t);
}

static void on_mhd_fd(struct gw_watch *w, uint32_t events)
{
	(void)events;
	http_run(gw_container_of(w, struct api_http, w));
}

static void on_mhd_timer(struct gw_timer *t)
{
	http_run(gw_container_of(t, struct api_http, t));
}

static void on_run_defer(struct gw_defer *d)
{
	http_run(gw_container_of(d, struct api_http, run));
}

/* ---- streamed replies ---------------------------------------------------------------- */

void api_reply_stream(struct api_req *r, const struct api_stream_ops *ops, void *ctx,
		      const char *type)
{
	r->stream = ops;
	r->stream_ctx = ctx;
	reply_set(r, 200, NULL, 0, type);
}

/* The stream's read and free go to MHD as they are: the response may outlive the request. */
_Static_assert(API_STREAM_END == MHD_CONTENT_READER_END_OF_STREAM, "stream end marker");
_Static_assert(API_STREAM_ABORT == MHD_CONTENT_READER_END_WITH_ERROR, "stream abort marker");

static enum MHD_Result queue_reply(struct api_req *r)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;
	unsigned int i;

	if (r->stream) {
		resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384,
							 r->stream->read, r->stream_ctx,
							 r->stream->free);
	} else {
		static char empty[1];

		resp = MHD_create_response_from_buffer(r->resp_len,
						       r->resp_body ? r->resp_body : empty,
						       r->resp_body ? MHD_RESPMEM_MUST_FREE :
						       MHD_RESPMEM_PERSISTENT);
		if (resp)
			r->resp_body = NULL;
	}
	if (!resp) {
		gw_err("http", "%s %s: out of memory for the reply", r->method, r->url);
		return MHD_NO;
	}
	if (r->resp_type && (r->resp_len || r->stream))
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->resp_type);
	for (i = 0; i < r->nhdr; i++)
		if (r->hdr_name[i] && r->hdr_value[i])
			MHD_add_response_header(resp, r->hdr_name[i], r->hdr_value[i]);
	ret = MHD_queue_response(r->conn, r->status, resp);
	MHD_destroy_response(resp);
	gw_dbg("http", "%s %s -> %u", r->method, r->url, r->status);
	return ret;
}

static void dispatch(struct api_req *r)
{
	struct api_http *h = r->http;
	const struct api_route *rt = r->route;
	char allow[64], *path;
	const char *why;
	int err, rc;

	r->dispatched = true;
	if (!rt) {
		/* The path as sent, decoded once and checked here for every method and route:
		 * a NUL, an encoded '/', a dot or empty segment never reaches a hook or a
		 * handler. The whole path, never a truncated copy. */
		rc = api_route_path(r->url, &path, &why);
		/* Query values are decoded by MHD, where a %00 would end one early: refused
		 * whole, as in the path. */
		if (!rc) {
			rc = api_route_query(r->url, &why);
			if (rc) {
				free(path);
				path = NULL;
			}
		}
		if (rc == -EINVAL) {
			api_reply_err(r, API_E_BAD_REQUEST, NULL, "%s", why);
			return;
		}
		if (rc) {
			api_reply_err(r, API_E_INTERNAL, NULL, "out of memory");
			return;
		}
		/* Paths of no route (the dashboard's files) go to the hooks that serve them. */
		if (hooks_serve(r, path)) {
			free(path);
			return;
		}
		/* A trailing slash names the same resource. */
		if (strlen(path) > 1 && path[strlen(path) - 1] == '/')
			path[strlen(path) - 1] = 0;
		err = -ENOENT;
		rt = h->routes ? api_route_match(h->routes, r->method, path, r->params,
						 &r->nparams, allow, sizeof(allow), &err) : NULL;
		if (!rt) {
			if (err == -EOPNOTSUPP) {
				api_reply_header(r, "Allow", allow);
				api_reply_err(r, API_E_METHOD, NULL,
					      "%s is not allowed here (allowed: %s)", r->method,
					      allow);
			} else if (err == -EINVAL) {
				api_reply_err(r, API_E_BAD_REQUEST, NULL,
					      "a path segment is empty or too long");
			} else {
				api_reply_err(r, API_E_NOT_FOUND, NULL, "no endpoint %s", path);
			}
			free(path);
			return;
		}
		free(path);
		r->route = rt;
	}
	if (rt->role != API_ROLE_NONE && !r->admitted && !hooks_access(r, rt->role))
		return;
	r->admitted = true;
	if (r->too_large) {
		api_reply_err(r, API_E_TOO_LARGE, NULL, "the body is over %zu bytes",
			      h->conf.body_max);
		return;
	}
	rc = hooks_admit(r);
	if (rc > 0)
		return;
	if (rc < 0) {
		api_reply_errno(r, rc, NULL);
		return;
	}
	h->requests++;
	rc = rt->fn(r);
	if (rc < 0 && !r->replied && !r->suspended)
		api_reply_errno(r, rc, NULL);
	if (!r->replied && !r->suspended) {
		gw_err("http", "%s %s: handler gave no reply", r->method, r->url);
		api_reply_err(r, API_E_INTERNAL, NULL, NULL);
	}
}

/* The request target exactly as the client sent it (MHD's own url is decoded and ends at a
 * decoded NUL), so the router sees what the client meant. */
static struct api_req *req_new(struct api_http *h, struct MHD_Connection *c, const char *target)
{
	struct api_req *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->ag = h->app;
	r->http = h;
	r->conn = c;
	r->url = strdup(target);
	if (!r->url) {
		free(r);
		return NULL;
	}
	gw_buf_init(&r->body);
	gw_list_init(&r->snode);
	return r;
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
	struct api_conn *k = conn_of(c);

	if (k)
		k->line = true;
	return req_new(cls, c, uri);
}

static void req_free(struct api_req *r)
{
	unsigned int i;

	if (r->suspended) {
		r->http->nsuspended--;
		unwatch(r);
		gw_list_del(&r->snode);
	}
	hooks_gone(r);
	if (r->stream && r->stream->detach)
		r->stream->detach(r->stream_ctx);
	for (i = 0; i < r->nparams; i++)
		free(r->params[i]);
	for (i = 0; i < r->nhdr; i++) {
		free(r->hdr_name[i]);
		free(r->hdr_value[i]);
	}
	gw_buf_fini(&r->body);
	free(r->resp_body);
	free(r->url);
	free(r);
}

/* ---- connections and their deadline ------------------------------------------------- */

static struct api_conn *conn_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}

/* The request arrived whole (or was answered before its body): no deadline until it ends. */
static void conn_busy(struct MHD_Connection *c)
{
	struct api_conn *k = conn_of(c);

	if (k)
		k->busy = true;
}

/*
 * The peer of a suspended request went away: it closed the connection, reset it, or only
 * half-closed it. The last is legal HTTP/1.1 after a request, but libmicrohttpd (0.9.75, Debian
 * 12) itself reads the end on resume and closes such a connection unanswered; a request it
 * handles at once, without suspending, it answers (docs/REST.md, "Limits"). So every one of
 * them is gone here, only sooner. A stream ends at once; so does a request parked with nothing
 * under way (api_req_park: a write waiting its turn); one waiting for a callback (the gateway,
 * the store) ends when the callback resumes it, unanswered, so the callback never meets a freed
 * request and what it started (an apply) completes.
 */
static void on_peer_gone(struct gw_watch *w, uint32_t events)
{
	struct api_conn *k = gw_container_of(w, struct api_conn, gone_w);
	struct api_req *r = k->req;

	(void)events;
	gw_watch_stop(w);
	k->req = NULL;
	if (!r || !r->suspended)
		return;
	r->gone = true;
	k->h->gone++;
	gw_dbg("http", "%s %s: the client went away while it waited", r->method, r->url);
	if (r->stream || r->parked)
		api_req_resume(r);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct api_http *h = cls;
	struct api_conn *k = *socket_context;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);

		k = calloc(1, sizeof(*k));
		if (!k)
			return;		/* untracked: only the idle timeout applies */
		k->h = h;
		k->fd = ci ? ci->connect_fd : -1;
		k->since_ms = gw_now_ms();
		gw_watch_init(&k->gone_w, h->loop, k->fd, on_peer_gone);
		gw_list_add_tail(&h->conns, &k->node);
		h->nconns++;
		*socket_context = k;
	} else if (toe == MHD_CONNECTION_NOTIFY_CLOSED && k) {
		/* MHD closes the fd after this: it must have left our epoll set by then. */
		gw_watch_stop(&k->gone_w);
		h->nconns--;
		gw_list_del(&k->node);
		free(k);
		*socket_context = NULL;
	}
}

/* Every second: a connection whose request has not arrived whole within request_timeout is
 * shut down (not closed: the fd stays MHD's until it sees the end and closes it itself). */
static void on_deadline(struct gw_timer *t)
{
	struct api_http *h = gw_container_of(t, struct api_http, deadline);
	uint64_t now = gw_now_ms(), max = (uint64_t)h->conf.request_timeout * 1000;
	struct api_conn *k;
	unsigned int n = 0, idle = 0;

	gw_list_for_each_entry(k, &h->conns, node) {
		if (k->busy || k->cut || k->fd < 0 || now - k->since_ms < max)
			continue;
		k->cut = true;
		shutdown(k->fd, SHUT_RDWR);
		/* Kept alive after a reply and nothing begun since: an idle close, not news. */
		if (k->served && !k->line)
			idle++;
		else
			n++;
	}
	if (n + idle)
		gw_defer_queue(h->loop, &h->run);
	if (!n)
		return;
	h->cut += n;
	gw_warn("http", "%u connection%s cut off: no whole request within %u s (request_timeout)",
		n, n == 1 ? "" : "s", h->conf.request_timeout);
}

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key,
				     const char *value)
{
	unsigned int *n = cls;

	(void)kind;
	(void)value;
	if (!strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH))
		n[0]++;
	else if (!strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING))
		n[1]++;
	return MHD_YES;
}

/* Framing that two parsers could read two ways (the root of request smuggling): more than
 * one Content-Length, or Content-Length beside Transfer-Encoding. NULL when fine. */
static const char *framing_bad(struct MHD_Connection *c)
{
	unsigned int n[2] = { 0, 0 };

	MHD_get_connection_values(c, MHD_HEADER_KIND, count_framing, n);
	if (n[0] > 1)
		return "more than one Content-Length";
	if (n[0] && n[1])
		return "both Content-Length and Transfer-Encoding";
	if (n[1] > 1)
		return "more than one Transfer-Encoding";
	return NULL;
}

static enum MHD_Result sum_header(void *cls, enum MHD_ValueKind kind, const char *key,
				  const char *value)
{
	size_t *n = cls;

	(void)kind;
	/* As sent: "name: value" and its line end. */
	*n += strlen(key) + (value ? strlen(value) : 0) + 4;
	return MHD_YES;
}

/*
 * --header-max, judged here so that the client gets the API's JSON: libmicrohttpd's memory
 * pool is twice the limit (api_http_start), so a request line or headers up to that size
 * reach this point; only beyond it does libmicrohttpd refuse on its own, with its HTML page
 * (docs/REST.md, "Limits"). API_E_COUNT when the request is within the limit.
 */
static enum api_err head_over(struct MHD_Connection *c, const struct api_req *r,
			      const char *method, const char *version, size_t max, size_t *len)
{
	size_t n = strlen(method) + strlen(r->url) + strlen(version) + 4;

	if (n > max) {
		*len = n;
		return API_E_URI_TOO_LONG;
	}
	MHD_get_connection_values(c, MHD_HEADER_KIND, sum_header, &n);
	if (n > max) {
		*len = n;
		return API_E_HEADERS_TOO_LARGE;
	}
	return API_E_COUNT;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c, const char *url,
				 const char *method, const char *version, const char *upload,
				 size_t *upload_size, void **con_cls)
{
	struct api_http *h = cls;
	struct api_req *r = *con_cls;
	size_t max = h->conf.body_max;

	(void)url;
	/* No request from on_uri: out of memory, the connection closes. A request whose client
	 * went away while it waited ends here, without an answer nobody would read. */
	if (!r) {
		gw_err("http", "out of memory for a request: its connection closes");
		return MHD_NO;
	}
	if (r->gone)
		return MHD_NO;
	if (!r->started) {
		const char *cl, *bad;
		enum api_err over;
		size_t len = 0;

		r->started = true;
		snprintf(r->method, sizeof(r->method), "%s", method);
		over = head_over(c, r, method, version, h->conf.header_max, &len);
		if (over != API_E_COUNT) {
			/* Refused before any body is read, as the framing below is. */
			conn_busy(c);
			r->too_large = true;
			api_reply_err(r, over, NULL, "%s %zu bytes, over %zu (--header-max)",
				      over == API_E_URI_TOO_LONG ? "the request line is" :
				      "the request line and headers are", len,
				      h->conf.header_max);
			return queue_reply(r);
		}
		bad = framing_bad(c);
		if (bad) {
			/* Refused before the body: MHD closes the connection after the reply. */
			conn_busy(c);
			r->too_large = true;	/* nothing of the body is kept */
			api_reply_err(r, API_E_BAD_REQUEST, NULL, "ambiguous message framing: %s",
				      bad);
			return queue_reply(r);
		}
		cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						 MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (cl && strtoull(cl, NULL, 10) > max) {
			/* Refuse before reading: MHD closes the connection after the reply. */
			conn_busy(c);
			r->too_large = true;
			api_reply_err(r, API_E_TOO_LARGE, NULL, "the body is over %zu bytes", max);
			return queue_reply(r);
		}
		return MHD_YES;
	}
	if (*upload_size) {
		if (!r->too_large) {
			if (r->body.len + *upload_size > max) {
				r->too_large = true;
				gw_buf_reset(&r->body);
			} else if (gw_buf_append(&r->body, upload, *upload_size)) {
				return MHD_NO;
			}
		}
		*upload_size = 0;
		return MHD_YES;
	}
	conn_busy(c);
	if (!r->replied && !r->suspended)
		dispatch(r);
	if (r->suspended)
		return MHD_YES;
	return queue_reply(r);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct api_req *r = *con_cls;
	struct api_conn *k = conn_of(c);

	(void)cls;
	(void)toe;
	/* The next request on a kept-alive connection has request_timeout from now. */
	if (k) {
		k->busy = false;
		k->line = false;
		k->served = true;
		k->since_ms = gw_now_ms();
	}
	if (r)
		req_free(r);
	*con_cls = NULL;
}

/* What MHD says when we close a connection on purpose (a request or a stream whose client went
 * away, counted in isergw_agent_clients_gone_total; out of memory is logged where it happens):
 * not worth a warning each, or a client dropping streams in a loop would flood the log. */
static const char *const mhd_ours[] = {
	"Application reported internal error, closing connection",
	"Closing connection (application error generating response)",
};

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char buf[512];
	size_t i;

	(void)cls;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	buf[strcspn(buf, "\n")] = 0;
	for (i = 0; i < GW_ARRAY_SIZE(mhd_ours); i++) {
		if (!strncmp(buf, mhd_ours[i], strlen(mhd_ours[i]))) {
			gw_dbg("http", "libmicrohttpd: %s", buf);
			return;
		}
	}
	gw_warn("http", "libmicrohttpd: %s", buf);
}

static int parse_listen(const char *s, struct sockaddr_storage *ss, socklen_t *len)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
				  .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL;
	char host[128];
	const char *port;

	if (s[0] == '[') {
		const char *e = strchr(s, ']');

		if (!e || e[1] != ':' || (size_t)(e - s - 1) >= sizeof(host))
			return -EINVAL;
		snprintf(host, sizeof(host), "%.*s", (int)(e - s - 1), s + 1);
		port = e + 2;
	} else {
		const char *c = strrchr(s, ':');

		if (!c || (size_t)(c - s) >= sizeof(host))
			return -EINVAL;
		snprintf(host, sizeof(host), "%.*s", (int)(c - s), s);
		port = c + 1;
	}
	if (getaddrinfo(host, port, &hints, &res) || !res)
		return -EINVAL;
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

static bool is_loopback(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
	if (ss->ss_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)ss)->sin6_addr);
	return false;
}

static char *read_pem(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t n;

	if (!f)
		return NULL;
	buf = calloc(1, 1 << 20);
	if (buf) {
		n = fread(buf, 1, (1 << 20) - 1, f);
		if (!n) {
			free(buf);
			buf = NULL;
		}
	}
	fclose(f);
	return buf;
}

int api_http_start(struct gw_loop *loop, const struct api_http_conf *conf,
		   struct api_agent *app, struct api_http **out)
{
	struct api_http *h = calloc(1, sizeof(*h));
	struct sockaddr_storage ss;
	const union MHD_DaemonInfo *info;
	unsigned int flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
	socklen_t sl = 0;
	int r;

	if (!h)
		return -ENOMEM;
	h->app = app;
	h->loop = loop;
	h->conf = *conf;
	if (!h->conf.body_max)
		h->conf.body_max = API_BODY_MAX_DEFAULT;
	if (!h->conf.max_conns)
		h->conf.max_conns = API_CONNS_DEFAULT;
	if (!h->conf.max_conns_per_ip)
		h->conf.max_conns_per_ip = API_CONNS_PER_IP_DEFAULT;
	if (!h->conf.idle_timeout)
		h->conf.idle_timeout = API_IDLE_TIMEOUT_DEFAULT;
	if (!h->conf.request_timeout)
		h->conf.request_timeout = API_REQUEST_TIMEOUT_DEFAULT;
	if (!h->conf.header_max)
		h->conf.header_max = API_HEADER_MAX_DEFAULT;
	gw_list_init(&h->suspended);
	gw_list_init(&h->conns);
	gw_defer_init(&h->run, on_run_defer);
	r = parse_listen(conf->listen, &ss, &sl);
	if (r) {
		gw_err("http", "--listen %s: expected ADDRESS:PORT with a numeric address",
		       conf->listen);
		goto fail;
	}
	if (conf->tls_cert && conf->tls_key) {
		if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
			gw_err("http", "this libmicrohttpd has no TLS support");
			r = -EOPNOTSUPP;
			goto fail;
		}
		h->cert = read_pem(conf->tls_cert);
		h->key = read_pem(conf->tls_key);
		if (!h->cert || !h->key) {
			gw_err("http", "cannot read the TLS certificate %s or key %s",
			       conf->tls_cert, conf->tls_key);
			r = -EINVAL;
			goto fail;
		}
		flags |= MHD_USE_TLS;
	}
	/* Loopback only by default: anywhere else needs TLS (tokens must not travel in clear)
	 * and the operator saying so. */
	if (!is_loopback(&ss) && !h->cert) {
		gw_err("http", "refusing to listen on %s without TLS: bearer tokens would travel "
		       "in clear (give --tls-cert and --tls-key, and --allow-remote)",
		       conf->listen);
		r = -EPERM;
		goto fail;
	}
	if (!is_loopback(&ss) && !conf->allow_remote) {
		gw_err("http", "refusing to listen on %s: not a loopback address (add "
		       "--allow-remote to serve other hosts)", conf->listen);
		r = -EPERM;
		goto fail;
	}
	/* The limits a hostile client meets (docs/REST.md, "Limits"); TLS adds its files. */
	struct MHD_OptionItem lim[] = {
		{ MHD_OPTION_CONNECTION_LIMIT, h->conf.max_conns, NULL },
		{ MHD_OPTION_PER_IP_CONNECTION_LIMIT, h->conf.max_conns_per_ip, NULL },
		{ MHD_OPTION_CONNECTION_TIMEOUT, h->conf.idle_timeout, NULL },
		/* Twice --header-max: a request a little over the limit is read whole and refused
		 * in JSON (head_over); libmicrohttpd refuses what does not fit on its own. */
		{ MHD_OPTION_CONNECTION_MEMORY_LIMIT, (intptr_t)(h->conf.header_max * 2), NULL },
		{ MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024, NULL },
		/* An HTTP/1.1 request without Host is refused (400), as RFC 9112 asks. */
		{ MHD_OPTION_STRICT_FOR_CLIENT, 1, NULL },
		{ h->cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, h->cert },
		{ h->cert ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, 0, h->key },
		{ MHD_OPTION_END, 0, NULL },
	};

	h->d = MHD_start_daemon(flags, 0, NULL, NULL, on_access, h,
				MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, h,
				MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
				MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
				MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
				MHD_OPTION_URI_LOG_CALLBACK, on_uri, h,
				MHD_OPTION_ARRAY, lim, MHD_OPTION_END);
	if (!h->d) {
		gw_err("http", "cannot listen on %s", conf->listen);
		r = -EADDRINUSE;
		goto fail;
	}
	info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_EPOLL_FD);
	if (!info) {
		r = -EIO;
		goto fail;
	}
	gw_watch_init(&h->w, loop, info->epoll_fd, on_mhd_fd);
	r = gw_watch_set(&h->w, EPOLLIN);
	if (!r)
		r = gw_timer_init(&h->t, loop, on_mhd_timer);
	if (!r) {
		r = gw_timer_init(&h->deadline, loop, on_deadline);
		if (r)
			gw_timer_fini(&h->t);
	}
	if (!r)
		r = gw_timer_arm(&h->deadline, 1000, 1000);
	if (r)
		goto fail;
	gw_info("http", "listening on %s%s", conf->listen, h->cert ? " (https)" : "");
	*out = h;
	return 0;
fail:
	if (h->d)
		MHD_stop_daemon(h->d);
	free(h->cert);
	free(h->key);
	free(h);
	return r;
}

void api_http_stop(struct api_http *h)
{
	int i;

	if (!h)
		return;
	h->stopping = true;
	/* MHD must not be stopped with suspended connections: answer them first. */
	while (!gw_list_empty(&h->suspended)) {
		struct api_req *r = gw_list_first_entry(&h->suspended, struct api_req, snode);

		/* The reply gives back what the hooks held (a queued write leaves its queue). */
		if (!r->stream)
			api_reply_err(r, API_E_UNAVAILABLE, NULL, "the agent is stopping");
		api_req_resume(r);
	}
	for (i = 0; i < 3; i++)
		MHD_run(h->d);
	gw_defer_cancel(&h->run);
	gw_watch_stop(&h->w);
	gw_timer_fini(&h->t);
	gw_timer_fini(&h->deadline);
	MHD_stop_daemon(h->d);
	free(h->cert);
	free(h->key);
	free(h);
}
