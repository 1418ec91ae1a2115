/*
 * isergw-bench: a small load generator for iSCSI targets on libiscsi's asynchronous API.
 *
 * It keeps QD READ(16) or WRITE(16) commands of one block size in flight, at random (aligned to
 * the block size) or sequential offsets, for a fixed time, and prints one line a script can
 * parse: IOPS, MiB/s and mean latency. iscsi-perf only reads (READ16, unaligned); this tool is
 * what measures writes and aligned reads for tests/bench/run.sh.
 *
 * TASK SET FULL and BUSY are retried, as a host's SCSI layer does, and counted (busy=N).
 *
 * Over iSER a poll that times out is not handed to libiscsi (its iSER transport fails on it,
 * tool_sync.h); login, READ CAPACITY and logout go through tool_sync.h for the same reason.
 *
 * Exit status: 0 no errors, 1 a command failed, 2 usage, 3 login failed, 4 connection lost.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "tool_sync.h"

struct bench;

struct slot {
	struct bench *b;
	unsigned char *buf;
	struct scsi_iovec iov;
	double t0;
};

struct bench {
	struct iscsi_context *iscsi;
	int lun;
	int write;
	int sequential;
	uint32_t block_size;
	uint32_t io_bytes;
	uint64_t span_ios;	/* number of io_bytes-sized slots in the span */
	uint64_t next_io;
	uint64_t rng;
	double end;
	int inflight;
	uint64_t ios, errors, busy;
	double lat_sum;
	/* Failover benches: the slowest I/O and the longest time without any completion. */
	double lat_max, gap_max, last_done;
	int reported;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t next_rand(struct bench *b)
{
	uint64_t x = b->rng;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	b->rng = x;
	return x;
}

static void complete_cb(struct iscsi_context *iscsi, int status, void *command_data, void *priv);

static int submit(struct slot *s)
{
	struct bench *b = s->b;
	uint64_t io, lba;
	struct scsi_task *task;

	if (b->sequential) {
		io = b->next_io++;
		if (b->next_io >= b->span_ios)
			b->next_io = 0;
	} else {
		io = next_rand(b) % b->span_ios;
	}
	lba = io * (b->io_bytes / b->block_size);
	s->iov.iov_base = s->buf;
	s->iov.iov_len = b->io_bytes;
	s->t0 = now();
	if (b->write)
		task = iscsi_write16_iov_task(b->iscsi, b->lun, lba, NULL, b->io_bytes,
					      (int)b->block_size, 0, 0, 0, 0, 0, complete_cb, s,
					      &s->iov, 1);
	else
		task = iscsi_read16_iov_task(b->iscsi, b->lun, lba, b->io_bytes,
					     (int)b->block_size, 0, 0, 0, 0, 0, complete_cb, s,
					     &s->iov, 1);
	if (task == NULL) {
		fprintf(stderr, "bench: cannot queue a command: %s\n", iscsi_get_error(b->iscsi));
		return -ENOMEM;
	}
	b->inflight++;
	return 0;
}

static void complete_cb(struct iscsi_context *iscsi, int status, void *command_data, void *priv)
{
	struct slot *s = priv;
	struct bench *b = s->b;
	struct scsi_task *task = command_data;
	double t = now();

	b->inflight--;
	if (status == SCSI_STATUS_TASK_SET_FULL || status == SCSI_STATUS_BUSY) {
		b->busy++;
	} else if (status != SCSI_STATUS_GOOD) {
		b->errors++;
		if (!b->reported++)
			fprintf(stderr, "bench: command failed: status 0x%02x sense %s ascq 0x%04x: %s\n",
				status, task ? scsi_sense_key_str(task->sense.key) : "-",
				task ? task->sense.ascq : 0, iscsi_get_error(iscsi));
	} else {
		b->ios++;
		b->lat_sum += t - s->t0;
		if (t - s->t0 > b->lat_max)
			b->lat_max = t - s->t0;
		if (b->last_done && t - b->last_done > b->gap_max)
			b->gap_max = t - b->last_done;
		b->last_done = t;
	}
	if (task)
		scsi_free_scsi_task(task);
	if (t < b->end && b->errors == 0)
		submit(s);
}

static uint64_t parse_bytes(const char *str)
{
	char *end;
	uint64_t n = strtoull(str, &end, 0);

	switch (*end) {
	case 'k': case 'K': n <<= 10; break;
	case 'm': case 'M': n <<= 20; break;
	case 'g': case 'G': n <<= 30; break;
	case '\0': break;
	default: return 0;
	}
	return n;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: isergw-bench [options] iscsi://HOST[:PORT]/TARGET-IQN/LUN\n"
		"  -q DEPTH     commands in flight [1]\n"
		"  -b BYTES     I/O size, a multiple of the block size [4096]\n"
		"  -w           WRITE(16) (default READ(16))\n"
		"  -s           sequential offsets (default random, aligned to the I/O size)\n"
		"  -t SECONDS   duration [10]\n"
		"  -S BYTES     span of the LUN used from LBA 0 [whole LUN]\n"
		"  -i NAME      initiator name [iqn.2026-11.org.isergw:bench]\n"
		"  -d           HeaderDigest=CRC32C\n"
		"prints: bench: OP PATTERN bs=N qd=N seconds=S ios=N iops=X mibps=Y lat_us=Z max_lat_us=M\n"
		"        max_gap_us=G errors=N busy=N (G: the longest time without a completion)\n");
}

int main(int argc, char **argv)
{
	const char *initiator = "iqn.2026-11.org.isergw:bench";
	struct bench b = { .rng = 0x9e3779b97f4a7c15ULL };
	uint64_t io_bytes = 4096, span = 0, blocks;
	int qd = 1, digest = 0, opt, i, rc = 0;
	double secs = 10, t0, t1;
	struct iscsi_url *url = NULL;
	struct tool_sync ts = { 0 };
	struct slot *slots = NULL;
	struct scsi_task *task;
	struct scsi_readcapacity16 *rc16;

	/* A target killed or reset mid-command must come back as an error (the tests kill
	 * targets on purpose): libiscsi sends data segments with writev(2), which raises SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);
	while ((opt = getopt(argc, argv, "q:b:wst:S:i:dh")) != -1) {
		switch (opt) {
		case 'q': qd = atoi(optarg); break;
		case 'b': io_bytes = parse_bytes(optarg); break;
		case 'w': b.write = 1; break;
		case 's': b.sequential = 1; break;
		case 't': secs = atof(optarg); break;
		case 'S': span = parse_bytes(optarg); break;
		case 'i': initiator = optarg; break;
		case 'd': digest = 1; break;
		default: usage(); return 2;
		}
	}
	if (optind != argc - 1 || qd < 1 || qd > 1024 || io_bytes == 0 || io_bytes > (16u << 20) ||
	    secs <= 0) {
		usage();
		return 2;
	}

	b.iscsi = iscsi_create_context(initiator);
	if (b.iscsi == NULL)
		return 3;
	url = iscsi_parse_full_url(b.iscsi, argv[optind]);
	if (url == NULL) {
		fprintf(stderr, "bench: bad URL: %s\n", iscsi_get_error(b.iscsi));
		rc = 2;
		goto out;
	}
	b.lun = url->lun;
	iscsi_set_targetname(b.iscsi, url->target);
	iscsi_set_session_type(b.iscsi, ISCSI_SESSION_NORMAL);
	iscsi_set_noautoreconnect(b.iscsi, 1);
	iscsi_set_header_digest(b.iscsi, digest ? ISCSI_HEADER_DIGEST_CRC32C :
				ISCSI_HEADER_DIGEST_NONE);
	ts.iscsi = b.iscsi;
	ts.name = "bench";
	ts.iser = url->transport == ISER_TRANSPORT;
	ts.limit_s = 30;
	if (tool_sync_connect(&ts, url->portal, url->lun) != 0) {
		fprintf(stderr, "bench: login failed: %s\n", tool_sync_error(&ts));
		rc = 3;
		goto out;
	}
	task = tool_sync_task(&ts, iscsi_readcapacity16_task(b.iscsi, b.lun, tool_sync_cb,
						tool_sync_arm(&ts)), "READ CAPACITY(16)");
	if (task == NULL || task->status != SCSI_STATUS_GOOD ||
	    (rc16 = scsi_datain_unmarshall(task)) == NULL) {
		fprintf(stderr, "bench: READ CAPACITY(16) failed: %s\n", tool_sync_error(&ts));
		if (task)
			scsi_free_scsi_task(task);
		rc = 1;
		goto logout;
	}
	b.block_size = rc16->block_length;
	blocks = rc16->returned_lba + 1;
	scsi_free_scsi_task(task);
	if (b.block_size == 0 || io_bytes % b.block_size) {
		fprintf(stderr, "bench: I/O size %" PRIu64 " is not a multiple of the block size %u\n",
			io_bytes, b.block_size);
		rc = 2;
		goto logout;
	}
	b.io_bytes = (uint32_t)io_bytes;
	if (span == 0 || span > blocks * b.block_size)
		span = blocks * b.block_size;
	b.span_ios = span / io_bytes;
	if (b.span_ios == 0) {
		fprintf(stderr, "bench: the span is smaller than one I/O\n");
		rc = 2;
		goto logout;
	}

	slots = calloc((size_t)qd, sizeof(*slots));
	if (slots == NULL) {
		rc = 1;
		goto logout;
	}
	for (i = 0; i < qd; i++) {
		slots[i].b = &b;
		slots[i].buf = malloc(io_bytes);
		if (slots[i].buf == NULL) {
			rc = 1;
			goto logout;
		}
		memset(slots[i].buf, 0xa5 ^ i, io_bytes);
	}

	t0 = now();
	b.end = t0 + secs;
	for (i = 0; i < qd; i++) {
		if (submit(&slots[i]) != 0) {
			rc = 1;
			break;
		}
	}
	while (b.inflight > 0) {
		struct pollfd pfd = { .fd = iscsi_get_fd(b.iscsi),
				      .events = (short)iscsi_which_events(b.iscsi) };
		int n = poll(&pfd, 1, 1000);

		if (n < 0 && errno != EINTR) {
			perror("bench: poll");
			rc = 4;
			break;
		}
		if ((n > 0 || !ts.iser) && iscsi_service(b.iscsi, n > 0 ? pfd.revents : 0) < 0) {
			fprintf(stderr, "bench: connection failed: %s\n", iscsi_get_error(b.iscsi));
			rc = 4;
			break;
		}
		if (now() > b.end + 30) {
			fprintf(stderr, "bench: %d commands still in flight 30 s after the end\n",
				b.inflight);
			rc = 4;
			break;
		}
	}
	t1 = now();
	printf("bench: %s %s bs=%u qd=%d seconds=%.2f ios=%" PRIu64 " iops=%.0f mibps=%.1f "
	       "lat_us=%.1f max_lat_us=%.0f max_gap_us=%.0f errors=%" PRIu64 " busy=%" PRIu64 "\n",
	       b.write ? "write" : "read", b.sequential ? "seq" : "rand", b.io_bytes, qd, t1 - t0,
	       b.ios, (double)b.ios / (t1 - t0),
	       (double)b.ios * b.io_bytes / 1048576.0 / (t1 - t0),
	       b.ios ? b.lat_sum / (double)b.ios * 1e6 : 0.0, b.lat_max * 1e6, b.gap_max * 1e6,
	       b.errors, b.busy);
	if (rc == 0 && b.errors)
		rc = 1;

logout:
	if (rc != 4)
		tool_sync_logout(&ts);
out:
	/* Destroying the context cancels what is in flight, whose callbacks touch the slots. */
	b.end = 0;
	if (url)
		iscsi_destroy_url(url);
	iscsi_destroy_context(b.iscsi);
	if (slots) {
		for (i = 0; i < qd; i++)
			free(slots[i].buf);
		free(slots);
	}
	return rc;
}
