// SPDX-License-Identifier: MIT
/*
 * Persistent reservations shared by the cluster (docs/CLUSTER.md, "Persistent reservations
 * across gateways"): the state of one LU's reservations as it will live in etcd, its checks,
 * the compare-and-swap that commits a PERSISTENT RESERVE OUT, and the agent's side of the
 * protocol with its gateway (cluster_priv.h): the states as read (the membership's list and
 * watch of PREFIX/ carry PREFIX/pr/ too), the whole set for a gateway that (re)connects, every
 * change after it, and the gateway's commits answered within API_PRC_COMMIT_MS whatever etcd
 * does. Nothing here ever blocks the loop: every etcd call is api_etcd_post.
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
#include "cluster_priv.h"
#include "gw_list.h"
#include "gw_log.h"
#include "gw_loop.h"

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

/* ---- the agent's side: etcd's states to the gateway, its commits to etcd ------------------- */

struct prc_commit {
	struct gw_list node;		/* in p->commits, oldest (first deadline) first */
	struct api_prc *p;
	json_int_t id;			/* the gateway's (its pr_result's "commit") */
	char *target;
	uint64_t lun;
	json_t *state;			/* the proposal */
	uint64_t deadline_ms;
	bool committed;			/* etcd took it at rev: waiting for the barrier */
	bool echoed;			/* and this agent's watch brought rev back */
	int64_t rev;
};

struct api_prc {
	struct gw_loop *loop;
	struct api_etcd *etcd;
	char *prefix;
	api_cluster_gw_call_fn gw_call;
	struct api_agent *ag;
	json_t *lus;			/* {"TARGET\\nLUN": {"target", "lun", "rev", "state"}} */
	json_t *snap;			/* the list being read, NULL: none */
	bool listed;			/* lus holds a list (and the watch since) */
	bool gw_up;			/* the gateway is connected */
	bool gw_sent;			/* and has the whole set (pr_cluster sent) */
	struct gw_list commits;
	struct gw_timer timer;		/* the oldest commit's deadline */
	unsigned int commit_ms;
	const char *self;		/* the barrier: see api_prc_ack */
	const json_t *live;
	const int64_t *lease;
	json_t *acks;			/* {member id: revision its gateway has} */
	int64_t ack_sent, ack_want;	/* this member's: the put in flight (0: none), the next */
	int64_t ack_done;		/* the highest put */
	struct gw_list waits;		/* prc_wait: pushes the gateway has not answered */
};

/* A "pr" push whose answer (the gateway applied it) releases this member's acknowledgement.
 * Outlives p when the gateway's client answers after the agent stopped: p is NULL then. */
struct prc_wait {
	struct gw_list node;		/* in p->waits */
	struct api_prc *p;
	int64_t rev;
};

static char *prc_lu(const char *target, uint64_t lun)
{
	char *k = NULL;

	if (asprintf(&k, "%s\n%" PRIu64, target, lun) < 0)
		return NULL;
	return k;
}

/* "TARGET/LUN" -> target (malloc'ed) and lun; -EINVAL for anything else. */
static int prc_parse_rel(const char *rel, char **target, uint64_t *lun)
{
	const char *slash = strrchr(rel, '/'), *d;

	if (!slash || slash == rel || !slash[1] || strlen(slash + 1) > 19)
		return -EINVAL;
	for (d = slash + 1; *d; d++)
		if (*d < '0' || *d > '9')
			return -EINVAL;
	*lun = strtoull(slash + 1, NULL, 10);
	*target = strndup(rel, (size_t)(slash - rel));
	return *target ? 0 : -ENOMEM;
}

/* A value read from etcd: the state (new reference), or NULL with *why when it is none. */
static json_t *prc_parse_state(const char *value, const char **why)
{
	json_t *st = json_loads(value, 0, NULL);

	*why = NULL;
	if (!st) {
		*why = "not JSON";
		return NULL;
	}
	if (api_pr_state_check(st, why)) {
		json_decref(st);
		return NULL;
	}
	return st;
}

static json_t *prc_entry(const char *target, uint64_t lun, int64_t rev, const json_t *st)
{
	return json_pack("{s:s, s:I, s:I, s:O?}", "target", target, "lun", (json_int_t)lun,
			 "rev", (json_int_t)rev, "state", st);
}

static const char *prc_reply_why(const json_t *reply)
{
	const char *m = json_string_value(json_object_get(reply, "message"));

	return m ? m : json_string_value(json_object_get(reply, "error")) ?: "?";
}

static void on_set_reply(void *ctx, int err, json_t *reply)
{
	(void)ctx;
	if (err >= 0 && !json_is_true(json_object_get(reply, "ok")))
		gw_warn("cluster", "the gateway does not take the cluster's persistent reservations "
			"(%s): PERSISTENT RESERVE stays per gateway", prc_reply_why(reply));
}

static void on_pr_reply(void *ctx, int err, json_t *reply)
{
	(void)ctx;
	if (err >= 0 && !json_is_true(json_object_get(reply, "ok")))
		gw_warn_rl("cluster", "the gateway refused a reservation state: %s",
			   prc_reply_why(reply));
}

static void on_result_reply(void *ctx, int err, json_t *reply)
{
	(void)ctx;
	/* The gateway may have given up on the command already (its own 5 s). */
	if (err >= 0 && !json_is_true(json_object_get(reply, "ok")))
		gw_warn_rl("cluster", "the gateway did not take a commit's result: %s",
			   prc_reply_why(reply));
}

/* Replies never touch p: the gateway's client may answer them after p is gone. */
static void prc_send(struct api_prc *p, json_t *req, api_cluster_gw_cb cb)
{
	if (!req)
		return;
	if (!p->gw_call || !p->gw_up) {
		json_decref(req);
		return;
	}
	p->gw_call(p->ag, req, cb, NULL);
}

static void prc_ack_send(struct api_prc *p, int64_t rev);

static void on_pr_applied(void *ctx, int err, json_t *reply)
{
	struct prc_wait *w = ctx;

	on_pr_reply(NULL, err, reply);
	if (w->p) {
		gw_list_del(&w->node);
		/* Applied (or the gateway went: it gets the whole set when it is back). */
		prc_ack_send(w->p, w->rev);
	}
	free(w);
}

/* True when the acknowledgement of rev waits for the gateway's answer. */
static bool prc_push(struct api_prc *p, const char *target, uint64_t lun, int64_t rev,
		     const json_t *st)
{
	struct prc_wait *w;
	json_t *req;

	if (!p->gw_sent || !p->gw_call || !p->gw_up)
		return false;
	req = prc_entry(target, lun, rev, st);
	if (req && !st)
		json_object_set_new(req, "state", json_null());
	if (req)
		json_object_set_new(req, "op", json_string("pr"));
	w = req ? calloc(1, sizeof(*w)) : NULL;
	if (!w) {
		prc_send(p, req, on_pr_reply);
		return false;
	}
	w->p = p;
	w->rev = rev;
	gw_list_add_tail(&p->waits, &w->node);
	if (p->gw_call(p->ag, req, on_pr_applied, w)) {
		gw_list_del(&w->node);
		free(w);
		return false;
	}
	return true;
}

/* The whole set, once per connection: a LU not listed has the empty state. */
static void prc_send_all(struct api_prc *p)
{
	json_t *luns = json_array(), *e, *req;
	const char *k;

	json_object_foreach(p->lus, k, e)
		json_array_append_new(luns, json_pack("{s:O, s:O, s:O, s:O}", "target",
						      json_object_get(e, "target"), "lun",
						      json_object_get(e, "lun"), "rev",
						      json_object_get(e, "rev"), "state",
						      json_object_get(e, "state")));
	req = json_pack("{s:s, s:b, s:o}", "op", "pr_cluster", "enabled", 1, "luns", luns);
	if (!req || !p->gw_call || !p->gw_up) {
		json_decref(req);
		return;
	}
	if (p->gw_call(p->ag, req, on_set_reply, NULL) == 0 && !p->gw_sent) {
		p->gw_sent = true;
		gw_info("cluster", "the gateway decides persistent reservations on the cluster's "
			"state (%zu LUNs with reservations)", json_object_size(p->lus));
	}
}

/* What etcd holds for one LU, at rev: kept unless something newer is known. True if taken. */
static bool prc_learn(struct api_prc *p, const char *target, uint64_t lun, int64_t rev,
		      const json_t *st)
{
	char *k = prc_lu(target, lun);
	const json_t *cur = k ? json_object_get(p->lus, k) : NULL;
	bool take = k && (!cur || api_etcd_int(cur, "rev", 0) < rev);

	if (take) {
		if (st)
			json_object_set_new(p->lus, k, prc_entry(target, lun, rev, st));
		else
			json_object_del(p->lus, k);
	}
	free(k);
	return take;
}

static void prc_resolve(struct api_prc *p, const char *target, uint64_t lun, int64_t rev);
static bool prc_own_echo(const struct api_prc *p, const char *target, uint64_t lun, int64_t rev);

void api_prc_kv(struct api_prc *p, const char *rel, const char *value, int64_t mod_rev)
{
	const char *why = NULL;
	json_t *st = NULL;
	char *target = NULL, *k;
	uint64_t lun;

	if (!p)
		return;
	if (prc_parse_rel(rel, &target, &lun)) {
		gw_warn_rl("cluster", "%s/pr/%s: not a reservation key (pr/TARGET/LUN): ignored",
			   p->prefix, rel);
		return;
	}
	if (value && !(st = prc_parse_state(value, &why))) {
		/* Not pushed: the gateway keeps what it has; its next commit there conflicts and
		 * fails unavailable, naming the field, until the key is mended. */
		gw_warn_rl("cluster", "%s/pr/%s: not a reservation state (%s): ignored", p->prefix,
			   rel, why);
		free(target);
		return;
	}
	if (p->snap) {
		k = prc_lu(target, lun);
		if (k && st)
			json_object_set_new(p->snap, k, prc_entry(target, lun, mod_rev, st));
		free(k);
	} else {
		/* The echo of this gateway's own commit is not pushed: it has it from the
		 * answer (which may still wait for the other members). */
		bool own = prc_own_echo(p, target, lun, mod_rev), later = false;

		if (prc_learn(p, target, lun, mod_rev, st) && !own)
			later = prc_push(p, target, lun, mod_rev, st);
		prc_resolve(p, target, lun, mod_rev);
		/* Acknowledged once the gateway applied it (or at once: nothing to push). */
		if (!later)
			prc_ack_send(p, mod_rev);
	}
	json_decref(st);
	free(target);
}

void api_prc_list_begin(struct api_prc *p)
{
	if (!p)
		return;
	json_decref(p->snap);
	p->snap = json_object();
}

void api_prc_list_end(struct api_prc *p, int64_t rev)
{
	json_t *snap, *e, *cur;
	const char *k;

	if (!p || !p->snap)
		return;
	snap = p->snap;
	p->snap = NULL;
	/* A commit answered after the list was read is newer than it: kept. */
	json_object_foreach(p->lus, k, cur) {
		e = json_object_get(snap, k);
		if (api_etcd_int(cur, "rev", 0) > (e ? api_etcd_int(e, "rev", 0) : rev))
			json_object_set(snap, k, cur);
	}
	if (p->gw_sent) {
		/* What the watch missed (it was down): the changes, and the keys gone. */
		json_object_foreach(snap, k, e) {
			cur = json_object_get(p->lus, k);
			if (!cur || api_etcd_int(cur, "rev", 0) < api_etcd_int(e, "rev", 0))
				prc_push(p, json_string_value(json_object_get(e, "target")),
					 (uint64_t)json_integer_value(json_object_get(e, "lun")),
					 api_etcd_int(e, "rev", 0), json_object_get(e, "state"));
		}
		json_object_foreach(p->lus, k, cur)
			if (!json_object_get(snap, k))
				prc_push(p, json_string_value(json_object_get(cur, "target")),
					 (uint64_t)json_integer_value(json_object_get(cur, "lun")),
					 rev, NULL);
	}
	json_decref(p->lus);
	p->lus = snap;
	p->listed = true;
	prc_resolve(p, NULL, 0, rev);
	prc_ack_send(p, rev);
	if (p->gw_up && !p->gw_sent)
		prc_send_all(p);
}

void api_prc_gw_up(struct api_prc *p)
{
	if (!p)
		return;
	p->gw_up = true;
	p->gw_sent = false;
	/* Even a list from before etcd went away beats per-gateway reservations: commits fail
	 * unavailable until etcd is back, and the next list brings the gateway up to date. */
	if (p->listed)
		prc_send_all(p);
}

void api_prc_gw_applied(struct api_prc *p)
{
	/* A gateway that restarted took the set before its LUNs existed (pr_cluster right after
	 * the watch; the configuration comes a round trip later): they take it now. */
	if (p && p->gw_sent)
		prc_send_all(p);
}

/* ---- commits ------------------------------------------------------------------------------ */

static void prc_commit_free(struct prc_commit *cm)
{
	gw_list_del(&cm->node);
	free(cm->target);
	json_decref(cm->state);
	free(cm);
}

static void prc_arm(struct api_prc *p)
{
	struct prc_commit *cm;
	uint64_t now = gw_now_ms();

	if (gw_list_empty(&p->commits)) {
		gw_timer_disarm(&p->timer);
		return;
	}
	cm = gw_list_first_entry(&p->commits, struct prc_commit, node);
	gw_timer_arm(&p->timer, cm->deadline_ms > now ? cm->deadline_ms - now : 1, 0);
}

static void prc_unavailable(struct api_prc *p, json_int_t id, const char *why)
{
	prc_send(p, json_pack("{s:s, s:I, s:s, s:s}", "op", "pr_result", "commit", id, "result",
			      "unavailable", "reason", why), on_result_reply);
}

static void prc_answer_ok(struct api_prc *p, struct prc_commit *cm)
{
	prc_learn(p, cm->target, cm->lun, cm->rev, cm->state);
	prc_send(p, json_pack("{s:s, s:I, s:s, s:I}", "op", "pr_result", "commit", cm->id,
			      "result", "ok", "rev", (json_int_t)cm->rev), on_result_reply);
}

/* Every other live member's gateway has the states up to rev (no barrier: true). */
static bool prc_acked(const struct api_prc *p, int64_t rev)
{
	const char *id;
	json_t *v;

	if (!p->live || !p->self)
		return true;
	json_object_foreach((json_t *)p->live, id, v) {
		if (!strcmp(id, p->self))
			continue;
		if (!json_object_get(p->acks, id) ||
		    json_integer_value(json_object_get(p->acks, id)) < rev)
			return false;
	}
	return true;
}

/* Commits past the barrier: answered ok. */
static void prc_settle(struct api_prc *p)
{
	struct prc_commit *cm, *tmp;

	gw_list_for_each_entry_safe(cm, tmp, &p->commits, node)
		if (cm->committed && cm->echoed && prc_acked(p, cm->rev)) {
			prc_answer_ok(p, cm);
			prc_commit_free(cm);
		}
	prc_arm(p);
}

static bool prc_own_echo(const struct api_prc *p, const char *target, uint64_t lun, int64_t rev)
{
	const struct prc_commit *cm;

	gw_list_for_each_entry(cm, &p->commits, node)
		if (cm->committed && cm->rev == rev && cm->lun == lun &&
		    !strcmp(cm->target, target))
			return true;
	return false;
}

/* Commits whose revision the watch (or a list) has now reached. */
static void prc_resolve(struct api_prc *p, const char *target, uint64_t lun, int64_t rev)
{
	struct prc_commit *cm;

	gw_list_for_each_entry(cm, &p->commits, node)
		if (cm->committed && cm->rev <= rev &&
		    (!target || (cm->lun == lun && !strcmp(cm->target, target))))
			cm->echoed = true;
	prc_settle(p);
}

static void on_acked(void *ctx, int err, json_t *resp)
{
	struct api_prc *p = ctx;
	int64_t want = p->ack_want;

	(void)resp;
	if (err)
		gw_dbg("cluster", "reservations acknowledgement not written: %s", strerror(-err));
	p->ack_sent = 0;
	p->ack_want = 0;
	if (want)
		prc_ack_send(p, want);
}

/* PREFIX/pr_acks/SELF = rev: this member's gateway has (been sent) the states up to rev. One
 * put at a time; a newer revision meanwhile goes after it. */
static void prc_ack_send(struct api_prc *p, int64_t rev)
{
	char *key = NULL, val[24];

	if (!p->self || !p->live || rev <= p->ack_done)
		return;
	if (p->ack_sent) {
		if (rev > p->ack_sent && rev > p->ack_want)
			p->ack_want = rev;
		return;
	}
	if (asprintf(&key, "%s/pr_acks/%s", p->prefix, p->self) < 0)
		return;
	snprintf(val, sizeof(val), "%lld", (long long)rev);
	if (api_etcd_post(p->etcd, "/v3/kv/put",
			  api_etcd_put_req(key, val, p->lease ? *p->lease : 0), on_acked, p) == 0) {
		p->ack_sent = rev;
		p->ack_done = rev;
	}
	free(key);
}

void api_prc_ack(struct api_prc *p, const char *id, const char *value)
{
	if (!p || !id || !*id)
		return;
	if (value)
		json_object_set_new(p->acks, id, json_integer(strtoll(value, NULL, 10)));
	else
		json_object_del(p->acks, id);
	prc_settle(p);
}

static void on_commit_done(void *ctx, int err, json_t *resp)
{
	struct prc_commit *cm = ctx;
	struct api_prc *p = cm->p;
	const json_t *range;
	const char *why = NULL;
	char *k = NULL, *v = NULL, reason[300];
	json_t *st = NULL;
	const json_t *cur;
	int64_t rev = 0;
	char *lu;
	int r;

	if (err) {
		snprintf(reason, sizeof(reason), "etcd %s", err == -EPROTO ?
			 "refused the commit" : api_etcd_down(p->etcd) ? "is unreachable" :
			 "did not answer in time");
		gw_warn_rl("cluster", "PERSISTENT RESERVE OUT on %s LUN %" PRIu64 " not committed: "
			   "%s", cm->target, cm->lun, reason);
		prc_unavailable(p, cm->id, reason);
		goto out;
	}
	if (json_is_true(json_object_get(resp, "succeeded"))) {
		/* The put's revision is the txn's. The answer waits for the watch to bring it
		 * back: every agent's watch gets it from etcd at once, so by the time the host
		 * hears GOOD and asks another gateway, that gateway's agent has had as long to
		 * hand it the state (a wait bounded by the deadline, then answered anyway). */
		cm->committed = true;
		cm->rev = api_etcd_int(json_object_get(resp, "header"), "revision", 0);
		lu = prc_lu(cm->target, cm->lun);
		cur = lu ? json_object_get(p->lus, lu) : NULL;
		free(lu);
		cm->echoed = cur && api_etcd_int(cur, "rev", 0) >= cm->rev;
		prc_settle(p);	/* answers it, or it waits for the barrier */
		return;
	}
	/* Another commit won: its state, read in the same txn (absent: the empty one, rev 0). */
	range = json_object_get(json_array_get(json_object_get(resp, "responses"), 0),
				"response_range");
	r = api_etcd_kv(range, 0, &k, &v, &rev);
	if (r == -ENOENT) {
		rev = 0;
	} else if (r) {
		why = "its answer is unreadable";
	} else if (!(st = prc_parse_state(v, &why))) {
		snprintf(reason, sizeof(reason), "the state in etcd at %s is not valid: %s", k, why);
		why = reason;
	}
	if (why) {
		gw_warn_rl("cluster", "PERSISTENT RESERVE OUT on %s LUN %" PRIu64 ": %s",
			   cm->target, cm->lun, why);
		prc_unavailable(p, cm->id, why);
		goto out;
	}
	if (st)
		prc_learn(p, cm->target, cm->lun, rev, st);
	prc_send(p, json_pack("{s:s, s:I, s:s, s:I, s:O?}", "op", "pr_result", "commit", cm->id,
			      "result", "conflict", "rev", (json_int_t)rev, "state", st),
		 on_result_reply);
out:
	json_decref(st);
	free(k);
	free(v);
	prc_commit_free(cm);
	prc_arm(p);
}

/* The oldest commits past their deadline: the gateway hears "unavailable" now. */
static void prc_on_timer(struct gw_timer *t)
{
	struct api_prc *p = gw_container_of(t, struct api_prc, timer);
	uint64_t now = gw_now_ms();
	struct prc_commit *cm;
	char reason[80];

	while (!gw_list_empty(&p->commits)) {
		cm = gw_list_first_entry(&p->commits, struct prc_commit, node);
		if (cm->deadline_ms > now)
			break;
		if (cm->committed) {
			/* In etcd: GOOD, even though the watch has not brought it back yet. */
			gw_dbg("cluster", "commit %lld at revision %lld answered without its echo",
			       (long long)cm->id, (long long)cm->rev);
			prc_answer_ok(p, cm);
			prc_commit_free(cm);
			continue;
		}
		api_etcd_cancel_ctx(p->etcd, cm);
		snprintf(reason, sizeof(reason), "etcd did not answer within %u ms", p->commit_ms);
		gw_warn_rl("cluster", "PERSISTENT RESERVE OUT on %s LUN %" PRIu64 " not committed: "
			   "%s", cm->target, cm->lun, reason);
		prc_unavailable(p, cm->id, reason);
		prc_commit_free(cm);
	}
	prc_arm(p);
}

/* The proposal's fields; NULL when they hold, otherwise why not (into buf). */
static const char *prc_commit_check(const json_t *data, char *buf, size_t len)
{
	const char *target = json_string_value(json_object_get(data, "target")), *why;
	const json_t *lun = json_object_get(data, "lun"), *rev = json_object_get(data, "rev");

	if (!target || !*target || strchr(target, '/') || strchr(target, '\n'))
		return "target: the target's name";
	if (!json_is_integer(lun) || json_integer_value(lun) < 0)
		return "lun: an integer 0 or more";
	if (!json_is_integer(rev) || json_integer_value(rev) < 0)
		return "rev: the revision the state was computed from, 0 or more";
	if (api_pr_state_check(json_object_get(data, "state"), &why)) {
		snprintf(buf, len, "the proposed state is not valid: %s", why);
		return buf;
	}
	return NULL;
}

void api_prc_commit(struct api_prc *p, const json_t *data, const char *why)
{
	const json_t *idv = json_object_get(data, "id");
	struct prc_commit *cm = NULL;
	char buf[300], *key = NULL;
	json_int_t id;
	int r;

	if (!p)
		return;
	if (!json_is_integer(idv)) {
		gw_warn_rl("cluster", "a pr_commit event without an id: nothing to answer");
		return;
	}
	id = json_integer_value(idv);
	if (!why)
		why = prc_commit_check(data, buf, sizeof(buf));
	if (why) {
		gw_warn_rl("cluster", "pr_commit %lld from the gateway refused: %s", (long long)id,
			   why);
		prc_unavailable(p, id, why);
		return;
	}
	cm = calloc(1, sizeof(*cm));
	if (cm) {
		gw_list_init(&cm->node);
		cm->p = p;
		cm->id = id;
		cm->target = strdup(json_string_value(json_object_get(data, "target")));
		cm->lun = (uint64_t)json_integer_value(json_object_get(data, "lun"));
		cm->state = json_deep_copy(json_object_get(data, "state"));
	}
	if (cm && cm->target)
		key = api_pr_key(p->prefix, cm->target, cm->lun);
	r = cm && cm->target && cm->state && key ?
	    api_etcd_post(p->etcd, "/v3/kv/txn",
			  api_pr_cas_txn(key, cm->state,
					 json_integer_value(json_object_get(data, "rev"))),
			  on_commit_done, cm) : -ENOMEM;
	free(key);
	if (r) {
		if (cm)
			prc_commit_free(cm);
		gw_warn_rl("cluster", "pr_commit %lld not sent to etcd: %s", (long long)id,
			   strerror(-r));
		prc_unavailable(p, id, "the agent could not send the commit to etcd");
		return;
	}
	cm->deadline_ms = gw_now_ms() + p->commit_ms;
	gw_list_add_tail(&p->commits, &cm->node);
	if (cm->node.prev == &p->commits)
		prc_arm(p);
}

/* Without an answer: the gateway fails what it asked on its own (the connection is gone). */
static void prc_drop_commits(struct api_prc *p)
{
	struct prc_commit *cm;

	while (!gw_list_empty(&p->commits)) {
		cm = gw_list_first_entry(&p->commits, struct prc_commit, node);
		api_etcd_cancel_ctx(p->etcd, cm);
		prc_commit_free(cm);
	}
	gw_timer_disarm(&p->timer);
}

void api_prc_gw_lost(struct api_prc *p)
{
	if (!p)
		return;
	p->gw_up = false;
	p->gw_sent = false;
	/* A commit in flight may still land: the watch tells the gateway when it is back. */
	prc_drop_commits(p);
}

/* ---- LUNs deleted from the configuration ----------------------------------------------------- */

static bool prc_lu_configured(const json_t *config, const char *target, uint64_t lun)
{
	const json_t *t, *l;
	size_t i, j;

	json_array_foreach(json_object_get(config, "targets"), i, t) {
		if (strcmp(json_string_value(json_object_get(t, "name")) ?: "", target))
			continue;
		json_array_foreach(json_object_get(t, "luns"), j, l)
			if (json_is_integer(json_object_get(l, "lun")) &&
			    (uint64_t)json_integer_value(json_object_get(l, "lun")) == lun)
				return true;
	}
	return false;
}

static void on_swept(void *ctx, int err, json_t *resp)
{
	(void)ctx;
	(void)resp;
	/* Lost to a change (another agent swept first, the LU came back): nothing to do. */
	if (err)
		gw_dbg("cluster", "a reservation key of a deleted LUN was not removed: %s",
		       strerror(-err));
}

/* Deletes key only while PREFIX/config is still at cfg_rev (the LU still absent) and the key
 * still at rev (no commit since). */
static json_t *prc_sweep_txn(const char *cfg_key, int64_t cfg_rev, const char *key, int64_t rev)
{
	char *cb = api_b64_encode(cfg_key, strlen(cfg_key)), *kb = api_b64_encode(key, strlen(key));
	char crev[24], krev[24];
	json_t *txn = NULL;

	snprintf(crev, sizeof(crev), "%lld", (long long)cfg_rev);
	snprintf(krev, sizeof(krev), "%lld", (long long)rev);
	if (cb && kb)
		txn = json_pack("{s:[{s:s, s:s, s:s, s:s}, {s:s, s:s, s:s, s:s}], "
				"s:[{s:{s:s}}]}", "compare", "key", cb, "target", "MOD", "result",
				"EQUAL", "mod_revision", crev, "key", kb, "target", "MOD",
				"result", "EQUAL", "mod_revision", krev, "success",
				"request_delete_range", "key", kb);
	free(cb);
	free(kb);
	return txn;
}

void api_prc_sweep(struct api_prc *p, const json_t *config, int64_t cfg_rev)
{
	char *cfg_key = NULL, *key;
	const char *k, *target;
	json_t *e;
	uint64_t lun;

	if (!p || cfg_rev <= 0 || p->snap || !json_is_object(config) ||
	    asprintf(&cfg_key, "%s/config", p->prefix) < 0)
		return;
	json_object_foreach(p->lus, k, e) {
		target = json_string_value(json_object_get(e, "target"));
		lun = (uint64_t)json_integer_value(json_object_get(e, "lun"));
		if (!target || prc_lu_configured(config, target, lun))
			continue;
		key = api_pr_key(p->prefix, target, lun);
		if (!key)
			continue;
		gw_info("cluster", "LUN %" PRIu64 " of %s is no longer configured: its reservations "
			"leave etcd", lun, target);
		api_etcd_post(p->etcd, "/v3/kv/txn",
			      prc_sweep_txn(cfg_key, cfg_rev, key, api_etcd_int(e, "rev", 0)),
			      on_swept, p);
		free(key);
	}
	free(cfg_key);
}

/* ---- life ------------------------------------------------------------------------------- */

int api_prc_create(const struct api_prc_conf *conf, struct api_prc **out)
{
	struct api_prc *p = calloc(1, sizeof(*p));
	int r;

	if (!p)
		return -ENOMEM;
	gw_list_init(&p->commits);
	gw_list_init(&p->waits);
	p->loop = conf->loop;
	p->etcd = conf->etcd;
	p->gw_call = conf->gw_call;
	p->ag = conf->ag;
	p->commit_ms = API_PRC_COMMIT_MS;
	p->self = conf->self;
	p->live = conf->live;
	p->lease = conf->lease;
	p->prefix = strdup(conf->prefix);
	p->lus = json_object();
	p->acks = json_object();
	if (!p->prefix || !p->lus || !p->acks) {
		r = -ENOMEM;
		goto fail;
	}
	r = gw_timer_init(&p->timer, conf->loop, prc_on_timer);
	if (r)
		goto fail;
	*out = p;
	return 0;
fail:
	free(p->prefix);
	json_decref(p->lus);
	json_decref(p->acks);
	free(p);
	return r;
}

void api_prc_destroy(struct api_prc *p)
{
	if (!p)
		return;
	prc_drop_commits(p);
	api_etcd_cancel_ctx(p->etcd, p);
	gw_timer_fini(&p->timer);
	/* Their answers come after this (the gateway's client stops later): detached. */
	while (!gw_list_empty(&p->waits)) {
		struct prc_wait *w = gw_list_first_entry(&p->waits, struct prc_wait, node);

		gw_list_del(&w->node);
		w->p = NULL;
	}
	json_decref(p->lus);
	json_decref(p->snap);
	json_decref(p->acks);
	free(p->prefix);
	free(p);
}
