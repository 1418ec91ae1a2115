// SPDX-License-Identifier: MIT
/* The etcd store's asynchronous save (a compare-and-swap txn through the loop) against a fake
 * etcd endpoint: an agent that stops while a write waits for etcd frees everything the save
 * held, and never answers the write from the store's destruction (its request is gone by
 * then). The sanitized unit run (LeakSanitizer) fails on what is left behind. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "agent/fake_etcd.h"
#include "api_etcd.h"
#include "api_store.h"
#include "gw_log.h"
#include "gw_loop.h"

static void setup(void)
{
	gw_log_set_level(getenv("STORE_T_DEBUG") ? GW_LOG_DBG : GW_LOG_ERR - 1);
}

TestSuite(api_store_etcd, .init = setup);

static void count_done(void *ctx, int err)
{
	(void)err;
	(*(int *)ctx)++;
}

Test(api_store_etcd, a_stop_with_a_write_in_flight_frees_the_save_without_answering)
{
	struct gw_loop loop;
	struct fake_etcd f;
	struct api_etcd_conf ec;
	struct api_store *s;
	struct api_etcd *e;
	char eps[64];
	int done = 0;
	uint64_t t0;

	cr_assert_eq(gw_loop_init(&loop), 0);
	fake_etcd_start(&f, &loop, NULL);	/* etcd takes the txn and never answers */
	snprintf(eps, sizeof(eps), "http://127.0.0.1:%d", f.port);
	ec = (struct api_etcd_conf){ .endpoints = eps };
	cr_assert_eq(api_etcd_create(&ec, &loop, &e), 0);
	/* Its first read gets no answer (the fake runs in this loop): it starts empty... */
	cr_assert_eq(api_store_open_etcd(e, "/t", NULL, &s), 0);
	/* ...and the watch brings the configuration, so a write has a revision to compare. */
	cr_assert_eq(api_store_etcd_apply(s, "{\"generation\":3,\"config\":{\"portals\":[]}}", 5),
		     1);
	f.served = 0;
	cr_assert_gt(api_store_commit_async(s, json_pack("{s:[]}", "portals"), count_done, &done),
		     0, "the store answers later");
	for (t0 = gw_now_ms(); f.served < 1 && gw_now_ms() - t0 < 10000;)
		gw_loop_run_once(&loop, 50);
	cr_assert_eq(f.served, 1, "the txn reached etcd and waits there");
	api_store_destroy(s);
	cr_assert_eq(done, 0, "the write's owner is gone: nothing answers it");
	fake_etcd_stop(&f);
	gw_loop_fini(&loop);
}
