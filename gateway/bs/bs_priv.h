/* SPDX-License-Identifier: MIT */
/*
 * Private to gateway/bs/: the ops tables of each backstore kind and helpers they share.
 */
#ifndef BS_PRIV_H
#define BS_PRIV_H

#include <sched.h>
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
};

extern const struct bs_ops bs_file_ops;
/* Tests only: open rings as a kernel before 6.1 would (no single issuer, no deferred task
 * work), to cover that path on a newer kernel. Not reachable from configuration or the
 * environment. */
extern bool bs_file_test_classic_ring;
/* Whether a file on tmpfs/ramfs copies its large reads on the workers, for a process that may
 * run on process_cpus (the mask it started with, not the opening loop's pinned thread). */
bool bs_file_overlap_cpus(const cpu_set_t *process_cpus);
extern const struct bs_ops bs_ram_ops;
extern const struct bs_ops bs_null_ops;
extern const struct bs_ops bs_remote_ops;

#endif
