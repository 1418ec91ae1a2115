// SPDX-License-Identifier: MIT
/* Live reconfiguration (what the control socket's "apply" runs): only what changed changes. */
#include "iscsi/harness.h"

static struct h H;
static struct fake_conn *C;

#define T2 "iqn.2026-11.org.isergw:t2"

/* The default harness configuration with some pieces swapped. */
static const char *conf_text(const char *t1_initiators, const char *t1_luns, bool with_t2)
{
	static char buf[4096];

	snprintf(buf, sizeof(buf),
		 "{ \"portals\": [ { \"name\": \"p0\", \"address\": \"127.0.0.1\", \"port\": 3260 } ],"
		 "  \"targets\": [ { \"name\": \"" H_TARGET "\", \"portals\": [\"p0\"],"
		 "    \"initiators\": [ %s ],"
		 "    \"params\": { \"queue_depth\": 4, \"nop_interval\": 0, \"nop_timeout\": 0,"
		 "                  \"FirstBurstLength\": 8192, \"MaxBurstLength\": 16384 },"
		 "    \"luns\": [ %s ] }%s ] }",
		 t1_initiators, t1_luns,
		 with_t2 ? ", { \"name\": \"" T2 "\", \"portals\": [\"p0\"],"
			   " \"allow_any_initiator\": true, \"luns\": [ { \"lun\": 0,"
			   " \"backstore\": { \"type\": \"ram\", \"size\": \"1M\" } } ] }" : "");
	return buf;
}

#define ACL_HOST1 "{ \"name\": \"" H_INITIATOR "\" }"
#define LUN0 "{ \"lun\": 0, \"backstore\": { \"type\": \"ram\", \"size\": \"4M\" } }"
#define LUN3 "{ \"lun\": 3, \"backstore\": { \"type\": \"ram\", \"size\": \"2M\" } }"

static int apply_flags(const char *text, unsigned flags, struct gw_errlist *errs)
{
	struct ctl_config cfg;
	json_error_t jerr;
	json_t *root = json_loads(text, 0, &jerr);
	int r;

	cr_assert_not_null(root, "bad test JSON: %s", jerr.text);
	r = conf_parse(root, &cfg, errs);
	json_decref(root);
	cr_assert_eq(r, 0, "config refused: %s", gw_errlist_join(errs));
	r = ctl_gw_apply(H.cg, cfg.isc, flags, errs);
	cfg.isc = NULL;
	conf_free(&cfg);
	return r;
}

static int apply(const char *text, struct gw_errlist *errs)
{
	return apply_flags(text, 0, errs);
}

static void setup(void)
{
	C = h_setup_session(&H, conf_text(ACL_HOST1, LUN0, true), true);
}

static void teardown(void)
{
	h_teardown(&H);
}

TestSuite(ctl_apply, .init = setup, .fini = teardown);

static struct isc_target *target(const char *name)
{
	return isc_gw_find_target(H.gw, name);
}

static void run_ms(int ms)
{
	uint64_t end = gw_now_ms() + (uint64_t)ms;

	while (gw_now_ms() < end)
		gw_loop_run_once(&H.loop, 5);
}

Test(ctl_apply, adding_a_lun_keeps_the_session_and_announces_it)
{
	struct gw_errlist errs;
	struct pdu *msg;

	gw_errlist_init(&errs);
	cr_assert_eq(apply(conf_text(ACL_HOST1, LUN0 "," LUN3, true), &errs), 0);
	cr_expect_not_null(scsi_dev_find_lu(target(H_TARGET)->dev, 3));
	cr_expect_not_null(scsi_dev_find_lu(target(H_TARGET)->dev, 0), "LUN 0 untouched");
	cr_expect_not(C->closed, "the session is undisturbed");
	fake_dmv_settle(&H.loop);
	msg = fake_dmv_pop(C);
	cr_assert_not_null(msg, "an Asynchronous Message announces the new LUN");
	cr_expect_eq(pdu_bhs_opcode(msg->bhs), ISC_OP_ASYNC);
	pdu_put(msg);
	gw_errlist_fini(&errs);
}

Test(ctl_apply, same_configuration_changes_nothing)
{
	struct gw_errlist errs;
	struct scsi_lu *lu = scsi_dev_find_lu(target(H_TARGET)->dev, 0);

	gw_errlist_init(&errs);
	cr_assert_eq(apply(conf_text(ACL_HOST1, LUN0, true), &errs), 0);
	cr_expect_eq(scsi_dev_find_lu(target(H_TARGET)->dev, 0), lu, "the same LU object");
	fake_dmv_settle(&H.loop);
	cr_expect_eq(C->nsent, 0);
	cr_expect_not(C->closed);
	gw_errlist_fini(&errs);
}

Test(ctl_apply, initiator_dropped_from_the_acl_loses_its_session)
{
	struct gw_errlist errs;

	gw_errlist_init(&errs);
	cr_assert_eq(apply(conf_text("{ \"name\": \"iqn.2026-11.org.example:other\" }", LUN0, true),
			   &errs), 0);
	cr_expect(C->closed);
	gw_errlist_fini(&errs);
}

Test(ctl_apply, removed_target_goes_with_its_sessions)
{
	struct fake_conn *c2 = h_connect(&H);
	struct gw_errlist errs;
	uint16_t st;

	h_login(&H, c2, H_INITIATOR, T2, 2, 0, 0, &st);
	cr_assert_eq(st, 0);
	gw_errlist_init(&errs);
	cr_assert_eq(apply(conf_text(ACL_HOST1, LUN0, false), &errs), 0);
	cr_expect_null(target(T2));
	cr_expect(c2->closed);
	cr_expect_not(C->closed, "the other target's session stays");
	fake_dmv_settle(&H.loop);
	cr_expect(!isc_gw_next_draining(H.gw, NULL), "freed once its session drained");
	gw_errlist_fini(&errs);
}

Test(ctl_apply, backstore_that_cannot_open_changes_nothing)
{
	struct gw_errlist errs;
	static const char bad[] = "{ \"lun\": 5, \"backstore\": { \"type\": \"block\","
				  " \"path\": \"/nonexistent/dev/x\" } }";

	gw_errlist_init(&errs);
	/* Also drops t2 and LUN 0: none of that may happen when LUN 5 cannot open. */
	cr_expect_neq(apply(conf_text(ACL_HOST1, bad, false), &errs), 0);
	cr_assert_gt(errs.n, 0);
	cr_expect_not_null(strstr(errs.v[0].field, "backstore"), "%s", errs.v[0].field);
	cr_expect_not_null(target(T2), "t2 still there");
	cr_expect_not_null(scsi_dev_find_lu(target(H_TARGET)->dev, 0), "LUN 0 still there");
	cr_expect_not(C->closed);
	gw_errlist_fini(&errs);
}

Test(ctl_apply, removing_a_busy_lun_waits_and_refuses_new_commands)
{
	struct gw_errlist errs;
	uint8_t cdb[16];
	struct pdu *rsp;
	int seen_not_supported = 0;

	/* A read in flight (not yet completed: the loop has not run). */
	h_cdb_rw10(cdb, 0x28, 0, 8);
	h_scsi_cmd(&H, C, 0x700, ISC_FL_F | ISC_FL_R, cdb, 10, 4096, NULL, 0);
	gw_errlist_init(&errs);
	cr_assert_eq(apply(conf_text(ACL_HOST1, LUN3, true), &errs), 0);
	if (isc_target_lun_blocked(target(H_TARGET), 0)) {
		h_scsi_cmd(&H, C, 0x701, ISC_FL_F | ISC_FL_R, cdb, 10, 4096, NULL, 0);
		seen_not_supported = 1;
	}
	run_ms(300);
	cr_expect_null(scsi_dev_find_lu(target(H_TARGET)->dev, 0), "LUN 0 gone after draining");
	cr_expect_not(isc_target_lun_blocked(target(H_TARGET), 0));
	while ((rsp = fake_dmv_pop(C))) {
		if (pdu_bhs_itt(rsp->bhs) == 0x701 && pdu_bhs_opcode(rsp->bhs) == ISC_OP_SCSI_RSP) {
			cr_expect_eq(rsp->bhs[3], SCSI_CHECK_CONDITION);
			cr_expect_eq(rsp->data[2 + 12], 0x25, "LOGICAL UNIT NOT SUPPORTED");
			seen_not_supported = 2;
		}
		pdu_put(rsp);
	}
	cr_expect_neq(seen_not_supported, 1, "the blocked command was answered");
	gw_errlist_fini(&errs);
}

Test(ctl_apply, drop_session_by_tsih)
{
	struct isc_session *s = gw_list_first_entry(&H.gw->sessions, struct isc_session, node);

	cr_expect_eq(isc_gw_drop_session(H.gw, (uint16_t)(s->tsih + 100)), -ENOENT);
	cr_expect_eq(isc_gw_drop_session(H.gw, s->tsih), 0);
	cr_expect(C->closed);
}

/* A cluster configuration: groups 1 (this gateway) and 2, LUN 0 owned by group owner. */
static const char *cluster_text(unsigned int owner, const char *state2)
{
	static char buf[2048];

	snprintf(buf, sizeof(buf),
		 "{ \"portals\": [ { \"name\": \"p0\", \"address\": \"127.0.0.1\", \"port\": 3260 } ],"
		 "  \"cluster\": { \"groups\": [ { \"id\": 1 }, { \"id\": 2, \"state\": \"%s\" } ] },"
		 "  \"targets\": [ { \"name\": \"" H_TARGET "\", \"portals\": [\"p0\"],"
		 "    \"initiators\": [ " ACL_HOST1 " ],"
		 "    \"params\": { \"queue_depth\": 4, \"nop_interval\": 0, \"nop_timeout\": 0,"
		 "                  \"FirstBurstLength\": 8192, \"MaxBurstLength\": 16384 },"
		 "    \"luns\": [ { \"lun\": 0, \"alua_group\": %u, \"owner\": \"gw-%u\","
		 "                \"backstore\": { \"type\": \"ram\", \"size\": \"4M\" } } ] } ] }",
		 state2, owner, owner);
	return buf;
}

Test(ctl_apply, cluster_ownership_changes_live)
{
	struct gw_errlist errs;
	struct isc_target *t;
	struct scsi_lu *lu;
	struct fake_conn *c2;
	uint16_t st;

	gw_errlist_init(&errs);
	/* Joining a cluster renumbers the ports: the target is a new one. */
	cr_assert_eq(apply(cluster_text(1, "active/optimized"), &errs), 0, "%s",
		     gw_errlist_join(&errs));
	fake_dmv_settle(&H.loop);
	cr_expect(C->closed, "the old target's session ends");
	t = target(H_TARGET);
	cr_assert_eq(scsi_dev_alua_state(t->dev, 0, 1), SCSI_ALUA_AO);
	cr_assert_eq(scsi_dev_alua_state(t->dev, 0, 2), SCSI_ALUA_ANO);
	c2 = h_connect(&H);
	h_login(&H, c2, H_INITIATOR, H_TARGET, 1, 0, 0, &st);
	cr_assert_eq(st, 0);
	h_clear_ua(&H, c2);
	lu = scsi_dev_find_lu(t->dev, 0);

	/* The owner moves to group 2: nothing is re-created, the session stays. */
	cr_assert_eq(apply(cluster_text(2, "active/optimized"), &errs), 0, "%s",
		     gw_errlist_join(&errs));
	cr_expect_eq(target(H_TARGET), t, "the same target");
	cr_expect_eq(scsi_dev_find_lu(t->dev, 0), lu, "the same LU");
	cr_expect_eq(scsi_dev_alua_state(t->dev, 0, 1), SCSI_ALUA_ANO);
	cr_expect_eq(scsi_dev_alua_state(t->dev, 0, 2), SCSI_ALUA_AO);
	fake_dmv_settle(&H.loop);
	cr_expect_not(c2->closed, "the session is undisturbed");

	/* Group 2's gateway is gone and the LU comes back here. */
	cr_assert_eq(apply(cluster_text(1, "unavailable"), &errs), 0);
	cr_expect_eq(scsi_dev_alua_state(t->dev, 0, 1), SCSI_ALUA_AO);
	cr_expect_eq(scsi_dev_alua_state(t->dev, 0, 2), SCSI_ALUA_UNAVAILABLE);
	cr_expect_eq(scsi_dev_find_lu(t->dev, 0), lu);
	fake_dmv_settle(&H.loop);
	cr_expect_not(c2->closed);
	gw_errlist_fini(&errs);
}

#define LUN4(size) "{ \"lun\": 4, \"backstore\": { \"type\": \"null\", \"size\": \"" size "\" } }"

/* A LUN whose backstore changes only in size keeps its LU (sessions, reservations) and takes
 * the size in place; smaller only with CTL_APPLY_SHRINK; a kind that cannot (ram) is replaced. */
Test(ctl_apply, a_size_change_resizes_in_place)
{
	struct scsi_dev *dev = target(H_TARGET)->dev;
	struct gw_errlist errs;
	struct scsi_lu *lu, *lu0;

	gw_errlist_init(&errs);
	cr_assert_eq(apply(conf_text(ACL_HOST1, LUN0 "," LUN4("4M"), true), &errs), 0);
	lu = scsi_dev_find_lu(dev, 4);
	lu0 = scsi_dev_find_lu(dev, 0);
	cr_assert_not_null(lu);
	cr_assert_eq(apply(conf_text(ACL_HOST1, LUN0 "," LUN4("8M"), true), &errs), 0);
	cr_expect_eq(scsi_dev_find_lu(dev, 4), lu, "the same LU object");
	cr_expect_eq(scsi_dev_lu_bs(dev, 4)->size, 8u << 20);

	cr_expect_eq(apply(conf_text(ACL_HOST1, LUN0 "," LUN4("2M"), true), &errs), -EPERM);
	cr_assert_gt(errs.n, 0);
	cr_expect_str_eq(errs.v[0].field, "targets[0].luns[1].backstore.size");
	cr_expect_eq(scsi_dev_lu_bs(dev, 4)->size, 8u << 20, "refused: unchanged");
	gw_errlist_fini(&errs);
	gw_errlist_init(&errs);
	cr_assert_eq(apply_flags(conf_text(ACL_HOST1, LUN0 "," LUN4("2M"), true),
				 CTL_APPLY_SHRINK, &errs), 0);
	cr_expect_eq(scsi_dev_find_lu(dev, 4), lu);
	cr_expect_eq(scsi_dev_lu_bs(dev, 4)->size, 2u << 20);
	cr_expect_eq(scsi_dev_find_lu(dev, 0), lu0, "LUN 0 untouched");
	cr_expect_not(C->closed, "the session is undisturbed");
	gw_errlist_fini(&errs);
}
