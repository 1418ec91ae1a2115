// SPDX-License-Identifier: MIT
/*
 * The write pipeline and reconciliation. A change is validated with the gateway's parser,
 * applied by the gateway when it is reachable (a refusal is a 422 and nothing is stored),
 * then committed to the store, and only then acknowledged. When the gateway is away the change
 * is stored and applied when it comes back: the store is the truth, the gateway follows it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_agent.h"
#include "api_cluster.h"
#include "api_gwc.h"
#include "api_r.h"
#include "api_store.h"
#include "gw_log.h"

/* Writes run one at a time, in arrival order (the rest wait parked). */
struct api_writes {
	bool busy;
	struct gw_list wait;		/* struct api_wreq.node */
};

/* A request's part in the write pipeline (r->wr, opaque to the server), made when first
 * needed and freed with the request. */
struct api_wreq {
	struct api_req *r;
	struct gw_list node;		/* in ag->writes->wait */
	bool holds, waits;
	/* An outstanding write: committed when the gateway accepts it. */
	json_t *config, *body;
	unsigned int status;
	char *prefix;
	const char *gw_status;		/* what the gateway said, while the store answers */
	bool storing;			/* the store's answer is awaited (api_store_commit_async) */
	bool shrink;			/* the apply may make a LUN smaller */
};

static struct api_wreq *wreq(struct api_req *r)
{
	if (!r->wr) {
		r->wr = calloc(1, sizeof(*r->wr));
		if (r->wr)
			r->wr->r = r;
	}
	return r->wr;
}

void api_write_release(struct api_agent *ag)
{
	struct api_wreq *w;

	ag->writes->busy = false;
	if (gw_list_empty(&ag->writes->wait))
		return;
	w = gw_list_first_entry(&ag->writes->wait, struct api_wreq, node);
	gw_list_del(&w->node);
	w->waits = false;
	ag->writes->busy = true;
	w->holds = true;
	api_req_resume(w->r);
}

int api_writes_create(struct api_writes **out)
{
	struct api_writes *w = calloc(1, sizeof(*w));

	if (!w)
		return -ENOMEM;
	gw_list_init(&w->wait);
	*out = w;
	return 0;
}

void api_writes_destroy(struct api_writes *w)
{
	free(w);
}

void api_apply_lost(struct api_apply *a)
{
	a->generation = 0;
	a->reconciling = false;
}

void api_apply_fini(struct api_apply *a)
{
	free(a->error);
	a->error = NULL;
}

bool api_write_busy(const struct api_agent *ag)
{
	return ag->writes->busy;
}

/* Writes run one at a time, in arrival order: the rest wait suspended. */
static int write_admit(void *ctx, struct api_req *r)
{
	struct api_agent *ag = ctx;
	struct api_wreq *w;

	if (!(r->route->flags & API_RF_WRITE) || (r->wr && r->wr->holds))
		return 0;
	w = wreq(r);
	if (!w)
		return -ENOMEM;
	if (ag->writes->busy) {
		w->waits = true;
		gw_list_add_tail(&ag->writes->wait, &w->node);
		/* Nothing under way: a client that goes away leaves the queue at once. */
		api_req_park(r);
		return 1;
	}
	ag->writes->busy = true;
	w->holds = true;
	return 0;
}

static void write_release(void *ctx, struct api_req *r)
{
	struct api_wreq *w = r->wr;

	if (!w)
		return;
	if (w->waits) {
		gw_list_del(&w->node);
		w->waits = false;
	}
	if (w->holds) {
		w->holds = false;
		api_write_release(ctx);
	}
}

static void write_gone(void *ctx, struct api_req *r)
{
	struct api_wreq *w = r->wr;

	if (!w)
		return;
	write_release(ctx, r);
	json_decref(w->config);
	json_decref(w->body);
	free(w->prefix);
	free(w);
	r->wr = NULL;
}

const struct api_http_hook api_write_hook = {
	.admit = write_admit,
	.release = write_release,
	.gone = write_gone,
};

/* One entity tag of If-Match (n bytes at t, trimmed): "N", W/"N" or a bare N; -1 when it is
 * none of them. */
static int etag_one(const char *t, size_t n, const char *want)
{
	bool weak = false;
	size_t i;

	if (n >= 2 && !strncmp(t, "W/", 2)) {
		weak = true;
		t += 2;
		n -= 2;
	}
	if (n >= 2 && t[0] == '"' && t[n - 1] == '"') {
		t++;
		n -= 2;
	} else if (weak) {
		return -1;
	}
	if (!n)
		return -1;
	for (i = 0; i < n; i++)
		if (t[i] < '0' || t[i] > '9')
			return -1;
	return n == strlen(want) && !strncmp(t, want, n);
}

static bool etag_matches(const char *hdr, uint64_t gen)
{
	const char *p = hdr, *e, *te;
	char want[32];
	bool hit = false;
	int r;

	snprintf(want, sizeof(want), "%llu", (unsigned long long)gen);
	/* A list of tags, each "N", W/"N" or N, or "*" alone (anything that exists). A list
	 * with anything else in it matches nothing: 412, never a guess. */
	for (;;) {
		while (*p == ' ' || *p == '\t')
			p++;
		e = p + strcspn(p, ",");
		te = e;
		while (te > p && (te[-1] == ' ' || te[-1] == '\t'))
			te--;
		if (te - p == 1 && *p == '*') {
			hit = true;
		} else if (te > p) {
			r = etag_one(p, (size_t)(te - p), want);
			if (r < 0)
				return false;
			hit |= r > 0;
		}
		if (!*e)
			break;
		p = e + 1;
	}
	return hit;
}

void api_write_allow_shrink(struct api_req *r)
{
	struct api_wreq *w = wreq(r);

	if (w)
		w->shrink = true;
}

json_t *api_write_begin(struct api_req *r)
{
	const char *im = api_req_header(r, "If-Match");
	json_t *c;
	int rc;

	/* A shared store (etcd): start from what the other agents wrote; refuse when away. */
	rc = api_store_refresh(r->ag->store);
	if (rc < 0) {
		api_reply_err(r, API_E_STORE_UNAVAILABLE, NULL, "the configuration store (%s) is "
			      "not reachable: %s", api_store_name(r->ag->store), rc == -ENOTUNIQ ?
			      "its prefix is another cluster's (GET /cluster says more)" :
			      strerror(-rc));
		return NULL;
	}
	if (rc > 0)
		api_reconcile(r->ag);
	if (im && !etag_matches(im, api_store_generation(r->ag->store))) {
		api_reply_etag(r);
		api_reply_err(r, API_E_STALE, NULL,
			      "If-Match %s does not match the current generation %llu", im,
			      (unsigned long long)api_store_generation(r->ag->store));
		return NULL;
	}
	c = api_store_copy(r->ag->store);
	if (!c)
		api_reply_err(r, API_E_INTERNAL, NULL, "out of memory");
	return c;
}

/* The store's answer to a write: the reply. */
static void write_stored(struct api_req *r, int rc)
{
	struct api_agent *ag = r->ag;
	struct api_wreq *w = r->wr;
	json_t *body = w->body;
	const char *gw_status = w->gw_status;
	uint64_t gen;

	w->body = NULL;
	if (rc) {
		json_decref(body);
		if (rc == -ESTALE)
			api_reply_err(r, API_E_STALE, NULL, "another agent changed the "
				      "configuration first: read it again and retry");
		else if (rc == -EHOSTUNREACH || rc == -ETIMEDOUT || rc == -ENOTUNIQ)
			api_reply_err(r, API_E_STORE_UNAVAILABLE, NULL, "the configuration store "
				      "(%s) is not reachable: %s", api_store_name(ag->store),
				      rc == -ENOTUNIQ ?
				      "its prefix is another cluster's (GET /cluster says more)" :
				      strerror(-rc));
		else
			api_reply_err(r, API_E_INTERNAL, NULL, "cannot store the configuration: %s",
				      strerror(-rc));
		/* The gateway may run the refused change: put it back on what is stored. */
		api_reconcile(ag);
		return;
	}
	gen = api_store_generation(ag->store);
	if (!strcmp(gw_status, "applied"))
		ag->apply.generation = gen;
	api_event(ag->events, "config", json_pack("{s:I, s:s}", "generation", (json_int_t)gen,
						  "gateway", gw_status));
	api_reply_etag(r);
	api_reply_header(r, "X-Isergw-Gateway", gw_status);
	if (body)
		api_reply_json(r, w->status, body);
	else
		api_reply_text(r, 204, NULL, NULL, 0);
}

static void on_stored(void *ctx, int err)
{
	struct api_req *r = ctx;

	r->wr->storing = false;
	write_stored(r, err);
	api_req_resume(r);
}

/* Stores the write; true when the store answers later (the request is suspended until then). */
static bool write_commit(struct api_req *r, const char *gw_status)
{
	struct api_wreq *w = r->wr;
	json_t *cfg = w->config;
	int rc;

	w->config = NULL;
	w->gw_status = gw_status;
	rc = api_store_commit_async(r->ag->store, cfg, on_stored, r);
	if (rc > 0) {
		w->storing = true;
		api_req_suspend(r);
		return true;
	}
	write_stored(r, rc);
	return false;
}

/* Gateway errors are {"field", "message"} objects, as the agent's own. */
static void errs_from_reply(const json_t *reply, struct gw_errlist *errs)
{
	json_t *e;
	size_t i;

	json_array_foreach(json_object_get(reply, "errors"), i, e) {
		const char *f = json_string_value(json_object_get(e, "field"));
		const char *m = json_string_value(json_object_get(e, "message"));

		gw_errlist_add(errs, f ? f : "", "%s", m ? m : "refused");
	}
	if (!errs->n)
		gw_errlist_add(errs, "", "the gateway refused the change without saying why");
}

static void on_apply_reply(void *ctx, int err, json_t *reply)
{
	struct api_req *r = ctx;

	if (err < 0) {
		/* Lost on the way: stored anyway, the gateway gets it when it reconnects. */
		if (write_commit(r, "pending"))
			return;
	} else if (json_is_true(json_object_get(reply, "ok"))) {
		if (write_commit(r, "applied"))
			return;
	} else {
		struct gw_errlist errs;

		gw_errlist_init(&errs);
		errs_from_reply(reply, &errs);
		api_reply_errlist(r, API_E_APPLY_FAILED, &errs, r->wr->prefix);
		gw_errlist_fini(&errs);
		/* A refused apply leaves the gateway as it was; say so again to be sure. */
		api_reconcile(r->ag);
	}
	api_req_resume(r);
}

int api_write_finish(struct api_req *r, json_t *cfg, unsigned int status, json_t *body,
		     const char *prefix)
{
	struct api_agent *ag = r->ag;
	const json_t *cur = api_store_config(ag->store);
	struct gw_errlist errs;
	struct api_wreq *w;
	json_t *eff;
	int rc;

	if (!cfg) {
		json_decref(body);
		api_reply_err(r, API_E_INTERNAL, NULL, "out of memory");
		return 0;
	}
	api_conf_unmask(cfg, cur);
	gw_errlist_init(&errs);
	if (api_conf_keep_fixed(cfg, cur, &errs)) {
		api_reply_errlist(r, API_E_INVALID, &errs, prefix);
		gw_errlist_fini(&errs);
		json_decref(cfg);
		json_decref(body);
		return 0;
	}
	/* In a cluster the gateway runs the configuration with its own portals and groups. */
	eff = api_cluster_gw_config(ag->cluster, cfg);
	rc = eff ? api_conf_validate(eff, &errs) : -ENOMEM;
	json_decref(eff);
	/* A file or block path over REST must lie in --backstore-dirs. */
	if (!rc && api_bsdirs_check_config(&ag->bsdirs, cfg, cur, &errs))
		rc = -EACCES;
	if (rc) {
		if (!errs.n)
			gw_errlist_add(&errs, "", "out of memory");
		api_reply_errlist(r, API_E_INVALID, &errs, prefix);
		gw_errlist_fini(&errs);
		json_decref(cfg);
		json_decref(body);
		return 0;
	}
	gw_errlist_fini(&errs);
	w = wreq(r);
	if (!w) {
		json_decref(cfg);
		json_decref(body);
		api_reply_err(r, API_E_INTERNAL, NULL, "out of memory");
		return 0;
	}
	w->config = cfg;
	w->body = body;
	w->status = status;
	free(w->prefix);
	w->prefix = prefix ? strdup(prefix) : NULL;
	if (!api_gwc_connected(ag->gwc)) {
		write_commit(r, ag->gwc ? "unreachable" : "none");
		return 0;
	}
	rc = api_gwc_call(ag->gwc, json_pack("{s:s, s:o, s:b}", "op", "apply", "config",
					      api_cluster_gw_config(ag->cluster, cfg), "shrink",
					      w->shrink), on_apply_reply, r);
	if (rc) {
		write_commit(r, "unreachable");
		return 0;
	}
	api_req_suspend(r);
	return 0;
}

/* ---- reconciliation ------------------------------------------------------------------ */

static void on_reconcile_reply(void *ctx, int err, json_t *reply)
{
	struct api_agent *ag = ctx;
	uint64_t gen = api_store_generation(ag->store);

	ag->apply.reconciling = false;
	free(ag->apply.error);
	ag->apply.error = NULL;
	if (err < 0)
		return;
	if (json_is_true(json_object_get(reply, "ok"))) {
		ag->apply.generation = gen;
		gw_info("agent", "gateway reconciled to generation %llu", (unsigned long long)gen);
		/* LUNs it did not have before get the cluster's reservations now. */
		if (ag->cluster)
			api_cluster_gw_applied(ag->cluster);
		api_event(ag->events, "apply", json_pack("{s:b, s:I}", "ok", 1, "generation",
						 (json_int_t)gen));
	} else {
		struct gw_errlist errs;

		gw_errlist_init(&errs);
		errs_from_reply(reply, &errs);
		ag->apply.error = gw_errlist_join(&errs);
		gw_err("agent", "the gateway refused generation %llu: %s", (unsigned long long)gen,
		       ag->apply.error ? ag->apply.error : "?");
		api_event(ag->events, "apply", json_pack("{s:b, s:I, s:o}", "ok", 0, "generation",
						 (json_int_t)gen, "errors",
						 json_deep_copy(json_object_get(reply, "errors"))));
		gw_errlist_fini(&errs);
	}
}

static void on_adopt_reply(void *ctx, int err, json_t *reply)
{
	struct api_agent *ag = ctx;
	json_t *cfg = json_object_get(reply, "config");
	struct gw_errlist errs;

	ag->apply.reconciling = false;
	if (err < 0)
		return;
	if (api_store_generation(ag->store)) {
		/* A write got in first: that is the desired state now. */
		api_reconcile(ag);
		return;
	}
	gw_errlist_init(&errs);
	if (!json_is_object(cfg) || api_conf_validate(cfg, &errs)) {
		char *j = gw_errlist_join(&errs);

		gw_warn("agent", "cannot adopt the gateway's configuration (%s): starting empty",
			j ? j : "no config in the reply");
		free(j);
		gw_errlist_fini(&errs);
		return;
	}
	gw_errlist_fini(&errs);
	if (api_store_commit(ag->store, json_deep_copy(cfg)) == 0) {
		uint64_t gen = api_store_generation(ag->store);

		ag->apply.generation = gen;
		gw_info("agent", "first start: adopted the gateway's running configuration as "
			"generation %llu", (unsigned long long)gen);
		api_event(ag->events, "config", json_pack("{s:I, s:s}", "generation",
							  (json_int_t)gen, "gateway", "applied"));
	}
}

/* Cluster: the gateway's own portals are learnt once per connection, before the first apply. */
static void on_local_reply(void *ctx, int err, json_t *reply)
{
	struct api_agent *ag = ctx;

	ag->apply.reconciling = false;
	if (err < 0 || !ag->cluster)
		return;
	api_cluster_set_local(ag->cluster, json_object_get(reply, "config"));
	api_reconcile(ag);
}

void api_reconcile(struct api_agent *ag)
{
	json_t *eff;
	int r;

	if (!api_gwc_connected(ag->gwc))
		return;
	ag->apply.reconciling = true;
	if (ag->cluster && !api_cluster_has_local(ag->cluster)) {
		r = api_gwc_call(ag->gwc, json_pack("{s:s}", "op", "config"), on_local_reply, ag);
	} else if (!ag->cluster && api_store_generation(ag->store) == 0) {
		/* Adopted once, alone: a cluster's configuration is etcd's, never one gateway's. */
		r = api_gwc_call(ag->gwc, json_pack("{s:s}", "op", "config"), on_adopt_reply, ag);
	} else {
		/* The desired configuration as it is, or in a cluster with this member's portals
		 * and groups. */
		eff = api_cluster_gw_config(ag->cluster, api_store_config(ag->store));
		r = api_gwc_call(ag->gwc, json_pack("{s:s, s:o}", "op", "apply", "config", eff),
				 on_reconcile_reply, ag);
	}
	if (r)
		ag->apply.reconciling = false;
}

int api_gw_state(struct api_agent *ag, void (*cb)(void *ctx, int err, json_t *reply),
		 void *ctx)
{
	if (!ag->gwc)
		return -ENOTCONN;
	return api_gwc_call(ag->gwc, json_pack("{s:s}", "op", "state"), cb, ctx);
}
