// SPDX-License-Identifier: MIT
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bs.h"
#include "gw_loop.h"
/* Compiled here, so that a test can open the ring of a kernel before 6.1 (bs_file_classic_ring,
 * a static: nothing outside this test can set it). */
#include "../../../gateway/bs/bs_file.c"

static struct gw_loop loop;
static struct gw_errlist errs;
static char dir[64];
static char path[128];

struct waiter {
	struct bs_io io;
	int fired;
};

static void on_done(struct bs_io *io)
{
	struct waiter *w = gw_container_of(io, struct waiter, io);

	w->fired++;
}

static void run_until(int *fired, int want)
{
	for (int i = 0; i < 400 && *fired < want; i++)
		gw_loop_run_once(&loop, 50);
	cr_assert_eq(*fired, want, "%d completions, wanted %d", *fired, want);
}

static int do_io(struct bs *b, enum bs_op op, uint64_t off, uint64_t len, struct iovec *iov,
		 int iovcnt)
{
	struct waiter w = { .io = { .op = op, .offset = off, .len = len, .iov = iov,
				    .iovcnt = iovcnt, .done = on_done } };
	int rc = bs_submit(b, &w.io);

	if (rc < 0)
		return rc;
	cr_assert_eq(w.fired, 0, "done ran inside submit");
	run_until(&w.fired, 1);
	cr_assert_eq(b->inflight, 0);
	return w.io.result;
}

static struct bs_conf fconf(uint64_t size)
{
	struct bs_conf c = { .type = BS_TYPE_FILE, .path = path, .size = size,
			     .block_size = 512, .threads = 4 };
	return c;
}

static void setup(void)
{
	cr_assert_eq(gw_loop_init(&loop), 0);
	gw_errlist_init(&errs);
	snprintf(dir, sizeof(dir), "/var/tmp/test_bs_file.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/lu.img", dir);
}

static void teardown(void)
{
	unlink(path);
	rmdir(dir);
	gw_errlist_fini(&errs);
	gw_loop_fini(&loop);
}

TestSuite(bs_file, .init = setup, .fini = teardown);

Test(bs_file, missing_file_created_sparse)
{
	struct bs_conf c = fconf(64 << 20);
	struct bs *b = NULL;
	struct stat st;

	cr_assert_eq(bs_create(&loop, &c, &b, &errs), 0);
	cr_assert_eq(b->size, 64 << 20);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_size, 64 << 20);
	cr_assert_lt(st.st_blocks, 64, "not sparse: %ld blocks", (long)st.st_blocks);
	bs_destroy(b);
}

Test(bs_file, missing_file_without_size_names_path)
{
	struct bs_conf c = fconf(0);
	struct bs *b = NULL;

	cr_assert_eq(bs_create(&loop, &c, &b, &errs), -ENOENT);
	cr_assert_null(b);
	cr_assert_eq(errs.n, 1);
	cr_assert_str_eq(errs.v[0].field, "path");
	cr_assert_not_null(strstr(errs.v[0].msg, path), "message: %s", errs.v[0].msg);
}

Test(bs_file, existing_file_sizes)
{
	struct bs_conf c = fconf(0);
	struct bs *b = NULL;
	struct stat st;
	int fd = open(path, O_CREAT | O_RDWR, 0600);

	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, 1 << 20), 0);
	close(fd);
	/* No size: the file's. */
	cr_assert_eq(bs_create(&loop, &c, &b, &errs), 0);
	cr_assert_eq(b->size, 1 << 20);
	bs_destroy(b);
	/* Larger size: extended. */
	c.size = 4 << 20;
	cr_assert_eq(bs_create(&loop, &c, &b, &errs), 0);
	cr_assert_eq(b->size, 4 << 20);
	bs_destroy(b);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_size, 4 << 20);
	/* A regular file is not a block device. */
	c.type = BS_TYPE_BLOCK;
	cr_assert_eq(bs_create(&loop, &c, &b, &errs), -ENOTBLK);
}

Test(bs_file, write_read_back_odd_offsets_multi_iov)
{
	struct bs_conf c = fconf(8 << 20);
	struct bs *b = NULL;
	uint8_t src[3 * 512 + 1024], dst[sizeof(src)];
	struct iovec wv[3] = { { src, 7 }, { src + 7, 1000 }, { src + 1007, sizeof(src) - 1007 } };
	struct iovec rv[4] = { { dst, 512 }, { dst + 512, 1 }, { dst + 513, 511 },
			       { dst + 1024, sizeof(dst) - 1024 } };

	cr_assert_eq(bs_create(&loop, &c, &b, &errs), 0);
	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)(i * 7 + 3);
	cr_assert_eq(do_io(b, BS_WRITE, 3 * 512 + 5 * 4096, sizeof(src), wv, 3), 0);
	memset(dst, 0, sizeof(dst));
	cr_assert_eq(do_io(b, BS_READ, 3 * 512 + 5 * 4096, sizeof(dst), rv, 4), 0);
	cr_assert_eq(memcmp(src, dst, sizeof(src)), 0);
	/* And with FUA, then a flush. */
	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)~src[i];
	{
		struct waiter w = { .io = { .op = BS_WRITE, .offset = 512, .len = sizeof(src),
					    .iov = wv, .iovcnt = 3, .fua = true,
					    .done = on_done } };

		cr_assert_eq(bs_submit(b, &w.io), 0);
		run_until(&w.fired, 1);
		cr_assert_eq(w.io.result, 0);
	}
	cr_assert_eq(do_io(b, BS_FLUSH, 0, 0, NULL, 0), 0);
	cr_assert_eq(do_io(b, BS_READ, 512, sizeof(dst), rv, 4), 0);
	cr_assert_eq(memcmp(src, dst, sizeof(src)), 0);
	/* Past the end: refused before anything is queued. */
	cr_assert_eq(do_io(b, BS_READ, (8 << 20) - 512, 1024, rv, 4), -EINVAL);
	bs_destroy(b);
}

Test(bs_file, unmap_punches_a_hole)
{
	struct bs_conf c = fconf(4 << 20);
	struct bs *b = NULL;
	static uint8_t buf[1 << 20];
	struct iovec v = { buf, sizeof(buf) };
	struct stat st1, st2;

	cr_assert_eq(bs_create(&loop, &c, &b, &errs), 0);
	cr_assert(b->can_unmap, "ext4/tmpfs punch holes");
	memset(buf, 0xc3, sizeof(buf));
	cr_assert_eq(do_io(b, BS_WRITE, 1 << 20, sizeof(buf), &v, 1), 0);
	cr_assert_eq(do_io(b, BS_FLUSH, 0, 0, NULL, 0), 0);
	cr_assert_eq(stat(path, &st1), 0);
	cr_assert_eq(do_io(b, BS_UNMAP, (1 << 20) + 4096, 512 << 10, NULL, 0), 0);
	cr_assert_eq(stat(path, &st2), 0);
	cr_assert_lt(st2.st_blocks, st1.st_blocks, "blocks %ld -> %ld", (long)st1.st_blocks,
		     (long)st2.st_blocks);
	cr_assert_eq(st2.st_size, 4 << 20);
	cr_assert_eq(do_io(b, BS_READ, 1 << 20, sizeof(buf), &v, 1), 0);
	for (size_t i = 0; i < sizeof(buf); i++) {
		uint8_t want = (i >= 4096 && i < 4096 + (512 << 10)) ? 0 : 0xc3;

		cr_assert_eq(buf[i], want, "byte %zu: %#x", i, buf[i]);
	}
	/* WRITE ZEROES over written data reads back zeroes too. */
	cr_assert_eq(do_io(b, BS_WRITE_ZEROES, (1 << 20) + 512, 512, NULL, 0), 0);
	cr_assert_eq(do_io(b, BS_READ, 1 << 20, 1024, &v, 1), 0);
	cr_assert_eq(buf[0], 0xc3);
	cr_assert_eq(buf[512], 0);
	cr_assert_eq(buf[1023], 0);
	bs_destroy(b);
}

Test(bs_file, many_concurrent_ios_complete_once)
{
	struct bs_conf c = fconf(1 << 20);
	struct bs *b = NULL;
	static uint8_t data[64][4096];
	static struct iovec v[64];
	static struct waiter w[64];
	int fired = 0;

	cr_assert_eq(bs_create(&loop, &c, &b, &errs), 0);
	for (int i = 0; i < 64; i++) {
		memset(data[i], i + 1, sizeof(data[i]));
		v[i] = (struct iovec){ data[i], sizeof(data[i]) };
		w[i] = (struct waiter){ .io = { .op = BS_WRITE, .offset = (uint64_t)i * 4096,
						.len = 4096, .iov = &v[i], .iovcnt = 1,
						.done = on_done } };
		cr_assert_eq(bs_submit(b, &w[i].io), 0);
	}
	cr_assert_eq(b->inflight, 64);
	for (int n = 0; n < 400 && fired < 64; n++) {
		gw_loop_run_once(&loop, 50);
		fired = 0;
		for (int i = 0; i < 64; i++)
			fired += w[i].fired;
	}
	for (int i = 0; i < 64; i++) {
		cr_assert_eq(w[i].fired, 1, "io %d fired %d times", i, w[i].fired);
		cr_assert_eq(w[i].io.result, 0);
	}
	cr_assert_eq(b->inflight, 0);
	memset(data[0], 0, 4096);
	cr_assert_eq(do_io(b, BS_READ, 63 * 4096, 4096, &v[0], 1), 0);
	cr_assert_eq(data[0][0], 64);
	cr_assert_eq(data[0][4095], 64);
	bs_destroy(b);
}

Test(bs_file, direct_unaligned_memory_bounces)
{
	struct bs_conf c = fconf(1 << 20);
	struct bs *b = NULL;
	static uint8_t raw[8192 + 3];
	uint8_t *p = raw + 3;	/* deliberately misaligned */
	struct iovec v = { p, 4096 };

	c.direct = true;
	c.block_size = 4096;
	if (bs_create(&loop, &c, &b, &errs) < 0)
		cr_skip_test("O_DIRECT not supported here");
	memset(p, 0x77, 4096);
	cr_assert_eq(do_io(b, BS_WRITE, 8192, 4096, &v, 1), 0);
	memset(p, 0, 4096);
	/* A partial-block read, as when the initiator's buffer is shorter than the CDB's. */
	v.iov_len = 1000;
	cr_assert_eq(do_io(b, BS_READ, 8192, 1000, &v, 1), 0);
	cr_assert_eq(p[0], 0x77);
	cr_assert_eq(p[999], 0x77);
	cr_assert_eq(p[1000], 0);
	bs_destroy(b);
}

/* A file on tmpfs is read and written on the loop thread: the data must be the same, and the
 * completion must still come later, never from inside bs_submit. */
Test(bs_file, tmpfs_file_inline_io_reads_back_and_completes_later)
{
	char sdir[64], spath[96];
	struct bs_conf c;
	struct bs *b = NULL;
	uint8_t src[4096 + 512], dst[sizeof(src)];
	struct iovec wv = { src, sizeof(src) }, rv = { dst, sizeof(dst) };
	struct waiter w = { .io = { .op = BS_WRITE, .offset = 7 * 512, .len = sizeof(src),
				    .iov = &wv, .iovcnt = 1, .done = on_done } };

	snprintf(sdir, sizeof(sdir), "/dev/shm/test_bs_file.XXXXXX");
	if (!mkdtemp(sdir))
		cr_skip_test("no /dev/shm");
	snprintf(spath, sizeof(spath), "%s/lu.img", sdir);
	c = fconf(1 << 20);
	c.path = spath;
	cr_assert_eq(bs_create(&loop, &c, &b, &errs), 0);
	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)(i * 13 + 1);
	cr_assert_eq(bs_submit(b, &w.io), 0);
	cr_assert_eq(w.fired, 0, "completion fired inside bs_submit");
	run_until(&w.fired, 1);
	cr_assert_eq(w.io.result, 0);
	memset(dst, 0, sizeof(dst));
	cr_assert_eq(do_io(b, BS_READ, 7 * 512, sizeof(dst), &rv, 1), 0);
	cr_assert_eq(memcmp(src, dst, sizeof(src)), 0);
	bs_destroy(b);
	unlink(spath);
	rmdir(sdir);
}

/* io_uring: the default engine of file and block backstores. */

static json_t *status_of(struct bs *b, const char *key)
{
	static json_t *last;
	json_t *v;

	json_decref(last);
	last = bs_status(b);
	cr_assert_not_null(last, "no backstore status");
	v = json_object_get(last, key);
	cr_assert_not_null(v, "status has no %s", key);
	return v;
}

static struct bs *open_direct(struct bs_conf *c)
{
	struct bs *b = NULL;

	c->direct = true;
	c->block_size = 4096;
	if (bs_create(&loop, c, &b, &errs) < 0)
		cr_skip_test("O_DIRECT not supported on %s", dir);
	return b;
}

static void *abuf(size_t len, int fill)
{
	void *p = NULL;

	cr_assert_eq(posix_memalign(&p, 4096, len), 0);
	memset(p, fill, len);
	return p;
}

Test(bs_file, uring_direct_read_write_flush_unmap_zeroes)
{
	struct bs_conf c = fconf(4 << 20);
	struct bs *b = open_direct(&c);
	uint8_t *w = abuf(16384, 0), *r = abuf(16384, 0);
	struct iovec wv[2] = { { w, 4096 }, { w + 4096, 12288 } }, rv = { r, 16384 };
	uint64_t ext = 0;

	cr_assert_str_eq(json_string_value(status_of(b, "io_engine")), "uring");
	for (int i = 0; i < 16384; i++)
		w[i] = (uint8_t)(i * 7 + 3);
	cr_assert_eq(do_io(b, BS_WRITE, 1 << 20, 16384, wv, 2), 0);
	cr_assert_eq(do_io(b, BS_READ, 1 << 20, 16384, &rv, 1), 0);
	cr_assert_eq(memcmp(w, r, 16384), 0);
	cr_assert_eq(do_io(b, BS_FLUSH, 0, 0, NULL, 0), 0);

	/* UNMAP punches a hole: zeroes read back and the range is reported deallocated. */
	cr_assert_eq(do_io(b, BS_UNMAP, 1 << 20, 8192, NULL, 0), 0);
	cr_assert_eq(do_io(b, BS_READ, 1 << 20, 16384, &rv, 1), 0);
	for (int i = 0; i < 8192; i++)
		cr_assert_eq(r[i], 0, "byte %d not zero after unmap", i);
	cr_assert_eq(memcmp(w + 8192, r + 8192, 8192), 0, "unmap went past its range");
	if (b->can_unmap)
		cr_assert_eq(bs_map(b, 1 << 20, 8192, &ext), BS_DEALLOCATED);

	cr_assert_eq(do_io(b, BS_WRITE_ZEROES, (1 << 20) + 8192, 4096, NULL, 0), 0);
	cr_assert_eq(do_io(b, BS_READ, 1 << 20, 16384, &rv, 1), 0);
	for (int i = 8192; i < 12288; i++)
		cr_assert_eq(r[i], 0, "byte %d not zero after write zeroes", i);
	cr_assert_eq(memcmp(w + 12288, r + 12288, 4096), 0);

	/* FUA goes through the ring too (RWF_DSYNC). */
	{
		struct waiter fw = { .io = { .op = BS_WRITE, .offset = 0, .len = 4096, .iov = wv,
					     .iovcnt = 1, .fua = true, .done = on_done } };

		cr_assert_eq(bs_submit(b, &fw.io), 0);
		run_until(&fw.fired, 1);
		cr_assert_eq(fw.io.result, 0);
	}
	cr_assert_eq(json_integer_value(status_of(b, "thread_ios")), 0,
		     "an I/O went to the worker threads");
	cr_assert_eq(json_integer_value(status_of(b, "threads")), 0, "worker threads started");
	cr_assert_eq(json_integer_value(status_of(b, "ring_ios")), 8);
	bs_destroy(b);
	free(w);
	free(r);
}

/* One large and one small read of a tmpfs file, the backstore opened by this thread pinned to
 * one CPU (as a loop is with gateway.loops > 1) or not, with io_engine ENGINE: how many went to
 * the worker threads, the data checked. The process itself may run on every CPU it started
 * with. */
static int tmpfs_reads_to_workers(bool pin_opener, enum bs_io_engine engine)
{
	char sdir[64], spath[96];
	struct bs_conf c;
	struct bs *b = NULL;
	cpu_set_t old, one;
	const uint32_t big = 512 * 1024;
	uint8_t *w = abuf(big, 0x6b), *r = abuf(big, 0);
	struct iovec wv = { w, big }, rv = { r, big };
	int n;

	snprintf(sdir, sizeof(sdir), "/dev/shm/test_bs_file.XXXXXX");
	if (!mkdtemp(sdir))
		cr_skip_test("no /dev/shm");
	snprintf(spath, sizeof(spath), "%s/lu.img", sdir);
	cr_assert_eq(sched_getaffinity(0, sizeof(old), &old), 0);
	if (CPU_COUNT(&old) < 2)
		cr_skip_test("this process may run on one CPU only");
	if (pin_opener) {
		CPU_ZERO(&one);
		CPU_SET(sched_getcpu(), &one);
		cr_assert_eq(sched_setaffinity(0, sizeof(one), &one), 0);
	}
	c = fconf(4 << 20);
	c.path = spath;
	c.io_engine = engine;
	cr_assert_eq(bs_create(&loop, &c, &b, &errs), 0);
	sched_setaffinity(0, sizeof(old), &old);
	cr_assert_eq(do_io(b, BS_WRITE, 1 << 20, big, &wv, 1), 0);
	cr_assert_eq(do_io(b, BS_READ, 1 << 20, big, &rv, 1), 0);
	cr_assert_eq(memcmp(w, r, big), 0, "the large read returned other data");
	memset(r, 0, 4096);
	rv.iov_len = 4096;
	cr_assert_eq(do_io(b, BS_READ, 1 << 20, 4096, &rv, 1), 0);
	cr_assert_eq(memcmp(w, r, 4096), 0);
	n = (int)json_integer_value(status_of(b, "thread_ios"));
	bs_destroy(b);
	unlink(spath);
	rmdir(sdir);
	free(w);
	free(r);
	return n;
}

/* With more than one CPU, a 512 KiB read of a tmpfs file is copied by a worker (overlapping
 * with the loop's sending); 4 KiB reads and writes stay inline. */
Test(bs_file, tmpfs_large_reads_overlap_with_cpus_to_spare)
{
	cr_assert_eq(tmpfs_reads_to_workers(false, BS_IO_AUTO), 1,
		     "the 512 KiB read was not the only worker I/O");
}

/* The same when the backstore is opened by a loop pinned to one CPU (gateway.loops > 1, the
 * default on several CPUs), with either engine: the process still has a CPU to spare, and its
 * workers run there. Asking the opening thread's mask kept every read on the loop (issue 28:
 * the kernel initiator's 512 KiB reads in the VM rig fell from 1.33x tgtd to 0.78x). */
Test(bs_file, tmpfs_large_reads_overlap_when_a_pinned_loop_opens_it)
{
	cr_assert_eq(tmpfs_reads_to_workers(true, BS_IO_URING), 1,
		     "io_uring, opened on a pinned loop: the 512 KiB read stayed on the loop");
	cr_assert_eq(tmpfs_reads_to_workers(true, BS_IO_THREADS), 1,
		     "threads, opened on a pinned loop: the 512 KiB read stayed on the loop");
}

/* A process that may run on one CPU only (the host bench's taskset) keeps every copy inline:
 * there the hand-off only adds wake-ups. */
Test(bs_file, overlap_needs_a_second_cpu_in_the_process_mask)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(0, &set);
	cr_assert_not(bs_file_overlap_cpus(&set), "one CPU, yet the reads would leave the loop");
	CPU_SET(3, &set);
	cr_assert(bs_file_overlap_cpus(&set), "two CPUs, yet the reads would stay on the loop");
}

Test(bs_file, uring_buffered_round_trip)
{
	struct bs_conf c = fconf(1 << 20);
	struct bs *b = NULL;
	uint8_t w[3000], r[3000];
	struct iovec wv = { w, sizeof(w) }, rv = { r, sizeof(r) };

	cr_assert_eq(bs_create(&loop, &c, &b, &errs), 0);
	cr_assert_str_eq(json_string_value(status_of(b, "io_engine")), "uring");
	for (size_t i = 0; i < sizeof(w); i++)
		w[i] = (uint8_t)(i ^ 0x5a);
	/* Not a whole number of blocks: buffered I/O takes any length. */
	cr_assert_eq(do_io(b, BS_WRITE, 4096 * 3 + 512, sizeof(w), &wv, 1), 0);
	cr_assert_eq(do_io(b, BS_FLUSH, 0, 0, NULL, 0), 0);
	memset(r, 0, sizeof(r));
	cr_assert_eq(do_io(b, BS_READ, 4096 * 3 + 512, sizeof(r), &rv, 1), 0);
	cr_assert_eq(memcmp(w, r, sizeof(w)), 0);
	bs_destroy(b);
}

Test(bs_file, io_engine_threads_forced)
{
	struct bs_conf c = fconf(1 << 20);
	struct bs *b;
	uint8_t *w = abuf(8192, 0x3c), *r = abuf(8192, 0);
	struct iovec wv = { w, 8192 }, rv = { r, 8192 };

	c.io_engine = BS_IO_THREADS;
	b = open_direct(&c);
	cr_assert_str_eq(json_string_value(status_of(b, "io_engine")), "threads");
	cr_assert_eq(json_integer_value(status_of(b, "threads")), 4);
	cr_assert_eq(do_io(b, BS_WRITE, 4096, 8192, &wv, 1), 0);
	cr_assert_eq(do_io(b, BS_READ, 4096, 8192, &rv, 1), 0);
	cr_assert_eq(memcmp(w, r, 8192), 0);
	cr_assert_eq(json_integer_value(status_of(b, "ring_ios")), 0);
	cr_assert_eq(json_integer_value(status_of(b, "thread_ios")), 2);
	bs_destroy(b);
	free(w);
	free(r);
}

/* The thread ids of this process, into tids (at most max); how many. */
static int task_ids(pid_t *tids, int max)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	cr_assert_not_null(d);
	while ((e = readdir(d)) && n < max) {
		if (e->d_name[0] != '.')
			tids[n++] = (pid_t)atoi(e->d_name);
	}
	closedir(d);
	return n;
}

static bool has_tid(const pid_t *tids, int n, pid_t t)
{
	for (int i = 0; i < n; i++) {
		if (tids[i] == t)
			return true;
	}
	return false;
}

/* A loop pinned to one CPU (gateway.loops > 1) opens the backstore: its worker threads run on
 * every CPU the process may use, not on the loop's one. */
Test(bs_file, workers_take_the_process_cpus_not_the_pinned_loops)
{
	struct bs_conf c = fconf(1 << 20);
	cpu_set_t all, one, got;
	pid_t before[64], after[64];
	int nb, na, first = -1, workers = 0;
	struct bs *b;

	cr_assert_eq(sched_getaffinity(0, sizeof(all), &all), 0);
	for (int i = 0; i < CPU_SETSIZE && first < 0; i++) {
		if (CPU_ISSET(i, &all))
			first = i;
	}
	CPU_ZERO(&one);
	CPU_SET(first, &one);
	cr_assert_eq(sched_setaffinity(0, sizeof(one), &one), 0);
	nb = task_ids(before, 64);

	c.io_engine = BS_IO_THREADS;
	cr_assert_eq(bs_create(&loop, &c, &b, &errs), 0);
	na = task_ids(after, 64);
	for (int i = 0; i < na; i++) {
		if (has_tid(before, nb, after[i]))
			continue;
		workers++;
		cr_assert_eq(sched_getaffinity(after[i], sizeof(got), &got), 0);
		cr_assert(CPU_EQUAL(&got, &all), "worker %d runs on %d CPUs, the process on %d",
			  (int)after[i], CPU_COUNT(&got), CPU_COUNT(&all));
	}
	cr_assert_eq(workers, 4, "%d new threads, 4 workers asked", workers);
	/* The opening thread keeps its own pin. */
	cr_assert_eq(sched_getaffinity(0, sizeof(got), &got), 0);
	cr_assert(CPU_EQUAL(&got, &one));
	bs_destroy(b);
	sched_setaffinity(0, sizeof(all), &all);
}

/* A seccomp filter without io_uring (as a strict service unit might have): auto falls back to
 * the worker threads, uring refuses to open. Criterion runs each test in its own process. */
Test(bs_file, io_uring_refused_by_seccomp_falls_back)
{
	struct sock_filter prog[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog fp = { .len = GW_ARRAY_SIZE(prog), .filter = prog };
	struct bs_conf c = fconf(1 << 20);
	struct bs *b = NULL;
	uint8_t w[4096], r[4096];
	struct iovec wv = { w, sizeof(w) }, rv = { r, sizeof(r) };

	cr_assert_eq(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
	cr_assert_eq(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fp), 0);

	c.io_engine = BS_IO_URING;
	cr_assert_eq(bs_create(&loop, &c, &b, &errs), -EPERM);
	cr_assert_null(b);

	c.io_engine = BS_IO_AUTO;
	cr_assert_eq(bs_create(&loop, &c, &b, &errs), 0);
	cr_assert_str_eq(json_string_value(status_of(b, "io_engine")), "threads");
	memset(w, 0xa5, sizeof(w));
	cr_assert_eq(do_io(b, BS_WRITE, 0, sizeof(w), &wv, 1), 0);
	cr_assert_eq(do_io(b, BS_READ, 0, sizeof(r), &rv, 1), 0);
	cr_assert_eq(memcmp(w, r, sizeof(w)), 0);
	bs_destroy(b);
}

/* More iovec entries than one READV/WRITEV takes: the kernel moves part, the rest is
 * resubmitted. And a read running past a file that shrank: the part past the end is zeroes. */
Test(bs_file, uring_short_transfers_resubmit_the_rest)
{
	enum { N = 1100 };
	struct bs_conf c = fconf(8 << 20);
	struct bs *b = open_direct(&c);
	uint8_t *w = abuf((size_t)N * 4096, 0), *r = abuf((size_t)N * 4096, 0);
	static struct iovec wv[N], rv[N];

	for (size_t i = 0; i < (size_t)N * 4096; i++)
		w[i] = (uint8_t)(i / 4096 + i);
	for (int i = 0; i < N; i++) {
		wv[i] = (struct iovec){ w + (size_t)i * 4096, 4096 };
		rv[i] = (struct iovec){ r + (size_t)i * 4096, 4096 };
	}
	cr_assert_eq(do_io(b, BS_WRITE, 4096, (uint64_t)N * 4096, wv, N), 0);
	cr_assert_eq(do_io(b, BS_READ, 4096, (uint64_t)N * 4096, rv, N), 0);
	cr_assert_eq(memcmp(w, r, (size_t)N * 4096), 0, "data differ after a split transfer");

	/* Shrink the file to end in the middle of the range read next. */
	cr_assert_eq(truncate(path, 4 * 4096), 0);
	memset(r, 0xee, 8 * 4096);
	cr_assert_eq(do_io(b, BS_READ, 2 * 4096, 4 * 4096, rv, 4), 0);
	cr_assert_eq(memcmp(r, w + 4096, 4096), 0, "the part before the end is the data");
	for (int i = 2 * 4096; i < 4 * 4096; i++)
		cr_assert_eq(r[i], 0, "byte %d past the end of the file is not zero", i);
	cr_assert_eq(r[4 * 4096], 0xee, "read past its iovec");
	bs_destroy(b);
	free(w);
	free(r);
}

/* n 4 KiB writes of blocks 0..n-1, block i filled with i + 1, all submitted at once. */
static void submit_writes(struct bs *b, struct iovec *v, struct waiter *w, uint8_t *data, int n)
{
	for (int i = 0; i < n; i++) {
		memset(data + i * 4096, i + 1, 4096);
		v[i] = (struct iovec){ data + i * 4096, 4096 };
		w[i] = (struct waiter){ .io = { .op = BS_WRITE, .offset = (uint64_t)i * 4096,
						.len = 4096, .iov = &v[i], .iovcnt = 1,
						.done = on_done } };
		cr_assert_eq(bs_submit(b, &w[i].io), 0);
	}
}

Test(bs_file, uring_queue_depth_bounds_what_is_in_flight)
{
	struct bs_conf c = fconf(1 << 20);
	struct bs *b;
	static struct iovec v[64];
	static struct waiter w[64];
	uint8_t *data = abuf(64 * 4096, 0);
	int fired = 0;

	c.queue_depth = 4;
	b = open_direct(&c);
	submit_writes(b, v, w, data, 64);
	cr_assert_eq(b->inflight, 64);
	cr_assert_eq(json_integer_value(status_of(b, "in_flight")), 4);
	cr_assert_eq(json_integer_value(status_of(b, "waiting")), 60);
	for (int n = 0; n < 400 && fired < 64; n++) {
		gw_loop_run_once(&loop, 50);
		cr_assert_leq(json_integer_value(status_of(b, "in_flight")), 4);
		fired = 0;
		for (int i = 0; i < 64; i++)
			fired += w[i].fired;
	}
	for (int i = 0; i < 64; i++) {
		cr_assert_eq(w[i].fired, 1, "io %d fired %d times", i, w[i].fired);
		cr_assert_eq(w[i].io.result, 0);
	}
	cr_assert_eq(json_integer_value(status_of(b, "peak_in_flight")), 4);
	cr_assert_eq(json_integer_value(status_of(b, "waiting")), 0);
	memset(data, 0, 4096);
	cr_assert_eq(do_io(b, BS_READ, 63 * 4096, 4096, &v[0], 1), 0);
	cr_assert_eq(data[0], 64);
	bs_destroy(b);
	free(data);
}

/* An error of the device comes back as -errno, which the SCSI core turns into sense as before:
 * here the file size limit (EFBIG) on a write through the ring. */
Test(bs_file, uring_error_reaches_the_result)
{
	struct bs_conf c = fconf(1 << 20);
	struct bs *b;
	uint8_t *w = abuf(4096, 0x11);
	struct iovec wv = { w, 4096 };
	struct rlimit rl = { 64 << 10, 64 << 10 };

	b = open_direct(&c);
	signal(SIGXFSZ, SIG_IGN);
	cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
	cr_assert_eq(do_io(b, BS_WRITE, 512 << 10, 4096, &wv, 1), -EFBIG);
	cr_assert_eq(do_io(b, BS_WRITE, 0, 4096, &wv, 1), 0, "a write below the limit failed");
	bs_destroy(b);
	free(w);
}

/* The owner may drop the backstore from the last I/O's done callback (a LUN removed when its
 * I/O drains): the ring is left alone after the callbacks start (ASan checks the rest). */
static struct bs *destroy_me;

static void on_done_destroy(struct bs_io *io)
{
	struct waiter *w = gw_container_of(io, struct waiter, io);

	w->fired++;
	cr_assert_eq(destroy_me->inflight, 0);
	bs_destroy(destroy_me);
	destroy_me = NULL;
}

Test(bs_file, uring_destroy_from_the_done_callback)
{
	struct bs_conf c = fconf(1 << 20);
	uint8_t *p = abuf(4096, 0x42);
	struct iovec v = { p, 4096 };
	struct waiter w = { .io = { .op = BS_WRITE, .offset = 8192, .len = 4096, .iov = &v,
				    .iovcnt = 1, .done = on_done_destroy } };

	destroy_me = open_direct(&c);
	cr_assert_eq(bs_submit(destroy_me, &w.io), 0);
	run_until(&w.fired, 1);
	cr_assert_eq(w.io.result, 0);
	cr_assert_null(destroy_me);
	free(p);
}

/*
 * The single-issuer ring (SINGLE_ISSUER | DEFER_TASKRUN, kernel 6.1): the configuration opens
 * the backstore on one thread, the LU's owner loop submits on its own; the ring becomes that
 * loop's at its first submit, and completions run there.
 */
struct on_loop {
	struct bs *b;
	struct waiter w[16];
	struct iovec v[16];
	int fired;		/* atomic */
	int off_thread;		/* atomic: completions not on the loop's thread */
	pthread_t owner;
};

static void on_loop_done(struct bs_io *io)
{
	struct waiter *w = gw_container_of(io, struct waiter, io);
	struct on_loop *o = io->priv;

	w->fired++;
	if (!pthread_equal(pthread_self(), o->owner))
		__atomic_add_fetch(&o->off_thread, 1, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&o->fired, 1, __ATOMIC_SEQ_CST);
}

static int on_loop_submit(void *arg)
{
	struct on_loop *o = arg;

	for (int i = 0; i < 16; i++) {
		int rc = bs_submit(o->b, &o->w[i].io);

		if (rc < 0)
			return rc;
	}
	return 0;
}

static int on_loop_destroy(void *arg)
{
	bs_destroy(arg);
	return 0;
}

static void on_loop_wait(struct on_loop *o, int want)
{
	for (int i = 0; i < 2000 && __atomic_load_n(&o->fired, __ATOMIC_SEQ_CST) < want; i++)
		usleep(10000);
	cr_assert_eq(__atomic_load_n(&o->fired, __ATOMIC_SEQ_CST), want);
}

static void on_loop_round(struct on_loop *o, enum bs_op op, uint8_t *data)
{
	__atomic_store_n(&o->fired, 0, __ATOMIC_SEQ_CST);
	for (int i = 0; i < 16; i++) {
		o->v[i] = (struct iovec){ data + i * 4096, 4096 };
		o->w[i] = (struct waiter){ .io = { .op = op, .offset = (uint64_t)i * 8192,
						   .len = 4096, .iov = &o->v[i], .iovcnt = 1,
						   .done = on_loop_done, .priv = o } };
	}
	cr_assert_eq(gw_loop_call(&loop, on_loop_submit, o), 0);
	on_loop_wait(o, 16);
	for (int i = 0; i < 16; i++) {
		cr_assert_eq(o->w[i].fired, 1, "io %d fired %d times", i, o->w[i].fired);
		cr_assert_eq(o->w[i].io.result, 0, "io %d: %d", i, o->w[i].io.result);
	}
}

Test(bs_file, uring_single_issuer_is_the_owner_loop_not_the_opener)
{
	struct bs_conf c = fconf(1 << 20);
	static struct on_loop o;
	uint8_t *data = abuf(16 * 4096, 0);

	o.b = open_direct(&c);
	cr_assert_str_eq(json_string_value(status_of(o.b, "ring")), "single_issuer",
			 "this kernel (>= 6.1) has SINGLE_ISSUER and DEFER_TASKRUN");
	cr_assert_eq(gw_loop_thread_start(&loop, -1, "test-bs-l1"), 0);
	o.owner = loop.thread;
	for (int i = 0; i < 16; i++)
		memset(data + i * 4096, 0xa0 + i, 4096);
	on_loop_round(&o, BS_WRITE, data);
	memset(data, 0, 16 * 4096);
	on_loop_round(&o, BS_READ, data);
	for (int i = 0; i < 16; i++)
		cr_assert_eq(data[i * 4096 + 4095], 0xa0 + i, "block %d read back wrong", i);
	cr_assert_eq(__atomic_load_n(&o.off_thread, __ATOMIC_SEQ_CST), 0,
		     "completions ran off the owner loop");
	cr_assert_eq(json_integer_value(status_of(o.b, "ring_ios")), 32);
	cr_assert_eq(json_integer_value(status_of(o.b, "thread_ios")), 0);
	cr_assert_eq(gw_loop_call(&loop, on_loop_destroy, o.b), 0);
	cr_assert_eq(gw_loop_thread_stop(&loop), 0);
	free(data);
}

/* Closing with I/O in the ring and beyond its depth: every one completes, once, and its data
 * is on the file. */
Test(bs_file, uring_close_with_io_in_flight_loses_nothing)
{
	struct bs_conf c = fconf(1 << 20);
	static struct iovec v[32];
	static struct waiter w[32];
	uint8_t *data = abuf(32 * 4096, 0);
	struct bs *b;

	c.queue_depth = 4;
	b = open_direct(&c);
	submit_writes(b, v, w, data, 32);
	bs_destroy(b);
	for (int i = 0; i < 32; i++) {
		cr_assert_eq(w[i].fired, 1, "io %d fired %d times", i, w[i].fired);
		cr_assert_eq(w[i].io.result, 0, "io %d: %d", i, w[i].io.result);
	}
	b = open_direct(&c);
	memset(data, 0, 32 * 4096);
	v[0] = (struct iovec){ data, 32 * 4096 };
	cr_assert_eq(do_io(b, BS_READ, 0, 32 * 4096, &v[0], 1), 0);
	for (int i = 0; i < 32; i++)
		cr_assert_eq(data[i * 4096], i + 1, "block %d lost", i);
	bs_destroy(b);
	free(data);
}

/* A kernel that refuses the flags (before 6.1; forced here by the test knob): the ring of
 * before, and the state says which. */
Test(bs_file, uring_task_work_ring_when_single_issuer_refused)
{
	struct bs_conf c = fconf(1 << 20);
	uint8_t *p = abuf(4096, 0x5a);
	struct iovec v = { p, 4096 };
	struct bs *b;

	bs_file_classic_ring = true;
	b = open_direct(&c);
	cr_assert_str_eq(json_string_value(status_of(b, "io_engine")), "uring");
	cr_assert_str_eq(json_string_value(status_of(b, "ring")), "task_work");
	cr_assert_eq(do_io(b, BS_WRITE, 4096, 4096, &v, 1), 0);
	memset(p, 0, 4096);
	cr_assert_eq(do_io(b, BS_READ, 4096, 4096, &v, 1), 0);
	cr_assert_eq(p[100], 0x5a);
	cr_assert_eq(json_integer_value(status_of(b, "ring_ios")), 2);
	bs_destroy(b);
	bs_file_classic_ring = false;
	free(p);
}

static void count_event(struct bs *bs, enum bs_event ev, void *arg)
{
	(void)bs;
	if (ev == BS_EV_CAPACITY)
		(*(int *)arg)++;
}

static off_t file_size(void)
{
	struct stat st;

	cr_assert_eq(stat(path, &st), 0);
	return st.st_size;
}

/* Online resize: the file grows before the LU hears of it, shrinks only when allowed and
 * after, and a size measured again is the file's. */
Test(bs_file, resize_in_service)
{
	struct bs_conf c = fconf(1 << 20);
	struct bs *b = NULL;
	uint64_t out = 0;
	struct stat st;
	int events = 0;
	char *why;

	cr_assert_eq(bs_create(&loop, &c, &b, &errs), 0);
	bs_set_event_cb(b, count_event, &events);
	cr_assert(bs_can_resize(b));

	cr_assert_eq(bs_resize_prepare(b, 2 << 20, 0, &out, &errs), 0);
	cr_expect_eq(out, 2 << 20);
	cr_expect_eq(file_size(), 2 << 20, "the file grows at prepare");
	cr_expect_eq(b->size, 1 << 20, "the LU still sees the old size");
	cr_expect_eq(events, 0);
	bs_resize_commit(b, out);
	cr_expect_eq(b->size, 2 << 20);
	cr_expect_eq(b->conf.size, 2 << 20);
	cr_expect_eq(events, 1, "one capacity event");

	/* Smaller: refused without BS_RESIZE_SHRINK, and nothing changes. */
	cr_expect_eq(bs_resize_prepare(b, 1 << 20, 0, &out, &errs), -EPERM);
	why = gw_errlist_join(&errs);
	cr_expect_not_null(why && strstr(why, "shrinking"), "%s", why);
	free(why);
	cr_expect_eq(file_size(), 2 << 20);
	cr_expect_eq(b->size, 2 << 20);
	cr_expect_eq(bs_resize_prepare(b, (2 << 20) + 100, 0, &out, &errs), -EINVAL,
		     "not whole blocks");
	cr_assert_eq(bs_resize_prepare(b, 1 << 20, BS_RESIZE_SHRINK, &out, &errs), 0);
	cr_expect_eq(file_size(), 2 << 20, "nothing cut before the LU stops addressing it");
	bs_resize_commit(b, out);
	cr_expect_eq(b->size, 1 << 20);
	cr_expect_eq(file_size(), 1 << 20, "cut after");
	cr_expect_eq(events, 2);

	/* Thick growth allocates the new range. */
	cr_assert_eq(bs_resize_prepare(b, 3 << 20, BS_RESIZE_ALLOCATE, &out, &errs), 0);
	cr_assert_eq(stat(path, &st), 0);
	cr_expect_eq(st.st_size, 3 << 20);
	if (b->can_unmap)	/* a file system that keeps holes shows the allocation */
		cr_expect_geq((uint64_t)st.st_blocks * 512, 2 << 20, "%llu bytes allocated",
			      (unsigned long long)st.st_blocks * 512);
	bs_resize_commit(b, out);

	/* Grown from outside: measured again (size 0). */
	cr_assert_eq(truncate(path, 5 << 20), 0);
	cr_assert_eq(bs_resize_prepare(b, 0, 0, &out, &errs), 0);
	cr_expect_eq(out, 5 << 20);
	bs_resize_commit(b, out);
	cr_expect_eq(b->size, 5 << 20);
	cr_expect_eq(events, 4);
	bs_destroy(b);
}
