// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: multipathd's replies to "show map NAME json" as gateway/mpath/mp_dm.c reads
 * them. Byte 0 chooses the way in:
 *   even  the reply parser alone (mp_dm_parse) for maps "mpatha" and "mpathb", with the rest of
 *         the input as the reply text
 *   odd   the whole client: mp_dm_create polls a stand-in multipathd on an abstract socket of
 *         this process, which answers with the rest of the input, framed as libmpathcmd frames
 *         it (a size_t length, then the text) when bit 1 is clear, or as raw bytes (the input
 *         makes its own length field) when it is set; the status the client then reports is
 *         read back
 * Must never crash, leak or hang; a parsed status is an object with a known "state".
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "gw_log.h"
#include "gw_loop.h"
#include "mp_dm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct gw_loop loop;
static int lfd = -1;
static char sock_name[64];

static void check_status(const json_t *st)
{
	static const char *const states[] = { "ready", "degraded", "no-path", "unknown" };
	const char *s;
	size_t i;

	if (!json_is_object(st))
		__builtin_trap();
	s = json_string_value(json_object_get(st, "state"));
	if (!s)
		__builtin_trap();
	for (i = 0; i < sizeof(states) / sizeof(states[0]); i++)
		if (!strcmp(s, states[i]))
			return;
	__builtin_trap();
}

static int setup(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n;

	if (lfd >= 0)
		return 0;
	gw_log_set_level(GW_LOG_ERR - 1);
	if (gw_loop_init(&loop))
		abort();
	snprintf(sock_name, sizeof(sock_name), "isergw-fuzz-mpathd.%d", (int)getpid());
	n = strlen(sock_name);
	memcpy(sa.sun_path + 1, sock_name, n);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (lfd < 0 ||
	    bind(lfd, (struct sockaddr *)&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
							  1 + n)) < 0 ||
	    listen(lfd, 4) < 0)
		abort();
	return 0;
}

/* The stand-in multipathd: one connection, one command in, the reply out, closed. */
static void via_client(const uint8_t *data, size_t size, bool raw)
{
	struct mp_dm *dm = NULL;
	uint64_t before;
	json_t *st;
	int cfd = -1, i;

	if (mp_dm_create(&loop, "fuzz", "mpatha", sock_name, 60000, &dm))
		abort();
	before = mp_dm_answers(dm);
	/* The first query goes out after a 1 ms timer. */
	for (i = 0; i < 100000 && cfd < 0; i++) {
		gw_loop_run_once(&loop, i < 1000 ? 0 : 1);
		cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	}
	if (cfd < 0)
		__builtin_trap();	/* the client never asked */
	{
		char cmd[512];
		size_t len = size;

		/* The command is a few hundred bytes in one write: read what is there. */
		if (recv(cfd, cmd, sizeof(cmd), 0) <= 0)
			__builtin_trap();
		if (!raw && send(cfd, &len, sizeof(len), MSG_NOSIGNAL) != sizeof(len))
			__builtin_trap();
		/* Into a socket buffer the client drains as the loop runs: write in pieces. */
		for (size_t off = 0; off < size;) {
			ssize_t w = send(cfd, data + off, size - off, MSG_NOSIGNAL | MSG_DONTWAIT);

			if (w > 0)
				off += (size_t)w;
			else if (w < 0 && errno != EAGAIN)
				break;
			gw_loop_run_once(&loop, 0);
		}
		close(cfd);
	}
	/* Answered, or the error set on the closed socket: a few rounds. */
	for (i = 0; i < 100 && mp_dm_answers(dm) == before; i++)
		gw_loop_run_once(&loop, 0);
	st = mp_dm_status(dm);
	check_status(st);
	json_decref(st);
	mp_dm_destroy(dm);
	for (i = 0; i < 4; i++)
		gw_loop_run_once(&loop, 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const names[] = { "mpatha", "mpathb" };

	if (!size)
		return 0;
	setup();
	if (data[0] & 1) {
		via_client(data + 1, size - 1, data[0] & 2);
		return 0;
	}
	for (size_t i = 0; i < 2; i++) {
		const char *err = NULL;
		json_t *st = mp_dm_parse((const char *)data + 1, size - 1, names[i], &err);

		if (st)
			check_status(st);
		else if (!err)
			__builtin_trap();	/* no status must say why */
		json_decref(st);
	}
	return 0;
}
