/*
 * isergw-verify: a data-integrity client for iSCSI targets, one command at a time, on libiscsi's
 * async API and its own wait (tool_sync.h: libiscsi 1.19's synchronous calls fail any iSER command
 * without a completion within 1 s).
 *
 * It writes seeded, position-dependent patterns at random offsets and sizes, reads each write
 * back at once, reads random ranges across earlier writes, and finally reads the whole span it
 * used. Every block it writes carries its LBA and a generation number in its first 16 bytes, so a
 * mismatch says which data came back instead (another LBA's, an older write's, or garbage), which
 * is what a target's author needs to find the bug.
 *
 * Exit status: 0 all data verified, 1 data mismatch, 2 usage, 3 connect/login failed,
 * 4 a SCSI command or the connection failed.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "tool_sync.h"

enum {
	EXIT_MISMATCH = 1,
	EXIT_USAGE = 2,
	EXIT_LOGIN = 3,
	EXIT_IO = 4,
};

#define VERIFY_MAX_REPORTS 10

struct verify {
	struct iscsi_context *iscsi;
	struct tool_sync ts;	/* waits for each command; the slowest one */
	int lun;
	uint32_t block_size;
	uint64_t span_blocks;	/* LBAs [0, span_blocks) are exercised */
	uint32_t *gen;		/* per block: generation of its last write, 0 = never written */
	uint32_t next_gen;
	uint64_t seed;
	uint32_t min_blocks;
	uint32_t max_blocks;
	unsigned char *wbuf;
	int quiet;
	int replay;		/* -V: rebuild the map of a previous run, write nothing */
	uint64_t rng_cmd;	/* command choices; kept apart so -V replays the same layout */
	/* counters */
	uint64_t writes, reads, bytes_written, bytes_read, blocks_compared;
	unsigned int mismatches;
	uint64_t rng;
};

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Layout (sizes, offsets): the same for a seed whether writing or replaying with -V. */
static uint64_t rnd(struct verify *v, uint64_t n)
{
	return n ? splitmix64(&v->rng) % n : 0;
}

/* Command choices (READ10 or READ16, FUA): free to differ between a run and its replay. */
static uint64_t rnd_cmd(struct verify *v, uint64_t n)
{
	return n ? splitmix64(&v->rng_cmd) % n : 0;
}

/* The content of one block: [0] its LBA, [1] generation and seed, then a keyed stream. */
static void fill_block(const struct verify *v, unsigned char *p, uint64_t lba, uint32_t gen)
{
	uint64_t st = v->seed * 0xd1342543de82ef95ULL ^ lba * 0x2545f4914f6cdd1dULL ^
		      (uint64_t)gen << 40;
	uint64_t w;
	uint32_t i;

	w = lba;
	memcpy(p, &w, 8);
	w = (uint64_t)gen << 32 | (uint32_t)v->seed;
	memcpy(p + 8, &w, 8);
	for (i = 16; i + 8 <= v->block_size; i += 8) {
		w = splitmix64(&st);
		memcpy(p + i, &w, 8);
	}
}

static void report_mismatch(struct verify *v, const char *what, uint64_t lba, uint32_t gen,
			    const unsigned char *got, const unsigned char *want)
{
	uint64_t glba, ggen;
	uint32_t off;

	v->mismatches++;
	if (v->mismatches > VERIFY_MAX_REPORTS)
		return;
	for (off = 0; off < v->block_size && got[off] == want[off]; off++)
		;
	memcpy(&glba, got, 8);
	memcpy(&ggen, got + 8, 8);
	fprintf(stderr,
		"verify: MISMATCH (%s) at LBA %" PRIu64 " byte %u: expected generation %u; "
		"block holds LBA %" PRIu64 " generation %u seed %u%s\n",
		what, lba, off, gen, glba, (uint32_t)(ggen >> 32), (uint32_t)ggen,
		(uint32_t)ggen == (uint32_t)v->seed ? "" : " (not our header: garbage or zeroes)");
	if (v->mismatches == VERIFY_MAX_REPORTS)
		fprintf(stderr, "verify: further mismatches are counted, not shown\n");
}

/* Compares nblocks read at lba against what the generation map says they must hold. */
static void compare(struct verify *v, const char *what, uint64_t lba, uint32_t nblocks,
		    const unsigned char *data)
{
	unsigned char *want = v->wbuf; /* free between a write and its read-back */
	uint32_t i;

	for (i = 0; i < nblocks; i++) {
		uint32_t gen = v->gen[lba + i];
		const unsigned char *got = data + (size_t)i * v->block_size;

		if (gen == 0)
			continue;
		fill_block(v, want, lba + i, gen);
		v->blocks_compared++;
		if (memcmp(got, want, v->block_size) != 0)
			report_mismatch(v, what, lba + i, gen, got, want);
	}
}

static int task_failed(struct verify *v, struct scsi_task *task, const char *op, uint64_t lba,
		       uint32_t nblocks)
{
	if (task == NULL) {
		fprintf(stderr, "verify: %s LBA %" PRIu64 " x %u failed: %s\n", op, lba, nblocks,
			tool_sync_error(&v->ts));
		return 1;
	}
	if (task->status != SCSI_STATUS_GOOD) {
		fprintf(stderr,
			"verify: %s LBA %" PRIu64 " x %u: status 0x%02x sense %s(0x%x) ascq 0x%04x: %s\n",
			op, lba, nblocks, task->status, scsi_sense_key_str(task->sense.key),
			task->sense.key, task->sense.ascq, tool_sync_error(&v->ts));
		scsi_free_scsi_task(task);
		return 1;
	}
	return 0;
}

/* With -A a unit attention is news, not an answer: retried (at most 4 times), as a host would,
 * with one line saying what it was ("2a/09": the capacity changed). Without -A it fails the run
 * like any other check condition, so that a suite sees every one the target sends. */
static int retry_uas;

static bool retry_ua(struct scsi_task **task, int *tries)
{
	struct scsi_task *t = *task;

	if (!retry_uas || !t || t->status != SCSI_STATUS_CHECK_CONDITION ||
	    t->sense.key != SCSI_SENSE_UNIT_ATTENTION || ++*tries > 4)
		return false;
	printf("verify: unit attention %02x/%02x/%02x, retried\n", t->sense.key,
	       t->sense.ascq >> 8, t->sense.ascq & 0xff);
	scsi_free_scsi_task(t);
	*task = NULL;
	return true;
}

/* READ(10) or READ(16) at random (when the LBA fits both), then compare. */
static int do_read(struct verify *v, const char *what, uint64_t lba, uint32_t nblocks)
{
	uint32_t len = nblocks * v->block_size;
	struct scsi_task *task;
	int use10 = lba + nblocks <= UINT32_MAX && nblocks <= 0xffff && rnd_cmd(v, 2);

	int tries = 0;

	do {
		if (use10)
			task = tool_sync_task(&v->ts, iscsi_read10_task(v->iscsi, v->lun,
						(uint32_t)lba, len, (int)v->block_size, 0, 0, 0,
						0, 0, tool_sync_cb, tool_sync_arm(&v->ts)),
					      "READ(10)");
		else
			task = tool_sync_task(&v->ts, iscsi_read16_task(v->iscsi, v->lun, lba,
						len, (int)v->block_size, 0, 0, 0, 0, 0,
						tool_sync_cb, tool_sync_arm(&v->ts)),
					      "READ(16)");
	} while (retry_ua(&task, &tries));
	if (task_failed(v, task, use10 ? "READ(10)" : "READ(16)", lba, nblocks))
		return -EIO;
	if (task->datain.size != (int)len) {
		fprintf(stderr, "verify: %s LBA %" PRIu64 " x %u returned %d bytes, expected %u\n",
			use10 ? "READ(10)" : "READ(16)", lba, nblocks, task->datain.size, len);
		scsi_free_scsi_task(task);
		return -EIO;
	}
	v->reads++;
	v->bytes_read += len;
	compare(v, what, lba, nblocks, task->datain.data);
	scsi_free_scsi_task(task);
	return 0;
}

static int do_write(struct verify *v, uint64_t lba, uint32_t nblocks)
{
	uint32_t len = nblocks * v->block_size;
	uint32_t gen = v->next_gen++;
	struct scsi_task *task;
	int use10 = lba + nblocks <= UINT32_MAX && nblocks <= 0xffff && rnd_cmd(v, 2);
	int fua = rnd_cmd(v, 4) == 0;
	int tries = 0;
	uint32_t i;

	if (v->replay) {
		for (i = 0; i < nblocks; i++)
			v->gen[lba + i] = gen;
		return 0;
	}
	for (i = 0; i < nblocks; i++)
		fill_block(v, v->wbuf + (size_t)i * v->block_size, lba + i, gen);
	do {
		if (use10)
			task = tool_sync_task(&v->ts, iscsi_write10_task(v->iscsi, v->lun,
						(uint32_t)lba, v->wbuf, len, (int)v->block_size,
						0, 0, fua, 0, 0, tool_sync_cb,
						tool_sync_arm(&v->ts)), "WRITE(10)");
		else
			task = tool_sync_task(&v->ts, iscsi_write16_task(v->iscsi, v->lun, lba,
						v->wbuf, len, (int)v->block_size, 0, 0, fua, 0,
						0, tool_sync_cb, tool_sync_arm(&v->ts)),
					      "WRITE(16)");
	} while (retry_ua(&task, &tries));
	if (task_failed(v, task, use10 ? "WRITE(10)" : "WRITE(16)", lba, nblocks))
		return -EIO;
	scsi_free_scsi_task(task);
	for (i = 0; i < nblocks; i++)
		v->gen[lba + i] = gen;
	v->writes++;
	v->bytes_written += len;
	return 0;
}

/* Sizes are log-uniform between min and max so small and large I/Os are equally common. */
static uint32_t pick_blocks(struct verify *v)
{
	double lo = log((double)v->min_blocks), hi = log((double)v->max_blocks);
	double u = (double)rnd(v, 1u << 30) / (double)(1u << 30);
	uint32_t n = (uint32_t)exp(lo + (hi - lo) * u);

	if (rnd(v, 4) == 0) /* exact powers of two hit the target's buffer boundaries */
		n = 1u << rnd(v, 31 - (uint64_t)__builtin_clz(v->max_blocks) + 1);
	if (n < v->min_blocks)
		n = v->min_blocks;
	if (n > v->max_blocks)
		n = v->max_blocks;
	if (n > v->span_blocks)
		n = (uint32_t)v->span_blocks;
	return n;
}

static int read_capacity(struct verify *v, uint64_t *blocks)
{
	struct scsi_task *task = tool_sync_task(&v->ts, iscsi_readcapacity16_task(v->iscsi,
				v->lun, tool_sync_cb, tool_sync_arm(&v->ts)), "READ CAPACITY(16)");
	struct scsi_readcapacity16 *rc16;

	if (task_failed(v, task, "READ CAPACITY(16)", 0, 0))
		return -EIO;
	rc16 = scsi_datain_unmarshall(task);
	if (rc16 == NULL) {
		fprintf(stderr, "verify: cannot parse READ CAPACITY(16) data\n");
		scsi_free_scsi_task(task);
		return -EIO;
	}
	v->block_size = rc16->block_length;
	*blocks = rc16->returned_lba + 1;
	scsi_free_scsi_task(task);
	if (v->block_size < 512 || v->block_size > 65536 || v->block_size % 16) {
		fprintf(stderr, "verify: unusable block size %u\n", v->block_size);
		return -EIO;
	}
	return 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: isergw-verify [options] iscsi://HOST[:PORT]/TARGET-IQN/LUN\n"
		"  -i NAME      initiator name [iqn.2026-11.org.isergw:verify]\n"
		"  -s SEED      pattern and offset seed [1]\n"
		"  -n COUNT     number of writes [100]\n"
		"  -m BYTES     largest I/O [4194304]; -M BYTES smallest I/O [one block]\n"
		"  -S BYTES     span of the LUN exercised from LBA 0 [256 MiB, at most the LUN]\n"
		"  -u USER -p SECRET          CHAP (the target authenticates us)\n"
		"  -U USER -P SECRET          mutual CHAP (we authenticate the target)\n"
		"  -d           offer only HeaderDigest=CRC32C (libiscsi 1.19 has no DataDigest)\n"
		"  -N           skip the final read of the whole span\n"
		"  -V           replay: rebuild what a run with the same -s -n -m -M -S wrote,\n"
		"               write nothing, read the whole span and compare (persistence)\n"
		"  -A           retry a command that gets a unit attention (at most 4 times), saying so\n"
		"  -K KEY       register reservation key KEY (hex) first, so that a Write Exclusive -\n"
		"               Registrants Only reservation of another host lets us write\n"
		"  -t SECONDS   per-command timeout [30]\n"
		"  -q           quiet: only the summary and errors\n"
		"exit: 0 verified, 1 mismatch, 2 usage, 3 login failed, 4 command failed\n");
}

/* PERSISTENT RESERVE OUT, REGISTER AND IGNORE EXISTING KEY, from this I_T nexus. */
static int register_key(struct verify *v, uint64_t key)
{
	struct scsi_persistent_reserve_out_basic b = { .service_action_reservation_key = key };
	struct scsi_task *task;
	int tries = 0;

	do
		task = tool_sync_task(&v->ts, iscsi_persistent_reserve_out_task(v->iscsi, v->lun,
					SCSI_PERSISTENT_RESERVE_REGISTER_AND_IGNORE_EXISTING_KEY,
					SCSI_PERSISTENT_RESERVE_SCOPE_LU, 0, &b, tool_sync_cb,
					tool_sync_arm(&v->ts)), "PERSISTENT RESERVE OUT");
	while (retry_ua(&task, &tries));
	if (task_failed(v, task, "PERSISTENT RESERVE OUT", 0, 0))
		return -EIO;
	scsi_free_scsi_task(task);
	if (!v->quiet)
		printf("verify: registered key 0x%" PRIx64 "\n", key);
	return 0;
}

static uint64_t parse_bytes(const char *s)
{
	char *end;
	uint64_t n = strtoull(s, &end, 0);

	switch (*end) {
	case 'k': case 'K': n <<= 10; break;
	case 'm': case 'M': n <<= 20; break;
	case 'g': case 'G': n <<= 30; break;
	case '\0': break;
	default: return 0;
	}
	return n;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	const char *initiator = "iqn.2026-11.org.isergw:verify";
	const char *user = NULL, *secret = NULL, *tuser = NULL, *tsecret = NULL;
	uint64_t count = 100, max_bytes = 4u << 20, min_bytes = 0, span = 0, cap_blocks, i;
	int digest = 0, final_pass = 1, timeout_s = 30, opt, rc = 0;
	uint64_t pr_key = 0;
	struct verify v = { .seed = 1, .next_gen = 1 };
	struct iscsi_url *url = NULL;
	double t0;

	/* A target killed or reset mid-command must come back as an error (the tests kill
	 * targets on purpose): libiscsi sends data segments with writev(2), which raises SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);
	/* Line by line into a file too: a suite acts on "first write" while the run goes on. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((opt = getopt(argc, argv, "i:s:n:m:M:S:u:p:U:P:dNVAK:t:qh")) != -1) {
		switch (opt) {
		case 'i': initiator = optarg; break;
		case 's': v.seed = strtoull(optarg, NULL, 0); break;
		case 'n': count = strtoull(optarg, NULL, 0); break;
		case 'm': max_bytes = parse_bytes(optarg); break;
		case 'M': min_bytes = parse_bytes(optarg); break;
		case 'S': span = parse_bytes(optarg); break;
		case 'u': user = optarg; break;
		case 'p': secret = optarg; break;
		case 'U': tuser = optarg; break;
		case 'P': tsecret = optarg; break;
		case 'd': digest = 1; break;
		case 'N': final_pass = 0; break;
		case 'V': v.replay = 1; break;
		case 'A': retry_uas = 1; break;
		case 'K': pr_key = strtoull(optarg, NULL, 16); break;
		case 't': timeout_s = atoi(optarg); break;
		case 'q': v.quiet = 1; break;
		default: usage(); return EXIT_USAGE;
		}
	}
	if (optind != argc - 1 || max_bytes == 0 || (user && !secret) || (tuser && !tsecret) ||
	    (tuser && !user)) {
		usage();
		return EXIT_USAGE;
	}
	v.rng = v.seed ^ 0x5eed5eed5eedULL;
	v.rng_cmd = v.seed ^ 0xc0ffee5eedULL;
	if (v.replay)
		final_pass = 1;

	v.iscsi = iscsi_create_context(initiator);
	if (v.iscsi == NULL) {
		fprintf(stderr, "verify: cannot create an iSCSI context\n");
		return EXIT_LOGIN;
	}
	url = iscsi_parse_full_url(v.iscsi, argv[optind]);
	if (url == NULL) {
		fprintf(stderr, "verify: bad URL %s: %s\n", argv[optind], iscsi_get_error(v.iscsi));
		rc = EXIT_USAGE;
		goto out;
	}
	v.lun = url->lun;
	iscsi_set_targetname(v.iscsi, url->target);
	iscsi_set_session_type(v.iscsi, ISCSI_SESSION_NORMAL);
	/* A dropped connection is a failure to report, not something to paper over. */
	iscsi_set_noautoreconnect(v.iscsi, 1);
	iscsi_set_timeout(v.iscsi, timeout_s);
	v.ts.iscsi = v.iscsi;
	v.ts.name = "verify";
	v.ts.iser = url->transport == ISER_TRANSPORT;
	v.ts.limit_s = timeout_s;
	iscsi_set_header_digest(v.iscsi, digest ? ISCSI_HEADER_DIGEST_CRC32C :
				ISCSI_HEADER_DIGEST_NONE);
	if (user && iscsi_set_initiator_username_pwd(v.iscsi, user, secret) != 0) {
		fprintf(stderr, "verify: CHAP: %s\n", tool_sync_error(&v.ts));
		rc = EXIT_USAGE;
		goto out;
	}
	if (tuser && iscsi_set_target_username_pwd(v.iscsi, tuser, tsecret) != 0) {
		fprintf(stderr, "verify: mutual CHAP: %s\n", tool_sync_error(&v.ts));
		rc = EXIT_USAGE;
		goto out;
	}
	if (tool_sync_connect(&v.ts, url->portal, url->lun) != 0) {
		fprintf(stderr, "verify: login to %s %s failed: %s\n", url->portal, url->target,
			tool_sync_error(&v.ts));
		rc = EXIT_LOGIN;
		goto out;
	}
	if (!v.quiet)
		printf("verify: logged in to %s %s LUN %d%s%s\n", url->portal, url->target,
		       url->lun, user ? (tuser ? " (mutual CHAP)" : " (CHAP)") : "",
		       digest ? " (HeaderDigest=CRC32C)" : "");

	if (read_capacity(&v, &cap_blocks) != 0 || (pr_key && register_key(&v, pr_key))) {
		rc = EXIT_IO;
		goto logout;
	}
	if (span == 0)
		span = 256ull << 20;
	v.span_blocks = span / v.block_size;
	if (v.span_blocks > cap_blocks)
		v.span_blocks = cap_blocks;
	v.max_blocks = (uint32_t)(max_bytes / v.block_size);
	v.min_blocks = min_bytes ? (uint32_t)(min_bytes / v.block_size) : 1;
	if (v.max_blocks == 0 || v.min_blocks == 0 || v.min_blocks > v.max_blocks ||
	    v.span_blocks == 0) {
		fprintf(stderr, "verify: sizes must be at least one block (%u bytes)\n",
			v.block_size);
		rc = EXIT_USAGE;
		goto logout;
	}
	v.gen = calloc(v.span_blocks, sizeof(*v.gen));
	v.wbuf = malloc((size_t)v.max_blocks * v.block_size);
	if (v.gen == NULL || v.wbuf == NULL) {
		fprintf(stderr, "verify: out of memory\n");
		rc = EXIT_IO;
		goto logout;
	}
	if (!v.quiet)
		printf("verify: %" PRIu64 " blocks of %u bytes, span %" PRIu64
		       " blocks, I/O %u..%u blocks, seed %" PRIu64 ", %" PRIu64 " writes\n",
		       cap_blocks, v.block_size, v.span_blocks, v.min_blocks, v.max_blocks, v.seed,
		       count);

	t0 = now();
	for (i = 0; i < count; i++) {
		uint32_t n = pick_blocks(&v);
		uint64_t lba = rnd(&v, v.span_blocks - n + 1);

		if (i == 0 && !v.quiet)
			printf("verify: first write at LBA %" PRIu64 " x %u\n", lba, n);
		if (do_write(&v, lba, n) != 0 ||
		    (!v.replay && do_read(&v, "read-back", lba, n) != 0)) {
			rc = EXIT_IO;
			goto logout;
		}
		/* A random range across earlier writes: catches writes landing in the wrong place. */
		n = pick_blocks(&v);
		lba = rnd(&v, v.span_blocks - n + 1);
		if (!v.replay && do_read(&v, "across earlier writes", lba, n) != 0) {
			rc = EXIT_IO;
			goto logout;
		}
	}
	if (final_pass) {
		for (i = 0; i < v.span_blocks; i += v.max_blocks) {
			uint64_t n = v.span_blocks - i;

			if (n > v.max_blocks)
				n = v.max_blocks;
			if (do_read(&v, "final pass", i, (uint32_t)n) != 0) {
				rc = EXIT_IO;
				goto logout;
			}
		}
	}
	printf("verify: %" PRIu64 " writes (%.1f MiB), %" PRIu64 " reads (%.1f MiB), %" PRIu64
	       " blocks compared, %u mismatches, %.2f s; slowest command %.3f s, %" PRIu64
	       " of %" PRIu64 " took 1 s or more\n",
	       v.writes, (double)v.bytes_written / 1048576.0, v.reads,
	       (double)v.bytes_read / 1048576.0, v.blocks_compared, v.mismatches, now() - t0,
	       v.ts.max_s, v.ts.over_1s, v.ts.waits);
	if (v.mismatches)
		rc = EXIT_MISMATCH;
	else if (v.blocks_compared == 0 && count > 0)
		rc = EXIT_MISMATCH; /* nothing was checked: do not claim success */

logout:
	tool_sync_logout(&v.ts);
out:
	if (url)
		iscsi_destroy_url(url);
	iscsi_destroy_context(v.iscsi);
	free(v.gen);
	free(v.wbuf);
	return rc;
}
