/* SPDX-License-Identifier: MIT */
/*
 * The SCSI target core (SPC-4 / SBC-3): a SCSI target device holds logical units, target ports
 * grouped into ALUA target port groups, and the I_T nexuses the transport creates per session.
 * It decodes CDBs, checks them, runs them against the LU's backstore and builds status and
 * sense. It knows nothing of iSCSI: the transport hands it a command with its data buffer
 * already filled (writes) or sized to the expected transfer length (reads).
 *
 * Async rule: scsi_cmd_submit() always returns with the command accepted; cmd->done fires
 * exactly once, on the command's loop (cmd->loop), never from inside scsi_cmd_submit().
 *
 * Several loops (docs/ARCHITECTURE.md, "Several event loops"): each LU has an owner loop, the
 * only one that touches its state (task set, unit attentions, reservations, the COMPARE AND
 * WRITE range lock, its backstore). A command is submitted on its session's loop; the part
 * that needs the LU runs on the owner, directly when the owner is the command's loop, else
 * through a message embedded in the command, and its done comes back the same way.
 */
#ifndef SCSI_H
#define SCSI_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "bs.h"
#include "conf.h"
#include "gw_conf.h"
#include "gw_list.h"
#include "gw_loop.h"
#include "gw_sam.h"

/* SAM status codes and sense keys: the target core's names for include/gw_sam.h's values */
enum {
	SCSI_GOOD = GW_SAM_GOOD,
	SCSI_CHECK_CONDITION = GW_SAM_CHECK_CONDITION,
	SCSI_CONDITION_MET = GW_SAM_CONDITION_MET,
	SCSI_BUSY = GW_SAM_BUSY,
	SCSI_RESERVATION_CONFLICT = GW_SAM_RESERVATION_CONFLICT,
	SCSI_TASK_SET_FULL = GW_SAM_TASK_SET_FULL,
	SCSI_ACA_ACTIVE = GW_SAM_ACA_ACTIVE,
	SCSI_TASK_ABORTED = GW_SAM_TASK_ABORTED,
};

enum {
	SCSI_SK_NO_SENSE = GW_SAM_SK_NO_SENSE,
	SCSI_SK_RECOVERED_ERROR = GW_SAM_SK_RECOVERED_ERROR,
	SCSI_SK_NOT_READY = GW_SAM_SK_NOT_READY,
	SCSI_SK_MEDIUM_ERROR = GW_SAM_SK_MEDIUM_ERROR,
	SCSI_SK_HARDWARE_ERROR = GW_SAM_SK_HARDWARE_ERROR,
	SCSI_SK_ILLEGAL_REQUEST = GW_SAM_SK_ILLEGAL_REQUEST,
	SCSI_SK_UNIT_ATTENTION = GW_SAM_SK_UNIT_ATTENTION,
	SCSI_SK_DATA_PROTECT = GW_SAM_SK_DATA_PROTECT,
	SCSI_SK_ABORTED_COMMAND = GW_SAM_SK_ABORTED_COMMAND,
	SCSI_SK_MISCOMPARE = GW_SAM_SK_MISCOMPARE,
};

#define SCSI_SENSE_MAX 32
#define SCSI_CDB_MAX 32

enum scsi_dir {
	SCSI_DIR_NONE,
	SCSI_DIR_READ,		/* data-in: target to initiator */
	SCSI_DIR_WRITE,		/* data-out: initiator to target */
	SCSI_DIR_BIDI,
};

enum scsi_task_attr {
	SCSI_ATTR_SIMPLE,
	SCSI_ATTR_ORDERED,
	SCSI_ATTR_HEAD_OF_QUEUE,
	SCSI_ATTR_ACA,
};

struct scsi_dev;
struct scsi_lu;

/* A target port: for iSCSI, target name + ",t,0x" + TPGT. */
struct scsi_port {
	struct gw_list node;		/* in dev->ports */
	char *name;
	uint16_t rel_id;		/* relative target port identifier, 1-based */
	uint16_t tpg_id;		/* ALUA target port group */
	bool remote;			/* another gateway's port: listed, never logged in to */
};

/* An I_T nexus: one initiator port (iSCSI: initiator name + ",i,0x" + ISID) to one target
 * port. Created by the transport at login, destroyed at session end. */
struct scsi_itn {
	struct gw_list node;		/* in dev->itns */
	struct scsi_dev *dev;
	struct scsi_port *port;
	char *initiator;		/* initiator port name */
	char *initiator_name;		/* bare initiator name, for TransportID matching */
	uint64_t id;
	void *ua;			/* pending unit attentions, owned by the core */
};

struct scsi_cmd {
	/* Set by the transport before submit. */
	struct scsi_dev *dev;
	struct scsi_itn *itn;
	uint64_t lun;			/* the LUN as the 8-byte SAM LUN field decodes to */
	uint8_t cdb[SCSI_CDB_MAX];
	uint8_t cdb_len;
	enum scsi_task_attr attr;
	uint64_t tag;			/* the transport's task tag (iSCSI ITT) */
	enum scsi_dir dir;
	/* The data buffer: write data (data_len bytes valid) or room for read data (data_len =
	 * the initiator's expected transfer length). Owned by the transport. */
	const struct iovec *iov;
	int iovcnt;
	uint32_t data_len;
	void (*done)(struct scsi_cmd *cmd);
	void *priv;			/* the transport's */
	/* The loop the command is submitted on and done runs on (the session's); NULL: the
	 * device's loop. */
	struct gw_loop *loop;

	/* Set by the core before done. */
	uint8_t status;
	uint8_t sense_len;
	uint8_t sense[SCSI_SENSE_MAX];	/* fixed format (0x70) */
	uint32_t xfer_len;		/* read: bytes placed in the buffer (<= data_len) */
	uint32_t cdb_xfer_len;		/* bytes the CDB asked to move: residual = this vs EDTL */

	/* Core-private from here on. */
	struct scsi_lu *lu;
	struct gw_list node;
	struct gw_defer defer;
	struct bs_io io;
	uint32_t state;
	void *core_priv;
	const void *op;			/* the opcode table entry */
	uint64_t lba;			/* media range, for overlap checks (CAW range lock) */
	uint64_t nblocks;
	struct gw_list range_node;	/* in the LU's writer list while it writes */
	uint32_t flags;
	uint32_t step;			/* multi-step commands (COMPARE AND WRITE, VERIFY...) */
	/* Atomic: set by scsi_abort_cmd on the command's loop when the LU is another loop's;
	 * the owner ends the command TASK ABORTED if it has not started it yet. */
	bool abort_req;
	/* Crossing to the LU's owner loop and back (no allocation per command). */
	struct gw_msg msg_submit;
	struct gw_msg msg_done;
};

/* A cluster's target port group as the gateway's configuration lists it. */
struct scsi_tpg_conf {
	uint16_t id;
	enum scsi_alua_state state;
};

enum scsi_event {
	SCSI_EV_LUNS_CHANGED,		/* REPORTED LUNS DATA HAS CHANGED pending */
	SCSI_EV_CAPACITY_CHANGED,
};

struct scsi_dev *scsi_dev_create(struct gw_loop *loop, const char *name);
/* Every LU is removed (its commands must have completed), and every I_T nexus still open is
 * destroyed with it: destroy sessions' nexuses first, or not at all. With loops: after every
 * loop has stopped and run what was posted to it (a destroyed nexus is forgotten by a message
 * to each loop, which reads the device). */
void scsi_dev_destroy(struct scsi_dev *dev);
/*
 * The loops the device's LUs are spread over (loops->loop[0] is the device's loop). Called
 * once, before the first LU is added; never called: every LU is owned by the device's loop.
 * loops must outlive the device.
 */
void scsi_dev_set_loops(struct scsi_dev *dev, struct gw_loops *loops);
/* The index in the device's loops of the loop the next LU should be owned by (the one owning
 * fewest LUs; 0 without loops): open its backstore on that loop, as an LU is owned by its
 * backstore's loop (the device's loop if that is not one of its loops). */
int scsi_dev_pick_lu_loop(struct scsi_dev *dev);
/* That loop itself (the device's loop without loops), counted as picked until an LU is added
 * on it: LUs whose backstores are opened one after the other before any is added spread over
 * the loops. */
struct gw_loop *scsi_dev_next_lu_loop(struct scsi_dev *dev);
/* Forgets the picks no LU was added for (an apply that failed, before the next one's). */
void scsi_dev_forget_lu_picks(struct scsi_dev *dev);
/* How many LUs the loop of index i in the device's loops owns (the device's loop only). */
unsigned scsi_dev_lus_on_loop(const struct scsi_dev *dev, unsigned i);
/* The loop that owns lun's LU, or NULL. */
struct gw_loop *scsi_dev_lu_loop(struct scsi_dev *dev, uint64_t lun);
/* The transport hears of LU changes here to send iSCSI Asynchronous Messages. */
void scsi_dev_set_event_cb(struct scsi_dev *dev,
			   void (*fn)(struct scsi_dev *dev, enum scsi_event ev, uint64_t lun,
				      void *arg),
			   void *arg);

struct scsi_port *scsi_dev_add_port(struct scsi_dev *dev, const char *name, uint16_t tpg_id);
void scsi_dev_set_alua(struct scsi_dev *dev, uint16_t tpg_id, enum scsi_alua_state state);
/*
 * Cluster mode: the device's target port groups become exactly groups[0..n) (n > 0). The local
 * ports keep their group and take its id as relative port id (so every gateway of a cluster
 * numbers ports alike); every other group gets one remote port, listed by REPORT TARGET PORT
 * GROUPS. Any change of state raises ASYMMETRIC ACCESS STATE CHANGED (2A/06). 0 or -ENOMEM.
 */
int scsi_dev_set_groups(struct scsi_dev *dev, const struct scsi_tpg_conf *groups, size_t n);
/* The LU's active/optimized group (0: none, the groups' states apply), whether it is still
 * pending (that group reports transitioning meanwhile), and its owner's name; a change of the
 * LU's access states raises 2A/06 on the LU. -ENOENT or -ENOMEM. */
int scsi_dev_set_lu_alua(struct scsi_dev *dev, uint64_t lun, uint32_t alua_group, bool pending,
			 const char *owner);
/* Self-fencing (docs/CLUSTER.md): while fenced, every group with a local port reports standby
 * for every LU it would report active/optimized or non-optimized, so commands through this
 * gateway get NOT READY (04/0B). A change raises 2A/06 on every LU. */
void scsi_dev_set_fenced(struct scsi_dev *dev, bool fenced);
/* The access state of group tpg_id for lun (what REPORT TARGET PORT GROUPS says). */
enum scsi_alua_state scsi_dev_alua_state(struct scsi_dev *dev, uint64_t lun, uint16_t tpg_id);

/* The LU takes ownership of bs on success (on failure the caller keeps it). -EEXIST if the
 * LUN is in use. */
int scsi_dev_add_lu(struct scsi_dev *dev, const struct scsi_lu_conf *conf, struct bs *bs,
		    struct gw_errlist *errs);
/* -ENOENT, or -EBUSY while commands are in flight on it. On success the LU's bs is destroyed. */
int scsi_dev_del_lu(struct scsi_dev *dev, uint64_t lun);
struct scsi_lu *scsi_dev_find_lu(struct scsi_dev *dev, uint64_t lun);
/* The backstore behind a LUN (for its status), or NULL. */
struct bs *scsi_dev_lu_bs(struct scsi_dev *dev, uint64_t lun);
/* How the LU does COMPARE AND WRITE, WRITE SAME and UNMAP here, with the reasons and
 * counters (the control socket's LUN status, "atomics"; docs/CONTROL.md), or NULL. */
json_t *scsi_dev_lu_atomics(struct scsi_dev *dev, uint64_t lun);
/* The LU's live state for the control socket, read on its owner (loop 0 only: a synchronous
 * call): the backstore's bs_status with "atomics" (scsi_dev_lu_atomics) added; NULL: no such
 * LUN. */
json_t *scsi_dev_lu_state(struct scsi_dev *dev, uint64_t lun);
/* Sets a capacity-changed unit attention after the backstore grew or shrank. */
void scsi_lu_capacity_changed(struct scsi_lu *lu);
/* Every LU's backstore has settled its start-up logins (bs_settled). */
bool scsi_dev_bs_settled(struct scsi_dev *dev);
/* bs_shutdown on every LU's backstore. */
void scsi_dev_bs_shutdown(struct scsi_dev *dev);

struct scsi_itn *scsi_itn_create(struct scsi_dev *dev, struct scsi_port *port,
				 const char *initiator_port, const char *initiator_name);
void scsi_itn_destroy(struct scsi_itn *itn);

/* Accepts the command; done fires later with status and sense filled in. */
void scsi_cmd_submit(struct scsi_cmd *cmd);
/* Task management. Commands in the backstore still complete through their done callbacks. */
/* 0 removed before it ran (done: TASK ABORTED), -EBUSY running (it ends through its done).
 * From the command's loop. On another loop's LU always -EBUSY: the owner, if it has not
 * started the command yet (still in the message toward it, or waiting in the task set or for
 * a cluster reservation commit), ends it TASK ABORTED through its done. */
int scsi_abort_cmd(struct scsi_cmd *cmd);
void scsi_lu_reset(struct scsi_dev *dev, uint64_t lun, struct scsi_itn *by);
void scsi_target_reset(struct scsi_dev *dev, bool cold, struct scsi_itn *by);
/* Clears what an I_T nexus loss clears (SAM-5 6.3.4) without destroying the itn. */
void scsi_itn_nexus_loss(struct scsi_itn *itn);

/*
 * Cluster-wide persistent reservations (docs/CLUSTER.md). By default each LU keeps its own
 * reservations. With the hook set, the device's LUs hold the cluster's state instead: the one
 * applied last (scsi_dev_pr_apply) and its revision. PERSISTENT RESERVE IN and every
 * RESERVATION CONFLICT check read it; a PERSISTENT RESERVE OUT is decided on it by the same
 * rules, and one that changes it is handed to ops->commit as the proposed state with the
 * revision it was computed from. The command completes when the owner answers through
 * scsi_dev_pr_commit_done: OK applies the proposal at the revision given and completes GOOD;
 * CONFLICT applies the winner given and decides the command again (SCSI_PR_ROUNDS at most);
 * UNAVAILABLE fails it NOT READY, ASYMMETRIC ACCESS STATE TRANSITION (02/04/0A), as does a
 * commit that returns < 0. One commit per LU is out at a time; later PR OUTs for that LU wait
 * behind it. Nothing else ever waits for a commit.
 *
 * The state is JSON: {"generation": N, "aptpl": bool, "registrations": [{"initiator",
 * "rel_id", "key": "0x" + 16 hex digits}], "reservation": null | {"initiator", "rel_id",
 * "type"}, "aborted": [{"initiator", "rel_id"}] (optional)}; "initiator" is the initiator port
 * name (name + ",i,0x" + ISID), or the bare name for a registration made through a name-only
 * TransportID. NULL or JSON null is the empty state.
 */
#define SCSI_PR_ROUNDS 5

enum scsi_pr_commit_result {
	SCSI_PR_COMMIT_OK,
	SCSI_PR_COMMIT_CONFLICT,
	SCSI_PR_COMMIT_UNAVAILABLE,
};

struct scsi_pr_cluster_ops {
	/* 0: scsi_dev_pr_commit_done follows exactly once for (dev, lun), never from inside
	 * this call. < 0: it does not, and the command fails 02/04/0A. state is borrowed. */
	int (*commit)(void *arg, struct scsi_dev *dev, uint64_t lun, uint64_t rev,
		      const json_t *state);
};

/* ops NULL: back to each LU's own reservations, starting from the state applied last (answer
 * every commit out first). */
void scsi_dev_set_pr_cluster(struct scsi_dev *dev, const struct scsi_pr_cluster_ops *ops,
			     void *arg);
/* Checks a state without applying it: 0, or -EINVAL and why (what is wrong, by field). */
int scsi_pr_state_check(const json_t *state, char *why, size_t why_len);
/*
 * Applies state as the LU's revision rev if rev is newer than the one it holds, or always with
 * force. Registrations and reservations that went raise the unit attentions a local PR OUT
 * would have raised (2A/03, 2A/04, 2A/05), not for the nexus except; an "aborted" list aborts
 * the queued tasks of the nexuses it names on this device. 1 applied, 0 not newer, -ENOENT no
 * such LUN, -EINVAL a bad state (why says what; nothing changed), -ENOMEM.
 */
int scsi_dev_pr_apply(struct scsi_dev *dev, uint64_t lun, uint64_t rev, const json_t *state,
		      bool force, char *why, size_t why_len);
/* The answer to a commit. For CONFLICT, rev and state are the winner's (borrowed). */
void scsi_dev_pr_commit_done(struct scsi_dev *dev, uint64_t lun,
			     enum scsi_pr_commit_result res, uint64_t rev, const json_t *state);
/* The LU's reservation state as JSON (new reference) and its revision; NULL: no such LUN. */
json_t *scsi_dev_pr_state(struct scsi_dev *dev, uint64_t lun, uint64_t *rev);

/* Fixed-format sense into cmd; status CHECK CONDITION. */
void scsi_cmd_set_sense(struct scsi_cmd *cmd, uint8_t key, uint8_t asc, uint8_t ascq);

/* The 8-byte SAM LUN field <-> flat LUN number (peripheral and flat addressing). */
uint64_t scsi_lun_decode(const uint8_t lun[8]);
void scsi_lun_encode(uint64_t lun, uint8_t out[8]);

#endif
