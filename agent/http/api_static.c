// SPDX-License-Identifier: MIT
/*
 * The dashboard's static files (docs/DASHBOARD.md): GET/HEAD of "/" and "/ui/..." from
 * --webui-dir, without a token, as the page holds no data; everything it shows comes from the
 * API with the operator's token. Files are small, so each is read whole into the reply.
 *
 * Nothing outside the folder is ever served: "." / ".." / hidden segments are refused before
 * the file system is asked, and the resolved path (symlinks followed) must still lie under the
 * resolved root, so a link pointing out of the folder is a 404 like a missing file.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api_http.h"
#include "gw_log.h"

#define STATIC_FILE_MAX (8u << 20)

static const char *const static_types[][2] = {
	{ ".html", "text/html; charset=utf-8" },
	{ ".css", "text/css; charset=utf-8" },
	{ ".js", "text/javascript; charset=utf-8" },
	{ ".json", "application/json" },
	{ ".svg", "image/svg+xml" },
	{ ".png", "image/png" },
	{ ".ico", "image/x-icon" },
	{ ".txt", "text/plain; charset=utf-8" },
	{ ".woff2", "font/woff2" },
};

const char *api_static_type(const char *name)
{
	size_t n = strlen(name), i;

	for (i = 0; i < GW_ARRAY_SIZE(static_types); i++) {
		size_t e = strlen(static_types[i][0]);

		if (n > e && !strcasecmp(name + n - e, static_types[i][0]))
			return static_types[i][1];
	}
	return "application/octet-stream";
}

/* The file a URL path names, relative to the dashboard folder; NULL: not a static path. */
static const char *static_rel(const char *path)
{
	if (!strcmp(path, "/") || !strcmp(path, "/ui") || !strcmp(path, "/ui/"))
		return "index.html";
	if (!strncmp(path, "/ui/", 4))
		return path + 4;
	return NULL;
}

bool api_static_path(const char *path)
{
	return static_rel(path) != NULL;
}

/* Every segment must be a plain name: not empty, not ".", "..", or hidden, no backslash. */
static int rel_check(const char *rel)
{
	const char *s = rel;

	if (!*rel || strlen(rel) >= PATH_MAX / 2 || strchr(rel, '\\'))
		return -ENOENT;
	while (*s) {
		size_t n = strcspn(s, "/");

		if (n == 0 || s[0] == '.')
			return -ENOENT;
		s += n;
		if (*s == '/')
			s++;
		else
			break;
		if (!*s)	/* a trailing slash names a folder: never served */
			return -ENOENT;
	}
	return 0;
}

int api_static_resolve(const char *root, const char *path, char **out)
{
	char *rroot = NULL, *full = NULL, *rfull = NULL;
	const char *rel = static_rel(path);
	size_t n;
	int r;

	*out = NULL;
	if (!rel)
		return -ENOENT;
	r = rel_check(rel);
	if (r)
		return r;
	rroot = realpath(root, NULL);
	if (!rroot)
		return errno == ENOMEM ? -ENOMEM : -ENOENT;
	if (asprintf(&full, "%s/%s", rroot, rel) < 0) {
		full = NULL;
		r = -ENOMEM;
		goto out;
	}
	rfull = realpath(full, NULL);
	if (!rfull) {
		r = errno == ENOMEM ? -ENOMEM : -ENOENT;
		goto out;
	}
	n = strlen(rroot);
	/* "/" as the root: everything is under it, and the path starts with its only slash. */
	if (strncmp(rfull, rroot, n) || (n > 1 && rfull[n] != '/')) {
		r = -ENOENT;
		goto out;
	}
	*out = rfull;
	rfull = NULL;
	r = 0;
out:
	free(rroot);
	free(full);
	free(rfull);
	return r;
}

static int read_whole(const char *file, char **data, size_t *len, struct stat *st)
{
	int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	size_t got = 0;
	char *buf;
	int r = 0;

	if (fd < 0)
		return -ENOENT;
	if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
		r = -ENOENT;
		goto out;
	}
	if ((uint64_t)st->st_size > STATIC_FILE_MAX) {
		gw_warn("http", "%s is over %u bytes: not served", file, STATIC_FILE_MAX);
		r = -EFBIG;
		goto out;
	}
	buf = malloc((size_t)st->st_size + 1);
	if (!buf) {
		r = -ENOMEM;
		goto out;
	}
	while (got < (size_t)st->st_size) {
		ssize_t k = read(fd, buf + got, (size_t)st->st_size - got);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	*data = buf;
	*len = got;
out:
	close(fd);
	return r;
}

/* Does If-None-Match (a list, or "*") name this ETag? */
static bool etag_matches(const char *inm, const char *etag)
{
	size_t n = strlen(etag);
	const char *p;

	if (!inm)
		return false;
	if (!strcmp(inm, "*"))
		return true;
	for (p = strstr(inm, etag); p; p = strstr(p + 1, etag))
		if (p[n] == 0 || p[n] == ',' || p[n] == ' ')
			return true;
	return false;
}

static bool static_serve(void *ctx, struct api_req *r, const char *upath)
{
	const char *root = ctx;
	char *path, *file = NULL, *data = NULL, etag[64], lm[64];
	size_t len = 0;
	struct stat st;
	struct tm tm;
	int rc;

	/* The whole path, never a truncated copy: a cut name could name another file. */
	path = strdup(upath);
	if (!path || !api_static_path(path)) {
		free(path);
		return false;
	}
	if (strcmp(r->method, "GET") && strcmp(r->method, "HEAD")) {
		api_reply_header(r, "Allow", "GET, HEAD");
		api_reply_err(r, API_E_METHOD, NULL, "the dashboard's files are GET only");
		goto out;
	}
	if (!root || !*root) {
		api_reply_err(r, API_E_NOT_FOUND, NULL,
			      "no dashboard: the agent runs without --webui-dir");
		goto out;
	}
	rc = api_static_resolve(root, path, &file);
	if (!rc)
		rc = read_whole(file, &data, &len, &st);
	if (rc == -ENOMEM) {
		api_reply_err(r, API_E_INTERNAL, NULL, "out of memory");
		goto out;
	}
	if (rc) {
		/* Say which folder when the page itself is missing: a packaging mistake. */
		if (!strcmp(static_rel(path), "index.html"))
			api_reply_err(r, API_E_NOT_FOUND, NULL, "no dashboard in %s (--webui-dir)",
				      root);
		else
			api_reply_err(r, API_E_NOT_FOUND, NULL, "no file %s", path);
		goto out;
	}
	snprintf(etag, sizeof(etag), "\"%llx-%llx\"", (unsigned long long)st.st_size,
		 (unsigned long long)st.st_mtim.tv_sec * 1000000000ull +
			 (unsigned long long)st.st_mtim.tv_nsec);
	api_reply_header(r, "ETag", etag);
	if (gmtime_r(&st.st_mtim.tv_sec, &tm) &&
	    strftime(lm, sizeof(lm), "%a, %d %b %Y %H:%M:%S GMT", &tm))
		api_reply_header(r, "Last-Modified", lm);
	/* Revalidate every time: an upgraded package must never leave an old script running. */
	api_reply_header(r, "Cache-Control", "no-cache");
	api_reply_header(r, "X-Content-Type-Options", "nosniff");
	if (!strcmp(api_static_type(file), static_types[0][1])) {
		api_reply_header(r, "Content-Security-Policy",
				 "default-src 'self'; img-src 'self' data:; "
				 "frame-ancestors 'none'; base-uri 'none'; form-action 'none'");
		api_reply_header(r, "Referrer-Policy", "no-referrer");
	}
	if (etag_matches(api_req_header(r, "If-None-Match"), etag)) {
		api_reply_text(r, 304, NULL, NULL, 0);
		goto out;
	}
	api_reply_text(r, 200, api_static_type(file), data, len);
	data = NULL;
out:
	free(data);
	free(file);
	free(path);
	return true;
}

const struct api_http_hook api_static_hook = {
	.serve = static_serve,
};
