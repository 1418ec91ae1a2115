// SPDX-License-Identifier: MIT
/* The TCP datamover over a socketpair: PDU framing with padding and CRC32C digests both ways,
 * Data-In splitting and status collapse, R2T + Data-Out straight into the task buffer. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../../gateway/dmv/dmv_tcp.c"

static struct gw_loop loop;
static struct pdu_pool pool;
static struct tcp_conn *tc;
static int peer;
static struct pdu *got[8];
static int ngot, lost_err, task_done_status = 99, task_dones;
static struct dmv_task *the_task;
static uint8_t rejected_reason;

static void cb_rx(struct dmv_conn *c, struct pdu *pdu)
{
	(void)c;
	pdu_ref(pdu);
	if (ngot < 8)
		got[ngot++] = pdu;
	else
		pdu_put(pdu);
}

static struct dmv_task *cb_find(struct dmv_conn *c, uint32_t itt)
{
	(void)c;
	return the_task && the_task->itt == itt ? the_task : NULL;
}

static void cb_stamp(struct dmv_conn *c, uint8_t *bhs)
{
	(void)c;
	pdu_put32(bhs, 24, 100);
	pdu_put32(bhs, 28, 200);
	pdu_put32(bhs, 32, 300);
}

static void cb_reject(struct dmv_conn *c, const uint8_t *bhs, uint8_t reason)
{
	(void)c;
	(void)bhs;
	rejected_reason = reason;
}

static bool conn_closed;

static void cb_lost(struct dmv_conn *c, int err)
{
	lost_err = err;
	conn_closed = true;	/* freed after this loop round: teardown must not look at it */
	dmv_conn_close(c);
}

static const struct dmv_conn_cb cbs = {
	.rx_pdu = cb_rx, .find_task = cb_find, .stamp = cb_stamp, .reject = cb_reject,
	.lost = cb_lost,
};

static void setup(void)
{
	int sv[2];

	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	cr_assert_eq(gw_loop_init(&loop), 0);
	pdu_pool_init(&pool, 0);
	tc = calloc(1, sizeof(*tc));
	tc->rx_stage = malloc(TCP_STAGE_LEN);
	tc->base.tp = &dmv_tcp_transport;
	tc->base.loop = &loop;
	tc->base.pool = &pool;
	tc->base.cb = &cbs;
	tc->base.next_ttt = 1;
	strcpy(tc->base.peer, "socketpair");
	dmv_conn_params_login(&tc->base.params);
	gw_list_init(&tc->txq);
	gw_defer_init(&tc->flush, tcp_flush_deferred);
	gw_watch_init(&tc->w, &loop, sv[0], tcp_conn_event);
	tcp_rx_reset(tc);
	cr_assert_eq(gw_watch_set(&tc->w, EPOLLIN), 0);
	peer = sv[1];
	ngot = 0;
	lost_err = 0;
	the_task = NULL;
	task_dones = 0;
	task_done_status = 99;
	rejected_reason = 0;
	conn_closed = false;
}

static void teardown(void)
{
	for (int i = 0; i < ngot; i++)
		pdu_put(got[i]);
	if (!conn_closed)
		tcp_close(&tc->base);
	gw_loop_fini(&loop);
	pdu_pool_fini(&pool);
	close(peer);
}

TestSuite(dmv_tcp, .init = setup, .fini = teardown);

static void spin(void)
{
	for (int i = 0; i < 20; i++)
		gw_loop_run_once(&loop, 5);
}

static void digests_on(void)
{
	struct dmv_conn_params p = tc->base.params;

	p.header_digest = true;
	p.data_digest = true;
	dmv_conn_set_params(&tc->base, &p);
}

static void put_le32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);	/* little-endian host, as the transport assumes */
}

/* A wire PDU with digests: bhs + hdig + data + pad + ddig. Returns its length. */
static size_t wire_pdu(uint8_t *out, const uint8_t *bhs, const void *data, uint32_t len,
		       bool hd, bool dd)
{
	size_t n = 0;
	uint32_t pad = pdu_pad4(len) - len;

	memcpy(out, bhs, ISC_BHS_LEN);
	pdu_put24(out, 5, len);
	n = ISC_BHS_LEN;
	if (hd) {
		put_le32(out + n, gw_crc32c(0, out, ISC_BHS_LEN));
		n += 4;
	}
	if (len)
		memcpy(out + n, data, len);
	memset(out + n + len, 0, pad);
	if (dd && len) {
		put_le32(out + n + len + pad, gw_crc32c(0, out + n, len + pad));
		n += 4;
	}
	return n + len + pad;
}

Test(dmv_tcp, crc32c_matches_rfc7143_example_on_the_wire)
{
	uint8_t zeros[32] = { 0 }, wire[4];

	put_le32(wire, gw_crc32c(0, zeros, sizeof(zeros)));
	/* RFC 7143 B.4: 32 bytes of zeroes -> aa 36 91 8a */
	cr_expect_eq(wire[0], 0xaa);
	cr_expect_eq(wire[1], 0x36);
	cr_expect_eq(wire[2], 0x91);
	cr_expect_eq(wire[3], 0x8a);
}

Test(dmv_tcp, receives_padded_pdu_with_digests_in_dribbles)
{
	uint8_t bhs[ISC_BHS_LEN] = { ISC_OP_TEXT_REQ | ISC_BHS_I, ISC_FL_F }, wire[128];
	size_t n;

	digests_on();
	pdu_put32(bhs, 16, 0xabc);
	n = wire_pdu(wire, bhs, "a=b\0c", 5, true, true);
	cr_assert_eq(n, 48 + 4 + 8 + 4);
	/* One byte at a time: every state of the receiver meets a partial read. */
	for (size_t i = 0; i < n; i++) {
		cr_assert_eq(write(peer, wire + i, 1), 1);
		gw_loop_run_once(&loop, 0);
	}
	spin();
	cr_assert_eq(ngot, 1);
	cr_expect_eq(pdu_bhs_itt(got[0]->bhs), 0xabc);
	cr_assert_eq(got[0]->data_len, 5);
	cr_expect_eq(memcmp(got[0]->data, "a=b\0c", 5), 0);
	cr_expect_eq(lost_err, 0);
}

Test(dmv_tcp, several_pdus_in_one_read)
{
	uint8_t bhs[ISC_BHS_LEN] = { ISC_OP_NOP_OUT | ISC_BHS_I, ISC_FL_F }, wire[1024];
	size_t n = 0;

	for (uint32_t i = 0; i < 5; i++) {
		pdu_put32(bhs, 16, i);
		n += wire_pdu(wire + n, bhs, "xyz", 3, false, false);
	}
	cr_assert_eq(write(peer, wire, n), (ssize_t)n);
	spin();
	cr_assert_eq(ngot, 5);
	for (int i = 0; i < 5; i++)
		cr_expect_eq(pdu_bhs_itt(got[i]->bhs), (uint32_t)i);
}

Test(dmv_tcp, bad_header_digest_drops_the_connection)
{
	uint8_t bhs[ISC_BHS_LEN] = { ISC_OP_NOP_OUT | ISC_BHS_I, ISC_FL_F }, wire[128];
	size_t n;

	digests_on();
	n = wire_pdu(wire, bhs, NULL, 0, true, true);
	wire[ISC_BHS_LEN] ^= 1;
	cr_assert_eq(write(peer, wire, n), (ssize_t)n);
	spin();
	cr_expect_eq(ngot, 0);
	cr_expect_eq(lost_err, -EBADMSG);
}

Test(dmv_tcp, bad_data_digest_is_rejected_and_the_stream_goes_on)
{
	uint8_t bhs[ISC_BHS_LEN] = { ISC_OP_NOP_OUT | ISC_BHS_I, ISC_FL_F }, wire[256];
	size_t n, n1;

	digests_on();
	n1 = wire_pdu(wire, bhs, "data", 4, true, true);
	wire[n1 - 1] ^= 0x80;
	n = n1 + wire_pdu(wire + n1, bhs, "next", 4, true, true);
	cr_assert_eq(write(peer, wire, n), (ssize_t)n);
	spin();
	cr_expect_eq(rejected_reason, ISC_REJ_DATA_DIGEST, "Reject, Data (payload) Digest Error");
	cr_assert_eq(ngot, 1, "the bad PDU is discarded, the next one arrives");
	cr_expect_eq(memcmp(got[0]->data, "next", 4), 0);
	cr_expect_eq(lost_err, 0, "the connection stays");
}

Test(dmv_tcp, oversized_segment_drops_the_connection)
{
	uint8_t bhs[ISC_BHS_LEN] = { ISC_OP_SCSI_CMD, ISC_FL_F | ISC_FL_W };

	pdu_put24(bhs, 5, 8192 + 4);	/* login-time limit is 8192 */
	cr_assert_eq(write(peer, bhs, sizeof(bhs)), (ssize_t)sizeof(bhs));
	spin();
	cr_expect_eq(lost_err, -EPROTO);
}

Test(dmv_tcp, unknown_opcode_is_rejected_after_its_data_is_skipped)
{
	uint8_t bhs[ISC_BHS_LEN] = { 0x1d, ISC_FL_F }, wire[256];
	uint8_t nop[ISC_BHS_LEN] = { ISC_OP_NOP_OUT | ISC_BHS_I, ISC_FL_F };
	size_t n;

	n = wire_pdu(wire, bhs, "garbage!!", 9, false, false);
	n += wire_pdu(wire + n, nop, NULL, 0, false, false);
	cr_assert_eq(write(peer, wire, n), (ssize_t)n);
	spin();
	cr_expect_eq(rejected_reason, ISC_REJ_CMD_NOT_SUPPORTED);
	cr_assert_eq(ngot, 1, "the stream stays in sync: the next PDU arrives");
	cr_expect_eq(pdu_bhs_opcode(got[0]->bhs), ISC_OP_NOP_OUT);
	cr_expect_eq(lost_err, 0);
}

Test(dmv_tcp, sends_pdu_with_digests_and_zero_padding)
{
	struct pdu *pdu = pdu_get(&pool);
	uint8_t wire[256];
	uint32_t crc;
	ssize_t n;

	digests_on();
	pdu->bhs[0] = ISC_OP_TEXT_RSP;
	pdu->bhs[1] = ISC_FL_F;
	pdu_set_data(pdu, "k=v\0z", 5);
	cr_assert_eq(dmv_send_pdu(&tc->base, pdu), 0);
	spin();
	n = read(peer, wire, sizeof(wire));
	cr_assert_eq(n, 48 + 4 + 8 + 4);
	crc = gw_crc32c(0, wire, 48);
	cr_expect_eq(memcmp(&crc, wire + 48, 4), 0, "header digest");
	cr_expect_eq(pdu_bhs_dsl(wire), 5);
	cr_expect_eq(memcmp(wire + 52, "k=v\0z\0\0\0", 8), 0, "zero padding");
	crc = gw_crc32c(0, wire + 52, 8);
	cr_expect_eq(memcmp(&crc, wire + 60, 4), 0, "data digest over data and padding");
}

static void task_done(struct dmv_task *t, int status)
{
	(void)t;
	task_dones++;
	task_done_status = status;
}

Test(dmv_tcp, put_data_splits_by_mrdsl_and_collapses_status)
{
	static uint8_t buf[20000];
	struct dmv_task t;
	struct pdu *rsp = pdu_get(&pool);
	uint8_t wire[4 * (48 + 8192)];
	uint8_t lun[8] = { 0 };
	size_t have = 0, off = 0;
	int pdus = 0;
	ssize_t n;

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)i;
	memset(&t, 0, sizeof(t));
	t.buf = buf;
	t.len = sizeof(buf);
	t.done = task_done;
	dmv_task_init(&t, &tc->base, 0x55, lun);
	rsp->bhs[0] = ISC_OP_SCSI_RSP;
	rsp->bhs[1] = ISC_FL_F | ISC_FL_U;
	rsp->bhs[3] = 0x00;	/* GOOD */
	pdu_put32(rsp->bhs, 24, 77);		/* StatSN */
	pdu_put32(rsp->bhs, 44, 480);		/* residual */
	cr_assert_eq(dmv_put_data(&t, sizeof(buf), rsp), 0);
	cr_expect_eq(task_dones, 0, "never completes inside the call");
	for (int i = 0; i < 50 && have < sizeof(wire); i++) {
		spin();
		n = read(peer, wire + have, sizeof(wire) - have);
		if (n > 0)
			have += (size_t)n;
		if (task_dones)
			break;
	}
	n = read(peer, wire + have, sizeof(wire) - have);
	if (n > 0)
		have += (size_t)n;
	while (off < have) {
		const uint8_t *b = wire + off;
		uint32_t dsl = pdu_bhs_dsl(b);

		cr_assert_eq(pdu_bhs_opcode(b), ISC_OP_DATA_IN);
		cr_expect_leq(dsl, 8192);
		cr_expect_eq(pdu_get32(b, 36), (uint32_t)pdus, "DataSN");
		cr_expect_eq(pdu_get32(b, 40), (uint32_t)pdus * 8192, "buffer offset");
		cr_expect_eq(memcmp(b + 48, buf + pdus * 8192, dsl), 0);
		off += 48 + pdu_pad4(dsl);
		pdus++;
		if (off >= have) {
			cr_expect(b[1] & ISC_FL_S, "last Data-In carries the status");
			cr_expect(b[1] & ISC_FL_U);
			cr_expect_eq(pdu_get32(b, 24), 77);
			cr_expect_eq(pdu_get32(b, 44), 480);
		} else {
			cr_expect_not(b[1] & ISC_FL_S);
		}
	}
	cr_expect_eq(pdus, 3);
	cr_expect_eq(task_dones, 1);
	cr_expect_eq(task_done_status, 0);
}

Test(dmv_tcp, get_data_sends_r2t_and_lands_data_out_in_the_buffer)
{
	static uint8_t buf[16384], src[16384];
	uint8_t wire[2 * (48 + 8192)], r2t[48];
	uint8_t bhs[ISC_BHS_LEN];
	uint8_t lun[8] = { 0, 3 };
	struct dmv_task t;
	struct dmv_conn_params p = tc->base.params;
	size_t n;
	uint32_t ttt;

	p.max_recv_dsl = 8192;
	p.max_burst_length = 65536;
	p.max_outstanding_r2t = 1;
	dmv_conn_set_params(&tc->base, &p);
	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)(i * 31);
	memset(&t, 0, sizeof(t));
	t.buf = buf;
	t.len = sizeof(buf);
	t.done = task_done;
	dmv_task_init(&t, &tc->base, 0x66, lun);
	dmv_task_init_write(&t, 0, 0);
	the_task = &t;
	cr_assert_eq(dmv_get_data(&t), 0);
	spin();
	cr_assert_eq(read(peer, r2t, sizeof(r2t)), 48);
	cr_expect_eq(pdu_bhs_opcode(r2t), ISC_OP_R2T);
	cr_expect_eq(pdu_bhs_itt(r2t), 0x66);
	cr_expect_eq(r2t[9], 3, "LUN echoed");
	cr_expect_eq(pdu_get32(r2t, 24), 100, "stamped by the iSCSI layer");
	cr_expect_eq(pdu_get32(r2t, 40), 0);
	cr_expect_eq(pdu_get32(r2t, 44), sizeof(buf));
	ttt = pdu_get32(r2t, 20);
	cr_expect_neq(ttt, ISC_RSVD_TAG);
	for (uint32_t i = 0, sn = 0; i < sizeof(src); i += 8192, sn++) {
		memset(bhs, 0, sizeof(bhs));
		bhs[0] = ISC_OP_DATA_OUT;
		bhs[1] = i + 8192 == sizeof(src) ? ISC_FL_F : 0;
		pdu_put32(bhs, 16, 0x66);
		pdu_put32(bhs, 20, ttt);
		pdu_put32(bhs, 36, sn);
		pdu_put32(bhs, 40, i);
		n = wire_pdu(wire, bhs, src + i, 8192, false, false);
		cr_assert_eq(write(peer, wire, n), (ssize_t)n);
	}
	spin();
	cr_expect_eq(task_dones, 1);
	cr_expect_eq(task_done_status, 0);
	cr_expect_eq(memcmp(buf, src, sizeof(buf)), 0);
	cr_expect_eq(ngot, 0, "Data-Out never surfaces as a control PDU");
	the_task = NULL;
}

Test(dmv_tcp, data_out_with_bad_digest_fails_its_task_once_all_data_is_in)
{
	static uint8_t buf[16384];
	uint8_t wire[2 * (48 + 8 + 8192)], r2t[48 + 4];
	uint8_t bhs[ISC_BHS_LEN];
	uint8_t lun[8] = { 0 };
	struct dmv_task t;
	struct dmv_conn_params p;
	size_t n = 0, one;
	uint32_t ttt;

	digests_on();
	p = tc->base.params;
	p.max_recv_dsl = 8192;
	p.max_burst_length = 65536;
	p.max_outstanding_r2t = 1;
	dmv_conn_set_params(&tc->base, &p);
	memset(&t, 0, sizeof(t));
	t.buf = buf;
	t.len = sizeof(buf);
	t.done = task_done;
	dmv_task_init(&t, &tc->base, 0x67, lun);
	dmv_task_init_write(&t, 0, 0);
	the_task = &t;
	cr_assert_eq(dmv_get_data(&t), 0);
	spin();
	cr_assert_eq(read(peer, r2t, sizeof(r2t)), 52, "R2T with its header digest");
	ttt = pdu_get32(r2t, 20);
	for (uint32_t i = 0, sn = 0; i < sizeof(buf); i += 8192, sn++) {
		memset(bhs, 0, sizeof(bhs));
		bhs[0] = ISC_OP_DATA_OUT;
		bhs[1] = i + 8192 == sizeof(buf) ? ISC_FL_F : 0;
		pdu_put32(bhs, 16, 0x67);
		pdu_put32(bhs, 20, ttt);
		pdu_put32(bhs, 36, sn);
		pdu_put32(bhs, 40, i);
		one = wire_pdu(wire + n, bhs, buf, 8192, true, true);
		if (i == 0)
			wire[n + one - 1] ^= 0x01;	/* the first one's data digest */
		n += one;
	}
	cr_assert_eq(write(peer, wire, n), (ssize_t)n);
	spin();
	cr_expect_eq(rejected_reason, ISC_REJ_DATA_DIGEST);
	cr_expect_eq(task_dones, 1, "the task ends when its last Data-Out is in");
	cr_expect_eq(task_done_status, -EBADMSG);
	cr_expect_eq(lost_err, 0, "the connection stays");
	the_task = NULL;
}

/* ---- Several loops: the first PDU is read on the listener's loop, then the connection moves
 * to the loop place() chose, where accept and that PDU arrive as if it had just come. */

static struct gw_loop pl_loop1;
static struct gw_loops pl_set;
static struct pdu_pool pl_pool1;
static int pl_place_answer;
static struct gw_loop *pl_accept_loop;
static int pl_rx_n;			/* atomic: PDUs received after placement */
static struct gw_loop *pl_rx_loop[4];
static uint8_t pl_rx_op[4];
static uint32_t pl_rx_len[4];
static uint8_t pl_rx_data0[64];
static struct pdu_pool *pl_rx_pool[4];
static int pl_lost;			/* atomic */

static void pl_rx(struct dmv_conn *c, struct pdu *pdu)
{
	int i = __atomic_load_n(&pl_rx_n, __ATOMIC_RELAXED);

	(void)c;
	if (i < 4) {
		pl_rx_loop[i] = gw_loop_current();
		pl_rx_op[i] = pdu_bhs_opcode(pdu->bhs);
		pl_rx_len[i] = pdu->data_len;
		pl_rx_pool[i] = pdu->pool;
		if (i == 0)
			memcpy(pl_rx_data0, pdu->data,
			       pdu->data_len < sizeof(pl_rx_data0) ? pdu->data_len : 64);
	}
	__atomic_store_n(&pl_rx_n, i + 1, __ATOMIC_RELEASE);
}

static void pl_lost_cb(struct dmv_conn *c, int err)
{
	(void)err;
	dmv_conn_close(c);
	__atomic_store_n(&pl_lost, 1, __ATOMIC_RELEASE);
}

static const struct dmv_conn_cb pl_cbs = {
	.rx_pdu = pl_rx, .find_task = cb_find, .stamp = cb_stamp, .reject = cb_reject,
	.lost = pl_lost_cb,
};

static void pl_accept(struct dmv_portal *p, struct dmv_conn *c)
{
	(void)p;
	pl_accept_loop = gw_loop_current();
	c->cb = &pl_cbs;
}

static int pl_place(struct dmv_portal *p, const struct pdu *first)
{
	(void)p;
	cr_expect_eq(pdu_bhs_opcode(first->bhs), ISC_OP_LOGIN_REQ);
	return pl_place_answer;
}

static struct dmv_portal *pl_listen(uint32_t timeout_ms)
{
	struct dmv_portal_conf pc = { .name = "pl", .address = "127.0.0.1", .port = 0,
				      .loops = &pl_set, .place_timeout_ms = timeout_ms };
	struct dmv_portal *dp;

	cr_assert_eq(gw_loop_init(&loop), 0);
	cr_assert_eq(gw_loop_init(&pl_loop1), 0);
	pdu_pool_init(&pool, 0);
	pdu_pool_init(&pl_pool1, 0);
	memset(&pl_set, 0, sizeof(pl_set));
	pl_set.n = 2;
	pl_set.loop[0] = &loop;
	pl_set.loop[1] = &pl_loop1;
	pc.pools[0] = &pool;
	pc.pools[1] = &pl_pool1;
	cr_assert_eq(tcp_listen(&loop, &pc, &pool, &dp), 0);
	dp->accept = pl_accept;
	dp->place = pl_place;
	cr_assert_eq(gw_loop_thread_start(&pl_loop1, -1, "pl-loop1"), 0);
	return dp;
}

static int pl_connect(struct dmv_portal *dp)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	const char *colon = strrchr(dp->addr, ':');
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert(colon);
	a.sin_port = htons((uint16_t)atoi(colon + 1));
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

/* Runs loop 0 until cond (an atomic int) is at least want, for at most 5 s. */
static bool pl_wait(int *cond, int want)
{
	for (int i = 0; i < 500; i++) {
		if (__atomic_load_n(cond, __ATOMIC_ACQUIRE) >= want)
			return true;
		gw_loop_run_once(&loop, 10);
	}
	return false;
}

static void pl_finish(struct dmv_portal *dp)
{
	dmv_portal_destroy(dp);
	gw_loop_thread_stop(&pl_loop1);
	gw_loop_fini(&pl_loop1);
	gw_loop_fini(&loop);
	pdu_pool_fini(&pl_pool1);
	pdu_pool_fini(&pool);
}

/* A Login Request with 40 bytes of data, then a NOP-Out, in one write. */
static void pl_send_login_and_nop(int fd)
{
	uint8_t buf[2 * ISC_BHS_LEN + 40];

	memset(buf, 0, sizeof(buf));
	buf[0] = ISC_OP_LOGIN_REQ | 0x40;
	buf[7] = 40;			/* DataSegmentLength */
	for (int i = 0; i < 40; i++)
		buf[ISC_BHS_LEN + i] = (uint8_t)(i * 7 + 1);
	buf[ISC_BHS_LEN + 40] = ISC_OP_NOP_OUT | 0x40;
	buf[ISC_BHS_LEN + 41] = 0x80;	/* F */
	cr_assert_eq(write(fd, buf, sizeof(buf)), (ssize_t)sizeof(buf));
}

TestSuite(dmv_tcp_place);

/* Where the first PDU sends a connection: the loop place() chooses, or without a choice the
 * least loaded one. It is accepted there, its first PDU and what followed it in the same
 * segment arrive there from that loop's pool, and its loop's count goes up, then back. */
static const struct {
	const char *what;
	int place_answer;		/* place(): a loop index, or -1 for no choice */
	unsigned busy1;			/* loop 1's load before the connection */
	int to;				/* the loop it must land on */
} place_cases[] = {
	{ "place() chooses loop 1", 1, 0, 1 },
	{ "no choice, loop 1 busy: the least loaded", -1, 5, 0 },
};

Test(dmv_tcp_place, the_first_pdu_moves_the_connection_to_its_loop)
{
	for (size_t k = 0; k < sizeof(place_cases) / sizeof(place_cases[0]); k++) {
		const char *what = place_cases[k].what;
		int to = place_cases[k].to, other = !to;
		struct gw_loop *tl = to ? &pl_loop1 : &loop;
		struct pdu_pool *tp = to ? &pl_pool1 : &pool;
		unsigned other_load;
		struct dmv_portal *dp;
		int fd;

		pl_rx_n = 0;
		pl_lost = 0;
		pl_place_answer = place_cases[k].place_answer;
		dp = pl_listen(0);
		pl_set.load[1] = place_cases[k].busy1;
		other_load = pl_set.load[other];
		fd = pl_connect(dp);
		pl_send_login_and_nop(fd);
		cr_assert(pl_wait(&pl_rx_n, 2), "%s: the two PDUs never arrived (%d)", what,
			  pl_rx_n);
		cr_expect_eq(pl_accept_loop, tl, "%s: accepted on its loop", what);
		cr_expect_eq(pl_rx_loop[0], tl, "%s", what);
		cr_expect_eq(pl_rx_op[0], ISC_OP_LOGIN_REQ, "%s", what);
		cr_expect_eq(pl_rx_len[0], 40, "%s", what);
		for (int i = 0; i < 40; i++)
			cr_expect_eq(pl_rx_data0[i], (uint8_t)(i * 7 + 1),
				     "%s: first PDU's data byte %d", what, i);
		cr_expect_eq(pl_rx_pool[0], tp, "%s: the first PDU comes from its loop's pool", what);
		/* What followed the first PDU in the same segment arrives too, on the same loop. */
		cr_expect_eq(pl_rx_loop[1], tl, "%s", what);
		cr_expect_eq(pl_rx_op[1], ISC_OP_NOP_OUT, "%s", what);
		cr_expect_eq(pl_rx_pool[1], tp, "%s", what);
		cr_expect_eq(__atomic_load_n(&pl_set.load[to], __ATOMIC_RELAXED), 1, "%s", what);
		cr_expect_eq(__atomic_load_n(&pl_set.load[other], __ATOMIC_RELAXED), other_load,
			     "%s: the other loop's count", what);
		/* The initiator goes: the loop that serves it sees it, and the count goes back. */
		close(fd);
		cr_assert(pl_wait(&pl_lost, 1), "%s: connection loss never seen", what);
		for (int i = 0; i < 50 && __atomic_load_n(&pl_set.load[to], __ATOMIC_RELAXED); i++)
			gw_loop_run_once(&loop, 10);
		cr_expect_eq(__atomic_load_n(&pl_set.load[to], __ATOMIC_RELAXED), 0, "%s", what);
		pl_finish(dp);
	}
}

Test(dmv_tcp_place, a_connection_that_never_logs_in_is_closed)
{
	struct dmv_portal *dp;
	char c;
	int fd, done = 0;

	pl_rx_n = 0;
	pl_accept_loop = NULL;
	dp = pl_listen(200);
	fd = pl_connect(dp);
	for (int i = 0; i < 300 && !done; i++) {
		gw_loop_run_once(&loop, 10);
		if (recv(fd, &c, 1, MSG_DONTWAIT) == 0)
			done = 1;
	}
	cr_expect(done, "the silent connection was never closed");
	cr_expect_null(pl_accept_loop, "nobody was handed a connection without a PDU");
	close(fd);
	pl_finish(dp);
}

/* The owner's admit() runs at accept, before the wait for the first PDU: a refusal closes the
 * connection at once; an admitted connection closed while it waits is given back through
 * unadmit() (timed out or not), and one handed over reaches accept() marked admitted. */
static int pl_admit_answer, pl_admits, pl_unadmits, pl_unadmit_timeouts;
static bool pl_accepted_admitted;

static int pl_admit(struct dmv_portal *p, struct dmv_conn *c)
{
	(void)p;
	(void)c;
	pl_admits++;
	return pl_admit_answer;
}

static void pl_unadmit(struct dmv_portal *p, bool timed_out)
{
	(void)p;
	pl_unadmits++;
	if (timed_out)
		pl_unadmit_timeouts++;
}

static void pl_accept_admitted(struct dmv_portal *p, struct dmv_conn *c)
{
	pl_accepted_admitted = c->admitted;
	pl_accept(p, c);
}

static bool pl_closed_by_peer(int fd)
{
	char c;

	for (int i = 0; i < 300; i++) {
		gw_loop_run_once(&loop, 10);
		if (recv(fd, &c, 1, MSG_DONTWAIT) == 0)
			return true;
	}
	return false;
}

static const struct {
	const char *what;
	int answer;				/* admit()'s */
	int admits, unadmits, timeouts;		/* the totals after it */
} admit_cases[] = {
	{ "refused: closed at once, nothing to give back", -EBUSY, 1, 0, 0 },
	{ "admitted, silent: the place timeout gives it back as timed out", 0, 2, 1, 1 },
};

Test(dmv_tcp_place, admit_refuses_at_accept_and_unadmit_gives_back_what_waited)
{
	struct dmv_portal *dp;
	int fd;

	pl_admits = pl_unadmits = pl_unadmit_timeouts = 0;
	pl_accept_loop = NULL;
	dp = pl_listen(200);
	dp->admit = pl_admit;
	dp->unadmit = pl_unadmit;
	dp->accept = pl_accept_admitted;
	/* Each connection is closed by the gateway; the counts are the totals so far. */
	for (size_t k = 0; k < sizeof(admit_cases) / sizeof(admit_cases[0]); k++) {
		pl_admit_answer = admit_cases[k].answer;
		fd = pl_connect(dp);
		cr_expect(pl_closed_by_peer(fd), "%s: never closed", admit_cases[k].what);
		close(fd);
		cr_expect_eq(pl_admits, admit_cases[k].admits, "%s", admit_cases[k].what);
		cr_expect_eq(pl_unadmits, admit_cases[k].unadmits, "%s", admit_cases[k].what);
		cr_expect_eq(pl_unadmit_timeouts, admit_cases[k].timeouts, "%s", admit_cases[k].what);
	}
	/* Admitted, logs in: accept() gets it marked admitted, nothing given back. */
	pl_rx_n = 0;
	pl_lost = 0;
	pl_place_answer = 1;
	fd = pl_connect(dp);
	pl_send_login_and_nop(fd);
	cr_assert(pl_wait(&pl_rx_n, 2), "the two PDUs never arrived");
	cr_expect(pl_accepted_admitted);
	cr_expect_eq(pl_unadmits, 1);
	close(fd);
	cr_assert(pl_wait(&pl_lost, 1), "connection loss never seen");
	cr_expect_eq(pl_unadmits, 1, "closed after accept(): the owner's to count");
	pl_finish(dp);
}
