// SPDX-License-Identifier: MIT
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "gw_buf.h"

Test(buf, append_grows_and_keeps_bytes)
{
	struct gw_buf b;
	char chunk[100];

	gw_buf_init(&b);
	for (int i = 0; i < 100; i++) {
		memset(chunk, 'a' + i % 26, sizeof(chunk));
		cr_assert_eq(gw_buf_append(&b, chunk, sizeof(chunk)), 0);
	}
	cr_assert_eq(b.len, 10000);
	cr_assert_geq(b.cap, b.len);
	for (int i = 0; i < 100; i++)
		cr_expect_eq(b.data[i * 100 + 99], 'a' + i % 26);
	gw_buf_fini(&b);
	cr_expect_null(b.data);
	cr_expect_eq(b.len, 0);
}

Test(buf, printf_long_and_short)
{
	struct gw_buf b;
	char big[500];
	char *s;

	gw_buf_init(&b);
	cr_assert_eq(gw_buf_printf(&b, "%s=%d;", "MaxBurstLength", 262144), 0);
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	cr_assert_eq(gw_buf_printf(&b, "%s", big), 0);
	cr_assert_eq(b.len, strlen("MaxBurstLength=262144;") + 499);
	s = gw_buf_steal(&b);
	cr_assert_not_null(s);
	cr_expect_eq(strncmp(s, "MaxBurstLength=262144;xxx", 25), 0);
	cr_expect_eq(strlen(s), 22 + 499);
	cr_expect_null(b.data);
	cr_expect_eq(b.len, 0);
	free(s);
}

Test(buf, consume_and_steal_empty)
{
	struct gw_buf b;
	char *s;

	gw_buf_init(&b);
	gw_buf_append(&b, "hello world", 11);
	gw_buf_consume(&b, 6);
	cr_assert_eq(b.len, 5);
	cr_expect_eq(memcmp(b.data, "world", 5), 0);
	gw_buf_consume(&b, 100);
	cr_expect_eq(b.len, 0);
	gw_buf_reset(&b);
	s = gw_buf_steal(&b);
	cr_assert_str_eq(s, "");
	free(s);
	gw_buf_fini(&b);
}

Test(pool, reuses_objects_and_honours_cap)
{
	struct gw_pool p;
	void *objs[10];

	gw_pool_init(&p, 24, 10);
	for (int i = 0; i < 10; i++) {
		objs[i] = gw_pool_get(&p);
		cr_assert_not_null(objs[i]);
		cr_expect_eq((uintptr_t)objs[i] % _Alignof(max_align_t), 0);
		memset(objs[i], i, 24);
	}
	cr_expect_null(gw_pool_get(&p), "cap of 10 objects not enforced");
	cr_expect_eq(p.in_use, 10);
	cr_expect_eq(p.allocated, 10);
	for (int i = 0; i < 10; i++)
		for (int j = 0; j < 24; j++)
			cr_assert_eq(((uint8_t *)objs[i])[j], i, "objects overlap");
	gw_pool_put(&p, objs[3]);
	gw_pool_put(&p, NULL);
	cr_expect_eq(p.in_use, 9);
	cr_expect_eq(gw_pool_get(&p), objs[3], "freed object not reused");
	cr_expect_eq(p.allocated, 10, "pool allocated past its free list");
	for (int i = 0; i < 10; i++)
		gw_pool_put(&p, objs[i]);
	cr_expect_eq(p.in_use, 0);
	gw_pool_fini(&p);
}

Test(pool, uncapped_grows_in_chunks)
{
	struct gw_pool p;
	void *objs[300];

	gw_pool_init(&p, 3, 0);
	for (int i = 0; i < 300; i++) {
		objs[i] = gw_pool_get(&p);
		cr_assert_not_null(objs[i]);
		*(uint8_t *)objs[i] = (uint8_t)i;
	}
	cr_expect_eq(p.in_use, 300);
	for (int i = 0; i < 300; i++)
		cr_assert_eq(*(uint8_t *)objs[i], (uint8_t)i);
	for (int i = 0; i < 300; i++)
		gw_pool_put(&p, objs[i]);
	gw_pool_fini(&p);
}
