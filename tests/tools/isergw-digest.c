/*
 * isergw-digest: a minimal raw iSCSI/TCP initiator that negotiates HeaderDigest=CRC32C and
 * DataDigest=CRC32C and checks both on the wire, in both directions.
 *
 * libiscsi 1.19 never offers a data digest, so no libiscsi tool can test one. This client
 * speaks just enough of RFC 7143 for that: login (security stage with AuthMethod=None, then
 * operational), NOP-Out ping with data, a WRITE(10) carried by immediate data, unsolicited and
 * solicited (R2T) Data-Out, a READ(10) read back through Data-In, and logout. Every PDU the
 * target sends has its header and data digests verified with an independent CRC32C. With -B it
 * also sends a NOP-Out whose data digest is wrong: RFC 7143 section 7.8 wants a Reject with
 * reason 0x02 (data digest error), the PDU discarded, and the connection still usable.
 *
 * Exit status: 0 all good, 1 a digest, data or protocol check failed, 2 usage, 3 connect or
 * login failed (or the target refused the digests).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BHS_LEN 48
#define OP_NOP_OUT 0x00
#define OP_SCSI_CMD 0x01
#define OP_LOGIN_REQ 0x03
#define OP_DATA_OUT 0x05
#define OP_LOGOUT_REQ 0x06
#define OP_NOP_IN 0x20
#define OP_SCSI_RSP 0x21
#define OP_LOGIN_RSP 0x23
#define OP_DATA_IN 0x25
#define OP_LOGOUT_RSP 0x26
#define OP_R2T 0x31
#define OP_ASYNC 0x32
#define OP_REJECT 0x3f
#define IMMEDIATE 0x40

struct conn {
	int fd;
	int digests;		/* both digests in use (after login) */
	uint32_t cmdsn, expstatsn, itt;
	uint32_t mrdsl_target;	/* MaxRecvDataSegmentLength the target declared */
	uint32_t first_burst, max_burst;
	int immediate_data, initial_r2t;
	int timeout_ms;
	unsigned int bad_digests;
};

struct pdu {
	uint8_t bhs[BHS_LEN];
	uint8_t *data;
	uint32_t dlen;
};

static uint32_t crc_table[256];

static void crc32c_init(void)
{
	uint32_t i, j, c;

	for (i = 0; i < 256; i++) {
		c = i;
		for (j = 0; j < 8; j++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		crc_table[i] = c;
	}
}

static uint32_t crc32c(const uint8_t *p, size_t n)
{
	uint32_t c = 0xffffffffu;

	while (n--)
		c = crc_table[(c ^ *p++) & 0xff] ^ (c >> 8);
	return c ^ 0xffffffffu;
}

/* The digest goes on the wire least significant byte first (as Linux and libiscsi send it). */
static void put_digest(uint8_t *p, uint32_t crc)
{
	p[0] = (uint8_t)crc;
	p[1] = (uint8_t)(crc >> 8);
	p[2] = (uint8_t)(crc >> 16);
	p[3] = (uint8_t)(crc >> 24);
}

static uint32_t get_digest(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint32_t get24(const uint8_t *p)
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

static int io_full(struct conn *c, void *buf, size_t n, int writing)
{
	uint8_t *p = buf;

	while (n) {
		struct pollfd pfd = { .fd = c->fd, .events = writing ? POLLOUT : POLLIN };
		ssize_t r;

		if (poll(&pfd, 1, c->timeout_ms) <= 0) {
			fprintf(stderr, "digest: %s timed out\n", writing ? "send" : "receive");
			return -ETIMEDOUT;
		}
		r = writing ? send(c->fd, p, n, MSG_NOSIGNAL) : recv(c->fd, p, n, 0);
		if (r == 0)
			return -ECONNRESET;
		if (r < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* Sends BHS + data; corrupt_data flips the data digest (for the -B check). */
static int send_pdu(struct conn *c, uint8_t *bhs, const uint8_t *data, uint32_t dlen,
		    int corrupt_data)
{
	uint8_t dig[4];
	uint32_t padded = (dlen + 3) & ~3u;
	uint8_t *seg = NULL;
	int rc;

	bhs[5] = (uint8_t)(dlen >> 16);
	bhs[6] = (uint8_t)(dlen >> 8);
	bhs[7] = (uint8_t)dlen;
	if ((rc = io_full(c, bhs, BHS_LEN, 1)) != 0)
		return rc;
	if (c->digests) {
		put_digest(dig, crc32c(bhs, BHS_LEN));
		if ((rc = io_full(c, dig, 4, 1)) != 0)
			return rc;
	}
	if (dlen == 0)
		return 0;
	seg = calloc(1, padded);
	if (seg == NULL)
		return -ENOMEM;
	memcpy(seg, data, dlen);
	rc = io_full(c, seg, padded, 1);
	if (rc == 0 && c->digests) {
		put_digest(dig, crc32c(seg, padded) ^ (corrupt_data ? 0x5a5a5a5au : 0));
		rc = io_full(c, dig, 4, 1);
	}
	free(seg);
	return rc;
}

static int recv_pdu(struct conn *c, struct pdu *p)
{
	uint8_t dig[4], ahs[1024];
	uint32_t ahslen, padded;
	int rc;

	p->data = NULL;
	if ((rc = io_full(c, p->bhs, BHS_LEN, 0)) != 0)
		return rc;
	ahslen = (uint32_t)p->bhs[4] * 4;
	p->dlen = get24(p->bhs + 5);
	if (ahslen > sizeof(ahs) || p->dlen > (16u << 20)) {
		fprintf(stderr, "digest: PDU with AHS %u and data %u bytes: not believable\n",
			ahslen, p->dlen);
		return -EPROTO;
	}
	if (ahslen && (rc = io_full(c, ahs, ahslen, 0)) != 0)
		return rc;
	if (c->digests) {
		uint8_t hdr[BHS_LEN + sizeof(ahs)];

		if ((rc = io_full(c, dig, 4, 0)) != 0)
			return rc;
		memcpy(hdr, p->bhs, BHS_LEN);
		memcpy(hdr + BHS_LEN, ahs, ahslen);
		if (crc32c(hdr, BHS_LEN + ahslen) != get_digest(dig)) {
			fprintf(stderr, "digest: BAD HEADER DIGEST from the target (opcode 0x%02x): "
				"got %08x, computed %08x\n", p->bhs[0] & 0x3f, get_digest(dig),
				crc32c(hdr, BHS_LEN + ahslen));
			c->bad_digests++;
		}
	}
	if (p->dlen == 0)
		return 0;
	padded = (p->dlen + 3) & ~3u;
	p->data = malloc(padded);
	if (p->data == NULL)
		return -ENOMEM;
	if ((rc = io_full(c, p->data, padded, 0)) != 0)
		return rc;
	if (c->digests) {
		if ((rc = io_full(c, dig, 4, 0)) != 0)
			return rc;
		if (crc32c(p->data, padded) != get_digest(dig)) {
			fprintf(stderr, "digest: BAD DATA DIGEST from the target (opcode 0x%02x, %u "
				"bytes): got %08x, computed %08x\n", p->bhs[0] & 0x3f, p->dlen,
				get_digest(dig), crc32c(p->data, padded));
			c->bad_digests++;
		}
	}
	return 0;
}

/* Receives the next PDU for us, answering target NOP-In pings and skipping async events. */
static int recv_next(struct conn *c, struct pdu *p)
{
	for (;;) {
		int rc = recv_pdu(c, p);
		uint8_t op;

		if (rc != 0)
			return rc;
		op = p->bhs[0] & 0x3f;
		if (op == OP_NOP_IN && get32(p->bhs + 16) == 0xffffffffu) {
			uint8_t bhs[BHS_LEN] = { 0 };

			c->expstatsn = get32(p->bhs + 24) + 1;
			bhs[0] = OP_NOP_OUT | IMMEDIATE;
			bhs[1] = 0x80;
			memcpy(bhs + 8, p->bhs + 8, 8);
			put32(bhs + 16, 0xffffffffu);
			memcpy(bhs + 20, p->bhs + 20, 4);
			put32(bhs + 24, c->cmdsn);
			put32(bhs + 28, c->expstatsn);
			free(p->data);
			if ((rc = send_pdu(c, bhs, NULL, 0, 0)) != 0)
				return rc;
			continue;
		}
		if (op == OP_ASYNC) {
			free(p->data);
			continue;
		}
		return 0;
	}
}

/* ---- login ------------------------------------------------------------------------------- */

static const char *key_value(const uint8_t *data, uint32_t len, const char *key)
{
	size_t klen = strlen(key);
	uint32_t i = 0;

	while (i < len) {
		const char *kv = (const char *)data + i;
		size_t n = strnlen(kv, len - i);

		if (n > klen && strncmp(kv, key, klen) == 0 && kv[klen] == '=')
			return kv + klen + 1;
		i += (uint32_t)n + 1;
	}
	return NULL;
}

static int login_step(struct conn *c, const uint8_t *isid, int csg, int nsg, const char *keys,
		      size_t klen, struct pdu *rsp)
{
	uint8_t bhs[BHS_LEN] = { 0 };
	int rc;

	bhs[0] = OP_LOGIN_REQ | IMMEDIATE;
	bhs[1] = (uint8_t)(0x80 | csg << 2 | nsg);
	memcpy(bhs + 8, isid, 6);
	put32(bhs + 16, c->itt);
	put32(bhs + 24, c->cmdsn);
	put32(bhs + 28, c->expstatsn);
	if ((rc = send_pdu(c, bhs, (const uint8_t *)keys, (uint32_t)klen, 0)) != 0)
		return rc;
	if ((rc = recv_pdu(c, rsp)) != 0)
		return rc;
	if ((rsp->bhs[0] & 0x3f) != OP_LOGIN_RSP) {
		fprintf(stderr, "digest: expected a Login Response, got opcode 0x%02x\n",
			rsp->bhs[0] & 0x3f);
		return -EPROTO;
	}
	c->expstatsn = get32(rsp->bhs + 24) + 1;
	if (rsp->bhs[36] != 0) {
		fprintf(stderr, "digest: login refused: status class 0x%02x detail 0x%02x\n",
			rsp->bhs[36], rsp->bhs[37]);
		return -EACCES;
	}
	return 0;
}

static size_t add_key(char *buf, size_t off, size_t cap, const char *kv)
{
	size_t n = strlen(kv) + 1;

	if (off + n > cap)
		return off;
	memcpy(buf + off, kv, n);
	return off + n;
}

static int login(struct conn *c, const char *initiator, const char *target)
{
	uint8_t isid[6] = { 0x80, 0x00, 0x00, 0x00, 0x00, 0x00 };
	char keys[2048], kv[512];
	const char *v;
	struct pdu rsp;
	size_t n = 0;
	int rc, step, done = 0;

	isid[3] = (uint8_t)getpid();
	isid[4] = (uint8_t)(time(NULL) & 0xff);
	isid[5] = 0x01;
	snprintf(kv, sizeof(kv), "InitiatorName=%s", initiator);
	n = add_key(keys, n, sizeof(keys), kv);
	snprintf(kv, sizeof(kv), "TargetName=%s", target);
	n = add_key(keys, n, sizeof(keys), kv);
	n = add_key(keys, n, sizeof(keys), "SessionType=Normal");
	n = add_key(keys, n, sizeof(keys), "AuthMethod=None");
	if ((rc = login_step(c, isid, 0, 1, keys, n, &rsp)) != 0)
		return rc;
	free(rsp.data);

	n = 0;
	n = add_key(keys, n, sizeof(keys), "HeaderDigest=CRC32C");
	n = add_key(keys, n, sizeof(keys), "DataDigest=CRC32C");
	n = add_key(keys, n, sizeof(keys), "MaxRecvDataSegmentLength=65536");
	n = add_key(keys, n, sizeof(keys), "InitialR2T=No");
	n = add_key(keys, n, sizeof(keys), "ImmediateData=Yes");
	n = add_key(keys, n, sizeof(keys), "FirstBurstLength=65536");
	n = add_key(keys, n, sizeof(keys), "MaxBurstLength=262144");
	n = add_key(keys, n, sizeof(keys), "MaxOutstandingR2T=1");
	n = add_key(keys, n, sizeof(keys), "MaxConnections=1");
	n = add_key(keys, n, sizeof(keys), "ErrorRecoveryLevel=0");
	n = add_key(keys, n, sizeof(keys), "DataPDUInOrder=Yes");
	n = add_key(keys, n, sizeof(keys), "DataSequenceInOrder=Yes");
	n = add_key(keys, n, sizeof(keys), "DefaultTime2Wait=0");
	n = add_key(keys, n, sizeof(keys), "DefaultTime2Retain=0");
	c->mrdsl_target = 8192; /* RFC 7143 default until the target declares its own */
	c->first_burst = 65536;
	c->max_burst = 262144;
	c->immediate_data = 1;
	c->initial_r2t = 0;
	/* The target may answer in several steps (T=0): resend empty requests until it moves. */
	for (step = 0; step < 8 && !done; step++) {
		int hd = -1, dd = -1;

		if ((rc = login_step(c, isid, 1, 3, keys, n, &rsp)) != 0)
			return rc;
		if ((v = key_value(rsp.data, rsp.dlen, "HeaderDigest")))
			hd = strcmp(v, "CRC32C") == 0;
		if ((v = key_value(rsp.data, rsp.dlen, "DataDigest")))
			dd = strcmp(v, "CRC32C") == 0;
		if ((v = key_value(rsp.data, rsp.dlen, "MaxRecvDataSegmentLength")))
			c->mrdsl_target = (uint32_t)strtoul(v, NULL, 10);
		if ((v = key_value(rsp.data, rsp.dlen, "FirstBurstLength")))
			c->first_burst = (uint32_t)strtoul(v, NULL, 10);
		if ((v = key_value(rsp.data, rsp.dlen, "MaxBurstLength")))
			c->max_burst = (uint32_t)strtoul(v, NULL, 10);
		if ((v = key_value(rsp.data, rsp.dlen, "ImmediateData")))
			c->immediate_data = strcmp(v, "Yes") == 0;
		if ((v = key_value(rsp.data, rsp.dlen, "InitialR2T")))
			c->initial_r2t = strcmp(v, "Yes") == 0;
		if (hd == 0 || dd == 0) {
			fprintf(stderr, "digest: the target answered HeaderDigest=%s DataDigest=%s\n",
				key_value(rsp.data, rsp.dlen, "HeaderDigest") ?: "?",
				key_value(rsp.data, rsp.dlen, "DataDigest") ?: "?");
			free(rsp.data);
			return -EPROTO;
		}
		done = (rsp.bhs[1] & 0x80) && (rsp.bhs[1] & 0x03) == 3;
		free(rsp.data);
		n = 0;
	}
	if (!done) {
		fprintf(stderr, "digest: the target never ended the login\n");
		return -EPROTO;
	}
	c->digests = 1;
	/* The first command carries the login's CmdSN (login requests are immediate). */
	printf("digest: logged in with HeaderDigest=CRC32C DataDigest=CRC32C (target "
	       "MaxRecvDataSegmentLength %u, FirstBurstLength %u, MaxBurstLength %u, "
	       "ImmediateData %s, InitialR2T %s)\n", c->mrdsl_target, c->first_burst,
	       c->max_burst, c->immediate_data ? "Yes" : "No", c->initial_r2t ? "Yes" : "No");
	return 0;
}

/* ---- full feature phase ------------------------------------------------------------------ */

static int nop_ping(struct conn *c, uint32_t len)
{
	uint8_t bhs[BHS_LEN] = { 0 }, *data = malloc(len ? len : 1);
	uint32_t i, itt = ++c->itt;
	struct pdu rsp;
	int rc;

	if (data == NULL)
		return -ENOMEM;
	for (i = 0; i < len; i++)
		data[i] = (uint8_t)(i * 7 + 3);
	bhs[0] = OP_NOP_OUT | IMMEDIATE;
	bhs[1] = 0x80;
	put32(bhs + 16, itt);
	put32(bhs + 20, 0xffffffffu);
	put32(bhs + 24, c->cmdsn);
	put32(bhs + 28, c->expstatsn);
	rc = send_pdu(c, bhs, data, len, 0);
	if (rc == 0)
		rc = recv_next(c, &rsp);
	if (rc != 0) {
		free(data);
		return rc;
	}
	if ((rsp.bhs[0] & 0x3f) != OP_NOP_IN || get32(rsp.bhs + 16) != itt || rsp.dlen != len ||
	    (len && memcmp(rsp.data, data, len) != 0)) {
		fprintf(stderr, "digest: NOP-In does not echo the %u-byte ping (opcode 0x%02x, %u "
			"bytes)\n", len, rsp.bhs[0] & 0x3f, rsp.dlen);
		rc = -EPROTO;
	} else {
		c->expstatsn = get32(rsp.bhs + 24) + 1;
		printf("digest: NOP-Out ping of %u bytes echoed\n", len);
	}
	free(rsp.data);
	free(data);
	return rc;
}

static void scsi_bhs(struct conn *c, uint8_t *bhs, int lun, int write, uint32_t itt,
		     uint32_t edtl, uint32_t lba, uint16_t blocks)
{
	memset(bhs, 0, BHS_LEN);
	bhs[0] = OP_SCSI_CMD;
	bhs[1] = (uint8_t)(0x80 | (write ? 0x20 : 0x40) | 0x01);
	bhs[9] = (uint8_t)lun;
	put32(bhs + 16, itt);
	put32(bhs + 20, edtl);
	put32(bhs + 24, c->cmdsn++);
	put32(bhs + 28, c->expstatsn);
	bhs[32] = write ? 0x2a : 0x28;
	put32(bhs + 34, lba);
	bhs[39] = (uint8_t)(blocks >> 8);
	bhs[40] = (uint8_t)blocks;
}

static int send_data_out(struct conn *c, int lun, uint32_t itt, uint32_t ttt, const uint8_t *buf,
			 uint32_t off, uint32_t len)
{
	uint32_t sent = 0, datasn = 0;
	int rc;

	while (sent < len) {
		uint8_t bhs[BHS_LEN] = { 0 };
		uint32_t n = len - sent;

		if (n > c->mrdsl_target)
			n = c->mrdsl_target;
		bhs[0] = OP_DATA_OUT;
		bhs[1] = sent + n == len ? 0x80 : 0;
		bhs[9] = (uint8_t)lun;
		put32(bhs + 16, itt);
		put32(bhs + 20, ttt);
		put32(bhs + 28, c->expstatsn);
		put32(bhs + 36, datasn++);
		put32(bhs + 40, off + sent);
		if ((rc = send_pdu(c, bhs, buf + off + sent, n, 0)) != 0)
			return rc;
		sent += n;
	}
	return 0;
}

/* 0, -EAGAIN for a unit attention (the first command after login gets one), or -EIO. */
static int scsi_status(struct pdu *rsp, const char *what)
{
	if (rsp->bhs[2] == 0 && rsp->bhs[3] == 0x02 && rsp->dlen >= 16 &&
	    (rsp->data[4] & 0xf) == 0x6)
		return -EAGAIN;
	if (rsp->bhs[2] != 0 || rsp->bhs[3] != 0) {
		fprintf(stderr, "digest: %s: response 0x%02x status 0x%02x", what, rsp->bhs[2],
			rsp->bhs[3]);
		if (rsp->dlen >= 16)
			fprintf(stderr, " sense key 0x%x asc 0x%02x ascq 0x%02x", rsp->data[4] & 0xf,
				rsp->data[14], rsp->data[15]);
		fprintf(stderr, "\n");
		return -EIO;
	}
	return 0;
}

static int do_write(struct conn *c, int lun, uint32_t lba, const uint8_t *buf, uint32_t len,
		    int corrupt)
{
	uint8_t bhs[BHS_LEN];
	uint32_t itt = ++c->itt, imm = 0, unsol = 0;
	struct pdu rsp;
	int rc;

	if (!c->initial_r2t)
		unsol = len < c->first_burst ? len : c->first_burst;
	if (c->immediate_data)
		imm = unsol < c->mrdsl_target ? unsol : c->mrdsl_target;
	scsi_bhs(c, bhs, lun, 1, itt, len, lba, (uint16_t)(len / 512));
	if ((rc = send_pdu(c, bhs, buf, imm, corrupt)) != 0)
		return rc;
	if (corrupt) {
		/*
		 * RFC 7143 7.8: a payload digest error gets a Reject (reason 0x02) and the PDU
		 * is discarded; at ErrorRecoveryLevel 0 closing the connection (session
		 * recovery) is the other answer. Writing the data is never one.
		 */
		rc = recv_next(c, &rsp);
		if (rc == -ECONNRESET) {
			printf("digest: bad data digest: the target closed the connection\n");
			return 0;
		}
		if (rc != 0)
			return rc;
		if ((rsp.bhs[0] & 0x3f) == OP_REJECT && rsp.bhs[2] == 0x02) {
			printf("digest: bad data digest: Reject with reason 0x02\n");
			free(rsp.data);
			return 0;
		}
		fprintf(stderr, "digest: a WRITE with a bad data digest got opcode 0x%02x "
			"(reason/response 0x%02x, status 0x%02x), not a Reject 0x02\n",
			rsp.bhs[0] & 0x3f, rsp.bhs[2], rsp.bhs[3]);
		free(rsp.data);
		return -EPROTO;
	}
	if (unsol > imm && (rc = send_data_out(c, lun, itt, 0xffffffffu, buf, imm, unsol - imm)))
		return rc;
	for (;;) {
		if ((rc = recv_next(c, &rsp)) != 0)
			return rc;
		switch (rsp.bhs[0] & 0x3f) {
		case OP_R2T: {
			uint32_t off = get32(rsp.bhs + 40), want = get32(rsp.bhs + 44);

			if (off + want > len || want == 0) {
				fprintf(stderr, "digest: R2T for %u bytes at %u of %u\n", want, off, len);
				free(rsp.data);
				return -EPROTO;
			}
			rc = send_data_out(c, lun, itt, get32(rsp.bhs + 20), buf, off, want);
			free(rsp.data);
			if (rc)
				return rc;
			break;
		}
		case OP_SCSI_RSP:
			c->expstatsn = get32(rsp.bhs + 24) + 1;
			rc = scsi_status(&rsp, "WRITE(10)");
			free(rsp.data);
			return rc;
		default:
			fprintf(stderr, "digest: unexpected opcode 0x%02x during a write\n",
				rsp.bhs[0] & 0x3f);
			free(rsp.data);
			return -EPROTO;
		}
	}
}

static int do_read(struct conn *c, int lun, uint32_t lba, uint8_t *buf, uint32_t len)
{
	uint8_t bhs[BHS_LEN];
	uint32_t itt = ++c->itt, got = 0;
	struct pdu rsp;
	int rc;

	scsi_bhs(c, bhs, lun, 0, itt, len, lba, (uint16_t)(len / 512));
	if ((rc = send_pdu(c, bhs, NULL, 0, 0)) != 0)
		return rc;
	for (;;) {
		uint8_t op;

		if ((rc = recv_next(c, &rsp)) != 0)
			return rc;
		op = rsp.bhs[0] & 0x3f;
		if (op == OP_DATA_IN) {
			uint32_t off = get32(rsp.bhs + 40);

			if (off + rsp.dlen > len) {
				fprintf(stderr, "digest: Data-In of %u bytes at %u overruns %u\n",
					rsp.dlen, off, len);
				free(rsp.data);
				return -EPROTO;
			}
			memcpy(buf + off, rsp.data, rsp.dlen);
			got += rsp.dlen;
			if (rsp.bhs[1] & 0x01) { /* S: status in the last Data-In */
				c->expstatsn = get32(rsp.bhs + 24) + 1;
				rc = rsp.bhs[3] ? -EIO : 0;
				if (rc)
					fprintf(stderr, "digest: READ(10) status 0x%02x\n", rsp.bhs[3]);
				free(rsp.data);
				break;
			}
			free(rsp.data);
			continue;
		}
		if (op == OP_SCSI_RSP) {
			c->expstatsn = get32(rsp.bhs + 24) + 1;
			rc = scsi_status(&rsp, "READ(10)");
			free(rsp.data);
			break;
		}
		fprintf(stderr, "digest: unexpected opcode 0x%02x during a read\n", op);
		free(rsp.data);
		return -EPROTO;
	}
	if (rc == 0 && got != len) {
		fprintf(stderr, "digest: READ(10) returned %u of %u bytes\n", got, len);
		rc = -EIO;
	}
	return rc;
}

static int logout(struct conn *c)
{
	uint8_t bhs[BHS_LEN] = { 0 };
	struct pdu rsp;
	int rc;

	bhs[0] = OP_LOGOUT_REQ | IMMEDIATE;
	bhs[1] = 0x80;
	put32(bhs + 16, ++c->itt);
	put32(bhs + 24, c->cmdsn);
	put32(bhs + 28, c->expstatsn);
	if ((rc = send_pdu(c, bhs, NULL, 0, 0)) != 0 || (rc = recv_next(c, &rsp)) != 0)
		return rc;
	free(rsp.data);
	if ((rsp.bhs[0] & 0x3f) != OP_LOGOUT_RSP || rsp.bhs[2] != 0) {
		fprintf(stderr, "digest: logout answered by opcode 0x%02x response %u\n",
			rsp.bhs[0] & 0x3f, rsp.bhs[2]);
		return -EPROTO;
	}
	return 0;
}

static int parse_url(char *url, char **host, char **port, char **target, int *lun)
{
	char *p, *slash;

	if (strncmp(url, "iscsi://", 8) != 0)
		return -EINVAL;
	p = url + 8;
	slash = strchr(p, '/');
	if (slash == NULL)
		return -EINVAL;
	*slash = '\0';
	*host = p;
	*port = strrchr(p, ':');
	if (*port) {
		**port = '\0';
		(*port)++;
	} else {
		*port = (char *)"3260";
	}
	*target = slash + 1;
	slash = strrchr(*target, '/');
	if (slash == NULL)
		return -EINVAL;
	*slash = '\0';
	*lun = atoi(slash + 1);
	return *lun >= 0 && *lun < 256 ? 0 : -EINVAL;
}

static int session_open(struct conn *c, const char *host, const char *port,
			const char *initiator, const char *target)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai;
	int one = 1, rc;

	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->timeout_ms = 10000;
	c->itt = 0x1000;
	c->cmdsn = 1;
	if (getaddrinfo(host, port, &hints, &ai) != 0) {
		fprintf(stderr, "digest: cannot resolve %s:%s\n", host, port);
		return -EHOSTUNREACH;
	}
	c->fd = socket(ai->ai_family, SOCK_STREAM, 0);
	if (c->fd < 0 || connect(c->fd, ai->ai_addr, ai->ai_addrlen) != 0) {
		rc = -errno;
		fprintf(stderr, "digest: connect to %s:%s: %s\n", host, port, strerror(errno));
		freeaddrinfo(ai);
		return rc;
	}
	freeaddrinfo(ai);
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	rc = login(c, initiator, target);
	if (rc != 0)
		fprintf(stderr, "digest: login failed: %s\n", strerror(-rc));
	return rc;
}

/* WRITE then READ back, retrying the unit attention the first command of a session gets. */
static int write_read(struct conn *c, int lun, uint32_t lba, const uint8_t *wbuf, uint8_t *rbuf,
		      uint32_t n)
{
	int rc, tries = 0;

	memset(rbuf, 0, n);
	do {
		rc = do_write(c, lun, lba, wbuf, n, 0);
	} while (rc == -EAGAIN && ++tries < 4);
	if (rc == 0) {
		do {
			rc = do_read(c, lun, lba, rbuf, n);
		} while (rc == -EAGAIN && ++tries < 4);
	}
	if (rc == 0 && memcmp(wbuf, rbuf, n) != 0) {
		fprintf(stderr, "digest: %u bytes read back differ from those written\n", n);
		rc = -EIO;
	}
	return rc;
}

int main(int argc, char **argv)
{
	static const uint32_t sizes[] = { 512, 65536, 1u << 20 };
	const char *initiator = "iqn.2026-11.org.isergw:digest";
	char *host, *port, *target;
	struct conn c = { .fd = -1 };
	uint32_t len = 1u << 20, lba = 2048, i;
	uint8_t *wbuf = NULL, *rbuf = NULL, *junk = NULL;
	int lun, opt, bad = 0, rc = 0, tries = 0;
	unsigned int k;

	while ((opt = getopt(argc, argv, "i:Bh")) != -1) {
		switch (opt) {
		case 'i': initiator = optarg; break;
		case 'B': bad = 1; break;
		default:
			fprintf(stderr, "usage: isergw-digest [-i INITIATOR] [-B] "
				"iscsi://HOST[:PORT]/TARGET/LUN\n"
				"  -B  also send a WRITE whose data digest is wrong: the target must\n"
				"      reject it (or drop the connection) and not write the data\n");
			return 2;
		}
	}
	if (optind != argc - 1 || parse_url(argv[optind], &host, &port, &target, &lun) != 0) {
		fprintf(stderr, "digest: expected one iscsi://HOST[:PORT]/TARGET/LUN argument\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	crc32c_init();
	/* RFC 3720 B.4: 32 bytes of zeroes give 0x8a9136aa; check our CRC before trusting it. */
	{
		uint8_t z[32] = { 0 };

		if (crc32c(z, sizeof(z)) != 0x8a9136aau) {
			fprintf(stderr, "digest: CRC32C self-test failed\n");
			return 1;
		}
	}
	wbuf = malloc(len);
	rbuf = malloc(len);
	junk = malloc(4096);
	if (wbuf == NULL || rbuf == NULL || junk == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	srand((unsigned int)time(NULL) ^ (unsigned int)getpid());
	for (i = 0; i < len; i++)
		wbuf[i] = (uint8_t)(rand() >> 7);
	for (i = 0; i < 4096; i++)
		junk[i] = (uint8_t)~wbuf[i];

	if (session_open(&c, host, port, initiator, target) != 0) {
		if (c.fd >= 0)
			close(c.fd);
		free(wbuf);
		free(rbuf);
		free(junk);
		return 3;
	}
	/* Sizes 0, 1, 13 exercise the padding under the data digest. */
	if ((rc = nop_ping(&c, 0)) || (rc = nop_ping(&c, 1)) || (rc = nop_ping(&c, 13)) ||
	    (rc = nop_ping(&c, 4096)))
		goto out;
	/* Immediate data only, a first burst, and 1 MiB driven by R2Ts. */
	for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		if ((rc = write_read(&c, lun, lba, wbuf, rbuf, sizes[k])) != 0)
			goto out;
		printf("digest: WRITE(10)+READ(10) of %u bytes verified\n", sizes[k]);
	}
	if (bad) {
		/* Overwrite the first block of what was just verified, with a bad digest. */
		if ((rc = do_write(&c, lun, lba, junk, 4096, 1)) != 0)
			goto out;
		/* Then, on a new session, the data must be what was written before. */
		if (logout(&c) != 0)
			printf("digest: (no clean logout after the rejected write)\n");
		close(c.fd);
		if ((rc = session_open(&c, host, port, initiator, target)) != 0)
			goto out;
		do {
			rc = do_read(&c, lun, lba, rbuf, 4096);
		} while (rc == -EAGAIN && ++tries < 4);
		if (rc != 0)
			goto out;
		if (memcmp(rbuf, wbuf, 4096) != 0) {
			fprintf(stderr, "digest: the WRITE with a bad data digest changed the data\n");
			rc = -EIO;
			goto out;
		}
		printf("digest: the data under the rejected WRITE is unchanged\n");
	}
	rc = logout(&c);
out:
	if (rc == 0 && c.bad_digests)
		rc = -EBADMSG;
	if (rc != 0)
		fprintf(stderr, "digest: FAILED (%s), %u bad digests from the target\n",
			strerror(-rc), c.bad_digests);
	else
		printf("digest: all PDUs from the target had correct header and data digests\n");
	free(wbuf);
	free(rbuf);
	free(junk);
	if (c.fd >= 0)
		close(c.fd);
	return rc ? 1 : 0;
}
