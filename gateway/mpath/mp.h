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
#include <sys/uio.h>

#include "gw_conf.h"
#include "gw_list.h"
#include "gw_loop.h"

#define MP_LOG "mpath"

enum mp_pg_policy {
	MP_PG_FAILOVER,		/* one path per group, in configuration order */
	MP_PG_MULTIBUS,		/* every path in one group */
	MP_PG_GROUP_BY_PRIO,	/* groups by ALUA priority: AO 50, ANO 10, others 1 */
};

enum mp_selector {
	MP_SEL_ROUND_ROBIN,
	MP_SEL_QUEUE_LENGTH,	/* fewest commands in flight */
	MP_SEL_SERVICE_TIME,	/* fewest bytes in flight (dm's service-time, throughput 1) */
};

/* failback and no_path_retry, decoded */
#define MP_FAILBACK_MANUAL (-1)
#define MP_FAILBACK_IMMEDIATE 0
#define MP_NO_PATH_RETRY_QUEUE (-1)
#define MP_NO_PATH_RETRY_FAIL 0

struct mp_chap_conf {
	char *user;
	char *secret;
	char *mutual_user;
	char *mutual_secret;
};

struct mp_path_conf {
	char *url;		/* iscsi://HOST[:PORT]/TARGET-IQN/LUN or iser://... */
	char *initiator;	/* "" : the LUN's initiator */
	struct mp_chap_conf chap;
};

/* The remote keys of a backstore object ("type": "remote"). */
struct mp_conf {
	int pg_policy;			/* enum mp_pg_policy */
	int selector;			/* enum mp_selector */
	uint32_t rr_min_io_rq;		/* round-robin: I/Os per path before the next */
	uint32_t polling_interval;	/* s: path checker (TUR) period */
	uint32_t checker_timeout;	/* s: a TUR not answered in this is a failed path */
	char *failback;			/* "immediate" | "manual" | seconds */
	char *no_path_retry;		/* "fail" | "queue" | polling intervals to queue */
	char *initiator;		/* initiator name of every path unless the path sets one */
	char *wwid;			/* expected identity ("naa.6..."), "" = the first path's */
	uint32_t login_timeout;		/* s: TCP connect + iSCSI login + identity probe */
	uint32_t initial_login_retry_max; /* logins per path before start-up stops waiting */
	uint32_t io_timeout;		/* s: an I/O outstanding this long fails its path */
	uint32_t io_stall_ms;		/* path with I/O and no reply this long gets a NOP-Out */
	uint32_t nop_timeout_ms;	/* that NOP-Out unanswered this long: the path is dead */
	uint32_t reconnect_delay_ms;	/* first reconnect backoff */
	uint32_t reconnect_max_ms;	/* backoff cap */
	uint32_t drain_timeout_ms;	/* shutdown: in-flight I/O gets this long to finish */
	struct mp_path_conf *paths;
	size_t npaths;
};

extern const struct gw_conf_key mp_conf_keys[];
extern const struct gw_conf_key mp_path_conf_keys[];
extern const struct gw_conf_key mp_chap_conf_keys[];

/* Defaults, then the remote keys and the "paths" array of `in` (a backstore object); keys in
 * `ignore` belong to the caller. Errors name "<path>.<key>" / "<path>.paths[i].url". */
int mp_conf_parse(struct mp_conf *c, const json_t *in, const char *path,
		  const char *const *ignore, struct gw_errlist *errs);
int mp_conf_defaults(struct mp_conf *c);
void mp_conf_free(struct mp_conf *c);
int mp_conf_copy(struct mp_conf *dst, const struct mp_conf *src);
json_t *mp_conf_to_json(const struct mp_conf *c, bool mask_secrets);
/* "immediate" 0, "manual" -1, "N" N seconds. 0 or -EINVAL. */
int mp_parse_failback(const char *s, int32_t *out);
/* "fail" 0, "queue" -1, "N" N polling intervals. 0 or -EINVAL. */
int mp_parse_no_path_retry(const char *s, int32_t *out);

/* I/O */

enum mp_op {
	MP_READ,
	MP_WRITE,
	MP_FLUSH,
	MP_UNMAP,
	MP_WRITE_ZEROES,
};

#define MP_SENSE_LEN 18

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
	uint8_t sense[MP_SENSE_LEN];

	/* Private from here on. */
	struct mp_lun *lun;
	struct mp_path *path;		/* in flight on */
	struct mp_path *last_path;	/* last tried: a retry prefers another */
	struct scsi_task *task;
	struct gw_list node;
	uint64_t start_ms;
	uint64_t sent_ns;
	uint64_t retry_at_ms;
	uint32_t retries;		/* target asked to retry (BUSY, UA, transitioning) */
	uint32_t redrives;		/* moved to another path after a path failure */
	uint8_t *buf;			/* WRITE SAME block / UNMAP parameter list */
	uint32_t parts_left;		/* split I/O: parts not completed yet */
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

#endif
