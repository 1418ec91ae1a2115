// SPDX-License-Identifier: MIT
/*
 * The one table from errors to HTTP. Order follows enum api_err so lookups are an index.
 */
#include <errno.h>

#include "api_err.h"

static const struct api_err_info api_errs[API_E_COUNT] = {
	{ API_E_BAD_REQUEST, "bad_request", 400, "the request is not valid", { -EINVAL, 0 } },
	{ API_E_MALFORMED_JSON, "malformed_json", 400, "the body is not valid JSON", { 0 } },
	{ API_E_UNAUTHORIZED, "unauthorized", 401,
	  "a valid bearer token is required (Authorization: Bearer <token>)", { -EACCES, 0 } },
	{ API_E_FORBIDDEN, "forbidden", 403, "this token's role does not allow the operation",
	  { -EPERM, 0 } },
	{ API_E_NOT_FOUND, "not_found", 404, "no such resource", { -ENOENT, -ESRCH, 0 } },
	{ API_E_METHOD, "method_not_allowed", 405, "the resource does not support this method",
	  { -EOPNOTSUPP, 0 } },
	{ API_E_EXISTS, "exists", 409, "the resource already exists", { -EEXIST, 0 } },
	{ API_E_IN_USE, "in_use", 409, "the resource is still in use", { -EBUSY, 0 } },
	{ API_E_STALE, "stale", 412,
	  "If-Match does not match the current generation: read it again, then retry",
	  { -ESTALE, 0 } },
	{ API_E_TOO_LARGE, "too_large", 413, "the body is larger than the agent accepts",
	  { -E2BIG, -EMSGSIZE, 0 } },
	{ API_E_INVALID, "invalid", 422, "the configuration is not valid", { -EDOM, 0 } },
	{ API_E_APPLY_FAILED, "apply_failed", 422, "the gateway could not apply the change",
	  { -EREMOTEIO, 0 } },
	{ API_E_UNAVAILABLE, "gateway_unavailable", 503, "the gateway is not reachable",
	  { -ENOTCONN, -ECONNREFUSED, -EPIPE, -ECONNRESET } },
	{ API_E_TIMEOUT, "gateway_timeout", 504, "the gateway did not answer in time",
	  { -ETIMEDOUT, 0 } },
	{ API_E_INTERNAL, "internal", 500, "internal error (see the agent's log)",
	  { -ENOMEM, -EIO, -ENOSPC, 0 } },
	{ API_E_STORE_UNAVAILABLE, "store_unavailable", 503,
	  "the configuration store (etcd) is not reachable: changes are refused, reads serve the "
	  "last known configuration", { -EHOSTUNREACH, 0 } },
	{ API_E_RATE_LIMITED, "rate_limited", 429,
	  "too many failed tokens from this address: retry after Retry-After seconds", { 0 } },
	{ API_E_URI_TOO_LONG, "uri_too_long", 414, "the request line is longer than the agent "
	  "accepts", { 0 } },
	{ API_E_HEADERS_TOO_LARGE, "headers_too_large", 431, "the request line and headers are "
	  "larger than the agent accepts", { 0 } },
};

const struct api_err_info *api_err_info(enum api_err e)
{
	if ((unsigned int)e >= API_E_COUNT)
		e = API_E_INTERNAL;
	return &api_errs[e];
}

enum api_err api_err_from_errno(int err)
{
	unsigned int i, j;

	if (err > 0)
		err = -err;
	for (i = 0; i < API_E_COUNT; i++)
		for (j = 0; j < 4 && api_errs[i].errnos[j]; j++)
			if (api_errs[i].errnos[j] == err)
				return api_errs[i].err;
	return API_E_INTERNAL;
}

unsigned int api_err_status(enum api_err e)
{
	return api_err_info(e)->status;
}

const char *api_err_code(enum api_err e)
{
	return api_err_info(e)->code;
}

json_t *api_err_body(enum api_err e, const char *field, const char *message)
{
	const struct api_err_info *i = api_err_info(e);
	json_t *o = json_object();

	if (!o)
		return NULL;
	json_object_set_new(o, "code", json_string(i->code));
	json_object_set_new(o, "message", json_string(message ? message : i->message));
	if (field)
		json_object_set_new(o, "field", json_string(field));
	return json_pack("{s:o}", "error", o);
}
