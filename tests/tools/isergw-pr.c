/*
 * isergw-pr: PERSISTENT RESERVE IN/OUT and plain I/O from one I_T nexus, on libiscsi's
 * synchronous API (libiscsi-bin has no PR tool, and sg_persist needs a kernel initiator).
 *
 *   isergw-pr [-i INITIATOR] [-s N] URL COMMAND [ARG...] [COMMAND [ARG...]]...
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
 *   lun-reset                 the task management function LOGICAL UNIT RESET on the LUN
 *   lun N                     the following commands go to LUN N (default: the URL's)
 * KEYs are hex (0x optional), BYTEs hex or decimal.
 *
 * With URL followed by "-" the commands come from standard input instead, one line at a time,
 * and the session stays logged in between lines; each line's answers are followed by a line
 * "end", so a script can drive several of these hosts at once (from different event loops of
 * one gateway) and wait for each answer. "quit" or end of input logs out. Each command prints one line, "COMMAND: good",
 * "COMMAND: reservation-conflict", "COMMAND: check-condition KEY/ASC/ASCQ" (hex, e.g.
 * 02/04/0a) or "COMMAND: failed (why)"; a unit attention is retried (at most 4 times).
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
static uint32_t block_size = 512;

static void usage(void)
{
	fprintf(stderr, "usage: isergw-pr [-i INITIATOR] [-s N] URL COMMAND [ARG...]...\n"
		"commands: register KEY, unregister KEY, reserve KEY TYPE, release KEY TYPE,\n"
		"          clear KEY, preempt KEY VICTIM TYPE, read-keys, read-reservation,\n"
		"          write LBA, read LBA, fill LBA BYTE, expect LBA BYTE, caw LBA CMP WR,\n"
		"          lun-reset, lun N; URL - reads the commands from standard input\n");
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

static uint64_t parse_key(const char *s)
{
	char *end;
	uint64_t v = strtoull(s, &end, 16);

	if (*end) {
		fprintf(stderr, "pr: %s is not a hex key\n", s);
		exit(2);
	}
	return v;
}

static int parse_int(const char *s)
{
	char *end;
	long v = strtol(s, &end, 0);

	if (*end || v < 0 || v > 0x7fffffff) {
		fprintf(stderr, "pr: %s is not a number\n", s);
		exit(2);
	}
	return (int)v;
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

static int parse_byte(const char *s)
{
	char *end;
	long v = strtol(s, &end, 0);

	if (*end || v < 0 || v > 0xff) {
		fprintf(stderr, "pr: %s is not a byte\n", s);
		exit(2);
	}
	return (int)v;
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

/* Runs argv[0] with its arguments; returns how many words it took (0: unknown command). */
static int run_one(int argc, char **argv, int *bad)
{
	const char *c = argv[0];
	struct scsi_task *t = NULL;
	int used = 1, sa = -1, tries, expect = -1;

#define NEED(n) do { if (argc < (n) + 1) usage(); } while (0)
	for (tries = 0; tries < 5; tries++) {
		if (!strcmp(c, "register")) {
			NEED(1);
			t = pr_out(SCSI_PERSISTENT_RESERVE_REGISTER_AND_IGNORE_EXISTING_KEY, 0, 0,
				   parse_key(argv[1]));
			used = 2;
		} else if (!strcmp(c, "unregister")) {
			NEED(1);
			t = pr_out(SCSI_PERSISTENT_RESERVE_REGISTER, 0, parse_key(argv[1]), 0);
			used = 2;
		} else if (!strcmp(c, "reserve") || !strcmp(c, "release")) {
			NEED(2);
			t = pr_out(c[2] == 's' ? SCSI_PERSISTENT_RESERVE_RESERVE :
				   SCSI_PERSISTENT_RESERVE_RELEASE, parse_int(argv[2]),
				   parse_key(argv[1]), 0);
			used = 3;
		} else if (!strcmp(c, "clear")) {
			NEED(1);
			t = pr_out(SCSI_PERSISTENT_RESERVE_CLEAR, 0, parse_key(argv[1]), 0);
			used = 2;
		} else if (!strcmp(c, "preempt")) {
			NEED(3);
			t = pr_out(SCSI_PERSISTENT_RESERVE_PREEMPT, parse_int(argv[3]),
				   parse_key(argv[1]), parse_key(argv[2]));
			used = 4;
		} else if (!strcmp(c, "read-keys") || !strcmp(c, "read-reservation")) {
			sa = c[5] == 'k' ? SCSI_PERSISTENT_RESERVE_READ_KEYS :
			     SCSI_PERSISTENT_RESERVE_READ_RESERVATION;
			t = iscsi_persistent_reserve_in_sync(iscsi, lun, sa, 4096);
			used = 1;
		} else if (!strcmp(c, "lun")) {
			NEED(1);
			lun = parse_int(argv[1]);
			printf("lun: good\n");
			return 2;
		} else if (!strcmp(c, "lun-reset")) {
			if (lun_reset())
				*bad = 1;
			return 1;
		} else if (!strcmp(c, "fill")) {
			NEED(2);
			t = fill((uint32_t)parse_int(argv[1]), parse_byte(argv[2]));
			used = 3;
		} else if (!strcmp(c, "expect")) {
			NEED(2);
			t = iscsi_read10_sync(iscsi, lun, (uint32_t)parse_int(argv[1]), block_size,
					      block_size, 0, 0, 0, 0, 0);
			expect = parse_byte(argv[2]);
			used = 3;
		} else if (!strcmp(c, "caw")) {
			NEED(3);
			t = caw((uint64_t)parse_int(argv[1]), parse_byte(argv[2]),
				parse_byte(argv[3]));
			used = 4;
		} else if (!strcmp(c, "write") || !strcmp(c, "read")) {
			NEED(1);
			t = rw(c[0] == 'w', (uint32_t)parse_int(argv[1]));
			used = 2;
		} else {
			fprintf(stderr, "pr: unknown command %s\n", c);
			usage();
		}
		if (!is_ua(t))
			break;
		scsi_free_scsi_task(t);
		t = NULL;
	}
#undef NEED
	if (expect >= 0 && t && t->status == SCSI_STATUS_GOOD)
		print_expect(t, expect, bad);
	else if (report(c, t))
		*bad = 1;
	else if (sa >= 0)
		print_in(sa, t);
	if (t)
		scsi_free_scsi_task(t);
	return used;
}

/* Commands from standard input, one line at a time, each line's answers ended by "end". */
static void run_stdin(int *bad)
{
	char line[512], *w[32], *save;
	int n, i;

	while (fgets(line, sizeof(line), stdin)) {
		n = 0;
		for (char *tok = strtok_r(line, " \t\r\n", &save); tok && n < 32;
		     tok = strtok_r(NULL, " \t\r\n", &save))
			w[n++] = tok;
		if (n == 1 && !strcmp(w[0], "quit"))
			break;
		for (i = 0; i < n;)
			i += run_one(n - i, w + i, bad);
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
	while ((opt = getopt(argc, argv, "i:s:h")) != -1) {
		switch (opt) {
		case 'i': initiator = optarg; break;
		case 's': isid = parse_int(optarg); break;
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
	for (i = optind + 1; i < argc && strcmp(argv[i], "-");)
		i += run_one(argc - i, argv + i, &bad);
	fflush(stdout);
	iscsi_logout_sync(iscsi);
	iscsi_destroy_context(iscsi);
	return bad ? 1 : 0;
}
