// SPDX-License-Identifier: MIT
/*
 * The live reader: netdevs and addresses from rtnetlink dumps through libnl-route-3, RDMA
 * ports and GID tables through libibverbs (ibv_query_gid_table, rdma-core 44), the rest from
 * /sys and /proc (net_sysfs.c). Every call only reads; none needs CAP_NET_ADMIN.
 */
#include <errno.h>
#include <infiniband/verbs.h>
#include <net/if.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "gw_log.h"
#include "net_priv.h"

/* RFC 2863 operational states as rtnetlink reports them (linux/if.h, which clashes with
 * net/if.h). */
enum { NET_OPER_UNKNOWN = 0, NET_OPER_UP = 6 };

struct live_reader {
	struct net_reader r;
	struct nl_sock *sk;
};

static int live_links(struct net_reader *rd, struct net_model *m)
{
	struct live_reader *lr = gw_container_of(rd, struct live_reader, r);
	struct nl_cache *links = NULL, *addrs = NULL;
	struct nl_object *o;
	int r;

	r = rtnl_link_alloc_cache(lr->sk, AF_UNSPEC, &links);
	if (r < 0) {
		gw_warn("net", "rtnetlink link dump: %s", nl_geterror(r));
		return -EIO;
	}
	for (o = nl_cache_get_first(links); o; o = nl_cache_get_next(o)) {
		struct rtnl_link *k = (struct rtnl_link *)o;
		struct nl_addr *a = rtnl_link_get_addr(k);
		const char *kind = rtnl_link_get_type(k);
		struct net_link *l = net_model_add_link(m, rtnl_link_get_name(k));
		uint8_t op;

		if (!l) {
			r = -ENOMEM;
			goto out;
		}
		l->ifindex = rtnl_link_get_ifindex(k);
		l->arptype = rtnl_link_get_arptype(k);
		snprintf(l->kind, sizeof(l->kind), "%s", kind ? kind : "");
		if (a && nl_addr_get_len(a))
			nl_addr2str(a, l->hwaddr, sizeof(l->hwaddr));
		l->up = rtnl_link_get_flags(k) & IFF_UP;
		op = rtnl_link_get_operstate(k);
		l->carrier = op == NET_OPER_UP ||
			     (op == NET_OPER_UNKNOWN && rtnl_link_get_carrier(k));
		if (rtnl_link_get_master(k) > 0)
			rtnl_link_i2name(links, rtnl_link_get_master(k), l->master,
					 sizeof(l->master));
	}
	r = rtnl_addr_alloc_cache(lr->sk, &addrs);
	if (r < 0) {
		gw_warn("net", "rtnetlink address dump: %s", nl_geterror(r));
		r = -EIO;
		goto out;
	}
	for (o = nl_cache_get_first(addrs); o; o = nl_cache_get_next(o)) {
		struct rtnl_addr *ra = (struct rtnl_addr *)o;
		struct nl_addr *loc = rtnl_addr_get_local(ra);
		int fam = rtnl_addr_get_family(ra);
		struct net_addr *na;

		if (!loc || (fam != AF_INET && fam != AF_INET6) ||
		    nl_addr_get_len(loc) != (fam == AF_INET ? 4u : 16u))
			continue;
		na = net_model_add_addr(m);
		if (!na) {
			r = -ENOMEM;
			goto out;
		}
		rtnl_link_i2name(links, rtnl_addr_get_ifindex(ra), na->ifname, sizeof(na->ifname));
		na->family = fam;
		na->prefix = (unsigned int)rtnl_addr_get_prefixlen(ra);
		memcpy(na->addr, nl_addr_get_binary_addr(loc), nl_addr_get_len(loc));
	}
	r = 0;
out:
	if (addrs)
		nl_cache_free(addrs);
	nl_cache_free(links);
	return r;
}

static int live_gid_type(uint32_t t)
{
	switch (t) {
	case IBV_GID_TYPE_ROCE_V1: return NET_GID_ROCE_V1;
	case IBV_GID_TYPE_ROCE_V2: return NET_GID_ROCE_V2;
	default: return NET_GID_IB;
	}
}

static const char *ifname_of(const struct net_model *m, uint32_t ifindex, char *buf)
{
	size_t i;

	buf[0] = 0;
	if (!ifindex)
		return buf;
	for (i = 0; i < m->nlinks; i++)
		if (m->links[i].ifindex == (int)ifindex) {
			snprintf(buf, NET_IFNAME, "%s", m->links[i].name);
			return buf;
		}
	return if_indextoname(ifindex, buf) ? buf : (buf[0] = 0, buf);
}

/* One device: its ports, and the GID table in one call (sysfs where that is not supported). */
static int live_device(struct net_reader *rd, struct net_model *m, struct ibv_device *dev)
{
	struct ibv_context *ctx = ibv_open_device(dev);
	struct ibv_device_attr da;
	struct ibv_gid_entry *ents = NULL;
	size_t first = m->nports, total = 0, i;
	ssize_t n = -1;
	unsigned int p;
	int r = 0;

	/* Not ours to open (device permissions): sysfs shows the same ports to anyone. */
	if (!ctx) {
		gw_dbg("net", "%s: cannot open (%s): its ports from sysfs",
		       ibv_get_device_name(dev), strerror(errno));
		return net_sysfs_rdma_dev(rd->sysfs, m, ibv_get_device_name(dev));
	}
	if (ibv_query_device(ctx, &da))
		goto out;
	for (p = 1; p <= da.phys_port_cnt; p++) {
		struct ibv_port_attr pa;
		struct net_rdma_port *np;

		if (ibv_query_port(ctx, (uint8_t)p, &pa))
			continue;
		np = net_model_add_port(m, ibv_get_device_name(dev), p);
		if (!np) {
			r = -ENOMEM;
			goto out;
		}
		np->state = pa.state;
		np->ethernet = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
		net_read_line(np->rate, sizeof(np->rate), "%s/class/infiniband/%s/ports/%u/rate",
			      rd->sysfs, np->dev, p);
		net_sysfs_port_extra(rd->sysfs, np);
		total += (size_t)(pa.gid_tbl_len > 0 ? pa.gid_tbl_len : 0);
	}
	if (total)
		ents = calloc(total, sizeof(*ents));
	if (ents)
		n = ibv_query_gid_table(ctx, ents, total, 0);
	for (i = first; i < m->nports; i++) {
		struct net_rdma_port *np = &m->ports[i];
		ssize_t k;

		if (n < 0) {
			r = net_sysfs_gids(rd->sysfs, np);
			if (r)
				goto out;
		}
		for (k = 0; k < n; k++) {
			struct net_gid *g;

			if (ents[k].port_num != np->port)
				continue;
			g = net_port_add_gid(np);
			if (!g) {
				r = -ENOMEM;
				goto out;
			}
			g->index = ents[k].gid_index;
			memcpy(g->raw, ents[k].gid.raw, 16);
			g->type = live_gid_type(ents[k].gid_type);
			ifname_of(m, ents[k].ndev_ifindex, g->ndev);
		}
		/* A RoCE port's netdev is its default GID's. */
		for (k = 0; k < (ssize_t)np->ngids; k++)
			if (np->gids[k].index == 0 && *np->gids[k].ndev)
				snprintf(np->netdev, sizeof(np->netdev), "%s", np->gids[k].ndev);
	}
out:
	free(ents);
	ibv_close_device(ctx);
	return r;
}

static int live_rdma(struct net_reader *rd, struct net_model *m)
{
	struct ibv_device **devs;
	int n = 0, i, r = 0;

	/* No RDMA stack, no device: an empty list, not an error. */
	devs = ibv_get_device_list(&n);
	if (!devs)
		return 0;
	for (i = 0; i < n && !r; i++)
		r = live_device(rd, m, devs[i]);
	ibv_free_device_list(devs);
	return r;
}

static void live_destroy(struct net_reader *rd)
{
	struct live_reader *lr = gw_container_of(rd, struct live_reader, r);

	nl_socket_free(lr->sk);
	free(lr);
}

static const struct net_reader_ops live_ops = {
	.name = "netlink",
	.links = live_links,
	.rdma = live_rdma,
	.destroy = live_destroy,
};

int net_reader_live_create(struct net_reader **out)
{
	struct live_reader *lr = calloc(1, sizeof(*lr));
	int r;

	if (!lr)
		return -ENOMEM;
	lr->r.ops = &live_ops;
	snprintf(lr->r.sysfs, sizeof(lr->r.sysfs), "/sys");
	snprintf(lr->r.procfs, sizeof(lr->r.procfs), "/proc");
	lr->sk = nl_socket_alloc();
	if (!lr->sk) {
		free(lr);
		return -ENOMEM;
	}
	r = nl_connect(lr->sk, NETLINK_ROUTE);
	if (r < 0) {
		gw_warn("net", "rtnetlink: %s", nl_geterror(r));
		nl_socket_free(lr->sk);
		free(lr);
		return -EIO;
	}
	*out = &lr->r;
	return 0;
}
