// SPDX-License-Identifier: MIT
/*
 * The libiscsi engine of one path (mp_path_libiscsi.c) on a socket (the fake's eventfd),
 * reporting to a recording owner instead of a LUN (path_fixture.h): an idle path watches for
 * input only, and a command the socket does not take waits for EPOLLOUT; a failed path's
 * context is gone before the next login's begins, so a path never holds two sessions.
 */
#include "fake_iscsi.h"

/* The path's files, compiled here on the fake clock and the fake libiscsi. */
#include "path_files.h"

#include "path_fixture.h"

TestSuite(mp_path_libiscsi, .init = setup, .fini = teardown);

static void fd_bring_up(void)
{
	fake_fds = true;
	bring_up();
	cr_assert_geq(mp_lis_of(&path)->w.fd, 0);
	cr_assert_eq(mp_lis_of(&path)->w.events & EPOLLOUT, 0u,
		     "an idle path watches for input only");
}

/* A socket that takes nothing: the path waits for EPOLLOUT, and writes when it comes. */
Test(mp_path_libiscsi, a_full_socket_waits_for_epollout)
{
	struct iscsi_context *c;
	struct mp_io io;
	unsigned int w0;

	fd_bring_up();
	c = mp_lis_ctx(&path);
	c->full = true;
	w0 = c->writes;
	read_io(&io);
	gw_loop_run_once(&loop, 0);
	cr_expect_eq(c->writes, w0, "the socket took nothing");
	cr_expect_neq(mp_lis_of(&path)->w.events & EPOLLOUT, 0u,
		      "the path waits until it can write");
	c->full = false;
	gw_loop_run_once(&loop, 0);
	cr_expect_eq(c->writes, w0 + 1, "written once the socket is writable");
	cr_expect_eq(mp_lis_of(&path)->w.events & EPOLLOUT, 0u, "and back to input only");
	fake_fd_answer(c);
	gw_loop_run_once(&loop, 0);
	cr_expect_eq(rec.completes, 1);
	cr_expect_eq(io.result, 0);
}

/* The teardown defer has not run yet when the next login is due: the login ends it first. */
Test(mp_path_libiscsi, a_new_login_first_ends_the_failed_context)
{
	struct iscsi_context *old;

	bring_up();
	old = mp_lis_ctx(&path);
	mp_path_fail(&path, "connection closed by the test");
	cr_assert_eq(mp_lis_of(&path)->dying, old);
	fake_now = path.next_attempt_ms;
	mp_path_tick(&path, fake_now);
	cr_expect_eq(path.state, MP_PATH_CONNECTING);
	cr_expect_null(mp_lis_of(&path)->dying);
	cr_expect_neq(mp_lis_ctx(&path), NULL);
	cr_expect_eq(fake_nctx_live, 1u, "one context per path");
	pump();
	cr_expect_eq(path.state, MP_PATH_ACTIVE);
	cr_expect_eq(fake_tgt[0].logins, 2);
}
