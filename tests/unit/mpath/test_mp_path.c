// SPDX-License-Identifier: MIT
/*
 * One path against a fake back end (fake_iscsi.h), reporting to a recording owner instead of
 * a LUN: login and identity probe, what each answer to an I/O makes the path do (mp_classify's
 * verdicts acted on: complete, pass the sense up, retry, fail the path and re-drive), the
 * checker, an I/O that never comes back, and the reconnect backoff; on a socket (the fake's
 * eventfd), a command the socket does not take waits for EPOLLOUT.
 */
#include "fake_iscsi.h"

#include "../../../gateway/mpath/mp_path.c"

/* The owner: records what the path reports. */
static struct {
	int changed, redrives, retries, completes, buried;
	bool last_redrive_path_failure;
	uint64_t last_retry_at;
	struct mp_io *last;
	int identity_rc;
} rec;

static void rec_changed(struct mp_lun *lun, struct mp_path *p)
{
	(void)lun;
	(void)p;
	rec.changed++;
}

static void rec_redrive(struct mp_lun *lun, struct mp_io *io, bool path_failure)
{
	(void)lun;
	rec.redrives++;
	rec.last_redrive_path_failure = path_failure;
	rec.last = io;
}

static void rec_retry(struct mp_lun *lun, struct mp_io *io, uint64_t at_ms)
{
	(void)lun;
	rec.retries++;
	rec.last_retry_at = at_ms;
	rec.last = io;
}

static void rec_complete(struct mp_lun *lun, struct mp_io *io)
{
	(void)lun;
	rec.completes++;
	rec.last = io;
}

static int rec_check_identity(struct mp_lun *lun, struct mp_path *p, char *msg, size_t len)
{
	(void)lun;
	(void)p;
	if (rec.identity_rc)
		snprintf(msg, len, "not the same device");
	return rec.identity_rc;
}

static void rec_bury(struct mp_lun *lun, struct iscsi_context *ctx)
{
	(void)lun;
	rec.buried++;
	iscsi_destroy_context(ctx);
}

static const struct mp_path_owner_ops rec_owner = {
	.changed = rec_changed,
	.redrive = rec_redrive,
	.retry = rec_retry,
	.complete = rec_complete,
	.check_identity = rec_check_identity,
	.bury = rec_bury,
};

static struct gw_loop loop;
static struct mp_lun lun;
static struct mp_path path;
static uint8_t buf[4096];
static struct iovec iov = { buf, sizeof(buf) };

static void setup(void)
{
	struct mp_path_conf pc = { .url = (char *)"iscsi://192.0.2.1:3260/iqn.2026-11.org.test:t/0" };
	struct gw_errlist errs = { 0 };

	fake_iscsi_reset();
	memset(&rec, 0, sizeof(rec));
	cr_assert_eq(gw_loop_init(&loop), 0);
	memset(&lun, 0, sizeof(lun));
	cr_assert_eq(mp_conf_defaults(&lun.conf), 0);
	lun.conf.engine = MP_ENGINE_LIBISCSI;	/* the fake back end is a fake libiscsi */
	lun.loop = &loop;
	lun.block_size = FAKE_BLOCK;
	lun.rng = 42;
	snprintf(lun.name, sizeof(lun.name), "test");
	cr_assert_eq(mp_path_init(&lun, &rec_owner, &path, 0, &pc, &errs, "paths[0].url"), 0);
}

static void teardown(void)
{
	lun.destroying = true;
	mp_path_fini(&path);
	mp_conf_free(&lun.conf);
	gw_loop_fini(&loop);
}

TestSuite(mp_path, .init = setup, .fini = teardown);

/* Everything pending, until quiet: the fake back end's answers and the loop's defers. */
static void pump(void)
{
	for (int i = 0, quiet = 0; i < 500 && quiet < 3; i++) {
		int n = fake_iscsi_run();

		n += gw_loop_run_once(&loop, 0);
		quiet = n ? 0 : quiet + 1;
	}
}

static void tick(uint64_t ms)
{
	fake_now += ms;
	mp_path_tick(&path, fake_now);
	pump();
}

static void bring_up(void)
{
	tick(0);
	cr_assert_eq(path.state, MP_PATH_ACTIVE, "path is %s: %s",
		     mp_path_state_name(path.state), path.last_error);
}

static void send_io(struct mp_io *io, enum mp_op op)
{
	memset(io, 0, sizeof(*io));
	io->op = op;
	io->len = sizeof(buf);
	io->iov = &iov;
	io->iovcnt = 1;
	io->lun = &lun;
	io->start_ms = fake_now;
	cr_assert_eq(mp_path_send(&path, io), 0);
}

static void read_io(struct mp_io *io)
{
	send_io(io, MP_READ);
}

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

static void write_io(struct mp_io *io)
{
	send_io(io, MP_WRITE);
}

/* The abort policy (mp_priv.h). */

Test(mp_path, io_that_never_returns_is_aborted_and_comes_back)
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

Test(mp_path, a_write_is_not_redriven_before_its_abort_is_confirmed)
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

Test(mp_path, an_unanswered_abort_escalates_to_a_lun_reset_then_drops_the_session)
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

Test(mp_path, a_refused_abort_escalates_at_once)
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

Test(mp_path, a_dropped_session_sends_reads_elsewhere_at_once_and_holds_writes)
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

/* A fake engine: libiscsi's calls (on the fake back end) but for task management, which
 * answers as told: -EALREADY as mp_ini for a command it has not sent yet (ended cancelled at
 * once), -EOPNOTSUPP as an engine that has none (libiscsi's iSER contexts). */
static int fake_tmf_rc;
static unsigned int fake_tmf_calls;

static int fake_eng_abort(struct mp_path *p, struct mp_io *io)
{
	fake_tmf_calls++;
	if (fake_tmf_rc == -EALREADY)
		cr_assert_eq(iscsi_scsi_cancel_task(p->ctx, io->task), 0);
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

Test(mp_path, a_command_never_sent_is_aborted_without_asking_the_target)
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

Test(mp_path, an_engine_without_task_management_drops_the_session_and_holds_writes)
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
