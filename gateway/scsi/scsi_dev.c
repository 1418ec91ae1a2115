// SPDX-License-Identifier: MIT
/*
 * SCSI target devices: ports and ALUA groups, logical units and their identity, I_T nexuses,
 * unit attentions per I_T nexus per LU, the per-LU task set (SIMPLE / ORDERED / HEAD OF QUEUE),
 * the writer range lock COMPARE AND WRITE relies on, and resets.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_log.h"
#include "scsi_priv.h"

enum {
	SCSI_CMDF_EXCL = 1 << 0,	/* range lock held exclusively (COMPARE AND WRITE) */
	SCSI_CMDF_CAW_COUNTED = 1 << 1,	/* counted in lu->nr_caw */
};

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

/* Devices, ports, ALUA groups */

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
	pthread_mutex_init(&dev->itn_lock, NULL);
	gw_list_init(&dev->ports);
	gw_list_init(&dev->tpgs);
	gw_list_init(&dev->itns);
	gw_list_init(&dev->lus);
	dev->next_rel_id = 1;
	dev->next_itn_id = 1;
	return dev;
}

static void scsi_lu_free(struct scsi_lu *lu);
static void scsi_itn_forget(struct scsi_itn *itn, struct gw_list *lus, bool all);
static void scsi_itn_free(struct scsi_itn *itn);

void scsi_dev_destroy(struct scsi_dev *dev)
{
	struct scsi_lu *lu, *lt;
	struct scsi_itn *itn, *it;
	struct scsi_port *p, *pt;
	struct scsi_tpg *g, *gt;

	if (!dev)
		return;
	/* The loops are stopped by now: every nexus is forgotten here, at once. */
	gw_list_for_each_entry_safe(itn, it, &dev->itns, node) {
		gw_list_del(&itn->node);
		scsi_itn_forget(itn, &dev->lus, true);
		scsi_itn_free(itn);
	}
	free(__atomic_exchange_n(&dev->map, NULL, __ATOMIC_ACQ_REL));
	free(__atomic_exchange_n(&dev->alua, NULL, __ATOMIC_ACQ_REL));
	gw_list_for_each_entry_safe(lu, lt, &dev->lus, node) {
		if (lu->nr_cmds)
			gw_warn(SCSI_LOG, "%s: LUN %llu destroyed with %u commands in flight",
				dev->name, (unsigned long long)lu->lun, lu->nr_cmds);
		gw_list_del(&lu->node);
		scsi_lu_free(lu);
	}
	gw_list_for_each_entry_safe(p, pt, &dev->ports, node) {
		gw_list_del(&p->node);
		free(p->name);
		free(p);
	}
	gw_list_for_each_entry_safe(g, gt, &dev->tpgs, node) {
		gw_list_del(&g->node);
		free(g);
	}
	scsi_dev_forget_lu_picks(dev);	/* the loops' counts outlive the device */
	pthread_mutex_destroy(&dev->itn_lock);
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

struct gw_loop *scsi_dev_lu_loop(struct scsi_dev *dev, uint64_t lun)
{
	struct scsi_lu *lu = scsi_dev_find_lu(dev, lun);

	return lu ? lu->loop : NULL;
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

struct scsi_tpg *scsi_alua_tpg(struct scsi_dev *dev, uint16_t id)
{
	struct scsi_tpg *g;

	gw_list_for_each_entry(g, &dev->tpgs, node)
		if (g->id == id)
			return g;
	g = calloc(1, sizeof(*g));
	if (!g)
		return NULL;
	g->id = id;
	g->state = SCSI_ALUA_AO;
	gw_list_add_tail(&dev->tpgs, &g->node);
	return g;
}

struct scsi_port *scsi_dev_add_port(struct scsi_dev *dev, const char *name, uint16_t tpg_id)
{
	struct scsi_port *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->name = strdup(name);
	if (!p->name || !scsi_alua_tpg(dev, tpg_id)) {
		free(p->name);
		free(p);
		return NULL;
	}
	p->rel_id = dev->next_rel_id++;
	p->tpg_id = tpg_id;
	gw_list_add_tail(&dev->ports, &p->node);
	if (scsi_alua_publish(dev)) {
		gw_list_del(&p->node);
		free(p->name);
		free(p);
		return NULL;
	}
	return p;
}

void scsi_dev_set_alua(struct scsi_dev *dev, uint16_t tpg_id, enum scsi_alua_state state)
{
	struct scsi_tpg *g = scsi_alua_tpg(dev, tpg_id);
	struct scsi_lu *lu;

	if (!g || g->state == state)
		return;
	gw_info(SCSI_LOG, "%s: target port group %u: ALUA state %#x -> %#x", dev->name, tpg_id,
		g->state, state);
	g->state = state;
	if (scsi_alua_publish(dev))
		gw_err(SCSI_LOG, "%s: target port group %u: state not published: out of memory",
		       dev->name, tpg_id);
	/* Every nexus learns of it: multipath re-reads the groups on 2A/06. */
	gw_list_for_each_entry(lu, &dev->lus, node)
		scsi_ua_set_all(lu, SCSI_UA_ALUA_CHANGED);
}


bool scsi_dev_multiport(const struct scsi_dev *dev)
{
	const struct scsi_alua_map *am = scsi_dev_alua(dev);

	return am && am->nports > 1;
}

static void scsi_dev_alua_changed(struct scsi_dev *dev)
{
	struct scsi_lu *lu;

	gw_list_for_each_entry(lu, &dev->lus, node)
		scsi_ua_set_all(lu, SCSI_UA_ALUA_CHANGED);
}

static const struct scsi_tpg_conf *scsi_groups_find(const struct scsi_tpg_conf *groups, size_t n,
						    uint16_t id)
{
	for (size_t i = 0; i < n; i++)
		if (groups[i].id == id)
			return &groups[i];
	return NULL;
}

int scsi_dev_set_groups(struct scsi_dev *dev, const struct scsi_tpg_conf *groups, size_t n)
{
	struct scsi_tpg *g, *gt;
	struct scsi_port *p, *pt;
	bool changed = false;
	size_t i;

	/* Groups and remote ports that are no longer listed go first. */
	gw_list_for_each_entry_safe(p, pt, &dev->ports, node) {
		if (!p->remote || scsi_groups_find(groups, n, p->tpg_id))
			continue;
		gw_list_del(&p->node);
		free(p->name);
		free(p);
		changed = true;
	}
	gw_list_for_each_entry_safe(g, gt, &dev->tpgs, node) {
		bool local = false;

		gw_list_for_each_entry(p, &dev->ports, node)
			if (!p->remote && p->tpg_id == g->id)
				local = true;
		if (local || scsi_groups_find(groups, n, g->id))
			continue;
		gw_list_del(&g->node);
		free(g);
		changed = true;
	}
	for (i = 0; i < n; i++) {
		bool has_port = false;

		g = scsi_alua_tpg(dev, groups[i].id);
		if (!g) {
			scsi_alua_publish(dev);
			return -ENOMEM;
		}
		if (g->state != groups[i].state) {
			gw_info(SCSI_LOG, "%s: target port group %u: ALUA state %#x -> %#x",
				dev->name, g->id, g->state, groups[i].state);
			g->state = groups[i].state;
			changed = true;
		}
		gw_list_for_each_entry(p, &dev->ports, node) {
			if (p->tpg_id != g->id)
				continue;
			has_port = true;
			/* The owners read a local port's rel_id through its nexus. */
			__atomic_store_n(&p->rel_id, g->id, __ATOMIC_RELAXED);
		}
		if (has_port)
			continue;
		p = calloc(1, sizeof(*p));
		if (!p || asprintf(&p->name, "%s,t,0x%04x", dev->name, g->id) < 0) {
			free(p);
			scsi_alua_publish(dev);
			return -ENOMEM;
		}
		p->rel_id = g->id;
		p->tpg_id = g->id;
		p->remote = true;
		gw_list_add_tail(&dev->ports, &p->node);
		changed = true;
	}
	if (scsi_alua_publish(dev))
		return -ENOMEM;
	if (changed)
		scsi_dev_alua_changed(dev);
	return 0;
}

enum scsi_alua_state scsi_dev_alua_state(struct scsi_dev *dev, uint64_t lun, uint16_t tpg_id)
{
	return scsi_alua_lu_state(dev, scsi_dev_find_lu(dev, lun), tpg_id);
}

/* On the LU's owner, the device's loop waiting in gw_loop_call (so the groups hold still). */
static int scsi_lu_set_alua_here(struct scsi_dev *dev, struct scsi_lu *lu, uint64_t lun,
				 uint32_t alua_group, bool pending, const char *owner)
{
	const struct scsi_alua_map *am = scsi_dev_alua(dev);
	bool changed = false;
	char *o;

	o = strdup(owner ? owner : "");
	if (!o)
		return -ENOMEM;
	free(lu->conf.owner);
	lu->conf.owner = o;
	if (lu->conf.alua_group == alua_group && lu->conf.alua_pending == pending)
		return 0;
	for (size_t i = 0; am && i < am->ngroups; i++) {
		uint16_t id = am->grp[i].id;
		enum scsi_alua_state before = scsi_alua_lu_state(dev, lu, id);
		uint32_t keep = lu->conf.alua_group;
		bool keep_p = lu->conf.alua_pending;

		lu->conf.alua_group = alua_group;
		lu->conf.alua_pending = pending;
		if (scsi_alua_lu_state(dev, lu, id) != before)
			changed = true;
		lu->conf.alua_group = keep;
		lu->conf.alua_pending = keep_p;
	}
	gw_info(SCSI_LOG, "%s: LUN %llu: active/optimized group %u%s -> %u%s", dev->name,
		(unsigned long long)lun, lu->conf.alua_group,
		lu->conf.alua_pending ? " (pending)" : "", alua_group, pending ? " (pending)" : "");
	lu->conf.alua_group = alua_group;
	lu->conf.alua_pending = pending;
	if (changed)
		scsi_ua_set_all(lu, SCSI_UA_ALUA_CHANGED);
	return 0;
}

struct scsi_lu_alua_call {
	struct scsi_dev *dev;
	struct scsi_lu *lu;
	uint64_t lun;
	uint32_t group;
	bool pending;
	const char *owner;
};

static int scsi_lu_set_alua_fn(void *arg)
{
	struct scsi_lu_alua_call *c = arg;

	return scsi_lu_set_alua_here(c->dev, c->lu, c->lun, c->group, c->pending, c->owner);
}

/* The device's loop: the LU's ALUA settings are read per command by its owner, so they
 * change there. */
int scsi_dev_set_lu_alua(struct scsi_dev *dev, uint64_t lun, uint32_t alua_group, bool pending,
			 const char *owner)
{
	struct scsi_lu_alua_call c = { .dev = dev, .lun = lun, .group = alua_group,
				       .pending = pending, .owner = owner };

	c.lu = scsi_dev_find_lu(dev, lun);
	if (!c.lu)
		return -ENOENT;
	return gw_loop_call(c.lu->loop, scsi_lu_set_alua_fn, &c);
}

/* Logical units and the LUN map */

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

static int scsi_loop_barrier_fn(void *arg)
{
	(void)arg;
	return 0;
}

/* The device's loop: publishes the listed LUs but those being removed, then frees the old map
 * once every loop has run a call (a loop reads a map only inside one callback). */
static int scsi_dev_publish(struct scsi_dev *dev)
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
	if (dev->loops)
		for (unsigned i = 0; i < dev->loops->n; i++)
			gw_loop_call(dev->loops->loop[i], scsi_loop_barrier_fn, NULL);
	free(old);
	return 0;
}

/* The device's loop: the groups and ports as the owners will read them, the old copy freed
 * after every loop has run a call (a loop reads a copy only inside one callback). */
int scsi_alua_publish(struct scsi_dev *dev)
{
	struct scsi_alua_map *am, *old;
	const struct scsi_port *p;
	const struct scsi_tpg *g;
	size_t ng = 0, np = 0;

	gw_list_for_each_entry(g, &dev->tpgs, node)
		ng++;
	gw_list_for_each_entry(p, &dev->ports, node)
		np++;
	am = calloc(1, sizeof(*am) + ng * sizeof(am->grp[0]) + np * sizeof(am->port[0]));
	if (!am)
		return -ENOMEM;
	am->grp = (struct scsi_alua_grp *)(am + 1);
	am->port = (struct scsi_alua_port *)(am->grp + ng);
	gw_list_for_each_entry(g, &dev->tpgs, node) {
		struct scsi_alua_grp *e = &am->grp[am->ngroups++];

		e->id = g->id;
		e->state = g->state;
		gw_list_for_each_entry(p, &dev->ports, node)
			if (!p->remote && p->tpg_id == g->id)
				e->local = true;
	}
	gw_list_for_each_entry(p, &dev->ports, node) {
		struct scsi_alua_port *e = &am->port[am->nports++];

		e->rel_id = p->rel_id;
		e->tpg_id = p->tpg_id;
		e->remote = p->remote;
	}
	old = __atomic_exchange_n(&dev->alua, am, __ATOMIC_ACQ_REL);
	if (old && dev->loops)
		for (unsigned i = 0; i < dev->loops->n; i++)
			gw_loop_call(dev->loops->loop[i], scsi_loop_barrier_fn, NULL);
	free(old);
	return 0;
}

struct bs *scsi_dev_lu_bs(struct scsi_dev *dev, uint64_t lun)
{
	struct scsi_lu *lu = scsi_dev_find_lu(dev, lun);

	return lu ? lu->bs : NULL;
}

static void scsi_luns_changed(struct scsi_dev *dev, uint64_t lun)
{
	struct scsi_itn *itn;

	pthread_mutex_lock(&dev->itn_lock);
	gw_list_for_each_entry(itn, &dev->itns, node) {
		struct scsi_itn_state *st = itn->ua;

		__atomic_store_n(&st->luns_changed, true, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&dev->itn_lock);
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
	if (scsi_dev_publish(dev) < 0) {
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
	struct scsi_itl *itl, *t;

	gw_list_for_each_entry_safe(itl, t, &lu->itls, lu_node) {
		gw_list_del(&itl->lu_node);
		free(itl);
	}
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
	r = scsi_dev_publish(dev);
	if (r == 0)
		r = gw_loop_call(lu->loop, scsi_lu_idle_fn, lu);
	if (r) {
		lu->unmapped = false;
		if (scsi_dev_publish(dev) < 0)
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

/* I_T nexuses and unit attentions */

struct scsi_itn *scsi_itn_create(struct scsi_dev *dev, struct scsi_port *port,
				 const char *initiator_port, const char *initiator_name)
{
	struct scsi_itn *itn = calloc(1, sizeof(*itn));
	struct scsi_itn_state *st = calloc(1, sizeof(*st));

	if (!itn || !st)
		goto fail;
	itn->initiator = strdup(initiator_port ? initiator_port : "");
	itn->initiator_name = strdup(initiator_name ? initiator_name : "");
	if (!itn->initiator || !itn->initiator_name)
		goto fail;
	itn->ua = st;
	itn->dev = dev;
	itn->port = port;
	pthread_mutex_lock(&dev->itn_lock);
	itn->id = dev->next_itn_id++;
	gw_list_add_tail(&dev->itns, &itn->node);
	pthread_mutex_unlock(&dev->itn_lock);
	return itn;
fail:
	if (itn) {
		free(itn->initiator);
		free(itn->initiator_name);
	}
	free(itn);
	free(st);
	return NULL;
}

/* Drops what the LUs keep of the nexus: of every LU in lus (all), or of the current loop's
 * LUs in the published map (lus NULL). */
static void scsi_itn_forget_lu(struct scsi_itn *itn, struct scsi_lu *lu)
{
	struct scsi_itl *itl, *t;

	if (lu->res2_holder == itn)
		lu->res2_holder = NULL;
	gw_list_for_each_entry_safe(itl, t, &lu->itls, lu_node) {
		if (itl->itn != itn)
			continue;
		gw_list_del(&itl->lu_node);
		free(itl);
	}
}

static void scsi_itn_forget(struct scsi_itn *itn, struct gw_list *lus, bool all)
{
	const struct scsi_lun_map *map;
	struct gw_loop *here = gw_loop_current();
	struct scsi_lu *lu;

	if (lus) {
		gw_list_for_each_entry(lu, lus, node)
			if (all || lu->loop == here)
				scsi_itn_forget_lu(itn, lu);
		return;
	}
	map = scsi_dev_map(itn->dev);
	for (size_t i = 0; map && i < map->n; i++)
		if (map->e[i].lu->loop == here)
			scsi_itn_forget_lu(itn, map->e[i].lu);
}

static void scsi_itn_free(struct scsi_itn *itn)
{
	free(itn->initiator);
	free(itn->initiator_name);
	free(itn->ua);
	free(itn);
}

static void scsi_itn_forget_fn(void *arg)
{
	struct scsi_itn *itn = arg;
	struct scsi_itn_state *st = itn->ua;

	scsi_itn_forget(itn, NULL, false);
	if (__atomic_sub_fetch(&st->refs, 1, __ATOMIC_ACQ_REL) == 0)
		scsi_itn_free(itn);
}

/*
 * From the nexus's loop (the session's). Without loops, at once. With loops, every loop
 * forgets it for the LUs it owns, by a message each (behind the nexus loss the same loop
 * posted before), and the last one frees it: no owner keeps a pointer to a freed nexus.
 */
void scsi_itn_destroy(struct scsi_itn *itn)
{
	struct scsi_dev *dev;
	struct scsi_itn_state *st;

	if (!itn)
		return;
	dev = itn->dev;
	st = itn->ua;
	pthread_mutex_lock(&dev->itn_lock);
	gw_list_del(&itn->node);
	pthread_mutex_unlock(&dev->itn_lock);
	if (!dev->loops) {
		scsi_itn_forget(itn, &dev->lus, true);
		scsi_itn_free(itn);
		return;
	}
	__atomic_store_n(&st->refs, dev->loops->n, __ATOMIC_RELEASE);
	for (unsigned i = 0; i < dev->loops->n; i++)
		if (gw_loop_send(dev->loops->loop[i], scsi_itn_forget_fn, itn) < 0 &&
		    __atomic_sub_fetch(&st->refs, 1, __ATOMIC_ACQ_REL) == 0)
			scsi_itn_free(itn);	/* a finished loop has no LU left to forget */
}

uint16_t scsi_itn_rel_id(const struct scsi_itn *itn)
{
	/* Changed by the device's loop when a cluster's groups renumber its ports. */
	return itn && itn->port ? __atomic_load_n(&itn->port->rel_id, __ATOMIC_RELAXED) : 0;
}

struct scsi_itl *scsi_itl_get(struct scsi_itn *itn, struct scsi_lu *lu)
{
	struct scsi_itl *itl;

	/* The LU's list, not the nexus's: LUs of other loops add to theirs at the same time. */
	gw_list_for_each_entry(itl, &lu->itls, lu_node)
		if (itl->itn == itn)
			return itl;
	itl = calloc(1, sizeof(*itl));
	if (!itl)
		return NULL;
	itl->itn = itn;
	itl->lu = lu;
	/* First contact between this nexus and this LU: as after power on (SAM-5 6.3.1). */
	itl->ua = 1u << SCSI_UA_POWER_ON;
	gw_list_add_tail(&lu->itls, &itl->lu_node);
	return itl;
}

void scsi_ua_set(struct scsi_lu *lu, struct scsi_itn *except, int ua)
{
	struct scsi_itl *itl;

	gw_list_for_each_entry(itl, &lu->itls, lu_node)
		if (itl->itn != except)
			itl->ua |= 1u << ua;
}

void scsi_ua_set_itn(struct scsi_itn *itn, struct scsi_lu *lu, int ua)
{
	struct scsi_itl *itl = scsi_itl_get(itn, lu);

	if (itl)
		itl->ua |= 1u << ua;
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
static void scsi_lu_on_owner(struct scsi_lu *lu, void (*fn)(struct scsi_lu *lu, int a, void *p),
			     int a, void *p)
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

static void scsi_ua_set_all_fn(struct scsi_lu *lu, int ua, void *p)
{
	(void)p;
	scsi_ua_set(lu, NULL, ua);
}

void scsi_ua_set_all(struct scsi_lu *lu, int ua)
{
	scsi_lu_on_owner(lu, scsi_ua_set_all_fn, ua, NULL);
}

static const uint8_t scsi_ua_sense[SCSI_UA_NR][2] = {
	[SCSI_UA_POWER_ON] = { 0x29, 0x00 },
	[SCSI_UA_POWER_ON_OCCURRED] = { 0x29, 0x01 },
	[SCSI_UA_BDR] = { 0x29, 0x03 },
	[SCSI_UA_NEXUS_LOSS] = { 0x29, 0x07 },
	[SCSI_UA_MODE_CHANGED] = { 0x2a, 0x01 },
	[SCSI_UA_RES_PREEMPTED] = { 0x2a, 0x03 },
	[SCSI_UA_RES_RELEASED] = { 0x2a, 0x04 },
	[SCSI_UA_REG_PREEMPTED] = { 0x2a, 0x05 },
	[SCSI_UA_ALUA_CHANGED] = { 0x2a, 0x06 },
	[SCSI_UA_CAPACITY] = { 0x2a, 0x09 },
	[SCSI_UA_LUNS_CHANGED] = { 0x3f, 0x0e },
};

#define SCSI_UA_RESET_MASK ((1u << SCSI_UA_POWER_ON) | (1u << SCSI_UA_POWER_ON_OCCURRED) | \
			    (1u << SCSI_UA_BDR) | (1u << SCSI_UA_NEXUS_LOSS))

bool scsi_ua_take(struct scsi_cmd *cmd, struct scsi_itl *itl)
{
	struct scsi_itn_state *st = itl->itn->ua;
	int ua;

	if (itl->ua)
		ua = __builtin_ctz(itl->ua);
	else if (__atomic_exchange_n(&st->luns_changed, false, __ATOMIC_RELAXED))
		ua = SCSI_UA_LUNS_CHANGED;	/* reported once, through whichever LU asks first */
	else
		return false;
	scsi_cmd_set_sense(cmd, SCSI_SK_UNIT_ATTENTION, scsi_ua_sense[ua][0], scsi_ua_sense[ua][1]);
	if ((1u << ua) & SCSI_UA_RESET_MASK)
		itl->ua &= ~SCSI_UA_RESET_MASK;	/* one reset report covers them all */
	else
		itl->ua &= ~(1u << ua);	/* (LUNS CHANGED was never in itl->ua) */
	return true;
}

/* Task set */

static bool scsi_task_can_start(const struct scsi_lu *lu, const struct scsi_cmd *cmd)
{
	switch (cmd->attr) {
	case SCSI_ATTR_HEAD_OF_QUEUE:
		return true;
	case SCSI_ATTR_ORDERED:
		return lu->nr_running == 0;
	default:
		return lu->nr_ordered == 0;
	}
}

static void scsi_task_begin(struct scsi_lu *lu, struct scsi_cmd *cmd)
{
	lu->nr_running++;
	if (cmd->attr == SCSI_ATTR_ORDERED)
		lu->nr_ordered++;
	scsi_task_run(cmd);
}

void scsi_task_start(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;

	if (cmd->attr == SCSI_ATTR_HEAD_OF_QUEUE ||
	    (gw_list_empty(&lu->waitq) && scsi_task_can_start(lu, cmd))) {
		scsi_task_begin(lu, cmd);
		return;
	}
	scsi_task_mark_waiting(cmd);
	gw_list_add_tail(&lu->waitq, &cmd->node);
}

void scsi_task_end(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;

	lu->nr_running--;
	if (cmd->attr == SCSI_ATTR_ORDERED)
		lu->nr_ordered--;
	while (!gw_list_empty(&lu->waitq)) {
		struct scsi_cmd *next = gw_list_first_entry(&lu->waitq, struct scsi_cmd, node);

		if (!scsi_task_can_start(lu, next))
			break;
		gw_list_del(&next->node);
		scsi_task_begin(lu, next);
	}
}

/* Writer range lock */

static bool scsi_overlap(uint64_t a, uint64_t an, uint64_t b, uint64_t bn)
{
	return a < b + bn && b < a + an;
}

bool scsi_range_acquire(struct scsi_cmd *cmd, uint64_t lba, uint64_t n, bool exclusive)
{
	struct scsi_lu *lu = cmd->lu;
	struct scsi_cmd *o;

	cmd->lba = lba;
	cmd->nblocks = n;
	if (exclusive) {
		cmd->flags |= SCSI_CMDF_EXCL;
		if (!(cmd->flags & SCSI_CMDF_CAW_COUNTED)) {
			cmd->flags |= SCSI_CMDF_CAW_COUNTED;
			lu->nr_caw++;
		}
	}
	if (exclusive || lu->nr_caw) {
		gw_list_for_each_entry(o, &lu->writers, range_node)
			if ((exclusive || (o->flags & SCSI_CMDF_EXCL)) &&
			    scsi_overlap(lba, n, o->lba, o->nblocks))
				goto park;
		/* Writers do not overtake a COMPARE AND WRITE already waiting for the range. */
		if (!exclusive)
			gw_list_for_each_entry(o, &lu->range_waiters, node)
				if ((o->flags & SCSI_CMDF_EXCL) &&
				    scsi_overlap(lba, n, o->lba, o->nblocks))
					goto park;
	}
	gw_list_add_tail(&lu->writers, &cmd->range_node);
	return true;
park:
	gw_list_add_tail(&lu->range_waiters, &cmd->node);
	return false;
}

void scsi_range_release(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;
	struct gw_list again;

	gw_list_del(&cmd->range_node);
	if (cmd->flags & SCSI_CMDF_CAW_COUNTED) {
		cmd->flags &= ~SCSI_CMDF_CAW_COUNTED;
		lu->nr_caw--;
	}
	if (gw_list_empty(&lu->range_waiters))
		return;
	/* Everyone waiting tries again, in arrival order; those still blocked re-queue. */
	gw_list_init(&again);
	again.next = lu->range_waiters.next;
	again.prev = lu->range_waiters.prev;
	again.next->prev = &again;
	again.prev->next = &again;
	gw_list_init(&lu->range_waiters);
	while (!gw_list_empty(&again)) {
		struct scsi_cmd *w = gw_list_first_entry(&again, struct scsi_cmd, node);

		gw_list_del(&w->node);
		scsi_cmd_rerun(w);
	}
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
