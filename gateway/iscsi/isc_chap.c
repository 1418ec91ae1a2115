// SPDX-License-Identifier: MIT
/*
 * CHAP, target side (RFC 1994 as used by RFC 7143 §12.1.3). The exchange is:
 *   I: AuthMethod=CHAP,None          T: AuthMethod=CHAP
 *   I: CHAP_A=<list>                 T: CHAP_A=<a> CHAP_I=<id> CHAP_C=<challenge>
 *   I: CHAP_N=<user> CHAP_R=<resp> [CHAP_I=<id2> CHAP_C=<chal2>]
 *                                    T: [CHAP_N=<mutual user> CHAP_R=<resp2>]
 * where resp = H(id || secret || challenge). Secrets never reach the log.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "gw_buf.h"
#include "gw_log.h"
#include "isc_chap.h"

#define COMP "iscsi"

static bool str_set(const char *s)
{
	return s && *s;
}

/* ---------------------------------------------------------------------------------------- */
/* Digests and encodings */

static const char *alg_name(int alg)
{
	switch (alg) {
	case ISC_CHAP_MD5: return "MD5";
	case ISC_CHAP_SHA1: return "SHA1";
	case ISC_CHAP_SHA256: return "SHA256";
	case ISC_CHAP_SHA3_256: return "SHA3-256";
	default: return NULL;
	}
}

size_t isc_chap_digest_len(int alg)
{
	switch (alg) {
	case ISC_CHAP_MD5: return 16;
	case ISC_CHAP_SHA1: return 20;
	case ISC_CHAP_SHA256: return 32;
	case ISC_CHAP_SHA3_256: return 32;
	default: return 0;
	}
}

/* The local OpenSSL may lack an algorithm (MD5 under a FIPS provider). */
static bool alg_available(int alg)
{
	const char *name = alg_name(alg);
	EVP_MD *md;

	if (!name)
		return false;
	md = EVP_MD_fetch(NULL, name, NULL);
	if (!md)
		return false;
	EVP_MD_free(md);
	return true;
}

int isc_chap_response(int alg, uint8_t id, const void *secret, size_t secret_len,
		      const void *challenge, size_t challenge_len, uint8_t *out)
{
	const char *name = alg_name(alg);
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
	r = len == isc_chap_digest_len(alg) ? 0 : -EIO;
out:
	if (r)
		gw_err(COMP, "CHAP %s digest failed in OpenSSL", name);
	EVP_MD_CTX_free(ctx);
	EVP_MD_free(md);
	return r;
}

static int b64_val(char c)
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

static int decode_hex(const char *s, uint8_t *out, size_t max)
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

/* RFC 4648 base64 with padding, as RFC 7143 §6.1 base64-constant uses it. */
static int decode_b64(const char *s, uint8_t *out, size_t max)
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
				v = b64_val(c);
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

int isc_chap_decode(const char *text, uint8_t *out, size_t max)
{
	if (text[0] != '0')
		return -EINVAL;
	if (text[1] == 'x' || text[1] == 'X')
		return decode_hex(text + 2, out, max);
	if (text[1] == 'b' || text[1] == 'B')
		return decode_b64(text + 2, out, max);
	return -EINVAL;
}

int isc_chap_encode_hex(struct gw_buf *b, const void *p, size_t n)
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

/* Appends "key=0x<hex>\0". */
static int append_hex_kv(struct gw_buf *b, const char *key, const void *p, size_t n)
{
	int r;

	r = gw_buf_printf(b, "%s=", key);
	if (!r)
		r = isc_chap_encode_hex(b, p, n);
	if (!r)
		r = gw_buf_append(b, "", 1);
	return r;
}

/* ---------------------------------------------------------------------------------------- */
/* The exchange */

const char *isc_chap_fail_name(enum isc_chap_fail f)
{
	switch (f) {
	case ISC_CHAP_FAIL_NONE: return "none";
	case ISC_CHAP_FAIL_METHOD: return "no acceptable AuthMethod";
	case ISC_CHAP_FAIL_ALG: return "no acceptable CHAP algorithm";
	case ISC_CHAP_FAIL_MALFORMED: return "malformed CHAP exchange";
	case ISC_CHAP_FAIL_USER: return "unknown CHAP user";
	case ISC_CHAP_FAIL_RESPONSE: return "wrong CHAP response";
	case ISC_CHAP_FAIL_REFLECTION: return "reflected CHAP challenge";
	case ISC_CHAP_FAIL_MUTUAL_MISSING: return "mutual CHAP required but not requested";
	case ISC_CHAP_FAIL_MUTUAL_UNAVAILABLE: return "mutual CHAP requested but not configured";
	case ISC_CHAP_FAIL_INTERNAL: return "internal error";
	}
	return "unknown";
}

static bool chap_required(const struct isc_chap *c)
{
	return c->conf && str_set(c->conf->user);
}

int isc_chap_init(struct isc_chap *c, const struct isc_chap_conf *conf, const uint8_t *prefs,
		  size_t nprefs)
{
	static const uint8_t def[] = { ISC_CHAP_SHA3_256, ISC_CHAP_SHA256, ISC_CHAP_SHA1,
				       ISC_CHAP_MD5 };
	size_t i, j;

	memset(c, 0, sizeof(*c));
	c->conf = conf;
	c->comp = COMP;
	c->state = ISC_CHAP_ST_START;
	if (!prefs || !nprefs) {
		prefs = def;
		nprefs = sizeof(def);
	}
	if (nprefs > sizeof(c->prefs))
		return -EINVAL;
	for (i = 0; i < nprefs; i++) {
		if (!isc_chap_digest_len(prefs[i]))
			return -EINVAL;
		for (j = 0; j < c->nprefs; j++)
			if (c->prefs[j] == prefs[i])
				break;
		if (j == c->nprefs && alg_available(prefs[i]))
			c->prefs[c->nprefs++] = prefs[i];
	}
	return 0;
}

void isc_chap_fini(struct isc_chap *c)
{
	OPENSSL_cleanse(c->challenge, sizeof(c->challenge));
	c->challenge_len = 0;
}

bool isc_chap_done(const struct isc_chap *c)
{
	if (c->state == ISC_CHAP_ST_FAILED)
		return false;
	return c->state == ISC_CHAP_ST_DONE || !chap_required(c);
}

static int fail(struct isc_chap *c, enum isc_chap_fail why)
{
	const char *user = c->conf && c->conf->user ? c->conf->user : "";

	c->state = ISC_CHAP_ST_FAILED;
	c->fail = why;
	OPENSSL_cleanse(c->challenge, sizeof(c->challenge));
	gw_warn(c->comp, "authentication failed (configured user \"%.64s\"): %s", user,
		isc_chap_fail_name(why));
	return -EACCES;
}

/* Is `item` in the comma-separated list? */
static bool list_has(const char *list, const char *item)
{
	size_t n = strlen(item);
	const char *p = list;

	for (;;) {
		const char *c = strchr(p, ',');
		size_t len = c ? (size_t)(c - p) : strlen(p);

		if (len == n && !strncmp(p, item, n))
			return true;
		if (!c)
			return false;
		p = c + 1;
	}
}

static int step_method(struct isc_chap *c, const char *am, struct gw_buf *resp)
{
	int r;

	if (chap_required(c)) {
		if (!list_has(am, "CHAP")) {
			isc_kv_append(resp, "AuthMethod", "Reject");
			return fail(c, ISC_CHAP_FAIL_METHOD);
		}
		c->state = ISC_CHAP_ST_WAIT_A;
		r = isc_kv_append(resp, "AuthMethod", "CHAP");
		return r ? r : ISC_CHAP_CONTINUE;
	}
	if (!list_has(am, "None")) {
		isc_kv_append(resp, "AuthMethod", "Reject");
		return fail(c, ISC_CHAP_FAIL_METHOD);
	}
	c->state = ISC_CHAP_ST_DONE;
	c->none_agreed = true;
	r = isc_kv_append(resp, "AuthMethod", "None");
	return r ? r : ISC_CHAP_DONE;
}

static int parse_small(const char *s, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long v;

	if (!*s || *s == '-' || *s == '+' || *s == ' ')
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) ? 16 : 10);
	if (errno || *end || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

static int step_alg(struct isc_chap *c, const char *list, struct gw_buf *resp)
{
	const char *p = list;
	size_t i, dlen;
	int alg = 0, r;

	/* The initiator's order wins; prefs only filter (RFC 7143 §12.1.3). */
	for (;;) {
		const char *comma = strchr(p, ',');
		unsigned long v;
		char item[16];
		size_t len = comma ? (size_t)(comma - p) : strlen(p);

		if (len < sizeof(item)) {
			memcpy(item, p, len);
			item[len] = '\0';
			if (!parse_small(item, 255, &v)) {
				for (i = 0; i < c->nprefs; i++)
					if (c->prefs[i] == v)
						alg = (int)v;
			}
		}
		if (alg || !comma)
			break;
		p = comma + 1;
	}
	if (!alg) {
		isc_kv_append(resp, "CHAP_A", "Reject");
		return fail(c, ISC_CHAP_FAIL_ALG);
	}
	dlen = isc_chap_digest_len(alg);
	c->alg = alg;
	c->challenge_len = dlen < 16 ? 16 : dlen;
	if (RAND_bytes(c->challenge, (int)c->challenge_len) != 1 || RAND_bytes(&c->id, 1) != 1)
		return fail(c, ISC_CHAP_FAIL_INTERNAL);
	r = gw_buf_printf(resp, "CHAP_A=%d", alg);
	if (!r)
		r = gw_buf_append(resp, "", 1);
	if (!r)
		r = gw_buf_printf(resp, "CHAP_I=%u", c->id);
	if (!r)
		r = gw_buf_append(resp, "", 1);
	if (!r)
		r = append_hex_kv(resp, "CHAP_C", c->challenge, c->challenge_len);
	if (r)
		return r;
	c->state = ISC_CHAP_ST_WAIT_R;
	return ISC_CHAP_CONTINUE;
}

static int step_response(struct isc_chap *c, const struct isc_kvlist *keys, struct gw_buf *resp)
{
	const char *n = isc_kvlist_get(keys, "CHAP_N");
	const char *rv = isc_kvlist_get(keys, "CHAP_R");
	const char *mi = isc_kvlist_get(keys, "CHAP_I");
	const char *mc = isc_kvlist_get(keys, "CHAP_C");
	const struct isc_chap_conf *conf = c->conf;
	uint8_t got[ISC_CHAP_DIGEST_MAX], want[ISC_CHAP_DIGEST_MAX];
	uint8_t *chal2 = NULL;
	size_t dlen = isc_chap_digest_len(c->alg);
	unsigned long id2 = 0;
	int len, r;

	if (!n || !rv || (!mi != !mc) || isc_kvlist_get(keys, "CHAP_A") ||
	    isc_kvlist_get(keys, "AuthMethod"))
		return fail(c, ISC_CHAP_FAIL_MALFORMED);
	len = isc_chap_decode(rv, got, sizeof(got));
	if (len != (int)dlen)
		return fail(c, ISC_CHAP_FAIL_MALFORMED);
	if (!str_set(conf->secret) ||
	    (str_set(conf->mutual_user) && !str_set(conf->mutual_secret))) {
		gw_err(c->comp, "CHAP user \"%.64s\" has no secret configured", conf->user);
		return fail(c, ISC_CHAP_FAIL_INTERNAL);
	}
	if (strcmp(n, conf->user)) {
		gw_dbg(c->comp, "CHAP_N \"%.64s\" is not the configured user", n);
		return fail(c, ISC_CHAP_FAIL_USER);
	}
	if (isc_chap_response(c->alg, c->id, conf->secret, strlen(conf->secret), c->challenge,
			      c->challenge_len, want))
		return fail(c, ISC_CHAP_FAIL_INTERNAL);
	r = CRYPTO_memcmp(got, want, dlen);
	OPENSSL_cleanse(want, sizeof(want));
	if (r)
		return fail(c, ISC_CHAP_FAIL_RESPONSE);

	if (!mi) {
		if (str_set(conf->mutual_user))
			return fail(c, ISC_CHAP_FAIL_MUTUAL_MISSING);
		goto done;
	}
	if (!str_set(conf->mutual_user))
		return fail(c, ISC_CHAP_FAIL_MUTUAL_UNAVAILABLE);
	if (parse_small(mi, 255, &id2))
		return fail(c, ISC_CHAP_FAIL_MALFORMED);
	chal2 = malloc(ISC_VAL_LONG_MAX);
	if (!chal2)
		return -ENOMEM;
	len = isc_chap_decode(mc, chal2, ISC_VAL_LONG_MAX);
	if (len <= 0) {
		free(chal2);
		return fail(c, ISC_CHAP_FAIL_MALFORMED);
	}
	/* Our own challenge coming back: someone wants us to compute the answer for them. */
	if ((size_t)len == c->challenge_len && !CRYPTO_memcmp(chal2, c->challenge, (size_t)len)) {
		free(chal2);
		return fail(c, ISC_CHAP_FAIL_REFLECTION);
	}
	r = isc_chap_response(c->alg, (uint8_t)id2, conf->mutual_secret,
			      strlen(conf->mutual_secret), chal2, (size_t)len, want);
	free(chal2);
	if (r)
		return fail(c, ISC_CHAP_FAIL_INTERNAL);
	r = isc_kv_append(resp, "CHAP_N", conf->mutual_user);
	if (!r)
		r = append_hex_kv(resp, "CHAP_R", want, dlen);
	OPENSSL_cleanse(want, sizeof(want));
	if (r)
		return r;
done:
	c->state = ISC_CHAP_ST_DONE;
	OPENSSL_cleanse(c->challenge, sizeof(c->challenge));
	gw_info(c->comp, "CHAP authentication of \"%.64s\" succeeded (%s%s)", conf->user,
		alg_name(c->alg), mi ? ", mutual" : "");
	return ISC_CHAP_DONE;
}

/* Any CHAP_* key other than `except` (NULL: any at all)? */
static bool has_chap_keys(const struct isc_kvlist *keys, const char *except)
{
	size_t i;

	for (i = 0; i < keys->n; i++)
		if (!strncmp(keys->v[i].key, "CHAP_", 5) &&
		    (!except || strcmp(keys->v[i].key, except)))
			return true;
	return false;
}

int isc_chap_process(struct isc_chap *c, const struct isc_kvlist *keys, struct gw_buf *resp)
{
	const char *am = isc_kvlist_get(keys, "AuthMethod");
	const char *a;

	switch (c->state) {
	case ISC_CHAP_ST_START:
		if (has_chap_keys(keys, NULL))
			return fail(c, ISC_CHAP_FAIL_MALFORMED);
		if (!am)
			return chap_required(c) ? ISC_CHAP_CONTINUE : ISC_CHAP_DONE;
		return step_method(c, am, resp);
	case ISC_CHAP_ST_WAIT_A:
		a = isc_kvlist_get(keys, "CHAP_A");
		if (am || !a || has_chap_keys(keys, "CHAP_A"))
			return fail(c, ISC_CHAP_FAIL_MALFORMED);
		return step_alg(c, a, resp);
	case ISC_CHAP_ST_WAIT_R:
		return step_response(c, keys, resp);
	case ISC_CHAP_ST_DONE:
		/* Nothing more to say; a second AuthMethod or CHAP round is a protocol error. */
		if (am || has_chap_keys(keys, NULL))
			return fail(c, ISC_CHAP_FAIL_MALFORMED);
		return ISC_CHAP_DONE;
	case ISC_CHAP_ST_FAILED:
		break;
	}
	return -EACCES;
}
