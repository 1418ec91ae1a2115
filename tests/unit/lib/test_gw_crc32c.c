// SPDX-License-Identifier: MIT
/* Digests must match RFC 7143 Appendix B.4 bit for bit, or no initiator will talk to us. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "../../../lib/gw_crc32c.c"

static void fill(uint8_t *b, int kind)
{
	static const uint8_t fixed[2] = { 0x00, 0xff };

	for (int i = 0; i < 32; i++)
		b[i] = kind < 2 ? fixed[kind] : kind == 2 ? (uint8_t)i : (uint8_t)(31 - i);
}

static const uint32_t rfc_expected[4] = { 0x8a9136aa, 0x62a8ab43, 0x46dd794e, 0x113fdb5c };

Test(crc32c, rfc7143_vectors)
{
	uint8_t b[32];

	for (int k = 0; k < 4; k++) {
		fill(b, k);
		cr_expect_eq(gw_crc32c(0, b, 32), rfc_expected[k], "vector %d: %08x", k,
			     gw_crc32c(0, b, 32));
	}
	cr_expect_eq(gw_crc32c(0, "123456789", 9), 0xe3069283u);
	cr_expect_eq(gw_crc32c(0, "", 0), 0u);
}

Test(crc32c, table_path_matches_vectors)
{
	uint8_t b[32];

	for (int k = 0; k < 4; k++) {
		fill(b, k);
		cr_expect_eq(~gw_crc32c_sw(~0u, b, 32), rfc_expected[k], "vector %d", k);
	}
	cr_expect_eq(~gw_crc32c_sw(~0u, (const uint8_t *)"123456789", 9), 0xe3069283u);
}

Test(crc32c, chaining_equals_one_pass)
{
	uint8_t buf[1000];
	uint32_t whole;

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 7 + 3);
	whole = gw_crc32c(0, buf, sizeof(buf));
	for (size_t cut = 0; cut <= sizeof(buf); cut += 37)
		cr_expect_eq(gw_crc32c(gw_crc32c(0, buf, cut), buf + cut, sizeof(buf) - cut), whole,
			     "cut at %zu", cut);
}

Test(crc32c, hw_and_table_agree_on_every_length_and_alignment)
{
	uint8_t buf[300];

	srand(42);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)rand();
	for (size_t off = 0; off < 8; off++)
		for (size_t len = 0; len + off <= sizeof(buf); len += 13) {
			uint32_t sw = ~gw_crc32c_sw(~0u, buf + off, len);

			cr_assert_eq(gw_crc32c(0, buf + off, len), sw, "off %zu len %zu", off, len);
#if defined(__x86_64__)
			if (crc32c_hw)
				cr_assert_eq(~gw_crc32c_hw(~0u, buf + off, len), sw);
#endif
		}
}
