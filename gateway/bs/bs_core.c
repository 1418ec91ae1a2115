// SPDX-License-Identifier: MIT
/*
 * What every backstore kind calls, at the bottom of the module's files: finishing an I/O (at
 * once, or from the loop's deferred queue for kinds that finish inside submit: ram, null), the
 * ops' names for logs, and events to whoever listens (the SCSI core hears of capacity changes).
 * It names no kind and calls nothing above it; bs.c sets up each backstore's part of it
 * (bs_core_init, bs_core_fini).
 */
#include "bs.h"
#include "bs_priv.h"

const char *bs_op_name(enum bs_op op)
{
	switch (op) {
	case BS_READ:
		return "read";
	case BS_WRITE:
		return "write";
	case BS_FLUSH:
		return "flush";
	case BS_UNMAP:
		return "unmap";
	case BS_WRITE_ZEROES:
		return "write-zeroes";
	}
	return "?";
}

static void bs_done_defer_fn(struct gw_defer *d)
{
	struct bs *bs = gw_container_of(d, struct bs, done_defer);
	struct gw_list batch;

	/* Take the whole batch first: a done callback may submit again and queue more. */
	gw_list_init(&batch);
	if (!gw_list_empty(&bs->done_list)) {
		batch.next = bs->done_list.next;
		batch.prev = bs->done_list.prev;
		batch.next->prev = &batch;
		batch.prev->next = &batch;
		gw_list_init(&bs->done_list);
	}
	while (!gw_list_empty(&batch)) {
		struct bs_io *io = gw_list_first_entry(&batch, struct bs_io, node);

		gw_list_del(&io->node);
		bs_complete(io);
	}
}

void bs_core_init(struct bs *bs)
{
	gw_list_init(&bs->done_list);
	gw_defer_init(&bs->done_defer, bs_done_defer_fn);
}

void bs_core_fini(struct bs *bs)
{
	gw_defer_cancel(&bs->done_defer);
}

void bs_complete(struct bs_io *io)
{
	struct bs *bs = io->bs;

	if (bs->inflight)
		bs->inflight--;
	io->done(io);
}

void bs_complete_later(struct bs_io *io)
{
	struct bs *bs = io->bs;

	gw_list_add_tail(&bs->done_list, &io->node);
	gw_defer_queue(bs->loop, &bs->done_defer);
}

void bs_set_event_cb(struct bs *bs, void (*fn)(struct bs *bs, enum bs_event ev, void *arg),
		     void *arg)
{
	bs->event_fn = fn;
	bs->event_arg = arg;
}

void bs_event(struct bs *bs, enum bs_event ev)
{
	if (bs->event_fn)
		bs->event_fn(bs, ev, bs->event_arg);
}
