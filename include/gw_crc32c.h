/* SPDX-License-Identifier: MIT */
/* CRC32C (Castagnoli), as iSCSI header and data digests use it (RFC 7143 §13.1, Appendix B.4).
 * Uses the SSE4.2 instruction when the CPU has it, a sliced table otherwise. */
#ifndef GW_CRC32C_H
#define GW_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Start with crc = 0; feed pieces in order: gw_crc32c(gw_crc32c(0, a, n), b, m). */
uint32_t gw_crc32c(uint32_t crc, const void *data, size_t len);

#endif
