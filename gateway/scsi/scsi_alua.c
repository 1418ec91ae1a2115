// SPDX-License-Identifier: MIT
/*
 * ALUA (SPC-4 5.15): one target port group per scsi_port tpg_id, implicit transitions only
 * (TPGS 01b). REPORT TARGET PORT GROUPS lists the groups, their states and ports; commands
 * through a port whose group is standby, unavailable or transitioning get NOT READY unless the
 * standard lets them through (INQUIRY, REPORT LUNS, REQUEST SENSE, ...). A fenced device
 * (its gateway's ownership lease ran out, docs/CLUSTER.md) reports its local groups standby.
 */
#include <string.h>

#include "gw_log.h"
#include "scsi_priv.h"

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
