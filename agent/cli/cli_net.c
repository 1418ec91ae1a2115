// SPDX-License-Identifier: MIT
/*
 * isergwctl bond and rdma: status tables from /api/v1/bonds and /api/v1/rdma, and a bond's
 * desired settings (stored by the agent and compared with the host; with --dry-run the plan that
 * would make the host match them, with --apply that plan carried out: docs/NETWORK.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define API "/api/v1"

/* GET path as JSON; the exit code, *out set on success. */
static int get_json(struct cli *c, const char *path, json_t **out)
{
	struct cli_resp r;
	int rc = cli_http(c, "GET", path, NULL, &r);

	*out = NULL;
	if (rc)
		return rc;
	if (r.status >= 400) {
		rc = cli_print_error(&r);
	} else {
		*out = r.body ? json_loadb(r.body, r.len, 0, NULL) : NULL;
		if (!*out) {
			fprintf(stderr, "isergwctl: the agent's answer is not JSON\n");
			rc = CLI_EAPI;
		}
	}
	cli_resp_free(&r);
	return rc;
}

/* Names of an array (of strings, or of objects' "name") joined with commas (malloc'ed). */
static char *names(const json_t *arr, const char *key, const char *mark_key, const json_t *obj)
{
	const char *mark = mark_key ? json_string_value(json_object_get(obj, mark_key)) : NULL;
	size_t i, len = 0;
	char *s = NULL;
	json_t *v;
	FILE *f = open_memstream(&s, &len);

	if (!f)
		return NULL;
	json_array_foreach(arr, i, v) {
		const char *n = json_string_value(key ? json_object_get(v, key) : v);

		fprintf(f, "%s%s%s", i ? "," : "", n ? n : "?",
			mark && n && !strcmp(mark, n) ? "*" : "");
	}
	fclose(f);
	return s;
}

static char *drift_text(const json_t *d)
{
	if (json_is_null(d) || !d)
		return strdup("-");
	if (!json_array_size(d))
		return strdup("in sync");
	return names(d, "field", NULL, NULL);
}

static int bond_list(struct cli *c)
{
	static const char *const cols[] = { "BOND", "MODE", "FAIL_OVER_MAC", "ACTIVE",
					    "SLAVES (*active)", "FAILOVERS", "RDMA", "DRIFT" };
	struct cli_table t;
	json_t *j, *b;
	size_t i;
	int rc = get_json(c, API "/bonds", &j);

	if (rc)
		return rc;
	if (c->json) {
		cli_print_json(j);
		json_decref(j);
		return CLI_OK;
	}
	cli_table_init(&t, cols, 8);
	json_array_foreach(json_object_get(j, "bonds"), i, b) {
		bool present = json_is_true(json_object_get(b, "present"));
		char *mode = cli_cell(json_object_get(b, "mode"));
		char *fom = cli_cell(json_object_get(b, "fail_over_mac"));
		char *act = cli_cell(json_object_get(b, "active_slave"));
		char *sl = names(json_object_get(b, "slaves"), "name", "active_slave", b);
		char *fo = cli_cell(json_object_get(b, "failovers"));
		char *rd = names(json_object_get(b, "rdma_devices"), NULL, NULL, NULL);
		char *dr = drift_text(json_object_get(b, "drift"));

		cli_table_add(&t, json_string_value(json_object_get(b, "name")),
			      present ? mode : "(missing)", fom, act, sl, fo, rd, dr);
		free(mode);
		free(fom);
		free(act);
		free(sl);
		free(fo);
		free(rd);
		free(dr);
	}
	cli_table_print(&t);
	cli_table_fini(&t);
	json_decref(j);
	return CLI_OK;
}

static int rdma_list(struct cli *c)
{
	static const char *const cols[] = { "DEVICE", "PORT", "STATE", "PHYS_STATE", "LINK_LAYER",
					    "RATE", "NETDEV" };
	struct cli_table t;
	json_t *j, *d, *p;
	size_t i, k;
	int rc = get_json(c, API "/rdma", &j);

	if (rc)
		return rc;
	if (c->json) {
		cli_print_json(j);
		json_decref(j);
		return CLI_OK;
	}
	cli_table_init(&t, cols, 7);
	json_array_foreach(json_object_get(j, "devices"), i, d) {
		json_array_foreach(json_object_get(d, "ports"), k, p) {
			static const char *const f[] = { "port", "state", "phys_state",
							 "link_layer", "rate", "netdev" };
			char *cell[6];
			size_t n;

			for (n = 0; n < 6; n++)
				cell[n] = cli_cell(json_object_get(p, f[n]));
			cli_table_add(&t, json_string_value(json_object_get(d, "name")), cell[0],
				      cell[1], cell[2], cell[3], cell[4], cell[5]);
			for (n = 0; n < 6; n++)
				free(cell[n]);
		}
	}
	cli_table_print(&t);
	cli_table_fini(&t);
	json_decref(j);
	return CLI_OK;
}

/* The plan's steps and files (a dry run's answer, or an apply's "applied"), one per line. */
static void plan_print(const json_t *plan)
{
	const json_t *st, *f;
	size_t i;

	json_array_foreach(json_object_get(plan, "steps"), i, st) {
		const char *op = json_string_value(json_object_get(st, "op")) ?: "?";
		const char *link = json_string_value(json_object_get(st, "link")) ?: "?";
		json_t *set = json_object_get(st, "set");
		char *extra = NULL;

		if (json_is_object(set))
			extra = json_dumps(set, JSON_COMPACT | JSON_SORT_KEYS);
		else if (json_object_get(st, "master"))
			extra = strdup(json_string_value(json_object_get(st, "master")) ?: "");
		else if (json_object_get(st, "primary"))
			extra = strdup(json_string_value(json_object_get(st, "primary")) ?: "");
		printf("  %-8s %s%s%s\n", op, link, extra ? " " : "", extra ? extra : "");
		free(extra);
	}
	json_array_foreach(json_object_get(plan, "files"), i, f)
		printf("  file     %s\n", json_string_value(json_object_get(f, "path")) ?: "?");
}

/* bond set NAME k=v..: the stored desired settings (if any) with the given keys changed;
 * --dry-run shows the plan (nothing changes, nothing is stored), --apply carries it out. */
static int bond_set(struct cli *c, const char *path, int argc, char **argv)
{
	const char *query = c->dry_run ? "?dry_run=true" :
			    c->apply ? (c->force ? "?apply=true&force=true" : "?apply=true") : "";
	struct cli_resp r;
	json_t *cur = NULL, *desired;
	char *body, *url;
	int i, rc;

	if (argc < 1)
		return CLI_EUSAGE;
	rc = cli_http(c, "GET", path, NULL, &r);
	if (rc)
		return rc;
	if (r.status == 200 && r.body)
		cur = json_loadb(r.body, r.len, 0, NULL);
	else if (r.status != 404)
		rc = cli_print_error(&r);
	cli_resp_free(&r);
	if (rc) {
		json_decref(cur);
		return rc;
	}
	desired = json_object_get(cur, "desired");
	desired = json_is_object(desired) ? json_deep_copy(desired) : json_object();
	json_decref(cur);
	for (i = 0; i < argc; i++)
		if (cli_kv_apply(desired, argv[i])) {
			json_decref(desired);
			return CLI_EUSAGE;
		}
	body = json_dumps(desired, JSON_COMPACT);
	json_decref(desired);
	if (!body || asprintf(&url, "%s%s", path, query) < 0) {
		free(body);
		return CLI_EUSAGE;
	}
	rc = cli_http(c, "PUT", url, body, &r);
	free(url);
	free(body);
	if (rc)
		return rc;
	if (r.status >= 400) {
		rc = cli_print_error(&r);
	} else if (c->json) {
		fwrite(r.body, 1, r.len, stdout);
		putchar('\n');
	} else if (!c->quiet) {
		json_t *j = json_loadb(r.body, r.len, 0, NULL);
		char *d = drift_text(json_object_get(j, "drift"));

		if (c->dry_run) {
			printf("plan (nothing changed):\n");
			if (!json_array_size(json_object_get(j, "steps")))
				printf("  no step: the host already has these settings\n");
			plan_print(j);
		} else {
			if (c->apply) {
				printf("applied:\n");
				plan_print(json_object_get(j, "applied"));
			}
			printf("stored; drift: %s\n", d ? d : "?");
		}
		free(d);
		json_decref(j);
	}
	cli_resp_free(&r);
	return rc;
}

/* The ladder's verbs for bond and rdma (the table in cli_main.c). */
int cli_bond_list(struct cli *c, const char *path, int argc, char **argv)
{
	(void)path;
	(void)argc;
	(void)argv;
	return bond_list(c);
}

int cli_bond_show(struct cli *c, const char *path, int argc, char **argv)
{
	json_t *j;
	int rc;

	(void)argc;
	(void)argv;
	rc = get_json(c, path, &j);
	if (!rc)
		cli_print_json(j);
	json_decref(j);
	return rc;
}

int cli_bond_set(struct cli *c, const char *path, int argc, char **argv)
{
	return bond_set(c, path, argc, argv);
}

/* Every verdict of the gateway's network model (GET /api/v1/bonds "verdicts"): severity, id,
 * object, message and the fix, errors first. */
int cli_bond_check(struct cli *c, const char *path, int argc, char **argv)
{
	static const char *const order[] = { "error", "warning", "info" };
	json_t *j, *vs, *v;
	size_t i, k, n = 0, errors = 0;
	int rc;

	(void)path;
	(void)argc;
	(void)argv;
	rc = get_json(c, API "/bonds", &j);
	if (rc)
		return rc;
	vs = json_object_get(j, "verdicts");
	json_array_foreach(vs, i, v)
		if (!strcmp(json_string_value(json_object_get(v, "severity")) ?: "", "error"))
			errors++;
	if (c->json) {
		cli_print_json(vs ? vs : json_null());
	} else if (!json_is_true(json_object_get(j, "gateway"))) {
		fprintf(stderr, "isergwctl: the agent has no network model from the gateway (is "
			"isergwd running, and the agent given --gateway-socket?)\n");
		rc = CLI_EAPI;
	} else {
		for (k = 0; k < 3; k++)
			json_array_foreach(vs, i, v) {
				const char *sev = json_string_value(json_object_get(v, "severity"));

				if (!sev || strcmp(sev, order[k]))
					continue;
				printf("%-7s %s %s: %s\n        fix: %s\n", sev,
				       json_string_value(json_object_get(v, "id")) ?: "?",
				       json_string_value(json_object_get(v, "object")) ?: "?",
				       json_string_value(json_object_get(v, "message")) ?: "",
				       json_string_value(json_object_get(v, "fix")) ?: "");
				n++;
			}
		if (!c->quiet)
			printf("%zu verdict%s, %zu error%s\n", n, n == 1 ? "" : "s", errors,
			       errors == 1 ? "" : "s");
	}
	json_decref(j);
	if (!rc && errors)
		rc = CLI_EVERDICT;
	return rc;
}

int cli_rdma_list(struct cli *c, const char *path, int argc, char **argv)
{
	(void)path;
	(void)argc;
	(void)argv;
	return rdma_list(c);
}
