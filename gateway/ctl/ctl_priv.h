/* SPDX-License-Identifier: MIT */
/*
 * Private to gateway/ctl/: the composed gateway object and what ctl hangs on each target. The
 * public part is ctl.h.
 *
 * The files form a stack; each calls only those below it (tests/check-layers.py --files):
 *   ctl_sock.c     the control socket: requests to the calls below, the fence, cluster PR
 *   ctl_apply.c    a new configuration applied live, as a short sequence of steps
 *   ctl_gw.c       the gateway's life cycle: built from a configuration, listening, start-up
 *                  wait, shutdown
 *   ctl_target.c   one target built (SCSI device, port, LUs), what ctl keeps per target (the
 *                  configuration a removed one drains on), LUN removals waiting for commands
 *   ctl_lu.c       a backstore opened on the loop that will own its LU, an LU added
 *   ctl_state.c, ctl_net.c, ctl_loops.c   the live state, portals following bond failovers,
 *                  the event loops (each calls nothing else of ctl)
 */
#ifndef CTL_PRIV_H
#define CTL_PRIV_H

#include "bs.h"
#include "ctl.h"
#include "isc.h"
#include "scsi.h"

/*
 * The gateway: the iSCSI engine with its portals and targets, the configuration they run on,
 * and what ctl keeps beside them. Loop 0 owns it: every field is read and written on loop 0's
 * thread only. The engine's lists change only through the engine's functions (isc.h), which
 * take its registry lock for the logins other loops run.
 */
struct ctl_gw {
	struct gw_loop *loop;		/* loop 0 */
	struct gw_loops *loops;		/* the gateway's loops (not owned); NULL: one loop */
	struct isc_gw *isc;		/* the iSCSI engine */
	struct isc_gw_conf *conf;	/* the running configuration (owned) */
	struct gw_list pending;		/* struct ctl_lun_pending: removals waiting for commands */
	struct gw_timer lun_timer;	/* retries them while any is left */
	bool lun_timer_on;
};

/* An old configuration kept alive for removed targets whose sessions still drain on it. */
struct ctl_conf_hold {
	struct isc_gw_conf *conf;
	int refs;
};

/* ctl_lu.c */
/* Moves the errors of a lower layer, which names fields relative to its own object, into errs
 * under path ("targets[0].luns[1].backstore" + ".path"). */
void ctl_errs_prefix(struct gw_errlist *errs, const struct gw_errlist *sub, const char *path);

/* ctl_target.c */
/* Builds a target from tc (LUs included) without linking it; *out is set even on error (then
 * isc_target_destroy it). errs entries are named "targets[idx]...". */
int ctl_target_new(struct ctl_gw *g, struct isc_target_conf *tc, size_t idx,
		   struct gw_errlist *errs, struct isc_target **out);
/* The target's SCSI device gets the cluster's port groups (nothing without a cluster). */
int ctl_target_set_groups(struct isc_target *t, const struct isc_gw_conf *c);
/* Takes a target out of service; its sessions drain on the configuration h holds. */
void ctl_target_retire(struct isc_target *t, struct ctl_conf_hold *h);
/* Removes LUN lun of a running target (and with bs, puts lu over bs in its place): now, or
 * once the commands in flight to it drained (new ones get LOGICAL UNIT NOT SUPPORTED). */
void ctl_lun_replace(struct ctl_gw *g, struct isc_target *t, uint64_t lun,
		     const struct scsi_lu_conf *lu, struct bs *bs);
void ctl_conf_hold_put(struct ctl_conf_hold *h);

/* ctl_state.c */
/* The gateway's live state (ctl.h's ctl_gw_state). */

#endif
