// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: login key negotiation. The input is split into a few Login Request data
 * segments (at 0xff bytes) fed in order through the security, operational and full feature
 * stages, leading connection, as the login code would. Must never crash or leak, and every
 * answer must be well-formed "key=value\0" text.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gw_log.h"
#include "gw_list.h"
#include "isc_param.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_answers(const struct gw_buf *b)
{
	struct isc_kvlist l;

	if (!b->len)
		return;
	isc_kvlist_init(&l);
	/* The target's own answers must parse as a key list. */
	if (isc_kvlist_parse(&l, b->data, b->len) != 0)
		__builtin_trap();
	isc_kvlist_fini(&l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const enum isc_stage stages[] = { ISC_STAGE_SECURITY, ISC_STAGE_OPERATIONAL,
						 ISC_STAGE_OPERATIONAL, ISC_STAGE_FFP };
	struct isc_neg_init in = { .tpgt = 1, .leading = true, .target_alias = "fuzz" };
	struct isc_neg *neg;
	size_t pos = 0;
	unsigned int i;

	gw_log_set_level(GW_LOG_ERR);
	if (isc_neg_create(&in, &neg))
		return 0;
	for (i = 0; i < GW_ARRAY_SIZE(stages) && pos <= size; i++) {
		const uint8_t *end = memchr(data + pos, 0xff, size - pos);
		size_t len = end ? (size_t)(end - (data + pos)) : size - pos;
		struct isc_kvlist keys;
		struct gw_buf resp;
		uint16_t status = 0;
		int r;

		isc_kvlist_init(&keys);
		gw_buf_init(&resp);
		r = isc_kvlist_parse(&keys, data + pos, len);
		if (r == 0) {
			r = isc_neg_process(neg, stages[i], &keys, &resp, &status);
			if (r == 0 && i + 1 < GW_ARRAY_SIZE(stages))
				r = isc_neg_transit(neg, stages[i], stages[i + 1], &resp, &status);
			if (r < 0 && status == 0)
				__builtin_trap();	/* a fatal error needs a login status */
			check_answers(&resp);
		}
		isc_kvlist_fini(&keys);
		gw_buf_fini(&resp);
		if (r < 0)
			break;
		pos += len + 1;
	}
	isc_neg_destroy(neg);
	return 0;
}
