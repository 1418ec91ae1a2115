// SPDX-License-Identifier: MIT
/*
 * A command's run: its handler started (by the task set, or again after a range lock), its
 * completion (from a gw_defer, so never inside scsi_cmd_submit, or at once for an
 * asynchronous handler that finished), and its end while still queued (abort, reset). The
 * task set (scsi_dev.c) and the handlers call in here; it reaches a handler only through the
 * opcode table entry the dispatcher put in cmd->op.
 */
#include <errno.h>
#include <stdlib.h>

#include "scsi_priv.h"

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
void scsi_task_run(struct scsi_cmd *cmd)
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

bool scsi_task_is_waiting(const struct scsi_cmd *cmd)
{
	return cmd->state == SCSI_CMD_ST_WAITING;
}

void scsi_task_mark_waiting(struct scsi_cmd *cmd)
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
