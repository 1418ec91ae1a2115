/* SPDX-License-Identifier: MIT */
/*
 * dm-multipath awareness of block backstores. When a block backstore's device is a
 * dm-multipath map (a dm device whose dm uuid starts with "mpath-"), the gateway asks
 * multipathd for the map's and its paths' state through multipathd's own socket (the abstract
 * unix socket "@/org/kernel/linux/storage/multipathd", libmpathcmd's framing: a size_t length
 * then the command with its NUL; the reply framed the same way), at open and then every
 * interval, without ever blocking the loop: connect, send and receive are non-blocking and a
 * query not answered within its timeout is dropped.
 *
 * It only watches: the kernel's dm-multipath moves I/O between the paths, multipathd checks
 * them. What it adds is visibility (the LUN's status shows the map and its paths) and a
 * warning for settings that would hang I/O forever when every path is gone
 * (queue_if_no_path with no_path_retry "queue").
 */
#ifndef MP_DM_H
#define MP_DM_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "gw_loop.h"

#define MP_DM_SOCKET "/org/kernel/linux/storage/multipathd"

struct mp_dm;

/*
 * Is the block device rdev a dm-multipath map? Reads SYSFS/dev/block/MAJ:MIN/dm/{uuid,name}
 * (sysfs is "/sys" but for tests). Returns 1 and the map name, 0 when it is not one, -errno
 * when sysfs cannot say.
 */
int mp_dm_probe(const char *sysfs, dev_t rdev, char *name, size_t len);

/*
 * Watches map `name` for the backstore labelled `label` (logs), querying multipathd at once and
 * every interval_ms. sock is the abstract socket name (MP_DM_SOCKET but for tests).
 */
int mp_dm_create(struct gw_loop *loop, const char *label, const char *name, const char *sock,
		 uint64_t interval_ms, struct mp_dm **out);
void mp_dm_destroy(struct mp_dm *dm);
/* The map as last seen: {map, multipathd, features, queueing, dm_st, paths[], warning...}. */
json_t *mp_dm_status(const struct mp_dm *dm);
/* Queries so far that got an answer (tests). */
uint64_t mp_dm_answers(const struct mp_dm *dm);

/*
 * Parsing, exposed for the unit tests. reply is multipathd's answer to "show maps json" or
 * "show map NAME json". Returns a new status object for map `name` (NULL: not in the reply,
 * *err says why when not NULL).
 */
json_t *mp_dm_parse(const char *reply, size_t len, const char *name, const char **err);
/* The warning for settings that hang I/O without a path, or NULL. */
const char *mp_dm_hang_warning(const char *features, const char *queueing);

#endif
