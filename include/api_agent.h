/* SPDX-License-Identifier: MIT */
/*
 * isergw-agent: the REST agent (docs/REST.md). It owns the desired configuration (api_store.h),
 * reconciles the gateway to it over the control socket (api_gwc.h), and serves the versioned
 * HTTP API (api_http.h) with the resources of api_res.h. struct api_agent is the composition
 * (agent/api_agent.c) that wires those rooms together; each room keeps its own state struct in
 * it (the store, the token list, the gateway client, the write queue, the event subscribers,
 * the network state, the cluster).
 */
#ifndef API_AGENT_H
#define API_AGENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "api_auth.h"
#include "api_gwc.h"
#include "api_http.h"
#include "api_net.h"
#include "api_rcache.h"
#include "api_res.h"
#include "api_store.h"
#include "gw_loop.h"

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

struct api_cluster;

struct api_agent {
	struct gw_loop *loop;
	struct api_conf conf;
	struct api_store *store;
	struct api_auth auth;
	struct api_gate gate;		/* failed tokens per address, guarding auth */
	struct api_bsdirs bsdirs;	/* where API backstores may lie (api_bsdirs.c) */
	struct api_gwc gwc;
	bool gwc_on;
	struct api_http *http;
	struct api_writes writes;	/* api_write.c's */
	/* Live state: the gateway's last "state" answer (sessions, counters). */
	json_t *gw_state;
	uint64_t gw_state_ms;
	struct gw_timer poll;
	bool poll_busy;
	bool net_busy, net_again;	/* a "net" request in flight; another wanted after it */
	struct api_apply apply;		/* what the gateway runs (api_write.c's) */
	struct api_events events;	/* server-sent events (api_events.c) */
	json_t *openapi;
	struct api_net net;		/* bonds and RDMA ports */
	struct api_rcache metrics_cache;	/* GET /metrics */
	struct api_rcache metrics_gz;		/* GET /metrics, gzip'ed */
	struct api_rcache targets_cache;	/* GET /api/v1/targets */
	uint64_t started_ms;
	struct api_cluster *cluster;	/* NULL: a gateway alone */
};

/* ---- the agent (api_agent.c) ----------------------------------------------------------- */

int api_agent_init(struct api_agent *ag, struct gw_loop *loop, const struct api_conf *conf);
void api_agent_fini(struct api_agent *ag);

#endif
