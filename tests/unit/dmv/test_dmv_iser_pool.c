// SPDX-License-Identifier: MIT
/* The iSER datamover's chunk pool (dmv_iser_pool.c): accounting and the connections waiting
 * for a chunk, task buffers lent within the reserve, runs of adjacent chunks for larger
 * commands, and a device that outlives its connections while buffers are lent. Chunks here
 * are plain memory with no registration behind them: the pool's bookkeeping does not touch
 * the device. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "../../../gateway/dmv/dmv_iser_int.h"

/* The pool's counters follow every chunk, and a connection that ran dry is woken when one
 * comes back. Chunks here are plain memory: accounting does not touch the device. */
static int kicked;

static void count_kick(struct gw_defer *d)
{
	(void)d;
	kicked++;
}

Test(dmv_iser_pool, chunk_pool_accounting_and_waiters)
{
	struct gw_loop loop;
	struct iser_dev d;
	struct iser_chunk ch[3];
	struct iser_conn *ic = calloc(1, sizeof(*ic));
	struct iser_chunk *a, *b, *c;
	int i;

	cr_assert_eq(gw_loop_init(&loop), 0);
	memset(&d, 0, sizeof(d));
	d.res = &d.own_res;
	gw_list_init(&d.free_chunks);
	gw_list_init(&d.waiters);
	for (i = 0; i < 3; i++) {
		gw_list_add_tail(&d.free_chunks, &ch[i].node);
		d.nfree++;
		d.nchunks++;
	}
	d.res->bufs = 3;
	ic->base.loop = &loop;
	gw_list_init(&ic->dnode);
	gw_defer_init(&ic->kick, count_kick);

	a = dmv_iser_chunk_get(&d);
	b = dmv_iser_chunk_get(&d);
	c = dmv_iser_chunk_get(&d);
	cr_assert(a && b && c);
	cr_assert_eq(d.res->bufs_in_use, 3);
	cr_assert_null(dmv_iser_chunk_get(&d), "pool dry");
	gw_list_add_tail(&d.waiters, &ic->dnode);
	dmv_iser_chunk_put(&d, b);
	cr_assert_eq(d.res->bufs_in_use, 2);
	cr_assert(gw_list_empty(&d.waiters), "the waiter was taken off the list");
	gw_loop_run_once(&loop, 0);
	cr_assert_eq(kicked, 1, "and kicked once");
	dmv_iser_chunk_put(&d, a);
	dmv_iser_chunk_put(&d, c);
	cr_assert_eq(d.res->bufs_in_use, 0);
	cr_assert_eq(d.nfree, 3);
	gw_loop_run_once(&loop, 0);
	cr_assert_eq(kicked, 1, "no waiter, no kick");
	free(ic);
	gw_loop_fini(&loop);
}

/* A pool of n chunks over mem, on a heap device with one connection (as dmv_iser_dev_get leaves
 * it, minus the verbs objects). */
static struct iser_dev *lend_dev(struct iser_chunk *ch, uint8_t *mem, int n)
{
	struct iser_dev *d = calloc(1, sizeof(*d));
	int i;

	d->res = &d->own_res;
	gw_list_init(&d->node);
	gw_list_init(&d->slabs);
	gw_list_init(&d->free_chunks);
	gw_list_init(&d->waiters);
	for (i = 0; i < n; i++) {
		memset(&ch[i], 0, sizeof(ch[i]));
		ch[i].dev = d;
		ch[i].mem = mem + (size_t)i * 4096;
		gw_list_add_tail(&d->free_chunks, &ch[i].node);
		d->nfree++;
		d->nchunks++;
	}
	d->res->bufs = (uint32_t)n;
	d->refs = 1;
	return d;
}

/* A connection that is up, on d. */
static struct iser_conn *lend_conn(struct iser_dev *d)
{
	struct iser_conn *ic = calloc(1, sizeof(*ic));

	cr_assert_not_null(ic);
	ic->dev = d;
	ic->state = IC_UP;
	return ic;
}

Test(dmv_iser_pool, lends_task_buffers_within_the_reserve_and_outlives_the_connection)
{
	enum { N = ISER_CHUNKS_RESERVE + 3 };
	static uint8_t mem[N * 4096];
	struct iser_chunk ch[N];
	struct iser_dev *d = lend_dev(ch, mem, N);
	struct iser_conn *ic = lend_conn(d);
	struct dmv_portal_res *res = d->res;
	void *h[4] = { 0 }, *p;
	int i;

	cr_assert_eq(dmv_iser_transport.buf_get, dmv_iser_buf_get);
	cr_assert_eq(dmv_iser_transport.buf_put, dmv_iser_buf_put);
	cr_expect_null(dmv_iser_buf_get(&ic->base, ISER_RUN_MAX * ISER_CHUNK + 1, &h[0]),
		       "larger than the longest run");
	cr_expect_null(dmv_iser_buf_get(&ic->base, ISER_CHUNK + 1, &h[0]),
		       "two chunks, but this pool has no slab to find them adjacent in");
	cr_expect_null(dmv_iser_buf_get(&ic->base, 0, &h[0]));
	for (i = 0; i < 3; i++) {
		p = dmv_iser_buf_get(&ic->base, 4096, &h[i]);
		cr_assert_not_null(p);
		cr_expect_eq(p, ((struct iser_chunk *)h[i])->mem, "the chunk's memory is lent");
	}
	cr_expect_eq(res->bufs_lent, 3);
	cr_expect_eq(res->bufs_in_use, 3);
	cr_expect_null(dmv_iser_buf_get(&ic->base, 4096, &h[3]), "the reserve stays for staging");
	cr_expect_eq(d->nfree, ISER_CHUNKS_RESERVE);

	/* Given back while an RDMA operation on it is in flight: the chunk stays out until the
	 * completion. */
	((struct iser_chunk *)h[0])->zc_busy = true;
	dmv_iser_buf_put(h[0]);
	cr_expect_eq(res->bufs_lent, 2);
	cr_expect_eq(res->bufs_in_use, 3, "still in flight");
	dmv_iser_zc_done(h[0]);
	cr_expect_eq(res->bufs_in_use, 2);
	cr_expect_eq(d->nfree, ISER_CHUNKS_RESERVE + 1);

	/* The last connection goes: the device (PD, registration) stays for the lent buffers. */
	dmv_iser_dev_put(d);
	cr_expect_eq(d->refs, 0);
	cr_expect_eq(d->lent, 2);
	dmv_iser_buf_put(h[1]);
	cr_expect_eq(res->bufs_in_use, 1);
	dmv_iser_buf_put(h[2]);	/* frees the device: ASan reports a use after free or a leak */
	free(ic);
}

Test(dmv_iser_pool, no_buffer_from_a_connection_that_is_not_up)
{
	enum { N = ISER_CHUNKS_RESERVE + 2 };
	static uint8_t mem[N * 4096];
	struct iser_chunk ch[N];
	struct iser_dev *d = lend_dev(ch, mem, N);
	struct iser_conn *ic = lend_conn(d);
	void *h = NULL;

	ic->state = IC_DRAINING;
	cr_expect_null(dmv_iser_buf_get(&ic->base, 512, &h));
	ic->state = IC_UP;
	ic->base.lost = true;
	cr_expect_null(dmv_iser_buf_get(&ic->base, 512, &h));
	cr_expect_eq(d->res->bufs_lent, 0);
	dmv_iser_dev_put(d);
	free(ic);
}

/* A command over one chunk gets a run of adjacent chunks of one slab: contiguous memory under
 * one registration. Runs respect the reserve, are only found where chunks are free side by
 * side, and every chunk of a run comes back, one still in flight only at its completion. */
Test(dmv_iser_pool, lends_runs_of_adjacent_chunks_for_larger_commands)
{
	enum { N = ISER_CHUNKS_RESERVE + 8 };
	static uint8_t mem[N * 4096];
	static struct iser_slab slab;
	struct iser_chunk ch[N];
	struct iser_dev *d = lend_dev(ch, mem, N);
	struct iser_conn *ic = lend_conn(d);
	struct dmv_portal_res *res = d->res;
	void *one = NULL, *run = NULL, *two = NULL, *big = NULL;
	int i;

	slab.chunks = ch;
	slab.n = N;
	gw_list_add_tail(&d->slabs, &slab.node);
	for (i = 0; i < N; i++) {
		ch[i].slab = &slab;
		ch[i].free = true;
	}
	cr_assert_eq(dmv_iser_buf_get(&ic->base, 4096, &one), ch[0].mem);
	cr_assert_eq(dmv_iser_buf_get(&ic->base, 2 * ISER_CHUNK + 1, &run), ch[1].mem,
		     "three chunks from the first free ones side by side");
	cr_expect_eq(run, &ch[1]);
	cr_expect_eq(ch[1].run, 3);
	cr_expect(ch[1].lent && ch[2].lent && ch[3].lent && !ch[4].lent);
	cr_expect_eq(res->bufs_lent, 4);
	cr_expect_eq(res->bufs_in_use, 4);
	cr_expect_eq(d->nfree, N - 4);
	/* The free list no longer holds them: single chunks come from elsewhere. */
	cr_assert_eq(dmv_iser_buf_get(&ic->base, 512, &two), ch[4].mem);
	/* N - 5 = reserve + 3 left: a run of four would eat into the reserve. */
	cr_expect_null(dmv_iser_buf_get(&ic->base, 4 * ISER_CHUNK, &big));
	/* Back with its middle chunk still under an RDMA operation. */
	ch[2].zc_busy = true;
	dmv_iser_buf_put(run);
	cr_expect_eq(res->bufs_lent, 2);
	cr_expect_eq(res->bufs_in_use, 3, "the busy chunk waits for its completion");
	cr_expect_eq(dmv_iser_buf_get(&ic->base, 2 * ISER_CHUNK, &big), ch[5].mem,
		     "1 and 3 are free but not side by side: the run comes from further on");
	dmv_iser_buf_put(big);
	dmv_iser_zc_done(&ch[2]);
	cr_expect_eq(res->bufs_in_use, 2);
	cr_assert_eq(dmv_iser_buf_get(&ic->base, 3 * ISER_CHUNK, &big), ch[1].mem,
		     "whole again: the run is found where it was");
	dmv_iser_buf_put(big);
	dmv_iser_buf_put(one);
	dmv_iser_buf_put(two);
	cr_expect_eq(res->bufs_lent, 0);
	cr_expect_eq(res->bufs_in_use, 0);
	cr_expect_eq(d->nfree, N);
	gw_list_del(&slab.node);	/* not the device's to free: no registration behind it */
	dmv_iser_dev_put(d);
	free(ic);
}
