// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: the iSCSI portal, byte stream in. A gateway is built in-process from its
 * configuration (one target, a 1 MiB RAM LU) and listens on loopback (in a network namespace of
 * the fuzzer's own); the input goes to it over a real TCP connection, so the datamover's
 * receive state machine (gateway/dmv/dmv_tcp.c: BHS, AHS, header and data digests, padding,
 * Data-Out placement) feeds the real connection, login, session, command window, SCSI, R2T,
 * NOP, TMF, Text and Logout code, down to the SCSI core and the backstore. TCP rather than the
 * unit tests' fake datamover because the PDU reader under test lives in the transport.
 *
 * Byte 0 is the mode:
 *   bits 0-1  0: the rest is the whole client stream, login included (captured sessions);
 *             1: a canned login first (no digests), 2: the same with HeaderDigest and
 *             DataDigest CRC32C, 3: a canned discovery login
 *   bit 2     framed: the harness walks the rest as PDUs (48-byte BHS, its AHS, a data segment
 *             of at most the bytes left), fixes DataSegmentLength to what is there, pads, and
 *             adds correct digests when they are on; otherwise the bytes go as they are
 *   bit 3     the canned login negotiates InitialR2T=Yes, ImmediateData=No (R2T for all data)
 * With a canned login, bytes 1-4 are its CmdSN (big-endian): a captured session's PDUs keep
 * their sequence numbers.
 *
 * What the gateway sends back must be a well-formed sequence of target PDUs; a crash, leak,
 * hang, or a gateway that does not go idle once the connection is gone is a finding.
 */
#include <stdint.h>

#include "fuzz_gw.h"
#include "gw_crc32c.h"

#define TARGET "iqn.2026-11.org.isergw:fuzz"
#define CONF                                                                                \
	"{ \"portals\": [ { \"name\": \"p0\", \"address\": \"127.0.0.1\", \"port\": %u } ],"    \
	"  \"targets\": [ { \"name\": \"" TARGET "\", \"portals\": [\"p0\"],"                  \
	"    \"allow_any_initiator\": true,"                                                   \
	"    \"params\": { \"queue_depth\": 16, \"nop_interval\": 0, \"nop_timeout\": 0 },"      \
	"    \"luns\": [ { \"lun\": 0, \"backstore\": { \"type\": \"ram\", \"size\": \"1M\" } },"\
	"               { \"lun\": 1, \"backstore\": { \"type\": \"null\", \"size\": \"1M\","     \
	"                 \"block_size\": 4096 } } ]"                                           \
	"  } ] }"

#define SEG_MAX 65536

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct fgw f;
static struct gw_buf out;
static bool hdig, ddig;

static void login_pdu(uint8_t flags, uint32_t cmdsn, const char *text, size_t len)
{
	uint8_t bhs[48] = { 0x43, flags, 0, 0 };
	static const uint8_t zero[4];

	bhs[5] = (uint8_t)(len >> 16);
	bhs[6] = (uint8_t)(len >> 8);
	bhs[7] = (uint8_t)len;
	bhs[8] = 0x80;		/* ISID: random format */
	bhs[13] = 1;
	fgw_put32(bhs + 16, 0x10);	/* ITT */
	fgw_put32(bhs + 24, cmdsn);
	fgw_send(&f, bhs, sizeof(bhs), &out);
	fgw_send(&f, text, len, &out);
	fgw_send(&f, zero, (4 - (len & 3)) & 3, &out);
}

static void canned_login(uint8_t mode, uint32_t cmdsn)
{
	char text[1024];
	int n;
	bool disc = (mode & 3) == 3, dig = (mode & 3) == 2, r2t = mode & 8;

	if (disc)
		n = snprintf(text, sizeof(text), "InitiatorName=iqn.2026-11.org.fuzz:host%c"
			     "SessionType=Discovery%cAuthMethod=None%c", 0, 0, 0);
	else
		n = snprintf(text, sizeof(text), "InitiatorName=iqn.2026-11.org.fuzz:host%c"
			     "TargetName=" TARGET "%cSessionType=Normal%cAuthMethod=None%c", 0, 0,
			     0, 0);
	login_pdu(0x80 | (0 << 2) | 1, cmdsn, text, (size_t)n);
	n = snprintf(text, sizeof(text), "HeaderDigest=%s%cDataDigest=%s%c"
		     "MaxRecvDataSegmentLength=8192%cErrorRecoveryLevel=0%c",
		     dig ? "CRC32C" : "None", 0, dig ? "CRC32C" : "None", 0, 0, 0);
	if (!disc)
		n += snprintf(text + n, sizeof(text) - (size_t)n,
			      "InitialR2T=%s%cImmediateData=%s%cMaxBurstLength=65536%c"
			      "FirstBurstLength=16384%cMaxOutstandingR2T=2%cMaxConnections=1%c",
			      r2t ? "Yes" : "No", 0, r2t ? "No" : "Yes", 0, 0, 0, 0, 0);
	login_pdu(0x80 | (1 << 2) | 3, cmdsn, text, (size_t)n);
	fgw_settle(&f, &out);
	hdig = ddig = dig;
}

/* Sends the rest as PDUs with lengths fixed up and digests computed. */
static void send_framed(const uint8_t *p, size_t n)
{
	static uint8_t buf[48 + 1024 + 4 + SEG_MAX + 8];

	while (n && f.fd >= 0) {
		uint32_t ahs, dsl, crc, len = 48;

		memset(buf, 0, 48);
		memcpy(buf, p, n < 48 ? n : 48);
		p += n < 48 ? n : 48;
		n -= n < 48 ? n : 48;
		ahs = (uint32_t)buf[4] * 4;
		if (ahs > n)
			ahs = (uint32_t)n & ~3u;
		buf[4] = (uint8_t)(ahs / 4);
		memcpy(buf + 48, p, ahs);
		p += ahs;
		n -= ahs;
		len += ahs;
		if (hdig) {
			crc = gw_crc32c(0, buf, len);
			memcpy(buf + len, &crc, 4);
			len += 4;
		}
		dsl = fgw_dsl(buf);
		if (dsl > n)
			dsl = (uint32_t)n;
		if (dsl > SEG_MAX)
			dsl = SEG_MAX;
		buf[5] = (uint8_t)(dsl >> 16);
		buf[6] = (uint8_t)(dsl >> 8);
		buf[7] = (uint8_t)dsl;
		if (hdig) {	/* the length changed: digest again */
			crc = gw_crc32c(0, buf, len - 4);
			memcpy(buf + len - 4, &crc, 4);
		}
		memcpy(buf + len, p, dsl);
		p += dsl;
		n -= dsl;
		memset(buf + len + dsl, 0, 3);
		dsl = (dsl + 3) & ~3u;
		if (ddig && dsl) {
			crc = gw_crc32c(0, buf + len, dsl);
			memcpy(buf + len + dsl, &crc, 4);
			dsl += 4;
		}
		len += dsl;
		if (!fgw_send(&f, buf, len, &out))
			break;
	}
}

/* The target's answers: whole PDUs of target opcodes (a cut at the very end is allowed: the
 * gateway may close mid-way). Digests follow once the final Login Response went out. */
static void check_output(void)
{
	static int trace = -1;
	size_t pos = 0;
	bool dig = false;

	/* FUZZ_TRACE=1: what the target answered, to check a seed does what it should. */
	if (trace < 0)
		trace = getenv("FUZZ_TRACE") != NULL;

	while (pos + 48 <= out.len) {
		const uint8_t *b = out.data + pos;
		uint8_t op = b[0] & 0x3f;
		size_t len;

		if (trace)
			fprintf(stderr, "fuzz_pdu: target sent opcode 0x%02x flags 0x%02x status "
				"0x%02x%02x dsl %u\n", op, b[1], b[36], b[37], fgw_dsl(b));
		switch (op) {
		case 0x20: case 0x21: case 0x22: case 0x23: case 0x24: case 0x25: case 0x26:
		case 0x31: case 0x32: case 0x3f:
			break;
		default:
			__builtin_trap();	/* not a target opcode: the stream lost its framing */
		}
		len = 48 + (size_t)b[4] * 4 + ((fgw_dsl(b) + 3) & ~3u);
		if (dig)
			len += (hdig ? 4 : 0) + (ddig && fgw_dsl(b) ? 4 : 0);
		if (op == 0x23 && (b[1] & 0x80) && (b[1] & 3) == 3 && !b[36]) {
			/* What the login settled, from the target's own answer (in a captured
			 * stream the initiator, not the harness, asked for digests). */
			const char *t = (const char *)b + 48 + b[4] * 4;
			size_t tl = pos + len <= out.len ? fgw_dsl(b) : 0;

			if (memmem(t, tl, "HeaderDigest=CRC32C", 20))
				hdig = true;
			if (memmem(t, tl, "DataDigest=CRC32C", 18))
				ddig = true;
			dig = true;
		}
		pos += len;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t mode;

	if (!size)
		return 0;
	mode = data[0];
	data++;
	size--;
	{
		static char conf[2048];
		uint16_t port = fgw_free_port();

		snprintf(conf, sizeof(conf), CONF, (unsigned int)port);
		fgw_start(&f, conf, port);
	}
	gw_buf_init(&out);
	hdig = ddig = false;
	fgw_connect(&f);
	if (mode & 3) {
		uint32_t cmdsn = size >= 4 ? fgw_get32(data) : 1;

		data += size >= 4 ? 4 : size;
		size -= size >= 4 ? 4 : size;
		canned_login(mode, cmdsn);
	}
	if (mode & 4)
		send_framed(data, size);
	else
		fgw_send(&f, data, size, &out);
	fgw_settle(&f, &out);
	check_output();
	gw_buf_fini(&out);
	fgw_stop(&f);
	return 0;
}
