// SPDX-License-Identifier: MIT
/*
 * The desired configuration as JSON: validation by the gateway's own parser (the same code
 * that reads isergwd.json, so the agent can never store what the gateway would refuse to
 * parse), secret masking for reads, and the lookups the resource handlers share.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api_agent.h"
#include "api_r.h"
#include "api_store.h"
#include "conf.h"

int api_conf_validate(const json_t *cfg, struct gw_errlist *errs)
{
	struct ctl_config c;
	int r;

	r = conf_parse(cfg, &c, errs);
	if (r == 0)
		conf_free(&c);
	return r ? -EINVAL : 0;
}

static bool is_secret_key(const char *k)
{
	return !strcmp(k, "secret") || !strcmp(k, "mutual_secret");
}

static void mask_chap(json_t *chap)
{
	const char *k;
	json_t *v;

	if (!json_is_object(chap))
		return;
	json_object_foreach(chap, k, v) {
		if (is_secret_key(k) && json_is_string(v) && json_string_length(v))
			json_object_set_new(chap, k, json_string(API_MASK));
	}
}

static void mask_target(json_t *t)
{
	json_t *i;
	size_t n;

	mask_chap(json_object_get(t, "chap"));
	json_array_foreach(json_object_get(t, "initiators"), n, i)
		mask_chap(json_object_get(i, "chap"));
}

json_t *api_conf_mask(const json_t *in)
{
	json_t *c = json_deep_copy(in), *t;
	size_t n;

	if (!c)
		return NULL;
	/* Whole configurations, single targets, ACLs and discovery objects all pass here. */
	mask_chap(json_object_get(c, "chap"));
	mask_chap(json_object_get(json_object_get(c, "discovery"), "chap"));
	json_array_foreach(json_object_get(c, "targets"), n, t)
		mask_target(t);
	json_array_foreach(json_object_get(c, "initiators"), n, t)
		mask_chap(json_object_get(t, "chap"));
	return c;
}

json_t *api_conf_mask_steal(json_t *in)
{
	json_t *m = api_conf_mask(in);

	json_decref(in);
	return m;
}

json_t *api_find_target(struct api_req *r, const json_t *cfg, const char *name, ssize_t *idx)
{
	json_t *arr = json_object_get(cfg, "targets");
	ssize_t i = api_conf_find(arr, "name", name);

	if (i < 0) {
		api_reply_err(r, API_E_NOT_FOUND, NULL, "no target %s", name);
		return NULL;
	}
	if (idx)
		*idx = i;
	return json_array_get(arr, (size_t)i);
}

const json_t *api_stored_target(struct api_req *r)
{
	return api_find_target(r, api_store_config(r->ag->store), r->params[0], NULL);
}

static void unmask_chap(json_t *chap, const json_t *old)
{
	const char *k;
	json_t *v;

	if (!json_is_object(chap))
		return;
	json_object_foreach(chap, k, v) {
		const json_t *ov;

		if (!is_secret_key(k) || !json_is_string(v) ||
		    strcmp(json_string_value(v), API_MASK))
			continue;
		ov = json_is_object(old) ? json_object_get(old, k) : NULL;
		/* Without an old value the mask stays, and validation says it is too short. */
		if (json_is_string(ov))
			json_object_set_new(chap, k, json_string(json_string_value(ov)));
	}
}

static const json_t *find_named(const json_t *arr, const char *name)
{
	ssize_t i;

	if (!name)
		return NULL;
	i = api_conf_find(arr, "name", name);
	return i < 0 ? NULL : json_array_get(arr, (size_t)i);
}

void api_conf_unmask(json_t *cfg, const json_t *old)
{
	json_t *t, *ini;
	size_t i, j;

	unmask_chap(json_object_get(json_object_get(cfg, "discovery"), "chap"),
		    json_object_get(json_object_get(old, "discovery"), "chap"));
	json_array_foreach(json_object_get(cfg, "targets"), i, t) {
		const json_t *ot = find_named(json_object_get(old, "targets"),
					      json_string_value(json_object_get(t, "name")));

		unmask_chap(json_object_get(t, "chap"), json_object_get(ot, "chap"));
		json_array_foreach(json_object_get(t, "initiators"), j, ini) {
			const json_t *oi =
			    find_named(json_object_get(ot, "initiators"),
				       json_string_value(json_object_get(ini, "name")));

			unmask_chap(json_object_get(ini, "chap"), json_object_get(oi, "chap"));
		}
	}
}

/* The gateway section's keys the API may read but not change. */
static const char *const api_fixed_gateway_keys[] = { "control_socket", NULL };

int api_conf_keep_fixed(json_t *cfg, const json_t *old, struct gw_errlist *errs)
{
	const json_t *og = json_object_get(old, "gateway");
	json_t *g = json_object_get(cfg, "gateway");
	int rc = 0;

	for (const char *const *k = api_fixed_gateway_keys; *k; k++) {
		const json_t *ov = json_object_get(og, *k), *nv = json_object_get(g, *k);
		const char *os = json_is_string(ov) ? json_string_value(ov) : "";

		if (!nv) {
			if (!*os)
				continue;
			if (!json_is_object(g) &&
			    json_object_set_new(cfg, "gateway", g = json_object()))
				goto nomem;
			if (json_object_set_new(g, *k, json_string(os)))
				goto nomem;
			continue;
		}
		if (json_is_string(nv) && !strcmp(json_string_value(nv), os))
			continue;
		gw_errlist_add(errs, "gateway", "%s is set in the gateway's own configuration "
			       "file and cannot be changed through the API (it is \"%s\")", *k, os);
		rc = -EPERM;
	}
	return rc;
nomem:
	gw_errlist_add(errs, "", "out of memory");
	return -ENOMEM;
}

json_t *api_conf_array(json_t *obj, const char *key)
{
	json_t *a = json_object_get(obj, key);

	if (json_is_array(a))
		return a;
	a = json_array();
	if (!a || json_object_set_new(obj, key, a))
		return NULL;
	return a;
}

ssize_t api_conf_find(const json_t *arr, const char *key, const char *value)
{
	json_t *e;
	size_t i;

	json_array_foreach(arr, i, e) {
		const char *v = json_string_value(json_object_get(e, key));

		if (v && !strcmp(v, value))
			return (ssize_t)i;
	}
	return -1;
}

ssize_t api_conf_find_lun(const json_t *luns, uint64_t lun)
{
	json_t *e;
	size_t i;

	json_array_foreach(luns, i, e) {
		json_t *l = json_object_get(e, "lun");

		if (json_is_integer(l) && (uint64_t)json_integer_value(l) == lun)
			return (ssize_t)i;
	}
	return -1;
}

int api_parse_lun(const char *s, uint64_t *lun)
{
	char *end;
	unsigned long long v;

	if (!s || !*s || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v > 16383)
		return -EINVAL;
	*lun = v;
	return 0;
}

void api_reply_etag(struct api_req *r)
{
	char tag[32];

	snprintf(tag, sizeof(tag), "\"%llu\"",
		 (unsigned long long)api_store_generation(r->ag->store));
	api_reply_header(r, "ETag", tag);
}
