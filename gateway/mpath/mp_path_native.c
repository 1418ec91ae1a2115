// SPDX-License-Identifier: MIT
/*
 * The native engine under a path ("engine": "native", TCP paths only): its struct
 * mp_engine_ops (mp_priv.h) over an mp_ini connection (mp_ini.h). It connects and logs in with
 * the path's ISID, sends the probe's and checker's control commands with their answers filled
 * into a libiscsi scsi_task (so that mp_path_probe.c's callbacks read both engines' answers the
 * same way), pings with NOP-Out, sends I/O, whose answers end in mp_path_io_end as libiscsi's
 * do, and sends ABORT TASK and LUN RESET. Its state (the connection, the one being torn down,
 * the control command in flight) is struct mp_nat behind p->eng_priv.
 *
 * It reports to the files below it only: the login to mp_path_probe.c, I/O ends and failures to
 * mp_path_core.c, task management answers to mp_path_tmf.c. mp_path.c names its table.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "gw_log.h"
#include "mp_ini.h"
#include "mp_priv.h"

struct mp_ctl_native;

/* The engine's state of one path (p->eng_priv). */
struct mp_nat {
	struct mp_ini *ini;
	struct mp_ini *ini_dying;	/* to destroy from the teardown defer */
	struct mp_ctl_native *ctl_native;	/* the control command in flight */
};

static struct mp_nat *mp_nat_of(const struct mp_path *p)
{
	return p->eng_priv;
}

/* The path's connection: NULL when it has none, or once the engine's state is gone. */
static struct mp_ini *mp_nat_ini(const struct mp_path *p)
{
	const struct mp_nat *nat = p->eng_priv;

	return nat ? nat->ini : NULL;
}

static const char *mp_path_err_native(const struct mp_path *p)
{
	struct mp_ini *ini = mp_nat_ini(p);

	return ini ? mp_ini_error(ini) : "not connected";
}

/* A control command (probe, checker) on the native engine: its result goes into a libiscsi
 * scsi_task, so that one set of callbacks reads both engines' answers. */
struct mp_ctl_native {
	struct mp_path *p;
	struct mp_ini *ini;
	struct scsi_task *task;
	iscsi_command_cb cb;
	struct iovec iov;
};

/* Destroys ini, a connection the path has left, and gives back what was on it. */
static void mp_path_destroy_ini(struct mp_path *p, struct mp_ini *ini)
{
	struct mp_nat *nat = mp_nat_of(p);
	uint32_t fenced = p->nr_fenced;

	mp_ini_destroy(ini);	/* resets the connection; calls nothing back */
	mp_tmf_reqs_free(p);
	if (nat->ctl_native && nat->ctl_native->ini == ini) {
		free(nat->ctl_native);
		nat->ctl_native = NULL;
	}
	/* As libiscsi's cancelled callbacks count them. */
	if (!p->lun->destroying)
		p->failovers += p->nr_inflight;
	mp_path_give_back_all(p);
	if (p->ctl_task) {
		scsi_free_scsi_task(p->ctl_task);
		p->ctl_task = NULL;
	}
	mp_path_fence_note(p, fenced);
}

static void mp_path_ctl_native_done(void *arg, const struct mp_ini_result *r)
{
	struct mp_ctl_native *c = arg;
	struct mp_path *p = c->p;
	struct mp_nat *nat = mp_nat_of(p);
	struct scsi_task *task = c->task;
	/* Not the path's connection any more: a context pointer that is not NULL (mp_nat_stale). */
	struct iscsi_context *as = c->ini == nat->ini ? NULL : (struct iscsi_context *)(void *)c;

	int status = r->status == -ECANCELED ? SCSI_STATUS_CANCELLED : r->status;

	if (nat->ctl_native == c)
		nat->ctl_native = NULL;
	task->status = status;
	task->datain.data = c->iov.iov_base;
	task->datain.size = (int)(r->data_len < c->iov.iov_len ? r->data_len : c->iov.iov_len);
	if (r->sense_len >= 14 && (r->sense[0] & 0x7e) == 0x70) {
		task->sense.key = (enum scsi_sense_key)(r->sense[2] & 0xf);
		task->sense.ascq = r->sense[12] << 8 | r->sense[13];
	} else if (r->sense_len >= 4 && (r->sense[0] & 0x7e) == 0x72) {
		task->sense.key = (enum scsi_sense_key)(r->sense[1] & 0xf);
		task->sense.ascq = r->sense[2] << 8 | r->sense[3];
	}
	c->cb(as, status, task, p);
	free(c);
}

static int mp_path_ctl_send_native(struct mp_path *p, struct scsi_task *task, const uint8_t *cdb,
				   int cdb_len, int xfer, iscsi_command_cb cb)
{
	struct mp_nat *nat = mp_nat_of(p);
	struct mp_ctl_native *c = calloc(1, sizeof(*c));

	/* The buffer is the task's datain from the start: scsi_free_scsi_task frees it, answered
	 * or not (scsi_malloc's memory is not a block of its own). */
	if (!c || (xfer && !(c->iov.iov_base = malloc((size_t)xfer)))) {
		free(c);
		scsi_free_scsi_task(task);
		return -ENOMEM;
	}
	task->datain.data = c->iov.iov_base;
	task->datain.size = 0;
	c->p = p;
	c->ini = nat->ini;
	c->task = task;
	c->cb = cb;
	c->iov.iov_len = (size_t)xfer;
	if (mp_ini_command(nat->ini, p->lun_nr, cdb, cdb_len, xfer ? MP_INI_READ : MP_INI_NONE,
			   &c->iov, 1, (uint32_t)xfer, mp_path_ctl_native_done, c) < 0) {
		free(c);
		scsi_free_scsi_task(task);
		return -EIO;
	}
	p->ctl_task = task;
	nat->ctl_native = c;
	return 0;
}

static void mp_path_ini_event(struct mp_ini *ini, int err, void *arg)
{
	struct mp_path *p = arg;

	if (ini != mp_nat_ini(p))
		return;
	if (err < 0) {
		if (p->state == MP_PATH_CONNECTING)
			mp_path_fail(p, "login to %s failed: %s", p->target, mp_ini_error(ini));
		else
			mp_path_fail(p, "connection error: %s", mp_ini_error(ini));
		return;
	}
	mp_path_logged_in(p);
}

static void mp_path_connect_native(struct mp_path *p)
{
	struct mp_nat *nat = mp_nat_of(p);
	struct mp_ini_conf c = {
		.portal = p->portal,
		.target = p->target,
		.initiator = p->initiator,
		.chap_user = p->chap.user,
		.chap_secret = p->chap.secret,
		.mutual_user = p->chap.mutual_user,
		.mutual_secret = p->chap.mutual_secret,
		.header_digest = false,		/* as libiscsi's NONE_CRC32C: None first */
	};
	uint8_t isid[6] = { 0x80, (uint8_t)(p->isid_rnd >> 16), (uint8_t)(p->isid_rnd >> 8),
			    (uint8_t)p->isid_rnd, (uint8_t)(p->idx >> 8), (uint8_t)p->idx };
	int rc;

	c.isid = isid;
	mp_path_set_state(p, MP_PATH_CONNECTING, NULL);
	rc = mp_ini_create(p->lun->loop, &c, mp_path_ini_event, p, &nat->ini);
	if (rc < 0) {
		nat->ini = NULL;
		mp_path_fail(p, "connect to %s: %s", p->portal,
			     rc == -EAGAIN ? "name lookup: too many lookups pending (the DNS server "
					     "is not answering?)" : strerror(-rc));
	}
}

static void mp_path_nop_native_cb(void *arg, const struct mp_ini_result *r)
{
	struct mp_path *p = arg;

	p->nop_pending = false;
	if (r->status == 0)
		p->last_rx_ms = gw_now_ms();
}

static int mp_path_nop_native(struct mp_path *p)
{
	return mp_ini_nop(mp_nat_ini(p), mp_path_nop_native_cb, p);
}

static void mp_path_ini_io_cb(void *arg, const struct mp_ini_result *r)
{
	struct mp_io *io = arg;
	uint8_t key = 0, asc = 0, ascq = 0;
	size_t raw_len = 0;

	if (r->status == SCSI_STATUS_CHECK_CONDITION && r->sense) {
		if (r->sense_len >= 14 && (r->sense[0] & 0x7e) == 0x70) {
			key = r->sense[2] & 0xf;
			asc = r->sense[12];
			ascq = r->sense[13];
		} else if (r->sense_len >= 4 && (r->sense[0] & 0x7e) == 0x72) {
			key = r->sense[1] & 0xf;
			asc = r->sense[2];
			ascq = r->sense[3];
		}
		if (io->op == MP_COMPARE_AND_WRITE && r->sense_len > 8)
			raw_len = r->sense_len < MP_SENSE_MAX ? r->sense_len : MP_SENSE_MAX;
	}
	/* -ECANCELED: an ABORT TASK or LUN RESET of ours took it, as libiscsi's CANCELLED. */
	mp_path_io_end(io, io->conn != mp_nat_ini(io->path),
		       r->status == -ECANCELED ? SCSI_STATUS_CANCELLED : r->status, key, asc, ascq,
		       r->sense, raw_len, "");
}

static int mp_path_send_native(struct mp_path *p, struct mp_io *io, const uint8_t *cdb,
			       int cdb_len, int dir, uint32_t xfer, const struct iscsi_data *dp)
{
	const struct iovec *iov = io->iov;
	int iovcnt = io->iovcnt, rc;

	if (dp) {
		io->buf_iov.iov_base = dp->data;
		io->buf_iov.iov_len = dp->size;
		iov = &io->buf_iov;
		iovcnt = 1;
	}
	io->task = NULL;
	io->conn = mp_nat_ini(p);
	mp_path_inflight_add(p, io);
	rc = mp_ini_command(mp_nat_ini(p), p->lun_nr, cdb, cdb_len,
			    dir == SCSI_XFER_READ ? MP_INI_READ :
			    dir == SCSI_XFER_WRITE ? MP_INI_WRITE : MP_INI_NONE,
			    xfer ? iov : NULL, xfer ? iovcnt : 0, xfer, mp_path_ini_io_cb, io);
	if (rc < 0) {
		mp_path_inflight_undo(p, io);
		io->conn = NULL;
		mp_path_fail(p, "cannot queue a command: %s", strerror(-rc));
		return -EIO;
	}
	p->ios++;
	return 0;
}

/* Task management: ABORT TASK and LUN RESET on the connection (the policy is mp_path_tmf.c) */

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
	rc = mp_ini_tmf(mp_nat_of(p)->ini, fn, p->lun_nr, io, mp_path_tmf_cb_native, r);
	if (rc < 0)
		mp_tmf_req_take(r, &q);
	return rc;
}

static int mp_path_abort_native(struct mp_path *p, struct mp_io *io)
{
	return mp_path_tmf_native(p, MP_INI_ABORT_TASK, io);
}

static int mp_path_lun_reset_native(struct mp_path *p)
{
	return mp_path_tmf_native(p, MP_INI_LUN_RESET, NULL);
}

static void mp_path_release_native(struct mp_path *p)
{
	(void)p;	/* mp_ini ended what the target's "function complete" took */
}

/* The engine's own state, and its end */

static int mp_nat_init(struct mp_path *p, struct gw_errlist *errs, const char *field)
{
	(void)errs;
	(void)field;
	p->eng_priv = calloc(1, sizeof(struct mp_nat));
	return p->eng_priv ? 0 : -ENOMEM;
}

static void mp_nat_fini(struct mp_path *p)
{
	struct mp_nat *nat = mp_nat_of(p);

	if (!nat)
		return;
	if (nat->ini_dying) {
		mp_path_destroy_ini(p, nat->ini_dying);
		nat->ini_dying = NULL;
	}
	if (nat->ini) {
		struct mp_ini *ini = nat->ini;

		nat->ini = NULL;
		mp_path_destroy_ini(p, ini);
	}
	p->eng_priv = NULL;
	free(nat);
}

/* The session is over: where it went is kept for the path's state (p->addr,
 * p->redirected_to), and the connection goes to the teardown. */
static void mp_nat_drop(struct mp_path *p)
{
	struct mp_nat *nat = mp_nat_of(p);
	const char *to;

	if (!nat->ini)
		return;
	snprintf(p->addr, sizeof(p->addr), "%s", mp_ini_address(nat->ini));
	to = mp_ini_redirected_to(nat->ini);
	snprintf(p->redirected_to, sizeof(p->redirected_to), "%s", to ? to : "");
	nat->ini_dying = nat->ini;
	nat->ini = NULL;
}

static void mp_nat_teardown(struct mp_path *p)
{
	struct mp_nat *nat = mp_nat_of(p);

	if (nat->ini_dying) {
		struct mp_ini *ini = nat->ini_dying;

		nat->ini_dying = NULL;
		mp_path_destroy_ini(p, ini);
	}
}

static const char *mp_nat_resolving(const struct mp_path *p)
{
	struct mp_ini *ini = mp_nat_ini(p);

	return ini ? mp_ini_resolving(ini) : NULL;
}

static void mp_nat_where(const struct mp_path *p, const char **addr, const char **redirected_to)
{
	struct mp_ini *ini = mp_nat_ini(p);

	if (!ini)
		return;
	*addr = mp_ini_address(ini);
	*redirected_to = mp_ini_redirected_to(ini);
}

static bool mp_nat_has_session(const struct mp_path *p)
{
	return mp_nat_ini(p) != NULL;
}

/* mp_path_ctl_native_done passes NULL for the path's connection. */
static bool mp_nat_stale(const struct mp_path *p, const struct iscsi_context *iscsi)
{
	(void)p;
	return iscsi != NULL;
}

const struct mp_engine_ops mp_engine_native = {
	.name = "native",
	.init = mp_nat_init,
	.fini = mp_nat_fini,
	.err = mp_path_err_native,
	.connect = mp_path_connect_native,
	.resolving = mp_nat_resolving,
	.where = mp_nat_where,
	.has_session = mp_nat_has_session,
	.stale = mp_nat_stale,
	.drop = mp_nat_drop,
	.teardown = mp_nat_teardown,
	.ctl_send = mp_path_ctl_send_native,
	.nop = mp_path_nop_native,
	.send = mp_path_send_native,
	.abort = mp_path_abort_native,
	.lun_reset = mp_path_lun_reset_native,
	.release = mp_path_release_native,
};
