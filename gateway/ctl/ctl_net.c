// SPDX-License-Identifier: MIT
/*
 * The gateway's portals follow the network model (ctl.h, ctl_net_follow): on a change of a
 * bond's active slave, each iSER portal bound on that bond listens again at once and keeps or
 * drops its connections as net_failover_plan decides. rdma_cm's ADDR_CHANGE, which the iSER
 * datamover still acts on, comes later or not at all (not without a MAC change); TCP portals
 * are left alone: their sockets follow the address by themselves.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ctl_priv.h"
#include "dmv.h"
#include "gw_log.h"
#include "net.h"

#define CTL_NET_MAX_PORTALS 64

static uint64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void on_failover(const struct net_model *m, const struct net_bond *b, void *arg)
{
	struct net_rehome plan[CTL_NET_MAX_PORTALS];
	struct ctl_gw *g = arg;
	size_t n, i;

	n = net_failover_plan(m, b, plan, CTL_NET_MAX_PORTALS);
	for (i = 0; i < n && i < CTL_NET_MAX_PORTALS; i++) {
		struct isc_portal *p = isc_gw_find_portal(g->isc, plan[i].portal);
		const struct isc_portal_conf *pc = p ? isc_portal_conf(p) : NULL;
		struct dmv_portal *dp = p ? isc_portal_dmv(p) : NULL;
		uint64_t at = b->last.time_ms, now;
		char what[64];
		int dropped;

		if (!dp || pc->transport != ISC_PORTAL_ISER)
			continue;
		dropped = dmv_portal_rehome(dp, !plan[i].keep);
		now = wall_ms();
		if (plan[i].keep)
			snprintf(what, sizeof(what), "connections kept");
		else
			snprintf(what, sizeof(what), "%d connection%s dropped to reconnect now",
				 dropped > 0 ? dropped : 0, dropped == 1 ? "" : "s");
		/* The VM suite reads "N ms after" and "at S.mmm" (wall clock) off this line. */
		gw_info("net", "portal %s: re-homed on bond %s (%s -> %s) %llu ms after the "
			"netlink event (at %llu.%03llu), %s; %s: %s", pc->name, b->name,
			b->last.old_slave, b->last.new_slave,
			(unsigned long long)(now > at ? now - at : 0),
			(unsigned long long)(at / 1000), (unsigned long long)(at % 1000),
			dp->listening ? "listening" : "not listening yet", what, plan[i].why);
	}
}

void ctl_net_follow(struct ctl_gw *g, struct net_mon *n)
{
	if (n)
		net_mon_set_failover_hook(n, g ? on_failover : NULL, g);
}
