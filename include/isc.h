/* SPDX-License-Identifier: MIT */
/*
 * The iSCSI target engine (RFC 7143). Owns the gateway's iSCSI objects: portals (each a
 * datamover listener), targets (each a SCSI device with one target port for its portal group),
 * sessions (one I_T nexus each), connections and tasks. It sits between a datamover
 * (include/dmv.h, which it never asks the kind of) and the SCSI core (include/scsi.h).
 *
 * The PDU type and its pool are include/pdu.h, shared with the datamovers.
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

/* A LUN new commands must not reach: its removal waits for the commands in flight to drain.
 * The owner (ctl) embeds it in its own record, links it and unlinks it. */
struct isc_lun_block {
	struct gw_list node;		/* in target->pending_luns */
	uint64_t lun;
};

/* gateway.data_memory's default (gateway/conf/conf_file.c says "1G"). */
#define ISC_DATA_MEM_DEFAULT	(1ull << 30)

/*
 * The engine object and its handles. Everything here runs on loop 0 (the gateway's first
 * loop, where ctl runs) unless it says otherwise. The structs are opaque: ctl holds pointers
 * and reaches what it needs through these functions. The engine's lists of portals and
 * targets change only here (under its registry lock, which logins on other loops take to
 * read them).
 */

/* isc_gw.c */
/* An empty engine on loop 0 (no portal, no target, no configuration yet). NULL on ENOMEM. */
struct isc_gw *isc_gw_alloc(struct gw_loop *loop);
/* Sets the engine's loops (before any portal listens; NULL or one loop: loop alone) and
 * readies each one's pools. 0 or -EINVAL (loop 0 is not the engine's loop). */
int isc_gw_set_loops(struct isc_gw *gw, struct gw_loops *loops);
/* The configuration the engine runs on (the discovery settings; targets and portals point
 * into it too): not owned, it must outlive its use (isc_gw_sync). */
void isc_gw_set_conf(struct isc_gw *gw, struct isc_gw_conf *conf);
/* gateway.data_memory: the bytes every loop's task buffers may hold together (0: no limit).
 * Applied at once: commands past a smaller budget are answered TASK SET FULL. */
void isc_gw_set_data_memory(struct isc_gw *gw, uint64_t bytes);
uint64_t isc_gw_data_memory(const struct isc_gw *gw);
/* The per-loop counters added up (tasks, cached tasks, PDUs in use, data memory used,
 * TASK SET FULL answers, the PDU pools' free PDUs and the bytes they keep with their buffers).
 * Each loop's part is read on its loop. */
struct isc_gw_totals {
	uint64_t tasks, tasks_cached, pdus_in_use, data_mem, task_set_full;
	uint64_t pdus_cached, pdu_cache_bytes;
};
void isc_gw_totals(struct isc_gw *gw, struct isc_gw_totals *out);
/* Stops accepting and closes every connection, each on its loop; sessions go away as their
 * tasks drain. */
void isc_gw_stop(struct isc_gw *gw);
/* Open connections, logged in or not, every loop's (any thread). */
unsigned int isc_gw_nconns(const struct isc_gw *gw);
/* Returns once every loop has finished what it was running: after it none still reads a
 * configuration that loop 0 replaced before the call (so it may be freed). */
void isc_gw_sync(struct isc_gw *gw);
/* True when no session, connection or task is left (any thread). */
bool isc_gw_idle(const struct isc_gw *gw);
/* Frees the engine: its targets (live and draining), portals, task cache and PDUs. */
void isc_gw_destroy(struct isc_gw *gw);
/* Closes the session with this TSIH. 0 or -ENOENT. */
int isc_gw_drop_session(struct isc_gw *gw, uint16_t tsih);

/* Walking the lists: prev NULL gives the first, NULL after the last. The live targets (the
 * configuration's), the draining ones (removed, sessions still ending), the portals. */
struct isc_target *isc_gw_next_target(struct isc_gw *gw, const struct isc_target *prev);
struct isc_target *isc_gw_next_draining(struct isc_gw *gw, const struct isc_target *prev);
struct isc_portal *isc_gw_next_portal(struct isc_gw *gw, const struct isc_portal *prev);
struct isc_target *isc_gw_find_target(struct isc_gw *gw, const char *name);
struct isc_portal *isc_gw_find_portal(struct isc_gw *gw, const char *name);

/* Portals */
/* A portal object for conf (not linked, not listening). NULL on ENOMEM. */
struct isc_portal *isc_portal_new(struct isc_gw *gw, struct isc_portal_conf *conf);
/* Frees a portal isc_gw_add_portal never took. */
void isc_portal_free(struct isc_portal *p);
/* Links a new portal into the engine (SendTargets lists it). */
void isc_gw_add_portal(struct isc_gw *gw, struct isc_portal *p);
/* Opens the portal's listener through its transport's datamover, handing connections to the
 * engine (on every loop); logs "listening on ADDR (TRANSPORT)". A portal already listening is
 * left alone; a transport this build lacks is logged and skipped (0). 0 or -errno. */
int isc_portal_listen(struct isc_portal *p);
/* Takes a portal out: its connections closed, its listener destroyed, the object freed. */
void isc_portal_remove(struct isc_portal *p);
struct isc_portal_conf *isc_portal_conf(const struct isc_portal *p);
/* A kept portal follows its entry of a new configuration. */
void isc_portal_set_conf(struct isc_portal *p, struct isc_portal_conf *conf);
/* Its listener (NULL: not listening, or its transport is missing). */
struct dmv_portal *isc_portal_dmv(const struct isc_portal *p);

/* isc_target.c */
/* A target object for tc (not linked, no SCSI device yet). NULL on ENOMEM. */
struct isc_target *isc_target_alloc(struct isc_gw *gw, struct isc_target_conf *tc);
/* Its SCSI device (which it owns from now on: destroyed with it) and its target port; the
 * engine hears the device's events (unit attentions, async messages). */
void isc_target_set_dev(struct isc_target *t, struct scsi_dev *dev, struct scsi_port *port);
struct scsi_dev *isc_target_dev(const struct isc_target *t);
struct isc_target_conf *isc_target_conf(const struct isc_target *t);
/* A kept target follows its entry of a new configuration (new logins, the ACL). */
void isc_target_set_conf(struct isc_target *t, struct isc_target_conf *tc);
/* What the owner (ctl) hangs on the target: release(t, data) runs first when the target is
 * destroyed, to free it. */
void isc_target_set_owner(struct isc_target *t, void (*release)(struct isc_target *t, void *data),
			  void *data);
void *isc_target_owner(const struct isc_target *t);
/* Frees a target isc_gw_add_target never took (sessions gone, commands drained): release,
 * then its SCSI device. */
void isc_target_destroy(struct isc_target *t);
/* Links a new target into the engine (logins on every loop find it from now on). */
void isc_gw_add_target(struct isc_gw *gw, struct isc_target *t);
/* Takes a target out of service: logins to it closed, then destroyed now if it has no session,
 * else draining until its last session ends. */
void isc_target_retire(struct isc_target *t);
/* Closes the sessions of initiators the target's (new) ACL no longer admits. */
void isc_target_enforce_acl(struct isc_target *t);
/* Lists LUN lun in the target's counters (once). 0 or -ENOMEM. */
int isc_target_lun_register(struct isc_target *t, uint64_t lun);
/* The counters of every LUN listed, summed over every loop (each loop's read on its own
 * thread): a new array (*out, *n entries; free it), -ENOMEM. */
int isc_target_stats(struct isc_target *t, struct isc_lun_stats **out, size_t *n);
/* New commands to b->lun get LOGICAL UNIT NOT SUPPORTED until isc_lun_unblock(b): a LUN
 * being removed while commands in flight drain. b is the caller's (embedded in its record). */
void isc_target_block_lun(struct isc_target *t, struct isc_lun_block *b);
void isc_lun_unblock(struct isc_lun_block *b);
/* True while a removal of (target, lun) waits for commands to drain. */
bool isc_target_lun_blocked(const struct isc_target *t, uint64_t lun);
/* Whether the target serves on portal p, and its TPGT. */
bool isc_target_on_portal(const struct isc_target *t, const struct isc_portal *p);
/* Initiator admission: 0 allowed; *chap gets the CHAP credentials (NULL: none). -EACCES. */
int isc_target_admit(const struct isc_target *t, const char *initiator,
		     const struct isc_chap_conf **chap);

/* isc_state.c: live state of the iSCSI objects (the control socket's "state") */
/* Every session with its connections (new reference, an array). */
json_t *isc_gw_sessions_state(const struct isc_gw *gw);
/* Sessions on target t. */
unsigned int isc_target_nsessions(const struct isc_target *t);
/* The login limits' counters: per portal (connections, refused), per source address in the
 * failed-login table (failed, refused, back-off left), sessions refused, login timeouts. */
json_t *isc_gw_login_state(const struct isc_gw *gw);

#endif
