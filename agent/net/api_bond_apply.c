// SPDX-License-Identifier: MIT
/*
 * The bond engine (api_bond.h): the host's snapshot, the networkd files, and the steps run
 * through libnl-route-3 with each one recorded so a failure undoes the done ones in reverse.
 *
 * libnl 3.7 creates bonds, enslaves and releases (rtnl_link_bond_*) and changes flags
 * (rtnl_link_change), but has no setter for the bonding options (mode, fail_over_mac, miimon,
 * num_grat_arp, primary): those go as IFLA_INFO_DATA of an RTM_NEWLINK built with libnl's
 * own message calls (nlmsg_alloc_simple, nla_nest_start, nl_send_sync), which parse the
 * kernel's answer and its error for us.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <linux/if_link.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/bonding.h>
#include <netlink/route/route.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api_bond.h"
#include "api_net.h"
#include "api_store.h"
#include "gw_log.h"

#ifndef IFF_UP
#define IFF_UP 0x1
#endif

static const char *const bond_modes[] = {
	"balance-rr", "active-backup", "balance-xor", "broadcast", "802.3ad", "balance-tlb",
	"balance-alb", NULL,
};
static const char *const fom_values[] = { "none", "active", "follow", NULL };

static int index_of(const char *s, const char *const *l)
{
	int i;

	for (i = 0; s && l[i]; i++)
		if (!strcmp(s, l[i]))
			return i;
	return -1;
}

static const char *str(const json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

/* ---- snapshot ---------------------------------------------------------------------------- */

static bool read_small(const char *path, char *buf, size_t len)
{
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return false;
	buf[n] = 0;
	buf[strcspn(buf, "\n")] = 0;
	return true;
}

static json_t *sysfs_links(const char *root)
{
	char path[PATH_MAX], buf[PATH_MAX], fl[32];
	json_t *links = json_object();
	struct dirent *e;
	struct stat st;
	DIR *d;

	snprintf(path, sizeof(path), "%s/class/net", root);
	d = opendir(path);
	if (!d)
		return links;
	while ((e = readdir(d))) {
		const char *master = NULL;
		unsigned long flags = 0;
		ssize_t n;

		if (e->d_name[0] == '.' || !api_ifname_ok(e->d_name))
			continue;
		snprintf(path, sizeof(path), "%s/class/net/%s/master", root, e->d_name);
		n = readlink(path, buf, sizeof(buf) - 1);
		if (n > 0) {
			buf[n] = 0;
			master = strrchr(buf, '/') ? strrchr(buf, '/') + 1 : buf;
		}
		snprintf(path, sizeof(path), "%s/class/net/%s/flags", root, e->d_name);
		if (read_small(path, fl, sizeof(fl)))
			flags = strtoul(fl, NULL, 16);
		snprintf(path, sizeof(path), "%s/class/net/%s/bonding", root, e->d_name);
		json_object_set_new(links, e->d_name, json_pack(
			"{s:s?, s:b, s:b}", "master", master, "bond",
			stat(path, &st) == 0 && S_ISDIR(st.st_mode), "up", (int)(flags & IFF_UP)));
	}
	closedir(d);
	return links;
}

static void add_name(json_t *obj, const char *key, const char *val)
{
	json_t *a = json_object_get(obj, key);

	if (!a) {
		a = json_array();
		json_object_set_new(obj, key, a);
	}
	json_array_append_new(a, json_string(val));
}

/* Addresses per interface and the interfaces of the default route(s). */
static void nl_addrs_routes(json_t *cur)
{
	struct nl_cache *links = NULL, *addrs = NULL, *routes = NULL;
	json_t *by_if = json_object(), *droute = json_array();
	struct nl_sock *sk = nl_socket_alloc();
	struct nl_object *o;
	char name[32], a[64];

	json_object_set_new(cur, "addrs", by_if);
	json_object_set_new(cur, "default_route", droute);
	if (!sk || nl_connect(sk, NETLINK_ROUTE) < 0 ||
	    rtnl_link_alloc_cache(sk, AF_UNSPEC, &links) < 0)
		goto out;
	if (rtnl_addr_alloc_cache(sk, &addrs) >= 0)
		for (o = nl_cache_get_first(addrs); o; o = nl_cache_get_next(o)) {
			struct rtnl_addr *ra = (struct rtnl_addr *)o;
			struct nl_addr *loc = rtnl_addr_get_local(ra);
			int fam = rtnl_addr_get_family(ra);

			if (!loc || (fam != AF_INET && fam != AF_INET6) ||
			    !rtnl_link_i2name(links, rtnl_addr_get_ifindex(ra), name,
					      sizeof(name)))
				continue;
			/* nl_addr2str adds the prefix length: the plan compares hosts. */
			nl_addr2str(loc, a, sizeof(a));
			a[strcspn(a, "/")] = 0;
			add_name(by_if, name, a);
		}
	if (rtnl_route_alloc_cache(sk, AF_UNSPEC, 0, &routes) >= 0)
		for (o = nl_cache_get_first(routes); o; o = nl_cache_get_next(o)) {
			struct rtnl_route *rt = (struct rtnl_route *)o;
			struct nl_addr *dst = rtnl_route_get_dst(rt);
			int i, n = rtnl_route_get_nnexthops(rt);

			if (rtnl_route_get_table(rt) != RT_TABLE_MAIN ||
			    (dst && nl_addr_get_prefixlen(dst) != 0))
				continue;
			for (i = 0; i < n; i++) {
				struct rtnl_nexthop *nh = rtnl_route_nexthop_n(rt, i);

				if (rtnl_link_i2name(links, rtnl_route_nh_get_ifindex(nh), name,
						     sizeof(name)))
					json_array_append_new(droute, json_string(name));
			}
		}
out:
	if (routes)
		nl_cache_free(routes);
	if (addrs)
		nl_cache_free(addrs);
	if (links)
		nl_cache_free(links);
	nl_socket_free(sk);
}

const char *api_bond_links_root(void)
{
	const char *r = getenv("ISERGW_SYSFS");

	return r && *r ? r : "/sys";
}

json_t *api_bond_snapshot(const char *root, const json_t *status)
{
	json_t *cur = json_object(), *b = status ? json_deep_copy(status) : NULL;

	json_object_set_new(cur, "links", sysfs_links(root));
	json_object_set_new(cur, "bond", b ? b : json_null());
	nl_addrs_routes(cur);
	return cur;
}

/* ---- steps ------------------------------------------------------------------------------- */

static int ifindex(struct nl_sock *sk, const char *name)
{
	struct rtnl_link *l = NULL;
	int r = rtnl_link_get_kernel(sk, 0, name, &l);

	if (r < 0)
		return r;
	r = rtnl_link_get_ifindex(l);
	rtnl_link_put(l);
	return r;
}

static int set_up(struct nl_sock *sk, const char *name, bool up)
{
	struct rtnl_link *orig = NULL, *ch;
	int r = rtnl_link_get_kernel(sk, 0, name, &orig);

	if (r < 0)
		return r;
	ch = rtnl_link_alloc();
	if (!ch) {
		rtnl_link_put(orig);
		return -NLE_NOMEM;
	}
	if (up)
		rtnl_link_set_flags(ch, IFF_UP);
	else
		rtnl_link_unset_flags(ch, IFF_UP);
	r = rtnl_link_change(sk, orig, ch, 0);
	rtnl_link_put(ch);
	rtnl_link_put(orig);
	return r;
}

static int del_link(struct nl_sock *sk, const char *name)
{
	struct rtnl_link *l = rtnl_link_alloc();
	int r;

	if (!l)
		return -NLE_NOMEM;
	rtnl_link_set_name(l, name);
	r = rtnl_link_delete(sk, l);
	rtnl_link_put(l);
	return r;
}

/* Bonding options in IFLA_INFO_DATA; opts is {"mode", "fail_over_mac", "miimon",
 * "num_grat_arp"} (any subset), primary (NULL: unchanged; "": none) a slave's name. */
static int set_opts(struct nl_sock *sk, const char *bond, const json_t *opts,
		    const char *primary)
{
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC };
	struct nlattr *info, *data;
	struct nl_msg *m;
	json_t *v;
	int r, pi = 0;

	r = ifindex(sk, bond);
	if (r < 0)
		return r;
	ifi.ifi_index = r;
	if (primary && *primary) {
		pi = ifindex(sk, primary);
		if (pi < 0)
			return pi;
	}
	m = nlmsg_alloc_simple(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK);
	if (!m)
		return -NLE_NOMEM;
	r = -NLE_MSGSIZE;
	if (nlmsg_append(m, &ifi, sizeof(ifi), NLMSG_ALIGNTO) < 0)
		goto out;
	info = nla_nest_start(m, IFLA_LINKINFO);
	if (!info || nla_put_string(m, IFLA_INFO_KIND, "bond") < 0)
		goto out;
	data = nla_nest_start(m, IFLA_INFO_DATA);
	if (!data)
		goto out;
	v = json_object_get(opts, "mode");
	if (v && nla_put_u8(m, IFLA_BOND_MODE, (uint8_t)index_of(json_string_value(v),
								 bond_modes)) < 0)
		goto out;
	v = json_object_get(opts, "fail_over_mac");
	if (v && nla_put_u8(m, IFLA_BOND_FAIL_OVER_MAC,
			    (uint8_t)index_of(json_string_value(v), fom_values)) < 0)
		goto out;
	v = json_object_get(opts, "miimon");
	if (v && nla_put_u32(m, IFLA_BOND_MIIMON, (uint32_t)json_integer_value(v)) < 0)
		goto out;
	v = json_object_get(opts, "num_grat_arp");
	if (v && nla_put_u8(m, IFLA_BOND_NUM_PEER_NOTIF, (uint8_t)json_integer_value(v)) < 0)
		goto out;
	if (primary && nla_put_u32(m, IFLA_BOND_PRIMARY, (uint32_t)pi) < 0)
		goto out;
	nla_nest_end(m, data);
	nla_nest_end(m, info);
	r = nl_send_sync(sk, m);	/* frees m */
	m = NULL;
out:
	nlmsg_free(m);
	return r;
}

static int enslave(struct nl_sock *sk, const char *slave, const char *master)
{
	int mi = ifindex(sk, master), si = ifindex(sk, slave);

	if (mi < 0)
		return mi;
	if (si < 0)
		return si;
	return rtnl_link_bond_enslave_ifindex(sk, mi, si);
}

static int release(struct nl_sock *sk, const char *slave)
{
	int si = ifindex(sk, slave);

	return si < 0 ? si : rtnl_link_bond_release_ifindex(sk, si);
}

/* Runs one step forward, or its undo. libnl's -NLE_* or 0. */
static int run_step(struct nl_sock *sk, const json_t *s, bool undo)
{
	const char *op = str(s, "op"), *link = str(s, "link");

	if (!strcmp(op, "create"))
		return undo ? del_link(sk, link) : rtnl_link_bond_add(sk, link, NULL);
	if (!strcmp(op, "set")) {
		const json_t *o = json_object_get(s, undo ? "was" : "set");

		return json_object_size(o) ? set_opts(sk, link, o, NULL) : 0;
	}
	if (!strcmp(op, "down") || !strcmp(op, "up"))
		return set_up(sk, link, !strcmp(op, "up") != undo);
	if (!strcmp(op, "enslave"))
		return undo ? release(sk, link) : enslave(sk, link, str(s, "master"));
	if (!strcmp(op, "release"))
		return undo ? enslave(sk, link, str(s, "master")) : release(sk, link);
	if (!strcmp(op, "primary"))
		return set_opts(sk, link, NULL, str(s, undo ? "was" : "primary"));
	return -NLE_OPNOTSUPP;
}

static void step_text(const json_t *s, char *buf, size_t len)
{
	const char *m = str(s, "master"), *p = str(s, "primary");

	snprintf(buf, len, "%s %s%s%s%s%s", str(s, "op"), str(s, "link"), m ? " to " : "",
		 m ? m : "", p ? " = " : "", p ? p : "");
}

/* ---- files ------------------------------------------------------------------------------- */

/* A file's content before the apply wrote it (NULL: there was none). */
struct saved_file {
	char *path;
	char *old;
	size_t old_len;
	bool had;
};

static char *slurp(const char *path, size_t *len, bool *had)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t cap = 0;

	*had = false;
	*len = 0;
	if (!f)
		return NULL;
	*had = true;
	if (getdelim(&buf, &cap, 0, f) < 0) {
		free(buf);
		buf = NULL;
	} else {
		*len = strlen(buf);
	}
	fclose(f);
	return buf;
}

static void files_restore(struct saved_file *sv, size_t n)
{
	while (n--) {
		if (!sv[n].path)
			continue;
		if (sv[n].had)
			api_write_atomic(sv[n].path, sv[n].old ? sv[n].old : "", sv[n].old_len,
					 0644);
		else
			unlink(sv[n].path);
	}
}

static void files_free(struct saved_file *sv, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(sv[i].path);
		free(sv[i].old);
	}
	free(sv);
}

/* The folder takes a file: an unnamed O_TMPFILE leaves nothing behind (a read-only /etc under
 * ProtectSystem= says EROFS here, root or not). */
static int dir_writable(const char *dir)
{
	struct stat st;
	int fd;

	if (stat(dir, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	if (errno == EOPNOTSUPP || errno == EISDIR)
		return access(dir, W_OK) < 0 ? -errno : 0;
	return -errno;
}

/* ---- apply ------------------------------------------------------------------------------- */

static void failed(struct api_bond_result *res, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void failed(struct api_bond_result *res, const char *fmt, ...)
{
	va_list ap;

	res->verdict = API_BOND_FAILED;
	res->field[0] = 0;
	va_start(ap, fmt);
	vsnprintf(res->message, sizeof(res->message), fmt, ap);
	va_end(ap);
}

/* Test hook (docs/TESTING.md): ISERGW_BOND_FAIL_AT=N fails step N (1-based) as the kernel
 * would, to prove the rollback. */
static size_t fail_at(void)
{
	const char *e = getenv("ISERGW_BOND_FAIL_AT");

	return e && *e ? (size_t)strtoul(e, NULL, 10) : 0;
}

static void run_steps(struct api_bond_result *res, const char *bond)
{
	struct nl_sock *sk = nl_socket_alloc();
	size_t i, n = json_array_size(res->steps), fail = fail_at();
	char what[128];
	int r = 0;

	if (!sk || (r = nl_connect(sk, NETLINK_ROUTE)) < 0) {
		failed(res, "rtnetlink: %s; nothing changed", nl_geterror(r ? r : -NLE_NOMEM));
		nl_socket_free(sk);
		return;
	}
	for (i = 0; i < n; i++) {
		const json_t *s = json_array_get(res->steps, i);

		step_text(s, what, sizeof(what));
		r = i + 1 == fail ? -NLE_FAILURE : run_step(sk, s, false);
		if (r < 0)
			break;
		gw_info("agent", "bond %s: %s", bond, what);
	}
	if (i < n) {
		char why[128];
		size_t done = i;

		snprintf(why, sizeof(why), "%s", i + 1 == fail ? "injected failure "
			 "(ISERGW_BOND_FAIL_AT)" : nl_geterror(r));
		gw_err("agent", "bond %s: step %zu (%s) failed: %s: undoing %zu step%s", bond,
		       i + 1, what, why, done, done == 1 ? "" : "s");
		while (i--) {
			char u[128];
			int ur = run_step(sk, json_array_get(res->steps, i), true);

			step_text(json_array_get(res->steps, i), u, sizeof(u));
			if (ur < 0)
				gw_err("agent", "bond %s: undo of %s failed: %s", bond, u,
				       nl_geterror(ur));
		}
		failed(res, "step %zu (%s) failed: %s; the %zu step%s before it %s undone",
		       done + 1, what, why, done, done == 1 ? "" : "s",
		       done == 1 ? "was" : "were");
	}
	nl_socket_free(sk);
}

void api_bond_apply(const struct api_bond_ctx *ctx, const json_t *desired, bool dry_run,
		    struct api_bond_result *res)
{
	const char *bond = str(desired, "name");
	struct saved_file *sv;
	json_t *cur, *f;
	size_t i, n;
	int r;

	memset(res, 0, sizeof(*res));
	cur = api_bond_snapshot(api_bond_links_root(), ctx->status);
	api_bond_plan(ctx, desired, cur, res);
	json_decref(cur);
	if (res->verdict != API_BOND_OK)
		return;
	r = dir_writable(ctx->networkd_dir);
	if (r) {
		res->verdict = API_BOND_INVALID;
		snprintf(res->field, sizeof(res->field), "networkd_dir");
		snprintf(res->message, sizeof(res->message), "the networkd folder %s is not "
			 "writable (%s): nothing changed (agent --networkd-dir)", ctx->networkd_dir,
			 strerror(-r));
		return;
	}
	if (dry_run)
		return;
	n = json_array_size(res->files);
	sv = calloc(n ? n : 1, sizeof(*sv));
	if (!sv) {
		failed(res, "out of memory; nothing changed");
		return;
	}
	json_array_foreach(res->files, i, f) {
		const char *path = str(f, "path"), *text = str(f, "content");

		sv[i].path = strdup(path);
		sv[i].old = slurp(path, &sv[i].old_len, &sv[i].had);
		r = sv[i].path ? api_write_atomic(path, text, strlen(text), 0644) : -ENOMEM;
		if (r) {
			files_restore(sv, i + 1);
			files_free(sv, n);
			failed(res, "cannot write %s: %s; nothing changed", path, strerror(-r));
			return;
		}
	}
	run_steps(res, bond);
	if (res->verdict != API_BOND_OK)
		files_restore(sv, n);
	files_free(sv, n);
}
