// SPDX-License-Identifier: MIT
/*
 * The control commands of one path (mp_path_probe.c) against a fake back end (fake_iscsi.h),
 * reporting to a recording owner instead of a LUN (path_fixture.h): the identity probe at
 * login learns the device and its ALUA state, refuses a path to another device or of another
 * block size, and the checker takes a path out of I/O when its port group goes to standby or
 * fails it when it stops answering; the checker reads the capacity again every MP_CAP_CHECKS
 * rounds and at once when asked, and the LUN follows a size that changed.
 */
#include "fake_iscsi.h"

/* The path's files, compiled here on the fake clock and the fake libiscsi. */
#include "path_files.h"

#include "path_fixture.h"

TestSuite(mp_path_probe, .init = setup, .fini = teardown);

Test(mp_path_probe, logs_in_and_learns_the_device)
{
	bring_up();
	cr_expect_str_eq(path.ident, "naa.60000000000000000000000000000001");
	cr_expect_eq(path.size, (uint64_t)FAKE_BLOCKS * FAKE_BLOCK);
	cr_expect_eq(path.block_size, FAKE_BLOCK);
	cr_expect_eq(fake_tgt[0].logins, 1);
	cr_expect_geq(rec.changed, 1, "the owner hears that the path is up");
	cr_expect_not(path.alua, "no ALUA on this back end");
}

Test(mp_path_probe, alua_state_sets_priority_and_standby)
{
	fake_tgt[0].alua_state = 0x1;	/* active/non-optimized */
	bring_up();
	cr_expect(path.alua);
	cr_expect_eq(path.prio, MP_PRIO_ANO);
	cr_expect_eq(path.alua_tpg, 1);

	/* The checker reads the group's state again: standby takes the path out of I/O. */
	fake_tgt[0].alua_state = 0x2;
	rec.changed = 0;
	tick((uint64_t)lun.conf.polling_interval * 1000);
	cr_expect_eq(path.state, MP_PATH_STANDBY);
	cr_expect_geq(rec.changed, 1);
	cr_expect_not(mp_path_usable(&path));
}

Test(mp_path_probe, another_device_is_refused)
{
	rec.identity_rc = -EMEDIUMTYPE;
	tick(0);
	cr_expect_eq(path.state, MP_PATH_REFUSED);
	cr_expect_not(mp_path_usable(&path));
	cr_expect_eq(path.next_attempt_ms, fake_now + lun.conf.reconnect_max_ms,
		     "retried slowly, in case the storage is being reconfigured");
}

Test(mp_path_probe, a_block_size_mismatch_is_refused)
{
	fake_tgt[0].block_size = 4096;
	tick(0);
	cr_expect_eq(path.state, MP_PATH_REFUSED);
	cr_expect(strstr(path.last_error, "block size") != NULL, "%s", path.last_error);
}

Test(mp_path_probe, checker_fails_a_dead_path)
{
	bring_up();
	fake_tgt[0].down = true;
	tick((uint64_t)lun.conf.polling_interval * 1000);
	cr_expect_eq(path.state, MP_PATH_DOWN);
	cr_expect(strstr(path.last_error, "path checker") != NULL, "%s", path.last_error);
}

Test(mp_path_probe, the_checker_reads_the_capacity_again)
{
	uint64_t poll = (uint64_t)lun.conf.polling_interval * 1000;
	unsigned int reads;

	bring_up();
	reads = fake_tgt[0].capacity_reads;
	fake_tgt[0].blocks = 2 * FAKE_BLOCKS;	/* grown on the array, nothing said */
	for (int i = 1; i < MP_CAP_CHECKS; i++)
		tick(poll);
	cr_expect_eq(fake_tgt[0].capacity_reads, reads, "not every round");
	cr_expect_eq(rec.capacities, 0);
	tick(poll);
	cr_expect_eq(fake_tgt[0].capacity_reads, reads + 1, "every %d rounds", MP_CAP_CHECKS);
	cr_expect_eq(path.size, 2ull * FAKE_BLOCKS * FAKE_BLOCK);
	cr_expect_eq(rec.capacities, 1, "the owner hears of it");
	cr_expect_eq(rec.capacity, 2ull * FAKE_BLOCKS * FAKE_BLOCK);

	/* Asked: read at the next tick, not in 6 rounds. */
	fake_tgt[0].blocks = 3 * FAKE_BLOCKS;
	lun.paths = &path;		/* the fixture's one path, for the LUN-wide request */
	lun.npaths = 1;
	mp_lun_recheck_capacity(&lun);
	lun.paths = NULL;
	lun.npaths = 0;
	tick(0);
	cr_expect_eq(fake_tgt[0].capacity_reads, reads + 2);
	cr_expect_eq(rec.capacity, 3ull * FAKE_BLOCKS * FAKE_BLOCK);
	cr_expect_not(path.recap, "done");
}
