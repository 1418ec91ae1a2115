/* SPDX-License-Identifier: MIT */
/*
 * isergwctl: the command-line client of the agent's REST API (docs/REST.md). One HTTP call per
 * API operation through libcurl, tables for people by default and the API's JSON with --json.
 * Exit codes: 0 ok, 1 the API answered with an error, 2 usage, 3 agent or gateway unreachable.
 */
#ifndef CLI_H
#define CLI_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

enum {
	CLI_OK = 0,
	CLI_EAPI = 1,
	CLI_EUSAGE = 2,
	CLI_EUNREACH = 3,
	CLI_EVERDICT = 4,		/* bond check: a verdict of severity error holds */
};

struct cli {
	const char *url;		/* http://127.0.0.1:8080 */
	char *token;
	bool json;
	bool quiet;
	bool insecure;
	const char *cacert;
	const char *if_match;
	long timeout_s;
	bool dry_run;			/* --dry-run: bond set asks for the plan */
	bool apply;			/* --apply: bond set changes the host */
	bool force;			/* --force: ... even while TCP sessions use the bond */
};

struct cli_resp {
	long status;
	char *body;
	size_t len;
	char etag[64];
	char gateway[32];		/* X-Isergw-Gateway */
};

/* One request; body may be NULL. Returns CLI_OK when an HTTP answer came (any status), or
 * CLI_EUNREACH. */
int cli_http(struct cli *c, const char *method, const char *path, const char *body,
	     struct cli_resp *out);
/* Streams a GET (server-sent events) to stdout until the server closes it. */
int cli_http_stream(struct cli *c, const char *path);
void cli_resp_free(struct cli_resp *r);
/* Path segment escaping for names (IQNs are safe, but an initiator name may not be). */
char *cli_escape(const char *s);

/* Output helpers (cli_out.c) */
/* Prints an error answer to stderr; returns the exit code it maps to. */
int cli_print_error(const struct cli_resp *r);
void cli_print_json(const json_t *j);
/* A table: columns, then rows of strings (NULL shows as "-"). */
struct cli_table {
	size_t ncols;
	const char *const *cols;
	char **cells;			/* rows * ncols */
	size_t nrows, cap;
};

void cli_table_init(struct cli_table *t, const char *const *cols, size_t ncols);
void cli_table_add(struct cli_table *t, ...);	/* ncols strings (copied) */
void cli_table_print(struct cli_table *t);
void cli_table_fini(struct cli_table *t);
/* Text of a JSON scalar for a cell (malloc'ed): strings as is, numbers, true/false, "-". */
char *cli_cell(const json_t *j);

/* key=value / key:=json arguments into a JSON object (dotted keys nest). 0 or -EINVAL with a
 * message printed. */
int cli_kv_apply(json_t *obj, const char *arg);

/* bond list | show NAME | set NAME k=v.. | forget NAME | check; rdma list (cli_net.c). */
/* Verbs of the command table with their own output (cli_net.c): path is the resource's, argv
 * the arguments after its name. */
int cli_bond_list(struct cli *c, const char *path, int argc, char **argv);
int cli_bond_show(struct cli *c, const char *path, int argc, char **argv);
int cli_bond_set(struct cli *c, const char *path, int argc, char **argv);
/* bond check: the gateway's verdicts with their fixes; CLI_EVERDICT when one is an error. */
int cli_bond_check(struct cli *c, const char *path, int argc, char **argv);
int cli_rdma_list(struct cli *c, const char *path, int argc, char **argv);

#endif
