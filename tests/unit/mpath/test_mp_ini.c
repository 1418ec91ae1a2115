// SPDX-License-Identifier: MIT
/*
 * The native initiator (gateway/mpath/mp_ini.c) against a real target, driven by
 * tests/integration/test_mp_ini.sh (skipped in `make test-unit`, where no target exists):
 * MP_INI_PORTAL and MP_INI_TARGET name it, MP_INI_LBAS its size in 512-byte blocks (at least
 * 16384), MP_INI_CHAP_USER/SECRET (and MP_INI_MUTUAL_USER/SECRET) the CHAP it requires,
 * MP_INI_REDIRECTS how many redirects its login takes (tgtd's RedirectAddress), and
 * MP_INI_LOOP_PORTAL and MP_INI_LOOP_TARGET a target that redirects every login, forever.
 * The redirect tests at the end run everywhere: a fake target on loopback answers the login.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gw_loop.h"
#include "mp_ini.h"

struct rig {
	struct gw_loop loop;
	struct mp_ini *ini;
	int login;		/* 0 waiting, 1 logged in, -1 failed */
	int outstanding;
	int bad;
	int last_status;
	uint32_t last_data;
};

static const char *env(const char *k)
{
	const char *v = getenv(k);

	return v && v[0] ? v : NULL;
}

static int rig_lun(void)
{
	return env("MP_INI_LUN") ? atoi(env("MP_INI_LUN")) : 1;
}

static void rig_event(struct mp_ini *ini, int err, void *arg)
{
	struct rig *r = arg;

	(void)ini;
	r->login = err ? -1 : 1;
}

static void rig_done(void *arg, const struct mp_ini_result *res)
{
	struct rig *r = arg;

	r->outstanding--;
	r->last_status = res->status;
	r->last_data = res->data_len;
	if (res->status != 0)
		r->bad++;
}

static void rig_wait(struct rig *r, bool for_login)
{
	uint64_t end = gw_now_ms() + 30000;

	while (gw_now_ms() < end && (for_login ? r->login == 0 : r->outstanding > 0 && r->login > 0))
		gw_loop_run_once(&r->loop, 100);
}

static void rig_start_target(struct rig *r, const char *portal, const char *target,
			     const char *secret)
{
	struct mp_ini_conf c = {
		.portal = portal,
		.target = target,
		.initiator = "iqn.2026-11.org.isergw:test-mp-ini",
		.chap_user = env("MP_INI_CHAP_USER"),
		.chap_secret = secret,
		.mutual_user = env("MP_INI_MUTUAL_USER"),
		.mutual_secret = env("MP_INI_MUTUAL_SECRET"),
		.header_digest = env("MP_INI_HDIGEST") != NULL,
		.data_digest = env("MP_INI_DDIGEST") != NULL,
	};

	memset(r, 0, sizeof(*r));
	signal(SIGPIPE, SIG_IGN);
	cr_assert_eq(gw_loop_init(&r->loop), 0);
	cr_assert_eq(mp_ini_create(&r->loop, &c, rig_event, r, &r->ini), 0);
}

static void rig_open(struct rig *r, const char *secret)
{
	rig_start_target(r, env("MP_INI_PORTAL"), env("MP_INI_TARGET"), secret);
	rig_wait(r, true);
}

static void rig_close(struct rig *r)
{
	mp_ini_destroy(r->ini);
	gw_loop_fini(&r->loop);
}

static void rw16(uint8_t cdb[16], uint8_t op, uint64_t lba, uint32_t n)
{
	memset(cdb, 0, 16);
	cdb[0] = op;
	for (int i = 0; i < 8; i++)
		cdb[2 + i] = (uint8_t)(lba >> (56 - 8 * i));
	for (int i = 0; i < 4; i++)
		cdb[10 + i] = (uint8_t)(n >> (24 - 8 * i));
}

static bool live(void)
{
	return env("MP_INI_PORTAL") && env("MP_INI_TARGET");
}

Test(mp_ini, login_capacity_nop)
{
	struct rig r;
	uint8_t cdb[16] = { 0x9e, 0x10 }, cap[32];
	struct iovec iov = { cap, sizeof(cap) };
	uint64_t lba = 0;

	if (!live())
		cr_skip_test("no target (tests/integration/test_mp_ini.sh runs this)");
	rig_open(&r, env("MP_INI_CHAP_SECRET"));
	cr_assert_eq(r.login, 1, "login: %s", mp_ini_error(r.ini));
	cdb[13] = 32;
	r.outstanding = 1;
	cr_assert_eq(mp_ini_command(r.ini, rig_lun(), cdb, 16, MP_INI_READ, &iov, 1, 32, rig_done, &r), 0);
	rig_wait(&r, false);
	cr_assert_eq(r.outstanding, 0, "%s", mp_ini_error(r.ini));
	/* The unit attention after login, then the answer. */
	if (r.last_status == 2) {
		r.outstanding = 1;
		r.bad = 0;
		mp_ini_command(r.ini, rig_lun(), cdb, 16, MP_INI_READ, &iov, 1, 32, rig_done, &r);
		rig_wait(&r, false);
	}
	cr_assert_eq(r.last_status, 0);
	cr_assert_geq(r.last_data, 12);
	for (int i = 0; i < 8; i++)
		lba = lba << 8 | cap[i];
	cr_assert_geq(lba + 1, 16384, "capacity %llu blocks", (unsigned long long)lba + 1);
	r.outstanding = 1;
	cr_assert_eq(mp_ini_nop(r.ini, rig_done, &r), 0);
	rig_wait(&r, false);
	cr_assert_eq(r.outstanding, 0);
	cr_assert_eq(r.last_status, 0);
	rig_close(&r);
}

/* Writes then reads back sizes that cover immediate data only, unsolicited Data-Out beyond
 * it, and R2Ts past FirstBurstLength and past MaxBurstLength, over a scattered iovec. */
Test(mp_ini, write_read_verify)
{
	static const uint32_t sizes[] = { 512, 4096, 8192 + 512, 65536, 262144 + 4096, 1u << 20,
					  3u << 20 };
	struct rig r;
	uint8_t cdb[16];
	struct mp_ini_stats st;

	if (!live())
		cr_skip_test("no target (tests/integration/test_mp_ini.sh runs this)");
	rig_open(&r, env("MP_INI_CHAP_SECRET"));
	cr_assert_eq(r.login, 1, "login: %s", mp_ini_error(r.ini));
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		uint32_t len = sizes[k];
		uint8_t *w = malloc(len), *rd = malloc(len);
		/* Three pieces of uneven sizes. */
		uint32_t a = len / 3 & ~1u, b = len / 5 | 1u;
		struct iovec wv[3] = { { w, a }, { w + a, b }, { w + a + b, len - a - b } };
		struct iovec rv[3] = { { rd, b }, { rd + b, a }, { rd + a + b, len - a - b } };

		cr_assert(w && rd);
		for (uint32_t i = 0; i < len; i++)
			w[i] = (uint8_t)(i * 7 + k * 13 + (i >> 9));
		memset(rd, 0xee, len);
		for (int attempt = 0; attempt < 3; attempt++) {
			rw16(cdb, 0x8a, 64, len / 512);
			r.outstanding = 1;
			r.bad = 0;
			cr_assert_eq(mp_ini_command(r.ini, rig_lun(), cdb, 16, MP_INI_WRITE, wv, 3, len,
						    rig_done, &r), 0);
			rig_wait(&r, false);
			if (r.last_status != 2)
				break;	/* unit attention: again */
		}
		cr_assert_eq(r.outstanding, 0, "write of %u: %s", len, mp_ini_error(r.ini));
		cr_assert_eq(r.last_status, 0, "write of %u bytes: status %d", len, r.last_status);
		rw16(cdb, 0x88, 64, len / 512);
		r.outstanding = 1;
		cr_assert_eq(mp_ini_command(r.ini, rig_lun(), cdb, 16, MP_INI_READ, rv, 3, len, rig_done, &r),
			     0);
		rig_wait(&r, false);
		cr_assert_eq(r.last_status, 0, "read of %u bytes: status %d", len, r.last_status);
		cr_assert_eq(r.last_data, len);
		cr_assert(memcmp(w, rd, len) == 0, "read back of %u bytes differs", len);
		free(w);
		free(rd);
	}
	mp_ini_stats(r.ini, &st);
	cr_log_info("negotiated: MRDSL %u, burst %u/%u, InitialR2T %d, ImmediateData %d, hd %d, "
		    "dd %d, direct bytes %llu", st.max_send_dsl, st.first_burst, st.max_burst,
		    st.initial_r2t, st.immediate_data, st.header_digest, st.data_digest,
		    (unsigned long long)st.direct_bytes);
	/* Both targets of the suite accept CRC32C: every byte above went with digests. */
	cr_assert_eq(st.header_digest, env("MP_INI_HDIGEST") != NULL);
	cr_assert_eq(st.data_digest, env("MP_INI_DDIGEST") != NULL);
	cr_assert_gt(st.direct_bytes, 0, "no Data-In was read straight into the iovec");
	rig_close(&r);
}

/* 4 KiB reads at queue depth 32 many times over: the system calls per command show the
 * batching (libiscsi makes about 3 per read). A generous bound: less than 1.5. */
Test(mp_ini, batched_qd32)
{
	enum { QD = 32, ROUNDS = 200 };
	static uint8_t bufs[QD][4096];
	struct iovec iov[QD];
	struct mp_ini_stats a, b;
	struct rig r;
	uint8_t cdb[16];
	double per;

	if (!live())
		cr_skip_test("no target (tests/integration/test_mp_ini.sh runs this)");
	rig_open(&r, env("MP_INI_CHAP_SECRET"));
	cr_assert_eq(r.login, 1, "login: %s", mp_ini_error(r.ini));
	/* Past the unit attention. */
	rw16(cdb, 0x88, 0, 8);
	iov[0].iov_base = bufs[0];
	iov[0].iov_len = 4096;
	for (int i = 0; i < 3; i++) {
		r.outstanding = 1;
		mp_ini_command(r.ini, rig_lun(), cdb, 16, MP_INI_READ, iov, 1, 4096, rig_done, &r);
		rig_wait(&r, false);
	}
	r.bad = 0;
	mp_ini_stats(r.ini, &a);
	for (int round = 0; round < ROUNDS; round++) {
		for (int i = 0; i < QD; i++) {
			iov[i].iov_base = bufs[i];
			iov[i].iov_len = 4096;
			rw16(cdb, 0x88, (uint64_t)i * 8, 8);
			r.outstanding++;
			cr_assert_eq(mp_ini_command(r.ini, rig_lun(), cdb, 16, MP_INI_READ, &iov[i], 1, 4096,
						    rig_done, &r), 0);
		}
		rig_wait(&r, false);
		cr_assert_eq(r.outstanding, 0, "%s", mp_ini_error(r.ini));
	}
	cr_assert_eq(r.bad, 0);
	mp_ini_stats(r.ini, &b);
	per = (double)(b.reads + b.writes - a.reads - a.writes) / (QD * ROUNDS);
	cr_log_info("system calls per 4 KiB read at QD %d: %.2f", QD, per);
	cr_assert_lt(per, 1.5, "%.2f system calls per command", per);
	rig_close(&r);
}

Test(mp_ini, chap_wrong_secret_refused)
{
	struct rig r;

	if (!live() || !env("MP_INI_CHAP_USER"))
		cr_skip_test("no CHAP target (tests/integration/test_mp_ini.sh runs this)");
	rig_open(&r, "not-the-secret-at-all");
	cr_assert_eq(r.login, -1);
	cr_assert(strstr(mp_ini_error(r.ini), "authentication failed"), "%s",
		  mp_ini_error(r.ini));
	rig_close(&r);
}

/* 512 KiB reads at queue depth 8, the proxy bench's read row: the Data-In data should land
 * in the commands' buffers without a copy through the receive buffer, whatever the target's
 * Data-In segment size, and the data must be right. */
Test(mp_ini, read_512k_qd8_in_place)
{
	enum { QD = 8, ROUNDS = 16, LEN = 512 * 1024 };
	struct iovec iov[QD][2];
	struct mp_ini_stats a, b;
	uint8_t *bufs[QD], *w, cdb[16];
	uint64_t data, direct;
	struct rig r;

	if (!live())
		cr_skip_test("no target (tests/integration/test_mp_ini.sh runs this)");
	rig_open(&r, env("MP_INI_CHAP_SECRET"));
	cr_assert_eq(r.login, 1, "login: %s", mp_ini_error(r.ini));
	w = malloc(LEN);
	cr_assert(w);
	for (uint32_t i = 0; i < LEN; i++)
		w[i] = (uint8_t)(i * 11 + (i >> 12));
	for (int attempt = 0; attempt < 3; attempt++) {
		struct iovec wv = { w, LEN };

		rw16(cdb, 0x8a, 2048, LEN / 512);
		r.outstanding = 1;
		cr_assert_eq(mp_ini_command(r.ini, rig_lun(), cdb, 16, MP_INI_WRITE, &wv, 1, LEN,
					    rig_done, &r), 0);
		rig_wait(&r, false);
		if (r.last_status != 2)
			break;	/* unit attention: again */
	}
	cr_assert_eq(r.last_status, 0, "write: status %d (%s)", r.last_status, mp_ini_error(r.ini));
	for (int i = 0; i < QD; i++) {
		bufs[i] = malloc(LEN);
		cr_assert(bufs[i]);
		/* Two pieces, the first not a multiple of 4: padding and piece edges move. */
		iov[i][0] = (struct iovec){ bufs[i], 4096 * (size_t)i + 1000 };
		iov[i][1] = (struct iovec){ bufs[i] + iov[i][0].iov_len, LEN - iov[i][0].iov_len };
	}
	r.bad = 0;
	mp_ini_stats(r.ini, &a);
	for (int round = 0; round < ROUNDS; round++) {
		for (int i = 0; i < QD; i++) {
			memset(bufs[i], 0xee, LEN);
			rw16(cdb, 0x88, 2048, LEN / 512);
			r.outstanding++;
			cr_assert_eq(mp_ini_command(r.ini, rig_lun(), cdb, 16, MP_INI_READ, iov[i], 2,
						    LEN, rig_done, &r), 0);
		}
		rig_wait(&r, false);
		cr_assert_eq(r.outstanding, 0, "%s", mp_ini_error(r.ini));
		cr_assert_eq(r.bad, 0);
		for (int i = 0; i < QD; i++)
			cr_assert(memcmp(bufs[i], w, LEN) == 0, "round %d, read %d differs", round, i);
	}
	mp_ini_stats(r.ini, &b);
	data = (uint64_t)QD * ROUNDS * LEN;
	direct = b.direct_bytes - a.direct_bytes;
	cr_log_info("512 KiB reads at QD %d: %.0f%% of the data read in place, %.1f system calls "
		    "and %.1f PDUs in per read", QD, 100.0 * (double)direct / (double)data,
		    (double)(b.reads + b.writes - a.reads - a.writes) / (QD * ROUNDS),
		    (double)(b.pdus_in - a.pdus_in) / (QD * ROUNDS));
	cr_assert_geq(direct * 10, data * 9, "only %llu of %llu bytes read in place",
		      (unsigned long long)direct, (unsigned long long)data);
	for (int i = 0; i < QD; i++)
		free(bufs[i]);
	free(w);
	rig_close(&r);
}

struct tmf_rig {
	int cmd_calls, cmd_status;
	int tmf_calls, tmf_response;
};

static void tmf_cmd_done(void *arg, const struct mp_ini_result *res)
{
	struct tmf_rig *t = arg;

	t->cmd_calls++;
	t->cmd_status = res->status;
}

static void tmf_done(void *arg, const struct mp_ini_result *res)
{
	struct tmf_rig *t = arg;

	t->tmf_calls++;
	t->tmf_response = res->status;
}

static void tmf_wait(struct rig *r, struct tmf_rig *t, int cmds, int tmfs)
{
	uint64_t end = gw_now_ms() + 30000;

	while (gw_now_ms() < end && (t->cmd_calls < cmds || t->tmf_calls < tmfs) && r->login > 0)
		gw_loop_run_once(&r->loop, 100);
}

/* A read then ABORT TASK for it in the same batch: the target either finishes the read first
 * (the abort finds no task: response 0 or 1) or aborts it (the read ends -ECANCELED). Either
 * way each callback runs exactly once, and the session goes on serving. ABORT TASK of a
 * command not in flight is refused. Then LUN RESET:
 * function complete, and a read after it still works (past the reset's unit attention). */
Test(mp_ini, abort_task_and_lun_reset)
{
	static uint8_t buf[65536];
	struct iovec iov = { buf, sizeof(buf) };
	struct tmf_rig t = { 0 };
	uint8_t cdb[16];
	struct rig r;
	int rc;

	if (!live())
		cr_skip_test("no target (tests/integration/test_mp_ini.sh runs this)");
	rig_open(&r, env("MP_INI_CHAP_SECRET"));
	cr_assert_eq(r.login, 1, "login: %s", mp_ini_error(r.ini));
	rw16(cdb, 0x88, 0, sizeof(buf) / 512);
	cr_assert_eq(mp_ini_command(r.ini, rig_lun(), cdb, 16, MP_INI_READ, &iov, 1, sizeof(buf),
				    tmf_cmd_done, &t), 0);
	/* In the same writev as the read (sent at the end of the loop round). */
	rc = mp_ini_tmf(r.ini, MP_INI_ABORT_TASK, rig_lun(), &t, tmf_done, &t);
	cr_assert_eq(rc, 0, "ABORT TASK: %d", rc);
	tmf_wait(&r, &t, 1, 1);
	cr_assert_eq(t.tmf_calls, 1, "%s", mp_ini_error(r.ini));
	cr_assert(t.tmf_response == 0 || t.tmf_response == 1, "ABORT TASK response %d",
		  t.tmf_response);
	cr_assert_eq(t.cmd_calls, 1);
	cr_assert(t.cmd_status == -ECANCELED || t.cmd_status >= 0);
	cr_log_info("ABORT TASK: response %d, the read ended with %d", t.tmf_response,
		    t.cmd_status);
	cr_assert_eq(mp_ini_tmf(r.ini, MP_INI_ABORT_TASK, rig_lun(), &r, tmf_done, &t), -ENOENT);
	t.tmf_calls = 0;
	cr_assert_eq(mp_ini_tmf(r.ini, MP_INI_LUN_RESET, rig_lun(), NULL, tmf_done, &t), 0);
	tmf_wait(&r, &t, 0, 1);
	cr_assert_eq(t.tmf_calls, 1, "%s", mp_ini_error(r.ini));
	cr_assert_eq(t.tmf_response, 0, "LUN RESET response %d", t.tmf_response);
	for (int i = 0; i < 3; i++) {
		r.outstanding = 1;
		cr_assert_eq(mp_ini_command(r.ini, rig_lun(), cdb, 16, MP_INI_READ, &iov, 1,
					    sizeof(buf), rig_done, &r), 0);
		rig_wait(&r, false);
		if (r.last_status != 2)
			break;	/* the reset's unit attention: again */
	}
	cr_assert_eq(r.last_status, 0, "read after LUN RESET: %d (%s)", r.last_status,
		     mp_ini_error(r.ini));
	rig_close(&r);
}

/* Logout: the target answers 0, the session is over without an error event, and nothing
 * more can be sent on it. */
Test(mp_ini, logout)
{
	struct tmf_rig t = { 0 };
	uint8_t cdb[16] = { 0 };
	struct rig r;

	if (!live())
		cr_skip_test("no target (tests/integration/test_mp_ini.sh runs this)");
	rig_open(&r, env("MP_INI_CHAP_SECRET"));
	cr_assert_eq(r.login, 1, "login: %s", mp_ini_error(r.ini));
	cr_assert_eq(mp_ini_logout(r.ini, tmf_done, &t), 0);
	tmf_wait(&r, &t, 0, 1);
	cr_assert_eq(t.tmf_calls, 1, "%s", mp_ini_error(r.ini));
	cr_assert_eq(t.tmf_response, 0, "Logout response %d", t.tmf_response);
	/* A while longer: the target's close must not read as a failure. */
	for (int i = 0; i < 5; i++)
		gw_loop_run_once(&r.loop, 20);
	cr_assert_eq(r.login, 1, "an error event after Logout: %s", mp_ini_error(r.ini));
	cr_assert_eq(mp_ini_command(r.ini, rig_lun(), cdb, 6, MP_INI_NONE, NULL, 0, 0, rig_done, &r),
		     -ENOTCONN);
	rig_close(&r);
}

/* The login through MP_INI_PORTAL took the redirects tgtd was told to make, and what the other
 * tests wrote and read back went through the portal it was sent to. */
Test(mp_ini, redirected_login)
{
	struct mp_ini_stats st;
	struct rig r;

	if (!live() || !env("MP_INI_REDIRECTS"))
		cr_skip_test("no redirecting target (tests/integration/test_mp_ini.sh runs this)");
	rig_open(&r, env("MP_INI_CHAP_SECRET"));
	cr_assert_eq(r.login, 1, "login: %s", mp_ini_error(r.ini));
	mp_ini_stats(r.ini, &st);
	cr_assert_eq(st.redirects, (uint32_t)atoi(env("MP_INI_REDIRECTS")));
	rig_close(&r);
}

/* A target that redirects every login (tgtd told to send us to an address that is not ours):
 * the login fails, naming the loop, instead of going round until the path's login_timeout. */
Test(mp_ini, redirect_loop_refused_tgtd)
{
	struct rig r;

	if (!env("MP_INI_LOOP_PORTAL") || !env("MP_INI_LOOP_TARGET"))
		cr_skip_test("no looping target (tests/integration/test_mp_ini.sh runs this)");
	rig_start_target(&r, env("MP_INI_LOOP_PORTAL"), env("MP_INI_LOOP_TARGET"), NULL);
	rig_wait(&r, true);
	cr_assert_eq(r.login, -1);
	cr_assert(strstr(mp_ini_error(r.ini), "redirect loop"), "%s", mp_ini_error(r.ini));
	rig_close(&r);
}

/* ---- a fake target: enough of a login to redirect or refuse it ------------------------------ */

struct fake {
	int lfd;
	int port;
	bool v6;
	uint8_t isid[6];	/* of the last login request */
	uint16_t tsih;
	int logins;
};

static void fake_listen(struct fake *f, bool v6)
{
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	struct sockaddr_in a4 = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_storage got;
	socklen_t l = sizeof(got);

	memset(f, 0, sizeof(*f));
	f->v6 = v6;
	f->lfd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(f->lfd, 0);
	if (v6)
		cr_assert_eq(bind(f->lfd, (struct sockaddr *)&a6, sizeof(a6)), 0);
	else
		cr_assert_eq(bind(f->lfd, (struct sockaddr *)&a4, sizeof(a4)), 0);
	cr_assert_eq(listen(f->lfd, 16), 0);
	cr_assert_eq(getsockname(f->lfd, (struct sockaddr *)&got, &l), 0);
	f->port = ntohs(v6 ? ((struct sockaddr_in6 *)&got)->sin6_port :
			     ((struct sockaddr_in *)&got)->sin_port);
}

/* Runs the initiator's loop until fd is readable; false after 20 s or if the login ended. */
static bool fake_pump(struct rig *r, int fd)
{
	uint64_t end = gw_now_ms() + 20000;

	while (gw_now_ms() < end && r->login == 0) {
		struct pollfd p = { .fd = fd, .events = POLLIN };

		if (poll(&p, 1, 0) == 1)
			return true;
		gw_loop_run_once(&r->loop, 10);
	}
	return false;
}

static bool fake_read(int fd, uint8_t *b, size_t n)
{
	return recv(fd, b, n, MSG_WAITALL) == (ssize_t)n;
}

/* Accepts the next connection, reads its login request and answers status cls/det with
 * TargetAddress=addr (none if addr is NULL), then closes. False if no login came. */
static bool fake_answer(struct fake *f, struct rig *r, uint8_t cls, uint8_t det, const char *addr)
{
	uint8_t h[48], rsp[48 + 256] = { 0 }, data[8192];
	uint32_t dsl, len = 0;
	int cfd;

	if (!fake_pump(r, f->lfd))
		return false;
	cfd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
	cr_assert_geq(cfd, 0);
	if (!fake_pump(r, cfd) || !fake_read(cfd, h, 48)) {
		close(cfd);
		return false;
	}
	cr_assert_eq(h[0] & 0x3f, 0x03, "not a login request: opcode %#x", h[0]);
	dsl = (uint32_t)h[5] << 16 | (uint32_t)h[6] << 8 | h[7];
	cr_assert_leq(dsl, sizeof(data));
	cr_assert(fake_read(cfd, data, (dsl + 3) & ~3u));
	memcpy(f->isid, h + 8, 6);
	f->tsih = (uint16_t)(h[14] << 8 | h[15]);
	f->logins++;
	rsp[0] = 0x23;
	memcpy(rsp + 8, h + 8, 8);		/* ISID, TSIH */
	memcpy(rsp + 16, h + 16, 4);		/* ITT */
	rsp[31] = 1;				/* ExpCmdSN */
	rsp[35] = 1;				/* MaxCmdSN */
	rsp[36] = cls;
	rsp[37] = det;
	if (addr)
		len = (uint32_t)snprintf((char *)rsp + 48, 200, "TargetAddress=%s", addr) + 1;
	rsp[7] = (uint8_t)len;
	cr_assert_eq(send(cfd, rsp, 48 + ((len + 3) & ~3u), MSG_NOSIGNAL),
		     (ssize_t)(48 + ((len + 3) & ~3u)));
	close(cfd);
	return true;
}

static void fake_rig(struct rig *r, struct fake *f)
{
	char portal[64];

	snprintf(portal, sizeof(portal), f->v6 ? "[::1]:%d" : "127.0.0.1:%d", f->port);
	memset(r, 0, sizeof(*r));
	signal(SIGPIPE, SIG_IGN);
	cr_assert_eq(gw_loop_init(&r->loop), 0);
	{
		struct mp_ini_conf c = {
			.portal = portal, .target = "iqn.2026-11.org.isergw:fake",
			.initiator = "iqn.2026-11.org.isergw:test-mp-ini",
		};

		cr_assert_eq(mp_ini_create(&r->loop, &c, rig_event, r, &r->ini), 0);
	}
}

/* The login at a is redirected (temporarily) to "to", where b refuses it (target not found):
 * the login's end. */
static void fake_redirect_refused(struct rig *r, struct fake *a, struct fake *b, const char *to)
{
	fake_rig(r, a);
	cr_assert(fake_answer(a, r, 1, 1, to));
	cr_assert(fake_answer(b, r, 2, 3, NULL), "no login at %s: %s", to, mp_ini_error(r->ini));
	rig_wait(r, true);
	cr_assert_eq(r->login, -1);
	cr_assert(strstr(mp_ini_error(r->ini), "target not found"), "%s", mp_ini_error(r->ini));
}

/* Redirected (temporary, with a portal group tag) from one portal to another (IPv6 if this
 * host has ::1): the second login carries the same ISID and no TSIH, and a refusal there is
 * the login's end. */
Test(mp_ini, redirect_followed_same_isid)
{
	struct fake a, b;
	struct mp_ini_stats st;
	struct rig r;
	char to[64];
	int s6 = socket(AF_INET6, SOCK_STREAM, 0);
	struct sockaddr_in6 probe = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	bool v6 = s6 >= 0 && bind(s6, (struct sockaddr *)&probe, sizeof(probe)) == 0;

	if (s6 >= 0)
		close(s6);
	fake_listen(&a, false);
	fake_listen(&b, v6);
	snprintf(to, sizeof(to), v6 ? "[::1]:%d,7" : "127.0.0.1:%d,7", b.port);
	fake_redirect_refused(&r, &a, &b, to);
	cr_assert_eq(memcmp(a.isid, b.isid, 6), 0, "the ISID changed across the redirect");
	cr_assert_eq(b.tsih, 0);
	mp_ini_stats(r.ini, &st);
	cr_assert_eq(st.redirects, 1);
	/* Where it went, as the path's state shows it: the portal group tag dropped. */
	snprintf(to, sizeof(to), v6 ? "[::1]:%d" : "127.0.0.1:%d", b.port);
	cr_assert_not_null(mp_ini_redirected_to(r.ini));
	cr_assert_str_eq(mp_ini_redirected_to(r.ini), to);
	cr_assert_str_eq(mp_ini_address(r.ini), to);
	rig_close(&r);
	close(a.lfd);
	close(b.lfd);
}

/* A redirect to a DNS name (/etc/hosts answers localhost: no query leaves the host) is looked
 * up off the loop and followed; the address connected to is the numeric one. */
Test(mp_ini, redirect_to_a_name_resolved_off_the_loop)
{
	struct fake a, b;
	struct rig r;
	char to[64], want[64];

	fake_listen(&a, false);
	fake_listen(&b, false);
	snprintf(to, sizeof(to), "localhost:%d", b.port);
	fake_redirect_refused(&r, &a, &b, to);
	cr_assert_str_eq(mp_ini_redirected_to(r.ini), to);
	snprintf(want, sizeof(want), "127.0.0.1:%d", b.port);
	cr_assert_str_eq(mp_ini_address(r.ini), want);
	rig_close(&r);
	close(a.lfd);
	close(b.lfd);
}

/* Destroyed while its portal's name is being looked up: no callback after, nothing touched
 * (run under ASan by make test-sanitize), and the loop keeps running. */
Test(mp_ini, destroyed_during_the_name_lookup)
{
	struct mp_ini_conf c = {
		.portal = "localhost:9", .target = "iqn.2026-11.org.isergw:fake",
		.initiator = "iqn.2026-11.org.isergw:test-mp-ini",
	};
	struct gw_loop loop;
	struct rig rs[20];	/* one per connection: whose callback ran */
	int at_destroy[20];

	memset(rs, 0, sizeof(rs));
	cr_assert_eq(gw_loop_init(&loop), 0);
	for (int i = 0; i < 20; i++) {
		cr_assert_eq(mp_ini_create(&loop, &c, rig_event, &rs[i], &rs[i].ini), 0);
		cr_assert_str_eq(mp_ini_resolving(rs[i].ini), "localhost");
		/* Half of them after a loop round: the answer may be posted, or have come (and
		 * the refused connect called back, which is its right before the destroy). */
		if (i & 1)
			gw_loop_run_once(&loop, 0);
		at_destroy[i] = rs[i].login;
		mp_ini_destroy(rs[i].ini);
	}
	for (int i = 0; i < 20; i++)
		gw_loop_run_once(&loop, 10);
	for (int i = 0; i < 20; i++)
		cr_assert_eq(rs[i].login, at_destroy[i], "connection %d called back when destroyed", i);
	gw_loop_fini(&loop);
}

/* Permanent redirects to itself: followed 8 times, then the login fails naming the loop. */
Test(mp_ini, redirect_loop_refused)
{
	struct mp_ini_stats st;
	struct fake f;
	struct rig r;
	char to[64];

	fake_listen(&f, false);
	snprintf(to, sizeof(to), "127.0.0.1:%d", f.port);
	fake_rig(&r, &f);
	while (fake_answer(&f, &r, 1, 2, to))
		;
	rig_wait(&r, true);
	cr_assert_eq(r.login, -1);
	cr_assert(strstr(mp_ini_error(r.ini), "redirect loop"), "%s", mp_ini_error(r.ini));
	cr_assert_eq(f.logins, 9, "%d logins", f.logins);
	mp_ini_stats(r.ini, &st);
	cr_assert_eq(st.redirects, 8);
	rig_close(&r);
	close(f.lfd);
}

/* A redirect to something that is not host[:port][,tpgt], or to nowhere: a login failure that
 * says so, and no connection attempted. */
Test(mp_ini, redirect_malformed_refused)
{
	static const char *const bad[] = {
		"", "host:", "[::1", "[::1]x", "127.0.0.1:99999", "127.0.0.1:0", "127.0.0.1:32a",
		"127.0.0.1:3260,", "127.0.0.1:3260,x", "::1:3260", "a b", ":3260", "[]:3260",
		"h\xc3\xa9te:3260",
		NULL,	/* no TargetAddress key at all */
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *to = bad[i], *shown = to ? to : "(none)";
		const char *want = to && to[0] ? "malformed TargetAddress" : "without a TargetAddress";
		struct fake f;
		struct rig r;

		fake_listen(&f, false);
		fake_rig(&r, &f);
		cr_assert(fake_answer(&f, &r, 1, 1, to));
		rig_wait(&r, true);
		cr_assert_eq(r.login, -1, "\"%s\" was followed", shown);
		cr_assert(strstr(mp_ini_error(r.ini), want), "\"%s\": %s", shown,
			  mp_ini_error(r.ini));
		cr_assert_eq(f.logins, 1);
		rig_close(&r);
		close(f.lfd);
	}
}
