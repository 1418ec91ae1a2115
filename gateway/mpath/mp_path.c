// SPDX-License-Identifier: MIT
/*
 * One path: a libiscsi context driven by the gateway's loop (iscsi_get_fd / which_events /
 * service in a gw_watch; the LUN's tick for deadlines). A login is TCP connect, iSCSI login,
 * then a probe (VPD 0x83 identity, READ CAPACITY(16), REPORT TARGET PORT GROUPS), all within
 * login_timeout. A logged-in path is checked with TEST UNIT READY every polling_interval and
 * probed with a NOP-Out when it has I/O outstanding and has said nothing for io_stall_ms.
 *
 * libiscsi's own reconnect is switched off (iscsi_set_noautoreconnect): it would replay
 * commands on the same path behind our back and, in some versions, sleep inside
 * iscsi_service(). A failed path's context is destroyed instead (from a defer, never inside
 * one of its own callbacks), its commands come back CANCELLED and are re-driven by the LUN,
 * and a fresh context logs in after a capped, jittered exponential backoff.
 *
 * With "engine": "native" a TCP path's session is an mp_ini connection instead (mp_ini.h):
 * the same states, probe, checker and stall detection; control commands fill a libiscsi
 * scsi_task all the same, so that one set of callbacks reads both engines' answers, and I/O
 * ends in mp_path_io_end for both. What differs (connect, control command, NOP, I/O, error
 * text) is one const struct mp_engine_ops per engine, chosen at init (p->eng).
 *
 * The libiscsi engine's table is here (mp_engine_libiscsi); the native engine's calls and table
 * are in mp_path_native.c. The abort policy (ABORT TASK, LUN RESET, dropping the session) and
 * the fence that holds a dropped session's writes, with each engine's task management calls,
 * are in mp_path_tmf.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "gw_log.h"
#include "gw_resolve.h"
#include "mp_ini.h"
#include "mp_priv.h"

static void mp_path_watch_fn(struct gw_watch *w, uint32_t events);
static void mp_path_teardown_fn(struct gw_defer *d);
static void mp_path_flush_fn(struct gw_defer *d);
static void mp_iser_job_done_fn(struct gw_notify *n);
static void mp_iser_connect_start(struct mp_path *p, struct iscsi_context *ctx);

static const struct mp_engine_ops mp_engine_libiscsi;

static const char *mp_path_err(const struct mp_path *p)
{
	return p->eng->err(p);
}

static const char *mp_path_err_libiscsi(const struct mp_path *p)
{
	return p->ctx ? iscsi_get_error(p->ctx) : "not connected";
}

/*
 * libiscsi 1.19's iSER connect does not return until its connection manager thread has seen
 * the connection established or failed: milliseconds for a live back end, seconds to a minute
 * for one that does not answer (rdma_cm's address, route and connect timeouts and retries).
 * Run on the loop, it would stall every LUN of the gateway. So it runs in a thread of its own,
 * which touches nothing but the context and this job; the loop learns the result through the
 * path's gw_notify. A path that gives up first (login_timeout, shutdown) abandons the job, and
 * the thread then disposes of the context itself; the path starts no other connect until that
 * thread is done, so a dead portal costs one thread, not one per attempt. The path and the
 * thread each hold a reference to the job.
 */
struct mp_iser_job {
	pthread_mutex_t mu;
	struct iscsi_context *ctx;
	char *portal;
	struct gw_notify *notify;	/* owner's; never touched once abandoned */
	bool cm_possible;		/* a failed connect still created its rdma_cm id */
	bool connected;
	bool finished;
	bool abandoned;
	int refs;
};

static void mp_iser_job_free(struct mp_iser_job *job)
{
	pthread_mutex_destroy(&job->mu);
	free(job->portal);
	free(job);
}

static void mp_iser_job_put(struct mp_iser_job *job)
{
	bool last;

	pthread_mutex_lock(&job->mu);
	last = --job->refs == 0;
	pthread_mutex_unlock(&job->mu);
	if (last)
		mp_iser_job_free(job);
}

static bool mp_iser_job_finished(struct mp_iser_job *job)
{
	bool finished;

	pthread_mutex_lock(&job->mu);
	finished = job->finished;
	pthread_mutex_unlock(&job->mu);
	return finished;
}

static void mp_iser_job_connect_cb(struct iscsi_context *iscsi, int status, void *data,
				   void *priv)
{
	struct mp_iser_job *job = priv;

	(void)iscsi;
	(void)data;
	job->connected = status == SCSI_STATUS_GOOD;
}

static void *mp_iser_job_thread(void *arg)
{
	struct mp_iser_job *job = arg;
	bool connected = false;

	if (iscsi_connect_async(job->ctx, job->portal, mp_iser_job_connect_cb, job) == 0)
		connected = job->connected;
	pthread_mutex_lock(&job->mu);
	job->connected = connected;
	job->finished = !job->abandoned;	/* abandoned: once the context is gone */
	if (!job->abandoned) {
		gw_notify_signal(job->notify);
		pthread_mutex_unlock(&job->mu);
		mp_iser_job_put(job);
		return NULL;
	}
	pthread_mutex_unlock(&job->mu);
	/* Nobody wants it any more: as mp_path_destroy_ctx() would, with the wait in line. */
	if (connected || job->cm_possible)
		iscsi_disconnect(job->ctx);
	usleep(MP_ISER_GRAVE_MS * 1000);
	iscsi_destroy_context(job->ctx);
	pthread_mutex_lock(&job->mu);
	job->ctx = NULL;
	job->finished = true;
	pthread_mutex_unlock(&job->mu);
	mp_iser_job_put(job);
	return NULL;
}

/* The path lets go of a running job: true if the thread now owns (and disposes of) the
 * context; false if it had already finished, and the caller disposes of both. */
static bool mp_iser_job_abandon(struct mp_iser_job *job)
{
	bool finished;

	pthread_mutex_lock(&job->mu);
	finished = job->finished;
	if (!finished)
		job->abandoned = true;
	pthread_mutex_unlock(&job->mu);
	return !finished;
}

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

int mp_path_init(struct mp_lun *lun, const struct mp_path_owner_ops *owner, struct mp_path *p,
		 unsigned int idx, const struct mp_path_conf *pc, struct gw_errlist *errs,
		 const char *field)
{
	const char *ini = pc->initiator && pc->initiator[0] ? pc->initiator : lun->conf.initiator;
	struct iscsi_context *tmp;
	struct iscsi_url *u;
	int rc = 0;

	memset(p, 0, sizeof(*p));
	p->lun = lun;
	p->owner = owner;
	p->idx = idx;
	p->alua_state = -1;
	p->prio = MP_PRIO_OTHER;
	p->job_done.w.fd = -1;
	gw_list_init(&p->inflight);
	gw_list_init(&p->fenced);
	/* One ISID per path for all its logins: a new login reinstates the last session. */
	p->isid_rnd = (uint32_t)(mp_rand(&lun->rng) & 0xffffff);
	gw_watch_init(&p->w, lun->loop, -1, mp_path_watch_fn);
	gw_defer_init(&p->teardown, mp_path_teardown_fn);
	gw_defer_init(&p->flush, mp_path_flush_fn);

	/* libiscsi parses its own URLs (portal, target, LUN, user%password@); a throwaway
	 * context carries the error text. */
	tmp = iscsi_create_context(ini);
	if (!tmp)
		return -ENOMEM;
	/* What is logged and shown of the URL: without a CHAP password (that stays in p->chap). */
	p->url = mp_url_strip(pc->url);
	u = iscsi_parse_full_url(tmp, pc->url);
	if (!u) {
		const char *why = iscsi_get_error(tmp);

		/* libiscsi quotes the URL it refused, password and all. */
		if (!p->url || (strcmp(p->url, pc->url) && strstr(why, pc->url)))
			why = "not an iSCSI URL (iscsi://[user%password@]host[:port]/target/lun)";
		gw_errlist_add(errs, field, "%s: %s", p->url ? p->url : "URL", why);
		iscsi_destroy_context(tmp);
		free(p->url);
		p->url = NULL;
		return -EINVAL;
	}
	p->portal = strdup(u->portal);
	p->target = strdup(u->target);
	p->initiator = strdup(ini);
	p->lun_nr = u->lun;
	p->iser = strncmp(pc->url, "iser://", 7) == 0;
	p->native = !p->iser && lun->conf.engine == MP_ENGINE_NATIVE;
	p->eng = p->native ? &mp_engine_native : &mp_engine_libiscsi;
	if (p->iser) {
		p->max_xfer = MP_ISER_MAX_XFER;
		p->max_inflight = MP_ISER_MAX_INFLIGHT;
		rc = gw_notify_init(&p->job_done, lun->loop, mp_iser_job_done_fn);
		if (rc < 0) {
			gw_errlist_add(errs, field, "%s: no eventfd for the iSER connect", p->url);
			iscsi_destroy_url(u);
			iscsi_destroy_context(tmp);
			mp_path_fini(p);
			return rc;
		}
	}
	if (pc->chap.user && pc->chap.user[0]) {
		p->chap.user = strdup(pc->chap.user);
		p->chap.secret = strdup(pc->chap.secret ? pc->chap.secret : "");
		if (pc->chap.mutual_user && pc->chap.mutual_user[0]) {
			p->chap.mutual_user = strdup(pc->chap.mutual_user);
			p->chap.mutual_secret = strdup(pc->chap.mutual_secret ?
						       pc->chap.mutual_secret : "");
		}
	} else if (u->user[0]) {
		p->chap.user = strdup(u->user);
		p->chap.secret = strdup(u->passwd);
	}
	if (!p->url || !p->portal || !p->target || !p->initiator)
		rc = -ENOMEM;
	iscsi_destroy_url(u);
	iscsi_destroy_context(tmp);
	if (rc)
		mp_path_fini(p);
	return rc;
}

static void mp_path_destroy_ctx(struct mp_path *p, struct iscsi_context *ctx)
{
	uint32_t fenced = p->nr_fenced;

	if (p->job && p->job->ctx == ctx) {
		struct mp_iser_job *job = p->job;

		p->job = NULL;
		if (mp_iser_job_abandon(job)) {
			p->iser_cm = false;
			p->stale_job = job;
			p->stale_since_ms = gw_now_ms();
			return;		/* nothing was sent on it: no I/O, no probe */
		}
		p->iser_cm = job->connected || job->cm_possible;
		mp_iser_job_put(job);
	}
	if (p->iser) {
		/* libiscsi 1.19 frees an iSER context without closing its connection (it only
		 * disconnects contexts with a socket), which leaves its connection manager thread
		 * waiting on freed memory: disconnect first, cancel the commands (their callbacks
		 * hand the I/O back), and free the context later, once that thread is gone. */
		if (p->iser_cm)
			iscsi_disconnect(ctx);
		p->iser_cm = false;
		iscsi_scsi_cancel_all_tasks(ctx);
		p->owner->bury(p->lun, ctx);
	} else {
		struct linger abort_close = { .l_onoff = 1, .l_linger = 0 };
		int fd = iscsi_get_fd(ctx);

		/* Reset, not close: data still in the send queue (a write we are about to re-drive
		 * on another path) must never reach the target later, when a silent path wakes up,
		 * and overwrite newer data. SO_LINGER 0 makes close() drop it and send RST. */
		if (fd >= 0)
			setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort_close, sizeof(abort_close));
		/* Callbacks run from here with SCSI_STATUS_CANCELLED; they see a context that is
		 * not the path's any more and hand their I/O back to the LUN. */
		iscsi_destroy_context(ctx);
	}
	mp_tmf_reqs_free(p);
	mp_path_give_back_all(p);
	mp_path_fence_note(p, fenced);
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

static void mp_path_teardown_fn(struct gw_defer *d)
{
	struct mp_path *p = gw_container_of(d, struct mp_path, teardown);
	struct iscsi_context *ctx = p->dying;

	p->dying = NULL;
	if (ctx)
		mp_path_destroy_ctx(p, ctx);
	if (p->ini_dying) {
		struct mp_ini *ini = p->ini_dying;

		p->ini_dying = NULL;
		mp_path_destroy_ini(p, ini);
	}
}

void mp_path_fini(struct mp_path *p)
{
	gw_resolve_cancel(p->rsv);
	p->rsv = NULL;
	gw_watch_stop(&p->w);
	gw_defer_cancel(&p->teardown);
	gw_defer_cancel(&p->flush);
	if (p->dying) {
		mp_path_destroy_ctx(p, p->dying);
		p->dying = NULL;
	}
	if (p->ctx) {
		struct iscsi_context *ctx = p->ctx;

		p->ctx = NULL;
		mp_path_destroy_ctx(p, ctx);
	}
	if (p->ini_dying) {
		mp_path_destroy_ini(p, p->ini_dying);
		p->ini_dying = NULL;
	}
	if (p->ini) {
		struct mp_ini *ini = p->ini;

		p->ini = NULL;
		mp_path_destroy_ini(p, ini);
	}
	if (p->stale_job) {
		mp_iser_job_put(p->stale_job);
		p->stale_job = NULL;
	}
	mp_path_unfence(p, false);
	gw_notify_fini(&p->job_done);
	free(p->url);
	free(p->portal);
	free(p->target);
	free(p->initiator);
	gw_conf_free(conf_mp_chap_keys, &p->chap);
	p->url = p->portal = p->target = p->initiator = NULL;
}

static void mp_path_sync_watch(struct mp_path *p)
{
	uint32_t ev = 0;
	int fd, want;

	if (!p->ctx) {
		gw_watch_stop(&p->w);
		return;
	}
	/* libiscsi may move to another fd (redirects, its reconnect): follow it. */
	fd = iscsi_get_fd(p->ctx);
	if (fd != p->w.fd) {
		gw_watch_stop(&p->w);
		gw_watch_init(&p->w, p->lun->loop, fd, mp_path_watch_fn);
	}
	if (fd < 0)
		return;
	want = iscsi_which_events(p->ctx);
	if (want & POLLIN)
		ev |= EPOLLIN | EPOLLRDHUP;
	if (want & POLLOUT)
		ev |= EPOLLOUT;
	/* 0: libiscsi wants a pause; the LUN's tick asks again. */
	if (gw_watch_set(&p->w, ev) < 0) {
		/* The fd number was closed and reused under the same watch: register anew. */
		p->w.events = 0;
		if (gw_watch_set(&p->w, ev) < 0)
			mp_path_fail(p, "cannot watch the connection's socket");
	}
}

/* The portal's name while the current attempt looks it up, else NULL. */
static const char *mp_path_resolving(const struct mp_path *p)
{
	if (p->rsv)
		return p->rsv_host;
	return p->ini ? mp_ini_resolving(p->ini) : NULL;
}

/* Keeps where the native connection went before it is torn down (its state shows it). */
static void mp_path_note_where(struct mp_path *p)
{
	const char *to;

	if (!p->ini)
		return;
	snprintf(p->addr, sizeof(p->addr), "%s", mp_ini_address(p->ini));
	to = mp_ini_redirected_to(p->ini);
	snprintf(p->redirected_to, sizeof(p->redirected_to), "%s", to ? to : "");
}

/* The session is over: its lookup too, and the native connection goes to the teardown. */
static void mp_path_drop_session(struct mp_path *p)
{
	gw_resolve_cancel(p->rsv);
	p->rsv = NULL;
	gw_watch_stop(&p->w);
	p->dying = p->ctx;
	p->ctx = NULL;
	mp_path_note_where(p);
	if (p->ini) {
		p->ini_dying = p->ini;
		p->ini = NULL;
	}
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
	mp_path_drop_session(p);
	p->check_pending = false;
	p->nop_pending = false;
	p->tmf = MP_TMF_NONE;
	p->tmf_gen++;
	gw_defer_queue(lun->loop, &p->teardown);
	p->owner->changed(lun, p);
}

static void mp_path_refuse(struct mp_path *p, const char *msg)
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
	mp_path_drop_session(p);
	p->check_pending = false;
	p->nop_pending = false;
	p->tmf = MP_TMF_NONE;
	p->tmf_gen++;
	gw_defer_queue(lun->loop, &p->teardown);
	p->owner->changed(lun, p);
}

static void mp_path_watch_fn(struct gw_watch *w, uint32_t events)
{
	struct mp_path *p = gw_container_of(w, struct mp_path, w);
	struct iscsi_context *ctx = p->ctx;
	int rc;

	if (!ctx)
		return;
	rc = iscsi_service(ctx, (int)(events & (EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP)));
	if (p->ctx != ctx)
		return;		/* failed from one of its callbacks */
	if (rc < 0) {
		mp_path_fail(p, "connection error: %s", iscsi_get_error(ctx));
		return;
	}
	/* With reconnect off, libiscsi cancels the commands of a dead connection and keeps
	 * the fd: the hang-up itself is our signal. */
	if (events & (EPOLLERR | EPOLLHUP | EPOLLRDHUP)) {
		mp_path_fail(p, "connection closed by %s", p->portal);
		return;
	}
	mp_path_sync_watch(p);
}

/*
 * The commands a loop round queued on a TCP path are written together at its end, straight
 * away: the socket is nearly always writable, so the watch stays at EPOLLIN and each command
 * is spared two epoll_ctl calls and a loop round trip. What the socket does not take waits for
 * EPOLLOUT as before (mp_path_sync_watch). iSER contexts keep libiscsi's own event handling.
 */
static void mp_path_flush_fn(struct gw_defer *d)
{
	struct mp_path *p = gw_container_of(d, struct mp_path, flush);

	if (p->ctx && p->w.fd >= 0)
		mp_path_watch_fn(&p->w, EPOLLOUT);
}

/* Control commands: the probe at login and the checker. */

static int mp_path_ctl_send(struct mp_path *p, const uint8_t *cdb, int cdb_len, int dir,
			    int xfer, iscsi_command_cb cb)
{
	struct scsi_task *task;

	task = scsi_create_task(cdb_len, (unsigned char *)(uintptr_t)cdb, dir, xfer);
	if (!task)
		return -ENOMEM;
	return p->eng->ctl_send(p, task, cdb, cdb_len, xfer, cb);
}

static int mp_path_ctl_send_libiscsi(struct mp_path *p, struct scsi_task *task,
				     const uint8_t *cdb, int cdb_len, int xfer, iscsi_command_cb cb)
{
	(void)cdb;
	(void)cdb_len;
	(void)xfer;
	if (iscsi_scsi_command_async(p->ctx, p->lun_nr, task, cb, NULL, p) != 0) {
		scsi_free_scsi_task(task);
		return -EIO;
	}
	p->ctl_task = task;
	mp_path_sync_watch(p);
	return 0;
}

static uint8_t mp_task_asc(const struct scsi_task *t)
{
	return (uint8_t)((unsigned int)t->sense.ascq >> 8);
}

static uint8_t mp_task_ascq(const struct scsi_task *t)
{
	return (uint8_t)((unsigned int)t->sense.ascq & 0xff);
}

static const char *mp_status_text(int status)
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

static bool mp_status_transport(int status)
{
	return status == SCSI_STATUS_CANCELLED || status == SCSI_STATUS_ERROR ||
	       status == SCSI_STATUS_TIMEOUT || status == SCSI_STATUS_REDIRECT;
}

static void mp_path_probe_next(struct mp_path *p);

static void mp_path_probe_done(struct mp_path *p)
{
	struct mp_lun *lun = p->lun;
	char msg[MP_ERR_MAX];
	bool standby;

	if (p->block_size != lun->block_size) {
		snprintf(msg, sizeof(msg), "block size %u bytes, the LUN's is %u", p->block_size,
			 lun->block_size);
		mp_path_refuse(p, msg);
		return;
	}
	if (p->owner->check_identity(lun, p, msg, sizeof(msg)) < 0) {
		mp_path_refuse(p, msg);
		return;
	}
	p->backoff_n = 0;
	p->ever_up = true;
	p->last_error[0] = 0;
	p->next_check_ms = gw_now_ms() + (uint64_t)lun->conf.polling_interval * 1000;
	p->last_rx_ms = gw_now_ms();
	standby = p->alua && (p->alua_state == 0x2 || p->alua_state == 0x3 ||
			      p->alua_state == 0xe);
	mp_path_set_state(p, standby ? MP_PATH_STANDBY : MP_PATH_ACTIVE, p->ident);
	p->owner->changed(lun, p);
}

static void mp_path_probe_cb(struct iscsi_context *iscsi, int status, void *data, void *priv)
{
	struct mp_path *p = priv;
	struct scsi_task *task = data;
	const uint8_t *d;
	size_t n;

	if (iscsi != p->ctx || task != p->ctl_task) {
		if (task && task == p->ctl_task)
			p->ctl_task = NULL;
		if (task)
			scsi_free_scsi_task(task);
		return;
	}
	p->ctl_task = NULL;
	p->last_rx_ms = gw_now_ms();
	if (mp_status_transport(status) || !task) {
		if (task)
			scsi_free_scsi_task(task);
		mp_path_fail(p, "identity probe %s: %s", mp_status_text(status),
			     iscsi_get_error(iscsi));
		return;
	}
	d = task->datain.data;
	n = task->datain.size > 0 ? (size_t)task->datain.size : 0;
	if (status != SCSI_STATUS_GOOD) {
		uint8_t key = (uint8_t)task->sense.key, asc = mp_task_asc(task);
		uint8_t ascq = mp_task_ascq(task);

		scsi_free_scsi_task(task);
		if (p->probe == MP_PROBE_RTPG) {
			/* No ALUA on this back end: every path gets the same priority. */
			p->alua = false;
			p->alua_state = -1;
			p->prio = MP_PRIO_OTHER;
			p->probe = MP_PROBE_DONE;
		} else if (mp_classify((uint8_t)status, key, asc, ascq) == MP_V_RETRY &&
			   p->probe_tries++ < 8) {
			/* The unit attention after login, or a LU becoming ready. */
		} else if (p->probe == MP_PROBE_VPD_B0 || p->probe == MP_PROBE_VPD_B2) {
			/* Not supported: no COMPARE AND WRITE, provisioning from LBPME alone. */
			p->probe = p->probe == MP_PROBE_VPD_B0 ? MP_PROBE_VPD_B2 : MP_PROBE_RTPG;
		} else if (p->probe == MP_PROBE_VPD83) {
			mp_path_refuse(p, "no device identity: VPD page 0x83 not supported");
			return;
		} else {
			mp_path_fail(p, "READ CAPACITY(16) failed: sense %x/%02x/%02x", key, asc,
				     ascq);
			return;
		}
		mp_path_probe_next(p);
		return;
	}
	switch (p->probe) {
	case MP_PROBE_VPD83: {
		int tpg;

		if (mp_vpd83_parse(d, n, p->ident, sizeof(p->ident), &tpg) < 0) {
			scsi_free_scsi_task(task);
			mp_path_refuse(p, "no logical unit designator in VPD page 0x83");
			return;
		}
		p->alua_tpg = tpg;
		p->probe = MP_PROBE_CAPACITY;
		break;
	}
	case MP_PROBE_CAPACITY:
		if (n < 12) {
			scsi_free_scsi_task(task);
			mp_path_fail(p, "READ CAPACITY(16): %zu bytes returned", n);
			return;
		}
		p->block_size = ((uint32_t)d[8] << 24) | ((uint32_t)d[9] << 16) |
				((uint32_t)d[10] << 8) | d[11];
		p->size = 0;
		for (int i = 0; i < 8; i++)
			p->size = (p->size << 8) | d[i];
		p->size = (p->size + 1) * p->block_size;
		p->lbpme = n > 14 && (d[14] & 0x80);
		memset(&p->caps, 0, sizeof(p->caps));
		p->caps.known = true;
		p->caps.lbpme = p->lbpme;
		p->probe = MP_PROBE_VPD_B0;
		break;
	case MP_PROBE_VPD_B0:
		/* A page that is not the one asked for is no answer. */
		if (n > 5 && d[1] == 0xb0)
			p->caps.caw_blocks = d[5];
		p->probe = MP_PROBE_VPD_B2;
		break;
	case MP_PROBE_VPD_B2:
		if (n > 5 && d[1] == 0xb2) {
			p->caps.vpd_b2 = true;
			p->caps.lbpu = d[5] & 0x80;
			p->caps.lbpws = d[5] & 0x40;
			p->caps.lbpws10 = d[5] & 0x20;
		}
		p->probe = MP_PROBE_RTPG;
		break;
	case MP_PROBE_RTPG: {
		int st;

		if (mp_rtpg_state(d, n, p->alua_tpg, &st) == 0) {
			p->alua = true;
			p->alua_state = st;
			p->prio = mp_alua_prio(st);
		} else {
			p->alua = false;
			p->alua_state = -1;
			p->prio = MP_PRIO_OTHER;
		}
		p->probe = MP_PROBE_DONE;
		break;
	}
	case MP_PROBE_DONE:
		break;
	}
	scsi_free_scsi_task(task);
	mp_path_probe_next(p);
}

static void mp_path_probe_next(struct mp_path *p)
{
	uint8_t cdb[16] = { 0 };
	int rc = 0;

	switch (p->probe) {
	case MP_PROBE_VPD83:
		cdb[0] = 0x12;		/* INQUIRY, EVPD, page 0x83, 1 KiB */
		cdb[1] = 0x01;
		cdb[2] = 0x83;
		cdb[3] = 0x04;
		rc = mp_path_ctl_send(p, cdb, 6, SCSI_XFER_READ, 1024, mp_path_probe_cb);
		break;
	case MP_PROBE_CAPACITY:
		cdb[0] = 0x9e;		/* READ CAPACITY(16) */
		cdb[1] = 0x10;
		cdb[13] = 32;
		rc = mp_path_ctl_send(p, cdb, 16, SCSI_XFER_READ, 32, mp_path_probe_cb);
		break;
	case MP_PROBE_VPD_B0:
	case MP_PROBE_VPD_B2:
		cdb[0] = 0x12;		/* INQUIRY, EVPD, page B0 or B2, 255 bytes */
		cdb[1] = 0x01;
		cdb[2] = p->probe == MP_PROBE_VPD_B0 ? 0xb0 : 0xb2;
		cdb[4] = 0xff;
		rc = mp_path_ctl_send(p, cdb, 6, SCSI_XFER_READ, 255, mp_path_probe_cb);
		break;
	case MP_PROBE_RTPG:
		cdb[0] = 0xa3;		/* REPORT TARGET PORT GROUPS, length format */
		cdb[1] = 0x0a;
		cdb[8] = 0x04;
		rc = mp_path_ctl_send(p, cdb, 12, SCSI_XFER_READ, 1024, mp_path_probe_cb);
		break;
	case MP_PROBE_DONE:
		mp_path_probe_done(p);
		return;
	}
	if (rc < 0)
		mp_path_fail(p, "cannot queue the identity probe: %s", mp_path_err(p));
}

void mp_path_login_cb(struct iscsi_context *iscsi, int status, void *data, void *priv)
{
	struct mp_path *p = priv;

	(void)data;
	if (iscsi != p->ctx)
		return;
	if (status != SCSI_STATUS_GOOD) {
		/* Only libiscsi's full connect follows a redirect, and it leaves no error text. */
		mp_path_fail(p, "login to %s failed: %s", p->target, status == SCSI_STATUS_REDIRECT ?
			     "redirected (engine libiscsi does not follow it; native does)" :
			     iscsi_get_error(iscsi));
		return;
	}
	p->last_rx_ms = gw_now_ms();
	p->probe = MP_PROBE_VPD83;
	p->probe_tries = 0;
	mp_path_set_state(p, MP_PATH_PROBING, "logged in");
	mp_path_unfence(p, true);
	mp_path_probe_next(p);
}

static void mp_path_connect_cb(struct iscsi_context *iscsi, int status, void *data, void *priv)
{
	struct mp_path *p = priv;

	(void)data;
	if (iscsi != p->ctx)
		return;
	if (status != SCSI_STATUS_GOOD) {
		mp_path_fail(p, "connect to %s failed: %s", p->portal, iscsi_get_error(iscsi));
		return;
	}
	if (iscsi_login_async(iscsi, mp_path_login_cb, p) != 0)
		mp_path_fail(p, "cannot start the login: %s", iscsi_get_error(iscsi));
}

/*
 * libiscsi 1.19 allocates its iSER connection state with malloc and reads several fields
 * (its descriptor list, buffers, thread) before it ever writes them: on recycled heap memory
 * it follows garbage pointers. glibc's M_PERTURB set to 0xff makes malloc hand out zeroed
 * memory (it fills new blocks with the byte xor 0xff), here for this one call.
 */
static int mp_iser_init_transport(struct iscsi_context *ctx)
{
	const char *env = getenv("MALLOC_PERTURB_");
	int rc;

	mallopt(M_PERTURB, 0xff);
	rc = iscsi_init_transport(ctx, ISER_TRANSPORT);
	mallopt(M_PERTURB, env ? atoi(env) : 0);
	return rc;
}

/* After a failed iSER connect: did libiscsi get as far as its rdma_cm id? (Its disconnect
 * dereferences that id unchecked.) It does when the portal is a numeric address, so that no
 * name lookup could fail first, and the rdma_cm device is there. */
static bool mp_iser_cm_created(const struct mp_path *p)
{
	char host[128];
	const char *s = p->addr, *e;	/* numeric since gw_resolve */
	unsigned char a[16];

	if (*s == '[') {
		e = strchr(++s, ']');
	} else {
		e = strrchr(s, ':');
		if (!e)
			e = s + strlen(s);
	}
	if (!e || (size_t)(e - s) >= sizeof(host))
		return false;
	memcpy(host, s, (size_t)(e - s));
	host[e - s] = 0;
	if (inet_pton(AF_INET, host, a) != 1 && inet_pton(AF_INET6, host, a) != 1)
		return false;
	return access("/dev/infiniband/rdma_cm", R_OK | W_OK) == 0;
}

static void mp_path_connect(struct mp_path *p, uint64_t now)
{
	struct mp_lun *lun = p->lun;

	if (p->dying) {
		gw_defer_cancel(&p->teardown);
		mp_path_teardown_fn(&p->teardown);
	}
	if (p->stale_job) {
		/* The last connect's thread is still inside libiscsi: not a second one, unless
		 * that one looks stuck for good (its thread keeps its context, a leak). */
		if (!mp_iser_job_finished(p->stale_job)) {
			if (now - p->stale_since_ms < MP_ISER_STALE_WAIT_MS) {
				p->next_attempt_ms = now + 500;
				return;
			}
			gw_warn(MP_LOG, "%s: path %s: an iSER connect has been stuck in libiscsi for "
				"%llu s: connecting again (its thread and context are leaked)",
				lun->name, p->url,
				(unsigned long long)((now - p->stale_since_ms) / 1000));
		}
		mp_iser_job_put(p->stale_job);
		p->stale_job = NULL;
	}
	p->logins++;
	p->addr[0] = p->redirected_to[0] = 0;
	p->deadline_ms = now + (uint64_t)lun->conf.login_timeout * 1000;
	p->alua = false;
	p->alua_state = -1;
	p->eng->connect(p);
}

/* The libiscsi engine's connect, to the numeric address: libiscsi resolves nothing. */
static void mp_path_connect_at(struct mp_path *p, const struct gw_addr *a)
{
	gw_addr_str(a, p->addr, sizeof(p->addr));
	if (p->iser) {
		mp_iser_connect_start(p, p->ctx);
		return;
	}
	if (iscsi_connect_async(p->ctx, p->addr, mp_path_connect_cb, p) != 0) {
		mp_path_fail(p, "connect to %s: %s", p->portal, iscsi_get_error(p->ctx));
		return;
	}
	mp_path_sync_watch(p);
}

static void mp_path_resolved(void *arg, int err, const struct gw_addr *a)
{
	struct mp_path *p = arg;

	p->rsv = NULL;
	if (err) {
		mp_path_fail(p, "name lookup of %s failed: %s", p->rsv_host,
			     gw_resolve_strerror(err));
		return;
	}
	mp_path_connect_at(p, a);
}

/* The portal's address: at once if numeric, else from the resolver, off the loop (the path's
 * login_timeout bounds the wait: mp_path_tick). */
static void mp_path_resolve_libiscsi(struct mp_path *p)
{
	struct gw_addr a;
	char port[16];
	int rc;

	if (mp_ini_parse_portal(p->portal, p->rsv_host, sizeof(p->rsv_host), port,
				sizeof(port)) < 0) {
		mp_path_fail(p, "connect to %s: not a portal (host[:port])", p->portal);
		return;
	}
	rc = gw_resolve_start(p->lun->loop, p->rsv_host, port, mp_path_resolved, p, &a, &p->rsv);
	if (rc == 1)
		mp_path_connect_at(p, &a);
	else if (rc < 0)
		mp_path_fail(p, "name lookup of %s: %s", p->rsv_host,
			     rc == -EAGAIN ? "too many lookups pending (the DNS server is not "
					     "answering?)" : strerror(-rc));
}

static void mp_path_connect_libiscsi(struct mp_path *p)
{
	struct iscsi_context *ctx;

	ctx = iscsi_create_context(p->initiator);
	if (!ctx) {
		p->state = MP_PATH_CONNECTING;
		mp_path_fail(p, "cannot create an iSCSI context");
		return;
	}
	p->ctx = ctx;
	mp_path_set_state(p, MP_PATH_CONNECTING, NULL);
	iscsi_set_isid_random(ctx, p->isid_rnd, p->idx);
	if (p->iser && mp_iser_init_transport(ctx) != 0) {
		mp_path_fail(p, "iSER transport unavailable (needs RDMA hardware and a libiscsi "
			     "built with iSER): %s", iscsi_get_error(ctx));
		return;
	}
	/* libiscsi 1.19's iSER frees a command's small read buffer (malloc'd at its own size)
	 * with iscsi_sfree(), which with the cache on keeps it for later PDUs that expect a
	 * cache-sized block: a heap overflow on the next allocation. No cache, plain free(). */
	if (p->iser)
		iscsi_set_cache_allocations(ctx, 0);
	iscsi_set_targetname(ctx, p->target);
	iscsi_set_session_type(ctx, ISCSI_SESSION_NORMAL);
	iscsi_set_header_digest(ctx, ISCSI_HEADER_DIGEST_NONE_CRC32C);
	iscsi_set_noautoreconnect(ctx, 1);
	if (p->chap.user && iscsi_set_initiator_username_pwd(ctx, p->chap.user,
							     p->chap.secret) != 0) {
		mp_path_fail(p, "CHAP: %s", iscsi_get_error(ctx));
		return;
	}
	if (p->chap.mutual_user && iscsi_set_target_username_pwd(ctx, p->chap.mutual_user,
								 p->chap.mutual_secret) != 0) {
		mp_path_fail(p, "mutual CHAP: %s", iscsi_get_error(ctx));
		return;
	}
	mp_path_resolve_libiscsi(p);
}

static void mp_iser_job_done_fn(struct gw_notify *n)
{
	struct mp_path *p = gw_container_of(n, struct mp_path, job_done);
	struct mp_iser_job *job = p->job;
	struct iscsi_context *ctx;
	bool finished, connected;

	if (!job)
		return;
	pthread_mutex_lock(&job->mu);
	finished = job->finished;
	connected = job->connected;
	pthread_mutex_unlock(&job->mu);
	if (!finished)
		return;
	p->job = NULL;
	ctx = job->ctx;
	p->iser_cm = connected || job->cm_possible;
	mp_iser_job_put(job);
	if (ctx != p->ctx)
		return;		/* failed meanwhile: its queued teardown disposes of ctx */
	if (!connected) {
		mp_path_fail(p, "connect to %s failed: %s", p->portal, iscsi_get_error(ctx));
		return;
	}
	mp_path_sync_watch(p);
	if (p->ctx == ctx)
		mp_path_connect_cb(ctx, SCSI_STATUS_GOOD, NULL, p);
}

static void mp_iser_connect_start(struct mp_path *p, struct iscsi_context *ctx)
{
	struct mp_iser_job *job = calloc(1, sizeof(*job));
	pthread_attr_t attr;
	pthread_t tid;
	int rc;

	if (!job || !(job->portal = strdup(p->addr))) {
		free(job);
		mp_path_fail(p, "connect to %s: out of memory", p->portal);
		return;
	}
	pthread_mutex_init(&job->mu, NULL);
	job->refs = 2;
	job->ctx = ctx;
	job->notify = &p->job_done;
	job->cm_possible = mp_iser_cm_created(p);
	p->job = job;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&tid, &attr, mp_iser_job_thread, job);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		p->job = NULL;
		mp_iser_job_free(job);	/* no thread: no other reference */
		mp_path_fail(p, "connect to %s: cannot start a thread: %s", p->portal,
			     strerror(rc));
	}
}

/* The checker: TEST UNIT READY, then (ALUA back ends) the port group's state. */

static void mp_path_check_cb(struct iscsi_context *iscsi, int status, void *data, void *priv);

static void mp_path_check_send(struct mp_path *p, bool rtpg)
{
	uint8_t cdb[12] = { 0 };
	int rc;

	if (rtpg) {
		cdb[0] = 0xa3;
		cdb[1] = 0x0a;
		cdb[8] = 0x04;
		rc = mp_path_ctl_send(p, cdb, 12, SCSI_XFER_READ, 1024, mp_path_check_cb);
	} else {
		rc = mp_path_ctl_send(p, cdb, 6, SCSI_XFER_NONE, 0, mp_path_check_cb);
	}
	if (rc < 0) {
		mp_path_fail(p, "cannot queue the path check: %s", mp_path_err(p));
		return;
	}
	p->check_pending = true;
	p->check_deadline_ms = gw_now_ms() + (uint64_t)p->lun->conf.checker_timeout * 1000;
}

static void mp_path_check_cb(struct iscsi_context *iscsi, int status, void *data, void *priv)
{
	struct mp_path *p = priv;
	struct scsi_task *task = data;
	struct mp_lun *lun = p->lun;
	bool was_rtpg, standby = p->state == MP_PATH_STANDBY;
	enum mp_path_state want;

	if (iscsi != p->ctx || task != p->ctl_task) {
		if (task && task == p->ctl_task)
			p->ctl_task = NULL;
		if (task)
			scsi_free_scsi_task(task);
		return;
	}
	p->ctl_task = NULL;
	p->check_pending = false;
	p->last_rx_ms = gw_now_ms();
	p->next_check_ms = p->last_rx_ms + (uint64_t)lun->conf.polling_interval * 1000;
	if (status == SCSI_STATUS_CANCELLED && task) {
		/* Taken by our LUN RESET on the live session (nothing else cancels a check on
		 * it): not an answer, check again soon. */
		scsi_free_scsi_task(task);
		p->next_check_ms = p->last_rx_ms;
		return;
	}
	if (mp_status_transport(status) || !task) {
		if (task)
			scsi_free_scsi_task(task);
		mp_path_fail(p, "path checker: %s: %s", mp_status_text(status),
			     iscsi_get_error(iscsi));
		return;
	}
	was_rtpg = task->cdb[0] == 0xa3;
	if (was_rtpg && status == SCSI_STATUS_GOOD) {
		int st;

		if (mp_rtpg_state(task->datain.data, (size_t)task->datain.size,
				  p->alua_tpg, &st) == 0 && st != p->alua_state) {
			gw_info(MP_LOG, "%s: path %s: ALUA %s -> %s", lun->name, p->url,
				mp_alua_state_name(p->alua_state), mp_alua_state_name(st));
			p->alua_state = st;
			p->prio = mp_alua_prio(st);
			standby = st == 0x2 || st == 0x3 || st == 0xe;
		}
	} else if (!was_rtpg && status != SCSI_STATUS_GOOD) {
		uint8_t key = (uint8_t)task->sense.key, asc = mp_task_asc(task);
		uint8_t ascq = mp_task_ascq(task);

		if (mp_classify((uint8_t)status, key, asc, ascq) == MP_V_PATH) {
			if (key == 0x2 && asc == 0x04) {
				standby = true;
			} else {
				scsi_free_scsi_task(task);
				mp_path_fail(p, "path checker: sense %x/%02x/%02x", key, asc, ascq);
				return;
			}
		}
	} else if (!was_rtpg && !p->alua) {
		standby = false;
	}
	scsi_free_scsi_task(task);
	want = standby ? MP_PATH_STANDBY : MP_PATH_ACTIVE;
	if (want != p->state) {
		mp_path_set_state(p, want, "path checker");
		p->owner->changed(lun, p);
	} else if (was_rtpg) {
		p->owner->changed(lun, p);	/* priority may have moved */
	}
	if (!was_rtpg && p->alua && (p->ctx || p->ini))
		mp_path_check_send(p, true);
}

static void mp_path_nop_cb(struct iscsi_context *iscsi, int status, void *data, void *priv)
{
	struct mp_path *p = priv;

	(void)data;
	if (iscsi != p->ctx)
		return;
	p->nop_pending = false;
	if (status == SCSI_STATUS_GOOD)
		p->last_rx_ms = gw_now_ms();
}

static int mp_path_nop_libiscsi(struct mp_path *p)
{
	return iscsi_nop_out_async(p->ctx, mp_path_nop_cb, NULL, 0, p) == 0 ? 0 : -EIO;
}

void mp_path_tick(struct mp_path *p, uint64_t now)
{
	struct mp_lun *lun = p->lun;
	struct mp_io *oldest;

	if (p->nr_fenced && (now >= p->fence_deadline_ms || lun->stopping))
		mp_path_unfence(p, false);
	switch (p->state) {
	case MP_PATH_DOWN:
	case MP_PATH_REFUSED:
		if (!lun->stopping && now >= p->next_attempt_ms)
			mp_path_connect(p, now);
		return;
	case MP_PATH_CONNECTING:
	case MP_PATH_PROBING:
		if (now >= p->deadline_ms && mp_path_resolving(p))
			mp_path_fail(p, "name lookup of %s did not finish within %u s",
				     mp_path_resolving(p), lun->conf.login_timeout);
		else if (now >= p->deadline_ms)
			mp_path_fail(p, "%s timed out after %u s",
				     p->state == MP_PATH_CONNECTING ? "connect and login" :
								      "identity probe",
				     lun->conf.login_timeout);
		else if (p->ctx && !p->job && !p->native)
			mp_path_sync_watch(p);
		return;
	case MP_PATH_ACTIVE:
	case MP_PATH_STANDBY:
		break;
	}
	if (p->tmf != MP_TMF_NONE) {
		if (now >= p->tmf_deadline_ms) {
			char why[64];

			snprintf(why, sizeof(why), "not answered within %llu ms",
				 (unsigned long long)mp_tmf_bound_ms(&lun->conf));
			if (p->tmf == MP_TMF_ABORT)
				p->aborts_failed++;
			mp_path_tmf_escalate(p, why);
		}
		return;
	}
	if (p->nop_pending && now >= p->nop_deadline_ms) {
		char why[96];

		snprintf(why, sizeof(why), "silent: no NOP-In within %u ms, %u I/Os outstanding",
			 lun->conf.nop_timeout_ms, p->nr_inflight);
		if (p->nr_inflight && lun->stopping)
			mp_path_fail(p, "%s", why);
		else if (p->nr_inflight)
			mp_path_tmf_start(p, true, why);
		else
			mp_path_fail(p, "%s", why);
		return;
	}
	if (!gw_list_empty(&p->inflight)) {
		oldest = gw_list_first_entry(&p->inflight, struct mp_io, node);
		if ((gw_now_ns() - oldest->sent_ns) / 1000000 >= (uint64_t)lun->conf.io_timeout *
		    1000 && oldest->tmf == MP_IO_TMF_NONE) {
			char why[64];

			snprintf(why, sizeof(why), "an I/O has been outstanding for %u s",
				 lun->conf.io_timeout);
			mp_path_tmf_start(p, false, why);
			return;
		}
		if (!p->nop_pending && now - p->last_rx_ms >= lun->conf.io_stall_ms) {
			if (p->eng->nop(p) == 0) {
				p->nop_pending = true;
				p->nop_deadline_ms = now + lun->conf.nop_timeout_ms;
				gw_dbg(MP_LOG, "%s: path %s: no reply for %llu ms, NOP-Out sent",
				       lun->name, p->url,
				       (unsigned long long)(now - p->last_rx_ms));
				mp_path_sync_watch(p);
			}
		}
	}
	if (p->check_pending) {
		if (now >= p->check_deadline_ms)
			mp_path_fail(p, "path checker: no answer within %u s",
				     lun->conf.checker_timeout);
		return;
	}
	if (!lun->stopping && now >= p->next_check_ms)
		mp_path_check_send(p, false);
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
		    (ascq == 0x06 || ascq == 0x09) && !stale)
			p->next_check_ms = now;	/* ALUA or capacity changed: look again */
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

void mp_path_task_cb(struct iscsi_context *iscsi, int status, void *data, void *priv)
{
	struct mp_io *io = priv;
	struct scsi_task *task = io->task;
	uint8_t key = 0, asc = 0, ascq = 0, raw[MP_SENSE_MAX];
	size_t raw_len = 0;
	char err[MP_ERR_MAX] = "";

	(void)data;
	if (mp_status_transport(status))
		snprintf(err, sizeof(err), "%s", iscsi_get_error(iscsi));
	if (status == SCSI_STATUS_CHECK_CONDITION) {
		key = (uint8_t)task->sense.key;
		asc = mp_task_asc(task);
		ascq = mp_task_ascq(task);
		/* libiscsi keeps the sense as it came after its 2-byte length: a COMPARE AND
		 * WRITE's MISCOMPARE carries the offset in INFORMATION, which the host needs. */
		if (io->op == MP_COMPARE_AND_WRITE && task->datain.data &&
		    task->datain.size > 2 + 8) {
			raw_len = (size_t)task->datain.size - 2;
			if (raw_len > sizeof(raw))
				raw_len = sizeof(raw);
			memcpy(raw, task->datain.data + 2, raw_len);
		}
	}
	scsi_free_scsi_task(task);
	mp_path_io_end(io, iscsi != io->path->ctx, status, key, asc, ascq, raw, raw_len, err);
}

int mp_path_send(struct mp_path *p, struct mp_io *io)
{
	struct mp_lun *lun = p->lun;
	uint64_t lba = io->offset / lun->block_size;
	uint64_t nblocks = io->len / lun->block_size;
	struct iscsi_data data = { 0 }, *dp = NULL;
	uint8_t cdb[16] = { 0 };
	int cdb_len = 16, dir = SCSI_XFER_NONE;
	uint32_t xfer = 0;

	switch (io->op) {
	case MP_READ:
		mp_cdb_rw16(cdb, 0x88, lba, (uint32_t)nblocks, false);
		dir = SCSI_XFER_READ;
		xfer = (uint32_t)io->len;
		break;
	case MP_WRITE:
		mp_cdb_rw16(cdb, 0x8a, lba, (uint32_t)nblocks, io->fua);
		dir = SCSI_XFER_WRITE;
		xfer = (uint32_t)io->len;
		break;
	case MP_FLUSH:
		cdb[0] = 0x91;		/* SYNCHRONIZE CACHE(16), whole LU */
		break;
	case MP_WRITE_ZEROES:
		/* WRITE SAME(16) of one zero block; UNMAP lets a thin back end deallocate. */
		if (!io->buf)
			io->buf = calloc(1, lun->block_size);
		if (!io->buf)
			return -ENOMEM;
		mp_cdb_rw16(cdb, 0x93, lba, (uint32_t)nblocks, false);
		cdb[1] = lun->can_unmap ? 0x08 : 0;
		dir = SCSI_XFER_WRITE;
		xfer = lun->block_size;
		data.data = io->buf;
		data.size = lun->block_size;
		dp = &data;
		break;
	case MP_COMPARE_AND_WRITE:
		/* COMPARE AND WRITE: the blocks to compare, then the blocks to write. */
		memset(cdb, 0, sizeof(cdb));
		cdb[0] = 0x89;
		cdb[1] = io->fua ? 0x08 : 0;
		for (int i = 0; i < 8; i++)
			cdb[2 + i] = (uint8_t)(lba >> (56 - 8 * i));
		cdb[13] = (uint8_t)nblocks;
		dir = SCSI_XFER_WRITE;
		xfer = (uint32_t)(2 * io->len);
		break;
	case MP_UNMAP: {
		uint64_t left = nblocks, at = lba;
		size_t nd = (size_t)((nblocks + 0xfffffffeull) / 0xffffffffull), len;

		if (!nd)
			nd = 1;
		len = 8 + 16 * nd;
		if (!io->buf)
			io->buf = calloc(1, len);
		if (!io->buf)
			return -ENOMEM;
		io->buf[0] = (uint8_t)((len - 2) >> 8);
		io->buf[1] = (uint8_t)(len - 2);
		io->buf[2] = (uint8_t)((16 * nd) >> 8);
		io->buf[3] = (uint8_t)(16 * nd);
		for (size_t i = 0; i < nd; i++) {
			uint8_t *d = io->buf + 8 + 16 * i;
			uint32_t n = left > 0xffffffffull ? 0xffffffffu : (uint32_t)left;

			for (int b = 0; b < 8; b++)
				d[b] = (uint8_t)(at >> (56 - 8 * b));
			for (int b = 0; b < 4; b++)
				d[8 + b] = (uint8_t)(n >> (24 - 8 * b));
			at += n;
			left -= n;
		}
		cdb[0] = 0x42;
		cdb[7] = (uint8_t)(len >> 8);
		cdb[8] = (uint8_t)len;
		cdb_len = 10;
		dir = SCSI_XFER_WRITE;
		xfer = (uint32_t)len;
		data.data = io->buf;
		data.size = len;
		dp = &data;
		break;
	}
	}
	return p->eng->send(p, io, cdb, cdb_len, dir, xfer, dp);
}

static int mp_path_send_libiscsi(struct mp_path *p, struct mp_io *io, const uint8_t *cdb,
				 int cdb_len, int dir, uint32_t xfer, const struct iscsi_data *dp)
{
	struct scsi_task *task;

	task = scsi_create_task(cdb_len, (unsigned char *)(uintptr_t)cdb, dir, (int)xfer);
	if (!task)
		return -ENOMEM;
	/* struct scsi_iovec is struct iovec by libiscsi's promise; libiscsi adjusts entries
	 * while it reads or writes and restores them, on this thread. */
	if (io->op == MP_READ)
		scsi_task_set_iov_in(task, (struct scsi_iovec *)(uintptr_t)io->iov, io->iovcnt);
	else if (io->op == MP_WRITE || io->op == MP_COMPARE_AND_WRITE)
		scsi_task_set_iov_out(task, (struct scsi_iovec *)(uintptr_t)io->iov, io->iovcnt);
	io->task = task;
	mp_path_inflight_add(p, io);
	if (iscsi_scsi_command_async(p->ctx, p->lun_nr, task, mp_path_task_cb,
				     (struct iscsi_data *)(uintptr_t)dp, io) != 0) {
		mp_path_inflight_undo(p, io);
		io->task = NULL;
		scsi_free_scsi_task(task);
		mp_path_fail(p, "cannot queue a command: %s", mp_path_err(p));
		return -EIO;
	}
	p->ios++;
	if (p->iser)
		mp_path_sync_watch(p);
	else
		gw_defer_queue(p->lun->loop, &p->flush);
	return 0;
}

/* libiscsi URLs may carry "user%password@": status and metrics show the user only. */
char *mp_url_strip(const char *url)
{
	const char *host = strstr(url, "://"), *at, *slash, *pct;
	char *s;

	if (!host)
		return strdup(url);
	host += 3;
	slash = strchr(host, '/');
	at = memchr(host, '@', slash ? (size_t)(slash - host) : strlen(host));
	pct = at ? memchr(host, '%', (size_t)(at - host)) : NULL;
	if (!pct)
		return strdup(url);
	if (asprintf(&s, "%.*s%s", (int)(pct - url), url, at) < 0)
		return NULL;
	return s;
}

json_t *mp_url_public(const char *url)
{
	char *s = mp_url_strip(url);
	json_t *j = s ? json_string(s) : NULL;

	free(s);
	return j;
}

/* address: the numeric address the current (or last) login connected to; redirected_to: the
 * portal that login was redirected to; resolving: the name being looked up right now. */
static void mp_path_status_where(const struct mp_path *p, json_t *o)
{
	const char *addr = p->addr, *to = p->redirected_to, *host = mp_path_resolving(p);

	if (p->ini) {
		addr = mp_ini_address(p->ini);
		to = mp_ini_redirected_to(p->ini);
	}
	if (addr && *addr)
		json_object_set_new(o, "address", json_string(addr));
	if (to && *to)
		json_object_set_new(o, "redirected_to", json_string(to));
	if (host)
		json_object_set_new(o, "resolving", json_string(host));
}

json_t *mp_path_status(const struct mp_path *p, uint64_t now)
{
	const struct mp_lun *lun = p->lun;
	json_t *o = json_object();

	if (!o)
		return NULL;
	json_object_set_new(o, "url", mp_url_public(p->url));
	json_object_set_new(o, "state", json_string(mp_path_state_name(p->state)));
	json_object_set_new(o, "state_for_ms", json_integer((json_int_t)(now - p->state_since_ms)));
	json_object_set_new(o, "group", json_integer(mp_path_rank(lun, p)));
	json_object_set_new(o, "in_use", json_boolean(mp_path_usable(p) &&
						      mp_path_rank(lun, p) == lun->cur_rank));
	json_object_set_new(o, "priority", json_integer(p->prio));
	json_object_set_new(o, "alua_state", json_string(p->alua ?
							 mp_alua_state_name(p->alua_state) :
							 "none"));
	json_object_set_new(o, "identity", json_string(p->ident));
	json_object_set_new(o, "inflight", json_integer(p->nr_inflight));
	json_object_set_new(o, "ios", json_integer((json_int_t)p->ios));
	json_object_set_new(o, "errors", json_integer((json_int_t)p->errors));
	json_object_set_new(o, "failovers", json_integer((json_int_t)p->failovers));
	json_object_set_new(o, "aborts", json_integer((json_int_t)p->aborts));
	json_object_set_new(o, "aborts_failed", json_integer((json_int_t)p->aborts_failed));
	json_object_set_new(o, "lun_resets", json_integer((json_int_t)p->lun_resets));
	json_object_set_new(o, "fence_waits", json_integer((json_int_t)p->fence_waits));
	json_object_set_new(o, "fence_expired", json_integer((json_int_t)p->fence_expired));
	json_object_set_new(o, "fenced", json_integer(p->nr_fenced));
	if (p->tmf != MP_TMF_NONE)
		json_object_set_new(o, "task_management", json_string(mp_tmf_name(p->tmf)));
	json_object_set_new(o, "logins", json_integer(p->logins));
	json_object_set_new(o, "latency_us", json_integer((json_int_t)p->lat_ewma_us));
	if (p->max_xfer)
		json_object_set_new(o, "max_transfer_bytes", json_integer(p->max_xfer));
	if (p->max_inflight)
		json_object_set_new(o, "max_inflight", json_integer(p->max_inflight));
	mp_path_status_where(p, o);
	json_object_set_new(o, "last_error", json_string(p->last_error));
	if (p->state == MP_PATH_DOWN || p->state == MP_PATH_REFUSED)
		json_object_set_new(o, "next_login_in_ms",
				    json_integer(p->next_attempt_ms > now ?
						 (json_int_t)(p->next_attempt_ms - now) : 0));
	return o;
}

static const struct mp_engine_ops mp_engine_libiscsi = {
	.name = "libiscsi",
	.err = mp_path_err_libiscsi,
	.connect = mp_path_connect_libiscsi,
	.ctl_send = mp_path_ctl_send_libiscsi,
	.nop = mp_path_nop_libiscsi,
	.send = mp_path_send_libiscsi,
	.abort = mp_path_abort_libiscsi,
	.lun_reset = mp_path_lun_reset_libiscsi,
	.release = mp_path_release_libiscsi,
};
