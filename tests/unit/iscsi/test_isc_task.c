// SPDX-License-Identifier: MIT
/* Tasks (isc_task.c): the CmdSN queue that hands commands on in order, what a failed session's
 * queued commands leave behind, and task buffers within gateway.data_memory (the session's and
 * each loop's share, buffers a transport lends). */
#include "harness.h"

static struct h H;
static struct fake_conn *C;

static void setup(void)
{
	C = h_setup_session(&H, H_CONF_DEFAULT, true);	/* queue_depth 4 */
}

static void teardown(void)
{
	h_teardown(&H);
}

TestSuite(isc_task, .init = setup, .fini = teardown);

Test(isc_task, out_of_order_commands_wait_for_the_gap)
{
	struct pdu *rsp;
	uint32_t first = H.cmdsn;

	h_tur(C, 0x22, first + 2);
	h_tur(C, 0x21, first + 1);
	fake_dmv_settle(&H.loop);
	cr_expect_eq(C->nsent, 0, "nothing runs before CmdSN %u arrives", first);
	h_tur(C, 0x20, first);
	fake_dmv_settle(&H.loop);
	cr_assert_eq(C->nsent, 3);
	for (uint32_t i = 0; i < 3; i++) {
		rsp = fake_dmv_pop(C);
		cr_expect_eq(pdu_bhs_itt(rsp->bhs), 0x20 + i, "answered in CmdSN order");
		pdu_put(rsp);
	}
	h_tur(C, 0x23, first + 3);
	fake_dmv_settle(&H.loop);
	rsp = fake_dmv_pop(C);
	cr_assert_not_null(rsp);
	cr_expect_eq(pdu_get32(rsp->bhs, 28), first + 4);
	pdu_put(rsp);
}

/* A session whose connection is lost while commands wait for a CmdSN gap to fill fails (error
 * recovery level 0): the waiting commands go with it, and nothing of the session is left. */
Test(isc_task, queued_commands_of_a_lost_connection_are_freed_with_the_session)
{
	uint32_t first = H.cmdsn;

	h_tur(C, 0x41, first + 1);
	h_tur(C, 0x42, first + 2);
	fake_dmv_settle(&H.loop);
	cr_assert_eq(C->nsent, 0, "both wait for CmdSN %u", first);
	cr_assert_eq(H.gw->lps[0].ntasks, 2, "two tasks queued");
	fake_dmv_lose(C);
	fake_dmv_settle(&H.loop);
	cr_expect_eq(H.gw->lps[0].ntasks, 0, "the queued tasks are freed");
	cr_expect(gw_list_empty(&H.gw->sessions), "and the session is gone");
	cr_expect(isc_gw_idle(H.gw));
}

/* A transport that lends registered task buffers (iSER): commands use them, give each back once
 * when the task ends, never cache them, and fall back to the gateway's own buffers when the
 * transport has none that fits. */
Test(isc_task, task_buffers_from_a_lending_transport)
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
	cr_assert_eq(h_collect(&H, C, 0x70, back, &got, NULL), SCSI_GOOD);
	cr_expect_eq(fake_lend.out, 0, "given back when the task ended");

	h_cdb_rw10(cdb, 0x28, 40, 8);
	h_scsi_cmd(&H, C, 0x71, ISC_FL_F | ISC_FL_R, cdb, 10, 4096, NULL, 0);
	memset(back, 0, sizeof(back));
	cr_assert_eq(h_collect(&H, C, 0x71, back, &got, NULL), SCSI_GOOD);
	cr_expect_eq(got, 4096);
	cr_expect_eq(memcmp(back, data, 4096), 0, "read back through a lent buffer");
	cr_expect_eq(fake_lend.gets, 2);
	cr_expect_eq(fake_lend.puts, 2);
	cr_expect_eq(H.gw->lps[0].data_mem, mem0, "data_memory back where it was");

	/* Larger than the transport lends: the gateway's own buffer, same data. */
	h_cdb_rw10(cdb, 0x28, 40, 32);
	h_scsi_cmd(&H, C, 0x72, ISC_FL_F | ISC_FL_R, cdb, 10, 16384, NULL, 0);
	cr_expect_eq(fake_lend.out, 0, "16 KiB is not lent");
	cr_assert_eq(h_collect(&H, C, 0x72, back, &got, NULL), SCSI_GOOD);
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

Test(isc_task, one_session_holds_at_most_its_share_of_data_memory)
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

/* The status the SCSI Response (or final Data-In) for itt carried on c; else R2T when an R2T
 * for it came (a write taken, waiting for its data), else -1. Takes every PDU waiting on c. */
#define R2T 0x100
static int st_of(struct fake_conn *c, uint32_t itt)
{
	struct pdu *p;
	int st = -1;

	fake_dmv_settle(&H.loop);
	while ((p = fake_dmv_pop(c))) {
		if (pdu_bhs_itt(p->bhs) == itt && (pdu_bhs_opcode(p->bhs) == ISC_OP_SCSI_RSP ||
						   (pdu_bhs_opcode(p->bhs) == ISC_OP_DATA_IN &&
						    (p->bhs[1] & 0x01))))
			st = p->bhs[3];
		else if (pdu_bhs_itt(p->bhs) == itt && pdu_bhs_opcode(p->bhs) == ISC_OP_R2T &&
			 st == -1)
			st = R2T;
		pdu_put(p);
	}
	return st;
}

/* A new session (ISID ending in isid_last) of initiator from peer "ADDR:PORT": to H_TARGET
 * for H_INITIATOR, to the harness's second target (any initiator) for another name. */
static struct fake_conn *session_from(const char *initiator, const char *peer, uint8_t isid_last)
{
	struct fake_conn *c = h_connect(&H);
	uint16_t st;

	snprintf(c->base.peer, sizeof(c->base.peer), "%s", peer);
	h_login(&H, c, initiator, strcmp(initiator, H_INITIATOR) ? "iqn.2026-11.org.isergw:t2" :
		H_TARGET, isid_last, 0, 0, &st);
	cr_assert_eq(st, 0, "login refused: status 0x%04x", st);
	h_clear_ua(&H, c);
	return c;
}

/* Many sessions of one initiator name, or from one address under many names, hold at most
 * the share one session may hold, together; another initiator from another address is not
 * held back by them. */
Test(isc_task, one_initiator_and_one_address_hold_at_most_a_share_across_their_sessions)
{
	struct fake_conn *same_name, *other, *same_addr;
	uint8_t cdb[16];
	uint32_t sn;

	H.gw->data_mem_max = 256 << 10;		/* a share: 64 KiB */
	/* C (H_INITIATOR from 127.0.0.1): a 48 KiB write whose data never comes. */
	h_cdb_rw10(cdb, 0x2a, 0, 96);
	h_scsi_cmd(&H, C, 1, ISC_FL_F | ISC_FL_W, cdb, 16, 96 * 512, NULL, 0);
	cr_expect_eq(st_of(C, 1), R2T, "the write waits for its data");
	/* A second session of the same name, from another address: its own first 48 KiB write
	 * would take the name past its share. A small read still fits. */
	same_name = session_from(H_INITIATOR, "127.0.0.2:40002", 2);
	sn = H.cmdsn;
	h_cdb_rw10(cdb, 0x2a, 200, 96);
	h_scsi_cmd(&H, same_name, 2, ISC_FL_F | ISC_FL_W, cdb, 16, 96 * 512, NULL, 0);
	cr_expect_eq(st_of(same_name, 2), SCSI_TASK_SET_FULL, "the initiator's share is spent");
	h_cdb_rw10(cdb, 0x28, 400, 8);
	h_scsi_cmd(&H, same_name, 3, ISC_FL_F | ISC_FL_R, cdb, 16, 8 * 512, NULL, 0);
	cr_expect_eq(st_of(same_name, 3), SCSI_GOOD, "a read within the initiator's share");
	/* Another name from C's address: the address's share is spent too. */
	same_addr = session_from("iqn.2026-11.org.example:another-name", "127.0.0.1:40003", 3);
	h_cdb_rw10(cdb, 0x2a, 600, 96);
	h_scsi_cmd(&H, same_addr, 4, ISC_FL_F | ISC_FL_W, cdb, 16, 96 * 512, NULL, 0);
	cr_expect_eq(st_of(same_addr, 4), SCSI_TASK_SET_FULL, "the address's share is spent");
	/* Another initiator from another address: served, its write waits for its data. */
	other = session_from("iqn.2026-11.org.example:other-host", "127.0.0.4:40004", 4);
	h_cdb_rw10(cdb, 0x2a, 800, 96);
	h_scsi_cmd(&H, other, 5, ISC_FL_F | ISC_FL_W, cdb, 16, 96 * 512, NULL, 0);
	cr_expect_eq(st_of(other, 5), R2T, "another host's write is taken");
	cr_expect_eq(H.gw->lps[0].task_set_full, 2);
	/* C's session gone (its held write with it): the name's and the address's bytes are
	 * back, and the second session of the name is served again. */
	fake_dmv_lose(C);
	fake_dmv_settle(&H.loop);
	C->base.tp = &fake_dmv_transport;
	H.cmdsn = sn + 2;	/* the session's next CmdSN */
	h_cdb_rw10(cdb, 0x2a, 1000, 96);
	h_scsi_cmd(&H, same_name, 6, ISC_FL_F | ISC_FL_W, cdb, 16, 96 * 512, NULL, 0);
	cr_expect_eq(st_of(same_name, 6), R2T, "the name's share came back with C's session");
}

/* Each loop holds a share of gateway.data_memory taken from the one budget: a command whose
 * loop cannot grow its share because other loops hold the rest is answered TASK SET FULL, and
 * runs once they gave it back. (Loop 1's share is set by hand: this harness runs one loop.) */
Test(isc_task, loop_shares_of_data_memory_come_from_one_budget)
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
	cr_expect_eq(h_collect(&H, C, 3, back, &got, NULL), SCSI_GOOD);
	cr_expect_eq(got, 4096);
}
