// SPDX-License-Identifier: MIT
/*
 * The iSER datamover's memory: per portal, loop and RDMA device, one protection domain and a
 * pool of registered 256 KiB data chunks, grown by ISER_CHUNKS_PER_CONN when a connection
 * arrives and freed with the device's last connection and lent chunk. Chunks stage RDMA
 * transfers, or are lent (alone or as a run of adjacent ones) as task buffers so data moves in
 * place. Nothing here runs per I/O but list moves; registration happens when the pool grows.
 * Everything of a device belongs to its loop's thread.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dmv_iser_ctx.h"
#include "dmv_iser_int.h"
#include "gw_log.h"

static int iser_dev_grow(struct iser_dev *d, uint32_t n)
{
	struct iser_slab *s = calloc(1, sizeof(*s));
	uint32_t i;

	if (!s)
		return -ENOMEM;
	s->n = n;
	s->len = (size_t)n * ISER_CHUNK;
	s->chunks = calloc(n, sizeof(*s->chunks));
	if (!s->chunks || posix_memalign(&s->mem, 4096, s->len)) {
		free(s->chunks);
		free(s);
		return -ENOMEM;
	}
	s->mr = ibv_reg_mr(d->pd, s->mem, s->len, IBV_ACCESS_LOCAL_WRITE);
	if (!s->mr) {
		int r = -errno;

		gw_err("dmv", "iser: registering %zu bytes of data buffers: %s", s->len,
		       strerror(-r));
		free(s->mem);
		free(s->chunks);
		free(s);
		return r;
	}
	for (i = 0; i < n; i++) {
		struct iser_chunk *ch = &s->chunks[i];

		ch->wr.kind = WR_RDMA;
		ch->dev = d;
		ch->slab = s;
		ch->free = true;
		ch->mem = (uint8_t *)s->mem + (size_t)i * ISER_CHUNK;
		ch->lkey = s->mr->lkey;
		gw_list_add_tail(&d->free_chunks, &ch->node);
	}
	gw_list_add_tail(&d->slabs, &s->node);
	d->nchunks += n;
	d->nfree += n;
	d->res->mrs++;
	d->res->bufs += n;
	d->res->reg_bytes += s->len;
	return 0;
}

static void iser_dev_free(struct iser_dev *d)
{
	while (!gw_list_empty(&d->slabs)) {
		struct iser_slab *s = gw_list_first_entry(&d->slabs, struct iser_slab, node);

		gw_list_del(&s->node);
		ibv_dereg_mr(s->mr);
		d->res->mrs--;
		d->res->bufs -= s->n;
		d->res->reg_bytes -= s->len;
		free(s->mem);
		free(s->chunks);
		free(s);
	}
	if (d->pd)
		ibv_dealloc_pd(d->pd);
	dmv_iser_ctx_drop(d->verbs);
	gw_list_del(&d->node);
	free(d);
}

/* The portal's device for verbs, with room in its pool for one more connection. */
int dmv_iser_dev_get(struct iser_portal *ip, unsigned li, struct ibv_context *verbs,
		     struct iser_dev **out)
{
	struct iser_ploop *pl = &ip->pl[li];
	struct iser_dev *d;
	int r;

	gw_list_for_each_entry(d, &pl->devs, node)
		if (d->verbs == verbs)
			goto found;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->verbs = verbs;
	dmv_iser_ctx_hold(verbs);
	d->res = pl->res;
	gw_list_init(&d->slabs);
	gw_list_init(&d->free_chunks);
	gw_list_init(&d->waiters);
	gw_list_add_tail(&pl->devs, &d->node);
	d->pd = ibv_alloc_pd(verbs);
	if (!d->pd) {
		r = -errno;
		gw_err("dmv", "portal %s: ibv_alloc_pd on %s: %s", ip->base.name,
		       ibv_get_device_name(verbs->device), strerror(-r));
		iser_dev_free(d);
		return r;
	}
	if (ibv_query_device(verbs, &d->attr)) {
		r = -errno;
		gw_err("dmv", "portal %s: ibv_query_device: %s", ip->base.name, strerror(-r));
		iser_dev_free(d);
		return r;
	}
found:
	if (d->nchunks < (uint32_t)(d->refs + 1) * ISER_CHUNKS_PER_CONN) {
		r = iser_dev_grow(d, ISER_CHUNKS_PER_CONN);
		if (r) {
			if (!d->refs && !d->lent)
				iser_dev_free(d);
			return r;
		}
	}
	d->refs++;
	*out = d;
	return 0;
}

void dmv_iser_dev_put(struct iser_dev *d)
{
	if (--d->refs > 0 || d->lent)
		return;
	iser_dev_free(d);
}

struct iser_chunk *dmv_iser_chunk_get(struct iser_dev *d)
{
	struct iser_chunk *ch;

	if (gw_list_empty(&d->free_chunks))
		return NULL;
	ch = gw_list_first_entry(&d->free_chunks, struct iser_chunk, node);
	gw_list_del(&ch->node);
	ch->free = false;
	d->nfree--;
	d->res->bufs_in_use++;
	return ch;
}

/* k adjacent free chunks of one slab (contiguous memory under one registration), or NULL. */
static struct iser_chunk *iser_run_get(struct iser_dev *d, uint32_t k)
{
	struct iser_slab *s;
	uint32_t i, j, len;

	gw_list_for_each_entry(s, &d->slabs, node) {
		for (i = 0, len = 0; i < s->n; i++) {
			len = s->chunks[i].free ? len + 1 : 0;
			if (len < k)
				continue;
			for (j = i + 1 - k; j <= i; j++) {
				gw_list_del(&s->chunks[j].node);
				s->chunks[j].free = false;
			}
			d->nfree -= k;
			d->res->bufs_in_use += k;
			return &s->chunks[i + 1 - k];
		}
	}
	return NULL;
}

void dmv_iser_chunk_put(struct iser_dev *d, struct iser_chunk *ch)
{
	ch->x = NULL;
	ch->free = true;
	gw_list_add(&d->free_chunks, &ch->node);
	d->nfree++;
	d->res->bufs_in_use--;
	/* Connections that ran dry get another go before the loop sleeps. */
	while (!gw_list_empty(&d->waiters)) {
		struct iser_conn *w = gw_list_first_entry(&d->waiters, struct iser_conn, dnode);

		gw_list_del(&w->dnode);
		gw_defer_queue(w->base.loop, &w->kick);
	}
}

/*
 * Task buffers (dmv_transport.buf_get/buf_put): a task gets a chunk of its own, or for a
 * command over one chunk a run of adjacent chunks of one slab (contiguous, one registration),
 * up to ISER_RUN_MAX; its RDMA operations run on it in place, one per chunk. The pool keeps
 * ISER_CHUNKS_RESERVE chunks for staging, so transfers that are staged never wait on tasks
 * holding buffers. A lent chunk holds the device (its PD and memory registration) alive past
 * its connections until it comes back.
 */
void *dmv_iser_buf_get(struct dmv_conn *c, uint32_t len, void **handle)
{
	struct iser_conn *ic = gw_container_of(c, struct iser_conn, base);
	struct iser_dev *d = ic->dev;
	uint32_t k = (len + ISER_CHUNK - 1) / ISER_CHUNK, i;
	struct iser_chunk *ch;

	if (!d || ic->state != IC_UP || c->closed || c->lost || !len || k > ISER_RUN_MAX ||
	    d->nfree < ISER_CHUNKS_RESERVE + k)
		return NULL;
	ch = k == 1 ? dmv_iser_chunk_get(d) : iser_run_get(d, k);
	if (!ch)
		return NULL;
	for (i = 0; i < k; i++)
		ch[i].lent = true;
	ch->run = (uint8_t)k;
	d->lent += k;
	d->res->bufs_lent += k;
	*handle = ch;
	return ch->mem;
}

void dmv_iser_buf_put(void *handle)
{
	struct iser_chunk *head = handle;
	struct iser_dev *d = head->dev;
	uint32_t i, k = head->run;

	for (i = 0; i < k; i++) {
		struct iser_chunk *ch = &head[i];

		ch->lent = false;
		/* An RDMA operation still in flight on it gives it back when it completes. */
		if (!ch->zc_busy)
			dmv_iser_chunk_put(d, ch);
	}
	head->run = 0;
	d->lent -= k;
	d->res->bufs_lent -= k;
	if (!d->refs && !d->lent)
		iser_dev_free(d);
}

/* The zero-copy operation on a lent chunk completed: back to the pool if the task let go. */
void dmv_iser_zc_done(struct iser_chunk *ch)
{
	ch->zc_busy = false;
	ch->x = NULL;
	if (!ch->lent)
		dmv_iser_chunk_put(ch->dev, ch);
}
