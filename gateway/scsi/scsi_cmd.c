// SPDX-License-Identifier: MIT
/*
 * Command dispatch, the top of the command path: scsi_cmd_submit and the checks every command
 * goes through in SAM order (LUN, unit attention, opcode, reservations, ALUA state, task
 * attribute), on the LU's owner loop. The opcode table is scsi_op.c's, running and completing
 * a command scsi_exec.c's, sense and data-buffer helpers scsi_reply.c's. done never runs
 * inside scsi_cmd_submit: a command that finishes synchronously completes from its gw_defer.
 *
 * It calls down only: scsi_op.c for the entry, the checks' owners (unit attentions, ALUA,
 * reservations), the task set, the LUN lookup. Nothing in the module calls in here.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gw_log.h"
#include "scsi_priv.h"

/* What the CDB asks to move, before the handler knows better (residual accounting). */
static uint32_t scsi_cdb_xfer_len(const struct scsi_cmd *cmd, const struct scsi_lu *lu)
{
	const uint8_t *c = cmd->cdb;
	uint32_t bs = lu ? lu->block_size : 512;
	uint64_t n;

	switch (c[0]) {
	case 0x08:
	case 0x0a:
		n = c[4] ? c[4] : 256;	/* SBC-3: 0 means 256 blocks for both */
		return (uint32_t)(n * bs);
	case 0x28:
	case 0x2a:
	case 0x2e:
		n = scsi_get16(&c[7]);
		break;
	case 0xa8:
	case 0xaa:
	case 0xae:
		n = scsi_get32(&c[6]);
		break;
	case 0x88:
	case 0x8a:
	case 0x8b:
	case 0x8e:
		n = scsi_get32(&c[10]);
		break;
	case 0x2f:
		n = (c[1] & 0x06) ? scsi_get16(&c[7]) : 0;
		break;
	case 0xaf:
		n = (c[1] & 0x06) ? scsi_get32(&c[6]) : 0;
		break;
	case 0x8f:
		n = (c[1] & 0x06) ? scsi_get32(&c[10]) : 0;
		break;
	case 0x89:
		n = 2ull * c[13];
		break;
	case 0x41:
	case 0x93:
		return (c[0] == 0x93 && (c[1] & 0x01)) ? 0 : bs;
	case 0x03:
	case 0x12:
	case 0x1a:
		return c[4] | (c[0] == 0x12 ? (uint32_t)c[3] << 8 : 0);
	case 0x15:
		return c[4];
	case 0x42:
	case 0x55:
	case 0x5a:
	case 0x5e:
		return scsi_get16(&c[7]);
	case 0x5f:
		return scsi_get32(&c[5]);
	case 0xa0:
	case 0xa3:
	case 0xa4:
		return scsi_get32(&c[6]);
	case 0x9e:
		return scsi_get32(&c[10]);
	case 0x25:
		return 8;
	default:
		return 0;
	}
	n *= bs;
	return n > 0xffffffffu ? 0xffffffffu : (uint32_t)n;
}

/* A unit attention is reported before everything but INQUIRY, REPORT LUNS and REQUEST
 * SENSE; an unknown opcode still gets it (SAM-5 5.14). */
static bool scsi_cmd_check_ua(struct scsi_cmd *cmd, const struct scsi_op *op)
{
	struct scsi_itl *itl;

	if (op && (op->flags & SCSI_OPF_NO_UA))
		return false;
	if (!cmd->itn)
		return false;
	itl = scsi_itl_get(cmd->itn, cmd->lu);
	if (!itl)
		return false;
	return scsi_ua_take(cmd, itl);
}

/* A SCSI_OPF_NOT_CLUSTER command on a LU whose reservations are the cluster's: INVALID COMMAND
 * OPERATION CODE, as from a device without it (REPORT SUPPORTED OPERATION CODES leaves it out
 * too), so a host finds out at once rather than relying on a reservation the other gateways
 * would not honour. The first one per LU is logged. */
static void scsi_cmd_not_cluster(struct scsi_cmd *cmd, const struct scsi_op *op)
{
	if (!cmd->lu->not_cluster++)
		gw_warn(SCSI_LOG, "%s: LUN %llu: %s refused: in a cluster only SCSI-3 persistent "
			"reservations hold across gateways (use PERSISTENT RESERVE OUT)",
			cmd->dev->name, (unsigned long long)cmd->lu->lun, op->name);
	scsi_cmd_set_sense(cmd, SCSI_SK_ILLEGAL_REQUEST, 0x20, 0x00);
}

/* The owner's half: everything that reads or changes LU state, on the LU's owner loop. */
static void scsi_cmd_submit_owner(struct scsi_cmd *cmd)
{
	const struct scsi_op *op = cmd->op;
	struct scsi_lu *lu = cmd->lu;
	bool known;

	cmd->cdb_xfer_len = scsi_cdb_xfer_len(cmd, lu);
	lu->nr_cmds++;

	/* Aborted on its loop while the message was on its way: never started, no UA taken. */
	if (scsi_cmd_abort_requested(cmd)) {
		cmd->status = SCSI_TASK_ABORTED;
		goto done;
	}
	if (scsi_cmd_check_ua(cmd, op))
		goto done;
	if (!op) {
		scsi_op_find(cmd->cdb[0], cmd->cdb[1] & 0x1f, &known);
		if (known)
			scsi_cmd_invalid_cdb(cmd, 1, 4);	/* unknown service action */
		else
			scsi_cmd_set_sense(cmd, SCSI_SK_ILLEGAL_REQUEST, 0x20, 0x00);
		goto done;
	}
	if (cmd->cdb_len < op->cdb_len) {
		scsi_cmd_set_sense(cmd, SCSI_SK_ILLEGAL_REQUEST, 0x20, 0x00);
		goto done;
	}
	/* In a cluster the device is one LU behind several gateways: a command whose state only
	 * this gateway would hold is not supported (docs/CLUSTER.md, "SPC-2 reservations"). */
	if ((op->flags & SCSI_OPF_NOT_CLUSTER) && scsi_dev_pr_cluster(cmd->dev)) {
		scsi_cmd_not_cluster(cmd, op);
		goto done;
	}
	/* A remote backstore without a path: only what ALUA's unavailable state allows runs. */
	if (lu->bs->state != BS_STATE_READY && !(op->flags & SCSI_OPF_ALUA_UA)) {
		scsi_cmd_set_sense(cmd, SCSI_SK_NOT_READY, 0x04,
				   lu->bs->state == BS_STATE_BECOMING_READY ? 0x01 : 0x0c);
		goto done;
	}
	if (scsi_alua_refuse(cmd, op))
		goto done;
	if (scsi_pr_conflict(cmd, op))
		goto done;
	if ((op->flags & SCSI_OPF_WRITE) && lu->readonly) {
		scsi_cmd_set_sense(cmd, SCSI_SK_DATA_PROTECT, 0x27, 0x00);
		goto done;
	}
	scsi_task_start(cmd);
	return;
done:
	cmd->state = SCSI_CMD_ST_NEW;
	gw_defer_queue(lu->loop, &cmd->defer);
}

static void scsi_cmd_submit_msg(struct gw_msg *m)
{
	scsi_cmd_submit_owner(gw_container_of(m, struct scsi_cmd, msg_submit));
}

void scsi_cmd_submit(struct scsi_cmd *cmd)
{
	const struct scsi_op *op;
	struct scsi_lu *lu;

	cmd->status = SCSI_GOOD;
	cmd->sense_len = 0;
	cmd->xfer_len = 0;
	cmd->core_priv = NULL;
	cmd->flags = 0;
	cmd->step = 0;
	cmd->abort_req = false;		/* published to the owner by the post below */
	cmd->lba = 0;
	cmd->nblocks = 0;
	cmd->state = SCSI_CMD_ST_NEW;
	gw_list_init(&cmd->node);
	gw_list_init(&cmd->range_node);
	gw_defer_init(&cmd->defer, scsi_cmd_defer_fn);

	lu = scsi_dev_find_lu(cmd->dev, cmd->lun);
	cmd->lu = lu;
	op = scsi_op_find(cmd->cdb[0], cmd->cdb[1] & 0x1f, NULL);
	cmd->op = op;

	if (!lu) {
		/* No LU: answered on the command's loop (REPORT LUNS, INQUIRY, REQUEST SENSE). */
		cmd->cdb_xfer_len = scsi_cdb_xfer_len(cmd, NULL);
		if (op && (op->flags & SCSI_OPF_NO_LU) && cmd->cdb_len >= op->cdb_len) {
			cmd->state = SCSI_CMD_ST_RUNNING;
			if (op->fn(cmd) == SCSI_CMD_DONE)
				gw_defer_queue(scsi_cmd_loop(cmd), &cmd->defer);
			return;
		}
		scsi_cmd_set_sense(cmd, SCSI_SK_ILLEGAL_REQUEST, 0x25, 0x00);
		gw_defer_queue(scsi_cmd_loop(cmd), &cmd->defer);
		return;
	}
	/* The owner's half: directly when the LU is this loop's (always with one loop), else
	 * by the message the command carries. */
	if (lu->loop == scsi_cmd_loop(cmd)) {
		scsi_cmd_submit_owner(cmd);
		return;
	}
	cmd->msg_submit.fn = scsi_cmd_submit_msg;
	if (gw_loop_post(lu->loop, &cmd->msg_submit) == 0)
		return;
	/* The owner's loop is finished (shutting down). */
	cmd->lu = NULL;
	scsi_cmd_set_sense(cmd, SCSI_SK_NOT_READY, 0x04, 0x00);
	gw_defer_queue(scsi_cmd_loop(cmd), &cmd->defer);
}
