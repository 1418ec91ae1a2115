/* SPDX-License-Identifier: MIT */
/*
 * A fake libiscsi for the failover core's unit tests (test_mp_path.c, test_mp_path_*.c,
 * test_mp_lun.c). Not a header to share: it DEFINES the iscsi_* functions the path's files
 * (mp_path*.c) call, so that a test binary that includes it (exactly one file per binary)
 * links these instead of libiscsi's. It is not a .c file because the unit-test rule links every
 * helper .c into every test binary, and the other tests (test_mp_live) need the real libiscsi.
 *
 * The model: FAKE_NTGT back-end ports, portal "192.0.2.N:3260" reaching fake_tgt[N - 1]. A
 * port is up or down; up, it logs in, answers the identity probe (VPD 0x83 with the device's
 * NAA designator and its target port group, READ CAPACITY(16), REPORT TARGET PORT GROUPS with
 * its ALUA state or no ALUA) and TEST UNIT READY, and answers I/O with `answer` (GOOD unless a
 * test sets a status and sense) or holds it until the test answers. Down, a connect fails and
 * every command gets a transport error, as libiscsi reports a dead connection.
 *
 * Nothing runs by itself: fake_iscsi_run() delivers what is pending, like one iscsi_service()
 * round on every context. Time is the test's too: the path's files and mp_lun.c are compiled
 * with gw_now_ms()/gw_now_ns() mapped to fake_now (see FAKE_CLOCK below).
 *
 * Sockets, for the tests of the event path (mp_path_watch_fn, the flushes): with fake_fds set
 * before the contexts connect, each context gets an eventfd as its socket, which the path
 * watches on the test's gw_loop. A command is then "unsent" until an iscsi_service() with
 * POLLOUT writes it (iscsi_which_events() asks for POLLOUT meanwhile, as libiscsi does);
 * fake_fd_answer() makes the socket readable, and the next iscsi_service() with POLLIN
 * delivers the answer of every command written. A context with full set takes nothing.
 */
#ifndef FAKE_ISCSI_H
#define FAKE_ISCSI_H

#include <criterion/criterion.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "gw_loop.h"

/* The clock of the code under test. */
static uint64_t fake_now = 1000000;

static inline uint64_t fake_now_ms(void)
{
	return fake_now;
}

static inline uint64_t fake_now_ns(void)
{
	return fake_now * 1000000ull;
}

#define gw_now_ms() fake_now_ms()
#define gw_now_ns() fake_now_ns()

#define FAKE_NTGT 4
#define FAKE_BLOCK 512u
#define FAKE_BLOCKS 2048u

struct fake_answer {
	int status;		/* SCSI_STATUS_* */
	uint8_t key, asc, ascq;
};

struct fake_tgt {
	bool down;
	int alua_state;		/* ALUA state of the port's group; -1: no ALUA */
	uint8_t naa[16];	/* the device's identity */
	uint32_t block_size;
	uint32_t blocks;	/* READ CAPACITY's answer; 0: FAKE_BLOCKS */
	unsigned int capacity_reads;	/* READ CAPACITY(16) commands received */
	bool hold;		/* I/O waits for fake_answer_held() */
	struct fake_answer answer;	/* for I/O not held */
	uint8_t caw_blocks;		/* VPD B0 MAXIMUM COMPARE AND WRITE LENGTH; 0: no page */
	uint32_t sense_info;		/* CHECK CONDITION of I/O: INFORMATION in the sense bytes */
	bool tmf_hold;			/* task management requests are never answered */
	uint32_t tmf_response;		/* else their answer (RFC 7143 §11.6.1) */
	unsigned int logins, ios, reads, writes, caws;
	unsigned int aborts, lun_resets;	/* task management requests received */
	uint32_t isid_rnd;		/* of the last context connected */
};

static struct fake_tgt fake_tgt[FAKE_NTGT];

struct fake_cmd {
	struct fake_cmd *next;
	struct scsi_task *task;		/* NULL: a NOP-Out */
	iscsi_command_cb cb;
	void *priv;
	bool held;
	bool sent;			/* fake_fds: written by a POLLOUT service */
	int tmf;			/* a task management request: its function */
};

/* Contexts get an eventfd "socket" (see the top of this file). */
static bool fake_fds;

struct iscsi_context {
	struct fake_tgt *tgt;		/* after connect */
	iscsi_command_cb connect_cb, login_cb;
	void *connect_priv, *login_priv;
	struct fake_cmd *cmds;		/* in order */
	char err[96];
	int slot;
	uint32_t isid_rnd;
	int fd;				/* fake_fds: the "socket", -1 before connect */
	bool full;			/* the socket takes nothing: POLLOUT services write nothing */
	unsigned int writes;		/* POLLOUT services that wrote something */
	unsigned int services;		/* iscsi_service() calls */
};

#define FAKE_NCTX 64
static struct iscsi_context *fake_ctx[FAKE_NCTX];
static unsigned int fake_nctx_live;

static __attribute__((unused)) void fake_iscsi_reset(void)
{
	memset(fake_tgt, 0, sizeof(fake_tgt));
	for (int i = 0; i < FAKE_NTGT; i++) {
		fake_tgt[i].alua_state = -1;
		fake_tgt[i].block_size = FAKE_BLOCK;
		fake_tgt[i].naa[0] = 0x60;
		fake_tgt[i].naa[15] = 0x01;
	}
	fake_now = 1000000;
	fake_fds = false;
}

struct iscsi_context *iscsi_create_context(const char *initiator_name)
{
	struct iscsi_context *c;

	(void)initiator_name;
	for (int i = 0; i < FAKE_NCTX; i++) {
		if (fake_ctx[i])
			continue;
		c = calloc(1, sizeof(*c));
		cr_assert_not_null(c);
		c->slot = i;
		c->fd = -1;
		fake_ctx[i] = c;
		fake_nctx_live++;
		return c;
	}
	cr_assert_fail("fake libiscsi: more than %d contexts", FAKE_NCTX);
	return NULL;
}

/* The commands still pending come back CANCELLED, as libiscsi does for a logged-in context. */
static void fake_cancel_all(struct iscsi_context *c)
{
	while (c->cmds) {
		struct fake_cmd *cmd = c->cmds;

		c->cmds = cmd->next;
		if (cmd->task)
			cmd->task->status = SCSI_STATUS_CANCELLED;
		cmd->cb(c, SCSI_STATUS_CANCELLED, cmd->task, cmd->priv);
		free(cmd);
	}
}

int iscsi_destroy_context(struct iscsi_context *c)
{
	fake_cancel_all(c);
	if (c->fd >= 0)
		close(c->fd);
	fake_ctx[c->slot] = NULL;
	fake_nctx_live--;
	free(c);
	return 0;
}

void iscsi_scsi_cancel_all_tasks(struct iscsi_context *c)
{
	fake_cancel_all(c);
}

int iscsi_disconnect(struct iscsi_context *c)
{
	(void)c;
	return 0;
}

struct iscsi_url *iscsi_parse_full_url(struct iscsi_context *c, const char *url)
{
	struct iscsi_url *u = calloc(1, sizeof(*u));
	const char *s = strstr(url, "://"), *slash, *last;

	cr_assert_not_null(u);
	if (!s || !(slash = strchr(s + 3, '/')) || !(last = strrchr(url, '/')) || last == slash) {
		snprintf(c->err, sizeof(c->err), "bad URL");
		free(u);
		return NULL;
	}
	s += 3;
	snprintf(u->portal, sizeof(u->portal), "%.*s", (int)(slash - s), s);
	snprintf(u->target, sizeof(u->target), "%.*s", (int)(last - slash - 1), slash + 1);
	u->lun = atoi(last + 1);
	u->iscsi = c;
	return u;
}

void iscsi_destroy_url(struct iscsi_url *u)
{
	free(u);
}

const char *iscsi_get_error(struct iscsi_context *c)
{
	return c->err[0] ? c->err : "fake";
}

int iscsi_set_targetname(struct iscsi_context *c, const char *targetname)
{
	(void)c;
	(void)targetname;
	return 0;
}

int iscsi_set_session_type(struct iscsi_context *c, enum iscsi_session_type t)
{
	(void)c;
	(void)t;
	return 0;
}

int iscsi_set_header_digest(struct iscsi_context *c, enum iscsi_header_digest d)
{
	(void)c;
	(void)d;
	return 0;
}

void iscsi_set_noautoreconnect(struct iscsi_context *c, int state)
{
	(void)c;
	(void)state;
}

int iscsi_set_initiator_username_pwd(struct iscsi_context *c, const char *user,
				     const char *passwd)
{
	(void)c;
	(void)user;
	(void)passwd;
	return 0;
}

int iscsi_set_target_username_pwd(struct iscsi_context *c, const char *user, const char *passwd)
{
	(void)c;
	(void)user;
	(void)passwd;
	return 0;
}

void iscsi_set_cache_allocations(struct iscsi_context *c, int ca)
{
	(void)c;
	(void)ca;
}

int iscsi_init_transport(struct iscsi_context *c, enum iscsi_transport_type t)
{
	(void)t;
	snprintf(c->err, sizeof(c->err), "no iSER in the fake");
	return -1;
}

int iscsi_connect_async(struct iscsi_context *c, const char *portal, iscsi_command_cb cb,
			void *private_data)
{
	unsigned int a, b, d, n;

	if (sscanf(portal, "%u.%u.%u.%u", &a, &b, &d, &n) != 4 || n < 1 || n > FAKE_NTGT) {
		snprintf(c->err, sizeof(c->err), "no such portal %s", portal);
		return -1;
	}
	c->tgt = &fake_tgt[n - 1];
	c->tgt->isid_rnd = c->isid_rnd;
	if (fake_fds) {
		c->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		cr_assert_geq(c->fd, 0);
	}
	c->connect_cb = cb;
	c->connect_priv = private_data;
	return 0;
}

int iscsi_login_async(struct iscsi_context *c, iscsi_command_cb cb, void *private_data)
{
	c->login_cb = cb;
	c->login_priv = private_data;
	return 0;
}

int iscsi_get_fd(struct iscsi_context *c)
{
	return c->fd;
}

static bool fake_unsent(const struct iscsi_context *c)
{
	for (const struct fake_cmd *cmd = c->cmds; cmd; cmd = cmd->next)
		if (!cmd->sent)
			return true;
	return false;
}

int iscsi_which_events(struct iscsi_context *c)
{
	if (c->fd < 0)
		return 0;
	return POLLIN | (fake_unsent(c) ? POLLOUT : 0);
}

static int fake_answer_cmd(struct iscsi_context *c, struct fake_cmd *cmd);
static void fake_deliver(struct iscsi_context *c, struct fake_cmd *cmd, int status);

int iscsi_service(struct iscsi_context *c, int revents)
{
	int slot = c->slot;

	c->services++;
	if (c->fd < 0)
		return 0;
	if ((revents & POLLOUT) && fake_unsent(c) && !c->full) {
		c->writes++;
		for (struct fake_cmd *cmd = c->cmds; cmd; cmd = cmd->next)
			cmd->sent = true;
	}
	if (!(revents & POLLIN))
		return 0;
	{
		uint64_t v;

		if (read(c->fd, &v, sizeof(v)) < 0)
			return 0;	/* not readable: nothing came */
	}
	for (;;) {
		struct fake_cmd **pp = &c->cmds, *cmd;
		int st = -1;

		while (*pp && (!(*pp)->sent || (st = fake_answer_cmd(c, *pp)) < 0))
			pp = &(*pp)->next;
		if (!*pp)
			return 0;
		cmd = *pp;
		*pp = cmd->next;
		fake_deliver(c, cmd, st);
		if (fake_ctx[slot] != c)
			return 0;	/* destroyed from the callback */
	}
}

/* The back end of c's socket answered: the socket becomes readable. */
static __attribute__((unused)) void fake_fd_answer(struct iscsi_context *c)
{
	uint64_t one = 1;

	cr_assert_geq(c->fd, 0);
	cr_assert_eq(write(c->fd, &one, sizeof(one)), (ssize_t)sizeof(one));
}

static void fake_queue(struct iscsi_context *c, struct scsi_task *task, iscsi_command_cb cb,
		       void *priv)
{
	struct fake_cmd *cmd = calloc(1, sizeof(*cmd)), **pp = &c->cmds;

	cr_assert_not_null(cmd);
	cmd->task = task;
	cmd->cb = cb;
	cmd->priv = priv;
	while (*pp)
		pp = &(*pp)->next;
	*pp = cmd;
}

int iscsi_scsi_command_async(struct iscsi_context *c, int lun, struct scsi_task *task,
			     iscsi_command_cb cb, struct iscsi_data *data, void *private_data)
{
	(void)lun;
	(void)data;
	fake_queue(c, task, cb, private_data);
	return 0;
}

int iscsi_set_isid_random(struct iscsi_context *c, uint32_t rnd, uint32_t qualifier)
{
	(void)qualifier;
	c->isid_rnd = rnd;
	return 0;
}

/* Answered by fake_iscsi_run unless the port has tmf_hold; a function complete takes the
 * commands it names only when the initiator cancels them (as libiscsi leaves them). */
int iscsi_task_mgmt_async(struct iscsi_context *c, int lun, enum iscsi_task_mgmt_funcs function,
			  uint32_t ritt, uint32_t rcmdsn, iscsi_command_cb cb, void *private_data)
{
	struct fake_cmd *cmd = calloc(1, sizeof(*cmd)), **pp = &c->cmds;

	(void)lun;
	(void)ritt;
	(void)rcmdsn;
	cr_assert_not_null(cmd);
	cmd->tmf = function;
	cmd->cb = cb;
	cmd->priv = private_data;
	if (function == ISCSI_TM_ABORT_TASK)
		c->tgt->aborts++;
	else
		c->tgt->lun_resets++;
	while (*pp)
		pp = &(*pp)->next;
	*pp = cmd;
	return 0;
}

int iscsi_scsi_cancel_task(struct iscsi_context *c, struct scsi_task *task)
{
	for (struct fake_cmd **pp = &c->cmds; *pp; pp = &(*pp)->next) {
		struct fake_cmd *cmd = *pp;

		if (cmd->task != task)
			continue;
		*pp = cmd->next;
		task->status = SCSI_STATUS_CANCELLED;
		cmd->cb(c, SCSI_STATUS_CANCELLED, task, cmd->priv);
		free(cmd);
		return 0;
	}
	return -1;
}

int iscsi_nop_out_async(struct iscsi_context *c, iscsi_command_cb cb, unsigned char *data,
			int len, void *private_data)
{
	(void)data;
	(void)len;
	fake_queue(c, NULL, cb, private_data);
	return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* The back end's answers */

static void fake_datain(struct scsi_task *t, const uint8_t *d, size_t n)
{
	t->datain.data = malloc(n);
	cr_assert_not_null(t->datain.data);
	memcpy(t->datain.data, d, n);
	t->datain.size = (int)n;
}

static int fake_sense(struct scsi_task *t, uint8_t key, uint8_t asc, uint8_t ascq)
{
	t->sense.key = (enum scsi_sense_key)key;
	t->sense.ascq = (asc << 8) | ascq;
	return SCSI_STATUS_CHECK_CONDITION;
}

static int fake_tgt_index(const struct fake_tgt *t)
{
	return (int)(t - fake_tgt);
}

/* A command the port answers itself: the probe and the checker. -1: an I/O. */
static int fake_answer_ctl(struct fake_tgt *tg, struct scsi_task *t)
{
	uint8_t d[64];
	uint16_t tpg = (uint16_t)(fake_tgt_index(tg) + 1);

	memset(d, 0, sizeof(d));
	switch (t->cdb[0]) {
	case 0x12:		/* INQUIRY VPD 0x83: NAA 6 of the device, the port's group */
		if ((t->cdb[1] & 0x01) && t->cdb[2] == 0xb0 && tg->caw_blocks) {
			d[1] = 0xb0;	/* block limits: only MAXIMUM COMPARE AND WRITE LENGTH */
			d[3] = 0x3c;
			d[5] = tg->caw_blocks;
			fake_datain(t, d, 64);
			return SCSI_STATUS_GOOD;
		}
		if ((t->cdb[1] & 0x01) && (t->cdb[2] == 0xb0 || t->cdb[2] == 0xb2))
			return fake_sense(t, 0x5, 0x24, 0x00);	/* no such page */
		d[1] = 0x83;
		d[3] = 20 + 8;
		d[4] = 0x01;
		d[5] = 0x03;
		d[7] = 16;
		memcpy(&d[8], tg->naa, 16);
		d[24] = 0x01;
		d[25] = 0x15;
		d[27] = 4;
		d[30] = (uint8_t)(tpg >> 8);
		d[31] = (uint8_t)tpg;
		fake_datain(t, d, 32);
		return SCSI_STATUS_GOOD;
	case 0x9e: {		/* READ CAPACITY(16) */
		uint32_t last = (tg->blocks ? tg->blocks : FAKE_BLOCKS) - 1;

		tg->capacity_reads++;
		d[4] = (uint8_t)(last >> 24);
		d[5] = (uint8_t)(last >> 16);
		d[6] = (uint8_t)(last >> 8);
		d[7] = (uint8_t)last;
		d[8] = (uint8_t)(tg->block_size >> 24);
		d[9] = (uint8_t)(tg->block_size >> 16);
		d[10] = (uint8_t)(tg->block_size >> 8);
		d[11] = (uint8_t)tg->block_size;
		fake_datain(t, d, 32);
		return SCSI_STATUS_GOOD;
	}
	case 0xa3:		/* REPORT TARGET PORT GROUPS */
		if (tg->alua_state < 0)
			return fake_sense(t, 0x5, 0x20, 0x00);
		d[3] = 8;
		d[4] = (uint8_t)tg->alua_state;
		d[6] = (uint8_t)(tpg >> 8);
		d[7] = (uint8_t)tpg;
		fake_datain(t, d, 12);
		return SCSI_STATUS_GOOD;
	case 0x00:		/* TEST UNIT READY */
		return SCSI_STATUS_GOOD;
	default:
		return -1;
	}
}

static int fake_answer_io(struct fake_tgt *tg, struct scsi_task *t, const struct fake_answer *a)
{
	tg->ios++;
	if (t->cdb[0] == 0x88) {
		/* A read returns the port's number in every byte: the test sees who served it. */
		tg->reads++;
		for (int i = 0; i < t->iovector_in.niov; i++)
			memset(t->iovector_in.iov[i].iov_base, 'A' + fake_tgt_index(tg),
			       t->iovector_in.iov[i].iov_len);
	} else if (t->cdb[0] == 0x8a) {
		tg->writes++;
	} else if (t->cdb[0] == 0x89) {
		tg->caws++;
	}
	if (a->status == SCSI_STATUS_CHECK_CONDITION && tg->sense_info) {
		/* As libiscsi keeps it: the 2-byte sense length, then fixed-format sense. */
		uint32_t info = tg->sense_info;
		uint8_t sb[2 + 18] = { 0, 18, 0xf0, 0, a->key, (uint8_t)(info >> 24),
				       (uint8_t)(info >> 16), (uint8_t)(info >> 8), (uint8_t)info,
				       10 };

		sb[2 + 12] = a->asc;
		sb[2 + 13] = a->ascq;
		fake_datain(t, sb, sizeof(sb));
	}
	if (a->status == SCSI_STATUS_CHECK_CONDITION)
		return fake_sense(t, a->key, a->asc, a->ascq);
	return a->status;
}

/* Answers cmd (already unlinked) and frees it. */
static void fake_deliver(struct iscsi_context *c, struct fake_cmd *cmd, int status)
{
	if (cmd->tmf) {
		uint32_t resp = c->tgt->tmf_response;

		cmd->cb(c, status, status == SCSI_STATUS_GOOD ? &resp : NULL, cmd->priv);
		free(cmd);
		return;
	}
	if (cmd->task)
		cmd->task->status = status;
	cmd->cb(c, status, cmd->task, cmd->priv);
	free(cmd);
}

/* The answer to cmd (its data filled in), or -1 while the port holds it. */
static int fake_answer_cmd(struct iscsi_context *c, struct fake_cmd *cmd)
{
	int st;

	if (cmd->held)
		return -1;
	if (c->tgt->down)
		return SCSI_STATUS_ERROR;
	if (cmd->tmf && c->tgt->tmf_hold) {
		cmd->held = true;
		return -1;
	}
	if (!cmd->task)
		return SCSI_STATUS_GOOD;	/* NOP-In, or the answer to a TMF */
	st = fake_answer_ctl(c->tgt, cmd->task);
	if (st < 0 && c->tgt->hold) {
		cmd->held = true;
		return -1;
	}
	if (st < 0)
		st = fake_answer_io(c->tgt, cmd->task, &c->tgt->answer);
	return st;
}

/* One service round on every context: connects, logins, and every command not held. Returns
 * how many callbacks ran. */
static __attribute__((unused)) int fake_iscsi_run(void)
{
	int n = 0;

	for (int i = 0; i < FAKE_NCTX; i++) {
		struct iscsi_context *c = fake_ctx[i];
		struct fake_cmd **pp;

		if (!c || !c->tgt)
			continue;
		if (c->connect_cb) {
			iscsi_command_cb cb = c->connect_cb;

			c->connect_cb = NULL;
			if (c->tgt->down)
				snprintf(c->err, sizeof(c->err), "connection refused");
			n++;
			cb(c, c->tgt->down ? SCSI_STATUS_ERROR : SCSI_STATUS_GOOD, NULL,
			   c->connect_priv);
			continue;	/* the callback may have queued or failed: next round */
		}
		if (c->login_cb) {
			iscsi_command_cb cb = c->login_cb;

			c->login_cb = NULL;
			c->tgt->logins++;
			n++;
			cb(c, c->tgt->down ? SCSI_STATUS_ERROR : SCSI_STATUS_GOOD, NULL,
			   c->login_priv);
			continue;
		}
		pp = &c->cmds;
		while (*pp) {
			struct fake_cmd *cmd = *pp;
			int st = fake_answer_cmd(c, cmd);

			if (st < 0) {
				pp = &cmd->next;
				continue;
			}
			*pp = cmd->next;
			n++;
			fake_deliver(c, cmd, st);
			break;	/* the callback may have changed this context: next round */
		}
	}
	return n;
}

/* I/O a port holds. */
static __attribute__((unused)) int fake_held(int tgt)
{
	int n = 0;

	for (int i = 0; i < FAKE_NCTX; i++)
		for (struct fake_cmd *cmd = fake_ctx[i] ? fake_ctx[i]->cmds : NULL; cmd;
		     cmd = cmd->next)
			if (cmd->held && !cmd->tmf && fake_ctx[i]->tgt == &fake_tgt[tgt])
				n++;
	return n;
}

/* Answers the first I/O port tgt holds with a. */
static __attribute__((unused)) void fake_answer_held(int tgt, struct fake_answer a)
{
	for (int i = 0; i < FAKE_NCTX; i++) {
		struct iscsi_context *c = fake_ctx[i];

		if (!c || c->tgt != &fake_tgt[tgt])
			continue;
		for (struct fake_cmd **pp = &c->cmds; *pp; pp = &(*pp)->next) {
			struct fake_cmd *cmd = *pp;
			int st;

			if (!cmd->held)
				continue;
			*pp = cmd->next;
			st = a.status == SCSI_STATUS_ERROR || a.status == SCSI_STATUS_CANCELLED ?
				     a.status : fake_answer_io(c->tgt, cmd->task, &a);
			fake_deliver(c, cmd, st);
			return;
		}
	}
	cr_assert_fail("port %d holds no I/O", tgt);
}

#endif
