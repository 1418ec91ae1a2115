// SPDX-License-Identifier: MIT
/*
 * Verdicts on the network model: one table, one row per rule, each with a stable id, a
 * severity, what it is about, a check over the model, and a message and fix an operator can
 * act on (templates filled from the object at hand). net_judge runs every row in order.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net.h"

/* What a template may name. */
struct vctx {
	const char *bond, *slave, *portal, *addr, *netdev, *rdma, *value;
};

static void expand(char *out, size_t len, const char *tpl, const struct vctx *c)
{
	static const struct { const char *key; size_t off; } keys[] = {
		{ "{bond}", offsetof(struct vctx, bond) },
		{ "{slave}", offsetof(struct vctx, slave) },
		{ "{portal}", offsetof(struct vctx, portal) },
		{ "{addr}", offsetof(struct vctx, addr) },
		{ "{netdev}", offsetof(struct vctx, netdev) },
		{ "{rdma}", offsetof(struct vctx, rdma) },
		{ "{value}", offsetof(struct vctx, value) },
	};
	size_t o = 0, k;

	while (*tpl && o + 1 < len) {
		for (k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
			size_t kl = strlen(keys[k].key);

			if (!strncmp(tpl, keys[k].key, kl)) {
				const char *v =
					*(const char *const *)((const char *)c + keys[k].off);
				int w = snprintf(out + o, len - o, "%s", v ? v : "?");

				o += w > 0 ? (size_t)w : 0;
				if (o >= len)
					o = len - 1;
				tpl += kl;
				break;
			}
		}
		if (k == sizeof(keys) / sizeof(keys[0]))
			out[o++] = *tpl++;
	}
	out[o] = 0;
}

/* Files one verdict (once per rule and object). */
static int verdict_add(const struct net_rule *r, struct net_model *m, const struct vctx *c)
{
	char obj[80], msg[1024], fix[1024];
	struct net_verdict *v;
	size_t i;

	if (!strcmp(r->object, "bond"))
		snprintf(obj, sizeof(obj), "bond/%s", c->bond);
	else if (!strcmp(r->object, "portal"))
		snprintf(obj, sizeof(obj), "portal/%s", c->portal);
	else
		snprintf(obj, sizeof(obj), "%s/%s", r->object, c->netdev);
	for (i = 0; i < m->nverdicts; i++)
		if (m->verdicts[i].rule == r && !strcmp(m->verdicts[i].object, obj))
			return 0;
	v = realloc(m->verdicts, (m->nverdicts + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	m->verdicts = v;
	v = &m->verdicts[m->nverdicts];
	expand(msg, sizeof(msg), r->message, c);
	expand(fix, sizeof(fix), r->fix, c);
	v->rule = r;
	snprintf(v->object, sizeof(v->object), "%s", obj);
	v->message = strdup(msg);
	v->fix = strdup(fix);
	if (!v->message || !v->fix) {
		free(v->message);
		free(v->fix);
		return -ENOMEM;
	}
	m->nverdicts++;
	return 0;
}

/* ---- what the checks ask of the model -------------------------------------------------------- */

static const struct net_rdma_port *port_on(const struct net_model *m, const char *netdev)
{
	size_t i = 0;

	return net_model_port_on(m, netdev, &i);
}

/* A slave that carries RDMA (an RDMA port on it, or IPoIB), or NULL. */
static const char *rdma_slave(const struct net_model *m, const struct net_bond *b)
{
	size_t i;

	for (i = 0; i < b->nslaves; i++) {
		const struct net_link *l = net_model_link(m, b->slaves[i]);

		if (port_on(m, b->slaves[i]) || (l && l->ll == NET_LL_INFINIBAND))
			return b->slaves[i];
	}
	return NULL;
}

static bool ipoib_bond(const struct net_model *m, const struct net_bond *b)
{
	size_t i;

	for (i = 0; i < b->nslaves; i++) {
		const struct net_link *l = net_model_link(m, b->slaves[i]);

		if (l && l->ll == NET_LL_INFINIBAND)
			return true;
	}
	return false;
}

static const struct net_chain *iser_chain_on(const struct net_model *m, const char *bond)
{
	size_t i;

	for (i = 0; i < m->nchains; i++)
		if (m->chains[i].iser && !strcmp(m->chains[i].bond, bond))
			return &m->chains[i];
	return NULL;
}

static struct vctx bond_ctx(const struct net_bond *b)
{
	return (struct vctx){ .bond = b->name, .netdev = b->name };
}

/* ---- the checks ------------------------------------------------------------------------------ */

static void check_fom_portal(const struct net_rule *r, struct net_model *m)
{
	size_t i;

	for (i = 0; i < m->nbonds; i++) {
		const struct net_bond *b = &m->bonds[i];
		const struct net_chain *c = iser_chain_on(m, b->name);
		struct vctx x = bond_ctx(b);

		if (!c || b->mode != NET_BOND_AB || port_on(m, b->name) ||
		    !strcmp(b->fail_over_mac, "active") || !rdma_slave(m, b))
			continue;
		x.portal = c->portal;
		x.addr = c->address;
		x.value = *b->fail_over_mac ? b->fail_over_mac : "unknown";
		x.slave = rdma_slave(m, b);
		verdict_add(r, m, &x);
	}
}

static void check_fom_slaves(const struct net_rule *r, struct net_model *m)
{
	size_t i;

	for (i = 0; i < m->nbonds; i++) {
		const struct net_bond *b = &m->bonds[i];
		struct vctx x = bond_ctx(b);

		if (iser_chain_on(m, b->name) || b->mode != NET_BOND_AB || port_on(m, b->name) ||
		    !strcmp(b->fail_over_mac, "active") || !rdma_slave(m, b))
			continue;
		x.value = *b->fail_over_mac ? b->fail_over_mac : "unknown";
		x.slave = rdma_slave(m, b);
		verdict_add(r, m, &x);
	}
}

static void check_no_monitor(const struct net_rule *r, struct net_model *m)
{
	size_t i;

	for (i = 0; i < m->nbonds; i++) {
		const struct net_bond *b = &m->bonds[i];
		struct vctx x = bond_ctx(b);

		if (b->miimon == 0 && b->arp_interval <= 0)
			verdict_add(r, m, &x);
	}
}

static void check_grat_arp(const struct net_rule *r, struct net_model *m)
{
	size_t i;

	for (i = 0; i < m->nbonds; i++) {
		const struct net_bond *b = &m->bonds[i];
		struct vctx x = bond_ctx(b);

		/* IPoIB has no gratuitous ARP to send that would help; RoCE and plain Ethernet
		 * peers learn the new slave's port and MAC from it. */
		if (b->mode == NET_BOND_AB && b->num_grat_arp == 0 && !ipoib_bond(m, b))
			verdict_add(r, m, &x);
	}
}

static void check_mode_roce(const struct net_rule *r, struct net_model *m)
{
	size_t i;

	for (i = 0; i < m->nbonds; i++) {
		const struct net_bond *b = &m->bonds[i];
		struct vctx x = bond_ctx(b);

		if (b->mode == NET_BOND_AB || b->mode == NET_BOND_UNKNOWN || port_on(m, b->name) ||
		    !rdma_slave(m, b))
			continue;
		x.value = b->mode_name;
		x.slave = rdma_slave(m, b);
		verdict_add(r, m, &x);
	}
}

static void check_lag(const struct net_rule *r, struct net_model *m)
{
	size_t i;

	for (i = 0; i < m->nbonds; i++) {
		const struct net_bond *b = &m->bonds[i];
		const struct net_rdma_port *p = port_on(m, b->name);
		struct vctx x = bond_ctx(b);

		if (!p)
			continue;
		x.rdma = p->dev;
		verdict_add(r, m, &x);
	}
}

static void check_no_active(const struct net_rule *r, struct net_model *m)
{
	size_t i;

	for (i = 0; i < m->nbonds; i++) {
		const struct net_bond *b = &m->bonds[i];
		struct vctx x = bond_ctx(b);

		if (b->mode == NET_BOND_AB && b->nslaves && !*b->active)
			verdict_add(r, m, &x);
	}
}

static void check_slave_down(const struct net_rule *r, struct net_model *m)
{
	size_t i, j;

	for (i = 0; i < m->nbonds; i++) {
		const struct net_bond *b = &m->bonds[i];
		char down[128] = "";

		for (j = 0; j < b->nslaves; j++) {
			const struct net_link *l = net_model_link(m, b->slaves[j]);

			if (!l || !strcmp(l->slave_mii, "down") || (!*l->slave_mii && !l->carrier))
				snprintf(down + strlen(down), sizeof(down) - strlen(down), "%s%s",
					 *down ? ", " : "", b->slaves[j]);
		}
		if (*down) {
			struct vctx x = bond_ctx(b);

			x.slave = down;
			verdict_add(r, m, &x);
		}
	}
}

static void check_mixed_ll(const struct net_rule *r, struct net_model *m)
{
	size_t i, j;

	for (i = 0; i < m->nbonds; i++) {
		const struct net_bond *b = &m->bonds[i];
		enum net_link_layer seen = NET_LL_UNKNOWN;
		char what[160] = "";
		bool mixed = false;

		for (j = 0; j < b->nslaves; j++) {
			const struct net_link *l = net_model_link(m, b->slaves[j]);

			if (!l || l->ll == NET_LL_UNKNOWN)
				continue;
			snprintf(what + strlen(what), sizeof(what) - strlen(what), "%s%s %s",
				 *what ? ", " : "", l->name, net_ll_name(l->ll));
			if (seen != NET_LL_UNKNOWN && seen != l->ll)
				mixed = true;
			seen = l->ll;
		}
		if (mixed) {
			struct vctx x = bond_ctx(b);

			x.value = what;
			verdict_add(r, m, &x);
		}
	}
}

static void check_mixed_speed(const struct net_rule *r, struct net_model *m)
{
	size_t i, j;

	for (i = 0; i < m->nbonds; i++) {
		const struct net_bond *b = &m->bonds[i];
		char what[160] = "";
		int speed = -1;
		bool mixed = false;

		for (j = 0; j < b->nslaves; j++) {
			const struct net_link *l = net_model_link(m, b->slaves[j]);

			if (!l || l->speed <= 0)
				continue;
			snprintf(what + strlen(what), sizeof(what) - strlen(what), "%s%s %d Mb/s",
				 *what ? ", " : "", l->name, l->speed);
			if (speed > 0 && speed != l->speed)
				mixed = true;
			speed = l->speed;
		}
		if (mixed) {
			struct vctx x = bond_ctx(b);

			x.value = what;
			verdict_add(r, m, &x);
		}
	}
}

static struct vctx chain_ctx(const struct net_chain *c)
{
	return (struct vctx){ .portal = c->portal, .addr = c->address, .netdev = c->netdev,
			      .bond = c->bond, .slave = c->slave };
}

static void check_no_address(const struct net_rule *r, struct net_model *m)
{
	size_t i;

	for (i = 0; i < m->nchains; i++) {
		const struct net_chain *c = &m->chains[i];
		struct vctx x = chain_ctx(c);

		if (!c->wildcard && !*c->netdev)
			verdict_add(r, m, &x);
	}
}

static void check_on_slave(const struct net_rule *r, struct net_model *m)
{
	size_t i;

	for (i = 0; i < m->nchains; i++) {
		const struct net_chain *c = &m->chains[i];
		const struct net_link *l = net_model_link(m, c->netdev);
		struct vctx x = chain_ctx(c);

		if (!l || !*l->master || !net_model_bond(m, l->master))
			continue;
		x.bond = l->master;
		verdict_add(r, m, &x);
	}
}

static void check_no_rdma(const struct net_rule *r, struct net_model *m)
{
	size_t i;

	for (i = 0; i < m->nchains; i++) {
		const struct net_chain *c = &m->chains[i];
		struct vctx x = chain_ctx(c);

		char via[64];

		if (!c->iser || !*c->netdev || c->rdma >= 0 || (*c->bond && !*c->slave))
			continue;
		if (*c->bond)
			snprintf(via, sizeof(via), "it nor on its active slave %s", c->slave);
		else
			snprintf(via, sizeof(via), "it");
		x.value = via;
		verdict_add(r, m, &x);
	}
}

static void check_port_down(const struct net_rule *r, struct net_model *m)
{
	size_t i;

	for (i = 0; i < m->nchains; i++) {
		const struct net_chain *c = &m->chains[i];
		const struct net_rdma_port *p = c->rdma >= 0 ? &m->ports[c->rdma] : NULL;
		char rd[80];
		struct vctx x = chain_ctx(c);

		if (!c->iser || !p || p->state == 4 /* IBV_PORT_ACTIVE */)
			continue;
		snprintf(rd, sizeof(rd), "%s port %u", p->dev, p->port);
		x.rdma = rd;
		verdict_add(r, m, &x);
	}
}

/* The kernel applies max(conf/all, conf/IF) for these three. */
static int eff(int all, int dev)
{
	return all > dev ? all : dev;
}

static bool same_subnet(const struct net_addr *a, const struct net_addr *b)
{
	unsigned int p = a->prefix < b->prefix ? a->prefix : b->prefix;
	uint32_t x, y, mask;

	if (a->family != AF_INET || b->family != AF_INET || p == 0 || p > 32)
		return false;
	memcpy(&x, a->addr, 4);
	memcpy(&y, b->addr, 4);
	mask = p == 32 ? 0xffffffffu : htonl(~(0xffffffffu >> p));
	return (x & mask) == (y & mask);
}

/* Netdevs holding a portal address that shares its IPv4 subnet with another portal address
 * on another netdev: there, replies and ARP answers may leave by the wrong port. */
static void check_sysctl(const struct net_rule *r, struct net_model *m, int which)
{
	size_t i, j, k, ai, aj;

	for (i = 0; i < m->nchains; i++)
		for (j = 0; j < m->nchains; j++) {
			const struct net_chain *a = &m->chains[i], *b = &m->chains[j];
			const struct net_link *l;
			char val[16];
			int v = -1;

			if (i == j || !*a->netdev || !*b->netdev || !strcmp(a->netdev, b->netdev))
				continue;
			for (ai = 0; ai < m->naddrs; ai++) {
				char t[64];

				inet_ntop(m->addrs[ai].family, m->addrs[ai].addr, t, sizeof(t));
				if (!strcmp(t, a->address))
					break;
			}
			for (aj = 0; aj < m->naddrs; aj++) {
				char t[64];

				inet_ntop(m->addrs[aj].family, m->addrs[aj].addr, t, sizeof(t));
				if (!strcmp(t, b->address))
					break;
			}
			if (ai == m->naddrs || aj == m->naddrs ||
			    !same_subnet(&m->addrs[ai], &m->addrs[aj]))
				continue;
			l = net_model_link(m, a->netdev);
			if (!l)
				continue;
			k = 0;
			switch (which) {
			case 0:
				v = eff(m->all_rp_filter, l->rp_filter);
				k = v == 1;
				break;
			case 1:
				v = eff(m->all_arp_ignore, l->arp_ignore);
				k = v == 0;
				break;
			default:
				v = eff(m->all_arp_announce, l->arp_announce);
				k = v >= 0 && v < 2;
				break;
			}
			if (k) {
				struct vctx x = chain_ctx(a);

				snprintf(val, sizeof(val), "%d", v);
				x.value = val;
				x.slave = b->netdev;
				verdict_add(r, m, &x);
			}
		}
}

static void check_rp_filter(const struct net_rule *r, struct net_model *m)
{
	check_sysctl(r, m, 0);
}

static void check_arp_ignore(const struct net_rule *r, struct net_model *m)
{
	check_sysctl(r, m, 1);
}

static void check_arp_announce(const struct net_rule *r, struct net_model *m)
{
	check_sysctl(r, m, 2);
}

#define FOM_FIX "set fail_over_mac=active on {bond}; the kernel takes it only while the bond " \
	"has no slaves: release them (ip link set SLAVE nomaster), then ip link set {bond} " \
	"type bond fail_over_mac active, and enslave them again (systemd-networkd: " \
	"FailOverMACPolicy=active in the .netdev)"

const struct net_rule net_rules[] = {
	{ "bond-fail-over-mac", NET_SEV_ERROR, "bond", check_fom_portal,
	  "iSER portal {portal} ({addr}) is on active-backup bond {bond} with fail_over_mac="
	  "{value}: after a failover the new slave's RDMA device does not own the bond's MAC "
	  "and iSER connections through it fail (RoCE slaves need fail_over_mac=active; the "
	  "kernel forces it for IPoIB slaves)", FOM_FIX },
	{ "bond-rdma-slaves-fail-over-mac", NET_SEV_WARNING, "bond", check_fom_slaves,
	  "bond {bond} has RDMA slaves ({slave}) and fail_over_mac={value}: an iSER portal on it "
	  "would break at its first failover", FOM_FIX },
	{ "bond-no-link-monitor", NET_SEV_ERROR, "bond", check_no_monitor,
	  "bond {bond} has miimon=0 and no ARP monitor: it never notices a dead link and never "
	  "fails over",
	  "set miimon=100 on {bond} (ip link set {bond} type bond miimon 100; "
	  "systemd-networkd: MIIMonitorSec=100ms)" },
	{ "bond-no-grat-arp", NET_SEV_WARNING, "bond", check_grat_arp,
	  "bond {bond} sends no gratuitous ARP after a failover (num_grat_arp=0): switches and "
	  "initiators keep sending to the old port until their caches expire",
	  "set num_grat_arp (and num_unsol_na) to 1 or more on {bond} (ip link set {bond} type "
	  "bond num_grat_arp 3 num_unsol_na 3; systemd-networkd: GratuitousARP=3)" },
	{ "bond-mode-roce", NET_SEV_ERROR, "bond", check_mode_roce,
	  "bond {bond} runs mode {value} over RoCE slaves ({slave}) without hardware RoCE LAG: "
	  "RDMA traffic stays on one port's device while the bond spreads or moves IP traffic, "
	  "so iSER connections break or stall",
	  "use mode active-backup with fail_over_mac=active on {bond}, or a NIC that offers RoCE "
	  "LAG (its RDMA device then sits on the bond)" },
	{ "bond-rdma-lag", NET_SEV_INFO, "bond", check_lag,
	  "RDMA device {rdma} sits on bond {bond} itself (RoCE LAG, or Soft-RoCE on the bond): "
	  "the device follows the bond's failovers whatever fail_over_mac says; each failover "
	  "still ends the iSER connections (the kernel re-adds the bond's GIDs), and the gateway "
	  "drops them at once so initiators reconnect in seconds",
	  "nothing to do" },
	{ "bond-no-active-slave", NET_SEV_ERROR, "bond", check_no_active,
	  "active-backup bond {bond} has no active slave: every slave is down and nothing on it "
	  "is reachable",
	  "bring a slave of {bond} up (cable, switch port, ip link set SLAVE up)" },
	{ "bond-slave-down", NET_SEV_WARNING, "bond", check_slave_down,
	  "bond {bond}: slave {slave} has no link, so the bond has no redundancy through it",
	  "check the cable and switch port of {slave}, and that it is up (ip link set SLAVE up)" },
	{ "bond-mixed-link-layers", NET_SEV_ERROR, "bond", check_mixed_ll,
	  "bond {bond} mixes slaves of different link layers ({value}): after a failover to the "
	  "other kind an iSER portal on it loses its RDMA path",
	  "give {bond} slaves of one kind only, each with its RDMA port" },
	{ "bond-mixed-speeds", NET_SEV_WARNING, "bond", check_mixed_speed,
	  "bond {bond} has slaves of different speeds ({value}): throughput changes at each "
	  "failover",
	  "use slaves of one speed in {bond}, or make the faster one primary "
	  "(ip link set {bond} type bond primary SLAVE)" },
	{ "portal-no-address", NET_SEV_WARNING, "portal", check_no_address,
	  "portal {portal}: address {addr} is on no netdev of this host, so nothing can listen "
	  "on it",
	  "configure {addr} on the bond or port meant to carry the portal, or correct the "
	  "portal's address" },
	{ "portal-on-slave", NET_SEV_ERROR, "portal", check_on_slave,
	  "portal {portal}: address {addr} is on {netdev}, a slave of bond {bond}: the bond "
	  "cannot carry it to another slave and it goes with {netdev}'s link",
	  "move {addr} from {netdev} to {bond} (ip addr del {addr}/PREFIX dev {netdev}; "
	  "ip addr add {addr}/PREFIX dev {bond})" },
	{ "portal-no-rdma", NET_SEV_ERROR, "portal", check_no_rdma,
	  "iSER portal {portal}: address {addr} is on {netdev}, and no RDMA port sits on "
	  "{value}: the portal cannot accept iSER connections",
	  "put {addr} on a netdev with an RDMA port (RoCE NIC, IPoIB, or Soft-RoCE: rdma link add "
	  "rxe0 type rxe netdev {netdev}), or make the portal tcp" },
	{ "portal-rdma-port-down", NET_SEV_ERROR, "portal", check_port_down,
	  "iSER portal {portal}: its RDMA port {rdma} (under {slave}) is not ACTIVE",
	  "check the link of {slave} and the RDMA port ({rdma}: rdma link show)" },
	{ "sysctl-rp-filter", NET_SEV_ERROR, "netdev", check_rp_filter,
	  "{netdev} (portal {portal}) shares a subnet with portal address on {slave} and has "
	  "strict reverse-path filtering (rp_filter={value}): packets to one of the two "
	  "addresses arrive on a port that is not the route back, and are dropped",
	  "sysctl -w net.ipv4.conf.{netdev}.rp_filter=2 (and net.ipv4.conf.all.rp_filter=2 if "
	  "that is 1), in /etc/sysctl.d/ to keep it" },
	{ "sysctl-arp-ignore", NET_SEV_WARNING, "netdev", check_arp_ignore,
	  "{netdev} (portal {portal}) shares a subnet with a portal address on {slave} and "
	  "answers ARP for any local address (arp_ignore={value}): initiators may reach either "
	  "portal through the other's port",
	  "sysctl -w net.ipv4.conf.{netdev}.arp_ignore=1, in /etc/sysctl.d/ to keep it" },
	{ "sysctl-arp-announce", NET_SEV_WARNING, "netdev", check_arp_announce,
	  "{netdev} (portal {portal}) shares a subnet with a portal address on {slave} and may "
	  "announce another port's address in its ARP requests (arp_announce={value})",
	  "sysctl -w net.ipv4.conf.{netdev}.arp_announce=2, in /etc/sysctl.d/ to keep it" },
};

const size_t net_nrules = sizeof(net_rules) / sizeof(net_rules[0]);

int net_judge(struct net_model *m)
{
	size_t i;

	for (i = 0; i < m->nverdicts; i++) {
		free(m->verdicts[i].message);
		free(m->verdicts[i].fix);
	}
	free(m->verdicts);
	m->verdicts = NULL;
	m->nverdicts = 0;
	for (i = 0; i < net_nrules; i++)
		net_rules[i].check(&net_rules[i], m);
	return 0;
}

const struct net_verdict *net_model_verdict(const struct net_model *m, const char *id,
					    const char *object)
{
	size_t i;

	for (i = 0; i < m->nverdicts; i++)
		if (!strcmp(m->verdicts[i].rule->id, id) &&
		    (!object || !strcmp(m->verdicts[i].object, object)))
			return &m->verdicts[i];
	return NULL;
}
