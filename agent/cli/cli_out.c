// SPDX-License-Identifier: MIT
/*
 * isergwctl output: aligned tables, pretty JSON, errors with every offending field, and the
 * key=value argument syntax.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cli_print_error(const struct cli_resp *r)
{
	json_t *j = r->body ? json_loads(r->body, 0, NULL) : NULL;
	json_t *e = json_object_get(j, "error"), *x;
	const char *code = json_string_value(json_object_get(e, "code"));
	const char *msg = json_string_value(json_object_get(e, "message"));
	size_t i;
	int rc = r->status == 503 ? CLI_EUNREACH : CLI_EAPI;

	if (!e) {
		fprintf(stderr, "isergwctl: HTTP %ld\n", r->status);
		json_decref(j);
		return rc;
	}
	fprintf(stderr, "isergwctl: %ld %s: %s\n", r->status, code ? code : "?", msg ? msg : "");
	if (json_array_size(json_object_get(j, "errors")) > 1)
		json_array_foreach(json_object_get(j, "errors"), i, x)
			fprintf(stderr, "  %s: %s\n",
				json_string_value(json_object_get(x, "field")) ?: "",
				json_string_value(json_object_get(x, "message")) ?: "");
	json_decref(j);
	return rc;
}

void cli_print_json(const json_t *j)
{
	char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);

	if (s)
		printf("%s\n", s);
	free(s);
}

void cli_table_init(struct cli_table *t, const char *const *cols, size_t ncols)
{
	memset(t, 0, sizeof(*t));
	t->cols = cols;
	t->ncols = ncols;
}

void cli_table_add(struct cli_table *t, ...)
{
	va_list ap;
	size_t i;

	if (t->nrows == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 16;
		char **c = realloc(t->cells, cap * t->ncols * sizeof(*c));

		if (!c)
			return;
		t->cells = c;
		t->cap = cap;
	}
	va_start(ap, t);
	for (i = 0; i < t->ncols; i++) {
		const char *s = va_arg(ap, const char *);

		t->cells[t->nrows * t->ncols + i] = strdup(s ? s : "-");
	}
	va_end(ap);
	t->nrows++;
}

void cli_table_print(struct cli_table *t)
{
	size_t w[16] = { 0 }, i, j;

	for (j = 0; j < t->ncols && j < 16; j++)
		w[j] = strlen(t->cols[j]);
	for (i = 0; i < t->nrows; i++)
		for (j = 0; j < t->ncols && j < 16; j++) {
			const char *c = t->cells[i * t->ncols + j];
			size_t l = c ? strlen(c) : 1;

			if (l > w[j])
				w[j] = l;
		}
	for (j = 0; j < t->ncols; j++)
		printf("%-*s%s", j + 1 < t->ncols ? (int)w[j] : 0, t->cols[j],
		       j + 1 < t->ncols ? "  " : "\n");
	for (i = 0; i < t->nrows; i++)
		for (j = 0; j < t->ncols; j++) {
			const char *c = t->cells[i * t->ncols + j];

			printf("%-*s%s", j + 1 < t->ncols ? (int)w[j] : 0, c ? c : "-",
			       j + 1 < t->ncols ? "  " : "\n");
		}
}

void cli_table_fini(struct cli_table *t)
{
	size_t i;

	for (i = 0; i < t->nrows * t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
}

char *cli_cell(const json_t *j)
{
	char *s = NULL;

	if (json_is_string(j))
		return strdup(json_string_value(j));
	if (json_is_integer(j)) {
		if (asprintf(&s, "%lld", (long long)json_integer_value(j)) < 0)
			return NULL;
		return s;
	}
	if (json_is_true(j))
		return strdup("yes");
	if (json_is_false(j))
		return strdup("no");
	if (json_is_array(j)) {
		size_t i, n = 0;
		json_t *e;

		s = calloc(1, 1);
		json_array_foreach(j, i, e) {
			char *c = cli_cell(e), *t = NULL;

			if (asprintf(&t, "%s%s%s", s, n++ ? "," : "", c ? c : "") < 0)
				t = NULL;
			free(c);
			free(s);
			s = t;
			if (!s)
				return NULL;
		}
		return s;
	}
	return strdup("-");
}

static bool is_int(const char *s)
{
	if (*s == '-')
		s++;
	if (!*s || (*s == '0' && s[1]))
		return false;
	for (; *s; s++)
		if (!isdigit((unsigned char)*s))
			return false;
	return true;
}

/* "true" -> true, "12" -> 12, "[a,b]" -> ["a","b"], anything else -> string. */
static json_t *infer(const char *v)
{
	if (!strcmp(v, "true"))
		return json_true();
	if (!strcmp(v, "false"))
		return json_false();
	if (is_int(v))
		return json_integer(strtoll(v, NULL, 10));
	if (v[0] == '[' && v[strlen(v) - 1] == ']') {
		json_t *a = json_array();
		char *copy = strndup(v + 1, strlen(v) - 2), *save = NULL, *tok;

		for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
			json_array_append_new(a, json_string(tok));
		free(copy);
		return a;
	}
	return json_string(v);
}

int cli_kv_apply(json_t *obj, const char *arg)
{
	const char *eq = strchr(arg, '=');
	bool raw = eq && eq > arg && eq[-1] == ':';
	char *key, *save = NULL, *part, *next;
	json_t *val, *cur = obj;

	if (!eq || eq == arg) {
		fprintf(stderr, "isergwctl: \"%s\": expected key=value or key:=json\n", arg);
		return -EINVAL;
	}
	key = strndup(arg, (size_t)(eq - arg - (raw ? 1 : 0)));
	if (raw) {
		json_error_t e;

		val = json_loads(eq + 1, JSON_DECODE_ANY, &e);
		if (!val) {
			fprintf(stderr, "isergwctl: %s: not JSON: %s\n", key, e.text);
			free(key);
			return -EINVAL;
		}
	} else {
		val = infer(eq + 1);
	}
	/* "backstore.size=1G" -> {"backstore": {"size": "1G"}} */
	part = strtok_r(key, ".", &save);
	while (part) {
		next = strtok_r(NULL, ".", &save);
		if (!next) {
			json_object_set_new(cur, part, val);
			break;
		}
		if (!json_is_object(json_object_get(cur, part)))
			json_object_set_new(cur, part, json_object());
		cur = json_object_get(cur, part);
		part = next;
	}
	free(key);
	return 0;
}
