// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: the gateway's JSON configuration, as `isergwd --config` reads it. Any input
 * must give either a parsed configuration or a list of errors, never a crash or a leak.
 */
#include <stddef.h>
#include <stdint.h>

#include "conf.h"
#include "gw_log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gw_errlist errs;
	struct ctl_config cfg = { 0 };
	json_error_t jerr;
	json_t *root;

	gw_log_set_level(GW_LOG_ERR);
	root = json_loadb((const char *)data, size, 0, &jerr);
	if (!root)
		return 0;
	gw_errlist_init(&errs);
	if (conf_parse(root, &cfg, &errs) == 0)
		conf_free(&cfg);
	else if (errs.n == 0)
		__builtin_trap();	/* a refusal must say why */
	gw_errlist_fini(&errs);
	json_decref(root);
	return 0;
}
