// SPDX-License-Identifier: MIT
/*
 * The remote backstore's configuration: multipath.conf spellings accepted (words or numbers),
 * bad values named with their key path and allowed range, remote keys refused on other types.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bs.h"
#include "gw_loop.h"
#include "mp.h"
#include "mp_priv.h"

static int parse_bs(const char *text, struct bs_conf *c, struct gw_errlist *errs)
{
	json_error_t je;
	json_t *j = json_loads(text, 0, &je);
	int rc;

	cr_assert_not_null(j, "test JSON: %s", je.text);
	memset(c, 0, sizeof(*c));
	rc = conf_bs_parse(c, j, "targets[0].luns[0].backstore", errs);
	json_decref(j);
	return rc;
}

static bool has_err(const struct gw_errlist *e, const char *field, const char *msg_part)
{
	for (size_t i = 0; i < e->n; i++)
		if (strcmp(e->v[i].field, field) == 0 && strstr(e->v[i].msg, msg_part))
			return true;
	return false;
}

Test(mp_conf, remote_backstore_with_defaults)
{
	struct gw_errlist errs;
	struct bs_conf c;
	int32_t v;

	gw_errlist_init(&errs);
	cr_assert_eq(parse_bs("{ \"type\": \"remote\", \"block_size\": 512, \"paths\": ["
			      "{ \"url\": \"iscsi://10.1.0.2:3260/iqn.2026-11.test:a/1\" },"
			      "{ \"url\": \"iscsi://10.2.0.2/iqn.2026-11.test:a/1\","
			      "  \"chap\": { \"user\": \"gw\", \"secret\": \"0123456789ab\" } } ] }",
			      &c, &errs), 0, "%s", errs.n ? errs.v[0].msg : "");
	cr_assert_eq(c.type, BS_TYPE_REMOTE);
	cr_assert_not_null(c.remote);
	cr_assert_eq(c.remote->npaths, 2);
	cr_assert_str_eq(c.remote->paths[1].chap.user, "gw");
	cr_assert_eq(c.remote->pg_policy, MP_PG_GROUP_BY_PRIO);
	cr_assert_eq(c.remote->selector, MP_SEL_SERVICE_TIME);
	cr_assert_eq(c.remote->polling_interval, 5);
	cr_assert_eq(conf_mp_parse_failback(c.remote->failback, &v), 0);
	cr_assert_eq(v, MP_FAILBACK_IMMEDIATE);
	cr_assert_eq(conf_mp_parse_no_path_retry(c.remote->no_path_retry, &v), 0);
	cr_assert_eq(v, 4);
	conf_bs_free(&c);
	gw_errlist_fini(&errs);
}

Test(mp_conf, multipath_conf_spellings)
{
	struct gw_errlist errs;
	struct bs_conf c;
	int32_t fb, npr;

	gw_errlist_init(&errs);
	cr_assert_eq(parse_bs("{ \"type\": \"remote\", \"path_grouping_policy\": \"failover\","
			      "\"path_selector\": \"round-robin 0\", \"failback\": 15,"
			      "\"no_path_retry\": \"queue\", \"polling_interval\": 2, \"paths\": ["
			      "{ \"url\": \"iscsi://h/iqn.2026-11.test:a/0\" } ] }", &c, &errs), 0);
	cr_assert_eq(c.remote->pg_policy, MP_PG_FAILOVER);
	cr_assert_eq(c.remote->selector, MP_SEL_ROUND_ROBIN);
	cr_assert_eq(conf_mp_parse_failback(c.remote->failback, &fb), 0);
	cr_assert_eq(fb, 15, "a JSON number is seconds");
	cr_assert_eq(conf_mp_parse_no_path_retry(c.remote->no_path_retry, &npr), 0);
	cr_assert_eq(npr, MP_NO_PATH_RETRY_QUEUE);
	conf_bs_free(&c);
	gw_errlist_fini(&errs);
}

Test(mp_conf, errors_name_the_key_and_the_range)
{
	struct gw_errlist errs;
	struct bs_conf c;
	const char *p = "targets[0].luns[0].backstore";
	char f[128];

	gw_errlist_init(&errs);
	cr_assert_eq(parse_bs("{ \"type\": \"remote\", \"failback\": \"sometimes\","
			      "\"no_path_retry\": -3, \"path_selector\": \"fastest\", \"paths\": ["
			      "{ \"url\": \"http://x/y\" }, { \"url\": \"iscsi://h/iqn.x:y/0\","
			      "  \"chap\": { \"user\": \"u\", \"secret\": \"short\" } },"
			      "{ \"url\": \"iscsi://h/iqn.x:y/0\" } ] }", &c, &errs), -EINVAL);
	snprintf(f, sizeof(f), "%s.failback", p);
	cr_assert(has_err(&errs, f, "immediate"), "failback error missing");
	snprintf(f, sizeof(f), "%s.no_path_retry", p);
	cr_assert(has_err(&errs, f, "queue"), "no_path_retry error missing");
	snprintf(f, sizeof(f), "%s.path_selector", p);
	cr_assert(has_err(&errs, f, "service-time"), "selector error missing");
	snprintf(f, sizeof(f), "%s.paths[0].url", p);
	cr_assert(has_err(&errs, f, "iscsi://"), "url error missing");
	snprintf(f, sizeof(f), "%s.paths[1].chap", p);
	cr_assert(has_err(&errs, f, "12 to 256"), "chap secret error missing");
	snprintf(f, sizeof(f), "%s.paths[2]", p);
	cr_assert(has_err(&errs, f, "same as paths[1]"), "duplicate path error missing");
	conf_bs_free(&c);
	gw_errlist_fini(&errs);
}

Test(mp_conf, remote_needs_paths_and_keys_need_remote)
{
	struct gw_errlist errs;
	struct bs_conf c;

	gw_errlist_init(&errs);
	cr_assert_eq(parse_bs("{ \"type\": \"remote\" }", &c, &errs), -EINVAL);
	cr_assert(has_err(&errs, "targets[0].luns[0].backstore.paths", "required"));
	conf_bs_free(&c);
	gw_errlist_fini(&errs);

	gw_errlist_init(&errs);
	cr_assert_eq(parse_bs("{ \"type\": \"ram\", \"size\": \"1M\", \"no_path_retry\": 3 }",
			      &c, &errs), -EINVAL);
	cr_assert(has_err(&errs, "targets[0].luns[0].backstore.no_path_retry", "remote"));
	conf_bs_free(&c);
	gw_errlist_fini(&errs);

	/* An unknown key is reported once, not by both tables. */
	gw_errlist_init(&errs);
	cr_assert_eq(parse_bs("{ \"type\": \"remote\", \"colour\": 1, \"paths\": ["
			      "{ \"url\": \"iscsi://h/iqn.x:y/0\" } ] }", &c, &errs), -EINVAL);
	cr_assert_eq(errs.n, 1, "%zu errors", errs.n);
	conf_bs_free(&c);
	gw_errlist_fini(&errs);
}

Test(mp_conf, existing_types_unchanged)
{
	struct gw_errlist errs;
	struct bs_conf c;

	gw_errlist_init(&errs);
	cr_assert_eq(parse_bs("{ \"type\": \"file\", \"path\": \"/tmp/x.img\", \"size\": \"1G\" }",
			      &c, &errs), 0);
	cr_assert_eq(c.type, BS_TYPE_FILE);
	cr_assert_null(c.remote);
	cr_assert_eq(c.size, 1ull << 30);
	conf_bs_free(&c);
	gw_errlist_fini(&errs);
}

/* A path URL may carry a CHAP password (user%password@host): what the gateway logs, reports
 * in errors and shows in its status must not. */
Test(mp_conf, path_url_passwords_stay_out_of_logs_and_errors)
{
	static const struct { const char *in, *out; } urls[] = {
		{ "iscsi://gw%S3cretPw@10.1.0.2:3260/iqn.2026-11.test:a/1",
		  "iscsi://gw@10.1.0.2:3260/iqn.2026-11.test:a/1" },
		{ "iser://gw%S3cretPw@10.1.0.2/iqn.2026-11.test:a/0",
		  "iser://gw@10.1.0.2/iqn.2026-11.test:a/0" },
		{ "iscsi://gw@10.1.0.2/iqn.2026-11.test:a/1", "iscsi://gw@10.1.0.2/iqn.2026-11.test:a/1" },
		{ "iscsi://10.1.0.2/iqn.2026-11.test:a%1/1", "iscsi://10.1.0.2/iqn.2026-11.test:a%1/1" },
		{ "no scheme", "no scheme" },
	};
	static const struct mp_lun_ops ops;
	struct gw_errlist errs;
	struct gw_loop loop;
	struct bs_conf c;
	struct mp_lun *lun = NULL;
	char *all;
	size_t i;

	for (i = 0; i < sizeof(urls) / sizeof(urls[0]); i++) {
		char *s = mp_url_strip(urls[i].in);

		cr_assert_str_eq(s, urls[i].out);
		free(s);
	}
	/* A URL libiscsi refuses: its own message quotes the URL; ours must not, with the
	 * password. */
	cr_assert_eq(gw_loop_init(&loop), 0);
	gw_errlist_init(&errs);
	cr_assert_eq(parse_bs("{ \"type\": \"remote\", \"block_size\": 512, \"size\": \"1M\", "
			      "\"paths\": [ { \"url\": \"iscsi://gw%S3cretPw@/iqn.2026-11.test:a/x\" } ] }", &c, &errs),
		     0, "%s", errs.n ? errs.v[0].msg : "");
	cr_expect_lt(mp_lun_create(&loop, c.remote, 512, 1 << 20, &ops, NULL, &lun, &errs), 0);
	cr_assert_gt(errs.n, 0, "the bad URL was accepted");
	all = gw_errlist_join(&errs);
	cr_expect_null(strstr(all, "S3cretPw"), "%s", all);
	cr_expect_not_null(strstr(all, "iscsi://gw@/iqn.2026-11.test:a/x"), "%s", all);
	free(all);
	conf_bs_free(&c);
	gw_errlist_fini(&errs);
	gw_loop_fini(&loop);
}
