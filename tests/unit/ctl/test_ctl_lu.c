// SPDX-License-Identifier: MIT
/* Backstores and LUs as ctl opens them (ctl_lu.c): what a lower layer refuses comes back under
 * the configuration's key path, so an operator sees which LUN of which target failed. */
#include <criterion/criterion.h>

#include "ctl.h"
#include "gw_log.h"

static struct gw_loop loop;
/* The backstore's configuration outlives it, as the running configuration does. */
static struct bs_conf bc;

static void setup(void)
{
	gw_log_set_level(GW_LOG_WARN - 1);
	cr_assert_eq(gw_loop_init(&loop), 0);
}

static void teardown(void)
{
	gw_loop_fini(&loop);
	conf_bs_free(&bc);
}

TestSuite(ctl_lu, .init = setup, .fini = teardown);

static int open_json(const char *text, struct gw_errlist *errs, struct bs **bs)
{
	struct gw_errlist perr;
	json_t *j = json_loads(text, 0, NULL);

	cr_assert_not_null(j);
	gw_errlist_init(&perr);
	memset(&bc, 0, sizeof(bc));
	cr_assert_eq(conf_bs_parse(&bc, j, "", &perr), 0);
	json_decref(j);
	gw_errlist_fini(&perr);
	return ctl_bs_open(&loop, &bc, "targets[1].luns[2].backstore", errs, bs);
}

Test(ctl_lu, a_backstore_that_cannot_open_names_its_key_path)
{
	struct gw_errlist errs;
	struct bs *bs = NULL;

	gw_errlist_init(&errs);
	cr_expect_lt(open_json("{ \"type\": \"file\", \"path\": \"/nonexistent/isergw/lun.img\" }",
			       &errs, &bs), 0);
	cr_assert_geq(errs.n, 1);
	cr_expect_eq(strncmp(errs.v[0].field, "targets[1].luns[2].backstore",
			     strlen("targets[1].luns[2].backstore")), 0, "field %s", errs.v[0].field);
	gw_errlist_fini(&errs);
}

Test(ctl_lu, a_backstore_that_opens_is_handed_over_and_closed_on_its_loop)
{
	struct gw_errlist errs;
	struct bs *bs = NULL;

	gw_errlist_init(&errs);
	cr_assert_eq(open_json("{ \"type\": \"ram\", \"size\": \"1M\" }", &errs, &bs), 0);
	cr_expect_eq(errs.n, 0);
	cr_assert_not_null(bs);
	cr_expect_eq(bs->loop, &loop, "owned by the loop it was opened on");
	ctl_bs_close(bs);
	gw_errlist_fini(&errs);
}
