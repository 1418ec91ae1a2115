/* SPDX-License-Identifier: MIT */
/*
 * Shared by the scsi unit tests: a target device with one or two ports, ram-backed LUs and a
 * real gw_loop, and a synchronous "run this CDB" helper that checks the async rule (done never
 * inside submit, exactly once).
 */
#ifndef SCSI_TEST_H
#define SCSI_TEST_H

#include <criterion/criterion.h>
#include <string.h>

#include "bs.h"
#include "gw_log.h"
#include "gw_loop.h"
#include "scsi.h"

struct tenv {
	struct gw_loop loop;
	struct scsi_dev *dev;
	struct scsi_port *port, *port2;
	struct scsi_itn *a, *b;		/* two initiators on port 1 */
	struct gw_errlist errs;
};

struct tcmd {
	struct scsi_cmd cmd;
	int fired;
	struct iovec iov[2];
	uint8_t sense_key, asc, ascq;
};

static inline void tcmd_done(struct scsi_cmd *cmd)
{
	struct tcmd *t = gw_container_of(cmd, struct tcmd, cmd);

	t->fired++;
}

static inline int tenv_add_lu(struct tenv *e, uint64_t lun, uint64_t size, uint32_t bsz,
			      bool thin, bool ro)
{
	struct bs_conf bc = { .type = BS_TYPE_RAM, .size = size, .block_size = bsz,
			      .readonly = ro, .threads = 1 };
	struct scsi_lu_conf lc = { .lun = lun, .write_cache = true, .thin = thin };
	struct bs *bs = NULL;

	int rc;

	cr_assert_eq(bs_create(&e->loop, &bc, &bs, &e->errs), 0);
	rc = scsi_dev_add_lu(e->dev, &lc, bs, &e->errs);
	if (rc < 0)
		bs_destroy(bs);	/* on failure the caller keeps it */
	return rc;
}

static inline void tenv_init(struct tenv *e)
{
	memset(e, 0, sizeof(*e));
	gw_log_set_level(GW_LOG_WARN);
	gw_errlist_init(&e->errs);
	cr_assert_eq(gw_loop_init(&e->loop), 0);
	e->dev = scsi_dev_create(&e->loop, "iqn.2026-01.org.isergw:test");
	cr_assert_not_null(e->dev);
	e->port = scsi_dev_add_port(e->dev, "iqn.2026-01.org.isergw:test,t,0x0001", 1);
	e->port2 = scsi_dev_add_port(e->dev, "iqn.2026-01.org.isergw:test,t,0x0002", 2);
	cr_assert_not_null(e->port);
	e->a = scsi_itn_create(e->dev, e->port, "iqn.2026-01.org.test:a,i,0x23d000000001",
			       "iqn.2026-01.org.test:a");
	e->b = scsi_itn_create(e->dev, e->port, "iqn.2026-01.org.test:b,i,0x23d000000002",
			       "iqn.2026-01.org.test:b");
	cr_assert_not_null(e->a);
	cr_assert_not_null(e->b);
}

static inline void tenv_fini(struct tenv *e)
{
	scsi_dev_destroy(e->dev);
	gw_errlist_fini(&e->errs);
	gw_loop_fini(&e->loop);
}

/* Prepares (does not submit) a command. */
static inline void tcmd_prep(struct tenv *e, struct tcmd *t, struct scsi_itn *itn, uint64_t lun,
			     const uint8_t *cdb, size_t cdb_len, void *buf, uint32_t len,
			     enum scsi_dir dir)
{
	memset(t, 0, sizeof(*t));
	t->cmd.dev = e->dev;
	t->cmd.itn = itn;
	t->cmd.lun = lun;
	memcpy(t->cmd.cdb, cdb, cdb_len);
	t->cmd.cdb_len = 16;
	if (cdb_len > 16)
		t->cmd.cdb_len = (uint8_t)cdb_len;
	t->cmd.dir = dir;
	t->iov[0].iov_base = buf;
	t->iov[0].iov_len = len;
	t->cmd.iov = t->iov;
	t->cmd.iovcnt = buf ? 1 : 0;
	t->cmd.data_len = buf ? len : 0;
	t->cmd.done = tcmd_done;
}

static inline void tcmd_wait(struct tenv *e, struct tcmd *t)
{
	for (int i = 0; i < 200 && !t->fired; i++)
		gw_loop_run_once(&e->loop, 20);
	cr_assert_eq(t->fired, 1, "done fired %d times", t->fired);
	if (t->cmd.status == SCSI_CHECK_CONDITION) {
		cr_assert_geq(t->cmd.sense_len, 18);
		t->sense_key = t->cmd.sense[2] & 0x0f;
		t->asc = t->cmd.sense[12];
		t->ascq = t->cmd.sense[13];
	}
}

/* Runs one command to completion; returns its status. */
static inline int tcmd_run(struct tenv *e, struct tcmd *t, struct scsi_itn *itn, uint64_t lun,
			   const uint8_t *cdb, size_t cdb_len, void *buf, uint32_t len,
			   enum scsi_dir dir)
{
	tcmd_prep(e, t, itn, lun, cdb, cdb_len, buf, len, dir);
	scsi_cmd_submit(&t->cmd);
	cr_assert_eq(t->fired, 0, "done ran inside scsi_cmd_submit");
	tcmd_wait(e, t);
	return t->cmd.status;
}

#define CDB(...) ((const uint8_t[]){ __VA_ARGS__ }), sizeof((const uint8_t[]){ __VA_ARGS__ })

/* Clears the power-on unit attention of a nexus for a LUN. */
static inline void tenv_clear_ua(struct tenv *e, struct scsi_itn *itn, uint64_t lun)
{
	struct tcmd t;
	uint8_t s[18];

	/* REQUEST SENSE hands back one pending UA at a time, in any ALUA state. */
	for (int i = 0; i < 8; i++) {
		cr_assert_eq(tcmd_run(e, &t, itn, lun, CDB(0x03, 0, 0, 0, 18, 0), s, 18,
				      SCSI_DIR_READ), SCSI_GOOD);
		if ((s[2] & 0x0f) == SCSI_SK_NO_SENSE)
			return;
	}
	cr_assert_fail("unit attentions do not clear");
}

#define cr_assert_sense(t, k, a, q)                                                        \
	do {                                                                               \
		cr_assert_eq((t)->cmd.status, SCSI_CHECK_CONDITION, "status %#x",          \
			     (t)->cmd.status);                                             \
		cr_assert_eq((t)->sense_key, (k), "sense key %#x", (t)->sense_key);        \
		cr_assert_eq((t)->asc, (a), "asc %#x", (t)->asc);                          \
		cr_assert_eq((t)->ascq, (q), "ascq %#x", (t)->ascq);                       \
	} while (0)

static inline uint32_t be32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline uint64_t be64(const uint8_t *p)
{
	return ((uint64_t)be32(p) << 32) | be32(p + 4);
}

static inline uint16_t be16(const uint8_t *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}

#endif
