// SPDX-License-Identifier: MIT
/*
 * Bond and RDMA port state (api_net.h): the gateway's network model in the REST shapes, its
 * events as the agent's, desired bond settings kept in STATE_DIR/net.json, and the drift
 * between the two.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api_bond.h"
#include "api_net.h"
#include "api_store.h"
#include "gw_conf.h"
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

ssize_t api_net_find(const json_t *arr, const char *name)
{
	const json_t *e;
	size_t i;

	json_array_foreach(arr, i, e)
		if (same(str(e, "name"), name))
			return (ssize_t)i;
	return -1;
}

bool api_ifname_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;
	const char *p;

	if (n == 0 || n > 15 || !strcmp(name, ".") || !strcmp(name, ".."))
		return false;
	for (p = name; *p; p++)
		if (*p == '/' || *p == ':' || (unsigned char)*p <= ' ' || *p == 0x7f)
			return false;
	return true;
}

/* ---- the gateway's model ----------------------------------------------------------------- */

static void net_event(struct api_net *n, const char *type, json_t *data)
{
	if (n->event && data)
		n->event(n->ctx, type, data);
	else
		json_decref(data);
}

/* A bond of the gateway's model in the REST shape (docs/API.md): the model's object, with
 * "primary" "" rather than null (as sysfs shows no primary) and its verdicts. */
static json_t *rest_bond(const json_t *gb, const json_t *verdicts)
{
	json_t *b = json_deep_copy(gb), *vs = json_array(), *v;
	char obj[64];
	size_t i;

	if (!json_is_string(json_object_get(b, "primary")))
		json_object_set_new(b, "primary", json_string(""));
	snprintf(obj, sizeof(obj), "bond/%s", str(gb, "name") ?: "");
	json_array_foreach(verdicts, i, v)
		if (same(str(v, "object"), obj))
			json_array_append(vs, v);
	json_object_set_new(b, "verdicts", vs);
	return b;
}

/* RDMA ports grouped by device: [{"name","netdev","node_guid","ports":[...]}], sorted. */
static json_t *rest_rdma(const json_t *ports)
{
	json_t *devs = json_array(), *p, *d;
	size_t i, j;

	json_array_foreach(ports, i, p) {
		const char *dev = str(p, "device");
		ssize_t k = api_net_find(devs, dev);
		json_t *q;

		if (!dev)
			continue;
		if (k < 0) {
			for (j = 0; j < json_array_size(devs); j++)
				if (strcmp(dev, str(json_array_get(devs, j), "name")) < 0)
					break;
			const json_t *own = json_object_get(p, "device_netdev");

			d = json_pack("{s:s, s:O, s:O?, s:[]}", "name", dev, "netdev",
				      json_is_string(own) ? own
				      : json_object_get(p, "netdev") ?: json_null(),
				      "node_guid", json_object_get(p, "node_guid"), "ports");
			json_array_insert_new(devs, j, d);
		} else {
			d = json_array_get(devs, (size_t)k);
		}
		q = json_deep_copy(p);
		json_object_del(q, "device");
		json_object_del(q, "node_guid");
		json_object_del(q, "device_netdev");
		if (!json_object_get(q, "phys_state"))
			json_object_set_new(q, "phys_state", json_null());
		json_array_append_new(json_object_get(d, "ports"), q);
		/* The device's netdev is its first port's that names one. */
		if (json_is_null(json_object_get(d, "netdev")) && str(p, "netdev"))
			json_object_set(d, "netdev", json_object_get(p, "netdev"));
	}
	json_array_foreach(devs, i, d)
		if (!json_object_get(d, "node_guid"))
			json_object_set_new(d, "node_guid", json_null());
	return devs;
}

void api_net_set_model(struct api_net *n, const json_t *net)
{
	json_t *bonds = json_array(), *b, *ev;
	const json_t *verdicts = json_object_get(net, "verdicts");
	size_t i;

	json_array_foreach(json_object_get(net, "bonds"), i, b)
		json_array_append_new(bonds, rest_bond(b, verdicts));
	json_decref(n->bonds);
	json_decref(n->rdma);
	json_decref(n->verdicts);
	n->bonds = bonds;
	n->rdma = rest_rdma(json_object_get(net, "rdma_ports"));
	n->verdicts = json_is_array(verdicts) ? json_deep_copy(verdicts) : json_array();
	n->generation = (uint64_t)json_integer_value(json_object_get(net, "generation"));
	n->read_ms = gw_now_ms();
	n->changes++;
	n->have_model = true;
	/* The events this model includes: told now, so a client that reads after an event
	 * sees at least that state. */
	json_array_foreach(n->pending, i, ev)
		net_event(n, str(ev, "type"), json_incref(json_object_get(ev, "data")));
	json_array_clear(n->pending);
}

void api_net_gw_event(struct api_net *n, const char *type, const json_t *data)
{
	static const char *const port_states[] = { "NOP", "DOWN", "INIT", "ARMED", "ACTIVE",
						   "ACTIVE_DEFER" };
	json_t *ev = NULL;

	if (!type)
		return;
	if (!strcmp(type, "failover")) {
		ev = json_pack("{s:s?, s:s?, s:s?, s:O?, s:O?, s:O?, s:O?, s:O?, s:O?}",
			       "bond", str(data, "bond"), "active_slave", str(data, "new"),
			       "previous", str(data, "old"),
			       "failovers", json_object_get(data, "failovers"),
			       "mac", json_object_get(data, "new_mac"),
			       "previous_mac", json_object_get(data, "old_mac"),
			       "gid", json_object_get(data, "new_gid"),
			       "previous_gid", json_object_get(data, "old_gid"),
			       "time_ms", json_object_get(data, "time_ms"));
		type = "bond";
	} else if (!strcmp(type, "rdma")) {
		json_int_t s = json_integer_value(json_object_get(data, "state_num"));
		json_int_t o = json_integer_value(json_object_get(data, "previous_num"));

		ev = json_pack("{s:s?, s:O?, s:s, s:s, s:I, s:O?}", "device", str(data, "device"),
			       "port", json_object_get(data, "port"),
			       "state", s >= 0 && s <= 5 ? port_states[s] : "?",
			       "previous", o >= 0 && o <= 5 ? port_states[o] : "?",
			       "state_num", s, "netdev", json_object_get(data, "netdev"));
	} else if (!strcmp(type, "verdicts") || !strcmp(type, "link")) {
		ev = json_deep_copy(data);
		if (!strcmp(type, "verdicts"))
			type = "net_verdicts";
	}
	if (!ev)
		return;
	json_array_append_new(n->pending, json_pack("{s:s, s:o}", "type", type, "data", ev));
}

void api_net_gw_lost(struct api_net *n)
{
	json_t *none = json_pack("{s:[], s:[], s:[]}", "bonds", "rdma_ports", "verdicts");

	/* What the gateway said is no longer known to hold: nothing rather than stale. */
	json_array_clear(n->pending);
	api_net_set_model(n, none);
	n->have_model = false;
	json_decref(none);
}

int api_net_init(struct api_net *n, const char *state_dir,
		 void (*event)(void *ctx, const char *type, json_t *data), void *ctx)
{
	json_error_t je;
	json_t *bond;
	size_t i;

	memset(n, 0, sizeof(*n));
	n->event = event;
	n->ctx = ctx;
	n->bonds = json_array();
	n->rdma = json_array();
	n->verdicts = json_array();
	n->pending = json_array();
	if (asprintf(&n->path, "%s/net.json", state_dir) < 0) {
		n->path = NULL;
		api_net_fini(n);
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
		if (!n->desired || !n->bonds || !n->rdma || !n->verdicts || !n->pending) {
			api_net_fini(n);
			return -ENOMEM;
		}
		return 0;
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
	return 0;
bad:
	api_net_fini(n);
	return -EINVAL;
}

void api_net_fini(struct api_net *n)
{
	json_decref(n->desired);
	json_decref(n->bonds);
	json_decref(n->rdma);
	json_decref(n->verdicts);
	json_decref(n->pending);
	free(n->path);
	memset(n, 0, sizeof(*n));
}

int api_net_save(struct api_net *n, json_t *desired)
{
	char *text = json_dumps(desired, JSON_INDENT(2) | JSON_SORT_KEYS);
	int r;

	if (!text)
		return -ENOMEM;
	r = api_write_atomic(n->path, text, strlen(text), 0600);
	free(text);
	if (!r)
		n->changes++;	/* the caller takes desired as the new settings */
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
		    strcmp(key, "slaves") && strcmp(key, "primary") && strcmp(key, "miimon") &&
		    strcmp(key, "num_grat_arp"))
			gw_errlist_add(errs, key, "unknown field (name, mode, fail_over_mac, "
				       "slaves, primary, miimon, num_grat_arp)");
	}
	v = json_object_get(bond, "miimon");
	if (v && (!json_is_integer(v) || json_integer_value(v) < 0 ||
		  json_integer_value(v) > API_BOND_MIIMON_MAX))
		gw_errlist_add(errs, "miimon", "milliseconds between link checks, 0..%d "
			       "(0: no MII monitoring)", API_BOND_MIIMON_MAX);
	v = json_object_get(bond, "num_grat_arp");
	if (v && (!json_is_integer(v) || json_integer_value(v) < 0 ||
		  json_integer_value(v) > API_BOND_GRAT_ARP_MAX))
		gw_errlist_add(errs, "num_grat_arp", "gratuitous ARPs after a failover, 0..%d",
			       API_BOND_GRAT_ARP_MAX);
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
	static const char *const simple[] = { "mode", "fail_over_mac", "miimon", NULL };
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
