// SPDX-License-Identifier: MIT
/* The TCP datamover over a socketpair: PDU framing with padding and CRC32C digests both ways,
 * Data-In splitting and status collapse, R2T + Data-Out straight into the task buffer. */
#include <criterion/criterion.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../../gateway/dmv/dmv_tcp.c"

static struct gw_loop loop;
static struct isc_pdu_pool pool;
static struct tcp_conn *tc;
static int peer;
static struct isc_pdu *got[8];
static int ngot, lost_err, task_done_status = 99, task_dones;
static struct dmv_task *the_task;
static uint8_t rejected_reason;

static void cb_rx(struct dmv_conn *c, struct isc_pdu *pdu)
{
	(void)c;
	isc_pdu_ref(pdu);
	if (ngot < 8)
		got[ngot++] = pdu;
	else
		isc_pdu_put(pdu);
}

static struct dmv_task *cb_find(struct dmv_conn *c, uint32_t itt)
{
	(void)c;
	return the_task && the_task->itt == itt ? the_task : NULL;
}

static void cb_stamp(struct dmv_conn *c, uint8_t *bhs)
{
	(void)c;
	isc_put32(bhs, 24, 100);
	isc_put32(bhs, 28, 200);
	isc_put32(bhs, 32, 300);
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
	isc_pdu_pool_init(&pool, 0);
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
		isc_pdu_put(got[i]);
	if (!conn_closed)
		tcp_close(&tc->base);
	gw_loop_fini(&loop);
	isc_pdu_pool_fini(&pool);
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
	uint32_t pad = isc_pad4(len) - len;

	memcpy(out, bhs, ISC_BHS_LEN);
	isc_put24(out, 5, len);
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
	isc_put32(bhs, 16, 0xabc);
	n = wire_pdu(wire, bhs, "a=b\0c", 5, true, true);
	cr_assert_eq(n, 48 + 4 + 8 + 4);
	/* One byte at a time: every state of the receiver meets a partial read. */
	for (size_t i = 0; i < n; i++) {
		cr_assert_eq(write(peer, wire + i, 1), 1);
		gw_loop_run_once(&loop, 0);
	}
	spin();
	cr_assert_eq(ngot, 1);
	cr_expect_eq(isc_bhs_itt(got[0]->bhs), 0xabc);
	cr_assert_eq(got[0]->data_len, 5);
	cr_expect_eq(memcmp(got[0]->data, "a=b\0c", 5), 0);
	cr_expect_eq(lost_err, 0);
}

Test(dmv_tcp, several_pdus_in_one_read)
{
	uint8_t bhs[ISC_BHS_LEN] = { ISC_OP_NOP_OUT | ISC_BHS_I, ISC_FL_F }, wire[1024];
	size_t n = 0;

	for (uint32_t i = 0; i < 5; i++) {
		isc_put32(bhs, 16, i);
		n += wire_pdu(wire + n, bhs, "xyz", 3, false, false);
	}
	cr_assert_eq(write(peer, wire, n), (ssize_t)n);
	spin();
	cr_assert_eq(ngot, 5);
	for (int i = 0; i < 5; i++)
		cr_expect_eq(isc_bhs_itt(got[i]->bhs), (uint32_t)i);
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

	isc_put24(bhs, 5, 8192 + 4);	/* login-time limit is 8192 */
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
	cr_expect_eq(isc_bhs_opcode(got[0]->bhs), ISC_OP_NOP_OUT);
	cr_expect_eq(lost_err, 0);
}

Test(dmv_tcp, sends_pdu_with_digests_and_zero_padding)
{
	struct isc_pdu *pdu = isc_pdu_get(&pool);
	uint8_t wire[256];
	uint32_t crc;
	ssize_t n;

	digests_on();
	pdu->bhs[0] = ISC_OP_TEXT_RSP;
	pdu->bhs[1] = ISC_FL_F;
	isc_pdu_set_data(pdu, "k=v\0z", 5);
	cr_assert_eq(dmv_send_pdu(&tc->base, pdu), 0);
	spin();
	n = read(peer, wire, sizeof(wire));
	cr_assert_eq(n, 48 + 4 + 8 + 4);
	crc = gw_crc32c(0, wire, 48);
	cr_expect_eq(memcmp(&crc, wire + 48, 4), 0, "header digest");
	cr_expect_eq(isc_bhs_dsl(wire), 5);
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
	struct isc_pdu *rsp = isc_pdu_get(&pool);
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
	isc_put32(rsp->bhs, 24, 77);		/* StatSN */
	isc_put32(rsp->bhs, 44, 480);		/* residual */
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
		uint32_t dsl = isc_bhs_dsl(b);

		cr_assert_eq(isc_bhs_opcode(b), ISC_OP_DATA_IN);
		cr_expect_leq(dsl, 8192);
		cr_expect_eq(isc_get32(b, 36), (uint32_t)pdus, "DataSN");
		cr_expect_eq(isc_get32(b, 40), (uint32_t)pdus * 8192, "buffer offset");
		cr_expect_eq(memcmp(b + 48, buf + pdus * 8192, dsl), 0);
		off += 48 + isc_pad4(dsl);
		pdus++;
		if (off >= have) {
			cr_expect(b[1] & ISC_FL_S, "last Data-In carries the status");
			cr_expect(b[1] & ISC_FL_U);
			cr_expect_eq(isc_get32(b, 24), 77);
			cr_expect_eq(isc_get32(b, 44), 480);
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
	cr_expect_eq(isc_bhs_opcode(r2t), ISC_OP_R2T);
	cr_expect_eq(isc_bhs_itt(r2t), 0x66);
	cr_expect_eq(r2t[9], 3, "LUN echoed");
	cr_expect_eq(isc_get32(r2t, 24), 100, "stamped by the iSCSI layer");
	cr_expect_eq(isc_get32(r2t, 40), 0);
	cr_expect_eq(isc_get32(r2t, 44), sizeof(buf));
	ttt = isc_get32(r2t, 20);
	cr_expect_neq(ttt, ISC_RSVD_TAG);
	for (uint32_t i = 0, sn = 0; i < sizeof(src); i += 8192, sn++) {
		memset(bhs, 0, sizeof(bhs));
		bhs[0] = ISC_OP_DATA_OUT;
		bhs[1] = i + 8192 == sizeof(src) ? ISC_FL_F : 0;
		isc_put32(bhs, 16, 0x66);
		isc_put32(bhs, 20, ttt);
		isc_put32(bhs, 36, sn);
		isc_put32(bhs, 40, i);
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
	ttt = isc_get32(r2t, 20);
	for (uint32_t i = 0, sn = 0; i < sizeof(buf); i += 8192, sn++) {
		memset(bhs, 0, sizeof(bhs));
		bhs[0] = ISC_OP_DATA_OUT;
		bhs[1] = i + 8192 == sizeof(buf) ? ISC_FL_F : 0;
		isc_put32(bhs, 16, 0x67);
		isc_put32(bhs, 20, ttt);
		isc_put32(bhs, 36, sn);
		isc_put32(bhs, 40, i);
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
