// SPDX-License-Identifier: MIT
/*
 * The abort policy on one path (docs/ARCHITECTURE.md, "Aborts before re-drives"; the decisions
 * themselves are mp_tmf_escalate and the bounds in mp_policy.c): a command the path does not
 * answer within io_timeout is aborted there (ABORT TASK), an abort not answered within the bound
 * escalates to a LUN RESET while the session is up, and a reset not answered drops the session,
 * whose writes the fence then holds (mp_path_core.c).
 *
 * Below the engines: it sends through p->eng (abort, lun_reset, release) and names none of
 * them. Each engine's task management calls are in its own file; their answers come back here
 * (mp_path_tmf_answer) through one request per TMF (struct mp_tmf_req), which knows its round
 * (tmf_gen) so that a late answer to an older round is not taken for the current one.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "gw_log.h"
#include "mp_priv.h"

/* Task management requests awaiting their answer; freed with the session (an engine torn
 * down calls nothing back). */
struct mp_tmf_req {
	struct mp_tmf_req *next;
	struct mp_path *p;
	uint32_t gen;
};

struct mp_tmf_req *mp_tmf_req_new(struct mp_path *p)
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
bool mp_tmf_req_take(struct mp_tmf_req *r, struct mp_path **out)
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
void mp_path_tmf_answer(struct mp_path *p, int response)
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
	bool up = p->eng->has_session(p) && (p->state == MP_PATH_ACTIVE ||
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
