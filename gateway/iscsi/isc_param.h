/* SPDX-License-Identifier: MIT */
/*
 * iSCSI text key negotiation, target side (RFC 7143 §6, §13; RFC 7145 §6 for iSER keys).
 *
 * Owns: parsing "key=value\0..." data segments into key lists, one declarative table of every
 * key the target knows (phase, sender, result function, range, default, scope), the answers the
 * target gives, and the final negotiated values as a plain struct. Pure: no sockets, no loop.
 *
 * Contract with the login/text code (gateway/iscsi/isc_login*.c):
 *   1. Join the data segments of a request that spans PDUs (C bit) and parse them with
 *      isc_kvlist_parse(). Malformed text is a protocol error: login status 0x0200.
 *   2. On the first Login Request of a connection, read InitiatorName / TargetName /
 *      SessionType with isc_kvlist_get() to pick the target and its isc_param_conf.
 *   3. isc_neg_create() with that conf, leading or not, transport caps, and for a non-leading
 *      connection the session's negotiated isc_params.
 *   4. For each request (Login in stage CSG, or Text in full feature phase) call
 *      isc_neg_process(): it appends the answers to the response buffer and returns 0, or
 *      -EPROTO / -EINVAL with *status set to the login status to close with. Security keys
 *      (AuthMethod, CHAP_*) are left alone: the same key list goes to isc_chap_process().
 *   5. When the initiator asks to transit (T bit) to the operational stage or full feature
 *      phase, call isc_neg_transit(): it appends the declarations the target still owes and
 *      says whether transit may happen now (it may not while the target waits for answers to
 *      offers of its own). Then isc_neg_params() gives the negotiated values.
 */
#ifndef ISC_PARAM_H
#define ISC_PARAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gw_buf.h"
#include "conf.h"
#include "gw_conf.h"

/* Login status (class << 8 | detail) values this module returns (RFC 7143 §11.13.5). */
#define ISC_PARAM_ST_OK			0x0000
#define ISC_PARAM_ST_INITIATOR_ERR	0x0200	/* protocol error, repeated key, bad text */
#define ISC_PARAM_ST_AUTH_FAILED	0x0201
#define ISC_PARAM_ST_NOT_FOUND		0x0203
#define ISC_PARAM_ST_MISSING_PARAM	0x0207
#define ISC_PARAM_ST_SESSION_TYPE	0x0209	/* session type not supported */
#define ISC_PARAM_ST_TARGET_ERR		0x0300	/* out of memory */

/* Limits from RFC 7143 §6.1 */
#define ISC_KEY_MAX		63	/* key name bytes */
#define ISC_VAL_LONG_MAX	8192	/* CHAP_C / CHAP_R (and other binary keys) */

/* Login stages as the CSG/NSG fields number them; FFP also stands for Text negotiation. */
enum isc_stage {
	ISC_STAGE_SECURITY = 0,
	ISC_STAGE_OPERATIONAL = 1,
	ISC_STAGE_FFP = 3,
};

enum isc_session_type {
	ISC_SESSION_NORMAL = 0,
	ISC_SESSION_DISCOVERY = 1,
};

/* ---------------------------------------------------------------------------------------- */
/* Key lists */

struct isc_kv {
	const char *key;	/* NUL-terminated, points into isc_kvlist.store */
	const char *val;
};

struct isc_kvlist {
	struct isc_kv *v;
	size_t n, cap;
	char *store;		/* one copy of the parsed text */
};

void isc_kvlist_init(struct isc_kvlist *l);
void isc_kvlist_fini(struct isc_kvlist *l);
/*
 * Parses a data segment "k=v\0k=v\0" (the final NUL may be missing; empty strings between
 * NULs are skipped, as padding may leave them). Rejects with -EINVAL: no '=', empty key, key
 * longer than ISC_KEY_MAX or with characters outside [A-Za-z0-9.-+@_], value longer than
 * ISC_VAL_MAX (ISC_VAL_LONG_MAX for CHAP_C/CHAP_R), the same key twice in one request.
 * -ENOMEM. On error l is left empty. l must be initialised (isc_kvlist_init) and empty.
 */
int isc_kvlist_parse(struct isc_kvlist *l, const void *data, size_t len);
/* The value of key, or NULL if absent. */
const char *isc_kvlist_get(const struct isc_kvlist *l, const char *key);
/* Appends "key=val\0" to b. 0 or -ENOMEM. */
int isc_kv_append(struct gw_buf *b, const char *key, const char *val);
/* True for AuthMethod and CHAP_*: the keys isc_chap handles (others get NotUnderstood). */
bool isc_key_is_security(const char *key);

/* ---------------------------------------------------------------------------------------- */
/* ---------------------------------------------------------------------------------------- */
/* Negotiated values */

struct isc_params {
	enum isc_session_type session_type;
	bool header_digest;		/* CRC32C on headers */
	bool data_digest;		/* CRC32C on data */
	uint32_t max_recv_dsl;		/* MRDSL the target declared: largest it receives */
	uint32_t max_xmit_dsl;		/* MRDSL the initiator declared (default 8192): the
					 * largest data segment the target may send */
	uint32_t max_burst_length;
	uint32_t first_burst_length;	/* meaningful when !initial_r2t || immediate_data */
	bool initial_r2t;
	bool immediate_data;
	uint32_t max_outstanding_r2t;
	bool data_pdu_in_order;
	bool data_sequence_in_order;
	uint32_t error_recovery_level;
	uint32_t default_time2wait;
	uint32_t default_time2retain;
	uint32_t max_connections;
	uint32_t protocol_level;	/* iSCSIProtocolLevel agreed (0 if not negotiated) */
	char initiator_name[ISC_NAME_MAX + 1];
	char initiator_alias[ISC_VAL_MAX + 1];
	char target_name[ISC_NAME_MAX + 1];	/* empty for a discovery session */
	/* iSER (RFC 7145 §6); only when rdma_extensions */
	bool rdma_extensions;
	uint32_t target_recv_dsl;	/* TargetRecvDataSegmentLength (declared by the target) */
	uint32_t initiator_recv_dsl;	/* InitiatorRecvDataSegmentLength (the initiator's) */
	uint32_t max_outstanding_unexpected_pdus;	/* 0: no limit */
};

/* RFC 7143 defaults for every field (Normal session, no names). */
void isc_params_defaults(struct isc_params *p);

/* ---------------------------------------------------------------------------------------- */
/* One connection's negotiation */

enum {
	ISC_TRANSPORT_RDMA = 1 << 0,	/* iSER datamover: RDMAExtensions may (must) be Yes */
};

struct isc_neg_init {
	const struct isc_param_conf *conf;	/* target's limits; NULL: built-in defaults */
	const char *target_alias;		/* NULL or "": no TargetAlias declared */
	uint16_t tpgt;				/* TargetPortalGroupTag of the portal */
	bool leading;				/* first connection of the session */
	unsigned int transport_caps;		/* ISC_TRANSPORT_* */
	uint32_t transport_max_recv_dsl;	/* largest segment the transport receives (0: any) */
	uint32_t transport_max_unexpected;	/* requests it can receive at once (0: any) */
	/* Non-leading connection: the session's values; LO keys are fixed to them. Copied. */
	const struct isc_params *session;
};

struct isc_neg;

/* 0, -EINVAL (non-leading without session) or -ENOMEM. */
int isc_neg_create(const struct isc_neg_init *in, struct isc_neg **out);
void isc_neg_destroy(struct isc_neg *n);

/*
 * Processes the keys of one request received in `stage` (the CSG of a Login Request, or
 * ISC_STAGE_FFP for a Text Request) and appends the target's answers to resp:
 *  - negotiated keys: the result of their function, or "Reject" when the value is malformed
 *    or out of range (RFC 7143 §6.2/§6.6); "Irrelevant" where the RFC says so;
 *  - unknown keys and X-* / X#* vendor keys: "NotUnderstood";
 *  - declarative keys from the initiator: recorded, no answer;
 *  - security keys are skipped (isc_chap's job); in any stage but SECURITY they are an error.
 * Fatal errors return -EPROTO (*status 0x0200: a key negotiated twice in this login, an LO key
 * on a non-leading connection, a security key outside the security stage, a bad or missing
 * answer to a target offer), -EINVAL (*status 0x0207: InitiatorName missing from the first
 * Login Request, TargetName missing on a Normal session; 0x0209: unknown SessionType),
 * -ENOMEM (*status 0x0300). Returns 0 with *status 0 otherwise. After an error the negotiation
 * is dead: the caller closes the connection.
 * On a non-leading connection SessionType may repeat the session's type; any other LO key is a
 * protocol error (0x0200). In FFP (Text) each request is its own negotiation: allowed are
 * SendTargets (isc_neg_send_targets() tells the caller to answer it), MaxRecvDataSegmentLength,
 * InitiatorAlias and vendor keys (NotUnderstood); other known keys are answered "Reject".
 */
int isc_neg_process(struct isc_neg *n, enum isc_stage stage, const struct isc_kvlist *keys,
		    struct gw_buf *resp, uint16_t *status);

/*
 * The initiator asked to go from `stage` to `next` (T bit). Toward FFP, appends what the target
 * owes before leaving (TargetAlias on a Normal session, MaxRecvDataSegmentLength or for iSER
 * TargetRecvDataSegmentLength, and offers of its own for keys whose RFC default breaks the
 * target's limits, e.g. ImmediateData=No when the initiator did not send it). The
 * TargetPortalGroupTag is not here: isc_neg_process puts it in the response to the first
 * request (RFC 7143 §13.9). Returns:
 *   1  transit now (set T in the response),
 *   0  not yet: the target is waiting for answers to its own offers (send the response with T=0
 *      and keep going),
 *  <0  fatal, *status set as for isc_neg_process (e.g. 0x0207 for a missing TargetName).
 * Call it once per response in which transit is asked for, after isc_neg_process.
 */
int isc_neg_transit(struct isc_neg *n, enum isc_stage stage, enum isc_stage next,
		    struct gw_buf *resp, uint16_t *status);

/* The negotiated values so far (final after isc_neg_transit returned 1 toward FFP). */
const struct isc_params *isc_neg_params(const struct isc_neg *n);

/* Convenience getters for the login code (first request onward). NULL if not sent. */
const char *isc_neg_initiator_name(const struct isc_neg *n);
const char *isc_neg_target_name(const struct isc_neg *n);

/* Value of SendTargets in the last processed Text request ("All", a name, or ""), or NULL if
 * absent. SendTargets is only valid in a Discovery session, or in a Normal session FFP. */
const char *isc_neg_send_targets(const struct isc_neg *n);

#endif
