/* SPDX-License-Identifier: MIT */
/*
 * iSCSI PDUs (RFC 7143 §11): the 48-byte Basic Header Segment, its opcodes and fields, and the
 * pooled, reference-counted PDU object every layer passes around. A PDU owns its AHS and its
 * data segment buffer, or points at someone else's memory (Data-In from a task buffer): the
 * data buffer is kept when the PDU goes back to the pool, so a warm connection allocates
 * nothing per PDU. Validation of received headers lives here too, so the transports and the
 * iSCSI layer agree on what is malformed.
 *
 * Its own module (gateway/pdu/) below both the datamovers and the iSCSI engine, so neither
 * includes the other to get the type they pass between them. Its symbols carry its own
 * prefix, pdu_; the iSCSI wire constants keep the protocol's ISC_ names.
 */
#ifndef PDU_H
#define PDU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gw_buf.h"
#include "gw_list.h"

#define ISC_BHS_LEN		48
#define ISC_DIGEST_LEN		4
#define ISC_RSVD_TAG		0xffffffffu	/* reserved ITT / TTT value */
#define ISC_DSL_MAX		0xffffffu	/* 24-bit DataSegmentLength */

/* Opcodes, initiator to target */
enum {
	ISC_OP_NOP_OUT = 0x00,
	ISC_OP_SCSI_CMD = 0x01,
	ISC_OP_TMF_REQ = 0x02,
	ISC_OP_LOGIN_REQ = 0x03,
	ISC_OP_TEXT_REQ = 0x04,
	ISC_OP_DATA_OUT = 0x05,
	ISC_OP_LOGOUT_REQ = 0x06,
	ISC_OP_SNACK = 0x10,
};

/* Opcodes, target to initiator */
enum {
	ISC_OP_NOP_IN = 0x20,
	ISC_OP_SCSI_RSP = 0x21,
	ISC_OP_TMF_RSP = 0x22,
	ISC_OP_LOGIN_RSP = 0x23,
	ISC_OP_TEXT_RSP = 0x24,
	ISC_OP_DATA_IN = 0x25,
	ISC_OP_LOGOUT_RSP = 0x26,
	ISC_OP_R2T = 0x31,
	ISC_OP_ASYNC = 0x32,
	ISC_OP_REJECT = 0x3f,
};

/* Byte 0 */
#define ISC_BHS_I		0x40	/* immediate delivery */
#define ISC_BHS_OPMASK		0x3f
/* Byte 1 flags */
#define ISC_FL_F		0x80	/* final */
#define ISC_FL_R		0x40	/* SCSI Command: read */
#define ISC_FL_W		0x20	/* SCSI Command: write */
#define ISC_FL_ATTR		0x07	/* SCSI Command: task attribute */
#define ISC_FL_C		0x40	/* Text / Login: continue */
#define ISC_FL_T		0x80	/* Login: transit */
#define ISC_FL_A		0x40	/* Data-In: acknowledge */
#define ISC_FL_BO		0x10	/* SCSI Response: bidi read overflow */
#define ISC_FL_BU		0x08	/* SCSI Response: bidi read underflow */
#define ISC_FL_O		0x04	/* residual overflow */
#define ISC_FL_U		0x02	/* residual underflow */
#define ISC_FL_S		0x01	/* Data-In: status present */

/* Reject reasons (RFC 7143 §11.17.1) */
enum {
	ISC_REJ_DATA_DIGEST = 0x02,
	ISC_REJ_SNACK = 0x03,
	ISC_REJ_PROTOCOL = 0x04,
	ISC_REJ_CMD_NOT_SUPPORTED = 0x05,
	ISC_REJ_IMMEDIATE = 0x06,
	ISC_REJ_TASK_IN_PROGRESS = 0x07,
	ISC_REJ_INVALID_DATA_ACK = 0x08,
	ISC_REJ_INVALID_FIELD = 0x09,
	ISC_REJ_LONG_OP = 0x0a,
	ISC_REJ_WAITING_LOGOUT = 0x0c,
};

/* Big-endian field access; offsets are RFC 7143 byte numbers within the BHS. */
static inline uint32_t pdu_get32(const uint8_t *b, size_t off)
{
	return (uint32_t)b[off] << 24 | (uint32_t)b[off + 1] << 16 | (uint32_t)b[off + 2] << 8 |
	       b[off + 3];
}

static inline uint16_t pdu_get16(const uint8_t *b, size_t off)
{
	return (uint16_t)(b[off] << 8 | b[off + 1]);
}

static inline uint32_t pdu_get24(const uint8_t *b, size_t off)
{
	return (uint32_t)b[off] << 16 | (uint32_t)b[off + 1] << 8 | b[off + 2];
}

static inline void pdu_put32(uint8_t *b, size_t off, uint32_t v)
{
	b[off] = (uint8_t)(v >> 24);
	b[off + 1] = (uint8_t)(v >> 16);
	b[off + 2] = (uint8_t)(v >> 8);
	b[off + 3] = (uint8_t)v;
}

static inline void pdu_put16(uint8_t *b, size_t off, uint16_t v)
{
	b[off] = (uint8_t)(v >> 8);
	b[off + 1] = (uint8_t)v;
}

static inline void pdu_put24(uint8_t *b, size_t off, uint32_t v)
{
	b[off] = (uint8_t)(v >> 16);
	b[off + 1] = (uint8_t)(v >> 8);
	b[off + 2] = (uint8_t)v;
}

/* Common fields */
static inline uint8_t pdu_bhs_opcode(const uint8_t *bhs)
{
	return bhs[0] & ISC_BHS_OPMASK;
}

static inline bool pdu_bhs_immediate(const uint8_t *bhs)
{
	return bhs[0] & ISC_BHS_I;
}

static inline uint32_t pdu_bhs_ahs_len(const uint8_t *bhs)
{
	return (uint32_t)bhs[4] * 4;
}

static inline uint32_t pdu_bhs_dsl(const uint8_t *bhs)
{
	return pdu_get24(bhs, 5);
}

static inline uint32_t pdu_bhs_itt(const uint8_t *bhs)
{
	return pdu_get32(bhs, 16);
}

/* Serial number arithmetic (RFC 1982, 32 bits) as CmdSN/StatSN use it. */
static inline bool pdu_sn_lt(uint32_t a, uint32_t b)
{
	return a != b && (int32_t)(a - b) < 0;
}

static inline bool pdu_sn_le(uint32_t a, uint32_t b)
{
	return a == b || (int32_t)(a - b) < 0;
}

/* Round a data segment length up to its 4-byte padded size. */
static inline uint32_t pdu_pad4(uint32_t n)
{
	return (n + 3) & ~3u;
}

struct pdu_pool;
struct pdu;

typedef void (*pdu_done_fn)(struct pdu *pdu, int status);

struct pdu {
	uint8_t bhs[ISC_BHS_LEN];
	uint8_t *ahs;			/* malloc'ed, ahs_len bytes (multiple of 4), or NULL */
	uint32_t ahs_len;
	uint8_t *data;			/* data segment: own buffer or borrowed (data_ext) */
	uint32_t data_len;
	uint32_t data_cap;		/* capacity of the own buffer (kept across reuse) */
	uint8_t *own;			/* the own buffer, even while data is borrowed */
	bool data_ext;
	int refcnt;
	struct pdu_pool *pool;
	/* Send side: the transport links queued PDUs here and calls done (if set) once the
	 * PDU has left (status 0) or was dropped with the connection (-ECONNRESET). */
	struct gw_list node;
	pdu_done_fn done;
	void *priv;
	/* Transport scratch: wire progress and digests, filled when queued. */
	uint32_t tx_off;
	uint8_t hdig[ISC_DIGEST_LEN];
	uint8_t ddig[ISC_DIGEST_LEN];
	bool tx_hdig, tx_ddig;
};

/* Own buffers above this size are freed rather than kept when a PDU is recycled. */
#define ISC_PDU_KEEP_MAX (256u * 1024)
/* What a pool's free PDUs keep in own buffers at most (bytes): a PDU recycled beyond it gives
 * its buffer back. Without it a burst of writes with large immediate data left up to 1024 x
 * 256 KiB per loop cached for good. */
#define ISC_PDU_KEPT_MAX (8u << 20)

struct pdu_pool {
	struct gw_list free;
	size_t nfree, max_free;
	size_t live;			/* PDUs handed out and not yet put */
	size_t kept;			/* bytes of own buffers on the free list */
};

/* What a pool keeps for reuse (bytes): its free PDUs and their buffers. */
size_t pdu_pool_cached_bytes(const struct pdu_pool *pp);

/* max: PDUs kept on the free list (0: 1024); beyond it, put frees. */
void pdu_pool_init(struct pdu_pool *pp, size_t max);
void pdu_pool_fini(struct pdu_pool *pp);

/* A zeroed BHS with refcnt 1, no data. NULL on ENOMEM / pool exhausted. */
struct pdu *pdu_get(struct pdu_pool *pp);
void pdu_ref(struct pdu *pdu);
/* Drops a reference; the last one returns the PDU to its pool (without calling done). */
void pdu_put(struct pdu *pdu);

/* Makes the own buffer hold len bytes (contents undefined), sets data = own, data_len = len and
 * the BHS DataSegmentLength. 0 or -ENOMEM. */
int pdu_alloc_data(struct pdu *pdu, uint32_t len);
/* Copies len bytes in as the data segment. 0 or -ENOMEM. */
int pdu_set_data(struct pdu *pdu, const void *p, uint32_t len);
/* Points the data segment at borrowed memory, which must outlive the send. */
void pdu_set_ext_data(struct pdu *pdu, void *p, uint32_t len);
/* Allocates the AHS (len a multiple of 4, <= 1020) and sets TotalAHSLength. 0 or -errno. */
int pdu_alloc_ahs(struct pdu *pdu, uint32_t len);

/* Header validation result for a received BHS. */
enum pdu_bhs_verdict {
	ISC_BHS_OK,
	ISC_BHS_BAD_OPCODE,	/* not an initiator opcode: Reject 0x05 */
	ISC_BHS_BAD_FIELD,	/* reserved/ill-formed field: Reject 0x04/0x09 (see *reason) */
	ISC_BHS_FATAL,		/* lengths cannot be trusted: drop the connection */
};

/*
 * Checks a BHS received from an initiator. max_dsl is the largest DataSegmentLength the target
 * accepts on this connection (its MaxRecvDataSegmentLength, or 8192 during login). *reason gets
 * the Reject reason for BAD_OPCODE / BAD_FIELD, and *why a message for the log.
 */
enum pdu_bhs_verdict pdu_bhs_check(const uint8_t *bhs, uint32_t max_dsl, uint8_t *reason,
				   const char **why);

const char *pdu_opcode_name(uint8_t opcode);

#endif
