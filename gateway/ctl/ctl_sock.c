// SPDX-License-Identifier: MIT
/*
 * Control socket server. Clients are few (the agent, an operator with socat), so each gets a
 * plain input and output buffer; a request is handled as soon as its line is complete, and
 * the reply is queued behind earlier ones, which keeps replies in request order.
 *
 * The fence (op "lease", docs/CLUSTER.md): a cluster agent says with every renewal of its etcd
 * lease how long this gateway's ownership stays valid; a CLOCK_MONOTONIC timer fires at that
 * deadline less gateway.fence_margin_ms and, unless a renewal came first, every SCSI device
 * reports its local groups standby (scsi_dev_set_fenced) until the next renewal.
 *
 * Cluster-wide persistent reservations (docs/CLUSTER.md): once the agent sent "pr_cluster",
 * every SCSI device decides PR OUT on the states the agent hands over ("pr_cluster", "pr") and
 * proposes each change as a "pr_commit" event to the watchers; "pr_result" answers it. A
 * commit without an answer within CTL_PR_TIMEOUT_MS, or whose watchers all went, fails.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctl_priv.h"
#include "gw_buf.h"
#include "gw_log.h"
#include "net.h"
#include "scsi.h"

#define CTL_LINE_MAX (16u << 20)
/* A watcher that lets this much pile up unread is dropped (ctl.h says why). */
#define CTL_WATCH_BACKLOG_DEFAULT (1u << 20)
/* A PR OUT's commit without an answer by then fails 02/04/0A (hosts retry). */
#define CTL_PR_TIMEOUT_MS 5000
#define CTL_PR_TICK_MS 250

/* A pr_commit event out, waiting for its pr_result. */
struct ctl_pr_commit {
	struct gw_list node;		/* in ctl_sock.pr_commits, oldest first */
	uint64_t id;
	struct scsi_dev *dev;		/* compared with the targets' before use */
	uint64_t lun;
	uint64_t deadline_ms;
};

struct ctl_client {
	struct gw_list node;
	struct ctl_sock *s;
	int fd;
	struct gw_watch w;
	struct gw_buf in, out;
	struct gw_close cl;
	bool closing;
	bool watching;			/* "watch": gets the network model's events */
};

struct ctl_sock {
	struct gw_loop *loop;
	struct ctl_gw *gw;
	struct ctl_gateway_conf gconf;
	char *path;
	int fd;
	struct gw_watch w;
	struct gw_list clients;
	uint64_t applies;
	uint64_t client_applies;	/* of those, by a client of the socket (the agent) */
	struct net_mon *net;		/* not owned; NULL: no "net" in state */
	struct ctl_loops *loops;	/* not owned; NULL: no "loops" in state */
	/* The fence: leased once an agent gave a lease (a gateway alone is never fenced). */
	struct gw_timer fence;
	bool leased, fenced;
	uint64_t fence_at_ms;		/* monotonic: when the fence falls without a renewal */
	uint64_t fences;		/* times it fell */
	uint64_t watch_events;		/* events sent to watchers */
	uint64_t watch_drops;		/* watchers dropped for not reading */
	size_t watch_backlog;		/* bytes unsent before a watcher is dropped */
	/* Cluster-wide persistent reservations: on once "pr_cluster" said so. */
	bool pr_cluster;
	uint64_t pr_next_id;
	struct gw_list pr_commits;	/* struct ctl_pr_commit */
	struct gw_timer pr_timer;	/* ticks while commits are out */
	struct gw_defer pr_cancel;	/* the last watcher went: fail what is out */
	uint64_t pr_sent, pr_ok, pr_conflicts, pr_failed;
};

/* ---- the running configuration as JSON --------------------------------------------- */

static json_t *dump_chap(const struct isc_chap_conf *c, bool mask)
{
	return gw_conf_to_json(conf_chap_keys, c, mask);
}

static json_t *dump_target(const struct isc_target_conf *t, bool mask)
{
	json_t *o = gw_conf_to_json(conf_target_keys, t, mask), *a;
	size_t i;

	if (!o)
		return NULL;
	a = json_array();
	for (i = 0; i < t->ninitiators; i++) {
		json_t *e = gw_conf_to_json(conf_initiator_keys, &t->initiators[i], mask);

		json_object_set_new(e, "chap", dump_chap(&t->initiators[i].chap, mask));
		json_array_append_new(a, e);
	}
	json_object_set_new(o, "initiators", a);
	json_object_set_new(o, "chap", dump_chap(&t->chap, mask));
	json_object_set_new(o, "params", gw_conf_to_json(conf_param_keys, &t->params, mask));
	a = json_array();
	for (i = 0; i < t->nluns; i++) {
		json_t *e = gw_conf_to_json(conf_lu_keys, &t->luns[i].lu, mask);

		/* conf_bs_to_json: a remote backstore's policies and paths come with it. */
		json_object_set_new(e, "backstore", conf_bs_to_json(&t->luns[i].bs, mask));
		json_array_append_new(a, e);
	}
	json_object_set_new(o, "luns", a);
	return o;
}

json_t *ctl_config_dump(const struct isc_gw_conf *c, const struct ctl_gateway_conf *g,
			bool mask_secrets)
{
	json_t *root = json_object(), *a, *d;
	size_t i;

	if (!root)
		return NULL;
	if (g)
		json_object_set_new(root, "gateway", gw_conf_to_json(conf_gateway_keys, g,
								     mask_secrets));
	a = json_array();
	for (i = 0; i < c->nportals; i++)
		json_array_append_new(a, gw_conf_to_json(conf_portal_keys, &c->portals[i],
							 mask_secrets));
	json_object_set_new(root, "portals", a);
	d = gw_conf_to_json(conf_discovery_keys, &c->discovery, mask_secrets);
	json_object_set_new(d, "chap", dump_chap(&c->discovery.chap, mask_secrets));
	json_object_set_new(root, "discovery", d);
	a = json_array();
	for (i = 0; i < c->ntargets; i++)
		json_array_append_new(a, dump_target(&c->targets[i], mask_secrets));
	json_object_set_new(root, "targets", a);
	if (c->ngroups) {
		a = json_array();
		for (i = 0; i < c->ngroups; i++)
			json_array_append_new(a, gw_conf_to_json(conf_group_keys, &c->groups[i],
								 mask_secrets));
		json_object_set_new(root, "cluster", json_pack("{s:o}", "groups", a));
	}
	return root;
}

static json_t *fail(const char *code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static json_t *fail(const char *code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return json_pack("{s:b, s:s, s:s}", "ok", 0, "code", code, "message", msg);
}

/* ---- the fence ----------------------------------------------------------------------- */

static void fence_set(struct ctl_sock *cs, bool on)
{
	struct isc_target *t = NULL;

	while ((t = isc_gw_next_target(cs->gw->isc, t)))
		scsi_dev_set_fenced(isc_target_dev(t), on);
	if (on == cs->fenced)
		return;
	cs->fenced = on;
	if (on) {
		cs->fences++;
		gw_warn("ctl", "fenced: no lease renewal from the agent %u ms before the "
			"deadline; every LUN reports ALUA standby (fence %llu)",
			cs->gconf.fence_margin_ms, (unsigned long long)cs->fences);
	} else {
		gw_info("ctl", "lease renewed: fence lifted, LUNs report their computed states");
	}
}

static void on_fence(struct gw_timer *t)
{
	struct ctl_sock *cs = gw_container_of(t, struct ctl_sock, fence);

	fence_set(cs, true);
}

/* {"op":"lease","valid_ms":N}: this gateway's ownership is valid for N ms from now. */
static json_t *op_lease(struct ctl_sock *cs, const json_t *req)
{
	const json_t *v = json_object_get(req, "valid_ms");
	uint64_t valid, margin = cs->gconf.fence_margin_ms;

	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > 3600000)
		return fail("bad_request", "lease needs an integer \"valid_ms\" (0..3600000)");
	valid = (uint64_t)json_integer_value(v);
	cs->leased = true;
	if (valid <= margin) {
		gw_timer_disarm(&cs->fence);
		cs->fence_at_ms = gw_now_ms();
		fence_set(cs, true);
	} else {
		cs->fence_at_ms = gw_now_ms() + valid - margin;
		gw_timer_arm(&cs->fence, valid - margin, 0);
		fence_set(cs, false);
	}
	return json_pack("{s:b, s:b}", "ok", 1, "fenced", cs->fenced);
}

static json_t *fence_json(struct ctl_sock *cs)
{
	uint64_t now = gw_now_ms();

	return json_pack("{s:b, s:b, s:I, s:i, s:I}", "leased", cs->leased, "fenced", cs->fenced,
			 "fence_in_ms", (json_int_t)(cs->leased && !cs->fenced &&
						     cs->fence_at_ms > now ?
						     cs->fence_at_ms - now : 0),
			 "margin_ms", (int)cs->gconf.fence_margin_ms, "fences",
			 (json_int_t)cs->fences);
}

/* ---- live state ---------------------------------------------------------------------- */

static json_t *pr_json(struct ctl_sock *cs);

/* Each loop's CPU and connections (ctl_loops_state), with its index and its sessions counted
 * from the sessions' "loop". With one loop the portals place nothing, so its connections are
 * the gateway's. */
static json_t *loops_json(struct ctl_sock *cs, json_t *sessions)
{
	json_t *a = ctl_loops_state(cs->loops), *l, *s;
	size_t i, j;

	json_array_foreach(a, i, l) {
		json_int_t n = 0;

		json_array_foreach(sessions, j, s)
			if (json_integer_value(json_object_get(s, "loop")) == (json_int_t)i)
				n++;
		json_object_set_new(l, "index", json_integer((json_int_t)i));
		json_object_set_new(l, "sessions", json_integer(n));
		if (json_array_size(a) == 1)
			json_object_set_new(l, "connections",
					    json_integer((json_int_t)isc_gw_nconns(cs->gw->isc)));
	}
	return a;
}

/* The iSCSI layer's state, plus per-session transport and peer (from the first connection)
 * so clients can show a session on one line. */
static json_t *state_json(struct ctl_sock *cs)
{
	json_t *st = ctl_gw_state(cs->gw), *s;
	size_t i;

	if (!st)
		return fail("internal", "out of memory");
	json_array_foreach(json_object_get(st, "sessions"), i, s) {
		json_t *c0 = json_array_get(json_object_get(s, "connections"), 0);
		json_t *tr = json_object_get(c0, "transport");

		/* A session between connections has none: "" (a new reference, not leaked). */
		json_object_set_new(s, "transport", tr ? json_incref(tr) : json_string(""));
		if (json_object_get(c0, "peer"))
			json_object_set(s, "peer", json_object_get(c0, "peer"));
	}
	json_object_set_new(st, "ok", json_true());
	json_object_set_new(st, "applies", json_integer((json_int_t)cs->applies));
	if (cs->net)
		json_object_set_new(st, "net", net_mon_json(cs->net));
	if (cs->loops)
		json_object_set_new(st, "loops", loops_json(cs, json_object_get(st, "sessions")));
	json_object_set_new(st, "fence", fence_json(cs));
	json_object_set_new(st, "watch", json_pack("{s:I, s:I}", "events",
						   (json_int_t)cs->watch_events, "drops",
						   (json_int_t)cs->watch_drops));
	json_object_set_new(st, "pr", pr_json(cs));
	return st;
}

/* ---- cluster-wide persistent reservations --------------------------------------------- */

static void watch_send(struct ctl_sock *s, const char *type, json_t *data);

static bool has_watcher(struct ctl_sock *cs)
{
	struct ctl_client *c;

	gw_list_for_each_entry(c, &cs->clients, node)
		if (c->watching && !c->closing)
			return true;
	return false;
}

static struct isc_target *target_by_name(struct ctl_sock *cs, const char *name)
{
	struct isc_target *t = NULL;

	while ((t = isc_gw_next_target(cs->gw->isc, t)))
		if (!strcmp(isc_target_conf(t)->name, name))
			return t;
	return NULL;
}

/* The target whose device dev is, live or draining; NULL once it is gone. */
static struct isc_target *target_by_dev(struct ctl_sock *cs, const struct scsi_dev *dev)
{
	struct isc_target *t = NULL;

	while ((t = isc_gw_next_target(cs->gw->isc, t)))
		if (isc_target_dev(t) == dev)
			return t;
	while ((t = isc_gw_next_draining(cs->gw->isc, t)))
		if (isc_target_dev(t) == dev)
			return t;
	return NULL;
}

static void pr_finish(struct ctl_sock *cs, struct ctl_pr_commit *pc,
		      enum scsi_pr_commit_result res, uint64_t rev, const json_t *state)
{
	gw_list_del(&pc->node);
	if (res == SCSI_PR_COMMIT_OK)
		cs->pr_ok++;
	else if (res == SCSI_PR_COMMIT_CONFLICT)
		cs->pr_conflicts++;
	else
		cs->pr_failed++;
	if (target_by_dev(cs, pc->dev))
		scsi_dev_pr_commit_done(pc->dev, pc->lun, res, rev, state);
	free(pc);
	if (gw_list_empty(&cs->pr_commits))
		gw_timer_disarm(&cs->pr_timer);
}

static void pr_fail_all(struct ctl_sock *cs, const char *why)
{
	while (!gw_list_empty(&cs->pr_commits)) {
		struct ctl_pr_commit *pc =
			gw_list_first_entry(&cs->pr_commits, struct ctl_pr_commit, node);

		gw_warn_rl("ctl", "reservation commit %llu (LUN %llu) fails: %s",
			(unsigned long long)pc->id, (unsigned long long)pc->lun, why);
		pr_finish(cs, pc, SCSI_PR_COMMIT_UNAVAILABLE, 0, NULL);
	}
}

static void on_pr_tick(struct gw_timer *t)
{
	struct ctl_sock *cs = gw_container_of(t, struct ctl_sock, pr_timer);
	uint64_t now = gw_now_ms();

	while (!gw_list_empty(&cs->pr_commits)) {
		struct ctl_pr_commit *pc =
			gw_list_first_entry(&cs->pr_commits, struct ctl_pr_commit, node);

		if (pc->deadline_ms > now)
			break;
		gw_warn_rl("ctl", "reservation commit %llu (LUN %llu): no pr_result in %u ms: NOT "
			"READY", (unsigned long long)pc->id, (unsigned long long)pc->lun,
			CTL_PR_TIMEOUT_MS);
		pr_finish(cs, pc, SCSI_PR_COMMIT_UNAVAILABLE, 0, NULL);
	}
}

static void on_pr_cancel(struct gw_defer *d)
{
	struct ctl_sock *cs = gw_container_of(d, struct ctl_sock, pr_cancel);

	if (!has_watcher(cs))
		pr_fail_all(cs, "no agent watches the control socket");
}

/* scsi_pr_cluster_ops.commit: a pr_commit event to the watchers. */
static int pr_commit(void *arg, struct scsi_dev *dev, uint64_t lun, uint64_t rev,
		     const json_t *state)
{
	struct ctl_sock *cs = arg;
	struct isc_target *t = target_by_dev(cs, dev);
	struct ctl_pr_commit *pc;
	json_t *data;

	if (!has_watcher(cs))
		return -ENOTCONN;
	if (!t)
		return -ENOENT;
	pc = calloc(1, sizeof(*pc));
	if (!pc)
		return -ENOMEM;
	data = json_pack("{s:I, s:s, s:I, s:I, s:O}", "id", (json_int_t)(cs->pr_next_id + 1),
			 "target", isc_target_conf(t)->name, "lun", (json_int_t)lun, "rev", (json_int_t)rev,
			 "state", state);
	if (!data) {
		free(pc);
		return -ENOMEM;
	}
	pc->id = ++cs->pr_next_id;
	pc->dev = dev;
	pc->lun = lun;
	pc->deadline_ms = gw_now_ms() + CTL_PR_TIMEOUT_MS;
	if (gw_list_empty(&cs->pr_commits))
		gw_timer_arm(&cs->pr_timer, CTL_PR_TICK_MS, CTL_PR_TICK_MS);
	gw_list_add_tail(&cs->pr_commits, &pc->node);
	cs->pr_sent++;
	gw_dbg("ctl", "reservation commit %llu: %s LUN %llu from revision %llu",
	       (unsigned long long)pc->id, isc_target_conf(t)->name, (unsigned long long)lun,
	       (unsigned long long)rev);
	/* A watcher dropped here for its backlog fails this commit later (pr_cancel). */
	watch_send(cs, "pr_commit", data);
	return 0;
}

static const struct scsi_pr_cluster_ops ctl_pr_ops = {
	.commit = pr_commit,
};

/* Every target's device follows cs->pr_cluster (new targets of an apply too). */
static void pr_set_mode(struct ctl_sock *cs)
{
	struct isc_target *t = NULL;

	while ((t = isc_gw_next_target(cs->gw->isc, t)))
		scsi_dev_set_pr_cluster(isc_target_dev(t), cs->pr_cluster ? &ctl_pr_ops : NULL, cs);
}

/* "rev" (an integer >= min) and "state" (an object or null) of a request or an entry. */
static json_t *pr_rev_state(const json_t *o, const char *what, json_int_t min, uint64_t *rev,
			    const json_t **state)
{
	const json_t *r = json_object_get(o, "rev");
	char why[200];

	if (!json_is_integer(r) || json_integer_value(r) < min)
		return fail("bad_request", "%s needs an integer \"rev\" (>= %lld)", what,
			    (long long)min);
	*rev = (uint64_t)json_integer_value(r);
	*state = json_object_get(o, "state");
	if (!*state || !(json_is_object(*state) || json_is_null(*state)))
		return fail("bad_request", "%s needs a \"state\" (an object or null)", what);
	if (scsi_pr_state_check(*state, why, sizeof(why)))
		return fail("invalid", "%s: state: %s", what, why);
	return NULL;
}

static json_t *pr_target_lun(const json_t *o, const char *what, const char **target,
			     uint64_t *lun)
{
	const json_t *l = json_object_get(o, "lun");

	*target = json_string_value(json_object_get(o, "target"));
	if (!*target || !json_is_integer(l) || json_integer_value(l) < 0)
		return fail("bad_request", "%s needs \"target\" (a name) and \"lun\" (an "
			    "integer >= 0)", what);
	*lun = (uint64_t)json_integer_value(l);
	return NULL;
}

/* {"op":"pr_cluster","enabled":B,"luns":[{"target","lun","rev","state"}]}: a full snapshot. */
static json_t *op_pr_cluster(struct ctl_sock *cs, const json_t *req)
{
	const json_t *en = json_object_get(req, "enabled"), *luns = json_object_get(req, "luns");
	const json_t *e, *state;
	struct isc_target *t = NULL;
	bool was = cs->pr_cluster, force;
	char what[48], why[200];
	const char *target;
	uint64_t lun, rev;
	json_t *err;
	size_t i, j;
	int applied = 0;

	if (!json_is_boolean(en))
		return fail("bad_request", "pr_cluster needs \"enabled\" (true or false)");
	if (!json_is_true(en)) {
		cs->pr_cluster = false;
		pr_fail_all(cs, "cluster reservations turned off");
		pr_set_mode(cs);
		return json_pack("{s:b}", "ok", 1);
	}
	if (!json_is_array(luns))
		return fail("bad_request", "pr_cluster needs \"luns\" (an array)");
	/* Every entry checked before anything is applied. */
	json_array_foreach(luns, i, e) {
		snprintf(what, sizeof(what), "luns[%zu]", i);
		err = pr_target_lun(e, what, &target, &lun);
		if (!err)
			err = pr_rev_state(e, what, 0, &rev, &state);
		if (err)
			return err;
	}
	cs->pr_cluster = true;
	pr_set_mode(cs);
	/* The first snapshot replaces what the gateway held alone; later ones only move on. */
	force = !was;
	while ((t = isc_gw_next_target(cs->gw->isc, t))) {
		const struct isc_target_conf *tc = isc_target_conf(t);

		for (j = 0; j < tc->nluns; j++) {
			uint64_t l = tc->luns[j].lu.lun, r = 0;
			const json_t *st = NULL;

			json_array_foreach(luns, i, e) {
				pr_target_lun(e, "", &target, &lun);
				if (lun == l && !strcmp(target, tc->name)) {
					pr_rev_state(e, "", 0, &r, &st);
					break;
				}
			}
			if (scsi_dev_pr_apply(isc_target_dev(t), l, r, st, force, why,
					      sizeof(why)) > 0)
				applied++;
		}
	}
	if (!was)
		gw_info("ctl", "persistent reservations are the cluster's (%zu LUNs in the "
			"snapshot, %d applied)", json_array_size(luns), applied);
	return json_pack("{s:b, s:i}", "ok", 1, "applied", applied);
}

/* {"op":"pr","target":T,"lun":L,"rev":R,"state":{..}|null}: a state from the etcd watch. */
static json_t *op_pr(struct ctl_sock *cs, const json_t *req)
{
	const json_t *state;
	const char *target;
	struct isc_target *t;
	uint64_t lun, rev, held = 0;
	char why[200];
	json_t *err, *st;
	int rc;

	if (!cs->pr_cluster)
		return fail("not_enabled", "cluster reservations are off: send pr_cluster first");
	err = pr_target_lun(req, "pr", &target, &lun);
	if (!err)
		err = pr_rev_state(req, "pr", 1, &rev, &state);
	if (err)
		return err;
	t = target_by_name(cs, target);
	rc = t ? scsi_dev_pr_apply(isc_target_dev(t), lun, rev, state, false, why, sizeof(why))
	       : -ENOENT;
	if (rc == -ENOENT)
		/* Another gateway's LUN, or one not built here yet: nothing to do. */
		return json_pack("{s:b, s:b}", "ok", 1, "applied", 0);
	if (rc < 0)
		return fail("invalid", "pr: state: %s", why);
	st = scsi_dev_pr_state(isc_target_dev(t), lun, &held);
	json_decref(st);
	return json_pack("{s:b, s:b, s:I}", "ok", 1, "applied", rc > 0, "rev", (json_int_t)held);
}

/* {"op":"pr_result","commit":N,"result":"ok"|"conflict"|"unavailable",...}: "commit" is the
 * pr_commit event's id ("id" is the request's own, which the reply echoes). */
static json_t *op_pr_result(struct ctl_sock *cs, const json_t *req)
{
	const json_t *idv = json_object_get(req, "commit"), *state = NULL;
	const char *res = json_string_value(json_object_get(req, "result"));
	struct ctl_pr_commit *pc = NULL, *p;
	uint64_t id, rev = 0;
	json_t *err = NULL;

	if (!json_is_integer(idv) || json_integer_value(idv) < 1)
		return fail("bad_request", "pr_result needs \"commit\": the pr_commit event's id");
	id = (uint64_t)json_integer_value(idv);
	gw_list_for_each_entry(p, &cs->pr_commits, node)
		if (p->id == id)
			pc = p;
	if (!pc)
		return fail("not_found", "no reservation commit %llu is out (answered, timed out "
			    "or cancelled)", (unsigned long long)id);
	if (!res)
		return fail("bad_request", "pr_result needs \"result\": ok, conflict or "
			    "unavailable");
	if (!strcmp(res, "ok")) {
		const json_t *r = json_object_get(req, "rev");

		if (!json_is_integer(r) || json_integer_value(r) < 1)
			return fail("bad_request", "pr_result ok needs an integer \"rev\" (>= 1)");
		pr_finish(cs, pc, SCSI_PR_COMMIT_OK, (uint64_t)json_integer_value(r), NULL);
	} else if (!strcmp(res, "conflict")) {
		err = pr_rev_state(req, "pr_result conflict", 0, &rev, &state);
		if (err) {
			/* The command is not left hanging on a winner it cannot read. */
			pr_finish(cs, pc, SCSI_PR_COMMIT_UNAVAILABLE, 0, NULL);
			return err;
		}
		pr_finish(cs, pc, SCSI_PR_COMMIT_CONFLICT, rev, state);
	} else if (!strcmp(res, "unavailable")) {
		gw_warn_rl("ctl", "reservation commit %llu: the cluster store is unavailable (%s): "
			"NOT READY", (unsigned long long)id,
			json_string_value(json_object_get(req, "reason")) ?: "no reason given");
		pr_finish(cs, pc, SCSI_PR_COMMIT_UNAVAILABLE, 0, NULL);
	} else {
		return fail("bad_request", "pr_result \"result\" is ok, conflict or unavailable, "
			    "not \"%.32s\"", res);
	}
	return json_pack("{s:b}", "ok", 1);
}

static json_t *pr_json(struct ctl_sock *cs)
{
	struct ctl_pr_commit *pc;
	int pending = 0;

	gw_list_for_each_entry(pc, &cs->pr_commits, node)
		pending++;
	return json_pack("{s:b, s:i, s:I, s:I, s:I, s:I}", "cluster", cs->pr_cluster, "pending",
			 pending, "commits", (json_int_t)cs->pr_sent,
			 "ok", (json_int_t)cs->pr_ok, "conflicts", (json_int_t)cs->pr_conflicts,
			 "failed", (json_int_t)cs->pr_failed);
}

/* ---- requests ------------------------------------------------------------------------ */

static json_t *errs_json(const char *code, const struct gw_errlist *errs)
{
	json_t *a = json_array();
	char *joined = gw_errlist_join(errs);
	json_t *o;
	size_t i;

	for (i = 0; i < errs->n; i++)
		json_array_append_new(a, json_pack("{s:s, s:s}", "field", errs->v[i].field,
						   "message", errs->v[i].msg));
	o = json_pack("{s:b, s:s, s:s, s:o}", "ok", 0, "code", code, "message",
		      joined ? joined : "refused", "errors", a);
	free(joined);
	return o;
}

/* {"op":"lun_rescan","target":IQN,"lun":N[,"shrink":true]}: the LUN's size measured again. */
static json_t *op_lun_rescan(struct ctl_sock *cs, const json_t *req)
{
	const json_t *lv = json_object_get(req, "lun");
	struct gw_errlist errs;
	bool pending = false;
	uint64_t size = 0;
	json_t *reply;
	int r;

	if (!json_is_integer(lv) || json_integer_value(lv) < 0)
		return fail("bad_request", "lun_rescan needs \"target\" and an integer \"lun\"");
	gw_errlist_init(&errs);
	r = ctl_gw_lun_rescan(cs->gw, json_string_value(json_object_get(req, "target")),
			      (uint64_t)json_integer_value(lv),
			      json_is_true(json_object_get(req, "shrink")) ? CTL_APPLY_SHRINK : 0,
			      &size, &pending, &errs);
	if (r)
		reply = errs_json(r == -ENOENT ? "not_found" : "apply_failed", &errs);
	else
		reply = json_pack("{s:b, s:I, s:b}", "ok", 1, "size", (json_int_t)size,
				  "pending", pending);
	gw_errlist_fini(&errs);
	return reply;
}

static json_t *op_apply(struct ctl_sock *cs, const json_t *req)
{
	const json_t *cfg = json_object_get(req, "config");
	struct ctl_config c;
	struct gw_errlist errs;
	json_t *reply;
	int r;

	if (!json_is_object(cfg))
		return fail("bad_request", "apply needs a \"config\" object");
	gw_errlist_init(&errs);
	if (conf_parse(cfg, &c, &errs)) {
		reply = errs_json("invalid", &errs);
		gw_errlist_fini(&errs);
		return reply;
	}
	/* "shrink": true lets a LUN's backstore get smaller in service (the agent's resize with
	 * force); otherwise that is refused, as it cuts off data hosts may hold. */
	r = ctl_gw_apply(cs->gw, c.isc, json_is_true(json_object_get(req, "shrink")) ?
			 CTL_APPLY_SHRINK : 0, &errs);
	c.isc = NULL;		/* the gateway owns it now, on success and failure */
	if (r) {
		if (!errs.n)
			gw_errlist_add(&errs, "", "%s", strerror(-r));
		reply = errs_json("apply_failed", &errs);
		gw_errlist_fini(&errs);
		conf_free(&c);
		return reply;
	}
	gw_errlist_fini(&errs);
	/* The gateway section: debug components follow the configuration; the socket path
	 * does not move while the agent is connected to it. */
	if (strcmp(c.gateway.log_debug ? c.gateway.log_debug : "",
		   cs->gconf.log_debug ? cs->gconf.log_debug : "")) {
		gw_log_set_debug(c.gateway.log_debug ? c.gateway.log_debug : "");
		free(cs->gconf.log_debug);
		cs->gconf.log_debug = c.gateway.log_debug;
		c.gateway.log_debug = NULL;
	}
	if (c.gateway.data_memory != ctl_gw_data_memory(cs->gw)) {
		gw_info("ctl", "data memory limit %llu MiB (was %llu MiB)",
			(unsigned long long)(c.gateway.data_memory >> 20),
			(unsigned long long)(ctl_gw_data_memory(cs->gw) >> 20));
		ctl_gw_set_data_memory(cs->gw, c.gateway.data_memory);
	}
	/* Read at start-up only: kept so that "config" shows what the next start will use. */
	cs->gconf.boot_wait = c.gateway.boot_wait;
	if (c.gateway.loops != cs->gconf.loops) {
		unsigned n = cs->loops ? cs->loops->set.n : 1;

		gw_info("ctl", "gateway.loops %u is read at start-up: %u loop%s until the next "
			"start", c.gateway.loops, n, n == 1 ? "" : "s");
	}
	cs->gconf.loops = c.gateway.loops;
	if (c.gateway.poll_us != cs->gconf.poll_us) {
		gw_info("ctl", "loops poll up to %u µs before sleeping (was %u µs)",
			c.gateway.poll_us, cs->gconf.poll_us);
		cs->gconf.poll_us = c.gateway.poll_us;
		if (cs->loops)
			ctl_loops_set_poll(cs->loops, c.gateway.poll_us);
		else
			gw_loop_set_poll(cs->loop, c.gateway.poll_us);
	}
	if (c.gateway.fence_margin_ms && c.gateway.fence_margin_ms != cs->gconf.fence_margin_ms) {
		gw_info("ctl", "fence margin %u ms (was %u ms)", c.gateway.fence_margin_ms,
			cs->gconf.fence_margin_ms);
		cs->gconf.fence_margin_ms = c.gateway.fence_margin_ms;
	}
	/* Targets the apply added are fenced like the others, and share reservations. */
	if (cs->fenced)
		fence_set(cs, true);
	if (cs->pr_cluster)
		pr_set_mode(cs);
	conf_free(&c);
	cs->applies++;
	/* Portals may have come or gone: their chains and verdicts follow. */
	if (cs->net)
		net_mon_set_portals(cs->net, cs->gw->conf->portals, cs->gw->conf->nportals);
	return json_pack("{s:b}", "ok", 1);
}

static json_t *op_config(struct ctl_sock *cs)
{
	/* The data memory limit lives in the gateway object, which apply updates. */
	cs->gconf.data_memory = ctl_gw_data_memory(cs->gw);
	return json_pack("{s:b, s:o}", "ok", 1, "config",
			 ctl_config_dump(cs->gw->conf, &cs->gconf, false));
}

/* {"op":"net"}: the network model alone (what "state" carries as "net"). */
static json_t *op_net(struct ctl_sock *cs)
{
	if (!cs->net)
		return fail("unavailable", "this gateway runs no network model");
	return json_pack("{s:b, s:o}", "ok", 1, "net", net_mon_json(cs->net));
}

static json_t *op_drop(struct ctl_sock *cs, const json_t *req)
{
	json_t *t = json_object_get(req, "tsih");

	if (!json_is_integer(t) || json_integer_value(t) < 1 || json_integer_value(t) > 65535)
		return fail("bad_request", "drop_session needs an integer \"tsih\" (1..65535)");
	if (isc_gw_drop_session(cs->gw->isc, (uint16_t)json_integer_value(t)))
		return fail("not_found", "no session with TSIH %lld",
			    (long long)json_integer_value(t));
	gw_info("ctl", "session %lld dropped on request", (long long)json_integer_value(t));
	return json_pack("{s:b}", "ok", 1);
}

bool ctl_sock_managed(const struct ctl_sock *s)
{
	return s && s->client_applies > 0;
}

json_t *ctl_sock_handle(struct ctl_sock *s, const json_t *req)
{
	const char *op = json_string_value(json_object_get(req, "op"));
	json_t *reply;

	if (!op)
		reply = fail("bad_request", "a request is {\"op\": \"...\", ...}");
	else if (!strcmp(op, "apply"))
		reply = op_apply(s, req);
	else if (!strcmp(op, "state"))
		reply = state_json(s);
	else if (!strcmp(op, "config"))
		reply = op_config(s);
	else if (!strcmp(op, "lun_rescan"))
		reply = op_lun_rescan(s, req);
	else if (!strcmp(op, "drop_session"))
		reply = op_drop(s, req);
	else if (!strcmp(op, "lease"))
		reply = op_lease(s, req);
	else if (!strcmp(op, "ping"))
		reply = json_pack("{s:b}", "ok", 1);
	else if (!strcmp(op, "net"))
		reply = op_net(s);
	else if (!strcmp(op, "pr_cluster"))
		reply = op_pr_cluster(s, req);
	else if (!strcmp(op, "pr"))
		reply = op_pr(s, req);
	else if (!strcmp(op, "pr_result"))
		reply = op_pr_result(s, req);
	else if (!strcmp(op, "watch"))
		/* Only a connection can watch: client_line marks it. */
		reply = s->net ? json_pack("{s:b, s:I}", "ok", 1, "generation",
					   (json_int_t)net_mon_generation(s->net))
			       : fail("unavailable", "this gateway runs no network model");
	else
		reply = fail("bad_request", "unknown op \"%.64s\"", op);
	if (reply && json_object_get(req, "id"))
		json_object_set(reply, "id", json_object_get(req, "id"));
	return reply;
}

/* ---- clients ------------------------------------------------------------------------- */

static void client_free(struct gw_close *cl)
{
	struct ctl_client *c = gw_container_of(cl, struct ctl_client, cl);

	gw_buf_fini(&c->in);
	gw_buf_fini(&c->out);
	free(c);
}

static void client_close(struct ctl_client *c)
{
	if (c->closing)
		return;
	c->closing = true;
	gw_watch_stop(&c->w);
	close(c->fd);
	gw_list_del(&c->node);
	gw_loop_close(c->s->loop, &c->cl, client_free);
	/* Commits it was to answer fail, unless another watcher is left (after this round:
	 * a watcher dropped inside pr_commit must not answer from inside it). */
	if (c->watching && !gw_list_empty(&c->s->pr_commits))
		gw_defer_queue(c->s->loop, &c->s->pr_cancel);
}

static void client_flush(struct ctl_client *c)
{
	while (c->out.len) {
		ssize_t n = send(c->fd, c->out.data, c->out.len, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			client_close(c);
			return;
		}
		gw_buf_consume(&c->out, (size_t)n);
	}
	gw_watch_set(&c->w, EPOLLIN | (c->out.len ? EPOLLOUT : 0));
}

static void client_line(struct ctl_client *c, const char *line, size_t len)
{
	json_error_t jerr;
	json_t *req, *reply;
	char *text;

	req = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!req || !json_is_object(req))
		reply =
		    fail("bad_request", "not a JSON object: %s", req ? "wrong type" : jerr.text);
	else
		reply = ctl_sock_handle(c->s, req);
	if (req && json_is_true(json_object_get(reply, "ok")) &&
	    !strcmp(json_string_value(json_object_get(req, "op")) ?: "", "apply"))
		c->s->client_applies++;
	/* Events follow the reply, never precede it. */
	if (req && json_is_true(json_object_get(reply, "ok")) &&
	    !strcmp(json_string_value(json_object_get(req, "op")) ?: "", "watch") &&
	    !c->watching) {
		c->watching = true;
		gw_dbg("ctl", "control client watches the network model");
	}
	json_decref(req);
	text = reply ? json_dumps(reply, JSON_COMPACT) : NULL;
	json_decref(reply);
	if (!text) {
		client_close(c);
		return;
	}
	gw_buf_append(&c->out, text, strlen(text));
	gw_buf_append(&c->out, "\n", 1);
	free(text);
}

static void client_read(struct ctl_client *c)
{
	for (;;) {
		uint8_t *nl;
		ssize_t n;

		if (gw_buf_reserve(&c->in, 65536)) {
			client_close(c);
			return;
		}
		n = recv(c->fd, c->in.data + c->in.len, c->in.cap - c->in.len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n <= 0) {
			client_close(c);
			return;
		}
		c->in.len += (size_t)n;
		while (!c->closing && (nl = memchr(c->in.data, '\n', c->in.len))) {
			size_t l = (size_t)(nl - c->in.data);

			client_line(c, (const char *)c->in.data, l);
			gw_buf_consume(&c->in, l + 1);
		}
		if (c->closing)
			return;
		if (c->in.len > CTL_LINE_MAX) {
			gw_warn("ctl", "control client sent a line over %u bytes: closing",
				CTL_LINE_MAX);
			client_close(c);
			return;
		}
	}
	client_flush(c);
}

static void on_client(struct gw_watch *w, uint32_t events)
{
	struct ctl_client *c = gw_container_of(w, struct ctl_client, w);

	if (events & EPOLLIN)
		client_read(c);
	else if (events & (EPOLLERR | EPOLLHUP))
		client_close(c);
	if (!c->closing && (events & EPOLLOUT))
		client_flush(c);
}

static void on_accept(struct gw_watch *w, uint32_t events)
{
	struct ctl_sock *s = gw_container_of(w, struct ctl_sock, w);
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct ctl_client *c;
	int fd;

	(void)events;
	for (;;) {
		fd = accept4(s->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		/* The file mode already keeps others out; the peer's uid says it again. */
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.uid != 0 &&
		    cred.uid != geteuid()) {
			gw_warn("ctl", "control socket: refusing uid %u", cred.uid);
			close(fd);
			continue;
		}
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		c->s = s;
		c->fd = fd;
		gw_buf_init(&c->in);
		gw_buf_init(&c->out);
		gw_watch_init(&c->w, s->loop, fd, on_client);
		gw_list_add_tail(&s->clients, &c->node);
		gw_watch_set(&c->w, EPOLLIN);
		gw_dbg("ctl", "control client connected (pid %d)", cred.pid);
	}
}

/* ---- watchers ----------------------------------------------------------------------- */

/* One network event to every watcher: {"event":TYPE,"data":{...}} on a line. A watcher whose
 * unsent output passed watch_backlog (1 MiB) is not reading: it is dropped, not buffered for. */
static void on_net_event(void *arg, const char *type, json_t *data)
{
	watch_send(arg, type, data);
}

/* One event (data is stolen) to every watcher: the network model's and "pr_commit". */
static void watch_send(struct ctl_sock *s, const char *type, json_t *data)
{
	struct ctl_client *c, *tmp;
	json_t *ev = json_pack("{s:s, s:o}", "event", type, "data", data);
	char *text = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
	size_t len = text ? strlen(text) : 0;

	json_decref(ev);
	if (!text)
		return;
	gw_list_for_each_entry_safe(c, tmp, &s->clients, node) {
		if (!c->watching || c->closing)
			continue;
		if (c->out.len + len + 1 > s->watch_backlog) {
			s->watch_drops++;
			gw_warn("ctl", "control client does not read its events (%zu bytes unsent): "
				"dropped; it reconnects and reads the model again", c->out.len);
			client_close(c);
			continue;
		}
		if (gw_buf_append(&c->out, text, len) || gw_buf_append(&c->out, "\n", 1)) {
			client_close(c);
			continue;
		}
		client_flush(c);
	}
	s->watch_events++;
	free(text);
}

int ctl_sock_create(struct gw_loop *loop, const char *path, struct ctl_gw *gw,
		    const struct ctl_gateway_conf *gconf, struct ctl_sock **out)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct ctl_sock *s;
	struct stat st;
	mode_t old;
	int r;

	if (path && strlen(path) >= sizeof(sa.sun_path)) {
		gw_err("ctl", "control socket path %s is too long", path);
		return -ENAMETOOLONG;
	}
	if (path && lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			gw_err("ctl", "%s exists and is not a socket: not replacing it", path);
			return -EEXIST;
		}
		unlink(path);
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->loop = loop;
	s->gw = gw;
	s->fd = -1;
	s->watch_backlog = CTL_WATCH_BACKLOG_DEFAULT;
	gw_list_init(&s->clients);
	gw_list_init(&s->pr_commits);
	gw_defer_init(&s->pr_cancel, on_pr_cancel);
	s->gconf.log_debug = strdup(gconf && gconf->log_debug ? gconf->log_debug : "");
	s->gconf.control_socket = strdup(path ? path : "");
	s->gconf.fence_margin_ms = gconf && gconf->fence_margin_ms ? gconf->fence_margin_ms : 1000;
	/* As configured (0: one per CPU), like boot_wait: what the next start reads. The state
	 * reply's "loops" says how many run. */
	s->gconf.loops = gconf ? gconf->loops : 0;
	s->gconf.boot_wait = gconf ? gconf->boot_wait : 0;
	s->gconf.poll_us = gconf ? gconf->poll_us : 0;
	if (!s->gconf.log_debug || !s->gconf.control_socket) {
		r = -ENOMEM;
		goto fail;
	}
	r = gw_timer_init(&s->fence, loop, on_fence);
	if (r)
		goto fail;
	r = gw_timer_init(&s->pr_timer, loop, on_pr_tick);
	if (r) {
		gw_timer_fini(&s->fence);
		goto fail;
	}
	if (!path) {
		/* No socket: the object still applies a configuration (SIGHUP) the one way. */
		*out = s;
		return 0;
	}
	s->path = strdup(path);
	strcpy(sa.sun_path, path);
	s->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->fd < 0 || !s->path) {
		r = s->fd < 0 ? -errno : -ENOMEM;
		goto fail_timer;
	}
	/* Born 0600: no window in which someone else could connect. */
	old = umask(0177);
	r = bind(s->fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0 || listen(s->fd, 16) < 0) {
		r = -errno;
		gw_err("ctl", "control socket %s: %s", path, strerror(-r));
		goto fail_timer;
	}
	gw_watch_init(&s->w, loop, s->fd, on_accept);
	r = gw_watch_set(&s->w, EPOLLIN);
	if (r)
		goto fail_timer;
	gw_info("ctl", "control socket on %s", path);
	*out = s;
	return 0;
fail_timer:
	gw_timer_fini(&s->pr_timer);
	gw_timer_fini(&s->fence);
fail:
	if (s->fd >= 0)
		close(s->fd);
	gw_conf_free(conf_gateway_keys, &s->gconf);
	free(s->path);
	free(s);
	return r;
}

void ctl_sock_set_loops(struct ctl_sock *s, struct ctl_loops *loops)
{
	s->loops = loops;
}

void ctl_sock_set_net(struct ctl_sock *s, struct net_mon *net)
{
	if (s->net)
		net_mon_set_watch(s->net, NULL, NULL);
	s->net = net;
	if (net)
		net_mon_set_watch(net, on_net_event, s);
}

void ctl_sock_set_watch_backlog(struct ctl_sock *s, size_t bytes)
{
	s->watch_backlog = bytes ? bytes : CTL_WATCH_BACKLOG_DEFAULT;
}

void ctl_sock_destroy(struct ctl_sock *s)
{
	if (!s)
		return;
	if (s->net)
		net_mon_set_watch(s->net, NULL, NULL);
	while (!gw_list_empty(&s->clients))
		client_close(gw_list_first_entry(&s->clients, struct ctl_client, node));
	gw_defer_cancel(&s->pr_cancel);
	/* The devices go back to their own reservations; a command still waiting fails. */
	if (s->pr_cluster) {
		s->pr_cluster = false;
		pr_fail_all(s, "the control socket closes");
		pr_set_mode(s);
	}
	gw_timer_fini(&s->pr_timer);
	gw_timer_fini(&s->fence);
	if (s->fd >= 0) {
		gw_watch_stop(&s->w);
		close(s->fd);
		unlink(s->path);
	}
	gw_conf_free(conf_gateway_keys, &s->gconf);
	free(s->path);
	free(s);
}
