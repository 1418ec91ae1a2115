// SPDX-License-Identifier: MIT
/* The gateway's live state (ctl_state.c): sessions, per-LUN counters, the heap. */
#include "iscsi/harness.h"

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

TestSuite(ctl_state, .init = setup, .fini = teardown);

Test(ctl_state, state_reports_sessions_and_lun_counters)
{
	uint8_t cdb[16], data[4096] = { 1 };
	json_t *st, *sess, *lun;

	h_cdb_rw10(cdb, 0x2a, 0, 8);
	h_scsi_cmd(&H, C, 0x800, ISC_FL_F | ISC_FL_W, cdb, 10, 4096, data, 4096);
	fake_dmv_settle(&H.loop);
	fake_dmv_drain(C);
	st = ctl_gw_state(H.cg);
	cr_assert_not_null(st);
	sess = json_array_get(json_object_get(st, "sessions"), 0);
	cr_assert_not_null(sess);
	cr_expect_str_eq(json_string_value(json_object_get(sess, "initiator")), H_INITIATOR);
	cr_expect_str_eq(json_string_value(json_object_get(sess, "target")), H_TARGET);
	cr_expect_eq(json_array_size(json_object_get(sess, "connections")), 1);
	cr_expect_eq(json_integer_value(json_object_get(sess, "write_bytes")), 4096);
	lun = json_array_get(json_object_get(json_array_get(json_object_get(st, "targets"), 0),
					     "luns"), 0);
	cr_assert_not_null(lun);
	cr_expect_eq(json_integer_value(json_object_get(lun, "write_ops")), 1);
	cr_expect_eq(json_integer_value(json_object_get(lun, "write_bytes")), 4096);
	json_decref(st);
}

/* The heap in state: memory the gateway holds shows in heap.in_use (how the soak tells a leak
 * from malloc keeping freed memory). ASan's allocator is not glibc's: nothing to read there. */
#if defined(__SANITIZE_ADDRESS__)
#define H_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define H_ASAN 1
#endif
#endif
Test(ctl_state, state_reports_heap_in_use)
{
	json_t *st = ctl_gw_state(H.cg);

	cr_assert_not_null(st);
	cr_assert(json_is_object(json_object_get(st, "heap")), "state has a heap object");
	json_decref(st);
#ifndef H_ASAN
	{
		size_t len = 4u << 20;
		json_int_t before, held, arena;
		json_t *heap;
		char *p;

		st = ctl_gw_state(H.cg);
		before = json_integer_value(json_object_get(json_object_get(st, "heap"), "in_use"));
		json_decref(st);
		cr_expect_gt(before, 0);
		p = malloc(len);
		cr_assert_not_null(p);
		memset(p, 0x5a, len);
		st = ctl_gw_state(H.cg);
		heap = json_object_get(st, "heap");
		held = json_integer_value(json_object_get(heap, "in_use"));
		arena = json_integer_value(json_object_get(heap, "arena")) +
			json_integer_value(json_object_get(heap, "mmapped"));
		cr_expect_geq(held, before + (json_int_t)len,
			      "in_use %lld after holding 4 MiB, %lld before", (long long)held,
			      (long long)before);
		cr_expect_geq(arena, held, "the heap's memory (arena + mmapped) holds what is in use");
		json_decref(st);
		free(p);
	}
#endif
}
