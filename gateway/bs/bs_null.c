// SPDX-License-Identifier: MIT
/*
 * Null backstore: reads return zeroes and writes are dropped, so a benchmark measures the
 * target and the transport alone.
 */
#include <errno.h>

#include "bs.h"
#include "bs_priv.h"

static int bs_null_open(struct bs *bs)
{
	bs->can_unmap = true;
	return 0;
}

static void bs_null_close(struct bs *bs)
{
	(void)bs;
}

static int bs_null_submit(struct bs *bs, struct bs_io *io)
{
	(void)bs;
	if (io->op == BS_READ &&
	    gw_iov_zero(io->iov, io->iovcnt, 0, io->len) != io->len)
		return -EINVAL;
	bs_complete_later(io);
	return 0;
}

/* Any size: nothing stands behind it. */
static int bs_null_measure(struct bs *bs, uint64_t *size)
{
	*size = bs->size;
	return 0;
}

static int bs_null_grow(struct bs *bs, uint64_t size, bool allocate)
{
	(void)bs;
	(void)size;
	(void)allocate;
	return 0;
}

const struct bs_ops bs_null_ops = {
	.name = "null",
	.open = bs_null_open,
	.close = bs_null_close,
	.submit = bs_null_submit,
	.measure = bs_null_measure,
	.grow = bs_null_grow,
};
