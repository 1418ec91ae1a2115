// SPDX-License-Identifier: MIT
/* The pure parts of the cluster: etcd JSON encoding and decoding, LU ownership, and the
 * configuration a member's gateway runs. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_cluster.h"
#include "api_etcd.h"
#include "gw_log.h"

static void setup(void)
{
	gw_log_set_level(GW_LOG_WARN - 1);
}

TestSuite(api_cluster, .init = setup);

Test(api_cluster, base64_round_trips_rfc4648_vectors)
{
	static const char *const plain[] = { "", "f", "fo", "foo", "foob", "fooba", "foobar" };
	static const char *const enc[] = { "", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=",
					   "Zm9vYmFy" };

	for (size_t i = 0; i < 7; i++) {
		char *e = api_b64_encode(plain[i], strlen(plain[i])), *d;
		size_t n;

		cr_assert_str_eq(e, enc[i]);
		d = api_b64_decode(e, &n);
		cr_assert_not_null(d);
		cr_assert_eq(n, strlen(plain[i]));
		cr_assert_str_eq(d, plain[i]);
		free(e);
		free(d);
	}
}

Test(api_cluster, base64_binary_and_bad_input)
{
	unsigned char bin[256];
	size_t n;
	char *e, *d;

	for (int i = 0; i < 256; i++)
		bin[i] = (unsigned char)i;
	e = api_b64_encode(bin, sizeof(bin));
	d = api_b64_decode(e, &n);
	cr_assert_eq(n, sizeof(bin));
	cr_assert_eq(memcmp(d, bin, n), 0);
	free(e);
	free(d);
	cr_assert_null(api_b64_decode("Zm9v!", &n), "a character outside the alphabet");
	d = api_b64_decode("Zm8", &n);	/* padding left out, as some encoders do */
	cr_assert_str_eq(d, "fo");
	free(d);
}

Test(api_cluster, range_and_put_requests)
{
	json_t *r = api_etcd_range_req("/isergw/c1/members/", true);
	char *end = api_etcd_prefix_end("/isergw/c1/members/"), *k;
	size_t n;

	cr_assert_str_eq(end, "/isergw/c1/members0", "'/' + 1 is '0'");
	cr_assert_str_eq(json_string_value(json_object_get(r, "key")),
			 "L2lzZXJndy9jMS9tZW1iZXJzLw==");
	k = api_b64_decode(json_string_value(json_object_get(r, "range_end")), &n);
	cr_assert_str_eq(k, end);
	free(k);
	free(end);
	json_decref(r);
	r = api_etcd_range_req("/a/config", false);
	cr_assert_null(json_object_get(r, "range_end"));
	json_decref(r);

	r = api_etcd_put_req("/k", "{\"x\":1}", 7587869120203466771ll);
	cr_assert_str_eq(json_string_value(json_object_get(r, "lease")), "7587869120203466771",
			 "64-bit numbers travel as strings");
	k = api_b64_decode(json_string_value(json_object_get(r, "value")), &n);
	cr_assert_str_eq(k, "{\"x\":1}");
	free(k);
	json_decref(r);
	r = api_etcd_put_req("/k", "v", 0);
	cr_assert_null(json_object_get(r, "lease"), "no lease: none sent");
	json_decref(r);
}

Test(api_cluster, decodes_a_range_answer)
{
	/* What etcd 3.4's gateway answers (an empty value is left out). */
	json_t *resp = json_loads(
		"{\"header\":{\"revision\":\"12\"},\"kvs\":["
		"{\"key\":\"L3gvYQ==\",\"create_revision\":\"3\",\"mod_revision\":\"9\","
		"\"version\":\"2\",\"value\":\"aGVsbG8=\"},"
		"{\"key\":\"L3gvYg==\",\"mod_revision\":\"11\"}],\"count\":\"2\"}", 0, NULL);
	char *k, *v;
	int64_t rev;

	cr_assert_not_null(resp);
	cr_assert_eq(api_etcd_int(json_object_get(resp, "header"), "revision", 0), 12);
	cr_assert_eq(api_etcd_kv(resp, 0, &k, &v, &rev), 0);
	cr_assert_str_eq(k, "/x/a");
	cr_assert_str_eq(v, "hello");
	cr_assert_eq(rev, 9);
	free(k);
	free(v);
	cr_assert_eq(api_etcd_kv(resp, 1, &k, &v, &rev), 0);
	cr_assert_str_eq(k, "/x/b");
	cr_assert_str_eq(v, "");
	cr_assert_eq(rev, 11);
	free(k);
	free(v);
	cr_assert_eq(api_etcd_kv(resp, 2, &k, &v, &rev), -ENOENT);
	json_decref(resp);
}

Test(api_cluster, ownership_is_deterministic_and_moves_only_from_the_dead)
{
	const char *const three[] = { "gw-a", "gw-b", "gw-c" };
	const char *const rev[] = { "gw-c", "gw-b", "gw-a" };
	unsigned int count[3] = { 0 }, moved = 0;
	char t[64];

	for (uint64_t lun = 0; lun < 300; lun++) {
		const char *o3, *o2;

		snprintf(t, sizeof(t), "iqn.2026-11.org.isergw:t%llu", (unsigned long long)lun % 7);
		o3 = api_cluster_owner(t, lun, "", three, 3);
		cr_assert_str_eq(o3, api_cluster_owner(t, lun, NULL, rev, 3),
				 "the order members are listed in does not matter");
		for (int i = 0; i < 3; i++)
			count[i] += !strcmp(o3, three[i]);
		/* gw-c dies: only its LUs move. */
		o2 = api_cluster_owner(t, lun, "", three, 2);
		if (strcmp(o3, "gw-c"))
			cr_assert_str_eq(o2, o3, "LUN %llu moved off a live owner",
					 (unsigned long long)lun);
		else
			moved++;
		cr_assert_neq(strcmp(o2, "gw-c"), 0);
	}
	for (int i = 0; i < 3; i++)
		cr_assert_gt(count[i], 60, "%s owns %u of 300: unbalanced", three[i], count[i]);
	cr_assert_eq(moved, count[2]);
	/* A live preferred owner wins; a dead one is ignored. */
	cr_assert_str_eq(api_cluster_owner("t", 0, "gw-b", three, 3), "gw-b");
	cr_assert_str_eq(api_cluster_owner("t", 0, "gw-z", three, 1), "gw-a");
	cr_assert_null(api_cluster_owner("t", 0, "gw-a", three, 0));
}

Test(api_cluster, effective_configuration)
{
	json_t *desired = json_loads(
		"{\"portals\":[{\"name\":\"tcp0\",\"port\":3260}],\"discovery\":{\"auth\":\"none\"},"
		"\"targets\":[{\"name\":\"iqn.2026-11.org.isergw:t\",\"tpgt\":1,\"portals\":[\"tcp0\"],"
		"\"luns\":[{\"lun\":0,\"owner\":\"gw-b\",\"backstore\":{\"type\":\"ram\"}},"
		"{\"lun\":1,\"backstore\":{\"type\":\"ram\"}}]}]}", 0, NULL);
	json_t *groups = json_pack("{s:i, s:i, s:i}", "gw-a", 1, "gw-b", 2, "gw-c", 3);
	json_t *live = json_pack("{s:b, s:b}", "gw-a", 1, "gw-c", 1);
	json_t *local = json_pack("[{s:s, s:i}]", "name", "tcp0", "port", 20001);
	json_t *eff, *g, *l0, *l1;
	const char *live_ids[] = { "gw-a", "gw-c" };

	eff = api_cluster_effective(desired, groups, live, 1, local);
	cr_assert_not_null(eff);
	cr_assert_eq(json_integer_value(json_object_get(json_array_get(json_object_get(eff,
		"portals"), 0), "port")), 20001, "the gateway keeps its own portals");
	g = json_object_get(json_object_get(eff, "cluster"), "groups");
	cr_assert_eq(json_array_size(g), 3);
	cr_assert_eq(json_integer_value(json_object_get(json_array_get(g, 1), "id")), 2,
		     "groups sorted by id");
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(g, 1), "state")),
			 "unavailable", "a registered member without a lease");
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(g, 0), "state")),
			 "active/optimized");
	l0 = json_array_get(json_object_get(json_array_get(json_object_get(eff, "targets"), 0),
					    "luns"), 0);
	l1 = json_array_get(json_object_get(json_array_get(json_object_get(eff, "targets"), 0),
					    "luns"), 1);
	cr_assert_eq(json_integer_value(json_object_get(json_array_get(json_object_get(eff,
		"targets"), 0), "tpgt")), 1, "the target's port is this member's group");
	/* gw-b is preferred but dead: LUN 0 goes to a live member, as the hash says. */
	cr_assert_str_eq(json_string_value(json_object_get(l0, "owner")),
			 api_cluster_owner("iqn.2026-11.org.isergw:t", 0, "gw-b", live_ids, 2));
	cr_assert_neq(json_integer_value(json_object_get(l0, "alua_group")), 2);
	cr_assert_eq(json_integer_value(json_object_get(l1, "alua_group")),
		     !strcmp(json_string_value(json_object_get(l1, "owner")), "gw-a") ? 1 : 3);
	/* The desired configuration itself is untouched. */
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(
		json_array_get(json_object_get(desired, "targets"), 0), "luns"), 0), "owner")),
		"gw-b");
	json_decref(eff);

	/* gw-b back: it owns LUN 0 again. */
	json_object_set_new(live, "gw-b", json_true());
	eff = api_cluster_effective(desired, groups, live, 1, NULL);
	l0 = json_array_get(json_object_get(json_array_get(json_object_get(eff, "targets"), 0),
					    "luns"), 0);
	cr_assert_eq(json_integer_value(json_object_get(l0, "alua_group")), 2);
	cr_assert_eq(json_integer_value(json_object_get(json_array_get(json_object_get(eff,
		"portals"), 0), "port")), 3260, "no local portals known: the desired ones");
	json_decref(eff);
	json_decref(desired);
	json_decref(groups);
	json_decref(live);
	json_decref(local);
}

static const json_t *lun_of(const json_t *eff, size_t i)
{
	return json_array_get(json_object_get(json_array_get(json_object_get(eff, "targets"), 0),
					      "luns"), i);
}

Test(api_cluster, a_lun_becoming_ours_waits_its_hold_before_it_is_optimized)
{
	json_t *eff = json_loads("{\"targets\":[{\"name\":\"t\",\"luns\":["
				 "{\"lun\":0,\"owner\":\"gw-a\"},{\"lun\":1,\"owner\":\"gw-b\"}]}]}",
				 0, NULL);
	json_t *owned = json_object(), *held = json_object();

	/* First seen at 1000 ms: held until 1000 + 4000, pending meanwhile. */
	cr_assert(!api_cluster_holds_update(eff, "gw-a", owned, held, 1000, 4000));
	cr_assert_eq(json_integer_value(json_object_get(held, "t\n0")), 5000);
	cr_assert_null(json_object_get(held, "t\n1"), "not ours");
	api_cluster_mark_pending(eff, "gw-a", owned);
	cr_assert(json_is_true(json_object_get(lun_of(eff, 0), "alua_pending")));
	cr_assert_null(json_object_get(lun_of(eff, 1), "alua_pending"));
	cr_assert(!api_cluster_holds_update(eff, "gw-a", owned, held, 4999, 4000), "still held");
	cr_assert(api_cluster_holds_update(eff, "gw-a", owned, held, 5000, 4000), "hold over");
	cr_assert(json_is_true(json_object_get(owned, "t\n0")));
	cr_assert_eq(json_object_size(held), 0);
	api_cluster_mark_pending(eff, "gw-a", owned);
	cr_assert_null(json_object_get(lun_of(eff, 0), "alua_pending"));
	/* It moves away: forgotten; back again: a new hold. */
	json_object_set_new((json_t *)lun_of(eff, 0), "owner", json_string("gw-b"));
	cr_assert(api_cluster_holds_update(eff, "gw-a", owned, held, 6000, 4000));
	cr_assert_eq(json_object_size(owned), 0);
	json_object_set_new((json_t *)lun_of(eff, 0), "owner", json_string("gw-a"));
	cr_assert(!api_cluster_holds_update(eff, "gw-a", owned, held, 7000, 4000));
	cr_assert_eq(json_integer_value(json_object_get(held, "t\n0")), 11000);
	json_decref(eff);
	json_decref(owned);
	json_decref(held);
}
