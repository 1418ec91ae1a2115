// SPDX-License-Identifier: MIT
/*
 * SBC-3 block commands: READ/WRITE 6/10/12/16 straight between the transport's iovec and the
 * backstore, READ CAPACITY, SYNCHRONIZE CACHE, VERIFY, WRITE AND VERIFY, WRITE SAME, UNMAP,
 * GET LBA STATUS, COMPARE AND WRITE (under an exclusive range lock, on the back end when it
 * has its own, or only on the owner gateway of a LU shared by several), PRE-FETCH.
 *
 * READ and WRITE allocate nothing: the bs_io embedded in the command carries the transport's
 * iovec. The multi-step commands keep a job (state plus bounce buffer) in core_priv, which the
 * core frees at completion.
 *
 * A command group below the opcode table: it calls the command's run (finish, rerun, the range
 * lock: scsi_exec.c), the ALUA states (where COMPARE AND WRITE may run), the LUN lookup and
 * the reply helpers. Only the opcode table (with RSOC) and scsi_spc.c (VPD B0) call it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_log.h"
#include "scsi_priv.h"

#define SCSI_WS_CHUNK (1u << 20)	/* WRITE SAME pattern buffer */

uint32_t scsi_sbc_max_xfer_blocks(const struct scsi_lu *lu)
{
	return SCSI_MAX_XFER_BLOCKS_BYTES >> lu->block_shift;
}

/* Decoded LBA / length / byte-1 flags of the common CDB layouts. */
struct scsi_rw {
	uint64_t lba;
	uint32_t n;
	uint8_t b1;
	uint8_t len_byte;	/* where the transfer length is, for the field pointer */
};

static void scsi_rw_decode(const uint8_t *c, struct scsi_rw *rw)
{
	switch (c[0] >> 5) {
	case 0:		/* 6-byte */
		rw->lba = ((uint32_t)(c[1] & 0x1f) << 16) | scsi_get16(&c[2]);
		rw->n = c[4] ? c[4] : 256;
		rw->b1 = 0;
		rw->len_byte = 4;
		break;
	case 1:		/* 10-byte */
	case 2:
		rw->lba = scsi_get32(&c[2]);
		rw->n = scsi_get16(&c[7]);
		rw->b1 = c[1];
		rw->len_byte = 7;
		break;
	case 5:		/* 12-byte */
		rw->lba = scsi_get32(&c[2]);
		rw->n = scsi_get32(&c[6]);
		rw->b1 = c[1];
		rw->len_byte = 6;
		break;
	default:	/* 16-byte */
		rw->lba = scsi_get64(&c[2]);
		rw->n = scsi_get32(&c[10]);
		rw->b1 = c[1];
		rw->len_byte = 10;
		break;
	}
}

/* LBA OUT OF RANGE if any block of [lba, lba+n) is past the end (or lba itself is). */
static bool scsi_lba_bad(struct scsi_cmd *cmd, uint64_t lba, uint64_t n)
{
	uint64_t nb = cmd->lu->nblocks;

	if (lba > nb || n > nb - lba) {
		scsi_cmd_set_sense(cmd, SCSI_SK_ILLEGAL_REQUEST, 0x21, 0x00);
		return true;
	}
	return false;
}

static void scsi_sbc_submit_io(struct scsi_cmd *cmd, enum bs_op op, uint64_t lba, uint64_t len,
			       const struct iovec *iov, int iovcnt, bool fua,
			       void (*done)(struct bs_io *io))
{
	struct bs_io *io = &cmd->io;
	int rc;

	io->op = op;
	io->offset = lba << cmd->lu->block_shift;
	io->len = len;
	io->iov = iov;
	io->iovcnt = iovcnt;
	io->fua = fua;
	io->done = done;
	io->priv = cmd;
	rc = bs_submit(cmd->lu->bs, io);
	if (rc < 0) {
		/* Never called back, and we may be inside scsi_cmd_submit: finish from a defer. */
		io->result = rc;
		scsi_cmd_bs_error(cmd, rc);
		scsi_cmd_finish_later(cmd);
	}
}

static bool scsi_sbc_io_ok(struct scsi_cmd *cmd)
{
	/* A remote back end's own answer (media error, reservation conflict...) goes to the
	 * host as it is. */
	if (cmd->io.result == -EREMOTEIO && cmd->io.scsi_status) {
		cmd->status = cmd->io.scsi_status;
		cmd->sense_len = cmd->io.sense_len < SCSI_SENSE_MAX ? cmd->io.sense_len :
								      SCSI_SENSE_MAX;
		memcpy(cmd->sense, cmd->io.sense, cmd->sense_len);
		return false;
	}
	if (cmd->io.result < 0) {
		scsi_cmd_bs_error(cmd, cmd->io.result);
		return false;
	}
	return true;
}

static void scsi_sbc_finish(struct scsi_cmd *cmd)
{
	scsi_cmd_finish(cmd);
}

/* READ / WRITE */

static void scsi_sbc_rw_done(struct bs_io *io)
{
	struct scsi_cmd *cmd = io->priv;

	if (scsi_sbc_io_ok(cmd) && io->op == BS_READ)
		cmd->xfer_len = (uint32_t)io->len;
	scsi_sbc_finish(cmd);
}

int scsi_sbc_rw(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;
	bool write = cmd->cdb[0] == 0x0a || cmd->cdb[0] == 0x2a || cmd->cdb[0] == 0xaa ||
		     cmd->cdb[0] == 0x8a;
	struct scsi_rw rw;
	uint64_t bytes, len;
	bool fua;

	scsi_rw_decode(cmd->cdb, &rw);
	if (rw.b1 & 0xe0) {
		scsi_cmd_invalid_cdb(cmd, 1, 7);	/* RD/WRPROTECT: no protection info */
		return SCSI_CMD_DONE;
	}
	if (scsi_lba_bad(cmd, rw.lba, rw.n))
		return SCSI_CMD_DONE;
	if (rw.n > scsi_sbc_max_xfer_blocks(lu)) {
		scsi_cmd_invalid_cdb(cmd, rw.len_byte, -1);
		return SCSI_CMD_DONE;
	}
	bytes = (uint64_t)rw.n << lu->block_shift;
	cmd->cdb_xfer_len = (uint32_t)bytes;
	fua = (rw.b1 & 0x08) || !lu->wce;
	if (!write) {
		len = bytes < scsi_cmd_in_room(cmd) ? bytes : scsi_cmd_in_room(cmd);
		if (!len)
			return SCSI_CMD_DONE;
		scsi_sbc_submit_io(cmd, BS_READ, rw.lba, len, cmd->iov, cmd->iovcnt, false,
				   scsi_sbc_rw_done);
		return SCSI_CMD_ASYNC;
	}
	/* Less data than the CDB asks for: write the whole blocks that came (SAM residual). */
	len = bytes < scsi_cmd_out_len(cmd) ? bytes : scsi_cmd_out_len(cmd);
	len &= ~((uint64_t)lu->block_size - 1);
	if (!len)
		return SCSI_CMD_DONE;
	if (!scsi_range_acquire(cmd, rw.lba, len >> lu->block_shift, false))
		return SCSI_CMD_ASYNC;
	scsi_sbc_submit_io(cmd, BS_WRITE, rw.lba, len, cmd->iov, cmd->iovcnt, fua,
			   scsi_sbc_rw_done);
	return SCSI_CMD_ASYNC;
}

/* READ CAPACITY */

int scsi_sbc_read_capacity10(struct scsi_cmd *cmd)
{
	const uint8_t *c = cmd->cdb;
	struct scsi_lu *lu = cmd->lu;
	uint8_t b[8];
	uint64_t last = lu->nblocks - 1;

	if (!(c[8] & 0x01) && scsi_get32(&c[2])) {
		scsi_cmd_invalid_cdb(cmd, 2, -1);	/* LBA without PMI */
		return SCSI_CMD_DONE;
	}
	scsi_put32(b, last > 0xfffffffeull ? 0xffffffffu : (uint32_t)last);
	scsi_put32(&b[4], lu->block_size);
	scsi_cmd_data_in(cmd, b, 8);
	return SCSI_CMD_DONE;
}

int scsi_sbc_read_capacity16(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;
	uint32_t alloc = scsi_get32(&cmd->cdb[10]);
	uint8_t b[32] = { 0 };

	scsi_put64(b, lu->nblocks - 1);
	scsi_put32(&b[8], lu->block_size);
	b[13] = lu->lbppbe & 0x0f;
	if (lu->thin)
		b[14] = 0x80 | 0x40;	/* LBPME, LBPRZ */
	scsi_cmd_data_in(cmd, b, alloc < 32 ? alloc : 32);
	return SCSI_CMD_DONE;
}

/* SYNCHRONIZE CACHE, PRE-FETCH */

static void scsi_sbc_plain_done(struct bs_io *io)
{
	struct scsi_cmd *cmd = io->priv;

	scsi_sbc_io_ok(cmd);
	scsi_sbc_finish(cmd);
}

int scsi_sbc_sync_cache(struct scsi_cmd *cmd)
{
	struct scsi_rw rw;

	scsi_rw_decode(cmd->cdb, &rw);
	if (scsi_lba_bad(cmd, rw.lba, rw.n))
		return SCSI_CMD_DONE;
	/* The whole backstore is flushed whatever the range: fdatasync has no range. IMMED is
	 * honoured by finishing after the flush anyway, which SBC allows. */
	cmd->cdb_xfer_len = 0;
	scsi_sbc_submit_io(cmd, BS_FLUSH, 0, 0, NULL, 0, false, scsi_sbc_plain_done);
	return SCSI_CMD_ASYNC;
}

int scsi_sbc_prefetch(struct scsi_cmd *cmd)
{
	struct scsi_rw rw;

	scsi_rw_decode(cmd->cdb, &rw);
	cmd->cdb_xfer_len = 0;
	scsi_lba_bad(cmd, rw.lba, rw.n);
	return SCSI_CMD_DONE;
}

/* Jobs: multi-step commands */

struct scsi_desc {
	uint64_t lba;
	uint32_t n;
};

struct scsi_job {
	uint64_t lba;
	uint64_t left;		/* blocks still to do */
	uint32_t n;		/* blocks in the compare (VERIFY, COMPARE AND WRITE) */
	uint32_t ndesc, idx;
	struct scsi_desc *desc;
	uint8_t *buf;
	uint32_t buf_len;
	bool zero;		/* WRITE SAME of zeroes */
	bool unmap;
	struct iovec iov;
};

static struct scsi_job *scsi_job_new(struct scsi_cmd *cmd, size_t buf_len, size_t ndesc)
{
	struct scsi_job *j;
	size_t sz = sizeof(*j) + ndesc * sizeof(struct scsi_desc) + buf_len + 64;

	j = calloc(1, sz);
	if (!j) {
		cmd->status = SCSI_BUSY;
		return NULL;
	}
	j->desc = (struct scsi_desc *)(j + 1);
	j->buf = (uint8_t *)(((uintptr_t)(j->desc + ndesc) + 63) & ~(uintptr_t)63);
	j->buf_len = (uint32_t)buf_len;
	cmd->core_priv = j;
	return j;
}

/* First differing byte, or -1. */
static long scsi_first_diff(const uint8_t *a, const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (a[i] != b[i])
			return (long)i;
	return -1;
}

static void scsi_miscompare(struct scsi_cmd *cmd, uint64_t off)
{
	scsi_cmd_set_sense(cmd, SCSI_SK_MISCOMPARE, 0x1d, 0x00);
	scsi_cmd_set_info(cmd, off);
}

/* VERIFY */

static void scsi_sbc_verify_done(struct bs_io *io)
{
	struct scsi_cmd *cmd = io->priv;
	struct scsi_job *j = cmd->core_priv;
	uint32_t bs = cmd->lu->block_size;
	uint8_t tmp[4096];

	if (!scsi_sbc_io_ok(cmd))
		goto out;
	/* BYTCHK 01b: data-out holds every block; 11b: one block to match each of them. */
	for (uint64_t off = 0; off < (uint64_t)j->n * bs; off += bs) {
		uint32_t src = cmd->step == 3 ? 0 : (uint32_t)off;

		for (uint32_t k = 0; k < bs; k += sizeof(tmp)) {
			uint32_t l = bs - k < sizeof(tmp) ? bs - k : (uint32_t)sizeof(tmp);
			long d;

			if (scsi_cmd_data_out(cmd, src + k, tmp, l) < l) {
				/* Less data-out than the blocks named: what came was checked. */
				goto out;
			}
			d = scsi_first_diff(tmp, j->buf + off + k, l);
			if (d >= 0) {
				scsi_miscompare(cmd, off + k + (uint64_t)d);
				goto out;
			}
		}
	}
out:
	scsi_sbc_finish(cmd);
}

int scsi_sbc_verify(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;
	struct scsi_rw rw;
	struct scsi_job *j;
	int bytchk;

	scsi_rw_decode(cmd->cdb, &rw);
	bytchk = (rw.b1 >> 1) & 0x03;
	cmd->cdb_xfer_len = 0;
	if (rw.b1 & 0xe0) {
		scsi_cmd_invalid_cdb(cmd, 1, 7);	/* VRPROTECT */
		return SCSI_CMD_DONE;
	}
	if (bytchk == 2) {
		scsi_cmd_invalid_cdb(cmd, 1, 2);
		return SCSI_CMD_DONE;
	}
	if (scsi_lba_bad(cmd, rw.lba, rw.n))
		return SCSI_CMD_DONE;
	if (rw.n > scsi_sbc_max_xfer_blocks(lu)) {
		scsi_cmd_invalid_cdb(cmd, rw.len_byte, -1);
		return SCSI_CMD_DONE;
	}
	if (bytchk)
		cmd->cdb_xfer_len = bytchk == 3 ? lu->block_size : rw.n << lu->block_shift;
	/* BYTCHK 0 asks for a medium check; the backstore reports its own errors on read. */
	if (!bytchk || !rw.n)
		return SCSI_CMD_DONE;
	j = scsi_job_new(cmd, (size_t)rw.n << lu->block_shift, 0);
	if (!j)
		return SCSI_CMD_DONE;
	j->n = rw.n;
	cmd->step = (uint32_t)bytchk;
	j->iov.iov_base = j->buf;
	j->iov.iov_len = j->buf_len;
	scsi_sbc_submit_io(cmd, BS_READ, rw.lba, j->buf_len, &j->iov, 1, false,
			   scsi_sbc_verify_done);
	return SCSI_CMD_ASYNC;
}

int scsi_sbc_write_verify(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;
	struct scsi_rw rw;
	uint64_t bytes, len;

	scsi_rw_decode(cmd->cdb, &rw);
	if (rw.b1 & 0xe0) {
		scsi_cmd_invalid_cdb(cmd, 1, 7);
		return SCSI_CMD_DONE;
	}
	if (scsi_lba_bad(cmd, rw.lba, rw.n))
		return SCSI_CMD_DONE;
	if (rw.n > scsi_sbc_max_xfer_blocks(lu)) {
		scsi_cmd_invalid_cdb(cmd, rw.len_byte, -1);
		return SCSI_CMD_DONE;
	}
	bytes = (uint64_t)rw.n << lu->block_shift;
	cmd->cdb_xfer_len = (uint32_t)bytes;
	len = (bytes < scsi_cmd_out_len(cmd) ? bytes : scsi_cmd_out_len(cmd)) &
	      ~((uint64_t)lu->block_size - 1);
	if (!len)
		return SCSI_CMD_DONE;
	if (!scsi_range_acquire(cmd, rw.lba, len >> lu->block_shift, false))
		return SCSI_CMD_ASYNC;
	/* Verified means on the medium: written through, and what we read back would be
	 * what we wrote, so BYTCHK's compare cannot fail. */
	scsi_sbc_submit_io(cmd, BS_WRITE, rw.lba, len, cmd->iov, cmd->iovcnt, true,
			   scsi_sbc_rw_done);
	return SCSI_CMD_ASYNC;
}

/* WRITE SAME */

static void scsi_sbc_ws_step(struct scsi_cmd *cmd);

static void scsi_sbc_ws_done(struct bs_io *io)
{
	struct scsi_cmd *cmd = io->priv;

	if (!scsi_sbc_io_ok(cmd)) {
		scsi_sbc_finish(cmd);
		return;
	}
	scsi_sbc_ws_step(cmd);
}

static void scsi_sbc_ws_step(struct scsi_cmd *cmd)
{
	struct scsi_job *j = cmd->core_priv;
	struct scsi_lu *lu = cmd->lu;
	uint64_t n;

	if (!j->left) {
		scsi_sbc_finish(cmd);
		return;
	}
	if (j->zero) {
		/* One request for the range: the backstore punches or zeroes it. */
		n = j->left;
		j->left = 0;
		scsi_sbc_submit_io(cmd, j->unmap ? BS_UNMAP : BS_WRITE_ZEROES, j->lba,
				   n << lu->block_shift, NULL, 0, !lu->wce, scsi_sbc_ws_done);
		j->lba += n;
		return;
	}
	n = j->buf_len >> lu->block_shift;
	if (n > j->left)
		n = j->left;
	j->iov.iov_base = j->buf;
	j->iov.iov_len = n << lu->block_shift;
	j->left -= n;
	scsi_sbc_submit_io(cmd, BS_WRITE, j->lba, n << lu->block_shift, &j->iov, 1, !lu->wce,
			   scsi_sbc_ws_done);
	j->lba += n;
}

int scsi_sbc_write_same(struct scsi_cmd *cmd)
{
	const uint8_t *c = cmd->cdb;
	struct scsi_lu *lu = cmd->lu;
	bool sixteen = c[0] == 0x93;
	bool ndob = sixteen && (c[1] & 0x01);
	uint32_t bs = lu->block_size;
	uint8_t block[4096];
	struct scsi_rw rw;
	struct scsi_job *j;
	bool zero = true;
	size_t chunk;

	if (cmd->core_priv)	/* rerun after waiting for the range lock */
		goto start;
	scsi_rw_decode(c, &rw);
	cmd->cdb_xfer_len = ndob ? 0 : bs;
	if (c[1] & 0xe0) {
		scsi_cmd_invalid_cdb(cmd, 1, 7);	/* WRPROTECT */
		return SCSI_CMD_DONE;
	}
	if (c[1] & 0x10) {
		scsi_cmd_invalid_cdb(cmd, 1, 4);	/* ANCHOR: ANC_SUP is 0 */
		return SCSI_CMD_DONE;
	}
	if (c[1] & 0x06) {
		scsi_cmd_invalid_cdb(cmd, 1, c[1] & 0x04 ? 2 : 1);	/* PBDATA / LBDATA */
		return SCSI_CMD_DONE;
	}
	/* UNMAP=1 where VPD B2 reports LBPWS/LBPWS10 = 0 (not thin): SBC-4 says refuse, and
	 * what the LU accepts must be what it advertises (libiscsi's WriteSame*.UnmapVPD). */
	if ((c[1] & 0x08) && !lu->thin) {
		scsi_cmd_invalid_cdb(cmd, 1, 3);	/* UNMAP */
		return SCSI_CMD_DONE;
	}
	if (scsi_lba_bad(cmd, rw.lba, rw.n))
		return SCSI_CMD_DONE;
	/* WSNZ is 0: zero blocks means from the LBA to the end of the LU (SBC-3 5.42). */
	if (!rw.n)
		rw.n = lu->nblocks - rw.lba;
	if (!rw.n || rw.n > SCSI_MAX_WS_BLOCKS) {
		scsi_cmd_invalid_cdb(cmd, rw.len_byte, -1);
		return SCSI_CMD_DONE;
	}
	if (!ndob) {
		if (scsi_cmd_out_len(cmd) < bs) {
			scsi_cmd_param_len_error(cmd);
			return SCSI_CMD_DONE;
		}
		/* More than the one block the command replicates: the initiator and target
		 * disagree on what the CDB means; refuse rather than guess. */
		if (scsi_cmd_out_len(cmd) > bs) {
			scsi_cmd_invalid_cdb(cmd, rw.len_byte, -1);
			return SCSI_CMD_DONE;
		}
		for (uint32_t k = 0; k < bs; k += sizeof(block)) {
			uint32_t l = bs - k < sizeof(block) ? bs - k : (uint32_t)sizeof(block);

			scsi_cmd_data_out(cmd, k, block, l);
			for (uint32_t i = 0; i < l && zero; i++)
				zero = block[i] == 0;
		}
	}
	/* UNMAP=1 (on a thin LU, checked above) deallocates whatever the data block holds: SBC
	 * lets the device server unmap instead of writing, and LBPRZ then promises zeroes on read
	 * (initiators, libiscsi's WriteSame*.UnmapUntilEnd among them, rely on that). */
	if (c[1] & 0x08)
		zero = true;
	chunk = zero ? 0 : ((uint64_t)rw.n << lu->block_shift < SCSI_WS_CHUNK ?
			    (size_t)rw.n << lu->block_shift : SCSI_WS_CHUNK);
	j = scsi_job_new(cmd, chunk, 0);
	if (!j)
		return SCSI_CMD_DONE;
	j->lba = rw.lba;
	j->left = rw.n;
	j->zero = zero;
	/* UNMAP=1 on a thin LU deallocates; LBPRZ makes that read back as the zeroes asked. */
	j->unmap = zero && (c[1] & 0x08);
	for (size_t off = 0; off < chunk; off += bs)
		scsi_cmd_data_out(cmd, 0, j->buf + off, bs);
start:
	j = cmd->core_priv;
	if (!scsi_range_acquire(cmd, j->lba, j->left, false))
		return SCSI_CMD_ASYNC;
	scsi_sbc_ws_step(cmd);
	return SCSI_CMD_ASYNC;
}

/* UNMAP */

static void scsi_sbc_unmap_step(struct scsi_cmd *cmd);

static void scsi_sbc_unmap_done(struct bs_io *io)
{
	struct scsi_cmd *cmd = io->priv;

	if (!scsi_sbc_io_ok(cmd)) {
		scsi_sbc_finish(cmd);
		return;
	}
	scsi_sbc_unmap_step(cmd);
}

static void scsi_sbc_unmap_step(struct scsi_cmd *cmd)
{
	struct scsi_job *j = cmd->core_priv;
	struct scsi_lu *lu = cmd->lu;

	while (j->idx < j->ndesc && !j->desc[j->idx].n)
		j->idx++;
	if (j->idx >= j->ndesc) {
		scsi_sbc_finish(cmd);
		return;
	}
	j->idx++;
	scsi_sbc_submit_io(cmd, BS_UNMAP, j->desc[j->idx - 1].lba,
			   (uint64_t)j->desc[j->idx - 1].n << lu->block_shift, NULL, 0, false,
			   scsi_sbc_unmap_done);
}

int scsi_sbc_unmap(struct scsi_cmd *cmd)
{
	const uint8_t *c = cmd->cdb;
	struct scsi_lu *lu = cmd->lu;
	uint32_t plen = scsi_get16(&c[7]);
	uint8_t hdr[8], d[16];
	uint32_t bdlen, ndesc, i;
	struct scsi_job *j;

	if (cmd->core_priv)
		goto start;
	cmd->cdb_xfer_len = plen;
	if (!lu->thin) {
		scsi_cmd_set_sense(cmd, SCSI_SK_ILLEGAL_REQUEST, 0x20, 0x00);	/* LBPU 0 */
		return SCSI_CMD_DONE;
	}
	if (c[1] & 0x01) {
		scsi_cmd_invalid_cdb(cmd, 1, 0);	/* ANCHOR */
		return SCSI_CMD_DONE;
	}
	if (!plen)
		return SCSI_CMD_DONE;
	if (plen < 8 || scsi_cmd_data_out(cmd, 0, hdr, 8) < 8) {
		scsi_cmd_param_len_error(cmd);
		return SCSI_CMD_DONE;
	}
	if (plen > scsi_cmd_out_len(cmd))
		plen = scsi_cmd_out_len(cmd);
	bdlen = scsi_get16(&hdr[2]);
	if (bdlen > plen - 8)
		bdlen = plen - 8;
	ndesc = bdlen / 16;	/* a partial last descriptor is ignored */
	if (ndesc > SCSI_MAX_UNMAP_DESC) {
		scsi_cmd_invalid_param(cmd, 2, -1);
		return SCSI_CMD_DONE;
	}
	j = scsi_job_new(cmd, 0, ndesc);
	if (!j)
		return SCSI_CMD_DONE;
	/* Every descriptor is checked before anything is unmapped. */
	for (i = 0; i < ndesc; i++) {
		scsi_cmd_data_out(cmd, 8 + 16 * i, d, 16);
		j->desc[i].lba = scsi_get64(d);
		j->desc[i].n = scsi_get32(&d[8]);
		if (scsi_lba_bad(cmd, j->desc[i].lba, j->desc[i].n))
			return SCSI_CMD_DONE;
		if (j->desc[i].n > SCSI_MAX_UNMAP_BLOCKS) {
			scsi_cmd_invalid_param(cmd, (uint16_t)(8 + 16 * i + 8), -1);
			return SCSI_CMD_DONE;
		}
	}
	j->ndesc = ndesc;
	/* Nothing to unmap (no descriptor, or only empty ones): GOOD, completed from the loop like
	 * any command; scsi_sbc_unmap_step would finish it here, inside scsi_cmd_submit. */
	for (i = 0; i < ndesc && !j->desc[i].n; i++)
		;
	if (i == ndesc)
		return SCSI_CMD_DONE;
start:
	/* Serialised against COMPARE AND WRITE over the whole LU: rare, and simple. */
	if (!scsi_range_acquire(cmd, 0, lu->nblocks, false))
		return SCSI_CMD_ASYNC;
	scsi_sbc_unmap_step(cmd);
	return SCSI_CMD_ASYNC;
}

/* GET LBA STATUS */

/* At most this many descriptors per answer: a host asks again from where the last one ended. */
#define SCSI_LBA_STATUS_MAX 64

int scsi_sbc_get_lba_status(struct scsi_cmd *cmd)
{
	const uint8_t *c = cmd->cdb;
	struct scsi_lu *lu = cmd->lu;
	uint64_t lba = scsi_get64(&c[2]);
	uint32_t alloc = scsi_get32(&c[10]);
	uint8_t b[8 + 16 * SCSI_LBA_STATUS_MAX] = { 0 };
	uint32_t nd = 0, len;

	if (lba >= lu->nblocks) {
		scsi_cmd_set_sense(cmd, SCSI_SK_ILLEGAL_REQUEST, 0x21, 0x00);
		return SCSI_CMD_DONE;
	}
	/*
	 * One descriptor per extent of the same provisioning status, from the LBA asked for to
	 * the end of the LU or of the allocation length. A thick LU is one mapped extent. Holes
	 * count in whole blocks only: a block partly allocated is mapped.
	 */
	while (lba < lu->nblocks && nd < SCSI_LBA_STATUS_MAX && 8 + 16 * (nd + 1) <= alloc) {
		uint64_t left = lu->nblocks - lba, ext = left << lu->block_shift, n;
		int st = lu->thin ? bs_map(lu->bs, lba << lu->block_shift, ext, &ext) : BS_MAPPED;
		uint8_t *d = &b[8 + 16 * nd];

		n = st == BS_DEALLOCATED ? ext >> lu->block_shift
					 : (ext + (1u << lu->block_shift) - 1) >> lu->block_shift;
		if (!n) {
			st = BS_MAPPED;
			n = 1;
		}
		if (n > left)
			n = left;
		if (n > 0xffffffffu)
			n = 0xffffffffu;
		/* Merge with the previous descriptor when the status is the same. */
		if (nd && (b[8 + 16 * (nd - 1) + 12] & 0x0f) == (st == BS_DEALLOCATED ? 1 : 0) &&
		    (uint64_t)scsi_get32(&b[8 + 16 * (nd - 1) + 8]) + n <= 0xffffffffu) {
			d = &b[8 + 16 * (nd - 1)];
			scsi_put32(&d[8], scsi_get32(&d[8]) + (uint32_t)n);
			lba += n;
			continue;
		}
		scsi_put64(d, lba);
		scsi_put32(&d[8], (uint32_t)n);
		d[12] = st == BS_DEALLOCATED ? 0x01 : 0x00;	/* deallocated : mapped */
		nd++;
		lba += n;
	}
	/* An allocation length too short for one descriptor still gets the header. */
	len = 8 + 16 * (nd ? nd : 1);
	if (!nd) {
		scsi_put64(&b[8], lba);
		scsi_put32(&b[16], lu->nblocks - lba > 0xffffffffull ? 0xffffffffu
								 : (uint32_t)(lu->nblocks - lba));
	}
	scsi_put32(b, len - 4);
	scsi_cmd_data_in(cmd, b, alloc < len ? alloc : len);
	return SCSI_CMD_DONE;
}

/* Atomics across gateways (docs/CLUSTER.md, "Atomics") */

/* Another gateway's port is listed: the LU's blocks are reached by other gateways too. */
static bool scsi_alua_shared(const struct scsi_alua_map *am)
{
	for (size_t i = 0; am && i < am->nports; i++)
		if (am->port[i].remote)
			return true;
	return false;
}

/* This gateway's first port's group: false without a port. */
static bool scsi_alua_local_tpg(const struct scsi_alua_map *am, uint16_t *tpg)
{
	for (size_t i = 0; am && i < am->nports; i++)
		if (!am->port[i].remote) {
			*tpg = am->port[i].tpg_id;
			return true;
		}
	return false;
}

enum scsi_atom scsi_sbc_atom(const struct scsi_dev *dev, const struct scsi_lu *lu,
			     const struct scsi_port *port, bool backend, uint16_t *owner)
{
	const struct scsi_alua_map *am = scsi_dev_alua(dev);
	bool fenced = __atomic_load_n(&dev->fenced, __ATOMIC_ACQUIRE);
	unsigned int ao = 0;
	uint16_t tpg = 0;
	bool has_port;

	*owner = 0;
	if (backend && lu->bs->caw_blocks)
		return SCSI_ATOM_BACKEND;
	if (!scsi_alua_shared(am))
		return SCSI_ATOM_LOCAL;
	/* Fencing guarantees at most one gateway reports a/o for the LU at any instant
	 * (docs/CLUSTER.md, "Fencing"): running only there serialises every COMPARE AND WRITE
	 * of the cluster under that gateway's range lock. */
	for (size_t i = 0; i < am->ngroups; i++)
		if (scsi_alua_state_in(am, fenced, lu, am->grp[i].id) == SCSI_ALUA_AO) {
			ao++;
			*owner = am->grp[i].id;
		}
	if (ao > 1)
		return SCSI_ATOM_NONE;
	if (port) {
		tpg = port->tpg_id;
		has_port = true;
	} else {
		has_port = scsi_alua_local_tpg(am, &tpg);
	}
	if (ao == 1 && has_port && tpg == *owner)
		return SCSI_ATOM_OWNER;
	return SCSI_ATOM_ELSEWHERE;
}

uint8_t scsi_sbc_caw_max(const struct scsi_dev *dev, const struct scsi_lu *lu,
			 const struct scsi_port *port)
{
	uint16_t owner;

	switch (scsi_sbc_atom(dev, lu, port, true, &owner)) {
	case SCSI_ATOM_BACKEND:
		return (uint8_t)(lu->bs->caw_blocks < SCSI_MAX_CAW_BLOCKS ? lu->bs->caw_blocks :
					 SCSI_MAX_CAW_BLOCKS);
	case SCSI_ATOM_NONE:
		return 0;
	default:
		return SCSI_MAX_CAW_BLOCKS;
	}
}

/*
 * Refuses an atomic read-modify-write this gateway may not run (true: sense set). Through a
 * gateway that is not the LU's owner: NOT READY, LOGICAL UNIT NOT ACCESSIBLE, TARGET PORT IN
 * STANDBY STATE (04/0B) while another gateway is a/o, which makes a host send it through
 * another path (Linux: a path error for dm-multipath; ESXi's ALUA SATP: the path is standby,
 * fail over), or ASYMMETRIC ACCESS STATE TRANSITION (04/0A) while no gateway is a/o yet (the
 * LU is moving: retry). With several a/o groups: INVALID COMMAND OPERATION CODE, as the LU
 * does not advertise it. Each refusal is counted; the first per owner is logged.
 */
static bool scsi_sbc_atom_refuse(struct scsi_cmd *cmd, enum scsi_atom mode, uint16_t owner)
{
	struct scsi_lu *lu = cmd->lu;

	switch (mode) {
	case SCSI_ATOM_LOCAL:
	case SCSI_ATOM_BACKEND:
	case SCSI_ATOM_OWNER:
		return false;
	case SCSI_ATOM_ELSEWHERE:
		scsi_cmd_set_sense(cmd, SCSI_SK_NOT_READY, 0x04, owner ? 0x0b : 0x0a);
		break;
	case SCSI_ATOM_NONE:
		scsi_cmd_set_sense(cmd, SCSI_SK_ILLEGAL_REQUEST, 0x20, 0x00);
		break;
	}
	lu->caw_refused++;
	if (lu->caw_logged != (uint32_t)owner + 1) {
		lu->caw_logged = (uint32_t)owner + 1;
		if (mode == SCSI_ATOM_NONE)
			gw_warn(SCSI_LOG, "%s: LUN %llu: COMPARE AND WRITE refused: several target "
				"port groups report active/optimized, none can make it atomic",
				cmd->dev->name, (unsigned long long)lu->lun);
		else if (owner)
			gw_warn(SCSI_LOG, "%s: LUN %llu: COMPARE AND WRITE refused through this "
				"gateway (NOT READY 04/0b): it runs only where the LU is "
				"active/optimized (group %u%s%s); logged once per owner, counted "
				"in the LUN's status", cmd->dev->name, (unsigned long long)lu->lun,
				owner, lu->conf.owner && lu->conf.owner[0] ? ", owner " : "",
				lu->conf.owner ? lu->conf.owner : "");
		else
			gw_warn(SCSI_LOG, "%s: LUN %llu: COMPARE AND WRITE refused through this "
				"gateway (NOT READY 04/0a): it runs only where the LU is "
				"active/optimized, and no group is yet (the LU is moving%s%s); "
				"logged once per owner, counted in the LUN's status",
				cmd->dev->name, (unsigned long long)lu->lun,
				lu->conf.owner && lu->conf.owner[0] ? " to " : "",
				lu->conf.owner ? lu->conf.owner : "");
	}
	return true;
}

static const char *scsi_atom_name(enum scsi_atom m)
{
	switch (m) {
	case SCSI_ATOM_LOCAL:
		return "local";
	case SCSI_ATOM_BACKEND:
		return "backend";
	case SCSI_ATOM_OWNER:
		return "owner";
	case SCSI_ATOM_ELSEWHERE:
	case SCSI_ATOM_NONE:
		break;
	}
	return "refused";
}

static json_t *scsi_atom_entry(const char *mode, const char *reason)
{
	return json_pack("{s:s, s:s}", "mode", mode, "reason", reason);
}

json_t *scsi_dev_lu_atomics(struct scsi_dev *dev, uint64_t lun)
{
	struct scsi_lu *lu = scsi_dev_find_lu(dev, lun);
	enum scsi_atom m;
	bool remote;
	uint16_t owner;
	json_t *caw, *ws, *um;
	char why[320];

	if (!lu)
		return NULL;
	remote = lu->bs->conf.type == BS_TYPE_REMOTE;
	m = scsi_sbc_atom(dev, lu, NULL, true, &owner);
	switch (m) {
	case SCSI_ATOM_BACKEND:
		snprintf(why, sizeof(why), "the back end's own COMPARE AND WRITE (up to %u "
			 "blocks): atomic for every gateway and every initiator of the back-end LU",
			 lu->bs->caw_blocks);
		break;
	case SCSI_ATOM_LOCAL:
		snprintf(why, sizeof(why), "%sread, compared and written by this gateway under its "
			 "range lock: atomic among the commands of this gateway, the only one that "
			 "serves the LU%s", remote ? "the back end has no COMPARE AND WRITE (VPD B0): " :
			 "", remote ? ", not against initiators of the back-end LU elsewhere" : "");
		break;
	case SCSI_ATOM_OWNER:
		snprintf(why, sizeof(why), "the LU is shared with other gateways; COMPARE AND WRITE "
			 "runs only where it is active/optimized, here (group %u)%s", owner,
			 remote ? "; the back end has no COMPARE AND WRITE of its own" : "");
		break;
	case SCSI_ATOM_ELSEWHERE:
		if (owner)
			snprintf(why, sizeof(why), "the LU is active/optimized on group %u%s%s: "
				 "COMPARE AND WRITE runs only there, refused here with NOT READY "
				 "04/0B (a host retries through another path)", owner,
				 lu->conf.owner && lu->conf.owner[0] ? ", owner " : "",
				 lu->conf.owner ? lu->conf.owner : "");
		else
			snprintf(why, sizeof(why), "no gateway is active/optimized for the LU yet: "
				 "COMPARE AND WRITE refused with NOT READY 04/0A until one is");
		break;
	case SCSI_ATOM_NONE:
		snprintf(why, sizeof(why), "several target port groups report active/optimized "
			 "for the LU: no single gateway can make COMPARE AND WRITE atomic; not "
			 "advertised (VPD B0), refused with ILLEGAL REQUEST 20/00");
		break;
	}
	caw = scsi_atom_entry(scsi_atom_name(m), why);
	json_object_set_new(caw, "max_blocks", json_integer(scsi_sbc_caw_max(dev, lu, NULL)));
	json_object_set_new(caw, "refused", json_integer((json_int_t)lu->caw_refused));
	json_object_set_new(caw, "backend_commands", json_integer((json_int_t)lu->caw_backend));
	if (remote)
		ws = scsi_atom_entry("backend", lu->thin ?
			"zeroes: WRITE SAME(16) with UNMAP on the back end; other patterns written "
			"by this gateway" : "zeroes: WRITE SAME(16) on the back end; other patterns "
			"written by this gateway");
	else
		ws = scsi_atom_entry("local", lu->thin ?
			"zeroes: hole punched in the backstore; other patterns written by this "
			"gateway" : "written by this gateway (zeroes: zero range)");
	if (lu->thin)
		um = scsi_atom_entry(remote ? "backend" : "local", remote ?
				     "UNMAP passed to the back end" :
				     "holes punched in the backstore");
	else
		um = scsi_atom_entry("refused", !lu->conf.thin ? "the LU is not thin "
				     "(\"thin\": false): LBPU 0, UNMAP refused with ILLEGAL "
				     "REQUEST 20/00" : remote ? "the back end does not report thin "
				     "provisioning (LBPME): LBPU 0, UNMAP refused" :
				     "the backstore cannot deallocate: LBPU 0, UNMAP refused");
	return json_pack("{s:o, s:o, s:o}", "compare_and_write", caw, "write_same", ws, "unmap",
			 um);
}


/* ORWRITE(16): each block becomes old | data, atomically against other writers of the range
 * (SBC-3 5.10 without the XDWRITE/XPWRITE parity use; ORPROTECT needs protection information,
 * which no LU here has). */

/* Read-modify-write commands (ORWRITE, COMPARE AND WRITE) hold an exclusive range lock from
 * before the read until after the write; j->buf holds the j->n blocks read. */
static void scsi_sbc_rmw_written(struct bs_io *io)
{
	struct scsi_cmd *cmd = io->priv;

	scsi_sbc_io_ok(cmd);
	scsi_sbc_finish(cmd);
}

static void scsi_sbc_rmw_write(struct scsi_cmd *cmd)
{
	struct scsi_job *j = cmd->core_priv;
	struct scsi_lu *lu = cmd->lu;

	j->iov.iov_base = j->buf;
	j->iov.iov_len = j->n << lu->block_shift;
	scsi_sbc_submit_io(cmd, BS_WRITE, j->lba, j->iov.iov_len, &j->iov, 1,
			   (cmd->cdb[1] & 0x08) || !lu->wce, scsi_sbc_rmw_written);
}

static int scsi_sbc_rmw_start(struct scsi_cmd *cmd, void (*read_done)(struct bs_io *io))
{
	struct scsi_job *j = cmd->core_priv;

	if (!scsi_range_acquire(cmd, j->lba, j->n, true))
		return SCSI_CMD_ASYNC;
	j->iov.iov_base = j->buf;
	j->iov.iov_len = j->n << cmd->lu->block_shift;
	scsi_sbc_submit_io(cmd, BS_READ, j->lba, j->iov.iov_len, &j->iov, 1, false, read_done);
	return SCSI_CMD_ASYNC;
}

static void scsi_sbc_orwrite_read(struct bs_io *io)
{
	struct scsi_cmd *cmd = io->priv;
	struct scsi_job *j = cmd->core_priv;
	struct scsi_lu *lu = cmd->lu;
	uint32_t len = j->n << lu->block_shift;
	uint8_t *data = j->buf + len;

	if (!scsi_sbc_io_ok(cmd)) {
		scsi_sbc_finish(cmd);
		return;
	}
	scsi_cmd_data_out(cmd, 0, data, len);
	for (uint32_t i = 0; i < len; i++)
		j->buf[i] |= data[i];
	scsi_sbc_rmw_write(cmd);
}

int scsi_sbc_orwrite(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;
	enum scsi_atom mode;
	struct scsi_rw rw;
	struct scsi_job *j;
	uint16_t owner;

	if (cmd->core_priv)
		goto start;
	scsi_rw_decode(cmd->cdb, &rw);
	cmd->cdb_xfer_len = rw.n << lu->block_shift;
	if (rw.b1 & 0xe0) {
		scsi_cmd_invalid_cdb(cmd, 1, 7);	/* ORPROTECT */
		return SCSI_CMD_DONE;
	}
	/* Read-modify-write like COMPARE AND WRITE: on a shared LU only its owner runs it. */
	mode = scsi_sbc_atom(cmd->dev, lu, cmd->itn ? cmd->itn->port : NULL, false, &owner);
	if (scsi_sbc_atom_refuse(cmd, mode, owner))
		return SCSI_CMD_DONE;
	if (scsi_lba_bad(cmd, rw.lba, rw.n))
		return SCSI_CMD_DONE;
	if (rw.n > scsi_sbc_max_xfer_blocks(lu)) {
		scsi_cmd_invalid_cdb(cmd, rw.len_byte, -1);
		return SCSI_CMD_DONE;
	}
	/* As for WRITE: only the whole blocks that arrived are written (the transport reports
	 * the residual). */
	if (scsi_cmd_out_len(cmd) < cmd->cdb_xfer_len)
		rw.n = scsi_cmd_out_len(cmd) >> lu->block_shift;
	if (!rw.n)
		return SCSI_CMD_DONE;
	j = scsi_job_new(cmd, (size_t)(2 * rw.n) << lu->block_shift, 0);
	if (!j)
		return SCSI_CMD_DONE;
	j->lba = rw.lba;
	j->n = rw.n;
start:
	return scsi_sbc_rmw_start(cmd, scsi_sbc_orwrite_read);
}


/* COMPARE AND WRITE */

/* The back end compared and wrote, or said why not (MISCOMPARE with its offset): as it is. */
static void scsi_sbc_caw_backend_done(struct bs_io *io)
{
	struct scsi_cmd *cmd = io->priv;

	/* The back end refused the opcode without running it (bs->caw_blocks is now 0): the
	 * command runs again, the way a LU without one does it. */
	if (io->result == -EOPNOTSUPP && !cmd->lu->bs->caw_blocks) {
		cmd->lu->caw_backend--;
		scsi_cmd_rerun(cmd);
		return;
	}
	scsi_sbc_io_ok(cmd);
	scsi_sbc_finish(cmd);
}

static void scsi_sbc_caw_read(struct bs_io *io)
{
	struct scsi_cmd *cmd = io->priv;
	struct scsi_job *j = cmd->core_priv;
	struct scsi_lu *lu = cmd->lu;
	uint32_t len = j->n << lu->block_shift;
	uint8_t *want = j->buf + len;
	uint16_t owner;
	long d;

	if (!scsi_sbc_io_ok(cmd)) {
		scsi_sbc_finish(cmd);
		return;
	}
	/* The LU moved to another gateway while the blocks were read: nothing is written, the
	 * host retries through the new owner. */
	if (scsi_sbc_atom(cmd->dev, lu, cmd->itn ? cmd->itn->port : NULL, false, &owner) ==
	    SCSI_ATOM_ELSEWHERE) {
		scsi_sbc_atom_refuse(cmd, SCSI_ATOM_ELSEWHERE, owner);
		scsi_sbc_finish(cmd);
		return;
	}
	scsi_cmd_data_out(cmd, 0, want, len);
	d = scsi_first_diff(want, j->buf, len);
	if (d >= 0) {
		/* The medium is left as it was. */
		scsi_miscompare(cmd, (uint64_t)d);
		scsi_sbc_finish(cmd);
		return;
	}
	scsi_cmd_data_out(cmd, len, j->buf, len);
	scsi_sbc_rmw_write(cmd);
}

int scsi_sbc_compare_and_write(struct scsi_cmd *cmd)
{
	const uint8_t *c = cmd->cdb;
	struct scsi_lu *lu = cmd->lu;
	uint64_t lba = scsi_get64(&c[2]);
	uint32_t n = c[13];
	struct scsi_job *j;
	enum scsi_atom mode;
	uint16_t owner;
	int rc;

	if (cmd->core_priv)
		goto start;
	cmd->cdb_xfer_len = (2 * n) << lu->block_shift;
	mode = scsi_sbc_atom(cmd->dev, lu, cmd->itn ? cmd->itn->port : NULL, true, &owner);
	if (mode == SCSI_ATOM_NONE) {
		/* As any opcode the LU does not support: before the CDB is looked at. */
		scsi_sbc_atom_refuse(cmd, mode, owner);
		return SCSI_CMD_DONE;
	}
	if (c[1] & 0xe0) {
		scsi_cmd_invalid_cdb(cmd, 1, 7);
		return SCSI_CMD_DONE;
	}
	if (scsi_lba_bad(cmd, lba, n))
		return SCSI_CMD_DONE;
	/* The data must be exactly the compare and the write halves: with any other amount the
	 * initiator and the target disagree on the command (a count of 256 wrapped to 0, say),
	 * and guessing could overwrite blocks nobody compared. */
	if (n > SCSI_MAX_CAW_BLOCKS || scsi_cmd_out_len(cmd) != cmd->cdb_xfer_len) {
		scsi_cmd_invalid_cdb(cmd, 13, -1);
		return SCSI_CMD_DONE;
	}
	if (!n)
		return SCSI_CMD_DONE;
	if (scsi_sbc_atom_refuse(cmd, mode, owner))
		return SCSI_CMD_DONE;
	if (mode == SCSI_ATOM_BACKEND) {
		if (n > lu->bs->caw_blocks) {
			scsi_cmd_invalid_cdb(cmd, 13, -1);	/* over what VPD B0 says */
			return SCSI_CMD_DONE;
		}
		/* No range lock: the back end serialises it against every writer, ours too. */
		cmd->io.op = BS_WRITE;
		cmd->io.offset = lba << lu->block_shift;
		cmd->io.len = (uint64_t)n << lu->block_shift;
		cmd->io.iov = cmd->iov;
		cmd->io.iovcnt = cmd->iovcnt;
		cmd->io.fua = (c[1] & 0x08) || !lu->wce;
		cmd->io.done = scsi_sbc_caw_backend_done;
		cmd->io.priv = cmd;
		rc = bs_submit_caw(lu->bs, &cmd->io);
		if (rc < 0) {
			cmd->io.result = rc;
			scsi_cmd_bs_error(cmd, rc);
			return SCSI_CMD_DONE;
		}
		lu->caw_backend++;
		return SCSI_CMD_ASYNC;
	}
	j = scsi_job_new(cmd, (size_t)(2 * n) << lu->block_shift, 0);
	if (!j)
		return SCSI_CMD_DONE;
	j->lba = lba;
	j->n = n;
start:
	return scsi_sbc_rmw_start(cmd, scsi_sbc_caw_read);
}

struct scsi_lu_state_call {
	struct scsi_dev *dev;
	uint64_t lun;
	json_t *out;
};

static int scsi_lu_state_fn(void *arg)
{
	struct scsi_lu_state_call *c = arg;
	struct scsi_lu *lu = scsi_dev_find_lu(c->dev, c->lun);
	json_t *st;

	if (!lu)
		return -ENOENT;
	st = bs_status(scsi_dev_lu_bs(c->dev, c->lun));
	if (!st)
		st = json_object();
	if (st) {
		json_object_set_new(st, "atomics", scsi_dev_lu_atomics(c->dev, c->lun));
		/* Its owner's index in the gateway's loops (0 with one loop). */
		json_object_set_new(st, "owner_loop", json_integer(lu->loop_idx));
	}
	c->out = st;
	return 0;
}

json_t *scsi_dev_lu_state(struct scsi_dev *dev, uint64_t lun)
{
	struct scsi_lu_state_call c = { .dev = dev, .lun = lun };
	struct gw_loop *loop = scsi_dev_lu_loop(dev, lun);

	if (!loop)
		return NULL;
	gw_loop_call(loop, scsi_lu_state_fn, &c);
	return c.out;
}
