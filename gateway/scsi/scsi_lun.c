// SPDX-License-Identifier: MIT
/*
 * LUNs and reaching an LU: the 8-byte SAM LUN field (include/scsi.h), the LUN map (the sorted
 * array of a device's LUs that every loop reads without a lock or a message, published whole
 * by the device's loop, the old copy freed after a barrier through every loop), the lookups on
 * it, and work run on an LU's owner loop (at once on the owner, else by a message).
 *
 * The bottom of the module, beside scsi_reply.c: it calls nothing else in gateway/scsi, and
 * every file above finds its LU here.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gw_log.h"
#include "scsi_priv.h"

/* The SAM LUN field */

uint64_t scsi_lun_decode(const uint8_t lun[8])
{
	switch (lun[0] >> 6) {
	case 0:		/* peripheral device addressing: bus 0, LUN in byte 1 */
		return lun[1];
	case 1:		/* flat space addressing */
		return ((uint64_t)(lun[0] & 0x3f) << 8) | lun[1];
	default:
		/* Extended or logical unit addressing: return it whole, so it matches no LU. */
		return scsi_get64(lun);
	}
}

void scsi_lun_encode(uint64_t lun, uint8_t out[8])
{
	memset(out, 0, 8);
	if (lun < 256) {
		out[1] = (uint8_t)lun;
	} else if (lun < 16384) {
		out[0] = 0x40 | (uint8_t)(lun >> 8);
		out[1] = (uint8_t)lun;
	} else {
		scsi_put64(out, lun);
	}
}

/* The LUN map */

/* Any loop: a binary search in the published map, no lock, no message. */
struct scsi_lu *scsi_dev_find_lu(struct scsi_dev *dev, uint64_t lun)
{
	const struct scsi_lun_map *map = scsi_dev_map(dev);
	size_t lo = 0, hi = map ? map->n : 0;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (map->e[mid].lun == lun)
			return map->e[mid].lu;
		if (map->e[mid].lun < lun)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

struct gw_loop *scsi_dev_lu_loop(struct scsi_dev *dev, uint64_t lun)
{
	struct scsi_lu *lu = scsi_dev_find_lu(dev, lun);

	return lu ? lu->loop : NULL;
}

struct bs *scsi_dev_lu_bs(struct scsi_dev *dev, uint64_t lun)
{
	struct scsi_lu *lu = scsi_dev_find_lu(dev, lun);

	return lu ? lu->bs : NULL;
}

static int scsi_loop_barrier_fn(void *arg)
{
	(void)arg;
	return 0;
}

/* The device's loop: returns once every loop has run a call, so no loop still reads a copy
 * swapped out before (a loop reads a published copy only inside one callback). */
void scsi_dev_barrier(struct scsi_dev *dev)
{
	for (unsigned i = 0; dev->loops && i < dev->loops->n; i++)
		gw_loop_call(dev->loops->loop[i], scsi_loop_barrier_fn, NULL);
}

/* The device's loop: publishes the listed LUs but those being removed, then frees the old map
 * once every loop has run a call (a loop reads a map only inside one callback). */
int scsi_lun_publish(struct scsi_dev *dev)
{
	struct scsi_lun_map *map, *old;
	struct scsi_lu *lu;
	size_t n = 0;

	gw_list_for_each_entry(lu, &dev->lus, node)
		n++;
	map = malloc(sizeof(*map) + n * sizeof(map->e[0]));
	if (!map)
		return -ENOMEM;
	map->n = 0;
	gw_list_for_each_entry(lu, &dev->lus, node) {
		if (lu->unmapped)
			continue;
		map->e[map->n].lun = lu->lun;
		map->e[map->n].lu = lu;
		map->n++;
	}
	old = __atomic_exchange_n(&dev->map, map, __ATOMIC_ACQ_REL);
	scsi_dev_barrier(dev);
	free(old);
	return 0;
}

/* Work on an LU from another loop: reset, nexus loss, attentions. */
struct scsi_lu_job {
	struct scsi_lu *lu;
	void (*fn)(struct scsi_lu *lu, int a, void *p);
	int a;
	void *p;
};

static void scsi_lu_job_fn(void *arg)
{
	struct scsi_lu_job *j = arg;

	j->fn(j->lu, j->a, j->p);
	free(j);
}

/*
 * fn(lu, a, p) on the LU's owner: at once on the owner (and always without loops), else by a
 * message (allocated: task management and attentions are rare). The LU outlives it: its
 * removal asks the owner after a barrier through every loop, so behind this post.
 */
void scsi_lu_on_owner(struct scsi_lu *lu, void (*fn)(struct scsi_lu *lu, int a, void *p), int a,
		      void *p)
{
	struct scsi_lu_job *j;

	if (!lu->dev->loops || lu->loop == gw_loop_current()) {
		fn(lu, a, p);
		return;
	}
	j = malloc(sizeof(*j));
	if (j) {
		j->lu = lu;
		j->fn = fn;
		j->a = a;
		j->p = p;
		if (gw_loop_send(lu->loop, scsi_lu_job_fn, j) == 0)
			return;
		free(j);
	}
	gw_err(SCSI_LOG, "%s: LUN %llu: its loop cannot be reached", lu->dev->name,
	       (unsigned long long)lu->lun);
}
