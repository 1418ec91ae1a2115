// SPDX-License-Identifier: MIT
/* CHAP target side: digests, encodings and whole exchanges as an initiator would drive them. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isc_chap.h"

/* Parses a text segment written as a C literal with embedded NULs. */
#define KV(l, lit) cr_assert_eq(isc_kvlist_parse((l), (lit), sizeof(lit) - 1), 0)

static const struct isc_chap_conf one_way = {
	.user = (char *)"host1",
	.secret = (char *)"0123456789ab",
	.mutual_user = (char *)"",
	.mutual_secret = (char *)"",
};

static const struct isc_chap_conf mutual = {
	.user = (char *)"host1",
	.secret = (char *)"0123456789ab",
	.mutual_user = (char *)"gw",
	.mutual_secret = (char *)"ba9876543210xyz",
};

/*
 * Known answers for id 0x2a, secret "0123456789ab", challenge bytes 00..0f, computed with the
 * OpenSSL command line (not with this code):
 *   { printf '\x2a'; printf '0123456789ab'; printf '\x00\x01...\x0f'; } > kat.bin
 *   openssl dgst -md5|-sha1|-sha256|-sha3-256 -r kat.bin
 */
static const uint8_t kat_chal[16] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 };

static void check_kat(int alg, const char *hex)
{
	uint8_t out[32], want[32];
	size_t n = isc_chap_digest_len(alg);

	cr_assert_eq(isc_chap_decode(hex, want, sizeof(want)), (int)n);
	cr_assert_eq(isc_chap_response(alg, 0x2a, "0123456789ab", 12, kat_chal, 16, out), 0);
	cr_assert_arr_eq(out, want, n, "CHAP_A=%d response differs from openssl dgst", alg);
}

Test(chap, kat_md5)
{
	check_kat(ISC_CHAP_MD5, "0xd9133a4b081255937e6059007cf0434e");
}

Test(chap, kat_sha1)
{
	check_kat(ISC_CHAP_SHA1, "0xcf46f4dc664733be585973e7193790bba802600d");
}

Test(chap, kat_sha256)
{
	check_kat(ISC_CHAP_SHA256,
		  "0xb613b6ea17c9350f1e050baa06b3e7884437bf4137cdc3562f2a3b9e8added42");
}

Test(chap, kat_sha3_256)
{
	check_kat(ISC_CHAP_SHA3_256,
		  "0xd8f3717d8bfa73b4a187fcdd8de5441dca1fd2ee12143e2aa1b8e0488fb9f81e");
}

Test(chap, decode_hex_and_base64)
{
	uint8_t out[32];

	cr_assert_eq(isc_chap_decode("0xDEADbeef", out, sizeof(out)), 4);
	cr_assert_eq(out[0], 0xde);
	cr_assert_eq(out[3], 0xef);
	/* odd digit count: leading zero nibble */
	cr_assert_eq(isc_chap_decode("0X123", out, sizeof(out)), 2);
	cr_assert_eq(out[0], 0x01);
	cr_assert_eq(out[1], 0x23);
	/* base64 (openssl base64 of de ad be ef x4) */
	cr_assert_eq(isc_chap_decode("0b3q2+796tvu/erb7v3q2+7w==", out, sizeof(out)), 16);
	cr_assert_eq(out[0], 0xde);
	cr_assert_eq(out[15], 0xef);
	cr_assert_eq(isc_chap_decode("0BAAE=", out, sizeof(out)), 2);
	cr_assert_eq(out[1], 0x01);

	cr_assert_lt(isc_chap_decode("deadbeef", out, sizeof(out)), 0);
	cr_assert_lt(isc_chap_decode("0x", out, sizeof(out)), 0);
	cr_assert_lt(isc_chap_decode("0xzz", out, sizeof(out)), 0);
	cr_assert_lt(isc_chap_decode("0b3q2", out, sizeof(out)), 0);	/* not 4-aligned */
	cr_assert_lt(isc_chap_decode("0b3q*+", out, sizeof(out)), 0);
	cr_assert_lt(isc_chap_decode("0xdeadbeef", out, 3), 0);		/* too long */
}

/* Runs one request through c, parses the answer into ans. */
static int step(struct isc_chap *c, const void *req, size_t len, struct isc_kvlist *ans)
{
	struct isc_kvlist kl;
	struct gw_buf b;
	int r;

	isc_kvlist_init(&kl);
	gw_buf_init(&b);
	cr_assert_eq(isc_kvlist_parse(&kl, req, len), 0);
	r = isc_chap_process(c, &kl, &b);
	isc_kvlist_fini(ans);
	cr_assert_eq(isc_kvlist_parse(ans, b.data, b.len), 0);
	gw_buf_fini(&b);
	isc_kvlist_fini(&kl);
	return r;
}

#define STEP(c, lit, ans) step((c), (lit), sizeof(lit) - 1, (ans))

/* Drives AuthMethod and CHAP_A; leaves the target's id/challenge in *id / chal. */
static void start_chap(struct isc_chap *c, const char *alg_list, int want_alg,
		       struct isc_kvlist *ans, uint8_t *id, uint8_t *chal, int *chal_len)
{
	char req[64];
	unsigned long v;

	cr_assert_eq(STEP(c, "AuthMethod=CHAP,None", ans), ISC_CHAP_CONTINUE);
	cr_assert_str_eq(isc_kvlist_get(ans, "AuthMethod"), "CHAP");
	snprintf(req, sizeof(req), "CHAP_A=%s", alg_list);
	cr_assert_eq(step(c, req, strlen(req) + 1, ans), ISC_CHAP_CONTINUE);
	cr_assert_eq(atoi(isc_kvlist_get(ans, "CHAP_A")), want_alg);
	v = strtoul(isc_kvlist_get(ans, "CHAP_I"), NULL, 10);
	cr_assert_leq(v, 255);
	*id = (uint8_t)v;
	cr_assert_eq(strncmp(isc_kvlist_get(ans, "CHAP_C"), "0x", 2), 0);
	*chal_len = isc_chap_decode(isc_kvlist_get(ans, "CHAP_C"), chal, 64);
	cr_assert_geq(*chal_len, 16);
}

static void hexstr(char *out, const uint8_t *p, size_t n)
{
	size_t i;

	strcpy(out, "0x");
	for (i = 0; i < n; i++)
		sprintf(out + 2 + 2 * i, "%02x", p[i]);
}

Test(chap, one_way_success_sha256)
{
	struct isc_chap c;
	struct isc_kvlist ans;
	uint8_t id, chal[64], r[32];
	char req[256], hex[80];
	int clen;

	isc_kvlist_init(&ans);
	cr_assert_eq(isc_chap_init(&c, &one_way, NULL, 0), 0);
	cr_assert_not(isc_chap_done(&c));
	start_chap(&c, "7,5", 7, &ans, &id, chal, &clen);
	cr_assert_eq(clen, 32, "SHA-256 challenge is as long as the digest");

	cr_assert_eq(isc_chap_response(7, id, "0123456789ab", 12, chal, (size_t)clen, r), 0);
	hexstr(hex, r, 32);
	snprintf(req, sizeof(req), "CHAP_N=host1%cCHAP_R=%s", 0, hex);
	cr_assert_eq(step(&c, req, strlen(req + 13) + 13 + 1, &ans), ISC_CHAP_DONE);
	cr_assert(isc_chap_done(&c));
	cr_assert_eq(ans.n, 0, "one-way CHAP: the target says nothing more");
	isc_kvlist_fini(&ans);
	isc_chap_fini(&c);
}

Test(chap, initiator_order_wins_and_prefs_filter)
{
	struct isc_chap c;
	struct isc_kvlist ans;
	uint8_t id, chal[64];
	int clen;
	const uint8_t only_sha256[] = { 7 };

	isc_kvlist_init(&ans);
	cr_assert_eq(isc_chap_init(&c, &one_way, NULL, 0), 0);
	start_chap(&c, "5,7", 5, &ans, &id, chal, &clen);
	cr_assert_eq(clen, 16, "MD5 challenge is at least 16 bytes");
	isc_chap_fini(&c);

	cr_assert_eq(isc_chap_init(&c, &one_way, only_sha256, 1), 0);
	cr_assert_eq(STEP(&c, "AuthMethod=CHAP", &ans), ISC_CHAP_CONTINUE);
	cr_assert_eq(STEP(&c, "CHAP_A=5,6", &ans), -EACCES);
	cr_assert_str_eq(isc_kvlist_get(&ans, "CHAP_A"), "Reject");
	cr_assert_eq(c.fail, ISC_CHAP_FAIL_ALG);
	cr_assert_not(isc_chap_done(&c));
	isc_kvlist_fini(&ans);
}

Test(chap, base64_response_accepted)
{
	struct isc_chap c;
	struct isc_kvlist ans;
	uint8_t id, chal[64], r[32];
	char req[256];
	int clen;
	size_t n;

	isc_kvlist_init(&ans);
	cr_assert_eq(isc_chap_init(&c, &one_way, NULL, 0), 0);
	start_chap(&c, "5", 5, &ans, &id, chal, &clen);
	cr_assert_eq(isc_chap_response(5, id, "0123456789ab", 12, chal, (size_t)clen, r), 0);
	n = (size_t)snprintf(req, sizeof(req), "CHAP_N=host1%cCHAP_R=0b", 0);
	/* base64 of 16 bytes: 5 groups of 3 plus one byte "xx==" */
	{
		static const char al[] =
			"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
		int i;

		for (i = 0; i < 15; i += 3) {
			uint32_t v = (uint32_t)r[i] << 16 | (uint32_t)r[i + 1] << 8 | r[i + 2];

			req[n++] = al[v >> 18];
			req[n++] = al[(v >> 12) & 63];
			req[n++] = al[(v >> 6) & 63];
			req[n++] = al[v & 63];
		}
		req[n++] = al[r[15] >> 2];
		req[n++] = al[(r[15] & 3) << 4];
		req[n++] = '=';
		req[n++] = '=';
	}
	req[n++] = '\0';
	cr_assert_eq(step(&c, req, n, &ans), ISC_CHAP_DONE);
	isc_kvlist_fini(&ans);
}

Test(chap, wrong_secret_refused)
{
	struct isc_chap c;
	struct isc_kvlist ans;
	uint8_t id, chal[64], r[32];
	char req[256], hex[80];
	int clen;

	isc_kvlist_init(&ans);
	cr_assert_eq(isc_chap_init(&c, &one_way, NULL, 0), 0);
	start_chap(&c, "6", 6, &ans, &id, chal, &clen);
	cr_assert_eq(isc_chap_response(6, id, "0123456789ac", 12, chal, (size_t)clen, r), 0);
	hexstr(hex, r, 20);
	snprintf(req, sizeof(req), "CHAP_N=host1%cCHAP_R=%s", 0, hex);
	cr_assert_eq(step(&c, req, 13 + strlen(req + 13) + 1, &ans), -EACCES);
	cr_assert_eq(c.fail, ISC_CHAP_FAIL_RESPONSE);
	cr_assert_not(isc_chap_done(&c));
	isc_kvlist_fini(&ans);
}

Test(chap, unknown_user_refused)
{
	struct isc_chap c;
	struct isc_kvlist ans;
	uint8_t id, chal[64], r[32];
	char req[256], hex[80];
	int clen;

	isc_kvlist_init(&ans);
	cr_assert_eq(isc_chap_init(&c, &one_way, NULL, 0), 0);
	start_chap(&c, "6", 6, &ans, &id, chal, &clen);
	cr_assert_eq(isc_chap_response(6, id, "0123456789ab", 12, chal, (size_t)clen, r), 0);
	hexstr(hex, r, 20);
	snprintf(req, sizeof(req), "CHAP_N=host2%cCHAP_R=%s", 0, hex);
	cr_assert_eq(step(&c, req, 13 + strlen(req + 13) + 1, &ans), -EACCES);
	cr_assert_eq(c.fail, ISC_CHAP_FAIL_USER);
	isc_kvlist_fini(&ans);
}

Test(chap, truncated_response_is_malformed)
{
	struct isc_chap c;
	struct isc_kvlist ans;
	uint8_t id, chal[64];
	int clen;

	isc_kvlist_init(&ans);
	cr_assert_eq(isc_chap_init(&c, &one_way, NULL, 0), 0);
	start_chap(&c, "5", 5, &ans, &id, chal, &clen);
	cr_assert_eq(STEP(&c, "CHAP_N=host1\0CHAP_R=0x0102", &ans), -EACCES);
	cr_assert_eq(c.fail, ISC_CHAP_FAIL_MALFORMED);
	isc_kvlist_fini(&ans);
}

/*
 * Mutual: initiator challenge de ad be ef x4 (sent in base64), CHAP_I=7, mutual secret
 * "ba9876543210xyz". Expected target responses from the OpenSSL command line:
 *   { printf '\x07'; printf 'ba9876543210xyz'; printf '\xde\xad\xbe\xef'x4; } | openssl dgst -md5
 *     -> 09a974aaa6957317a60b520435097a46
 */
Test(chap, mutual_response_correct)
{
	struct isc_chap c;
	struct isc_kvlist ans;
	uint8_t id, chal[64], r[32];
	char req[256], hex[80];
	int clen, n;

	isc_kvlist_init(&ans);
	cr_assert_eq(isc_chap_init(&c, &mutual, NULL, 0), 0);
	start_chap(&c, "5", 5, &ans, &id, chal, &clen);
	cr_assert_eq(isc_chap_response(5, id, "0123456789ab", 12, chal, (size_t)clen, r), 0);
	hexstr(hex, r, 16);
	n = snprintf(req, sizeof(req),
		     "CHAP_N=host1%cCHAP_R=%s%cCHAP_I=7%cCHAP_C=0b3q2+796tvu/erb7v3q2+7w==", 0, hex,
		     0, 0);
	cr_assert_eq(step(&c, req, (size_t)n + 1, &ans), ISC_CHAP_DONE);
	cr_assert_str_eq(isc_kvlist_get(&ans, "CHAP_N"), "gw");
	cr_assert_str_eq(isc_kvlist_get(&ans, "CHAP_R"), "0x09a974aaa6957317a60b520435097a46");
	cr_assert(isc_chap_done(&c));
	isc_kvlist_fini(&ans);
}

Test(chap, reflected_challenge_refused)
{
	struct isc_chap c;
	struct isc_kvlist ans;
	uint8_t id, chal[64], r[32];
	char req[256], hex[80], chex[80];
	int clen, n;

	isc_kvlist_init(&ans);
	cr_assert_eq(isc_chap_init(&c, &mutual, NULL, 0), 0);
	start_chap(&c, "7", 7, &ans, &id, chal, &clen);
	cr_assert_eq(isc_chap_response(7, id, "0123456789ab", 12, chal, (size_t)clen, r), 0);
	hexstr(hex, r, 32);
	hexstr(chex, chal, (size_t)clen);
	n = snprintf(req, sizeof(req), "CHAP_N=host1%cCHAP_R=%s%cCHAP_I=%u%cCHAP_C=%s", 0, hex, 0,
		     id, 0, chex);
	cr_assert_eq(step(&c, req, (size_t)n + 1, &ans), -EACCES);
	cr_assert_eq(c.fail, ISC_CHAP_FAIL_REFLECTION);
	cr_assert_null(isc_kvlist_get(&ans, "CHAP_R"), "no answer computed for a reflection");
	isc_kvlist_fini(&ans);
}

Test(chap, mutual_required_but_not_requested)
{
	struct isc_chap c;
	struct isc_kvlist ans;
	uint8_t id, chal[64], r[32];
	char req[256], hex[80];
	int clen;

	isc_kvlist_init(&ans);
	cr_assert_eq(isc_chap_init(&c, &mutual, NULL, 0), 0);
	start_chap(&c, "5", 5, &ans, &id, chal, &clen);
	cr_assert_eq(isc_chap_response(5, id, "0123456789ab", 12, chal, (size_t)clen, r), 0);
	hexstr(hex, r, 16);
	snprintf(req, sizeof(req), "CHAP_N=host1%cCHAP_R=%s", 0, hex);
	cr_assert_eq(step(&c, req, 13 + strlen(req + 13) + 1, &ans), -EACCES);
	cr_assert_eq(c.fail, ISC_CHAP_FAIL_MUTUAL_MISSING);
	isc_kvlist_fini(&ans);
}

Test(chap, auth_method_selection)
{
	struct isc_chap c;
	struct isc_kvlist ans;

	isc_kvlist_init(&ans);
	/* no CHAP configured: None agreed, transit allowed */
	cr_assert_eq(isc_chap_init(&c, NULL, NULL, 0), 0);
	cr_assert(isc_chap_done(&c));
	cr_assert_eq(STEP(&c, "AuthMethod=CHAP,None", &ans), ISC_CHAP_DONE);
	cr_assert_str_eq(isc_kvlist_get(&ans, "AuthMethod"), "None");

	/* no CHAP configured, initiator insists on CHAP */
	cr_assert_eq(isc_chap_init(&c, NULL, NULL, 0), 0);
	cr_assert_eq(STEP(&c, "AuthMethod=CHAP", &ans), -EACCES);
	cr_assert_str_eq(isc_kvlist_get(&ans, "AuthMethod"), "Reject");
	cr_assert_eq(c.fail, ISC_CHAP_FAIL_METHOD);

	/* CHAP configured, initiator offers only None */
	cr_assert_eq(isc_chap_init(&c, &one_way, NULL, 0), 0);
	cr_assert_eq(STEP(&c, "AuthMethod=None", &ans), -EACCES);
	cr_assert_eq(c.fail, ISC_CHAP_FAIL_METHOD);
	cr_assert_not(isc_chap_done(&c));

	/* CHAP configured, no AuthMethod at all: not done, so the login code refuses transit */
	cr_assert_eq(isc_chap_init(&c, &one_way, NULL, 0), 0);
	cr_assert_eq(STEP(&c, "InitiatorName=iqn.1994-05.com.example:h", &ans), ISC_CHAP_CONTINUE);
	cr_assert_not(isc_chap_done(&c));
	isc_kvlist_fini(&ans);
}

Test(chap, config_validation)
{
	char *s_short = (char *)"short", *s_ok = (char *)"0123456789ab", *s_empty = (char *)"";
	struct isc_chap_conf bad = mutual;
	struct gw_errlist errs;

	cr_assert_not_null(conf_chap_check_secret(&s_short));
	cr_assert_null(conf_chap_check_secret(&s_ok));
	cr_assert_null(conf_chap_check_secret(&s_empty));

	gw_errlist_init(&errs);
	cr_assert_eq(conf_chap_check(&mutual, "targets[0].chap", &errs), 0);
	cr_assert_eq(errs.n, 0);
	bad.mutual_secret = bad.secret;
	cr_assert_eq(conf_chap_check(&bad, "targets[0].chap", &errs), -EINVAL);
	cr_assert_eq(errs.n, 1);
	cr_assert_str_eq(errs.v[0].field, "targets[0].chap.mutual_secret");
	gw_errlist_fini(&errs);

	gw_errlist_init(&errs);
	bad = one_way;
	bad.secret = s_empty;
	cr_assert_eq(conf_chap_check(&bad, "", &errs), -EINVAL);
	cr_assert_str_eq(errs.v[0].field, "secret");
	gw_errlist_fini(&errs);
}
