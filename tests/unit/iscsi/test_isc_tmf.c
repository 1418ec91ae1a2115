// SPDX-License-Identifier: MIT
/* Task management: ABORT TASK of a write waiting for data, unknown tasks, LUN checks, the
 * functions not supported at ErrorRecoveryLevel 0. */
#include "harness.h"

static struct h H;
static struct fake_conn *C;

/* The asker's session, on loop 0. */
static void login_c(void)
{
	uint16_t st;

	C = h_connect(&H);
	h_login(&H, C, H_INITIATOR, H_TARGET, 1, 0, 0, &st);
	cr_assert_eq(st, 0);
	h_clear_ua(&H, C);
}

static void setup(void)
{
	h_setup(&H, H_CONF_DEFAULT);
	login_c();
}

static void teardown(void)
{
	h_teardown(&H);
}

TestSuite(isc_tmf, .init = setup, .fini = teardown);

static struct pdu *tmf(uint8_t func, uint32_t itt, uint32_t rtt, uint32_t refcmdsn,
			   uint8_t lun)
{
	uint8_t bhs[ISC_BHS_LEN];

	fake_bhs(bhs, ISC_OP_TMF_REQ | ISC_BHS_I, (uint8_t)(ISC_FL_F | func), itt);
	bhs[9] = lun;
	pdu_put32(bhs, 20, rtt);
	pdu_put32(bhs, 24, H.cmdsn);
	pdu_put32(bhs, 32, refcmdsn);
	fake_dmv_rx(C, bhs, NULL, 0);
	fake_dmv_settle(&H.loop);
	return fake_dmv_pop(C);
}

Test(isc_tmf, abort_task_waiting_for_r2t_data)
{
	uint8_t cdb[16], data[32768] = { 0 };
	uint8_t bhs[ISC_BHS_LEN];
	struct pdu *r2t, *rsp;
	uint32_t cmdsn = H.cmdsn;

	h_cdb_rw10(cdb, 0x2a, 0, 64);
	h_scsi_cmd(&H, C, 0x70, ISC_FL_F | ISC_FL_W, cdb, 10, sizeof(data), NULL, 0);
	fake_dmv_settle(&H.loop);
	r2t = fake_dmv_pop(C);
	cr_assert_not_null(r2t);
	cr_assert_eq(pdu_bhs_opcode(r2t->bhs), ISC_OP_R2T);
	rsp = tmf(1, 0x71, 0x70, cmdsn, 0);
	cr_assert_not_null(rsp);
	cr_expect_eq(pdu_bhs_opcode(rsp->bhs), ISC_OP_TMF_RSP);
	cr_expect_eq(pdu_bhs_itt(rsp->bhs), 0x71);
	cr_expect_eq(rsp->bhs[2], 0, "function complete");
	pdu_put(rsp);
	cr_expect_eq(C->aborts, 1, "the datamover stopped the transfer");
	/* Late data for the aborted task is dropped quietly. */
	fake_bhs(bhs, ISC_OP_DATA_OUT, ISC_FL_F, 0x70);
	memcpy(bhs + 20, r2t->bhs + 20, 4);
	pdu_put32(bhs, 40, pdu_get32(r2t->bhs, 40));
	fake_dmv_rx(C, bhs, data, 8192);
	fake_dmv_settle(&H.loop);
	cr_expect_eq(C->nsent, 0, "no SCSI Response for an aborted task");
	cr_expect_not(C->closed);
	pdu_put(r2t);
}

Test(isc_tmf, abort_of_a_finished_task_is_task_does_not_exist)
{
	struct pdu *rsp;

	/* RefCmdSN below ExpCmdSN: the command came and went. */
	rsp = tmf(1, 0x80, 0x1234, H.cmdsn - 1, 0);
	cr_assert_not_null(rsp);
	cr_expect_eq(rsp->bhs[2], 1);
	pdu_put(rsp);
}

Test(isc_tmf, lun_reset_of_a_missing_lun)
{
	struct pdu *rsp = tmf(5, 0x81, ISC_RSVD_TAG, 0, 9);

	cr_assert_not_null(rsp);
	cr_expect_eq(rsp->bhs[2], 2, "LUN does not exist");
	pdu_put(rsp);
	rsp = tmf(5, 0x82, ISC_RSVD_TAG, 0, 0);
	cr_assert_not_null(rsp);
	cr_expect_eq(rsp->bhs[2], 0);
	pdu_put(rsp);
}

Test(isc_tmf, clear_aca_and_task_reassign_are_refused)
{
	struct pdu *rsp = tmf(3, 0x90, ISC_RSVD_TAG, 0, 0);

	cr_assert_not_null(rsp);
	cr_expect_eq(rsp->bhs[2], 5, "task management function not supported");
	pdu_put(rsp);
	rsp = tmf(8, 0x91, 0x70, 0, 0);
	cr_assert_not_null(rsp);
	cr_expect_eq(rsp->bhs[2], 4, "allegiance reassignment not supported");
	pdu_put(rsp);
}

Test(isc_tmf, target_cold_reset_answers_then_drops_the_session)
{
	struct pdu *rsp = tmf(7, 0x92, ISC_RSVD_TAG, 0, 0);

	cr_assert_not_null(rsp);
	cr_expect_eq(rsp->bhs[2], 0);
	pdu_put(rsp);
	cr_expect(C->closed);
}

/* SAM-5 with TAS: another session's task the reset aborted (ITT itt on c2) is answered TASK
 * ABORTED, and the reset (on C) only after it. */
static void expect_task_aborted_then_reset_answered(struct fake_conn *c2, uint32_t itt)
{
	struct pdu *rsp = fake_dmv_pop(c2);

	cr_assert_not_null(rsp, "the other session's task is answered");
	cr_expect_eq(pdu_bhs_opcode(rsp->bhs), ISC_OP_SCSI_RSP);
	cr_expect_eq(pdu_bhs_itt(rsp->bhs), itt);
	cr_expect_eq(rsp->bhs[3], SCSI_TASK_ABORTED, "status 0x%02x", rsp->bhs[3]);
	pdu_put(rsp);
	rsp = fake_dmv_pop(C);
	cr_assert_not_null(rsp, "the reset is answered once the other task was");
	cr_expect_eq(pdu_bhs_opcode(rsp->bhs), ISC_OP_TMF_RSP);
	cr_expect_eq(rsp->bhs[2], 0, "function complete");
	pdu_put(rsp);
}

/* A LUN RESET from one session ends another session's write that waits for its data the way
 * the control mode page's TAS bit promises: once the data is in, TASK ABORTED status, not
 * silence (its initiator would wait for ever); and the reset is answered after it. */
Test(isc_tmf, lun_reset_answers_another_sessions_write_task_aborted)
{
	uint8_t cdb[16], bhs[ISC_BHS_LEN], data[8192];
	struct fake_conn *c2 = h_connect(&H);
	struct pdu *r2t, *rsp;
	uint32_t cmdsn1 = H.cmdsn, cmdsn2;
	uint16_t st;

	memset(data, 0xa5, sizeof(data));
	cr_assert_neq(h_login(&H, c2, H_INITIATOR, H_TARGET, 2, 0, 0, &st), 0);
	cr_assert_eq(st, 0);
	h_clear_ua(&H, c2);
	h_cdb_rw10(cdb, 0x2a, 0, 16);
	h_scsi_cmd(&H, c2, 0x70, ISC_FL_F | ISC_FL_W, cdb, 10, sizeof(data), NULL, 0);
	cmdsn2 = H.cmdsn;
	fake_dmv_settle(&H.loop);
	r2t = fake_dmv_pop(c2);
	cr_assert_not_null(r2t);
	cr_assert_eq(pdu_bhs_opcode(r2t->bhs), ISC_OP_R2T);

	H.cmdsn = cmdsn1;
	rsp = tmf(5, 0x71, ISC_RSVD_TAG, 0, 0);
	cr_expect_null(rsp, "the reset waits for the other session's write");
	if (rsp)
		pdu_put(rsp);
	cr_expect_eq(c2->aborts, 0, "the other session's data transfer goes on");

	H.cmdsn = cmdsn2;
	fake_bhs(bhs, ISC_OP_DATA_OUT, ISC_FL_F, 0x70);
	memcpy(bhs + 20, r2t->bhs + 20, 4);
	pdu_put32(bhs, 40, pdu_get32(r2t->bhs, 40));
	fake_dmv_rx(c2, bhs, data, sizeof(data));
	fake_dmv_settle(&H.loop);
	expect_task_aborted_then_reset_answered(c2, 0x70);
	pdu_put(r2t);
}

/* The same write, aborted by its own session's ABORT TASK while the other session's LUN RESET
 * waits for it: both TMFs are answered (a task answers one TMF; the other does not wait). */
Test(isc_tmf, abort_task_of_a_write_another_sessions_reset_waits_for)
{
	uint8_t cdb[16], bhs[ISC_BHS_LEN];
	struct fake_conn *c2 = h_connect(&H);
	struct pdu *r2t, *rsp;
	uint32_t cmdsn1 = H.cmdsn, cmdsn2, wcmdsn;
	uint16_t st;

	cr_assert_neq(h_login(&H, c2, H_INITIATOR, H_TARGET, 2, 0, 0, &st), 0);
	h_clear_ua(&H, c2);
	h_cdb_rw10(cdb, 0x2a, 0, 16);
	wcmdsn = H.cmdsn;
	h_scsi_cmd(&H, c2, 0x70, ISC_FL_F | ISC_FL_W, cdb, 10, 8192, NULL, 0);
	cmdsn2 = H.cmdsn;
	fake_dmv_settle(&H.loop);
	r2t = fake_dmv_pop(c2);
	cr_assert_not_null(r2t);

	H.cmdsn = cmdsn1;
	rsp = tmf(5, 0x71, ISC_RSVD_TAG, 0, 0);
	cr_expect_null(rsp, "the reset waits for the other session's write");
	if (rsp)
		pdu_put(rsp);

	fake_bhs(bhs, ISC_OP_TMF_REQ | ISC_BHS_I, (uint8_t)(ISC_FL_F | 1), 0x72);
	pdu_put32(bhs, 20, 0x70);
	pdu_put32(bhs, 24, cmdsn2);
	pdu_put32(bhs, 32, wcmdsn);
	fake_dmv_rx(c2, bhs, NULL, 0);
	fake_dmv_settle(&H.loop);
	rsp = fake_dmv_pop(c2);
	cr_assert_not_null(rsp, "ABORT TASK answered");
	cr_expect_eq(pdu_bhs_opcode(rsp->bhs), ISC_OP_TMF_RSP);
	cr_expect_eq(rsp->bhs[2], 0, "function complete");
	pdu_put(rsp);
	cr_expect_null(fake_dmv_pop(c2), "no SCSI Response for the task its own session aborted");
	rsp = fake_dmv_pop(C);
	cr_assert_not_null(rsp, "the reset is answered once the write ended");
	cr_expect_eq(pdu_bhs_opcode(rsp->bhs), ISC_OP_TMF_RSP);
	cr_expect_eq(rsp->bhs[2], 0);
	pdu_put(rsp);
	pdu_put(r2t);
}

/* ---- A TMF whose tasks are on two loops: the asker's session on loop 0, another
 * session of the target on loop 1. Both loops run on the test's thread (h_settle). */

static struct gw_loop L1;
static struct gw_loops LS;

static void loops_setup(void)
{
	h_setup_loops(&H, H_CONF_DEFAULT, &L1, &LS);
	login_c();
}

static void loops_teardown(void)
{
	h_teardown_loops(&H);
}

TestSuite(isc_tmf_loops, .init = loops_setup, .fini = loops_teardown);

/* A session on loop 1 with a write waiting for its data (its R2T returned). */
static struct fake_conn *loop1_write(uint32_t itt, struct pdu **r2t, uint32_t *cmdsn)
{
	struct fake_conn *c2 = h_connect_on_loop1(&H);
	uint8_t cdb[16];
	uint16_t st;

	cr_assert_neq(h_login(&H, c2, H_INITIATOR, H_TARGET, 2, 0, 0, &st), 0);
	cr_assert_eq(st, 0);
	cr_assert_eq(((struct isc_conn *)c2->base.priv)->sess->lp->idx, 1,
		     "the second session lives on loop 1");
	h_clear_ua(&H, c2);
	h_cdb_rw10(cdb, 0x2a, 0, 16);
	h_scsi_cmd(&H, c2, itt, ISC_FL_F | ISC_FL_W, cdb, 10, 8192, NULL, 0);
	*cmdsn = H.cmdsn;
	h_settle(&H);
	*r2t = fake_dmv_pop(c2);
	cr_assert_not_null(*r2t);
	cr_assert_eq(pdu_bhs_opcode((*r2t)->bhs), ISC_OP_R2T);
	return c2;
}

/* The write's data, as its R2T asked; both loops run. */
static void loop1_write_data(struct fake_conn *c2, uint32_t itt, const struct pdu *r2t)
{
	uint8_t bhs[ISC_BHS_LEN], data[8192];

	memset(data, 0x5a, sizeof(data));
	fake_bhs(bhs, ISC_OP_DATA_OUT, ISC_FL_F, itt);
	memcpy(bhs + 20, r2t->bhs + 20, 4);
	pdu_put32(bhs, 40, pdu_get32(r2t->bhs, 40));
	fake_dmv_rx(c2, bhs, data, sizeof(data));
	h_settle(&H);
}

/* LUN RESET from loop 0's session with CmdSN cmdsn, received (no loop run yet). */
static void lun_reset_from_loop0(uint32_t itt, uint32_t cmdsn)
{
	uint8_t bhs[ISC_BHS_LEN];

	fake_bhs(bhs, ISC_OP_TMF_REQ | ISC_BHS_I, (uint8_t)(ISC_FL_F | 5), itt);
	pdu_put32(bhs, 20, ISC_RSVD_TAG);
	pdu_put32(bhs, 24, cmdsn);
	fake_dmv_rx(C, bhs, NULL, 0);
}

/* SAM-5: the TMF's response only once every task it aborted has ended, the ones another loop
 * holds included; with TAS, the third party is answered TASK ABORTED first. */
Test(isc_tmf_loops, lun_reset_waits_for_a_write_on_the_other_loop)
{
	uint32_t cmdsn1 = H.cmdsn, cmdsn2;
	struct pdu *r2t;
	struct fake_conn *c2 = loop1_write(0x70, &r2t, &cmdsn2);

	lun_reset_from_loop0(0x71, cmdsn1);
	h_settle(&H);
	cr_expect_null(fake_dmv_pop(C), "no TMF response while loop 1's write is still alive");
	cr_expect_eq(c2->aborts, 0, "the other session's data transfer goes on");

	H.cmdsn = cmdsn2;
	loop1_write_data(c2, 0x70, r2t);
	expect_task_aborted_then_reset_answered(c2, 0x70);
	pdu_put(r2t);
}

/* The same with loop 1's task inside the SCSI core: a READ of a session on loop 1 crossing to
 * its LU's owner, loop 0, when the reset arrives. Loop 1 asks the owner to abort it, the owner
 * ends it TASK ABORTED through its done, back on loop 1; only then may the reset be answered. */
Test(isc_tmf_loops, lun_reset_waits_for_a_command_of_the_other_loop_in_the_scsi_core)
{
	struct fake_conn *c2 = h_connect_on_loop1(&H);
	uint32_t cmdsn1 = H.cmdsn;	/* each session has its own CmdSN: this is the asker's */
	uint8_t cdb[16];
	uint16_t st;

	cr_assert_neq(h_login(&H, c2, H_INITIATOR, H_TARGET, 2, 0, 0, &st), 0);
	h_clear_ua(&H, c2);
	h_cdb_rw10(cdb, 0x28, 0, 8);
	h_scsi_cmd(&H, c2, 0x70, ISC_FL_F | ISC_FL_R, cdb, 10, 4096, NULL, 0);
	/* Delivered on loop 1, its submit on its way to loop 0 (nothing has run yet). */
	cr_assert_eq(H.gw->lps[1].ntasks, 1);
	lun_reset_from_loop0(0x71, cmdsn1);
	cr_expect_null(fake_dmv_pop(C), "no TMF response: loop 1 has not even seen the reset");
	/* Loop 1 aborts its task (a request to the owner) and holds its share; the owner
	 * runs the submit, sees the request and ends the READ TASK ABORTED, back to loop 1. */
	fake_dmv_settle(&L1);
	cr_expect_null(fake_dmv_pop(C));
	cr_expect_null(fake_dmv_pop(c2), "the READ has not reached its LU's owner yet");
	fake_dmv_settle(&H.loop);
	cr_expect_null(fake_dmv_pop(C), "no TMF response while loop 1's READ is in the core");
	cr_expect_eq(H.gw->lps[1].ntasks, 1);
	h_settle(&H);
	expect_task_aborted_then_reset_answered(c2, 0x70);
}

/* The asker's connection dies while loop 1 still holds its share: loop 1's answer arrives for
 * a TMF without a connection (nothing freed under it: the sanitized build checks), the third
 * party is still answered, and everything ends. */
Test(isc_tmf_loops, lun_reset_whose_connection_dies_before_the_other_loop_answers)
{
	uint32_t cmdsn1 = H.cmdsn, cmdsn2;
	struct pdu *r2t, *rsp;
	struct fake_conn *c2 = loop1_write(0x70, &r2t, &cmdsn2);

	/* The abort is on its way to loop 1 when the asker goes. */
	lun_reset_from_loop0(0x71, cmdsn1);
	fake_dmv_settle(&H.loop);
	fake_dmv_lose(C);
	fake_dmv_settle(&H.loop);
	cr_expect(C->closed);
	h_settle(&H);
	cr_expect_eq(H.gw->lps[1].ntasks, 1, "loop 1's write waits for its data");

	H.cmdsn = cmdsn2;
	loop1_write_data(c2, 0x70, r2t);
	rsp = fake_dmv_pop(c2);
	cr_assert_not_null(rsp, "loop 1's write is answered");
	cr_expect_eq(rsp->bhs[3], SCSI_TASK_ABORTED, "status 0x%02x", rsp->bhs[3]);
	pdu_put(rsp);
	cr_expect_null(fake_dmv_pop(C), "no response on the dead connection");
	cr_expect_eq(H.gw->lps[1].ntasks, 0);
	cr_expect_eq(__atomic_load_n(&H.gw->msgs, __ATOMIC_ACQUIRE), 0,
		     "loop 1's answer arrived and was counted");
	pdu_put(r2t);
}
