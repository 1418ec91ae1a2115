/* SPDX-License-Identifier: MIT */
/*
 * The gateway's control socket (docs/CONTROL.md): a unix stream socket, mode 0600, that the
 * agent uses to apply configuration changes live and to read live state. One JSON object per
 * line each way, answered in order, all inside the gateway's event loop:
 *   {"op":"apply","config":{...}}   diff against the running configuration, change only that
 *   {"op":"config"}                 the running configuration (secrets in clear: root only)
 *   {"op":"state"}                  sessions, per-LUN counters, portals
 *   {"op":"drop_session","tsih":N}  close one session
 *   {"op":"ping"}
 * Replies: {"id":..,"ok":true,...} or {"id":..,"ok":false,"code":"...","message":"...",
 * "errors":[{"field":"...","message":"..."}]}.
 */
#ifndef CTL_SOCK_H
#define CTL_SOCK_H

#include <jansson.h>

#include "conf.h"
#include "gw_loop.h"
#include "isc.h"

struct ctl_sock;

/* Listens on path (a stale socket there is replaced; any other file is an error). gw is the
 * running gateway; gconf its "gateway" section (copied). 0 or -errno. */
int ctl_sock_create(struct gw_loop *loop, const char *path, struct isc_gw *gw,
		    const struct ctl_gateway_conf *gconf, struct ctl_sock **out);
/* Closes every client and removes the socket file. */
void ctl_sock_destroy(struct ctl_sock *s);
/* One request to its reply (new reference); what a client line goes through. */
json_t *ctl_sock_handle(struct ctl_sock *s, const json_t *req);
/* The running configuration as the JSON the config file holds (new reference). */
json_t *ctl_config_dump(const struct isc_gw_conf *c, const struct ctl_gateway_conf *g,
			bool mask_secrets);

#endif
