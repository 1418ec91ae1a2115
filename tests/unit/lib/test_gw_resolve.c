// SPDX-License-Identifier: MIT
/*
 * The resolver (lib/gw_resolve.c), included so that its getaddrinfo can be a fake: a lookup
 * that waits until the test lets it go (a DNS server that does not answer), one that says the
 * name does not exist. Real lookups are of names /etc/hosts answers (localhost): nothing here
 * sends a DNS query. The dead-DNS-server case for real is tests/integration/test_resolve.sh.
 */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "../../../lib/gw_resolve.c"

static struct gw_loop loop;

static pthread_mutex_t fk_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fk_cv = PTHREAD_COND_INITIALIZER;
static bool fk_release;
static int fk_calls;

/* "gone.test" does not exist; any other name under .test waits for fk_release, then fails as
 * an unanswered query does; anything else (localhost) is looked up for real, in /etc/hosts. */
static int fake_gai(const char *host, const char *port, const struct addrinfo *hints,
		    struct addrinfo **res)
{
	size_t n = strlen(host);

	pthread_mutex_lock(&fk_mu);
	fk_calls++;
	pthread_cond_broadcast(&fk_cv);
	if (strcmp(host, "gone.test") && n > 5 && !strcmp(host + n - 5, ".test")) {
		while (!fk_release)
			pthread_cond_wait(&fk_cv, &fk_mu);
		pthread_mutex_unlock(&fk_mu);
		return EAI_AGAIN;
	}
	pthread_mutex_unlock(&fk_mu);
	if (!strcmp(host, "gone.test"))
		return EAI_NONAME;
	return getaddrinfo(host, port, hints, res);
}

static void setup(void)
{
	cr_assert_eq(gw_loop_init(&loop), 0);
	rs.gai = fake_gai;
	fk_release = false;
	fk_calls = 0;
}

static void release_stuck(void)
{
	pthread_mutex_lock(&fk_mu);
	fk_release = true;
	pthread_cond_broadcast(&fk_cv);
	pthread_mutex_unlock(&fk_mu);
}

static void teardown(void)
{
	struct gw_resolve_stats st;

	release_stuck();
	/* Let every lookup end, so that no thread is inside the fake when the next test starts. */
	for (int i = 0; i < 500; i++) {
		gw_resolve_stats(&st);
		if (!st.pending)
			break;
		gw_loop_run_once(&loop, 10);
	}
	gw_loop_fini(&loop);
}

/* No .timeout on these tests (Criterion 2.4's runner leaks with several in parallel). */
TestSuite(resolve, .init = setup, .fini = teardown);

struct answer {
	int calls;
	int err;
	char addr[64];
};

static void answer_fn(void *arg, int err, const struct gw_addr *a)
{
	struct answer *an = arg;

	cr_assert_eq(gw_loop_current(), &loop, "the answer comes on the requesting loop");
	an->calls++;
	an->err = err;
	if (a)
		gw_addr_str(a, an->addr, sizeof(an->addr));
}

/* Runs the loop until the answer came or 10 s passed. */
static void wait_answer(struct answer *an)
{
	uint64_t end = gw_now_ms() + 10000;

	while (!an->calls && gw_now_ms() < end)
		gw_loop_run_once(&loop, 50);
}

Test(resolve, numeric_addresses_are_answered_at_once)
{
	struct gw_resolve *r = NULL;
	struct gw_addr a;
	char buf[64];

	cr_assert_eq(gw_resolve_start(&loop, "192.0.2.7", "3260", answer_fn, NULL, &a, &r), 1);
	cr_assert_null(r, "no request for a numeric address");
	cr_expect_str_eq(gw_addr_str(&a, buf, sizeof(buf)), "192.0.2.7:3260");
	cr_assert_eq(gw_resolve_start(&loop, "2001:db8::1", "3261", answer_fn, NULL, &a, &r), 1);
	cr_expect_str_eq(gw_addr_str(&a, buf, sizeof(buf)), "[2001:db8::1]:3261");
	cr_expect_eq(fk_calls, 0, "no thread looked anything up");
	cr_expect_eq(gw_resolve_numeric("localhost", "3260", &a), -EINVAL,
		     "a name is not numeric");
	cr_expect_eq(gw_resolve_start(&loop, "", "3260", answer_fn, NULL, &a, &r), -EINVAL);
	cr_expect_eq(gw_resolve_start(&loop, "h", "", answer_fn, NULL, &a, &r), -EINVAL);
}

Test(resolve, localhost_comes_back_on_the_loop)
{
	struct answer an = { 0 };
	struct gw_resolve *r = NULL;
	struct gw_addr a;

	cr_assert_eq(gw_resolve_start(&loop, "localhost", "3260", answer_fn, &an, &a, &r), 0);
	cr_assert_not_null(r);
	cr_expect_eq(an.calls, 0, "never inside the call");
	wait_answer(&an);
	cr_assert_eq(an.calls, 1);
	cr_expect_eq(an.err, 0);
	cr_expect(!strcmp(an.addr, "127.0.0.1:3260") || !strcmp(an.addr, "[::1]:3260"),
		  "localhost is %s", an.addr);
}

Test(resolve, a_name_that_does_not_exist_says_so)
{
	struct answer an = { 0 };
	struct gw_resolve *r = NULL;
	struct gw_addr a;

	cr_assert_eq(gw_resolve_start(&loop, "gone.test", "3260", answer_fn, &an, &a, &r), 0);
	wait_answer(&an);
	cr_assert_eq(an.calls, 1);
	cr_expect_eq(an.err, -ENOENT);
	cr_expect_str_eq(gw_resolve_strerror(an.err), "no such name");
}

Test(resolve, a_stuck_lookup_does_not_block_the_loop_and_requests_share_it)
{
	struct answer a1 = { 0 }, a2 = { 0 }, a3 = { 0 };
	struct gw_resolve *r1, *r2, *r3;
	struct gw_resolve_stats st;
	struct gw_addr a;
	uint64_t t0 = gw_now_ms();

	cr_assert_eq(gw_resolve_start(&loop, "stuck.test", "3260", answer_fn, &a1, &a, &r1), 0);
	cr_assert_eq(gw_resolve_start(&loop, "stuck.test", "3260", answer_fn, &a2, &a, &r2), 0);
	/* Another name is not held up behind the stuck one: a second thread takes it. */
	cr_assert_eq(gw_resolve_start(&loop, "localhost", "3260", answer_fn, &a3, &a, &r3), 0);
	wait_answer(&a3);
	cr_expect_eq(a3.calls, 1, "localhost answered while stuck.test hangs");
	cr_expect_lt(gw_now_ms() - t0, 5000);
	cr_expect_eq(a1.calls + a2.calls, 0);
	gw_resolve_stats(&st);
	cr_expect_geq(st.joined, 1, "the second request joined the first lookup");
	cr_expect_eq(st.pending, 1);
	release_stuck();
	wait_answer(&a1);
	wait_answer(&a2);
	cr_expect_eq(a1.calls, 1);
	cr_expect_eq(a2.calls, 1);
	cr_expect_eq(a1.err, -EAGAIN);
	cr_expect_eq(a2.err, -EAGAIN);
}

Test(resolve, cancel_while_the_lookup_runs_never_calls_back)
{
	struct answer a1 = { 0 }, a2 = { 0 };
	struct gw_resolve *r1, *r2;
	struct gw_addr a;

	cr_assert_eq(gw_resolve_start(&loop, "stuck.test", "3260", answer_fn, &a1, &a, &r1), 0);
	cr_assert_eq(gw_resolve_start(&loop, "stuck.test", "3260", answer_fn, &a2, &a, &r2), 0);
	/* Wait until a thread is inside the lookup: the cancel races nothing but the answer. */
	pthread_mutex_lock(&fk_mu);
	while (!fk_calls)
		pthread_cond_wait(&fk_cv, &fk_mu);
	pthread_mutex_unlock(&fk_mu);
	gw_resolve_cancel(r1);
	release_stuck();
	wait_answer(&a2);
	cr_expect_eq(a2.calls, 1, "the other request still gets its answer");
	for (int i = 0; i < 10; i++)
		gw_loop_run_once(&loop, 10);
	cr_expect_eq(a1.calls, 0, "a cancelled request never calls back");
}

Test(resolve, cancel_after_the_answer_was_posted_never_calls_back)
{
	struct answer an = { 0 };
	struct gw_resolve_stats st;
	struct gw_resolve *r;
	struct gw_addr a;
	uint64_t end = gw_now_ms() + 10000;

	cr_assert_eq(gw_resolve_start(&loop, "gone.test", "3260", answer_fn, &an, &a, &r), 0);
	/* The lookup ends and its message waits on the loop, which has not run yet. */
	do {
		usleep(1000);
		gw_resolve_stats(&st);
	} while (st.pending && gw_now_ms() < end);
	cr_assert_eq(st.pending, 0);
	gw_resolve_cancel(r);
	for (int i = 0; i < 10; i++)
		gw_loop_run_once(&loop, 10);
	cr_expect_eq(an.calls, 0);
}

Test(resolve, a_queued_lookup_cancelled_by_all_is_dropped_and_the_cap_holds)
{
	struct gw_resolve *r[GW_RESOLVE_MAX_PENDING + 1];
	struct gw_resolve_stats st;
	struct answer an = { 0 };
	struct gw_addr a;
	char name[32];
	int n;

	for (n = 0; n < GW_RESOLVE_MAX_PENDING; n++) {
		snprintf(name, sizeof(name), "q%d.test", n);
		if (gw_resolve_start(&loop, name, "3260", answer_fn, &an, &a, &r[n]) != 0)
			break;
	}
	gw_resolve_stats(&st);
	cr_expect_eq(n, GW_RESOLVE_MAX_PENDING);
	cr_expect_leq(st.threads, GW_RESOLVE_THREADS, "%u threads", st.threads);
	/* GW_RESOLVE_THREADS names hang in the threads, the rest wait in the queue. */
	cr_expect_eq(gw_resolve_start(&loop, "one-more.test", "3260", answer_fn, &an, &a,
				      &r[n]), -EAGAIN, "the cap refuses a new name");
	for (int i = GW_RESOLVE_THREADS; i < n; i++)
		gw_resolve_cancel(r[i]);
	gw_resolve_stats(&st);
	cr_expect_leq(st.pending, GW_RESOLVE_THREADS,
		      "cancelled queued lookups are dropped: %u left", st.pending);
	for (int i = 0; i < GW_RESOLVE_THREADS; i++)
		gw_resolve_cancel(r[i]);
	release_stuck();
	for (int i = 0; i < 20; i++)
		gw_loop_run_once(&loop, 10);
	cr_expect_eq(an.calls, 0, "nothing cancelled called back");
}

/* Every thread held by a DNS server that does not answer: once those lookups have run
 * GW_RESOLVE_STUCK_MS, a name behind them (one /etc/hosts answers) still gets a thread and its
 * answer, and the threads stay within GW_RESOLVE_THREADS_MAX however many names hang. */
Test(resolve, names_behind_stuck_lookups_are_still_answered)
{
	struct gw_resolve *r[GW_RESOLVE_THREADS * 5], *ok;
	struct answer stuck = { 0 }, an = { 0 };
	struct gw_resolve_stats st;
	struct gw_addr a;
	char name[32];
	int n;

	for (n = 0; n < GW_RESOLVE_THREADS; n++) {
		snprintf(name, sizeof(name), "dead%d.test", n);
		cr_assert_eq(gw_resolve_start(&loop, name, "3260", answer_fn, &stuck, &a, &r[n]), 0);
	}
	/* Each thread is inside a lookup that does not end. */
	pthread_mutex_lock(&fk_mu);
	while (fk_calls < GW_RESOLVE_THREADS)
		pthread_cond_wait(&fk_cv, &fk_mu);
	pthread_mutex_unlock(&fk_mu);
	usleep((GW_RESOLVE_STUCK_MS + 200) * 1000);
	cr_assert_eq(gw_resolve_start(&loop, "localhost", "3260", answer_fn, &an, &a, &ok), 0);
	wait_answer(&an);
	cr_expect_eq(an.calls, 1, "localhost answered while every first thread hangs");
	cr_expect_eq(an.err, 0, "%s", gw_resolve_strerror(an.err));
	/* More dead names, four at a time, each four stuck before the next: the threads grow
	 * to the bound, and no further. */
	for (int round = 0; round < 4; round++) {
		for (int k = 0; k < GW_RESOLVE_THREADS; k++, n++) {
			snprintf(name, sizeof(name), "dead%d.test", n);
			cr_assert_eq(gw_resolve_start(&loop, name, "3260", answer_fn, &stuck, &a,
						      &r[n]), 0);
		}
		if (round < 3)
			usleep((GW_RESOLVE_STUCK_MS + 200) * 1000);
	}
	gw_resolve_stats(&st);
	cr_expect_eq(st.threads, GW_RESOLVE_THREADS_MAX, "%u threads", st.threads);
	for (int i = 0; i < n; i++)
		gw_resolve_cancel(r[i]);
	cr_expect_eq(stuck.calls, 0);
}
