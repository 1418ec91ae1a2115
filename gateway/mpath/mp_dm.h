/* SPDX-License-Identifier: MIT */
/*
 * Private to gateway/mpath/: what mp_dm.c exposes to its unit tests (reply parsing, the hang
 * warning, the answer count). The dm-multipath client itself is public, in mp.h.
 */
#ifndef MP_DM_H
#define MP_DM_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "gw_loop.h"
#include "mp.h"

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
