/* SPDX-License-Identifier: MIT */
/*
 * The iSCSI target engine (RFC 7143). Owns the gateway's iSCSI objects: portals (each a
 * datamover listener), targets (each a SCSI device with one target port for its portal group),
 * sessions (one I_T nexus each), connections and tasks. It sits between a datamover
 * (gateway/dmv/dmv.h, which it never asks the kind of) and the SCSI core (gateway/scsi/scsi.h).
 *
 * Files: isc_pdu.c (PDU layout), isc_conn.c (connection state, dispatch), isc_xmit.c (building,
 * stamping and sending PDUs, Reject), isc_login.c (login phase), isc_text.c (Text /
 * SendTargets), isc_session.c (sessions, CmdSN window and ordering), isc_scsi.c (SCSI commands
 * and data), isc_tmf.c (task management), isc_nop.c (NOP, logout, async messages),
 * isc_target.c (configuration and the isc_gw object), isc_apply.c (live configuration changes
 * and live state, for the control socket).
 */
#ifndef ISC_H
#define ISC_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "dmv.h"
#include "gw_conf.h"
#include "gw_hist.h"
#include "gw_list.h"
#include "gw_loop.h"
#include "isc_chap.h"
#include "isc_param.h"
#include "isc_pdu.h"
#include "scsi.h"

struct isc_gw;
struct isc_session;
struct isc_conn;
struct isc_target;

/* ---------------------------------------------------------------------------------------- */
/* Configuration objects (keyword tables in isc_target.c) */

enum isc_portal_transport {
	ISC_PORTAL_TCP = 0,
	ISC_PORTAL_ISER = 1,
};

struct isc_portal_conf {
	char *name;
	int transport;			/* enum isc_portal_transport */
	char *address;
	uint32_t port;
};

struct isc_initiator_conf {
	char *name;
	struct isc_chap_conf chap;
};

struct isc_lun_conf {
	struct scsi_lu_conf lu;
	struct bs_conf bs;
};

struct isc_target_conf {
	char *name;
	char *alias;
	uint32_t tpgt;
	struct gw_strlist portals;
	bool allow_any_initiator;
	struct isc_initiator_conf *initiators;
	size_t ninitiators;
	struct isc_chap_conf chap;
	struct isc_param_conf params;
	struct isc_lun_conf *luns;
	size_t nluns;
};

enum isc_disc_auth {
	ISC_DISC_AUTH_NONE = 0,
	ISC_DISC_AUTH_CHAP = 1,
};

struct isc_discovery_conf {
	int auth;			/* enum isc_disc_auth */
	struct isc_chap_conf chap;
};

/* One ALUA target port group of a cluster ("cluster": {"groups": [...]}): a gateway. */
struct isc_group_conf {
	uint32_t id;			/* the TPGT of that gateway's targets */
	char *name;			/* the member's gateway id, informative */
	int state;			/* enum scsi_alua_state */
};

/* The whole iSCSI part of the gateway's configuration. */
struct isc_gw_conf {
	struct isc_portal_conf *portals;
	size_t nportals;
	struct isc_discovery_conf discovery;
	struct isc_target_conf *targets;
	size_t ntargets;
	struct isc_group_conf *groups;	/* empty: a gateway alone */
	size_t ngroups;
};

extern const struct gw_conf_key isc_portal_conf_keys[];
extern const struct gw_conf_key isc_initiator_conf_keys[];	/* "name"; "chap" nested */
extern const struct gw_conf_key isc_target_conf_keys[];	/* nested keys: the caller's */
extern const struct gw_conf_key isc_discovery_conf_keys[];	/* "auth"; "chap" nested */
extern const struct gw_conf_key isc_group_conf_keys[];		/* cluster.groups[] */
/* Every target's SCSI device gets the cluster's groups (no-op without a cluster). */
int isc_target_set_groups(struct isc_target *t, const struct isc_gw_conf *c);

/* The nested keys of a target object (the caller walks them). */
extern const char *const isc_target_nested_keys[];

/* Checks an iSCSI name (iqn., eui., naa. forms, RFC 7143 §4.2.7); gw_conf `check` signature. */
const char *isc_check_name(const void *field);
/* Cross-object rules (portal names unique and referenced, target names unique, LUNs unique,
 * CHAP rules). Errors under their key path. 0 or -EINVAL. */
int isc_gw_conf_check(const struct isc_gw_conf *c, struct gw_errlist *errs);
void isc_gw_conf_free(struct isc_gw_conf *c);

/* ---------------------------------------------------------------------------------------- */
/* Runtime objects */

struct isc_portal {
	struct gw_list node;		/* in gw->portals */
	struct isc_gw *gw;
	struct isc_portal_conf *conf;	/* points into gw->conf */
	struct dmv_portal *dp;
};

/* Per-LUN I/O counters, kept by the iSCSI layer (what the control socket reports). */
struct isc_lun_stats {
	uint64_t lun;
	uint64_t read_ops, write_ops, other_ops;
	uint64_t read_bytes, write_bytes;
	uint64_t errors;		/* commands answered with a status other than GOOD */
	/* Latency of the GOOD reads and writes counted above, from delivery in CmdSN order
	 * (write data still to come) to the SCSI core's completion. */
	struct gw_hist read_lat, write_lat;
};

/* A LUN removal waiting for its commands to drain, and what replaces it (if anything). */
struct isc_lun_pending {
	struct gw_list node;		/* in target->pending_luns */
	uint64_t lun;
	struct bs *bs;			/* replacement backstore, NULL: plain removal */
	struct scsi_lu_conf lu;		/* replacement LU settings (owned) */
};

struct isc_conf_hold;

struct isc_target {
	struct gw_list node;		/* in gw->targets, or gw->dying_targets once removed */
	struct isc_gw *gw;
	struct isc_target_conf *conf;	/* points into gw->conf (or a held old one) */
	struct scsi_dev *dev;
	struct scsi_port *port;
	struct gw_list sessions;	/* struct isc_session.tnode */
	struct isc_lun_stats *stats;
	size_t nstats;
	struct gw_list pending_luns;	/* struct isc_lun_pending */
	bool removing;			/* out of the configuration, sessions draining */
	struct isc_conf_hold *hold;	/* the old configuration a removed target still uses */
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
	bool read, write;
	bool bad_cdb;			/* answered CHECK CONDITION without the SCSI core */
	bool busy;			/* answered TASK SET FULL: no data memory for it */
	struct isc_tmf *tmf;		/* TMF waiting for this task to end */
	struct iovec iov;
	uint8_t *buf;
	uint32_t buf_cap;
	/* buf is the transport's registered memory (dmv_transport.buf_get): given back with
	 * buf_tp->buf_put, never cached with the task */
	void *buf_handle;
	const struct dmv_transport *buf_tp;
};

struct isc_tmf {
	struct gw_list node;		/* in conn->tmfs */
	struct isc_conn *conn;		/* NULL once the connection is gone */
	uint8_t bhs[ISC_BHS_LEN];	/* the request, to answer it */
	uint8_t response;
	int waiting;			/* tasks still to end before the response */
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
	struct gw_list node;		/* in session->conns, or gw->login_conns */
	const struct isc_conn_ops *ops;	/* the dispatcher's (isc_priv.h), set at accept */
	struct isc_gw *gw;
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
	struct gw_list node;		/* in gw->sessions */
	struct gw_list tnode;		/* in target->sessions */
	struct isc_gw *gw;
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
	bool closing;
	struct gw_defer free_defer;
	/* counters */
	uint64_t cmds, read_bytes, write_bytes;
	uint64_t login_ms;		/* loop time of the login */
};

/* gateway.data_memory's default (ctl_config.c says "1G"). */
#define ISC_DATA_MEM_DEFAULT	(1ull << 30)

struct isc_gw {
	struct gw_loop *loop;
	struct isc_gw_conf *conf;	/* owned */
	struct isc_pdu_pool pdus;
	struct gw_list task_free;	/* recycled tasks, buffers kept (struct isc_task.cnode) */
	size_t ntask_free;
	struct gw_list portals;
	struct gw_list targets;
	struct gw_list sessions;
	struct gw_list login_conns;	/* connections not yet in a session */
	uint16_t next_tsih;
	bool stopping;
	unsigned int nconns;
	struct gw_list dying_targets;	/* removed targets whose sessions still drain */
	struct gw_timer lun_timer;	/* retries LUN removals that met commands in flight */
	bool lun_timer_on;
	/* Command data buffers (in tasks and in the task cache) against their budget. */
	uint64_t data_mem, data_mem_max;
	uint64_t task_set_full;		/* commands answered TASK SET FULL for want of it */
};

/* isc_target.c: the gateway object */
/* Builds targets (SCSI devices, LUs, ports) from conf, which the gw takes over (also on error).
 * Does not listen yet. errs gets what failed, by key path. */
int isc_gw_create(struct gw_loop *loop, struct isc_gw_conf *conf, struct isc_gw **out,
		  struct gw_errlist *errs);
/* Opens every portal; logs "listening on ADDR (tcp)" per portal. 0 or the first -errno. */
int isc_gw_listen(struct isc_gw *gw);
/* Stops accepting and closes every connection; sessions go away as their tasks drain. */
void isc_gw_stop(struct isc_gw *gw);
/* True when no session, connection or task is left. */
bool isc_gw_idle(const struct isc_gw *gw);
/* Start-up: every remote backstore has a path or spent its initial login budget (bounded by
 * login_timeout x initial_login_retry_max), so main() can wait for it before READY=1. */
bool isc_gw_settled(const struct isc_gw *gw);
/* Shutdown: remote backstores stop queueing and fail what is still in flight after their
 * drain_timeout_ms, so the drain below never waits on a dead back end. */
void isc_gw_bs_shutdown(struct isc_gw *gw);
void isc_gw_destroy(struct isc_gw *gw);
/* Builds a target from tc (LUs included) without linking it; *out is set even on error (then
 * isc_target_destroy it). errs entries are named "targets[idx]...". */
int isc_target_new(struct isc_gw *gw, struct isc_target_conf *tc, size_t idx,
		   struct gw_errlist *errs, struct isc_target **out);
/* bs_create / scsi_dev_add_lu with their errors filed under path (a key path prefix). */
int isc_bs_open(struct gw_loop *loop, const struct bs_conf *conf, const char *path,
		struct gw_errlist *errs, struct bs **out);
int isc_lu_add(struct scsi_dev *dev, const struct scsi_lu_conf *conf, struct bs *bs,
	       const char *path, struct gw_errlist *errs);
/* Frees a target (sessions gone, commands drained). */
void isc_target_destroy(struct isc_target *t);
struct isc_lun_stats *isc_target_lun_stats(struct isc_target *t, uint64_t lun);

/* isc_apply.c: live changes, for the control socket */
/*
 * Makes the running gateway match conf (checked already: ctl_config_parse), changing only what
 * differs: portals, targets, their ACL/CHAP/params (for new logins), LUNs. New backstores and
 * portals are opened first; if one fails nothing changes and errs says why (-EINVAL). Sessions
 * of removed targets, of initiators no longer admitted and of removed portals are closed; a
 * removed LUN with commands in flight goes once they drain (new commands to it get LOGICAL UNIT
 * NOT SUPPORTED meanwhile). Takes conf over in every case. 0 or -errno.
 */
int isc_gw_apply(struct isc_gw *gw, struct isc_gw_conf *conf, struct gw_errlist *errs);
/* Live state: portals, targets with per-LUN counters, sessions with connections (new ref). */
json_t *isc_gw_state(struct isc_gw *gw);
/* Closes the session with this TSIH. 0 or -ENOENT. */
int isc_gw_drop_session(struct isc_gw *gw, uint16_t tsih);
/* True while a removal of (target, lun) waits for commands to drain. */
bool isc_target_lun_blocked(const struct isc_target *t, uint64_t lun);
/* Frees what isc_gw_apply left pending on a target (at destroy). */
void isc_target_pending_free(struct isc_target *t);
struct isc_target *isc_gw_find_target(struct isc_gw *gw, const char *name);
/* Whether the target serves on portal p, and its TPGT. */
bool isc_target_on_portal(const struct isc_target *t, const struct isc_portal *p);
/* Initiator admission: 0 allowed; *chap gets the CHAP credentials (NULL: none). -EACCES. */
int isc_target_admit(const struct isc_target *t, const char *initiator,
		     const struct isc_chap_conf **chap);

/* isc_conn.c */
void isc_conn_accept(struct dmv_portal *dp, struct dmv_conn *dc);

/* isc_xmit.c: what the PDU handlers answer with; calls nothing above it. */
/* Drops the connection (and, if it was the session's last, the session once tasks drain). */
void isc_conn_close(struct isc_conn *c, const char *why);
/* Applies negotiated params to the datamover (after the final Login Response is queued). */
void isc_conn_enter_ffp(struct isc_conn *c);
/* Assigns StatSN (advancing it when `advance`), ExpCmdSN and MaxCmdSN to BHS bytes 24..35. */
void isc_conn_stamp(struct isc_conn *c, uint8_t *bhs, bool advance);
/* Queues a PDU (consumes the reference). */
int isc_conn_send(struct isc_conn *c, struct isc_pdu *pdu);
/* A target PDU with opcode, F bit, ITT; refcnt 1. NULL on ENOMEM (logged). */
struct isc_pdu *isc_conn_new_pdu(struct isc_conn *c, uint8_t opcode, uint32_t itt);
/* In full feature phase only (before it the dispatcher closes the connection instead). */
void isc_conn_reject(struct isc_conn *c, const uint8_t *bhs, uint8_t reason);
uint32_t isc_conn_next_ttt(struct isc_conn *c);
/* Applies negotiated params to the datamover: after a Text negotiation in full feature phase
 * changed some (at login, isc_conn_enter_ffp does it). */
void isc_conn_apply_params(struct isc_conn *c);

/* isc_login.c */
void isc_login_rx(struct isc_conn *c, struct isc_pdu *pdu);
void isc_login_free(struct isc_conn *c);
/* Whether a connection still logging in has picked target t. */
bool isc_login_uses_target(const struct isc_conn *c, const struct isc_target *t);

/* isc_text.c */
void isc_text_rx(struct isc_conn *c, struct isc_pdu *pdu);
/* SendTargets answer for `what` ("All", a target name, "" = this session's target). */
int isc_text_send_targets(struct isc_conn *c, const char *what, struct gw_buf *out);

/* isc_session.c */
int isc_session_create(struct isc_gw *gw, struct isc_target *t, const uint8_t isid[6],
		       const char *initiator, const struct isc_params *params, uint32_t cmdsn,
		       struct isc_session **out);
struct isc_session *isc_session_find(struct isc_gw *gw, const char *initiator,
				     const uint8_t isid[6], uint16_t tsih);
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
/* A request in order: advance ExpCmdSN past it and deliver whatever queued tasks follow. */
void isc_session_cmdsn_advance(struct isc_session *s);
/* Queues a task ahead of its turn (sorted by CmdSN). */
void isc_session_queue(struct isc_session *s, struct isc_task *t);
void isc_session_maybe_free(struct isc_session *s);

/* isc_scsi.c */
/* CmdSN of a non-SCSI request (NOP-Out, Text, TMF, Logout): consumed in order (or held as a
 * placeholder until the gap before it fills); false if it is outside the window: drop it. */
bool isc_conn_take_cmdsn(struct isc_conn *c, const uint8_t *bhs);
void isc_session_hold_cmdsn(struct isc_conn *c, uint32_t cmdsn);
void isc_scsi_rx_cmd(struct isc_conn *c, struct isc_pdu *pdu);
/* The task's CmdSN turn came (or it was immediate). */
void isc_task_deliver(struct isc_task *t);
struct isc_task *isc_task_alloc(struct isc_conn *c);
void isc_task_free(struct isc_task *t);
struct isc_task *isc_conn_find_task(struct isc_conn *c, uint32_t itt);
/* Ends a task without a response (abort, connection loss): stops transfers, lets the SCSI
 * core finish if it runs, frees it when nothing refers to it any more. */
void isc_task_abort(struct isc_task *t, struct isc_tmf *tmf);
/* Connection gone: its tasks are orphaned (freed as they end). */
void isc_conn_orphan_tasks(struct isc_conn *c);

/* isc_tmf.c */
void isc_tmf_rx(struct isc_conn *c, struct isc_pdu *pdu);
void isc_tmf_task_ended(struct isc_tmf *tmf);
/* The connection is closing: its pending TMFs will not be answered. */
void isc_tmf_conn_gone(struct isc_conn *c);

/* isc_nop.c */
void isc_nop_rx(struct isc_conn *c, struct isc_pdu *pdu);
void isc_nop_start(struct isc_conn *c);
void isc_nop_stop(struct isc_conn *c);
void isc_logout_rx(struct isc_conn *c, struct isc_pdu *pdu);
/* SCSI core event (LUN inventory / capacity change): Asynchronous Message to every session. */
void isc_target_scsi_event(struct scsi_dev *dev, enum scsi_event ev, uint64_t lun, void *arg);
/* ExpStatSN moved: Asynchronous Messages it acknowledges no longer count as outstanding, and
 * those waiting for room go out. */
void isc_async_acked(struct isc_conn *c);

#endif
