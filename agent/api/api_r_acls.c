// SPDX-License-Identifier: MIT
/*
 * /api/v1/targets/{target}/acls: the initiators a target admits ("initiators" in the
 * configuration), each optionally with its own CHAP / mutual CHAP credentials. Secrets are
 * write-only: reads show "****", and "****" written back keeps the stored secret.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_agent.h"
#include "api_r.h"

int api_h_acls_list(struct api_req *r)
{
	const json_t *t = api_stored_target(r);
	json_t *m, *any, *acls;

	if (!t)
		return 0;
	m = api_conf_mask(t);
	any = json_object_get(m, "allow_any_initiator");
	acls = json_object_get(m, "initiators");
	api_reply_etag(r);
	/* "o" takes a reference: borrowed values gain one, a new empty list keeps its own. */
	api_reply_json(r, 200, json_pack("{s:o, s:o}", "allow_any_initiator",
					 any ? json_incref(any) : json_false(), "acls",
					 acls ? json_incref(acls) : json_array()));
	json_decref(m);
	return 0;
}

int api_h_acl_get(struct api_req *r)
{
	const json_t *t = api_stored_target(r);
	json_t *m;
	ssize_t i;

	if (!t)
		return 0;
	m = api_conf_mask(t);
	i = api_conf_find(json_object_get(m, "initiators"), "name", r->params[1]);
	if (i < 0) {
		api_reply_err(r, API_E_NOT_FOUND, NULL, "target %s has no ACL for %s", r->params[0],
			      r->params[1]);
	} else {
		api_reply_etag(r);
		api_reply_json(r, 200, json_incref(json_array_get(json_object_get(m, "initiators"),
								  (size_t)i)));
	}
	json_decref(m);
	return 0;
}

static int acl_write(struct api_req *r, bool create)
{
	json_t *body = api_req_json(r), *cfg = NULL, *t, *arr;
	const char *name;
	char prefix[96], loc[768];
	ssize_t ti, i;

	if (!body)
		return 0;
	name = json_string_value(json_object_get(body, "name"));
	if (create && !name) {
		api_reply_err(r, API_E_INVALID, "name", "required: the initiator's iSCSI name");
		goto out;
	}
	if (!create) {
		if (json_object_get(body, "name") && (!name || strcmp(name, r->params[1]))) {
			api_reply_err(r, API_E_INVALID, "name",
				      "the body's name must be the one in the path");
			goto out;
		}
		json_object_set_new(body, "name", json_string(r->params[1]));
		name = r->params[1];
	}
	cfg = api_write_begin(r);
	if (!cfg)
		goto out;
	t = api_find_target(r, cfg, r->params[0], &ti);
	if (!t)
		goto out;
	arr = api_conf_array(t, "initiators");
	i = api_conf_find(arr, "name", name);
	if (create && i >= 0) {
		api_reply_err(r, API_E_EXISTS, "name", "target %s already admits %s", r->params[0],
			      name);
		goto out;
	}
	if (!create && i < 0) {
		api_reply_err(r, API_E_NOT_FOUND, NULL, "target %s has no ACL for %s", r->params[0],
			      name);
		goto out;
	}
	if (create) {
		i = (ssize_t)json_array_size(arr);
		json_array_append(arr, body);
		snprintf(loc, sizeof(loc), API_PREFIX "/targets/%s/acls/%s", r->params[0], name);
		api_reply_header(r, "Location", loc);
	} else {
		json_array_set(arr, (size_t)i, body);
	}
	snprintf(prefix, sizeof(prefix), "targets[%zd].initiators[%zd]", ti, i);
	return api_write_finish(r, cfg, create ? 201 : 200, api_conf_mask_steal(body), prefix);
out:
	json_decref(cfg);
	json_decref(body);
	return 0;
}

int api_h_acl_create(struct api_req *r)
{
	return acl_write(r, true);
}

int api_h_acl_put(struct api_req *r)
{
	return acl_write(r, false);
}

int api_h_acl_delete(struct api_req *r)
{
	json_t *cfg = api_write_begin(r), *t, *arr;
	ssize_t i;

	if (!cfg)
		return 0;
	t = api_find_target(r, cfg, r->params[0], NULL);
	if (!t) {
		json_decref(cfg);
		return 0;
	}
	arr = api_conf_array(t, "initiators");
	i = api_conf_find(arr, "name", r->params[1]);
	if (i < 0) {
		api_reply_err(r, API_E_NOT_FOUND, NULL, "target %s has no ACL for %s", r->params[0],
			      r->params[1]);
		json_decref(cfg);
		return 0;
	}
	json_array_remove(arr, (size_t)i);
	return api_write_finish(r, cfg, 204, NULL, NULL);
}
