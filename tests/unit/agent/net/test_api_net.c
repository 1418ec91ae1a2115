// SPDX-License-Identifier: MIT
/*
 * Bond and RDMA status from a sysfs tree, drift against desired settings, their validation:
 * what an operator sees in /api/v1/bonds when a slave fails.
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
#include "api_sysfs.h"

static char root[64];

static void put(const char *rel, const char *val)
{
	char path[512], *p;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (p = path + strlen(root) + 1; (p = strchr(p, '/')); p++) {
		*p = 0;
		mkdir(path, 0755);
		*p = '/';
	}
	f = fopen(path, "w");
	cr_assert_not_null(f, "%s", path);
	fprintf(f, "%s\n", val);
	fclose(f);
}

static void setup(void)
{
	snprintf(root, sizeof(root), "/tmp/isergw-unit-sysfs.XXXXXX");
	cr_assert_not_null(mkdtemp(root));
	put("class/net/bd0/bonding/mode", "active-backup 1");
	put("class/net/bd0/bonding/fail_over_mac", "active 1");
	put("class/net/bd0/bonding/active_slave", "ethb");
	put("class/net/bd0/bonding/slaves", "etha ethb");
	put("class/net/bd0/bonding/primary", "");
	/* etha through the bond's lower_ link; ethb only in its own folder (older kernels). */
	put("class/net/bd0/lower_etha/bonding_slave/state", "backup");
	put("class/net/bd0/lower_etha/bonding_slave/link_failure_count", "3");
	put("class/net/ethb/bonding_slave/state", "active");
	put("class/net/ethb/bonding_slave/link_failure_count", "1");
	put("class/net/lo/address", "00:00:00:00:00:00");
	put("class/infiniband/rxe0/parent", "bd0");
	put("class/infiniband/rxe0/ports/1/state", "4: ACTIVE");
	put("class/infiniband/mlx0/ports/1/state", "1: DOWN");
	put("class/infiniband/mlx0/ports/1/gid_attrs/ndevs/0", "ens1");
	put("class/infiniband/mlx0/ports/2/state", "garbage");
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	cr_expect_eq(system(cmd), 0);
}

TestSuite(api_net, .init = setup, .fini = teardown);

static char *dump(const json_t *j)
{
	return json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
}

Test(api_net, bond_status)
{
	json_t *b = api_sysfs_bond(root, "bd0"), *s;
	char *d;

	cr_assert_not_null(b);
	cr_expect_str_eq(json_string_value(json_object_get(b, "mode")), "active-backup");
	cr_expect_str_eq(json_string_value(json_object_get(b, "fail_over_mac")), "active");
	cr_expect_str_eq(json_string_value(json_object_get(b, "active_slave")), "ethb");
	cr_expect_str_eq(json_string_value(json_object_get(b, "primary")), "");
	/* Missing files are null, not errors. */
	cr_expect(json_is_null(json_object_get(b, "miimon")));
	cr_expect(json_is_null(json_object_get(b, "mii_status")));
	s = json_object_get(b, "slaves");
	cr_assert_eq(json_array_size(s), 2);
	d = dump(s);
	cr_expect_str_eq(d, "[{\"link_failure_count\":3,\"mii_status\":null,\"name\":\"etha\","
			    "\"perm_hwaddr\":null,\"state\":\"backup\"},{\"link_failure_count\":1,"
			    "\"mii_status\":null,\"name\":\"ethb\",\"perm_hwaddr\":null,"
			    "\"state\":\"active\"}]");
	free(d);
	cr_expect_eq(json_integer_value(json_object_get(b, "failovers")), 4);
	json_decref(b);
	cr_expect_null(api_sysfs_bond(root, "lo"), "lo is not a bond");
	cr_expect_null(api_sysfs_bond(root, "nope"));
	cr_expect_null(api_sysfs_bond(root, "../../etc"), "a path is not a name");
	b = api_sysfs_bonds(root);
	cr_expect_eq(json_array_size(b), 1);
	json_decref(b);
	b = api_sysfs_bonds("/nonexistent-sysfs");
	cr_expect(json_is_array(b) && json_array_size(b) == 0);
	json_decref(b);
}

Test(api_net, rdma_status_and_netdev)
{
	json_t *a = api_sysfs_rdma(root), *d, *p;

	cr_assert_eq(json_array_size(a), 2);
	d = json_array_get(a, 0);	/* sorted: mlx0, rxe0 */
	cr_expect_str_eq(json_string_value(json_object_get(d, "name")), "mlx0");
	cr_expect_str_eq(json_string_value(json_object_get(d, "netdev")), "ens1",
			 "no parent, no device/net: the first port's GID netdev");
	p = json_array_get(json_object_get(d, "ports"), 0);
	cr_expect_str_eq(json_string_value(json_object_get(p, "state")), "DOWN");
	cr_expect_eq(json_integer_value(json_object_get(p, "state_num")), 1);
	p = json_array_get(json_object_get(d, "ports"), 1);
	cr_expect_str_eq(json_string_value(json_object_get(p, "state")), "garbage");
	cr_expect(json_is_null(json_object_get(p, "state_num")));
	d = json_array_get(a, 1);
	cr_expect_str_eq(json_string_value(json_object_get(d, "netdev")), "bd0");
	p = json_array_get(json_object_get(d, "ports"), 0);
	cr_expect_str_eq(json_string_value(json_object_get(p, "netdev")), "bd0");
	cr_expect(json_is_null(json_object_get(p, "link_layer")));
	json_decref(a);
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
