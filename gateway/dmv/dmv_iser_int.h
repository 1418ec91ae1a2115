/* SPDX-License-Identifier: MIT */
/*
 * The iSER datamover's own objects, shared by its files: dmv_iser.c (connections, send and
 * receive, data transfers, the listener) and dmv_iser_pool.c (per-device protection domain and
 * registered chunk pool, task buffers lent from it). Not for the rest of the gateway, which
 * sees the datamover through dmv.h only.
 */
#ifndef DMV_ISER_INT_H
#define DMV_ISER_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "dmv.h"
#include "dmv_iser.h"
#include "gw_loop.h"

#define ISER_RX_DSL	8192		/* largest data segment received after login */
#define ISER_AHS_MAX	1020
#define ISER_SLOT_LEN	(ISER_HDR_LEN + ISC_BHS_LEN + ISER_AHS_MAX + ISER_RX_DSL + 4)
#define ISER_NRX	160		/* receive slots posted per connection */
#define ISER_RX_SPARE	16		/* of them, kept for immediate PDUs outside the window */
#define ISER_NTX	64		/* send slots per connection */
#define ISER_CHUNK	(256u * 1024)	/* registered data chunk: one RDMA Read/Write at most */
#define ISER_CHUNKS_PER_CONN	48	/* the device pool grows by this per connection */
#define ISER_CHUNKS_RESERVE	16	/* never lent as task buffers: staging always progresses */
#define ISER_RUN_MAX	16		/* chunks lent as one task buffer: commands up to 4 MiB */
#define ISER_RDMA_MAX	32		/* RDMA Writes + Reads in flight per connection */
#define ISER_READS_MAX	16		/* cap on RDMA Reads in flight, whatever was negotiated */
#define ISER_SQ_DEPTH	(ISER_NTX + ISER_RDMA_MAX + 4)
#define ISER_CQ_DEPTH	(ISER_SQ_DEPTH + ISER_NRX + 4)
#define ISER_RETRY_MS	2000		/* listener retry while no RDMA device has the address */
#define ISER_DRAIN_MS	10000		/* give up waiting for flushed completions after this */

enum iser_wr_kind { WR_RX = 1, WR_TX, WR_RDMA };

struct iser_wr {
	uint8_t kind;
};

struct iser_rx {
	struct iser_wr wr;
	uint8_t *buf;
};

struct iser_tx {
	struct iser_wr wr;
	struct gw_list node;		/* free list */
	uint8_t *buf;
	struct pdu *pdu;		/* NULL: a raw iSER message (HelloReply) or dropped */
};

struct iser_conn;
struct iser_xfer;
struct iser_dev;

struct iser_slab;

struct iser_chunk {
	struct iser_wr wr;
	struct gw_list node;		/* the device's free list */
	struct iser_dev *dev;
	struct iser_slab *slab;		/* its registration; chunks of a slab are adjacent */
	uint8_t *mem;
	uint32_t lkey;
	bool free;			/* on the free list */
	bool lent;			/* a task's buffer (buf_get) until buf_put */
	uint8_t run;			/* first chunk of a task buffer: the chunks it spans */
	bool zc_busy;			/* an RDMA operation on it as a task buffer is in flight */
	struct iser_xfer *x;		/* transfer it serves while in flight */
	uint32_t off, len;		/* task buffer range */
};

struct iser_slab {
	struct gw_list node;
	void *mem;
	size_t len;
	struct ibv_mr *mr;
	struct iser_chunk *chunks;
	uint32_t n;
};

struct iser_portal;

/* One RDMA device as a portal sees it: protection domain and data chunk pool. */
struct iser_dev {
	struct gw_list node;		/* portal's devs (self-linked once the portal is gone) */
	struct ibv_context *verbs;
	struct ibv_pd *pd;
	struct ibv_device_attr attr;
	int refs;			/* connections */
	uint32_t lent;			/* chunks lent as task buffers: keep the device alive */
	struct gw_list slabs;
	struct gw_list free_chunks;
	uint32_t nchunks, nfree;
	struct gw_list waiters;		/* connections waiting for a chunk */
	struct dmv_portal_res *res;	/* the portal's counters, or own_res once it is gone */
	struct dmv_portal_res own_res;
};

/* One Put_Data or Get_Data in progress: task range [next, end) still to post. */
struct iser_xfer {
	struct gw_list cnode;		/* connection's xfers */
	struct gw_list wnode;		/* connection's wait queue */
	bool waiting;
	struct iser_conn *ic;
	struct dmv_task *t;		/* NULL once the task is done, aborted or the conn closed */
	void (*task_done)(struct dmv_task *t, int status);	/* the iSCSI layer's */
	bool read;			/* RDMA Read (Get_Data) rather than Write (Put_Data) */
	uint32_t stag;
	uint64_t va;			/* remote address of task offset `base` */
	uint32_t base;
	uint32_t next, end;
	uint32_t inflight;
	struct pdu *rsp;		/* Put_Data: the status, sent after the last Write */
	bool rsp_pending;		/* rsp posted, its completion not seen */
};

enum iser_conn_state {
	IC_PENDING,			/* accepted at the CM level, not yet ESTABLISHED */
	IC_UP,
	IC_DRAINING,			/* closed: waiting for flushed completions */
	IC_DEAD,			/* verbs objects gone, memory freed after the loop round */
};

struct iser_conn {
	struct dmv_conn base;
	enum iser_conn_state state;
	struct iser_portal *ip;		/* until closed (or the portal is gone) */
	struct gw_list pnode;		/* portal's pending list, then its up list */
	struct iser_dev *dev;
	struct rdma_cm_id *id;
	struct rdma_event_channel *ev_ch;
	struct gw_watch ev_w;
	struct ibv_comp_channel *comp_ch;
	struct gw_watch comp_w;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct gw_timer drain_timer;
	bool drain_timer_on;
	struct gw_close cl;
	struct gw_defer kick;
	/* Send work requests of this loop round, posted together at its end (iser_post_flush) */
	struct ibv_send_wr pend_wr[ISER_SQ_DEPTH];
	struct ibv_sge pend_sge[ISER_SQ_DEPTH];
	uint32_t npend;
	struct gw_defer post_defer;
	bool post_failed;
	bool in_poll;
	bool linger;			/* closed: disconnect once the sends in flight are out */
	bool use_send_inv;
	uint32_t tx_busy;		/* send slots posted */
	uint32_t posted;		/* work requests posted and not yet completed */
	uint32_t rdma_inflight, reads_inflight, max_reads;
	/* buffers */
	uint8_t *rx_mem, *tx_mem;
	struct ibv_mr *rx_mr, *tx_mr;
	struct iser_rx rx[ISER_NRX];
	struct iser_tx tx[ISER_NTX];
	struct gw_list tx_free;
	struct gw_list txq;		/* PDUs waiting for a send slot */
	struct gw_list xfers;
	struct gw_list waitq;		/* xfers waiting for a chunk or RDMA credit */
	struct gw_list dnode;		/* dev's waiters */
	struct dmv_iser_tags tags;
	/* Its loop: ip->pl[li], counted in loops->load[li] while it lives (loops: NULL for one) */
	unsigned li;
	struct gw_loops *loops;
	struct gw_msg hand;		/* the CONNECT_REQUEST handed from the listener's loop */
	struct rdma_conn_param hand_req;
	struct dmv_iser_cm_info hand_ci;
};

/*
 * The portal's objects on one of the gateway's loops, touched by that loop's thread only
 * (loop 0, the listener's, included): its devices (protection domain and chunk pool per device),
 * its connections not yet established and established. Loop 0's counters are the portal's own
 * (base.res); another loop's are its own_res.
 */
struct iser_ploop {
	struct gw_loop *loop;
	struct gw_list devs;
	struct gw_list pending;
	struct gw_list up;		/* established connections, for a re-home */
	struct dmv_portal_res *res;
	struct dmv_portal_res own_res;
};

struct iser_portal {
	struct dmv_portal base;
	struct sockaddr_storage ss;
	char host[64];
	struct rdma_event_channel *ch;
	struct gw_watch w;
	struct rdma_cm_id *listen_id;
	struct gw_timer retry;
	char last_err[160];
	/* Connections go to loops->loop[gw_loops_pick(loops)] (NULL: all on the listener's) */
	struct gw_loops *loops;
	unsigned nloops;		/* pl[0 .. nloops) */
	/* pools[i]: loop i's PDU pool for the connections placed there (NULL: base.pool) */
	struct pdu_pool *pools[GW_LOOPS_MAX];
	struct iser_ploop pl[GW_LOOPS_MAX];
};

/* dmv_iser_pool.c */
/* The portal's device for verbs on its loop li, with room in its pool for one more connection.
 * On that loop's thread. */
int dmv_iser_dev_get(struct iser_portal *ip, unsigned li, struct ibv_context *verbs,
		     struct iser_dev **out);
/* A connection let go of d: freed with its last connection and lent chunk. */
void dmv_iser_dev_put(struct iser_dev *d);
/* A chunk for staging, or NULL when the pool is dry. */
struct iser_chunk *dmv_iser_chunk_get(struct iser_dev *d);
/* Back to the pool; connections waiting for one are kicked. */
void dmv_iser_chunk_put(struct iser_dev *d, struct iser_chunk *ch);
/* dmv_transport.buf_get / buf_put: task buffers lent from the pool. */
void *dmv_iser_buf_get(struct dmv_conn *c, uint32_t len, void **handle);
void dmv_iser_buf_put(void *handle);
/* The zero-copy operation on a lent chunk completed. */
void dmv_iser_zc_done(struct iser_chunk *ch);

#endif
