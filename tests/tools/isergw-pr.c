/*
 * isergw-pr: PERSISTENT RESERVE IN/OUT and plain I/O from one I_T nexus, on libiscsi's
 * synchronous API (libiscsi-bin has no PR tool, and sg_persist needs a kernel initiator).
 *
 *   isergw-pr [-i INITIATOR] [-s N] [-u] URL COMMAND [ARG...] [COMMAND [ARG...]]...
 *
 * The commands run in order on one session:
 *   register KEY              REGISTER AND IGNORE EXISTING KEY, service action key KEY
 *   unregister KEY            REGISTER from KEY to 0
 *   reserve KEY TYPE          RESERVE (TYPE 1 WE, 3 EA, 5 WE-RO, 6 EA-RO, 7 WE-AR, 8 EA-AR)
 *   release KEY TYPE          RELEASE
 *   clear KEY                 CLEAR
 *   preempt KEY VICTIM TYPE   PREEMPT
 *   read-keys                 prints "keys GENERATION [KEY...]"
 *   read-reservation          prints "reservation none" or "reservation KEY TYPE"
 *   write LBA | read LBA      one logical block (its size from READ CAPACITY(10))
 *   fill LBA BYTE             WRITE(10) of one block, every byte BYTE
 *   expect LBA BYTE           READ(10) of one block: "expect: good" when every byte is BYTE,
 *                             else "expect: mismatch (byte 0xNN at offset N)"
 *   caw LBA CMP WR            COMPARE AND WRITE of one block: compare with every byte CMP,
 *                             write every byte WR (a miscompare: check-condition 0e/1d/00)
 *   reserve6 | release6       SPC-2 RESERVE(6) / RELEASE(6) of the whole LU
 *   lun-reset                 the task management function LOGICAL UNIT RESET on the LUN
 *   lun N                     the following commands go to LUN N (default: the URL's)
 *   capacity                  READ CAPACITY(16): prints "capacity BLOCKS BLOCK-SIZE"
 * KEYs are hex (0x optional), BYTEs hex or decimal.
 *
 * With URL followed by "-" the commands come from standard input instead, one line at a time,
 * and the session stays logged in between lines; each line's answers are followed by a line
 * "end", so a script can drive several of these hosts at once (from different event loops of
 * one gateway) and wait for each answer. "quit" or end of input logs out. A line is split into
 * words and read by the same parser as the command line (one table, pr_cmds): an unknown
 * command or a bad argument ends the run either way (status 2).
 *
 * Each command prints one line, "COMMAND: good", "COMMAND: reservation-conflict",
 * "COMMAND: check-condition KEY/ASC/ASCQ" (hex, e.g. 02/04/0a) or "COMMAND: failed (why)"; a
 * unit attention is retried (at most 4 times), and with -u each one retried is printed first as
 * "ua 06/ASC/ASCQ" (what a host was told, e.g. 2a/09 CAPACITY DATA HAS CHANGED).
 * -s N fixes the ISID (its random field), so that runs one after another are the same
 * I_T nexus, as SPC keeps registrations across logins; without it libiscsi picks one.
 *
 * Exit status: 0 every command good, 1 one was not, 2 usage, 3 no login.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#define DEFAULT_INITIATOR "iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-test"

static struct iscsi_context *iscsi;
static int lun;
static bool show_ua;
static uint32_t block_size = 512;

static void usage(void)
{
	fprintf(stderr, "usage: isergw-pr [-i INITIATOR] [-s N] [-u] URL COMMAND [ARG...]...\n"
		"commands: register KEY, unregister KEY, reserve KEY TYPE, release KEY TYPE,\n"
		"          clear KEY, preempt KEY VICTIM TYPE, read-keys, read-reservation,\n"
		"          write LBA, read LBA, fill LBA BYTE, expect LBA BYTE, caw LBA CMP WR,\n"
		"          reserve6, release6, lun-reset, lun N, capacity;\n"
		"          URL - reads the commands from standard input; -u prints each unit attention\n");
	exit(2);
}

static int login(const char *initiator, const char *url_s, long isid)
{
	struct iscsi_url *url;

	iscsi = iscsi_create_context(initiator);
	if (!iscsi)
		return -1;
	url = iscsi_parse_full_url(iscsi, url_s);
	if (!url) {
		fprintf(stderr, "pr: bad URL %s: %s\n", url_s, iscsi_get_error(iscsi));
		return -1;
	}
	iscsi_set_targetname(iscsi, url->target);
	iscsi_set_session_type(iscsi, ISCSI_SESSION_NORMAL);
	iscsi_set_header_digest(iscsi, ISCSI_HEADER_DIGEST_NONE);
	iscsi_set_noautoreconnect(iscsi, 1);
	iscsi_set_timeout(iscsi, 15);
	if (isid >= 0)
		iscsi_set_isid_random(iscsi, 0x5e0000u | (uint32_t)(isid & 0xffff), 0);
	if (iscsi_full_connect_sync(iscsi, url->portal, url->lun) != 0) {
		fprintf(stderr, "pr: login to %s failed: %s\n", url_s, iscsi_get_error(iscsi));
		iscsi_destroy_url(url);
		return -1;
	}
	lun = url->lun;
	iscsi_destroy_url(url);
	return 0;
}

/* One line for the task's outcome; 0 when GOOD. */
static int report(const char *name, struct scsi_task *t)
{
	if (!t) {
		printf("%s: failed (%s)\n", name, iscsi_get_error(iscsi));
		return -1;
	}
	switch (t->status) {
	case SCSI_STATUS_GOOD:
		printf("%s: good\n", name);
		return 0;
	case SCSI_STATUS_RESERVATION_CONFLICT:
		printf("%s: reservation-conflict\n", name);
		return -1;
	case SCSI_STATUS_CHECK_CONDITION:
		printf("%s: check-condition %02x/%02x/%02x\n", name, t->sense.key,
		       t->sense.ascq >> 8, t->sense.ascq & 0xff);
		return -1;
	default:
		printf("%s: failed (status 0x%02x)\n", name, t->status);
		return -1;
	}
}

static bool is_ua(const struct scsi_task *t)
{
	return t && t->status == SCSI_STATUS_CHECK_CONDITION &&
	       t->sense.key == SCSI_SENSE_UNIT_ATTENTION;
}

/* One argument by its letter in a command's row: K S key and service action key (hex, 0x
 * optional), T type, L LBA, N number (decimal or 0x), B byte. A bad one ends the run (2). */
static uint64_t parse_arg(char letter, const char *s)
{
	int hex = letter == 'K' || letter == 'S';
	uint64_t max = hex ? UINT64_MAX : letter == 'B' ? 0xff : 0x7fffffff;
	char *end;
	uint64_t v;

	errno = 0;
	v = strtoull(s, &end, hex ? 16 : 0);
	if (!*s || *end || *s == '-' || errno || v > max) {
		fprintf(stderr, "pr: %s is not a %s\n", s,
			hex ? "hex key" : letter == 'B' ? "byte" : "number");
		exit(2);
	}
	return v;
}

static struct scsi_task *pr_out(int sa, int type, uint64_t key, uint64_t sakey)
{
	struct scsi_persistent_reserve_out_basic b = {
		.reservation_key = key,
		.service_action_reservation_key = sakey,
	};

	return iscsi_persistent_reserve_out_sync(iscsi, lun, sa, SCSI_PERSISTENT_RESERVE_SCOPE_LU,
						 type, &b);
}

static struct scsi_task *rw(bool write, uint32_t lba)
{
	unsigned char *buf;
	struct scsi_task *t;

	if (!write)
		return iscsi_read10_sync(iscsi, lun, lba, block_size, block_size, 0, 0, 0, 0, 0);
	buf = calloc(1, block_size);
	if (!buf)
		return NULL;
	snprintf((char *)buf, block_size, "isergw-pr lba %u", lba);
	t = iscsi_write10_sync(iscsi, lun, lba, buf, block_size, block_size, 0, 0, 0, 0, 0);
	free(buf);
	return t;
}

static void print_in(int sa, struct scsi_task *t)
{
	void *d = scsi_datain_unmarshall(t);

	if (!d) {
		printf("pr-in: cannot decode the answer\n");
		return;
	}
	if (sa == SCSI_PERSISTENT_RESERVE_READ_KEYS) {
		struct scsi_persistent_reserve_in_read_keys *k = d;

		printf("keys %" PRIu32, k->prgeneration);
		for (int i = 0; i < k->num_keys; i++)
			printf(" 0x%016" PRIx64, k->keys[i]);
		printf("\n");
	} else {
		struct scsi_persistent_reserve_in_read_reservation *r = d;

		if (r->reserved)
			printf("reservation 0x%016" PRIx64 " %d\n", r->reservation_key,
			       r->pr_type);
		else
			printf("reservation none\n");
	}
}

static struct scsi_task *fill(uint32_t lba, int byte)
{
	unsigned char *buf = malloc(block_size);
	struct scsi_task *t;

	if (!buf)
		return NULL;
	memset(buf, byte, block_size);
	t = iscsi_write10_sync(iscsi, lun, lba, buf, block_size, block_size, 0, 0, 0, 0, 0);
	free(buf);
	return t;
}

static struct scsi_task *caw(uint64_t lba, int cmp, int wr)
{
	unsigned char *buf = malloc(2 * (size_t)block_size);
	struct scsi_task *t;

	if (!buf)
		return NULL;
	memset(buf, cmp, block_size);
	memset(buf + block_size, wr, block_size);
	t = iscsi_compareandwrite_sync(iscsi, lun, lba, buf, 2 * block_size, (int)block_size, 0, 0,
				       0, 0, 0);
	free(buf);
	return t;
}

/* After a GOOD READ: the block's bytes against the expected one. */
static void print_expect(const struct scsi_task *t, int byte, int *bad)
{
	for (uint32_t i = 0; i < block_size; i++) {
		if (i >= (uint32_t)t->datain.size || t->datain.data[i] != byte) {
			printf("expect: mismatch (byte 0x%02x at offset %u)\n",
			       i < (uint32_t)t->datain.size ? t->datain.data[i] : 0, i);
			*bad = 1;
			return;
		}
	}
	printf("expect: good\n");
}

/* LOGICAL UNIT RESET: libiscsi's synchronous call says only whether the function completed. */
static int lun_reset(void)
{
	if (iscsi_task_mgmt_lun_reset_sync(iscsi, (uint32_t)lun) != 0) {
		printf("lun-reset: failed (%s)\n", iscsi_get_error(iscsi));
		return -1;
	}
	printf("lun-reset: good\n");
	return 0;
}

/* ---- the commands: one table, one parser for the command line and standard input ---- */

struct pr_cmd;
typedef struct scsi_task *(*pr_send_fn)(const struct pr_cmd *cmd, const uint64_t *v);

struct pr_cmd {
	const char *name;
	const char *args;	/* one letter an argument (parse_arg) */
	int sa;			/* PR service action (pr_out_send, pr_in_send) */
	pr_send_fn send;	/* the command, retried on a unit attention; NULL: act */
	/* After GOOD, instead of "NAME: good": prints the answer. */
	void (*good)(const struct pr_cmd *cmd, const uint64_t *v, struct scsi_task *t, int *bad);
	int (*act)(const uint64_t *v);	/* no task of its own: 0 good */
};

/* PR OUT: the row's letters say which argument is the key (K), the service action key (S)
 * and the type (T). */
static struct scsi_task *pr_out_send(const struct pr_cmd *cmd, const uint64_t *v)
{
	uint64_t key = 0, sakey = 0;
	int type = 0;

	for (int i = 0; cmd->args[i]; i++) {
		if (cmd->args[i] == 'K')
			key = v[i];
		else if (cmd->args[i] == 'S')
			sakey = v[i];
		else
			type = (int)v[i];
	}
	return pr_out(cmd->sa, type, key, sakey);
}

static struct scsi_task *pr_in_send(const struct pr_cmd *cmd, const uint64_t *v)
{
	(void)v;
	return iscsi_persistent_reserve_in_sync(iscsi, lun, cmd->sa, 4096);
}

static void pr_in_good(const struct pr_cmd *cmd, const uint64_t *v, struct scsi_task *t,
		       int *bad)
{
	(void)v;
	(void)bad;
	printf("%s: good\n", cmd->name);
	print_in(cmd->sa, t);
}

static struct scsi_task *read_send(const struct pr_cmd *cmd, const uint64_t *v)
{
	(void)cmd;
	return rw(false, (uint32_t)v[0]);
}

static struct scsi_task *write_send(const struct pr_cmd *cmd, const uint64_t *v)
{
	(void)cmd;
	return rw(true, (uint32_t)v[0]);
}

static struct scsi_task *fill_send(const struct pr_cmd *cmd, const uint64_t *v)
{
	(void)cmd;
	return fill((uint32_t)v[0], (int)v[1]);
}

static void expect_good(const struct pr_cmd *cmd, const uint64_t *v, struct scsi_task *t,
			int *bad)
{
	(void)cmd;
	print_expect(t, (int)v[1], bad);
}

static struct scsi_task *caw_send(const struct pr_cmd *cmd, const uint64_t *v)
{
	(void)cmd;
	return caw(v[0], (int)v[1], (int)v[2]);
}

static struct scsi_task *capacity_send(const struct pr_cmd *cmd, const uint64_t *v)
{
	(void)cmd;
	(void)v;
	return iscsi_readcapacity16_sync(iscsi, lun);
}

static void capacity_good(const struct pr_cmd *cmd, const uint64_t *v, struct scsi_task *t,
			  int *bad)
{
	struct scsi_readcapacity16 *rc = scsi_datain_unmarshall(t);

	(void)cmd;
	(void)v;
	if (!rc) {
		printf("capacity: failed (cannot read the answer)\n");
		*bad = 1;
		return;
	}
	printf("capacity %" PRIu64 " %u\n", rc->returned_lba + 1, rc->block_length);
}

static struct scsi_task *reserve6_send(const struct pr_cmd *cmd, const uint64_t *v)
{
	(void)cmd;
	(void)v;
	return iscsi_reserve6_sync(iscsi, lun);
}

static struct scsi_task *release6_send(const struct pr_cmd *cmd, const uint64_t *v)
{
	(void)cmd;
	(void)v;
	return iscsi_release6_sync(iscsi, lun);
}

static int lun_act(const uint64_t *v)
{
	lun = (int)v[0];
	printf("lun: good\n");
	return 0;
}

static int lun_reset_act(const uint64_t *v)
{
	(void)v;
	return lun_reset();
}

#define PR_OUT(n, a, action)	{ .name = n, .args = a, .sa = action, .send = pr_out_send }
#define PR_IN(n, action)                                                                   \
	{ .name = n, .args = "", .sa = action, .send = pr_in_send, .good = pr_in_good }
static const struct pr_cmd pr_cmds[] = {
	PR_OUT("register", "S", SCSI_PERSISTENT_RESERVE_REGISTER_AND_IGNORE_EXISTING_KEY),
	PR_OUT("unregister", "K", SCSI_PERSISTENT_RESERVE_REGISTER),
	PR_OUT("reserve", "KT", SCSI_PERSISTENT_RESERVE_RESERVE),
	PR_OUT("release", "KT", SCSI_PERSISTENT_RESERVE_RELEASE),
	PR_OUT("clear", "K", SCSI_PERSISTENT_RESERVE_CLEAR),
	PR_OUT("preempt", "KST", SCSI_PERSISTENT_RESERVE_PREEMPT),
	PR_IN("read-keys", SCSI_PERSISTENT_RESERVE_READ_KEYS),
	PR_IN("read-reservation", SCSI_PERSISTENT_RESERVE_READ_RESERVATION),
	{ .name = "write", .args = "L", .send = write_send },
	{ .name = "read", .args = "L", .send = read_send },
	{ .name = "fill", .args = "LB", .send = fill_send },
	{ .name = "expect", .args = "LB", .send = read_send, .good = expect_good },
	{ .name = "caw", .args = "LBB", .send = caw_send },
	{ .name = "reserve6", .args = "", .send = reserve6_send },
	{ .name = "release6", .args = "", .send = release6_send },
	{ .name = "lun-reset", .args = "", .act = lun_reset_act },
	{ .name = "lun", .args = "N", .act = lun_act },
	{ .name = "capacity", .args = "", .send = capacity_send, .good = capacity_good },
};
#undef PR_OUT
#undef PR_IN

#define PR_MAX_ARGS 3

/* Runs the command w[0] with its arguments; returns how many words it took. An unknown
 * command or a missing or bad argument ends the run (usage, 2). */
static int run_one(int n, char **w, int *bad)
{
	const struct pr_cmd *cmd = NULL;
	uint64_t v[PR_MAX_ARGS];
	struct scsi_task *t = NULL;
	size_t nargs;

	for (size_t i = 0; i < sizeof(pr_cmds) / sizeof(pr_cmds[0]) && !cmd; i++)
		if (!strcmp(w[0], pr_cmds[i].name))
			cmd = &pr_cmds[i];
	if (!cmd) {
		fprintf(stderr, "pr: unknown command %s\n", w[0]);
		usage();
	}
	nargs = strlen(cmd->args);
	if ((size_t)n < nargs + 1)
		usage();
	for (size_t i = 0; i < nargs; i++)
		v[i] = parse_arg(cmd->args[i], w[1 + i]);
	if (cmd->act) {
		if (cmd->act(v))
			*bad = 1;
		return (int)nargs + 1;
	}
	/* A unit attention is not the answer: retried, at most 4 times. */
	for (int tries = 0; tries < 5; tries++) {
		if (t)
			scsi_free_scsi_task(t);
		t = cmd->send(cmd, v);
		if (!is_ua(t))
			break;
		if (show_ua)
			printf("ua %02x/%02x/%02x\n", t->sense.key, t->sense.ascq >> 8,
			       t->sense.ascq & 0xff);
	}
	if (t && t->status == SCSI_STATUS_GOOD && cmd->good)
		cmd->good(cmd, v, t, bad);
	else if (report(cmd->name, t))
		*bad = 1;
	if (t)
		scsi_free_scsi_task(t);
	return (int)nargs + 1;
}

/* The commands in n words, in order: the command line's, or one line of standard input's. */
static void run_words(int n, char **w, int *bad)
{
	for (int i = 0; i < n;)
		i += run_one(n - i, w + i, bad);
}

/* Commands from standard input, one line at a time (split into words as a shell would without
 * quotes), each line's answers ended by "end". */
static void run_stdin(int *bad)
{
	char line[512], *w[32], *save;
	int n;

	while (fgets(line, sizeof(line), stdin)) {
		n = 0;
		for (char *tok = strtok_r(line, " \t\r\n", &save); tok && n < 32;
		     tok = strtok_r(NULL, " \t\r\n", &save))
			w[n++] = tok;
		if (n == 1 && !strcmp(w[0], "quit"))
			break;
		run_words(n, w, bad);
		printf("end\n");
		fflush(stdout);
	}
}

int main(int argc, char **argv)
{
	const char *initiator = DEFAULT_INITIATOR;
	struct scsi_task *t;
	long isid = -1;
	int opt, bad = 0, i;

	/* libiscsi writes data segments with writev(2): a target that goes away mid-write must
	 * end in an error here, not kill the tool. */
	signal(SIGPIPE, SIG_IGN);
	while ((opt = getopt(argc, argv, "i:s:uh")) != -1) {
		switch (opt) {
		case 'u': show_ua = true; break;
		case 'i': initiator = optarg; break;
		case 's': isid = (long)parse_arg('N', optarg); break;
		default: usage();
		}
	}
	if (argc - optind < 2)
		usage();
	if (login(initiator, argv[optind], isid)) {
		if (iscsi)
			iscsi_destroy_context(iscsi);
		return 3;
	}
	for (i = 0; i < 5; i++) {
		t = iscsi_readcapacity10_sync(iscsi, lun, 0, 0);
		if (!is_ua(t))
			break;
		scsi_free_scsi_task(t);
		t = NULL;
	}
	if (t && t->status == SCSI_STATUS_GOOD) {
		struct scsi_readcapacity10 *rc = scsi_datain_unmarshall(t);

		if (rc && rc->block_size)
			block_size = rc->block_size;
	}
	if (t)
		scsi_free_scsi_task(t);
	if (argc - optind == 2 && !strcmp(argv[optind + 1], "-"))
		run_stdin(&bad);
	else
		run_words(argc - optind - 1, argv + optind + 1, &bad);
	fflush(stdout);
	iscsi_logout_sync(iscsi);
	iscsi_destroy_context(iscsi);
	return bad ? 1 : 0;
}
