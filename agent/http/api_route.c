// SPDX-License-Identifier: MIT
/*
 * Route matching: a path is split on '/' and compared segment by segment with each pattern;
 * "{name}" segments capture. A path that matches some pattern under another method is a 405
 * (with Allow), one that matches none is a 404.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"

#define API_SEG_MAX 256

/* Compares one pattern with path; captures into params (malloc'ed) when `capture`. */
static int route_cmp(const char *pat, const char *path, char **params, unsigned int *n,
		     bool capture)
{
	unsigned int k = 0;

	while (*pat && *path) {
		const char *pe = strchr(pat, '/'), *se = strchr(path, '/');
		size_t pl = pe ? (size_t)(pe - pat) : strlen(pat);
		size_t sl = se ? (size_t)(se - path) : strlen(path);

		if (pl > 2 && pat[0] == '{' && pat[pl - 1] == '}') {
			if (sl == 0 || sl > API_SEG_MAX || k >= API_MAX_PARAMS)
				goto mismatch_capture;
			if (capture) {
				params[k] = strndup(path, sl);
				if (!params[k])
					goto mismatch_capture;
			}
			k++;
		} else if (pl != sl || memcmp(pat, path, pl)) {
			goto mismatch;
		}
		pat += pl;
		path += sl;
		if (*pat != *path)
			goto mismatch;
		if (*pat == '/') {
			pat++;
			path++;
		}
	}
	if (*pat || *path)
		goto mismatch;
	if (n)
		*n = k;
	return 0;
mismatch_capture:
	if (capture) {
		while (k--) {
			free(params[k]);
			params[k] = NULL;
		}
	}
	return -EINVAL;
mismatch:
	if (capture) {
		while (k--) {
			free(params[k]);
			params[k] = NULL;
		}
	}
	return -ENOENT;
}

const struct api_route *api_route_match(const struct api_route *tbl, const char *method,
					const char *path, char **params, unsigned int *nparams,
					char *allow, size_t allow_len, int *err)
{
	const struct api_route *rt;
	bool path_seen = false, bad = false;
	size_t used = 0;

	if (allow && allow_len)
		allow[0] = 0;
	*nparams = 0;
	for (rt = tbl; rt->method; rt++) {
		int r = route_cmp(rt->pattern, path, NULL, NULL, false);

		if (r == -EINVAL)
			bad = true;
		if (r)
			continue;
		path_seen = true;
		if (!strcmp(rt->method, method) ||
		    (!strcmp(method, "HEAD") && !strcmp(rt->method, "GET"))) {
			if (route_cmp(rt->pattern, path, params, nparams, true)) {
				*err = -ENOMEM;
				return NULL;
			}
			*err = 0;
			return rt;
		}
		if (allow && used + strlen(rt->method) + 3 < allow_len)
			used += (size_t)snprintf(allow + used, allow_len - used, "%s%s",
						 used ? ", " : "", rt->method);
	}
	*err = path_seen ? -EOPNOTSUPP : bad ? -EINVAL : -ENOENT;
	return NULL;
}
