// SPDX-License-Identifier: MIT
/*
 * The libiscsi engine under a path (struct mp_engine_ops, mp_priv.h): a libiscsi context driven
 * by the gateway's loop (iscsi_get_fd / which_events / service in a gw_watch; the LUN's tick
 * asks again while libiscsi waits). iscsi:// paths with "engine": "libiscsi", and every
 * iser:// path. Its state (the context, the one being torn down, the watch, the flush, the
 * portal's lookup, the iSER connect thread) is struct mp_lis behind p->eng_priv.
 *
 * libiscsi's own reconnect is switched off (iscsi_set_noautoreconnect): it would replay
 * commands on the same path behind our back and, in some versions, sleep inside
 * iscsi_service(). A failed path's context is destroyed instead (from the path's teardown
 * defer, never inside one of its own callbacks), its commands come back CANCELLED and are
 * re-driven by the LUN, and a fresh context logs in after the path's backoff.
 *
 * It reports to the files below it only: the login to mp_path_probe.c, I/O ends and failures to
 * mp_path_core.c, task management answers to mp_path_tmf.c. mp_path.c names its table.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
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

struct mp_iser_job;

/* The engine's state of one path (p->eng_priv). */
struct mp_lis {
	struct mp_path *p;
	struct iscsi_context *ctx;
	struct iscsi_context *dying;	/* context to destroy from the teardown defer */
	struct gw_watch w;
	struct gw_defer flush;		/* writes the commands queued this loop round */
	/* The portal's name being looked up off the loop (gw_resolve.h); libiscsi is then
	 * handed the numeric address, so it never resolves on the loop. */
	struct gw_resolve *rsv;
	char rsv_host[256];
	bool iser_cm;			/* libiscsi created its rdma_cm id: disconnect first */
	struct mp_iser_job *job;	/* iSER connect running in its own thread */
	struct mp_iser_job *stale_job;	/* one given up on, until its thread is done */
	uint64_t stale_since_ms;
	struct gw_notify job_done;	/* that thread's wake-up (iSER paths only) */
};

static struct mp_lis *mp_lis_of(const struct mp_path *p)
{
	return p->eng_priv;
}

/* The path's context: NULL when it has none, or once the engine's state is gone (a context
 * the LUN buries calls back after the path's fini). */
static struct iscsi_context *mp_lis_ctx(const struct mp_path *p)
{
	const struct mp_lis *lis = p->eng_priv;

	return lis ? lis->ctx : NULL;
}

static void mp_path_watch_fn(struct gw_watch *w, uint32_t events);
static void mp_iser_job_done_fn(struct gw_notify *n);
static void mp_iser_connect_start(struct mp_path *p, struct iscsi_context *ctx);

static const char *mp_path_err_libiscsi(const struct mp_path *p)
{
	struct iscsi_context *ctx = mp_lis_ctx(p);

	return ctx ? iscsi_get_error(ctx) : "not connected";
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

static void mp_path_destroy_ctx(struct mp_path *p, struct iscsi_context *ctx)
{
	struct mp_lis *lis = mp_lis_of(p);
	uint32_t fenced = p->nr_fenced;

	if (lis->job && lis->job->ctx == ctx) {
		struct mp_iser_job *job = lis->job;

		lis->job = NULL;
		if (mp_iser_job_abandon(job)) {
			lis->iser_cm = false;
			lis->stale_job = job;
			lis->stale_since_ms = gw_now_ms();
			return;		/* nothing was sent on it: no I/O, no probe */
		}
		lis->iser_cm = job->connected || job->cm_possible;
		mp_iser_job_put(job);
	}
	if (p->iser) {
		/* libiscsi 1.19 frees an iSER context without closing its connection (it only
		 * disconnects contexts with a socket), which leaves its connection manager thread
		 * waiting on freed memory: disconnect first, cancel the commands (their callbacks
		 * hand the I/O back), and free the context later, once that thread is gone. */
		if (lis->iser_cm)
			iscsi_disconnect(ctx);
		lis->iser_cm = false;
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

static void mp_path_sync_watch(struct mp_path *p)
{
	struct mp_lis *lis = mp_lis_of(p);
	uint32_t ev = 0;
	int fd, want;

	if (!lis->ctx) {
		gw_watch_stop(&lis->w);
		return;
	}
	/* libiscsi may move to another fd (redirects, its reconnect): follow it. */
	fd = iscsi_get_fd(lis->ctx);
	if (fd != lis->w.fd) {
		gw_watch_stop(&lis->w);
		gw_watch_init(&lis->w, p->lun->loop, fd, mp_path_watch_fn);
	}
	if (fd < 0)
		return;
	want = iscsi_which_events(lis->ctx);
	if (want & POLLIN)
		ev |= EPOLLIN | EPOLLRDHUP;
	if (want & POLLOUT)
		ev |= EPOLLOUT;
	/* 0: libiscsi wants a pause; the LUN's tick asks again. */
	if (gw_watch_set(&lis->w, ev) < 0) {
		/* The fd number was closed and reused under the same watch: register anew. */
		lis->w.events = 0;
		if (gw_watch_set(&lis->w, ev) < 0)
			mp_path_fail(p, "cannot watch the connection's socket");
	}
}

static void mp_path_watch_fn(struct gw_watch *w, uint32_t events)
{
	struct mp_lis *lis = gw_container_of(w, struct mp_lis, w);
	struct mp_path *p = lis->p;
	struct iscsi_context *ctx = lis->ctx;
	int rc;

	if (!ctx)
		return;
	rc = iscsi_service(ctx, (int)(events & (EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP)));
	if (lis->ctx != ctx)
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
	struct mp_lis *lis = gw_container_of(d, struct mp_lis, flush);

	if (lis->ctx && lis->w.fd >= 0)
		mp_path_watch_fn(&lis->w, EPOLLOUT);
}

static int mp_path_ctl_send_libiscsi(struct mp_path *p, struct scsi_task *task,
				     const uint8_t *cdb, int cdb_len, int xfer, iscsi_command_cb cb)
{
	struct mp_lis *lis = mp_lis_of(p);

	(void)cdb;
	(void)cdb_len;
	(void)xfer;
	if (iscsi_scsi_command_async(lis->ctx, p->lun_nr, task, cb, NULL, p) != 0) {
		scsi_free_scsi_task(task);
		return -EIO;
	}
	p->ctl_task = task;
	mp_path_sync_watch(p);
	return 0;
}

static void mp_path_login_cb(struct iscsi_context *iscsi, int status, void *data, void *priv)
{
	struct mp_path *p = priv;

	(void)data;
	if (iscsi != mp_lis_ctx(p))
		return;
	if (status != SCSI_STATUS_GOOD) {
		/* Only libiscsi's full connect follows a redirect, and it leaves no error text. */
		mp_path_fail(p, "login to %s failed: %s", p->target, status == SCSI_STATUS_REDIRECT ?
			     "redirected (engine libiscsi does not follow it; native does)" :
			     iscsi_get_error(iscsi));
		return;
	}
	mp_path_logged_in(p);
}

static void mp_path_connect_cb(struct iscsi_context *iscsi, int status, void *data, void *priv)
{
	struct mp_path *p = priv;

	(void)data;
	if (iscsi != mp_lis_ctx(p))
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

/* The libiscsi engine's connect, to the numeric address: libiscsi resolves nothing. */
static void mp_path_connect_at(struct mp_path *p, const struct gw_addr *a)
{
	struct mp_lis *lis = mp_lis_of(p);

	gw_addr_str(a, p->addr, sizeof(p->addr));
	if (p->iser) {
		mp_iser_connect_start(p, lis->ctx);
		return;
	}
	if (iscsi_connect_async(lis->ctx, p->addr, mp_path_connect_cb, p) != 0) {
		mp_path_fail(p, "connect to %s: %s", p->portal, iscsi_get_error(lis->ctx));
		return;
	}
	mp_path_sync_watch(p);
}

static void mp_path_resolved(void *arg, int err, const struct gw_addr *a)
{
	struct mp_path *p = arg;
	struct mp_lis *lis = mp_lis_of(p);

	lis->rsv = NULL;
	if (err) {
		mp_path_fail(p, "name lookup of %s failed: %s", lis->rsv_host,
			     gw_resolve_strerror(err));
		return;
	}
	mp_path_connect_at(p, a);
}

/* The portal's address: at once if numeric, else from the resolver, off the loop (the path's
 * login_timeout bounds the wait: mp_path_tick). */
static void mp_path_resolve_libiscsi(struct mp_path *p)
{
	struct mp_lis *lis = mp_lis_of(p);
	struct gw_addr a;
	char port[16];
	int rc;

	if (mp_ini_parse_portal(p->portal, lis->rsv_host, sizeof(lis->rsv_host), port,
				sizeof(port)) < 0) {
		mp_path_fail(p, "connect to %s: not a portal (host[:port])", p->portal);
		return;
	}
	rc = gw_resolve_start(p->lun->loop, lis->rsv_host, port, mp_path_resolved, p, &a,
			      &lis->rsv);
	if (rc == 1)
		mp_path_connect_at(p, &a);
	else if (rc < 0)
		mp_path_fail(p, "name lookup of %s: %s", lis->rsv_host,
			     rc == -EAGAIN ? "too many lookups pending (the DNS server is not "
					     "answering?)" : strerror(-rc));
}

static void mp_path_connect_libiscsi(struct mp_path *p)
{
	struct mp_lis *lis = mp_lis_of(p);
	struct iscsi_context *ctx;

	ctx = iscsi_create_context(p->initiator);
	if (!ctx) {
		p->state = MP_PATH_CONNECTING;
		mp_path_fail(p, "cannot create an iSCSI context");
		return;
	}
	lis->ctx = ctx;
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
	struct mp_lis *lis = gw_container_of(n, struct mp_lis, job_done);
	struct mp_path *p = lis->p;
	struct mp_iser_job *job = lis->job;
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
	lis->job = NULL;
	ctx = job->ctx;
	lis->iser_cm = connected || job->cm_possible;
	mp_iser_job_put(job);
	if (ctx != lis->ctx)
		return;		/* failed meanwhile: its queued teardown disposes of ctx */
	if (!connected) {
		mp_path_fail(p, "connect to %s failed: %s", p->portal, iscsi_get_error(ctx));
		return;
	}
	mp_path_sync_watch(p);
	if (lis->ctx == ctx)
		mp_path_connect_cb(ctx, SCSI_STATUS_GOOD, NULL, p);
}

static void mp_iser_connect_start(struct mp_path *p, struct iscsi_context *ctx)
{
	struct mp_lis *lis = mp_lis_of(p);
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
	job->notify = &lis->job_done;
	job->cm_possible = mp_iser_cm_created(p);
	lis->job = job;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&tid, &attr, mp_iser_job_thread, job);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		lis->job = NULL;
		mp_iser_job_free(job);	/* no thread: no other reference */
		mp_path_fail(p, "connect to %s: cannot start a thread: %s", p->portal,
			     strerror(rc));
	}
}

static void mp_path_nop_cb(struct iscsi_context *iscsi, int status, void *data, void *priv)
{
	struct mp_path *p = priv;

	(void)data;
	if (iscsi != mp_lis_ctx(p))
		return;
	p->nop_pending = false;
	if (status == SCSI_STATUS_GOOD)
		p->last_rx_ms = gw_now_ms();
}

static int mp_path_nop_libiscsi(struct mp_path *p)
{
	return iscsi_nop_out_async(mp_lis_ctx(p), mp_path_nop_cb, NULL, 0, p) == 0 ? 0 : -EIO;
}

static void mp_path_task_cb(struct iscsi_context *iscsi, int status, void *data, void *priv)
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
	mp_path_io_end(io, iscsi != mp_lis_ctx(io->path), status, key, asc, ascq, raw, raw_len,
		       err);
}

static int mp_path_send_libiscsi(struct mp_path *p, struct mp_io *io, const uint8_t *cdb,
				 int cdb_len, int dir, uint32_t xfer, const struct iscsi_data *dp)
{
	struct mp_lis *lis = mp_lis_of(p);
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
	if (iscsi_scsi_command_async(lis->ctx, p->lun_nr, task, mp_path_task_cb,
				     (struct iscsi_data *)(uintptr_t)dp, io) != 0) {
		mp_path_inflight_undo(p, io);
		io->task = NULL;
		scsi_free_scsi_task(task);
		mp_path_fail(p, "cannot queue a command: %s", p->eng->err(p));
		return -EIO;
	}
	p->ios++;
	if (p->iser)
		mp_path_sync_watch(p);
	else
		gw_defer_queue(p->lun->loop, &lis->flush);
	return 0;
}

static void mp_path_tmf_cb_libiscsi(struct iscsi_context *iscsi, int status, void *data,
				    void *priv)
{
	struct mp_path *p;

	if (!mp_tmf_req_take(priv, &p) || iscsi != mp_lis_ctx(p))
		return;
	mp_path_tmf_answer(p, status == SCSI_STATUS_GOOD && data ? (int)*(uint32_t *)data : -1);
}

static int mp_path_tmf_libiscsi(struct mp_path *p, enum iscsi_task_mgmt_funcs fn,
				const struct mp_io *io)
{
	struct mp_lis *lis = mp_lis_of(p);
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
	if (iscsi_task_mgmt_async(lis->ctx, p->lun_nr, fn, io ? io->task->itt : 0xffffffffu,
				  io ? io->task->cmdsn : 0, mp_path_tmf_cb_libiscsi, r) != 0) {
		struct mp_path *q;

		mp_tmf_req_take(r, &q);
		return -EIO;
	}
	gw_defer_queue(p->lun->loop, &lis->flush);
	return 0;
}

static int mp_path_abort_libiscsi(struct mp_path *p, struct mp_io *io)
{
	return mp_path_tmf_libiscsi(p, ISCSI_TM_ABORT_TASK, io);
}

static int mp_path_lun_reset_libiscsi(struct mp_path *p)
{
	return mp_path_tmf_libiscsi(p, ISCSI_TM_LUN_RESET, NULL);
}

static void mp_path_release_libiscsi(struct mp_path *p)
{
	struct mp_lis *lis = mp_lis_of(p);
	struct mp_io *io;
	bool again = true;

	/* Each cancel calls the command back at once (mp_path_task_cb), which unlinks it. */
	while (again) {
		again = false;
		gw_list_for_each_entry(io, &p->inflight, node) {
			if (io->tmf != MP_IO_ABORTING || !io->task)
				continue;
			if (iscsi_scsi_cancel_task(lis->ctx, io->task) != 0)
				mp_path_task_cb(lis->ctx, SCSI_STATUS_CANCELLED, NULL, io);
			again = true;
			break;
		}
	}
}

/* The engine's own state, and its end */

static int mp_lis_init(struct mp_path *p, struct gw_errlist *errs, const char *field)
{
	struct mp_lis *lis = calloc(1, sizeof(*lis));
	int rc;

	if (!lis)
		return -ENOMEM;
	lis->p = p;
	lis->job_done.w.fd = -1;
	gw_watch_init(&lis->w, p->lun->loop, -1, mp_path_watch_fn);
	gw_defer_init(&lis->flush, mp_path_flush_fn);
	p->eng_priv = lis;
	if (p->iser) {
		rc = gw_notify_init(&lis->job_done, p->lun->loop, mp_iser_job_done_fn);
		if (rc < 0) {
			gw_errlist_add(errs, field, "%s: no eventfd for the iSER connect", p->url);
			return rc;
		}
	}
	return 0;
}

static void mp_lis_fini(struct mp_path *p)
{
	struct mp_lis *lis = mp_lis_of(p);

	if (!lis)
		return;
	gw_resolve_cancel(lis->rsv);
	lis->rsv = NULL;
	gw_watch_stop(&lis->w);
	gw_defer_cancel(&lis->flush);
	if (lis->dying) {
		mp_path_destroy_ctx(p, lis->dying);
		lis->dying = NULL;
	}
	if (lis->ctx) {
		struct iscsi_context *ctx = lis->ctx;

		lis->ctx = NULL;
		mp_path_destroy_ctx(p, ctx);
	}
	if (lis->stale_job) {
		mp_iser_job_put(lis->stale_job);
		lis->stale_job = NULL;
	}
	gw_notify_fini(&lis->job_done);
	p->eng_priv = NULL;
	free(lis);
}

/* The session is over: its lookup too, and the context goes to the teardown. */
static void mp_lis_drop(struct mp_path *p)
{
	struct mp_lis *lis = mp_lis_of(p);

	gw_resolve_cancel(lis->rsv);
	lis->rsv = NULL;
	gw_watch_stop(&lis->w);
	lis->dying = lis->ctx;
	lis->ctx = NULL;
}

static void mp_lis_teardown(struct mp_path *p)
{
	struct mp_lis *lis = mp_lis_of(p);
	struct iscsi_context *ctx = lis->dying;

	lis->dying = NULL;
	if (ctx)
		mp_path_destroy_ctx(p, ctx);
}

static int mp_lis_prepare(struct mp_path *p, uint64_t now)
{
	struct mp_lis *lis = mp_lis_of(p);

	if (lis->dying) {
		gw_defer_cancel(&p->teardown);
		mp_lis_teardown(p);
	}
	if (lis->stale_job) {
		/* The last connect's thread is still inside libiscsi: not a second one, unless
		 * that one looks stuck for good (its thread keeps its context, a leak). */
		if (!mp_iser_job_finished(lis->stale_job)) {
			if (now - lis->stale_since_ms < MP_ISER_STALE_WAIT_MS) {
				p->next_attempt_ms = now + 500;
				return -EBUSY;
			}
			gw_warn(MP_LOG, "%s: path %s: an iSER connect has been stuck in libiscsi for "
				"%llu s: connecting again (its thread and context are leaked)",
				p->lun->name, p->url,
				(unsigned long long)((now - lis->stale_since_ms) / 1000));
		}
		mp_iser_job_put(lis->stale_job);
		lis->stale_job = NULL;
	}
	return 0;
}

static const char *mp_lis_resolving(const struct mp_path *p)
{
	const struct mp_lis *lis = mp_lis_of(p);

	return lis->rsv ? lis->rsv_host : NULL;
}

static bool mp_lis_has_session(const struct mp_path *p)
{
	return mp_lis_ctx(p) != NULL;
}

static bool mp_lis_stale(const struct mp_path *p, const struct iscsi_context *iscsi)
{
	return iscsi != mp_lis_ctx(p);
}

/* An iSER connect given up on whose thread is still inside libiscsi. */
static bool mp_lis_stuck(const struct mp_path *p)
{
	return mp_lis_of(p)->stale_job != NULL;
}

/* While connecting (not in an iSER connect's thread) and after a NOP-Out: what libiscsi
 * waits for now. */
static void mp_lis_poll(struct mp_path *p)
{
	struct mp_lis *lis = mp_lis_of(p);

	if (lis->ctx && !lis->job)
		mp_path_sync_watch(p);
}

const struct mp_engine_ops mp_engine_libiscsi = {
	.name = "libiscsi",
	.init = mp_lis_init,
	.fini = mp_lis_fini,
	.err = mp_path_err_libiscsi,
	.prepare = mp_lis_prepare,
	.connect = mp_path_connect_libiscsi,
	.resolving = mp_lis_resolving,
	.has_session = mp_lis_has_session,
	.stale = mp_lis_stale,
	.stuck = mp_lis_stuck,
	.poll = mp_lis_poll,
	.drop = mp_lis_drop,
	.teardown = mp_lis_teardown,
	.ctl_send = mp_path_ctl_send_libiscsi,
	.nop = mp_path_nop_libiscsi,
	.send = mp_path_send_libiscsi,
	.abort = mp_path_abort_libiscsi,
	.lun_reset = mp_path_lun_reset_libiscsi,
	.release = mp_path_release_libiscsi,
};
