// SPDX-License-Identifier: MIT
/*
 * What sysfs and procfs tell (net_priv.h), and the sysfs reader: the whole model from a tree
 * laid out like /sys, which is how tests and $ISERGW_SYSFS fixtures describe a host. Each file
 * is one small read; a file that is missing (an older kernel, an interface going away while we
 * look) leaves its field unknown rather than failing the read.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gw_log.h"
#include "net_priv.h"

bool net_read_line(char *buf, size_t len, const char *fmt, ...)
{
	char path[PATH_MAX];
	va_list ap;
	ssize_t n;
	int fd, w;

	va_start(ap, fmt);
	w = vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	buf[0] = 0;
	if (w < 0 || (size_t)w >= sizeof(path))
		return false;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	do
		n = read(fd, buf, len - 1);
	while (n < 0 && errno == EINTR);
	close(fd);
	if (n < 0) {
		buf[0] = 0;
		return false;
	}
	buf[n] = 0;
	buf[strcspn(buf, "\n")] = 0;
	return true;
}

void net_copy(char *dst, size_t len, const char *src)
{
	size_t n = src ? strnlen(src, len - 1) : 0;

	memcpy(dst, src ? src : "", n);
	dst[n] = 0;
}

/* DIR/FILE as a number. */
static bool read_int(long long *out, const char *dir, const char *file)
{
	char v[64], *end;

	if (!net_read_line(v, sizeof(v), "%s/%s", dir, file))
		return false;
	errno = 0;
	*out = strtoll(v, &end, 0);
	return !errno && end != v;
}

static void read_str(char *dst, size_t len, const char *dir, const char *file)
{
	if (!net_read_line(dst, len, "%s/%s", dir, file))
		dst[0] = 0;
}

/* ROOT/class/net/NAME/FILE as a number. */
static bool read_net_int(long long *out, const char *root, const char *name, const char *file)
{
	char d[PATH_MAX];

	snprintf(d, sizeof(d), "%s/class/net/%s", root, name);
	return read_int(out, d, file);
}

static bool ifname_ok(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && n < NET_IFNAME && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..");
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Entry names of a folder, sorted (malloc'ed array of malloc'ed names). */
static char **list_dir(const char *path, size_t *n)
{
	DIR *d = opendir(path);
	struct dirent *e;
	char **v = NULL, **nv;
	size_t cap = 0;

	*n = 0;
	if (!d)
		return NULL;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 16;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv)
				break;
			v = nv;
		}
		v[*n] = strdup(e->d_name);
		if (v[*n])
			(*n)++;
	}
	closedir(d);
	if (*n)
		qsort(v, *n, sizeof(*v), cmp_name);
	return v;
}

static void free_list(char **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* "active-backup 1" -> "active-backup", and the number. */
static void first_word(char *s)
{
	s[strcspn(s, " ")] = 0;
}

static int sysctl(const char *procfs, const char *ifname, const char *key)
{
	char v[32], *end;
	long x;

	if (!net_read_line(v, sizeof(v), "%s/sys/net/ipv4/conf/%s/%s", procfs, ifname, key))
		return -1;
	x = strtol(v, &end, 10);
	return end == v || x < 0 ? -1 : (int)x;
}

static int read_bond(const char *root, struct net_model *m, const char *name)
{
	char b[PATH_MAX], v[512], *save = NULL, *s, *num;
	struct net_bond *bd;
	long long x;

	snprintf(b, sizeof(b), "%s/class/net/%s/bonding", root, name);
	if (!net_read_line(v, sizeof(v), "%s/mode", b))
		return 0;
	bd = net_model_add_bond(m, name);
	if (!bd)
		return -ENOMEM;
	num = strchr(v, ' ');
	bd->mode = num ? atoi(num + 1) : NET_BOND_UNKNOWN;
	first_word(v);
	net_copy(bd->mode_name, sizeof(bd->mode_name), v);
	read_str(bd->fail_over_mac, sizeof(bd->fail_over_mac), b, "fail_over_mac");
	first_word(bd->fail_over_mac);
	bd->miimon = read_int(&x, b, "miimon") ? (int)x : -1;
	bd->arp_interval = read_int(&x, b, "arp_interval") ? (int)x : -1;
	read_str(bd->arp_ip_target, sizeof(bd->arp_ip_target), b, "arp_ip_target");
	read_str(bd->primary, sizeof(bd->primary), b, "primary");
	read_str(bd->primary_reselect, sizeof(bd->primary_reselect), b,
		 "primary_reselect");
	first_word(bd->primary_reselect);
	read_str(bd->active, sizeof(bd->active), b, "active_slave");
	bd->num_grat_arp = read_int(&x, b, "num_grat_arp") ? (int)x : -1;
	bd->num_unsol_na = read_int(&x, b, "num_unsol_na") ? (int)x : -1;
	read_str(bd->mii_status, sizeof(bd->mii_status), b, "mii_status");
	if (net_read_line(v, sizeof(v), "%s/slaves", b))
		for (s = strtok_r(v, " ", &save); s; s = strtok_r(NULL, " ", &save))
			if (ifname_ok(s) && net_bond_add_slave(bd, s))
				return -ENOMEM;
	return 0;
}

static void read_slave(const char *root, struct net_link *l)
{
	char d[PATH_MAX], v[64];
	long long x;

	/* The slave's own bonding_slave/ folder; the bond's lower_SLAVE link has the same. */
	snprintf(d, sizeof(d), "%s/class/net/%s/bonding_slave", root, l->name);
	if (!net_read_line(v, sizeof(v), "%s/state", d)) {
		if (!*l->master)
			return;
		snprintf(d, sizeof(d), "%s/class/net/%s/lower_%s/bonding_slave", root, l->master,
			 l->name);
	}
	read_str(l->slave_state, sizeof(l->slave_state), d, "state");
	read_str(l->slave_mii, sizeof(l->slave_mii), d, "mii_status");
	read_str(l->perm_hwaddr, sizeof(l->perm_hwaddr), d, "perm_hwaddr");
	l->link_failures = read_int(&x, d, "link_failure_count") ? x : -1;
}

int net_sysfs_bonds(const char *root, const char *procfs, struct net_model *m)
{
	size_t i, j;
	long long x;
	int r;

	for (i = 0; i < m->nlinks; i++) {
		r = read_bond(root, m, m->links[i].name);
		if (r)
			return r;
	}
	/* A slave's master is its bond even where the reader did not say. */
	for (i = 0; i < m->nbonds; i++)
		for (j = 0; j < m->bonds[i].nslaves; j++) {
			struct net_link *l = net_model_link(m, m->bonds[i].slaves[j]);

			if (l && !*l->master)
				net_copy(l->master, sizeof(l->master), m->bonds[i].name);
		}
	for (i = 0; i < m->nlinks; i++) {
		struct net_link *l = &m->links[i];

		read_slave(root, l);
		/* Reading speed of a link that is down fails (EINVAL): unknown then. */
		l->speed = read_net_int(&x, root, l->name, "speed") && x > 0 ?
			   (int)x : -1;
		l->rp_filter = sysctl(procfs, l->name, "rp_filter");
		l->arp_ignore = sysctl(procfs, l->name, "arp_ignore");
		l->arp_announce = sysctl(procfs, l->name, "arp_announce");
	}
	m->all_rp_filter = sysctl(procfs, "all", "rp_filter");
	m->all_arp_ignore = sysctl(procfs, "all", "arp_ignore");
	m->all_arp_announce = sysctl(procfs, "all", "arp_announce");
	return 0;
}

int net_sysfs_gids(const char *root, struct net_rdma_port *p)
{
	char d[PATH_MAX], g_dir[PATH_MAX + 8], v[128];
	char **names;
	size_t n, i;
	int r = 0;

	snprintf(d, sizeof(d), "%s/class/infiniband/%s/ports/%u", root, p->dev, p->port);
	snprintf(g_dir, sizeof(g_dir), "%s/gids", d);
	names = list_dir(g_dir, &n);
	for (i = 0; i < n; i++) {
		struct in6_addr a;
		struct net_gid *g;

		/* "fe80:0000:...": 8 groups of 4 hex digits, which inet_pton reads as is; the
		 * kernel shows unused entries as all zeros. */
		if (!net_read_line(v, sizeof(v), "%s/gids/%s", d, names[i]) ||
		    inet_pton(AF_INET6, v, &a) != 1 ||
		    !memcmp(&a, &in6addr_any, sizeof(a)))
			continue;
		g = net_port_add_gid(p);
		if (!g) {
			r = -ENOMEM;
			break;
		}
		g->index = (unsigned int)atoi(names[i]);
		memcpy(g->raw, &a, 16);
		net_read_line(v, sizeof(v), "%s/gid_attrs/types/%s", d, names[i]);
		g->type = !strcasecmp(v, "RoCE v2") ? NET_GID_ROCE_V2 :
			  p->ethernet ? NET_GID_ROCE_V1 : NET_GID_IB;
		net_read_line(v, sizeof(v), "%s/gid_attrs/ndevs/%s", d, names[i]);
		if (ifname_ok(v))
			net_copy(g->ndev, sizeof(g->ndev), v);
	}
	free_list(names, n);
	return r;
}

void net_sysfs_port_netdevs(const char *root, struct net_model *m)
{
	char v[128], path[PATH_MAX];
	char **names;
	size_t i, j, n;

	for (i = 0; i < m->nports; i++) {
		struct net_rdma_port *p = &m->ports[i];

		if (*p->netdev)
			continue;
		/* Soft-RoCE and siw name their parent netdev. */
		if (net_read_line(v, sizeof(v), "%s/class/infiniband/%s/parent", root, p->dev) &&
		    ifname_ok(v)) {
			net_copy(p->netdev, sizeof(p->netdev), v);
			continue;
		}
		if (p->ethernet) {
			/* A single-port PCI device has its one netdev under device/net/. */
			snprintf(path, sizeof(path), "%s/class/infiniband/%s/device/net", root,
				 p->dev);
			names = list_dir(path, &n);
			if (n == 1 && ifname_ok(names[0]))
				net_copy(p->netdev, sizeof(p->netdev), names[0]);
			free_list(names, n);
			continue;
		}
		/* IPoIB: the link whose device/infiniband/ holds this device, on dev_port + 1. */
		for (j = 0; j < m->nlinks; j++) {
			const struct net_link *l = &m->links[j];
			long long dp;

			if (l->arptype != ARPHRD_INFINIBAND)
				continue;
			snprintf(path, sizeof(path), "%s/class/net/%s/device/infiniband/%s", root,
				 l->name, p->dev);
			if (access(path, F_OK))
				continue;
			if (!read_net_int(&dp, root, l->name, "dev_port"))
				dp = 0;
			if ((unsigned long long)dp + 1 == p->port) {
				net_copy(p->netdev, sizeof(p->netdev), l->name);
				break;
			}
		}
	}
}

/* ---- the sysfs reader ------------------------------------------------------------------------ */

static int sysfs_links(struct net_reader *r, struct net_model *m)
{
	char path[PATH_MAX], v[256], *slash;
	char **names;
	size_t n, i;
	FILE *f;
	int rc = 0;

	snprintf(path, sizeof(path), "%s/class/net", r->sysfs);
	names = list_dir(path, &n);
	for (i = 0; i < n; i++) {
		struct net_link *l;
		long long x;
		ssize_t k;

		if (!ifname_ok(names[i]))
			continue;
		l = net_model_add_link(m, names[i]);
		if (!l) {
			rc = -ENOMEM;
			break;
		}
		l->ifindex = read_net_int(&x, r->sysfs, names[i], "ifindex") ?
			     (int)x : -1;
		l->arptype = read_net_int(&x, r->sysfs, names[i], "type") ?
			     (unsigned int)x : 1 /* ARPHRD_ETHER */;
		net_read_line(l->hwaddr, sizeof(l->hwaddr), "%s/class/net/%s/address", r->sysfs,
			      names[i]);
		l->up = !read_net_int(&x, r->sysfs, names[i], "flags") || (x & IFF_UP);
		if (net_read_line(v, sizeof(v), "%s/class/net/%s/operstate", r->sysfs, names[i]))
			l->carrier = !strcmp(v, "up") || (!strcmp(v, "unknown") && l->up);
		else
			l->carrier = l->up;
		snprintf(path, sizeof(path), "%s/class/net/%s/bonding", r->sysfs, names[i]);
		if (!access(path, F_OK))
			snprintf(l->kind, sizeof(l->kind), "bond");
		snprintf(path, sizeof(path), "%s/class/net/%s/master", r->sysfs, names[i]);
		k = readlink(path, v, sizeof(v) - 1);
		if (k > 0) {
			v[k] = 0;
			slash = strrchr(v, '/');
			net_copy(l->master, sizeof(l->master), slash ? slash + 1 : v);
		}
	}
	free_list(names, n);
	if (rc)
		return rc;
	snprintf(path, sizeof(path), "%s/isergw-addrs", r->sysfs);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(v, sizeof(v), f)) {
		char ifn[NET_IFNAME], addr[128];
		struct net_addr *a;
		unsigned int prefix = 0;

		if (sscanf(v, "%15s %127s", ifn, addr) != 2 || ifn[0] == '#')
			continue;
		slash = strchr(addr, '/');
		if (slash) {
			*slash = 0;
			prefix = (unsigned int)atoi(slash + 1);
		}
		a = net_model_add_addr(m);
		if (!a) {
			rc = -ENOMEM;
			break;
		}
		net_copy(a->ifname, sizeof(a->ifname), ifn);
		if (inet_pton(AF_INET, addr, a->addr) == 1) {
			a->family = AF_INET;
			a->prefix = slash ? prefix : 32;
		} else if (inet_pton(AF_INET6, addr, a->addr) == 1) {
			a->family = AF_INET6;
			a->prefix = slash ? prefix : 128;
		} else {
			gw_warn("net", "%s: not an address: %s", path, addr);
			m->naddrs--;
		}
	}
	fclose(f);
	return rc;
}

void net_sysfs_port_extra(const char *root, struct net_rdma_port *p)
{
	char path[PATH_MAX], v[128], *c;
	char **names;
	size_t n;

	if (net_read_line(v, sizeof(v), "%s/class/infiniband/%s/ports/%u/phys_state", root,
			  p->dev, p->port)) {
		c = strchr(v, ':');
		net_copy(p->phys_state, sizeof(p->phys_state), c ? c + 1 + strspn(c + 1, " ") : v);
	}
	if (net_read_line(v, sizeof(v), "%s/class/infiniband/%s/node_guid", root, p->dev))
		net_copy(p->node_guid, sizeof(p->node_guid), v);
	if (net_read_line(v, sizeof(v), "%s/class/infiniband/%s/parent", root, p->dev) &&
	    ifname_ok(v)) {
		net_copy(p->dev_netdev, sizeof(p->dev_netdev), v);
		return;
	}
	snprintf(path, sizeof(path), "%s/class/infiniband/%s/device/net", root, p->dev);
	names = list_dir(path, &n);
	if (n && ifname_ok(names[0]))
		net_copy(p->dev_netdev, sizeof(p->dev_netdev), names[0]);
	free_list(names, n);
}

/* Ports: state "4: ACTIVE" -> 4, link layer, rate, GIDs, netdev (GID 0's). */
int net_sysfs_rdma_dev(const char *root, struct net_model *m, const char *dev)
{
	char path[PATH_MAX], v[128];
	char **ports;
	size_t np, j;
	int rc = 0;

	snprintf(path, sizeof(path), "%s/class/infiniband/%s/ports", root, dev);
	ports = list_dir(path, &np);
	for (j = 0; j < np && !rc; j++) {
		struct net_rdma_port *p = net_model_add_port(m, dev, (unsigned int)atoi(ports[j]));

		if (!p) {
			rc = -ENOMEM;
			break;
		}
		snprintf(path, sizeof(path), "%s/class/infiniband/%s/ports/%s", root, dev,
			 ports[j]);
		if (net_read_line(v, sizeof(v), "%s/state", path))
			p->state = atoi(v);
		net_read_line(v, sizeof(v), "%s/link_layer", path);
		p->ethernet = !strcasecmp(v, "Ethernet");
		read_str(p->rate, sizeof(p->rate), path, "rate");
		net_sysfs_port_extra(root, p);
		if (net_read_line(v, sizeof(v), "%s/gid_attrs/ndevs/0", path) && ifname_ok(v))
			net_copy(p->netdev, sizeof(p->netdev), v);
		rc = net_sysfs_gids(root, p);
	}
	free_list(ports, np);
	return rc;
}

static int sysfs_rdma(struct net_reader *r, struct net_model *m)
{
	char path[PATH_MAX];
	char **devs;
	size_t nd, i;
	int rc = 0;

	snprintf(path, sizeof(path), "%s/class/infiniband", r->sysfs);
	devs = list_dir(path, &nd);
	for (i = 0; i < nd && !rc; i++)
		rc = net_sysfs_rdma_dev(r->sysfs, m, devs[i]);
	free_list(devs, nd);
	return rc;
}

static void sysfs_destroy(struct net_reader *r)
{
	free(r);
}

static const struct net_reader_ops sysfs_ops = {
	.name = "sysfs",
	.links = sysfs_links,
	.rdma = sysfs_rdma,
	.destroy = sysfs_destroy,
};

int net_reader_sysfs_create(const char *root, struct net_reader **out)
{
	struct net_reader *r = calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	r->ops = &sysfs_ops;
	net_copy(r->sysfs, sizeof(r->sysfs), root);
	snprintf(r->procfs, sizeof(r->procfs), "%s/proc", root);
	*out = r;
	return 0;
}

void net_reader_destroy(struct net_reader *r)
{
	if (r)
		r->ops->destroy(r);
}

int net_model_read(struct net_model *m, struct net_reader *r)
{
	int rc;

	rc = r->ops->links(r, m);
	if (!rc)
		rc = net_sysfs_bonds(r->sysfs, r->procfs, m);
	if (!rc)
		rc = r->ops->rdma(r, m);
	if (!rc)
		net_sysfs_port_netdevs(r->sysfs, m);
	return rc;
}
