// SPDX-License-Identifier: MIT
/*
 * Token storage and checking. Tokens are random (getrandom), so one unsalted SHA-256 is enough
 * to make the stored file useless to whoever reads it: there is nothing to brute-force.
 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api_http.h"
#include "api_store.h"
#include "gw_log.h"
#include "gw_loop.h"

const char *api_role_name(enum api_role r)
{
	switch (r) {
	case API_ROLE_ADMIN: return "admin";
	case API_ROLE_READ: return "read";
	default: return "none";
	}
}

int api_role_parse(const char *s, enum api_role *r)
{
	if (!strcmp(s, "admin"))
		*r = API_ROLE_ADMIN;
	else if (!strcmp(s, "read") || !strcmp(s, "read-only") || !strcmp(s, "readonly"))
		*r = API_ROLE_READ;
	else
		return -EINVAL;
	return 0;
}

int api_auth_digest(const char *s, uint8_t out[32])
{
	unsigned int len = 0;

	if (!EVP_Digest(s, strlen(s), out, &len, EVP_sha256(), NULL) || len != 32)
		return -EIO;
	return 0;
}

static void hex(const uint8_t *p, size_t n, char *out)
{
	static const char d[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = d[p[i] >> 4];
		out[2 * i + 1] = d[p[i] & 15];
	}
	out[2 * n] = 0;
}

static int unhex(const char *s, uint8_t *out, size_t n)
{
	size_t i;

	if (strlen(s) != 2 * n)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		unsigned int v;

		if (sscanf(s + 2 * i, "%2x", &v) != 1)
			return -EINVAL;
		out[i] = (uint8_t)v;
	}
	return 0;
}

static void api_auth_clear(struct api_auth *a)
{
	size_t i;

	for (i = 0; i < a->n; i++)
		free(a->v[i].name);
	free(a->v);
	a->v = NULL;
	a->n = 0;
}

static int api_auth_save(const struct api_auth *a)
{
	json_t *root = json_object(), *arr = json_array();
	char dig[65];
	char *text;
	size_t i;
	int r;

	if (!root || !arr) {
		json_decref(root);
		json_decref(arr);
		return -ENOMEM;
	}
	json_object_set_new(root, "tokens", arr);
	for (i = 0; i < a->n; i++) {
		hex(a->v[i].digest, 32, dig);
		json_array_append_new(arr, json_pack("{s:s, s:s, s:s}", "name", a->v[i].name,
						     "role", api_role_name(a->v[i].role),
						     "sha256", dig));
	}
	text = json_dumps(root, JSON_INDENT(2));
	json_decref(root);
	if (!text)
		return -ENOMEM;
	r = api_write_atomic(a->path, text, strlen(text), 0600);
	free(text);
	return r;
}

static int api_auth_push(struct api_auth *a, const char *name, enum api_role role,
			 const uint8_t digest[32])
{
	struct api_token *v = realloc(a->v, (a->n + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	a->v = v;
	v[a->n].name = strdup(name);
	if (!v[a->n].name)
		return -ENOMEM;
	v[a->n].role = role;
	memcpy(v[a->n].digest, digest, 32);
	a->n++;
	return 0;
}

static int api_auth_load(struct api_auth *a)
{
	json_error_t jerr;
	json_t *root, *arr, *e;
	size_t i;
	int r = 0;

	root = json_load_file(a->path, 0, &jerr);
	if (!root) {
		if (access(a->path, F_OK) < 0)
			return -ENOENT;
		gw_err("auth", "%s: line %d: %s", a->path, jerr.line, jerr.text);
		return -EINVAL;
	}
	arr = json_object_get(root, "tokens");
	json_array_foreach(arr, i, e) {
		const char *name = json_string_value(json_object_get(e, "name"));
		const char *role = json_string_value(json_object_get(e, "role"));
		const char *dig = json_string_value(json_object_get(e, "sha256"));
		enum api_role rl;
		uint8_t d[32];

		if (!name || !role || !dig || api_role_parse(role, &rl) || unhex(dig, d, 32)) {
			gw_err("auth", "%s: tokens[%zu] is malformed", a->path, i);
			r = -EINVAL;
			break;
		}
		r = api_auth_push(a, name, rl, d);
		if (r)
			break;
	}
	json_decref(root);
	return r;
}

static int api_new_token(char *token)
{
	uint8_t rnd[32];
	ssize_t n = getrandom(rnd, sizeof(rnd), 0);

	if (n != (ssize_t)sizeof(rnd))
		return -EIO;
	memcpy(token, API_TOKEN_PREFIX, 4);
	hex(rnd, sizeof(rnd), token + 4);
	return 0;
}

int api_auth_add(struct api_auth *a, const char *name, enum api_role role, char *token)
{
	uint8_t d[32];
	size_t i;
	int r;

	for (i = 0; i < a->n; i++)
		if (!strcmp(a->v[i].name, name))
			return -EEXIST;
	r = api_new_token(token);
	if (!r)
		r = api_auth_digest(token, d);
	if (!r)
		r = api_auth_push(a, name, role, d);
	if (r)
		return r;
	r = api_auth_save(a);
	if (r) {
		a->n--;
		free(a->v[a->n].name);
	}
	return r;
}

int api_auth_open(struct api_auth *a, const char *state_dir)
{
	char token[API_TOKEN_LEN + 2], *tpath = NULL;	/* + "\n" */
	int r;

	memset(a, 0, sizeof(*a));
	if (asprintf(&a->path, "%s/tokens.json", state_dir) < 0) {
		a->path = NULL;
		return -ENOMEM;
	}
	r = api_auth_load(a);
	if (r != -ENOENT)
		return r;
	/* First start: an admin token, shown once through a 0600 file next to the store. */
	r = api_auth_add(a, "admin", API_ROLE_ADMIN, token);
	if (r) {
		gw_err("auth", "cannot create the first admin token in %s: %s", a->path,
		       strerror(-r));
		return r;
	}
	if (asprintf(&tpath, "%s/admin.token", state_dir) < 0)
		return -ENOMEM;
	strcat(token, "\n");
	r = api_write_atomic(tpath, token, strlen(token), 0600);
	explicit_bzero(token, sizeof(token));
	if (r)
		gw_err("auth", "cannot write %s: %s", tpath, strerror(-r));
	else
		gw_info("auth", "first start: admin token written to %s (mode 0600)", tpath);
	free(tpath);
	return r;
}

void api_auth_close(struct api_auth *a)
{
	api_auth_clear(a);
	free(a->path);
	a->path = NULL;
}

int api_auth_check(const struct api_auth *a, const char *header, enum api_role *role,
		   const char **name)
{
	uint8_t d[32];
	size_t i;
	int found = -1;

	if (!header || strncasecmp(header, "Bearer ", 7))
		return -EACCES;
	header += 7;
	while (*header == ' ')
		header++;
	if (!*header || strlen(header) > 512 || api_auth_digest(header, d))
		return -EACCES;
	/* Every entry is compared, so timing does not tell which one matched. */
	for (i = 0; i < a->n; i++)
		if (!CRYPTO_memcmp(a->v[i].digest, d, 32))
			found = (int)i;
	if (found < 0)
		return -EACCES;
	*role = a->v[found].role;
	if (name)
		*name = a->v[found].name;
	return 0;
}

/* ---- failed tokens per source address ---------------------------------------------- */

void api_gate_init(struct api_gate *g, const struct api_auth *auth, unsigned int max_fails,
		   unsigned int window_s, unsigned int backoff_s)
{
	memset(g, 0, sizeof(*g));
	g->auth = auth;
	g->max_fails = max_fails ? max_fails : API_AUTH_FAILS_DEFAULT;
	if (g->max_fails == UINT_MAX)
		g->max_fails = 0;
	g->window_s = window_s ? window_s : API_AUTH_WINDOW_DEFAULT;
	g->backoff_s = backoff_s ? backoff_s : API_AUTH_BACKOFF_DEFAULT;
}

void api_gate_fini(struct api_gate *g)
{
	free(g->src);
	g->src = NULL;
	g->nsrc = 0;
}

static struct api_authlim_src *gate_find(struct api_gate *g, const char *addr)
{
	size_t i;

	for (i = 0; i < g->nsrc; i++)
		if (!strcmp(g->src[i].addr, addr))
			return &g->src[i];
	return NULL;
}

unsigned int api_gate_blocked(struct api_gate *g, const char *addr, uint64_t now_ms)
{
	struct api_authlim_src *s = gate_find(g, addr);

	if (!s || s->until_ms <= now_ms)
		return 0;
	return (unsigned int)((s->until_ms - now_ms + 999) / 1000);
}

/* A slot for addr: its own, a free one, or the one quiet the longest (never a blocked one
 * while another is free to take: a flood of new addresses cannot unblock an old one early). */
static struct api_authlim_src *gate_slot(struct api_gate *g, const char *addr, uint64_t now_ms)
{
	struct api_authlim_src *s = gate_find(g, addr), *old = NULL;
	size_t i;

	if (s)
		return s;
	if (!g->src) {
		g->src = calloc(API_AUTHLIM_SOURCES, sizeof(*g->src));
		if (!g->src)
			return NULL;
	}
	if (g->nsrc < API_AUTHLIM_SOURCES) {
		s = &g->src[g->nsrc++];
	} else {
		for (i = 0; i < g->nsrc; i++) {
			struct api_authlim_src *c = &g->src[i];

			if (c->until_ms > now_ms)
				continue;
			if (!old || c->seen_ms < old->seen_ms)
				old = c;
		}
		s = old ? old : &g->src[0];
	}
	memset(s, 0, sizeof(*s));
	snprintf(s->addr, sizeof(s->addr), "%s", addr);
	s->window_ms = now_ms;
	return s;
}

unsigned int api_gate_fail(struct api_gate *g, const char *addr, uint64_t now_ms)
{
	struct api_authlim_src *s = gate_slot(g, addr, now_ms);

	if (!s)
		return 0;
	s->total++;
	s->seen_ms = now_ms;
	if (!g->max_fails)
		return 0;
	if (now_ms - s->window_ms >= (uint64_t)g->window_s * 1000) {
		s->window_ms = now_ms;
		s->fails = 0;
	}
	if (++s->fails < g->max_fails)
		return 0;
	s->fails = 0;
	s->window_ms = now_ms;
	s->until_ms = now_ms + (uint64_t)g->backoff_s * 1000;
	return g->backoff_s;
}

static void reply_limited(struct api_req *r, unsigned int secs)
{
	char v[16];

	snprintf(v, sizeof(v), "%u", secs);
	api_reply_header(r, "Retry-After", v);
	api_reply_err(r, API_E_RATE_LIMITED, NULL, "too many failed tokens from this address: "
		      "retry in %u s", secs);
}

static int auth_access(void *ctx, struct api_req *r, enum api_role need)
{
	struct api_gate *g = ctx;
	uint64_t now = gw_now_ms();
	unsigned int secs;
	char peer[48];

	api_req_peer(r, peer, sizeof(peer));
	secs = g->max_fails ? api_gate_blocked(g, peer, now) : 0;
	if (secs) {
		struct api_authlim_src *s = gate_find(g, peer);

		if (s)
			s->limited++;
		reply_limited(r, secs);
		return -EACCES;
	}
	if (api_auth_check(g->auth, api_req_header(r, "Authorization"), &r->role,
			   &r->token_name)) {
		secs = api_gate_fail(g, peer, now);
		if (secs) {
			gw_warn("auth", "%s: %u failed tokens within %u s: rate-limited for %u s",
				peer, g->max_fails, g->window_s, secs);
			reply_limited(r, secs);
			return -EACCES;
		}
		api_reply_header(r, "WWW-Authenticate", "Bearer realm=\"isergw\"");
		api_reply_err(r, API_E_UNAUTHORIZED, NULL, NULL);
		return -EACCES;
	}
	if (r->role < need) {
		api_reply_err(r, API_E_FORBIDDEN, NULL, "this endpoint needs an %s token",
			      api_role_name(need));
		return -EACCES;
	}
	return 0;
}

const struct api_http_hook api_auth_hook = {
	.access = auth_access,
};
