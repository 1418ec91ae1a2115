// SPDX-License-Identifier: MIT
/* The iSER datamover's device-free parts: the iSER header and Hello exchange (RFC 7145 §9), the
 * CM private data both ways (§5.1.3, as Linux sends it), the per-command STag table, a loop
 * round's work requests posted together (through a fake provider), and the transport as the
 * iSCSI layer sees it. The chunk pool has test_dmv_iser_pool.c. What needs an RDMA device
 * (QPs, RDMA Read/Write, teardown) runs in the VM suite tests/vm/guest/suite-iser.sh. A portal
 * on two loops is here too, without connections. */
#include <criterion/criterion.h>

#include "../../../gateway/dmv/dmv_iser.c"

Test(dmv_iser, parses_the_iser_header_big_endian)
{
	static const uint8_t b[ISER_HDR_LEN] = {
		0x1c, 0, 0, 0,				/* control, WSV | RSV */
		0x11, 0x22, 0x33, 0x44,			/* write STag */
		0x00, 0x00, 0x7f, 0x01, 0x02, 0x03, 0x04, 0x05,	/* write VA */
		0xaa, 0xbb, 0xcc, 0xdd,			/* read STag */
		0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99, 0x88,	/* read VA */
	};
	struct dmv_iser_hdr h;

	cr_assert_eq(dmv_iser_hdr_parse(b, sizeof(b), &h), 0);
	cr_assert_eq(h.opcode, ISER_OP_CTRL);
	cr_assert_eq(h.flags, ISER_WSV | ISER_RSV);
	cr_assert_eq(h.write_stag, 0x11223344u);
	cr_assert_eq(h.write_va, 0x00007f0102030405ull);
	cr_assert_eq(h.read_stag, 0xaabbccddu);
	cr_assert_eq(h.read_va, 0xffeeddccbbaa9988ull);
	/* A Send shorter than the header is not iSER. */
	cr_assert_eq(dmv_iser_hdr_parse(b, ISER_HDR_LEN - 1, &h), -EPROTO);
}

Test(dmv_iser, target_control_header_carries_no_stags)
{
	uint8_t b[ISER_HDR_LEN];
	size_t i;

	memset(b, 0xa5, sizeof(b));
	dmv_iser_hdr_build_ctrl(b);
	cr_assert_eq(b[0], 0x10);
	for (i = 1; i < sizeof(b); i++)
		cr_assert_eq(b[i], 0, "byte %zu", i);
}

Test(dmv_iser, hello_reply_accepts_version_1_and_rejects_others)
{
	uint8_t in[ISER_HDR_LEN] = { 0x20, 0x21 }, out[ISER_HDR_LEN];	/* max 2, min 1 */
	struct dmv_iser_hdr h;

	cr_assert_eq(dmv_iser_hdr_parse(in, sizeof(in), &h), 0);
	cr_assert_eq(h.opcode, ISER_OP_HELLO);
	dmv_iser_hdr_build_hello_reply(out, &h, 16);
	cr_assert_eq(out[0], 0x30, "HelloReply without the reject bit");
	cr_assert_eq(out[1], 0x11, "max version 1, current version 1");
	cr_assert_eq(pdu_get16(out, 2), 16, "ORD");

	in[1] = 0x22;	/* versions 2..2 only */
	cr_assert_eq(dmv_iser_hdr_parse(in, sizeof(in), &h), 0);
	dmv_iser_hdr_build_hello_reply(out, &h, 4);
	cr_assert_eq(out[0], 0x31, "rejected");
	cr_assert_eq(out[1] >> 4, 1, "still says which version it has");
}

Test(dmv_iser, cm_private_data_from_linux_and_others)
{
	static const uint8_t linux_hdr[4] = { 0xc0, 0, 0, 0 };	/* ZBVA + SEND_W_INV not sup */
	static const uint8_t inv_ok[4] = { 0x80, 0, 0, 0 };
	static const uint8_t longer[8] = { 0x40, 0, 0, 0, 1, 2, 3, 4 };
	struct dmv_iser_cm_info ci;

	dmv_iser_cm_parse(linux_hdr, sizeof(linux_hdr), &ci);
	cr_assert(ci.have_hdr && ci.zbva_not_sup && ci.send_inv_not_sup);
	dmv_iser_cm_parse(inv_ok, sizeof(inv_ok), &ci);
	cr_assert(ci.have_hdr && ci.zbva_not_sup);
	cr_assert_not(ci.send_inv_not_sup, "the initiator takes Send with Invalidate");
	dmv_iser_cm_parse(longer, sizeof(longer), &ci);
	cr_assert(ci.have_hdr && !ci.zbva_not_sup && ci.send_inv_not_sup);
	/* Nothing, or too little: no header, and no Send with Invalidate either. */
	dmv_iser_cm_parse(NULL, 0, &ci);
	cr_assert(!ci.have_hdr && ci.send_inv_not_sup);
	dmv_iser_cm_parse(linux_hdr, 3, &ci);
	cr_assert(!ci.have_hdr && ci.send_inv_not_sup);
}

/* A received Send: an iSER header, then a BHS of opcode op with ahs AHS words and dsl data
 * bytes announced, of which carried bytes follow. Returns its length. */
static uint32_t send_msg(uint8_t *b, uint8_t iser_flags, uint8_t op, uint8_t ahs, uint32_t dsl,
			 uint32_t carried)
{
	memset(b, 0, ISER_HDR_LEN + ISC_BHS_LEN + carried);
	b[0] = (uint8_t)(ISER_OP_CTRL << 4 | iser_flags);
	b[ISER_HDR_LEN] = op;
	b[ISER_HDR_LEN + 1] = 0x80;
	b[ISER_HDR_LEN + 4] = ahs;
	pdu_put24(b + ISER_HDR_LEN, 5, dsl);
	return ISER_HDR_LEN + ISC_BHS_LEN + carried;
}

/* What each received Send is taken for, and where the PDU's parts are. */
Test(dmv_iser, received_messages_judged_before_use)
{
	static uint8_t b[ISER_HDR_LEN + ISC_BHS_LEN + 1024];
	struct dmv_iser_msg m;
	uint32_t n;

	n = send_msg(b, 0, ISC_OP_NOP_OUT, 0, 16, 16);
	cr_assert_eq(dmv_iser_msg_parse(b, n, 8192, &m), ISER_MSG_PDU);
	cr_assert(m.bhs == b + ISER_HDR_LEN && m.ahs == m.bhs + ISC_BHS_LEN && m.data == m.ahs);
	cr_assert_eq(m.dsl, 16);
	/* One byte short of what the BHS says: the connection goes. */
	cr_assert_eq(dmv_iser_msg_parse(b, n - 1, 8192, &m), ISER_MSG_OVERRUN);
	cr_assert_eq(dmv_iser_msg_parse(b, ISER_HDR_LEN + ISC_BHS_LEN - 1, 8192, &m),
		     ISER_MSG_SHORT);
	cr_assert_eq(dmv_iser_msg_parse(b, ISER_HDR_LEN - 1, 8192, &m), ISER_MSG_NO_HDR);
	/* More data than MaxRecvDataSegmentLength: lengths not to be trusted. */
	cr_assert_eq(dmv_iser_msg_parse(b, n, 8, &m), ISER_MSG_BAD_BHS);
	cr_assert_not_null(m.why);
	b[0] = 0x50;
	cr_assert_eq(dmv_iser_msg_parse(b, n, 8192, &m), ISER_MSG_BAD_OPCODE);
	b[0] = (uint8_t)(ISER_OP_HELLO << 4);
	cr_assert_eq(dmv_iser_msg_parse(b, ISER_HDR_LEN, 8192, &m), ISER_MSG_HELLO);
	/* A Data-Out with an AHS (4 bytes, carried): the connection goes. */
	n = send_msg(b, 0, ISC_OP_DATA_OUT, 1, 8, 4 + 8);
	cr_assert_eq(dmv_iser_msg_parse(b, n, 8192, &m), ISER_MSG_DATAOUT_AHS);
	/* A target opcode from the initiator: answered with a Reject, parts in place. */
	n = send_msg(b, 0, ISC_OP_R2T, 0, 0, 0);
	cr_assert_eq(dmv_iser_msg_parse(b, n, 8192, &m), ISER_MSG_REJECT);
	cr_assert(m.bhs == b + ISER_HDR_LEN && m.reason);
	/* libiscsi 1.19's write: 512 bytes of immediate data announced, none carried, a write
	 * STag: taken, the data to come by RDMA Read. Without the STag it is an overrun. */
	n = send_msg(b, ISER_WSV, ISC_OP_SCSI_CMD, 0, 512, 0);
	cr_assert_eq(dmv_iser_msg_parse(b, n, 8192, &m), ISER_MSG_PDU);
	cr_assert(m.no_imm && m.dsl == 0);
	n = send_msg(b, 0, ISC_OP_SCSI_CMD, 0, 512, 0);
	cr_assert_eq(dmv_iser_msg_parse(b, n, 8192, &m), ISER_MSG_OVERRUN);
}

Test(dmv_iser, target_cm_private_data)
{
	uint8_t b[ISER_CM_HDR_LEN];

	dmv_iser_cm_build(b, true);
	cr_assert_eq(b[0], 0x80);
	cr_assert(!b[1] && !b[2] && !b[3]);
	dmv_iser_cm_build(b, false);
	cr_assert_eq(b[0], 0xc0);
}

/* The STag table against a plain array: inserts, replacements and deletions in random order,
 * with ITTs chosen to collide, must always find exactly what was recorded. */
Test(dmv_iser, stag_table_matches_a_reference)
{
	struct dmv_iser_tags tt = { .slot = calloc(ISER_TAGS, sizeof(struct dmv_iser_tag)) };
	enum { N = 3000 };
	static bool live[N];
	static uint32_t stag[N];
	uint32_t seed = 12345, i, k, nlive = 0;

	cr_assert_not_null(tt.slot);
	for (k = 0; k < 200000; k++) {
		struct dmv_iser_tag v = { 0 };

		seed = seed * 1103515245 + 12345;
		i = (seed >> 8) % N;
		/* ITTs i * ISER_TAGS would all hash alike without the multiplier; use a mix of
		 * spread and clustered values. */
		v.itt = (i & 1) ? i * ISER_TAGS : i;
		if ((seed >> 4) & 3) {
			v.rsv = true;
			v.read_stag = seed;
			cr_assert_eq(dmv_iser_tag_set(&tt, &v), 0);
			if (!live[i])
				nlive++;
			live[i] = true;
			stag[i] = seed;
		} else {
			dmv_iser_tag_del(&tt, v.itt);
			if (live[i])
				nlive--;
			live[i] = false;
		}
		if (k % 9973 == 0) {
			for (i = 0; i < N; i++) {
				struct dmv_iser_tag *e = dmv_iser_tag_find(&tt, (i & 1) ? i * ISER_TAGS : i);

				if (live[i]) {
					cr_assert_not_null(e, "ITT of %u lost", i);
					cr_assert_eq(e->read_stag, stag[i]);
				} else {
					cr_assert_null(e, "ITT of %u still there", i);
				}
			}
			cr_assert_eq(tt.n, nlive);
		}
	}
	free(tt.slot);
}

Test(dmv_iser, stag_table_full_says_so)
{
	struct dmv_iser_tags tt = { .slot = calloc(ISER_TAGS, sizeof(struct dmv_iser_tag)) };
	struct dmv_iser_tag v = { .wsv = true };
	uint32_t i;

	for (i = 0; i < ISER_TAGS; i++) {
		v.itt = i;
		cr_assert_eq(dmv_iser_tag_set(&tt, &v), 0);
	}
	v.itt = ISER_TAGS;
	cr_assert_eq(dmv_iser_tag_set(&tt, &v), -ENOSPC);
	v.itt = 7;	/* replacing an existing one still works */
	v.write_stag = 99;
	cr_assert_eq(dmv_iser_tag_set(&tt, &v), 0);
	cr_assert_eq(dmv_iser_tag_find(&tt, 7)->write_stag, 99);
	dmv_iser_tag_del(&tt, 3);
	v.itt = ISER_TAGS;
	cr_assert_eq(dmv_iser_tag_set(&tt, &v), 0, "room again after a delete");
	free(tt.slot);
}

Test(dmv_iser, registered_as_the_rdma_transport)
{
	const struct dmv_transport *tp = dmv_transport_find("iser");

	cr_assert_eq(tp, &dmv_iser_transport);
	cr_assert(tp->caps & DMV_CAP_RDMA);
	cr_assert_not(tp->caps & DMV_CAP_DIGESTS, "no iSCSI digests over RDMA");
	cr_assert_eq(tp->max_recv_dsl, ISER_RX_DSL);
	/* Every op the iSCSI layer calls is there (solicit is TCP's R2T machinery). */
	cr_assert(tp->listen && tp->portal_destroy && tp->send_pdu && tp->put_data &&
		  tp->get_data && tp->task_abort && tp->set_params && tp->close);
}

Test(dmv_iser, params_stay_within_the_message_buffers)
{
	struct dmv_conn c;
	struct dmv_conn_params p = {
		.header_digest = true, .max_recv_dsl = 262144, .max_xmit_dsl = 1 << 20,
		.max_burst_length = 1 << 20,
	};

	memset(&c, 0, sizeof(c));
	cr_assert_eq(iser_set_params(&c, &p), 0);
	cr_assert_eq(c.params.max_recv_dsl, ISER_RX_DSL);
	cr_assert_eq(c.params.max_xmit_dsl, ISER_RX_DSL);
	cr_assert_not(c.params.header_digest);
	cr_assert_eq(c.params.max_burst_length, 1u << 20);
	p.max_recv_dsl = 4096;
	p.max_xmit_dsl = 2048;
	iser_set_params(&c, &p);
	cr_assert_eq(c.params.max_recv_dsl, 4096);
	cr_assert_eq(c.params.max_xmit_dsl, 2048);
}

/* The accept's RDMA Read depths from a CONNECT_REQUEST as rdma_cm reports it at the target:
 * the initiator_depth offered is how many Reads the target may have in flight. Linux's iser
 * offers its device's max_qp_rd_atom (rxe: 128) and asks for 1 itself; the target must then
 * keep ISER_READS_MAX Reads in flight, not 1 (the old reading waited out each 256 KiB chunk of
 * a large write before asking for the next). */
Test(dmv_iser, read_depths_follow_what_the_initiator_serves)
{
	struct ibv_device_attr attr = { .max_qp_rd_atom = 128, .max_qp_init_rd_atom = 128 };
	struct rdma_conn_param req = { .initiator_depth = 128, .responder_resources = 1 };
	struct rdma_conn_param cp = { 0 };

	iser_read_depths(&req, &attr, &cp);
	cr_assert_eq(cp.initiator_depth, ISER_READS_MAX, "Reads in flight");
	cr_assert_eq(cp.responder_resources, 1, "the initiator's own Reads");
	/* libiscsi offers 4 and asks for 1. */
	req.initiator_depth = 4;
	iser_read_depths(&req, &attr, &cp);
	cr_assert_eq(cp.initiator_depth, 4);
	/* The target's device bounds both; an initiator serving none still gets one at a time. */
	attr.max_qp_init_rd_atom = 2;
	attr.max_qp_rd_atom = 1;
	req.initiator_depth = 128;
	req.responder_resources = 8;
	iser_read_depths(&req, &attr, &cp);
	cr_assert_eq(cp.initiator_depth, 2);
	cr_assert_eq(cp.responder_resources, 1);
	req.initiator_depth = 0;
	iser_read_depths(&req, &attr, &cp);
	cr_assert_eq(cp.initiator_depth, 1);
}

/* Without any RDMA device or rdma_cm (this machine), listening still yields a portal that
 * says it is not listening and retries, rather than failing the gateway. */
Test(dmv_iser, listen_without_a_device_is_not_fatal)
{
	struct gw_loop loop;
	struct pdu_pool pool;
	struct dmv_portal_conf conf = { .name = "iser0", .address = "127.0.0.1", .port = 3260 };
	struct dmv_portal *p = NULL;
	int r;

	cr_assert_eq(gw_loop_init(&loop), 0);
	pdu_pool_init(&pool, 0);
	r = dmv_listen("iser", &loop, &conf, &pool, &p);
	if (r == 0) {
		cr_assert_not_null(p);
		cr_assert_eq(p->tp, &dmv_iser_transport);
		if (!p->listening)
			cr_assert_neq(((struct iser_portal *)p)->last_err[0], 0,
				      "the reason was kept for the log");
		dmv_portal_destroy(p);
	} else {
		/* No rdma_cm device node at all: a clear error, nothing to clean up. */
		cr_assert_null(p);
		cr_assert_lt(r, 0);
	}
	conf.address = "not-an-address";
	p = NULL;
	cr_assert_eq(dmv_listen("iser", &loop, &conf, &pool, &p), -EINVAL);
	cr_assert_null(p);
	pdu_pool_fini(&pool);
	gw_loop_fini(&loop);
}

/* With the gateway's loops (issue 13), a portal keeps per loop its devices, connections and
 * counters (loop 0's are the portal's own); the listener stays on loop 0. Destroying the portal
 * lets go of each loop's objects on that loop, after any connect request handed to it. Nothing
 * here needs a device; connections placed on loop 1 run in the VM (suite-iser-loops.sh). */
static int on_loop_fn(void *arg)
{
	*(struct gw_loop **)arg = gw_loop_current();
	return 0;
}

Test(dmv_iser_loops, a_portal_keeps_each_loops_objects_apart)
{
	struct gw_loop loop0, loop1, *ran = NULL;
	struct gw_loops loops = { .n = 2, .loop = { &loop0, &loop1 } };
	struct pdu_pool pool;
	struct dmv_portal_conf conf = { .name = "iser0", .address = "127.0.0.1", .port = 3260,
					.loops = &loops };
	struct dmv_portal *p = NULL;
	struct iser_portal *ip;
	struct iser_dev *d = calloc(1, sizeof(*d));

	cr_assert_not_null(d);
	cr_assert_eq(gw_loop_init(&loop0), 0);
	cr_assert_eq(gw_loop_init(&loop1), 0);
	cr_assert_eq(gw_loop_thread_start(&loop1, -1, "test-iser-l1"), 0);
	pdu_pool_init(&pool, 0);
	cr_assert_eq(dmv_listen("iser", &loop0, &conf, &pool, &p), 0);
	ip = gw_container_of(p, struct iser_portal, base);
	cr_assert_eq(ip->nloops, 2);
	cr_assert_eq(ip->loops, &loops);
	cr_expect_eq(ip->pl[0].loop, &loop0);
	cr_expect_eq(ip->pl[1].loop, &loop1);
	cr_expect_eq(ip->pl[0].res, &p->res, "loop 0 counts into the portal's own counters");
	cr_expect_eq(ip->pl[1].res, &ip->pl[1].own_res);
	/* A device of loop 1's pool, with a connection still using it. */
	d->refs = 1;
	d->res = ip->pl[1].res;
	d->res->conns = 1;
	gw_list_add_tail(&ip->pl[1].devs, &d->node);
	/* A re-home drops each loop's connections on that loop (none here). */
	cr_expect_eq(dmv_iser_transport.rehome(p, true), 0);
	dmv_portal_destroy(p);
	cr_expect(gw_list_empty(&d->node), "loop 1's device left the portal");
	cr_expect_eq(d->res, &d->own_res, "and counts into its own totals");
	cr_expect_eq(d->own_res.conns, 1);
	/* The loops are still usable: nothing of the portal is left on loop 1. */
	cr_expect_eq(gw_loop_call(&loop1, on_loop_fn, &ran), 0);
	cr_expect_eq(ran, &loop1);
	cr_expect_eq(gw_loop_thread_stop(&loop1), 0);
	free(d);

	/* A listener given to another loop than loop 0 keeps every connection on it. */
	p = NULL;
	cr_assert_eq(dmv_listen("iser", &loop1, &conf, &pool, &p), 0);
	ip = gw_container_of(p, struct iser_portal, base);
	cr_expect_eq(ip->nloops, 1);
	cr_expect_null(ip->loops);
	cr_expect_eq(ip->pl[0].loop, &loop1);
	dmv_portal_destroy(p);
	/* One loop: today's portal. */
	loops.n = 1;
	p = NULL;
	cr_assert_eq(dmv_listen("iser", &loop0, &conf, &pool, &p), 0);
	ip = gw_container_of(p, struct iser_portal, base);
	cr_expect_eq(ip->nloops, 1);
	cr_expect_null(ip->loops);
	cr_expect_eq(ip->pl[0].res, &p->res);
	dmv_portal_destroy(p);
	pdu_pool_fini(&pool);
	gw_loop_fini(&loop1);
	gw_loop_fini(&loop0);
}

/* Send work requests of a loop round reach the provider in one ibv_post_send, in order, when
 * the round ends. A fake provider (the context's post_send) records what it was given. */
static int fake_posts;
static uint64_t fake_ids[8];
static int fake_nids;
static int fake_refuse_from = -1;	/* refuse the chain from this index on */

static int fake_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	int i = 0;

	(void)qp;
	fake_posts++;
	for (; wr; wr = wr->next, i++) {
		if (i == fake_refuse_from) {
			*bad = wr;
			return ENOMEM;
		}
		cr_assert_lt(fake_nids, 8);
		fake_ids[fake_nids++] = wr->wr_id;
	}
	return 0;
}

struct fake_qp {
	struct ibv_context ctx;
	struct ibv_qp qp;
};

static struct iser_conn *batch_conn(struct gw_loop *loop, struct fake_qp *f)
{
	struct iser_conn *ic = calloc(1, sizeof(*ic));
	uint32_t i;

	memset(f, 0, sizeof(*f));
	f->ctx.ops.post_send = fake_post_send;
	f->qp.context = &f->ctx;
	ic->qp = &f->qp;
	ic->base.loop = loop;
	ic->state = IC_UP;
	snprintf(ic->base.peer, sizeof(ic->base.peer), "test");
	gw_list_init(&ic->tx_free);
	gw_list_init(&ic->txq);
	gw_list_init(&ic->dnode);
	for (i = 0; i < ISER_NTX; i++)
		ic->tx[i].wr.kind = WR_TX;
	gw_defer_init(&ic->kick, iser_kick_deferred);
	gw_defer_init(&ic->post_defer, iser_post_deferred);
	return ic;
}

static void queue_send(struct iser_conn *ic, struct iser_tx *tx)
{
	static uint8_t buf[64];
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = sizeof(buf) };
	struct ibv_send_wr wr = { .wr_id = (uintptr_t)&tx->wr, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND };

	cr_assert_eq(iser_post_send(ic, &wr), 0);
	ic->tx_busy++;
}

static struct gw_loop loop;
static struct fake_qp f;
static struct iser_conn *ic;

static void batch_setup(void)
{
	cr_assert_eq(gw_loop_init(&loop), 0);
	ic = batch_conn(&loop, &f);
}

static void batch_teardown(void)
{
	gw_defer_cancel(&ic->post_defer);
	free(ic);
	gw_loop_fini(&loop);
}

TestSuite(dmv_iser_batch, .init = batch_setup, .fini = batch_teardown);

Test(dmv_iser_batch, a_rounds_send_work_requests_go_in_one_post_in_order)
{
	int i;

	for (i = 0; i < 3; i++)
		queue_send(ic, &ic->tx[i]);
	cr_expect_eq(fake_posts, 0, "nothing reaches the provider before the round ends");
	cr_expect_eq(ic->posted, 3);
	gw_loop_run_once(&loop, 0);
	cr_assert_eq(fake_posts, 1, "one post for the round");
	cr_assert_eq(fake_nids, 3);
	for (i = 0; i < 3; i++)
		cr_expect_eq(fake_ids[i], (uintptr_t)&ic->tx[i].wr, "in the order queued");
	gw_loop_run_once(&loop, 0);
	cr_expect_eq(fake_posts, 1, "and none when nothing is queued");
}

/* The provider refuses part of the chain: what it did not take completes as flushed (its send
 * slot comes back), and the connection is lost. */
Test(dmv_iser_batch, work_requests_the_provider_refuses_complete_as_flushed)
{
	int i;

	fake_refuse_from = 1;
	for (i = 0; i < 3; i++)
		queue_send(ic, &ic->tx[i]);
	gw_loop_run_once(&loop, 0);
	cr_expect_eq(fake_posts, 1);
	cr_expect_eq(fake_nids, 1, "the first was taken");
	cr_expect_eq(ic->posted, 1, "only the one taken is still to complete");
	cr_expect_eq(ic->tx_busy, 1, "the refused ones' send slots are free again");
	cr_expect(ic->base.lost, "the connection is lost");
	cr_expect_neq(iser_post_send(ic, &(struct ibv_send_wr){ .num_sge = 1 }), 0,
		      "nothing more is queued on it");
}
