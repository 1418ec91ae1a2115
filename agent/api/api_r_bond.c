// SPDX-License-Identifier: MIT
/*
 * PUT /api/v1/bonds/{bond}?apply=true / ?dry_run=true: the HTTP side of agent/net's bond
 * engine (api_bond.h). A refusal is 409 in_use, a request that cannot be applied 422 invalid,
 * a step the host refused 422 apply_failed (after the rollback); each names its reason.
 */
#include <string.h>

#include "api_agent.h"
#include "api_bond.h"
#include "api_gwc.h"
#include "api_net.h"
#include "api_r.h"

int api_bond_put_apply(struct api_req *r, const json_t *desired, json_t **applied)
{
	struct api_agent *ag = r->ag;
	bool dry = api_req_flag(r, "dry_run");
	struct api_bond_ctx ctx = {
		.networkd_dir = ag->conf->networkd_dir && *ag->conf->networkd_dir ?
				ag->conf->networkd_dir : API_NETWORKD_DIR,
		.listen = ag->conf->listen,
		.force = api_req_flag(r, "force"),
		.gw_state = api_gwc_connected(ag->gwc) ? ag->gw_state : NULL,
	};
	struct api_bond_result res;
	ssize_t k;

	*applied = NULL;
	if (!dry && !api_req_flag(r, "apply"))
		return 0;
	/* The bond's present settings are the gateway's model: without it a plan would guess,
	 * so a dry run is refused as an apply is, and nothing changes. */
	if (!ag->net->have_model) {
		api_reply_err(r, API_E_UNAVAILABLE, NULL, "the gateway's network model is not "
			      "available: %s needs the gateway running (--gateway-socket)",
			      dry ? "a dry run" : "apply");
		return 1;
	}
	k = api_net_find(ag->net->bonds, json_string_value(json_object_get(desired, "name")));
	ctx.status = k >= 0 ? json_array_get(ag->net->bonds, (size_t)k) : NULL;
	api_bond_apply(&ctx, desired, dry, &res);
	switch (res.verdict) {
	case API_BOND_OK:
		break;
	case API_BOND_REFUSED:
		api_reply_err(r, API_E_IN_USE, res.field[0] ? res.field : NULL, "%s", res.message);
		goto done;
	case API_BOND_INVALID:
		api_reply_err(r, API_E_INVALID, res.field[0] ? res.field : NULL, "%s", res.message);
		goto done;
	case API_BOND_FAILED:
		api_reply_err(r, API_E_APPLY_FAILED, NULL, "%s", res.message);
		goto done;
	}
	if (dry) {
		const char *name = json_string_value(json_object_get(desired, "name"));

		api_reply_json(r, 200, json_pack("{s:b, s:s, s:O, s:O}", "dry_run", 1, "bond",
						 name, "steps", res.steps, "files", res.files));
		goto done;
	}
	*applied = json_pack("{s:O, s:O}", "steps", res.steps, "files", res.files);
	api_bond_result_fini(&res);
	return 0;
done:
	api_bond_result_fini(&res);
	return 1;
}
