// SPDX-License-Identifier: MIT
/*
 * Command dispatch: the opcode table (CDB length, flags, reservation class, handler and CDB
 * usage data for REPORT SUPPORTED OPERATION CODES), the checks every command goes through in
 * SAM order (LUN, unit attention, opcode, reservations, ALUA state, task attribute). Running
 * and completing a command is scsi_exec.c's, sense and data-buffer helpers scsi_reply.c's.
 * done never runs inside scsi_cmd_submit: a command that finishes synchronously completes
 * from its gw_defer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gw_log.h"
#include "scsi_priv.h"

#define CTL 0x00	/* control byte: NACA and LINK are not supported, so not evaluated */

#define OP(opc, sa_, len, prc, fl, func, nm, ...)                                       \
	{ .opcode = (opc), .sa = (sa_), .cdb_len = (len), .pr = (prc), .flags = (fl),    \
	  .timeout = 30, .fn = (func), .name = (nm), .usage = { (opc), __VA_ARGS__ } }

#define RW6(opc, fn, nm, fl, prc) OP(opc, 0, 6, prc, SCSI_OPF_MEDIA | (fl), fn, nm, \
	0x1f, 0xff, 0xff, 0xff, CTL)
#define RW10(opc, b1, fn, nm, fl, prc) OP(opc, 0, 10, prc, SCSI_OPF_MEDIA | (fl), fn, nm, \
	b1, 0xff, 0xff, 0xff, 0xff, 0x1f, 0xff, 0xff, CTL)
#define RW12(opc, b1, fn, nm, fl, prc) OP(opc, 0, 12, prc, SCSI_OPF_MEDIA | (fl), fn, nm, \
	b1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, CTL)
#define RW16(opc, b1, fn, nm, fl, prc) OP(opc, 0, 16, prc, SCSI_OPF_MEDIA | (fl), fn, nm, \
	b1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, CTL)

#define ALUA_ANY (SCSI_OPF_ALUA_SB | SCSI_OPF_ALUA_UA)
#define W (SCSI_OPF_WRITE)

/* Sorted by opcode, then service action. */
static const struct scsi_op scsi_ops[] = {
	OP(0x00, 0, 6, SCSI_PRC_ALLOW, 0, scsi_spc_test_unit_ready, "TEST UNIT READY",
	   0, 0, 0, 0, CTL),
	OP(0x03, 0, 6, SCSI_PRC_ALLOW, SCSI_OPF_NO_LU | SCSI_OPF_NO_UA | ALUA_ANY |
	   SCSI_OPF_RES2_OK, scsi_spc_request_sense, "REQUEST SENSE", 0x01, 0, 0, 0xff, CTL),
	RW6(0x08, scsi_sbc_rw, "READ(6)", 0, SCSI_PRC_READ),
	RW6(0x0a, scsi_sbc_rw, "WRITE(6)", W, SCSI_PRC_WRITE),
	OP(0x12, 0, 6, SCSI_PRC_ALLOW, SCSI_OPF_NO_LU | SCSI_OPF_NO_UA | ALUA_ANY |
	   SCSI_OPF_RES2_OK, scsi_spc_inquiry, "INQUIRY", 0x01, 0xff, 0xff, 0xff, CTL),
	OP(0x15, 0, 6, SCSI_PRC_WRITE, SCSI_OPF_ALUA_SB, scsi_spc_mode_select, "MODE SELECT(6)",
	   0x11, 0, 0, 0xff, CTL),
	OP(0x16, 0, 6, SCSI_PRC_OWN, SCSI_OPF_NOT_CLUSTER, scsi_pr_reserve6, "RESERVE(6)",
	   0, 0, 0, 0, CTL),
	OP(0x17, 0, 6, SCSI_PRC_OWN, SCSI_OPF_RES2_OK | SCSI_OPF_NOT_CLUSTER, scsi_pr_release6,
	   "RELEASE(6)", 0, 0, 0, 0, CTL),
	OP(0x1a, 0, 6, SCSI_PRC_READ, SCSI_OPF_ALUA_SB, scsi_spc_mode_sense, "MODE SENSE(6)",
	   0x08, 0xff, 0xff, 0xff, CTL),
	OP(0x1b, 0, 6, SCSI_PRC_WRITE, 0, scsi_spc_start_stop, "START STOP UNIT",
	   0x01, 0, 0x0f, 0xf7, CTL),
	OP(0x25, 0, 10, SCSI_PRC_ALLOW, 0, scsi_sbc_read_capacity10, "READ CAPACITY(10)",
	   0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0x01, CTL),
	RW10(0x28, 0xfe, scsi_sbc_rw, "READ(10)", 0, SCSI_PRC_READ),
	RW10(0x2a, 0xfa, scsi_sbc_rw, "WRITE(10)", W, SCSI_PRC_WRITE),
	RW10(0x2e, 0xf2, scsi_sbc_write_verify, "WRITE AND VERIFY(10)", W, SCSI_PRC_WRITE),
	RW10(0x2f, 0xf6, scsi_sbc_verify, "VERIFY(10)", 0, SCSI_PRC_READ),
	RW10(0x34, 0x02, scsi_sbc_prefetch, "PRE-FETCH(10)", 0, SCSI_PRC_READ),
	RW10(0x35, 0x02, scsi_sbc_sync_cache, "SYNCHRONIZE CACHE(10)", 0, SCSI_PRC_WRITE),
	RW10(0x41, 0xf8, scsi_sbc_write_same, "WRITE SAME(10)", W, SCSI_PRC_WRITE),
	OP(0x42, 0, 10, SCSI_PRC_WRITE, SCSI_OPF_MEDIA | W, scsi_sbc_unmap, "UNMAP",
	   0x01, 0, 0, 0, 0, 0x1f, 0xff, 0xff, CTL),
	OP(0x55, 0, 10, SCSI_PRC_WRITE, SCSI_OPF_ALUA_SB, scsi_spc_mode_select,
	   "MODE SELECT(10)", 0x11, 0, 0, 0, 0, 0, 0xff, 0xff, CTL),
	OP(0x5a, 0, 10, SCSI_PRC_READ, SCSI_OPF_ALUA_SB, scsi_spc_mode_sense, "MODE SENSE(10)",
	   0x18, 0xff, 0xff, 0, 0, 0, 0xff, 0xff, CTL),
	OP(0x5e, 0x00, 10, SCSI_PRC_ALLOW, SCSI_OPF_SA | SCSI_OPF_ALUA_SB, scsi_pr_in,
	   "PERSISTENT RESERVE IN", 0x00, 0, 0, 0, 0, 0, 0xff, 0xff, CTL),
	OP(0x5e, 0x01, 10, SCSI_PRC_ALLOW, SCSI_OPF_SA | SCSI_OPF_ALUA_SB, scsi_pr_in,
	   "PERSISTENT RESERVE IN", 0x01, 0, 0, 0, 0, 0, 0xff, 0xff, CTL),
	OP(0x5e, 0x02, 10, SCSI_PRC_ALLOW, SCSI_OPF_SA | SCSI_OPF_ALUA_SB, scsi_pr_in,
	   "PERSISTENT RESERVE IN", 0x02, 0, 0, 0, 0, 0, 0xff, 0xff, CTL),
	OP(0x5e, 0x03, 10, SCSI_PRC_ALLOW, SCSI_OPF_SA | SCSI_OPF_ALUA_SB, scsi_pr_in,
	   "PERSISTENT RESERVE IN", 0x03, 0, 0, 0, 0, 0, 0xff, 0xff, CTL),
#define PROUT(sa)                                                                          \
	OP(0x5f, sa, 10, SCSI_PRC_OWN, SCSI_OPF_SA | SCSI_OPF_ALUA_SB, scsi_pr_out,        \
	   "PERSISTENT RESERVE OUT", sa, 0xff, 0, 0, 0xff, 0xff, 0xff, 0xff, CTL)
	PROUT(0x00), PROUT(0x01), PROUT(0x02), PROUT(0x03), PROUT(0x04), PROUT(0x05),
	PROUT(0x06), PROUT(0x07),
#undef PROUT
	RW16(0x88, 0xfe, scsi_sbc_rw, "READ(16)", 0, SCSI_PRC_READ),
	OP(0x89, 0, 16, SCSI_PRC_WRITE, SCSI_OPF_MEDIA | W, scsi_sbc_compare_and_write,
	   "COMPARE AND WRITE", 0xfa, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0,
	   0xff, 0x1f, CTL),
	RW16(0x8a, 0xfa, scsi_sbc_rw, "WRITE(16)", W, SCSI_PRC_WRITE),
	RW16(0x8b, 0xf8, scsi_sbc_orwrite, "ORWRITE(16)", W, SCSI_PRC_WRITE),
	RW16(0x8e, 0xf2, scsi_sbc_write_verify, "WRITE AND VERIFY(16)", W, SCSI_PRC_WRITE),
	RW16(0x8f, 0xf6, scsi_sbc_verify, "VERIFY(16)", 0, SCSI_PRC_READ),
	RW16(0x90, 0x02, scsi_sbc_prefetch, "PRE-FETCH(16)", 0, SCSI_PRC_READ),
	RW16(0x91, 0x02, scsi_sbc_sync_cache, "SYNCHRONIZE CACHE(16)", 0, SCSI_PRC_WRITE),
	RW16(0x93, 0xf9, scsi_sbc_write_same, "WRITE SAME(16)", W, SCSI_PRC_WRITE),
	OP(0x9e, 0x10, 16, SCSI_PRC_ALLOW, SCSI_OPF_SA, scsi_sbc_read_capacity16,
	   "READ CAPACITY(16)", 0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	   0xff, 0xff, 0xff, 0x01, CTL),
	OP(0x9e, 0x12, 16, SCSI_PRC_READ, SCSI_OPF_SA | SCSI_OPF_MEDIA,
	   scsi_sbc_get_lba_status, "GET LBA STATUS", 0x12, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	   0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, CTL),
	OP(0xa0, 0, 12, SCSI_PRC_ALLOW, SCSI_OPF_NO_LU | SCSI_OPF_NO_UA | ALUA_ANY |
	   SCSI_OPF_RES2_OK, scsi_spc_report_luns, "REPORT LUNS", 0, 0xff, 0, 0, 0, 0xff, 0xff,
	   0xff, 0xff, 0, CTL),
	OP(0xa3, 0x0a, 12, SCSI_PRC_ALLOW, SCSI_OPF_SA | ALUA_ANY | SCSI_OPF_RES2_OK,
	   scsi_alua_report_tpgs, "REPORT TARGET PORT GROUPS", 0xea, 0, 0, 0, 0, 0xff, 0xff,
	   0xff, 0xff, 0, CTL),
	OP(0xa3, 0x0c, 12, SCSI_PRC_ALLOW, SCSI_OPF_SA | ALUA_ANY | SCSI_OPF_RES2_OK,
	   scsi_spc_report_opcodes, "REPORT SUPPORTED OPERATION CODES", 0x0c, 0x87, 0xff, 0xff,
	   0xff, 0xff, 0xff, 0xff, 0xff, 0, CTL),
	OP(0xa3, 0x0d, 12, SCSI_PRC_ALLOW, SCSI_OPF_SA | ALUA_ANY | SCSI_OPF_RES2_OK,
	   scsi_spc_report_tmfs, "REPORT SUPPORTED TASK MANAGEMENT FUNCTIONS", 0x0d, 0x80, 0,
	   0, 0xff, 0xff, 0xff, 0xff, 0, CTL),
	OP(0xa4, 0x0a, 12, SCSI_PRC_WRITE, SCSI_OPF_SA | ALUA_ANY, scsi_alua_set_tpgs,
	   "SET TARGET PORT GROUPS", 0x0a, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, CTL),
	RW12(0xa8, 0xfe, scsi_sbc_rw, "READ(12)", 0, SCSI_PRC_READ),
	RW12(0xaa, 0xfa, scsi_sbc_rw, "WRITE(12)", W, SCSI_PRC_WRITE),
	RW12(0xae, 0xf2, scsi_sbc_write_verify, "WRITE AND VERIFY(12)", W, SCSI_PRC_WRITE),
	RW12(0xaf, 0xf6, scsi_sbc_verify, "VERIFY(12)", 0, SCSI_PRC_READ),
};

#undef W

/* First table entry per opcode; built once (the table is constant, so races are benign). */
static const struct scsi_op *scsi_op_index[256];

__attribute__((constructor)) static void scsi_op_index_build(void)
{
	for (size_t i = GW_ARRAY_SIZE(scsi_ops); i-- > 0;)
		scsi_op_index[scsi_ops[i].opcode] = &scsi_ops[i];
}

const struct scsi_op *scsi_op_find(uint8_t opcode, uint8_t sa, bool *known_opcode)
{
	const struct scsi_op *op = scsi_op_index[opcode];
	const struct scsi_op *end = scsi_ops + GW_ARRAY_SIZE(scsi_ops);

	if (known_opcode)
		*known_opcode = op != NULL;
	if (!op || !(op->flags & SCSI_OPF_SA))
		return op;
	for (; op < end && op->opcode == opcode; op++)
		if (op->sa == sa)
			return op;
	return NULL;
}

const struct scsi_op *scsi_op_next(const struct scsi_op *prev)
{
	if (!prev)
		return scsi_ops;
	prev++;
	return prev < scsi_ops + GW_ARRAY_SIZE(scsi_ops) ? prev : NULL;
}

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
