// SPDX-License-Identifier: MIT
/*
 * What every datamover shares, at the bottom of the module's files: the login-time connection
 * parameters, target transfer tags, and each task's Data-Out bookkeeping and R2T building.
 * Unsolicited and solicited Data-Out are checked here once (TTT, offset, length, DataSN, F bit),
 * so TCP and iSER (whose unsolicited data also arrives as Data-Out PDUs) agree on what a valid
 * write looks like. A Data-Out that breaks the sequence rules fails its task (see
 * dmv_task_fail), not the connection: the framing is intact, and the initiator's other tasks
 * are fine.
 *
 * The transports (dmv_tcp.c, dmv_iser.c) call down into this file; it calls nothing of theirs
 * by name, only their table's solicit through the task's connection.
 */
#include <errno.h>
#include <string.h>

#include "dmv.h"
#include "gw_log.h"

void dmv_conn_params_login(struct dmv_conn_params *p)
{
	memset(p, 0, sizeof(*p));
	p->max_recv_dsl = 8192;
	p->max_xmit_dsl = 8192;
	p->max_burst_length = 262144;
	p->first_burst_length = 65536;
	p->max_outstanding_r2t = 1;
}

uint32_t dmv_conn_next_ttt(struct dmv_conn *c)
{
	uint32_t ttt = c->next_ttt++;

	if (ttt == ISC_RSVD_TAG)
		ttt = c->next_ttt++;
	return ttt;
}

struct pdu *dmv_r2t_next(struct dmv_task *t, bool *nopdu)
{
	const struct dmv_conn_params *p = &t->conn->params;
	uint32_t max_r2t = p->max_outstanding_r2t ? p->max_outstanding_r2t : 1;
	uint32_t mbl = p->max_burst_length ? p->max_burst_length : 262144;
	struct pdu *pdu;
	struct dmv_r2t *r;
	uint32_t n;

	if (max_r2t > DMV_R2T_MAX)
		max_r2t = DMV_R2T_MAX;
	if (!t->getting || t->aborted || t->nr2t >= max_r2t || t->sol_next >= t->len)
		return NULL;
	pdu = pdu_get(t->conn->pool);
	if (!pdu) {
		if (nopdu)
			*nopdu = true;
		return NULL;
	}
	n = t->len - t->sol_next;
	if (n > mbl)
		n = mbl;
	r = &t->r2t[t->nr2t++];
	r->ttt = dmv_conn_next_ttt(t->conn);
	r->off = t->sol_next;
	r->len = n;
	r->recv = 0;
	r->datasn = 0;
	t->sol_next += n;
	pdu->bhs[0] = ISC_OP_R2T;
	pdu->bhs[1] = ISC_FL_F;
	memcpy(pdu->bhs + 8, t->lun, 8);
	pdu_put32(pdu->bhs, 16, t->itt);
	pdu_put32(pdu->bhs, 20, r->ttt);
	t->conn->cb->stamp(t->conn, pdu->bhs);
	pdu_put32(pdu->bhs, 36, t->r2tsn++);
	pdu_put32(pdu->bhs, 40, r->off);
	pdu_put32(pdu->bhs, 44, r->len);
	return pdu;
}

static void dmv_task_deferred_done(struct gw_defer *d)
{
	struct dmv_task *t = gw_container_of(d, struct dmv_task, defer);

	t->getting = false;
	t->done(t, t->error ? t->error : t->crc_error ? -EBADMSG : 0);
}

/*
 * A Data-Out broke the sequence rules of its task. The stream itself is intact (lengths are
 * honoured), so rather than dropping the connection the task alone fails: its remaining data
 * is discarded and the iSCSI layer answers it with CHECK CONDITION. At ErrorRecoveryLevel 0
 * this is the only recovery short of the session, and it keeps the other tasks alive.
 */
static void dmv_task_fail(struct dmv_task *t)
{
	t->error = -EPROTO;
	t->nr2t = 0;
	if (t->getting) {
		t->getting = false;
		gw_defer_cancel(&t->defer);
		t->done(t, -EPROTO);
	}
}

void dmv_task_init(struct dmv_task *t, struct dmv_conn *c, uint32_t itt, const uint8_t lun[8])
{
	t->conn = c;
	t->itt = itt;
	memcpy(t->lun, lun, 8);
	t->write = false;
	t->getting = false;
	t->putting = false;
	t->aborted = false;
	t->error = 0;
	t->crc_error = false;
	t->received = 0;
	t->unsol_end = 0;
	t->unsol_next = 0;
	t->unsol_datasn = 0;
	t->unsol_done = true;
	t->sol_next = 0;
	t->r2tsn = 0;
	t->nr2t = 0;
	gw_defer_init(&t->defer, dmv_task_deferred_done);
	t->tp_priv = NULL;
}

void dmv_task_init_write(struct dmv_task *t, uint32_t imm_len, uint32_t unsol_end)
{
	t->write = true;
	t->received = imm_len;
	t->unsol_next = imm_len;
	t->unsol_end = unsol_end < imm_len ? imm_len : unsol_end;
	if (t->unsol_end > t->len)
		t->unsol_end = t->len;
	t->unsol_done = t->unsol_end == imm_len;
	t->sol_next = t->unsol_end;
}

void dmv_task_get_start(struct dmv_task *t)
{
	t->getting = true;
	if (t->received == t->len || t->error)
		gw_defer_queue(t->conn->loop, &t->defer);
}

void dmv_task_forget(struct dmv_task *t)
{
	t->aborted = true;
	t->getting = false;
	t->nr2t = 0;
	gw_defer_cancel(&t->defer);
}

static struct dmv_r2t *dmv_task_find_r2t(struct dmv_task *t, uint32_t ttt)
{
	uint32_t i;

	for (i = 0; i < t->nr2t; i++)
		if (t->r2t[i].ttt == ttt)
			return &t->r2t[i];
	return NULL;
}

int dmv_dataout_begin(struct dmv_conn *c, const uint8_t *bhs, struct dmv_task **task,
		      uint8_t **dst)
{
	uint32_t itt = pdu_bhs_itt(bhs), ttt = pdu_get32(bhs, 20);
	uint32_t datasn = pdu_get32(bhs, 36), off = pdu_get32(bhs, 40);
	uint32_t dsl = pdu_bhs_dsl(bhs);
	struct dmv_task *t;

	*task = NULL;
	*dst = NULL;
	t = c->cb->find_task(c, itt);
	if (!t || t->aborted || t->error) {
		/* The task may have been aborted while its data was in flight (RFC 7143 §4.2.3.4
		 * lets the initiator keep sending); its data is dropped without fuss. */
		gw_dbg("dmv", "%s: Data-Out for unknown ITT 0x%x discarded", c->peer, itt);
		return DMV_DO_DISCARD;
	}
	if (!t->write) {
		gw_warn_rl("dmv", "%s: Data-Out for ITT 0x%x, which is not a write", c->peer, itt);
		c->cb->reject(c, bhs, ISC_REJ_PROTOCOL);
		return DMV_DO_DISCARD;
	}
	if (off > t->len || dsl > t->len - off) {
		gw_warn_rl("dmv", "%s: ITT 0x%x Data-Out offset %u + %u beyond the %u-byte "
			   "transfer", c->peer, itt, off, dsl, t->len);
		goto fail;
	}
	if (ttt == ISC_RSVD_TAG) {
		if (t->unsol_done || off != t->unsol_next || dsl > t->unsol_end - off ||
		    datasn != t->unsol_datasn) {
			gw_warn_rl("dmv", "%s: ITT 0x%x unsolicited Data-Out out of sequence "
				   "(offset %u DataSN %u, expected offset %u DataSN %u, end %u)",
				   c->peer, itt, off, datasn, t->unsol_next, t->unsol_datasn,
				   t->unsol_end);
			goto fail;
		}
	} else {
		struct dmv_r2t *r = dmv_task_find_r2t(t, ttt);

		if (!r) {
			gw_warn_rl("dmv", "%s: ITT 0x%x Data-Out with unknown TTT 0x%x", c->peer,
				   itt, ttt);
			goto fail;
		}
		if (off != r->off + r->recv || dsl > r->len - r->recv || datasn != r->datasn) {
			gw_warn_rl("dmv", "%s: ITT 0x%x TTT 0x%x Data-Out out of sequence "
				   "(offset %u DataSN %u, expected offset %u DataSN %u)", c->peer,
				   itt, ttt, off, datasn, r->off + r->recv, r->datasn);
			goto fail;
		}
	}
	*task = t;
	*dst = t->buf + off;
	return DMV_DO_OK;
fail:
	dmv_task_fail(t);
	return DMV_DO_DISCARD;
}

int dmv_dataout_end(struct dmv_conn *c, struct dmv_task *t, const uint8_t *bhs)
{
	uint32_t ttt = pdu_get32(bhs, 20), dsl = pdu_bhs_dsl(bhs);
	bool final = bhs[1] & ISC_FL_F;

	if (t->aborted || t->error)
		return 0;
	t->received += dsl;
	if (ttt == ISC_RSVD_TAG) {
		t->unsol_next += dsl;
		t->unsol_datasn++;
		if (final || t->unsol_next == t->unsol_end) {
			if (!final || t->unsol_next != t->unsol_end) {
				gw_warn_rl("dmv", "%s: ITT 0x%x unsolicited data ends at %u, "
					   "expected %u with the F bit", c->peer, t->itt,
					   t->unsol_next, t->unsol_end);
				dmv_task_fail(t);
				return 0;
			}
			t->unsol_done = true;
		}
	} else {
		struct dmv_r2t *r = dmv_task_find_r2t(t, ttt);

		if (!r) {
			dmv_task_fail(t);
			return 0;
		}
		r->recv += dsl;
		r->datasn++;
		if (final || r->recv == r->len) {
			if (!final || r->recv != r->len) {
				gw_warn_rl("dmv", "%s: ITT 0x%x R2T sequence at %u ends after "
					   "%u of %u bytes", c->peer, t->itt, r->off, r->recv,
					   r->len);
				dmv_task_fail(t);
				return 0;
			}
			*r = t->r2t[--t->nr2t];
			if (t->conn->tp->solicit)
				t->conn->tp->solicit(t);
		}
	}
	if (t->getting && t->received == t->len && !t->nr2t && t->unsol_done) {
		t->getting = false;
		t->done(t, t->crc_error ? -EBADMSG : 0);
	}
	return 0;
}

/*
 * RFC 7143 §7.8 lets a target either ask again for the data (a recovery R2T, ErrorRecoveryLevel
 * 1 and up) or end the task with CHECK CONDITION once all its data is in. At level 0 only the
 * second is open: the PDU still counts for the sequence, so the task ends when the initiator
 * finishes sending, and then fails instead of writing what arrived.
 */
int dmv_dataout_bad_digest(struct dmv_conn *c, struct dmv_task *t, const uint8_t *bhs)
{
	t->crc_error = true;
	return dmv_dataout_end(c, t, bhs);
}
