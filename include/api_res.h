/* SPDX-License-Identifier: MIT */
/*
 * The REST resources (agent/api/): one file per resource (api_r_*.c), listed with their
 * routes in one table (api_routes[], api_routes.c) that also produces the OpenAPI document; the
 * write pipeline that validates, applies through the gateway and commits every change
 * (api_write.c); configuration helpers, metrics and the gateway's live state for readers.
 */
#ifndef API_RES_H
#define API_RES_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "api_http.h"
#include "gw_buf.h"
#include "gw_conf.h"

#define API_MASK "****"

/* The agent's version (also the OpenAPI document's). */
const char *api_version(void);

/* Every endpoint (ends with { .method = NULL }), registered with the server by the agent. */
extern const struct api_route api_routes[];

/* The state of one resource file each, behind a handle in the hub: the write queue
 * (api_write.c), GET /health's start time, GET /openapi.json's document and GET /metrics'
 * reply caches (api_r_system.c), GET /api/v1/targets' reply cache (api_r_targets.c). */
struct api_writes;
struct api_system;
struct api_targets;

/* What the gateway runs, as the write pipeline last learned it. */
struct api_apply {
	uint64_t generation;		/* applied, 0: unknown */
	char *error;			/* last reconcile failure, NULL: none */
	bool reconciling;
};

/* ---- the write pipeline (api_write.c) -------------------------------------------------- */

/* Checks If-Match and returns a private copy of the desired configuration to modify; NULL
 * with the reply set. */
json_t *api_write_begin(struct api_req *r);
/* Validates cfg (stolen), has the gateway apply it, commits it, then replies status with body
 * (stolen; NULL: 204). Errors name fields relative to prefix. Always returns 0. */
int api_write_finish(struct api_req *r, json_t *cfg, unsigned int status, json_t *body,
		     const char *prefix);
/* The write being built may make a LUN smaller in service (resize with force): its apply
 * says "shrink" to the gateway. Before api_write_finish. */
void api_write_allow_shrink(struct api_req *r);
/* The next waiting write may run. */
void api_write_release(struct api_agent *ag);
/* A write holds the configuration (between api_write_begin and its reply). */
bool api_write_busy(const struct api_agent *ag);
/* The write pipeline's hook: one write at a time, in arrival order (ctx: the agent). */
extern const struct api_http_hook api_write_hook;
/* The write queue: empty, none busy. 0 or -ENOMEM. Destroyed once the server stopped (a
 * request it frees leaves the queue). */
int api_writes_create(struct api_writes **out);
void api_writes_destroy(struct api_writes *w);
/* The gateway went away: what it runs is unknown until the next reconcile. */
void api_apply_lost(struct api_apply *a);
void api_apply_fini(struct api_apply *a);
/* Reconciles the gateway to the desired configuration (or adopts the gateway's configuration
 * when nothing was ever stored). */
void api_reconcile(struct api_agent *ag);
/* Asks the gateway for its live state; cb gets the state object (borrowed) or an error, as
 * api_gwc_call's callback: 0 and cb runs once, or < 0 (no gateway, not connected) and never. */
int api_gw_state(struct api_agent *ag, void (*cb)(void *ctx, int err, json_t *reply),
		 void *ctx);

/* ---- configuration helpers (api_conf.c) ------------------------------------------------ */

/* Validates a whole configuration with the gateway's own parser: errs gets every problem.
 * 0 or -EINVAL. */
int api_conf_validate(const json_t *cfg, struct gw_errlist *errs);
/* Deep copy with every non-empty secret replaced by "****". */
json_t *api_conf_mask(const json_t *in);
/* The same, dropping the caller's reference to in. */
json_t *api_conf_mask_steal(json_t *in);
/* The target named name in cfg (borrowed; an element of cfg, as json_object_get gives it),
 * NULL with a 404 reply. */
json_t *api_find_target(struct api_req *r, const json_t *cfg, const char *name, ssize_t *idx);
/* The target the request's first parameter names in the desired configuration (borrowed,
 * read-only: the store's), NULL with a 404 reply. */
const json_t *api_stored_target(struct api_req *r);
/* In cfg, every secret equal to "****" takes the value at the same place in old (same target
 * and initiator names), so masked exports import unchanged. */
void api_conf_unmask(json_t *cfg, const json_t *old);
/* Keys the gateway reads from its own file and the API may not move (gateway.control_socket:
 * the socket this agent talks through). Absent in cfg: old's value is carried over. Present
 * and different: an error naming the key, and -EPERM. */
int api_conf_keep_fixed(json_t *cfg, const json_t *old, struct gw_errlist *errs);
/* Array under key (created if missing). */
json_t *api_conf_array(json_t *obj, const char *key);
/* Index of the element whose key equals value, -1 if none. */
ssize_t api_conf_find(const json_t *arr, const char *key, const char *value);
ssize_t api_conf_find_lun(const json_t *luns, uint64_t lun);
/* Parses a LUN path parameter (0..16383). 0 or -EINVAL. */
int api_parse_lun(const char *s, uint64_t *lun);

/* Live state changed: emits session events by comparing old and new (api_r_sessions.c). */
void api_events_state(struct api_agent *ag, const json_t *old, const json_t *cur);

/* ---- where API backstores may lie (api_bsdirs.c) ---------------------------------------- */

struct api_bsdirs {
	char **dir;			/* resolved folders */
	size_t n;
	char *state;			/* the agent's state folder, resolved (its own files) */
	char *text;			/* the list for messages */
};

/* list: ","-separated folders (NULL: state_dir and /dev/disk/by-id; "": none). 0 or -errno. */
int api_bsdirs_init(struct api_bsdirs *d, const char *list, const char *state_dir);
void api_bsdirs_fini(struct api_bsdirs *d);
/* "DIR, DIR" */
const char *api_bsdirs_list(struct api_bsdirs *d);
/* 0 when path may back a file (block: block) backstore given through the API: absolute, no
 * "." or "..", inside a folder once resolved (a block backstore may also be a symlink in a
 * folder to a block device: /dev/disk/by-id), not one of the agent's own files. -EACCES with
 * why (naming the allowed folders) otherwise. */
int api_bsdirs_check(struct api_bsdirs *d, const char *path, bool block, char *why, size_t len);
/* Every file and block backstore path of cfg that old does not hold already: errs gets one
 * error per refused path ("targets[i].luns[j].backstore.path"). 0 or -EACCES. */
int api_bsdirs_check_config(struct api_bsdirs *d, const json_t *cfg, const json_t *old,
			    struct gw_errlist *errs);

/* ---- metrics and the OpenAPI document -------------------------------------------------- */

/* Health's start time (now), the OpenAPI document (stolen, also on failure: the composition
 * builds it from the route table) and empty /metrics caches. 0 or -ENOMEM. */
int api_system_create(json_t *openapi, struct api_system **out);
void api_system_destroy(struct api_system *s);
/* GET /api/v1/targets' empty reply cache. 0 or -ENOMEM. */
int api_targets_create(struct api_targets **out);
void api_targets_destroy(struct api_targets *t);

/* Prometheus text exposition of the cached state (malloc'ed). */
char *api_metrics_text(struct api_agent *ag, size_t *len);
json_t *api_openapi_build(const struct api_route *tbl, const char *version);
/* A label value, escaped; the # HELP and # TYPE lines of a family (api_prom.c). */
void api_prom_label(struct gw_buf *b, const char *v);
void api_prom_head(struct gw_buf *b, const char *name, const char *type, const char *help);
/* Per-LUN read/write latency histograms from a gateway "state" answer (api_metrics_lat.c). */
void api_metrics_latency(struct gw_buf *b, const json_t *state);

/* Bond and RDMA port metrics (api_r_net.c). */
void api_metrics_net(struct gw_buf *b, struct api_agent *ag);

/* ---- live state for readers (api_live.c) --------------------------------------------- */

/* {"listening": true|false|null, "bound"?, "reason"?} of a portal, from the polled state. */
json_t *api_live_portal(struct api_agent *ag, const char *name);

/* The ETag of the desired configuration's generation (api_conf.c). */
void api_reply_etag(struct api_req *r);

#endif
