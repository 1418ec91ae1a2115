// SPDX-License-Identifier: MIT
/*
 * gzip for the largest answer, /metrics: Prometheus asks for it (Accept-Encoding: gzip), and
 * a scrape of a gateway with many LUNs is mostly repeated names and labels, so it shrinks
 * several times over; compressed once per cache rebuild, not per scrape.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "api_http.h"

char *api_gzip(const char *in, size_t len, size_t *out_len)
{
	z_stream z;
	uLong cap;
	char *out;
	int r;

	memset(&z, 0, sizeof(z));
	/* windowBits 15 + 16: a gzip header and trailer, as Content-Encoding: gzip wants. */
	if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return NULL;
	cap = deflateBound(&z, (uLong)len) + 32;
	out = malloc(cap);
	if (!out) {
		deflateEnd(&z);
		return NULL;
	}
	z.next_in = (Bytef *)(uintptr_t)in;
	z.avail_in = (uInt)len;
	z.next_out = (Bytef *)out;
	z.avail_out = (uInt)cap;
	r = deflate(&z, Z_FINISH);
	*out_len = z.total_out;
	deflateEnd(&z);
	if (r != Z_STREAM_END) {
		free(out);
		return NULL;
	}
	return out;
}

bool api_accepts_gzip(const char *accept_encoding)
{
	const char *p = accept_encoding;

	/* "gzip", "gzip;q=0.5", "deflate, gzip"; "gzip;q=0" refuses it. */
	while (p && (p = strcasestr(p, "gzip"))) {
		const char *e = p + 4;

		if ((p == accept_encoding || p[-1] == ' ' || p[-1] == ',') &&
		    (*e == 0 || *e == ',' || *e == ';' || *e == ' ')) {
			e += strspn(e, " ");
			if (*e == ';') {
				e += 1 + strspn(e + 1, " ");
				if (!strncasecmp(e, "q=", 2))
					return strtod(e + 2, NULL) > 0;
			}
			return true;
		}
		p = e;
	}
	return false;
}
