// SPDX-License-Identifier: MIT
/*
 * Start-up with remote back ends (ctl_gw_boot_wait): the gateway waits for each remote LUN's
 * first login or gateway.boot_wait, whichever comes first, over real libiscsi paths on
 * loopback. A back end that never answers (a listening socket nobody accepts on: the connect
 * completes, the login is never answered) costs at most the bound; one that refuses costs
 * nothing; a host that logs in meanwhile finds the LUN and gets NOT READY, becoming ready
 * (02/04/01) from it, which initiators retry.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "iscsi/harness.h"

static struct h H;
static bool H_up;
static int silent_fd = -1;

/* A port that accepts TCP connects (the kernel's backlog) and never says a word. */
static uint16_t silent_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);

	silent_fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert_geq(silent_fd, 0);
	cr_assert_eq(bind(silent_fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(silent_fd, 64), 0);
	cr_assert_eq(getsockname(silent_fd, (struct sockaddr *)&a, &len), 0);
	return ntohs(a.sin_port);
}

/* A port nothing listens on: connects are refused at once. */
static uint16_t closed_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert_geq(fd, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	close(fd);
	return ntohs(a.sin_port);
}

/* A gateway whose target has nluns remote LUNs, each with one path to port. */
static void start(uint16_t port, int nluns, const char *extra)
{
	static char buf[8192];
	int n;

	n = snprintf(buf, sizeof(buf),
		     "{ \"portals\": [ { \"name\": \"p0\", \"address\": \"127.0.0.1\", \"port\": 3260 } ],"
		     "  \"targets\": [ { \"name\": \"" H_TARGET "\", \"portals\": [\"p0\"],"
		     "    \"allow_any_initiator\": true,"
		     "    \"params\": { \"nop_interval\": 0, \"nop_timeout\": 0 }, \"luns\": [ ");
	for (int i = 0; i < nluns; i++)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n,
			      "%s{ \"lun\": %d, \"backstore\": { \"type\": \"remote\", %s"
			      " \"paths\": [ { \"url\": \"iscsi://127.0.0.1:%u/iqn.2026-11.org.test:be/0\""
			      " } ] } }", i ? ", " : "", i, extra, port);
	snprintf(buf + n, sizeof(buf) - (size_t)n, " ] } ] }");
	h_setup(&H, buf);
	H_up = true;
}

static void teardown(void)
{
	if (H_up) {
		ctl_gw_stop(H.cg);
		h_teardown(&H);
	}
	H_up = false;
	if (silent_fd >= 0)
		close(silent_fd);
	silent_fd = -1;
}

TestSuite(ctl_gw, .fini = teardown);

Test(ctl_gw, boot_wait_bounds_the_wait_for_back_ends_that_never_answer)
{
	uint64_t t0, ms;

	/* The defaults: login_timeout 5 s, one login attempt. */
	start(silent_port(), 16, "");
	t0 = gw_now_ms();
	cr_assert_eq(ctl_gw_boot_wait(&H.loop, H.cg, 600), -ETIMEDOUT);
	ms = gw_now_ms() - t0;
	cr_expect_geq(ms, 600);
	cr_expect_lt(ms, 1600, "the bound of 600 ms took %llu ms", (unsigned long long)ms);
	cr_expect_not(ctl_gw_settled(H.cg));
}

Test(ctl_gw, boot_wait_0_does_not_wait)
{
	uint64_t t0 = gw_now_ms();

	start(silent_port(), 1, "");
	cr_assert_eq(ctl_gw_boot_wait(&H.loop, H.cg, 0), -ETIMEDOUT);
	cr_expect_lt(gw_now_ms() - t0, 100);
}

Test(ctl_gw, the_first_login_attempt_ends_the_wait_before_the_bound)
{
	uint64_t t0, ms;

	/* One attempt of 1 s, well inside a 10 s bound: start-up stops waiting after it. */
	start(silent_port(), 4, "\"login_timeout\": 1,");
	t0 = gw_now_ms();
	cr_assert_eq(ctl_gw_boot_wait(&H.loop, H.cg, 10000), 0);
	ms = gw_now_ms() - t0;
	cr_expect_geq(ms, 900);
	cr_expect_lt(ms, 3000, "one 1 s attempt took %llu ms to settle", (unsigned long long)ms);
	cr_expect(ctl_gw_settled(H.cg));
}

Test(ctl_gw, a_refusing_back_end_settles_at_once)
{
	uint64_t t0, ms;

	start(closed_port(), 2, "");
	t0 = gw_now_ms();
	cr_assert_eq(ctl_gw_boot_wait(&H.loop, H.cg, 10000), 0);
	ms = gw_now_ms() - t0;
	cr_expect_lt(ms, 1000, "a refused connect settled after %llu ms", (unsigned long long)ms);
}

/* The answer (status, sense key/ASC/ASCQ) to one command of 6 or 10 bytes, past UAs. */
static void host_cmd(struct fake_conn *c, const uint8_t *cdb, uint32_t edtl, int *status,
		     uint8_t *key, uint8_t *asc, uint8_t *ascq)
{
	for (int i = 0; i < 4; i++) {
		struct pdu *rsp = NULL, *p;

		h_scsi_cmd(&H, c, 0x100 + (uint32_t)i, ISC_FL_F | (edtl ? ISC_FL_R : 0), cdb, 16,
			   edtl, NULL, 0);
		fake_dmv_settle(&H.loop);
		/* Data-In (INQUIRY) first, then the SCSI Response. */
		while ((p = fake_dmv_pop(c))) {
			if (pdu_bhs_opcode(p->bhs) == ISC_OP_SCSI_RSP) {
				if (rsp)
					pdu_put(rsp);
				rsp = p;
			} else if (pdu_bhs_opcode(p->bhs) == ISC_OP_DATA_IN &&
				   (p->bhs[1] & 0x01)) {
				/* Status in the last Data-In. */
				if (rsp)
					pdu_put(rsp);
				rsp = p;
			} else {
				pdu_put(p);
			}
		}
		cr_assert_not_null(rsp, "no answer to opcode %#x", cdb[0]);
		H.exp_statsn = pdu_get32(rsp->bhs, 24) + 1;
		*status = rsp->bhs[3];
		*key = *asc = *ascq = 0;
		if (pdu_bhs_opcode(rsp->bhs) == ISC_OP_SCSI_RSP && rsp->data_len >= 2 + 14) {
			*key = rsp->data[2 + 2] & 0x0f;
			*asc = rsp->data[2 + 12];
			*ascq = rsp->data[2 + 13];
		}
		pdu_put(rsp);
		if (*key != 0x06)	/* a unit attention: once per nexus and event */
			return;
	}
	cr_assert_fail("unit attentions never end");
}

Test(ctl_gw, a_host_that_logs_in_early_finds_the_lun_becoming_ready)
{
	static const uint8_t tur[16], rc10[16] = { 0x25 };
	static const uint8_t inq[16] = { 0x12, 0, 0, 0, 96 };
	struct fake_conn *c;
	uint8_t key, asc, ascq;
	uint16_t st;
	int status;

	start(silent_port(), 1, "");
	cr_assert_eq(ctl_gw_boot_wait(&H.loop, H.cg, 200), -ETIMEDOUT);
	c = h_connect(&H);
	h_login(&H, c, H_INITIATOR, H_TARGET, 1, 0, 0, &st);
	cr_assert_eq(st, 0);
	/* Not hidden: INQUIRY answers. */
	host_cmd(c, inq, 96, &status, &key, &asc, &ascq);
	cr_expect_eq(status, SCSI_GOOD, "INQUIRY: status %#x sense %x/%02x/%02x", status, key,
		     asc, ascq);
	/* Not failed hard either: NOT READY, becoming ready, which initiators retry. */
	host_cmd(c, tur, 0, &status, &key, &asc, &ascq);
	cr_expect_eq(status, 0x02);
	cr_expect_eq(key, 0x02);
	cr_expect_eq(asc, 0x04);
	cr_expect_eq(ascq, 0x01, "TEST UNIT READY: sense %x/%02x/%02x", key, asc, ascq);
	host_cmd(c, rc10, 8, &status, &key, &asc, &ascq);
	cr_expect_eq(key, 0x02);
	cr_expect_eq(asc, 0x04);
	cr_expect_eq(ascq, 0x01, "READ CAPACITY: sense %x/%02x/%02x", key, asc, ascq);
}
