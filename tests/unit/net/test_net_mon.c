// SPDX-License-Identifier: MIT
/* net_mon in a real loop over a fixture ($ISERGW_SYSFS): portals, verdicts logged, a failover
 * counted and shown in the JSON the control socket serves. */
#include <criterion/criterion.h>
#include <string.h>

#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>

#include "gw_log.h"
#include "net_fx.h"
#include "net_priv.h"

static struct fx f;
static struct gw_loop loop;
static char logbuf[16384];

static void sink(enum gw_log_level level, const char *comp, const char *msg, void *arg)
{
	(void)arg;
	snprintf(logbuf + strlen(logbuf), sizeof(logbuf) - strlen(logbuf), "<%d>%s: %s\n", level,
		 comp, msg);
}

static void setup(void)
{
	fx_init(&f);
	cr_assert_eq(gw_loop_init(&loop), 0);
	setenv("ISERGW_SYSFS", f.root, 1);
	logbuf[0] = 0;
	gw_log_set_sink(sink, NULL);
}

static void teardown(void)
{
	gw_log_set_sink(NULL, NULL);
	unsetenv("ISERGW_SYSFS");
	gw_loop_fini(&loop);
	fx_fini(&f);
}

TestSuite(net_mon, .init = setup, .fini = teardown);

Test(net_mon, verdicts_logged_at_their_severity_and_failover_in_state)
{
	struct isc_portal_conf pc = { .name = (char *)"iser0", .transport = ISC_PORTAL_ISER,
				      .address = (char *)"192.168.10.5", .port = 3260 };
	struct net_mon *n;
	json_t *j, *b, *lf;

	fx_roce_bond(&f, "none 0");
	cr_assert_eq(net_mon_create(&loop, &n), 0);
	net_mon_set_portals(n, &pc, 1);
	cr_assert(strstr(logbuf, "<3>net: bond-fail-over-mac bond/bond0: iSER portal iser0"),
		  "%s", logbuf);
	fx_bond_attr(&f, "bond0", "active_slave", "ens1f1");
	net_mon_refresh(n);
	cr_assert(strstr(logbuf, "<4>net: bond bond0: active slave ens1f0 -> ens1f1 "
			 "(MAC 02:00:00:00:00:01 -> 02:00:00:00:00:02"), "%s", logbuf);
	j = net_mon_json(n);
	cr_assert_str_eq(json_string_value(json_object_get(j, "source")), "sysfs");
	b = json_array_get(json_object_get(j, "bonds"), 0);
	cr_assert_eq(json_integer_value(json_object_get(b, "failovers")), 1);
	lf = json_object_get(b, "last_failover");
	cr_assert_str_eq(json_string_value(json_object_get(lf, "old")), "ens1f0");
	cr_assert_str_eq(json_string_value(json_object_get(lf, "new")), "ens1f1");
	cr_assert_gt(json_integer_value(json_object_get(lf, "time_ms")), 0);
	json_decref(j);
	/* Fixed: the verdict goes, and the log says so. */
	fx_bond_attr(&f, "bond0", "fail_over_mac", "active 1");
	net_mon_refresh(n);
	cr_assert(strstr(logbuf, "<6>net: bond-fail-over-mac bond/bond0: resolved"), "%s", logbuf);
	cr_assert_eq(net_mon_model(n)->nverdicts, 0);
	net_mon_destroy(n);
}

Test(net_mon, the_timer_re_reads_the_fixture)
{
	struct net_mon *n;
	uint64_t t0;

	fx_roce_bond(&f, "active 1");
	cr_assert_eq(net_mon_create(&loop, &n), 0);
	fx_bond_attr(&f, "bond0", "active_slave", "ens1f1");
	t0 = gw_now_ms();
	while (net_mon_model(n)->bonds[0].failovers == 0 && gw_now_ms() - t0 < 3000)
		gw_loop_run_once(&loop, 100);
	cr_assert_eq(net_mon_model(n)->bonds[0].failovers, 1);
	net_mon_destroy(n);
}

/* What the kernel sends on a failover: RTM_NEWLINK for the bond, its IFLA_BOND_ACTIVE_SLAVE. */
static void send_active(struct net_mon *n, const char *bond, uint32_t slave_ifindex)
{
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC, .ifi_index = 5 };
	struct nl_msg *msg = nlmsg_alloc_simple(RTM_NEWLINK, 0);
	struct nlattr *li, *d;

	cr_assert_not_null(msg);
	cr_assert_eq(nlmsg_append(msg, &ifi, sizeof(ifi), NLMSG_ALIGNTO), 0);
	cr_assert_eq(nla_put_string(msg, IFLA_IFNAME, bond), 0);
	li = nla_nest_start(msg, IFLA_LINKINFO);
	cr_assert_eq(nla_put_string(msg, IFLA_INFO_KIND, "bond"), 0);
	d = nla_nest_start(msg, IFLA_INFO_DATA);
	cr_assert_eq(nla_put_u32(msg, IFLA_BOND_ACTIVE_SLAVE, slave_ifindex), 0);
	nla_nest_end(msg, d);
	nla_nest_end(msg, li);
	net_mon_rtmsg(n, nlmsg_hdr(msg));
	nlmsg_free(msg);
}

Test(net_mon, a_flip_and_back_in_one_batch_counts_twice)
{
	struct net_mon *n;
	const struct net_bond *b;

	fx_roce_bond(&f, "active 1");
	cr_assert_eq(net_mon_create(&loop, &n), 0);
	/* ens1f0 (3) -> ens1f1 (4) -> ens1f0, faster than any re-read: sysfs says ens1f0 all
	 * along. */
	send_active(n, "bond0", 4);
	send_active(n, "bond0", 4);
	send_active(n, "bond0", 3);
	b = &net_mon_model(n)->bonds[0];
	cr_assert_eq(b->failovers, 2);
	cr_assert_str_eq(b->last.old_slave, "ens1f1");
	cr_assert_str_eq(b->last.new_slave, "ens1f0");
	cr_assert(strstr(logbuf, "active slave ens1f0 -> ens1f1"), "%s", logbuf);
	cr_assert(strstr(logbuf, "active slave ens1f1 -> ens1f0 (MAC 02:00:00:00:00:02 -> "
			 "02:00:00:00:00:01"), "%s", logbuf);
	/* The re-read agrees: nothing more. */
	net_mon_refresh(n);
	cr_assert_eq(net_mon_model(n)->bonds[0].failovers, 2);
	/* Not a bond, or an unknown slave: ignored. */
	send_active(n, "bond9", 4);
	send_active(n, "bond0", 99);
	cr_assert_eq(net_mon_model(n)->bonds[0].failovers, 2);
	net_mon_destroy(n);
}
