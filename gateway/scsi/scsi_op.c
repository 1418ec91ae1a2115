// SPDX-License-Identifier: MIT
/*
 * The opcode table: per supported CDB its length, flags, reservation class, handler and CDB
 * usage data; its lookup (scsi_op_find, for the dispatcher) and REPORT SUPPORTED OPERATION
 * CODES, which is the table's own report and so lives beside it: one table, read in one file.
 *
 * Below the dispatcher (scsi_cmd.c), above the command groups it names (scsi_spc.c,
 * scsi_sbc.c, scsi_pr_cluster.c, scsi_pr.c, scsi_alua.c). It calls a handler only through its
 * entry; RSOC asks scsi_sbc.c whether COMPARE AND WRITE can be atomic here and uses the reply
 * helpers. Nothing below calls in here.
 */
#include <string.h>

#include "scsi_priv.h"

static int scsi_op_report(struct scsi_cmd *cmd);

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
	OP(0x5f, sa, 10, SCSI_PRC_OWN, SCSI_OPF_SA | SCSI_OPF_ALUA_SB, scsi_prc_out,       \
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
	   scsi_op_report, "REPORT SUPPORTED OPERATION CODES", 0x0c, 0x87, 0xff, 0xff,
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

/* REPORT SUPPORTED OPERATION CODES */

static uint32_t scsi_rsoc_timeouts(const struct scsi_op *op, uint8_t *d)
{
	memset(d, 0, 12);
	scsi_put16(&d[0], 0x0a);
	scsi_put32(&d[4], op->timeout);
	scsi_put32(&d[8], op->timeout);
	return 12;
}

static bool scsi_op_has_sa(uint8_t opcode)
{
	const struct scsi_op *op = scsi_op_find(opcode, 0, NULL);
	bool known;

	if (op)
		return op->flags & SCSI_OPF_SA;
	/* Opcode known but SA 0 is not one of its actions. */
	scsi_op_find(opcode, 0, &known);
	return known;
}

/* COMPARE AND WRITE is not reported where no gateway can make it atomic (VPD B0 says 0), nor
 * what a cluster refuses (SCSI_OPF_NOT_CLUSTER). */
static bool scsi_rsoc_supported(const struct scsi_cmd *cmd, const struct scsi_op *op)
{
	if ((op->flags & SCSI_OPF_NOT_CLUSTER) && scsi_dev_pr_cluster(cmd->dev))
		return false;
	return op->opcode != 0x89 || !cmd->lu ||
	       scsi_sbc_caw_max(cmd->dev, cmd->lu, cmd->itn ? cmd->itn->port : NULL) > 0;
}

static int scsi_op_report(struct scsi_cmd *cmd)
{
	const uint8_t *c = cmd->cdb;
	bool rctd = c[2] & 0x80;
	uint8_t opts = c[2] & 0x07, req_op = c[3];
	uint16_t req_sa = scsi_get16(&c[4]);
	uint32_t alloc = scsi_get32(&c[6]);
	const struct scsi_op *op = NULL;
	uint8_t b[2048];
	uint32_t n;

	if (c[1] & 0xe0 || c[2] & 0x78) {
		scsi_cmd_invalid_cdb(cmd, c[1] & 0xe0 ? 1 : 2, -1);
		return SCSI_CMD_DONE;
	}
	if (opts == 0) {
		n = 4;
		for (size_t i = 0; i < GW_ARRAY_SIZE(scsi_ops); i++) {
			uint8_t *d = &b[n];

			if (n + 20 > sizeof(b))
				break;
			op = &scsi_ops[i];
			if (!scsi_rsoc_supported(cmd, op))
				continue;
			memset(d, 0, 8);
			d[0] = op->opcode;
			scsi_put16(&d[2], op->sa);
			d[5] = (op->flags & SCSI_OPF_SA ? 0x01 : 0) | (rctd ? 0x02 : 0);
			scsi_put16(&d[6], op->cdb_len);
			n += 8;
			if (rctd)
				n += scsi_rsoc_timeouts(op, &b[n]);
		}
		scsi_put32(b, n - 4);
		scsi_cmd_data_in(cmd, b, n < alloc ? n : alloc);
		return SCSI_CMD_DONE;
	}
	if (opts > 3) {
		scsi_cmd_invalid_cdb(cmd, 2, 2);
		return SCSI_CMD_DONE;
	}
	if (opts == 1 && scsi_op_has_sa(req_op)) {
		scsi_cmd_invalid_cdb(cmd, 3, -1);
		return SCSI_CMD_DONE;
	}
	if (opts == 2 && !scsi_op_has_sa(req_op) && scsi_op_find(req_op, 0, NULL)) {
		scsi_cmd_invalid_cdb(cmd, 3, -1);
		return SCSI_CMD_DONE;
	}
	if (req_sa <= 0x1f)
		op = scsi_op_find(req_op, (uint8_t)req_sa, NULL);
	if (op && !(op->flags & SCSI_OPF_SA) && req_sa && opts != 1)
		op = NULL;	/* a service action was named for an opcode that has none */
	memset(b, 0, 4);
	if (op && !scsi_rsoc_supported(cmd, op))
		op = NULL;
	if (!op) {
		b[1] = 0x01;	/* not supported */
		n = 4;
	} else {
		b[1] = 0x03 | (rctd ? 0x80 : 0);	/* supported as the standard says */
		scsi_put16(&b[2], op->cdb_len);
		memcpy(&b[4], op->usage, op->cdb_len);
		n = 4 + op->cdb_len;
		if (rctd)
			n += scsi_rsoc_timeouts(op, &b[n]);
	}
	scsi_cmd_data_in(cmd, b, n < alloc ? n : alloc);
	return SCSI_CMD_DONE;
}
