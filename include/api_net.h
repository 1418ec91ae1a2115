/* SPDX-License-Identifier: MIT */
/*
 * Bond and RDMA port state (agent/net/; served as /api/v1/bonds, /api/v1/rdma and in /metrics
 * by agent/api): status from sysfs (api_sysfs.h) and, for bonds, desired settings the agent
 * keeps and compares with what the host runs ("drift"). Desired bond settings are host-local
 * (interface names differ from one gateway to the next), so they live beside the store in
 * STATE_DIR/net.json, not in the shared desired configuration; the agent reports drift and
 * never changes host networking.
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
	/* Read every second (and what /metrics shows, so scrapes never pile on sysfs); a change
	 * of active slave or of an RDMA port's state is a "bond" / "rdma" event. */
	json_t *bonds, *rdma;
	uint64_t read_ms;
	struct gw_timer poll;
	bool poll_on;
	/* Where a change goes ("bond" / "rdma" and its data, stolen); NULL: nowhere. */
	void (*event)(void *ctx, const char *type, json_t *data);
	void *ctx;
};

/* Loads STATE_DIR/net.json (a missing file is no desired settings). 0 or -errno (-EINVAL: a
 * corrupt file, logged). */
int api_net_init(struct api_net *n, struct gw_loop *loop, const char *state_dir,
		 void (*event)(void *ctx, const char *type, json_t *data), void *ctx);
void api_net_fini(struct api_net *n);
/* Reads sysfs again (done every second); changes since the last read become events. */
void api_net_refresh(struct api_net *n);
/* Replaces the desired settings in net.json (desired is not stolen). 0 or -errno. */
int api_net_save(struct api_net *n, json_t *desired);
/* Index of the element of arr whose "name" is name, -1 if none. */
ssize_t api_net_find(const json_t *arr, const char *name);
/* The differences between desired (a bond's desired object) and the bond's status (NULL: no
 * such bond): [{"field","desired","actual"}], empty when in sync (new reference). */
json_t *api_bond_drift(const json_t *desired, const json_t *status);
/* Checks a desired bond object; errors go to errs (fields relative to the bond). */
void api_bond_check(const json_t *bond, const char *name, struct gw_errlist *errs);

#endif
