// SPDX-License-Identifier: MIT
/*
 * The HTTP core over a real socket on loopback, with routes and hooks registered the way the
 * agent does it: what a client sees when no access check is registered (401, never open), when
 * a hook serves a path, refuses a request or parks it, and when a path is hostile (400 before
 * any hook or handler runs). The server runs in this thread's loop between client steps.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api_http.h"
#include "gw_loop.h"

static struct gw_loop loop;
static struct api_http *srv;
static unsigned int port;
static unsigned int handled, served, admitted, released, gone;
static char seen_path[256];
static int admit_rc;

static int h_ok(struct api_req *r)
{
	handled++;
	api_reply_json(r, 200, json_pack("{s:b}", "ok", 1));
	return 0;
}

/* Waits for a callback (the test plays it): suspended, as a gateway call leaves it. */
static struct api_req *waiting;

static int h_wait(struct api_req *r)
{
	handled++;
	waiting = r;
	api_req_suspend(r);
	return 0;
}

static struct api_events events;

static int h_events(struct api_req *r)
{
	static const char hello[] = "event: hello\ndata: {}\n\n";

	handled++;
	return api_events_subscribe(&events, r, hello, sizeof(hello) - 1);
}

static const struct api_route routes[] = {
	{ .method = "GET", .pattern = "/api/v1/open", .role = API_ROLE_NONE, .fn = h_ok },
	{ .method = "GET", .pattern = "/api/v1/guarded", .role = API_ROLE_READ, .fn = h_ok },
	{ .method = "GET", .pattern = "/api/v1/things/{thing}", .role = API_ROLE_NONE, .fn = h_ok },
	{ .method = "PUT", .pattern = "/api/v1/things/{thing}", .role = API_ROLE_NONE, .fn = h_ok },
	{ .method = "DELETE", .pattern = "/api/v1/things/{thing}", .role = API_ROLE_NONE,
	  .fn = h_ok },
	{ .method = "POST", .pattern = "/api/v1/things", .role = API_ROLE_NONE, .fn = h_ok },
	{ .method = "GET", .pattern = "/api/v1/wait", .role = API_ROLE_NONE, .fn = h_wait },
	{ .method = "GET", .pattern = "/api/v1/events", .role = API_ROLE_NONE, .fn = h_events },
	{ .method = NULL },
};

/* Serves "/files/..." as text: the path it gets is the decoded one. */
static bool t_serve(void *ctx, struct api_req *r, const char *path)
{
	(void)ctx;
	if (strncmp(path, "/files/", 7))
		return false;
	served++;
	snprintf(seen_path, sizeof(seen_path), "%s", path);
	api_reply_text(r, 200, "text/plain", strdup("file"), 4);
	return true;
}

static int t_admit(void *ctx, struct api_req *r)
{
	(void)ctx;
	admitted++;
	if (admit_rc < 0)
		return admit_rc;
	/* Parked in a queue of the hook's, as a write waits its turn. */
	if (admit_rc > 0 && !r->parked) {
		api_req_park(r);
		return 1;
	}
	return 0;
}

static void t_release(void *ctx, struct api_req *r)
{
	(void)ctx;
	(void)r;
	released++;
}

static void t_gone(void *ctx, struct api_req *r)
{
	(void)ctx;
	(void)r;
	gone++;
}

static const struct api_http_hook plain_hook = {
	.serve = t_serve,
	.admit = t_admit,
	.release = t_release,
	.gone = t_gone,
};

/* Lets the request in only with "Authorization: yes". */
static int t_access(void *ctx, struct api_req *r, enum api_role need)
{
	const char *a = api_req_header(r, "Authorization");

	(void)ctx;
	(void)need;
	if (a && !strcmp(a, "yes"))
		return 0;
	api_reply_err(r, API_E_UNAUTHORIZED, NULL, NULL);
	return -EACCES;
}

static const struct api_http_hook access_hook = {
	.access = t_access,
};

static unsigned int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert_geq(fd, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &l), 0);
	close(fd);
	return ntohs(a.sin_port);
}

static unsigned int request_timeout;	/* 0: the default */

static void start(bool with_access)
{
	char listen[32];
	struct api_http_conf c = { .listen = listen, .request_timeout = request_timeout };

	handled = served = admitted = released = gone = 0;
	admit_rc = 0;
	seen_path[0] = 0;
	cr_assert_eq(gw_loop_init(&loop), 0);
	port = free_port();
	snprintf(listen, sizeof(listen), "127.0.0.1:%u", port);
	cr_assert_eq(api_http_start(&loop, &c, NULL, &srv), 0);
	api_http_routes(srv, routes);
	cr_assert_eq(api_http_hook(srv, &plain_hook, NULL), 0);
	if (with_access)
		cr_assert_eq(api_http_hook(srv, &access_hook, NULL), 0);
}

static void stop(void)
{
	api_http_stop(srv);
	gw_loop_fini(&loop);
}

/* Sends req (a whole HTTP/1.1 request with Connection: close) and returns the status code;
 * the answer goes to out. The loop runs between the client's steps. */
static int http(const char *req, char *out, size_t outlen)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	size_t sent = 0, got = 0, len = strlen(req);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), i, code = -1;

	cr_assert_geq(fd, 0);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) && errno != EINPROGRESS)
		cr_assert_fail("connect: %s", strerror(errno));
	for (i = 0; i < 500; i++) {
		struct pollfd p = { .fd = fd, .events = sent < len ? POLLOUT : POLLIN };
		ssize_t n;

		gw_loop_run_once(&loop, 5);
		if (poll(&p, 1, 5) <= 0)
			continue;
		if (sent < len) {
			n = send(fd, req + sent, len - sent, MSG_NOSIGNAL);
			if (n > 0)
				sent += (size_t)n;
			continue;
		}
		n = recv(fd, out + got, outlen - 1 - got, 0);
		if (n <= 0)
			break;
		got += (size_t)n;
		if (got == outlen - 1)
			break;
	}
	close(fd);
	out[got] = 0;
	if (sscanf(out, "HTTP/1.%*d %d", &code) != 1)
		code = -1;
	/* Let the server see the close and free the request. */
	for (i = 0; i < 5; i++)
		gw_loop_run_once(&loop, 2);
	return code;
}

static int get(const char *method, const char *path, const char *extra, char *out, size_t len)
{
	bool body = strcmp(method, "GET") && strcmp(method, "DELETE");
	char req[1024];

	snprintf(req, sizeof(req), "%s %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n%s%s",
		 method, path, extra ? extra : "", body ? "Content-Length: 2\r\n\r\n{}" : "\r\n");
	return http(req, out, len);
}

Test(api_http, a_route_that_needs_a_role_is_refused_without_an_access_hook)
{
	char out[4096];

	start(false);
	cr_expect_eq(get("GET", "/api/v1/open", NULL, out, sizeof(out)), 200);
	cr_expect_eq(handled, 1);
	cr_expect_eq(get("GET", "/api/v1/guarded", "Authorization: yes\r\n", out, sizeof(out)),
		     401, "no access hook registered: the server stays closed");
	cr_expect_eq(handled, 1);
	cr_expect_eq(api_http_requests(srv), 1);
	stop();
}

Test(api_http, the_access_hook_decides)
{
	char out[4096];

	start(true);
	cr_expect_eq(get("GET", "/api/v1/guarded", NULL, out, sizeof(out)), 401);
	cr_expect_eq(handled, 0);
	cr_expect_eq(get("GET", "/api/v1/guarded", "Authorization: yes\r\n", out, sizeof(out)),
		     200);
	cr_expect_eq(handled, 1);
	/* A route that needs no role is not asked about. */
	cr_expect_eq(get("GET", "/api/v1/open", NULL, out, sizeof(out)), 200);
	stop();
}

Test(api_http, hooks_serve_unrouted_paths_admit_release_and_see_requests_go)
{
	char out[4096];

	start(false);
	cr_expect_eq(get("GET", "/files/a%20b.txt", NULL, out, sizeof(out)), 200);
	cr_expect_eq(served, 1);
	cr_expect_str_eq(seen_path, "/files/a b.txt", "the serve hook gets the decoded path");
	cr_expect_eq(handled, 0);
	cr_expect_eq(get("PUT", "/api/v1/things/x", NULL, out, sizeof(out)), 200);
	cr_expect_eq(admitted, 1);
	cr_expect_eq(handled, 1);
	cr_expect_geq(released, 2, "every reply gives back what admit took");
	cr_expect_eq(gone, 2);
	admit_rc = -EBUSY;
	cr_expect_geq(get("PUT", "/api/v1/things/x", NULL, out, sizeof(out)), 400,
		      "an admit hook's -errno is the reply");
	cr_expect_eq(handled, 1, "and the handler never runs");
	cr_expect_eq(get("GET", "/nowhere", NULL, out, sizeof(out)), 404);
	cr_expect(strstr(out, "\"not_found\"") != NULL, "%s", out);
	stop();
}

Test(api_http, hostile_paths_are_400_before_any_hook_or_handler)
{
	static const char *const methods[] = { "GET", "PUT", "POST", "DELETE" };
	static const char *const paths[] = {
		"/api/v1/things/%00", "/api/v1/things/x%00junk", "/api/v1/things/%2e%2e",
		"/api/v1/things/..", "/api/v1/./things", "/api/v1//things", "/api/v1/things/a%2Fb",
		"/api/v1/things/%ff", "/files/%00", "/files/../secret", "/files/%2e%2e/secret",
	};
	char out[4096];
	size_t m, p;

	start(false);
	for (m = 0; m < 4; m++) {
		for (p = 0; p < sizeof(paths) / sizeof(paths[0]); p++) {
			cr_expect_eq(get(methods[m], paths[p], NULL, out, sizeof(out)), 400,
				     "%s %s", methods[m], paths[p]);
			cr_expect(strstr(out, "\"bad_request\"") != NULL, "%s %s: %s",
				  methods[m], paths[p], out);
		}
	}
	cr_expect_eq(handled, 0);
	cr_expect_eq(served, 0);
	cr_expect_eq(admitted, 0);
	stop();
}

Test(api_http, a_nul_or_control_character_in_a_query_value_is_400_before_any_handler)
{
	char out[4096];

	start(false);
	cr_assert_eq(get("GET", "/api/v1/open?x=%00", NULL, out, sizeof(out)), 400);
	cr_assert(strstr(out, "a NUL in the query"), "%s", out);
	cr_assert_eq(get("PUT", "/api/v1/things/a?dry_run=true%00false", NULL, out, sizeof(out)),
		     400);
	cr_assert_eq(get("GET", "/api/v1/open?x=%0d%0a", NULL, out, sizeof(out)), 400);
	cr_assert_eq(handled, 0);
	cr_assert_eq(get("GET", "/api/v1/open?x=%20ok", NULL, out, sizeof(out)), 200);
	stop();
}

Test(api_http, ambiguous_framing_is_400_before_any_handler)
{
	char out[4096];

	start(false);
	cr_assert_eq(http("POST /api/v1/things HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
			  "Content-Length: 2\r\nContent-Length: 9\r\n\r\n{}", out, sizeof(out)),
		     400);
	cr_assert(strstr(out, "more than one Content-Length"), "%s", out);
	cr_assert_eq(http("POST /api/v1/things HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
			  "Content-Length: 7\r\nTransfer-Encoding: chunked\r\n\r\n"
			  "2\r\n{}\r\n0\r\n\r\n", out, sizeof(out)), 400);
	cr_assert(strstr(out, "both Content-Length and Transfer-Encoding"), "%s", out);
	cr_assert_eq(handled, 0);
	stop();
}

Test(api_http, a_request_trickling_in_is_cut_off_after_request_timeout)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	static const char part[] = "GET /api/v1/open HTTP/1.1\r\nHost: t\r\nX-Slow: ";
	uint64_t t0;
	char buf[256];
	bool closed = false;
	int fd, i;

	request_timeout = 1;
	start(false);
	request_timeout = 0;
	a.sin_port = htons((uint16_t)port);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(send(fd, part, sizeof(part) - 1, MSG_NOSIGNAL), (ssize_t)sizeof(part) - 1);
	cr_assert_eq(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
	t0 = gw_now_ms();
	/* A header byte every 100 ms or so keeps the idle timeout away; the deadline comes. */
	for (i = 0; gw_now_ms() - t0 < 6000 && !closed; i++) {
		ssize_t n;

		gw_loop_run_once(&loop, 50);
		usleep(50000);
		if (i % 2 == 0 && send(fd, "a", 1, MSG_NOSIGNAL) < 0)
			closed = true;
		n = recv(fd, buf, sizeof(buf), 0);
		if (n == 0 || (n < 0 && errno != EAGAIN))
			closed = true;
	}
	cr_assert(closed, "still open after 6 s");
	cr_assert_geq(gw_now_ms() - t0, 900);
	cr_assert_eq(api_http_cut(srv), 1);
	cr_assert_eq(handled, 0);
	close(fd);
	/* The server still answers a whole request. */
	cr_assert_eq(get("GET", "/api/v1/open", NULL, buf, sizeof(buf)), 200);
	stop();
}

/* Connects and sends req whole (the server's loop does not need to run for either). */
static int send_req(const char *req)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert_geq(fd, 0);
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(send(fd, req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req));
	return fd;
}

/* Runs the loop until cond holds (true) or about 10 s pass (false). */
#define RUN_UNTIL(cond)                                                                      \
	({                                                                                   \
		int i_;                                                                      \
		for (i_ = 0; i_ < 2000 && !(cond); i_++)                                     \
			gw_loop_run_once(&loop, 5);                                          \
		(cond);                                                                      \
	})

Test(api_http, a_client_gone_while_its_request_waits_for_a_callback_ends_it_unanswered)
{
	int fd;

	start(false);
	waiting = NULL;
	fd = send_req("GET /api/v1/wait HTTP/1.1\r\nHost: t\r\n\r\n");
	cr_assert(RUN_UNTIL(api_http_suspended(srv) == 1));
	cr_assert_eq(api_http_conns(srv), 1);
	close(fd);
	cr_assert(RUN_UNTIL(api_http_gone(srv) == 1), "the close was not noticed");
	cr_assert(waiting->gone);
	/* The callback still finds its request, answers and resumes it: the connection ends. */
	cr_assert_eq(gone, 0);
	api_reply_json(waiting, 200, json_pack("{s:b}", "ok", 1));
	api_req_resume(waiting);
	cr_assert(RUN_UNTIL(gone == 1 && api_http_conns(srv) == 0));
	cr_assert_eq(api_http_suspended(srv), 0);
	stop();
}

Test(api_http, a_half_close_while_a_request_is_parked_ends_it_at_once)
{
	char buf[256];
	int fd;

	start(false);
	admit_rc = 1;
	fd = send_req("PUT /api/v1/things/a HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\n{}");
	cr_assert(RUN_UNTIL(api_http_suspended(srv) == 1));
	cr_assert_eq(shutdown(fd, SHUT_WR), 0);
	/* Nothing under way: the hooks hear it is gone, without any resume. */
	cr_assert(RUN_UNTIL(gone == 1 && api_http_conns(srv) == 0), "gone %u", gone);
	cr_assert_eq(api_http_gone(srv), 1);
	cr_assert_eq(api_http_suspended(srv), 0);
	cr_assert_eq(handled, 0);
	cr_assert_eq(recv(fd, buf, sizeof(buf), 0), 0, "the parked request was answered");
	close(fd);
	/* Answered at once, a half-closed request still gets its answer. */
	admit_rc = 0;
	fd = send_req("GET /api/v1/open HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
	cr_assert_eq(shutdown(fd, SHUT_WR), 0);
	cr_assert_eq(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
	buf[0] = 0;
	cr_assert(RUN_UNTIL(recv(fd, buf, sizeof(buf) - 1, MSG_PEEK) > 0));
	cr_assert(!strncmp(buf, "HTTP/1.1 200", 12), "%.40s", buf);
	close(fd);
	stop();
}

Test(api_http, an_event_stream_whose_client_goes_leaves_no_subscriber)
{
	char buf[256];
	int fd, n;

	start(false);
	cr_assert_eq(api_events_init(&events, &loop), 0);
	for (n = 0; n < 50; n++) {
		fd = send_req("GET /api/v1/events HTTP/1.1\r\nHost: t\r\n\r\n");
		cr_assert_eq(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
		memset(buf, 0, sizeof(buf));
		cr_assert(RUN_UNTIL(recv(fd, buf, sizeof(buf) - 1, MSG_PEEK) > 0 &&
				    strstr(buf, "event: hello")));
		cr_assert_eq(events.n, 1);
		close(fd);
		cr_assert(RUN_UNTIL(events.n == 0 && api_http_conns(srv) == 0),
			  "stream %d: %u subscribers", n, events.n);
	}
	/* Counted when the watch saw it go (a keepalive that reached one first ends it too). */
	cr_assert_geq(api_http_gone(srv), 1);
	cr_assert_leq(api_http_gone(srv), 50);
	/* An event after it goes nowhere. */
	api_event(&events, "config", json_pack("{s:i}", "generation", 1));
	api_events_fini(&events);
	stop();
}
