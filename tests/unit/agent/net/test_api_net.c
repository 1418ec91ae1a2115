// SPDX-License-Identifier: MIT
/*
 * Bond and RDMA status from the gateway's model, its events, drift against desired settings,
 * their validation: what an operator sees in /api/v1/bonds when a slave fails.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api_net.h"
#include "gw_conf.h"

static char state_dir[64];
static struct api_net net;
static char told[8192];

/* Where the agent's events go: "type data" per line. */
static void on_event(void *ctx, const char *type, json_t *data)
{
	char *d = json_dumps(data, JSON_COMPACT | JSON_SORT_KEYS);

	(void)ctx;
	snprintf(told + strlen(told), sizeof(told) - strlen(told), "%s %s\n", type, d);
	free(d);
	json_decref(data);
}

static void setup(void)
{
	snprintf(state_dir, sizeof(state_dir), "/tmp/isergw-unit-net.XXXXXX");
	cr_assert_not_null(mkdtemp(state_dir));
	told[0] = 0;
	cr_assert_eq(api_net_init(&net, state_dir, on_event, NULL), 0);
}

static void teardown(void)
{
	char cmd[128];

	api_net_fini(&net);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", state_dir);
	cr_expect_eq(system(cmd), 0);
}

TestSuite(api_net, .init = setup, .fini = teardown);

static char *dump(const json_t *j)
{
	return json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
}

/* The gateway's "net" (docs/CONTROL.md), trimmed to what the REST shapes use. */
static const char gw_net[] =
	"{\"generation\":3,"
	" \"bonds\":[{\"name\":\"bd0\",\"mode\":\"active-backup\",\"fail_over_mac\":\"follow\","
	"   \"active_slave\":\"ethb\",\"primary\":null,\"failovers\":2,"
	"   \"slaves\":[{\"name\":\"etha\",\"state\":\"backup\",\"link_failure_count\":3},"
	"               {\"name\":\"ethb\",\"state\":\"active\",\"link_failure_count\":1}]}],"
	" \"rdma_ports\":[{\"device\":\"rxe0\",\"port\":1,\"state\":\"ACTIVE\",\"state_num\":4,"
	"                 \"link_layer\":\"Ethernet\",\"netdev\":\"bd0\",\"rate\":\"10\",\"gids\":[]},"
	"                {\"device\":\"mlx0\",\"port\":2,\"state\":\"DOWN\",\"state_num\":1,"
	"                 \"netdev\":null},"
	"                {\"device\":\"mlx0\",\"port\":1,\"state\":\"DOWN\",\"state_num\":1,"
	"                 \"netdev\":\"ens1\"}],"
	" \"portals\":[],"
	" \"verdicts\":[{\"id\":\"bond-rdma-slaves-fail-over-mac\",\"severity\":\"warning\","
	"                \"object\":\"bond/bd0\",\"message\":\"m\",\"fix\":\"f\"},"
	"               {\"id\":\"portal-no-address\",\"severity\":\"warning\","
	"                \"object\":\"portal/p0\",\"message\":\"m2\",\"fix\":\"f2\"}]}";

Test(api_net, the_gateways_model_in_the_rest_shapes)
{
	json_t *m = json_loads(gw_net, 0, NULL), *b, *d, *p;
	char *s;

	cr_assert_not_null(m);
	cr_expect_not(net.have_model);
	cr_expect_eq(json_array_size(net.bonds), 0, "no status before the gateway answered");
	api_net_set_model(&net, m);
	json_decref(m);
	cr_expect(net.have_model);
	cr_expect_eq(net.generation, 3);
	b = json_array_get(net.bonds, 0);
	cr_expect_str_eq(json_string_value(json_object_get(b, "active_slave")), "ethb");
	cr_expect_str_eq(json_string_value(json_object_get(b, "primary")), "",
			 "no primary is \"\", as sysfs shows it");
	cr_expect_eq(json_integer_value(json_object_get(b, "failovers")), 2);
	s = dump(json_object_get(b, "verdicts"));
	cr_expect_str_eq(s, "[{\"fix\":\"f\",\"id\":\"bond-rdma-slaves-fail-over-mac\","
			 "\"message\":\"m\",\"object\":\"bond/bd0\",\"severity\":\"warning\"}]",
			 "only the bond's own verdicts");
	free(s);
	cr_expect_eq(json_array_size(net.verdicts), 2);
	/* Ports grouped by device, devices sorted, a device's netdev its first port's. */
	cr_assert_eq(json_array_size(net.rdma), 2);
	d = json_array_get(net.rdma, 0);
	cr_expect_str_eq(json_string_value(json_object_get(d, "name")), "mlx0");
	cr_expect_str_eq(json_string_value(json_object_get(d, "netdev")), "ens1");
	cr_expect_eq(json_array_size(json_object_get(d, "ports")), 2);
	p = json_array_get(json_object_get(d, "ports"), 0);
	cr_expect_null(json_object_get(p, "device"));
	cr_expect_str_eq(json_string_value(json_object_get(p, "state")), "DOWN");
	d = json_array_get(net.rdma, 1);
	cr_expect_str_eq(json_string_value(json_object_get(d, "name")), "rxe0");
	cr_expect_str_eq(json_string_value(json_object_get(d, "netdev")), "bd0");
	/* Gone with the gateway. */
	api_net_gw_lost(&net);
	cr_expect_not(net.have_model);
	cr_expect_eq(json_array_size(net.bonds) + json_array_size(net.rdma) +
		     json_array_size(net.verdicts), 0);
}

Test(api_net, gateway_events_are_told_with_the_model_that_includes_them)
{
	json_t *fo = json_loads("{\"bond\":\"bd0\",\"old\":\"etha\",\"new\":\"ethb\","
				"\"old_mac\":\"02:00:00:00:00:0a\",\"new_mac\":\"02:00:00:00:00:0b\","
				"\"failovers\":2,\"time_ms\":5}", 0, NULL);
	json_t *rd = json_loads("{\"device\":\"rxe0\",\"port\":1,\"state_num\":1,"
				"\"previous_num\":4,\"netdev\":\"bd0\"}", 0, NULL);
	json_t *ch = json_loads("{\"generation\":3}", 0, NULL);
	json_t *m = json_loads(gw_net, 0, NULL);

	api_net_gw_event(&net, "failover", fo);
	api_net_gw_event(&net, "rdma", rd);
	api_net_gw_event(&net, "changed", ch);
	api_net_gw_event(&net, "nonsense", ch);
	cr_expect_str_eq(told, "", "held until the model arrives");
	api_net_set_model(&net, m);
	cr_expect_str_eq(told,
		"bond {\"active_slave\":\"ethb\",\"bond\":\"bd0\",\"failovers\":2,"
		"\"gid\":null,\"mac\":\"02:00:00:00:00:0b\",\"previous\":\"etha\","
		"\"previous_gid\":null,\"previous_mac\":\"02:00:00:00:00:0a\",\"time_ms\":5}\n"
		"rdma {\"device\":\"rxe0\",\"netdev\":\"bd0\",\"port\":1,\"previous\":\"ACTIVE\","
		"\"state\":\"DOWN\",\"state_num\":1}\n");
	told[0] = 0;
	api_net_set_model(&net, m);
	cr_expect_str_eq(told, "", "told once");
	json_decref(fo);
	json_decref(rd);
	json_decref(ch);
	json_decref(m);
}

Test(api_net, ifnames)
{
	cr_expect(api_ifname_ok("bond0"));
	cr_expect(api_ifname_ok("enp1s0f0np0"));
	cr_expect(api_ifname_ok("123456789012345"));
	cr_expect_not(api_ifname_ok("1234567890123456"));
	cr_expect_not(api_ifname_ok(""));
	cr_expect_not(api_ifname_ok(NULL));
	cr_expect_not(api_ifname_ok("."));
	cr_expect_not(api_ifname_ok(".."));
	cr_expect_not(api_ifname_ok("a/b"));
	cr_expect_not(api_ifname_ok("a b"));
	cr_expect_not(api_ifname_ok("eth0:1"));
}

static char *drift_of(const char *desired, const char *status)
{
	json_t *d = json_loads(desired, 0, NULL), *s = status ? json_loads(status, 0, NULL) : NULL;
	json_t *r = api_bond_drift(d, s);
	char *out = dump(r);

	json_decref(d);
	json_decref(s);
	json_decref(r);
	return out;
}

Test(api_net, drift)
{
	const char *st = "{\"mode\":\"active-backup\",\"fail_over_mac\":\"active\",\"primary\":\"\","
			 "\"slaves\":[{\"name\":\"b\"},{\"name\":\"a\"}]}";
	char *d;

	d = drift_of("{\"name\":\"x\"}", st);
	cr_expect_str_eq(d, "[]", "nothing desired beyond the name: in sync");
	free(d);
	d = drift_of("{\"mode\":\"active-backup\",\"slaves\":[\"a\",\"b\"],\"primary\":\"\"}", st);
	cr_expect_str_eq(d, "[]", "slaves compare as a set; no primary is \"\"");
	free(d);
	d = drift_of("{\"fail_over_mac\":\"follow\",\"slaves\":[\"a\"],\"primary\":\"a\"}", st);
	cr_expect_str_eq(d, "[{\"actual\":\"active\",\"desired\":\"follow\",\"field\":\"fail_over_mac\"},"
			    "{\"actual\":[\"a\",\"b\"],\"desired\":[\"a\"],\"field\":\"slaves\"},"
			    "{\"actual\":\"\",\"desired\":\"a\",\"field\":\"primary\"}]");
	free(d);
	d = drift_of("{\"name\":\"bd9\",\"mode\":\"802.3ad\"}", NULL);
	cr_expect_str_eq(d, "[{\"actual\":null,\"desired\":\"bd9\",\"field\":\"name\"}]");
	free(d);
}

static size_t check_errors(const char *body, const char *name, char *fields, size_t len)
{
	struct gw_errlist errs;
	json_t *b = json_loads(body, 0, NULL);
	size_t i, n;

	cr_assert_not_null(b, "%s", body);
	gw_errlist_init(&errs);
	api_bond_check(b, name, &errs);
	fields[0] = 0;
	for (i = 0; i < errs.n; i++)
		snprintf(fields + strlen(fields), len - strlen(fields), "%s%s", i ? "," : "",
			 errs.v[i].field);
	n = errs.n;
	gw_errlist_fini(&errs);
	json_decref(b);
	return n;
}

Test(api_net, desired_bond_validation)
{
	char f[256];

	cr_expect_eq(check_errors("{\"mode\":\"active-backup\",\"fail_over_mac\":\"active\","
				  "\"slaves\":[\"a\",\"b\"],\"primary\":\"a\"}", "bd0", f, sizeof(f)),
		     0, "%s", f);
	cr_expect_eq(check_errors("{}", "bd0", f, sizeof(f)), 0);
	cr_expect_eq(check_errors("{\"mode\":\"fast\",\"fail_over_mac\":1,\"slaves\":[\"a\",\"a\","
				  "\"x/y\"],\"primary\":\"c\",\"mtu\":9000}", "bd0", f, sizeof(f)),
		     6, "%s", f);
	cr_expect_str_eq(f, "mtu,mode,fail_over_mac,slaves[1],slaves[2],primary");
	cr_expect_eq(check_errors("{\"mode\":\"802.3ad\",\"slaves\":[\"a\"],\"primary\":\"a\"}",
				  "bd0", f, sizeof(f)), 1);
	cr_expect_str_eq(f, "primary", "802.3ad has no primary");
	cr_expect_eq(check_errors("{\"name\":\"bd1\"}", "bd0", f, sizeof(f)), 1);
	cr_expect_str_eq(f, "name");
	cr_expect_eq(check_errors("{\"slaves\":\"a b\"}", "bd0", f, sizeof(f)), 1);
	cr_expect_eq(check_errors("[]", "bd0", f, sizeof(f)), 1);
	cr_expect_eq(check_errors("{}", "a/b", f, sizeof(f)), 1);
}
