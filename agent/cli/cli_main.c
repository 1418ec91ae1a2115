// SPDX-License-Identifier: MIT
/*
 * isergwctl commands. Each maps to one API call (set = GET, merge, PUT with If-Match, so two
 * administrators never overwrite each other silently).
 */
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
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
"      | resize IQN LUN [SIZE] [--force] (in service; no SIZE: measure the device again)\n"
"  acl list IQN | show IQN INITIATOR | add IQN INITIATOR [k=v..] | set IQN INITIATOR k=v..\n"
"      | delete IQN INITIATOR\n"
"  portal list | show NAME | create NAME [k=v..] | set NAME k=v.. | delete NAME\n"
"  discovery show | set k=v..\n"
"  session list | drop TSIH\n"
"  bond list | show NAME | set NAME k=v.. [--dry-run | --apply [--force]] | forget NAME\n"
"      | check   rdma list\n"
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

/* lun paths IQN LUN: the LUN's back-end paths from its live status (remote paths, or the
 * paths of a dm-multipath map under a block backstore); a local LUN says it has none. */
static int lun_paths(struct cli *c, const char *path, int argc, char **argv)
{
	/* ADDRESS: where the path's login went (its name resolved, or where it was redirected). */
	static const char *const cols[] = { "PATH", "ADDRESS", "STATE", "GROUP", "PRIO", "ALUA",
					    "IN-USE", "ERRORS", "FAILOVERS", "LAST-ERROR" };
	static const char *const f[] = { "url", "address", "state", "group", "priority",
					 "alua_state", "in_use", "errors", "failovers", "last_error" };
	struct cli_table t;
	json_t *j, *st, *p;
	size_t i, k;
	int rc;

	(void)argc;
	(void)argv;
	rc = call(c, "GET", path, NULL, &j, NULL);
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
	if (!json_is_array(json_object_get(st, "paths"))) {
		/* Every LUN has a status now (its atomics): one without paths is served from
		 * this host (file, block, ram, null), and an empty table would say nothing. */
		const char *type = json_string_value(json_object_get(json_object_get(j,
			"backstore"), "type"));
		const char *eng = json_string_value(json_object_get(st, "io_engine"));

		printf("no back-end paths: a local LUN (%s backstore%s%s), served from this "
		       "gateway's host\n", type ? type : "local", eng ? ", io_engine " : "",
		       eng ? eng : "");
		json_decref(j);
		return CLI_OK;
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
	cli_table_init(&t, cols, 10);
	json_array_foreach(json_object_get(st, "paths"), i, p) {
		char *cell[10] = { 0 };

		for (k = 0; k < 10; k++) {
			json_t *v = json_object_get(p, f[k]);

			/* dm-multipath paths: device, dm state, checker state. */
			if (!v && k == 0)
				v = json_object_get(p, "dev");
			if (!v && k == 5)
				v = json_object_get(p, "dm_st");
			if (!v && k == 9)
				v = json_object_get(p, "chk_st");
			cell[k] = v && !json_is_null(v) ? cli_cell(v) : NULL;
		}
		cli_table_add(&t, cell[0], cell[1], cell[2], cell[3], cell[4], cell[5], cell[6],
			      cell[7], cell[8], cell[9]);
		for (k = 0; k < 10; k++)
			free(cell[k]);
	}
	cli_table_print(&t);
	cli_table_fini(&t);
	json_decref(j);
	return CLI_OK;
}

/* lun resize IQN LUN [SIZE] [--force]: in service (sessions and reservations stay); without
 * SIZE a block device or file grown from outside is measured again. */
static int lun_resize(struct cli *c, const char *path, int argc, char **argv)
{
	json_t *o = json_object(), *j;
	char *p = NULL, *body;
	char *end;
	long long n;
	int rc;

	if (argc > 1 || !o) {
		json_decref(o);
		return CLI_EUSAGE;
	}
	if (argc == 1) {
		/* A plain number is bytes; anything else ("2G") goes as a string to be judged by
		 * the agent, as the configuration's sizes are. */
		errno = 0;
		n = strtoll(argv[0], &end, 10);
		json_object_set_new(o, "size", !errno && !*end && end != argv[0] ?
				    json_integer(n) : json_string(argv[0]));
	}
	if (c->force)
		json_object_set_new(o, "force", json_true());
	body = dump(o);		/* takes o */
	if (!body || asprintf(&p, "%s/resize", path) < 0) {
		free(body);
		return CLI_EUSAGE;
	}
	rc = call(c, "POST", p, body, &j, NULL);
	free(p);
	free(body);
	if (rc)
		return rc;
	if (c->json)
		cli_print_json(j);
	else if (!c->quiet) {
		/* The LUN as stored, or for a measurement {"size": bytes}. */
		json_t *sz = json_object_get(j, "size");
		char *cell;

		if (!sz)
			sz = json_object_get(json_object_get(j, "backstore"), "size");
		cell = sz ? cli_cell(sz) : NULL;
		if (json_is_true(json_object_get(j, "pending")))
			printf("the back end's capacity is being read again (now %s bytes); its hosts "
			       "are told if it changed\n", cell ? cell : "?");
		else
			printf("resized in service: %s%s\n", cell ? cell : "?",
			       json_is_integer(sz) ? " bytes" : "");
		free(cell);
	}
	json_decref(j);
	return CLI_OK;
}

/* ---- the resources: one table drives list / show / create / set / delete ---------------- */

enum cli_verb_kind {
	CLI_V_LIST,			/* GET the collection, a table of cols/fields */
	CLI_V_CREATE,			/* POST the collection: {id_key: ID} + k=v */
	CLI_V_SHOW,			/* GET the object, its JSON */
	CLI_V_SET,			/* GET, merge k=v, PUT with If-Match */
	CLI_V_DELETE,			/* DELETE the object */
};

typedef int (*cli_verb_fn)(struct cli *c, const char *path, int argc, char **argv);

struct cli_verb {
	const char *name;		/* the word on the command line */
	enum cli_verb_kind kind;	/* what it does, and whether it names an object */
	cli_verb_fn fn;			/* instead of the kind's own action, NULL: none */
	const char *done, *done_tail;	/* DELETE: "<done><ID><done_tail>", NULL: "deleted" */
};

struct cli_res {
	const char *name;		/* "lun" */
	const char *coll;		/* "/targets/{}/luns": each {} is a parent argument */
	unsigned int parents;		/* arguments naming the parent, before the ID */
	bool single;			/* the collection path is the object (discovery) */
	const char *key;		/* LIST: the array in the answer */
	const char *id_key;		/* CREATE: the ID goes into the body under this key */
	bool id_opt_int;		/* CREATE: the ID is optional and a number (a LUN) */
	const char *const *cols, *const *fields;
	size_t ncols;
	struct cli_verb verbs[7];	/* ends with .name = NULL */
};

static const char *const target_cols[] = { "NAME", "ALIAS", "PORTALS", "LUNS", "ACLS",
					   "ANY-INITIATOR", "CHAP" };
static const char *const target_f[] = { "name", "alias", "portals", "luns", "initiators",
					"allow_any_initiator", "chap" };
static const char *const lun_cols[] = { "LUN", "TYPE", "SIZE", "PATH", "BLOCK", "PRODUCT" };
static const char *const lun_f[] = { "lun", "backstore.type", "backstore.size",
				     "backstore.path", "backstore.block_size", "product" };
static const char *const acl_cols[] = { "INITIATOR", "CHAP-USER", "MUTUAL-USER" };
static const char *const acl_f[] = { "name", "chap.user", "chap.mutual_user" };
static const char *const portal_cols[] = { "NAME", "TRANSPORT", "ADDRESS", "PORT" };
static const char *const portal_f[] = { "name", "transport", "address", "port" };
static const char *const session_cols[] = { "TSIH", "TARGET", "INITIATOR", "TRANSPORT",
					    "PEER" };
static const char *const session_f[] = { "tsih", "target", "initiator", "transport", "peer" };

#define CLI_CRUD(create)                                                                    \
	{ "list", CLI_V_LIST, NULL, NULL, NULL }, { create, CLI_V_CREATE, NULL, NULL, NULL }, \
	{ "show", CLI_V_SHOW, NULL, NULL, NULL }, { "set", CLI_V_SET, NULL, NULL, NULL },     \
	{ "delete", CLI_V_DELETE, NULL, NULL, NULL }

static const struct cli_res cli_res[] = {
	{ "target", "/targets", 0, false, "targets", "name", false, target_cols, target_f, 7,
	  { CLI_CRUD("create") } },
	{ "lun", "/targets/{}/luns", 1, false, "luns", "lun", true, lun_cols, lun_f, 6,
	  { CLI_CRUD("create"), { "paths", CLI_V_SHOW, lun_paths, NULL, NULL },
	    { "resize", CLI_V_SHOW, lun_resize, NULL, NULL } } },
	{ "acl", "/targets/{}/acls", 1, false, "acls", "name", false, acl_cols, acl_f, 3,
	  { CLI_CRUD("add") } },
	{ "portal", "/portals", 0, false, "portals", "name", false, portal_cols, portal_f, 4,
	  { CLI_CRUD("create") } },
	{ "discovery", "/discovery", 0, true, NULL, NULL, false, NULL, NULL, 0,
	  { { "show", CLI_V_SHOW, NULL, NULL, NULL }, { "set", CLI_V_SET, NULL, NULL, NULL } } },
	{ "session", "/sessions", 0, false, "sessions", NULL, false, session_cols, session_f, 5,
	  { { "list", CLI_V_LIST, NULL, NULL, NULL },
	    { "drop", CLI_V_DELETE, NULL, "session ", " dropped" } } },
	{ "bond", "/bonds", 0, false, NULL, NULL, false, NULL, NULL, 0,
	  { { "list", CLI_V_LIST, cli_bond_list, NULL, NULL },
	    { "show", CLI_V_SHOW, cli_bond_show, NULL, NULL },
	    { "set", CLI_V_SET, cli_bond_set, NULL, NULL },
	    { "forget", CLI_V_DELETE, NULL, "desired settings of ", " forgotten" },
	    { "check", CLI_V_LIST, cli_bond_check, NULL, NULL } } },
	{ "rdma", "/rdma", 0, false, NULL, NULL, false, NULL, NULL, 0,
	  { { "list", CLI_V_LIST, cli_rdma_list, NULL, NULL } } },
	{ "cluster", "/cluster", 0, true, NULL, NULL, false, NULL, NULL, 0,
	  { { "show", CLI_V_SHOW, NULL, NULL, NULL } } },
};

/* API + coll with each {} replaced by the next escaped parent, then "/" + escaped id. */
static char *res_path(const char *coll, char **parents, const char *id)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	const char *p;
	char *e;

	if (!f)
		return NULL;
	fputs(API, f);
	for (p = coll; *p; p++) {
		if (p[0] == '{' && p[1] == '}') {
			e = cli_escape(*parents++);
			fputs(e ? e : "", f);
			free(e);
			p++;
		} else {
			fputc(*p, f);
		}
	}
	if (id) {
		e = cli_escape(id);
		fprintf(f, "/%s", e ? e : "");
		free(e);
	}
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* RES VERB [PARENT..] [ID] [k=v..] */
static int res_run(struct cli *c, const struct cli_res *res, int argc, char **argv)
{
	const struct cli_verb *v;
	unsigned int need = 1 + res->parents;	/* the verb and the parents */
	bool item;
	const char *id = NULL;
	char *path;
	int rest, rc = CLI_EUSAGE;
	json_t *o;

	if (argc < 1)
		return CLI_EUSAGE;
	for (v = res->verbs; v->name && strcmp(v->name, argv[0]); v++)
		;
	if (!v->name)
		return CLI_EUSAGE;
	item = !res->single && v->kind != CLI_V_LIST && v->kind != CLI_V_CREATE;
	/* A create names its new object too, unless its ID is optional (a LUN number). */
	if (item || (v->kind == CLI_V_CREATE && !res->id_opt_int))
		need++;
	if ((unsigned int)argc < need)
		return CLI_EUSAGE;
	if (item || v->kind == CLI_V_CREATE)
		id = (unsigned int)argc > 1 + res->parents ? argv[1 + res->parents] : NULL;
	if (res->id_opt_int && v->kind == CLI_V_CREATE && id && strchr(id, '='))
		id = NULL;
	rest = argc - (int)(1 + res->parents) - (id ? 1 : 0);
	path = res_path(res->coll, argv + 1, item ? id : NULL);
	if (!path)
		return CLI_EUSAGE;
	argv += argc - rest;
	if (v->fn) {
		rc = v->fn(c, path, rest, argv);
	} else {
		switch (v->kind) {
		case CLI_V_LIST:
			rc = list(c, path, res->key, res->cols, res->fields, res->ncols);
			break;
		case CLI_V_CREATE:
			o = json_object();
			if (res->id_opt_int && id)
				json_object_set_new(o, res->id_key,
						    json_integer(strtoll(id, NULL, 10)));
			else if (id)
				json_object_set_new(o, res->id_key, json_string(id));
			rc = send_obj(c, "POST", path, o, rest, argv);
			break;
		case CLI_V_SHOW:
			rc = show(c, path);
			break;
		case CLI_V_SET:
			rc = set_obj(c, path, rest, argv);
			break;
		case CLI_V_DELETE:
			rc = call(c, "DELETE", path, NULL, NULL, NULL);
			if (!rc && !c->quiet && !c->json) {
				if (v->done)
					printf("%s%s%s\n", v->done, id, v->done_tail);
				else
					printf("deleted\n");
			}
			break;
		}
	}
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
	size_t i;
	int rc;

	argc--;
	argv++;
	if (c->apply && (strcmp(cmd, "bond") || argc < 1 || strcmp(argv[0], "set"))) {
		fprintf(stderr, "isergwctl: --apply goes with \"bond set\" only\n");
		return CLI_EUSAGE;
	}
	if (c->force && !(argc >= 1 && ((!strcmp(cmd, "bond") && !strcmp(argv[0], "set")) ||
					(!strcmp(cmd, "lun") && !strcmp(argv[0], "resize"))))) {
		fprintf(stderr, "isergwctl: --force goes with \"bond set\" and \"lun resize\" only\n");
		return CLI_EUSAGE;
	}
	if (c->force && !c->apply && !strcmp(cmd, "bond")) {
		fprintf(stderr, "isergwctl: --force goes with --apply\n");
		return CLI_EUSAGE;
	}
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
	for (i = 0; i < sizeof(cli_res) / sizeof(cli_res[0]); i++)
		if (!strcmp(cmd, cli_res[i].name))
			return res_run(c, &cli_res[i], argc, argv);
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
		{ "apply", no_argument, NULL, 'A' },
		{ "force", no_argument, NULL, 'F' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct cli c = { .timeout_s = 60 };
	const char *token_file = NULL, *state = getenv("ISERGW_STATE_DIR");
	char *tf = NULL;
	bool dry = false;
	int o, rc;

	/* A peer that closes mid-request (the agent restarting, a TLS connection dropped) must
	 * come back as an error from the request, not end the program with SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);
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
		case 'n': dry = c.dry_run = true; break;
		case 'A': c.apply = true; break;
		case 'F': c.force = true; break;
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
