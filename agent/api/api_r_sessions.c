// SPDX-License-Identifier: MIT
/*
 * /api/v1/sessions: live state, so it always asks the gateway (503 when it is away).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_agent.h"
#include "api_gwc.h"
#include "api_r.h"

static void on_state(void *ctx, int err, json_t *reply)
{
	struct api_req *r = ctx;

	if (err < 0) {
		api_reply_errno(r, err, NULL);
	} else if (!json_is_true(json_object_get(reply, "ok"))) {
		api_reply_err(r, API_E_UNAVAILABLE, NULL, "the gateway could not report its state");
	} else {
		json_t *s = json_object_get(reply, "sessions");

		api_reply_json(r, 200,
			       json_pack("{s:o}", "sessions", s ? json_incref(s) : json_array()));
	}
	api_req_resume(r);
}

int api_h_sessions_list(struct api_req *r)
{
	int rc = api_gw_state(r->ag, on_state, r);

	if (rc)
		return rc;
	api_req_suspend(r);
	return 0;
}

static void on_drop(void *ctx, int err, json_t *reply)
{
	struct api_req *r = ctx;

	if (err < 0) {
		api_reply_errno(r, err, NULL);
	} else if (json_is_true(json_object_get(reply, "ok"))) {
		api_reply_text(r, 204, NULL, NULL, 0);
	} else {
		const char *code = json_string_value(json_object_get(reply, "code"));
		const char *msg = json_string_value(json_object_get(reply, "message"));

		if (code && !strcmp(code, "not_found"))
			api_reply_err(r, API_E_NOT_FOUND, "tsih", "%s",
				      msg ? msg : "no such session");
		else
			api_reply_err(r, API_E_APPLY_FAILED, NULL, "%s", msg ? msg : "refused");
	}
	api_req_resume(r);
}

int api_h_session_drop(struct api_req *r)
{
	unsigned long v;
	char *end;
	int rc;

	errno = 0;
	v = strtoul(r->params[0], &end, 10);
	if (errno || *end || !*r->params[0] || v == 0 || v > 65535) {
		api_reply_err(r, API_E_BAD_REQUEST, "tsih", "\"%s\" is not a TSIH (1..65535)",
			      r->params[0]);
		return 0;
	}
	if (!api_gwc_connected(r->ag->gwc))
		return -ENOTCONN;
	rc = api_gwc_call(r->ag->gwc, json_pack("{s:s, s:i}", "op", "drop_session", "tsih",
						 (int)v), on_drop, r);
	if (rc)
		return rc;
	api_req_suspend(r);
	return 0;
}

/* Live state changed: a login or logout event for each session that came or went. */
static const json_t *find_tsih(const json_t *sessions, json_int_t tsih)
{
	const json_t *s;
	size_t i;

	json_array_foreach(sessions, i, s)
		if (json_integer_value(json_object_get(s, "tsih")) == tsih)
			return s;
	return NULL;
}

void api_events_state(struct api_agent *ag, const json_t *old, const json_t *cur)
{
	const json_t *os = json_object_get(old, "sessions"), *cs = json_object_get(cur, "sessions");
	const json_t *s;
	size_t i;

	json_array_foreach(cs, i, s)
		if (!find_tsih(os, json_integer_value(json_object_get(s, "tsih"))))
			api_event(ag->events, "session", json_pack("{s:s, s:O}", "action", "login",
							   "session", s));
	json_array_foreach(os, i, s)
		if (!find_tsih(cs, json_integer_value(json_object_get(s, "tsih"))))
			api_event(ag->events, "session", json_pack("{s:s, s:O}", "action", "logout",
							   "session", s));
}
