// SPDX-License-Identifier: MIT
/*
 * A remote LUN over two paths to a fake back end (fake_iscsi.h): what a host behind the
 * gateway would see. An I/O survives the failure of the path it was on; I/O goes to the
 * preferred path group and comes back to it by the failback policy; with no path left, I/O
 * waits for no_path_retry polling intervals and then fails with NOT READY 04/0C, or goes
 * through when a path returns in time; shutdown fails what still waits. On sockets (the
 * fake's eventfds): a read whose connection fails fails over without an error.
 */
#include "fake_iscsi.h"

#include "path_files.h"
#include "../../../gateway/mpath/mp_lun.c"

#define PORT_A 0	/* 192.0.2.1: active/optimized */
#define PORT_B 1	/* 192.0.2.2: active/non-optimized */

static struct gw_loop loop;
static struct mp_lun *lun;
static struct mp_path_conf paths[2] = {
	{ .url = (char *)"iscsi://192.0.2.1:3260/iqn.2026-11.org.test:t/0" },
	{ .url = (char *)"iscsi://192.0.2.2:3260/iqn.2026-11.org.test:t/0" },
};

struct host_io {
	struct mp_io io;
	uint8_t buf[4096];
	struct iovec iov;
	int done;
};

static void host_done(struct mp_io *io)
{
	struct host_io *h = gw_container_of(io, struct host_io, io);

	h->done++;
}

static void pump(void)
{
	for (int i = 0, quiet = 0; i < 1000 && quiet < 3; i++) {
		int n = fake_iscsi_run();

		n += gw_loop_run_once(&loop, 0);
		quiet = n ? 0 : quiet + 1;
	}
}

/* Time passes by steps of the LUN's tick, as it does in the gateway. */
static void wait_ms(uint64_t ms)
{
	uint64_t end = fake_now + ms;

	do {
		fake_now = fake_now + MP_TICK_MS < end ? fake_now + MP_TICK_MS : end;
		mp_lun_tick_fn(&lun->tick);
		pump();
	} while (fake_now < end);
}

/* Paths on sockets (fake_fds) for the LUN open_lun opens next. */
static bool open_with_fds;

static void open_lun_caw(const char *failback, const char *no_path_retry, uint8_t caw)
{
	struct mp_conf conf;
	struct gw_errlist errs = { 0 };

	fake_iscsi_reset();
	fake_fds = open_with_fds;
	fake_tgt[PORT_A].alua_state = 0x0;
	fake_tgt[PORT_B].alua_state = 0x1;
	fake_tgt[PORT_A].caw_blocks = caw;
	fake_tgt[PORT_B].caw_blocks = caw;
	cr_assert_eq(gw_loop_init(&loop), 0);
	cr_assert_eq(conf_mp_defaults(&conf), 0);
	conf.engine = MP_ENGINE_LIBISCSI;	/* the fake back end is a fake libiscsi */
	free(conf.failback);
	free(conf.no_path_retry);
	conf.failback = strdup(failback);
	conf.no_path_retry = strdup(no_path_retry);
	conf.polling_interval = 1;
	conf.paths = paths;
	conf.npaths = 2;
	cr_assert_eq(mp_lun_create(&loop, &conf, FAKE_BLOCK, 0, NULL, NULL, &lun, &errs), 0);
	conf.paths = NULL;
	conf.npaths = 0;
	conf_mp_free(&conf);
	/* Ticks come from wait_ms, on the fake clock. */
	gw_timer_disarm(&lun->tick);
	wait_ms(MP_TICK_MS);
	cr_assert_eq(mp_lun_state(lun), MP_LUN_READY);
	cr_assert_eq(lun->paths[PORT_A].state, MP_PATH_ACTIVE);
	cr_assert_eq(lun->paths[PORT_B].state, MP_PATH_ACTIVE);
}

static void open_lun(const char *failback, const char *no_path_retry)
{
	open_lun_caw(failback, no_path_retry, 0);
}

static void teardown(void)
{
	if (lun)
		mp_lun_destroy(lun);
	lun = NULL;
	gw_loop_fini(&loop);
}

static void submit_read(struct host_io *h)
{
	memset(h, 0, sizeof(*h));
	h->iov.iov_base = h->buf;
	h->iov.iov_len = sizeof(h->buf);
	h->io.op = MP_READ;
	h->io.len = sizeof(h->buf);
	h->io.iov = &h->iov;
	h->io.iovcnt = 1;
	h->io.done = host_done;
	cr_assert_eq(mp_lun_submit(lun, &h->io), 0);
	pump();
}

/* A read that completes OK, and the port that served it ('A' + port). */
static char read_ok(void)
{
	struct host_io h;

	submit_read(&h);
	cr_assert_eq(h.done, 1, "the read did not complete");
	cr_assert_eq(h.io.result, 0, "the read failed: status %#x sense %x/%02x/%02x",
		     h.io.status, h.io.sense[2] & 0xf, h.io.sense[12], h.io.sense[13]);
	return (char)h.buf[0];
}

static void port_down(int port)
{
	fake_tgt[port].down = true;
	mp_path_fail(&lun->paths[port], "test: port %d down", port);
	pump();
}

static void expect_nopath_sense(const struct host_io *h)
{
	cr_expect_eq(h->io.result, -EREMOTEIO);
	cr_expect_eq(h->io.status, SCSI_STATUS_CHECK_CONDITION);
	cr_expect_eq(h->io.sense[2] & 0xf, MP_NOPATH_KEY);
	cr_expect_eq(h->io.sense[12], MP_NOPATH_ASC);
	cr_expect_eq(h->io.sense[13], MP_NOPATH_ASCQ);
}

TestSuite(mp_lun, .fini = teardown);

Test(mp_lun, io_goes_to_the_optimized_group)
{
	open_lun("immediate", "4");
	for (int i = 0; i < 4; i++)
		cr_expect_eq(read_ok(), 'A');
	cr_expect_eq(fake_tgt[PORT_B].reads, 0);
}

Test(mp_lun, io_in_flight_completes_after_its_path_fails)
{
	struct host_io h;

	open_lun("immediate", "4");
	fake_tgt[PORT_A].hold = true;
	submit_read(&h);
	cr_assert_eq(fake_held(PORT_A), 1);
	cr_assert_eq(h.done, 0);
	/* The connection dies under the command. */
	fake_tgt[PORT_A].down = true;
	fake_answer_held(PORT_A, (struct fake_answer){ .status = SCSI_STATUS_ERROR });
	pump();
	cr_assert_eq(h.done, 1);
	cr_expect_eq(h.io.result, 0, "the host never sees the path failure");
	cr_expect_eq(h.buf[0], 'B', "re-driven on the other port");
	cr_expect_eq(lun->paths[PORT_A].state, MP_PATH_DOWN);
	cr_expect_eq(lun->failovers, 1);
	cr_expect_eq(mp_lun_state(lun), MP_LUN_READY);
	cr_expect_eq(read_ok(), 'B', "new I/O goes to the group left");
}

Test(mp_lun, failback_immediate_returns_to_the_preferred_group)
{
	uint64_t switches;

	open_lun("immediate", "4");
	switches = lun->group_switches;
	port_down(PORT_A);
	cr_expect_eq(read_ok(), 'B');
	fake_tgt[PORT_A].down = false;
	/* The next login waits out the reconnect backoff. */
	wait_ms(lun->conf.reconnect_delay_ms + MP_TICK_MS);
	cr_assert_eq(lun->paths[PORT_A].state, MP_PATH_ACTIVE);
	cr_expect_eq(read_ok(), 'A');
	cr_expect_eq(lun->group_switches, switches + 2, "failover, then failback");
}

Test(mp_lun, failback_manual_stays_on_the_group_in_use)
{
	open_lun("manual", "4");
	port_down(PORT_A);
	fake_tgt[PORT_A].down = false;
	wait_ms(lun->conf.reconnect_delay_ms + 10000);
	cr_assert_eq(lun->paths[PORT_A].state, MP_PATH_ACTIVE);
	cr_expect_eq(read_ok(), 'B');
}

Test(mp_lun, failback_after_n_seconds_waits_that_long)
{
	uint64_t back;

	open_lun("3", "4");
	port_down(PORT_A);
	fake_tgt[PORT_A].down = false;
	wait_ms(lun->conf.reconnect_delay_ms + MP_TICK_MS);
	cr_assert_eq(lun->paths[PORT_A].state, MP_PATH_ACTIVE);
	back = lun->failback_since_ms;
	cr_assert_neq(back, 0, "the failback delay runs from the preferred group's return");
	cr_expect_eq(read_ok(), 'B', "the preferred group is back but not for 3 s yet");
	wait_ms(back + 2900 - fake_now);
	cr_expect_eq(read_ok(), 'B');
	wait_ms(200);
	cr_expect_eq(read_ok(), 'A');
}

Test(mp_lun, no_path_queues_for_no_path_retry_intervals_then_fails)
{
	struct host_io h, later;

	open_lun("immediate", "3");	/* 3 polling intervals of 1 s */
	port_down(PORT_A);
	port_down(PORT_B);
	cr_expect_eq(mp_lun_state(lun), MP_LUN_QUEUEING);
	submit_read(&h);
	wait_ms(2900);
	cr_expect_eq(h.done, 0, "still queued within no_path_retry");
	wait_ms(200);
	cr_assert_eq(h.done, 1, "failed once no_path_retry ran out");
	expect_nopath_sense(&h);
	cr_expect_eq(mp_lun_state(lun), MP_LUN_FAILING);
	cr_expect_eq(lun->nopath_failed, 1);
	/* From then on, I/O fails at once. */
	submit_read(&later);
	cr_expect_eq(later.done, 1);
	expect_nopath_sense(&later);
}

Test(mp_lun, queued_io_goes_through_when_a_path_returns_in_time)
{
	struct host_io h[3];

	/* 20 s: longer than port B's reconnect backoff after it returns at 1.5 s (at most
	 * 1 + 2 + 4 s of attempts with jitter), so it is back within the window. */
	open_lun("immediate", "20");
	port_down(PORT_A);
	port_down(PORT_B);
	for (int i = 0; i < 3; i++)
		submit_read(&h[i]);
	wait_ms(1500);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(h[i].done, 0);
	fake_tgt[PORT_B].down = false;
	wait_ms(10000);
	cr_expect_eq(mp_lun_state(lun), MP_LUN_READY);
	for (int i = 0; i < 3; i++) {
		cr_expect_eq(h[i].done, 1, "queued read %d drained", i);
		cr_expect_eq(h[i].io.result, 0);
		cr_expect_eq(h[i].buf[0], 'B');
	}
	cr_expect_eq(lun->nopath_failed, 0);
}

Test(mp_lun, no_path_retry_fail_fails_at_once)
{
	struct host_io h;

	open_lun("immediate", "fail");
	port_down(PORT_A);
	port_down(PORT_B);
	cr_expect_eq(mp_lun_state(lun), MP_LUN_FAILING);
	submit_read(&h);
	cr_assert_eq(h.done, 1);
	expect_nopath_sense(&h);
}

Test(mp_lun, no_path_retry_queue_waits_until_shutdown)
{
	struct host_io h;

	open_lun("immediate", "queue");
	port_down(PORT_A);
	port_down(PORT_B);
	submit_read(&h);
	wait_ms(60000);
	cr_expect_eq(h.done, 0, "queue: no time limit");
	mp_lun_shutdown(lun);
	pump();
	cr_assert_eq(h.done, 1, "shutdown fails what waits");
	expect_nopath_sense(&h);
}

Test(mp_lun, unit_attention_is_retried_and_the_host_sees_success)
{
	struct host_io h;

	open_lun("immediate", "4");
	fake_tgt[PORT_A].hold = true;
	submit_read(&h);
	fake_answer_held(PORT_A, (struct fake_answer){ .status = SCSI_STATUS_CHECK_CONDITION,
						       .key = 0x6, .asc = 0x29 });
	fake_tgt[PORT_A].hold = false;
	pump();
	cr_assert_eq(h.done, 1);
	cr_expect_eq(h.io.result, 0);
	cr_expect_eq(h.io.retries, 1);
	cr_expect_eq(lun->paths[PORT_A].state, MP_PATH_ACTIVE, "a retry is no path failure");
	cr_expect_eq(lun->failovers, 0);
}

Test(mp_lun, an_io_failing_every_path_in_turn_ends)
{
	struct host_io h;

	open_lun("immediate", "queue");
	/* Both ports answer "unavailable" and come back at once: the I/O must not ping-pong
	 * between them forever. */
	fake_tgt[PORT_A].answer = (struct fake_answer){ .status = SCSI_STATUS_CHECK_CONDITION,
							.key = 0x2, .asc = 0x04, .ascq = 0x0c };
	fake_tgt[PORT_B].answer = fake_tgt[PORT_A].answer;
	submit_read(&h);
	for (int i = 0; i < 40 && !h.done; i++)
		wait_ms(lun->conf.reconnect_max_ms);
	cr_assert_eq(h.done, 1);
	expect_nopath_sense(&h);
	cr_expect_gt(h.io.redrives, 2);
}

/* COMPARE AND WRITE on the back end (issue 12, "Coherent atomics") */

static void submit_caw(struct host_io *h)
{
	memset(h, 0, sizeof(*h));
	memset(h->buf, 0x11, FAKE_BLOCK);
	memset(h->buf + FAKE_BLOCK, 0x22, FAKE_BLOCK);
	h->iov.iov_base = h->buf;
	h->iov.iov_len = 2 * FAKE_BLOCK;
	h->io.op = MP_COMPARE_AND_WRITE;
	h->io.offset = 8 * FAKE_BLOCK;
	h->io.len = FAKE_BLOCK;
	h->io.iov = &h->iov;
	h->io.iovcnt = 1;
	h->io.done = host_done;
	cr_assert_eq(mp_lun_submit(lun, &h->io), 0);
	pump();
}

Test(mp_lun, caw_is_refused_when_the_back_end_has_none)
{
	struct mp_lun_caps caps;
	struct host_io h = { 0 };

	open_lun("immediate", "fail");
	mp_lun_caps(lun, &caps);
	cr_assert(caps.known);
	cr_assert_eq(caps.caw_blocks, 0, "no VPD B0: no COMPARE AND WRITE");
	cr_assert(!caps.vpd_b2);
	h.io.op = MP_COMPARE_AND_WRITE;
	h.io.len = FAKE_BLOCK;
	h.io.iov = &h.iov;
	h.io.done = host_done;
	cr_assert_eq(mp_lun_submit(lun, &h.io), -EOPNOTSUPP);
	cr_assert_eq(h.done, 0, "refused at submit: never called back");
}

Test(mp_lun, caw_goes_to_the_back_end_and_its_miscompare_comes_back_as_it_was)
{
	struct mp_lun_caps caps;
	struct host_io h;

	open_lun_caw("immediate", "fail", 8);
	mp_lun_caps(lun, &caps);
	cr_assert_eq(caps.caw_blocks, 8, "VPD B0's MAXIMUM COMPARE AND WRITE LENGTH");
	submit_caw(&h);
	cr_assert_eq(h.done, 1);
	cr_assert_eq(h.io.result, 0);
	cr_assert_eq(fake_tgt[PORT_A].caws, 1, "one COMPARE AND WRITE on the optimized port");
	/* The back end's MISCOMPARE with the offset in INFORMATION, byte for byte. */
	fake_tgt[PORT_A].answer = (struct fake_answer){ SCSI_STATUS_CHECK_CONDITION, 0x0e, 0x1d,
							 0x00 };
	fake_tgt[PORT_A].sense_info = 300;
	submit_caw(&h);
	cr_assert_eq(h.done, 1);
	cr_assert_eq(h.io.result, -EREMOTEIO);
	cr_assert_eq(h.io.status, SCSI_STATUS_CHECK_CONDITION);
	cr_assert_eq(h.io.sense[0], 0xf0, "VALID and fixed format kept");
	cr_assert_eq(h.io.sense[2] & 0x0f, 0x0e);
	cr_assert_eq(h.io.sense[12], 0x1d);
	cr_assert_eq(((uint32_t)h.io.sense[3] << 24 | (uint32_t)h.io.sense[4] << 16 |
		      (uint32_t)h.io.sense[5] << 8 | h.io.sense[6]), 300,
		     "INFORMATION: the offset of the first differing byte");
	cr_assert_eq(fake_tgt[PORT_A].caws + fake_tgt[PORT_B].caws, 2, "never sent twice");
}

Test(mp_lun, caw_in_flight_when_its_path_dies_is_not_sent_again)
{
	struct host_io h;

	open_lun_caw("immediate", "fail", 8);
	fake_tgt[PORT_A].hold = true;
	submit_caw(&h);
	cr_assert_eq(fake_held(PORT_A), 1, "the COMPARE AND WRITE is on port A");
	/* The connection drops with it outstanding: it may have run. */
	fake_answer_held(PORT_A, (struct fake_answer){ .status = SCSI_STATUS_ERROR });
	pump();
	cr_assert_eq(h.done, 1);
	cr_assert_eq(h.io.result, -EREMOTEIO);
	cr_assert_eq(h.io.sense[2] & 0x0f, MP_UNSURE_KEY, "ABORTED COMMAND: the host retries");
	cr_assert_eq(h.io.sense[12], MP_UNSURE_ASC);
	cr_assert_eq(h.io.sense[13], MP_UNSURE_ASCQ);
	cr_assert_eq(fake_tgt[PORT_B].caws, 0, "not re-driven on the other path");
	cr_assert_eq(lun->unsure_failed, 1);
}

Test(mp_lun, caw_the_back_end_did_not_run_is_retried)
{
	struct host_io h;

	open_lun_caw("immediate", "fail", 8);
	/* BUSY: the back end did not run it; once it answers GOOD the host sees GOOD. */
	fake_tgt[PORT_A].hold = true;
	submit_caw(&h);
	fake_answer_held(PORT_A, (struct fake_answer){ .status = SCSI_STATUS_BUSY });
	fake_tgt[PORT_A].hold = false;
	wait_ms(2000);
	cr_assert_eq(h.done, 1);
	cr_assert_eq(h.io.result, 0, "retried after BUSY");
	/* ABORTED COMMAND may follow a write: passed to the host, not run again. */
	fake_tgt[PORT_A].answer = (struct fake_answer){ SCSI_STATUS_CHECK_CONDITION, 0x0b, 0x47,
							 0x00 };
	fake_tgt[PORT_A].caws = 0;
	submit_caw(&h);
	wait_ms(500);
	cr_assert_eq(h.done, 1);
	cr_assert_eq(h.io.result, -EREMOTEIO);
	cr_assert_eq(h.io.sense[2] & 0x0f, 0x0b);
	cr_assert_eq(fake_tgt[PORT_A].caws + fake_tgt[PORT_B].caws, 1, "sent once");
}

Test(mp_lun, caw_the_back_end_lists_but_refuses_is_not_sent_again)
{
	struct mp_lun_caps caps;
	struct host_io h;

	/* tgtd: a length in VPD B0, INVALID COMMAND OPERATION CODE for the command. */
	open_lun_caw("immediate", "fail", 128);
	fake_tgt[PORT_A].answer = (struct fake_answer){ SCSI_STATUS_CHECK_CONDITION, 0x05, 0x20,
							 0x00 };
	submit_caw(&h);
	cr_assert_eq(h.done, 1);
	cr_assert_eq(h.io.result, -EOPNOTSUPP, "not run: the caller does it itself");
	mp_lun_caps(lun, &caps);
	cr_assert_eq(caps.caw_blocks, 0, "learned");
	memset(&h, 0, sizeof(h));
	h.io.op = MP_COMPARE_AND_WRITE;
	h.io.len = FAKE_BLOCK;
	h.io.iov = &h.iov;
	h.io.done = host_done;
	cr_assert_eq(mp_lun_submit(lun, &h.io), -EOPNOTSUPP, "never sent again");
	cr_assert_eq(fake_tgt[PORT_A].caws + fake_tgt[PORT_B].caws, 1);
}

/* On sockets (the fake's eventfds): a transport error on the socket of the path a read was
 * written to; the host sees the read served by the other path. */

static void submit_read_nopump(struct host_io *h)
{
	memset(h, 0, sizeof(*h));
	h->iov.iov_base = h->buf;
	h->iov.iov_len = sizeof(h->buf);
	h->io.op = MP_READ;
	h->io.len = sizeof(h->buf);
	h->io.iov = &h->iov;
	h->io.iovcnt = 1;
	h->io.done = host_done;
	cr_assert_eq(mp_lun_submit(lun, &h->io), 0);
}

Test(mp_lun, a_read_on_a_socket_fails_over_without_an_error)
{
	struct iscsi_context *cb;
	struct host_io h;

	open_with_fds = true;
	open_lun("immediate", "fail");
	open_with_fds = false;
	submit_read_nopump(&h);
	gw_loop_run_once(&loop, 0);
	cr_assert_eq(lun->paths[PORT_A].nr_inflight, 1);
	/* The connection dies under the written command: the answer is a transport error. */
	fake_tgt[PORT_A].down = true;
	fake_fd_answer(mp_lis_ctx(&lun->paths[PORT_A]));
	cb = mp_lis_ctx(&lun->paths[PORT_B]);
	for (int i = 0; i < 10 && !h.done; i++) {
		gw_loop_run_once(&loop, 0);
		if (lun->paths[PORT_B].nr_inflight)
			fake_fd_answer(cb);
	}
	cr_expect_eq(lun->paths[PORT_A].state, MP_PATH_DOWN);
	cr_assert_eq(h.done, 1, "the read completed on the other path");
	cr_expect_eq(h.io.result, 0, "the host sees no error");
	cr_expect_eq(h.buf[0], 'B', "served by port B");
	cr_expect_eq(lun->failovers, 1);
}
