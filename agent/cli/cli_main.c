// SPDX-License-Identifier: MIT
/*
 * isergwctl commands. Each maps to one API call (set = GET, merge, PUT with If-Match, so two
 * administrators never overwrite each other silently).
 */
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define API "/api/v1"

static void usage(FILE *f)
{
	fprintf(f,
"usage: isergwctl [options] COMMAND [ARGS]\n"
"options:\n"
"  --url URL          agent address (default $ISERGW_URL or http://127.0.0.1:8080)\n"
"  --token-file FILE  bearer token file (default: $ISERGW_TOKEN, else STATE/admin.token)\n"
"  --state-dir DIR    the agent's state folder, for its admin.token\n"
"                     (default $ISERGW_STATE_DIR or /var/lib/isergw/agent)\n"
"  --json             print the API's JSON instead of tables\n"
"  --if-match GEN     only change if the configuration is still at generation GEN\n"
"  --cacert FILE | --insecure   HTTPS verification\n"
"commands:\n"
"  health | version | metrics | events | openapi\n"
"  target list | show IQN | create IQN [k=v..] | set IQN k=v.. | delete IQN\n"
"  lun list IQN | show IQN LUN | create IQN [LUN] k=v.. | set IQN LUN k=v.. | delete IQN LUN\n"
"      | paths IQN LUN (back-end paths and their live state)\n"
"  acl list IQN | show IQN INITIATOR | add IQN INITIATOR [k=v..] | set IQN INITIATOR k=v..\n"
"      | delete IQN INITIATOR\n"
"  portal list | show NAME | create NAME [k=v..] | set NAME k=v.. | delete NAME\n"
"  discovery show | set k=v..\n"
"  session list | drop TSIH\n"
"  bond list | show NAME | set NAME k=v.. | forget NAME      rdma list\n"
"  cluster show (members, port groups and LU owners; agents with --store etcd)\n"
"  config export [FILE] | import FILE [--dry-run] | validate FILE\n"
"  raw METHOD PATH [JSON | @FILE]\n"
"k=v: dotted keys nest (backstore.size=1G); true/false/integers/[a,b] are typed;\n"
"     key:=JSON sets raw JSON (serial:='\"0042\"').\n"
"exit: 0 ok, 1 API error, 2 usage, 3 agent or gateway unreachable\n");
}

static char *read_file(const char *path)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "r") : stdin;
	char *buf = NULL;
	size_t len = 0, cap = 0, n;

	if (!f) {
		fprintf(stderr, "isergwctl: %s: %s\n", path, strerror(errno));
		return NULL;
	}
	for (;;) {
		if (len + 4096 + 1 > cap) {
			char *b = realloc(buf, cap = cap ? cap * 2 : 8192);

			if (!b) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = b;
		}
		n = fread(buf + len, 1, cap - len - 1, f);
		len += n;
		if (n == 0)
			break;
	}
	if (buf)
		buf[len] = 0;
	if (f != stdin)
		fclose(f);
	return buf;
}

static char *load_token(const char *file)
{
	char *t, *e;

	t = read_file(file);
	if (!t)
		return NULL;
	e = t + strlen(t);
	while (e > t && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' '))
		*--e = 0;
	return t;
}

/* A call whose answer is JSON: returns the exit code; *out gets the parsed body on 2xx. */
static int call(struct cli *c, const char *method, const char *path, const char *body,
		json_t **out, struct cli_resp *keep)
{
	struct cli_resp r;
	int rc = cli_http(c, method, path, body, &r);

	if (out)
		*out = NULL;
	if (rc)
		return rc;
	if (r.status >= 400) {
		rc = cli_print_error(&r);
		cli_resp_free(&r);
		return rc;
	}
	if (out && r.body && r.len)
		*out = json_loads(r.body, 0, NULL);
	if (keep) {
		*keep = r;
		return CLI_OK;
	}
	cli_resp_free(&r);
	return CLI_OK;
}

/* The generation from an ETag ("\"12\"" -> "12"). */
static const char *gen_of(struct cli_resp *r)
{
	char *e = r->etag;
	size_t n;

	if (*e == '"')
		memmove(e, e + 1, strlen(e));
	n = strlen(e);
	if (n && e[n - 1] == '"')
		e[n - 1] = 0;
	return *e ? e : "?";
}

static int show(struct cli *c, const char *path)
{
	json_t *j;
	int rc = call(c, "GET", path, NULL, &j, NULL);

	if (!rc)
		cli_print_json(j);
	json_decref(j);
	return rc;
}

static char *dump(json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT);

	json_decref(j);
	return s;
}

/* POST/PUT a body built from k=v arguments on top of base (stolen). */
static int send_obj(struct cli *c, const char *method, const char *path, json_t *base,
		    int argc, char **argv)
{
	struct cli_resp keep;
	json_t *res;
	char *body;
	int i, rc;

	for (i = 0; i < argc; i++)
		if (cli_kv_apply(base, argv[i])) {
			json_decref(base);
			return CLI_EUSAGE;
		}
	body = dump(base);
	rc = call(c, method, path, body, &res, &keep);
	free(body);
	if (rc)
		return rc;
	if (c->json && res)
		cli_print_json(res);
	else if (!c->quiet)
		printf("ok (generation %s, gateway %s)\n", gen_of(&keep),
		       keep.gateway[0] ? keep.gateway : "?");
	json_decref(res);
	cli_resp_free(&keep);
	return CLI_OK;
}

/* GET, apply k=v, PUT with If-Match: the resource's other settings are kept. */
static int set_obj(struct cli *c, const char *path, int argc, char **argv)
{
	struct cli_resp keep;
	json_t *cur;
	int rc;
	char etag[64];
	const char *saved = c->if_match;

	if (argc < 1)
		return CLI_EUSAGE;
	rc = call(c, "GET", path, NULL, &cur, &keep);
	if (rc)
		return rc;
	snprintf(etag, sizeof(etag), "%s", keep.etag);
	cli_resp_free(&keep);
	if (!c->if_match && etag[0])
		c->if_match = etag;
	rc = send_obj(c, "PUT", path, cur ? cur : json_object(), argc, argv);
	c->if_match = saved;
	return rc;
}

static int del(struct cli *c, const char *path)
{
	int rc = call(c, "DELETE", path, NULL, NULL, NULL);

	if (!rc && !c->quiet && !c->json)
		printf("deleted\n");
	return rc;
}

/* ---- lists --------------------------------------------------------------------------- */

static int list(struct cli *c, const char *path, const char *key, const char *const *cols,
		const char *const *fields, size_t n)
{
	struct cli_table t;
	json_t *j, *e;
	size_t i, k;
	int rc = call(c, "GET", path, NULL, &j, NULL);

	if (rc)
		return rc;
	if (c->json) {
		cli_print_json(j);
		json_decref(j);
		return CLI_OK;
	}
	cli_table_init(&t, cols, n);
	json_array_foreach(json_object_get(j, key), i, e) {
		char *cell[8] = { 0 };

		for (k = 0; k < n && k < 8; k++) {
			/* "a.b" reaches into a nested object. */
			const char *dot = strchr(fields[k], '.');
			json_t *v;

			if (dot) {
				char head[32];

				snprintf(head, sizeof(head), "%.*s", (int)(dot - fields[k]),
					 fields[k]);
				v = json_object_get(json_object_get(e, head), dot + 1);
			} else {
				v = json_object_get(e, fields[k]);
			}
			cell[k] = v ? cli_cell(v) : NULL;
		}
		cli_table_add(&t, cell[0], cell[1], cell[2], cell[3], cell[4], cell[5], cell[6],
			      cell[7]);
		for (k = 0; k < 8; k++)
			free(cell[k]);
	}
	cli_table_print(&t);
	cli_table_fini(&t);
	json_decref(j);
	return CLI_OK;
}

/* pre + escaped a + mid + escaped b (b may be NULL). */
static char *pathf(const char *pre, const char *a, const char *mid, const char *b)
{
	char *ea = cli_escape(a), *eb = b ? cli_escape(b) : NULL, *s = NULL;

	if (asprintf(&s, "%s%s%s%s", pre, ea ? ea : "", mid, eb ? eb : "") < 0)
		s = NULL;
	free(ea);
	free(eb);
	return s;
}

static int cmd_target(struct cli *c, int argc, char **argv)
{
	static const char *const cols[] = { "NAME", "ALIAS", "PORTALS", "LUNS", "ACLS",
					    "ANY-INITIATOR", "CHAP" };
	static const char *const f[] = { "name", "alias", "portals", "luns", "initiators",
					 "allow_any_initiator", "chap" };
	char *path = NULL;
	int rc = CLI_EUSAGE;

	if (argc < 1)
		return CLI_EUSAGE;
	if (!strcmp(argv[0], "list"))
		return list(c, API "/targets", "targets", cols, f, 7);
	if (argc < 2)
		return CLI_EUSAGE;
	path = pathf(API "/targets/", argv[1], "", NULL);
	if (!strcmp(argv[0], "show"))
		rc = show(c, path);
	else if (!strcmp(argv[0], "create"))
		rc = send_obj(c, "POST", API "/targets", json_pack("{s:s}", "name", argv[1]),
			      argc - 2, argv + 2);
	else if (!strcmp(argv[0], "set"))
		rc = set_obj(c, path, argc - 2, argv + 2);
	else if (!strcmp(argv[0], "delete"))
		rc = del(c, path);
	free(path);
	return rc;
}

/* lun paths IQN LUN: the LUN's back-end paths from its live status (remote paths, or the
 * paths of a dm-multipath map under a block backstore). */
static int lun_paths(struct cli *c, const char *path)
{
	static const char *const cols[] = { "PATH", "STATE", "GROUP", "PRIO", "ALUA", "IN-USE",
					    "ERRORS", "FAILOVERS", "LAST-ERROR" };
	static const char *const f[] = { "url", "state", "group", "priority", "alua_state",
					 "in_use", "errors", "failovers", "last_error" };
	struct cli_table t;
	json_t *j, *st, *p;
	size_t i, k;
	int rc = call(c, "GET", path, NULL, &j, NULL);

	if (rc)
		return rc;
	st = json_object_get(j, "status");
	if (c->json) {
		cli_print_json(st ? st : json_null());
		json_decref(j);
		return CLI_OK;
	}
	if (!st) {
		fprintf(stderr, "isergwctl: no live status for this LUN (gateway away, or the "
			"backstore has none)\n");
		json_decref(j);
		return CLI_EAPI;
	}
	printf("state: %s", json_string_value(json_object_get(st, "state")) ?: "-");
	if (json_string_value(json_object_get(st, "map")))
		printf("  map: %s", json_string_value(json_object_get(st, "map")));
	if (json_is_integer(json_object_get(st, "failovers")))
		printf("  failovers: %lld",
		       (long long)json_integer_value(json_object_get(st, "failovers")));
	if (json_string_value(json_object_get(st, "warning")))
		printf("\nwarning: %s", json_string_value(json_object_get(st, "warning")));
	printf("\n");
	cli_table_init(&t, cols, 9);
	json_array_foreach(json_object_get(st, "paths"), i, p) {
		char *cell[9] = { 0 };

		for (k = 0; k < 9; k++) {
			json_t *v = json_object_get(p, f[k]);

			/* dm-multipath paths: device, dm state, checker state. */
			if (!v && k == 0)
				v = json_object_get(p, "dev");
			if (!v && k == 4)
				v = json_object_get(p, "dm_st");
			if (!v && k == 8)
				v = json_object_get(p, "chk_st");
			cell[k] = v && !json_is_null(v) ? cli_cell(v) : NULL;
		}
		cli_table_add(&t, cell[0], cell[1], cell[2], cell[3], cell[4], cell[5], cell[6],
			      cell[7], cell[8]);
		for (k = 0; k < 9; k++)
			free(cell[k]);
	}
	cli_table_print(&t);
	cli_table_fini(&t);
	json_decref(j);
	return CLI_OK;
}

static int cmd_lun(struct cli *c, int argc, char **argv)
{
	static const char *const cols[] = { "LUN", "TYPE", "SIZE", "PATH", "BLOCK", "PRODUCT" };
	static const char *const f[] = { "lun", "backstore.type", "backstore.size",
					 "backstore.path", "backstore.block_size", "product" };
	char *path = NULL;
	int rc = CLI_EUSAGE;

	if (argc < 2)
		return CLI_EUSAGE;
	if (!strcmp(argv[0], "list")) {
		path = pathf(API "/targets/", argv[1], "/luns", NULL);
		rc = list(c, path, "luns", cols, f, 6);
	} else if (!strcmp(argv[0], "create")) {
		json_t *o = json_object();
		int skip = 2;

		path = pathf(API "/targets/", argv[1], "/luns", NULL);
		if (argc > 2 && !strchr(argv[2], '=')) {
			json_object_set_new(o, "lun", json_integer(strtoll(argv[2], NULL, 10)));
			skip = 3;
		}
		rc = send_obj(c, "POST", path, o, argc - skip, argv + skip);
	} else if (argc >= 3) {
		path = pathf(API "/targets/", argv[1], "/luns/", argv[2]);
		if (!strcmp(argv[0], "show"))
			rc = show(c, path);
		else if (!strcmp(argv[0], "paths"))
			rc = lun_paths(c, path);
		else if (!strcmp(argv[0], "set"))
			rc = set_obj(c, path, argc - 3, argv + 3);
		else if (!strcmp(argv[0], "delete"))
			rc = del(c, path);
	}
	free(path);
	return rc;
}

static int cmd_acl(struct cli *c, int argc, char **argv)
{
	static const char *const cols[] = { "INITIATOR", "CHAP-USER", "MUTUAL-USER" };
	static const char *const f[] = { "name", "chap.user", "chap.mutual_user" };
	char *path = NULL;
	int rc = CLI_EUSAGE;

	if (argc < 2)
		return CLI_EUSAGE;
	if (!strcmp(argv[0], "list")) {
		path = pathf(API "/targets/", argv[1], "/acls", NULL);
		rc = list(c, path, "acls", cols, f, 3);
	} else if (argc >= 3 && !strcmp(argv[0], "add")) {
		path = pathf(API "/targets/", argv[1], "/acls", NULL);
		rc = send_obj(c, "POST", path, json_pack("{s:s}", "name", argv[2]), argc - 3,
			      argv + 3);
	} else if (argc >= 3) {
		path = pathf(API "/targets/", argv[1], "/acls/", argv[2]);
		if (!strcmp(argv[0], "show"))
			rc = show(c, path);
		else if (!strcmp(argv[0], "set"))
			rc = set_obj(c, path, argc - 3, argv + 3);
		else if (!strcmp(argv[0], "delete"))
			rc = del(c, path);
	}
	free(path);
	return rc;
}

static int cmd_portal(struct cli *c, int argc, char **argv)
{
	static const char *const cols[] = { "NAME", "TRANSPORT", "ADDRESS", "PORT" };
	static const char *const f[] = { "name", "transport", "address", "port" };
	char *path = NULL;
	int rc = CLI_EUSAGE;

	if (argc < 1)
		return CLI_EUSAGE;
	if (!strcmp(argv[0], "list"))
		return list(c, API "/portals", "portals", cols, f, 4);
	if (argc < 2)
		return CLI_EUSAGE;
	path = pathf(API "/portals/", argv[1], "", NULL);
	if (!strcmp(argv[0], "show"))
		rc = show(c, path);
	else if (!strcmp(argv[0], "create"))
		rc = send_obj(c, "POST", API "/portals", json_pack("{s:s}", "name", argv[1]),
			      argc - 2, argv + 2);
	else if (!strcmp(argv[0], "set"))
		rc = set_obj(c, path, argc - 2, argv + 2);
	else if (!strcmp(argv[0], "delete"))
		rc = del(c, path);
	free(path);
	return rc;
}

static int cmd_session(struct cli *c, int argc, char **argv)
{
	static const char *const cols[] = { "TSIH", "TARGET", "INITIATOR", "TRANSPORT", "PEER" };
	static const char *const f[] = { "tsih", "target", "initiator", "transport", "peer" };
	char *path;
	int rc;

	if (argc >= 1 && !strcmp(argv[0], "list"))
		return list(c, API "/sessions", "sessions", cols, f, 5);
	if (argc < 2 || strcmp(argv[0], "drop"))
		return CLI_EUSAGE;
	path = pathf(API "/sessions/", argv[1], "", NULL);
	rc = call(c, "DELETE", path, NULL, NULL, NULL);
	if (!rc && !c->quiet && !c->json)
		printf("session %s dropped\n", argv[1]);
	free(path);
	return rc;
}

static int cmd_config(struct cli *c, int argc, char **argv, bool dry)
{
	struct cli_resp keep;
	char *body;
	json_t *j;
	int rc;

	if (argc < 1)
		return CLI_EUSAGE;
	if (!strcmp(argv[0], "export")) {
		rc = call(c, "GET", API "/config", NULL, &j, NULL);
		if (rc)
			return rc;
		if (argc >= 2 && strcmp(argv[1], "-")) {
			rc = json_dump_file(j, argv[1], JSON_INDENT(2) | JSON_PRESERVE_ORDER) ?
				CLI_EAPI : CLI_OK;
			if (rc)
				fprintf(stderr, "isergwctl: cannot write %s\n", argv[1]);
		} else {
			cli_print_json(j);
		}
		json_decref(j);
		return rc;
	}
	if (argc < 2 || (strcmp(argv[0], "import") && strcmp(argv[0], "validate")))
		return CLI_EUSAGE;
	body = read_file(argv[1]);
	if (!body)
		return CLI_EUSAGE;
	if (!strcmp(argv[0], "validate") || dry)
		rc = call(c, "POST", API "/config/validate", body, &j, NULL);
	else
		rc = call(c, "PUT", API "/config", body, &j, &keep);
	free(body);
	if (rc)
		return rc;
	if (c->json)
		cli_print_json(j);
	else if (!strcmp(argv[0], "validate") || dry)
		printf("valid\n");
	else {
		printf("imported (generation %s, gateway %s)\n", gen_of(&keep), keep.gateway);
		cli_resp_free(&keep);
	}
	json_decref(j);
	return CLI_OK;
}

static int cmd_raw(struct cli *c, int argc, char **argv)
{
	struct cli_resp r;
	char *body = NULL;
	int rc;

	if (argc < 2)
		return CLI_EUSAGE;
	if (argc >= 3)
		body = argv[2][0] == '@' ? read_file(argv[2] + 1) : strdup(argv[2]);
	rc = cli_http(c, argv[0], argv[1], body, &r);
	free(body);
	if (rc)
		return rc;
	if (r.body)
		fwrite(r.body, 1, r.len, stdout);
	rc = r.status >= 400 ? (r.status == 503 ? CLI_EUNREACH : CLI_EAPI) : CLI_OK;
	cli_resp_free(&r);
	return rc;
}

static int cmd_health(struct cli *c)
{
	json_t *j, *g;
	int rc = call(c, "GET", API "/health", NULL, &j, NULL);

	if (rc)
		return rc;
	if (c->json) {
		cli_print_json(j);
	} else {
		g = json_object_get(j, "gateway");
		printf("status: %s\nversion: %s\ngeneration: %lld\ngateway: %s%s%s\n",
		       json_string_value(json_object_get(j, "status")),
		       json_string_value(json_object_get(j, "version")),
		       (long long)json_integer_value(json_object_get(j, "generation")),
		       json_is_true(json_object_get(g, "connected")) ? "connected" : "unreachable",
		       json_is_true(json_object_get(g, "in_sync")) ? ", in sync" : "",
		       json_string_value(json_object_get(g, "error")) ? ", apply error" : "");
	}
	json_decref(j);
	return CLI_OK;
}

static int run(struct cli *c, int argc, char **argv, bool dry)
{
	const char *cmd = argv[0];
	struct cli_resp r;
	int rc;

	argc--;
	argv++;
	if (!strcmp(cmd, "health"))
		return cmd_health(c);
	if (!strcmp(cmd, "version") || !strcmp(cmd, "openapi"))
		return show(c, !strcmp(cmd, "version") ? API "/version" : API "/openapi.json");
	if (!strcmp(cmd, "metrics")) {
		rc = cli_http(c, "GET", "/metrics", NULL, &r);
		if (rc)
			return rc;
		if (r.status >= 400)
			rc = cli_print_error(&r);
		else
			fwrite(r.body, 1, r.len, stdout);
		cli_resp_free(&r);
		return rc;
	}
	if (!strcmp(cmd, "events"))
		return cli_http_stream(c, API "/events");
	if (!strcmp(cmd, "target"))
		return cmd_target(c, argc, argv);
	if (!strcmp(cmd, "lun"))
		return cmd_lun(c, argc, argv);
	if (!strcmp(cmd, "acl"))
		return cmd_acl(c, argc, argv);
	if (!strcmp(cmd, "portal"))
		return cmd_portal(c, argc, argv);
	if (!strcmp(cmd, "discovery")) {
		if (argc >= 1 && !strcmp(argv[0], "show"))
			return show(c, API "/discovery");
		if (argc >= 2 && !strcmp(argv[0], "set"))
			return set_obj(c, API "/discovery", argc - 1, argv + 1);
		return CLI_EUSAGE;
	}
	if (!strcmp(cmd, "session"))
		return cmd_session(c, argc, argv);
	if (!strcmp(cmd, "bond"))
		return cli_cmd_bond(c, argc, argv);
	if (!strcmp(cmd, "rdma"))
		return cli_cmd_rdma(c, argc, argv);
	if (!strcmp(cmd, "cluster")) {
		if (argc >= 1 && !strcmp(argv[0], "show"))
			return show(c, API "/cluster");
		return CLI_EUSAGE;
	}
	if (!strcmp(cmd, "config"))
		return cmd_config(c, argc, argv, dry);
	if (!strcmp(cmd, "raw"))
		return cmd_raw(c, argc, argv);
	return CLI_EUSAGE;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "url", required_argument, NULL, 'u' },
		{ "token-file", required_argument, NULL, 't' },
		{ "state-dir", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "if-match", required_argument, NULL, 'm' },
		{ "cacert", required_argument, NULL, 'c' },
		{ "insecure", no_argument, NULL, 'k' },
		{ "dry-run", no_argument, NULL, 'n' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct cli c = { .timeout_s = 60 };
	const char *token_file = NULL, *state = getenv("ISERGW_STATE_DIR");
	char *tf = NULL;
	bool dry = false;
	int o, rc;

	c.url = getenv("ISERGW_URL") ? getenv("ISERGW_URL") : "http://127.0.0.1:8080";
	/* Options may follow the command too ("config import f.json --dry-run"). */
	while ((o = getopt_long(argc, argv, "u:t:s:jqm:c:knT:h", opts, NULL)) != -1) {
		switch (o) {
		case 'u': c.url = optarg; break;
		case 't': token_file = optarg; break;
		case 's': state = optarg; break;
		case 'j': c.json = true; break;
		case 'q': c.quiet = true; break;
		case 'm': c.if_match = optarg; break;
		case 'c': c.cacert = optarg; break;
		case 'k': c.insecure = true; break;
		case 'n': dry = true; break;
		case 'T': c.timeout_s = strtol(optarg, NULL, 10); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return CLI_EUSAGE;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return CLI_EUSAGE;
	}
	if (token_file) {
		c.token = load_token(token_file);
		if (!c.token)
			return CLI_EUSAGE;
	} else if (getenv("ISERGW_TOKEN") && *getenv("ISERGW_TOKEN")) {
		c.token = strdup(getenv("ISERGW_TOKEN"));
	} else {
		if (asprintf(&tf, "%s/admin.token", state ? state : "/var/lib/isergw/agent") >= 0) {
			FILE *f = fopen(tf, "r");

			/* Quietly optional: health needs no token. */
			if (f) {
				fclose(f);
				c.token = load_token(tf);
			}
		}
		free(tf);
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	rc = run(&c, argc - optind, argv + optind, dry);
	if (rc == CLI_EUSAGE)
		usage(stderr);
	curl_global_cleanup();
	free(c.token);
	return rc;
}
