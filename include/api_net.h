/* SPDX-License-Identifier: MIT */
/*
 * Bond and RDMA port state (agent/net/; served as /api/v1/bonds, /api/v1/rdma and in /metrics
 * by agent/api). The status is the gateway's network model (gateway/net, docs/CONTROL.md): the
 * agent watches the gateway's control socket and reads the model again on each "changed"
 * event; it reads no sysfs itself (one source of truth). Without a gateway there is no status.
 * For bonds the agent also keeps desired settings and compares them with what the host runs
 * ("drift"). Desired bond settings are host-local (interface names differ from one gateway to
 * the next), so they live beside the store in STATE_DIR/net.json, not in the shared desired
 * configuration.
 */
#ifndef API_NET_H
#define API_NET_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "gw_loop.h"

struct gw_errlist;

struct api_net {
	char *path;			/* STATE_DIR/net.json */
	json_t *desired;		/* {"bonds":[{name, mode, fail_over_mac, slaves, primary}]} */
	/* The gateway's model in the REST shapes: bonds (each with its verdicts), RDMA devices
	 * with their ports, every verdict. Empty arrays until the gateway answered. */
	json_t *bonds, *rdma, *verdicts;
	uint64_t read_ms, generation;
	/* Bumped whenever what GET /bonds and /metrics show may change (a model, desired
	 * settings, the gateway lost): part of /metrics' cache key. */
	uint64_t changes;
	bool have_model;
	/* Events of the gateway held until the model that includes them arrives. */
	json_t *pending;
	/* Where an event goes ("bond", "rdma", "link", "net_verdicts" and its data, stolen);
	 * NULL: nowhere. */
	void (*event)(void *ctx, const char *type, json_t *data);
	void *ctx;
};

/* Loads STATE_DIR/net.json (a missing file is no desired settings). 0 or -errno (-EINVAL: a
 * corrupt file, logged). */
int api_net_init(struct api_net *n, const char *state_dir,
		 void (*event)(void *ctx, const char *type, json_t *data), void *ctx);
void api_net_fini(struct api_net *n);
/* The gateway's model arrived (the "net" object of its net or state reply): replaces the
 * status, then tells the events held for it. */
void api_net_set_model(struct api_net *n, const json_t *net);
/* One event of the gateway's watch stream (docs/CONTROL.md), held until the next model:
 * failover -> "bond" {bond, active_slave, previous, failovers, mac, previous_mac, gid,
 * previous_gid, time_ms}; rdma -> "rdma" {device, port, state, previous, state_num, netdev};
 * link -> "link"; verdicts -> "net_verdicts". Others are ignored. */
void api_net_gw_event(struct api_net *n, const char *type, const json_t *data);
/* The gateway went away: no status until it is back. */
void api_net_gw_lost(struct api_net *n);
/* Replaces the desired settings in net.json (desired is not stolen). 0 or -errno. */
int api_net_save(struct api_net *n, json_t *desired);
/* Index of the element of arr whose "name" is name, -1 if none. */
ssize_t api_net_find(const json_t *arr, const char *name);
/* The differences between desired (a bond's desired object) and the bond's status (NULL: no
 * such bond): [{"field","desired","actual"}], empty when in sync (new reference). */
json_t *api_bond_drift(const json_t *desired, const json_t *status);
/* Checks a desired bond object; errors go to errs (fields relative to the bond). */
void api_bond_check(const json_t *bond, const char *name, struct gw_errlist *errs);
/* A usable network interface name (1..15 characters, no '/', ':', whitespace, "." or ".."). */
bool api_ifname_ok(const char *name);

#endif
