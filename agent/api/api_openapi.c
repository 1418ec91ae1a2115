// SPDX-License-Identifier: MIT
/*
 * The OpenAPI 3.0 document served at /api/v1/openapi.json, built at start from the two
 * sources of truth: the route table (paths, methods, roles, statuses) and the gateway's
 * keyword tables (object schemas, with ranges, defaults and help), so it cannot drift from
 * what the agent does or what the gateway accepts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_agent.h"
#include "api_bond.h"
#include "api_r.h"
#include "conf.h"

static json_t *ref(const char *name)
{
	char buf[128];

	snprintf(buf, sizeof(buf), "#/components/schemas/%s", name);
	return json_pack("{s:s}", "$ref", buf);
}

static json_t *array_of(const char *name)
{
	return json_pack("{s:s, s:o}", "type", "array", "items", ref(name));
}

static json_t *list_of(const char *key, const char *name)
{
	return json_pack("{s:s, s:{s:o}}", "type", "object", "properties", key, array_of(name));
}

/* Table schema plus nested members. */
static json_t *table(const struct gw_conf_key *tbl)
{
	return gw_conf_schema(tbl);
}

static void add_prop(json_t *schema, const char *key, json_t *s)
{
	json_object_set_new(json_object_get(schema, "properties"), key, s);
}

/* One of a LU's atomics: how this gateway does the command (docs/CONTROL.md, "LUN status"). */
static json_t *atom_schema(void)
{
	return json_pack("{s:s, s:{s:{s:s, s:[s,s,s,s]}, s:{s:s}}, s:[s,s]}", "type", "object",
			 "properties", "mode", "type", "string", "enum", "backend", "local",
			 "owner", "refused", "reason", "type", "string", "required", "mode",
			 "reason");
}

/* Every LU's atomics: COMPARE AND WRITE (with its limit and counters), WRITE SAME, UNMAP. */
static json_t *atomics_schema(void)
{
	json_t *caw = atom_schema();

	add_prop(caw, "max_blocks", json_pack("{s:s, s:s}", "type", "integer", "description",
					      "what VPD B0 reports here; 0: not advertised"));
	add_prop(caw, "refused", json_pack("{s:s, s:s}", "type", "integer", "description",
					   "COMPARE AND WRITEs and ORWRITEs refused here since "
					   "start"));
	add_prop(caw, "backend_commands", json_pack("{s:s, s:s}", "type", "integer",
						    "description",
						    "COMPARE AND WRITEs passed to the back end"));
	return json_pack("{s:s, s:s, s:{s:o, s:o, s:o}, s:[s,s,s]}", "type", "object",
			 "description", "how this gateway does COMPARE AND WRITE, WRITE SAME and "
			 "UNMAP for the LU: backend (the back end does it), local (this gateway, "
			 "the LU has no other), owner (this gateway, the cluster's only optimized "
			 "one), refused (not here: reason says why)",
			 "properties", "compare_and_write", caw, "write_same", atom_schema(), "unmap",
			 atom_schema(), "required", "compare_and_write", "write_same", "unmap");
}

/* A LUN's read-only live status (GET only; ignored when sent back): the backstore's own
 * report, docs/CONTROL.md. Every LUN has its atomics; remote LUNs list their iSCSI paths,
 * block backstores on a dm-multipath map the map's paths, file and block backstores their
 * I/O engine. */
static json_t *lun_status_schema(void)
{
	json_t *path = json_pack(
		"{s:s, s:{s:{s:s}, s:{s:s}, s:{s:s}, s:{s:s}, s:{s:s}, s:{s:s}, s:{s:s}, s:{s:s},"
		" s:{s:s}, s:{s:s}, s:{s:s}, s:{s:s}, s:{s:s}, s:{s:s}}}",
		"type", "object", "properties",
		"url", "type", "string", "dev", "type", "string", "state", "type", "string",
		"group", "type", "integer", "priority", "type", "integer",
		"alua_state", "type", "string", "in_use", "type", "boolean",
		"errors", "type", "integer", "failovers", "type", "integer",
		"latency_us", "type", "integer", "last_error", "type", "string",
		"dm_st", "type", "string", "chk_st", "type", "string", "up", "type", "boolean");
	json_t *st = json_pack("{s:s, s:b, s:s, s:{s:{s:s}, s:{s:s}, s:{s:s}, s:{s:s}, s:{s:s},"
			       " s:{s:s}, s:{s:s, s:o}, s:o}, s:[s]}",
			       "type", "object", "readOnly", 1, "description",
			       "live backstore state from the gateway; absent while it is "
			       "unreachable",
			       "properties", "state", "type", "string", "failovers", "type",
			       "integer", "queued", "type", "integer", "map", "type", "string",
			       "warning", "type", "string", "identity", "type", "string",
			       "paths", "type", "array", "items", path, "atomics",
			       atomics_schema(), "required", "atomics");

	add_prop(st, "io_engine", json_pack("{s:s, s:[s,s], s:s}", "type", "string", "enum",
					    "uring", "threads", "description",
					    "file and block backstores: how their I/O is done"));
	add_prop(st, "queue_depth", json_pack("{s:s}", "type", "integer"));
	add_prop(st, "threads", json_pack("{s:s}", "type", "integer"));
	return st;
}

static json_t *schemas(void)
{
	json_t *sc = json_object(), *o;

	json_object_set_new(sc, "Chap", table(conf_chap_keys));
	json_object_set_new(sc, "Params", table(conf_param_keys));
	json_object_set_new(sc, "Portal", table(conf_portal_keys));
	json_object_set_new(sc, "Backstore", table(conf_bs_keys));
	json_object_set_new(sc, "Gateway", table(conf_gateway_keys));
	o = table(conf_initiator_keys);
	add_prop(o, "chap", ref("Chap"));
	json_object_set_new(sc, "Acl", o);
	o = table(conf_lu_keys);
	add_prop(o, "backstore", ref("Backstore"));
	add_prop(o, "status", lun_status_schema());
	json_object_set_new(sc, "Lun", o);
	o = table(conf_discovery_keys);
	add_prop(o, "chap", ref("Chap"));
	json_object_set_new(sc, "Discovery", o);
	o = table(conf_target_keys);
	add_prop(o, "chap", ref("Chap"));
	add_prop(o, "params", ref("Params"));
	add_prop(o, "initiators", array_of("Acl"));
	add_prop(o, "luns", array_of("Lun"));
	json_object_set_new(sc, "Target", o);
	json_object_set_new(sc, "Config", json_pack(
		"{s:s, s:{s:o, s:o, s:o, s:o}, s:[s], s:b}", "type", "object", "properties",
		"gateway", ref("Gateway"), "portals", array_of("Portal"), "discovery",
		ref("Discovery"), "targets", array_of("Target"), "required", "portals",
		"additionalProperties", 0));
	json_object_set_new(sc, "TargetList", list_of("targets", "Target"));
	json_object_set_new(sc, "LunList", list_of("luns", "Lun"));
	json_object_set_new(sc, "LunResize", json_pack(
		"{s:s, s:b, s:{s:{s:[s,s], s:s}, s:{s:s, s:s}}}", "type", "object",
		"additionalProperties", 0, "properties", "size", "type", "integer", "string",
		"description", "the new size: bytes, or with a suffix (\"2G\"); absent: measure "
		"a block device or file grown from outside", "force", "type", "boolean",
		"description", "allow a smaller size (cuts off data)"));
	json_object_set_new(sc, "AclList", list_of("acls", "Acl"));
	/* A listed portal also carries its live status (api_live.c), read-only. */
	o = table(conf_portal_keys);
	add_prop(o, "status", json_pack(
		"{s:s, s:b, s:{s:{s:s, s:b}, s:{s:s}, s:{s:s}}}", "type", "object", "readOnly", 1,
		"properties", "listening", "type", "boolean", "nullable", 1, "bound", "type", "string",
		"reason", "type", "string"));
	json_object_set_new(sc, "PortalListed", o);
	json_object_set_new(sc, "PortalList", list_of("portals", "PortalListed"));
	json_object_set_new(sc, "Session", json_pack(
		"{s:s, s:{s:{s:s}, s:{s:s}, s:{s:s}, s:{s:s}, s:{s:s}, s:{s:s}}}", "type", "object",
		"properties", "tsih", "type", "integer", "target", "type", "string", "initiator",
		"type", "string", "isid", "type", "string", "transport", "type", "string",
		"connections", "type", "array"));
	json_object_set_new(sc, "SessionList", list_of("sessions", "Session"));
	json_object_set_new(sc, "Health",
			    json_pack("{s:s, s:{s:{s:s, s:[s,s]}, s:{s:s}, s:{s:s}, s:{s:s}}}",
				      "type", "object", "properties", "status", "type", "string",
				      "enum", "ok", "degraded", "version", "type", "string",
				      "generation", "type", "integer", "gateway", "type",
				      "object"));
	json_object_set_new(sc, "Version", json_pack(
		"{s:s, s:{s:{s:s}, s:{s:s}, s:{s:s}}}", "type", "object", "properties", "version",
		"type", "string", "api", "type", "string", "role", "type", "string"));
	json_object_set_new(sc, "Validation", json_pack(
		"{s:s, s:{s:{s:s}, s:{s:s}}}", "type", "object", "properties", "valid", "type",
		"boolean", "generation", "type", "integer"));
	json_object_set_new(sc, "BondDesired", json_pack(
		"{s:s, s:b, s:{s:{s:s}, s:{s:s, s:[s,s,s,s,s,s,s]}, s:{s:s, s:[s,s,s]}, "
		"s:{s:s, s:{s:s}}, s:{s:s}, s:{s:s, s:i, s:i}, s:{s:s, s:i, s:i}}}",
		"type", "object", "additionalProperties", 0,
		"properties", "name", "type", "string", "mode", "type", "string", "enum",
		"balance-rr", "active-backup", "balance-xor", "broadcast", "802.3ad", "balance-tlb",
		"balance-alb", "fail_over_mac", "type", "string", "enum", "none", "active", "follow",
		"slaves", "type", "array", "items", "type", "string", "primary", "type", "string",
		"miimon", "type", "integer", "minimum", 0, "maximum", API_BOND_MIIMON_MAX,
		"num_grat_arp", "type", "integer", "minimum", 0, "maximum", API_BOND_GRAT_ARP_MAX));
	json_object_set_new(sc, "Bond", json_pack(
		"{s:s, s:{s:{s:s}, s:{s:s}, s:{s:s}, s:{s:s}, s:{s:s}, s:{s:s}, s:{s:s}, s:{s:s}, "
		"s:{s:s}, s:o, s:{s:s}, s:{s:s}, s:{s:s}}}", "type", "object", "properties",
		"name", "type", "string", "present", "type", "boolean", "mode", "type", "string",
		"fail_over_mac", "type", "string", "active_slave", "type", "string", "mii_status",
		"type", "string", "slaves", "type", "array", "failovers", "type", "integer",
		"rdma_devices", "type", "array", "desired", ref("BondDesired"), "drift", "type",
		"array", "warnings", "type", "array", "applied", "type", "object"));
	/* From the gateway's network model (docs/CONTROL.md). */
	add_prop(json_object_get(sc, "Bond"), "verdicts", array_of("NetVerdict"));
	add_prop(json_object_get(sc, "Bond"), "last_failover", json_pack("{s:s}", "type",
									  "object"));
	json_object_set_new(sc, "NetVerdict", json_pack(
		"{s:s, s:{s:{s:s}, s:{s:s, s:[s,s,s]}, s:{s:s}, s:{s:s}, s:{s:s}}}", "type",
		"object", "properties", "id", "type", "string", "severity", "type", "string",
		"enum", "info", "warning", "error", "object", "type", "string", "message", "type",
		"string", "fix", "type", "string"));
	json_object_set_new(sc, "BondList", list_of("bonds", "Bond"));
	add_prop(json_object_get(sc, "BondList"), "verdicts", array_of("NetVerdict"));
	add_prop(json_object_get(sc, "BondList"), "gateway", json_pack("{s:s}", "type",
									"boolean"));
	json_object_set_new(sc, "RdmaDevice", json_pack(
		"{s:s, s:{s:{s:s}, s:{s:s}, s:{s:s}, s:{s:s}}}", "type", "object", "properties",
		"name", "type", "string", "netdev", "type", "string", "node_guid", "type", "string",
		"ports", "type", "array"));
	json_object_set_new(sc, "RdmaList", list_of("devices", "RdmaDevice"));
	json_object_set_new(sc, "Error", json_pack(
		"{s:s, s:[s], s:{s:{s:s, s:[s,s], s:{s:{s:s}, s:{s:s}, s:{s:s}}}, "
		"s:{s:s, s:{s:s, s:{s:{s:s}, s:{s:s}}}}}}",
		"type", "object", "required", "error", "properties",
		"error", "type", "object", "required", "code", "message", "properties",
		"code", "type", "string", "message", "type", "string", "field", "type", "string",
		"errors", "type", "array", "items", "type", "object", "properties", "field", "type",
		"string", "message", "type", "string"));
	return sc;
}

static json_t *err_response(const char *desc)
{
	return json_pack("{s:s, s:{s:{s:o}}}", "description", desc, "content", "application/json",
			 "schema", ref("Error"));
}

static json_t *operation(const struct api_route *rt)
{
	json_t *op, *resp, *params = json_array();
	const char *p;
	char status[8];

	resp = json_object();
	snprintf(status, sizeof(status), "%u", rt->ok_status);
	if (rt->flags & API_RF_TEXT)
		json_object_set_new(resp, status, json_pack("{s:s, s:{s:{s:{s:s}}}}", "description",
			"OK", "content", !strcmp(rt->pattern, "/metrics") ? "text/plain" :
			"text/event-stream", "schema", "type", "string"));
	else if (rt->result)
		json_object_set_new(resp, status, json_pack("{s:s, s:{s:{s:o}}}", "description",
			"OK", "content", "application/json", "schema", ref(rt->result)));
	else
		json_object_set_new(resp, status, json_pack("{s:s}", "description",
							    rt->ok_status == 204 ? "Done" : "OK"));
	if (rt->role != API_ROLE_NONE) {
		json_object_set_new(resp, "401", err_response("missing or unknown token"));
		if (rt->role == API_ROLE_ADMIN)
			json_object_set_new(resp, "403", err_response("read-only token"));
	}
	if (strchr(rt->pattern, '{'))
		json_object_set_new(resp, "404", err_response("no such resource"));
	if (rt->body) {
		json_object_set_new(resp, "400", err_response("malformed JSON or bad parameter"));
		json_object_set_new(resp, "413", err_response("body too large"));
		json_object_set_new(resp, "422", err_response(
			"invalid: every error, with the offending field"));
	}
	if (rt->flags & API_RF_WRITE) {
		json_object_set_new(resp, "409", err_response("duplicate or still in use"));
		json_object_set_new(resp, "412", err_response("If-Match is stale"));
	}
	if (rt->flags & API_RF_GATEWAY)
		json_object_set_new(resp, "503", err_response("gateway unreachable"));
	/* Changing the host (PUT /bonds/{bond}?apply=true) can be refused. */
	if (rt->query && strstr(rt->query, "apply:") && !json_object_get(resp, "409"))
		json_object_set_new(resp, "409", err_response(
			"refused: it would touch an interface not named, the default route, the "
			"agent's address or a bond in use"));
	/* ... and needs the gateway's network model for the bond's present settings. */
	if (rt->query && strstr(rt->query, "apply:") && !json_object_get(resp, "503"))
		json_object_set_new(resp, "503", err_response(
			"the gateway's network model is not available (no gateway running)"));
	op = json_pack("{s:s, s:[s], s:o}", "summary", rt->summary, "tags", rt->tag, "responses",
		       resp);
	if (rt->role == API_ROLE_NONE)
		json_object_set_new(op, "security", json_array());
	else
		json_object_set_new(op, "x-isergw-role", json_string(api_role_name(rt->role)));
	if (rt->body)
		json_object_set_new(op, "requestBody",
				    json_pack("{s:b, s:{s:{s:o}}}", "required", 1, "content",
					      "application/json", "schema", ref(rt->body)));
	for (p = strchr(rt->pattern, '{'); p; p = strchr(p + 1, '{')) {
		const char *e = strchr(p, '}');
		char name[32];

		snprintf(name, sizeof(name), "%.*s", (int)(e - p - 1), p + 1);
		json_array_append_new(params, json_pack("{s:s, s:s, s:b, s:{s:s}}", "name", name,
							"in", "path", "required", 1, "schema",
							"type", strcmp(name, "lun") &&
							strcmp(name, "tsih") ? "string" :
							"integer"));
	}
	if (rt->flags & API_RF_WRITE)
		json_array_append_new(params, json_pack(
			"{s:s, s:s, s:b, s:s, s:{s:s}}", "name", "If-Match", "in", "header",
			"required", 0, "description",
			"generation the change was based on (the ETag of a GET); 412 if stale",
			"schema", "type", "string"));
	/* "name:description", several separated by ';'. */
	for (p = rt->query; p && *p;) {
		const char *c = strchr(p, ':'), *e;
		char q[64], d[256];

		if (!c)
			break;
		e = strchr(c, ';');
		if (!e)
			e = c + strlen(c);
		snprintf(q, sizeof(q), "%.*s", (int)(c - p), p);
		snprintf(d, sizeof(d), "%.*s", (int)(e - c - 1), c + 1);
		json_array_append_new(params, json_pack("{s:s, s:s, s:b, s:s, s:{s:s}}", "name", q,
							"in", "query", "required", 0,
							"description", d, "schema", "type",
							"boolean"));
		p = *e ? e + 1 : e;
	}
	if (json_array_size(params))
		json_object_set_new(op, "parameters", params);
	else
		json_decref(params);
	return op;
}

json_t *api_openapi_build(const struct api_route *tbl, const char *version)
{
	json_t *paths = json_object(), *doc;
	const struct api_route *rt;

	for (rt = tbl; rt->method; rt++) {
		json_t *item = json_object_get(paths, rt->pattern);
		char m[16];
		size_t i;

		if (!item) {
			item = json_object();
			json_object_set_new(paths, rt->pattern, item);
		}
		for (i = 0; rt->method[i] && i < sizeof(m) - 1; i++)
			m[i] = (char)(rt->method[i] | 0x20);
		m[i] = 0;
		json_object_set_new(item, m, operation(rt));
	}
	doc = json_pack("{s:s, s:{s:s, s:s, s:s}, s:o, s:{s:o, s:{s:{s:s, s:s}}}, s:[{s:[]}]}",
			"openapi", "3.0.3", "info", "title", "isergw agent API", "version", version,
			"description", "Provisioning and monitoring of an isergw gateway. "
			"Errors are {\"error\": {\"code\", \"message\", \"field\"}}.",
			"paths", paths, "components", "schemas", schemas(), "securitySchemes",
			"bearer", "type", "http", "scheme", "bearer", "security", "bearer");
	return doc;
}
