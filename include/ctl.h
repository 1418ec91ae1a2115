/* SPDX-License-Identifier: MIT */
/*
 * The gateway composed from its configuration: the layer above the iSCSI engine that owns the
 * gateway object (struct ctl_gw), wires targets to SCSI devices, LUs and backstores
 * (ctl_gw.c, ctl_target.c, ctl_lu.c), applies live configuration changes (ctl_apply.c),
 * reports the live state (ctl_state.c), and serves both on the control socket (ctl_sock.c). The iSCSI layer (isc.h) runs what is built here; it never opens
 * a backstore itself. The configuration it is built from is conf.h's.
 */
#ifndef CTL_H
#define CTL_H

#include <jansson.h>
#include <sched.h>
#include <stdbool.h>

#include "conf.h"
#include "gw_conf.h"
#include "gw_loop.h"
#include "isc.h"

/*
 * The gateway, composed (ctl_gw.c): the iSCSI engine with its portals and targets, the
 * configuration they run on, and what ctl keeps beside them. Opaque; loop 0 owns it and every
 * call below runs there.
 */
struct ctl_gw;

/* Builds targets (SCSI devices, LUs, ports) and portals from conf, which the gateway takes
 * over (also on error). Does not listen yet. errs gets what failed, by key path. */
int ctl_gw_create(struct gw_loop *loop, struct isc_gw_conf *conf, struct ctl_gw **out,
		  struct gw_errlist *errs);
/* The same with the gateway's loops (loops->loop[0] is loop) set before the targets are
 * built, so their LUs spread over the loops from the start. */
int ctl_gw_create_loops(struct gw_loop *loop, struct gw_loops *loops, struct isc_gw_conf *conf,
			struct ctl_gw **out, struct gw_errlist *errs);
/* Frees the gateway (after ctl_gw_stop and the drain): the engine, its targets and portals,
 * the configuration. NULL is fine. */
void ctl_gw_destroy(struct ctl_gw *g);
/* The iSCSI engine (isc.h), for what reads or acts on it directly. */
struct isc_gw *ctl_gw_engine(const struct ctl_gw *g);
/* The running configuration (read-only). */
const struct isc_gw_conf *ctl_gw_conf(const struct ctl_gw *g);
/* gateway.data_memory, applied at once (the one place that sets it). */
void ctl_gw_set_data_memory(struct ctl_gw *g, uint64_t bytes);
uint64_t ctl_gw_data_memory(const struct ctl_gw *g);
/* Opens every portal; logs "listening on ADDR (tcp)" per portal. 0 or the first -errno. */
int ctl_gw_listen(struct ctl_gw *g);
/* Start-up: every remote backstore has a path or spent its initial login budget (its first
 * login_timeout x initial_login_retry_max, default 1 attempt). */
bool ctl_gw_settled(const struct ctl_gw *g);
/* Runs the loop until ctl_gw_settled or bound_ms passed (gateway.boot_wait; 0: returns at
 * once), so main() opens the portals and sends READY=1 within the bound however many back
 * ends are unreachable. LUNs not settled keep logging in and answer NOT READY, becoming ready
 * (02/04/01) until a path is up. 0 settled, -ETIMEDOUT, or -EINTR (the loop was stopped). */
int ctl_gw_boot_wait(struct gw_loop *loop, const struct ctl_gw *g, uint64_t bound_ms);
/* Shutdown: stops accepting, closes every connection (each on its loop), and remote
 * backstores stop queueing and fail what is still in flight after their drain_timeout_ms, so
 * the drain (ctl_gw_idle) never waits on a dead back end. */
void ctl_gw_stop(struct ctl_gw *g);
/* No session, connection or task is left. */
bool ctl_gw_idle(const struct ctl_gw *g);
/* bs_create / scsi_dev_add_lu with their errors filed under path (a key path prefix)
 * (ctl_lu.c). The backstore is created on loop, by a call into it (from loop 0): it is the
 * loop that will own the LU (scsi_dev_next_lu_loop). ctl_bs_close destroys one on its own
 * loop. */
int ctl_bs_open(struct gw_loop *loop, const struct bs_conf *conf, const char *path,
		struct gw_errlist *errs, struct bs **out);
void ctl_bs_close(struct bs *bs);
int ctl_lu_add(struct scsi_dev *dev, const struct scsi_lu_conf *conf, struct bs *bs,
	       const char *path, struct gw_errlist *errs);

/* ctl_loops.c: the gateway's event loops (gateway.loops) */
struct ctl_loops {
	struct gw_loops set;		/* loop 0 (the caller's) first */
	struct gw_loop extra[GW_LOOPS_MAX - 1];	/* loops 1..n-1 */
	int cpu[GW_LOOPS_MAX];		/* each loop's CPU; -1: not pinned (one loop) */
	unsigned nstarted;		/* loops 1..nstarted have been initialised */
	bool pinned0;			/* the calling thread was pinned: saved_mask restores it */
	cpu_set_t saved_mask;
};

/*
 * Starts loops 1..n-1 on threads of their own and, when n > 1, pins each loop to one CPU of the
 * process's affinity mask in order, loop 0 (the calling thread, whose loop is loop0) to the
 * first. n == 1: no thread, nothing pinned. More loops than CPUs in the mask is refused
 * (-EINVAL, errs names gateway.loops). Call it after gw_signal_init, so the threads inherit the
 * blocked signals. 0 or -errno; on error nothing is left started.
 */
int ctl_loops_start(struct gw_loop *loop0, unsigned n, struct ctl_loops **out,
		    struct gw_errlist *errs);
/* Stops the threads of loops 1..n-1 (each runs what was posted to it first) and joins them;
 * from then on the caller may touch what they owned. Idempotent. */
void ctl_loops_stop(struct ctl_loops *ls);
/* After ctl_loops_stop, on the main thread: runs what the loops (loop 0 included) still have
 * posted to each other, until none has anything left, before what it names is freed. */
void ctl_loops_drain(struct ctl_loops *ls);
/* Stops, finishes loops 1..n-1, unpins the calling thread and frees; NULL is fine. */
void ctl_loops_destroy(struct ctl_loops *ls);
/* gateway.poll_us for every loop (gw_loop_set_poll), each on its own thread; from loop 0's. */
void ctl_loops_set_poll(struct ctl_loops *ls, unsigned poll_us);
/* [{loop, cpu, connections, poll_us, sleeps, polls, poll_hits}] (new reference). */
json_t *ctl_loops_state(const struct ctl_loops *ls);

/* ctl_apply.c: live changes, for the control socket */
/*
 * Makes the running gateway match conf (checked already: conf_parse), changing only what
 * differs: portals, targets, their ACL/CHAP/params (for new logins), LUNs. New backstores and
 * portals are opened first; if one fails nothing changes and errs says why (-EINVAL). Sessions
 * of removed targets, of initiators no longer admitted and of removed portals are closed; a
 * removed LUN with commands in flight goes once they drain (new commands to it get LOGICAL UNIT
 * NOT SUPPORTED meanwhile). A LUN whose backstore differs only in size is resized in service
 * (bs_resize_prepare/commit: the LU, its sessions, commands and reservations stay, hosts get
 * 2A/09); a smaller size is refused unless flags has CTL_APPLY_SHRINK. Takes conf over in every
 * case. 0 or -errno.
 */
#define CTL_APPLY_SHRINK	1u
int ctl_gw_apply(struct ctl_gw *g, struct isc_gw_conf *conf, unsigned flags,
		 struct gw_errlist *errs);
/* The LU of target's LUN takes the size of what its backstore stands on now (a block device or
 * file resized from outside; its configuration gives no size). Smaller only with
 * CTL_APPLY_SHRINK. *size: the new size in bytes. A remote LUN's paths read the back end's
 * capacity again instead: *pending, *size the size until the answer. 0, or -errno with errs
 * naming the field. */
int ctl_gw_lun_rescan(struct ctl_gw *g, const char *target, uint64_t lun, unsigned flags,
		      uint64_t *size, bool *pending, struct gw_errlist *errs);
/* ctl_state.c: live state: portals, targets with per-LUN counters, sessions with connections
 * (new reference). */
json_t *ctl_gw_state(struct ctl_gw *g);

/*
 * ctl_sock.c: the gateway's control socket (docs/CONTROL.md): a unix stream socket, mode 0600,
 * that the agent uses to apply configuration changes live and to read live state. One JSON
 * object per line each way, answered in order, all inside the gateway's event loop:
 *   {"op":"apply","config":{...}}   diff against the running configuration, change only that
 *   {"op":"config"}                 the running configuration (secrets in clear: root only)
 *   {"op":"state"}                  sessions, per-LUN counters, portals, the network (net)
 *   {"op":"drop_session","tsih":N}  close one session
 *   {"op":"ping"}
 *   {"op":"lease","valid_ms":N}     cluster: this gateway's ownership is valid for N ms from
 *                                   now; without another one by then less
 *                                   gateway.fence_margin_ms every LUN reports ALUA standby
 *   {"op":"net"}                    the network model alone (state's "net")
 *   {"op":"watch"}                  after its reply, the connection also gets one line per
 *                                   network event, {"event":TYPE,"data":{...}} (net.h's
 *                                   net_mon_set_watch), between replies; a watcher with
 *                                   over 1 MiB unread is disconnected (it reconnects, watches
 *                                   and reads "net" again: nothing is coalesced or lost silently)
 *   {"op":"pr_cluster","enabled":B,"luns":[{"target","lun","rev","state"}]}
 *                                   cluster: PR OUT is decided on the cluster's states (a full
 *                                   snapshot here), each change a "pr_commit" watch event
 *   {"op":"pr","target":T,"lun":L,"rev":R,"state":S}   a newer state from the etcd watch
 *   {"op":"pr_result","commit":N,"result":"ok"|"conflict"|"unavailable",...}
 *                                   the answer to pr_commit event N (docs/CONTROL.md)
 * Replies: {"id":..,"ok":true,...} or {"id":..,"ok":false,"code":"...","message":"...",
 * "errors":[{"field":"...","message":"..."}]}.
 */
struct ctl_sock;

/* Listens on path (a stale socket there is replaced; any other file is an error). gw is the
 * running gateway; gconf its "gateway" section (copied). path NULL: no socket, and the object
 * still handles requests given to ctl_sock_handle (SIGHUP's reload). 0 or -errno. */
int ctl_sock_create(struct gw_loop *loop, const char *path, struct ctl_gw *gw,
		    const struct ctl_gateway_conf *gconf, struct ctl_sock **out);
/* Closes every client and removes the socket file. */
void ctl_sock_destroy(struct ctl_sock *s);
/* Whether a client of the socket (the agent) has applied a configuration since start: the
 * gateway then follows the agent's store, and a reload of the file would be undone by it. */
bool ctl_sock_managed(const struct ctl_sock *s);
struct net_mon;
/* The network model (net.h) whose state is the "net" object of the state reply, and which an
 * apply tells the new portals; NULL (the default) leaves "net" out. */
void ctl_sock_set_net(struct ctl_sock *s, struct net_mon *net);
/* The gateway's loops, reported as the "loops" array of the state reply; NULL (the default)
 * leaves it out. */
void ctl_sock_set_loops(struct ctl_sock *s, struct ctl_loops *loops);
/* Unsent bytes after which a watcher is dropped (0: the default, 1 MiB). */
void ctl_sock_set_watch_backlog(struct ctl_sock *s, size_t bytes);
/* ctl_net.c: on each change of a bond's active slave that n sees, the iSER portals of gw bound
 * on that bond listen again at once and keep or drop their connections (net_failover_plan),
 * with the delay since the netlink event in the log. */
void ctl_net_follow(struct ctl_gw *g, struct net_mon *n);
/* One request to its reply (new reference); what a client line goes through. */
json_t *ctl_sock_handle(struct ctl_sock *s, const json_t *req);
/* The running configuration as the JSON the config file holds (new reference). */
json_t *ctl_config_dump(const struct isc_gw_conf *c, const struct ctl_gateway_conf *g,
			bool mask_secrets);

#endif
