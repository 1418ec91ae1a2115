// SPDX-License-Identifier: MIT
/*
 * etcd v3 through its JSON gateway (POST /v3/kv/range, /v3/kv/txn, /v3/lease/...): keys and
 * values travel base64-encoded, 64-bit numbers as strings. The desired configuration lives at
 * PREFIX/config as {"generation": N, "config": {...}}; a save is a txn comparing the key's
 * mod_revision with the one this agent last read (create_revision 0 for the first save), so
 * of two agents writing at once exactly one wins and the other answers 412 without storing.
 * The value is read synchronously once, at start; after that the cluster's watch hands every
 * change in (api_store_etcd_apply) and saves go through the loop (save_async), so neither the
 * REST API nor the loop waits for etcd.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_etcd.h"
#include "gw_list.h"
#include "gw_log.h"
#include "store_priv.h"


/* ---- the store backend ------------------------------------------------------------------- */

struct api_store_etcd {
	struct api_etcd *e;
	char *key;
	char *cache;
	int64_t mod_rev;		/* of the value last read or written, 0: none */
	bool refused;			/* the prefix is another cluster's */
	struct gw_list saves;		/* etcd_save_wait under way */
};

static int etcd_parse_value(const char *text, json_t **config, uint64_t *gen, const char *what)
{
	json_error_t jerr;
	json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &jerr), *c, *g;

	c = json_object_get(root, "config");
	g = json_object_get(root, "generation");
	if (!json_is_object(c) || !json_is_integer(g) || json_integer_value(g) < 1) {
		gw_err("store", "%s: expected {\"generation\": N, \"config\": {...}}", what);
		json_decref(root);
		return -EINVAL;
	}
	*config = json_incref(c);
	*gen = (uint64_t)json_integer_value(g);
	json_decref(root);
	return 0;
}

static void etcd_cache_write(struct api_store_etcd *x, const char *text)
{
	if (x->cache)
		api_write_atomic(x->cache, text, strlen(text), 0600);
}

/* Reads the key: 0 with config, gen and rev set; -ENOENT (rev 0) or -errno. */
static int etcd_read(struct api_store_etcd *x, json_t **config, uint64_t *gen, int64_t *rev)
{
	json_t *resp;
	char *k = NULL, *v = NULL;
	int r;

	r = api_etcd_call(x->e, "/v3/kv/range", api_etcd_range_req(x->key, false), &resp);
	if (r)
		return r;
	r = api_etcd_kv(resp, 0, &k, &v, rev);
	json_decref(resp);
	if (r == -ENOENT) {
		*rev = 0;
		return -ENOENT;
	}
	if (r)
		return r;
	r = etcd_parse_value(v, config, gen, x->key);
	if (!r)
		etcd_cache_write(x, v);
	free(k);
	free(v);
	return r;
}

static int etcd_load(struct api_store *s, json_t **config, uint64_t *gen)
{
	struct api_store_etcd *x = s->priv;
	json_error_t jerr;
	json_t *root;
	char *text;
	int r;

	r = etcd_read(x, config, gen, &x->mod_rev);
	if (r != -EHOSTUNREACH && r != -ETIMEDOUT)
		return r;
	/* etcd is away: the last value seen, if any. */
	root = x->cache ? json_load_file(x->cache, 0, &jerr) : NULL;
	if (!root)
		return r;
	text = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	r = text ? etcd_parse_value(text, config, gen, x->cache) : -ENOMEM;
	free(text);
	if (!r)
		gw_warn("store", "etcd is not reachable: starting from the cached generation %llu",
			(unsigned long long)*gen);
	x->mod_rev = -1;	/* unknown: a save must refresh first */
	return r;
}

/* The txn that stores gen only if the key is still at the revision last read. */
static json_t *etcd_save_req(struct api_store_etcd *x, const json_t *config, uint64_t gen,
			     char **text)
{
	json_t *root, *cmp, *req;
	char *k, rev[24];

	root = json_pack("{s:I, s:O}", "generation", (json_int_t)gen, "config", config);
	*text = root ? json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(root);
	k = api_b64_encode(x->key, strlen(x->key));
	if (!*text || !k) {
		free(*text);
		*text = NULL;
		free(k);
		return NULL;
	}
	snprintf(rev, sizeof(rev), "%lld", (long long)x->mod_rev);
	if (x->mod_rev)
		cmp = json_pack("{s:s, s:s, s:s, s:s}", "key", k, "target", "MOD", "result",
				"EQUAL", "mod_revision", rev);
	else
		cmp = json_pack("{s:s, s:s, s:s, s:s}", "key", k, "target", "CREATE", "result",
				"EQUAL", "create_revision", "0");
	req = json_pack("{s:[o], s:[{s:o}]}", "compare", cmp, "success", "request_put",
			api_etcd_put_req(x->key, *text, 0));
	free(k);
	if (!req) {
		free(*text);
		*text = NULL;
	}
	return req;
}

/* The txn's answer: 0 (stored), -ESTALE (another agent was first). */
static int etcd_save_answer(struct api_store_etcd *x, uint64_t gen, const char *text,
			    const json_t *resp)
{
	if (!json_is_true(json_object_get(resp, "succeeded"))) {
		gw_warn("store", "generation %llu not stored: another agent changed %s first",
			(unsigned long long)gen, x->key);
		return -ESTALE;
	}
	/* The put's revision is the txn's. */
	x->mod_rev = api_etcd_int(json_object_get(resp, "header"), "revision", 0);
	etcd_cache_write(x, text);
	return 0;
}

static int etcd_save(struct api_store *s, const json_t *config, uint64_t gen)
{
	struct api_store_etcd *x = s->priv;
	json_t *req, *resp;
	char *text;
	int r;

	if (x->mod_rev < 0)
		return -ESTALE;
	req = etcd_save_req(x, config, gen, &text);
	if (!req)
		return -ENOMEM;
	r = api_etcd_call(x->e, "/v3/kv/txn", req, &resp);
	if (!r)
		r = etcd_save_answer(x, gen, text, resp);
	json_decref(resp);
	free(text);
	return r;
}

struct etcd_save_wait {
	struct gw_list node;		/* in x->saves */
	struct api_store_etcd *x;
	uint64_t gen;
	char *text;
	void (*done)(void *ctx, int err);
	void *ctx;
};

static void on_save(void *arg, int err, json_t *resp)
{
	struct etcd_save_wait *w = arg;

	gw_list_del(&w->node);
	if (!err)
		err = etcd_save_answer(w->x, w->gen, w->text, resp);
	free(w->text);
	w->done(w->ctx, err);
	free(w);
}

static int etcd_save_async(struct api_store *s, const json_t *config, uint64_t gen,
			   void (*done)(void *ctx, int err), void *ctx)
{
	struct api_store_etcd *x = s->priv;
	struct etcd_save_wait *w;
	json_t *req;
	int r;

	if (x->refused)
		return -ENOTUNIQ;
	if (x->mod_rev < 0)
		return -EHOSTUNREACH;	/* not read from etcd yet: nothing to compare with */
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	*w = (struct etcd_save_wait){ .x = x, .gen = gen, .done = done, .ctx = ctx };
	req = etcd_save_req(x, config, gen, &w->text);
	r = req ? api_etcd_post(x->e, "/v3/kv/txn", req, on_save, w) : -ENOMEM;
	if (r) {
		free(w->text);
		free(w);
		return r;
	}
	gw_list_add_tail(&x->saves, &w->node);
	return 0;
}

/* The watch keeps the configuration current (api_store_etcd_apply): a write starts from it and
 * its compare-and-swap catches what the watch has not delivered yet. Never blocks. */
static int etcd_refresh(struct api_store *s)
{
	struct api_store_etcd *x = s->priv;

	if (x->refused)
		return -ENOTUNIQ;
	if (x->mod_rev < 0 || api_etcd_down(x->e))
		return -EHOSTUNREACH;
	return 0;
}

int api_store_etcd_apply(struct api_store *s, const char *value, int64_t mod_rev)
{
	struct api_store_etcd *x = s->priv;
	json_t *config = NULL;
	uint64_t gen = 0;
	int r;

	if (!value) {
		/* Deleted: the next save creates it again. */
		x->mod_rev = 0;
		return 0;
	}
	r = etcd_parse_value(value, &config, &gen, x->key);
	if (r)
		return r;
	if (mod_rev == x->mod_rev && gen == s->generation) {
		json_decref(config);
		return 0;
	}
	x->mod_rev = mod_rev;
	etcd_cache_write(x, value);
	if (gen == s->generation && json_equal(config, s->config)) {
		json_decref(config);
		return 0;
	}
	json_decref(s->config);
	s->config = config;
	s->generation = gen;
	return 1;
}

void api_store_etcd_refuse(struct api_store *s)
{
	struct api_store_etcd *x = s->priv;

	x->refused = true;
}

static void etcd_destroy(struct api_store *s)
{
	struct api_store_etcd *x = s->priv;

	if (!x)
		return;
	/* Calls under way end without their callbacks: the saves they carried are ended here,
	 * with -ECANCELED to their owner (api_store.c frees its part and answers no one). */
	api_etcd_destroy(x->e);
	while (!gw_list_empty(&x->saves)) {
		struct etcd_save_wait *w = gw_list_first_entry(&x->saves, struct etcd_save_wait,
							       node);

		gw_list_del(&w->node);
		free(w->text);
		w->done(w->ctx, -ECANCELED);
		free(w);
	}
	free(x->key);
	free(x->cache);
	free(x);
}

static const struct api_store_ops api_store_etcd_ops = {
	.name = "etcd",
	.load = etcd_load,
	.save = etcd_save,
	.destroy = etcd_destroy,
	.refresh = etcd_refresh,
	.save_async = etcd_save_async,
};

int api_store_open_etcd(struct api_etcd *e, const char *prefix, const char *cache_path,
			struct api_store **out)
{
	struct api_store *s = calloc(1, sizeof(*s));
	struct api_store_etcd *x = calloc(1, sizeof(*x));
	int r;

	if (!s || !x || asprintf(&x->key, "%s/config", prefix) < 0 ||
	    (cache_path && !(x->cache = strdup(cache_path)))) {
		if (x)
			free(x->key);
		free(s);
		free(x);
		api_etcd_destroy(e);
		return -ENOMEM;
	}
	x->e = e;
	gw_list_init(&x->saves);
	s->ops = &api_store_etcd_ops;
	s->priv = x;
	r = s->ops->load(s, &s->config, &s->generation);
	if (r == -ENOENT) {
		s->config = api_store_empty_config();
		s->generation = 0;
		r = s->config ? 0 : -ENOMEM;
	}
	if (r == -EHOSTUNREACH || r == -ETIMEDOUT) {
		/* Nothing cached either: start empty and read-only until etcd answers. */
		s->config = api_store_empty_config();
		s->generation = 0;
		x->mod_rev = -1;
		r = s->config ? 0 : -ENOMEM;
	}
	if (r) {
		api_store_destroy(s);
		return r;
	}
	*out = s;
	return 0;
}

struct api_etcd *api_store_etcd_client(struct api_store *s)
{
	struct api_store_etcd *x = s->priv;

	return s->ops == &api_store_etcd_ops ? x->e : NULL;
}
