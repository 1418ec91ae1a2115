// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: CDB dispatch in the SCSI core (gateway/scsi/) over RAM backstores, through
 * scsi_cmd_submit and the loop, as the iSCSI layer uses it. Each input builds a fresh device
 * (three initiators, two target ports, three LUs: 512-byte thick with a write cache, 4096-byte
 * thin without one, read-only) and runs a sequence of commands:
 *
 *   byte 0  bits 0-1 initiator (a, b on port 1; c on port 2), bits 2-3 LUN (0-2, 3: LUN 9,
 *           absent), bits 4-5 direction (none, read, write, bidi), bit 6: submit together
 *           with the next command (overlapping commands: CAW range locks, PR conflicts),
 *           bit 7: abort it right after submit
 *   byte 1  CDB length (6..32), then that many CDB bytes
 *   2 bytes buffer length (big-endian, up to 64 KiB), then, for data-out, that many bytes of
 *           data (short input: the rest is zeroes)
 *
 * Every command's done must fire exactly once and never inside submit; a CHECK CONDITION
 * carries fixed-format sense; a read never claims more bytes than its buffer. Anything else,
 * a crash, a leak or a sanitizer report is a finding.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bs.h"
#include "gw_log.h"
#include "gw_loop.h"
#include "scsi.h"

#define CMDS_MAX 64
#define BATCH_MAX 8
#define BUF_MAX 65536

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fcmd {
	struct scsi_cmd cmd;
	int fired;
	bool in_submit;
	struct iovec iov;
	uint8_t *buf;
};

static void fcmd_done(struct scsi_cmd *cmd)
{
	struct fcmd *f = gw_container_of(cmd, struct fcmd, cmd);

	if (f->in_submit)
		__builtin_trap();	/* the async rule: never from inside submit */
	f->fired++;
}

struct env {
	struct gw_loop loop;
	struct scsi_dev *dev;
	struct scsi_itn *itn[3];
	struct gw_errlist errs;
};

static int add_lu(struct env *e, uint64_t lun, uint64_t size, uint32_t bsz, bool thin, bool ro,
		  bool wce)
{
	struct bs_conf bc = { .type = BS_TYPE_RAM, .size = size, .block_size = bsz,
			      .readonly = ro, .threads = 1 };
	struct scsi_lu_conf lc = { .lun = lun, .write_cache = wce, .thin = thin };
	struct bs *bs = NULL;
	int r;

	r = bs_create(&e->loop, &bc, &bs, &e->errs);
	if (r)
		return r;
	r = scsi_dev_add_lu(e->dev, &lc, bs, &e->errs);
	if (r)
		bs_destroy(bs);
	return r;
}

static int env_init(struct env *e)
{
	struct scsi_port *p1, *p2;

	memset(e, 0, sizeof(*e));
	gw_errlist_init(&e->errs);
	if (gw_loop_init(&e->loop))
		return -1;
	e->dev = scsi_dev_create(&e->loop, "iqn.2026-11.org.isergw:fuzz");
	if (!e->dev)
		abort();
	p1 = scsi_dev_add_port(e->dev, "iqn.2026-11.org.isergw:fuzz,t,0x0001", 1);
	p2 = scsi_dev_add_port(e->dev, "iqn.2026-11.org.isergw:fuzz,t,0x0002", 2);
	e->itn[0] = scsi_itn_create(e->dev, p1, "iqn.2026-11.org.fuzz:a,i,0x23d000000001",
				    "iqn.2026-11.org.fuzz:a");
	e->itn[1] = scsi_itn_create(e->dev, p1, "iqn.2026-11.org.fuzz:b,i,0x23d000000002",
				    "iqn.2026-11.org.fuzz:b");
	e->itn[2] = scsi_itn_create(e->dev, p2, "iqn.2026-11.org.fuzz:c,i,0x23d000000003",
				    "iqn.2026-11.org.fuzz:c");
	if (!p1 || !p2 || !e->itn[0] || !e->itn[1] || !e->itn[2])
		abort();
	if (add_lu(e, 0, 1 << 20, 512, false, false, true) ||
	    add_lu(e, 1, 1 << 20, 4096, true, false, false) ||
	    add_lu(e, 2, 256 << 10, 512, true, true, true))
		abort();
	return 0;
}

static void env_fini(struct env *e)
{
	scsi_dev_destroy(e->dev);
	gw_errlist_fini(&e->errs);
	gw_loop_fini(&e->loop);
}

static void check_done(const struct fcmd *f)
{
	const struct scsi_cmd *c = &f->cmd;

	if (f->fired != 1)
		__builtin_trap();	/* done exactly once */
	if (c->status == SCSI_CHECK_CONDITION &&
	    (c->sense_len < 18 || c->sense_len > SCSI_SENSE_MAX || (c->sense[0] & 0x7f) != 0x70))
		__builtin_trap();	/* fixed-format sense with a CHECK CONDITION */
	if (c->dir != SCSI_DIR_WRITE && c->dir != SCSI_DIR_NONE && c->xfer_len > c->data_len)
		__builtin_trap();	/* more read data than room */
}

/* Runs the loop until every command of the batch completed (bounded: RAM I/O is quick). */
static void settle(struct env *e, struct fcmd *batch, int n)
{
	/* RAM I/O completes from deferred work: spin without sleeping (a 10 ms epoll wait per
	 * command would cap the fuzzer at 100 inputs a second). */
	for (int round = 0; round < 20000; round++) {
		int pending = 0;

		for (int i = 0; i < n; i++)
			pending += batch[i].fired == 0;
		if (!pending)
			return;
		gw_loop_run_once(&e->loop, round < 10000 ? 0 : 1);
	}
	__builtin_trap();	/* a command that never completes hangs its initiator */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint64_t luns[] = { 0, 1, 2, 9 };
	struct fcmd *batch;
	struct env e;
	size_t pos = 0;
	int ncmds = 0, n = 0;

	gw_log_set_level(GW_LOG_ERR - 1);
	if (env_init(&e))
		return 0;
	batch = calloc(BATCH_MAX, sizeof(*batch));
	if (!batch)
		abort();
	while (pos + 2 <= size && ncmds < CMDS_MAX) {
		uint8_t fl = data[pos], clen = data[pos + 1];
		struct fcmd *f = &batch[n];
		uint32_t blen = 0;

		pos += 2;
		if (clen < 6)
			clen = 6;
		if (clen > SCSI_CDB_MAX)
			clen = SCSI_CDB_MAX;
		memset(f, 0, sizeof(*f));
		memcpy(f->cmd.cdb, data + pos, size - pos < clen ? size - pos : clen);
		pos += size - pos < clen ? size - pos : clen;
		if (pos + 2 <= size) {
			blen = (uint32_t)data[pos] << 8 | data[pos + 1];
			pos += 2;
		}
		f->cmd.dev = e.dev;
		f->cmd.itn = e.itn[fl & 3 ? (fl & 3) - 1 : 0];
		if ((fl & 3) == 3)
			f->cmd.itn = e.itn[2];
		f->cmd.lun = luns[(fl >> 2) & 3];
		f->cmd.cdb_len = clen;
		f->cmd.dir = (enum scsi_dir)((fl >> 4) & 3);
		f->cmd.tag = (uint64_t)ncmds;
		f->cmd.done = fcmd_done;
		if (blen) {
			f->buf = calloc(1, blen);
			if (!f->buf)
				abort();
			if (f->cmd.dir == SCSI_DIR_WRITE || f->cmd.dir == SCSI_DIR_BIDI) {
				size_t take = size - pos < blen ? size - pos : blen;

				memcpy(f->buf, data + pos, take);
				pos += take;
			}
			f->iov.iov_base = f->buf;
			f->iov.iov_len = blen;
			f->cmd.iov = &f->iov;
			f->cmd.iovcnt = 1;
			f->cmd.data_len = blen;
		}
		f->in_submit = true;
		scsi_cmd_submit(&f->cmd);
		f->in_submit = false;
		if (fl & 0x80)
			(void)scsi_abort_cmd(&f->cmd);
		n++;
		ncmds++;
		if (!(fl & 0x40) || n == BATCH_MAX || pos + 2 > size) {
			settle(&e, batch, n);
			for (int i = 0; i < n; i++) {
				check_done(&batch[i]);
				free(batch[i].buf);
			}
			n = 0;
		}
	}
	settle(&e, batch, n);
	for (int i = 0; i < n; i++) {
		check_done(&batch[i]);
		free(batch[i].buf);
	}
	free(batch);
	env_fini(&e);
	return 0;
}
