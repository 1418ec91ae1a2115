// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: the REST agent's request handling, raw HTTP in. Each input gets a fresh
 * agent built in-process as isergw-agent builds it (api_agent_init, its file store and tokens in
 * a new state folder, the dashboard from webui/, no gateway behind it) listening on loopback in
 * the fuzzer's own network namespace; the input goes over one TCP connection into
 * libmicrohttpd and the agent's router, handlers, JSON bodies, If-Match and static files. The
 * text "@TOKEN@" in the input becomes an admin token of that agent (seeds reach past the
 * authentication; the fuzzer still mutates around it).
 *
 * Agent functions called: api_auth_open, api_auth_add, api_auth_close, api_agent_init,
 * api_agent_fini (include/api_agent.h, include/api_auth.h).
 *
 * Checked: whatever comes back starts as an HTTP/1.x response; no crash, leak or hang; the
 * agent stops cleanly.
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char dir[64], token[API_TOKEN_LEN + 1], listen_on[32];
	struct api_conf conf = { 0 };
	struct api_agent ag;
	struct api_auth auth;
	struct gw_buf in, out;
	struct fgw f = { .fd = -1 };
	uint16_t port = fgw_free_port();
	size_t pos = 0;

	gw_log_set_level(GW_LOG_ERR - 1);
	snprintf(dir, sizeof(dir), "/dev/shm/isergw-fuzz-agent.XXXXXX");
	if (!mkdtemp(dir))
		abort();
	if (api_auth_open(&auth, dir) || api_auth_add(&auth, "fuzz", API_ROLE_ADMIN, token))
		abort();
	api_auth_close(&auth);
	snprintf(listen_on, sizeof(listen_on), "127.0.0.1:%u", (unsigned int)port);
	conf.state_dir = dir;
	conf.listen = listen_on;
	conf.webui_dir = access("webui/index.html", R_OK) == 0 ? "webui" : "";
	if (gw_loop_init(&f.loop) || api_agent_init(&ag, &f.loop, &conf))
		abort();
	f.port = port;
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
	fgw_connect(&f);
	fgw_send(&f, in.data, in.len, &out);
	/* Half-close: a request without its end is answered or dropped, not waited for. */
	shutdown(f.fd, SHUT_WR);
	for (int i = 0; i < 200; i++) {
		gw_loop_run_once(&f.loop, 0);
		if (!fgw_drain(&f, &out))
			break;
	}
	/* FUZZ_TRACE=1: the answers, to check a seed does what it should. */
	if (getenv("FUZZ_TRACE"))
		fprintf(stderr, "fuzz_agent: %zu bytes: %.*s\n", out.len,
			(int)(out.len > 300 ? 300 : out.len), (const char *)out.data);
	if (out.len && (out.len < 7 || memcmp(out.data, "HTTP/1.", 7)))
		__builtin_trap();	/* an answer is an HTTP response */
	close(f.fd);
	f.fd = -1;
	fgw_spin(&f, 8);
	api_agent_fini(&ag);
	fgw_spin(&f, 8);
	gw_loop_fini(&f.loop);
	gw_buf_fini(&in);
	gw_buf_fini(&out);
	nftw(dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
	return 0;
}
