// SPDX-License-Identifier: MIT
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gw_conf.h"

enum digest { DIGEST_NONE, DIGEST_CRC32C };

struct tcfg {
	bool enabled;
	int64_t offset;
	uint32_t burst;
	uint64_t blocks;
	char *name;
	char *secret;
	int digest;
	struct gw_strlist portals;
	uint64_t size;
};

static const struct gw_conf_enum digests[] = {
	{ "None", DIGEST_NONE },
	{ "CRC32C", DIGEST_CRC32C },
	{ NULL, 0 },
};

static const char *check_iqn(const void *field)
{
	const char *s = *(char *const *)field;

	return strncmp(s, "iqn.", 4) == 0 ? NULL : "must start with \"iqn.\"";
}

static const struct gw_conf_key tbl[] = {
	{ .name = "enabled", .type = GW_CONF_BOOL, .offset = offsetof(struct tcfg, enabled),
	  .def = "true", .help = "Serve this target" },
	{ .name = "offset", .type = GW_CONF_INT, .offset = offsetof(struct tcfg, offset),
	  .min = -10, .max = 10, .def = "-3" },
	{ .name = "burst", .type = GW_CONF_U32, .offset = offsetof(struct tcfg, burst),
	  .min = 512, .max = 65536, .def = "8192", .help = "MaxBurstLength" },
	{ .name = "blocks", .type = GW_CONF_U64, .offset = offsetof(struct tcfg, blocks) },
	{ .name = "name", .type = GW_CONF_STR, .offset = offsetof(struct tcfg, name),
	  .min = 5, .max = 223, .flags = GW_CONF_REQUIRED, .check = check_iqn },
	{ .name = "secret", .type = GW_CONF_STR, .offset = offsetof(struct tcfg, secret),
	  .min = 12, .max = 16, .flags = GW_CONF_SECRET },
	{ .name = "digest", .type = GW_CONF_ENUM, .offset = offsetof(struct tcfg, digest),
	  .enums = digests, .def = "CRC32C" },
	{ .name = "portals", .type = GW_CONF_STRLIST, .offset = offsetof(struct tcfg, portals) },
	{ .name = "size", .type = GW_CONF_SIZE, .offset = offsetof(struct tcfg, size),
	  .min = 4096, .def = "1G" },
	GW_CONF_END,
};

static json_t *js(const char *text)
{
	json_error_t e;
	json_t *j = json_loads(text, 0, &e);

	cr_assert_not_null(j, "bad test JSON: %s", e.text);
	return j;
}

static const char *err_for(const struct gw_errlist *e, const char *field)
{
	for (size_t i = 0; i < e->n; i++)
		if (strcmp(e->v[i].field, field) == 0)
			return e->v[i].msg;
	return NULL;
}

Test(conf, defaults)
{
	struct tcfg c = { 0 };

	cr_assert_eq(gw_conf_defaults(tbl, &c), 0);
	cr_expect(c.enabled);
	cr_expect_eq(c.offset, -3);
	cr_expect_eq(c.burst, 8192);
	cr_expect_eq(c.blocks, 0);
	cr_expect_null(c.name);
	cr_expect_eq(c.digest, DIGEST_CRC32C);
	cr_expect_eq(c.portals.n, 0);
	cr_expect_eq(c.size, 1ull << 30);
	gw_conf_free(tbl, &c);
}

Test(conf, parse_every_type)
{
	struct tcfg c = { 0 };
	struct gw_errlist e;
	json_t *in = js("{\"enabled\": false, \"offset\": 10, \"burst\": 65536,"
			" \"blocks\": 123456789012,"
			" \"name\": \"iqn.2024-01.com.example:t1\", \"secret\": \"0123456789abc\","
			" \"digest\": \"None\", \"portals\": [\"10.0.0.1:3260\", \"[::1]:3260\"],"
			" \"size\": \"512M\"}");

	gw_errlist_init(&e);
	gw_conf_defaults(tbl, &c);
	cr_assert_eq(gw_conf_parse(tbl, &c, in, "", NULL, &e), 0, "%s", gw_errlist_join(&e));
	cr_expect_not(c.enabled);
	cr_expect_eq(c.offset, 10);
	cr_expect_eq(c.burst, 65536);
	cr_expect_eq(c.blocks, 123456789012ull);
	cr_expect_str_eq(c.name, "iqn.2024-01.com.example:t1");
	cr_expect_str_eq(c.secret, "0123456789abc");
	cr_expect_eq(c.digest, DIGEST_NONE);
	cr_assert_eq(c.portals.n, 2);
	cr_expect_str_eq(c.portals.v[1], "[::1]:3260");
	cr_expect(gw_strlist_has(&c.portals, "10.0.0.1:3260"));
	cr_expect_eq(c.size, 512ull << 20);
	json_decref(in);
	gw_errlist_fini(&e);
	gw_conf_free(tbl, &c);
	cr_expect_null(c.name);
}

Test(conf, all_errors_at_once_with_paths)
{
	struct tcfg c = { 0 };
	struct gw_errlist e;
	json_t *in = js("{\"enabled\": 1, \"offset\": 11, \"burst\": 70000, \"blocks\": -1,"
			" \"name\": \"eui.0123456789abcdef\", \"digest\": \"md5\","
			" \"portals\": [1], \"size\": \"lots\", \"colour\": \"red\"}");
	const char *m;
	char *joined;

	gw_errlist_init(&e);
	gw_conf_defaults(tbl, &c);
	cr_assert_eq(gw_conf_parse(tbl, &c, in, "targets[0]", NULL, &e), -EINVAL);
	cr_expect_eq(e.n, 9, "got %zu errors: %s", e.n, gw_errlist_join(&e));

	m = err_for(&e, "targets[0].enabled");
	cr_expect(m && strstr(m, "true or false"), "%s", m);
	m = err_for(&e, "targets[0].offset");
	cr_expect(m && strcmp(m, "11 is out of range -10..10") == 0, "%s", m);
	m = err_for(&e, "targets[0].burst");
	cr_expect(m && strcmp(m, "70000 is out of range 512..65536") == 0, "%s", m);
	m = err_for(&e, "targets[0].blocks");
	cr_expect(m && strstr(m, "-1 is below the minimum 0"), "%s", m);
	m = err_for(&e, "targets[0].name");
	cr_expect(m && strstr(m, "iqn."), "%s", m);
	m = err_for(&e, "targets[0].digest");
	cr_expect(m && strcmp(m, "\"md5\" is not one of: None, CRC32C") == 0, "%s", m);
	m = err_for(&e, "targets[0].portals");
	cr_expect(m && strstr(m, "expected a string"), "%s", m);
	m = err_for(&e, "targets[0].size");
	cr_expect(m && strstr(m, "\"lots\""), "%s", m);
	m = err_for(&e, "targets[0].colour");
	cr_expect(m && strncmp(m, "unknown key (known: enabled, offset, burst,", 43) == 0, "%s", m);

	/* Rejected values leave the defaults in place. */
	cr_expect_eq(c.burst, 8192);
	cr_expect_eq(c.offset, -3);
	cr_expect_eq(c.digest, DIGEST_CRC32C);
	cr_expect_null(c.name);

	joined = gw_errlist_join(&e);
	cr_expect(strstr(joined, "targets[0].burst: 70000 is out of range 512..65536; "), "%s",
		  joined);
	free(joined);
	json_decref(in);
	gw_errlist_fini(&e);
	gw_conf_free(tbl, &c);
}

Test(conf, wrong_types_and_required)
{
	struct tcfg c = { 0 };
	struct gw_errlist e;
	json_t *in = js("{\"burst\": \"big\", \"secret\": \"short\", \"size\": 100}");
	const char *m;

	gw_errlist_init(&e);
	gw_conf_defaults(tbl, &c);
	cr_assert_eq(gw_conf_parse(tbl, &c, in, "", NULL, &e), -EINVAL);
	cr_expect_str_eq(err_for(&e, "burst"), "expected an integer");
	m = err_for(&e, "secret");
	cr_expect(m && strstr(m, "length 5 is out of range 12..16"), "%s", m);
	cr_expect(m && !strstr(m, "short"), "secret echoed in an error: %s", m);
	m = err_for(&e, "size");
	cr_expect(m && strstr(m, "100 is below the minimum 4096"), "%s", m);
	cr_expect_str_eq(err_for(&e, "name"), "is required");
	cr_expect_eq(e.n, 4);
	json_decref(in);
	gw_errlist_fini(&e);
	gw_conf_free(tbl, &c);
}

Test(conf, not_an_object)
{
	struct tcfg c = { 0 };
	struct gw_errlist e;
	json_t *in = js("[1, 2]");

	gw_errlist_init(&e);
	cr_expect_eq(gw_conf_parse(tbl, &c, in, "luns[2]", NULL, &e), -EINVAL);
	cr_assert_eq(e.n, 1);
	cr_expect_str_eq(e.v[0].field, "luns[2]");
	json_decref(in);
	gw_errlist_fini(&e);
}

Test(conf, ignore_list_and_null_resets)
{
	struct tcfg c = { 0 };
	struct gw_errlist e;
	static const char *const ignore[] = { "luns", NULL };
	json_t *in = js("{\"name\": \"iqn.x.y\", \"luns\": [{}], \"burst\": null}");

	gw_errlist_init(&e);
	gw_conf_defaults(tbl, &c);
	c.burst = 1024;
	cr_expect_eq(gw_conf_parse(tbl, &c, in, "", ignore, &e), 0, "%s", gw_errlist_join(&e));
	cr_expect_eq(c.burst, 8192, "null did not restore the default");
	json_decref(in);
	gw_errlist_fini(&e);
	gw_conf_free(tbl, &c);
}

Test(conf, secrets_masked)
{
	struct tcfg c = { 0 };
	json_t *o;
	char *dump;

	gw_conf_defaults(tbl, &c);
	c.name = strdup("iqn.a.b");
	c.secret = strdup("topsecret123");
	o = gw_conf_to_json(tbl, &c, true);
	cr_expect_str_eq(json_string_value(json_object_get(o, "secret")), "****");
	cr_expect_str_eq(json_string_value(json_object_get(o, "name")), "iqn.a.b");
	dump = json_dumps(o, 0);
	cr_expect_null(strstr(dump, "topsecret"));
	free(dump);
	json_decref(o);
	o = gw_conf_to_json(tbl, &c, false);
	cr_expect_str_eq(json_string_value(json_object_get(o, "secret")), "topsecret123");
	json_decref(o);
	gw_conf_free(tbl, &c);
}

Test(conf, round_trip)
{
	struct tcfg a = { 0 }, b = { 0 };
	struct gw_errlist e;
	json_t *ja, *jb;

	gw_errlist_init(&e);
	gw_conf_defaults(tbl, &a);
	a.name = strdup("iqn.2024-01.com.example:rt");
	a.secret = strdup("0123456789abcd");
	a.offset = -7;
	a.blocks = 1ull << 40;
	a.digest = DIGEST_NONE;
	gw_strlist_add(&a.portals, "192.168.1.1:3260");
	a.size = 3ull << 30;
	ja = gw_conf_to_json(tbl, &a, false);
	gw_conf_defaults(tbl, &b);
	cr_assert_eq(gw_conf_parse(tbl, &b, ja, "", NULL, &e), 0, "%s", gw_errlist_join(&e));
	jb = gw_conf_to_json(tbl, &b, false);
	cr_expect(json_equal(ja, jb), "%s != %s", json_dumps(ja, 0), json_dumps(jb, 0));
	cr_expect_eq(b.offset, -7);
	cr_expect_eq(b.blocks, 1ull << 40);
	cr_expect_eq(b.size, 3ull << 30);
	cr_expect_str_eq(b.secret, "0123456789abcd");
	json_decref(ja);
	json_decref(jb);
	gw_errlist_fini(&e);
	gw_conf_free(tbl, &a);
	gw_conf_free(tbl, &b);
}

Test(conf, schema)
{
	json_t *s = gw_conf_schema(tbl), *p, *k;

	cr_assert_not_null(s);
	p = json_object_get(s, "properties");
	k = json_object_get(p, "burst");
	cr_expect_str_eq(json_string_value(json_object_get(k, "type")), "integer");
	cr_expect_eq(json_integer_value(json_object_get(k, "minimum")), 512);
	cr_expect_eq(json_integer_value(json_object_get(k, "maximum")), 65536);
	cr_expect_eq(json_integer_value(json_object_get(k, "default")), 8192);
	cr_expect_str_eq(json_string_value(json_object_get(k, "description")), "MaxBurstLength");
	k = json_object_get(p, "digest");
	cr_expect_eq(json_array_size(json_object_get(k, "enum")), 2);
	cr_expect_str_eq(json_string_value(json_object_get(k, "default")), "CRC32C");
	k = json_object_get(p, "name");
	cr_expect_eq(json_integer_value(json_object_get(k, "maxLength")), 223);
	k = json_object_get(p, "secret");
	cr_expect_null(json_object_get(k, "default"));
	cr_expect(json_is_true(json_object_get(k, "writeOnly")));
	k = json_object_get(p, "size");
	cr_expect_eq(json_integer_value(json_object_get(k, "default")), 1ll << 30);
	cr_expect_eq(json_integer_value(json_object_get(k, "minimum")), 4096);
	cr_expect_null(json_object_get(k, "maximum"));
	cr_expect_eq(json_array_size(json_object_get(s, "required")), 1);
	cr_expect_str_eq(json_string_value(json_array_get(json_object_get(s, "required"), 0)),
			 "name");
	json_decref(s);
}

Test(conf, set_text)
{
	struct tcfg c = { 0 };
	struct gw_errlist e;

	gw_errlist_init(&e);
	gw_conf_defaults(tbl, &c);
	cr_expect_eq(gw_conf_set_text(tbl, &c, "burst", "16384", &e), 0);
	cr_expect_eq(c.burst, 16384);
	cr_expect_eq(gw_conf_set_text(tbl, &c, "enabled", "No", &e), 0);
	cr_expect_not(c.enabled);
	cr_expect_eq(gw_conf_set_text(tbl, &c, "size", "2T", &e), 0);
	cr_expect_eq(c.size, 2ull << 40);
	cr_expect_eq(gw_conf_set_text(tbl, &c, "portals", "a:1,b:2", &e), 0);
	cr_expect_eq(c.portals.n, 2);
	cr_expect_eq(gw_conf_set_text(tbl, &c, "burst", "100", &e), -EINVAL);
	cr_expect_eq(c.burst, 16384);
	cr_expect_eq(gw_conf_set_text(tbl, &c, "burst", "12abc", NULL), -EINVAL);
	cr_expect_eq(gw_conf_set_text(tbl, &c, "nope", "1", &e), -ENOENT);
	cr_expect_eq(e.n, 2);
	gw_errlist_fini(&e);
	gw_conf_free(tbl, &c);
}

Test(conf, parse_size)
{
	uint64_t v;

	cr_expect_eq(gw_parse_size("4096", &v), 0);
	cr_expect_eq(v, 4096);
	cr_expect_eq(gw_parse_size("512K", &v), 0);
	cr_expect_eq(v, 512 * 1024);
	cr_expect_eq(gw_parse_size("64M", &v), 0);
	cr_expect_eq(v, 64ull << 20);
	cr_expect_eq(gw_parse_size("10g", &v), 0);
	cr_expect_eq(v, 10ull << 30);
	cr_expect_eq(gw_parse_size("1GiB", &v), 0);
	cr_expect_eq(v, 1ull << 30);
	cr_expect_eq(gw_parse_size("2T", &v), 0);
	cr_expect_eq(v, 2ull << 40);
	cr_expect_eq(gw_parse_size("", &v), -EINVAL);
	cr_expect_eq(gw_parse_size("-1G", &v), -EINVAL);
	cr_expect_eq(gw_parse_size("1X", &v), -EINVAL);
	cr_expect_eq(gw_parse_size("G", &v), -EINVAL);
	cr_expect_eq(gw_parse_size("99999999999T", &v), -EINVAL);
}

Test(conf, bad_default_is_reported)
{
	static const struct gw_conf_key bad[] = {
		{ .name = "n", .type = GW_CONF_U32, .offset = 0, .min = 1, .max = 5, .def = "9" },
		GW_CONF_END,
	};
	uint32_t v = 0;

	cr_expect_eq(gw_conf_defaults(bad, &v), -EINVAL);
}
