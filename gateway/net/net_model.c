// SPDX-License-Identifier: MIT
/*
 * The network model as plain data (net.h): growing arrays of fixed-size records, look-ups by
 * name, the chain of each portal, the failover history carried from one read to the next, and
 * the JSON the control socket shows.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if_arp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_log.h"
#include "net.h"

/* Appends one zeroed element to *v (of *n, element size sz). */
static void *grow(void *vp, size_t *n, size_t sz)
{
	void **v = vp;
	char *nv = realloc(*v, (*n + 1) * sz);

	if (!nv)
		return NULL;
	*v = nv;
	memset(nv + *n * sz, 0, sz);
	return nv + (*n)++ * sz;
}

static void copy(char *dst, size_t len, const char *src)
{
	snprintf(dst, len, "%s", src ? src : "");
}

void net_model_init(struct net_model *m)
{
	memset(m, 0, sizeof(*m));
	m->all_rp_filter = m->all_arp_ignore = m->all_arp_announce = -1;
}

static void free_verdicts(struct net_model *m)
{
	size_t i;

	for (i = 0; i < m->nverdicts; i++) {
		free(m->verdicts[i].message);
		free(m->verdicts[i].fix);
	}
	free(m->verdicts);
	m->verdicts = NULL;
	m->nverdicts = 0;
}

void net_model_fini(struct net_model *m)
{
	size_t i;

	for (i = 0; i < m->nbonds; i++)
		free(m->bonds[i].slaves);
	for (i = 0; i < m->nports; i++)
		free(m->ports[i].gids);
	free(m->links);
	free(m->addrs);
	free(m->bonds);
	free(m->ports);
	free(m->chains);
	free_verdicts(m);
	net_model_init(m);
}

struct net_link *net_model_add_link(struct net_model *m, const char *name)
{
	struct net_link *l = grow(&m->links, &m->nlinks, sizeof(*l));

	if (!l)
		return NULL;
	copy(l->name, sizeof(l->name), name);
	l->ifindex = -1;
	l->speed = -1;
	l->link_failures = -1;
	l->rp_filter = l->arp_ignore = l->arp_announce = -1;
	return l;
}

struct net_addr *net_model_add_addr(struct net_model *m)
{
	return grow(&m->addrs, &m->naddrs, sizeof(struct net_addr));
}

struct net_bond *net_model_add_bond(struct net_model *m, const char *name)
{
	struct net_bond *b = grow(&m->bonds, &m->nbonds, sizeof(*b));

	if (!b)
		return NULL;
	copy(b->name, sizeof(b->name), name);
	b->mode = NET_BOND_UNKNOWN;
	b->num_grat_arp = b->num_unsol_na = -1;
	return b;
}

int net_bond_add_slave(struct net_bond *b, const char *name)
{
	char *s = grow(&b->slaves, &b->nslaves, NET_IFNAME);

	if (!s)
		return -ENOMEM;
	copy(s, NET_IFNAME, name);
	return 0;
}

struct net_rdma_port *net_model_add_port(struct net_model *m, const char *dev, unsigned int port)
{
	struct net_rdma_port *p = grow(&m->ports, &m->nports, sizeof(*p));

	if (!p)
		return NULL;
	copy(p->dev, sizeof(p->dev), dev);
	p->port = port;
	return p;
}

struct net_gid *net_port_add_gid(struct net_rdma_port *p)
{
	return grow(&p->gids, &p->ngids, sizeof(struct net_gid));
}

struct net_link *net_model_link(const struct net_model *m, const char *name)
{
	size_t i;

	if (!name || !*name)
		return NULL;
	for (i = 0; i < m->nlinks; i++)
		if (!strcmp(m->links[i].name, name))
			return &m->links[i];
	return NULL;
}

struct net_bond *net_model_bond(const struct net_model *m, const char *name)
{
	size_t i;

	if (!name || !*name)
		return NULL;
	for (i = 0; i < m->nbonds; i++)
		if (!strcmp(m->bonds[i].name, name))
			return &m->bonds[i];
	return NULL;
}

struct net_rdma_port *net_model_port_on(const struct net_model *m, const char *name, size_t *i)
{
	if (!name || !*name)
		return NULL;
	for (; *i < m->nports; (*i)++)
		if (!strcmp(m->ports[*i].netdev, name))
			return &m->ports[(*i)++];
	return NULL;
}

void net_gid_str(const uint8_t raw[16], char *buf)
{
	if (!inet_ntop(AF_INET6, raw, buf, NET_GIDSTR))
		buf[0] = 0;
}

const char *net_severity_name(int sev)
{
	static const char *const n[] = { "info", "warning", "error" };

	return sev >= 0 && sev <= NET_SEV_ERROR ? n[sev] : "?";
}

const char *net_ll_name(enum net_link_layer ll)
{
	static const char *const n[] = { "unknown", "ethernet", "roce", "infiniband" };

	return ll <= NET_LL_INFINIBAND ? n[ll] : "unknown";
}

/* ---- resolving ----------------------------------------------------------------------------- */

static void resolve_link_layers(struct net_model *m)
{
	size_t i, j;

	for (i = 0; i < m->nlinks; i++) {
		struct net_link *l = &m->links[i];

		j = 0;
		if (l->arptype == ARPHRD_INFINIBAND)
			l->ll = NET_LL_INFINIBAND;
		else if (l->arptype == ARPHRD_ETHER)
			l->ll = net_model_port_on(m, l->name, &j) ? NET_LL_ROCE : NET_LL_ETHERNET;
		else
			l->ll = NET_LL_UNKNOWN;
	}
}

/* An address in the text form the configuration uses, "[v6]" brackets allowed. */
static int parse_addr(const char *text, int *family, uint8_t out[16])
{
	char buf[64];
	size_t n;

	copy(buf, sizeof(buf), text);
	n = strlen(buf);
	if (n > 2 && buf[0] == '[' && buf[n - 1] == ']') {
		memmove(buf, buf + 1, n - 2);
		buf[n - 2] = 0;
	}
	memset(out, 0, 16);
	if (inet_pton(AF_INET, buf, out) == 1) {
		*family = AF_INET;
		return 0;
	}
	if (inet_pton(AF_INET6, buf, out) == 1) {
		*family = AF_INET6;
		return 0;
	}
	return -EINVAL;
}

/* The GID of port p that stands for the address (RoCE: the IPv4-mapped or IPv6 address itself,
 * preferring v2), or for IB the port GID (index 0). -1 when none. */
static int chain_gid(const struct net_rdma_port *p, int family, const uint8_t a[16])
{
	uint8_t want[16] = { 0 };
	int best = -1;
	size_t i;

	if (!p->ethernet)
		return p->ngids ? 0 : -1;
	if (family == AF_INET) {
		want[10] = want[11] = 0xff;
		memcpy(want + 12, a, 4);
	} else {
		memcpy(want, a, 16);
	}
	for (i = 0; i < p->ngids; i++) {
		if (memcmp(p->gids[i].raw, want, 16))
			continue;
		if (best < 0 || p->gids[i].type == NET_GID_ROCE_V2)
			best = (int)i;
	}
	return best;
}

static void resolve_chain(struct net_model *m, struct net_chain *c)
{
	uint8_t a[16];
	struct net_bond *b;
	size_t i, j;
	int fam;

	c->rdma = c->gid = -1;
	if (parse_addr(c->address, &fam, a))
		return;
	if ((fam == AF_INET && !memcmp(a, "\0\0\0\0", 4)) ||
	    (fam == AF_INET6 && !memcmp(a, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 16))) {
		c->wildcard = true;
		return;
	}
	for (i = 0; i < m->naddrs; i++)
		if (m->addrs[i].family == fam &&
		    !memcmp(m->addrs[i].addr, a, fam == AF_INET ? 4 : 16))
			break;
	if (i == m->naddrs)
		return;
	copy(c->netdev, sizeof(c->netdev), m->addrs[i].ifname);
	b = net_model_bond(m, c->netdev);
	if (b) {
		copy(c->bond, sizeof(c->bond), b->name);
		copy(c->slave, sizeof(c->slave), b->active);
	} else {
		copy(c->slave, sizeof(c->slave), c->netdev);
	}
	/* The RDMA port: on the netdev itself (a plain port, hardware LAG, rxe on the bond), else
	 * on the active slave (RoCE over an active-backup bond). */
	j = 0;
	if (!net_model_port_on(m, c->netdev, &j)) {
		j = 0;
		if (!net_model_port_on(m, c->slave, &j))
			return;
	}
	j--;
	c->rdma = (int)j;
	c->gid = chain_gid(&m->ports[j], fam, a);
}

void net_model_resolve(struct net_model *m, const struct net_portal *portals, size_t n)
{
	size_t i;

	resolve_link_layers(m);
	free(m->chains);
	m->chains = n ? calloc(n, sizeof(*m->chains)) : NULL;
	m->nchains = m->chains ? n : 0;
	for (i = 0; i < m->nchains; i++) {
		struct net_chain *c = &m->chains[i];

		copy(c->portal, sizeof(c->portal), portals[i].name);
		copy(c->address, sizeof(c->address), portals[i].address);
		c->iser = portals[i].iser;
		resolve_chain(m, c);
	}
}

/* ---- failovers ------------------------------------------------------------------------------ */

/* The MAC and GID a slave brings: its permanent MAC, and the first GID of its RDMA port that
 * belongs to the bond (RoCE puts the bond's addresses on the active slave's port), else the
 * port's GID 0. */
static void slave_ids(const struct net_model *m, const struct net_bond *b, const char *slave,
		      char *mac, char *gid)
{
	const struct net_link *l = net_model_link(m, slave);
	const struct net_rdma_port *p;
	size_t i = 0, k;

	mac[0] = gid[0] = 0;
	if (l)
		copy(mac, NET_HWADDR, *l->perm_hwaddr ? l->perm_hwaddr : l->hwaddr);
	p = net_model_port_on(m, slave, &i);
	if (!p || !p->ngids)
		return;
	for (k = 0; k < p->ngids; k++)
		if (!strcmp(p->gids[k].ndev, b->name)) {
			net_gid_str(p->gids[k].raw, gid);
			return;
		}
	net_gid_str(p->gids[0].raw, gid);
}

/* One sighting of b's active slave (in m, with the slaves' MACs and GIDs as ids shows them):
 * a change to another slave than the last one seen is a failover. */
static bool note_active(struct net_bond *b, const char *active, const struct net_model *ids_old,
			const struct net_bond *ob, const struct net_model *ids_new, uint64_t now_ms)
{
	struct net_failover *f = &b->last;

	if (!active || !*active)
		return false;
	if (!*b->last_active || !strcmp(b->last_active, active)) {
		copy(b->last_active, sizeof(b->last_active), active);
		return false;
	}
	b->failovers++;
	b->has_last = true;
	f->time_ms = now_ms;
	copy(f->old_slave, sizeof(f->old_slave), b->last_active);
	copy(f->new_slave, sizeof(f->new_slave), active);
	slave_ids(ids_old, ob, f->old_slave, f->old_mac, f->old_gid);
	slave_ids(ids_new, b, f->new_slave, f->new_mac, f->new_gid);
	copy(b->last_active, sizeof(b->last_active), active);
	return true;
}

void net_model_carry(struct net_model *m, const struct net_model *old, uint64_t now_ms,
		     void (*fn)(const struct net_bond *b, void *arg), void *arg)
{
	size_t i;

	for (i = 0; i < m->nbonds; i++) {
		struct net_bond *b = &m->bonds[i];
		const struct net_bond *o = old ? net_model_bond(old, b->name) : NULL;

		if (o) {
			b->failovers = o->failovers;
			b->has_last = o->has_last;
			b->last = o->last;
			copy(b->last_active, sizeof(b->last_active), o->last_active);
		}
		/* The old slave as the last read saw it, the new one as now. */
		if (note_active(b, b->active, o ? old : m, o ? o : b, m, now_ms) && fn)
			fn(b, arg);
	}
}

bool net_model_note_active(struct net_model *m, const char *bond, const char *active,
			   uint64_t now_ms)
{
	struct net_bond *b = net_model_bond(m, bond);

	return b && note_active(b, active, m, b, m, now_ms);
}

/* ---- JSON ---------------------------------------------------------------------------------- */

static json_t *str_or_null(const char *s)
{
	return s && *s ? json_string(s) : json_null();
}

static json_t *int_or_null(long long v)
{
	return v >= 0 ? json_integer(v) : json_null();
}

static const char *port_state_name(int s)
{
	static const char *const n[] = { "NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER" };

	return s >= 0 && s <= 5 ? n[s] : "?";
}

static const char *gid_type_name(int t)
{
	static const char *const n[] = { "IB", "RoCE v1", "RoCE v2" };

	return t >= 0 && t <= NET_GID_ROCE_V2 ? n[t] : "?";
}

static json_t *rdma_ref(const struct net_model *m, const char *netdev)
{
	json_t *a = json_array();
	struct net_rdma_port *p;
	size_t i = 0;

	while ((p = net_model_port_on(m, netdev, &i)))
		json_array_append_new(a, json_pack("{s:s, s:i}", "device", p->dev, "port",
						   (int)p->port));
	return a;
}

static json_t *bond_json(const struct net_model *m, const struct net_bond *b)
{
	json_t *o, *sl = json_array(), *tg = json_array(), *lf;
	char targets[sizeof(b->arp_ip_target)], *save = NULL, *t;
	const struct net_link *bl = net_model_link(m, b->name);
	size_t i;

	for (i = 0; i < b->nslaves; i++) {
		const struct net_link *l = net_model_link(m, b->slaves[i]);

		json_array_append_new(sl, json_pack(
			"{s:s, s:o, s:o, s:o, s:o, s:s, s:o, s:o, s:o}", "name", b->slaves[i],
			"state", str_or_null(l ? l->slave_state : NULL),
			"mii_status", str_or_null(l ? l->slave_mii : NULL),
			"link", l ? json_string(l->carrier ? "up" : "down") : json_null(),
			"speed", int_or_null(l ? l->speed : -1),
			"link_layer", net_ll_name(l ? l->ll : NET_LL_UNKNOWN),
			"perm_hwaddr", str_or_null(l ? l->perm_hwaddr : NULL),
			"link_failure_count", int_or_null(l ? l->link_failures : -1),
			"rdma", rdma_ref(m, b->slaves[i])));
	}
	copy(targets, sizeof(targets), b->arp_ip_target);
	for (t = strtok_r(targets, " ", &save); t; t = strtok_r(NULL, " ", &save))
		json_array_append_new(tg, json_string(t));
	o = json_pack("{s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
		      "name", b->name, "mode", str_or_null(b->mode_name),
		      "fail_over_mac", str_or_null(b->fail_over_mac),
		      "miimon", int_or_null(b->miimon),
		      "arp_interval", int_or_null(b->arp_interval),
		      "arp_ip_target", tg, "primary", str_or_null(b->primary),
		      "primary_reselect", str_or_null(b->primary_reselect),
		      "active_slave", str_or_null(b->active),
		      "num_grat_arp", int_or_null(b->num_grat_arp),
		      "num_unsol_na", int_or_null(b->num_unsol_na),
		      "mii_status", str_or_null(b->mii_status),
		      "address", str_or_null(bl ? bl->hwaddr : NULL),
		      "rdma", rdma_ref(m, b->name), "slaves", sl);
	lf = b->has_last ? json_pack("{s:I, s:s, s:s, s:o, s:o, s:o, s:o}",
				     "time_ms", (json_int_t)b->last.time_ms,
				     "old", b->last.old_slave, "new", b->last.new_slave,
				     "old_mac", str_or_null(b->last.old_mac),
				     "new_mac", str_or_null(b->last.new_mac),
				     "old_gid", str_or_null(b->last.old_gid),
				     "new_gid", str_or_null(b->last.new_gid)) : json_null();
	json_object_set_new(o, "failovers", json_integer((json_int_t)b->failovers));
	json_object_set_new(o, "last_failover", lf);
	return o;
}

static json_t *port_json(const struct net_rdma_port *p)
{
	json_t *g = json_array();
	char s[NET_GIDSTR];
	size_t i;

	for (i = 0; i < p->ngids; i++) {
		net_gid_str(p->gids[i].raw, s);
		json_array_append_new(g, json_pack("{s:i, s:s, s:s, s:o}", "index",
						   (int)p->gids[i].index, "gid", s, "type",
						   gid_type_name(p->gids[i].type), "netdev",
						   str_or_null(p->gids[i].ndev)));
	}
	return json_pack("{s:s, s:i, s:s, s:i, s:o, s:s, s:o, s:o, s:o, s:o, s:o}", "device",
			 p->dev, "port", (int)p->port, "state", port_state_name(p->state),
			 "state_num", p->state, "phys_state", str_or_null(p->phys_state),
			 "link_layer", p->ethernet ? "Ethernet" : "InfiniBand",
			 "netdev", str_or_null(p->netdev), "rate", str_or_null(p->rate),
			 "node_guid", str_or_null(p->node_guid),
			 "device_netdev", str_or_null(p->dev_netdev), "gids", g);
}

static json_t *chain_json(const struct net_model *m, const struct net_chain *c)
{
	const struct net_rdma_port *p = c->rdma >= 0 ? &m->ports[c->rdma] : NULL;
	const struct net_gid *g = p && c->gid >= 0 ? &p->gids[c->gid] : NULL;
	char gs[NET_GIDSTR] = "";

	if (g)
		net_gid_str(g->raw, gs);
	return json_pack("{s:s, s:s, s:s, s:b, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
			 "name", c->portal, "transport", c->iser ? "iser" : "tcp",
			 "address", c->address, "wildcard", c->wildcard,
			 "netdev", str_or_null(c->netdev), "bond", str_or_null(c->bond),
			 "slave", str_or_null(c->slave),
			 "rdma_device", p ? json_string(p->dev) : json_null(),
			 "rdma_port", p ? json_integer(p->port) : json_null(),
			 "gid", g ? json_string(gs) : json_null(),
			 "gid_index", g ? json_integer(g->index) : json_null(),
			 "gid_type", g ? json_string(gid_type_name(g->type)) : json_null());
}

json_t *net_model_json(const struct net_model *m)
{
	json_t *bonds = json_array(), *ports = json_array(), *chains = json_array();
	json_t *verdicts = json_array();
	size_t i;

	for (i = 0; i < m->nbonds; i++)
		json_array_append_new(bonds, bond_json(m, &m->bonds[i]));
	for (i = 0; i < m->nports; i++)
		json_array_append_new(ports, port_json(&m->ports[i]));
	for (i = 0; i < m->nchains; i++)
		json_array_append_new(chains, chain_json(m, &m->chains[i]));
	for (i = 0; i < m->nverdicts; i++) {
		const struct net_verdict *v = &m->verdicts[i];

		json_array_append_new(verdicts, json_pack(
			"{s:s, s:s, s:s, s:s, s:s}", "id", v->rule->id, "severity",
			net_severity_name(v->rule->severity), "object", v->object, "message",
			v->message, "fix", v->fix));
	}
	return json_pack("{s:o, s:o, s:o, s:o}", "bonds", bonds, "rdma_ports", ports, "portals",
			 chains, "verdicts", verdicts);
}
