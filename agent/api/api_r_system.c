// SPDX-License-Identifier: MIT
/*
 * Health, version, the OpenAPI document and /metrics.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_agent.h"
#include "api_cluster.h"
#include "api_gwc.h"
#include "api_net.h"
#include "api_r.h"
#include "api_rcache.h"
#include "api_store.h"

struct api_system {
	uint64_t started_ms;
	json_t *openapi;
	struct api_rcache metrics, metrics_gz;	/* the text and its gzip */
};

int api_system_create(json_t *openapi, struct api_system **out)
{
	struct api_system *s = openapi ? calloc(1, sizeof(*s)) : NULL;

	if (!s) {
		json_decref(openapi);
		return -ENOMEM;
	}
	s->started_ms = gw_now_ms();
	s->openapi = openapi;
	*out = s;
	return 0;
}

void api_system_destroy(struct api_system *s)
{
	if (!s)
		return;
	json_decref(s->openapi);
	api_rcache_fini(&s->metrics);
	api_rcache_fini(&s->metrics_gz);
	free(s);
}

const char *api_version(void)
{
#ifdef ISERGW_VERSION
	return ISERGW_VERSION;
#else
	return "0.1.0";
#endif
}

int api_h_health(struct api_req *r)
{
	struct api_agent *ag = r->ag;
	uint64_t gen = api_store_generation(ag->store);
	bool up = api_gwc_connected(ag->gwc);
	bool sync = up && ag->apply.generation == gen && !ag->apply.error;
	json_t *gw;

	gw = json_pack("{s:b, s:b, s:I, s:s?}", "connected", up, "in_sync", sync,
		       "applied_generation", (json_int_t)ag->apply.generation, "error",
		       ag->apply.error);
	if (gw && ag->gwc)
		json_object_set_new(gw, "socket", json_string(ag->conf->gateway_socket));
	api_reply_json(r, 200, json_pack("{s:s, s:s, s:I, s:s, s:o, s:I}", "status",
					 !ag->gwc || sync ? "ok" : "degraded", "version",
					 api_version(), "generation", (json_int_t)gen, "store",
					 api_store_name(ag->store), "gateway", gw, "uptime_s",
					 (json_int_t)((gw_now_ms() - ag->system->started_ms) / 1000)));
	return 0;
}

int api_h_version(struct api_req *r)
{
	api_reply_json(r, 200, json_pack("{s:s, s:s, s:s}", "version", api_version(), "api", "v1",
					 "role", api_role_name(r->role)));
	return 0;
}

int api_h_openapi(struct api_req *r)
{
	api_reply_json(r, 200, json_incref(r->ag->system->openapi));
	return 0;
}

/*
 * Rebuilt when the gateway state, the configuration, the gateway connection, its network
 * model or the desired bond settings change, else at most a second old (the request counters,
 * which the key does not cover): under a scrape storm /metrics costs a copy, not a rebuild of every LUN's histograms.
 */
int api_h_metrics(struct api_req *r)
{
	struct api_agent *ag = r->ag;
	uint64_t now = gw_now_ms();
	const uint64_t key[API_RCACHE_KEYS] = {
		ag->gw_state_ms, api_store_generation(ag->store), ag->apply.generation,
		(uint64_t)api_gwc_connected(ag->gwc), ag->net->changes,
	};
	size_t len = 0, zlen = 0;
	char *text;

	if (api_accepts_gzip(api_req_header(r, "Accept-Encoding"))) {
		text = api_rcache_get(&ag->system->metrics_gz, key, 1000, now, &len);
		if (!text) {
			char *plain = api_rcache_get(&ag->system->metrics, key, 1000, now, &len);

			if (!plain) {
				plain = api_metrics_text(ag, &len);
				if (!plain)
					return -ENOMEM;
				api_rcache_put(&ag->system->metrics, key, plain, len, now);
			}
			text = api_gzip(plain, len, &zlen);
			if (!text) {
				/* No gzip after all: the plain text is an answer too. */
				api_reply_text(r, 200, "text/plain; version=0.0.4; charset=utf-8",
					       plain, len);
				return 0;
			}
			free(plain);
			len = zlen;
			api_rcache_put(&ag->system->metrics_gz, key, text, len, now);
		}
		api_reply_header(r, "Content-Encoding", "gzip");
		api_reply_header(r, "Vary", "Accept-Encoding");
		api_reply_text(r, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
		return 0;
	}
	text = api_rcache_get(&ag->system->metrics, key, 1000, now, &len);
	if (!text) {
		text = api_metrics_text(ag, &len);
		if (!text)
			return -ENOMEM;
		api_rcache_put(&ag->system->metrics, key, text, len, now);
	}
	api_reply_text(r, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
	return 0;
}

/* GET /events: the stream opens with a hello naming the generation and the gateway's link. */
int api_h_events(struct api_req *r)
{
	struct api_agent *ag = r->ag;
	char hello[256];
	int n;

	n = snprintf(hello, sizeof(hello),
		     "retry: 2000\nevent: hello\ndata: {\"generation\":%llu,\"gateway\":%s}\n\n",
		     (unsigned long long)api_store_generation(ag->store),
		     api_gwc_connected(ag->gwc) ? "true" : "false");
	return api_events_subscribe(ag->events, r, hello, (size_t)n);
}

/* GET /cluster: members, port groups and LU owners (404 without --store etcd). */
int api_h_cluster(struct api_req *r)
{
	if (!r->ag->cluster) {
		api_reply_err(r, API_E_NOT_FOUND, NULL,
			      "this agent is not in a cluster (--store etcd)");
		return 0;
	}
	api_reply_json(r, 200, api_cluster_status(r->ag->cluster));
	return 0;
}
