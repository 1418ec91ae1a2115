// SPDX-License-Identifier: MIT
/* The Data-Out rules every transport shares (dmv_core.c): where unsolicited and solicited data land,
 * what fails a task, when Get_Data completes. No transport involved: a bare dmv_conn. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "dmv.h"

static struct gw_loop loop;
static struct dmv_conn conn;
static struct dmv_task task;
static uint8_t buf[65536];
static int dones, done_status, rejects, solicits;

static struct dmv_task *find(struct dmv_conn *c, uint32_t itt)
{
	(void)c;
	return itt == task.itt ? &task : NULL;
}

static void reject(struct dmv_conn *c, const uint8_t *bhs, uint8_t reason)
{
	(void)c;
	(void)bhs;
	(void)reason;
	rejects++;
}

static void solicit(struct dmv_task *t)
{
	(void)t;
	solicits++;
}

static const struct dmv_conn_cb cb = { .find_task = find, .reject = reject };
static struct dmv_transport tp = { .name = "bare", .solicit = solicit };

static void done(struct dmv_task *t, int status)
{
	(void)t;
	dones++;
	done_status = status;
}

static void setup(void)
{
	static const uint8_t lun[8];

	cr_assert_eq(gw_loop_init(&loop), 0);
	memset(&conn, 0, sizeof(conn));
	conn.tp = &tp;
	conn.loop = &loop;
	conn.cb = &cb;
	strcpy(conn.peer, "bare");
	memset(&task, 0, sizeof(task));
	task.buf = buf;
	task.len = 32768;
	task.done = done;
	dmv_task_init(&task, &conn, 0x10, lun);
	dones = rejects = solicits = 0;
	done_status = 99;
}

static void teardown(void)
{
	gw_loop_fini(&loop);
}

TestSuite(dmv_core, .init = setup, .fini = teardown);

/* One Data-Out through begin/end, as a transport does; returns begin's verdict. */
static int data_out(uint32_t ttt, uint32_t datasn, uint32_t off, uint32_t len, bool final,
		    uint8_t fill)
{
	uint8_t bhs[ISC_BHS_LEN] = { ISC_OP_DATA_OUT, final ? ISC_FL_F : 0 };
	struct dmv_task *t;
	uint8_t *dst;
	int r;

	pdu_put24(bhs, 5, len);
	pdu_put32(bhs, 16, task.itt);
	pdu_put32(bhs, 20, ttt);
	pdu_put32(bhs, 36, datasn);
	pdu_put32(bhs, 40, off);
	r = dmv_dataout_begin(&conn, bhs, &t, &dst);
	if (r == DMV_DO_OK) {
		cr_assert_eq(dst, buf + off, "data lands in the task buffer at its offset");
		memset(dst, fill, len);
		cr_assert_eq(dmv_dataout_end(&conn, t, bhs), 0);
	}
	return r;
}

static void run(void)
{
	for (int i = 0; i < 3; i++)
		gw_loop_run_once(&loop, 0);
}

Test(dmv_core, unsolicited_then_get_data_completes_once_everything_is_in)
{
	/* 4 KiB immediate, unsolicited up to 8 KiB; the rest would be solicited. */
	dmv_task_init_write(&task, 4096, 8192);
	cr_expect_eq(task.sol_next, 8192);
	cr_expect_eq(data_out(ISC_RSVD_TAG, 0, 4096, 4096, true, 1), DMV_DO_OK);
	cr_expect(task.unsol_done);
	cr_expect_eq(task.received, 8192);
	/* Hand-made R2T slot standing in for a transport's. */
	dmv_task_get_start(&task);
	task.r2t[0] = (struct dmv_r2t){ .ttt = 7, .off = 8192, .len = 24576 };
	task.nr2t = 1;
	task.sol_next = 32768;
	cr_expect_eq(data_out(7, 0, 8192, 16384, false, 2), DMV_DO_OK);
	cr_expect_eq(dones, 0);
	cr_expect_eq(data_out(7, 1, 24576, 8192, true, 3), DMV_DO_OK);
	cr_expect_eq(dones, 1);
	cr_expect_eq(done_status, 0);
	cr_expect_eq(solicits, 1, "a finished sequence makes room for the next R2T");
	cr_expect_eq(buf[4096], 1);
	cr_expect_eq(buf[8192], 2);
	cr_expect_eq(buf[32767], 3);
}

Test(dmv_core, get_data_with_everything_already_in_completes_deferred)
{
	dmv_task_init_write(&task, 4096, 32768);
	cr_expect_eq(data_out(ISC_RSVD_TAG, 0, 4096, 28672, true, 1), DMV_DO_OK);
	dmv_task_get_start(&task);
	cr_expect_eq(dones, 0, "never from inside the call");
	run();
	cr_expect_eq(dones, 1);
	cr_expect_eq(done_status, 0);
}

Test(dmv_core, out_of_sequence_unsolicited_data_fails_the_task)
{
	dmv_task_init_write(&task, 0, 8192);
	dmv_task_get_start(&task);
	cr_expect_eq(data_out(ISC_RSVD_TAG, 1, 0, 4096, false, 1), DMV_DO_DISCARD, "DataSN 1 first");
	cr_expect_eq(dones, 1);
	cr_expect_eq(done_status, -EPROTO);
	cr_expect_eq(data_out(ISC_RSVD_TAG, 0, 0, 4096, false, 1), DMV_DO_DISCARD,
		     "a failed task takes no more data");
	cr_expect_eq(dones, 1);
}

Test(dmv_core, early_f_bit_fails_the_task_when_it_is_waited_for)
{
	dmv_task_init_write(&task, 0, 8192);
	cr_expect_eq(data_out(ISC_RSVD_TAG, 0, 0, 4096, true, 1), DMV_DO_OK);
	cr_expect_eq(task.error, -EPROTO);
	dmv_task_get_start(&task);
	run();
	cr_expect_eq(dones, 1);
	cr_expect_eq(done_status, -EPROTO);
}

Test(dmv_core, beyond_the_buffer_and_unknown_ttt_are_refused)
{
	dmv_task_init_write(&task, 0, 0);
	cr_expect_eq(data_out(ISC_RSVD_TAG, 0, 32768, 512, true, 1), DMV_DO_DISCARD);
	cr_expect_eq(task.error, -EPROTO);
	setup();
	dmv_task_init_write(&task, 0, 0);
	cr_expect_eq(data_out(0x99, 0, 0, 512, true, 1), DMV_DO_DISCARD);
	cr_expect_eq(task.error, -EPROTO);
}

Test(dmv_core, data_for_an_unknown_or_read_task_is_dropped)
{
	task.itt = 0x11;
	cr_expect_eq(data_out(ISC_RSVD_TAG, 0, 0, 512, true, 1), DMV_DO_DISCARD);
	cr_expect_eq(rejects, 1, "a Data-Out for a read is a protocol error: Reject");
	task.itt = 0x10;
	dmv_task_forget(&task);
	task.itt = 0x12;
	cr_expect_eq(data_out(ISC_RSVD_TAG, 0, 0, 512, true, 1), DMV_DO_DISCARD);
	cr_expect_eq(rejects, 1, "unknown task: dropped quietly");
}

Test(dmv_core, ttt_skips_the_reserved_value)
{
	conn.next_ttt = ISC_RSVD_TAG;
	cr_expect_neq(dmv_conn_next_ttt(&conn), ISC_RSVD_TAG);
}
