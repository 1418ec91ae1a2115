// SPDX-License-Identifier: MIT
/* The control socket protocol, request by request, against a real (not listening) gateway. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctl.h"
#include "gw_log.h"
#include "isc_priv.h"
#include "net.h"
#include "net/net_fx.h"

static struct gw_loop loop;
static struct ctl_gw *gw;
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
	"{\"gateway\": {\"boot_wait\": 7}," \
	" \"portals\": [{\"name\": \"tcp0\", \"address\": \"127.0.0.1\", \"port\": %d}]," \
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
	cr_assert_eq(conf_parse(j, &c, &errs), 0);
	json_decref(j);
	cr_assert_eq(ctl_gw_create(&loop, c.isc, &gw, &errs), 0);
	c.isc = NULL;
	snprintf(sock_path, sizeof(sock_path), "/tmp/isergw-ctl-test.%d.sock", getpid());
	cr_assert_eq(ctl_sock_create(&loop, sock_path, gw, &c.gateway, &cs), 0);
	conf_free(&c);
	gw_errlist_fini(&errs);
}

static void teardown(void)
{
	ctl_sock_destroy(cs);
	ctl_gw_destroy(gw);
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
	cr_assert_eq(conf_parse(c, &cc, &errs), 0);
	conf_free(&cc);
	gw_errlist_fini(&errs);
	json_decref(r);
}

/* The gateway section shows the start-up keys as configured from the first reply on, and an
 * apply of the running configuration changes nothing: the agent adopts this reply and writes it
 * back (it used to show boot_wait 0 and the resolved loop count until the first apply). */
Test(ctl_sock, config_shows_start_up_keys_as_configured_before_and_after_an_apply)
{
	for (int round = 0; round < 2; round++) {
		json_t *r = ask("{\"op\": \"config\"}"), *g, *req, *a;

		g = json_object_get(json_object_get(r, "config"), "gateway");
		cr_expect_eq(json_integer_value(json_object_get(g, "boot_wait")), 7,
			     "boot_wait as configured (round %d)", round);
		cr_expect(json_is_integer(json_object_get(g, "loops")) &&
			  json_integer_value(json_object_get(g, "loops")) == 0,
			  "loops as configured, 0 (one per CPU), not the count running (round %d)",
			  round);
		req = json_pack("{s:s, s:O}", "op", "apply", "config", json_object_get(r, "config"));
		a = ctl_sock_handle(cs, req);
		cr_assert(json_is_true(json_object_get(a, "ok")), "the reply applies again");
		json_decref(a);
		json_decref(req);
		json_decref(r);
	}
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
	t = isc_gw_find_target(ctl_gw_engine(gw), "iqn.2026-11.org.isergw:ctl");
	cr_assert_not_null(t);
	cr_assert_not_null(scsi_dev_find_lu(isc_target_dev(t), 3), "LUN 3 is live");
	cr_assert_not_null(scsi_dev_find_lu(isc_target_dev(t), 0), "LUN 0 is still there");
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
	/* Every LU says how it does its atomics and which loop owns it; a ram LU has nothing
	 * else to say. */
	st = json_object_get(json_array_get(luns, 0), "status");
	cr_assert_eq(json_object_size(st), 2, "ram: only its atomics and its owner loop");
	cr_assert_eq(json_integer_value(json_object_get(st, "owner_loop")), 0,
		     "one loop: every LU is loop 0's");
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
	cr_assert_not_null(isc_gw_find_target(ctl_gw_engine(gw), "iqn.2026-11.org.isergw:ctl"));
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
	cr_assert_eq(ctl_gw_data_memory(gw), 128ull << 20);
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

/* ---- cluster-wide persistent reservations ---------------------------------------------- */

#define PR_TARGET "iqn.2026-11.org.isergw:ctl"
#define PR_HOST "iqn.2026-11.org.test:host,i,0x23d000000001"
#define PR_STATE \
	"{\"generation\": 2, \"aptpl\": false, \"registrations\": [{\"initiator\": \"" PR_HOST \
	"\", \"rel_id\": 1, \"key\": \"0x00000000000000aa\"}], \"reservation\": null}"

static json_t *ask_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static json_t *ask_fmt(const char *fmt, ...)
{
	char req[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(req, sizeof(req), fmt, ap);
	va_end(ap);
	return ask(req);
}

static const char *code_of(const json_t *r)
{
	return json_string_value(json_object_get(r, "code")) ?: "(ok)";
}

/* A host's nexus on the test target, and PR commands through it. */
struct prhost {
	struct scsi_dev *dev;
	struct scsi_itn *itn;
};

struct prcmd {
	struct scsi_cmd cmd;
	struct iovec iov;
	uint8_t buf[64];
	int fired;
};

static void prcmd_done(struct scsi_cmd *cmd)
{
	gw_container_of(cmd, struct prcmd, cmd)->fired++;
}

static void prcmd_submit(struct prhost *h, struct prcmd *c, const uint8_t *cdb, size_t cdb_len,
			 enum scsi_dir dir, uint32_t len)
{
	memset(&c->cmd, 0, sizeof(c->cmd));
	c->fired = 0;
	c->cmd.dev = h->dev;
	c->cmd.itn = h->itn;
	memcpy(c->cmd.cdb, cdb, cdb_len);
	c->cmd.cdb_len = 16;
	c->cmd.dir = dir;
	c->iov.iov_base = c->buf;
	c->iov.iov_len = len;
	c->cmd.iov = &c->iov;
	c->cmd.iovcnt = 1;
	c->cmd.data_len = len;
	c->cmd.done = prcmd_done;
	scsi_cmd_submit(&c->cmd);
}

static void prcmd_wait(struct prcmd *c, uint64_t ms)
{
	uint64_t t0 = gw_now_ms();

	while (!c->fired && gw_now_ms() - t0 < ms)
		gw_loop_run_once(&loop, 20);
	cr_assert_eq(c->fired, 1, "done fired %d times", c->fired);
}

static void prhost_init(struct prhost *h)
{
	struct isc_target *t = isc_gw_next_target(ctl_gw_engine(gw), NULL);
	struct prcmd c;
	int i;

	h->dev = isc_target_dev(t);
	h->itn = scsi_itn_create(h->dev, t->port, PR_HOST, "iqn.2026-11.org.test:host");
	cr_assert_not_null(h->itn);
	/* The power-on unit attention first. */
	for (i = 0; i < 4; i++) {
		prcmd_submit(h, &c, (const uint8_t[]){ 0x03, 0, 0, 0, 18, 0 }, 6, SCSI_DIR_READ,
			     18);
		prcmd_wait(&c, 10000);
		if ((c.buf[2] & 0x0f) == 0)
			break;
	}
}

/* PERSISTENT RESERVE OUT: REGISTER (sa 0) or RESERVE (sa 1, type 1) with key/sakey. */
static void prout_start(struct prhost *h, struct prcmd *c, uint8_t sa, uint64_t key,
			uint64_t sakey)
{
	memset(c->buf, 0, sizeof(c->buf));
	for (int i = 0; i < 8; i++) {
		c->buf[i] = (uint8_t)(key >> (56 - 8 * i));
		c->buf[8 + i] = (uint8_t)(sakey >> (56 - 8 * i));
	}
	prcmd_submit(h, c, (const uint8_t[]){ 0x5f, sa, sa == 1 ? 1 : 0, 0, 0, 0, 0, 0, 24, 0 },
		     10, SCSI_DIR_WRITE, 24);
}

static void assert_not_ready(const struct prcmd *c)
{
	cr_assert_eq(c->cmd.status, 0x02, "status %#x", c->cmd.status);
	cr_assert_eq(c->cmd.sense[2] & 0x0f, 0x02, "NOT READY");
	cr_assert_eq(c->cmd.sense[12], 0x04);
	cr_assert_eq(c->cmd.sense[13], 0x0a, "ASYMMETRIC ACCESS STATE TRANSITION");
}

Test(ctl_sock, pr_states_are_checked_and_only_newer_ones_applied)
{
	json_t *r, *st;

	r = ask_fmt("{\"op\":\"pr\",\"target\":\"%s\",\"lun\":0,\"rev\":1,\"state\":null}",
		    PR_TARGET);
	cr_assert_str_eq(code_of(r), "not_enabled");
	json_decref(r);
	/* Two registrations for one nexus: refused, naming the entry, and nothing changes. */
	r = ask_fmt("{\"op\":\"pr_cluster\",\"enabled\":true,\"luns\":[{\"target\":\"%s\","
		    "\"lun\":0,\"rev\":3,\"state\":{\"generation\":1,\"aptpl\":false,"
		    "\"registrations\":[{\"initiator\":\"%s\",\"rel_id\":1,\"key\":"
		    "\"0x0000000000000001\"},{\"initiator\":\"%s\",\"rel_id\":1,\"key\":"
		    "\"0x0000000000000002\"}],\"reservation\":null}}]}", PR_TARGET, PR_HOST,
		    PR_HOST);
	cr_assert_str_eq(code_of(r), "invalid");
	cr_assert_not_null(strstr(json_string_value(json_object_get(r, "message")),
				  "luns[0]: state: registrations[1]: a second registration"),
			   "%s", json_string_value(json_object_get(r, "message")));
	json_decref(r);
	st = ask("{\"op\":\"state\"}");
	cr_assert(json_is_false(json_object_get(json_object_get(st, "pr"), "cluster")));
	json_decref(st);
	r = ask_fmt("{\"op\":\"pr_cluster\",\"enabled\":true,\"luns\":[{\"target\":\"%s\","
		    "\"lun\":0,\"rev\":3,\"state\":%s}]}", PR_TARGET, PR_STATE);
	cr_assert(json_is_true(json_object_get(r, "ok")), "%s", code_of(r));
	cr_assert_eq(json_integer_value(json_object_get(r, "applied")), 1);
	json_decref(r);
	st = ask("{\"op\":\"state\"}");
	cr_assert(json_is_true(json_object_get(json_object_get(st, "pr"), "cluster")));
	json_decref(st);
	/* An older revision (a late watch event) is not applied; a newer one is. */
	r = ask_fmt("{\"op\":\"pr\",\"target\":\"%s\",\"lun\":0,\"rev\":2,\"state\":null}",
		    PR_TARGET);
	cr_assert(json_is_false(json_object_get(r, "applied")));
	cr_assert_eq(json_integer_value(json_object_get(r, "rev")), 3);
	json_decref(r);
	r = ask_fmt("{\"op\":\"pr\",\"target\":\"%s\",\"lun\":0,\"rev\":4,\"state\":"
		    "{\"generation\":1,\"aptpl\":false,\"registrations\":[{\"initiator\":\"%s\","
		    "\"rel_id\":1,\"key\":\"aa\"}],\"reservation\":null}}", PR_TARGET, PR_HOST);
	cr_assert_str_eq(code_of(r), "invalid");
	json_decref(r);
	r = ask_fmt("{\"op\":\"pr\",\"target\":\"%s\",\"lun\":0,\"rev\":4,\"state\":null}",
		    PR_TARGET);
	cr_assert(json_is_true(json_object_get(r, "applied")));
	json_decref(r);
	/* Another gateway's LUN: nothing to do, and no error. */
	r = ask("{\"op\":\"pr\",\"target\":\"iqn.2026-11.org.isergw:other\",\"lun\":0,\"rev\":9,"
		"\"state\":null}");
	cr_assert(json_is_true(json_object_get(r, "ok")));
	cr_assert(json_is_false(json_object_get(r, "applied")));
	json_decref(r);
	r = ask("{\"op\":\"pr_result\",\"commit\":99,\"result\":\"ok\",\"rev\":5}");
	cr_assert_str_eq(code_of(r), "not_found");
	json_decref(r);
	r = ask("{\"op\":\"pr_result\",\"id\":1,\"result\":\"ok\",\"rev\":5}");
	cr_assert_str_eq(code_of(r), "bad_request");
	json_decref(r);
	r = ask("{\"op\":\"pr_cluster\",\"enabled\":false}");
	cr_assert(json_is_true(json_object_get(r, "ok")));
	json_decref(r);
}

/* The network model a watcher needs, and a connection that watches. */
static int pr_watch(struct fx *f, struct net_mon **n, char *buf, size_t cap, size_t *got)
{
	static const char req[] = "{\"op\":\"watch\",\"id\":7}\n";
	int fd;

	fx_init(f);
	fx_roce_bond(f, "active 1");
	setenv("ISERGW_SYSFS", f->root, 1);
	cr_assert_eq(net_mon_create(&loop, n), 0);
	ctl_sock_set_net(cs, *n);
	fd = connect_sock();
	cr_assert_eq(write(fd, req, sizeof(req) - 1), (ssize_t)(sizeof(req) - 1));
	read_until(fd, buf, cap, got, "\"id\":7");
	return fd;
}

static void pr_unwatch(struct fx *f, struct net_mon *n)
{
	ctl_sock_set_net(cs, NULL);
	net_mon_destroy(n);
	unsetenv("ISERGW_SYSFS");
	fx_fini(f);
}

/* The data of the n-th (1-based) pr_commit event in buf, read until it came. */
static json_t *pr_event(int fd, char *buf, size_t cap, size_t *got, int nth)
{
	char *p = buf, *end;
	json_t *ev, *d;
	int i;

	for (i = 0; i < nth; i++) {
		uint64_t t0 = gw_now_ms();

		while (!strstr(p, "\"event\":\"pr_commit\"") && gw_now_ms() - t0 < 5000) {
			ssize_t k;

			gw_loop_run_once(&loop, 20);
			k = recv(fd, buf + *got, cap - 1 - *got, MSG_DONTWAIT);
			if (k > 0)
				*got += (size_t)k;
			buf[*got] = 0;
		}
		p = strstr(p, "\"event\":\"pr_commit\"");
		cr_assert_not_null(p, "no pr_commit event %d: %s", i + 1, buf);
		if (i + 1 < nth)
			p++;
	}
	while (p > buf && p[-1] != '\n')
		p--;
	end = strchr(p, '\n');
	cr_assert_not_null(end);
	ev = json_loadb(p, (size_t)(end - p), 0, NULL);
	cr_assert_not_null(ev, "%.*s", (int)(end - p), p);
	cr_assert_str_eq(json_string_value(json_object_get(ev, "event")), "pr_commit");
	d = json_incref(json_object_get(ev, "data"));
	json_decref(ev);
	return d;
}

Test(ctl_sock, a_pr_out_goes_out_as_pr_commit_and_completes_on_pr_result)
{
	struct prhost h;
	struct prcmd c;
	struct fx f;
	struct net_mon *n;
	char buf[65536] = "";
	size_t got = 0;
	json_t *r, *d;
	int fd;

	prhost_init(&h);
	r = ask("{\"op\":\"pr_cluster\",\"enabled\":true,\"luns\":[]}");
	cr_assert(json_is_true(json_object_get(r, "ok")));
	json_decref(r);
	/* Nobody watches: no commit can go out, the host is told to retry. */
	prout_start(&h, &c, 0x00, 0, 0xaa);
	prcmd_wait(&c, 10000);
	assert_not_ready(&c);

	fd = pr_watch(&f, &n, buf, sizeof(buf), &got);
	prout_start(&h, &c, 0x00, 0, 0xaa);
	d = pr_event(fd, buf, sizeof(buf), &got, 1);
	cr_assert_eq(c.fired, 0, "not before the cluster took it");
	cr_assert_str_eq(json_string_value(json_object_get(d, "target")), PR_TARGET);
	cr_assert_eq(json_integer_value(json_object_get(d, "lun")), 0);
	cr_assert_eq(json_integer_value(json_object_get(d, "rev")), 0);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(
		json_object_get(d, "state"), "registrations"), 0), "initiator")), PR_HOST);
	r = ask_fmt("{\"op\":\"pr_result\",\"commit\":%lld,\"result\":\"ok\",\"rev\":7}",
		    (long long)json_integer_value(json_object_get(d, "id")));
	cr_assert(json_is_true(json_object_get(r, "ok")), "%s", code_of(r));
	json_decref(r);
	json_decref(d);
	prcmd_wait(&c, 10000);
	cr_assert_eq(c.cmd.status, 0, "GOOD once etcd took it");
	/* Its echo through the watch is not newer. */
	r = ask_fmt("{\"op\":\"pr\",\"target\":\"%s\",\"lun\":0,\"rev\":7,\"state\":%s}",
		    PR_TARGET, PR_STATE);
	cr_assert(json_is_false(json_object_get(r, "applied")));
	json_decref(r);

	/* The store is away: NOT READY. */
	prout_start(&h, &c, 0x01, 0xaa, 0);
	d = pr_event(fd, buf, sizeof(buf), &got, 2);
	r = ask_fmt("{\"op\":\"pr_result\",\"commit\":%lld,\"result\":\"unavailable\","
		    "\"reason\":\"etcd: connection refused\"}",
		    (long long)json_integer_value(json_object_get(d, "id")));
	cr_assert(json_is_true(json_object_get(r, "ok")));
	json_decref(r);
	json_decref(d);
	prcmd_wait(&c, 10000);
	assert_not_ready(&c);

	/* The watcher goes with a commit out: it fails at once, not after the timeout. */
	prout_start(&h, &c, 0x01, 0xaa, 0);
	d = pr_event(fd, buf, sizeof(buf), &got, 3);
	json_decref(d);
	close(fd);
	prcmd_wait(&c, 10000);
	assert_not_ready(&c);
	r = ask("{\"op\":\"state\"}");
	d = json_object_get(r, "pr");
	cr_assert_eq(json_integer_value(json_object_get(d, "commits")), 3);
	cr_assert_eq(json_integer_value(json_object_get(d, "ok")), 1);
	cr_assert_eq(json_integer_value(json_object_get(d, "failed")), 2);
	cr_assert_eq(json_integer_value(json_object_get(d, "pending")), 0);
	json_decref(r);
	pr_unwatch(&f, n);
}

Test(ctl_sock, a_commit_never_answered_fails_after_five_seconds)
{
	struct prhost h;
	struct prcmd c;
	struct fx f;
	struct net_mon *n;
	char buf[65536] = "";
	size_t got = 0;
	json_t *r, *d;
	uint64_t t0;
	int fd;

	prhost_init(&h);
	r = ask("{\"op\":\"pr_cluster\",\"enabled\":true,\"luns\":[]}");
	json_decref(r);
	fd = pr_watch(&f, &n, buf, sizeof(buf), &got);
	t0 = gw_now_ms();
	prout_start(&h, &c, 0x00, 0, 0xaa);
	d = pr_event(fd, buf, sizeof(buf), &got, 1);
	/* Generous: the machine may be loaded; the bound is not what is measured. */
	prcmd_wait(&c, 30000);
	assert_not_ready(&c);
	cr_assert_geq(gw_now_ms() - t0, 4900, "not before the timeout");
	/* The answer that comes too late finds nothing. */
	r = ask_fmt("{\"op\":\"pr_result\",\"commit\":%lld,\"result\":\"ok\",\"rev\":3}",
		    (long long)json_integer_value(json_object_get(d, "id")));
	cr_assert_str_eq(code_of(r), "not_found");
	json_decref(r);
	json_decref(d);
	close(fd);
	pr_unwatch(&f, n);
}

Test(ctl_sock, a_lost_race_goes_out_again_on_the_winner_and_a_bad_winner_fails_it)
{
	struct prhost h;
	struct prcmd c;
	struct fx f;
	struct net_mon *n;
	char buf[65536] = "";
	size_t got = 0;
	json_t *r, *d;
	int fd;

	prhost_init(&h);
	r = ask("{\"op\":\"pr_cluster\",\"enabled\":true,\"luns\":[]}");
	json_decref(r);
	fd = pr_watch(&f, &n, buf, sizeof(buf), &got);
	prout_start(&h, &c, 0x00, 0, 0xaa);
	d = pr_event(fd, buf, sizeof(buf), &got, 1);
	/* Another gateway registered the host's key first (through another port). */
	r = ask_fmt("{\"op\":\"pr_result\",\"commit\":%lld,\"result\":\"conflict\",\"rev\":12,"
		    "\"state\":{\"generation\":5,\"aptpl\":false,\"registrations\":[{\"initiator\":"
		    "\"%s\",\"rel_id\":2,\"key\":\"0x00000000000000bb\"}],\"reservation\":null}}",
		    (long long)json_integer_value(json_object_get(d, "id")), PR_HOST);
	cr_assert(json_is_true(json_object_get(r, "ok")), "%s", code_of(r));
	json_decref(r);
	json_decref(d);
	d = pr_event(fd, buf, sizeof(buf), &got, 2);
	cr_assert_eq(c.fired, 0);
	cr_assert_eq(json_integer_value(json_object_get(d, "rev")), 12, "from the winner");
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(d, "state"),
							"generation")), 6);
	cr_assert_eq(json_array_size(json_object_get(json_object_get(d, "state"),
						     "registrations")), 2);
	/* A winner that is no state: refused, and the command is not left waiting. */
	r = ask_fmt("{\"op\":\"pr_result\",\"commit\":%lld,\"result\":\"conflict\",\"rev\":13,"
		    "\"state\":{\"generation\":6,\"aptpl\":false,\"registrations\":[],"
		    "\"reservation\":{\"initiator\":\"%s\",\"rel_id\":1,\"type\":9}}}",
		    (long long)json_integer_value(json_object_get(d, "id")), PR_HOST);
	cr_assert_str_eq(code_of(r), "invalid");
	json_decref(r);
	json_decref(d);
	prcmd_wait(&c, 10000);
	assert_not_ready(&c);
	close(fd);
	pr_unwatch(&f, n);
}
