// SPDX-License-Identifier: MIT
/* Text Requests: SendTargets in discovery and normal sessions, long answers in pieces. */
#include "harness.h"

static struct h H;

static void teardown(void)
{
	h_teardown(&H);
}

static struct pdu *send_text(struct fake_conn *c, uint32_t itt, uint32_t ttt, const char *text,
				 size_t len)
{
	uint8_t bhs[ISC_BHS_LEN];

	fake_bhs(bhs, ISC_OP_TEXT_REQ | ISC_BHS_I, ISC_FL_F, itt);
	pdu_put32(bhs, 20, ttt);
	pdu_put32(bhs, 24, H.cmdsn);
	fake_dmv_rx(c, bhs, text, (uint32_t)len);
	fake_dmv_settle(&H.loop);
	return fake_dmv_pop(c);
}

static int count(const struct pdu *p, const char *needle)
{
	int n = 0;

	for (uint32_t i = 0; i + strlen(needle) <= p->data_len; i++)
		if (!memcmp(p->data + i, needle, strlen(needle)))
			n++;
	return n;
}

Test(isc_text, discovery_lists_targets_the_initiator_may_see, .fini = teardown)
{
	static const char st_all[] = "SendTargets=All";
	struct fake_conn *c;
	struct pdu *rsp;
	uint16_t st;

	h_setup(&H, H_CONF_DEFAULT);
	c = h_connect(&H);
	cr_assert_neq(h_login(&H, c, H_INITIATOR, NULL, 1, 0, 0, &st), 0);
	rsp = send_text(c, 5, ISC_RSVD_TAG, st_all, sizeof(st_all));
	cr_assert_not_null(rsp);
	cr_expect_eq(pdu_bhs_opcode(rsp->bhs), ISC_OP_TEXT_RSP);
	cr_expect(rsp->bhs[1] & ISC_FL_F);
	cr_expect_eq(pdu_get32(rsp->bhs, 20), ISC_RSVD_TAG);
	cr_expect_eq(count(rsp, "TargetName=" H_TARGET), 1);
	cr_expect_eq(count(rsp, "TargetName=iqn.2026-11.org.isergw:t2"), 1);
	cr_expect_eq(count(rsp, "TargetAddress=127.0.0.1:3260,1"), 2);
	pdu_put(rsp);

	/* An initiator outside t1's ACL only sees t2. */
	c = h_connect(&H);
	cr_assert_neq(h_login(&H, c, "iqn.2026-11.org.example:other", NULL, 2, 0, 0, &st), 0);
	rsp = send_text(c, 6, ISC_RSVD_TAG, st_all, sizeof(st_all));
	cr_assert_not_null(rsp);
	cr_expect_eq(count(rsp, "TargetName=" H_TARGET), 0);
	cr_expect_eq(count(rsp, "TargetName=iqn.2026-11.org.isergw:t2"), 1);
	pdu_put(rsp);
}

Test(isc_text, discovery_session_refuses_scsi_commands, .fini = teardown)
{
	struct fake_conn *c;
	uint8_t bhs[ISC_BHS_LEN];
	struct pdu *rej;
	uint16_t st;

	h_setup(&H, H_CONF_DEFAULT);
	c = h_connect(&H);
	cr_assert_neq(h_login(&H, c, H_INITIATOR, NULL, 1, 0, 0, &st), 0);
	fake_bhs(bhs, ISC_OP_SCSI_CMD, ISC_FL_F, 9);
	pdu_put32(bhs, 24, H.cmdsn);
	fake_dmv_rx(c, bhs, NULL, 0);
	rej = fake_dmv_pop(c);
	cr_assert_not_null(rej);
	cr_expect_eq(pdu_bhs_opcode(rej->bhs), ISC_OP_REJECT);
	cr_expect_eq(rej->bhs[2], ISC_REJ_PROTOCOL);
	cr_expect_eq(rej->data_len, ISC_BHS_LEN, "the rejected header comes back");
	pdu_put(rej);
}

Test(isc_text, long_answer_continues_with_ttt, .fini = teardown)
{
	static const char st_all[] = "SendTargets=All";
	struct gw_buf conf, all;
	struct fake_conn *c;
	struct pdu *rsp;
	uint16_t st;
	int pieces = 0;

	/* 150 targets: the answer exceeds the initiator's 8192-byte segments. */
	gw_buf_init(&conf);
	gw_buf_init(&all);
	gw_buf_printf(&conf, "{ \"portals\": [ { \"name\": \"p0\", \"address\": \"127.0.0.1\" } ],"
		      "\"targets\": [");
	for (int i = 0; i < 150; i++)
		gw_buf_printf(&conf, "%s{ \"name\": \"iqn.2026-11.org.isergw:a-long-target-name-%03d\","
			      " \"portals\": [\"p0\"], \"allow_any_initiator\": true }",
			      i ? "," : "", i);
	gw_buf_printf(&conf, "] }");
	gw_buf_append(&conf, "", 1);
	h_setup(&H, (const char *)conf.data);
	gw_buf_fini(&conf);
	c = h_connect(&H);
	cr_assert_neq(h_login(&H, c, H_INITIATOR, NULL, 1, 0, 0, &st), 0);
	rsp = send_text(c, 7, ISC_RSVD_TAG, st_all, sizeof(st_all));
	while (rsp) {
		pieces++;
		cr_assert_leq(rsp->data_len, 8192);
		gw_buf_append(&all, rsp->data, rsp->data_len);
		if (rsp->bhs[1] & ISC_FL_F) {
			pdu_put(rsp);
			break;
		}
		cr_assert(rsp->bhs[1] & ISC_FL_C, "not final: C set");
		cr_assert_neq(pdu_get32(rsp->bhs, 20), ISC_RSVD_TAG, "not final: a TTT");
		{
			uint32_t ttt = pdu_get32(rsp->bhs, 20);

			pdu_put(rsp);
			rsp = send_text(c, 7, ttt, NULL, 0);
		}
	}
	cr_expect_gt(pieces, 1);
	{
		struct isc_kvlist l;
		size_t names = 0;

		isc_kvlist_init(&l);
		/* Keys repeat in a SendTargets answer; count names by hand. */
		for (size_t i = 0; i + 11 <= all.len; i++)
			if (!memcmp(all.data + i, "TargetName=", 11))
				names++;
		cr_expect_eq(names, 150);
		isc_kvlist_fini(&l);
	}
	gw_buf_fini(&all);
}
