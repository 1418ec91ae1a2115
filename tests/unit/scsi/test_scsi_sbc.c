// SPDX-License-Identifier: MIT
#include "scsi_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static struct tenv e;

#define NBLK 2048	/* 1 MiB of 512-byte blocks */

static void setup(void)
{
	tenv_init(&e);
	cr_assert_eq(tenv_add_lu(&e, 0, NBLK * 512, 512, true, false), 0);
	cr_assert_eq(tenv_add_lu(&e, 1, 256 * 4096, 4096, false, false), 0);
	cr_assert_eq(tenv_add_lu(&e, 2, 64 * 512, 512, true, true), 0);
	tenv_clear_ua(&e, e.a, 0);
	tenv_clear_ua(&e, e.a, 1);
	tenv_clear_ua(&e, e.a, 2);
}

static void teardown(void)
{
	tenv_fini(&e);
}

TestSuite(scsi_sbc, .init = setup, .fini = teardown);

static int write10(uint64_t lun, uint32_t lba, uint16_t n, void *buf, uint32_t len,
		   struct tcmd *t)
{
	return tcmd_run(&e, t, e.a, lun, CDB(0x2a, 0, lba >> 24, lba >> 16, lba >> 8, lba, 0,
					     n >> 8, n, 0), buf, len, SCSI_DIR_WRITE);
}

static int read10(uint64_t lun, uint32_t lba, uint16_t n, void *buf, uint32_t len,
		  struct tcmd *t)
{
	return tcmd_run(&e, t, e.a, lun, CDB(0x28, 0, lba >> 24, lba >> 16, lba >> 8, lba, 0,
					     n >> 8, n, 0), buf, len, SCSI_DIR_READ);
}

Test(scsi_sbc, read_capacity)
{
	struct tcmd t;
	uint8_t b[32];

	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0), b, 8,
			      SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(be32(b), NBLK - 1);
	cr_assert_eq(be32(b + 4), 512);
	cr_assert_eq(t.cmd.xfer_len, 8);
	memset(b, 0xff, sizeof(b));
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
						 32, 0, 0), b, 32, SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(be64(b), NBLK - 1);
	cr_assert_eq(be32(b + 8), 512);
	cr_assert_eq(b[13] & 0x0f, 3, "8 logical blocks of 512 bytes per 4 KiB physical block");
	cr_assert_eq(b[14] & 0xc0, 0xc0, "LBPME and LBPRZ on a thin LU");
	cr_assert_eq(tcmd_run(&e, &t, e.a, 1, CDB(0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
						 32, 0, 0), b, 32, SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(be64(b), 255);
	cr_assert_eq(be32(b + 8), 4096);
	cr_assert_eq(b[14] & 0xc0, 0, "not thin");
}

Test(scsi_sbc, read_after_write_all_sizes)
{
	static uint8_t w[8 * 512], r[8 * 512];
	struct tcmd t;

	for (size_t i = 0; i < sizeof(w); i++)
		w[i] = (uint8_t)(i * 13 + 1);
	cr_assert_eq(write10(0, 100, 8, w, sizeof(w), &t), SCSI_GOOD);
	cr_assert_eq(t.cmd.cdb_xfer_len, sizeof(w));
	cr_assert_eq(read10(0, 100, 8, r, sizeof(r), &t), SCSI_GOOD);
	cr_assert_eq(t.cmd.xfer_len, sizeof(r));
	cr_assert_eq(memcmp(w, r, sizeof(w)), 0);
	/* READ(6), READ(12), READ(16) of the same blocks. */
	memset(r, 0, sizeof(r));
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x08, 0, 0, 100, 8, 0), r, sizeof(r),
			      SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(memcmp(w, r, sizeof(w)), 0);
	memset(r, 0, sizeof(r));
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0xa8, 0, 0, 0, 0, 100, 0, 0, 0, 8, 0, 0), r,
			      sizeof(r), SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(memcmp(w, r, sizeof(w)), 0);
	memset(r, 0, sizeof(r));
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x88, 0x08, 0, 0, 0, 0, 0, 0, 0, 100, 0, 0, 0, 8,
						 0, 0), r, sizeof(r), SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(memcmp(w, r, sizeof(w)), 0);
	/* WRITE(16) with FUA, read back with READ(10). */
	w[0] ^= 0xff;
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x8a, 0x08, 0, 0, 0, 0, 0, 0, 0, 100, 0, 0, 0, 1,
						 0, 0), w, 512, SCSI_DIR_WRITE), SCSI_GOOD);
	cr_assert_eq(read10(0, 100, 1, r, 512, &t), SCSI_GOOD);
	cr_assert_eq(r[0], w[0]);
}

Test(scsi_sbc, out_of_range_lba)
{
	uint8_t b[512];
	struct tcmd t;

	read10(0, NBLK - 1, 2, b, sizeof(b), &t);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x21, 0x00);
	write10(0, NBLK, 1, b, sizeof(b), &t);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x21, 0x00);
	read10(0, 0xffffffff, 0, NULL, 0, &t);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x21, 0x00);
	/* The last block is fine. */
	cr_assert_eq(read10(0, NBLK - 1, 1, b, sizeof(b), &t), SCSI_GOOD);
}

Test(scsi_sbc, zero_length_and_read6_256)
{
	static uint8_t b[256 * 512];
	struct tcmd t;

	cr_assert_eq(read10(0, 0, 0, NULL, 0, &t), SCSI_GOOD);
	cr_assert_eq(t.cmd.xfer_len, 0);
	cr_assert_eq(t.cmd.cdb_xfer_len, 0);
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x08, 0, 0, 0, 0, 0), b, sizeof(b),
			      SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(t.cmd.cdb_xfer_len, 256 * 512, "READ(6) length 0 is 256 blocks");
	cr_assert_eq(t.cmd.xfer_len, 256 * 512);
}

Test(scsi_sbc, short_buffers_move_what_fits)
{
	uint8_t a[1024], b[1024];
	struct tcmd t;

	memset(a, 'a', sizeof(a));
	cr_assert_eq(write10(0, 10, 2, a, 1024, &t), SCSI_GOOD);
	memset(b, 'b', sizeof(b));
	/* Two blocks asked, one block of data: only the first is written. */
	cr_assert_eq(write10(0, 10, 2, b, 512, &t), SCSI_GOOD);
	cr_assert_eq(t.cmd.cdb_xfer_len, 1024);
	memset(a, 0, sizeof(a));
	cr_assert_eq(read10(0, 10, 2, a, 1024, &t), SCSI_GOOD);
	cr_assert_eq(a[0], 'b');
	cr_assert_eq(a[511], 'b');
	cr_assert_eq(a[512], 'a');
	/* A read into a buffer smaller than the CDB's: what fits, and the CDB's size known. */
	cr_assert_eq(read10(0, 10, 2, b, 700, &t), SCSI_GOOD);
	cr_assert_eq(t.cmd.xfer_len, 700);
	cr_assert_eq(t.cmd.cdb_xfer_len, 1024);
	cr_assert_eq(b[699], 'a');
}

Test(scsi_sbc, protect_fields_rejected_with_pointer)
{
	uint8_t b[512];
	struct tcmd t;

	tcmd_run(&e, &t, e.a, 0, CDB(0x28, 0x20, 0, 0, 0, 0, 0, 0, 1, 0), b, sizeof(b),
		 SCSI_DIR_READ);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x24, 0x00);
	cr_assert_eq(t.cmd.sense[15] & 0xc0, 0xc0, "SKSV and C/D");
	cr_assert_eq(be16(&t.cmd.sense[16]), 1, "field pointer at byte 1");
}

Test(scsi_sbc, readonly_lu_refuses_writes)
{
	uint8_t b[512] = { 0 };
	struct tcmd t;

	write10(2, 0, 1, b, sizeof(b), &t);
	cr_assert_sense(&t, SCSI_SK_DATA_PROTECT, 0x27, 0x00);
	cr_assert_eq(read10(2, 0, 1, b, sizeof(b), &t), SCSI_GOOD);
}

Test(scsi_sbc, compare_and_write)
{
	uint8_t orig[512], buf[1024], r[512];
	struct tcmd t;

	memset(orig, 0x11, sizeof(orig));
	cr_assert_eq(write10(0, 7, 1, orig, sizeof(orig), &t), SCSI_GOOD);
	/* Match: the second half is written. */
	memset(buf, 0x11, 512);
	memset(buf + 512, 0x22, 512);
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x89, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 1, 0,
						 0), buf, sizeof(buf), SCSI_DIR_WRITE), SCSI_GOOD);
	cr_assert_eq(read10(0, 7, 1, r, sizeof(r), &t), SCSI_GOOD);
	cr_assert_eq(r[0], 0x22);
	/* Miscompare at byte 100: the medium is unchanged, INFORMATION says where. */
	memset(buf, 0x22, 512);
	buf[100] = 0x99;
	memset(buf + 512, 0x33, 512);
	tcmd_run(&e, &t, e.a, 0, CDB(0x89, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 1, 0, 0), buf,
		 sizeof(buf), SCSI_DIR_WRITE);
	cr_assert_sense(&t, SCSI_SK_MISCOMPARE, 0x1d, 0x00);
	cr_assert(t.cmd.sense[0] & 0x80, "INFORMATION valid");
	cr_assert_eq(be32(&t.cmd.sense[3]), 100);
	cr_assert_eq(read10(0, 7, 1, r, sizeof(r), &t), SCSI_GOOD);
	for (int i = 0; i < 512; i++)
		cr_assert_eq(r[i], 0x22);
}

Test(scsi_sbc, compare_and_write_refuses_a_data_size_the_cdb_does_not_say)
{
	uint8_t orig[512], buf[1536], r[512];
	struct tcmd t;

	memset(orig, 0x11, sizeof(orig));
	cr_assert_eq(write10(0, 9, 1, orig, sizeof(orig), &t), SCSI_GOOD);
	memset(buf, 0x11, 512);
	memset(buf + 512, 0x44, 1024);
	/* One block in the CDB, three blocks of data. */
	tcmd_run(&e, &t, e.a, 0, CDB(0x89, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 1, 0, 0), buf,
		 sizeof(buf), SCSI_DIR_WRITE);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x24, 0x00);
	/* A count of 0 (256 wrapped) with data: refused, not taken as "nothing to do". */
	tcmd_run(&e, &t, e.a, 0, CDB(0x89, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0), buf,
		 1024, SCSI_DIR_WRITE);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x24, 0x00);
	cr_assert_eq(read10(0, 9, 1, r, sizeof(r), &t), SCSI_GOOD);
	cr_assert_eq(r[0], 0x11, "nothing was written");
}

Test(scsi_sbc, orwrite_ors_data_into_the_blocks)
{
	uint8_t d[1024], r[1024];
	struct tcmd t;

	memset(d, 0x0f, sizeof(d));
	cr_assert_eq(write10(0, 20, 2, d, sizeof(d), &t), SCSI_GOOD);
	memset(d, 0x30, sizeof(d));
	d[700] = 0xc0;
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x8b, 0, 0, 0, 0, 0, 0, 0, 0, 20, 0, 0, 0, 2,
						 0, 0), d, sizeof(d), SCSI_DIR_WRITE), SCSI_GOOD);
	cr_assert_eq(read10(0, 20, 2, r, sizeof(r), &t), SCSI_GOOD);
	cr_assert_eq(r[0], 0x3f);
	cr_assert_eq(r[700], 0xcf);
	cr_assert_eq(r[1023], 0x3f);
	/* ORPROTECT needs protection information, which this LU has not. */
	tcmd_run(&e, &t, e.a, 0, CDB(0x8b, 0x20, 0, 0, 0, 0, 0, 0, 0, 20, 0, 0, 0, 1, 0, 0), d,
		 512, SCSI_DIR_WRITE);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x24, 0x00);
	/* Past the end of the LU. */
	tcmd_run(&e, &t, e.a, 0, CDB(0x8b, 0, 0, 0, 0, 0, 0, 0, NBLK >> 8, 0, 0, 0, 0, 1, 0, 0),
		 d, 512, SCSI_DIR_WRITE);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x21, 0x00);
}

Test(scsi_sbc, compare_and_write_holds_off_overlapping_writers)
{
	uint8_t cw[1024], w[512], r[512];
	struct tcmd c, wr, t;

	memset(r, 0, sizeof(r));
	cr_assert_eq(write10(0, 3, 1, r, sizeof(r), &t), SCSI_GOOD);
	/* CAW (0 -> 0xAA) submitted, then a plain write of 0x55 to the same block before the
	 * loop runs: the write must wait, so it lands last and the CAW compares against 0. */
	memset(cw, 0, 512);
	memset(cw + 512, 0xaa, 512);
	memset(w, 0x55, sizeof(w));
	tcmd_prep(&e, &c, e.a, 0, CDB(0x89, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 1, 0, 0), cw,
		  sizeof(cw), SCSI_DIR_WRITE);
	tcmd_prep(&e, &wr, e.b, 0, CDB(0x2a, 0, 0, 0, 0, 3, 0, 0, 1, 0), w, sizeof(w),
		  SCSI_DIR_WRITE);
	tenv_clear_ua(&e, e.b, 0);
	scsi_cmd_submit(&c.cmd);
	scsi_cmd_submit(&wr.cmd);
	tcmd_wait(&e, &c);
	tcmd_wait(&e, &wr);
	cr_assert_eq(c.cmd.status, SCSI_GOOD);
	cr_assert_eq(wr.cmd.status, SCSI_GOOD);
	cr_assert_eq(read10(0, 3, 1, r, sizeof(r), &t), SCSI_GOOD);
	cr_assert_eq(r[0], 0x55);
}

Test(scsi_sbc, verify_bytchk)
{
	uint8_t d[1024], v[1024];
	struct tcmd t;

	memset(d, 0x5a, sizeof(d));
	cr_assert_eq(write10(0, 20, 2, d, sizeof(d), &t), SCSI_GOOD);
	memcpy(v, d, sizeof(v));
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x2f, 0x02, 0, 0, 0, 20, 0, 0, 2, 0), v,
			      sizeof(v), SCSI_DIR_WRITE), SCSI_GOOD);
	v[600] = 0;
	tcmd_run(&e, &t, e.a, 0, CDB(0x2f, 0x02, 0, 0, 0, 20, 0, 0, 2, 0), v, sizeof(v),
		 SCSI_DIR_WRITE);
	cr_assert_sense(&t, SCSI_SK_MISCOMPARE, 0x1d, 0x00);
	cr_assert_eq(be32(&t.cmd.sense[3]), 600);
	/* BYTCHK 0: a range check only. */
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x2f, 0, 0, 0, 0, 20, 0, 0, 2, 0), NULL, 0,
			      SCSI_DIR_NONE), SCSI_GOOD);
	tcmd_run(&e, &t, e.a, 0, CDB(0x2f, 0, 0, 0, 0x08, 0, 0, 0, 2, 0), NULL, 0, SCSI_DIR_NONE);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x21, 0x00);
}

Test(scsi_sbc, write_same_and_unmap_zero_blocks)
{
	uint8_t d[4 * 512], pat[512], r[4 * 512];
	uint8_t param[24] = { 0 };
	struct tcmd t;

	memset(d, 0x77, sizeof(d));
	cr_assert_eq(write10(0, 40, 4, d, sizeof(d), &t), SCSI_GOOD);
	/* WRITE SAME(10) of a pattern over 3 blocks. */
	memset(pat, 0x42, sizeof(pat));
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x41, 0, 0, 0, 0, 40, 0, 0, 3, 0), pat,
			      sizeof(pat), SCSI_DIR_WRITE), SCSI_GOOD);
	cr_assert_eq(read10(0, 40, 4, r, sizeof(r), &t), SCSI_GOOD);
	cr_assert_eq(r[0], 0x42);
	cr_assert_eq(r[3 * 512 - 1], 0x42);
	cr_assert_eq(r[3 * 512], 0x77);
	/* WRITE SAME(16) with UNMAP and zeroes. */
	memset(pat, 0, sizeof(pat));
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x93, 0x08, 0, 0, 0, 0, 0, 0, 0, 40, 0, 0, 0, 2,
						 0, 0), pat, sizeof(pat), SCSI_DIR_WRITE),
		     SCSI_GOOD);
	cr_assert_eq(read10(0, 40, 4, r, sizeof(r), &t), SCSI_GOOD);
	cr_assert_eq(r[0], 0);
	cr_assert_eq(r[1023], 0);
	cr_assert_eq(r[1024], 0x42);
	/* Zero blocks (WSNZ is 0): from the LBA to the end of the LU. */
	memset(pat, 0x5a, sizeof(pat));
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x41, 0, 0, 0, (NBLK - 3) >> 8,
						 (NBLK - 3) & 0xff, 0, 0, 0, 0), pat, 512,
			      SCSI_DIR_WRITE), SCSI_GOOD);
	cr_assert_eq(read10(0, NBLK - 4, 4, r, sizeof(r), &t), SCSI_GOOD);
	cr_assert_neq(r[511], 0x5a, "the block before the LBA is untouched");
	cr_assert_eq(r[512], 0x5a);
	cr_assert_eq(r[2047], 0x5a, "the last block of the LU is written");
	/* More than the one block WRITE SAME replicates: refused. */
	memset(d, 0x5a, 1024);
	tcmd_run(&e, &t, e.a, 0, CDB(0x41, 0, 0, 0, 0, 40, 0, 0, 1, 0), d, 1024,
		 SCSI_DIR_WRITE);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x24, 0x00);
	memset(pat, 0, sizeof(pat));
	/* UNMAP one descriptor: blocks 42..43. */
	param[1] = 22;
	param[3] = 16;
	param[15] = 42;
	param[19] = 2;
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x42, 0, 0, 0, 0, 0, 0, 0, 24, 0), param,
			      sizeof(param), SCSI_DIR_WRITE), SCSI_GOOD);
	cr_assert_eq(read10(0, 40, 4, r, sizeof(r), &t), SCSI_GOOD);
	cr_assert_eq(r[1024], 0);
	cr_assert_eq(r[2047], 0);
	/* UNMAP past the end: LBA out of range, and nothing is unmapped. */
	param[15] = 0;
	param[14] = (NBLK >> 8) & 0xff;
	param[13] = 0;
	tcmd_run(&e, &t, e.a, 0, CDB(0x42, 0, 0, 0, 0, 0, 0, 0, 24, 0), param, sizeof(param),
		 SCSI_DIR_WRITE);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x21, 0x00);
	/* UNMAP on a LU that is not thin is not supported. */
	tcmd_run(&e, &t, e.a, 1, CDB(0x42, 0, 0, 0, 0, 0, 0, 0, 24, 0), param, sizeof(param),
		 SCSI_DIR_WRITE);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x20, 0x00);
}

Test(scsi_sbc, sync_cache_prefetch_get_lba_status)
{
	uint8_t b[24];
	struct tcmd t;

	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0), NULL, 0,
			      SCSI_DIR_NONE), SCSI_GOOD);
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x91, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8,
						 0, 0), NULL, 0, SCSI_DIR_NONE), SCSI_GOOD);
	tcmd_run(&e, &t, e.a, 0, CDB(0x35, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0), NULL, 0,
		 SCSI_DIR_NONE);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x21, 0x00);
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x34, 0, 0, 0, 0, 0, 0, 0, 8, 0), NULL, 0,
			      SCSI_DIR_NONE), SCSI_GOOD);
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x9e, 0x12, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0,
						 24, 0, 0), b, sizeof(b), SCSI_DIR_READ),
		     SCSI_GOOD);
	cr_assert_eq(be32(b), 20);
	cr_assert_eq(be64(b + 8), 16);
	cr_assert_eq(be32(b + 16), NBLK - 16);
}

Test(scsi_sbc, read_flagged_as_write_moves_nothing)
{
	uint8_t b[512];
	struct tcmd t;

	memset(b, 0xcd, sizeof(b));
	cr_assert_eq(read10(0, 0, 1, NULL, 0, &t), SCSI_GOOD);
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0), b, 512,
			      SCSI_DIR_WRITE), SCSI_GOOD);
	cr_assert_eq(t.cmd.xfer_len, 0);
	cr_assert_eq(b[0], 0xcd, "the transport's write buffer is not overwritten");
}

/* GET LBA STATUS of LBA 0 on lun: the first nd descriptors into d[] as {lba, n, status}. */
static uint32_t lba_status(uint64_t lun, uint64_t d[][3], uint32_t max)
{
	uint8_t b[8 + 16 * 8];
	struct tcmd t;
	uint32_t n;

	cr_assert_eq(tcmd_run(&e, &t, e.a, lun, CDB(0x9e, 0x12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
						   sizeof(b), 0, 0), b, sizeof(b), SCSI_DIR_READ),
		     SCSI_GOOD);
	n = (be32(b) - 4) / 16;
	cr_assert_leq(n, max);
	for (uint32_t i = 0; i < n; i++) {
		d[i][0] = be64(b + 8 + 16 * i);
		d[i][1] = be32(b + 16 + 16 * i);
		d[i][2] = b[20 + 16 * i] & 0x0f;
	}
	return n;
}

Test(scsi_sbc, get_lba_status_reports_the_holes_of_a_sparse_file)
{
	char path[] = "/dev/shm/isergw-lbastatus-XXXXXX";
	int fd = mkstemp(path);
	struct bs_conf bc = { .type = BS_TYPE_FILE, .path = path, .size = NBLK * 512,
			      .block_size = 512, .threads = 1 };
	struct scsi_lu_conf lc = { .lun = 3, .write_cache = true, .thin = true };
	static uint8_t w[8 * 512];
	uint64_t d[8][3];
	struct bs *bs = NULL;
	struct tcmd t;
	uint8_t um[24] = { 0, 22, 0, 16 };

	cr_assert_geq(fd, 0);
	close(fd);
	cr_assert_eq(bs_create(&e.loop, &bc, &bs, &e.errs), 0);
	cr_assert_eq(scsi_dev_add_lu(e.dev, &lc, bs, &e.errs), 0);
	tenv_clear_ua(&e, e.a, 3);

	cr_assert_eq(lba_status(3, d, 8), 1, "a new sparse file is one hole");
	cr_assert_eq(d[0][0], 0);
	cr_assert_eq(d[0][1], NBLK);
	cr_assert_eq(d[0][2], 1, "deallocated");

	memset(w, 0x5a, sizeof(w));
	cr_assert_eq(write10(3, 64, 8, w, sizeof(w), &t), SCSI_GOOD);
	cr_assert_eq(lba_status(3, d, 8), 3);
	cr_assert_eq(d[0][0], 0);
	cr_assert_eq(d[0][1], 64);
	cr_assert_eq(d[0][2], 1);
	cr_assert_eq(d[1][0], 64);
	cr_assert_eq(d[1][1], 8);
	cr_assert_eq(d[1][2], 0, "the written 4 KiB is mapped");
	cr_assert_eq(d[2][0], 72);
	cr_assert_eq(d[2][1], NBLK - 72);
	cr_assert_eq(d[2][2], 1);

	/* UNMAP the same 8 blocks: the file is one hole again. */
	um[8 + 7] = 64;
	um[8 + 11] = 8;
	cr_assert_eq(tcmd_run(&e, &t, e.a, 3, CDB(0x42, 0, 0, 0, 0, 0, 0, 0, 24, 0), um,
			      sizeof(um), SCSI_DIR_WRITE), SCSI_GOOD);
	cr_assert_eq(lba_status(3, d, 8), 1);
	cr_assert_eq(d[0][1], NBLK);
	cr_assert_eq(d[0][2], 1);
	unlink(path);
}

/*
 * What a LU advertises for logical block provisioning (READ CAPACITY(16) LBPME, VPD B2 LBPU,
 * LBPWS, LBPWS10, VPD B0's unmap limits) is what it accepts, for every mix of the "thin" setting
 * and a backstore that can or cannot deallocate (the remote backstore's multipath LUN reports
 * can_unmap from its paths). Found by libiscsi's WriteSame16.UnmapVPD on a remote LUN.
 */
static void lbp_check(bool thin, bool can_unmap)
{
	struct bs_conf bc = { .type = BS_TYPE_RAM, .size = 64 * 512, .block_size = 512,
			      .threads = 1 };
	struct scsi_lu_conf lc = { .lun = 5, .write_cache = true, .thin = thin };
	uint8_t rc16[32], b2[8], b0[64], blk[512] = { 0 }, param[24] = { 0 };
	struct tenv env;
	struct bs *bs = NULL;
	struct tcmd t;
	bool lbpme, lbpu, lbpws, lbpws10;

	tenv_init(&env);
	cr_assert_eq(bs_create(&env.loop, &bc, &bs, &env.errs), 0);
	bs->can_unmap = can_unmap;
	cr_assert_eq(scsi_dev_add_lu(env.dev, &lc, bs, &env.errs), 0);
	tenv_clear_ua(&env, env.a, 5);

	cr_assert_eq(tcmd_run(&env, &t, env.a, 5, CDB(0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
						     0, 32, 0, 0), rc16, 32, SCSI_DIR_READ),
		     SCSI_GOOD);
	cr_assert_eq(tcmd_run(&env, &t, env.a, 5, CDB(0x12, 1, 0xb2, 0, 8, 0), b2, 8,
			      SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(tcmd_run(&env, &t, env.a, 5, CDB(0x12, 1, 0xb0, 0, 64, 0), b0, 64,
			      SCSI_DIR_READ), SCSI_GOOD);
	lbpme = rc16[14] & 0x80;
	lbpu = b2[5] & 0x80;
	lbpws = b2[5] & 0x40;
	lbpws10 = b2[5] & 0x20;
	cr_assert_eq(lbpme, thin && can_unmap, "LBPME %d (thin %d, can_unmap %d)", lbpme, thin,
		     can_unmap);
	cr_assert(lbpu == lbpme && lbpws == lbpme && lbpws10 == lbpme,
		  "B2 LBPU %d LBPWS %d LBPWS10 %d against LBPME %d", lbpu, lbpws, lbpws10, lbpme);
	cr_assert_eq(be32(&b0[20]) != 0, lbpu, "B0 MAXIMUM UNMAP LBA COUNT %u with LBPU %d",
		     be32(&b0[20]), lbpu);
	cr_assert_eq(be32(&b0[24]) != 0, lbpu, "B0 MAXIMUM UNMAP DESCRIPTOR COUNT %u",
		     be32(&b0[24]));

	/* WRITE SAME(16) and (10) with UNMAP: done as asked, or INVALID FIELD IN CDB at the
	 * UNMAP bit (byte 1 bit 3), and then nothing written. */
	for (int ten = 0; ten < 2; ten++) {
		uint8_t r[512];

		memset(r, 0x33, sizeof(r));
		cr_assert_eq(tcmd_run(&env, &t, env.a, 5, CDB(0x2a, 0, 0, 0, 0, 8, 0, 0, 1, 0), r,
				      512, SCSI_DIR_WRITE), SCSI_GOOD);
		if (ten)
			tcmd_run(&env, &t, env.a, 5, CDB(0x41, 0x08, 0, 0, 0, 8, 0, 0, 1, 0), blk,
				 512, SCSI_DIR_WRITE);
		else
			tcmd_run(&env, &t, env.a, 5, CDB(0x93, 0x08, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0,
							 0, 1, 0, 0), blk, 512, SCSI_DIR_WRITE);
		cr_assert_eq(tcmd_run(&env, &t, env.a, 5, CDB(0x28, 0, 0, 0, 0, 8, 0, 0, 1, 0),
				      r, 512, SCSI_DIR_READ), SCSI_GOOD);
		if (ten ? lbpws10 : lbpws) {
			cr_assert_eq(r[0], 0, "WRITE SAME(%d) UNMAP deallocated", ten ? 10 : 16);
			continue;
		}
		cr_assert_eq(r[0], 0x33, "WRITE SAME(%d) UNMAP refused changes nothing",
			     ten ? 10 : 16);
	}
	if (!lbpws) {
		tcmd_run(&env, &t, env.a, 5, CDB(0x93, 0x08, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 1,
						 0, 0), blk, 512, SCSI_DIR_WRITE);
		cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x24, 0x00);
		cr_assert_eq(t.cmd.sense[15], 0x80 | 0x40 | 0x08 | 3, "field pointer: CDB, bit 3");
		cr_assert_eq(be16(&t.cmd.sense[16]), 1, "field pointer: byte 1");
	}

	/* UNMAP: done, or not supported at all (LBPU 0: INVALID COMMAND OPERATION CODE). */
	param[1] = 22;
	param[3] = 16;
	param[15] = 8;
	param[19] = 1;
	tcmd_run(&env, &t, env.a, 5, CDB(0x42, 0, 0, 0, 0, 0, 0, 0, 24, 0), param, sizeof(param),
		 SCSI_DIR_WRITE);
	if (lbpu)
		cr_assert_eq(t.cmd.status, SCSI_GOOD);
	else
		cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x20, 0x00);
	tenv_fini(&env);
}

Test(scsi_sbc, provisioning_advertised_is_provisioning_accepted)
{
	lbp_check(true, true);
	lbp_check(true, false);
	lbp_check(false, true);
	lbp_check(false, false);
}

/* Atomics across gateways (docs/CLUSTER.md, "Atomics") */

static const char *atom_mode(uint64_t lun, const char *op)
{
	static char mode[16];
	json_t *a = scsi_dev_lu_atomics(e.dev, lun);

	cr_assert_not_null(a);
	snprintf(mode, sizeof(mode), "%s",
		 json_string_value(json_object_get(json_object_get(a, op), "mode")));
	json_decref(a);
	return mode;
}

static json_int_t atom_int(uint64_t lun, const char *key)
{
	json_t *a = scsi_dev_lu_atomics(e.dev, lun);
	json_int_t v = json_integer_value(json_object_get(json_object_get(a, "compare_and_write"),
							   key));

	json_decref(a);
	return v;
}

static uint8_t vpd_b0_max_caw(void)
{
	uint8_t b[64];
	struct tcmd t;

	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x12, 0x01, 0xb0, 0, 64, 0), b, sizeof(b),
			      SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(b[1], 0xb0);
	return b[5];
}

/* The cluster's groups: this gateway's 1 (and 2), another gateway's 3. */
static void join_cluster(void)
{
	const struct scsi_tpg_conf g[] = { { 1, SCSI_ALUA_AO }, { 3, SCSI_ALUA_AO } };

	cr_assert_eq(scsi_dev_set_groups(e.dev, g, 2), 0);
}

static int caw(struct scsi_itn *itn, uint8_t lba, uint8_t from, uint8_t to, struct tcmd *t)
{
	uint8_t buf[1024];

	memset(buf, from, 512);
	memset(buf + 512, to, 512);
	return tcmd_run(&e, t, itn, 0, CDB(0x89, 0, 0, 0, 0, 0, 0, 0, 0, lba, 0, 0, 0, 1, 0, 0),
			buf, sizeof(buf), SCSI_DIR_WRITE);
}

Test(scsi_sbc, a_single_gateway_does_its_atomics_itself)
{
	struct tcmd t;

	cr_assert_str_eq(atom_mode(0, "compare_and_write"), "local");
	cr_assert_str_eq(atom_mode(0, "write_same"), "local");
	cr_assert_str_eq(atom_mode(0, "unmap"), "local", "LU 0 is thin");
	cr_assert_str_eq(atom_mode(1, "unmap"), "refused", "LU 1 is not");
	cr_assert_eq(vpd_b0_max_caw(), 64);
	memset(&t, 0, sizeof(t));
	cr_assert_eq(caw(e.a, 50, 0, 0x22, &t), SCSI_GOOD);
	cr_assert_eq(atom_int(0, "refused"), 0);
}

Test(scsi_sbc, in_a_cluster_caw_runs_only_where_the_lu_is_active_optimized)
{
	uint8_t d[512], r[512];
	struct tcmd t;

	join_cluster();
	/* Another gateway (group 3) owns LU 0: this one is non-optimized for it. */
	cr_assert_eq(scsi_dev_set_lu_alua(e.dev, 0, 3, false, "gw-b"), 0);
	tenv_clear_ua(&e, e.a, 0);
	memset(d, 0x11, sizeof(d));
	cr_assert_eq(write10(0, 40, 1, d, sizeof(d), &t), SCSI_GOOD, "plain I/O is served");
	caw(e.a, 40, 0x11, 0x22, &t);
	cr_assert_sense(&t, SCSI_SK_NOT_READY, 0x04, 0x0b);
	cr_assert_eq(read10(0, 40, 1, r, sizeof(r), &t), SCSI_GOOD);
	cr_assert_eq(r[0], 0x11, "nothing written through the non-owner");
	cr_assert_str_eq(atom_mode(0, "compare_and_write"), "refused");
	cr_assert_eq(atom_int(0, "refused"), 1, "counted");
	cr_assert_eq(vpd_b0_max_caw(), 64, "advertised: the owner runs it");
	/* ORWRITE is a read-modify-write too. */
	tcmd_run(&e, &t, e.a, 0, CDB(0x8b, 0, 0, 0, 0, 0, 0, 0, 0, 40, 0, 0, 0, 1, 0, 0), d, 512,
		 SCSI_DIR_WRITE);
	cr_assert_sense(&t, SCSI_SK_NOT_READY, 0x04, 0x0b);

	/* The LU moves here: executed, and the status says so. */
	cr_assert_eq(scsi_dev_set_lu_alua(e.dev, 0, 1, false, "gw-a"), 0);
	tenv_clear_ua(&e, e.a, 0);
	cr_assert_str_eq(atom_mode(0, "compare_and_write"), "owner");
	cr_assert_eq(caw(e.a, 40, 0x11, 0x22, &t), SCSI_GOOD);
	cr_assert_eq(read10(0, 40, 1, r, sizeof(r), &t), SCSI_GOOD);
	cr_assert_eq(r[0], 0x22);
	/* Through this gateway's other port (group 2, non-optimized): refused. */
	{
		struct scsi_itn *c = scsi_itn_create(e.dev, e.port2,
						     "iqn.2026-01.org.test:c,i,0x23d000000003",
						     "iqn.2026-01.org.test:c");

		cr_assert_not_null(c);
		tenv_clear_ua(&e, c, 0);
		caw(c, 40, 0x22, 0x33, &t);
		cr_assert_sense(&t, SCSI_SK_NOT_READY, 0x04, 0x0b);
	}
	/* Taking over (pending): no group is a/o yet, so the LU is moving: 04/0A (retry). */
	cr_assert_eq(scsi_dev_set_lu_alua(e.dev, 0, 1, true, "gw-a"), 0);
	tenv_clear_ua(&e, e.a, 0);
	caw(e.a, 40, 0x22, 0x33, &t);
	cr_assert_sense(&t, SCSI_SK_NOT_READY, 0x04, 0x0a);
}

Test(scsi_sbc, a_caw_whose_lu_moves_away_while_it_reads_writes_nothing)
{
	uint8_t d[512], r[512], buf[1024];
	struct tcmd t, c;

	join_cluster();
	cr_assert_eq(scsi_dev_set_lu_alua(e.dev, 0, 1, false, "gw-a"), 0);
	tenv_clear_ua(&e, e.a, 0);
	memset(d, 0x11, sizeof(d));
	cr_assert_eq(write10(0, 41, 1, d, sizeof(d), &t), SCSI_GOOD);
	memset(buf, 0x11, 512);
	memset(buf + 512, 0x44, 512);
	tcmd_prep(&e, &c, e.a, 0, CDB(0x89, 0, 0, 0, 0, 0, 0, 0, 0, 41, 0, 0, 0, 1, 0, 0), buf,
		  sizeof(buf), SCSI_DIR_WRITE);
	scsi_cmd_submit(&c.cmd);
	/* Before its read completes, another gateway becomes the owner. */
	cr_assert_eq(scsi_dev_set_lu_alua(e.dev, 0, 3, false, "gw-b"), 0);
	tcmd_wait(&e, &c);
	cr_assert_eq(c.cmd.status, SCSI_CHECK_CONDITION);
	cr_assert_eq(c.sense_key, SCSI_SK_NOT_READY);
	tenv_clear_ua(&e, e.a, 0);
	cr_assert_eq(read10(0, 41, 1, r, sizeof(r), &t), SCSI_GOOD);
	cr_assert_eq(r[0], 0x11, "the write half never reached the medium");
}

Test(scsi_sbc, with_several_optimized_groups_caw_is_neither_advertised_nor_run)
{
	uint8_t b[64];
	struct tcmd t;

	/* Groups listed without an owner for the LU: 1, 2 and 3 all active/optimized. */
	join_cluster();
	tenv_clear_ua(&e, e.a, 0);
	cr_assert_eq(vpd_b0_max_caw(), 0);
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0xa3, 0x0c, 0x01, 0x89, 0, 0, 0, 0, 0, 64, 0,
						 0), b, sizeof(b), SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(b[1] & 0x07, 0x01, "REPORT SUPPORTED OPERATION CODES: not supported");
	caw(e.a, 42, 0, 0x22, &t);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x20, 0x00);
	cr_assert_str_eq(atom_mode(0, "compare_and_write"), "refused");
}
