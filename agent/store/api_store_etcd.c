// SPDX-License-Identifier: MIT
/*
 * etcd v3 through its JSON gateway (POST /v3/kv/range, /v3/kv/txn, /v3/lease/...): keys and
 * values travel base64-encoded, 64-bit numbers as strings. The desired configuration lives at
 * PREFIX/config as {"generation": N, "config": {...}}; a save is a txn comparing the key's
 * mod_revision with the one this agent last read (create_revision 0 for the first save), so
 * of two agents writing at once exactly one wins and the other answers 412 without storing.
 */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_etcd.h"
#include "gw_log.h"

#define ETCD_CONNECT_MS 500
#define ETCD_TIMEOUT_MS 1500
#define ETCD_RESP_MAX (64u << 20)

/* ---- base64 ------------------------------------------------------------------------------ */

static const char b64_alpha[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *api_b64_encode(const void *data, size_t len)
{
	const unsigned char *p = data;
	char *out = malloc(4 * ((len + 2) / 3) + 1), *o = out;
	size_t i;

	if (!out)
		return NULL;
	for (i = 0; i + 2 < len; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];

		*o++ = b64_alpha[v >> 18];
		*o++ = b64_alpha[(v >> 12) & 63];
		*o++ = b64_alpha[(v >> 6) & 63];
		*o++ = b64_alpha[v & 63];
	}
	if (i < len) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < len ? (uint32_t)p[i + 1] << 8 : 0);

		*o++ = b64_alpha[v >> 18];
		*o++ = b64_alpha[(v >> 12) & 63];
		*o++ = i + 1 < len ? b64_alpha[(v >> 6) & 63] : '=';
		*o++ = '=';
	}
	*o = '\0';
	return out;
}

static int b64_val(char c)
{
	const char *p = c ? strchr(b64_alpha, c) : NULL;

	return p ? (int)(p - b64_alpha) : -1;
}

char *api_b64_decode(const char *s, size_t *len)
{
	size_t n = strlen(s), i, o = 0;
	uint32_t acc = 0;
	unsigned int bits = 0;
	char *out;

	while (n && s[n - 1] == '=')
		n--;
	out = malloc(n * 3 / 4 + 1);
	if (!out)
		return NULL;
	for (i = 0; i < n; i++) {
		int v = b64_val(s[i]);

		if (v < 0) {
			free(out);
			return NULL;
		}
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (char)((acc >> bits) & 0xff);
		}
	}
	out[o] = '\0';
	*len = o;
	return out;
}

/* ---- request and answer helpers ---------------------------------------------------------- */

char *api_etcd_prefix_end(const char *prefix)
{
	size_t n = strlen(prefix);
	char *e = strdup(prefix);

	if (!e)
		return NULL;
	/* Prefixes here are printable ASCII, so the last byte never overflows. */
	if (n)
		e[n - 1]++;
	return e;
}

json_t *api_etcd_range_req(const char *key, bool prefix)
{
	char *k = api_b64_encode(key, strlen(key)), *end = NULL, *e = NULL;
	json_t *req = NULL;

	if (!k)
		return NULL;
	if (prefix) {
		end = api_etcd_prefix_end(key);
		e = end ? api_b64_encode(end, strlen(end)) : NULL;
		if (e)
			req = json_pack("{s:s, s:s}", "key", k, "range_end", e);
	} else {
		req = json_pack("{s:s}", "key", k);
	}
	free(k);
	free(end);
	free(e);
	return req;
}

json_t *api_etcd_put_req(const char *key, const char *value, int64_t lease)
{
	char *k = api_b64_encode(key, strlen(key)), *v = api_b64_encode(value, strlen(value));
	json_t *req = NULL;
	char l[24];

	if (k && v) {
		req = json_pack("{s:s, s:s}", "key", k, "value", v);
		if (req && lease) {
			snprintf(l, sizeof(l), "%lld", (long long)lease);
			json_object_set_new(req, "lease", json_string(l));
		}
	}
	free(k);
	free(v);
	return req;
}

int64_t api_etcd_int(const json_t *o, const char *key, int64_t def)
{
	const json_t *v = json_object_get(o, key);

	if (json_is_integer(v))
		return json_integer_value(v);
	if (json_is_string(v))
		return strtoll(json_string_value(v), NULL, 10);
	return def;
}

int api_etcd_kv(const json_t *resp, size_t i, char **key, char **value, int64_t *mod_rev)
{
	const json_t *kv = json_array_get(json_object_get(resp, "kvs"), i);
	const char *k = json_string_value(json_object_get(kv, "key"));
	const char *v = json_string_value(json_object_get(kv, "value"));
	size_t n;

	if (!kv || !k)
		return -ENOENT;
	*key = api_b64_decode(k, &n);
	/* An empty value is left out of the answer altogether. */
	*value = api_b64_decode(v ? v : "", &n);
	if (!*key || !*value) {
		free(*key);
		free(*value);
		return -EPROTO;
	}
	if (mod_rev)
		*mod_rev = api_etcd_int(kv, "mod_revision", 0);
	return 0;
}

/* ---- the client -------------------------------------------------------------------------- */

struct api_etcd {
	char **ep;
	size_t nep;
	size_t cur;			/* the endpoint that answered last */
	CURL *curl;
	bool down;			/* the last call reached nobody (logged once) */
};

int api_etcd_create(const char *endpoints, struct api_etcd **out)
{
	struct api_etcd *e = calloc(1, sizeof(*e));
	char *copy = strdup(endpoints ? endpoints : ""), *tok, *save = NULL;

	if (!e || !copy)
		goto nomem;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char **n;

		if (strncmp(tok, "http://", 7) && strncmp(tok, "https://", 8)) {
			gw_err("etcd", "endpoint %s: expected http://HOST:PORT", tok);
			free(copy);
			api_etcd_destroy(e);
			return -EINVAL;
		}
		n = realloc(e->ep, (e->nep + 1) * sizeof(*n));
		if (!n)
			goto nomem;
		e->ep = n;
		e->ep[e->nep] = strdup(tok);
		if (!e->ep[e->nep])
			goto nomem;
		e->nep++;
	}
	free(copy);
	copy = NULL;
	if (!e->nep) {
		gw_err("etcd", "no etcd endpoint given");
		api_etcd_destroy(e);
		return -EINVAL;
	}
	e->curl = curl_easy_init();
	if (!e->curl)
		goto nomem;
	*out = e;
	return 0;
nomem:
	free(copy);
	api_etcd_destroy(e);
	return -ENOMEM;
}

void api_etcd_destroy(struct api_etcd *e)
{
	size_t i;

	if (!e)
		return;
	for (i = 0; i < e->nep; i++)
		free(e->ep[i]);
	free(e->ep);
	if (e->curl)
		curl_easy_cleanup(e->curl);
	free(e);
}

struct etcd_buf {
	char *p;
	size_t n;
	bool overflow;
};

static size_t etcd_write(char *data, size_t size, size_t nmemb, void *arg)
{
	struct etcd_buf *b = arg;
	size_t n = size * nmemb;
	char *p;

	if (b->n + n > ETCD_RESP_MAX) {
		b->overflow = true;
		return 0;
	}
	p = realloc(b->p, b->n + n + 1);
	if (!p)
		return 0;
	memcpy(p + b->n, data, n);
	b->n += n;
	p[b->n] = '\0';
	b->p = p;
	return n;
}

static int etcd_post(struct api_etcd *e, size_t idx, const char *path, const char *body,
		     json_t **resp)
{
	struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
	struct etcd_buf b = { 0 };
	char url[512];
	json_error_t jerr;
	CURLcode cc;
	long code = 0;
	int r = 0;

	snprintf(url, sizeof(url), "%s%s", e->ep[idx], path);
	curl_easy_reset(e->curl);
	curl_easy_setopt(e->curl, CURLOPT_URL, url);
	curl_easy_setopt(e->curl, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(e->curl, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(e->curl, CURLOPT_WRITEFUNCTION, etcd_write);
	curl_easy_setopt(e->curl, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(e->curl, CURLOPT_CONNECTTIMEOUT_MS, (long)ETCD_CONNECT_MS);
	curl_easy_setopt(e->curl, CURLOPT_TIMEOUT_MS, (long)ETCD_TIMEOUT_MS);
	curl_easy_setopt(e->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e->curl, CURLOPT_NOPROXY, "*");
	cc = curl_easy_perform(e->curl);
	curl_slist_free_all(hdr);
	if (cc != CURLE_OK) {
		gw_dbg("etcd", "%s: %s", url, curl_easy_strerror(cc));
		r = cc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT : -EHOSTUNREACH;
		goto out;
	}
	curl_easy_getinfo(e->curl, CURLINFO_RESPONSE_CODE, &code);
	*resp = b.p ? json_loads(b.p, 0, &jerr) : NULL;
	if (code != 200 || !json_is_object(*resp)) {
		gw_warn("etcd", "%s: HTTP %ld: %.200s", url, code, b.p ? b.p : "");
		json_decref(*resp);
		*resp = NULL;
		r = -EPROTO;
	}
out:
	free(b.p);
	return r;
}

int api_etcd_call(struct api_etcd *e, const char *path, json_t *req, json_t **resp)
{
	char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
	size_t i;
	int r = -EHOSTUNREACH;

	json_decref(req);
	*resp = NULL;
	if (!body)
		return -ENOMEM;
	for (i = 0; i < e->nep; i++) {
		size_t idx = (e->cur + i) % e->nep;

		r = etcd_post(e, idx, path, body, resp);
		if (r == -EHOSTUNREACH || r == -ETIMEDOUT)
			continue;
		e->cur = idx;
		break;
	}
	free(body);
	if (r == -EHOSTUNREACH || r == -ETIMEDOUT) {
		if (!e->down)
			gw_warn("etcd", "no etcd endpoint answers (%s%s): serving the last known "
				"configuration, refusing changes", e->ep[0], e->nep > 1 ? ", ..." : "");
		e->down = true;
	} else if (e->down) {
		gw_info("etcd", "etcd answers again at %s", e->ep[e->cur]);
		e->down = false;
	}
	return r;
}

/* ---- the store backend ------------------------------------------------------------------- */

struct api_store_etcd {
	struct api_etcd *e;
	char *key;
	char *cache;
	int64_t mod_rev;		/* of the value last read or written, 0: none */
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

static int etcd_save(struct api_store *s, const json_t *config, uint64_t gen)
{
	struct api_store_etcd *x = s->priv;
	json_t *root, *req, *resp, *cmp;
	char *text, *k, rev[24];
	int r;

	if (x->mod_rev < 0)
		return -ESTALE;
	root = json_pack("{s:I, s:O}", "generation", (json_int_t)gen, "config", config);
	text = root ? json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(root);
	k = api_b64_encode(x->key, strlen(x->key));
	if (!text || !k) {
		free(text);
		free(k);
		return -ENOMEM;
	}
	snprintf(rev, sizeof(rev), "%lld", (long long)x->mod_rev);
	if (x->mod_rev)
		cmp = json_pack("{s:s, s:s, s:s, s:s}", "key", k, "target", "MOD", "result",
				"EQUAL", "mod_revision", rev);
	else
		cmp = json_pack("{s:s, s:s, s:s, s:s}", "key", k, "target", "CREATE", "result",
				"EQUAL", "create_revision", "0");
	req = json_pack("{s:[o], s:[{s:o}]}", "compare", cmp, "success", "request_put",
			api_etcd_put_req(x->key, text, 0));
	free(k);
	r = req ? api_etcd_call(x->e, "/v3/kv/txn", req, &resp) : -ENOMEM;
	if (r) {
		free(text);
		return r;
	}
	if (!json_is_true(json_object_get(resp, "succeeded"))) {
		gw_warn("store", "generation %llu not stored: another agent changed %s first",
			(unsigned long long)gen, x->key);
		json_decref(resp);
		free(text);
		return -ESTALE;
	}
	/* The put's revision is the txn's. */
	x->mod_rev = api_etcd_int(json_object_get(resp, "header"), "revision", 0);
	json_decref(resp);
	etcd_cache_write(x, text);
	free(text);
	return 0;
}

static int etcd_refresh(struct api_store *s)
{
	struct api_store_etcd *x = s->priv;
	json_t *config = NULL;
	uint64_t gen = 0;
	int64_t rev = 0;
	int r;

	r = etcd_read(x, &config, &gen, &rev);
	if (r == -ENOENT) {
		x->mod_rev = 0;
		return 0;
	}
	if (r)
		return r;
	if (rev == x->mod_rev && gen == s->generation) {
		json_decref(config);
		return 0;
	}
	x->mod_rev = rev;
	if (gen == s->generation && json_equal(config, s->config)) {
		json_decref(config);
		return 0;
	}
	json_decref(s->config);
	s->config = config;
	s->generation = gen;
	return 1;
}

static void etcd_destroy(struct api_store *s)
{
	struct api_store_etcd *x = s->priv;

	if (!x)
		return;
	api_etcd_destroy(x->e);
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
