/* SPDX-License-Identifier: MIT */
/*
 * Security stage, target side: AuthMethod negotiation and CHAP (RFC 1994 as RFC 7143 §12.1.3
 * uses it), one-way or mutual, with the digests Linux numbers for CHAP_A: 5 MD5, 6 SHA-1,
 * 7 SHA-256, 8 SHA3-256. Pure: OpenSSL EVP for digests, getrandom for challenges.
 *
 * Contract with the login code:
 *   - Pick the credentials (per-initiator `chap` wins over the target's `chap`; the discovery
 *     `chap` for Discovery sessions) and isc_chap_init() once per connection. An isc_chap_conf
 *     with an empty user means "no authentication": AuthMethod=None is accepted, and CHAP is
 *     refused.
 *   - In the security stage, pass each request's parsed key list (the same one isc_neg_process
 *     saw) to isc_chap_process(); it appends AuthMethod / CHAP_* answers to the response.
 *   - Return values: ISC_CHAP_CONTINUE (send the response, stay in the security stage),
 *     ISC_CHAP_DONE (authenticated, or None agreed: transit to the next stage is allowed),
 *     negative (fail: close with login status 0x0201, the reason is in isc_chap.fail and was
 *     logged at warn level, without secrets).
 *   - Before letting a connection leave the security stage (or skip it: first request with
 *     CSG=1), check isc_chap_done(); false means authentication is required and not done ->
 *     0x0201.
 * Mutual CHAP: when the configured mutual_user is set, the target requires the initiator to
 * ask for mutual authentication (send CHAP_I and CHAP_C with its CHAP_N/CHAP_R); if it does
 * not, authentication fails (ISC_CHAP_FAIL_MUTUAL_MISSING). Rationale: an administrator who
 * configured a mutual secret expects hosts to verify the gateway, and a host that silently
 * skips it is misconfigured. When mutual_user is empty and the initiator asks for mutual,
 * authentication fails too (the target has no secret to answer with).
 */
#ifndef ISC_CHAP_H
#define ISC_CHAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gw_buf.h"
#include "gw_chap.h"
#include "conf.h"
#include "gw_conf.h"
#include "isc_param.h"

#define ISC_CHAP_DIGEST_MAX	GW_CHAP_DIGEST_MAX
#define ISC_CHAP_CHALLENGE_LEN	32	/* largest challenge: max(digest len, 16) bytes */

/* CHAP_A values */
enum isc_chap_alg {
	ISC_CHAP_MD5 = GW_CHAP_MD5,
	ISC_CHAP_SHA1 = GW_CHAP_SHA1,
	ISC_CHAP_SHA256 = GW_CHAP_SHA256,
	ISC_CHAP_SHA3_256 = GW_CHAP_SHA3_256,
};

enum isc_chap_fail {
	ISC_CHAP_FAIL_NONE = 0,
	ISC_CHAP_FAIL_METHOD,		/* no acceptable AuthMethod offered */
	ISC_CHAP_FAIL_ALG,		/* no acceptable CHAP_A in the initiator's list */
	ISC_CHAP_FAIL_MALFORMED,	/* bad encoding, wrong length, missing or unexpected key */
	ISC_CHAP_FAIL_USER,		/* CHAP_N is not the configured user */
	ISC_CHAP_FAIL_RESPONSE,		/* CHAP_R wrong (wrong secret) */
	ISC_CHAP_FAIL_REFLECTION,	/* initiator's CHAP_C equals the one the target sent */
	ISC_CHAP_FAIL_MUTUAL_MISSING,	/* mutual configured, initiator did not ask for it */
	ISC_CHAP_FAIL_MUTUAL_UNAVAILABLE,	/* initiator asked for mutual, none configured */
	ISC_CHAP_FAIL_INTERNAL,		/* RNG or digest failure */
};

const char *isc_chap_fail_name(enum isc_chap_fail f);

enum isc_chap_state {
	ISC_CHAP_ST_START,		/* waiting for AuthMethod */
	ISC_CHAP_ST_WAIT_A,		/* CHAP agreed, waiting for CHAP_A */
	ISC_CHAP_ST_WAIT_R,		/* challenge sent, waiting for CHAP_N / CHAP_R */
	ISC_CHAP_ST_DONE,		/* authenticated or None agreed */
	ISC_CHAP_ST_FAILED,
};

enum { ISC_CHAP_CONTINUE = 0, ISC_CHAP_DONE = 1 };

struct isc_chap {
	const struct isc_chap_conf *conf;	/* borrowed; must outlive the isc_chap */
	const char *comp;			/* log component ("iscsi") */
	uint8_t prefs[4];			/* CHAP_A values allowed (see isc_chap_init) */
	size_t nprefs;
	enum isc_chap_state state;
	enum isc_chap_fail fail;
	bool none_agreed;
	int alg;				/* CHAP_A chosen */
	uint8_t id;				/* CHAP_I sent */
	uint8_t challenge[ISC_CHAP_CHALLENGE_LEN];
	size_t challenge_len;
};

/*
 * conf NULL or with an empty user: no authentication. prefs: CHAP_A values the target
 * allows, in the target's preference order (NULL/0: 8,7,6,5). The algorithm chosen is the
 * first entry of the initiator's CHAP_A list that prefs allows (the initiator's order wins;
 * RFC 7143 §12.1.3 has the target pick from the initiator's list). Algorithms the local
 * OpenSSL lacks are dropped. Returns 0 or -EINVAL (prefs hold an unknown value).
 */
int isc_chap_init(struct isc_chap *c, const struct isc_chap_conf *conf, const uint8_t *prefs,
		  size_t nprefs);
/* Wipes the challenge. */
void isc_chap_fini(struct isc_chap *c);

/* ISC_CHAP_CONTINUE, ISC_CHAP_DONE, or -EACCES (c->fail says why) / -ENOMEM. */
int isc_chap_process(struct isc_chap *c, const struct isc_kvlist *keys, struct gw_buf *resp);

/* True once authentication is complete or not required (conf without user). */
bool isc_chap_done(const struct isc_chap *c);

/* Lower-level helpers, kept by these names for iscsi's tests; the code is lib/gw_chap.c's. */
static inline size_t isc_chap_digest_len(int alg)
{
	return gw_chap_digest_len(alg);
}

static inline int isc_chap_response(int alg, uint8_t id, const void *secret, size_t secret_len,
				    const void *challenge, size_t challenge_len, uint8_t *out)
{
	return gw_chap_response(alg, id, secret, secret_len, challenge, challenge_len, out);
}

static inline int isc_chap_decode(const char *text, uint8_t *out, size_t max)
{
	return gw_chap_decode(text, out, max);
}

static inline int isc_chap_encode_hex(struct gw_buf *b, const void *p, size_t n)
{
	return gw_chap_encode_hex(b, p, n);
}

#endif
