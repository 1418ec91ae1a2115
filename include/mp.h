/* SPDX-License-Identifier: MIT */
/*
 * Remote multipath LUNs: one back-end LUN reached over N libiscsi paths (iscsi:// or iser://
 * URLs), driven by the gateway's event loop. This module owns the paths (login with a bounded
 * budget, identity check, TUR checker, NOP probe of silent paths, reconnect with capped
 * exponential backoff and jitter), the multipath.conf-style policies (grouping, selector,
 * failback, no_path_retry), failover of each I/O that fails for a path reason, and the status
 * of the LUN and its paths. It knows nothing of the SCSI target core: the remote backstore
 * (gateway/bs/bs_remote.c) maps backstore I/O onto mp_io and back.
 *
 * Async rule (as libiscsi's and bs_submit's): mp_lun_submit() returning < 0 never calls
 * io->done; returning 0 calls it exactly once, later, on the loop thread.
 */
#ifndef MP_H
#define MP_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "conf.h"
#include "gw_conf.h"
#include "gw_list.h"
#include "gw_loop.h"

#define MP_LOG "mpath"

/* I/O */

enum mp_op {
	MP_READ,
	MP_WRITE,
	MP_FLUSH,
	MP_UNMAP,
	MP_WRITE_ZEROES,
	/* COMPARE AND WRITE on the back end (mp_lun_caps: caw_blocks > 0): the iovec holds 2 x
	 * len bytes, the blocks to compare then the blocks to write. Never re-driven once sent:
	 * see MP_UNSURE_*. Result -EOPNOTSUPP: the back end refused the opcode (not run), and
	 * caw_blocks is 0 from then on. */
	MP_COMPARE_AND_WRITE,
};

#define MP_SENSE_LEN 18		/* what mp_io_set_sense builds */
#define MP_SENSE_MAX 32		/* a back end's own sense, passed on as it came */

struct mp_lun;
struct mp_path;
struct scsi_task;

struct mp_io {
	enum mp_op op;
	uint64_t offset;		/* bytes, a multiple of the block size */
	uint64_t len;
	const struct iovec *iov;	/* READ/WRITE: at least len bytes */
	int iovcnt;
	bool fua;
	void (*done)(struct mp_io *io);
	void *priv;
	/* Result: 0, -EREMOTEIO with status (and fixed-format sense when CHECK CONDITION) to be
	 * returned to the host as is, or -EIO. */
	int result;
	uint8_t status;
	uint8_t sense_len;
	uint8_t sense[MP_SENSE_MAX];

	/* Private from here on. */
	struct mp_lun *lun;
	struct mp_path *path;		/* in flight on */
	struct mp_path *last_path;	/* last tried: a retry prefers another */
	struct scsi_task *task;
	void *conn;			/* native engine: the connection it was sent on */
	struct iovec buf_iov;		/* native engine: buf as an iovec */
	struct gw_list node;
	uint64_t start_ms;
	uint64_t sent_ns;
	uint64_t retry_at_ms;
	uint32_t retries;		/* target asked to retry (BUSY, UA, transitioning) */
	uint32_t redrives;		/* moved to another path after a path failure */
	uint8_t *buf;			/* WRITE SAME block / UNMAP parameter list */
	uint32_t parts_left;		/* split I/O: parts not completed yet */
	uint8_t tmf;			/* enum mp_io_tmf (mpath's abort policy) */
};

/* What the LUN tells its owner (the remote backstore). */
enum mp_lun_state {
	MP_LUN_BECOMING_READY,		/* no path has logged in yet: size unknown */
	MP_LUN_READY,			/* a usable path */
	MP_LUN_QUEUEING,		/* no usable path: I/O waits (no_path_retry queue or N) */
	MP_LUN_FAILING,			/* no usable path: I/O fails with the path-down sense */
};

struct mp_lun_ops {
	/* State changes; size/block size are valid from the first READY on. */
	void (*state_changed)(struct mp_lun *lun, enum mp_lun_state st, void *arg);
	/* The back end's capacity changed (first login, or 2A/09 from it). */
	void (*capacity_changed)(struct mp_lun *lun, uint64_t size, void *arg);
};

/* The sense an I/O gets when no path is left (and no_path_retry has run out): NOT READY,
 * LOGICAL UNIT NOT ACCESSIBLE, TARGET PORT IN UNAVAILABLE STATE (02/04/0C). See
 * docs/FAILOVER.md for why. */
#define MP_NOPATH_KEY 0x02
#define MP_NOPATH_ASC 0x04
#define MP_NOPATH_ASCQ 0x0c

/* A COMPARE AND WRITE whose outcome is unknown: sent, then its path failed (connection lost,
 * timeout, shutdown) before the back end answered. It may have compared and written. Sending
 * it again would compare against its own write and report a MISCOMPARE that did not happen,
 * so it fails with ABORTED COMMAND, LOGICAL UNIT COMMUNICATION FAILURE (0B/08/00), which hosts
 * retry (docs/CLUSTER.md, "Atomics"). */
#define MP_UNSURE_KEY 0x0b
#define MP_UNSURE_ASC 0x08
#define MP_UNSURE_ASCQ 0x00

/* What the back end said it can do, from the first path that logged in (VPD pages B0 and B2,
 * READ CAPACITY(16)). */
struct mp_lun_caps {
	bool known;		/* a path has logged in */
	uint32_t caw_blocks;	/* MAXIMUM COMPARE AND WRITE LENGTH, 0: no COMPARE AND WRITE */
	bool lbpme;		/* READ CAPACITY(16): thin provisioned */
	bool vpd_b2;		/* VPD B2 answered: the three below are the back end's */
	bool lbpu;		/* UNMAP */
	bool lbpws;		/* WRITE SAME(16) with UNMAP */
	bool lbpws10;		/* WRITE SAME(10) with UNMAP */
};

/* block_size: the LUN's (paths reporting another are refused); size: expected bytes, 0 to
 * take the first path's. Logins start at once, in the background. */
int mp_lun_create(struct gw_loop *loop, const struct mp_conf *conf, uint32_t block_size,
		  uint64_t size, const struct mp_lun_ops *ops, void *arg, struct mp_lun **out,
		  struct gw_errlist *errs);
/* Every I/O must have completed (see mp_lun_shutdown); contexts are torn down. */
void mp_lun_destroy(struct mp_lun *lun);
int mp_lun_submit(struct mp_lun *lun, struct mp_io *io);
/* Stops queueing (queued I/O fails now), gives in-flight I/O drain_timeout_ms, then fails it. */
void mp_lun_shutdown(struct mp_lun *lun);
/* Start-up: true once a path logged in or every path spent initial_login_retry_max logins. */
bool mp_lun_settled(const struct mp_lun *lun);
enum mp_lun_state mp_lun_state(const struct mp_lun *lun);
uint64_t mp_lun_size(const struct mp_lun *lun);
bool mp_lun_can_unmap(const struct mp_lun *lun);
void mp_lun_caps(const struct mp_lun *lun, struct mp_lun_caps *out);
/* Every logged-in path reads the back end's capacity again at once; a change reaches the
 * capacity_changed op (an operator's request: the back end grew without telling). */
void mp_lun_recheck_capacity(struct mp_lun *lun);
uint64_t mp_lun_inflight(const struct mp_lun *lun);
const char *mp_lun_name(const struct mp_lun *lun);
/* {state, identity, size, policy..., paths: [{url, state, group, priority, alua, errors,
 * failovers, last_error, latency_us, ...}]} (new reference). */
json_t *mp_lun_status(const struct mp_lun *lun);

/*
 * Runs the loop until every LUN is settled or timeout_ms passed (0: no limit beyond the LUNs'
 * own budgets). For main(): portals open and READY=1 go out after this. Returns 0,
 * -ETIMEDOUT, or -EINTR when the loop was stopped.
 */
int mp_wait_settled(struct gw_loop *loop, struct mp_lun *const *luns, size_t n,
		    uint64_t timeout_ms);

/* ---------------------------------------------------------------------------------------- */
/*
 * mp_dm.c: dm-multipath awareness of block backstores. When a block backstore's device is a
 * dm-multipath map (a dm device whose dm uuid starts with "mpath-"), the gateway asks
 * multipathd for the map's and its paths' state through multipathd's own socket (the abstract
 * unix socket "@/org/kernel/linux/storage/multipathd", libmpathcmd's framing: a size_t length
 * then the command with its NUL; the reply framed the same way), at open and then every
 * interval, without ever blocking the loop: connect, send and receive are non-blocking and a
 * query not answered within its timeout is dropped.
 *
 * It only watches: the kernel's dm-multipath moves I/O between the paths, multipathd checks
 * them. What it adds is visibility (the LUN's status shows the map and its paths) and a
 * warning for settings that would hang I/O forever when every path is gone
 * (queue_if_no_path with no_path_retry "queue").
 */
#define MP_DM_SOCKET "/org/kernel/linux/storage/multipathd"

struct mp_dm;

/*
 * Is the block device rdev a dm-multipath map? Reads SYSFS/dev/block/MAJ:MIN/dm/{uuid,name}
 * (sysfs is "/sys" but for tests). Returns 1 and the map name, 0 when it is not one, -errno
 * when sysfs cannot say.
 */
int mp_dm_probe(const char *sysfs, dev_t rdev, char *name, size_t len);

/*
 * Watches map `name` for the backstore labelled `label` (logs), querying multipathd at once and
 * every interval_ms. sock is the abstract socket name (MP_DM_SOCKET but for tests).
 */
int mp_dm_create(struct gw_loop *loop, const char *label, const char *name, const char *sock,
		 uint64_t interval_ms, struct mp_dm **out);
void mp_dm_destroy(struct mp_dm *dm);
/* The map as last seen: {map, multipathd, features, queueing, dm_st, paths[], warning...}. */
json_t *mp_dm_status(const struct mp_dm *dm);

#endif
