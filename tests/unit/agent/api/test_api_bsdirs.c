// SPDX-License-Identifier: MIT
/*
 * Where a file or block backstore given through the API may lie (api_bsdirs.c), on a real
 * folder tree with the traps an API client would try: "..", symlinks out of the folder, a
 * sibling named like the folder, the agent's own token files, relative paths.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api_res.h"
#include "gw_log.h"

static char dir[64];
static char p[512], why[1024];

static const char *at(const char *rel)
{
	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	return p;
}

static void setup(void)
{
	char cmd[512];

	snprintf(dir, sizeof(dir), "/tmp/isergw-bsdirs.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	gw_log_set_level(GW_LOG_WARN - 1);
	snprintf(cmd, sizeof(cmd), "cd %s && mkdir -p state/luns state-old other && "
		 "touch state/a.img state-old/b.img state/tokens.json state/admin.token && "
		 "ln -s /etc/shadow state/shadow.img && ln -s ../other state/out && "
		 "ln -s a.img state/alias.img && ln -s /dev/null state/null.dev", dir);
	cr_assert_eq(system(cmd), 0);
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(api_bsdirs, .init = setup, .fini = teardown);

static int chk(struct api_bsdirs *d, const char *rel, bool block)
{
	return api_bsdirs_check(d, rel[0] == '/' ? rel : at(rel), block, why, sizeof(why));
}

Test(api_bsdirs, files_inside_the_folder_pass_existing_or_not)
{
	struct api_bsdirs d;

	cr_assert_eq(api_bsdirs_init(&d, NULL, at("state")), 0);
	cr_assert_eq(chk(&d, "state/a.img", false), 0, "%s", why);
	cr_assert_eq(chk(&d, "state/new.img", false), 0, "%s", why);
	cr_assert_eq(chk(&d, "state/luns/deep/new.img", false), 0, "%s", why);
	cr_assert_eq(chk(&d, "state/alias.img", false), 0, "a link inside: %s", why);
	/* The default's second folder, whether or not this machine has it. */
	cr_assert_eq(chk(&d, "/dev/disk/by-id/wwn-0x5000c500a1b2c3d4", true), 0, "%s", why);
	api_bsdirs_fini(&d);
}

Test(api_bsdirs, escapes_are_refused_naming_the_allowed_folders)
{
	struct api_bsdirs d;

	cr_assert_eq(api_bsdirs_init(&d, NULL, at("state")), 0);
	cr_assert_eq(chk(&d, "/etc/shadow", false), -EACCES);
	cr_assert(strstr(why, "allowed:") && strstr(why, "/dev/disk/by-id"), "%s", why);
	cr_assert_eq(chk(&d, "state/../state-old/b.img", false), -EACCES);
	cr_assert(strstr(why, ".."), "%s", why);
	cr_assert_eq(chk(&d, "state/./a.img", false), -EACCES);
	cr_assert_eq(chk(&d, "state-old/b.img", false), -EACCES, "a sibling named alike");
	cr_assert_eq(chk(&d, "state/shadow.img", false), -EACCES, "a link to /etc/shadow");
	cr_assert(strstr(why, "resolved: /etc/shadow"), "%s", why);
	cr_assert_eq(chk(&d, "state/out/x.img", false), -EACCES, "a folder link out");
	cr_assert_eq(chk(&d, "state/tokens.json", false), -EACCES, "the agent's own file");
	cr_assert_eq(chk(&d, "state/admin.token", false), -EACCES);
	cr_assert(strstr(why, "own files"), "%s", why);
	cr_assert_eq(chk(&d, "state", false), -EACCES, "the folder itself");
	cr_assert_eq(api_bsdirs_check(&d, "a.img", false, why, sizeof(why)), -EACCES);
	cr_assert(strstr(why, "absolute"), "%s", why);
	/* A link to a device node is a block backstore's business, and /dev/null is none. */
	cr_assert_eq(chk(&d, "state/null.dev", true), -EACCES);
	cr_assert_eq(chk(&d, "/dev/sda", true), -EACCES);
	api_bsdirs_fini(&d);
}

Test(api_bsdirs, the_list_replaces_the_default_and_empty_allows_none)
{
	struct api_bsdirs d;
	char list[256];

	snprintf(list, sizeof(list), "%s/other,%s/state-old", dir, dir);
	cr_assert_eq(api_bsdirs_init(&d, list, at("state")), 0);
	cr_assert_eq(chk(&d, "state-old/b.img", false), 0, "%s", why);
	cr_assert_eq(chk(&d, "other/x.img", false), 0, "%s", why);
	cr_assert_eq(chk(&d, "state/a.img", false), -EACCES);
	cr_assert_eq(chk(&d, "/dev/disk/by-id/x", true), -EACCES);
	api_bsdirs_fini(&d);

	cr_assert_eq(api_bsdirs_init(&d, "", at("state")), 0);
	cr_assert_eq(chk(&d, "state/a.img", false), -EACCES);
	cr_assert(strstr(why, "allowed: none"), "%s", why);
	api_bsdirs_fini(&d);
}

Test(api_bsdirs, a_configuration_is_checked_only_where_it_changes_a_path)
{
	struct api_bsdirs d;
	struct gw_errlist errs;
	json_t *old, *cfg;

	cr_assert_eq(api_bsdirs_init(&d, NULL, at("state")), 0);
	/* The gateway's own file (root's) named /srv/root.img: kept as it is. */
	old = json_pack("{s:[{s:s, s:[{s:i, s:{s:s, s:s}}]}]}", "targets", "name", "t",
			"luns", "lun", 0, "backstore", "type", "file", "path", "/srv/root.img");
	cfg = json_deep_copy(old);
	json_array_append_new(json_object_get(json_array_get(json_object_get(cfg, "targets"), 0),
					      "luns"),
			      json_pack("{s:i, s:{s:s, s:s}}", "lun", 1, "backstore", "type",
					"file", "path", "/etc/shadow"));
	json_array_append_new(json_object_get(json_array_get(json_object_get(cfg, "targets"), 0),
					      "luns"),
			      json_pack("{s:i, s:{s:s, s:s}}", "lun", 2, "backstore", "type",
					"ram", "path", "/etc/shadow"));
	gw_errlist_init(&errs);
	cr_assert_eq(api_bsdirs_check_config(&d, old, old, &errs), 0);
	cr_assert_eq(api_bsdirs_check_config(&d, cfg, old, &errs), -EACCES);
	cr_assert_eq(errs.n, 1, "only the file LUN: %zu errors", errs.n);
	cr_assert_str_eq(errs.v[0].field, "targets[0].luns[1].backstore.path");
	gw_errlist_fini(&errs);
	json_decref(old);
	json_decref(cfg);
	api_bsdirs_fini(&d);
}
