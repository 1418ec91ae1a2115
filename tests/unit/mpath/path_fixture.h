/* SPDX-License-Identifier: MIT */
/*
 * One path of a LUN that exists only for the test, for the path's unit tests (test_mp_path.c
 * and test_mp_path_*.c): a recording owner in place of mp_lun.c (what the path reports:
 * changed, re-drives, retries, completions), the suite's set-up and tear-down, and the steps
 * every test takes (pump the fake back end and the loop, move the clock, bring the path up,
 * send I/O).
 *
 * Included after fake_iscsi.h and path_files.h (the path's .c files), which it reaches into;
 * each test file declares its own TestSuite with setup and teardown.
 */
#ifndef PATH_FIXTURE_H
#define PATH_FIXTURE_H

/* The owner: records what the path reports. */
static struct {
	int changed, redrives, retries, completes, buried, capacities;
	uint64_t capacity;		/* the size the last capacity report carried */
	bool last_redrive_path_failure;
	uint64_t last_retry_at;
	struct mp_io *last;
	int identity_rc;
} rec;

static void rec_changed(struct mp_lun *lun, struct mp_path *p)
{
	(void)lun;
	(void)p;
	rec.changed++;
}

static void rec_redrive(struct mp_lun *lun, struct mp_io *io, bool path_failure)
{
	(void)lun;
	rec.redrives++;
	rec.last_redrive_path_failure = path_failure;
	rec.last = io;
}

static void rec_retry(struct mp_lun *lun, struct mp_io *io, uint64_t at_ms)
{
	(void)lun;
	rec.retries++;
	rec.last_retry_at = at_ms;
	rec.last = io;
}

static void rec_complete(struct mp_lun *lun, struct mp_io *io)
{
	(void)lun;
	rec.completes++;
	rec.last = io;
}

static int rec_check_identity(struct mp_lun *lun, struct mp_path *p, char *msg, size_t len)
{
	(void)lun;
	(void)p;
	if (rec.identity_rc)
		snprintf(msg, len, "not the same device");
	return rec.identity_rc;
}

static void rec_bury(struct mp_lun *lun, struct iscsi_context *ctx)
{
	(void)lun;
	rec.buried++;
	iscsi_destroy_context(ctx);
}

static void rec_capacity(struct mp_lun *lun, struct mp_path *p)
{
	(void)lun;
	rec.capacities++;
	rec.capacity = p->size;
}

static const struct mp_path_owner_ops rec_owner = {
	.changed = rec_changed,
	.redrive = rec_redrive,
	.retry = rec_retry,
	.complete = rec_complete,
	.check_identity = rec_check_identity,
	.bury = rec_bury,
	.capacity = rec_capacity,
};

static struct gw_loop loop;
static struct mp_lun lun;
static struct mp_path path;
static uint8_t buf[4096];
static struct iovec iov = { buf, sizeof(buf) };

static __attribute__((unused)) void setup(void)
{
	struct mp_path_conf pc = { .url = (char *)"iscsi://192.0.2.1:3260/iqn.2026-11.org.test:t/0" };
	struct gw_errlist errs = { 0 };

	fake_iscsi_reset();
	memset(&rec, 0, sizeof(rec));
	cr_assert_eq(gw_loop_init(&loop), 0);
	memset(&lun, 0, sizeof(lun));
	cr_assert_eq(conf_mp_defaults(&lun.conf), 0);
	lun.conf.engine = MP_ENGINE_LIBISCSI;	/* the fake back end is a fake libiscsi */
	lun.loop = &loop;
	lun.block_size = FAKE_BLOCK;
	lun.rng = 42;
	snprintf(lun.name, sizeof(lun.name), "test");
	cr_assert_eq(mp_path_init(&lun, &rec_owner, &path, 0, &pc, &errs, "paths[0].url"), 0);
}

static __attribute__((unused)) void teardown(void)
{
	lun.destroying = true;
	mp_path_fini(&path);
	conf_mp_free(&lun.conf);
	gw_loop_fini(&loop);
}

/* Everything pending, until quiet: the fake back end's answers and the loop's defers. */
static __attribute__((unused)) void pump(void)
{
	for (int i = 0, quiet = 0; i < 500 && quiet < 3; i++) {
		int n = fake_iscsi_run();

		n += gw_loop_run_once(&loop, 0);
		quiet = n ? 0 : quiet + 1;
	}
}

static __attribute__((unused)) void tick(uint64_t ms)
{
	fake_now += ms;
	mp_path_tick(&path, fake_now);
	pump();
}

static __attribute__((unused)) void bring_up(void)
{
	tick(0);
	cr_assert_eq(path.state, MP_PATH_ACTIVE, "path is %s: %s",
		     mp_path_state_name(path.state), path.last_error);
}

static __attribute__((unused)) void send_io(struct mp_io *io, enum mp_op op)
{
	memset(io, 0, sizeof(*io));
	io->op = op;
	io->len = sizeof(buf);
	io->iov = &iov;
	io->iovcnt = 1;
	io->lun = &lun;
	io->start_ms = fake_now;
	cr_assert_eq(mp_path_send(&path, io), 0);
}

static __attribute__((unused)) void read_io(struct mp_io *io)
{
	send_io(io, MP_READ);
}

static __attribute__((unused)) void write_io(struct mp_io *io)
{
	send_io(io, MP_WRITE);
}

#endif
