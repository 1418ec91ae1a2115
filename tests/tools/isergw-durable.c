/*
 * isergw-durable: the client of the durability test (tests/integration/test_durability.sh).
 *
 *   isergw-durable write [-m fua|sync|plain|wsame] [-l LBA] [-n BLOCKS] [-g GEN] [-H] URL
 *   isergw-durable verify [-l LBA] [-n BLOCKS] [-g GEN] URL
 *   isergw-durable wce [-s 0|1] URL
 *   isergw-durable stress -j JOURNAL [-m mix|fua|plain] [-l LBA] [-n BLOCKS] [-s SEED]
 *                         [-c COUNT] URL
 *   isergw-durable scan [-l LBA] [-n BLOCKS] URL
 *
 * write: WRITE(16) of BLOCKS blocks at LBA, each block carrying its LBA and GEN and a fill
 * derived from both; -m fua sets FUA on every write, -m sync follows the writes with
 * SYNCHRONIZE CACHE(10), -m plain does neither; -m wsame zeroes the range with one WRITE
 * SAME(16) of a zero block (no UNMAP bit), whose generation is 0 (verify -g 0: zeroes). When the target has acknowledged everything it
 * prints "acked MODE lba LBA blocks N gen G" and flushes stdout. With -H it then holds the
 * session open (no logout, nothing more sent) until stdin closes or the connection drops, so
 * the test can kill the target right after the acknowledgement with nothing else said.
 * verify: reads the range back and compares; prints "verified ..." or each bad block.
 * wce: prints "wce 0" or "wce 1" from the caching mode page (MODE SENSE(6), current values);
 * with -s it first sets WCE with MODE SELECT(6), as a host that turns the cache off does.
 * stress: the writer of the VM rig's crash test (tests/vm/guest/suite-durable-crash.sh), one
 * command at a time until COUNT commands (-c; default: until a command fails or the machine
 * goes down): WRITE(16) of 1-32 blocks at a random place in the range, each command a new
 * generation (from -g, default 1); -m mix picks for each at random a write with FUA (3 in 8),
 * a plain one (4 in 8) or a plain one followed by SYNCHRONIZE CACHE(10) (1 in 8), -m fua only
 * writes with FUA, -m plain only plain writes; -s SEED seeds the choices. Every step is recorded
 * in JOURNAL, each line written with write(2) and fdatasync(2) before the next step, so a line
 * is never later than what it records:
 *   w GEN LBA BLOCKS F|P    before the WRITE(16) is sent (F: with FUA, P: without)
 *   a GEN                   after the target acknowledged it
 *   s GEN                   after an acknowledged SYNCHRONIZE CACHE(10) sent when GEN was the
 *                           last write acknowledged
 * scan: reads the range and prints one line per block, "LBA GEN" for a block whole as written
 * at generation GEN, "LBA z" for zeroes, "LBA x" for anything else (garbage).
 *
 * Exit status: 0 done / verified, 1 mismatch, 2 usage, 3 login failed, 4 a command failed.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

enum { EXIT_MISMATCH = 1, EXIT_USAGE = 2, EXIT_LOGIN = 3, EXIT_IO = 4 };

#define DUR_BLOCK 512
#define DUR_CHUNK 128	/* blocks per WRITE(16): 64 KiB */

static void usage(void)
{
	fprintf(stderr,
		"usage: isergw-durable write [-m fua|sync|plain|wsame] [-l LBA] [-n BLOCKS] [-g GEN] "
		"[-H] URL\n"
		"       isergw-durable verify [-l LBA] [-n BLOCKS] [-g GEN] URL\n"
		"       isergw-durable wce [-s 0|1] URL\n"
		"       isergw-durable stress -j JOURNAL [-m mix|fua|plain] [-l LBA] [-n BLOCKS] "
		"[-s SEED] [-c COUNT] URL\n"
		"       isergw-durable scan [-l LBA] [-n BLOCKS] URL\n");
}

/* The content of block lba at generation gen: a header naming both, then a fill of both. */
static void dur_fill(unsigned char *b, uint64_t lba, uint32_t gen)
{
	uint64_t x = lba * 0x9e3779b97f4a7c15ULL ^ ((uint64_t)gen << 32 | gen);

	memset(b, 0, DUR_BLOCK);
	if (!gen)
		return;		/* generation 0: what WRITE SAME of zeroes leaves */
	snprintf((char *)b, 48, "isergw-durable lba %" PRIu64 " gen %u", lba, gen);
	for (int i = 48; i < DUR_BLOCK; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		b[i] = (unsigned char)x;
	}
}

static int dur_task_ok(struct iscsi_context *iscsi, struct scsi_task *t, const char *what)
{
	if (t && t->status == SCSI_STATUS_GOOD)
		return 1;
	fprintf(stderr, "durable: %s failed: %s\n", what,
		t ? iscsi_get_error(iscsi) : iscsi_get_error(iscsi));
	if (t)
		scsi_free_scsi_task(t);
	return 0;
}

static struct iscsi_context *dur_login(const char *s, int *lun)
{
	struct iscsi_context *iscsi;
	struct iscsi_url *url;

	iscsi = iscsi_create_context("iqn.2026-11.org.isergw:durable");
	if (!iscsi) {
		fprintf(stderr, "durable: cannot create an iSCSI context\n");
		return NULL;
	}
	url = iscsi_parse_full_url(iscsi, s);
	if (!url) {
		fprintf(stderr, "durable: bad URL %s: %s\n", s, iscsi_get_error(iscsi));
		iscsi_destroy_context(iscsi);
		return NULL;
	}
	iscsi_set_targetname(iscsi, url->target);
	iscsi_set_session_type(iscsi, ISCSI_SESSION_NORMAL);
	iscsi_set_noautoreconnect(iscsi, 1);
	iscsi_set_timeout(iscsi, 30);
	iscsi_set_header_digest(iscsi, ISCSI_HEADER_DIGEST_NONE);
	if (iscsi_full_connect_sync(iscsi, url->portal, url->lun) != 0) {
		fprintf(stderr, "durable: login to %s %s failed: %s\n", url->portal, url->target,
			iscsi_get_error(iscsi));
		iscsi_destroy_url(url);
		iscsi_destroy_context(iscsi);
		return NULL;
	}
	*lun = url->lun;
	iscsi_destroy_url(url);
	return iscsi;
}

static int dur_write(struct iscsi_context *iscsi, int lun, const char *mode, uint64_t lba,
		     uint64_t n, uint32_t gen)
{
	int fua = !strcmp(mode, "fua");
	unsigned char *buf = malloc(DUR_CHUNK * DUR_BLOCK);
	struct scsi_task *t;

	if (!buf)
		return EXIT_IO;
	if (!strcmp(mode, "wsame")) {
		memset(buf, 0, DUR_BLOCK);
		gen = 0;
		t = iscsi_writesame16_sync(iscsi, lun, lba, buf, DUR_BLOCK, (uint32_t)n, 0, 0, 0, 0);
		free(buf);
		if (!dur_task_ok(iscsi, t, "WRITE SAME(16)"))
			return EXIT_IO;
		scsi_free_scsi_task(t);
		goto acked;
	}
	for (uint64_t done = 0; done < n;) {
		uint64_t c = n - done < DUR_CHUNK ? n - done : DUR_CHUNK;

		for (uint64_t i = 0; i < c; i++)
			dur_fill(buf + i * DUR_BLOCK, lba + done + i, gen);
		t = iscsi_write16_sync(iscsi, lun, lba + done, buf, (uint32_t)(c * DUR_BLOCK),
				       DUR_BLOCK, 0, 0, fua, 0, 0);
		if (!dur_task_ok(iscsi, t, "WRITE(16)")) {
			free(buf);
			return EXIT_IO;
		}
		scsi_free_scsi_task(t);
		done += c;
	}
	free(buf);
	if (!strcmp(mode, "sync")) {
		t = iscsi_synchronizecache10_sync(iscsi, lun, 0, 0, 0, 0);
		if (!dur_task_ok(iscsi, t, "SYNCHRONIZE CACHE(10)"))
			return EXIT_IO;
		scsi_free_scsi_task(t);
	}
acked:
	printf("acked %s lba %" PRIu64 " blocks %" PRIu64 " gen %u\n", mode, lba, n, gen);
	fflush(stdout);
	return 0;
}

/* -H: nothing more is sent; returns when stdin closes or the target drops the connection. */
static void dur_hold(struct iscsi_context *iscsi)
{
	for (;;) {
		struct pollfd p[2] = {
			{ .fd = 0, .events = POLLIN },
			{ .fd = iscsi_get_fd(iscsi), .events = POLLIN },
		};
		char c[64];

		if (poll(p, 2, -1) < 0)
			return;
		if (p[0].revents && read(0, c, sizeof(c)) <= 0)
			return;
		if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
			if (p[1].revents & (POLLHUP | POLLERR) || read(p[1].fd, c, sizeof(c)) <= 0)
				return;
		}
	}
}

/* Reads [lba, lba + n) back in chunks of DUR_CHUNK blocks and hands each block to fn with its
 * LBA: 0, or EXIT_IO when a READ(16) failed or came back short. */
static int dur_read_back(struct iscsi_context *iscsi, int lun, uint64_t lba, uint64_t n,
			 void (*fn)(const unsigned char *b, uint64_t lba, void *arg), void *arg)
{
	for (uint64_t done = 0; done < n;) {
		uint64_t c = n - done < DUR_CHUNK ? n - done : DUR_CHUNK;
		struct scsi_task *t = iscsi_read16_sync(iscsi, lun, lba + done,
							(uint32_t)(c * DUR_BLOCK), DUR_BLOCK, 0,
							0, 0, 0, 0);

		if (!dur_task_ok(iscsi, t, "READ(16)"))
			return EXIT_IO;
		if (t->datain.size < (int)(c * DUR_BLOCK)) {
			fprintf(stderr, "durable: READ(16) returned %d bytes\n", t->datain.size);
			scsi_free_scsi_task(t);
			return EXIT_IO;
		}
		for (uint64_t i = 0; i < c; i++)
			fn(t->datain.data + i * DUR_BLOCK, lba + done + i, arg);
		scsi_free_scsi_task(t);
		done += c;
	}
	return 0;
}

struct dur_check {
	uint32_t gen;
	uint64_t bad;
};

static void dur_check_block(const unsigned char *got, uint64_t lba, void *arg)
{
	struct dur_check *k = arg;
	unsigned char want[DUR_BLOCK];

	dur_fill(want, lba, k->gen);
	if (memcmp(got, want, DUR_BLOCK) && k->bad++ < 10)
		printf("mismatch lba %" PRIu64 ": got \"%.40s\"\n", lba,
		       got[0] ? (const char *)got : "(zeroes or binary)");
}

static int dur_verify(struct iscsi_context *iscsi, int lun, uint64_t lba, uint64_t n,
		      uint32_t gen)
{
	struct dur_check k = { .gen = gen };
	int rc = dur_read_back(iscsi, lun, lba, n, dur_check_block, &k);

	if (rc)
		return rc;
	if (k.bad) {
		printf("lost %" PRIu64 " of %" PRIu64 " blocks at lba %" PRIu64 " gen %u\n", k.bad,
		       n, lba, gen);
		return EXIT_MISMATCH;
	}
	printf("verified lba %" PRIu64 " blocks %" PRIu64 " gen %u\n", lba, n, gen);
	return 0;
}

/* One journal line, on its way out of this machine (a 9p share in the VM rig) before the
 * caller goes on: write(2) of the whole line, then fdatasync(2). */
static int dur_journal(int fd, const char *fmt, ...)
{
	char line[96];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n <= 0 || n >= (int)sizeof(line) || write(fd, line, (size_t)n) != n ||
	    fdatasync(fd) < 0) {
		perror("durable: journal");
		return -1;
	}
	return 0;
}

static uint64_t dur_rand(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static int dur_stress(struct iscsi_context *iscsi, int lun, const char *journal, char mode,
		      uint64_t lba, uint64_t n, uint32_t gen, uint64_t seed, uint64_t count)
{
	unsigned char *buf = malloc(32 * DUR_BLOCK);
	uint64_t x = seed * 0x9e3779b97f4a7c15ULL | 1, done = 0, fuas = 0, syncs = 0;
	struct scsi_task *t;
	int fd, rc = 0;

	fd = open(journal, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0 || !buf) {
		perror("durable: journal open");
		free(buf);
		if (fd >= 0)
			close(fd);
		return EXIT_USAGE;
	}
	for (; !count || done < count; done++, gen++) {
		uint64_t c = 1 + dur_rand(&x) % (n < 32 ? n : 32);
		uint64_t at = lba + dur_rand(&x) % (n - c + 1);
		uint64_t r = dur_rand(&x) % 8;
		/* 0 FUA, 1 plain, 2 plain + sync */
		int how = mode == 'f' ? 0 : mode == 'p' ? 1 : r < 3 ? 0 : r < 7 ? 1 : 2;

		for (uint64_t i = 0; i < c; i++)
			dur_fill(buf + i * DUR_BLOCK, at + i, gen);
		if (dur_journal(fd, "w %u %" PRIu64 " %" PRIu64 " %c\n", gen, at, c,
				how == 0 ? 'F' : 'P') < 0) {
			rc = EXIT_IO;
			break;
		}
		t = iscsi_write16_sync(iscsi, lun, at, buf, (uint32_t)(c * DUR_BLOCK), DUR_BLOCK, 0,
				       0, how == 0, 0, 0);
		if (!dur_task_ok(iscsi, t, "WRITE(16)")) {
			rc = EXIT_IO;
			break;
		}
		scsi_free_scsi_task(t);
		if (dur_journal(fd, "a %u\n", gen) < 0) {
			rc = EXIT_IO;
			break;
		}
		fuas += how == 0;
		if (how != 2)
			continue;
		t = iscsi_synchronizecache10_sync(iscsi, lun, 0, 0, 0, 0);
		if (!dur_task_ok(iscsi, t, "SYNCHRONIZE CACHE(10)")) {
			rc = EXIT_IO;
			break;
		}
		scsi_free_scsi_task(t);
		if (dur_journal(fd, "s %u\n", gen) < 0) {
			rc = EXIT_IO;
			break;
		}
		syncs++;
	}
	printf("stress: %" PRIu64 " writes acknowledged (%" PRIu64 " with FUA), %" PRIu64
	       " SYNCHRONIZE CACHE\n", done, fuas, syncs);
	close(fd);
	free(buf);
	return rc;
}

/* What a block holds: its generation when whole as dur_fill wrote it, 0 for zeroes, -1 else. */
static int64_t dur_recognise(const unsigned char *b, uint64_t lba)
{
	unsigned char want[DUR_BLOCK];
	unsigned long long l;
	unsigned int g;
	int zero = 1;

	for (int i = 0; i < DUR_BLOCK && zero; i++)
		zero = !b[i];
	if (zero)
		return 0;
	if (memchr(b, 0, 48) == NULL ||
	    sscanf((const char *)b, "isergw-durable lba %llu gen %u", &l, &g) != 2 || l != lba ||
	    !g)
		return -1;
	dur_fill(want, lba, g);
	return memcmp(b, want, DUR_BLOCK) ? -1 : (int64_t)g;
}

static void dur_scan_block(const unsigned char *b, uint64_t lba, void *arg)
{
	int64_t g = dur_recognise(b, lba);

	(void)arg;
	if (g > 0)
		printf("%" PRIu64 " %" PRId64 "\n", lba, g);
	else
		printf("%" PRIu64 " %c\n", lba, g ? 'x' : 'z');
}

static int dur_scan(struct iscsi_context *iscsi, int lun, uint64_t lba, uint64_t n)
{
	int rc = dur_read_back(iscsi, lun, lba, n, dur_scan_block, NULL);

	if (rc)
		return rc;
	return fflush(stdout) ? EXIT_IO : 0;
}

static int dur_wce(struct iscsi_context *iscsi, int lun, int set)
{
	struct scsi_task *t = iscsi_modesense6_sync(iscsi, lun, 1, SCSI_MODESENSE_PC_CURRENT,
						    SCSI_MODEPAGE_CACHING, 0, 255);
	struct scsi_mode_sense *ms;
	struct scsi_mode_page *pg;

	if (!dur_task_ok(iscsi, t, "MODE SENSE(6) caching page"))
		return EXIT_IO;
	ms = scsi_datain_unmarshall(t);
	pg = ms ? scsi_modesense_get_page(ms, SCSI_MODEPAGE_CACHING, 0) : NULL;
	if (!pg) {
		fprintf(stderr, "durable: no caching mode page in the reply\n");
		scsi_free_scsi_task(t);
		return EXIT_IO;
	}
	if (set >= 0) {
		/* MODE SELECT(6) of the current page with WCE changed, as a host turns it off. */
		struct scsi_task *st;

		pg->ps = 0;
		pg->caching.wce = set;
		st = iscsi_modeselect6_sync(iscsi, lun, 1, 0, pg);
		scsi_free_scsi_task(t);
		if (!dur_task_ok(iscsi, st, "MODE SELECT(6) caching page"))
			return EXIT_IO;
		scsi_free_scsi_task(st);
		return dur_wce(iscsi, lun, -1);
	}
	printf("wce %d\n", pg->caching.wce ? 1 : 0);
	scsi_free_scsi_task(t);
	return 0;
}

int main(int argc, char **argv)
{
	const char *cmd, *mode = NULL, *journal = NULL;
	uint64_t lba = 0, n = 64, seed = 1, count = 0;
	uint32_t gen = 1;
	int hold = 0, opt, lun = 0, rc, set = -1;
	struct iscsi_context *iscsi;

	/* A target killed or reset mid-command must come back as an error (the tests kill
	 * targets on purpose): libiscsi sends data segments with writev(2), which raises SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);
	if (argc < 2) {
		usage();
		return EXIT_USAGE;
	}
	cmd = argv[1];
	optind = 2;
	while ((opt = getopt(argc, argv, "m:l:n:g:Hs:j:c:")) != -1) {
		switch (opt) {
		case 'm': mode = optarg; break;
		case 'l': lba = strtoull(optarg, NULL, 0); break;
		case 'n': n = strtoull(optarg, NULL, 0); break;
		case 'g': gen = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'H': hold = 1; break;
		case 's':
			set = atoi(optarg) ? 1 : 0;
			seed = strtoull(optarg, NULL, 0);
			break;
		case 'j': journal = optarg; break;
		case 'c': count = strtoull(optarg, NULL, 0); break;
		default: usage(); return EXIT_USAGE;
		}
	}
	if (!strcmp(cmd, "stress")) {
		if (!mode)
			mode = "mix";
		if (!journal ||
		    (strcmp(mode, "mix") && strcmp(mode, "fua") && strcmp(mode, "plain"))) {
			usage();
			return EXIT_USAGE;
		}
	} else if (!mode) {
		mode = "fua";
	}
	if (optind != argc - 1 || !n || (strcmp(cmd, "write") && strcmp(cmd, "verify") &&
					 strcmp(cmd, "wce") && strcmp(cmd, "stress") &&
					 strcmp(cmd, "scan")) ||
	    (strcmp(cmd, "stress") && strcmp(mode, "fua") && strcmp(mode, "sync") &&
	     strcmp(mode, "plain") && strcmp(mode, "wsame"))) {
		usage();
		return EXIT_USAGE;
	}
	iscsi = dur_login(argv[optind], &lun);
	if (!iscsi)
		return EXIT_LOGIN;
	if (!strcmp(cmd, "write")) {
		rc = dur_write(iscsi, lun, mode, lba, n, gen);
		if (rc == 0 && hold) {
			/* Killed targets drop the connection: no logout to wait for. */
			dur_hold(iscsi);
			iscsi_destroy_context(iscsi);
			return 0;
		}
	} else if (!strcmp(cmd, "verify")) {
		rc = dur_verify(iscsi, lun, lba, n, gen);
	} else if (!strcmp(cmd, "stress")) {
		rc = dur_stress(iscsi, lun, journal, mode[0], lba, n, gen ? gen : 1,
				seed, count);
	} else if (!strcmp(cmd, "scan")) {
		rc = dur_scan(iscsi, lun, lba, n);
	} else {
		rc = dur_wce(iscsi, lun, set);
	}
	iscsi_logout_sync(iscsi);
	iscsi_destroy_context(iscsi);
	return rc;
}
