/*
 * isergw-alua: ALUA from a host's point of view, on libiscsi's synchronous API.
 *
 *   isergw-alua [-i INITIATOR] info URL
 *	prints the LU's identity (NAA id of VPD 0x83, serial of VPD 0x80), the target port group
 *	and relative port the path is on, and REPORT TARGET PORT GROUPS one line per group:
 *	"group ID STATE ports R[,R...]" (STATE: ao, ano, standby, unavailable, transitioning).
 *
 *   isergw-alua [-i INITIATOR] writer [-t SECONDS] [-f STOPFILE] [-n BLOCKS] [-s SEED]
 *               URL_A URL_B
 *	a two-path client, which libiscsi has not: it writes 4 KiB blocks over a span through
 *	the path whose own port group is active/optimized for the LU, re-reads the groups every
 *	second and after a unit attention, and when a command or the connection fails it
 *	retries the same write on the other path. It stops after SECONDS or when STOPFILE exists,
 *	then reads the whole span back through the path in use and checks every block (each
 *	carries its LBA and a generation). One "progress" line a second says which path writes.
 *
 *   isergw-alua [-i INITIATOR] poll [-p MS] [-t SECONDS] [-f STOPFILE] URL...
 *	REPORT TARGET PORT GROUPS through every URL (each a path to one gateway, up to 8) every
 *	MS milliseconds (default 100), each path's session kept and logged in again when it
 *	fails. One line per sample: "sample MS S1 S2 ..." (MS since start, monotonic; Sn the
 *	LU's state on path n's own port group, or "down" when the path does not answer); at
 *	the end "poll: N samples, M with more than one ao". The fencing test's witness.
 *
 *   isergw-alua [-i INITIATOR] caw URL LBA CMP WR [DIFF_AT]
 *	one COMPARE AND WRITE of one block at LBA: the compare half is the byte CMP repeated
 *	(with byte DIFF_AT inverted, when given), the write half the byte WR (both hex or
 *	decimal). Prints "caw: GOOD" or "caw: CHECK CONDITION sense KK/AA/QQ info N" (N: the
 *	INFORMATION field, "-" when not valid) and exits 0 or 1; unit attentions are retried.
 *
 * Exit status: 0 all data verified, 1 data mismatch, 2 usage, 3 no path could log in, 4 no
 * path worked for 30 s.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#define DEFAULT_INITIATOR "iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-test"
#define WBLOCKS 8
#define STALL_MS 30000

static const char *initiator = DEFAULT_INITIATOR;

static const char *state_name(int st)
{
	switch (st) {
	case 0x0: return "ao";
	case 0x1: return "ano";
	case 0x2: return "standby";
	case 0x3: return "unavailable";
	case 0xf: return "transitioning";
	default: return "?";
	}
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static struct iscsi_context *path_connect(const char *url_s, int *lun)
{
	struct iscsi_context *iscsi = iscsi_create_context(initiator);
	struct iscsi_url *url;

	if (!iscsi)
		return NULL;
	url = iscsi_parse_full_url(iscsi, url_s);
	if (!url) {
		fprintf(stderr, "alua: bad URL %s: %s\n", url_s, iscsi_get_error(iscsi));
		iscsi_destroy_context(iscsi);
		return NULL;
	}
	iscsi_set_targetname(iscsi, url->target);
	iscsi_set_session_type(iscsi, ISCSI_SESSION_NORMAL);
	iscsi_set_header_digest(iscsi, ISCSI_HEADER_DIGEST_NONE);
	iscsi_set_noautoreconnect(iscsi, 1);
	iscsi_set_timeout(iscsi, 5);
	if (iscsi_full_connect_sync(iscsi, url->portal, url->lun) != 0) {
		iscsi_destroy_url(url);
		iscsi_destroy_context(iscsi);
		return NULL;
	}
	*lun = url->lun;
	iscsi_destroy_url(url);
	return iscsi;
}

static struct scsi_task *cmd_in(struct iscsi_context *iscsi, int lun, unsigned char *cdb,
				int cdb_len, int len)
{
	struct scsi_task *task = scsi_create_task(cdb_len, cdb, SCSI_XFER_READ, len);

	if (!task)
		return NULL;
	if (!iscsi_scsi_command_sync(iscsi, lun, task, NULL)) {
		scsi_free_scsi_task(task);
		return NULL;
	}
	return task;
}

/* Sense of a failed task: 1 unit attention, 0 other failure (status set), -1 no answer. */
static int task_ua(const struct scsi_task *task)
{
	if (!task)
		return -1;
	return task->status == SCSI_STATUS_CHECK_CONDITION &&
	       task->sense.key == SCSI_SENSE_UNIT_ATTENTION;
}

/* VPD 0x83 of the path: NAA id (hex), the path's target port group and relative port. */
struct ident {
	char naa[40];
	char serial[64];
	int tpg;
	int rel;
};

/* Runs cmd until it is not a unit attention (at most 4 times). */
static struct scsi_task *cmd_in_retry(struct iscsi_context *iscsi, int lun, unsigned char *cdb,
				      int cdb_len, int len)
{
	struct scsi_task *task = NULL;

	for (int i = 0; i < 4; i++) {
		task = cmd_in(iscsi, lun, cdb, cdb_len, len);
		if (task_ua(task) != 1)
			break;
		scsi_free_scsi_task(task);
		task = NULL;
	}
	if (task && task->status != SCSI_STATUS_GOOD) {
		scsi_free_scsi_task(task);
		return NULL;
	}
	return task;
}

static int get_ident(struct iscsi_context *iscsi, int lun, struct ident *id)
{
	unsigned char cdb83[6] = { 0x12, 0x01, 0x83, 0x01, 0x00, 0x00 };
	unsigned char cdb80[6] = { 0x12, 0x01, 0x80, 0x00, 0xff, 0x00 };
	struct scsi_task *t;
	const unsigned char *d;
	int n, off;

	memset(id, 0, sizeof(*id));
	id->tpg = id->rel = -1;
	t = cmd_in_retry(iscsi, lun, cdb83, 6, 256);
	if (!t)
		return -1;
	d = t->datain.data;
	n = t->datain.size;
	for (off = 4; off + 4 <= n; off += 4 + d[off + 3]) {
		int type = d[off + 1] & 0x0f, assoc = (d[off + 1] >> 4) & 3, len = d[off + 3];
		const unsigned char *v = &d[off + 4];

		if (off + 4 + len > n)
			break;
		if (type == 3 && assoc == 0 && !id->naa[0])
			for (int i = 0; i < len && i < 16; i++)
				sprintf(&id->naa[2 * i], "%02x", v[i]);
		if (type == 5 && len >= 4)
			id->tpg = v[2] << 8 | v[3];
		if (type == 4 && len >= 4)
			id->rel = v[2] << 8 | v[3];
	}
	scsi_free_scsi_task(t);
	t = cmd_in_retry(iscsi, lun, cdb80, 6, 255);
	if (!t)
		return -1;
	d = t->datain.data;
	n = t->datain.size > 4 ? d[3] : 0;
	if (n > t->datain.size - 4)
		n = t->datain.size - 4;
	if (n > (int)sizeof(id->serial) - 1)
		n = sizeof(id->serial) - 1;
	memcpy(id->serial, &d[4], (size_t)n);
	scsi_free_scsi_task(t);
	return 0;
}

/* REPORT TARGET PORT GROUPS: states[g] for each group (-1 absent); prints when out. */
static int rtpg(struct iscsi_context *iscsi, int lun, int *states, int nstates, FILE *out,
		int *ua)
{
	unsigned char cdb[12] = { 0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 0x04, 0x00, 0, 0 };
	struct scsi_task *t;
	const unsigned char *d;
	int n, off;

	for (int i = 0; i < nstates; i++)
		states[i] = -1;
	t = cmd_in(iscsi, lun, cdb, 12, 1024);
	if (ua && task_ua(t) == 1)
		*ua = 1;
	if (task_ua(t) == 1) {
		scsi_free_scsi_task(t);
		t = cmd_in(iscsi, lun, cdb, 12, 1024);
	}
	if (!t)
		return -1;
	if (t->status != SCSI_STATUS_GOOD) {
		scsi_free_scsi_task(t);
		return -1;
	}
	d = t->datain.data;
	n = t->datain.size;
	if (n >= 4 && (int)((uint32_t)d[0] << 24 | d[1] << 16 | d[2] << 8 | d[3]) + 4 < n)
		n = (int)((uint32_t)d[0] << 24 | d[1] << 16 | d[2] << 8 | d[3]) + 4;
	for (off = 4; off + 8 <= n;) {
		int id = d[off + 2] << 8 | d[off + 3], st = d[off] & 0x0f, np = d[off + 7];

		if (id < nstates)
			states[id] = st;
		if (out) {
			fprintf(out, "group %d %s ports", id, state_name(st));
			for (int p = 0; p < np && off + 8 + 4 * p + 4 <= n; p++)
				fprintf(out, "%s%d", p ? "," : " ",
					d[off + 8 + 4 * p + 2] << 8 | d[off + 8 + 4 * p + 3]);
			fprintf(out, "\n");
		}
		off += 8 + 4 * np;
	}
	scsi_free_scsi_task(t);
	return 0;
}

static int cmd_info(const char *url)
{
	int states[1];
	struct iscsi_context *iscsi;
	struct ident id;
	int lun;

	iscsi = path_connect(url, &lun);
	if (!iscsi) {
		fprintf(stderr, "alua: cannot log in to %s\n", url);
		return 3;
	}
	if (get_ident(iscsi, lun, &id) || rtpg(iscsi, lun, states, 0, NULL, NULL)) {
		fprintf(stderr, "alua: INQUIRY or REPORT TARGET PORT GROUPS failed: %s\n",
			iscsi_get_error(iscsi));
		iscsi_logout_sync(iscsi);
		iscsi_destroy_context(iscsi);
		return 4;
	}
	printf("naa %s\nserial %s\nport_group %d\nrel_port %d\n", id.naa, id.serial, id.tpg,
	       id.rel);
	rtpg(iscsi, lun, states, 0, stdout, NULL);
	iscsi_logout_sync(iscsi);
	iscsi_destroy_context(iscsi);
	return 0;
}

/* ---- the two-path writer ---------------------------------------------------------------- */

struct path {
	const char *url;
	char name;
	struct iscsi_context *iscsi;
	int lun;
	int tpg;			/* its own port group, -1: unknown */
	uint64_t retry_at;
};

struct writer {
	struct path p[2];
	int cur;
	uint32_t bs;
	uint64_t span;			/* blocks */
	uint32_t *gen;
	uint32_t next_gen;
	uint64_t seed;
	uint64_t writes[2], errors, switches;
	uint64_t ua_alua;		/* ASYMMETRIC ACCESS STATE CHANGED (2A/06) seen on writes */
	unsigned char *buf;
};

static void fill(const struct writer *w, unsigned char *p, uint64_t lba, uint32_t gen)
{
	uint64_t x = w->seed ^ lba * 0x9e3779b97f4a7c15ULL ^ (uint64_t)gen << 32;

	memset(p, 0, 16);
	memcpy(p, &lba, 8);
	memcpy(p + 8, &gen, 4);
	for (uint32_t i = 16; i + 8 <= w->bs; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(p + i, &x, 8);
	}
}

static void path_drop(struct path *p)
{
	if (p->iscsi)
		iscsi_destroy_context(p->iscsi);
	p->iscsi = NULL;
	p->retry_at = now_ms() + 300;
}

static int path_up(struct writer *w, struct path *p)
{
	struct ident id;

	if (p->iscsi)
		return 0;
	if (now_ms() < p->retry_at)
		return -1;
	p->iscsi = path_connect(p->url, &p->lun);
	if (!p->iscsi) {
		p->retry_at = now_ms() + 300;
		return -1;
	}
	if (!w->bs) {
		struct scsi_task *t = iscsi_readcapacity16_sync(p->iscsi, p->lun);
		struct scsi_readcapacity16 *rc16 = t && t->status == SCSI_STATUS_GOOD ?
						   scsi_datain_unmarshall(t) : NULL;

		if (rc16) {
			w->bs = rc16->block_length;
			if (w->span > rc16->returned_lba + 1)
				w->span = rc16->returned_lba + 1;
		}
		if (t)
			scsi_free_scsi_task(t);
	}
	if (get_ident(p->iscsi, p->lun, &id) == 0)
		p->tpg = id.tpg;
	printf("path %c: logged in (port group %d)\n", p->name, p->tpg);
	return 0;
}

/* The LU's state on path p's own group: 0..15, or -1 when the path does not answer. */
static int path_state(struct writer *w, struct path *p)
{
	static int states[65536];
	int ua = 0;

	if (path_up(w, p))
		return -1;
	if (rtpg(p->iscsi, p->lun, states, 65536, NULL, &ua)) {
		path_drop(p);
		return -1;
	}
	return p->tpg >= 0 ? states[p->tpg] : -1;
}

/* Picks the path to write through: the current one while it is active/optimized, else the
 * other one if that is; a dead current path gives way to any live one. */
static void choose(struct writer *w, const char *why)
{
	int sc = path_state(w, &w->p[w->cur]), so, other = !w->cur;

	if (sc == 0)
		return;
	so = path_state(w, &w->p[other]);
	if (so == 0 || (sc < 0 && so >= 0 && so != 3)) {
		printf("switch %c -> %c (%s; %c is %s, %c is %s)\n", w->p[w->cur].name,
		       w->p[other].name, why, w->p[w->cur].name, sc < 0 ? "down" : state_name(sc),
		       w->p[other].name, state_name(so));
		w->cur = other;
		w->switches++;
	}
}

/* Writes WBLOCKS blocks at lba through the current path; retries elsewhere on failure. */
static int write_one(struct writer *w, uint64_t lba, uint64_t deadline_base)
{
	uint32_t gen = w->next_gen++;
	uint32_t len = WBLOCKS * w->bs;

	for (uint32_t i = 0; i < WBLOCKS; i++)
		fill(w, w->buf + (size_t)i * w->bs, lba + i, gen);
	for (;;) {
		struct path *p = &w->p[w->cur];
		struct scsi_task *t = NULL;

		if (path_up(w, p) == 0)
			t = iscsi_write16_sync(p->iscsi, p->lun, lba, w->buf, len, (int)w->bs, 0, 0,
					       0, 0, 0);
		if (t && t->status == SCSI_STATUS_GOOD) {
			scsi_free_scsi_task(t);
			for (uint32_t i = 0; i < WBLOCKS; i++)
				w->gen[lba + i] = gen;
			w->writes[w->cur]++;
			return 0;
		}
		if (task_ua(t) == 1) {
			/* libiscsi keeps ASC and ASCQ together in sense.ascq. */
			if (t->sense.ascq == 0x2a06) {
				w->ua_alua++;
				printf("path %c: ASYMMETRIC ACCESS STATE CHANGED\n", p->name);
			}
			scsi_free_scsi_task(t);
			choose(w, "unit attention");
			continue;
		}
		w->errors++;
		if (t && t->status <= 0xff) {
			fprintf(stderr, "alua: path %c: WRITE status 0x%02x sense %x/%04x\n", p->name,
				t->status, t->sense.key, t->sense.ascq);
			scsi_free_scsi_task(t);
		} else if (p->iscsi) {
			/* No SCSI status: the transport failed, the session is gone. */
			if (t)
				scsi_free_scsi_task(t);
			fprintf(stderr, "alua: path %c: WRITE failed: %s\n", p->name,
				iscsi_get_error(p->iscsi));
			path_drop(p);
		}
		if (now_ms() - deadline_base > STALL_MS) {
			fprintf(stderr, "alua: no path wrote for %d s\n", STALL_MS / 1000);
			return -1;
		}
		choose(w, "write failed");
		usleep(50000);
	}
}

static int verify(struct writer *w)
{
	uint64_t bad = 0, checked = 0, lba;
	unsigned char *want = malloc(w->bs);
	uint64_t start = now_ms();

	if (!want)
		return -1;
	for (lba = 0; lba < w->span;) {
		struct path *p = &w->p[w->cur];
		uint32_t n = w->span - lba > 256 ? 256 : (uint32_t)(w->span - lba);
		struct scsi_task *t = NULL;

		if (path_up(w, p) == 0)
			t = iscsi_read16_sync(p->iscsi, p->lun, lba, n * w->bs, (int)w->bs, 0, 0, 0,
					      0, 0);
		if (!t || t->status != SCSI_STATUS_GOOD || t->datain.size != (int)(n * w->bs)) {
			if (t)
				scsi_free_scsi_task(t);
			else
				path_drop(p);
			if (now_ms() - start > STALL_MS) {
				free(want);
				return -1;
			}
			choose(w, "read failed");
			usleep(50000);
			continue;
		}
		for (uint32_t i = 0; i < n; i++) {
			if (!w->gen[lba + i])
				continue;
			fill(w, want, lba + i, w->gen[lba + i]);
			checked++;
			if (memcmp(t->datain.data + (size_t)i * w->bs, want, w->bs)) {
				if (bad < 5) {
					const unsigned char *g = t->datain.data + (size_t)i * w->bs;
					uint64_t glba;
					uint32_t ggen;

					memcpy(&glba, g, 8);
					memcpy(&ggen, g + 8, 4);
					fprintf(stderr, "alua: MISMATCH at LBA %" PRIu64 ": expected "
						"generation %u, the block holds LBA %" PRIu64
						" generation %u\n", lba + i, w->gen[lba + i], glba,
						ggen);
				}
				bad++;
			}
		}
		scsi_free_scsi_task(t);
		lba += n;
	}
	free(want);
	printf("verify: %" PRIu64 " blocks checked through path %c, %" PRIu64 " mismatches\n",
	       checked, w->p[w->cur].name, bad);
	return bad ? 1 : 0;
}

static int cmd_writer(int argc, char **argv)
{
	struct writer w = { .span = 8192, .seed = 1, .next_gen = 1 };
	const char *stop = NULL;
	unsigned int secs = 60;
	uint64_t start, last_progress, last_choose, last_ok, lba = 0;
	int c, r;

	while ((c = getopt(argc, argv, "t:f:n:s:")) != -1) {
		switch (c) {
		case 't': secs = (unsigned int)strtoul(optarg, NULL, 10); break;
		case 'f': stop = optarg; break;
		case 'n': w.span = strtoull(optarg, NULL, 10); break;
		case 's': w.seed = strtoull(optarg, NULL, 10); break;
		default: return 2;
		}
	}
	if (argc - optind != 2 || w.span < WBLOCKS)
		return 2;
	w.p[0] = (struct path){ .url = argv[optind], .name = 'A', .tpg = -1 };
	w.p[1] = (struct path){ .url = argv[optind + 1], .name = 'B', .tpg = -1 };
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (path_up(&w, &w.p[0]) && path_up(&w, &w.p[1])) {
		fprintf(stderr, "alua: neither path logs in\n");
		return 3;
	}
	if (!w.p[0].iscsi)
		w.cur = 1;
	if (!w.bs) {
		fprintf(stderr, "alua: READ CAPACITY(16) failed\n");
		return 3;
	}
	w.span -= w.span % WBLOCKS;
	w.gen = calloc(w.span, sizeof(*w.gen));
	w.buf = malloc((size_t)WBLOCKS * w.bs);
	if (!w.gen || !w.buf)
		return 3;
	choose(&w, "start");
	printf("writing through path %c\n", w.p[w.cur].name);
	start = last_progress = last_choose = last_ok = now_ms();
	r = 0;
	while (now_ms() - start < (uint64_t)secs * 1000 && !(stop && access(stop, F_OK) == 0)) {
		if (write_one(&w, lba, last_ok)) {
			r = 4;
			break;
		}
		last_ok = now_ms();
		lba = (lba + WBLOCKS * 7) % w.span;	/* strides over the span, wrapping */
		if (now_ms() - last_choose >= 1000) {
			choose(&w, "periodic check");
			last_choose = now_ms();
		}
		if (now_ms() - last_progress >= 1000) {
			printf("progress path=%c writes_a=%" PRIu64 " writes_b=%" PRIu64
			       " errors=%" PRIu64 "\n", w.p[w.cur].name, w.writes[0], w.writes[1],
			       w.errors);
			last_progress = now_ms();
		}
	}
	if (r == 0) {
		r = verify(&w);
		if (r < 0)
			r = 4;
	}
	printf("writer: writes_a=%" PRIu64 " writes_b=%" PRIu64 " errors=%" PRIu64
	       " switches=%" PRIu64 " ua_alua=%" PRIu64 " path=%c exit=%d\n", w.writes[0],
	       w.writes[1], w.errors, w.switches, w.ua_alua, w.p[w.cur].name, r);
	for (int i = 0; i < 2; i++)
		if (w.p[i].iscsi) {
			iscsi_logout_sync(w.p[i].iscsi);
			iscsi_destroy_context(w.p[i].iscsi);
		}
	free(w.gen);
	free(w.buf);
	return r;
}

/* ---- the poller -------------------------------------------------------------------------- */

#define POLL_MAX 8

struct ppath {
	const char *url;
	struct iscsi_context *iscsi;
	int lun;
	int tpg;
	uint64_t retry_at;
};

/* The LU's state on p's own group, or -1 (the path is dropped, retried 200 ms later). */
static int poll_one(struct ppath *p)
{
	static int states[65536];
	struct ident id;

	if (!p->iscsi) {
		if (now_ms() < p->retry_at)
			return -1;
		p->iscsi = path_connect(p->url, &p->lun);
		if (p->iscsi && get_ident(p->iscsi, p->lun, &id) == 0) {
			p->tpg = id.tpg;
		} else if (p->iscsi) {
			iscsi_destroy_context(p->iscsi);
			p->iscsi = NULL;
		}
		if (!p->iscsi) {
			p->retry_at = now_ms() + 200;
			return -1;
		}
	}
	if (rtpg(p->iscsi, p->lun, states, 65536, NULL, NULL) || p->tpg < 0) {
		iscsi_destroy_context(p->iscsi);
		p->iscsi = NULL;
		p->retry_at = now_ms() + 200;
		return -1;
	}
	return states[p->tpg];
}

static int cmd_poll(int argc, char **argv)
{
	struct ppath p[POLL_MAX];
	unsigned int period = 100, secs = 600;
	const char *stop = NULL;
	uint64_t start, next, samples = 0, overlaps = 0;
	int c, n;

	while ((c = getopt(argc, argv, "p:t:f:")) != -1) {
		switch (c) {
		case 'p': period = (unsigned int)strtoul(optarg, NULL, 10); break;
		case 't': secs = (unsigned int)strtoul(optarg, NULL, 10); break;
		case 'f': stop = optarg; break;
		default: return 2;
		}
	}
	n = argc - optind;
	if (n < 1 || n > POLL_MAX || !period)
		return 2;
	for (int i = 0; i < n; i++)
		p[i] = (struct ppath){ .url = argv[optind + i], .tpg = -1 };
	setvbuf(stdout, NULL, _IOLBF, 0);
	start = next = now_ms();
	while (now_ms() - start < (uint64_t)secs * 1000 && !(stop && access(stop, F_OK) == 0)) {
		char line[256];
		int len, ao = 0;

		len = snprintf(line, sizeof(line), "sample %" PRIu64, now_ms() - start);
		for (int i = 0; i < n; i++) {
			int st = poll_one(&p[i]);

			ao += st == 0;
			len += snprintf(line + len, sizeof(line) - (size_t)len, " %s",
					st < 0 ? "down" : state_name(st));
		}
		printf("%s\n", line);
		samples++;
		overlaps += ao > 1;
		next += period;
		if (next > now_ms())
			usleep((useconds_t)(next - now_ms()) * 1000);
		else
			next = now_ms();	/* a slow sample: no burst to catch up */
	}
	printf("poll: %" PRIu64 " samples, %" PRIu64 " with more than one ao\n", samples,
	       overlaps);
	for (int i = 0; i < n; i++)
		if (p[i].iscsi) {
			iscsi_logout_sync(p[i].iscsi);
			iscsi_destroy_context(p[i].iscsi);
		}
	return 0;
}

static int cmd_caw(int argc, char **argv)
{
	unsigned char rc10[10] = { 0x25 }, cdb[16] = { 0x89 };
	struct scsi_task *task = NULL;
	struct iscsi_context *iscsi;
	unsigned char *buf;
	struct iscsi_data d;
	uint64_t lba;
	uint32_t bs;
	int lun, ret = 1;

	if (argc < 5 || argc > 6)
		return 2;
	iscsi = path_connect(argv[1], &lun);
	if (!iscsi) {
		fprintf(stderr, "caw: cannot log in to %s\n", argv[1]);
		return 3;
	}
	task = cmd_in_retry(iscsi, lun, rc10, 10, 8);
	if (!task || task->datain.size < 8) {
		fprintf(stderr, "caw: READ CAPACITY(10) failed\n");
		return 3;
	}
	bs = scsi_get_uint32(task->datain.data + 4);
	scsi_free_scsi_task(task);
	buf = malloc(2 * (size_t)bs);
	if (!buf || bs < 512)
		return 3;
	memset(buf, (int)strtoul(argv[3], NULL, 0), bs);
	memset(buf + bs, (int)strtoul(argv[4], NULL, 0), bs);
	if (argc == 6)
		buf[strtoul(argv[5], NULL, 0) % bs] ^= 0xff;
	lba = strtoull(argv[2], NULL, 0);
	for (int i = 0; i < 8; i++)
		cdb[2 + i] = (unsigned char)(lba >> (56 - 8 * i));
	cdb[13] = 1;
	d.data = buf;
	d.size = (int)(2 * bs);
	for (int i = 0; i < 4; i++) {
		task = scsi_create_task(16, cdb, SCSI_XFER_WRITE, (int)(2 * bs));
		if (!task || !iscsi_scsi_command_sync(iscsi, lun, task, &d)) {
			fprintf(stderr, "caw: no answer: %s\n", iscsi_get_error(iscsi));
			ret = 3;
			goto out;
		}
		if (task_ua(task) != 1)
			break;
		scsi_free_scsi_task(task);
		task = NULL;
	}
	if (task && task->status == SCSI_STATUS_GOOD) {
		printf("caw: GOOD\n");
		ret = 0;
	} else if (task && task->status == SCSI_STATUS_CHECK_CONDITION) {
		const unsigned char *sb = task->datain.size > 2 + 7 ? task->datain.data + 2 : NULL;

		printf("caw: CHECK CONDITION sense %02x/%02x/%02x info ", task->sense.key,
		       (task->sense.ascq >> 8) & 0xff, task->sense.ascq & 0xff);
		if (sb && (sb[0] & 0x7f) == 0x70 && (sb[0] & 0x80))
			printf("%u\n", (unsigned)scsi_get_uint32(sb + 3));
		else
			printf("-\n");
	} else if (task) {
		printf("caw: status %#x\n", task->status);
	}
out:
	if (task)
		scsi_free_scsi_task(task);
	free(buf);
	iscsi_logout_sync(iscsi);
	iscsi_destroy_context(iscsi);
	return ret;
}

int main(int argc, char **argv)
{
	int c;

	/* A target killed or reset mid-command must come back as an error (the tests kill
	 * targets on purpose): libiscsi sends data segments with writev(2), which raises SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);
	while ((c = getopt(argc, argv, "+i:")) != -1) {
		if (c == 'i')
			initiator = optarg;
		else
			goto usage;
	}
	if (optind < argc && !strcmp(argv[optind], "info") && argc - optind == 2)
		return cmd_info(argv[optind + 1]);
	if (optind < argc && !strcmp(argv[optind], "caw")) {
		int r = cmd_caw(argc - optind, argv + optind);

		if (r != 2)
			return r;
	}
	if (optind < argc && !strcmp(argv[optind], "poll")) {
		int first = optind, r;

		optind = 1;
		r = cmd_poll(argc - first, argv + first);
		if (r != 2)
			return r;
	}
	if (optind < argc && !strcmp(argv[optind], "writer")) {
		int first = optind, r;

		/* "writer" stands in for the program name of the subcommand's options. */
		optind = 1;
		r = cmd_writer(argc - first, argv + first);
		if (r != 2)
			return r;
	}
usage:
	fprintf(stderr, "usage: isergw-alua [-i INITIATOR] info URL\n"
		"       isergw-alua [-i INITIATOR] writer [-t SECONDS] [-f STOPFILE] [-n BLOCKS] "
		"[-s SEED] URL_A URL_B\n"
		"       isergw-alua [-i INITIATOR] poll [-p MS] [-t SECONDS] [-f STOPFILE] URL...\n"
		"       isergw-alua [-i INITIATOR] caw URL LBA CMP WR [DIFF_AT]\n");
	return 2;
}
