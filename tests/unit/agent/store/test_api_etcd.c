// SPDX-License-Identifier: MIT
/* The etcd client: what an answer means (etcd's, etcd's refusal, not etcd at all), a watch's
 * stream split into messages, and the asynchronous calls driven by a real loop against a fake
 * endpoint on loopback (a dead first endpoint, a web server, a streamed watch). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/fake_etcd.h"
#include "api_etcd.h"
#include "gw_log.h"
#include "gw_loop.h"

static void setup(void)
{
	gw_log_set_level(getenv("ETCD_T_DEBUG") ? GW_LOG_DBG : GW_LOG_ERR - 1);
}

TestSuite(api_etcd, .init = setup);

Test(api_etcd, an_etcd_answer_is_taken)
{
	const char *put = "{\"header\":{\"cluster_id\":\"1\",\"revision\":\"7\"}}";
	const char *ka = "{\"result\":{\"header\":{\"revision\":\"7\"},\"ID\":\"5\",\"TTL\":\"3\"}}";
	json_t *resp;
	char why[256];

	cr_assert_eq(api_etcd_answer(200, put, strlen(put), &resp, why, sizeof(why)), 0);
	cr_assert_eq(api_etcd_int(json_object_get(resp, "header"), "revision", 0), 7);
	json_decref(resp);
	cr_assert_eq(api_etcd_answer(200, ka, strlen(ka), &resp, why, sizeof(why)), 0,
		     "a keepalive's header is inside its result");
	json_decref(resp);
}

Test(api_etcd, etcds_refusal_is_told_apart_from_a_stranger)
{
	const char *refusal = "{\"error\":\"etcdserver: requested lease not found\",\"code\":5,"
			      "\"message\":\"etcdserver: requested lease not found\"}";
	const char *html = "<html><body><h1>404 Not Found</h1></body></html>";
	const char *v2 = "{\"action\":\"get\",\"node\":{\"key\":\"/\"}}";
	json_t *resp;
	char why[256];

	cr_assert_eq(api_etcd_answer(404, refusal, strlen(refusal), &resp, why, sizeof(why)),
		     -EPROTO);
	cr_assert_null(resp);
	cr_assert(strstr(why, "requested lease not found"), "%s", why);
	cr_assert_eq(api_etcd_answer(404, html, strlen(html), &resp, why, sizeof(why)), -EBADMSG);
	cr_assert(strstr(why, "HTTP 404") && strstr(why, "HTML") &&
		  strstr(why, "not etcd's v3 JSON gateway"), "%s", why);
	cr_assert_eq(api_etcd_answer(200, v2, strlen(v2), &resp, why, sizeof(why)), -EBADMSG,
		     "an etcd v2 answer is not a v3 one");
	cr_assert_eq(api_etcd_answer(200, "", 0, &resp, why, sizeof(why)), -EBADMSG);
	cr_assert(strstr(why, "empty"), "%s", why);
}

Test(api_etcd, a_watch_stream_splits_into_messages_as_they_arrive)
{
	const char *s = "{\"result\":{\"created\":true}}\n{\"result\":{\"events\":[{\"kv\":{}}]}}"
			"\n{\"result\":{\"ev";
	size_t len = strlen(s), used, off = 0;
	json_t *m;
	int n = 0, r;

	while ((r = api_etcd_stream_next(s + off, len - off, &m, &used)) == 1) {
		cr_assert(json_is_object(json_object_get(m, "result")));
		json_decref(m);
		off += used;
		n++;
	}
	cr_assert_eq(r, 0, "the third message is not whole yet");
	cr_assert_eq(n, 2);
	cr_assert_eq(strncmp(s + off + used, "{\"result\":{\"ev", 14), 0,
		     "only the blanks before it are skipped");
	cr_assert_eq(api_etcd_stream_next("<html>", 6, &m, &used), -EPROTO);
	cr_assert_eq(api_etcd_stream_next("{\"a\":]", 6, &m, &used), -EPROTO);
}

Test(api_etcd, bad_client_settings_are_refused)
{
	struct api_etcd_conf c = { .endpoints = "ftp://127.0.0.1:2379" };
	struct api_etcd *e;

	cr_assert_eq(api_etcd_create(&c, NULL, &e), -EINVAL);
	c.endpoints = "";
	cr_assert_eq(api_etcd_create(&c, NULL, &e), -EINVAL);
	c.endpoints = "https://127.0.0.1:2379";
	c.cert_file = "/etc/isergw/etcd-client.pem";
	cr_assert_eq(api_etcd_create(&c, NULL, &e), -EINVAL, "a certificate without its key");
}

/* ---- the client in a loop against a fake endpoint ---------------------------------------- */

struct result {
	int calls, err, msgs;
	int64_t rev;
};

static void on_done(void *ctx, int err, json_t *resp)
{
	struct result *r = ctx;

	r->calls++;
	r->err = err;
	r->rev = api_etcd_int(json_object_get(resp, "header"), "revision", -1);
}

static void on_msg(void *ctx, json_t *msg)
{
	struct result *r = ctx;

	(void)msg;
	r->msgs++;
}

static void run_until(struct gw_loop *loop, const int *calls, uint64_t max_ms)
{
	uint64_t t0 = gw_now_ms();

	while (!*calls && gw_now_ms() - t0 < max_ms)
		gw_loop_run_once(loop, 50);
}

static struct api_etcd *client(struct gw_loop *loop, int dead_port, int port)
{
	char eps[128];
	struct api_etcd_conf c = { .endpoints = eps };
	struct api_etcd *e;

	snprintf(eps, sizeof(eps), "http://127.0.0.1:%d,http://127.0.0.1:%d", dead_port, port);
	cr_assert_eq(api_etcd_create(&c, loop, &e), 0);
	return e;
}

#define OK_REPLY "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 35\r\n" \
		 "Connection: close\r\n\r\n{\"header\":{\"revision\":\"42\"},\"x\":12}"

Test(api_etcd, a_dead_first_endpoint_fails_over_to_the_next_without_blocking)
{
	struct gw_loop loop;
	struct result res = { 0 };
	struct fake_etcd f;
	struct api_etcd *e;
	json_t *st;
	uint64_t t0;

	cr_assert_eq(gw_loop_init(&loop), 0);
	fake_etcd_start(&f, &loop, NULL);
	fake_etcd_reply_raw(&f, OK_REPLY);
	e = client(&loop, fake_etcd_port(NULL), f.port);
	t0 = gw_now_ms();
	cr_assert_eq(api_etcd_post(e, "/v3/kv/range", json_pack("{s:s}", "key", "AA=="), on_done,
				   &res), 0);
	cr_assert_lt(gw_now_ms() - t0, 100, "the call returns at once");
	cr_assert_eq(res.calls, 0, "and answers from the loop, never inside the call");
	run_until(&loop, &res.calls, 10000);
	cr_assert_eq(res.calls, 1);
	cr_assert_eq(res.err, 0);
	cr_assert_eq(res.rev, 42);
	st = api_etcd_status(e);
	cr_assert(strstr(json_string_value(json_object_get(st, "endpoint")), "127.0.0.1"));
	cr_assert_eq(atoi(strrchr(json_string_value(json_object_get(st, "endpoint")), ':') + 1),
		     f.port, "the endpoint in use is the one that answered");
	cr_assert(strstr(json_string_value(json_object_get(json_array_get(
		json_object_get(st, "endpoints"), 0), "error")), "cannot reach"));
	json_decref(st);
	cr_assert_not(api_etcd_down(e));
	api_etcd_destroy(e);
	fake_etcd_stop(&f);
	gw_loop_fini(&loop);
}

Test(api_etcd, a_web_server_is_reported_as_not_etcd)
{
	struct gw_loop loop;
	struct result res = { 0 };
	struct fake_etcd f;
	struct api_etcd *e;
	json_t *st;
	const char *err;

	cr_assert_eq(gw_loop_init(&loop), 0);
	fake_etcd_start(&f, &loop, NULL);
	fake_etcd_reply_raw(&f, "HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\n"
		   "Content-Length: 22\r\nConnection: close\r\n\r\n<html>not here</html>\n");
	e = client(&loop, fake_etcd_port(NULL), f.port);
	cr_assert_eq(api_etcd_post(e, "/v3/kv/range", json_pack("{s:s}", "key", "AA=="), on_done,
				   &res), 0);
	run_until(&loop, &res.calls, 10000);
	cr_assert_eq(res.calls, 1);
	cr_assert_eq(res.err, -EHOSTUNREACH, "no endpoint is etcd");
	cr_assert(api_etcd_down(e));
	st = api_etcd_status(e);
	err = json_string_value(json_object_get(json_array_get(json_object_get(st, "endpoints"),
								 1), "error"));
	cr_assert(err && strstr(err, "HTTP 404") && strstr(err, "not etcd's v3 JSON gateway"),
		  "%s", err ? err : "(none)");
	json_decref(st);
	api_etcd_destroy(e);
	fake_etcd_stop(&f);
	gw_loop_fini(&loop);
}

Test(api_etcd, a_watch_delivers_each_message_then_its_end)
{
	struct gw_loop loop;
	struct result res = { 0 };
	struct api_etcd_op *op;
	struct fake_etcd f;
	struct api_etcd *e;

	cr_assert_eq(gw_loop_init(&loop), 0);
	fake_etcd_start(&f, &loop, NULL);
	fake_etcd_reply_raw(&f, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
		   "Connection: close\r\n\r\n"
		   "{\"result\":{\"header\":{\"revision\":\"3\"},\"created\":true}}\n"
		   "{\"result\":{\"header\":{\"revision\":\"4\"},\"events\":[{\"kv\":"
		   "{\"key\":\"L2EvYg==\",\"value\":\"MQ==\",\"mod_revision\":\"4\"}}]}}\n");
	e = client(&loop, fake_etcd_port(NULL), f.port);
	cr_assert_eq(api_etcd_watch(e, "/a/", 3, on_msg, on_done, &res, &op), 0);
	run_until(&loop, &res.calls, 10000);
	cr_assert_eq(res.msgs, 2);
	cr_assert_eq(res.calls, 1, "the end comes once, after the messages");
	cr_assert_eq(res.err, -ECONNRESET);
	api_etcd_destroy(e);
	fake_etcd_stop(&f);
	gw_loop_fini(&loop);
}

Test(api_etcd, a_cancelled_call_never_calls_back)
{
	struct gw_loop loop;
	struct result res = { 0 };
	struct fake_etcd f;
	struct api_etcd *e;
	int never = 0;

	cr_assert_eq(gw_loop_init(&loop), 0);
	fake_etcd_start(&f, &loop, NULL);
	fake_etcd_reply_raw(&f, OK_REPLY);
	e = client(&loop, f.port, f.port);
	cr_assert_eq(api_etcd_post(e, "/v3/kv/range", json_pack("{s:s}", "key", "AA=="), on_done,
				   &res), 0);
	api_etcd_cancel_ctx(e, &res);
	run_until(&loop, &never, 300);
	cr_assert_eq(res.calls, 0);
	api_etcd_destroy(e);
	fake_etcd_stop(&f);
	gw_loop_fini(&loop);
}

Test(api_etcd, a_call_within_a_time_ends_then_whatever_the_endpoints_do)
{
	struct gw_loop loop;
	struct result res = { 0 };
	struct fake_etcd f;
	struct api_etcd *e;
	uint64_t t0, took;

	cr_assert_eq(gw_loop_init(&loop), 0);
	fake_etcd_start(&f, &loop, NULL);	/* both endpoints stall */
	e = client(&loop, f.port, f.port);
	t0 = gw_now_ms();
	cr_assert_eq(api_etcd_post_within(e, "/v3/lease/keepalive", json_pack("{s:s}", "ID", "7"),
					  400, on_done, &res), 0);
	run_until(&loop, &res.calls, 10000);
	took = gw_now_ms() - t0;
	cr_assert_eq(res.calls, 1);
	cr_assert_eq(res.err, -ETIMEDOUT);
	/* The endpoints share the time: not 2 s each. A generous bound for a loaded machine. */
	cr_assert_geq(took, 350, "%llu ms", (unsigned long long)took);
	cr_assert_lt(took, 1500, "%llu ms", (unsigned long long)took);
	cr_assert_eq(f.served, 1, "the time was spent on the first: the second is not tried");
	api_etcd_destroy(e);
	fake_etcd_stop(&f);
	gw_loop_fini(&loop);
}
