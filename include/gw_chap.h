/* SPDX-License-Identifier: MIT */
/*
 * CHAP arithmetic shared by both ends of iSCSI login: the target's security stage
 * (gateway/iscsi/isc_chap.c) and the native initiator of remote paths (gateway/mpath/mp_ini.c).
 * The response is H(id || secret || challenge) (RFC 1994 §4.1, RFC 7143 §12.1.3) with the
 * digests Linux numbers for CHAP_A: 5 MD5, 6 SHA-1, 7 SHA-256, 8 SHA3-256, through OpenSSL EVP.
 * Binary values travel as RFC 7143 §6 "0x" hex or "0b" base64; both are read, hex is written.
 */
#ifndef GW_CHAP_H
#define GW_CHAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gw_buf.h"

#define GW_CHAP_DIGEST_MAX	32	/* SHA-256 / SHA3-256 */

/* CHAP_A values */
enum gw_chap_alg {
	GW_CHAP_MD5 = 5,
	GW_CHAP_SHA1 = 6,
	GW_CHAP_SHA256 = 7,
	GW_CHAP_SHA3_256 = 8,
};

/* Digest length for a CHAP_A value, 0 if unknown. */
size_t gw_chap_digest_len(int alg);
/* False when the local OpenSSL lacks the digest (MD5 under a FIPS provider) or alg is unknown. */
bool gw_chap_alg_available(int alg);
/* out (gw_chap_digest_len(alg) bytes) = H(id || secret || challenge). 0, -EINVAL (alg) or
 * -EIO (OpenSSL: the digest is missing here). */
int gw_chap_response(int alg, uint8_t id, const void *secret, size_t secret_len,
		     const void *challenge, size_t challenge_len, uint8_t *out);
/* Decodes "0x..." hex (an odd digit count means a leading zero nibble) or "0b..." base64 with
 * padding. Returns the byte count, or -EINVAL (NULL, bad encoding, empty, longer than max). */
int gw_chap_decode(const char *text, uint8_t *out, size_t max);
/* Appends "0x" + lowercase hex of p[0..n) to b (text only, no NUL). 0 or -ENOMEM. */
int gw_chap_encode_hex(struct gw_buf *b, const void *p, size_t n);

#endif
