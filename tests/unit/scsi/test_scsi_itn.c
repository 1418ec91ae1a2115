// SPDX-License-Identifier: MIT
/*
 * I_T nexuses and unit attentions (scsi_itn.c): what a host hears after it first reaches an
 * LU, after a reset, a capacity change and a LUN added, in SAM's order, each once.
 */
#include "scsi_test.h"

static struct tenv e;

static void setup(void)
{
	tenv_init(&e);
	cr_assert_eq(tenv_add_lu(&e, 0, 1 << 20, 512, true, false), 0);
}

static void teardown(void)
{
	tenv_fini(&e);
}

TestSuite(scsi_itn, .init = setup, .fini = teardown);

static int tur(struct scsi_itn *itn, uint64_t lun, struct tcmd *t)
{
	return tcmd_run(&e, t, itn, lun, CDB(0x00, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE);
}

Test(scsi_itn, unit_attention_on_first_access_then_gone)
{
	struct scsi_itn *c = scsi_itn_create(e.dev, e.port, "iqn.x:c,i,0x1", "iqn.x:c");
	uint8_t b[96];
	struct tcmd t;

	/* INQUIRY does not see it and does not clear it. */
	cr_assert_eq(tcmd_run(&e, &t, c, 0, CDB(0x12, 0, 0, 0, 96, 0), b, 96, SCSI_DIR_READ),
		     SCSI_GOOD);
	tur(c, 0, &t);
	cr_assert_sense(&t, SCSI_SK_UNIT_ATTENTION, 0x29, 0x00);
	cr_assert_eq(tur(c, 0, &t), SCSI_GOOD);
	scsi_itn_destroy(c);
}

/* A LU reset and then a cold target reset both pending: one report of the reset class covers
 * them all (SAM-5 6.3.1, the first in priority), so the host hears of them once. */
Test(scsi_itn, one_reset_report_covers_every_pending_reset)
{
	struct tcmd t;

	tenv_clear_ua(&e, e.a, 0);
	scsi_lu_reset(e.dev, 0, NULL);
	scsi_target_reset(e.dev, true, NULL);
	tur(e.a, 0, &t);
	cr_assert_sense(&t, SCSI_SK_UNIT_ATTENTION, 0x29, 0x01);
	cr_assert_eq(tur(e.a, 0, &t), SCSI_GOOD, "the LU reset was reported with the other");
}

/* Capacity changed and REPORTED LUNS DATA HAS CHANGED pending: the capacity first (SAM order),
 * then the LUN inventory, once for the nexus, through whichever LU it asks first. */
Test(scsi_itn, attentions_come_in_order_and_luns_changed_once_per_nexus)
{
	struct tcmd t;

	tenv_clear_ua(&e, e.a, 0);
	cr_assert_eq(tenv_add_lu(&e, 1, 1 << 20, 512, true, false), 0);
	scsi_lu_capacity_changed(scsi_dev_find_lu(e.dev, 0));
	tur(e.a, 0, &t);
	cr_assert_sense(&t, SCSI_SK_UNIT_ATTENTION, 0x2a, 0x09);
	tur(e.a, 0, &t);
	cr_assert_sense(&t, SCSI_SK_UNIT_ATTENTION, 0x3f, 0x0e);
	cr_assert_eq(tur(e.a, 0, &t), SCSI_GOOD);
	/* The new LU: its own first contact, but not the inventory change again. */
	tur(e.a, 1, &t);
	cr_assert_sense(&t, SCSI_SK_UNIT_ATTENTION, 0x29, 0x00);
	cr_assert_eq(tur(e.a, 1, &t), SCSI_GOOD);
	/* Another nexus hears of the inventory change too. */
	tenv_clear_ua(&e, e.b, 0);
	cr_assert_eq(tur(e.b, 0, &t), SCSI_GOOD, "b's 3F/0E was taken by tenv_clear_ua");
}
