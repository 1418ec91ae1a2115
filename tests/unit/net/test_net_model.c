// SPDX-License-Identifier: MIT
/* The model: what the sysfs reader builds from a host's files, each portal's chain, the
 * failover history across reads, and the JSON the control socket shows. */
#include <criterion/criterion.h>
#include <string.h>

#include "net_fx.h"

static struct fx f;
static struct net_model m, m2;

static void setup(void)
{
	fx_init(&f);
	net_model_init(&m2);
}

static void teardown(void)
{
	net_model_fini(&m);
	net_model_fini(&m2);
	fx_fini(&f);
}

TestSuite(net_model, .init = setup, .fini = teardown);

Test(net_model, bond_attributes_from_sysfs)
{
	const struct net_bond *b;
	const struct net_link *l;

	fx_roce_bond(&f, "active 1");
	fx_bond_attr(&f, "bond0", "arp_ip_target", "192.168.10.1 192.168.10.2");
	fx_bond_attr(&f, "bond0", "primary", "ens1f0");
	fx_read(&f, &m, &fx_iser0, 1);
	cr_assert_eq(m.nbonds, 1);
	b = &m.bonds[0];
	cr_assert_str_eq(b->name, "bond0");
	cr_assert_eq(b->mode, NET_BOND_AB);
	cr_assert_str_eq(b->mode_name, "active-backup");
	cr_assert_str_eq(b->fail_over_mac, "active");
	cr_assert_eq(b->miimon, 100);
	cr_assert_str_eq(b->primary, "ens1f0");
	cr_assert_str_eq(b->primary_reselect, "always");
	cr_assert_str_eq(b->active, "ens1f0");
	cr_assert_eq(b->num_grat_arp, 1);
	cr_assert_eq(b->nslaves, 2);
	cr_assert_str_eq(b->slaves[1], "ens1f1");
	l = net_model_link(&m, "ens1f1");
	cr_assert_str_eq(l->master, "bond0");
	cr_assert_str_eq(l->slave_state, "backup");
	cr_assert_str_eq(l->perm_hwaddr, "02:00:00:00:00:02");
	cr_assert_eq(l->speed, 100000);
	cr_assert_eq(l->ll, NET_LL_ROCE);
}

Test(net_model, roce_chain_goes_through_the_active_slave_to_the_v2_gid)
{
	const struct net_chain *c;
	const struct net_rdma_port *p;
	char g[NET_GIDSTR];

	fx_roce_bond(&f, "active 1");
	fx_read(&f, &m, &fx_iser0, 1);
	cr_assert_eq(m.nports, 2);
	/* The all-zero GID 3 is an unused entry. */
	cr_assert_eq(m.ports[0].ngids, 3);
	c = &m.chains[0];
	cr_assert_str_eq(c->netdev, "bond0");
	cr_assert_str_eq(c->bond, "bond0");
	cr_assert_str_eq(c->slave, "ens1f0");
	p = &m.ports[c->rdma];
	cr_assert_str_eq(p->dev, "mlx5_0");
	cr_assert_str_eq(p->netdev, "ens1f0");
	cr_assert_eq(p->gids[c->gid].index, 2);
	cr_assert_eq(p->gids[c->gid].type, NET_GID_ROCE_V2);
	net_gid_str(p->gids[c->gid].raw, g);
	cr_assert_str_eq(g, "::ffff:192.168.10.5");
}

Test(net_model, chain_follows_a_failover)
{
	fx_roce_bond(&f, "active 1");
	fx_bond_attr(&f, "bond0", "active_slave", "ens1f1");
	fx_read(&f, &m, &fx_iser0, 1);
	cr_assert_str_eq(m.chains[0].slave, "ens1f1");
	cr_assert_str_eq(m.ports[m.chains[0].rdma].dev, "mlx5_1");
	/* The kernel has not moved the bond's GID yet: no GID for the address. */
	cr_assert_eq(m.chains[0].gid, -1);
}

static int calls;

static void count(const struct net_bond *b, void *arg)
{
	(void)b;
	(void)arg;
	calls++;
}

Test(net_model, failover_is_counted_with_old_and_new)
{
	const struct net_bond *b;

	fx_roce_bond(&f, "active 1");
	fx_read(&f, &m, &fx_iser0, 1);
	net_model_carry(&m, NULL, 1000, count, NULL);
	cr_assert_eq(calls, 0);
	cr_assert_eq(m.bonds[0].failovers, 0);
	/* bd0: ens1f0 -> ens1f1. */
	fx_bond_attr(&f, "bond0", "active_slave", "ens1f1");
	fx_read(&f, &m2, &fx_iser0, 1);
	net_model_carry(&m2, &m, 2000, count, NULL);
	b = &m2.bonds[0];
	cr_assert_eq(calls, 1);
	cr_assert_eq(b->failovers, 1);
	cr_assert(b->has_last);
	cr_assert_eq(b->last.time_ms, 2000);
	cr_assert_str_eq(b->last.old_slave, "ens1f0");
	cr_assert_str_eq(b->last.new_slave, "ens1f1");
	cr_assert_str_eq(b->last.old_mac, "02:00:00:00:00:01");
	cr_assert_str_eq(b->last.new_mac, "02:00:00:00:00:02");
	/* The old slave's port held the bond's GID; the new one shows its own GID 0 so far. */
	cr_assert_str_eq(b->last.old_gid, "::ffff:192.168.10.5");
	cr_assert_str_eq(b->last.new_gid, "fe80::ff:fe00:2");
	/* Same again: no new failover; the history stays. */
	net_model_fini(&m);
	fx_read(&f, &m, &fx_iser0, 1);
	net_model_carry(&m, &m2, 3000, count, NULL);
	cr_assert_eq(calls, 1);
	cr_assert_eq(m.bonds[0].failovers, 1);
	cr_assert_str_eq(m.bonds[0].last.new_slave, "ens1f1");
}

Test(net_model, no_active_slave_in_between_still_counts_once)
{
	fx_roce_bond(&f, "active 1");
	fx_read(&f, &m, &fx_iser0, 1);
	net_model_carry(&m, NULL, 1, NULL, NULL);
	fx_bond_attr(&f, "bond0", "active_slave", "");
	fx_read(&f, &m2, &fx_iser0, 1);
	net_model_carry(&m2, &m, 2, NULL, NULL);
	cr_assert_eq(m2.bonds[0].failovers, 0);
	net_model_fini(&m);
	fx_bond_attr(&f, "bond0", "active_slave", "ens1f1");
	fx_read(&f, &m, &fx_iser0, 1);
	net_model_carry(&m, &m2, 3, NULL, NULL);
	cr_assert_eq(m.bonds[0].failovers, 1);
	cr_assert_str_eq(m.bonds[0].last.old_slave, "ens1f0");
}

Test(net_model, json_shape)
{
	json_t *j, *b, *s, *p, *c;

	fx_roce_bond(&f, "none 0");
	fx_read(&f, &m, &fx_iser0, 1);
	j = net_model_json(&m);
	cr_assert_not_null(j);
	b = json_array_get(json_object_get(j, "bonds"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(b, "mode")), "active-backup");
	cr_assert_str_eq(json_string_value(json_object_get(b, "fail_over_mac")), "none");
	cr_assert_str_eq(json_string_value(json_object_get(b, "active_slave")), "ens1f0");
	cr_assert_eq(json_integer_value(json_object_get(b, "failovers")), 0);
	cr_assert(json_is_null(json_object_get(b, "last_failover")));
	s = json_array_get(json_object_get(b, "slaves"), 1);
	cr_assert_str_eq(json_string_value(json_object_get(s, "name")), "ens1f1");
	cr_assert_str_eq(json_string_value(json_object_get(s, "link_layer")), "roce");
	cr_assert_str_eq(json_string_value(json_object_get(
		json_array_get(json_object_get(s, "rdma"), 0), "device")), "mlx5_1");
	p = json_array_get(json_object_get(j, "rdma_ports"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(p, "state")), "ACTIVE");
	cr_assert_eq(json_array_size(json_object_get(p, "gids")), 3);
	c = json_array_get(json_object_get(j, "portals"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(c, "rdma_device")), "mlx5_0");
	cr_assert_str_eq(json_string_value(json_object_get(c, "gid")), "::ffff:192.168.10.5");
	cr_assert_str_eq(json_string_value(json_object_get(c, "gid_type")), "RoCE v2");
	cr_assert_str_eq(json_string_value(json_object_get(
		json_array_get(json_object_get(j, "verdicts"), 0), "id")), "bond-fail-over-mac");
	cr_assert_str_eq(json_string_value(json_object_get(
		json_array_get(json_object_get(j, "verdicts"), 0), "severity")), "error");
	json_decref(j);
}

Test(net_model, an_empty_host)
{
	static const struct net_portal p = { "tcp0", "127.0.0.1", false };

	fx_link(&f, "lo", 772, "00:00:00:00:00:00", true, 0);
	fx_addrs(&f, "lo 127.0.0.1/8");
	fx_read(&f, &m, &p, 1);
	cr_assert_eq(m.nbonds, 0);
	cr_assert_eq(m.nports, 0);
	cr_assert_eq(m.nverdicts, 0, "%s", fx_ids(&m));
	cr_assert_str_eq(m.chains[0].netdev, "lo");
}
