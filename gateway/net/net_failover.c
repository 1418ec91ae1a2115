// SPDX-License-Identifier: MIT
/*
 * What a change of a bond's active slave means for the iSER portals on it (net.h). Every such
 * portal's listener binds again. Its connections could stay only where nothing they use moved,
 * and the VM rig (tests/vm/guest/suite-bond-failover.sh) found no such case: with the RDMA
 * device on the bond itself (hardware RoCE LAG, Soft-RoCE on the bond) and the bond's MAC kept
 * (fail_over_mac=none), the kernel still deletes and re-adds the bond's GIDs at each failover
 * (roce_gid_mgmt), and Soft-RoCE's queue pairs on both ends fail on it ("Failed allocating
 * skb", the host's iSER "local QP operation error") and the host waits for its own timeouts.
 * So every connection is dropped at once, and the reason logged says what made it necessary;
 * `keep` stays in the plan for a device proven to ride through (none yet). The checks run in
 * order; the first that applies decides.
 */
#include <stdbool.h>
#include <string.h>

#include "gw_list.h"
#include "net.h"

struct fo_rule {
	bool (*applies)(const struct net_model *m, const struct net_bond *b,
			const struct net_chain *c);
	bool keep;
	const char *why;
};

static bool no_active(const struct net_model *m, const struct net_bond *b,
		      const struct net_chain *c)
{
	(void)m;
	(void)c;
	return !*b->active;
}

static bool device_on_slave(const struct net_model *m, const struct net_bond *b,
			    const struct net_chain *c)
{
	size_t i = 0;

	(void)c;
	return !net_model_port_on(m, b->name, &i);
}

static bool mac_moved(const struct net_model *m, const struct net_bond *b,
		      const struct net_chain *c)
{
	(void)m;
	(void)c;
	/* follow and none keep the bond's own MAC; unknown counts as moved */
	return !strcmp(b->fail_over_mac, "active") || !*b->fail_over_mac;
}

static bool always(const struct net_model *m, const struct net_bond *b, const struct net_chain *c)
{
	(void)m;
	(void)b;
	(void)c;
	return true;
}

static const struct fo_rule fo_rules[] = {
	{ no_active, false, "the bond has no active slave" },
	{ device_on_slave, false, "the RDMA device was the old slave's: its queue pairs cannot "
	  "move to the new one" },
	{ mac_moved, false, "fail_over_mac=active gave the bond the new slave's MAC, which the "
	  "peers' queue pairs do not address" },
	{ always, false, "the RDMA device sits on the bond, but the failover makes the kernel "
	  "re-add the bond's GIDs, which breaks its queue pairs (seen with Soft-RoCE)" },
};

size_t net_failover_plan(const struct net_model *m, const struct net_bond *b,
			 struct net_rehome *out, size_t max)
{
	size_t i, k, n = 0;

	for (i = 0; i < m->nchains; i++) {
		const struct net_chain *c = &m->chains[i];

		if (!c->iser || c->wildcard || strcmp(c->bond, b->name))
			continue;
		for (k = 0; k < GW_ARRAY_SIZE(fo_rules); k++)
			if (fo_rules[k].applies(m, b, c))
				break;
		if (n < max)
			out[n] = (struct net_rehome){ .portal = c->portal, .keep = fo_rules[k].keep,
						      .why = fo_rules[k].why };
		n++;
	}
	return n;
}
