// SPDX-License-Identifier: MIT
/*
 * The bottom of a path's files: what every engine, the probe, the abort policy and the path
 * itself call. A path's state and its changes, failing a path (its session goes to the
 * engine's drop and, from a defer, its teardown; a reconnect is scheduled with backoff) or
 * refusing one that reaches another device, the accounting of its commands in flight, the end
 * of an I/O (one decision for both engines' answers: mp_classify's verdict acted on), and
 * what happens to an I/O that leaves a path with its session: re-driven, or, a write, held on
 * the fence until that session is known to be gone.
 *
 * It calls the engine only through p->eng and the LUN only through p->owner, and nothing of
 * the files above it by name.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "gw_log.h"
#include "mp_priv.h"

void mp_path_set_state(struct mp_path *p, enum mp_path_state st, const char *why)
{
	if (p->state == st)
		return;
	gw_info(MP_LOG, "%s: path %s: %s -> %s%s%s", p->lun->name, p->url,
		mp_path_state_name(p->state), mp_path_state_name(st), why && *why ? ": " : "",
		why ? why : "");
	p->state = st;
	p->state_since_ms = gw_now_ms();
}

static void mp_path_teardown_fn(struct gw_defer *d)
{
	struct mp_path *p = gw_container_of(d, struct mp_path, teardown);

	p->eng->teardown(p);
}

void mp_path_core_init(struct mp_path *p)
{
	gw_list_init(&p->inflight);
	gw_list_init(&p->fenced);
	gw_defer_init(&p->teardown, mp_path_teardown_fn);
}

/* The path's connection goes (a failure or a refusal, state and retry time already set): its
 * pending checks and task management end, the teardown runs off this call, the owner hears. */
static void mp_path_drop(struct mp_path *p)
{
	struct mp_lun *lun = p->lun;

	p->eng->drop(p);
	p->check_pending = false;
	p->nop_pending = false;
	p->tmf = MP_TMF_NONE;
	p->tmf_gen++;
	gw_defer_queue(lun->loop, &p->teardown);
	p->owner->changed(lun, p);
}

void mp_path_fail(struct mp_path *p, const char *fmt, ...)
{
	struct mp_lun *lun = p->lun;
	bool was_up = p->state == MP_PATH_ACTIVE || p->state == MP_PATH_STANDBY;
	uint64_t now = gw_now_ms(), delay;
	va_list ap;

	if (p->state == MP_PATH_DOWN || p->state == MP_PATH_REFUSED)
		return;
	va_start(ap, fmt);
	vsnprintf(p->last_error, sizeof(p->last_error), fmt, ap);
	va_end(ap);
	p->errors++;
	/* A path that was working gets its first retry quickly (a target restart, a link
	 * flap); failed logins back off exponentially, with jitter, up to the cap. */
	if (was_up)
		p->backoff_n = 0;
	delay = mp_backoff_ms(p->backoff_n, lun->conf.reconnect_delay_ms,
			      lun->conf.reconnect_max_ms, mp_rand(&lun->rng));
	p->backoff_n++;
	p->next_attempt_ms = now + delay;
	mp_path_set_state(p, MP_PATH_DOWN, p->last_error);
	gw_dbg(MP_LOG, "%s: path %s: next login in %llu ms", lun->name, p->url,
	       (unsigned long long)delay);
	mp_path_drop(p);
}

void mp_path_refuse(struct mp_path *p, const char *msg)
{
	struct mp_lun *lun = p->lun;

	/* Logged as an error once per distinct reason; retried slowly, in case the storage
	 * is being reconfigured. */
	if (strcmp(p->last_error, msg) != 0)
		gw_err(MP_LOG, "%s: path %s refused: %s", lun->name, p->url, msg);
	snprintf(p->last_error, sizeof(p->last_error), "%s", msg);
	p->errors++;
	p->next_attempt_ms = gw_now_ms() + lun->conf.reconnect_max_ms;
	mp_path_set_state(p, MP_PATH_REFUSED, "not the LUN's device");
	mp_path_drop(p);
}

const char *mp_status_text(int status)
{
	switch (status) {
	case SCSI_STATUS_CANCELLED:
		return "cancelled (connection lost)";
	case SCSI_STATUS_ERROR:
		return "transport error";
	case SCSI_STATUS_TIMEOUT:
		return "timed out";
	default:
		return "failed";
	}
}

bool mp_status_transport(int status)
{
	return status == SCSI_STATUS_CANCELLED || status == SCSI_STATUS_ERROR ||
	       status == SCSI_STATUS_TIMEOUT || status == SCSI_STATUS_REDIRECT;
}

/* I/O */

void mp_path_inflight_add(struct mp_path *p, struct mp_io *io)
{
	io->path = p;
	io->sent_ns = gw_now_ns();
	gw_list_add_tail(&p->inflight, &io->node);
	if (p->nr_inflight++ == 0)
		p->last_rx_ms = gw_now_ms();
	p->inflight_bytes += io->len;
}

void mp_path_inflight_undo(struct mp_path *p, struct mp_io *io)
{
	gw_list_del(&io->node);
	p->nr_inflight--;
	p->inflight_bytes -= io->len;
	io->path = NULL;
}

/* io's answer, from either engine: status (or a transport status), the sense key and codes,
 * and the raw sense for a COMPARE AND WRITE. stale: from a connection the path has left. */
void mp_path_io_end(struct mp_io *io, bool stale, int status, uint8_t key, uint8_t asc,
		    uint8_t ascq, const uint8_t *raw, size_t raw_len, const char *errtxt)
{
	struct mp_path *p = io->path;
	struct mp_lun *lun = io->lun;
	uint64_t now = gw_now_ms();
	enum mp_verdict v;

	bool aborted = io->tmf == MP_IO_ABORTING && status == SCSI_STATUS_CANCELLED && !stale;

	gw_list_del(&io->node);
	p->nr_inflight--;
	p->inflight_bytes -= io->len;
	io->path = NULL;
	io->task = NULL;
	io->conn = NULL;
	io->last_path = p;
	io->tmf = MP_IO_TMF_NONE;
	if (lun->destroying)
		return;
	if (aborted) {
		/* Our ABORT TASK or LUN RESET took it and the target confirmed: it will not run
		 * there any more, so even a write may go elsewhere now. A COMPARE AND WRITE may
		 * have run before the abort: the host hears of it (MP_UNSURE_*). */
		p->failovers++;
		if (io->op == MP_COMPARE_AND_WRITE)
			mp_path_give_back(p, io);
		else
			p->owner->redrive(lun, io, true);
		return;
	}
	if (!stale) {
		uint64_t us = (gw_now_ns() - io->sent_ns) / 1000;

		p->last_rx_ms = now;
		p->lat_ewma_us = p->lat_ewma_us ? (p->lat_ewma_us * 7 + us) / 8 : us;
	}
	if (mp_status_transport(status)) {
		if (!stale)
			mp_path_fail(p, "I/O %s: %s", mp_status_text(status), errtxt);
		p->failovers++;
		mp_path_give_back(p, io);
		return;
	}
	v = mp_classify((uint8_t)status, key, asc, ascq);
	/* A COMPARE AND WRITE is run again only when the back end said it did not run it (busy,
	 * unit attention, not ready): an aborted one may have written, the host hears of it. */
	if (io->op == MP_COMPARE_AND_WRITE && v == MP_V_RETRY &&
	    (status == SCSI_STATUS_TASK_ABORTED ||
	     (status == SCSI_STATUS_CHECK_CONDITION && key == 0x0b)))
		v = MP_V_PASS;
	switch (v) {
	case MP_V_OK:
		io->result = 0;
		p->owner->complete(lun, io);
		return;
	case MP_V_RETRY:
		if (status == SCSI_STATUS_CHECK_CONDITION && key == 0x6 && asc == 0x2a &&
		    (ascq == 0x06 || ascq == 0x09) && !stale) {
			p->next_check_ms = now;	/* ALUA or capacity changed: look again */
			if (ascq == 0x09) {
				p->recap = true;
				p->recap_why = "after the back end's CAPACITY DATA HAS CHANGED";
			}
		}
		if (now - io->start_ms < (uint64_t)lun->conf.io_timeout * 1000 &&
		    io->retries < 200) {
			p->owner->retry(lun, io,
					now + mp_retry_delay_ms(io->retries, (uint8_t)status, key));
			io->retries++;
			return;
		}
		break;		/* out of time: the host sees the last answer */
	case MP_V_PATH:
		if (!stale)
			mp_path_fail(p, "sense %x/%02x/%02x: this port cannot reach the LU", key,
				     asc, ascq);
		p->failovers++;
		p->owner->redrive(lun, io, true);
		return;
	case MP_V_PASS:
		break;
	}
	if (io->op == MP_COMPARE_AND_WRITE && status == SCSI_STATUS_CHECK_CONDITION &&
	    key == 0x05 && asc == 0x20 && ascq == 0x00) {
		/* INVALID COMMAND OPERATION CODE: a back end that lists a COMPARE AND WRITE length
		 * in VPD B0 without having the command (tgtd does). It did not run it: the LUN
		 * stops sending it and the caller does it another way. */
		if (lun->caps.caw_blocks)
			gw_warn(MP_LOG, "%s: the back end reports a MAXIMUM COMPARE AND WRITE LENGTH "
				"of %u but refuses the command (05/20/00): COMPARE AND WRITE is not "
				"sent to it any more", lun->name, lun->caps.caw_blocks);
		lun->caps.caw_blocks = 0;
		p->caps.caw_blocks = 0;
		io->result = -EOPNOTSUPP;
		p->owner->complete(lun, io);
		return;
	}
	io->result = -EREMOTEIO;
	io->status = (uint8_t)status;
	if (status == SCSI_STATUS_CHECK_CONDITION)
		mp_io_set_sense(io, key, asc, ascq);
	if (status == SCSI_STATUS_CHECK_CONDITION && raw_len) {
		memcpy(io->sense, raw, raw_len);
		io->sense_len = (uint8_t)raw_len;
	}
	gw_dbg(MP_LOG, "%s: path %s: status %#x sense %x/%02x/%02x returned to the host",
	       lun->name, p->url, status, key, asc, ascq);
	p->owner->complete(lun, io);
}

/* Every I/O still on the path goes back to the LUN; the control command is dropped. */
void mp_path_give_back_all(struct mp_path *p)
{
	struct mp_io *io, *t;

	gw_list_for_each_entry_safe(io, t, &p->inflight, node) {
		/* Not called back (libiscsi skips callbacks of a context never logged in). */
		gw_list_del(&io->node);
		p->nr_inflight--;
		p->inflight_bytes -= io->len;
		if (io->task)
			scsi_free_scsi_task(io->task);
		io->task = NULL;
		io->path = NULL;
		io->last_path = p;
		if (!p->lun->destroying)
			mp_path_give_back(p, io);
	}
	if (p->ctl_task) {
		scsi_free_scsi_task(p->ctl_task);
		p->ctl_task = NULL;
	}
}

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
