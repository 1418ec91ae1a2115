// SPDX-License-Identifier: MIT
/*
 * The little SCSI the paths need, kept apart from libiscsi so it can be tested on bytes: the
 * device identity in VPD page 0x83 (the designator every path must agree on), the asymmetric
 * access state from REPORT TARGET PORT GROUPS, and 16-byte READ/WRITE CDBs.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "mp_priv.h"

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}

static int mp_desig_score(int type, const uint8_t *d, size_t len)
{
	switch (type) {
	case 3:		/* NAA */
		if (len == 16 && (d[0] >> 4) == 6)
			return 100;
		if (len == 8 && (d[0] >> 4) == 5)
			return 90;
		return 60;
	case 2:		/* EUI-64 based */
		return 80 + (int)len;
	case 8:		/* SCSI name string */
		return 70;
	case 1:		/* T10 vendor identification */
		return 50;
	default:
		return 0;
	}
}

static void mp_desig_format(int type, const uint8_t *d, size_t len, char *out, size_t outlen)
{
	size_t o;

	if (type == 2 || type == 3) {
		o = (size_t)snprintf(out, outlen, "%s.", type == 3 ? "naa" : "eui");
		for (size_t i = 0; i < len && o + 3 <= outlen; i++)
			o += (size_t)snprintf(out + o, outlen - o, "%02x", d[i]);
		return;
	}
	o = (size_t)snprintf(out, outlen, "%s.", type == 8 ? "name" : "t10");
	/* Text designators: printable bytes, trailing blanks and NULs dropped. */
	while (len && (d[len - 1] == ' ' || d[len - 1] == 0))
		len--;
	for (size_t i = 0; i < len && o + 1 < outlen; i++)
		out[o++] = (d[i] >= 0x20 && d[i] < 0x7f) ? (char)d[i] : '_';
	out[o < outlen ? o : outlen - 1] = 0;
}

int mp_vpd83_parse(const uint8_t *d, size_t len, char *ident, size_t identlen, int *tpg)
{
	int best = 0;
	size_t end, off;

	if (tpg)
		*tpg = -1;
	if (identlen)
		ident[0] = 0;
	if (len < 4 || d[1] != 0x83)
		return -ENOENT;
	end = 4 + (size_t)get16(&d[2]);
	if (end > len)
		end = len;
	for (off = 4; off + 4 <= end;) {
		int type = d[off + 1] & 0x0f, assoc = (d[off + 1] >> 4) & 0x3;
		size_t dl = d[off + 3];
		const uint8_t *v = &d[off + 4];

		if (off + 4 + dl > end)
			break;
		if (assoc == 0) {
			int s = mp_desig_score(type, v, dl);

			if (s > best && dl > 0) {
				best = s;
				mp_desig_format(type, v, dl, ident, identlen);
			}
		} else if (assoc == 1 && type == 5 && dl >= 4 && tpg) {
			*tpg = get16(&v[2]);
		}
		off += 4 + dl;
	}
	return best ? 0 : -ENOENT;
}

int mp_rtpg_state(const uint8_t *d, size_t len, int tpg, int *state)
{
	size_t end, off;
	int ngroups = 0, only = -1;

	if (len < 4)
		return -ENOENT;
	end = 4 + (((size_t)d[0] << 24) | ((size_t)d[1] << 16) | ((size_t)d[2] << 8) | d[3]);
	if (end > len)
		end = len;
	for (off = 4; off + 8 <= end;) {
		int st = d[off] & 0x0f;
		uint16_t id = get16(&d[off + 2]);
		size_t nports = d[off + 7];

		ngroups++;
		only = st;
		if (tpg >= 0 && id == (uint16_t)tpg) {
			*state = st;
			return 0;
		}
		off += 8 + 4 * nports;
	}
	if (tpg < 0 && ngroups == 1) {
		*state = only;
		return 0;
	}
	return -ENOENT;
}

void mp_cdb_rw16(uint8_t cdb[16], uint8_t opcode, uint64_t lba, uint32_t nblocks, bool fua)
{
	memset(cdb, 0, 16);
	cdb[0] = opcode;
	cdb[1] = fua ? 0x08 : 0;
	for (int i = 0; i < 8; i++)
		cdb[2 + i] = (uint8_t)(lba >> (56 - 8 * i));
	for (int i = 0; i < 4; i++)
		cdb[10 + i] = (uint8_t)(nblocks >> (24 - 8 * i));
}

void mp_io_set_sense(struct mp_io *io, uint8_t key, uint8_t asc, uint8_t ascq)
{
	memset(io->sense, 0, sizeof(io->sense));
	io->sense[0] = 0x70;
	io->sense[2] = key & 0x0f;
	io->sense[7] = 10;
	io->sense[12] = asc;
	io->sense[13] = ascq;
	io->sense_len = MP_SENSE_LEN;
	io->status = 0x02;
}
