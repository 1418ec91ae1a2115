// SPDX-License-Identifier: MIT
/*
 * LUNs (scsi_lun.c): the SAM LUN field both ways, and the LUN map: a LUN finds its LU (and
 * backstore, and owner loop) from the map published last, whatever order the LUs were added
 * in, and stops finding it once it is removed; work for an LU runs on its owner at once when
 * the caller is that loop.
 */
#include <errno.h>

#include "scsi_test.h"

#include "scsi_priv.h"

static struct tenv e;

static void setup(void)
{
	tenv_init(&e);
}

static void teardown(void)
{
	tenv_fini(&e);
}

TestSuite(scsi_lun, .init = setup, .fini = teardown);

Test(scsi_lun, every_lun_finds_its_lu_in_any_order_added_and_none_after_removal)
{
	static const uint64_t luns[] = { 9, 1, 16383, 0, 5, 3, 200 };

	cr_assert_null(scsi_dev_find_lu(e.dev, 0), "no map yet");
	for (size_t i = 0; i < GW_ARRAY_SIZE(luns); i++)
		cr_assert_eq(tenv_add_lu(&e, luns[i], 1 << 20, 512, false, false), 0);
	for (size_t i = 0; i < GW_ARRAY_SIZE(luns); i++) {
		struct scsi_lu *lu = scsi_dev_find_lu(e.dev, luns[i]);

		cr_assert_not_null(lu, "LUN %llu", (unsigned long long)luns[i]);
		cr_expect_eq(lu->lun, luns[i]);
		cr_expect_eq(scsi_dev_lu_bs(e.dev, luns[i]), lu->bs);
		cr_expect_eq(scsi_dev_lu_loop(e.dev, luns[i]), &e.loop, "one loop: the device's");
	}
	for (uint64_t lun = 0; lun < 300; lun++) {
		bool listed = false;

		for (size_t i = 0; i < GW_ARRAY_SIZE(luns); i++)
			listed |= luns[i] == lun;
		cr_expect_eq(scsi_dev_find_lu(e.dev, lun) != NULL, listed, "LUN %llu",
			     (unsigned long long)lun);
	}
	cr_assert_eq(scsi_dev_del_lu(e.dev, 5), 0);
	cr_expect_null(scsi_dev_find_lu(e.dev, 5));
	cr_expect_null(scsi_dev_lu_bs(e.dev, 5));
	cr_expect_null(scsi_dev_lu_loop(e.dev, 5));
	cr_expect_not_null(scsi_dev_find_lu(e.dev, 3), "its neighbours stay");
	cr_expect_not_null(scsi_dev_find_lu(e.dev, 9));
}

static int ran_a;
static void *ran_p;

static void note(struct scsi_lu *lu, int a, void *p)
{
	(void)lu;
	ran_a = a;
	ran_p = p;
}

Test(scsi_lun, work_for_an_lu_runs_at_once_on_its_owner)
{
	cr_assert_eq(tenv_add_lu(&e, 2, 1 << 20, 512, false, false), 0);
	ran_a = 0;
	ran_p = NULL;
	scsi_lu_on_owner(scsi_dev_find_lu(e.dev, 2), note, 7, &e);
	cr_assert_eq(ran_a, 7, "ran before returning");
	cr_assert_eq(ran_p, &e);
}

Test(scsi_lun, lun_encoding)
{
	uint8_t l[8];

	scsi_lun_encode(5, l);
	cr_assert_eq(l[0], 0);
	cr_assert_eq(l[1], 5);
	cr_assert_eq(scsi_lun_decode(l), 5);
	scsi_lun_encode(1000, l);
	cr_assert_eq(l[0] >> 6, 1, "flat space addressing above 255");
	cr_assert_eq(scsi_lun_decode(l), 1000);
	/* Extended addressing (not ours to give out): kept whole, so it matches no LU. */
	memcpy(l, (const uint8_t[8]){ 0xd2, 0, 0, 5, 0, 0, 0, 0 }, 8);
	cr_assert_gt(scsi_lun_decode(l), 16383);
}
