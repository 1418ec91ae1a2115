// SPDX-License-Identifier: MIT
/* gzip for the hot GETs: what a scraper gets when it asks for gzip, and when it does not. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "api_http.h"

Test(api_gzip, accept_encoding)
{
	cr_expect(api_accepts_gzip("gzip"));
	cr_expect(api_accepts_gzip("gzip, deflate"));
	cr_expect(api_accepts_gzip("deflate,gzip;q=0.5"));
	cr_expect(api_accepts_gzip("identity, GZIP"));
	cr_expect_not(api_accepts_gzip(NULL));
	cr_expect_not(api_accepts_gzip(""));
	cr_expect_not(api_accepts_gzip("deflate"));
	cr_expect_not(api_accepts_gzip("gzip;q=0"));
	cr_expect_not(api_accepts_gzip("gzip; q=0.000, identity"));
	cr_expect_not(api_accepts_gzip("x-gzipped"));
}

Test(api_gzip, gzip_round_trip)
{
	char in[20000], out[20000];
	size_t zlen = 0, i;
	char *z;
	z_stream s;

	for (i = 0; i < sizeof(in); i++)
		in[i] = "isergw_lun_read_latency_seconds_bucket "[i % 39];
	z = api_gzip(in, sizeof(in), &zlen);
	cr_assert_not_null(z);
	cr_expect_lt(zlen, sizeof(in) / 10);
	cr_expect_eq((unsigned char)z[0], 0x1f, "gzip magic");
	cr_expect_eq((unsigned char)z[1], 0x8b);
	memset(&s, 0, sizeof(s));
	cr_assert_eq(inflateInit2(&s, 15 + 16), Z_OK);
	s.next_in = (Bytef *)z;
	s.avail_in = (uInt)zlen;
	s.next_out = (Bytef *)out;
	s.avail_out = sizeof(out);
	cr_expect_eq(inflate(&s, Z_FINISH), Z_STREAM_END);
	cr_expect_eq(s.total_out, sizeof(in));
	cr_expect_eq(memcmp(in, out, sizeof(in)), 0);
	inflateEnd(&s);
	free(z);
}
