// SPDX-License-Identifier: MIT
/*
 * The bond plan (api_bond.h): desired settings + the host's snapshot -> a refusal, or the
 * ordered steps and the systemd-networkd files. Pure: no system call, so every refusal is a
 * unit test and a dry run shows exactly what an apply would do.
 *
 * The kernel's rules the order follows: mode and fail_over_mac change only on a bond without
 * slaves (mode also only while the bond is down), a slave is enslaved while down, primary
 * names a slave. So a new bond is: create, set, each slave down + enslave, primary, up; a
 * mode or fail_over_mac change on a running bond releases its slaves first and takes them
 * back after.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "api_bond.h"

static const char *str(const json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static bool same(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

static void verdict(struct api_bond_result *res, enum api_bond_verdict v, const char *field,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void verdict(struct api_bond_result *res, enum api_bond_verdict v, const char *field,
		    const char *fmt, ...)
{
	va_list ap;

	res->verdict = v;
	snprintf(res->field, sizeof(res->field), "%s", field ? field : "");
	va_start(ap, fmt);
	vsnprintf(res->message, sizeof(res->message), fmt, ap);
	va_end(ap);
}

int api_bond_netdev_path(char *buf, size_t len, const char *dir, const char *bond)
{
	int n = snprintf(buf, len, "%s/10-isergw-agent-%s.netdev", dir, bond);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int api_bond_network_path(char *buf, size_t len, const char *dir, const char *bond,
			  const char *slave)
{
	int n = snprintf(buf, len, "%s/10-isergw-agent-%s-%s.network", dir, bond, slave);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* ---- the host ---------------------------------------------------------------------------- */

static const json_t *link_of(const json_t *cur, const char *name)
{
	return json_object_get(json_object_get(cur, "links"), name);
}

static bool in_names(const json_t *arr, const char *name)
{
	const json_t *v;
	size_t i;

	json_array_foreach(arr, i, v)
		if (same(json_string_value(v), name))
			return true;
	return false;
}

/* "127.0.0.1:8080" / "[::1]:8080" -> the host part in buf. */
static void listen_host(const char *listen, char *buf, size_t len)
{
	const char *end;

	buf[0] = 0;
	if (!listen)
		return;
	if (listen[0] == '[') {
		end = strchr(listen, ']');
		if (end)
			snprintf(buf, len, "%.*s", (int)(end - listen - 1), listen + 1);
		return;
	}
	end = strrchr(listen, ':');
	snprintf(buf, len, "%.*s", end ? (int)(end - listen) : (int)strlen(listen), listen);
}

/* The address the agent listens on when it sits on ifname (a wildcard: any address). */
static const char *carries_listen(const json_t *cur, const char *ifname, const char *host)
{
	const json_t *a;
	size_t i;
	bool any = !*host || !strcmp(host, "0.0.0.0") || !strcmp(host, "::");

	json_array_foreach(json_object_get(json_object_get(cur, "addrs"), ifname), i, a)
		if (any || same(json_string_value(a), host))
			return json_string_value(a);
	return NULL;
}

/* "10.0.0.1:3260" / "[fe80::1]:3260" -> "10.0.0.1" / "fe80::1" in buf. */
static void local_host(const char *local, char *buf, size_t len)
{
	listen_host(local, buf, len);
}

/* TCP sessions whose connection's local address is on the bond (the gateway's model names
 * the portals on it; an address on it does too, for wildcard portals). */
static int bond_sessions(const struct api_bond_ctx *ctx, const json_t *cur, const char *bond)
{
	const json_t *addrs = json_object_get(json_object_get(cur, "addrs"), bond);
	const json_t *chains = json_object_get(json_object_get(ctx->gw_state, "net"), "portals");
	const json_t *s, *c, *p;
	size_t i, j, k;
	int n = 0;

	json_array_foreach(json_object_get(ctx->gw_state, "sessions"), i, s) {
		bool on = false;

		json_array_foreach(json_object_get(s, "connections"), j, c) {
			char host[64];

			if (!same(str(c, "transport"), "tcp"))
				continue;
			local_host(str(c, "local"), host, sizeof(host));
			if (in_names(addrs, host))
				on = true;
			json_array_foreach(chains, k, p)
				if (same(str(p, "transport"), "tcp") &&
				    (same(str(p, "bond"), bond) || same(str(p, "netdev"), bond)) &&
				    same(str(p, "address"), host))
					on = true;
		}
		n += on;
	}
	return n;
}

/* ---- steps and files --------------------------------------------------------------------- */

static void step(json_t *steps, json_t *s)
{
	json_array_append_new(steps, s);
}

static void file_add(json_t *files, const char *path, const char *content)
{
	json_array_append_new(files, json_pack("{s:s, s:s}", "path", path, "content", content));
}

static void netdev_file(const json_t *desired, const char *bond, char *buf, size_t len)
{
	size_t n;

	n = (size_t)snprintf(buf, len,
			     "# Written by isergw-agent (PUT /api/v1/bonds/%s?apply=true); the "
			     "next apply rewrites it.\n[NetDev]\nName=%s\nKind=bond\n\n[Bond]\n",
			     bond, bond);
	if (n < len && str(desired, "mode"))
		n += (size_t)snprintf(buf + n, len - n, "Mode=%s\n", str(desired, "mode"));
	if (n < len && str(desired, "fail_over_mac"))
		n += (size_t)snprintf(buf + n, len - n, "FailOverMACPolicy=%s\n",
				      str(desired, "fail_over_mac"));
	if (n < len && json_is_integer(json_object_get(desired, "miimon")))
		n += (size_t)snprintf(buf + n, len - n, "MIIMonitorSec=%lldms\n",
				      json_integer_value(json_object_get(desired, "miimon")));
	if (n < len && json_is_integer(json_object_get(desired, "num_grat_arp")))
		snprintf(buf + n, len - n, "GratuitousARP=%lld\n",
			 json_integer_value(json_object_get(desired, "num_grat_arp")));
}

static void network_file(const char *bond, const char *slave, bool primary, char *buf,
			 size_t len)
{
	snprintf(buf, len,
		 "# Written by isergw-agent (PUT /api/v1/bonds/%s?apply=true); the next apply "
		 "rewrites it.\n[Match]\nName=%s\n\n[Network]\nBond=%s\n%s", bond, slave, bond,
		 primary ? "PrimarySlave=true\n" : "");
}

static bool files_plan(const struct api_bond_ctx *ctx, const json_t *desired, const char *bond,
		       json_t *files, struct api_bond_result *res)
{
	const char *primary = str(desired, "primary");
	char path[4096], text[1024];
	const json_t *v;
	size_t i;

	if (api_bond_netdev_path(path, sizeof(path), ctx->networkd_dir, bond)) {
		verdict(res, API_BOND_INVALID, NULL, "the networkd folder's name is too long");
		return false;
	}
	netdev_file(desired, bond, text, sizeof(text));
	file_add(files, path, text);
	json_array_foreach(json_object_get(desired, "slaves"), i, v) {
		const char *sl = json_string_value(v);

		if (api_bond_network_path(path, sizeof(path), ctx->networkd_dir, bond, sl)) {
			verdict(res, API_BOND_INVALID, NULL,
				"the networkd folder's name is too long");
			return false;
		}
		network_file(bond, sl, same(primary, sl), text, sizeof(text));
		file_add(files, path, text);
	}
	return true;
}

/* The options to set ({"mode": ..} of what differs) and their present values, for undo. */
static void options_diff(const json_t *desired, const json_t *bst, json_t *want, json_t *was)
{
	static const char *const keys[] = { "mode", "fail_over_mac", "miimon", "num_grat_arp",
					    NULL };
	const char *const *k;

	for (k = keys; *k; k++) {
		json_t *d = json_object_get(desired, *k), *h = json_object_get(bst, *k);

		if (!d || (bst && json_equal(d, h)))
			continue;
		json_object_set(want, *k, d);
		if (h && !json_is_null(h))
			json_object_set(was, *k, h);
	}
}

/* ---- the plan ---------------------------------------------------------------------------- */

static bool check_slaves(const struct api_bond_ctx *ctx, const json_t *desired,
			 const json_t *cur, const char *bond, struct api_bond_result *res)
{
	const json_t *slaves = json_object_get(desired, "slaves"), *v;
	const json_t *droute = json_object_get(cur, "default_route");
	char host[64], f[32];
	size_t i;

	listen_host(ctx->listen, host, sizeof(host));
	json_array_foreach(slaves, i, v) {
		const char *sl = json_string_value(v);
		const json_t *l = link_of(cur, sl);
		const char *master = str(l, "master"), *a;

		snprintf(f, sizeof(f), "slaves[%zu]", i);
		if (!strcmp(sl, bond)) {
			verdict(res, API_BOND_INVALID, f, "a bond cannot be its own slave");
			return false;
		}
		if (!l) {
			verdict(res, API_BOND_INVALID, f, "no interface %s on this host", sl);
			return false;
		}
		if (json_is_true(json_object_get(l, "bond"))) {
			verdict(res, API_BOND_REFUSED, f, "%s is a bond itself: the agent does not "
				"nest bonds", sl);
			return false;
		}
		if (master && strcmp(master, bond)) {
			verdict(res, API_BOND_REFUSED, f, "%s is a slave of %s, which the request "
				"does not name: release it there first", sl, master);
			return false;
		}
		if (master)
			continue;	/* already ours: not touched */
		if (in_names(droute, sl)) {
			verdict(res, API_BOND_REFUSED, f, "%s carries the default route: enslaving "
				"it would cut this host off", sl);
			return false;
		}
		a = carries_listen(cur, sl, host);
		if (a) {
			verdict(res, API_BOND_REFUSED, f, "%s carries the agent's listening "
				"address %s: enslaving it would cut this API off", sl, a);
			return false;
		}
	}
	return true;
}

void api_bond_plan(const struct api_bond_ctx *ctx, const json_t *desired, const json_t *cur,
		   struct api_bond_result *res)
{
	const char *bond = str(desired, "name"), *primary = str(desired, "primary");
	const json_t *slaves = json_object_get(desired, "slaves"), *bst = json_object_get(cur,
											   "bond");
	const json_t *have = json_object_get(bst, "slaves"), *v, *bl = link_of(cur, bond);
	json_t *steps = json_array(), *files = json_array(), *want = json_object();
	json_t *was = json_object();
	bool exists = bst && !json_is_null(bst), rebuild, down = false;
	size_t i;
	int n;

	memset(res, 0, sizeof(*res));
	if (bl && !exists && json_is_true(json_object_get(bl, "bond"))) {
		/* The host has the bond, the gateway's model not yet (it follows the kernel by
		 * netlink events): a plan now would repeat what made it. */
		verdict(res, API_BOND_REFUSED, "bond", "%s is a bond on this host that the "
			"gateway's network model does not show yet: apply again once GET "
			"/api/v1/bonds/%s shows it", bond, bond);
		goto out;
	}
	if (bl && !exists) {
		verdict(res, API_BOND_REFUSED, "bond", "%s exists and is not a bond", bond);
		goto out;
	}
	if (!exists && !json_array_size(slaves)) {
		verdict(res, API_BOND_INVALID, "slaves", "there is no bond %s on this host: name "
			"its slaves to create it", bond);
		goto out;
	}
	if (!check_slaves(ctx, desired, cur, bond, res))
		goto out;
	/* Releasing a slave the request does not name would touch an interface not named. */
	json_array_foreach(have, i, v) {
		const char *sl = str(v, "name");

		if (slaves && !in_names(slaves, sl)) {
			verdict(res, API_BOND_REFUSED, "slaves", "bond %s has slave %s, which the "
				"request does not name: apply never releases an interface it was "
				"not told about", bond, sl);
			goto out;
		}
	}
	if (!files_plan(ctx, desired, bond, files, res))
		goto out;

	options_diff(desired, exists ? bst : NULL, want, was);
	/* mode and fail_over_mac: only on a bond without slaves (mode: and down). */
	rebuild = exists && (json_object_get(want, "mode") ||
			     json_object_get(want, "fail_over_mac"));
	if (!exists) {
		step(steps, json_pack("{s:s, s:s}", "op", "create", "link", bond));
	} else if (rebuild) {
		char host[64];
		const char *a;

		listen_host(ctx->listen, host, sizeof(host));
		a = carries_listen(cur, bond, host);
		if (a || in_names(json_object_get(cur, "default_route"), bond)) {
			verdict(res, API_BOND_REFUSED, "mode", "a new mode or fail_over_mac takes "
				"%s down, and it carries %s%s", bond, a ? "the agent's listening "
				"address " : "the default route", a ? a : "");
			goto out;
		}
		if (json_is_true(json_object_get(bl, "up"))) {
			step(steps, json_pack("{s:s, s:s}", "op", "down", "link", bond));
			down = true;
		}
		json_array_foreach(have, i, v)
			step(steps, json_pack("{s:s, s:s, s:s}", "op", "release", "link",
					      str(v, "name"), "master", bond));
	}
	if (json_object_size(want))
		step(steps, json_pack("{s:s, s:s, s:O, s:O}", "op", "set", "link", bond, "set",
				      want, "was", was));
	/* After a release every slave comes back; then the new ones join. */
	if (rebuild)
		json_array_foreach(have, i, v)
			step(steps, json_pack("{s:s, s:s, s:s}", "op", "enslave", "link",
					      str(v, "name"), "master", bond));
	json_array_foreach(slaves, i, v) {
		const char *sl = json_string_value(v);
		const json_t *l = link_of(cur, sl);

		if (str(l, "master"))
			continue;
		if (json_is_true(json_object_get(l, "up")))
			step(steps, json_pack("{s:s, s:s}", "op", "down", "link", sl));
		step(steps, json_pack("{s:s, s:s, s:s}", "op", "enslave", "link", sl, "master",
				      bond));
	}
	if (primary && !same(primary, exists ? str(bst, "primary") : "")) {
		const char *old = exists ? str(bst, "primary") : "";

		step(steps, json_pack("{s:s, s:s, s:s, s:s}", "op", "primary", "link", bond,
				      "primary", primary, "was", old ? old : ""));
	}
	if (!exists || down || !json_is_true(json_object_get(bl, "up")))
		step(steps, json_pack("{s:s, s:s}", "op", "up", "link", bond));

	/* Sessions over the bond ride through a slave being added, not a bond taken down. */
	n = exists && json_array_size(steps) ? bond_sessions(ctx, cur, bond) : 0;
	if (n && !ctx->force) {
		verdict(res, API_BOND_REFUSED, "bond", "%d TCP session%s run%s over bond %s: "
			"apply with force=true to change it anyway", n, n == 1 ? "" : "s",
			n == 1 ? "s" : "", bond);
		goto out;
	}
	res->verdict = API_BOND_OK;
	res->steps = json_incref(steps);
	res->files = json_incref(files);
out:
	json_decref(steps);
	json_decref(files);
	json_decref(want);
	json_decref(was);
}

void api_bond_result_fini(struct api_bond_result *res)
{
	json_decref(res->steps);
	json_decref(res->files);
	res->steps = res->files = NULL;
}
