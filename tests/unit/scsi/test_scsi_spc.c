// SPDX-License-Identifier: MIT
#include "scsi_test.h"

static struct tenv e;

static void setup(void)
{
	tenv_init(&e);
	cr_assert_eq(tenv_add_lu(&e, 0, 1 << 20, 512, true, false), 0);
	cr_assert_eq(tenv_add_lu(&e, 5, 1 << 20, 4096, false, false), 0);
	tenv_clear_ua(&e, e.a, 0);
	tenv_clear_ua(&e, e.a, 5);
}

static void teardown(void)
{
	tenv_fini(&e);
}

TestSuite(scsi_spc, .init = setup, .fini = teardown);

Test(scsi_spc, inquiry_standard)
{
	uint8_t b[260];
	struct tcmd t;

	memset(b, 0xee, sizeof(b));
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x12, 0, 0, 1, 4, 0), b, 260, SCSI_DIR_READ),
		     SCSI_GOOD);
	cr_assert_eq(t.cmd.xfer_len, 96);
	cr_assert_eq(t.cmd.cdb_xfer_len, 96, "residual is against what was sent");
	cr_assert_eq(b[0], 0x00);
	cr_assert_eq(b[2], 0x06, "SPC-4");
	cr_assert_eq(b[3] & 0x0f, 2);
	cr_assert_eq(b[4], 96 - 5);
	cr_assert_eq(b[5] & 0x30, 0x10, "TPGS implicit");
	cr_assert_eq(b[7] & 0x02, 0x02, "CmdQue");
	cr_assert_eq(memcmp(&b[8], "ISERGW  ", 8), 0);
	cr_assert_eq(memcmp(&b[16], "isergw LUN      ", 16), 0);
	cr_assert_eq(memcmp(&b[32], "0001", 4), 0);
	/* Short allocation length: truncated, not an error. */
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x12, 0, 0, 0, 36, 0), b, 260, SCSI_DIR_READ),
		     SCSI_GOOD);
	cr_assert_eq(t.cmd.xfer_len, 36);
}

Test(scsi_spc, inquiry_unknown_lun_and_bad_fields)
{
	uint8_t b[96];
	struct tcmd t;

	cr_assert_eq(tcmd_run(&e, &t, e.a, 3, CDB(0x12, 0, 0, 0, 96, 0), b, 96, SCSI_DIR_READ),
		     SCSI_GOOD);
	cr_assert_eq(b[0], 0x7f, "peripheral qualifier 3, type 1Fh");
	tcmd_run(&e, &t, e.a, 3, CDB(0x00, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x25, 0x00);
	/* A page code without EVPD. */
	tcmd_run(&e, &t, e.a, 0, CDB(0x12, 0, 0x80, 0, 96, 0), b, 96, SCSI_DIR_READ);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x24, 0x00);
	cr_assert_eq(t.cmd.sense[15] & 0xc0, 0xc0);
	cr_assert_eq(be16(&t.cmd.sense[16]), 2);
	/* Unsupported VPD page. */
	tcmd_run(&e, &t, e.a, 0, CDB(0x12, 1, 0x99, 0, 96, 0), b, 96, SCSI_DIR_READ);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x24, 0x00);
}

static int vpd(uint64_t lun, uint8_t page, uint8_t *b, uint32_t len, struct tcmd *t)
{
	return tcmd_run(&e, t, e.a, lun, CDB(0x12, 1, page, len >> 8, len & 0xff, 0), b, len,
			SCSI_DIR_READ);
}

Test(scsi_spc, vpd_pages)
{
	uint8_t b[512];
	struct tcmd t;
	bool naa = false, port = false, relport = false, tpg = false;

	cr_assert_eq(vpd(0, 0x00, b, sizeof(b), &t), SCSI_GOOD);
	cr_assert_eq(b[1], 0x00);
	cr_assert_eq(be16(&b[2]), 6);
	/* Every page listed can be read. */
	for (int i = 0; i < 6; i++) {
		uint8_t p[512];
		struct tcmd t2;

		cr_assert_eq(vpd(0, b[4 + i], p, sizeof(p), &t2), SCSI_GOOD, "page %#x",
			     b[4 + i]);
		cr_assert_eq(p[1], b[4 + i]);
		cr_assert_eq(t2.cmd.xfer_len, be16(&p[2]) + 4u);
	}
	cr_assert_eq(vpd(0, 0x83, b, sizeof(b), &t), SCSI_GOOD);
	for (uint32_t off = 4; off < 4u + be16(&b[2]); off += 4 + b[off + 3]) {
		uint8_t assoc = (b[off + 1] >> 4) & 3, type = b[off + 1] & 0x0f;

		if (type == 3 && assoc == 0) {
			naa = (b[off + 4] >> 4) == 6 && b[off + 3] == 16;
		}
		if (type == 8 && assoc == 1)
			port = strstr((const char *)&b[off + 4], ",t,0x0001") != NULL;
		if (type == 4 && assoc == 1)
			relport = be16(&b[off + 6]) == e.port->rel_id;
		if (type == 5 && assoc == 1)
			tpg = be16(&b[off + 6]) == 1;
	}
	cr_assert(naa, "NAA-6 LU designator");
	cr_assert(port, "target port name designator");
	cr_assert(relport, "relative target port designator");
	cr_assert(tpg, "target port group designator");
	/* Two LUs have different NAA ids and serials. */
	{
		uint8_t b5[512];
		struct tcmd t5;

		cr_assert_eq(vpd(5, 0x83, b5, sizeof(b5), &t5), SCSI_GOOD);
		cr_assert_neq(memcmp(&b[8], &b5[8], 16), 0);
	}
	cr_assert_eq(vpd(0, 0xb0, b, sizeof(b), &t), SCSI_GOOD);
	cr_assert_eq(be16(&b[2]), 0x3c);
	cr_assert_gt(be32(&b[8]), 0, "max transfer length");
	cr_assert_gt(be32(&b[20]), 0, "max unmap LBA count on a thin LU");
	cr_assert_gt(be32(&b[24]), 0, "max unmap descriptors");
	cr_assert_gt(be64(&b[36]), 0, "max write same length");
	cr_assert_eq(vpd(0, 0xb1, b, sizeof(b), &t), SCSI_GOOD);
	cr_assert_eq(be16(&b[4]), 1, "non-rotating");
	cr_assert_eq(vpd(0, 0xb2, b, sizeof(b), &t), SCSI_GOOD);
	cr_assert_eq(b[5] & 0xe4, 0xe4, "LBPU LBPWS LBPWS10 LBPRZ");
	cr_assert_eq(vpd(5, 0xb2, b, sizeof(b), &t), SCSI_GOOD);
	cr_assert_eq(b[5] & 0x80, 0, "not thin: no LBPU");
}

Test(scsi_spc, bad_opcode_and_service_action)
{
	struct tcmd t;

	tcmd_run(&e, &t, e.a, 0, CDB(0xc7, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x20, 0x00);
	tcmd_run(&e, &t, e.a, 0, CDB(0x9e, 0x1f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0), NULL,
		 0, SCSI_DIR_READ);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x24, 0x00);
}

Test(scsi_spc, report_luns)
{
	uint8_t b[64];
	struct tcmd t;

	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0xa0, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0), b, 64,
			      SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(be32(b), 16);
	cr_assert_eq(b[8 + 1], 0);
	cr_assert_eq(b[16 + 1], 5);
	cr_assert_eq(t.cmd.xfer_len, 24);
	/* Works on a LUN with nothing behind it too. */
	cr_assert_eq(tcmd_run(&e, &t, e.a, 9, CDB(0xa0, 0, 2, 0, 0, 0, 0, 0, 0, 64, 0, 0), b, 64,
			      SCSI_DIR_READ), SCSI_GOOD);
	tcmd_run(&e, &t, e.a, 0, CDB(0xa0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 0, 0), b, 64,
		 SCSI_DIR_READ);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x24, 0x00);
	tcmd_run(&e, &t, e.a, 0, CDB(0xa0, 0, 7, 0, 0, 0, 0, 0, 0, 64, 0, 0), b, 64,
		 SCSI_DIR_READ);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x24, 0x00);
	/* Select report 1: well-known LUNs only, an empty list. */
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0xa0, 0, 1, 0, 0, 0, 0, 0, 0, 64, 0, 0), b, 64,
			      SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(be32(b), 0);
}

Test(scsi_spc, mode_sense_pages)
{
	uint8_t b[255];
	struct tcmd t;

	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x1a, 0, 0x3f, 0, 255, 0), b, 255,
			      SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(b[0] + 1u, t.cmd.xfer_len);
	cr_assert_eq(b[3], 8, "block descriptor");
	cr_assert_eq(be32(&b[4 + 4]) & 0xffffff, 512);
	cr_assert_eq(b[12], 0x08, "caching page first");
	cr_assert_eq(b[14] & 0x04, 0x04, "WCE");
	cr_assert_eq(b[32], 0x0a, "control page next");
	cr_assert_eq(b[44], 0x1c);
	/* DBD, caching page only, MODE SENSE(10). */
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x5a, 0x08, 0x08, 0, 0, 0, 0, 0, 255, 0), b, 255,
			      SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(be16(&b[6]), 0);
	cr_assert_eq(b[8], 0x08);
	cr_assert_eq(be16(b) + 2u, 8u + 20u);
	/* Changeable values: WCE only. */
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x1a, 0x08, 0x48, 0, 255, 0), b, 255,
			      SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(b[4 + 2], 0x04);
	tcmd_run(&e, &t, e.a, 0, CDB(0x1a, 0, 0xc8, 0, 255, 0), b, 255, SCSI_DIR_READ);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x39, 0x00);
	tcmd_run(&e, &t, e.a, 0, CDB(0x1a, 0, 0x19, 0, 255, 0), b, 255, SCSI_DIR_READ);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x24, 0x00);
}

Test(scsi_spc, mode_select_wce_sets_ua_for_others)
{
	uint8_t sel[4 + 20] = { 0 }, b[64];
	struct tcmd t;

	tenv_clear_ua(&e, e.b, 0);
	sel[4] = 0x08;
	sel[5] = 0x12;		/* WCE 0 */
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x15, 0x10, 0, 0, sizeof(sel), 0), sel,
			      sizeof(sel), SCSI_DIR_WRITE), SCSI_GOOD);
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x1a, 0x08, 0x08, 0, 64, 0), b, 64,
			      SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(b[4 + 2] & 0x04, 0, "WCE now off");
	/* The other nexus hears of it once; the one that changed it does not. */
	tcmd_run(&e, &t, e.b, 0, CDB(0x00, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE);
	cr_assert_sense(&t, SCSI_SK_UNIT_ATTENTION, 0x2a, 0x01);
	cr_assert_eq(tcmd_run(&e, &t, e.b, 0, CDB(0x00, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE),
		     SCSI_GOOD);
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x00, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE),
		     SCSI_GOOD);
	/* Changing what is not changeable: invalid field in the parameter list. */
	sel[6] = 0x01;	/* RCD */
	tcmd_run(&e, &t, e.a, 0, CDB(0x15, 0x10, 0, 0, sizeof(sel), 0), sel, sizeof(sel),
		 SCSI_DIR_WRITE);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x26, 0x00);
	cr_assert_eq(be16(&t.cmd.sense[16]), 6);
	/* SP: nothing can be saved. */
	tcmd_run(&e, &t, e.a, 0, CDB(0x15, 0x11, 0, 0, sizeof(sel), 0), sel, sizeof(sel),
		 SCSI_DIR_WRITE);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x24, 0x00);
}

Test(scsi_spc, request_sense_returns_pending_ua)
{
	uint8_t b[32];
	struct tcmd t;

	/* e.b has not talked to LUN 0 yet: power-on UA, reported as data. */
	cr_assert_eq(tcmd_run(&e, &t, e.b, 0, CDB(0x03, 0, 0, 0, 32, 0), b, 32, SCSI_DIR_READ),
		     SCSI_GOOD);
	cr_assert_eq(t.cmd.xfer_len, 18);
	cr_assert_eq(b[0], 0x70);
	cr_assert_eq(b[2], SCSI_SK_UNIT_ATTENTION);
	cr_assert_eq(b[12], 0x29);
	cr_assert_eq(tcmd_run(&e, &t, e.b, 0, CDB(0x03, 1, 0, 0, 32, 0), b, 32, SCSI_DIR_READ),
		     SCSI_GOOD);
	/* LUs were added after this nexus existed: REPORTED LUNS DATA HAS CHANGED is next. */
	cr_assert_eq(b[0], 0x72, "descriptor format asked");
	cr_assert_eq(b[1], SCSI_SK_UNIT_ATTENTION);
	cr_assert_eq(b[2], 0x3f);
	cr_assert_eq(b[3], 0x0e);
	cr_assert_eq(tcmd_run(&e, &t, e.b, 0, CDB(0x00, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE),
		     SCSI_GOOD, "the UA went with REQUEST SENSE");
}

Test(scsi_spc, report_supported_task_management_functions)
{
	uint8_t b[16];
	struct tcmd t;

	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0xa3, 0x0d, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0), b, 4,
			      SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(b[0] & 0x08, 0x08, "LU reset supported");
	/* REPD: the extended format, 16 bytes. */
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0xa3, 0x0d, 0x80, 0, 0, 0, 0, 0, 0, 16, 0, 0), b,
			      16, SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(t.cmd.xfer_len, 16);
	cr_assert_eq(b[3], 0x0c, "additional data length");
}
