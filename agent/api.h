/* SPDX-License-Identifier: MIT */
/*
 * isergw-agent: the REST agent (docs/REST.md). It owns the desired configuration (api_store.h),
 * reconciles the gateway to it over the control socket (api_gwc.h), and serves the versioned
 * HTTP API from libmicrohttpd inside the one event loop (api_http.c). Routes live one file per
 * resource (api_r_*.c) and are listed in one table (api_routes.c) that also produces the
 * OpenAPI document.
 */
#ifndef API_H
#define API_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "api_auth.h"
#include "api_err.h"
#include "api_gwc.h"
#include "api_net.h"
#include "api_rcache.h"
#include "api_store.h"
#include "gw_buf.h"
#include "gw_conf.h"
#include "gw_list.h"
#include "gw_loop.h"

#define API_PREFIX "/api/v1"
#define API_MAX_PARAMS 3
#define API_BODY_MAX_DEFAULT (1u << 20)
#define API_MASK "****"

struct api_http;
struct api_req;
struct api_sse;

struct api_conf {
	const char *state_dir;
	const char *listen;		/* "127.0.0.1:8080", "[::1]:8080" */
	const char *gateway_socket;	/* NULL: do not drive a gateway */
	const char *tls_cert;		/* PEM files; both set: HTTPS */
	const char *tls_key;
	bool allow_remote;		/* listen beyond loopback (needs TLS) */
	size_t body_max;
	unsigned int poll_ms;		/* gateway state refresh */
	/* Cluster (docs/CLUSTER.md): store "etcd" keeps the configuration in etcd. */
	const char *store;		/* "file" (default) or "etcd" */
	const char *etcd_endpoints;
	const char *cluster_prefix;
	const char *gateway_id;
	unsigned int port_group;
	unsigned int lease_ttl;
	const char *webui_dir;		/* the dashboard's files, NULL/"": none */
};

struct api_cluster;

struct api_agent {
	struct gw_loop *loop;
	struct api_conf conf;
	struct api_store *store;
	struct api_auth auth;
	struct api_gwc gwc;
	bool gwc_on;
	struct api_http *http;
	/* Writes run one at a time, in arrival order (the rest wait suspended). */
	bool write_busy;
	struct gw_list write_wait;	/* struct api_req.wnode */
	/* Live state: the gateway's last "state" answer (sessions, counters). */
	json_t *gw_state;
	uint64_t gw_state_ms;
	struct gw_timer poll;
	bool poll_busy;
	bool reconciling;
	uint64_t applied_generation;	/* what the gateway runs, 0: unknown */
	char *apply_error;		/* last reconcile failure, NULL: none */
	/* Server-sent events */
	struct gw_list subscribers;	/* struct api_sse.node */
	uint64_t event_id;
	struct gw_timer keepalive;
	json_t *openapi;
	struct api_net net;		/* bonds and RDMA ports */
	struct api_rcache metrics_cache;	/* GET /metrics */
	struct api_rcache metrics_gz;		/* GET /metrics, gzip'ed */
	struct api_rcache targets_cache;	/* GET /api/v1/targets */
	uint64_t started_ms;
	struct api_cluster *cluster;	/* NULL: a gateway alone */
};

/* ---- routes (api_route.c, api_routes.c) ------------------------------------------------ */

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

extern const struct api_route api_routes[];	/* ends with { .method = NULL } */

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
	bool holds_write;
	bool waits_write;
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
	/* The write pipeline's (api_write.c): its queue, and an outstanding write, committed
	 * when the gateway accepts it. */
	struct gw_list wnode;		/* in ag->write_wait */
	json_t *w_config;
	json_t *w_body;
	unsigned int w_status;
	char *w_prefix;
};

struct api_http_conf {
	const char *listen;		/* "127.0.0.1:8080", "[::1]:8080" */
	const char *tls_cert;		/* PEM files; both set: HTTPS */
	const char *tls_key;
	bool allow_remote;		/* listen beyond loopback (needs TLS) */
	size_t body_max;		/* 0: API_BODY_MAX_DEFAULT */
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

const char *api_req_header(struct api_req *r, const char *name);
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
/* Waiting for something asynchronous: MHD stops polling the connection until resume. */
void api_req_suspend(struct api_req *r);
void api_req_resume(struct api_req *r);
/* Builds the error body JSON ({"error":..., "errors":[...]}) used by api_reply_errlist. */
json_t *api_errlist_body(enum api_err e, const struct gw_errlist *errs, const char *prefix);

/* ---- the write pipeline (api_write.c) -------------------------------------------------- */

/* Checks If-Match and returns a private copy of the desired configuration to modify; NULL
 * with the reply set. */
json_t *api_write_begin(struct api_req *r);
/* Validates cfg (stolen), has the gateway apply it, commits it, then replies status with body
 * (stolen; NULL: 204). Errors name fields relative to prefix. Always returns 0. */
int api_write_finish(struct api_req *r, json_t *cfg, unsigned int status, json_t *body,
		     const char *prefix);
/* The next waiting write may run. */
void api_write_release(struct api_agent *ag);
/* A write holds the configuration (between api_write_begin and its reply). */
bool api_write_busy(const struct api_agent *ag);
/* The write pipeline's hook: one write at a time, in arrival order (ctx: the agent). */
extern const struct api_http_hook api_write_hook;
/* Reconciles the gateway to the desired configuration (or adopts the gateway's configuration
 * when nothing was ever stored). */
void api_reconcile(struct api_agent *ag);
/* Asks the gateway for its live state; cb gets the state object or an error. */
int api_gw_state(struct api_agent *ag, api_gwc_cb cb, void *ctx);

/* ---- configuration helpers (api_conf.c) ------------------------------------------------ */

/* Validates a whole configuration with the gateway's own parser: errs gets every problem.
 * 0 or -EINVAL. */
int api_conf_validate(const json_t *cfg, struct gw_errlist *errs);
/* Deep copy with every non-empty secret replaced by "****". */
json_t *api_conf_mask(const json_t *in);
/* The same, dropping the caller's reference to in. */
json_t *api_conf_mask_steal(json_t *in);
/* The target named name in the desired configuration (borrowed), NULL with a 404 reply. */
json_t *api_find_target(struct api_req *r, json_t *cfg, const char *name, ssize_t *idx);
/* In cfg, every secret equal to "****" takes the value at the same place in old (same target
 * and initiator names), so masked exports import unchanged. */
void api_conf_unmask(json_t *cfg, const json_t *old);
/* Array under key (created if missing). */
json_t *api_conf_array(json_t *obj, const char *key);
/* Index of the element whose key equals value, -1 if none. */
ssize_t api_conf_find(const json_t *arr, const char *key, const char *value);
ssize_t api_conf_find_lun(const json_t *luns, uint64_t lun);
/* Parses a LUN path parameter (0..16383). 0 or -EINVAL. */
int api_parse_lun(const char *s, uint64_t *lun);

/* ---- events (api_events.c) ------------------------------------------------------------- */

/* Sends an event to every subscriber: data (stolen) becomes one JSON line. */
void api_event(struct api_agent *ag, const char *type, json_t *data);
int api_events_init(struct api_agent *ag);
void api_events_fini(struct api_agent *ag);
/* Live state changed: emits session events by comparing old and new. */
void api_events_state(struct api_agent *ag, const json_t *old, const json_t *cur);

/* ---- metrics and the OpenAPI document -------------------------------------------------- */

/* Prometheus text exposition of the cached state (malloc'ed). */
char *api_metrics_text(struct api_agent *ag, size_t *len);
json_t *api_openapi_build(const struct api_route *tbl, const char *version);
/* gzip (Content-Encoding) of len bytes (malloc'ed, *out_len), NULL on failure; whether an
 * Accept-Encoding value takes gzip (api_gzip.c). */
char *api_gzip(const char *in, size_t len, size_t *out_len);
bool api_accepts_gzip(const char *accept_encoding);
/* A label value, escaped; the # HELP and # TYPE lines of a family (api_prom.c). */
void api_prom_label(struct gw_buf *b, const char *v);
void api_prom_head(struct gw_buf *b, const char *name, const char *type, const char *help);
/* Per-LUN read/write latency histograms from a gateway "state" answer (api_metrics_lat.c). */
void api_metrics_latency(struct gw_buf *b, const json_t *state);

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

/* ---- live state for readers (api_live.c) --------------------------------------------- */

/* {"listening": true|false|null, "bound"?, "reason"?} of a portal, from the polled state. */
json_t *api_live_portal(struct api_agent *ag, const char *name);

/* ---- the agent (api_agent.c) ----------------------------------------------------------- */

/* The ETag of the desired configuration's generation. */
void api_reply_etag(struct api_req *r);

int api_agent_init(struct api_agent *ag, struct gw_loop *loop, const struct api_conf *conf);
void api_agent_fini(struct api_agent *ag);
const char *api_version(void);

/* Route handlers (api_r_*.c) */
int api_h_health(struct api_req *r);
int api_h_version(struct api_req *r);
int api_h_openapi(struct api_req *r);
int api_h_metrics(struct api_req *r);
int api_h_events(struct api_req *r);
int api_h_targets_list(struct api_req *r);
int api_h_target_create(struct api_req *r);
int api_h_target_get(struct api_req *r);
int api_h_target_put(struct api_req *r);
int api_h_target_delete(struct api_req *r);
int api_h_luns_list(struct api_req *r);
int api_h_lun_create(struct api_req *r);
int api_h_lun_get(struct api_req *r);
int api_h_lun_put(struct api_req *r);
int api_h_lun_delete(struct api_req *r);
int api_h_acls_list(struct api_req *r);
int api_h_acl_create(struct api_req *r);
int api_h_acl_get(struct api_req *r);
int api_h_acl_put(struct api_req *r);
int api_h_acl_delete(struct api_req *r);
int api_h_portals_list(struct api_req *r);
int api_h_portal_create(struct api_req *r);
int api_h_portal_get(struct api_req *r);
int api_h_portal_put(struct api_req *r);
int api_h_portal_delete(struct api_req *r);
int api_h_discovery_get(struct api_req *r);
int api_h_discovery_put(struct api_req *r);
int api_h_sessions_list(struct api_req *r);
int api_h_session_drop(struct api_req *r);
int api_h_config_get(struct api_req *r);
int api_h_config_put(struct api_req *r);
int api_h_config_validate(struct api_req *r);
int api_h_cluster(struct api_req *r);
int api_h_bonds_list(struct api_req *r);
int api_h_bond_get(struct api_req *r);
int api_h_bond_put(struct api_req *r);
int api_h_bond_delete(struct api_req *r);
int api_h_rdma_list(struct api_req *r);

#endif
