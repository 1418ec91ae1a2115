/* SPDX-License-Identifier: MIT */
/*
 * Inside the net module: what both readers take from sysfs and procfs (net_sysfs.c), as the
 * kernel shows some things only there (bonding options that libnl 3.7 does not parse, slave
 * state, speed, the IPoIB netdev's RDMA port, sysctls).
 */
#ifndef NET_PRIV_H
#define NET_PRIV_H

#include <stdbool.h>
#include <stddef.h>

#include "net.h"

/* Copies src (NULL: "") into dst of len, cut to fit. */
void net_copy(char *dst, size_t len, const char *src);
/* The first line of a file, without its newline; false when it cannot be read. */
bool net_read_line(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Bonds (ROOT/class/net/NAME/bonding/), each link's slave state, speed and IPv4 sysctls. */
int net_sysfs_bonds(const char *root, const char *procfs, struct net_model *m);
/* The GID table of a port from ROOT/class/infiniband/DEV/ports/N/gids and gid_attrs/. */
int net_sysfs_gids(const char *root, struct net_rdma_port *p);
/* One RDMA device's ports from ROOT/class/infiniband/DEV/ports/ (GIDs included). */
int net_sysfs_rdma_dev(const char *root, struct net_model *m, const char *dev);
/* What only sysfs shows of a port and its device: phys_state, node_guid, the device's netdev
 * (rxe's parent, else the first of device/net/). Missing files leave them empty. */
void net_sysfs_port_extra(const char *root, struct net_rdma_port *p);
/* Where the port has no netdev yet: rxe's parent, or an IPoIB link whose device is the port's. */
void net_sysfs_port_netdevs(const char *root, struct net_model *m);

/* net_mon.c: one rtnetlink message (what the event socket hands over; tests build their own). */
struct nlmsghdr;
void net_mon_rtmsg(struct net_mon *n, struct nlmsghdr *h);

#endif
