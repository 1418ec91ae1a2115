// SPDX-License-Identifier: MIT
/*
 * The opcode table (scsi_op.c): every entry is found by its opcode and service action (a
 * misplaced row would make a supported command unknown to the dispatcher), and REPORT
 * SUPPORTED OPERATION CODES lists the table as the dispatcher runs it.
 */
#include "scsi_test.h"

#include "../../../gateway/scsi/scsi_op.c"

static struct tenv e;

static void setup(void)
{
	tenv_init(&e);
	cr_assert_eq(tenv_add_lu(&e, 0, 1 << 20, 512, true, false), 0);
	tenv_clear_ua(&e, e.a, 0);
}

static void teardown(void)
{
	tenv_fini(&e);
}

TestSuite(scsi_op, .init = setup, .fini = teardown);

/* scsi_op_find indexes the first row of each opcode and walks on from there: the rows must be
 * sorted by opcode, then service action, or a later action is never found. */
Test(scsi_op, every_row_is_found_by_its_opcode_and_service_action)
{
	for (size_t i = 0; i < GW_ARRAY_SIZE(scsi_ops); i++) {
		const struct scsi_op *op = &scsi_ops[i];
		bool known = false;

		if (i > 0)
			cr_expect(scsi_ops[i - 1].opcode < op->opcode ||
				  (scsi_ops[i - 1].opcode == op->opcode &&
				   scsi_ops[i - 1].sa < op->sa), "%s: out of order", op->name);
		cr_expect_eq(scsi_op_find(op->opcode, op->sa, &known), op, "%s", op->name);
		cr_expect(known, "%s", op->name);
		cr_expect_eq(op->usage[0], op->opcode, "%s: usage data", op->name);
		cr_expect_leq(op->cdb_len, sizeof(op->usage), "%s", op->name);
	}
	/* Not in the table: unknown, and an unknown action of a known opcode is told apart. */
	{
		bool known = true;

		cr_expect_null(scsi_op_find(0xc7, 0, &known));
		cr_expect_not(known);
		cr_expect_null(scsi_op_find(0x9e, 0x1f, &known));
		cr_expect(known);
	}
}

/* The list of all commands is the table, in its order, one descriptor per row. */
Test(scsi_op, report_supported_opcodes_lists_the_table)
{
	static uint8_t b[8192];
	struct tcmd t;
	uint32_t len;

	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0xa3, 0x0c, 0, 0, 0, 0, 0, 0, 0x20, 0, 0, 0),
			      b, 8192, SCSI_DIR_READ), SCSI_GOOD);
	len = be32(b);
	cr_assert_eq(len, 8 * GW_ARRAY_SIZE(scsi_ops));
	for (size_t i = 0; i < GW_ARRAY_SIZE(scsi_ops); i++) {
		const uint8_t *d = &b[4 + 8 * i];

		cr_expect_eq(d[0], scsi_ops[i].opcode, "%s", scsi_ops[i].name);
		cr_expect_eq(be16(&d[2]), scsi_ops[i].sa, "%s", scsi_ops[i].name);
		cr_expect_eq(be16(&d[6]), scsi_ops[i].cdb_len, "%s", scsi_ops[i].name);
	}
}

Test(scsi_op, report_supported_opcodes)
{
	static uint8_t b[8192];
	struct tcmd t;
	bool read10 = false;
	uint32_t len;

	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0xa3, 0x0c, 0, 0, 0, 0, 0, 0, 0x20, 0, 0, 0),
			      b, 8192, SCSI_DIR_READ), SCSI_GOOD);
	len = be32(b);
	cr_assert_gt(len, 8 * 30);
	for (uint32_t off = 4; off < 4 + len; off += 8) {
		uint8_t op = b[off];
		uint16_t sa = be16(&b[off + 2]);
		bool has_sa = b[off + 5] & 1;
		uint8_t one[64];
		struct tcmd t1;

		if (op == 0x28)
			read10 = be16(&b[off + 6]) == 10;
		/* Asking for each one works, and the usage data starts with the opcode. */
		cr_assert_eq(tcmd_run(&e, &t1, e.a, 0, CDB(0xa3, 0x0c, has_sa ? 2 : 1, op,
							   sa >> 8, sa, 0, 0, 0, 64, 0, 0),
				      one, 64, SCSI_DIR_READ), SCSI_GOOD, "opcode %#x/%#x", op, sa);
		cr_assert_eq(one[1] & 7, 3, "supported");
		cr_assert_eq(one[4], op);
		cr_assert_eq(be16(&one[2]), be16(&b[off + 6]));
		/* The wrong reporting option for it is an invalid field. */
		tcmd_run(&e, &t1, e.a, 0, CDB(0xa3, 0x0c, has_sa ? 1 : 2, op, sa >> 8, sa, 0, 0, 0,
					      64, 0, 0), one, 64, SCSI_DIR_READ);
		cr_assert_sense(&t1, SCSI_SK_ILLEGAL_REQUEST, 0x24, 0x00);
	}
	cr_assert(read10);
	/* With RCTD every descriptor carries a timeouts descriptor. */
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0xa3, 0x0c, 0x80, 0, 0, 0, 0, 0, 0x20, 0, 0, 0),
			      b, 8192, SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(be32(b) % 20, 0);
	cr_assert_eq(b[4 + 5] & 0x02, 0x02, "CTDP");
	/* Unsupported opcode, asked alone: reported as not supported. */
	cr_assert_eq(tcmd_run(&e, &t, e.a, 0, CDB(0xa3, 0x0c, 1, 0xc7, 0, 0, 0, 0, 0, 64, 0, 0),
			      b, 64, SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(b[1] & 7, 1);
}
