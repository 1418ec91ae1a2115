// SPDX-License-Identifier: MIT
/*
 * The remote backstore against real back ends, driven by tests/integration/test_mpath.sh
 * (skipped in `make test-unit`, where no back end exists). It opens the backstores described
 * by MP_LIVE_CONF (a JSON array of backstore objects) on a gw_loop and then, by MP_LIVE_MODE:
 *
 *   settle  waits for every backstore to settle; prints settle_ms=N
 *   verify  writes seeded, position-stamped blocks at queue depth 4 into the first backstore
 *           for MP_LIVE_SECONDS, reading each write back, then re-reads everything written:
 *           any I/O error or mismatch fails. Prints max_latency_ms, ios, errors, mismatches.
 *   nopath  issues I/O until one fails; it must fail with NOT READY 04/0C (path down);
 *           prints failed_after_ms (how long that I/O waited)
 *
 * MP_LIVE_STATUS names a file the backstore's status JSON is written to twice a second, so
 * the script can wait for path states without a control socket.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bs.h"
#include "gw_log.h"
#include "gw_loop.h"
#include "mp.h"

#define LIVE_BLOCK 4096u
#define LIVE_QD 4
#define LIVE_MAX_BLOCKS 16u

struct live;

struct live_worker {
	struct live *lv;
	int id;
	struct bs_io io;
	struct iovec iov;
	uint8_t *buf;
	uint64_t first, nblocks;	/* its region, in LIVE_BLOCK units */
	uint64_t lba, n;		/* current I/O */
	bool reading;
	uint64_t t0;
	bool busy;
};

struct live {
	struct gw_loop loop;
	struct bs *bs[64];
	size_t nbs;
	struct live_worker w[LIVE_QD];
	uint32_t *gen;			/* per block: last generation written, 0: never */
	uint64_t nblocks;
	uint64_t seed;
	uint64_t end_ms;
	bool stop;
	const char *mode;
	uint64_t ios, errors, mismatches, max_lat_ms;
	bool nopath_seen;
	uint64_t failed_after_ms;
	const char *status_file;
	struct gw_timer status_timer;
};

static uint64_t live_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void live_fill(uint8_t *p, uint64_t lba, uint32_t gen)
{
	uint64_t st = lba * 0x2545f4914f6cdd1dull ^ ((uint64_t)gen << 32);

	memcpy(p, &lba, 8);
	memcpy(p + 8, &gen, 4);
	memset(p + 12, 0, 4);
	for (size_t i = 16; i < LIVE_BLOCK; i += 8) {
		uint64_t v = live_rand(&st);

		memcpy(p + i, &v, 8);
	}
}

static void live_next(struct live_worker *w);

static void live_done(struct bs_io *io)
{
	struct live_worker *w = io->priv;
	struct live *lv = w->lv;
	uint64_t lat = gw_now_ms() - w->t0;

	w->busy = false;
	lv->ios++;
	if (lat > lv->max_lat_ms)
		lv->max_lat_ms = lat;
	if (io->result < 0) {
		bool nopath = io->result == -EREMOTEIO && io->sense_len >= 14 &&
			      (io->sense[2] & 0xf) == 0x2 && io->sense[12] == 0x04 &&
			      io->sense[13] == 0x0c;

		if (strcmp(lv->mode, "nopath") == 0 && nopath) {
			if (!lv->nopath_seen)
				lv->failed_after_ms = lat;
			lv->nopath_seen = true;
			lv->stop = true;
			return;
		}
		lv->errors++;
		fprintf(stderr, "live: %s at block %llu x %llu failed: %d (%s), sense %x/%02x/%02x "
			"after %llu ms\n", w->reading ? "read" : "write",
			(unsigned long long)w->lba, (unsigned long long)w->n, io->result,
			strerror(-io->result), io->sense_len ? io->sense[2] & 0xf : 0,
			io->sense_len ? io->sense[12] : 0, io->sense_len ? io->sense[13] : 0,
			(unsigned long long)lat);
		if (w->reading || lv->errors > 20)
			lv->stop = true;
		w->reading = true;	/* a failed write: its blocks are unknown now */
		for (uint64_t b = 0; b < w->n; b++)
			lv->gen[w->lba + b] = UINT32_MAX;
	} else if (w->reading) {
		for (uint64_t b = 0; b < w->n; b++) {
			uint32_t g = lv->gen[w->lba + b];
			uint8_t want[LIVE_BLOCK];

			if (g == UINT32_MAX)
				continue;
			if (g == 0)
				continue;	/* never written: anything is fine */
			live_fill(want, w->lba + b, g);
			if (memcmp(want, w->buf + b * LIVE_BLOCK, LIVE_BLOCK) != 0) {
				uint64_t got_lba;
				uint32_t got_gen;

				memcpy(&got_lba, w->buf + b * LIVE_BLOCK, 8);
				memcpy(&got_gen, w->buf + b * LIVE_BLOCK + 8, 4);
				size_t off = 0;

				while (off < LIVE_BLOCK && want[off] == w->buf[b * LIVE_BLOCK + off])
					off++;
				if (lv->mismatches++ < 10)
					fprintf(stderr, "live: block %llu (I/O at %llu x %llu): want "
						"gen %u, got block %llu gen %u, first difference at "
						"byte %zu\n", (unsigned long long)(w->lba + b),
						(unsigned long long)w->lba, (unsigned long long)w->n,
						g, (unsigned long long)got_lba, got_gen, off);
			}
		}
		w->reading = false;
	} else {
		w->reading = true;	/* read back what was just written */
		w->io.op = BS_READ;
		w->t0 = gw_now_ms();
		w->busy = true;
		if (bs_submit(lv->bs[0], &w->io) < 0) {
			lv->errors++;
			w->busy = false;
			lv->stop = true;
		}
		return;
	}
	live_next(w);
}

static void live_next(struct live_worker *w)
{
	struct live *lv = w->lv;
	uint64_t r;
	uint32_t g;

	if (lv->stop || gw_now_ms() >= lv->end_ms)
		return;
	r = live_rand(&lv->seed);
	w->n = 1 + r % LIVE_MAX_BLOCKS;
	if (w->n > w->nblocks)
		w->n = w->nblocks;
	w->lba = w->first + (r >> 8) % (w->nblocks - w->n + 1);
	g = (uint32_t)(lv->ios + 1);
	for (uint64_t b = 0; b < w->n; b++) {
		lv->gen[w->lba + b] = g;
		live_fill(w->buf + b * LIVE_BLOCK, w->lba + b, g);
	}
	w->reading = false;
	w->iov.iov_base = w->buf;
	w->iov.iov_len = w->n * LIVE_BLOCK;
	memset(&w->io, 0, sizeof(w->io));
	w->io.op = BS_WRITE;
	w->io.offset = w->lba * LIVE_BLOCK;
	w->io.len = w->n * LIVE_BLOCK;
	w->io.iov = &w->iov;
	w->io.iovcnt = 1;
	w->io.fua = (r & 0x30000) == 0;
	w->io.done = live_done;
	w->io.priv = w;
	w->t0 = gw_now_ms();
	w->busy = true;
	if (bs_submit(lv->bs[0], &w->io) < 0) {
		w->busy = false;
		lv->errors++;
		lv->stop = true;
	}
}

static void live_status(struct gw_timer *t)
{
	struct live *lv = gw_container_of(t, struct live, status_timer);
	json_t *a = json_array();
	char tmp[4096];

	for (size_t i = 0; i < lv->nbs; i++) {
		json_t *s = bs_status(lv->bs[i]);

		json_array_append_new(a, s ? s : json_null());
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp", lv->status_file);
	if (json_dump_file(a, tmp, JSON_INDENT(1)) == 0)
		rename(tmp, lv->status_file);
	json_decref(a);
}

static bool live_busy(struct live *lv)
{
	for (int i = 0; i < LIVE_QD; i++)
		if (lv->w[i].busy)
			return true;
	return false;
}

/* Reads back every block written, one chunk at a time. */
static void live_final_verify(struct live *lv)
{
	struct live_worker *w = &lv->w[0];

	for (uint64_t b = 0; b < lv->nblocks; b += LIVE_MAX_BLOCKS) {
		w->lba = b;
		w->n = lv->nblocks - b < LIVE_MAX_BLOCKS ? lv->nblocks - b : LIVE_MAX_BLOCKS;
		w->reading = true;
		w->iov.iov_base = w->buf;
		w->iov.iov_len = w->n * LIVE_BLOCK;
		memset(&w->io, 0, sizeof(w->io));
		w->io.op = BS_READ;
		w->io.offset = b * LIVE_BLOCK;
		w->io.len = w->n * LIVE_BLOCK;
		w->io.iov = &w->iov;
		w->io.iovcnt = 1;
		w->io.done = live_done;
		w->io.priv = w;
		w->t0 = gw_now_ms();
		w->busy = true;
		lv->end_ms = 0;		/* live_next does nothing now */
		if (bs_submit(lv->bs[0], &w->io) < 0) {
			lv->errors++;
			return;
		}
		/* The completion runs from a defer at the start of the next iteration: do
		 * not sleep the full tick after it. */
		while (w->busy)
			gw_loop_run_once(&lv->loop, 1);
		if (lv->errors)
			return;
	}
}

#define LIVE_CHECK(cond, ...)                                          \
	do {                                                           \
		if (!(cond)) {                                         \
			fprintf(stdout, "live: FAIL: " __VA_ARGS__);   \
			fprintf(stdout, "\n");                         \
			return 1;                                      \
		}                                                      \
	} while (0)

static int live_run(void)
{
	const char *conf = getenv("MP_LIVE_CONF");
	const char *secs = getenv("MP_LIVE_SECONDS");
	static struct live lv;
	json_error_t je;
	json_t *arr;
	uint64_t t0;

	/* As isergwd: a peer that closes must not kill us through writev(). */
	signal(SIGPIPE, SIG_IGN);
	if (getenv("MP_LIVE_DEBUG"))
		gw_log_set_debug(getenv("MP_LIVE_DEBUG"));
	setvbuf(stdout, NULL, _IONBF, 0);
	lv.mode = getenv("MP_LIVE_MODE") ? getenv("MP_LIVE_MODE") : "verify";
	lv.status_file = getenv("MP_LIVE_STATUS");
	lv.seed = getenv("MP_LIVE_SEED") ? strtoull(getenv("MP_LIVE_SEED"), NULL, 0) : 1;
	arr = json_load_file(conf, 0, &je);
	LIVE_CHECK(arr, "%s: %s", conf, je.text);
	LIVE_CHECK(json_is_array(arr), "%s: expected an array", conf);
	LIVE_CHECK(gw_loop_init(&lv.loop) == 0, "loop");
	for (size_t i = 0; i < json_array_size(arr) && i < 64; i++) {
		struct gw_errlist errs;
		struct bs_conf bc;

		gw_errlist_init(&errs);
		memset(&bc, 0, sizeof(bc));
		LIVE_CHECK(conf_bs_parse(&bc, json_array_get(arr, i), "backstore", &errs) == 0,
			   "%s", errs.n ? gw_errlist_join(&errs) : "");
		LIVE_CHECK(bs_create(&lv.loop, &bc, &lv.bs[i], &errs) == 0, "%s",
			   errs.n ? gw_errlist_join(&errs) : "");
		lv.nbs++;
		conf_bs_free(&bc);
		gw_errlist_fini(&errs);
	}
	json_decref(arr);
	if (lv.status_file) {
		LIVE_CHECK(gw_timer_init(&lv.status_timer, &lv.loop, live_status) == 0, "timer");
		gw_timer_arm(&lv.status_timer, 100, 500);
	}

	t0 = gw_now_ms();
	for (;;) {
		bool all = true;

		for (size_t i = 0; i < lv.nbs; i++)
			if (!bs_settled(lv.bs[i]))
				all = false;
		if (all)
			break;
		LIVE_CHECK(gw_now_ms() - t0 < 300000, "start-up never settled");
		gw_loop_run_once(&lv.loop, 100);
	}
	printf("settle_ms=%llu\n", (unsigned long long)(gw_now_ms() - t0));
	if (strcmp(lv.mode, "settle") != 0) {
		LIVE_CHECK(lv.bs[0]->state == BS_STATE_READY, "no path logged in at start-up");
		lv.nblocks = lv.bs[0]->size / LIVE_BLOCK;
		if (lv.nblocks > (64u << 20) / LIVE_BLOCK)
			lv.nblocks = (64u << 20) / LIVE_BLOCK;
		LIVE_CHECK(lv.nblocks >= LIVE_QD * LIVE_MAX_BLOCKS, "LUN too small");
		lv.gen = calloc(lv.nblocks, sizeof(*lv.gen));
		lv.end_ms = gw_now_ms() + (secs ? strtoull(secs, NULL, 0) : 10) * 1000;
		for (int i = 0; i < LIVE_QD; i++) {
			struct live_worker *w = &lv.w[i];

			w->lv = &lv;
			w->id = i;
			w->buf = aligned_alloc(4096, LIVE_MAX_BLOCKS * LIVE_BLOCK);
			w->nblocks = lv.nblocks / LIVE_QD;
			w->first = (uint64_t)i * w->nblocks;
			live_next(w);
		}
		while (live_busy(&lv) || (!lv.stop && gw_now_ms() < lv.end_ms))
			gw_loop_run_once(&lv.loop, 100);
		if (strcmp(lv.mode, "verify") == 0 && !lv.errors)
			live_final_verify(&lv);
		printf("ios=%llu errors=%llu mismatches=%llu max_latency_ms=%llu\n",
		       (unsigned long long)lv.ios, (unsigned long long)lv.errors,
		       (unsigned long long)lv.mismatches, (unsigned long long)lv.max_lat_ms);
		if (strcmp(lv.mode, "nopath") == 0) {
			printf("failed_after_ms=%llu\n", (unsigned long long)lv.failed_after_ms);
			LIVE_CHECK(lv.nopath_seen, "no I/O failed with NOT READY 04/0C");
		}
		LIVE_CHECK(lv.errors == 0, "%llu I/O errors", (unsigned long long)lv.errors);
		LIVE_CHECK(lv.mismatches == 0, "%llu blocks did not verify",
			   (unsigned long long)lv.mismatches);
	}
	if (lv.status_file) {
		live_status(&lv.status_timer);
		gw_timer_fini(&lv.status_timer);
	}
	/* Shutdown must be bounded even with paths down. */
	t0 = gw_now_ms();
	for (size_t i = 0; i < lv.nbs; i++)
		bs_shutdown(lv.bs[i]);
	for (;;) {
		bool idle = true;

		for (size_t i = 0; i < lv.nbs; i++)
			if (lv.bs[i]->inflight)
				idle = false;
		if (idle)
			break;
		LIVE_CHECK(gw_now_ms() - t0 < 10000, "shutdown drain not bounded");
		gw_loop_run_once(&lv.loop, 100);
	}
	for (size_t i = 0; i < lv.nbs; i++)
		bs_destroy(lv.bs[i]);
	gw_loop_fini(&lv.loop);
	printf("shutdown_ms=%llu\nlive: PASS\n", (unsigned long long)(gw_now_ms() - t0));
	return 0;
}

/* Without MP_LIVE_CONF this is an ordinary Criterion binary whose one test is skipped; with
 * it, the harness runs in this process (no fork), so the script sees its exit status. */
Test(mp_live, against_real_back_ends)
{
	cr_skip_test("MP_LIVE_CONF not set: run by tests/integration/test_mpath.sh");
}

int main(int argc, char *argv[])
{
	struct criterion_test_set *tests;
	int result = 0;

	if (getenv("MP_LIVE_CONF"))
		return live_run();
	tests = criterion_initialize();
	if (criterion_handle_args(argc, argv, true))
		result = !criterion_run_all_tests(tests);
	criterion_finalize(tests);
	return result;
}
