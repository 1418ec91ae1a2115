// SPDX-License-Identifier: MIT
/*
 * CHAP responses and value encodings: a wrong digest or a misread "0b" value is a login that
 * fails against a real target or initiator, on either side of the gateway.
 */
#include <criterion/criterion.h>
#include <string.h>

#include <openssl/evp.h>

#include "../../../lib/gw_chap.c"

/* RFC 1994's response is MD5 over id || secret || challenge, so RFC 1321 §A.5's published
 * vectors are CHAP responses once the message is split that way. */
Test(gw_chap, md5_rfc1321_vectors)
{
	static const struct { uint8_t id; const char *secret, *chal, *want; } v[] = {
		{ 'a', "b", "c", "0x900150983cd24fb0d6963f7d28e17f72" },		/* "abc" */
		{ 'm', "essage", " digest", "0xf96b697d7cb7938d525a2f31aaf161d0" },
		{ 'a', "bcdefghijklmnopqrstuvwxy", "z",
		  "0xc3fcd3d76192e4007dfb496cca67e13b" },
	};
	uint8_t out[16], want[16];

	cr_assert_eq(gw_chap_digest_len(GW_CHAP_MD5), 16);
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		cr_assert_eq(gw_chap_decode(v[i].want, want, sizeof(want)), 16);
		cr_assert_eq(gw_chap_response(GW_CHAP_MD5, v[i].id, v[i].secret,
					      strlen(v[i].secret), v[i].chal, strlen(v[i].chal),
					      out), 0);
		cr_expect_arr_eq(out, want, 16, "vector %zu", i);
	}
}

/* Every digest against libcrypto's one-shot EVP_Digest over the concatenation. */
Test(gw_chap, every_alg_matches_one_shot_digest)
{
	static const struct { int alg; const EVP_MD *(*md)(void); } v[] = {
		{ GW_CHAP_MD5, EVP_md5 }, { GW_CHAP_SHA1, EVP_sha1 },
		{ GW_CHAP_SHA256, EVP_sha256 }, { GW_CHAP_SHA3_256, EVP_sha3_256 },
	};
	const char secret[] = "twelve-chars";
	uint8_t chal[16], msg[1 + 12 + 16], out[GW_CHAP_DIGEST_MAX], want[EVP_MAX_MD_SIZE];
	unsigned int wl;

	for (int i = 0; i < 16; i++)
		chal[i] = (uint8_t)(0xa0 + i);
	msg[0] = 0x2a;
	memcpy(msg + 1, secret, 12);
	memcpy(msg + 13, chal, 16);
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		if (!gw_chap_alg_available(v[i].alg))
			continue;	/* e.g. MD5 under a FIPS provider */
		cr_assert_eq(EVP_Digest(msg, sizeof(msg), want, &wl, v[i].md(), NULL), 1);
		cr_assert_eq(wl, gw_chap_digest_len(v[i].alg));
		cr_assert_eq(gw_chap_response(v[i].alg, 0x2a, secret, 12, chal, 16, out), 0);
		cr_expect_arr_eq(out, want, wl, "CHAP_A=%d", v[i].alg);
	}
}

Test(gw_chap, unknown_alg_refused)
{
	uint8_t out[GW_CHAP_DIGEST_MAX];

	cr_expect_eq(gw_chap_digest_len(4), 0);
	cr_expect_not(gw_chap_alg_available(4));
	cr_expect_eq(gw_chap_response(4, 1, "s", 1, "c", 1, out), -EINVAL);
}

Test(gw_chap, decode_hex_and_base64)
{
	static const uint8_t b16[16] = { 0xde, 0xad, 0xbe, 0xef, 0xde, 0xad, 0xbe, 0xef,
					 0xde, 0xad, 0xbe, 0xef, 0xde, 0xad, 0xbe, 0xef };
	uint8_t out[32];

	cr_assert_eq(gw_chap_decode("0xDEADbeef", out, sizeof(out)), 4);
	cr_expect_arr_eq(out, b16, 4);
	cr_assert_eq(gw_chap_decode("0X123", out, sizeof(out)), 2);	/* leading zero nibble */
	cr_expect_eq(out[0], 0x01);
	cr_expect_eq(out[1], 0x23);
	/* The same 16 bytes as RFC 7143 §6 base64: what a target may send as CHAP_C. */
	cr_assert_eq(gw_chap_decode("0b3q2+796tvu/erb7v3q2+7w==", out, sizeof(out)), 16);
	cr_expect_arr_eq(out, b16, 16);
	cr_assert_eq(gw_chap_decode("0BAAE=", out, sizeof(out)), 2);
	cr_expect_eq(out[0], 0x00);
	cr_expect_eq(out[1], 0x01);
	cr_assert_eq(gw_chap_decode("0bAAEC", out, sizeof(out)), 3);
}

Test(gw_chap, decode_refusals)
{
	uint8_t out[8];

	cr_expect_eq(gw_chap_decode(NULL, out, sizeof(out)), -EINVAL);
	cr_expect_eq(gw_chap_decode("deadbeef", out, sizeof(out)), -EINVAL);
	cr_expect_eq(gw_chap_decode("0x", out, sizeof(out)), -EINVAL);
	cr_expect_eq(gw_chap_decode("0xzz", out, sizeof(out)), -EINVAL);
	cr_expect_eq(gw_chap_decode("0b", out, sizeof(out)), -EINVAL);
	cr_expect_eq(gw_chap_decode("0b3q2", out, sizeof(out)), -EINVAL);	/* not 4-aligned */
	cr_expect_eq(gw_chap_decode("0b3q*+", out, sizeof(out)), -EINVAL);
	cr_expect_eq(gw_chap_decode("0xdeadbeef", out, 3), -EINVAL);		/* too long */
	cr_expect_eq(gw_chap_decode("0bAAECAw==", out, 3), -EINVAL);
}

Test(gw_chap, encode_round_trip)
{
	static const uint8_t in[5] = { 0x00, 0x0f, 0xa5, 0xff, 0x10 };
	uint8_t out[8];
	struct gw_buf b;

	gw_buf_init(&b);
	cr_assert_eq(gw_chap_encode_hex(&b, in, sizeof(in)), 0);
	cr_assert_eq(b.len, 12);
	cr_expect_eq(memcmp(b.data, "0x000fa5ff10", 12), 0);
	cr_assert_eq(gw_buf_append(&b, "", 1), 0);
	cr_assert_eq(gw_chap_decode((const char *)b.data, out, sizeof(out)), 5);
	cr_expect_arr_eq(out, in, 5);
	gw_buf_fini(&b);
}
