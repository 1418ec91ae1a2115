// SPDX-License-Identifier: MIT
/* Persistent reservations in etcd: the key, the state's checks (one registration per I_T
 * nexus, a registered holder, SPC's types) and the compare-and-swap; then the agent's side of
 * the protocol with its gateway, driven by a real loop against a fake etcd endpoint on loopback
 * and a fake gateway that records what it is sent: the whole set on (re)connect, each change,
 * every commit answered (ok, conflict with the winner, unavailable for a bad proposal, a dead or
 * silent etcd), nothing left behind by a stop with a commit in flight, and the keys of deleted
 * LUNs removed. */
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

/* The wiring is static: reached by including the file (the archive copy is not linked then). */
#include "api_cluster_pr.c"

static void setup(void)
{
	gw_log_set_level(getenv("PR_T_DEBUG") ? GW_LOG_DBG : GW_LOG_ERR - 1);
}

TestSuite(api_cluster_pr, .init = setup);

#define INI "iqn.2026-11.org.host:a,i,0x400001370000"

static json_t *state(const char *res_ini, int res_rel, int type)
{
	json_t *st = json_pack("{s:i, s:b, s:[{s:s, s:i, s:s}, {s:s, s:i, s:s}], s:n}",
			       "generation", 4, "aptpl", 0, "registrations",
			       "initiator", INI, "rel_id", 1, "key", "0x00000000000000ab",
			       "initiator", INI, "rel_id", 2, "key", "0x00000000000000ab",
			       "reservation");

	if (res_ini)
		json_object_set_new(st, "reservation", json_pack("{s:s, s:i, s:i}", "initiator",
								 res_ini, "rel_id", res_rel,
								 "type", type));
	return st;
}

Test(api_cluster_pr, the_key_names_the_lu)
{
	char *k = api_pr_key("/isergw/prod", "iqn.2026-11.org.isergw:t", 3);

	cr_assert_str_eq(k, "/isergw/prod/pr/iqn.2026-11.org.isergw:t/3");
	free(k);
}

Test(api_cluster_pr, one_initiator_through_two_gateways_is_two_nexuses)
{
	json_t *st = state(INI, 2, 1);
	const char *why;

	cr_assert_eq(api_pr_state_check(st, &why), 0, "%s", why ? why : "");
	json_decref(st);
}

Test(api_cluster_pr, bad_states_are_refused_with_the_field)
{
	json_t *st = state(INI, 3, 1);
	const char *why;

	cr_assert_eq(api_pr_state_check(st, &why), -EINVAL, "a holder through no registration");
	cr_assert(strstr(why, "reservation"), "%s", why);
	json_decref(st);
	st = state(INI, 1, 4);
	cr_assert_eq(api_pr_state_check(st, &why), -EINVAL, "type 4 is not an SPC-3 type");
	json_decref(st);
	st = state(NULL, 0, 0);
	json_array_append_new(json_object_get(st, "registrations"),
			      json_pack("{s:s, s:i, s:s}", "initiator", INI, "rel_id", 1, "key",
					"0x0000000000000001"));
	cr_assert_eq(api_pr_state_check(st, &why), -EINVAL);
	cr_assert(strstr(why, "one registration per I_T nexus"), "%s", why);
	json_decref(st);
	st = state(NULL, 0, 0);
	json_object_set_new(json_array_get(json_object_get(st, "registrations"), 0), "key",
			    json_integer(171));
	cr_assert_eq(api_pr_state_check(st, &why), -EINVAL, "keys travel as hex strings");
	json_decref(st);
}

Test(api_cluster_pr, the_commit_compares_the_revision_and_reads_back_on_loss)
{
	json_t *st = state(INI, 1, 3), *txn;
	char *k = api_pr_key("/c", "t", 0), *kb = api_b64_encode(k, strlen(k));
	json_t *cmp;

	txn = api_pr_cas_txn(k, st, 17);
	cmp = json_array_get(json_object_get(txn, "compare"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(cmp, "target")), "MOD");
	cr_assert_str_eq(json_string_value(json_object_get(cmp, "mod_revision")), "17");
	cr_assert_str_eq(json_string_value(json_object_get(cmp, "key")), kb);
	cr_assert_not_null(json_object_get(json_array_get(json_object_get(txn, "failure"), 0),
					   "request_range"));
	json_decref(txn);
	txn = api_pr_cas_txn(k, st, 0);
	cmp = json_array_get(json_object_get(txn, "compare"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(cmp, "target")), "CREATE",
			 "a first commit only creates");
	json_decref(txn);
	json_decref(st);
	free(k);
	free(kb);
}

/* ---- the agent's side, in a loop: a fake etcd and a fake gateway ------------------------- */

/* What the gateway was sent, in order; every request is answered {"ok": true}. */
static json_t *gw_sent;

static int fake_gw_call(struct api_agent *ag, json_t *req, api_cluster_gw_cb cb, void *ctx)
{
	json_t *ok = json_pack("{s:b}", "ok", 1);

	(void)ag;
	json_array_append_new(gw_sent, req);
	cb(ctx, 0, ok);
	json_decref(ok);
	return 0;
}

struct rig {
	struct gw_loop loop;
	struct fake_etcd f;
	struct api_etcd *e;
	struct api_prc *p;
};

/* body: what etcd answers every call (NULL: nothing); dead: the client's endpoint is one where
 * nothing listens instead. */
static void rig_start(struct rig *r, const char *body, bool dead)
{
	struct api_prc_conf pc = { .prefix = "/c", .gw_call = fake_gw_call };
	struct api_etcd_conf ec;
	char eps[64];

	cr_assert_eq(gw_loop_init(&r->loop), 0);
	fake_etcd_start(&r->f, &r->loop, body);
	snprintf(eps, sizeof(eps), "http://127.0.0.1:%d",
		 dead ? fake_etcd_port(NULL) : r->f.port);
	ec = (struct api_etcd_conf){ .endpoints = eps };
	cr_assert_eq(api_etcd_create(&ec, &r->loop, &r->e), 0);
	pc.loop = &r->loop;
	pc.etcd = r->e;
	cr_assert_eq(api_prc_create(&pc, &r->p), 0);
	gw_sent = json_array();
}

static void rig_stop(struct rig *r)
{
	api_prc_destroy(r->p);
	api_etcd_destroy(r->e);
	fake_etcd_stop(&r->f);
	gw_loop_fini(&r->loop);
	json_decref(gw_sent);
}

/* rig_start, then an empty first list and a gateway that connected: ready for commits. */
static void rig_ready(struct rig *r, const char *body, bool dead)
{
	rig_start(r, body, dead);
	api_prc_list_begin(r->p);
	api_prc_list_end(r->p, 1);
	api_prc_gw_up(r->p);
}

/* Runs the loop until the gateway was sent n requests in all (or max_ms passed). */
static void run_until_sent(struct rig *r, size_t n, uint64_t max_ms)
{
	uint64_t t0 = gw_now_ms();

	while (json_array_size(gw_sent) < n && gw_now_ms() - t0 < max_ms)
		gw_loop_run_once(&r->loop, 50);
}

static void run_until_served(struct rig *r, int n, uint64_t max_ms)
{
	uint64_t t0 = gw_now_ms();

	while (r->f.served < n && gw_now_ms() - t0 < max_ms)
		gw_loop_run_once(&r->loop, 50);
}

static const json_t *sent(size_t i)
{
	return json_array_get(gw_sent, i);
}

static const char *sent_str(size_t i, const char *field)
{
	return json_string_value(json_object_get(sent(i), field));
}

static json_int_t sent_int(size_t i, const char *field)
{
	return json_integer_value(json_object_get(sent(i), field));
}

static char *state_text(const char *holder, int type)
{
	json_t *st = state(holder, 1, type);
	char *t = json_dumps(st, JSON_COMPACT);

	json_decref(st);
	return t;
}

Test(api_cluster_pr, the_gateway_gets_the_whole_set_when_it_connects_then_each_change)
{
	struct rig r;
	char *a = state_text(INI, 1), *b = state_text(NULL, 0);

	rig_start(&r, NULL, true);
	api_prc_list_begin(r.p);
	api_prc_kv(r.p, "iqn.t:x/0", a, 5);
	api_prc_kv(r.p, "iqn.t:x/1", "{\"generation\":1}", 6);
	api_prc_kv(r.p, "iqn.t:x/notalun", a, 6);
	api_prc_list_end(r.p, 10);
	cr_assert_eq(json_array_size(gw_sent), 0, "no gateway connected: nothing sent");
	api_prc_gw_up(r.p);
	cr_assert_eq(json_array_size(gw_sent), 1);
	cr_assert_str_eq(sent_str(0, "op"), "pr_cluster");
	cr_assert(json_is_true(json_object_get(sent(0), "enabled")));
	cr_assert_eq(json_array_size(json_object_get(sent(0), "luns")), 1,
		     "a state that fails its checks and a bad key are left out");
	{
		const json_t *l = json_array_get(json_object_get(sent(0), "luns"), 0);

		cr_assert_str_eq(json_string_value(json_object_get(l, "target")), "iqn.t:x");
		cr_assert_eq(json_integer_value(json_object_get(l, "lun")), 0);
		cr_assert_eq(json_integer_value(json_object_get(l, "rev")), 5);
		cr_assert_eq(json_integer_value(json_object_get(json_object_get(json_object_get(
			l, "state"), "reservation"), "type")), 1);
	}
	/* A configuration applied (a restarted gateway's LUNs came after the set): again. */
	api_prc_gw_applied(r.p);
	cr_assert_eq(json_array_size(gw_sent), 2);
	cr_assert_str_eq(sent_str(1, "op"), "pr_cluster");
	cr_assert_eq(json_array_size(json_object_get(sent(1), "luns")), 1);
	/* The watch: a change, its echo (ignored), a deletion. */
	api_prc_kv(r.p, "iqn.t:x/0", b, 12);
	cr_assert_eq(json_array_size(gw_sent), 3);
	cr_assert_str_eq(sent_str(2, "op"), "pr");
	cr_assert_eq(sent_int(2, "rev"), 12);
	cr_assert(json_is_null(json_object_get(json_object_get(sent(2), "state"), "reservation")));
	api_prc_kv(r.p, "iqn.t:x/0", b, 12);
	cr_assert_eq(json_array_size(gw_sent), 3, "what the gateway has is not sent again");
	api_prc_kv(r.p, "iqn.t:x/0", NULL, 13);
	cr_assert_eq(json_array_size(gw_sent), 4);
	cr_assert(json_is_null(json_object_get(sent(3), "state")), "deleted: the empty state");
	cr_assert_eq(sent_int(3, "rev"), 13);
	/* The gateway goes: changes wait for it; it comes back: the whole set again. */
	api_prc_gw_lost(r.p);
	api_prc_kv(r.p, "iqn.t:x/2", a, 14);
	api_prc_gw_applied(r.p);
	cr_assert_eq(json_array_size(gw_sent), 4, "no gateway: nothing");
	api_prc_gw_up(r.p);
	cr_assert_eq(json_array_size(gw_sent), 5);
	cr_assert_str_eq(sent_str(4, "op"), "pr_cluster");
	cr_assert_eq(json_array_size(json_object_get(sent(4), "luns")), 1);
	cr_assert_eq(json_integer_value(json_object_get(json_array_get(json_object_get(sent(4),
		"luns"), 0), "lun")), 2);
	free(a);
	free(b);
	rig_stop(&r);
}

Test(api_cluster_pr, a_new_list_sends_what_the_watch_missed)
{
	struct rig r;
	char *a = state_text(INI, 1), *b = state_text(NULL, 0);

	rig_start(&r, NULL, true);
	api_prc_gw_up(r.p);
	cr_assert_eq(json_array_size(gw_sent), 0, "nothing read yet: nothing to enable");
	api_prc_list_begin(r.p);
	api_prc_kv(r.p, "t/0", a, 5);
	api_prc_kv(r.p, "t/1", a, 6);
	api_prc_list_end(r.p, 10);
	cr_assert_eq(json_array_size(gw_sent), 1);
	cr_assert_str_eq(sent_str(0, "op"), "pr_cluster", "sent once the list is in");
	/* The watch was lost; meanwhile t/0 changed and t/1 went. */
	api_prc_list_begin(r.p);
	api_prc_kv(r.p, "t/0", b, 15);
	api_prc_list_end(r.p, 20);
	cr_assert_eq(json_array_size(gw_sent), 3);
	cr_assert_str_eq(sent_str(1, "op"), "pr");
	cr_assert_eq(sent_int(1, "lun"), 0);
	cr_assert_eq(sent_int(1, "rev"), 15);
	cr_assert_eq(sent_int(2, "lun"), 1);
	cr_assert(json_is_null(json_object_get(sent(2), "state")));
	cr_assert_eq(sent_int(2, "rev"), 20, "a deletion the list found: at the list's revision");
	free(a);
	free(b);
	rig_stop(&r);
}

static json_t *commit_ev(int id, int rev, json_t *st)
{
	return json_pack("{s:i, s:s, s:i, s:i, s:o}", "id", id, "target", "t", "lun", 0, "rev",
			 rev, "state", st);
}

Test(api_cluster_pr, a_bad_proposal_is_answered_unavailable_without_etcd)
{
	struct rig r;
	json_t *ev;

	rig_ready(&r, NULL, false);
	ev = commit_ev(7, 0, state(INI, 3, 1));	/* a holder that is not registered */
	api_prc_commit(r.p, ev, NULL);
	json_decref(ev);
	cr_assert_eq(json_array_size(gw_sent), 2, "answered at once");
	cr_assert_str_eq(sent_str(1, "op"), "pr_result");
	cr_assert_eq(sent_int(1, "commit"), 7);
	cr_assert_str_eq(sent_str(1, "result"), "unavailable");
	cr_assert(strstr(sent_str(1, "reason"), "reservation: its holder must be registered"),
		  "%s", sent_str(1, "reason"));
	ev = json_pack("{s:i, s:s, s:i, s:i, s:o}", "id", 8, "target", "a/b", "lun", 0, "rev", 0,
		       "state", state(NULL, 0, 0));
	api_prc_commit(r.p, ev, NULL);
	json_decref(ev);
	cr_assert_str_eq(sent_str(2, "result"), "unavailable");
	cr_assert(strstr(sent_str(2, "reason"), "target"));
	ev = commit_ev(9, 0, state(NULL, 0, 0));
	api_prc_commit(r.p, ev, "the cluster's prefix belongs to another cluster");
	json_decref(ev);
	cr_assert(strstr(sent_str(3, "reason"), "another cluster"));
	gw_loop_run_once(&r.loop, 100);
	cr_assert_eq(r.f.served, 0, "nothing went to etcd");
	rig_stop(&r);
}

#define TXN_OK "{\"header\":{\"revision\":\"42\"},\"succeeded\":true}"

Test(api_cluster_pr, a_commit_that_etcd_takes_is_answered_ok_with_its_revision)
{
	struct rig r;
	const json_t *cmp;
	char *kb = api_b64_encode("/c/pr/t/0", 9), *echo = state_text(INI, 5);
	json_t *ev;

	rig_ready(&r, TXN_OK, false);
	ev = commit_ev(3, 7, state(INI, 1, 5));
	api_prc_commit(r.p, ev, NULL);
	json_decref(ev);
	cr_assert_eq(json_array_size(gw_sent), 1, "answered from the loop, never inside");
	run_until_served(&r, 1, 10000);
	run_until_sent(&r, 2, 300);
	cr_assert_eq(json_array_size(gw_sent), 1, "taken, but not answered before the watch "
		     "brought it back (every gateway's agent gets it at once)");
	/* The watch's echo: the answer, and the state is not pushed again. */
	api_prc_kv(r.p, "t/0", echo, 42);
	cr_assert_eq(json_array_size(gw_sent), 2);
	cr_assert_str_eq(sent_str(1, "op"), "pr_result");
	cr_assert_eq(sent_int(1, "commit"), 3);
	cr_assert_str_eq(sent_str(1, "result"), "ok");
	cr_assert_eq(sent_int(1, "rev"), 42);
	cmp = json_array_get(json_object_get(r.f.last, "compare"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(cmp, "key")), kb);
	cr_assert_str_eq(json_string_value(json_object_get(cmp, "mod_revision")), "7",
			 "compared with the revision the proposal was computed from");
	free(echo);
	free(kb);
	rig_stop(&r);
}

Test(api_cluster_pr, ok_waits_until_every_other_live_member_acknowledged_the_revision)
{
	struct rig r;
	json_t *live = json_pack("{s:b, s:b}", "gw-a", 1, "gw-b", 1), *ev;
	char *echo = state_text(INI, 5), *ak = api_b64_encode("/c/pr_acks/gw-a", 15);
	char *av = api_b64_encode("42", 2);

	rig_start(&r, TXN_OK, false);
	r.p->self = "gw-a";
	r.p->live = live;
	api_prc_list_begin(r.p);
	api_prc_list_end(r.p, 1);
	run_until_served(&r, 1, 10000);	/* the list's own acknowledgement */
	api_prc_gw_up(r.p);
	ev = commit_ev(11, 7, state(INI, 1, 5));
	api_prc_commit(r.p, ev, NULL);
	json_decref(ev);
	for (uint64_t t0 = gw_now_ms(); gw_now_ms() - t0 < 10000 &&
	     !gw_list_first_entry(&r.p->commits, struct prc_commit, node)->committed;)
		gw_loop_run_once(&r.loop, 50);
	cr_assert_eq(json_array_size(gw_sent), 1, "etcd took it: not answered yet");
	api_prc_kv(r.p, "t/0", echo, 42);
	run_until_served(&r, 3, 10000);
	cr_assert_str_eq(json_string_value(json_object_get(r.f.last, "key")), ak,
			 "the echo is acknowledged under this member's key");
	cr_assert_str_eq(json_string_value(json_object_get(r.f.last, "value")), av);
	cr_assert_eq(json_array_size(gw_sent), 1, "gw-b's gateway may not have it yet");
	api_prc_ack(r.p, "gw-b", "41");
	cr_assert_eq(json_array_size(gw_sent), 1);
	api_prc_ack(r.p, "gw-b", "42");
	cr_assert_eq(json_array_size(gw_sent), 2, "every other live member has it: answered");
	cr_assert_str_eq(sent_str(1, "result"), "ok");
	cr_assert_eq(sent_int(1, "rev"), 42);
	rig_stop(&r);
	json_decref(live);
	free(echo);
	free(ak);
	free(av);
}

Test(api_cluster_pr, a_commit_whose_echo_is_late_is_answered_ok_at_the_deadline)
{
	struct rig r;
	json_t *ev;

	rig_ready(&r, TXN_OK, false);
	r.p->commit_ms = 300;
	ev = commit_ev(9, 0, state(NULL, 0, 0));
	api_prc_commit(r.p, ev, NULL);
	json_decref(ev);
	run_until_sent(&r, 2, 10000);
	cr_assert_eq(json_array_size(gw_sent), 2);
	cr_assert_str_eq(sent_str(1, "result"), "ok", "it is in etcd: never unavailable");
	cr_assert_eq(sent_int(1, "rev"), 42);
	cr_assert(gw_list_empty(&r.p->commits));
	rig_stop(&r);
}

Test(api_cluster_pr, a_lost_race_is_answered_with_the_winners_state_and_revision)
{
	char *win = state_text(INI, 3), *wb = api_b64_encode(win, strlen(win));
	char *kb = api_b64_encode("/c/pr/t/0", 9), body[1500];
	struct rig r;
	json_t *ev;

	snprintf(body, sizeof(body), "{\"header\":{\"revision\":\"43\"},\"responses\":[{"
		 "\"response_range\":{\"header\":{\"revision\":\"43\"},\"kvs\":[{\"key\":\"%s\","
		 "\"value\":\"%s\",\"mod_revision\":\"40\"}],\"count\":\"1\"}}]}", kb, wb);
	rig_ready(&r, body, false);
	ev = commit_ev(4, 0, state(INI, 1, 5));
	api_prc_commit(r.p, ev, NULL);
	json_decref(ev);
	run_until_sent(&r, 2, 10000);
	cr_assert_eq(json_array_size(gw_sent), 2);
	cr_assert_str_eq(sent_str(1, "result"), "conflict");
	cr_assert_eq(sent_int(1, "commit"), 4);
	cr_assert_eq(sent_int(1, "rev"), 40);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(json_object_get(sent(1),
		"state"), "reservation"), "type")), 3, "the winner's state");
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(
		r.f.last, "compare"), 0), "target")), "CREATE", "rev 0: the key must be absent");
	free(win);
	free(wb);
	free(kb);
	rig_stop(&r);
}

Test(api_cluster_pr, a_dead_etcd_is_answered_unavailable_in_time)
{
	struct rig r;
	uint64_t t0;
	json_t *ev;

	rig_ready(&r, TXN_OK, true);
	t0 = gw_now_ms();
	ev = commit_ev(5, 0, state(NULL, 0, 0));
	api_prc_commit(r.p, ev, NULL);
	json_decref(ev);
	run_until_sent(&r, 2, 10000);
	cr_assert_eq(json_array_size(gw_sent), 2);
	cr_assert_str_eq(sent_str(1, "result"), "unavailable");
	cr_assert(strstr(sent_str(1, "reason"), "etcd"), "%s", sent_str(1, "reason"));
	/* A generous bound: the gateway gives up at 5 s, the agent must answer before. */
	cr_assert_lt(gw_now_ms() - t0, 4500);
	rig_stop(&r);
}

Test(api_cluster_pr, a_silent_etcd_is_answered_unavailable_at_the_deadline)
{
	struct rig r;
	json_t *ev;

	rig_ready(&r, NULL, false);
	r.p->commit_ms = 300;
	ev = commit_ev(6, 0, state(NULL, 0, 0));
	api_prc_commit(r.p, ev, NULL);
	json_decref(ev);
	run_until_sent(&r, 2, 10000);
	cr_assert_eq(json_array_size(gw_sent), 2);
	cr_assert_str_eq(sent_str(1, "result"), "unavailable");
	cr_assert(strstr(sent_str(1, "reason"), "did not answer within 300 ms"), "%s",
		  sent_str(1, "reason"));
	cr_assert(gw_list_empty(&r.p->commits), "the commit is gone");
	rig_stop(&r);
}

Test(api_cluster_pr, a_stop_with_a_commit_in_flight_leaves_nothing)
{
	struct rig r;
	json_t *ev;

	rig_ready(&r, NULL, false);
	ev = commit_ev(7, 0, state(NULL, 0, 0));
	api_prc_commit(r.p, ev, NULL);
	json_decref(ev);
	run_until_served(&r, 1, 10000);
	cr_assert_eq(r.f.served, 1);
	cr_assert_not(gw_list_empty(&r.p->commits), "in flight: etcd holds it unanswered");
	/* The sanitized build (make test-sanitize) fails here if the commit's context leaks. */
	rig_stop(&r);
}

Test(api_cluster_pr, a_gateway_that_goes_drops_its_commits_unanswered)
{
	struct rig r;
	json_t *ev;

	rig_ready(&r, NULL, false);
	r.p->commit_ms = 100;
	ev = commit_ev(8, 0, state(NULL, 0, 0));
	api_prc_commit(r.p, ev, NULL);
	json_decref(ev);
	api_prc_gw_lost(r.p);
	cr_assert(gw_list_empty(&r.p->commits));
	/* Past the deadline the commit had: still nothing. */
	run_until_sent(&r, 2, 400);
	cr_assert_eq(json_array_size(gw_sent), 1, "nothing is answered to a gateway that left");
	rig_stop(&r);
}

Test(api_cluster_pr, the_reservations_of_a_deleted_lun_leave_etcd)
{
	struct rig r;
	char *a = state_text(INI, 1), *kb = api_b64_encode("/c/pr/t/0", 9);
	char *cb = api_b64_encode("/c/config", 9);
	json_t *cfg = json_pack("{s:[{s:s, s:[{s:i}]}]}", "targets", "name", "t", "luns", "lun",
				1);
	const json_t *cmp;

	rig_start(&r, TXN_OK, false);
	api_prc_list_begin(r.p);
	api_prc_kv(r.p, "t/0", a, 5);
	api_prc_kv(r.p, "t/1", a, 6);
	api_prc_list_end(r.p, 10);
	api_prc_sweep(r.p, cfg, 9);
	run_until_served(&r, 2, 1000);
	cr_assert_eq(r.f.served, 1, "only LUN 0 is gone from the configuration");
	cmp = json_object_get(r.f.last, "compare");
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(cmp, 0), "key")), cb);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(cmp, 0),
							   "mod_revision")), "9",
			 "only while the configuration is the one without it");
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(cmp, 1), "key")), kb);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(cmp, 1),
							   "mod_revision")), "5",
			 "and no commit came since");
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(json_array_get(
		json_object_get(r.f.last, "success"), 0), "request_delete_range"), "key")), kb);
	json_decref(cfg);
	free(a);
	free(kb);
	free(cb);
	rig_stop(&r);
}
