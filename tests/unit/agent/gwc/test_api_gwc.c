// SPDX-License-Identifier: MIT
/*
 * The control-socket client against a fake gateway (a listening unix socket the test drives):
 * a watch event arriving while a request waits goes to ops->event, not to the request; the
 * reply that follows still answers it; after the gateway restarts the client connects again
 * and its owner is told, so it can subscribe again.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "api_gwc.h"
#include "gw_log.h"

static struct gw_loop loop;
static struct api_gwc gwc;
static char path[64];
static int lfd = -1, cfd = -1;
static int connects, disconnects, replies;
static char events[1024], reply_op[64];

static int listen_at(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	cr_assert_geq(fd, 0);
	unlink(path);
	strcpy(sa.sun_path, path);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(fd, 4), 0);
	return fd;
}

static void on_connected(struct api_gwc *g, void *arg)
{
	(void)g;
	(void)arg;
	connects++;
}

static void on_disconnected(struct api_gwc *g, void *arg)
{
	(void)g;
	(void)arg;
	disconnects++;
}

static void on_event(struct api_gwc *g, const char *type, json_t *data, void *arg)
{
	char *d = json_dumps(data, JSON_COMPACT);

	(void)g;
	(void)arg;
	snprintf(events + strlen(events), sizeof(events) - strlen(events), "%s %s;", type, d);
	free(d);
}

static const struct api_gwc_ops ops = {
	.connected = on_connected, .disconnected = on_disconnected, .event = on_event,
};

static void on_reply(void *ctx, int err, json_t *reply)
{
	(void)ctx;
	cr_assert_eq(err, 0);
	replies++;
	snprintf(reply_op, sizeof(reply_op), "%s",
		 json_string_value(json_object_get(reply, "op")) ?: "");
}

/* Runs the loop until cond holds or 5 s passed. */
#define RUN_UNTIL(cond)                                                                     \
	do {                                                                                \
		uint64_t t0_ = gw_now_ms();                                                 \
		while (!(cond) && gw_now_ms() - t0_ < 5000)                                 \
			gw_loop_run_once(&loop, 20);                                        \
	} while (0)

static void setup(void)
{
	snprintf(path, sizeof(path), "/tmp/isergw-gwc.%d.sock", getpid());
	gw_log_set_level(GW_LOG_ERR);
	cr_assert_eq(gw_loop_init(&loop), 0);
	lfd = listen_at();
	connects = disconnects = replies = 0;
	events[0] = reply_op[0] = 0;
	cr_assert_eq(api_gwc_init(&gwc, &loop, path, &ops, NULL), 0);
	gwc.retry_ms = 50;
	RUN_UNTIL(gwc.connected);
	cr_assert(gwc.connected);
	cfd = accept(lfd, NULL, NULL);
	cr_assert_geq(cfd, 0);
}

static void teardown(void)
{
	api_gwc_fini(&gwc);
	if (cfd >= 0)
		close(cfd);
	if (lfd >= 0)
		close(lfd);
	unlink(path);
	gw_loop_fini(&loop);
}

TestSuite(api_gwc, .init = setup, .fini = teardown);

static void gw_says(const char *line)
{
	cr_assert_eq(write(cfd, line, strlen(line)), (ssize_t)strlen(line));
}

Test(api_gwc, an_event_between_request_and_reply_is_an_event_not_the_reply)
{
	cr_assert_eq(api_gwc_call(&gwc, json_pack("{s:s}", "op", "net"), on_reply, NULL), 0);
	RUN_UNTIL(false);	/* let the request go out */
	gw_says("{\"event\":\"failover\",\"data\":{\"bond\":\"bd0\",\"new\":\"bd0b\"}}\n"
		"{\"event\":\"changed\",\"data\":{\"generation\":2}}\n");
	RUN_UNTIL(strstr(events, "changed"));
	cr_assert_str_eq(events, "failover {\"bond\":\"bd0\",\"new\":\"bd0b\"};"
			 "changed {\"generation\":2};");
	cr_assert_eq(replies, 0, "an event answered the request");
	gw_says("{\"id\":1,\"ok\":true,\"op\":\"net\"}\n");
	RUN_UNTIL(replies);
	cr_assert_eq(replies, 1);
	cr_assert_str_eq(reply_op, "net");
	cr_assert(gwc.connected);
}

Test(api_gwc, after_a_gateway_restart_it_connects_again_and_says_so)
{
	cr_assert_eq(connects, 1);
	close(cfd);
	close(lfd);
	cfd = -1;
	unlink(path);
	RUN_UNTIL(disconnects);
	cr_assert_eq(disconnects, 1);
	lfd = listen_at();
	RUN_UNTIL(connects == 2);
	cr_assert_eq(connects, 2, "the owner is told, to subscribe again");
	cfd = accept(lfd, NULL, NULL);
	gw_says("{\"event\":\"changed\",\"data\":{\"generation\":1}}\n");
	RUN_UNTIL(strstr(events, "changed"));
	cr_assert_str_eq(events, "changed {\"generation\":1};");
}

Test(api_gwc, connected_follows_the_gateway_and_no_gateway_is_never_connected)
{
	/* What /health, /metrics and every write ask before they call the gateway. */
	cr_assert(api_gwc_connected(&gwc));
	cr_assert_not(api_gwc_connected(NULL), "an agent without --gateway-socket has none");
	close(cfd);
	cfd = -1;
	RUN_UNTIL(disconnects);
	cr_assert_not(api_gwc_connected(&gwc), "a gateway that went away is not connected");
}
