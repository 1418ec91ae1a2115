// SPDX-License-Identifier: MIT
/* The answer cache behind GET /metrics and GET /targets: hits, age limit, replacement. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>

#include "api_rcache.h"

Test(api_rcache, answer_cache)
{
	struct api_rcache c = { 0 };
	uint64_t k1[API_RCACHE_KEYS] = { 7, 1, 0, 0 }, k2[API_RCACHE_KEYS] = { 8, 1, 0, 0 };
	size_t len = 0;
	char *t;

	cr_expect_null(api_rcache_get(&c, k1, 0, 0, &len), "empty");
	api_rcache_put(&c, k1, "hello", 5, 1000);
	t = api_rcache_get(&c, k1, 0, 999999, &len);
	cr_assert_not_null(t);
	cr_expect_eq(len, 5);
	cr_expect_str_eq(t, "hello");
	free(t);
	cr_expect_null(api_rcache_get(&c, k2, 0, 1000, &len), "another key misses");
	t = api_rcache_get(&c, k1, 500, 1499, &len);
	cr_expect_not_null(t, "younger than the age limit");
	free(t);
	cr_expect_null(api_rcache_get(&c, k1, 500, 1500, &len), "as old as the limit misses");
	api_rcache_put(&c, k2, "bye", 3, 2000);
	cr_expect_null(api_rcache_get(&c, k1, 0, 2000, &len), "replaced");
	cr_expect_eq(c.builds, 2u);
	cr_expect_eq(c.hits, 2u);
	api_rcache_fini(&c);
}
