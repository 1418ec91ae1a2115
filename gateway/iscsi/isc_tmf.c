// SPDX-License-Identifier: MIT
/*
 * Task Management Function requests (RFC 7143 §11.5, §11.6). Affected tasks end without a
 * SCSI Response; the TMF Response leaves only once every one of them has ended (the SCSI core
 * may still be running some), as §4.2.3.3 requires.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gw_log.h"
#include "isc_priv.h"

enum {
	ISC_TMF_ABORT_TASK = 1,
	ISC_TMF_ABORT_TASK_SET = 2,
	ISC_TMF_CLEAR_ACA = 3,
	ISC_TMF_CLEAR_TASK_SET = 4,
	ISC_TMF_LUN_RESET = 5,
	ISC_TMF_TARGET_WARM_RESET = 6,
	ISC_TMF_TARGET_COLD_RESET = 7,
	ISC_TMF_TASK_REASSIGN = 8,
};

/* TMF Response codes */
enum {
	ISC_TMF_RSP_COMPLETE = 0,
	ISC_TMF_RSP_NO_TASK = 1,
	ISC_TMF_RSP_NO_LUN = 2,
	ISC_TMF_RSP_STILL_ALLEGIANT = 3,
	ISC_TMF_RSP_NO_REASSIGN = 4,
	ISC_TMF_RSP_NOT_SUPPORTED = 5,
	ISC_TMF_RSP_AUTH_FAILED = 6,
	ISC_TMF_RSP_REJECTED = 255,
};

static void isc_tmf_respond(struct isc_tmf *tmf)
{
	struct isc_conn *c = tmf->conn;
	struct pdu *pdu;
	struct isc_session *s;

	gw_list_del(&tmf->node);
	if (!c || c->state != ISC_CONN_FFP) {
		free(tmf);
		return;
	}
	s = c->sess;
	pdu = isc_conn_new_pdu(c, ISC_OP_TMF_RSP, pdu_bhs_itt(tmf->bhs));
	if (pdu) {
		pdu->bhs[2] = tmf->response;
		isc_conn_stamp(c, pdu->bhs, true);
		isc_conn_send(c, pdu);
	}
	gw_dbg("iscsi", "%s: TMF function %u answered %u", c->dc->peer, tmf->bhs[1] & 0x7f,
	       tmf->response);
	if (tmf->cold_reset && s && s->target) {
		/* A cold reset ends every session of the target, this one included (§11.5.1),
		 * each on its loop. */
		isc_target_close_sessions(s->target, "target cold reset");
	}
	free(tmf);
}

static void isc_tmf_share_answer(struct isc_tmf *share);

void isc_tmf_task_ended(struct isc_tmf *tmf)
{
	if (--tmf->waiting > 0)
		return;
	if (tmf->share)
		isc_tmf_share_answer(tmf);
	else
		isc_tmf_respond(tmf);
}

void isc_tmf_conn_gone(struct isc_conn *c)
{
	while (!gw_list_empty(&c->tmfs)) {
		struct isc_tmf *tmf = gw_list_first_entry(&c->tmfs, struct isc_tmf, node);

		gw_list_del(&tmf->node);
		tmf->conn = NULL;
	}
}

static struct isc_task *isc_tmf_find_task(struct isc_session *s, uint32_t itt)
{
	struct isc_conn *c;
	struct isc_task *t;

	gw_list_for_each_entry(c, &s->conns, node) {
		t = isc_conn_find_task(c, itt);
		if (t)
			return t;
	}
	return NULL;
}

/* Aborts the tasks of one session (lun_only: on that LUN). The TMF's own session's (own)
 * end silently; another session's are answered TASK ABORTED (isc_task_abort_other). The TMF,
 * if given (it is on this loop), waits for both. */
static void isc_tmf_abort_session(struct isc_session *s, bool own, bool lun_only, uint64_t lun,
				  struct isc_tmf *tmf)
{
	struct isc_conn *c;
	struct isc_task *t, *tmp;

	gw_list_for_each_entry(c, &s->conns, node) {
		gw_list_for_each_entry_safe(t, tmp, &c->tasks, cnode) {
			if (t->kind != ISC_TASK_SCSI || (lun_only && t->lun != lun))
				continue;
			if (own)
				isc_task_abort(t, tmf);
			else
				isc_task_abort_other(t, tmf);
		}
	}
}

/* The target's sessions on loop lp (its thread); asker: the TMF's session, or NULL when it
 * is on another loop. */
static void isc_tmf_abort_loop(struct isc_loop *lp, const struct isc_target *target,
			       const struct isc_session *asker, bool lun_only, uint64_t lun,
			       struct isc_tmf *tmf)
{
	struct isc_session *s;

	gw_list_for_each_entry(s, &lp->sessions, lnode)
		if (s->target == target)
			isc_tmf_abort_session(s, s == asker, lun_only, lun, tmf);
}

/* A TMF's abort of the target's sessions on another loop: run there as a share (a TMF of that
 * loop without a connection) that waits for the tasks it aborted to end, each answered TASK
 * ABORTED or with its status, then answered back on the asking session's loop, where the TMF
 * counts the answer as one task ended. The TMF is freed only once every share has answered,
 * so a connection that closes meanwhile (tmf->conn = NULL) leaves nothing dangling. */
struct isc_tmf_msg {
	struct isc_gw *gw;
	struct isc_loop *lp, *from;
	const struct isc_target *target;	/* compared, never read */
	bool lun_only;
	uint64_t lun;
	struct isc_tmf *tmf;
};

static void isc_tmf_answer_msg(void *arg)
{
	struct isc_tmf_msg *m = arg;
	struct isc_gw *gw = m->gw;

	isc_tmf_task_ended(m->tmf);
	free(m);
	__atomic_fetch_sub(&gw->msgs, 1, __ATOMIC_RELEASE);
}

static void isc_tmf_answer(struct isc_tmf_msg *m)
{
	if (gw_loop_send(m->from->loop, isc_tmf_answer_msg, m))
		isc_tmf_answer_msg(m);	/* shutting down: nobody to answer */
}

/* The share's tasks have all ended (on its loop, lp). */
static void isc_tmf_share_answer(struct isc_tmf *share)
{
	struct isc_tmf_msg *m = share->share;

	free(share);
	isc_tmf_answer(m);
}

static void isc_tmf_abort_msg(void *arg)
{
	struct isc_tmf_msg *m = arg;
	struct isc_tmf *share = calloc(1, sizeof(*share));

	if (!share) {
		/* The tasks are still aborted and answered; the TMF just does not wait. */
		gw_err("iscsi", "out of memory: a TMF answered before loop %u's tasks ended",
		       m->lp->idx);
		isc_tmf_abort_loop(m->lp, m->target, NULL, m->lun_only, m->lun, NULL);
		isc_tmf_answer(m);
		return;
	}
	gw_list_init(&share->node);
	share->share = m;
	/* Held at 1 while the tasks are aborted, as the TMF itself is. */
	share->waiting = 1;
	isc_tmf_abort_loop(m->lp, m->target, NULL, m->lun_only, m->lun, share);
	isc_tmf_task_ended(share);
}

static void isc_tmf_abort_target(struct isc_conn *c, struct isc_target *target, bool lun_only,
				 uint64_t lun, struct isc_tmf *tmf)
{
	struct isc_gw *gw = c->gw;

	isc_tmf_abort_loop(c->lp, target, c->sess, lun_only, lun, tmf);
	for (unsigned i = 0; gw->loops && i < isc_gw_nloops(gw); i++) {
		struct isc_tmf_msg *m;

		if (&gw->lps[i] == c->lp)
			continue;
		m = malloc(sizeof(*m));
		if (!m) {
			gw_err("iscsi", "out of memory: TMF not sent to loop %u", i);
			continue;
		}
		*m = (struct isc_tmf_msg){ gw, &gw->lps[i], c->lp, target, lun_only, lun, tmf };
		__atomic_fetch_add(&gw->msgs, 1, __ATOMIC_RELAXED);
		tmf->waiting++;
		if (gw_loop_send(m->lp->loop, isc_tmf_abort_msg, m)) {
			tmf->waiting--;
			__atomic_fetch_sub(&gw->msgs, 1, __ATOMIC_RELEASE);
			free(m);
		}
	}
}

void isc_tmf_rx(struct isc_conn *c, struct pdu *pdu)
{
	struct isc_session *s = c->sess;
	struct isc_target *target = s->target;
	const uint8_t *bhs = pdu->bhs;
	uint8_t func = bhs[1] & 0x7f;
	uint32_t rtt = pdu_get32(bhs, 20), refcmdsn = pdu_get32(bhs, 32);
	uint64_t lun = scsi_lun_decode(bhs + 8);
	struct isc_tmf *tmf;
	struct isc_task *t;

	if (!isc_cmdsn_take(c, bhs))
		return;
	tmf = calloc(1, sizeof(*tmf));
	if (!tmf) {
		isc_conn_close(c, "out of memory");
		return;
	}
	tmf->conn = c;
	memcpy(tmf->bhs, bhs, ISC_BHS_LEN);
	gw_list_add_tail(&c->tmfs, &tmf->node);
	/* Held at 1 while tasks are aborted, so none of them can answer the TMF early. */
	tmf->waiting = 1;
	tmf->response = ISC_TMF_RSP_COMPLETE;
	gw_dbg("iscsi", "%s: TMF function %u LUN %llu RTT 0x%x", c->dc->peer, func,
	       (unsigned long long)lun, rtt);
	switch (func) {
	case ISC_TMF_ABORT_TASK:
		t = isc_tmf_find_task(s, rtt);
		if (t && t->lun == lun) {
			isc_task_abort(t, tmf);
		} else if (!t) {
			/* Not (or no longer) here. A RefCmdSN still inside the window names a
			 * command that never arrived: count it as received (§11.5.1 c/d). */
			int order = isc_session_check_cmdsn(s, refcmdsn);

			if (order < 0 || pdu_sn_le(pdu_get32(bhs, 24), refcmdsn)) {
				tmf->response = ISC_TMF_RSP_NO_TASK;
			} else if (order == 1) {
				isc_cmdsn_advance(s);
			} else {
				isc_cmdsn_hold(c, refcmdsn);
			}
		} else {
			tmf->response = ISC_TMF_RSP_NO_TASK;
		}
		break;
	case ISC_TMF_ABORT_TASK_SET:
	case ISC_TMF_CLEAR_TASK_SET:
		if (!scsi_dev_find_lu(target->dev, lun)) {
			tmf->response = ISC_TMF_RSP_NO_LUN;
			break;
		}
		/* One task set per LU shared by all I_T nexuses: CLEAR TASK SET reaches every
		 * session, ABORT TASK SET only the requester's tasks (SAM-5 7.2, 7.4). */
		if (func == ISC_TMF_CLEAR_TASK_SET)
			isc_tmf_abort_target(c, target, true, lun, tmf);
		else
			isc_tmf_abort_session(s, true, true, lun, tmf);
		break;
	case ISC_TMF_LUN_RESET:
		if (!scsi_dev_find_lu(target->dev, lun)) {
			tmf->response = ISC_TMF_RSP_NO_LUN;
			break;
		}
		isc_tmf_abort_target(c, target, true, lun, tmf);
		/* SAM-5 6.3.3: the reset's unit attention goes to every I_T nexus, the one that
		 * asked included (libiscsi's MultipathIO.Reset checks all paths). */
		scsi_lu_reset(target->dev, lun, NULL);
		break;
	case ISC_TMF_TARGET_WARM_RESET:
	case ISC_TMF_TARGET_COLD_RESET:
		isc_tmf_abort_target(c, target, false, 0, tmf);
		scsi_target_reset(target->dev, func == ISC_TMF_TARGET_COLD_RESET, NULL);
		tmf->cold_reset = func == ISC_TMF_TARGET_COLD_RESET;
		break;
	case ISC_TMF_CLEAR_ACA:
		tmf->response = ISC_TMF_RSP_NOT_SUPPORTED;
		break;
	case ISC_TMF_TASK_REASSIGN:
		/* Only ErrorRecoveryLevel 2 reassigns allegiance. */
		tmf->response = ISC_TMF_RSP_NO_REASSIGN;
		break;
	default:
		tmf->response = ISC_TMF_RSP_REJECTED;
		break;
	}
	isc_tmf_task_ended(tmf);
}
