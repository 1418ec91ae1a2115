// SPDX-License-Identifier: MIT
/*
 * Tasks: one per command a session holds (a SCSI command, or a placeholder keeping a non-SCSI
 * request's CmdSN place), their data buffers within gateway.data_memory (each loop's share,
 * each session's share), the recycled tasks of each loop, and the CmdSN queue that hands them
 * on in order. Below the handlers that give a task its meaning (isc_scsi.c, isc_tmf.c): it
 * reaches them only through the task ops the gateway object installs (gw->task_ops), never by
 * name. It calls sessions (isc_session.c), loops and the transmit helpers below it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gw_log.h"
#include "isc_priv.h"

#define ISC_TASK_KEEP_BUF	(1024u * 1024)	/* larger buffers go with their task */
#define ISC_TASK_FREE_MAX	1024

struct isc_task *isc_task_alloc(struct isc_conn *c)
{
	struct isc_loop *lp = c->lp;
	struct isc_task *t;
	uint8_t *buf = NULL;
	uint32_t cap = 0;

	if (!gw_list_empty(&lp->task_free)) {
		t = gw_list_first_entry(&lp->task_free, struct isc_task, cnode);
		gw_list_del(&t->cnode);
		lp->ntask_free--;
		buf = t->buf;
		cap = t->buf_cap;
	} else {
		t = malloc(sizeof(*t));
		if (!t)
			return NULL;
	}
	memset(t, 0, sizeof(*t));
	t->buf = buf;
	t->buf_cap = cap;
	t->conn = c;
	t->sess = c->sess;
	gw_list_init(&t->snode);
	gw_list_init(&t->cnode);
	c->sess->ntasks++;
	lp->ntasks++;
	return t;
}

/* The steps a loop's share grows and shrinks by: ISC_DATA_MEM_STEP, or less for a small
 * budget or many loops, so that what all loops may hold idle (two steps each) stays within an
 * eighth of the budget. */
static uint64_t isc_mem_step(const struct isc_gw *gw, uint64_t max)
{
	uint64_t s = max / (16 * (gw->loops ? gw->loops->n : 1));

	return s < ISC_DATA_MEM_STEP ? s : ISC_DATA_MEM_STEP;
}

/*
 * The loop's share of the data memory budget: room for need more bytes, taking a step (at
 * least what is missing, at most what the budget has left) from the gateway's budget when
 * the share is short. False: the budget is spent.
 */
static bool isc_loop_mem_room(struct isc_loop *lp, struct isc_gw *gw, uint64_t need)
{
	uint64_t max = __atomic_load_n(&gw->data_mem_max, __ATOMIC_RELAXED);
	uint64_t held, want, step;

	if (!max || lp->data_mem + need <= lp->data_mem_held)
		return true;
	want = lp->data_mem + need - lp->data_mem_held;
	step = isc_mem_step(gw, max);
	if (step < want)
		step = want;
	held = __atomic_load_n(&gw->data_mem_held, __ATOMIC_RELAXED);
	do {
		uint64_t left = held < max ? max - held : 0;

		if (left < want)
			return false;
		if (step > left)
			step = left;
	} while (!__atomic_compare_exchange_n(&gw->data_mem_held, &held, held + step, false,
					      __ATOMIC_RELAXED, __ATOMIC_RELAXED));
	lp->data_mem_held += step;
	return true;
}

/* A share held beyond two steps unused goes back, so other loops can take it. */
static void isc_loop_mem_give_back(struct isc_loop *lp, struct isc_gw *gw)
{
	uint64_t step = isc_mem_step(gw, __atomic_load_n(&gw->data_mem_max, __ATOMIC_RELAXED));
	uint64_t extra;

	if (lp->data_mem_held <= lp->data_mem + 2 * step)
		return;
	extra = lp->data_mem_held - lp->data_mem - step;
	lp->data_mem_held -= extra;
	__atomic_fetch_sub(&gw->data_mem_held, extra, __ATOMIC_RELAXED);
}

/* Releases a task's data buffer and its share of the budget. */
static void isc_task_buf_drop(struct isc_loop *lp, struct isc_task *t)
{
	if (t->buf_handle)
		t->buf_tp->buf_put(t->buf_handle);
	else
		free(t->buf);
	lp->data_mem -= t->buf_cap;
	t->buf = NULL;
	t->buf_cap = 0;
	t->buf_handle = NULL;
	t->buf_tp = NULL;
}

/* Room for need more bytes on the loop: its share, grown from the budget if need be; when
 * the budget is spent, idle buffers of recycled tasks go first. */
static bool isc_loop_mem_get(struct isc_loop *lp, struct isc_gw *gw, uint64_t need)
{
	struct isc_task *t;

	if (isc_loop_mem_room(lp, gw, need))
		return true;
	gw_list_for_each_entry(t, &lp->task_free, cnode) {
		if (lp->data_mem + need <= lp->data_mem_held)
			return true;
		isc_task_buf_drop(lp, t);
	}
	return isc_loop_mem_room(lp, gw, need);
}

/*
 * A data buffer of at least len bytes for t, within the gateway's data memory budget:
 * 0, -EBUSY when the budget is spent by commands in flight (the command is answered TASK SET
 * FULL and the initiator retries it), -ENOMEM.
 */
static int isc_task_buf_get(struct isc_task *t, uint32_t len)
{
	struct isc_gw *gw = t->sess->gw;
	struct isc_loop *lp = t->sess->lp;
	const struct dmv_transport *tp = t->conn && t->conn->dc ? t->conn->dc->tp : NULL;
	void *p, *h = NULL;

	/* Registered memory from the transport first: the data then needs no copy. */
	if (tp && tp->buf_get) {
		if (isc_loop_mem_get(lp, gw, len))
			p = tp->buf_get(t->conn->dc, len, &h);
		else
			p = NULL;
		if (p) {
			isc_task_buf_drop(lp, t);
			t->buf = p;
			t->buf_cap = len;
			t->buf_handle = h;
			t->buf_tp = tp;
			lp->data_mem += len;
			return 0;
		}
	}
	if (len <= t->buf_cap)
		return 0;
	isc_task_buf_drop(lp, t);
	if (!isc_loop_mem_get(lp, gw, len))
		return -EBUSY;
	/* Page-aligned, so O_DIRECT backstores can use it as it is. */
	if (posix_memalign(&p, 4096, len))
		return -ENOMEM;
	t->buf = p;
	t->buf_cap = len;
	lp->data_mem += len;
	return 0;
}

/* isc_task_buf_get within the session's share of the budget, and its initiator's and its
 * address's: -EBUSY past any of them. */
int isc_task_buf(struct isc_task *t, uint32_t len)
{
	struct isc_session *s = t->sess;
	uint64_t share = s->gw->data_mem_max / ISC_SESSION_MEM_SHARE;
	int64_t delta = (int64_t)len - (int64_t)t->sess_mem;
	int r;

	if (share && s->data_mem + (uint64_t)delta > share)
		return -EBUSY;
	if (isc_session_shares_charge(s, delta, share))
		return -EBUSY;
	r = isc_task_buf_get(t, len);
	if (r) {
		isc_session_shares_charge(s, -delta, share);
		return r;
	}
	s->data_mem += (uint64_t)delta;
	t->sess_mem = len;
	return 0;
}

void isc_task_release_slot(struct isc_task *t)
{
	if (!t->counted)
		return;
	t->counted = false;
	t->sess->active--;
}

void isc_task_free(struct isc_task *t)
{
	struct isc_session *s = t->sess;
	struct isc_gw *gw = s->gw;
	struct isc_loop *lp = s->lp;
	struct isc_tmf *tmf = t->tmf;

	isc_task_release_slot(t);
	gw_list_del(&t->snode);
	if (!gw_list_empty(&t->cnode) && t->conn)
		t->conn->ntasks--;
	gw_list_del(&t->cnode);
	gw_defer_cancel(&t->dt.defer);
	s->ntasks--;
	lp->ntasks--;
	s->data_mem -= t->sess_mem;
	isc_session_shares_charge(s, -(int64_t)t->sess_mem, 0);
	t->sess_mem = 0;
	t->state = ISC_TS_DONE;
	if (t->buf_cap > ISC_TASK_KEEP_BUF || lp->ntask_free >= ISC_TASK_FREE_MAX ||
	    isc_gw_stopping(gw) || t->buf_handle)
		isc_task_buf_drop(lp, t);
	if (lp->ntask_free < ISC_TASK_FREE_MAX && !isc_gw_stopping(gw)) {
		gw_list_add(&lp->task_free, &t->cnode);
		lp->ntask_free++;
	} else {
		free(t);
	}
	isc_loop_mem_give_back(lp, gw);
	if (tmf)
		gw->task_ops->tmf_ended(tmf);
	isc_session_maybe_free(s);
}

struct isc_task *isc_conn_find_task(struct isc_conn *c, uint32_t itt)
{
	struct isc_task *t;

	/* Newest first: Data-Out usually follows the command that was just received. */
	for (t = gw_list_entry(c->tasks.prev, struct isc_task, cnode); &t->cnode != &c->tasks;
	     t = gw_list_entry(t->cnode.prev, struct isc_task, cnode))
		if (t->itt == itt && t->kind == ISC_TASK_SCSI)
			return t;
	return NULL;
}

void isc_cmdsn_hold(struct isc_conn *c, uint32_t cmdsn)
{
	struct isc_task *t = isc_task_alloc(c);

	if (!t) {
		isc_conn_close(c, "out of memory");
		return;
	}
	t->kind = ISC_TASK_PLACEHOLDER;
	t->cmdsn = cmdsn;
	isc_cmdsn_queue(c->sess, t);
}

/* A rejected request still uses up its CmdSN. */
void isc_cmdsn_consume(struct isc_conn *c, uint32_t cmdsn, int order)
{
	if (order == 1)
		isc_cmdsn_advance(c->sess);
	else if (order == 0)
		isc_cmdsn_hold(c, cmdsn);
}

bool isc_cmdsn_take(struct isc_conn *c, const uint8_t *bhs)
{
	uint32_t cmdsn = pdu_get32(bhs, 24);
	int order;

	if (pdu_bhs_immediate(bhs))
		return true;
	order = isc_session_check_cmdsn(c->sess, cmdsn);
	if (order < 0) {
		gw_dbg("iscsi", "%s: %s CmdSN %u outside the window: dropped", c->dc->peer,
		       pdu_opcode_name(pdu_bhs_opcode(bhs)), cmdsn);
		return false;
	}
	isc_cmdsn_consume(c, cmdsn, order);
	return true;
}

void isc_conn_orphan_tasks(struct isc_conn *c)
{
	while (!gw_list_empty(&c->tasks)) {
		struct isc_task *t = gw_list_first_entry(&c->tasks, struct isc_task, cnode);

		gw_list_del(&t->cnode);
		c->ntasks--;
		t->conn = NULL;
		t->aborted = true;
		switch (t->state) {
		case ISC_TS_NEW:
			t->kind = ISC_TASK_PLACEHOLDER;
			break;
		case ISC_TS_SCSI:
			break;	/* freed when the SCSI core is done with it */
		default:
			/* No transfer completes on a closed datamover connection. */
			isc_task_free(t);
			break;
		}
	}
}

void isc_cmdsn_queue(struct isc_session *s, struct isc_task *t)
{
	struct isc_task *it;

	gw_list_for_each_entry(it, &s->pending, snode) {
		if (pdu_sn_lt(t->cmdsn, it->cmdsn)) {
			gw_list__insert(&t->snode, it->snode.prev, &it->snode);
			return;
		}
	}
	gw_list_add_tail(&s->pending, &t->snode);
}

void isc_cmdsn_advance(struct isc_session *s)
{
	s->exp_cmdsn++;
	while (!gw_list_empty(&s->pending)) {
		struct isc_task *t = gw_list_first_entry(&s->pending, struct isc_task, snode);

		if (t->cmdsn != s->exp_cmdsn)
			break;
		gw_list_del(&t->snode);
		s->exp_cmdsn++;
		if (t->kind == ISC_TASK_PLACEHOLDER) {
			isc_task_free(t);
			continue;
		}
		s->gw->task_ops->deliver(t);
	}
}

void isc_task_drop_pending(struct isc_session *s)
{
	struct isc_task *t, *tmp;

	gw_list_for_each_entry_safe(t, tmp, &s->pending, snode) {
		gw_list_del(&t->snode);
		isc_task_free(t);
	}
}
