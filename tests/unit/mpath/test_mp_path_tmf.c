// SPDX-License-Identifier: MIT
/*
 * The abort policy of one path (mp_path_tmf.c; docs/ARCHITECTURE.md, "Aborts before
 * re-drives") against the fake back end (fake_iscsi.h), reporting to the recording owner of
 * path_fixture.h: an I/O that never comes back is aborted and goes back to the LUN, a write
 * only once its abort is confirmed; an abort unanswered or refused escalates to a LUN RESET,
 * then to dropping the session, whose writes are held until the next login (same ISID)
 * reinstates it; and, with a fake engine, a command never sent and an engine without task
 * management. A dropped session's fence alone is test_mp_path_core.c's.
 */
#include "fake_iscsi.h"

/* The path's files, compiled here on the fake clock and the fake libiscsi. */
#include "path_files.h"

#include "path_fixture.h"

TestSuite(mp_path_tmf, .init = setup, .fini = teardown);

Test(mp_path_tmf, io_that_never_returns_is_aborted_and_comes_back)
{
	struct mp_io io;

	bring_up();
	fake_tgt[0].hold = true;
	read_io(&io);
	pump();
	cr_assert_eq(fake_held(0), 1);
	/* Past io_stall_ms the path is probed with a NOP-Out; the NOP-In keeps it up. */
	tick(lun.conf.io_stall_ms);
	cr_expect_eq(path.state, MP_PATH_ACTIVE);
	cr_expect_eq(rec.redrives, 0);
	/* io_timeout: ABORT TASK on the path; confirmed, the I/O goes back to the LUN and the
	 * path, which answered, stays up. */
	tick((uint64_t)lun.conf.io_timeout * 1000);
	cr_expect_eq(fake_tgt[0].aborts, 1);
	cr_expect_eq(path.aborts, 1);
	cr_assert_eq(rec.redrives, 1);
	cr_expect_eq(rec.last, &io);
	cr_expect_eq(path.nr_inflight, 0);
	cr_expect_eq(path.state, MP_PATH_ACTIVE);
	cr_expect_eq(path.tmf, MP_TMF_NONE);
	cr_expect(mp_path_usable(&path));
	cr_expect_eq(fake_tgt[0].lun_resets, 0);
}

Test(mp_path_tmf, a_write_is_not_redriven_before_its_abort_is_confirmed)
{
	struct mp_io io;

	bring_up();
	fake_tgt[0].hold = true;
	write_io(&io);
	pump();
	fake_now += (uint64_t)lun.conf.io_timeout * 1000;
	mp_path_tick(&path, fake_now);
	/* Sent, not answered yet: the write stays where it is and the path takes no new I/O. */
	cr_expect_eq(fake_tgt[0].aborts, 1);
	cr_expect_eq(rec.redrives, 0);
	cr_expect_eq(path.nr_inflight, 1);
	cr_expect_not(mp_path_usable(&path));
	pump();		/* the target answers "function complete" */
	cr_assert_eq(rec.redrives, 1);
	cr_expect_eq(rec.last, &io);
	cr_expect_eq(path.nr_fenced, 0);
	cr_expect(mp_path_usable(&path));
}

Test(mp_path_tmf, an_unanswered_abort_escalates_to_a_lun_reset_then_drops_the_session)
{
	uint64_t bound = mp_tmf_bound_ms(&lun.conf);
	uint32_t isid = path.isid_rnd;
	struct mp_io io;

	bring_up();
	cr_expect_eq(fake_tgt[0].isid_rnd, isid);
	fake_tgt[0].hold = true;
	fake_tgt[0].tmf_hold = true;
	write_io(&io);
	pump();
	tick((uint64_t)lun.conf.io_timeout * 1000);
	cr_expect_eq(fake_tgt[0].aborts, 1);
	tick(bound - 1);
	cr_expect_eq(fake_tgt[0].lun_resets, 0, "not before the bound");
	tick(1);
	cr_expect_eq(fake_tgt[0].lun_resets, 1, "ABORT TASK unanswered: LUN RESET");
	cr_expect_eq(path.aborts_failed, 1);
	cr_expect_eq(path.lun_resets, 1);
	cr_expect_eq(path.state, MP_PATH_ACTIVE);
	cr_expect_eq(rec.redrives, 0);
	/* The reset is not answered either: the session is dropped, the write held. */
	tick(bound);
	cr_expect_eq(path.state, MP_PATH_DOWN);
	cr_expect(strstr(path.last_error, "LUN RESET") != NULL, "%s", path.last_error);
	cr_expect_eq(rec.redrives, 0, "a write of a dropped session waits");
	cr_expect_eq(path.nr_fenced, 1);
	cr_expect_eq(path.fence_waits, 1);
	/* The next login, with the same ISID, reinstates the session: the target has ended the
	 * old one's tasks, the write goes back to the LUN. */
	fake_tgt[0].hold = false;
	fake_tgt[0].tmf_hold = false;
	tick(path.next_attempt_ms - fake_now);
	cr_expect_eq(fake_tgt[0].logins, 2);
	cr_expect_eq(fake_tgt[0].isid_rnd, isid, "the same ISID on every login");
	cr_assert_eq(rec.redrives, 1);
	cr_expect_eq(rec.last, &io);
	cr_expect_eq(path.nr_fenced, 0);
	cr_expect_eq(path.fence_expired, 0);
}

Test(mp_path_tmf, a_refused_abort_escalates_at_once)
{
	struct mp_io io;

	bring_up();
	fake_tgt[0].hold = true;
	fake_tgt[0].tmf_response = 5;	/* task management function not supported */
	write_io(&io);
	pump();
	tick((uint64_t)lun.conf.io_timeout * 1000);
	cr_expect_eq(fake_tgt[0].aborts, 1);
	cr_expect_eq(fake_tgt[0].lun_resets, 1);
	cr_expect_eq(path.state, MP_PATH_DOWN, "the reset refused as well: session dropped");
	cr_expect_eq(rec.redrives, 0);
	cr_expect_eq(path.nr_fenced, 1);
	/* Shutting down, a held write goes back to the LUN at once (which fails it). */
	lun.stopping = true;
	tick(0);
	cr_expect_eq(rec.redrives, 1);
	cr_expect_eq(path.nr_fenced, 0);
}

/* A fake engine: libiscsi's calls (on the fake back end) but for task management, which
 * answers as told: -EALREADY as mp_ini for a command it has not sent yet (ended cancelled at
 * once), -EOPNOTSUPP as an engine that has none (libiscsi's iSER contexts). */
static int fake_tmf_rc;
static unsigned int fake_tmf_calls;

static int fake_eng_abort(struct mp_path *p, struct mp_io *io)
{
	fake_tmf_calls++;
	if (fake_tmf_rc == -EALREADY)
		cr_assert_eq(iscsi_scsi_cancel_task(mp_lis_ctx(p), io->task), 0);
	return fake_tmf_rc;
}

static int fake_eng_lun_reset(struct mp_path *p)
{
	(void)p;
	fake_tmf_calls++;
	return fake_tmf_rc;
}

static struct mp_engine_ops fake_engine;

static void use_fake_engine(int rc)
{
	fake_engine = mp_engine_libiscsi;
	fake_engine.name = "fake";
	fake_engine.abort = fake_eng_abort;
	fake_engine.lun_reset = fake_eng_lun_reset;
	fake_tmf_rc = rc;
	fake_tmf_calls = 0;
	path.eng = &fake_engine;
}

Test(mp_path_tmf, a_command_never_sent_is_aborted_without_asking_the_target)
{
	struct mp_io io;

	bring_up();
	use_fake_engine(-EALREADY);
	fake_tgt[0].hold = true;
	write_io(&io);
	pump();
	tick((uint64_t)lun.conf.io_timeout * 1000);
	cr_expect_eq(fake_tmf_calls, 1);
	cr_assert_eq(rec.redrives, 1, "it cannot run there: it goes elsewhere at once");
	cr_expect_eq(rec.last, &io);
	cr_expect_eq(path.aborts, 0, "nothing was sent");
	cr_expect_eq(path.lun_resets, 0);
	cr_expect_eq(path.state, MP_PATH_ACTIVE);
	cr_expect(mp_path_usable(&path));
}

Test(mp_path_tmf, an_engine_without_task_management_drops_the_session_and_holds_writes)
{
	struct mp_io r, w;

	bring_up();
	use_fake_engine(-EOPNOTSUPP);
	fake_tgt[0].hold = true;
	read_io(&r);
	write_io(&w);
	pump();
	tick((uint64_t)lun.conf.io_timeout * 1000);
	cr_expect_eq(fake_tmf_calls, 3, "two ABORT TASKs, then a LUN RESET, none sent");
	cr_expect_eq(path.aborts, 0);
	cr_expect_eq(path.lun_resets, 0);
	cr_expect_eq(path.state, MP_PATH_DOWN);
	cr_assert_eq(rec.redrives, 1, "the read goes elsewhere");
	cr_expect_eq(rec.last, &r);
	cr_expect_eq(path.nr_fenced, 1, "the write waits for the old session to be gone");
	/* The next login reinstates it (the write lives on this stack: it must be let go). */
	tick(path.next_attempt_ms - fake_now);
	cr_expect_eq(path.nr_fenced, 0);
	cr_expect_eq(rec.redrives, 2);
	cr_expect_eq(rec.last, &w);
}
