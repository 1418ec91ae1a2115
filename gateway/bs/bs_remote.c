// SPDX-License-Identifier: MIT
/*
 * Remote backstore: a back-end LUN over several iSCSI paths (gateway/mpath/). Each bs_io
 * becomes an mp_io; the LUN's state becomes the backstore's (not ready until a path logs in,
 * unavailable when every path is gone and no_path_retry ran out), its size is learned at the
 * first login, and the back end's own check conditions come back in the bs_io for the host
 * to see as they are.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bs.h"
#include "bs_priv.h"
#include "gw_log.h"
#include "mp.h"

struct bs_remote_io {
	struct mp_io mio;
	struct bs_io *io;
};

static void bs_remote_state(struct mp_lun *lun, enum mp_lun_state st, void *arg)
{
	struct bs *bs = arg;

	(void)lun;
	switch (st) {
	case MP_LUN_BECOMING_READY:
		bs->state = BS_STATE_BECOMING_READY;
		break;
	case MP_LUN_FAILING:
		bs->state = BS_STATE_UNAVAILABLE;
		break;
	case MP_LUN_READY:
	case MP_LUN_QUEUEING:
		bs->state = BS_STATE_READY;
		break;
	}
}

/* What the back end does itself: COMPARE AND WRITE when its VPD B0 gives a length. */
static void bs_remote_caps(struct bs *bs, struct mp_lun *lun)
{
	struct mp_lun_caps caps;

	mp_lun_caps(lun, &caps);
	bs->caw_blocks = caps.caw_blocks;
}

static void bs_remote_capacity(struct mp_lun *lun, uint64_t size, void *arg)
{
	struct bs *bs = arg;

	/* Whole blocks only; the back end's block size was checked against ours. */
	bs->size = size - size % bs->block_size;
	bs->can_unmap = mp_lun_can_unmap(lun);
	bs_remote_caps(bs, lun);
	bs_event(bs, BS_EV_CAPACITY);
}

static const struct mp_lun_ops bs_remote_lun_ops = {
	.state_changed = bs_remote_state,
	.capacity_changed = bs_remote_capacity,
};

static int bs_remote_open(struct bs *bs)
{
	struct gw_errlist errs;
	struct mp_lun *lun;
	int rc;

	gw_errlist_init(&errs);
	bs->state = BS_STATE_BECOMING_READY;
	rc = mp_lun_create(bs->loop, bs->conf.remote, bs->block_size, bs->conf.size,
			   &bs_remote_lun_ops, bs, &lun, &errs);
	if (rc < 0) {
		char *msg = gw_errlist_join(&errs);

		gw_err("bs", "remote: %s", msg ? msg : strerror(-rc));
		free(msg);
		gw_errlist_fini(&errs);
		return rc;
	}
	gw_errlist_fini(&errs);
	bs->priv = lun;
	/* Known only once a path has logged in: 0 blocks and NOT READY until then. */
	bs->size = 0;
	return 0;
}

static void bs_remote_close(struct bs *bs)
{
	mp_lun_destroy(bs->priv);
	bs->priv = NULL;
}

static void bs_remote_done(struct mp_io *mio);

/*
 * WRITE SAME and UNMAP have no FUA bit: when the host asked for a durable one (a LUN without a
 * write cache), a SYNCHRONIZE CACHE to the back end follows, and the host hears of it after.
 * Returns true when the flush was sent and will complete io.
 */
static bool bs_remote_flush_after(struct bs_io *io)
{
	struct bs_remote_io *f;

	if (!io->fua || (io->op != BS_UNMAP && io->op != BS_WRITE_ZEROES))
		return false;
	f = calloc(1, sizeof(*f));
	if (!f) {
		io->result = -ENOMEM;
		return false;
	}
	f->io = io;
	f->mio.op = MP_FLUSH;
	f->mio.done = bs_remote_done;
	/* Marks the flush: io->fua is cleared so that its own completion finishes io. */
	io->fua = false;
	io->result = mp_lun_submit(io->bs->priv, &f->mio);
	if (io->result < 0) {
		free(f);
		return false;
	}
	return true;
}

static void bs_remote_done(struct mp_io *mio)
{
	struct bs_remote_io *r = gw_container_of(mio, struct bs_remote_io, mio);
	struct bs_io *io = r->io;

	io->result = mio->result;
	if (mio->result == -EREMOTEIO) {
		io->scsi_status = mio->status;
		io->sense_len = mio->sense_len < BS_SENSE_MAX ? mio->sense_len : BS_SENSE_MAX;
		memcpy(io->sense, mio->sense, io->sense_len);
	}
	free(r);
	if (io->result == 0 && bs_remote_flush_after(io))
		return;
	bs_complete(io);
}

/* One I/O to the back end as op, completed through done. */
static int bs_remote_send(struct bs *bs, struct bs_io *io, enum mp_op op,
			  void (*done)(struct mp_io *))
{
	struct bs_remote_io *r;
	int rc;

	if (bs->state == BS_STATE_BECOMING_READY)
		return -EAGAIN;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->io = io;
	r->mio.op = op;
	r->mio.offset = io->offset;
	r->mio.len = io->len;
	r->mio.iov = io->iov;
	r->mio.iovcnt = io->iovcnt;
	r->mio.fua = io->fua;
	r->mio.done = done;
	rc = mp_lun_submit(bs->priv, &r->mio);
	if (rc < 0)
		free(r);
	return rc;
}

static int bs_remote_submit(struct bs *bs, struct bs_io *io)
{
	static const enum mp_op ops[] = {
		[BS_READ] = MP_READ,
		[BS_WRITE] = MP_WRITE,
		[BS_FLUSH] = MP_FLUSH,
		[BS_UNMAP] = MP_UNMAP,
		[BS_WRITE_ZEROES] = MP_WRITE_ZEROES,
	};

	if ((size_t)io->op >= sizeof(ops) / sizeof(ops[0]))
		return -EINVAL;
	return bs_remote_send(bs, io, ops[io->op], bs_remote_done);
}

/* A back end that turned out not to have COMPARE AND WRITE after all (mp_path_core.c): the SCSI
 * core does it from now on. */
static void bs_remote_caw_done(struct mp_io *mio)
{
	struct bs_remote_io *r = gw_container_of(mio, struct bs_remote_io, mio);

	if (mio->result == -EOPNOTSUPP)
		r->io->bs->caw_blocks = 0;
	bs_remote_done(mio);
}

/* COMPARE AND WRITE on the back end: the MISCOMPARE (or any other answer) comes back through
 * bs_remote_done as it came. */
static int bs_remote_caw(struct bs *bs, struct bs_io *io)
{
	return bs_remote_send(bs, io, MP_COMPARE_AND_WRITE, bs_remote_caw_done);
}

static bool bs_remote_settled(struct bs *bs)
{
	return mp_lun_settled(bs->priv);
}

static void bs_remote_shutdown(struct bs *bs)
{
	mp_lun_shutdown(bs->priv);
}

static json_t *bs_remote_status(struct bs *bs)
{
	return mp_lun_status(bs->priv);
}

/* Its size is the back end's: read again on request, the change comes as a capacity event. */
static int bs_remote_recheck(struct bs *bs)
{
	mp_lun_recheck_capacity(bs->priv);
	return 0;
}

const struct bs_ops bs_remote_ops = {
	.name = "remote",
	.open = bs_remote_open,
	.close = bs_remote_close,
	.submit = bs_remote_submit,
	.settled = bs_remote_settled,
	.shutdown = bs_remote_shutdown,
	.status = bs_remote_status,
	.caw = bs_remote_caw,
	.recheck = bs_remote_recheck,
};
