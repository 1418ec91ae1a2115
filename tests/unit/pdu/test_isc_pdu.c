// SPDX-License-Identifier: MIT
/* PDU objects: recycling keeps buffers, references, data helpers, AHS limits. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "pdu.h"

Test(pdu, recycled_pdu_keeps_its_buffer_and_comes_back_clean)
{
	struct pdu_pool pool;
	struct pdu *a, *b;
	uint8_t *buf;

	pdu_pool_init(&pool, 0);
	a = pdu_get(&pool);
	cr_assert_not_null(a);
	a->bhs[0] = 0x21;
	cr_assert_eq(pdu_set_data(a, "hello", 5), 0);
	cr_expect_eq(pdu_bhs_dsl(a->bhs), 5, "DataSegmentLength follows the data");
	buf = a->own;
	pdu_put(a);
	cr_expect_eq(pool.live, 0);
	b = pdu_get(&pool);
	cr_expect_eq(b, a, "the free list hands the same object back");
	cr_expect_eq(b->own, buf, "and its buffer: no malloc when warm");
	cr_expect_eq(b->bhs[0], 0, "with a zeroed header");
	cr_expect_eq(b->data_len, 0);
	cr_expect_eq(b->refcnt, 1);
	pdu_put(b);
	pdu_pool_fini(&pool);
}

Test(pdu, references_delay_recycling)
{
	struct pdu_pool pool;
	struct pdu *a;

	pdu_pool_init(&pool, 0);
	a = pdu_get(&pool);
	pdu_ref(a);
	pdu_put(a);
	cr_expect_eq(pool.live, 1);
	cr_expect_eq(pool.nfree, 0);
	pdu_put(a);
	cr_expect_eq(pool.live, 0);
	cr_expect_eq(pool.nfree, 1);
	pdu_pool_fini(&pool);
}

Test(pdu, free_pdus_keep_buffers_up_to_a_byte_bound)
{
	/* A burst of writes with 256 KiB immediate data each: once the burst is over, the pool
	 * keeps at most ISC_PDU_KEPT_MAX bytes of buffers, and says what it keeps. */
	enum { N = 64, LEN = 256 * 1024 };
	struct pdu_pool pool;
	struct pdu *p[N];
	size_t with_buf = 0;

	pdu_pool_init(&pool, 0);
	for (int i = 0; i < N; i++) {
		p[i] = pdu_get(&pool);
		cr_assert_not_null(p[i]);
		cr_assert_eq(pdu_alloc_data(p[i], LEN), 0);
	}
	for (int i = 0; i < N; i++)
		pdu_put(p[i]);
	cr_expect_eq(pool.nfree, N, "every PDU object is kept");
	cr_expect_leq(pool.kept, ISC_PDU_KEPT_MAX, "buffers kept: %zu bytes", pool.kept);
	cr_expect_geq(pool.kept, ISC_PDU_KEPT_MAX - LEN, "up to the bound: %zu bytes", pool.kept);
	cr_expect_eq(pdu_pool_cached_bytes(&pool), pool.kept + N * sizeof(struct pdu));
	/* Taking them again gives the kept buffers back and the count follows. */
	for (int i = 0; i < N; i++) {
		p[i] = pdu_get(&pool);
		with_buf += p[i]->own != NULL;
	}
	cr_expect_eq(with_buf, ISC_PDU_KEPT_MAX / pdu_pad4(LEN), "%zu PDUs came back with buffers",
		     with_buf);
	cr_expect_eq(pool.kept, 0);
	cr_expect_eq(pdu_pool_cached_bytes(&pool), 0);
	for (int i = 0; i < N; i++)
		pdu_put(p[i]);
	pdu_pool_fini(&pool);
	cr_expect_eq(pool.kept, 0);
}

Test(pdu, borrowed_data_is_not_freed_and_ahs_is_bounded)
{
	struct pdu_pool pool;
	static uint8_t ext[100];
	struct pdu *a;

	pdu_pool_init(&pool, 0);
	a = pdu_get(&pool);
	pdu_set_ext_data(a, ext, sizeof(ext));
	cr_expect(a->data_ext);
	cr_expect_eq(a->data, ext);
	cr_expect_eq(pdu_bhs_dsl(a->bhs), 100);
	cr_expect_eq(pdu_alloc_ahs(a, 6), -EINVAL, "AHS comes in 4-byte words");
	cr_expect_eq(pdu_alloc_ahs(a, 1024), -EINVAL, "TotalAHSLength is one byte of words");
	cr_expect_eq(pdu_alloc_ahs(a, 20), 0);
	cr_expect_eq(pdu_bhs_ahs_len(a->bhs), 20);
	pdu_put(a);
	pdu_pool_fini(&pool);
}

Test(pdu, serial_number_arithmetic_wraps)
{
	cr_expect(pdu_sn_lt(0xfffffff0u, 5));
	cr_expect_not(pdu_sn_lt(5, 0xfffffff0u));
	cr_expect(pdu_sn_le(7, 7));
	cr_expect_eq(pdu_pad4(5), 8);
	cr_expect_eq(pdu_pad4(8), 8);
}
