// SPDX-License-Identifier: MIT
/*
 * /api/v1/portals and /api/v1/discovery: where the gateway listens, and how discovery
 * sessions authenticate. A portal a target still names cannot be deleted (409 in_use).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_agent.h"
#include "api_r.h"
#include "api_store.h"
#include "gw_buf.h"

int api_h_portals_list(struct api_req *r)
{
	json_t *p = json_deep_copy(json_object_get(api_store_config(r->ag->store), "portals")), *e;
	size_t i;

	/* Each with its live "status" (api_live.c), which a PUT of the portal must not carry. */
	json_array_foreach(p, i, e)
		json_object_set_new(e, "status", api_live_portal(r->ag, json_string_value(
							json_object_get(e, "name"))));
	api_reply_etag(r);
	api_reply_json(r, 200, json_pack("{s:o}", "portals", p ? p : json_array()));
	return 0;
}

int api_h_portal_get(struct api_req *r)
{
	json_t *arr = json_object_get(api_store_config(r->ag->store), "portals");
	ssize_t i = api_conf_find(arr, "name", r->params[0]);

	if (i < 0) {
		api_reply_err(r, API_E_NOT_FOUND, NULL, "no portal %s", r->params[0]);
		return 0;
	}
	api_reply_etag(r);
	api_reply_json(r, 200, json_deep_copy(json_array_get(arr, (size_t)i)));
	return 0;
}

static int portal_write(struct api_req *r, bool create)
{
	json_t *body = api_req_json(r), *cfg = NULL, *arr;
	const char *name;
	char prefix[48], loc[512];
	ssize_t i;

	if (!body)
		return 0;
	name = json_string_value(json_object_get(body, "name"));
	if (create && !name) {
		api_reply_err(r, API_E_INVALID, "name", "required: the portal's name");
		goto out;
	}
	if (!create) {
		if (json_object_get(body, "name") && (!name || strcmp(name, r->params[0]))) {
			api_reply_err(r, API_E_INVALID, "name",
				      "a portal cannot be renamed: create the new one first");
			goto out;
		}
		json_object_set_new(body, "name", json_string(r->params[0]));
		name = r->params[0];
	}
	cfg = api_write_begin(r);
	if (!cfg)
		goto out;
	arr = api_conf_array(cfg, "portals");
	i = api_conf_find(arr, "name", name);
	if (create && i >= 0) {
		api_reply_err(r, API_E_EXISTS, "name", "portal %s already exists", name);
		goto out;
	}
	if (!create && i < 0) {
		api_reply_err(r, API_E_NOT_FOUND, NULL, "no portal %s", name);
		goto out;
	}
	if (create) {
		i = (ssize_t)json_array_size(arr);
		json_array_append(arr, body);
		snprintf(loc, sizeof(loc), API_PREFIX "/portals/%s", name);
		api_reply_header(r, "Location", loc);
	} else {
		json_array_set(arr, (size_t)i, body);
	}
	snprintf(prefix, sizeof(prefix), "portals[%zd]", i);
	return api_write_finish(r, cfg, create ? 201 : 200, body, prefix);
out:
	json_decref(cfg);
	json_decref(body);
	return 0;
}

int api_h_portal_create(struct api_req *r)
{
	return portal_write(r, true);
}

int api_h_portal_put(struct api_req *r)
{
	return portal_write(r, false);
}

int api_h_portal_delete(struct api_req *r)
{
	json_t *cfg = api_write_begin(r), *arr, *t, *p;
	struct gw_buf users;
	size_t i, j;
	ssize_t k;

	if (!cfg)
		return 0;
	arr = api_conf_array(cfg, "portals");
	k = api_conf_find(arr, "name", r->params[0]);
	if (k < 0) {
		api_reply_err(r, API_E_NOT_FOUND, NULL, "no portal %s", r->params[0]);
		json_decref(cfg);
		return 0;
	}
	gw_buf_init(&users);
	json_array_foreach(json_object_get(cfg, "targets"), i, t)
		json_array_foreach(json_object_get(t, "portals"), j, p)
			if (json_is_string(p) && !strcmp(json_string_value(p), r->params[0]))
				gw_buf_printf(&users, "%s%s", users.len ? ", " : "",
					      json_string_value(json_object_get(t, "name")));
	if (users.len) {
		api_reply_err(r, API_E_IN_USE, "name", "portal %s is used by: %s", r->params[0],
			      (const char *)users.data);
		gw_buf_fini(&users);
		json_decref(cfg);
		return 0;
	}
	gw_buf_fini(&users);
	json_array_remove(arr, (size_t)k);
	return api_write_finish(r, cfg, 204, NULL, NULL);
}

int api_h_discovery_get(struct api_req *r)
{
	json_t *d = json_object_get(api_store_config(r->ag->store), "discovery");
	json_t *m = d ? api_conf_mask(d) : json_pack("{s:s}", "auth", "none");

	api_reply_etag(r);
	api_reply_json(r, 200, m);
	return 0;
}

int api_h_discovery_put(struct api_req *r)
{
	json_t *body = api_req_json(r), *cfg;

	if (!body)
		return 0;
	cfg = api_write_begin(r);
	if (!cfg) {
		json_decref(body);
		return 0;
	}
	json_object_set(cfg, "discovery", body);
	return api_write_finish(r, cfg, 200, api_conf_mask_steal(body), "discovery");
}
