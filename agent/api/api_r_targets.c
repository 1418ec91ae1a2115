// SPDX-License-Identifier: MIT
/*
 * /api/v1/targets: targets are the "targets" array of the desired configuration, named by
 * their IQN. PUT replaces a target's own settings; its luns and initiators (managed through
 * their own endpoints) stay unless the body carries them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_agent.h"
#include "api_cluster.h"
#include "api_r.h"
#include "api_rcache.h"
#include "api_store.h"

struct api_targets {
	struct api_rcache list;		/* the list, serialized once per generation */
};

int api_targets_create(struct api_targets **out)
{
	struct api_targets *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	*out = t;
	return 0;
}

void api_targets_destroy(struct api_targets *t)
{
	if (!t)
		return;
	api_rcache_fini(&t->list);
	free(t);
}

static json_t *cfg_targets(const struct api_req *r)
{
	return json_object_get(api_store_config(r->ag->store), "targets");
}

int api_h_targets_list(struct api_req *r)
{
	/* The list only changes with the configuration: serialized once per generation. */
	const struct api_store *s = r->ag->store;
	const uint64_t key[API_RCACHE_KEYS] = { api_store_generation(s),
						(uint64_t)(uintptr_t)api_store_config(s) };
	json_t *list, *t;
	size_t i, len;
	char *text = api_rcache_get(&r->ag->targets->list, key, 0, 0, &len);

	if (text) {
		api_reply_etag(r);
		api_reply_text(r, 200, "application/json", text, len);
		return 0;
	}
	list = json_array();
	if (!list)
		return -ENOMEM;
	json_array_foreach(cfg_targets(r), i, t) {
		json_t *m = json_object();

		json_array_append_new(list, m);
		json_object_update(m, t);
		json_object_set_new(m, "luns", json_integer((json_int_t)json_array_size(
							json_object_get(t, "luns"))));
		json_object_set_new(m, "initiators", json_integer((json_int_t)json_array_size(
							json_object_get(t, "initiators"))));
		json_object_del(m, "chap");
		json_object_set_new(m, "chap", json_boolean(json_string_length(json_object_get(
							json_object_get(t, "chap"), "user")) > 0));
	}
	api_reply_etag(r);
	api_reply_json(r, 200, json_pack("{s:o}", "targets", list));
	if (r->status == 200 && r->resp_body)
		api_rcache_put(&r->ag->targets->list, key, r->resp_body, r->resp_len, 0);
	return 0;
}

int api_h_target_get(struct api_req *r)
{
	json_t *arr = cfg_targets(r);
	ssize_t i = api_conf_find(arr, "name", r->params[0]);

	if (i < 0) {
		api_reply_err(r, API_E_NOT_FOUND, NULL, "no target %s", r->params[0]);
		return 0;
	}
	api_reply_etag(r);
	api_reply_json(r, 200, api_conf_mask(json_array_get(arr, (size_t)i)));
	return 0;
}

static void set_default_portals(struct api_agent *ag, json_t *t, json_t *cfg)
{
	json_t *names, *p, *eff;
	size_t i;

	if (json_object_get(t, "portals"))
		return;
	/* In a cluster the portals are the gateway's own (docs/CLUSTER.md). */
	eff = api_cluster_gw_config(ag->cluster, cfg);
	names = json_array();
	json_array_foreach(json_object_get(eff ? eff : cfg, "portals"), i, p) {
		json_t *n = json_object_get(p, "name");

		if (json_is_string(n))
			json_array_append(names, n);
	}
	json_decref(eff);
	json_object_set_new(t, "portals", names);
}

int api_h_target_create(struct api_req *r)
{
	json_t *body = api_req_json(r), *cfg, *arr;
	const char *name;
	char prefix[48], loc[512];

	if (!body)
		return 0;
	name = json_string_value(json_object_get(body, "name"));
	if (!name) {
		json_decref(body);
		api_reply_err(r, API_E_INVALID, "name", "required: the target's iSCSI name");
		return 0;
	}
	cfg = api_write_begin(r);
	if (!cfg) {
		json_decref(body);
		return 0;
	}
	arr = api_conf_array(cfg, "targets");
	if (api_conf_find(arr, "name", name) >= 0) {
		api_reply_err(r, API_E_EXISTS, "name", "target %s already exists", name);
		json_decref(body);
		json_decref(cfg);
		return 0;
	}
	set_default_portals(r->ag, body, cfg);
	snprintf(prefix, sizeof(prefix), "targets[%zu]", json_array_size(arr));
	snprintf(loc, sizeof(loc), API_PREFIX "/targets/%s", name);
	api_reply_header(r, "Location", loc);
	json_array_append(arr, body);
	return api_write_finish(r, cfg, 201, api_conf_mask_steal(body), prefix);
}

int api_h_target_put(struct api_req *r)
{
	json_t *body = api_req_json(r), *cfg, *arr, *old;
	const char *name;
	char prefix[48];
	ssize_t i;

	if (!body)
		return 0;
	name = json_string_value(json_object_get(body, "name"));
	if (json_object_get(body, "name") && (!name || strcmp(name, r->params[0]))) {
		json_decref(body);
		api_reply_err(
		    r, API_E_INVALID, "name",
		    "a target cannot be renamed: create the new one, then delete this one");
		return 0;
	}
	cfg = api_write_begin(r);
	if (!cfg) {
		json_decref(body);
		return 0;
	}
	arr = api_conf_array(cfg, "targets");
	i = api_conf_find(arr, "name", r->params[0]);
	if (i < 0) {
		api_reply_err(r, API_E_NOT_FOUND, NULL, "no target %s", r->params[0]);
		json_decref(body);
		json_decref(cfg);
		return 0;
	}
	old = json_array_get(arr, (size_t)i);
	json_object_set_new(body, "name", json_string(r->params[0]));
	if (!json_object_get(body, "luns") && json_object_get(old, "luns"))
		json_object_set(body, "luns", json_object_get(old, "luns"));
	if (!json_object_get(body, "initiators") && json_object_get(old, "initiators"))
		json_object_set(body, "initiators", json_object_get(old, "initiators"));
	set_default_portals(r->ag, body, cfg);
	json_array_set(arr, (size_t)i, body);
	snprintf(prefix, sizeof(prefix), "targets[%zd]", i);
	return api_write_finish(r, cfg, 200, api_conf_mask_steal(body), prefix);
}

int api_h_target_delete(struct api_req *r)
{
	json_t *cfg = api_write_begin(r), *arr;
	ssize_t i;

	if (!cfg)
		return 0;
	arr = api_conf_array(cfg, "targets");
	i = api_conf_find(arr, "name", r->params[0]);
	if (i < 0) {
		api_reply_err(r, API_E_NOT_FOUND, NULL, "no target %s", r->params[0]);
		json_decref(cfg);
		return 0;
	}
	json_array_remove(arr, (size_t)i);
	return api_write_finish(r, cfg, 204, NULL, NULL);
}
