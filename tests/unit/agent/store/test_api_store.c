// SPDX-License-Identifier: MIT
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api_store.h"
#include "gw_log.h"

static char dir[64];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/isergw-store.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	gw_log_set_level(GW_LOG_WARN - 1);
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

static void put_file(const char *name, const char *text)
{
	char p[128];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	f = fopen(p, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
}

TestSuite(api_store, .init = setup, .fini = teardown);

Test(api_store, a_fresh_store_is_empty_at_generation_zero)
{
	struct api_store *s;

	cr_assert_eq(api_store_open_file(dir, &s), 0);
	cr_assert_eq(api_store_generation(s), 0);
	cr_assert_eq(json_array_size(json_object_get(api_store_config(s), "targets")), 0);
	cr_assert(json_is_array(json_object_get(api_store_config(s), "portals")));
	api_store_destroy(s);
}

Test(api_store, commits_count_generations_and_survive_a_restart)
{
	struct api_store *s;
	json_t *c;
	int i;

	cr_assert_eq(api_store_open_file(dir, &s), 0);
	for (i = 1; i <= 3; i++) {
		c = json_pack("{s:[], s:[{s:s}], s:i}", "portals", "targets", "name", "x", "n", i);
		cr_assert_eq(api_store_commit(s, c), 0);
		cr_assert_eq(api_store_generation(s), (uint64_t)i);
	}
	c = api_store_copy(s);
	api_store_destroy(s);
	cr_assert_eq(api_store_open_file(dir, &s), 0);
	cr_assert_eq(api_store_generation(s), 3);
	cr_assert(json_equal(api_store_config(s), c));
	json_decref(c);
	api_store_destroy(s);
}

Test(api_store, a_copy_to_change_leaves_what_readers_see_alone)
{
	struct api_store *s;
	json_t *c;

	cr_assert_eq(api_store_open_file(dir, &s), 0);
	cr_assert_str_eq(api_store_name(s), "file");
	cr_assert_eq(api_store_commit(s, json_pack("{s:[], s:[{s:s}]}", "portals", "targets",
						   "name", "iqn.x")), 0);
	/* A write starts from a copy: until it is committed, GETs still see the stored one. */
	c = api_store_copy(s);
	cr_assert_not_null(c);
	json_array_clear(json_object_get(c, "targets"));
	cr_assert_eq(json_array_size(json_object_get(api_store_config(s), "targets")), 1,
		     "a change to the copy is not the desired configuration yet");
	cr_assert_eq(api_store_generation(s), 1);
	cr_assert_eq(api_store_commit(s, c), 0);
	cr_assert_eq(json_array_size(json_object_get(api_store_config(s), "targets")), 0);
	cr_assert_eq(api_store_generation(s), 2);
	api_store_destroy(s);
}

Test(api_store, the_file_is_private_and_no_temporary_is_left)
{
	struct api_store *s;
	struct stat st;
	char p[128];

	cr_assert_eq(api_store_open_file(dir, &s), 0);
	cr_assert_eq(api_store_commit(s, json_pack("{s:[]}", "portals")), 0);
	snprintf(p, sizeof(p), "%s/config.json", dir);
	cr_assert_eq(stat(p, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0600);
	snprintf(p, sizeof(p), "%s/config.json.tmp", dir);
	cr_assert_neq(access(p, F_OK), 0);
	api_store_destroy(s);
}

Test(api_store, a_half_written_temporary_from_a_crash_is_ignored)
{
	struct api_store *s;

	put_file("config.json", "{\"generation\": 7, \"config\": {\"portals\": []}}");
	/* kill -9 between write and rename leaves this behind. */
	put_file("config.json.tmp", "{\"generation\": 8, \"conf");
	cr_assert_eq(api_store_open_file(dir, &s), 0);
	cr_assert_eq(api_store_generation(s), 7);
	cr_assert_eq(api_store_commit(s, json_pack("{s:[]}", "portals")), 0);
	cr_assert_eq(api_store_generation(s), 8);
	api_store_destroy(s);
}

Test(api_store, a_corrupt_store_refuses_to_open)
{
	struct api_store *s = NULL;

	put_file("config.json", "{\"generation\": 3, \"config\": ");
	cr_assert_eq(api_store_open_file(dir, &s), -EINVAL);
	put_file("config.json", "{\"generation\": 0, \"config\": {}}");
	cr_assert_eq(api_store_open_file(dir, &s), -EINVAL);
}

Test(api_store, a_failed_commit_changes_nothing)
{
	struct api_store *s;
	json_t *before;
	char cmd[160];

	cr_assert_eq(api_store_open_file(dir, &s), 0);
	cr_assert_eq(api_store_commit(s, json_pack("{s:[], s:i}", "portals", "v", 1)), 0);
	before = api_store_copy(s);
	/* The folder disappears under the store: the write fails. */
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
	cr_assert_lt(api_store_commit(s, json_pack("{s:[], s:i}", "portals", "v", 2)), 0);
	cr_assert_eq(api_store_generation(s), 1);
	cr_assert(json_equal(api_store_config(s), before));
	json_decref(before);
	api_store_destroy(s);
	cr_assert_eq(mkdir(dir, 0700), 0);
}

static void never_called(void *ctx, int err)
{
	(void)ctx;
	(void)err;
	cr_assert_fail("a quick backend commits inside the call, without a callback");
}

Test(api_store, the_file_store_commits_at_once_through_the_async_call)
{
	struct api_store *s;

	cr_assert_eq(api_store_open_file(dir, &s), 0);
	cr_assert_eq(api_store_commit_async(s, json_pack("{s:[]}", "portals"), never_called, NULL),
		     0);
	cr_assert_eq(api_store_generation(s), 1);
	api_store_destroy(s);
}
