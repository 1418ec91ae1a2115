// SPDX-License-Identifier: MIT
/*
 * openapi.json must describe every endpoint the agent serves, and nothing it does not: walks
 * the real route table against the document built from it, resolves every $ref, and checks
 * that the router reaches each documented operation with sample parameters.
 */
#include <criterion/criterion.h>
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_agent.h"

static json_t *doc;

static void setup(void)
{
	doc = api_openapi_build(api_routes, "test");
	cr_assert_not_null(doc);
}

static void teardown(void)
{
	json_decref(doc);
}

static void lower(const char *m, char *out, size_t n)
{
	size_t i;

	for (i = 0; m[i] && i + 1 < n; i++)
		out[i] = (char)tolower((unsigned char)m[i]);
	out[i] = 0;
}

static json_t *operation(const struct api_route *rt)
{
	char m[16];

	lower(rt->method, m, sizeof(m));
	return json_object_get(json_object_get(json_object_get(doc, "paths"), rt->pattern), m);
}

TestSuite(api_openapi, .init = setup, .fini = teardown);

Test(api_openapi, every_route_is_documented_with_its_responses)
{
	const struct api_route *rt;

	for (rt = api_routes; rt->method; rt++) {
		json_t *op = operation(rt), *resp;
		char st[8];

		cr_assert_not_null(op, "%s %s is not in openapi.json", rt->method, rt->pattern);
		resp = json_object_get(op, "responses");
		snprintf(st, sizeof(st), "%u", rt->ok_status);
		cr_expect_not_null(json_object_get(resp, st), "%s %s: no %s response", rt->method,
				   rt->pattern, st);
		if (rt->role != API_ROLE_NONE)
			cr_expect_not_null(json_object_get(resp, "401"), "%s %s: no 401",
					   rt->method, rt->pattern);
		if (rt->role == API_ROLE_ADMIN)
			cr_expect_not_null(json_object_get(resp, "403"), "%s %s: no 403",
					   rt->method, rt->pattern);
		if (strchr(rt->pattern, '{'))
			cr_expect_not_null(json_object_get(resp, "404"), "%s %s: no 404",
					   rt->method, rt->pattern);
		if (rt->body) {
			cr_expect_not_null(json_object_get(op, "requestBody"), "%s %s: no body",
					   rt->method, rt->pattern);
			cr_expect_not_null(json_object_get(resp, "422"), "%s %s: no 422",
					   rt->method, rt->pattern);
			cr_expect_not_null(json_object_get(resp, "413"), "%s %s: no 413",
					   rt->method, rt->pattern);
		}
		if (rt->flags & API_RF_GATEWAY)
			cr_expect_not_null(json_object_get(resp, "503"), "%s %s: no 503",
					   rt->method, rt->pattern);
		cr_expect(json_string_length(json_object_get(op, "summary")) > 0,
			  "%s %s: no summary", rt->method, rt->pattern);
	}
}

Test(api_openapi, nothing_documented_that_is_not_served)
{
	const char *path, *m;
	json_t *item, *op;
	size_t nroutes = 0, ndoc = 0;
	const struct api_route *rt;

	for (rt = api_routes; rt->method; rt++)
		nroutes++;
	json_object_foreach(json_object_get(doc, "paths"), path, item) {
		json_object_foreach(item, m, op) {
			bool found = false;

			ndoc++;
			for (rt = api_routes; rt->method; rt++) {
				char lm[16];

				lower(rt->method, lm, sizeof(lm));
				if (!strcmp(rt->pattern, path) && !strcmp(lm, m))
					found = true;
			}
			cr_expect(found, "openapi.json documents %s %s, which no route serves", m,
				  path);
		}
	}
	cr_expect_eq(ndoc, nroutes, "%zu operations documented, %zu routes", ndoc, nroutes);
}

Test(api_openapi, path_parameters_are_declared)
{
	const struct api_route *rt;

	for (rt = api_routes; rt->method; rt++) {
		json_t *params = json_object_get(operation(rt), "parameters");
		const char *p;

		for (p = strchr(rt->pattern, '{'); p; p = strchr(p + 1, '{')) {
			const char *e = strchr(p, '}');
			char name[32];
			bool found = false;
			json_t *prm;
			size_t i;

			snprintf(name, sizeof(name), "%.*s", (int)(e - p - 1), p + 1);
			json_array_foreach(params, i, prm)
				if (!strcmp(json_string_value(json_object_get(prm, "name")), name) &&
				    !strcmp(json_string_value(json_object_get(prm, "in")), "path"))
					found = true;
			cr_expect(found, "%s %s: path parameter %s not declared", rt->method,
				  rt->pattern, name);
		}
	}
}

/* Every "$ref" anywhere in the document names an existing component schema. */
static void refs(json_t *j, const json_t *schemas, unsigned int *n)
{
	const char *k;
	json_t *v;
	size_t i;

	if (json_is_object(j)) {
		json_object_foreach(j, k, v) {
			if (!strcmp(k, "$ref")) {
				const char *r = json_string_value(v);
				const char *pre = "#/components/schemas/";

				cr_assert(r && !strncmp(r, pre, strlen(pre)), "odd $ref %s", r);
				cr_expect_not_null(json_object_get(schemas, r + strlen(pre)),
						   "$ref %s does not resolve", r);
				(*n)++;
			} else {
				refs(v, schemas, n);
			}
		}
	} else if (json_is_array(j)) {
		json_array_foreach(j, i, v)
			refs(v, schemas, n);
	}
}

Test(api_openapi, every_ref_resolves)
{
	unsigned int n = 0;

	refs(doc, json_object_get(json_object_get(doc, "components"), "schemas"), &n);
	cr_expect_gt(n, 20u);
}

/* The router reaches each route with sample parameters (a documented operation that the
 * matcher shadows with another route would never run). */
Test(api_openapi, the_router_reaches_every_route)
{
	const struct api_route *rt;

	for (rt = api_routes; rt->method; rt++) {
		char path[256], *o = path, allow[64], *params[API_MAX_PARAMS] = { 0 };
		const char *p = rt->pattern;
		unsigned int n = 0, i;
		int err = 0;

		while (*p && o < path + sizeof(path) - 16) {
			if (*p == '{') {
				const char *e = strchr(p, '}');

				o += sprintf(o, "%s", !strncmp(p, "{lun}", 5) || !strncmp(p, "{tsih}", 6)
							  ? "1" : "x0");
				p = e + 1;
			} else {
				*o++ = *p++;
			}
		}
		*o = 0;
		cr_expect_eq(api_route_match(api_routes, rt->method, path, params, &n, allow,
					     sizeof(allow), &err), rt, "%s %s does not reach %s",
			     rt->method, path, rt->pattern);
		for (i = 0; i < n; i++)
			free(params[i]);
	}
}

/* ---- a LUN's status against its schema ------------------------------------------------- */

static json_t *schema_of(const char *name)
{
	return json_object_get(json_object_get(json_object_get(doc, "components"), "schemas"),
			       name);
}

/* A small validator for what the status schema uses (type, enum, required, properties,
 * items); strict: a property the schema does not list is a failure (where = its path). */
static bool valid(const json_t *sc, const json_t *v, char *where, size_t n)
{
	const char *type = json_string_value(json_object_get(sc, "type")), *k;
	const json_t *en = json_object_get(sc, "enum"), *x, *props;
	size_t i, len = strlen(where);
	bool ok = true;

	if (type && ((!strcmp(type, "object") && !json_is_object(v)) ||
		     (!strcmp(type, "string") && !json_is_string(v)) ||
		     (!strcmp(type, "integer") && !json_is_integer(v)) ||
		     (!strcmp(type, "boolean") && !json_is_boolean(v)) ||
		     (!strcmp(type, "array") && !json_is_array(v))))
		return false;
	if (en) {
		bool found = false;

		json_array_foreach(en, i, x)
			found |= json_equal(x, v);
		if (!found)
			return false;
	}
	json_array_foreach(json_object_get(sc, "required"), i, x)
		if (!json_object_get(v, json_string_value(x))) {
			snprintf(where + len, n - len, "/%s (required)", json_string_value(x));
			return false;
		}
	props = json_object_get(sc, "properties");
	if (json_is_object(v) && props) {
		json_object_foreach((json_t *)v, k, x) {
			const json_t *ps = json_object_get(props, k);

			snprintf(where + len, n - len, "/%s", k);
			if (!ps || !valid(ps, x, where, n))
				return false;
			where[len] = '\0';
		}
	}
	if (json_is_array(v))
		json_array_foreach(v, i, x)
			ok = ok && valid(json_object_get(sc, "items"), x, where, n);
	return ok;
}

/* What the gateway reports for a file LUN (gateway/bs/bs_file.c, gateway/scsi/scsi_sbc.c). */
#define FILE_LUN_STATUS "{\"io_engine\":\"uring\",\"queue_depth\":64,\"threads\":4," \
	"\"atomics\":{\"compare_and_write\":{\"mode\":\"local\",\"reason\":\"this gateway " \
	"reads, compares and writes under its range lock\",\"max_blocks\":2048,\"refused\":0," \
	"\"backend_commands\":0},\"write_same\":{\"mode\":\"local\",\"reason\":\"written by " \
	"this gateway\"},\"unmap\":{\"mode\":\"refused\",\"reason\":\"the LU is not thin\"}}}"

Test(api_openapi, a_luns_status_with_its_atomics_is_described_by_the_schema)
{
	const json_t *st = json_object_get(json_object_get(schema_of("Lun"), "properties"),
					   "status");
	json_t *v = json_loads(FILE_LUN_STATUS, 0, NULL), *caw;
	char where[256] = "";

	cr_assert_not_null(st);
	cr_assert_not_null(v);
	cr_assert(valid(st, v, where, sizeof(where)), "status%s is not in the schema", where);
	/* Every mode the gateway reports, and nothing else. */
	caw = json_object_get(json_object_get(v, "atomics"), "compare_and_write");
	for (const char *const *m = (const char *const[]){ "backend", "owner", "refused", NULL };
	     *m; m++) {
		json_object_set_new(caw, "mode", json_string(*m));
		where[0] = '\0';
		cr_assert(valid(st, v, where, sizeof(where)), "mode %s: %s", *m, where);
	}
	json_object_set_new(caw, "mode", json_string("sometimes"));
	where[0] = '\0';
	cr_assert_not(valid(st, v, where, sizeof(where)), "a mode that is none of the four");
	json_object_del(json_object_get(v, "atomics"), "unmap");
	json_object_set_new(caw, "mode", json_string("local"));
	where[0] = '\0';
	cr_assert_not(valid(st, v, where, sizeof(where)), "unmap is always there");
	cr_assert(strstr(where, "unmap"), "%s", where);
	json_object_del(v, "atomics");
	where[0] = '\0';
	cr_assert_not(valid(st, v, where, sizeof(where)), "every LUN's status has atomics");
	json_decref(v);
}
