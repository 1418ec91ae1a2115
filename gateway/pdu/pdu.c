// SPDX-License-Identifier: MIT
/*
 * PDU objects and received-header validation. PDUs come from a free list; each keeps its data
 * buffer between uses (up to ISC_PDU_KEEP_MAX) so steady-state traffic never mallocs.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gw_log.h"
#include "pdu.h"

void pdu_pool_init(struct pdu_pool *pp, size_t max)
{
	gw_list_init(&pp->free);
	pp->nfree = 0;
	pp->max_free = max ? max : 1024;
	pp->live = 0;
	pp->kept = 0;
}

size_t pdu_pool_cached_bytes(const struct pdu_pool *pp)
{
	return pp->nfree * sizeof(struct pdu) + pp->kept;
}

static void pdu_free(struct pdu *pdu)
{
	free(pdu->own);
	free(pdu->ahs);
	free(pdu);
}

void pdu_pool_fini(struct pdu_pool *pp)
{
	struct pdu *pdu, *tmp;

	if (pp->live)
		gw_warn("iscsi", "PDU pool freed with %zu PDUs still referenced", pp->live);
	gw_list_for_each_entry_safe(pdu, tmp, &pp->free, node) {
		gw_list_del(&pdu->node);
		pdu_free(pdu);
	}
	pp->nfree = 0;
	pp->kept = 0;
}

/* The pool is a free list of whole PDU objects rather than a gw_pool: a recycled PDU must keep
 * its data buffer, and gw_pool objects come back uninitialised. */
struct pdu *pdu_get(struct pdu_pool *pp)
{
	struct pdu *pdu;
	uint8_t *own = NULL;
	uint32_t cap = 0;

	if (!gw_list_empty(&pp->free)) {
		pdu = gw_list_first_entry(&pp->free, struct pdu, node);
		gw_list_del(&pdu->node);
		pp->nfree--;
		own = pdu->own;
		cap = pdu->data_cap;
		if (own)
			pp->kept -= cap;
	} else {
		pdu = malloc(sizeof(*pdu));
		if (!pdu)
			return NULL;
	}
	memset(pdu, 0, sizeof(*pdu));
	pdu->own = own;
	pdu->data_cap = cap;
	pdu->refcnt = 1;
	pdu->pool = pp;
	gw_list_init(&pdu->node);
	pp->live++;
	return pdu;
}

void pdu_ref(struct pdu *pdu)
{
	pdu->refcnt++;
}

void pdu_put(struct pdu *pdu)
{
	struct pdu_pool *pp;

	if (!pdu || --pdu->refcnt > 0)
		return;
	pp = pdu->pool;
	pp->live--;
	free(pdu->ahs);
	pdu->ahs = NULL;
	if (pp->nfree >= pp->max_free) {
		pdu_free(pdu);
		return;
	}
	if (pdu->own && (pdu->data_cap > ISC_PDU_KEEP_MAX ||
			 pp->kept + pdu->data_cap > ISC_PDU_KEPT_MAX)) {
		free(pdu->own);
		pdu->own = NULL;
		pdu->data_cap = 0;
	}
	if (pdu->own)
		pp->kept += pdu->data_cap;
	gw_list_add(&pp->free, &pdu->node);
	pp->nfree++;
}

int pdu_alloc_data(struct pdu *pdu, uint32_t len)
{
	/* Room for the pad bytes too, so a receiver can read data + pad in one go. */
	uint32_t need = pdu_pad4(len);

	if (len > ISC_DSL_MAX)
		return -EINVAL;
	if (need > pdu->data_cap || !pdu->own) {
		uint32_t cap = need < 512 ? 512 : need;
		uint8_t *p = realloc(pdu->own, cap);

		if (!p)
			return -ENOMEM;
		pdu->own = p;
		pdu->data_cap = cap;
	}
	pdu->data = pdu->own;
	pdu->data_ext = false;
	pdu->data_len = len;
	pdu_put24(pdu->bhs, 5, len);
	return 0;
}

int pdu_set_data(struct pdu *pdu, const void *p, uint32_t len)
{
	int r = pdu_alloc_data(pdu, len);

	if (r)
		return r;
	if (len)
		memcpy(pdu->data, p, len);
	return 0;
}

void pdu_set_ext_data(struct pdu *pdu, void *p, uint32_t len)
{
	pdu->data = p;
	pdu->data_len = len;
	pdu->data_ext = true;
	pdu_put24(pdu->bhs, 5, len);
}

int pdu_alloc_ahs(struct pdu *pdu, uint32_t len)
{
	if (len % 4 || len > 255 * 4)
		return -EINVAL;
	free(pdu->ahs);
	pdu->ahs = NULL;
	pdu->ahs_len = 0;
	pdu->bhs[4] = 0;
	if (!len)
		return 0;
	pdu->ahs = calloc(1, len);
	if (!pdu->ahs)
		return -ENOMEM;
	pdu->ahs_len = len;
	pdu->bhs[4] = (uint8_t)(len / 4);
	return 0;
}

const char *pdu_opcode_name(uint8_t op)
{
	switch (op) {
	case ISC_OP_NOP_OUT: return "NOP-Out";
	case ISC_OP_SCSI_CMD: return "SCSI Command";
	case ISC_OP_TMF_REQ: return "Task Management Request";
	case ISC_OP_LOGIN_REQ: return "Login Request";
	case ISC_OP_TEXT_REQ: return "Text Request";
	case ISC_OP_DATA_OUT: return "Data-Out";
	case ISC_OP_LOGOUT_REQ: return "Logout Request";
	case ISC_OP_SNACK: return "SNACK";
	case ISC_OP_NOP_IN: return "NOP-In";
	case ISC_OP_SCSI_RSP: return "SCSI Response";
	case ISC_OP_TMF_RSP: return "Task Management Response";
	case ISC_OP_LOGIN_RSP: return "Login Response";
	case ISC_OP_TEXT_RSP: return "Text Response";
	case ISC_OP_DATA_IN: return "Data-In";
	case ISC_OP_LOGOUT_RSP: return "Logout Response";
	case ISC_OP_R2T: return "R2T";
	case ISC_OP_ASYNC: return "Asynchronous Message";
	case ISC_OP_REJECT: return "Reject";
	default: return "unknown";
	}
}

enum pdu_bhs_verdict pdu_bhs_check(const uint8_t *bhs, uint32_t max_dsl, uint8_t *reason,
				   const char **why)
{
	uint8_t op = pdu_bhs_opcode(bhs);
	uint32_t dsl = pdu_bhs_dsl(bhs);

	*reason = 0;
	*why = "";
	/* The length checks come first: whatever else is wrong, the receiver must be able to
	 * skip the PDU, and a length beyond what was declared means the stream is not iSCSI. */
	if (dsl > max_dsl) {
		*why = "DataSegmentLength exceeds MaxRecvDataSegmentLength";
		return ISC_BHS_FATAL;
	}
	switch (op) {
	case ISC_OP_NOP_OUT:
	case ISC_OP_TMF_REQ:
	case ISC_OP_LOGOUT_REQ:
	case ISC_OP_SNACK:
		if (!(bhs[1] & ISC_FL_F) && op != ISC_OP_SNACK) {
			*reason = ISC_REJ_PROTOCOL;
			*why = "F bit clear on a single-PDU request";
			return ISC_BHS_BAD_FIELD;
		}
		break;
	case ISC_OP_SCSI_CMD:
		if (!(bhs[1] & ISC_FL_F) && (bhs[1] & ISC_FL_W) == 0) {
			*reason = ISC_REJ_PROTOCOL;
			*why = "F bit clear on a command without write data";
			return ISC_BHS_BAD_FIELD;
		}
		break;
	case ISC_OP_LOGIN_REQ:
		if ((bhs[1] & ISC_FL_T) && (bhs[1] & ISC_FL_C)) {
			*reason = ISC_REJ_PROTOCOL;
			*why = "Login Request with both T and C set";
			return ISC_BHS_BAD_FIELD;
		}
		break;
	case ISC_OP_TEXT_REQ:
		if ((bhs[1] & ISC_FL_F) && (bhs[1] & ISC_FL_C)) {
			*reason = ISC_REJ_PROTOCOL;
			*why = "Text Request with both F and C set";
			return ISC_BHS_BAD_FIELD;
		}
		break;
	case ISC_OP_DATA_OUT:
		break;
	default:
		*reason = ISC_REJ_CMD_NOT_SUPPORTED;
		*why = "opcode not valid from an initiator";
		return ISC_BHS_BAD_OPCODE;
	}
	return ISC_BHS_OK;
}
