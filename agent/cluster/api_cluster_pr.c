// SPDX-License-Identifier: MIT
/*
 * Persistent reservations shared by the cluster (docs/CLUSTER.md, "Persistent reservations
 * across gateways"): the state of one LU's reservations as it will live in etcd, its checks,
 * and the compare-and-swap that commits a PERSISTENT RESERVE OUT. Pure functions only: nothing
 * here is wired into the data path yet (the gateways keep their own reservations until the
 * whole design below is in).
 *
 * PREFIX/pr/TARGET/LUN = {"generation": N, "aptpl": bool,
 *                         "registrations": [{"initiator", "rel_id", "key"}],
 *                         "reservation": null | {"initiator", "rel_id", "type"}}
 * An I_T nexus is (initiator port name with its ISID, relative target port id); the relative
 * port id is the gateway's port group, unique in the cluster, so a nexus through gateway A
 * differs from one through gateway B as SPC requires. Keys travel as "0x" + 16 hex digits
 * (JSON numbers lose 64-bit precision in many readers).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_cluster.h"
#include "api_etcd.h"

char *api_pr_key(const char *prefix, const char *target, uint64_t lun)
{
	char *k = NULL;

	if (asprintf(&k, "%s/pr/%s/%" PRIu64, prefix, target, lun) < 0)
		return NULL;
	return k;
}

static bool pr_key_ok(const json_t *v)
{
	const char *s = json_string_value(v);
	size_t i;

	if (!s || strlen(s) != 18 || s[0] != '0' || s[1] != 'x')
		return false;
	for (i = 2; i < 18; i++)
		if (!strchr("0123456789abcdef", s[i]))
			return false;
	return true;
}

static bool pr_nexus_ok(const json_t *o)
{
	const char *ini = json_string_value(json_object_get(o, "initiator"));
	json_int_t rel = json_integer_value(json_object_get(o, "rel_id"));

	return ini && *ini && strlen(ini) <= 255 && json_is_integer(json_object_get(o, "rel_id")) &&
	       rel >= 1 && rel <= 65535;
}

static bool pr_same_nexus(const json_t *a, const json_t *b)
{
	return !strcmp(json_string_value(json_object_get(a, "initiator")),
		       json_string_value(json_object_get(b, "initiator"))) &&
	       json_integer_value(json_object_get(a, "rel_id")) ==
	       json_integer_value(json_object_get(b, "rel_id"));
}

int api_pr_state_check(const json_t *st, const char **why)
{
	const json_t *regs = json_object_get(st, "registrations"), *res, *r, *q;
	json_int_t gen = json_integer_value(json_object_get(st, "generation")), type;
	size_t i, j;
	bool held = false;

	*why = NULL;
	if (!json_is_object(st) || !json_is_integer(json_object_get(st, "generation")) ||
	    gen < 0 || gen > 0xffffffffll)
		*why = "generation: an integer 0..4294967295";
	else if (!json_is_boolean(json_object_get(st, "aptpl")))
		*why = "aptpl: true or false";
	else if (!json_is_array(regs))
		*why = "registrations: an array";
	if (*why)
		return -EINVAL;
	json_array_foreach(regs, i, r) {
		if (!pr_nexus_ok(r) || !pr_key_ok(json_object_get(r, "key"))) {
			*why = "registrations[]: {\"initiator\", \"rel_id\" 1..65535, \"key\" 0x + 16 "
			       "hex digits}";
			return -EINVAL;
		}
		for (j = 0; j < i; j++) {
			q = json_array_get(regs, j);
			if (pr_same_nexus(q, r)) {
				*why = "registrations[]: one registration per I_T nexus";
				return -EINVAL;
			}
		}
	}
	res = json_object_get(st, "reservation");
	if (!res || json_is_null(res))
		return 0;
	type = json_integer_value(json_object_get(res, "type"));
	if (!pr_nexus_ok(res) || !(type == 1 || type == 3 || (type >= 5 && type <= 8))) {
		*why = "reservation: null or {\"initiator\", \"rel_id\", \"type\" 1, 3, 5, 6, 7 or 8}";
		return -EINVAL;
	}
	json_array_foreach(regs, i, r)
		held |= pr_same_nexus(r, res);
	if (!held) {
		*why = "reservation: its holder must be registered";
		return -EINVAL;
	}
	return 0;
}

json_t *api_pr_cas_txn(const char *key, const json_t *st, int64_t mod_rev)
{
	char *kb = api_b64_encode(key, strlen(key)), *text, rev[24];
	json_t *cmp, *txn = NULL;

	text = json_dumps(st, JSON_COMPACT | JSON_SORT_KEYS);
	if (!kb || !text)
		goto out;
	snprintf(rev, sizeof(rev), "%lld", (long long)mod_rev);
	/* mod_rev 0: the LU never had reservations in etcd; the key must still be absent. */
	cmp = mod_rev ? json_pack("{s:s, s:s, s:s, s:s}", "key", kb, "target", "MOD", "result",
				  "EQUAL", "mod_revision", rev) :
			json_pack("{s:s, s:s, s:s, s:s}", "key", kb, "target", "CREATE", "result",
				  "EQUAL", "create_revision", "0");
	txn = json_pack("{s:[o], s:[{s:o}], s:[{s:o}]}", "compare", cmp, "success",
			"request_put", api_etcd_put_req(key, text, 0), "failure", "request_range",
			api_etcd_range_req(key, false));
out:
	free(kb);
	free(text);
	return txn;
}
