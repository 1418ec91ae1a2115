// SPDX-License-Identifier: MIT
/*
 * Cluster membership and LU ownership. Each agent holds an etcd lease (keepalive every TTL/3)
 * and, under it, PREFIX/members/ID = {"id", "group", "portals", "listen"}; its port group is
 * also recorded without a lease under PREFIX/groups/ID, so a member that died stays listed as
 * an unavailable group. Every tick the agent renews its lease, re-reads the configuration (a
 * change by another agent is reconciled here too) and the live members; when the members
 * change it recomputes the owners (the same pure function on every agent, so all agree without
 * electing anyone) and pushes the resulting ALUA states to its gateway.
 *
 * Fencing (docs/CLUSTER.md): after every tick that renewed the lease and read the members, the
 * agent pushes the states first, then {"op":"lease","valid_ms":N}: the lease's deadline counted
 * from when the renewal was sent. The gateway fences itself (standby) at that deadline less
 * its margin if no renewal follows. An LU that becomes this member's stays pending (its group
 * reports transitioning) for TTL + margin after the agent first saw it so, long enough for any
 * previous owner to have released it or fenced itself; a lapsed or re-granted lease starts
 * every hold again.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_cluster.h"
#include "api_etcd.h"
#include "api_store.h"
#include "gw_log.h"
#include "gw_loop.h"

struct api_cluster {
	struct api_agent *ag;		/* the callbacks' argument, opaque here */
	struct api_store *store;
	char *listen;
	struct api_etcd *etcd;		/* the store's */
	char *prefix;
	char *id;
	uint32_t group;
	unsigned int ttl;
	int64_t lease;			/* 0: none held */
	json_t *groups;			/* {id: group} as last read */
	json_t *live;			/* {id: member value} as last read */
	json_t *local_portals;		/* the gateway's own portals, NULL: not known yet */
	struct gw_timer tick;
	void (*changed)(struct api_agent *ag);
	bool (*write_busy)(const struct api_agent *ag);
	void (*event)(struct api_agent *ag, const char *type, json_t *data);
	bool reachable;
	uint64_t last_ok_ms;
	void (*lease_cb)(struct api_agent *ag, uint64_t valid_ms);
	uint64_t valid_until_ms;	/* monotonic: the lease's deadline as last renewed */
	json_t *owned;			/* {"TARGET\nLUN": true} this member reports optimized */
	json_t *held;			/* {"TARGET\nLUN": until_ms} becoming this member's */
	char *last_push;		/* the states last pushed (a change pushes again) */
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
	json_int_t m = json_integer_value(json_object_get(json_object_get(c->store->config,
									   "gateway"),
							  "fence_margin_ms"));

	return m >= 100 && m <= 30000 ? (uint64_t)m : API_CLUSTER_FENCE_MARGIN_MS;
}

static char *cl_key(struct api_cluster *c, const char *dir, const char *id)
{
	char *k = NULL;

	if (asprintf(&k, "%s/%s/%s", c->prefix, dir, id ? id : "") < 0)
		return NULL;
	return k;
}

/* {id: parsed value} of every key under PREFIX/dir/. */
static int cl_read_dir(struct api_cluster *c, const char *dir, json_t **out)
{
	char *pfx = cl_key(c, dir, NULL), *k, *v;
	json_t *resp, *o;
	size_t i, plen;
	int r;

	if (!pfx)
		return -ENOMEM;
	plen = strlen(pfx);
	r = api_etcd_call(c->etcd, "/v3/kv/range", api_etcd_range_req(pfx, true), &resp);
	free(pfx);
	if (r)
		return r;
	o = json_object();
	for (i = 0; api_etcd_kv(resp, i, &k, &v, NULL) == 0; i++) {
		json_t *val = json_loads(v, JSON_DECODE_ANY, NULL);

		if (val && strlen(k) > plen)
			json_object_set_new(o, k + plen, val);
		else
			json_decref(val);
		free(k);
		free(v);
	}
	json_decref(resp);
	*out = o;
	return 0;
}

static int cl_put(struct api_cluster *c, const char *dir, json_t *val, int64_t lease)
{
	char *k = cl_key(c, dir, c->id), *text = json_dumps(val, JSON_COMPACT | JSON_ENCODE_ANY);
	json_t *resp = NULL;
	int r = -ENOMEM;

	json_decref(val);
	if (k && text)
		r = api_etcd_call(c->etcd, "/v3/kv/put", api_etcd_put_req(k, text, lease), &resp);
	json_decref(resp);
	free(k);
	free(text);
	return r;
}

static json_t *cl_member_value(struct api_cluster *c)
{
	return json_pack("{s:s, s:i, s:o, s:s}", "id", c->id, "group", (int)c->group, "portals",
			 c->local_portals ? json_deep_copy(c->local_portals) : json_array(),
			 "listen", c->listen ? c->listen : "");
}

/* Grants a lease and puts the member and group keys. */
static int cl_register(struct api_cluster *c)
{
	json_t *resp = NULL, *req;
	uint64_t sent = gw_now_ms();
	int64_t lease, granted;
	char ttl[16];
	int r;

	snprintf(ttl, sizeof(ttl), "%u", c->ttl);
	req = json_pack("{s:s}", "TTL", ttl);
	r = api_etcd_call(c->etcd, "/v3/lease/grant", req, &resp);
	if (r)
		return r;
	lease = api_etcd_int(resp, "ID", 0);
	granted = api_etcd_int(resp, "TTL", c->ttl);
	json_decref(resp);
	if (!lease)
		return -EPROTO;
	r = cl_put(c, "groups", json_integer(c->group), 0);
	if (!r)
		r = cl_put(c, "members", cl_member_value(c), lease);
	if (r)
		return r;	/* the lease expires on its own */
	c->lease = lease;
	/* A new lease: the others may have taken what this member held, so every LU it owns
	 * waits again. The deadline counts from before the grant was asked for. */
	json_object_clear(c->owned);
	json_object_clear(c->held);
	c->valid_until_ms = sent + (uint64_t)(granted > 0 ? granted : c->ttl) * 1000u;
	gw_info("cluster", "member %s (port group %u) joined %s with a %u s lease", c->id,
		c->group, c->prefix, c->ttl);
	return 0;
}

static int cl_keepalive(struct api_cluster *c)
{
	json_t *resp = NULL, *req;
	uint64_t sent = gw_now_ms();
	int64_t ttl;
	char id[24];
	int r;

	snprintf(id, sizeof(id), "%lld", (long long)c->lease);
	req = json_pack("{s:s}", "ID", id);
	r = api_etcd_call(c->etcd, "/v3/lease/keepalive", req, &resp);
	if (r)
		return r;
	/* An expired lease comes back without a TTL. */
	ttl = api_etcd_int(json_object_get(resp, "result"), "TTL", 0);
	if (ttl > 0)
		c->valid_until_ms = sent + (uint64_t)ttl * 1000u;
	if (ttl <= 0) {
		gw_warn("cluster", "lease of member %s expired: joining again", c->id);
		c->lease = 0;
		r = cl_register(c);
	}
	json_decref(resp);
	return r;
}

static void cl_tick(struct gw_timer *t)
{
	struct api_cluster *c = gw_container_of(t, struct api_cluster, tick);
	struct api_agent *ag = c->ag;	/* only handed to the callbacks */
	json_t *groups = NULL, *live = NULL, *eff;
	uint64_t margin = cl_margin(c), now;
	bool changed = false;
	char *push;
	int r;

	/* The gateway fenced itself (or is about to): what it owned must be earned again. */
	if (c->valid_until_ms && gw_now_ms() + margin >= c->valid_until_ms &&
	    (json_object_size(c->owned) || json_object_size(c->held))) {
		gw_warn("cluster", "lease of member %s lapsed: its gateway fenced itself; its LUNs "
			"wait %u ms before they are optimized again", c->id,
			c->ttl * 1000u + (unsigned int)margin);
		json_object_clear(c->owned);
		json_object_clear(c->held);
	}
	r = c->lease ? cl_keepalive(c) : cl_register(c);
	/* Not under a write: its compare-and-swap must compare the revision it started from. */
	if (!r && !(c->write_busy && c->write_busy(ag))) {
		r = api_store_refresh(c->store);
		if (r > 0) {
			gw_info("cluster", "configuration generation %llu from etcd",
				(unsigned long long)c->store->generation);
			if (c->event)
				c->event(ag, "config",
					 json_pack("{s:I, s:s}", "generation",
						   (json_int_t)c->store->generation,
						   "gateway", "pending"));
			changed = true;
			r = 0;
		}
	}
	if (!r)
		r = cl_read_dir(c, "groups", &groups);
	if (!r)
		r = cl_read_dir(c, "members", &live);
	c->reachable = r == 0;
	if (r) {
		json_decref(groups);
		json_decref(live);
		return;
	}
	c->last_ok_ms = gw_now_ms();
	if (!c->live || !json_equal(live, c->live)) {
		const char *k;
		json_t *v;
		char buf[512] = "";
		size_t n = 0;

		json_object_foreach(live, k, v)
			n += (size_t)snprintf(buf + n, n < sizeof(buf) ? sizeof(buf) - n : 0,
					      "%s%s", n ? ", " : "", k);
		gw_info("cluster", "live members: %s", buf[0] ? buf : "(none)");
		changed = true;
	}
	if (!c->groups || !json_equal(groups, c->groups))
		changed = true;
	json_decref(c->groups);
	json_decref(c->live);
	c->groups = groups;
	c->live = live;
	now = gw_now_ms();
	eff = api_cluster_gw_config(c, c->store->config);	/* holds marked from before */
	if (eff && api_cluster_holds_update(eff, c->id, c->owned, c->held, now,
					    c->ttl * 1000u + margin)) {
		json_decref(eff);
		eff = api_cluster_gw_config(c, c->store->config);
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
	/* The states first, then the deadline: the gateway handles them in this order. Not
	 * before its own portals are known (api_reconcile asks for them before it applies). */
	if (c->lease_cb && c->local_portals)
		c->lease_cb(ag, c->valid_until_ms > now ? c->valid_until_ms - now : 0);
}

/* ---- the agent's side -------------------------------------------------------------------- */

int api_cluster_start(const struct api_cluster_conf *conf, struct api_cluster **out)
{
	struct api_cluster *c = calloc(1, sizeof(*c));
	json_t *groups = NULL;
	const char *k;
	json_t *v;
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
	if (!c->etcd || !c->prefix || !c->id || !c->owned || !c->held) {
		r = c->etcd ? -ENOMEM : -EINVAL;
		goto fail;
	}
	r = gw_timer_init(&c->tick, conf->loop, cl_tick);
	if (r)
		goto fail;
	/* A group another member holds would make two gateways one port group. */
	if (cl_read_dir(c, "groups", &groups) == 0) {
		json_object_foreach(groups, k, v) {
			if (strcmp(k, c->id) && json_integer_value(v) == (json_int_t)c->group) {
				gw_err("cluster", "port group %u already belongs to member %s "
				       "(give each gateway its own --port-group)", c->group, k);
				json_decref(groups);
				gw_timer_fini(&c->tick);
				r = -EADDRINUSE;
				goto fail;
			}
		}
		json_decref(groups);
		r = cl_register(c);
		if (r)
			gw_warn("cluster", "cannot join yet (%s): retrying", strerror(-r));
	} else {
		gw_warn("cluster", "etcd is not reachable: joining when it is");
	}
	gw_timer_arm(&c->tick, 1, c->ttl * 1000u / 3 ? c->ttl * 1000u / 3 : 1);
	*out = c;
	return 0;
fail:
	json_decref(c->owned);
	json_decref(c->held);
	free(c->prefix);
	free(c->id);
	free(c->listen);
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
	json_decref(c->local_portals);
	json_decref(c->owned);
	json_decref(c->held);
	free(c->last_push);
	free(c->prefix);
	free(c->id);
	free(c->listen);
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
	if (first && c->lease && cl_put(c, "members", cl_member_value(c), c->lease))
		gw_warn("cluster", "cannot publish member %s's portals yet", c->id);
}

bool api_cluster_has_local(const struct api_cluster *c)
{
	return c->local_portals != NULL;
}

void api_cluster_gw_lost(struct api_cluster *c)
{
	json_decref(c->local_portals);
	c->local_portals = NULL;
	free(c->last_push);
	c->last_push = NULL;
}

json_t *api_cluster_status(const struct api_cluster *c)
{
	json_t *eff, *owners = json_array(), *t, *l;
	size_t i, j;

	eff = api_cluster_gw_config(c, c->store->config);
	json_array_foreach(json_object_get(eff, "targets"), i, t)
		json_array_foreach(json_object_get(t, "luns"), j, l)
			json_array_append_new(owners, json_pack(
				"{s:O, s:O, s:O, s:O, s:b}", "target", json_object_get(t, "name"),
				"lun", json_object_get(l, "lun"), "owner",
				json_object_get(l, "owner"), "alua_group",
				json_object_get(l, "alua_group"), "pending",
				json_is_true(json_object_get(l, "alua_pending"))));
	t = json_pack("{s:s, s:s, s:i, s:i, s:b, s:o, s:o, s:o, s:o}", "prefix", c->prefix,
		      "gateway_id", c->id, "port_group", (int)c->group, "lease_ttl", (int)c->ttl,
		      "etcd_reachable", c->reachable, "members",
		      c->live ? json_incref(c->live) : json_object(), "groups",
		      c->groups ? json_incref(c->groups) : json_object(), "owners", owners,
		      "cluster", json_object_get(eff, "cluster") ?
		      json_incref(json_object_get(eff, "cluster")) : json_null());
	json_decref(eff);
	return t;
}
