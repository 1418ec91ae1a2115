/* SPDX-License-Identifier: MIT */
/*
 * Backstores: where a LUN's blocks live. One ops table per kind (file or block device, ram,
 * null, remote multipath LUN), one asynchronous submit. File and block I/O go through an
 * io_uring per backstore, submitted and completed on the loop thread (worker threads when the
 * kernel or file system refuse io_uring); remote LUNs are libiscsi sessions in the loop itself;
 * nothing here blocks the loop.
 *
 * A remote backstore is not ready at once (its size is learned at the first login) and may
 * lose every path: bs->state says so, the SCSI core answers NOT READY from it, and the
 * capacity event tells the core the size is known or changed.
 *
 * The async rule (as libiscsi's): bs_submit() returning < 0 never calls io->done; returning 0
 * calls it exactly once, later, on the loop thread, never from inside bs_submit().
 */
#ifndef BS_H
#define BS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "conf.h"
#include "gw_conf.h"
#include "gw_list.h"
#include "gw_loop.h"

enum bs_op {
	BS_READ,
	BS_WRITE,
	BS_FLUSH,		/* everything written so far reaches stable storage */
	BS_UNMAP,		/* deallocate [offset, offset+len): reads return zeroes after */
	BS_WRITE_ZEROES,	/* write zeroes; may deallocate if the backstore is thin */
};

struct bs;

#define BS_SENSE_MAX 32

struct bs_io {
	enum bs_op op;
	uint64_t offset;	/* bytes */
	uint64_t len;		/* bytes; for READ/WRITE the iovec holds at least len bytes */
	const struct iovec *iov;
	int iovcnt;
	bool fua;		/* WRITE: durable before completion */
	int result;		/* set before done: 0 or -errno */
	/* Remote backstores, with result -EREMOTEIO: the back end's SCSI status and sense, for
	 * the host to see as they are (media errors, reservation conflicts...). */
	uint8_t scsi_status;
	uint8_t sense_len;
	uint8_t sense[BS_SENSE_MAX];
	void (*done)(struct bs_io *io);
	void *priv;		/* the submitter's */
	/* Backstore-private from here on. */
	struct bs *bs;
	struct gw_list node;
	uint64_t xfer;		/* file/block with io_uring: bytes moved so far */
	struct iovec *xiov;	/* ... and the rest of the iovec after a short transfer */
};

/* What the SCSI core answers media commands with (SPC-4 NOT READY additional sense codes). */
enum bs_state {
	BS_STATE_READY = 0,
	BS_STATE_BECOMING_READY,	/* 02/04/01: no path has logged in yet; initiators retry */
	BS_STATE_UNAVAILABLE,		/* 02/04/0C: every path down and no_path_retry ran out */
};

enum bs_event {
	BS_EV_CAPACITY,		/* size (or thin provisioning) changed: the core re-reads them */
};

/* Each kind's operations: private to gateway/bs/ (bs_priv.h). */
struct bs_ops;

struct bs {
	const struct bs_ops *ops;
	struct gw_loop *loop;
	struct bs_conf conf;	/* owned copy */
	uint64_t size;		/* bytes, a multiple of block_size */
	uint32_t block_size;
	bool can_unmap;		/* thin: UNMAP deallocates (file: hole punching) */
	/* COMPARE AND WRITE done by the backstore itself, atomically where the blocks live (a
	 * remote LUN whose back end reports MAXIMUM COMPARE AND WRITE LENGTH): at most this many
	 * blocks per command. 0: the SCSI core does it (read, compare, write under its range
	 * lock). Set with size (remote: at the capacity event). */
	uint32_t caw_blocks;
	bool readonly;
	uint64_t inflight;
	int state;		/* enum bs_state */
	void (*event_fn)(struct bs *bs, enum bs_event ev, void *arg);
	void *event_arg;
	void *priv;
	/* Completions of backstores that finish inside submit (ram, null), run from a defer. */
	struct gw_list done_list;
	struct gw_defer done_defer;
};

/* Opens the backstore conf describes; conf is copied. errs gets a message naming the key. */
int bs_create(struct gw_loop *loop, const struct bs_conf *conf, struct bs **out,
	      struct gw_errlist *errs);
/* Closes; the caller has drained its I/O (bs->inflight == 0). Joins the workers, reaps the
 * ring. */
void bs_destroy(struct bs *bs);
int bs_submit(struct bs *bs, struct bs_io *io);
/*
 * COMPARE AND WRITE by the backstore (bs->caw_blocks > 0): [offset, offset + len) is compared
 * with the first len bytes of the iovec and, if equal, written with the next len bytes, as one
 * atomic command where the blocks live. io->op is BS_WRITE. A miscompare, like any answer of
 * the back end, comes back as -EREMOTEIO with its status and sense (MISCOMPARE 0E/1D/00 with
 * the offset in INFORMATION). -EOPNOTSUPP when the backstore cannot, or len is over its limit;
 * as the result in done, -EOPNOTSUPP means the back end refused the opcode without running it,
 * and bs->caw_blocks is 0 from then on. The async rule of bs_submit.
 */
int bs_submit_caw(struct bs *bs, struct bs_io *io);

/* Text name of an op, for logs. */
const char *bs_op_name(enum bs_op op);

/* The SCSI core hears of capacity changes here. */
void bs_set_event_cb(struct bs *bs, void (*fn)(struct bs *bs, enum bs_event ev, void *arg),
		     void *arg);
/* Start-up: false while a remote backstore still spends its initial login budget. */
bool bs_settled(struct bs *bs);
/* Shutdown: stop queueing, fail what waits, drain in flight within a bound (remote). */
void bs_shutdown(struct bs *bs);
/*
 * Thin provisioning: whether the bytes at off are allocated (BS_MAPPED) or a hole that reads
 * as zeroes (BS_DEALLOCATED), and in *extent how many bytes from off (at most len) share that
 * state. Backstores that cannot tell report everything mapped, as SBC allows.
 */
enum { BS_MAPPED = 0, BS_DEALLOCATED = 1 };
int bs_map(struct bs *bs, uint64_t off, uint64_t len, uint64_t *extent);
/*
 * Online resize, in two steps, both from loop 0 (each runs on the backstore's loop), so an
 * apply can still be refused between them with nothing lost:
 * - prepare: size > 0 is the new size in bytes; 0 measures what the backstore stands on (a
 *   block device or file resized from outside). A smaller size than now is refused unless
 *   BS_RESIZE_SHRINK; growth happens here (a file extended, with BS_RESIZE_ALLOCATE allocated
 *   with fallocate instead of left sparse; a device checked to be that large), and the LU still
 *   sees the old size. *out is the size commit takes. errs names "size". -EOPNOTSUPP: the kind
 *   cannot (ram, remote: a remote LUN follows its back end's capacity events).
 * - commit: the backstore is out bytes from now; its LU hears of it (BS_EV_CAPACITY: 2A/09 to
 *   every I_T nexus); a file cut to a smaller size is truncated after that.
 */
#define BS_RESIZE_SHRINK	1u
#define BS_RESIZE_ALLOCATE	2u
int bs_resize_prepare(struct bs *bs, uint64_t size, unsigned flags, uint64_t *out,
		      struct gw_errlist *errs);
void bs_resize_commit(struct bs *bs, uint64_t size);
/* Whether bs_resize_prepare can work on this kind of backstore. */
bool bs_can_resize(const struct bs *bs);
/* A remote backstore reads its back end's capacity again (every path, at once); a change
 * arrives later as BS_EV_CAPACITY. From loop 0. -EOPNOTSUPP for the other kinds. */
int bs_recheck_capacity(struct bs *bs);

/* Live state for the control socket (remote: paths, policies, counters), or NULL. */
json_t *bs_status(struct bs *bs);

#endif
