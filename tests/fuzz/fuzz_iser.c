// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: the iSER datamover below the PDU layer (gateway/dmv/dmv_iser_wire.c), the
 * parts an initiator's bytes reach before the iSCSI layer sees a PDU. The first byte (mod 3)
 * says which; the rest is the input:
 *
 *   - 0: the input as one received Send (dmv_iser_msg_parse, with a MaxRecvDataSegmentLength
 *     taken from its last two bytes): every pointer it returns lies within the message, the
 *     lengths it returns fit in it, and a PDU's parts follow each other in place; a Hello's
 *     reply (dmv_iser_hdr_build_hello_reply) is a HelloReply of version 1 with the reject bit
 *     exactly when the Hello's version range misses 1;
 *   - 1: the input as CM private data (dmv_iser_cm_parse): a header only from 4 bytes on;
 *   - 2: the input as a sequence of STag table operations (3 bytes each: an operation, an ITT
 *     of 16 bits, so that runs of colliding ITTs are common), checked after each one against a
 *     plain array of every ITT: what find returns, the table's count, -ENOSPC exactly when the
 *     table is full and the ITT new. Within libFuzzer's 4096-byte inputs the table of
 *     ISER_TAGS (4096) slots is at most a third full: a full one (where every probe is long)
 *     is test_dmv_iser.c's, so that this harness runs fast.
 *
 * A failed check traps; a crash, a leak or a sanitizer report is a finding too.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dmv_iser.h"
#include "pdu.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

static bool within(const uint8_t *p, uint64_t len, const uint8_t *buf, size_t n)
{
	return p >= buf && (uint64_t)(p - buf) + len <= n;
}

/* Reads every byte of p (the iSCSI layer copies them), so that ASan judges the range. */
static void touch(const uint8_t *p, uint32_t len)
{
	volatile uint8_t x = 0;

	for (uint32_t k = 0; k < len; k++)
		x ^= p[k];
	(void)x;
}

static void fuzz_msg(const uint8_t *data, size_t size)
{
	struct dmv_iser_msg m;
	uint32_t max_dsl = size >= 2 ? (uint32_t)data[size - 2] << 8 | data[size - 1] : 8192;
	uint32_t n = size > UINT32_MAX ? UINT32_MAX : (uint32_t)size;
	/* A copy of its own size, so that ASan sees any read past the message. */
	uint8_t *buf = malloc(n ? n : 1);

	if (!buf)
		return;
	memcpy(buf, data, n);
	switch (dmv_iser_msg_parse(buf, n, max_dsl, &m)) {
	case ISER_MSG_PDU:
		CHECK(!(pdu_bhs_opcode(m.bhs) == ISC_OP_DATA_OUT && m.ahs_len));
		/* fall through */
	case ISER_MSG_REJECT:
		CHECK(within(m.bhs, ISC_BHS_LEN, buf, n));
		CHECK(m.ahs == m.bhs + ISC_BHS_LEN && within(m.ahs, m.ahs_len, buf, n));
		CHECK(m.data == m.ahs + m.ahs_len && within(m.data, m.dsl, buf, n));
		CHECK(m.bhs == buf + ISER_HDR_LEN && m.hdr.opcode == ISER_OP_CTRL);
		CHECK(!m.no_imm || (m.dsl == 0 && pdu_bhs_opcode(m.bhs) == ISC_OP_SCSI_CMD));
		if (m.no_imm)
			CHECK(m.hdr.flags & ISER_WSV);
		else
			CHECK(m.dsl == pdu_bhs_dsl(m.bhs));
		CHECK(m.ahs_len == pdu_bhs_ahs_len(m.bhs));
		touch(m.bhs, ISC_BHS_LEN + m.ahs_len + m.dsl);
		break;
	case ISER_MSG_HELLO: {
		uint8_t out[ISER_HDR_LEN];
		uint8_t maxver = m.hdr.raw[1] >> 4, minver = m.hdr.raw[1] & 0x0f;
		bool ok = minver <= ISER_VERSION && maxver >= ISER_VERSION;

		CHECK(n >= ISER_HDR_LEN);
		dmv_iser_hdr_build_hello_reply(out, &m.hdr, 16);
		CHECK(out[0] >> 4 == ISER_OP_HELLO_REPLY);
		CHECK(!!(out[0] & ISER_HELLO_REJ) == !ok);
		CHECK(out[1] >> 4 == ISER_VERSION);
		break;
	}
	case ISER_MSG_NO_HDR:
		CHECK(n < ISER_HDR_LEN);
		break;
	case ISER_MSG_BAD_OPCODE:
		CHECK(m.hdr.opcode != ISER_OP_CTRL && m.hdr.opcode != ISER_OP_HELLO);
		break;
	case ISER_MSG_SHORT:
		CHECK(n < ISER_HDR_LEN + ISC_BHS_LEN);
		break;
	case ISER_MSG_BAD_BHS:
		CHECK(m.why != NULL);
		break;
	case ISER_MSG_OVERRUN:
		CHECK((uint64_t)ISER_HDR_LEN + ISC_BHS_LEN + m.ahs_len + m.dsl > n);
		break;
	case ISER_MSG_DATAOUT_AHS:
		CHECK(pdu_bhs_opcode(m.bhs) == ISC_OP_DATA_OUT && m.ahs_len);
		break;
	default:
		CHECK(0);
	}
	free(buf);
}

static void fuzz_cm(const uint8_t *data, size_t size)
{
	struct dmv_iser_cm_info ci;
	uint8_t out[ISER_CM_HDR_LEN];

	dmv_iser_cm_parse(size ? data : NULL, size, &ci);
	CHECK(ci.have_hdr == (size >= ISER_CM_HDR_LEN));
	if (ci.have_hdr) {
		CHECK(ci.zbva_not_sup == !!(data[0] & ISER_CM_ZBVA_NOT_SUP));
		CHECK(ci.send_inv_not_sup == !!(data[0] & ISER_CM_SEND_W_INV_NOT_SUP));
	} else {
		CHECK(ci.send_inv_not_sup);
	}
	dmv_iser_cm_build(out, ci.send_inv_not_sup);
	CHECK(out[0] & ISER_CM_ZBVA_NOT_SUP);
}

/* The model: every 16-bit ITT, whether the table holds it and the read STag it was given;
 * only the ITTs an input names are touched (and cleared after it). */
#define TAG_OPS_MAX 8192
static struct {
	bool in[65536];
	uint32_t stag[65536];
	uint32_t n;
	uint16_t named[TAG_OPS_MAX];
} md;

static void fuzz_tags(const uint8_t *data, size_t size)
{
	static struct dmv_iser_tag slot[ISER_TAGS];
	struct dmv_iser_tags tt = { .slot = slot };
	size_t nops = size / 3 < TAG_OPS_MAX ? size / 3 : TAG_OPS_MAX;

	memset(slot, 0, sizeof(slot));
	md.n = 0;
	for (size_t k = 0; k < nops; k++) {
		const uint8_t *b = data + 3 * k;
		uint8_t op = b[0] % 4;
		uint16_t itt = (uint16_t)(b[1] << 8 | b[2]);
		struct dmv_iser_tag *e;

		md.named[k] = itt;
		if (op <= 1) {
			/* Two sets in four: long inputs fill the table. */
			struct dmv_iser_tag v = { .itt = itt, .rsv = true, .read_stag = (uint32_t)k };
			int r = dmv_iser_tag_set(&tt, &v);

			if (r) {
				CHECK(r == -ENOSPC && !md.in[itt] && md.n == ISER_TAGS);
			} else {
				CHECK(md.in[itt] || md.n < ISER_TAGS);
				if (!md.in[itt])
					md.n++;
				md.in[itt] = true;
				md.stag[itt] = (uint32_t)k;
			}
		} else if (op == 2) {
			dmv_iser_tag_del(&tt, itt);
			if (md.in[itt])
				md.n--;
			md.in[itt] = false;
		}
		e = dmv_iser_tag_find(&tt, itt);
		CHECK(!e == !md.in[itt]);
		CHECK(!e || (e->itt == itt && e->used && e->read_stag == md.stag[itt]));
		CHECK(tt.n == md.n);
	}
	/* Every ITT the model holds is still found, with its own STag; then the model is
	 * cleared for the next input. */
	for (size_t k = 0; k < nops; k++) {
		uint16_t itt = md.named[k];
		const struct dmv_iser_tag *e;

		if (!md.in[itt])
			continue;
		e = dmv_iser_tag_find(&tt, itt);
		CHECK(e && e->read_stag == md.stag[itt]);
		md.in[itt] = false;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	switch (data[0] % 3) {
	case 0:
		fuzz_msg(data + 1, size - 1);
		break;
	case 1:
		fuzz_cm(data + 1, size - 1);
		break;
	default:
		fuzz_tags(data + 1, size - 1);
	}
	return 0;
}
