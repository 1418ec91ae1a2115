// SPDX-License-Identifier: MIT
/* The configuration walk: the demo parses, every error is reported with its key path, unknown
 * keys are refused, defaults are applied. */
#include <criterion/criterion.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf.h"

static int parse(const char *text, struct ctl_config *cfg, struct gw_errlist *errs)
{
	json_error_t jerr;
	json_t *root = json_loads(text, 0, &jerr);
	int r;

	cr_assert_not_null(root, "bad test JSON: %s", jerr.text);
	r = conf_parse(root, cfg, errs);
	json_decref(root);
	return r;
}

static bool has_error(const struct gw_errlist *e, const char *field, const char *msg_part)
{
	for (size_t i = 0; i < e->n; i++)
		if (!strcmp(e->v[i].field, field) && (!msg_part || strstr(e->v[i].msg, msg_part)))
			return true;
	return false;
}

Test(ctl_config, demo_parses_with_schema_values)
{
	json_t *demo = conf_demo("/tmp/state");
	struct ctl_config cfg;
	struct gw_errlist errs;
	struct isc_target_conf *t;

	gw_errlist_init(&errs);
	cr_assert_eq(conf_parse(demo, &cfg, &errs), 0, "%s", gw_errlist_join(&errs));
	cr_assert_eq(cfg.isc->nportals, 1);
	cr_expect_str_eq(cfg.isc->portals[0].address, "127.0.0.1");
	cr_expect_eq(cfg.isc->portals[0].port, 3260);
	cr_assert_eq(cfg.isc->ntargets, 1);
	t = &cfg.isc->targets[0];
	cr_expect_str_eq(t->name, "iqn.2026-11.org.isergw:demo");
	cr_expect(t->allow_any_initiator);
	cr_expect_eq(t->params.queue_depth, 128);
	cr_assert_eq(t->nluns, 1);
	cr_expect_str_eq(t->luns[0].bs.path, "/tmp/state/demo.img");
	cr_expect_eq(t->luns[0].bs.size, 1ull << 30);
	conf_free(&cfg);
	gw_errlist_fini(&errs);
	json_decref(demo);
}

Test(ctl_config, defaults_fill_what_is_left_out)
{
	static const char text[] =
		"{ \"portals\": [ { \"name\": \"p\" } ],"
		"  \"targets\": [ { \"name\": \"iqn.2026-11.org.x:t\", \"portals\": [\"p\"] } ] }";
	struct ctl_config cfg;
	struct gw_errlist errs;

	gw_errlist_init(&errs);
	cr_assert_eq(parse(text, &cfg, &errs), 0, "%s", gw_errlist_join(&errs));
	cr_expect_eq(cfg.isc->portals[0].port, 3260);
	cr_expect_eq(cfg.isc->portals[0].transport, ISC_PORTAL_TCP);
	cr_expect_eq(cfg.isc->targets[0].tpgt, 1);
	cr_expect_not(cfg.isc->targets[0].allow_any_initiator);
	cr_expect_eq(cfg.isc->targets[0].params.MaxRecvDataSegmentLength, 262144);
	cr_expect_eq(cfg.isc->discovery.auth, ISC_DISC_AUTH_NONE);
	conf_free(&cfg);
	gw_errlist_fini(&errs);
}

Test(ctl_config, every_error_is_reported_with_its_path)
{
	static const char text[] =
		"{ \"portals\": [ { \"name\": \"p\", \"port\": 70000, \"colour\": \"red\" } ],"
		"  \"bogus\": 1,"
		"  \"targets\": [ { \"name\": \"not-an-iqn\", \"portals\": [\"nope\"],"
		"    \"params\": { \"MaxBurstLength\": 12 },"
		"    \"luns\": [ { \"lun\": 0, \"backstore\": { \"type\": \"ram\", \"size\": \"12Q\" } },"
		"               { \"lun\": 1 } ] } ] }";
	struct ctl_config cfg;
	struct gw_errlist errs;

	gw_errlist_init(&errs);
	cr_assert_neq(parse(text, &cfg, &errs), 0);
	cr_expect(has_error(&errs, "portals[0].port", "65535"));
	cr_expect(has_error(&errs, "portals[0].colour", NULL));
	cr_expect(has_error(&errs, "bogus", "unknown"));
	cr_expect(has_error(&errs, "targets[0].name", "iqn"));
	cr_expect(has_error(&errs, "targets[0].portals[0]", "nope"));
	cr_expect(has_error(&errs, "targets[0].params.MaxBurstLength", NULL));
	cr_expect(has_error(&errs, "targets[0].luns[0].backstore.size", NULL));
	cr_expect(has_error(&errs, "targets[0].luns[1].backstore", "required"));
	cr_expect_geq(errs.n, 8);
	cr_expect_null(cfg.isc, "nothing half-built is left on error");
	gw_errlist_fini(&errs);
}

Test(ctl_config, duplicate_names_and_luns_are_refused)
{
	static const char text[] =
		"{ \"portals\": [ { \"name\": \"p\" }, { \"name\": \"p\", \"port\": 3261 } ],"
		"  \"targets\": [ { \"name\": \"iqn.2026-11.org.x:t\", \"portals\": [\"p\"],"
		"    \"luns\": [ { \"lun\": 3, \"backstore\": { \"type\": \"null\", \"size\": \"1G\" } },"
		"               { \"lun\": 3, \"backstore\": { \"type\": \"null\", \"size\": \"1G\" } } ] },"
		"   { \"name\": \"iqn.2026-11.org.x:t\", \"portals\": [\"p\"] } ] }";
	struct ctl_config cfg;
	struct gw_errlist errs;

	gw_errlist_init(&errs);
	cr_assert_neq(parse(text, &cfg, &errs), 0);
	cr_expect(has_error(&errs, "portals[1].name", NULL));
	cr_expect(has_error(&errs, "targets[1].name", NULL));
	cr_expect(has_error(&errs, "targets[0].luns[1].lun", NULL));
	gw_errlist_fini(&errs);
}

Test(ctl_config, chap_rules_apply)
{
	static const char text[] =
		"{ \"portals\": [ { \"name\": \"p\" } ],"
		"  \"discovery\": { \"auth\": \"chap\" },"
		"  \"targets\": [ { \"name\": \"iqn.2026-11.org.x:t\", \"portals\": [\"p\"],"
		"    \"chap\": { \"user\": \"u\", \"secret\": \"short\" } } ] }";
	struct ctl_config cfg;
	struct gw_errlist errs;

	gw_errlist_init(&errs);
	cr_assert_neq(parse(text, &cfg, &errs), 0);
	cr_expect(has_error(&errs, "discovery.chap.user", NULL));
	cr_expect(has_error(&errs, "targets[0].chap.secret", NULL));
	gw_errlist_fini(&errs);
}

Test(ctl_config, state_dir_gets_the_demo_once)
{
	char dir[] = "/tmp/isergw-ctl-XXXXXX", *path = NULL;
	struct ctl_config cfg;
	struct gw_errlist errs;
	FILE *f;

	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(conf_ensure_state(dir, &path), 0);
	gw_errlist_init(&errs);
	cr_assert_eq(conf_load_file(path, &cfg, &errs), 0, "%s", gw_errlist_join(&errs));
	conf_free(&cfg);
	/* An operator's edit survives the next start. */
	f = fopen(path, "w");
	fputs("{ \"portals\": [] }", f);
	fclose(f);
	free(path);
	cr_assert_eq(conf_ensure_state(dir, &path), 0);
	cr_assert_eq(conf_load_file(path, &cfg, &errs), 0);
	cr_expect_eq(cfg.isc->ntargets, 0);
	conf_free(&cfg);
	gw_errlist_fini(&errs);
	unlink(path);
	free(path);
	rmdir(dir);
}

Test(ctl_config, json_syntax_error_names_line_and_column)
{
	char path[] = "/tmp/isergw-ctl-XXXXXX";
	int fd = mkstemp(path);
	struct ctl_config cfg;
	struct gw_errlist errs;

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "{\n  \"portals\": [ ,\n}", 20), 20);
	close(fd);
	gw_errlist_init(&errs);
	cr_expect_neq(conf_load_file(path, &cfg, &errs), 0);
	cr_assert_eq(errs.n, 1);
	cr_expect_not_null(strstr(errs.v[0].msg, "line 2"), "%s", errs.v[0].msg);
	gw_errlist_fini(&errs);
	unlink(path);
}

Test(ctl_config, cluster_groups_parse_and_are_checked)
{
	static const char good[] =
		"{ \"portals\": [ { \"name\": \"p\" } ],"
		"  \"cluster\": { \"groups\": [ { \"id\": 1, \"name\": \"gw-a\" },"
		"                               { \"id\": 2, \"state\": \"unavailable\" } ] },"
		"  \"targets\": [ { \"name\": \"iqn.2026-11.org.x:t\", \"tpgt\": 2, \"portals\": [\"p\"],"
		"                 \"luns\": [ { \"lun\": 0, \"owner\": \"gw-a\", \"alua_group\": 1,"
		"                              \"backstore\": { \"type\": \"ram\" } } ] } ] }";
	static const char bad[] =
		"{ \"portals\": [ { \"name\": \"p\" } ],"
		"  \"cluster\": { \"groups\": [ { \"id\": 1 }, { \"id\": 1, \"state\": \"asleep\" },"
		"                               { \"id\": 0 } ], \"leader\": \"x\" },"
		"  \"targets\": [ { \"name\": \"iqn.2026-11.org.x:t\", \"tpgt\": 5, \"portals\": [\"p\"],"
		"                 \"luns\": [ { \"lun\": 0, \"alua_group\": 70000,"
		"                              \"backstore\": { \"type\": \"ram\" } } ] } ] }";
	struct ctl_config cfg;
	struct gw_errlist errs;

	gw_errlist_init(&errs);
	cr_assert_eq(parse(good, &cfg, &errs), 0, "%s", gw_errlist_join(&errs));
	cr_assert_eq(cfg.isc->ngroups, 2);
	cr_expect_str_eq(cfg.isc->groups[0].name, "gw-a");
	cr_expect_eq(cfg.isc->groups[0].state, SCSI_ALUA_AO, "default: active/optimized");
	cr_expect_eq(cfg.isc->groups[1].state, SCSI_ALUA_UNAVAILABLE);
	cr_expect_eq(cfg.isc->targets[0].luns[0].lu.alua_group, 1);
	cr_expect_str_eq(cfg.isc->targets[0].luns[0].lu.owner, "gw-a");
	conf_free(&cfg);

	cr_assert_neq(parse(bad, &cfg, &errs), 0);
	cr_expect(has_error(&errs, "cluster", "leader"), "%s", gw_errlist_join(&errs));
	cr_expect(has_error(&errs, "cluster.groups[1].state", NULL), "%s", gw_errlist_join(&errs));
	cr_expect(has_error(&errs, "cluster.groups[2].id", NULL), "%s", gw_errlist_join(&errs));
	cr_expect(has_error(&errs, "cluster.groups[1].id", "already"), "%s",
		  gw_errlist_join(&errs));
	cr_expect(has_error(&errs, "targets[0].tpgt", "cluster.groups"), "%s",
		  gw_errlist_join(&errs));
	cr_expect(has_error(&errs, "targets[0].luns[0].alua_group", NULL), "%s",
		  gw_errlist_join(&errs));
	gw_errlist_fini(&errs);

	/* An LU's group must be one of the cluster's. */
	gw_errlist_init(&errs);
	cr_assert_neq(parse("{ \"portals\": [ { \"name\": \"p\" } ],"
			    "  \"cluster\": { \"groups\": [ { \"id\": 1 } ] },"
			    "  \"targets\": [ { \"name\": \"iqn.2026-11.org.x:t\", \"portals\": [\"p\"],"
			    "    \"luns\": [ { \"lun\": 0, \"alua_group\": 3,"
			    "                 \"backstore\": { \"type\": \"ram\" } } ] } ] }", &cfg, &errs),
		      0);
	cr_expect(has_error(&errs, "targets[0].luns[0].alua_group", "cluster.groups"), "%s",
		  gw_errlist_join(&errs));
	gw_errlist_fini(&errs);
}

Test(ctl_config, boot_wait_defaults_to_2_s_and_is_range_checked)
{
	static const char base[] =
		"{ \"portals\": [ { \"name\": \"p\" } ],"
		"  \"targets\": [ { \"name\": \"iqn.2026-11.org.x:t\", \"portals\": [\"p\"],"
		"    \"luns\": [ { \"lun\": 0, \"backstore\": { \"type\": \"remote\", \"paths\":"
		"      [ { \"url\": \"iscsi://192.0.2.1/iqn.2026-11.org.x:b/0\" } ] } } ] } ] }";
	struct ctl_config cfg;
	struct gw_errlist errs;
	char text[1024];

	/* The defaults: READY waits at most 2 s, for one login attempt per path. */
	gw_errlist_init(&errs);
	cr_assert_eq(parse(base, &cfg, &errs), 0, "%s", gw_errlist_join(&errs));
	cr_expect_eq(cfg.gateway.boot_wait, 2);
	cr_expect_eq(cfg.isc->targets[0].luns[0].bs.remote->initial_login_retry_max, 1);
	conf_free(&cfg);
	gw_errlist_fini(&errs);

	snprintf(text, sizeof(text), "{ \"gateway\": { \"boot_wait\": 0 }, %s", base + 1);
	gw_errlist_init(&errs);
	cr_assert_eq(parse(text, &cfg, &errs), 0, "%s", gw_errlist_join(&errs));
	cr_expect_eq(cfg.gateway.boot_wait, 0);
	conf_free(&cfg);
	gw_errlist_fini(&errs);

	snprintf(text, sizeof(text), "{ \"gateway\": { \"boot_wait\": 601 }, %s", base + 1);
	gw_errlist_init(&errs);
	cr_assert_neq(parse(text, &cfg, &errs), 0);
	cr_expect(has_error(&errs, "gateway.boot_wait", "600"), "%s", gw_errlist_join(&errs));
	gw_errlist_fini(&errs);
}

static const char gw_base[] =
	"{ \"portals\": [ { \"name\": \"p\" } ],"
	"  \"targets\": [ { \"name\": \"iqn.2026-11.org.x:t\", \"portals\": [\"p\"] } ] }";

struct u32_case {
	const char *v;
	int ok;
};

/* gateway.KEY, a U32 at offset off of ctl_gateway_conf: def when absent, then each case taken
 * (read back) or refused with an error naming the key. */
static void expect_gateway_u32(const char *key, size_t off, uint32_t def,
			       const struct u32_case *cases, size_t n)
{
	struct ctl_config cfg;
	struct gw_errlist errs;
	char text[512], path[64];

	snprintf(path, sizeof(path), "gateway.%s", key);
	gw_errlist_init(&errs);
	cr_assert_eq(parse(gw_base, &cfg, &errs), 0, "%s", gw_errlist_join(&errs));
	cr_expect_eq(*(uint32_t *)((char *)&cfg.gateway + off), def, "%s's default", key);
	conf_free(&cfg);
	gw_errlist_fini(&errs);
	for (size_t i = 0; i < n; i++) {
		snprintf(text, sizeof(text), "{ \"gateway\": { \"%s\": %s }, %s", key, cases[i].v,
			 gw_base + 1);
		gw_errlist_init(&errs);
		if (cases[i].ok) {
			cr_assert_eq(parse(text, &cfg, &errs), 0, "%s %s: %s", key, cases[i].v,
				     gw_errlist_join(&errs));
			cr_expect_eq(*(uint32_t *)((char *)&cfg.gateway + off),
				     (uint32_t)atoi(cases[i].v), "%s %s", key, cases[i].v);
			conf_free(&cfg);
		} else {
			cr_assert_neq(parse(text, &cfg, &errs), 0, "%s %s accepted", key, cases[i].v);
			cr_expect(has_error(&errs, path, NULL), "%s %s: %s", key, cases[i].v,
				  gw_errlist_join(&errs));
		}
		gw_errlist_fini(&errs);
	}
}

Test(ctl_config, loops_defaults_to_0_one_per_cpu_and_is_range_checked)
{
	static const struct u32_case cases[] = {
		{ "0", 1 }, { "1", 1 }, { "2", 1 }, { "16", 1 }, { "17", 0 }, { "-1", 0 },
		{ "\"2\"", 0 },
	};
	struct ctl_config cfg;
	struct gw_errlist errs;
	char text[512];

	/* The default: 0, resolved at start-up to one loop per CPU (ctl_loops_start). */
	expect_gateway_u32("loops", offsetof(struct ctl_gateway_conf, loops), 0, cases,
			   sizeof(cases) / sizeof(cases[0]));
	/* The range the error names is the one the documentation gives. */
	snprintf(text, sizeof(text), "{ \"gateway\": { \"loops\": 17 }, %s", gw_base + 1);
	gw_errlist_init(&errs);
	cr_assert_neq(parse(text, &cfg, &errs), 0);
	cr_expect(has_error(&errs, "gateway.loops", "16"), "%s", gw_errlist_join(&errs));
	gw_errlist_fini(&errs);
}

Test(ctl_config, poll_us_defaults_to_0_and_is_range_checked)
{
	static const struct u32_case cases[] = {
		{ "0", 1 }, { "1", 1 }, { "1000", 1 }, { "1001", 0 }, { "-1", 0 }, { "\"20\"", 0 },
	};

	expect_gateway_u32("poll_us", offsetof(struct ctl_gateway_conf, poll_us), 0, cases,
			   sizeof(cases) / sizeof(cases[0]));
}
