// SPDX-License-Identifier: MIT
/*
 * Cluster-wide persistent reservations (docs/CLUSTER.md, include/scsi.h): a LU's reservations
 * as the cluster's state, in and out of JSON; applying a state (with the unit attentions and
 * aborts a local PERSISTENT RESERVE OUT would have caused, found by comparing the old state
 * with the new one); and a PR OUT decided by scsi_pr.c's rules on a copy of the state applied
 * last, whose result goes to the owner's commit hook and completes the command only once the
 * owner answered.
 *
 * Unit attentions by difference: a registration that went raises REGISTRATIONS PREEMPTED
 * (2A/05), or RESERVATIONS PREEMPTED (2A/03) when none are left (CLEAR); a reservation of a
 * registrants-only or all-registrants type that went while registrations stay raises
 * RESERVATIONS RELEASED (2A/04) for them. The nexus that issued the command is spared, as the
 * local rules spare it; a nexus is served by one gateway, so the others find nothing to spare.
 *
 * It sits on top of the local rules: the opcode table's PERSISTENT RESERVE OUT is scsi_prc_out
 * here, which runs scsi_pr.c's scsi_pr_out_local directly while reservations are this
 * gateway's own. It calls down into scsi_pr.c, the task set (commands finished or aborted),
 * the unit attentions, the LUN lookup and the reply helpers; scsi_pr.c never calls up here
 * (what it must tell while deciding, it writes in lu->prc). scsi_dev.c calls its init, fini
 * and abort of the PR OUTs waiting for a commit.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gw_log.h"
#include "scsi_priv.h"

#define SCSI_PRC_NAME_MAX 255

/* ---- the state in and out of JSON ---------------------------------------------------- */

static json_t *scsi_prc_nexus_json(const struct scsi_pr_reg *r)
{
	return json_pack("{s:s, s:i}", "initiator", r->initiator[0] ? r->initiator :
			 r->initiator_name, "rel_id", (int)r->rel_id);
}

static json_t *scsi_prc_encode(const struct scsi_pr *pr)
{
	json_t *regs = json_array(), *res = json_null(), *e;
	struct scsi_pr_reg *r, *holder = pr->holder;
	char key[24];

	gw_list_for_each_entry(r, &pr->regs, node) {
		snprintf(key, sizeof(key), "0x%016" PRIx64, r->key);
		e = scsi_prc_nexus_json(r);
		json_object_set_new(e, "key", json_string(key));
		json_array_append_new(regs, e);
	}
	/* All-registrants types: any registrant holds it; name the first if none is noted. */
	if (pr->reserved && !holder && scsi_pr_all_reg(pr->type) && !gw_list_empty(&pr->regs))
		holder = gw_list_first_entry(&pr->regs, struct scsi_pr_reg, node);
	if (pr->reserved && holder) {
		json_decref(res);
		res = scsi_prc_nexus_json(holder);
		json_object_set_new(res, "type", json_integer(pr->type));
	}
	return json_pack("{s:I, s:b, s:o, s:o}", "generation", (json_int_t)pr->generation,
			 "aptpl", pr->aptpl, "registrations", regs, "reservation", res);
}

/* A nexus object: initiator (port name, or bare name without ",i,0x") and rel_id. */
static int scsi_prc_nexus(const json_t *o, const char *what, char *name, char *port,
			  uint16_t *rel_id, char *why, size_t why_len)
{
	const char *ini = json_string_value(json_object_get(o, "initiator"));
	const json_t *rel = json_object_get(o, "rel_id");
	const char *sep;

	if (!json_is_object(o) || !ini || !*ini || strlen(ini) > SCSI_PRC_NAME_MAX) {
		snprintf(why, why_len, "%s: \"initiator\" must be a name of 1..%d characters", what,
			 SCSI_PRC_NAME_MAX);
		return -EINVAL;
	}
	if (!json_is_integer(rel) || json_integer_value(rel) < 1 ||
	    json_integer_value(rel) > 65535) {
		snprintf(why, why_len, "%s: \"rel_id\" must be an integer 1..65535", what);
		return -EINVAL;
	}
	*rel_id = (uint16_t)json_integer_value(rel);
	sep = strstr(ini, ",i,0x");
	if (sep) {
		snprintf(port, SCSI_PRC_NAME_MAX + 1, "%s", ini);
		snprintf(name, SCSI_PRC_NAME_MAX + 1, "%.*s", (int)(sep - ini), ini);
	} else {
		port[0] = 0;
		snprintf(name, SCSI_PRC_NAME_MAX + 1, "%s", ini);
	}
	return 0;
}

static int scsi_prc_key(const json_t *v, uint64_t *key)
{
	const char *s = json_string_value(v);
	uint64_t k = 0;
	int i;

	if (!s || strlen(s) != 18 || s[0] != '0' || s[1] != 'x')
		return -EINVAL;
	for (i = 2; i < 18; i++) {
		const char *d = strchr("0123456789abcdef", s[i]);

		if (!d || !s[i])
			return -EINVAL;
		k = k << 4 | (uint64_t)(d - "0123456789abcdef");
	}
	*key = k;
	return 0;
}

static bool scsi_prc_same_nexus(const struct scsi_pr_reg *r, const char *port, const char *name,
				uint16_t rel_id)
{
	if (r->rel_id != rel_id)
		return false;
	if (port[0] || r->initiator[0])
		return !strcasecmp(r->initiator, port);
	return !strcasecmp(r->initiator_name, name);
}

static struct scsi_pr_reg *scsi_prc_find_nexus(struct gw_list *list, const char *port,
					       const char *name, uint16_t rel_id)
{
	struct scsi_pr_reg *r;

	gw_list_for_each_entry(r, list, node)
		if (scsi_prc_same_nexus(r, port, name, rel_id))
			return r;
	return NULL;
}

/* Builds pr (initialized, empty) from state, and aborted (a list, may be NULL) from its
 * "aborted" list. On error pr and aborted are emptied again. */
static int scsi_prc_decode(const json_t *st, struct scsi_pr *pr, struct gw_list *aborted,
			   char *why, size_t why_len)
{
	char name[SCSI_PRC_NAME_MAX + 1], port[SCSI_PRC_NAME_MAX + 1], what[48];
	const json_t *gen, *regs, *res, *ab, *e;
	struct scsi_pr_reg *r, *t;
	uint16_t rel_id;
	uint64_t key;
	size_t i;
	int rc = -EINVAL;

	if (!st || json_is_null(st))
		return 0;
	gen = json_object_get(st, "generation");
	regs = json_object_get(st, "registrations");
	res = json_object_get(st, "reservation");
	ab = json_object_get(st, "aborted");
	if (!json_is_object(st)) {
		snprintf(why, why_len, "the state must be an object or null");
		goto fail;
	}
	if (!json_is_integer(gen) || json_integer_value(gen) < 0 ||
	    json_integer_value(gen) > 0xffffffffll) {
		snprintf(why, why_len, "generation: an integer 0..4294967295");
		goto fail;
	}
	if (!json_is_boolean(json_object_get(st, "aptpl"))) {
		snprintf(why, why_len, "aptpl: true or false");
		goto fail;
	}
	if (!json_is_array(regs)) {
		snprintf(why, why_len, "registrations: an array");
		goto fail;
	}
	pr->generation = (uint32_t)json_integer_value(gen);
	pr->aptpl = json_is_true(json_object_get(st, "aptpl"));
	json_array_foreach(regs, i, e) {
		snprintf(what, sizeof(what), "registrations[%zu]", i);
		if (scsi_prc_nexus(e, what, name, port, &rel_id, why, why_len))
			goto fail;
		if (scsi_prc_key(json_object_get(e, "key"), &key)) {
			snprintf(why, why_len, "%s: \"key\" must be \"0x\" and 16 lowercase hex "
				 "digits", what);
			goto fail;
		}
		if (scsi_prc_find_nexus(&pr->regs, port, name, rel_id)) {
			snprintf(why, why_len, "%s: a second registration for one I_T nexus (%s, "
				 "rel_id %u)", what, port[0] ? port : name, rel_id);
			goto fail;
		}
		if (!scsi_pr_reg_new(&pr->regs, port, name, rel_id, key)) {
			rc = -ENOMEM;
			snprintf(why, why_len, "out of memory");
			goto fail;
		}
	}
	if (res && !json_is_null(res)) {
		const json_t *type = json_object_get(res, "type");

		if (scsi_prc_nexus(res, "reservation", name, port, &rel_id, why, why_len))
			goto fail;
		if (!json_is_integer(type) || json_integer_value(type) < 0 ||
		    json_integer_value(type) > 15 ||
		    !scsi_pr_type_valid((uint8_t)json_integer_value(type))) {
			snprintf(why, why_len,
				 "reservation: unknown \"type\" (1, 3, 5, 6, 7 or 8)");
			goto fail;
		}
		pr->holder = scsi_prc_find_nexus(&pr->regs, port, name, rel_id);
		if (!pr->holder) {
			snprintf(why, why_len, "reservation: its holder (%s, rel_id %u) is not "
				 "registered", port[0] ? port : name, rel_id);
			goto fail;
		}
		pr->reserved = true;
		pr->type = (uint8_t)json_integer_value(type);
	}
	if (ab && !json_is_array(ab)) {
		snprintf(why, why_len, "aborted: an array of {\"initiator\", \"rel_id\"}");
		goto fail;
	}
	json_array_foreach(ab, i, e) {
		snprintf(what, sizeof(what), "aborted[%zu]", i);
		if (scsi_prc_nexus(e, what, name, port, &rel_id, why, why_len))
			goto fail;
		if (aborted && !scsi_pr_reg_new(aborted, port, name, rel_id, 0)) {
			rc = -ENOMEM;
			snprintf(why, why_len, "out of memory");
			goto fail;
		}
	}
	return 0;
fail:
	scsi_pr_fini(pr);
	scsi_pr_init(pr);
	if (aborted)
		gw_list_for_each_entry_safe(r, t, aborted, node)
			scsi_pr_reg_free(r);
	return rc;
}

int scsi_pr_state_check(const json_t *state, char *why, size_t why_len)
{
	struct scsi_pr pr;
	int rc;

	scsi_pr_init(&pr);
	rc = scsi_prc_decode(state, &pr, NULL, why, why_len);
	scsi_pr_fini(&pr);
	return rc;
}

/* dst (any state) becomes src's state; src is left empty. Never fails: links move. */
static void scsi_prc_move(struct scsi_pr *dst, struct scsi_pr *src)
{
	struct scsi_pr_reg *r, *t;

	scsi_pr_fini(dst);
	scsi_pr_init(dst);
	gw_list_for_each_entry_safe(r, t, &src->regs, node) {
		gw_list_del(&r->node);
		gw_list_add_tail(&dst->regs, &r->node);
	}
	dst->generation = src->generation;
	dst->reserved = src->reserved;
	dst->type = src->type;
	dst->holder = src->holder;
	dst->aptpl = src->aptpl;
	scsi_pr_init(src);
}

/* ---- applying a state ---------------------------------------------------------------- */

static void scsi_prc_ua(struct scsi_lu *lu, const struct scsi_pr_reg *r, int ua,
			const struct scsi_itn *except)
{
	struct scsi_itn *itn;

	/* Nexuses log in and out on every loop: the list is walked under its lock. */
	pthread_mutex_lock(&lu->dev->itn_lock);
	gw_list_for_each_entry(itn, &lu->dev->itns, node)
		if (itn != except && scsi_pr_reg_matches(r, itn))
			scsi_ua_set_itn(itn, lu, ua);
	pthread_mutex_unlock(&lu->dev->itn_lock);
}

static void scsi_prc_effects(struct scsi_lu *lu, struct scsi_pr *old, struct scsi_pr *nw,
			     const struct scsi_itn *except)
{
	bool none_left = gw_list_empty(&nw->regs);
	int gone = none_left ? SCSI_UA_RES_PREEMPTED : SCSI_UA_REG_PREEMPTED;
	struct scsi_pr_reg *r;

	gw_list_for_each_entry(r, &old->regs, node)
		if (!scsi_prc_find_nexus(&nw->regs, r->initiator, r->initiator_name, r->rel_id))
			scsi_prc_ua(lu, r, gone, except);
	if (old->reserved && !nw->reserved && !none_left && old->type != SCSI_PR_TYPE_WE &&
	    old->type != SCSI_PR_TYPE_EA)
		gw_list_for_each_entry(r, &nw->regs, node)
			scsi_prc_ua(lu, r, SCSI_UA_RES_RELEASED, except);
}

static int scsi_prc_apply(struct scsi_lu *lu, uint64_t rev, const json_t *state, bool force,
			  const struct scsi_itn *except, char *why, size_t why_len)
{
	struct scsi_pr nw;
	struct gw_list aborted;
	struct scsi_pr_reg *r, *t;
	int rc;

	if (!force && rev <= lu->prc.rev)
		return 0;
	scsi_pr_init(&nw);
	gw_list_init(&aborted);
	rc = scsi_prc_decode(state, &nw, &aborted, why, why_len);
	if (rc)
		return rc;
	scsi_prc_effects(lu, &lu->pr, &nw, except);
	gw_list_for_each_entry_safe(r, t, &aborted, node) {
		scsi_pr_abort_reg(lu, r);
		scsi_pr_reg_free(r);
	}
	scsi_prc_move(&lu->pr, &nw);
	gw_dbg(SCSI_LOG, "%s: LUN %llu: reservations at revision %llu (was %llu), generation %u",
	       lu->dev->name, (unsigned long long)lu->lun, (unsigned long long)rev,
	       (unsigned long long)lu->prc.rev, lu->pr.generation);
	lu->prc.rev = rev;
	return 1;
}

static int scsi_prc_apply_here(struct scsi_dev *dev, uint64_t lun, uint64_t rev,
			       const json_t *state, bool force, char *why, size_t why_len)
{
	struct scsi_lu *lu = scsi_dev_find_lu(dev, lun);
	const struct scsi_itn *except = NULL;

	if (!lu) {
		snprintf(why, why_len, "no LUN %llu", (unsigned long long)lun);
		return -ENOENT;
	}
	/* Our own commit's echo, arriving before its answer: the issuer is spared as usual. */
	if (lu->prc.inflight && lu->prc.proposed && state && json_equal(state, lu->prc.proposed))
		except = lu->prc.inflight->itn;
	return scsi_prc_apply(lu, rev, state, force, except, why, why_len);
}

static json_t *scsi_prc_state_here(struct scsi_dev *dev, uint64_t lun, uint64_t *rev)
{
	struct scsi_lu *lu = scsi_dev_find_lu(dev, lun);

	if (!lu)
		return NULL;
	if (rev)
		*rev = lu->prc.rev;
	return scsi_prc_encode(&lu->pr);
}

/* ---- PERSISTENT RESERVE OUT through the cluster ------------------------------------- */

/* The nexuses the local rules noted while deciding (PREEMPT AND ABORT), as the proposal's
 * "aborted" list; the notes are freed. */
static json_t *scsi_prc_take_aborted(struct scsi_lu *lu)
{
	json_t *ab = json_array();
	struct scsi_pr_reg *r, *t;

	gw_list_for_each_entry_safe(r, t, &lu->prc.aborted, node) {
		if (ab)
			json_array_append_new(ab, scsi_prc_nexus_json(r));
		scsi_pr_reg_free(r);
	}
	return ab;
}

static void scsi_prc_fail(struct scsi_cmd *cmd)
{
	/* LOGICAL UNIT NOT ACCESSIBLE, ASYMMETRIC ACCESS STATE TRANSITION: hosts retry. */
	scsi_cmd_set_sense(cmd, SCSI_SK_NOT_READY, 0x04, 0x0a);
}

/*
 * The commit goes out on the device's loop, whose objects the cluster hook (the control
 * socket, its watchers and timers) are. From another owner it is a message carrying a copy of
 * the proposal (jansson's reference counts are not for two threads); a refusal there comes
 * back to the owner as an UNAVAILABLE answer, which fails the command as a refusal here does.
 */
static int scsi_prc_commit(struct scsi_dev *dev, uint64_t lun, uint64_t rev, const json_t *state)
{
	const struct scsi_pr_cluster_ops *ops = dev->pr_ops;
	int rc = ops ? ops->commit(dev->pr_arg, dev, lun, rev, state) : -ENOTCONN;

	if (rc < 0)
		gw_warn_rl(SCSI_LOG, "%s: LUN %llu: PERSISTENT RESERVE OUT not committed (%s): NOT "
			   "READY", dev->name, (unsigned long long)lun, strerror(-rc));
	return rc;
}

struct scsi_prc_msg {
	struct scsi_dev *dev;
	uint64_t lun;
	uint64_t rev;
	json_t *state;
};

static void scsi_prc_commit_done_here(struct scsi_dev *dev, uint64_t lun,
				      enum scsi_pr_commit_result res, uint64_t rev,
				      const json_t *state);

/* On the owner: the device's loop could not send the commit. */
static void scsi_prc_refused_fn(void *arg)
{
	struct scsi_prc_msg *m = arg;

	scsi_prc_commit_done_here(m->dev, m->lun, SCSI_PR_COMMIT_UNAVAILABLE, 0, NULL);
	free(m);
}

/* On the device's loop. The PR OUT is in flight on its owner, so the device and LU stay. */
static void scsi_prc_commit_fn(void *arg)
{
	struct scsi_prc_msg *m = arg;
	struct gw_loop *owner = scsi_dev_lu_loop(m->dev, m->lun);

	if (scsi_prc_commit(m->dev, m->lun, m->rev, m->state) == 0) {
		json_decref(m->state);
		free(m);
		return;
	}
	json_decref(m->state);
	m->state = NULL;
	if (!owner || gw_loop_send(owner, scsi_prc_refused_fn, m) < 0) {
		gw_err(SCSI_LOG, "%s: LUN %llu: a refused commit not answered: its owner is gone",
		       m->dev->name, (unsigned long long)m->lun);
		free(m);
	}
}

/* On the owner (not the device's loop): the commit posted to the device's loop. */
static int scsi_prc_commit_post(struct scsi_dev *dev, uint64_t lun, uint64_t rev,
				const json_t *state)
{
	struct scsi_prc_msg *m = calloc(1, sizeof(*m));
	int rc;

	if (!m)
		return -ENOMEM;
	m->dev = dev;
	m->lun = lun;
	m->rev = rev;
	m->state = json_deep_copy(state);
	if (!m->state) {
		free(m);
		return -ENOMEM;
	}
	rc = gw_loop_send(dev->loop, scsi_prc_commit_fn, m);
	if (rc < 0) {
		gw_warn_rl(SCSI_LOG, "%s: LUN %llu: PERSISTENT RESERVE OUT not committed (%s): NOT "
			   "READY", dev->name, (unsigned long long)lun, strerror(-rc));
		json_decref(m->state);
		free(m);
	}
	return rc;
}

/*
 * Decides cmd on the state applied last: scsi_pr.c's rules run on a copy, held back from unit
 * attentions and aborts. DONE: the command is finished (refused, or nothing changes, or the
 * commit could not go out); ASYNC: its commit is out.
 */
static int scsi_prc_decide(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;
	struct scsi_dev *dev = lu->dev;
	json_t *before, *after = NULL, *aborted;
	struct scsi_pr saved;
	char why[160];
	int rc;

	cmd->status = SCSI_GOOD;
	cmd->sense_len = 0;
	before = scsi_prc_encode(&lu->pr);
	if (!before) {
		cmd->status = SCSI_BUSY;
		return SCSI_CMD_DONE;
	}
	scsi_pr_init(&saved);
	scsi_prc_move(&saved, &lu->pr);
	if (scsi_prc_decode(before, &lu->pr, NULL, why, sizeof(why))) {
		scsi_prc_move(&lu->pr, &saved);
		json_decref(before);
		cmd->status = SCSI_BUSY;
		return SCSI_CMD_DONE;
	}
	lu->prc.deciding = true;
	scsi_pr_out_local(cmd);
	lu->prc.deciding = false;
	aborted = scsi_prc_take_aborted(lu);
	if (cmd->status == SCSI_GOOD)
		after = scsi_prc_encode(&lu->pr);
	scsi_prc_move(&lu->pr, &saved);
	if (cmd->status != SCSI_GOOD || !after || json_equal(before, after)) {
		/* Refused, or GOOD on the state applied last with nothing to change. */
		if (cmd->status == SCSI_GOOD && !after)
			cmd->status = SCSI_BUSY;
		json_decref(aborted);
		json_decref(before);
		json_decref(after);
		return SCSI_CMD_DONE;
	}
	json_decref(before);
	if (json_array_size(aborted))
		json_object_set_new(after, "aborted", aborted);
	else
		json_decref(aborted);
	if (lu->loop == dev->loop)
		rc = scsi_prc_commit(dev, lu->lun, lu->prc.rev, after);
	else
		rc = scsi_prc_commit_post(dev, lu->lun, lu->prc.rev, after);
	if (rc < 0) {
		json_decref(after);
		scsi_prc_fail(cmd);
		return SCSI_CMD_DONE;
	}
	lu->prc.inflight = cmd;
	lu->prc.proposed = after;
	return SCSI_CMD_ASYNC;
}

/* Starts the PR OUTs that waited, until one has its commit out. */
static void scsi_prc_kick(struct gw_defer *d)
{
	struct scsi_lu *lu = gw_container_of(d, struct scsi_lu, prc.kick);

	while (!lu->prc.inflight && !gw_list_empty(&lu->prc.queue)) {
		struct scsi_cmd *cmd = gw_list_first_entry(&lu->prc.queue, struct scsi_cmd, node);

		gw_list_del(&cmd->node);
		gw_list_init(&cmd->node);
		if (scsi_cmd_abort_requested(cmd)) {
			cmd->status = SCSI_TASK_ABORTED;
			cmd->sense_len = 0;
		} else if (!scsi_dev_pr_cluster(lu->dev))
			scsi_pr_out_local(cmd);
		else if (scsi_prc_decide(cmd) == SCSI_CMD_ASYNC)
			break;
		scsi_cmd_finish_later(cmd);
	}
}

void scsi_prc_abort_queued(struct scsi_lu *lu, const struct scsi_itn *only)
{
	struct scsi_cmd *cmd, *t;

	gw_list_for_each_entry_safe(cmd, t, &lu->prc.queue, node) {
		if (only && cmd->itn != only)
			continue;
		gw_list_del(&cmd->node);
		gw_list_init(&cmd->node);
		cmd->status = SCSI_TASK_ABORTED;
		cmd->sense_len = 0;
		scsi_cmd_finish_later(cmd);
	}
}

/* The opcode table's PERSISTENT RESERVE OUT: the cluster's on a device with the hook, else
 * the local rules. */
int scsi_prc_out(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;

	if (!scsi_dev_pr_cluster(lu->dev))
		return scsi_pr_out_local(cmd);
	cmd->step = 0;		/* commit rounds lost */
	if (lu->prc.inflight || !gw_list_empty(&lu->prc.queue)) {
		gw_list_add_tail(&lu->prc.queue, &cmd->node);
		return SCSI_CMD_ASYNC;
	}
	return scsi_prc_decide(cmd);
}

static void scsi_prc_commit_done_here(struct scsi_dev *dev, uint64_t lun,
				      enum scsi_pr_commit_result res, uint64_t rev,
				      const json_t *state)
{
	struct scsi_lu *lu = scsi_dev_find_lu(dev, lun);
	struct scsi_cmd *cmd;
	json_t *proposed;
	char why[160];
	int rc;

	if (!lu || !lu->prc.inflight) {
		gw_warn_rl(SCSI_LOG, "%s: LUN %llu: a commit answer with no commit out: ignored",
			dev->name, (unsigned long long)lun);
		return;
	}
	cmd = lu->prc.inflight;
	proposed = lu->prc.proposed;
	lu->prc.inflight = NULL;
	lu->prc.proposed = NULL;
	switch (res) {
	case SCSI_PR_COMMIT_OK:
		rc = scsi_prc_apply(lu, rev, proposed, false, cmd->itn, why, sizeof(why));
		if (rc < 0) {
			gw_err(SCSI_LOG, "%s: LUN %llu: committed state not applied: %s", dev->name,
			       (unsigned long long)lun, why);
			scsi_prc_fail(cmd);
		}
		break;
	case SCSI_PR_COMMIT_CONFLICT:
		rc = scsi_prc_apply(lu, rev, state, false, NULL, why, sizeof(why));
		if (rc < 0) {
			gw_err(SCSI_LOG, "%s: LUN %llu: the winning state is refused: %s",
			       dev->name, (unsigned long long)lun, why);
			scsi_prc_fail(cmd);
			break;
		}
		if (++cmd->step >= SCSI_PR_ROUNDS) {
			gw_warn_rl(SCSI_LOG, "%s: LUN %llu: PERSISTENT RESERVE OUT lost %u races "
				   "in a row: NOT READY", dev->name, (unsigned long long)lun,
				   cmd->step);
			scsi_prc_fail(cmd);
			break;
		}
		/* Decided again on the winner's state, ahead of the ones waiting. */
		gw_list_add(&lu->prc.queue, &cmd->node);
		cmd = NULL;
		break;
	case SCSI_PR_COMMIT_UNAVAILABLE:
	default:
		scsi_prc_fail(cmd);
		break;
	}
	json_decref(proposed);
	if (cmd)
		scsi_cmd_finish_later(cmd);
	if (!gw_list_empty(&lu->prc.queue))
		gw_defer_queue(lu->loop, &lu->prc.kick);
}

/* On the LU's owner: the PR OUTs that waited go on under the new mode. */
static int scsi_prc_kick_fn(void *arg)
{
	struct scsi_lu *lu = arg;

	if (!gw_list_empty(&lu->prc.queue))
		gw_defer_queue(lu->loop, &lu->prc.kick);
	return 0;
}

void scsi_dev_set_pr_cluster(struct scsi_dev *dev, const struct scsi_pr_cluster_ops *ops,
			     void *arg)
{
	struct scsi_lu *lu;

	if (!!dev->pr_ops != !!ops)
		gw_info(SCSI_LOG, "%s: persistent reservations %s", dev->name,
			ops ? "are the cluster's" : "are this gateway's own");
	dev->pr_arg = arg;
	__atomic_store_n(&dev->pr_ops, ops, __ATOMIC_RELEASE);
	/* Each queue is its owner's: the kick runs there. */
	gw_list_for_each_entry(lu, &dev->lus, node)
		gw_loop_call(lu->loop, scsi_prc_kick_fn, lu);
}

void scsi_prc_init(struct scsi_lu *lu)
{
	memset(&lu->prc, 0, sizeof(lu->prc));
	gw_list_init(&lu->prc.queue);
	gw_list_init(&lu->prc.aborted);
	gw_defer_init(&lu->prc.kick, scsi_prc_kick);
}

void scsi_prc_fini(struct scsi_lu *lu)
{
	gw_defer_cancel(&lu->prc.kick);
	json_decref(lu->prc.proposed);
	lu->prc.proposed = NULL;
	lu->prc.inflight = NULL;
}

/* ---- From the device's loop: on the LU's owner ----------------------------------------- */

/* The control socket and the cluster are loop 0's; the reservation state is the LU owner's,
 * so each entry point runs there through a synchronous call (directly with one loop). */
struct scsi_prc_call {
	struct scsi_dev *dev;
	uint64_t lun;
	uint64_t rev;
	uint64_t *rev_out;
	const json_t *state;
	bool force;
	char *why;
	size_t why_len;
	enum scsi_pr_commit_result res;
	json_t *out;
};

static struct gw_loop *scsi_prc_owner(struct scsi_dev *dev, uint64_t lun)
{
	struct gw_loop *loop = scsi_dev_lu_loop(dev, lun);

	return loop ? loop : dev->loop;
}

static int scsi_prc_apply_fn(void *arg)
{
	struct scsi_prc_call *c = arg;

	return scsi_prc_apply_here(c->dev, c->lun, c->rev, c->state, c->force, c->why,
				   c->why_len);
}

int scsi_dev_pr_apply(struct scsi_dev *dev, uint64_t lun, uint64_t rev, const json_t *state,
		      bool force, char *why, size_t why_len)
{
	struct scsi_prc_call c = { .dev = dev, .lun = lun, .rev = rev, .state = state,
				   .force = force, .why = why, .why_len = why_len };

	return gw_loop_call(scsi_prc_owner(dev, lun), scsi_prc_apply_fn, &c);
}

static int scsi_prc_state_fn(void *arg)
{
	struct scsi_prc_call *c = arg;

	c->out = scsi_prc_state_here(c->dev, c->lun, c->rev_out);
	return 0;
}

json_t *scsi_dev_pr_state(struct scsi_dev *dev, uint64_t lun, uint64_t *rev)
{
	struct scsi_prc_call c = { .dev = dev, .lun = lun, .rev_out = rev };

	gw_loop_call(scsi_prc_owner(dev, lun), scsi_prc_state_fn, &c);
	return c.out;
}

static int scsi_prc_commit_done_fn(void *arg)
{
	struct scsi_prc_call *c = arg;

	scsi_prc_commit_done_here(c->dev, c->lun, c->res, c->rev, c->state);
	return 0;
}

void scsi_dev_pr_commit_done(struct scsi_dev *dev, uint64_t lun,
			     enum scsi_pr_commit_result res, uint64_t rev, const json_t *state)
{
	struct scsi_prc_call c = { .dev = dev, .lun = lun, .res = res, .rev = rev,
				   .state = state };

	gw_loop_call(scsi_prc_owner(dev, lun), scsi_prc_commit_done_fn, &c);
}
