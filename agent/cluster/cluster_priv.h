/* SPDX-License-Identifier: MIT */
/*
 * Inside agent/cluster only: the persistent reservations' side of the cluster (api_cluster_pr.c),
 * fed by the membership's list and watch of PREFIX/ (api_cluster.c) and talking to the gateway
 * through the agent's callback (docs/CLUSTER.md, "Persistent reservations across gateways").
 * It keeps every LU's state as last read from etcd, hands the gateway the whole set when it
 * (re)connects and every change after, and commits the gateway's PERSISTENT RESERVE OUTs with a
 * compare-and-swap, answering each within API_PRC_COMMIT_MS whatever etcd does.
 */
#ifndef CLUSTER_PRIV_H
#define CLUSTER_PRIV_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "api_cluster.h"

struct api_etcd;
struct gw_loop;

/* The gateway gives up on a commit after 5 s: it always hears from the agent before. */
#define API_PRC_COMMIT_MS 3000

struct api_prc_conf {
	struct gw_loop *loop;
	struct api_etcd *etcd;
	const char *prefix;		/* "/isergw/NAME" */
	api_cluster_gw_call_fn gw_call;	/* NULL: no gateway */
	struct api_agent *ag;		/* gw_call's argument */
	/* The barrier (below); NULL: none. Borrowed, the cluster's own: this member's id, the
	 * live members ({id: ...}) and the lease its keys live under (0: none). */
	const char *self;
	const json_t *live;
	const int64_t *lease;
};

struct api_prc;

int api_prc_create(const struct api_prc_conf *conf, struct api_prc **out);
/* Commits in flight end without an answer (the gateway fails them when the agent goes). */
void api_prc_destroy(struct api_prc *p);

/* PREFIX/pr/REL changed (rel: "TARGET/LUN"; value NULL: deleted) at mod_rev. Between
 * list_begin and list_end the keys form a fresh snapshot; outside, each is a watch event and is
 * pushed to the gateway ({"op":"pr"}). */
void api_prc_kv(struct api_prc *p, const char *rel, const char *value, int64_t mod_rev);
void api_prc_list_begin(struct api_prc *p);
/* rev: the list's revision. What the snapshot changed is pushed; the first snapshot with the
 * gateway connected sends {"op":"pr_cluster"}. */
void api_prc_list_end(struct api_prc *p, int64_t rev);

/* The gateway's connection came up (the agent subscribed to its events first) / went away. */
void api_prc_gw_up(struct api_prc *p);
void api_prc_gw_lost(struct api_prc *p);
/* The gateway applied a configuration: LUNs new to it take their states from the set, sent
 * again (the gateway only moves a LU's state forward from a second pr_cluster). */
void api_prc_gw_applied(struct api_prc *p);

/* PREFIX/pr_acks/ID changed (value NULL: deleted): member ID's gateway has every state up to
 * that revision. A commit is answered ok once etcd took it, this agent's watch brought it back
 * and every other live member acknowledged its revision (or at the deadline: it is in etcd). */
void api_prc_ack(struct api_prc *p, const char *id, const char *value);

/* A "pr_commit" event's data; why != NULL: answer unavailable with it at once (the cluster
 * cannot commit, e.g. the prefix is another cluster's). */
void api_prc_commit(struct api_prc *p, const json_t *data, const char *why);

/* The desired configuration (as etcd had it at cfg_rev) lost LUs: their keys go, each with a
 * txn that holds only while PREFIX/config is still at cfg_rev and the key unchanged. */
void api_prc_sweep(struct api_prc *p, const json_t *config, int64_t cfg_rev);

#endif
