// SPDX-License-Identifier: MIT
/*
 * The abort policy on one path (docs/ARCHITECTURE.md, "Aborts before re-drives"; the decisions
 * themselves are mp_tmf_escalate and the bounds in mp_policy.c): a command the path does not
 * answer within io_timeout is aborted there (ABORT TASK), an abort not answered within the bound
 * escalates to a LUN RESET while the session is up, and a reset not answered drops the session.
 * The writes of a dropped session are fenced: held on p->fenced until its next login with the
 * same ISID reinstates it, or until the fence bound, and only then sent elsewhere.
 *
 * Each engine's ABORT TASK, LUN RESET and release (struct mp_engine_ops, mp_priv.h) is here
 * too: libiscsi's task management calls, and mp_ini's. Their answers come back through one
 * request per TMF (struct mp_tmf_req), which knows its round (tmf_gen) so that a late answer
 * to an older round is not taken for the current one.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "gw_log.h"
#include "mp_ini.h"
#include "mp_priv.h"

/* The fence: writes of a dropped session */

/*
 * io was sent on p and p failed before the back end answered: it may or may not have run.
 * Anything but COMPARE AND WRITE is sent again (a READ or WRITE done twice gives the same
 * result); a COMPARE AND WRITE done twice would miscompare against its own write, so it fails
 * with the retryable MP_UNSURE_* sense and the host decides.
 */
void mp_path_give_back(struct mp_path *p, struct mp_io *io)
{
	if (io->op == MP_COMPARE_AND_WRITE) {
		io->result = -EREMOTEIO;
		mp_io_set_sense(io, MP_UNSURE_KEY, MP_UNSURE_ASC, MP_UNSURE_ASCQ);
		p->lun->unsure_failed++;
		gw_warn_rl(MP_LOG, "%s: path %s failed with a COMPARE AND WRITE in flight: "
			   "its outcome is unknown, failed with 0B/08/00 for the host to retry",
			   p->lun->name, p->url);
		p->owner->complete(p->lun, io);
		return;
	}
	io->tmf = MP_IO_TMF_NONE;
	if (mp_op_changes_medium(io->op) && !p->lun->stopping) {
		/* The old session may still run it: not elsewhere until that session is gone. */
		if (!p->nr_fenced)
			p->fence_deadline_ms = gw_now_ms() + mp_fence_bound_ms(&p->lun->conf);
		io->tmf = MP_IO_FENCED;
		gw_list_add_tail(&p->fenced, &io->node);
		p->nr_fenced++;
		p->fence_waits++;
		return;
	}
	p->owner->redrive(p->lun, io, true);
}

/*
 * The writes of a dropped session go to the LUN again: its next login reinstated the session
 * (same ISID, TSIH 0: the target ended the old one's tasks first, RFC 7143 §6.3.5), or the
 * fence bound ran out (the path stayed unreachable: a write still queued in the back end may
 * land late, which is logged).
 */
void mp_path_unfence(struct mp_path *p, bool reinstated)
{
	struct mp_lun *lun = p->lun;
	uint32_t n = p->nr_fenced;
	struct mp_io *io, *t;

	if (!n)
		return;
	gw_list_for_each_entry_safe(io, t, &p->fenced, node) {
		gw_list_del(&io->node);
		io->tmf = MP_IO_TMF_NONE;
		p->nr_fenced--;
		if (!reinstated && !lun->stopping)
			p->fence_expired++;
		if (!lun->destroying)
			p->owner->redrive(lun, io, true);
	}
	if (lun->destroying || lun->stopping)
		return;		/* shutting down: the LUN fails them */
	if (reinstated)
		gw_log_rl(GW_LOG_INFO, MP_LOG, "%s: path %s: the old session was reinstated by a "
			  "new login: %u held writes re-driven", lun->name, p->url, n);
	else
		gw_warn_rl(MP_LOG, "%s: path %s: the dropped session was not seen to end within "
			   "%llu ms: %u held writes re-driven anyway (one still queued in the back "
			   "end could land late)", lun->name, p->url,
			   (unsigned long long)mp_fence_bound_ms(&lun->conf), n);
}

void mp_path_fence_note(struct mp_path *p, uint32_t before)
{
	if (p->nr_fenced > before && !p->lun->destroying)
		gw_warn_rl(MP_LOG, "%s: path %s: session dropped with %u writes outstanding: they "
			   "wait until it is reinstated by the next login (at most %llu ms) before "
			   "going to another path", p->lun->name, p->url, p->nr_fenced - before,
			   (unsigned long long)mp_fence_bound_ms(&p->lun->conf));
}

/* Task management requests awaiting their answer; freed with the session (an engine torn
 * down calls nothing back). */
struct mp_tmf_req {
	struct mp_tmf_req *next;
	struct mp_path *p;
	uint32_t gen;
};

static struct mp_tmf_req *mp_tmf_req_new(struct mp_path *p)
{
	struct mp_tmf_req *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->p = p;
	r->gen = p->tmf_gen;
	r->next = p->tmf_reqs;
	p->tmf_reqs = r;
	return r;
}

/* Unlinks and frees r; true if its answer belongs to the path's current round. */
static bool mp_tmf_req_take(struct mp_tmf_req *r, struct mp_path **out)
{
	struct mp_path *p = r->p;
	struct mp_tmf_req **q = &p->tmf_reqs;
	bool cur = r->gen == p->tmf_gen;

	while (*q && *q != r)
		q = &(*q)->next;
	if (*q)
		*q = r->next;
	free(r);
	*out = p;
	return cur;
}

void mp_tmf_reqs_free(struct mp_path *p)
{
	while (p->tmf_reqs) {
		struct mp_tmf_req *r = p->tmf_reqs;

		p->tmf_reqs = r->next;
		free(r);
	}
}

const char *mp_tmf_name(enum mp_tmf_step st)
{
	return st == MP_TMF_RESET ? "LUN RESET" : "ABORT TASK";
}

static bool mp_path_holds_aborting(const struct mp_path *p)
{
	const struct mp_io *io;

	gw_list_for_each_entry(io, &p->inflight, node)
		if (io->tmf == MP_IO_ABORTING)
			return true;
	return false;
}

/* Every answer of the round is in (or none could be sent). */
static void mp_path_tmf_settle(struct mp_path *p)
{
	struct mp_lun *lun = p->lun;
	enum mp_tmf_step st = p->tmf;

	if (!p->tmf_failed)
		p->eng->release(p);
	if (p->tmf != st)
		return;		/* the path failed meanwhile */
	if (!p->tmf_failed && !mp_path_holds_aborting(p)) {
		gw_log_rl(GW_LOG_INFO, MP_LOG, "%s: path %s: %s confirmed: the commands it took "
			  "go to the LUN again", lun->name, p->url, mp_tmf_name(st));
		p->tmf = MP_TMF_NONE;
		p->tmf_gen++;
		p->last_rx_ms = gw_now_ms();
		p->owner->changed(lun, p);
		return;
	}
	if (st == MP_TMF_ABORT)
		p->aborts_failed++;
	mp_path_tmf_escalate(p, p->tmf_failed ? "refused" : "left a command running");
}

/* A TMF's answer: RFC 7143 §11.6.1 response, < 0 when there was none. */
static void mp_path_tmf_answer(struct mp_path *p, int response)
{
	if (p->tmf != MP_TMF_ABORT && p->tmf != MP_TMF_RESET)
		return;
	if (p->tmf_pending)
		p->tmf_pending--;
	/* 1, "task does not exist": it ended before the abort reached the target. */
	if (response != 0 && !(response == 1 && p->tmf == MP_TMF_ABORT))
		p->tmf_failed = true;
	if (!p->tmf_pending)
		mp_path_tmf_settle(p);
}

/* ABORT TASK did not do: LUN RESET while the session is up, else drop the session. */
void mp_path_tmf_escalate(struct mp_path *p, const char *why)
{
	struct mp_lun *lun = p->lun;
	enum mp_tmf_step from = p->tmf, next;
	bool up = (p->ctx || p->ini) && (p->state == MP_PATH_ACTIVE ||
					 p->state == MP_PATH_STANDBY);
	struct mp_io *io;
	int rc;

	next = mp_tmf_escalate(from, up);
	if (next == MP_TMF_RESET) {
		p->tmf = MP_TMF_RESET;
		p->tmf_gen++;
		p->tmf_pending = 0;
		p->tmf_failed = false;
		p->tmf_deadline_ms = gw_now_ms() + mp_tmf_bound_ms(&lun->conf);
		gw_list_for_each_entry(io, &p->inflight, node)
			io->tmf = MP_IO_ABORTING;
		gw_warn_rl(MP_LOG, "%s: path %s: ABORT TASK %s: LUN RESET on this path (%u "
			   "commands)", lun->name, p->url, why, p->nr_inflight);
		rc = p->eng->lun_reset(p);
		if (rc == 0) {
			p->lun_resets++;
			p->tmf_pending = 1;
			return;
		}
		why = "could not be sent";
		from = MP_TMF_RESET;
	}
	p->tmf = MP_TMF_NONE;
	mp_path_fail(p, "%s %s: session dropped", mp_tmf_name(from), why);
}

/* Aborts the commands of p outstanding past io_timeout (all of them: the path went silent). */
void mp_path_tmf_start(struct mp_path *p, bool all, const char *why)
{
	struct mp_lun *lun = p->lun;
	uint64_t age_ms = (uint64_t)lun->conf.io_timeout * 1000;
	struct mp_io *io, *t;
	uint32_t n = 0;
	int rc = 0;

	p->tmf = MP_TMF_ABORT;
	p->tmf_gen++;
	p->tmf_pending = 0;
	p->tmf_failed = false;
	p->tmf_deadline_ms = gw_now_ms() + mp_tmf_bound_ms(&lun->conf);
	p->nop_pending = false;
	p->owner->changed(lun, p);	/* no new I/O on it until this is settled */
	gw_list_for_each_entry_safe(io, t, &p->inflight, node) {
		if (io->tmf != MP_IO_TMF_NONE)
			continue;
		if (!all && (gw_now_ns() - io->sent_ns) / 1000000 < age_ms)
			continue;
		io->tmf = MP_IO_ABORTING;
		n++;
		rc = p->eng->abort(p, io);	/* -EALREADY: io has just been re-driven */
		if (rc == 0) {
			p->aborts++;
			p->tmf_pending++;
		}
		else if (rc != -EALREADY)
			p->tmf_failed = true;
		if (p->tmf != MP_TMF_ABORT)
			return;		/* the path failed */
	}
	gw_warn_rl(MP_LOG, "%s: path %s: %s: ABORT TASK for %u commands%s", lun->name, p->url,
		   why, n, p->tmf_failed ? " (could not be sent: escalating)" : "");
	if (!p->tmf_pending)
		mp_path_tmf_settle(p);
}

/* Each engine's ABORT TASK, LUN RESET and release (struct mp_engine_ops) */

static void mp_path_tmf_cb_libiscsi(struct iscsi_context *iscsi, int status, void *data,
				    void *priv)
{
	struct mp_path *p;

	if (!mp_tmf_req_take(priv, &p) || iscsi != p->ctx)
		return;
	mp_path_tmf_answer(p, status == SCSI_STATUS_GOOD && data ? (int)*(uint32_t *)data : -1);
}

static int mp_path_tmf_libiscsi(struct mp_path *p, enum iscsi_task_mgmt_funcs fn,
				const struct mp_io *io)
{
	struct mp_tmf_req *r;

	/* libiscsi 1.19's iSER contexts are torn down from another thread (mp_iser_job): no
	 * answer could be told from a late one. Their sessions are dropped instead. */
	if (p->iser)
		return -EOPNOTSUPP;
	if (io && !io->task)
		return -ENOENT;
	r = mp_tmf_req_new(p);
	if (!r)
		return -ENOMEM;
	/* The plain call, not iscsi_task_mgmt_abort_task_async: that one cancels the task in
	 * libiscsi at once, and the path must hold a write until the target has answered. */
	if (iscsi_task_mgmt_async(p->ctx, p->lun_nr, fn, io ? io->task->itt : 0xffffffffu,
				  io ? io->task->cmdsn : 0, mp_path_tmf_cb_libiscsi, r) != 0) {
		struct mp_path *q;

		mp_tmf_req_take(r, &q);
		return -EIO;
	}
	gw_defer_queue(p->lun->loop, &p->flush);
	return 0;
}

int mp_path_abort_libiscsi(struct mp_path *p, struct mp_io *io)
{
	return mp_path_tmf_libiscsi(p, ISCSI_TM_ABORT_TASK, io);
}

int mp_path_lun_reset_libiscsi(struct mp_path *p)
{
	return mp_path_tmf_libiscsi(p, ISCSI_TM_LUN_RESET, NULL);
}

void mp_path_release_libiscsi(struct mp_path *p)
{
	struct mp_io *io;
	bool again = true;

	/* Each cancel calls the command back at once (mp_path_task_cb), which unlinks it. */
	while (again) {
		again = false;
		gw_list_for_each_entry(io, &p->inflight, node) {
			if (io->tmf != MP_IO_ABORTING || !io->task)
				continue;
			if (iscsi_scsi_cancel_task(p->ctx, io->task) != 0)
				mp_path_task_cb(p->ctx, SCSI_STATUS_CANCELLED, NULL, io);
			again = true;
			break;
		}
	}
}

static void mp_path_tmf_cb_native(void *arg, const struct mp_ini_result *r)
{
	struct mp_path *p;

	if (!mp_tmf_req_take(arg, &p))
		return;
	mp_path_tmf_answer(p, r->status);
}

static int mp_path_tmf_native(struct mp_path *p, enum mp_ini_tmf fn, const struct mp_io *io)
{
	struct mp_tmf_req *r = mp_tmf_req_new(p);
	struct mp_path *q;
	int rc;

	if (!r)
		return -ENOMEM;
	rc = mp_ini_tmf(p->ini, fn, p->lun_nr, io, mp_path_tmf_cb_native, r);
	if (rc < 0)
		mp_tmf_req_take(r, &q);
	return rc;
}

int mp_path_abort_native(struct mp_path *p, struct mp_io *io)
{
	return mp_path_tmf_native(p, MP_INI_ABORT_TASK, io);
}

int mp_path_lun_reset_native(struct mp_path *p)
{
	return mp_path_tmf_native(p, MP_INI_LUN_RESET, NULL);
}

void mp_path_release_native(struct mp_path *p)
{
	(void)p;	/* mp_ini ended what the target's "function complete" took */
}
