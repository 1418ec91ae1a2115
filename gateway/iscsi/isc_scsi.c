// SPDX-License-Identifier: MIT
/*
 * SCSI Command, its data and its response (RFC 7143 §11.3, §11.4, §11.7, §11.8). A task gathers
 * all write data into its buffer (immediate data copied from the command PDU, unsolicited and
 * solicited Data-Out straight from the datamover) before the SCSI core sees it; read data goes
 * back through Put_Data, which may fold the status into the last Data-In.
 *
 * The tasks themselves, their buffers and the CmdSN queue are isc_task.c's; the queue delivers
 * a command here through the task ops (isc_task_deliver).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gw_log.h"
#include "isc_priv.h"

#define ISC_EDTL_MAX		(64u * 1024 * 1024)

static void isc_task_scsi_done(struct scsi_cmd *cmd);
static void isc_task_xfer_done(struct dmv_task *dt, int status);

/* The ATTR field (RFC 7143 11.3.1.1): 0 untagged, 1 simple, 2 ordered, 3 head of queue,
 * 4 ACA. Untagged and reserved values run as simple. (Casting the field to the enum made
 * every simple command ordered: commands ran one at a time, which only showed once a
 * backstore took longer than a loop round, as remote LUNs do.) */
static enum scsi_task_attr isc_task_attr(uint8_t flags)
{
	switch (flags & ISC_FL_ATTR) {
	case 2:
		return SCSI_ATTR_ORDERED;
	case 3:
		return SCSI_ATTR_HEAD_OF_QUEUE;
	case 4:
		return SCSI_ATTR_ACA;
	default:
		return SCSI_ATTR_SIMPLE;
	}
}
static void isc_scsi_fail(struct isc_task *t, uint8_t key, uint8_t asc, uint8_t ascq);
static void isc_scsi_task_aborted(struct isc_task *t);

static void isc_scsi_submit(struct isc_task *t)
{
	struct scsi_cmd *cmd = &t->cmd;

	t->state = ISC_TS_SCSI;
	cmd->dev = t->sess->target->dev;
	cmd->itn = t->sess->itn;
	cmd->lun = t->lun;
	cmd->tag = t->itt;
	cmd->dir = t->write ? SCSI_DIR_WRITE : t->read ? SCSI_DIR_READ : SCSI_DIR_NONE;
	t->iov.iov_base = t->buf;
	t->iov.iov_len = t->edtl;
	cmd->iov = &t->iov;
	cmd->iovcnt = t->edtl ? 1 : 0;
	cmd->data_len = t->edtl;
	cmd->done = isc_task_scsi_done;
	cmd->priv = t;
	/* Submitted and done on the session's loop (NULL with one loop: the device's). */
	cmd->loop = t->sess->gw->loops ? t->sess->lp->loop : NULL;
	scsi_cmd_submit(cmd);
}

void isc_task_deliver(struct isc_task *t)
{
	int r;

	t->start_ns = gw_now_ns();
	if (!t->immediate) {
		t->counted = true;
		t->sess->active++;
	}
	if (!t->conn) {
		/* Its connection went away while it waited for its turn. */
		isc_task_free(t);
		return;
	}
	if (t->bad_cdb) {
		isc_scsi_fail(t, SCSI_SK_ILLEGAL_REQUEST, 0x24, 0x00);
		return;
	}
	if (t->busy) {
		t->state = ISC_TS_SCSI;
		t->cmd.priv = t;
		t->cmd.status = SCSI_TASK_SET_FULL;
		isc_task_scsi_done(&t->cmd);
		return;
	}
	if (!gw_list_empty(&t->sess->target->pending_luns) &&
	    isc_target_lun_blocked(t->sess->target, t->lun)) {
		/* Being removed: LOGICAL UNIT NOT SUPPORTED, so the removal can finish. */
		isc_scsi_fail(t, SCSI_SK_ILLEGAL_REQUEST, 0x25, 0x00);
		return;
	}
	if (t->write) {
		t->state = ISC_TS_DATA_OUT;
		r = dmv_get_data(&t->dt);
		if (r) {
			isc_conn_close(t->conn, "cannot receive write data");
			return;
		}
		return;
	}
	isc_scsi_submit(t);
}

static void isc_task_xfer_done(struct dmv_task *dt, int status)
{
	struct isc_task *t = gw_container_of(dt, struct isc_task, dt);

	if (t->state == ISC_TS_DATA_OUT) {
		if (status == -EPROTO && !t->aborted && t->conn) {
			/* The write data broke its sequence: ABORTED COMMAND, DATA PHASE ERROR. */
			isc_scsi_fail(t, SCSI_SK_ABORTED_COMMAND, 0x4b, 0x00);
			return;
		}
		if (status == -EBADMSG && !t->aborted && t->conn) {
			/* A Data-Out failed its data digest (RFC 7143 §7.8, §11.4.7.2): ABORTED
			 * COMMAND, PROTOCOL SERVICE CRC ERROR, once all the data was in. */
			isc_scsi_fail(t, SCSI_SK_ABORTED_COMMAND, 0x47, 0x05);
			return;
		}
		if (status || t->aborted || !t->conn) {
			isc_task_free(t);
			return;
		}
		if (t->tas) {
			/* Another I_T nexus aborted it while its data came in: TASK ABORTED. */
			isc_scsi_task_aborted(t);
			return;
		}
		isc_scsi_submit(t);
		return;
	}
	/* Put_Data (and the status with it) has left. */
	isc_task_free(t);
}

/* The SCSI Response for a finished command; NULL on ENOMEM. */
static struct pdu *isc_scsi_response(struct isc_task *t)
{
	struct scsi_cmd *cmd = &t->cmd;
	struct pdu *rsp = isc_conn_new_pdu(t->conn, ISC_OP_SCSI_RSP, t->itt);

	if (!rsp)
		return NULL;
	rsp->bhs[2] = 0x00;	/* command completed at target */
	rsp->bhs[3] = cmd->status;
	/* Residuals compare what the initiator expected with what the CDB asked for. */
	if (cmd->cdb_xfer_len > t->edtl) {
		rsp->bhs[1] |= ISC_FL_O;
		pdu_put32(rsp->bhs, 44, cmd->cdb_xfer_len - t->edtl);
	} else if (cmd->cdb_xfer_len < t->edtl) {
		rsp->bhs[1] |= ISC_FL_U;
		pdu_put32(rsp->bhs, 44, t->edtl - cmd->cdb_xfer_len);
	}
	if (cmd->sense_len) {
		uint8_t sb[2 + SCSI_SENSE_MAX];

		sb[0] = 0;
		sb[1] = cmd->sense_len;
		memcpy(sb + 2, cmd->sense, cmd->sense_len);
		if (pdu_set_data(rsp, sb, 2u + cmd->sense_len)) {
			pdu_put(rsp);
			return NULL;
		}
	}
	isc_task_release_slot(t);
	isc_conn_stamp(t->conn, rsp->bhs, true);
	return rsp;
}

/* The session's loop's counters of LUN lun of target t (its own table: no other thread
 * touches it); NULL for a LUN the state does not list (none configured there) or on ENOMEM. */
static struct isc_lun_stats *isc_loop_lun_stats(struct isc_target *t, struct isc_loop *lp,
						uint64_t lun)
{
	struct isc_loop_stats *ls = &t->lstats[lp->idx];
	struct isc_lun_stats *n;

	for (size_t i = 0; i < ls->n; i++)
		if (ls->v[i].lun == lun)
			return &ls->v[i];
	if (!scsi_dev_find_lu(t->dev, lun))
		return NULL;
	n = realloc(ls->v, (ls->n + 1) * sizeof(*n));
	if (!n)
		return NULL;
	ls->v = n;
	memset(&n[ls->n], 0, sizeof(*n));
	n[ls->n].lun = lun;
	return &n[ls->n++];
}

/* Counters per LUN and session; reads and writes by SBC opcode, everything else as "other". */
static void isc_task_count(struct isc_task *t, uint32_t read_len)
{
	struct isc_lun_stats *st = isc_loop_lun_stats(t->sess->target, t->sess->lp, t->lun);
	uint8_t op = t->cmd.cdb[0];

	t->sess->cmds++;
	if (!st)
		return;
	if (t->cmd.status != SCSI_GOOD) {
		st->errors++;
		return;
	}
	switch (op) {
	case 0x08: case 0x28: case 0xa8: case 0x88:		/* READ 6/10/12/16 */
		st->read_ops++;
		st->read_bytes += read_len;
		t->sess->read_bytes += read_len;
		gw_hist_add(&st->read_lat, gw_now_ns() - t->start_ns);
		break;
	case 0x0a: case 0x2a: case 0xaa: case 0x8a:		/* WRITE 6/10/12/16 */
	case 0x2e: case 0xae: case 0x8e:			/* WRITE AND VERIFY */
	case 0x41: case 0x93:					/* WRITE SAME 10/16 */
	case 0x89:						/* COMPARE AND WRITE */
		st->write_ops++;
		st->write_bytes += t->edtl;
		t->sess->write_bytes += t->edtl;
		gw_hist_add(&st->write_lat, gw_now_ns() - t->start_ns);
		break;
	default:
		st->other_ops++;
		break;
	}
}

static void isc_task_scsi_done(struct scsi_cmd *cmd)
{
	struct isc_task *t = cmd->priv;
	struct pdu *rsp;
	uint32_t len;

	if (t->aborted || !t->conn || t->conn->state != ISC_CONN_FFP) {
		isc_task_free(t);
		return;
	}
	isc_task_count(t, cmd->xfer_len < t->edtl ? cmd->xfer_len : t->edtl);
	rsp = isc_scsi_response(t);
	if (!rsp) {
		isc_conn_close(t->conn, "out of memory for a SCSI Response");
		return;
	}
	len = cmd->xfer_len < t->edtl ? cmd->xfer_len : t->edtl;
	if (t->read && len) {
		t->state = ISC_TS_DATA_IN;
		if (dmv_put_data(&t->dt, len, rsp))
			isc_task_free(t);
		return;
	}
	isc_conn_send(t->conn, rsp);
	isc_task_free(t);
}

/* A command another I_T nexus aborted before it reached the SCSI core: TASK ABORTED status,
 * no data, no sense. */
static void isc_scsi_task_aborted(struct isc_task *t)
{
	t->state = ISC_TS_SCSI;
	t->cmd.priv = t;
	t->cmd.cdb_xfer_len = t->edtl;
	t->cmd.status = SCSI_TASK_ABORTED;
	t->cmd.sense_len = 0;
	t->cmd.xfer_len = 0;
	isc_task_scsi_done(&t->cmd);
}

/* A command the target answers itself (CHECK CONDITION) without the SCSI core. */
static void isc_scsi_fail(struct isc_task *t, uint8_t key, uint8_t asc, uint8_t ascq)
{
	t->state = ISC_TS_SCSI;
	t->cmd.priv = t;
	t->cmd.cdb_xfer_len = t->edtl;
	scsi_cmd_set_sense(&t->cmd, key, asc, ascq);
	isc_task_scsi_done(&t->cmd);
}

void isc_scsi_rx_cmd(struct isc_conn *c, struct pdu *pdu)
{
	struct isc_session *s = c->sess;
	const struct isc_params *p = &s->params;
	const uint8_t *bhs = pdu->bhs;
	bool imm = pdu_bhs_immediate(bhs);
	uint32_t itt = pdu_bhs_itt(bhs), edtl = pdu_get32(bhs, 20), cmdsn = pdu_get32(bhs, 24);
	uint32_t dsl = pdu->data_len, unsol_end;
	bool bad_cdb = false;
	struct isc_task *t;
	int order = 1, r = 0;

	if (!imm) {
		order = isc_session_check_cmdsn(s, cmdsn);
		if (order < 0) {
			gw_dbg("iscsi", "%s: CmdSN %u outside [%u, %u]: dropped", c->dc->peer,
			       cmdsn, s->exp_cmdsn, isc_session_max_cmdsn(s));
			return;
		}
	}
	if (itt == ISC_RSVD_TAG || isc_conn_find_task(c, itt)) {
		isc_conn_reject(c, bhs, itt == ISC_RSVD_TAG ? ISC_REJ_INVALID_FIELD :
				ISC_REJ_TASK_IN_PROGRESS);
		if (!imm)
			isc_cmdsn_consume(c, cmdsn, order);
		return;
	}
	if (dsl && (!(bhs[1] & ISC_FL_W) || !p->immediate_data || dsl > edtl ||
		    dsl > p->first_burst_length)) {
		gw_warn_rl("iscsi", "%s: ITT 0x%x: %u bytes of immediate data not allowed here",
			   c->dc->peer, itt, dsl);
		isc_conn_reject(c, bhs, ISC_REJ_PROTOCOL);
		if (!imm)
			isc_cmdsn_consume(c, cmdsn, order);
		return;
	}
	t = isc_task_alloc(c);
	if (!t) {
		isc_conn_close(c, "out of memory for a task");
		return;
	}
	t->kind = ISC_TASK_SCSI;
	t->state = ISC_TS_NEW;
	t->itt = itt;
	t->cmdsn = cmdsn;
	t->immediate = imm;
	t->edtl = edtl;
	t->read = bhs[1] & ISC_FL_R;
	t->write = bhs[1] & ISC_FL_W;
	t->lun = scsi_lun_decode(bhs + 8);
	t->cmd.attr = isc_task_attr(bhs[1]);
	memcpy(t->cmd.cdb, bhs + 32, 16);
	t->cmd.cdb_len = 16;
	if (pdu->ahs_len >= 4 && pdu->ahs[2] == 1) {
		/* Extended CDB AHS: AHSLength counts the reserved byte and CDB bytes 16 on. */
		uint32_t alen = pdu_get16(pdu->ahs, 0), extra = alen ? alen - 1 : 0;

		if (extra + 16 > SCSI_CDB_MAX || alen + 3 > pdu->ahs_len)
			bad_cdb = true;
		else {
			memcpy(t->cmd.cdb + 16, pdu->ahs + 4, extra);
			t->cmd.cdb_len = (uint8_t)(16 + extra);
		}
	}
	if (!t->read && !t->write)
		t->edtl = edtl = 0;
	if (edtl > ISC_EDTL_MAX || (t->read && t->write))
		bad_cdb = true;
	else if (edtl && (r = isc_task_buf(t, edtl)) == -EBUSY) {
		/* Like a bad CDB, answered in order and without data, but retried. */
		t->busy = true;
		s->lp->task_set_full++;
		gw_warn_rl("iscsi", "%s: data memory (gateway.data_memory, %llu MiB) in use by "
			   "commands in flight: this session %llu MiB, its initiator %llu MiB, "
			   "its address %llu MiB, each at most 1/%u of it: TASK SET FULL",
			   c->dc->peer, (unsigned long long)(s->gw->data_mem_max >> 20),
			   (unsigned long long)(s->data_mem >> 20),
			   (unsigned long long)(isc_session_share_bytes(s, 0) >> 20),
			   (unsigned long long)(isc_session_share_bytes(s, 1) >> 20),
			   ISC_SESSION_MEM_SHARE);
	} else if (r) {
		isc_task_free(t);
		isc_conn_close(c, "out of memory for a data buffer");
		return;
	}
	gw_list_add_tail(&c->tasks, &t->cnode);
	c->ntasks++;
	t->dt.buf = t->buf;
	t->dt.buf_handle = t->buf_handle;
	t->dt.len = bad_cdb || t->busy ? 0 : edtl;
	t->dt.done = isc_task_xfer_done;
	dmv_task_init(&t->dt, c->dc, itt, bhs + 8);
	if (t->write && !bad_cdb && !t->busy) {
		if (dsl)	/* no immediate data: pdu->data is NULL */
			memcpy(t->buf, pdu->data, dsl);
		if ((bhs[1] & ISC_FL_F) || p->initial_r2t)
			unsol_end = dsl;
		else
			unsol_end = p->first_burst_length < edtl ? p->first_burst_length : edtl;
		dmv_task_init_write(&t->dt, dsl, unsol_end);
	}
	if (bad_cdb || t->busy) {
		/* Answered in order like any command, without data. */
		t->bad_cdb = bad_cdb;
		t->read = t->write = false;
		t->edtl = 0;
	}
	gw_dbg("iscsi", "%s: ITT 0x%x CmdSN %u op 0x%02x EDTL %u %s%s%s", c->dc->peer, itt,
	       cmdsn, t->cmd.cdb[0], edtl, t->read ? "R" : "", t->write ? "W" : "",
	       imm ? " immediate" : "");
	if (order == 0) {
		isc_cmdsn_queue(s, t);
		return;
	}
	isc_task_deliver(t);
	if (!imm)
		isc_cmdsn_advance(s);
}

void isc_task_abort(struct isc_task *t, struct isc_tmf *tmf)
{
	if (t->aborted || t->kind != ISC_TASK_SCSI)
		return;
	t->aborted = true;
	/* A task another session's TMF already waits for (isc_task_abort_other) keeps it: a task
	 * answers one TMF, and this one is answered without waiting for it. */
	if (tmf && !t->tmf) {
		t->tmf = tmf;
		tmf->waiting++;
	}
	switch (t->state) {
	case ISC_TS_NEW:
		/* Still waiting for its CmdSN: it keeps its place so the window stays whole. */
		t->kind = ISC_TASK_PLACEHOLDER;
		if (t->conn)
			t->conn->ntasks--;
		gw_list_del(&t->cnode);
		if (t->tmf) {
			t->tmf->waiting--;
			t->tmf = NULL;
		}
		break;
	case ISC_TS_DATA_OUT:
		if (t->conn)
			dmv_task_abort(&t->dt);
		isc_task_free(t);
		break;
	case ISC_TS_SCSI:
		/* Removed or not, done fires: the task ends there. */
		scsi_abort_cmd(&t->cmd);
		break;
	case ISC_TS_DATA_IN:
		/* The data is on its way; the task ends when Put_Data completes. */
		break;
	case ISC_TS_DONE:
		break;
	}
}

void isc_task_abort_other(struct isc_task *t, struct isc_tmf *tmf)
{
	if (t->aborted || t->tas || t->kind != ISC_TASK_SCSI)
		return;
	if (tmf && !t->tmf && (t->state == ISC_TS_DATA_OUT || t->state == ISC_TS_SCSI)) {
		/* The TMF is answered once this task has been (isc_task_free). */
		t->tmf = tmf;
		tmf->waiting++;
	}
	switch (t->state) {
	case ISC_TS_NEW:
		/* Not in the task set yet (its CmdSN turn has not come): it enters it after the
		 * reset, and meets the reset's unit attention there. */
		break;
	case ISC_TS_DATA_OUT:
		/* Its data keeps coming (the initiator sends it anyway); it is answered TASK
		 * ABORTED once the data is in, and never reaches the SCSI core. */
		t->tas = true;
		break;
	case ISC_TS_SCSI:
		/* Waiting in the task set: the core ends it with TASK ABORTED through done, which
		 * answers it. Already running: it completes and is answered with its status. */
		scsi_abort_cmd(&t->cmd);
		break;
	case ISC_TS_DATA_IN:
	case ISC_TS_DONE:
		/* Completed: its data and status are on their way. */
		break;
	}
}
