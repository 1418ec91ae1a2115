/* SPDX-License-Identifier: MIT */
/*
 * Declarative configuration: one table of keys per object type (name, type, range, default,
 * help). The same table sets defaults, parses and validates JSON (naming the key and the allowed
 * range in every error, collecting all errors rather than stopping at the first), prints an
 * object back to JSON (secrets masked on request) and produces the JSON schema the REST API
 * serves. Nested objects and arrays of objects are walked by the caller, which passes the path
 * prefix so errors read "targets[0].luns[2].size".
 */
#ifndef GW_CONF_H
#define GW_CONF_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum gw_conf_type {
	GW_CONF_BOOL,		/* bool */
	GW_CONF_INT,		/* int64_t, range [min, max] */
	GW_CONF_U32,		/* uint32_t, range [min, max] */
	GW_CONF_U64,		/* uint64_t, range [min, max] (max 0: no upper bound) */
	GW_CONF_STR,		/* char * (heap, owned by the object), length [min, max] */
	GW_CONF_ENUM,		/* int, one of .enums */
	GW_CONF_STRLIST,	/* struct gw_strlist */
	GW_CONF_SIZE,		/* uint64_t bytes; JSON number or "512M"/"4G"/"100G" */
};

struct gw_conf_enum {
	const char *name;
	int value;
};

enum {
	GW_CONF_REQUIRED = 1 << 0,	/* no default: missing is an error */
	GW_CONF_SECRET = 1 << 1,	/* masked when printed with mask_secrets */
};

struct gw_errlist;

struct gw_conf_key {
	const char *name;
	enum gw_conf_type type;
	size_t offset;			/* offsetof(struct x, field) */
	int64_t min, max;		/* numeric range, or string length range */
	const char *def;		/* default as text, parsed like a value; NULL: zero/empty */
	const struct gw_conf_enum *enums;	/* GW_CONF_ENUM: terminated by { NULL, 0 } */
	unsigned int flags;
	const char *help;
	/* Extra check on a parsed value (e.g. IQN syntax); returns NULL or a message. */
	const char *(*check)(const void *field);
};

/* Tables end with an entry whose name is NULL. */
#define GW_CONF_END { .name = NULL }

struct gw_strlist {
	char **v;
	size_t n;
};

void gw_strlist_free(struct gw_strlist *l);
int gw_strlist_add(struct gw_strlist *l, const char *s);
bool gw_strlist_has(const struct gw_strlist *l, const char *s);

/* Errors with the field path they belong to; the REST API reports them all at once. */
struct gw_err {
	char *field;
	char *msg;
};

struct gw_errlist {
	struct gw_err *v;
	size_t n, cap;
};

void gw_errlist_init(struct gw_errlist *e);
void gw_errlist_fini(struct gw_errlist *e);
void gw_errlist_add(struct gw_errlist *e, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* "field: msg; field: msg" into a malloc'ed string (for logs and the CLI). */
char *gw_errlist_join(const struct gw_errlist *e);

/* Sets every key to its default; obj must be zeroed (or gw_conf_free'd): strings in it are not
 * freed. Returns 0, -ENOMEM, or -EINVAL for a table whose default does not parse. */
int gw_conf_defaults(const struct gw_conf_key *tbl, void *obj);
/*
 * Applies a JSON object on top of obj (call gw_conf_defaults first). Unknown keys, wrong types,
 * out-of-range values and failed checks are added to errs under "<path>.<key>" (path may be
 * "" for top level). `ignore` lists keys the caller handles itself (nested objects), NULL-ended.
 * A JSON null resets a key to its default. Returns 0 if nothing was added to errs, -EINVAL
 * otherwise; a rejected value never changes obj.
 */
int gw_conf_parse(const struct gw_conf_key *tbl, void *obj, const json_t *in, const char *path,
		  const char *const *ignore, struct gw_errlist *errs);
/* Sets one key from its text form (CLI, iSCSI key values). 0, -ENOENT (no such key) or -EINVAL
 * (bad value: *msg says why, static or owned by errs-less caller: see gw_conf_parse). */
int gw_conf_set_text(const struct gw_conf_key *tbl, void *obj, const char *key, const char *text,
		     struct gw_errlist *errs);
/* The object as JSON (new reference); secrets become "****" when mask_secrets. */
json_t *gw_conf_to_json(const struct gw_conf_key *tbl, const void *obj, bool mask_secrets);
/* JSON-schema "properties"/"required" object describing the table (new reference). */
json_t *gw_conf_schema(const struct gw_conf_key *tbl);
/* Frees strings and string lists the table owns in obj. */
void gw_conf_free(const struct gw_conf_key *tbl, void *obj);
const struct gw_conf_key *gw_conf_find(const struct gw_conf_key *tbl, const char *name);

/* Size text: "4096", "512K", "64M", "10G", "2T" (powers of 1024). 0 or -EINVAL. */
int gw_parse_size(const char *s, uint64_t *out);

#endif
