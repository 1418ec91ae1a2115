// SPDX-License-Identifier: MIT
/*
 * The bond plan: what an apply would do to a host (the steps, in the kernel's order, and the
 * networkd files) and what it refuses to touch, from snapshots written as JSON.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "api_bond.h"

static const struct api_bond_ctx ctx = {
	.networkd_dir = "/nd", .listen = "10.0.0.9:8080",
};

/* bd1: active-backup, none, miimon 0, up, over bd1a; bd2 over bd2a; va, vb bare and up; eth0
 * has the default route, eth1 the agent's address. */
static json_t *host(void)
{
	json_error_t e;
	json_t *j = json_loads(
		"{\"links\": {"
		" \"bd1\": {\"bond\": true, \"up\": true}, \"bd1a\": {\"master\": \"bd1\"},"
		" \"bd2\": {\"bond\": true, \"up\": true}, \"bd2a\": {\"master\": \"bd2\"},"
		" \"va\": {\"up\": true}, \"vb\": {\"up\": false}, \"eth0\": {\"up\": true},"
		" \"eth1\": {\"up\": true}},"
		" \"bond\": null,"
		" \"addrs\": {\"eth0\": [\"192.0.2.2\"], \"eth1\": [\"10.0.0.9\"],"
		"   \"bd1\": [\"10.1.0.1\"]},"
		" \"default_route\": [\"eth0\"]}", 0, &e);

	cr_assert_not_null(j, "%s", e.text);
	return j;
}

static json_t *with_bd1(void)
{
	json_t *h = host();

	json_object_set_new(h, "bond", json_pack(
		"{s:s, s:s, s:s, s:i, s:i, s:s, s:[{s:s}]}", "name", "bd1", "mode",
		"active-backup", "fail_over_mac", "none", "miimon", 0, "num_grat_arp", 1,
		"primary", "", "slaves", "name", "bd1a"));
	return h;
}

static json_t *want(const char *text)
{
	json_error_t e;
	json_t *j = json_loads(text, 0, &e);

	cr_assert_not_null(j, "%s", e.text);
	return j;
}

/* "op:link op:link ..." */
static void ops(const json_t *steps, char *buf, size_t len)
{
	const json_t *s;
	size_t i, n = 0;

	buf[0] = 0;
	json_array_foreach(steps, i, s)
		n += (size_t)snprintf(buf + n, len - n, "%s%s:%s", i ? " " : "",
				      json_string_value(json_object_get(s, "op")),
				      json_string_value(json_object_get(s, "link")));
}

static void plan(const struct api_bond_ctx *c, const char *desired, json_t *cur,
		 struct api_bond_result *res)
{
	json_t *d = want(desired);

	api_bond_plan(c, d, cur, res);
	json_decref(d);
	json_decref(cur);
}

Test(api_bond_plan, new_bond_in_the_kernels_order)
{
	struct api_bond_result res;
	char o[256];
	const char *nd;

	plan(&ctx, "{\"name\":\"bdn\",\"mode\":\"active-backup\",\"fail_over_mac\":\"active\","
	     "\"miimon\":100,\"num_grat_arp\":2,\"slaves\":[\"va\",\"vb\"],\"primary\":\"vb\"}",
	     host(), &res);
	cr_assert_eq(res.verdict, API_BOND_OK, "%s", res.message);
	ops(res.steps, o, sizeof(o));
	/* vb is down already: only va is taken down before it is enslaved. */
	cr_assert_str_eq(o, "create:bdn set:bdn down:va enslave:va enslave:vb primary:bdn up:bdn");
	cr_assert_eq(json_object_size(json_object_get(json_array_get(res.steps, 1), "was")), 0);
	cr_assert_eq(json_array_size(res.files), 3);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(res.files, 0), "path")),
			 "/nd/10-isergw-agent-bdn.netdev");
	nd = json_string_value(json_object_get(json_array_get(res.files, 0), "content"));
	cr_assert(strstr(nd, "[NetDev]\nName=bdn\nKind=bond\n\n[Bond]\nMode=active-backup\n"
			  "FailOverMACPolicy=active\nMIIMonitorSec=100ms\nGratuitousARP=2\n"), "%s",
		  nd);
	cr_assert(strstr(json_string_value(json_object_get(json_array_get(res.files, 2),
							   "content")),
			 "[Match]\nName=vb\n\n[Network]\nBond=bdn\nPrimarySlave=true\n"));
	cr_assert_null(strstr(json_string_value(json_object_get(json_array_get(res.files, 1),
								"content")), "PrimarySlave"));
	api_bond_result_fini(&res);
}

Test(api_bond_plan, one_setting_changes_in_one_step)
{
	struct api_bond_result res;
	const json_t *s;
	json_t *a = json_pack("{s:i}", "miimon", 100), *b = json_pack("{s:i}", "miimon", 0);

	plan(&ctx, "{\"name\":\"bd1\",\"miimon\":100,\"mode\":\"active-backup\"}", with_bd1(),
	     &res);
	cr_assert_eq(res.verdict, API_BOND_OK, "%s", res.message);
	cr_assert_eq(json_array_size(res.steps), 1);
	s = json_array_get(res.steps, 0);
	cr_assert(json_equal(json_object_get(s, "set"), a));
	cr_assert(json_equal(json_object_get(s, "was"), b));
	json_decref(a);
	json_decref(b);
	api_bond_result_fini(&res);
}

Test(api_bond_plan, in_sync_is_no_step_but_the_files)
{
	struct api_bond_result res;

	plan(&ctx, "{\"name\":\"bd1\",\"miimon\":0,\"fail_over_mac\":\"none\","
	     "\"slaves\":[\"bd1a\"]}", with_bd1(), &res);
	cr_assert_eq(res.verdict, API_BOND_OK, "%s", res.message);
	cr_assert_eq(json_array_size(res.steps), 0);
	cr_assert_eq(json_array_size(res.files), 2);
	api_bond_result_fini(&res);
}

Test(api_bond_plan, fail_over_mac_change_releases_and_takes_back)
{
	struct api_bond_result res;
	char o[256];

	plan(&ctx, "{\"name\":\"bd1\",\"fail_over_mac\":\"active\",\"slaves\":[\"bd1a\",\"va\"],"
	     "\"primary\":\"va\"}", with_bd1(), &res);
	cr_assert_eq(res.verdict, API_BOND_OK, "%s", res.message);
	ops(res.steps, o, sizeof(o));
	cr_assert_str_eq(o, "down:bd1 release:bd1a set:bd1 enslave:bd1a down:va enslave:va "
			 "primary:bd1 up:bd1");
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(res.steps, 6), "was")),
			 "");
	api_bond_result_fini(&res);
}

/* One refusal: verdict, field and a word of the reason. */
static void refused(const struct api_bond_ctx *c, const char *desired, json_t *cur,
		    enum api_bond_verdict v, const char *field, const char *why)
{
	struct api_bond_result res;

	plan(c, desired, cur, &res);
	cr_assert_eq(res.verdict, v, "%s: verdict %d: %s", desired, res.verdict, res.message);
	cr_assert_str_eq(res.field, field, "%s", res.message);
	cr_assert(strstr(res.message, why), "%s: %s", why, res.message);
	cr_assert_null(res.steps);
	cr_assert_null(res.files);
}

Test(api_bond_plan, refuses_what_it_must_not_touch)
{
	refused(&ctx, "{\"name\":\"bd1\",\"slaves\":[\"va\"]}", with_bd1(), API_BOND_REFUSED,
		"slaves", "has slave bd1a, which the request does not name");
	refused(&ctx, "{\"name\":\"bdn\",\"slaves\":[\"bd2a\"]}", host(), API_BOND_REFUSED,
		"slaves[0]", "slave of bd2");
	refused(&ctx, "{\"name\":\"bdn\",\"slaves\":[\"va\",\"eth0\"]}", host(),
		API_BOND_REFUSED, "slaves[1]", "default route");
	refused(&ctx, "{\"name\":\"bdn\",\"slaves\":[\"eth1\"]}", host(), API_BOND_REFUSED,
		"slaves[0]", "listening address 10.0.0.9");
	refused(&ctx, "{\"name\":\"eth1\",\"slaves\":[\"va\"]}", host(), API_BOND_REFUSED,
		"bond", "not a bond");
	refused(&ctx, "{\"name\":\"bdn\",\"slaves\":[\"bd2\"]}", host(), API_BOND_REFUSED,
		"slaves[0]", "a bond itself");
	/* bd1 is a bond in the host's links, the gateway's model has none yet ("bond": null):
	 * an apply just made it, and a plan now would make it again. */
	refused(&ctx, "{\"name\":\"bd1\",\"slaves\":[\"bd1a\"]}", host(), API_BOND_REFUSED,
		"bond", "the gateway's network model does not show yet");
}

Test(api_bond_plan, a_wildcard_listener_is_on_every_address)
{
	struct api_bond_ctx any = ctx;
	json_t *h = host();

	any.listen = "[::]:8443";
	json_object_set_new(json_object_get(h, "addrs"), "va", json_pack("[s]", "fe80::1"));
	refused(&any, "{\"name\":\"bdn\",\"slaves\":[\"va\"]}", h, API_BOND_REFUSED, "slaves[0]",
		"listening address fe80::1");
}

Test(api_bond_plan, cannot_be_applied)
{
	refused(&ctx, "{\"name\":\"bdn\",\"mode\":\"active-backup\"}", host(), API_BOND_INVALID,
		"slaves", "name its slaves to create it");
	refused(&ctx, "{\"name\":\"bdn\",\"slaves\":[\"va\",\"eth9\"]}", host(), API_BOND_INVALID,
		"slaves[1]", "no interface eth9");
	refused(&ctx, "{\"name\":\"bdn\",\"slaves\":[\"bdn\"]}", host(), API_BOND_INVALID,
		"slaves[0]", "its own slave");
}

/* The gateway's state: a TCP session whose local address is a portal on bd1. */
static json_t *gw_with_session(const char *local, const char *portal_bond)
{
	return json_pack("{s:[{s:[{s:s, s:s}]}], s:{s:[{s:s, s:s, s:s, s:s?}]}}",
			 "sessions", "connections", "transport", "tcp", "local", local,
			 "net", "portals", "name", "tcp0", "transport", "tcp", "address",
			 "10.2.0.1", "bond", portal_bond);
}

Test(api_bond_plan, sessions_on_the_bond_need_force)
{
	struct api_bond_ctx c = ctx;
	struct api_bond_result res;
	json_t *gw = gw_with_session("10.1.0.1:3260", NULL);

	/* The session's local address is on bd1. */
	c.gw_state = gw;
	refused(&c, "{\"name\":\"bd1\",\"miimon\":100}", with_bd1(), API_BOND_REFUSED, "bond",
		"1 TCP session runs over bond bd1");
	json_decref(gw);
	/* The gateway's model puts the portal on bd1. */
	gw = gw_with_session("10.2.0.1:3260", "bd1");
	c.gw_state = gw;
	refused(&c, "{\"name\":\"bd1\",\"miimon\":100}", with_bd1(), API_BOND_REFUSED, "bond",
		"force=true");
	c.force = true;
	plan(&c, "{\"name\":\"bd1\",\"miimon\":100}", with_bd1(), &res);
	cr_assert_eq(res.verdict, API_BOND_OK, "%s", res.message);
	api_bond_result_fini(&res);
	json_decref(gw);
	/* Elsewhere: not in the way. */
	gw = gw_with_session("10.3.0.1:3260", "bd2");
	c.gw_state = gw;
	c.force = false;
	plan(&c, "{\"name\":\"bd1\",\"miimon\":100}", with_bd1(), &res);
	cr_assert_eq(res.verdict, API_BOND_OK, "%s", res.message);
	api_bond_result_fini(&res);
	json_decref(gw);
}

Test(api_bond_plan, a_mode_change_never_downs_the_agents_bond)
{
	struct api_bond_ctx c = ctx;

	c.listen = "10.1.0.1:8080";
	refused(&c, "{\"name\":\"bd1\",\"mode\":\"balance-alb\"}", with_bd1(), API_BOND_REFUSED,
		"mode", "listening address 10.1.0.1");
}
