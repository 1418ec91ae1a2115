// SPDX-License-Identifier: MIT
/*
 * The native initiator: one back-end iSCSI/TCP connection (see mp_ini.h for what it owns and
 * why). Receive: mp_ini_rx reads what the socket holds into rx (one read), handles every
 * complete PDU there, and when a Data-In's data segment is not all in yet, the rest is read
 * with readv straight into the command's iovec, the buffer behind it for the headers that
 * follow. After a big Data-In (INI_DIRECT_MIN) only the next header goes behind it, so that a
 * stream of big segments lands wholly in place, with no copy out of rx. Send: PDUs are queued on txq and a gw_defer writes all of them with one writev at
 * the end of the loop round; what the socket does not take waits for EPOLLOUT.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "gw_buf.h"
#include "gw_chap.h"
#include "gw_crc32c.h"
#include "gw_iov.h"
#include "gw_list.h"
#include "gw_log.h"
#include "gw_loop.h"
#include "gw_resolve.h"
#include "mp.h"
#include "mp_ini.h"

#define INI_BHS 48u
#define INI_TAG_NONE 0xffffffffu
#define INI_RX_BUF (64u * 1024u)
#define INI_SLOTS 1024u			/* commands in flight per connection */
#define INI_TX_IOV 1024			/* iovec entries per writev (IOV_MAX) */
#define INI_RX_IOV 64
/* After a Data-In segment this big, the next header is read alone (into rx) so that the data
 * behind it, if it is another such segment, goes straight into its command's iovec: a system
 * call costs less than copying this much out of rx. Smaller segments are copied. */
#define INI_DIRECT_MIN (32u * 1024u)
#define INI_TASK_CACHE 256u
/* What we offer (RFC 7143 §13): the target answers with the smaller. */
#define INI_MY_MRDSL (256u * 1024u)
#define INI_MY_MAX_BURST (1024u * 1024u)
#define INI_MY_FIRST_BURST (256u * 1024u)
#define INI_LOGIN_ROUNDS 8
/* Login redirections (RFC 7143 §11.13.5, status class 1) followed per mp_ini_create: more is
 * taken for a loop between portals and fails the login. */
#define INI_REDIRECTS 8

enum {
	OP_NOP_OUT = 0x00, OP_SCSI_CMD = 0x01, OP_TMF_REQ = 0x02, OP_LOGIN_REQ = 0x03,
	OP_DATA_OUT = 0x05, OP_LOGOUT_REQ = 0x06,
};
enum {
	OP_NOP_IN = 0x20, OP_SCSI_RSP = 0x21, OP_TMF_RSP = 0x22, OP_LOGIN_RSP = 0x23,
	OP_TEXT_RSP = 0x24, OP_DATA_IN = 0x25, OP_LOGOUT_RSP = 0x26, OP_R2T = 0x31,
	OP_ASYNC = 0x32, OP_REJECT = 0x3f,
};
#define FL_F 0x80
#define FL_T 0x80
#define FL_C 0x40
#define FL_S 0x01

/* INI_LOGGED_OUT: the target accepted our Logout; nothing more is read or sent.
 * INI_REDIRECT: the target sent us elsewhere; the redirect defer closes the connection and
 * connects to the new address once the loop round is over (nothing more is read or sent). */
enum ini_state { INI_CONNECTING, INI_LOGIN, INI_FULL, INI_LOGGED_OUT, INI_REDIRECT, INI_FAILED,
		 INI_RESOLVING };
/* What a task slot holds: a SCSI command, or one of the immediate requests. */
enum ini_kind { INI_K_CMD, INI_K_NOP, INI_K_TMF, INI_K_LOGOUT };
enum ini_login_step { LS_SECURITY, LS_CHAP_A, LS_CHAP_R, LS_OPERATIONAL };

struct ini_pdu {
	struct gw_list node;
	uint8_t hdr[INI_BHS + 4];
	uint32_t hdr_len;
	uint32_t total;			/* header + data + pad */
	uint8_t *own;			/* data this PDU owns (login text, NOP echo) */
	uint8_t ddig[4];		/* its data digest, when one is in use */
	int niov;
	struct iovec iov[];		/* data, then the pad, then the data digest */
};

struct ini_task {
	struct gw_list node;		/* pending, or the cache */
	uint32_t itt;
	enum ini_kind kind;
	uint32_t ref_itt;		/* TMF: the task it names (ABORT TASK) */
	enum mp_ini_dir dir;
	int lun;
	uint8_t cdb[16];
	int cdb_len;
	const struct iovec *iov;
	int iovcnt;
	uint32_t xfer;
	uint32_t cmdsn;			/* sent with */
	uint32_t data_len;		/* Data-In bytes landed */
	mp_ini_cmd_fn fn;
	void *arg;
};

struct mp_ini {
	struct gw_loop *loop;
	struct gw_watch w;
	struct gw_defer flush;
	struct gw_defer redirect;
	int fd;
	enum ini_state state;
	enum ini_login_step step;
	int login_rounds;
	mp_ini_event_fn fn;
	void *arg;
	char *portal;			/* where it connects: the configured one, or a redirect's */
	char *target, *initiator;
	char *redirect_to;		/* INI_REDIRECT: the next portal (TargetAddress, no tpgt) */
	char *redirected_by;		/* the portal that sent us to this one, or NULL */
	/* INI_RESOLVING: the portal's name is being looked up off the loop (gw_resolve.h). */
	struct gw_resolve *rsv;
	char rsv_host[256];
	char addr[64];			/* the numeric address connected to ("" before) */
	char *chap_user, *chap_secret, *mutual_user, *mutual_secret;
	bool want_hd, want_dd;

	uint8_t isid[6];
	uint16_t tsih;
	uint32_t cmdsn, exp_cmdsn, max_cmdsn, exp_statsn;
	uint8_t mutual_id;
	uint8_t mutual_chal[16];

	/* Negotiated. */
	bool hd, dd;
	uint32_t max_send_dsl, first_burst, max_burst;
	bool initial_r2t, immediate_data;

	struct gw_list txq;		/* struct ini_pdu */
	uint32_t tx_off;		/* bytes of the first one already written */
	bool tx_wait;			/* EPOLLOUT armed */

	uint8_t *rx;
	uint32_t rx_cap, rx_len, rx_off;
	/* A Data-In whose data is being read straight into its command's iovec. */
	struct ini_task *rx_task;
	uint32_t rx_at, rx_left, rx_skip;
	bool rx_status;
	bool rx_hdr_first;		/* the last PDU was a big Data-In: read the next header alone */
	uint8_t rx_hdr[INI_BHS];
	uint8_t rx_tail[8];		/* its pad and data digest */
	uint32_t rx_tail_len;

	struct ini_task *slots[INI_SLOTS];
	uint32_t free_slots[INI_SLOTS];
	uint32_t nfree;
	uint32_t gen;
	struct gw_list pending;		/* waiting for the CmdSN window or a slot */
	struct gw_list cache;		/* freed tasks, for reuse */
	uint32_t ncache;

	char err[160];
	struct mp_ini_stats st;
};

static const uint8_t ini_zero[4];

static uint32_t get32(const uint8_t *b, size_t o)
{
	return (uint32_t)b[o] << 24 | (uint32_t)b[o + 1] << 16 | (uint32_t)b[o + 2] << 8 | b[o + 3];
}

static uint32_t get24(const uint8_t *b, size_t o)
{
	return (uint32_t)b[o] << 16 | (uint32_t)b[o + 1] << 8 | b[o + 2];
}

static void put32(uint8_t *b, size_t o, uint32_t v)
{
	b[o] = (uint8_t)(v >> 24);
	b[o + 1] = (uint8_t)(v >> 16);
	b[o + 2] = (uint8_t)(v >> 8);
	b[o + 3] = (uint8_t)v;
}

static void put24(uint8_t *b, size_t o, uint32_t v)
{
	b[o] = (uint8_t)(v >> 16);
	b[o + 1] = (uint8_t)(v >> 8);
	b[o + 2] = (uint8_t)v;
}

static uint32_t pad4(uint32_t n)
{
	return (4 - (n & 3)) & 3;
}

/* RFC 1982 serial number arithmetic, as CmdSN and StatSN use it. */
static bool sn_lt(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) < 0;
}

/* SAM LUN: peripheral addressing below 256, flat space above. */
static void put_lun(uint8_t *h, int lun)
{
	memset(h + 8, 0, 8);
	if (lun < 256) {
		h[9] = (uint8_t)lun;
	} else {
		h[8] = (uint8_t)(0x40 | ((lun >> 8) & 0x3f));
		h[9] = (uint8_t)lun;
	}
}

static void ini_fail(struct mp_ini *ini, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* " (redirected by PORTAL)" for messages about a redirected login, "" otherwise. */
static const char *ini_redir_note(const struct mp_ini *ini, char *buf, size_t len)
{
	if (!ini->redirected_by)
		return "";
	snprintf(buf, len, " (redirected by %s)", ini->redirected_by);
	return buf;
}

/* Nothing more to read or send on this connection (failed, or being redirected). */
static bool ini_done(const struct mp_ini *ini)
{
	return ini->state == INI_FAILED || ini->state == INI_REDIRECT;
}

static void ini_fail(struct mp_ini *ini, const char *fmt, ...)
{
	va_list ap;

	if (ini->state == INI_FAILED)
		return;
	va_start(ap, fmt);
	vsnprintf(ini->err, sizeof(ini->err), fmt, ap);
	va_end(ap);
	ini->state = INI_FAILED;
	gw_resolve_cancel(ini->rsv);
	ini->rsv = NULL;
	gw_watch_stop(&ini->w);
	gw_defer_cancel(&ini->flush);
	gw_defer_cancel(&ini->redirect);
	ini->fn(ini, -EIO, ini->arg);
}

/* ---- send ---------------------------------------------------------------------------------- */

static struct ini_pdu *ini_pdu_new(int ndata)
{
	struct ini_pdu *pdu = malloc(sizeof(*pdu) + (size_t)(ndata + 2) * sizeof(struct iovec));

	if (!pdu)
		return NULL;
	memset(pdu, 0, sizeof(*pdu));
	pdu->hdr_len = INI_BHS;
	return pdu;
}

static void ini_pdu_free(struct ini_pdu *pdu)
{
	free(pdu->own);
	free(pdu);
}

/* Seals the header (DataSegmentLength, digest), appends the pad and queues the PDU. */
static void ini_queue(struct mp_ini *ini, struct ini_pdu *pdu, uint32_t data_len)
{
	uint32_t pad = pad4(data_len);

	put24(pdu->hdr, 5, data_len);
	/* Digests start with the first PDU of the full-feature phase (RFC 7143 §13.1). */
	if (ini->hd && ini->state == INI_FULL) {
		uint32_t crc = gw_crc32c(0, pdu->hdr, INI_BHS);

		memcpy(pdu->hdr + INI_BHS, &crc, 4);	/* little-endian (RFC 7143 B.4) */
		pdu->hdr_len = INI_BHS + 4;
	}
	if (pad) {
		pdu->iov[pdu->niov].iov_base = (void *)(uintptr_t)ini_zero;
		pdu->iov[pdu->niov].iov_len = pad;
		pdu->niov++;
	}
	pdu->total = pdu->hdr_len + data_len + pad;
	/* The data digest covers the data and its pad (RFC 7143 §11.1). */
	if (ini->dd && ini->state == INI_FULL && data_len) {
		uint32_t crc = 0;

		for (int i = 0; i < pdu->niov; i++)
			crc = gw_crc32c(crc, pdu->iov[i].iov_base, pdu->iov[i].iov_len);
		memcpy(pdu->ddig, &crc, 4);
		pdu->iov[pdu->niov].iov_base = pdu->ddig;
		pdu->iov[pdu->niov].iov_len = 4;
		pdu->niov++;
		pdu->total += 4;
	}
	gw_list_add_tail(&ini->txq, &pdu->node);
	ini->st.pdus_out++;
	gw_defer_queue(ini->loop, &ini->flush);
}

/* An immediate request's header (NOP-Out, Task Management, Logout): it neither waits for the
 * command window nor advances CmdSN. f20 is bytes 20..23 (Referenced Task Tag, Target
 * Transfer Tag, or the reserved tag). */
static void ini_imm_hdr(const struct mp_ini *ini, struct ini_pdu *pdu, uint8_t op, uint8_t flags,
			uint32_t itt, uint32_t f20)
{
	pdu->hdr[0] = (uint8_t)(op | 0x40);
	pdu->hdr[1] = flags;
	put32(pdu->hdr, 16, itt);
	put32(pdu->hdr, 20, f20);
	put32(pdu->hdr, 24, ini->cmdsn);
	put32(pdu->hdr, 28, ini->exp_statsn);
}

static void ini_flush(struct mp_ini *ini)
{
	while (!gw_list_empty(&ini->txq) && !ini_done(ini)) {
		struct iovec v[INI_TX_IOV];
		struct ini_pdu *pdu;
		size_t want = 0, skip = ini->tx_off;
		int cnt = 0;
		ssize_t n;

		gw_list_for_each_entry(pdu, &ini->txq, node) {
			if (cnt + 1 + pdu->niov > INI_TX_IOV)
				break;
			if (skip < pdu->hdr_len) {
				v[cnt].iov_base = pdu->hdr + skip;
				v[cnt++].iov_len = pdu->hdr_len - skip;
				skip = 0;
			} else {
				skip -= pdu->hdr_len;
			}
			for (int i = 0; i < pdu->niov; i++) {
				if (skip >= pdu->iov[i].iov_len) {
					skip -= pdu->iov[i].iov_len;
					continue;
				}
				v[cnt].iov_base = (uint8_t *)pdu->iov[i].iov_base + skip;
				v[cnt++].iov_len = pdu->iov[i].iov_len - skip;
				skip = 0;
			}
			want += pdu->total;
		}
		want -= ini->tx_off;
		if (!cnt) {
			ini_fail(ini, "a PDU of more than %d pieces", INI_TX_IOV);
			return;
		}
		n = writev(ini->fd, v, cnt);
		ini->st.writes++;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			ini_fail(ini, "send to %s: %s", ini->portal, strerror(errno));
			return;
		}
		size_t adv = (size_t)n + ini->tx_off;

		while (!gw_list_empty(&ini->txq)) {
			pdu = gw_list_first_entry(&ini->txq, struct ini_pdu, node);
			if (adv < pdu->total)
				break;
			adv -= pdu->total;
			gw_list_del(&pdu->node);
			ini_pdu_free(pdu);
		}
		ini->tx_off = (uint32_t)adv;
		if ((size_t)n < want)
			break;		/* the socket is full: wait for EPOLLOUT */
	}
	if (ini_done(ini))
		return;
	bool wait = !gw_list_empty(&ini->txq);

	if (wait != ini->tx_wait) {
		ini->tx_wait = wait;
		if (gw_watch_set(&ini->w, EPOLLIN | EPOLLRDHUP | (wait ? EPOLLOUT : 0)) < 0)
			ini_fail(ini, "cannot watch the connection to %s", ini->portal);
	}
}

static void ini_flush_fn(struct gw_defer *d)
{
	struct mp_ini *ini = gw_container_of(d, struct mp_ini, flush);

	ini_flush(ini);
}

/* A PDU carrying [off, off + len) of the task's iovec as its data segment. */
static struct ini_pdu *ini_pdu_data(const struct ini_task *t, uint32_t off, uint32_t len)
{
	int n = len ? gw_iov_slice(t->iov, t->iovcnt, off, len, NULL, INT32_MAX, NULL) : 0;
	struct ini_pdu *pdu = ini_pdu_new(n);

	if (pdu && n)
		pdu->niov = gw_iov_slice(t->iov, t->iovcnt, off, len, pdu->iov, n, NULL);
	return pdu;
}

/* Data-Out PDUs for [off, off + len) answering ttt (INI_TAG_NONE: unsolicited). */
static int ini_data_out(struct mp_ini *ini, struct ini_task *t, uint32_t ttt, uint32_t off,
			uint32_t len)
{
	uint32_t sn = 0, end = off + len;

	while (off < end) {
		uint32_t n = end - off < ini->max_send_dsl ? end - off : ini->max_send_dsl;
		struct ini_pdu *pdu = ini_pdu_data(t, off, n);

		if (!pdu)
			return -ENOMEM;
		pdu->hdr[0] = OP_DATA_OUT;
		pdu->hdr[1] = off + n == end ? FL_F : 0;
		put_lun(pdu->hdr, t->lun);
		put32(pdu->hdr, 16, t->itt);
		put32(pdu->hdr, 20, ttt);
		put32(pdu->hdr, 28, ini->exp_statsn);
		put32(pdu->hdr, 36, sn++);
		put32(pdu->hdr, 40, off);
		ini_queue(ini, pdu, n);
		off += n;
	}
	return 0;
}

static uint32_t ini_slot_take(struct mp_ini *ini, struct ini_task *t)
{
	uint32_t s = ini->free_slots[--ini->nfree];

	ini->gen++;
	t->itt = s | (ini->gen << 10);
	ini->slots[s] = t;
	return s;
}

static struct ini_task *ini_slot_find(struct mp_ini *ini, uint32_t itt)
{
	struct ini_task *t;

	if (itt == INI_TAG_NONE)
		return NULL;
	t = ini->slots[itt & (INI_SLOTS - 1)];
	return t && t->itt == itt ? t : NULL;
}

static void ini_task_put(struct mp_ini *ini, struct ini_task *t)
{
	uint32_t s = t->itt & (INI_SLOTS - 1);

	ini->slots[s] = NULL;
	ini->free_slots[ini->nfree++] = s;
	if (ini->ncache < INI_TASK_CACHE) {
		gw_list_add(&ini->cache, &t->node);
		ini->ncache++;
	} else {
		free(t);
	}
}

static int ini_send_cmd(struct mp_ini *ini, struct ini_task *t)
{
	struct ini_pdu *pdu;
	uint32_t imm = 0, unsol = 0;

	if (t->dir == MP_INI_WRITE) {
		if (ini->immediate_data) {
			imm = t->xfer < ini->first_burst ? t->xfer : ini->first_burst;
			if (imm > ini->max_send_dsl)
				imm = ini->max_send_dsl;
		}
		unsol = imm;
		if (!ini->initial_r2t)
			unsol = t->xfer < ini->first_burst ? t->xfer : ini->first_burst;
	}
	pdu = ini_pdu_data(t, 0, imm);
	if (!pdu)
		return -ENOMEM;
	ini_slot_take(ini, t);
	pdu->hdr[0] = OP_SCSI_CMD;
	pdu->hdr[1] = (uint8_t)((unsol == imm ? FL_F : 0) | 0x01 |	/* SIMPLE */
				(t->dir == MP_INI_READ ? 0x40 : 0) |
				(t->dir == MP_INI_WRITE ? 0x20 : 0));
	put_lun(pdu->hdr, t->lun);
	put32(pdu->hdr, 16, t->itt);
	put32(pdu->hdr, 20, t->xfer);
	t->cmdsn = ini->cmdsn;
	put32(pdu->hdr, 24, ini->cmdsn++);
	put32(pdu->hdr, 28, ini->exp_statsn);
	memcpy(pdu->hdr + 32, t->cdb, (size_t)t->cdb_len);
	ini_queue(ini, pdu, imm);
	/* The task holds its slot from here on: destroy frees it from there. */
	if (unsol > imm && ini_data_out(ini, t, INI_TAG_NONE, imm, unsol - imm) < 0)
		ini_fail(ini, "out of memory sending a command");
	return 0;
}

/* Sends what waits, as far as the target's command window and our slots allow. */
static void ini_kick(struct mp_ini *ini)
{
	while (!gw_list_empty(&ini->pending) && ini->nfree && ini->state == INI_FULL &&
	       !sn_lt(ini->max_cmdsn, ini->cmdsn)) {
		struct ini_task *t = gw_list_first_entry(&ini->pending, struct ini_task, node);

		gw_list_del(&t->node);
		if (ini_send_cmd(ini, t) < 0) {
			gw_list_add(&ini->pending, &t->node);
			ini_fail(ini, "out of memory sending a command");
			return;
		}
	}
}

static struct ini_task *ini_task_get(struct mp_ini *ini)
{
	struct ini_task *t;

	if (!gw_list_empty(&ini->cache)) {
		t = gw_list_first_entry(&ini->cache, struct ini_task, node);
		gw_list_del(&t->node);
		ini->ncache--;
	} else {
		t = malloc(sizeof(*t));
		if (!t)
			return NULL;
	}
	memset(t, 0, sizeof(*t));
	return t;
}

int mp_ini_command(struct mp_ini *ini, int lun, const uint8_t *cdb, int cdb_len,
		   enum mp_ini_dir dir, const struct iovec *iov, int iovcnt, uint32_t xfer,
		   mp_ini_cmd_fn fn, void *arg)
{
	struct ini_task *t;

	if (ini->state != INI_FULL)
		return -ENOTCONN;
	if (cdb_len < 6 || cdb_len > 16 || lun < 0 || lun > 16383 || (xfer && !iov))
		return -EINVAL;
	t = ini_task_get(ini);
	if (!t)
		return -ENOMEM;
	t->dir = xfer ? dir : MP_INI_NONE;
	t->lun = lun;
	memcpy(t->cdb, cdb, (size_t)cdb_len);
	t->cdb_len = cdb_len;
	t->iov = iov;
	t->iovcnt = iovcnt;
	t->xfer = xfer;
	t->fn = fn;
	t->arg = arg;
	gw_list_add_tail(&ini->pending, &t->node);
	ini_kick(ini);
	return 0;
}

int mp_ini_nop(struct mp_ini *ini, mp_ini_cmd_fn fn, void *arg)
{
	struct ini_task *t;
	struct ini_pdu *pdu;

	if (ini->state != INI_FULL)
		return -ENOTCONN;
	if (!ini->nfree)
		return -EBUSY;
	t = ini_task_get(ini);
	pdu = ini_pdu_new(0);
	if (!t || !pdu) {
		free(t);
		free(pdu);
		return -ENOMEM;
	}
	t->kind = INI_K_NOP;
	t->fn = fn;
	t->arg = arg;
	ini_slot_take(ini, t);
	ini_imm_hdr(ini, pdu, OP_NOP_OUT, FL_F, t->itt, INI_TAG_NONE);
	ini_queue(ini, pdu, 0);
	return 0;
}

static void ini_complete(struct mp_ini *ini, struct ini_task *t, int status, const uint8_t *sense,
			 uint32_t sense_len);

/* A command taken off the pending list before it was sent (it holds no slot). */
static void ini_complete_unsent(struct mp_ini *ini, struct ini_task *t)
{
	struct mp_ini_result r = { .status = -ECANCELED };
	mp_ini_cmd_fn fn = t->fn;
	void *arg = t->arg;

	if (ini->ncache < INI_TASK_CACHE) {
		gw_list_add(&ini->cache, &t->node);
		ini->ncache++;
	} else {
		free(t);
	}
	fn(arg, &r);
}

/* The commands a finished ABORT TASK or LUN RESET took with it (RFC 7143 §11.5.1: the target
 * answers the TMF after the tasks it names are gone, and sends nothing more for them). */
static void ini_tmf_rsp(struct mp_ini *ini, struct ini_task *tmf, uint8_t response)
{
	if (response == 0) {
		for (uint32_t i = 0; i < INI_SLOTS && ini->state == INI_FULL; i++) {
			struct ini_task *t = ini->slots[i];

			if (!t || t->kind != INI_K_CMD || t == ini->rx_task)
				continue;
			if (tmf->ref_itt != INI_TAG_NONE ? t->itt == tmf->ref_itt : t->lun == tmf->lun)
				ini_complete(ini, t, -ECANCELED, NULL, 0);
		}
	}
	if (ini->state == INI_FULL)
		ini_complete(ini, tmf, response, NULL, 0);
}

/* An immediate request (TMF, Logout) in a task slot of its own. */
static struct ini_task *ini_immediate(struct mp_ini *ini, enum ini_kind kind, mp_ini_cmd_fn fn,
				      void *arg, struct ini_pdu **pdu)
{
	struct ini_task *t;

	if (ini->state != INI_FULL) {
		errno = ENOTCONN;
		return NULL;
	}
	if (!ini->nfree) {
		errno = EBUSY;
		return NULL;
	}
	t = ini_task_get(ini);
	*pdu = ini_pdu_new(0);
	if (!t || !*pdu) {
		free(t);
		free(*pdu);
		errno = ENOMEM;
		return NULL;
	}
	t->kind = kind;
	t->ref_itt = INI_TAG_NONE;
	t->fn = fn;
	t->arg = arg;
	ini_slot_take(ini, t);
	return t;
}

int mp_ini_tmf(struct mp_ini *ini, enum mp_ini_tmf fn_code, int lun, const void *cmd_arg,
	       mp_ini_cmd_fn fn, void *arg)
{
	struct ini_task *t, *ref = NULL;
	struct ini_pdu *pdu;

	if (lun < 0 || lun > 16383 ||
	    (fn_code != MP_INI_ABORT_TASK && fn_code != MP_INI_LUN_RESET))
		return -EINVAL;
	if (ini->state != INI_FULL)
		return -ENOTCONN;
	if (fn_code == MP_INI_ABORT_TASK) {
		/* Not sent yet: it never reaches the target. */
		gw_list_for_each_entry(t, &ini->pending, node) {
			if (t->arg == cmd_arg && t->lun == lun) {
				gw_list_del(&t->node);
				ini_complete_unsent(ini, t);
				return -EALREADY;
			}
		}
		for (uint32_t i = 0; i < INI_SLOTS && !ref; i++) {
			t = ini->slots[i];
			if (t && t->kind == INI_K_CMD && t->arg == cmd_arg && t->lun == lun)
				ref = t;
		}
		if (!ref)
			return -ENOENT;
	}
	t = ini_immediate(ini, INI_K_TMF, fn, arg, &pdu);
	if (!t)
		return -errno;
	t->lun = lun;
	ini_imm_hdr(ini, pdu, OP_TMF_REQ, (uint8_t)(FL_F | fn_code), t->itt,
		    ref ? ref->itt : INI_TAG_NONE);
	put_lun(pdu->hdr, lun);
	if (ref) {
		t->ref_itt = ref->itt;
		put32(pdu->hdr, 32, ref->cmdsn);	/* RefCmdSN */
	}
	ini_queue(ini, pdu, 0);
	return 0;
}

int mp_ini_logout(struct mp_ini *ini, mp_ini_cmd_fn fn, void *arg)
{
	struct ini_task *t;
	struct ini_pdu *pdu;

	t = ini_immediate(ini, INI_K_LOGOUT, fn, arg, &pdu);
	if (!t)
		return -errno;
	/* Reason 0: close the session. */
	ini_imm_hdr(ini, pdu, OP_LOGOUT_REQ, FL_F | 0, t->itt, INI_TAG_NONE);
	ini_queue(ini, pdu, 0);
	return 0;
}

/* ---- login ---------------------------------------------------------------------------------- */

struct ini_text {
	char *b;
	size_t len, cap;
};

static int ini_text_add(struct ini_text *t, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int ini_text_add(struct ini_text *t, const char *key, const char *fmt, ...)
{
	char val[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	vsnprintf(val, sizeof(val), fmt, ap);
	va_end(ap);
	n = (int)(strlen(key) + 1 + strlen(val) + 1);
	if (t->len + (size_t)n > t->cap) {
		size_t cap = (t->len + (size_t)n) * 2 + 256;
		char *b = realloc(t->b, cap);

		if (!b)
			return -ENOMEM;
		t->b = b;
		t->cap = cap;
	}
	sprintf(t->b + t->len, "%s=%s", key, val);
	t->len += (size_t)n;
	return 0;
}

/* The value of key in a login response's text, or NULL. */
static const char *ini_key(const char *text, size_t len, const char *key)
{
	size_t kl = strlen(key);

	for (size_t i = 0; i < len;) {
		const char *kv = text + i;
		size_t l = strnlen(kv, len - i);

		if (l > kl && kv[kl] == '=' && memcmp(kv, key, kl) == 0)
			return kv + kl + 1;
		i += l + 1;
	}
	return NULL;
}

static int ini_login_send(struct mp_ini *ini, int csg, int nsg, bool transit,
			  struct ini_text *text)
{
	struct ini_pdu *pdu = ini_pdu_new(1);

	if (!pdu) {
		free(text->b);
		return -ENOMEM;
	}
	pdu->hdr[0] = OP_LOGIN_REQ | 0x40;
	pdu->hdr[1] = (uint8_t)((transit ? FL_T : 0) | (csg << 2) | (transit ? nsg : 0));
	memcpy(pdu->hdr + 8, ini->isid, 6);
	pdu->hdr[14] = (uint8_t)(ini->tsih >> 8);
	pdu->hdr[15] = (uint8_t)ini->tsih;
	put32(pdu->hdr, 16, 0);		/* ITT */
	put32(pdu->hdr, 24, ini->cmdsn);
	put32(pdu->hdr, 28, ini->exp_statsn);
	pdu->own = (uint8_t *)text->b;
	if (text->len) {
		pdu->iov[0].iov_base = text->b;
		pdu->iov[0].iov_len = text->len;
		pdu->niov = 1;
	}
	ini_queue(ini, pdu, (uint32_t)text->len);
	text->b = NULL;
	return 0;
}

/* "0x" + hex of b[0..n) into out (2 + 2n + 1 bytes). */
static int ini_hex(char *out, size_t cap, const uint8_t *b, size_t n)
{
	struct gw_buf t;
	int r;

	gw_buf_init(&t);
	r = gw_chap_encode_hex(&t, b, n);

	if (!r && t.len >= cap)
		r = -ENOSPC;
	if (!r) {
		memcpy(out, t.data, t.len);
		out[t.len] = 0;
	}
	gw_buf_fini(&t);
	return r;
}

static int ini_login_operational(struct mp_ini *ini)
{
	struct ini_text t = { 0 };
	int rc = 0;

	ini->step = LS_OPERATIONAL;
	rc |= ini_text_add(&t, "HeaderDigest", "%s", ini->want_hd ? "CRC32C,None" : "None");
	rc |= ini_text_add(&t, "DataDigest", "%s", ini->want_dd ? "CRC32C,None" : "None");
	rc |= ini_text_add(&t, "MaxRecvDataSegmentLength", "%u", INI_MY_MRDSL);
	rc |= ini_text_add(&t, "MaxBurstLength", "%u", INI_MY_MAX_BURST);
	rc |= ini_text_add(&t, "FirstBurstLength", "%u", INI_MY_FIRST_BURST);
	rc |= ini_text_add(&t, "InitialR2T", "No");
	rc |= ini_text_add(&t, "ImmediateData", "Yes");
	rc |= ini_text_add(&t, "MaxOutstandingR2T", "1");
	rc |= ini_text_add(&t, "DataPDUInOrder", "Yes");
	rc |= ini_text_add(&t, "DataSequenceInOrder", "Yes");
	rc |= ini_text_add(&t, "ErrorRecoveryLevel", "0");
	rc |= ini_text_add(&t, "MaxConnections", "1");
	rc |= ini_text_add(&t, "DefaultTime2Wait", "0");
	rc |= ini_text_add(&t, "DefaultTime2Retain", "0");
	if (rc) {
		free(t.b);
		return -ENOMEM;
	}
	return ini_login_send(ini, 1, 3, true, &t);
}

static void ini_login_start(struct mp_ini *ini)
{
	struct ini_text t = { 0 };
	int rc = 0;

	ini->state = INI_LOGIN;
	ini->step = LS_SECURITY;
	rc |= ini_text_add(&t, "InitiatorName", "%s", ini->initiator);
	rc |= ini_text_add(&t, "TargetName", "%s", ini->target);
	rc |= ini_text_add(&t, "SessionType", "Normal");
	rc |= ini_text_add(&t, "AuthMethod", "%s", ini->chap_user ? "CHAP" : "None");
	if (rc || ini_login_send(ini, 0, 1, !ini->chap_user, &t) < 0) {
		free(rc ? t.b : NULL);
		ini_fail(ini, "out of memory for the login");
	}
}

static void ini_negotiated(struct mp_ini *ini, const char *text, size_t len)
{
	const char *v;

	if ((v = ini_key(text, len, "HeaderDigest")))
		ini->hd = strcmp(v, "CRC32C") == 0;
	if ((v = ini_key(text, len, "DataDigest")))
		ini->dd = strcmp(v, "CRC32C") == 0;
	if ((v = ini_key(text, len, "MaxRecvDataSegmentLength")))
		ini->max_send_dsl = (uint32_t)strtoul(v, NULL, 10);
	if ((v = ini_key(text, len, "MaxBurstLength")))
		ini->max_burst = (uint32_t)strtoul(v, NULL, 10);
	if ((v = ini_key(text, len, "FirstBurstLength")))
		ini->first_burst = (uint32_t)strtoul(v, NULL, 10);
	if ((v = ini_key(text, len, "InitialR2T")))
		ini->initial_r2t = strcmp(v, "No") != 0;
	if ((v = ini_key(text, len, "ImmediateData")))
		ini->immediate_data = strcmp(v, "Yes") == 0;
}

/* Status class 1 (RFC 7143 §11.13.5): the target is at TargetAddress. The login starts over
 * there once this loop round is over, with the same ISID (it names the session the path
 * reinstates, wherever that lives). Temporary and permanent alike: the redirect holds for this
 * login only; the next mp_ini_create starts at the configured portal again (the path's libiscsi
 * engine follows neither: docs/FAILOVER.md, "Login redirection"). */
static void ini_login_redirect(struct mp_ini *ini, const uint8_t *h, const char *text, size_t len)
{
	const char *v = ini_key(text, len, "TargetAddress");
	const char *how = h[37] == 1 ? "temporarily" : h[37] == 2 ? "permanently" : "(no reason)";
	char host[256], port[16], *to;
	int n;

	if (!v || !*v) {
		ini_fail(ini, "login to %s at %s: redirected (status %02x%02x) without a "
			 "TargetAddress", ini->target, ini->portal, h[36], h[37]);
		return;
	}
	/* The value may be the last bytes of the segment, without its NUL. */
	to = strndup(v, (size_t)(text + len - v));
	if (!to) {
		ini_fail(ini, "out of memory for the login");
		return;
	}
	if (mp_ini_parse_portal(to, host, sizeof(host), port, sizeof(port)) < 0) {
		ini_fail(ini, "login to %s at %s: redirected to a malformed TargetAddress \"%.48s\"",
			 ini->target, ini->portal, to);
		free(to);
		return;
	}
	free(to);
	if (ini->st.redirects >= INI_REDIRECTS) {
		ini_fail(ini, "login to %s: redirected more than %d times (the last by %s to %s:%s): "
			 "a redirect loop", ini->target, INI_REDIRECTS, ini->portal, host, port);
		return;
	}
	n = strchr(host, ':') ? asprintf(&to, "[%s]:%s", host, port) :
				asprintf(&to, "%s:%s", host, port);
	if (n < 0) {
		ini_fail(ini, "out of memory for the login");
		return;
	}
	if (h[37] == 2)
		gw_warn(MP_LOG, "login to %s at %s: moved permanently to %s: followed for this "
			"login only, the next one starts at the configured portal again (update "
			"the path's URL)", ini->target, ini->portal, to);
	else
		gw_info(MP_LOG, "login to %s at %s: redirected %s to %s", ini->target, ini->portal,
			how, to);
	free(ini->redirect_to);
	ini->redirect_to = to;
	ini->st.redirects++;
	ini->state = INI_REDIRECT;
	gw_watch_stop(&ini->w);
	gw_defer_cancel(&ini->flush);
	gw_defer_queue(ini->loop, &ini->redirect);
}

static void ini_login_rsp(struct mp_ini *ini, const uint8_t *h, const char *text, size_t len)
{
	bool transit = h[1] & FL_T;
	int csg = (h[1] >> 2) & 3, nsg = h[1] & 3;
	struct ini_text t = { 0 };
	const char *v;

	if (h[36] == 1) {
		ini_login_redirect(ini, h, text, len);
		return;
	}
	if (h[36] != 0) {
		ini_fail(ini, "login refused by %s: status %02x%02x (%s)", ini->target, h[36], h[37],
			 h[36] == 2 && (h[37] == 1 || h[37] == 2) ? "authentication failed" :
			 h[36] == 2 && h[37] == 3 ? "target not found" :
			 h[36] == 3 ? "target error" : "initiator error");
		return;
	}
	ini->tsih = (uint16_t)(h[14] << 8 | h[15]);
	ini->exp_statsn = get32(h, 24) + 1;
	if (++ini->login_rounds > INI_LOGIN_ROUNDS) {
		ini_fail(ini, "login to %s does not end", ini->target);
		return;
	}
	if (h[1] & FL_C) {		/* more text follows: ask for it */
		if (ini_login_send(ini, csg, nsg, false, &t) < 0)
			ini_fail(ini, "out of memory for the login");
		return;
	}
	if (csg == 0) {
		switch (ini->step) {
		case LS_SECURITY:
			if (ini->chap_user) {
				v = ini_key(text, len, "AuthMethod");
				if (!v || strcmp(v, "CHAP")) {
					ini_fail(ini, "%s does not accept CHAP (AuthMethod=%s)",
						 ini->target, v ? v : "?");
					return;
				}
				ini->step = LS_CHAP_A;
				if (ini_text_add(&t, "CHAP_A", "5") < 0 ||
				    ini_login_send(ini, 0, 1, false, &t) < 0)
					ini_fail(ini, "out of memory for the login");
				return;
			}
			break;
		case LS_CHAP_A: {
			const char *a = ini_key(text, len, "CHAP_A"), *id = ini_key(text, len, "CHAP_I");
			uint8_t chal[1024], r[16];
			char hex[2 + 2 * 16 + 1];
			int n = gw_chap_decode(ini_key(text, len, "CHAP_C"), chal, sizeof(chal));

			if (!a || strcmp(a, "5") || !id || n <= 0) {
				ini_fail(ini, "%s: CHAP: no MD5 challenge in its answer", ini->target);
				return;
			}
			if (gw_chap_response(GW_CHAP_MD5, (uint8_t)atoi(id), ini->chap_secret,
					     strlen(ini->chap_secret), chal, (size_t)n, r) ||
			    ini_hex(hex, sizeof(hex), r, sizeof(r))) {
				ini_fail(ini, "CHAP: MD5 unavailable here");
				return;
			}
			ini->step = LS_CHAP_R;
			if (ini_text_add(&t, "CHAP_N", "%s", ini->chap_user) < 0 ||
			    ini_text_add(&t, "CHAP_R", "%s", hex) < 0) {
				free(t.b);
				ini_fail(ini, "out of memory for the login");
				return;
			}
			if (ini->mutual_user) {
				if (getrandom(&ini->mutual_id, 1, 0) != 1 ||
				    getrandom(ini->mutual_chal, sizeof(ini->mutual_chal), 0) !=
				    (ssize_t)sizeof(ini->mutual_chal)) {
					free(t.b);
					ini_fail(ini, "no random bytes for the CHAP challenge");
					return;
				}
				if (ini_hex(hex, sizeof(hex), ini->mutual_chal,
					    sizeof(ini->mutual_chal)) < 0 ||
				    ini_text_add(&t, "CHAP_I", "%u", ini->mutual_id) < 0 ||
				    ini_text_add(&t, "CHAP_C", "%s", hex) < 0) {
					free(t.b);
					ini_fail(ini, "out of memory for the login");
					return;
				}
			}
			if (ini_login_send(ini, 0, 1, true, &t) < 0)
				ini_fail(ini, "out of memory for the login");
			return;
		}
		case LS_CHAP_R:
			if (ini->mutual_user) {
				const char *n = ini_key(text, len, "CHAP_N");
				uint8_t got[16], want[16];

				if (!n || strcmp(n, ini->mutual_user) ||
				    gw_chap_decode(ini_key(text, len, "CHAP_R"), got, 16) != 16 ||
				    gw_chap_response(GW_CHAP_MD5, ini->mutual_id, ini->mutual_secret,
						     strlen(ini->mutual_secret), ini->mutual_chal,
						     sizeof(ini->mutual_chal), want) ||
				    CRYPTO_memcmp(got, want, 16)) {
					ini_fail(ini, "mutual CHAP: %s did not prove its identity",
						 ini->target);
					return;
				}
			}
			break;
		case LS_OPERATIONAL:
			break;
		}
		if (!transit) {		/* the target wants another round in this stage */
			if (ini_login_send(ini, 0, 1, true, &t) < 0)
				ini_fail(ini, "out of memory for the login");
			return;
		}
		if (nsg == 1) {
			if (ini_login_operational(ini) < 0)
				ini_fail(ini, "out of memory for the login");
			return;
		}
	} else {
		ini_negotiated(ini, text, len);
		if (!transit || nsg != 3) {
			if (ini_login_send(ini, 1, 3, true, &t) < 0)
				ini_fail(ini, "out of memory for the login");
			return;
		}
	}
	if (nsg != 3) {
		ini_fail(ini, "login to %s: unexpected stage %d", ini->target, nsg);
		return;
	}
	if (ini->first_burst > ini->max_burst)
		ini->first_burst = ini->max_burst;
	if (!ini->max_send_dsl)
		ini->max_send_dsl = 8192;
	ini->state = INI_FULL;
	ini->cmdsn = ini->exp_cmdsn = get32(h, 28);
	ini->max_cmdsn = get32(h, 32);
	gw_dbg(MP_LOG, "native login to %s at %s: MRDSL %u, burst %u/%u, InitialR2T %s, "
	       "ImmediateData %s, header digest %s, data digest %s", ini->target, ini->portal,
	       ini->max_send_dsl, ini->first_burst, ini->max_burst,
	       ini->initial_r2t ? "Yes" : "No", ini->immediate_data ? "Yes" : "No",
	       ini->hd ? "CRC32C" : "None", ini->dd ? "CRC32C" : "None");
	ini->fn(ini, 0, ini->arg);
}

/* ---- receive ------------------------------------------------------------------------------- */

static void ini_complete(struct mp_ini *ini, struct ini_task *t, int status, const uint8_t *sense,
			 uint32_t sense_len)
{
	struct mp_ini_result r = {
		.status = status, .sense = sense, .sense_len = sense_len, .data_len = t->data_len,
	};
	mp_ini_cmd_fn fn = t->fn;
	void *arg = t->arg;

	ini_task_put(ini, t);
	fn(arg, &r);
}

static void ini_sn(struct mp_ini *ini, const uint8_t *h, bool statsn)
{
	uint32_t exp = get32(h, 28), max = get32(h, 32);

	if (statsn && !sn_lt(get32(h, 24) + 1, ini->exp_statsn))
		ini->exp_statsn = get32(h, 24) + 1;
	if (ini->state != INI_FULL || (int32_t)(max - exp) < -1)
		return;			/* not a window (RFC 7143 §4.2.2.1) */
	if (sn_lt(ini->exp_cmdsn, exp))
		ini->exp_cmdsn = exp;
	if (sn_lt(ini->max_cmdsn, max))
		ini->max_cmdsn = max;
}

/* A Data-In's data is all in: the status it may carry. */
static void ini_datain_end(struct mp_ini *ini, struct ini_task *t, const uint8_t *h)
{
	if (h[1] & FL_S) {
		ini_sn(ini, h, true);
		ini_complete(ini, t, h[3], NULL, 0);
	}
}

static void ini_pdu_in(struct mp_ini *ini, const uint8_t *h, const uint8_t *data, uint32_t dsl)
{
	uint8_t op = h[0] & 0x3f;
	uint32_t itt = get32(h, 16);
	struct ini_task *t;

	ini->st.pdus_in++;
	if (ini->state == INI_LOGIN) {
		if (op != OP_LOGIN_RSP) {
			ini_fail(ini, "login to %s: unexpected opcode %#x", ini->target, op);
			return;
		}
		ini_login_rsp(ini, h, (const char *)data, dsl);
		return;
	}
	switch (op) {
	case OP_SCSI_RSP: {
		const uint8_t *sense = NULL;
		uint32_t sl = 0;

		ini_sn(ini, h, true);
		t = ini_slot_find(ini, itt);
		if (!t || t->kind != INI_K_CMD) {
			ini_fail(ini, "SCSI Response for unknown task %#x", itt);
			return;
		}
		if (h[2] != 0) {
			ini_fail(ini, "target failure (iSCSI response %#x) for a command", h[2]);
			return;
		}
		if (dsl >= 2) {
			sl = (uint32_t)data[0] << 8 | data[1];
			if (sl > dsl - 2)
				sl = dsl - 2;
			sense = data + 2;
		}
		ini_complete(ini, t, h[3], sense, sl);
		break;
	}
	case OP_NOP_IN: {
		uint32_t ttt = get32(h, 20);

		ini_sn(ini, h, itt != INI_TAG_NONE);
		if (itt != INI_TAG_NONE) {
			t = ini_slot_find(ini, itt);
			if (t && t->kind == INI_K_NOP)
				ini_complete(ini, t, 0, NULL, 0);
		}
		if (ttt != INI_TAG_NONE) {
			/* The target's ping: answered with its tag and data. */
			struct ini_pdu *pdu = ini_pdu_new(1);

			if (!pdu || (dsl && !(pdu->own = malloc(dsl)))) {
				free(pdu);
				ini_fail(ini, "out of memory answering a NOP-In");
				return;
			}
			ini_imm_hdr(ini, pdu, OP_NOP_OUT, FL_F, INI_TAG_NONE, ttt);
			memcpy(pdu->hdr + 8, h + 8, 8);
			if (dsl) {
				memcpy(pdu->own, data, dsl);
				pdu->iov[0].iov_base = pdu->own;
				pdu->iov[0].iov_len = dsl;
				pdu->niov = 1;
			}
			ini_queue(ini, pdu, dsl);
		}
		break;
	}
	case OP_DATA_IN:		/* without data: only a status */
		t = ini_slot_find(ini, itt);
		if (!t || t->kind != INI_K_CMD) {
			ini_fail(ini, "Data-In for unknown task %#x", itt);
			return;
		}
		ini_sn(ini, h, false);
		ini_datain_end(ini, t, h);
		break;
	case OP_R2T: {
		uint32_t off = get32(h, 40), len = get32(h, 44);

		ini_sn(ini, h, false);
		t = ini_slot_find(ini, itt);
		if (!t || t->kind != INI_K_CMD || t->dir != MP_INI_WRITE || off > t->xfer ||
		    len > t->xfer - off || !len) {
			ini_fail(ini, "R2T outside its command (task %#x, %u+%u)", itt, off, len);
			return;
		}
		if (ini_data_out(ini, t, get32(h, 20), off, len) < 0)
			ini_fail(ini, "out of memory answering an R2T");
		break;
	}
	case OP_TMF_RSP:
		ini_sn(ini, h, true);
		t = ini_slot_find(ini, itt);
		if (!t || t->kind != INI_K_TMF) {
			ini_fail(ini, "Task Management Response for unknown task %#x", itt);
			return;
		}
		ini_tmf_rsp(ini, t, h[2]);
		break;
	case OP_LOGOUT_RSP:
		ini_sn(ini, h, true);
		t = ini_slot_find(ini, itt);
		if (!t || t->kind != INI_K_LOGOUT) {
			ini_fail(ini, "Logout Response for unknown task %#x", itt);
			return;
		}
		if (h[2] == 0) {
			/* The target closes the connection now: nothing more to read or send. */
			ini->state = INI_LOGGED_OUT;
			gw_watch_stop(&ini->w);
			gw_defer_cancel(&ini->flush);
		}
		ini_complete(ini, t, h[2], NULL, 0);
		break;
	case OP_ASYNC:
		ini_sn(ini, h, true);
		if (h[36] != 0)
			ini_fail(ini, "%s asked to end the connection (async event %u)", ini->target,
				 h[36]);
		break;
	case OP_REJECT:
		ini_sn(ini, h, true);
		ini_fail(ini, "%s rejected a PDU (reason %#x)", ini->target, h[2]);
		break;
	default:
		ini_sn(ini, h, true);
		ini_fail(ini, "unexpected opcode %#x from %s", op, ini->target);
		break;
	}
}

static bool ini_hdr_ok(struct mp_ini *ini, const uint8_t *h, uint32_t ahs)
{
	uint32_t crc, got;

	if (!ini->hd || ini->state != INI_FULL)
		return true;
	crc = gw_crc32c(0, h, INI_BHS + ahs);
	memcpy(&got, h + INI_BHS + ahs, 4);
	if (crc == got)
		return true;
	ini_fail(ini, "header digest error from %s", ini->portal);
	return false;
}

static bool ini_data_ok(struct mp_ini *ini, uint32_t crc, const uint8_t *dig)
{
	uint32_t got;

	memcpy(&got, dig, 4);
	if (crc == got)
		return true;
	ini_fail(ini, "data digest error from %s", ini->portal);
	return false;
}

/* The data digest of a Data-In read in place: over its slice of the iovec, then its pad. */
static bool ini_direct_data_ok(struct mp_ini *ini, const struct ini_task *t)
{
	uint32_t dsl = get24(ini->rx_hdr, 5), pad = pad4(dsl), crc = 0;
	uint64_t off = get32(ini->rx_hdr, 40), left = dsl;

	while (left) {
		struct iovec v[16];
		uint64_t covered = 0;
		int n = gw_iov_slice(t->iov, t->iovcnt, off, left, v, 16, &covered);

		for (int i = 0; i < n; i++)
			crc = gw_crc32c(crc, v[i].iov_base, v[i].iov_len);
		if (!covered)
			break;
		off += covered;
		left -= covered;
	}
	crc = gw_crc32c(crc, ini->rx_tail, pad);
	return ini_data_ok(ini, crc, ini->rx_tail + pad);
}

/* A header's length on the wire without AHS: the BHS and its digest, if one is in use. */
static uint32_t ini_hlen(const struct mp_ini *ini)
{
	return INI_BHS + (ini->hd && ini->state == INI_FULL ? 4 : 0);
}

/* Handles the complete PDUs in rx; leaves a partial one there (or in the direct state). */
static void ini_parse(struct mp_ini *ini)
{
	while (!ini_done(ini) && !ini->rx_left && !ini->rx_skip) {
		uint8_t *h = ini->rx + ini->rx_off;
		uint32_t avail = ini->rx_len - ini->rx_off, ahs, hlen, dsl, pad, ddl, tail, total;

		if (avail < INI_BHS)
			break;
		ahs = (uint32_t)h[4] * 4;
		hlen = INI_BHS + ahs + (ini->hd && ini->state == INI_FULL ? 4 : 0);
		if (avail < hlen)
			break;
		dsl = get24(h, 5);
		pad = pad4(dsl);
		ddl = ini->dd && ini->state == INI_FULL && dsl ? 4 : 0;
		if ((h[0] & 0x3f) == OP_DATA_IN && dsl && ini->state == INI_FULL) {
			uint32_t off = get32(h, 40), take;
			struct ini_task *t;

			if (!ini_hdr_ok(ini, h, ahs))
				return;
			t = ini_slot_find(ini, get32(h, 16));
			if (!t || t->kind != INI_K_CMD || t->dir != MP_INI_READ || off > t->xfer ||
			    dsl > t->xfer - off) {
				ini_fail(ini, "Data-In outside its command (task %#x, %u+%u)",
					 get32(h, 16), off, dsl);
				return;
			}
			ini_sn(ini, h, false);
			ini->rx_hdr_first = dsl >= INI_DIRECT_MIN;
			tail = pad + ddl;
			take = avail - hlen < dsl ? avail - hlen : dsl;
			gw_buf_to_iov(t->iov, t->iovcnt, off, h + hlen, take);
			t->data_len += dsl;
			ini->st.pdus_in++;
			if (take < dsl || avail - hlen - take < tail) {
				uint32_t have = take < dsl ? 0 : avail - hlen - take;

				/* The rest comes straight into the iovec, pad and digest behind. */
				ini->rx_task = t;
				ini->rx_at = off + take;
				ini->rx_left = dsl - take;
				ini->rx_tail_len = tail;
				memcpy(ini->rx_tail, h + hlen + dsl, have);
				ini->rx_skip = tail - have;
				memcpy(ini->rx_hdr, h, INI_BHS);
				ini->rx_off = ini->rx_len;
				break;
			}
			if (ddl && !ini_data_ok(ini, gw_crc32c(0, h + hlen, dsl + pad),
						h + hlen + dsl + pad))
				return;
			ini->rx_off += hlen + dsl + tail;
			ini_datain_end(ini, t, h);
			ini_kick(ini);
			continue;
		}
		total = hlen + dsl + pad + ddl;
		if (dsl > INI_MY_MRDSL) {
			ini_fail(ini, "PDU of %u data bytes from %s, above the %u negotiated", dsl,
				 ini->portal, INI_MY_MRDSL);
			return;
		}
		if (total > ini->rx_cap - ini->rx_off) {
			if (ini->rx_off)
				break;		/* compacted before the next read */
			uint8_t *b = realloc(ini->rx, total);

			if (!b) {
				ini_fail(ini, "out of memory receiving");
				return;
			}
			ini->rx = b;
			ini->rx_cap = total;
			continue;
		}
		if (avail < total)
			break;
		if (!ini_hdr_ok(ini, h, ahs))
			return;
		if (ddl && !ini_data_ok(ini, gw_crc32c(0, h + hlen, dsl + pad), h + hlen + dsl + pad))
			return;
		ini->rx_hdr_first = false;
		ini->rx_off += total;
		ini_pdu_in(ini, h, h + hlen, dsl);
		ini_kick(ini);
	}
}

static void ini_rx(struct mp_ini *ini)
{
	for (int round = 0; round < 64 && !ini_done(ini); round++) {
		struct iovec v[INI_RX_IOV];
		uint64_t covered = 0;
		size_t want = 0;
		int cnt = 0;
		ssize_t n;

		if (ini->rx_off == ini->rx_len) {
			ini->rx_off = ini->rx_len = 0;
		} else if (ini->rx_off && ini->rx_cap - ini->rx_len < INI_BHS * 4) {
			memmove(ini->rx, ini->rx + ini->rx_off, ini->rx_len - ini->rx_off);
			ini->rx_len -= ini->rx_off;
			ini->rx_off = 0;
		} else if (ini->rx_off && ini->rx_len == ini->rx_cap) {
			memmove(ini->rx, ini->rx + ini->rx_off, ini->rx_len - ini->rx_off);
			ini->rx_len -= ini->rx_off;
			ini->rx_off = 0;
		}
		if (ini->rx_left) {
			cnt = gw_iov_slice(ini->rx_task->iov, ini->rx_task->iovcnt, ini->rx_at,
					   ini->rx_left, v, INI_RX_IOV - 2, &covered);
			want = covered;
		}
		if (covered == ini->rx_left) {
			uint32_t room = ini->rx_cap - ini->rx_len;

			if (ini->rx_skip) {
				v[cnt].iov_base = ini->rx_tail + ini->rx_tail_len - ini->rx_skip;
				v[cnt++].iov_len = ini->rx_skip;
				want += ini->rx_skip;
			}
			/* At a PDU boundary after a big Data-In: only the next header (no AHS
			 * expected), so that its data can be read in place too. */
			if (ini->rx_hdr_first && ini->rx_off == ini->rx_len && room > ini_hlen(ini))
				room = ini_hlen(ini);
			v[cnt].iov_base = ini->rx + ini->rx_len;
			v[cnt++].iov_len = room;
			want += room;
		}
		n = cnt == 1 ? read(ini->fd, v[0].iov_base, v[0].iov_len) : readv(ini->fd, v, cnt);
		ini->st.reads++;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			ini_fail(ini, "receive from %s: %s", ini->portal, strerror(errno));
			return;
		}
		if (n == 0) {
			ini_fail(ini, "connection closed by %s", ini->portal);
			return;
		}
		size_t got = (size_t)n;

		if (ini->rx_left || ini->rx_skip) {
			size_t take = got < ini->rx_left ? got : ini->rx_left;

			ini->rx_at += (uint32_t)take;
			ini->rx_left -= (uint32_t)take;
			ini->st.direct_bytes += take;
			got -= take;
			if (!ini->rx_left) {
				take = got < ini->rx_skip ? got : ini->rx_skip;
				ini->rx_skip -= (uint32_t)take;
				got -= take;
			}
			if (!ini->rx_left && !ini->rx_skip) {
				struct ini_task *t = ini->rx_task;

				ini->rx_task = NULL;
				if (ini->dd && !ini_direct_data_ok(ini, t))
					return;
				ini_datain_end(ini, t, ini->rx_hdr);
				ini_kick(ini);
			}
		}
		ini->rx_len += (uint32_t)got;
		ini_parse(ini);
		/* Less than asked: the socket is drained, EPOLLIN says when there is more. */
		if ((size_t)n < want)
			return;
	}
}

static void ini_watch_fn(struct gw_watch *w, uint32_t events)
{
	struct mp_ini *ini = gw_container_of(w, struct mp_ini, w);

	if (ini->state == INI_CONNECTING) {
		int err = 0;
		socklen_t l = sizeof(err);

		if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
			return;
		if (getsockopt(ini->fd, SOL_SOCKET, SO_ERROR, &err, &l) < 0)
			err = errno;
		if (err) {
			char note[300], at[80] = "";

			/* The address too when the portal is a name: which of its addresses. */
			if (strcmp(ini->addr, ini->portal) != 0)
				snprintf(at, sizeof(at), " (%s)", ini->addr);
			ini_fail(ini, "connect to %s%s%s failed: %s", ini->portal, at,
				 ini_redir_note(ini, note, sizeof(note)), strerror(err));
			return;
		}
		ini->tx_wait = false;
		if (gw_watch_set(&ini->w, EPOLLIN | EPOLLRDHUP) < 0) {
			ini_fail(ini, "cannot watch the connection to %s", ini->portal);
			return;
		}
		ini_login_start(ini);
		return;
	}
	if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		ini_rx(ini);
	if (ini_done(ini))
		return;
	if (events & (EPOLLERR | EPOLLHUP)) {
		ini_fail(ini, "connection to %s lost", ini->portal);
		return;
	}
	if (events & EPOLLOUT)
		ini_flush(ini);
}

/* ---- life ------------------------------------------------------------------------------------ */

/* host[:port][,tpgt] (RFC 7143 §13.8's TargetAddress, and the configured portal), an IPv6
 * address in brackets, into host and port (3260 by default); the portal group tag is dropped,
 * as libiscsi does. -EINVAL for anything else. */
int mp_ini_parse_portal(const char *portal, char *host, size_t hl, char *port, size_t pl)
{
	const char *s = portal, *end = strrchr(portal, ','), *e, *colon;
	const char *ok = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_";
	unsigned long pn = 3260;

	if (end && (!end[1] || strspn(end + 1, "0123456789") != strlen(end + 1)))
		return -EINVAL;
	if (!end)
		end = s + strlen(s);
	if (*s == '[') {
		e = memchr(s + 1, ']', (size_t)(end - s - 1));
		if (!e)
			return -EINVAL;
		if (e + 1 != end && e[1] != ':')
			return -EINVAL;
		colon = e + 1 != end ? e + 1 : NULL;
		s++;
		ok = "abcdefABCDEF0123456789:.%ghijklmnopqrstuvwxyzGHIJKLMNOPQRSTUVWXYZ_-";
	} else {
		colon = memchr(s, ':', (size_t)(end - s));
		e = colon ? colon : end;
		if (colon && memchr(colon + 1, ':', (size_t)(end - colon - 1)))
			return -EINVAL;		/* an IPv6 address needs its brackets */
	}
	if (e == s || (size_t)(e - s) >= hl || strspn(s, ok) < (size_t)(e - s))
		return -EINVAL;
	if (colon) {
		size_t n = (size_t)(end - colon - 1);

		if (n == 0 || n > 5 || strspn(colon + 1, "0123456789") < n)
			return -EINVAL;
		pn = strtoul(colon + 1, NULL, 10);
		if (pn == 0 || pn > 65535)
			return -EINVAL;
	}
	memcpy(host, s, (size_t)(e - s));
	host[e - s] = 0;
	snprintf(port, pl, "%lu", pn);
	return 0;
}

/* Connects to a resolved address without blocking. */
static int ini_connect_addr(struct mp_ini *ini, const struct gw_addr *a)
{
	int one = 1, rc;

	gw_addr_str(a, ini->addr, sizeof(ini->addr));
	ini->fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (ini->fd < 0)
		return -errno;
	setsockopt(ini->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(ini->fd, (const struct sockaddr *)&a->ss, a->len) < 0 && errno != EINPROGRESS)
		return -errno;
	gw_watch_init(&ini->w, ini->loop, ini->fd, ini_watch_fn);
	rc = gw_watch_set(&ini->w, EPOLLOUT);
	if (rc == 0)
		ini->state = INI_CONNECTING;
	return rc;
}

static void ini_resolved(void *arg, int err, const struct gw_addr *a)
{
	struct mp_ini *ini = arg;
	char note[300];
	int rc;

	ini->rsv = NULL;
	if (err) {
		ini_fail(ini, "name lookup of %s%s failed: %s", ini->rsv_host,
			 ini_redir_note(ini, note, sizeof(note)), gw_resolve_strerror(err));
		return;
	}
	rc = ini_connect_addr(ini, a);
	if (rc < 0)
		ini_fail(ini, "connect to %s (%s)%s: %s", ini->portal, ini->addr,
			 ini_redir_note(ini, note, sizeof(note)), strerror(-rc));
}

/* Connects to ini->portal without blocking: a numeric address at once, a name once the
 * resolver has looked it up (INI_RESOLVING until then; the caller's deadline bounds it). */
static int ini_connect(struct mp_ini *ini)
{
	char port[16];
	struct gw_addr a;
	int rc;

	ini->addr[0] = 0;
	if (mp_ini_parse_portal(ini->portal, ini->rsv_host, sizeof(ini->rsv_host), port,
				sizeof(port)) < 0)
		return -EINVAL;
	rc = gw_resolve_start(ini->loop, ini->rsv_host, port, ini_resolved, ini, &a, &ini->rsv);
	if (rc == 1)
		return ini_connect_addr(ini, &a);
	if (rc == 0)
		ini->state = INI_RESOLVING;
	return rc;
}

/* RFC 7143 defaults for a new login, until the target answers. */
static void ini_login_reset(struct mp_ini *ini)
{
	ini->max_send_dsl = 8192;
	ini->max_burst = 262144;
	ini->first_burst = 65536;
	ini->initial_r2t = true;
	ini->immediate_data = true;
	ini->hd = ini->dd = false;
	ini->cmdsn = 1;
	ini->exp_statsn = 0;
	ini->tsih = 0;
	ini->login_rounds = 0;
}

/* The redirect's second half, after the loop round that read it: the old connection closes
 * (the target ends it too, RFC 7143 §11.13.5) and the login starts over at the new portal. */
static void ini_redirect_fn(struct gw_defer *d)
{
	struct mp_ini *ini = gw_container_of(d, struct mp_ini, redirect);
	struct ini_pdu *pdu, *pt;
	int rc;

	close(ini->fd);
	ini->fd = -1;
	gw_list_for_each_entry_safe(pdu, pt, &ini->txq, node)
		ini_pdu_free(pdu);
	gw_list_init(&ini->txq);
	ini->tx_off = 0;
	ini->tx_wait = false;
	ini->rx_len = ini->rx_off = 0;
	ini->rx_hdr_first = false;
	free(ini->redirected_by);
	ini->redirected_by = ini->portal;
	ini->portal = ini->redirect_to;
	ini->redirect_to = NULL;
	ini_login_reset(ini);
	rc = ini_connect(ini);
	if (rc < 0)
		ini_fail(ini, "connect to %s (redirected by %s): %s", ini->portal,
			 ini->redirected_by, strerror(-rc));
}

static char *ini_strdup_opt(const char *s)
{
	return s && s[0] ? strdup(s) : NULL;
}

int mp_ini_create(struct gw_loop *loop, const struct mp_ini_conf *conf, mp_ini_event_fn fn,
		  void *arg, struct mp_ini **out)
{
	struct mp_ini *ini;
	char host[256], port[16];
	int rc;

	if (mp_ini_parse_portal(conf->portal, host, sizeof(host), port, sizeof(port)) < 0)
		return -EINVAL;
	ini = calloc(1, sizeof(*ini));
	if (!ini)
		return -ENOMEM;
	ini->loop = loop;
	ini->fn = fn;
	ini->arg = arg;
	ini->fd = -1;
	gw_list_init(&ini->txq);
	gw_list_init(&ini->pending);
	gw_list_init(&ini->cache);
	gw_defer_init(&ini->flush, ini_flush_fn);
	gw_defer_init(&ini->redirect, ini_redirect_fn);
	for (uint32_t i = 0; i < INI_SLOTS; i++)
		ini->free_slots[i] = INI_SLOTS - 1 - i;
	ini->nfree = INI_SLOTS;
	ini_login_reset(ini);
	ini->want_hd = conf->header_digest;
	ini->want_dd = conf->data_digest;
	ini->portal = strdup(conf->portal);
	ini->target = strdup(conf->target);
	ini->initiator = strdup(conf->initiator);
	ini->chap_user = ini_strdup_opt(conf->chap_user);
	ini->chap_secret = strdup(conf->chap_secret ? conf->chap_secret : "");
	ini->mutual_user = ini_strdup_opt(conf->mutual_user);
	ini->mutual_secret = strdup(conf->mutual_secret ? conf->mutual_secret : "");
	ini->rx_cap = INI_RX_BUF;
	ini->rx = malloc(ini->rx_cap);
	rc = -ENOMEM;
	if (!ini->portal || !ini->target || !ini->initiator || !ini->chap_secret ||
	    !ini->mutual_secret || !ini->rx)
		goto fail;
	/* ISID: random qualifier (type 10b, RFC 7143 §11.12.5), unless the caller keeps one. */
	if (conf->isid) {
		memcpy(ini->isid, conf->isid, 6);
	} else {
		if (getrandom(ini->isid + 1, 3, 0) != 3)
			goto fail;
		ini->isid[0] = 0x80;
	}
	rc = ini_connect(ini);
	if (rc < 0)
		goto fail;
	*out = ini;
	return 0;
fail:
	mp_ini_destroy(ini);
	return rc;
}

/* Destroying an idle logged-in session: a Logout request written now, without waiting for its
 * answer. True if it went out whole (then the close may be a FIN). */
static bool ini_logout_now(struct mp_ini *ini)
{
	uint8_t h[INI_BHS + 4] = { 0 };
	uint32_t len = INI_BHS;

	if (ini->state != INI_FULL || ini->nfree != INI_SLOTS || !gw_list_empty(&ini->txq) ||
	    !gw_list_empty(&ini->pending) || ini->rx_left || ini->rx_skip)
		return false;
	h[0] = OP_LOGOUT_REQ | 0x40;
	h[1] = FL_F;
	put32(h, 16, ini->gen << 10 | 0x3ff);	/* a tag no slot holds */
	put32(h, 20, INI_TAG_NONE);
	put32(h, 24, ini->cmdsn);
	put32(h, 28, ini->exp_statsn);
	if (ini->hd) {
		uint32_t crc = gw_crc32c(0, h, INI_BHS);

		memcpy(h + INI_BHS, &crc, 4);
		len += 4;
	}
	if (send(ini->fd, h, len, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)len)
		return false;
	shutdown(ini->fd, SHUT_WR);
	return true;
}

void mp_ini_destroy(struct mp_ini *ini)
{
	struct ini_pdu *pdu, *pt;
	struct ini_task *t, *tt;

	if (!ini)
		return;
	gw_resolve_cancel(ini->rsv);
	gw_watch_stop(&ini->w);
	gw_defer_cancel(&ini->flush);
	gw_defer_cancel(&ini->redirect);
	if (ini->fd >= 0) {
		struct linger abort_close = { .l_onoff = 1, .l_linger = 0 };

		/* Reset, not close: a write queued here must never reach the target later. An
		 * idle session (a LUN removed, the gateway stopping) says Logout first, then
		 * closes with a FIN, so the target ends it cleanly rather than as a failure. */
		if (ini->state != INI_LOGGED_OUT && !ini_logout_now(ini))
			setsockopt(ini->fd, SOL_SOCKET, SO_LINGER, &abort_close,
				   sizeof(abort_close));
		close(ini->fd);
	}
	gw_list_for_each_entry_safe(pdu, pt, &ini->txq, node)
		ini_pdu_free(pdu);
	for (uint32_t i = 0; i < INI_SLOTS; i++)
		free(ini->slots[i]);
	gw_list_for_each_entry_safe(t, tt, &ini->pending, node)
		free(t);
	gw_list_for_each_entry_safe(t, tt, &ini->cache, node)
		free(t);
	if (ini->chap_secret)
		OPENSSL_cleanse(ini->chap_secret, strlen(ini->chap_secret));
	if (ini->mutual_secret)
		OPENSSL_cleanse(ini->mutual_secret, strlen(ini->mutual_secret));
	free(ini->portal);
	free(ini->redirect_to);
	free(ini->redirected_by);
	free(ini->target);
	free(ini->initiator);
	free(ini->chap_user);
	free(ini->chap_secret);
	free(ini->mutual_user);
	free(ini->mutual_secret);
	free(ini->rx);
	free(ini);
}

const char *mp_ini_error(const struct mp_ini *ini)
{
	return ini->err;
}

const char *mp_ini_resolving(const struct mp_ini *ini)
{
	return ini->state == INI_RESOLVING ? ini->rsv_host : NULL;
}

const char *mp_ini_address(const struct mp_ini *ini)
{
	return ini->addr;
}

const char *mp_ini_redirected_to(const struct mp_ini *ini)
{
	return ini->redirected_by ? ini->portal : NULL;
}

void mp_ini_stats(const struct mp_ini *ini, struct mp_ini_stats *st)
{
	*st = ini->st;
	st->max_send_dsl = ini->max_send_dsl;
	st->first_burst = ini->first_burst;
	st->max_burst = ini->max_burst;
	st->initial_r2t = ini->initial_r2t;
	st->immediate_data = ini->immediate_data;
	st->header_digest = ini->hd;
	st->data_digest = ini->dd;
}
