/* SPDX-License-Identifier: MIT */
/*
 * The gateway's network model (gateway/net/): netdevs and their addresses, bonds with their
 * bonding attributes and slaves, RDMA ports with their GID tables, and for every portal the
 * chain address -> netdev -> bond -> active slave -> RDMA device/port -> GID, judged by one
 * table of verdicts (net_verdict.c).
 *
 * The model is plain data, rebuilt whole by a reader: the live one (net_live.c: links and
 * addresses through libnl-route-3, RDMA ports through libibverbs, bonding attributes and
 * sysctls from /sys and /proc) or the sysfs one (net_sysfs.c: everything from a tree laid out
 * like /sys, which tests point $ISERGW_SYSFS at). Unit tests build models without a kernel.
 *
 * net_mon (net_mon.c) keeps a model current inside the gateway's event loop: it re-reads on
 * rtnetlink link and address events and periodically, logs verdicts as they appear and go,
 * and counts changes of a bond's active slave. It only reads: no call needs CAP_NET_ADMIN.
 */
#ifndef NET_H
#define NET_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conf.h"
#include "gw_loop.h"

#define NET_IFNAME 16		/* IFNAMSIZ */
#define NET_HWADDR 64		/* an IPoIB hardware address is 20 bytes: 59 characters */
#define NET_GIDSTR 40

/* What a netdev carries, from its ARPHRD type and the RDMA ports over it. */
enum net_link_layer {
	NET_LL_UNKNOWN = 0,
	NET_LL_ETHERNET,	/* Ethernet without an RDMA port */
	NET_LL_ROCE,		/* Ethernet with an RDMA port (RoCE, Soft-RoCE) */
	NET_LL_INFINIBAND,	/* IPoIB */
};

struct net_addr {
	char ifname[NET_IFNAME];
	int family;		/* AF_INET, AF_INET6 */
	uint8_t addr[16];
	unsigned int prefix;
};

struct net_link {
	char name[NET_IFNAME];
	int ifindex;
	char kind[16];		/* "bond", "ipoib", ... as rtnetlink's IFLA_INFO_KIND, or "" */
	char master[NET_IFNAME];	/* its bond (or other master), "" when none */
	unsigned int arptype;	/* ARPHRD_ETHER, ARPHRD_INFINIBAND, ... */
	char hwaddr[NET_HWADDR];
	bool up;		/* administratively up */
	bool carrier;		/* operstate up (or unknown with carrier) */
	int speed;		/* Mb/s, -1 when the kernel does not say */
	/* As a bond slave (bonding_slave/): */
	char slave_state[16];	/* "active", "backup" */
	char slave_mii[8];	/* "up", "down" */
	char perm_hwaddr[NET_HWADDR];
	long long link_failures;	/* -1 unknown */
	/* IPv4 sysctls, the interface's own value (-1 unknown). */
	int rp_filter, arp_ignore, arp_announce;
	enum net_link_layer ll;	/* resolved by net_model_resolve */
};

enum net_bond_mode {
	NET_BOND_RR = 0, NET_BOND_AB, NET_BOND_XOR, NET_BOND_BCAST, NET_BOND_8023AD,
	NET_BOND_TLB, NET_BOND_ALB, NET_BOND_UNKNOWN = -1,
};

struct net_failover {
	uint64_t time_ms;	/* wall clock, ms since the epoch */
	char old_slave[NET_IFNAME], new_slave[NET_IFNAME];
	char old_mac[NET_HWADDR], new_mac[NET_HWADDR];
	char old_gid[NET_GIDSTR], new_gid[NET_GIDSTR];
};

struct net_bond {
	char name[NET_IFNAME];
	int mode;		/* enum net_bond_mode */
	char mode_name[24];
	char fail_over_mac[12];	/* "none", "active", "follow" */
	int miimon, arp_interval;
	char arp_ip_target[160];	/* space separated, as sysfs prints it */
	char primary[NET_IFNAME];
	char primary_reselect[12];
	char active[NET_IFNAME];	/* "" when none */
	int num_grat_arp, num_unsol_na;	/* -1 unknown */
	char mii_status[8];
	char (*slaves)[NET_IFNAME];
	size_t nslaves;
	/* Carried from one read to the next by net_model_carry. */
	uint64_t failovers;
	bool has_last;
	struct net_failover last;
	char last_active[NET_IFNAME];	/* the last non-empty active slave seen */
};

enum net_gid_type { NET_GID_IB = 0, NET_GID_ROCE_V1, NET_GID_ROCE_V2 };

struct net_gid {
	unsigned int index;
	uint8_t raw[16];
	int type;		/* enum net_gid_type */
	char ndev[NET_IFNAME];	/* "" for IB */
};

struct net_rdma_port {
	char dev[64];
	unsigned int port;
	int state;		/* 1 DOWN .. 4 ACTIVE (enum ibv_port_state), 0 unknown */
	bool ethernet;		/* link layer Ethernet (RoCE) rather than InfiniBand */
	char netdev[NET_IFNAME];	/* what it sits on (RoCE: GID 0's netdev; IB: IPoIB's) */
	char rate[32];
	struct net_gid *gids;
	size_t ngids;
};

/* One portal's way down to the wire; empty strings where the chain stops. */
struct net_chain {
	char portal[64];
	char address[64];
	bool iser;
	bool wildcard;		/* 0.0.0.0 or ::: every netdev */
	char netdev[NET_IFNAME];
	char bond[NET_IFNAME];
	char slave[NET_IFNAME];	/* the bond's active slave, or the netdev itself */
	int rdma;		/* index into ports, -1 when none */
	int gid;		/* index into that port's gids, -1 when none */
};

enum net_severity { NET_SEV_INFO = 0, NET_SEV_WARNING, NET_SEV_ERROR };

struct net_rule;

struct net_verdict {
	const struct net_rule *rule;
	char object[80];	/* "bond/bd0", "portal/iser0", "netdev/eth1", "rdma/mlx5_0:1" */
	char *message, *fix;	/* owned */
};

struct net_portal {
	char name[64];
	char address[64];
	bool iser;
};

struct net_model {
	struct net_link *links;
	size_t nlinks;
	struct net_addr *addrs;
	size_t naddrs;
	struct net_bond *bonds;
	size_t nbonds;
	struct net_rdma_port *ports;
	size_t nports;
	int all_rp_filter, all_arp_ignore, all_arp_announce;	/* conf/all, -1 unknown */
	struct net_chain *chains;
	size_t nchains;
	struct net_verdict *verdicts;
	size_t nverdicts;
};

/* ---- net_model.c ------------------------------------------------------------------------ */
void net_model_init(struct net_model *m);
void net_model_fini(struct net_model *m);
/* Appenders: a zeroed (ifindex/speed/sysctls -1) element, or NULL on ENOMEM. */
struct net_link *net_model_add_link(struct net_model *m, const char *name);
struct net_addr *net_model_add_addr(struct net_model *m);
struct net_bond *net_model_add_bond(struct net_model *m, const char *name);
int net_bond_add_slave(struct net_bond *b, const char *name);
struct net_rdma_port *net_model_add_port(struct net_model *m, const char *dev, unsigned int port);
struct net_gid *net_port_add_gid(struct net_rdma_port *p);
struct net_link *net_model_link(const struct net_model *m, const char *name);
struct net_bond *net_model_bond(const struct net_model *m, const char *name);
/* The RDMA ports whose netdev is name, one after another: start at *i = 0. */
struct net_rdma_port *net_model_port_on(const struct net_model *m, const char *name, size_t *i);
/* Link layers, then the chain of every portal (replacing earlier chains). */
void net_model_resolve(struct net_model *m, const struct net_portal *portals, size_t n);
/* Moves the failover history of old's bonds into m and counts changes of active slave; calls
 * fn for each (may be NULL). now_ms is the wall clock. */
void net_model_carry(struct net_model *m, const struct net_model *old, uint64_t now_ms,
		     void (*fn)(const struct net_bond *b, void *arg), void *arg);
/* An active slave seen between reads (an rtnetlink message): counted as a failover, as
 * net_model_carry would, when it differs from the last one seen; the next read then agrees and
 * counts nothing more. True when it was a failover (b->last says which). */
bool net_model_note_active(struct net_model *m, const char *bond, const char *active,
			   uint64_t now_ms);
/* "fe80::..." form of a GID, in buf of NET_GIDSTR. */
void net_gid_str(const uint8_t raw[16], char *buf);
const char *net_severity_name(int sev);
const char *net_ll_name(enum net_link_layer ll);
/* The whole model (bonds, rdma_ports, portals, verdicts), new reference. */
json_t *net_model_json(const struct net_model *m);

/* ---- net_verdict.c: the table ------------------------------------------------------------ */
struct net_rule {
	const char *id;		/* stable: tools and alerts key on it */
	int severity;		/* enum net_severity */
	const char *object;	/* what it is about: "bond", "portal", "netdev" */
	/* Finds every breach in m and files it with net_verdict_add. */
	void (*check)(const struct net_rule *r, struct net_model *m);
	/* templates: {bond} {slave} {portal} {addr} {netdev} {rdma} {value} */
	const char *message;
	const char *fix;
};

extern const struct net_rule net_rules[];
extern const size_t net_nrules;
/* Judges m (its chains resolved), replacing earlier verdicts. 0 or -ENOMEM. */
int net_judge(struct net_model *m);
const struct net_verdict *net_model_verdict(const struct net_model *m, const char *id,
					    const char *object);

/* ---- readers ------------------------------------------------------------------------------ */
struct net_reader;

struct net_reader_ops {
	const char *name;
	/* netdevs (name, ifindex, kind, master, type, hwaddr, flags) and addresses */
	int (*links)(struct net_reader *r, struct net_model *m);
	/* RDMA devices' ports and GID tables */
	int (*rdma)(struct net_reader *r, struct net_model *m);
	void (*destroy)(struct net_reader *r);
};

struct net_reader {
	const struct net_reader_ops *ops;
	char sysfs[256];	/* /sys or a fixture */
	char procfs[256];	/* /proc, or the fixture's proc/ */
};

/* Everything from a tree laid out like /sys (class/net, class/infiniband), with the sysctls in
 * ROOT/proc/sys/net/ipv4/conf and the addresses, which sysfs does not show, in ROOT/isergw-addrs
 * ("IFNAME ADDRESS/PREFIX" per line). */
int net_reader_sysfs_create(const char *root, struct net_reader **out);
/* rtnetlink (libnl-route-3) and libibverbs, with /sys and /proc. */
int net_reader_live_create(struct net_reader **out);
void net_reader_destroy(struct net_reader *r);
/* One whole read into m (fresh from net_model_init): links, bonds, sysctls, RDMA ports. */
int net_model_read(struct net_model *m, struct net_reader *r);

/* ---- net_mon.c: the model kept current in the loop ---------------------------------------- */
struct net_mon;

/* With $ISERGW_SYSFS set the sysfs reader over it (re-read every second), else the live one
 * (rtnetlink events, and every 10 s). Reads once before returning. 0 or -errno; a host with no
 * bond and no RDMA device is fine. */
int net_mon_create(struct gw_loop *loop, struct net_mon **out);
void net_mon_destroy(struct net_mon *n);
/* The portals to follow (copied); re-judges and logs verdicts that appear or go. */
void net_mon_set_portals(struct net_mon *n, const struct isc_portal_conf *p, size_t np);
/* Re-reads now (for tests and for a caller that just changed something). */
void net_mon_refresh(struct net_mon *n);
const struct net_model *net_mon_model(const struct net_mon *n);
/* The "net" object of the control socket's state reply (new reference). */
json_t *net_mon_json(struct net_mon *n);
/*
 * The watcher: told each event as it happens, type and data (stolen), from inside the loop:
 *   "failover"  {bond, old, new, old_mac, new_mac, old_gid, new_gid, failovers, time_ms}
 *   "link"      {netdev, up, carrier, previous_carrier, master}   a netdev's state changed
 *   "rdma"      {device, port, state_num, previous_num, netdev}   an RDMA port's state changed
 *   "verdicts"  {added:[{id,severity,object,message,fix}], resolved:[{id,object}], active}
 *   "changed"   {generation}   what net_mon_json shows (bonds, ports, verdicts) differs from
 *                              the last "changed": one after each batch of the events above
 * Failover, link, rdma and verdicts events of one re-read come before its "changed". One
 * watcher (NULL: none); the control socket fans out to its subscribers.
 */
typedef void (*net_mon_watch_fn)(void *arg, const char *type, json_t *data);
void net_mon_set_watch(struct net_mon *n, net_mon_watch_fn fn, void *arg);
/* Counts "changed" events; also in net_mon_json as "generation". */
uint64_t net_mon_generation(const struct net_mon *n);

#endif
