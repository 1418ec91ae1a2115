// SPDX-License-Identifier: MIT
/*
 * SPC-4 primary commands: INQUIRY (standard data and VPD pages), REQUEST SENSE, REPORT LUNS,
 * TEST UNIT READY, MODE SENSE / MODE SELECT (caching, control, informational exceptions),
 * REPORT SUPPORTED TASK MANAGEMENT FUNCTIONS, START STOP UNIT (REPORT SUPPORTED OPERATION
 * CODES is the opcode table's, scsi_op.c). Responses are built in a stack buffer and copied to
 * the data-in iovec, clipped to the allocation length and to the transport's buffer.
 *
 * A command group below the opcode table: it calls scsi_sbc.c (the block limits VPD B0
 * reports), ALUA (MULTIP), the unit attentions (REQUEST SENSE, MODE SELECT) and the reply
 * helpers; nothing calls it but the table.
 */
#include <stdio.h>
#include <string.h>

#include "gw_log.h"
#include "scsi_priv.h"

#define SCSI_STD_INQ_LEN 96

static void scsi_pad(uint8_t *dst, const char *s, size_t n)
{
	size_t l = s ? strlen(s) : 0;

	memset(dst, ' ', n);
	memcpy(dst, s, l < n ? l : n);
}

static uint32_t scsi_min(uint32_t a, uint32_t b)
{
	return a < b ? a : b;
}

/* INQUIRY */

static uint32_t scsi_inq_standard(struct scsi_cmd *cmd, uint8_t *b)
{
	struct scsi_lu *lu = cmd->lu;
	static const uint16_t versions[] = {
		0x00a0,	/* SAM-5 */
		0x0460,	/* SPC-4 */
		0x04c0,	/* SBC-3 */
		0x0960,	/* iSCSI */
	};

	memset(b, 0, SCSI_STD_INQ_LEN);
	b[0] = lu ? 0x00 : 0x7f;	/* direct access block device, or PQ 3 / type 1Fh */
	b[2] = 0x06;			/* SPC-4 */
	b[3] = 0x12;			/* HISUP, response data format 2 */
	b[4] = SCSI_STD_INQ_LEN - 5;
	b[5] = 0x10;			/* TPGS 01b: implicit ALUA */
	if (scsi_dev_multiport(cmd->dev))
		b[6] = 0x10;		/* MULTIP: more than one target port */
	b[7] = 0x02;			/* CMDQUE */
	scsi_pad(&b[8], lu ? lu->conf.vendor : "ISERGW", 8);
	scsi_pad(&b[16], lu ? lu->conf.product : "isergw LUN", 16);
	scsi_pad(&b[32], lu ? lu->conf.revision : "0001", 4);
	for (size_t i = 0; i < GW_ARRAY_SIZE(versions); i++)
		scsi_put16(&b[58 + 2 * i], versions[i]);
	return SCSI_STD_INQ_LEN;
}

static const uint8_t scsi_vpd_pages[] = { 0x00, 0x80, 0x83, 0xb0, 0xb1, 0xb2 };

/* A SCSI name string designator: UTF-8, NUL-terminated, padded to a multiple of 4. */
static uint32_t scsi_desig_name(uint8_t *d, uint8_t assoc, const char *name, uint32_t room)
{
	uint32_t l = (uint32_t)strlen(name) + 1;

	l = (l + 3) & ~3u;
	if (l > 252)
		l = 252;
	if (4 + l > room)
		return 0;
	d[0] = 0x53;			/* protocol iSCSI, code set UTF-8 */
	d[1] = 0x80 | (uint8_t)(assoc << 4) | 0x08;	/* PIV, association, SCSI name string */
	d[2] = 0;
	d[3] = (uint8_t)l;
	memset(&d[4], 0, l);
	memcpy(&d[4], name, scsi_min((uint32_t)strlen(name), l - 1));
	return 4 + l;
}

static uint32_t scsi_vpd_devid(struct scsi_cmd *cmd, uint8_t *b, uint32_t room)
{
	struct scsi_lu *lu = cmd->lu;
	struct scsi_port *port = cmd->itn ? cmd->itn->port : NULL;
	uint32_t n = 4;
	uint8_t *d;

	/* NAA-6, the LU's identity (association 0: logical unit). */
	d = &b[n];
	d[0] = 0x01;
	d[1] = 0x03;
	d[3] = 16;
	memcpy(&d[4], lu->naa, 16);
	n += 20;
	/* T10 vendor id: vendor plus serial, what older initiators key on. */
	d = &b[n];
	d[0] = 0x02;
	d[1] = 0x01;
	d[3] = (uint8_t)(8 + strlen(lu->serial));
	scsi_pad(&d[4], lu->conf.vendor, 8);
	memcpy(&d[12], lu->serial, strlen(lu->serial));
	n += 4 + d[3];
	if (port) {
		n += scsi_desig_name(&b[n], 1, port->name, room - n);
		/* Relative target port (association 1, type 4). */
		d = &b[n];
		memset(d, 0, 8);
		d[0] = 0x51;
		d[1] = 0x94;
		d[3] = 4;
		scsi_put16(&d[6], scsi_itn_rel_id(cmd->itn));
		n += 8;
		/* Target port group (type 5). */
		d = &b[n];
		memset(d, 0, 8);
		d[0] = 0x51;
		d[1] = 0x95;
		d[3] = 4;
		scsi_put16(&d[6], port->tpg_id);	/* a local port's, fixed */
		n += 8;
	}
	/* The target device's name (association 2). */
	n += scsi_desig_name(&b[n], 2, cmd->dev->name, room - n);
	return n;
}

static uint32_t scsi_vpd_block_limits(struct scsi_cmd *cmd, struct scsi_lu *lu, uint8_t *b)
{
	uint32_t gran = lu->block_size < 4096 ? 4096u >> lu->block_shift : 1;

	memset(b, 0, 64);
	b[1] = 0xb0;
	b[3] = 0x3c;
	/* The back end's limit when it does COMPARE AND WRITE, 0 where no gateway can make it
	 * atomic (docs/CLUSTER.md, "Atomics"). */
	b[5] = scsi_sbc_caw_max(cmd->dev, lu, cmd->itn ? cmd->itn->port : NULL);
	scsi_put16(&b[6], (uint16_t)gran);
	scsi_put32(&b[8], scsi_sbc_max_xfer_blocks(lu));
	scsi_put32(&b[12], scsi_sbc_max_xfer_blocks(lu));
	if (lu->thin) {
		scsi_put32(&b[20], SCSI_MAX_UNMAP_BLOCKS);
		scsi_put32(&b[24], SCSI_MAX_UNMAP_DESC);
		scsi_put32(&b[28], 1u << lu->lbppbe);	/* optimal unmap granularity */
	}
	scsi_put64(&b[36], SCSI_MAX_WS_BLOCKS);
	return 64;
}

static int scsi_inq_vpd(struct scsi_cmd *cmd, uint8_t page, uint8_t *b, uint32_t room,
			uint32_t *len)
{
	struct scsi_lu *lu = cmd->lu;
	uint32_t n;

	memset(b, 0, 8);
	b[1] = page;
	switch (page) {
	case 0x00:
		memcpy(&b[4], scsi_vpd_pages, sizeof(scsi_vpd_pages));
		n = 4 + sizeof(scsi_vpd_pages);
		break;
	case 0x80:
		n = (uint32_t)strlen(lu->serial);
		memcpy(&b[4], lu->serial, n);
		n += 4;
		break;
	case 0x83:
		n = scsi_vpd_devid(cmd, b, room);
		break;
	case 0xb0:
		n = scsi_vpd_block_limits(cmd, lu, b);
		break;
	case 0xb1:
		memset(b, 0, 64);
		b[1] = page;
		b[3] = 0x3c;
		scsi_put16(&b[4], 0x0001);	/* medium rotation rate: non-rotating */
		n = 64;
		break;
	case 0xb2:
		memset(b, 0, 8);
		b[1] = page;
		if (lu->thin) {
			b[5] = 0x80 | 0x40 | 0x20 | 0x04;	/* LBPU LBPWS LBPWS10 LBPRZ */
			b[6] = 0x02;				/* thin provisioned */
		}
		n = 8;
		break;
	default:
		return -1;
	}
	scsi_put16(&b[2], (uint16_t)(n - 4));
	*len = n;
	return 0;
}

int scsi_spc_inquiry(struct scsi_cmd *cmd)
{
	const uint8_t *c = cmd->cdb;
	uint32_t alloc = scsi_get16(&c[3]);
	uint8_t buf[1024];
	uint32_t len;

	if (c[1] & 0xfe) {
		scsi_cmd_invalid_cdb(cmd, 1, c[1] & 0x02 ? 1 : 7);
		return SCSI_CMD_DONE;
	}
	if (!(c[1] & 0x01)) {
		if (c[2]) {
			scsi_cmd_invalid_cdb(cmd, 2, -1);
			return SCSI_CMD_DONE;
		}
		len = scsi_inq_standard(cmd, buf);
	} else {
		if (!cmd->lu) {
			scsi_cmd_set_sense(cmd, SCSI_SK_ILLEGAL_REQUEST, 0x25, 0x00);
			return SCSI_CMD_DONE;
		}
		if (scsi_inq_vpd(cmd, c[2], buf, sizeof(buf), &len) < 0) {
			scsi_cmd_invalid_cdb(cmd, 2, -1);
			return SCSI_CMD_DONE;
		}
	}
	scsi_cmd_data_in(cmd, buf, scsi_min(len, alloc));
	return SCSI_CMD_DONE;
}

/* REQUEST SENSE, TEST UNIT READY, REPORT LUNS, START STOP UNIT */

/* Fixed-format sense to descriptor format (SPC-4 4.5.2), for DESC=1. */
static uint32_t scsi_sense_to_desc(const uint8_t *f, uint8_t *d)
{
	uint32_t n = 8;

	memset(d, 0, 8);
	d[0] = 0x72;
	d[1] = f[2] & 0x0f;
	d[2] = f[12];
	d[3] = f[13];
	if (f[0] & 0x80) {	/* information */
		memset(&d[n], 0, 12);
		d[n] = 0x00;
		d[n + 1] = 0x0a;
		d[n + 2] = 0x80;
		memcpy(&d[n + 8], &f[3], 4);
		n += 12;
	}
	if (f[15] & 0x80) {	/* sense key specific */
		memset(&d[n], 0, 8);
		d[n] = 0x02;
		d[n + 1] = 0x06;
		memcpy(&d[n + 4], &f[15], 3);
		n += 8;
	}
	d[7] = (uint8_t)(n - 8);
	return n;
}

int scsi_spc_request_sense(struct scsi_cmd *cmd)
{
	const uint8_t *c = cmd->cdb;
	uint8_t fixed[SCSI_SENSE_MAX], out[64];
	uint32_t len;

	if (c[1] & 0xfe) {
		scsi_cmd_invalid_cdb(cmd, 1, 7);
		return SCSI_CMD_DONE;
	}
	if (!cmd->lu) {
		scsi_cmd_set_sense(cmd, SCSI_SK_ILLEGAL_REQUEST, 0x25, 0x00);
	} else {
		struct scsi_itl *itl = cmd->itn ? scsi_itl_get(cmd->itn, cmd->lu) : NULL;

		if (!itl || !scsi_ua_take(cmd, itl))
			scsi_cmd_set_sense(cmd, SCSI_SK_NO_SENSE, 0x00, 0x00);
	}
	/* The sense goes back as data, with GOOD status. */
	memcpy(fixed, cmd->sense, 18);
	cmd->status = SCSI_GOOD;
	cmd->sense_len = 0;
	if (c[1] & 0x01) {
		len = scsi_sense_to_desc(fixed, out);
	} else {
		memcpy(out, fixed, 18);
		len = 18;
	}
	scsi_cmd_data_in(cmd, out, scsi_min(len, c[4]));
	return SCSI_CMD_DONE;
}

int scsi_spc_test_unit_ready(struct scsi_cmd *cmd)
{
	(void)cmd;
	return SCSI_CMD_DONE;
}

int scsi_spc_start_stop(struct scsi_cmd *cmd)
{
	/* No medium to spin or eject: START, LOEJ and power conditions succeed as no-ops. */
	(void)cmd;
	return SCSI_CMD_DONE;
}

int scsi_spc_report_luns(struct scsi_cmd *cmd)
{
	const uint8_t *c = cmd->cdb;
	uint32_t alloc = scsi_get32(&c[6]);
	const struct scsi_lun_map *map = scsi_dev_map(cmd->dev);
	uint8_t ent[8] = { 0 };
	uint32_t n = 0, off = 8, room;

	if (c[2] > 0x02) {
		scsi_cmd_invalid_cdb(cmd, 2, -1);
		return SCSI_CMD_DONE;
	}
	if (alloc < 16) {
		scsi_cmd_invalid_cdb(cmd, 6, -1);
		return SCSI_CMD_DONE;
	}
	/* Written straight into the data-in buffer, the list may be long. Select report 1 is
	 * well-known LUNs only, of which there are none. */
	room = scsi_min(alloc, scsi_cmd_in_room(cmd));
	if (c[2] != 0x01 && map) {
		for (size_t i = 0; i < map->n; i++) {
			if (off < room) {
				scsi_lun_encode(map->e[i].lun, ent);
				scsi_cmd_put(cmd, off, ent, scsi_min(8, room - off));
			}
			off += 8;
			n++;
		}
	}
	memset(ent, 0, sizeof(ent));
	scsi_put32(ent, n * 8);
	scsi_cmd_put(cmd, 0, ent, scsi_min(8, room));
	cmd->cdb_xfer_len = scsi_min(alloc, 8 + n * 8);
	cmd->xfer_len = scsi_min(cmd->cdb_xfer_len, scsi_cmd_in_room(cmd));
	return SCSI_CMD_DONE;
}

/* MODE SENSE / MODE SELECT */

enum { SCSI_PC_CURRENT, SCSI_PC_CHANGEABLE, SCSI_PC_DEFAULT, SCSI_PC_SAVED };

/* One mode page as pc asks for it; 0 if the page is not supported. */
static uint32_t scsi_mode_page(const struct scsi_lu *lu, uint8_t page, int pc, uint8_t *b)
{
	switch (page) {
	case 0x08:	/* caching */
		memset(b, 0, 20);
		b[0] = 0x08;
		b[1] = 0x12;
		/* In a cluster WCE is the configuration's ("write_cache", the same on every
		 * gateway): a host cannot change it through one gateway alone. */
		if (pc == SCSI_PC_CHANGEABLE)
			b[2] = scsi_dev_pr_cluster(lu->dev) ? 0 : 0x04;
		else if ((pc == SCSI_PC_DEFAULT ? lu->conf.write_cache : lu->wce))
			b[2] = 0x04;	/* WCE */
		return 20;
	case 0x0a:	/* control */
		memset(b, 0, 12);
		b[0] = 0x0a;
		b[1] = 0x0a;
		if (pc != SCSI_PC_CHANGEABLE) {
			b[2] = 0x02;		/* GLTSD: no implicit log saving */
			b[3] = 0x10;		/* unrestricted reordering, QERR 00b */
			b[5] = 0x40;		/* TAS: aborted tasks get TASK ABORTED */
			scsi_put16(&b[8], 0xffff);	/* busy timeout: unlimited */
		}
		return 12;
	case 0x1c:	/* informational exceptions control */
		memset(b, 0, 12);
		b[0] = 0x1c;
		b[1] = 0x0a;
		if (pc != SCSI_PC_CHANGEABLE)
			b[2] = 0x08;	/* DEXCPT: no exception reporting */
		return 12;
	}
	return 0;
}

static const uint8_t scsi_mode_pages[] = { 0x08, 0x0a, 0x1c };

int scsi_spc_mode_sense(struct scsi_cmd *cmd)
{
	const uint8_t *c = cmd->cdb;
	struct scsi_lu *lu = cmd->lu;
	bool ten = c[0] == 0x5a;
	bool dbd = c[1] & 0x08;
	bool llbaa = ten && (c[1] & 0x10);
	int pc = c[2] >> 6;
	uint8_t page = c[2] & 0x3f, sub = c[3];
	uint32_t alloc = ten ? scsi_get16(&c[7]) : c[4];
	uint32_t hdr = ten ? 8 : 4, bdl = 0, n;
	uint8_t b[256];

	if (pc == SCSI_PC_SAVED) {
		scsi_cmd_set_sense(cmd, SCSI_SK_ILLEGAL_REQUEST, 0x39, 0x00);
		return SCSI_CMD_DONE;
	}
	if (sub && !(sub == 0xff && page == 0x3f) && !(sub == 0xff && scsi_mode_page(lu, page,
	    pc, b))) {
		scsi_cmd_invalid_cdb(cmd, 3, -1);
		return SCSI_CMD_DONE;
	}
	memset(b, 0, sizeof(b));
	if (!dbd)
		bdl = llbaa ? 16 : 8;
	n = hdr;
	if (bdl == 8) {
		scsi_put32(&b[n], lu->nblocks > 0xffffffffull ? 0xffffffffu :
			   (uint32_t)lu->nblocks);
		scsi_put32(&b[n + 4], lu->block_size);	/* byte 4 is density: 0 */
		n += 8;
	} else if (bdl == 16) {
		scsi_put64(&b[n], lu->nblocks);
		scsi_put32(&b[n + 12], lu->block_size);
		n += 16;
	}
	if (page == 0x3f) {
		for (size_t i = 0; i < sizeof(scsi_mode_pages); i++)
			n += scsi_mode_page(lu, scsi_mode_pages[i], pc, &b[n]);
	} else {
		uint32_t l = scsi_mode_page(lu, page, pc, &b[n]);

		if (!l) {
			scsi_cmd_invalid_cdb(cmd, 2, 5);
			return SCSI_CMD_DONE;
		}
		n += l;
	}
	/* Header: mode data length excludes itself; WP and DPOFUA in the device-specific byte. */
	if (ten) {
		scsi_put16(&b[0], (uint16_t)(n - 2));
		b[3] = (lu->readonly ? 0x80 : 0) | 0x10;
		b[4] = llbaa ? 0x01 : 0;
		scsi_put16(&b[6], (uint16_t)bdl);
	} else {
		b[0] = (uint8_t)(n - 1);
		b[2] = (lu->readonly ? 0x80 : 0) | 0x10;
		b[3] = (uint8_t)bdl;
	}
	scsi_cmd_data_in(cmd, b, scsi_min(n, alloc));
	return SCSI_CMD_DONE;
}

int scsi_spc_mode_select(struct scsi_cmd *cmd)
{
	const uint8_t *c = cmd->cdb;
	struct scsi_lu *lu = cmd->lu;
	bool ten = c[0] == 0x55;
	uint32_t plen = ten ? scsi_get16(&c[7]) : c[4];
	uint32_t hdr = ten ? 8 : 4, bdl, off;
	uint8_t p[512];
	bool new_wce = lu->wce;

	cmd->cdb_xfer_len = plen;
	if (c[1] & 0x01) {
		scsi_cmd_invalid_cdb(cmd, 1, 0);	/* SP: nothing can be saved */
		return SCSI_CMD_DONE;
	}
	if (!plen)
		return SCSI_CMD_DONE;
	if (!(c[1] & 0x10)) {
		scsi_cmd_invalid_cdb(cmd, 1, 4);	/* PF 0: vendor-specific pages */
		return SCSI_CMD_DONE;
	}
	if (plen > sizeof(p) || plen < hdr) {
		scsi_cmd_param_len_error(cmd);
		return SCSI_CMD_DONE;
	}
	if (scsi_cmd_data_out(cmd, 0, p, plen) < plen) {
		scsi_cmd_param_len_error(cmd);
		return SCSI_CMD_DONE;
	}
	bdl = ten ? scsi_get16(&p[6]) : p[3];
	if (hdr + bdl > plen) {
		scsi_cmd_param_len_error(cmd);
		return SCSI_CMD_DONE;
	}
	if (bdl) {
		bool lng = ten && (p[4] & 0x01);
		uint32_t want = lng ? 16 : 8;
		uint32_t blen = lng ? scsi_get32(&p[hdr + 12]) : scsi_get24(&p[hdr + 5]);

		if (bdl != want) {
			scsi_cmd_invalid_param(cmd, ten ? 6 : 3, -1);
			return SCSI_CMD_DONE;
		}
		if (blen != lu->block_size) {
			scsi_cmd_invalid_param(cmd, (uint16_t)(hdr + (lng ? 12 : 5)), -1);
			return SCSI_CMD_DONE;
		}
	}
	for (off = hdr + bdl; off < plen;) {
		uint8_t cur[32], mask[32];
		uint8_t page = p[off] & 0x3f;
		uint32_t l;

		if (off + 2 > plen) {
			scsi_cmd_param_len_error(cmd);
			return SCSI_CMD_DONE;
		}
		if (p[off] & 0x40) {	/* SPF: no subpages here */
			scsi_cmd_invalid_param(cmd, (uint16_t)off, 6);
			return SCSI_CMD_DONE;
		}
		l = scsi_mode_page(lu, page, SCSI_PC_CURRENT, cur);
		if (!l) {
			scsi_cmd_invalid_param(cmd, (uint16_t)off, 5);
			return SCSI_CMD_DONE;
		}
		if (p[off + 1] != l - 2) {
			scsi_cmd_invalid_param(cmd, (uint16_t)(off + 1), -1);
			return SCSI_CMD_DONE;
		}
		if (off + l > plen) {
			scsi_cmd_param_len_error(cmd);
			return SCSI_CMD_DONE;
		}
		scsi_mode_page(lu, page, SCSI_PC_CHANGEABLE, mask);
		for (uint32_t i = 2; i < l; i++) {
			uint8_t diff = (p[off + i] ^ cur[i]) & (uint8_t)~mask[i];

			if (diff) {
				scsi_cmd_invalid_param(cmd, (uint16_t)(off + i),
						       31 - __builtin_clz(diff));
				return SCSI_CMD_DONE;
			}
		}
		if (page == 0x08)
			new_wce = p[off + 2] & 0x04;
		off += l;
	}
	if (new_wce != lu->wce) {
		lu->wce = new_wce;
		gw_info(SCSI_LOG, "%s: LUN %llu: write cache %s", cmd->dev->name,
			(unsigned long long)lu->lun, new_wce ? "enabled" : "disabled");
		scsi_ua_set(lu, cmd->itn, SCSI_UA_MODE_CHANGED);
	}
	return SCSI_CMD_DONE;
}

/* REPORT SUPPORTED TASK MANAGEMENT FUNCTIONS */

int scsi_spc_report_tmfs(struct scsi_cmd *cmd)
{
	const uint8_t *c = cmd->cdb;
	uint32_t alloc = scsi_get32(&c[6]);
	bool repd = c[2] & 0x80;
	uint8_t b[16] = { 0 };

	if (alloc < 4) {
		scsi_cmd_invalid_cdb(cmd, 6, -1);
		return SCSI_CMD_DONE;
	}
	/* ABORT TASK, ABORT TASK SET, CLEAR TASK SET, LOGICAL UNIT RESET, TARGET RESET. */
	b[0] = 0x80 | 0x40 | 0x10 | 0x08 | 0x02;
	if (repd)
		b[3] = 0x0c;
	scsi_cmd_data_in(cmd, b, scsi_min(repd ? 16 : 4, alloc));
	return SCSI_CMD_DONE;
}
