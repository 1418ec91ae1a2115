// SPDX-License-Identifier: MIT
/*
 * CRC32C, reflected polynomial 0x82F63B78. The public value is the finished CRC (pre- and
 * post-inverted), which is what iSCSI puts on the wire; inverting on entry undoes the previous
 * call's final xor, so calls chain over a PDU's pieces. The implementation is chosen once at
 * start-up: the SSE4.2 crc32 instruction, else slicing-by-8 tables built at the same time.
 */
#include <endian.h>
#include <stdbool.h>
#include <string.h>

#include "gw_crc32c.h"

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

#define GW_CRC32C_POLY 0x82F63B78u

static uint32_t crc32c_table[8][256];
static bool crc32c_hw;

__attribute__((constructor)) static void gw_crc32c_setup(void)
{
	uint32_t i, j, c;

	for (i = 0; i < 256; i++) {
		c = i;
		for (j = 0; j < 8; j++)
			c = (c >> 1) ^ ((c & 1) ? GW_CRC32C_POLY : 0);
		crc32c_table[0][i] = c;
	}
	for (i = 0; i < 256; i++)
		for (j = 1; j < 8; j++)
			crc32c_table[j][i] = (crc32c_table[j - 1][i] >> 8) ^
					     crc32c_table[0][crc32c_table[j - 1][i] & 0xff];
#if defined(__x86_64__)
	__builtin_cpu_init();
	crc32c_hw = __builtin_cpu_supports("sse4.2");
#endif
}

/* Raw update: c is the running (inverted) register, as in the sliced loop. */
static uint32_t gw_crc32c_sw(uint32_t c, const uint8_t *p, size_t len)
{
	while (len && ((uintptr_t)p & 7)) {
		c = (c >> 8) ^ crc32c_table[0][(c ^ *p++) & 0xff];
		len--;
	}
	while (len >= 8) {
		uint32_t lo, hi;

		memcpy(&lo, p, 4);
		memcpy(&hi, p + 4, 4);
		lo = le32toh(lo) ^ c;
		hi = le32toh(hi);
		c = crc32c_table[7][lo & 0xff] ^ crc32c_table[6][(lo >> 8) & 0xff] ^
		    crc32c_table[5][(lo >> 16) & 0xff] ^ crc32c_table[4][lo >> 24] ^
		    crc32c_table[3][hi & 0xff] ^ crc32c_table[2][(hi >> 8) & 0xff] ^
		    crc32c_table[1][(hi >> 16) & 0xff] ^ crc32c_table[0][hi >> 24];
		p += 8;
		len -= 8;
	}
	while (len--)
		c = (c >> 8) ^ crc32c_table[0][(c ^ *p++) & 0xff];
	return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t gw_crc32c_hw(uint32_t c, const uint8_t *p,
								 size_t len)
{
	uint64_t c64 = c;

	while (len && ((uintptr_t)p & 7)) {
		c64 = _mm_crc32_u8((uint32_t)c64, *p++);
		len--;
	}
	while (len >= 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		c64 = _mm_crc32_u64(c64, v);
		p += 8;
		len -= 8;
	}
	while (len--)
		c64 = _mm_crc32_u8((uint32_t)c64, *p++);
	return (uint32_t)c64;
}
#endif

uint32_t gw_crc32c(uint32_t crc, const void *data, size_t len)
{
	const uint8_t *p = data;

#if defined(__x86_64__)
	if (crc32c_hw)
		return ~gw_crc32c_hw(~crc, p, len);
#endif
	return ~gw_crc32c_sw(~crc, p, len);
}
