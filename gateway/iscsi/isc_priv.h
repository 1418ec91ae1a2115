/* SPDX-License-Identifier: MIT */
/*
 * Private to gateway/iscsi/: connections, sessions, tasks and task management, and what the
 * engine's files call among themselves. The public part is isc.h.
 *
 * The files form a stack; each calls only those below it (tests/check-layers.py --files):
 *   isc_conn.c      connection state and PDU dispatch (the top)
 *   isc_gw.c        the engine object, its lists of portals and targets, service walks
 *   isc_login.c, isc_text.c, isc_nop.c   login, Text/SendTargets, NOP, Logout, async events
 *   isc_tmf.c       task management
 *   isc_scsi.c      SCSI commands, their data and responses
 *   isc_task.c      tasks, data memory, the CmdSN queue (up-calls through struct isc_task_ops)
 *   isc_session.c   sessions, the registry of TSIHs, the command window
 *   isc_target.c    targets: lookup, admission, counters, end
 *   isc_state.c     the sessions' live state
 *   isc_loop.c      per-loop parts, running work on a loop
 *   isc_xmit.c      building, stamping and sending PDUs, Reject, closing a connection
 *   isc_chap.c, isc_param.c   CHAP, key=value negotiation
 * The PDU handlers close a connection or move it to full feature phase through the ops the
 * dispatcher registers with each connection at accept (struct isc_conn_ops).
 */
#ifndef ISC_PRIV_H
#define ISC_PRIV_H

#include <stdbool.h>
#include <stdint.h>

#include "isc.h"
#include "isc_chap.h"
#include "isc_param.h"

/* ---------------------------------------------------------------------------------------- */
/* The engine's objects: opaque outside gateway/iscsi (isc.h hands out pointers and functions). */

/* Lists and fields are written on loop 0 (where ctl runs); those other loops read (the lists
 * of portals and targets, a portal's listener, a target's sessions and `removing`) change
 * under gw->reg_lock, and only in isc_gw.c and isc_target.c. */
struct isc_portal {
	struct gw_list node;		/* in gw->portals (reg_lock) */
	struct isc_gw *gw;
	struct isc_portal_conf *conf;	/* into the running configuration (isc_portal_set_conf) */
	struct dmv_portal *dp;
	unsigned int nconns;		/* open connections, logged in or not (atomic: any loop) */
	uint64_t conns_refused;		/* closed at accept: max_connections reached */
};

/* Failed logins of one source address (the portal's login_fail_* keys): a fixed table in the
 * gateway object, so a flood of addresses evicts old entries instead of growing memory. */
#define ISC_LOGIN_SRC_MAX	256

struct isc_login_src {
	char addr[64];			/* "" : free slot */
	uint64_t window_start_ms;	/* loop time the current counting window opened */
	uint32_t window_fails;
	uint64_t backoff_until_ms;	/* logins refused before this loop time */
	uint64_t last_ms;		/* last failure or refusal: eviction order */
	uint64_t failed;		/* failed logins, all time */
	uint64_t refused;		/* logins refused during a back-off */
	uint64_t backoffs;		/* back-offs started */
};


/* One loop's per-LUN counters (target->lstats[loop]). */
struct isc_loop_stats {
	struct isc_lun_stats *v;
	size_t n;
};

struct isc_target {
	struct gw_list node;		/* in gw->targets, or gw->dying_targets once removed
					 * (reg_lock) */
	struct isc_gw *gw;
	struct isc_target_conf *conf;	/* into the running configuration, or the one its
					 * owner keeps for it while it drains */
	struct scsi_dev *dev;
	struct scsi_port *port;
	struct gw_list sessions;	/* struct isc_session.tnode, every loop's (gw->reg_lock) */
	/* Per-LUN counters: one table per loop (lstats[lp->idx]), each written and
	 * read only on its own loop's thread, so the I/O path shares nothing between loops; the
	 * state sums them (isc_target_stats). stat_luns: the LUNs listed, in order (loop 0). */
	struct isc_loop_stats lstats[GW_LOOPS_MAX];
	uint64_t *stat_luns;
	size_t nstat_luns;
	struct gw_list pending_luns;	/* struct isc_lun_block, the owner's (loop 0) */
	bool removing;			/* out of the configuration, sessions draining (reg_lock) */
	/* Set by the owner (ctl, isc_target_set_owner): called first by isc_target_destroy, to
	 * free what the owner hung on the target. */
	void (*release)(struct isc_target *t, void *owner);
	void *owner;
};

/*
 * What each loop keeps for its own connections and tasks (docs/ARCHITECTURE.md, "Several
 * event loops"): its PDU pool, its cache of recycled tasks and its share of
 * gateway.data_memory, so no free list or budget counter is shared on the data path. A loop
 * takes its share from the gateway's budget (gw->data_mem_held, atomic) in steps of at least
 * ISC_DATA_MEM_STEP (less for a small budget or many loops: what the loops may hold idle
 * stays within an eighth of the budget) and gives back what it holds beyond two steps unused:
 * with one loop the share can grow to the whole budget, so a command is refused exactly when
 * one shared counter would refuse it.
 */
#define ISC_DATA_MEM_STEP	(16ull << 20)

struct isc_loop {
	struct gw_loop *loop;
	unsigned idx;			/* in gw->loops (0 with one loop) */
	struct pdu_pool pdus;
	struct gw_list task_free;	/* recycled tasks, buffers kept (struct isc_task.cnode) */
	size_t ntask_free;
	size_t ntasks;			/* tasks alive on this loop: 0 at rest */
	uint64_t data_mem;		/* bytes in this loop's task buffers, cached ones included */
	uint64_t data_mem_held;		/* this loop's share of the budget (>= data_mem) */
	uint64_t task_set_full;		/* commands answered TASK SET FULL for want of memory */
	/* This loop's sessions (struct isc_session.lnode) and the connections logging in on it
	 * (struct isc_conn.node): touched by this loop's thread only. */
	struct gw_list sessions;
	struct gw_list login_conns;
};

struct isc_gw {
	struct gw_loop *loop;		/* loop 0: the acceptor, the registry, ctl */
	/* The gateway's loops (gateway.loops; not owned): NULL or one loop, everything on loop. */
	struct gw_loops *loops;
	struct isc_gw_conf *conf;	/* the running configuration: ctl's (isc_gw_set_conf) */
	const struct isc_task_ops *task_ops;	/* the task layer's up-calls (isc_gw.c) */
	/* Per loop: lps[i] is loops->loop[i]'s (lps[0] alone without loops). */
	struct isc_loop lps[GW_LOOPS_MAX];
	struct gw_list portals;
	/* The session registry (docs/ARCHITECTURE.md "Connections and sessions"): every loop's
	 * sessions (struct isc_session.node, their identity, loop and `closing`), each target's
	 * sessions (target->sessions), TSIH allocation, the targets list's changes, the failed-login
	 * table and the login counters are under reg_lock, a leaf lock taken at login, session end
	 * and by loop 0's walks; never on the command path. */
	pthread_mutex_t reg_lock;
	struct gw_list targets;		/* changed on loop 0 under reg_lock, read by logins */
	struct gw_list sessions;
	uint16_t next_tsih;
	bool stopping;			/* atomic: read by every loop */
	unsigned int nconns;		/* atomic: isc_gw_nconns */
	unsigned int msgs;		/* atomic: the iSCSI side's messages between loops in flight */
	struct gw_list dying_targets;	/* removed targets whose sessions still drain (reg_lock) */
	/* Command data buffers (in tasks and in the task cache) against their budget: the
	 * loops' shares together (atomic), and the budget (gateway.data_memory; 0: none; atomic,
	 * written only by isc_gw_set_data_memory). */
	uint64_t data_mem_held, data_mem_max;
	struct gw_list mem_shares;	/* struct isc_mem_share (reg_lock) */
	/* Login limits: failed logins by source, refusals by limit */
	struct isc_login_src login_src[ISC_LOGIN_SRC_MAX];
	uint64_t login_refused_sessions;	/* max_sessions / max_sessions_per_initiator */
	uint64_t login_timeouts;		/* connections closed by login_timeout */
};

enum isc_task_kind {
	ISC_TASK_SCSI,
	ISC_TASK_PLACEHOLDER,		/* a non-SCSI request holding its CmdSN's place */
};

enum isc_task_state {
	ISC_TS_NEW,			/* waiting for its CmdSN turn */
	ISC_TS_DATA_OUT,		/* Get_Data in progress */
	ISC_TS_SCSI,			/* in the SCSI core */
	ISC_TS_DATA_IN,			/* Put_Data / response in progress */
	ISC_TS_DONE,
};

struct isc_tmf;

struct isc_task {
	struct dmv_task dt;		/* datamover view: itt, buffer */
	struct scsi_cmd cmd;
	struct gw_list snode;		/* in session->pending (by CmdSN) */
	struct gw_list cnode;		/* in conn->tasks */
	struct isc_conn *conn;		/* NULL once the connection is gone */
	struct isc_session *sess;
	enum isc_task_kind kind;
	enum isc_task_state state;
	uint32_t itt;
	uint32_t cmdsn;
	uint32_t edtl;
	uint64_t lun;
	uint64_t start_ns;		/* delivered (CLOCK_MONOTONIC): latency histograms */
	bool immediate;
	bool counted;			/* occupies a CmdSN window slot */
	bool aborted;
	bool tas;			/* aborted by another I_T nexus: answered TASK ABORTED */
	bool read, write;
	bool bad_cdb;			/* answered CHECK CONDITION without the SCSI core */
	bool busy;			/* answered TASK SET FULL: no data memory for it */
	struct isc_tmf *tmf;		/* TMF waiting for this task to end */
	struct iovec iov;
	uint8_t *buf;
	uint32_t buf_cap;
	uint32_t sess_mem;		/* bytes charged to sess->data_mem */
	/* buf is the transport's registered memory (dmv_transport.buf_get): given back with
	 * buf_tp->buf_put, never cached with the task */
	void *buf_handle;
	const struct dmv_transport *buf_tp;
};

struct isc_tmf_msg;

/* A TMF waiting for the tasks it aborted, or (share set) one other loop's part of a TMF asked
 * on another loop: the tasks it aborted there, answered back to the TMF's loop once they have
 * all ended. Each is touched only by its own loop. */
struct isc_tmf {
	struct gw_list node;		/* in conn->tmfs (a share: in no list) */
	struct isc_conn *conn;		/* NULL once the connection is gone (and for a share) */
	struct isc_tmf_msg *share;	/* a share: its answer to the TMF's loop */
	uint8_t bhs[ISC_BHS_LEN];	/* the request, to answer it */
	uint8_t response;
	int waiting;			/* tasks (and other loops' shares) still to end */
	bool cold_reset;
};

enum isc_conn_state {
	ISC_CONN_LOGIN,
	ISC_CONN_FFP,
	ISC_CONN_LOGOUT,		/* logout response queued */
	ISC_CONN_CLOSED,
};

struct isc_login;
struct isc_conn_ops;

#define ISC_ASYNC_MAX	16		/* Asynchronous Messages tracked / waiting per connection */

struct isc_conn {
	struct gw_list node;		/* in session->conns, or lp->login_conns */
	const struct isc_conn_ops *ops;	/* the dispatcher's, set at accept */
	struct isc_gw *gw;
	struct isc_loop *lp;		/* the loop it runs on: its PDUs, tasks, memory */
	struct isc_portal *portal;
	struct dmv_conn *dc;
	struct isc_session *sess;
	enum isc_conn_state state;
	uint16_t cid;
	uint32_t stat_sn;		/* next StatSN to assign */
	uint32_t exp_stat_sn;
	struct gw_list tasks;		/* struct isc_task.cnode */
	unsigned int ntasks;
	struct gw_list tmfs;		/* TMFs waiting for tasks to end */
	struct isc_login *login;	/* during login */
	struct isc_neg *neg;		/* kept for Text negotiation in FFP */
	/* Text continuation (C bit) */
	struct gw_buf text_in;
	struct gw_buf text_out;
	size_t text_out_off;
	uint32_t text_ttt;
	uint32_t text_itt;
	/* NOP */
	struct gw_timer nop_timer;
	bool nop_timer_on;
	uint64_t last_rx_ms;
	uint64_t ping_sent_ms;		/* 0: no ping outstanding */
	uint32_t ping_ttt;
	/* Asynchronous Messages under a negotiated MaxOutstandingUnexpectedPDUs: the StatSNs of
	 * those sent and not yet acknowledged by ExpStatSN, and the events waiting for room. */
	uint32_t async_sn[ISC_ASYNC_MAX];
	unsigned int async_out;
	struct isc_async_ev {
		uint64_t lun;
		uint8_t asc, ascq;
	} async_wait[ISC_ASYNC_MAX];
	unsigned int async_nwait;
	uint32_t next_ttt;
	uint16_t tpgt;
	bool logout_session;		/* close the session once the Logout Response left */
	struct gw_close cl;
	bool freeing;
};

struct isc_session {
	struct gw_list node;		/* in gw->sessions (reg_lock) */
	struct gw_list tnode;		/* in target->sessions (reg_lock) */
	struct gw_list lnode;		/* in lp->sessions (its loop's thread) */
	struct isc_gw *gw;
	struct isc_loop *lp;		/* its leading connection's loop, every connection's */
	struct isc_target *target;	/* NULL: discovery */
	struct isc_params params;
	uint8_t isid[6];
	uint16_t tsih;
	uint16_t tpgt;
	char initiator[ISC_NAME_MAX + 1];
	struct scsi_itn *itn;
	struct gw_list conns;		/* struct isc_conn.node */
	unsigned int nconns;
	/* CmdSN window (RFC 7143 §4.2.2.1) */
	uint32_t exp_cmdsn;
	uint32_t queue_depth;
	uint32_t active;		/* counted tasks delivered and not yet answered */
	struct gw_list pending;		/* tasks that arrived ahead of ExpCmdSN, by CmdSN */
	unsigned int ntasks;		/* all tasks alive, any connection */
	/* Data buffers its tasks hold: at most a share of gateway.data_memory
	 * (ISC_SESSION_MEM_SHARE), so one session's writes that never send their data, or reads
	 * it never drains, cannot take the memory every other session needs. */
	uint64_t data_mem;
	/* The same bytes counted again for the session's initiator name and its leading
	 * connection's source address, each shared by every session of that name or address. */
	struct isc_mem_share *shares[2];
	bool closing;			/* set under gw->reg_lock */
	struct gw_defer free_defer;
	/* counters */
	uint64_t cmds, read_bytes, write_bytes;
	uint64_t login_ms;		/* loop time of the login */
};

/* A session holds at most 1/ISC_SESSION_MEM_SHARE of gateway.data_memory in data buffers;
 * so do all the sessions of one initiator name together, and all those from one source
 * address: many sessions of one host, or one address naming itself many ways, cannot take
 * what the session's own share leaves to the others. */
#define ISC_SESSION_MEM_SHARE	4

/* The data buffers of every session of one initiator name or one source address (any loop):
 * the list and refs under gw->reg_lock, bytes atomic. */
struct isc_mem_share {
	struct gw_list node;		/* in gw->mem_shares */
	unsigned int refs;
	uint64_t bytes;
	char key[ISC_NAME_MAX + 16];	/* "initiator NAME" or "address ADDR" */
};

struct isc_conn_ops {
	/* Tears the connection down: every handler's per-connection state, then the
	 * datamover's, two-phase. */
	void (*close)(struct isc_conn *c, const char *why);
	/* The final Login Response is queued: negotiated parameters to the datamover, NOP
	 * pings on. */
	void (*enter_ffp)(struct isc_conn *c);
};

/* isc_xmit.c: what the PDU handlers answer with; calls nothing above it. */
/* Drops the connection (and, if it was the session's last, the session once tasks drain). */
void isc_conn_close(struct isc_conn *c, const char *why);
/* Applies negotiated params to the datamover (after the final Login Response is queued). */
void isc_conn_enter_ffp(struct isc_conn *c);
/* Assigns StatSN (advancing it when `advance`), ExpCmdSN and MaxCmdSN to BHS bytes 24..35. */
void isc_conn_stamp(struct isc_conn *c, uint8_t *bhs, bool advance);
/* Queues a PDU (consumes the reference). */
int isc_conn_send(struct isc_conn *c, struct pdu *pdu);
/* A target PDU with opcode, F bit, ITT; refcnt 1. NULL on ENOMEM (logged). */
struct pdu *isc_conn_new_pdu(struct isc_conn *c, uint8_t opcode, uint32_t itt);
/* In full feature phase only (before it the dispatcher closes the connection instead). */
void isc_conn_reject(struct isc_conn *c, const uint8_t *bhs, uint8_t reason);
/* The same, then the connection closes once the Reject is out (session recovery). */
void isc_conn_reject_close(struct isc_conn *c, const uint8_t *bhs, uint8_t reason);
uint32_t isc_conn_next_ttt(struct isc_conn *c);
/* Applies negotiated params to the datamover: after a Text negotiation in full feature phase
 * changed some (at login, isc_conn_enter_ffp does it). */
void isc_conn_apply_params(struct isc_conn *c);

/* isc_loop.c: the bottom file */
/* The per-loop part of the gateway for a connection on loop (lps[0] for a loop not among the
 * gateway's loops, as with one loop). */
struct isc_loop *isc_gw_loop_of(struct isc_gw *gw, const struct gw_loop *loop);
/* The gateway's loops in use (1 without loops). */
unsigned isc_gw_nloops(const struct isc_gw *gw);
/* Runs fn(lp, arg) on every loop's thread in turn, loop 0 first (gw_loop_call: on loop 0
 * only). */
void isc_gw_each_loop(struct isc_gw *gw, void (*fn)(struct isc_loop *lp, void *arg), void *arg);
/* Runs fn(lp, arg) on lp's thread: at once when that is the caller's (or the gateway has one
 * loop), else as a message carrying a copy of arg's len bytes, counted in gw->msgs until it
 * ran. -ENOMEM (nothing runs) or -errno of the post. */
int isc_gw_on_loop(struct isc_gw *gw, struct isc_loop *lp,
		   void (*fn)(struct isc_loop *lp, const void *arg), const void *arg, size_t len);
bool isc_gw_stopping(const struct isc_gw *gw);
/* On lp's thread: closes its session tsih if it is alive there. */
void isc_loop_close_session(struct isc_loop *lp, uint16_t tsih, const char *why);
/* Closes session tsih on its loop: now when that is the caller's, else by a message. */
void isc_session_close_on(struct isc_gw *gw, struct isc_loop *lp, uint16_t tsih,
			  const char *why);

/* isc_conn.c: the datamover's up-calls, installed on each portal's listener by
 * isc_portal_listen (dp->priv is the struct isc_portal). */
void isc_conn_accept(struct dmv_portal *dp, struct dmv_conn *dc);
/* dmv_portal.place for a portal on several loops: a login with a TSIH goes to its session's
 * loop, a new session to the least loaded (-1). On loop 0. */
int isc_conn_place(struct dmv_portal *dp, const struct pdu *first);
/* dmv_portal.admit / unadmit: the portal's max_connections counts the connections waiting
 * for placement too; one closed waiting for its first PDU longer than login_timeout counts
 * as a login timeout. */
int isc_conn_admit(struct dmv_portal *dp, struct dmv_conn *dc);
void isc_conn_unadmit(struct dmv_portal *dp, bool timed_out);

/* isc_login.c */
void isc_login_rx(struct isc_conn *c, struct pdu *pdu);
void isc_login_free(struct isc_conn *c);
/* Whether a connection still logging in has picked target t. */
bool isc_login_uses_target(const struct isc_conn *c, const struct isc_target *t);

/* isc_text.c */
void isc_text_rx(struct isc_conn *c, struct pdu *pdu);
/* SendTargets answer for `what` ("All", a target name, "" = this session's target). */
int isc_text_send_targets(struct isc_conn *c, const char *what, struct gw_buf *out);

/* isc_session.c */
/* Counts s's data buffers for its initiator name and for the address of peer ("ADDR:PORT"):
 * 0 or -ENOMEM. Under neither lock; takes gw->reg_lock. */
int isc_session_shares_attach(struct isc_session *s, const char *peer);
/* Under gw->reg_lock: drops s's part in its shares (at its end, when it holds no buffer). */
void isc_session_shares_detach(struct isc_session *s);
/* Bytes in the data buffers of every session of s's initiator name (i 0) or address (i 1). */
uint64_t isc_session_share_bytes(const struct isc_session *s, int i);
/* Adds delta (negative: gives back) to s's initiator and address bytes; a delta that takes
 * either past share (0: no limit) is taken back whole: -EBUSY. */
int isc_session_shares_charge(struct isc_session *s, int64_t delta, uint64_t share);
/* A session on loop lp (its thread), in the registry with a new TSIH. */
int isc_session_create(struct isc_gw *gw, struct isc_loop *lp, struct isc_target *t,
		       const uint8_t isid[6], const char *initiator,
		       const struct isc_params *params, uint32_t cmdsn, struct isc_session **out);
/* What the registry says of a session on any loop (copied under the lock). */
struct isc_session_ref {
	struct isc_loop *lp;		/* NULL: none */
	uint16_t tsih;
	const struct isc_target *target;
};
/* The live session of initiator + ISID (+ TSIH unless 0): returned when it is on lp (the
 * caller's loop, whose thread alone frees it); *ref says where it is in any case. */
struct isc_session *isc_session_find(struct isc_gw *gw, struct isc_loop *lp,
				     const char *initiator, const uint8_t isid[6], uint16_t tsih,
				     struct isc_session_ref *ref);
/* Closes every session of t, each on its loop (messages to the other loops). */
void isc_target_close_sessions(struct isc_target *t, const char *why);
void isc_session_add_conn(struct isc_session *s, struct isc_conn *c);
void isc_session_del_conn(struct isc_session *s, struct isc_conn *c);
/* Closes every connection of the session (reinstatement, logout, cold reset). */
void isc_session_close(struct isc_session *s, const char *why);
uint32_t isc_session_max_cmdsn(const struct isc_session *s);
/* The command window a session gets: queue_depth, within what its leading connection's
 * transport can receive at once (tp_max) and the negotiated MaxOutstandingUnexpectedPDUs
 * (moupdu); 0 is "no limit" for both. Never below 1. */
uint32_t isc_session_window(uint32_t queue_depth, uint32_t tp_max, uint32_t moupdu);
/*
 * CmdSN check of a non-immediate request: 1 in order (deliver now), 0 ahead of ExpCmdSN
 * (queue it), -1 outside the window (drop silently, RFC 7143 §4.2.2.1).
 */
int isc_session_check_cmdsn(struct isc_session *s, uint32_t cmdsn);
void isc_session_maybe_free(struct isc_session *s);

/* isc_task.c: tasks, their buffers, the CmdSN queue */
/* What the task layer calls above it, installed by the gateway object (isc_gw.c). */
struct isc_task_ops {
	/* The task's CmdSN turn came (or it was immediate): isc_task_deliver. */
	void (*deliver)(struct isc_task *t);
	/* A task a TMF waited for has ended: isc_tmf_task_ended. */
	void (*tmf_ended)(struct isc_tmf *tmf);
};
struct isc_task *isc_task_alloc(struct isc_conn *c);
void isc_task_free(struct isc_task *t);
/* A data buffer of at least len bytes for t, within the session's share and its loop's share
 * of gateway.data_memory: 0, -EBUSY (the budget is spent: TASK SET FULL), -ENOMEM. */
int isc_task_buf(struct isc_task *t, uint32_t len);
/* The task no longer occupies a slot of the session's command window. */
void isc_task_release_slot(struct isc_task *t);
struct isc_task *isc_conn_find_task(struct isc_conn *c, uint32_t itt);
/* Connection gone: its tasks are orphaned (freed as they end). */
void isc_conn_orphan_tasks(struct isc_conn *c);
/* The session failed (its last connection is gone): the tasks waiting for their CmdSN turn
 * are freed. */
void isc_task_drop_pending(struct isc_session *s);
/* CmdSN of a non-SCSI request (NOP-Out, Text, TMF, Logout): consumed in order (or held as a
 * placeholder until the gap before it fills); false if it is outside the window: drop it. */
bool isc_cmdsn_take(struct isc_conn *c, const uint8_t *bhs);
void isc_cmdsn_hold(struct isc_conn *c, uint32_t cmdsn);
/* A request refused before delivery still uses up its CmdSN (order: isc_session_check_cmdsn's
 * answer: 1 advance past it, 0 hold its place). */
void isc_cmdsn_consume(struct isc_conn *c, uint32_t cmdsn, int order);
/* A request in order: advance ExpCmdSN past it and deliver whatever queued tasks follow. */
void isc_cmdsn_advance(struct isc_session *s);
/* Queues a task ahead of its turn (sorted by CmdSN). */
void isc_cmdsn_queue(struct isc_session *s, struct isc_task *t);

/* isc_scsi.c */
void isc_scsi_rx_cmd(struct isc_conn *c, struct pdu *pdu);
/* The task's CmdSN turn came (or it was immediate). */
void isc_task_deliver(struct isc_task *t);
/* Ends a task without a response (abort, connection loss): stops transfers, lets the SCSI
 * core finish if it runs, frees it when nothing refers to it any more. */
void isc_task_abort(struct isc_task *t, struct isc_tmf *tmf);
/* Ends a task of another session than the TMF's (CLEAR TASK SET, LUN RESET, target resets)
 * the way the control mode page's TAS bit promises (scsi_spc.c; SAM-5 5.3.1): its initiator
 * gets TASK ABORTED status, or the command's own status if it already ran, never silence.
 * Tasks still waiting for their CmdSN turn are not in the task set yet and are left alone.
 * tmf (on the task's loop: a TMF or another loop's TMF's share there, or NULL): answered
 * only once the task has been. */
void isc_task_abort_other(struct isc_task *t, struct isc_tmf *tmf);

/* isc_tmf.c */
void isc_tmf_rx(struct isc_conn *c, struct pdu *pdu);
void isc_tmf_task_ended(struct isc_tmf *tmf);
/* The connection is closing: its pending TMFs will not be answered. */
void isc_tmf_conn_gone(struct isc_conn *c);

/* isc_nop.c */
/* A target's SCSI device's events (isc_target_set_dev registers it; arg: the target). */
void isc_target_scsi_event(struct scsi_dev *dev, enum scsi_event ev, uint64_t lun, void *arg);
void isc_nop_rx(struct isc_conn *c, struct pdu *pdu);
void isc_nop_start(struct isc_conn *c);
void isc_nop_stop(struct isc_conn *c);
void isc_logout_rx(struct isc_conn *c, struct pdu *pdu);
/* ExpStatSN moved: Asynchronous Messages it acknowledges no longer count as outstanding, and
 * those waiting for room go out. */
void isc_async_acked(struct isc_conn *c);

#endif
