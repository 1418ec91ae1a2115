// SPDX-License-Identifier: MIT
/*
 * What the paths read from the back end: the device identity every path must agree on (VPD
 * page 0x83, bytes as tgtd returns them), the ALUA state (REPORT TARGET PORT GROUPS), CDBs.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "mp_priv.h"

static size_t unhex(const char *s, uint8_t *out, size_t max)
{
	size_t n = 0;

	while (s[0] && s[1] && n < max) {
		unsigned int v;

		sscanf(s, "%2x", &v);
		out[n++] = (uint8_t)v;
		s += 2;
	}
	return n;
}

/* tgtd 1.0.85, LUN with scsi_id=mpidA: T10 vendor id, NAA 3 (from tid/LUN), NAA 6. */
static const char *tgtd_vpd83 =
	"00830048020100246d70696441000000000000000000000000000000000000000000000000000000"
	"0000000001030008300000010000000101030010600000000000000000000000000000da";

Test(mp_vpd83, prefers_naa6_over_naa3_and_t10)
{
	uint8_t b[256];
	size_t n = unhex(tgtd_vpd83, b, sizeof(b));
	char id[MP_IDENT_MAX];
	int tpg;

	cr_assert_eq(mp_vpd83_parse(b, n, id, sizeof(id), &tpg), 0);
	cr_assert_str_eq(id, "naa.600000000000000000000000000000da");
	cr_assert_eq(tpg, -1, "tgtd reports no target port group");
}

Test(mp_vpd83, two_devices_differ)
{
	/* The same tgtd LUN with scsi_id=otherdisk: the NAA 6 designator changes. */
	static const char *other =
		"00830048020100246f746865726469736b00000000000000000000000000000000000000000000"
		"000000000103000830000003000000010103001060000000000000000000000000e0d000";
	uint8_t a[256], b[256];
	size_t na = unhex(tgtd_vpd83, a, sizeof(a)), nb = unhex(other, b, sizeof(b));
	char ia[MP_IDENT_MAX], ib[MP_IDENT_MAX];

	cr_assert_eq(mp_vpd83_parse(a, na, ia, sizeof(ia), NULL), 0);
	cr_assert_eq(mp_vpd83_parse(b, nb, ib, sizeof(ib), NULL), 0);
	cr_assert_str_neq(ia, ib);
}

Test(mp_vpd83, eui_tpg_and_t10_fallback)
{
	uint8_t b[64] = { 0x00, 0x83, 0x00, 0x00 };
	size_t o = 4;
	char id[MP_IDENT_MAX];
	int tpg;

	/* T10 vendor id "ACME    disk1  " (ASCII, LU) */
	b[o++] = 0x02; b[o++] = 0x01; b[o++] = 0; b[o++] = 15;
	memcpy(&b[o], "ACME    disk1  ", 15);
	o += 15;
	/* target port group 7 (binary, target port association) */
	b[o++] = 0x01; b[o++] = 0x15; b[o++] = 0; b[o++] = 4;
	b[o++] = 0; b[o++] = 0; b[o++] = 0; b[o++] = 7;
	b[3] = (uint8_t)(o - 4);
	cr_assert_eq(mp_vpd83_parse(b, o, id, sizeof(id), &tpg), 0);
	cr_assert_str_eq(id, "t10.ACME    disk1", "trailing blanks dropped");
	cr_assert_eq(tpg, 7);

	/* An EUI-64 designator beats the T10 one. */
	b[o++] = 0x01; b[o++] = 0x02; b[o++] = 0; b[o++] = 8;
	for (int i = 0; i < 8; i++)
		b[o++] = (uint8_t)(0xa0 + i);
	b[3] = (uint8_t)(o - 4);
	cr_assert_eq(mp_vpd83_parse(b, o, id, sizeof(id), NULL), 0);
	cr_assert_str_eq(id, "eui.a0a1a2a3a4a5a6a7");
}

Test(mp_vpd83, garbage_is_refused_not_crashed)
{
	uint8_t b[16] = { 0x00, 0x83, 0xff, 0xff, 0x01, 0x03, 0x00, 0xf0 };
	char id[MP_IDENT_MAX];

	cr_assert_eq(mp_vpd83_parse(b, sizeof(b), id, sizeof(id), NULL), -ENOENT);
	cr_assert_eq(mp_vpd83_parse(b, 3, id, sizeof(id), NULL), -ENOENT);
	b[1] = 0x80;
	cr_assert_eq(mp_vpd83_parse(b, sizeof(b), id, sizeof(id), NULL), -ENOENT);
}

Test(mp_rtpg, state_of_the_paths_group)
{
	/* two groups: 1 active/optimized (port 1), 2 standby (port 2) */
	uint8_t b[4 + 12 + 12] = { 0, 0, 0, 24,
		0x80, 0x0f, 0x00, 0x01, 0, 0, 0, 1, 0, 0, 0, 1,
		0x02, 0x0f, 0x00, 0x02, 0, 0, 0, 1, 0, 0, 0, 2 };
	int st = -1;

	cr_assert_eq(mp_rtpg_state(b, sizeof(b), 1, &st), 0);
	cr_assert_eq(st, 0x0);
	cr_assert_eq(mp_rtpg_state(b, sizeof(b), 2, &st), 0);
	cr_assert_eq(st, 0x2);
	cr_assert_eq(mp_rtpg_state(b, sizeof(b), 9, &st), -ENOENT);
	cr_assert_eq(mp_rtpg_state(b, sizeof(b), -1, &st), -ENOENT, "two groups, port unknown");
	cr_assert_eq(mp_rtpg_state(b, 4 + 12, -1, &st), 0, "a single group is the path's");
}

Test(mp_cdb, rw16_layout)
{
	uint8_t c[16];

	mp_cdb_rw16(c, 0x8a, 0x0102030405060708ull, 0x11223344u, true);
	cr_assert_eq(c[0], 0x8a);
	cr_assert_eq(c[1], 0x08, "FUA");
	cr_assert_eq(c[2], 0x01);
	cr_assert_eq(c[9], 0x08);
	cr_assert_eq(c[10], 0x11);
	cr_assert_eq(c[13], 0x44);
	cr_assert_eq(c[15], 0);
}
