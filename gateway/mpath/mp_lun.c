// SPDX-License-Identifier: MIT
/*
 * A remote LUN: its paths, the path group in use, and the queues an I/O moves through
 * (dispatch, in flight on a path, delayed retry, waiting for a path, done). Every I/O is
 * dispatched and completed from the LUN's defer, never inside a libiscsi callback or inside
 * mp_lun_submit(). One timer per LUN ticks the paths (logins, deadlines, checker, silent-path
 * probe), the retries, failback after N seconds, no_path_retry and the shutdown drain.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <iscsi/iscsi.h>

#include "gw_iov.h"
#include "gw_log.h"
#include "mp_priv.h"

#define MP_TICK_MS 100

struct mp_grave {
	struct mp_grave *next;
	struct iscsi_context *ctx;
	uint64_t at_ms;
};

/* One command's worth of a READ or WRITE larger than the LUN's max_io (or whose iovec holds
 * more than its length: libiscsi's iSER copies whole iovecs into its buffers). */
struct mp_part {
	struct mp_io io;
	struct mp_io *whole;
	struct iovec iov[];
};

static void mp_lun_defer_fn(struct gw_defer *d);
static void mp_lun_tick_fn(struct gw_timer *t);
static void mp_lun_flush_graves(struct mp_lun *lun);

static void mp_lun_kick(struct mp_lun *lun)
{
	gw_defer_queue(lun->loop, &lun->defer);
}

static void mp_lun_complete(struct mp_lun *lun, struct mp_io *io)
{
	gw_list_add_tail(&lun->doneq, &io->node);
	mp_lun_kick(lun);
}

static void mp_lun_fail_nopath(struct mp_lun *lun, struct mp_io *io)
{
	io->result = -EREMOTEIO;
	mp_io_set_sense(io, MP_NOPATH_KEY, MP_NOPATH_ASC, MP_NOPATH_ASCQ);
	lun->nopath_failed++;
	mp_lun_complete(lun, io);
}

static void mp_lun_fail_list(struct mp_lun *lun, struct gw_list *l)
{
	while (!gw_list_empty(l)) {
		struct mp_io *io = gw_list_first_entry(l, struct mp_io, node);

		gw_list_del(&io->node);
		mp_lun_fail_nopath(lun, io);
	}
}

static void mp_lun_splice(struct gw_list *to, struct gw_list *from)
{
	while (!gw_list_empty(from)) {
		struct gw_list *n = from->next;

		gw_list_del(n);
		gw_list_add_tail(to, n);
	}
}

static void mp_lun_redrive(struct mp_lun *lun, struct mp_io *io, bool path_failure)
{
	size_t cap = lun->npaths * 4 < 8 ? 8 : lun->npaths * 4;

	if (lun->destroying)
		return;
	if (path_failure) {
		io->redrives++;
		lun->failovers++;
	}
	/* An I/O that brings every path down in turn must not ping-pong forever. */
	if (io->redrives > cap) {
		gw_warn_rl(MP_LOG, "%s: an I/O failed on %u paths in turn: failing it", lun->name,
			   io->redrives);
		mp_lun_fail_nopath(lun, io);
		return;
	}
	gw_list_add_tail(&lun->dispatchq, &io->node);
	mp_lun_kick(lun);
}

static void mp_lun_retry(struct mp_lun *lun, struct mp_io *io, uint64_t at_ms)
{
	io->retry_at_ms = at_ms;
	if (at_ms <= gw_now_ms()) {
		gw_list_add_tail(&lun->dispatchq, &io->node);
		mp_lun_kick(lun);
		return;
	}
	gw_list_add_tail(&lun->retryq, &io->node);
}

static void mp_lun_set_state(struct mp_lun *lun, enum mp_lun_state st, const char *why)
{
	if (lun->state == st)
		return;
	gw_info(MP_LOG, "%s: LUN %s -> %s%s%s", lun->name, mp_lun_state_name(lun->state),
		mp_lun_state_name(st), why ? ": " : "", why ? why : "");
	lun->state = st;
	if (lun->ops && lun->ops->state_changed)
		lun->ops->state_changed(lun, st, lun->ops_arg);
}

void mp_lun_capacity(struct mp_lun *lun, uint64_t size)
{
	if (size == lun->size)
		return;
	gw_info(MP_LOG, "%s: capacity %llu -> %llu bytes", lun->name,
		(unsigned long long)lun->size, (unsigned long long)size);
	lun->size = size;
	if (lun->ops && lun->ops->capacity_changed)
		lun->ops->capacity_changed(lun, size, lun->ops_arg);
}

/* The checker read path p's capacity again (p->size): the LUN follows a usable path's. */
static void mp_lun_path_capacity(struct mp_lun *lun, struct mp_path *p)
{
	if (p->size == lun->size || !mp_path_usable(p) || lun->state == MP_LUN_BECOMING_READY)
		return;
	if (lun->conf_size) {
		gw_warn_rl(MP_LOG, "%s: path %s reports %llu bytes; the configured size %llu "
			   "stays (remove size from the configuration to follow the back end)",
			   lun->name, p->url, (unsigned long long)p->size,
			   (unsigned long long)lun->conf_size);
		return;
	}
	gw_info(MP_LOG, "%s: the back end's size changed (path %s, read %s)", lun->name, p->url,
		p->recap_why ? p->recap_why : "by the periodic check");
	mp_lun_capacity(lun, p->size);
}

void mp_lun_recheck_capacity(struct mp_lun *lun)
{
	for (size_t i = 0; i < lun->npaths; i++) {
		lun->paths[i].recap = true;
		lun->paths[i].recap_why = "on request";
		lun->paths[i].next_check_ms = 0;	/* due now */
	}
}

static int mp_lun_check_identity(struct mp_lun *lun, struct mp_path *p, char *msg, size_t len)
{
	if (lun->ident[0] && strcmp(lun->ident, p->ident) != 0) {
		snprintf(msg, len, "it reports %s, the LUN is %s%s: not the same device", p->ident,
			 lun->ident, lun->ident_pinned ? " (wwid)" : "");
		return -EMEDIUMTYPE;
	}
	if (lun->conf_size && p->size != lun->conf_size) {
		snprintf(msg, len, "it reports %llu bytes, the configured size is %llu",
			 (unsigned long long)p->size, (unsigned long long)lun->conf_size);
		return -EMEDIUMTYPE;
	}
	if (!lun->ident[0]) {
		snprintf(lun->ident, sizeof(lun->ident), "%s", p->ident);
		gw_info(MP_LOG, "%s: device identity %s (from path %s)", lun->name, lun->ident,
			p->url);
	}
	return 0;
}

static void mp_lun_check_settled(struct mp_lun *lun)
{
	bool all_spent = true;

	if (lun->settled)
		return;
	for (size_t i = 0; i < lun->npaths; i++) {
		const struct mp_path *p = &lun->paths[i];

		if (p->state == MP_PATH_ACTIVE || p->state == MP_PATH_STANDBY) {
			lun->settled = true;
			gw_info(MP_LOG, "%s: start-up: path %s logged in", lun->name, p->url);
			return;
		}
		/* A path whose last iSER connect timed out and is still stuck inside libiscsi
		 * (see mp_path_libiscsi.c) has had its chance. */
		if ((p->logins < lun->conf.initial_login_retry_max && !mp_path_stuck(p)) ||
		    p->state == MP_PATH_CONNECTING || p->state == MP_PATH_PROBING)
			all_spent = false;
	}
	if (all_spent) {
		lun->settled = true;
		gw_warn(MP_LOG, "%s: start-up: no path after %u login%s each; the LUN reports "
			"NOT READY (becoming ready) while logins go on in the background",
			lun->name, lun->conf.initial_login_retry_max,
			lun->conf.initial_login_retry_max == 1 ? "" : "s");
	}
}

/* One event line per switch of the group in use: failover (the group had nothing left) or
 * failback (a better group came back, by the failback policy). */
static void mp_lun_update_group(struct mp_lun *lun, uint64_t now)
{
	int old = lun->cur_rank;

	if (!mp_update_group(lun, now) || lun->cur_rank == INT_MAX)
		return;
	if (old == INT_MAX)
		gw_info(MP_LOG, "%s: I/O goes to path group %d", lun->name, lun->cur_rank);
	else
		gw_info(MP_LOG, "%s: %s: I/O now goes to path group %d (was %d)", lun->name,
			lun->cur_rank < old ? "failback" : "failover", lun->cur_rank, old);
}

static void mp_lun_path_changed(struct mp_lun *lun, struct mp_path *p)
{
	uint64_t now = gw_now_ms();
	bool usable;

	(void)p;
	if (lun->destroying)
		return;
	mp_lun_update_group(lun, now);
	usable = lun->cur_rank != INT_MAX;
	if (usable) {
		if (lun->state == MP_LUN_BECOMING_READY) {
			const struct mp_path *up = NULL;

			for (size_t i = 0; i < lun->npaths && !up; i++)
				if (mp_path_usable(&lun->paths[i]))
					up = &lun->paths[i];
			lun->can_unmap = up && up->lbpme;
			if (up)
				lun->caps = up->caps;
			if (up && up->size != lun->size)
				mp_lun_capacity(lun, up->size);
		}
		lun->nopath_deadline_ms = 0;
		mp_lun_set_state(lun, MP_LUN_READY, NULL);
		mp_lun_splice(&lun->dispatchq, &lun->waitq);
	} else if (lun->state == MP_LUN_READY) {
		if (lun->no_path_retry == MP_NO_PATH_RETRY_FAIL) {
			mp_lun_set_state(lun, MP_LUN_FAILING, "no path left, no_path_retry fail");
		} else if (lun->no_path_retry == MP_NO_PATH_RETRY_QUEUE) {
			mp_lun_set_state(lun, MP_LUN_QUEUEING, "no path left, queueing I/O");
		} else {
			char why[96];
			uint64_t ms = (uint64_t)lun->no_path_retry * lun->conf.polling_interval *
				      1000;

			snprintf(why, sizeof(why), "no path left, queueing I/O for %llu s",
				 (unsigned long long)(ms / 1000));
			lun->nopath_deadline_ms = now + ms;
			mp_lun_set_state(lun, MP_LUN_QUEUEING, why);
		}
	}
	mp_lun_check_settled(lun);
	mp_lun_kick(lun);
}

/* A usable path of the group in use exists, and every one is at its in-flight cap. */
static bool mp_lun_group_full(const struct mp_lun *lun)
{
	for (size_t i = 0; i < lun->npaths; i++) {
		const struct mp_path *p = &lun->paths[i];

		if (mp_path_usable(p) && mp_path_rank(lun, p) == lun->cur_rank)
			return true;
	}
	return false;
}

static void mp_lun_dispatch(struct mp_lun *lun, struct mp_io *io)
{
	if (lun->stopping || lun->state == MP_LUN_FAILING) {
		mp_lun_fail_nopath(lun, io);
		return;
	}
	/* Each failed send fails its path, so this ends within npaths rounds. */
	for (size_t tries = 0; tries <= lun->npaths; tries++) {
		struct mp_path *p = mp_select(lun, lun->cur_rank, io->len, io->last_path);
		int rc;

		if (!p)
			break;
		rc = mp_path_send(p, io);
		if (rc == 0)
			return;
		if (rc == -ENOMEM) {
			io->result = -ENOMEM;
			mp_lun_complete(lun, io);
			return;
		}
	}
	/* Paths at their cap: a completion kicks the defer, which tries again. */
	if (lun->cur_rank != INT_MAX && mp_lun_group_full(lun)) {
		gw_list_add_tail(&lun->busyq, &io->node);
		return;
	}
	gw_list_add_tail(&lun->waitq, &io->node);
}

static void mp_lun_defer_fn(struct gw_defer *d)
{
	struct mp_lun *lun = gw_container_of(d, struct mp_lun, defer);
	struct gw_list batch;

	gw_list_init(&batch);
	mp_lun_splice(&batch, &lun->busyq);
	mp_lun_splice(&batch, &lun->dispatchq);
	while (!gw_list_empty(&batch)) {
		struct mp_io *io = gw_list_first_entry(&batch, struct mp_io, node);

		gw_list_del(&io->node);
		mp_lun_dispatch(lun, io);
	}
	/* done may submit again (and queue more): take this batch first. */
	gw_list_init(&batch);
	mp_lun_splice(&batch, &lun->doneq);
	while (!gw_list_empty(&batch)) {
		struct mp_io *io = gw_list_first_entry(&batch, struct mp_io, node);

		gw_list_del(&io->node);
		free(io->buf);
		io->buf = NULL;
		lun->inflight--;
		io->done(io);
	}
}

static void mp_lun_tick_fn(struct gw_timer *t)
{
	struct mp_lun *lun = gw_container_of(t, struct mp_lun, tick);
	uint64_t now = gw_now_ms();
	struct mp_io *io, *tmp;

	for (size_t i = 0; i < lun->npaths; i++)
		mp_path_tick(&lun->paths[i], now);
	while (lun->graves && lun->graves->at_ms <= now) {
		struct mp_grave *g = lun->graves;

		lun->graves = g->next;
		iscsi_destroy_context(g->ctx);
		free(g);
	}
	gw_list_for_each_entry_safe(io, tmp, &lun->retryq, node) {
		if (io->retry_at_ms <= now) {
			gw_list_del(&io->node);
			gw_list_add_tail(&lun->dispatchq, &io->node);
		}
	}
	mp_lun_update_group(lun, now);
	if (lun->state == MP_LUN_QUEUEING && lun->nopath_deadline_ms &&
	    now >= lun->nopath_deadline_ms) {
		mp_lun_set_state(lun, MP_LUN_FAILING, "no_path_retry ran out: failing I/O");
		mp_lun_fail_list(lun, &lun->waitq);
	}
	if (lun->stopping && lun->drain_deadline_ms && now >= lun->drain_deadline_ms) {
		lun->drain_deadline_ms = 0;
		for (size_t i = 0; i < lun->npaths; i++)
			if (lun->paths[i].nr_inflight)
				mp_path_fail(&lun->paths[i], "shutdown: %u I/Os still in flight",
					     lun->paths[i].nr_inflight);
	}
	mp_lun_check_settled(lun);
	if (!gw_list_empty(&lun->dispatchq))
		mp_lun_kick(lun);
}

static void mp_lun_bury(struct mp_lun *lun, struct iscsi_context *ctx);

/* What the paths report back (mp_priv.h): registered with each path at mp_path_init. */
static const struct mp_path_owner_ops mp_lun_path_owner = {
	.changed = mp_lun_path_changed,
	.redrive = mp_lun_redrive,
	.retry = mp_lun_retry,
	.complete = mp_lun_complete,
	.check_identity = mp_lun_check_identity,
	.bury = mp_lun_bury,
	.capacity = mp_lun_path_capacity,
};

int mp_lun_create(struct gw_loop *loop, const struct mp_conf *conf, uint32_t block_size,
		  uint64_t size, const struct mp_lun_ops *ops, void *arg, struct mp_lun **out,
		  struct gw_errlist *errs)
{
	struct mp_lun *lun;
	int rc;

	*out = NULL;
	if (!conf->npaths) {
		gw_errlist_add(errs, "paths", "at least one path is required");
		return -EINVAL;
	}
	lun = calloc(1, sizeof(*lun));
	if (!lun)
		return -ENOMEM;
	lun->loop = loop;
	rc = conf_mp_copy(&lun->conf, conf);
	if (rc < 0) {
		free(lun);
		return rc;
	}
	if (conf_mp_parse_failback(lun->conf.failback, &lun->failback) < 0 ||
	    conf_mp_parse_no_path_retry(lun->conf.no_path_retry, &lun->no_path_retry) < 0) {
		gw_errlist_add(errs, "failback", "bad failback or no_path_retry value");
		conf_mp_free(&lun->conf);
		free(lun);
		return -EINVAL;
	}
	lun->block_size = block_size;
	lun->conf_size = size;
	lun->cur_rank = INT_MAX;
	lun->state = MP_LUN_BECOMING_READY;
	lun->ops = ops;
	lun->ops_arg = arg;
	lun->rng = gw_now_ns() ^ (uint64_t)(uintptr_t)lun;
	if (conf->wwid && conf->wwid[0]) {
		snprintf(lun->ident, sizeof(lun->ident), "%s", conf->wwid);
		lun->ident_pinned = true;
	}
	gw_list_init(&lun->waitq);
	gw_list_init(&lun->retryq);
	gw_list_init(&lun->dispatchq);
	gw_list_init(&lun->doneq);
	gw_list_init(&lun->busyq);
	gw_defer_init(&lun->defer, mp_lun_defer_fn);
	lun->paths = calloc(conf->npaths, sizeof(*lun->paths));
	if (!lun->paths) {
		conf_mp_free(&lun->conf);
		free(lun);
		return -ENOMEM;
	}
	for (size_t i = 0; i < conf->npaths; i++) {
		char field[32];

		snprintf(field, sizeof(field), "paths[%zu].url", i);
		rc = mp_path_init(lun, &mp_lun_path_owner, &lun->paths[i], (unsigned int)i,
				  &lun->conf.paths[i], errs, field);
		if (rc < 0)
			goto fail;
		lun->npaths++;
		if (lun->paths[i].max_xfer && (!lun->max_io || lun->paths[i].max_xfer < lun->max_io))
			lun->max_io = lun->paths[i].max_xfer;
	}
	/* Whole blocks per command. */
	if (lun->max_io && block_size)
		lun->max_io -= lun->max_io % block_size;
	snprintf(lun->name, sizeof(lun->name), "%s/%d", lun->paths[0].target,
		 lun->paths[0].lun_nr);
	rc = gw_timer_init(&lun->tick, loop, mp_lun_tick_fn);
	if (rc < 0)
		goto fail;
	/* First tick at once: every path of every LUN starts its login in parallel. */
	rc = gw_timer_arm(&lun->tick, 1, MP_TICK_MS);
	if (rc < 0) {
		gw_timer_fini(&lun->tick);
		goto fail;
	}
	gw_info(MP_LOG, "%s: remote LUN over %zu path%s, %s, %s, failback %s, no_path_retry %s",
		lun->name, lun->npaths, lun->npaths == 1 ? "" : "s",
		lun->conf.pg_policy == MP_PG_FAILOVER ? "failover" :
		lun->conf.pg_policy == MP_PG_MULTIBUS ? "multibus" : "group_by_prio",
		lun->conf.selector == MP_SEL_ROUND_ROBIN ? "round-robin" :
		lun->conf.selector == MP_SEL_QUEUE_LENGTH ? "queue-length" : "service-time",
		lun->conf.failback, lun->conf.no_path_retry);
	*out = lun;
	return 0;
fail:
	lun->destroying = true;
	for (size_t i = 0; i < lun->npaths; i++)
		mp_path_fini(&lun->paths[i]);
	free(lun->paths);
	conf_mp_free(&lun->conf);
	free(lun);
	return rc;
}

void mp_lun_destroy(struct mp_lun *lun)
{
	if (!lun)
		return;
	if (lun->inflight)
		gw_warn(MP_LOG, "%s: destroyed with %llu I/Os not completed", lun->name,
			(unsigned long long)lun->inflight);
	lun->destroying = true;
	gw_timer_fini(&lun->tick);
	gw_defer_cancel(&lun->defer);
	for (size_t i = 0; i < lun->npaths; i++)
		mp_path_fini(&lun->paths[i]);
	mp_lun_flush_graves(lun);
	free(lun->paths);
	conf_mp_free(&lun->conf);
	free(lun);
}

static void mp_lun_bury(struct mp_lun *lun, struct iscsi_context *ctx)
{
	struct mp_grave *g = calloc(1, sizeof(*g)), **pp = &lun->graves;

	if (!g) {
		/* Better a context leaked than one freed under its thread. */
		gw_warn_rl(MP_LOG, "%s: out of memory: an iSER context is leaked", lun->name);
		return;
	}
	g->ctx = ctx;
	g->at_ms = gw_now_ms() + MP_ISER_GRAVE_MS;
	while (*pp)
		pp = &(*pp)->next;
	*pp = g;
}

int mp_iov_slice(const struct iovec *iov, int cnt, uint64_t off, uint64_t len, struct iovec *out)
{
	uint64_t covered;
	int n = gw_iov_slice(iov, cnt, off, len, out, INT_MAX, &covered);

	return covered < len ? -EINVAL : n;
}

static void mp_part_done(struct mp_io *pio)
{
	struct mp_part *part = gw_container_of(pio, struct mp_part, io);
	struct mp_io *whole = part->whole;

	/* The host sees the first failure of any part (a READ's data is then not valid). */
	if (pio->result && !whole->result) {
		whole->result = pio->result;
		whole->status = pio->status;
		whole->sense_len = pio->sense_len;
		memcpy(whole->sense, pio->sense, sizeof(whole->sense));
	}
	free(part);
	if (--whole->parts_left == 0)
		mp_lun_complete(whole->lun, whole);
}

static void mp_io_reset(struct mp_lun *lun, struct mp_io *io)
{
	io->lun = lun;
	io->path = NULL;
	io->last_path = NULL;
	io->task = NULL;
	io->buf = NULL;
	io->result = 0;
	io->status = 0;
	io->sense_len = 0;
	io->retries = 0;
	io->redrives = 0;
	io->parts_left = 0;
	io->start_ms = gw_now_ms();
}

/* Every part is built before any is queued: a failure returns with nothing sent and done
 * never called, by the async rule. */
static int mp_lun_split(struct mp_lun *lun, struct mp_io *io)
{
	uint64_t step = lun->max_io && lun->max_io < io->len ? lun->max_io : io->len;
	size_t n = (size_t)((io->len + step - 1) / step);
	struct mp_part **parts = calloc(n, sizeof(*parts));

	if (!parts)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		uint64_t off = i * step, len = io->len - off < step ? io->len - off : step;
		int cnt = mp_iov_slice(io->iov, io->iovcnt, off, len, NULL);
		struct mp_part *part;

		if (cnt < 0) {
			for (size_t j = 0; j < i; j++)
				free(parts[j]);
			free(parts);
			return -EINVAL;
		}
		part = calloc(1, sizeof(*part) + (size_t)cnt * sizeof(struct iovec));
		if (!part) {
			for (size_t j = 0; j < i; j++)
				free(parts[j]);
			free(parts);
			return -ENOMEM;
		}
		mp_iov_slice(io->iov, io->iovcnt, off, len, part->iov);
		part->whole = io;
		part->io.op = io->op;
		part->io.offset = io->offset + off;
		part->io.len = len;
		part->io.iov = part->iov;
		part->io.iovcnt = cnt;
		part->io.fua = io->fua;
		part->io.done = mp_part_done;
		part->io.priv = part;
		parts[i] = part;
	}
	mp_io_reset(lun, io);
	io->parts_left = (uint32_t)n;
	lun->inflight++;
	for (size_t i = 0; i < n; i++) {
		struct mp_io *pio = &parts[i]->io;

		mp_io_reset(lun, pio);
		lun->inflight++;
		gw_list_add_tail(&lun->dispatchq, &pio->node);
	}
	free(parts);
	mp_lun_kick(lun);
	return 0;
}

static uint64_t mp_iov_bytes(const struct iovec *iov, int cnt)
{
	uint64_t n = 0;

	for (int i = 0; i < cnt; i++)
		n += iov[i].iov_len;
	return n;
}

int mp_lun_submit(struct mp_lun *lun, struct mp_io *io)
{
	if (lun->destroying)
		return -ESHUTDOWN;
	if (!io->done || (lun->block_size && (io->offset % lun->block_size ||
					      io->len % lun->block_size)))
		return -EINVAL;
	if (io->op == MP_COMPARE_AND_WRITE) {
		struct mp_lun_caps caps;

		mp_lun_caps(lun, &caps);
		if (!lun->block_size || !io->len || io->len / lun->block_size > caps.caw_blocks)
			return -EOPNOTSUPP;
	}
	if (lun->max_io && (io->op == MP_READ || io->op == MP_WRITE) && io->len &&
	    (io->len > lun->max_io || mp_iov_bytes(io->iov, io->iovcnt) != io->len))
		return mp_lun_split(lun, io);
	mp_io_reset(lun, io);
	lun->inflight++;
	gw_list_add_tail(&lun->dispatchq, &io->node);
	mp_lun_kick(lun);
	return 0;
}

void mp_lun_shutdown(struct mp_lun *lun)
{
	if (lun->stopping)
		return;
	lun->stopping = true;
	lun->drain_deadline_ms = gw_now_ms() + lun->conf.drain_timeout_ms;
	if (!lun->drain_deadline_ms)
		lun->drain_deadline_ms = 1;
	gw_info(MP_LOG, "%s: shutting down: %llu I/Os to drain within %u ms", lun->name,
		(unsigned long long)lun->inflight, lun->conf.drain_timeout_ms);
	mp_lun_fail_list(lun, &lun->waitq);
	mp_lun_fail_list(lun, &lun->retryq);
	mp_lun_kick(lun);
}

/* At destroy: the graves' delay is waited out (at most MP_ISER_GRAVE_MS, once). */
static void mp_lun_flush_graves(struct mp_lun *lun)
{
	uint64_t now = gw_now_ms(), last = 0;

	for (struct mp_grave *g = lun->graves; g; g = g->next)
		if (g->at_ms > last)
			last = g->at_ms;
	if (last > now)
		usleep((useconds_t)((last - now) * 1000));
	while (lun->graves) {
		struct mp_grave *g = lun->graves;

		lun->graves = g->next;
		iscsi_destroy_context(g->ctx);
		free(g);
	}
}

bool mp_lun_settled(const struct mp_lun *lun)
{
	return lun->settled;
}

enum mp_lun_state mp_lun_state(const struct mp_lun *lun)
{
	return lun->state;
}

uint64_t mp_lun_size(const struct mp_lun *lun)
{
	return lun->size;
}

bool mp_lun_can_unmap(const struct mp_lun *lun)
{
	return lun->can_unmap;
}

void mp_lun_caps(const struct mp_lun *lun, struct mp_lun_caps *out)
{
	*out = lun->caps;
	/* Both halves travel in one command: it must fit what a path carries (iSER). */
	if (lun->max_io && lun->block_size && out->caw_blocks &&
	    2ull * out->caw_blocks * lun->block_size > lun->max_io)
		out->caw_blocks = (uint32_t)(lun->max_io / (2ull * lun->block_size));
}

uint64_t mp_lun_inflight(const struct mp_lun *lun)
{
	return lun->inflight;
}

const char *mp_lun_name(const struct mp_lun *lun)
{
	return lun->name;
}

static size_t mp_list_len(const struct gw_list *l)
{
	size_t n = 0;

	for (const struct gw_list *e = l->next; e != l; e = e->next)
		n++;
	return n;
}

json_t *mp_lun_status(const struct mp_lun *lun)
{
	uint64_t now = gw_now_ms();
	json_t *o = json_object(), *a = json_array();

	if (!o || !a) {
		json_decref(o);
		json_decref(a);
		return NULL;
	}
	json_object_set_new(o, "name", json_string(lun->name));
	json_object_set_new(o, "state", json_string(mp_lun_state_name(lun->state)));
	json_object_set_new(o, "settled", json_boolean(lun->settled));
	json_object_set_new(o, "identity", json_string(lun->ident));
	json_object_set_new(o, "size", json_integer((json_int_t)lun->size));
	json_object_set_new(o, "block_size", json_integer(lun->block_size));
	json_object_set_new(o, "path_grouping_policy",
			    json_string(lun->conf.pg_policy == MP_PG_FAILOVER ? "failover" :
					lun->conf.pg_policy == MP_PG_MULTIBUS ? "multibus" :
					"group_by_prio"));
	json_object_set_new(o, "path_selector",
			    json_string(lun->conf.selector == MP_SEL_ROUND_ROBIN ? "round-robin" :
					lun->conf.selector == MP_SEL_QUEUE_LENGTH ? "queue-length" :
					"service-time"));
	json_object_set_new(o, "failback", json_string(lun->conf.failback));
	json_object_set_new(o, "no_path_retry", json_string(lun->conf.no_path_retry));
	json_object_set_new(o, "group_in_use", lun->cur_rank == INT_MAX ? json_null() :
			    json_integer(lun->cur_rank));
	json_object_set_new(o, "inflight", json_integer((json_int_t)lun->inflight));
	json_object_set_new(o, "queued", json_integer((json_int_t)mp_list_len(&lun->waitq)));
	json_object_set_new(o, "failovers", json_integer((json_int_t)lun->failovers));
	json_object_set_new(o, "group_switches", json_integer((json_int_t)lun->group_switches));
	json_object_set_new(o, "nopath_failed", json_integer((json_int_t)lun->nopath_failed));
	json_object_set_new(o, "unsure_failed", json_integer((json_int_t)lun->unsure_failed));
	if (lun->caps.known)
		json_object_set_new(o, "backend", json_pack(
			"{s:i, s:b, s:b, s:b, s:b, s:b}", "max_compare_and_write_blocks",
			(int)lun->caps.caw_blocks, "lbpme", lun->caps.lbpme, "vpd_b2",
			lun->caps.vpd_b2, "lbpu", lun->caps.lbpu, "lbpws", lun->caps.lbpws,
			"lbpws10", lun->caps.lbpws10));
	if (lun->state == MP_LUN_QUEUEING && lun->nopath_deadline_ms)
		json_object_set_new(o, "fail_in_ms",
				    json_integer(lun->nopath_deadline_ms > now ?
						 (json_int_t)(lun->nopath_deadline_ms - now) : 0));
	for (size_t i = 0; i < lun->npaths; i++)
		json_array_append_new(a, mp_path_status(&lun->paths[i], now));
	json_object_set_new(o, "paths", a);
	return o;
}

int mp_wait_settled(struct gw_loop *loop, struct mp_lun *const *luns, size_t n,
		    uint64_t timeout_ms)
{
	uint64_t start = gw_now_ms();

	for (;;) {
		bool all = true;

		for (size_t i = 0; i < n; i++)
			if (luns[i] && !luns[i]->settled)
				all = false;
		if (all)
			return 0;
		if (timeout_ms && gw_now_ms() - start >= timeout_ms)
			return -ETIMEDOUT;
		if (loop->stopping)
			return -EINTR;
		gw_loop_run_once(loop, MP_TICK_MS);
	}
}
