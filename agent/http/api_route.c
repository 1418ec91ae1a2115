// SPDX-License-Identifier: MIT
/*
 * Route matching: a path is split on '/' and compared segment by segment with each pattern;
 * "{name}" segments capture. A path that matches some pattern under another method is a 405
 * (with Allow), one that matches none is a 404.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_http.h"
#include "gw_buf.h"

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

/* Length of the UTF-8 sequence at s (n bytes left), 0 when it is not valid UTF-8: no
 * overlong forms, no surrogates, nothing above U+10FFFF. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned int cp, min;
	size_t len, i;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0) {
		len = 2;
		cp = s[0] & 0x1f;
		min = 0x80;
	} else if ((s[0] & 0xf0) == 0xe0) {
		len = 3;
		cp = s[0] & 0x0f;
		min = 0x800;
	} else if ((s[0] & 0xf8) == 0xf0) {
		len = 4;
		cp = s[0] & 0x07;
		min = 0x10000;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

/* A decoded segment the router accepts: not empty, not "." or "..". */
static bool segment_ok(const char *s, size_t n, const char **why)
{
	if (n == 0) {
		*why = "an empty path segment";
		return false;
	}
	if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.')) {
		*why = "a dot segment (. or ..) in the path";
		return false;
	}
	return true;
}

int api_route_path(const char *target, char **out, const char **why)
{
	size_t n = strcspn(target, "?"), i, o = 0, seg = 0;
	char *p;
	int hi, lo;

	*out = NULL;
	*why = NULL;
	if (n == 0 || target[0] != '/') {
		*why = "the path must begin with /";
		return -EINVAL;
	}
	p = malloc(n + 1);
	if (!p)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)target[i];

		if (c == '/') {
			/* The segment that just ended; "/" alone and one trailing slash are fine. */
			if (o > 0 && !segment_ok(p + seg, o - seg, why))
				goto bad;
			p[o++] = '/';
			seg = o;
			continue;
		}
		if (c == '%') {
			hi = i + 1 < n ? gw_hex_val(target[i + 1]) : -1;
			lo = i + 2 < n ? gw_hex_val(target[i + 2]) : -1;
			if (hi < 0 || lo < 0) {
				*why = "a malformed percent escape";
				goto bad;
			}
			c = (unsigned char)(hi << 4 | lo);
			i += 2;
			if (c == '/') {
				/* It would split a segment the client sent as one. */
				*why = "an encoded / inside a path segment";
				goto bad;
			}
		}
		if (c < 0x20 || c == 0x7f) {
			*why = c ? "a control character in the path" : "a NUL in the path";
			goto bad;
		}
		p[o++] = (char)c;
	}
	if (o > seg && !segment_ok(p + seg, o - seg, why))
		goto bad;
	p[o] = 0;
	for (i = 0; i < o;) {
		size_t l = utf8_len((const unsigned char *)p + i, o - i);

		if (!l) {
			*why = "the path is not valid UTF-8";
			goto bad;
		}
		i += l;
	}
	*out = p;
	return 0;
bad:
	free(p);
	return -EINVAL;
}

int api_route_query(const char *target, const char **why)
{
	const char *q = strchr(target, '?');
	size_t n, i, o = 0;
	unsigned char *d;
	int hi, lo, rc = 0;

	*why = NULL;
	if (!q)
		return 0;
	q++;
	n = strlen(q);
	d = malloc(n + 1);
	if (!d)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)q[i];

		if (c == '%') {
			hi = i + 1 < n ? gw_hex_val(q[i + 1]) : -1;
			lo = i + 2 < n ? gw_hex_val(q[i + 2]) : -1;
			if (hi < 0 || lo < 0) {
				*why = "a malformed percent escape in the query";
				goto bad;
			}
			c = (unsigned char)(hi << 4 | lo);
			i += 2;
		}
		if (c < 0x20 || c == 0x7f) {
			*why = c ? "a control character in the query" : "a NUL in the query";
			goto bad;
		}
		d[o++] = c;
	}
	for (i = 0; i < o;) {
		size_t l = utf8_len(d + i, o - i);

		if (!l) {
			*why = "the query is not valid UTF-8";
			goto bad;
		}
		i += l;
	}
	goto out;
bad:
	rc = -EINVAL;
out:
	free(d);
	return rc;
}
