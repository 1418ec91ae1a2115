// SPDX-License-Identifier: MIT
/*
 * /api/v1/config: the whole desired configuration. Export masks secrets; import replaces
 * everything (a masked secret written back keeps the stored one, so export -> edit -> import
 * works), and a dry run reports every error at once without changing anything.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_agent.h"
#include "api_r.h"
#include "api_store.h"

int api_h_config_get(struct api_req *r)
{
	char gen[32];

	snprintf(gen, sizeof(gen), "%llu", (unsigned long long)api_store_generation(r->ag->store));
	api_reply_etag(r);
	api_reply_header(r, "X-Isergw-Generation", gen);
	api_reply_json(r, 200, api_conf_mask(api_store_config(r->ag->store)));
	return 0;
}

/* Validation only: 200 {"valid": true} or 422 with every error. */
static int config_check(struct api_req *r, json_t *body)
{
	struct gw_errlist errs;

	api_conf_unmask(body, api_store_config(r->ag->store));
	gw_errlist_init(&errs);
	if (api_conf_keep_fixed(body, api_store_config(r->ag->store), &errs) ||
	    api_conf_validate(body, &errs) ||
	    api_bsdirs_check_config(&r->ag->bsdirs, body, api_store_config(r->ag->store), &errs))
		api_reply_errlist(r, API_E_INVALID, &errs, NULL);
	else
		api_reply_json(r, 200, json_pack("{s:b, s:I}", "valid", 1, "generation",
						 (json_int_t)api_store_generation(r->ag->store)));
	gw_errlist_fini(&errs);
	json_decref(body);
	return 0;
}

int api_h_config_validate(struct api_req *r)
{
	json_t *body = api_req_json(r);

	return body ? config_check(r, body) : 0;
}

int api_h_config_put(struct api_req *r)
{
	json_t *body = api_req_json(r), *cfg;

	if (!body)
		return 0;
	if (api_req_flag(r, "dry_run"))
		return config_check(r, body);
	/* For If-Match; the copy itself is not needed. */
	cfg = api_write_begin(r);
	if (!cfg) {
		json_decref(body);
		return 0;
	}
	json_decref(cfg);
	cfg = api_conf_mask(body);
	return api_write_finish(r, body, 200, cfg, NULL);
}
