// SPDX-License-Identifier: MIT
/*
 * iSER wire formats and the STag table (see dmv_iser.h): byte layouts as RFC 7145 gives them,
 * big-endian, and an open-addressing table keyed by ITT that lives as long as a command.
 */
#include <errno.h>
#include <string.h>

#include "dmv_iser.h"
#include "pdu.h"

static uint64_t dmv_iser_get64(const uint8_t *b)
{
	return (uint64_t)pdu_get32(b, 0) << 32 | pdu_get32(b, 4);
}

/* Parses the 28-byte iSER header at b (len bytes available). 0 or -EPROTO. */
int dmv_iser_hdr_parse(const uint8_t *b, size_t len, struct dmv_iser_hdr *h)
{
	if (len < ISER_HDR_LEN)
		return -EPROTO;
	memcpy(h->raw, b, 4);
	h->opcode = b[0] >> 4;
	h->flags = b[0] & 0x0f;
	h->write_stag = pdu_get32(b, 4);
	h->write_va = dmv_iser_get64(b + 8);
	h->read_stag = pdu_get32(b, 16);
	h->read_va = dmv_iser_get64(b + 20);
	return 0;
}

/* Builds the header of a target-to-initiator control PDU: no STags (RFC 7145 §9.2). */
void dmv_iser_hdr_build_ctrl(uint8_t *b)
{
	memset(b, 0, ISER_HDR_LEN);
	b[0] = ISER_OP_CTRL << 4;
}

/* HelloReply (RFC 7145 §9.4): version 1 only; reject when the Hello's range misses it. */
void dmv_iser_hdr_build_hello_reply(uint8_t *b, const struct dmv_iser_hdr *hello, uint16_t ord)
{
	uint8_t maxver = hello->raw[1] >> 4, minver = hello->raw[1] & 0x0f;
	bool ok = minver <= ISER_VERSION && maxver >= ISER_VERSION;

	memset(b, 0, ISER_HDR_LEN);
	b[0] = (uint8_t)(ISER_OP_HELLO_REPLY << 4 | (ok ? 0 : ISER_HELLO_REJ));
	b[1] = ISER_VERSION << 4 | (ok ? ISER_VERSION : 0);
	pdu_put16(b, 2, ord);
}

enum dmv_iser_msg_kind dmv_iser_msg_parse(const uint8_t *buf, uint32_t n, uint32_t max_recv_dsl,
					  struct dmv_iser_msg *m)
{
	enum pdu_bhs_verdict v;
	uint64_t need;

	memset(m, 0, sizeof(*m));
	if (dmv_iser_hdr_parse(buf, n, &m->hdr))
		return ISER_MSG_NO_HDR;
	if (m->hdr.opcode == ISER_OP_HELLO)
		return ISER_MSG_HELLO;
	if (m->hdr.opcode != ISER_OP_CTRL)
		return ISER_MSG_BAD_OPCODE;
	if (n < ISER_HDR_LEN + ISC_BHS_LEN)
		return ISER_MSG_SHORT;
	m->bhs = buf + ISER_HDR_LEN;
	v = pdu_bhs_check(m->bhs, max_recv_dsl, &m->reason, &m->why);
	if (v == ISC_BHS_FATAL)
		return ISER_MSG_BAD_BHS;
	m->ahs_len = pdu_bhs_ahs_len(m->bhs);
	m->dsl = pdu_bhs_dsl(m->bhs);
	need = (uint64_t)ISER_HDR_LEN + ISC_BHS_LEN + m->ahs_len;
	if (need + m->dsl > n && need == n && pdu_bhs_opcode(m->bhs) == ISC_OP_SCSI_CMD &&
	    (m->hdr.flags & ISER_WSV)) {
		m->dsl = 0;
		m->no_imm = true;
	}
	if (need + m->dsl > n)
		return ISER_MSG_OVERRUN;
	m->ahs = m->bhs + ISC_BHS_LEN;
	m->data = m->ahs + m->ahs_len;
	if (v != ISC_BHS_OK)
		return ISER_MSG_REJECT;
	if (pdu_bhs_opcode(m->bhs) == ISC_OP_DATA_OUT && m->ahs_len)
		return ISER_MSG_DATAOUT_AHS;
	return ISER_MSG_PDU;
}

void dmv_iser_cm_parse(const void *pd, size_t len, struct dmv_iser_cm_info *ci)
{
	const uint8_t *b = pd;

	memset(ci, 0, sizeof(*ci));
	if (!pd || len < ISER_CM_HDR_LEN) {
		/* Without the header nothing says the peer can take Send with Invalidate. */
		ci->send_inv_not_sup = true;
		return;
	}
	ci->have_hdr = true;
	ci->zbva_not_sup = b[0] & ISER_CM_ZBVA_NOT_SUP;
	ci->send_inv_not_sup = b[0] & ISER_CM_SEND_W_INV_NOT_SUP;
}

/* The target's CM private data: it never uses zero-based VAs (it takes the initiator's VAs as
 * given), and says whether it will invalidate the initiator's STags with its responses. */
void dmv_iser_cm_build(uint8_t *b, bool use_send_inv)
{
	memset(b, 0, ISER_CM_HDR_LEN);
	b[0] = ISER_CM_ZBVA_NOT_SUP | (use_send_inv ? 0 : ISER_CM_SEND_W_INV_NOT_SUP);
}

static uint32_t dmv_iser_tag_hash(uint32_t itt)
{
	return (itt * 2654435761u) & (ISER_TAGS - 1);
}

struct dmv_iser_tag *dmv_iser_tag_find(struct dmv_iser_tags *tt, uint32_t itt)
{
	uint32_t i = dmv_iser_tag_hash(itt), k;

	for (k = 0; k < ISER_TAGS; k++, i = (i + 1) & (ISER_TAGS - 1)) {
		if (!tt->slot[i].used)
			return NULL;
		if (tt->slot[i].itt == itt)
			return &tt->slot[i];
	}
	return NULL;
}

/* Records (or replaces) itt's STags. -ENOSPC when the table is full. */
int dmv_iser_tag_set(struct dmv_iser_tags *tt, const struct dmv_iser_tag *v)
{
	uint32_t i = dmv_iser_tag_hash(v->itt), k;

	for (k = 0; k < ISER_TAGS; k++, i = (i + 1) & (ISER_TAGS - 1)) {
		if (tt->slot[i].used && tt->slot[i].itt != v->itt)
			continue;
		if (!tt->slot[i].used)
			tt->n++;
		tt->slot[i] = *v;
		tt->slot[i].used = true;
		return 0;
	}
	return -ENOSPC;
}

/* Removes itt, shifting later entries of its probe run back (no tombstones). */
void dmv_iser_tag_del(struct dmv_iser_tags *tt, uint32_t itt)
{
	struct dmv_iser_tag *e = dmv_iser_tag_find(tt, itt);
	uint32_t i, j, h, k;

	if (!e)
		return;
	i = (uint32_t)(e - tt->slot);
	tt->n--;
	j = i;
	/* A full table has no empty slot to stop at: one lap at most. */
	for (k = 1; k < ISER_TAGS; k++) {
		j = (j + 1) & (ISER_TAGS - 1);
		if (!tt->slot[j].used)
			break;
		h = dmv_iser_tag_hash(tt->slot[j].itt);
		/* Entry j may move to the hole at i if its home is not in (i, j]. */
		if (i <= j ? (h <= i || h > j) : (h <= i && h > j)) {
			tt->slot[i] = tt->slot[j];
			i = j;
		}
	}
	tt->slot[i].used = false;
}
