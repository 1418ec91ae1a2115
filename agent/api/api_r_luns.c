// SPDX-License-Identifier: MIT
/*
 * /api/v1/targets/{target}/luns: a target's LUNs, each with its backstore (file, block, ram,
 * null). A new LUN without a number gets the lowest free one.
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
	json_t *body = api_req_json(r), *cfg = NULL, *t, *luns, *l;
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
	cfg = api_write_begin(r);
	if (!cfg)
		goto out;
	t = api_find_target(r, cfg, r->params[0], &ti);
	if (!t)
		goto out;
	luns = api_conf_array(t, "luns");
	i = api_conf_find_lun(luns, lun);
	if (i < 0) {
		api_reply_err(r, API_E_NOT_FOUND, NULL, "target %s has no LUN %llu", r->params[0],
			      (unsigned long long)lun);
		goto out;
	}
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
	json_t *cfg, *t, *luns;
	uint64_t lun;
	ssize_t i;

	if (lun_param(r, &lun))
		return 0;
	cfg = api_write_begin(r);
	if (!cfg)
		return 0;
	t = api_find_target(r, cfg, r->params[0], NULL);
	if (!t) {
		json_decref(cfg);
		return 0;
	}
	luns = api_conf_array(t, "luns");
	i = api_conf_find_lun(luns, lun);
	if (i < 0) {
		api_reply_err(r, API_E_NOT_FOUND, NULL, "target %s has no LUN %llu", r->params[0],
			      (unsigned long long)lun);
		json_decref(cfg);
		return 0;
	}
	json_array_remove(luns, (size_t)i);
	return api_write_finish(r, cfg, 204, NULL, NULL);
}
