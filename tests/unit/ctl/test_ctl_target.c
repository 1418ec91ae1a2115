// SPDX-License-Identifier: MIT
/* What ctl keeps per target (ctl_target.c): a LUN removal that meets commands in flight waits
 * for them, keeping new commands off the LUN; a target that ends takes its waiting removals and
 * its hold on the old configuration along. */
#include "iscsi/harness.h"
#include "ctl_priv.h"

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

TestSuite(ctl_target, .init = setup, .fini = teardown);

static void run_ms(int ms)
{
	uint64_t end = gw_now_ms() + (uint64_t)ms;

	while (gw_now_ms() < end)
		gw_loop_run_once(&H.loop, 5);
}

/* A READ of LUN 0 submitted and not yet completed (the loop has not run since). */
static void read_in_flight(uint32_t itt)
{
	uint8_t cdb[16];

	h_cdb_rw10(cdb, 0x28, 0, 8);
	h_scsi_cmd(&H, C, itt, ISC_FL_F | ISC_FL_R, cdb, 10, 4096, NULL, 0);
}

Test(ctl_target, a_busy_lun_removal_waits_for_its_commands)
{
	struct isc_target *t = isc_gw_find_target(H.gw, H_TARGET);

	read_in_flight(0x900);
	ctl_lun_replace(H.cg, t, 0, NULL, NULL);
	cr_expect(isc_target_lun_blocked(t, 0), "new commands kept off LUN 0 while it drains");
	cr_expect_not(gw_list_empty(&H.cg->pending), "the removal waits");
	cr_expect_not_null(scsi_dev_find_lu(isc_target_dev(t), 0), "LUN 0 still there");
	run_ms(300);
	cr_expect_null(scsi_dev_find_lu(isc_target_dev(t), 0), "gone once the read completed");
	cr_expect_not(isc_target_lun_blocked(t, 0));
	cr_expect(gw_list_empty(&H.cg->pending));
	cr_expect_not(H.cg->lun_timer_on, "the retry timer stops with nothing left");
}

Test(ctl_target, a_retired_target_takes_its_waiting_removals_and_its_hold_along)
{
	struct isc_target *t = isc_gw_find_target(H.gw, H_TARGET);
	struct ctl_conf_hold *hold = calloc(1, sizeof(*hold));

	cr_assert_not_null(hold);
	hold->conf = calloc(1, sizeof(*hold->conf));
	hold->refs = 1;			/* this test's */
	read_in_flight(0x901);
	ctl_lun_replace(H.cg, t, 0, NULL, NULL);
	cr_assert_not(gw_list_empty(&H.cg->pending));
	ctl_target_retire(t, hold);
	cr_expect_eq(hold->refs, 2, "the draining target holds the old configuration");
	run_ms(300);
	cr_expect_null(isc_gw_next_draining(H.gw, NULL), "the target ended with its session");
	cr_expect(gw_list_empty(&H.cg->pending), "its waiting removal went with it");
	cr_expect_eq(hold->refs, 1, "and its hold");
	ctl_conf_hold_put(hold);
}
