// SPDX-License-Identifier: MIT
/*
 * The agent object: store, tokens, gateway client, HTTP server and the state poll, wired
 * together in one loop. The gateway (re)connecting triggers reconciliation; the poll keeps the
 * live state that /metrics and the session events use.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api_agent.h"
#include "api_cluster.h"
#include "api_etcd.h"
#include "gw_log.h"

static void on_poll_reply(void *ctx, int err, json_t *reply)
{
	struct api_agent *ag = ctx;

	ag->poll_busy = false;
	if (err < 0 || !json_is_true(json_object_get(reply, "ok")))
		return;
	api_events_state(ag, ag->gw_state, reply);
	json_decref(ag->gw_state);
	ag->gw_state = json_incref(reply);
	ag->gw_state_ms = gw_now_ms();
}

static void on_poll(struct gw_timer *t)
{
	struct api_agent *ag = gw_container_of(t, struct api_agent, poll);

	if (ag->poll_busy || !ag->gwc.connected)
		return;
	if (api_gw_state(ag, on_poll_reply, ag) == 0)
		ag->poll_busy = true;
}

/* ---- the gateway's network model (agent/net): watched, read again on "changed" --------- */

static void net_fetch(struct api_agent *ag);

static void on_net_reply(void *ctx, int err, json_t *reply)
{
	struct api_agent *ag = ctx;

	ag->net_busy = false;
	if (err >= 0 && json_is_object(json_object_get(reply, "net")))
		api_net_set_model(&ag->net, json_object_get(reply, "net"));
	else if (err >= 0)
		gw_warn("agent", "the gateway has no network model (%s): no bond or RDMA status",
			json_string_value(json_object_get(reply, "message")) ?: "?");
	if (ag->net_again && ag->gwc.connected) {
		ag->net_again = false;
		net_fetch(ag);
	}
}

/* One "net" request at a time; a "changed" meanwhile asks for one more after it. */
static void net_fetch(struct api_agent *ag)
{
	if (ag->net_busy) {
		ag->net_again = true;
		return;
	}
	if (api_gwc_call(&ag->gwc, json_pack("{s:s}", "op", "net"), on_net_reply, ag) == 0)
		ag->net_busy = true;
}

static void on_watch_reply(void *ctx, int err, json_t *reply)
{
	(void)ctx;
	if (err >= 0 && !json_is_true(json_object_get(reply, "ok")))
		gw_warn("agent", "the gateway does not send network events (%s)",
			json_string_value(json_object_get(reply, "message")) ?: "?");
}

static void on_gw_event(struct api_gwc *g, const char *type, json_t *data, void *arg)
{
	struct api_agent *ag = arg;

	(void)g;
	if (!strcmp(type, "pr_commit")) {
		/* A PERSISTENT RESERVE OUT to commit to etcd (docs/CLUSTER.md). */
		if (ag->cluster)
			api_cluster_pr_commit(ag->cluster, data);
		return;
	}
	api_net_gw_event(&ag->net, type, data);
	if (!strcmp(type, "changed"))
		net_fetch(ag);
}

static void on_gw_connected(struct api_gwc *g, void *arg)
{
	struct api_agent *ag = arg;

	(void)g;
	api_event(&ag->events, "gateway", json_pack("{s:b}", "connected", 1));
	/* Subscribed first, then the model: a change in between is an event after it. */
	ag->net_busy = ag->net_again = false;
	api_gwc_call(&ag->gwc, json_pack("{s:s}", "op", "watch"), on_watch_reply, ag);
	/* Its commits arrive as events: the reservations' state only after the subscription. */
	if (ag->cluster)
		api_cluster_gw_up(ag->cluster);
	net_fetch(ag);
	api_reconcile(ag);
	on_poll(&ag->poll);
}

static void on_gw_disconnected(struct api_gwc *g, void *arg)
{
	struct api_agent *ag = arg;

	(void)g;
	api_apply_lost(&ag->apply);
	if (ag->cluster)
		api_cluster_gw_lost(ag->cluster);
	ag->poll_busy = false;
	ag->net_busy = ag->net_again = false;
	api_net_gw_lost(&ag->net);
	json_decref(ag->gw_state);
	ag->gw_state = NULL;
	api_event(&ag->events, "gateway", json_pack("{s:b}", "connected", 0));
}

static void on_cluster_event(struct api_agent *ag, const char *type, json_t *data)
{
	api_event(&ag->events, type, data);
}

static void on_lease_reply(void *ctx, int err, json_t *reply)
{
	(void)ctx;
	if (err >= 0 && !json_is_true(json_object_get(reply, "ok")))
		gw_warn("cluster", "the gateway does not take leases (%s): it cannot fence itself",
			json_string_value(json_object_get(reply, "message")) ?: "?");
}

/* Fencing (docs/CLUSTER.md): the gateway's ownership is valid for valid_ms from now. */
static void on_cluster_lease(struct api_agent *ag, uint64_t valid_ms)
{
	if (ag->gwc_on && ag->gwc.connected)
		api_gwc_call(&ag->gwc, json_pack("{s:s, s:I}", "op", "lease", "valid_ms",
						 (json_int_t)valid_ms), on_lease_reply, ag);
}

/* The cluster's persistent reservations talk to the gateway through here. */
static int on_cluster_gw_call(struct api_agent *ag, json_t *req, api_cluster_gw_cb cb,
			      void *ctx)
{
	if (!ag->gwc_on || !ag->gwc.connected) {
		json_decref(req);
		return -ENOTCONN;
	}
	return api_gwc_call(&ag->gwc, req, cb, ctx);
}

/* Bond failovers and RDMA port changes (the gateway's) become server-sent events. */
static void on_net_event(void *ctx, const char *type, json_t *data)
{
	struct api_agent *ag = ctx;

	api_event(&ag->events, type, data);
}

static const struct api_gwc_ops api_gwc_agent_ops = {
	.connected = on_gw_connected,
	.disconnected = on_gw_disconnected,
	.event = on_gw_event,
};

static int open_etcd_store(struct api_agent *ag)
{
	const struct api_conf *conf = &ag->conf;
	struct api_etcd_conf ec = {
		.endpoints = conf->etcd_endpoints,
		.ca_file = conf->etcd_ca,
		.cert_file = conf->etcd_cert,
		.key_file = conf->etcd_key,
	};
	struct api_etcd *e;
	char *cache = NULL;
	int r;

	if (!conf->etcd_endpoints || !conf->cluster_prefix || !conf->gateway_id ||
	    !conf->port_group) {
		gw_err("agent", "--store etcd needs --etcd-endpoints, --cluster-prefix, "
		       "--gateway-id and --port-group");
		return -EINVAL;
	}
	r = api_etcd_create(&ec, ag->loop, &e);
	if (r)
		return r;
	if (asprintf(&cache, "%s/etcd-cache.json", conf->state_dir) < 0) {
		api_etcd_destroy(e);
		return -ENOMEM;
	}
	r = api_store_open_etcd(e, conf->cluster_prefix, cache, &ag->store);
	free(cache);
	return r;
}

/* The server knows none of its plug-ins: the routes, the access check, the write queue and the
 * dashboard's files are registered here. */
static int start_http(struct api_agent *ag)
{
	struct api_http_conf hc = {
		.listen = ag->conf.listen,
		.tls_cert = ag->conf.tls_cert,
		.tls_key = ag->conf.tls_key,
		.allow_remote = ag->conf.allow_remote,
		.body_max = ag->conf.body_max,
		.max_conns = ag->conf.max_conns,
		.max_conns_per_ip = ag->conf.max_conns_per_ip,
		.idle_timeout = ag->conf.idle_timeout,
		.request_timeout = ag->conf.request_timeout,
		.header_max = ag->conf.header_max,
	};
	int r;

	r = api_http_start(ag->loop, &hc, ag, &ag->http);
	if (r)
		return r;
	api_http_routes(ag->http, api_routes);
	r = api_http_hook(ag->http, &api_static_hook, (void *)ag->conf.webui_dir);
	if (!r)
		r = api_http_hook(ag->http, &api_auth_hook, &ag->gate);
	if (!r)
		r = api_http_hook(ag->http, &api_write_hook, ag);
	if (r) {
		api_http_stop(ag->http);
		ag->http = NULL;
	}
	return r;
}

int api_agent_init(struct api_agent *ag, struct gw_loop *loop, const struct api_conf *conf)
{
	int r;

	memset(ag, 0, sizeof(*ag));
	ag->loop = loop;
	ag->conf = *conf;
	if (!ag->conf.body_max)
		ag->conf.body_max = API_BODY_MAX_DEFAULT;
	if (!ag->conf.poll_ms)
		ag->conf.poll_ms = 1000;
	ag->started_ms = gw_now_ms();
	api_writes_init(&ag->writes);
	if (mkdir(conf->state_dir, 0700) < 0 && errno != EEXIST) {
		r = -errno;
		gw_err("agent", "state directory %s: %s", conf->state_dir, strerror(-r));
		return r;
	}
	if (conf->store && !strcmp(conf->store, "etcd"))
		r = open_etcd_store(ag);
	else
		r = api_store_open_file(conf->state_dir, &ag->store);
	if (r) {
		gw_err("agent", "cannot open the configuration store in %s: %s", conf->state_dir,
		       strerror(-r));
		return r;
	}
	gw_info("agent", "desired configuration: generation %llu (%s store in %s)",
		(unsigned long long)api_store_generation(ag->store), api_store_name(ag->store),
		conf->state_dir);
	r = api_auth_open(&ag->auth, conf->state_dir);
	if (r)
		goto fail_store;
	api_gate_init(&ag->gate, &ag->auth, conf->auth_fails, conf->auth_window,
		      conf->auth_backoff);
	r = api_bsdirs_init(&ag->bsdirs, conf->backstore_dirs, conf->state_dir);
	if (r)
		goto fail_auth_net;
	r = api_net_init(&ag->net, conf->state_dir, on_net_event, ag);
	if (r)
		goto fail_auth_net;
	ag->openapi = api_openapi_build(api_routes, api_version());
	if (!ag->openapi) {
		r = -ENOMEM;
		goto fail_auth;
	}
	r = api_events_init(&ag->events, ag->loop);
	if (r)
		goto fail_openapi;
	r = gw_timer_init(&ag->poll, loop, on_poll);
	if (r)
		goto fail_events;
	r = start_http(ag);
	if (r)
		goto fail_poll;
	if (conf->gateway_socket && *conf->gateway_socket) {
		r = api_gwc_init(&ag->gwc, loop, conf->gateway_socket, &api_gwc_agent_ops, ag);
		if (r)
			goto fail_http;
		ag->gwc_on = true;
		gw_timer_arm(&ag->poll, ag->conf.poll_ms, ag->conf.poll_ms);
	}
	if (conf->store && !strcmp(conf->store, "etcd")) {
		char *id_file = NULL;
		struct api_cluster_conf cc = {
			.endpoints = conf->etcd_endpoints,
			.prefix = conf->cluster_prefix,
			.gateway_id = conf->gateway_id,
			.group = conf->port_group,
			.ttl = conf->lease_ttl,
			.changed = api_reconcile,
			.write_busy = api_write_busy,
			.event = on_cluster_event,
			.lease = on_cluster_lease,
			.gw_call = ag->gwc_on ? on_cluster_gw_call : NULL,
			.loop = ag->loop,
			.store = ag->store,
			.listen = ag->conf.listen,
			.ag = ag,
		};

		if (asprintf(&id_file, "%s/cluster-id", conf->state_dir) < 0) {
			r = -ENOMEM;
			goto fail_gwc;
		}
		cc.id_file = id_file;
		r = api_cluster_start(&cc, &ag->cluster);
		free(id_file);
		if (r)
			goto fail_gwc;
	}
	return 0;
fail_gwc:
	if (ag->gwc_on)
		api_gwc_fini(&ag->gwc);
	ag->gwc_on = false;
fail_http:
	api_http_stop(ag->http);
fail_poll:
	gw_timer_fini(&ag->poll);
fail_events:
	api_events_fini(&ag->events);
fail_openapi:
	json_decref(ag->openapi);
fail_auth:
	api_net_fini(&ag->net);
fail_auth_net:
	api_bsdirs_fini(&ag->bsdirs);
	api_gate_fini(&ag->gate);
	api_auth_close(&ag->auth);
fail_store:
	api_store_destroy(ag->store);
	return r;
}

void api_agent_fini(struct api_agent *ag)
{
	/* Leaving first: the other members take this gateway's LUNs over at once. */
	api_cluster_stop(ag->cluster);
	ag->cluster = NULL;
	/* Pending gateway calls answer their requests first, then the server closes. */
	if (ag->gwc_on)
		api_gwc_fini(&ag->gwc);
	ag->gwc_on = false;
	api_events_fini(&ag->events);
	api_http_stop(ag->http);
	gw_timer_fini(&ag->poll);
	json_decref(ag->openapi);
	json_decref(ag->gw_state);
	api_apply_fini(&ag->apply);
	api_net_fini(&ag->net);
	api_rcache_fini(&ag->metrics_cache);
	api_rcache_fini(&ag->metrics_gz);
	api_rcache_fini(&ag->targets_cache);
	api_bsdirs_fini(&ag->bsdirs);
	api_gate_fini(&ag->gate);
	api_auth_close(&ag->auth);
	api_store_destroy(ag->store);
}
