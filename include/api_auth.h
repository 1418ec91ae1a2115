/* SPDX-License-Identifier: MIT */
/*
 * Bearer tokens. The agent stores only SHA-256 digests of tokens (state dir tokens.json, mode
 * 0600); a token is shown once, when it is created. Two roles: admin (everything) and read
 * (GET only). The first start creates an admin token and writes it to admin.token (0600) so
 * the operator and isergwctl on the same host can find it.
 */
#ifndef API_AUTH_H
#define API_AUTH_H

#include <stddef.h>
#include <stdint.h>
#include <limits.h>

struct api_http_hook;

enum api_role {
	API_ROLE_NONE = 0,		/* no token needed (health, openapi) */
	API_ROLE_READ = 1,
	API_ROLE_ADMIN = 2,
};

#define API_TOKEN_PREFIX "igw_"
#define API_TOKEN_LEN (4 + 64)		/* prefix + 32 random bytes in hex */

struct api_token {
	char *name;
	enum api_role role;
	uint8_t digest[32];
};

struct api_auth {
	char *path;			/* tokens.json */
	struct api_token *v;
	size_t n;
};

/* Loads DIR/tokens.json; creates it with a fresh admin token (written to DIR/admin.token)
 * when missing. 0 or -errno. */
int api_auth_open(struct api_auth *a, const char *state_dir);
void api_auth_close(struct api_auth *a);
/* Adds a token and persists the list; token gets the clear text (API_TOKEN_LEN + 1 bytes).
 * -EEXIST if the name is taken. */
int api_auth_add(struct api_auth *a, const char *name, enum api_role role, char *token);
/* Checks an Authorization header value ("Bearer <token>", may be NULL). 0 with *role and
 * *name set, -EACCES otherwise. Compares digests in constant time. */
int api_auth_check(const struct api_auth *a, const char *header, enum api_role *role,
		   const char **name);
/* SHA-256 of s into out. 0 or -EIO. */
int api_auth_digest(const char *s, uint8_t out[32]);
const char *api_role_name(enum api_role r);
/*
 * Failed tokens per source address: max_fails failures from one address within window_s
 * seconds block it for backoff_s seconds, during which every request of it that needs a token
 * is a 429 with Retry-After and no token is checked (so a block cannot be used to try more
 * tokens). One log line per block; per-source failure counts for /metrics. The table is
 * bounded (API_AUTHLIM_SOURCES): the oldest quiet source makes room.
 */
#define API_AUTH_FAILS_DEFAULT 10
#define API_AUTH_WINDOW_DEFAULT 60
#define API_AUTH_BACKOFF_DEFAULT 60
#define API_AUTHLIM_SOURCES 256

struct api_authlim_src {
	char addr[48];
	uint64_t window_ms;		/* the current window began */
	unsigned int fails;		/* in the current window */
	uint64_t until_ms;		/* blocked until, 0: not */
	uint64_t total;			/* failed tokens ever (the metric) */
	uint64_t limited;		/* requests refused with 429 */
	uint64_t seen_ms;
};

struct api_gate {
	const struct api_auth *auth;	/* the token list it guards (reloaded in place) */
	unsigned int max_fails;		/* 0: no rate limit */
	unsigned int window_s, backoff_s;
	struct api_authlim_src *src;	/* API_AUTHLIM_SOURCES, allocated on first failure */
	size_t nsrc;
};

/* Zero values of max_fails/window_s/backoff_s take the defaults; max_fails UINT_MAX: off. */
void api_gate_init(struct api_gate *g, const struct api_auth *auth, unsigned int max_fails,
		   unsigned int window_s, unsigned int backoff_s);
void api_gate_fini(struct api_gate *g);
/* Seconds addr is still blocked at now_ms (0: not blocked). */
unsigned int api_gate_blocked(struct api_gate *g, const char *addr, uint64_t now_ms);
/* A failed token from addr at now_ms: > 0 when this failure starts a block (its seconds). */
unsigned int api_gate_fail(struct api_gate *g, const char *addr, uint64_t now_ms);

/* The HTTP server's access hook (ctx: struct api_gate): 429 while the client's address is
 * blocked, 401 without a valid token, 403 when its role is too low. */
extern const struct api_http_hook api_auth_hook;
/* "admin" / "read" -> role; -EINVAL otherwise. */
int api_role_parse(const char *s, enum api_role *r);

#endif
