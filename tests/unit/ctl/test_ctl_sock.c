// SPDX-License-Identifier: MIT
/* The control socket protocol, request by request, against a real (not listening) gateway. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctl.h"
#include "gw_log.h"
#include "net.h"
#include "net/net_fx.h"

static struct gw_loop loop;
static struct isc_gw *gw;
static struct ctl_sock *cs;
static char sock_path[64];

static json_t *js(const char *text)
{
	json_error_t e;
	json_t *j = json_loads(text, 0, &e);

	cr_assert_not_null(j, "%s", e.text);
	return j;
}

/* An apply may start the portal listening: each test (Criterion runs two at once, and the
 * machine may run a target on 3260) gets a port nobody uses. */
#define CFG_FMT \
	"{\"portals\": [{\"name\": \"tcp0\", \"address\": \"127.0.0.1\", \"port\": %d}]," \
	" \"targets\": [{\"name\": \"iqn.2026-11.org.isergw:ctl\", \"portals\": [\"tcp0\"]," \
	"   \"allow_any_initiator\": true," \
	"   \"luns\": [{\"lun\": 0, \"backstore\": {\"type\": \"ram\", \"size\": \"1M\"}}]}]}"

static char cfg_text[512];

/* A loopback TCP port the kernel just gave out and nobody holds. */
static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert_geq(fd, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	close(fd);
	return ntohs(a.sin_port);
}

static void setup(void)
{
	struct ctl_config c;
	struct gw_errlist errs;
	json_t *j;

	snprintf(cfg_text, sizeof(cfg_text), CFG_FMT, free_port());
	j = js(cfg_text);

	gw_log_set_level(GW_LOG_WARN - 1);
	cr_assert_eq(gw_loop_init(&loop), 0);
	gw_errlist_init(&errs);
	cr_assert_eq(ctl_config_parse(j, &c, &errs), 0);
	json_decref(j);
	cr_assert_eq(ctl_gw_create(&loop, c.isc, &gw, &errs), 0);
	c.isc = NULL;
	snprintf(sock_path, sizeof(sock_path), "/tmp/isergw-ctl-test.%d.sock", getpid());
	cr_assert_eq(ctl_sock_create(&loop, sock_path, gw, &c.gateway, &cs), 0);
	ctl_config_free(&c);
	gw_errlist_fini(&errs);
}

static void teardown(void)
{
	ctl_sock_destroy(cs);
	isc_gw_destroy(gw);
	gw_loop_fini(&loop);
}

TestSuite(ctl_sock, .init = setup, .fini = teardown);

static json_t *ask(const char *req)
{
	json_t *r = js(req), *reply = ctl_sock_handle(cs, r);

	json_decref(r);
	cr_assert_not_null(reply);
	return reply;
}

Test(ctl_sock, the_socket_is_private)
{
	struct stat st;

	cr_assert_eq(stat(sock_path, &st), 0);
	cr_assert(S_ISSOCK(st.st_mode));
	cr_assert_eq(st.st_mode & 0777, 0600);
}

Test(ctl_sock, ping_echoes_the_id)
{
	json_t *r = ask("{\"op\": \"ping\", \"id\": 42}");

	cr_assert(json_is_true(json_object_get(r, "ok")));
	cr_assert_eq(json_integer_value(json_object_get(r, "id")), 42);
	json_decref(r);
}

Test(ctl_sock, config_returns_what_runs_and_it_parses_again)
{
	json_t *r = ask("{\"op\": \"config\"}"), *c = json_object_get(r, "config");
	struct ctl_config cc;
	struct gw_errlist errs;

	cr_assert(json_is_true(json_object_get(r, "ok")));
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(
		json_object_get(c, "targets"), 0), "name")), "iqn.2026-11.org.isergw:ctl");
	gw_errlist_init(&errs);
	cr_assert_eq(ctl_config_parse(c, &cc, &errs), 0);
	ctl_config_free(&cc);
	gw_errlist_fini(&errs);
	json_decref(r);
}

Test(ctl_sock, apply_adds_a_lun_live_and_state_shows_it)
{
	json_t *cfg = js(cfg_text), *req, *r;
	json_t *luns = json_object_get(json_array_get(json_object_get(cfg, "targets"), 0), "luns");
	struct isc_target *t;

	json_array_append_new(luns, js("{\"lun\": 3, \"backstore\": {\"type\": \"null\", "
				       "\"size\": \"1G\"}}"));
	req = json_pack("{s:s, s:o}", "op", "apply", "config", cfg);
	r = ctl_sock_handle(cs, req);
	cr_assert(json_is_true(json_object_get(r, "ok")), "%s",
		  json_string_value(json_object_get(r, "message")));
	json_decref(r);
	json_decref(req);
	t = isc_gw_find_target(gw, "iqn.2026-11.org.isergw:ctl");
	cr_assert_not_null(t);
	cr_assert_not_null(scsi_dev_find_lu(t->dev, 3), "LUN 3 is live");
	cr_assert_not_null(scsi_dev_find_lu(t->dev, 0), "LUN 0 is still there");
	r = ask("{\"op\": \"state\"}");
	cr_assert(json_is_true(json_object_get(r, "ok")));
	cr_assert(json_is_array(json_object_get(r, "sessions")));
	cr_assert_eq(json_array_size(json_object_get(r, "targets")), 1);
	json_decref(r);
}

/* A remote LUN: "config" gives back its paths (the agent adopts a running gateway from it),
 * "state" its live status, with the password in a path URL removed. */
Test(ctl_sock, a_remote_lun_shows_its_paths_in_config_and_status)
{
	json_t *cfg = js(cfg_text), *req, *r, *l, *st;
	json_t *luns = json_object_get(json_array_get(json_object_get(cfg, "targets"), 0), "luns");
	const char *url;

	json_array_append_new(luns, js("{\"lun\": 5, \"backstore\": {\"type\": \"remote\","
				       " \"block_size\": 512, \"paths\": [{\"url\": "
				       "\"iscsi://gw%s3cret@127.0.0.1:1/iqn.2026-11.test:x/0\"}]}}"));
	req = json_pack("{s:s, s:o}", "op", "apply", "config", cfg);
	r = ctl_sock_handle(cs, req);
	cr_assert(json_is_true(json_object_get(r, "ok")), "%s",
		  json_string_value(json_object_get(r, "message")));
	json_decref(r);
	json_decref(req);

	r = ask("{\"op\": \"config\"}");
	l = json_array_get(json_object_get(json_array_get(json_object_get(json_object_get(
		r, "config"), "targets"), 0), "luns"), 1);
	cr_assert_eq(json_integer_value(json_object_get(l, "lun")), 5);
	cr_assert_eq(json_array_size(json_object_get(json_object_get(l, "backstore"), "paths")),
		     1, "the remote backstore's paths are part of the running configuration");
	json_decref(r);

	r = ask("{\"op\": \"state\"}");
	luns = json_object_get(json_array_get(json_object_get(r, "targets"), 0), "luns");
	cr_assert_eq(json_array_size(luns), 2);
	/* Every LU says how it does its atomics; a ram LU has nothing else to say. */
	st = json_object_get(json_array_get(luns, 0), "status");
	cr_assert_eq(json_object_size(st), 1, "ram: only its atomics");
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(json_object_get(
		st, "atomics"), "compare_and_write"), "mode")), "local");
	st = json_object_get(json_array_get(luns, 1), "status");
	cr_assert_not_null(json_object_get(st, "atomics"), "remote: atomics too");
	cr_assert_not_null(st, "remote: live status");
	cr_assert_str_eq(json_string_value(json_object_get(st, "state")), "becoming-ready");
	cr_assert_eq(json_array_size(json_object_get(st, "paths")), 1);
	url = json_string_value(json_object_get(json_array_get(json_object_get(st, "paths"), 0),
						"url"));
	cr_assert_str_eq(url, "iscsi://gw@127.0.0.1:1/iqn.2026-11.test:x/0");
	json_decref(r);
}

Test(ctl_sock, an_invalid_apply_lists_every_error_and_changes_nothing)
{
	json_t *r = ask("{\"op\": \"apply\", \"config\": {\"portals\": [], \"targets\": "
			"[{\"name\": \"bad name\", \"portals\": [\"nope\"]}], \"extra\": 1}}");

	cr_assert(json_is_false(json_object_get(r, "ok")));
	cr_assert_str_eq(json_string_value(json_object_get(r, "code")), "invalid");
	cr_assert_geq(json_array_size(json_object_get(r, "errors")), 3);
	json_decref(r);
	cr_assert_not_null(isc_gw_find_target(gw, "iqn.2026-11.org.isergw:ctl"));
}

Test(ctl_sock, bad_requests_get_an_error_not_a_crash)
{
	json_t *r = ask("{\"op\": \"drop_session\", \"tsih\": 77}");

	cr_assert_str_eq(json_string_value(json_object_get(r, "code")), "not_found");
	json_decref(r);
	r = ask("{\"op\": \"drop_session\"}");
	cr_assert_str_eq(json_string_value(json_object_get(r, "code")), "bad_request");
	json_decref(r);
	r = ask("{\"op\": \"reboot\"}");
	cr_assert_str_eq(json_string_value(json_object_get(r, "code")), "bad_request");
	json_decref(r);
	r = ask("{\"op\": \"apply\"}");
	cr_assert(json_is_false(json_object_get(r, "ok")));
	json_decref(r);
}

Test(ctl_sock, a_client_gets_line_answers_in_order)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char buf[4096];
	size_t got = 0;
	int fd = socket(AF_UNIX, SOCK_STREAM, 0), i;

	strcpy(sa.sun_path, sock_path);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	static const char reqs[] = "{\"op\":\"ping\",\"id\":1}\nnot json\n"
				   "{\"op\":\"ping\",\"id\":3}\n";

	cr_assert_eq(write(fd, reqs, sizeof(reqs) - 1), (ssize_t)(sizeof(reqs) - 1));
	for (i = 0; i < 50 && !(got && memchr(buf, '\n', got) &&
				 strstr(buf, "\"id\":3") && buf[got - 1] == '\n'); i++) {
		ssize_t n;

		gw_loop_run_once(&loop, 20);
		n = recv(fd, buf + got, sizeof(buf) - 1 - got, MSG_DONTWAIT);
		if (n > 0)
			got += (size_t)n;
		buf[got] = 0;
	}
	close(fd);
	cr_assert_not_null(strstr(buf, "\"id\":1"));
	cr_assert_not_null(strstr(buf, "bad_request"));
	cr_assert_lt(strstr(buf, "\"id\":1"), strstr(buf, "bad_request"));
	cr_assert_lt(strstr(buf, "bad_request"), strstr(buf, "\"id\":3"));
}

static bool fenced_now(void)
{
	json_t *st = ask("{\"op\":\"state\"}");
	bool f = json_is_true(json_object_get(json_object_get(st, "fence"), "fenced"));

	json_decref(st);
	return f;
}

Test(ctl_sock, a_lease_not_renewed_fences_the_gateway_on_a_monotonic_timer)
{
	json_t *r, *st;
	uint64_t t0;

	/* A gateway never given a lease is not fenced. */
	st = ask("{\"op\":\"state\"}");
	cr_assert(json_is_false(json_object_get(json_object_get(st, "fence"), "leased")));
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(st, "fence"),
							"margin_ms")), 1000);
	json_decref(st);
	r = ask("{\"op\":\"lease\",\"valid_ms\":-1}");
	cr_assert(json_is_false(json_object_get(r, "ok")));
	cr_assert_str_eq(json_string_value(json_object_get(r, "code")), "bad_request");
	json_decref(r);
	r = ask("{\"op\":\"lease\"}");
	cr_assert(json_is_false(json_object_get(r, "ok")));
	json_decref(r);

	/* Valid for less than the margin: fenced at once. */
	r = ask("{\"op\":\"lease\",\"valid_ms\":900}");
	cr_assert(json_is_true(json_object_get(r, "fenced")));
	json_decref(r);
	cr_assert(fenced_now());
	/* Renewed: lifted, and falls again 1000 ms before the new deadline. */
	r = ask("{\"op\":\"lease\",\"valid_ms\":1300}");
	cr_assert(json_is_false(json_object_get(r, "fenced")));
	json_decref(r);
	cr_assert(!fenced_now());
	t0 = gw_now_ms();
	while (!fenced_now() && gw_now_ms() - t0 < 5000)
		gw_loop_run_once(&loop, 50);
	cr_assert(fenced_now(), "fenced by the timer");
	cr_assert_geq(gw_now_ms() - t0, 250, "not before the deadline less the margin");
	st = ask("{\"op\":\"state\"}");
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(st, "fence"), "fences")),
		     2);
	json_decref(st);
	/* An apply under the fence keeps it. */
	r = ask("{\"op\":\"ping\"}");
	json_decref(r);
	r = json_pack("{s:s, s:o}", "op", "apply", "config", js(cfg_text));
	st = ctl_sock_handle(cs, r);
	json_decref(r);
	cr_assert(json_is_true(json_object_get(st, "ok")));
	json_decref(st);
	cr_assert(fenced_now());
	r = ask("{\"op\":\"lease\",\"valid_ms\":60000}");
	json_decref(r);
	cr_assert(!fenced_now());
}

/* Without a path there is no socket, and the object still applies (SIGHUP's reload): the
 * gateway section follows the file as it does through the socket. */
Test(ctl_sock, without_a_path_it_listens_nowhere_and_still_applies)
{
	struct ctl_gateway_conf g = { .fence_margin_ms = 1000 };
	struct ctl_sock *quiet;
	json_t *req, *r, *cfg;
	struct stat st;

	cr_assert_eq(ctl_sock_create(&loop, NULL, gw, &g, &quiet), 0);
	cfg = js(cfg_text);
	json_object_set_new(cfg, "gateway", json_pack("{s:s}", "data_memory", "128M"));
	req = json_pack("{s:s, s:o}", "op", "apply", "config", cfg);
	r = ctl_sock_handle(quiet, req);
	cr_assert(json_is_true(json_object_get(r, "ok")));
	cr_assert_eq(gw->data_mem_max, 128ull << 20);
	json_decref(r);
	json_decref(req);
	req = js("{\"op\": \"config\"}");
	r = ctl_sock_handle(quiet, req);
	json_decref(req);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(json_object_get(r,
			 "config"), "gateway"), "control_socket")), "");
	json_decref(r);
	ctl_sock_destroy(quiet);
	/* The other object's socket is untouched by this one's end. */
	cr_assert_eq(stat(sock_path, &st), 0);
}

/* ---- watch: the network model's events on the connection -------------------------------- */

static int connect_sock(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	strcpy(sa.sun_path, sock_path);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* Runs the loop and reads what fd got until it holds want (or 5 s passed). */
static void read_until(int fd, char *buf, size_t cap, size_t *got, const char *want)
{
	uint64_t t0 = gw_now_ms();

	while (!strstr(buf, want) && gw_now_ms() - t0 < 5000) {
		ssize_t n;

		gw_loop_run_once(&loop, 20);
		n = recv(fd, buf + *got, cap - 1 - *got, MSG_DONTWAIT);
		if (n > 0)
			*got += (size_t)n;
		buf[*got] = 0;
	}
}

Test(ctl_sock, a_watcher_gets_the_failover_as_it_happens_and_net_answers_alone)
{
	struct fx f;
	struct net_mon *n;
	char buf[65536] = "";
	size_t got = 0;
	json_t *r;
	int fd;
	static const char req[] = "{\"op\":\"watch\",\"id\":7}\n";

	fx_init(&f);
	fx_roce_bond(&f, "active 1");
	setenv("ISERGW_SYSFS", f.root, 1);
	cr_assert_eq(net_mon_create(&loop, &n), 0);
	ctl_sock_set_net(cs, n);
	r = ask("{\"op\":\"net\"}");
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(
		json_object_get(json_object_get(r, "net"), "bonds"), 0), "active_slave")), "ens1f0");
	json_decref(r);
	fd = connect_sock();
	cr_assert_eq(write(fd, req, sizeof(req) - 1), (ssize_t)(sizeof(req) - 1));
	read_until(fd, buf, sizeof(buf), &got, "\"id\":7");
	cr_assert(strstr(buf, "\"ok\":true"), "%s", buf);
	fx_bond_attr(&f, "bond0", "active_slave", "ens1f1");
	net_mon_refresh(n);
	read_until(fd, buf, sizeof(buf), &got, "\"event\":\"changed\"");
	cr_assert(strstr(buf, "{\"event\":\"failover\",\"data\":{\"bond\":\"bond0\",\"old\":"
			 "\"ens1f0\",\"new\":\"ens1f1\""), "%s", buf);
	cr_assert_lt(strstr(buf, "\"event\":\"failover\""), strstr(buf, "\"event\":\"changed\""));
	/* A client that did not ask hears nothing but its replies. */
	close(fd);
	r = ask("{\"op\":\"state\"}");
	cr_assert_geq(json_integer_value(json_object_get(json_object_get(r, "watch"), "events")),
		      2);
	json_decref(r);
	ctl_sock_set_net(cs, NULL);
	net_mon_destroy(n);
	unsetenv("ISERGW_SYSFS");
	fx_fini(&f);
}

Test(ctl_sock, a_watcher_that_does_not_read_is_dropped_not_buffered_for)
{
	struct fx f;
	struct net_mon *n;
	char buf[4096] = "";
	size_t got = 0;
	json_t *r;
	int fd, i;
	bool closed = false;
	static const char req[] = "{\"op\":\"watch\"}\n";

	fx_init(&f);
	fx_roce_bond(&f, "active 1");
	setenv("ISERGW_SYSFS", f.root, 1);
	cr_assert_eq(net_mon_create(&loop, &n), 0);
	ctl_sock_set_net(cs, n);
	ctl_sock_set_watch_backlog(cs, 16384);
	fd = connect_sock();
	cr_assert_eq(write(fd, req, sizeof(req) - 1), (ssize_t)(sizeof(req) - 1));
	read_until(fd, buf, sizeof(buf), &got, "\"ok\":true");
	/* Failovers back and forth, never read: the socket buffer fills, then the backlog. */
	for (i = 0; i < 20000 && !closed; i++) {
		fx_bond_attr(&f, "bond0", "active_slave", i % 2 ? "ens1f0" : "ens1f1");
		net_mon_refresh(n);
		if (i % 20)
			continue;
		gw_loop_run_once(&loop, 0);
		r = ask("{\"op\":\"net\"}");
		json_decref(r);
		r = ask("{\"op\":\"state\"}");
		closed = json_integer_value(json_object_get(json_object_get(r, "watch"), "drops"));
		json_decref(r);
	}
	cr_assert(closed, "still connected after %d failovers", i);
	/* What it had not read, then the end of the stream. */
	while (recv(fd, buf, sizeof(buf), 0) > 0)
		;
	close(fd);
	ctl_sock_set_net(cs, NULL);
	net_mon_destroy(n);
	unsetenv("ISERGW_SYSFS");
	fx_fini(&f);
}
