// SPDX-License-Identifier: MIT
/* The fake datamover: see fake_dmv.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fake_dmv.h"
#include "gw_loop.h"

static struct fake_conn *fake_of(struct dmv_conn *c)
{
	return gw_container_of(c, struct fake_conn, base);
}

static void fake_capture(struct fake_conn *fc, struct pdu *pdu)
{
	gw_list_add_tail(&fc->sent, &pdu->node);
	fc->nsent++;
}

static int fake_send_pdu(struct dmv_conn *c, struct pdu *pdu)
{
	struct fake_conn *fc = fake_of(c);

	if (fc->closed) {
		pdu_put(pdu);
		return -ECONNRESET;
	}
	/* Borrowed data would dangle once the sender frees it: keep a copy. */
	if (pdu->data_ext) {
		uint8_t *p = pdu->data;

		pdu_set_data(pdu, p, pdu->data_len);
	}
	fake_capture(fc, pdu);
	if (pdu->done) {
		pdu_done_fn done = pdu->done;

		pdu->done = NULL;
		done(pdu, 0);
	}
	return 0;
}

static int fake_put_data(struct dmv_task *t, uint32_t len, struct pdu *rsp)
{
	struct fake_conn *fc = fake_of(t->conn);
	uint32_t seg = fc->base.params.max_xmit_dsl ? fc->base.params.max_xmit_dsl : 8192;
	uint32_t off = 0, datasn = 0;
	struct pdu *pdu, *last = NULL;

	fc->puts++;
	if (len > t->len)
		len = t->len;
	while (off < len) {
		uint32_t n = len - off > seg ? seg : len - off;

		pdu = pdu_get(fc->base.pool);
		pdu->bhs[0] = ISC_OP_DATA_IN;
		pdu_put32(pdu->bhs, 16, t->itt);
		pdu_put32(pdu->bhs, 20, ISC_RSVD_TAG);
		fc->base.cb->stamp(&fc->base, pdu->bhs);
		pdu_put32(pdu->bhs, 24, 0);
		pdu_put32(pdu->bhs, 36, datasn++);
		pdu_put32(pdu->bhs, 40, off);
		pdu_set_data(pdu, t->buf + off, n);
		off += n;
		if (off == len)
			pdu->bhs[1] |= ISC_FL_F;
		fake_capture(fc, pdu);
		last = pdu;
	}
	if (last && rsp && rsp->data_len == 0) {
		last->bhs[1] |= ISC_FL_S | (rsp->bhs[1] & (ISC_FL_O | ISC_FL_U));
		last->bhs[3] = rsp->bhs[3];
		memcpy(last->bhs + 24, rsp->bhs + 24, 12);
		memcpy(last->bhs + 44, rsp->bhs + 44, 4);
		pdu_put(rsp);
	} else if (rsp) {
		pdu_put32(rsp->bhs, 36, datasn);
		fake_capture(fc, rsp);
	}
	t->putting = true;
	gw_defer_queue(fc->base.loop, &t->defer);
	return 0;
}

static void fake_solicit(struct dmv_task *t)
{
	struct fake_conn *fc = fake_of(t->conn);
	struct pdu *pdu;

	while ((pdu = dmv_r2t_next(t, NULL)))
		fake_capture(fc, pdu);
}

static int fake_get_data(struct dmv_task *t)
{
	struct fake_conn *fc = fake_of(t->conn);

	fc->gets++;
	dmv_task_get_start(t);
	fake_solicit(t);
	return 0;
}

static void fake_task_abort(struct dmv_task *t)
{
	fake_of(t->conn)->aborts++;
	dmv_task_forget(t);
}

static int fake_set_params(struct dmv_conn *c, const struct dmv_conn_params *p)
{
	c->params = *p;
	return 0;
}

static void fake_close(struct dmv_conn *c)
{
	fake_of(c)->closed = true;
	c->closed = true;
}

static void fake_portal_destroy(struct dmv_portal *p)
{
	free(p);
}

const struct dmv_transport fake_dmv_transport = {
	.name = "fake",
	.caps = DMV_CAP_DIGESTS,
	.portal_destroy = fake_portal_destroy,
	.send_pdu = fake_send_pdu,
	.put_data = fake_put_data,
	.get_data = fake_get_data,
	.task_abort = fake_task_abort,
	.solicit = fake_solicit,
	.set_params = fake_set_params,
	.close = fake_close,
};

/* Lending: registered-memory stand-ins, at most fake_lend.max_len bytes, counted. */
struct fake_lend fake_lend;

struct fake_lent {
	uint32_t magic;
	void *mem;
};

static void *fake_buf_get(struct dmv_conn *c, uint32_t len, void **handle)
{
	struct fake_lent *l;

	(void)c;
	if (len > fake_lend.max_len || fake_lend.out >= fake_lend.max_out)
		return NULL;
	l = calloc(1, sizeof(*l));
	if (!l || posix_memalign(&l->mem, 4096, len)) {
		free(l);
		return NULL;
	}
	l->magic = 0x1e4d;
	fake_lend.gets++;
	fake_lend.out++;
	fake_lend.last = l->mem;
	*handle = l;
	return l->mem;
}

static void fake_buf_put(void *handle)
{
	struct fake_lent *l = handle;

	if (l->magic != 0x1e4d)
		abort();
	l->magic = 0;
	fake_lend.puts++;
	fake_lend.out--;
	free(l->mem);
	free(l);
}

const struct dmv_transport fake_dmv_lend_transport = {
	.name = "fake-lend",
	.caps = DMV_CAP_DIGESTS,
	.portal_destroy = fake_portal_destroy,
	.send_pdu = fake_send_pdu,
	.put_data = fake_put_data,
	.get_data = fake_get_data,
	.task_abort = fake_task_abort,
	.solicit = fake_solicit,
	.set_params = fake_set_params,
	.close = fake_close,
	.buf_get = fake_buf_get,
	.buf_put = fake_buf_put,
};

struct dmv_portal *fake_dmv_portal_new(struct gw_loop *loop, struct pdu_pool *pool)
{
	struct dmv_portal *p = calloc(1, sizeof(*p));

	p->tp = &fake_dmv_transport;
	p->loop = loop;
	p->pool = pool;
	strcpy(p->name, "fake0");
	strcpy(p->addr, "127.0.0.1:3260");
	p->listening = true;
	return p;
}

struct fake_conn *fake_dmv_connect(struct dmv_portal *dp)
{
	return fake_dmv_connect_on(dp, dp->loop, dp->pool);
}

struct fake_conn *fake_dmv_connect_on(struct dmv_portal *dp, struct gw_loop *loop,
				      struct pdu_pool *pool)
{
	struct fake_conn *fc = calloc(1, sizeof(*fc));

	fc->base.tp = &fake_dmv_transport;
	fc->base.portal = dp;
	fc->base.loop = loop;
	fc->base.pool = pool;
	fc->base.next_ttt = 0x100;
	strcpy(fc->base.peer, "127.0.0.1:40000");
	strcpy(fc->base.local, "127.0.0.1:3260");
	dmv_conn_params_login(&fc->base.params);
	gw_list_init(&fc->sent);
	dp->accept(dp, &fc->base);
	return fc;
}

void fake_dmv_rx(struct fake_conn *c, const uint8_t *bhs, const void *data, uint32_t len)
{
	struct pdu *pdu;

	if (c->closed)
		return;
	if ((bhs[0] & ISC_BHS_OPMASK) == ISC_OP_DATA_OUT) {
		uint8_t hdr[ISC_BHS_LEN];
		struct dmv_task *t;
		uint8_t *dst;
		int r;

		memcpy(hdr, bhs, ISC_BHS_LEN);
		pdu_put24(hdr, 5, len);
		r = dmv_dataout_begin(&c->base, hdr, &t, &dst);
		if (r < 0) {
			c->base.cb->lost(&c->base, r);
			return;
		}
		if (r == DMV_DO_OK) {
			memcpy(dst, data, len);
			if (dmv_dataout_end(&c->base, t, hdr) < 0)
				c->base.cb->lost(&c->base, -EPROTO);
		}
		return;
	}
	pdu = pdu_get(c->base.pool);
	memcpy(pdu->bhs, bhs, ISC_BHS_LEN);
	pdu_set_data(pdu, data, len);
	c->base.cb->rx_pdu(&c->base, pdu);
	pdu_put(pdu);
}

struct pdu *fake_dmv_pop(struct fake_conn *c)
{
	struct pdu *pdu;

	if (gw_list_empty(&c->sent))
		return NULL;
	pdu = gw_list_first_entry(&c->sent, struct pdu, node);
	gw_list_del(&pdu->node);
	c->nsent--;
	return pdu;
}

void fake_dmv_drain(struct fake_conn *c)
{
	struct pdu *pdu;

	while ((pdu = fake_dmv_pop(c)))
		pdu_put(pdu);
}

void fake_dmv_settle(struct gw_loop *loop)
{
	int i;

	/* Backstore completions may come from worker threads: give them a few short waits. */
	for (i = 0; i < 50; i++) {
		gw_loop_run_once(loop, i < 5 ? 0 : 2);
		if (gw_list_empty(&loop->deferred) && gw_list_empty(&loop->closing) && i > 5)
			break;
	}
}

void fake_dmv_lose(struct fake_conn *c)
{
	c->base.lost = true;
	c->base.cb->lost(&c->base, -ECONNRESET);
}

void fake_dmv_conn_free(struct fake_conn *c)
{
	fake_dmv_drain(c);
	free(c);
}

void fake_bhs(uint8_t *bhs, uint8_t opcode, uint8_t flags, uint32_t itt)
{
	memset(bhs, 0, ISC_BHS_LEN);
	bhs[0] = opcode;
	bhs[1] = flags;
	pdu_put32(bhs, 16, itt);
}
