/* SPDX-License-Identifier: MIT */
/*
 * Cluster membership (agent/cluster/, docs/CLUSTER.md): each agent holds a lease and a member
 * key in etcd (the store's client, api_etcd.h), every agent computes the same LU owners from
 * the live members, and turns them into the gateway's ALUA port groups before it applies the
 * configuration.
 */
#ifndef API_CLUSTER_H
#define API_CLUSTER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

struct api_agent;
struct api_store;
struct gw_loop;

/* The gateway's answer (borrowed; NULL when err < 0), as the agent's control-socket client
 * gives it. */
typedef void (*api_cluster_gw_cb)(void *ctx, int err, json_t *reply);
/* Sends req (stolen) to the gateway: 0 and cb runs once, or < 0 (no gateway connected) and it
 * never does. */
typedef int (*api_cluster_gw_call_fn)(struct api_agent *ag, json_t *req, api_cluster_gw_cb cb,
				      void *ctx);

struct api_cluster_conf {
	const char *endpoints;
	const char *prefix;		/* "/isergw/NAME" */
	const char *gateway_id;
	unsigned int group;		/* this gateway's ALUA target port group, 1..65535 */
	unsigned int ttl;		/* lease seconds */
	struct gw_loop *loop;
	struct api_store *store;	/* the etcd store */
	const char *listen;		/* the agent's address, published with the member */
	const char *id_file;		/* where the id of the cluster joined is kept */
	struct api_agent *ag;		/* handed back to the callbacks below, never read */
	/* The agent's: the desired configuration or the members changed, so the gateway must
	 * follow; and whether a write is under way (the store is not refreshed under it). */
	void (*changed)(struct api_agent *ag);
	bool (*write_busy)(const struct api_agent *ag);
	/* A server-sent event (data stolen): another agent changed the configuration. */
	void (*event)(struct api_agent *ag, const char *type, json_t *data);
	/* Fencing: tell the gateway its ownership is valid for valid_ms from now (op "lease");
	 * called after every tick that renewed the lease, right after the states' push. */
	void (*lease)(struct api_agent *ag, uint64_t valid_ms);
	/* Persistent reservations (api_cluster_pr.c): requests to the gateway. NULL: none. */
	api_cluster_gw_call_fn gw_call;
};

/* The watch keeps the view current; a list every this long catches what it could miss. */
#define API_CLUSTER_RELIST_MS 30000

/* The gateways' default gateway.fence_margin_ms (docs/CLUSTER.md). */
#define API_CLUSTER_FENCE_MARGIN_MS 1000

struct api_cluster;

/* Checks the prefix (blocking, at start only): refuses a group or a gateway id another live
 * member holds (-EADDRINUSE) and a prefix another cluster's id owns (-ENOTUNIQ); then joins,
 * lists and watches from the loop. conf->store must be the etcd store. */
int api_cluster_start(const struct api_cluster_conf *conf, struct api_cluster **out);
/* Revokes the lease (the member leaves at once) and frees. */
void api_cluster_stop(struct api_cluster *c);
/* What the gateway should run for desired (new reference); c NULL (no cluster): desired. */
json_t *api_cluster_gw_config(const struct api_cluster *c, const json_t *desired);
/* The gateway told its own portals (op "config"): kept as this member's. */
void api_cluster_set_local(struct api_cluster *c, const json_t *gw_config);
bool api_cluster_has_local(const struct api_cluster *c);
void api_cluster_gw_lost(struct api_cluster *c);
/* The gateway (re)connected and its events are subscribed: it gets every LU's reservation
 * state ({"op":"pr_cluster"}) as soon as the cluster has read them. */
void api_cluster_gw_up(struct api_cluster *c);
/* The gateway applied a configuration: the set again, for the LUNs it did not have before (a
 * gateway takes only newer states from it, so nothing goes back). */
void api_cluster_gw_applied(struct api_cluster *c);
/* The gateway's "pr_commit" event (data borrowed): committed to etcd, answered with
 * {"op":"pr_result"} within API_PRC_COMMIT_MS (docs/CLUSTER.md). */
void api_cluster_pr_commit(struct api_cluster *c, const json_t *data);
/*
 * Takeover holds (pure): eff is an effective configuration (every LU's "owner" resolved).
 * An LU whose owner is self and not in owned gets a hold in held until now + hold_ms, and
 * moves to owned once it passed; LUs no longer self's leave both. True when owned changed.
 * mark_pending sets "alua_pending": true on every LU of self's not in owned.
 */
bool api_cluster_holds_update(const json_t *eff, const char *self, json_t *owned, json_t *held,
			      uint64_t now_ms, uint64_t hold_ms);
void api_cluster_mark_pending(json_t *eff, const char *self, const json_t *owned);
/* ---- persistent reservations in etcd (api_cluster_pr.c) ------------------------------------ */

/* PREFIX/pr/TARGET/LUN: where one LU's reservation state lives (malloc'ed). */
char *api_pr_key(const char *prefix, const char *target, uint64_t lun);
/* 0 when st is a valid state (docs/CLUSTER.md); -EINVAL with *why naming the field. */
int api_pr_state_check(const json_t *st, const char **why);
/* The txn that commits st only if the key is still at mod_rev (0: still absent); on failure it
 * reads the key back, so the loser learns the state that won in the same round trip. */
json_t *api_pr_cas_txn(const char *key, const json_t *st, int64_t mod_rev);

/* GET /cluster: members, groups, owners, etcd's state and endpoints (new reference). */
json_t *api_cluster_status(const struct api_cluster *c);

#endif
