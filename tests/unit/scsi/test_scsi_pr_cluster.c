// SPDX-License-Identifier: MIT
/*
 * Cluster-wide persistent reservations: states applied and refused, PR OUT decided on the
 * state applied last and completed only by the commit's answer. The commit hook is a fake
 * that records what it was asked (the real one, ctl_sock.c's, has its own tests).
 */
#include <errno.h>

#include "scsi_test.h"

static struct tenv e;

#define A "iqn.2026-01.org.test:a,i,0x23d000000001"
#define B "iqn.2026-01.org.test:b,i,0x23d000000002"

/* The fake owner: what it was asked last, and what it answers. */
static struct {
	int calls;
	int ret;
	uint64_t lun, rev;
	json_t *state;
} hook;

static int fake_commit(void *arg, struct scsi_dev *dev, uint64_t lun, uint64_t rev,
		       const json_t *state)
{
	cr_assert_eq(arg, &hook);
	cr_assert_eq(dev, e.dev);
	hook.calls++;
	if (hook.ret)
		return hook.ret;
	hook.lun = lun;
	hook.rev = rev;
	json_decref(hook.state);
	hook.state = json_deep_copy(state);
	return 0;
}

static const struct scsi_pr_cluster_ops fake_ops = { .commit = fake_commit };

static void setup(void)
{
	tenv_init(&e);
	cr_assert_eq(tenv_add_lu(&e, 0, 1 << 20, 512, true, false), 0);
	tenv_clear_ua(&e, e.a, 0);
	tenv_clear_ua(&e, e.b, 0);
	memset(&hook, 0, sizeof(hook));
	scsi_dev_set_pr_cluster(e.dev, &fake_ops, &hook);
}

static void teardown(void)
{
	json_decref(hook.state);
	hook.state = NULL;
	tenv_fini(&e);
}

TestSuite(scsi_pr_cluster, .init = setup, .fini = teardown);

static json_t *js(const char *text)
{
	json_error_t err;
	json_t *j = json_loads(text, 0, &err);

	cr_assert_not_null(j, "%s: %s", text, err.text);
	return j;
}

static int apply(uint64_t rev, const char *text, char *why, size_t len)
{
	json_t *st = text ? js(text) : NULL;
	int rc = scsi_dev_pr_apply(e.dev, 0, rev, st, false, why, len);

	json_decref(st);
	return rc;
}

static void prep_prout(struct tcmd *t, struct scsi_itn *itn, uint8_t sa, uint8_t type,
		       uint64_t key, uint64_t sakey, uint8_t *p)
{
	memset(p, 0, 24);
	for (int i = 0; i < 8; i++) {
		p[i] = (uint8_t)(key >> (56 - 8 * i));
		p[8 + i] = (uint8_t)(sakey >> (56 - 8 * i));
	}
	tcmd_prep(&e, t, itn, 0, CDB(0x5f, sa, type, 0, 0, 0, 0, 0, 24, 0), p, 24,
		  SCSI_DIR_WRITE);
}

/* Submits a PR OUT and runs the loop a while: the caller checks whether it finished. */
static void start_prout(struct tcmd *t, struct scsi_itn *itn, uint8_t sa, uint8_t type,
			uint64_t key, uint64_t sakey, uint8_t *p)
{
	prep_prout(t, itn, sa, type, key, sakey, p);
	scsi_cmd_submit(&t->cmd);
	cr_assert_eq(t->fired, 0, "done ran inside scsi_cmd_submit");
	for (int i = 0; i < 5; i++)
		gw_loop_run_once(&e.loop, 5);
}

static int run(struct tcmd *t, struct scsi_itn *itn, const uint8_t *cdb, size_t cdb_len,
	       void *buf, uint32_t len, enum scsi_dir dir)
{
	return tcmd_run(&e, t, itn, 0, cdb, cdb_len, buf, len, dir);
}

static int rd(struct scsi_itn *itn, struct tcmd *t)
{
	static uint8_t b[512];

	return run(t, itn, CDB(0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0), b, 512, SCSI_DIR_READ);
}

static int wr(struct scsi_itn *itn, struct tcmd *t)
{
	static uint8_t b[512];

	return run(t, itn, CDB(0x2a, 0, 0, 0, 0, 0, 0, 0, 1, 0), b, 512, SCSI_DIR_WRITE);
}

/* READ KEYS: the generation and how many keys. */
static uint32_t read_keys(struct scsi_itn *itn, uint32_t *nkeys, uint64_t *first)
{
	uint8_t b[64];
	struct tcmd t;

	cr_assert_eq(run(&t, itn, CDB(0x5e, 0, 0, 0, 0, 0, 0, 0, 64, 0), b, 64, SCSI_DIR_READ),
		     SCSI_GOOD);
	*nkeys = be32(b + 4) / 8;
	if (first)
		*first = be64(b + 8);
	return be32(b);
}

static json_t *state_now(uint64_t *rev)
{
	json_t *st = scsi_dev_pr_state(e.dev, 0, rev);

	cr_assert_not_null(st);
	return st;
}

static const char st_a_holds[] =
	"{\"generation\": 4, \"aptpl\": true, \"registrations\": ["
	" {\"initiator\": \"" A "\", \"rel_id\": 1, \"key\": \"0x00000000000000aa\"},"
	" {\"initiator\": \"" B "\", \"rel_id\": 1, \"key\": \"0x00000000000000bb\"}],"
	" \"reservation\": {\"initiator\": \"" A "\", \"rel_id\": 1, \"type\": 1}}";

Test(scsi_pr_cluster, an_applied_state_is_what_pr_in_and_conflicts_see)
{
	uint8_t b[64];
	struct tcmd t;
	uint32_t n;
	uint64_t k, rev;
	json_t *st, *want = js(st_a_holds);
	char why[160];

	cr_assert_eq(apply(3, st_a_holds, why, sizeof(why)), 1, "%s", why);
	cr_assert_eq(read_keys(e.b, &n, &k), 4, "generation");
	cr_assert_eq(n, 2);
	cr_assert_eq(k, 0xaa);
	cr_assert_eq(run(&t, e.b, CDB(0x5e, 1, 0, 0, 0, 0, 0, 0, 64, 0), b, 64, SCSI_DIR_READ),
		     SCSI_GOOD);
	cr_assert_eq(be64(b + 8), 0xaa, "A holds it");
	cr_assert_eq(b[21] & 0x0f, 1, "write exclusive");
	cr_assert_eq(run(&t, e.a, CDB(0x5e, 2, 0, 0, 0, 0, 0, 0, 8, 0), b, 8, SCSI_DIR_READ),
		     SCSI_GOOD);
	cr_assert_eq(b[3] & 0x01, 1, "PTPL_A as the state says");
	cr_assert_eq(wr(e.b, &t), SCSI_RESERVATION_CONFLICT);
	cr_assert_eq(rd(e.b, &t), SCSI_GOOD);
	cr_assert_eq(wr(e.a, &t), SCSI_GOOD);
	/* It reads back as it came, at its revision; an older one is not applied over it. */
	st = state_now(&rev);
	cr_assert_eq(rev, 3);
	cr_assert(json_equal(st, want), "%s", json_dumps(st, 0));
	json_decref(st);
	cr_assert_eq(apply(2, NULL, why, sizeof(why)), 0, "rev 2 is older");
	cr_assert_eq(apply(3, NULL, why, sizeof(why)), 0, "rev 3 is held");
	cr_assert_eq(wr(e.b, &t), SCSI_RESERVATION_CONFLICT);
	/* Reservations that go raise what the local rules raise: a CLEAR elsewhere is 2A/03. */
	cr_assert_eq(apply(9, NULL, why, sizeof(why)), 1);
	cr_assert_eq(wr(e.b, &t), SCSI_CHECK_CONDITION);
	cr_assert_sense(&t, SCSI_SK_UNIT_ATTENTION, 0x2a, 0x03);
	cr_assert_eq(wr(e.b, &t), SCSI_GOOD);
	json_decref(want);
}

static void refused(const char *text, const char *why_has)
{
	json_t *before, *after;
	uint64_t r0, r1;
	char why[160] = "";

	before = state_now(&r0);
	cr_assert_eq(apply(50, text, why, sizeof(why)), -EINVAL, "%s", text);
	cr_assert_not_null(strstr(why, why_has), "\"%s\" lacks \"%s\"", why, why_has);
	after = state_now(&r1);
	cr_assert(json_equal(before, after), "the state changed");
	cr_assert_eq(r0, r1, "the revision changed");
	json_decref(before);
	json_decref(after);
}

Test(scsi_pr_cluster, a_bad_state_is_refused_with_a_reason_and_changes_nothing)
{
	char why[160];
	struct tcmd t;

	cr_assert_eq(apply(3, st_a_holds, why, sizeof(why)), 1, "%s", why);
	refused("{\"generation\": 1, \"aptpl\": false, \"registrations\": [{\"initiator\": \"" A
		"\", \"rel_id\": 1, \"key\": \"0xAA\"}], \"reservation\": null}",
		"registrations[0]: \"key\"");
	refused("{\"generation\": 1, \"aptpl\": false, \"registrations\": ["
		"{\"initiator\": \"" A "\", \"rel_id\": 1, \"key\": \"0x0000000000000001\"},"
		"{\"initiator\": \"" A "\", \"rel_id\": 1, \"key\": \"0x0000000000000002\"}],"
		" \"reservation\": null}", "a second registration for one I_T nexus");
	refused("{\"generation\": 1, \"aptpl\": false, \"registrations\": [{\"initiator\": \"" A
		"\", \"rel_id\": 1, \"key\": \"0x0000000000000001\"}], \"reservation\": "
		"{\"initiator\": \"" A "\", \"rel_id\": 1, \"type\": 2}}",
		"reservation: unknown \"type\"");
	refused("{\"generation\": 1, \"aptpl\": false, \"registrations\": [], \"reservation\": "
		"{\"initiator\": \"" A "\", \"rel_id\": 1, \"type\": 1}}", "is not registered");
	refused("{\"generation\": 1, \"aptpl\": false, \"registrations\": [{\"initiator\": \"\","
		" \"rel_id\": 1, \"key\": \"0x0000000000000001\"}], \"reservation\": null}",
		"registrations[0]: \"initiator\"");
	refused("{\"generation\": 1, \"aptpl\": false, \"registrations\": [{\"initiator\": \"" A
		"\", \"rel_id\": 0, \"key\": \"0x0000000000000001\"}], \"reservation\": null}",
		"\"rel_id\"");
	refused("{\"generation\": -1, \"aptpl\": false, \"registrations\": []}", "generation");
	refused("{\"generation\": 1, \"registrations\": []}", "aptpl");
	refused("[]", "object or null");
	refused("{\"generation\": 1, \"aptpl\": false, \"registrations\": [], \"aborted\": 3}",
		"aborted");
	/* Still A's: B does not write. */
	cr_assert_eq(wr(e.b, &t), SCSI_RESERVATION_CONFLICT);
}

Test(scsi_pr_cluster, a_pr_out_completes_only_when_its_commit_is_taken)
{
	uint8_t p[24];
	struct tcmd t, t2;
	uint32_t n;
	uint64_t rev;
	json_t *regs;

	start_prout(&t, e.a, 0x00, 0, 0, 0xaa, p);
	cr_assert_eq(hook.calls, 1);
	cr_assert_eq(t.fired, 0, "GOOD before the cluster took it");
	cr_assert_eq(hook.rev, 0, "computed from the empty state");
	regs = json_object_get(hook.state, "registrations");
	cr_assert_eq(json_array_size(regs), 1);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(regs, 0), "initiator")),
			 A);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(regs, 0), "key")),
			 "0x00000000000000aa");
	cr_assert_eq(json_integer_value(json_object_get(hook.state, "generation")), 1);
	/* Meanwhile everything else reads the state applied last. */
	read_keys(e.b, &n, NULL);
	cr_assert_eq(n, 0);
	cr_assert_eq(wr(e.b, &t2), SCSI_GOOD);
	scsi_dev_pr_commit_done(e.dev, 0, SCSI_PR_COMMIT_OK, 17, NULL);
	cr_assert_eq(t.fired, 0, "never from inside commit_done");
	tcmd_wait(&e, &t);
	cr_assert_eq(t.cmd.status, SCSI_GOOD);
	read_keys(e.b, &n, NULL);
	cr_assert_eq(n, 1);
	json_decref(state_now(&rev));
	cr_assert_eq(rev, 17);
	/* A PR OUT that changes nothing (RELEASE with no reservation) commits nothing. */
	prep_prout(&t, e.a, 0x02, 1, 0xaa, 0, p);
	scsi_cmd_submit(&t.cmd);
	tcmd_wait(&e, &t);
	cr_assert_eq(t.cmd.status, SCSI_GOOD);
	cr_assert_eq(hook.calls, 1);
	/* A refused one neither: the wrong key conflicts on the state applied last. */
	prep_prout(&t, e.a, 0x01, 1, 0x1234, 0, p);
	scsi_cmd_submit(&t.cmd);
	tcmd_wait(&e, &t);
	cr_assert_eq(t.cmd.status, SCSI_RESERVATION_CONFLICT);
	cr_assert_eq(hook.calls, 1);
}

Test(scsi_pr_cluster, a_lost_race_is_decided_again_on_the_winner)
{
	uint8_t p[24], b[64];
	struct tcmd t, t2;
	json_t *win;

	/* A registers; B's registration and exclusive-access reservation won the race. */
	start_prout(&t, e.a, 0x00, 0, 0, 0xaa, p);
	cr_assert_eq(hook.calls, 1);
	win = js("{\"generation\": 2, \"aptpl\": false, \"registrations\": ["
		 "{\"initiator\": \"" B "\", \"rel_id\": 1, \"key\": \"0x00000000000000bb\"}],"
		 " \"reservation\": {\"initiator\": \"" B "\", \"rel_id\": 1, \"type\": 3}}");
	scsi_dev_pr_commit_done(e.dev, 0, SCSI_PR_COMMIT_CONFLICT, 8, win);
	json_decref(win);
	for (int i = 0; i < 5 && hook.calls < 2; i++)
		gw_loop_run_once(&e.loop, 5);
	cr_assert_eq(hook.calls, 2, "decided again");
	cr_assert_eq(t.fired, 0);
	cr_assert_eq(hook.rev, 8, "on the winner's revision");
	cr_assert_eq(json_array_size(json_object_get(hook.state, "registrations")), 2);
	cr_assert_eq(json_integer_value(json_object_get(hook.state, "generation")), 3);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(hook.state,
									"reservation"), "type")),
		     3, "B's reservation stays");
	/* The winner is applied already: A (not registered yet) cannot read. */
	cr_assert_eq(rd(e.a, &t2), SCSI_RESERVATION_CONFLICT);
	scsi_dev_pr_commit_done(e.dev, 0, SCSI_PR_COMMIT_OK, 9, NULL);
	tcmd_wait(&e, &t);
	cr_assert_eq(t.cmd.status, SCSI_GOOD);
	cr_assert_eq(run(&t, e.a, CDB(0x5e, 0, 0, 0, 0, 0, 0, 0, 64, 0), b, 64, SCSI_DIR_READ),
		     SCSI_GOOD);
	cr_assert_eq(be32(b + 4), 16, "both keys");
	cr_assert_eq(rd(e.a, &t), SCSI_RESERVATION_CONFLICT, "exclusive access: B's alone");
}

Test(scsi_pr_cluster, five_lost_races_fail_not_ready)
{
	uint8_t p[24];
	struct tcmd t;
	char st[256];
	int i;

	start_prout(&t, e.a, 0x00, 0, 0, 0xaa, p);
	for (i = 0; i < SCSI_PR_ROUNDS; i++) {
		json_t *win;

		cr_assert_eq(hook.calls, i + 1);
		snprintf(st, sizeof(st), "{\"generation\": %d, \"aptpl\": false, "
			 "\"registrations\": [], \"reservation\": null}", i + 1);
		win = js(st);
		scsi_dev_pr_commit_done(e.dev, 0, SCSI_PR_COMMIT_CONFLICT, (uint64_t)(10 + i),
					win);
		json_decref(win);
		for (int k = 0; k < 5 && !t.fired && hook.calls < i + 2; k++)
			gw_loop_run_once(&e.loop, 5);
	}
	tcmd_wait(&e, &t);
	cr_assert_eq(hook.calls, SCSI_PR_ROUNDS);
	cr_assert_sense(&t, SCSI_SK_NOT_READY, 0x04, 0x0a);
}

Test(scsi_pr_cluster, an_unavailable_store_or_no_owner_fails_not_ready)
{
	uint8_t p[24];
	struct tcmd t;
	uint32_t n;

	start_prout(&t, e.a, 0x00, 0, 0, 0xaa, p);
	scsi_dev_pr_commit_done(e.dev, 0, SCSI_PR_COMMIT_UNAVAILABLE, 0, NULL);
	tcmd_wait(&e, &t);
	cr_assert_sense(&t, SCSI_SK_NOT_READY, 0x04, 0x0a);
	read_keys(e.a, &n, NULL);
	cr_assert_eq(n, 0, "nothing applied");
	/* The owner cannot send it (no agent watching): the same, at once. */
	hook.ret = -ENOTCONN;
	prep_prout(&t, e.a, 0x00, 0, 0, 0xaa, p);
	scsi_cmd_submit(&t.cmd);
	tcmd_wait(&e, &t);
	cr_assert_sense(&t, SCSI_SK_NOT_READY, 0x04, 0x0a);
	/* A late answer for nothing out changes nothing. */
	scsi_dev_pr_commit_done(e.dev, 0, SCSI_PR_COMMIT_OK, 5, NULL);
	read_keys(e.a, &n, NULL);
	cr_assert_eq(n, 0);
}

Test(scsi_pr_cluster, one_commit_per_lu_the_next_waits_and_reads_do_not)
{
	uint8_t pa[24], pb[24];
	struct tcmd ta, tb, t;
	json_t *regs;

	start_prout(&ta, e.a, 0x00, 0, 0, 0xaa, pa);
	start_prout(&tb, e.b, 0x00, 0, 0, 0xbb, pb);
	cr_assert_eq(hook.calls, 1, "B waits behind A's commit");
	cr_assert_eq(rd(e.b, &t), SCSI_GOOD, "a read does not wait");
	cr_assert_eq(wr(e.a, &t), SCSI_GOOD, "nor a write");
	scsi_dev_pr_commit_done(e.dev, 0, SCSI_PR_COMMIT_OK, 4, NULL);
	tcmd_wait(&e, &ta);
	cr_assert_eq(ta.cmd.status, SCSI_GOOD);
	for (int i = 0; i < 5 && hook.calls < 2; i++)
		gw_loop_run_once(&e.loop, 5);
	cr_assert_eq(hook.calls, 2);
	cr_assert_eq(tb.fired, 0);
	cr_assert_eq(hook.rev, 4, "B's decided on A's committed state");
	regs = json_object_get(hook.state, "registrations");
	cr_assert_eq(json_array_size(regs), 2);
	scsi_dev_pr_commit_done(e.dev, 0, SCSI_PR_COMMIT_OK, 5, NULL);
	tcmd_wait(&e, &tb);
	cr_assert_eq(tb.cmd.status, SCSI_GOOD);
}

Test(scsi_pr_cluster, preempt_and_abort_names_the_nexuses_and_applying_aborts_their_tasks)
{
	uint8_t p[24], b[512];
	struct tcmd t, r, o;
	char why[160];

	cr_assert_eq(apply(3, st_a_holds, why, sizeof(why)), 1, "%s", why);
	/* A preempts B's registration and aborts B's tasks. */
	start_prout(&t, e.a, 0x05, 1, 0xaa, 0xbb, p);
	cr_assert_eq(hook.calls, 1);
	cr_assert_eq(json_array_size(json_object_get(hook.state, "aborted")), 1);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(
		json_object_get(hook.state, "aborted"), 0), "initiator")), B);
	cr_assert_eq(json_array_size(json_object_get(hook.state, "registrations")), 1);
	/* B has a task queued behind a running one when the state lands (here: the
	 * commit's echo through the watch, before the commit's answer). */
	tcmd_prep(&e, &r, e.b, 0, CDB(0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0), b, sizeof(b),
		  SCSI_DIR_READ);
	tcmd_prep(&e, &o, e.b, 0, CDB(0x00, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE);
	o.cmd.attr = SCSI_ATTR_ORDERED;
	scsi_cmd_submit(&r.cmd);
	scsi_cmd_submit(&o.cmd);
	cr_assert_eq(scsi_dev_pr_apply(e.dev, 0, 4, hook.state, false, why, sizeof(why)), 1,
		     "%s", why);
	tcmd_wait(&e, &o);
	cr_assert_eq(o.cmd.status, SCSI_TASK_ABORTED);
	tcmd_wait(&e, &r);
	cr_assert_eq(r.cmd.status, SCSI_GOOD, "running: not aborted");
	scsi_dev_pr_commit_done(e.dev, 0, SCSI_PR_COMMIT_OK, 4, NULL);
	tcmd_wait(&e, &t);
	cr_assert_eq(t.cmd.status, SCSI_GOOD);
	/* B hears of it; A, who preempted, does not. */
	run(&t, e.b, CDB(0x00, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE);
	cr_assert_sense(&t, SCSI_SK_UNIT_ATTENTION, 0x2a, 0x05);
	cr_assert_eq(run(&t, e.a, CDB(0x00, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE), SCSI_GOOD);
}

Test(scsi_pr_cluster, without_the_hook_reservations_are_local_again)
{
	uint8_t p[24];
	struct tcmd t;
	uint32_t n;
	char why[160];

	cr_assert_eq(apply(3, st_a_holds, why, sizeof(why)), 1, "%s", why);
	scsi_dev_set_pr_cluster(e.dev, NULL, NULL);
	/* The state applied last is where the local rules go on from. */
	prep_prout(&t, e.b, 0x00, 0, 0xbb, 0, p);
	scsi_cmd_submit(&t.cmd);
	tcmd_wait(&e, &t);
	cr_assert_eq(t.cmd.status, SCSI_GOOD);
	cr_assert_eq(hook.calls, 0);
	read_keys(e.a, &n, NULL);
	cr_assert_eq(n, 1);
}

Test(scsi_pr_cluster, a_name_only_registration_covers_every_port_of_its_initiator)
{
	struct tcmd t;
	uint64_t rev;
	json_t *st, *want;
	char why[160];
	static const char text[] =
		"{\"generation\": 1, \"aptpl\": false, \"registrations\": ["
		" {\"initiator\": \"iqn.2026-01.org.test:a\", \"rel_id\": 1, \"key\": "
		"\"0x0000000000000001\"}],"
		" \"reservation\": {\"initiator\": \"iqn.2026-01.org.test:a\", \"rel_id\": 1, "
		"\"type\": 1}}";

	/* What REGISTER AND MOVE with a name-only TransportID leaves: no ISID. */
	cr_assert_eq(apply(2, text, why, sizeof(why)), 1, "%s", why);
	cr_assert_eq(wr(e.a, &t), SCSI_GOOD, "A's port holds it through its name");
	cr_assert_eq(wr(e.b, &t), SCSI_RESERVATION_CONFLICT);
	st = state_now(&rev);
	want = js(text);
	cr_assert(json_equal(st, want), "%s", json_dumps(st, 0));
	json_decref(st);
	json_decref(want);
}

Test(scsi_pr_cluster, a_registrants_only_reservation_released_elsewhere_tells_the_others)
{
	struct tcmd t;
	char why[160];

	cr_assert_eq(apply(2, "{\"generation\": 2, \"aptpl\": false, \"registrations\": ["
			      "{\"initiator\": \"" A "\", \"rel_id\": 1, \"key\": "
			      "\"0x00000000000000aa\"}, {\"initiator\": \"" B "\", \"rel_id\": 1, "
			      "\"key\": \"0x00000000000000bb\"}], \"reservation\": {\"initiator\": "
			      "\"" A "\", \"rel_id\": 1, \"type\": 5}}", why, sizeof(why)), 1, "%s",
		     why);
	cr_assert_eq(apply(3, "{\"generation\": 2, \"aptpl\": false, \"registrations\": ["
			      "{\"initiator\": \"" A "\", \"rel_id\": 1, \"key\": "
			      "\"0x00000000000000aa\"}, {\"initiator\": \"" B "\", \"rel_id\": 1, "
			      "\"key\": \"0x00000000000000bb\"}], \"reservation\": null}", why,
		     sizeof(why)), 1, "%s", why);
	run(&t, e.b, CDB(0x00, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE);
	cr_assert_sense(&t, SCSI_SK_UNIT_ATTENTION, 0x2a, 0x04);
	cr_assert_eq(wr(e.b, &t), SCSI_GOOD, "released: B writes");
}

Test(scsi_pr_cluster, a_lun_reset_aborts_the_pr_outs_waiting_for_a_commit_not_the_one_out)
{
	uint8_t p1[24], p2[24];
	struct tcmd t1, t2;

	start_prout(&t1, e.a, 0x00, 0, 0, 0xaa, p1);
	start_prout(&t2, e.b, 0x00, 0, 0, 0xbb, p2);
	cr_assert_eq(hook.calls, 1, "the second waits behind the first's commit");
	scsi_lu_reset(e.dev, 0, e.a);
	tcmd_wait(&e, &t2);
	cr_assert_eq(t2.cmd.status, SCSI_TASK_ABORTED, "the waiting one is aborted");
	cr_assert_eq(t1.fired, 0, "the one out still waits for its answer");
	scsi_dev_pr_commit_done(e.dev, 0, SCSI_PR_COMMIT_OK, 2, NULL);
	tcmd_wait(&e, &t1);
	cr_assert_eq(t1.cmd.status, SCSI_GOOD, "its commit went through: it completes");
	cr_assert_eq(hook.calls, 1, "the aborted one never committed");
}

/* RSOC for one opcode (reporting option 1, or 2 with service action 0 if sa): 3 supported,
 * 1 not. */
static int rsoc_one(uint8_t op, bool sa)
{
	uint8_t b[64];
	struct tcmd t;

	cr_assert_eq(run(&t, e.a, CDB(0xa3, 0x0c, sa ? 2 : 1, op, 0, 0, 0, 0, 0, 64, 0, 0), b, 64,
			 SCSI_DIR_READ), SCSI_GOOD, "%#x", op);
	return b[1] & 7;
}

/* WCE in the caching page's changeable values. */
static int wce_changeable(void)
{
	uint8_t b[64];
	struct tcmd t;

	cr_assert_eq(run(&t, e.a, CDB(0x1a, 0x08, 0x48, 0, 64, 0), b, 64, SCSI_DIR_READ),
		     SCSI_GOOD);
	return b[4 + 2] & 0x04;
}

/* What only one gateway would hold is not supported in a cluster: RESERVE(6) and RELEASE(6)
 * are INVALID COMMAND OPERATION CODE and left out of REPORT SUPPORTED OPERATION CODES (a host
 * relying on them would think it had the LU while a host on another gateway wrote), WCE is not
 * changeable (the configuration's write_cache, the same everywhere). Without the hook they
 * are back. */
Test(scsi_pr_cluster, spc2_reservations_and_wce_are_not_one_gateways_in_a_cluster)
{
	uint8_t sel[4 + 20] = { 0 };
	struct tcmd t;

	cr_assert_eq(run(&t, e.a, CDB(0x16, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE),
		     SCSI_CHECK_CONDITION);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x20, 0x00);
	run(&t, e.a, CDB(0x17, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x20, 0x00);
	cr_assert_eq(wr(e.b, &t), SCSI_GOOD, "nothing was reserved");
	cr_assert_eq(rsoc_one(0x16, false), 1);
	cr_assert_eq(rsoc_one(0x17, false), 1);
	cr_assert_eq(rsoc_one(0x5f, true), 3, "PERSISTENT RESERVE OUT is the way");
	cr_assert_eq(wce_changeable(), 0);
	sel[4] = 0x08;
	sel[5] = 0x12;		/* WCE 0, the LU's is 1 */
	run(&t, e.a, CDB(0x15, 0x10, 0, 0, sizeof(sel), 0), sel, sizeof(sel), SCSI_DIR_WRITE);
	cr_assert_sense(&t, SCSI_SK_ILLEGAL_REQUEST, 0x26, 0x00);
	sel[6] = 0x04;		/* WCE as it is: accepted */
	cr_assert_eq(run(&t, e.a, CDB(0x15, 0x10, 0, 0, sizeof(sel), 0), sel, sizeof(sel),
			 SCSI_DIR_WRITE), SCSI_GOOD);

	scsi_dev_set_pr_cluster(e.dev, NULL, NULL);
	cr_assert_eq(run(&t, e.a, CDB(0x16, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE), SCSI_GOOD);
	wr(e.b, &t);
	cr_assert_eq(t.cmd.status, SCSI_RESERVATION_CONFLICT);
	cr_assert_eq(run(&t, e.a, CDB(0x17, 0, 0, 0, 0, 0), NULL, 0, SCSI_DIR_NONE), SCSI_GOOD);
	cr_assert_eq(rsoc_one(0x16, false), 3);
	cr_assert_eq(wce_changeable(), 0x04);
}
