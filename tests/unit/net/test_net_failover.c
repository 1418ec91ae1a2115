// SPDX-License-Identifier: MIT
/* What a change of active slave means for the iSER portals on the bond (net_failover_plan), over
 * fixture hosts, and the hook net_mon calls with it. */
#include <criterion/criterion.h>
#include <string.h>

#include "net_fx.h"

static struct fx f;
static struct net_model m;
static struct gw_loop loop;

static void setup(void)
{
	fx_init(&f);
}

static void teardown(void)
{
	net_model_fini(&m);
	fx_fini(&f);
}

TestSuite(net_failover, .init = setup, .fini = teardown);

static const struct net_portal two[] = {
	{ "iser0", "192.168.10.5", true },
	{ "tcp0", "192.168.10.5", false },
};

/* rxe0 on bond0 itself, the slaves' own devices gone. */
static void rxe_on_bond(const char *fom)
{
	fx_roce_bond(&f, fom);
	fx_put(&f, "class/infiniband/mlx5_0/ports/1/state", "1: DOWN");
	fx_port(&f, "rxe0", 1, 4, true);
	fx_gid(&f, "rxe0", 1, 0, "0000:0000:0000:0000:0000:ffff:c0a8:0a05", "RoCE v2", "bond0");
	fx_put(&f, "class/infiniband/rxe0/parent", "bond0");
}

static struct net_rehome plan1(void)
{
	struct net_rehome p[4];
	size_t n = net_failover_plan(&m, net_model_bond(&m, "bond0"), p, 4);

	cr_assert_eq(n, 1, "one iSER portal on bond0, the TCP one left alone: %zu", n);
	cr_assert_str_eq(p[0].portal, "iser0");
	return p[0];
}

Test(net_failover, roce_slaves_drop_their_connections)
{
	struct net_rehome p;

	/* Even with fail_over_mac=active: the queue pairs live on the old slave's device. */
	fx_roce_bond(&f, "active 1");
	fx_read(&f, &m, two, 2);
	p = plan1();
	cr_assert_not(p.keep);
	cr_assert(strstr(p.why, "old slave's"), "%s", p.why);
}

Test(net_failover, device_on_the_bond_with_its_mac_kept_drops_them_too)
{
	struct net_rehome p;

	/* The VM rig: the GIDs re-added at the failover break Soft-RoCE's queue pairs. */
	rxe_on_bond("none 0");
	fx_read(&f, &m, two, 2);
	p = plan1();
	cr_assert_not(p.keep);
	cr_assert(strstr(p.why, "GIDs"), "%s", p.why);
	rxe_on_bond("follow 2");
	net_model_fini(&m);
	fx_read(&f, &m, two, 2);
	cr_assert_not(plan1().keep);
}

Test(net_failover, device_on_the_bond_with_a_new_mac_drops_them)
{
	struct net_rehome p;

	rxe_on_bond("active 1");
	fx_read(&f, &m, two, 2);
	p = plan1();
	cr_assert_not(p.keep);
	cr_assert(strstr(p.why, "MAC"), "%s", p.why);
}

Test(net_failover, no_active_slave_drops_them)
{
	rxe_on_bond("none 0");
	fx_bond_attr(&f, "bond0", "active_slave", "");
	fx_read(&f, &m, two, 2);
	cr_assert_not(plan1().keep);
}

Test(net_failover, portals_elsewhere_are_not_in_the_plan)
{
	static const struct net_portal other[] = {
		{ "iser1", "192.168.20.5", true },	/* on a plain port */
		{ "any", "0.0.0.0", true },		/* every netdev: bound to no device */
	};
	struct net_rehome p[2];

	fx_roce_bond(&f, "active 1");
	fx_link(&f, "ens2", 1, "02:00:00:00:00:09", true, 25000);
	fx_addrs(&f, "bond0 192.168.10.5/24\nens2 192.168.20.5/24");
	fx_read(&f, &m, other, 2);
	cr_assert_eq(net_failover_plan(&m, net_model_bond(&m, "bond0"), p, 2), 0);
}

struct seen {
	int calls;
	char old_slave[NET_IFNAME], new_slave[NET_IFNAME];
	size_t planned;
	bool keep;
};

static void hook(const struct net_model *hm, const struct net_bond *b, void *arg)
{
	struct seen *s = arg;
	struct net_rehome p[4];

	s->calls++;
	snprintf(s->old_slave, sizeof(s->old_slave), "%s", b->last.old_slave);
	snprintf(s->new_slave, sizeof(s->new_slave), "%s", b->last.new_slave);
	s->planned = net_failover_plan(hm, b, p, 4);
	s->keep = s->planned && p[0].keep;
}

Test(net_failover, net_mon_calls_the_hook_with_the_model_of_the_moment)
{
	struct isc_portal_conf pc = { .name = (char *)"iser0", .transport = ISC_PORTAL_ISER,
				      .address = (char *)"192.168.10.5", .port = 3260 };
	struct seen s = { 0 };
	struct net_mon *n;

	rxe_on_bond("none 0");
	cr_assert_eq(gw_loop_init(&loop), 0);
	setenv("ISERGW_SYSFS", f.root, 1);
	cr_assert_eq(net_mon_create(&loop, &n), 0);
	net_mon_set_portals(n, &pc, 1);
	net_mon_set_failover_hook(n, hook, &s);
	net_mon_refresh(n);
	cr_assert_eq(s.calls, 0, "no failover yet");
	fx_bond_attr(&f, "bond0", "active_slave", "ens1f1");
	net_mon_refresh(n);
	cr_assert_eq(s.calls, 1);
	cr_assert_str_eq(s.old_slave, "ens1f0");
	cr_assert_str_eq(s.new_slave, "ens1f1");
	cr_assert_eq(s.planned, 1);
	cr_assert_not(s.keep);
	/* Removed: the next failover calls nobody. */
	net_mon_set_failover_hook(n, NULL, &s);
	fx_bond_attr(&f, "bond0", "active_slave", "ens1f0");
	net_mon_refresh(n);
	cr_assert_eq(s.calls, 1);
	net_mon_destroy(n);
	unsetenv("ISERGW_SYSFS");
	gw_loop_fini(&loop);
}
