// SPDX-License-Identifier: MIT
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"

static int h(struct api_req *r)
{
	(void)r;
	return 0;
}

static const struct api_route tbl[] = {
	{ .method = "GET", .pattern = "/api/v1/targets", .fn = h },
	{ .method = "POST", .pattern = "/api/v1/targets", .fn = h },
	{ .method = "GET", .pattern = "/api/v1/targets/{target}", .fn = h },
	{ .method = "DELETE", .pattern = "/api/v1/targets/{target}", .fn = h },
	{ .method = "GET", .pattern = "/api/v1/targets/{target}/luns/{lun}", .fn = h },
	{ .method = NULL },
};

static void free_params(char **p, unsigned int n)
{
	while (n--)
		free(p[n]);
}

Test(api_route, exact_paths_and_methods)
{
	char *p[API_MAX_PARAMS] = { 0 }, allow[64];
	unsigned int n;
	int err;

	cr_assert_eq(api_route_match(tbl, "GET", "/api/v1/targets", p, &n, allow, 64, &err),
		     &tbl[0]);
	cr_assert_eq(n, 0);
	cr_assert_eq(api_route_match(tbl, "POST", "/api/v1/targets", p, &n, allow, 64, &err),
		     &tbl[1]);
	/* HEAD is served by GET. */
	cr_assert_eq(api_route_match(tbl, "HEAD", "/api/v1/targets", p, &n, allow, 64, &err),
		     &tbl[0]);
}

Test(api_route, captures_come_back_in_order)
{
	char *p[API_MAX_PARAMS] = { 0 };
	unsigned int n;
	int err;

	cr_assert_eq(api_route_match(tbl, "GET", "/api/v1/targets/iqn.2026-11.x:y/luns/3", p, &n,
				     NULL, 0, &err), &tbl[4]);
	cr_assert_eq(n, 2);
	cr_assert_str_eq(p[0], "iqn.2026-11.x:y");
	cr_assert_str_eq(p[1], "3");
	free_params(p, n);
}

Test(api_route, unknown_paths_are_404_and_wrong_methods_405_with_allow)
{
	char *p[API_MAX_PARAMS] = { 0 }, allow[64];
	unsigned int n;
	int err;

	cr_assert_null(api_route_match(tbl, "GET", "/api/v1/nope", p, &n, allow, 64, &err));
	cr_assert_eq(err, -ENOENT);
	cr_assert_null(api_route_match(tbl, "GET", "/api/v1/targets/a/b", p, &n, allow, 64,
				       &err));
	cr_assert_eq(err, -ENOENT);
	cr_assert_null(api_route_match(tbl, "PUT", "/api/v1/targets/x", p, &n, allow, 64, &err));
	cr_assert_eq(err, -EOPNOTSUPP);
	cr_assert_str_eq(allow, "GET, DELETE");
	cr_assert_null(p[0], "no capture leaks out of a failed match");
	cr_assert_null(api_route_match(tbl, "GET", "/api/v1/targets/", p, &n, allow, 64, &err));
	cr_assert_null(api_route_match(tbl, "GET", "/api/v1/targets//luns/1", p, &n, allow, 64,
				       &err));
	cr_assert_neq(err, 0);
}
