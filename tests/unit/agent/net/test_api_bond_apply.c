// SPDX-License-Identifier: MIT
/*
 * The bond engine without the kernel's bonding: the snapshot it takes from a sysfs tree (links)
 * and the gateway's model of the bond (a JSON object as api_net holds it), the
 * networkd folder checked before anything changes, and a failed step putting back the files
 * it wrote (the step fails by ISERGW_BOND_FAIL_AT before any netlink call).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api_bond.h"

static char root[64], nd[128];

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
	char path[512];

	snprintf(root, sizeof(root), "/tmp/isergw-unit-bond.XXXXXX");
	cr_assert_not_null(mkdtemp(root));
	put("class/net/bd1/flags", "0x1403");
	put("class/net/bd1/bonding/mode", "active-backup 1");
	put("class/net/bd1/bonding/fail_over_mac", "active 1");
	put("class/net/bd1/bonding/miimon", "100");
	put("class/net/bd1/bonding/num_grat_arp", "3");
	put("class/net/bd1/bonding/primary", "");
	put("class/net/bd1/bonding/slaves", "s1");
	put("class/net/s1/flags", "0x1803");
	snprintf(path, sizeof(path), "%s/class/net/s1/master", root);
	cr_assert_eq(symlink("../bd1", path), 0);
	put("class/net/va/flags", "0x1002");
	put("class/net/vb/flags", "0x1003");
	snprintf(nd, sizeof(nd), "%s/networkd", root);
	cr_assert_eq(mkdir(nd, 0755), 0);
	setenv("ISERGW_SYSFS", root, 1);
}

static void teardown(void)
{
	char cmd[128];

	unsetenv("ISERGW_BOND_FAIL_AT");
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(api_bond_apply, .init = setup, .fini = teardown);

Test(api_bond_apply, snapshot_of_links_and_the_bond)
{
	json_t *model = json_pack("{s:s, s:s, s:s, s:i, s:s, s:i, s:[{s:s}]}", "name", "bd1",
				  "mode", "active-backup", "fail_over_mac", "active", "miimon",
				  100, "primary", "", "num_grat_arp", 3, "slaves", "name", "s1");
	json_t *cur = api_bond_snapshot(root, model), *l = json_object_get(cur, "links");
	json_t *none = api_bond_snapshot(root, NULL);

	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(l, "s1"), "master")),
			 "bd1");
	cr_assert(json_is_true(json_object_get(json_object_get(l, "bd1"), "bond")));
	cr_assert(json_is_false(json_object_get(json_object_get(l, "va"), "bond")));
	cr_assert(json_is_false(json_object_get(json_object_get(l, "va"), "up")));
	cr_assert(json_is_true(json_object_get(json_object_get(l, "vb"), "up")));
	cr_assert_null(json_string_value(json_object_get(json_object_get(l, "va"), "master")));
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(cur, "bond"),
							"num_grat_arp")), 3);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(cur, "bond"), "miimon")),
		     100);
	/* From rtnetlink: every host has lo's address. */
	cr_assert(json_is_array(json_object_get(json_object_get(cur, "addrs"), "lo")));
	/* A copy: the model the agent holds is not changed by the plan. */
	cr_assert(json_equal(json_object_get(cur, "bond"), model));
	cr_assert(json_object_get(cur, "bond") != model);
	cr_assert(json_is_null(json_object_get(none, "bond")), "no bond in the model: null");
	json_decref(none);
	json_decref(cur);
	json_decref(model);
}

static void apply(const char *dir, const char *desired, bool dry, struct api_bond_result *res)
{
	struct api_bond_ctx c = { .networkd_dir = dir, .listen = "127.0.0.1:8080" };
	json_t *d = json_loads(desired, 0, NULL);

	cr_assert_not_null(d);
	api_bond_apply(&c, d, dry, res);
	json_decref(d);
}

static bool exists(const char *name)
{
	char p[256];

	snprintf(p, sizeof(p), "%s/%s", nd, name);
	return access(p, F_OK) == 0;
}

Test(api_bond_apply, an_unwritable_folder_stops_it_first)
{
	struct api_bond_result res;
	char file[128];

	apply("/nonexistent/isergw", "{\"name\":\"bdn\",\"slaves\":[\"va\"]}", false, &res);
	cr_assert_eq(res.verdict, API_BOND_INVALID);
	cr_assert_str_eq(res.field, "networkd_dir");
	cr_assert(strstr(res.message, "/nonexistent/isergw is not writable"), "%s", res.message);
	api_bond_result_fini(&res);
	snprintf(file, sizeof(file), "%s/class/net/va/flags", root);
	apply(file, "{\"name\":\"bdn\",\"slaves\":[\"va\"]}", true, &res);
	cr_assert_eq(res.verdict, API_BOND_INVALID, "a dry run checks the folder too");
	cr_assert(strstr(res.message, "Not a directory"), "%s", res.message);
	api_bond_result_fini(&res);
}

Test(api_bond_apply, a_dry_run_writes_nothing)
{
	struct api_bond_result res;

	apply(nd, "{\"name\":\"bdn\",\"slaves\":[\"va\",\"vb\"]}", true, &res);
	cr_assert_eq(res.verdict, API_BOND_OK, "%s", res.message);
	cr_assert_eq(json_array_size(res.files), 3);
	cr_assert(!exists("10-isergw-agent-bdn.netdev"));
	api_bond_result_fini(&res);
}

Test(api_bond_apply, a_failed_step_puts_the_files_back)
{
	struct api_bond_result res;
	char p[256], old[64] = "";
	FILE *f;

	/* A file from an earlier apply: it must come back as it was. */
	snprintf(p, sizeof(p), "%s/10-isergw-agent-bdn-va.network", nd);
	f = fopen(p, "w");
	cr_assert_not_null(f);
	fputs("[Match]\nName=va\n", f);
	fclose(f);
	setenv("ISERGW_BOND_FAIL_AT", "1", 1);
	apply(nd, "{\"name\":\"bdn\",\"mode\":\"active-backup\",\"slaves\":[\"va\",\"vb\"]}",
	      false, &res);
	cr_assert_eq(res.verdict, API_BOND_FAILED);
	cr_assert(strstr(res.message, "step 1 (create bdn) failed: injected failure"), "%s",
		  res.message);
	cr_assert(strstr(res.message, "the 0 steps before it were undone"), "%s", res.message);
	cr_assert(!exists("10-isergw-agent-bdn.netdev"));
	cr_assert(!exists("10-isergw-agent-bdn-vb.network"));
	f = fopen(p, "r");
	cr_assert_not_null(f);
	cr_assert_eq(fread(old, 1, sizeof(old) - 1, f), strlen("[Match]\nName=va\n"));
	fclose(f);
	cr_assert_str_eq(old, "[Match]\nName=va\n");
	api_bond_result_fini(&res);
}
