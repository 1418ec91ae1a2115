// SPDX-License-Identifier: MIT
/*
 * /api/v1/bonds and /api/v1/rdma (api_net.h): status read from sysfs on every GET, desired
 * bond settings kept in STATE_DIR/net.json, and the drift between the two.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api_agent.h"
#include "api_r.h"
#include "api_sysfs.h"
#include "gw_log.h"

static const char *const bond_modes[] = {
	"balance-rr", "active-backup", "balance-xor", "broadcast", "802.3ad", "balance-tlb",
	"balance-alb", NULL,
};
static const char *const fom_values[] = { "none", "active", "follow", NULL };

static bool in_list(const char *s, const char *const *l)
{
	for (; s && *l; l++)
		if (!strcmp(s, *l))
			return true;
	return false;
}

/* ---- desired settings -------------------------------------------------------------------- */

static const char *str(const json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static bool same(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

/* Reads sysfs again and reports what changed since the last read as events. */
static void net_refresh(struct api_agent *ag)
{
	struct api_net *n = &ag->net;
	const char *root = api_sysfs_root();
	json_t *bonds = api_sysfs_bonds(root), *rdma = api_sysfs_rdma(root), *b, *d, *p;
	size_t i, j;

	if (n->bonds) {
		json_array_foreach(bonds, i, b) {
			ssize_t k = api_conf_find(n->bonds, "name", str(b, "name"));
			const char *was = k >= 0 ? str(json_array_get(n->bonds, k), "active_slave")
						 : NULL;

			if (k >= 0 && !same(was, str(b, "active_slave")))
				api_event(&ag->events, "bond", json_pack(
					"{s:s, s:s?, s:s?, s:O}", "bond", str(b, "name"),
					"active_slave", str(b, "active_slave"), "previous", was,
					"failovers", json_object_get(b, "failovers")));
		}
	}
	if (n->rdma) {
		json_array_foreach(rdma, i, d) {
			ssize_t k = api_conf_find(n->rdma, "name", str(d, "name"));
			json_t *old = k >= 0 ? json_object_get(json_array_get(n->rdma, k), "ports")
					     : NULL;

			json_array_foreach(json_object_get(d, "ports"), j, p) {
				const char *was = str(json_array_get(old, j), "state");

				if (old && j < json_array_size(old) && !same(was, str(p, "state")))
					api_event(&ag->events, "rdma", json_pack(
						"{s:s, s:O, s:s?, s:s?, s:O}", "device", str(d, "name"),
						"port", json_object_get(p, "port"), "state",
						str(p, "state"), "previous", was, "netdev",
						json_object_get(p, "netdev")));
			}
		}
	}
	json_decref(n->bonds);
	json_decref(n->rdma);
	n->bonds = bonds;
	n->rdma = rdma;
	n->read_ms = gw_now_ms();
}

static void on_net_poll(struct gw_timer *t)
{
	struct api_net *n = gw_container_of(t, struct api_net, poll);

	net_refresh(gw_container_of(n, struct api_agent, net));
}

static int net_poll_start(struct api_agent *ag)
{
	struct api_net *n = &ag->net;
	int r = gw_timer_init(&n->poll, ag->loop, on_net_poll);

	if (r)
		return r;
	n->poll_on = true;
	net_refresh(ag);
	return gw_timer_arm(&n->poll, 1000, 1000);
}

int api_net_init(struct api_agent *ag)
{
	struct api_net *n = &ag->net;
	json_error_t je;
	json_t *bond;
	size_t i;
	int r;

	memset(n, 0, sizeof(*n));
	if (asprintf(&n->path, "%s/net.json", ag->conf.state_dir) < 0) {
		n->path = NULL;
		return -ENOMEM;
	}
	n->desired = json_load_file(n->path, 0, &je);
	if (!n->desired) {
		if (access(n->path, F_OK) == 0) {
			gw_err("agent", "%s: line %d column %d: %s", n->path, je.line, je.column,
			       je.text);
			goto bad;
		}
		n->desired = json_pack("{s:[]}", "bonds");
		if (!n->desired) {
			api_net_fini(ag);
			return -ENOMEM;
		}
		goto poll;
	}
	if (!json_is_array(json_object_get(n->desired, "bonds"))) {
		gw_err("agent", "%s: \"bonds\" must be an array", n->path);
		goto bad;
	}
	json_array_foreach(json_object_get(n->desired, "bonds"), i, bond) {
		struct gw_errlist errs;
		const char *name = json_string_value(json_object_get(bond, "name"));
		char *j;

		gw_errlist_init(&errs);
		api_bond_check(bond, name, &errs);
		if (errs.n) {
			j = gw_errlist_join(&errs);
			gw_err("agent", "%s: bonds[%zu]: %s", n->path, i, j ? j : "invalid");
			free(j);
			gw_errlist_fini(&errs);
			goto bad;
		}
		gw_errlist_fini(&errs);
	}
poll:
	r = net_poll_start(ag);
	if (r)
		api_net_fini(ag);
	return r;
bad:
	api_net_fini(ag);
	return -EINVAL;
}

void api_net_fini(struct api_agent *ag)
{
	struct api_net *n = &ag->net;

	if (n->poll_on)
		gw_timer_fini(&n->poll);
	json_decref(n->desired);
	json_decref(n->bonds);
	json_decref(n->rdma);
	free(n->path);
	memset(n, 0, sizeof(*n));
}

static int net_save(struct api_net *n, json_t *desired)
{
	char *text = json_dumps(desired, JSON_INDENT(2) | JSON_SORT_KEYS);
	int r;

	if (!text)
		return -ENOMEM;
	r = api_write_atomic(n->path, text, strlen(text), 0600);
	free(text);
	return r;
}

void api_bond_check(const json_t *bond, const char *name, struct gw_errlist *errs)
{
	const char *key, *mode, *fom, *primary;
	json_t *v, *slaves;
	size_t i, j;

	if (!json_is_object(bond)) {
		gw_errlist_add(errs, "", "a bond is a JSON object");
		return;
	}
	if (!name || !api_ifname_ok(name))
		gw_errlist_add(errs, "name", "not an interface name (1..15 characters, no '/', "
			       "':' or spaces)");
	json_object_foreach((json_t *)bond, key, v) {
		if (strcmp(key, "name") && strcmp(key, "mode") && strcmp(key, "fail_over_mac") &&
		    strcmp(key, "slaves") && strcmp(key, "primary"))
			gw_errlist_add(errs, key, "unknown field (name, mode, fail_over_mac, "
				       "slaves, primary)");
	}
	v = json_object_get(bond, "name");
	if (v && (!json_is_string(v) || (name && strcmp(json_string_value(v), name))))
		gw_errlist_add(errs, "name", "must be the bond's name from the path, \"%s\"",
			       name ? name : "");
	v = json_object_get(bond, "mode");
	mode = json_string_value(v);
	if (v && !in_list(mode, bond_modes))
		gw_errlist_add(errs, "mode", "one of balance-rr, active-backup, balance-xor, "
			       "broadcast, 802.3ad, balance-tlb, balance-alb");
	v = json_object_get(bond, "fail_over_mac");
	fom = json_string_value(v);
	if (v && !in_list(fom, fom_values))
		gw_errlist_add(errs, "fail_over_mac", "one of none, active, follow");
	slaves = json_object_get(bond, "slaves");
	if (slaves && !json_is_array(slaves))
		gw_errlist_add(errs, "slaves", "a list of interface names");
	json_array_foreach(slaves, i, v) {
		char f[32];

		snprintf(f, sizeof(f), "slaves[%zu]", i);
		if (!api_ifname_ok(json_string_value(v))) {
			gw_errlist_add(errs, f, "not an interface name");
			continue;
		}
		for (j = 0; j < i; j++)
			if (json_equal(v, json_array_get(slaves, j)))
				gw_errlist_add(errs, f, "\"%s\" is listed twice",
					       json_string_value(v));
	}
	v = json_object_get(bond, "primary");
	primary = json_string_value(v);
	if (v && !json_is_string(v)) {
		gw_errlist_add(errs, "primary", "an interface name, or \"\" for none");
	} else if (primary && *primary) {
		bool found = false;

		json_array_foreach(slaves, i, v)
			if (json_is_string(v) && !strcmp(json_string_value(v), primary))
				found = true;
		if (!found)
			gw_errlist_add(errs, "primary", "\"%s\" is not one of the slaves", primary);
		else if (mode && strcmp(mode, "active-backup") && strcmp(mode, "balance-tlb") &&
			 strcmp(mode, "balance-alb"))
			gw_errlist_add(errs, "primary", "only active-backup, balance-tlb and "
				       "balance-alb have a primary");
	}
}

/* ---- drift ------------------------------------------------------------------------------- */

static void drift_add(json_t *d, const char *field, json_t *want, json_t *have)
{
	json_array_append_new(d, json_pack("{s:s, s:O, s:O}", "field", field, "desired", want,
					   "actual", have ? have : json_null()));
}

static json_t *sorted_names(const json_t *arr, const char *key)
{
	json_t *out = json_array(), *v;
	size_t i, j;

	json_array_foreach(arr, i, v) {
		json_t *s = key ? json_object_get(v, key) : v;

		if (!json_is_string(s))
			continue;
		for (j = 0; j < json_array_size(out); j++)
			if (strcmp(json_string_value(s), json_string_value(json_array_get(out, j))) < 0)
				break;
		json_array_insert(out, j, s);
	}
	return out;
}

json_t *api_bond_drift(const json_t *desired, const json_t *status)
{
	static const char *const simple[] = { "mode", "fail_over_mac", NULL };
	json_t *d = json_array(), *want, *have;
	const char *const *k;

	if (!status) {
		drift_add(d, "name", json_object_get(desired, "name"), NULL);
		return d;
	}
	for (k = simple; *k; k++) {
		want = json_object_get(desired, *k);
		have = json_object_get(status, *k);
		if (want && !json_equal(want, have))
			drift_add(d, *k, want, have);
	}
	want = json_object_get(desired, "slaves");
	if (want) {
		json_t *a = sorted_names(want, NULL);
		json_t *b = sorted_names(json_object_get(status, "slaves"), "name");

		if (!json_equal(a, b))
			drift_add(d, "slaves", a, b);
		json_decref(a);
		json_decref(b);
	}
	want = json_object_get(desired, "primary");
	if (want) {
		have = json_object_get(status, "primary");
		/* The kernel shows no primary as an empty file. */
		if (strcmp(json_string_value(want), json_is_string(have) ?
			   json_string_value(have) : ""))
			drift_add(d, "primary", want, have);
	}
	return d;
}

/* ---- handlers ---------------------------------------------------------------------------- */

static ssize_t desired_index(struct api_net *n, const char *name)
{
	return api_conf_find(json_object_get(n->desired, "bonds"), "name", name);
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

static void reply_bond(struct api_req *r, unsigned int status)
{
	const char *root = api_sysfs_root();
	const char *name = r->params[0];
	json_t *st = api_sysfs_bond(root, name), *rdma;

	if (!st && desired_index(&r->ag->net, name) < 0) {
		api_reply_err(r, API_E_NOT_FOUND, "bond", "no bond %s on this host and no desired "
			      "settings for it", name);
		return;
	}
	rdma = api_sysfs_rdma(root);
	api_reply_json(r, status, bond_view(&r->ag->net, name, st, rdma));
	json_decref(st);
	json_decref(rdma);
}

int api_h_bond_get(struct api_req *r)
{
	if (bond_param(r))
		reply_bond(r, 200);
	return 0;
}

int api_h_bond_put(struct api_req *r)
{
	struct api_net *n = &r->ag->net;
	struct gw_errlist errs;
	json_t *body, *desired, *bonds;
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
	desired = json_deep_copy(n->desired);
	bonds = json_object_get(desired, "bonds");
	i = api_conf_find(bonds, "name", r->params[0]);
	if (i >= 0)
		json_array_set_new(bonds, (size_t)i, body);
	else
		json_array_append_new(bonds, body);
	rc = net_save(n, desired);
	if (rc) {
		json_decref(desired);
		return rc;
	}
	json_decref(n->desired);
	n->desired = desired;
	gw_info("agent", "desired settings of bond %s stored", r->params[0]);
	reply_bond(r, 200);
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
	rc = net_save(n, desired);
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
		net_refresh(ag);
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
		ssize_t k = api_conf_find(n->bonds, "name", name);
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
