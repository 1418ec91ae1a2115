/* SPDX-License-Identifier: MIT */
/*
 * The agent's error vocabulary: one table maps every error the API can return to its stable
 * code string, its HTTP status and the -errno values that lead to it. Handlers return -errno or
 * name an api_err directly; nothing else in the agent picks an HTTP status for an error.
 * Bodies are {"error": {"code": "...", "message": "...", "field": "..."}}.
 */
#ifndef API_ERR_H
#define API_ERR_H

#include <jansson.h>

enum api_err {
	API_E_BAD_REQUEST,		/* 400 bad path parameter or query */
	API_E_MALFORMED_JSON,		/* 400 body is not JSON */
	API_E_UNAUTHORIZED,		/* 401 no or unknown token */
	API_E_FORBIDDEN,		/* 403 read-only token on a write */
	API_E_NOT_FOUND,		/* 404 */
	API_E_METHOD,			/* 405 */
	API_E_EXISTS,			/* 409 duplicate */
	API_E_IN_USE,			/* 409 still referenced */
	API_E_STALE,			/* 412 If-Match does not match the generation */
	API_E_TOO_LARGE,		/* 413 body over the limit */
	API_E_INVALID,			/* 422 schema / validation errors */
	API_E_APPLY_FAILED,		/* 422 the gateway refused the change */
	API_E_UNAVAILABLE,		/* 503 gateway unreachable */
	API_E_TIMEOUT,			/* 504 gateway did not answer in time */
	API_E_INTERNAL,			/* 500 out of memory, storage failure: always with a body */
	API_E_STORE_UNAVAILABLE,	/* 503 the configuration store (etcd) is not reachable */
	API_E_RATE_LIMITED,		/* 429 too many failed tokens from one address */
	API_E_URI_TOO_LONG,		/* 414 request line over --header-max */
	API_E_HEADERS_TOO_LARGE,	/* 431 request line and headers over --header-max */
	API_E_COUNT,
};

struct api_err_info {
	enum api_err err;
	const char *code;
	unsigned int status;
	const char *message;		/* default message */
	int errnos[4];			/* -errno values mapping here, 0-terminated */
};

const struct api_err_info *api_err_info(enum api_err e);
/* The error an -errno maps to; unknown values are API_E_INTERNAL. */
enum api_err api_err_from_errno(int err);
unsigned int api_err_status(enum api_err e);
const char *api_err_code(enum api_err e);
/* {"error": {...}} (new reference). message NULL: the default; field NULL: omitted. */
json_t *api_err_body(enum api_err e, const char *field, const char *message);

#endif
