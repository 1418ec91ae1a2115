// SPDX-License-Identifier: MIT
#include <errno.h>

#include "scsi_test.h"

static struct tenv e;
static struct scsi_itn *c;	/* through port 2, group 2 */

static void setup(void)
{
	tenv_init(&e);
	cr_assert_eq(tenv_add_lu(&e, 0, 1 << 20, 512, true, false), 0);
	c = scsi_itn_create(e.dev, e.port2, "iqn.x:c,i,0x1", "iqn.x:c");
	tenv_clear_ua(&e, e.a, 0);
	tenv_clear_ua(&e, c, 0);
}

static void teardown(void)
{
	tenv_fini(&e);
}

TestSuite(scsi_alua, .init = setup, .fini = teardown);

Test(scsi_alua, report_target_port_groups)
{
	uint8_t b[256];
	struct tcmd t;

	scsi_dev_set_alua(e.dev, 2, SCSI_ALUA_STANDBY);
	tcmd_run(&e, &t, e.a, 0, CDB(0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0), b, 256,
		 SCSI_DIR_READ);
	cr_assert_sense(&t, SCSI_SK_UNIT_ATTENTION, 0x2a, 0x06);
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0), b,
			      256, SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(be32(b), 2 * 12u);
	cr_assert_eq(b[4] & 0x0f, SCSI_ALUA_AO);
	cr_assert_eq(be16(&b[6]), 1);
	cr_assert_eq(b[11], 1, "one port in group 1");
	cr_assert_eq(be16(&b[14]), e.port->rel_id);
	cr_assert_eq(b[16] & 0x0f, SCSI_ALUA_STANDBY);
	cr_assert_eq(be16(&b[18]), 2);
	/* Extended header. */
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0xa3, 0x2a, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0), b,
			      256, SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(b[4], 0x10);
}

Test(scsi_alua, standby_refuses_media_access)
{
	uint8_t b[512];
	struct tcmd t;

	scsi_dev_set_alua(e.dev, 2, SCSI_ALUA_STANDBY);
	/* The state change is announced first. */
	tcmd_run(&e, &t, c, 0, CDB(0x00, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE);
	cr_assert_sense(&t, SCSI_SK_UNIT_ATTENTION, 0x2a, 0x06);
	tcmd_run(&e, &t, c, 0, CDB(0x00, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE);
	cr_assert_sense(&t, SCSI_SK_NOT_READY, 0x04, 0x0b);
	tcmd_run(&e, &t, c, 0, CDB(0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0), b, 512, SCSI_DIR_READ);
	cr_assert_sense(&t, SCSI_SK_NOT_READY, 0x04, 0x0b);
	cr_assert_eq(tcmd_run(&e, &t, c, 0, CDB(0x12, 0, 0, 0, 96, 0), b, 96, SCSI_DIR_READ),
		     SCSI_GOOD);
	cr_assert_eq(tcmd_run(&e, &t, c, 0, CDB(0x1a, 0, 0x3f, 0, 255, 0), b, 255,
			      SCSI_DIR_READ), SCSI_GOOD, "MODE SENSE is allowed in standby");
	/* Port 1 is unaffected. */
	tenv_clear_ua(&e, e.a, 0);
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0), b, 512,
			      SCSI_DIR_READ), SCSI_GOOD);
	scsi_dev_set_alua(e.dev, 2, SCSI_ALUA_UNAVAILABLE);
	tenv_clear_ua(&e, c, 0);	/* the 2A/06 only */
	tcmd_run(&e, &t, c, 0, CDB(0x1a, 0, 0x3f, 0, 255, 0), b, 255, SCSI_DIR_READ);
	cr_assert_sense(&t, SCSI_SK_NOT_READY, 0x04, 0x0c);
	scsi_dev_set_alua(e.dev, 2, SCSI_ALUA_TRANSITIONING);
	tcmd_run(&e, &t, c, 0, CDB(0x00, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE);
	tcmd_run(&e, &t, c, 0, CDB(0x00, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE);
	cr_assert_sense(&t, SCSI_SK_NOT_READY, 0x04, 0x0a);
	cr_assert_eq(tcmd_run(&e, &t, c, 0, CDB(0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0), b,
			      255, SCSI_DIR_READ), SCSI_GOOD, "RTPG always works");
}

Test(scsi_alua, set_target_port_groups_is_implicit_only)
{
	uint8_t p[8] = { 0 };
	struct tcmd t;

	tcmd_run(&e, &t, e.a, 0, CDB(0xa4, 0x0a, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0), p, 8,
		 SCSI_DIR_WRITE);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x24, 0x00);
}

/* Finds group id in an RTPG answer: its state, and its first port's relative id in *rel. */
static int rtpg_group(const uint8_t *b, uint16_t id, uint16_t *rel)
{
	uint32_t n = be32(b) + 4, off = 4;

	while (off + 8 <= n) {
		const uint8_t *d = &b[off];

		if (be16(&d[2]) == id) {
			*rel = d[7] ? be16(&d[10]) : 0;
			return d[0] & 0x0f;
		}
		off += 8 + 4u * d[7];
	}
	return -1;
}

Test(scsi_alua, cluster_groups_and_lu_owner)
{
	const struct scsi_tpg_conf groups[] = {
		{ .id = 1, .state = SCSI_ALUA_AO },
		{ .id = 2, .state = SCSI_ALUA_AO },
		{ .id = 7, .state = SCSI_ALUA_AO },
	};
	struct scsi_tpg_conf down[3];
	uint8_t b[512];
	struct tcmd t;
	uint16_t rel;

	cr_assert_eq(scsi_dev_set_groups(e.dev, groups, 3), 0);
	tcmd_run(&e, &t, e.a, 0, CDB(0x00, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE);
	cr_assert_sense(&t, SCSI_SK_UNIT_ATTENTION, 0x2a, 0x06);
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0), b,
			      256, SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(rtpg_group(b, 7, &rel), SCSI_ALUA_AO);
	cr_assert_eq(rel, 7, "the other gateway's port: relative id = its group id");
	cr_assert_eq(rtpg_group(b, 1, &rel), SCSI_ALUA_AO);
	cr_assert_eq(rel, 1);

	/* The LU is owned by group 7: it is optimized there, non-optimized here. */
	cr_assert_eq(scsi_dev_set_lu_alua(e.dev, 0, 7, false, "gw-b"), 0);
	cr_assert_eq(scsi_dev_alua_state(e.dev, 0, 1), SCSI_ALUA_ANO);
	cr_assert_eq(scsi_dev_alua_state(e.dev, 0, 7), SCSI_ALUA_AO);
	tcmd_run(&e, &t, e.a, 0, CDB(0x00, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE);
	cr_assert_sense(&t, SCSI_SK_UNIT_ATTENTION, 0x2a, 0x06);
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0), b,
			      256, SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(rtpg_group(b, 1, &rel), SCSI_ALUA_ANO);
	cr_assert_eq(rtpg_group(b, 7, &rel), SCSI_ALUA_AO);
	/* Non-optimized still serves I/O. */
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0), b, 512,
			      SCSI_DIR_READ), SCSI_GOOD);
	/* The same owner again: nothing to announce. */
	cr_assert_eq(scsi_dev_set_lu_alua(e.dev, 0, 7, false, "gw-b"), 0);
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x00, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE),
		     SCSI_GOOD);

	/* Group 7's gateway is gone and the LU moves here. */
	memcpy(down, groups, sizeof(down));
	down[2].state = SCSI_ALUA_UNAVAILABLE;
	cr_assert_eq(scsi_dev_set_groups(e.dev, down, 3), 0);
	cr_assert_eq(scsi_dev_set_lu_alua(e.dev, 0, 1, false, "gw-a"), 0);
	tenv_clear_ua(&e, e.a, 0);
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0), b,
			      256, SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(rtpg_group(b, 1, &rel), SCSI_ALUA_AO);
	cr_assert_eq(rtpg_group(b, 7, &rel), SCSI_ALUA_UNAVAILABLE);
	cr_assert_eq(rtpg_group(b, 2, &rel), SCSI_ALUA_ANO);

	/* Dropping a group removes its remote port; local groups stay. */
	cr_assert_eq(scsi_dev_set_groups(e.dev, groups, 2), 0);
	tenv_clear_ua(&e, e.a, 0);
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0), b,
			      256, SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(rtpg_group(b, 7, &rel), -1);
	cr_assert_eq(rtpg_group(b, 2, &rel), SCSI_ALUA_ANO);
	cr_assert_eq(scsi_dev_set_lu_alua(e.dev, 5, 1, false, ""), -ENOENT);
}

Test(scsi_alua, pending_owner_stays_non_optimized_and_a_fence_puts_local_groups_in_standby)
{
	const struct scsi_tpg_conf groups[] = {
		{ .id = 1, .state = SCSI_ALUA_AO },
		{ .id = 2, .state = SCSI_ALUA_AO },
		{ .id = 7, .state = SCSI_ALUA_AO },
	};
	uint8_t b[512];
	struct tcmd t;
	uint16_t rel;

	cr_assert_eq(scsi_dev_set_groups(e.dev, groups, 3), 0);
	/* Taking the LU over: non-optimized (serving I/O, as every non-owner does) until the
	 * previous owner is surely gone; no group is a/o meanwhile. */
	cr_assert_eq(scsi_dev_set_lu_alua(e.dev, 0, 1, true, "gw-a"), 0);
	cr_assert_eq(scsi_dev_alua_state(e.dev, 0, 1), SCSI_ALUA_ANO);
	cr_assert_eq(scsi_dev_alua_state(e.dev, 0, 7), SCSI_ALUA_ANO);
	tenv_clear_ua(&e, e.a, 0);
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0), b, 512,
			      SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(scsi_dev_set_lu_alua(e.dev, 0, 1, false, "gw-a"), 0);
	tcmd_run(&e, &t, e.a, 0, CDB(0x00, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE);
	cr_assert_sense(&t, SCSI_SK_UNIT_ATTENTION, 0x2a, 0x06);
	cr_assert_eq(scsi_dev_alua_state(e.dev, 0, 1), SCSI_ALUA_AO);

	/* Fenced: every local group (1 and 2) reports standby, the other gateway's is as it was;
	 * media access is refused and every nexus hears of it. */
	scsi_dev_set_fenced(e.dev, true);
	tcmd_run(&e, &t, e.a, 0, CDB(0x00, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE);
	cr_assert_sense(&t, SCSI_SK_UNIT_ATTENTION, 0x2a, 0x06);
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0), b,
			      256, SCSI_DIR_READ), SCSI_GOOD, "RTPG answers in standby");
	cr_assert_eq(rtpg_group(b, 1, &rel), SCSI_ALUA_STANDBY);
	cr_assert_eq(rtpg_group(b, 2, &rel), SCSI_ALUA_STANDBY);
	cr_assert_eq(rtpg_group(b, 7, &rel), SCSI_ALUA_ANO);
	tcmd_run(&e, &t, e.a, 0, CDB(0x2a, 0, 0, 0, 0, 0, 0, 0, 1, 0), b, 512, SCSI_DIR_WRITE);
	cr_assert_sense(&t, SCSI_SK_NOT_READY, 0x04, 0x0b);
	/* Fencing twice announces nothing new; lifting it restores the computed states. */
	scsi_dev_set_fenced(e.dev, true);
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x12, 0, 0, 0, 36, 0), b, 36, SCSI_DIR_READ),
		     SCSI_GOOD);
	scsi_dev_set_fenced(e.dev, false);
	tcmd_run(&e, &t, e.a, 0, CDB(0x00, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE);
	cr_assert_sense(&t, SCSI_SK_UNIT_ATTENTION, 0x2a, 0x06);
	cr_assert_eq(scsi_dev_alua_state(e.dev, 0, 1), SCSI_ALUA_AO);
	cr_assert_eq(scsi_dev_alua_state(e.dev, 0, 2), SCSI_ALUA_ANO);
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0), b, 512,
			      SCSI_DIR_READ), SCSI_GOOD);
}
