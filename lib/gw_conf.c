// SPDX-License-Identifier: MIT
/*
 * The keyword table engine. Every way a value enters an object (default text, JSON, CLI or
 * iSCSI key text) goes through the same path: decode into a struct conf_val, check type, range
 * and the key's own check(), and only then store it, so a rejected value never leaves the object
 * half-changed. JSON null resets a key to its default.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gw_buf.h"
#include "gw_list.h"
#include "gw_conf.h"
#include "gw_log.h"

#define CONF_FIELD(obj, k, type) ((type *)(void *)((char *)(obj) + (k)->offset))
#define CONF_CFIELD(obj, k, type) ((const type *)(const void *)((const char *)(obj) + (k)->offset))

/* A decoded value, in the member matching the key's type (check() gets a pointer to it). */
struct conf_val {
	bool b;
	int64_t i;
	uint32_t u32;
	uint64_t u64;
	int e;
	char *s;
	struct gw_strlist l;
};

static void conf_val_free(struct conf_val *v)
{
	free(v->s);
	v->s = NULL;
	gw_strlist_free(&v->l);
}

/* String lists */

void gw_strlist_free(struct gw_strlist *l)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

int gw_strlist_add(struct gw_strlist *l, const char *s)
{
	char **v;
	char *dup = strdup(s);

	if (!dup)
		return -ENOMEM;
	v = realloc(l->v, (l->n + 1) * sizeof(*v));
	if (!v) {
		free(dup);
		return -ENOMEM;
	}
	v[l->n++] = dup;
	l->v = v;
	return 0;
}

bool gw_strlist_has(const struct gw_strlist *l, const char *s)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		if (strcmp(l->v[i], s) == 0)
			return true;
	return false;
}

/* Error lists */

void gw_errlist_init(struct gw_errlist *e)
{
	e->v = NULL;
	e->n = 0;
	e->cap = 0;
}

void gw_errlist_fini(struct gw_errlist *e)
{
	size_t i;

	for (i = 0; i < e->n; i++) {
		free(e->v[i].field);
		free(e->v[i].msg);
	}
	free(e->v);
	gw_errlist_init(e);
}

void gw_errlist_add(struct gw_errlist *e, const char *field, const char *fmt, ...)
{
	struct gw_err *v;
	char *f, *m;
	va_list ap;
	int r;

	if (e->n == e->cap) {
		size_t cap = e->cap ? e->cap * 2 : 8;

		v = realloc(e->v, cap * sizeof(*v));
		if (!v)
			goto nomem;
		e->v = v;
		e->cap = cap;
	}
	va_start(ap, fmt);
	r = vasprintf(&m, fmt, ap);
	va_end(ap);
	if (r < 0)
		goto nomem;
	f = strdup(field ? field : "");
	if (!f) {
		free(m);
		goto nomem;
	}
	e->v[e->n].field = f;
	e->v[e->n].msg = m;
	e->n++;
	return;
nomem:
	/* The error itself is lost; the caller still sees a failure from its own return code. */
	gw_err("conf", "out of memory recording an error for %s", field ? field : "?");
}

char *gw_errlist_join(const struct gw_errlist *e)
{
	struct gw_buf b;
	size_t i;

	gw_buf_init(&b);
	for (i = 0; i < e->n; i++) {
		if (i)
			gw_buf_append(&b, "; ", 2);
		if (e->v[i].field[0])
			gw_buf_printf(&b, "%s: %s", e->v[i].field, e->v[i].msg);
		else
			gw_buf_printf(&b, "%s", e->v[i].msg);
	}
	return gw_buf_steal(&b);
}

/* Sizes */

int gw_parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned int shift = 0;
	char *end;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	switch (toupper((unsigned char)*end)) {
	case 'K': shift = 10; end++; break;
	case 'M': shift = 20; end++; break;
	case 'G': shift = 30; end++; break;
	case 'T': shift = 40; end++; break;
	case 'P': shift = 50; end++; break;
	default: break;
	}
	/* "512M", "512MB", "512MiB" all mean the same here; bytes alone may say "4096B". */
	if (shift && (*end == 'i' || *end == 'I'))
		end++;
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end)
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

/* Table helpers */

const struct gw_conf_key *gw_conf_find(const struct gw_conf_key *tbl, const char *name)
{
	for (; tbl->name; tbl++)
		if (strcmp(tbl->name, name) == 0)
			return tbl;
	return NULL;
}

static void conf_path(char *buf, size_t len, const char *path, const char *key)
{
	if (path && *path)
		snprintf(buf, len, "%s.%s", path, key);
	else
		snprintf(buf, len, "%s", key);
}

static char *conf_enum_names(const struct gw_conf_enum *en)
{
	struct gw_buf b;

	gw_buf_init(&b);
	for (; en && en->name; en++)
		gw_buf_printf(&b, "%s%s", b.len ? ", " : "", en->name);
	return gw_buf_steal(&b);
}

static const char *conf_enum_name(const struct gw_conf_enum *en, int value)
{
	for (; en && en->name; en++)
		if (en->value == value)
			return en->name;
	return NULL;
}

static bool conf_range_on(const struct gw_conf_key *k)
{
	return k->min != 0 || k->max != 0;
}

/* Numeric bounds in effect for unsigned types. */
static void conf_ubounds(const struct gw_conf_key *k, uint64_t *lo, uint64_t *hi)
{
	uint64_t cap = k->type == GW_CONF_U32 ? UINT32_MAX : UINT64_MAX;

	*lo = k->min > 0 ? (uint64_t)k->min : 0;
	*hi = cap;
	if (k->type == GW_CONF_U32 && conf_range_on(k) && k->max >= 0 && (uint64_t)k->max < cap)
		*hi = (uint64_t)k->max;
	if (k->type != GW_CONF_U32 && k->max > 0)
		*hi = (uint64_t)k->max;
}

/* Range checks for unsigned keys, shared by every input form; negatives go to the next one. */
static int conf_check_unsigned(const struct gw_conf_key *k, uint64_t u, const char *field,
			       struct gw_errlist *errs)
{
	uint64_t lo, hi;

	conf_ubounds(k, &lo, &hi);
	if (u >= lo && u <= hi)
		return 0;
	if (hi == UINT64_MAX)
		gw_errlist_add(errs, field, "%" PRIu64 " is below the minimum %" PRIu64, u, lo);
	else
		gw_errlist_add(errs, field, "%" PRIu64 " is out of range %" PRIu64 "..%" PRIu64, u,
			       lo, hi);
	return -EINVAL;
}

static int conf_check_negative(const struct gw_conf_key *k, int64_t i, const char *field,
			       struct gw_errlist *errs)
{
	uint64_t lo, hi;

	conf_ubounds(k, &lo, &hi);
	if (hi == UINT64_MAX)
		gw_errlist_add(errs, field, "%" PRId64 " is below the minimum %" PRIu64, i, lo);
	else
		gw_errlist_add(errs, field, "%" PRId64 " is out of range %" PRIu64 "..%" PRIu64, i,
			       lo, hi);
	return -EINVAL;
}

static int conf_check_str_len(const struct gw_conf_key *k, const char *s, const char *field,
			      struct gw_errlist *errs)
{
	size_t len = strlen(s);

	/* max 0: no upper limit. The value is not echoed: it may be a secret. */
	if ((int64_t)len < k->min || (k->max > 0 && (int64_t)len > k->max)) {
		if (k->max > 0)
			gw_errlist_add(errs, field, "length %zu is out of range %" PRId64
				       "..%" PRId64, len, k->min, k->max);
		else
			gw_errlist_add(errs, field, "length %zu is below the minimum %" PRId64, len,
				       k->min);
		return -EINVAL;
	}
	return 0;
}

/* Integer value from a JSON integer or text; unsigned types route negatives to the error. */
static int conf_take_int(const struct gw_conf_key *k, int64_t i, struct conf_val *v,
			 const char *field, struct gw_errlist *errs)
{
	switch (k->type) {
	case GW_CONF_INT:
		if (conf_range_on(k) && (i < k->min || i > k->max)) {
			gw_errlist_add(errs, field, "%" PRId64 " is out of range %" PRId64
				       "..%" PRId64, i, k->min, k->max);
			return -EINVAL;
		}
		v->i = i;
		return 0;
	case GW_CONF_U32:
	case GW_CONF_U64:
	case GW_CONF_SIZE:
		if (i < 0)
			return conf_check_negative(k, i, field, errs);
		if (conf_check_unsigned(k, (uint64_t)i, field, errs))
			return -EINVAL;
		v->u32 = (uint32_t)i;
		v->u64 = (uint64_t)i;
		return 0;
	default:
		return -EINVAL;
	}
}

static int conf_take_enum(const struct gw_conf_key *k, const char *s, struct conf_val *v,
			  const char *field, struct gw_errlist *errs)
{
	const struct gw_conf_enum *en;
	char *names;

	for (en = k->enums; en && en->name; en++) {
		if (strcmp(en->name, s) == 0) {
			v->e = en->value;
			return 0;
		}
	}
	names = conf_enum_names(k->enums);
	gw_errlist_add(errs, field, "\"%s\" is not one of: %s", s, names ? names : "");
	free(names);
	return -EINVAL;
}

static int conf_take_str(const struct gw_conf_key *k, const char *s, struct conf_val *v,
			 const char *field, struct gw_errlist *errs)
{
	if (conf_check_str_len(k, s, field, errs))
		return -EINVAL;
	v->s = strdup(s);
	if (!v->s) {
		gw_errlist_add(errs, field, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

static int conf_strlist_count(const struct gw_conf_key *k, const struct gw_strlist *l,
			      const char *field, struct gw_errlist *errs)
{
	int64_t n = (int64_t)l->n;

	if (conf_range_on(k) && (n < k->min || (k->max > 0 && n > k->max))) {
		gw_errlist_add(errs, field, "%zu entries, allowed %" PRId64 "..%" PRId64, l->n,
			       k->min, k->max);
		return -EINVAL;
	}
	return 0;
}

static bool conf_parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "true", "yes", "on", "1" };
	static const char *const no[] = { "false", "no", "off", "0" };
	size_t i;

	for (i = 0; i < GW_ARRAY_SIZE(yes); i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = true;
			return true;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = false;
			return true;
		}
	}
	return false;
}

/* Decodes text (defaults, CLI, iSCSI keys) into v. Range errors are reported here too. */
static int conf_decode_text(const struct gw_conf_key *k, const char *text, struct conf_val *v,
			    const char *field, struct gw_errlist *errs)
{
	long long ll;
	uint64_t u;
	char *end;

	switch (k->type) {
	case GW_CONF_BOOL:
		if (!conf_parse_bool(text, &v->b)) {
			gw_errlist_add(errs, field, "expected true or false");
			return -EINVAL;
		}
		return 0;
	case GW_CONF_INT:
	case GW_CONF_U32:
	case GW_CONF_U64:
		errno = 0;
		ll = strtoll(text, &end, 10);
		if (end == text || *end || errno) {
			/* Unsigned values past INT64_MAX are still numbers. */
			if (k->type == GW_CONF_U64 && isdigit((unsigned char)*text)) {
				errno = 0;
				u = strtoull(text, &end, 10);
				if (!*end && !errno) {
					if (conf_check_unsigned(k, u, field, errs))
						return -EINVAL;
					v->u64 = u;
					return 0;
				}
			}
			gw_errlist_add(errs, field, "expected an integer");
			return -EINVAL;
		}
		return conf_take_int(k, ll, v, field, errs);
	case GW_CONF_SIZE:
		if (gw_parse_size(text, &u)) {
			gw_errlist_add(errs, field,
				       "\"%s\" is not a size (like 4096, 512K, 64M, 10G)", text);
			return -EINVAL;
		}
		if (conf_check_unsigned(k, u, field, errs))
			return -EINVAL;
		v->u64 = u;
		return 0;
	case GW_CONF_STR:
		return conf_take_str(k, text, v, field, errs);
	case GW_CONF_ENUM:
		return conf_take_enum(k, text, v, field, errs);
	case GW_CONF_STRLIST: {
		const char *p = text;

		/* Comma separated; "" is the empty list. */
		while (*p) {
			const char *comma = strchr(p, ',');
			size_t len = comma ? (size_t)(comma - p) : strlen(p);
			char *item = strndup(p, len);
			int r;

			if (!item)
				return -ENOMEM;
			r = gw_strlist_add(&v->l, item);
			free(item);
			if (r)
				return r;
			if (!comma)
				break;
			p = comma + 1;
		}
		return conf_strlist_count(k, &v->l, field, errs);
	}
	}
	return -EINVAL;
}

static int conf_decode_json(const struct gw_conf_key *k, const json_t *j, struct conf_val *v,
			    const char *field, struct gw_errlist *errs)
{
	char *names;
	size_t i;

	switch (k->type) {
	case GW_CONF_BOOL:
		if (!json_is_boolean(j)) {
			gw_errlist_add(errs, field, "expected true or false");
			return -EINVAL;
		}
		v->b = json_is_true(j);
		return 0;
	case GW_CONF_INT:
	case GW_CONF_U32:
	case GW_CONF_U64:
		if (!json_is_integer(j)) {
			gw_errlist_add(errs, field, "expected an integer");
			return -EINVAL;
		}
		return conf_take_int(k, json_integer_value(j), v, field, errs);
	case GW_CONF_SIZE:
		if (json_is_integer(j))
			return conf_take_int(k, json_integer_value(j), v, field, errs);
		if (json_is_string(j))
			return conf_decode_text(k, json_string_value(j), v, field, errs);
		gw_errlist_add(errs, field,
			       "expected a size: a number of bytes or text like \"64M\"");
		return -EINVAL;
	case GW_CONF_STR:
		if (!json_is_string(j)) {
			gw_errlist_add(errs, field, "expected a string");
			return -EINVAL;
		}
		return conf_take_str(k, json_string_value(j), v, field, errs);
	case GW_CONF_ENUM:
		if (!json_is_string(j)) {
			names = conf_enum_names(k->enums);
			gw_errlist_add(errs, field, "expected one of: %s", names ? names : "");
			free(names);
			return -EINVAL;
		}
		return conf_take_enum(k, json_string_value(j), v, field, errs);
	case GW_CONF_STRLIST:
		if (!json_is_array(j)) {
			gw_errlist_add(errs, field, "expected an array of strings");
			return -EINVAL;
		}
		for (i = 0; i < json_array_size(j); i++) {
			const json_t *e = json_array_get(j, i);

			if (!json_is_string(e)) {
				gw_errlist_add(errs, field, "item %zu: expected a string", i);
				return -EINVAL;
			}
			if (gw_strlist_add(&v->l, json_string_value(e)))
				return -ENOMEM;
		}
		return conf_strlist_count(k, &v->l, field, errs);
	}
	return -EINVAL;
}

/* The key's own check, on the decoded value, before anything is stored. */
static int conf_run_check(const struct gw_conf_key *k, const struct conf_val *v,
			  const char *field, struct gw_errlist *errs)
{
	const void *p = NULL;
	const char *msg;

	if (!k->check)
		return 0;
	switch (k->type) {
	case GW_CONF_BOOL: p = &v->b; break;
	case GW_CONF_INT: p = &v->i; break;
	case GW_CONF_U32: p = &v->u32; break;
	case GW_CONF_U64:
	case GW_CONF_SIZE: p = &v->u64; break;
	case GW_CONF_STR: p = &v->s; break;
	case GW_CONF_ENUM: p = &v->e; break;
	case GW_CONF_STRLIST: p = &v->l; break;
	}
	msg = k->check(p);
	if (msg) {
		gw_errlist_add(errs, field, "%s", msg);
		return -EINVAL;
	}
	return 0;
}

/* Moves v into the object (v's heap parts are taken). */
static void conf_store(const struct gw_conf_key *k, void *obj, struct conf_val *v)
{
	switch (k->type) {
	case GW_CONF_BOOL: *CONF_FIELD(obj, k, bool) = v->b; break;
	case GW_CONF_INT: *CONF_FIELD(obj, k, int64_t) = v->i; break;
	case GW_CONF_U32: *CONF_FIELD(obj, k, uint32_t) = v->u32; break;
	case GW_CONF_U64:
	case GW_CONF_SIZE: *CONF_FIELD(obj, k, uint64_t) = v->u64; break;
	case GW_CONF_ENUM: *CONF_FIELD(obj, k, int) = v->e; break;
	case GW_CONF_STR:
		free(*CONF_FIELD(obj, k, char *));
		*CONF_FIELD(obj, k, char *) = v->s;
		v->s = NULL;
		break;
	case GW_CONF_STRLIST:
		gw_strlist_free(CONF_FIELD(obj, k, struct gw_strlist));
		*CONF_FIELD(obj, k, struct gw_strlist) = v->l;
		v->l.v = NULL;
		v->l.n = 0;
		break;
	}
}

/* The default as a decoded value; a default that does not decode is a bug in the table. */
static int conf_default_val(const struct gw_conf_key *k, struct conf_val *v)
{
	struct gw_errlist errs;
	char *why;
	int r;

	memset(v, 0, sizeof(*v));
	if (!k->def) {
		/* Zero/empty. An enum's zero is its first name, not necessarily value 0. */
		if (k->type == GW_CONF_ENUM && k->enums && k->enums[0].name)
			v->e = k->enums[0].value;
		return 0;
	}
	gw_errlist_init(&errs);
	r = conf_decode_text(k, k->def, v, k->name, &errs);
	if (!r)
		r = conf_run_check(k, v, k->name, &errs);
	if (r) {
		why = gw_errlist_join(&errs);
		gw_err("conf", "bad default for %s: %s", k->name, why ? why : "?");
		free(why);
		conf_val_free(v);
		r = r == -ENOMEM ? r : -EINVAL;
	}
	gw_errlist_fini(&errs);
	return r;
}

int gw_conf_defaults(const struct gw_conf_key *tbl, void *obj)
{
	const struct gw_conf_key *k;
	struct conf_val v;
	int r, ret = 0;

	/* obj must be zeroed or gw_conf_free'd: strings it holds are replaced, not leaked. */
	for (k = tbl; k->name; k++) {
		r = conf_default_val(k, &v);
		if (r) {
			ret = ret ? ret : r;
			continue;
		}
		conf_store(k, obj, &v);
		conf_val_free(&v);
	}
	return ret;
}

static bool conf_ignored(const char *const *ignore, const char *key)
{
	for (; ignore && *ignore; ignore++)
		if (strcmp(*ignore, key) == 0)
			return true;
	return false;
}

static bool conf_is_empty(const struct gw_conf_key *k, const void *obj)
{
	switch (k->type) {
	case GW_CONF_STR: {
		const char *s = *CONF_CFIELD(obj, k, char *);

		return !s || !*s;
	}
	case GW_CONF_STRLIST: return CONF_CFIELD(obj, k, struct gw_strlist)->n == 0;
	default: return false;	/* numbers and bools always hold a value */
	}
}

static void conf_unknown_key(const struct gw_conf_key *tbl, const char *const *ignore,
			     const char *field, struct gw_errlist *errs)
{
	const struct gw_conf_key *k;
	struct gw_buf b;
	char *known;

	gw_buf_init(&b);
	for (k = tbl; k->name; k++)
		gw_buf_printf(&b, "%s%s", b.len ? ", " : "", k->name);
	for (; ignore && *ignore; ignore++)
		gw_buf_printf(&b, "%s%s", b.len ? ", " : "", *ignore);
	known = gw_buf_steal(&b);
	gw_errlist_add(errs, field, "unknown key (known: %s)", known ? known : "");
	free(known);
}

int gw_conf_parse(const struct gw_conf_key *tbl, void *obj, const json_t *in, const char *path,
		  const char *const *ignore, struct gw_errlist *errs)
{
	const struct gw_conf_key *k;
	size_t before = errs->n;
	char field[256];
	const char *key;
	json_t *val;

	if (!json_is_object(in)) {
		gw_errlist_add(errs, path && *path ? path : "", "expected an object");
		return -EINVAL;
	}
	json_object_foreach((json_t *)in, key, val) {
		struct conf_val v;
		int r;

		conf_path(field, sizeof(field), path, key);
		k = gw_conf_find(tbl, key);
		if (!k) {
			if (!conf_ignored(ignore, key))
				conf_unknown_key(tbl, ignore, field, errs);
			continue;
		}
		if (json_is_null(val)) {
			/* null: back to the default (required keys have none). */
			if (k->flags & GW_CONF_REQUIRED) {
				gw_errlist_add(errs, field, "is required");
				continue;
			}
			r = conf_default_val(k, &v);
		} else {
			memset(&v, 0, sizeof(v));
			r = conf_decode_json(k, val, &v, field, errs);
			if (!r)
				r = conf_run_check(k, &v, field, errs);
		}
		if (!r)
			conf_store(k, obj, &v);
		conf_val_free(&v);
	}
	for (k = tbl; k->name; k++) {
		if (!(k->flags & GW_CONF_REQUIRED))
			continue;
		if (json_object_get(in, k->name) || !conf_is_empty(k, obj))
			continue;
		conf_path(field, sizeof(field), path, k->name);
		gw_errlist_add(errs, field, "is required");
	}
	return errs->n > before ? -EINVAL : 0;
}

int gw_conf_set_text(const struct gw_conf_key *tbl, void *obj, const char *key, const char *text,
		     struct gw_errlist *errs)
{
	const struct gw_conf_key *k = gw_conf_find(tbl, key);
	struct gw_errlist local;
	struct conf_val v;
	int r;

	if (!k) {
		if (errs)
			conf_unknown_key(tbl, NULL, key, errs);
		return -ENOENT;
	}
	/* Callers without an error list still get the -EINVAL. */
	gw_errlist_init(&local);
	memset(&v, 0, sizeof(v));
	r = conf_decode_text(k, text ? text : "", &v, key, errs ? errs : &local);
	if (!r)
		r = conf_run_check(k, &v, key, errs ? errs : &local);
	if (!r)
		conf_store(k, obj, &v);
	conf_val_free(&v);
	gw_errlist_fini(&local);
	if (r == -ENOMEM)
		return r;
	return r ? -EINVAL : 0;
}

static json_t *conf_val_json(const struct gw_conf_key *k, const struct conf_val *v)
{
	const char *name;
	json_t *a;
	size_t i;

	switch (k->type) {
	case GW_CONF_BOOL: return json_boolean(v->b);
	case GW_CONF_INT: return json_integer((json_int_t)v->i);
	case GW_CONF_U32: return json_integer((json_int_t)v->u32);
	case GW_CONF_U64:
	case GW_CONF_SIZE:
		/* JSON integers here are int64: larger values print as text, which parses back. */
		if (v->u64 > INT64_MAX) {
			char buf[32];

			if (k->type == GW_CONF_SIZE) {
				snprintf(buf, sizeof(buf), "%" PRIu64, v->u64);
				return json_string(buf);
			}
			return json_integer(INT64_MAX);
		}
		return json_integer((json_int_t)v->u64);
	case GW_CONF_STR: return v->s ? json_string(v->s) : json_null();
	case GW_CONF_ENUM:
		name = conf_enum_name(k->enums, v->e);
		return name ? json_string(name) : json_integer(v->e);
	case GW_CONF_STRLIST:
		a = json_array();
		for (i = 0; a && i < v->l.n; i++)
			json_array_append_new(a, json_string(v->l.v[i]));
		return a;
	}
	return json_null();
}

/* A view of the object's field as a conf_val (borrowed: not to be freed). */
static void conf_load(const struct gw_conf_key *k, const void *obj, struct conf_val *v)
{
	memset(v, 0, sizeof(*v));
	switch (k->type) {
	case GW_CONF_BOOL: v->b = *CONF_CFIELD(obj, k, bool); break;
	case GW_CONF_INT: v->i = *CONF_CFIELD(obj, k, int64_t); break;
	case GW_CONF_U32: v->u32 = *CONF_CFIELD(obj, k, uint32_t); break;
	case GW_CONF_U64:
	case GW_CONF_SIZE: v->u64 = *CONF_CFIELD(obj, k, uint64_t); break;
	case GW_CONF_ENUM: v->e = *CONF_CFIELD(obj, k, int); break;
	case GW_CONF_STR:
		v->s = *(char *const *)(const void *)((const char *)obj + k->offset);
		break;
	case GW_CONF_STRLIST: v->l = *CONF_CFIELD(obj, k, struct gw_strlist); break;
	}
}

json_t *gw_conf_to_json(const struct gw_conf_key *tbl, const void *obj, bool mask_secrets)
{
	const struct gw_conf_key *k;
	json_t *o = json_object();
	struct conf_val v;

	if (!o)
		return NULL;
	for (k = tbl; k->name; k++) {
		json_t *j;

		if (mask_secrets && (k->flags & GW_CONF_SECRET) && !conf_is_empty(k, obj)) {
			j = json_string("****");
		} else {
			conf_load(k, obj, &v);
			j = conf_val_json(k, &v);
		}
		if (!j || json_object_set_new(o, k->name, j)) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

static json_t *conf_key_schema(const struct gw_conf_key *k)
{
	const struct gw_conf_enum *en;
	struct conf_val v;
	uint64_t lo, hi;
	json_t *s = json_object(), *e;

	if (!s)
		return NULL;
	switch (k->type) {
	case GW_CONF_BOOL:
		json_object_set_new(s, "type", json_string("boolean"));
		break;
	case GW_CONF_INT:
		json_object_set_new(s, "type", json_string("integer"));
		if (conf_range_on(k)) {
			json_object_set_new(s, "minimum", json_integer(k->min));
			json_object_set_new(s, "maximum", json_integer(k->max));
		}
		break;
	case GW_CONF_U32:
	case GW_CONF_U64:
	case GW_CONF_SIZE:
		if (k->type == GW_CONF_SIZE) {
			json_object_set_new(s, "type", json_pack("[ss]", "integer", "string"));
			json_object_set_new(s, "pattern",
					    json_string("^[0-9]+([KMGTPkmgtp]i?)?[Bb]?$"));
		} else {
			json_object_set_new(s, "type", json_string("integer"));
		}
		conf_ubounds(k, &lo, &hi);
		json_object_set_new(s, "minimum", json_integer((json_int_t)lo));
		if (hi <= INT64_MAX)
			json_object_set_new(s, "maximum", json_integer((json_int_t)hi));
		break;
	case GW_CONF_STR:
		json_object_set_new(s, "type", json_string("string"));
		if (k->min > 0)
			json_object_set_new(s, "minLength", json_integer(k->min));
		if (k->max > 0)
			json_object_set_new(s, "maxLength", json_integer(k->max));
		break;
	case GW_CONF_ENUM:
		json_object_set_new(s, "type", json_string("string"));
		e = json_array();
		for (en = k->enums; e && en && en->name; en++)
			json_array_append_new(e, json_string(en->name));
		json_object_set_new(s, "enum", e);
		break;
	case GW_CONF_STRLIST:
		json_object_set_new(s, "type", json_string("array"));
		json_object_set_new(s, "items", json_pack("{ss}", "type", "string"));
		if (conf_range_on(k)) {
			json_object_set_new(s, "minItems", json_integer(k->min));
			if (k->max > 0)
				json_object_set_new(s, "maxItems", json_integer(k->max));
		}
		break;
	}
	if (k->help)
		json_object_set_new(s, "description", json_string(k->help));
	if (k->flags & GW_CONF_SECRET)
		json_object_set_new(s, "writeOnly", json_true());
	else if (!(k->flags & GW_CONF_REQUIRED) && k->def && conf_default_val(k, &v) == 0) {
		json_object_set_new(s, "default", conf_val_json(k, &v));
		conf_val_free(&v);
	}
	return s;
}

json_t *gw_conf_schema(const struct gw_conf_key *tbl)
{
	const struct gw_conf_key *k;
	json_t *props = json_object(), *req = json_array(), *schema;

	if (!props || !req) {
		json_decref(props);
		json_decref(req);
		return NULL;
	}
	for (k = tbl; k->name; k++) {
		json_object_set_new(props, k->name, conf_key_schema(k));
		if (k->flags & GW_CONF_REQUIRED)
			json_array_append_new(req, json_string(k->name));
	}
	schema = json_pack("{s:s, s:o, s:o, s:b}", "type", "object", "properties", props,
			   "required", req, "additionalProperties", 0);
	return schema;
}

void gw_conf_free(const struct gw_conf_key *tbl, void *obj)
{
	const struct gw_conf_key *k;

	for (k = tbl; k->name; k++) {
		if (k->type == GW_CONF_STR) {
			free(*CONF_FIELD(obj, k, char *));
			*CONF_FIELD(obj, k, char *) = NULL;
		} else if (k->type == GW_CONF_STRLIST) {
			gw_strlist_free(CONF_FIELD(obj, k, struct gw_strlist));
		}
	}
}
