/* SPDX-License-Identifier: MIT */
/*
 * The agent's client of the gateway control socket (docs/CONTROL.md): one unix stream
 * connection carrying one JSON object per line each way, requests answered in order. It lives
 * in the agent's event loop, reconnects every retry interval while the gateway is away, and
 * tells its owner when the gateway (re)appears so the agent can reconcile it.
 *
 * Event lines the gateway sends after a "watch" request go to ops->event, not to a request.
 *
 * Async rule: api_gwc_call() returning < 0 never calls cb; returning 0 calls it exactly once,
 * from the loop, with the reply or with -ENOTCONN / -ETIMEDOUT.
 */
#ifndef API_GWC_H
#define API_GWC_H

#include <jansson.h>
#include <stdbool.h>

#include "gw_buf.h"
#include "gw_list.h"
#include "gw_loop.h"

struct api_gwc;

/* reply is borrowed (NULL when err < 0). */
typedef void (*api_gwc_cb)(void *ctx, int err, json_t *reply);

struct api_gwc_ops {
	void (*connected)(struct api_gwc *g, void *arg);
	void (*disconnected)(struct api_gwc *g, void *arg);
	/* A line of the gateway's own, {"event":TYPE,"data":{...}} with no "id", once the
	 * connection sent {"op":"watch"} (data borrowed). May be NULL: ignored. */
	void (*event)(struct api_gwc *g, const char *type, json_t *data, void *arg);
};

struct api_gwc {
	struct gw_loop *loop;
	char *path;
	int fd;
	bool connected;
	bool connecting;
	struct gw_watch w;
	struct gw_timer timer;		/* reconnect, request timeouts */
	struct gw_buf in, out;
	struct gw_list pending;		/* struct api_gwc_req, oldest first */
	unsigned int timeout_ms;
	unsigned int retry_ms;
	const struct api_gwc_ops *ops;
	void *arg;
	uint64_t next_id;
};

int api_gwc_init(struct api_gwc *g, struct gw_loop *loop, const char *path,
		 const struct api_gwc_ops *ops, void *arg);
void api_gwc_fini(struct api_gwc *g);
/* Sends req (stolen); see the async rule above. */
int api_gwc_call(struct api_gwc *g, json_t *req, api_gwc_cb cb, void *ctx);
/* Connected to the gateway now; false for NULL (no gateway to drive). */
bool api_gwc_connected(const struct api_gwc *g);
/* Drops the connection (tests; the agent reconnects on its own). */
void api_gwc_disconnect(struct api_gwc *g, int err);

#endif
