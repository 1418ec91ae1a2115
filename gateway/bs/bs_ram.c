// SPDX-License-Identifier: MIT
/*
 * RAM backstore: anonymous memory mapped with MAP_NORESERVE, so a large LU costs only the pages
 * written. UNMAP and WRITE ZEROES give whole pages back to the kernel (they read as zeroes).
 * Everything completes from the deferred queue, never inside submit.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bs.h"
#include "bs_priv.h"
#include "gw_log.h"

static int bs_ram_open(struct bs *bs)
{
	void *mem;

	mem = mmap(NULL, bs->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS |
		   MAP_NORESERVE, -1, 0);
	if (mem == MAP_FAILED) {
		int rc = -errno;

		gw_err("bs", "ram: cannot map %llu bytes: %s", (unsigned long long)bs->size,
		       strerror(-rc));
		return rc;
	}
	bs->priv = mem;
	bs->can_unmap = true;
	return 0;
}

static void bs_ram_close(struct bs *bs)
{
	if (bs->priv)
		munmap(bs->priv, bs->size);
	bs->priv = NULL;
}

static void bs_ram_zero(struct bs *bs, uint64_t off, uint64_t len)
{
	uint8_t *mem = bs->priv;
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t start = (off + page - 1) & ~(page - 1);
	uint64_t end = (off + len) & ~(page - 1);

	if (start >= end) {
		memset(mem + off, 0, len);
		return;
	}
	/* Partial pages at either end are cleared by hand; whole pages are dropped. */
	memset(mem + off, 0, start - off);
	if (madvise(mem + start, end - start, MADV_DONTNEED) < 0)
		memset(mem + start, 0, end - start);
	memset(mem + end, 0, off + len - end);
}

static int bs_ram_submit(struct bs *bs, struct bs_io *io)
{
	uint8_t *mem = bs->priv;

	switch (io->op) {
	case BS_READ:
		if (gw_buf_to_iov(io->iov, io->iovcnt, 0, mem + io->offset, io->len) != io->len)
			return -EINVAL;
		break;
	case BS_WRITE:
		if (gw_iov_to_buf(io->iov, io->iovcnt, 0, mem + io->offset, io->len) != io->len)
			return -EINVAL;
		break;
	case BS_UNMAP:
	case BS_WRITE_ZEROES:
		bs_ram_zero(bs, io->offset, io->len);
		break;
	case BS_FLUSH:
		break;
	}
	bs_complete_later(io);
	return 0;
}

const struct bs_ops bs_ram_ops = {
	.name = "ram",
	.open = bs_ram_open,
	.close = bs_ram_close,
	.submit = bs_ram_submit,
};
