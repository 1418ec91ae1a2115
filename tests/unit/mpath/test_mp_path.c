// SPDX-License-Identifier: MIT
/*
 * One path as the LUN sees it (mp_path.c), against a fake back end (fake_iscsi.h) and a
 * recording owner (path_fixture.h): the engine a path gets (the LUN's choice, libiscsi for
 * every iser:// path, with libiscsi's iSER limits), a URL that is not one refused with the key
 * it is about, and the path's state as the control socket shows it: where its login went, and
 * after a failure, why and when it tries again. What the path does with answers, its control
 * commands, its engines and its abort policy are the other test_mp_path_*.c files'.
 */
#include "fake_iscsi.h"

/* The path's files, compiled here on the fake clock and the fake libiscsi. */
#include "path_files.h"

#include "path_fixture.h"

TestSuite(mp_path, .init = setup, .fini = teardown);

static int init_path(struct mp_path *q, const char *url, struct gw_errlist *errs)
{
	struct mp_path_conf pc = { .url = (char *)url };

	return mp_path_init(&lun, &rec_owner, q, 1, &pc, errs, "paths[1].url");
}

Test(mp_path, the_engine_is_the_luns_choice_and_iser_is_always_libiscsi)
{
	struct gw_errlist errs = { 0 };
	struct mp_path q;

	cr_expect_eq(path.eng, &mp_engine_libiscsi, "the fixture's LUN asks for libiscsi");
	cr_expect_eq(path.max_xfer, 0u, "no limit of its own over TCP");

	lun.conf.engine = MP_ENGINE_NATIVE;
	cr_assert_eq(init_path(&q, "iscsi://192.0.2.2:3260/iqn.2026-11.org.test:t/0", &errs), 0);
	cr_expect_eq(q.eng, &mp_engine_native);
	cr_expect_not_null(q.eng_priv, "the engine's own state");
	cr_expect_not(q.iser);
	mp_path_fini(&q);
	cr_expect_null(q.eng_priv);

	/* The native initiator is TCP only: an iser:// path of the same LUN is libiscsi's, with
	 * the limits libiscsi's iSER needs. */
	cr_assert_eq(init_path(&q, "iser://192.0.2.2:3260/iqn.2026-11.org.test:t/0", &errs), 0);
	cr_expect_eq(q.eng, &mp_engine_libiscsi);
	cr_expect(q.iser);
	cr_expect_eq(q.max_xfer, MP_ISER_MAX_XFER);
	cr_expect_eq(q.max_inflight, MP_ISER_MAX_INFLIGHT);
	mp_path_fini(&q);
	cr_expect_eq(errs.n, 0u);
	gw_errlist_fini(&errs);
}

Test(mp_path, a_url_that_is_not_one_is_refused_naming_its_key)
{
	struct gw_errlist errs = { 0 };
	struct mp_path q;
	char *msg;

	cr_expect_eq(init_path(&q, "iscsi://192.0.2.2:3260", &errs), -EINVAL);
	msg = gw_errlist_join(&errs);
	cr_assert_not_null(msg);
	cr_expect(strstr(msg, "paths[1].url") != NULL, "%s", msg);
	cr_expect(strstr(msg, "iscsi://192.0.2.2:3260") != NULL, "%s", msg);
	cr_expect_null(q.url, "nothing kept of a refused path");
	free(msg);
	gw_errlist_fini(&errs);
}

static const char *status_str(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return v ? json_string_value(v) : NULL;
}

Test(mp_path, the_state_shows_where_the_login_went)
{
	json_t *o;

	bring_up();
	o = mp_path_status(&path, fake_now);
	cr_assert_not_null(o);
	cr_expect_str_eq(status_str(o, "url"), "iscsi://192.0.2.1:3260/iqn.2026-11.org.test:t/0");
	cr_expect_str_eq(status_str(o, "state"), "active");
	cr_expect_str_eq(status_str(o, "address"), "192.0.2.1:3260");
	cr_expect_null(json_object_get(o, "resolving"), "a numeric portal is not looked up");
	cr_expect_null(json_object_get(o, "next_login_in_ms"));
	json_decref(o);
}

Test(mp_path, the_state_of_a_failed_path_says_why_and_when_it_tries_again)
{
	json_t *o;

	bring_up();
	mp_path_fail(&path, "connection closed by the test");
	pump();
	o = mp_path_status(&path, fake_now);
	cr_assert_not_null(o);
	cr_expect_str_eq(status_str(o, "state"), "down");
	cr_expect_str_eq(status_str(o, "last_error"), "connection closed by the test");
	cr_expect_eq(json_integer_value(json_object_get(o, "next_login_in_ms")),
		     (json_int_t)(path.next_attempt_ms - fake_now));
	cr_expect_str_eq(status_str(o, "address"), "192.0.2.1:3260", "where the last login went");
	json_decref(o);
}
