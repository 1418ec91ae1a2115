// SPDX-License-Identifier: MIT
/*
 * iSCSI text key negotiation, target side. One table describes every key (RFC 7143 §13,
 * RFC 7145 §6); the target answers as the responder, offers its own value only where the RFC
 * default would break its configured limits, and declares the values it owns before full
 * feature phase. Keys are handled in table order, not request order, so that keys others
 * depend on (SessionType, RDMAExtensions, MaxBurstLength, InitialR2T, ImmediateData) are
 * settled before FirstBurstLength and the digests are answered in the same request.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gw_log.h"
#include "isc_param.h"

#define COMP "iscsi"

/* ---------------------------------------------------------------------------------------- */
/* Key lists */

void isc_kvlist_init(struct isc_kvlist *l)
{
	l->v = NULL;
	l->n = 0;
	l->cap = 0;
	l->store = NULL;
}

void isc_kvlist_fini(struct isc_kvlist *l)
{
	free(l->v);
	free(l->store);
	isc_kvlist_init(l);
}

static bool key_char_ok(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '-' || c == '+' || c == '@' || c == '_';
}

/* Binary values that may exceed ISC_VAL_MAX (challenges and responses). */
static bool key_is_long(const char *key)
{
	return !strcmp(key, "CHAP_C") || !strcmp(key, "CHAP_R");
}

const char *isc_kvlist_get(const struct isc_kvlist *l, const char *key)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		if (!strcmp(l->v[i].key, key))
			return l->v[i].val;
	return NULL;
}

int isc_kvlist_parse(struct isc_kvlist *l, const void *data, size_t len)
{
	char *p, *end, *q, *eq, *k;
	size_t klen, vlen;
	int r = -EINVAL;

	if (l->n || l->store)
		return -EINVAL;
	l->store = malloc(len + 1);
	if (!l->store)
		return -ENOMEM;
	if (len)
		memcpy(l->store, data, len);
	l->store[len] = '\0';
	p = l->store;
	end = l->store + len;
	while (p < end) {
		q = memchr(p, '\0', (size_t)(end - p));
		if (!q)
			q = end;
		if (q == p) {		/* padding or an empty string between NULs */
			p++;
			continue;
		}
		eq = memchr(p, '=', (size_t)(q - p));
		if (!eq) {
			gw_warn(COMP, "text key without '=': \"%.64s\"", p);
			goto fail;
		}
		klen = (size_t)(eq - p);
		vlen = (size_t)(q - eq - 1);
		if (klen == 0 || klen > ISC_KEY_MAX) {
			gw_warn(COMP, "text key of %zu bytes (1..%d allowed)", klen, ISC_KEY_MAX);
			goto fail;
		}
		for (k = p; k < eq; k++) {
			/* X#<IANA name> keys (RFC 7143 §13.22) carry the one '#' allowed. */
			if (!key_char_ok(*k) && !(k == p + 1 && *k == '#' && *p == 'X')) {
				gw_warn(COMP, "text key with invalid character 0x%02x",
					(unsigned char)*k);
				goto fail;
			}
		}
		*eq = '\0';
		if (vlen > (key_is_long(p) ? ISC_VAL_LONG_MAX : ISC_VAL_MAX)) {
			gw_warn(COMP, "value of %s is %zu bytes long (too long)", p, vlen);
			goto fail;
		}
		if (isc_kvlist_get(l, p)) {
			gw_warn(COMP, "key %s repeated in one request", p);
			goto fail;
		}
		if (l->n == l->cap) {
			size_t cap = l->cap ? l->cap * 2 : 16;
			struct isc_kv *v = realloc(l->v, cap * sizeof(*v));

			if (!v) {
				r = -ENOMEM;
				goto fail;
			}
			l->v = v;
			l->cap = cap;
		}
		l->v[l->n].key = p;
		l->v[l->n].val = eq + 1;
		l->n++;
		p = q + 1;
	}
	return 0;
fail:
	isc_kvlist_fini(l);
	return r;
}

int isc_kv_append(struct gw_buf *b, const char *key, const char *val)
{
	size_t kl = strlen(key), vl = strlen(val);
	int r;

	r = gw_buf_reserve(b, kl + vl + 2);
	if (r)
		return r;
	memcpy(b->data + b->len, key, kl);
	b->data[b->len + kl] = '=';
	memcpy(b->data + b->len + kl + 1, val, vl);
	b->data[b->len + kl + 1 + vl] = '\0';
	b->len += kl + vl + 2;
	return 0;
}

static int kv_append_u32(struct gw_buf *b, const char *key, uint32_t v)
{
	char num[16];

	snprintf(num, sizeof(num), "%u", v);
	return isc_kv_append(b, key, num);
}

bool isc_key_is_security(const char *key)
{
	return !strcmp(key, "AuthMethod") || !strncmp(key, "CHAP_", 5);
}

static const struct isc_param_conf conf_defaults = {
	.HeaderDigest = (char *)"CRC32C,None",
	.DataDigest = (char *)"CRC32C,None",
	.MaxRecvDataSegmentLength = 262144,
	.MaxBurstLength = 1048576,
	.FirstBurstLength = 65536,
	.InitialR2T = false,
	.ImmediateData = true,
	.MaxOutstandingR2T = 1,
	.MaxConnections = 1,
	.DefaultTime2Wait = 2,
	.DefaultTime2Retain = 20,
	.ErrorRecoveryLevel = 0,
	.queue_depth = 128,
	.nop_interval = 10,
	.nop_timeout = 30,
};

void isc_params_defaults(struct isc_params *p)
{
	memset(p, 0, sizeof(*p));
	p->session_type = ISC_SESSION_NORMAL;
	p->max_recv_dsl = 8192;
	p->max_xmit_dsl = 8192;
	p->max_burst_length = 262144;
	p->first_burst_length = 65536;
	p->initial_r2t = true;
	p->immediate_data = true;
	p->max_outstanding_r2t = 1;
	p->data_pdu_in_order = true;
	p->data_sequence_in_order = true;
	p->error_recovery_level = 0;
	p->default_time2wait = 2;
	p->default_time2retain = 20;
	p->max_connections = 1;
	p->target_recv_dsl = 8192;
	p->initiator_recv_dsl = 8192;
}

/* ---------------------------------------------------------------------------------------- */
/* The key table */

enum key_id {
	K_SESSION_TYPE, K_INITIATOR_NAME, K_TARGET_NAME, K_INITIATOR_ALIAS, K_TARGET_ALIAS,
	K_TARGET_ADDRESS, K_TPGT, K_SEND_TARGETS, K_RDMA_EXT, K_HEADER_DIGEST, K_DATA_DIGEST,
	K_MAX_CONNECTIONS, K_INITIAL_R2T, K_IMMEDIATE_DATA, K_MRDSL, K_MAX_BURST, K_FIRST_BURST,
	K_T2W, K_T2R, K_MAX_R2T, K_PDU_ORDER, K_SEQ_ORDER, K_ERL, K_TASK_REPORTING, K_PROTO_LEVEL,
	K_IFMARKER, K_OFMARKER, K_IFMARKINT, K_OFMARKINT, K_TRDSL, K_IRDSL, K_MOUPDU,
	K_COUNT
};

enum key_fn {
	FN_DECL,	/* declarative: the sender states its own value */
	FN_LIST,	/* first of the originator's list the responder supports */
	FN_MIN,
	FN_MAX,
	FN_AND,
	FN_OR,
	FN_OBSOLETE,	/* RFC 7143 §13.26 markers */
	FN_SPECIAL,	/* SendTargets */
};

enum key_use {
	U_IO,		/* login only (initialize only) */
	U_LO,		/* leading connection's login only */
	U_ALL,		/* login and FFP */
	U_FFP,		/* FFP only */
};

enum {
	F_IRR_DISC = 1 << 0,	/* Irrelevant when SessionType=Discovery */
	F_ISER = 1 << 1,	/* Irrelevant when RDMAExtensions=No */
	F_TGT = 1 << 2,		/* only the target sends it */
};

struct key_def {
	const char *name;
	uint8_t id;
	uint8_t fn;
	uint8_t use;
	uint8_t flags;
	uint32_t min, max;
};

#define MAX24 16777215u

/* Processing order matters: see the file comment. */
static const struct key_def keys[] = {
	{ "SessionType", K_SESSION_TYPE, FN_DECL, U_LO, 0, 0, 0 },
	{ "InitiatorName", K_INITIATOR_NAME, FN_DECL, U_IO, 0, 0, 0 },
	{ "TargetName", K_TARGET_NAME, FN_DECL, U_IO, 0, 0, 0 },
	{ "InitiatorAlias", K_INITIATOR_ALIAS, FN_DECL, U_ALL, 0, 0, 0 },
	{ "TargetAlias", K_TARGET_ALIAS, FN_DECL, U_ALL, F_TGT, 0, 0 },
	{ "TargetAddress", K_TARGET_ADDRESS, FN_DECL, U_ALL, F_TGT, 0, 0 },
	{ "TargetPortalGroupTag", K_TPGT, FN_DECL, U_IO, F_TGT, 0, 65535 },
	{ "SendTargets", K_SEND_TARGETS, FN_SPECIAL, U_FFP, 0, 0, 0 },
	{ "RDMAExtensions", K_RDMA_EXT, FN_AND, U_LO, F_IRR_DISC, 0, 0 },
	{ "MaxConnections", K_MAX_CONNECTIONS, FN_MIN, U_LO, F_IRR_DISC, 1, 65535 },
	{ "InitialR2T", K_INITIAL_R2T, FN_OR, U_LO, F_IRR_DISC, 0, 0 },
	{ "ImmediateData", K_IMMEDIATE_DATA, FN_AND, U_LO, F_IRR_DISC, 0, 0 },
	{ "MaxRecvDataSegmentLength", K_MRDSL, FN_DECL, U_ALL, 0, 512, MAX24 },
	{ "MaxBurstLength", K_MAX_BURST, FN_MIN, U_LO, F_IRR_DISC, 512, MAX24 },
	{ "FirstBurstLength", K_FIRST_BURST, FN_MIN, U_LO, F_IRR_DISC, 512, MAX24 },
	{ "HeaderDigest", K_HEADER_DIGEST, FN_LIST, U_IO, 0, 0, 0 },
	{ "DataDigest", K_DATA_DIGEST, FN_LIST, U_IO, 0, 0, 0 },
	{ "DefaultTime2Wait", K_T2W, FN_MAX, U_LO, 0, 0, 3600 },
	{ "DefaultTime2Retain", K_T2R, FN_MIN, U_LO, 0, 0, 3600 },
	{ "MaxOutstandingR2T", K_MAX_R2T, FN_MIN, U_LO, F_IRR_DISC, 1, 65535 },
	{ "DataPDUInOrder", K_PDU_ORDER, FN_OR, U_LO, F_IRR_DISC, 0, 0 },
	{ "DataSequenceInOrder", K_SEQ_ORDER, FN_OR, U_LO, F_IRR_DISC, 0, 0 },
	{ "ErrorRecoveryLevel", K_ERL, FN_MIN, U_LO, 0, 0, 2 },
	{ "TaskReporting", K_TASK_REPORTING, FN_LIST, U_LO, F_IRR_DISC, 0, 0 },
	{ "iSCSIProtocolLevel", K_PROTO_LEVEL, FN_MIN, U_LO, F_IRR_DISC, 0, 31 },
	{ "IFMarker", K_IFMARKER, FN_OBSOLETE, U_IO, 0, 0, 0 },
	{ "OFMarker", K_OFMARKER, FN_OBSOLETE, U_IO, 0, 0, 0 },
	{ "IFMarkInt", K_IFMARKINT, FN_OBSOLETE, U_IO, 0, 0, 0 },
	{ "OFMarkInt", K_OFMARKINT, FN_OBSOLETE, U_IO, 0, 0, 0 },
	{ "TargetRecvDataSegmentLength", K_TRDSL, FN_MIN, U_IO, F_ISER | F_IRR_DISC, 512, MAX24 },
	{ "InitiatorRecvDataSegmentLength", K_IRDSL, FN_MIN, U_IO, F_ISER | F_IRR_DISC, 512,
	  MAX24 },
	/* 0 means "no limit"; otherwise 2..2^32-1 (RFC 7145 §6.6). */
	{ "MaxOutstandingUnexpectedPDUs", K_MOUPDU, FN_MIN, U_LO, F_ISER | F_IRR_DISC, 0,
	  0xffffffffu },
};

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

/* iSCSIProtocolLevel this target implements: RFC 7143 is level 1. RFC 7144 (level 2) adds
 * SCSI features (e.g. new task attributes handling) the SCSI core does not claim. */
#define TARGET_PROTOCOL_LEVEL 1

static const struct key_def *key_find(const char *name)
{
	size_t i;

	for (i = 0; i < NKEYS; i++)
		if (!strcmp(keys[i].name, name))
			return &keys[i];
	return NULL;
}

/* ---------------------------------------------------------------------------------------- */
/* Negotiation state */

enum {
	KS_SEEN = 1 << 0,	/* the initiator sent it during this login */
	KS_SENT = 1 << 1,	/* the target sent it (answer, declaration or offer) */
	KS_PENDING = 1 << 2,	/* the target offered it and waits for the answer */
};

struct isc_neg {
	const struct isc_param_conf *conf;
	unsigned int hd_allow, dd_allow;	/* DIGEST_* masks from conf */
	char *target_alias;
	uint16_t tpgt;
	bool leading;
	unsigned int caps;
	uint32_t tp_max_recv_dsl;	/* 0: no transport limit */
	uint32_t tp_max_unexpected;	/* 0: no transport limit */
	bool first_done;
	bool dead;
	bool have_target_name;
	struct isc_params p;
	uint8_t st[K_COUNT];
	uint32_t offer[K_COUNT];		/* numeric / boolean value offered by the target */
	unsigned int offer_mask[K_COUNT];	/* digest lists offered by the target */
	char *send_targets;
	bool send_targets_set;
};

int isc_neg_create(const struct isc_neg_init *in, struct isc_neg **out)
{
	struct isc_neg *n;

	*out = NULL;
	if (!in->leading && !in->session) {
		gw_err(COMP, "non-leading connection negotiation without session parameters");
		return -EINVAL;
	}
	n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	n->conf = in->conf ? in->conf : &conf_defaults;
	n->hd_allow = conf_digest_mask(n->conf->HeaderDigest);
	n->dd_allow = conf_digest_mask(n->conf->DataDigest);
	/* A conf that skipped validation still gets a working, permissive default. */
	if (!n->hd_allow)
		n->hd_allow = ISC_DIGEST_NONE | ISC_DIGEST_CRC32C;
	if (!n->dd_allow)
		n->dd_allow = ISC_DIGEST_NONE | ISC_DIGEST_CRC32C;
	if (in->target_alias && *in->target_alias) {
		n->target_alias = strdup(in->target_alias);
		if (!n->target_alias) {
			free(n);
			return -ENOMEM;
		}
	}
	n->tpgt = in->tpgt;
	n->leading = in->leading;
	n->caps = in->transport_caps;
	n->tp_max_recv_dsl = in->transport_max_recv_dsl;
	n->tp_max_unexpected = in->transport_max_unexpected;
	if (in->leading) {
		isc_params_defaults(&n->p);
	} else {
		/* Session-wide values are fixed; connection-only ones start from the defaults. */
		n->p = *in->session;
		n->p.header_digest = false;
		n->p.data_digest = false;
		n->p.max_xmit_dsl = 8192;
	}
	n->p.max_recv_dsl = n->conf->MaxRecvDataSegmentLength;
	*out = n;
	return 0;
}

void isc_neg_destroy(struct isc_neg *n)
{
	if (!n)
		return;
	free(n->target_alias);
	free(n->send_targets);
	free(n);
}

const struct isc_params *isc_neg_params(const struct isc_neg *n)
{
	return &n->p;
}

const char *isc_neg_initiator_name(const struct isc_neg *n)
{
	return n->p.initiator_name[0] ? n->p.initiator_name : NULL;
}

const char *isc_neg_target_name(const struct isc_neg *n)
{
	return n->have_target_name ? n->p.target_name : NULL;
}

const char *isc_neg_send_targets(const struct isc_neg *n)
{
	return n->send_targets_set ? (n->send_targets ? n->send_targets : "") : NULL;
}

/* ---------------------------------------------------------------------------------------- */
/* Values */

/* Decimal or 0x hex (RFC 7143 §6.1 numerical values); no sign, no trailing text. */
static int parse_num(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	unsigned int d;
	bool hex = false;

	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		hex = true;
		s += 2;
	}
	if (!*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s >= '0' && *s <= '9')
			d = (unsigned int)(*s - '0');
		else if (hex && *s >= 'a' && *s <= 'f')
			d = (unsigned int)(*s - 'a' + 10);
		else if (hex && *s >= 'A' && *s <= 'F')
			d = (unsigned int)(*s - 'A' + 10);
		else
			return -EINVAL;
		if (v > (UINT64_MAX - d) / (hex ? 16 : 10))
			return -ERANGE;
		v = v * (hex ? 16 : 10) + d;
	}
	*out = v;
	return 0;
}

static int parse_bool(const char *s, bool *out)
{
	if (!strcmp(s, "Yes"))
		*out = true;
	else if (!strcmp(s, "No"))
		*out = false;
	else
		return -EINVAL;
	return 0;
}

static uint32_t *num_field(struct isc_params *p, int id)
{
	switch (id) {
	case K_MAX_CONNECTIONS: return &p->max_connections;
	case K_MAX_BURST: return &p->max_burst_length;
	case K_FIRST_BURST: return &p->first_burst_length;
	case K_T2W: return &p->default_time2wait;
	case K_T2R: return &p->default_time2retain;
	case K_MAX_R2T: return &p->max_outstanding_r2t;
	case K_ERL: return &p->error_recovery_level;
	case K_PROTO_LEVEL: return &p->protocol_level;
	case K_TRDSL: return &p->target_recv_dsl;
	case K_IRDSL: return &p->initiator_recv_dsl;
	case K_MOUPDU: return &p->max_outstanding_unexpected_pdus;
	default: return NULL;
	}
}

static bool *bool_field(struct isc_params *p, int id)
{
	switch (id) {
	case K_RDMA_EXT: return &p->rdma_extensions;
	case K_INITIAL_R2T: return &p->initial_r2t;
	case K_IMMEDIATE_DATA: return &p->immediate_data;
	case K_PDU_ORDER: return &p->data_pdu_in_order;
	case K_SEQ_ORDER: return &p->data_sequence_in_order;
	default: return NULL;
	}
}

/* The target's own side of a negotiated numeric key (its limit or its wish). */
/* What the target can receive in an iSER control-type PDU: its MaxRecvDataSegmentLength, within
 * the datamover's receive buffers (RFC 7145 §6.3). */
static uint32_t target_recv_dsl(const struct isc_neg *n)
{
	uint32_t v = n->conf->MaxRecvDataSegmentLength;

	if (n->tp_max_recv_dsl && v > n->tp_max_recv_dsl)
		v = n->tp_max_recv_dsl;
	return v;
}

static uint32_t target_num(const struct isc_neg *n, int id)
{
	const struct isc_param_conf *c = n->conf;
	uint32_t v;

	switch (id) {
	case K_MAX_CONNECTIONS: return c->MaxConnections;
	case K_MAX_BURST: return c->MaxBurstLength;
	case K_FIRST_BURST:
		/* FirstBurstLength must not exceed MaxBurstLength (RFC 7143 §13.14). */
		v = c->FirstBurstLength;
		if (n->st[K_MAX_BURST] & KS_PENDING)
			return v < n->offer[K_MAX_BURST] ? v : n->offer[K_MAX_BURST];
		return v < n->p.max_burst_length ? v : n->p.max_burst_length;
	case K_T2W: return c->DefaultTime2Wait;
	case K_T2R: return c->DefaultTime2Retain;
	case K_MAX_R2T: return c->MaxOutstandingR2T;
	case K_ERL: return c->ErrorRecoveryLevel;
	case K_PROTO_LEVEL: return TARGET_PROTOCOL_LEVEL;
	case K_TRDSL: return target_recv_dsl(n);
	case K_IRDSL: return MAX24;	/* the initiator's receive size is its own business */
	/* The requests the connection's receive buffers hold (0: no limit of the target's own). */
	case K_MOUPDU: return n->tp_max_unexpected;
	default: return 0;
	}
}

static bool target_bool(const struct isc_neg *n, int id)
{
	switch (id) {
	case K_RDMA_EXT: return (n->caps & ISC_TRANSPORT_RDMA) != 0;
	/* Over iSER, write data beyond the immediate data is fetched by RDMA Read, the cheap
	 * way; unsolicited Data-Out Sends would only copy it through message buffers (and
	 * libiscsi 1.19's iSER sends them without their data). */
	case K_INITIAL_R2T: return n->conf->InitialR2T || n->p.rdma_extensions;
	case K_IMMEDIATE_DATA: return n->conf->ImmediateData;
	/* Out-of-order data needs ERL > 0 style recovery the target does not do. */
	case K_PDU_ORDER: return true;
	case K_SEQ_ORDER: return true;
	default: return false;
	}
}

static uint32_t fn_min(int id, uint32_t a, uint32_t b)
{
	if (id == K_MOUPDU) {	/* 0 is "no limit", the largest value */
		if (!a)
			return b;
		if (!b)
			return a;
	}
	return a < b ? a : b;
}

static unsigned int digest_allow(const struct isc_neg *n, int id)
{
	/* RDMA has its own integrity checks: iSER sessions run without iSCSI digests. */
	if (n->p.rdma_extensions)
		return ISC_DIGEST_NONE;
	return id == K_HEADER_DIGEST ? n->hd_allow : n->dd_allow;
}

static bool *digest_field(struct isc_params *p, int id)
{
	return id == K_HEADER_DIGEST ? &p->header_digest : &p->data_digest;
}

#define BAD_NAME "not an iqn./eui./naa. name of 1..223 bytes"

static bool name_ok(const char *s)
{
	size_t len = strlen(s);

	if (len == 0 || len > ISC_NAME_MAX)
		return false;
	return !strncasecmp(s, "iqn.", 4) || !strncasecmp(s, "eui.", 4) ||
	       !strncasecmp(s, "naa.", 4);
}

/* ---------------------------------------------------------------------------------------- */
/* Answering */

static int answer(struct isc_neg *n, struct gw_buf *resp, const struct key_def *k,
		  const char *val)
{
	n->st[k->id] |= KS_SENT;
	return isc_kv_append(resp, k->name, val);
}

static int answer_num(struct isc_neg *n, struct gw_buf *resp, const struct key_def *k,
		      uint32_t v)
{
	n->st[k->id] |= KS_SENT;
	return kv_append_u32(resp, k->name, v);
}

static int reject(struct isc_neg *n, struct gw_buf *resp, const struct key_def *k,
		  const char *val, const char *why)
{
	gw_warn(COMP, "%s=%.64s rejected: %s", k->name, val, why);
	return answer(n, resp, k, "Reject");
}

static int proto_err(uint16_t *status, const char *key, const char *why)
{
	gw_warn(COMP, "login negotiation: %s: %s", key, why);
	*status = ISC_PARAM_ST_INITIATOR_ERR;
	return -EPROTO;
}

/* The initiator's answer to a value the target offered itself. */
static int take_answer(struct isc_neg *n, const struct key_def *k, const char *val,
		       uint16_t *status)
{
	uint64_t u;
	bool b;
	unsigned int bit;

	/* Answered: from now on the key counts as negotiated in this login. */
	n->st[k->id] = (uint8_t)((n->st[k->id] & ~KS_PENDING) | KS_SEEN);
	switch (k->fn) {
	case FN_MIN:
	case FN_MAX:
		if (parse_num(val, &u) || u < k->min || u > k->max)
			return proto_err(status, k->name, "bad answer to the target's offer");
		if (k->fn == FN_MIN ? u > n->offer[k->id] : u < n->offer[k->id])
			return proto_err(status, k->name, "answer outside the target's offer");
		*num_field(&n->p, k->id) = (uint32_t)u;
		break;
	case FN_AND:
	case FN_OR:
		if (parse_bool(val, &b))
			return proto_err(status, k->name, "bad answer to the target's offer");
		/* AND with our No must be No; OR with our Yes must be Yes. */
		if (b != (bool)n->offer[k->id] &&
		    ((k->fn == FN_AND && !n->offer[k->id]) || (k->fn == FN_OR && n->offer[k->id])))
			return proto_err(status, k->name, "answer contradicts the result function");
		*bool_field(&n->p, k->id) = b;
		break;
	case FN_LIST:
		bit = !strcmp(val, "CRC32C") ? ISC_DIGEST_CRC32C :
		      !strcmp(val, "None") ? ISC_DIGEST_NONE : 0;
		if (!(bit & n->offer_mask[k->id]))
			return proto_err(status, k->name, "answer not among the target's offer");
		*digest_field(&n->p, k->id) = bit == ISC_DIGEST_CRC32C;
		break;
	default:
		return proto_err(status, k->name, "unexpected answer");
	}
	gw_dbg(COMP, "%s=%s accepted (target offer)", k->name, val);
	return 0;
}

static int handle_list(struct isc_neg *n, const struct key_def *k, const char *val,
		       struct gw_buf *resp)
{
	char item[ISC_VAL_MAX + 1];
	const char *p = val, *c;
	unsigned int allow, bit;
	size_t len;

	allow = k->id == K_TASK_REPORTING ? 0 : digest_allow(n, k->id);
	for (;;) {
		c = strchr(p, ',');
		len = c ? (size_t)(c - p) : strlen(p);
		if (len < sizeof(item)) {
			memcpy(item, p, len);
			item[len] = '\0';
			if (k->id == K_TASK_REPORTING) {
				/* ResponseFence and FastAbort semantics are not implemented. */
				if (!strcmp(item, "RFC3720"))
					return answer(n, resp, k, item);
			} else {
				bit = !strcmp(item, "CRC32C") ? ISC_DIGEST_CRC32C :
				      !strcmp(item, "None") ? ISC_DIGEST_NONE : 0;
				if (bit & allow) {
					*digest_field(&n->p, k->id) = bit == ISC_DIGEST_CRC32C;
					return answer(n, resp, k, item);
				}
			}
		}
		if (!c)
			break;
		p = c + 1;
	}
	return reject(n, resp, k, val, "no acceptable value in the list");
}

static int handle_num(struct isc_neg *n, const struct key_def *k, const char *val,
		      struct gw_buf *resp)
{
	uint64_t u;
	uint32_t r, t;

	if (parse_num(val, &u) || u < k->min || u > k->max ||
	    (k->id == K_MOUPDU && u == 1)) {
		gw_warn(COMP, "%s=%.64s rejected: not a number in %u..%u", k->name, val,
			k->id == K_MOUPDU ? 2 : k->min, k->max);
		return answer(n, resp, k, "Reject");
	}
	if (k->id == K_FIRST_BURST && n->p.initial_r2t && !n->p.immediate_data) {
		/* No unsolicited data at all: the length means nothing (RFC 7143 §13.14). */
		return answer(n, resp, k, "Irrelevant");
	}
	t = target_num(n, k->id);
	if (k->fn == FN_MAX)
		r = (uint32_t)u > t ? (uint32_t)u : t;
	else
		r = fn_min(k->id, (uint32_t)u, t);
	*num_field(&n->p, k->id) = r;
	return answer_num(n, resp, k, r);
}

static int handle_bool(struct isc_neg *n, const struct key_def *k, const char *val,
		       struct gw_buf *resp)
{
	bool b, t, r;

	if (parse_bool(val, &b))
		return reject(n, resp, k, val, "not Yes or No");
	t = target_bool(n, k->id);
	r = k->fn == FN_AND ? (b && t) : (b || t);
	*bool_field(&n->p, k->id) = r;
	return answer(n, resp, k, r ? "Yes" : "No");
}

static int handle_decl(struct isc_neg *n, const struct key_def *k, const char *val,
		       enum isc_stage stage, struct gw_buf *resp, uint16_t *status)
{
	uint64_t u;

	switch (k->id) {
	case K_SESSION_TYPE:
		return 0;	/* read up front by first_request() */
	case K_INITIATOR_NAME:
		if (!name_ok(val))
			return proto_err(status, k->name, BAD_NAME);
		snprintf(n->p.initiator_name, sizeof(n->p.initiator_name), "%s", val);
		return 0;
	case K_TARGET_NAME:
		if (!name_ok(val))
			return proto_err(status, k->name, BAD_NAME);
		snprintf(n->p.target_name, sizeof(n->p.target_name), "%s", val);
		n->have_target_name = true;
		return 0;
	case K_INITIATOR_ALIAS:
		snprintf(n->p.initiator_alias, sizeof(n->p.initiator_alias), "%s", val);
		return 0;
	case K_MRDSL:
		if (parse_num(val, &u) || u < k->min || u > k->max)
			return reject(n, resp, k, val, "not a number in 512..16777215");
		n->p.max_xmit_dsl = (uint32_t)u;
		/* Declare ours alongside, as initiators expect, unless iSER made it moot. */
		if (stage != ISC_STAGE_FFP && !(n->st[K_MRDSL] & KS_SENT) && !n->p.rdma_extensions)
			return answer_num(n, resp, k, n->p.max_recv_dsl);
		return 0;
	default:
		return 0;
	}
}

static int handle_key(struct isc_neg *n, const struct key_def *k, const char *val,
		      enum isc_stage stage, struct gw_buf *resp, uint16_t *status)
{
	if (stage == ISC_STAGE_FFP) {
		if (k->use != U_ALL && k->use != U_FFP)
			return reject(n, resp, k, val, "not negotiable in full feature phase");
	} else {
		if (k->use == U_FFP)
			return reject(n, resp, k, val, "only valid in full feature phase");
		if (n->st[k->id] & KS_PENDING)
			return take_answer(n, k, val, status);
		if (n->st[k->id] & KS_SEEN)
			return proto_err(status, k->name, "negotiated twice in one login");
		n->st[k->id] |= KS_SEEN;
		if (k->use == U_LO && !n->leading) {
			if (k->id == K_SESSION_TYPE)
				return 0;	/* first_request() compared it with the session */
			return proto_err(status, k->name,
					 "leading-only key on a non-leading connection");
		}
	}
	if (k->flags & F_TGT)
		return reject(n, resp, k, val, "only the target sends this key");
	if ((k->flags & F_IRR_DISC) && n->p.session_type == ISC_SESSION_DISCOVERY)
		return answer(n, resp, k, "Irrelevant");
	if ((k->flags & F_ISER) && !n->p.rdma_extensions)
		return answer(n, resp, k, "Irrelevant");

	switch (k->fn) {
	case FN_DECL:
		return handle_decl(n, k, val, stage, resp, status);
	case FN_LIST:
		return handle_list(n, k, val, resp);
	case FN_MIN:
	case FN_MAX:
		return handle_num(n, k, val, resp);
	case FN_AND:
	case FN_OR:
		return handle_bool(n, k, val, resp);
	case FN_OBSOLETE:
		/*
		 * RFC 7143 §13.26: markers SHOULD get Reject and MAY get No; No keeps RFC 3720
		 * initiators that always send IFMarker=No happy. Intervals MUST get Reject.
		 */
		if (k->id == K_IFMARKER || k->id == K_OFMARKER)
			return answer(n, resp, k, "No");
		return answer(n, resp, k, "Reject");
	case FN_SPECIAL:
		free(n->send_targets);
		n->send_targets = strdup(val);
		n->send_targets_set = true;
		return n->send_targets ? 0 : -ENOMEM;
	}
	return 0;
}

/* The first Login Request: who is talking to whom, and what kind of session. */
static int first_request(struct isc_neg *n, const struct isc_kvlist *kl, uint16_t *status)
{
	const char *st = isc_kvlist_get(kl, "SessionType");
	enum isc_session_type type = ISC_SESSION_NORMAL;

	if (st) {
		if (!strcmp(st, "Discovery")) {
			type = ISC_SESSION_DISCOVERY;
		} else if (strcmp(st, "Normal")) {
			gw_warn(COMP, "unsupported SessionType=%.64s", st);
			*status = ISC_PARAM_ST_SESSION_TYPE;
			return -EINVAL;
		}
	}
	if (n->leading) {
		n->p.session_type = type;
	} else if (st && type != n->p.session_type) {
		return proto_err(status, "SessionType", "differs from the session's");
	}
	if (!isc_kvlist_get(kl, "InitiatorName")) {
		gw_warn(COMP, "first login request without InitiatorName");
		*status = ISC_PARAM_ST_MISSING_PARAM;
		return -EINVAL;
	}
	if (n->p.session_type == ISC_SESSION_NORMAL && !isc_kvlist_get(kl, "TargetName")) {
		gw_warn(COMP, "first login request of a normal session without TargetName");
		*status = ISC_PARAM_ST_MISSING_PARAM;
		return -EINVAL;
	}
	return 0;
}

int isc_neg_process(struct isc_neg *n, enum isc_stage stage, const struct isc_kvlist *kl,
		    struct gw_buf *resp, uint16_t *status)
{
	bool first = false;
	size_t i;
	int r;

	*status = ISC_PARAM_ST_OK;
	if (n->dead) {
		*status = ISC_PARAM_ST_INITIATOR_ERR;
		return -EPROTO;
	}
	if (stage == ISC_STAGE_FFP) {
		free(n->send_targets);
		n->send_targets = NULL;
		n->send_targets_set = false;
	}
	if (stage != ISC_STAGE_FFP && !n->first_done) {
		r = first_request(n, kl, status);
		if (r)
			goto dead;
		first = true;
	}
	if (stage != ISC_STAGE_FFP) {
		/* Offers the target made in its last response must be answered now. */
		for (i = 0; i < NKEYS; i++) {
			if ((n->st[keys[i].id] & KS_PENDING) && !isc_kvlist_get(kl, keys[i].name)) {
				r = proto_err(status, keys[i].name,
					      "the initiator did not answer the target's offer");
				goto dead;
			}
		}
	}
	for (i = 0; i < NKEYS; i++) {
		const char *v = isc_kvlist_get(kl, keys[i].name);

		if (!v)
			continue;
		gw_dbg(COMP, "<- %s=%.64s", keys[i].name, v);
		r = handle_key(n, &keys[i], v, stage, resp, status);
		if (r)
			goto dead;
	}
	for (i = 0; i < kl->n; i++) {
		const char *k = kl->v[i].key;

		if (key_find(k))
			continue;
		if (isc_key_is_security(k)) {
			if (stage == ISC_STAGE_SECURITY)
				continue;	/* isc_chap's */
			r = proto_err(status, k, "security key outside the security stage");
			goto dead;
		}
		/* X-vendor and X#IANA keys we do not know, and anything else. */
		gw_dbg(COMP, "<- %s (not understood)", k);
		r = isc_kv_append(resp, k, "NotUnderstood");
		if (r)
			goto nomem;
	}
	if (first && n->have_target_name && !(n->st[K_TPGT] & KS_SENT)) {
		/* RFC 7143 §13.9: the tag goes in the response to the first request, unless the
		 * initiator sent the key itself and it was answered (Reject) above: a key appears
		 * once in a response, or the initiator's parser refuses the whole text. */
		r = kv_append_u32(resp, "TargetPortalGroupTag", n->tpgt);
		if (r)
			goto nomem;
		n->st[K_TPGT] |= KS_SENT;
	}
	if (stage != ISC_STAGE_FFP)
		n->first_done = true;
	return 0;
nomem:
	r = -ENOMEM;
dead:
	if (r == -ENOMEM)
		*status = ISC_PARAM_ST_TARGET_ERR;
	n->dead = true;
	return r;
}

/* ---------------------------------------------------------------------------------------- */
/* Transit */

static int offer_num(struct isc_neg *n, struct gw_buf *resp, int id, uint32_t v)
{
	const struct key_def *k = NULL;
	size_t i;

	for (i = 0; i < NKEYS && !k; i++)
		if (keys[i].id == id)
			k = &keys[i];
	n->offer[id] = v;
	n->st[id] |= KS_PENDING | KS_SENT;
	gw_dbg(COMP, "-> %s=%u (target offer)", k->name, v);
	return kv_append_u32(resp, k->name, v);
}

static int offer_bool(struct isc_neg *n, struct gw_buf *resp, int id, const char *name, bool v)
{
	n->offer[id] = v;
	n->st[id] |= KS_PENDING | KS_SENT;
	gw_dbg(COMP, "-> %s=%s (target offer)", name, v ? "Yes" : "No");
	return isc_kv_append(resp, name, v ? "Yes" : "No");
}

/* Digests the target accepts, in the configured order, as a wire list. */
static int offer_digest(struct isc_neg *n, struct gw_buf *resp, int id, const char *name)
{
	const char *conf = id == K_HEADER_DIGEST ? n->conf->HeaderDigest : n->conf->DataDigest;
	unsigned int allow = digest_allow(n, id);
	char list[32];

	if (!conf || !conf_digest_mask(conf))
		conf = "CRC32C,None";
	if (!(allow & ISC_DIGEST_NONE))
		snprintf(list, sizeof(list), "CRC32C");
	else if (!strncmp(conf, "None", 4))
		snprintf(list, sizeof(list), "None,CRC32C");
	else
		snprintf(list, sizeof(list), "CRC32C,None");
	n->offer_mask[id] = allow;
	n->st[id] |= KS_PENDING | KS_SENT;
	gw_dbg(COMP, "-> %s=%s (target offer)", name, list);
	return isc_kv_append(resp, name, list);
}

/*
 * Keys whose RFC default the target's configuration forbids and that the initiator left
 * alone: the target proposes its own value. Returns how many were offered, or -ENOMEM /
 * -EPROTO (a result the target cannot live with).
 */
static int target_offers(struct isc_neg *n, struct gw_buf *resp, uint16_t *status)
{
	const struct isc_param_conf *c = n->conf;
	bool normal_lead = n->leading && n->p.session_type == ISC_SESSION_NORMAL;
	int count = 0, r, id;
	uint32_t t;

	for (id = K_HEADER_DIGEST; id <= K_DATA_DIGEST; id++) {
		const char *name = id == K_HEADER_DIGEST ? "HeaderDigest" : "DataDigest";
		bool on = *digest_field(&n->p, id);
		unsigned int have = on ? ISC_DIGEST_CRC32C : ISC_DIGEST_NONE;

		if (digest_allow(n, id) & have)
			continue;
		if (n->st[id] & KS_SEEN)
			return proto_err(status, name, "no digest acceptable to the target agreed");
		r = offer_digest(n, resp, id, name);
		if (r)
			return r;
		count++;
	}
	if (!normal_lead)
		return count;
	if (!(n->st[K_IMMEDIATE_DATA] & KS_SEEN) && !c->ImmediateData && n->p.immediate_data) {
		if ((r = offer_bool(n, resp, K_IMMEDIATE_DATA, "ImmediateData", false)))
			return r;
		count++;
	}
	if (!(n->st[K_MAX_BURST] & KS_SEEN) && n->p.max_burst_length > c->MaxBurstLength) {
		if ((r = offer_num(n, resp, K_MAX_BURST, c->MaxBurstLength)))
			return r;
		count++;
	}
	t = target_num(n, K_FIRST_BURST);
	if (!(n->st[K_FIRST_BURST] & KS_SEEN) && n->p.first_burst_length > t &&
	    !(n->p.initial_r2t && !n->p.immediate_data)) {
		if ((r = offer_num(n, resp, K_FIRST_BURST, t)))
			return r;
		count++;
	}
	if (!(n->st[K_T2W] & KS_SEEN) && n->p.default_time2wait < c->DefaultTime2Wait) {
		if ((r = offer_num(n, resp, K_T2W, c->DefaultTime2Wait)))
			return r;
		count++;
	}
	if (!(n->st[K_T2R] & KS_SEEN) && n->p.default_time2retain > c->DefaultTime2Retain) {
		if ((r = offer_num(n, resp, K_T2R, c->DefaultTime2Retain)))
			return r;
		count++;
	}
	return count;
}

int isc_neg_transit(struct isc_neg *n, enum isc_stage stage, enum isc_stage next,
		    struct gw_buf *resp, uint16_t *status)
{
	int r;

	*status = ISC_PARAM_ST_OK;
	if (n->dead) {
		*status = ISC_PARAM_ST_INITIATOR_ERR;
		return -EPROTO;
	}
	if (next <= stage || stage == ISC_STAGE_FFP || !n->first_done) {
		r = proto_err(status, "transit", "bad stage transition");
		goto dead;
	}
	if (next != ISC_STAGE_FFP)
		return 1;

	r = target_offers(n, resp, status);
	if (r < 0)
		goto dead;
	if (r > 0)
		return 0;

	if (n->p.session_type == ISC_SESSION_NORMAL) {
		if ((n->caps & ISC_TRANSPORT_RDMA) && !n->p.rdma_extensions) {
			/* An RDMA datamover cannot carry traditional iSCSI PDUs. */
			r = proto_err(status, "RDMAExtensions",
				      "iSER connection without RDMAExtensions=Yes");
			goto dead;
		}
		if (!(n->p.initial_r2t && !n->p.immediate_data) &&
		    n->p.first_burst_length > n->p.max_burst_length) {
			r = proto_err(status, "FirstBurstLength", "larger than MaxBurstLength");
			goto dead;
		}
		if (n->target_alias && !(n->st[K_TARGET_ALIAS] & KS_SENT)) {
			r = isc_kv_append(resp, "TargetAlias", n->target_alias);
			if (r)
				goto dead;
			n->st[K_TARGET_ALIAS] |= KS_SENT;
		}
	}
	if (n->p.rdma_extensions) {
		if (!(n->st[K_TRDSL] & KS_SENT)) {
			n->p.target_recv_dsl = target_recv_dsl(n);
			r = kv_append_u32(resp, "TargetRecvDataSegmentLength",
					  n->p.target_recv_dsl);
			if (r)
				goto dead;
			n->st[K_TRDSL] |= KS_SENT;
		}
	} else if (!(n->st[K_MRDSL] & KS_SENT)) {
		r = kv_append_u32(resp, "MaxRecvDataSegmentLength", n->p.max_recv_dsl);
		if (r)
			goto dead;
		n->st[K_MRDSL] |= KS_SENT;
	}
	return 1;
dead:
	if (r == -ENOMEM)
		*status = ISC_PARAM_ST_TARGET_ERR;
	n->dead = true;
	return r;
}
