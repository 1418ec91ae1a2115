// SPDX-License-Identifier: MIT
/*
 * Reservations: SPC-4 persistent reservations (PERSISTENT RESERVE IN / OUT, all six types,
 * registrations per I_T nexus that outlive sessions) and SPC-2 RESERVE(6) / RELEASE(6), plus
 * the conflict check every command goes through.
 *
 * A registration is keyed by the initiator port name and the relative target port id, not by
 * a session, so a reconnecting initiator finds its key again. APTPL is accepted but nothing is
 * persisted across a restart of the gateway (logged when asked for).
 *
 * In a cluster (scsi_pr_cluster.c, above this file) these same rules decide a PERSISTENT
 * RESERVE OUT on a copy of the state applied last; lu->prc.deciding then holds back the unit
 * attentions and aborts, which come when the state the cluster took is applied: the nexuses
 * PREEMPT AND ABORT removed are noted in lu->prc.aborted for the proposal.
 *
 * It calls only below it: the unit attentions and relative port ids (scsi_itn.c), the task
 * set's abort of queued commands (scsi_exec.c) and the reply helpers. The opcode table names
 * PR IN and RESERVE / RELEASE(6) here; PR OUT is scsi_pr_cluster.c's, which runs
 * scsi_pr_out_local when the reservations are this gateway's own.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gw_log.h"
#include "scsi_priv.h"

void scsi_pr_init(struct scsi_pr *pr)
{
	memset(pr, 0, sizeof(*pr));
	gw_list_init(&pr->regs);
}

void scsi_pr_reg_free(struct scsi_pr_reg *r)
{
	gw_list_del(&r->node);
	free(r->initiator);
	free(r->initiator_name);
	free(r);
}

void scsi_pr_fini(struct scsi_pr *pr)
{
	struct scsi_pr_reg *r, *t;

	gw_list_for_each_entry_safe(r, t, &pr->regs, node)
		scsi_pr_reg_free(r);
	pr->reserved = false;
	pr->holder = NULL;
}

bool scsi_pr_type_valid(uint8_t type)
{
	return type == SCSI_PR_TYPE_WE || type == SCSI_PR_TYPE_EA || type == SCSI_PR_TYPE_WE_RO ||
	       type == SCSI_PR_TYPE_EA_RO || type == SCSI_PR_TYPE_WE_AR ||
	       type == SCSI_PR_TYPE_EA_AR;
}

bool scsi_pr_all_reg(uint8_t type)
{
	return type == SCSI_PR_TYPE_WE_AR || type == SCSI_PR_TYPE_EA_AR;
}

/* A registration made through a name-only TransportID matches every port of that initiator. */
bool scsi_pr_reg_matches(const struct scsi_pr_reg *r, const struct scsi_itn *itn)
{
	if (r->rel_id != scsi_itn_rel_id(itn))
		return false;
	if (r->initiator[0])
		return strcasecmp(r->initiator, itn->initiator) == 0;
	return strcasecmp(r->initiator_name, itn->initiator_name) == 0;
}

static struct scsi_pr_reg *scsi_pr_find(struct scsi_lu *lu, const struct scsi_itn *itn)
{
	struct scsi_pr_reg *r;

	if (!itn)
		return NULL;
	gw_list_for_each_entry(r, &lu->pr.regs, node)
		if (scsi_pr_reg_matches(r, itn))
			return r;
	return NULL;
}

static bool scsi_pr_is_holder(const struct scsi_pr *pr, const struct scsi_pr_reg *r)
{
	if (!pr->reserved || !r)
		return false;
	return scsi_pr_all_reg(pr->type) || pr->holder == r;
}

/* Unit attention for every connected nexus a registration stands for. */
static void scsi_pr_reg_ua(struct scsi_lu *lu, const struct scsi_pr_reg *r, int ua)
{
	struct scsi_itn *itn;

	if (lu->prc.deciding)
		return;
	/* Nexuses log in and out on every loop: the list is walked under its lock. */
	pthread_mutex_lock(&lu->dev->itn_lock);
	gw_list_for_each_entry(itn, &lu->dev->itns, node)
		if (scsi_pr_reg_matches(r, itn))
			scsi_ua_set_itn(itn, lu, ua);
	pthread_mutex_unlock(&lu->dev->itn_lock);
}

void scsi_pr_abort_reg(struct scsi_lu *lu, const struct scsi_pr_reg *r)
{
	struct scsi_cmd *cmd, *t;

	if (lu->prc.deciding) {
		/* On the cluster's copy: the tasks go when the state is applied, on every gateway;
		 * scsi_pr_cluster.c names the nexus in its proposal. */
		scsi_pr_reg_new(&lu->prc.aborted, r->initiator, r->initiator_name, r->rel_id, 0);
		return;
	}
	gw_list_for_each_entry_safe(cmd, t, &lu->waitq, node)
		if (cmd->itn && scsi_pr_reg_matches(r, cmd->itn))
			scsi_task_abort_queued(cmd);
}

bool scsi_pr_conflict(struct scsi_cmd *cmd, const struct scsi_op *op)
{
	struct scsi_lu *lu = cmd->lu;
	struct scsi_pr *pr = &lu->pr;
	struct scsi_pr_reg *r;
	bool registered;

	if (lu->res2_holder && lu->res2_holder != cmd->itn && !(op->flags & SCSI_OPF_RES2_OK))
		goto conflict;
	if (!pr->reserved || op->pr == SCSI_PRC_ALLOW || op->pr == SCSI_PRC_OWN)
		return false;
	r = scsi_pr_find(lu, cmd->itn);
	if (scsi_pr_is_holder(pr, r))
		return false;
	registered = r != NULL;
	switch (pr->type) {
	case SCSI_PR_TYPE_WE:
		if (op->pr == SCSI_PRC_READ)
			return false;
		break;
	case SCSI_PR_TYPE_EA:
		break;
	case SCSI_PR_TYPE_WE_RO:
	case SCSI_PR_TYPE_WE_AR:
		if (op->pr == SCSI_PRC_READ || registered)
			return false;
		break;
	case SCSI_PR_TYPE_EA_RO:
	case SCSI_PR_TYPE_EA_AR:
		if (registered)
			return false;
		break;
	}
conflict:
	cmd->status = SCSI_RESERVATION_CONFLICT;
	cmd->sense_len = 0;
	return true;
}

static int scsi_pr_conflict_status(struct scsi_cmd *cmd)
{
	cmd->status = SCSI_RESERVATION_CONFLICT;
	cmd->sense_len = 0;
	return SCSI_CMD_DONE;
}

/* RESERVE(6) / RELEASE(6) */

int scsi_pr_reserve6(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;

	/* CRH is 0: the SPC-2 commands conflict with any persistent reservation state. */
	if (lu->pr.reserved || !gw_list_empty(&lu->pr.regs))
		return scsi_pr_conflict_status(cmd);
	if (lu->res2_holder && lu->res2_holder != cmd->itn)
		return scsi_pr_conflict_status(cmd);
	lu->res2_holder = cmd->itn;
	return SCSI_CMD_DONE;
}

int scsi_pr_release6(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;

	if (lu->pr.reserved)
		return scsi_pr_conflict_status(cmd);
	/* Releasing someone else's reservation, or none, succeeds and changes nothing. */
	if (lu->res2_holder == cmd->itn)
		lu->res2_holder = NULL;
	return SCSI_CMD_DONE;
}

/* PERSISTENT RESERVE IN */

/* iSCSI TransportID (SPC-4 7.6.4.6): format 01b with the ISID when we know the port. */
static uint32_t scsi_pr_transport_id(const struct scsi_pr_reg *r, uint8_t *d, uint32_t room)
{
	const char *name = r->initiator[0] ? r->initiator : r->initiator_name;
	uint32_t l = (uint32_t)strlen(name) + 1;

	l = (l + 3) & ~3u;
	if (l < 20)
		l = 20;
	if (4 + l > room)
		return 0;
	memset(d, 0, 4 + l);
	d[0] = (r->initiator[0] ? 0x40 : 0x00) | 0x05;
	scsi_put16(&d[2], (uint16_t)l);
	memcpy(&d[4], name, strlen(name));
	return 4 + l;
}

int scsi_pr_in(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;
	struct scsi_pr *pr = &lu->pr;
	const uint8_t *c = cmd->cdb;
	uint32_t alloc = scsi_get16(&c[7]);
	struct scsi_pr_reg *r;
	uint8_t b[4096];
	uint32_t n = 8;

	memset(b, 0, sizeof(b));
	scsi_put32(b, pr->generation);
	switch (c[1] & 0x1f) {
	case 0x00:	/* READ KEYS */
		gw_list_for_each_entry(r, &pr->regs, node) {
			if (n + 8 > sizeof(b))
				break;
			scsi_put64(&b[n], r->key);
			n += 8;
		}
		break;
	case 0x01:	/* READ RESERVATION */
		if (pr->reserved) {
			if (!scsi_pr_all_reg(pr->type) && pr->holder)
				scsi_put64(&b[8], pr->holder->key);
			b[21] = pr->type & 0x0f;	/* scope 0: LU */
			n = 24;
		}
		break;
	case 0x02:	/* REPORT CAPABILITIES */
		scsi_put16(b, 8);
		b[2] = 0x01;			/* PTPL_C: accepted (see above) */
		b[3] = 0x80 | (pr->aptpl ? 0x01 : 0);	/* TMV, PTPL_A */
		b[4] = 0x80 | 0x40 | 0x20 | 0x08 | 0x02;
		b[5] = 0x01;
		scsi_cmd_data_in(cmd, b, alloc < 8 ? alloc : 8);
		return SCSI_CMD_DONE;
	case 0x03:	/* READ FULL STATUS */
		gw_list_for_each_entry(r, &pr->regs, node) {
			uint8_t *d = &b[n];
			uint32_t t;

			if (n + 24 + 260 > sizeof(b))
				break;
			scsi_put64(d, r->key);
			if (scsi_pr_is_holder(pr, r)) {
				d[12] = 0x01;	/* R_HOLDER */
				d[13] = pr->type & 0x0f;
			}
			scsi_put16(&d[18], r->rel_id);
			t = scsi_pr_transport_id(r, &d[24], (uint32_t)sizeof(b) - n - 24);
			scsi_put32(&d[20], t);
			n += 24 + t;
		}
		break;
	default:
		scsi_cmd_invalid_cdb(cmd, 1, 4);
		return SCSI_CMD_DONE;
	}
	scsi_put32(&b[4], n - 8);
	scsi_cmd_data_in(cmd, b, alloc < n ? alloc : n);
	return SCSI_CMD_DONE;
}

/* PERSISTENT RESERVE OUT */

struct scsi_pr_reg *scsi_pr_reg_new(struct gw_list *list, const char *initiator,
				    const char *name, uint16_t rel_id, uint64_t key)
{
	struct scsi_pr_reg *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->initiator = strdup(initiator);
	r->initiator_name = strdup(name);
	if (!r->initiator || !r->initiator_name) {
		free(r->initiator);
		free(r->initiator_name);
		free(r);
		return NULL;
	}
	r->rel_id = rel_id;
	r->key = key;
	gw_list_add_tail(list, &r->node);
	return r;
}

static struct scsi_pr_reg *scsi_pr_add(struct scsi_lu *lu, const char *initiator,
				       const char *name, uint16_t rel_id, uint64_t key)
{
	return scsi_pr_reg_new(&lu->pr.regs, initiator, name, rel_id, key);
}

/* Removes a registration, releasing the reservation it held (SPC-4 5.13.11.2.3). */
static void scsi_pr_unregister(struct scsi_lu *lu, struct scsi_pr_reg *r)
{
	struct scsi_pr *pr = &lu->pr;
	bool release = false;

	if (pr->reserved) {
		if (scsi_pr_all_reg(pr->type))
			release = pr->regs.next == &r->node && pr->regs.prev == &r->node;
		else
			release = pr->holder == r;
	}
	if (pr->holder == r)
		pr->holder = NULL;
	if (release) {
		uint8_t type = pr->type;
		struct scsi_pr_reg *o;

		pr->reserved = false;
		if (type == SCSI_PR_TYPE_WE_RO || type == SCSI_PR_TYPE_EA_RO)
			gw_list_for_each_entry(o, &pr->regs, node)
				if (o != r)
					scsi_pr_reg_ua(lu, o, SCSI_UA_RES_RELEASED);
	} else if (pr->reserved && scsi_pr_all_reg(pr->type) && !pr->holder) {
		/* AR types: any remaining registrant holds it. */
		struct scsi_pr_reg *o;

		gw_list_for_each_entry(o, &pr->regs, node)
			if (o != r) {
				pr->holder = o;
				break;
			}
	}
	scsi_pr_reg_free(r);
}

struct scsi_pr_params {
	uint64_t key, sakey;
	uint8_t flags;		/* byte 20: SPEC_I_PT, ALL_TG_PT, APTPL */
	uint8_t sa, scope, type;
};

static int scsi_pr_register(struct scsi_cmd *cmd, struct scsi_pr_params *p, bool ignore)
{
	struct scsi_lu *lu = cmd->lu;
	struct scsi_pr_reg *r = scsi_pr_find(lu, cmd->itn);

	if (p->flags & 0x08) {
		scsi_cmd_invalid_param(cmd, 20, 3);	/* SPEC_I_PT: not supported */
		return SCSI_CMD_DONE;
	}
	if (p->flags & 0x04) {
		scsi_cmd_invalid_param(cmd, 20, 2);	/* ALL_TG_PT: not supported */
		return SCSI_CMD_DONE;
	}
	if (!ignore && (r ? r->key != p->key : p->key != 0))
		return scsi_pr_conflict_status(cmd);
	if (p->flags & 0x01 && !scsi_dev_pr_cluster(lu->dev)) {
		if (!lu->pr.aptpl)
			gw_warn(SCSI_LOG, "%s: LUN %llu: APTPL accepted, but reservations are not "
				"persisted across a gateway restart", lu->dev->name,
				(unsigned long long)lu->lun);
	}
	if (!r) {
		if (!p->sakey)
			return SCSI_CMD_DONE;
		r = scsi_pr_add(lu, cmd->itn->initiator, cmd->itn->initiator_name,
				scsi_itn_rel_id(cmd->itn), p->sakey);
		if (!r) {
			cmd->status = SCSI_BUSY;
			return SCSI_CMD_DONE;
		}
	} else if (!p->sakey) {
		scsi_pr_unregister(lu, r);
	} else {
		r->key = p->sakey;
	}
	lu->pr.aptpl = p->flags & 0x01;
	lu->pr.generation++;
	return SCSI_CMD_DONE;
}

static int scsi_pr_reserve(struct scsi_cmd *cmd, struct scsi_pr_params *p,
			   struct scsi_pr_reg *r)
{
	struct scsi_pr *pr = &cmd->lu->pr;

	if (pr->reserved) {
		if (scsi_pr_is_holder(pr, r) && pr->type == p->type)
			return SCSI_CMD_DONE;
		return scsi_pr_conflict_status(cmd);
	}
	pr->reserved = true;
	pr->type = p->type;
	pr->holder = r;
	return SCSI_CMD_DONE;
}

static int scsi_pr_release(struct scsi_cmd *cmd, struct scsi_pr_params *p,
			   struct scsi_pr_reg *r)
{
	struct scsi_lu *lu = cmd->lu;
	struct scsi_pr *pr = &lu->pr;
	struct scsi_pr_reg *o;
	uint8_t type = pr->type;

	if (!pr->reserved || !scsi_pr_is_holder(pr, r))
		return SCSI_CMD_DONE;
	if (p->type != pr->type) {
		/* INVALID RELEASE OF PERSISTENT RESERVATION */
		scsi_cmd_set_sense(cmd, SCSI_SK_ILLEGAL_REQUEST, 0x26, 0x04);
		return SCSI_CMD_DONE;
	}
	pr->reserved = false;
	pr->holder = NULL;
	if (type != SCSI_PR_TYPE_WE && type != SCSI_PR_TYPE_EA)
		gw_list_for_each_entry(o, &pr->regs, node)
			if (o != r)
				scsi_pr_reg_ua(lu, o, SCSI_UA_RES_RELEASED);
	return SCSI_CMD_DONE;
}

static int scsi_pr_clear(struct scsi_cmd *cmd, struct scsi_pr_reg *r)
{
	struct scsi_lu *lu = cmd->lu;
	struct scsi_pr_reg *o, *t;

	gw_list_for_each_entry_safe(o, t, &lu->pr.regs, node) {
		if (o != r)
			scsi_pr_reg_ua(lu, o, SCSI_UA_RES_PREEMPTED);
		scsi_pr_reg_free(o);
	}
	lu->pr.reserved = false;
	lu->pr.holder = NULL;
	lu->pr.generation++;
	return SCSI_CMD_DONE;
}

/* Removes every registration with key (all but ours when key is 0). Returns how many. */
static int scsi_pr_remove_key(struct scsi_lu *lu, struct scsi_pr_reg *self, uint64_t key,
			      bool all, bool abort)
{
	struct scsi_pr_reg *o, *t;
	int n = 0;

	gw_list_for_each_entry_safe(o, t, &lu->pr.regs, node) {
		if (o == self || (!all && o->key != key))
			continue;
		scsi_pr_reg_ua(lu, o, SCSI_UA_REG_PREEMPTED);
		if (abort)
			scsi_pr_abort_reg(lu, o);
		if (lu->pr.holder == o)
			lu->pr.holder = NULL;
		scsi_pr_reg_free(o);
		n++;
	}
	return n;
}

static int scsi_pr_preempt(struct scsi_cmd *cmd, struct scsi_pr_params *p,
			   struct scsi_pr_reg *r, bool abort)
{
	struct scsi_lu *lu = cmd->lu;
	struct scsi_pr *pr = &lu->pr;
	int n;

	if (!pr->reserved || (scsi_pr_all_reg(pr->type) && p->sakey) ||
	    (!scsi_pr_all_reg(pr->type) && pr->holder && p->sakey != pr->holder->key)) {
		/* Only registrations go (SPC-4 5.13.11.4.3/4): the reservation stays. */
		if (!p->sakey) {
			scsi_cmd_invalid_param(cmd, 8, -1);
			return SCSI_CMD_DONE;
		}
		n = scsi_pr_remove_key(lu, r, p->sakey, false, abort);
		if (!n)
			return scsi_pr_conflict_status(cmd);
		pr->generation++;
		return SCSI_CMD_DONE;
	}
	/* The reservation itself is preempted: AR with key 0 removes every other registrant,
	 * otherwise those with the holder's key; the preemptor becomes the holder. */
	scsi_pr_remove_key(lu, r, p->sakey, scsi_pr_all_reg(pr->type) && !p->sakey, abort);
	pr->reserved = true;
	pr->type = p->type;
	pr->holder = r;
	pr->generation++;
	return SCSI_CMD_DONE;
}

static int scsi_pr_register_move(struct scsi_cmd *cmd, struct scsi_pr_params *p,
				 struct scsi_pr_reg *r, uint32_t plen)
{
	struct scsi_lu *lu = cmd->lu;
	struct scsi_pr *pr = &lu->pr;
	uint8_t b[24 + 264];
	uint32_t tidlen, namelen;
	uint16_t rel_id;
	struct scsi_pr_reg *d, *o;
	char name[256], port[256];
	bool unreg;

	if (!r || r->key != p->key)
		return scsi_pr_conflict_status(cmd);
	if (!pr->reserved || pr->holder != r || scsi_pr_all_reg(pr->type))
		return scsi_pr_conflict_status(cmd);
	if (plen > sizeof(b))
		plen = sizeof(b);
	if (plen < 24 || scsi_cmd_data_out(cmd, 0, b, plen) < 24) {
		scsi_cmd_param_len_error(cmd);
		return SCSI_CMD_DONE;
	}
	unreg = b[17] & 0x02;
	rel_id = scsi_get16(&b[18]);
	tidlen = scsi_get32(&b[20]);
	if (!p->sakey) {
		scsi_cmd_invalid_param(cmd, 8, -1);
		return SCSI_CMD_DONE;
	}
	if (tidlen < 24 || 24 + tidlen > plen || (b[24] & 0x0f) != 0x05) {
		scsi_cmd_invalid_param(cmd, 24, -1);
		return SCSI_CMD_DONE;
	}
	namelen = scsi_get16(&b[26]);
	if (namelen + 4 > tidlen || namelen >= sizeof(name)) {
		scsi_cmd_invalid_param(cmd, 26, -1);
		return SCSI_CMD_DONE;
	}
	memcpy(name, &b[28], namelen);
	name[namelen] = 0;
	snprintf(port, sizeof(port), "%s", name);
	if (b[24] & 0x40) {
		char *sep = strstr(name, ",i,0x");

		if (!sep) {
			scsi_cmd_invalid_param(cmd, 28, -1);
			return SCSI_CMD_DONE;
		}
		*sep = 0;
	} else {
		port[0] = 0;
	}
	/* The destination: an existing registration of that nexus, or a new one. */
	d = NULL;
	gw_list_for_each_entry(o, &pr->regs, node)
		if (o->rel_id == rel_id && (port[0] ? strcasecmp(o->initiator, port) == 0 :
					    strcasecmp(o->initiator_name, name) == 0))
			d = o;
	if (d == r) {
		scsi_cmd_invalid_param(cmd, 24, -1);
		return SCSI_CMD_DONE;
	}
	if (!d) {
		d = scsi_pr_add(lu, port, name, rel_id, p->sakey);
		if (!d) {
			cmd->status = SCSI_BUSY;
			return SCSI_CMD_DONE;
		}
	}
	d->key = p->sakey;
	pr->holder = d;
	pr->type = p->type;
	if (unreg)
		scsi_pr_reg_free(r);
	pr->generation++;
	return SCSI_CMD_DONE;
}

int scsi_pr_out_local(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;
	const uint8_t *c = cmd->cdb;
	uint32_t plen = scsi_get32(&c[5]);
	struct scsi_pr_params p = { 0 };
	struct scsi_pr_reg *r;
	uint8_t b[24];

	p.sa = c[1] & 0x1f;
	p.scope = c[2] >> 4;
	p.type = c[2] & 0x0f;
	cmd->cdb_xfer_len = plen;
	if (!cmd->itn) {
		scsi_cmd_invalid_cdb(cmd, 1, -1);
		return SCSI_CMD_DONE;
	}
	if (p.sa != 0x07 ? plen != 24 : plen < 24) {
		scsi_cmd_param_len_error(cmd);
		return SCSI_CMD_DONE;
	}
	if (scsi_cmd_data_out(cmd, 0, b, 24) < 24) {
		scsi_cmd_param_len_error(cmd);
		return SCSI_CMD_DONE;
	}
	p.key = scsi_get64(b);
	p.sakey = scsi_get64(&b[8]);
	p.flags = b[20];
	/* Scope and type matter to RESERVE, RELEASE, PREEMPT (and REGISTER AND MOVE). */
	if (p.sa == 0x01 || p.sa == 0x02 || p.sa == 0x04 || p.sa == 0x05 || p.sa == 0x07) {
		if (p.scope) {
			scsi_cmd_invalid_cdb(cmd, 2, 7);
			return SCSI_CMD_DONE;
		}
		if (!scsi_pr_type_valid(p.type)) {
			scsi_cmd_invalid_cdb(cmd, 2, 3);
			return SCSI_CMD_DONE;
		}
	}
	if (p.sa == 0x00)
		return scsi_pr_register(cmd, &p, false);
	if (p.sa == 0x06)
		return scsi_pr_register(cmd, &p, true);
	r = scsi_pr_find(lu, cmd->itn);
	if (p.sa == 0x07)
		return scsi_pr_register_move(cmd, &p, r, plen);
	if (!r || r->key != p.key)
		return scsi_pr_conflict_status(cmd);
	switch (p.sa) {
	case 0x01:
		return scsi_pr_reserve(cmd, &p, r);
	case 0x02:
		return scsi_pr_release(cmd, &p, r);
	case 0x03:
		return scsi_pr_clear(cmd, r);
	case 0x04:
		return scsi_pr_preempt(cmd, &p, r, false);
	case 0x05:
		return scsi_pr_preempt(cmd, &p, r, true);
	}
	scsi_cmd_invalid_cdb(cmd, 1, 4);
	return SCSI_CMD_DONE;
}
