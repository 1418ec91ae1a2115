// SPDX-License-Identifier: MIT
/* The verdict table over fixture hosts: each rule fires where an operator would be hurt, and
 * stays quiet on the setups that work. */
#include <criterion/criterion.h>
#include <string.h>

#include "net_fx.h"

static struct fx f;
static struct net_model m;

static void setup(void)
{
	fx_init(&f);
}

static void teardown(void)
{
	net_model_fini(&m);
	fx_fini(&f);
}

TestSuite(net_verdict, .init = setup, .fini = teardown);

static void has(const char *id, const char *object)
{
	cr_assert_not_null(net_model_verdict(&m, id, object), "no %s on %s; verdicts: %s", id,
			   object, fx_ids(&m));
}

static void hasnt(const char *id)
{
	cr_assert_null(net_model_verdict(&m, id, NULL), "%s unexpected; verdicts: %s", id,
		       fx_ids(&m));
}

Test(net_verdict, table_ids_are_unique_and_complete)
{
	size_t i, j;

	cr_assert_geq(net_nrules, 15);
	for (i = 0; i < net_nrules; i++) {
		cr_assert(net_rules[i].id && *net_rules[i].message && *net_rules[i].fix);
		cr_assert(net_rules[i].check);
		for (j = i + 1; j < net_nrules; j++)
			cr_assert_str_neq(net_rules[i].id, net_rules[j].id);
	}
}

Test(net_verdict, active_backup_with_active_is_clean)
{
	fx_roce_bond(&f, "active 1");
	fx_read(&f, &m, &fx_iser0, 1);
	cr_assert_eq(m.nverdicts, 0, "verdicts: %s", fx_ids(&m));
}

Test(net_verdict, active_backup_with_none_under_iser_is_an_error)
{
	const struct net_verdict *v;

	fx_roce_bond(&f, "none 0");
	fx_read(&f, &m, &fx_iser0, 1);
	has("bond-fail-over-mac", "bond/bond0");
	v = net_model_verdict(&m, "bond-fail-over-mac", "bond/bond0");
	cr_assert_eq(v->rule->severity, NET_SEV_ERROR);
	cr_assert(strstr(v->message, "iser0") && strstr(v->message, "fail_over_mac=none"),
		  "%s", v->message);
	cr_assert(strstr(v->fix, "fail_over_mac active"), "%s", v->fix);
	/* The portal is there: the weaker "RDMA slaves" warning is not repeated. */
	hasnt("bond-rdma-slaves-fail-over-mac");
}

Test(net_verdict, active_backup_with_follow_under_iser_is_an_error)
{
	fx_roce_bond(&f, "follow 2");
	fx_read(&f, &m, &fx_iser0, 1);
	has("bond-fail-over-mac", "bond/bond0");
	cr_assert(strstr(net_model_verdict(&m, "bond-fail-over-mac", NULL)->message,
			 "fail_over_mac=follow"));
}

Test(net_verdict, rdma_slaves_without_iser_portal_warn)
{
	static const struct net_portal tcp = { "tcp0", "192.168.10.5", false };

	fx_roce_bond(&f, "none 0");
	fx_read(&f, &m, &tcp, 1);
	has("bond-rdma-slaves-fail-over-mac", "bond/bond0");
	hasnt("bond-fail-over-mac");
	cr_assert_eq(net_model_verdict(&m, "bond-rdma-slaves-fail-over-mac", NULL)->rule->severity,
		     NET_SEV_WARNING);
}

Test(net_verdict, ipoib_bond_is_clean_and_reaches_the_port_gid)
{
	static const struct net_portal p = { "iser0", "10.0.0.5", true };
	const struct net_chain *c;

	/* The kernel forced fail_over_mac=active when it enslaved the IPoIB ports. */
	fx_bond(&f, "bond0", "active-backup 1", "active 1", 100, "ib0", "ib0 ib1");
	fx_link(&f, "ib0", 32, "00:00:10:87:fe:80:00:00:00:00:00:00:00:11:22:33:44:55:66:01",
		true, 0);
	fx_link(&f, "ib1", 32, "00:00:10:87:fe:80:00:00:00:00:00:00:00:11:22:33:44:55:66:02",
		true, 0);
	fx_slave(&f, "ib0", "active", "up", "");
	fx_slave(&f, "ib1", "backup", "up", "");
	fx_bond_attr(&f, "bond0", "num_grat_arp", "0");
	fx_put(&f, "class/net/ib0/device/infiniband/mlx4_0/.keep", "x");
	fx_put(&f, "class/net/ib0/dev_port", "0");
	fx_put(&f, "class/net/ib1/device/infiniband/mlx4_0/.keep", "x");
	fx_put(&f, "class/net/ib1/dev_port", "1");
	fx_port(&f, "mlx4_0", 1, 4, false);
	fx_gid(&f, "mlx4_0", 1, 0, "fe80:0000:0000:0000:0011:2233:4455:6601", "IB/RoCE v1", NULL);
	fx_port(&f, "mlx4_0", 2, 4, false);
	fx_gid(&f, "mlx4_0", 2, 0, "fe80:0000:0000:0000:0011:2233:4455:6602", "IB/RoCE v1", NULL);
	fx_addrs(&f, "bond0 10.0.0.5/24");
	fx_read(&f, &m, &p, 1);
	/* num_grat_arp=0 does not matter on IPoIB. */
	cr_assert_eq(m.nverdicts, 0, "verdicts: %s", fx_ids(&m));
	c = &m.chains[0];
	cr_assert_str_eq(c->slave, "ib0");
	cr_assert_geq(c->rdma, 0);
	cr_assert_str_eq(m.ports[c->rdma].dev, "mlx4_0");
	cr_assert_eq(m.ports[c->rdma].port, 1);
	cr_assert_eq(c->gid, 0);
	cr_assert_eq(net_model_link(&m, "ib1")->ll, NET_LL_INFINIBAND);
}

Test(net_verdict, ipoib_bond_without_active_fom_is_an_error)
{
	static const struct net_portal p = { "iser0", "10.0.0.5", true };

	fx_bond(&f, "bond0", "active-backup 1", "none 0", 100, "ib0", "ib0");
	fx_link(&f, "ib0", 32, "00:00:10:87", true, 0);
	fx_slave(&f, "ib0", "active", "up", "");
	fx_put(&f, "class/net/ib0/device/infiniband/mlx4_0/.keep", "x");
	fx_port(&f, "mlx4_0", 1, 4, false);
	fx_gid(&f, "mlx4_0", 1, 0, "fe80:0000:0000:0000:0011:2233:4455:6601", "IB/RoCE v1", NULL);
	fx_addrs(&f, "bond0 10.0.0.5/24");
	fx_read(&f, &m, &p, 1);
	has("bond-fail-over-mac", "bond/bond0");
}

Test(net_verdict, roce_lag_is_recognised_as_fine)
{
	fx_bond(&f, "bond0", "802.3ad 4", "none 0", 100, "", "ens1f0 ens1f1");
	fx_link(&f, "ens1f0", 1, "02:00:00:00:00:01", true, 100000);
	fx_link(&f, "ens1f1", 1, "02:00:00:00:00:02", true, 100000);
	fx_slave(&f, "ens1f0", "active", "up", "02:00:00:00:00:01");
	fx_slave(&f, "ens1f1", "active", "up", "02:00:00:00:00:02");
	/* mlx5_bond_0: the hardware LAG device sits on the bond. */
	fx_port(&f, "mlx5_bond_0", 1, 4, true);
	fx_gid(&f, "mlx5_bond_0", 1, 0, "fe80:0000:0000:0000:0000:00ff:fe00:0001", "IB/RoCE v1",
	       "bond0");
	fx_gid(&f, "mlx5_bond_0", 1, 1, "0000:0000:0000:0000:0000:ffff:c0a8:0a05", "RoCE v2",
	       "bond0");
	fx_addrs(&f, "bond0 192.168.10.5/24");
	fx_read(&f, &m, &fx_iser0, 1);
	has("bond-rdma-lag", "bond/bond0");
	cr_assert_eq(net_model_verdict(&m, "bond-rdma-lag", NULL)->rule->severity, NET_SEV_INFO);
	hasnt("bond-mode-roce");
	hasnt("bond-fail-over-mac");
	hasnt("portal-no-rdma");
	cr_assert_eq(m.nverdicts, 1, "verdicts: %s", fx_ids(&m));
	cr_assert_str_eq(m.ports[m.chains[0].rdma].dev, "mlx5_bond_0");
	cr_assert_eq(m.ports[m.chains[0].rdma].gids[m.chains[0].gid].type, NET_GID_ROCE_V2);
}

Test(net_verdict, soft_roce_on_the_bond_is_lag_too)
{
	fx_roce_bond(&f, "none 0");
	/* rxe0 on bond0 besides the slaves' own devices. */
	fx_port(&f, "rxe0", 1, 4, true);
	fx_put(&f, "class/infiniband/rxe0/parent", "bond0");
	fx_read(&f, &m, &fx_iser0, 1);
	has("bond-rdma-lag", "bond/bond0");
	hasnt("bond-fail-over-mac");
}

Test(net_verdict, other_mode_over_roce_slaves_is_an_error)
{
	fx_roce_bond(&f, "none 0");
	fx_bond_attr(&f, "bond0", "mode", "balance-xor 2");
	fx_read(&f, &m, &fx_iser0, 1);
	has("bond-mode-roce", "bond/bond0");
	cr_assert(strstr(net_model_verdict(&m, "bond-mode-roce", NULL)->message, "balance-xor"));
	/* fail_over_mac only matters in active-backup. */
	hasnt("bond-fail-over-mac");
}

Test(net_verdict, miimon_0_without_arp_monitor_is_an_error)
{
	fx_roce_bond(&f, "active 1");
	fx_bond_attr(&f, "bond0", "miimon", "0");
	fx_read(&f, &m, &fx_iser0, 1);
	has("bond-no-link-monitor", "bond/bond0");
}

Test(net_verdict, miimon_0_with_arp_monitor_is_fine)
{
	fx_roce_bond(&f, "active 1");
	fx_bond_attr(&f, "bond0", "miimon", "0");
	fx_bond_attr(&f, "bond0", "arp_interval", "200");
	fx_bond_attr(&f, "bond0", "arp_ip_target", "192.168.10.1");
	fx_read(&f, &m, &fx_iser0, 1);
	hasnt("bond-no-link-monitor");
}

Test(net_verdict, no_gratuitous_arp_warns)
{
	fx_roce_bond(&f, "active 1");
	fx_bond_attr(&f, "bond0", "num_grat_arp", "0");
	fx_read(&f, &m, &fx_iser0, 1);
	has("bond-no-grat-arp", "bond/bond0");
}

Test(net_verdict, ports_down)
{
	fx_roce_bond(&f, "active 1");
	/* ens1f1 lost its link; mlx5_0's port (under the active slave) is down too. */
	fx_slave(&f, "ens1f1", "backup", "down", "02:00:00:00:00:02");
	fx_put(&f, "class/infiniband/mlx5_0/ports/1/state", "1: DOWN");
	fx_read(&f, &m, &fx_iser0, 1);
	has("bond-slave-down", "bond/bond0");
	cr_assert(strstr(net_model_verdict(&m, "bond-slave-down", NULL)->message, "ens1f1"));
	has("portal-rdma-port-down", "portal/iser0");
	cr_assert(strstr(net_model_verdict(&m, "portal-rdma-port-down", NULL)->message,
			 "mlx5_0 port 1"));
}

Test(net_verdict, every_slave_down_leaves_no_active_slave)
{
	fx_roce_bond(&f, "active 1");
	fx_bond_attr(&f, "bond0", "active_slave", "");
	fx_slave(&f, "ens1f0", "backup", "down", "02:00:00:00:00:01");
	fx_slave(&f, "ens1f1", "backup", "down", "02:00:00:00:00:02");
	fx_read(&f, &m, &fx_iser0, 1);
	has("bond-no-active-slave", "bond/bond0");
	has("bond-slave-down", "bond/bond0");
	/* No active slave, no chain to judge further. */
	hasnt("portal-no-rdma");
}

Test(net_verdict, mixed_link_layers)
{
	fx_roce_bond(&f, "active 1");
	/* ens1f1 is a plain NIC now: no RDMA port on it. */
	fx_put(&f, "class/infiniband/mlx5_1/ports/1/gid_attrs/ndevs/0", "eth9");
	fx_read(&f, &m, &fx_iser0, 1);
	has("bond-mixed-link-layers", "bond/bond0");
	cr_assert(strstr(net_model_verdict(&m, "bond-mixed-link-layers", NULL)->message,
			 "ens1f1 ethernet"), "%s",
		  net_model_verdict(&m, "bond-mixed-link-layers", NULL)->message);
}

Test(net_verdict, mixed_speeds)
{
	fx_roce_bond(&f, "active 1");
	fx_put(&f, "class/net/ens1f1/speed", "25000");
	fx_read(&f, &m, &fx_iser0, 1);
	has("bond-mixed-speeds", "bond/bond0");
}

Test(net_verdict, portal_on_a_slave)
{
	static const struct net_portal p = { "iser0", "192.168.10.6", true };

	fx_roce_bond(&f, "active 1");
	fx_addrs(&f, "bond0 192.168.10.5/24\nens1f1 192.168.10.6/24");
	fx_read(&f, &m, &p, 1);
	has("portal-on-slave", "portal/iser0");
	cr_assert(strstr(net_model_verdict(&m, "portal-on-slave", NULL)->fix,
			 "dev ens1f1"));
}

Test(net_verdict, iser_portal_without_rdma)
{
	static const struct net_portal p = { "iser0", "10.9.9.9", true };
	static const struct net_portal t = { "tcp0", "10.9.9.9", false };

	fx_link(&f, "eth9", 1, "02:00:00:00:09:09", true, 10000);
	fx_addrs(&f, "eth9 10.9.9.9/24");
	fx_read(&f, &m, &p, 1);
	has("portal-no-rdma", "portal/iser0");
	cr_assert(strstr(net_model_verdict(&m, "portal-no-rdma", NULL)->message,
			 "is on eth9, and no RDMA port sits on it:"), "%s",
		  net_model_verdict(&m, "portal-no-rdma", NULL)->message);
	net_model_fini(&m);
	/* TCP needs no RDMA. */
	fx_read(&f, &m, &t, 1);
	cr_assert_eq(m.nverdicts, 0, "verdicts: %s", fx_ids(&m));
}

Test(net_verdict, iser_portal_on_a_bond_of_plain_nics)
{
	fx_bond(&f, "bond0", "active-backup 1", "none 0", 100, "eth1", "eth1 eth2");
	fx_link(&f, "eth1", 1, "02:00:00:00:00:01", true, 10000);
	fx_link(&f, "eth2", 1, "02:00:00:00:00:02", true, 10000);
	fx_slave(&f, "eth1", "active", "up", "02:00:00:00:00:01");
	fx_slave(&f, "eth2", "backup", "up", "02:00:00:00:00:02");
	fx_addrs(&f, "bond0 192.168.10.5/24");
	fx_read(&f, &m, &fx_iser0, 1);
	has("portal-no-rdma", "portal/iser0");
	cr_assert(strstr(net_model_verdict(&m, "portal-no-rdma", NULL)->message,
			 "nor on its active slave eth1"));
	/* No RDMA slave: fail_over_mac does not matter here. */
	hasnt("bond-fail-over-mac");
	hasnt("bond-rdma-slaves-fail-over-mac");
}

Test(net_verdict, portal_address_nowhere_and_wildcard)
{
	static const struct net_portal p[] = { { "iser0", "10.1.2.3", true },
					       { "any", "0.0.0.0", false } };

	fx_read(&f, &m, p, 2);
	has("portal-no-address", "portal/iser0");
	cr_assert_null(net_model_verdict(&m, "portal-no-address", "portal/any"));
	cr_assert(m.chains[1].wildcard);
}

Test(net_verdict, sysctls_with_two_portals_on_one_subnet)
{
	static const struct net_portal p[] = { { "a", "192.168.20.1", true },
					       { "b", "192.168.20.2", true } };

	fx_link(&f, "rxa", 1, "02:00:00:00:00:0a", true, 0);
	fx_link(&f, "rxb", 1, "02:00:00:00:00:0b", true, 0);
	fx_port(&f, "rxe_a", 1, 4, true);
	fx_put(&f, "class/infiniband/rxe_a/parent", "rxa");
	fx_port(&f, "rxe_b", 1, 4, true);
	fx_put(&f, "class/infiniband/rxe_b/parent", "rxb");
	fx_addrs(&f, "rxa 192.168.20.1/24\nrxb 192.168.20.2/24");
	fx_sysctl(&f, "all", "rp_filter", 0);
	fx_sysctl(&f, "all", "arp_ignore", 0);
	fx_sysctl(&f, "all", "arp_announce", 0);
	fx_sysctl(&f, "rxa", "rp_filter", 1);
	fx_sysctl(&f, "rxa", "arp_ignore", 0);
	fx_sysctl(&f, "rxa", "arp_announce", 0);
	fx_sysctl(&f, "rxb", "rp_filter", 2);
	fx_sysctl(&f, "rxb", "arp_ignore", 1);
	fx_sysctl(&f, "rxb", "arp_announce", 2);
	fx_read(&f, &m, p, 2);
	has("sysctl-rp-filter", "netdev/rxa");
	has("sysctl-arp-ignore", "netdev/rxa");
	has("sysctl-arp-announce", "netdev/rxa");
	cr_assert_null(net_model_verdict(&m, "sysctl-rp-filter", "netdev/rxb"));
	cr_assert_null(net_model_verdict(&m, "sysctl-arp-ignore", "netdev/rxb"));
	cr_assert(strstr(net_model_verdict(&m, "sysctl-rp-filter", NULL)->fix,
			 "net.ipv4.conf.rxa.rp_filter=2"));
	net_model_fini(&m);
	/* The kernel takes the larger of conf/all and conf/IF: all=1 over rxb's 0 is strict,
	 * all=1 under rxb's 2 is loose. */
	fx_sysctl(&f, "all", "rp_filter", 1);
	fx_sysctl(&f, "rxb", "rp_filter", 0);
	fx_read(&f, &m, p, 2);
	has("sysctl-rp-filter", "netdev/rxb");
	net_model_fini(&m);
	/* Other subnets: nothing to say. */
	fx_addrs(&f, "rxa 192.168.20.1/24\nrxb 192.168.21.2/24");
	{
		static const struct net_portal q[] = { { "a", "192.168.20.1", true },
						       { "b", "192.168.21.2", true } };

		fx_read(&f, &m, q, 2);
	}
	hasnt("sysctl-rp-filter");
	hasnt("sysctl-arp-ignore");
}
