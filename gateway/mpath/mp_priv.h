/* SPDX-License-Identifier: MIT */
/*
 * Private to gateway/mpath/: the LUN and path structures, the engine interface a path's session
 * is driven through (struct mp_engine_ops), the path's files' calls to each other, and the pure
 * policy functions (grouping, priority, selectors, failback, backoff, error classification) the
 * unit tests drive with fake path data.
 *
 * A path's files form a stack, each calling only the ones below it:
 *   mp_path.c            the path: init (picks the engine), tick, send, status
 *   mp_path_libiscsi.c   the engines, one struct mp_engine_ops each; their own state
 *   mp_path_native.c       behind p->eng_priv
 *   mp_path_probe.c      control commands: the identity probe at login, the checker
 *   mp_path_tmf.c        the abort policy (ABORT TASK, LUN RESET, dropping the session)
 *   mp_path_core.c       state, failing a path, in-flight accounting, an I/O's end, the fence
 * with mp_policy.c and mp_scsi.c (pure functions) under all of them, and mp_ini.c (the native
 * initiator's connection) under the native engine.
 */
#ifndef MP_PRIV_H
#define MP_PRIV_H

#include <stdbool.h>
#include <stdint.h>

#include "mp.h"

struct iscsi_context;
struct iscsi_data;
struct mp_engine_ops;
struct mp_grave;
struct scsi_task;

enum mp_path_state {
	MP_PATH_DOWN,		/* no session; next login at next_attempt_ms */
	MP_PATH_CONNECTING,	/* TCP connect and iSCSI login under way */
	MP_PATH_PROBING,	/* logged in: identity, capacity and ALUA state being read */
	MP_PATH_ACTIVE,		/* usable for I/O */
	MP_PATH_STANDBY,	/* logged in and checked, ALUA standby/unavailable: no I/O */
	MP_PATH_REFUSED,	/* reports another device than the LUN: never used */
};

enum mp_probe_step {
	MP_PROBE_VPD83,
	MP_PROBE_CAPACITY,
	MP_PROBE_VPD_B0,	/* block limits: MAXIMUM COMPARE AND WRITE LENGTH */
	MP_PROBE_VPD_B2,	/* logical block provisioning: LBPU, LBPWS, LBPWS10 */
	MP_PROBE_RTPG,
	MP_PROBE_DONE,
};

#define MP_IDENT_MAX 80
#define MP_ERR_MAX 160
#define MP_PRIO_AO 50
#define MP_PRIO_ANO 10
#define MP_PRIO_OTHER 1
/* The checker reads the capacity every this many rounds (30 s at the default polling_interval
 * of 5 s), besides when the back end says it changed. */
#define MP_CAP_CHECKS 6

/*
 * libiscsi 1.19's iSER transport (see docs/TROUBLESHOOTING.md, "Back ends over iSER"): every
 * command's data goes through one of 256 pre-registered 256 KiB buffers of the connection, a
 * larger command fails after it was queued and is then freed twice, and running out of
 * buffers dereferences NULL. An iSER path therefore never carries more than MP_ISER_MAX_XFER
 * bytes per command nor more than MP_ISER_MAX_INFLIGHT commands at once (far below 256, and
 * inside tgt's and LIO's default command windows, which libiscsi's iSER does not honour).
 */
#define MP_ISER_MAX_XFER (256u * 1024u)
#define MP_ISER_MAX_INFLIGHT 32u
/* A disconnected iSER context is freed this long after its connection: libiscsi's connection
 * manager thread may still be finishing with it. */
#define MP_ISER_GRAVE_MS 500u
/* An abandoned iSER connect is waited for this long before the path connects again anyway:
 * libiscsi's connect can hang for good (see TROUBLESHOOTING.md). */
#define MP_ISER_STALE_WAIT_MS 30000u

/*
 * The abort policy (docs/ARCHITECTURE.md, "Aborts before re-drives"). A command a path does not
 * answer in time is aborted there (ABORT TASK); an abort not answered within the bound
 * escalates to a LUN RESET on that path while its session is up, and a reset not answered
 * drops the session. A command that changes the medium is sent again elsewhere only once its
 * abort (or reset) is confirmed, or once the dropped session is known to be gone (the path's
 * next login with the same ISID reinstates it: RFC 7143 §6.3.5), or, for a path that stays
 * unreachable, after the fence bound. Reads go elsewhere at once.
 */
enum mp_io_tmf {
	MP_IO_TMF_NONE,
	MP_IO_ABORTING,		/* ABORT TASK or LUN RESET sent for it: still the engine's */
	MP_IO_FENCED,		/* a write of a dropped session: on p->fenced until it is gone */
};

enum mp_tmf_step {
	MP_TMF_NONE,		/* no task management under way */
	MP_TMF_ABORT,		/* ABORT TASKs sent, answers pending */
	MP_TMF_RESET,		/* LUN RESET sent */
	MP_TMF_DROP,		/* give up on the session: fail the path, fence its writes */
};

/* A command that may change the medium (WRITE, WRITE SAME, UNMAP, COMPARE AND WRITE): never
 * sent twice while an earlier copy may still run. READ and SYNCHRONIZE CACHE may. */
bool mp_op_changes_medium(enum mp_op op);
/* The next step when the current one failed or ran out of time. */
enum mp_tmf_step mp_tmf_escalate(enum mp_tmf_step from, bool session_up);
/* How long an ABORT TASK or LUN RESET may go unanswered (ms). */
uint64_t mp_tmf_bound_ms(const struct mp_conf *conf);
/* How long writes of a dropped session wait for its reinstatement before they go elsewhere
 * anyway (ms): the LUN's no-path wait (no_path_retry x polling_interval), at least one
 * login_timeout, at most io_timeout. */
uint64_t mp_fence_bound_ms(const struct mp_conf *conf);

struct mp_tmf_req;

/*
 * What a path reports to the LUN that owns it. The owner registers these at mp_path_init; a
 * path never calls into mp_lun.c by name. Each gets the owner and the path or I/O concerned.
 */
struct mp_path_owner_ops {
	/* The path's state, priority or ALUA state changed: the owner re-evaluates its group. */
	void (*changed)(struct mp_lun *lun, struct mp_path *p);
	/* io left the path (it failed, or cannot reach the LU): send it again, elsewhere if
	 * path_failure. */
	void (*redrive)(struct mp_lun *lun, struct mp_io *io, bool path_failure);
	/* The LU asked to retry io: again at at_ms, on any path. */
	void (*retry)(struct mp_lun *lun, struct mp_io *io, uint64_t at_ms);
	/* io is finished with its status and sense. */
	void (*complete)(struct mp_lun *lun, struct mp_io *io);
	/* A new path's identity against the LUN's: 0, or -EMEDIUMTYPE with msg filled. */
	int (*check_identity)(struct mp_lun *lun, struct mp_path *p, char *msg, size_t len);
	/* Destroys ctx (already disconnected) MP_ISER_GRAVE_MS from now. */
	void (*bury)(struct mp_lun *lun, struct iscsi_context *ctx);
	/* The checker read the back end's capacity again (p->size, maybe unchanged). */
	void (*capacity)(struct mp_lun *lun, struct mp_path *p);
};

struct mp_path {
	struct mp_lun *lun;
	const struct mp_path_owner_ops *owner;
	unsigned int idx;		/* configuration order */
	char *url;			/* as configured, less any CHAP password: for logs */
	char *portal;
	char *target;
	int lun_nr;
	bool iser;			/* an iser:// URL (always engine libiscsi) */
	uint32_t max_xfer;		/* bytes per command, 0: no limit */
	uint32_t max_inflight;		/* commands in flight, 0: no limit */
	char *initiator;
	struct mp_chap_conf chap;

	enum mp_path_state state;
	const struct mp_engine_ops *eng;	/* the engine's calls (struct mp_engine_ops below) */
	void *eng_priv;			/* its own state: its session, watch, lookup (eng->init) */
	struct gw_defer teardown;	/* runs eng->teardown after a failure (mp_path_core.c) */

	uint32_t isid_rnd;		/* the ISID's random part: the same on every login */
	enum mp_tmf_step tmf;		/* task management under way */
	uint32_t tmf_pending;		/* its answers not in yet */
	bool tmf_failed;		/* one answer was not "complete" / "no such task" */
	uint64_t tmf_deadline_ms;
	uint32_t tmf_gen;		/* which round an answer belongs to */
	struct mp_tmf_req *tmf_reqs;	/* answers awaited (freed with the session) */
	struct gw_list fenced;		/* struct mp_io: writes of a dropped session */
	uint32_t nr_fenced;
	uint64_t fence_deadline_ms;

	struct gw_list inflight;	/* struct mp_io */
	uint32_t nr_inflight;
	uint64_t inflight_bytes;
	uint64_t last_rx_ms;		/* last reply of any kind, or start of the busy period */

	uint64_t deadline_ms;		/* CONNECTING/PROBING must finish by then */
	uint64_t next_attempt_ms;	/* DOWN/REFUSED: next login */
	uint32_t backoff_n;		/* consecutive failed logins: the backoff exponent */
	uint32_t logins;		/* login attempts started */
	bool ever_up;

	enum mp_probe_step probe;
	uint32_t probe_tries;
	struct scsi_task *ctl_task;	/* probe or checker command in flight */
	bool check_pending;
	uint64_t check_deadline_ms;
	uint64_t next_check_ms;
	/* The back end's capacity is read again by the checker (READ CAPACITY(16)) when it said
	 * CAPACITY DATA HAS CHANGED, when asked (mp_lun_recheck_capacity), and every
	 * MP_CAP_CHECKS checks. */
	bool recap;
	const char *recap_why;		/* what set recap, for the log */
	uint32_t checks;
	bool nop_pending;
	uint64_t nop_deadline_ms;

	/* What the path reports. */
	char ident[MP_IDENT_MAX];
	uint64_t size;
	uint32_t block_size;
	bool lbpme;
	struct mp_lun_caps caps;	/* what this path's back end reported */
	bool alua;			/* REPORT TARGET PORT GROUPS answered */
	int alua_state;			/* of the target port group the path's port is in */
	int alua_tpg;			/* that group (VPD 0x83), -1: unknown */
	uint8_t prio;

	/* Counters. */
	uint64_t ios;
	uint64_t errors;		/* path failures and failed logins */
	uint64_t failovers;		/* I/Os moved away from this path */
	uint64_t aborts;		/* ABORT TASKs sent */
	uint64_t aborts_failed;		/* not answered in time, or refused */
	uint64_t lun_resets;		/* LUN RESETs sent */
	uint64_t fence_waits;		/* writes held until a dropped session was gone */
	uint64_t fence_expired;		/* of those, let go by the bound, not by reinstatement */
	uint64_t lat_ewma_us;
	char last_error[MP_ERR_MAX];
	uint64_t state_since_ms;
	/* Where the current or last login went: the numeric address connected to, and the
	 * portal a native login was redirected to ("" if none); shown in the path's state. */
	char addr[64];
	char redirected_to[128];
};

/*
 * What differs between the engines, one const table each: a libiscsi context
 * (mp_path_libiscsi.c) or an mp_ini connection for "engine": "native" (mp_path_native.c).
 * mp_path.c picks one at init and is the only file that names them; the call sites ask p->eng,
 * never which engine a path has. An engine keeps its own state behind p->eng_priv and reports
 * only to the files below it (mp_path_core.c, mp_path_probe.c, mp_path_tmf.c). The path's
 * states, probe, checker, stall detection and I/O ends are shared.
 */
struct mp_engine_ops {
	const char *name;
	/* Sets up p->eng_priv: 0, or < 0 with errs naming field. */
	int (*init)(struct mp_path *p, struct gw_errlist *errs, const char *field);
	/* Ends every session of p (what was on them goes back to the LUN) and frees p->eng_priv;
	 * also after a failed init. */
	void (*fini)(struct mp_path *p);
	/* The last error, for messages. */
	const char *(*err)(const struct mp_path *p);
	/* Optional: before a new login. -EBUSY: not yet (p->next_attempt_ms says when). */
	int (*prepare)(struct mp_path *p, uint64_t now_ms);
	/* Starts connect and login (state CONNECTING; a failure goes through mp_path_fail, a
	 * login through mp_path_logged_in). */
	void (*connect)(struct mp_path *p);
	/* The portal's name the current login is looking up (off the loop), else NULL. */
	const char *(*resolving)(const struct mp_path *p);
	/* Optional: where the live session went, overriding p->addr and p->redirected_to. */
	void (*where)(const struct mp_path *p, const char **addr, const char **redirected_to);
	/* The path has a session (connecting, or logged in). */
	bool (*has_session)(const struct mp_path *p);
	/* A control command's answer came on iscsi (as passed to its callback): true when that
	 * is a session the path has left. */
	bool (*stale)(const struct mp_path *p, const struct iscsi_context *iscsi);
	/* Optional: the last login is stuck inside the engine (mp_path_stuck). */
	bool (*stuck)(const struct mp_path *p);
	/* Optional: the tick's chance to follow what the session waits for (libiscsi's events). */
	void (*poll)(struct mp_path *p);
	/* The session is over (mp_path_fail): stop watching it and set it aside for teardown. */
	void (*drop)(struct mp_path *p);
	/* From the teardown defer: destroys what drop set aside; its I/O goes back to the LUN. */
	void (*teardown)(struct mp_path *p);
	/* A control command (probe, checker) answered into a libiscsi scsi_task; owns task.
	 * cb is an iscsi_command_cb (libiscsi's headers stay out of this one). */
	int (*ctl_send)(struct mp_path *p, struct scsi_task *task, const uint8_t *cdb,
			int cdb_len, int xfer,
			void (*cb)(struct iscsi_context *iscsi, int status, void *data, void *priv));
	/* A NOP-Out ping; 0 when sent (nop_pending is cleared by its answer). */
	int (*nop)(struct mp_path *p);
	/* io's command, its CDB built; 0, or < 0 having failed the path. */
	int (*send)(struct mp_path *p, struct mp_io *io, const uint8_t *cdb, int cdb_len,
		    int dir, uint32_t xfer, const struct iscsi_data *dp);
	/* ABORT TASK for io / LUN RESET of the path's LUN: 0 when sent (the answer comes to
	 * mp_path_tmf_answer), -EALREADY when io was never sent and has just ended cancelled,
	 * -EOPNOTSUPP when the engine cannot, other < 0 when it could not be sent. */
	int (*abort)(struct mp_path *p, struct mp_io *io);
	int (*lun_reset)(struct mp_path *p);
	/* The target confirmed: the commands marked MP_IO_ABORTING that the engine still holds
	 * end now, cancelled (libiscsi keeps them; mp_ini has ended them already). */
	void (*release)(struct mp_path *p);
};

struct mp_lun {
	struct gw_loop *loop;
	struct mp_conf conf;		/* owned copy */
	char name[160];
	int32_t failback;		/* decoded */
	int32_t no_path_retry;
	uint32_t block_size;
	uint64_t size;			/* 0 until a path logged in */
	uint64_t conf_size;		/* expected size, 0: any */
	bool can_unmap;
	struct mp_lun_caps caps;	/* from the first usable path */
	char ident[MP_IDENT_MAX];	/* "" until the first path (or conf wwid) */
	bool ident_pinned;		/* from conf.wwid */

	struct mp_path *paths;
	size_t npaths;
	int cur_rank;			/* path group in use; INT_MAX: none */
	struct mp_path *rr_path;	/* round-robin: last path used */
	uint32_t rr_used;		/* I/Os it took in a row */
	uint64_t failback_since_ms;

	enum mp_lun_state state;
	uint64_t nopath_deadline_ms;	/* QUEUEING with no_path_retry N: fail from then on */
	bool settled;
	bool stopping;
	bool destroying;
	uint64_t drain_deadline_ms;

	struct gw_list waitq;		/* no usable path */
	struct gw_list retryq;		/* delayed retries, retry_at_ms */
	struct gw_list dispatchq;	/* to (re)dispatch from the defer */
	struct gw_list doneq;		/* finished, done runs from the defer */
	struct gw_list busyq;		/* every usable path of the group at its in-flight cap */
	uint64_t max_io;		/* READ/WRITE split into commands of this many bytes, 0: no */
	struct mp_grave *graves;	/* iSER contexts to destroy once their threads are done */
	struct gw_defer defer;
	struct gw_timer tick;
	uint64_t inflight;		/* submitted and not completed */
	uint64_t rng;

	/* Counters. */
	uint64_t failovers;		/* I/Os re-driven on another path */
	uint64_t group_switches;
	uint64_t nopath_failed;		/* I/Os failed because no path was left */
	uint64_t unsure_failed;		/* COMPARE AND WRITEs failed with MP_UNSURE_* */

	const struct mp_lun_ops *ops;
	void *ops_arg;
};

/* mp_policy.c: verdicts on a back end's answer */
enum mp_verdict {
	MP_V_OK,	/* done */
	MP_V_PASS,	/* the host gets the status and sense as they are */
	MP_V_RETRY,	/* the LU asked to retry (BUSY, UA, transitioning...): again, any path */
	MP_V_PATH,	/* this path cannot reach the LU: fail the path, re-drive elsewhere */
};

enum mp_verdict mp_classify(uint8_t status, uint8_t key, uint8_t asc, uint8_t ascq);
const char *mp_verdict_name(enum mp_verdict v);
uint8_t mp_alua_prio(int alua_state);
/* Lower is better; by the grouping policy. */
int mp_path_rank(const struct mp_lun *lun, const struct mp_path *p);
bool mp_path_usable(const struct mp_path *p);
/* Below its in-flight cap (a usable path at its cap gets new I/O later, not elsewhere). */
bool mp_path_has_room(const struct mp_path *p);
/* Best rank among usable paths, INT_MAX if none. */
int mp_best_rank(const struct mp_lun *lun);
/* A usable path of group `rank` by the LUN's selector; `avoid` is taken only if it is the
 * only one. NULL if the group has none. */
struct mp_path *mp_select(struct mp_lun *lun, int rank, uint64_t len, const struct mp_path *avoid);
/* Re-evaluates the group in use (failover at once, failback by policy). True if it changed. */
bool mp_update_group(struct mp_lun *lun, uint64_t now_ms);
/* Equal-jitter capped exponential backoff: d = min(cap, base * 2^n), result in [d/2, d]. */
uint64_t mp_backoff_ms(uint32_t n, uint32_t base_ms, uint32_t cap_ms, uint64_t rnd);
/* Delay before retry number n of an I/O the target asked to retry. */
uint64_t mp_retry_delay_ms(uint32_t n, uint8_t status, uint8_t key);
uint64_t mp_rand(uint64_t *state);
const char *mp_path_state_name(enum mp_path_state s);
const char *mp_lun_state_name(enum mp_lun_state s);
const char *mp_alua_state_name(int s);

/* mp_path.c: the path (the LUN's calls) */
int mp_path_init(struct mp_lun *lun, const struct mp_path_owner_ops *owner, struct mp_path *p,
		 unsigned int idx, const struct mp_path_conf *pc, struct gw_errlist *errs,
		 const char *field);
void mp_path_fini(struct mp_path *p);
void mp_path_tick(struct mp_path *p, uint64_t now_ms);
/* Sends io on p; < 0: not sent (p was failed), the caller re-dispatches. */
int mp_path_send(struct mp_path *p, struct mp_io *io);
json_t *mp_path_status(const struct mp_path *p, uint64_t now_ms);
/* The path's last login is stuck inside its engine (an iSER connect in libiscsi): it has had
 * its chance at start-up. */
bool mp_path_stuck(const struct mp_path *p);
json_t *mp_url_public(const char *url);
/* url without the CHAP password of its user%password@ part (malloc'd; NULL without memory). */
char *mp_url_strip(const char *url);

/* mp_path_libiscsi.c, mp_path_native.c: the engines (named by mp_path.c alone) */
extern const struct mp_engine_ops mp_engine_libiscsi;
extern const struct mp_engine_ops mp_engine_native;

/* mp_path_probe.c: control commands */
/* The session is logged in: the identity probe starts (both engines report it here). */
void mp_path_logged_in(struct mp_path *p);
/* The checker: TEST UNIT READY, or (rtpg) REPORT TARGET PORT GROUPS. */
void mp_path_check_send(struct mp_path *p, bool rtpg);
/* The additional sense code and qualifier of an answered libiscsi scsi_task. */
uint8_t mp_task_asc(const struct scsi_task *t);
uint8_t mp_task_ascq(const struct scsi_task *t);

/* mp_path_tmf.c: the abort policy on a path */
const char *mp_tmf_name(enum mp_tmf_step st);
/* Aborts the commands of p outstanding past io_timeout (all of them: the path went silent). */
void mp_path_tmf_start(struct mp_path *p, bool all, const char *why);
/* The current step failed or ran out of time (why says which): the next one, by
 * mp_tmf_escalate. */
void mp_path_tmf_escalate(struct mp_path *p, const char *why);
/* For the engines: a request awaiting a TMF's answer, in the path's current round (NULL
 * without memory); take unlinks and frees it, true if its answer belongs to the current round
 * (*out: its path); reqs_free frees them all (the session they were sent on is gone). */
struct mp_tmf_req *mp_tmf_req_new(struct mp_path *p);
bool mp_tmf_req_take(struct mp_tmf_req *r, struct mp_path **out);
void mp_tmf_reqs_free(struct mp_path *p);
/* For the engines: a TMF's answer, RFC 7143 §11.6.1 response, < 0 when there was none. */
void mp_path_tmf_answer(struct mp_path *p, int response);

/* mp_path_core.c: what every file of the path calls */
/* The core's part of a new path: its lists and the teardown defer. */
void mp_path_core_init(struct mp_path *p);
/* What an engine or the probe reports. */
void mp_path_set_state(struct mp_path *p, enum mp_path_state st, const char *why);
/* Marks the path failed (reason logged once), tears its session down from a defer and
 * schedules a reconnect. I/O in flight on it goes back through owner->redrive. */
void mp_path_fail(struct mp_path *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The path reaches another device than the LUN's: never used, retried slowly. */
void mp_path_refuse(struct mp_path *p, const char *msg);
/* io, about to be queued by the engine, joins the path's commands in flight (sent now); undo
 * takes it off again when the engine could not queue it. */
void mp_path_inflight_add(struct mp_path *p, struct mp_io *io);
void mp_path_inflight_undo(struct mp_path *p, struct mp_io *io);
/* io's answer, from either engine: status (or a transport status), the sense key and codes,
 * and the raw sense for a COMPARE AND WRITE. stale: from a connection the path has left. */
void mp_path_io_end(struct mp_io *io, bool stale, int status, uint8_t key, uint8_t asc,
		    uint8_t ascq, const uint8_t *raw, size_t raw_len, const char *errtxt);
/* Every I/O still on the path goes back to the LUN; the control command is dropped. */
void mp_path_give_back_all(struct mp_path *p);
/* io left p with its session: re-driven, held on p->fenced if it changes the medium, or (a
 * COMPARE AND WRITE) failed with MP_UNSURE_*. */
void mp_path_give_back(struct mp_path *p, struct mp_io *io);
/* The held writes go to the LUN again: the session was reinstated, or the bound ran out. */
void mp_path_unfence(struct mp_path *p, bool reinstated);
/* Logs the writes a dropped session left held (nr_fenced was before). */
void mp_path_fence_note(struct mp_path *p, uint32_t before);
/* A libiscsi transport status (cancelled, error, timeout, redirect), not a SCSI one; and its
 * words for messages. */
bool mp_status_transport(int status);
const char *mp_status_text(int status);

/* mp_lun.c */
void mp_lun_capacity(struct mp_lun *lun, uint64_t size);
/* The part of iov[0..cnt) covering bytes [off, off + len): entries written to out (when not
 * NULL), their number returned; -EINVAL when iov holds fewer than off + len bytes. */
int mp_iov_slice(const struct iovec *iov, int cnt, uint64_t off, uint64_t len, struct iovec *out);

/* mp_scsi.c: CDBs and parsing of what the back end returns */
/* VPD 0x83: the LU's best designator as "naa.<hex>" / "eui.<hex>" / "t10.<text>" / "name.<text>"
 * (NAA 6 > NAA 5 > EUI-64 > SCSI name > other NAA > T10 vendor id), and the target port group
 * of the port answering (-1 if absent). 0, or -ENOENT without an LU designator. */
int mp_vpd83_parse(const uint8_t *d, size_t len, char *ident, size_t identlen, int *tpg);
/* REPORT TARGET PORT GROUPS: the asymmetric access state of group tpg (tpg < 0: the only
 * group). 0, or -ENOENT. */
int mp_rtpg_state(const uint8_t *d, size_t len, int tpg, int *state);
void mp_cdb_rw16(uint8_t cdb[16], uint8_t opcode, uint64_t lba, uint32_t nblocks, bool fua);
/* Fixed-format sense into io; status CHECK CONDITION. */
void mp_io_set_sense(struct mp_io *io, uint8_t key, uint8_t asc, uint8_t ascq);

#endif
