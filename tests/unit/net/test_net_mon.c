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

/* What the watcher (the control socket) was told, in order: "type data" per line. */
static char seen[16384];

static void watch_rec(void *arg, const char *type, json_t *data)
{
	char *d = json_dumps(data, JSON_COMPACT | JSON_SORT_KEYS);

	(*(int *)arg)++;
	snprintf(seen + strlen(seen), sizeof(seen) - strlen(seen), "%s %s\n", type, d);
	free(d);
	json_decref(data);
}

Test(net_mon, the_watcher_hears_failover_link_port_verdicts_then_changed)
{
	struct net_mon *n;
	uint64_t g0;
	int count = 0;
	char *fo, *ln, *rd, *vd, *ch;

	fx_roce_bond(&f, "active 1");
	cr_assert_eq(net_mon_create(&loop, &n), 0);
	seen[0] = 0;
	net_mon_set_watch(n, watch_rec, &count);
	g0 = net_mon_generation(n);
	/* Nothing changed: nothing said. */
	net_mon_refresh(n);
	cr_assert_eq(count, 0, "%s", seen);
	/* ens1f0 loses its link, ens1f1 takes over, mlx5_0's port goes down: one re-read. */
	fx_link(&f, "ens1f0", 1, "02:00:00:00:00:01", false, 100000);
	fx_slave(&f, "ens1f0", "backup", "down", "02:00:00:00:00:01");
	fx_slave(&f, "ens1f1", "active", "up", "02:00:00:00:00:02");
	fx_bond_attr(&f, "bond0", "active_slave", "ens1f1");
	fx_port(&f, "mlx5_0", 1, 1, true);
	net_mon_refresh(n);
	fo = strstr(seen, "failover {\"bond\":\"bond0\"");
	ln = strstr(seen, "link {\"carrier\":false,\"master\":\"bond0\",\"netdev\":\"ens1f0\"");
	rd = strstr(seen, "rdma {\"device\":\"mlx5_0\",\"netdev\":\"ens1f0\",\"port\":1,"
		    "\"previous_num\":4,\"state_num\":1}");
	vd = strstr(seen, "verdicts {\"active\":");
	ch = strstr(seen, "changed {\"generation\":");
	cr_assert(fo && ln && rd && vd && ch, "%s", seen);
	cr_assert(strstr(fo, "\"failovers\":1,\"new\":\"ens1f1\",\"new_gid\":"), "%s", seen);
	cr_assert(strstr(fo, "\"old\":\"ens1f0\""), "%s", seen);
	cr_assert(strstr(vd, "\"id\":\"bond-slave-down\""), "%s", seen);
	/* The model changed once: "changed" last, one generation on. */
	cr_assert(fo < ch && ln < ch && rd < ch && vd < ch, "%s", seen);
	cr_assert_null(strstr(ch + 1, "changed"), "%s", seen);
	cr_assert_eq(net_mon_generation(n), g0 + 1);
	/* Fixed again: the verdict resolved, and told so. */
	seen[0] = 0;
	fx_link(&f, "ens1f0", 1, "02:00:00:00:00:01", true, 100000);
	fx_slave(&f, "ens1f0", "backup", "up", "02:00:00:00:00:01");
	net_mon_refresh(n);
	cr_assert(strstr(seen, "\"resolved\":[{\"id\":\"bond-slave-down\",\"object\":"
			 "\"bond/bond0\"}]"), "%s", seen);
	cr_assert_eq(net_mon_generation(n), g0 + 2);
	{
		json_t *j = net_mon_json(n);

		cr_assert_eq(json_integer_value(json_object_get(j, "generation")),
			     (json_int_t)(g0 + 2));
		json_decref(j);
	}
	net_mon_set_watch(n, NULL, NULL);
	net_mon_destroy(n);
}

Test(net_mon, an_rtnetlink_failover_is_told_at_once)
{
	struct net_mon *n;
	int count = 0;

	fx_roce_bond(&f, "active 1");
	cr_assert_eq(net_mon_create(&loop, &n), 0);
	seen[0] = 0;
	net_mon_set_watch(n, watch_rec, &count);
	send_active(n, "bond0", 4);
	cr_assert_str_eq(net_mon_model(n)->bonds[0].active, "ens1f1",
			 "the model names the new active slave before the re-read");
	cr_assert(strstr(seen, "failover {\"bond\":\"bond0\""), "%s", seen);
	cr_assert(strstr(seen, "\"new\":\"ens1f1\""), "%s", seen);
	cr_assert(strstr(seen, "\nchanged {\"generation\":"), "%s", seen);
	net_mon_destroy(n);
}
