// SPDX-License-Identifier: MIT
/* Login phase over the fake datamover: stages, status classes, TSIH, reinstatement, MC/S. */
#include <stdlib.h>

#include "harness.h"

static struct h H;

static void setup(void)
{
	h_setup(&H, H_CONF_DEFAULT);
}

static void teardown(void)
{
	h_teardown(&H);
}

TestSuite(isc_login, .init = setup, .fini = teardown);

Test(isc_login, normal_login_reaches_ffp_with_tsih_and_tpgt)
{
	struct fake_conn *c = h_connect(&H);
	char text[256], v[64];
	struct pdu *rsp;
	uint16_t st, tsih;
	int n;

	/* First request by hand, to look at the security-stage answer. */
	n = snprintf(text, sizeof(text), "InitiatorName=%s%cTargetName=%s%cAuthMethod=None%c",
		     H_INITIATOR, 0, H_TARGET, 0, 0);
	rsp = h_login_req(&H, c, ISC_FL_T | 1, 1, 0, 0, text, (size_t)n);
	cr_assert_not_null(rsp);
	cr_expect_eq(h_status(rsp), 0);
	cr_expect(rsp->bhs[1] & ISC_FL_T);
	cr_expect_eq(rsp->bhs[1] & 3, 1, "NSG should be operational");
	cr_expect_str_eq(h_key(rsp, "AuthMethod", v, sizeof(v)), "None");
	cr_expect_str_eq(h_key(rsp, "TargetPortalGroupTag", v, sizeof(v)), "1");
	cr_expect_eq(pdu_get16(rsp->bhs, 14), 0, "no TSIH before the final response");
	pdu_put(rsp);

	c = h_connect(&H);
	tsih = h_login(&H, c, H_INITIATOR, H_TARGET, 2, 0, 0, &st);
	cr_assert_eq(st, 0, "login refused with 0x%04x", st);
	cr_expect_neq(tsih, 0);
	cr_assert_not_null(H.dp);
	/* In full feature phase now: a NOP-Out gets its NOP-In. */
	{
		uint8_t bhs[ISC_BHS_LEN];
		struct pdu *nop;

		fake_bhs(bhs, ISC_OP_NOP_OUT | ISC_BHS_I, ISC_FL_F, 0x77);
		pdu_put32(bhs, 20, ISC_RSVD_TAG);
		pdu_put32(bhs, 24, H.cmdsn);
		fake_dmv_rx(c, bhs, "ping", 4);
		nop = fake_dmv_pop(c);
		cr_assert_not_null(nop);
		cr_expect_eq(pdu_bhs_opcode(nop->bhs), ISC_OP_NOP_IN);
		cr_expect_eq(pdu_bhs_itt(nop->bhs), 0x77);
		cr_expect_eq(nop->data_len, 4);
		cr_expect_eq(memcmp(nop->data, "ping", 4), 0);
		cr_expect_eq(pdu_get32(nop->bhs, 24), H.exp_statsn, "StatSN continues the login's");
		pdu_put(nop);
	}
}

Test(isc_login, unknown_target_is_0203)
{
	struct fake_conn *c = h_connect(&H);
	uint16_t st;

	cr_expect_eq(h_login(&H, c, H_INITIATOR, "iqn.2026-11.org.isergw:nope", 1, 0, 0, &st), 0);
	cr_expect_eq(st, 0x0203);
	cr_expect(c->closed, "the connection closes after a failed login");
}

Test(isc_login, initiator_not_in_acl_is_0202)
{
	struct fake_conn *c = h_connect(&H);
	uint16_t st;

	h_login(&H, c, "iqn.2026-11.org.example:intruder", H_TARGET, 1, 0, 0, &st);
	cr_expect_eq(st, 0x0202);
	cr_expect(c->closed);
	/* allow_any_initiator admits it on the other target. */
	c = h_connect(&H);
	cr_expect_neq(h_login(&H, c, "iqn.2026-11.org.example:intruder",
			      "iqn.2026-11.org.isergw:t2", 1, 0, 0, &st), 0);
	cr_expect_eq(st, 0);
}

Test(isc_login, missing_initiator_name_is_0207)
{
	struct fake_conn *c = h_connect(&H);
	static const char text[] = "TargetName=" H_TARGET "\0AuthMethod=None";
	struct pdu *rsp = h_login_req(&H, c, ISC_FL_T | 1, 1, 0, 0, text, sizeof(text));

	cr_assert_not_null(rsp);
	cr_expect_eq(h_status(rsp), 0x0207);
	pdu_put(rsp);
}

Test(isc_login, unsupported_version_is_0205)
{
	struct fake_conn *c = h_connect(&H);
	static const char text[] = "InitiatorName=" H_INITIATOR "\0TargetName=" H_TARGET;
	uint8_t bhs[ISC_BHS_LEN];
	struct pdu *rsp;

	fake_bhs(bhs, ISC_OP_LOGIN_REQ | ISC_BHS_I, ISC_FL_T | 1, 1);
	bhs[2] = 3;	/* Version-max */
	bhs[3] = 2;	/* Version-min: above what RFC 7143 defines (0) */
	fake_dmv_rx(c, bhs, text, sizeof(text));
	rsp = fake_dmv_pop(c);
	cr_assert_not_null(rsp);
	cr_expect_eq(h_status(rsp), 0x0205);
	pdu_put(rsp);
}

Test(isc_login, same_isid_reinstates_the_session)
{
	struct fake_conn *c1 = h_connect(&H), *c2;
	struct isc_session *s;
	uint16_t st, t1, t2;
	int n = 0;

	t1 = h_login(&H, c1, H_INITIATOR, H_TARGET, 7, 0, 0, &st);
	cr_assert_eq(st, 0);
	c2 = h_connect(&H);
	t2 = h_login(&H, c2, H_INITIATOR, H_TARGET, 7, 0, 0, &st);
	cr_assert_eq(st, 0);
	cr_expect_neq(t1, t2, "a new session gets a new TSIH");
	cr_expect(c1->closed, "the old session's connection is closed");
	cr_expect_not(c2->closed);
	fake_dmv_settle(&H.loop);
	gw_list_for_each_entry(s, &H.gw->sessions, node)
		n++;
	cr_expect_eq(n, 1, "only the new session is left");
}

Test(isc_login, second_connection_beyond_max_connections_is_0206)
{
	struct fake_conn *c1 = h_connect(&H), *c2;
	uint16_t st, tsih;

	tsih = h_login(&H, c1, H_INITIATOR, H_TARGET, 3, 0, 0, &st);
	cr_assert_eq(st, 0);
	c2 = h_connect(&H);
	/* MaxConnections defaults to 1. */
	h_login(&H, c2, H_INITIATOR, H_TARGET, 3, tsih, 1, &st);
	cr_expect_eq(st, 0x0206);
	cr_expect_not(c1->closed);
	/* A TSIH nobody has: the session does not exist. */
	c2 = h_connect(&H);
	h_login(&H, c2, H_INITIATOR, H_TARGET, 3, (uint16_t)(tsih + 100), 1, &st);
	cr_expect_eq(st, 0x020a);
}

Test(isc_login, same_cid_reinstates_the_connection)
{
	struct fake_conn *c1 = h_connect(&H), *c2;
	uint16_t st, tsih;

	tsih = h_login(&H, c1, H_INITIATOR, H_TARGET, 4, 0, 0, &st);
	cr_assert_eq(st, 0);
	c2 = h_connect(&H);
	cr_expect_eq(h_login(&H, c2, H_INITIATOR, H_TARGET, 4, tsih, 0, &st), tsih);
	cr_expect_eq(st, 0);
	cr_expect(c1->closed, "the connection with the same CID is replaced");
	cr_expect_not(c2->closed);
}

Test(isc_login, non_login_pdu_during_login_closes)
{
	struct fake_conn *c = h_connect(&H);
	uint8_t bhs[ISC_BHS_LEN];

	fake_bhs(bhs, ISC_OP_NOP_OUT | ISC_BHS_I, ISC_FL_F, 1);
	fake_dmv_rx(c, bhs, NULL, 0);
	cr_expect(c->closed);
	cr_expect_eq(c->nsent, 0);
}

#define CONF_CHAP                                                                           \
	"{ \"portals\": [ { \"name\": \"p0\", \"address\": \"127.0.0.1\" } ],"                  \
	"  \"targets\": [ { \"name\": \"" H_TARGET "\", \"portals\": [\"p0\"],"               \
	"    \"initiators\": [ { \"name\": \"" H_INITIATOR "\","                               \
	"       \"chap\": { \"user\": \"host1\", \"secret\": \"0123456789ab\" } } ] } ] }"

/* CHAP exchange in the security stage with `secret`; returns the final login status. */
static uint16_t chap_login(struct h *h, struct fake_conn *c, const char *secret)
{
	char text[1024], v[600];
	uint8_t chal[ISC_CHAP_CHALLENGE_LEN + 8], digest[ISC_CHAP_DIGEST_MAX];
	struct pdu *rsp;
	struct gw_buf b;
	int n, clen, id;
	uint16_t st;

	n = snprintf(text, sizeof(text), "InitiatorName=%s%cTargetName=%s%cAuthMethod=CHAP,None%c",
		     H_INITIATOR, 0, H_TARGET, 0, 0);
	rsp = h_login_req(h, c, 0 << 2, 1, 0, 0, text, (size_t)n);
	cr_assert_not_null(rsp);
	cr_assert_eq(h_status(rsp), 0);
	cr_expect_str_eq(h_key(rsp, "AuthMethod", v, sizeof(v)), "CHAP");
	pdu_put(rsp);
	n = snprintf(text, sizeof(text), "CHAP_A=5%c", 0);
	rsp = h_login_req(h, c, 0 << 2, 1, 0, 0, text, (size_t)n);
	cr_assert_not_null(rsp);
	cr_expect_str_eq(h_key(rsp, "CHAP_A", v, sizeof(v)), "5");
	id = atoi(h_key(rsp, "CHAP_I", v, sizeof(v)));
	clen = isc_chap_decode(h_key(rsp, "CHAP_C", v, sizeof(v)), chal, sizeof(chal));
	cr_assert_gt(clen, 0);
	pdu_put(rsp);
	cr_assert_eq(isc_chap_response(5, (uint8_t)id, secret, strlen(secret), chal, (size_t)clen,
				       digest), 0);
	gw_buf_init(&b);
	isc_chap_encode_hex(&b, digest, isc_chap_digest_len(5));
	n = snprintf(text, sizeof(text), "CHAP_N=host1%cCHAP_R=%.*s%c", 0, (int)b.len,
		     (const char *)b.data, 0);
	gw_buf_fini(&b);
	rsp = h_login_req(h, c, ISC_FL_T | (0 << 2) | 1, 1, 0, 0, text, (size_t)n);
	cr_assert_not_null(rsp);
	st = h_status(rsp);
	if (!st)
		cr_expect(rsp->bhs[1] & ISC_FL_T, "authenticated: transit to operational");
	pdu_put(rsp);
	return st;
}

Test(isc_login_chap, right_secret_passes_wrong_secret_is_0201)
{
	struct h h;
	struct fake_conn *c;
	uint16_t st;

	h_setup(&h, CONF_CHAP);
	c = h_connect(&h);
	cr_expect_eq(chap_login(&h, c, "0123456789ab"), 0);
	cr_expect_not(c->closed);
	c = h_connect(&h);
	cr_expect_eq(chap_login(&h, c, "0123456789ac"), 0x0201);
	cr_expect(c->closed);
	/* Skipping the security stage does not get around it. */
	c = h_connect(&h);
	h_login(&h, c, H_INITIATOR, H_TARGET, 2, 0, 0, &st);
	cr_expect_eq(st, 0x0201);
	h_teardown(&h);
}

Test(isc_login, rdma_extensions_are_refused_over_tcp)
{
	struct fake_conn *c = h_connect(&H);
	char text[256], v[64];
	struct pdu *rsp;
	int n;

	n = snprintf(text, sizeof(text), "InitiatorName=%s%cTargetName=%s%cAuthMethod=None%c",
		     H_INITIATOR, 0, H_TARGET, 0, 0);
	rsp = h_login_req(&H, c, ISC_FL_T | 1, 1, 0, 0, text, (size_t)n);
	cr_assert_not_null(rsp);
	pdu_put(rsp);
	n = snprintf(text, sizeof(text), "RDMAExtensions=Yes%c", 0);
	rsp = h_login_req(&H, c, (1 << 2), 1, 0, 0, text, (size_t)n);
	cr_assert_not_null(rsp);
	cr_expect_eq(h_status(rsp), 0);
	cr_expect_str_eq(h_key(rsp, "RDMAExtensions", v, sizeof(v)), "No");
	pdu_put(rsp);
}

/* ---------------------------------------------------------------------------------------- */
/* Login limits: max_sessions, max_sessions_per_initiator, the failed-login back-off */

#define L_TARGET "iqn.2026-11.org.isergw:few"

#define L_CONF                                                                              \
	"{ \"portals\": [ { \"name\": \"p0\", \"address\": \"127.0.0.1\", \"port\": 3260,"    \
	"    \"login_fail_limit\": 3, \"login_fail_window\": 60, \"login_backoff\": 30 } ],"  \
	"  \"targets\": [ { \"name\": \"" H_TARGET "\", \"portals\": [\"p0\"],"               \
	"    \"initiators\": [ { \"name\": \"" H_INITIATOR "\" } ],"                           \
	"    \"luns\": [ { \"lun\": 0, \"backstore\": { \"type\": \"ram\", \"size\": \"1M\" } } ]"  \
	"  }, { \"name\": \"" L_TARGET "\", \"portals\": [\"p0\"],"                            \
	"    \"allow_any_initiator\": true, \"max_sessions\": 3,"                              \
	"    \"max_sessions_per_initiator\": 2,"                                               \
	"    \"luns\": [ { \"lun\": 0, \"backstore\": { \"type\": \"ram\", \"size\": \"1M\" } } ]"  \
	"  } ] }"

static void limits_setup(void)
{
	h_setup(&H, L_CONF);
}

TestSuite(isc_limits, .init = limits_setup, .fini = teardown);

static struct fake_conn *l_connect_from(const char *peer)
{
	struct fake_conn *c = h_connect(&H);

	snprintf(c->base.peer, sizeof(c->base.peer), "%s", peer);
	return c;
}

Test(isc_limits, sessions_per_initiator_and_per_target_are_bounded)
{
	const char *a = "iqn.2026-11.org.example:a", *b = "iqn.2026-11.org.example:b";
	uint16_t st, tsih;

	h_login(&H, h_connect(&H), a, L_TARGET, 1, 0, 0, &st);
	cr_assert_eq(st, 0);
	h_login(&H, h_connect(&H), a, L_TARGET, 2, 0, 0, &st);
	cr_assert_eq(st, 0);
	/* A third ISID of the same initiator: out of resources (RFC 7143 §11.13.5). */
	h_login(&H, h_connect(&H), a, L_TARGET, 3, 0, 0, &st);
	cr_expect_eq(st, 0x0302, "third session of one initiator: 0x%04x", st);
	/* Reinstating an existing ISID takes its own place: allowed at the limit. */
	tsih = h_login(&H, h_connect(&H), a, L_TARGET, 2, 0, 0, &st);
	cr_expect_eq(st, 0, "reinstatement refused: 0x%04x", st);
	cr_expect_neq(tsih, 0);
	h_login(&H, h_connect(&H), b, L_TARGET, 1, 0, 0, &st);
	cr_assert_eq(st, 0);
	/* Three sessions on the target: a fourth, of anyone, is refused. */
	h_login(&H, h_connect(&H), b, L_TARGET, 2, 0, 0, &st);
	cr_expect_eq(st, 0x0302, "fourth session on the target: 0x%04x", st);
	cr_expect_eq(H.gw->login_refused_sessions, 2);
	/* The other target has its own count (defaults: 256 and 16). */
	h_login(&H, h_connect(&H), H_INITIATOR, H_TARGET, 1, 0, 0, &st);
	cr_expect_eq(st, 0);
}

Test(isc_limits, failed_logins_from_one_address_start_a_backoff)
{
	const struct isc_login_src *e = NULL;
	struct fake_conn *c;
	uint16_t st;
	size_t i;

	for (i = 0; i < 3; i++) {
		c = l_connect_from("192.0.2.7:4000");
		h_login(&H, c, "iqn.2026-11.org.example:stranger", H_TARGET, 1, 0, 0, &st);
		cr_assert_eq(st, 0x0202, "unlisted initiator: 0x%04x", st);
	}
	/* In back-off: even an admitted initiator from there is refused, service unavailable. */
	c = l_connect_from("192.0.2.7:4001");
	h_login(&H, c, H_INITIATOR, H_TARGET, 1, 0, 0, &st);
	cr_expect_eq(st, 0x0301, "login during the back-off: 0x%04x", st);
	cr_expect(c->closed);
	/* Another address is not affected. */
	c = l_connect_from("192.0.2.8:4000");
	h_login(&H, c, H_INITIATOR, H_TARGET, 1, 0, 0, &st);
	cr_expect_eq(st, 0);
	for (i = 0; i < ISC_LOGIN_SRC_MAX; i++)
		if (!strcmp(H.gw->login_src[i].addr, "192.0.2.7"))
			e = &H.gw->login_src[i];
	cr_assert_not_null(e, "no entry for the address");
	cr_expect_eq(e->failed, 3);
	cr_expect_eq(e->refused, 1, "refusals are counted apart and do not extend the back-off");
	cr_expect_eq(e->backoffs, 1);
	/* The back-off ends: move its end into the past. */
	H.gw->login_src[e - H.gw->login_src].backoff_until_ms = H.loop.now_ms;
	c = l_connect_from("192.0.2.7:4002");
	h_login(&H, c, H_INITIATOR, H_TARGET, 2, 0, 0, &st);
	cr_expect_eq(st, 0, "after the back-off: 0x%04x", st);
	/* The state shows it. */
	json_t *j = isc_gw_login_state(H.gw);
	cr_assert_not_null(j);
	cr_expect_eq(json_array_size(json_object_get(j, "sources")), 1);
	json_decref(j);
}

Test(isc_limits, the_failed_login_table_is_bounded)
{
	char peer[64];
	uint16_t st;
	size_t i, used = 0;

	/* More addresses than the table holds: old entries are evicted, memory does not grow. */
	for (i = 0; i < ISC_LOGIN_SRC_MAX + 40; i++) {
		snprintf(peer, sizeof(peer), "10.0.%zu.%zu:5000", i / 250, i % 250);
		h_login(&H, l_connect_from(peer), "iqn.2026-11.org.example:x", H_TARGET, 1, 0, 0,
			&st);
		cr_assert_eq(st, 0x0202);
		if (H.nconns == 32) {
			fake_dmv_settle(&H.loop);
			for (int k = 0; k < H.nconns; k++)
				fake_dmv_drain(H.conns[k]);
			/* The harness keeps 32 connections: reuse the slots of closed ones. */
			for (int k = 0; k < H.nconns; k++)
				fake_dmv_conn_free(H.conns[k]);
			H.nconns = 0;
		}
	}
	for (i = 0; i < ISC_LOGIN_SRC_MAX; i++)
		used += H.gw->login_src[i].addr[0] != 0;
	cr_expect_eq(used, ISC_LOGIN_SRC_MAX);
}

Test(isc_limits, target_limits_do_not_count_against_the_source)
{
	struct fake_conn *c;
	uint16_t st;
	int i;

	/* Refusals by the target's own limits (0x0302) are not the initiator's failures. */
	for (i = 0; i < 3; i++) {
		c = l_connect_from("192.0.2.9:4000");
		h_login(&H, c, "iqn.2026-11.org.example:a", L_TARGET, (uint8_t)(i + 1), 0, 0, &st);
	}
	cr_expect_eq(st, 0x0302);
	for (i = 0; i < 3; i++) {
		c = l_connect_from("192.0.2.9:4000");
		h_login(&H, c, "iqn.2026-11.org.example:a", L_TARGET, 9, 0, 0, &st);
		cr_expect_eq(st, 0x0302, "attempt %d: 0x%04x", i, st);
	}
}
