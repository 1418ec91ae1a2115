/* SPDX-License-Identifier: MIT */
/*
 * The iSCSI target engine (RFC 7143). Owns the gateway's iSCSI objects: portals (each a
 * datamover listener), targets (each a SCSI device with one target port for its portal group),
 * sessions (one I_T nexus each), connections and tasks. It sits between a datamover
 * (gateway/dmv/dmv.h, which it never asks the kind of) and the SCSI core (gateway/scsi/scsi.h).
 *
 * The PDU type and its pool are gateway/pdu/pdu.h, shared with the datamovers.
 * Its files form a stack, each calling only those below it: isc_conn.c (dispatch), isc_gw.c
 * (the engine object and its lists), isc_login.c / isc_text.c / isc_nop.c, isc_tmf.c,
 * isc_scsi.c, isc_task.c (tasks, data memory, the CmdSN queue), isc_session.c, isc_target.c,
 * isc_state.c, isc_loop.c, isc_xmit.c, isc_chap.c, isc_param.c (gateway/iscsi/isc_priv.h).
 *
 * This is its public part; gateway/iscsi/isc_priv.h has the connection, session and task
 * objects and what the engine's files call among themselves.
 *
 * It is composed by gateway/ctl/ (ctl.h): ctl builds the SCSI devices and their backstores,
 * hands each target its device, opens the portals, applies live changes and reports state. The
 * iSCSI layer never opens or closes a backstore itself.
 */
#ifndef ISC_H
#define ISC_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "conf.h"
#include "dmv.h"
#include "gw_conf.h"
#include "gw_hist.h"
#include "gw_list.h"
#include "gw_loop.h"
#include "pdu.h"
#include "scsi.h"

struct isc_gw;
struct isc_session;
struct isc_conn;
struct isc_target;
struct isc_task_ops;

/* ---------------------------------------------------------------------------------------- */
/* Runtime objects */

struct isc_portal {
	struct gw_list node;		/* in gw->portals */
	struct isc_gw *gw;
	struct isc_portal_conf *conf;	/* points into gw->conf */
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

/* Per-LUN I/O counters, kept by the iSCSI layer (what the control socket reports). */
struct isc_loop_stats {
	struct isc_lun_stats *v;
	size_t n;
};

struct isc_lun_stats {
	uint64_t lun;
	uint64_t read_ops, write_ops, other_ops;
	uint64_t read_bytes, write_bytes;
	uint64_t errors;		/* commands answered with a status other than GOOD */
	/* Latency of the GOOD reads and writes counted above, from delivery in CmdSN order
	 * (write data still to come) to the SCSI core's completion. */
	struct gw_hist read_lat, write_lat;
};

/* A LUN new commands must not reach: its removal waits for the commands in flight to drain.
 * The owner (ctl) embeds it in its own record, links it and unlinks it. */
struct isc_lun_block {
	struct gw_list node;		/* in target->pending_luns */
	uint64_t lun;
};

struct isc_target {
	struct gw_list node;		/* in gw->targets, or gw->dying_targets once removed */
	struct isc_gw *gw;
	struct isc_target_conf *conf;	/* points into gw->conf (or a held old one) */
	struct scsi_dev *dev;
	struct scsi_port *port;
	struct gw_list sessions;	/* struct isc_session.tnode, every loop's (gw->reg_lock) */
	/* Per-LUN counters: one table per loop (lstats[lp->idx]), each written and
	 * read only on its own loop's thread, so the I/O path shares nothing between loops; the
	 * state sums them (isc_target_stats). stat_luns: the LUNs listed, in order (loop 0). */
	struct isc_loop_stats lstats[GW_LOOPS_MAX];
	uint64_t *stat_luns;
	size_t nstat_luns;
	struct gw_list pending_luns;	/* struct isc_lun_block */
	bool removing;			/* out of the configuration, sessions draining (reg_lock) */
	/* Set by the owner (ctl): called first by isc_target_destroy, to free what the owner hung
	 * on the target (pending LUN records, owner_data). */
	void (*release)(struct isc_target *t);
	void *owner_data;		/* ctl: the old configuration a removed target still uses */
};

/* gateway.data_memory's default (gateway/conf/conf_file.c says "1G"). */
#define ISC_DATA_MEM_DEFAULT	(1ull << 30)

/*
 * What each loop keeps for its own connections and tasks (issue 13, docs/ARCHITECTURE.md
 * "Several event loops"): its PDU pool, its cache of recycled tasks and its share of
 * gateway.data_memory, so no free list or budget counter is shared on the data path. A loop
 * takes its share from the gateway's budget (gw->data_mem_held, atomic) in steps of at least
 * ISC_DATA_MEM_STEP (less for a small budget or many loops: what the loops may hold idle
 * stays within an eighth of the budget) and gives back what it holds beyond two steps unused: with one loop the share can grow to the whole budget, so a command is refused exactly when today's single
 * counter would refuse it.
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
	struct isc_gw_conf *conf;	/* owned */
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
	struct gw_list dying_targets;	/* removed targets whose sessions still drain */
	struct gw_timer lun_timer;	/* ctl: retries LUN removals that met commands in flight */
	bool lun_timer_on;
	/* Command data buffers (in tasks and in the task cache) against their budget: the
	 * loops' shares together (atomic), and the budget (gateway.data_memory; 0: none). */
	uint64_t data_mem_held, data_mem_max;
	/* Login limits: failed logins by source, refusals by limit */
	struct isc_login_src login_src[ISC_LOGIN_SRC_MAX];
	uint64_t login_refused_sessions;	/* max_sessions / max_sessions_per_initiator */
	uint64_t login_timeouts;		/* connections closed by login_timeout */
};

/* isc_target.c: the gateway object */
/* An empty gateway object over conf, which it takes over on success (freed at destroy). No
 * portal or target yet: ctl_gw_create adds them. NULL on ENOMEM. */
struct isc_gw *isc_gw_alloc(struct gw_loop *loop, struct isc_gw_conf *conf);
/* Sets the gateway's loops (before any portal listens; NULL or one loop: loop alone) and
 * readies each one's pools. 0 or -EINVAL (loop 0 is not the gateway's loop). */
int isc_gw_set_loops(struct isc_gw *gw, struct gw_loops *loops);
/* The per-loop counters added up (tasks, cached tasks, PDUs in use, data memory used,
 * TASK SET FULL answers, the PDU pools' free PDUs and the bytes they keep with their buffers).
 * Each loop's part is read on its loop. */
struct isc_gw_totals {
	uint64_t tasks, tasks_cached, pdus_in_use, data_mem, task_set_full;
	uint64_t pdus_cached, pdu_cache_bytes;
};
void isc_gw_totals(struct isc_gw *gw, struct isc_gw_totals *out);
/* Stops accepting and closes every connection, each on its loop; sessions go away as their
 * tasks drain. On loop 0. */
void isc_gw_stop(struct isc_gw *gw);
/* Open connections, logged in or not, every loop's. */
unsigned int isc_gw_nconns(const struct isc_gw *gw);
/* Links a new target into gw->targets (on loop 0; logins on other loops read the list). */
void isc_gw_add_target(struct isc_gw *gw, struct isc_target *t);
/* The same for a portal, and a portal's listener once it listens (SendTargets reads both). */
void isc_gw_add_portal(struct isc_gw *gw, struct isc_portal *p);
void isc_portal_set_dmv(struct isc_portal *p, struct dmv_portal *dp);
/* Returns once every loop has finished what it was running: after it none still reads a
 * configuration that loop 0 replaced before the call (so it may be freed). On loop 0. */
void isc_gw_sync(struct isc_gw *gw);
/* True when no session, connection or task is left. */
bool isc_gw_idle(const struct isc_gw *gw);
/* Frees the gateway: its targets (live and dying), portals, task cache, PDUs and conf. */
void isc_gw_destroy(struct isc_gw *gw);
/* A portal object for conf (not linked, no datamover yet). NULL on ENOMEM. */
struct isc_portal *isc_portal_new(struct isc_gw *gw, struct isc_portal_conf *conf);
/* Takes a portal out: its connections closed, its listener destroyed, the object freed. */
void isc_portal_remove(struct isc_portal *p);
/* A target object for tc (not linked, no SCSI device yet: the caller sets t->dev, t->port and
 * the device's event callback isc_target_scsi_event). NULL on ENOMEM. */
struct isc_target *isc_target_alloc(struct isc_gw *gw, struct isc_target_conf *tc);
/* Frees a target (sessions gone, commands drained): release, then its SCSI device. */
void isc_target_destroy(struct isc_target *t);
/* Takes a target out of service: logins to it closed, then destroyed now if it has no session,
 * else moved to gw->dying_targets and destroyed when its last session ends. */
void isc_target_retire(struct isc_target *t);
/* Closes the sessions of initiators the target's (new) ACL no longer admits. */
void isc_target_enforce_acl(struct isc_target *t);
/* On loop 0: lists LUN lun in the target's counters (once). 0 or -ENOMEM. */
int isc_target_lun_register(struct isc_target *t, uint64_t lun);
/* On loop 0: out[i] (nstat_luns of them) = the counters of stat_luns[i] summed over every
 * loop, each loop's read on its own thread. */
void isc_target_stats(struct isc_target *t, struct isc_lun_stats *out);
/* True while a removal of (target, lun) waits for commands to drain. */
bool isc_target_lun_blocked(const struct isc_target *t, uint64_t lun);
struct isc_target *isc_gw_find_target(struct isc_gw *gw, const char *name);
/* Whether the target serves on portal p, and its TPGT. */
bool isc_target_on_portal(const struct isc_target *t, const struct isc_portal *p);
/* Initiator admission: 0 allowed; *chap gets the CHAP credentials (NULL: none). -EACCES. */
int isc_target_admit(const struct isc_target *t, const char *initiator,
		     const struct isc_chap_conf **chap);
/* Closes the session with this TSIH. 0 or -ENOENT. */
int isc_gw_drop_session(struct isc_gw *gw, uint16_t tsih);

/* isc_state.c: live state of the iSCSI objects (the control socket's "state") */
/* Every session with its connections (new reference, an array). */
json_t *isc_gw_sessions_state(const struct isc_gw *gw);
/* Sessions on target t. */
unsigned int isc_target_nsessions(const struct isc_target *t);
/* The login limits' counters: per portal (connections, refused), per source address in the
 * failed-login table (failed, refused, back-off left), sessions refused, login timeouts. */
json_t *isc_gw_login_state(const struct isc_gw *gw);

/* Wiring, for ctl: a portal's datamover hands new connections to isc_conn_accept (dp->priv is
 * the struct isc_portal); a target's SCSI device reports events to isc_target_scsi_event (arg
 * is the struct isc_target). */
void isc_conn_accept(struct dmv_portal *dp, struct dmv_conn *dc);
/* dmv_portal.place for a portal on several loops: a login with a TSIH goes to its session's
 * loop, a new session to the least loaded (-1). On loop 0. */
int isc_conn_place(struct dmv_portal *dp, const struct pdu *first);
/* dmv_portal.admit / unadmit: the portal's max_connections counts the connections waiting
 * for placement too; one closed waiting for its first PDU longer than login_timeout counts
 * as a login timeout. */
int isc_conn_admit(struct dmv_portal *dp, struct dmv_conn *dc);
void isc_conn_unadmit(struct dmv_portal *dp, bool timed_out);
void isc_target_scsi_event(struct scsi_dev *dev, enum scsi_event ev, uint64_t lun, void *arg);

#endif
