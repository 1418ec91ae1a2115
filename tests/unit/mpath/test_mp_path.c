// SPDX-License-Identifier: MIT
/*
 * One path against a fake back end (fake_iscsi.h), reporting to a recording owner instead of
 * a LUN: login and identity probe, what each answer to an I/O makes the path do (mp_classify's
 * verdicts acted on: complete, pass the sense up, retry, fail the path and re-drive), the
 * checker and the reconnect backoff; on a socket (the fake's eventfd), a command the socket
 * does not take waits for EPOLLOUT. An I/O that never comes back (the abort policy and the
 * fence) is test_mp_path_tmf.c's; the owner and the steps are path_fixture.h.
 */
#include "fake_iscsi.h"

/* The path's files, compiled here on the fake clock and the fake libiscsi. */
#include "../../../gateway/mpath/mp_path.c"
#include "../../../gateway/mpath/mp_path_native.c"
#include "../../../gateway/mpath/mp_path_tmf.c"

#include "path_fixture.h"

TestSuite(mp_path, .init = setup, .fini = teardown);

Test(mp_path, logs_in_and_learns_the_device)
{
	bring_up();
	cr_expect_str_eq(path.ident, "naa.60000000000000000000000000000001");
	cr_expect_eq(path.size, (uint64_t)FAKE_BLOCKS * FAKE_BLOCK);
	cr_expect_eq(path.block_size, FAKE_BLOCK);
	cr_expect_eq(fake_tgt[0].logins, 1);
	cr_expect_geq(rec.changed, 1, "the owner hears that the path is up");
	cr_expect_not(path.alua, "no ALUA on this back end");
}

Test(mp_path, alua_state_sets_priority_and_standby)
{
	fake_tgt[0].alua_state = 0x1;	/* active/non-optimized */
	bring_up();
	cr_expect(path.alua);
	cr_expect_eq(path.prio, MP_PRIO_ANO);
	cr_expect_eq(path.alua_tpg, 1);

	/* The checker reads the group's state again: standby takes the path out of I/O. */
	fake_tgt[0].alua_state = 0x2;
	rec.changed = 0;
	tick((uint64_t)lun.conf.polling_interval * 1000);
	cr_expect_eq(path.state, MP_PATH_STANDBY);
	cr_expect_geq(rec.changed, 1);
	cr_expect_not(mp_path_usable(&path));
}

Test(mp_path, another_device_is_refused)
{
	rec.identity_rc = -EMEDIUMTYPE;
	tick(0);
	cr_expect_eq(path.state, MP_PATH_REFUSED);
	cr_expect_not(mp_path_usable(&path));
	cr_expect_eq(path.next_attempt_ms, fake_now + lun.conf.reconnect_max_ms,
		     "retried slowly, in case the storage is being reconfigured");
}

Test(mp_path, a_block_size_mismatch_is_refused)
{
	fake_tgt[0].block_size = 4096;
	tick(0);
	cr_expect_eq(path.state, MP_PATH_REFUSED);
	cr_expect(strstr(path.last_error, "block size") != NULL, "%s", path.last_error);
}

Test(mp_path, good_answer_completes_with_the_data)
{
	struct mp_io io;

	bring_up();
	read_io(&io);
	pump();
	cr_assert_eq(rec.completes, 1);
	cr_expect_eq(rec.last, &io);
	cr_expect_eq(io.result, 0);
	cr_expect_eq(buf[0], 'A');
	cr_expect_eq(buf[sizeof(buf) - 1], 'A');
	cr_expect_eq(path.nr_inflight, 0);
	cr_expect_eq(path.ios, 1);
}

/* What each kind of answer makes the path do. */
struct verdict_case {
	const char *what;
	struct fake_answer a;
	int completes, retries, redrives;
	bool path_fails;
	int result;
};

static void check_answer(const struct verdict_case *vc)
{
	struct mp_io io;

	bring_up();
	fake_tgt[0].answer = vc->a;
	read_io(&io);
	pump();
	cr_expect_eq(rec.completes, vc->completes, "%s: completes", vc->what);
	cr_expect_eq(rec.retries, vc->retries, "%s: retries", vc->what);
	cr_expect_eq(rec.redrives, vc->redrives, "%s: re-drives", vc->what);
	cr_expect_eq(path.state == MP_PATH_DOWN, vc->path_fails, "%s: path %s", vc->what,
		     mp_path_state_name(path.state));
	if (vc->completes)
		cr_expect_eq(io.result, vc->result, "%s: result", vc->what);
	if (vc->redrives)
		cr_expect(rec.last_redrive_path_failure, "%s: counted as a failover", vc->what);
}

Test(mp_path, media_error_goes_to_the_host_as_is)
{
	struct verdict_case vc = { "MEDIUM ERROR", { SCSI_STATUS_CHECK_CONDITION, 0x3, 0x11, 0 },
				   1, 0, 0, false, -EREMOTEIO };

	check_answer(&vc);
	cr_expect_eq(rec.last->status, SCSI_STATUS_CHECK_CONDITION);
	cr_expect_eq(rec.last->sense[2], 0x3);
	cr_expect_eq(rec.last->sense[12], 0x11);
}

Test(mp_path, reservation_conflict_goes_to_the_host)
{
	struct verdict_case vc = { "RESERVATION CONFLICT", { .status = SCSI_STATUS_RESERVATION_CONFLICT },
				   1, 0, 0, false, -EREMOTEIO };

	check_answer(&vc);
	cr_expect_eq(rec.last->status, SCSI_STATUS_RESERVATION_CONFLICT);
}

Test(mp_path, unit_attention_is_retried_later_on_the_same_terms)
{
	struct verdict_case vc = { "UNIT ATTENTION", { SCSI_STATUS_CHECK_CONDITION, 0x6, 0x29, 0 },
				   0, 1, 0, false, 0 };

	check_answer(&vc);
	cr_expect_eq(rec.last_retry_at, fake_now, "a unit attention is reported once: at once");
	cr_expect_eq(rec.last->retries, 1);
}

Test(mp_path, busy_is_retried)
{
	struct verdict_case vc = { "BUSY", { .status = SCSI_STATUS_BUSY }, 0, 1, 0, false, 0 };

	check_answer(&vc);
	cr_expect_eq(rec.last_retry_at, fake_now + 20, "BUSY waits before the next try");
}

Test(mp_path, port_unavailable_fails_the_path_and_redrives)
{
	struct verdict_case vc = { "02/04/0C", { SCSI_STATUS_CHECK_CONDITION, 0x2, 0x04, 0x0c },
				   0, 0, 1, true, 0 };

	check_answer(&vc);
	cr_expect_eq(path.failovers, 1);
	cr_expect(strstr(path.last_error, "cannot reach the LU") != NULL, "%s", path.last_error);
}

Test(mp_path, transport_error_fails_the_path_and_redrives)
{
	struct verdict_case vc = { "transport error", { .status = SCSI_STATUS_ERROR }, 0, 0, 1, true, 0 };

	check_answer(&vc);
	cr_expect_eq(path.errors, 1);
}

Test(mp_path, retries_stop_when_io_timeout_is_spent)
{
	struct mp_io io;

	bring_up();
	fake_tgt[0].answer = (struct fake_answer){ .status = SCSI_STATUS_BUSY };
	read_io(&io);
	io.start_ms = fake_now - (uint64_t)lun.conf.io_timeout * 1000;
	pump();
	cr_expect_eq(rec.retries, 0);
	cr_assert_eq(rec.completes, 1, "the host sees the last answer");
	cr_expect_eq(io.result, -EREMOTEIO);
	cr_expect_eq(io.status, SCSI_STATUS_BUSY);
}

Test(mp_path, checker_fails_a_dead_path)
{
	bring_up();
	fake_tgt[0].down = true;
	tick((uint64_t)lun.conf.polling_interval * 1000);
	cr_expect_eq(path.state, MP_PATH_DOWN);
	cr_expect(strstr(path.last_error, "path checker") != NULL, "%s", path.last_error);
}

Test(mp_path, failed_logins_back_off_exponentially_with_jitter)
{
	uint64_t base = lun.conf.reconnect_delay_ms, cap = lun.conf.reconnect_max_ms;

	fake_tgt[0].down = true;
	for (uint32_t n = 0; n < 12; n++) {
		uint64_t d = base << n < cap ? base << n : cap, wait;

		tick(0);
		cr_assert_eq(path.state, MP_PATH_DOWN, "login %u", n);
		wait = path.next_attempt_ms - fake_now;
		cr_expect(wait >= d / 2 && wait <= d, "login %u: next in %llu ms, expected %llu/2..%llu",
			  n, (unsigned long long)wait, (unsigned long long)d, (unsigned long long)d);
		/* Not before its time. */
		tick(wait - 1);
		cr_expect_eq(path.logins, n + 1, "login %u came early", n);
		fake_now += 1;
	}
	cr_expect_eq(fake_tgt[0].logins, 0);

	/* Back: it logs in; a path that was working retries quickly after its next failure. */
	fake_tgt[0].down = false;
	tick(0);
	cr_assert_eq(path.state, MP_PATH_ACTIVE);
	mp_path_fail(&path, "test");
	cr_expect_leq(path.next_attempt_ms - fake_now, base);
}

/* On a socket (the fake's eventfd). */

static void fd_bring_up(void)
{
	fake_fds = true;
	bring_up();
	cr_assert_geq(path.w.fd, 0);
	cr_assert_eq(path.w.events & EPOLLOUT, 0u, "an idle path watches for input only");
}

/* A socket that takes nothing: the path waits for EPOLLOUT, and writes when it comes. */
Test(mp_path, a_full_socket_waits_for_epollout)
{
	struct iscsi_context *c;
	struct mp_io io;
	unsigned int w0;

	fd_bring_up();
	c = path.ctx;
	c->full = true;
	w0 = c->writes;
	read_io(&io);
	gw_loop_run_once(&loop, 0);
	cr_expect_eq(c->writes, w0, "the socket took nothing");
	cr_expect_neq(path.w.events & EPOLLOUT, 0u, "the path waits until it can write");
	c->full = false;
	gw_loop_run_once(&loop, 0);
	cr_expect_eq(c->writes, w0 + 1, "written once the socket is writable");
	cr_expect_eq(path.w.events & EPOLLOUT, 0u, "and back to input only");
	fake_fd_answer(c);
	gw_loop_run_once(&loop, 0);
	cr_expect_eq(rec.completes, 1);
	cr_expect_eq(io.result, 0);
}
