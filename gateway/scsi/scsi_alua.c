// SPDX-License-Identifier: MIT
/*
 * ALUA (SPC-4 5.15): one target port group per scsi_port tpg_id, implicit transitions only
 * (TPGS 01b). REPORT TARGET PORT GROUPS lists the groups, their states and ports; commands
 * through a port whose group is standby, unavailable or transitioning get NOT READY unless the
 * standard lets them through (INQUIRY, REPORT LUNS, REQUEST SENSE, ...). A fenced device
 * (its gateway's ownership lease ran out, docs/CLUSTER.md) reports its local groups standby.
 *
 * It owns the device's target ports and groups (the device's loop's lists and the copy every
 * loop reads), an LU's active/optimized group, and the access state they give. It calls only
 * below it: the unit attentions (2A/06 on a change), the LUN map (lookup, barrier) and the
 * reply helpers. scsi_dev.c calls its init and fini.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_log.h"
#include "scsi_priv.h"

/* Ports and target port groups (the device's loop) */

void scsi_alua_init(struct scsi_dev *dev)
{
	gw_list_init(&dev->ports);
	gw_list_init(&dev->tpgs);
	dev->next_rel_id = 1;
}

/* The device's loop, the loops stopped. */
void scsi_alua_fini(struct scsi_dev *dev)
{
	struct scsi_port *p, *pt;
	struct scsi_tpg *g, *gt;

	free(__atomic_exchange_n(&dev->alua, NULL, __ATOMIC_ACQ_REL));
	gw_list_for_each_entry_safe(p, pt, &dev->ports, node) {
		gw_list_del(&p->node);
		free(p->name);
		free(p);
	}
	gw_list_for_each_entry_safe(g, gt, &dev->tpgs, node) {
		gw_list_del(&g->node);
		free(g);
	}
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
	if (old)
		scsi_dev_barrier(dev);
	free(old);
	return 0;
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

/* Access states (any loop: the copy published now) */

enum scsi_alua_state scsi_alua_state_in(const struct scsi_alua_map *am, bool fenced,
					const struct scsi_lu *lu, uint16_t id)
{
	enum scsi_alua_state st = SCSI_ALUA_AO;
	bool local = false;

	for (size_t i = 0; am && i < am->ngroups; i++)
		if (am->grp[i].id == id) {
			st = am->grp[i].state;
			local = am->grp[i].local;
			break;
		}
	if (lu && lu->conf.alua_group && (st == SCSI_ALUA_AO || st == SCSI_ALUA_ANO)) {
		/* A taker's hold (alua_pending, docs/CLUSTER.md "Fencing") keeps its group
		 * non-optimized, not transitioning: it serves I/O as every non-owner does, so a
		 * host that lost the owner's path writes on at once; only a/o waits. */
		if (lu->conf.alua_group != id || lu->conf.alua_pending)
			st = SCSI_ALUA_ANO;
		else
			st = SCSI_ALUA_AO;
	}
	if (fenced && (st == SCSI_ALUA_AO || st == SCSI_ALUA_ANO) && local)
		st = SCSI_ALUA_STANDBY;
	return st;
}

/* Any loop: the groups as published now. */
enum scsi_alua_state scsi_alua_lu_state(const struct scsi_dev *dev, const struct scsi_lu *lu,
				       uint16_t id)
{
	return scsi_alua_state_in(scsi_dev_alua(dev), __atomic_load_n(&dev->fenced,
				  __ATOMIC_ACQUIRE), lu, id);
}

void scsi_dev_set_fenced(struct scsi_dev *dev, bool fenced)
{
	struct scsi_lu *lu;

	if (dev->fenced == fenced)
		return;
	__atomic_store_n(&dev->fenced, fenced, __ATOMIC_RELEASE);	/* owners read it per command */
	/* Every nexus learns of it: multipath re-reads the groups on 2A/06. */
	gw_list_for_each_entry(lu, &dev->lus, node)
		scsi_ua_set_all(lu, SCSI_UA_ALUA_CHANGED);
}

enum scsi_alua_state scsi_alua_port_state(const struct scsi_dev *dev, const struct scsi_lu *lu,
					  const struct scsi_port *p)
{
	if (!p)
		return SCSI_ALUA_AO;
	return scsi_alua_lu_state(dev, lu, p->tpg_id);
}

bool scsi_alua_refuse(struct scsi_cmd *cmd, const struct scsi_op *op)
{
	enum scsi_alua_state st;

	if (!cmd->itn)
		return false;
	st = scsi_alua_port_state(cmd->dev, cmd->lu, cmd->itn->port);
	switch (st) {
	case SCSI_ALUA_AO:
	case SCSI_ALUA_ANO:
		return false;
	case SCSI_ALUA_STANDBY:
		if (op->flags & (SCSI_OPF_ALUA_SB | SCSI_OPF_ALUA_UA))
			return false;
		scsi_cmd_set_sense(cmd, SCSI_SK_NOT_READY, 0x04, 0x0b);
		return true;
	case SCSI_ALUA_UNAVAILABLE:
		if (op->flags & SCSI_OPF_ALUA_UA)
			return false;
		scsi_cmd_set_sense(cmd, SCSI_SK_NOT_READY, 0x04, 0x0c);
		return true;
	case SCSI_ALUA_TRANSITIONING:
		if (op->flags & SCSI_OPF_ALUA_UA)
			return false;
		scsi_cmd_set_sense(cmd, SCSI_SK_NOT_READY, 0x04, 0x0a);
		return true;
	}
	return false;
}

int scsi_alua_report_tpgs(struct scsi_cmd *cmd)
{
	const uint8_t *c = cmd->cdb;
	struct scsi_dev *dev = cmd->dev;
	const struct scsi_alua_map *am = scsi_dev_alua(dev);
	bool fenced = __atomic_load_n(&dev->fenced, __ATOMIC_ACQUIRE);
	uint32_t alloc = scsi_get32(&c[6]);
	bool ext = (c[1] >> 5) == 1;
	uint8_t b[4096];
	uint32_t n, hdr;

	if ((c[1] >> 5) > 1) {
		scsi_cmd_invalid_cdb(cmd, 1, 7);
		return SCSI_CMD_DONE;
	}
	hdr = ext ? 8 : 4;
	memset(b, 0, sizeof(b));
	n = hdr;
	for (size_t i = 0; am && i < am->ngroups; i++) {
		const struct scsi_alua_grp *g = &am->grp[i];
		uint8_t *d = &b[n];
		uint32_t ports = 0;

		if (n + 8 > sizeof(b))
			break;
		d[0] = (uint8_t)(scsi_alua_state_in(am, fenced, cmd->lu, g->id) & 0x0f);
		d[1] = 0x80 | 0x08 | 0x04 | 0x02 | 0x01;	/* T, U, S, AN, AO supported */
		scsi_put16(&d[2], g->id);
		n += 8;
		for (size_t j = 0; j < am->nports; j++) {
			if (am->port[j].tpg_id != g->id || n + 4 > sizeof(b))
				continue;
			memset(&b[n], 0, 4);
			scsi_put16(&b[n + 2], am->port[j].rel_id);
			n += 4;
			ports++;
		}
		d[7] = (uint8_t)ports;
	}
	scsi_put32(b, n - 4);
	if (ext) {
		b[4] = 0x10;	/* format type 001b */
		b[5] = 0;	/* implicit transition time: not reported */
	}
	scsi_cmd_data_in(cmd, b, alloc < n ? alloc : n);
	return SCSI_CMD_DONE;
}

int scsi_alua_set_tpgs(struct scsi_cmd *cmd)
{
	/* TPGS says implicit only: states change through the gateway's configuration. */
	cmd->cdb_xfer_len = scsi_get32(&cmd->cdb[6]);
	scsi_cmd_invalid_cdb(cmd, 1, 4);
	return SCSI_CMD_DONE;
}
