/* SPDX-License-Identifier: MIT */
/*
 * isergw-agent: the REST agent (docs/REST.md). It owns the desired configuration (api_store.h),
 * reconciles the gateway to it over the control socket (api_gwc.h), and serves the versioned
 * HTTP API (api_http.h) with the resources of api_res.h. The composition (agent/api_agent.c)
 * starts the rooms and wires their callbacks; struct api_agent is the hub it hands every
 * request (r->ag): handles into the rooms, and the little state the resources share. A file
 * includes the header of each room it uses.
 */
#ifndef API_AGENT_H
#define API_AGENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "api_res.h"

struct gw_loop;

struct api_conf {
	const char *state_dir;
	const char *listen;		/* "127.0.0.1:8080", "[::1]:8080" */
	const char *gateway_socket;	/* NULL: do not drive a gateway */
	const char *tls_cert;		/* PEM files; both set: HTTPS */
	const char *tls_key;
	bool allow_remote;		/* listen beyond loopback (needs TLS) */
	size_t body_max;
	/* Limits (docs/REST.md "Limits"); 0: the defaults of api_http.h and api_auth.h. */
	unsigned int max_conns, max_conns_per_ip;
	unsigned int idle_timeout, request_timeout;	/* seconds */
	size_t header_max;
	unsigned int auth_fails, auth_window, auth_backoff;
	/* Folders a file or block backstore given through the API must lie in, ","-separated;
	 * NULL: the state folder and /dev/disk/by-id; "": none. */
	const char *backstore_dirs;
	unsigned int poll_ms;		/* gateway state refresh */
	/* Cluster (docs/CLUSTER.md): store "etcd" keeps the configuration in etcd. */
	const char *store;		/* "file" (default) or "etcd" */
	const char *etcd_endpoints;
	const char *etcd_ca;		/* PEM files for https:// endpoints, NULL: none */
	const char *etcd_cert;
	const char *etcd_key;
	const char *cluster_prefix;
	const char *gateway_id;
	unsigned int port_group;
	unsigned int lease_ttl;
	const char *webui_dir;		/* the dashboard's files, NULL/"": none */
	/* Where PUT /api/v1/bonds/{bond}?apply=true writes systemd-networkd files; NULL/"":
	 * API_NETWORKD_DIR (api_bond.h). */
	const char *networkd_dir;
};

struct api_agent_own;
struct api_cluster;
struct api_events;
struct api_gate;
struct api_gwc;
struct api_http;
struct api_net;
struct api_store;

struct api_agent {
	/* Handles the composition wires (each room's state is its own, or the composition's:
	 * api_agent_own): reached through the room's header. */
	const struct api_conf *conf;	/* the options, defaults filled in */
	struct api_store *store;	/* the desired configuration (api_store.h) */
	struct api_gwc *gwc;		/* the gateway's client (api_gwc.h), NULL: no gateway */
	struct api_http *http;		/* the server, for its counters (api_http.h) */
	struct api_events *events;	/* server-sent events (api_http.h) */
	struct api_gate *gate;		/* failed tokens per address: /metrics (api_auth.h) */
	struct api_net *net;		/* bonds and RDMA ports (api_net.h) */
	struct api_cluster *cluster;	/* api_cluster.h; NULL: a gateway alone */
	struct api_agent_own *own;	/* the composition's own (api_agent.c) */
	/* Shared: written by one file, read by several resources. */
	struct api_apply apply;		/* what the gateway runs: api_write.c's */
	json_t *gw_state;		/* the gateway's last "state": the poll's (api_agent.c) */
	uint64_t gw_state_ms;
	struct api_bsdirs bsdirs;	/* where API backstores may lie (api_bsdirs.c) */
	/* One resource file's own state each (a handler's only state is r->ag): api_res.h. */
	struct api_writes *writes;	/* the write queue (api_write.c) */
	struct api_system *system;	/* uptime, OpenAPI, /metrics' caches (api_r_system.c) */
	struct api_targets *targets;	/* GET /api/v1/targets' cache (api_r_targets.c) */
};

/* ---- the agent (api_agent.c) ----------------------------------------------------------- */

int api_agent_init(struct api_agent *ag, struct gw_loop *loop, const struct api_conf *conf);
void api_agent_fini(struct api_agent *ag);
/* Reads the token list again (SIGHUP); a file that does not load keeps the tokens in use
 * (logged). 0 or -errno. */
int api_agent_reload_tokens(struct api_agent *ag);

#endif
