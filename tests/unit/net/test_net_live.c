// SPDX-License-Identifier: MIT
/* The live reader against this host's kernel (rtnetlink through libnl, libibverbs): whatever
 * else the host has, it has lo with 127.0.0.1, and reading needs no privilege. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <net/if_arp.h>
#include <string.h>

#include "net.h"

Test(net_live, reads_lo_and_its_address)
{
	static const struct net_portal p = { "tcp0", "127.0.0.1", false };
	struct net_reader *r;
	struct net_model m;
	const struct net_link *lo;
	size_t i;
	bool found = false;

	cr_assert_eq(net_reader_live_create(&r), 0);
	net_model_init(&m);
	cr_assert_eq(net_model_read(&m, r), 0);
	lo = net_model_link(&m, "lo");
	cr_assert_not_null(lo);
	cr_assert_eq(lo->arptype, ARPHRD_LOOPBACK);
	cr_assert_gt(lo->ifindex, 0);
	for (i = 0; i < m.naddrs; i++)
		if (m.addrs[i].family == AF_INET && !memcmp(m.addrs[i].addr, "\x7f\0\0\x01", 4) &&
		    !strcmp(m.addrs[i].ifname, "lo"))
			found = true;
	cr_assert(found, "127.0.0.1 not on lo");
	net_model_resolve(&m, &p, 1);
	cr_assert_str_eq(m.chains[0].netdev, "lo");
	cr_assert_eq(m.chains[0].rdma, -1);
	cr_assert_eq(net_judge(&m), 0);
	cr_assert_null(net_model_verdict(&m, "portal-no-address", NULL));
	net_model_fini(&m);
	net_reader_destroy(r);
}
