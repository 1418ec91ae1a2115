// SPDX-License-Identifier: MIT
/*
 * What every backstore gets from bs.c, whatever its kind (a ram one stands in): a bad
 * configuration refused with the key it is about, I/O outside the device or a write to a
 * read-only one refused before it starts (and without a callback), the in-flight count, and
 * the backstore object's configuration parsed, checked and printed by one table.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <string.h>

#include "bs.h"
#include "gw_loop.h"
#include "mp.h"

static struct gw_loop loop;
static struct gw_errlist errs;

static void setup(void)
{
	cr_assert_eq(gw_loop_init(&loop), 0);
	gw_errlist_init(&errs);
}

static void teardown(void)
{
	gw_errlist_fini(&errs);
	gw_loop_fini(&loop);
}

TestSuite(bs, .init = setup, .fini = teardown);

struct bad_conf {
	struct bs_conf c;
	const char *field;
};

Test(bs, a_bad_configuration_names_its_key)
{
	struct mp_conf no_paths = { 0 };
	const struct bad_conf cases[] = {
		{ { .type = 99, .block_size = 512, .size = 4096, .threads = 1 }, "type" },
		{ { .type = BS_TYPE_RAM, .block_size = 1024, .size = 4096, .threads = 1 },
		  "block_size" },
		{ { .type = BS_TYPE_FILE, .block_size = 512, .threads = 1 }, "path" },
		{ { .type = BS_TYPE_BLOCK, .block_size = 512, .path = (char *)"", .threads = 1 },
		  "path" },
		{ { .type = BS_TYPE_REMOTE, .block_size = 512, .threads = 1 }, "paths" },
		{ { .type = BS_TYPE_REMOTE, .block_size = 512, .threads = 1, .remote = &no_paths },
		  "paths" },
		{ { .type = BS_TYPE_NULL, .block_size = 512, .threads = 1 }, "size" },
		{ { .type = BS_TYPE_RAM, .block_size = 4096, .size = 6144, .threads = 1 }, "size" },
		{ { .type = BS_TYPE_RAM, .block_size = 512, .size = 4096, .threads = 0 }, "threads" },
		{ { .type = BS_TYPE_RAM, .block_size = 512, .size = 4096, .threads = 65 },
		  "threads" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct bs *b = (struct bs *)&errs;	/* must be reset */

		gw_errlist_fini(&errs);
		gw_errlist_init(&errs);
		cr_expect_eq(bs_create(&loop, &cases[i].c, &b, &errs), -EINVAL, "case %zu", i);
		cr_expect_null(b, "case %zu", i);
		cr_assert_eq(errs.n, 1, "case %zu: %zu errors", i, errs.n);
		cr_expect_str_eq(errs.v[0].field, cases[i].field, "case %zu", i);
	}
}

struct waiter {
	struct bs_io io;
	int fired;
};

static void on_done(struct bs_io *io)
{
	gw_container_of(io, struct waiter, io)->fired++;
}

static int submit(struct bs *b, struct waiter *w, enum bs_op op, uint64_t off, uint64_t len,
		  struct iovec *v)
{
	memset(w, 0, sizeof(*w));
	w->io.op = op;
	w->io.offset = off;
	w->io.len = len;
	w->io.iov = v;
	w->io.iovcnt = v ? 1 : 0;
	w->io.done = on_done;
	return bs_submit(b, &w->io);
}

static void run_until(struct waiter *w)
{
	for (int i = 0; i < 200 && !w->fired; i++)
		gw_loop_run_once(&loop, 20);
	cr_assert_eq(w->fired, 1, "done fired %d times", w->fired);
}

Test(bs, io_outside_the_device_is_refused_without_a_callback)
{
	struct bs_conf c = { .type = BS_TYPE_RAM, .size = 1 << 16, .block_size = 512,
			     .threads = 1 };
	uint8_t buf[512];
	struct iovec v = { buf, sizeof(buf) };
	struct waiter w;
	struct bs *b;

	cr_assert_eq(bs_create(&loop, &c, &b, &errs), 0);
	cr_expect_eq(submit(b, &w, BS_READ, 1 << 16, 512, &v), -EINVAL, "just past the end");
	cr_expect_eq(submit(b, &w, BS_WRITE, (1 << 16) - 512, 1024, &v), -EINVAL, "across it");
	cr_expect_eq(submit(b, &w, BS_READ, UINT64_MAX - 100, 512, &v), -EINVAL,
		     "offset + len wraps");
	cr_expect_eq(submit(b, &w, (enum bs_op)42, 0, 512, &v), -EINVAL, "unknown operation");
	gw_loop_run_once(&loop, 0);
	cr_expect_eq(w.fired, 0);
	cr_expect_eq(b->inflight, 0);

	/* The last block is inside. */
	cr_assert_eq(submit(b, &w, BS_READ, (1 << 16) - 512, 512, &v), 0);
	cr_expect_eq(b->inflight, 1);
	run_until(&w);
	cr_expect_eq(w.io.result, 0);
	cr_expect_eq(b->inflight, 0, "completion gives the slot back");
	bs_destroy(b);
}

Test(bs, a_readonly_backstore_refuses_changes_but_reads_and_flushes)
{
	struct bs_conf c = { .type = BS_TYPE_RAM, .size = 1 << 16, .block_size = 512,
			     .threads = 1, .readonly = true };
	uint8_t buf[512];
	struct iovec v = { buf, sizeof(buf) };
	struct waiter w;
	struct bs *b;

	cr_assert_eq(bs_create(&loop, &c, &b, &errs), 0);
	cr_expect_eq(submit(b, &w, BS_WRITE, 0, 512, &v), -EROFS);
	cr_expect_eq(submit(b, &w, BS_UNMAP, 0, 512, NULL), -EROFS);
	cr_expect_eq(submit(b, &w, BS_WRITE_ZEROES, 0, 512, NULL), -EROFS);
	cr_expect_eq(b->inflight, 0);
	cr_assert_eq(submit(b, &w, BS_READ, 0, 512, &v), 0);
	run_until(&w);
	cr_assert_eq(submit(b, &w, BS_FLUSH, 0, 0, NULL), 0);
	run_until(&w);
	cr_expect_eq(w.io.result, 0);
	bs_destroy(b);
}

static int parse(const char *text, struct bs_conf *c)
{
	json_error_t jerr;
	json_t *in = json_loads(text, 0, &jerr);
	int rc;

	cr_assert_not_null(in, "%s", jerr.text);
	memset(c, 0, sizeof(*c));
	rc = conf_bs_parse(c, in, "backstores[0]", &errs);
	json_decref(in);
	return rc;
}

Test(bs, configuration_defaults_and_round_trip)
{
	struct bs_conf c, again;
	json_t *out;
	char *text;

	cr_assert_eq(parse("{\"type\": \"file\", \"path\": \"/srv/lun0.img\", \"size\": \"1G\"}",
			   &c), 0);
	cr_expect_eq(c.type, BS_TYPE_FILE);
	cr_expect_eq(c.size, 1ull << 30);
	cr_expect_eq(c.block_size, 512, "default block size");
	cr_expect_eq(c.threads, 4, "default worker threads");
	cr_expect_not(c.readonly);
	cr_expect_null(c.remote);
	out = conf_bs_to_json(&c, false);
	cr_assert_not_null(out);
	text = json_dumps(out, 0);
	cr_assert_eq(parse(text, &again), 0, "what is printed parses back");
	cr_expect_eq(again.size, c.size);
	cr_expect_str_eq(again.path, c.path);
	free(text);
	json_decref(out);
	conf_bs_free(&c);
	conf_bs_free(&again);
}

Test(bs, configuration_errors_name_the_key)
{
	struct bs_conf c;

	cr_expect_eq(parse("{\"type\": \"ram\", \"size\": \"1M\", \"block_size\": 1024}", &c),
		     -EINVAL);
	cr_assert_geq(errs.n, 1);
	cr_expect_str_eq(errs.v[0].field, "backstores[0].block_size");
	conf_bs_free(&c);
	gw_errlist_fini(&errs);
	gw_errlist_init(&errs);

	/* A multipath key on a local backstore is a mistake worth saying. */
	cr_expect_eq(parse("{\"type\": \"ram\", \"size\": \"1M\", \"failback\": \"manual\"}", &c),
		     -EINVAL);
	cr_assert_eq(errs.n, 1);
	cr_expect_str_eq(errs.v[0].field, "backstores[0].failback");
	cr_expect(strstr(errs.v[0].msg, "remote") != NULL, "%s", errs.v[0].msg);
	conf_bs_free(&c);
}

Test(bs, remote_configuration_keeps_paths_and_policies)
{
	struct bs_conf c;
	json_t *out;

	cr_assert_eq(parse("{\"type\": \"remote\", \"failback\": \"manual\", \"paths\": ["
			   "{\"url\": \"iscsi://192.0.2.1/iqn.2026-11.org.test:t/0\"},"
			   "{\"url\": \"iscsi://192.0.2.2/iqn.2026-11.org.test:t/0\"}]}", &c), 0,
		     "%s", errs.n ? errs.v[0].msg : "");
	cr_assert_not_null(c.remote);
	cr_expect_eq(c.remote->npaths, 2);
	cr_expect_str_eq(c.remote->failback, "manual");
	out = conf_bs_to_json(&c, true);
	cr_assert_not_null(out);
	cr_expect_str_eq(json_string_value(json_object_get(out, "failback")), "manual");
	cr_expect_eq(json_array_size(json_object_get(out, "paths")), 2);
	json_decref(out);
	conf_bs_free(&c);
	cr_expect_null(c.remote);
}

/* COMPARE AND WRITE by the backstore: only a remote LUN whose back end has it does it; the
 * others leave it to the SCSI core, and a refusal never calls back. */
Test(bs, compare_and_write_is_the_backstores_only_when_it_says_so)
{
	struct bs_conf c = { .type = BS_TYPE_RAM, .size = 1 << 16, .block_size = 512,
			     .threads = 1 };
	uint8_t buf[1024];
	struct iovec v = { buf, sizeof(buf) };
	struct waiter w;
	struct bs *b;

	cr_assert_eq(bs_create(&loop, &c, &b, &errs), 0);
	cr_expect_eq(b->caw_blocks, 0, "ram: the SCSI core compares and writes");
	memset(&w, 0, sizeof(w));
	w.io.offset = 0;
	w.io.len = 512;
	w.io.iov = &v;
	w.io.iovcnt = 1;
	w.io.done = on_done;
	cr_expect_eq(bs_submit_caw(b, &w.io), -EOPNOTSUPP);
	/* Claimed without ops behind it (a remote LUN's limit on a ram store): still refused. */
	b->caw_blocks = 8;
	cr_expect_eq(bs_submit_caw(b, &w.io), -EOPNOTSUPP);
	gw_loop_run_once(&loop, 0);
	cr_expect_eq(w.fired, 0);
	cr_expect_eq(b->inflight, 0);
	bs_destroy(b);
}

/* Online resize: only kinds that can say so take it; a read-only one does not grow. (The file
 * kind's own part: test_bs_file.c, resize_in_service.) */
Test(bs, resize_only_where_the_kind_can)
{
	struct bs_conf ram = { .type = BS_TYPE_RAM, .size = 1 << 16, .block_size = 512,
			       .threads = 1 };
	struct bs_conf nul = { .type = BS_TYPE_NULL, .size = 1 << 16, .block_size = 512,
			       .threads = 1, .readonly = true };
	uint64_t out = 1;
	struct bs *b;

	cr_assert_eq(bs_create(&loop, &ram, &b, &errs), 0);
	cr_expect_not(bs_can_resize(b));
	cr_expect_eq(bs_resize_prepare(b, 1 << 17, 0, &out, &errs), -EOPNOTSUPP);
	cr_expect_eq(out, 1 << 16, "the size it has");
	cr_expect_str_eq(errs.v[0].field, "size");
	cr_expect_eq(b->size, 1 << 16);
	bs_destroy(b);

	cr_assert_eq(bs_create(&loop, &nul, &b, &errs), 0);
	cr_expect(bs_can_resize(b));
	cr_expect_eq(bs_resize_prepare(b, 1 << 17, 0, &out, &errs), -EROFS);
	cr_expect_eq(bs_resize_prepare(b, 0, 0, &out, &errs), 0, "measuring writes nothing");
	cr_expect_eq(out, 1 << 16);
	cr_assert_eq(bs_resize_prepare(b, 1 << 15, BS_RESIZE_SHRINK, &out, &errs), 0);
	bs_resize_commit(b, out);
	cr_expect_eq(b->size, 1 << 15);
	bs_destroy(b);
}
