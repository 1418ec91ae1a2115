// SPDX-License-Identifier: MIT
/*
 * The composition: store, tokens, gateway client, HTTP server, network model, cluster and the
 * state poll, wired together in one loop. The rooms' state lives here (struct api_agent_own);
 * the hub the resources see (struct api_agent) holds handles into it. The gateway
 * (re)connecting triggers reconciliation; the poll keeps the live state that /metrics and the
 * session events use.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api_agent.h"
#include "api_auth.h"
#include "api_cluster.h"
#include "api_etcd.h"
#include "api_gwc.h"
#include "api_http.h"
#include "api_net.h"
#include "api_store.h"
#include "gw_log.h"
#include "gw_loop.h"

/* What only this file touches: the options, the rooms' state (the hub's handles point here),
 * and the polls of the gateway's state and network model. */
struct api_agent_own {
	struct api_agent *ag;
	struct gw_loop *loop;
	struct api_conf conf;
	struct api_auth auth;
	struct api_gate gate;
	struct api_gwc gwc;
	struct api_net net;
	struct api_events events;
	struct gw_timer poll;
	bool poll_busy;
	bool net_busy, net_again;	/* a "net" request in flight; another wanted after it */
};

static void on_poll_reply(void *ctx, int err, json_t *reply)
{
	struct api_agent_own *o = ctx;
	struct api_agent *ag = o->ag;

	o->poll_busy = false;
	if (err < 0 || !json_is_true(json_object_get(reply, "ok")))
		return;
	api_events_state(ag, ag->gw_state, reply);
	json_decref(ag->gw_state);
	ag->gw_state = json_incref(reply);
	ag->gw_state_ms = gw_now_ms();
}

static void on_poll(struct gw_timer *t)
{
	struct api_agent_own *o = gw_container_of(t, struct api_agent_own, poll);

	if (o->poll_busy || !o->gwc.connected)
		return;
	if (api_gw_state(o->ag, on_poll_reply, o) == 0)
		o->poll_busy = true;
}

/* ---- the gateway's network model (agent/net): watched, read again on "changed" --------- */

static void net_fetch(struct api_agent_own *o);

static void on_net_reply(void *ctx, int err, json_t *reply)
{
	struct api_agent_own *o = ctx;

	o->net_busy = false;
	if (err >= 0 && json_is_object(json_object_get(reply, "net")))
		api_net_set_model(&o->net, json_object_get(reply, "net"));
	else if (err >= 0)
		gw_warn("agent", "the gateway has no network model (%s): no bond or RDMA status",
			json_string_value(json_object_get(reply, "message")) ?: "?");
	if (o->net_again && o->gwc.connected) {
		o->net_again = false;
		net_fetch(o);
	}
}

/* One "net" request at a time; a "changed" meanwhile asks for one more after it. */
static void net_fetch(struct api_agent_own *o)
{
	if (o->net_busy) {
		o->net_again = true;
		return;
	}
	if (api_gwc_call(&o->gwc, json_pack("{s:s}", "op", "net"), on_net_reply, o) == 0)
		o->net_busy = true;
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
	struct api_agent_own *o = arg;

	(void)g;
	if (!strcmp(type, "pr_commit")) {
		/* A PERSISTENT RESERVE OUT to commit to etcd (docs/CLUSTER.md). */
		if (o->ag->cluster)
			api_cluster_pr_commit(o->ag->cluster, data);
		return;
	}
	api_net_gw_event(&o->net, type, data);
	if (!strcmp(type, "changed"))
		net_fetch(o);
}

static void on_gw_connected(struct api_gwc *g, void *arg)
{
	struct api_agent_own *o = arg;
	struct api_agent *ag = o->ag;

	(void)g;
	api_event(&o->events, "gateway", json_pack("{s:b}", "connected", 1));
	/* Subscribed first, then the model: a change in between is an event after it. */
	o->net_busy = o->net_again = false;
	api_gwc_call(&o->gwc, json_pack("{s:s}", "op", "watch"), on_watch_reply, o);
	/* Its commits arrive as events: the reservations' state only after the subscription. */
	if (ag->cluster)
		api_cluster_gw_up(ag->cluster);
	net_fetch(o);
	api_reconcile(ag);
	on_poll(&o->poll);
}

static void on_gw_disconnected(struct api_gwc *g, void *arg)
{
	struct api_agent_own *o = arg;
	struct api_agent *ag = o->ag;

	(void)g;
	api_apply_lost(&ag->apply);
	if (ag->cluster)
		api_cluster_gw_lost(ag->cluster);
	o->poll_busy = false;
	o->net_busy = o->net_again = false;
	api_net_gw_lost(&o->net);
	json_decref(ag->gw_state);
	ag->gw_state = NULL;
	api_event(&o->events, "gateway", json_pack("{s:b}", "connected", 0));
}

static void on_cluster_event(struct api_agent *ag, const char *type, json_t *data)
{
	api_event(ag->events, type, data);
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
	if (api_gwc_connected(ag->gwc))
		api_gwc_call(ag->gwc, json_pack("{s:s, s:I}", "op", "lease", "valid_ms",
						(json_int_t)valid_ms), on_lease_reply, ag);
}

/* The cluster's persistent reservations talk to the gateway through here. */
static int on_cluster_gw_call(struct api_agent *ag, json_t *req, api_cluster_gw_cb cb,
			      void *ctx)
{
	if (!api_gwc_connected(ag->gwc)) {
		json_decref(req);
		return -ENOTCONN;
	}
	return api_gwc_call(ag->gwc, req, cb, ctx);
}

/* Bond failovers and RDMA port changes (the gateway's) become server-sent events. */
static void on_net_event(void *ctx, const char *type, json_t *data)
{
	struct api_agent_own *o = ctx;

	api_event(&o->events, type, data);
}

static const struct api_gwc_ops api_gwc_agent_ops = {
	.connected = on_gw_connected,
	.disconnected = on_gw_disconnected,
	.event = on_gw_event,
};

static int open_etcd_store(struct api_agent_own *o)
{
	const struct api_conf *conf = &o->conf;
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
	r = api_etcd_create(&ec, o->loop, &e);
	if (r)
		return r;
	if (asprintf(&cache, "%s/etcd-cache.json", conf->state_dir) < 0) {
		api_etcd_destroy(e);
		return -ENOMEM;
	}
	r = api_store_open_etcd(e, conf->cluster_prefix, cache, &o->ag->store);
	free(cache);
	return r;
}

/* The server knows none of its plug-ins: the routes, the access check, the write queue and the
 * dashboard's files are registered here. */
static int start_http(struct api_agent_own *o)
{
	const struct api_conf *conf = &o->conf;
	struct api_agent *ag = o->ag;
	struct api_http_conf hc = {
		.listen = conf->listen,
		.tls_cert = conf->tls_cert,
		.tls_key = conf->tls_key,
		.allow_remote = conf->allow_remote,
		.body_max = conf->body_max,
		.max_conns = conf->max_conns,
		.max_conns_per_ip = conf->max_conns_per_ip,
		.idle_timeout = conf->idle_timeout,
		.request_timeout = conf->request_timeout,
		.header_max = conf->header_max,
	};
	int r;

	r = api_http_start(o->loop, &hc, ag, &ag->http);
	if (r)
		return r;
	api_http_routes(ag->http, api_routes);
	r = api_http_hook(ag->http, &api_static_hook, (void *)conf->webui_dir);
	if (!r)
		r = api_http_hook(ag->http, &api_auth_hook, &o->gate);
	if (!r)
		r = api_http_hook(ag->http, &api_write_hook, ag);
	if (r) {
		api_http_stop(ag->http);
		ag->http = NULL;
	}
	return r;
}

/* The cluster (--store etcd): membership, LU owners and reservations over the store's etcd. */
static int start_cluster(struct api_agent_own *o)
{
	const struct api_conf *conf = &o->conf;
	struct api_agent *ag = o->ag;
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
		.gw_call = ag->gwc ? on_cluster_gw_call : NULL,
		.loop = o->loop,
		.store = ag->store,
		.listen = conf->listen,
		.ag = ag,
	};
	int r;

	if (asprintf(&id_file, "%s/cluster-id", conf->state_dir) < 0)
		return -ENOMEM;
	cc.id_file = id_file;
	r = api_cluster_start(&cc, &ag->cluster);
	free(id_file);
	return r;
}

int api_agent_init(struct api_agent *ag, struct gw_loop *loop, const struct api_conf *conf)
{
	struct api_agent_own *o;
	int r;

	memset(ag, 0, sizeof(*ag));
	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->ag = ag;
	o->loop = loop;
	o->conf = *conf;
	if (!o->conf.body_max)
		o->conf.body_max = API_BODY_MAX_DEFAULT;
	if (!o->conf.poll_ms)
		o->conf.poll_ms = 1000;
	ag->own = o;
	ag->conf = &o->conf;
	ag->gate = &o->gate;
	ag->net = &o->net;
	ag->events = &o->events;
	if (mkdir(conf->state_dir, 0700) < 0 && errno != EEXIST) {
		r = -errno;
		gw_err("agent", "state directory %s: %s", conf->state_dir, strerror(-r));
		goto fail_own;
	}
	if (conf->store && !strcmp(conf->store, "etcd"))
		r = open_etcd_store(o);
	else
		r = api_store_open_file(conf->state_dir, &ag->store);
	if (r) {
		gw_err("agent", "cannot open the configuration store in %s: %s", conf->state_dir,
		       strerror(-r));
		goto fail_own;
	}
	gw_info("agent", "desired configuration: generation %llu (%s store in %s)",
		(unsigned long long)api_store_generation(ag->store), api_store_name(ag->store),
		conf->state_dir);
	r = api_auth_open(&o->auth, conf->state_dir);
	if (r)
		goto fail_store;
	api_gate_init(&o->gate, &o->auth, conf->auth_fails, conf->auth_window,
		      conf->auth_backoff);
	r = api_bsdirs_init(&ag->bsdirs, conf->backstore_dirs, conf->state_dir);
	if (r)
		goto fail_auth_net;
	r = api_net_init(&o->net, conf->state_dir, on_net_event, o);
	if (r)
		goto fail_auth_net;
	/* The resources' own state; the OpenAPI document comes from the route table. */
	r = api_writes_create(&ag->writes);
	if (!r)
		r = api_system_create(api_openapi_build(api_routes, api_version()), &ag->system);
	if (!r)
		r = api_targets_create(&ag->targets);
	if (r)
		goto fail_res;
	r = api_events_init(&o->events, loop);
	if (r)
		goto fail_res;
	r = gw_timer_init(&o->poll, loop, on_poll);
	if (r)
		goto fail_events;
	r = start_http(o);
	if (r)
		goto fail_poll;
	if (conf->gateway_socket && *conf->gateway_socket) {
		r = api_gwc_init(&o->gwc, loop, conf->gateway_socket, &api_gwc_agent_ops, o);
		if (r)
			goto fail_http;
		ag->gwc = &o->gwc;
		gw_timer_arm(&o->poll, o->conf.poll_ms, o->conf.poll_ms);
	}
	if (conf->store && !strcmp(conf->store, "etcd")) {
		r = start_cluster(o);
		if (r)
			goto fail_gwc;
	}
	return 0;
fail_gwc:
	if (ag->gwc)
		api_gwc_fini(ag->gwc);
	ag->gwc = NULL;
fail_http:
	api_http_stop(ag->http);
fail_poll:
	gw_timer_fini(&o->poll);
fail_events:
	api_events_fini(&o->events);
fail_res:
	api_targets_destroy(ag->targets);
	api_system_destroy(ag->system);
	api_writes_destroy(ag->writes);
	api_net_fini(&o->net);
fail_auth_net:
	api_bsdirs_fini(&ag->bsdirs);
	api_gate_fini(&o->gate);
	api_auth_close(&o->auth);
fail_store:
	api_store_destroy(ag->store);
fail_own:
	free(o);
	ag->own = NULL;
	return r;
}

void api_agent_fini(struct api_agent *ag)
{
	struct api_agent_own *o = ag->own;

	/* Leaving first: the other members take this gateway's LUNs over at once. */
	api_cluster_stop(ag->cluster);
	ag->cluster = NULL;
	/* Pending gateway calls answer their requests first, then the server closes. */
	if (ag->gwc)
		api_gwc_fini(ag->gwc);
	ag->gwc = NULL;
	api_events_fini(&o->events);
	api_http_stop(ag->http);
	gw_timer_fini(&o->poll);
	/* After the server: the requests it freed have left the write queue. */
	api_targets_destroy(ag->targets);
	api_system_destroy(ag->system);
	api_writes_destroy(ag->writes);
	json_decref(ag->gw_state);
	api_apply_fini(&ag->apply);
	api_net_fini(&o->net);
	api_bsdirs_fini(&ag->bsdirs);
	api_gate_fini(&o->gate);
	api_auth_close(&o->auth);
	api_store_destroy(ag->store);
	free(o);
	ag->own = NULL;
}

int api_agent_reload_tokens(struct api_agent *ag)
{
	struct api_agent_own *o = ag->own;
	struct api_auth a;
	int r;

	r = api_auth_open(&a, o->conf.state_dir);
	if (r) {
		gw_err("agent", "SIGHUP: %s/tokens.json: %s: keeping the %zu tokens in use",
		       o->conf.state_dir, strerror(-r), o->auth.n);
		api_auth_close(&a);
		return r;
	}
	/* In place: the gate keeps its pointer to the list. */
	api_auth_close(&o->auth);
	o->auth = a;
	gw_info("agent", "SIGHUP: %zu tokens loaded", o->auth.n);
	return 0;
}
