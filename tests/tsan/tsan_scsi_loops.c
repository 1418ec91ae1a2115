// SPDX-License-Identifier: MIT
/*
 * tsan_scsi_loops: SCSI commands crossing event loops (issue 13), for `make test-tsan`
 * (Criterion cannot run under ThreadSanitizer; tests/unit/scsi/test_scsi_exec.c checks the
 * same crossing one step at a time). Loop 0 is the main thread; loops S and O run on threads
 * of their own, and the LU (a ram backstore opened on O by a call into it, as ctl does) is
 * O's. At the same time:
 *   - a session on each loop keeps WINDOW writes and reads in flight over its own blocks,
 *     each read checked against what that session wrote there last (S's cross to O and back,
 *     O's run directly);
 *   - a session on each loop increments a counter block INCS times with READ + COMPARE AND
 *     WRITE, retrying on a miscompare: the final value must be 2 x INCS (no lost update);
 *   - each session registers a persistent reservation key, and PR IN must list both;
 *   - the main thread adds and removes a second LUN (on O) ROUNDS times, which republishes
 *     the LUN map every loop reads without a lock, and toggles LUN 0's ALUA hold (changed on
 *     the owner, its attention heard on both loops);
 *   - S resets LUN 0 now and then, and opens a third nexus, uses it and ends it (nexus loss,
 *     then every loop forgets it) each round.
 * Sessions retry a command that meets a unit attention, as initiators do.
 * Exit 0 when every check held; TSan's reports fail the run.
 *
 *   tsan_scsi_loops [DIR]      (DIR is ignored)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bs.h"
#include "gw_log.h"
#include "gw_loop.h"
#include "scsi.h"

#define WINDOW 16
#define IOS 4000		/* per session */
#define INCS 300		/* per session */
#define ROUNDS 50
#define BLOCKS 4096u

static struct gw_loop l0, ls, lo;
static struct gw_loops set;
static struct scsi_dev *dev;
static struct gw_errlist errs;
static unsigned long bad;	/* atomic */

static void fail(const char *what)
{
	if (__atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED) < 5)
		fprintf(stderr, "tsan_scsi_loops: %s\n", what);
}

struct io {
	struct scsi_cmd cmd;
	struct iovec iov;
	uint8_t buf[1024];
	struct sess *s;
	int slot;
	bool reading;
};

struct sess {
	struct gw_loop *loop;
	struct scsi_itn *itn;
	uint64_t first_lba;
	struct io io[WINDOW];
	uint8_t last[WINDOW];	/* the pattern written to each slot's block last */
	int issued, done;	/* done: atomic (the main thread polls it) */
	/* the counter */
	struct io ctr;
	int incs;		/* atomic */
	uint64_t seen;
};

static struct sess ss, so;

static void io_prep(struct sess *s, struct io *x, const uint8_t *cdb, uint32_t len,
		    enum scsi_dir dir, void (*done)(struct scsi_cmd *cmd))
{
	memset(&x->cmd, 0, sizeof(x->cmd));
	x->cmd.dev = dev;
	x->cmd.itn = s->itn;
	x->cmd.lun = 0;
	memcpy(x->cmd.cdb, cdb, 16);
	x->cmd.cdb_len = 16;
	x->cmd.dir = dir;
	x->iov.iov_base = x->buf;
	x->iov.iov_len = len;
	x->cmd.iov = &x->iov;
	x->cmd.iovcnt = len ? 1 : 0;
	x->cmd.data_len = len;
	x->cmd.done = done;
	x->cmd.loop = s->loop;
	x->s = s;
}

static void rw_cdb(uint8_t *cdb, uint8_t op, uint64_t lba, uint32_t n)
{
	memset(cdb, 0, 16);
	cdb[0] = op;
	for (int i = 0; i < 8; i++)
		cdb[2 + i] = (uint8_t)(lba >> (56 - 8 * i));
	cdb[13] = (uint8_t)n;
}

static void rw_issue(struct sess *s, struct io *x);

/* LUN 1 coming and going raises REPORTED LUNS DATA HAS CHANGED on every nexus. */
static bool is_ua(const struct scsi_cmd *cmd)
{
	return cmd->status == 0x02 && (cmd->sense[2] & 0x0f) == 0x06;
}

static void rw_done(struct scsi_cmd *cmd)
{
	struct io *x = (struct io *)cmd;
	struct sess *s = x->s;

	if (gw_loop_current() != s->loop)
		fail("done ran off the session's loop");
	if (is_ua(cmd)) {
		scsi_cmd_submit(cmd);	/* as an initiator does: the same command again */
		return;
	}
	if (cmd->status != 0)
		fail("an I/O failed");
	else if (x->reading)
		for (int i = 0; i < 512; i++)
			if (x->buf[i] != s->last[x->slot]) {
				fail("a read did not return what the session wrote");
				break;
			}
	__atomic_add_fetch(&s->done, 1, __ATOMIC_RELEASE);
	if (s->issued < IOS)
		rw_issue(s, x);
}

static void rw_issue(struct sess *s, struct io *x)
{
	uint8_t cdb[16];
	int n = s->issued++;

	x->reading = n % 2 == 1;	/* each slot: write, read back, write ... */
	rw_cdb(cdb, x->reading ? 0x88 : 0x8a, s->first_lba + (uint64_t)x->slot, 1);
	io_prep(s, x, cdb, 512, x->reading ? SCSI_DIR_READ : SCSI_DIR_WRITE, rw_done);
	if (!x->reading) {
		s->last[x->slot] = (uint8_t)(n * 13 + x->slot + 1);
		memset(x->buf, s->last[x->slot], 512);
	}
	scsi_cmd_submit(&x->cmd);
}

static void ctr_read(struct sess *s);

static void ctr_caw_done(struct scsi_cmd *cmd)
{
	struct io *x = (struct io *)cmd;
	struct sess *s = x->s;

	if (cmd->status == 0) {
		if (__atomic_add_fetch(&s->incs, 1, __ATOMIC_RELEASE) >= INCS)
			return;
	} else if (!is_ua(cmd) && (cmd->status != 0x02 || (cmd->sense[2] & 0x0f) != 0x0e)) {
		fail("COMPARE AND WRITE failed other than by a miscompare");
		__atomic_store_n(&s->incs, INCS, __ATOMIC_RELEASE);
		return;
	}
	ctr_read(s);
}

static void ctr_read_done(struct scsi_cmd *cmd)
{
	struct io *x = (struct io *)cmd;
	struct sess *s = x->s;
	uint8_t cdb[16], old[512];
	uint64_t v = 0;

	if (is_ua(cmd)) {
		ctr_read(s);
		return;
	}
	if (cmd->status != 0) {
		fail("the counter's read failed");
		__atomic_store_n(&s->incs, INCS, __ATOMIC_RELEASE);
		return;
	}
	memcpy(old, x->buf, 512);
	for (int i = 0; i < 8; i++)
		v = v << 8 | old[i];
	rw_cdb(cdb, 0x89, 9, 1);
	io_prep(s, x, cdb, 1024, SCSI_DIR_WRITE, ctr_caw_done);
	memcpy(x->buf, old, 512);
	memset(x->buf + 512, 0, 512);
	v++;
	for (int i = 0; i < 8; i++)
		x->buf[512 + i] = (uint8_t)(v >> (56 - 8 * i));
	scsi_cmd_submit(&x->cmd);
}

static void ctr_read(struct sess *s)
{
	uint8_t cdb[16];

	rw_cdb(cdb, 0x88, 9, 1);
	io_prep(s, &s->ctr, cdb, 512, SCSI_DIR_READ, ctr_read_done);
	scsi_cmd_submit(&s->ctr.cmd);
}

static void sess_start(void *arg)
{
	struct sess *s = arg;

	for (int i = 0; i < WINDOW; i++) {
		s->io[i].slot = i;
		rw_issue(s, &s->io[i]);
	}
	ctr_read(s);
}

/* One command, run on the session's loop, waited for by the main thread. */
static int one_fired;

static void one_done(struct scsi_cmd *cmd)
{
	(void)cmd;
	__atomic_store_n(&one_fired, 1, __ATOMIC_RELEASE);
}

static void one_submit(void *arg)
{
	scsi_cmd_submit(arg);
}

static bool wait_for(int *v, int want)
{
	for (int i = 0; i < 12000; i++) {	/* 120 s under TSan and load */
		if (__atomic_load_n(v, __ATOMIC_ACQUIRE) >= want)
			return true;
		usleep(10000);
	}
	return false;
}

static int one(struct sess *s, struct io *x, const uint8_t *cdb, uint32_t len,
	       enum scsi_dir dir)
{
	for (int i = 0; i < 8; i++) {	/* unit attentions first, as an initiator sees them */
		io_prep(s, x, cdb, len, dir, one_done);
		__atomic_store_n(&one_fired, 0, __ATOMIC_RELEASE);
		if (gw_loop_send(s->loop, one_submit, &x->cmd) < 0 || !wait_for(&one_fired, 1))
			return -1;
		if (!is_ua(&x->cmd))
			break;
	}
	return x->cmd.status;
}

struct open_arg {
	struct bs *bs;
};

static int open_on_o(void *p)
{
	struct open_arg *a = p;
	struct bs_conf bc = { .type = BS_TYPE_RAM, .size = BLOCKS * 512ull, .block_size = 512,
			      .threads = 1 };

	return bs_create(&lo, &bc, &a->bs, &errs);
}

/* S's task management and a short-lived nexus. */
static struct io churn_io;
static struct sess churn_s;
static int churn_fired;
static struct scsi_port *port;

static int churn_abort;		/* set by the main thread before the round's churn */

static void churn_done(struct scsi_cmd *cmd)
{
	struct scsi_itn *itn = cmd->itn;

	/* Aborted before the owner started it, or run; a second done would free the nexus twice. */
	if (cmd->status != 0 && cmd->status != 0x40 && !is_ua(cmd))
		fail("the churn's command failed");

	scsi_itn_nexus_loss(itn);
	scsi_itn_destroy(itn);
	__atomic_store_n(&churn_fired, 1, __ATOMIC_RELEASE);
}

static void churn_on_s(void *arg)
{
	uint8_t cdb[16] = { 0 };

	if (arg)
		scsi_lu_reset(dev, 0, NULL);
	churn_s.loop = &ls;
	churn_s.itn = scsi_itn_create(dev, port, "iqn.2026-11.org.test:c,i,0x3",
				      "iqn.2026-11.org.test:c");
	if (!churn_s.itn) {
		fail("no nexus");
		__atomic_store_n(&churn_fired, 1, __ATOMIC_RELEASE);
		return;
	}
	io_prep(&churn_s, &churn_io, cdb, 0, SCSI_DIR_NONE, churn_done);
	scsi_cmd_submit(&churn_io.cmd);
	/* The LU is O's: an abort at once finds it in the message toward O, or already there. */
	if (churn_abort && scsi_abort_cmd(&churn_io.cmd) != -EBUSY)
		fail("a crossed command's abort did not answer -EBUSY");
}

static int add_lun(uint64_t lun)
{
	struct scsi_lu_conf lc = { .lun = lun, .write_cache = true };
	struct open_arg oa = { 0 };
	int r = gw_loop_call(&lo, open_on_o, &oa);

	if (r == 0)
		r = scsi_dev_add_lu(dev, &lc, oa.bs, &errs);
	return r;
}

int main(int argc, char **argv)
{
	static struct io x;
	uint8_t cdb[16];
	uint64_t v = 0;
	int errors = 0;

	(void)argc;
	(void)argv;
	gw_log_set_level(GW_LOG_WARN);
	gw_errlist_init(&errs);
	if (gw_loop_init(&l0) || gw_loop_init(&ls) || gw_loop_init(&lo))
		return 1;
	set.n = 3;
	set.loop[0] = &l0;
	set.loop[1] = &ls;
	set.loop[2] = &lo;
	dev = scsi_dev_create(&l0, "iqn.2026-11.org.isergw:tsan");
	port = dev ? scsi_dev_add_port(dev, "iqn.2026-11.org.isergw:tsan,t,0x0001", 1) : NULL;
	/* A second group, no session's: its state changes every round, so the owners read ALUA
	 * copies loop 0 publishes and frees while they work. */
	if (!port || !scsi_dev_add_port(dev, "iqn.2026-11.org.isergw:tsan,t,0x0002", 2))
		return 1;
	scsi_dev_set_loops(dev, &set);
	ss.itn = scsi_itn_create(dev, port, "iqn.2026-11.org.test:s,i,0x1", "iqn.2026-11.org.test:s");
	so.itn = scsi_itn_create(dev, port, "iqn.2026-11.org.test:o,i,0x2", "iqn.2026-11.org.test:o");
	ss.loop = &ls;
	so.loop = &lo;
	ss.first_lba = 100;
	so.first_lba = 200;
	if (gw_loop_thread_start(&ls, -1, "tsan-s") || gw_loop_thread_start(&lo, -1, "tsan-o"))
		return 1;
	if (add_lun(0)) {
		fprintf(stderr, "tsan_scsi_loops: cannot add LUN 0\n");
		return 1;
	}
	/* The power-on and LUNs-changed unit attentions go first (one() takes them). */
	memset(cdb, 0, 16);
	if (one(&ss, &x, cdb, 0, SCSI_DIR_NONE) != 0 || one(&so, &x, cdb, 0, SCSI_DIR_NONE) != 0)
		fail("TEST UNIT READY failed");
	/* PR OUT REGISTER from both loops, before the load starts. */
	for (int k = 0; k < 2; k++) {
		struct sess *s = k ? &so : &ss;

		memset(cdb, 0, 16);
		cdb[0] = 0x5f;
		cdb[8] = 24;
		io_prep(s, &x, cdb, 24, SCSI_DIR_WRITE, one_done);
		memset(x.buf, 0, 24);
		x.buf[15] = (uint8_t)(0xa0 + k);
		__atomic_store_n(&one_fired, 0, __ATOMIC_RELEASE);
		if (gw_loop_send(s->loop, one_submit, &x.cmd) < 0 || !wait_for(&one_fired, 1) ||
		    x.cmd.status != 0)
			fail("PR OUT REGISTER failed");
	}
	if (gw_loop_send(&ls, sess_start, &ss) || gw_loop_send(&lo, sess_start, &so))
		return 1;
	/* Meanwhile the map changes under the loops' feet. */
	for (int r = 0; r < ROUNDS; r++) {
		if (add_lun(1)) {
			fail("adding LUN 1 failed");
			break;
		}
		int d;

		for (int t = 0; (d = scsi_dev_del_lu(dev, 1)) == -EBUSY && t < 1000; t++)
			usleep(1000);
		if (d) {
			fail("removing LUN 1 failed");
			break;
		}
		if (scsi_dev_set_lu_alua(dev, 0, 1, r % 2 == 0, "gw") != 0)
			fail("the ALUA change failed");
		scsi_dev_set_alua(dev, 2, r % 2 ? SCSI_ALUA_AO : SCSI_ALUA_STANDBY);
		churn_abort = r % 2;
		__atomic_store_n(&churn_fired, 0, __ATOMIC_RELEASE);
		if (gw_loop_send(&ls, churn_on_s, r % 10 == 0 ? &ls : NULL) < 0 ||
		    !wait_for(&churn_fired, 1))
			fail("the nexus churn stalled");
		gw_loop_run_once(&l0, 0);	/* loop 0's part: its forget messages */
	}
	if (!wait_for(&ss.done, IOS) || !wait_for(&so.done, IOS) || !wait_for(&ss.incs, INCS) ||
	    !wait_for(&so.incs, INCS))
		fail("the sessions stalled");
	/* Checks on S: the counter, and both keys. */
	rw_cdb(cdb, 0x88, 9, 1);
	if (one(&ss, &x, cdb, 512, SCSI_DIR_READ) != 0)
		fail("reading the counter failed");
	for (int i = 0; i < 8; i++)
		v = v << 8 | x.buf[i];
	if (v != 2 * INCS) {
		fprintf(stderr, "tsan_scsi_loops: counter %llu, not %d\n", (unsigned long long)v,
			2 * INCS);
		errors++;
	}
	memset(cdb, 0, 16);
	cdb[0] = 0x5e;
	cdb[8] = 64;
	if (one(&ss, &x, cdb, 64, SCSI_DIR_READ) != 0 || x.buf[7] != 16)
		fail("PR IN does not list both keys");
	gw_loop_thread_stop(&ls);
	gw_loop_thread_stop(&lo);
	gw_loop_run_once(&l0, 0);
	scsi_dev_destroy(dev);
	gw_loop_fini(&ls);
	gw_loop_fini(&lo);
	gw_loop_fini(&l0);
	gw_errlist_fini(&errs);
	errors += (int)__atomic_load_n(&bad, __ATOMIC_RELAXED);
	printf("tsan_scsi_loops: %d I/Os per session from two loops, counter %llu by COMPARE AND "
	       "WRITE, LUN 1 added and removed, a group's ALUA state changed and a crossed "
	       "command aborted %d times: %s\n", IOS, (unsigned long long)v, ROUNDS,
	       errors ? "FAILED" : "ok");
	return errors ? 1 : 0;
}
