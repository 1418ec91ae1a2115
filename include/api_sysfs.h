/* SPDX-License-Identifier: MIT */
/*
 * Bond and RDMA port status, read from sysfs: /sys/class/net/<bond>/bonding/ with its slaves'
 * bonding_slave/ folders, and /sys/class/infiniband/<dev>/ports/<n>/. Reading only: the agent
 * never changes host networking. The root is /sys, or $ISERGW_SYSFS (tests point it at a
 * fixture tree laid out the same way).
 */
#ifndef API_SYSFS_H
#define API_SYSFS_H

#include <jansson.h>
#include <stdbool.h>

/* $ISERGW_SYSFS when set and not empty, else "/sys". */
const char *api_sysfs_root(void);
/* A usable network interface name (1..15 characters, no '/', whitespace, or "." / ".."). */
bool api_ifname_ok(const char *name);
/*
 * {"name","mode","fail_over_mac","miimon","mii_status","active_slave","primary","address",
 *  "slaves":[{"name","state","mii_status","link_failure_count","perm_hwaddr"}],"failovers"}
 * for the bond called name (new reference), NULL when there is no such bond.
 */
json_t *api_sysfs_bond(const char *root, const char *name);
/* Every bond, sorted by name (new reference, an array; empty when none or no sysfs). */
json_t *api_sysfs_bonds(const char *root);
/*
 * Every RDMA device, sorted by name: [{"name","netdev","ports":[{"port","state","state_num",
 * "phys_state","link_layer","rate","netdev"}]}] (new reference).
 */
json_t *api_sysfs_rdma(const char *root);

#endif
