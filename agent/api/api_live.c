// SPDX-License-Identifier: MIT
/*
 * Live state beside the desired configuration, for readers such as the dashboard: whether each
 * portal is listening, from the gateway's last polled "state" (never a call to the gateway, so
 * a list stays as cheap as before). The reason is the agent's view when the gateway cannot say.
 */
#include <string.h>

#include "api_agent.h"
#include "api_gwc.h"
#include "api_r.h"
#include "api_store.h"

json_t *api_live_portal(struct api_agent *ag, const char *name)
{
	const json_t *p;
	size_t i;

	if (!ag->gwc)
		return json_pack("{s:n, s:s}", "listening", "reason",
				 "the agent drives no gateway (--gateway-socket)");
	if (!api_gwc_connected(ag->gwc) || !ag->gw_state)
		return json_pack("{s:n, s:s}", "listening", "reason",
				 "the gateway is not connected");
	json_array_foreach(json_object_get(ag->gw_state, "portals"), i, p) {
		const char *n = json_string_value(json_object_get(p, "name"));
		const char *bound = json_string_value(json_object_get(p, "bound"));

		if (!n || !name || strcmp(n, name))
			continue;
		if (json_is_true(json_object_get(p, "listening")))
			return json_pack("{s:b, s:s?}", "listening", 1, "bound", bound);
		return json_pack("{s:b, s:s}", "listening", 0, "reason",
				 "the gateway has the portal but no socket (see its log)");
	}
	if (ag->apply.generation != api_store_generation(ag->store) || ag->apply.error)
		return json_pack("{s:b, s:s}", "listening", 0, "reason",
				 ag->apply.error ? ag->apply.error :
				 "not applied yet: the gateway runs an older generation");
	return json_pack("{s:b, s:s}", "listening", 0, "reason",
			 "the gateway does not report this portal");
}
