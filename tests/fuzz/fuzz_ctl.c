// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: the control socket (gateway/ctl/ctl_sock.c) as the agent uses it: request
 * lines ({"op": "apply" | "state" | "config" | "drop_session" | "ping", ...}) over the real unix
 * socket of an in-process gateway (one target, a RAM LU, a portal), the client code reading
 * and framing them, and apply changing the running gateway live (ctl_apply.c).
 *
 * The input is the byte stream the client writes. A line that parses as JSON is made safe first:
 * every "backstore" object becomes RAM (type file/block/remote would create, resize or open
 * files and devices of this machine; the fuzzer must not), its "path" dropped; anything else
 * goes as it is. Portals a fuzzed configuration opens bind in the fuzzer's own network namespace
 * (tests/fuzz/fuzz_gw.h).
 *
 * Checked: every line answered is a JSON object with a boolean "ok", a refusal carries a string
 * "code"; the gateway's state can be listed afterwards; it stops and goes idle.
 */
#include <stdint.h>
#include <sys/un.h>

#include "fuzz_gw.h"

#define CONF                                                                                \
	"{ \"portals\": [ { \"name\": \"p0\", \"address\": \"127.0.0.1\", \"port\": %u } ],"    \
	"  \"targets\": [ { \"name\": \"iqn.2026-11.org.isergw:ctl\", \"portals\": [\"p0\"],"  \
	"    \"allow_any_initiator\": true,"                                                   \
	"    \"luns\": [ { \"lun\": 0, \"backstore\": { \"type\": \"ram\", \"size\": \"1M\" } } ]"  \
	"  } ] }"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool make_safe(json_t *j)
{
	bool changed = false;
	const char *k;
	json_t *v;
	size_t i;

	if (json_is_array(j)) {
		json_array_foreach(j, i, v)
			changed |= make_safe(v);
		return changed;
	}
	if (!json_is_object(j))
		return false;
	json_object_foreach(j, k, v) {
		if (!strcmp(k, "backstore") && json_is_object(v)) {
			const char *t = json_string_value(json_object_get(v, "type"));

			if (!t || (strcmp(t, "ram") && strcmp(t, "null"))) {
				json_object_set_new(v, "type", json_string("ram"));
				changed = true;
			}
			if (json_object_get(v, "path")) {
				json_object_del(v, "path");
				changed = true;
			}
		} else {
			changed |= make_safe(v);
		}
	}
	return changed;
}

static void check_reply(const char *line, size_t len)
{
	json_error_t jerr;
	json_t *r = json_loadb(line, len, 0, &jerr), *ok;

	ok = json_object_get(r, "ok");
	if (!json_is_object(r) || !json_is_boolean(ok))
		__builtin_trap();	/* every answer is {"ok": true|false, ...} */
	if (json_is_false(ok) && !json_is_string(json_object_get(r, "code")))
		__builtin_trap();	/* a refusal says why, in a code the agent maps */
	json_decref(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char conf[1024], path[108];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct ctl_gateway_conf gconf = { 0 };
	struct ctl_sock *cs;
	struct gw_buf in, out;
	uint16_t port = fgw_free_port();
	struct fgw f;
	size_t pos = 0, lines = 0, answered = 0;
	json_t *st;
	int fd;

	snprintf(conf, sizeof(conf), CONF, (unsigned int)port);
	fgw_start(&f, conf, port);
	snprintf(path, sizeof(path), "/tmp/isergw-fuzz-ctl.%d.sock", (int)getpid());
	unlink(path);
	if (ctl_sock_create(&f.loop, path, f.gw, &gconf, &cs))
		abort();
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		abort();
	fcntl(fd, F_SETFL, O_NONBLOCK);
	f.fd = fd;
	fgw_spin(&f, 4);
	gw_buf_init(&in);
	gw_buf_init(&out);
	/* Line by line, made safe, the last one possibly without its newline. */
	while (pos < size) {
		const uint8_t *nl = memchr(data + pos, '\n', size - pos);
		size_t n = nl ? (size_t)(nl - (data + pos)) : size - pos;
		json_error_t jerr;
		json_t *j = json_loadb((const char *)data + pos, n, 0, &jerr);
		char *text = NULL;

		if (j && make_safe(j))
			text = json_dumps(j, JSON_COMPACT);
		json_decref(j);
		if (text) {
			gw_buf_append(&in, text, strlen(text));
			free(text);
		} else {
			gw_buf_append(&in, data + pos, n);
		}
		if (nl) {
			gw_buf_append(&in, "\n", 1);
			lines++;
		}
		pos += n + (nl ? 1 : 0);
	}
	fgw_send(&f, in.data, in.len, &out);
	fgw_settle(&f, &out);
	for (size_t o = 0; o < out.len;) {
		const uint8_t *nl = memchr(out.data + o, '\n', out.len - o);

		if (!nl)
			__builtin_trap();	/* answers are whole lines */
		/* FUZZ_TRACE=1: the answers, to check a seed does what it should. */
		if (getenv("FUZZ_TRACE"))
			fprintf(stderr, "fuzz_ctl: %.200s\n", (const char *)out.data + o);
		check_reply((const char *)out.data + o, (size_t)(nl - (out.data + o)));
		answered++;
		o = (size_t)(nl - out.data) + 1;
	}
	if (answered > lines)
		__builtin_trap();	/* one answer per request line */
	st = ctl_gw_state(f.gw);
	if (!st)
		__builtin_trap();
	json_decref(st);
	gw_buf_fini(&in);
	gw_buf_fini(&out);
	close(f.fd);
	f.fd = -1;
	fgw_spin(&f, 4);
	ctl_sock_destroy(cs);
	fgw_stop(&f);
	/* An apply may have turned debug logs on: process-wide, so back off for the next input. */
	gw_log_set_debug("");
	return 0;
}
