// SPDX-License-Identifier: MIT
/*
 * CHAP responses and the RFC 7143 §6 binary encodings (see gw_chap.h). Both login ends use
 * these, so a target and the gateway's own initiator can never disagree on a digest or on how
 * a value is spelled.
 */
#include <errno.h>
#include <string.h>

#include <openssl/evp.h>

#include "gw_buf.h"
#include "gw_chap.h"
#include "gw_log.h"

#define COMP "chap"

static const char *chap_md_name(int alg)
{
	switch (alg) {
	case GW_CHAP_MD5: return "MD5";
	case GW_CHAP_SHA1: return "SHA1";
	case GW_CHAP_SHA256: return "SHA256";
	case GW_CHAP_SHA3_256: return "SHA3-256";
	default: return NULL;
	}
}

size_t gw_chap_digest_len(int alg)
{
	switch (alg) {
	case GW_CHAP_MD5: return 16;
	case GW_CHAP_SHA1: return 20;
	case GW_CHAP_SHA256: return 32;
	case GW_CHAP_SHA3_256: return 32;
	default: return 0;
	}
}

bool gw_chap_alg_available(int alg)
{
	const char *name = chap_md_name(alg);
	EVP_MD *md;

	if (!name)
		return false;
	md = EVP_MD_fetch(NULL, name, NULL);
	if (!md)
		return false;
	EVP_MD_free(md);
	return true;
}

int gw_chap_response(int alg, uint8_t id, const void *secret, size_t secret_len,
		     const void *challenge, size_t challenge_len, uint8_t *out)
{
	const char *name = chap_md_name(alg);
	EVP_MD_CTX *ctx = NULL;
	EVP_MD *md = NULL;
	unsigned int len = 0;
	int r = -EIO;

	if (!name)
		return -EINVAL;
	md = EVP_MD_fetch(NULL, name, NULL);
	ctx = EVP_MD_CTX_new();
	if (!md || !ctx)
		goto out;
	if (EVP_DigestInit_ex(ctx, md, NULL) != 1 || EVP_DigestUpdate(ctx, &id, 1) != 1 ||
	    EVP_DigestUpdate(ctx, secret, secret_len) != 1 ||
	    EVP_DigestUpdate(ctx, challenge, challenge_len) != 1 ||
	    EVP_DigestFinal_ex(ctx, out, &len) != 1)
		goto out;
	r = len == gw_chap_digest_len(alg) ? 0 : -EIO;
out:
	if (r)
		gw_err(COMP, "CHAP %s digest failed in OpenSSL", name);
	EVP_MD_CTX_free(ctx);
	EVP_MD_free(md);
	return r;
}

static int chap_b64_val(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

static int chap_decode_hex(const char *s, uint8_t *out, size_t max)
{
	size_t len = strlen(s), n = 0, i = 0;
	int hi, lo;

	if (!len)
		return -EINVAL;
	/* An odd digit count means a leading zero nibble. */
	if (len % 2) {
		lo = gw_hex_val(s[0]);
		if (lo < 0 || max < 1)
			return -EINVAL;
		out[n++] = (uint8_t)lo;
		i = 1;
	}
	for (; i < len; i += 2) {
		hi = gw_hex_val(s[i]);
		lo = gw_hex_val(s[i + 1]);
		if (hi < 0 || lo < 0 || n >= max)
			return -EINVAL;
		out[n++] = (uint8_t)(hi << 4 | lo);
	}
	return (int)n;
}

/* RFC 4648 base64 with padding, as RFC 7143 §6 base64-constant uses it. */
static int chap_decode_b64(const char *s, uint8_t *out, size_t max)
{
	size_t len = strlen(s), n = 0, i, pad = 0;
	uint32_t acc;
	int j, v;

	if (!len || len % 4)
		return -EINVAL;
	if (s[len - 1] == '=')
		pad++;
	if (s[len - 2] == '=')
		pad++;
	for (i = 0; i < len; i += 4) {
		acc = 0;
		for (j = 0; j < 4; j++) {
			char c = s[i + (size_t)j];

			if (c == '=' && i + 4 == len && (size_t)j >= 4 - pad) {
				v = 0;
			} else {
				v = chap_b64_val(c);
				if (v < 0)
					return -EINVAL;
			}
			acc = acc << 6 | (uint32_t)v;
		}
		for (j = 0; j < 3; j++) {
			if (i + 4 == len && (size_t)j >= 3 - pad)
				break;
			if (n >= max)
				return -EINVAL;
			out[n++] = (uint8_t)(acc >> (16 - 8 * j));
		}
	}
	return (int)n;
}

int gw_chap_decode(const char *text, uint8_t *out, size_t max)
{
	if (!text || text[0] != '0')
		return -EINVAL;
	if (text[1] == 'x' || text[1] == 'X')
		return chap_decode_hex(text + 2, out, max);
	if (text[1] == 'b' || text[1] == 'B')
		return chap_decode_b64(text + 2, out, max);
	return -EINVAL;
}

int gw_chap_encode_hex(struct gw_buf *b, const void *p, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	const uint8_t *u = p;
	size_t i;
	int r;

	r = gw_buf_reserve(b, 2 + 2 * n);
	if (r)
		return r;
	b->data[b->len++] = '0';
	b->data[b->len++] = 'x';
	for (i = 0; i < n; i++) {
		b->data[b->len++] = (uint8_t)digits[u[i] >> 4];
		b->data[b->len++] = (uint8_t)digits[u[i] & 15];
	}
	return 0;
}
