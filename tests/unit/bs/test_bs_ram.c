// SPDX-License-Identifier: MIT
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "bs.h"
#include "gw_loop.h"

static struct gw_loop loop;
static struct bs *bs;
static struct gw_errlist errs;

struct waiter {
	struct bs_io io;
	int fired;
};

static void on_done(struct bs_io *io)
{
	struct waiter *w = gw_container_of(io, struct waiter, io);

	w->fired++;
}

static void run_until(struct waiter *w)
{
	for (int i = 0; i < 200 && !w->fired; i++)
		gw_loop_run_once(&loop, 50);
	cr_assert_eq(w->fired, 1, "completion fired %d times", w->fired);
}

static struct bs *make_ram(uint64_t size, bool ro)
{
	struct bs_conf c = { .type = BS_TYPE_RAM, .size = size, .block_size = 512,
			     .readonly = ro, .threads = 1 };
	struct bs *b = NULL;

	cr_assert_eq(bs_create(&loop, &c, &b, &errs), 0);
	return b;
}

static void setup(void)
{
	cr_assert_eq(gw_loop_init(&loop), 0);
	gw_errlist_init(&errs);
	bs = make_ram(1 << 20, false);
}

static void teardown(void)
{
	bs_destroy(bs);
	gw_errlist_fini(&errs);
	gw_loop_fini(&loop);
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
	run_until(&w);
	return w.io.result;
}

TestSuite(bs_ram, .init = setup, .fini = teardown);

Test(bs_ram, write_read_back_multi_iov)
{
	uint8_t a[100], b[312], c[612], r[1024];
	struct iovec wv[3] = { { a, sizeof(a) }, { b, sizeof(b) }, { c, sizeof(c) } };
	struct iovec rv[2] = { { r, 7 }, { r + 7, sizeof(r) - 7 } };

	memset(a, 0x11, sizeof(a));
	memset(b, 0x22, sizeof(b));
	memset(c, 0x33, sizeof(c));
	cr_assert_eq(do_io(bs, BS_WRITE, 4096 + 512, 1024, wv, 3), 0);
	memset(r, 0, sizeof(r));
	cr_assert_eq(do_io(bs, BS_READ, 4096 + 512, 1024, rv, 2), 0);
	cr_assert_eq(memcmp(r, a, 100), 0);
	cr_assert_eq(memcmp(r + 100, b, 312), 0);
	cr_assert_eq(memcmp(r + 412, c, 612), 0);
	cr_assert_eq(bs->inflight, 0);
}

Test(bs_ram, unmap_reads_zeroes_across_pages)
{
	static uint8_t buf[3 * 4096];
	struct iovec v = { buf, sizeof(buf) };

	memset(buf, 0xaa, sizeof(buf));
	cr_assert_eq(do_io(bs, BS_WRITE, 0, sizeof(buf), &v, 1), 0);
	cr_assert_eq(do_io(bs, BS_UNMAP, 512, 2 * 4096, NULL, 0), 0);
	cr_assert_eq(do_io(bs, BS_READ, 0, sizeof(buf), &v, 1), 0);
	for (size_t i = 0; i < sizeof(buf); i++) {
		uint8_t want = (i >= 512 && i < 512 + 2 * 4096) ? 0 : 0xaa;

		cr_assert_eq(buf[i], want, "byte %zu is %#x", i, buf[i]);
	}
	cr_assert(bs->can_unmap);
}

Test(bs_ram, out_of_range_and_readonly_rejected_without_callback)
{
	uint8_t buf[512];
	struct iovec v = { buf, sizeof(buf) };
	struct bs *ro = make_ram(1 << 16, true);

	cr_assert_eq(do_io(bs, BS_READ, (1 << 20) - 256, 512, &v, 1), -EINVAL);
	cr_assert_eq(do_io(ro, BS_WRITE, 0, 512, &v, 1), -EROFS);
	cr_assert_eq(do_io(ro, BS_READ, 0, 512, &v, 1), 0);
	cr_assert_eq(bs->inflight, 0);
	bs_destroy(ro);
}

Test(bs_ram, missing_size_names_the_key)
{
	struct bs_conf c = { .type = BS_TYPE_RAM, .block_size = 512, .threads = 1 };
	struct bs *b = NULL;

	cr_assert_eq(bs_create(&loop, &c, &b, &errs), -EINVAL);
	cr_assert_null(b);
	cr_assert_geq(errs.n, 1);
	cr_assert_str_eq(errs.v[0].field, "size");
}

Test(bs_ram, null_reads_zeroes_and_drops_writes)
{
	struct bs_conf c = { .type = BS_TYPE_NULL, .size = 1 << 20, .block_size = 4096,
			     .threads = 1 };
	struct bs *n = NULL;
	uint8_t buf[4096];
	struct iovec v = { buf, sizeof(buf) };

	cr_assert_eq(bs_create(&loop, &c, &n, &errs), 0);
	memset(buf, 0x5a, sizeof(buf));
	cr_assert_eq(do_io(n, BS_WRITE, 0, sizeof(buf), &v, 1), 0);
	cr_assert_eq(do_io(n, BS_READ, 0, sizeof(buf), &v, 1), 0);
	for (size_t i = 0; i < sizeof(buf); i++)
		cr_assert_eq(buf[i], 0);
	bs_destroy(n);
}
