// SPDX-License-Identifier: MIT
/*
 * /metrics in the Prometheus text format (version 0.0.4). Values come from the gateway's last
 * "state" answer, refreshed every poll interval, so scraping never waits on the gateway and a
 * scrape storm never reaches it. Names carry the isergw_ prefix; counters end in _total.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_agent.h"
#include "api_auth.h"
#include "api_gwc.h"
#include "api_r.h"
#include "api_store.h"
#include "conf.h"
#include "gw_buf.h"

static const char *const lun_counters[][3] = {
    {"read_ops", "isergw_lun_read_ops_total", "READ commands completed on the LUN."},
    {"write_ops", "isergw_lun_write_ops_total", "WRITE commands completed on the LUN."},
    {"read_bytes", "isergw_lun_read_bytes_total", "Bytes read from the LUN by initiators."},
    {"write_bytes", "isergw_lun_write_bytes_total", "Bytes written to the LUN by initiators."},
    {"errors", "isergw_lun_errors_total", "Commands on the LUN that ended in CHECK CONDITION."},
};

/* What the gateway holds for its initiators, from the state answer's top level (a member of
 * it where the second column names one): they return to their resting values once every
 * initiator is gone (the soak, tests/soak/run.sh). */
static const char *const gw_gauges[][4] = {
    {"connections", NULL, "isergw_connections", "iSCSI connections open, in login or logged in."},
    {"tasks", NULL, "isergw_tasks", "iSCSI tasks alive in the gateway (commands not yet freed)."},
    {"pdus_in_use", NULL, "isergw_pdus_in_use", "PDUs taken from the pool and not yet returned."},
    {"data_memory", "used", "isergw_data_memory_bytes",
     "Command data buffers held, in tasks and in the task cache (gateway.data_memory)."},
    {"pdu_cache", "bytes", "isergw_pdu_cache_bytes",
     "What the PDU pools keep for reuse: free PDUs and their buffers (at most 8 MiB of buffers "
     "per event loop)."},
};

static void sessions_metric(struct gw_buf *b, struct api_agent *ag, const json_t *sessions)
{
	json_t *t, *s;
	size_t i, j, k;

	api_prom_head(b, "isergw_sessions", "gauge",
		      "Logged-in iSCSI sessions per target and transport.");
	json_array_foreach(json_object_get(api_store_config(ag->store), "targets"), i, t) {
		const char *name = json_string_value(json_object_get(t, "name"));

		for (k = 0; k < ISC_PORTAL_NR; k++) {
			const char *tn = conf_transport_name((int)k);
			unsigned int n = 0;

			json_array_foreach(sessions, j, s) {
				const char *st = json_string_value(json_object_get(s, "target"));
				const char *tr = json_string_value(json_object_get(s, "transport"));

				if (st && name && !strcmp(st, name) && tr &&
				    !strcmp(tr, tn))
					n++;
			}
			gw_buf_append(b, "isergw_sessions{target=\"", 24);
			api_prom_label(b, name);
			gw_buf_printf(b, "\",transport=\"%s\"} %u\n", tn, n);
		}
	}
	{
		unsigned int n = 0;

		json_array_foreach(sessions, j, s)
			if (!json_is_string(json_object_get(s, "target")))
				n++;
		api_prom_head(b, "isergw_discovery_sessions", "gauge",
			      "Discovery sessions logged in.");
		gw_buf_printf(b, "isergw_discovery_sessions %u\n", n);
	}
}

/* ---- backstore status: remote LUN paths, dm-multipath maps ---------------------------- */

/* One sample NAME{target,lun[,path]} VALUE. */
static void bs_sample(struct gw_buf *b, const char *name, const char *target, const json_t *l,
		      const char *path, long long v)
{
	gw_buf_printf(b, "%s{target=\"", name);
	api_prom_label(b, target);
	gw_buf_printf(b, "\",lun=\"%lld\"",
		      (long long)json_integer_value(json_object_get(l, "lun")));
	if (path) {
		gw_buf_append(b, ",path=\"", 7);
		api_prom_label(b, path);
		gw_buf_append(b, "\"", 1);
	}
	gw_buf_printf(b, "} %lld\n", v);
}

static const char *const path_counters[][3] = {
    {"failovers", "isergw_path_failovers_total",
     "I/Os moved off the path to another one after it failed them."},
    {"errors", "isergw_path_errors_total", "Transport and path errors seen on the path."},
    {"ios", "isergw_path_ios_total", "I/Os completed on the path."},
    {"logins", "isergw_path_logins_total", "Logins of the path."},
};

/* A path's name in labels: its URL (remote LUNs, credentials removed by the gateway) or its
 * device (dm-multipath). */
static const char *path_name(const json_t *p)
{
	const char *n = json_string_value(json_object_get(p, "url"));

	return n ? n : json_string_value(json_object_get(p, "dev"));
}

/* One family from an integer of each LUN's live status (LUNs without it are left out). */
static void lun_status_family(struct gw_buf *b, const json_t *targets, const char *key,
			      const char *name, const char *type, const char *help)
{
	const char *tn;
	json_t *t, *l;
	size_t i, j;

	api_prom_head(b, name, type, help);
	json_array_foreach(targets, i, t) {
		tn = json_string_value(json_object_get(t, "name"));
		json_array_foreach(json_object_get(t, "luns"), j, l) {
			json_t *v = json_object_get(json_object_get(l, "status"), key);

			if (json_is_integer(v))
				bs_sample(b, name, tn, l, NULL, (long long)json_integer_value(v));
		}
	}
}

static void path_metrics(struct gw_buf *b, const json_t *targets)
{
	json_t *t, *l, *p, *paths;
	size_t i, j, k, c;
	const char *tn;

	api_prom_head(b, "isergw_lun_state", "gauge",
		      "1 for the backstore's current state (label state), per LUN with a live "
		      "status.");
	json_array_foreach(targets, i, t) {
		tn = json_string_value(json_object_get(t, "name"));
		json_array_foreach(json_object_get(t, "luns"), j, l) {
			const char *st = json_string_value(
			    json_object_get(json_object_get(l, "status"), "state"));

			if (!st)
				continue;
			gw_buf_printf(b, "isergw_lun_state{target=\"");
			api_prom_label(b, tn);
			gw_buf_printf(b, "\",lun=\"%lld\",state=\"",
				      (long long)json_integer_value(json_object_get(l, "lun")));
			api_prom_label(b, st);
			gw_buf_append(b, "\"} 1\n", 5);
		}
	}
	lun_status_family(b, targets, "failovers", "isergw_lun_failovers_total", "counter",
			  "I/Os of the LUN re-driven on another path.");
	lun_status_family(b, targets, "queued", "isergw_lun_queued", "gauge",
			  "I/Os of the LUN waiting for a usable path.");
	api_prom_head(b, "isergw_path_up", "gauge",
		      "1 when the back-end path is usable "
		      "(remote: active; dm-multipath: active and ready).");
	json_array_foreach(targets, i, t) {
		tn = json_string_value(json_object_get(t, "name"));
		json_array_foreach(json_object_get(t, "luns"), j, l) {
			paths = json_object_get(json_object_get(l, "status"), "paths");
			json_array_foreach(paths, k, p) {
				json_t *up = json_object_get(p, "up");
				const char *st = json_string_value(json_object_get(p, "state"));

				bs_sample(b, "isergw_path_up", tn, l, path_name(p),
					  json_is_boolean(up) ? json_is_true(up) :
					  st && !strcmp(st, "active"));
			}
		}
	}
	for (c = 0; c < GW_ARRAY_SIZE(path_counters); c++) {
		api_prom_head(b, path_counters[c][1], "counter", path_counters[c][2]);
		json_array_foreach(targets, i, t) {
			tn = json_string_value(json_object_get(t, "name"));
			json_array_foreach(json_object_get(t, "luns"), j, l) {
				paths = json_object_get(json_object_get(l, "status"), "paths");
				json_array_foreach(paths, k, p) {
					json_t *v = json_object_get(p, path_counters[c][0]);

					if (json_is_integer(v))
						bs_sample(b, path_counters[c][1], tn, l,
							  path_name(p),
							  (long long)json_integer_value(v));
				}
			}
		}
	}
	api_prom_head(b, "isergw_path_latency_microseconds", "gauge",
		      "Moving average of the path's I/O service time.");
	json_array_foreach(targets, i, t) {
		tn = json_string_value(json_object_get(t, "name"));
		json_array_foreach(json_object_get(t, "luns"), j, l) {
			paths = json_object_get(json_object_get(l, "status"), "paths");
			json_array_foreach(paths, k, p) {
				json_t *v = json_object_get(p, "latency_us");

				if (json_is_integer(v))
					bs_sample(b, "isergw_path_latency_microseconds", tn, l,
						  path_name(p), (long long)json_integer_value(v));
			}
		}
	}
}

/* ---- the gateway's event loops ---------------------------------------------------------- */

static const char *const loop_fields[][4] = {
    {"connections", "isergw_loop_connections", "gauge", "Connections placed on the event loop."},
    {"sessions", "isergw_loop_sessions", "gauge", "Sessions served by the event loop."},
    {"sleeps", "isergw_loop_sleeps_total", "counter",
     "Waits of the event loop for work that slept (epoll_wait with a timeout)."},
    {"polls", "isergw_loop_polls_total", "counter",
     "Busy polls the event loop started before sleeping (gateway.poll_us)."},
    {"poll_hits", "isergw_loop_poll_hits_total", "counter",
     "Busy polls that found work: a sleep and a wake-up saved."},
};

/* Per loop, labelled with its index and CPU (-1: not pinned, one loop). */
static void loop_metrics(struct gw_buf *b, const json_t *loops)
{
	const json_t *l;
	size_t c, i;

	for (c = 0; c < GW_ARRAY_SIZE(loop_fields); c++) {
		api_prom_head(b, loop_fields[c][1], loop_fields[c][2], loop_fields[c][3]);
		json_array_foreach(loops, i, l) {
			json_t *v = json_object_get(l, loop_fields[c][0]);

			if (json_is_integer(v))
				gw_buf_printf(b, "%s{loop=\"%lld\",cpu=\"%lld\"} %lld\n",
					      loop_fields[c][1],
					      (long long)json_integer_value(json_object_get(l, "index")),
					      (long long)json_integer_value(json_object_get(l, "cpu")),
					      (long long)json_integer_value(v));
		}
	}
}

/* Failed tokens and 429s per source address, slow requests cut off, connections and waiting
 * requests, event subscribers, clients gone while they waited. */
static void agent_guard_metrics(struct gw_buf *b, struct api_agent *ag)
{
	const struct api_gate *g = ag->gate;
	size_t i;

	api_prom_head(b, "isergw_agent_auth_failures_total", "counter",
		      "Requests with a missing or unknown bearer token, per source address.");
	for (i = 0; i < g->nsrc; i++) {
		gw_buf_append(b, "isergw_agent_auth_failures_total{source=\"", 41);
		api_prom_label(b, g->src[i].addr);
		gw_buf_printf(b, "\"} %llu\n", (unsigned long long)g->src[i].total);
	}
	api_prom_head(b, "isergw_agent_auth_rate_limited_total", "counter",
		      "Requests refused with 429 after too many failed tokens, per source address.");
	for (i = 0; i < g->nsrc; i++) {
		gw_buf_append(b, "isergw_agent_auth_rate_limited_total{source=\"", 45);
		api_prom_label(b, g->src[i].addr);
		gw_buf_printf(b, "\"} %llu\n", (unsigned long long)g->src[i].limited);
	}
	api_prom_head(b, "isergw_agent_requests_cut_total", "counter",
		      "Connections cut off because a request did not arrive whole within "
		      "request_timeout.");
	gw_buf_printf(b, "isergw_agent_requests_cut_total %llu\n",
		      (unsigned long long)api_http_cut(ag->http));
	api_prom_head(b, "isergw_agent_http_connections", "gauge",
		      "Client connections open now.");
	gw_buf_printf(b, "isergw_agent_http_connections %u\n", api_http_conns(ag->http));
	api_prom_head(b, "isergw_agent_requests_waiting", "gauge",
		      "Requests suspended now: waiting for the gateway, the store, an earlier write "
		      "or an event stream's next event.");
	gw_buf_printf(b, "isergw_agent_requests_waiting %u\n", api_http_suspended(ag->http));
	api_prom_head(b, "isergw_agent_event_subscribers", "gauge",
		      "Open event streams (GET /api/v1/events).");
	gw_buf_printf(b, "isergw_agent_event_subscribers %u\n", ag->events->n);
	api_prom_head(b, "isergw_agent_clients_gone_total", "counter",
		      "Waiting requests and event streams whose client went away, ended at once.");
	gw_buf_printf(b, "isergw_agent_clients_gone_total %llu\n",
		      (unsigned long long)api_http_gone(ag->http));
}

char *api_metrics_text(struct api_agent *ag, size_t *len)
{
	const json_t *st = ag->gw_state;
	bool up = api_gwc_connected(ag->gwc);
	struct gw_buf b;
	json_t *t, *l;
	size_t i, j, c;

	gw_buf_init(&b);
	api_prom_head(&b, "isergw_gateway_up", "gauge",
		      "1 when the agent is connected to the gateway.");
	gw_buf_printf(&b, "isergw_gateway_up %d\n", up ? 1 : 0);
	api_prom_head(&b, "isergw_config_generation", "gauge",
		      "Generation of the desired configuration.");
	gw_buf_printf(&b, "isergw_config_generation %llu\n",
		      (unsigned long long)api_store_generation(ag->store));
	api_prom_head(&b, "isergw_config_applied_generation", "gauge",
		      "Generation the gateway last applied (0: unknown).");
	gw_buf_printf(&b, "isergw_config_applied_generation %llu\n",
		      (unsigned long long)ag->apply.generation);
	api_prom_head(&b, "isergw_agent_requests_total", "counter",
		      "API requests the agent handled.");
	gw_buf_printf(&b, "isergw_agent_requests_total %llu\n",
		      (unsigned long long)api_http_requests(ag->http));
	agent_guard_metrics(&b, ag);
	api_metrics_net(&b, ag);
	if (!up || !st) {
		*len = b.len;
		return gw_buf_steal(&b);
	}
	sessions_metric(&b, ag, json_object_get(st, "sessions"));
	for (c = 0; c < GW_ARRAY_SIZE(gw_gauges); c++) {
		const json_t *v = json_object_get(st, gw_gauges[c][0]);

		if (gw_gauges[c][1])
			v = json_object_get(v, gw_gauges[c][1]);
		if (!json_is_integer(v))
			continue;
		api_prom_head(&b, gw_gauges[c][2], "gauge", gw_gauges[c][3]);
		gw_buf_printf(&b, "%s %lld\n", gw_gauges[c][2], (long long)json_integer_value(v));
	}
	for (c = 0; c < GW_ARRAY_SIZE(lun_counters); c++) {
		api_prom_head(&b, lun_counters[c][1], "counter", lun_counters[c][2]);
		json_array_foreach(json_object_get(st, "targets"), i, t) {
			json_array_foreach(json_object_get(t, "luns"), j, l) {
				json_t *v = json_object_get(l, lun_counters[c][0]);

				if (!json_is_integer(v))
					continue;
				gw_buf_printf(&b, "%s{target=\"", lun_counters[c][1]);
				api_prom_label(&b, json_string_value(json_object_get(t, "name")));
				gw_buf_printf(
				    &b, "\",lun=\"%lld\"} %lld\n",
				    (long long)json_integer_value(json_object_get(l, "lun")),
				    (long long)json_integer_value(v));
			}
		}
	}
	api_metrics_latency(&b, st);
	path_metrics(&b, json_object_get(st, "targets"));
	loop_metrics(&b, json_object_get(st, "loops"));
	*len = b.len;
	return gw_buf_steal(&b);
}
