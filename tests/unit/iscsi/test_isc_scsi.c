// SPDX-License-Identifier: MIT
/* SCSI commands through the engine and a ram LU: reads, writes with immediate, unsolicited and
 * solicited data (R2T), residuals, sense. */
#include "harness.h"

static struct h H;
static struct fake_conn *C;

static void setup(void)
{
	C = h_setup_session(&H, H_CONF_DEFAULT, true);
}

static void teardown(void)
{
	h_teardown(&H);
}

TestSuite(isc_scsi, .init = setup, .fini = teardown);

Test(isc_scsi, write_immediate_then_read_back)
{
	uint8_t cdb[16], data[4096], back[4096];
	uint32_t got;

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7 + 1);
	h_cdb_rw10(cdb, 0x2a, 10, 8);
	h_scsi_cmd(&H, C, 0x10, ISC_FL_F | ISC_FL_W, cdb, 10, 4096, data, 4096);
	cr_assert_eq(h_collect(&H, C, 0x10, back, &got, NULL), SCSI_GOOD);
	cr_expect_eq(got, 0);

	h_cdb_rw10(cdb, 0x28, 10, 8);
	h_scsi_cmd(&H, C, 0x11, ISC_FL_F | ISC_FL_R, cdb, 10, 4096, NULL, 0);
	memset(back, 0, sizeof(back));
	cr_assert_eq(h_collect(&H, C, 0x11, back, &got, NULL), SCSI_GOOD);
	cr_expect_eq(got, 4096);
	cr_expect_eq(memcmp(back, data, 4096), 0, "read back what was written");
}

Test(isc_scsi, read_splits_data_in_by_initiator_mrdsl_and_collapses_status)
{
	uint8_t cdb[16], back[16384];
	struct pdu *last = NULL;
	uint32_t got;

	/* The initiator declared MaxRecvDataSegmentLength=8192: 16 KiB come as 2 Data-In. */
	h_cdb_rw10(cdb, 0x28, 0, 32);
	h_scsi_cmd(&H, C, 0x20, ISC_FL_F | ISC_FL_R, cdb, 10, 16384, NULL, 0);
	fake_dmv_settle(&H.loop);
	cr_expect_eq(C->nsent, 2);
	cr_assert_eq(h_collect(&H, C, 0x20, back, &got, &last), SCSI_GOOD);
	cr_expect_eq(got, 16384);
	cr_assert_not_null(last);
	cr_expect(last->bhs[1] & ISC_FL_S, "status in the last Data-In");
	cr_expect(last->bhs[1] & ISC_FL_F);
	cr_expect_eq(pdu_get32(last->bhs, 24), H.exp_statsn, "StatSN on the collapsed status");
	pdu_put(last);
}

Test(isc_scsi, write_beyond_first_burst_uses_unsolicited_then_r2t)
{
	uint8_t cdb[16], data[32768], back[32768];
	uint8_t bhs[ISC_BHS_LEN];
	struct pdu *r2t[4];
	uint32_t got, off;
	int n = 0;

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i ^ (i >> 8));
	/* 32 KiB, FirstBurstLength 8192: 4096 immediate + 4096 unsolicited, then R2Ts for the
	 * remaining 24 KiB in MaxBurstLength (16 KiB) pieces, MaxOutstandingR2T 1. */
	h_cdb_rw10(cdb, 0x2a, 100, 64);
	h_scsi_cmd(&H, C, 0x30, ISC_FL_W, cdb, 10, sizeof(data), data, 4096);
	fake_dmv_settle(&H.loop);
	cr_expect_eq(C->nsent, 1, "one R2T: MaxOutstandingR2T=1");
	fake_bhs(bhs, ISC_OP_DATA_OUT, ISC_FL_F, 0x30);
	pdu_put32(bhs, 20, ISC_RSVD_TAG);
	pdu_put32(bhs, 36, 0);
	pdu_put32(bhs, 40, 4096);
	fake_dmv_rx(C, bhs, data + 4096, 4096);
	fake_dmv_settle(&H.loop);
	off = 8192;
	while (off < sizeof(data)) {
		struct pdu *r = fake_dmv_pop(C);
		uint32_t roff, rlen;

		cr_assert_not_null(r, "missing R2T for offset %u", off);
		cr_assert_eq(pdu_bhs_opcode(r->bhs), ISC_OP_R2T);
		cr_expect_eq(pdu_get32(r->bhs, 36), (uint32_t)n, "R2TSN");
		roff = pdu_get32(r->bhs, 40);
		rlen = pdu_get32(r->bhs, 44);
		cr_expect_eq(roff, off);
		cr_expect_leq(rlen, 16384);
		/* Answer in two Data-Out PDUs. */
		for (uint32_t d = 0, sn = 0; d < rlen; d += 8192, sn++) {
			uint32_t len = rlen - d > 8192 ? 8192 : rlen - d;

			fake_bhs(bhs, ISC_OP_DATA_OUT, d + len == rlen ? ISC_FL_F : 0, 0x30);
			memcpy(bhs + 20, r->bhs + 20, 4);
			pdu_put32(bhs, 36, sn);
			pdu_put32(bhs, 40, roff + d);
			fake_dmv_rx(C, bhs, data + roff + d, len);
		}
		r2t[n < 4 ? n : 3] = r;
		n++;
		pdu_put(r);
		off += rlen;
		fake_dmv_settle(&H.loop);
		if (off < sizeof(data))
			continue;
	}
	(void)r2t;
	cr_expect_eq(n, 2, "24 KiB in 16 KiB bursts: two R2Ts");
	cr_assert_eq(h_collect(&H, C, 0x30, back, &got, NULL), SCSI_GOOD);

	h_cdb_rw10(cdb, 0x28, 100, 64);
	h_scsi_cmd(&H, C, 0x31, ISC_FL_F | ISC_FL_R, cdb, 10, sizeof(back), NULL, 0);
	cr_assert_eq(h_collect(&H, C, 0x31, back, &got, NULL), SCSI_GOOD);
	cr_expect_eq(memcmp(back, data, sizeof(data)), 0);
}

Test(isc_scsi, data_out_with_wrong_datasn_fails_the_task_not_the_connection)
{
	uint8_t cdb[16], data[8192], back[8];
	uint8_t bhs[ISC_BHS_LEN];
	struct pdu *rsp = NULL;
	uint32_t got;

	memset(data, 0x5a, sizeof(data));
	h_cdb_rw10(cdb, 0x2a, 0, 16);
	h_scsi_cmd(&H, C, 0x40, ISC_FL_W, cdb, 10, sizeof(data), data, 4096);
	fake_bhs(bhs, ISC_OP_DATA_OUT, ISC_FL_F, 0x40);
	pdu_put32(bhs, 20, ISC_RSVD_TAG);
	pdu_put32(bhs, 36, 5);	/* should be 0 */
	pdu_put32(bhs, 40, 4096);
	fake_dmv_rx(C, bhs, data + 4096, 4096);
	cr_assert_eq(h_collect(&H, C, 0x40, back, &got, &rsp), SCSI_CHECK_CONDITION);
	cr_assert_geq(rsp->data_len, 2 + 14);
	cr_expect_eq(rsp->data[2 + 2] & 0xf, SCSI_SK_ABORTED_COMMAND);
	pdu_put(rsp);
	cr_expect_not(C->closed);
}

Test(isc_scsi, data_out_with_bad_digest_ends_check_condition_47_05_and_writes_nothing)
{
	uint8_t cdb[16], data[8192], before[8192], back[8192];
	uint8_t bhs[ISC_BHS_LEN];
	struct pdu *rsp = NULL;
	struct dmv_task *t;
	uint8_t *dst;
	uint32_t got;

	h_cdb_rw10(cdb, 0x28, 200, 16);
	h_scsi_cmd(&H, C, 0x42, ISC_FL_F | ISC_FL_R, cdb, 10, sizeof(before), NULL, 0);
	cr_assert_eq(h_collect(&H, C, 0x42, before, &got, NULL), SCSI_GOOD);
	memset(data, 0x6b, sizeof(data));
	h_cdb_rw10(cdb, 0x2a, 200, 16);
	h_scsi_cmd(&H, C, 0x41, ISC_FL_W, cdb, 10, sizeof(data), data, 4096);
	/* The unsolicited Data-Out failed its data digest (the transport rejected it). */
	fake_bhs(bhs, ISC_OP_DATA_OUT, ISC_FL_F, 0x41);
	pdu_put32(bhs, 20, ISC_RSVD_TAG);
	pdu_put32(bhs, 36, 0);
	pdu_put32(bhs, 40, 4096);
	pdu_put24(bhs, 5, 4096);
	cr_assert_eq(dmv_dataout_begin(&C->base, bhs, &t, &dst), DMV_DO_OK);
	memcpy(dst, data + 4096, 4096);
	cr_assert_eq(dmv_dataout_bad_digest(&C->base, t, bhs), 0);
	cr_assert_eq(h_collect(&H, C, 0x41, back, &got, &rsp), SCSI_CHECK_CONDITION);
	cr_assert_geq(rsp->data_len, 2 + 14);
	cr_expect_eq(rsp->data[2 + 2] & 0xf, SCSI_SK_ABORTED_COMMAND);
	cr_expect_eq(rsp->data[2 + 12], 0x47, "PROTOCOL SERVICE CRC ERROR");
	cr_expect_eq(rsp->data[2 + 13], 0x05);
	pdu_put(rsp);
	cr_expect_not(C->closed);
	h_cdb_rw10(cdb, 0x28, 200, 16);
	h_scsi_cmd(&H, C, 0x43, ISC_FL_F | ISC_FL_R, cdb, 10, sizeof(back), NULL, 0);
	cr_assert_eq(h_collect(&H, C, 0x43, back, &got, NULL), SCSI_GOOD);
	cr_expect_eq(memcmp(back, before, sizeof(back)), 0, "the failed write wrote nothing");
}

Test(isc_scsi, short_edtl_reports_overflow_residual)
{
	uint8_t cdb[16], back[4096];
	struct pdu *rsp = NULL;
	uint32_t got;

	/* The CDB asks for 8 blocks, the initiator expects 2048 bytes. */
	h_cdb_rw10(cdb, 0x28, 0, 8);
	h_scsi_cmd(&H, C, 0x50, ISC_FL_F | ISC_FL_R, cdb, 10, 2048, NULL, 0);
	cr_assert_eq(h_collect(&H, C, 0x50, back, &got, &rsp), SCSI_GOOD);
	cr_expect_eq(got, 2048, "never more than the EDTL");
	cr_expect(rsp->bhs[1] & ISC_FL_O, "overflow flag");
	cr_expect_eq(pdu_get32(rsp->bhs, 44), 4096 - 2048);
	pdu_put(rsp);
}

Test(isc_scsi, unknown_lun_gets_check_condition_with_sense)
{
	uint8_t cdb[16] = { 0x00 }, back[8];	/* TEST UNIT READY */
	uint8_t bhs[ISC_BHS_LEN];
	struct pdu *rsp = NULL;
	uint32_t got;

	fake_bhs(bhs, ISC_OP_SCSI_CMD, ISC_FL_F, 0x60);
	bhs[9] = 5;	/* LUN 5 does not exist */
	pdu_put32(bhs, 24, H.cmdsn++);
	memcpy(bhs + 32, cdb, 6);
	fake_dmv_rx(C, bhs, NULL, 0);
	cr_assert_eq(h_collect(&H, C, 0x60, back, &got, &rsp), SCSI_CHECK_CONDITION);
	cr_assert_gt(rsp->data_len, 2);
	cr_expect_eq(pdu_get16(rsp->data, 0), rsp->data_len - 2, "SenseLength then sense");
	cr_expect_eq(rsp->data[2 + 2] & 0xf, SCSI_SK_ILLEGAL_REQUEST);
	pdu_put(rsp);
}

