// SPDX-License-Identifier: MIT
/*
 * The dashboard's file resolver: what a URL path may reach under the folder, and what it never
 * may (parent folders, hidden files, symlinks out of the folder).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api_http.h"

static char base[64], root[96];

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f, "%s", path);
	fputs(text, f);
	fclose(f);
}

static void setup(void)
{
	char p[160];

	snprintf(base, sizeof(base), "/tmp/isergw-static.XXXXXX");
	cr_assert_not_null(mkdtemp(base));
	snprintf(root, sizeof(root), "%s/webui", base);
	cr_assert_eq(mkdir(root, 0755), 0);
	snprintf(p, sizeof(p), "%s/index.html", root);
	put(p, "<!doctype html>");
	snprintf(p, sizeof(p), "%s/app.js", root);
	put(p, "1;");
	snprintf(p, sizeof(p), "%s/.env", root);
	put(p, "hidden");
	snprintf(p, sizeof(p), "%s/img", root);
	cr_assert_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/img/logo.svg", root);
	put(p, "<svg/>");
	snprintf(p, sizeof(p), "%s/secret.txt", base);
	put(p, "outside");
	snprintf(p, sizeof(p), "%s/out.txt", root);
	cr_assert_eq(symlink("../secret.txt", p), 0);
	snprintf(p, sizeof(p), "%s/abs.txt", root);
	cr_assert_eq(symlink("/etc/passwd", p), 0);
	snprintf(p, sizeof(p), "%s/alias.js", root);
	cr_assert_eq(symlink("app.js", p), 0);
	/* A sibling whose name starts like the root must not pass a prefix check. */
	snprintf(p, sizeof(p), "%s/webui2", base);
	cr_assert_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/webui2/x.js", base);
	put(p, "2;");
	snprintf(p, sizeof(p), "%s/sib.js", root);
	cr_assert_eq(symlink("../webui2/x.js", p), 0);
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	cr_assert_eq(system(cmd), 0);
}

static int resolve(const char *path, char **file)
{
	return api_static_resolve(root, path, file);
}

static void expect_file(const char *path, const char *name)
{
	char *f = NULL, want[192], *rroot = realpath(root, NULL);

	cr_assert_not_null(rroot);
	snprintf(want, sizeof(want), "%s/%s", rroot, name);
	cr_assert_eq(resolve(path, &f), 0, "%s", path);
	cr_assert_str_eq(f, want);
	free(f);
	free(rroot);
}

static void expect_refused(const char *path)
{
	char *f = (char *)1;

	cr_assert_eq(resolve(path, &f), -ENOENT, "%s should be refused", path);
	cr_assert_null(f);
}

TestSuite(api_static, .init = setup, .fini = teardown);

Test(api_static, the_page_and_its_files)
{
	expect_file("/", "index.html");
	expect_file("/ui", "index.html");
	expect_file("/ui/", "index.html");
	expect_file("/ui/app.js", "app.js");
	expect_file("/ui/img/logo.svg", "img/logo.svg");
	/* A link that stays inside the folder is followed. */
	expect_file("/ui/alias.js", "app.js");
}

Test(api_static, not_static_paths)
{
	cr_assert_not(api_static_path("/api/v1/health"));
	cr_assert_not(api_static_path("/metrics"));
	cr_assert_not(api_static_path("/uix/app.js"));
	cr_assert(api_static_path("/"));
	cr_assert(api_static_path("/ui/app.js"));
	expect_refused("/index.html");
	expect_refused("/api/v1/health");
}

Test(api_static, traversal_is_refused)
{
	expect_refused("/ui/../secret.txt");
	expect_refused("/ui/img/../../secret.txt");
	expect_refused("/ui/img/../app.js");	/* even when it would stay inside */
	expect_refused("/ui/./app.js");
	expect_refused("/ui//app.js");
	expect_refused("/ui/..");
	expect_refused("/ui/img/");
	expect_refused("/ui/..\\secret.txt");
	expect_refused("/ui/.env");
	expect_refused("/ui/nope.js");
}

Test(api_static, symlinks_out_of_the_folder_are_refused)
{
	expect_refused("/ui/out.txt");
	expect_refused("/ui/abs.txt");
	expect_refused("/ui/sib.js");
}

Test(api_static, a_missing_root_serves_nothing)
{
	char *f = NULL;

	cr_assert_eq(api_static_resolve("/nonexistent/isergw-webui", "/", &f), -ENOENT);
	cr_assert_null(f);
}

Test(api_static, content_types)
{
	cr_assert_str_eq(api_static_type("index.html"), "text/html; charset=utf-8");
	cr_assert_str_eq(api_static_type("app.JS"), "text/javascript; charset=utf-8");
	cr_assert_str_eq(api_static_type("style.css"), "text/css; charset=utf-8");
	cr_assert_str_eq(api_static_type("logo.svg"), "image/svg+xml");
	cr_assert_str_eq(api_static_type("blob"), "application/octet-stream");
	cr_assert_str_eq(api_static_type(".js"), "application/octet-stream");
}
