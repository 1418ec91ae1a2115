// SPDX-License-Identifier: MIT
/*
 * The core of one path (mp_path_core.c) against a fake back end (fake_iscsi.h), reporting to a
 * recording owner instead of a LUN (path_fixture.h): what each answer to an I/O makes the path
 * do (mp_classify's verdicts acted on: complete, pass the sense up, retry, fail the path and
 * re-drive), the reconnect backoff of a failed path, and the fence: a dropped session's reads
 * go elsewhere at once, its writes only once it is known to be gone or the bound ran out.
 */
#include "fake_iscsi.h"

/* The path's files, compiled here on the fake clock and the fake libiscsi. */
#include "path_files.h"

#include "path_fixture.h"

TestSuite(mp_path_core, .init = setup, .fini = teardown);

Test(mp_path_core, good_answer_completes_with_the_data)
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

Test(mp_path_core, media_error_goes_to_the_host_as_is)
{
	struct verdict_case vc = { "MEDIUM ERROR", { SCSI_STATUS_CHECK_CONDITION, 0x3, 0x11, 0 },
				   1, 0, 0, false, -EREMOTEIO };

	check_answer(&vc);
	cr_expect_eq(rec.last->status, SCSI_STATUS_CHECK_CONDITION);
	cr_expect_eq(rec.last->sense[2], 0x3);
	cr_expect_eq(rec.last->sense[12], 0x11);
}

Test(mp_path_core, reservation_conflict_goes_to_the_host)
{
	struct verdict_case vc = { "RESERVATION CONFLICT", { .status = SCSI_STATUS_RESERVATION_CONFLICT },
				   1, 0, 0, false, -EREMOTEIO };

	check_answer(&vc);
	cr_expect_eq(rec.last->status, SCSI_STATUS_RESERVATION_CONFLICT);
}

Test(mp_path_core, unit_attention_is_retried_later_on_the_same_terms)
{
	struct verdict_case vc = { "UNIT ATTENTION", { SCSI_STATUS_CHECK_CONDITION, 0x6, 0x29, 0 },
				   0, 1, 0, false, 0 };

	check_answer(&vc);
	cr_expect_eq(rec.last_retry_at, fake_now, "a unit attention is reported once: at once");
	cr_expect_eq(rec.last->retries, 1);
}

Test(mp_path_core, busy_is_retried)
{
	struct verdict_case vc = { "BUSY", { .status = SCSI_STATUS_BUSY }, 0, 1, 0, false, 0 };

	check_answer(&vc);
	cr_expect_eq(rec.last_retry_at, fake_now + 20, "BUSY waits before the next try");
}

Test(mp_path_core, port_unavailable_fails_the_path_and_redrives)
{
	struct verdict_case vc = { "02/04/0C", { SCSI_STATUS_CHECK_CONDITION, 0x2, 0x04, 0x0c },
				   0, 0, 1, true, 0 };

	check_answer(&vc);
	cr_expect_eq(path.failovers, 1);
	cr_expect(strstr(path.last_error, "cannot reach the LU") != NULL, "%s", path.last_error);
}

Test(mp_path_core, transport_error_fails_the_path_and_redrives)
{
	struct verdict_case vc = { "transport error", { .status = SCSI_STATUS_ERROR }, 0, 0, 1, true, 0 };

	check_answer(&vc);
	cr_expect_eq(path.errors, 1);
}

Test(mp_path_core, retries_stop_when_io_timeout_is_spent)
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

Test(mp_path_core, failed_logins_back_off_exponentially_with_jitter)
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

Test(mp_path_core, a_dropped_session_sends_reads_elsewhere_at_once_and_holds_writes)
{
	struct mp_io r, w;

	bring_up();
	fake_tgt[0].hold = true;
	read_io(&r);
	write_io(&w);
	pump();
	fake_tgt[0].down = true;	/* and it stays unreachable */
	mp_path_fail(&path, "connection closed by the test");
	pump();
	cr_assert_eq(rec.redrives, 1, "the read goes elsewhere at once");
	cr_expect_eq(rec.last, &r);
	cr_expect_eq(path.nr_fenced, 1);
	tick(mp_fence_bound_ms(&lun.conf) - 1);
	cr_expect_eq(rec.redrives, 1, "the write waits for the old session to be gone");
	/* Never reinstated: after the bound it goes anyway, counted. */
	tick(1);
	cr_expect_eq(rec.redrives, 2);
	cr_expect_eq(rec.last, &w);
	cr_expect_eq(path.fence_expired, 1);
}
