// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: the login and text state machines with CHAP, over a real portal of an
 * in-process gateway (tests/fuzz/fuzz_gw.h). Every way in needs CHAP: discovery (auth chap),
 * a one-way target, a mutual target, and a target whose ACL gives the one initiator its own
 * credentials. The input is a list of requests separated by 0xff bytes; each is one flags byte
 * and NUL-separated key=value text:
 *   before full feature phase: a Login Request, BHS byte 1 = flags & 0xcf (T, C, CSG, NSG)
 *   after it: a Text Request, byte 1 = flags & 0xc0 (F, C); flags bit 4 keeps the last ITT and
 *   bit 5 echoes the last Target Transfer Tag (continuing an exchange)
 * The harness is the initiator's CHAP: a value "@" is replaced, in CHAP_N by the user, in
 * CHAP_C by a fixed 16-byte challenge, in CHAP_R by the right answer to the target's last
 * CHAP_A/CHAP_I/CHAP_C (MD5, SHA-1, SHA-256 or SHA3-256 as the target chose), computed here with
 * OpenSSL independently of gateway/iscsi/isc_chap.c.
 *
 * Checked on every answer: Login and Text Responses carry well-formed key=value text; a target
 * that answers mutual CHAP names the configured target user and proves the configured mutual
 * secret over the challenge sent; and no connection reaches full feature phase unless the
 * harness answered a challenge with the right secret (authentication cannot be skipped).
 */
#include <openssl/evp.h>
#include <stdint.h>

#include "fuzz_gw.h"
#include "gw_crc32c.h"

#define USER "fuzz-user"
#define SECRET "fuzz-secret-0123"
#define MUSER "fuzz-target"
#define MSECRET "mutual-secret-4567"
#define INI "iqn.2026-11.org.fuzz:host"
#define CHAP_CONF "{ \"user\": \"" USER "\", \"secret\": \"" SECRET "\" }"
#define CONF                                                                                \
	"{ \"portals\": [ { \"name\": \"p0\", \"address\": \"127.0.0.1\", \"port\": %u } ],"    \
	"  \"discovery\": { \"auth\": \"chap\", \"chap\": " CHAP_CONF " },"                    \
	"  \"targets\": ["                                                                     \
	"   { \"name\": \"iqn.2026-11.org.isergw:chap\", \"portals\": [\"p0\"],"              \
	"     \"allow_any_initiator\": true, \"chap\": " CHAP_CONF ","                           \
	"     \"params\": { \"nop_interval\": 0, \"nop_timeout\": 0 },"                        \
	"     \"luns\": [ { \"lun\": 0, \"backstore\": { \"type\": \"null\", \"size\": \"1M\" } } ] },"\
	"   { \"name\": \"iqn.2026-11.org.isergw:mutual\", \"portals\": [\"p0\"],"            \
	"     \"allow_any_initiator\": true, \"chap\": { \"user\": \"" USER "\","               \
	"       \"secret\": \"" SECRET "\", \"mutual_user\": \"" MUSER "\","                   \
	"       \"mutual_secret\": \"" MSECRET "\" },"                                          \
	"     \"params\": { \"nop_interval\": 0, \"nop_timeout\": 0 },"                        \
	"     \"luns\": [ { \"lun\": 0, \"backstore\": { \"type\": \"null\", \"size\": \"1M\" } } ] },"\
	"   { \"name\": \"iqn.2026-11.org.isergw:acl\", \"portals\": [\"p0\"],"               \
	"     \"allow_any_initiator\": false,"                                                 \
	"     \"initiators\": [ { \"name\": \"" INI "\", \"chap\": " CHAP_CONF " } ],"           \
	"     \"params\": { \"nop_interval\": 0, \"nop_timeout\": 0 },"                        \
	"     \"luns\": [ { \"lun\": 0, \"backstore\": { \"type\": \"null\", \"size\": \"1M\" } } ] }"\
	"  ] }"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct fgw f;
static struct gw_buf out;

/* What the target said last, for the CHAP answer and the checks. */
static struct {
	int alg;			/* CHAP_A */
	unsigned int id;
	uint8_t chal[1024];
	size_t chal_len;
	bool have_chal;
	bool answered;			/* the harness sent a right CHAP_R */
	bool ffp;			/* full feature phase reached */
	bool closed;			/* a failed login: the connection ends */
	bool hdig, ddig;
	uint32_t ttt, itt, statsn, cmdsn;
	/* our mutual challenge, when we asked for one */
	unsigned int my_id;
	bool asked_mutual;
} st;

static const uint8_t my_chal[16] = { 0x5a, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
				     0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xf0 };

static const EVP_MD *chap_md(int alg)
{
	switch (alg) {
	case 5: return EVP_md5();
	case 6: return EVP_sha1();
	case 7: return EVP_sha256();
	case 8: return EVP_sha3_256();
	}
	return NULL;
}

/* RFC 1994: H(id || secret || challenge). Returns the digest length, 0 if none. */
static unsigned int chap_hash(int alg, unsigned int id, const char *secret, const uint8_t *chal,
			      size_t chal_len, uint8_t *md)
{
	const EVP_MD *t = chap_md(alg);
	EVP_MD_CTX *ctx;
	unsigned int n = 0;
	uint8_t i = (uint8_t)id;

	if (!t || !(ctx = EVP_MD_CTX_new()))
		return 0;
	if (EVP_DigestInit_ex(ctx, t, NULL) != 1 || EVP_DigestUpdate(ctx, &i, 1) != 1 ||
	    EVP_DigestUpdate(ctx, secret, strlen(secret)) != 1 ||
	    EVP_DigestUpdate(ctx, chal, chal_len) != 1 || EVP_DigestFinal_ex(ctx, md, &n) != 1)
		n = 0;
	EVP_MD_CTX_free(ctx);
	return n;
}

/* A CHAP_I as iSCSI numbers are written: decimal, or hex after 0x (never octal: "077" is 77). */
static unsigned int chap_id(const char *s)
{
	return (unsigned int)strtoul(s, NULL, s[0] == '0' && (s[1] == 'x' || s[1] == 'X') ? 16 : 10);
}

static void to_hex(char *dst, const uint8_t *p, size_t n)
{
	dst += sprintf(dst, "0x");
	for (size_t i = 0; i < n; i++)
		dst += sprintf(dst, "%02x", p[i]);
}

static size_t from_hex(const char *s, uint8_t *p, size_t max)
{
	size_t n = 0;

	if (strncmp(s, "0x", 2) && strncmp(s, "0X", 2))
		return 0;
	for (s += 2; s[0] && s[1] && n < max; s += 2) {
		unsigned int v;

		if (sscanf(s, "%2x", &v) != 1)
			return 0;
		p[n++] = (uint8_t)v;
	}
	return n;
}

/* Our request text with "@" values filled in. */
static size_t fill(const uint8_t *in, size_t len, char *text, size_t cap)
{
	size_t pos = 0, o = 0;

	while (pos < len) {
		const uint8_t *end = memchr(in + pos, 0, len - pos);
		size_t n = end ? (size_t)(end - (in + pos)) : len - pos;
		char kv[512];
		const char *eq;

		if (n >= sizeof(kv))
			n = sizeof(kv) - 1;
		memcpy(kv, in + pos, n);
		kv[n] = 0;
		pos += (end ? (size_t)(end - (in + pos)) : n) + 1;
		eq = strchr(kv, '=');
		if (eq && !strcmp(eq, "=@")) {
			char v[2 * EVP_MAX_MD_SIZE + 8] = "";
			uint8_t md[EVP_MAX_MD_SIZE];
			unsigned int mdn;

			if (!strncmp(kv, "CHAP_N=", 7)) {
				snprintf(v, sizeof(v), "%s", USER);
			} else if (!strncmp(kv, "CHAP_C=", 7)) {
				to_hex(v, my_chal, sizeof(my_chal));
				st.asked_mutual = true;
			} else if (!strncmp(kv, "CHAP_R=", 7) && st.have_chal &&
				   (mdn = chap_hash(st.alg, st.id, SECRET, st.chal, st.chal_len, md))) {
				to_hex(v, md, mdn);
				st.answered = true;
			}
			if (*v) {
				snprintf(kv + (eq - kv) + 1, sizeof(kv) - (size_t)(eq - kv) - 1, "%s",
					 v);
				n = strlen(kv);
			}
		} else if (eq && !strncmp(kv, "CHAP_I=", 7)) {
			st.my_id = chap_id(eq + 1);
		}
		if (o + n + 1 > cap)
			break;
		memcpy(text + o, kv, n + 1);
		o += n + 1;
	}
	return o;
}

/* One answer's text: well-formed, and what CHAP needs from it. */
static void read_keys(const uint8_t *p, uint32_t len, bool final_ffp)
{
	uint32_t pos = 0;

	while (pos < len) {
		const uint8_t *end = memchr(p + pos, 0, len - pos);
		char kv[1200];
		size_t n;
		char *eq;

		if (!end)
			__builtin_trap();	/* the target's text must end every pair with NUL */
		n = (size_t)(end - (p + pos));
		pos += (uint32_t)n + 1;
		if (n >= sizeof(kv))
			continue;	/* a long value (a challenge from a long list): not ours */
		memcpy(kv, p + pos - n - 1, n + 1);
		eq = strchr(kv, '=');
		if (!eq || eq == kv)
			__builtin_trap();	/* every answer is key=value */
		*eq++ = 0;
		if (!strcmp(kv, "CHAP_A"))
			st.alg = atoi(eq);
		else if (!strcmp(kv, "CHAP_I"))
			st.id = chap_id(eq);
		else if (!strcmp(kv, "CHAP_C"))
			st.have_chal = (st.chal_len = from_hex(eq, st.chal, sizeof(st.chal))) > 0;
		else if (!strcmp(kv, "CHAP_N") && strcmp(eq, MUSER))
			__builtin_trap();	/* mutual CHAP names the configured target user */
		else if (!strcmp(kv, "CHAP_R")) {
			uint8_t want[EVP_MAX_MD_SIZE], got[EVP_MAX_MD_SIZE];
			unsigned int wn = chap_hash(st.alg, st.my_id, MSECRET, my_chal,
						    sizeof(my_chal), want);

			/* Only a challenge of ours is answered, with the mutual secret. */
			if (!st.asked_mutual || !wn || from_hex(eq, got, sizeof(got)) != wn ||
			    memcmp(want, got, wn))
				__builtin_trap();
		} else if (final_ffp && !strcmp(kv, "HeaderDigest"))
			st.hdig = !strcmp(eq, "CRC32C");
		else if (final_ffp && !strcmp(kv, "DataDigest"))
			st.ddig = !strcmp(eq, "CRC32C");
	}
}

/* Walks the answers that arrived since *off. */
static void read_answers(size_t *off, bool dig)
{
	while (*off + 48 <= out.len && !st.closed) {
		const uint8_t *b = out.data + *off;
		uint32_t dsl = fgw_dsl(b), hd = dig && st.hdig ? 4 : 0;
		size_t len = 48 + (size_t)b[4] * 4 + hd + ((dsl + 3) & ~3u) +
			     (dig && st.ddig && dsl ? 4 : 0);
		uint8_t op = b[0] & 0x3f;

		if (*off + len > out.len)
			return;
		st.statsn = fgw_get32(b + 24);
		st.cmdsn = fgw_get32(b + 28);
		if (op == 0x23) {	/* Login Response */
			bool final = (b[1] & 0x80) && (b[1] & 3) == 3 && !b[36];

			read_keys(b + 48 + b[4] * 4, dsl, final);
			if (b[36]) {
				st.closed = true;
			} else if (final) {
				/* Full feature phase: only with the secret proven. */
				if (!st.answered)
					__builtin_trap();
				st.ffp = true;
				dig = true;
			}
		} else if (op == 0x24) {	/* Text Response */
			read_keys(b + 48 + hd + b[4] * 4, dsl, false);
			st.ttt = fgw_get32(b + 20);
		}
		*off += len;
	}
}

static void send_pdu(uint8_t *bhs, const char *text, size_t len)
{
	uint8_t pad[8] = { 0 };
	uint32_t crc;

	bhs[5] = (uint8_t)(len >> 16);
	bhs[6] = (uint8_t)(len >> 8);
	bhs[7] = (uint8_t)len;
	fgw_send(&f, bhs, 48, &out);
	if (st.ffp && st.hdig) {
		crc = gw_crc32c(0, bhs, 48);
		fgw_send(&f, &crc, 4, &out);
	}
	fgw_send(&f, text, len, &out);
	fgw_send(&f, pad, (4 - (len & 3)) & 3, &out);
	if (st.ffp && st.ddig && len) {
		crc = gw_crc32c(gw_crc32c(0, text, len), pad, (4 - (len & 3)) & 3);
		fgw_send(&f, &crc, 4, &out);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char conf[4096], text[8192];
	size_t pos = 0, off = 0;
	uint16_t port = fgw_free_port();
	int npdu = 0;

	snprintf(conf, sizeof(conf), CONF, (unsigned int)port);
	fgw_start(&f, conf, port);
	gw_buf_init(&out);
	memset(&st, 0, sizeof(st));
	st.itt = 0x100;
	st.cmdsn = 1;
	st.ttt = 0xffffffff;
	fgw_connect(&f);
	while (pos < size && !st.closed && npdu++ < 32 && f.fd >= 0) {
		const uint8_t *end = memchr(data + pos, 0xff, size - pos);
		size_t n = end ? (size_t)(end - (data + pos)) : size - pos;
		uint8_t bhs[48] = { 0 };
		uint8_t fl = n ? data[pos] : 0;
		size_t tlen = n > 1 ? fill(data + pos + 1, n - 1, text, sizeof(text)) : 0;

		pos += n + 1;
		if (!st.ffp) {
			bhs[0] = 0x43;
			bhs[1] = fl & 0xcf;
			bhs[8] = 0x80;
			bhs[13] = 1;
		} else {
			bhs[0] = 0x44;	/* Text Request, immediate */
			bhs[1] = fl & 0xc0;
			if (!(fl & 0x10))
				st.itt++;
			fgw_put32(bhs + 20, fl & 0x20 ? st.ttt : 0xffffffff);
		}
		fgw_put32(bhs + 16, st.itt);
		fgw_put32(bhs + 24, st.cmdsn);
		fgw_put32(bhs + 28, st.statsn + 1);
		send_pdu(bhs, text, tlen);
		fgw_settle(&f, &out);
		read_answers(&off, st.ffp);
	}
	/* FUZZ_TRACE=1: how far the login got, to check a seed does what it should. */
	if (getenv("FUZZ_TRACE"))
		fprintf(stderr, "fuzz_login: %d requests, CHAP_A %d, answered %d, full feature %d, "
			"closed %d, %zu bytes answered\n", npdu, st.alg, st.answered, st.ffp,
			st.closed, out.len);
	gw_buf_fini(&out);
	fgw_stop(&f);
	return 0;
}
