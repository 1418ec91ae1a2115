// SPDX-License-Identifier: MIT
/*
 * Dispatch (scsi_cmd.c) and the reply helpers (scsi_reply.c): the checks a command meets in
 * SAM order before its handler runs, each answered with the sense an initiator acts on, a
 * command reaching the right handler, and data moved through split buffers the way a
 * transport hands them over.
 */
#include <errno.h>

#include "scsi_test.h"

#include "scsi_priv.h"

static struct tenv e;

static void setup(void)
{
	tenv_init(&e);
	cr_assert_eq(tenv_add_lu(&e, 0, 1 << 20, 512, false, false), 0);
	cr_assert_eq(tenv_add_lu(&e, 1, 1 << 20, 512, false, true), 0);	/* read-only */
}

static void teardown(void)
{
	tenv_fini(&e);
}

TestSuite(scsi_cmd, .init = setup, .fini = teardown);

Test(scsi_cmd, unit_attention_comes_first_even_for_an_unknown_opcode)
{
	struct tcmd t;

	tcmd_run(&e, &t, e.a, 0, CDB(0xc7, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE);
	cr_assert_sense(&t, SCSI_SK_UNIT_ATTENTION, 0x29, 0x00);
	/* Each pending unit attention is reported once; then the command gets its own answer. */
	for (int i = 0; i < 8 && t.sense_key == SCSI_SK_UNIT_ATTENTION; i++)
		tcmd_run(&e, &t, e.a, 0, CDB(0xc7, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x20, 0x00);
}

Test(scsi_cmd, unknown_opcode_and_service_action)
{
	struct tcmd t;

	tenv_clear_ua(&e, e.a, 0);
	tcmd_run(&e, &t, e.a, 0, CDB(0xc7, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x20, 0x00);	/* INVALID COMMAND OP */
	/* A known opcode with an unknown service action: INVALID FIELD IN CDB, and the sense key
	 * specific bytes point at byte 1, bits 4..0 (bit pointer 4). */
	tcmd_run(&e, &t, e.a, 0, CDB(0x9e, 0x1f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0), NULL,
		 0, SCSI_DIR_READ);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x24, 0x00);
	cr_expect_eq(t.cmd.sense[15], 0x80 | 0x40 | 0x08 | 4, "SKSV, C/D, BPV, bit 4");
	cr_expect_eq(t.cmd.sense[16], 0);
	cr_expect_eq(t.cmd.sense[17], 1, "byte 1");
}

Test(scsi_cmd, a_cdb_shorter_than_its_opcode_is_refused)
{
	struct tcmd t;
	uint8_t buf[512];

	tenv_clear_ua(&e, e.a, 0);
	tcmd_prep(&e, &t, e.a, 0, CDB(0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0), buf, sizeof(buf),
		  SCSI_DIR_READ);
	t.cmd.cdb_len = 6;	/* READ(10) needs 10 */
	scsi_cmd_submit(&t.cmd);
	tcmd_wait(&e, &t);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x20, 0x00);
}

Test(scsi_cmd, a_lun_without_a_logical_unit)
{
	struct tcmd t;
	uint8_t buf[96];

	tcmd_run(&e, &t, e.a, 7, CDB(0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0), buf, 512, SCSI_DIR_READ);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x25, 0x00);	/* LU NOT SUPPORTED */
	/* INQUIRY still answers there: peripheral qualifier 3, no device. */
	cr_assert_eq(tcmd_run(&e, &t, e.a, 7, CDB(0x12, 0, 0, 0, 96, 0), buf, sizeof(buf),
			      SCSI_DIR_READ), SCSI_GOOD);
	cr_expect_eq(buf[0] >> 5, 3);
}

Test(scsi_cmd, writes_to_a_readonly_lu_are_data_protect)
{
	struct tcmd t;
	uint8_t buf[512] = { 0 };

	tenv_clear_ua(&e, e.a, 1);
	tcmd_run(&e, &t, e.a, 1, CDB(0x2a, 0, 0, 0, 0, 0, 0, 0, 1, 0), buf, sizeof(buf),
		 SCSI_DIR_WRITE);
	cr_assert_sense(&t, SCSI_SK_DATA_PROTECT, 0x27, 0x00);
	cr_expect_eq(tcmd_run(&e, &t, e.a, 1, CDB(0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0), buf,
			      sizeof(buf), SCSI_DIR_READ), SCSI_GOOD, "reads still work");
}

Test(scsi_cmd, each_opcode_reaches_its_handler)
{
	struct tcmd t;
	uint8_t buf[512];

	tenv_clear_ua(&e, e.a, 0);
	/* READ CAPACITY(10): the LU's last LBA and block size. */
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0), buf, 8,
			      SCSI_DIR_READ), SCSI_GOOD);
	cr_expect_eq(scsi_get32(buf), (1 << 20) / 512 - 1);
	cr_expect_eq(scsi_get32(buf + 4), 512);
	/* READ(10) past the end: the block handler's LBA OUT OF RANGE. */
	tcmd_run(&e, &t, e.a, 0, CDB(0x28, 0, 0, 0, 0x08, 0, 0, 0, 1, 0), buf, 512,
		 SCSI_DIR_READ);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x21, 0x00);
	/* TEST UNIT READY moves no data. */
	cr_expect_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x00, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE),
		     SCSI_GOOD);
	cr_expect_eq(t.cmd.xfer_len, 0);
}

Test(scsi_cmd, write_and_read_back_through_split_buffers)
{
	struct tcmd t;
	uint8_t out[1024], in[1024];

	tenv_clear_ua(&e, e.a, 0);
	for (size_t i = 0; i < sizeof(out); i++)
		out[i] = (uint8_t)(i * 7 + 3);
	/* Two blocks written from a 700 + 324 split, read into a 100 + 924 split. */
	tcmd_prep(&e, &t, e.a, 0, CDB(0x2a, 0, 0, 0, 0, 4, 0, 0, 2, 0), out, 700, SCSI_DIR_WRITE);
	t.iov[1].iov_base = out + 700;
	t.iov[1].iov_len = 324;
	t.cmd.iovcnt = 2;
	t.cmd.data_len = 1024;
	scsi_cmd_submit(&t.cmd);
	tcmd_wait(&e, &t);
	cr_assert_eq(t.cmd.status, SCSI_GOOD);
	memset(in, 0, sizeof(in));
	tcmd_prep(&e, &t, e.a, 0, CDB(0x28, 0, 0, 0, 0, 4, 0, 0, 2, 0), in, 100, SCSI_DIR_READ);
	t.iov[1].iov_base = in + 100;
	t.iov[1].iov_len = 924;
	t.cmd.iovcnt = 2;
	t.cmd.data_len = 1024;
	scsi_cmd_submit(&t.cmd);
	tcmd_wait(&e, &t);
	cr_assert_eq(t.cmd.status, SCSI_GOOD);
	cr_expect_eq(t.cmd.xfer_len, 1024);
	cr_expect_eq(memcmp(in, out, sizeof(in)), 0);
}

/* The reply helpers on a bare command with a split buffer. */
static struct scsi_cmd bare(struct iovec *iov, uint8_t *a, uint8_t *b, enum scsi_dir dir)
{
	struct scsi_cmd c;

	memset(&c, 0, sizeof(c));
	iov[0] = (struct iovec){ a, 5 };
	iov[1] = (struct iovec){ b, 11 };
	c.iov = iov;
	c.iovcnt = 2;
	c.data_len = 16;
	c.dir = dir;
	return c;
}

Test(scsi_cmd, data_in_fills_split_buffers_and_clips_to_the_allocation)
{
	struct iovec iov[2];
	uint8_t a[5], b[11];
	struct scsi_cmd c = bare(iov, a, b, SCSI_DIR_READ);
	const char *msg = "0123456789abcdefXYZ";

	scsi_cmd_data_in(&c, msg, 19);
	cr_expect_eq(c.xfer_len, 16, "what fits in the initiator's buffer");
	cr_expect_eq(c.cdb_xfer_len, 19, "the residual is counted from what was asked");
	cr_expect_eq(memcmp(a, "01234", 5), 0);
	cr_expect_eq(memcmp(b, "56789abcdef", 11), 0);

	/* put writes at an offset across the split and stops at the buffer's end. */
	cr_expect_eq(scsi_cmd_put(&c, 3, "++++", 4), 4);
	cr_expect_eq(memcmp(a, "012++", 5), 0);
	cr_expect_eq(memcmp(b, "++789abcdef", 11), 0);
	cr_expect_eq(scsi_cmd_put(&c, 14, "####", 4), 2);
	cr_expect_eq(scsi_cmd_put(&c, 16, "#", 1), 0);
	/* A read command has no data-out. */
	cr_expect_eq(scsi_cmd_data_out(&c, 0, a, 5), 0);
}

Test(scsi_cmd, data_out_reads_split_buffers_and_no_further)
{
	struct iovec iov[2];
	uint8_t a[5] = "ABCDE", b[11] = "FGHIJKLMNOP";
	struct scsi_cmd c = bare(iov, a, b, SCSI_DIR_WRITE);
	char got[16];

	memset(got, 0, sizeof(got));
	cr_expect_eq(scsi_cmd_data_out(&c, 3, got, 6), 6);
	cr_expect_eq(memcmp(got, "DEFGHI", 6), 0);
	cr_expect_eq(scsi_cmd_data_out(&c, 10, got, 16), 6, "only what the initiator sent");
	cr_expect_eq(memcmp(got, "KLMNOP", 6), 0);
	cr_expect_eq(scsi_cmd_data_out(&c, 16, got, 1), 0);
	/* A write command has no room for data-in. */
	scsi_cmd_data_in(&c, "zz", 2);
	cr_expect_eq(c.xfer_len, 0);
	cr_expect_eq(a[0], 'A', "the write buffer is not overwritten");
}

Test(scsi_cmd, backstore_errors_map_to_sense)
{
	struct scsi_cmd c;

	memset(&c, 0, sizeof(c));
	scsi_cmd_bs_error(&c, -EROFS);
	cr_expect_eq(c.status, SCSI_CHECK_CONDITION);
	cr_expect_eq(c.sense[2], SCSI_SK_DATA_PROTECT);
	cr_expect_eq(c.sense[12], 0x27);
	scsi_cmd_bs_error(&c, -ENOSPC);
	cr_expect_eq(c.sense[13], 0x07, "SPACE ALLOCATION FAILED WRITE PROTECT");
	scsi_cmd_bs_error(&c, -EAGAIN);
	cr_expect_eq(c.status, SCSI_BUSY, "a busy back end is BUSY, not an error");
	cr_expect_eq(c.sense_len, 0);
	scsi_cmd_bs_error(&c, -EIO);
	cr_expect_eq(c.sense[2], SCSI_SK_HARDWARE_ERROR);
	cr_expect_eq(c.sense[12], 0x44, "INTERNAL TARGET FAILURE");
}
