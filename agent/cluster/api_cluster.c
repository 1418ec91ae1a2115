// SPDX-License-Identifier: MIT
/*
 * Cluster membership and LU ownership. Each agent holds an etcd lease (keepalive every TTL/3)
 * and, under it, PREFIX/members/ID = {"id", "group", "portals", "listen"}; its port group is
 * also recorded without a lease under PREFIX/groups/ID, so a member that died stays listed as
 * an unavailable group. The agent lists everything under PREFIX/ once, then watches it from the
 * listed revision (one streamed POST /v3/watch): the configuration, the members and the groups
 * arrive as they change; a lost watch (or a failed keepalive, which may mean a held
 * connection) means listing again, and a slow safety list runs anyway. A keepalive that fails
 * or times out is sent again at once (twice) while the lease has time left, no attempt going
 * beyond the lease and one that another may follow ending early enough for that one to renew
 * before the gateway fences, so one call lost under load does not cost the lease. When anything changes
 * it recomputes the owners (the same pure function on every agent, so all agree without
 * electing anyone) and pushes the resulting ALUA states to its gateway. Every etcd call is
 * asynchronous (api_etcd_post): the loop and the REST API never wait for etcd.
 *
 * Fencing (docs/CLUSTER.md): after every renewal, with the members known from a running watch,
 * the agent pushes the states first, then {"op":"lease","valid_ms":N}: the lease's deadline
 * counted from when the renewal was sent. The gateway fences itself (standby) at that deadline
 * less its margin if no renewal follows. An LU that becomes this member's stays pending (its
 * group reports transitioning) for TTL + margin after the agent first saw it so, long enough
 * for any previous owner to have released it or fenced itself; a lapsed or re-granted lease
 * starts every hold again. Every deadline is on CLOCK_MONOTONIC (gw_now_ms, timerfds): a
 * member's wall clock jumping moves none of them.
 *
 * PREFIX/cluster_id is written once, by the first member; each member keeps the id it joined
 * in its state folder and refuses a prefix that holds another (two clusters sharing one prefix).
 */
#include <errno.h>
#include <stdio.h>
#include <sys/random.h>
#include <stdlib.h>
#include <string.h>

#include "api_cluster.h"
#include "api_etcd.h"
#include "api_store.h"
#include "cluster_priv.h"
#include "gw_log.h"
#include "gw_loop.h"

struct api_cluster {
	struct api_agent *ag;		/* the callbacks' argument, opaque here */
	struct api_store *store;
	char *listen;
	struct api_etcd *etcd;		/* the store's */
	char *prefix;
	char *prefix_dir;		/* "PREFIX/": what is listed and watched */
	char *id;
	uint32_t group;
	unsigned int ttl;
	int64_t lease;			/* 0: none held */
	json_t *groups;			/* {id: group} as listed and watched */
	json_t *live;			/* {id: member value} as listed and watched */
	json_t *groups_seen, *live_seen;	/* as last pushed (a change pushes again) */
	json_t *local_portals;		/* the gateway's own portals, NULL: not known yet */
	struct gw_timer tick;
	void (*changed)(struct api_agent *ag);
	bool (*write_busy)(const struct api_agent *ag);
	void (*event)(struct api_agent *ag, const char *type, json_t *data);
	bool reachable;			/* the last keepalive or list answered */
	bool synced;			/* listed, and the watch since runs */
	bool ka_busy, list_busy;	/* a keepalive (or the join) / a list under way */
	bool cfg_changed;		/* the watch brought a new configuration */
	struct api_etcd_op *watch;
	uint64_t last_ok_ms, last_list_ms;
	uint64_t ka_sent;		/* monotonic: when the keepalive under way was sent */
	unsigned int ka_retries;	/* of this tick's keepalive, after a failed one */
	int64_t reg_lease;		/* the join under way: its lease, when asked, TTL */
	uint64_t reg_sent, reg_ttl;
	char *pending_cfg;		/* a configuration the watch saw under a write */
	int64_t pending_rev;
	bool pending;
	char *id_file;			/* the cluster id this member joined, kept locally */
	char *cluster_id;
	bool refused;			/* the prefix is another cluster's */
	char *error;			/* why (the status shows it) */
	void (*lease_cb)(struct api_agent *ag, uint64_t valid_ms);
	uint64_t valid_until_ms;	/* monotonic: the lease's deadline as last renewed */
	json_t *owned;			/* {"TARGET\nLUN": true} this member reports optimized */
	json_t *held;			/* {"TARGET\nLUN": until_ms} becoming this member's */
	char *last_push;		/* the states last pushed (a change pushes again) */
	struct api_prc *pr;		/* reservations (api_cluster_pr.c), NULL: none */
	int64_t cfg_rev;		/* PREFIX/config's revision as the store holds it */
	bool pr_sweep;			/* the configuration came in: drop the reservations of
					 * LUNs it lost */
};

/* ---- ownership (pure) -------------------------------------------------------------------- */

static uint64_t owner_hash(const char *id, const char *target, uint64_t lun)
{
	uint64_t h = 0xcbf29ce484222325ull;
	char num[24];
	const char *parts[3] = { id, target, num };

	snprintf(num, sizeof(num), "%llu", (unsigned long long)lun);
	for (int i = 0; i < 3; i++) {
		for (const char *p = parts[i]; *p; p++) {
			h ^= (unsigned char)*p;
			h *= 0x100000001b3ull;
		}
		h ^= 0xff;	/* a separator no name contains */
		h *= 0x100000001b3ull;
	}
	/* splitmix64's finalizer: FNV alone leaves similar ids close together. */
	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebull;
	h ^= h >> 31;
	return h;
}

const char *api_cluster_owner(const char *target, uint64_t lun, const char *pref,
			      const char *const *live, size_t nlive)
{
	const char *best = NULL;
	uint64_t best_h = 0;
	size_t i;

	for (i = 0; pref && *pref && i < nlive; i++)
		if (!strcmp(live[i], pref))
			return live[i];
	for (i = 0; i < nlive; i++) {
		uint64_t h = owner_hash(live[i], target, lun);

		if (!best || h > best_h || (h == best_h && strcmp(live[i], best) < 0)) {
			best = live[i];
			best_h = h;
		}
	}
	return best;
}

struct grp {
	uint32_t id;
	const char *name;
	bool live;
};

static int grp_cmp(const void *a, const void *b)
{
	const struct grp *x = a, *y = b;

	return (x->id > y->id) - (x->id < y->id);
}

json_t *api_cluster_effective(const json_t *desired, const json_t *groups, const json_t *live,
			      uint32_t self_group, const json_t *local_portals)
{
	json_t *out = json_deep_copy(desired), *garr, *t, *l, *v;
	size_t n = 0, nlive = 0, i, j, k;
	const char **ids = NULL;
	struct grp *g = NULL;
	const char *key;
	bool self = false;

	if (!out)
		return NULL;
	if (json_is_array(local_portals))
		json_object_set_new(out, "portals", json_deep_copy(local_portals));
	g = calloc(json_object_size(groups) + 1, sizeof(*g));
	ids = calloc(json_object_size(live) + 1, sizeof(*ids));
	garr = json_array();
	if (!g || !ids || !garr)
		goto nomem;
	json_object_foreach((json_t *)live, key, v)
		ids[nlive++] = key;
	json_object_foreach((json_t *)groups, key, v) {
		uint32_t id = (uint32_t)json_integer_value(v);
		bool is_live = json_object_get(live, key) != NULL;

		if (id < 1 || id > 65535)
			continue;
		/* Two names for one group (a renamed member): the live one speaks for it. */
		for (k = 0; k < n && g[k].id != id; k++)
			;
		if (k < n) {
			if (is_live && !g[k].live) {
				g[k].name = key;
				g[k].live = true;
			}
			continue;
		}
		g[n].id = id;
		g[n].name = key;
		g[n].live = is_live;
		n++;
	}
	for (k = 0; k < n; k++)
		if (g[k].id == self_group) {
			g[k].live = true;	/* this gateway serves, whatever etcd last said */
			self = true;
		}
	if (!self) {
		g[n].id = self_group;
		g[n].name = "";
		g[n].live = true;
		n++;
	}
	qsort(g, n, sizeof(*g), grp_cmp);
	for (k = 0; k < n; k++)
		json_array_append_new(garr, json_pack("{s:i, s:s, s:s}", "id", (int)g[k].id,
						      "name", g[k].name, "state",
						      g[k].live ? "active/optimized" :
						      "unavailable"));
	json_object_set_new(out, "cluster", json_pack("{s:o}", "groups", garr));
	garr = NULL;
	json_array_foreach(json_object_get(out, "targets"), i, t) {
		const char *tname = json_string_value(json_object_get(t, "name"));

		json_object_set_new(t, "tpgt", json_integer(self_group));
		json_array_foreach(json_object_get(t, "luns"), j, l) {
			const char *pref = json_string_value(json_object_get(l, "owner"));
			uint64_t lun = (uint64_t)json_integer_value(json_object_get(l, "lun"));
			const char *own = api_cluster_owner(tname ? tname : "", lun, pref, ids,
							    nlive);
			json_int_t grp = own ? json_integer_value(json_object_get(groups, own)) : 0;

			json_object_set_new(l, "owner", json_string(own ? own : ""));
			json_object_set_new(l, "alua_group", json_integer(grp > 0 && grp < 65536 ?
									  grp : 0));
		}
	}
	free(g);
	free(ids);
	return out;
nomem:
	json_decref(garr);
	free(g);
	free(ids);
	json_decref(out);
	return NULL;
}

/* ---- takeover holds (pure) ------------------------------------------------------------------ */

static char *lu_key(const json_t *t, const json_t *l)
{
	const char *tname = json_string_value(json_object_get(t, "name"));
	char *k = NULL;

	if (asprintf(&k, "%s\n%llu", tname ? tname : "",
		     (unsigned long long)json_integer_value(json_object_get(l, "lun"))) < 0)
		return NULL;
	return k;
}

bool api_cluster_holds_update(const json_t *eff, const char *self, json_t *owned, json_t *held,
			      uint64_t now_ms, uint64_t hold_ms)
{
	json_t *mine = json_object(), *t, *l, *v;
	bool changed = false;
	const char *k;
	size_t i, j;
	void *tmp;

	json_array_foreach(json_object_get(eff, "targets"), i, t)
		json_array_foreach(json_object_get(t, "luns"), j, l) {
			const char *own = json_string_value(json_object_get(l, "owner"));
			char *key;

			if (!own || strcmp(own, self) || !(key = lu_key(t, l)))
				continue;
			json_object_set_new(mine, key, json_true());
			if (!json_object_get(owned, key)) {
				json_t *u = json_object_get(held, key);

				if (!u) {
					json_object_set_new(held, key,
							    json_integer((json_int_t)(now_ms +
										      hold_ms)));
				} else if ((uint64_t)json_integer_value(u) <= now_ms) {
					json_object_del(held, key);
					json_object_set_new(owned, key, json_true());
					changed = true;
				}
			}
			free(key);
		}
	json_object_foreach_safe(owned, tmp, k, v)
		if (!json_object_get(mine, k)) {
			json_object_del(owned, k);
			changed = true;
		}
	json_object_foreach_safe(held, tmp, k, v)
		if (!json_object_get(mine, k))
			json_object_del(held, k);
	json_decref(mine);
	return changed;
}

void api_cluster_mark_pending(json_t *eff, const char *self, const json_t *owned)
{
	json_t *t, *l;
	size_t i, j;

	json_array_foreach(json_object_get(eff, "targets"), i, t)
		json_array_foreach(json_object_get(t, "luns"), j, l) {
			const char *own = json_string_value(json_object_get(l, "owner"));
			char *key;

			json_object_del(l, "alua_pending");
			if (!own || strcmp(own, self) || !(key = lu_key(t, l)))
				continue;
			if (!json_object_get(owned, key))
				json_object_set_new(l, "alua_pending", json_true());
			free(key);
		}
}

/* ---- etcd side --------------------------------------------------------------------------- */

/* gateway.fence_margin_ms of the desired configuration: the gateways fence this early, and a
 * taker waits this beyond the TTL. */
static uint64_t cl_margin(const struct api_cluster *c)
{
	const json_t *gw = json_object_get(api_store_config(c->store), "gateway");
	json_int_t m = json_integer_value(json_object_get(gw, "fence_margin_ms"));

	return m >= 100 && m <= 30000 ? (uint64_t)m : API_CLUSTER_FENCE_MARGIN_MS;
}

static char *cl_key(const struct api_cluster *c, const char *dir, const char *id)
{
	char *k = NULL;

	if (asprintf(&k, "%s/%s%s%s", c->prefix, dir, id ? "/" : "", id ? id : "") < 0)
		return NULL;
	return k;
}

static json_t *cl_member_value(struct api_cluster *c)
{
	return json_pack("{s:s, s:i, s:o, s:s}", "id", c->id, "group", (int)c->group, "portals",
			 c->local_portals ? json_deep_copy(c->local_portals) : json_array(),
			 "listen", c->listen ? c->listen : "");
}

static json_t *cl_put_req(struct api_cluster *c, const char *dir, json_t *val, int64_t lease)
{
	char *k = cl_key(c, dir, c->id), *text = json_dumps(val, JSON_COMPACT | JSON_ENCODE_ANY);
	json_t *req = k && text ? api_etcd_put_req(k, text, lease) : NULL;

	json_decref(val);
	free(k);
	free(text);
	return req;
}

static bool cl_away(int err)
{
	return err == -EHOSTUNREACH || err == -ETIMEDOUT;
}

static void cl_recompute(struct api_cluster *c);
static void cl_list(struct api_cluster *c);

/* etcd cannot be trusted to tell what changed: the watch is dropped (it may sit on a held
 * connection) and the next tick lists everything again. */
static void cl_unreachable(struct api_cluster *c)
{
	if (c->reachable)
		gw_warn("cluster", "etcd is degraded: member %s cannot renew its lease or read "
			"the cluster; the REST API goes on with the last state seen", c->id);
	c->reachable = false;
	c->synced = false;
	api_etcd_cancel(c->watch);
	c->watch = NULL;
}

/* ---- the cluster's identity (a prefix shared by two clusters) --------------------------- */

static char *cl_read_id_file(const struct api_cluster *c)
{
	char buf[80] = "";
	FILE *f = c->id_file ? fopen(c->id_file, "r") : NULL;
	size_t n;

	if (!f)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	return buf[0] ? strdup(buf) : NULL;
}

static char *cl_new_id(void)
{
	unsigned char rnd[16];
	char *s = malloc(33);
	size_t i;

	if (!s || getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		free(s);
		return NULL;
	}
	for (i = 0; i < sizeof(rnd); i++)
		snprintf(s + 2 * i, 3, "%02x", rnd[i]);
	return s;
}

static void cl_keep_id(struct api_cluster *c, const char *id)
{
	char line[80];
	int n;

	if (c->cluster_id && !strcmp(c->cluster_id, id))
		return;
	free(c->cluster_id);
	c->cluster_id = strdup(id);
	n = snprintf(line, sizeof(line), "%s\n", id);
	if (c->id_file && api_write_atomic(c->id_file, line, (size_t)n, 0600))
		gw_warn("cluster", "cannot record the cluster id in %s", c->id_file);
}

static void on_revoked(void *ctx, int err, json_t *resp)
{
	(void)ctx;
	(void)err;
	(void)resp;
}

/* Another cluster's id under the prefix: nothing more is read from or written to it. */
static void cl_refuse(struct api_cluster *c, const char *theirs)
{
	const char *file = c->id_file ? c->id_file : "DIR/cluster-id";
	char id[24];

	if (c->refused)
		return;
	c->refused = true;
	free(c->error);
	if (asprintf(&c->error, "the prefix %s belongs to cluster %s, but this gateway joined "
		     "cluster %s (recorded in %s): two clusters share one prefix, or etcd was "
		     "reset. Give each cluster its own --cluster-prefix, or remove %s to join "
		     "cluster %s", c->prefix, theirs, c->cluster_id, file, file, theirs) < 0)
		c->error = NULL;
	gw_err("cluster", "%s", c->error ? c->error : "the prefix is another cluster's");
	api_store_etcd_refuse(c->store);
	api_etcd_cancel(c->watch);
	c->watch = NULL;
	c->synced = false;
	/* Leave their member list: the lease and its member key go now. */
	if (c->lease) {
		snprintf(id, sizeof(id), "%lld", (long long)c->lease);
		api_etcd_post(c->etcd, "/v3/lease/revoke", json_pack("{s:s}", "ID", id),
			      on_revoked, c);
		c->lease = 0;
	}
}

static void on_id_put(void *ctx, int err, json_t *resp)
{
	struct api_cluster *c = ctx;

	(void)resp;
	if (err)
		gw_warn("cluster", "cannot write the cluster id under %s yet", c->prefix);
}

static void on_portals_put(void *ctx, int err, json_t *resp)
{
	struct api_cluster *c = ctx;

	(void)resp;
	if (err)
		gw_warn("cluster", "cannot publish member %s's portals yet", c->id);
}

/* PREFIX/cluster_id as read (NULL: absent): 0, or -ENOTUNIQ when it is not this member's. */
static int cl_check_id(struct api_cluster *c, const char *theirs)
{
	char *k, *kb;
	json_t *txn;

	if (theirs) {
		if (c->cluster_id && strcmp(c->cluster_id, theirs)) {
			cl_refuse(c, theirs);
			return -ENOTUNIQ;
		}
		cl_keep_id(c, theirs);
		return 0;
	}
	/* First start of the cluster (or etcd reset): this member's id, if no one is first. */
	if (!c->cluster_id) {
		char *nid = cl_new_id();

		if (!nid)
			return -ENOMEM;
		cl_keep_id(c, nid);
		free(nid);
	}
	k = cl_key(c, "cluster_id", NULL);
	kb = k ? api_b64_encode(k, strlen(k)) : NULL;
	txn = kb ? json_pack("{s:[{s:s, s:s, s:s, s:s}], s:[{s:o}]}", "compare", "key", kb,
			     "target", "CREATE", "result", "EQUAL", "create_revision", "0",
			     "success", "request_put", api_etcd_put_req(k, c->cluster_id, 0)) :
		   NULL;
	free(kb);
	if (!txn || api_etcd_post(c->etcd, "/v3/kv/txn", txn, on_id_put, c))
		gw_warn("cluster", "cannot write the cluster id under %s yet", c->prefix);
	free(k);
	return 0;
}

/* ---- what the list and the watch deliver ----------------------------------------------- */

/* One key under the prefix changed (value NULL: deleted). True when a refusal stops all. */
static bool cl_apply_kv(struct api_cluster *c, const char *key, const char *value,
			int64_t mod_rev)
{
	size_t plen = strlen(c->prefix);
	const char *rel;
	json_t *val;

	if (strncmp(key, c->prefix, plen) || key[plen] != '/')
		return false;
	rel = key + plen + 1;
	if (!strcmp(rel, "config")) {
		int r;

		/* Not under a write: its compare-and-swap must compare the revision it
		 * started from. Kept for the next tick. */
		if (c->write_busy && c->write_busy(c->ag)) {
			free(c->pending_cfg);
			c->pending_cfg = value ? strdup(value) : NULL;
			c->pending_rev = mod_rev;
			c->pending = true;
			return false;
		}
		c->pending = false;
		r = api_store_etcd_apply(c->store, value, mod_rev);
		if (r >= 0 && value) {
			c->cfg_rev = mod_rev;
			c->pr_sweep = true;
		}
		if (r > 0) {
			gw_info("cluster", "configuration generation %llu from etcd",
				(unsigned long long)api_store_generation(c->store));
			c->cfg_changed = true;
		}
		return false;
	}
	if (!strcmp(rel, "cluster_id"))
		return value && cl_check_id(c, value) == -ENOTUNIQ;
	val = value ? json_loads(value, JSON_DECODE_ANY, NULL) : NULL;
	if (!strncmp(rel, "members/", 8) && rel[8]) {
		if (val)
			json_object_set_new(c->live, rel + 8, val);
		else
			json_object_del(c->live, rel + 8);
	} else if (!strncmp(rel, "groups/", 7) && rel[7]) {
		if (val)
			json_object_set_new(c->groups, rel + 7, val);
		else
			json_object_del(c->groups, rel + 7);
	} else if (!strncmp(rel, "pr/", 3)) {
		json_decref(val);
		api_prc_kv(c->pr, rel + 3, value, mod_rev);
	} else if (!strncmp(rel, "pr_acks/", 8)) {
		json_decref(val);
		api_prc_ack(c->pr, rel + 8, value);
	} else {
		json_decref(val);
	}
	return false;
}

static void on_watch_msg(void *ctx, json_t *msg)
{
	struct api_cluster *c = ctx;
	const json_t *res = json_object_get(msg, "result"), *ev;
	size_t i;

	if (json_is_true(json_object_get(res, "canceled")) ||
	    api_etcd_int(res, "compact_revision", 0) > 0) {
		gw_warn("cluster", "etcd ended the watch on %s (%s): listing again", c->prefix,
			json_string_value(json_object_get(res, "cancel_reason")) ?: "compacted");
		api_etcd_cancel(c->watch);
		c->watch = NULL;
		c->synced = false;
		return;
	}
	json_array_foreach(json_object_get(res, "events"), i, ev) {
		const json_t *kv = json_object_get(ev, "kv");
		const char *type = json_string_value(json_object_get(ev, "type"));
		const char *k64 = json_string_value(json_object_get(kv, "key"));
		const char *v64 = json_string_value(json_object_get(kv, "value"));
		bool del = type && !strcmp(type, "DELETE");
		char *k, *v = NULL;
		size_t n;

		if (!k64 || !(k = api_b64_decode(k64, &n)))
			continue;
		if (!del)
			v = api_b64_decode(v64 ? v64 : "", &n);
		if ((del || v) && cl_apply_kv(c, k, del ? NULL : v,
					      api_etcd_int(kv, "mod_revision", 0))) {
			free(k);
			free(v);
			return;
		}
		free(k);
		free(v);
	}
	if (json_array_size(json_object_get(res, "events")))
		cl_recompute(c);
}

static void on_watch_end(void *ctx, int err, json_t *resp)
{
	struct api_cluster *c = ctx;

	(void)resp;
	c->watch = NULL;
	c->synced = false;
	gw_warn("cluster", "the watch on %s ended (%s): listing again", c->prefix,
		strerror(-err));
}

static void on_list(void *ctx, int err, json_t *resp)
{
	struct api_cluster *c = ctx;
	char *theirs = NULL, *k, *v, *idk = cl_key(c, "cluster_id", NULL);
	int64_t rev, mrev;
	size_t i;

	c->list_busy = false;
	if (err || !idk) {
		free(idk);
		if (cl_away(err))
			cl_unreachable(c);
		return;
	}
	/* The identity first: another cluster's keys are never taken in. */
	for (i = 0; api_etcd_kv(resp, i, &k, &v, &mrev) == 0; i++) {
		if (!strcmp(k, idk)) {
			free(theirs);
			theirs = strdup(v);
		}
		free(k);
		free(v);
	}
	free(idk);
	err = cl_check_id(c, theirs);
	free(theirs);
	if (err)
		return;
	json_object_clear(c->live);
	json_object_clear(c->groups);
	rev = api_etcd_int(json_object_get(resp, "header"), "revision", 0);
	api_prc_list_begin(c->pr);
	for (i = 0; api_etcd_kv(resp, i, &k, &v, &mrev) == 0; i++) {
		cl_apply_kv(c, k, v, mrev);
		free(k);
		free(v);
	}
	api_prc_list_end(c->pr, rev);
	c->reachable = true;
	c->last_ok_ms = gw_now_ms();
	c->last_list_ms = c->last_ok_ms;
	/* A new watch from just after what was listed: nothing falls between the two. */
	api_etcd_cancel(c->watch);
	c->watch = NULL;
	if (api_etcd_watch(c->etcd, c->prefix_dir, rev + 1, on_watch_msg, on_watch_end, c,
			   &c->watch))
		c->watch = NULL;
	c->synced = c->watch != NULL;
	cl_recompute(c);
	if (c->synced && c->lease && c->lease_cb && c->local_portals) {
		uint64_t now = gw_now_ms();

		c->lease_cb(c->ag, c->valid_until_ms > now ? c->valid_until_ms - now : 0);
	}
}

static void cl_list(struct api_cluster *c)
{
	if (c->list_busy || c->refused)
		return;
	if (api_etcd_post(c->etcd, "/v3/kv/range", api_etcd_range_req(c->prefix_dir, true),
			  on_list, c) == 0)
		c->list_busy = true;
}

/* ---- the lease: grant, register, keep alive ----------------------------------------------- */

static void on_member_put(void *ctx, int err, json_t *resp)
{
	struct api_cluster *c = ctx;

	(void)resp;
	c->ka_busy = false;
	if (err) {
		if (cl_away(err))
			cl_unreachable(c);
		return;	/* the lease expires on its own */
	}
	c->lease = c->reg_lease;
	/* A new lease: the others may have taken what this member held, so every LU it owns
	 * waits again. The deadline counts from before the grant was asked for. */
	json_object_clear(c->owned);
	json_object_clear(c->held);
	c->valid_until_ms = c->reg_sent + c->reg_ttl * 1000u;
	gw_info("cluster", "member %s (port group %u) joined %s with a %u s lease", c->id,
		c->group, c->prefix, c->ttl);
}

static void on_group_put(void *ctx, int err, json_t *resp)
{
	struct api_cluster *c = ctx;

	(void)resp;
	if (!err)
		err = api_etcd_post(c->etcd, "/v3/kv/put",
				    cl_put_req(c, "members", cl_member_value(c), c->reg_lease),
				    on_member_put, c);
	if (err) {
		c->ka_busy = false;
		if (cl_away(err))
			cl_unreachable(c);
	}
}

static void on_grant(void *ctx, int err, json_t *resp)
{
	struct api_cluster *c = ctx;
	int64_t granted;

	if (!err) {
		c->reg_lease = api_etcd_int(resp, "ID", 0);
		granted = api_etcd_int(resp, "TTL", c->ttl);
		c->reg_ttl = granted > 0 ? (uint64_t)granted : c->ttl;
		err = c->reg_lease ? 0 : -EPROTO;
	}
	if (!err)
		err = api_etcd_post(c->etcd, "/v3/kv/put",
				    cl_put_req(c, "groups", json_integer(c->group), 0),
				    on_group_put, c);
	if (err) {
		c->ka_busy = false;
		if (cl_away(err))
			cl_unreachable(c);
	}
}

/* Grants a lease and puts the group and member keys (three calls, one after the other). */
static void cl_register(struct api_cluster *c)
{
	char ttl[16];

	snprintf(ttl, sizeof(ttl), "%u", c->ttl);
	c->reg_sent = gw_now_ms();
	if (api_etcd_post(c->etcd, "/v3/lease/grant", json_pack("{s:s}", "TTL", ttl), on_grant,
			  c) == 0)
		c->ka_busy = true;
}

/* A keepalive that failed is sent again at once this many times while the lease has time. */
#define CL_KA_RETRIES 2
/* An attempt needs at least this much of the lease left, or is not made. */
#define CL_KA_MIN_MS 200
/* An attempt that another may follow ends this long before the gateway would fence, so the
 * next one can still renew in time; it is not cut below CL_KA_FLOOR_MS (a loaded etcd takes
 * hundreds of ms, and a call cut short is a failure of its own). */
#define CL_KA_RESERVE_MS 700
#define CL_KA_FLOOR_MS 700

/* What is left of the lease in etcd now (its deadline counts from when the last successful
 * renewal was sent); 0 when it is gone or unknown (the call gets the client's own timeout,
 * and the answer says whether the lease still exists). */
static uint64_t cl_ka_left(const struct api_cluster *c, uint64_t now)
{
	return c->valid_until_ms > now + CL_KA_MIN_MS ? c->valid_until_ms - now : 0;
}

static int cl_ka_send(struct api_cluster *c);

static void on_keepalive(void *ctx, int err, json_t *resp)
{
	struct api_cluster *c = ctx;
	bool retried = c->ka_retries > 0;
	int64_t ttl;

	c->ka_busy = false;
	if (err) {
		uint64_t left = cl_ka_left(c, gw_now_ms());

		/* One call lost under load must not cost the lease: again at once, each
		 * attempt within what is left (CLUSTER.md, "Fencing"). */
		if (cl_away(err) && c->ka_retries < CL_KA_RETRIES && left) {
			c->ka_retries++;
			gw_warn("cluster", "lease keepalive of member %s failed (%s): again at once "
				"(%u of %u), %llu ms of its lease left", c->id, strerror(-err),
				c->ka_retries, CL_KA_RETRIES, (unsigned long long)left);
			if (cl_ka_send(c) == 0)
				return;
		}
		if (cl_away(err))
			cl_unreachable(c);
		return;
	}
	c->ka_retries = 0;
	if (!c->reachable)
		gw_info("cluster", "etcd answers again: member %s renews its lease", c->id);
	else if (retried)
		gw_info("cluster", "member %s renewed its lease on a retry", c->id);
	c->reachable = true;
	c->last_ok_ms = gw_now_ms();
	/* An expired lease comes back without a TTL. */
	ttl = api_etcd_int(json_object_get(resp, "result"), "TTL", 0);
	if (ttl <= 0) {
		gw_warn("cluster", "lease of member %s expired: joining again", c->id);
		c->lease = 0;
		cl_register(c);
		return;
	}
	c->valid_until_ms = c->ka_sent + (uint64_t)ttl * 1000u;
	/* A call that hung may mean a held connection: the watch is checked by listing again
	 * (it goes on meanwhile, so the deadline below is not held back). */
	if (retried)
		cl_list(c);
	if (!c->synced)
		return;	/* the list that follows pushes the states and the deadline */
	cl_recompute(c);
	/* The states first, then the deadline: the gateway handles them in this order. Not
	 * before its own portals are known (api_reconcile asks for them before it applies). */
	if (c->lease_cb && c->local_portals) {
		uint64_t now = gw_now_ms();

		c->lease_cb(c->ag, c->valid_until_ms > now ? c->valid_until_ms - now : 0);
	}
}

/* One attempt, never beyond the lease (the client's own 2 s at most); one that another may
 * follow ends CL_KA_RESERVE_MS before the gateway's fence when that leaves it CL_KA_FLOOR_MS. */
static int cl_ka_send(struct api_cluster *c)
{
	uint64_t now = gw_now_ms(), t = cl_ka_left(c, now), margin = cl_margin(c);
	char id[24];

	if (t && c->ka_retries < CL_KA_RETRIES &&
	    c->valid_until_ms >= now + margin + CL_KA_RESERVE_MS + CL_KA_FLOOR_MS)
		t = c->valid_until_ms - margin - CL_KA_RESERVE_MS - now;
	snprintf(id, sizeof(id), "%lld", (long long)c->lease);
	c->ka_sent = now;
	if (api_etcd_post_within(c->etcd, "/v3/lease/keepalive", json_pack("{s:s}", "ID", id), t,
				 on_keepalive, c))
		return -ENOMEM;
	c->ka_busy = true;
	return 0;
}

static void cl_keepalive(struct api_cluster *c)
{
	c->ka_retries = 0;
	cl_ka_send(c);
}

/* ---- the owners and the gateway's states ------------------------------------------------- */

/* What the members, groups and configuration as last seen mean for this gateway: the owners,
 * the takeover holds, and a push to the gateway when anything changed. */
static void cl_recompute(struct api_cluster *c)
{
	struct api_agent *ag = c->ag;	/* only handed to the callbacks */
	bool changed = c->cfg_changed;
	uint64_t now;
	json_t *eff;
	char *push;

	if (c->pr_sweep && !c->pending) {
		c->pr_sweep = false;
		api_prc_sweep(c->pr, api_store_config(c->store), c->cfg_rev);
	}
	if (c->cfg_changed && c->event)
		c->event(ag, "config", json_pack("{s:I, s:s}", "generation",
						 (json_int_t)api_store_generation(c->store),
						 "gateway", "pending"));
	c->cfg_changed = false;
	if (!c->live_seen || !json_equal(c->live, c->live_seen)) {
		const char *k;
		json_t *v;
		char buf[512] = "";
		size_t n = 0;

		json_object_foreach(c->live, k, v)
			n += (size_t)snprintf(buf + n, n < sizeof(buf) ? sizeof(buf) - n : 0,
					      "%s%s", n ? ", " : "", k);
		gw_info("cluster", "live members: %s", buf[0] ? buf : "(none)");
		changed = true;
		json_decref(c->live_seen);
		c->live_seen = json_deep_copy(c->live);
	}
	if (!c->groups_seen || !json_equal(c->groups, c->groups_seen)) {
		changed = true;
		json_decref(c->groups_seen);
		c->groups_seen = json_deep_copy(c->groups);
	}
	now = gw_now_ms();
	/* Holds marked from before. */
	eff = api_cluster_gw_config(c, api_store_config(c->store));
	if (eff && api_cluster_holds_update(eff, c->id, c->owned, c->held, now,
					    c->ttl * 1000u + cl_margin(c))) {
		json_decref(eff);
		eff = api_cluster_gw_config(c, api_store_config(c->store));
	}
	push = eff ? json_dumps(eff, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(eff);
	if (push && (!c->last_push || strcmp(push, c->last_push)))
		changed = true;
	if (changed && c->changed && c->local_portals) {
		free(c->last_push);
		c->last_push = push;
		push = NULL;
	}
	free(push);
	if (changed && c->changed)
		c->changed(ag);
}

/* Every TTL/3: renew (or join), catch up with what a write held back, and list again when the
 * watch is gone or the safety interval passed. Nothing here waits for etcd. */
static void cl_tick(struct gw_timer *t)
{
	struct api_cluster *c = gw_container_of(t, struct api_cluster, tick);
	uint64_t margin = cl_margin(c), now = gw_now_ms();

	if (c->refused)
		return;
	/* The gateway fenced itself (or is about to): what it owned must be earned again. */
	if (c->valid_until_ms && now + margin >= c->valid_until_ms &&
	    (json_object_size(c->owned) || json_object_size(c->held))) {
		gw_warn("cluster", "lease of member %s lapsed: its gateway fenced itself; its LUNs "
			"wait %u ms before they are optimized again", c->id,
			c->ttl * 1000u + (unsigned int)margin);
		json_object_clear(c->owned);
		json_object_clear(c->held);
	}
	if (c->pending && !(c->write_busy && c->write_busy(c->ag))) {
		char *v = c->pending_cfg;
		char *k = cl_key(c, "config", NULL);

		c->pending_cfg = NULL;
		if (k)
			cl_apply_kv(c, k, v, c->pending_rev);
		free(k);
		free(v);
		cl_recompute(c);
	}
	if (!c->ka_busy) {
		if (c->lease)
			cl_keepalive(c);
		else
			cl_register(c);
	}
	if (!c->synced || now - c->last_list_ms >= API_CLUSTER_RELIST_MS)
		cl_list(c);
}

/* ---- the agent's side -------------------------------------------------------------------- */

/* At start (blocking, before the loop runs): refuses a port group or a gateway id that another
 * live member holds, and a prefix that another cluster's id owns. */
static int cl_start_checks(struct api_cluster *c)
{
	char *k, *v, *idk = cl_key(c, "cluster_id", NULL), *theirs = NULL;
	json_t *resp = NULL, *val, *mine;
	size_t i, plen = strlen(c->prefix_dir);
	int r;

	if (!idk)
		return -ENOMEM;
	r = api_etcd_call(c->etcd, "/v3/kv/range", api_etcd_range_req(c->prefix_dir, true),
			  &resp);
	if (r) {
		free(idk);
		gw_warn("cluster", "etcd is not reachable: joining when it is");
		return 0;
	}
	for (i = 0; r == 0 && api_etcd_kv(resp, i, &k, &v, NULL) == 0; i++) {
		const char *rel = k + (strlen(k) >= plen ? plen : strlen(k));

		val = json_loads(v, JSON_DECODE_ANY, NULL);
		if (!strcmp(k, idk)) {
			theirs = strdup(v);
		} else if (!strncmp(rel, "groups/", 7) && strcmp(rel + 7, c->id) &&
			   json_integer_value(val) == (json_int_t)c->group) {
			gw_err("cluster", "port group %u already belongs to member %s "
			       "(give each gateway its own --port-group)", c->group, rel + 7);
			r = -EADDRINUSE;
		} else if (!strncmp(rel, "members/", 8) && !strcmp(rel + 8, c->id) &&
			   (mine = json_object_get(val, "listen")) && c->listen &&
			   strcmp(json_string_value(mine) ?: "", c->listen)) {
			gw_err("cluster", "gateway id %s is already a live member of %s (its agent "
			       "listens on %s, this one on %s): give each gateway its own "
			       "--gateway-id", c->id, c->prefix, json_string_value(mine) ?: "?",
			       c->listen);
			r = -EADDRINUSE;
		}
		json_decref(val);
		free(k);
		free(v);
	}
	json_decref(resp);
	free(idk);
	if (!r && theirs && c->cluster_id && strcmp(theirs, c->cluster_id)) {
		cl_refuse(c, theirs);
		r = -ENOTUNIQ;
	} else if (!r && theirs) {
		cl_keep_id(c, theirs);
	}
	free(theirs);
	return r;
}

int api_cluster_start(const struct api_cluster_conf *conf, struct api_cluster **out)
{
	struct api_cluster *c = calloc(1, sizeof(*c));
	int r;

	if (!c)
		return -ENOMEM;
	c->ag = conf->ag;
	c->store = conf->store;
	c->listen = conf->listen ? strdup(conf->listen) : NULL;
	c->etcd = api_store_etcd_client(conf->store);
	c->prefix = strdup(conf->prefix);
	c->id = strdup(conf->gateway_id);
	c->group = conf->group;
	c->ttl = conf->ttl ? conf->ttl : 5;
	c->changed = conf->changed;
	c->event = conf->event;
	c->write_busy = conf->write_busy;
	c->lease_cb = conf->lease;
	c->owned = json_object();
	c->held = json_object();
	c->live = json_object();
	c->groups = json_object();
	c->prefix_dir = c->prefix ? cl_key(c, "", NULL) : NULL;	/* "PREFIX/" */
	c->id_file = conf->id_file ? strdup(conf->id_file) : NULL;
	if (!c->etcd || !c->prefix || !c->id || !c->owned || !c->held || !c->live ||
	    !c->groups || !c->prefix_dir) {
		r = c->etcd ? -ENOMEM : -EINVAL;
		goto fail;
	}
	c->cluster_id = cl_read_id_file(c);
	r = cl_start_checks(c);
	if (r)
		goto fail;
	if (conf->gw_call) {
		struct api_prc_conf pc = {
			.loop = conf->loop,
			.etcd = c->etcd,
			.prefix = c->prefix,
			.gw_call = conf->gw_call,
			.ag = conf->ag,
			.self = c->id,
			.live = c->live,
			.lease = &c->lease,
		};

		r = api_prc_create(&pc, &c->pr);
		if (r)
			goto fail;
	}
	r = gw_timer_init(&c->tick, conf->loop, cl_tick);
	if (r)
		goto fail;
	/* Joining, listing and watching all start from the loop. */
	gw_timer_arm(&c->tick, 1, c->ttl * 1000u / 3 ? c->ttl * 1000u / 3 : 1);
	*out = c;
	return 0;
fail:
	api_prc_destroy(c->pr);
	json_decref(c->owned);
	json_decref(c->held);
	json_decref(c->live);
	json_decref(c->groups);
	free(c->prefix);
	free(c->prefix_dir);
	free(c->id);
	free(c->listen);
	free(c->id_file);
	free(c->cluster_id);
	free(c->error);
	free(c);
	return r;
}

void api_cluster_stop(struct api_cluster *c)
{
	json_t *resp = NULL;
	char id[24];

	if (!c)
		return;
	gw_timer_fini(&c->tick);
	api_etcd_cancel_ctx(c->etcd, c);
	c->watch = NULL;
	/* Commits in flight are cancelled and freed; the gateway fails them when the agent's
	 * connection goes, right after this. */
	api_prc_destroy(c->pr);
	c->pr = NULL;
	/* A clean stop fences the gateway first (best effort: its own timer does it anyway
	 * before a taker's wait ends). */
	if (c->lease_cb && c->local_portals)
		c->lease_cb(c->ag, 0);
	if (c->lease) {
		snprintf(id, sizeof(id), "%lld", (long long)c->lease);
		if (api_etcd_call(c->etcd, "/v3/lease/revoke", json_pack("{s:s}", "ID", id),
				  &resp) == 0)
			gw_info("cluster", "member %s left %s", c->id, c->prefix);
		json_decref(resp);
	}
	json_decref(c->groups);
	json_decref(c->live);
	json_decref(c->groups_seen);
	json_decref(c->live_seen);
	json_decref(c->local_portals);
	json_decref(c->owned);
	json_decref(c->held);
	free(c->last_push);
	free(c->pending_cfg);
	free(c->prefix);
	free(c->prefix_dir);
	free(c->id);
	free(c->listen);
	free(c->id_file);
	free(c->cluster_id);
	free(c->error);
	free(c);
}

json_t *api_cluster_gw_config(const struct api_cluster *c, const json_t *desired)
{
	json_t *groups, *live, *eff;

	if (!c)
		return json_incref((json_t *)desired);
	groups = c->groups ? json_deep_copy(c->groups) : json_object();
	live = c->live ? json_deep_copy(c->live) : json_object();
	json_object_set_new(groups, c->id, json_integer(c->group));
	json_object_set_new(live, c->id, json_true());
	eff = api_cluster_effective(desired, groups, live, c->group, c->local_portals);
	json_decref(groups);
	json_decref(live);
	if (eff)
		api_cluster_mark_pending(eff, c->id, c->owned);
	return eff;
}

void api_cluster_set_local(struct api_cluster *c, const json_t *gw_config)
{
	const json_t *p = json_object_get(gw_config, "portals");
	bool first = !c->local_portals;

	json_decref(c->local_portals);
	c->local_portals = json_is_array(p) ? json_deep_copy(p) : json_array();
	/* Publish the portals with the member key. */
	if (first && c->lease && !c->refused &&
	    api_etcd_post(c->etcd, "/v3/kv/put",
			  cl_put_req(c, "members", cl_member_value(c), c->lease), on_portals_put, c))
		gw_warn("cluster", "cannot publish member %s's portals yet", c->id);
}

bool api_cluster_has_local(const struct api_cluster *c)
{
	return c->local_portals != NULL;
}

void api_cluster_gw_up(struct api_cluster *c)
{
	api_prc_gw_up(c->pr);
}

void api_cluster_gw_applied(struct api_cluster *c)
{
	api_prc_gw_applied(c->pr);
}

void api_cluster_pr_commit(struct api_cluster *c, const json_t *data)
{
	api_prc_commit(c->pr, data, c->refused ? "the cluster's prefix belongs to another "
		       "cluster: this agent writes nothing there" : NULL);
}

void api_cluster_gw_lost(struct api_cluster *c)
{
	api_prc_gw_lost(c->pr);
	json_decref(c->local_portals);
	c->local_portals = NULL;
	free(c->last_push);
	c->last_push = NULL;
}

json_t *api_cluster_status(const struct api_cluster *c)
{
	json_t *eff, *owners = json_array(), *t, *l;
	const char *state;
	size_t i, j;

	eff = api_cluster_gw_config(c, api_store_config(c->store));
	json_array_foreach(json_object_get(eff, "targets"), i, t)
		json_array_foreach(json_object_get(t, "luns"), j, l)
			json_array_append_new(owners, json_pack(
				"{s:O, s:O, s:O, s:O, s:b}", "target", json_object_get(t, "name"),
				"lun", json_object_get(l, "lun"), "owner",
				json_object_get(l, "owner"), "alua_group",
				json_object_get(l, "alua_group"), "pending",
				json_is_true(json_object_get(l, "alua_pending"))));
	/* refused: the prefix is another cluster's; degraded: etcd does not answer (in time);
	 * syncing: answered, the list or the watch is not there yet. */
	state = c->refused ? "refused" : !c->reachable ? "degraded" : !c->synced ? "syncing" :
		"ok";
	t = json_pack("{s:s, s:s, s:i, s:i, s:b, s:s, s:s*, s:s*, s:b, s:o, s:o, s:o, s:o, "
		      "s:o}", "prefix", c->prefix, "gateway_id", c->id, "port_group",
		      (int)c->group, "lease_ttl", (int)c->ttl, "etcd_reachable", c->reachable,
		      "etcd_state", state, "error", c->error, "cluster_id", c->cluster_id,
		      "watching", c->watch != NULL, "etcd", api_etcd_status(c->etcd), "members",
		      json_deep_copy(c->live), "groups", json_deep_copy(c->groups), "owners",
		      owners, "cluster", json_object_get(eff, "cluster") ?
		      json_incref(json_object_get(eff, "cluster")) : json_null());
	json_decref(eff);
	return t;
}
