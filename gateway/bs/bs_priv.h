/* SPDX-License-Identifier: MIT */
/*
 * Private to gateway/bs/: the interface each backstore kind implements (struct bs_ops), the
 * shared core the kinds call (bs_core.c), and each kind's table, which only the registry
 * (bs.c) names.
 */
#ifndef BS_PRIV_H
#define BS_PRIV_H

#include <sys/uio.h>

#include "bs.h"
#include "gw_iov.h"

/* What a backstore kind implements; bs.c calls these and nobody outside gateway/bs/ does. */
struct bs_ops {
	const char *name;
	int (*open)(struct bs *bs);
	void (*close)(struct bs *bs);
	int (*submit)(struct bs *bs, struct bs_io *io);
	/* Optional (NULL: true / nothing / NULL). */
	bool (*settled)(struct bs *bs);
	void (*shutdown)(struct bs *bs);
	json_t *(*status)(struct bs *bs);
	/* Allocation of [off, off + len): see bs_map. Called on the loop thread; must be cheap. */
	int (*map)(struct bs *bs, uint64_t off, uint64_t len, uint64_t *extent);
	/* COMPARE AND WRITE where the blocks live (bs_submit_caw); NULL: -EOPNOTSUPP. */
	int (*caw)(struct bs *bs, struct bs_io *io);
	/* Online resize (bs_resize_prepare/commit), on the backstore's loop; NULL: the kind
	 * cannot. measure: *size is what the backstore stands on now (a device or a file grown
	 * from outside). grow: what the new size needs before the LU sees it (a file extended,
	 * allocated when allocate; a device checked to be that large). cut: what a smaller size
	 * needs after the LU stopped addressing the rest (a file truncated). */
	int (*measure)(struct bs *bs, uint64_t *size);
	int (*grow)(struct bs *bs, uint64_t size, bool allocate);
	int (*cut)(struct bs *bs, uint64_t size);
	/* A backstore whose size is someone else's (remote): ask for it again; the answer comes
	 * later as BS_EV_CAPACITY if it changed. */
	int (*recheck)(struct bs *bs);
};

/* bs_core.c: what the kinds call. */
/* Finish io now (loop thread only): drops inflight, then calls io->done. */
void bs_complete(struct bs_io *io);
/* Finish io from the loop's deferred queue, i.e. after submit has returned. */
void bs_complete_later(struct bs_io *io);
/* Report an event to whoever listens (bs_set_event_cb). */
void bs_event(struct bs *bs, enum bs_event ev);
/* The deferred completion queue of a new backstore, and its end (bs.c: create, destroy). */
void bs_core_init(struct bs *bs);
void bs_core_fini(struct bs *bs);

/* The kinds' tables (bs_file.c, bs_ram.c, bs_null.c, bs_remote.c): named by bs.c alone. */
extern const struct bs_ops bs_file_ops;
extern const struct bs_ops bs_ram_ops;
extern const struct bs_ops bs_null_ops;
extern const struct bs_ops bs_remote_ops;

#endif
