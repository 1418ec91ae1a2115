/* SPDX-License-Identifier: MIT */
/*
 * The datamover interface (RFC 5047 §7, as illumos IDM shapes it): what the iSCSI layer asks of
 * a transport, and what a transport tells the iSCSI layer. One implementation per transport:
 * dmv_tcp.c (iSCSI over TCP, RFC 7143) and dmv_iser.c (iSER, RFC 7145). The iSCSI layer never
 * asks which one it has; it only sees this header and the transport's caps and limits (data).
 *
 * Down-calls (iSCSI layer -> transport), RFC 5047 names in brackets:
 *   dmv_send_pdu      [Send_Control]  queue a control/status PDU. The transport owns one reference
 *                     from then on; pdu->done (if set) fires once it has left or was dropped.
 *   dmv_put_data      [Put_Data]      send the first `len` bytes of the task buffer to the
 *                     initiator, then the status `rsp` (a complete SCSI Response the iSCSI layer
 *                     built, StatSN assigned). TCP builds Data-In PDUs within the initiator's
 *                     MaxRecvDataSegmentLength and MaxBurstLength and collapses the status into
 *                     the last one when it carries no sense; iSER will RDMA Write then send rsp.
 *   dmv_get_data      [Get_Data]      fill the whole task buffer [0, task->len) with write data.
 *                     Immediate data already copied by the iSCSI layer and unsolicited Data-Out
 *                     (dmv_task_init_write says how much to expect) count; TCP solicits the rest
 *                     with R2Ts within MaxBurstLength / MaxOutstandingR2T, iSER with RDMA Reads.
 *   dmv_task_abort    forget a task: no more R2Ts, its Data-Out is discarded, its done callback
 *                     will not fire. A Put_Data in progress is not recalled (the buffer must stay
 *                     valid until its done fires, or until the connection is closed).
 *   dmv_conn_set_params  apply negotiated values (digests, segment lengths, bursts). Call it
 *                     after queueing the final Login Response: PDUs queued before it are sent
 *                     with the old settings (the Login Response must go without digests).
 *   dmv_conn_close    tear down. No up-call of any kind fires after it returns; PDUs still queued
 *                     are dropped (their done gets -ECONNRESET); memory is released after the
 *                     current loop round (two-phase close), so calling it from an up-call is fine.
 *
 * Up-calls (transport -> iSCSI layer), struct dmv_conn_cb, all on the loop thread:
 *   rx_pdu     a PDU other than Data-Out arrived, digests checked. The PDU reference is lent for
 *              the call; take one (pdu_ref) to keep it.
 *   find_task  map an ITT to the task a Data-Out belongs to (NULL: unknown, data discarded).
 *   stamp      fill StatSN (next, not advanced), ExpCmdSN and MaxCmdSN (BHS bytes 24..35) of a
 *              PDU the transport generates itself (R2T, Data-In).
 *   reject     the transport found a PDU to reject (bad opcode, bad field, Data-Out problem);
 *              the iSCSI layer sends the Reject, which needs its sequence numbers.
 *   lost       the connection failed or the peer closed it; err is -errno. Fires once; the
 *              iSCSI layer then calls dmv_conn_close.
 * Task completion: task->done(task, status) once per successful dmv_put_data / dmv_get_data
 * (the async rule: a call returning < 0 never fires it, one returning 0 fires it exactly once,
 * never from inside the call).
 *
 * Data-Out handling (offset, length, DataSN, F bit, TTT) is shared by every transport
 * (dmv_core.c): a transport calls dmv_dataout_begin() with the header to learn where the data
 * goes (straight into the task buffer) and dmv_dataout_end() once it is in. The registry
 * (dmv.c: dmv_transport_find, dmv_listen) is the only file that names the transports.
 */
#ifndef DMV_H
#define DMV_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "gw_list.h"
#include "gw_loop.h"
#include "pdu.h"

struct dmv_conn;
struct dmv_portal;
struct dmv_task;

/* Transport capabilities, as data (for negotiation only). */
enum {
	DMV_CAP_RDMA = 1 << 0,		/* iSER: RDMAExtensions may be Yes */
	DMV_CAP_DIGESTS = 1 << 1,	/* CRC32C header/data digests can be enabled */
};

/* At most this many R2Ts are kept outstanding per task, whatever MaxOutstandingR2T allows. */
#define DMV_R2T_MAX 8

struct dmv_conn_params {
	bool header_digest;
	bool data_digest;
	uint32_t max_recv_dsl;		/* largest data segment accepted (target's MRDSL) */
	uint32_t max_xmit_dsl;		/* largest data segment sent (initiator's MRDSL) */
	uint32_t max_burst_length;
	uint32_t first_burst_length;
	uint32_t max_outstanding_r2t;
};

/* The values in force during login (RFC 7143 §13: 8192-byte segments, no digests). */
void dmv_conn_params_login(struct dmv_conn_params *p);

struct dmv_r2t {
	uint32_t ttt;
	uint32_t off, len;		/* solicited range */
	uint32_t recv;			/* bytes received for it */
	uint32_t datasn;		/* next DataSN expected */
};

/* Embedded in the iSCSI layer's task. Fields above `private` are the iSCSI layer's to set. */
struct dmv_task {
	struct dmv_conn *conn;
	uint32_t itt;
	uint8_t lun[8];			/* LUN field as received, echoed in R2T */
	uint8_t *buf;			/* the task's data buffer */
	uint32_t len;			/* its size: Expected Data Transfer Length */
	void *buf_handle;		/* buf came from this transport's buf_get (else NULL) */
	void (*done)(struct dmv_task *t, int status);

	/* private: shared Data-Out bookkeeping (dmv_core.c) and transport state */
	bool write;
	bool getting;			/* a Get_Data is in progress */
	bool putting;
	bool aborted;
	int error;			/* -EPROTO: a Data-Out broke the sequence; task failed */
	bool crc_error;			/* a Data-Out failed its data digest: the task ends
					 * with -EBADMSG once all its data is in */
	uint32_t received;		/* bytes in buf: immediate + unsolicited + solicited */
	uint32_t unsol_end;		/* unsolicited data covers [0, unsol_end) */
	uint32_t unsol_next;		/* next unsolicited offset expected */
	uint32_t unsol_datasn;
	bool unsol_done;		/* no more unsolicited Data-Out expected */
	uint32_t sol_next;		/* next offset to solicit */
	uint32_t r2tsn;
	uint32_t nr2t;
	struct dmv_r2t r2t[DMV_R2T_MAX];
	struct gw_defer defer;		/* completes a Get_Data that found all data in */
	void *tp_priv;
};

struct dmv_conn_cb {
	void (*rx_pdu)(struct dmv_conn *c, struct pdu *pdu);
	struct dmv_task *(*find_task)(struct dmv_conn *c, uint32_t itt);
	void (*stamp)(struct dmv_conn *c, uint8_t *bhs);
	void (*reject)(struct dmv_conn *c, const uint8_t *bhs, uint8_t reason);
	void (*lost)(struct dmv_conn *c, int err);
};

struct dmv_portal_conf {
	const char *name;
	const char *address;		/* numeric IPv4/IPv6, "" or "0.0.0.0": any */
	uint16_t port;
	/* The gateway's loops (issue 13): the listener stays on loop 0, the loop it is given; a
	 * new connection is placed on loops->loop[gw_loops_pick(loops)] and counted in
	 * loops->load until it closes. NULL, or one loop: every connection on the listener's
	 * loop, as before. */
	struct gw_loops *loops;
	/* With loops: pools[i] is loop i's PDU pool, for the connections placed there (NULL: the
	 * listener's pool, only right for loop 0). */
	struct pdu_pool *pools[GW_LOOPS_MAX];
	/* With loops: a connection that sends no first PDU within this is closed (0: 30 s). */
	uint32_t place_timeout_ms;
};

/* One transport: a const ops table. */
struct dmv_transport {
	const char *name;		/* "tcp", "iser": for logs and the config */
	unsigned int caps;		/* DMV_CAP_* */
	int (*listen)(struct gw_loop *loop, const struct dmv_portal_conf *conf,
		      struct pdu_pool *pool, struct dmv_portal **out);
	void (*portal_destroy)(struct dmv_portal *p);
	/* Optional (NULL: nothing to do, as for TCP, whose sockets follow the address): the
	 * portal's address moved to another port under it (a bond's active slave changed).
	 * Listens again at once; with close_conns also drops every connection now, so
	 * initiators reconnect without waiting for their own timeouts. Returns the number of
	 * connections dropped. */
	int (*rehome)(struct dmv_portal *p, bool close_conns);
	int (*send_pdu)(struct dmv_conn *c, struct pdu *pdu);
	int (*put_data)(struct dmv_task *t, uint32_t len, struct pdu *rsp);
	int (*get_data)(struct dmv_task *t);
	void (*task_abort)(struct dmv_task *t);
	/* Called by the shared Data-Out code when a solicited sequence finished: room for more. */
	void (*solicit)(struct dmv_task *t);
	int (*set_params)(struct dmv_conn *c, const struct dmv_conn_params *p);
	void (*close)(struct dmv_conn *c);
	/*
	 * Optional (NULL: the iSCSI layer allocates task buffers itself): registered memory for a
	 * task of len bytes, so data moves between the wire and the backstore without a copy.
	 * NULL when nothing fits or the pool is short; *handle goes to buf_put, once, when the
	 * task is freed, which may be after its connection is gone: the memory stays valid (and
	 * registered) until then. The iSCSI layer stores the handle in dmv_task.buf_handle.
	 */
	void *(*buf_get)(struct dmv_conn *c, uint32_t len, void **handle);
	void (*buf_put)(void *handle);
	/* Largest data segment the transport can receive in one PDU after login (0: no limit of
	 * its own). iSER posts fixed-size receive buffers, so it declares no more than this. */
	uint32_t max_recv_dsl;
	/* Requests (commands and immediate PDUs) a connection can have arrived and unanswered at
	 * once (0: no limit of its own). iSER has a fixed number of receive buffers posted, so
	 * the iSCSI layer keeps the command window within it (RFC 7145 §6.6's point). */
	uint32_t max_unexpected;
};

/* What a portal's connections hold, for the status listing: a leak shows as a count that does
 * not return to zero once the connections are gone. TCP has nothing to report here. */
struct dmv_portal_res {
	uint32_t conns;			/* connections accepted and not yet freed */
	uint32_t qps;			/* RDMA queue pairs */
	uint32_t mrs;			/* registered memory regions */
	uint32_t bufs;			/* registered data buffers (chunks) */
	uint32_t bufs_in_use;
	uint64_t reg_bytes;		/* bytes of registered memory */
	uint64_t rdma_writes, rdma_reads;	/* RDMA operations completed */
	uint32_t bufs_lent;		/* of bufs_in_use: task buffers handed out by buf_get */
	uint64_t zcopy_ops, staged_ops;	/* RDMA operations posted on the task buffer itself,
					 * or staged through a chunk with a copy */
};

struct dmv_portal {
	const struct dmv_transport *tp;
	struct gw_loop *loop;
	struct pdu_pool *pool;
	char name[64];
	char addr[80];			/* "127.0.0.1:3260" as bound */
	/* False while a transport that retries by itself (iSER without an RDMA device yet) is not
	 * bound; such a portal is not advertised. It logs when it starts listening. */
	bool listening;
	struct dmv_portal_res res;
	/* Set by the owner after listen: a new connection arrived. The owner sets c->cb and
	 * c->priv before returning, or closes c. */
	void (*accept)(struct dmv_portal *p, struct dmv_conn *c);
	/*
	 * Optional, with several loops (dmv_portal_conf.loops): where a new connection goes. TCP
	 * reads a connection's first PDU on the listener's loop and calls this there with it;
	 * the answer is a loop index (a login naming a session: the session's loop), or < 0 for
	 * the least-loaded loop. The connection then moves to that loop, and accept(), then the
	 * connection's rx_pdu() with that first PDU, run on it, as if it had just arrived there.
	 * NULL: the least-loaded loop.
	 */
	int (*place)(struct dmv_portal *p, const struct pdu *first);
	/*
	 * Optional, with placement: the owner's limits before a connection waits for its first
	 * PDU. admit() runs on the listener's loop at accept: 0, and the connection is the
	 * owner's to count from then on (accept() gets it with c->admitted set); < 0, and it is
	 * closed at once. unadmit() (any loop; the owner counts atomically): an admitted
	 * connection closed before accept() (timed_out: no first PDU within place_timeout_ms).
	 * Not called for a connection whose portal was destroyed meanwhile.
	 */
	int (*admit)(struct dmv_portal *p, struct dmv_conn *c);
	void (*unadmit)(struct dmv_portal *p, bool timed_out);
	void *priv;
};

struct dmv_conn {
	const struct dmv_transport *tp;
	struct dmv_portal *portal;
	struct gw_loop *loop;
	struct pdu_pool *pool;
	const struct dmv_conn_cb *cb;
	void *priv;			/* the iSCSI layer's connection */
	struct dmv_conn_params params;
	char peer[80];			/* "addr:port" of the initiator */
	char local[80];
	uint32_t next_ttt;
	bool closed;			/* dmv_conn_close called */
	bool admitted;			/* counted by the portal's admit() before accept() */
	bool lost;			/* lost up-call made */
	/* counters */
	uint64_t rx_pdus, tx_pdus, rx_bytes, tx_bytes;
};

/* Transports by name ("tcp"); NULL if unknown. */
const struct dmv_transport *dmv_transport_find(const char *name);

/* Listens on a portal: 0, -EPROTONOSUPPORT (no such transport in this build, not logged) or
 * the -errno of socket/bind/listen (logged). A transport may return 0 with a portal that is not
 * listening yet (p->listening false): it keeps trying on its own. */
int dmv_listen(const char *transport, struct gw_loop *loop, const struct dmv_portal_conf *conf,
	       struct pdu_pool *pool, struct dmv_portal **out);

static inline void dmv_portal_destroy(struct dmv_portal *p)
{
	p->tp->portal_destroy(p);
}

static inline int dmv_portal_rehome(struct dmv_portal *p, bool close_conns)
{
	return p->tp->rehome ? p->tp->rehome(p, close_conns) : -EOPNOTSUPP;
}

static inline int dmv_send_pdu(struct dmv_conn *c, struct pdu *pdu)
{
	return c->tp->send_pdu(c, pdu);
}

static inline int dmv_put_data(struct dmv_task *t, uint32_t len, struct pdu *rsp)
{
	return t->conn->tp->put_data(t, len, rsp);
}

static inline int dmv_get_data(struct dmv_task *t)
{
	return t->conn->tp->get_data(t);
}

static inline void dmv_task_abort(struct dmv_task *t)
{
	t->conn->tp->task_abort(t);
}

static inline int dmv_conn_set_params(struct dmv_conn *c, const struct dmv_conn_params *p)
{
	return c->tp->set_params(c, p);
}

static inline void dmv_conn_close(struct dmv_conn *c)
{
	c->tp->close(c);
}

/* Shared task helpers (dmv_core.c) */

/* Resets the private part of t for a new command on connection c. */
void dmv_task_init(struct dmv_task *t, struct dmv_conn *c, uint32_t itt, const uint8_t lun[8]);
/*
 * A write command arrived with imm_len bytes of immediate data (already in buf). unsol_end is
 * where unsolicited data ends: imm_len when InitialR2T=Yes or the command had F set, else
 * min(FirstBurstLength, len). Unsolicited Data-Out may arrive from now on.
 */
void dmv_task_init_write(struct dmv_task *t, uint32_t imm_len, uint32_t unsol_end);

enum {
	DMV_DO_OK = 0,		/* *dst is where the data goes */
	DMV_DO_DISCARD = 1,	/* read and drop the data (a Reject may have been sent) */
};

/* Where a Data-Out's data goes: DMV_DO_OK or DMV_DO_DISCARD (unknown task, or a sequence error,
 * which fails the task: its Get_Data completes with -EPROTO). <0: drop the connection. */
int dmv_dataout_begin(struct dmv_conn *c, const uint8_t *bhs, struct dmv_task **task,
		      uint8_t **dst);
/* A Data-Out accepted by dmv_dataout_begin arrived with a wrong data digest (RFC 7143 §7.8):
 * it is rejected (reason 0x02) and its data discarded; at ErrorRecoveryLevel 0 there is no
 * recovery R2T, so the task completes with -EBADMSG once its whole sequence is in. */
int dmv_dataout_bad_digest(struct dmv_conn *c, struct dmv_task *t, const uint8_t *bhs);
/* The data of a Data-Out accepted by dmv_dataout_begin is in. Completes the Get_Data when the
 * buffer is full (or with -EPROTO when the F bit came at the wrong place). 0, or <0: drop the
 * connection. */
int dmv_dataout_end(struct dmv_conn *c, struct dmv_task *t, const uint8_t *bhs);
/* Called by transports' get_data: completes at once (deferred) when all data is in. */
void dmv_task_get_start(struct dmv_task *t);
/* Frees R2T slots and cancels the deferred completion. */
void dmv_task_forget(struct dmv_task *t);
/*
 * The next R2T a task needs (TCP), built and stamped, its slot in t->r2t taken: NULL when none
 * is due (all data solicited, the MaxOutstandingR2T window full, the task not getting data) or
 * when the PDU pool is empty (then *nopdu, if given, is set).
 */
struct pdu *dmv_r2t_next(struct dmv_task *t, bool *nopdu);
/* A TTT for this connection (never 0xffffffff). */
uint32_t dmv_conn_next_ttt(struct dmv_conn *c);

/* The TCP transport's table (dmv_tcp.c). */
extern const struct dmv_transport dmv_tcp_transport;
/* The iSER transport's table (dmv_iser.c). */
extern const struct dmv_transport dmv_iser_transport;

#endif
