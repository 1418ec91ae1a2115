// SPDX-License-Identifier: MIT
/* SCSI commands through the engine and a ram LU: reads, writes with immediate, unsolicited and
 * solicited data (R2T), residuals, sense. */
#include "harness.h"

static struct h H;
static struct fake_conn *C;

static void setup(void)
{
	uint16_t st;

	h_setup(&H, H_CONF_DEFAULT);
	C = h_connect(&H);
	h_login(&H, C, H_INITIATOR, H_TARGET, 1, 0, 0, &st);
	cr_assert_eq(st, 0);
	h_clear_ua(&H, C);
}

static void teardown(void)
{
	h_teardown(&H);
}

TestSuite(isc_scsi, .init = setup, .fini = teardown);

/* Pops PDUs until the status for itt; collects Data-In into buf. Returns the status byte. */
static int collect(uint32_t itt, uint8_t *buf, uint32_t *got, struct pdu **rsp_out)
{
	struct pdu *p;
	uint32_t expect_datasn = 0;

	*got = 0;
	fake_dmv_settle(&H.loop);
	while ((p = fake_dmv_pop(C))) {
		uint8_t op = pdu_bhs_opcode(p->bhs);

		cr_assert_eq(pdu_bhs_itt(p->bhs), itt, "PDU for another task");
		if (op == ISC_OP_DATA_IN) {
			cr_expect_eq(pdu_get32(p->bhs, 36), expect_datasn++, "DataSN in order");
			memcpy(buf + pdu_get32(p->bhs, 40), p->data, p->data_len);
			*got += p->data_len;
			if (p->bhs[1] & ISC_FL_S) {
				int st = p->bhs[3];

				if (rsp_out)
					*rsp_out = p;
				else
					pdu_put(p);
				return st;
			}
			pdu_put(p);
			continue;
		}
		cr_assert_eq(op, ISC_OP_SCSI_RSP, "unexpected %s", pdu_opcode_name(op));
		{
			int st = p->bhs[3];

			if (rsp_out)
				*rsp_out = p;
			else
				pdu_put(p);
			return st;
		}
	}
	return -1;
}

Test(isc_scsi, write_immediate_then_read_back)
{
	uint8_t cdb[16], data[4096], back[4096];
	uint32_t got;

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7 + 1);
	h_cdb_rw10(cdb, 0x2a, 10, 8);
	h_scsi_cmd(&H, C, 0x10, ISC_FL_F | ISC_FL_W, cdb, 10, 4096, data, 4096);
	cr_assert_eq(collect(0x10, back, &got, NULL), SCSI_GOOD);
	cr_expect_eq(got, 0);

	h_cdb_rw10(cdb, 0x28, 10, 8);
	h_scsi_cmd(&H, C, 0x11, ISC_FL_F | ISC_FL_R, cdb, 10, 4096, NULL, 0);
	memset(back, 0, sizeof(back));
	cr_assert_eq(collect(0x11, back, &got, NULL), SCSI_GOOD);
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
	cr_assert_eq(collect(0x20, back, &got, &last), SCSI_GOOD);
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
	cr_assert_eq(collect(0x30, back, &got, NULL), SCSI_GOOD);

	h_cdb_rw10(cdb, 0x28, 100, 64);
	h_scsi_cmd(&H, C, 0x31, ISC_FL_F | ISC_FL_R, cdb, 10, sizeof(back), NULL, 0);
	cr_assert_eq(collect(0x31, back, &got, NULL), SCSI_GOOD);
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
	cr_assert_eq(collect(0x40, back, &got, &rsp), SCSI_CHECK_CONDITION);
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
	cr_assert_eq(collect(0x42, before, &got, NULL), SCSI_GOOD);
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
	cr_assert_eq(collect(0x41, back, &got, &rsp), SCSI_CHECK_CONDITION);
	cr_assert_geq(rsp->data_len, 2 + 14);
	cr_expect_eq(rsp->data[2 + 2] & 0xf, SCSI_SK_ABORTED_COMMAND);
	cr_expect_eq(rsp->data[2 + 12], 0x47, "PROTOCOL SERVICE CRC ERROR");
	cr_expect_eq(rsp->data[2 + 13], 0x05);
	pdu_put(rsp);
	cr_expect_not(C->closed);
	h_cdb_rw10(cdb, 0x28, 200, 16);
	h_scsi_cmd(&H, C, 0x43, ISC_FL_F | ISC_FL_R, cdb, 10, sizeof(back), NULL, 0);
	cr_assert_eq(collect(0x43, back, &got, NULL), SCSI_GOOD);
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
	cr_assert_eq(collect(0x50, back, &got, &rsp), SCSI_GOOD);
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
	cr_assert_eq(collect(0x60, back, &got, &rsp), SCSI_CHECK_CONDITION);
	cr_assert_gt(rsp->data_len, 2);
	cr_expect_eq(pdu_get16(rsp->data, 0), rsp->data_len - 2, "SenseLength then sense");
	cr_expect_eq(rsp->data[2 + 2] & 0xf, SCSI_SK_ILLEGAL_REQUEST);
	pdu_put(rsp);
}

/* A transport that lends registered task buffers (iSER): commands use them, give each back once
 * when the task ends, never cache them, and fall back to the gateway's own buffers when the
 * transport has none that fits. */
Test(isc_scsi, task_buffers_from_a_lending_transport)
{
	uint8_t cdb[16], data[4096], back[16384];
	uint64_t mem0 = H.gw->lps[0].data_mem;
	uint32_t got;

	memset(&fake_lend, 0, sizeof(fake_lend));
	fake_lend.max_len = 8192;
	fake_lend.max_out = 16;
	C->base.tp = &fake_dmv_lend_transport;
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 13 + 5);
	h_cdb_rw10(cdb, 0x2a, 40, 8);
	h_scsi_cmd(&H, C, 0x70, ISC_FL_F | ISC_FL_W, cdb, 10, 4096, data, 4096);
	cr_expect_eq(fake_lend.out, 1, "the write's buffer is lent while it runs");
	cr_expect_eq(H.gw->lps[0].data_mem, mem0 + 4096, "and counted in data_memory");
	cr_assert_eq(collect(0x70, back, &got, NULL), SCSI_GOOD);
	cr_expect_eq(fake_lend.out, 0, "given back when the task ended");

	h_cdb_rw10(cdb, 0x28, 40, 8);
	h_scsi_cmd(&H, C, 0x71, ISC_FL_F | ISC_FL_R, cdb, 10, 4096, NULL, 0);
	memset(back, 0, sizeof(back));
	cr_assert_eq(collect(0x71, back, &got, NULL), SCSI_GOOD);
	cr_expect_eq(got, 4096);
	cr_expect_eq(memcmp(back, data, 4096), 0, "read back through a lent buffer");
	cr_expect_eq(fake_lend.gets, 2);
	cr_expect_eq(fake_lend.puts, 2);
	cr_expect_eq(H.gw->lps[0].data_mem, mem0, "data_memory back where it was");

	/* Larger than the transport lends: the gateway's own buffer, same data. */
	h_cdb_rw10(cdb, 0x28, 40, 32);
	h_scsi_cmd(&H, C, 0x72, ISC_FL_F | ISC_FL_R, cdb, 10, 16384, NULL, 0);
	cr_expect_eq(fake_lend.out, 0, "16 KiB is not lent");
	cr_assert_eq(collect(0x72, back, &got, NULL), SCSI_GOOD);
	cr_expect_eq(got, 16384);
	cr_expect_eq(memcmp(back, data, 4096), 0);
	cr_expect_eq(fake_lend.gets, 2);

	/* A task holding a lent buffer outlives its connection: the buffer comes back when the
	 * task ends, not before. */
	h_cdb_rw10(cdb, 0x28, 0, 8);
	h_scsi_cmd(&H, C, 0x73, ISC_FL_F | ISC_FL_R, cdb, 10, 4096, NULL, 0);
	cr_expect_eq(fake_lend.out, 1);
	fake_dmv_lose(C);
	fake_dmv_settle(&H.loop);
	cr_expect(gw_list_empty(&H.gw->sessions));
	cr_expect_eq(fake_lend.out, 0, "returned once the task ended");
	cr_expect_eq(fake_lend.gets, fake_lend.puts, "each buffer given back exactly once");
	C->base.tp = &fake_dmv_transport;
}

Test(isc_scsi, one_session_holds_at_most_its_share_of_data_memory)
{
	uint8_t cdb[16];
	struct pdu *p;
	int st2 = -1, st3 = -1;

	/* 256 KiB of data memory: a session may hold 64 KiB (ISC_SESSION_MEM_SHARE 4). */
	H.gw->data_mem_max = 256 << 10;
	/* A 48 KiB write whose data never comes holds its buffer... */
	h_cdb_rw10(cdb, 0x2a, 0, 96);
	h_scsi_cmd(&H, C, 1, ISC_FL_F | ISC_FL_W, cdb, 16, 96 * 512, NULL, 0);
	/* ...so a second one would pass the share: TASK SET FULL, though the gateway has room. */
	h_cdb_rw10(cdb, 0x2a, 200, 96);
	h_scsi_cmd(&H, C, 2, ISC_FL_F | ISC_FL_W, cdb, 16, 96 * 512, NULL, 0);
	/* A small read still fits in the share and completes. */
	h_cdb_rw10(cdb, 0x28, 400, 8);
	h_scsi_cmd(&H, C, 3, ISC_FL_F | ISC_FL_R, cdb, 16, 8 * 512, NULL, 0);
	fake_dmv_settle(&H.loop);
	while ((p = fake_dmv_pop(C))) {
		if (pdu_bhs_opcode(p->bhs) == ISC_OP_SCSI_RSP && pdu_bhs_itt(p->bhs) == 2)
			st2 = p->bhs[3];
		if (pdu_bhs_itt(p->bhs) == 3 && (pdu_bhs_opcode(p->bhs) == ISC_OP_SCSI_RSP ||
						 (pdu_bhs_opcode(p->bhs) == ISC_OP_DATA_IN &&
						  (p->bhs[1] & 0x01))))
			st3 = p->bhs[3];
		pdu_put(p);
	}
	cr_expect_eq(st2, SCSI_TASK_SET_FULL, "second write: status 0x%02x", st2);
	cr_expect_eq(st3, SCSI_GOOD, "read within the share: status 0x%02x", st3);
	cr_expect_eq(H.gw->lps[0].task_set_full, 1);
	cr_expect_leq(H.gw->lps[0].data_mem, 64 << 10);
}

/* Each loop holds a share of gateway.data_memory taken from the one budget: a command whose
 * loop cannot grow its share because other loops hold the rest is answered TASK SET FULL, and
 * runs once they gave it back. (Loop 1's share is set by hand: this harness runs one loop.) */
Test(isc_scsi, loop_shares_of_data_memory_come_from_one_budget)
{
	uint8_t cdb[16], back[4096];
	uint32_t got;
	struct pdu *p;
	int st = -1;

	H.gw->data_mem_max = 256 << 10;
	/* A 48 KiB write whose data never comes: loop 0's share grows to hold it. */
	h_cdb_rw10(cdb, 0x2a, 0, 96);
	h_scsi_cmd(&H, C, 1, ISC_FL_F | ISC_FL_W, cdb, 16, 96 * 512, NULL, 0);
	fake_dmv_settle(&H.loop);
	while ((p = fake_dmv_pop(C)))
		pdu_put(p);
	cr_expect_geq(H.gw->lps[0].data_mem_held, 96 * 512);
	cr_expect_eq(H.gw->data_mem_held, H.gw->lps[0].data_mem_held, "one loop: its share is all");
	cr_expect_leq(H.gw->data_mem_held, 256 << 10);
	/* Another loop takes all the budget has left. */
	H.gw->lps[1].data_mem_held = (256 << 10) - H.gw->data_mem_held;
	__atomic_fetch_add(&H.gw->data_mem_held, H.gw->lps[1].data_mem_held, __ATOMIC_RELAXED);
	/* An 8 KiB read beyond loop 0's share: the budget is spent, TASK SET FULL. */
	h_cdb_rw10(cdb, 0x28, 400, 16);
	h_scsi_cmd(&H, C, 2, ISC_FL_F | ISC_FL_R, cdb, 16, 16 * 512, NULL, 0);
	fake_dmv_settle(&H.loop);
	while ((p = fake_dmv_pop(C))) {
		if (pdu_bhs_opcode(p->bhs) == ISC_OP_SCSI_RSP && pdu_bhs_itt(p->bhs) == 2)
			st = p->bhs[3];
		pdu_put(p);
	}
	cr_expect_eq(st, SCSI_TASK_SET_FULL, "status 0x%02x", st);
	cr_expect_eq(H.gw->lps[0].task_set_full, 1);
	/* The other loop gives its share back: the retried read runs. */
	__atomic_fetch_sub(&H.gw->data_mem_held, H.gw->lps[1].data_mem_held, __ATOMIC_RELAXED);
	H.gw->lps[1].data_mem_held = 0;
	h_cdb_rw10(cdb, 0x28, 400, 8);
	h_scsi_cmd(&H, C, 3, ISC_FL_F | ISC_FL_R, cdb, 16, 8 * 512, NULL, 0);
	cr_expect_eq(collect(3, back, &got, NULL), SCSI_GOOD);
	cr_expect_eq(got, 4096);
}
