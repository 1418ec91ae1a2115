// SPDX-License-Identifier: MIT
/*
 * The etcd v3 client (docs/CLUSTER.md): POSTs to etcd's JSON gateway through libcurl's multi
 * interface, driven by the agent's loop (curl's sockets are gw_watches, its timeout one
 * gw_timer), so no call ever blocks the loop; a watch is one long POST /v3/watch whose answer
 * is a stream of JSON messages, split here as they arrive. Endpoints are tried in turn from
 * the one that answered last: a refused or timed-out connection, a TLS failure or an answer
 * that is not etcd's moves to the next; each endpoint's last failure is kept, logged once and
 * shown in the cluster's status. api_etcd_call() is the same call done synchronously, for
 * start-up and shutdown only.
 */
#include <curl/curl.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "api_etcd.h"
#include "gw_buf.h"
#include "gw_list.h"
#include "gw_log.h"
#include "gw_loop.h"

#define ETCD_CONNECT_MS 1000
#define ETCD_TIMEOUT_MS 2000
#define ETCD_SYNC_TIMEOUT_MS 1500
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

/* ---- answers and streams (pure) ---------------------------------------------------------- */

int api_etcd_answer(long http, const char *body, size_t len, json_t **resp, char *why,
		    size_t whylen)
{
	json_error_t jerr;
	json_t *j = body && len ? json_loadb(body, len, 0, &jerr) : NULL;
	const json_t *err;

	*resp = NULL;
	/* Every answer carries a header; a keepalive's is inside its "result". */
	if (http == 200 && json_is_object(j) &&
	    (json_is_object(json_object_get(j, "header")) ||
	     json_is_object(json_object_get(json_object_get(j, "result"), "header")))) {
		*resp = j;
		return 0;
	}
	/* etcd's own refusals: {"error": "...", "code": N, "message": "..."} (gRPC status). */
	err = json_object_get(j, "message");
	if (!json_is_string(err))
		err = json_object_get(j, "error");
	if (json_is_object(j) && json_is_string(err) && json_object_get(j, "code")) {
		snprintf(why, whylen, "etcd refused the call (HTTP %ld): %s", http,
			 json_string_value(err));
		json_decref(j);
		return -EPROTO;
	}
	json_decref(j);
	/* Anything else is not etcd's v3 JSON gateway: a web server, a proxy, an etcd v2. */
	snprintf(why, whylen, "answers HTTP %ld with %s: not etcd's v3 JSON gateway (is this an "
		 "etcd client URL?)", http, !len ? "an empty body" : body[0] == '<' ?
		 "an HTML page" : "something that is not an etcd answer");
	return -EBADMSG;
}

int api_etcd_stream_next(const char *buf, size_t len, json_t **msg, size_t *used)
{
	json_error_t jerr;
	size_t i = 0;
	json_t *j;

	*msg = NULL;
	while (i < len && (buf[i] == ' ' || buf[i] == '\n' || buf[i] == '\r' || buf[i] == '\t'))
		i++;
	*used = i;
	if (i == len)
		return 0;
	if (buf[i] != '{')
		return -EPROTO;
	j = json_loadb(buf + i, len - i, JSON_DISABLE_EOF_CHECK, &jerr);
	if (!j)
		return json_error_code(&jerr) == json_error_premature_end_of_input ? 0 : -EPROTO;
	*msg = j;
	*used = i + (size_t)jerr.position;
	return 1;
}

/* ---- the client -------------------------------------------------------------------------- */

struct etcd_ep {
	char *url;
	char *error;			/* the last failure, NULL: answered last time */
};

struct etcd_sock {
	struct gw_watch w;
	struct gw_close close;
	struct api_etcd *e;
};

struct api_etcd_op {
	struct gw_list node;		/* in e->ops */
	struct api_etcd *e;
	CURL *h;
	struct curl_slist *hdr;
	char *path, *body;
	size_t idx, tries;
	struct gw_buf in;
	bool watch, streaming, dead;
	uint64_t deadline_ms;		/* monotonic: the call's whole time, 0: ETCD_TIMEOUT_MS
					 * per endpoint */
	api_etcd_done_fn done;
	api_etcd_msg_fn msg;
	void *ctx;
	char errbuf[CURL_ERROR_SIZE];
};

struct api_etcd {
	struct etcd_ep *ep;
	size_t nep;
	size_t cur;			/* the endpoint that answered last */
	char *ca, *cert, *key;
	struct gw_loop *loop;
	CURLM *multi;
	struct gw_timer timer;
	struct gw_list ops;
	unsigned int pumping;
	CURL *sync;
	bool down;			/* the last call reached no etcd (logged once) */
};

static void ep_fail(struct api_etcd *e, size_t idx, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void ep_fail(struct api_etcd *e, size_t idx, const char *fmt, ...)
{
	struct etcd_ep *p = &e->ep[idx];
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (p->error && !strcmp(p->error, msg))
		return;
	gw_warn("etcd", "%s: %s", p->url, msg);
	free(p->error);
	p->error = strdup(msg);
}

static void ep_ok(struct api_etcd *e, size_t idx)
{
	struct etcd_ep *p = &e->ep[idx];

	if (p->error) {
		gw_info("etcd", "%s answers again", p->url);
		free(p->error);
		p->error = NULL;
	}
	if (e->down)
		gw_info("etcd", "etcd answers again at %s", p->url);
	e->down = false;
	e->cur = idx;
}

static void all_failed(struct api_etcd *e)
{
	if (!e->down)
		gw_warn("etcd", "no etcd endpoint answers (%s%s): serving the last known "
			"configuration, refusing changes", e->ep[0].url, e->nep > 1 ? ", ..." : "");
	e->down = true;
}

static int ep_add(struct api_etcd *e, const char *url)
{
	struct etcd_ep *n = realloc(e->ep, (e->nep + 1) * sizeof(*n));

	if (!n)
		return -ENOMEM;
	e->ep = n;
	e->ep[e->nep].error = NULL;
	e->ep[e->nep].url = strdup(url);
	if (!e->ep[e->nep].url)
		return -ENOMEM;
	e->nep++;
	return 0;
}

static size_t op_write(char *data, size_t size, size_t nmemb, void *arg)
{
	struct api_etcd_op *op = arg;
	size_t n = size * nmemb;

	if (op->in.len + n > ETCD_RESP_MAX || gw_buf_append(&op->in, data, n))
		return 0;
	return n;
}

/* What every call sets on its handle: the URL, the body, TLS and the timeouts. */
static void etcd_setup(struct api_etcd *e, CURL *h, size_t idx, const char *path,
		       const char *body, struct curl_slist *hdr, bool watch)
{
	char url[512];

	snprintf(url, sizeof(url), "%s%s", e->ep[idx].url, path);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)ETCD_CONNECT_MS);
	/* A watch lasts as long as the connection: the lease's keepalive says when it is
	 * dead, and the cluster starts a new one then. */
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, watch ? 0L : (long)ETCD_TIMEOUT_MS);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	if (e->ca)
		curl_easy_setopt(h, CURLOPT_CAINFO, e->ca);
	if (e->cert)
		curl_easy_setopt(h, CURLOPT_SSLCERT, e->cert);
	if (e->key)
		curl_easy_setopt(h, CURLOPT_SSLKEY, e->key);
}

/* A transport failure, as a message for the endpoint and an errno for the caller. */
static int etcd_curl_err(struct api_etcd *e, size_t idx, CURLcode cc, const char *detail)
{
	const char *d = detail && *detail ? detail : curl_easy_strerror(cc);

	switch (cc) {
	case CURLE_OPERATION_TIMEDOUT:
		ep_fail(e, idx, "no answer in time (%s)", d);
		return -ETIMEDOUT;
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_SSL_ISSUER_ERROR:
		ep_fail(e, idx, "TLS failed: %s (check --etcd-ca, --etcd-cert and --etcd-key)", d);
		return -EHOSTUNREACH;
	case CURLE_UNSUPPORTED_PROTOCOL:
		ep_fail(e, idx, "%s", d);
		return -EHOSTUNREACH;
	default:
		ep_fail(e, idx, "cannot reach it: %s", d);
		return -EHOSTUNREACH;
	}
}

int api_etcd_create(const struct api_etcd_conf *conf, struct gw_loop *loop,
		    struct api_etcd **out)
{
	struct api_etcd *e = calloc(1, sizeof(*e));
	char *copy = strdup(conf->endpoints ? conf->endpoints : ""), *tok, *save = NULL;
	bool tls = false;
	int r = -ENOMEM;

	if (!e || !copy)
		goto fail;
	gw_list_init(&e->ops);
	e->loop = loop;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (strncmp(tok, "http://", 7) && strncmp(tok, "https://", 8)) {
			gw_err("etcd", "endpoint %s: expected http://HOST:PORT or https://HOST:PORT",
			       tok);
			r = -EINVAL;
			goto fail;
		}
		tls |= !strncmp(tok, "https://", 8);
		if (ep_add(e, tok))
			goto fail;
	}
	if (!e->nep) {
		gw_err("etcd", "no etcd endpoint given");
		r = -EINVAL;
		goto fail;
	}
	if (!!conf->cert_file != !!conf->key_file) {
		gw_err("etcd", "--etcd-cert and --etcd-key go together");
		r = -EINVAL;
		goto fail;
	}
	if ((conf->ca_file || conf->cert_file) && !tls)
		gw_warn("etcd", "TLS files given but no https:// endpoint: they are not used");
	if ((conf->ca_file && !(e->ca = strdup(conf->ca_file))) ||
	    (conf->cert_file && !(e->cert = strdup(conf->cert_file))) ||
	    (conf->key_file && !(e->key = strdup(conf->key_file))))
		goto fail;
	e->sync = curl_easy_init();
	if (!e->sync)
		goto fail;
	free(copy);
	*out = e;
	return 0;
fail:
	free(copy);
	api_etcd_destroy(e);
	return r;
}

/* ---- the multi interface in the loop ------------------------------------------------------ */

static void etcd_pump(struct api_etcd *e);

static void sock_free(struct gw_close *c)
{
	free(gw_container_of(c, struct etcd_sock, close));
}

static void sock_ready(struct gw_watch *w, uint32_t events)
{
	struct etcd_sock *s = gw_container_of(w, struct etcd_sock, w);
	struct api_etcd *e = s->e;
	int mask = 0, running;

	if (events & EPOLLIN)
		mask |= CURL_CSELECT_IN;
	if (events & EPOLLOUT)
		mask |= CURL_CSELECT_OUT;
	if (events & (EPOLLERR | EPOLLHUP))
		mask |= CURL_CSELECT_ERR;
	curl_multi_socket_action(e->multi, w->fd, mask, &running);
	etcd_pump(e);
}

static int on_socket(CURL *h, curl_socket_t fd, int what, void *arg, void *sockp)
{
	struct api_etcd *e = arg;
	struct etcd_sock *s = sockp;
	uint32_t ev = 0;

	(void)h;
	if (what == CURL_POLL_REMOVE) {
		if (s) {
			gw_watch_stop(&s->w);
			curl_multi_assign(e->multi, fd, NULL);
			gw_loop_close(e->loop, &s->close, sock_free);
		}
		return 0;
	}
	if (!s) {
		s = calloc(1, sizeof(*s));
		if (!s)
			return -1;
		s->e = e;
		gw_watch_init(&s->w, e->loop, fd, sock_ready);
		curl_multi_assign(e->multi, fd, s);
	}
	if (what == CURL_POLL_IN || what == CURL_POLL_INOUT)
		ev |= EPOLLIN;
	if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT)
		ev |= EPOLLOUT;
	return gw_watch_set(&s->w, ev) ? -1 : 0;
}

static void on_timer(struct gw_timer *t)
{
	struct api_etcd *e = gw_container_of(t, struct api_etcd, timer);
	int running;

	curl_multi_socket_action(e->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	etcd_pump(e);
}

static int on_curl_timer(CURLM *m, long ms, void *arg)
{
	struct api_etcd *e = arg;

	(void)m;
	if (ms < 0)
		gw_timer_disarm(&e->timer);
	else
		gw_timer_arm(&e->timer, ms > 0 ? (uint64_t)ms : 1, 0);
	return 0;
}

static int multi_init(struct api_etcd *e)
{
	if (e->multi)
		return 0;
	if (!e->loop)
		return -EINVAL;
	if (gw_timer_init(&e->timer, e->loop, on_timer))
		return -ENOMEM;
	e->multi = curl_multi_init();
	if (!e->multi) {
		gw_timer_fini(&e->timer);
		return -ENOMEM;
	}
	curl_multi_setopt(e->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
	curl_multi_setopt(e->multi, CURLMOPT_SOCKETDATA, e);
	curl_multi_setopt(e->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
	curl_multi_setopt(e->multi, CURLMOPT_TIMERDATA, e);
	return 0;
}

static void op_free(struct api_etcd_op *op)
{
	gw_list_del(&op->node);
	if (op->h)
		curl_easy_cleanup(op->h);
	curl_slist_free_all(op->hdr);
	gw_buf_fini(&op->in);
	free(op->path);
	free(op->body);
	free(op);
}

/* Stops an op without its callback; freed at once, or after the pump that is running. */
static void op_kill(struct api_etcd_op *op)
{
	struct api_etcd *e = op->e;

	if (op->dead)
		return;
	op->dead = true;
	if (op->h)
		curl_multi_remove_handle(e->multi, op->h);
	if (!e->pumping)
		op_free(op);
}

static int op_start(struct api_etcd_op *op)
{
	struct api_etcd *e = op->e;
	uint64_t now = gw_now_ms();

	if (op->deadline_ms && now >= op->deadline_ms)
		return -ETIMEDOUT;	/* the caller's time is spent: no next endpoint */
	curl_easy_reset(op->h);
	gw_buf_reset(&op->in);
	op->errbuf[0] = '\0';
	etcd_setup(e, op->h, op->idx, op->path, op->body, op->hdr, op->watch);
	if (op->deadline_ms && op->deadline_ms - now < ETCD_TIMEOUT_MS) {
		long left = (long)(op->deadline_ms - now);

		curl_easy_setopt(op->h, CURLOPT_TIMEOUT_MS, left);
		curl_easy_setopt(op->h, CURLOPT_CONNECTTIMEOUT_MS,
				 left < ETCD_CONNECT_MS ? left : (long)ETCD_CONNECT_MS);
	}
	curl_easy_setopt(op->h, CURLOPT_WRITEFUNCTION, op_write);
	curl_easy_setopt(op->h, CURLOPT_WRITEDATA, op);
	curl_easy_setopt(op->h, CURLOPT_PRIVATE, op);
	curl_easy_setopt(op->h, CURLOPT_ERRORBUFFER, op->errbuf);
	return curl_multi_add_handle(e->multi, op->h) == CURLM_OK ? 0 : -ENOMEM;
}

/* Ends op with err (and the answer, borrowed) through its callback, then frees it. */
static void op_end(struct api_etcd_op *op, int err, json_t *resp)
{
	api_etcd_done_fn done = op->done;
	void *ctx = op->ctx;

	op_kill(op);
	if (done)
		done(ctx, err, resp);
}

/* The endpoint failed before anything useful came: the next one, or the end. */
static void op_next(struct api_etcd_op *op, int err)
{
	struct api_etcd *e = op->e;
	int r;

	curl_multi_remove_handle(e->multi, op->h);
	if (++op->tries < e->nep) {
		op->idx = (op->idx + 1) % e->nep;
		r = op_start(op);
		if (!r)
			return;
		if (r == -ETIMEDOUT) {
			/* Out of time, not out of endpoints: the next ones were not tried. */
			op_end(op, r, NULL);
			return;
		}
	}
	all_failed(e);
	op_end(op, err, NULL);
}

static void op_done(struct api_etcd_op *op, CURLcode cc)
{
	struct api_etcd *e = op->e;
	json_t *resp = NULL;
	char why[400];
	long code = 0;
	int r;

	if (op->watch && op->streaming) {
		/* A watch that ran and ended: the cluster lists again and watches anew. */
		op_end(op, cc == CURLE_OK ? -ECONNRESET : -EHOSTUNREACH, NULL);
		return;
	}
	if (cc != CURLE_OK) {
		op_next(op, etcd_curl_err(e, op->idx, cc, op->errbuf));
		return;
	}
	curl_easy_getinfo(op->h, CURLINFO_RESPONSE_CODE, &code);
	r = api_etcd_answer(code, (const char *)op->in.data, op->in.len, &resp, why,
			    sizeof(why));
	if (r == -EBADMSG) {
		ep_fail(e, op->idx, "%s", why);
		op_next(op, -EHOSTUNREACH);
		return;
	}
	ep_ok(e, op->idx);
	if (r)
		gw_warn("etcd", "%s%s: %s", e->ep[op->idx].url, op->path, why);
	op_end(op, r, resp);
	json_decref(resp);
}

/* A watch's bytes so far: every whole message goes to its callback. */
static void op_stream(struct api_etcd_op *op)
{
	struct api_etcd *e = op->e;
	size_t used;
	json_t *m;
	int r;

	while (!op->dead && op->in.len) {
		r = api_etcd_stream_next((const char *)op->in.data, op->in.len, &m, &used);
		if (r == 0) {
			gw_buf_consume(&op->in, used);
			break;
		}
		if (r < 0 || (!op->streaming && !json_is_object(json_object_get(m, "result")))) {
			char why[400];
			json_t *dummy;
			long code = 0;

			json_decref(m);
			curl_easy_getinfo(op->h, CURLINFO_RESPONSE_CODE, &code);
			if (api_etcd_answer(code, (const char *)op->in.data, op->in.len, &dummy,
					    why, sizeof(why)) == -EPROTO || op->streaming) {
				gw_warn("etcd", "%s/v3/watch: %s", e->ep[op->idx].url,
					op->streaming ? "the stream is not JSON" : why);
				op_end(op, -EPROTO, NULL);
			} else {
				ep_fail(e, op->idx, "%s", why);
				op_next(op, -EHOSTUNREACH);
			}
			json_decref(dummy);
			return;
		}
		gw_buf_consume(&op->in, used);
		if (!op->streaming) {
			op->streaming = true;
			ep_ok(e, op->idx);
		}
		op->msg(op->ctx, m);
		json_decref(m);
	}
}

static void etcd_pump(struct api_etcd *e)
{
	struct api_etcd_op *op, *tmp;
	CURLMsg *msg;
	int left;

	e->pumping++;
	gw_list_for_each_entry(op, &e->ops, node)
		if (op->watch && !op->dead && op->in.len)
			op_stream(op);
	while ((msg = curl_multi_info_read(e->multi, &left))) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		op = NULL;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&op);
		if (op && !op->dead) {
			/* A watch that never started is judged whole by op_done. */
			if (op->watch && op->streaming && op->in.len)
				op_stream(op);
			if (!op->dead)
				op_done(op, msg->data.result);
		}
	}
	if (--e->pumping == 0)
		gw_list_for_each_entry_safe(op, tmp, &e->ops, node)
			if (op->dead)
				op_free(op);
}

static int op_new(struct api_etcd *e, const char *path, json_t *req, bool watch,
		  uint64_t timeout_ms, api_etcd_done_fn done, api_etcd_msg_fn msgfn, void *ctx,
		  struct api_etcd_op **out)
{
	struct api_etcd_op *op;
	char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
	int r;

	json_decref(req);
	if (!body)
		return -ENOMEM;
	r = multi_init(e);
	op = r ? NULL : calloc(1, sizeof(*op));
	if (!op) {
		free(body);
		return r ? r : -ENOMEM;
	}
	op->e = e;
	op->body = body;
	op->watch = watch;
	op->deadline_ms = timeout_ms ? gw_now_ms() + timeout_ms : 0;
	op->done = done;
	op->msg = msgfn;
	op->ctx = ctx;
	op->idx = e->cur;
	gw_buf_init(&op->in);
	gw_list_add_tail(&e->ops, &op->node);
	op->path = strdup(path);
	op->h = curl_easy_init();
	op->hdr = curl_slist_append(NULL, "Content-Type: application/json");
	if (!op->path || !op->h || !op->hdr || op_start(op)) {
		op_free(op);
		return -ENOMEM;
	}
	if (out)
		*out = op;
	return 0;
}

int api_etcd_post(struct api_etcd *e, const char *path, json_t *req, api_etcd_done_fn done,
		  void *ctx)
{
	return op_new(e, path, req, false, 0, done, NULL, ctx, NULL);
}

int api_etcd_post_within(struct api_etcd *e, const char *path, json_t *req,
			 uint64_t timeout_ms, api_etcd_done_fn done, void *ctx)
{
	return op_new(e, path, req, false, timeout_ms, done, NULL, ctx, NULL);
}

int api_etcd_watch(struct api_etcd *e, const char *prefix, int64_t start_rev,
		   api_etcd_msg_fn msg, api_etcd_done_fn end, void *ctx, struct api_etcd_op **op)
{
	json_t *range = api_etcd_range_req(prefix, true), *req;
	char rev[24];

	if (!range)
		return -ENOMEM;
	snprintf(rev, sizeof(rev), "%lld", (long long)start_rev);
	json_object_set_new(range, "start_revision", json_string(rev));
	req = json_pack("{s:o}", "create_request", range);
	return op_new(e, "/v3/watch", req, true, 0, end, msg, ctx, op);
}

void api_etcd_cancel(struct api_etcd_op *op)
{
	if (op)
		op_kill(op);
}

void api_etcd_cancel_ctx(struct api_etcd *e, void *ctx)
{
	struct api_etcd_op *op, *tmp;

	gw_list_for_each_entry_safe(op, tmp, &e->ops, node)
		if (op->ctx == ctx)
			op_kill(op);
}

bool api_etcd_down(const struct api_etcd *e)
{
	return e->down;
}

json_t *api_etcd_status(const struct api_etcd *e)
{
	json_t *eps = json_array();
	size_t i;

	for (i = 0; i < e->nep; i++)
		json_array_append_new(eps, json_pack("{s:s, s:s, s:s*}", "url", e->ep[i].url,
						     "state", e->ep[i].error ? "failing" :
						     i == e->cur && !e->down ? "in use" : "standby",
						     "error", e->ep[i].error));
	return json_pack("{s:s, s:b, s:o}", "endpoint", e->ep[e->cur].url, "tls",
			 e->ca || e->cert, "endpoints", eps);
}

void api_etcd_destroy(struct api_etcd *e)
{
	struct api_etcd_op *op, *tmp;
	size_t i;

	if (!e)
		return;
	gw_list_for_each_entry_safe(op, tmp, &e->ops, node) {
		op->dead = true;
		if (op->h)
			curl_multi_remove_handle(e->multi, op->h);
		op_free(op);
	}
	if (e->multi) {
		curl_multi_cleanup(e->multi);
		gw_timer_fini(&e->timer);
	}
	for (i = 0; i < e->nep; i++) {
		free(e->ep[i].url);
		free(e->ep[i].error);
	}
	free(e->ep);
	free(e->ca);
	free(e->cert);
	free(e->key);
	if (e->sync)
		curl_easy_cleanup(e->sync);
	free(e);
}

/* ---- synchronous calls (start-up and shutdown only) ----------------------------------------- */

static size_t sync_write(char *data, size_t size, size_t nmemb, void *arg)
{
	struct gw_buf *b = arg;
	size_t n = size * nmemb;

	if (b->len + n > ETCD_RESP_MAX || gw_buf_append(b, data, n))
		return 0;
	return n;
}

static int sync_post(struct api_etcd *e, size_t idx, const char *path, const char *body,
		     json_t **resp)
{
	struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
	char errbuf[CURL_ERROR_SIZE] = "", why[400];
	struct gw_buf b;
	CURLcode cc;
	long code = 0;
	int r;

	gw_buf_init(&b);
	curl_easy_reset(e->sync);
	etcd_setup(e, e->sync, idx, path, body, hdr, false);
	curl_easy_setopt(e->sync, CURLOPT_TIMEOUT_MS, (long)ETCD_SYNC_TIMEOUT_MS);
	curl_easy_setopt(e->sync, CURLOPT_WRITEFUNCTION, sync_write);
	curl_easy_setopt(e->sync, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(e->sync, CURLOPT_ERRORBUFFER, errbuf);
	cc = curl_easy_perform(e->sync);
	curl_slist_free_all(hdr);
	if (cc != CURLE_OK) {
		r = etcd_curl_err(e, idx, cc, errbuf);
		goto out;
	}
	curl_easy_getinfo(e->sync, CURLINFO_RESPONSE_CODE, &code);
	r = api_etcd_answer(code, (const char *)b.data, b.len, resp, why, sizeof(why));
	if (r == -EBADMSG) {
		ep_fail(e, idx, "%s", why);
		r = -EHOSTUNREACH;
		goto out;
	}
	ep_ok(e, idx);
	if (r)
		gw_warn("etcd", "%s%s: %s", e->ep[idx].url, path, why);
out:
	gw_buf_fini(&b);
	return r;
}

int api_etcd_call(struct api_etcd *e, const char *path, json_t *req, json_t **resp)
{
	char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
	size_t i, start = e->cur;
	int r = -EHOSTUNREACH;

	json_decref(req);
	*resp = NULL;
	if (!body)
		return -ENOMEM;
	for (i = 0; i < e->nep; i++) {
		r = sync_post(e, (start + i) % e->nep, path, body, resp);
		if (r != -EHOSTUNREACH && r != -ETIMEDOUT)
			break;
	}
	free(body);
	if (r == -EHOSTUNREACH || r == -ETIMEDOUT)
		all_failed(e);
	return r;
}
