/* SPDX-License-Identifier: MIT */
/*
 * Private to gateway/scsi/: the device, LU and nexus structures, the opcode table entry, and
 * the helpers the command-group files (spc, sbc, pr, alua) share. Nothing outside the folder
 * includes this.
 */
#ifndef SCSI_PRIV_H
#define SCSI_PRIV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "scsi.h"

#define SCSI_LOG "scsi"

/* Handler results: finished now (completion is deferred by the core), or later. */
enum {
	SCSI_CMD_DONE = 0,
	SCSI_CMD_ASYNC = 1,
};

/* Opcode flags */
enum {
	SCSI_OPF_NO_LU = 1 << 0,	/* runs for a LUN with no LU behind it */
	SCSI_OPF_NO_UA = 1 << 1,	/* not stopped by a pending unit attention */
	SCSI_OPF_MEDIA = 1 << 2,	/* reads or writes blocks */
	SCSI_OPF_WRITE = 1 << 3,	/* changes the medium: refused on read-only LUs */
	SCSI_OPF_SA = 1 << 4,		/* service action in byte 1, bits 4-0 */
	SCSI_OPF_ALUA_SB = 1 << 5,	/* allowed in ALUA standby */
	SCSI_OPF_ALUA_UA = 1 << 6,	/* allowed in ALUA unavailable and transitioning */
	SCSI_OPF_RES2_OK = 1 << 7,	/* allowed under another nexus's RESERVE(6) */
	/* Keeps state on this gateway that the other gateways of a cluster would not see
	 * (RESERVE(6)): not supported where the LU's reservations are the cluster's. */
	SCSI_OPF_NOT_CLUSTER = 1 << 8,
};

/* What a persistent reservation does to a command from a non-holder (SPC-4 5.13.1). */
enum scsi_pr_class {
	SCSI_PRC_ALLOW,		/* never conflicts */
	SCSI_PRC_READ,		/* conflicts in exclusive-access types */
	SCSI_PRC_WRITE,		/* conflicts in every type */
	SCSI_PRC_OWN,		/* PR OUT, RESERVE/RELEASE(6): the handler decides */
};

struct scsi_op {
	uint8_t opcode;
	uint8_t sa;
	uint8_t cdb_len;
	uint8_t pr;			/* enum scsi_pr_class */
	uint16_t flags;
	uint16_t timeout;		/* seconds, for the RCTD timeouts descriptor */
	int (*fn)(struct scsi_cmd *cmd);
	const char *name;
	uint8_t usage[16];		/* CDB usage data; usage[0] is the opcode */
};

/* Unit attention conditions, in reporting priority order (bit 0 first). */
enum {
	SCSI_UA_POWER_ON,		/* 29/00 */
	SCSI_UA_POWER_ON_OCCURRED,	/* 29/01 */
	SCSI_UA_BDR,			/* 29/03 */
	SCSI_UA_NEXUS_LOSS,		/* 29/07 */
	SCSI_UA_MODE_CHANGED,		/* 2A/01 */
	SCSI_UA_RES_PREEMPTED,		/* 2A/03 */
	SCSI_UA_RES_RELEASED,		/* 2A/04 */
	SCSI_UA_REG_PREEMPTED,		/* 2A/05 */
	SCSI_UA_ALUA_CHANGED,		/* 2A/06 */
	SCSI_UA_CAPACITY,		/* 2A/09 */
	SCSI_UA_LUNS_CHANGED,		/* 3F/0E */
	SCSI_UA_NR,
};

struct scsi_tpg {
	struct gw_list node;
	uint16_t id;
	enum scsi_alua_state state;
};

/* The ALUA groups and ports every loop reads per command (the ALUA check, REPORT TARGET PORT
 * GROUPS, INQUIRY, COMPARE AND WRITE's owner): a copy of dev->tpgs and dev->ports, immutable
 * once published (an atomic pointer in the device), replaced whole by the device's loop on
 * every change and the old one freed after a call to every loop, as the LUN map is. */
struct scsi_alua_map {
	size_t ngroups;
	size_t nports;
	struct scsi_alua_grp {
		uint16_t id;
		bool local;		/* this gateway has a port in it */
		enum scsi_alua_state state;
	} *grp;
	struct scsi_alua_port {
		uint16_t rel_id;
		uint16_t tpg_id;
		bool remote;
	} *port;
};

/* The LUN map every loop reads without a lock or a message: immutable once published (an
 * atomic pointer in the device), replaced whole by the device's loop, and the old one freed
 * after a call to every loop has run (no loop still reads it). Sorted by LUN. */
struct scsi_lun_map {
	size_t n;
	struct scsi_lun_ent {
		uint64_t lun;
		struct scsi_lu *lu;
	} e[];
};

struct scsi_dev {
	struct gw_loop *loop;
	struct scsi_lun_map *map;	/* atomic; NULL: no LU */
	struct scsi_alua_map *alua;	/* atomic; NULL: no group, no port */
	struct gw_loops *loops;		/* NULL: every LU is the device loop's */
	unsigned lu_count[GW_LOOPS_MAX];	/* LUs owned per loop (index in loops) */
	unsigned lu_picked[GW_LOOPS_MAX];	/* picked (scsi_dev_next_lu_loop), not added yet */
	char *name;
	struct gw_list ports;		/* the device's loop's; the owners read dev->alua */
	struct gw_list tpgs;		/* the same */
	struct gw_list itns;		/* under itn_lock: nexuses come and go on every loop */
	pthread_mutex_t itn_lock;	/* login and logout only, never per command */
	struct gw_list lus;		/* sorted by LUN; the device's loop's */
	uint16_t next_rel_id;
	uint64_t next_itn_id;
	bool fenced;			/* its local groups report standby (scsi_dev_set_fenced) */
	/* Cluster-wide reservations (scsi_dev_set_pr_cluster): NULL ops, each LU's own. The
	 * device's loop's; the owners only test pr_ops (atomic) and call commit through a
	 * message to the device's loop (scsi_dev_pr_cluster, scsi_pr_cluster.c). */
	const struct scsi_pr_cluster_ops *pr_ops;
	void *pr_arg;
	void (*event_fn)(struct scsi_dev *dev, enum scsi_event ev, uint64_t lun, void *arg);
	void *event_arg;
};

/* What the core keeps per I_T nexus (itn->ua points at it). */
struct scsi_itn_state {
	unsigned refs;			/* atomic: loops still to forget it (scsi_itn_destroy) */
	bool luns_changed;		/* 3F/0E pending, reported through whichever LU (atomic:
					 * set by the device's loop, taken by any LU's owner) */
};

/* One I_T nexus's view of one LU: its pending unit attentions. Only in the LU's list (the
 * owner's), so LUs on different loops never share a list. */
struct scsi_itl {
	struct gw_list lu_node;		/* in lu->itls */
	struct scsi_itn *itn;
	struct scsi_lu *lu;
	uint32_t ua;			/* 1 << SCSI_UA_* */
};

struct scsi_pr_reg {
	struct gw_list node;		/* in lu->pr.regs, registration order */
	char *initiator;		/* initiator port name (with ISID) */
	char *initiator_name;		/* bare name, for TransportID matching */
	uint16_t rel_id;		/* relative target port identifier */
	uint64_t key;
};

enum {
	SCSI_PR_TYPE_WE = 1,
	SCSI_PR_TYPE_EA = 3,
	SCSI_PR_TYPE_WE_RO = 5,
	SCSI_PR_TYPE_EA_RO = 6,
	SCSI_PR_TYPE_WE_AR = 7,
	SCSI_PR_TYPE_EA_AR = 8,
};

struct scsi_pr {
	struct gw_list regs;
	uint32_t generation;
	bool reserved;
	uint8_t type;
	struct scsi_pr_reg *holder;	/* the one that reserved (AR types: any registrant) */
	bool aptpl;			/* accepted, not persisted (a cluster's state keeps it) */
};

/* A LU's side of cluster-wide reservations (scsi_pr_cluster.c). */
struct scsi_prc {
	uint64_t rev;			/* revision of the state applied last (0: none) */
	struct scsi_cmd *inflight;	/* the PR OUT whose commit is out */
	json_t *proposed;		/* its proposed state */
	struct gw_list queue;		/* PR OUTs waiting for it (cmd->node) */
	struct gw_defer kick;		/* starts the next one */
	bool deciding;			/* a PR OUT runs on a copy: no unit attentions, no aborts */
	/* While deciding, scsi_pr.c notes here the nexuses PREEMPT AND ABORT removed (struct
	 * scsi_pr_reg, key 0): their tasks go when the cluster's state is applied. */
	struct gw_list aborted;
};

struct scsi_lu {
	struct gw_list node;		/* in dev->lus */
	struct scsi_dev *dev;
	struct gw_loop *loop;		/* the owner: the only loop touching what follows */
	bool unmapped;			/* being removed: left out of the LUN map */
	int loop_idx;			/* its index in dev->loops (0 without) */
	struct scsi_lu_conf conf;	/* owned copy */
	uint64_t lun;
	struct bs *bs;
	uint32_t block_size;
	uint8_t block_shift;
	uint8_t lbppbe;			/* logical blocks per physical block exponent */
	uint64_t nblocks;
	bool wce;
	bool thin;			/* conf.thin and the backstore can deallocate */
	bool readonly;
	uint8_t naa[16];		/* NAA-6 designator */
	char serial[40];

	/* Task set: commands not yet started, and counts of started ones. */
	struct gw_list waitq;
	uint32_t nr_cmds;		/* submitted and not completed */
	uint32_t nr_running;
	uint32_t nr_ordered;		/* ORDERED commands running */

	/* Writers in flight, and commands waiting for an overlapping COMPARE AND WRITE. */
	struct gw_list writers;
	struct gw_list range_waiters;
	uint32_t nr_caw;		/* COMPARE AND WRITEs running or waiting */

	/* COMPARE AND WRITE across gateways (scsi_sbc.c; docs/CLUSTER.md, "Atomics"). */
	uint64_t caw_refused;		/* refused here: the LU is another gateway's */
	uint64_t caw_backend;		/* passed to the back end */
	uint32_t caw_logged;		/* owner group + 1 the last refusal was logged for */

	struct gw_list itls;		/* struct scsi_itl */
	struct scsi_itn *res2_holder;	/* RESERVE(6) holder */
	uint64_t not_cluster;		/* SCSI_OPF_NOT_CLUSTER commands refused (logged once) */
	struct scsi_pr pr;		/* in a cluster: the state applied last */
	struct scsi_prc prc;
};

/* The loop a command was submitted on and completes on (the session's). */
static inline struct gw_loop *scsi_cmd_loop(const struct scsi_cmd *cmd)
{
	return cmd->loop ? cmd->loop : cmd->dev->loop;
}

/* The loop the command runs on now: its LU's owner, or its own loop without an LU. */
static inline struct gw_loop *scsi_cmd_home(const struct scsi_cmd *cmd)
{
	return cmd->lu ? cmd->lu->loop : scsi_cmd_loop(cmd);
}

/* The LUN map as published now (any loop; valid until the callback returns). */
static inline const struct scsi_lun_map *scsi_dev_map(const struct scsi_dev *dev)
{
	return __atomic_load_n(&dev->map, __ATOMIC_ACQUIRE);
}

/* The ALUA groups and ports as published now (any loop; valid until the callback returns). */
static inline const struct scsi_alua_map *scsi_dev_alua(const struct scsi_dev *dev)
{
	return __atomic_load_n(&dev->alua, __ATOMIC_ACQUIRE);
}

/* Whether reservations are the cluster's now (any loop). */
static inline bool scsi_dev_pr_cluster(const struct scsi_dev *dev)
{
	return __atomic_load_n(&dev->pr_ops, __ATOMIC_ACQUIRE) != NULL;
}

/* scsi_op.c: the opcode table. NULL: no such opcode and service action; *known_opcode (may be
 * NULL) says whether the opcode alone is in the table. */
const struct scsi_op *scsi_op_find(uint8_t opcode, uint8_t sa, bool *known_opcode);

/* scsi_reply.c: sense and data-buffer helpers; they call nothing else in the core. */
void scsi_cmd_invalid_cdb(struct scsi_cmd *cmd, uint16_t byte, int bit);
void scsi_cmd_invalid_param(struct scsi_cmd *cmd, uint16_t byte, int bit);
void scsi_cmd_param_len_error(struct scsi_cmd *cmd);
void scsi_cmd_set_info(struct scsi_cmd *cmd, uint64_t info);
/* Copies up to len bytes of response to the data-in buffer: what fits in data_len. Sets
 * xfer_len and cdb_xfer_len (len is already clipped to the allocation length). */
void scsi_cmd_data_in(struct scsi_cmd *cmd, const void *buf, uint32_t len);
/* Writes len bytes at off into the data-in buffer (within data_len); returns bytes written.
 * Does not touch xfer_len. */
uint32_t scsi_cmd_put(struct scsi_cmd *cmd, uint32_t off, const void *buf, uint32_t len);
/* Copies data-out bytes [off, off+len) to buf; returns what was available. */
uint32_t scsi_cmd_data_out(struct scsi_cmd *cmd, uint32_t off, void *buf, uint32_t len);
/* Sense from a backstore error. */
void scsi_cmd_bs_error(struct scsi_cmd *cmd, int err);

/* scsi_lun.c: the LUN map (the device's loop publishes; any loop looks up). */
int scsi_lun_publish(struct scsi_dev *dev);
/* The device's loop: returns once every loop has run a call (a swapped-out copy may go). */
void scsi_dev_barrier(struct scsi_dev *dev);
/* fn(lu, a, p) on the LU's owner: at once there (and always without loops), else by a message. */
void scsi_lu_on_owner(struct scsi_lu *lu, void (*fn)(struct scsi_lu *lu, int a, void *p), int a,
		      void *p);

/* scsi_itn.c: I_T nexuses, their view of each LU, unit attentions */
void scsi_itn_dev_init(struct scsi_dev *dev);
void scsi_itn_dev_fini(struct scsi_dev *dev);
/* REPORTED LUNS DATA HAS CHANGED for every nexus of the device (any LU reports it once). */
void scsi_itn_luns_changed(struct scsi_dev *dev);
uint16_t scsi_itn_rel_id(const struct scsi_itn *itn);
struct scsi_itl *scsi_itl_get(struct scsi_itn *itn, struct scsi_lu *lu);
void scsi_itl_free_all(struct scsi_lu *lu);
void scsi_ua_set(struct scsi_lu *lu, struct scsi_itn *except, int ua);
void scsi_ua_set_itn(struct scsi_itn *itn, struct scsi_lu *lu, int ua);
/* scsi_ua_set(lu, NULL, ua) on the LU's owner (posted from another loop). */
void scsi_ua_set_all(struct scsi_lu *lu, int ua);
/* Pending UA for this nexus and LU into cmd's sense (and cleared): true if there was one. */
bool scsi_ua_take(struct scsi_cmd *cmd, struct scsi_itl *itl);

/* scsi_exec.c: running and completing a command, the task set, the writer range lock */
/* Where a command is (cmd->state); set by the dispatcher and scsi_exec.c. */
enum {
	SCSI_CMD_ST_NEW,
	SCSI_CMD_ST_WAITING,		/* in the LU's task set queue, not started */
	SCSI_CMD_ST_RUNNING,
	SCSI_CMD_ST_COMPLETING,		/* done is queued */
	SCSI_CMD_ST_DONE,
};
/* The command's gw_defer: completes it. */
void scsi_cmd_defer_fn(struct gw_defer *d);
/* Ends an asynchronous handler: the command completes now (loop thread, not in submit). */
void scsi_cmd_finish(struct scsi_cmd *cmd);
/* The same from a defer: for asynchronous handlers that fail before their I/O is queued. */
void scsi_cmd_finish_later(struct scsi_cmd *cmd);
/* Runs the command's handler again (a range lock it waited for was released). */
void scsi_cmd_rerun(struct scsi_cmd *cmd);
/* Completes a queued, never-started command with TASK ABORTED. */
void scsi_task_abort_queued(struct scsi_cmd *cmd);
/* On the owner: the command's loop asked to abort it (scsi_abort_cmd on another loop's LU). */
bool scsi_cmd_abort_requested(const struct scsi_cmd *cmd);
/* The task set (SIMPLE / ORDERED / HEAD OF QUEUE): the dispatcher starts a checked command. */
void scsi_task_start(struct scsi_cmd *cmd);
/* Range lock: true if the command may write [lba, lba+n) now; else it is parked and rerun. */
bool scsi_range_acquire(struct scsi_cmd *cmd, uint64_t lba, uint64_t n, bool exclusive);

/* scsi_dev.c: devices and LUs (include/scsi.h); nothing private. */

/* scsi_spc.c */
int scsi_spc_inquiry(struct scsi_cmd *cmd);
int scsi_spc_request_sense(struct scsi_cmd *cmd);
int scsi_spc_report_luns(struct scsi_cmd *cmd);
int scsi_spc_test_unit_ready(struct scsi_cmd *cmd);
int scsi_spc_mode_sense(struct scsi_cmd *cmd);
int scsi_spc_mode_select(struct scsi_cmd *cmd);
int scsi_spc_report_tmfs(struct scsi_cmd *cmd);
int scsi_spc_start_stop(struct scsi_cmd *cmd);

/* scsi_sbc.c */
int scsi_sbc_read_capacity10(struct scsi_cmd *cmd);
int scsi_sbc_read_capacity16(struct scsi_cmd *cmd);
int scsi_sbc_rw(struct scsi_cmd *cmd);
int scsi_sbc_sync_cache(struct scsi_cmd *cmd);
int scsi_sbc_verify(struct scsi_cmd *cmd);
int scsi_sbc_write_verify(struct scsi_cmd *cmd);
int scsi_sbc_write_same(struct scsi_cmd *cmd);
int scsi_sbc_unmap(struct scsi_cmd *cmd);
int scsi_sbc_get_lba_status(struct scsi_cmd *cmd);
int scsi_sbc_compare_and_write(struct scsi_cmd *cmd);
int scsi_sbc_orwrite(struct scsi_cmd *cmd);
int scsi_sbc_prefetch(struct scsi_cmd *cmd);
/* Block limits the device reports (VPD B0) and enforces. */
/* 32 MiB: a single READ/WRITE(16) of 65536 512-byte blocks, as initiators that ignore the limit
 * (and libiscsi's tests) issue. */
#define SCSI_MAX_XFER_BLOCKS_BYTES (32u << 20)	/* per command */
#define SCSI_MAX_UNMAP_BLOCKS 0x100000u	/* 512 MiB at 512-byte blocks per UNMAP */
#define SCSI_MAX_UNMAP_DESC 256u
#define SCSI_MAX_WS_BLOCKS 0x400000u
#define SCSI_MAX_CAW_BLOCKS 64u
uint32_t scsi_sbc_max_xfer_blocks(const struct scsi_lu *lu);

/*
 * Where an atomic read-modify-write (COMPARE AND WRITE, ORWRITE) of an LU may run, seen
 * through a port of this gateway (docs/CLUSTER.md, "Atomics"):
 */
enum scsi_atom {
	SCSI_ATOM_LOCAL,	/* here, under the range lock: the LU has no other gateway */
	SCSI_ATOM_BACKEND,	/* the back end does it (bs->caw_blocks): atomic everywhere */
	SCSI_ATOM_OWNER,	/* here: the LU is shared and this is its only a/o gateway */
	SCSI_ATOM_ELSEWHERE,	/* refused here (NOT READY): another gateway is, or becomes, the
				 * owner; a host retries through that one */
	SCSI_ATOM_NONE,		/* nowhere: several groups report a/o; not advertised */
};
/* The mode through port (NULL: this gateway's first port); backend: whether the back end's
 * own COMPARE AND WRITE counts (not for ORWRITE). *owner gets the a/o group (0: none). */
enum scsi_atom scsi_sbc_atom(const struct scsi_dev *dev, const struct scsi_lu *lu,
			     const struct scsi_port *port, bool backend, uint16_t *owner);
/* MAXIMUM COMPARE AND WRITE LENGTH for VPD B0: 0 when the LU cannot do it at all. */
uint8_t scsi_sbc_caw_max(const struct scsi_dev *dev, const struct scsi_lu *lu,
			 const struct scsi_port *port);

/* scsi_pr.c */
int scsi_pr_in(struct scsi_cmd *cmd);
int scsi_pr_reserve6(struct scsi_cmd *cmd);
int scsi_pr_release6(struct scsi_cmd *cmd);
/* True if the command conflicts with a reservation (status set to RESERVATION CONFLICT). */
bool scsi_pr_conflict(struct scsi_cmd *cmd, const struct scsi_op *op);
void scsi_pr_init(struct scsi_pr *pr);
void scsi_pr_fini(struct scsi_pr *pr);
/* What scsi_pr_cluster.c shares with the local rules. */
bool scsi_pr_reg_matches(const struct scsi_pr_reg *r, const struct scsi_itn *itn);
bool scsi_pr_type_valid(uint8_t type);
bool scsi_pr_all_reg(uint8_t type);
struct scsi_pr_reg *scsi_pr_reg_new(struct gw_list *list, const char *initiator,
				    const char *name, uint16_t rel_id, uint64_t key);
void scsi_pr_reg_free(struct scsi_pr_reg *r);
void scsi_pr_abort_reg(struct scsi_lu *lu, const struct scsi_pr_reg *r);
/* PERSISTENT RESERVE OUT by the local rules, on lu->pr. */
int scsi_pr_out_local(struct scsi_cmd *cmd);

/* scsi_pr_cluster.c */
void scsi_prc_init(struct scsi_lu *lu);
void scsi_prc_fini(struct scsi_lu *lu);
/* PERSISTENT RESERVE OUT (the opcode table's): through the cluster on a device with the
 * hook, else scsi_pr_out_local. */
int scsi_prc_out(struct scsi_cmd *cmd);
/* PR OUTs waiting behind a commit (not the one out) end TASK ABORTED: all (only NULL) or
 * one nexus's. LUN RESET, target resets, nexus loss. */
void scsi_prc_abort_queued(struct scsi_lu *lu, const struct scsi_itn *only);

/* scsi_alua.c */
int scsi_alua_report_tpgs(struct scsi_cmd *cmd);
int scsi_alua_set_tpgs(struct scsi_cmd *cmd);
/* True if the port's ALUA state refuses the command (sense set). */
bool scsi_alua_refuse(struct scsi_cmd *cmd, const struct scsi_op *op);
void scsi_alua_init(struct scsi_dev *dev);
void scsi_alua_fini(struct scsi_dev *dev);
struct scsi_tpg *scsi_alua_tpg(struct scsi_dev *dev, uint16_t id);
/* The device's loop, after any change of dev->tpgs or dev->ports: publishes a new copy. */
int scsi_alua_publish(struct scsi_dev *dev);
/* More than one target port (local or another gateway's): INQUIRY's MULTIP. */
bool scsi_dev_multiport(const struct scsi_dev *dev);
/* The state of group id for lu in one published copy (fenced: the device's flag). */
enum scsi_alua_state scsi_alua_state_in(const struct scsi_alua_map *am, bool fenced,
					const struct scsi_lu *lu, uint16_t id);
enum scsi_alua_state scsi_alua_port_state(const struct scsi_dev *dev, const struct scsi_lu *lu,
					   const struct scsi_port *p);
/* The state of group id for lu (NULL: the group's own state). */
enum scsi_alua_state scsi_alua_lu_state(const struct scsi_dev *dev, const struct scsi_lu *lu,
					 uint16_t id);

/* Room for data-in, and data-out bytes present: a buffer flagged the other way is no buffer
 * (a READ sent as a write gets no data, not the transport's write buffer overwritten). */
static inline uint32_t scsi_cmd_in_room(const struct scsi_cmd *cmd)
{
	return cmd->dir == SCSI_DIR_READ || cmd->dir == SCSI_DIR_BIDI ? cmd->data_len : 0;
}

static inline uint32_t scsi_cmd_out_len(const struct scsi_cmd *cmd)
{
	return cmd->dir == SCSI_DIR_WRITE || cmd->dir == SCSI_DIR_BIDI ? cmd->data_len : 0;
}

/* Big-endian helpers */
static inline uint16_t scsi_get16(const uint8_t *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}

static inline uint32_t scsi_get24(const uint8_t *p)
{
	return ((uint32_t)p[0] << 16) | ((uint32_t)p[1] << 8) | p[2];
}

static inline uint32_t scsi_get32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline uint64_t scsi_get64(const uint8_t *p)
{
	return ((uint64_t)scsi_get32(p) << 32) | scsi_get32(p + 4);
}

static inline void scsi_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void scsi_put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline void scsi_put64(uint8_t *p, uint64_t v)
{
	scsi_put32(p, (uint32_t)(v >> 32));
	scsi_put32(p + 4, (uint32_t)v);
}

#endif
