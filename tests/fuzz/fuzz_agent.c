// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: the REST agent's request handling. Each input gets a fresh agent built
 * in-process as isergw-agent builds it (api_agent_init, its file store and tokens in a new state
 * folder, the dashboard from webui/, no gateway behind it) listening on loopback in the
 * fuzzer's own network namespace. Two input shapes:
 *
 *   raw        (any first byte but 0xff) the input goes over one TCP connection into
 *              libmicrohttpd and the agent's router as it is; the text "@TOKEN@" becomes an
 *              admin token (seeds reach past the authentication; the fuzzer mutates around it).
 *              Captured curl sessions are the seeds (cap-*, acap-*).
 *   requests   (0xff, then up to 32 records) well-formed requests, each on its own connection,
 *              one after the other against the same agent, so state builds up (a target created,
 *              a LUN added to it, its ACL edited, the configuration replaced...) and the fuzzer
 *              spends its time in the handlers instead of in HTTP framing. A record:
 *                method   GET POST PUT DELETE PATCH HEAD OPTIONS (byte mod 7)
 *                route    a path template of the API (byte mod the table below)
 *                flags    bits 0-1 token: admin, read-only, none, wrong; bit 2 If-Match with
 *                         the last ETag the agent sent; bit 3 a stale If-Match; bit 4 the body
 *                         as text/plain; bit 5 Accept-Encoding gzip; bit 6 ?dry_run=true;
 *                         bit 7 a path segment percent-encoded
 *                names    which target, LUN, initiator, portal/bond/session fills the template
 *                         (2 bits each; names include %00, dot segments and overlong ones)
 *                length   2 bytes little-endian, then the body (JSON from the seeds)
 *              The seeds (req-*) come from the curl requests of the agent's own suites
 *              (tests/fuzz/agent2corpus.py).
 *
 * Agent functions called: api_auth_open, api_auth_add, api_auth_close, api_agent_init,
 * api_agent_fini (include/api_agent.h, include/api_auth.h).
 *
 * Checked: whatever comes back starts as an HTTP/1.x response; in request mode every request
 * is answered with a status line, a request without a valid token never succeeds (2xx) except
 * on the routes open to all (health, openapi.json, the dashboard's files), and a read-only
 * token never succeeds in changing anything; no crash, leak or hang; the agent stops cleanly.
 */
#include <ftw.h>
#include <stdint.h>

#include "api_agent.h"
#include "api_auth.h"
#include "fuzz_gw.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p);
}

/* ---- request mode ---------------------------------------------------------------------- */

static const char *const methods[] = { "GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS" };

/* {T} target, {L} LUN, {I} initiator, {P} portal, {B} bond, {S} session: names[] below. */
static const char *const routes[] = {
	"/api/v1/health", "/api/v1/version", "/api/v1/openapi.json", "/api/v1/targets",
	"/api/v1/targets/{T}", "/api/v1/targets/{T}/luns", "/api/v1/targets/{T}/luns/{L}",
	"/api/v1/targets/{T}/acls", "/api/v1/targets/{T}/acls/{I}", "/api/v1/portals",
	"/api/v1/portals/{P}", "/api/v1/discovery", "/api/v1/sessions", "/api/v1/sessions/{S}",
	"/api/v1/config", "/api/v1/config/validate", "/api/v1/bonds", "/api/v1/bonds/{B}",
	"/api/v1/rdma", "/metrics", "/api/v1/cluster", "/api/v1/events", "/", "/index.html",
	"/api/v1/targets/{T}/luns/{L}/{I}", "/api/v1/{T}",
};

static const char *const names_t[] = { "iqn.2026-11.org.isergw:t1", "iqn.2026-11.org.isergw:t2",
	"iqn.2026-11.org.isergw:t1%00junk", "..%2f..%2fetc" };
static const char *const names_l[] = { "0", "1", "16383", "-1" };
static const char *const names_i[] = { "iqn.1994-05.com.example:h1",
	"iqn.1994-05.com.example:h2", "%2e%2e", "iqn.1994-05.com.example:h1%ff" };
static const char *const names_p[] = { "tcp0", "tcp1", "bond0", "1" };

/* Routes anyone may use; everything else needs a token. */
static bool route_open(const char *tmpl)
{
	return !strcmp(tmpl, "/api/v1/health") || !strcmp(tmpl, "/api/v1/openapi.json") ||
	       !strcmp(tmpl, "/") || !strcmp(tmpl, "/index.html");
}

/* Fills tmpl's placeholders into out. */
static void route_fill(struct gw_buf *out, const char *tmpl, uint8_t sel, bool encode)
{
	for (const char *p = tmpl; *p; p++) {
		const char *v = NULL;

		if (p[0] == '{' && p[1] && p[2] == '}') {
			switch (p[1]) {
			case 'T': v = names_t[sel & 3]; break;
			case 'L': v = names_l[(sel >> 2) & 3]; break;
			case 'I': v = names_i[(sel >> 4) & 3]; break;
			default: v = names_p[(sel >> 6) & 3]; break;
			}
			p += 2;
		}
		if (!v) {
			gw_buf_append(out, p, 1);
		} else if (encode) {
			/* The same name percent-encoded: the router must decode it to the same. */
			for (; *v; v++)
				gw_buf_printf(out, "%%%02X", (unsigned char)*v);
		} else {
			gw_buf_append(out, v, strlen(v));
		}
	}
}

/* The status of an HTTP response in in (0: none), and its ETag into etag. */
static int answer_parse(const struct gw_buf *in, char *etag, size_t etag_size)
{
	const char *p = (const char *)in->data, *end = p + in->len, *h;
	int st = 0;

	if (in->len < 12 || memcmp(p, "HTTP/1.", 7))
		return 0;
	for (int i = 9; i < 12; i++) {
		if (p[i] < '0' || p[i] > '9')
			return 0;
		st = st * 10 + (p[i] - '0');
	}
	h = memmem(p, (size_t)(end - p), "\r\nETag: ", 8);
	if (h) {
		const char *v = h + 8, *e = memchr(v, '\r', (size_t)(end - v));

		if (e && (size_t)(e - v) < etag_size) {
			memcpy(etag, v, (size_t)(e - v));
			etag[e - v] = '\0';
		}
	}
	return st;
}

/* One request on a connection of its own; returns the status (0: no answer). */
static int request_one(struct fgw *f, const struct gw_buf *req, char *etag, size_t etag_size)
{
	struct gw_buf out;
	int st;

	gw_buf_init(&out);
	fgw_connect(f);
	fgw_send(f, req->data, req->len, &out);
	shutdown(f->fd, SHUT_WR);
	for (int i = 0; i < 200; i++) {
		gw_loop_run_once(&f->loop, 0);
		if (!fgw_drain(f, &out))
			break;
	}
	close(f->fd);
	f->fd = -1;
	fgw_spin(f, 2);
	st = answer_parse(&out, etag, etag_size);
	if (getenv("FUZZ_TRACE")) {
		/* The request line, the status and the start of the body. */
		const uint8_t *eol = memchr(req->data, '\r', req->len);
		const uint8_t *body = memmem(out.data, out.len, "\r\n\r\n", 4);
		size_t blen = body ? out.len - (size_t)(body + 4 - out.data) : 0;

		fprintf(stderr, "fuzz_agent: %.*s -> %d %.*s\n",
			(int)(eol ? eol - req->data : 0), (const char *)req->data, st,
			(int)(blen > 200 ? 200 : blen), body ? (const char *)body + 4 : "");
	}
	if (out.len && (out.len < 7 || memcmp(out.data, "HTTP/1.", 7)))
		__builtin_trap();	/* an answer is an HTTP response */
	gw_buf_fini(&out);
	return st;
}

static void requests(struct fgw *f, const uint8_t *data, size_t size, const char *admin,
		     const char *reader)
{
	char etag[128] = "";
	struct gw_buf req;
	size_t pos = 0;
	int n = 0;

	gw_buf_init(&req);
	while (pos + 6 <= size && n++ < 32) {
		const char *m = methods[data[pos] % GW_ARRAY_SIZE(methods)];
		const char *tmpl = routes[data[pos + 1] % GW_ARRAY_SIZE(routes)];
		uint8_t fl = data[pos + 2], sel = data[pos + 3];
		size_t blen = (size_t)data[pos + 4] | (size_t)data[pos + 5] << 8;
		unsigned int tok = fl & 3;
		int st;

		pos += 6;
		if (blen > size - pos)
			blen = size - pos;
		req.len = 0;
		gw_buf_printf(&req, "%s ", m);
		route_fill(&req, tmpl, sel, fl & 0x80);
		if (fl & 0x40)
			gw_buf_printf(&req, "?dry_run=true");
		gw_buf_printf(&req, " HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: curl/7.88.1\r\n"
			      "Accept: */*\r\n");
		if (tok == 0 || tok == 1)
			gw_buf_printf(&req, "Authorization: Bearer %s\r\n", tok ? reader : admin);
		else if (tok == 3)
			gw_buf_printf(&req, "Authorization: Bearer %.*sx\r\n",
				      (int)strlen(admin) - 1, admin);
		if ((fl & 4) && etag[0])
			gw_buf_printf(&req, "If-Match: %s\r\n", etag);
		if (fl & 8)
			gw_buf_printf(&req, "If-Match: \"0\", W/\"1\"\r\n");
		if (fl & 0x20)
			gw_buf_printf(&req, "Accept-Encoding: gzip\r\n");
		if (blen)
			gw_buf_printf(&req, "Content-Type: %s\r\nContent-Length: %zu\r\n",
				      fl & 0x10 ? "text/plain" : "application/json", blen);
		gw_buf_printf(&req, "\r\n");
		gw_buf_append(&req, data + pos, blen);
		pos += blen;
		st = request_one(f, &req, etag, sizeof(etag));
		/* Every request is answered, except an event stream, which never ends. */
		if (!st && strcmp(tmpl, "/api/v1/events"))
			__builtin_trap();
		/* No token, or a wrong one: nothing but the open routes succeeds. */
		if ((tok == 2 || tok == 3) && st >= 200 && st < 300 && !route_open(tmpl))
			__builtin_trap();
		/* A read-only token changes nothing (validate only reads). */
		if (tok == 1 && st >= 200 && st < 300 && strcmp(m, "GET") && strcmp(m, "HEAD") &&
		    strcmp(m, "OPTIONS") && strcmp(tmpl, "/api/v1/config/validate"))
			__builtin_trap();
	}
	gw_buf_fini(&req);
}

/* ---- raw mode -------------------------------------------------------------------------- */

static void raw(struct fgw *f, const uint8_t *data, size_t size, const char *token)
{
	struct gw_buf in, out;
	size_t pos = 0;

	/* The token where the input asks for it. */
	gw_buf_init(&in);
	gw_buf_init(&out);
	while (pos < size) {
		const uint8_t *at = memmem(data + pos, size - pos, "@TOKEN@", 7);
		size_t n = at ? (size_t)(at - (data + pos)) : size - pos;

		gw_buf_append(&in, data + pos, n);
		pos += n;
		if (at) {
			gw_buf_append(&in, token, strlen(token));
			pos += 7;
		}
	}
	fgw_connect(f);
	fgw_send(f, in.data, in.len, &out);
	/* Half-close: a request without its end is answered or dropped, not waited for. */
	shutdown(f->fd, SHUT_WR);
	for (int i = 0; i < 200; i++) {
		gw_loop_run_once(&f->loop, 0);
		if (!fgw_drain(f, &out))
			break;
	}
	/* FUZZ_TRACE=1: the answers, to check a seed does what it should. */
	if (getenv("FUZZ_TRACE"))
		fprintf(stderr, "fuzz_agent: %zu bytes: %.*s\n", out.len,
			(int)(out.len > 300 ? 300 : out.len), (const char *)out.data);
	if (out.len && (out.len < 7 || memcmp(out.data, "HTTP/1.", 7)))
		__builtin_trap();	/* an answer is an HTTP response */
	close(f->fd);
	f->fd = -1;
	gw_buf_fini(&in);
	gw_buf_fini(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char dir[64], token[API_TOKEN_LEN + 1], reader[API_TOKEN_LEN + 1], listen_on[32];
	struct api_conf conf = { 0 };
	struct api_agent ag;
	struct api_auth auth;
	struct fgw f = { .fd = -1 };
	uint16_t port = fgw_free_port();

	gw_log_set_level(GW_LOG_ERR - 1);
	snprintf(dir, sizeof(dir), "/dev/shm/isergw-fuzz-agent.XXXXXX");
	if (!mkdtemp(dir))
		abort();
	if (api_auth_open(&auth, dir) || api_auth_add(&auth, "fuzz", API_ROLE_ADMIN, token) ||
	    api_auth_add(&auth, "viewer", API_ROLE_READ, reader))
		abort();
	api_auth_close(&auth);
	snprintf(listen_on, sizeof(listen_on), "127.0.0.1:%u", (unsigned int)port);
	conf.state_dir = dir;
	conf.listen = listen_on;
	conf.webui_dir = access("webui/index.html", R_OK) == 0 ? "webui" : "";
	if (gw_loop_init(&f.loop) || api_agent_init(&ag, &f.loop, &conf))
		abort();
	f.port = port;
	if (size && data[0] == 0xff)
		requests(&f, data + 1, size - 1, token, reader);
	else
		raw(&f, data, size, token);
	fgw_spin(&f, 8);
	api_agent_fini(&ag);
	fgw_spin(&f, 8);
	gw_loop_fini(&f.loop);
	nftw(dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
	return 0;
}
