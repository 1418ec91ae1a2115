// SPDX-License-Identifier: MIT
/*
 * Bond and RDMA port state (api_net.h): sysfs read every second with changes reported as
 * events, desired bond settings kept in STATE_DIR/net.json, and the drift between the two.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api_bond.h"
#include "api_net.h"
#include "api_store.h"
#include "api_sysfs.h"
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

/* Reads sysfs again and reports what changed since the last read as events. */
static void net_event(struct api_net *n, const char *type, json_t *data)
{
	if (n->event)
		n->event(n->ctx, type, data);
	else
		json_decref(data);
}

void api_net_refresh(struct api_net *n)
{
	const char *root = api_sysfs_root();
	json_t *bonds = api_sysfs_bonds(root), *rdma = api_sysfs_rdma(root), *b, *d, *p;
	size_t i, j;

	if (n->bonds) {
		json_array_foreach(bonds, i, b) {
			ssize_t k = api_net_find(n->bonds, str(b, "name"));
			json_t *ob = k >= 0 ? json_array_get(n->bonds, k) : NULL;
			const char *was = str(ob, "active_slave");

			/* A failover and back between two reads leaves the same active slave but
			 * not the same failure count: that is an event too. */
			if (ob && (!same(was, str(b, "active_slave")) ||
				   !json_equal(json_object_get(ob, "failovers"),
					       json_object_get(b, "failovers"))))
				net_event(n, "bond", json_pack(
					"{s:s, s:s?, s:s?, s:O}", "bond", str(b, "name"),
					"active_slave", str(b, "active_slave"), "previous", was,
					"failovers", json_object_get(b, "failovers")));
		}
	}
	if (n->rdma) {
		json_array_foreach(rdma, i, d) {
			ssize_t k = api_net_find(n->rdma, str(d, "name"));
			json_t *old = k >= 0 ? json_object_get(json_array_get(n->rdma, k), "ports")
					     : NULL;

			json_array_foreach(json_object_get(d, "ports"), j, p) {
				const char *was = str(json_array_get(old, j), "state");

				if (old && j < json_array_size(old) && !same(was, str(p, "state")))
					net_event(n, "rdma", json_pack(
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

	api_net_refresh(n);
}

static int net_poll_start(struct api_net *n, struct gw_loop *loop)
{
	int r = gw_timer_init(&n->poll, loop, on_net_poll);

	if (r)
		return r;
	n->poll_on = true;
	api_net_refresh(n);
	return gw_timer_arm(&n->poll, 1000, 1000);
}

int api_net_init(struct api_net *n, struct gw_loop *loop, const char *state_dir,
		 void (*event)(void *ctx, const char *type, json_t *data), void *ctx)
{
	json_error_t je;
	json_t *bond;
	size_t i;
	int r;

	memset(n, 0, sizeof(*n));
	n->event = event;
	n->ctx = ctx;
	if (asprintf(&n->path, "%s/net.json", state_dir) < 0) {
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
			api_net_fini(n);
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
	r = net_poll_start(n, loop);
	if (r)
		api_net_fini(n);
	return r;
bad:
	api_net_fini(n);
	return -EINVAL;
}

void api_net_fini(struct api_net *n)
{
	if (n->poll_on)
		gw_timer_fini(&n->poll);
	json_decref(n->desired);
	json_decref(n->bonds);
	json_decref(n->rdma);
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
