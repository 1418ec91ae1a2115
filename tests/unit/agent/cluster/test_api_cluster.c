// SPDX-License-Identifier: MIT
/* The pure parts of the cluster: etcd JSON encoding and decoding, LU ownership, and the
 * configuration a member's gateway runs; what the watch delivers; the lease's keepalive
 * against a fake etcd that stalls. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/fake_etcd.h"
#include "api_cluster.h"
#include "api_etcd.h"
#include "gw_log.h"
#include "gw_loop.h"

/* The watch handling is static: reached by including the file (the archive copy is not
 * linked then). */
#include "api_cluster.c"

static void setup(void)
{
	gw_log_set_level(getenv("CL_T_DEBUG") ? GW_LOG_DBG : GW_LOG_WARN - 1);
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

/* ---- what the watch delivers (an etcd store whose endpoint is dead: nothing is sent) ----- */

static int changed_calls;

static void count_changed(struct api_agent *ag)
{
	(void)ag;
	changed_calls++;
}

static struct api_cluster *watch_cluster(const char *my_id)
{
	struct api_etcd_conf ec = { .endpoints = "http://127.0.0.1:1" };
	struct api_cluster *c = calloc(1, sizeof(*c));
	struct api_etcd *e;

	cr_assert_eq(api_etcd_create(&ec, NULL, &e), 0);
	cr_assert_eq(api_store_open_etcd(e, "/t", NULL, &c->store), 0);
	c->etcd = e;
	c->prefix = strdup("/t");
	c->id = strdup("gw-a");
	c->group = 1;
	c->ttl = 3;
	c->live = json_object();
	c->groups = json_object();
	c->owned = json_object();
	c->held = json_object();
	c->changed = count_changed;
	c->cluster_id = my_id ? strdup(my_id) : NULL;
	changed_calls = 0;
	return c;
}

static void watch_cluster_free(struct api_cluster *c)
{
	struct api_store *s = c->store;

	c->lease = 0;
	c->lease_cb = NULL;
	api_cluster_stop(c);
	api_store_destroy(s);
}

/* {"result": {"events": [one event]}} for key = value, NULL: deleted. */
static json_t *watch_msg(const char *key, const char *value, int rev)
{
	char *k = api_b64_encode(key, strlen(key));
	char *v = value ? api_b64_encode(value, strlen(value)) : NULL;
	json_t *ev = json_pack("{s:{s:s, s:s?, s:i}}", "kv", "key", k, "value", v,
			       "mod_revision", rev);

	if (!value)
		json_object_set_new(ev, "type", json_string("DELETE"));
	free(k);
	free(v);
	return json_pack("{s:{s:{s:s}, s:[o]}}", "result", "header", "revision", "9", "events",
			 ev);
}

static void deliver(struct api_cluster *c, json_t *msg)
{
	on_watch_msg(c, msg);
	json_decref(msg);
}

Test(api_cluster, the_watch_keeps_members_groups_and_the_configuration)
{
	struct api_cluster *c = watch_cluster("id-1");

	deliver(c, watch_msg("/t/members/gw-b", "{\"id\":\"gw-b\",\"group\":2}", 5));
	deliver(c, watch_msg("/t/groups/gw-b", "2", 5));
	cr_assert_not_null(json_object_get(c->live, "gw-b"));
	cr_assert_eq(json_integer_value(json_object_get(c->groups, "gw-b")), 2);
	cr_assert_geq(changed_calls, 1, "a new member is pushed to the gateway");
	deliver(c, watch_msg("/t/config", "{\"generation\":3,\"config\":{\"portals\":[]}}", 6));
	cr_assert_eq(api_store_generation(c->store), 3,
		     "the configuration comes in through the watch");
	cr_assert_eq(api_store_refresh(c->store), -EHOSTUNREACH,
		     "a write still needs etcd reachable (its endpoint is dead here)");
	deliver(c, watch_msg("/t/members/gw-b", NULL, 7));
	cr_assert_null(json_object_get(c->live, "gw-b"), "a lease that ended removes the member");
	cr_assert_eq(json_integer_value(json_object_get(c->groups, "gw-b")), 2,
		     "its group stays (unavailable)");
	deliver(c, watch_msg("/t/config", "not json", 8));
	cr_assert_eq(api_store_generation(c->store), 3,
		     "a value that is no configuration changes nothing");
	watch_cluster_free(c);
}

Test(api_cluster, another_clusters_id_under_the_prefix_is_refused)
{
	struct api_cluster *c = watch_cluster("id-1");

	deliver(c, watch_msg("/t/cluster_id", "id-1", 4));
	cr_assert_not(c->refused, "its own id");
	deliver(c, watch_msg("/t/cluster_id", "id-2", 5));
	cr_assert(c->refused);
	cr_assert(strstr(c->error, "belongs to cluster id-2") &&
		  strstr(c->error, "joined cluster id-1"), "%s", c->error);
	cr_assert_eq(api_store_refresh(c->store), -ENOTUNIQ, "changes are refused from now on");
	watch_cluster_free(c);
}

Test(api_cluster, a_first_member_adopts_the_id_it_finds)
{
	struct api_cluster *c = watch_cluster(NULL);

	deliver(c, watch_msg("/t/cluster_id", "id-7", 4));
	cr_assert_not(c->refused);
	cr_assert_str_eq(c->cluster_id, "id-7");
	watch_cluster_free(c);
}

Test(api_cluster, a_cancelled_or_compacted_watch_means_listing_again)
{
	struct api_cluster *c = watch_cluster("id-1");
	json_t *m = json_pack("{s:{s:b, s:s, s:s}}", "result", "canceled", 1, "compact_revision",
			      "40", "cancel_reason", "mvcc: required revision has been compacted");

	c->synced = true;
	deliver(c, m);
	cr_assert_not(c->synced);
	watch_cluster_free(c);
}

/* ---- persistent reservations ride on the same list and watch ------------------------------ */

static json_t *gw_reqs;

static int rec_gw_call(struct api_agent *ag, json_t *req, api_cluster_gw_cb cb, void *ctx)
{
	(void)ag;
	json_array_append_new(gw_reqs, req);
	cb(ctx, -ECANCELED, NULL);
	return 0;
}

#define PR_STATE "{\"generation\":2,\"aptpl\":false,\"registrations\":[{\"initiator\":" \
		 "\"iqn.h:a,i,0x400001370000\",\"rel_id\":1,\"key\":\"0x00000000000000a1\"}]," \
		 "\"reservation\":null}"

Test(api_cluster, reservations_under_the_prefix_reach_the_gateway)
{
	struct api_cluster *c = watch_cluster("id-1");
	struct gw_loop loop;
	struct api_prc_conf pc = { .loop = &loop, .etcd = c->etcd, .prefix = "/t",
				   .gw_call = rec_gw_call };
	char *k1 = api_b64_encode("/t/cluster_id", 13), *v1 = api_b64_encode("id-1", 4);
	char *k2 = api_b64_encode("/t/pr/iqn.x/0", 13);
	char *v2 = api_b64_encode(PR_STATE, strlen(PR_STATE));
	json_t *list = json_pack("{s:{s:s}, s:[{s:s, s:s, s:s}, {s:s, s:s, s:s}]}", "header",
				 "revision", "9", "kvs", "key", k1, "value", v1, "mod_revision",
				 "3", "key", k2, "value", v2, "mod_revision", "7");
	const json_t *l;
	json_t *ev;

	cr_assert_eq(gw_loop_init(&loop), 0);
	cr_assert_eq(api_prc_create(&pc, &c->pr), 0);
	c->prefix_dir = strdup("/t/");	/* listed and watched (the watch fails: no loop) */
	gw_reqs = json_array();
	api_cluster_gw_up(c);
	cr_assert_eq(json_array_size(gw_reqs), 0, "nothing listed yet");
	on_list(c, 0, list);
	cr_assert_eq(json_array_size(gw_reqs), 1, "the list brings the whole set");
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(gw_reqs, 0), "op")),
			 "pr_cluster");
	l = json_array_get(json_object_get(json_array_get(gw_reqs, 0), "luns"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(l, "target")), "iqn.x");
	cr_assert_eq(json_integer_value(json_object_get(l, "rev")), 7);
	deliver(c, watch_msg("/t/pr/iqn.x/0", NULL, 12));
	cr_assert_eq(json_array_size(gw_reqs), 2, "a deletion through the watch is pushed");
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(gw_reqs, 1), "op")),
			 "pr");
	cr_assert(json_is_null(json_object_get(json_array_get(gw_reqs, 1), "state")));
	c->refused = true;
	ev = json_pack("{s:i, s:s, s:i, s:i, s:n}", "id", 5, "target", "iqn.x", "lun", 0, "rev",
		       12, "state");
	api_cluster_pr_commit(c, ev);
	json_decref(ev);
	cr_assert_eq(json_array_size(gw_reqs), 3);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(gw_reqs, 2),
							   "result")), "unavailable",
			 "a refused prefix commits nothing");
	json_decref(list);
	json_decref(gw_reqs);
	free(k1);
	free(v1);
	free(k2);
	free(v2);
	watch_cluster_free(c);
	gw_loop_fini(&loop);
}

/* ---- the lease's keepalive against an etcd that stalls (a fake endpoint in a loop) -------- */

static uint64_t lease_at;		/* monotonic: when the gateway last got a deadline */
static uint64_t lease_valid;
static int lease_calls;

static void rec_lease(struct api_agent *ag, uint64_t valid_ms)
{
	(void)ag;
	lease_calls++;
	lease_at = gw_now_ms();
	lease_valid = valid_ms;
}

#define KA_OK "{\"header\":{\"revision\":\"9\"},\"result\":{\"ID\":\"77\",\"TTL\":\"5\"}}"

/* A member of the default 5 s lease at its tick (renewed TTL/3 ago: 3.3 s left in etcd, its
 * gateway fences 2.3 s from now, 1 s margin), in sync, whose
 * calls go to port from loop (its store's client stays the dead one: opening a store would
 * wait for the fake, which runs in this very loop). Freed with ka_cluster_free. */
static struct api_cluster *ka_cluster(struct gw_loop *loop, int port)
{
	struct api_cluster *c = watch_cluster("id-1");
	struct api_etcd_conf ec;
	char eps[64];

	snprintf(eps, sizeof(eps), "http://127.0.0.1:%d", port);
	ec = (struct api_etcd_conf){ .endpoints = eps };
	cr_assert_eq(api_etcd_create(&ec, loop, &c->etcd), 0);
	c->prefix_dir = strdup("/t/");
	c->lease = 77;
	c->synced = true;
	c->reachable = true;
	c->local_portals = json_array();
	c->lease_cb = rec_lease;
	c->ttl = 5;
	c->valid_until_ms = gw_now_ms() + 3333;
	lease_calls = 0;
	return c;
}

static void ka_cluster_free(struct api_cluster *c)
{
	struct api_etcd *e = c->etcd;

	watch_cluster_free(c);
	api_etcd_destroy(e);
}

static void run_while_busy(struct gw_loop *loop, struct api_cluster *c, uint64_t max_ms)
{
	uint64_t t0 = gw_now_ms();

	while (c->ka_busy && gw_now_ms() - t0 < max_ms)
		gw_loop_run_once(loop, 20);
}

Test(api_cluster, a_keepalive_etcd_never_answered_is_sent_again_before_the_gateway_fences)
{
	struct gw_loop loop;
	struct fake_etcd f;
	struct api_cluster *c;
	uint64_t fence_at;

	cr_assert_eq(gw_loop_init(&loop), 0);
	fake_etcd_start(&f, &loop, KA_OK);
	f.silent_first = 1;		/* one call lost under load, then etcd answers at once */
	c = ka_cluster(&loop, f.port);
	fence_at = c->valid_until_ms - API_CLUSTER_FENCE_MARGIN_MS;
	cl_keepalive(c);
	run_while_busy(&loop, c, 10000);
	cr_assert_eq(f.served, 2, "the lost keepalive and its retry");
	cr_assert_eq(lease_calls, 1, "the gateway got a new deadline");
	cr_assert_lt(lease_at, fence_at, "before the one it had (it would have fenced then)");
	cr_assert_gt(lease_valid, API_CLUSTER_FENCE_MARGIN_MS, "and it is a whole lease again");
	cr_assert(c->reachable && c->synced, "etcd is fine: nothing is dropped");
	ka_cluster_free(c);
	fake_etcd_stop(&f);
	gw_loop_fini(&loop);
}

Test(api_cluster, a_keepalive_that_never_comes_back_gives_up_within_the_lease)
{
	struct gw_loop loop;
	struct fake_etcd f;
	struct api_cluster *c;
	uint64_t t0, expiry;

	cr_assert_eq(gw_loop_init(&loop), 0);
	fake_etcd_start(&f, &loop, NULL);	/* a stalled etcd: nothing is answered */
	c = ka_cluster(&loop, f.port);
	expiry = c->valid_until_ms;
	t0 = gw_now_ms();
	cl_keepalive(c);
	run_while_busy(&loop, c, 10000);
	cr_assert_not(c->ka_busy);
	/* The first cut short so a second could renew before the fence; the second with the
	 * rest of the lease, after which nothing is left to try. */
	cr_assert_eq(f.served, 2, "sent again, until the lease was spent (%d)", f.served);
	/* No attempt outlives the lease (a fixed 2 s per attempt would take 4 s); a generous
	 * bound over the lease for a loaded machine. */
	cr_assert_lt(gw_now_ms(), expiry + 1500, "%llu ms", (unsigned long long)(gw_now_ms() - t0));
	cr_assert_eq(lease_calls, 0, "no renewal: the gateway fences at its deadline");
	cr_assert_not(c->reachable, "then etcd is unreachable and the cluster lists again");
	ka_cluster_free(c);
	fake_etcd_stop(&f);
	gw_loop_fini(&loop);
}

Test(api_cluster, a_refused_keepalive_is_retried_twice_not_in_a_loop)
{
	struct gw_loop loop;
	struct api_cluster *c;

	cr_assert_eq(gw_loop_init(&loop), 0);
	c = ka_cluster(&loop, fake_etcd_port(NULL));
	cl_keepalive(c);
	run_while_busy(&loop, c, 10000);
	cr_assert_not(c->ka_busy);
	cr_assert_eq(c->ka_retries, CL_KA_RETRIES);
	cr_assert_not(c->reachable);
	cr_assert_eq(lease_calls, 0);
	ka_cluster_free(c);
	gw_loop_fini(&loop);
}
