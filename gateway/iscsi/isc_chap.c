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
#include <openssl/rand.h>

#include "gw_buf.h"
#include "gw_chap.h"
#include "gw_log.h"
#include "isc_chap.h"

#define COMP "iscsi"

static bool str_set(const char *s)
{
	return s && *s;
}

/* ---------------------------------------------------------------------------------------- */
/* Digests and encodings: lib/gw_chap.c, shared with the native initiator (gateway/mpath). */

static const char *alg_name(int alg)
{
	switch (alg) {
	case ISC_CHAP_MD5: return "MD5";
	case ISC_CHAP_SHA1: return "SHA1";
	case ISC_CHAP_SHA256: return "SHA256";
	case ISC_CHAP_SHA3_256: return "SHA3-256";
	default: return "?";
	}
}

/* Appends "key=0x<hex>\0". */
static int append_hex_kv(struct gw_buf *b, const char *key, const void *p, size_t n)
{
	int r;

	r = gw_buf_printf(b, "%s=", key);
	if (!r)
		r = gw_chap_encode_hex(b, p, n);
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
		if (!gw_chap_digest_len(prefs[i]))
			return -EINVAL;
		for (j = 0; j < c->nprefs; j++)
			if (c->prefs[j] == prefs[i])
				break;
		if (j == c->nprefs && gw_chap_alg_available(prefs[i]))
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
	dlen = gw_chap_digest_len(alg);
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
	size_t dlen = gw_chap_digest_len(c->alg);
	unsigned long id2 = 0;
	int len, r;

	if (!n || !rv || (!mi != !mc) || isc_kvlist_get(keys, "CHAP_A") ||
	    isc_kvlist_get(keys, "AuthMethod"))
		return fail(c, ISC_CHAP_FAIL_MALFORMED);
	len = gw_chap_decode(rv, got, sizeof(got));
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
	if (gw_chap_response(c->alg, c->id, conf->secret, strlen(conf->secret), c->challenge,
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
	len = gw_chap_decode(mc, chal2, ISC_VAL_LONG_MAX);
	if (len <= 0) {
		free(chal2);
		return fail(c, ISC_CHAP_FAIL_MALFORMED);
	}
	/* Our own challenge coming back: someone wants us to compute the answer for them. */
	if ((size_t)len == c->challenge_len && !CRYPTO_memcmp(chal2, c->challenge, (size_t)len)) {
		free(chal2);
		return fail(c, ISC_CHAP_FAIL_REFLECTION);
	}
	r = gw_chap_response(c->alg, (uint8_t)id2, conf->mutual_secret,
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
