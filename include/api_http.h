/* SPDX-License-Identifier: MIT */
/*
 * The agent's HTTP server (agent/http/): libmicrohttpd inside the one event loop, the router
 * (routes are a table the application registers), requests and replies with errors from the
 * one table in api_err.h, streamed replies and server-sent events, and the dashboard's static
 * files. The server knows none of its plug-ins: the access check (api_auth.h), the write queue
 * and the static files are hooks registered with it (struct api_http_hook).
 */
#ifndef API_HTTP_H
#define API_HTTP_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "api_auth.h"
#include "api_err.h"
#include "gw_buf.h"
#include "gw_conf.h"
#include "gw_list.h"
#include "gw_loop.h"

#define API_PREFIX "/api/v1"
#define API_MAX_PARAMS 3
#define API_BODY_MAX_DEFAULT (1u << 20)
/* The limits a hostile client meets (docs/REST.md, "Limits"); 0 in api_http_conf: these. */
#define API_CONNS_DEFAULT 1024		/* connections at once */
#define API_CONNS_PER_IP_DEFAULT 128	/* connections at once from one address */
#define API_IDLE_TIMEOUT_DEFAULT 60	/* seconds a connection may send nothing */
#define API_REQUEST_TIMEOUT_DEFAULT 30	/* seconds to receive a request's headers and body */
#define API_HEADER_MAX_DEFAULT 32768	/* bytes of a request line and its headers */

struct api_agent;		/* the application's, handed to every request */
struct api_http;
struct api_req;
struct api_sse;
struct api_wreq;

/* ---- routes (api_route.c; the table is the application's) -------------------------- */

typedef int (*api_handler_fn)(struct api_req *r);

enum api_route_flags {
	API_RF_WRITE = 1 << 0,		/* changes the desired configuration: serialized */
	API_RF_GATEWAY = 1 << 1,	/* needs the live gateway */
	API_RF_TEXT = 1 << 2,		/* answers text, not JSON */
};

struct api_route {
	const char *method;
	const char *pattern;		/* "/api/v1/targets/{target}/luns/{lun}" */
	enum api_role role;
	api_handler_fn fn;
	unsigned int flags;
	unsigned int ok_status;
	const char *tag;
	const char *summary;
	const char *body;		/* request body schema (components name), NULL: none */
	const char *result;		/* response schema (components name), NULL: none */
	const char *query;		/* query parameters, "name:description;..." */
};

/*
 * Matches method and path (no query) against tbl. On success returns the route with params[]
 * set to malloc'ed captures in pattern order (*nparams of them). NULL with *err -ENOENT (no
 * such path), -EOPNOTSUPP (path exists, method does not: *allow lists the methods), -EINVAL
 * (a capture is empty or too long).
 */
const struct api_route *api_route_match(const struct api_route *tbl, const char *method,
					const char *path, char **params, unsigned int *nparams,
					char *allow, size_t allow_len, int *err);

/*
 * The path of a request target as the client sent it (up to '?', percent escapes undone) into
 * *out (malloc'ed). -EINVAL with *why when no route and no file may ever see it: it does not
 * begin with '/', holds a malformed escape, a NUL or other control character, an encoded '/',
 * invalid UTF-8, a "." or ".." segment (plain or encoded) or an empty one ("/" alone and one
 * trailing slash are fine). -ENOMEM.
 */
int api_route_path(const char *target, char **out, const char **why);
/* The query of a request target (after '?', if any): -EINVAL with *why when a value would
 * decode to a NUL or another control character, holds a malformed escape or invalid UTF-8
 * (the server decodes query values, and a decoded NUL would cut one short). 0 otherwise. */
int api_route_query(const char *target, const char **why);

/* ---- requests and replies (api_http.c) ------------------------------------------------- */

#define API_MAX_HEADERS 8

struct api_stream_ops;

struct api_req {
	struct api_agent *ag;		/* the application's (api_http_start), opaque to the core */
	struct api_http *http;
	void *conn;			/* struct MHD_Connection */
	char method[16];
	char *url;			/* the request target as sent (encoded, with the query) */
	struct gw_buf body;
	bool too_large;
	bool started;			/* the access handler has seen it */
	bool dispatched;
	bool admitted;			/* the access hooks let it in */
	bool suspended;
	bool parked;			/* suspended by api_req_park (nothing under way) */
	bool gone;			/* its client went away while it was suspended */
	enum api_role role;
	const char *token_name;
	const struct api_route *route;
	char *params[API_MAX_PARAMS];
	unsigned int nparams;
	/* The reply, built when the handler (or a gateway callback) is done. */
	bool replied;
	unsigned int status;
	char *resp_body;
	size_t resp_len;
	const char *resp_type;
	char *hdr_name[API_MAX_HEADERS];
	char *hdr_value[API_MAX_HEADERS];
	unsigned int nhdr;
	const struct api_stream_ops *stream;	/* a streamed reply (GET /events), NULL: none */
	void *stream_ctx;
	struct gw_list snode;		/* in the server's suspended list */
	struct api_wreq *wr;		/* the write pipeline's (api_write.c), opaque here */
};

struct api_http_conf {
	const char *listen;		/* "127.0.0.1:8080", "[::1]:8080" */
	const char *tls_cert;		/* PEM files; both set: HTTPS */
	const char *tls_key;
	bool allow_remote;		/* listen beyond loopback (needs TLS) */
	size_t body_max;		/* 0: API_BODY_MAX_DEFAULT */
	unsigned int max_conns;		/* 0: API_CONNS_DEFAULT */
	unsigned int max_conns_per_ip;	/* 0: API_CONNS_PER_IP_DEFAULT */
	unsigned int idle_timeout;	/* seconds, 0: API_IDLE_TIMEOUT_DEFAULT */
	/* A request (its line, headers and body) must arrive whole within this many seconds of
	 * the connection's start or the previous reply, however slowly it trickles in: a slow
	 * client is cut off (the idle timeout alone never ends one that sends a byte a second). */
	unsigned int request_timeout;	/* seconds, 0: API_REQUEST_TIMEOUT_DEFAULT */
	size_t header_max;		/* 0: API_HEADER_MAX_DEFAULT */
};

/*
 * What the server calls instead of knowing its plug-ins (the write pipeline, the access check,
 * the dashboard's files): each registered hook is asked in registration order; any member may
 * be NULL.
 */
struct api_http_hook {
	/* A path no route has (decoded, no query): true when the hook replied. */
	bool (*serve)(void *ctx, struct api_req *r, const char *path);
	/* A route needing role `need`: 0 lets the request in, < 0 with the reply set (401/403). */
	int (*access)(void *ctx, struct api_req *r, enum api_role need);
	/* Just before the handler: 0 runs it, > 0 the hook parked the request (suspended; it is
	 * dispatched again on resume), < 0 an -errno reply. */
	int (*admit)(void *ctx, struct api_req *r);
	/* A reply was set: what admit took is given back. */
	void (*release)(void *ctx, struct api_req *r);
	/* The request is freed. */
	void (*gone)(void *ctx, struct api_req *r);
};

#define API_HTTP_HOOKS_MAX 8

/* A streamed reply: read and free are MHD's content reader and its free callback (the stream
 * can outlive the request); read returns bytes, 0 when it suspended the request until there
 * is more, API_STREAM_END at the end. detach: the request is gone. */
#define API_STREAM_END ((ssize_t)-1)
/* The client is gone (r->gone): the connection closes without ending the stream. */
#define API_STREAM_ABORT ((ssize_t)-2)
struct api_stream_ops {
	ssize_t (*read)(void *ctx, uint64_t pos, char *buf, size_t max);
	void (*free)(void *ctx);
	void (*detach)(void *ctx);
};

/* Listens; app is handed to every request as r->ag. Register routes and hooks before the loop
 * runs. */
int api_http_start(struct gw_loop *loop, const struct api_http_conf *conf,
		   struct api_agent *app, struct api_http **out);
void api_http_stop(struct api_http *h);
/* The route table (ends with { .method = NULL }); without one every path is a 404. */
void api_http_routes(struct api_http *h, const struct api_route *tbl);
int api_http_hook(struct api_http *h, const struct api_http_hook *ops, void *ctx);
/* Requests that reached a handler. */
uint64_t api_http_requests(const struct api_http *h);
/* Connections cut off because their request did not arrive within request_timeout. */
uint64_t api_http_cut(const struct api_http *h);
/* Client connections open now; requests suspended now (waiting for the gateway, the store, an
 * earlier write or an event); suspended requests whose client went away, in all. */
unsigned int api_http_conns(const struct api_http *h);
unsigned int api_http_suspended(const struct api_http *h);
uint64_t api_http_gone(const struct api_http *h);
/* The server's limits in effect (defaults filled in). */
const struct api_http_conf *api_http_conf(const struct api_http *h);

const char *api_req_header(struct api_req *r, const char *name);
/* The client's address as text ("127.0.0.1", "::1") into buf; "?" when unknown. */
void api_req_peer(struct api_req *r, char *buf, size_t len);
const char *api_req_query(struct api_req *r, const char *name);
/* "true"/"1"/"yes" query flags. */
bool api_req_flag(struct api_req *r, const char *name);
/* The body as a JSON object (new reference); NULL with the reply set (400/422). */
json_t *api_req_json(struct api_req *r);

void api_reply_json(struct api_req *r, unsigned int status, json_t *body);
void api_reply_text(struct api_req *r, unsigned int status, const char *type, char *text,
		    size_t len);
void api_reply_err(struct api_req *r, enum api_err e, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
void api_reply_errno(struct api_req *r, int err, const char *field);
/* 422-style reply listing every error; field names lose `prefix` (the resource's own path). */
void api_reply_errlist(struct api_req *r, enum api_err e, const struct gw_errlist *errs,
		       const char *prefix);
void api_reply_header(struct api_req *r, const char *name, const char *value);
/* 200 with a body read piece by piece (ops), of Content-Type type. */
void api_reply_stream(struct api_req *r, const struct api_stream_ops *ops, void *ctx,
		      const char *type);
/*
 * Waiting for something asynchronous (a callback that resumes it): MHD stops polling the
 * connection until resume, and the loop watches it for the client going away (a close, a
 * half-close or a reset): r->gone is set, a stream is resumed at once (its read should return
 * API_STREAM_ABORT), a request ends unanswered when its callback resumes it.
 */
void api_req_suspend(struct api_req *r);
/* The same for a request waiting with nothing under way (a queue's): a gone client ends it
 * at once (the hooks' gone undoes what parked it). */
void api_req_park(struct api_req *r);
void api_req_resume(struct api_req *r);
/* Builds the error body JSON ({"error":..., "errors":[...]}) used by api_reply_errlist. */
json_t *api_errlist_body(enum api_err e, const struct gw_errlist *errs, const char *prefix);

/* ---- server-sent events (api_events.c) ---------------------------------------------- */

struct api_events {
	struct gw_list subscribers;	/* struct api_sse.node */
	unsigned int n;			/* subscribers */
	uint64_t event_id;
	struct gw_timer keepalive;
};

int api_events_init(struct api_events *ev, struct gw_loop *loop);
void api_events_fini(struct api_events *ev);
/* Sends an event to every subscriber: data (stolen) becomes one JSON line. */
void api_event(struct api_events *ev, const char *type, json_t *data);
/* Makes the request a subscriber: a streamed text/event-stream reply that begins with hello
 * (len bytes of event-stream lines). 0 or -ENOMEM. */
int api_events_subscribe(struct api_events *ev, struct api_req *r, const char *hello,
			 size_t len);

/* ---- the dashboard's static files (api_static.c) ------------------------------------- */

#ifndef API_WEBUI_DIR
#define API_WEBUI_DIR "/usr/share/isergw/webui"
#endif

/* True when path (no query) is the dashboard's: "/" or "/ui/...". */
bool api_static_path(const char *path);
/* The hook that serves "/" and "/ui/..." from the folder its ctx names (const char *, NULL or
 * "": no dashboard, a 404). */
extern const struct api_http_hook api_static_hook;
/* The file under root a dashboard path names, resolved (malloc'ed into *file). -ENOENT when
 * missing, a segment is "."/".."/hidden, or the resolved file lies outside root. */
int api_static_resolve(const char *root, const char *path, char **file);
/* Content-Type by file name extension. */
const char *api_static_type(const char *name);

/* ---- response helpers (api_gzip.c) ------------------------------------------------- */

/* gzip (Content-Encoding) of len bytes (malloc'ed, *out_len), NULL on failure; whether an
 * Accept-Encoding value takes gzip (api_gzip.c). */
char *api_gzip(const char *in, size_t len, size_t *out_len);
bool api_accepts_gzip(const char *accept_encoding);

#endif
