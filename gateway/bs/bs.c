// SPDX-License-Identifier: MIT
/*
 * The top of the backstore module's files: the registry that maps a configured type to its
 * kind's ops table (bs_ops_for names them all), creation and destruction, and the front every
 * caller goes through (submission with in-flight accounting, COMPARE AND WRITE, settling,
 * shutdown, allocation, status). The configuration table is gateway/conf/conf_bs.c.
 *
 * The stack: bs.c (this file) -> the kinds (bs_file.c, bs_ram.c, bs_null.c, bs_remote.c),
 * each implementing struct bs_ops -> bs_core.c (completion, op names, events), which every
 * kind calls and which names none of them. Nothing below calls back here by name.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bs.h"
#include "bs_priv.h"
#include "gw_log.h"

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
	bs_core_init(bs);

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
	bs_core_fini(bs);
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

/* ---------------------------------------------------------------------------------------- */
/* Online resize */

bool bs_can_resize(const struct bs *bs)
{
	return bs->ops->measure && bs->ops->grow;
}

struct bs_resize {
	struct bs *bs;
	uint64_t size;
	unsigned flags;
	uint64_t out;
	struct gw_errlist *errs;
};

static int bs_resize_prepare_fn(void *arg)
{
	struct bs_resize *a = arg;
	struct bs *bs = a->bs;
	uint64_t size = a->size;
	int r;

	if (!size) {
		r = bs->ops->measure(bs, &size);
		if (r < 0) {
			gw_errlist_add(a->errs, "size", "cannot read the size of %s: %s",
				       bs->conf.path ? bs->conf.path : bs->ops->name, strerror(-r));
			return r;
		}
		size -= size % bs->block_size;
		if (!size) {
			gw_errlist_add(a->errs, "size", "%s is now smaller than one block",
				       bs->conf.path ? bs->conf.path : bs->ops->name);
			return -EINVAL;
		}
	} else if (size % bs->block_size) {
		gw_errlist_add(a->errs, "size", "%llu is not a multiple of the block size %u",
			       (unsigned long long)size, bs->block_size);
		return -EINVAL;
	}
	if (size < bs->size && !(a->flags & BS_RESIZE_SHRINK)) {
		gw_errlist_add(a->errs, "size", "shrinking from %llu to %llu bytes cuts off data "
			       "hosts may hold; refused (force it with \"force\": true)",
			       (unsigned long long)bs->size, (unsigned long long)size);
		return -EPERM;
	}
	if (size > bs->size && bs->readonly && a->size) {
		/* Measured larger: nothing is written, the LU takes what is there. */
		gw_errlist_add(a->errs, "size", "the backstore is read-only: it cannot grow");
		return -EROFS;
	}
	if (size > bs->size && a->size) {
		r = bs->ops->grow(bs, size, a->flags & BS_RESIZE_ALLOCATE);
		if (r < 0) {
			gw_errlist_add(a->errs, "size", "cannot grow %s to %llu bytes: %s",
				       bs->conf.path ? bs->conf.path : bs->ops->name,
				       (unsigned long long)size, strerror(-r));
			return r;
		}
	}
	a->out = size;
	return 0;
}

int bs_resize_prepare(struct bs *bs, uint64_t size, unsigned flags, uint64_t *out,
		      struct gw_errlist *errs)
{
	struct bs_resize a = { .bs = bs, .size = size, .flags = flags, .errs = errs };
	int r;

	*out = bs->size;
	if (!bs_can_resize(bs)) {
		gw_errlist_add(errs, "size", "a %s backstore cannot change its size in service",
			       bs->ops->name);
		return -EOPNOTSUPP;
	}
	r = gw_loop_call(bs->loop, bs_resize_prepare_fn, &a);
	if (r == 0)
		*out = a.out;
	return r;
}

static int bs_resize_commit_fn(void *arg)
{
	struct bs_resize *a = arg;
	struct bs *bs = a->bs;
	uint64_t old = bs->size;
	int r;

	if (a->size == old)
		return 0;
	bs->size = a->size;
	if (bs->conf.size)
		bs->conf.size = a->size;
	gw_info("bs", "%s: %llu -> %llu bytes in service", bs->conf.path ? bs->conf.path :
		bs->ops->name, (unsigned long long)old, (unsigned long long)a->size);
	bs_event(bs, BS_EV_CAPACITY);
	if (a->size < old && bs->ops->cut) {
		r = bs->ops->cut(bs, a->size);
		if (r < 0)
			gw_warn("bs", "%s: cannot truncate to %llu bytes: %s (the LU addresses "
				"no more than that; the rest stays on disk)", bs->conf.path,
				(unsigned long long)a->size, strerror(-r));
	}
	return 0;
}

void bs_resize_commit(struct bs *bs, uint64_t size)
{
	struct bs_resize a = { .bs = bs, .size = size };

	gw_loop_call(bs->loop, bs_resize_commit_fn, &a);
}

static int bs_recheck_fn(void *arg)
{
	struct bs *bs = arg;

	return bs->ops->recheck(bs);
}

int bs_recheck_capacity(struct bs *bs)
{
	if (!bs->ops->recheck)
		return -EOPNOTSUPP;
	return gw_loop_call(bs->loop, bs_recheck_fn, bs);
}
