// SPDX-License-Identifier: MIT
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api_http.h"

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

/* path_refused TARGET: api_route_path gives 400 material (-EINVAL with a reason), no path. */
static void path_refused(const char *target)
{
	const char *why = NULL;
	char *out = (char *)1;

	cr_assert_eq(api_route_path(target, &out, &why), -EINVAL, "%s was accepted", target);
	cr_assert_null(out, "%s", target);
	cr_assert_not_null(why, "%s", target);
}

static void path_is(const char *target, const char *want)
{
	const char *why = NULL;
	char *out = NULL;

	cr_assert_eq(api_route_path(target, &out, &why), 0, "%s: %s", target, why);
	cr_assert_str_eq(out, want);
	free(out);
}

Test(api_route_path, decodes_once_and_drops_the_query)
{
	path_is("/api/v1/targets", "/api/v1/targets");
	path_is("/api/v1/targets?x=%00", "/api/v1/targets");
	path_is("/api/v1/targets/iqn.2026-11.org.isergw%3Ademo",
		"/api/v1/targets/iqn.2026-11.org.isergw:demo");
	/* Decoded once: %2500 is the text "%00", not a NUL. */
	path_is("/api/v1/targets/a%2500", "/api/v1/targets/a%00");
	/* A decoded '?' stays in its segment instead of cutting the path there. */
	path_is("/api/v1/targets/a%3Fb", "/api/v1/targets/a?b");
	path_is("/", "/");
	path_is("/ui/", "/ui/");
	path_is("/api/v1/targets/", "/api/v1/targets/");
	path_is("/api/v1/targets/%C3%A9t%C3%A9", "/api/v1/targets/\xc3\xa9t\xc3\xa9");
	path_is("/api/v1/targets/...", "/api/v1/targets/...");
}

Test(api_route_path, a_nul_or_control_character_is_refused)
{
	path_refused("/api/v1/targets/%00/luns/0");
	path_refused("/api/v1/targets/iqn.2026-11.org.isergw:demo%00junk");
	path_refused("/api/v1/targets/%00");
	path_refused("/ui/app.js%00.png");
	path_refused("/api/v1/targets/a%0ab");
	path_refused("/api/v1/targets/a%7f");
}

Test(api_route_path, malformed_escapes_are_refused)
{
	path_refused("/api/v1/targets/%");
	path_refused("/api/v1/targets/%4");
	path_refused("/api/v1/targets/%zz");
	path_refused("/api/v1/targets/%4g");
}

Test(api_route_path, an_encoded_slash_is_refused)
{
	path_refused("/api/v1/targets/a%2Fluns");
	path_refused("/api/v1/targets%2fx");
	path_refused("/ui/..%2fsecret.txt");
}

Test(api_route_path, invalid_utf8_is_refused)
{
	path_refused("/api/v1/targets/%ff");
	path_refused("/api/v1/targets/%c3");		/* truncated */
	path_refused("/api/v1/targets/%c0%af");		/* overlong '/' */
	path_refused("/api/v1/targets/%ed%a0%80");	/* a surrogate */
	path_refused("/api/v1/targets/%f4%90%80%80");	/* above U+10FFFF */
	path_refused("/api/v1/targets/\xff");		/* raw, not encoded */
}

Test(api_route_path, dot_and_empty_segments_are_refused)
{
	path_refused("/api/v1/targets/..");
	path_refused("/api/v1/targets/../portals");
	path_refused("/api/v1/./targets");
	path_refused("/api/v1/targets/%2e%2e");
	path_refused("/api/v1/targets/%2E");
	path_refused("/api/v1/targets/.%2e/x");
	path_refused("/ui/../secret.txt");
	path_refused("/api/v1//targets");
	path_refused("//etc/passwd");
	path_refused("/api/v1/targets//");
	path_refused("/.");
}

Test(api_route_path, a_target_not_starting_with_a_slash_is_refused)
{
	path_refused("");
	path_refused("*");
	path_refused("http://127.0.0.1/api/v1/targets");
	path_refused("?x=1");
}

Test(api_route_query, plain_and_encoded_values_pass)
{
	const char *why;

	cr_assert_eq(api_route_query("/api/v1/metrics", &why), 0);
	cr_assert_eq(api_route_query("/x?dry_run", &why), 0);
	cr_assert_eq(api_route_query("/x?dry_run=true&y=a%20b+c&z=%C3%A9", &why), 0);
	cr_assert_eq(api_route_query("/x?", &why), 0);
}

Test(api_route_query, a_decoded_nul_or_control_character_is_refused)
{
	const char *why;

	/* MHD decodes query values and a %00 would end one early: refused whole. */
	cr_assert_eq(api_route_query("/x?dry_run=%00", &why), -EINVAL);
	cr_assert_str_eq(why, "a NUL in the query");
	cr_assert_eq(api_route_query("/x?a=1&dry_run=true%00false", &why), -EINVAL);
	cr_assert_eq(api_route_query("/x?a=%0a", &why), -EINVAL);
	cr_assert_str_eq(why, "a control character in the query");
	cr_assert_eq(api_route_query("/x?a=%7F", &why), -EINVAL);
}

Test(api_route_query, malformed_escapes_and_invalid_utf8_are_refused)
{
	const char *why;

	cr_assert_eq(api_route_query("/x?a=%zz", &why), -EINVAL);
	cr_assert_eq(api_route_query("/x?a=%4", &why), -EINVAL);
	cr_assert_eq(api_route_query("/x?a=%ff", &why), -EINVAL);
	cr_assert_str_eq(why, "the query is not valid UTF-8");
	cr_assert_eq(api_route_query("/x?a=%c0%af", &why), -EINVAL);
}
