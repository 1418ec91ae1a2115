// SPDX-License-Identifier: MIT
/*
 * The iSER datamover (RFC 7145): iSCSI control PDUs in RDMA Sends, Put_Data as RDMA Writes to
 * the initiator's read buffer, Get_Data as RDMA Reads from its write buffer. rdma_cm and verbs
 * sit in the gateway's event loops: the listener's rdma_cm event channel on loop 0, and per
 * connection its own event channel (the id is migrated off the listener's) and completion
 * channel, all non-blocking, on the loop the connect request was handed to (the least loaded
 * of the portal's loops, dmv_portal_conf.loops), with that loop's device pool; nothing of a
 * connection is touched by another loop's thread.
 *
 * The wire formats and the STag table live in dmv_iser_wire.c, the per-device chunk pool and
 * the task buffers lent from it in dmv_iser_pool.c, letting go of a removed device in
 * dmv_iser_ctx.c; the objects they share are in dmv_iser_int.h.
 *
 * Memory: nothing is registered on the I/O path. Each connection registers its receive and send
 * buffers when it is accepted (fixed-size slots: iSER header + BHS + AHS + an 8 KiB data
 * segment); each RDMA device (per portal) has one protection domain and a pool of registered
 * data chunks shared by its connections, grown when a connection arrives. A command gets a
 * chunk, or a run of adjacent chunks of one slab (up to ISER_RUN_MAX), as its task buffer
 * (buf_get: the iSCSI layer and the backstore work in registered memory), and its RDMA Writes or
 * Reads run on it in place, one per chunk, without a copy. Larger commands, and any command when
 * the pool cannot spare the chunks, keep a plain buffer and are staged through chunks with a
 * copy, so any transfer up to the largest the iSCSI layer accepts moves in chunk-sized RDMA
 * operations. At most ISER_RDMA_MAX operations are in flight per
 * connection, RDMA Reads within the negotiated initiator depth. A lent chunk keeps its device's
 * registration alive until the task gives it back, even after its connection is gone.
 *
 * Teardown drains: the QP goes to the error state, every posted work request completes (flushed)
 * and only then are the QP, CQ, channels and memory released, so no completion ever lands in
 * freed memory. The portal's resource counters (dmv_portal_res) make a leak visible. After a
 * DEVICE_REMOVAL, the device's context is let go once nothing uses it (dmv_iser_ctx.c), so the
 * kernel can finish removing it and the listener finds it again when it comes back.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "dmv.h"
#include "dmv_iser.h"
#include "dmv_iser_ctx.h"
#include "dmv_iser_int.h"
#include "gw_log.h"

static void iser_conn_lost(struct iser_conn *ic, int err);
static void iser_kick(struct iser_conn *ic);
static void iser_tx_flush(struct iser_conn *ic);
static void iser_drain_check(struct iser_conn *ic);
static void iser_disconnect(struct iser_conn *ic);

static int iser_set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

static const char *iser_sa_str(const struct sockaddr *sa, char *buf, size_t len)
{
	char host[64] = "?";

	if (!sa) {
		snprintf(buf, len, "?");
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const void *)sa;

		inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, ntohs(s6->sin6_port));
	} else {
		const struct sockaddr_in *s4 = (const void *)sa;

		inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ntohs(s4->sin_port));
	}
	return buf;
}

/* ---------------------------------------------------------------------------------------- */
/* Send side */

static void iser_wc(struct iser_conn *ic, const struct ibv_wc *wc);

/*
 * Send work requests (Sends, RDMA Writes and Reads) are collected during a loop round and
 * posted together when it ends: one ibv_post_send for all of them, which is one system call
 * with Soft-RoCE and one doorbell with hardware, where posting each alone cost one per request
 * (two per 4 KiB read: its RDMA Write and its status). Order is kept, so a status still goes
 * behind its data. What the provider refuses completes here as flushed, so its send slot and
 * chunks come back, and the connection is lost.
 */
static void iser_post_flush(struct iser_conn *ic)
{
	struct ibv_send_wr *bad = NULL;
	uint32_t n = ic->npend, i;
	int r;

	gw_defer_cancel(&ic->post_defer);
	if (!n)
		return;
	ic->npend = 0;
	r = ibv_post_send(ic->qp, ic->pend_wr, &bad);
	if (!r)
		return;
	gw_err_rl("dmv", "%s: ibv_post_send: %s", ic->base.peer, strerror(r));
	ic->post_failed = true;
	ic->in_poll = true;		/* no teardown while the refused ones complete */
	for (i = bad ? (uint32_t)(bad - ic->pend_wr) : 0; i < n; i++) {
		struct ibv_wc wc = { .wr_id = ic->pend_wr[i].wr_id,
				     .status = IBV_WC_WR_FLUSH_ERR };

		iser_wc(ic, &wc);
	}
	ic->in_poll = false;
	/* Closing the connection polls the CQ and checks the drain itself; so does iser_close,
	 * which may be what called this (through iser_disconnect). */
	iser_conn_lost(ic, -EIO);
}

static void iser_post_deferred(struct gw_defer *d)
{
	iser_post_flush(gw_container_of(d, struct iser_conn, post_defer));
}

/* Queues one work request (one scatter entry) for the end of the round. */
static int iser_post_send(struct iser_conn *ic, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *p;

	if (ic->post_failed || !ic->qp || wr->num_sge != 1)
		return -EIO;
	if (ic->npend == ISER_SQ_DEPTH)
		iser_post_flush(ic);	/* not reached: the send queue holds no more */
	if (ic->post_failed)
		return -EIO;
	p = &ic->pend_wr[ic->npend];
	*p = *wr;
	ic->pend_sge[ic->npend] = wr->sg_list[0];
	p->sg_list = &ic->pend_sge[ic->npend];
	p->next = NULL;
	if (ic->npend)
		ic->pend_wr[ic->npend - 1].next = p;
	else
		gw_defer_queue(ic->base.loop, &ic->post_defer);
	ic->npend++;
	ic->posted++;
	return 0;
}

static void iser_pdu_finish(struct pdu *pdu, int status)
{
	if (pdu->done)
		pdu->done(pdu, status);
	pdu_put(pdu);
}

/* Copies pdu into a send slot behind an iSER header and posts it. */
static int iser_tx_post(struct iser_conn *ic, struct iser_tx *tx, struct pdu *pdu)
{
	struct ibv_sge sge;
	struct ibv_send_wr wr;
	uint8_t *p = tx->buf;
	uint32_t len = ISER_HDR_LEN + ISC_BHS_LEN + pdu->ahs_len + pdu->data_len;
	struct dmv_iser_tag *tag = NULL;

	if (len > ISER_SLOT_LEN) {
		gw_err_rl("dmv", "%s: %s with a %u-byte data segment does not fit a send buffer",
			  ic->base.peer, pdu_opcode_name(pdu_bhs_opcode(pdu->bhs)),
			  pdu->data_len);
		return -EMSGSIZE;
	}
	dmv_iser_hdr_build_ctrl(p);
	memcpy(p + ISER_HDR_LEN, pdu->bhs, ISC_BHS_LEN);
	if (pdu->ahs_len)
		memcpy(p + ISER_HDR_LEN + ISC_BHS_LEN, pdu->ahs, pdu->ahs_len);
	if (pdu->data_len)
		memcpy(p + ISER_HDR_LEN + ISC_BHS_LEN + pdu->ahs_len, pdu->data, pdu->data_len);
	memset(&wr, 0, sizeof(wr));
	sge.addr = (uintptr_t)p;
	sge.length = len;
	sge.lkey = ic->tx_mr->lkey;
	wr.wr_id = (uintptr_t)&tx->wr;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (pdu_bhs_opcode(pdu->bhs) == ISC_OP_SCSI_RSP) {
		/* The command is over: its STags go, and with Send with Invalidate the
		 * initiator's registration of them too (RFC 7145 §7.3.4). */
		tag = dmv_iser_tag_find(&ic->tags, pdu_bhs_itt(pdu->bhs));
		if (tag && ic->use_send_inv && (tag->rsv || tag->wsv)) {
			wr.opcode = IBV_WR_SEND_WITH_INV;
			wr.invalidate_rkey = tag->rsv ? tag->read_stag : tag->write_stag;
		}
	}
	if (iser_post_send(ic, &wr))
		return -EIO;
	ic->tx_busy++;
	if (tag)
		dmv_iser_tag_del(&ic->tags, tag->itt);
	tx->pdu = pdu;
	ic->base.tx_bytes += len;
	return 0;
}

static void iser_tx_flush(struct iser_conn *ic)
{
	while (!gw_list_empty(&ic->txq) && !gw_list_empty(&ic->tx_free) &&
	       ic->state == IC_UP && !ic->base.lost) {
		struct pdu *pdu = gw_list_first_entry(&ic->txq, struct pdu, node);
		struct iser_tx *tx = gw_list_first_entry(&ic->tx_free, struct iser_tx, node);
		int r;

		gw_list_del(&pdu->node);
		r = iser_tx_post(ic, tx, pdu);
		if (r == -EMSGSIZE) {
			iser_pdu_finish(pdu, r);
			continue;
		}
		if (r) {
			iser_pdu_finish(pdu, -ECONNRESET);
			iser_conn_lost(ic, r);
			return;
		}
		gw_list_del(&tx->node);
	}
}

static int iser_queue(struct iser_conn *ic, struct pdu *pdu)
{
	if (ic->base.closed || ic->base.lost) {
		pdu_put(pdu);
		return -ECONNRESET;
	}
	gw_list_add_tail(&ic->txq, &pdu->node);
	iser_tx_flush(ic);
	return 0;
}

static int iser_send_pdu(struct dmv_conn *c, struct pdu *pdu)
{
	return iser_queue(gw_container_of(c, struct iser_conn, base), pdu);
}

static void iser_send_hello_reply(struct iser_conn *ic, const struct dmv_iser_hdr *hello)
{
	struct iser_tx *tx;
	struct ibv_sge sge;
	struct ibv_send_wr wr;

	if (gw_list_empty(&ic->tx_free)) {
		gw_warn_rl("dmv", "%s: no send buffer for a HelloReply", ic->base.peer);
		return;
	}
	tx = gw_list_first_entry(&ic->tx_free, struct iser_tx, node);
	dmv_iser_hdr_build_hello_reply(tx->buf, hello, (uint16_t)ic->max_reads);
	memset(&wr, 0, sizeof(wr));
	sge.addr = (uintptr_t)tx->buf;
	sge.length = ISER_HDR_LEN;
	sge.lkey = ic->tx_mr->lkey;
	wr.wr_id = (uintptr_t)&tx->wr;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (iser_post_send(ic, &wr)) {
		iser_conn_lost(ic, -EIO);
		return;
	}
	gw_list_del(&tx->node);
	tx->pdu = NULL;
	ic->tx_busy++;
}

/* ---------------------------------------------------------------------------------------- */
/* Data: RDMA Writes (Put_Data) and Reads (Get_Data), in place on a lent chunk or staged */

static void iser_xfer_maybe_free(struct iser_xfer *x)
{
	if (x->t || x->inflight || x->rsp_pending || x->waiting)
		return;
	if (x->rsp)
		pdu_put(x->rsp);
	gw_list_del(&x->cnode);
	free(x);
}

/* The task no longer belongs to this transfer (done, aborted, connection closed). */
static void iser_xfer_detach(struct iser_xfer *x)
{
	if (x->t) {
		x->t->done = x->task_done;
		x->t->tp_priv = NULL;
		x->t = NULL;
	}
	if (x->waiting) {
		gw_list_del(&x->wnode);
		x->waiting = false;
	}
	iser_xfer_maybe_free(x);
}

/* Every task completion goes through here so the transfer lets go of the task first. */
static void iser_task_done(struct dmv_task *t, int status)
{
	struct iser_xfer *x = t->tp_priv;
	void (*fn)(struct dmv_task *t, int status) = x->task_done;

	iser_xfer_detach(x);
	fn(t, status);
}

static void iser_put_sent(struct pdu *pdu, int status)
{
	struct iser_xfer *x = pdu->priv;
	struct dmv_task *t = x->t;

	x->rsp_pending = false;
	if (!status && t && t->putting) {
		t->putting = false;
		t->done(t, 0);		/* iser_task_done: detaches and frees x */
		return;
	}
	iser_xfer_maybe_free(x);
}

/* Posts as many chunk operations of x as resources allow. 1: all posted, 0: blocked, <0:
 * the connection failed. */
static int iser_xfer_post(struct iser_conn *ic, struct iser_xfer *x)
{
	while (x->next < x->end) {
		uint32_t n = x->end - x->next;
		struct iser_chunk *ch;
		struct ibv_sge sge;
		struct ibv_send_wr wr;

		struct iser_chunk *own = x->t->buf_handle;
		bool zc;

		if (ic->rdma_inflight >= ISER_RDMA_MAX ||
		    (x->read && ic->reads_inflight >= ic->max_reads))
			return 0;
		/* The task buffer is registered chunks of this device: RDMA on it in place, one
		 * operation per chunk. */
		zc = own && own->lent && own->dev == ic->dev && x->t->buf == own->mem &&
		     x->end <= (uint32_t)own->run * ISER_CHUNK &&
		     !own[x->next / ISER_CHUNK].zc_busy;
		if (zc) {
			uint32_t room = ISER_CHUNK - x->next % ISER_CHUNK;

			ch = &own[x->next / ISER_CHUNK];
			ch->zc_busy = true;
			if (n > room)
				n = room;
		} else {
			ch = dmv_iser_chunk_get(ic->dev);
			if (!ch) {
				if (gw_list_empty(&ic->dnode))
					gw_list_add_tail(&ic->dev->waiters, &ic->dnode);
				return 0;
			}
			if (n > ISER_CHUNK)
				n = ISER_CHUNK;
		}
		ch->x = x;
		ch->off = x->next;
		ch->len = n;
		if (!x->read && !zc)
			memcpy(ch->mem, x->t->buf + x->next, n);
		memset(&wr, 0, sizeof(wr));
		sge.addr = (uintptr_t)(zc ? ch->mem + x->next % ISER_CHUNK : ch->mem);
		sge.length = n;
		sge.lkey = ch->lkey;
		wr.wr_id = (uintptr_t)&ch->wr;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = x->read ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = x->va + (x->next - x->base);
		wr.wr.rdma.rkey = x->stag;
		if (iser_post_send(ic, &wr)) {
			if (zc)
				dmv_iser_zc_done(ch);
			else
				dmv_iser_chunk_put(ic->dev, ch);
			return -EIO;
		}
		if (zc)
			ic->dev->res->zcopy_ops++;
		else
			ic->dev->res->staged_ops++;
		ic->rdma_inflight++;
		if (x->read)
			ic->reads_inflight++;
		x->inflight++;
		x->next += n;
		if (x->read)
			ic->base.rx_bytes += n;
		else
			ic->base.tx_bytes += n;
	}
	/* All Writes are on the send queue: the status Send goes behind them, and RC ordering
	 * places the data before the initiator sees the response. */
	if (!x->read && x->rsp) {
		struct pdu *rsp = x->rsp;

		x->rsp = NULL;
		rsp->done = iser_put_sent;
		rsp->priv = x;
		x->rsp_pending = true;
		iser_queue(ic, rsp);
	}
	return 1;
}

/* Runs the wait queue in order: a transfer that cannot proceed holds up the ones behind it. */
static void iser_kick(struct iser_conn *ic)
{
	while (!gw_list_empty(&ic->waitq) && ic->state == IC_UP && !ic->base.lost) {
		struct iser_xfer *x = gw_list_first_entry(&ic->waitq, struct iser_xfer, wnode);
		int r = iser_xfer_post(ic, x);

		if (r < 0) {
			iser_conn_lost(ic, r);
			return;
		}
		if (!r)
			return;
		gw_list_del(&x->wnode);
		x->waiting = false;
		iser_xfer_maybe_free(x);
	}
}

static void iser_kick_deferred(struct gw_defer *d)
{
	iser_kick(gw_container_of(d, struct iser_conn, kick));
}

static struct iser_xfer *iser_xfer_new(struct iser_conn *ic, struct dmv_task *t, bool read)
{
	struct iser_xfer *x = calloc(1, sizeof(*x));

	if (!x)
		return NULL;
	x->ic = ic;
	x->t = t;
	x->read = read;
	x->task_done = t->done;
	t->done = iser_task_done;
	t->tp_priv = x;
	gw_list_add_tail(&ic->xfers, &x->cnode);
	gw_list_init(&x->wnode);
	return x;
}

static void iser_xfer_start(struct iser_conn *ic, struct iser_xfer *x)
{
	x->waiting = true;
	gw_list_add_tail(&ic->waitq, &x->wnode);
	iser_kick(ic);
}

static int iser_put_data(struct dmv_task *t, uint32_t len, struct pdu *rsp)
{
	struct iser_conn *ic = gw_container_of(t->conn, struct iser_conn, base);
	struct dmv_iser_tag *tag;
	struct iser_xfer *x;

	if (ic->base.closed || ic->base.lost || ic->state != IC_UP) {
		pdu_put(rsp);
		return -ECONNRESET;
	}
	if (len > t->len)
		len = t->len;
	if (!len && !rsp)
		return -EINVAL;
	tag = dmv_iser_tag_find(&ic->tags, t->itt);
	if (len && (!tag || !tag->rsv)) {
		gw_warn_rl("dmv", "%s: ITT 0x%x: %u bytes to send but the command carried no "
			   "read STag", ic->base.peer, t->itt, len);
		pdu_put(rsp);
		return -EPROTO;
	}
	x = iser_xfer_new(ic, t, false);
	if (!x) {
		pdu_put(rsp);
		return -ENOMEM;
	}
	if (tag) {
		x->stag = tag->read_stag;
		x->va = tag->read_va;
	}
	x->end = len;
	x->rsp = rsp;
	t->putting = true;
	if (!rsp)
		gw_warn_rl("dmv", "%s: ITT 0x%x: Put_Data without a status", ic->base.peer, t->itt);
	iser_xfer_start(ic, x);
	return 0;
}

static int iser_get_data(struct dmv_task *t)
{
	struct iser_conn *ic = gw_container_of(t->conn, struct iser_conn, base);
	struct dmv_iser_tag *tag;
	struct iser_xfer *x;

	if (ic->base.closed || ic->base.lost || ic->state != IC_UP)
		return -ECONNRESET;
	if (!t->write)
		return -EINVAL;
	if (t->sol_next >= t->len || t->error) {
		/* Immediate and unsolicited data cover it all: the Data-Out path completes it. */
		dmv_task_get_start(t);
		return 0;
	}
	tag = dmv_iser_tag_find(&ic->tags, t->itt);
	if (!tag || !tag->wsv) {
		gw_warn_rl("dmv", "%s: ITT 0x%x: %u bytes to fetch but the command carried no "
			   "write STag", ic->base.peer, t->itt, t->len - t->sol_next);
		t->error = -EPROTO;
		dmv_task_get_start(t);
		return 0;
	}
	x = iser_xfer_new(ic, t, true);
	if (!x)
		return -ENOMEM;
	x->stag = tag->write_stag;
	/* The write VA addresses the first byte the initiator did not send unsolicited. */
	x->va = tag->write_va;
	x->base = t->unsol_end;
	x->next = t->sol_next;
	x->end = t->len;
	t->sol_next = t->len;
	dmv_task_get_start(t);
	iser_xfer_start(ic, x);
	return 0;
}

static void iser_task_abort(struct dmv_task *t)
{
	struct iser_conn *ic = gw_container_of(t->conn, struct iser_conn, base);
	struct iser_xfer *x = t->tp_priv;
	bool putting = x && !x->read;

	dmv_task_forget(t);
	/* A Put_Data goes on (the buffer stays valid until its done); Reads in flight complete
	 * into nothing. */
	if (x && x->read)
		iser_xfer_detach(x);
	if (!putting)
		dmv_iser_tag_del(&ic->tags, t->itt);
}

/* A chunk's RDMA operation completed (or was flushed). */
static void iser_rdma_done(struct iser_conn *ic, struct iser_chunk *ch, bool ok)
{
	struct iser_xfer *x = ch->x;
	struct dmv_task *t = x->t;
	uint32_t off = ch->off, len = ch->len;
	bool zc = ch->zc_busy;
	bool fire = false;

	ic->rdma_inflight--;
	if (x->read)
		ic->reads_inflight--;
	x->inflight--;
	if (ok) {
		if (x->read) {
			ic->dev->res->rdma_reads++;
			if (t && !zc)
				memcpy(t->buf + off, ch->mem, len);
		} else {
			ic->dev->res->rdma_writes++;
		}
	}
	if (zc)
		dmv_iser_zc_done(ch);
	else
		dmv_iser_chunk_put(ic->dev, ch);
	if (ok && t && x->read) {
		t->received += len;
		if (t->getting && t->received == t->len && !t->nr2t && t->unsol_done) {
			t->getting = false;
			fire = true;
		}
	} else if (ok && t && !x->read && !x->rsp_pending && !x->rsp && !x->inflight &&
		   x->next == x->end && t->putting) {
		t->putting = false;
		fire = true;
	}
	if (fire)
		t->done(t, 0);	/* iser_task_done detaches and frees x */
	else
		iser_xfer_maybe_free(x);
	if (ic->state == IC_UP && !ic->base.lost)
		gw_defer_queue(ic->base.loop, &ic->kick);
}

static int iser_set_params(struct dmv_conn *c, const struct dmv_conn_params *p)
{
	c->params = *p;
	/* Message buffers are fixed, and so are the initiator's (Linux posts 8 KiB during login
	 * and for discovery sessions): no control PDU carries more either way. */
	if (c->params.max_recv_dsl > ISER_RX_DSL)
		c->params.max_recv_dsl = ISER_RX_DSL;
	if (!c->params.max_xmit_dsl || c->params.max_xmit_dsl > ISER_RX_DSL)
		c->params.max_xmit_dsl = ISER_RX_DSL;
	c->params.header_digest = false;
	c->params.data_digest = false;
	return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Receive side */

static int iser_post_recv(struct iser_conn *ic, struct iser_rx *rx)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)rx->buf, .length = ISER_SLOT_LEN, .lkey = ic->rx_mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = (uintptr_t)&rx->wr, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad;
	int r = ibv_post_recv(ic->qp, &wr, &bad);

	if (r) {
		gw_err_rl("dmv", "%s: ibv_post_recv: %s", ic->base.peer, strerror(r));
		return -r;
	}
	ic->posted++;
	return 0;
}

static void iser_record_tags(struct iser_conn *ic, const struct dmv_iser_hdr *h, const uint8_t *bhs)
{
	struct dmv_iser_tag tag = {
		.itt = pdu_bhs_itt(bhs),
		.rsv = h->flags & ISER_RSV, .wsv = h->flags & ISER_WSV,
		.read_stag = h->read_stag, .read_va = h->read_va,
		.write_stag = h->write_stag, .write_va = h->write_va,
	};

	if (!tag.rsv && !tag.wsv) {
		dmv_iser_tag_del(&ic->tags, tag.itt);
		return;
	}
	if (dmv_iser_tag_set(&ic->tags, &tag))
		gw_err_rl("dmv", "%s: ITT 0x%x: no room for its STags (%u commands open)",
			  ic->base.peer, tag.itt, ic->tags.n);
}

/* One received Send. 0, or -errno to drop the connection. */
static int iser_rx_msg(struct iser_conn *ic, const uint8_t *buf, uint32_t n)
{
	struct dmv_iser_msg m;
	const uint8_t *bhs, *ahs, *data;
	uint32_t ahs_len, dsl;
	struct pdu *pdu;

	switch (dmv_iser_msg_parse(buf, n, ic->base.params.max_recv_dsl, &m)) {
	case ISER_MSG_PDU:
		break;
	case ISER_MSG_HELLO:
		iser_send_hello_reply(ic, &m.hdr);
		return 0;
	case ISER_MSG_REJECT:
		ic->base.rx_pdus++;
		ic->base.rx_bytes += n;
		gw_warn_rl("dmv", "%s: rejecting %s (opcode 0x%02x): %s", ic->base.peer,
			   pdu_opcode_name(pdu_bhs_opcode(m.bhs)), pdu_bhs_opcode(m.bhs), m.why);
		ic->base.cb->reject(&ic->base, m.bhs, m.reason);
		return 0;
	case ISER_MSG_NO_HDR:
		gw_warn_rl("dmv", "%s: %u-byte message without an iSER header", ic->base.peer, n);
		return -EPROTO;
	case ISER_MSG_BAD_OPCODE:
		gw_warn_rl("dmv", "%s: iSER opcode 0x%x: dropping the connection", ic->base.peer,
			   m.hdr.opcode);
		return -EPROTO;
	case ISER_MSG_SHORT:
		gw_warn_rl("dmv", "%s: %u-byte iSER message too short for a BHS", ic->base.peer, n);
		return -EPROTO;
	case ISER_MSG_BAD_BHS:
		gw_warn_rl("dmv", "%s: %s (opcode 0x%02x, %u bytes): dropping the connection",
			   ic->base.peer, m.why, pdu_bhs_opcode(m.bhs), pdu_bhs_dsl(m.bhs));
		return -EPROTO;
	case ISER_MSG_OVERRUN:
		gw_warn_rl("dmv", "%s: %s claims %u + %u bytes, the message has %u: dropping the "
			   "connection", ic->base.peer, pdu_opcode_name(pdu_bhs_opcode(m.bhs)),
			   m.ahs_len, m.dsl, n);
		return -EPROTO;
	case ISER_MSG_DATAOUT_AHS:
		gw_warn_rl("dmv", "%s: Data-Out with an AHS: dropping the connection",
			   ic->base.peer);
		return -EPROTO;
	}
	if (m.no_imm)
		gw_warn_rl("dmv", "%s: SCSI Command announces %u bytes of immediate data the "
			   "Send does not carry: fetching them by RDMA Read", ic->base.peer,
			   pdu_bhs_dsl(m.bhs));
	bhs = m.bhs;
	ahs = m.ahs;
	data = m.data;
	ahs_len = m.ahs_len;
	dsl = m.dsl;
	ic->base.rx_pdus++;
	ic->base.rx_bytes += n;
	if (pdu_bhs_opcode(bhs) == ISC_OP_DATA_OUT) {
		struct dmv_task *t;
		uint8_t *dst;
		int r;

		r = dmv_dataout_begin(&ic->base, bhs, &t, &dst);
		if (r < 0)
			return r;
		if (r != DMV_DO_OK || ic->base.closed)
			return 0;
		memcpy(dst, data, dsl);
		return dmv_dataout_end(&ic->base, t, bhs);
	}
	pdu = pdu_get(ic->base.pool);
	if (!pdu)
		return -ENOMEM;
	memcpy(pdu->bhs, bhs, ISC_BHS_LEN);
	if (m.no_imm)
		pdu_put24(pdu->bhs, 5, 0);
	if ((ahs_len && pdu_alloc_ahs(pdu, ahs_len)) ||
	    (dsl && pdu_alloc_data(pdu, dsl))) {
		pdu_put(pdu);
		return -ENOMEM;
	}
	if (ahs_len)
		memcpy(pdu->ahs, ahs, ahs_len);
	if (dsl)
		memcpy(pdu->data, data, dsl);
	if (pdu_bhs_opcode(bhs) == ISC_OP_SCSI_CMD)
		iser_record_tags(ic, &m.hdr, bhs);
	ic->base.cb->rx_pdu(&ic->base, pdu);
	pdu_put(pdu);
	return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Completions */

static void iser_wc(struct iser_conn *ic, const struct ibv_wc *wc)
{
	struct iser_wr *w = (struct iser_wr *)(uintptr_t)wc->wr_id;
	bool ok = wc->status == IBV_WC_SUCCESS;
	bool live = ic->state == IC_UP && !ic->base.lost && !ic->base.closed && !ic->post_failed;

	ic->posted--;
	if (!ok && wc->status != IBV_WC_WR_FLUSH_ERR && live) {
		gw_warn("dmv", "%s: %s completion failed: %s", ic->base.peer,
			w->kind == WR_RX ? "receive" : w->kind == WR_TX ? "send" : "RDMA",
			ibv_wc_status_str(wc->status));
		iser_conn_lost(ic, -EIO);
		live = false;
	}
	switch (w->kind) {
	case WR_RX: {
		struct iser_rx *rx = gw_container_of(w, struct iser_rx, wr);
		int r;

		if (!ok || !live)
			return;
		r = iser_rx_msg(ic, rx->buf, wc->byte_len);
		if (r) {
			iser_conn_lost(ic, r);
			return;
		}
		if (ic->state == IC_UP && !ic->base.lost && !ic->base.closed &&
		    iser_post_recv(ic, rx))
			iser_conn_lost(ic, -EIO);
		return;
	}
	case WR_TX: {
		struct iser_tx *tx = gw_container_of(w, struct iser_tx, wr);
		struct pdu *pdu = tx->pdu;

		tx->pdu = NULL;
		ic->tx_busy--;
		gw_list_add_tail(&ic->tx_free, &tx->node);
		if (ic->linger && !ic->tx_busy)
			iser_disconnect(ic);
		if (pdu) {
			if (ok)
				ic->base.tx_pdus++;
			iser_pdu_finish(pdu, ok ? 0 : -ECONNRESET);
		}
		if (ic->state == IC_UP && !ic->base.lost && !ic->base.closed)
			iser_tx_flush(ic);
		return;
	}
	case WR_RDMA:
		iser_rdma_done(ic, gw_container_of(w, struct iser_chunk, wr), ok);
		return;
	}
}

static void iser_poll(struct iser_conn *ic)
{
	struct ibv_wc wc[16];
	int n, i;

	ic->in_poll = true;
	while (ic->cq && (n = ibv_poll_cq(ic->cq, 16, wc)) > 0)
		for (i = 0; i < n; i++)
			iser_wc(ic, &wc[i]);
	ic->in_poll = false;
	if (ic->state == IC_DRAINING)
		iser_drain_check(ic);
}

static void iser_comp_event(struct gw_watch *w, uint32_t events)
{
	struct iser_conn *ic = gw_container_of(w, struct iser_conn, comp_w);
	struct ibv_cq *cq;
	void *ctx;
	unsigned int nev = 0;

	(void)events;
	if (ic->state == IC_DEAD)
		return;
	/* One notification was armed, so one event at most is waiting: a second read would only
	 * say EAGAIN (a system call per wakeup for nothing). */
	if (ibv_get_cq_event(ic->comp_ch, &cq, &ctx) == 0)
		nev++;
	if (nev)
		ibv_ack_cq_events(ic->cq, nev);
	if (ibv_req_notify_cq(ic->cq, 0))
		gw_err_rl("dmv", "%s: ibv_req_notify_cq failed", ic->base.peer);
	iser_poll(ic);
}

/* ---------------------------------------------------------------------------------------- */
/* Connection life */

static void iser_conn_lost(struct iser_conn *ic, int err)
{
	if (ic->base.lost || ic->base.closed)
		return;
	ic->base.lost = true;
	if (err == -ECONNRESET)
		gw_dbg("dmv", "%s: connection closed by the initiator", ic->base.peer);
	else
		gw_info("dmv", "%s: connection lost: %s", ic->base.peer, strerror(-err));
	if (ic->state == IC_UP && ic->base.cb && ic->base.cb->lost)
		ic->base.cb->lost(&ic->base, err);
	else if (ic->state == IC_PENDING)
		ic->base.tp->close(&ic->base);
}

static void iser_conn_free(struct gw_close *cl)
{
	struct iser_conn *ic = gw_container_of(cl, struct iser_conn, cl);

	free(ic->tags.slot);
	free(ic);
}

/* Every posted work request has completed (or the wait gave up): release verbs objects. */
static void iser_conn_destroy(struct iser_conn *ic)
{
	struct dmv_portal_res *res = ic->dev ? ic->dev->res : NULL;

	if (ic->state == IC_DEAD)
		return;
	ic->state = IC_DEAD;
	if (ic->drain_timer_on) {
		gw_timer_fini(&ic->drain_timer);
		ic->drain_timer_on = false;
	}
	gw_defer_cancel(&ic->kick);
	gw_defer_cancel(&ic->post_defer);
	ic->npend = 0;
	gw_list_del(&ic->dnode);
	if (ic->ip) {
		gw_list_del(&ic->pnode);
		ic->ip = NULL;
	}
	if (ic->comp_w.fd >= 0)
		gw_watch_stop(&ic->comp_w);
	if (ic->ev_w.fd >= 0)
		gw_watch_stop(&ic->ev_w);
	if (ic->qp) {
		rdma_destroy_qp(ic->id);
		ic->qp = NULL;
		if (res)
			res->qps--;
	}
	/* Only after a drain that timed out: their chunks stay counted as in use. */
	if (ic->posted)
		gw_warn("dmv", "%s: %u work requests never completed; releasing anyway",
			ic->base.peer, ic->posted);
	while (!gw_list_empty(&ic->xfers)) {
		struct iser_xfer *x = gw_list_first_entry(&ic->xfers, struct iser_xfer, cnode);

		if (x->rsp)
			pdu_put(x->rsp);
		gw_list_del(&x->cnode);
		free(x);
	}
	if (ic->cq) {
		ibv_destroy_cq(ic->cq);
		ic->cq = NULL;
	}
	if (ic->comp_ch) {
		ibv_destroy_comp_channel(ic->comp_ch);
		ic->comp_ch = NULL;
	}
	if (ic->rx_mr) {
		ibv_dereg_mr(ic->rx_mr);
		res->mrs--;
		res->reg_bytes -= (uint64_t)ISER_NRX * ISER_SLOT_LEN;
	}
	if (ic->tx_mr) {
		ibv_dereg_mr(ic->tx_mr);
		res->mrs--;
		res->reg_bytes -= (uint64_t)ISER_NTX * ISER_SLOT_LEN;
	}
	free(ic->rx_mem);
	free(ic->tx_mem);
	if (ic->id)
		rdma_destroy_id(ic->id);
	if (ic->ev_ch)
		rdma_destroy_event_channel(ic->ev_ch);
	if (res)
		res->conns--;
	if (ic->dev)
		dmv_iser_dev_put(ic->dev);
	if (ic->loops)
		gw_loops_load_add(ic->loops, ic->li, -1);
	gw_loop_close(ic->base.loop, &ic->cl, iser_conn_free);
}

/* Chunks held by operations that will never complete must not stay out of the pool. */
static void iser_drain_check(struct iser_conn *ic)
{
	if (ic->state != IC_DRAINING || ic->in_poll || ic->posted)
		return;
	iser_conn_destroy(ic);
}

static void iser_drain_timeout(struct gw_timer *tm)
{
	struct iser_conn *ic = gw_container_of(tm, struct iser_conn, drain_timer);

	gw_warn("dmv", "%s: %u work requests not flushed after %u s", ic->base.peer, ic->posted,
		ISER_DRAIN_MS / 1000);
	iser_conn_destroy(ic);
}

static void iser_disconnect(struct iser_conn *ic)
{
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_ERR };

	ic->linger = false;
	if (!ic->id || !ic->qp)
		return;
	/* What this round queued goes first; error state then flushes every posted work
	 * request back through the CQ. */
	iser_post_flush(ic);
	rdma_disconnect(ic->id);
	ibv_modify_qp(ic->qp, &qa, IBV_QP_STATE);
}

static void iser_close(struct dmv_conn *c)
{
	struct iser_conn *ic = gw_container_of(c, struct iser_conn, base);
	struct iser_xfer *x, *xt;
	uint32_t i;

	if (c->closed)
		return;
	c->closed = true;
	if (ic->ip) {
		gw_list_del(&ic->pnode);
		ic->ip = NULL;
	}
	gw_defer_cancel(&ic->kick);
	gw_list_del(&ic->dnode);
	/* Tasks are the iSCSI layer's again; what is in flight completes into nothing. */
	gw_list_for_each_entry_safe(x, xt, &ic->xfers, cnode) {
		if (x->rsp) {
			pdu_put(x->rsp);
			x->rsp = NULL;
		}
		iser_xfer_detach(x);
	}
	while (!gw_list_empty(&ic->txq)) {
		struct pdu *pdu = gw_list_first_entry(&ic->txq, struct pdu, node);

		gw_list_del(&pdu->node);
		iser_pdu_finish(pdu, -ECONNRESET);
	}
	for (i = 0; i < ISER_NTX; i++) {
		struct pdu *pdu = ic->tx[i].pdu;

		if (pdu) {
			ic->tx[i].pdu = NULL;
			iser_pdu_finish(pdu, -ECONNRESET);
		}
	}
	ic->state = IC_DRAINING;
	/* A last Send posted just now (a Logout Response, a failed Login's answer) still goes
	 * out: the disconnect waits for it, bounded by the drain timer. */
	if (ic->tx_busy && !c->lost)
		ic->linger = true;
	else
		iser_disconnect(ic);
	if (ic->cq && ic->comp_w.fd >= 0 && !ic->comp_w.events) {
		/* Never established: nothing watches the CQ yet. */
		ibv_req_notify_cq(ic->cq, 0);
		gw_watch_set(&ic->comp_w, EPOLLIN);
	}
	if (gw_timer_init(&ic->drain_timer, c->loop, iser_drain_timeout) == 0) {
		ic->drain_timer_on = true;
		gw_timer_arm(&ic->drain_timer, ISER_DRAIN_MS, 0);
	}
	if (!ic->in_poll)
		iser_poll(ic);
	if (!ic->drain_timer_on)
		iser_drain_check(ic);
}

static void iser_conn_established(struct iser_conn *ic)
{
	struct iser_portal *ip = ic->ip;

	gw_list_del(&ic->pnode);
	gw_list_add_tail(&ip->pl[ic->li].up, &ic->pnode);
	ic->state = IC_UP;
	if (ibv_req_notify_cq(ic->cq, 0) || gw_watch_set(&ic->comp_w, EPOLLIN) < 0) {
		gw_err("dmv", "%s: cannot watch the completion channel", ic->base.peer);
		iser_close(&ic->base);
		return;
	}
	gw_info("dmv", "portal %s: iSER connection from %s%s, %u RDMA Reads in flight",
		ip->base.name, ic->base.peer, ic->use_send_inv ? " (Send with Invalidate)" : "",
		ic->max_reads);
	ip->base.accept(&ip->base, &ic->base);
	if (ic->base.closed)
		return;
	if (!ic->base.cb) {
		iser_close(&ic->base);
		return;
	}
	/* Logins that arrived before ESTABLISHED was seen wait in the CQ. */
	iser_poll(ic);
}

static void iser_conn_cm_event(struct gw_watch *w, uint32_t events)
{
	struct iser_conn *ic = gw_container_of(w, struct iser_conn, ev_w);
	struct rdma_cm_event *ev;

	(void)events;
	while (ic->state != IC_DEAD && rdma_get_cm_event(ic->ev_ch, &ev) == 0) {
		enum rdma_cm_event_type type = ev->event;
		int status = ev->status;

		rdma_ack_cm_event(ev);
		gw_dbg("dmv", "%s: %s", ic->base.peer, rdma_event_str(type));
		if (ic->base.closed)
			continue;
		switch (type) {
		case RDMA_CM_EVENT_ESTABLISHED:
			if (ic->state == IC_PENDING)
				iser_conn_established(ic);
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
		case RDMA_CM_EVENT_TIMEWAIT_EXIT:
			iser_conn_lost(ic, -ECONNRESET);
			break;
		case RDMA_CM_EVENT_CONNECT_ERROR:
		case RDMA_CM_EVENT_UNREACHABLE:
		case RDMA_CM_EVENT_REJECTED:
			gw_info("dmv", "%s: %s (status %d)", ic->base.peer, rdma_event_str(type),
				status);
			iser_conn_lost(ic, -ECONNABORTED);
			break;
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
		case RDMA_CM_EVENT_ADDR_CHANGE:
			gw_warn("dmv", "%s: %s: dropping the connection", ic->base.peer,
				rdma_event_str(type));
			if (type == RDMA_CM_EVENT_DEVICE_REMOVAL)
				dmv_iser_ctx_removed(ic->id ? ic->id->verbs : NULL);
			iser_conn_lost(ic, -ENETDOWN);
			break;
		default:
			break;
		}
	}
}

/*
 * The RDMA Read depths of the accept, from the CONNECT_REQUEST's (rdma_cm gives them from this
 * side's point of view, as isert reads them): the initiator_depth it offers is how many RDMA
 * Reads the initiator will serve at once, so how many the target may have in flight (Linux's
 * iser offers its device's max_qp_rd_atom), and its responder_resources are the Reads it will
 * issue itself (iSER initiators never do; Linux asks for 1). Reading them the other way round
 * held the target to one Read in flight per connection, and a 512 KiB write's two chunks
 * waited for each other. Within the device's limits and ISER_READS_MAX; at least 1.
 */
static void iser_read_depths(const struct rdma_conn_param *req, const struct ibv_device_attr *attr,
			     struct rdma_conn_param *cp)
{
	uint32_t reads = req->initiator_depth, resp = req->responder_resources;

	if (attr->max_qp_init_rd_atom >= 0 && reads > (uint32_t)attr->max_qp_init_rd_atom)
		reads = (uint32_t)attr->max_qp_init_rd_atom;
	if (reads > ISER_READS_MAX)
		reads = ISER_READS_MAX;
	if (!reads)
		reads = 1;
	if (attr->max_qp_rd_atom >= 0 && resp > (uint32_t)attr->max_qp_rd_atom)
		resp = (uint32_t)attr->max_qp_rd_atom;
	cp->initiator_depth = (uint8_t)reads;
	cp->responder_resources = (uint8_t)resp;
}

/* The connection's half on its own loop (after iser_conn_create on the listener's): its device's
 * pool, watches, CQ, QP and buffers, then the accept. 0, or -errno once the id is rejected and
 * the connection destroyed. */
static int iser_conn_setup(struct iser_conn *ic, const struct rdma_conn_param *req,
			   const struct dmv_iser_cm_info *ci)
{
	struct iser_portal *ip = ic->ip;
	struct rdma_cm_id *id = ic->id;
	struct ibv_qp_init_attr qa;
	struct rdma_conn_param cp;
	uint8_t pd_out[ISER_CM_HDR_LEN];
	struct dmv_portal_res *res;
	uint32_t i;
	int r;

	r = dmv_iser_dev_get(ip, ic->li, id->verbs, &ic->dev);
	if (r) {
		r = r == -ENOMEM ? r : -ENODEV;
		goto fail;
	}
	res = ic->dev->res;
	res->conns++;
	/* From here on iser_conn_destroy undoes whatever was set up. */
	gw_watch_init(&ic->ev_w, ic->base.loop, ic->ev_ch->fd, iser_conn_cm_event);
	if (gw_watch_set(&ic->ev_w, EPOLLIN) < 0) {
		r = -EIO;
		goto fail;
	}
	ic->comp_ch = ibv_create_comp_channel(id->verbs);
	if (!ic->comp_ch || iser_set_nonblock(ic->comp_ch->fd)) {
		r = -errno;
		gw_err("dmv", "%s: completion channel: %s", ic->base.peer, strerror(-r));
		goto fail;
	}
	gw_watch_init(&ic->comp_w, ic->base.loop, ic->comp_ch->fd, iser_comp_event);
	ic->cq = ibv_create_cq(id->verbs, ISER_CQ_DEPTH, ic, ic->comp_ch, 0);
	if (!ic->cq) {
		r = -errno;
		gw_err("dmv", "%s: ibv_create_cq: %s", ic->base.peer, strerror(-r));
		goto fail;
	}
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = ic->cq;
	qa.recv_cq = ic->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = ISER_SQ_DEPTH;
	qa.cap.max_recv_wr = ISER_NRX;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	if (rdma_create_qp(id, ic->dev->pd, &qa)) {
		r = -errno;
		gw_err("dmv", "%s: rdma_create_qp: %s", ic->base.peer, strerror(-r));
		goto fail;
	}
	ic->qp = id->qp;
	res->qps++;
	if (posix_memalign((void **)&ic->rx_mem, 4096, (size_t)ISER_NRX * ISER_SLOT_LEN) ||
	    posix_memalign((void **)&ic->tx_mem, 4096, (size_t)ISER_NTX * ISER_SLOT_LEN)) {
		r = -ENOMEM;
		goto fail;
	}
	ic->rx_mr = ibv_reg_mr(ic->dev->pd, ic->rx_mem, (size_t)ISER_NRX * ISER_SLOT_LEN,
			       IBV_ACCESS_LOCAL_WRITE);
	if (ic->rx_mr) {
		res->mrs++;
		res->reg_bytes += (uint64_t)ISER_NRX * ISER_SLOT_LEN;
	}
	ic->tx_mr = ibv_reg_mr(ic->dev->pd, ic->tx_mem, (size_t)ISER_NTX * ISER_SLOT_LEN, 0);
	if (ic->tx_mr) {
		res->mrs++;
		res->reg_bytes += (uint64_t)ISER_NTX * ISER_SLOT_LEN;
	}
	if (!ic->rx_mr || !ic->tx_mr) {
		r = -errno;
		gw_err("dmv", "%s: registering message buffers: %s", ic->base.peer, strerror(-r));
		goto fail;
	}
	for (i = 0; i < ISER_NTX; i++) {
		ic->tx[i].wr.kind = WR_TX;
		ic->tx[i].buf = ic->tx_mem + (size_t)i * ISER_SLOT_LEN;
		gw_list_add_tail(&ic->tx_free, &ic->tx[i].node);
	}
	for (i = 0; i < ISER_NRX; i++) {
		ic->rx[i].wr.kind = WR_RX;
		ic->rx[i].buf = ic->rx_mem + (size_t)i * ISER_SLOT_LEN;
		r = iser_post_recv(ic, &ic->rx[i]);
		if (r)
			goto fail;
	}
	ic->use_send_inv = ci->have_hdr && !ci->send_inv_not_sup;
	dmv_iser_cm_build(pd_out, ic->use_send_inv);
	memset(&cp, 0, sizeof(cp));
	iser_read_depths(req, &ic->dev->attr, &cp);
	ic->max_reads = cp.initiator_depth;
	cp.rnr_retry_count = 7;
	cp.private_data = pd_out;
	cp.private_data_len = sizeof(pd_out);
	if (rdma_accept(id, &cp)) {
		r = -errno;
		gw_warn("dmv", "%s: rdma_accept: %s", ic->base.peer, strerror(-r));
		goto fail;
	}
	gw_list_add_tail(&ip->pl[ic->li].pending, &ic->pnode);
	gw_dbg("dmv", "portal %s: accepted %s on loop %u (ZBVA %s, Send with Invalidate %s, "
	       "%u reads)", ip->base.name, ic->base.peer, ic->li, ci->zbva_not_sup ? "off" : "on",
	       ic->use_send_inv ? "on" : "off", ic->max_reads);
	return 0;
fail:
	/* Refused: the id goes with the connection (before its event channel, to which the id
	 * is attached now). Nothing was accepted, so nothing will complete. */
	rdma_reject(id, NULL, 0);
	ic->ip = NULL;
	ic->posted = 0;
	ic->state = IC_DRAINING;
	ic->base.closed = true;
	iser_conn_destroy(ic);
	return r ? r : -EIO;
}

/* On the connection's loop: the CONNECT_REQUEST the listener's loop handed over. */
static void iser_conn_handed(struct gw_msg *m)
{
	struct iser_conn *ic = gw_container_of(m, struct iser_conn, hand);
	char peer[sizeof(ic->base.peer)];
	int r;

	memcpy(peer, ic->base.peer, sizeof(peer));
	r = iser_conn_setup(ic, &ic->hand_req, &ic->hand_ci);
	if (r)
		gw_warn_rl("dmv", "refused %s: %s", peer, strerror(-r));
}

/*
 * A CONNECT_REQUEST, on the listener's loop: the connection object, its loop (the least loaded
 * of the gateway's), and its own rdma_cm event channel, to which the id is migrated here, so no
 * event of the id lands on the listener's channel after this. The rest is set up on its loop:
 * directly when that is this one, else by a message. Returns 0 (the id is owned by the
 * connection from then on; a failure on the other loop is logged there) or -errno, in which
 * case the id was rejected and destroyed.
 */
static int iser_conn_create(struct iser_portal *ip, struct rdma_cm_id *id,
			    const struct rdma_conn_param *req, const struct dmv_iser_cm_info *ci)
{
	struct iser_conn *ic = calloc(1, sizeof(*ic));
	unsigned li = ip->loops ? gw_loops_pick(ip->loops) : 0;
	int r;

	if (ic)
		ic->tags.slot = calloc(ISER_TAGS, sizeof(*ic->tags.slot));
	if (!ic || !ic->tags.slot) {
		free(ic);
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return -ENOMEM;
	}
	ic->base.tp = &dmv_iser_transport;
	ic->base.portal = &ip->base;
	ic->li = li < ip->nloops ? li : 0;
	ic->base.loop = ip->pl[ic->li].loop;
	/* The PDU pool of the loop it runs on: a pool is touched by one thread only. */
	ic->base.pool = ip->pools[ic->li] ? ip->pools[ic->li] : ip->base.pool;
	ic->base.next_ttt = 1;
	dmv_conn_params_login(&ic->base.params);
	iser_sa_str(rdma_get_peer_addr(id), ic->base.peer, sizeof(ic->base.peer));
	iser_sa_str(rdma_get_local_addr(id), ic->base.local, sizeof(ic->base.local));
	ic->state = IC_PENDING;
	ic->ip = ip;
	gw_list_init(&ic->pnode);
	gw_list_init(&ic->dnode);
	gw_list_init(&ic->tx_free);
	gw_list_init(&ic->txq);
	gw_list_init(&ic->xfers);
	gw_list_init(&ic->waitq);
	gw_defer_init(&ic->kick, iser_kick_deferred);
	gw_defer_init(&ic->post_defer, iser_post_deferred);
	ic->comp_w.fd = -1;
	ic->ev_w.fd = -1;
	ic->ev_ch = rdma_create_event_channel();
	if (!ic->ev_ch || iser_set_nonblock(ic->ev_ch->fd) || rdma_migrate_id(id, ic->ev_ch)) {
		r = errno ? -errno : -EIO;
		gw_err("dmv", "portal %s: %s: rdma event channel: %s", ip->base.name,
		       ic->base.peer, strerror(-r));
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		if (ic->ev_ch)
			rdma_destroy_event_channel(ic->ev_ch);
		free(ic->tags.slot);
		free(ic);
		return r;
	}
	ic->id = id;
	id->context = ic;
	if (ip->loops) {
		ic->loops = ip->loops;
		gw_loops_load_add(ic->loops, ic->li, 1);
	}
	if (ic->li == 0)
		return iser_conn_setup(ic, req, ci);
	ic->hand_req = *req;
	ic->hand_ci = *ci;
	ic->hand.fn = iser_conn_handed;
	r = gw_loop_post(ic->base.loop, &ic->hand);
	if (r) {
		/* The loop is finished (shutting down): nothing ran there. */
		rdma_reject(id, NULL, 0);
		gw_loops_load_add(ic->loops, ic->li, -1);
		rdma_destroy_id(id);
		rdma_destroy_event_channel(ic->ev_ch);
		free(ic->tags.slot);
		free(ic);
	}
	return r;
}

/* ---------------------------------------------------------------------------------------- */
/* The listener */

static void iser_portal_retry(struct gw_timer *tm);
static void iser_portal_cm_event(struct gw_watch *w, uint32_t events);

static void iser_listener_drop(struct iser_portal *ip)
{
	if (ip->listen_id) {
		struct ibv_context *verbs = ip->listen_id->verbs;

		rdma_destroy_id(ip->listen_id);
		ip->listen_id = NULL;
		if (verbs)
			dmv_iser_ctx_drop(verbs);
	}
	ip->base.listening = false;
}

/* One attempt at binding and listening. Logs a failure once per distinct reason. */
static int iser_try_listen(struct iser_portal *ip, bool quiet_success)
{
	struct rdma_cm_id *id = NULL;
	char why[160];
	const char *step;
	int r;

	/* librdmacm cannot even open its event channel while the host has no RDMA device. */
	if (!ip->ch) {
		ip->ch = rdma_create_event_channel();
		if (!ip->ch) {
			step = "rdma_create_event_channel";
			goto fail;
		}
		r = iser_set_nonblock(ip->ch->fd);
		gw_watch_init(&ip->w, ip->base.loop, ip->ch->fd, iser_portal_cm_event);
		if (r || gw_watch_set(&ip->w, EPOLLIN) < 0) {
			gw_err("dmv", "portal %s: cannot watch the rdma_cm event channel",
			       ip->base.name);
			gw_watch_stop(&ip->w);
			rdma_destroy_event_channel(ip->ch);
			ip->ch = NULL;
			errno = EIO;
			step = "rdma_create_event_channel";
			goto fail;
		}
	}
	if (rdma_create_id(ip->ch, &id, ip, RDMA_PS_TCP)) {
		step = "rdma_create_id";
		goto fail;
	}
	if (rdma_bind_addr(id, (struct sockaddr *)&ip->ss)) {
		step = "rdma_bind_addr";
		goto fail;
	}
	if (rdma_listen(id, 128)) {
		step = "rdma_listen";
		goto fail;
	}
	ip->listen_id = id;
	if (id->verbs)
		dmv_iser_ctx_hold(id->verbs);
	ip->base.listening = true;
	iser_sa_str(rdma_get_local_addr(id), ip->base.addr, sizeof(ip->base.addr));
	ip->last_err[0] = 0;
	gw_timer_disarm(&ip->retry);
	if (!quiet_success)
		gw_info("iscsi", "listening on %s (iser)", ip->base.addr);
	return 0;
fail:
	r = errno ? -errno : -EIO;
	if (id)
		rdma_destroy_id(id);
	if (r == -ENODEV || r == -EADDRNOTAVAIL)
		snprintf(why, sizeof(why), "%s: no RDMA device %s%s", step,
			 strcmp(ip->host, "*") ? "on " : "", strcmp(ip->host, "*") ? ip->host : "");
	else
		snprintf(why, sizeof(why), "%s on %s: %s", step, ip->host, strerror(-r));
	if (strcmp(why, ip->last_err)) {
		gw_warn("dmv", "portal %s: iSER not listening (%s); retrying every %u s",
			ip->base.name, why, ISER_RETRY_MS / 1000);
		snprintf(ip->last_err, sizeof(ip->last_err), "%s", why);
	}
	if (gw_timer_arm(&ip->retry, ISER_RETRY_MS, ISER_RETRY_MS))
		gw_err("dmv", "portal %s: cannot arm the retry timer", ip->base.name);
	return r;
}

static void iser_portal_retry(struct gw_timer *tm)
{
	struct iser_portal *ip = gw_container_of(tm, struct iser_portal, retry);

	if (!ip->listen_id)
		iser_try_listen(ip, false);
}

static void iser_connect_request(struct iser_portal *ip, struct rdma_cm_event *ev)
{
	struct rdma_cm_id *id = ev->id;
	struct rdma_conn_param req = ev->param.conn;
	struct dmv_iser_cm_info ci;
	char peer[80];
	int r;

	dmv_iser_cm_parse(ev->param.conn.private_data, ev->param.conn.private_data_len, &ci);
	req.private_data = NULL;
	req.private_data_len = 0;
	/* rdma_migrate_id waits for the id's events to be acknowledged: ack first. */
	rdma_ack_cm_event(ev);
	iser_sa_str(rdma_get_peer_addr(id), peer, sizeof(peer));
	if (!ci.have_hdr)
		gw_warn_rl("dmv", "portal %s: %s sent no iSER CM header; assuming defaults",
			   ip->base.name, peer);
	r = iser_conn_create(ip, id, &req, &ci);
	if (r == -ENOMEM || r == -ENODEV) {
		/* Before anything was set up: the id is still ours to refuse. */
		gw_warn_rl("dmv", "portal %s: refusing %s: %s", ip->base.name, peer, strerror(-r));
	} else if (r) {
		gw_warn_rl("dmv", "portal %s: refused %s: %s", ip->base.name, peer, strerror(-r));
	}
}

static void iser_portal_cm_event(struct gw_watch *w, uint32_t events)
{
	struct iser_portal *ip = gw_container_of(w, struct iser_portal, w);
	struct rdma_cm_event *ev;

	(void)events;
	while (rdma_get_cm_event(ip->ch, &ev) == 0) {
		enum rdma_cm_event_type type = ev->event;

		if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
			iser_connect_request(ip, ev);
			continue;
		}
		if (ev->id == ip->listen_id && (type == RDMA_CM_EVENT_ADDR_CHANGE ||
						type == RDMA_CM_EVENT_DEVICE_REMOVAL)) {
			rdma_ack_cm_event(ev);
			if (type == RDMA_CM_EVENT_DEVICE_REMOVAL)
				dmv_iser_ctx_removed(ip->listen_id->verbs);
			gw_warn("dmv", "portal %s: %s on %s: listening again when the address "
				"has an RDMA device", ip->base.name, rdma_event_str(type),
				ip->base.addr);
			iser_listener_drop(ip);
			iser_try_listen(ip, false);
			continue;
		}
		gw_dbg("dmv", "portal %s: %s", ip->base.name, rdma_event_str(type));
		rdma_ack_cm_event(ev);
	}
}

/* The portal's address moved to another slave of its bond (the network model saw the change of
 * active slave, usually before rdma_cm's ADDR_CHANGE, which stays the backup): bind the
 * listener again now, then, unless the connections can stay on their device, drop each one so
 * its initiator reconnects at once instead of waiting for its own timeouts. */
/* On loop li's thread: drops the portal's connections there. Returns how many. */
struct iser_ploop_arg {
	struct iser_portal *ip;
	unsigned li;
};

static int iser_ploop_drop_conns(void *arg)
{
	struct iser_ploop_arg *a = arg;
	struct iser_ploop *pl = &a->ip->pl[a->li];
	struct iser_conn *ic, *next;
	int n = 0;

	while (!gw_list_empty(&pl->pending)) {
		iser_close(&gw_list_first_entry(&pl->pending, struct iser_conn, pnode)->base);
		n++;
	}
	/* The iSCSI layer's lost up-call may close other connections of the session: look for
	 * the next one from the start each time. */
	for (;;) {
		next = NULL;
		gw_list_for_each_entry(ic, &pl->up, pnode)
			if (!ic->base.closed && !ic->base.lost) {
				next = ic;
				break;
			}
		if (!next)
			break;
		iser_conn_lost(next, -ENETDOWN);
		n++;
	}
	return n;
}

static int iser_rehome(struct dmv_portal *p, bool close_conns)
{
	struct iser_portal *ip = gw_container_of(p, struct iser_portal, base);
	unsigned i;
	int n = 0, r;

	iser_listener_drop(ip);
	iser_try_listen(ip, false);
	if (!close_conns)
		return 0;
	for (i = 0; i < ip->nloops; i++) {
		struct iser_ploop_arg a = { .ip = ip, .li = i };

		r = gw_loop_call(ip->pl[i].loop, iser_ploop_drop_conns, &a);
		if (r > 0)
			n += r;
	}
	return n;
}

static int iser_listen(struct gw_loop *loop, const struct dmv_portal_conf *conf,
		       struct pdu_pool *pool, struct dmv_portal **out)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST |
				  AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *ai = NULL;
	struct iser_portal *ip;
	const char *addr = conf->address;
	char port[8];
	unsigned i;
	int r;

	if (addr && !*addr)
		addr = NULL;
	snprintf(port, sizeof(port), "%u", conf->port);
	r = getaddrinfo(addr, port, &hints, &ai);
	if (r) {
		gw_err("dmv", "portal %s: address \"%s\": %s", conf->name, conf->address,
		       gai_strerror(r));
		return -EINVAL;
	}
	ip = calloc(1, sizeof(*ip));
	if (!ip) {
		freeaddrinfo(ai);
		return -ENOMEM;
	}
	memcpy(&ip->ss, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	ip->base.tp = &dmv_iser_transport;
	ip->base.loop = loop;
	ip->base.pool = pool;
	snprintf(ip->base.name, sizeof(ip->base.name), "%s", conf->name ? conf->name : "");
	snprintf(ip->host, sizeof(ip->host), "%s", addr ? addr : "*");
	snprintf(ip->base.addr, sizeof(ip->base.addr), "%s:%u", addr ? addr : "*", conf->port);
	/* Loops other than the listener's only when there are several, loop 0 being this one. */
	ip->nloops = 1;
	if (conf->loops && conf->loops->n > 1) {
		if (gw_loops_index(conf->loops, loop) == 0) {
			ip->loops = conf->loops;
			ip->nloops = conf->loops->n;
			for (i = 0; i < ip->nloops; i++)
				ip->pools[i] = conf->pools[i];
		} else {
			gw_warn("dmv", "portal %s: listening on a loop other than loop 0: every "
				"connection stays on it", ip->base.name);
		}
	}
	for (i = 0; i < ip->nloops; i++) {
		struct iser_ploop *pl = &ip->pl[i];

		pl->loop = ip->loops ? ip->loops->loop[i] : loop;
		pl->res = i ? &pl->own_res : &ip->base.res;
		gw_list_init(&pl->devs);
		gw_list_init(&pl->pending);
		gw_list_init(&pl->up);
	}
	ip->w.fd = -1;
	r = gw_timer_init(&ip->retry, loop, iser_portal_retry);
	if (r) {
		free(ip);
		return r;
	}
	/* Not being able to listen yet is not an error: the timer keeps trying. */
	iser_try_listen(ip, true);
	*out = &ip->base;
	return 0;
}

/* On loop li's thread: the portal lets go of what it has there. */
static int iser_ploop_release(void *arg)
{
	struct iser_ploop_arg *a = arg;
	struct iser_ploop *pl = &a->ip->pl[a->li];
	struct iser_dev *d, *dt;

	while (!gw_list_empty(&pl->pending)) {
		struct iser_conn *ic = gw_list_first_entry(&pl->pending, struct iser_conn, pnode);

		iser_close(&ic->base);
	}
	/* Established connections outlive their portal (the iSCSI layer closes them). */
	while (!gw_list_empty(&pl->up)) {
		struct iser_conn *ic = gw_list_first_entry(&pl->up, struct iser_conn, pnode);

		gw_list_del(&ic->pnode);
		ic->ip = NULL;
	}
	/* Devices live on while connections use them, counting into their own totals. */
	gw_list_for_each_entry_safe(d, dt, &pl->devs, node) {
		d->own_res = *d->res;
		d->res = &d->own_res;
		gw_list_del(&d->node);
	}
	return 0;
}

static void iser_portal_destroy(struct dmv_portal *p)
{
	struct iser_portal *ip = gw_container_of(p, struct iser_portal, base);
	bool kept = false;
	unsigned i;

	gw_timer_fini(&ip->retry);
	/* The listener first, so no connect request is handed over any more; each loop's call
	 * runs after every hand-over posted to it before (one sender's messages keep order). */
	iser_listener_drop(ip);
	if (ip->ch) {
		gw_watch_stop(&ip->w);
		rdma_destroy_event_channel(ip->ch);
		ip->ch = NULL;
	}
	for (i = 0; i < ip->nloops; i++) {
		struct iser_ploop_arg a = { .ip = ip, .li = i };

		if (gw_loop_call(ip->pl[i].loop, iser_ploop_release, &a)) {
			/* Only at shutdown, after the loop was finished: its connections may
			 * still point here, so the portal is left allocated. */
			gw_err("dmv", "portal %s: loop %u is gone: its connections keep the portal",
			       ip->base.name, i);
			kept = true;
		}
	}
	if (!kept)
		free(ip);
}

const struct dmv_transport dmv_iser_transport = {
	.name = "iser",
	.caps = DMV_CAP_RDMA,
	.listen = iser_listen,
	.portal_destroy = iser_portal_destroy,
	.rehome = iser_rehome,
	.send_pdu = iser_send_pdu,
	.put_data = iser_put_data,
	.get_data = iser_get_data,
	.task_abort = iser_task_abort,
	.solicit = NULL,
	.buf_get = dmv_iser_buf_get,
	.buf_put = dmv_iser_buf_put,
	.set_params = iser_set_params,
	.close = iser_close,
	.max_recv_dsl = ISER_RX_DSL,
	.max_unexpected = ISER_NRX - ISER_RX_SPARE,
};
