// SPDX-License-Identifier: MIT
/*
 * /api/v1/bonds and /api/v1/rdma: status read from sysfs on every GET, with the desired bond
 * settings and their drift from agent/net (api_net.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_agent.h"
#include "api_r.h"
#include "api_sysfs.h"
#include "gw_log.h"

/* ---- handlers ---------------------------------------------------------------------------- */

static ssize_t desired_index(struct api_net *n, const char *name)
{
	return api_net_find(json_object_get(n->desired, "bonds"), name);
}

/* Status plus desired, drift and the RDMA devices on it (new reference). */
static json_t *bond_view(struct api_net *n, const char *name, json_t *status, const json_t *rdma)
{
	ssize_t di = desired_index(n, name);
	json_t *o = status ? json_incref(status) : json_pack("{s:s}", "name", name);
	json_t *desired = di >= 0 ? json_array_get(json_object_get(n->desired, "bonds"), di)
				  : NULL;
	json_t *devs = json_array(), *dev;
	size_t i;

	json_object_set_new(o, "present", json_boolean(status != NULL));
	json_object_set(o, "desired", desired ? desired : json_null());
	json_object_set_new(o, "drift", desired ? api_bond_drift(desired, status) : json_null());
	json_array_foreach(rdma, i, dev) {
		const char *nd = json_string_value(json_object_get(dev, "netdev"));

		if (nd && !strcmp(nd, name))
			json_array_append(devs, json_object_get(dev, "name"));
	}
	/* RDMA over an active-backup bond needs the bond to take the active slave's MAC:
	 * rdma_cm cannot follow a MAC moved under it (DESIGN.md). Said, not refused. */
	if (json_array_size(devs) && status) {
		const char *mode = json_string_value(json_object_get(status, "mode"));
		const char *fom = json_string_value(json_object_get(status, "fail_over_mac"));

		if (mode && !strcmp(mode, "active-backup") && (!fom || strcmp(fom, "active")))
			json_object_set_new(o, "warnings", json_pack(
				"[s]", "RDMA runs on this bond: fail_over_mac must be \"active\" "
				"or a slave failover breaks every RDMA connection for good"));
	}
	json_object_set_new(o, "rdma_devices", devs);
	return o;
}

int api_h_bonds_list(struct api_req *r)
{
	struct api_net *n = &r->ag->net;
	const char *root = api_sysfs_root();
	json_t *st = api_sysfs_bonds(root), *rdma = api_sysfs_rdma(root);
	json_t *out = json_array(), *b;
	size_t i;

	json_array_foreach(st, i, b)
		json_array_append_new(out, bond_view(n, json_string_value(json_object_get(b, "name")),
						     b, rdma));
	/* Desired bonds the host does not have are listed too: that is the largest drift. */
	json_array_foreach(json_object_get(n->desired, "bonds"), i, b) {
		const char *name = json_string_value(json_object_get(b, "name"));

		if (api_conf_find(st, "name", name) < 0)
			json_array_append_new(out, bond_view(n, name, NULL, rdma));
	}
	json_decref(st);
	json_decref(rdma);
	api_reply_json(r, 200, json_pack("{s:o}", "bonds", out));
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
	const char *root = api_sysfs_root();
	const char *name = r->params[0];
	json_t *st = api_sysfs_bond(root, name), *rdma, *view;

	if (!st && desired_index(&r->ag->net, name) < 0) {
		api_reply_err(r, API_E_NOT_FOUND, "bond", "no bond %s on this host and no desired "
			      "settings for it", name);
		json_decref(applied);
		return;
	}
	rdma = api_sysfs_rdma(root);
	view = bond_view(&r->ag->net, name, st, rdma);
	if (applied)
		json_object_set_new(view, "applied", applied);
	api_reply_json(r, status, view);
	json_decref(st);
	json_decref(rdma);
}

int api_h_bond_get(struct api_req *r)
{
	if (bond_param(r))
		reply_bond(r, 200, NULL);
	return 0;
}

int api_h_bond_put(struct api_req *r)
{
	struct api_net *n = &r->ag->net;
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
	struct api_net *n = &r->ag->net;
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
	api_reply_json(r, 200, json_pack("{s:o}", "devices", api_sysfs_rdma(api_sysfs_root())));
	return 0;
}

/* ---- metrics ----------------------------------------------------------------------------- */

void api_metrics_net(struct gw_buf *b, struct api_agent *ag)
{
	struct api_net *n = &ag->net;
	uint64_t now = gw_now_ms();
	json_t *bond, *s, *dev, *p;
	size_t i, j;

	/* The poll keeps it fresh; a loop too busy to run it still gets sysfs read here. */
	if (!n->bonds || now - n->read_ms >= 2000)
		api_net_refresh(n);
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
	     "Link failures of the bond's slaves (sum of link_failure_count): each one on the "
	     "active slave is a failover.");
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
}
