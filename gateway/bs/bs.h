/* SPDX-License-Identifier: MIT */
/*
 * Backstores: where a LUN's blocks live. One ops table per kind (file or block device, ram,
 * null; remote multipath LUNs later), one asynchronous submit. File and block I/O run on worker
 * threads and complete on the loop thread through an eventfd; nothing here blocks the loop.
 *
 * The async rule (as libiscsi's): bs_submit() returning < 0 never calls io->done; returning 0
 * calls it exactly once, later, on the loop thread, never from inside bs_submit().
 */
#ifndef BS_H
#define BS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

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

struct bs_io {
	enum bs_op op;
	uint64_t offset;	/* bytes */
	uint64_t len;		/* bytes; for READ/WRITE the iovec holds at least len bytes */
	const struct iovec *iov;
	int iovcnt;
	bool fua;		/* WRITE: durable before completion */
	int result;		/* set before done: 0 or -errno */
	void (*done)(struct bs_io *io);
	void *priv;		/* the submitter's */
	/* Backstore-private from here on. */
	struct bs *bs;
	struct gw_list node;
};

enum bs_type {
	BS_TYPE_FILE,		/* regular file (created sparse if missing and size given) */
	BS_TYPE_BLOCK,		/* block device, including dm-multipath maps */
	BS_TYPE_RAM,
	BS_TYPE_NULL,		/* reads zeroes, drops writes: for benchmarks of the target itself */
};

struct bs_conf {
	int type;		/* enum bs_type */
	char *path;		/* file, block */
	uint64_t size;		/* bytes; file: created/extended to this, ram/null: required */
	uint32_t block_size;	/* 512 or 4096 */
	bool direct;		/* O_DIRECT for file/block */
	bool readonly;
	uint32_t threads;	/* worker threads for file/block */
};

extern const struct gw_conf_key bs_conf_keys[];

struct bs_ops {
	const char *name;
	int (*open)(struct bs *bs);
	void (*close)(struct bs *bs);
	int (*submit)(struct bs *bs, struct bs_io *io);
};

struct bs {
	const struct bs_ops *ops;
	struct gw_loop *loop;
	struct bs_conf conf;	/* owned copy */
	uint64_t size;		/* bytes, a multiple of block_size */
	uint32_t block_size;
	bool can_unmap;		/* thin: UNMAP deallocates (file: hole punching) */
	bool readonly;
	uint64_t inflight;
	void *priv;
	/* Completions of backstores that finish inside submit (ram, null), run from a defer. */
	struct gw_list done_list;
	struct gw_defer done_defer;
};

/* Opens the backstore conf describes; conf is copied. errs gets a message naming the key. */
int bs_create(struct gw_loop *loop, const struct bs_conf *conf, struct bs **out,
	      struct gw_errlist *errs);
/* Closes; the caller has drained its I/O (bs->inflight == 0). Joins the workers. */
void bs_destroy(struct bs *bs);
int bs_submit(struct bs *bs, struct bs_io *io);

/* For the ops: finish io now (loop thread only): drops inflight, then calls io->done. */
void bs_complete(struct bs_io *io);
/* For the ops: finish io from the loop's deferred queue, i.e. after submit has returned. */
void bs_complete_later(struct bs_io *io);
/* Text name of an op, for logs. */
const char *bs_op_name(enum bs_op op);

#endif
