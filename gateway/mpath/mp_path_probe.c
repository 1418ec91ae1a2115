// SPDX-License-Identifier: MIT
/*
 * A path's control commands, below the engines that carry them: the identity probe once a
 * session is logged in (VPD 0x83 identity, READ CAPACITY(16), VPD B0 and B2, REPORT TARGET
 * PORT GROUPS, all within login_timeout; a path that reaches another device is refused), and
 * the checker of a logged-in path (TEST UNIT READY every polling_interval, then the ALUA
 * state of its port group). Both engines answer control commands into a libiscsi scsi_task,
 * so that one set of callbacks here reads either engine's answers.
 *
 * An engine reports its login here (mp_path_logged_in); the tick (mp_path.c) starts the
 * checker. The commands go out through p->eng->ctl_send; this file names no engine.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "gw_log.h"
#include "mp_priv.h"

static int mp_path_ctl_send(struct mp_path *p, const uint8_t *cdb, int cdb_len, int dir,
			    int xfer, iscsi_command_cb cb)
{
	struct scsi_task *task;

	task = scsi_create_task(cdb_len, (unsigned char *)(uintptr_t)cdb, dir, xfer);
	if (!task)
		return -ENOMEM;
	return p->eng->ctl_send(p, task, cdb, cdb_len, xfer, cb);
}

uint8_t mp_task_asc(const struct scsi_task *t)
{
	return (uint8_t)((unsigned int)t->sense.ascq >> 8);
}

uint8_t mp_task_ascq(const struct scsi_task *t)
{
	return (uint8_t)((unsigned int)t->sense.ascq & 0xff);
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

/* The answer to the path's control command, when it is still the one the path waits for on
 * its current connection: the path no longer waits (true). Otherwise (a late answer, or one
 * from a connection since replaced) the task is freed and nothing else happens (false). */
static bool mp_ctl_answer_current(struct mp_path *p, struct iscsi_context *iscsi,
				  struct scsi_task *task)
{
	if (p->eng->stale(p, iscsi) || task != p->ctl_task) {
		if (task && task == p->ctl_task)
			p->ctl_task = NULL;
		if (task)
			scsi_free_scsi_task(task);
		return false;
	}
	p->ctl_task = NULL;
	return true;
}

/* READ CAPACITY(16) data: the path's size, block size and LBPME. -EINVAL when too short. */
static int mp_cap16_parse(struct mp_path *p, const uint8_t *d, size_t n)
{
	uint64_t last = 0;

	if (n < 12)
		return -EINVAL;
	p->block_size = ((uint32_t)d[8] << 24) | ((uint32_t)d[9] << 16) |
			((uint32_t)d[10] << 8) | d[11];
	for (int i = 0; i < 8; i++)
		last = (last << 8) | d[i];
	p->size = (last + 1) * p->block_size;
	p->lbpme = n > 14 && (d[14] & 0x80);
	return 0;
}

static void mp_path_probe_cb(struct iscsi_context *iscsi, int status, void *data, void *priv)
{
	struct mp_path *p = priv;
	struct scsi_task *task = data;
	const uint8_t *d;
	size_t n;

	if (!mp_ctl_answer_current(p, iscsi, task))
		return;
	p->last_rx_ms = gw_now_ms();
	if (mp_status_transport(status) || !task) {
		if (task)
			scsi_free_scsi_task(task);
		mp_path_fail(p, "identity probe %s: %s", mp_status_text(status),
			     p->eng->err(p));
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
		if (mp_cap16_parse(p, d, n) < 0) {
			scsi_free_scsi_task(task);
			mp_path_fail(p, "READ CAPACITY(16): %zu bytes returned", n);
			return;
		}
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
		mp_path_fail(p, "cannot queue the identity probe: %s", p->eng->err(p));
}

void mp_path_logged_in(struct mp_path *p)
{
	p->last_rx_ms = gw_now_ms();
	p->probe = MP_PROBE_VPD83;
	p->probe_tries = 0;
	mp_path_set_state(p, MP_PATH_PROBING, "logged in");
	mp_path_unfence(p, true);
	mp_path_probe_next(p);
}

/* The checker: TEST UNIT READY, then (ALUA back ends) the port group's state, then when due
 * (p->recap, or every MP_CAP_CHECKS rounds) the capacity. */

static void mp_path_check_cb(struct iscsi_context *iscsi, int status, void *data, void *priv);

static void mp_path_cap_send(struct mp_path *p)
{
	uint8_t cdb[16] = { 0x9e, 0x10 };	/* READ CAPACITY(16), 32 bytes */

	cdb[13] = 32;
	if (mp_path_ctl_send(p, cdb, 16, SCSI_XFER_READ, 32, mp_path_check_cb) < 0) {
		mp_path_fail(p, "cannot queue the capacity check: %s", p->eng->err(p));
		return;
	}
	p->check_pending = true;
	p->check_deadline_ms = gw_now_ms() + (uint64_t)p->lun->conf.checker_timeout * 1000;
}

void mp_path_check_send(struct mp_path *p, bool rtpg)
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
		mp_path_fail(p, "cannot queue the path check: %s", p->eng->err(p));
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

	if (!mp_ctl_answer_current(p, iscsi, task))
		return;
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
			     p->eng->err(p));
		return;
	}
	if (task->cdb[0] == 0x9e) {
		/* The capacity, read again: an answer that is not GOOD is asked again next
		 * round (recap stays). */
		if (status == SCSI_STATUS_GOOD && mp_cap16_parse(p, task->datain.data,
				task->datain.size > 0 ? (size_t)task->datain.size : 0) == 0) {
			p->owner->capacity(lun, p);
			p->recap = false;
			p->recap_why = NULL;
		}
		scsi_free_scsi_task(task);
		return;
	}
	was_rtpg = task->cdb[0] == 0xa3;
	if (status == SCSI_STATUS_CHECK_CONDITION && task->sense.key == 0x6 &&
	    mp_task_asc(task) == 0x2a && mp_task_ascq(task) == 0x09) {
		/* CAPACITY DATA HAS CHANGED: read it at the round's end. */
		p->recap = true;
		p->recap_why = "after the back end's CAPACITY DATA HAS CHANGED";
	}
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
	if (!was_rtpg && p->alua && p->eng->has_session(p))
		mp_path_check_send(p, true);
	else if ((p->recap || ++p->checks % MP_CAP_CHECKS == 0) && p->eng->has_session(p))
		mp_path_cap_send(p);
}
