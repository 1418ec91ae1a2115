// SPDX-License-Identifier: MIT
/*
 * /api/v1/bonds and /api/v1/rdma: the gateway's network model (bonds, RDMA ports, verdicts) as
 * agent/net last read it, with the desired bond settings and their drift (api_net.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_agent.h"
#include "api_net.h"
#include "api_r.h"
#include "gw_log.h"

/* ---- handlers ---------------------------------------------------------------------------- */

static ssize_t desired_index(struct api_net *n, const char *name)
{
	return api_net_find(json_object_get(n->desired, "bonds"), name);
}

/* Status plus desired, drift, the RDMA devices on it and its verdicts (new reference). */
static json_t *bond_view(struct api_net *n, const char *name, const json_t *status)
{
	ssize_t di = desired_index(n, name);
	json_t *o = status ? json_deep_copy(status) : json_pack("{s:s, s:[]}", "name", name,
								 "verdicts");
	json_t *desired = di >= 0 ? json_array_get(json_object_get(n->desired, "bonds"), di)
				  : NULL;
	json_t *devs = json_array(), *dev, *warn = json_array(), *v;
	size_t i;

	json_object_set_new(o, "present", json_boolean(status != NULL));
	json_object_set(o, "desired", desired ? desired : json_null());
	json_object_set_new(o, "drift", desired ? api_bond_drift(desired, status) : json_null());
	json_array_foreach(n->rdma, i, dev) {
		const char *nd = json_string_value(json_object_get(dev, "netdev"));

		if (nd && !strcmp(nd, name))
			json_array_append(devs, json_object_get(dev, "name"));
	}
	json_object_set_new(o, "rdma_devices", devs);
	/* The gateway's verdicts on this bond (net_verdict.c): the ones to act on, as text. */
	json_array_foreach(json_object_get(o, "verdicts"), i, v) {
		const char *sev = json_string_value(json_object_get(v, "severity"));

		if (sev && strcmp(sev, "info"))
			json_array_append(warn, json_object_get(v, "message"));
	}
	if (json_array_size(warn))
		json_object_set_new(o, "warnings", warn);
	else
		json_decref(warn);
	return o;
}

static const json_t *bond_status(struct api_net *n, const char *name)
{
	ssize_t k = api_net_find(n->bonds, name);

	return k >= 0 ? json_array_get(n->bonds, (size_t)k) : NULL;
}

int api_h_bonds_list(struct api_req *r)
{
	struct api_net *n = r->ag->net;
	json_t *out = json_array(), *b;
	size_t i;

	json_array_foreach(n->bonds, i, b)
		json_array_append_new(out, bond_view(n, json_string_value(json_object_get(b, "name")),
						     b));
	/* Desired bonds the host does not have are listed too: that is the largest drift. */
	json_array_foreach(json_object_get(n->desired, "bonds"), i, b) {
		const char *name = json_string_value(json_object_get(b, "name"));

		if (!bond_status(n, name))
			json_array_append_new(out, bond_view(n, name, NULL));
	}
	/* Every verdict of the gateway's network model, the portals' included. */
	api_reply_json(r, 200, json_pack("{s:o, s:O, s:b}", "bonds", out, "verdicts",
					 n->verdicts, "gateway", n->have_model));
	return 0;
}

static bool bond_param(struct api_req *r)
{
	if (api_ifname_ok(r->params[0]))
		return true;
	api_reply_err(r, API_E_BAD_REQUEST, "bond", "\"%s\" is not an interface name",
		      r->params[0]);
	return false;
}

static void reply_bond(struct api_req *r, unsigned int status, json_t *applied)
{
	const char *name = r->params[0];
	const json_t *st = bond_status(r->ag->net, name);
	json_t *view;

	if (!st && desired_index(r->ag->net, name) < 0) {
		api_reply_err(r, API_E_NOT_FOUND, "bond", "no bond %s on this host and no desired "
			      "settings for it", name);
		json_decref(applied);
		return;
	}
	/* After an apply the gateway's model may not show the new bond yet (it follows
	 * the kernel by netlink events): the view then holds the desired settings and
	 * what was applied. */
	view = bond_view(r->ag->net, name, st);
	if (applied && view)
		json_object_set_new(view, "applied", applied);
	else
		json_decref(applied);
	api_reply_json(r, status, view);
}

int api_h_bond_get(struct api_req *r)
{
	if (bond_param(r))
		reply_bond(r, 200, NULL);
	return 0;
}

int api_h_bond_put(struct api_req *r)
{
	struct api_net *n = r->ag->net;
	struct gw_errlist errs;
	json_t *body, *desired, *bonds, *applied;
	ssize_t i;
	int rc;

	if (!bond_param(r))
		return 0;
	body = api_req_json(r);
	if (!body)
		return 0;
	gw_errlist_init(&errs);
	api_bond_check(body, r->params[0], &errs);
	if (errs.n) {
		api_reply_errlist(r, API_E_INVALID, &errs, NULL);
		gw_errlist_fini(&errs);
		json_decref(body);
		return 0;
	}
	gw_errlist_fini(&errs);
	json_object_set_new(body, "name", json_string(r->params[0]));
	/* ?apply / ?dry_run: the host first; desired is stored only once it runs them. */
	if (api_bond_put_apply(r, body, &applied)) {
		json_decref(body);
		return 0;
	}
	desired = json_deep_copy(n->desired);
	bonds = json_object_get(desired, "bonds");
	i = api_conf_find(bonds, "name", r->params[0]);
	if (i >= 0)
		json_array_set_new(bonds, (size_t)i, body);
	else
		json_array_append_new(bonds, body);
	rc = api_net_save(n, desired);
	if (rc) {
		json_decref(desired);
		json_decref(applied);
		return rc;
	}
	json_decref(n->desired);
	n->desired = desired;
	gw_info("agent", "desired settings of bond %s stored", r->params[0]);
	reply_bond(r, 200, applied);
	return 0;
}

int api_h_bond_delete(struct api_req *r)
{
	struct api_net *n = r->ag->net;
	json_t *desired;
	ssize_t i;
	int rc;

	if (!bond_param(r))
		return 0;
	i = desired_index(n, r->params[0]);
	if (i < 0) {
		api_reply_err(r, API_E_NOT_FOUND, "bond", "no desired settings for bond %s",
			      r->params[0]);
		return 0;
	}
	desired = json_deep_copy(n->desired);
	json_array_remove(json_object_get(desired, "bonds"), (size_t)i);
	rc = api_net_save(n, desired);
	if (rc) {
		json_decref(desired);
		return rc;
	}
	json_decref(n->desired);
	n->desired = desired;
	api_reply_text(r, 204, NULL, NULL, 0);
	return 0;
}

int api_h_rdma_list(struct api_req *r)
{
	api_reply_json(r, 200, json_pack("{s:O}", "devices", r->ag->net->rdma));
	return 0;
}

/* ---- metrics ----------------------------------------------------------------------------- */

void api_metrics_net(struct gw_buf *b, struct api_agent *ag)
{
	struct api_net *n = ag->net;
	json_t *bond, *s, *dev, *p;
	size_t i, j;

	/* The gateway's model as last read (on its "changed" event): nothing to read here. */
	api_prom_head(b, "isergw_bond_up", "gauge", "1 when the bond's MII status is up.");
	json_array_foreach(n->bonds, i, bond) {
		const char *ms = json_string_value(json_object_get(bond, "mii_status"));

		gw_buf_append(b, "isergw_bond_up{bond=\"", 21);
		api_prom_label(b, json_string_value(json_object_get(bond, "name")));
		gw_buf_printf(b, "\"} %d\n", ms && !strcmp(ms, "up"));
	}
	api_prom_head(b, "isergw_bond_active_slave", "gauge",
	     "1 for the bond's active slave, 0 for its other slaves.");
	json_array_foreach(n->bonds, i, bond) {
		const char *act = json_string_value(json_object_get(bond, "active_slave"));

		json_array_foreach(json_object_get(bond, "slaves"), j, s) {
			const char *sn = json_string_value(json_object_get(s, "name"));

			gw_buf_append(b, "isergw_bond_active_slave{bond=\"", 31);
			api_prom_label(b, json_string_value(json_object_get(bond, "name")));
			gw_buf_append(b, "\",slave=\"", 9);
			api_prom_label(b, sn);
			gw_buf_printf(b, "\"} %d\n", act && sn && !strcmp(act, sn));
		}
	}
	api_prom_head(b, "isergw_bond_failovers_total", "counter",
	     "Changes of the bond's active slave the gateway counted since it started.");
	json_array_foreach(n->bonds, i, bond) {
		gw_buf_append(b, "isergw_bond_failovers_total{bond=\"", 34);
		api_prom_label(b, json_string_value(json_object_get(bond, "name")));
		gw_buf_printf(b, "\"} %lld\n",
			      (long long)json_integer_value(json_object_get(bond, "failovers")));
	}
	api_prom_head(b, "isergw_bond_drift", "gauge",
	     "1 when a bond with desired settings differs from them (or is missing).");
	json_array_foreach(json_object_get(n->desired, "bonds"), i, p) {
		const char *name = json_string_value(json_object_get(p, "name"));
		ssize_t k = api_net_find(n->bonds, name);
		json_t *d = api_bond_drift(p, k >= 0 ? json_array_get(n->bonds, k) : NULL);

		gw_buf_append(b, "isergw_bond_drift{bond=\"", 24);
		api_prom_label(b, name);
		gw_buf_printf(b, "\"} %d\n", json_array_size(d) > 0);
		json_decref(d);
	}
	api_prom_head(b, "isergw_rdma_port_state", "gauge",
	     "RDMA port state as the kernel numbers it (1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE).");
	json_array_foreach(n->rdma, i, dev) {
		json_array_foreach(json_object_get(dev, "ports"), j, p) {
			gw_buf_append(b, "isergw_rdma_port_state{device=\"", 31);
			api_prom_label(b, json_string_value(json_object_get(dev, "name")));
			gw_buf_printf(b, "\",port=\"%lld\",netdev=\"",
				      (long long)json_integer_value(json_object_get(p, "port")));
			api_prom_label(b, json_string_value(json_object_get(p, "netdev")));
			gw_buf_printf(b, "\"} %lld\n",
				      (long long)json_integer_value(json_object_get(p, "state_num")));
		}
	}
	api_prom_head(b, "isergw_net_verdict", "gauge",
	     "1 per verdict of the gateway's network model that holds now (docs/CONTROL.md).");
	json_array_foreach(n->verdicts, i, p) {
		gw_buf_append(b, "isergw_net_verdict{id=\"", 23);
		api_prom_label(b, json_string_value(json_object_get(p, "id")));
		gw_buf_append(b, "\",severity=\"", 12);
		api_prom_label(b, json_string_value(json_object_get(p, "severity")));
		gw_buf_append(b, "\",object=\"", 10);
		api_prom_label(b, json_string_value(json_object_get(p, "object")));
		gw_buf_append(b, "\"} 1\n", 5);
	}
}
