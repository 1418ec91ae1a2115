// SPDX-License-Identifier: MIT
/* The transport registry (dmv.c): a portal's configured transport name reaches that transport's
 * table, and a name this build does not have is refused without a portal, for the caller to
 * decide whether that is fatal. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "dmv.h"

Test(dmv, each_transport_is_found_by_its_configured_name)
{
	const struct dmv_transport *tcp = dmv_transport_find("tcp");
	const struct dmv_transport *iser = dmv_transport_find("iser");

	cr_assert_eq(tcp, &dmv_tcp_transport);
	cr_assert_eq(iser, &dmv_iser_transport);
	cr_expect_str_eq(tcp->name, "tcp");
	cr_expect_str_eq(iser->name, "iser");
	cr_expect(iser->caps & DMV_CAP_RDMA, "iSER may negotiate RDMAExtensions");
	cr_expect_not(tcp->caps & DMV_CAP_RDMA);
}

Test(dmv, an_unknown_name_finds_nothing)
{
	cr_expect_null(dmv_transport_find("TCP"), "names are exact");
	cr_expect_null(dmv_transport_find("fc"));
	cr_expect_null(dmv_transport_find(""));
}

Test(dmv, listening_on_an_unknown_transport_is_refused_without_a_portal)
{
	struct dmv_portal_conf pc = { .name = "p", .address = "127.0.0.1", .port = 0 };
	struct dmv_portal *p = NULL;
	struct pdu_pool pool;
	struct gw_loop loop;

	cr_assert_eq(gw_loop_init(&loop), 0);
	pdu_pool_init(&pool, 0);
	cr_expect_eq(dmv_listen("fc", &loop, &pc, &pool, &p), -EPROTONOSUPPORT);
	cr_expect_null(p);
	pdu_pool_fini(&pool);
	gw_loop_fini(&loop);
}

Test(dmv, listening_on_tcp_gives_a_portal_of_the_tcp_transport)
{
	struct dmv_portal_conf pc = { .name = "p", .address = "127.0.0.1", .port = 0 };
	struct dmv_portal *p = NULL;
	struct pdu_pool pool;
	struct gw_loop loop;

	cr_assert_eq(gw_loop_init(&loop), 0);
	pdu_pool_init(&pool, 0);
	cr_assert_eq(dmv_listen("tcp", &loop, &pc, &pool, &p), 0);
	cr_assert_not_null(p);
	cr_expect_eq(p->tp, &dmv_tcp_transport);
	cr_expect(p->listening);
	cr_expect(strncmp(p->addr, "127.0.0.1:", 10) == 0, "bound at %s", p->addr);
	dmv_portal_destroy(p);
	gw_loop_run_once(&loop, 0);
	pdu_pool_fini(&pool);
	gw_loop_fini(&loop);
}
