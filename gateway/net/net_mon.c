// SPDX-License-Identifier: MIT
/*
 * The network model kept current inside the gateway's event loop (net.h). An rtnetlink socket
 * subscribed to link and address events sits in the loop; any message only marks the model
 * stale, and one deferred re-read per batch of events rebuilds it whole (a failover sends
 * several messages at once). A timer re-reads as well, for what sends no event (RDMA port
 * state, sysctls, a sysfs fixture). Each rebuild carries the failover history over, counts a
 * change of active slave, and logs the verdicts that appear or go.
 */
#include <errno.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>

#include "gw_log.h"
#include "net_priv.h"

#define NET_POLL_LIVE_MS 10000
#define NET_POLL_SYSFS_MS 1000

struct net_mon {
	struct gw_loop *loop;
	struct net_reader *reader;
	struct net_model model;
	struct net_portal *portals;
	size_t nportals;
	struct nl_sock *ev;		/* rtnetlink events, NULL with the sysfs reader */
	struct gw_watch w;
	struct gw_timer timer;
	struct gw_defer defer;
	uint64_t reads, events, read_at_ms;
	int err;			/* the last read's, 0 when it worked */
	/* The watcher (the control socket's subscribers) and what it was last told. */
	net_mon_watch_fn watch;
	void *watch_arg;
	json_t *shown;			/* bonds, rdma_ports, verdicts of the last "changed" */
	uint64_t generation;
};

static uint64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* One event to the watcher (data stolen). */
static void emit(struct net_mon *n, const char *type, json_t *data)
{
	if (n->watch && data)
		n->watch(n->watch_arg, type, data);
	else
		json_decref(data);
}

static json_t *verdict_json(const struct net_verdict *v)
{
	return json_pack("{s:s, s:s, s:s, s:s, s:s}", "id", v->rule->id, "severity",
			 net_severity_name(v->rule->severity), "object", v->object, "message",
			 v->message, "fix", v->fix);
}

/* What a watcher can see of the model (the portal chains follow the configuration). */
static json_t *shown_json(const struct net_model *m)
{
	json_t *j = net_model_json(m);

	if (j)
		json_object_del(j, "portals");
	return j;
}

/* "changed" with a new generation when what a client sees differs from the last time. */
static void note_changed(struct net_mon *n)
{
	json_t *j = shown_json(&n->model);

	if (!j || (n->shown && json_equal(j, n->shown))) {
		json_decref(j);
		return;
	}
	json_decref(n->shown);
	n->shown = j;
	n->generation++;
	emit(n, "changed", json_pack("{s:I}", "generation", (json_int_t)n->generation));
}

static void log_verdict(const struct net_verdict *v)
{
	static const enum gw_log_level lvl[] = { GW_LOG_INFO, GW_LOG_WARN, GW_LOG_ERR };

	gw_log(lvl[v->rule->severity], "net", "%s %s: %s (fix: %s)", v->rule->id, v->object,
	       v->message, v->fix);
}

static bool has_verdict(const struct net_model *m, const struct net_verdict *v)
{
	return net_model_verdict(m, v->rule->id, v->object) != NULL;
}

static void log_changes(const struct net_model *old, const struct net_model *m)
{
	size_t i;

	for (i = 0; i < m->nverdicts; i++)
		if (!old || !has_verdict(old, &m->verdicts[i]))
			log_verdict(&m->verdicts[i]);
	for (i = 0; old && i < old->nverdicts; i++)
		if (!has_verdict(m, &old->verdicts[i]))
			gw_info("net", "%s %s: resolved", old->verdicts[i].rule->id,
				old->verdicts[i].object);
	for (i = 0; old && i < m->nbonds; i++) {
		const struct net_bond *b = &m->bonds[i], *o = net_model_bond(old, b->name);

		if (o && *o->active && !*b->active)
			gw_warn("net", "bond %s: no active slave any more (was %s)", b->name,
				o->active);
	}
}

static void on_failover(const struct net_bond *b, void *arg)
{
	const struct net_failover *f = &b->last;
	struct net_mon *n = arg;

	gw_warn("net", "bond %s: active slave %s -> %s (MAC %s -> %s, GID %s -> %s), failover %llu",
		b->name, f->old_slave, f->new_slave, *f->old_mac ? f->old_mac : "-",
		*f->new_mac ? f->new_mac : "-", *f->old_gid ? f->old_gid : "-",
		*f->new_gid ? f->new_gid : "-", (unsigned long long)b->failovers);
	emit(n, "failover", json_pack("{s:s, s:s, s:s, s:s?, s:s?, s:s?, s:s?, s:I, s:I}",
				      "bond", b->name, "old", f->old_slave, "new", f->new_slave,
				      "old_mac", *f->old_mac ? f->old_mac : NULL,
				      "new_mac", *f->new_mac ? f->new_mac : NULL,
				      "old_gid", *f->old_gid ? f->old_gid : NULL,
				      "new_gid", *f->new_gid ? f->new_gid : NULL,
				      "failovers", (json_int_t)b->failovers,
				      "time_ms", (json_int_t)f->time_ms));
}

/* Links that went up or down, RDMA ports that changed state, verdicts that came or went:
 * one event each, against the model before this read. */
static void emit_changes(struct net_mon *n, const struct net_model *old,
			 const struct net_model *m)
{
	json_t *added = json_array(), *resolved = json_array();
	size_t i, j;

	for (i = 0; i < m->nlinks; i++) {
		const struct net_link *l = &m->links[i], *o = net_model_link(old, l->name);

		if (o && (o->carrier != l->carrier || o->up != l->up))
			emit(n, "link", json_pack("{s:s, s:b, s:b, s:b, s:s?}", "netdev", l->name,
						  "up", l->up, "carrier", l->carrier,
						  "previous_carrier", o->carrier,
						  "master", *l->master ? l->master : NULL));
	}
	for (i = 0; i < m->nports; i++) {
		const struct net_rdma_port *p = &m->ports[i];

		for (j = 0; j < old->nports; j++) {
			const struct net_rdma_port *o = &old->ports[j];

			if (strcmp(o->dev, p->dev) || o->port != p->port || o->state == p->state)
				continue;
			emit(n, "rdma", json_pack("{s:s, s:i, s:i, s:i, s:s?}", "device", p->dev,
						  "port", (int)p->port, "state_num", p->state,
						  "previous_num", o->state,
						  "netdev", *p->netdev ? p->netdev : NULL));
		}
	}
	for (i = 0; i < m->nverdicts; i++)
		if (!has_verdict(old, &m->verdicts[i]))
			json_array_append_new(added, verdict_json(&m->verdicts[i]));
	for (i = 0; i < old->nverdicts; i++)
		if (!has_verdict(m, &old->verdicts[i]))
			json_array_append_new(resolved, json_pack(
				"{s:s, s:s}", "id", old->verdicts[i].rule->id, "object",
				old->verdicts[i].object));
	if (json_array_size(added) || json_array_size(resolved))
		emit(n, "verdicts", json_pack("{s:o, s:o, s:I}", "added", added, "resolved",
					      resolved, "active", (json_int_t)m->nverdicts));
	else {
		json_decref(added);
		json_decref(resolved);
	}
}

/* Rebuilds the model; on a failed read the last good one stays. */
static void mon_read(struct net_mon *n, bool first)
{
	struct net_model m;
	int r;

	net_model_init(&m);
	r = net_model_read(&m, n->reader);
	if (r) {
		if (r != n->err)
			gw_warn("net", "reading the network (%s): %s: keeping the last model",
				n->reader->ops->name, strerror(-r));
		n->err = r;
		net_model_fini(&m);
		return;
	}
	n->err = 0;
	n->reads++;
	n->read_at_ms = wall_ms();
	net_model_resolve(&m, n->portals, n->nportals);
	net_model_carry(&m, first ? NULL : &n->model, n->read_at_ms, on_failover, n);
	net_judge(&m);
	if (first)
		gw_info("net", "network (%s): %zu netdevs, %zu bonds, %zu RDMA ports",
			n->reader->ops->name, m.nlinks, m.nbonds, m.nports);
	log_changes(first ? NULL : &n->model, &m);
	if (!first)
		emit_changes(n, &n->model, &m);
	net_model_fini(&n->model);
	n->model = m;
	note_changed(n);
}

static void on_defer(struct gw_defer *d)
{
	mon_read(gw_container_of(d, struct net_mon, defer), false);
}

static void on_timer(struct gw_timer *t)
{
	mon_read(gw_container_of(t, struct net_mon, timer), false);
}

/* A bond's RTM_NEWLINK carries its active slave (IFLA_BOND_ACTIVE_SLAVE, sent on every
 * failover): each message is counted on its own, so a flip and a flip back that arrive in one
 * batch, before the re-read, are two failovers and not none. libnl 3.7 has no accessor for
 * bonding attributes: its attribute parser reads them. */
void net_mon_rtmsg(struct net_mon *n, struct nlmsghdr *h)
{
	struct nlattr *tb[IFLA_MAX + 1], *li[IFLA_INFO_MAX + 1], *bd[IFLA_BOND_MAX + 1];
	char bond[NET_IFNAME];
	const char *active = NULL;
	uint32_t ifindex;
	size_t i;

	n->events++;
	if (h->nlmsg_type != RTM_NEWLINK ||
	    nlmsg_parse(h, sizeof(struct ifinfomsg), tb, IFLA_MAX, NULL) < 0 ||
	    !tb[IFLA_IFNAME] || !tb[IFLA_LINKINFO] ||
	    nla_parse_nested(li, IFLA_INFO_MAX, tb[IFLA_LINKINFO], NULL) < 0 ||
	    !li[IFLA_INFO_KIND] || !li[IFLA_INFO_DATA] || nla_strcmp(li[IFLA_INFO_KIND], "bond") ||
	    nla_parse_nested(bd, IFLA_BOND_MAX, li[IFLA_INFO_DATA], NULL) < 0 ||
	    !bd[IFLA_BOND_ACTIVE_SLAVE] || nla_len(bd[IFLA_BOND_ACTIVE_SLAVE]) < 4)
		return;
	nla_strlcpy(bond, tb[IFLA_IFNAME], sizeof(bond));
	ifindex = nla_get_u32(bd[IFLA_BOND_ACTIVE_SLAVE]);
	/* A slave the last read did not see: the re-read that follows counts it. */
	for (i = 0; i < n->model.nlinks; i++)
		if (n->model.links[i].ifindex == (int)ifindex)
			active = n->model.links[i].name;
	if (active && net_model_note_active(&n->model, bond, active, wall_ms())) {
		struct net_bond *b = net_model_bond(&n->model, bond);

		/* Shown at once, so that what a watcher reads after the event names the new
		 * active slave; the re-read that follows brings the rest (slave states). */
		snprintf(b->active, sizeof(b->active), "%s", active);
		on_failover(b, n);
		note_changed(n);
	}
}

static int on_nl_msg(struct nl_msg *msg, void *arg)
{
	net_mon_rtmsg(arg, nlmsg_hdr(msg));
	return NL_SKIP;
}

static void on_nl(struct gw_watch *w, uint32_t events)
{
	struct net_mon *n = gw_container_of(w, struct net_mon, w);
	int r;

	(void)events;
	/* Whatever came (an overrun included, -NLE_NOMEM): read the whole model again, once. */
	r = nl_recvmsgs_default(n->ev);
	if (r < 0 && r != -NLE_AGAIN)
		gw_dbg("net", "rtnetlink events: %s", nl_geterror(r));
	gw_defer_queue(n->loop, &n->defer);
}

static int events_open(struct net_mon *n)
{
	int r;

	n->ev = nl_socket_alloc();
	if (!n->ev)
		return -ENOMEM;
	nl_socket_disable_seq_check(n->ev);
	nl_socket_modify_cb(n->ev, NL_CB_VALID, NL_CB_CUSTOM, on_nl_msg, n);
	r = nl_connect(n->ev, NETLINK_ROUTE);
	if (!r)
		r = nl_socket_add_memberships(n->ev, RTNLGRP_LINK, RTNLGRP_IPV4_IFADDR,
					      RTNLGRP_IPV6_IFADDR, 0);
	if (!r)
		r = nl_socket_set_nonblocking(n->ev);
	if (r < 0) {
		gw_warn("net", "rtnetlink events: %s: re-reading every %d s only", nl_geterror(r),
			NET_POLL_LIVE_MS / 1000);
		nl_socket_free(n->ev);
		n->ev = NULL;
		return -EIO;
	}
	gw_watch_init(&n->w, n->loop, nl_socket_get_fd(n->ev), on_nl);
	return gw_watch_set(&n->w, EPOLLIN);
}

int net_mon_create(struct gw_loop *loop, struct net_mon **out)
{
	const char *root = getenv("ISERGW_SYSFS");
	struct net_mon *n = calloc(1, sizeof(*n));
	uint64_t poll;
	int r;

	if (!n)
		return -ENOMEM;
	n->loop = loop;
	net_model_init(&n->model);
	gw_defer_init(&n->defer, on_defer);
	if (root && *root) {
		r = net_reader_sysfs_create(root, &n->reader);
		poll = NET_POLL_SYSFS_MS;
	} else {
		r = net_reader_live_create(&n->reader);
		poll = NET_POLL_LIVE_MS;
		if (!r)
			events_open(n);	/* without events the timer still re-reads */
	}
	if (r)
		goto fail;
	r = gw_timer_init(&n->timer, loop, on_timer);
	if (r)
		goto fail;
	r = gw_timer_arm(&n->timer, poll, poll);
	if (r) {
		gw_timer_fini(&n->timer);
		goto fail;
	}
	mon_read(n, true);
	*out = n;
	return 0;
fail:
	if (n->ev) {
		gw_watch_stop(&n->w);
		nl_socket_free(n->ev);
	}
	net_reader_destroy(n->reader);
	free(n);
	return r;
}

void net_mon_destroy(struct net_mon *n)
{
	if (!n)
		return;
	gw_defer_cancel(&n->defer);
	gw_timer_fini(&n->timer);
	if (n->ev) {
		gw_watch_stop(&n->w);
		nl_socket_free(n->ev);
	}
	net_reader_destroy(n->reader);
	net_model_fini(&n->model);
	json_decref(n->shown);
	free(n->portals);
	free(n);
}

void net_mon_set_portals(struct net_mon *n, const struct isc_portal_conf *p, size_t np)
{
	struct net_portal *v = np ? calloc(np, sizeof(*v)) : NULL;
	struct net_model old;
	size_t i;

	if (np && !v)
		return;
	for (i = 0; i < np; i++) {
		snprintf(v[i].name, sizeof(v[i].name), "%s", p[i].name ? p[i].name : "");
		snprintf(v[i].address, sizeof(v[i].address), "%s",
			 p[i].address ? p[i].address : "");
		v[i].iser = p[i].transport == ISC_PORTAL_ISER;
	}
	free(n->portals);
	n->portals = v;
	n->nportals = np;
	/* Same netdevs, new chains: judge again and log what changed, against the verdicts
	 * taken aside. */
	net_model_init(&old);
	old.verdicts = n->model.verdicts;
	old.nverdicts = n->model.nverdicts;
	n->model.verdicts = NULL;
	n->model.nverdicts = 0;
	net_model_resolve(&n->model, n->portals, n->nportals);
	net_judge(&n->model);
	log_changes(&old, &n->model);
	emit_changes(n, &old, &n->model);
	net_model_fini(&old);
	note_changed(n);
}

void net_mon_refresh(struct net_mon *n)
{
	mon_read(n, false);
}

void net_mon_set_watch(struct net_mon *n, net_mon_watch_fn fn, void *arg)
{
	n->watch = fn;
	n->watch_arg = arg;
}

uint64_t net_mon_generation(const struct net_mon *n)
{
	return n->generation;
}

const struct net_model *net_mon_model(const struct net_mon *n)
{
	return &n->model;
}

json_t *net_mon_json(struct net_mon *n)
{
	json_t *o = net_model_json(&n->model);

	if (!o)
		return NULL;
	json_object_set_new(o, "source", json_string(n->reader->ops->name));
	json_object_set_new(o, "reads", json_integer((json_int_t)n->reads));
	json_object_set_new(o, "events", json_integer((json_int_t)n->events));
	json_object_set_new(o, "read_at_ms", json_integer((json_int_t)n->read_at_ms));
	json_object_set_new(o, "error", n->err ? json_string(strerror(-n->err)) : json_null());
	json_object_set_new(o, "generation", json_integer((json_int_t)n->generation));
	return o;
}
