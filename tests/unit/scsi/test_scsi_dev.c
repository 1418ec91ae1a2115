// SPDX-License-Identifier: MIT
/*
 * Devices and LUs (scsi_dev.c): LUs added and removed as the nexuses hear of it, resets and
 * capacity changes reaching every nexus, LUs spread over the loops. The task set is
 * test_scsi_exec.c's, unit attentions test_scsi_itn.c's.
 */
#include "scsi_test.h"

#include <errno.h>

static struct tenv e;
static int events, last_event;

static void on_event(struct scsi_dev *dev, enum scsi_event ev, uint64_t lun, void *arg)
{
	(void)dev;
	(void)lun;
	(void)arg;
	events++;
	last_event = ev;
}

static void setup(void)
{
	tenv_init(&e);
	events = 0;
	scsi_dev_set_event_cb(e.dev, on_event, NULL);
	cr_assert_eq(tenv_add_lu(&e, 0, 1 << 20, 512, true, false), 0);
	cr_assert_eq(events, 1);
	cr_assert_eq(last_event, SCSI_EV_LUNS_CHANGED);
}

static void teardown(void)
{
	tenv_fini(&e);
}

TestSuite(scsi_dev, .init = setup, .fini = teardown);

static int tur(struct scsi_itn *itn, uint64_t lun, struct tcmd *t)
{
	return tcmd_run(&e, t, itn, lun, CDB(0x00, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE);
}

Test(scsi_dev, lun_add_and_remove_tell_other_nexuses)
{
	struct tcmd t;

	tenv_clear_ua(&e, e.a, 0);
	cr_assert_eq(tenv_add_lu(&e, 4, 1 << 20, 512, true, false), 0);
	cr_assert_eq(tenv_add_lu(&e, 4, 1 << 20, 512, true, false), -EEXIST);
	tur(e.a, 0, &t);
	cr_assert_sense(&t, SCSI_SK_UNIT_ATTENTION, 0x3f, 0x0e);
	cr_assert_eq(tur(e.a, 0, &t), SCSI_GOOD);
	cr_assert_eq(scsi_dev_del_lu(e.dev, 4), 0);
	cr_assert_eq(scsi_dev_del_lu(e.dev, 4), -ENOENT);
	cr_assert_eq(last_event, SCSI_EV_LUNS_CHANGED);
	tur(e.a, 0, &t);
	cr_assert_sense(&t, SCSI_SK_UNIT_ATTENTION, 0x3f, 0x0e);
	tur(e.a, 4, &t);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x25, 0x00);
}

Test(scsi_dev, lu_reset_ua_for_every_nexus)
{
	struct tcmd t;

	tenv_clear_ua(&e, e.a, 0);
	tenv_clear_ua(&e, e.b, 0);
	scsi_lu_reset(e.dev, 0, e.a);
	tur(e.a, 0, &t);
	cr_assert_sense(&t, SCSI_SK_UNIT_ATTENTION, 0x29, 0x03);
	cr_assert_eq(tur(e.a, 0, &t), SCSI_GOOD);
	tur(e.b, 0, &t);
	cr_assert_sense(&t, SCSI_SK_UNIT_ATTENTION, 0x29, 0x03);
	cr_assert_eq(tur(e.b, 0, &t), SCSI_GOOD);
}

Test(scsi_dev, capacity_changed_ua)
{
	struct scsi_lu *lu = scsi_dev_find_lu(e.dev, 0);
	struct tcmd t;

	tenv_clear_ua(&e, e.a, 0);
	scsi_lu_capacity_changed(lu);
	cr_assert_eq(last_event, SCSI_EV_CAPACITY_CHANGED);
	tur(e.a, 0, &t);
	cr_assert_sense(&t, SCSI_SK_UNIT_ATTENTION, 0x2a, 0x09);
}

Test(scsi_dev, busy_lu_cannot_be_removed)
{
	uint8_t b[512];
	struct tcmd t;

	tenv_clear_ua(&e, e.a, 0);
	tcmd_prep(&e, &t, e.a, 0, CDB(0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0), b, sizeof(b),
		  SCSI_DIR_READ);
	scsi_cmd_submit(&t.cmd);
	cr_assert_eq(scsi_dev_del_lu(e.dev, 0), -EBUSY);
	tcmd_wait(&e, &t);
	cr_assert_eq(scsi_dev_del_lu(e.dev, 0), 0);
}

Test(scsi_dev, lu_conf_table_defaults)
{
	struct scsi_lu_conf c;

	memset(&c, 0, sizeof(c));
	cr_assert_eq(gw_conf_defaults(conf_lu_keys, &c), 0);
	cr_assert_str_eq(c.vendor, "ISERGW");
	cr_assert_str_eq(c.product, "isergw LUN");
	cr_assert_str_eq(c.revision, "0001");
	cr_assert(c.write_cache);
	cr_assert(c.thin);
	gw_conf_free(conf_lu_keys, &c);
}

Test(scsi_dev, lus_opened_before_any_is_added_spread_over_the_loops)
{
	struct scsi_dev *dev = scsi_dev_create(&e.loop, "iqn.2026-01.org.isergw:spread");
	struct gw_loop l1, l2;
	struct gw_loops set = { .n = 3 };
	struct gw_loop *got[3];

	cr_assert_eq(gw_loop_init(&l1), 0);
	cr_assert_eq(gw_loop_init(&l2), 0);
	set.loop[0] = &e.loop;
	set.loop[1] = &l1;
	set.loop[2] = &l2;
	scsi_dev_set_loops(dev, &set);
	/* An apply opens every new LU's backstore first: each pick counts those before it. */
	for (int i = 0; i < 3; i++)
		got[i] = scsi_dev_next_lu_loop(dev);
	cr_assert(got[0] != got[1] && got[1] != got[2] && got[0] != got[2],
		  "three LUs of one apply on three loops");
	cr_assert_eq(got[2], &e.loop, "loop 0, which has the control work, last");
	/* A failed apply's picks are forgotten: the next one starts from the last loop again. */
	scsi_dev_forget_lu_picks(dev);
	cr_assert_eq(scsi_dev_next_lu_loop(dev), &l2);
	scsi_dev_destroy(dev);
	gw_loop_fini(&l1);
	gw_loop_fini(&l2);
}

/* Many one-LU targets (one device each) spread their LUs as one set, not each on the last
 * loop; a device destroyed with picks still open gives them back. */
Test(scsi_dev, one_lu_targets_spread_over_the_loops_as_one_set)
{
	struct scsi_dev *a = scsi_dev_create(&e.loop, "iqn.2026-01.org.isergw:one-a");
	struct scsi_dev *b = scsi_dev_create(&e.loop, "iqn.2026-01.org.isergw:one-b");
	struct gw_loop l1;
	struct gw_loops set = { .n = 2 };
	struct gw_loop *ga, *gb;

	cr_assert_eq(gw_loop_init(&l1), 0);
	set.loop[0] = &e.loop;
	set.loop[1] = &l1;
	scsi_dev_set_loops(a, &set);
	scsi_dev_set_loops(b, &set);
	ga = scsi_dev_next_lu_loop(a);
	gb = scsi_dev_next_lu_loop(b);
	cr_expect_eq(ga, &l1, "the first target's LU on the last loop");
	cr_expect_eq(gb, &e.loop, "the second target's LU on the other loop, not the same");
	scsi_dev_destroy(a);
	cr_expect_eq(set.lus_picked[1], 0, "the destroyed device's pick given back");
	cr_expect_eq(set.lus_picked[0], 1);
	cr_expect_eq(scsi_dev_next_lu_loop(b), &l1, "the free loop again");
	scsi_dev_destroy(b);
	cr_expect_eq(set.lus_picked[0] + set.lus_picked[1], 0);
	gw_loop_fini(&l1);
}
