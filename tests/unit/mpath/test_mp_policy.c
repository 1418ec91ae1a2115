// SPDX-License-Identifier: MIT
/*
 * Multipath policy on fake path data: the error classification table (what fails over, what
 * the host sees), ALUA priorities, grouping, the three selectors, failback, backoff.
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <string.h>

#include "mp_priv.h"

/* A LUN with n fake paths, all active, no libiscsi behind them. */
static struct mp_lun lun;
static struct mp_path paths[4];

static void fake_lun(size_t n, int pg, int sel)
{
	memset(&lun, 0, sizeof(lun));
	memset(paths, 0, sizeof(paths));
	lun.paths = paths;
	lun.npaths = n;
	lun.conf.pg_policy = pg;
	lun.conf.selector = sel;
	lun.conf.rr_min_io_rq = 1;
	lun.cur_rank = INT_MAX;
	lun.failback = MP_FAILBACK_IMMEDIATE;
	for (size_t i = 0; i < n; i++) {
		paths[i].idx = (unsigned int)i;
		paths[i].state = MP_PATH_ACTIVE;
		paths[i].prio = MP_PRIO_OTHER;
		paths[i].lun = &lun;
	}
}

Test(mp_classify, transport_and_path_errors_fail_over)
{
	/* 02/04/0B and 02/04/0C: the port is standby/unavailable; 05/25/00: LUN gone there. */
	cr_assert_eq(mp_classify(0x02, 0x2, 0x04, 0x0b), MP_V_PATH);
	cr_assert_eq(mp_classify(0x02, 0x2, 0x04, 0x0c), MP_V_PATH);
	cr_assert_eq(mp_classify(0x02, 0x5, 0x25, 0x00), MP_V_PATH);
	cr_assert_eq(mp_classify(0x77, 0, 0, 0), MP_V_PATH, "unknown status is a confused path");
}

Test(mp_classify, retryable_answers_are_retried)
{
	cr_assert_eq(mp_classify(0x08, 0, 0, 0), MP_V_RETRY, "BUSY");
	cr_assert_eq(mp_classify(0x28, 0, 0, 0), MP_V_RETRY, "TASK SET FULL");
	cr_assert_eq(mp_classify(0x02, 0x6, 0x29, 0x00), MP_V_RETRY, "power on UA");
	cr_assert_eq(mp_classify(0x02, 0x6, 0x2a, 0x06), MP_V_RETRY, "ALUA changed UA");
	cr_assert_eq(mp_classify(0x02, 0x2, 0x04, 0x0a), MP_V_RETRY, "ALUA transitioning");
	cr_assert_eq(mp_classify(0x02, 0x2, 0x04, 0x01), MP_V_RETRY, "becoming ready");
	cr_assert_eq(mp_classify(0x02, 0xb, 0x47, 0x00), MP_V_RETRY, "ABORTED COMMAND");
}

Test(mp_classify, media_and_command_errors_pass_through)
{
	cr_assert_eq(mp_classify(0x02, 0x3, 0x11, 0x00), MP_V_PASS, "MEDIUM ERROR");
	cr_assert_eq(mp_classify(0x02, 0x5, 0x24, 0x00), MP_V_PASS, "ILLEGAL REQUEST");
	cr_assert_eq(mp_classify(0x02, 0x5, 0x21, 0x00), MP_V_PASS, "LBA out of range");
	cr_assert_eq(mp_classify(0x02, 0xe, 0x1d, 0x00), MP_V_PASS, "MISCOMPARE");
	cr_assert_eq(mp_classify(0x02, 0x7, 0x27, 0x00), MP_V_PASS, "DATA PROTECT");
	cr_assert_eq(mp_classify(0x18, 0, 0, 0), MP_V_PASS, "RESERVATION CONFLICT");
	cr_assert_eq(mp_classify(0x02, 0x4, 0x44, 0x00), MP_V_PASS, "HARDWARE ERROR");
	cr_assert_eq(mp_classify(0x02, 0xb, 0x10, 0x01), MP_V_PASS, "PI guard check");
	cr_assert_eq(mp_classify(0x02, 0x2, 0x3a, 0x00), MP_V_PASS, "medium not present");
}

Test(mp_classify, good_is_done)
{
	cr_assert_eq(mp_classify(0x00, 0, 0, 0), MP_V_OK);
	cr_assert_eq(mp_classify(0x02, 0x1, 0x17, 0x01), MP_V_OK, "RECOVERED ERROR succeeded");
}

Test(mp_policy, retry_delay_grows_and_is_capped)
{
	cr_assert_eq(mp_retry_delay_ms(0, 0x02, 0x6), 0, "a UA is retried at once");
	cr_assert_eq(mp_retry_delay_ms(0, 0x08, 0), 20);
	cr_assert_eq(mp_retry_delay_ms(2, 0x08, 0), 80);
	cr_assert_eq(mp_retry_delay_ms(30, 0x08, 0), 1000);
}

Test(mp_policy, alua_priorities_as_multipath_alua_prio)
{
	cr_assert_eq(mp_alua_prio(0x0), 50);
	cr_assert_eq(mp_alua_prio(0x1), 10);
	cr_assert_eq(mp_alua_prio(0x2), 1);
	cr_assert_eq(mp_alua_prio(0xf), 1);
}

Test(mp_backoff, doubles_caps_and_jitters_within_half)
{
	for (uint64_t r = 0; r < 1000; r += 7) {
		uint64_t d0 = mp_backoff_ms(0, 500, 30000, r);
		uint64_t d3 = mp_backoff_ms(3, 500, 30000, r);
		uint64_t d20 = mp_backoff_ms(20, 500, 30000, r);

		cr_assert(d0 >= 250 && d0 <= 500, "attempt 0: %llu", (unsigned long long)d0);
		cr_assert(d3 >= 2000 && d3 <= 4000, "attempt 3: %llu", (unsigned long long)d3);
		cr_assert(d20 >= 15000 && d20 <= 30000, "capped: %llu", (unsigned long long)d20);
	}
	/* Huge attempt counts must not overflow into a zero or tiny delay. */
	cr_assert_geq(mp_backoff_ms(200, 500, 30000, 0), 15000);
	/* Jitter spreads LUNs that lose the same array: not all the same value. */
	cr_assert_neq(mp_backoff_ms(4, 500, 30000, 1), mp_backoff_ms(4, 500, 30000, 2000));
}

Test(mp_group, failover_uses_first_path_and_fails_over_in_order)
{
	fake_lun(3, MP_PG_FAILOVER, MP_SEL_SERVICE_TIME);
	cr_assert(mp_update_group(&lun, 1000));
	cr_assert_eq(mp_select(&lun, lun.cur_rank, 4096, NULL), &paths[0]);
	paths[0].state = MP_PATH_DOWN;
	cr_assert(mp_update_group(&lun, 1000));
	cr_assert_eq(mp_select(&lun, lun.cur_rank, 4096, NULL), &paths[1]);
	paths[1].state = MP_PATH_DOWN;
	mp_update_group(&lun, 1000);
	cr_assert_eq(mp_select(&lun, lun.cur_rank, 4096, NULL), &paths[2]);
	paths[2].state = MP_PATH_DOWN;
	mp_update_group(&lun, 1000);
	cr_assert_eq(lun.cur_rank, INT_MAX);
	cr_assert_null(mp_select(&lun, lun.cur_rank, 4096, NULL));
}

Test(mp_group, failback_immediate_manual_and_delayed)
{
	fake_lun(2, MP_PG_FAILOVER, MP_SEL_ROUND_ROBIN);
	mp_update_group(&lun, 0);
	paths[0].state = MP_PATH_DOWN;
	mp_update_group(&lun, 0);
	cr_assert_eq(lun.cur_rank, 1);

	/* immediate: back as soon as path 0 is up */
	paths[0].state = MP_PATH_ACTIVE;
	cr_assert(mp_update_group(&lun, 10));
	cr_assert_eq(lun.cur_rank, 0);

	/* manual: stays on path 1 until path 1 fails */
	lun.failback = MP_FAILBACK_MANUAL;
	paths[0].state = MP_PATH_DOWN;
	mp_update_group(&lun, 20);
	paths[0].state = MP_PATH_ACTIVE;
	cr_assert_not(mp_update_group(&lun, 30));
	cr_assert_eq(lun.cur_rank, 1);
	paths[1].state = MP_PATH_DOWN;
	cr_assert(mp_update_group(&lun, 40));
	cr_assert_eq(lun.cur_rank, 0);

	/* 5 seconds: back only after path 0 has been up that long */
	lun.failback = 5;
	paths[1].state = MP_PATH_ACTIVE;
	paths[0].state = MP_PATH_DOWN;
	mp_update_group(&lun, 50);
	cr_assert_eq(lun.cur_rank, 1);
	paths[0].state = MP_PATH_ACTIVE;
	cr_assert_not(mp_update_group(&lun, 1000));
	cr_assert_not(mp_update_group(&lun, 5999));
	cr_assert_eq(lun.cur_rank, 1);
	cr_assert(mp_update_group(&lun, 6000));
	cr_assert_eq(lun.cur_rank, 0);
}

Test(mp_group, group_by_prio_prefers_optimized_paths)
{
	fake_lun(4, MP_PG_GROUP_BY_PRIO, MP_SEL_ROUND_ROBIN);
	paths[0].prio = MP_PRIO_ANO;
	paths[1].prio = MP_PRIO_AO;
	paths[2].prio = MP_PRIO_ANO;
	paths[3].prio = MP_PRIO_AO;
	mp_update_group(&lun, 0);
	/* round-robin over the two active/optimized paths only */
	for (int i = 0; i < 6; i++) {
		struct mp_path *p = mp_select(&lun, lun.cur_rank, 512, NULL);

		cr_assert(p == &paths[1] || p == &paths[3], "I/O %d went to path %u", i, p->idx);
	}
	paths[1].state = MP_PATH_DOWN;
	paths[3].state = MP_PATH_STANDBY;
	cr_assert(mp_update_group(&lun, 0));
	{
		struct mp_path *p = mp_select(&lun, lun.cur_rank, 512, NULL);

		cr_assert(p == &paths[0] || p == &paths[2], "fell back to non-optimized");
	}
}

Test(mp_group, multibus_spreads_round_robin_with_rr_min_io)
{
	int count[3] = { 0 };

	fake_lun(3, MP_PG_MULTIBUS, MP_SEL_ROUND_ROBIN);
	lun.conf.rr_min_io_rq = 2;
	mp_update_group(&lun, 0);
	struct mp_path *seq[6];

	for (int i = 0; i < 6; i++) {
		seq[i] = mp_select(&lun, lun.cur_rank, 512, NULL);
		count[seq[i]->idx]++;
	}
	cr_assert_eq(seq[0], seq[1], "rr_min_io_rq 2: two I/Os per path");
	cr_assert_neq(seq[1], seq[2]);
	cr_assert(count[0] == 2 && count[1] == 2 && count[2] == 2);
}

Test(mp_select, queue_length_and_service_time)
{
	fake_lun(2, MP_PG_MULTIBUS, MP_SEL_QUEUE_LENGTH);
	mp_update_group(&lun, 0);
	paths[0].nr_inflight = 5;
	paths[1].nr_inflight = 2;
	cr_assert_eq(mp_select(&lun, lun.cur_rank, 512, NULL), &paths[1]);

	/* service-time: bytes outstanding, not commands */
	lun.conf.selector = MP_SEL_SERVICE_TIME;
	paths[0].inflight_bytes = 5 * 4096;
	paths[1].inflight_bytes = 2 * 1048576;
	cr_assert_eq(mp_select(&lun, lun.cur_rank, 512, NULL), &paths[0]);
	/* equal work: the faster path */
	paths[0].inflight_bytes = paths[1].inflight_bytes = 0;
	paths[0].lat_ewma_us = 900;
	paths[1].lat_ewma_us = 300;
	cr_assert_eq(mp_select(&lun, lun.cur_rank, 512, NULL), &paths[1]);
}

Test(mp_select, retry_avoids_the_last_path_unless_alone)
{
	fake_lun(2, MP_PG_MULTIBUS, MP_SEL_QUEUE_LENGTH);
	mp_update_group(&lun, 0);
	paths[1].nr_inflight = 10;
	cr_assert_eq(mp_select(&lun, lun.cur_rank, 512, &paths[0]), &paths[1]);
	paths[1].state = MP_PATH_DOWN;
	mp_update_group(&lun, 0);
	cr_assert_eq(mp_select(&lun, lun.cur_rank, 512, &paths[0]), &paths[0]);
}

/* iSER paths have an in-flight cap (libiscsi 1.19 runs out of buffers beyond it): a full path
 * is passed over while another of the group has room, and nothing is chosen when all are full
 * (the I/O then waits for a completion instead of failing over). */
Test(mp_select, full_paths_are_passed_over)
{
	int sels[] = { MP_SEL_ROUND_ROBIN, MP_SEL_QUEUE_LENGTH, MP_SEL_SERVICE_TIME };

	for (size_t s = 0; s < 3; s++) {
		fake_lun(2, MP_PG_MULTIBUS, sels[s]);
		mp_update_group(&lun, 0);
		paths[0].max_inflight = 2;
		paths[1].max_inflight = 2;
		paths[0].nr_inflight = 2;
		paths[1].nr_inflight = 1;
		for (int i = 0; i < 3; i++)
			cr_assert_eq(mp_select(&lun, lun.cur_rank, 4096, NULL), &paths[1],
				     "selector %d round %d", sels[s], i);
		paths[1].nr_inflight = 2;
		cr_assert_null(mp_select(&lun, lun.cur_rank, 4096, NULL), "selector %d", sels[s]);
		cr_assert(!mp_path_has_room(&paths[0]));
		paths[0].max_inflight = 0;
		cr_assert(mp_path_has_room(&paths[0]), "0 means no cap");
		cr_assert_eq(mp_select(&lun, lun.cur_rank, 4096, NULL), &paths[0]);
	}
}

/* The abort policy's decisions (mp_priv.h). */

Test(mp_tmf, only_reads_and_sync_may_run_twice)
{
	cr_expect_not(mp_op_changes_medium(MP_READ));
	cr_expect_not(mp_op_changes_medium(MP_FLUSH));
	cr_expect(mp_op_changes_medium(MP_WRITE));
	cr_expect(mp_op_changes_medium(MP_WRITE_ZEROES));
	cr_expect(mp_op_changes_medium(MP_UNMAP));
	cr_expect(mp_op_changes_medium(MP_COMPARE_AND_WRITE));
}

Test(mp_tmf, escalation_goes_abort_reset_drop)
{
	cr_expect_eq(mp_tmf_escalate(MP_TMF_NONE, true), MP_TMF_ABORT);
	cr_expect_eq(mp_tmf_escalate(MP_TMF_ABORT, true), MP_TMF_RESET);
	cr_expect_eq(mp_tmf_escalate(MP_TMF_RESET, true), MP_TMF_DROP);
	/* A broken session carries no task management: straight to dropping it. */
	cr_expect_eq(mp_tmf_escalate(MP_TMF_NONE, false), MP_TMF_DROP);
	cr_expect_eq(mp_tmf_escalate(MP_TMF_ABORT, false), MP_TMF_DROP);
}

Test(mp_tmf, bounds_follow_the_lun_settings)
{
	struct mp_conf c;

	cr_assert_eq(conf_mp_defaults(&c), 0);
	cr_expect_eq(mp_tmf_bound_ms(&c), c.nop_timeout_ms);
	/* Default no_path_retry 4 x polling_interval 5 s: the LUN's own no-path wait. */
	cr_expect_eq(mp_fence_bound_ms(&c), 4ull * c.polling_interval * 1000);
	free(c.no_path_retry);
	c.no_path_retry = strdup("queue");
	cr_expect_eq(mp_fence_bound_ms(&c), (uint64_t)c.io_timeout * 1000, "queue: io_timeout");
	free(c.no_path_retry);
	c.no_path_retry = strdup("fail");
	cr_expect_eq(mp_fence_bound_ms(&c), (uint64_t)c.login_timeout * 1000,
		     "at least one login");
	conf_mp_free(&c);
}
