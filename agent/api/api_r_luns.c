// SPDX-License-Identifier: MIT
/*
 * /api/v1/targets/{target}/luns: a target's LUNs, each with its backstore (file, block, ram,
 * null, remote). A new LUN without a number gets the lowest free one. .../resize changes a
 * LUN's size in service (docs/OPERATIONS.md).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_agent.h"
#include "api_gwc.h"
#include "api_r.h"

int api_h_luns_list(struct api_req *r)
{
	const json_t *t = api_stored_target(r);
	json_t *l;

	if (!t)
		return 0;
	l = json_object_get(t, "luns");
	api_reply_etag(r);
	/* "o" takes a reference: the borrowed list gains one, a new empty one keeps its own. */
	api_reply_json(r, 200, json_pack("{s:o}", "luns", l ? json_incref(l) : json_array()));
	return 0;
}

static int lun_param(struct api_req *r, uint64_t *lun)
{
	if (api_parse_lun(r->params[1], lun)) {
		api_reply_err(r, API_E_BAD_REQUEST, "lun", "\"%s\" is not a LUN number (0..16383)",
			      r->params[1]);
		return -EINVAL;
	}
	return 0;
}

/* A write to LUN lun of the path's target: the configuration's copy (api_write_begin), with the
 * LUN's index in the target's *luns at *i and the target's at *ti. NULL with the reply set (a
 * stale If-Match, 404 for the target or the LUN, ...). */
static json_t *lun_write_begin(struct api_req *r, uint64_t lun, ssize_t *ti, json_t **luns,
			       ssize_t *i)
{
	json_t *cfg = api_write_begin(r), *t;

	if (!cfg)
		return NULL;
	t = api_find_target(r, cfg, r->params[0], ti);
	if (!t) {
		json_decref(cfg);
		return NULL;
	}
	*luns = api_conf_array(t, "luns");
	*i = api_conf_find_lun(*luns, lun);
	if (*i < 0) {
		api_reply_err(r, API_E_NOT_FOUND, NULL, "target %s has no LUN %llu", r->params[0],
			      (unsigned long long)lun);
		json_decref(cfg);
		return NULL;
	}
	return cfg;
}

/* The LUN's live backstore status from the gateway's last state answer (docs/CONTROL.md), or
 * NULL while the gateway is away or does not serve the LUN (yet). Borrowed. */
static json_t *lun_live_status(struct api_agent *ag, const char *target, uint64_t lun)
{
	json_t *t, *l;
	size_t i, j;

	if (!api_gwc_connected(ag->gwc))
		return NULL;
	json_array_foreach(json_object_get(ag->gw_state, "targets"), i, t) {
		const char *name = json_string_value(json_object_get(t, "name"));

		if (!name || strcmp(name, target))
			continue;
		json_array_foreach(json_object_get(t, "luns"), j, l)
			if (json_integer_value(json_object_get(l, "lun")) == (json_int_t)lun)
				return json_object_get(l, "status");
	}
	return NULL;
}

int api_h_lun_get(struct api_req *r)
{
	const json_t *t = api_stored_target(r);
	json_t *o, *st;
	uint64_t lun;
	ssize_t i;

	if (!t || lun_param(r, &lun))
		return 0;
	i = api_conf_find_lun(json_object_get(t, "luns"), lun);
	if (i < 0) {
		api_reply_err(r, API_E_NOT_FOUND, NULL, "target %s has no LUN %llu", r->params[0],
			      (unsigned long long)lun);
		return 0;
	}
	api_reply_etag(r);
	o = json_deep_copy(json_array_get(json_object_get(t, "luns"), (size_t)i));
	/* Read-only: the configuration plus what the gateway says about it now. */
	st = lun_live_status(r->ag, r->params[0], lun);
	if (o && st)
		json_object_set_new(o, "status", json_deep_copy(st));
	api_reply_json(r, 200, o);
	return 0;
}

int api_h_lun_create(struct api_req *r)
{
	json_t *body = api_req_json(r), *cfg = NULL, *t, *luns, *l;
	char prefix[80], loc[512];
	ssize_t ti;
	uint64_t n;

	if (!body)
		return 0;
	/* "status" is what a GET adds; a body read, edited and sent back may carry it. */
	json_object_del(body, "status");
	cfg = api_write_begin(r);
	if (!cfg)
		goto out;
	t = api_find_target(r, cfg, r->params[0], &ti);
	if (!t)
		goto out;
	luns = api_conf_array(t, "luns");
	l = json_object_get(body, "lun");
	if (!l) {
		for (n = 0; api_conf_find_lun(luns, n) >= 0; n++)
			;
		json_object_set_new(body, "lun", json_integer((json_int_t)n));
	} else if (json_is_integer(l) && api_conf_find_lun(luns, (uint64_t)json_integer_value(l))
		   >= 0) {
		api_reply_err(r, API_E_EXISTS, "lun", "target %s already has LUN %lld",
			      r->params[0], (long long)json_integer_value(l));
		goto out;
	}
	snprintf(prefix, sizeof(prefix), "targets[%zd].luns[%zu]", ti, json_array_size(luns));
	if (json_is_integer(json_object_get(body, "lun"))) {
		snprintf(loc, sizeof(loc), API_PREFIX "/targets/%s/luns/%lld", r->params[0],
			 (long long)json_integer_value(json_object_get(body, "lun")));
		api_reply_header(r, "Location", loc);
	}
	json_array_append(luns, body);
	return api_write_finish(r, cfg, 201, body, prefix);
out:
	json_decref(cfg);
	json_decref(body);
	return 0;
}

int api_h_lun_put(struct api_req *r)
{
	json_t *body = api_req_json(r), *cfg = NULL, *luns, *l;
	char prefix[80];
	uint64_t lun;
	ssize_t ti, i;

	if (!body)
		return 0;
	if (lun_param(r, &lun))
		goto out;
	l = json_object_get(body, "lun");
	if (l && (!json_is_integer(l) || (uint64_t)json_integer_value(l) != lun)) {
		api_reply_err(r, API_E_INVALID, "lun",
			      "the body's lun must be the one in the path (%llu)",
			      (unsigned long long)lun);
		goto out;
	}
	json_object_set_new(body, "lun", json_integer((json_int_t)lun));
	json_object_del(body, "status");
	cfg = lun_write_begin(r, lun, &ti, &luns, &i);
	if (!cfg)
		goto out;
	json_array_set(luns, (size_t)i, body);
	snprintf(prefix, sizeof(prefix), "targets[%zd].luns[%zd]", ti, i);
	return api_write_finish(r, cfg, 200, body, prefix);
out:
	json_decref(cfg);
	json_decref(body);
	return 0;
}

int api_h_lun_delete(struct api_req *r)
{
	json_t *cfg, *luns;
	uint64_t lun;
	ssize_t ti, i;

	if (lun_param(r, &lun))
		return 0;
	cfg = lun_write_begin(r, lun, &ti, &luns, &i);
	if (!cfg)
		return 0;
	json_array_remove(luns, (size_t)i);
	return api_write_finish(r, cfg, 204, NULL, NULL);
}

/* ---- POST .../luns/{lun}/resize ------------------------------------------------------- */

static void on_rescan(void *ctx, int err, json_t *reply)
{
	struct api_req *r = ctx;

	if (err < 0) {
		api_reply_errno(r, err, NULL);
	} else if (json_is_true(json_object_get(reply, "ok"))) {
		/* pending: a remote LUN's paths are reading the back end's size; a change
		 * follows as CAPACITY DATA HAS CHANGED to its hosts. */
		api_reply_json(r, 200, json_pack("{s:O, s:b}", "size", json_object_get(reply, "size"),
						 "pending", json_is_true(json_object_get(reply,
									   "pending"))));
	} else {
		const char *code = json_string_value(json_object_get(reply, "code"));
		const char *msg = json_string_value(json_object_get(reply, "message"));

		api_reply_err(r, code && !strcmp(code, "not_found") ? API_E_NOT_FOUND :
			      API_E_APPLY_FAILED, "size", "%s", msg ? msg : "refused");
	}
	api_req_resume(r);
}

/* {"size": N | "2G", "force": bool}: the stored size changes and the gateway resizes the LU in
 * place (ctl_gw_apply). Without "size" the gateway measures a block device or file grown from
 * outside again; the configuration does not change. */
int api_h_lun_resize(struct api_req *r)
{
	json_t *body = api_req_json(r), *cfg = NULL, *luns, *l, *bs, *size, *v;
	const char *type, *key;
	char prefix[80];
	bool force = false;
	uint64_t lun;
	ssize_t ti, i;
	int rc;

	if (!body)
		return 0;
	if (lun_param(r, &lun))
		goto out;
	json_object_foreach(body, key, v)
		if (strcmp(key, "size") && strcmp(key, "force")) {
			api_reply_err(r, API_E_INVALID, key, "unknown key: a resize takes \"size\" "
				      "and \"force\"");
			goto out;
		}
	v = json_object_get(body, "force");
	if (v && !json_is_boolean(v)) {
		api_reply_err(r, API_E_INVALID, "force", "must be true or false");
		goto out;
	}
	force = json_is_true(v);
	size = json_object_get(body, "size");
	if (size && !(json_is_integer(size) && json_integer_value(size) > 0) &&
	    !json_is_string(size)) {
		api_reply_err(r, API_E_INVALID, "size", "a size is a positive number of bytes or a "
			      "string such as \"2G\"");
		goto out;
	}
	cfg = lun_write_begin(r, lun, &ti, &luns, &i);
	if (!cfg)
		goto out;
	l = json_array_get(luns, (size_t)i);
	bs = json_object_get(l, "backstore");
	type = json_string_value(json_object_get(bs, "type"));
	if (type && !strcmp(type, "remote") && size) {
		api_reply_err(r, API_E_INVALID, "size", "a remote LUN has its back end's size: grow "
			      "it there and the gateway follows (without \"size\", its paths read "
			      "the capacity again now; docs/OPERATIONS.md)");
		goto out;
	}
	if (type && !strcmp(type, "ram")) {
		api_reply_err(r, API_E_INVALID, "size", "a ram LUN cannot change size in service "
			      "(its blocks would be lost); a PUT replaces it");
		goto out;
	}
	if (!size) {
		/* Measured again by the gateway: nothing stored changes. */
		json_decref(cfg);
		json_decref(body);
		if (!api_gwc_connected(r->ag->gwc))
			return -ENOTCONN;
		rc = api_gwc_call(r->ag->gwc, json_pack("{s:s, s:s, s:I, s:b}", "op", "lun_rescan",
							 "target", r->params[0], "lun",
							 (json_int_t)lun, "shrink", force),
				  on_rescan, r);
		if (rc)
			return rc;
		api_req_suspend(r);
		return 0;
	}
	json_object_set(bs, "size", size);
	if (force)
		api_write_allow_shrink(r);
	snprintf(prefix, sizeof(prefix), "targets[%zd].luns[%zd]", ti, i);
	json_decref(body);
	return api_write_finish(r, cfg, 200, json_deep_copy(l), prefix);
out:
	json_decref(cfg);
	json_decref(body);
	return 0;
}
