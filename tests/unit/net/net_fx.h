/* SPDX-License-Identifier: MIT */
/*
 * Fixture trees for the net tests: the files the kernel shows under /sys (class/net,
 * class/infiniband), the sysctls under proc/, and the fixture-only isergw-addrs, written into
 * a fresh temporary folder and read back through the sysfs reader.
 */
#ifndef NET_FX_H
#define NET_FX_H

#include <criterion/criterion.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "net.h"

struct fx {
	char root[64];
};

static inline void fx_mkdirs(const char *path)
{
	char p[512], *s;

	snprintf(p, sizeof(p), "%s", path);
	for (s = p + 1; *s; s++)
		if (*s == '/') {
			*s = 0;
			mkdir(p, 0755);
			*s = '/';
		}
	mkdir(p, 0755);
}

/* ROOT/rel gets the line printed from fmt. */
static inline void fx_put(const struct fx *f, const char *rel, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static inline void fx_put(const struct fx *f, const char *rel, const char *fmt, ...)
{
	char path[512], *slash;
	va_list ap;
	FILE *fp;

	snprintf(path, sizeof(path), "%s/%s", f->root, rel);
	slash = strrchr(path, '/');
	*slash = 0;
	fx_mkdirs(path);
	*slash = '/';
	fp = fopen(path, "w");
	cr_assert_not_null(fp, "%s: %s", path, strerror(errno));
	va_start(ap, fmt);
	vfprintf(fp, fmt, ap);
	va_end(ap);
	fputc('\n', fp);
	fclose(fp);
}

static inline void fx_init(struct fx *f)
{
	snprintf(f->root, sizeof(f->root), "/tmp/isergw-net-XXXXXX");
	cr_assert_not_null(mkdtemp(f->root));
	fx_put(f, "isergw-addrs", "# fixture addresses");
}

static inline void fx_fini(struct fx *f)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->root);
	cr_assert_eq(system(cmd), 0);
}

/* A netdev: type 1 (Ethernet) or 32 (InfiniBand), its MAC, up or down. */
static inline void fx_link(const struct fx *f, const char *name, int type, const char *mac,
			   bool up, int speed)
{
	char rel[128];

	snprintf(rel, sizeof(rel), "class/net/%s/type", name);
	fx_put(f, rel, "%d", type);
	snprintf(rel, sizeof(rel), "class/net/%s/address", name);
	fx_put(f, rel, "%s", mac);
	snprintf(rel, sizeof(rel), "class/net/%s/operstate", name);
	fx_put(f, rel, "%s", up ? "up" : "down");
	snprintf(rel, sizeof(rel), "class/net/%s/flags", name);
	fx_put(f, rel, "0x%x", up ? 0x1003 : 0x1002);
	if (speed > 0) {
		snprintf(rel, sizeof(rel), "class/net/%s/speed", name);
		fx_put(f, rel, "%d", speed);
	}
}

static inline void fx_bond_attr(const struct fx *f, const char *bond, const char *attr,
				const char *val)
{
	char rel[128];

	snprintf(rel, sizeof(rel), "class/net/%s/bonding/%s", bond, attr);
	fx_put(f, rel, "%s", val);
}

/* An active-backup bond (mode and fail_over_mac as sysfs prints them, "active-backup 1"). */
static inline void fx_bond(const struct fx *f, const char *name, const char *mode,
			   const char *fom, int miimon, const char *active, const char *slaves)
{
	char v[32];

	fx_link(f, name, 1, "02:00:00:00:00:01", true, 0);
	fx_bond_attr(f, name, "mode", mode);
	fx_bond_attr(f, name, "fail_over_mac", fom);
	snprintf(v, sizeof(v), "%d", miimon);
	fx_bond_attr(f, name, "miimon", v);
	fx_bond_attr(f, name, "arp_interval", "0");
	fx_bond_attr(f, name, "arp_ip_target", "");
	fx_bond_attr(f, name, "primary", "");
	fx_bond_attr(f, name, "primary_reselect", "always 0");
	fx_bond_attr(f, name, "active_slave", active);
	fx_bond_attr(f, name, "num_grat_arp", "1");
	fx_bond_attr(f, name, "num_unsol_na", "1");
	fx_bond_attr(f, name, "mii_status", "up");
	fx_bond_attr(f, name, "slaves", slaves);
}

static inline void fx_slave(const struct fx *f, const char *name, const char *state,
			    const char *mii, const char *perm)
{
	char rel[128];

	snprintf(rel, sizeof(rel), "class/net/%s/bonding_slave/state", name);
	fx_put(f, rel, "%s", state);
	snprintf(rel, sizeof(rel), "class/net/%s/bonding_slave/mii_status", name);
	fx_put(f, rel, "%s", mii);
	snprintf(rel, sizeof(rel), "class/net/%s/bonding_slave/perm_hwaddr", name);
	fx_put(f, rel, "%s", perm);
	snprintf(rel, sizeof(rel), "class/net/%s/bonding_slave/link_failure_count", name);
	fx_put(f, rel, "0");
}

/* An RDMA port; state 4 ACTIVE or 1 DOWN. */
static inline void fx_port(const struct fx *f, const char *dev, int port, int state, bool eth)
{
	char rel[128];

	snprintf(rel, sizeof(rel), "class/infiniband/%s/ports/%d/state", dev, port);
	fx_put(f, rel, "%d: %s", state, state == 4 ? "ACTIVE" : "DOWN");
	snprintf(rel, sizeof(rel), "class/infiniband/%s/ports/%d/link_layer", dev, port);
	fx_put(f, rel, "%s", eth ? "Ethernet" : "InfiniBand");
	snprintf(rel, sizeof(rel), "class/infiniband/%s/ports/%d/rate", dev, port);
	fx_put(f, rel, "100 Gb/sec (4X EDR)");
}

/* GID index idx of a port: "fe80:0000:..." as sysfs prints it, its type and netdev. */
static inline void fx_gid(const struct fx *f, const char *dev, int port, int idx,
			  const char *gid, const char *type, const char *ndev)
{
	char rel[160];

	snprintf(rel, sizeof(rel), "class/infiniband/%s/ports/%d/gids/%d", dev, port, idx);
	fx_put(f, rel, "%s", gid);
	snprintf(rel, sizeof(rel), "class/infiniband/%s/ports/%d/gid_attrs/types/%d", dev, port,
		 idx);
	fx_put(f, rel, "%s", type);
	if (ndev) {
		snprintf(rel, sizeof(rel), "class/infiniband/%s/ports/%d/gid_attrs/ndevs/%d", dev,
			 port, idx);
		fx_put(f, rel, "%s", ndev);
	}
}

static inline void fx_addrs(const struct fx *f, const char *lines)
{
	fx_put(f, "isergw-addrs", "%s", lines);
}

static inline void fx_sysctl(const struct fx *f, const char *ifname, const char *key, int v)
{
	char rel[160];

	snprintf(rel, sizeof(rel), "proc/sys/net/ipv4/conf/%s/%s", ifname, key);
	fx_put(f, rel, "%d", v);
}

/*
 * The usual RoCE host: bond0 (active-backup, miimon 100, fail_over_mac as given) over ens1f0
 * (mlx5_0, active) and ens1f1 (mlx5_1), 192.168.10.5/24 on bond0, whose RoCE v2 GID sits on
 * the active slave's port.
 */
static inline void fx_roce_bond(const struct fx *f, const char *fom)
{
	fx_bond(f, "bond0", "active-backup 1", fom, 100, "ens1f0", "ens1f0 ens1f1");
	fx_link(f, "ens1f0", 1, "02:00:00:00:00:01", true, 100000);
	fx_link(f, "ens1f1", 1, "02:00:00:00:00:02", true, 100000);
	fx_slave(f, "ens1f0", "active", "up", "02:00:00:00:00:01");
	fx_slave(f, "ens1f1", "backup", "up", "02:00:00:00:00:02");
	fx_put(f, "class/net/ens1f0/ifindex", "3");
	fx_put(f, "class/net/ens1f1/ifindex", "4");
	fx_put(f, "class/net/bond0/ifindex", "5");
	fx_port(f, "mlx5_0", 1, 4, true);
	fx_gid(f, "mlx5_0", 1, 0, "fe80:0000:0000:0000:0000:00ff:fe00:0001", "IB/RoCE v1",
	       "ens1f0");
	fx_gid(f, "mlx5_0", 1, 1, "0000:0000:0000:0000:0000:ffff:c0a8:0a05", "IB/RoCE v1",
	       "bond0");
	fx_gid(f, "mlx5_0", 1, 2, "0000:0000:0000:0000:0000:ffff:c0a8:0a05", "RoCE v2",
	       "bond0");
	fx_gid(f, "mlx5_0", 1, 3, "0000:0000:0000:0000:0000:0000:0000:0000", "IB/RoCE v1",
	       NULL);
	fx_port(f, "mlx5_1", 1, 4, true);
	fx_gid(f, "mlx5_1", 1, 0, "fe80:0000:0000:0000:0000:00ff:fe00:0002", "IB/RoCE v1",
	       "ens1f1");
	fx_addrs(f, "bond0 192.168.10.5/24");
}

/* Reads the tree, resolves the portals (name:address:iser|tcp, ...) and judges. */
static inline void fx_read(const struct fx *f, struct net_model *m, const struct net_portal *p,
			   size_t np)
{
	struct net_reader *r;

	cr_assert_eq(net_reader_sysfs_create(f->root, &r), 0);
	net_model_init(m);
	cr_assert_eq(net_model_read(m, r), 0);
	net_reader_destroy(r);
	net_model_resolve(m, p, np);
	cr_assert_eq(net_judge(m), 0);
}

static const struct net_portal fx_iser0 = { "iser0", "192.168.10.5", true };

/* The ids of m's verdicts, space separated, for one-line assertions. */
static inline const char *fx_ids(const struct net_model *m)
{
	static char buf[1024];
	size_t i;

	buf[0] = 0;
	for (i = 0; i < m->nverdicts; i++)
		snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s%s", *buf ? " " : "",
			 m->verdicts[i].rule->id);
	return buf;
}

#endif
