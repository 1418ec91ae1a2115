// SPDX-License-Identifier: MIT
/*
 * A command's run and completion (scsi_exec.c) across event loops, and at the end the task set
 * on one loop (suite scsi_task_set). Across loops: the device's loop (loop 0, the test's
 * thread) and two loops on threads of their own, S and O. The LU's backstore is
 * opened on O, so O owns the LU; commands submitted on S cross to O and their done comes back
 * on S, while commands submitted on O run there directly. Every check is about what an
 * initiator would see: the data it wrote read back, one COMPARE AND WRITE winner per value,
 * both loops' registrations in PERSISTENT RESERVE IN.
 */
#include <errno.h>
#include <unistd.h>

#include "scsi_test.h"

#include "scsi_priv.h"

static struct tenv e;
static struct gw_loop ls, lo;		/* the session's loop and the LU's owner */
static struct gw_loops set;

#define BLOCKS 2048u			/* 1 MiB of 512-byte blocks */

struct xcmd {
	struct tcmd t;
	uint8_t buf[1024];
	int wrong_loop;			/* done ran on another loop than cmd->loop */
	int fired;			/* atomic */
	void (*next)(struct xcmd *x);	/* runs on cmd->loop after done */
	void *arg;
	uint64_t lun;
};

static void xcmd_done(struct scsi_cmd *cmd)
{
	struct xcmd *x = gw_container_of(cmd, struct xcmd, t.cmd);

	if (gw_loop_current() != cmd->loop)
		x->wrong_loop++;
	__atomic_add_fetch(&x->fired, 1, __ATOMIC_RELEASE);
	if (x->next)
		x->next(x);
}

static void xcmd_submit_fn(void *arg)
{
	struct xcmd *x = arg;

	scsi_cmd_submit(&x->t.cmd);
}

static void xcmd_prep(struct xcmd *x, struct gw_loop *loop, struct scsi_itn *itn,
		      const uint8_t *cdb, size_t cdb_len, uint32_t len, enum scsi_dir dir)
{
	void (*next)(struct xcmd *x) = x->next;
	void *arg = x->arg;

	tcmd_prep(&e, &x->t, itn, x->lun, cdb, cdb_len, len ? x->buf : NULL, len, dir);
	x->t.cmd.loop = loop;
	x->t.cmd.done = xcmd_done;
	x->next = next;
	x->arg = arg;
}

/* Submits on the command's loop (a message to that loop's thread). */
static void xcmd_post(struct xcmd *x)
{
	cr_assert_eq(gw_loop_send(x->t.cmd.loop, xcmd_submit_fn, x), 0);
}

static bool wait_until(int *counter, int want)
{
	for (int i = 0; i < 3000; i++) {	/* 30 s: a sanity bound under heavy load */
		if (__atomic_load_n(counter, __ATOMIC_ACQUIRE) >= want)
			return true;
		usleep(10000);
	}
	return false;
}

/* Runs one command on loop and waits for its done. */
static int xrun(struct xcmd *x, struct gw_loop *loop, struct scsi_itn *itn, const uint8_t *cdb,
		size_t cdb_len, uint32_t len, enum scsi_dir dir)
{
	x->next = NULL;
	xcmd_prep(x, loop, itn, cdb, cdb_len, len, dir);
	x->fired = 0;
	xcmd_post(x);
	cr_assert(wait_until(&x->fired, 1), "no done");
	cr_assert_eq(__atomic_load_n(&x->fired, __ATOMIC_ACQUIRE), 1);
	cr_assert_eq(x->wrong_loop, 0, "done ran off the command's loop");
	return x->t.cmd.status;
}

struct open_arg {
	struct gw_loop *loop;
	struct bs *bs;
};

static int open_on_owner(void *p)
{
	struct open_arg *a = p;
	struct bs_conf bc = { .type = BS_TYPE_RAM, .size = BLOCKS * 512ull, .block_size = 512,
			      .threads = 1 };

	return bs_create(a->loop, &bc, &a->bs, &e.errs);
}

static void clear_ua(struct gw_loop *loop, struct scsi_itn *itn)
{
	static struct xcmd x;

	for (int i = 0; i < 8; i++) {
		cr_assert_eq(xrun(&x, loop, itn, CDB(0x03, 0, 0, 0, 18, 0), 18, SCSI_DIR_READ),
			     SCSI_GOOD);
		if ((x.buf[2] & 0x0f) == SCSI_SK_NO_SENSE)
			return;
	}
	cr_assert_fail("unit attentions do not clear");
}

static void setup(void)
{
	struct scsi_lu_conf lc = { .lun = 0, .write_cache = true };
	struct open_arg oa = { .loop = &lo };

	tenv_init(&e);
	cr_assert_eq(gw_loop_init(&ls), 0);
	cr_assert_eq(gw_loop_init(&lo), 0);
	set.n = 3;
	set.loop[0] = &e.loop;
	set.loop[1] = &ls;
	set.loop[2] = &lo;
	scsi_dev_set_loops(e.dev, &set);
	cr_assert_eq(gw_loop_thread_start(&ls, -1, "test-s"), 0);
	cr_assert_eq(gw_loop_thread_start(&lo, -1, "test-o"), 0);
	/* ctl's way: open the backstore on the owner, then add the LU on loop 0. */
	cr_assert_eq(gw_loop_call(&lo, open_on_owner, &oa), 0);
	cr_assert_eq(scsi_dev_add_lu(e.dev, &lc, oa.bs, &e.errs), 0);
	cr_assert_eq(scsi_dev_lu_loop(e.dev, 0), &lo, "the LU is owned by its backstore's loop");
	clear_ua(&ls, e.a);
	clear_ua(&lo, e.b);
}

static void teardown(void)
{
	gw_loop_thread_stop(&ls);
	gw_loop_thread_stop(&lo);
	gw_loop_run_once(&e.loop, 0);	/* what the loops posted to loop 0 (a nexus's forget) */
	tenv_fini(&e);
	gw_loop_fini(&ls);
	gw_loop_fini(&lo);
}

TestSuite(scsi_exec, .init = setup, .fini = teardown);

Test(scsi_exec, the_next_lu_goes_to_the_loop_owning_fewest)
{
	/* Loop 0 and S own none, O owns one: S, the last of the least loaded (loop 0 has the
	 * control work). */
	cr_assert_eq(scsi_dev_pick_lu_loop(e.dev), 1);
}

static void put_lba(uint8_t *cdb, uint64_t lba)
{
	for (int i = 0; i < 8; i++)
		cdb[2 + i] = (uint8_t)(lba >> (56 - 8 * i));
}

Test(scsi_exec, a_write_crosses_to_the_owner_and_reads_back_from_both_loops)
{
	static struct xcmd w, r;
	uint8_t wcdb[16] = { 0x8a, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 2, 0, 0 };
	uint8_t rcdb[16] = { 0x88, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 2, 0, 0 };

	for (int i = 0; i < 1024; i++)
		w.buf[i] = (uint8_t)(i * 7 + 3);
	cr_assert_eq(xrun(&w, &ls, e.a, wcdb, 16, 1024, SCSI_DIR_WRITE), SCSI_GOOD);
	cr_assert_eq(xrun(&r, &lo, e.b, rcdb, 16, 1024, SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_arr_eq(r.buf, w.buf, 1024, "the owner reads what the session's loop wrote");
	memset(r.buf, 0, sizeof(r.buf));
	cr_assert_eq(xrun(&r, &ls, e.a, rcdb, 16, 1024, SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(r.t.cmd.xfer_len, 1024);
	cr_assert_arr_eq(r.buf, w.buf, 1024, "a crossed read brings the data back");
}

Test(scsi_exec, a_crossed_command_is_aborted_as_a_running_one)
{
	static struct xcmd w;
	uint8_t wcdb[16] = { 0x8a, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0 };

	xcmd_prep(&w, &ls, e.a, wcdb, 16, 512, SCSI_DIR_WRITE);
	w.t.cmd.lu = scsi_dev_find_lu(e.dev, 0);	/* as submit leaves it */
	cr_assert_eq(scsi_abort_cmd(&w.t.cmd), -EBUSY, "S never reads the owner's task set");
}

/* Many writers on both loops at once, each to its own blocks, then every block read back. */
#define NW 64

Test(scsi_exec, writers_on_two_loops_at_once_all_land)
{
	static struct xcmd w[NW], r;
	int all = 0;

	for (int i = 0; i < NW; i++) {
		uint8_t cdb[16] = { 0x8a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0 };

		put_lba(cdb, 100 + (uint64_t)i);
		memset(w[i].buf, 0x40 + i, 512);
		xcmd_prep(&w[i], i & 1 ? &lo : &ls, i & 1 ? e.b : e.a, cdb, 16, 512,
			  SCSI_DIR_WRITE);
		w[i].fired = 0;
	}
	for (int i = 0; i < NW; i++)
		xcmd_post(&w[i]);
	for (int i = 0; i < NW; i++) {
		cr_assert(wait_until(&w[i].fired, 1));
		cr_assert_eq(w[i].t.cmd.status, SCSI_GOOD);
		cr_assert_eq(w[i].wrong_loop, 0);
		all += w[i].fired;
	}
	cr_assert_eq(all, NW, "each done exactly once");
	for (int i = 0; i < NW; i++) {
		uint8_t cdb[16] = { 0x88, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0 };
		uint8_t want[512];

		put_lba(cdb, 100 + (uint64_t)i);
		memset(want, 0x40 + i, 512);
		cr_assert_eq(xrun(&r, i & 2 ? &lo : &ls, e.a, cdb, 16, 512, SCSI_DIR_READ),
			     SCSI_GOOD);
		cr_assert_arr_eq(r.buf, want, 512, "block %d", 100 + i);
	}
}

/*
 * COMPARE AND WRITE as an atomic counter: a session on each loop reads block 9, then tries to
 * replace what it read with the value plus one, and reads again on a miscompare. Both run at
 * once; with the range lock on the owner, no increment is lost.
 */
#define INCS 100

struct counter {
	struct xcmd x;
	int done_incs;			/* atomic */
	int miscompares;
	int errors;
	struct scsi_itn *itn;
};

static uint64_t block_value(const uint8_t *b)
{
	return be64(b);
}

static void counter_read(struct counter *c);

static void counter_after_caw(struct xcmd *x)
{
	struct counter *c = x->arg;

	if (x->t.cmd.status == SCSI_GOOD) {
		if (__atomic_add_fetch(&c->done_incs, 1, __ATOMIC_RELEASE) >= INCS)
			return;
	} else if (x->t.cmd.status == SCSI_CHECK_CONDITION &&
		   (x->t.cmd.sense[2] & 0x0f) == SCSI_SK_MISCOMPARE) {
		c->miscompares++;
	} else {
		c->errors++;
		__atomic_store_n(&c->done_incs, INCS, __ATOMIC_RELEASE);
		return;
	}
	counter_read(c);
}

static void counter_after_read(struct xcmd *x)
{
	struct counter *c = x->arg;
	uint8_t cdb[16] = { 0x89, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 1, 0, 0 };
	uint8_t old[512];
	uint64_t v;

	if (x->t.cmd.status != SCSI_GOOD) {
		c->errors++;
		__atomic_store_n(&c->done_incs, INCS, __ATOMIC_RELEASE);
		return;
	}
	memcpy(old, x->buf, 512);
	v = block_value(old) + 1;
	x->next = counter_after_caw;
	xcmd_prep(x, x->t.cmd.loop, c->itn, cdb, 16, 1024, SCSI_DIR_WRITE);
	memcpy(x->buf, old, 512);
	memset(x->buf + 512, 0, 512);
	for (int i = 0; i < 8; i++)
		x->buf[512 + i] = (uint8_t)(v >> (56 - 8 * i));
	scsi_cmd_submit(&x->t.cmd);	/* we are on the command's loop */
}

static void counter_read(struct counter *c)
{
	uint8_t cdb[16] = { 0x88, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 1, 0, 0 };

	c->x.next = counter_after_read;
	xcmd_prep(&c->x, c->x.t.cmd.loop, c->itn, cdb, 16, 512, SCSI_DIR_READ);
	scsi_cmd_submit(&c->x.t.cmd);
}

static void counter_start(void *arg)
{
	counter_read(arg);
}

Test(scsi_exec, compare_and_write_from_two_loops_loses_no_increment)
{
	static struct counter cs, co;
	static struct xcmd r;
	uint8_t rcdb[16] = { 0x88, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 1, 0, 0 };

	cs.itn = e.a;
	cs.x.arg = &cs;
	cs.x.t.cmd.loop = &ls;
	co.itn = e.b;
	co.x.arg = &co;
	co.x.t.cmd.loop = &lo;
	cr_assert_eq(gw_loop_send(&ls, counter_start, &cs), 0);
	cr_assert_eq(gw_loop_send(&lo, counter_start, &co), 0);
	cr_assert(wait_until(&cs.done_incs, INCS), "S's counter stalled");
	cr_assert(wait_until(&co.done_incs, INCS), "O's counter stalled");
	cr_assert_eq(cs.errors + co.errors, 0);	/* written before the count's release */
	cr_assert_eq(xrun(&r, &ls, e.a, rcdb, 16, 512, SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(block_value(r.buf), 2 * INCS, "counter %llu after %d increments each",
		     (unsigned long long)block_value(r.buf), INCS);
}

/* Registrations made through both loops at once are both there. */
Test(scsi_exec, reservations_registered_from_two_loops_are_both_kept)
{
	static struct xcmd ra, rb, in;
	uint8_t cdb[10] = { 0x5f, 0x00, 0, 0, 0, 0, 0, 0, 24, 0 };

	xcmd_prep(&ra, &ls, e.a, cdb, 10, 24, SCSI_DIR_WRITE);
	xcmd_prep(&rb, &lo, e.b, cdb, 10, 24, SCSI_DIR_WRITE);
	memset(ra.buf, 0, 24);
	memset(rb.buf, 0, 24);
	ra.buf[15] = 0xaa;		/* service action reservation key */
	rb.buf[15] = 0xbb;
	ra.fired = rb.fired = 0;
	xcmd_post(&ra);
	xcmd_post(&rb);
	cr_assert(wait_until(&ra.fired, 1) && wait_until(&rb.fired, 1));
	cr_assert_eq(ra.t.cmd.status, SCSI_GOOD);
	cr_assert_eq(rb.t.cmd.status, SCSI_GOOD);
	cr_assert_eq(xrun(&in, &ls, e.a, CDB(0x5e, 0x00, 0, 0, 0, 0, 0, 0, 64, 0), 64,
			  SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(be32(in.buf), 2, "generation %u", be32(in.buf));
	cr_assert_eq(be32(in.buf + 4), 16, "two keys");
	cr_assert(be64(in.buf + 8) + be64(in.buf + 16) == 0xaa + 0xbb);
}

static uint32_t report_luns(struct gw_loop *loop, uint64_t *luns, uint32_t max)
{
	static struct xcmd x;
	uint32_t n;

	cr_assert_eq(xrun(&x, loop, e.a, CDB(0xa0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0), 256,
			  SCSI_DIR_READ), SCSI_GOOD);
	n = be32(x.buf) / 8;
	for (uint32_t i = 0; i < n && i < max; i++)
		luns[i] = be64(x.buf + 8 + 8 * i) >> 48;
	return n;
}

/* ctl's way of adding and removing a LUN owned by another loop, seen by a third. */
Test(scsi_exec, a_lun_added_and_removed_on_its_owner_is_seen_by_every_loop)
{
	struct scsi_lu_conf lc = { .lun = 1, .write_cache = true };
	struct open_arg oa = { .loop = scsi_dev_next_lu_loop(e.dev) };
	static struct xcmd x;
	uint64_t luns[4];

	cr_assert_eq(oa.loop, &ls, "S is the last of the loops owning fewest LUs");
	oa.loop = &lo;
	cr_assert_eq(gw_loop_call(&lo, open_on_owner, &oa), 0);
	cr_assert_eq(scsi_dev_add_lu(e.dev, &lc, oa.bs, &e.errs), 0);
	cr_assert_eq(report_luns(&ls, luns, 4), 2);
	cr_assert_eq(luns[0], 0);
	cr_assert_eq(luns[1], 1);
	x.lun = 1;
	cr_assert_eq(xrun(&x, &ls, e.a, CDB(0x00, 0, 0, 0, 0, 0), 0, SCSI_DIR_NONE),
		     SCSI_CHECK_CONDITION, "the new LU's first answer is its power-on attention");
	cr_assert_eq(scsi_dev_del_lu(e.dev, 1), 0);
	cr_assert_eq(scsi_dev_lu_loop(e.dev, 1), NULL);
	cr_assert_eq(report_luns(&ls, luns, 4), 1);
	cr_assert_eq(luns[0], 0);
	cr_assert_eq(xrun(&x, &lo, e.b, CDB(0x00, 0, 0, 0, 0, 0), 0, SCSI_DIR_NONE),
		     SCSI_CHECK_CONDITION);
	cr_assert_eq(x.t.cmd.sense[12], 0x25, "LOGICAL UNIT NOT SUPPORTED, asc %#x",
		     x.t.cmd.sense[12]);
	cr_assert_eq(scsi_dev_del_lu(e.dev, 1), -ENOENT);
}

/* Task management from the session's loop, for an LU another loop owns. */
static int tm_ran;

static void lu_reset_on_s(void *arg)
{
	(void)arg;
	scsi_lu_reset(e.dev, 0, NULL);
	__atomic_store_n(&tm_ran, 1, __ATOMIC_RELEASE);
}

Test(scsi_exec, a_lun_reset_from_another_loop_reaches_every_nexus)
{
	static struct xcmd x;

	cr_assert_eq(gw_loop_send(&ls, lu_reset_on_s, NULL), 0);
	cr_assert(wait_until(&tm_ran, 1));
	/* The asker's next command is behind the reset at the owner; so is one posted after. */
	cr_assert_eq(xrun(&x, &ls, e.a, CDB(0x00, 0, 0, 0, 0, 0), 0, SCSI_DIR_NONE),
		     SCSI_CHECK_CONDITION);
	cr_assert_eq(x.t.cmd.sense[12], 0x29, "asc %#x", x.t.cmd.sense[12]);
	cr_assert_eq(x.t.cmd.sense[13], 0x03, "BUS DEVICE RESET FUNCTION OCCURRED");
	cr_assert_eq(xrun(&x, &lo, e.b, CDB(0x00, 0, 0, 0, 0, 0), 0, SCSI_DIR_NONE),
		     SCSI_CHECK_CONDITION);
	cr_assert_eq(x.t.cmd.sense[12], 0x29);
	cr_assert_eq(xrun(&x, &lo, e.b, CDB(0x00, 0, 0, 0, 0, 0), 0, SCSI_DIR_NONE), SCSI_GOOD);
}

static struct scsi_itn *gone;

static void session_end_on_s(void *arg)
{
	(void)arg;
	scsi_itn_nexus_loss(gone);
	scsi_itn_destroy(gone);
	__atomic_store_n(&tm_ran, 1, __ATOMIC_RELEASE);
}

static int count_itls(void *arg)
{
	struct scsi_lu *lu = scsi_dev_find_lu(e.dev, 0);
	struct scsi_itl *itl;
	int n = 0;

	(void)arg;
	gw_list_for_each_entry(itl, &lu->itls, lu_node)
		n++;
	return n;
}

Test(scsi_exec, a_nexus_ended_on_its_loop_is_forgotten_by_the_owner)
{
	static struct xcmd x;
	int before;

	gone = scsi_itn_create(e.dev, e.port, "iqn.2026-01.org.test:c,i,0x23d000000003",
			       "iqn.2026-01.org.test:c");
	cr_assert_not_null(gone);
	cr_assert_eq(xrun(&x, &ls, gone, CDB(0x00, 0, 0, 0, 0, 0), 0, SCSI_DIR_NONE),
		     SCSI_CHECK_CONDITION, "its power-on attention, kept on the owner");
	before = gw_loop_call(&lo, count_itls, NULL);
	cr_assert_eq(before, 3, "a, b and c have talked to LUN 0");
	cr_assert_eq(gw_loop_send(&ls, session_end_on_s, NULL), 0);
	cr_assert(wait_until(&tm_ran, 1));
	/* The forget message went from S to O before S set the flag; this call comes after. */
	cr_assert_eq(gw_loop_call(&lo, count_itls, NULL), 2, "the owner forgot the nexus");
	cr_assert_eq(xrun(&x, &ls, e.a, CDB(0x00, 0, 0, 0, 0, 0), 0, SCSI_DIR_NONE), SCSI_GOOD,
		     "the other nexuses are untouched");
}

/* Loop 0 (apply, the cluster) moves the LU's active/optimized group: the owner changes it and
 * raises the attention, which a session on the other loop hears. */
Test(scsi_exec, an_lu_alua_change_from_loop_0_is_made_and_heard_on_the_owner)
{
	static struct xcmd x;

	cr_assert_eq(scsi_dev_set_lu_alua(e.dev, 0, 2, false, "gw-b"), 0);
	cr_assert_eq(scsi_dev_alua_state(e.dev, 0, 1), SCSI_ALUA_ANO);
	cr_assert_eq(xrun(&x, &ls, e.a, CDB(0x00, 0, 0, 0, 0, 0), 0, SCSI_DIR_NONE),
		     SCSI_CHECK_CONDITION);
	cr_assert_eq(x.t.cmd.sense[12], 0x2a, "asc %#x", x.t.cmd.sense[12]);
	cr_assert_eq(x.t.cmd.sense[13], 0x06, "ASYMMETRIC ACCESS STATE CHANGED");
	cr_assert_eq(scsi_dev_set_lu_alua(e.dev, 7, 2, false, "gw-b"), -ENOENT);
}

/* ---- The abort of a command still in the message toward its owner ---------------------- */

static int hold_owner;				/* atomic: O is held while 1 */

static void hold_fn(void *arg)
{
	(void)arg;
	while (__atomic_load_n(&hold_owner, __ATOMIC_ACQUIRE))
		usleep(1000);
}

static int submitted_and_aborted;		/* atomic */

static void submit_then_abort_on_s(void *arg)
{
	struct xcmd *x = arg;

	scsi_cmd_submit(&x->t.cmd);		/* a message to O, which is held */
	cr_assert_eq(scsi_abort_cmd(&x->t.cmd), -EBUSY, "it ends through its done");
	__atomic_store_n(&submitted_and_aborted, 1, __ATOMIC_RELEASE);
}

/* A write submitted on S and aborted there at once, while O is held: alone, or queued behind
 * an ORDERED write (LBA - 1) in the task set. O sees it after the abort: it ends TASK ABORTED
 * through its done, once, on its loop, never reaching the medium; the ORDERED one runs. */
static const struct {
	const char *what;
	uint8_t lba;
	bool ordered_ahead;
} abort_cases[] = {
	{ "still in the message toward its owner", 9, false },
	{ "waiting in the task set behind an ORDERED write", 12, true },
};

Test(scsi_exec, a_command_aborted_before_its_owner_saw_it_ends_task_aborted_once)
{
	static struct xcmd o, w, r;

	for (size_t k = 0; k < sizeof(abort_cases) / sizeof(abort_cases[0]); k++) {
		const char *what = abort_cases[k].what;
		uint8_t lba = abort_cases[k].lba;
		bool ordered = abort_cases[k].ordered_ahead;
		uint8_t ocdb[16] = { 0x8a, 0, 0, 0, 0, 0, 0, 0, 0, (uint8_t)(lba - 1), 0, 0, 0, 1, 0, 0 };
		uint8_t wcdb[16] = { 0x8a, 0, 0, 0, 0, 0, 0, 0, 0, lba, 0, 0, 0, 1, 0, 0 };
		uint8_t rcdb[16] = { 0x88, 0, 0, 0, 0, 0, 0, 0, 0, lba, 0, 0, 0, 1, 0, 0 };

		__atomic_store_n(&hold_owner, 1, __ATOMIC_RELEASE);
		cr_assert_eq(gw_loop_send(&lo, hold_fn, NULL), 0);
		o.next = w.next = NULL;
		o.fired = w.fired = 0;
		if (ordered) {
			xcmd_prep(&o, &ls, e.a, ocdb, 16, 512, SCSI_DIR_WRITE);
			o.t.cmd.attr = SCSI_ATTR_ORDERED;
			xcmd_post(&o);
		}
		xcmd_prep(&w, &ls, e.a, wcdb, 16, 512, SCSI_DIR_WRITE);
		memset(w.buf, 0x5a, 512);
		submitted_and_aborted = 0;
		cr_assert_eq(gw_loop_send(&ls, submit_then_abort_on_s, &w), 0);
		cr_assert(wait_until(&submitted_and_aborted, 1), "%s", what);
		cr_assert_eq(__atomic_load_n(&w.fired, __ATOMIC_ACQUIRE), 0, "%s: O has not run it",
			     what);
		__atomic_store_n(&hold_owner, 0, __ATOMIC_RELEASE);
		cr_assert(wait_until(&w.fired, 1), "%s: no done", what);
		cr_assert(!ordered || wait_until(&o.fired, 1), "%s: the ORDERED write's done", what);
		usleep(50000);				/* a second done would come now */
		cr_assert_eq(__atomic_load_n(&w.fired, __ATOMIC_ACQUIRE), 1, "%s: done exactly once",
			     what);
		cr_assert_eq(w.wrong_loop + o.wrong_loop, 0, "%s: done on the command's loop", what);
		cr_assert_eq(w.t.cmd.status, SCSI_TASK_ABORTED, "%s", what);
		if (ordered)
			cr_assert_eq(o.t.cmd.status, SCSI_GOOD, "%s: the one not aborted runs", what);
		cr_assert_eq(xrun(&r, &ls, e.a, rcdb, 16, 512, SCSI_DIR_READ), SCSI_GOOD);
		for (int i = 0; i < 512; i++)
			cr_assert_eq(r.buf[i], 0, "%s: the aborted write never reached the medium",
				     what);
	}
}

/* ---- ALUA group states changed by loop 0 while another loop submits -------------------- */

static int alua_stop, alua_runs, alua_bad, alua_idle;	/* atomic */
static struct xcmd alua_x;

static void alua_tur_next(struct xcmd *x)
{
	const struct scsi_cmd *c = &x->t.cmd;
	bool ok = c->status == SCSI_GOOD ||
		  (c->status == SCSI_CHECK_CONDITION &&
		   ((c->sense[12] == 0x04 && c->sense[13] == 0x0b) ||	/* standby */
		    (c->sense[12] == 0x2a && c->sense[13] == 0x06)));	/* state changed */

	if (!ok)
		__atomic_add_fetch(&alua_bad, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&alua_runs, 1, __ATOMIC_RELEASE);
	if (__atomic_load_n(&alua_stop, __ATOMIC_ACQUIRE)) {
		__atomic_store_n(&alua_idle, 1, __ATOMIC_RELEASE);
		return;
	}
	xcmd_prep(x, &ls, e.a, CDB(0x00, 0, 0, 0, 0, 0), 0, SCSI_DIR_NONE);
	scsi_cmd_submit(&x->t.cmd);
}

Test(scsi_exec, alua_states_changed_by_loop_0_while_a_loop_submits)
{
	static struct xcmd x;
	int runs;

	alua_x.next = alua_tur_next;
	xcmd_prep(&alua_x, &ls, e.a, CDB(0x00, 0, 0, 0, 0, 0), 0, SCSI_DIR_NONE);
	xcmd_post(&alua_x);
	/* Each change publishes a new copy of the groups and frees the old one. */
	for (int i = 0; i < 200; i++) {
		scsi_dev_set_alua(e.dev, 1, i & 1 ? SCSI_ALUA_AO : SCSI_ALUA_STANDBY);
		if (i % 50 == 0) {
			struct scsi_tpg_conf g[] = { { 1, SCSI_ALUA_STANDBY }, { 7, SCSI_ALUA_AO } };

			cr_assert_eq(scsi_dev_set_groups(e.dev, g, 2), 0);
		}
	}
	runs = __atomic_load_n(&alua_runs, __ATOMIC_ACQUIRE);
	cr_assert(wait_until(&alua_runs, runs + 2), "the submitting loop stopped");
	__atomic_store_n(&alua_stop, 1, __ATOMIC_RELEASE);
	cr_assert(wait_until(&alua_idle, 1), "the last command never ended");
	cr_assert_eq(__atomic_load_n(&alua_bad, __ATOMIC_ACQUIRE), 0,
		     "an answer neither GOOD, standby nor 2A/06");
	/* The last state holds: standby refuses a write, and REPORT TARGET PORT GROUPS lists
	 * the other gateway's group 7 a/o. */
	scsi_dev_set_alua(e.dev, 1, SCSI_ALUA_STANDBY);
	clear_ua(&ls, e.a);
	cr_assert_eq(xrun(&x, &ls, e.a, CDB(0x00, 0, 0, 0, 0, 0), 0, SCSI_DIR_NONE),
		     SCSI_CHECK_CONDITION);
	cr_assert_eq(x.t.cmd.sense[12], 0x04);
	cr_assert_eq(x.t.cmd.sense[13], 0x0b, "standby, from the copy O read");
	cr_assert_eq(xrun(&x, &ls, e.a, CDB(0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 0x04, 0, 0, 0), 1024,
			  SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(x.buf[4] & 0x0f, SCSI_ALUA_STANDBY, "group 1 first");
	cr_assert_eq(be16(x.buf + 4 + 2), 1);
	cr_assert(x.t.cmd.xfer_len >= 4 + 8 + 4 + 8 + 4, "two groups with a port each");
}

/* ---- A cluster PR OUT through an owner that is not loop 0 -------------------------------- */

static struct {
	int calls;				/* atomic */
	int ret;
	struct gw_loop *ran_on;
	uint64_t rev;
} ph;

static int prc_commit(void *arg, struct scsi_dev *dev, uint64_t lun, uint64_t rev,
		      const json_t *state)
{
	(void)arg;
	(void)dev;
	(void)lun;
	(void)state;
	ph.ran_on = gw_loop_current();
	ph.rev = rev;
	__atomic_add_fetch(&ph.calls, 1, __ATOMIC_RELEASE);
	return ph.ret;
}

static const struct scsi_pr_cluster_ops prc_ops = { .commit = prc_commit };

/* Loop 0 is the test's thread: its messages run when it runs. */
static bool pump_loop0_until(int *counter, int want)
{
	for (int i = 0; i < 3000; i++) {
		gw_loop_run_once(&e.loop, 10);
		if (__atomic_load_n(counter, __ATOMIC_ACQUIRE) >= want)
			return true;
	}
	return false;
}

static void prout_register(struct xcmd *x, uint8_t key)
{
	uint8_t cdb[10] = { 0x5f, 0x00, 0, 0, 0, 0, 0, 0, 24, 0 };

	x->next = NULL;
	xcmd_prep(x, &ls, e.a, cdb, 10, 24, SCSI_DIR_WRITE);
	memset(x->buf, 0, 24);
	x->buf[15] = key;
	x->fired = 0;
	xcmd_post(x);
}

Test(scsi_exec, a_cluster_pr_out_commits_on_loop_0_and_completes_on_its_loop)
{
	static struct xcmd p, in;

	memset(&ph, 0, sizeof(ph));
	scsi_dev_set_pr_cluster(e.dev, &prc_ops, &ph);
	prout_register(&p, 0xaa);
	cr_assert(pump_loop0_until(&ph.calls, 1), "no commit");
	cr_assert_eq(ph.ran_on, &e.loop, "the commit went out on loop 0, not on the owner");
	cr_assert_eq(__atomic_load_n(&p.fired, __ATOMIC_ACQUIRE), 0, "not before the answer");
	scsi_dev_pr_commit_done(e.dev, 0, SCSI_PR_COMMIT_OK, 3, NULL);
	cr_assert(wait_until(&p.fired, 1));
	cr_assert_eq(p.t.cmd.status, SCSI_GOOD);
	cr_assert_eq(p.wrong_loop, 0);
	cr_assert_eq(xrun(&in, &ls, e.a, CDB(0x5e, 0x00, 0, 0, 0, 0, 0, 0, 64, 0), 64,
			  SCSI_DIR_READ), SCSI_GOOD);
	cr_assert_eq(be32(in.buf + 4), 8, "one key");
	cr_assert_eq(be64(in.buf + 8), 0xaa);
	scsi_dev_set_pr_cluster(e.dev, NULL, NULL);
}

Test(scsi_exec, a_cluster_commit_refused_on_loop_0_fails_the_pr_out_on_its_loop)
{
	static struct xcmd p;

	memset(&ph, 0, sizeof(ph));
	ph.ret = -ENOTCONN;
	scsi_dev_set_pr_cluster(e.dev, &prc_ops, &ph);
	prout_register(&p, 0xbb);
	cr_assert(pump_loop0_until(&ph.calls, 1), "no commit");
	cr_assert(wait_until(&p.fired, 1), "the refusal never came back");
	cr_assert_eq(p.t.cmd.status, SCSI_CHECK_CONDITION);
	cr_assert_eq(p.t.cmd.sense[12], 0x04);
	cr_assert_eq(p.t.cmd.sense[13], 0x0a, "NOT READY, asymmetric access state transition");
	cr_assert_eq(p.wrong_loop, 0);
	scsi_dev_set_pr_cluster(e.dev, NULL, NULL);
}

/* ---- A plain WRITE from the owner's loop against a crossed COMPARE AND WRITE ------------ */

static int caw_posted;				/* atomic */

static void submit_and_note(void *arg)
{
	struct xcmd *x = arg;

	scsi_cmd_submit(&x->t.cmd);
	__atomic_store_n(&caw_posted, 1, __ATOMIC_RELEASE);
}

Test(scsi_exec, a_write_arriving_during_a_crossed_compare_and_write_lands_after_it)
{
	static struct xcmd caw, w, r;
	uint8_t ccdb[16] = { 0x89, 0, 0, 0, 0, 0, 0, 0, 0, 20, 0, 0, 0, 1, 0, 0 };
	uint8_t wcdb[16] = { 0x8a, 0, 0, 0, 0, 0, 0, 0, 0, 20, 0, 0, 0, 1, 0, 0 };
	uint8_t rcdb[16] = { 0x88, 0, 0, 0, 0, 0, 0, 0, 0, 20, 0, 0, 0, 1, 0, 0 };

	/* O held: S's COMPARE AND WRITE (zeros -> 0xca) is queued toward O first, then a WRITE
	 * (0x77) submitted on O itself. The backstore completes each step later, so the WRITE
	 * reaches the LU between the COMPARE AND WRITE's read and its write: the range lock
	 * must hold it back, or the COMPARE AND WRITE's write would land last. */
	__atomic_store_n(&hold_owner, 1, __ATOMIC_RELEASE);
	cr_assert_eq(gw_loop_send(&lo, hold_fn, NULL), 0);
	caw.next = w.next = NULL;
	xcmd_prep(&caw, &ls, e.a, ccdb, 16, 1024, SCSI_DIR_WRITE);
	memset(caw.buf, 0, 512);
	memset(caw.buf + 512, 0xca, 512);
	xcmd_prep(&w, &lo, e.b, wcdb, 16, 512, SCSI_DIR_WRITE);
	memset(w.buf, 0x77, 512);
	caw.fired = w.fired = 0;
	caw_posted = 0;
	cr_assert_eq(gw_loop_send(&ls, submit_and_note, &caw), 0);
	cr_assert(wait_until(&caw_posted, 1));
	xcmd_post(&w);
	__atomic_store_n(&hold_owner, 0, __ATOMIC_RELEASE);
	cr_assert(wait_until(&caw.fired, 1) && wait_until(&w.fired, 1));
	cr_assert_eq(caw.t.cmd.status, SCSI_GOOD, "the block was zeros when it compared");
	cr_assert_eq(w.t.cmd.status, SCSI_GOOD);
	cr_assert_eq(xrun(&r, &ls, e.a, rcdb, 16, 512, SCSI_DIR_READ), SCSI_GOOD);
	for (int i = 0; i < 512; i++)
		cr_assert_eq(r.buf[i], 0x77, "byte %d: the WRITE, which arrived later, is last", i);
}

/* ---- The task set, on one loop ----------------------------------------------------------- */

static void task_setup(void)
{
	tenv_init(&e);
	cr_assert_eq(tenv_add_lu(&e, 0, 1 << 20, 512, true, false), 0);
	tenv_clear_ua(&e, e.a, 0);
}

static void task_teardown(void)
{
	tenv_fini(&e);
}

static int order[8], norder;

static void order_done(struct scsi_cmd *cmd)
{
	struct tcmd *t = gw_container_of(cmd, struct tcmd, cmd);

	t->fired++;
	order[norder++] = (int)cmd->tag;
}

/* A one-block READ (tag 0), an ORDERED TEST UNIT READY (tag 1) and a TEST UNIT READY with
 * attribute last (tag 2), submitted in that order and waited for; order[] says how they ended. */
static void read_then_two_turs(struct tcmd t[3], uint8_t *b, uint32_t len,
			       enum scsi_task_attr last)
{
	norder = 0;
	tcmd_prep(&e, &t[0], e.a, 0, CDB(0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0), b, len,
		  SCSI_DIR_READ);
	tcmd_prep(&e, &t[1], e.a, 0, CDB(0x00, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE);
	tcmd_prep(&e, &t[2], e.a, 0, CDB(0x00, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE);
	t[1].cmd.attr = SCSI_ATTR_ORDERED;
	t[2].cmd.attr = last;
	for (int i = 0; i < 3; i++) {
		t[i].cmd.tag = (uint64_t)i;
		t[i].cmd.done = order_done;
		scsi_cmd_submit(&t[i].cmd);
	}
	for (int i = 0; i < 3; i++)
		tcmd_wait(&e, &t[i]);
}

Test(scsi_task_set, ordered_waits_for_older_and_blocks_newer, .init = task_setup,
     .fini = task_teardown)
{
	uint8_t b[512];
	struct tcmd t[3];

	read_then_two_turs(t, b, sizeof(b), SCSI_ATTR_SIMPLE);
	/* Without ordering the two TURs (no I/O) would finish before the read. */
	cr_assert_eq(norder, 3);
	cr_assert_eq(order[0], 0);
	cr_assert_eq(order[1], 1);
	cr_assert_eq(order[2], 2);
}

Test(scsi_task_set, abort_queued_command, .init = task_setup, .fini = task_teardown)
{
	uint8_t b[512];
	struct tcmd r, o;

	tcmd_prep(&e, &r, e.a, 0, CDB(0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0), b, sizeof(b),
		  SCSI_DIR_READ);
	tcmd_prep(&e, &o, e.a, 0, CDB(0x00, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE);
	o.cmd.attr = SCSI_ATTR_ORDERED;
	scsi_cmd_submit(&r.cmd);
	scsi_cmd_submit(&o.cmd);
	cr_assert_eq(scsi_abort_cmd(&r.cmd), -EBUSY, "already running");
	cr_assert_eq(scsi_abort_cmd(&o.cmd), 0, "still queued");
	cr_assert_eq(o.fired, 0, "not from inside abort");
	tcmd_wait(&e, &o);
	tcmd_wait(&e, &r);
	cr_assert_eq(o.cmd.status, SCSI_TASK_ABORTED);
	cr_assert_eq(r.cmd.status, SCSI_GOOD);
}

/* HEAD OF QUEUE does not wait for an ORDERED command that waits itself. */
Test(scsi_task_set, head_of_queue_passes_a_waiting_ordered_command, .init = task_setup,
     .fini = task_teardown)
{
	uint8_t b[512];
	struct tcmd t[3];
	int pos[3];

	read_then_two_turs(t, b, sizeof(b), SCSI_ATTR_HEAD_OF_QUEUE);
	cr_assert_eq(norder, 3);
	for (int i = 0; i < 3; i++)
		pos[order[i]] = i;
	cr_assert_lt(pos[2], pos[1], "the HEAD OF QUEUE one ended before the ORDERED one");
}
