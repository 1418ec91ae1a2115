// SPDX-License-Identifier: MIT
/*
 * The remote backstore's keys: one table for the policies (named and defaulted as
 * multipath.conf users know them, see docs/FAILOVER.md for the gateway's choices), one per path
 * and one for a path's CHAP, and the walk over the "paths" array.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "gw_list.h"
#include "gw_log.h"

static const struct gw_conf_enum mp_engine_enums[] = {
	{ "libiscsi", MP_ENGINE_LIBISCSI },
	{ "native", MP_ENGINE_NATIVE },
	{ NULL, 0 },
};

static const struct gw_conf_enum mp_pg_enums[] = {
	{ "failover", MP_PG_FAILOVER },
	{ "multibus", MP_PG_MULTIBUS },
	{ "group_by_prio", MP_PG_GROUP_BY_PRIO },
	{ NULL, 0 },
};

/* multipath.conf spells selectors with their argument count ("service-time 0"): take both. */
static const struct gw_conf_enum mp_sel_enums[] = {
	{ "round-robin", MP_SEL_ROUND_ROBIN },
	{ "queue-length", MP_SEL_QUEUE_LENGTH },
	{ "service-time", MP_SEL_SERVICE_TIME },
	{ "round-robin 0", MP_SEL_ROUND_ROBIN },
	{ "queue-length 0", MP_SEL_QUEUE_LENGTH },
	{ "service-time 0", MP_SEL_SERVICE_TIME },
	{ NULL, 0 },
};

static int mp_parse_count(const char *s, int32_t *out)
{
	char *end;
	long v;

	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < 1 || v > 86400)
		return -EINVAL;
	*out = (int32_t)v;
	return 0;
}

int conf_mp_parse_failback(const char *s, int32_t *out)
{
	if (s && strcmp(s, "immediate") == 0) {
		*out = MP_FAILBACK_IMMEDIATE;
		return 0;
	}
	if (s && strcmp(s, "manual") == 0) {
		*out = MP_FAILBACK_MANUAL;
		return 0;
	}
	return mp_parse_count(s, out);
}

int conf_mp_parse_no_path_retry(const char *s, int32_t *out)
{
	if (s && strcmp(s, "fail") == 0) {
		*out = MP_NO_PATH_RETRY_FAIL;
		return 0;
	}
	if (s && strcmp(s, "queue") == 0) {
		*out = MP_NO_PATH_RETRY_QUEUE;
		return 0;
	}
	return mp_parse_count(s, out);
}

static const char *mp_check_failback(const void *field)
{
	int32_t v;

	if (conf_mp_parse_failback(*(char *const *)field, &v) < 0)
		return "must be \"immediate\", \"manual\" or a number of seconds 1..86400";
	return NULL;
}

static const char *mp_check_no_path_retry(const void *field)
{
	int32_t v;

	if (conf_mp_parse_no_path_retry(*(char *const *)field, &v) < 0)
		return "must be \"fail\", \"queue\" or a number of polling intervals 1..86400";
	return NULL;
}

static const char *mp_check_url(const void *field)
{
	const char *s = *(char *const *)field;
	const char *p;

	if (!s || (strncmp(s, "iscsi://", 8) != 0 && strncmp(s, "iser://", 7) != 0))
		return "must be iscsi://HOST[:PORT]/TARGET-IQN/LUN (or iser://)";
	p = strchr(s + 7, '/');
	if (!p || !strchr(p + 1, '/'))
		return "must be iscsi://HOST[:PORT]/TARGET-IQN/LUN (or iser://)";
	return NULL;
}

#define MPK(field) offsetof(struct mp_conf, field)

const struct gw_conf_key conf_mp_keys[] = {
	{ .name = "path_grouping_policy", .type = GW_CONF_ENUM, .offset = MPK(pg_policy),
	  .enums = mp_pg_enums, .def = "group_by_prio",
	  .help = "failover (one path at a time, in order), multibus (all paths), group_by_prio "
		  "(groups by ALUA priority: active/optimized 50, non-optimized 10, others 1)" },
	{ .name = "path_selector", .type = GW_CONF_ENUM, .offset = MPK(selector),
	  .enums = mp_sel_enums, .def = "service-time",
	  .help = "path within the group: round-robin, queue-length or service-time" },
	{ .name = "engine", .type = GW_CONF_ENUM, .offset = MPK(engine),
	  .enums = mp_engine_enums, .def = "native",
	  .help = "the iSCSI initiator of the TCP paths: libiscsi, or native (the gateway's own, "
		  "fewer system calls per I/O; iser:// paths always use libiscsi)" },
	{ .name = "rr_min_io_rq", .type = GW_CONF_U32, .offset = MPK(rr_min_io_rq),
	  .min = 1, .max = 1000, .def = "1",
	  .help = "round-robin: I/Os sent down a path before moving to the next" },
	{ .name = "polling_interval", .type = GW_CONF_U32, .offset = MPK(polling_interval),
	  .min = 1, .max = 3600, .def = "5",
	  .help = "seconds between path checks (TEST UNIT READY); no_path_retry counts these" },
	{ .name = "checker_timeout", .type = GW_CONF_U32, .offset = MPK(checker_timeout),
	  .min = 1, .max = 300, .def = "5",
	  .help = "seconds a path check may take before the path is failed" },
	{ .name = "failback", .type = GW_CONF_STR, .offset = MPK(failback), .min = 1, .max = 16,
	  .def = "immediate", .check = mp_check_failback,
	  .help = "back to a better path group: immediate, manual, or after N seconds up" },
	{ .name = "no_path_retry", .type = GW_CONF_STR, .offset = MPK(no_path_retry), .min = 1,
	  .max = 16, .def = "4", .check = mp_check_no_path_retry,
	  .help = "no path left: fail I/O at once, queue it forever, or queue it for N polling "
		  "intervals (default 4: 20 s, under a host's 30 s SCSI command timeout)" },
	{ .name = "initiator", .type = GW_CONF_STR, .offset = MPK(initiator), .min = 1,
	  .max = 223, .def = "iqn.2026-11.org.isergw:gateway",
	  .help = "initiator name the gateway logs in to the back end with" },
	{ .name = "wwid", .type = GW_CONF_STR, .offset = MPK(wwid), .min = 0, .max = 79,
	  .help = "expected device identity (\"naa.6...\", from VPD page 0x83); empty: the first "
		  "path to log in defines it" },
	{ .name = "login_timeout", .type = GW_CONF_U32, .offset = MPK(login_timeout),
	  .min = 1, .max = 300, .def = "5",
	  .help = "seconds for TCP connect, iSCSI login and the identity probe of one attempt" },
	{ .name = "initial_login_retry_max", .type = GW_CONF_U32,
	  .offset = MPK(initial_login_retry_max), .min = 1, .max = 100, .def = "1",
	  .help = "logins per path start-up waits for (never longer than gateway.boot_wait); "
		  "reconnects go on in the background" },
	{ .name = "io_timeout", .type = GW_CONF_U32, .offset = MPK(io_timeout),
	  .min = 1, .max = 3600, .def = "30",
	  .help = "seconds one I/O may be outstanding on a path before the path is failed" },
	{ .name = "io_stall_ms", .type = GW_CONF_U32, .offset = MPK(io_stall_ms),
	  .min = 50, .max = 600000, .def = "1000",
	  .help = "a path with I/O outstanding and no reply for this long is probed (NOP-Out)" },
	{ .name = "nop_timeout_ms", .type = GW_CONF_U32, .offset = MPK(nop_timeout_ms),
	  .min = 50, .max = 600000, .def = "1000",
	  .help = "the probe unanswered for this long fails the path (a silent path)" },
	{ .name = "reconnect_delay_ms", .type = GW_CONF_U32, .offset = MPK(reconnect_delay_ms),
	  .min = 10, .max = 600000, .def = "500",
	  .help = "first reconnect backoff; doubles per failed login, with jitter" },
	{ .name = "reconnect_max_ms", .type = GW_CONF_U32, .offset = MPK(reconnect_max_ms),
	  .min = 10, .max = 3600000, .def = "30000", .help = "reconnect backoff cap" },
	{ .name = "drain_timeout_ms", .type = GW_CONF_U32, .offset = MPK(drain_timeout_ms),
	  .min = 0, .max = 600000, .def = "3000",
	  .help = "at shutdown, in-flight I/O gets this long before it is failed" },
	GW_CONF_END,
};

const struct gw_conf_key conf_mp_chap_keys[] = {
	{ .name = "user", .type = GW_CONF_STR, .offset = offsetof(struct mp_chap_conf, user),
	  .min = 0, .max = 255,
	  .help = "CHAP user the back end knows the gateway by; empty: none" },
	{ .name = "secret", .type = GW_CONF_STR, .offset = offsetof(struct mp_chap_conf, secret),
	  .min = 0, .max = 256, .flags = GW_CONF_SECRET, .help = "CHAP secret" },
	{ .name = "mutual_user", .type = GW_CONF_STR,
	  .offset = offsetof(struct mp_chap_conf, mutual_user), .min = 0, .max = 255,
	  .help = "mutual CHAP: the back end's user; empty: one-way" },
	{ .name = "mutual_secret", .type = GW_CONF_STR,
	  .offset = offsetof(struct mp_chap_conf, mutual_secret), .min = 0, .max = 256,
	  .flags = GW_CONF_SECRET, .help = "mutual CHAP secret" },
	GW_CONF_END,
};

const struct gw_conf_key conf_mp_path_keys[] = {
	{ .name = "url", .type = GW_CONF_STR, .offset = offsetof(struct mp_path_conf, url),
	  .min = 1, .max = 1024, .flags = GW_CONF_REQUIRED, .check = mp_check_url,
	  .help = "iscsi://HOST[:PORT]/TARGET-IQN/LUN; iser:// needs RDMA hardware" },
	{ .name = "initiator", .type = GW_CONF_STR,
	  .offset = offsetof(struct mp_path_conf, initiator), .min = 0, .max = 223,
	  .help = "initiator name for this path; empty: the backstore's" },
	GW_CONF_END,
};

int conf_mp_defaults(struct mp_conf *c)
{
	memset(c, 0, sizeof(*c));
	return gw_conf_defaults(conf_mp_keys, c);
}

static void mp_path_conf_free(struct mp_path_conf *p)
{
	gw_conf_free(conf_mp_chap_keys, &p->chap);
	gw_conf_free(conf_mp_path_keys, p);
}

void conf_mp_free(struct mp_conf *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->npaths; i++)
		mp_path_conf_free(&c->paths[i]);
	free(c->paths);
	c->paths = NULL;
	c->npaths = 0;
	gw_conf_free(conf_mp_keys, c);
}

static void mp_chap_check(const struct mp_chap_conf *ch, const char *field,
			  struct gw_errlist *errs)
{
	if (ch->user && ch->user[0] && (!ch->secret || strlen(ch->secret) < 12))
		gw_errlist_add(errs, field, "secret: 12 to 256 bytes required with a user");
	if (ch->mutual_user && ch->mutual_user[0]) {
		if (!ch->user || !ch->user[0])
			gw_errlist_add(errs, field, "mutual_user needs user (one-way CHAP first)");
		if (!ch->mutual_secret || strlen(ch->mutual_secret) < 12)
			gw_errlist_add(errs, field,
				       "mutual_secret: 12 to 256 bytes required with mutual_user");
	}
}

static void mp_parse_path(struct mp_path_conf *pc, const json_t *e, const char *field,
			  struct gw_errlist *errs)
{
	static const char *const ign[] = { "chap", NULL };
	const json_t *chap;
	char f[640];

	if (gw_conf_defaults(conf_mp_path_keys, pc) || gw_conf_defaults(conf_mp_chap_keys,
									  &pc->chap)) {
		gw_errlist_add(errs, field, "out of memory");
		return;
	}
	if (!json_is_object(e)) {
		gw_errlist_add(errs, field, "expected an object with \"url\"");
		return;
	}
	gw_conf_parse(conf_mp_path_keys, pc, e, field, ign, errs);
	chap = json_object_get(e, "chap");
	snprintf(f, sizeof(f), "%s.chap", field);
	if (chap && !json_is_null(chap)) {
		if (!json_is_object(chap)) {
			gw_errlist_add(errs, f, "expected an object");
			return;
		}
		gw_conf_parse(conf_mp_chap_keys, &pc->chap, chap, f, NULL, errs);
		mp_chap_check(&pc->chap, f, errs);
	}
}

int conf_mp_parse(struct mp_conf *c, const json_t *in, const char *path,
		  const char *const *ignore, struct gw_errlist *errs)
{
	const char *ign[64];
	size_t nign = 0, before = errs->n;
	const json_t *paths;
	json_t *copy;
	char f[512];
	int rc;

	rc = conf_mp_defaults(c);
	if (rc < 0) {
		gw_errlist_add(errs, path, "out of memory");
		return rc;
	}
	for (; ignore && *ignore && nign < GW_ARRAY_SIZE(ign) - 2; ignore++)
		ign[nign++] = *ignore;
	ign[nign++] = "paths";
	ign[nign] = NULL;

	/* failback and no_path_retry take a word or a number, as in multipath.conf: numbers
	 * are parsed as their text so one string key validates both. */
	copy = json_deep_copy(in);
	if (!copy) {
		gw_errlist_add(errs, path, "out of memory");
		return -ENOMEM;
	}
	for (int k = 0; k < 2; k++) {
		const char *key = k ? "no_path_retry" : "failback";
		json_t *v = json_object_get(copy, key);

		if (json_is_integer(v)) {
			char num[32];

			snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v));
			json_object_set_new(copy, key, json_string(num));
		}
	}
	gw_conf_parse(conf_mp_keys, c, copy, path, ign, errs);
	json_decref(copy);

	paths = json_object_get(in, "paths");
	snprintf(f, sizeof(f), "%s%spaths", path, path && *path ? "." : "");
	if (!json_is_array(paths) || json_array_size(paths) == 0) {
		gw_errlist_add(errs, f, "required for a remote backstore: an array of 1 to 32 "
			       "{ \"url\": \"iscsi://HOST[:PORT]/TARGET-IQN/LUN\" }");
	} else if (json_array_size(paths) > 32) {
		gw_errlist_add(errs, f, "at most 32 paths, not %zu", json_array_size(paths));
	} else {
		size_t n = json_array_size(paths);

		c->paths = calloc(n, sizeof(*c->paths));
		if (!c->paths) {
			gw_errlist_add(errs, f, "out of memory");
			return -ENOMEM;
		}
		c->npaths = n;
		for (size_t i = 0; i < n; i++) {
			char pf[560];

			snprintf(pf, sizeof(pf), "%s[%zu]", f, i);
			mp_parse_path(&c->paths[i], json_array_get(paths, i), pf, errs);
			for (size_t j = 0; j < i; j++)
				if (c->paths[i].url && c->paths[j].url &&
				    strcmp(c->paths[i].url, c->paths[j].url) == 0)
					gw_errlist_add(errs, pf, "url: same as paths[%zu]", j);
		}
	}
	if (c->reconnect_max_ms < c->reconnect_delay_ms) {
		snprintf(f, sizeof(f), "%s%sreconnect_max_ms", path, path && *path ? "." : "");
		gw_errlist_add(errs, f, "must be at least reconnect_delay_ms (%u)",
			       c->reconnect_delay_ms);
	}
	return errs->n == before ? 0 : -EINVAL;
}

static int mp_strdup_into(char **dst, const char *src)
{
	*dst = src ? strdup(src) : NULL;
	return src && !*dst ? -ENOMEM : 0;
}

int conf_mp_copy(struct mp_conf *dst, const struct mp_conf *src)
{
	int rc = 0;

	*dst = *src;
	dst->paths = NULL;
	dst->npaths = 0;
	rc |= mp_strdup_into(&dst->failback, src->failback);
	rc |= mp_strdup_into(&dst->no_path_retry, src->no_path_retry);
	rc |= mp_strdup_into(&dst->initiator, src->initiator);
	rc |= mp_strdup_into(&dst->wwid, src->wwid);
	if (src->npaths) {
		dst->paths = calloc(src->npaths, sizeof(*dst->paths));
		if (!dst->paths) {
			rc = -ENOMEM;
		} else {
			dst->npaths = src->npaths;
			for (size_t i = 0; i < src->npaths; i++) {
				const struct mp_path_conf *s = &src->paths[i];
				struct mp_path_conf *d = &dst->paths[i];

				rc |= mp_strdup_into(&d->url, s->url);
				rc |= mp_strdup_into(&d->initiator, s->initiator);
				rc |= mp_strdup_into(&d->chap.user, s->chap.user);
				rc |= mp_strdup_into(&d->chap.secret, s->chap.secret);
				rc |= mp_strdup_into(&d->chap.mutual_user, s->chap.mutual_user);
				rc |= mp_strdup_into(&d->chap.mutual_secret, s->chap.mutual_secret);
			}
		}
	}
	if (rc) {
		conf_mp_free(dst);
		return -ENOMEM;
	}
	return 0;
}

json_t *conf_mp_to_json(const struct mp_conf *c, bool mask_secrets)
{
	json_t *o = gw_conf_to_json(conf_mp_keys, c, mask_secrets);
	json_t *a = json_array();

	if (!o || !a) {
		json_decref(o);
		json_decref(a);
		return NULL;
	}
	for (size_t i = 0; i < c->npaths; i++) {
		json_t *p = gw_conf_to_json(conf_mp_path_keys, &c->paths[i], mask_secrets);

		if (p)
			json_object_set_new(p, "chap", gw_conf_to_json(conf_mp_chap_keys,
								       &c->paths[i].chap,
								       mask_secrets));
		json_array_append_new(a, p);
	}
	json_object_set_new(o, "paths", a);
	return o;
}
