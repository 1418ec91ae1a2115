// SPDX-License-Identifier: MIT
/*
 * Backstore front: creation by type, submission with in-flight accounting, and the deferred
 * completion queue the in-memory backstores complete through. The configuration table is
 * gateway/conf/conf_bs.c.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bs.h"
#include "bs_priv.h"
#include "gw_log.h"
#include "mp.h"

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

static const struct bs_ops *bs_ops_for(int type)
{
	switch (type) {
	case BS_TYPE_FILE:
	case BS_TYPE_BLOCK:
		return &bs_file_ops;
	case BS_TYPE_RAM:
		return &bs_ram_ops;
	case BS_TYPE_NULL:
		return &bs_null_ops;
	case BS_TYPE_REMOTE:
		return &bs_remote_ops;
	}
	return NULL;
}

int bs_create(struct gw_loop *loop, const struct bs_conf *conf, struct bs **out,
	      struct gw_errlist *errs)
{
	const struct bs_ops *ops = bs_ops_for(conf->type);
	struct bs *bs;
	int rc;

	*out = NULL;
	if (!ops) {
		gw_errlist_add(errs, "type", "unknown backstore type %d", conf->type);
		return -EINVAL;
	}
	if (conf->block_size != 512 && conf->block_size != 4096) {
		gw_errlist_add(errs, "block_size", "must be 512 or 4096, not %u", conf->block_size);
		return -EINVAL;
	}
	if ((conf->type == BS_TYPE_FILE || conf->type == BS_TYPE_BLOCK) &&
	    (!conf->path || !conf->path[0])) {
		gw_errlist_add(errs, "path", "required for a %s backstore", ops->name);
		return -EINVAL;
	}
	if (conf->type == BS_TYPE_REMOTE && (!conf->remote || !conf->remote->npaths)) {
		gw_errlist_add(errs, "paths", "required for a remote backstore");
		return -EINVAL;
	}
	if (conf->type == BS_TYPE_REMOTE && conf->path && conf->path[0]) {
		gw_errlist_add(errs, "path", "not used by a remote backstore (its paths are URLs)");
		return -EINVAL;
	}
	if ((conf->type == BS_TYPE_RAM || conf->type == BS_TYPE_NULL) && !conf->size) {
		gw_errlist_add(errs, "size", "required for a %s backstore", ops->name);
		return -EINVAL;
	}
	if (conf->size % conf->block_size) {
		gw_errlist_add(errs, "size", "%llu is not a multiple of block_size %u",
			       (unsigned long long)conf->size, conf->block_size);
		return -EINVAL;
	}
	if (conf->threads < 1 || conf->threads > 64) {
		gw_errlist_add(errs, "threads", "must be 1..64, not %u", conf->threads);
		return -EINVAL;
	}

	bs = calloc(1, sizeof(*bs));
	if (!bs)
		return -ENOMEM;
	bs->ops = ops;
	bs->loop = loop;
	bs->conf = *conf;
	bs->conf.path = NULL;
	bs->conf.remote = NULL;
	if (conf->path) {
		bs->conf.path = strdup(conf->path);
		if (!bs->conf.path) {
			free(bs);
			return -ENOMEM;
		}
	}
	bs->block_size = conf->block_size;
	bs->size = conf->size;
	bs->readonly = conf->readonly;
	gw_list_init(&bs->done_list);
	gw_defer_init(&bs->done_defer, bs_done_defer_fn);

	/* Borrowed while opening: the remote ops copy what they keep. */
	bs->conf.remote = conf->remote;
	rc = ops->open(bs);
	bs->conf.remote = NULL;
	if (rc < 0) {
		/* The ops logged the cause; the key it belongs to is nearly always path or size. */
		if (conf->type == BS_TYPE_REMOTE)
			gw_errlist_add(errs, "paths", "cannot open the remote backstore: %s",
				       strerror(-rc));
		else
			gw_errlist_add(errs, conf->path ? "path" : "size",
				       "%s: cannot open %s backstore: %s",
				       conf->path ? conf->path : "-", ops->name, strerror(-rc));
		free(bs->conf.path);
		free(bs);
		return rc;
	}
	*out = bs;
	return 0;
}

void bs_destroy(struct bs *bs)
{
	if (!bs)
		return;
	if (bs->inflight)
		gw_warn("bs", "destroying backstore with %llu I/Os in flight",
			(unsigned long long)bs->inflight);
	bs->ops->close(bs);
	gw_defer_cancel(&bs->done_defer);
	free(bs->conf.path);
	free(bs);
}

int bs_submit(struct bs *bs, struct bs_io *io)
{
	int rc;

	io->bs = bs;
	io->result = 0;
	io->scsi_status = 0;
	io->sense_len = 0;
	switch (io->op) {
	case BS_WRITE:
	case BS_UNMAP:
	case BS_WRITE_ZEROES:
		if (bs->readonly)
			return -EROFS;
		/* fall through */
	case BS_READ:
		if (io->offset > bs->size || io->len > bs->size - io->offset)
			return -EINVAL;
		break;
	case BS_FLUSH:
		break;
	default:
		return -EINVAL;
	}
	bs->inflight++;
	rc = bs->ops->submit(bs, io);
	if (rc < 0)
		bs->inflight--;
	return rc;
}

int bs_submit_caw(struct bs *bs, struct bs_io *io)
{
	int rc;

	io->bs = bs;
	io->result = 0;
	io->scsi_status = 0;
	io->sense_len = 0;
	io->op = BS_WRITE;
	if (!bs->ops->caw || !bs->caw_blocks || !io->len ||
	    io->len > (uint64_t)bs->caw_blocks * bs->block_size)
		return -EOPNOTSUPP;
	if (bs->readonly)
		return -EROFS;
	if (io->offset > bs->size || io->len > bs->size - io->offset)
		return -EINVAL;
	bs->inflight++;
	rc = bs->ops->caw(bs, io);
	if (rc < 0)
		bs->inflight--;
	return rc;
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

bool bs_settled(struct bs *bs)
{
	return !bs->ops->settled || bs->ops->settled(bs);
}

void bs_shutdown(struct bs *bs)
{
	if (bs->ops->shutdown)
		bs->ops->shutdown(bs);
}

int bs_map(struct bs *bs, uint64_t off, uint64_t len, uint64_t *extent)
{
	int r;

	*extent = len;
	if (!bs->ops->map || !len)
		return BS_MAPPED;
	r = bs->ops->map(bs, off, len, extent);
	if (r < 0 || *extent == 0 || *extent > len) {
		/* Not knowing is never an error: the blocks are reported as mapped. */
		*extent = len;
		return BS_MAPPED;
	}
	return r;
}

json_t *bs_status(struct bs *bs)
{
	return bs && bs->ops->status ? bs->ops->status(bs) : NULL;
}
