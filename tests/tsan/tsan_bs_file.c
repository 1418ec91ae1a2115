// SPDX-License-Identifier: MIT
/*
 * tsan_bs_file: the file backstore's worker threads under load, for `make test-tsan`.
 *
 * Criterion cannot run under ThreadSanitizer (its boxfort arena is mapped at a random fixed
 * address that TSan's mmap refuses: "Could not initialize inheritable arena"), so this is a
 * plain program over the same public API as tests/unit/bs/test_bs_file.c. On a file in a real
 * file system (not tmpfs, where I/O runs inline on the loop thread) it keeps QD I/Os in flight
 * on 4 workers for ROUNDS rounds: writes (half with FUA), reads that verify what the last write
 * of that slot put there, and flushes; once buffered and once with O_DIRECT (the per-worker
 * bounce buffers). Then it destroys the backstore (joins the workers). Exit 0 when every I/O
 * completed once, on the loop thread, with the right data; TSan's own reports fail the run
 * (exit code 66 and the report).
 *
 *   tsan_bs_file DIR        (DIR on a real file system; build/tsan/ in make test-tsan)
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bs.h"
#include "gw_loop.h"

#define QD 32
#define SLOT 8192		/* bytes per slot: slots never overlap */
#define ROUNDS 300

struct slot {
	struct bs_io io;
	uint8_t *buf;
	uint32_t gen;		/* of the last completed write */
	uint32_t pending;	/* of the write in flight */
	int busy;
};

static struct gw_loop loop;
static pthread_t loop_thread;
static unsigned long done_ios, bad;

static void fill(uint8_t *b, int slot, uint32_t gen)
{
	for (int i = 0; i < SLOT; i++)
		b[i] = (uint8_t)(slot * 31 + gen * 7 + i);
}

static void on_done(struct bs_io *io)
{
	struct slot *s = gw_container_of(io, struct slot, io);
	int idx = (int)(uintptr_t)io->priv;

	if (!pthread_equal(pthread_self(), loop_thread)) {
		fprintf(stderr, "tsan_bs_file: completion off the loop thread\n");
		bad++;
	}
	if (io->result < 0) {
		fprintf(stderr, "tsan_bs_file: %s failed: %s\n", bs_op_name(io->op),
			strerror(-io->result));
		bad++;
	} else if (io->op == BS_READ && s->gen) {
		uint8_t *want = malloc(SLOT);

		fill(want, idx, s->gen);
		if (memcmp(want, s->buf, SLOT)) {
			fprintf(stderr, "tsan_bs_file: slot %d read back wrong (gen %u)\n", idx,
				s->gen);
			bad++;
		}
		free(want);
	} else if (io->op == BS_WRITE) {
		s->gen = s->pending;
	}
	s->busy = 0;
	done_ios++;
}

static int run(const char *dir, bool direct)
{
	char path[256];
	struct bs_conf c = { .type = BS_TYPE_FILE, .path = path, .size = QD * SLOT,
			     .block_size = 512, .threads = 4, .direct = direct };
	struct gw_errlist errs;
	struct slot slots[QD];
	struct bs *b;
	uint32_t gen = 0;
	unsigned long submitted = 0;
	int rc;

	snprintf(path, sizeof(path), "%s/tsan_bs_file.%d.img", dir, (int)getpid());
	gw_errlist_init(&errs);
	rc = bs_create(&loop, &c, &b, &errs);
	gw_errlist_fini(&errs);
	if (rc < 0) {
		fprintf(stderr, "tsan_bs_file: bs_create %s: %s\n", path, strerror(-rc));
		return 1;
	}
	memset(slots, 0, sizeof(slots));
	for (int i = 0; i < QD; i++) {
		if (posix_memalign((void **)&slots[i].buf, 4096, SLOT))
			return 1;
	}
	done_ios = 0;
	for (int r = 0; r < ROUNDS; r++) {
		for (int i = 0; i < QD; i++) {
			struct slot *s = &slots[i];
			struct iovec *v = malloc(sizeof(*v));
			int kind = (r + i) % 5;

			if (s->busy)
				continue;
			free((void *)s->io.iov);
			memset(&s->io, 0, sizeof(s->io));
			v->iov_base = s->buf;
			v->iov_len = SLOT;
			s->io.iov = v;
			s->io.iovcnt = 1;
			s->io.offset = (uint64_t)i * SLOT;
			s->io.len = SLOT;
			s->io.done = on_done;
			s->io.priv = (void *)(uintptr_t)i;
			if (kind == 4) {
				s->io.op = BS_FLUSH;
				s->io.len = 0;
			} else if (kind >= 2 || !s->gen) {
				s->io.op = BS_WRITE;
				s->io.fua = kind == 3;
				fill(s->buf, i, ++gen);
			} else {
				s->io.op = BS_READ;
			}
			s->busy = 1;
			s->pending = gen;
			rc = bs_submit(b, &s->io);
			if (rc < 0) {
				fprintf(stderr, "tsan_bs_file: submit: %s\n", strerror(-rc));
				return 1;
			}
			submitted++;
		}
		gw_loop_run_once(&loop, 100);
	}
	for (int i = 0; i < 2000 && b->inflight; i++)
		gw_loop_run_once(&loop, 10);
	if (b->inflight) {
		fprintf(stderr, "tsan_bs_file: %llu I/Os never completed\n",
			(unsigned long long)b->inflight);
		return 1;
	}
	bs_destroy(b);
	for (int i = 0; i < QD; i++) {
		free(slots[i].buf);
		free((void *)slots[i].io.iov);
	}
	unlink(path);
	printf("tsan_bs_file: %s: %lu I/Os submitted, %lu completed, %lu bad\n",
	       direct ? "O_DIRECT" : "buffered", submitted, done_ios, bad);
	return done_ios == submitted && !bad ? 0 : 1;
}

int main(int argc, char **argv)
{
	int rc;

	if (argc != 2) {
		fprintf(stderr, "usage: tsan_bs_file DIR\n");
		return 2;
	}
	loop_thread = pthread_self();
	if (gw_loop_init(&loop) < 0)
		return 1;
	rc = run(argv[1], false) | run(argv[1], true);
	gw_loop_fini(&loop);
	return rc;
}
