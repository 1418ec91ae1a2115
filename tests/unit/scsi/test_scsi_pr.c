// SPDX-License-Identifier: MIT
#include "scsi_test.h"

static struct tenv e;

static void setup(void)
{
	tenv_init(&e);
	cr_assert_eq(tenv_add_lu(&e, 0, 1 << 20, 512, true, false), 0);
	tenv_clear_ua(&e, e.a, 0);
	tenv_clear_ua(&e, e.b, 0);
}

static void teardown(void)
{
	tenv_fini(&e);
}

TestSuite(scsi_pr, .init = setup, .fini = teardown);

static int prout(struct scsi_itn *itn, uint8_t sa, uint8_t type, uint64_t key, uint64_t sakey,
		 struct tcmd *t)
{
	uint8_t p[24] = { 0 };

	for (int i = 0; i < 8; i++) {
		p[i] = (uint8_t)(key >> (56 - 8 * i));
		p[8 + i] = (uint8_t)(sakey >> (56 - 8 * i));
	}
	return tcmd_run(&e, t, itn, 0, CDB(0x5f, sa, type, 0, 0, 0, 0, 0, 24, 0), p, 24,
			SCSI_DIR_WRITE);
}

static int rd(struct scsi_itn *itn, struct tcmd *t)
{
	static uint8_t b[512];

	return tcmd_run(&e, t, itn, 0, CDB(0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0), b, 512,
			SCSI_DIR_READ);
}

static int wr(struct scsi_itn *itn, struct tcmd *t)
{
	static uint8_t b[512];

	return tcmd_run(&e, t, itn, 0, CDB(0x2a, 0, 0, 0, 0, 0, 0, 0, 1, 0), b, 512,
			SCSI_DIR_WRITE);
}

Test(scsi_pr, register_read_keys_and_generation)
{
	uint8_t b[64];
	struct tcmd t;

	cr_assert_eq(prout(e.a, 0x00, 0, 0, 0xaa, &t), SCSI_GOOD);
	cr_assert_eq(prout(e.b, 0x06, 0, 0, 0xbb, &t), SCSI_GOOD);
	/* REGISTER with the wrong current key conflicts. */
	cr_assert_eq(prout(e.a, 0x00, 0, 0x1234, 0xcc, &t), SCSI_RESERVATION_CONFLICT);
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x5e, 0, 0, 0, 0, 0, 0, 0, 64, 0), b, 64,
			      SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(be32(b), 2, "generation");
	cr_assert_eq(be32(b + 4), 16);
	cr_assert_eq(be64(b + 8), 0xaa);
	cr_assert_eq(be64(b + 16), 0xbb);
	/* Unregister. */
	cr_assert_eq(prout(e.b, 0x00, 0, 0xbb, 0, &t), SCSI_GOOD);
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x5e, 0, 0, 0, 0, 0, 0, 0, 64, 0), b, 64,
			      SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(be32(b + 4), 8);
	/* Wrong parameter list length. */
	tcmd_run(&e, &t, e.a, 0, CDB(0x5f, 0, 0, 0, 0, 0, 0, 0, 20, 0), b, 20, SCSI_DIR_WRITE);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x1a, 0x00);
}

Test(scsi_pr, write_exclusive_conflicts)
{
	uint8_t b[64];
	struct tcmd t;

	prout(e.a, 0x00, 0, 0, 0xaa, &t);
	prout(e.b, 0x00, 0, 0, 0xbb, &t);
	cr_assert_eq(prout(e.a, 0x01, 1, 0xaa, 0, &t), SCSI_GOOD);
	/* Someone else's reservation cannot be taken. */
	cr_assert_eq(prout(e.b, 0x01, 3, 0xbb, 0, &t), SCSI_RESERVATION_CONFLICT);
	cr_assert_eq(rd(e.a, &t), SCSI_GOOD);
	cr_assert_eq(wr(e.a, &t), SCSI_GOOD);
	cr_assert_eq(rd(e.b, &t), SCSI_GOOD, "WE: others read");
	cr_assert_eq(wr(e.b, &t), SCSI_RESERVATION_CONFLICT, "WE: others do not write");
	cr_assert_eq(t.cmd.sense_len, 0);
	/* INQUIRY and READ CAPACITY are never in conflict. */
	cr_assert_eq(tcmd_run(&e, &t, e.b, 0, CDB(0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0), b, 8,
			      SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(tcmd_run(&e, &t, e.b, 0, CDB(0x5e, 1, 0, 0, 0, 0, 0, 0, 64, 0), b, 64,
			      SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(be32(b + 4), 16);
	cr_assert_eq(be64(b + 8), 0xaa);
	cr_assert_eq(b[21] & 0x0f, 1);
	cr_assert_eq(prout(e.a, 0x02, 1, 0xaa, 0, &t), SCSI_GOOD);
	cr_assert_eq(wr(e.b, &t), SCSI_GOOD, "released");
}

Test(scsi_pr, exclusive_access_registrants_only)
{
	struct tcmd t;

	prout(e.a, 0x00, 0, 0, 0xaa, &t);
	cr_assert_eq(prout(e.a, 0x01, 6, 0xaa, 0, &t), SCSI_GOOD);
	cr_assert_eq(rd(e.b, &t), SCSI_RESERVATION_CONFLICT, "unregistered: no access");
	prout(e.b, 0x00, 0, 0, 0xbb, &t);
	cr_assert_eq(rd(e.b, &t), SCSI_GOOD);
	cr_assert_eq(wr(e.b, &t), SCSI_GOOD);
	/* Releasing an RO reservation tells the other registrants. */
	cr_assert_eq(prout(e.a, 0x02, 6, 0xaa, 0, &t), SCSI_GOOD);
	tcmd_run(&e, &t, e.b, 0, CDB(0x00, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE);
	cr_assert_sense(&t, SCSI_SK_UNIT_ATTENTION, 0x2a, 0x04);
}

Test(scsi_pr, preempt_removes_and_tells)
{
	uint8_t b[64];
	struct tcmd t;

	prout(e.a, 0x00, 0, 0, 0xaa, &t);
	prout(e.b, 0x00, 0, 0, 0xbb, &t);
	cr_assert_eq(prout(e.a, 0x01, 3, 0xaa, 0, &t), SCSI_GOOD);
	cr_assert_eq(rd(e.b, &t), SCSI_RESERVATION_CONFLICT, "EA");
	/* B preempts A's reservation and registration. */
	cr_assert_eq(prout(e.b, 0x04, 1, 0xbb, 0xaa, &t), SCSI_GOOD);
	tcmd_run(&e, &t, e.a, 0, CDB(0x00, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE);
	cr_assert_sense(&t, SCSI_SK_UNIT_ATTENTION, 0x2a, 0x05);
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x5e, 1, 0, 0, 0, 0, 0, 0, 64, 0), b, 64,
			      SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(be64(b + 8), 0xbb);
	cr_assert_eq(b[21] & 0x0f, 1);
	cr_assert_eq(wr(e.a, &t), SCSI_RESERVATION_CONFLICT);
	/* A's key is gone: reserving with it conflicts. */
	cr_assert_eq(prout(e.a, 0x01, 1, 0xaa, 0, &t), SCSI_RESERVATION_CONFLICT);
	/* CLEAR drops everything. */
	cr_assert_eq(prout(e.b, 0x03, 0, 0xbb, 0, &t), SCSI_GOOD);
	cr_assert_eq(wr(e.a, &t), SCSI_GOOD);
}

Test(scsi_pr, registrations_outlive_the_session)
{
	struct scsi_itn *a2;
	struct tcmd t;

	prout(e.a, 0x00, 0, 0, 0xaa, &t);
	cr_assert_eq(prout(e.a, 0x01, 1, 0xaa, 0, &t), SCSI_GOOD);
	scsi_itn_destroy(e.a);
	a2 = scsi_itn_create(e.dev, e.port, "iqn.2026-01.org.test:a,i,0x23d000000001",
			     "iqn.2026-01.org.test:a");
	e.a = a2;
	tenv_clear_ua(&e, a2, 0);
	cr_assert_eq(wr(a2, &t), SCSI_GOOD, "same I_T nexus: still the holder");
	cr_assert_eq(wr(e.b, &t), SCSI_RESERVATION_CONFLICT);
}

Test(scsi_pr, report_capabilities_and_full_status)
{
	uint8_t b[256];
	struct tcmd t;

	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x5e, 2, 0, 0, 0, 0, 0, 0, 8, 0), b, 8,
			      SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(be16(b), 8);
	cr_assert_eq(b[3] & 0x80, 0x80, "TMV");
	cr_assert_eq(b[4], 0xea, "WE_AR EA_RO WE_RO EA WE");
	cr_assert_eq(b[5], 0x01, "EA_AR");
	prout(e.a, 0x00, 0, 0, 0xaa, &t);
	prout(e.a, 0x01, 1, 0xaa, 0, &t);
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x5e, 3, 0, 0, 0, 0, 0, 0, 255, 0), b, 255,
			      SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(be64(b + 8), 0xaa);
	cr_assert_eq(b[8 + 12] & 1, 1, "R_HOLDER");
	cr_assert_eq(be16(b + 8 + 18), e.port->rel_id);
	cr_assert_eq(b[8 + 24] & 0x0f, 5, "iSCSI TransportID");
	cr_assert_not_null(strstr((const char *)b + 8 + 28, "iqn.2026-01.org.test:a,i,0x"));
}

Test(scsi_pr, spc2_reserve_release)
{
	struct tcmd t;

	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x16, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE),
		     SCSI_GOOD);
	cr_assert_eq(rd(e.b, &t), SCSI_RESERVATION_CONFLICT);
	cr_assert_eq(tcmd_run(&e, &t, e.b, 0, CDB(0x16, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE),
		     SCSI_RESERVATION_CONFLICT);
	/* RELEASE from a non-holder succeeds without releasing. */
	cr_assert_eq(tcmd_run(&e, &t, e.b, 0, CDB(0x17, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE),
		     SCSI_GOOD);
	cr_assert_eq(rd(e.b, &t), SCSI_RESERVATION_CONFLICT);
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x17, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE),
		     SCSI_GOOD);
	cr_assert_eq(rd(e.b, &t), SCSI_GOOD);
	/* Nexus loss drops it too. */
	tcmd_run(&e, &t, e.a, 0, CDB(0x16, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE);
	scsi_itn_nexus_loss(e.a);
	cr_assert_eq(rd(e.b, &t), SCSI_GOOD);
}
