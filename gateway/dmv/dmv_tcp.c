// SPDX-License-Identifier: MIT
/*
 * The TCP datamover: iSCSI PDUs framed on a byte stream (RFC 7143 §11), CRC32C digests, Data-In
 * for Put_Data and R2T + Data-Out for Get_Data.
 *
 * Receive: a state machine over the pieces of a PDU (BHS, AHS, header digest, data, padding,
 * data digest). Small reads go through a staging buffer so one recv() picks up many small PDUs;
 * once a data segment's remainder is large it is read straight into its destination (the PDU's
 * buffer, or for Data-Out the task's buffer at the right offset).
 * Send: a queue of PDUs flushed with writev() from deferred work, so responses completed in the
 * same loop round leave in one system call; EPOLLOUT is armed only while the queue is blocked.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "dmv.h"
#include "gw_crc32c.h"
#include "gw_log.h"

#define TCP_STAGE_LEN	(64 * 1024)
#define TCP_DIRECT_MIN	4096		/* data remainders this big are read in place */
#define TCP_IOV_MAX	64
#define TCP_RX_BUDGET	(1024 * 1024)	/* bytes per readable event before yielding */

struct tcp_portal {
	struct dmv_portal base;
	struct gw_watch w;
	/* Several loops (dmv_portal_conf.loops): connections wait here, on the listener's loop,
	 * for their first PDU, then move to the loop place() chose. refs: the listener's own
	 * plus one per move in flight (atomic), so a portal destroyed meanwhile is freed by the
	 * last move, which finds it dead and closes its connection. */
	struct gw_loops *loops;
	struct pdu_pool *pools[GW_LOOPS_MAX];
	uint32_t place_timeout_ms;
	struct gw_list placing;		/* struct tcp_conn.pnode */
	int refs;
	bool dead;
};

enum tcp_rx_state {
	RX_BHS,
	RX_AHS,
	RX_HDIG,
	RX_DATA,
	RX_PAD,
	RX_DDIG,
};

struct tcp_conn {
	struct dmv_conn base;
	struct gw_watch w;
	struct gw_close cl;
	struct gw_defer flush;
	/* receive */
	enum tcp_rx_state rx_state;
	uint8_t rx_bhs[ISC_BHS_LEN];
	uint8_t *rx_dst;		/* current piece's destination (NULL: discard) */
	uint32_t rx_rem;		/* bytes left in the current piece */
	uint32_t rx_crc;
	uint8_t rx_dig[ISC_DIGEST_LEN];
	uint8_t rx_pad[4];
	uint8_t rx_reject;		/* Reject reason to send once the PDU is read, 0: none */
	bool rx_hdig, rx_ddig;		/* digests expected on the PDU being read */
	struct pdu *rx_pdu;		/* PDU being read (not Data-Out) */
	struct dmv_task *rx_task;	/* Data-Out destination task */
	uint8_t *rx_stage;
	uint32_t stage_off, stage_len;
	uint8_t scratch[4096];
	/* send */
	struct gw_list txq;
	uint32_t txq_n;
	/* Placement on one of several loops: waiting for the first PDU (placing_tp set, pnode in
	 * its list, place_timer armed), then moving (the first PDU copied into first, the move
	 * posted to the chosen loop); counted in loops->load[loop_idx] while loops is set. */
	struct tcp_portal *placing_tp;
	struct gw_list pnode;
	struct gw_timer place_timer;
	bool moving;
	bool accepted;			/* accept() was called */
	bool place_timed_out;
	struct gw_defer move_defer;
	struct gw_msg move;
	uint8_t *first;			/* BHS, AHS, data of the first PDU */
	uint32_t first_ahs, first_len;
	struct gw_loops *loops;
	unsigned loop_idx;
};

static const char *tcp_addr_str(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	char host[64];
	uint16_t port;

	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const void *)ss;

		inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
		port = ntohs(s6->sin6_port);
		snprintf(buf, len, "[%s]:%u", host, port);
	} else {
		const struct sockaddr_in *s4 = (const void *)ss;

		inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
		port = ntohs(s4->sin_port);
		snprintf(buf, len, "%s:%u", host, port);
	}
	return buf;
}

/* ---------------------------------------------------------------------------------------- */
/* Send side */

static void tcp_conn_lost(struct tcp_conn *tc, int err);

static void tcp_pdu_digests(struct tcp_conn *tc, struct pdu *pdu)
{
	static const uint8_t zero[4];
	uint32_t crc, pad;

	pdu->tx_hdig = tc->base.params.header_digest;
	pdu->tx_ddig = tc->base.params.data_digest && pdu->data_len;
	if (pdu->tx_hdig) {
		crc = gw_crc32c(0, pdu->bhs, ISC_BHS_LEN);
		if (pdu->ahs_len)
			crc = gw_crc32c(crc, pdu->ahs, pdu->ahs_len);
		memcpy(pdu->hdig, &crc, 4);	/* digests travel little-endian (RFC 7143 B.4) */
	}
	if (pdu->tx_ddig) {
		pad = pdu_pad4(pdu->data_len) - pdu->data_len;
		crc = gw_crc32c(0, pdu->data, pdu->data_len);
		if (pad)
			crc = gw_crc32c(crc, zero, pad);
		memcpy(pdu->ddig, &crc, 4);
	}
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "digest byte order assumes a little-endian host"
#endif
}

/* The wire pieces of pdu from byte `skip` on. Returns the number of iovecs filled. */
static int tcp_pdu_iov(const struct pdu *pdu, uint32_t skip, struct iovec *iov, int max)
{
	static uint8_t zero[4];
	struct {
		const void *p;
		uint32_t n;
	} piece[6];
	int np = 0, n = 0, i;
	uint32_t pad = pdu_pad4(pdu->data_len) - pdu->data_len;

	piece[np++] = (typeof(piece[0])){ pdu->bhs, ISC_BHS_LEN };
	if (pdu->ahs_len)
		piece[np++] = (typeof(piece[0])){ pdu->ahs, pdu->ahs_len };
	if (pdu->tx_hdig)
		piece[np++] = (typeof(piece[0])){ pdu->hdig, ISC_DIGEST_LEN };
	if (pdu->data_len)
		piece[np++] = (typeof(piece[0])){ pdu->data, pdu->data_len };
	if (pad)
		piece[np++] = (typeof(piece[0])){ zero, pad };
	if (pdu->tx_ddig)
		piece[np++] = (typeof(piece[0])){ pdu->ddig, ISC_DIGEST_LEN };
	for (i = 0; i < np && n < max; i++) {
		if (skip >= piece[i].n) {
			skip -= piece[i].n;
			continue;
		}
		iov[n].iov_base = (void *)((const uint8_t *)piece[i].p + skip);
		iov[n].iov_len = piece[i].n - skip;
		skip = 0;
		n++;
	}
	return n;
}

static uint32_t tcp_pdu_wire_len(const struct pdu *pdu)
{
	return ISC_BHS_LEN + pdu->ahs_len + (pdu->tx_hdig ? ISC_DIGEST_LEN : 0) +
	       pdu_pad4(pdu->data_len) + (pdu->tx_ddig ? ISC_DIGEST_LEN : 0);
}

static void tcp_pdu_finish(struct pdu *pdu, int status)
{
	gw_list_del(&pdu->node);
	if (pdu->done)
		pdu->done(pdu, status);
	pdu_put(pdu);
}

static void tcp_update_events(struct tcp_conn *tc, bool want_out)
{
	uint32_t ev = EPOLLIN | (want_out ? EPOLLOUT : 0);

	if (tc->base.closed || tc->base.lost)
		return;
	gw_watch_set(&tc->w, ev);
}

static void tcp_flush(struct tcp_conn *tc)
{
	struct iovec iov[TCP_IOV_MAX];
	struct pdu *pdu;
	ssize_t r;
	int n;

	while (!gw_list_empty(&tc->txq) && !tc->base.closed && !tc->base.lost) {
		n = 0;
		gw_list_for_each_entry(pdu, &tc->txq, node) {
			if (n >= TCP_IOV_MAX - 6)
				break;
			n += tcp_pdu_iov(pdu, pdu->tx_off, iov + n, TCP_IOV_MAX - n);
		}
		r = writev(tc->w.fd, iov, n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				tcp_update_events(tc, true);
				return;
			}
			tcp_conn_lost(tc, -errno);
			return;
		}
		tc->base.tx_bytes += (uint64_t)r;
		while (r > 0 && !gw_list_empty(&tc->txq)) {
			uint32_t left;

			pdu = gw_list_first_entry(&tc->txq, struct pdu, node);
			left = tcp_pdu_wire_len(pdu) - pdu->tx_off;
			if ((size_t)r < left) {
				pdu->tx_off += (uint32_t)r;
				r = 0;
				break;
			}
			r -= left;
			tc->txq_n--;
			tc->base.tx_pdus++;
			tcp_pdu_finish(pdu, 0);
			if (tc->base.closed)
				return;
		}
	}
	if (!tc->base.closed)
		tcp_update_events(tc, false);
}

static void tcp_flush_deferred(struct gw_defer *d)
{
	tcp_flush(gw_container_of(d, struct tcp_conn, flush));
}

static int tcp_queue(struct tcp_conn *tc, struct pdu *pdu)
{
	if (tc->base.closed || tc->base.lost) {
		pdu_put(pdu);
		return -ECONNRESET;
	}
	tcp_pdu_digests(tc, pdu);
	pdu->tx_off = 0;
	gw_list_add_tail(&tc->txq, &pdu->node);
	tc->txq_n++;
	/* Flushed before the loop sleeps: everything queued in this round leaves together. */
	if (!(tc->w.events & EPOLLOUT))
		gw_defer_queue(tc->base.loop, &tc->flush);
	return 0;
}

static int tcp_send_pdu(struct dmv_conn *c, struct pdu *pdu)
{
	return tcp_queue(gw_container_of(c, struct tcp_conn, base), pdu);
}

/* Put_Data: Data-In PDUs out of the task buffer, no copy. */
static void tcp_put_done(struct pdu *pdu, int status)
{
	struct dmv_task *t = pdu->priv;

	if (status || !t->putting)
		return;
	t->putting = false;
	t->done(t, 0);
}

static int tcp_put_data(struct dmv_task *t, uint32_t len, struct pdu *rsp)
{
	struct tcp_conn *tc = gw_container_of(t->conn, struct tcp_conn, base);
	const struct dmv_conn_params *p = &tc->base.params;
	uint32_t off = 0, datasn = 0, seg = p->max_xmit_dsl ? p->max_xmit_dsl : 8192;
	uint32_t mbl = p->max_burst_length ? p->max_burst_length : 262144;
	bool collapse = rsp && rsp->data_len == 0;
	struct pdu *pdu, *last = NULL;
	struct gw_list batch;

	if (tc->base.closed || tc->base.lost) {
		pdu_put(rsp);
		return -ECONNRESET;
	}
	if (len > t->len)
		len = t->len;
	gw_list_init(&batch);
	while (off < len) {
		/* A Data-In sequence ends at every MaxBurstLength boundary (F bit). */
		uint32_t burst_left = mbl - off % mbl;
		uint32_t n = len - off;

		if (n > seg)
			n = seg;
		if (n > burst_left)
			n = burst_left;
		pdu = pdu_get(tc->base.pool);
		if (!pdu)
			goto nomem;
		pdu->bhs[0] = ISC_OP_DATA_IN;
		pdu_put32(pdu->bhs, 16, t->itt);
		pdu_put32(pdu->bhs, 20, ISC_RSVD_TAG);
		tc->base.cb->stamp(&tc->base, pdu->bhs);
		pdu_put32(pdu->bhs, 24, 0);	/* StatSN only with the S bit */
		pdu_put32(pdu->bhs, 36, datasn++);
		pdu_put32(pdu->bhs, 40, off);
		pdu_set_ext_data(pdu, t->buf + off, n);
		off += n;
		if (off == len || off % mbl == 0)
			pdu->bhs[1] |= ISC_FL_F;
		gw_list_add_tail(&batch, &pdu->node);
		last = pdu;
	}
	if (last && collapse) {
		/* Status collapse (RFC 7143 §11.7.3): S with the status, residuals and StatSN of
		 * the response, which then is not sent. */
		last->bhs[1] |= ISC_FL_F | ISC_FL_S | (rsp->bhs[1] & (ISC_FL_O | ISC_FL_U));
		last->bhs[3] = rsp->bhs[3];
		memcpy(last->bhs + 24, rsp->bhs + 24, 12);
		memcpy(last->bhs + 44, rsp->bhs + 44, 4);
		pdu_put(rsp);
		rsp = NULL;
	}
	if (rsp) {
		pdu_put32(rsp->bhs, 36, datasn);	/* ExpDataSN: Data-In PDUs sent */
		gw_list_add_tail(&batch, &rsp->node);
		last = rsp;
	}
	if (!last)
		return -EINVAL;
	last->done = tcp_put_done;
	last->priv = t;
	t->putting = true;
	while (!gw_list_empty(&batch)) {
		pdu = gw_list_first_entry(&batch, struct pdu, node);
		gw_list_del(&pdu->node);
		tcp_queue(tc, pdu);
	}
	return 0;
nomem:
	while (!gw_list_empty(&batch)) {
		pdu = gw_list_first_entry(&batch, struct pdu, node);
		gw_list_del(&pdu->node);
		pdu_put(pdu);
	}
	pdu_put(rsp);
	gw_err_rl("dmv", "%s: out of PDUs for Data-In", tc->base.peer);
	return -ENOMEM;
}

/* Get_Data: R2Ts for what unsolicited data does not cover. */
static void tcp_solicit(struct dmv_task *t)
{
	struct tcp_conn *tc = gw_container_of(t->conn, struct tcp_conn, base);
	struct pdu *pdu;
	bool nopdu = false;

	while ((pdu = dmv_r2t_next(t, &nopdu)))
		tcp_queue(tc, pdu);
	/* Retried when the next sequence completes; with none outstanding the initiator times
	 * out and recovers, which beats failing the write. */
	if (nopdu)
		gw_err_rl("dmv", "%s: out of PDUs for R2T", tc->base.peer);
}

static int tcp_get_data(struct dmv_task *t)
{
	if (t->conn->closed || t->conn->lost)
		return -ECONNRESET;
	if (!t->write)
		return -EINVAL;
	dmv_task_get_start(t);
	tcp_solicit(t);
	return 0;
}

static void tcp_task_abort(struct dmv_task *t)
{
	struct tcp_conn *tc = gw_container_of(t->conn, struct tcp_conn, base);

	dmv_task_forget(t);
	/* Data-Out being read into this task right now goes to the bit bucket instead. */
	if (tc->rx_task == t) {
		tc->rx_task = NULL;
		if (tc->rx_state == RX_DATA)
			tc->rx_dst = NULL;
	}
}

static int tcp_set_params(struct dmv_conn *c, const struct dmv_conn_params *p)
{
	c->params = *p;
	return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Receive side */

static void tcp_rx_reset(struct tcp_conn *tc)
{
	tc->rx_state = RX_BHS;
	tc->rx_dst = tc->rx_bhs;
	tc->rx_rem = ISC_BHS_LEN;
	tc->rx_reject = 0;
	tc->rx_task = NULL;
}

static void tcp_rx_set(struct tcp_conn *tc, enum tcp_rx_state st, uint8_t *dst, uint32_t n)
{
	tc->rx_state = st;
	tc->rx_dst = dst;
	tc->rx_rem = n;
}

/* The header is complete (digest checked): decide where the data segment goes. */
static int tcp_rx_header_done(struct tcp_conn *tc)
{
	const uint8_t *bhs = tc->rx_bhs;
	uint32_t dsl = pdu_bhs_dsl(bhs);

	if (pdu_bhs_opcode(bhs) == ISC_OP_DATA_OUT && !tc->rx_reject) {
		struct dmv_task *t;
		uint8_t *dst;
		int r = dmv_dataout_begin(&tc->base, bhs, &t, &dst);

		if (r < 0)
			return r;
		if (tc->base.closed)
			return 0;
		tc->rx_task = r == DMV_DO_OK ? t : NULL;
		tc->rx_dst = r == DMV_DO_OK ? dst : NULL;
	} else if (!tc->rx_reject) {
		if (pdu_alloc_data(tc->rx_pdu, dsl))
			return -ENOMEM;
		tc->rx_dst = tc->rx_pdu->data;
	} else {
		tc->rx_dst = NULL;
	}
	tc->rx_crc = 0;
	tcp_rx_set(tc, RX_DATA, tc->rx_dst, dsl);
	return 0;
}

/* The whole PDU is in. */
static int tcp_rx_pdu_done(struct tcp_conn *tc)
{
	struct pdu *pdu = tc->rx_pdu;
	int r = 0;

	tc->rx_pdu = NULL;
	tc->base.rx_pdus++;
	if (tc->rx_reject) {
		tc->base.cb->reject(&tc->base, tc->rx_bhs, tc->rx_reject);
	} else if (pdu_bhs_opcode(tc->rx_bhs) == ISC_OP_DATA_OUT) {
		if (tc->rx_task)
			r = dmv_dataout_end(&tc->base, tc->rx_task, tc->rx_bhs);
	} else {
		tc->base.cb->rx_pdu(&tc->base, pdu);
	}
	pdu_put(pdu);
	tcp_rx_reset(tc);
	return r;
}

/*
 * The data segment failed its digest. The header passed its own (or there is none), so the
 * stream is still framed: RFC 7143 §7.8 asks for a Reject (Data Digest Error) and the PDU
 * discarded, and the connection goes on. A command with immediate data is discarded whole (the
 * initiator retries it with the same CmdSN); a Data-Out's task fails once all its data is in.
 */
static int tcp_rx_bad_data_digest(struct tcp_conn *tc)
{
	struct pdu *pdu = tc->rx_pdu;
	const uint8_t *bhs = tc->rx_bhs;
	int r = 0;

	gw_warn_rl("dmv", "%s: data digest error on %s (ITT 0x%x): rejected", tc->base.peer,
		   pdu_opcode_name(pdu_bhs_opcode(bhs)), pdu_bhs_itt(bhs));
	tc->rx_pdu = NULL;
	tc->base.rx_pdus++;
	tc->base.cb->reject(&tc->base, bhs, ISC_REJ_DATA_DIGEST);
	if (!tc->base.closed && pdu_bhs_opcode(bhs) == ISC_OP_DATA_OUT && !tc->rx_reject &&
	    tc->rx_task)
		r = dmv_dataout_bad_digest(&tc->base, tc->rx_task, bhs);
	if (pdu)
		pdu_put(pdu);
	tcp_rx_reset(tc);
	return r;
}

/* The current piece is complete: move to the next one. 0, or -errno to drop the connection. */
static int tcp_rx_advance(struct tcp_conn *tc)
{
	const uint8_t *bhs = tc->rx_bhs;
	uint32_t crc, dsl;
	const char *why;
	int r;

	switch (tc->rx_state) {
	case RX_BHS: {
		enum pdu_bhs_verdict v;

		/* Digests are fixed per PDU when its header starts. */
		tc->rx_hdig = tc->base.params.header_digest;
		tc->rx_ddig = tc->base.params.data_digest;
		v = pdu_bhs_check(bhs, tc->base.params.max_recv_dsl, &tc->rx_reject, &why);
		if (v == ISC_BHS_FATAL) {
			gw_warn_rl("dmv", "%s: %s (opcode 0x%02x, %u bytes): dropping the "
				   "connection", tc->base.peer, why, pdu_bhs_opcode(bhs),
				   pdu_bhs_dsl(bhs));
			return -EPROTO;
		}
		if (v != ISC_BHS_OK)
			gw_warn_rl("dmv", "%s: rejecting %s (opcode 0x%02x): %s", tc->base.peer,
				   pdu_opcode_name(pdu_bhs_opcode(bhs)), pdu_bhs_opcode(bhs), why);
		if (pdu_bhs_opcode(bhs) == ISC_OP_DATA_OUT && pdu_bhs_ahs_len(bhs)) {
			gw_warn_rl("dmv", "%s: Data-Out with an AHS: dropping the connection",
				   tc->base.peer);
			return -EPROTO;
		}
		if (pdu_bhs_opcode(bhs) != ISC_OP_DATA_OUT || tc->rx_reject) {
			tc->rx_pdu = pdu_get(tc->base.pool);
			if (!tc->rx_pdu)
				return -ENOMEM;
			memcpy(tc->rx_pdu->bhs, bhs, ISC_BHS_LEN);
		}
		if (tc->rx_hdig)
			tc->rx_crc = gw_crc32c(0, bhs, ISC_BHS_LEN);
		if (pdu_bhs_ahs_len(bhs)) {
			r = pdu_alloc_ahs(tc->rx_pdu, pdu_bhs_ahs_len(bhs));
			if (r)
				return r;
			tcp_rx_set(tc, RX_AHS, tc->rx_pdu->ahs, tc->rx_pdu->ahs_len);
			return 0;
		}
	}
		/* fall through */
	case RX_AHS:
		if (tc->rx_state == RX_AHS && tc->rx_hdig)
			tc->rx_crc = gw_crc32c(tc->rx_crc, tc->rx_pdu->ahs, tc->rx_pdu->ahs_len);
		if (tc->rx_hdig) {
			tcp_rx_set(tc, RX_HDIG, tc->rx_dig, ISC_DIGEST_LEN);
			return 0;
		}
		/* fall through */
	case RX_HDIG:
		if (tc->rx_state == RX_HDIG && memcmp(&tc->rx_crc, tc->rx_dig, 4)) {
			gw_warn_rl("dmv", "%s: header digest error: dropping the connection",
				   tc->base.peer);
			return -EBADMSG;
		}
		r = tcp_rx_header_done(tc);
		if (r || tc->base.closed)
			return r;
		if (tc->rx_rem)
			return 0;
		/* fall through */
	case RX_DATA:
		dsl = pdu_bhs_dsl(bhs);
		if (pdu_pad4(dsl) != dsl) {
			memset(tc->rx_pad, 0, sizeof(tc->rx_pad));
			tcp_rx_set(tc, RX_PAD, tc->rx_pad, pdu_pad4(dsl) - dsl);
			return 0;
		}
		/* fall through */
	case RX_PAD:
		if (tc->rx_state == RX_PAD && tc->rx_ddig)
			tc->rx_crc = gw_crc32c(tc->rx_crc, tc->rx_pad, pdu_pad4(pdu_bhs_dsl(bhs)) -
					       pdu_bhs_dsl(bhs));
		if (tc->rx_ddig && pdu_bhs_dsl(bhs)) {
			tcp_rx_set(tc, RX_DDIG, tc->rx_dig, ISC_DIGEST_LEN);
			return 0;
		}
		return tcp_rx_pdu_done(tc);
	case RX_DDIG:
		crc = tc->rx_crc;
		if (memcmp(&crc, tc->rx_dig, 4))
			return tcp_rx_bad_data_digest(tc);
		return tcp_rx_pdu_done(tc);
	}
	return 0;
}

/* n bytes have landed at rx_dst (or were discarded): account for them. */
static int tcp_rx_consume(struct tcp_conn *tc, const uint8_t *p, uint32_t n)
{
	if (tc->rx_state == RX_DATA && tc->rx_ddig)
		tc->rx_crc = gw_crc32c(tc->rx_crc, p, n);
	if (tc->rx_dst)
		tc->rx_dst += n;
	tc->rx_rem -= n;
	if (tc->rx_rem)
		return 0;
	return tcp_rx_advance(tc);
}

static void tcp_readable(struct tcp_conn *tc)
{
	uint32_t budget = TCP_RX_BUDGET;
	ssize_t r;
	int err;

	while (!tc->base.closed && !tc->base.lost && !tc->moving) {
		if (tc->rx_rem == 0) {
			/* A zero-length piece (e.g. no data segment) is completed right away. */
			err = tcp_rx_advance(tc);
			if (err)
				goto fail;
			continue;
		}
		if (tc->stage_off < tc->stage_len) {
			uint32_t n = tc->stage_len - tc->stage_off;
			const uint8_t *src = tc->rx_stage + tc->stage_off;

			if (n > tc->rx_rem)
				n = tc->rx_rem;
			if (tc->rx_dst)
				memcpy(tc->rx_dst, src, n);
			tc->stage_off += n;
			err = tcp_rx_consume(tc, tc->rx_dst ? tc->rx_dst : src, n);
			if (err)
				goto fail;
			continue;
		}
		if (!budget)
			return;
		if (tc->rx_state == RX_DATA && tc->rx_rem >= TCP_DIRECT_MIN) {
			uint8_t *dst = tc->rx_dst ? tc->rx_dst : tc->scratch;
			uint32_t want = tc->rx_rem;

			if (!tc->rx_dst && want > sizeof(tc->scratch))
				want = sizeof(tc->scratch);
			r = recv(tc->w.fd, dst, want, 0);
			if (r > 0) {
				tc->base.rx_bytes += (uint64_t)r;
				budget = (uint32_t)r > budget ? 0 : budget - (uint32_t)r;
				err = tcp_rx_consume(tc, dst, (uint32_t)r);
				if (err)
					goto fail;
				continue;
			}
		} else {
			r = recv(tc->w.fd, tc->rx_stage, TCP_STAGE_LEN, 0);
			if (r > 0) {
				tc->base.rx_bytes += (uint64_t)r;
				budget = (uint32_t)r > budget ? 0 : budget - (uint32_t)r;
				tc->stage_off = 0;
				tc->stage_len = (uint32_t)r;
				continue;
			}
		}
		if (r == 0) {
			err = -ECONNRESET;
			goto fail;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return;
		err = -errno;
		goto fail;
	}
	return;
fail:
	tcp_conn_lost(tc, err);
}

static void tcp_conn_event(struct gw_watch *w, uint32_t events)
{
	struct tcp_conn *tc = gw_container_of(w, struct tcp_conn, w);

	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
		tcp_readable(tc);
	if ((events & EPOLLOUT) && !tc->base.closed && !tc->base.lost)
		tcp_flush(tc);
}

/* ---------------------------------------------------------------------------------------- */
/* Connection life */

static void tcp_drop_txq(struct tcp_conn *tc)
{
	while (!gw_list_empty(&tc->txq)) {
		struct pdu *pdu = gw_list_first_entry(&tc->txq, struct pdu, node);

		tc->txq_n--;
		tcp_pdu_finish(pdu, -ECONNRESET);
	}
}

static void tcp_conn_lost(struct tcp_conn *tc, int err)
{
	if (tc->base.lost || tc->base.closed)
		return;
	tc->base.lost = true;
	gw_watch_stop(&tc->w);
	gw_defer_cancel(&tc->flush);
	if (err == -ECONNRESET)
		gw_dbg("dmv", "%s: connection closed by the initiator", tc->base.peer);
	else
		gw_info("dmv", "%s: connection lost: %s", tc->base.peer, strerror(-err));
	if (tc->base.cb && tc->base.cb->lost)
		tc->base.cb->lost(&tc->base, err);
}

static void tcp_conn_free(struct gw_close *cl)
{
	struct tcp_conn *tc = gw_container_of(cl, struct tcp_conn, cl);

	free(tc->first);
	free(tc->rx_stage);
	free(tc);
}

static void tcp_portal_put(struct tcp_portal *tp)
{
	if (__atomic_sub_fetch(&tp->refs, 1, __ATOMIC_ACQ_REL) == 0)
		free(tp);
}

/* The connection leaves the listener's waiting list (its first PDU came, or it closed). */
static void tcp_place_end(struct tcp_conn *tc)
{
	if (!tc->placing_tp)
		return;
	gw_list_del(&tc->pnode);
	gw_timer_fini(&tc->place_timer);
	tc->placing_tp = NULL;
}

static void tcp_close(struct dmv_conn *c)
{
	struct tcp_conn *tc = gw_container_of(c, struct tcp_conn, base);

	if (c->closed)
		return;
	c->closed = true;
	gw_watch_stop(&tc->w);
	gw_defer_cancel(&tc->flush);
	gw_defer_cancel(&tc->move_defer);
	tcp_place_end(tc);
	if (c->admitted && !tc->accepted && c->portal->unadmit) {
		c->admitted = false;
		c->portal->unadmit(c->portal, tc->place_timed_out);
	}
	if (tc->loops) {
		gw_loops_load_add(tc->loops, tc->loop_idx, -1);
		tc->loops = NULL;
	}
	/* Flush what is queued (a Logout Response, a final Login Response with a failure
	 * status): one best-effort non-blocking write; the initiator is going away anyway. */
	if (!c->lost && !gw_list_empty(&tc->txq)) {
		struct iovec iov[TCP_IOV_MAX];
		struct pdu *pdu;
		int n = 0;

		gw_list_for_each_entry(pdu, &tc->txq, node) {
			if (n >= TCP_IOV_MAX - 6)
				break;
			n += tcp_pdu_iov(pdu, pdu->tx_off, iov + n, TCP_IOV_MAX - n);
		}
		if (writev(tc->w.fd, iov, n) < 0)
			gw_dbg("dmv", "%s: final write: %s", c->peer, strerror(errno));
	}
	tcp_drop_txq(tc);
	if (tc->rx_pdu) {
		pdu_put(tc->rx_pdu);
		tc->rx_pdu = NULL;
	}
	close(tc->w.fd);
	tc->w.fd = -1;
	gw_loop_close(c->loop, &tc->cl, tcp_conn_free);
}

/* ---------------------------------------------------------------------------------------- */
/* Placement on one of several loops */

/* On the chosen loop: the connection is re-created there and its first PDU processed as if it
 * had just arrived; then whatever it sent after it. */
static void tcp_move_fn(struct gw_msg *m)
{
	struct tcp_conn *tc = gw_container_of(m, struct tcp_conn, move);
	struct tcp_portal *tp = gw_container_of(tc->base.portal, struct tcp_portal, base);
	struct gw_loop *loop = tp->loops->loop[tc->loop_idx];
	struct pdu *pdu = NULL;

	tc->base.loop = loop;
	tc->base.pool = tp->pools[tc->loop_idx] ? tp->pools[tc->loop_idx] : tp->base.pool;
	tc->base.cb = NULL;
	tc->moving = false;
	gw_watch_init(&tc->w, loop, tc->w.fd, tcp_conn_event);
	if (__atomic_load_n(&tp->dead, __ATOMIC_ACQUIRE)) {
		tc->base.admitted = false;	/* the owner let go of the portal */
		tcp_close(&tc->base);
		tcp_portal_put(tp);
		return;
	}
	pdu = pdu_get(tc->base.pool);
	if (!pdu || (tc->first_ahs && pdu_alloc_ahs(pdu, tc->first_ahs)) ||
	    (tc->first_len && pdu_alloc_data(pdu, tc->first_len))) {
		gw_err_rl("dmv", "%s: out of memory moving the connection", tc->base.peer);
		if (pdu)
			pdu_put(pdu);
		tcp_close(&tc->base);
		tcp_portal_put(tp);
		return;
	}
	memcpy(pdu->bhs, tc->first, ISC_BHS_LEN);
	if (tc->first_ahs)
		memcpy(pdu->ahs, tc->first + ISC_BHS_LEN, tc->first_ahs);
	if (tc->first_len)
		memcpy(pdu->data, tc->first + ISC_BHS_LEN + tc->first_ahs, tc->first_len);
	free(tc->first);
	tc->first = NULL;
	gw_dbg("dmv", "portal %s: %s served by loop %u", tp->base.name, tc->base.peer,
	       tc->loop_idx);
	tc->accepted = true;
	tp->base.accept(&tp->base, &tc->base);
	tcp_portal_put(tp);
	if (!tc->base.closed && (!tc->base.cb || gw_watch_set(&tc->w, EPOLLIN) < 0))
		tcp_close(&tc->base);
	if (!tc->base.closed) {
		tc->base.cb->rx_pdu(&tc->base, pdu);
		/* What it sent after the first PDU, already read on the listener's loop. */
		if (!tc->base.closed && !tc->base.lost)
			tcp_readable(tc);
	}
	pdu_put(pdu);
}

/* After the listener's loop finished reading the first PDU (never inside the read, which
 * still touches the connection): hand it over. */
static void tcp_move_post(struct gw_defer *d)
{
	struct tcp_conn *tc = gw_container_of(d, struct tcp_conn, move_defer);
	struct tcp_portal *tp = gw_container_of(tc->base.portal, struct tcp_portal, base);

	tcp_place_end(tc);
	tc->move.fn = tcp_move_fn;
	__atomic_add_fetch(&tp->refs, 1, __ATOMIC_ACQ_REL);
	if (gw_loop_post(tp->loops->loop[tc->loop_idx], &tc->move)) {
		__atomic_sub_fetch(&tp->refs, 1, __ATOMIC_ACQ_REL);
		tc->moving = false;
		tcp_close(&tc->base);
	}
}

static void tcp_place_rx(struct dmv_conn *c, struct pdu *pdu)
{
	struct tcp_conn *tc = gw_container_of(c, struct tcp_conn, base);
	struct tcp_portal *tp = tc->placing_tp;
	int i = tp->base.place ? tp->base.place(&tp->base, pdu) : -1;

	if (i < 0 || (unsigned)i >= tp->loops->n)
		i = (int)gw_loops_pick(tp->loops);
	tc->first = malloc(ISC_BHS_LEN + pdu->ahs_len + pdu->data_len);
	if (!tc->first) {
		gw_err_rl("dmv", "%s: out of memory placing the connection", c->peer);
		tcp_close(c);
		return;
	}
	memcpy(tc->first, pdu->bhs, ISC_BHS_LEN);
	if (pdu->ahs_len)
		memcpy(tc->first + ISC_BHS_LEN, pdu->ahs, pdu->ahs_len);
	if (pdu->data_len)
		memcpy(tc->first + ISC_BHS_LEN + pdu->ahs_len, pdu->data, pdu->data_len);
	tc->first_ahs = pdu->ahs_len;
	tc->first_len = pdu->data_len;
	/* Off the listener's loop: no more reading here, the fd leaves its epoll set. */
	tc->moving = true;
	gw_watch_stop(&tc->w);
	gw_timer_disarm(&tc->place_timer);
	tc->loops = tp->loops;
	tc->loop_idx = (unsigned)i;
	gw_loops_load_add(tc->loops, tc->loop_idx, 1);
	gw_defer_queue(c->loop, &tc->move_defer);
}

static struct dmv_task *tcp_place_find(struct dmv_conn *c, uint32_t itt)
{
	(void)c;
	(void)itt;
	return NULL;
}

static void tcp_place_stamp(struct dmv_conn *c, uint8_t *bhs)
{
	(void)c;
	(void)bhs;
}

/* A first PDU that cannot even be read (a bad header): nobody to answer it yet. */
static void tcp_place_reject(struct dmv_conn *c, const uint8_t *bhs, uint8_t reason)
{
	(void)bhs;
	gw_dbg("dmv", "%s: first PDU refused (reason 0x%02x): closing", c->peer, reason);
	tcp_close(c);
}

static void tcp_place_lost(struct dmv_conn *c, int err)
{
	(void)err;
	tcp_close(c);
}

static const struct dmv_conn_cb tcp_place_cb = {
	.rx_pdu = tcp_place_rx, .find_task = tcp_place_find, .stamp = tcp_place_stamp,
	.reject = tcp_place_reject, .lost = tcp_place_lost,
};

static void tcp_place_timeout(struct gw_timer *t)
{
	struct tcp_conn *tc = gw_container_of(t, struct tcp_conn, place_timer);

	gw_info("dmv", "%s: no login within %u ms: closing", tc->base.peer,
		tc->placing_tp->place_timeout_ms);
	tc->place_timed_out = true;
	tcp_close(&tc->base);
}

/* Several loops: the connection waits on the listener's loop for its first PDU. */
static int tcp_place_start(struct tcp_portal *tp, struct tcp_conn *tc)
{
	if (gw_timer_init(&tc->place_timer, tp->base.loop, tcp_place_timeout) < 0)
		return -ENOMEM;
	if (gw_timer_arm(&tc->place_timer, tp->place_timeout_ms, 0) < 0 ||
	    gw_watch_set(&tc->w, EPOLLIN) < 0) {
		gw_timer_fini(&tc->place_timer);
		return -EIO;
	}
	tc->placing_tp = tp;
	tc->base.cb = &tcp_place_cb;
	gw_list_add_tail(&tp->placing, &tc->pnode);
	return 0;
}

static void tcp_accept(struct gw_watch *w, uint32_t events)
{
	struct tcp_portal *tp = gw_container_of(w, struct tcp_portal, w);
	struct sockaddr_storage ss, ls;
	socklen_t sl = sizeof(ss), ll = sizeof(ls);
	struct tcp_conn *tc;
	int fd, one = 1, i;

	(void)events;
	/* A few per event so a connection storm cannot starve established sessions. */
	for (i = 0; i < 16; i++) {
		sl = sizeof(ss);
		fd = accept4(w->fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
			    errno != ECONNABORTED)
				gw_err_rl("dmv", "portal %s: accept: %s", tp->base.name,
					  strerror(errno));
			return;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		tc = calloc(1, sizeof(*tc));
		if (tc)
			tc->rx_stage = malloc(TCP_STAGE_LEN);
		if (!tc || !tc->rx_stage) {
			gw_err_rl("dmv", "portal %s: out of memory accepting a connection",
				  tp->base.name);
			if (tc)
				free(tc);
			close(fd);
			continue;
		}
		tc->base.tp = &dmv_tcp_transport;
		tc->base.portal = &tp->base;
		tc->base.loop = tp->base.loop;
		tc->base.pool = tp->base.pool;
		tc->base.next_ttt = 1;
		dmv_conn_params_login(&tc->base.params);
		tcp_addr_str(&ss, tc->base.peer, sizeof(tc->base.peer));
		ll = sizeof(ls);
		if (getsockname(fd, (struct sockaddr *)&ls, &ll) == 0)
			tcp_addr_str(&ls, tc->base.local, sizeof(tc->base.local));
		gw_list_init(&tc->txq);
		gw_list_init(&tc->pnode);
		gw_defer_init(&tc->flush, tcp_flush_deferred);
		gw_defer_init(&tc->move_defer, tcp_move_post);
		gw_watch_init(&tc->w, tp->base.loop, fd, tcp_conn_event);
		tcp_rx_reset(tc);
		gw_dbg("dmv", "portal %s: connection from %s", tp->base.name, tc->base.peer);
		if (tp->loops) {
			if (tp->base.admit) {
				if (tp->base.admit(&tp->base, &tc->base) < 0) {
					tcp_close(&tc->base);
					continue;
				}
				tc->base.admitted = true;
			}
			if (tcp_place_start(tp, tc))
				tcp_close(&tc->base);
			continue;
		}
		tp->base.accept(&tp->base, &tc->base);
		if (tc->base.closed)
			continue;
		if (!tc->base.cb || gw_watch_set(&tc->w, EPOLLIN) < 0) {
			tcp_close(&tc->base);
			continue;
		}
	}
}

static int tcp_listen(struct gw_loop *loop, const struct dmv_portal_conf *conf,
		      struct pdu_pool *pool, struct dmv_portal **out)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST |
				  AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *ai = NULL;
	struct tcp_portal *tp;
	char port[8];
	const char *addr = conf->address;
	int fd = -1, one = 1, r;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (addr && (!*addr || !strcmp(addr, "0.0.0.0")))
		addr = NULL;
	snprintf(port, sizeof(port), "%u", conf->port);
	r = getaddrinfo(addr, port, &hints, &ai);
	if (r) {
		gw_err("dmv", "portal %s: address \"%s\": %s", conf->name, conf->address,
		       gai_strerror(r));
		return -EINVAL;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		r = -errno;
		gw_err("dmv", "portal %s: socket: %s", conf->name, strerror(-r));
		goto fail;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 128) < 0) {
		r = -errno;
		gw_err("dmv", "portal %s: cannot listen on %s:%u: %s", conf->name,
		       conf->address && *conf->address ? conf->address : "*", conf->port,
		       strerror(-r));
		goto fail;
	}
	tp = calloc(1, sizeof(*tp));
	if (!tp) {
		r = -ENOMEM;
		goto fail;
	}
	tp->base.tp = &dmv_tcp_transport;
	tp->base.loop = loop;
	tp->base.pool = pool;
	tp->refs = 1;
	gw_list_init(&tp->placing);
	if (conf->loops && conf->loops->n > 1) {
		tp->loops = conf->loops;
		memcpy(tp->pools, conf->pools, sizeof(tp->pools));
		tp->place_timeout_ms = conf->place_timeout_ms ? conf->place_timeout_ms : 30000;
	}
	snprintf(tp->base.name, sizeof(tp->base.name), "%s", conf->name ? conf->name : "");
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
		tcp_addr_str(&ss, tp->base.addr, sizeof(tp->base.addr));
	tp->base.listening = true;
	gw_watch_init(&tp->w, loop, fd, tcp_accept);
	r = gw_watch_set(&tp->w, EPOLLIN);
	if (r < 0) {
		free(tp);
		goto fail;
	}
	freeaddrinfo(ai);
	*out = &tp->base;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	freeaddrinfo(ai);
	return r;
}

static void tcp_portal_destroy(struct dmv_portal *p)
{
	struct tcp_portal *tp = gw_container_of(p, struct tcp_portal, base);

	gw_watch_stop(&tp->w);
	close(tp->w.fd);
	while (!gw_list_empty(&tp->placing))
		tcp_close(&gw_list_first_entry(&tp->placing, struct tcp_conn, pnode)->base);
	/* Moves in flight find it dead and close their connections; the last frees it. */
	__atomic_store_n(&tp->dead, true, __ATOMIC_RELEASE);
	tcp_portal_put(tp);
}

const struct dmv_transport dmv_tcp_transport = {
	.name = "tcp",
	.caps = DMV_CAP_DIGESTS,
	.listen = tcp_listen,
	.portal_destroy = tcp_portal_destroy,
	.send_pdu = tcp_send_pdu,
	.put_data = tcp_put_data,
	.get_data = tcp_get_data,
	.task_abort = tcp_task_abort,
	.solicit = tcp_solicit,
	.set_params = tcp_set_params,
	.close = tcp_close,
};
