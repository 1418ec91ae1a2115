// SPDX-License-Identifier: MIT
/*
 * One path of a remote LUN, on top of the path's files: the LUN's calls (mp_path_init, _fini,
 * _tick, _send, _status). init parses the URL and picks the engine that carries the path's
 * session (mp_path_libiscsi.c, or mp_path_native.c for "engine": "native"), the only place
 * that names them; everything after goes through p->eng.
 *
 * The tick is the path's clock: a login when the backoff says so (TCP connect, iSCSI login,
 * then the identity probe, all within login_timeout), the deadlines of a login, of task
 * management and of the checker, a NOP-Out when a path with I/O outstanding has said nothing
 * for io_stall_ms, the abort policy for an I/O past io_timeout (mp_path_tmf.c), and the
 * checker every polling_interval (mp_path_probe.c). send builds the CDB of an I/O; the engine
 * sends it and its answer ends in mp_path_core.c, shared by both engines.
 *
 * Nothing below calls back here: the engines report to the probe, the abort policy and the
 * core, which report to the LUN through p->owner.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "gw_log.h"
#include "mp_priv.h"

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
	mp_path_core_init(p);
	/* One ISID per path for all its logins: a new login reinstates the last session. */
	p->isid_rnd = (uint32_t)(mp_rand(&lun->rng) & 0xffffff);

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
	/* The engine: libiscsi's for iSER (the native initiator is TCP only), else the LUN's. */
	p->eng = !p->iser && lun->conf.engine == MP_ENGINE_NATIVE ? &mp_engine_native :
								     &mp_engine_libiscsi;
	if (p->iser) {
		p->max_xfer = MP_ISER_MAX_XFER;
		p->max_inflight = MP_ISER_MAX_INFLIGHT;
	}
	rc = p->eng->init(p, errs, field);
	if (rc < 0) {
		iscsi_destroy_url(u);
		iscsi_destroy_context(tmp);
		mp_path_fini(p);
		return rc;
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

void mp_path_fini(struct mp_path *p)
{
	gw_defer_cancel(&p->teardown);
	if (p->eng)
		p->eng->fini(p);	/* its sessions: what was on them goes back to the LUN */
	mp_path_unfence(p, false);
	free(p->url);
	free(p->portal);
	free(p->target);
	free(p->initiator);
	gw_conf_free(conf_mp_chap_keys, &p->chap);
	p->url = p->portal = p->target = p->initiator = NULL;
}

static void mp_path_connect(struct mp_path *p, uint64_t now)
{
	struct mp_lun *lun = p->lun;

	/* What the engine still holds of the last session may have to go first. */
	if (p->eng->prepare && p->eng->prepare(p, now) < 0)
		return;
	p->logins++;
	p->addr[0] = p->redirected_to[0] = 0;
	p->deadline_ms = now + (uint64_t)lun->conf.login_timeout * 1000;
	p->alua = false;
	p->alua_state = -1;
	p->eng->connect(p);
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
		if (now >= p->deadline_ms && p->eng->resolving(p))
			mp_path_fail(p, "name lookup of %s did not finish within %u s",
				     p->eng->resolving(p), lun->conf.login_timeout);
		else if (now >= p->deadline_ms)
			mp_path_fail(p, "%s timed out after %u s",
				     p->state == MP_PATH_CONNECTING ? "connect and login" :
								      "identity probe",
				     lun->conf.login_timeout);
		else if (p->eng->poll)
			p->eng->poll(p);
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
				if (p->eng->poll)
					p->eng->poll(p);
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

bool mp_path_stuck(const struct mp_path *p)
{
	return p->eng->stuck && p->eng->stuck(p);
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
	const char *addr = p->addr, *to = p->redirected_to, *host = p->eng->resolving(p);

	if (p->eng->where)
		p->eng->where(p, &addr, &to);
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
