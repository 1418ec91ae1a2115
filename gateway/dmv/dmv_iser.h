/* SPDX-License-Identifier: MIT */
/*
 * The iSER datamover's wire formats (RFC 7145 §9 and §5.1.3) and its per-command STag table:
 * the parts of dmv_iser.c that need no RDMA device, apart so they stay small and testable.
 */
#ifndef DMV_ISER_H
#define DMV_ISER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ISER_HDR_LEN		28
#define ISER_OP_CTRL		0x1	/* iSCSI control-type PDU follows */
#define ISER_OP_HELLO		0x2
#define ISER_OP_HELLO_REPLY	0x3
#define ISER_WSV		0x08	/* write STag valid */
#define ISER_RSV		0x04	/* read STag valid */
#define ISER_HELLO_REJ		0x01	/* HelloReply: reject */
#define ISER_VERSION		1

/* iSER CM private data (RFC 7145 §5.1.3 / Linux iser_cm_hdr): flags byte + 3 reserved. */
#define ISER_CM_HDR_LEN		4
#define ISER_CM_ZBVA_NOT_SUP	0x80
#define ISER_CM_SEND_W_INV_NOT_SUP	0x40

struct dmv_iser_hdr {
	uint8_t opcode;			/* high nibble of the flags byte */
	uint8_t flags;			/* low nibble: WSV, RSV (Hello: version bits elsewhere) */
	uint32_t write_stag;
	uint64_t write_va;
	uint32_t read_stag;
	uint64_t read_va;
	uint8_t raw[4];			/* bytes 0..3 as received (Hello carries versions there) */
};
/* Parses the 28-byte iSER header at b (len bytes available). 0 or -EPROTO. */
int dmv_iser_hdr_parse(const uint8_t *b, size_t len, struct dmv_iser_hdr *h);
/* The header of a target-to-initiator control PDU: no STags. */
void dmv_iser_hdr_build_ctrl(uint8_t *b);
/* HelloReply to a Hello: version 1, or the reject bit when the Hello's range misses it. */
void dmv_iser_hdr_build_hello_reply(uint8_t *b, const struct dmv_iser_hdr *hello, uint16_t ord);

struct dmv_iser_cm_info {
	bool have_hdr;			/* the initiator sent the iSER CM header */
	bool zbva_not_sup;
	bool send_inv_not_sup;
};
/* The initiator's CM private data; without a header, Send with Invalidate is off. */
void dmv_iser_cm_parse(const void *pd, size_t len, struct dmv_iser_cm_info *ci);
/* The target's CM private data. */
void dmv_iser_cm_build(uint8_t *b, bool use_send_inv);

/* One received Send, judged before anything acts on it (dmv_iser_msg_parse). */
enum dmv_iser_msg_kind {
	ISER_MSG_PDU,			/* an iSCSI PDU: bhs, ahs, data within the message */
	ISER_MSG_HELLO,			/* a Hello: answer with a HelloReply */
	ISER_MSG_REJECT,		/* a PDU to answer with a Reject (reason, why) */
	ISER_MSG_NO_HDR,		/* the rest drop the connection: shorter than the iSER header */
	ISER_MSG_BAD_OPCODE,		/* an iSER opcode other than control and Hello */
	ISER_MSG_SHORT,			/* too short for a BHS */
	ISER_MSG_BAD_BHS,		/* a BHS whose lengths cannot be trusted (why) */
	ISER_MSG_OVERRUN,		/* AHS and data longer than the message */
	ISER_MSG_DATAOUT_AHS,		/* a Data-Out with an AHS */
};

struct dmv_iser_msg {
	struct dmv_iser_hdr hdr;
	const uint8_t *bhs, *ahs, *data;	/* ISER_MSG_PDU, ISER_MSG_REJECT; bhs from SHORT on */
	uint32_t ahs_len, dsl;
	/* A SCSI Command announcing immediate data its Send does not carry, with a write STag
	 * (libiscsi 1.19): dsl is 0 and the whole write comes by RDMA Read. */
	bool no_imm;
	uint8_t reason;			/* ISER_MSG_REJECT: the Reject reason */
	const char *why;		/* ISER_MSG_REJECT, ISER_MSG_BAD_BHS */
};
/* Judges the n-byte Send at buf against max_recv_dsl; every pointer it sets lies within it. */
enum dmv_iser_msg_kind dmv_iser_msg_parse(const uint8_t *buf, uint32_t n, uint32_t max_recv_dsl,
					  struct dmv_iser_msg *m);

/* Per-command STags: what a SCSI Command's iSER header said, by ITT, until its response */
#define ISER_TAGS	4096		/* > any command window the gateway grants */

struct dmv_iser_tag {
	uint32_t itt;
	bool used;
	bool rsv, wsv;
	uint32_t read_stag, write_stag;
	uint64_t read_va, write_va;
};

struct dmv_iser_tags {
	struct dmv_iser_tag *slot;		/* ISER_TAGS entries, open addressing */
	uint32_t n;
};
/* NULL when itt has no STags recorded. */
struct dmv_iser_tag *dmv_iser_tag_find(struct dmv_iser_tags *tt, uint32_t itt);
/* Records (or replaces) itt's STags. -ENOSPC when the table is full. */
int dmv_iser_tag_set(struct dmv_iser_tags *tt, const struct dmv_iser_tag *v);
/* Forgets itt (no tombstones: later entries of its probe run move back). */
void dmv_iser_tag_del(struct dmv_iser_tags *tt, uint32_t itt);

#endif
