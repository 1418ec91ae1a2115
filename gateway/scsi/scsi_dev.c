// SPDX-License-Identifier: MIT
/*
 * SCSI target devices and their logical units, the top of the device side: a device's life
 * (create, destroy), the loops its LUs are spread over, an LU's life (added with its identity
 * and geometry, its backstore's events, removed once idle, freed on its owner), the event
 * callback the transport registers, and the resets and nexus loss that reach each LU's owner.
 *
 * It calls down into what an LU embeds and what a reset clears: the cluster and local
 * reservations (init, fini, waiting PR OUTs), ALUA's ports and groups (init, fini), the
 * nexuses and unit attentions, the task set (queued commands aborted) and the LUN map.
 * Nothing in the module calls it by name.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_log.h"
#include "scsi_priv.h"

/* FNV-1a: stable across gateways and releases, which is what LU identity needs. */
static uint64_t scsi_hash(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* Devices */

struct scsi_dev *scsi_dev_create(struct gw_loop *loop, const char *name)
{
	struct scsi_dev *dev = calloc(1, sizeof(*dev));

	if (!dev)
		return NULL;
	dev->name = strdup(name ? name : "");
	if (!dev->name) {
		free(dev);
		return NULL;
	}
	dev->loop = loop;
	gw_list_init(&dev->lus);
	scsi_alua_init(dev);
	scsi_itn_dev_init(dev);
	return dev;
}

static void scsi_lu_free(struct scsi_lu *lu);

void scsi_dev_destroy(struct scsi_dev *dev)
{
	struct scsi_lu *lu, *lt;

	if (!dev)
		return;
	/* The loops are stopped by now: every nexus is forgotten here, at once. */
	scsi_itn_dev_fini(dev);
	free(__atomic_exchange_n(&dev->map, NULL, __ATOMIC_ACQ_REL));
	gw_list_for_each_entry_safe(lu, lt, &dev->lus, node) {
		if (lu->nr_cmds)
			gw_warn(SCSI_LOG, "%s: LUN %llu destroyed with %u commands in flight",
				dev->name, (unsigned long long)lu->lun, lu->nr_cmds);
		gw_list_del(&lu->node);
		scsi_lu_free(lu);
	}
	scsi_alua_fini(dev);
	scsi_dev_forget_lu_picks(dev);	/* the loops' counts outlive the device */
	free(dev->name);
	free(dev);
}

void scsi_dev_set_loops(struct scsi_dev *dev, struct gw_loops *loops)
{
	dev->loops = loops && loops->n > 1 ? loops : NULL;
}

/* LUs owned, and picked for an LU not added yet, by every device sharing the loops: several
 * LUs of one apply are opened before any is added, and each must count the ones picked before
 * it; and a gateway of many one-LU targets spreads them too (each device's own count would
 * put every target's only LU on the same loop). */
static unsigned scsi_dev_loop_load(const struct scsi_dev *dev, unsigned i)
{
	return dev->loops->lus[i] + dev->loops->lus_picked[i];
}

/* Among the least loaded, the last: loop 0 also runs the control socket, apply and the
 * acceptor, so it gets an LU only when every other loop has as many. */
int scsi_dev_pick_lu_loop(struct scsi_dev *dev)
{
	unsigned best = 0;

	if (!dev->loops)
		return 0;
	for (unsigned i = 1; i < dev->loops->n; i++)
		if (scsi_dev_loop_load(dev, i) <= scsi_dev_loop_load(dev, best))
			best = i;
	return (int)best;
}

unsigned scsi_dev_lus_on_loop(const struct scsi_dev *dev, unsigned i)
{
	if (!dev->loops)
		return i == 0 ? dev->lu_count[0] : 0;
	return i < dev->loops->n ? dev->lu_count[i] : 0;
}

struct gw_loop *scsi_dev_next_lu_loop(struct scsi_dev *dev)
{
	int i;

	if (!dev->loops)
		return dev->loop;
	i = scsi_dev_pick_lu_loop(dev);
	dev->lu_picked[i]++;
	dev->loops->lus_picked[i]++;
	return dev->loops->loop[i];
}

void scsi_dev_forget_lu_picks(struct scsi_dev *dev)
{
	for (unsigned i = 0; dev->loops && i < dev->loops->n; i++)
		dev->loops->lus_picked[i] -= dev->lu_picked[i];
	memset(dev->lu_picked, 0, sizeof(dev->lu_picked));
}

void scsi_dev_set_event_cb(struct scsi_dev *dev,
			   void (*fn)(struct scsi_dev *dev, enum scsi_event ev, uint64_t lun,
				      void *arg),
			   void *arg)
{
	dev->event_fn = fn;
	dev->event_arg = arg;
}

static void scsi_dev_event(struct scsi_dev *dev, enum scsi_event ev, uint64_t lun)
{
	if (dev->event_fn)
		dev->event_fn(dev, ev, lun, dev->event_arg);
}

/* Logical units */

/* The device's loop: its list, which also holds an LU being removed. */
static struct scsi_lu *scsi_dev_lu_listed(struct scsi_dev *dev, uint64_t lun)
{
	struct scsi_lu *lu;

	gw_list_for_each_entry(lu, &dev->lus, node) {
		if (lu->lun == lun)
			return lu;
		if (lu->lun > lun)
			break;
	}
	return NULL;
}

static void scsi_luns_changed(struct scsi_dev *dev, uint64_t lun)
{
	scsi_itn_luns_changed(dev);
	scsi_dev_event(dev, SCSI_EV_LUNS_CHANGED, lun);
}

static void scsi_lu_identity(struct scsi_dev *dev, struct scsi_lu *lu)
{
	uint64_t h = scsi_hash(0xcbf29ce484222325ull, dev->name, strlen(dev->name));
	uint64_t lo;
	uint32_t company;

	h = scsi_hash(h, &lu->lun, sizeof(lu->lun));
	lo = lu->conf.naa ? lu->conf.naa : h;
	/* isergw has no IEEE company id: 24 bits of the target name's hash stand in, with the
	 * 36 vendor-specific bits, so the id is the same on every gateway of a cluster. */
	company = (uint32_t)(scsi_hash(0x84222325ull, dev->name, strlen(dev->name)) & 0xffffff);
	lu->naa[0] = 0x60 | (uint8_t)(company >> 20);
	lu->naa[1] = (uint8_t)(company >> 12);
	lu->naa[2] = (uint8_t)(company >> 4);
	lu->naa[3] = (uint8_t)((company & 0xf) << 4) | (uint8_t)((h >> 32) & 0xf);
	scsi_put32(&lu->naa[4], (uint32_t)(h >> 36) ^ (uint32_t)lu->lun);
	scsi_put64(&lu->naa[8], lo);
	if (lu->conf.serial && lu->conf.serial[0])
		snprintf(lu->serial, sizeof(lu->serial), "%s", lu->conf.serial);
	else
		snprintf(lu->serial, sizeof(lu->serial), "%016llx", (unsigned long long)lo);
}

static void scsi_lu_geometry(struct scsi_lu *lu)
{
	struct bs *bs = lu->bs;

	lu->block_size = bs->block_size;
	lu->block_shift = (uint8_t)__builtin_ctz(lu->block_size);
	lu->nblocks = bs->size >> lu->block_shift;
	/* 512-byte logical blocks sit on 4 KiB physical blocks (exponent 3), as on the file
	 * systems and flash behind the backstores: initiators align I/O and UNMAP to them. */
	lu->lbppbe = lu->block_size < 4096 ? (uint8_t)(12 - lu->block_shift) : 0;
}

/* A backstore that learns its size late (remote) or whose size changed. */
static void scsi_lu_bs_event(struct bs *bs, enum bs_event ev, void *arg)
{
	struct scsi_lu *lu = arg;

	if (ev != BS_EV_CAPACITY)
		return;
	lu->thin = lu->conf.thin && bs->can_unmap;
	scsi_lu_capacity_changed(lu);
}

/* What the LU reads of its backstore when it is added, read on the backstore's loop together
 * with setting the event callback, so that a capacity event (a remote path's probe ending on
 * that loop) comes either before the read or after, to the LU: never beside it. on false:
 * the callback is taken away again. */
struct scsi_lu_attach {
	struct scsi_lu *lu;
	bool on;
	uint64_t nblocks;		/* out: the LU's geometry and flags as read */
	uint32_t block_size;
	bool thin, readonly;
};

static int scsi_lu_attach_fn(void *arg)
{
	struct scsi_lu_attach *a = arg;
	struct scsi_lu *lu = a->lu;
	struct bs *bs = lu->bs;

	if (!a->on) {
		bs_set_event_cb(bs, NULL, NULL);
		return 0;
	}
	lu->thin = lu->conf.thin && bs->can_unmap;
	lu->readonly = bs->readonly;
	scsi_lu_geometry(lu);
	a->nblocks = lu->nblocks;
	a->block_size = lu->block_size;
	a->thin = lu->thin;
	a->readonly = lu->readonly;
	bs_set_event_cb(bs, scsi_lu_bs_event, lu);
	return 0;
}

static void scsi_lu_attach(struct scsi_lu *lu, struct scsi_lu_attach *a)
{
	a->lu = lu;
	gw_loop_call(lu->bs->loop ? lu->bs->loop : lu->loop, scsi_lu_attach_fn, a);
}

static char *scsi_strdup_or(const char *s, const char *def)
{
	return strdup(s ? s : def);
}

int scsi_dev_add_lu(struct scsi_dev *dev, const struct scsi_lu_conf *conf, struct bs *bs,
		    struct gw_errlist *errs)
{
	struct scsi_lu_attach at = { 0 };
	struct scsi_lu *lu, *pos;

	if (conf->lun > 16383) {
		gw_errlist_add(errs, "lun", "must be 0..16383, not %llu",
			       (unsigned long long)conf->lun);
		return -EINVAL;
	}
	if (scsi_dev_lu_listed(dev, conf->lun)) {
		gw_errlist_add(errs, "lun", "LUN %llu is already in use",
			       (unsigned long long)conf->lun);
		return -EEXIST;
	}
	if (!bs || bs->block_size < 512 || (bs->block_size & (bs->block_size - 1))) {
		gw_errlist_add(errs, "backstore", "no usable backstore");
		return -EINVAL;
	}
	lu = calloc(1, sizeof(*lu));
	if (!lu)
		return -ENOMEM;
	lu->conf = *conf;
	lu->conf.vendor = scsi_strdup_or(conf->vendor, "ISERGW");
	lu->conf.product = scsi_strdup_or(conf->product, "isergw LUN");
	lu->conf.revision = scsi_strdup_or(conf->revision, "0001");
	lu->conf.serial = scsi_strdup_or(conf->serial, "");
	lu->conf.owner = scsi_strdup_or(conf->owner, "");
	if (!lu->conf.vendor || !lu->conf.product || !lu->conf.revision || !lu->conf.serial ||
	    !lu->conf.owner) {
		gw_conf_free(conf_lu_keys, &lu->conf);
		free(lu);
		return -ENOMEM;
	}
	lu->dev = dev;
	lu->loop = dev->loop;
	lu->loop_idx = 0;
	if (dev->loops) {
		int i = gw_loops_index(dev->loops, bs->loop);

		if (i >= 0) {
			lu->loop = bs->loop;
			lu->loop_idx = i;
		}
	}
	dev->lu_count[lu->loop_idx]++;
	if (dev->loops)
		dev->loops->lus[lu->loop_idx]++;
	if (dev->lu_picked[lu->loop_idx]) {
		/* the pick it was opened for is an LU now */
		dev->lu_picked[lu->loop_idx]--;
		if (dev->loops)
			dev->loops->lus_picked[lu->loop_idx]--;
	}
	lu->lun = conf->lun;
	lu->bs = bs;
	lu->wce = conf->write_cache;
	scsi_lu_identity(dev, lu);
	gw_list_init(&lu->waitq);
	gw_list_init(&lu->writers);
	gw_list_init(&lu->range_waiters);
	gw_list_init(&lu->itls);
	scsi_pr_init(&lu->pr);
	scsi_prc_init(lu);
	/* Last: from here on the backstore's events reach the LU, on its loop. */
	at.on = true;
	scsi_lu_attach(lu, &at);

	gw_list_for_each_entry(pos, &dev->lus, node)
		if (pos->lun > lu->lun)
			break;
	gw_list_add_tail(&pos->node, &lu->node);	/* before pos: sorted */
	if (scsi_lun_publish(dev) < 0) {
		gw_list_del(&lu->node);
		at.on = false;
		scsi_lu_attach(lu, &at);
		lu->bs = NULL;		/* the caller keeps it */
		scsi_lu_free(lu);
		return -ENOMEM;
	}
	gw_info(SCSI_LOG, "%s: LUN %llu: %llu blocks of %u bytes%s%s", dev->name,
		(unsigned long long)lu->lun, (unsigned long long)at.nblocks, at.block_size,
		at.thin ? ", thin" : "", at.readonly ? ", read-only" : "");
	scsi_luns_changed(dev, lu->lun);
	return 0;
}

/* On the owner: what only it touches, the backstore last. */
static int scsi_lu_free_fn(void *arg)
{
	struct scsi_lu *lu = arg;

	scsi_itl_free_all(lu);
	scsi_prc_fini(lu);
	scsi_pr_fini(&lu->pr);
	if (lu->bs)
		bs_set_event_cb(lu->bs, NULL, NULL);
	bs_destroy(lu->bs);
	gw_conf_free(conf_lu_keys, &lu->conf);
	free(lu);
	return 0;
}

/* The device's loop, the LU out of the list and map. */
static void scsi_lu_free(struct scsi_lu *lu)
{
	lu->dev->lu_count[lu->loop_idx]--;
	if (lu->dev->loops)
		lu->dev->loops->lus[lu->loop_idx]--;
	gw_loop_call(lu->loop, scsi_lu_free_fn, lu);
}

static int scsi_lu_idle_fn(void *arg)
{
	struct scsi_lu *lu = arg;

	return lu->nr_cmds || (lu->bs && lu->bs->inflight) ? -EBUSY : 0;
}

/*
 * Asks the owner whether the LU is idle (-EBUSY: today's answer, the LU stays in use), takes
 * it out of the map, and asks again: after the map's barrier no loop can reach the LU any
 * more, and every command a loop submitted before it is ahead of the second question in the
 * owner's queue. A command that slipped in between puts the LU back (-EBUSY too).
 */
int scsi_dev_del_lu(struct scsi_dev *dev, uint64_t lun)
{
	struct scsi_lu *lu = scsi_dev_lu_listed(dev, lun);
	int r;

	if (!lu)
		return -ENOENT;
	r = gw_loop_call(lu->loop, scsi_lu_idle_fn, lu);
	if (r)
		return r;
	lu->unmapped = true;
	r = scsi_lun_publish(dev);
	if (r == 0)
		r = gw_loop_call(lu->loop, scsi_lu_idle_fn, lu);
	if (r) {
		lu->unmapped = false;
		if (scsi_lun_publish(dev) < 0)
			gw_err(SCSI_LOG, "%s: LUN %llu: out of memory putting it back",
			       dev->name, (unsigned long long)lun);
		return r;
	}
	gw_list_del(&lu->node);
	scsi_lu_free(lu);
	gw_info(SCSI_LOG, "%s: LUN %llu removed", dev->name, (unsigned long long)lun);
	scsi_luns_changed(dev, lun);
	return 0;
}

struct scsi_dev_event_msg {
	struct scsi_dev *dev;
	uint64_t lun;
	enum scsi_event ev;
};

static void scsi_dev_event_fn(void *arg)
{
	struct scsi_dev_event_msg *m = arg;

	scsi_dev_event(m->dev, m->ev, m->lun);
	free(m);
}

/* From an LU's owner: the event callback is the device's loop's (it walks the target's
 * sessions), so it runs there, by a message when the owner is another loop. */
static void scsi_lu_event(struct scsi_lu *lu, enum scsi_event ev)
{
	struct scsi_dev_event_msg *m;

	if (lu->loop == lu->dev->loop) {
		scsi_dev_event(lu->dev, ev, lu->lun);
		return;
	}
	m = malloc(sizeof(*m));
	if (!m)
		return;
	m->dev = lu->dev;
	m->lun = lu->lun;
	m->ev = ev;
	if (gw_loop_send(lu->dev->loop, scsi_dev_event_fn, m) < 0)
		free(m);	/* shutting down: no session to tell */
}

void scsi_lu_capacity_changed(struct scsi_lu *lu)
{
	uint64_t old = lu->nblocks;

	scsi_lu_geometry(lu);
	gw_info(SCSI_LOG, "%s: LUN %llu: capacity %llu -> %llu blocks", lu->dev->name,
		(unsigned long long)lu->lun, (unsigned long long)old,
		(unsigned long long)lu->nblocks);
	scsi_ua_set(lu, NULL, SCSI_UA_CAPACITY);
	scsi_lu_event(lu, SCSI_EV_CAPACITY_CHANGED);
}

static int scsi_lu_bs_settled_fn(void *arg)
{
	struct scsi_lu *lu = arg;

	return lu->bs && !bs_settled(lu->bs) ? 0 : 1;
}

/* The device's loop; each backstore is asked on its LU's owner. */
bool scsi_dev_bs_settled(struct scsi_dev *dev)
{
	struct scsi_lu *lu;

	gw_list_for_each_entry(lu, &dev->lus, node)
		if (gw_loop_call(lu->loop, scsi_lu_bs_settled_fn, lu) == 0)
			return false;
	return true;
}

static int scsi_lu_bs_shutdown_fn(void *arg)
{
	struct scsi_lu *lu = arg;

	if (lu->bs)
		bs_shutdown(lu->bs);
	return 0;
}

void scsi_dev_bs_shutdown(struct scsi_dev *dev)
{
	struct scsi_lu *lu;

	gw_list_for_each_entry(lu, &dev->lus, node)
		gw_loop_call(lu->loop, scsi_lu_bs_shutdown_fn, lu);
}

/* Resets and nexus loss */

static void scsi_lu_abort_queued(struct scsi_lu *lu, struct scsi_itn *only)
{
	struct scsi_cmd *cmd, *t;

	gw_list_for_each_entry_safe(cmd, t, &lu->waitq, node)
		if (!only || cmd->itn == only)
			scsi_task_abort_queued(cmd);
	/* PR OUTs waiting for the one whose cluster commit is out have changed nothing yet; that
	 * one runs on, as a command in the backstore does. */
	scsi_prc_abort_queued(lu, only);
}

static void scsi_lu_do_reset(struct scsi_lu *lu, struct scsi_itn *by, int ua)
{
	scsi_lu_abort_queued(lu, NULL);
	lu->res2_holder = NULL;
	/* Mode parameters go back to their defaults (no saved values here). */
	lu->wce = lu->conf.write_cache;
	/* Every I_T nexus, the one that asked included: its other commands were aborted too,
	 * and multipath initiators (libiscsi's MultipathIO.Reset) expect to hear it on each path. */
	(void)by;
	scsi_ua_set(lu, NULL, ua);
}

static void scsi_lu_reset_fn(struct scsi_lu *lu, int ua, void *p)
{
	bool cold = p != NULL;

	scsi_lu_do_reset(lu, NULL, ua);
	if (cold && !scsi_dev_pr_cluster(lu->dev)) {
		/* A cold reset is a power cycle: registrations without APTPL are lost, and we
		 * persist none (a cluster's state is the cluster's). */
		scsi_pr_fini(&lu->pr);
		scsi_pr_init(&lu->pr);
	}
}

/* Resets and nexus loss run on each LU's owner; queued commands aborted there complete on
 * their own loops. The caller's later commands reach the owner after the reset (one sender's
 * messages keep their order). */
void scsi_lu_reset(struct scsi_dev *dev, uint64_t lun, struct scsi_itn *by)
{
	struct scsi_lu *lu = scsi_dev_find_lu(dev, lun);

	(void)by;
	if (!lu)
		return;
	gw_info(SCSI_LOG, "%s: LUN %llu reset", dev->name, (unsigned long long)lun);
	scsi_lu_on_owner(lu, scsi_lu_reset_fn, SCSI_UA_BDR, NULL);
}

void scsi_target_reset(struct scsi_dev *dev, bool cold, struct scsi_itn *by)
{
	const struct scsi_lun_map *map = scsi_dev_map(dev);

	(void)by;
	gw_info(SCSI_LOG, "%s: target %s reset", dev->name, cold ? "cold" : "warm");
	for (size_t i = 0; map && i < map->n; i++)
		scsi_lu_on_owner(map->e[i].lu, scsi_lu_reset_fn,
				 cold ? SCSI_UA_POWER_ON_OCCURRED : SCSI_UA_BDR, cold ? dev : NULL);
}

static void scsi_itn_nexus_loss_fn(struct scsi_lu *lu, int a, void *p)
{
	struct scsi_itn *itn = p;

	(void)a;
	scsi_lu_abort_queued(lu, itn);
	if (lu->res2_holder == itn)
		lu->res2_holder = NULL;
	scsi_ua_set_itn(itn, lu, SCSI_UA_NEXUS_LOSS);
}

void scsi_itn_nexus_loss(struct scsi_itn *itn)
{
	const struct scsi_lun_map *map = scsi_dev_map(itn->dev);

	for (size_t i = 0; map && i < map->n; i++)
		scsi_lu_on_owner(map->e[i].lu, scsi_itn_nexus_loss_fn, 0, itn);
}
