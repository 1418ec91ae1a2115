// SPDX-License-Identifier: MIT
/*
 * A command's run on its LU's owner: the task set (SIMPLE / ORDERED / HEAD OF QUEUE) that
 * starts it, its handler started (by the task set, or again after the writer range lock
 * COMPARE AND WRITE relies on), its completion (from a gw_defer, so never inside
 * scsi_cmd_submit, or at once for an asynchronous handler that finished, which ends its task
 * and range and starts the next), and its end while still queued (abort, reset).
 *
 * The dispatcher, the handlers, reservations and resets call in here; it calls nothing else
 * in gateway/scsi by name, and reaches a handler only through the opcode table entry the
 * dispatcher put in cmd->op.
 */
#include <errno.h>
#include <stdlib.h>

#include "scsi_priv.h"

enum {
	SCSI_CMDF_EXCL = 1 << 0,	/* range lock held exclusively (COMPARE AND WRITE) */
	SCSI_CMDF_CAW_COUNTED = 1 << 1,	/* counted in lu->nr_caw */
};

/* A completion ends the command's task and range, which start the commands behind them. */
static void scsi_task_end(struct scsi_cmd *cmd);
static void scsi_range_release(struct scsi_cmd *cmd);

/* Completion */

static void scsi_cmd_done_msg(struct gw_msg *m)
{
	struct scsi_cmd *cmd = gw_container_of(m, struct scsi_cmd, msg_done);

	cmd->done(cmd);
}

/* done on the command's own loop: at once when the LU's owner is that loop (and always with
 * one loop), else by the message embedded in the command; the owner touches it no more. */
static void scsi_cmd_done_home(struct scsi_cmd *cmd)
{
	struct gw_loop *home = scsi_cmd_loop(cmd);

	if (!cmd->lu || cmd->lu->loop == home) {
		cmd->done(cmd);
		return;
	}
	cmd->msg_done.fn = scsi_cmd_done_msg;
	if (gw_loop_post(home, &cmd->msg_done) < 0)
		cmd->done(cmd);	/* its loop was finished: shutting down, nobody else runs it */
}

static void scsi_cmd_complete(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;

	free(cmd->core_priv);
	cmd->core_priv = NULL;
	if (lu) {
		if (!gw_list_empty(&cmd->range_node))
			scsi_range_release(cmd);
		if (cmd->state == SCSI_CMD_ST_RUNNING || cmd->state == SCSI_CMD_ST_COMPLETING)
			scsi_task_end(cmd);
		lu->nr_cmds--;
	}
	cmd->state = SCSI_CMD_ST_DONE;
	scsi_cmd_done_home(cmd);
}

void scsi_cmd_defer_fn(struct gw_defer *d)
{
	scsi_cmd_complete(gw_container_of(d, struct scsi_cmd, defer));
}

static void scsi_cmd_complete_later(struct scsi_cmd *cmd)
{
	if (cmd->state != SCSI_CMD_ST_RUNNING)
		cmd->state = SCSI_CMD_ST_NEW;
	gw_defer_queue(scsi_cmd_home(cmd), &cmd->defer);
}

void scsi_cmd_finish(struct scsi_cmd *cmd)
{
	scsi_cmd_complete(cmd);
}

void scsi_cmd_finish_later(struct scsi_cmd *cmd)
{
	gw_defer_queue(scsi_cmd_home(cmd), &cmd->defer);
}

static void scsi_cmd_run(struct scsi_cmd *cmd)
{
	const struct scsi_op *op = cmd->op;

	if (op->fn(cmd) == SCSI_CMD_DONE)
		scsi_cmd_complete_later(cmd);
}

void scsi_cmd_rerun(struct scsi_cmd *cmd)
{
	scsi_cmd_run(cmd);
}

bool scsi_cmd_abort_requested(const struct scsi_cmd *cmd)
{
	return __atomic_load_n(&cmd->abort_req, __ATOMIC_ACQUIRE);
}

/* Called by the task set when the command may start. */
static void scsi_task_run(struct scsi_cmd *cmd)
{
	cmd->state = SCSI_CMD_ST_RUNNING;
	if (scsi_cmd_abort_requested(cmd)) {
		/* Aborted from its own loop while it waited here: it ends as it would have had
		 * the abort found it queued (the task set's count ends at completion). */
		cmd->status = SCSI_TASK_ABORTED;
		cmd->sense_len = 0;
		scsi_cmd_complete_later(cmd);
		return;
	}
	scsi_cmd_run(cmd);
}

static void scsi_task_mark_waiting(struct scsi_cmd *cmd)
{
	cmd->state = SCSI_CMD_ST_WAITING;
}

/* Completes a command that never started (aborted while queued, reset). */
void scsi_task_abort_queued(struct scsi_cmd *cmd)
{
	gw_list_del(&cmd->node);
	cmd->status = SCSI_TASK_ABORTED;
	cmd->sense_len = 0;
	cmd->state = SCSI_CMD_ST_NEW;
	gw_defer_queue(scsi_cmd_home(cmd), &cmd->defer);
}

int scsi_abort_cmd(struct scsi_cmd *cmd)
{
	/* Another loop's LU: its state is the owner's to read. The owner sees the request when
	 * it starts the command (scsi_cmd_submit_owner, scsi_task_run, a waiting PR OUT) and
	 * ends it TASK ABORTED; a running one ends as it would have. Either way through its
	 * done, once, on this loop. */
	if (cmd->lu && cmd->lu->loop != scsi_cmd_loop(cmd)) {
		__atomic_store_n(&cmd->abort_req, true, __ATOMIC_RELEASE);
		return -EBUSY;
	}
	if (cmd->state != SCSI_CMD_ST_WAITING)
		return -EBUSY;
	scsi_task_abort_queued(cmd);
	return 0;
}

/* Task set */

static bool scsi_task_can_start(const struct scsi_lu *lu, const struct scsi_cmd *cmd)
{
	switch (cmd->attr) {
	case SCSI_ATTR_HEAD_OF_QUEUE:
		return true;
	case SCSI_ATTR_ORDERED:
		return lu->nr_running == 0;
	default:
		return lu->nr_ordered == 0;
	}
}

static void scsi_task_begin(struct scsi_lu *lu, struct scsi_cmd *cmd)
{
	lu->nr_running++;
	if (cmd->attr == SCSI_ATTR_ORDERED)
		lu->nr_ordered++;
	scsi_task_run(cmd);
}

void scsi_task_start(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;

	if (cmd->attr == SCSI_ATTR_HEAD_OF_QUEUE ||
	    (gw_list_empty(&lu->waitq) && scsi_task_can_start(lu, cmd))) {
		scsi_task_begin(lu, cmd);
		return;
	}
	scsi_task_mark_waiting(cmd);
	gw_list_add_tail(&lu->waitq, &cmd->node);
}

static void scsi_task_end(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;

	lu->nr_running--;
	if (cmd->attr == SCSI_ATTR_ORDERED)
		lu->nr_ordered--;
	while (!gw_list_empty(&lu->waitq)) {
		struct scsi_cmd *next = gw_list_first_entry(&lu->waitq, struct scsi_cmd, node);

		if (!scsi_task_can_start(lu, next))
			break;
		gw_list_del(&next->node);
		scsi_task_begin(lu, next);
	}
}

/* Writer range lock */

static bool scsi_overlap(uint64_t a, uint64_t an, uint64_t b, uint64_t bn)
{
	return a < b + bn && b < a + an;
}

bool scsi_range_acquire(struct scsi_cmd *cmd, uint64_t lba, uint64_t n, bool exclusive)
{
	struct scsi_lu *lu = cmd->lu;
	struct scsi_cmd *o;

	cmd->lba = lba;
	cmd->nblocks = n;
	if (exclusive) {
		cmd->flags |= SCSI_CMDF_EXCL;
		if (!(cmd->flags & SCSI_CMDF_CAW_COUNTED)) {
			cmd->flags |= SCSI_CMDF_CAW_COUNTED;
			lu->nr_caw++;
		}
	}
	if (exclusive || lu->nr_caw) {
		gw_list_for_each_entry(o, &lu->writers, range_node)
			if ((exclusive || (o->flags & SCSI_CMDF_EXCL)) &&
			    scsi_overlap(lba, n, o->lba, o->nblocks))
				goto park;
		/* Writers do not overtake a COMPARE AND WRITE already waiting for the range. */
		if (!exclusive)
			gw_list_for_each_entry(o, &lu->range_waiters, node)
				if ((o->flags & SCSI_CMDF_EXCL) &&
				    scsi_overlap(lba, n, o->lba, o->nblocks))
					goto park;
	}
	gw_list_add_tail(&lu->writers, &cmd->range_node);
	return true;
park:
	gw_list_add_tail(&lu->range_waiters, &cmd->node);
	return false;
}

static void scsi_range_release(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;
	struct gw_list again;

	gw_list_del(&cmd->range_node);
	if (cmd->flags & SCSI_CMDF_CAW_COUNTED) {
		cmd->flags &= ~SCSI_CMDF_CAW_COUNTED;
		lu->nr_caw--;
	}
	if (gw_list_empty(&lu->range_waiters))
		return;
	/* Everyone waiting tries again, in arrival order; those still blocked re-queue. */
	gw_list_init(&again);
	again.next = lu->range_waiters.next;
	again.prev = lu->range_waiters.prev;
	again.next->prev = &again;
	again.prev->next = &again;
	gw_list_init(&lu->range_waiters);
	while (!gw_list_empty(&again)) {
		struct scsi_cmd *w = gw_list_first_entry(&again, struct scsi_cmd, node);

		gw_list_del(&w->node);
		scsi_cmd_rerun(w);
	}
}
