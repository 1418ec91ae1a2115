// SPDX-License-Identifier: MIT
/*
 * The iSER datamover on two of the gateway's loops against a real RDMA device: only the VM
 * suite tests/vm/guest/suite-iser-loops.sh runs it (ISER_LIVE_ADDR: an address with a
 * Soft-RoCE device); in the unit run its one test is skipped (tests/allowed-skips.txt).
 *
 * A portal listens on loop 0 (this thread) with loop 1 on a thread of its own. Two rdma_cm
 * clients connect, one after the other: the first goes to loop 0 (both loops empty: the lowest
 * index), the second to loop 1 (loop 0 has one). Each connection is accepted on its own loop's
 * thread, with its own device pool there, and counted in the loops' load; once the clients
 * disconnect, every loop's QPs, registrations and chunks are back to zero and so is the load.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "../../../gateway/dmv/dmv_iser_int.h"
#include "pdu.h"

#define LIVE_PORT 3270
#define LIVE_WAIT_MS 20000

struct live_accept {
	struct gw_loop *on;		/* the loop whose thread ran accept */
	struct gw_loop *conn_loop;	/* the connection's loop */
	unsigned li;
	int seen;			/* atomic */
};

static struct live_accept accepted[2];
static int naccepted;		/* atomic */

static void live_lost(struct dmv_conn *c, int err)
{
	(void)err;
	c->tp->close(c);
}

static const struct dmv_conn_cb live_cb = { .lost = live_lost };

/* On the connection's loop. */
static void live_accept_fn(struct dmv_portal *p, struct dmv_conn *c)
{
	int i = __atomic_load_n(&naccepted, __ATOMIC_RELAXED);
	struct iser_conn *ic = gw_container_of(c, struct iser_conn, base);

	(void)p;
	if (i < 2) {
		accepted[i].on = gw_loop_current();
		accepted[i].conn_loop = c->loop;
		accepted[i].li = ic->li;
		__atomic_store_n(&accepted[i].seen, 1, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&naccepted, i + 1, __ATOMIC_RELEASE);
	c->cb = &live_cb;
}

struct live_client {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_cq *cq;
};

/* Runs loop 0 until the client's next rdma_cm event; true if it is `want`. */
static bool live_wait(struct gw_loop *l0, struct live_client *cl, enum rdma_cm_event_type want)
{
	uint64_t end = gw_now_ms() + LIVE_WAIT_MS;
	struct rdma_cm_event *ev;

	while (gw_now_ms() < end) {
		gw_loop_run_once(l0, 10);
		if (rdma_get_cm_event(cl->ch, &ev))
			continue;
		enum rdma_cm_event_type type = ev->event;
		int status = ev->status;

		rdma_ack_cm_event(ev);
		if (type != want)
			cr_log_error("client: %s (status %d), waiting for %s", rdma_event_str(type),
				     status, rdma_event_str(want));
		return type == want;
	}
	cr_log_error("client: no %s in %d ms", rdma_event_str(want), LIVE_WAIT_MS);
	return false;
}

static void live_connect(struct gw_loop *l0, struct live_client *cl, const char *addr)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(LIVE_PORT) };
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 4, .max_recv_wr = 4,
						.max_send_sge = 1, .max_recv_sge = 1 } };
	uint8_t hdr[ISER_CM_HDR_LEN] = { ISER_CM_ZBVA_NOT_SUP };
	struct rdma_conn_param cp = { .responder_resources = 4, .initiator_depth = 1,
				      .retry_count = 7, .rnr_retry_count = 7,
				      .private_data = hdr, .private_data_len = sizeof(hdr) };

	cr_assert_eq(inet_pton(AF_INET, addr, &sin.sin_addr), 1, "ISER_LIVE_ADDR %s", addr);
	cl->ch = rdma_create_event_channel();
	cr_assert_not_null(cl->ch);
	cr_assert_eq(fcntl(cl->ch->fd, F_SETFL, fcntl(cl->ch->fd, F_GETFL) | O_NONBLOCK), 0);
	cr_assert_eq(rdma_create_id(cl->ch, &cl->id, NULL, RDMA_PS_TCP), 0);
	cr_assert_eq(rdma_resolve_addr(cl->id, NULL, (struct sockaddr *)&sin, 2000), 0);
	cr_assert(live_wait(l0, cl, RDMA_CM_EVENT_ADDR_RESOLVED));
	cr_assert_eq(rdma_resolve_route(cl->id, 2000), 0);
	cr_assert(live_wait(l0, cl, RDMA_CM_EVENT_ROUTE_RESOLVED));
	cl->cq = ibv_create_cq(cl->id->verbs, 16, NULL, NULL, 0);
	cr_assert_not_null(cl->cq);
	qa.send_cq = cl->cq;
	qa.recv_cq = cl->cq;
	cr_assert_eq(rdma_create_qp(cl->id, NULL, &qa), 0);
	cr_assert_eq(rdma_connect(cl->id, &cp), 0);
	cr_assert(live_wait(l0, cl, RDMA_CM_EVENT_ESTABLISHED));
}

static void live_disconnect(struct gw_loop *l0, struct live_client *cl)
{
	cr_assert_eq(rdma_disconnect(cl->id), 0);
	cr_expect(live_wait(l0, cl, RDMA_CM_EVENT_DISCONNECTED));
	rdma_destroy_qp(cl->id);
	ibv_destroy_cq(cl->cq);
	rdma_destroy_id(cl->id);
	rdma_destroy_event_channel(cl->ch);
}

/* Waits (running loop 0) until the i-th accept was seen. */
static bool live_accepted(struct gw_loop *l0, int i)
{
	uint64_t end = gw_now_ms() + LIVE_WAIT_MS;

	while (gw_now_ms() < end) {
		if (__atomic_load_n(&accepted[i].seen, __ATOMIC_ACQUIRE))
			return true;
		gw_loop_run_once(l0, 10);
	}
	return false;
}

struct live_res {
	struct iser_portal *ip;
	unsigned li;
	struct dmv_portal_res res;
	bool devs;
};

/* On loop li: a copy of its counters. */
static int live_res_fn(void *arg)
{
	struct live_res *r = arg;

	r->res = *r->ip->pl[r->li].res;
	r->devs = !gw_list_empty(&r->ip->pl[r->li].devs);
	return 0;
}

/* Waits until every loop's connections, QPs, registrations and load are back to zero. */
static bool live_all_released(struct gw_loop *l0, struct gw_loops *loops, struct iser_portal *ip)
{
	uint64_t end = gw_now_ms() + LIVE_WAIT_MS;
	unsigned i;

	while (gw_now_ms() < end) {
		bool zero = true;

		gw_loop_run_once(l0, 10);
		for (i = 0; i < loops->n; i++) {
			struct live_res r = { .ip = ip, .li = i };

			gw_loop_call(loops->loop[i], live_res_fn, &r);
			if (r.res.conns || r.res.qps || r.res.mrs || r.res.bufs ||
			    r.res.reg_bytes || r.devs ||
			    __atomic_load_n(&loops->load[i], __ATOMIC_RELAXED))
				zero = false;
		}
		if (zero)
			return true;
	}
	return false;
}

Test(iser_live, connections_go_to_the_least_loaded_loop)
{
	const char *addr = getenv("ISER_LIVE_ADDR");
	struct gw_loop loop0, loop1;
	struct gw_loops loops = { .n = 2, .loop = { &loop0, &loop1 } };
	struct pdu_pool pool;
	struct dmv_portal_conf conf = { .name = "iser-live", .port = LIVE_PORT, .loops = &loops };
	struct dmv_portal *p = NULL;
	struct live_client a, b;
	struct live_res r1;
	struct iser_portal *ip;

	if (!addr || !*addr)
		cr_skip_test("ISER_LIVE_ADDR not set");
	conf.address = addr;
	cr_assert_eq(gw_loop_init(&loop0), 0);
	cr_assert_eq(gw_loop_init(&loop1), 0);
	cr_assert_eq(gw_loop_thread_start(&loop1, -1, "iser-live-l1"), 0);
	pdu_pool_init(&pool, 0);
	cr_assert_eq(dmv_listen("iser", &loop0, &conf, &pool, &p), 0);
	cr_assert(p->listening, "no RDMA device on %s", addr);
	p->accept = live_accept_fn;
	ip = gw_container_of(p, struct iser_portal, base);

	live_connect(&loop0, &a, addr);
	cr_assert(live_accepted(&loop0, 0), "the first connection was never accepted");
	cr_expect_eq(accepted[0].on, &loop0, "both loops empty: loop 0 takes it");
	cr_expect_eq(accepted[0].conn_loop, &loop0);
	cr_expect_eq(accepted[0].li, 0);
	cr_expect_eq(p->res.conns, 1, "loop 0's counters are the portal's own");

	live_connect(&loop0, &b, addr);
	cr_assert(live_accepted(&loop0, 1), "the second connection was never accepted");
	cr_expect_eq(accepted[1].on, &loop1, "accepted on loop 1's thread");
	cr_expect_eq(accepted[1].conn_loop, &loop1, "the connection belongs to loop 1");
	cr_expect_eq(accepted[1].li, 1);
	cr_expect_eq(__atomic_load_n(&loops.load[0], __ATOMIC_RELAXED), 1);
	cr_expect_eq(__atomic_load_n(&loops.load[1], __ATOMIC_RELAXED), 1);
	r1 = (struct live_res){ .ip = ip, .li = 1 };
	cr_assert_eq(gw_loop_call(&loop1, live_res_fn, &r1), 0);
	cr_expect_eq(r1.res.conns, 1, "loop 1 counts its connection");
	cr_expect_eq(r1.res.qps, 1);
	cr_expect(r1.devs && r1.res.bufs > 0, "loop 1 has a device pool of its own");
	cr_expect_eq(p->res.conns, 1, "loop 0 still has only its own");

	live_disconnect(&loop0, &a);
	live_disconnect(&loop0, &b);
	cr_expect(live_all_released(&loop0, &loops, ip),
		  "QPs, registrations, chunks or load left after both clients disconnected");
	dmv_portal_destroy(p);
	cr_expect_eq(gw_loop_thread_stop(&loop1), 0);
	pdu_pool_fini(&pool);
	gw_loop_fini(&loop1);
	gw_loop_fini(&loop0);
}
