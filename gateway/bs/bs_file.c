// SPDX-License-Identifier: MIT
/*
 * File and block-device backstore. The loop thread never blocks on it. Two engines:
 * - io_uring (the default): one ring per backstore, owned by its loop thread. Submit prepares
 *   a READV/WRITEV (straight from the task's iovec), FSYNC (datasync) or FALLOCATE (punch hole,
 *   zero range) entry; a defer submits what one loop iteration prepared with one system call.
 *   The ring's completion eventfd is a gw_notify in the loop, which reaps the completions and
 *   runs io->done. At most queue_depth entries are in the kernel; more wait on a list here.
 *   Short transfers are resubmitted for the rest. Where the kernel has them (6.1), the ring is
 *   SINGLE_ISSUER | DEFER_TASKRUN: a completion is not task work that interrupts the loop's
 *   epoll_wait; the kernel signals the eventfd when the first one is queued and the loop posts
 *   them (io_uring_get_events) when it reaps. Only the issuer may submit, reap or wait: the
 *   thread of the owner loop, made so by its first submit (bs_ring_enable). The ring fd itself
 *   is not watched: on 6.18 its POLLIN did not wake epoll_wait for deferred completions.
 * - worker threads (mutex + condvar) running preadv/pwritev/fdatasync/fallocate, handing the
 *   finished I/O back through another gw_notify: the fallback when io_uring cannot be set up
 *   (old kernel, seccomp) or the file system refuses the first read or write through it, and
 *   for the rare I/O the ring does not do (O_DIRECT with unaligned memory: the bounce; a
 *   fallocate the file system refuses: BLKZEROOUT or written zeroes). Started on first need.
 *
 * UNMAP punches holes (files, and block devices whose driver zeroes on discard); reads of a
 * hole return zeroes, which is what LBPRZ promises. O_DIRECT I/O with unaligned memory or a
 * partial-block read goes through a per-worker aligned bounce buffer.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/falloc.h>
#include <liburing.h>
#include <linux/fs.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "bs.h"
#include "bs_priv.h"
#include "gw_log.h"
#include "mp.h"

#define BS_FILE_ZEROES (1u << 20)	/* zero buffer for WRITE ZEROES without fallocate */
#define BS_FILE_IOV_WIN 64		/* iovec entries handed to one preadv/pwritev */
#define BS_FILE_ALIGN 4096		/* bounce buffer alignment */
#define BS_FILE_OVERLAP_MIN (256u * 1024) /* memfs reads this big overlap with the loop */
#define BS_RING_QD_DEFAULT 128
#define BS_RING_IOV_MAX IOV_MAX		/* iovec entries one READV/WRITEV takes */
/* The ring's flavour where the kernel has it (6.1): completions are posted when the owner loop
 * asks, not as task work that interrupts its epoll_wait (see bs_ring_enable). */
#define BS_RING_SINGLE \
	(IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_R_DISABLED)

struct bs_file {
	struct bs *bs;
	int fd;
	bool is_block;
	bool direct;
	uint32_t align;			/* O_DIRECT alignment: the LU block size */
	void *zeroes;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct gw_list queue;		/* submitted, for the workers */
	struct gw_list done;		/* finished, for the loop */
	bool stopping;
	uint32_t nthreads;
	pthread_t *threads;
	struct gw_notify notify;
	bool notify_ok;
	bool memfs;			/* tmpfs/ramfs: I/O is a memory copy, done inline */
	bool overlap;			/* large memfs reads to the workers (process CPUs > 1) */
	bool nowait_read;		/* try RWF_NOWAIT on the loop thread first */
	bool nowait_write;
	uint64_t inline_ios;		/* served inline from the page cache */
	struct mp_dm *dm;		/* the device is a dm-multipath map: multipathd's view */
	/* io_uring (loop thread only) */
	int engine;			/* BS_IO_URING or BS_IO_THREADS: what new I/O takes */
	struct io_uring ring;
	bool ring_ok;
	bool ring_single;		/* SINGLE_ISSUER | DEFER_TASKRUN, created disabled */
	bool ring_enabled;		/* by the first submit, on the loop that owns it */
	struct gw_notify ring_notify;	/* its completion eventfd */
	bool ring_notify_ok;
	bool ring_fsync;		/* the kernel has the opcodes */
	bool ring_falloc;
	bool rw_proven;			/* a read or write went through: no more fallback */
	bool dsync_ok;			/* RWF_DSYNC writes accepted */
	uint32_t qd;			/* queue_depth */
	uint32_t ring_inflight;		/* prepared and not reaped: at most qd */
	uint32_t ring_peak;
	uint32_t nwaiting;
	struct gw_list waitq;		/* beyond qd */
	struct gw_defer submit_defer;
	uint64_t ring_ios;		/* completed through the ring */
	uint64_t thread_ios;		/* handed to the workers */
};

/* A worker's bounce buffer, grown on demand and kept for the thread's life. */
struct bs_file_bounce {
	void *p;
	size_t len;
};

/*
 * Open rings as a kernel before 6.1 would (no single issuer, no deferred task work), to cover
 * that path on a newer kernel. Only a unit test that compiles this file into itself sets it
 * (tests/unit/bs/test_bs_file.c includes it): no symbol, configuration key or environment
 * variable reaches it in the gateway.
 */
static bool bs_file_classic_ring;

static int bs_bounce_get(struct bs_file_bounce *b, size_t len)
{
	void *p;

	if (b->len >= len)
		return 0;
	if (posix_memalign(&p, BS_FILE_ALIGN, len))
		return -ENOMEM;
	free(b->p);
	b->p = p;
	b->len = len;
	return 0;
}

static bool bs_iov_aligned(const struct iovec *iov, int iovcnt, uint32_t align)
{
	for (int i = 0; i < iovcnt; i++) {
		if (((uintptr_t)iov[i].iov_base | iov[i].iov_len) & (align - 1))
			return false;
	}
	return true;
}

static uint64_t bs_iov_total(const struct iovec *iov, int iovcnt)
{
	uint64_t n = 0;

	for (int i = 0; i < iovcnt; i++)
		n += iov[i].iov_len;
	return n;
}

/* preadv/pwritev until len bytes moved: short transfers and EINTR are retried. */
static int bs_file_rw_iov(struct bs_file *f, bool write, const struct iovec *iov, int iovcnt,
			  uint64_t off, uint64_t len, bool fua)
{
	uint64_t done = 0;
	bool dsync = fua;

	while (done < len) {
		struct iovec v[BS_FILE_IOV_WIN];
		int n = gw_iov_slice(iov, iovcnt, done, len - done, v, BS_FILE_IOV_WIN, NULL);
		ssize_t r;

		if (n == 0)
			return -EINVAL;	/* iovec shorter than len */
		if (write)
			r = pwritev2(f->fd, v, n, (off_t)(off + done), dsync ? RWF_DSYNC : 0);
		else
			r = preadv(f->fd, v, n, (off_t)(off + done));
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (write && dsync && errno == EOPNOTSUPP) {
				dsync = false;	/* sync the whole file after, below */
				continue;
			}
			return -errno;
		}
		if (r == 0) {
			if (write)
				return -EIO;
			/* The file shrank under us: what is past its end reads as zeroes. */
			gw_iov_zero(iov, iovcnt, done, len - done);
			break;
		}
		done += (uint64_t)r;
	}
	if (fua && !dsync && fdatasync(f->fd) < 0)
		return -errno;
	return 0;
}

static int bs_file_rw(struct bs_file *f, struct bs_io *io, struct bs_file_bounce *b)
{
	bool write = io->op == BS_WRITE;
	uint64_t a = f->align;
	uint64_t start, end;
	struct iovec one;
	int rc;

	if (!io->len)
		return 0;
	if (!f->direct || (bs_iov_aligned(io->iov, io->iovcnt, f->align) &&
			   !((io->offset | io->len) & (a - 1))))
		return bs_file_rw_iov(f, write, io->iov, io->iovcnt, io->offset, io->len, io->fua);

	/* O_DIRECT with memory or a length the device cannot take: go through the bounce. */
	start = io->offset & ~(a - 1);
	end = (io->offset + io->len + a - 1) & ~(a - 1);
	if (write && (start != io->offset || end != io->offset + io->len))
		return -EINVAL;	/* the SCSI core writes whole blocks only */
	rc = bs_bounce_get(b, end - start);
	if (rc < 0)
		return rc;
	one.iov_base = b->p;
	one.iov_len = end - start;
	if (write) {
		gw_iov_to_buf(io->iov, io->iovcnt, 0, b->p, io->len);
		return bs_file_rw_iov(f, true, &one, 1, start, end - start, io->fua);
	}
	rc = bs_file_rw_iov(f, false, &one, 1, start, end - start, false);
	if (rc == 0)
		gw_buf_to_iov(io->iov, io->iovcnt, 0, (uint8_t *)b->p + (io->offset - start),
			      io->len);
	return rc;
}

static int bs_file_write_zeroes_slow(struct bs_file *f, uint64_t off, uint64_t len)
{
	while (len) {
		struct iovec v = { f->zeroes, len < BS_FILE_ZEROES ? len : BS_FILE_ZEROES };
		int rc = bs_file_rw_iov(f, true, &v, 1, off, v.iov_len, false);

		if (rc < 0)
			return rc;
		off += v.iov_len;
		len -= v.iov_len;
	}
	return 0;
}

static int bs_file_fallocate(struct bs_file *f, int mode, uint64_t off, uint64_t len)
{
	int r;

	do
		r = fallocate(f->fd, mode, (off_t)off, (off_t)len);
	while (r < 0 && errno == EINTR);
	return r < 0 ? -errno : 0;
}

static int bs_file_unmap(struct bs_file *f, uint64_t off, uint64_t len)
{
	int rc;

	if (!len)
		return 0;
	/* On block devices the kernel turns this into a discard only when the device reads
	 * zeroes back, else into write-zeroes: either way the range reads as zeroes after. */
	rc = bs_file_fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len);
	if (rc != -EOPNOTSUPP && rc != -EINVAL)
		return rc;
	if (f->is_block) {
		uint64_t range[2] = { off, len };

		if (ioctl(f->fd, BLKZEROOUT, range) == 0)
			return 0;
	}
	return bs_file_write_zeroes_slow(f, off, len);
}

static int bs_file_write_zeroes(struct bs_file *f, uint64_t off, uint64_t len)
{
	int rc;

	if (!len)
		return 0;
	if (f->bs->can_unmap)
		return bs_file_unmap(f, off, len);
	rc = bs_file_fallocate(f, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, off, len);
	if (rc != -EOPNOTSUPP && rc != -EINVAL)
		return rc;
	return bs_file_write_zeroes_slow(f, off, len);
}

static void bs_file_exec(struct bs_file *f, struct bs_io *io, struct bs_file_bounce *b)
{
	int rc = 0;

	switch (io->op) {
	case BS_READ:
	case BS_WRITE:
		rc = bs_file_rw(f, io, b);
		break;
	case BS_FLUSH:
		rc = fdatasync(f->fd) < 0 ? -errno : 0;
		break;
	case BS_UNMAP:
		rc = bs_file_unmap(f, io->offset, io->len);
		break;
	case BS_WRITE_ZEROES:
		rc = bs_file_write_zeroes(f, io->offset, io->len);
		break;
	}
	/* A LUN without a write cache asks every write to be durable, WRITE SAME's zeroing and
	 * hole punching too: fallocate alone leaves the change in the journal's hands. */
	if (rc == 0 && io->fua && (io->op == BS_UNMAP || io->op == BS_WRITE_ZEROES) &&
	    fdatasync(f->fd) < 0)
		rc = -errno;
	if (rc < 0)
		gw_err_rl("bs", "%s: %s of %llu bytes at %llu failed: %s", f->bs->conf.path,
			  bs_op_name(io->op), (unsigned long long)io->len,
			  (unsigned long long)io->offset, strerror(-rc));
	io->result = rc;
}

static void *bs_file_worker(void *arg)
{
	struct bs_file *f = arg;
	struct bs_file_bounce b = { NULL, 0 };

	pthread_mutex_lock(&f->lock);
	for (;;) {
		struct bs_io *io;
		bool wake;

		while (gw_list_empty(&f->queue) && !f->stopping)
			pthread_cond_wait(&f->cond, &f->lock);
		if (gw_list_empty(&f->queue))
			break;
		io = gw_list_first_entry(&f->queue, struct bs_io, node);
		gw_list_del(&io->node);
		pthread_mutex_unlock(&f->lock);

		bs_file_exec(f, io, &b);

		pthread_mutex_lock(&f->lock);
		/* One wake-up per batch: the loop drains the whole list each time. */
		wake = gw_list_empty(&f->done);
		gw_list_add_tail(&f->done, &io->node);
		if (wake)
			gw_notify_signal(&f->notify);
	}
	pthread_mutex_unlock(&f->lock);
	free(b.p);
	return NULL;
}

static void bs_file_notify_fn(struct gw_notify *n)
{
	struct bs_file *f = gw_container_of(n, struct bs_file, notify);
	struct gw_list batch;

	gw_list_init(&batch);
	pthread_mutex_lock(&f->lock);
	if (!gw_list_empty(&f->done)) {
		batch.next = f->done.next;
		batch.prev = f->done.prev;
		batch.next->prev = &batch;
		batch.prev->next = &batch;
		gw_list_init(&f->done);
	}
	pthread_mutex_unlock(&f->lock);
	while (!gw_list_empty(&batch)) {
		struct bs_io *io = gw_list_first_entry(&batch, struct bs_io, node);

		gw_list_del(&io->node);
		bs_complete(io);
	}
}

/*
 * A large read from a memory file system, when this process may run on more than one CPU:
 * copying it (about 100 us per 512 KiB, several times that under emulation) on a worker
 * overlaps with the loop sending the previous command's Data-In, instead of adding to it. The
 * Linux kernel initiator reading 512 KiB at QD 8 in the VM rig needed this to lead tgtd, whose
 * worker threads do the same (docs/PERFORMANCE.md, issue 14). A target pinned to one CPU keeps
 * the inline copy: there the hand-off would only add a wake-up (the host bench, 6 % slower).
 * Whether it may is the process's mask (bs_file_overlap_cpus), never the opening thread's.
 */
static bool bs_file_overlaps(const struct bs_file *f, const struct bs_io *io)
{
	return f->overlap && io->op == BS_READ && io->len >= BS_FILE_OVERLAP_MIN;
}

static const char *bs_file_memfs_note(const struct bs_file *f)
{
	if (!f->memfs || f->direct)
		return "";
	return f->overlap ? ", in memory (I/O on the event loop, reads from 256 KiB on the workers)" :
			    ", in memory (I/O on the event loop)";
}

/*
 * I/O that cannot block is done on the loop thread: no hand-off to a worker, no wake-up of a
 * thread on the other CPU (which costs more than a 4 KiB copy). That is every read and write of
 * a file on tmpfs or ramfs (the kernel copies from memory; there is no disk to wait for), and
 * elsewhere reads that hit the page cache and buffered writes that need no allocation, through
 * RWF_NOWAIT, which returns EAGAIN instead of blocking. Anything that would block or moves only
 * part of the range goes to the workers whole (re-reading or re-writing the same bytes there is
 * harmless). O_DIRECT and FUA always take the workers.
 */
static bool bs_file_try_inline(struct bs_file *f, struct bs_io *io)
{
	struct iovec v[BS_FILE_IOV_WIN];
	bool write = io->op == BS_WRITE;
	int n, flags;
	ssize_t r;

	if (f->direct || io->fua || !io->len || (io->op != BS_READ && !write))
		return false;
	if (bs_file_overlaps(f, io))
		return false;
	if (f->memfs)
		flags = 0;
	else if (write ? f->nowait_write : f->nowait_read)
		flags = RWF_NOWAIT;
	else
		return false;
	n = gw_iov_slice(io->iov, io->iovcnt, 0, io->len, v, BS_FILE_IOV_WIN, NULL);
	if (n == 0)
		return false;
	r = write ? pwritev2(f->fd, v, n, (off_t)io->offset, flags) :
		    preadv2(f->fd, v, n, (off_t)io->offset, flags);
	if (r < 0 && errno == EOPNOTSUPP && flags) {
		/* The file system cannot promise not to block this way: stop asking. */
		if (write)
			f->nowait_write = false;
		else
			f->nowait_read = false;
		return false;
	}
	if (r < 0 || (uint64_t)r != io->len)
		return false;
	f->inline_ios++;
	io->result = 0;
	bs_complete_later(io);
	return true;
}

static int bs_file_start_workers(struct bs *bs, struct bs_file *f);

/* To the worker threads, started on first need. From submit or from a ring completion. */
static int bs_file_to_workers(struct bs_file *f, struct bs_io *io)
{
	int rc = bs_file_start_workers(f->bs, f);

	if (rc < 0)
		return rc;
	f->thread_ios++;
	pthread_mutex_lock(&f->lock);
	gw_list_add_tail(&f->queue, &io->node);
	pthread_cond_signal(&f->cond);
	pthread_mutex_unlock(&f->lock);
	return 0;
}

/* Whether the ring can do io as it is; else the workers do (see the top of the file). */
static bool bs_ring_can(struct bs_file *f, const struct bs_io *io)
{
	switch (io->op) {
	case BS_READ:
	case BS_WRITE:
		if (io->fua && !f->dsync_ok)
			return false;
		return !f->direct || (bs_iov_aligned(io->iov, io->iovcnt, f->align) &&
				      !((io->offset | io->len) & (f->align - 1)));
	case BS_FLUSH:
		return f->ring_fsync;
	case BS_UNMAP:
	case BS_WRITE_ZEROES:
		return f->ring_falloc;
	}
	return false;
}

/* One entry for io (the rest of it after a short transfer); a slot is free (ring_inflight <
 * qd <= the ring's size). */
static void bs_ring_prep(struct bs_file *f, struct bs_io *io)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&f->ring);
	const struct iovec *iov = io->iov;
	int n = io->iovcnt;
	int mode;

	if (!sqe) {
		/* Cannot happen while qd <= entries; submit what waits and take the slot. */
		io_uring_submit(&f->ring);
		sqe = io_uring_get_sqe(&f->ring);
	}
	switch (io->op) {
	case BS_READ:
	case BS_WRITE:
		if (io->xfer || io->iovcnt > BS_RING_IOV_MAX ||
		    bs_iov_total(io->iov, io->iovcnt) != io->len) {
			/* Not the task's vector as it is: its part from xfer on. */
			if (!io->xiov) {
				int max = io->iovcnt < BS_RING_IOV_MAX ? io->iovcnt :
									 BS_RING_IOV_MAX;

				io->xiov = malloc(sizeof(*io->xiov) * (size_t)max);
			}
			if (io->xiov) {
				n = gw_iov_slice(io->iov, io->iovcnt, io->xfer, io->len - io->xfer,
						 io->xiov, io->iovcnt < BS_RING_IOV_MAX ?
						 io->iovcnt : BS_RING_IOV_MAX, NULL);
				iov = io->xiov;
			} else {
				/* No memory: a NOP that completes with -ENOMEM below. */
				io_uring_prep_nop(sqe);
				io_uring_sqe_set_data(sqe, io);
				io->xfer = UINT64_MAX;
				break;
			}
		}
		if (io->op == BS_READ)
			io_uring_prep_readv(sqe, f->fd, iov, (unsigned)n, io->offset + io->xfer);
		else
			io_uring_prep_writev2(sqe, f->fd, iov, (unsigned)n, io->offset + io->xfer,
					      io->fua ? RWF_DSYNC : 0);
		break;
	case BS_FLUSH:
		io_uring_prep_fsync(sqe, f->fd, IORING_FSYNC_DATASYNC);
		break;
	case BS_UNMAP:
	case BS_WRITE_ZEROES:
		mode = io->op == BS_UNMAP || f->bs->can_unmap ?
			       FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE :
			       FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE;
		io_uring_prep_fallocate(sqe, f->fd, mode, io->offset, io->len);
		break;
	}
	io_uring_sqe_set_data(sqe, io);
	if (++f->ring_inflight > f->ring_peak)
		f->ring_peak = f->ring_inflight;
	gw_defer_queue(f->bs->loop, &f->submit_defer);
}

static void bs_ring_submit_fn(struct gw_defer *d)
{
	struct bs_file *f = gw_container_of(d, struct bs_file, submit_defer);
	int r;

	if (!io_uring_sq_ready(&f->ring))
		return;
	r = io_uring_submit(&f->ring);
	if (r == -EAGAIN || r == -EINTR || r == -EBUSY)
		gw_defer_queue(f->bs->loop, &f->submit_defer);
	else if (r < 0)
		gw_err_rl("bs", "%s: io_uring_submit: %s", f->bs->conf.path, strerror(-r));
}

/* The ring refused a read or write before any went through: this file system cannot (some
 * refuse O_DIRECT through io_uring, or the opcode): the backstore goes to the workers. */
static void bs_ring_give_up(struct bs_file *f, int res)
{
	gw_warn("bs", "%s: io_uring refused the first I/O (%s): I/O engine threads from now on",
		f->bs->conf.path, strerror(-res));
	f->engine = BS_IO_THREADS;
}

/* io is finished with res: onto the caller's list, completed once the ring is left alone. */
static void bs_ring_finish(struct bs_file *f, struct bs_io *io, int res, struct gw_list *done)
{
	free(io->xiov);
	io->xiov = NULL;
	if (res < 0)
		gw_err_rl("bs", "%s: %s of %llu bytes at %llu failed: %s", f->bs->conf.path,
			  bs_op_name(io->op), (unsigned long long)io->len,
			  (unsigned long long)io->offset, strerror(-res));
	io->result = res;
	f->ring_ios++;
	gw_list_add_tail(done, &io->node);
}

/* The ring cannot do this one after all: the workers do it from the start. */
static void bs_ring_handoff(struct bs_file *f, struct bs_io *io, struct gw_list *done)
{
	int rc;

	free(io->xiov);
	io->xiov = NULL;
	io->xfer = 0;
	rc = bs_file_to_workers(f, io);
	if (rc < 0)
		bs_ring_finish(f, io, rc, done);
}

/* One completion: finished (onto done), resubmitted for the rest, or handed to the workers. */
static void bs_ring_done(struct bs_file *f, struct bs_io *io, int res, struct gw_list *done)
{
	bool rw = io->op == BS_READ || io->op == BS_WRITE;

	f->ring_inflight--;
	if (io->xfer == UINT64_MAX) {
		io->xfer = 0;
		bs_ring_finish(f, io, -ENOMEM, done);
		return;
	}
	if (res == -EINTR || res == -EAGAIN) {
		bs_ring_prep(f, io);
		return;
	}
	if (rw && res > 0) {
		f->rw_proven = true;
		io->xfer += (uint64_t)res;
		if (io->xfer < io->len)
			bs_ring_prep(f, io);	/* short: the rest */
		else
			bs_ring_finish(f, io, 0, done);
		return;
	}
	if (rw && res == 0) {
		if (io->op == BS_WRITE) {
			bs_ring_finish(f, io, -EIO, done);
			return;
		}
		/* The file shrank under us: what is past its end reads as zeroes. */
		gw_iov_zero(io->iov, io->iovcnt, io->xfer, io->len - io->xfer);
		bs_ring_finish(f, io, 0, done);
		return;
	}
	if (res == -EOPNOTSUPP || res == -EINVAL) {
		if (rw && io->fua && res == -EOPNOTSUPP && f->dsync_ok) {
			f->dsync_ok = false;	/* the workers write and fdatasync */
			bs_ring_handoff(f, io, done);
			return;
		}
		if (rw && !f->rw_proven && f->bs->conf.io_engine == BS_IO_AUTO) {
			if (f->engine == BS_IO_URING)
				bs_ring_give_up(f, res);
			bs_ring_handoff(f, io, done);
			return;
		}
		if (io->op == BS_UNMAP || io->op == BS_WRITE_ZEROES) {
			/* The workers know the other ways: BLKZEROOUT, writing zeroes. */
			bs_ring_handoff(f, io, done);
			return;
		}
	}
	bs_ring_finish(f, io, res, done);
}

/* Starts what waits for a free slot. */
static void bs_ring_pump(struct bs_file *f)
{
	while (f->nwaiting && f->ring_inflight < f->qd) {
		struct bs_io *io = gw_list_first_entry(&f->waitq, struct bs_io, node);

		gw_list_del(&io->node);
		f->nwaiting--;
		bs_ring_prep(f, io);
	}
}

/*
 * Reaps every completion, refills the ring (the rest of short transfers, what waited) and
 * submits, and only then runs the done callbacks, from a local list: a callback may submit
 * again (that only prepares entries, submitted by the defer) or even destroy the backstore,
 * so nothing of f is touched after the first one.
 */
static void bs_ring_reap(struct bs_file *f)
{
	struct io_uring_cqe *cqe;
	struct gw_list done;
	unsigned head, n = 0;
	int r;

	gw_list_init(&done);
	if (f->ring_single) {
		/* Deferred task work: the completions are posted now, on this thread. */
		r = io_uring_get_events(&f->ring);
		if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY)
			gw_err_rl("bs", "%s: io_uring_get_events: %s", f->bs->conf.path,
				  strerror(-r));
	}
	io_uring_for_each_cqe(&f->ring, head, cqe) {
		struct bs_io *io = io_uring_cqe_get_data(cqe);

		n++;
		bs_ring_done(f, io, cqe->res, &done);
	}
	io_uring_cq_advance(&f->ring, n);
	bs_ring_pump(f);
	if (io_uring_sq_ready(&f->ring)) {
		gw_defer_cancel(&f->submit_defer);
		r = io_uring_submit(&f->ring);
		if (r < 0)
			gw_defer_queue(f->bs->loop, &f->submit_defer);
	}
	while (!gw_list_empty(&done)) {
		struct bs_io *io = gw_list_first_entry(&done, struct bs_io, node);

		gw_list_del(&io->node);
		bs_complete(io);
	}
}

static void bs_ring_notify_fn(struct gw_notify *n)
{
	bs_ring_reap(gw_container_of(n, struct bs_file, ring_notify));
}

/*
 * A single-issuer ring is created disabled (on the thread that applies the configuration) and
 * enabled by its first submit, so the issuer is the thread of the loop that owns the
 * backstore: every later submit and reap must come from it (another thread gets -EEXIST).
 * liburing 2.3 declares io_uring_enable_rings but does not export it: the system call.
 */
static int bs_ring_enable(struct bs_file *f)
{
	int r = 0;

	if (f->ring_single &&
	    syscall(__NR_io_uring_register, f->ring.ring_fd, IORING_REGISTER_ENABLE_RINGS, NULL,
		    0) < 0) {
		r = -errno;
		gw_warn("bs", "%s: cannot enable the io_uring ring (%s): I/O engine threads from "
			"now on", f->bs->conf.path, strerror(-r));
		f->engine = BS_IO_THREADS;
		return r;
	}
	f->ring_enabled = true;
	return r;
}

static int bs_file_submit(struct bs *bs, struct bs_io *io)
{
	struct bs_file *f = bs->priv;

	io->xfer = 0;
	io->xiov = NULL;
	if (bs_file_try_inline(f, io))
		return 0;
	/* io_uring would do the copy inline in io_uring_enter: the workers overlap it. */
	if (f->engine != BS_IO_URING || !bs_ring_can(f, io) || bs_file_overlaps(f, io))
		return bs_file_to_workers(f, io);
	if (!io->len && io->op != BS_FLUSH) {
		io->result = 0;
		bs_complete_later(io);
		return 0;
	}
	if (!f->ring_enabled && bs_ring_enable(f) < 0)
		return bs_file_to_workers(f, io);
	if (f->ring_inflight >= f->qd || f->nwaiting) {
		gw_list_add_tail(&f->waitq, &io->node);
		f->nwaiting++;
		return 0;
	}
	bs_ring_prep(f, io);
	return 0;
}

/* The ring, its eventfd in the loop and the opcodes it has. < 0: not usable here. */
static int bs_ring_open(struct bs *bs, struct bs_file *f)
{
	struct io_uring_probe *probe;
	int rc;

	rc = -EINVAL;
	if (!bs_file_classic_ring) {
		struct io_uring_params p = { .flags = BS_RING_SINGLE };

		rc = io_uring_queue_init_params(f->qd, &f->ring, &p);
	}
	if (rc == 0) {
		f->ring_single = true;
	} else {
		if (rc != -EINVAL)
			return rc;
		/* Before 6.1 (or refused): completions run as task work, as they always did. */
		gw_info("bs", "%s: io_uring refuses single issuer with deferred task work: "
			"completions as task work", bs->conf.path);
		rc = io_uring_queue_init(f->qd, &f->ring, 0);
		if (rc < 0)
			return rc;
		f->ring_enabled = true;
	}
	f->ring_ok = true;
	probe = io_uring_get_probe_ring(&f->ring);
	if (!probe)
		return -EOPNOTSUPP;
	if (!io_uring_opcode_supported(probe, IORING_OP_READV) ||
	    !io_uring_opcode_supported(probe, IORING_OP_WRITEV))
		rc = -EOPNOTSUPP;
	f->ring_fsync = io_uring_opcode_supported(probe, IORING_OP_FSYNC);
	f->ring_falloc = io_uring_opcode_supported(probe, IORING_OP_FALLOCATE);
	io_uring_free_probe(probe);
	if (rc < 0)
		return rc;
	rc = gw_notify_init(&f->ring_notify, bs->loop, bs_ring_notify_fn);
	if (rc < 0)
		return rc;
	f->ring_notify_ok = true;
	rc = io_uring_register_eventfd(&f->ring, f->ring_notify.w.fd);
	if (rc < 0)
		return rc;
	return 0;
}

static void bs_ring_close(struct bs_file *f)
{
	if (f->ring_ok)
		io_uring_queue_exit(&f->ring);
	f->ring_ok = false;
	if (f->ring_notify_ok)
		gw_notify_fini(&f->ring_notify);
	f->ring_notify_ok = false;
	gw_defer_cancel(&f->submit_defer);
}

/* Close: whatever is still in the ring or waits for it finishes first (shutdown stragglers). */
static void bs_ring_drain(struct bs_file *f)
{
	if (!f->ring_ok || !f->ring_enabled)
		return;	/* never enabled: nothing was submitted */
	while (f->ring_inflight || f->nwaiting) {
		int r = io_uring_submit_and_wait(&f->ring, 1);

		if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY) {
			/* -EEXIST: not on the issuer's thread (the owner loop must close it). */
			gw_err("bs", "%s: io_uring wait at close: %s", f->bs->conf.path,
			       strerror(-r));
			break;
		}
		bs_ring_reap(f);
	}
	gw_defer_cancel(&f->submit_defer);
}

/* Whether the block device discards (sysfs queue/discard_max_bytes > 0). */
static bool bs_blk_can_discard(dev_t rdev)
{
	char p[96];
	unsigned long long v = 0;
	FILE *fp;

	snprintf(p, sizeof(p), "/sys/dev/block/%u:%u/queue/discard_max_bytes", major(rdev),
		 minor(rdev));
	fp = fopen(p, "re");
	if (!fp)
		return false;
	if (fscanf(fp, "%llu", &v) != 1)
		v = 0;
	fclose(fp);
	return v > 0;
}

static int bs_file_open_fd(struct bs *bs, struct bs_file *f)
{
	const char *path = bs->conf.path;
	int flags = (bs->readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC | (f->direct ? O_DIRECT : 0);
	int rc;

	f->fd = open(path, flags);
	if (f->fd >= 0)
		return 0;
	rc = -errno;
	if (rc != -ENOENT || bs->conf.type != BS_TYPE_FILE) {
		gw_err("bs", "%s: cannot open: %s", path, strerror(-rc));
		return rc;
	}
	if (!bs->conf.size) {
		gw_err("bs", "%s: does not exist (give a size to create it)", path);
		return rc;
	}
	if (bs->readonly) {
		gw_err("bs", "%s: does not exist and the backstore is read-only", path);
		return rc;
	}
	f->fd = open(path, flags | O_CREAT | O_EXCL, 0600);
	if (f->fd < 0) {
		rc = -errno;
		gw_err("bs", "%s: cannot create: %s", path, strerror(-rc));
		return rc;
	}
	if (ftruncate(f->fd, (off_t)bs->conf.size) < 0) {
		rc = -errno;
		gw_err("bs", "%s: cannot size to %llu bytes: %s", path,
		       (unsigned long long)bs->conf.size, strerror(-rc));
		close(f->fd);
		f->fd = -1;
		unlink(path);
		return rc;
	}
	gw_info("bs", "%s: created sparse, %llu bytes", path, (unsigned long long)bs->conf.size);
	return 0;
}

static int bs_file_size(struct bs *bs, struct bs_file *f, const struct stat *st)
{
	const char *path = bs->conf.path;
	uint64_t have;

	if (f->is_block) {
		int lbs = 0;

		if (ioctl(f->fd, BLKGETSIZE64, &have) < 0) {
			int rc = -errno;

			gw_err("bs", "%s: BLKGETSIZE64: %s", path, strerror(-rc));
			return rc;
		}
		if (ioctl(f->fd, BLKSSZGET, &lbs) == 0 && lbs > (int)bs->block_size) {
			/* The LU cannot address less than the device does. */
			gw_info("bs", "%s: device block size %d, using it instead of %u", path, lbs,
				bs->block_size);
			bs->block_size = (uint32_t)lbs;
		}
		if (bs->conf.size > have) {
			gw_err("bs", "%s: size %llu is larger than the device (%llu bytes)", path,
			       (unsigned long long)bs->conf.size, (unsigned long long)have);
			return -ENOSPC;
		}
	} else {
		have = (uint64_t)st->st_size;
		if (bs->conf.size > have) {
			int rc;

			if (bs->readonly) {
				gw_err("bs", "%s: %llu bytes, smaller than size %llu, and read-only",
				       path, (unsigned long long)have,
				       (unsigned long long)bs->conf.size);
				return -ENOSPC;
			}
			if (ftruncate(f->fd, (off_t)bs->conf.size) < 0) {
				rc = -errno;
				gw_err("bs", "%s: cannot extend to %llu bytes: %s", path,
				       (unsigned long long)bs->conf.size, strerror(-rc));
				return rc;
			}
			gw_info("bs", "%s: extended from %llu to %llu bytes", path,
				(unsigned long long)have, (unsigned long long)bs->conf.size);
			have = bs->conf.size;
		}
	}
	bs->size = bs->conf.size ? bs->conf.size : have;
	if (bs->size % bs->block_size)
		gw_warn("bs", "%s: the last %llu bytes are not a whole block and are not exported",
			path, (unsigned long long)(bs->size % bs->block_size));
	bs->size -= bs->size % bs->block_size;
	if (!bs->size) {
		gw_err("bs", "%s: empty (give a size to extend it)", path);
		return -EINVAL;
	}
	return 0;
}

static void bs_file_probe_unmap(struct bs *bs, struct bs_file *f, const struct stat *st)
{
	if (bs->readonly) {
		bs->can_unmap = false;
		return;
	}
	if (f->is_block) {
		bs->can_unmap = bs_blk_can_discard(st->st_rdev);
		return;
	}
	/* Punching a hole past the end of the file changes nothing but says whether the
	 * filesystem can punch at all. */
	bs->can_unmap = bs_file_fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					  bs->size + (1 << 20), BS_FILE_ALIGN) == 0;
}

/* With O_DIRECT, a block-sized read says whether the device takes our block size. */
static int bs_file_probe_direct(struct bs *bs, struct bs_file *f)
{
	void *p;
	ssize_t r;
	int rc = 0;

	if (posix_memalign(&p, BS_FILE_ALIGN, bs->block_size))
		return -ENOMEM;
	r = pread(f->fd, p, bs->block_size, 0);
	if (r < 0) {
		rc = -errno;
		gw_err("bs", "%s: O_DIRECT read of %u bytes failed (%s): the device may need a "
		       "larger block_size, or set direct false", bs->conf.path, bs->block_size,
		       strerror(-rc));
	}
	free(p);
	return rc;
}

static void bs_file_stop_workers(struct bs_file *f)
{
	pthread_mutex_lock(&f->lock);
	f->stopping = true;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
	for (uint32_t i = 0; i < f->nthreads; i++)
		pthread_join(f->threads[i], NULL);
	f->nthreads = 0;
}

static void bs_file_free(struct bs_file *f)
{
	bs_ring_close(f);
	if (f->nthreads)
		bs_file_stop_workers(f);
	if (f->notify_ok)
		gw_notify_fini(&f->notify);
	if (f->fd >= 0)
		close(f->fd);
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->lock);
	free(f->threads);
	free(f->zeroes);
	free(f);
}

/*
 * The CPUs the process could run on when it started, before any loop pinned its thread
 * (gateway.loops > 1 pins every loop, the main thread's too, to one CPU). Worker threads start
 * with this mask: inheriting the opening loop's CPU would put a backstore's blocking I/O on
 * the one CPU its loop needs, and every backstore of that loop on the same CPU. Taken once in
 * a constructor, before main() runs, and only read after: the kernel keeps no per-process
 * mask to ask later (each thread has its own).
 */
static cpu_set_t bs_file_start_cpus;
static bool bs_file_start_cpus_ok;

__attribute__((constructor)) static void bs_file_start_cpus_take(void)
{
	bs_file_start_cpus_ok = sched_getaffinity(0, sizeof(bs_file_start_cpus),
						  &bs_file_start_cpus) == 0;
}

/*
 * Whether large reads of a memory file system go to the workers (bs_file_overlaps), given the
 * CPUs the process may run on: with gateway.loops > 1 the thread that opens a backstore is a
 * loop pinned to one CPU, but its workers run on every CPU of the process (above), so that one
 * CPU says nothing about the overlap. Asking the opening thread turned the overlap off for
 * every gateway with more than one loop, the default on a machine of several CPUs since
 * gateway.loops 0 (issue 28: the VM rig's 512 KiB reads fell from 1.33x tgtd to 0.78x).
 */
static bool bs_file_overlap_cpus(const cpu_set_t *process_cpus)
{
	return CPU_COUNT(process_cpus) > 1;
}

/* One worker, on the process's CPUs (above); where they cannot be had now (CPUs taken away
 * since, by hotplug or a cpuset), on the caller's. */
static int bs_file_start_worker(struct bs_file *f, pthread_t *t)
{
	pthread_attr_t attr;
	int r;

	if (bs_file_start_cpus_ok && pthread_attr_init(&attr) == 0) {
		r = pthread_attr_setaffinity_np(&attr, sizeof(bs_file_start_cpus),
						&bs_file_start_cpus);
		if (r == 0)
			r = pthread_create(t, &attr, bs_file_worker, f);
		pthread_attr_destroy(&attr);
		if (r != EINVAL)
			return -r;
	}
	return -pthread_create(t, NULL, bs_file_worker, f);
}

static int bs_file_start_workers(struct bs *bs, struct bs_file *f)
{
	sigset_t all, old;
	int rc = 0;

	if (f->nthreads)
		return 0;
	if (!f->threads)
		f->threads = calloc(bs->conf.threads, sizeof(*f->threads));
	if (!f->threads)
		return -ENOMEM;
	/* Workers take no signals: the loop thread's signalfd gets them. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (uint32_t i = 0; i < bs->conf.threads; i++) {
		rc = bs_file_start_worker(f, &f->threads[i]);
		if (rc < 0) {
			gw_err("bs", "%s: cannot start I/O thread: %s", bs->conf.path,
			       strerror(-rc));
			break;
		}
		f->nthreads++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc < 0 && f->nthreads)
		rc = 0;	/* fewer than asked still work */
	if (rc == 0)
		gw_dbg("bs", "%s: %u I/O threads started", bs->conf.path, f->nthreads);
	return rc;
}

/* A dm-multipath map underneath: show its paths from multipathd. Never fatal: the I/O path
 * does not depend on it. */
static void bs_file_watch_dm(struct bs *bs, struct bs_file *f, dev_t rdev)
{
	char name[128];
	int r = mp_dm_probe("/sys", rdev, name, sizeof(name));

	if (r <= 0) {
		if (r < 0)
			gw_dbg("bs", "%s: cannot tell whether it is a dm-multipath map: %s",
			       bs->conf.path, strerror(-r));
		return;
	}
	r = mp_dm_create(bs->loop, bs->conf.path, name, NULL, 5000, &f->dm);
	if (r < 0)
		gw_warn("bs", "%s: dm-multipath map %s: cannot watch it: %s", bs->conf.path, name,
			strerror(-r));
	else
		gw_info("bs", "%s: dm-multipath map %s: its state comes from multipathd",
			bs->conf.path, name);
}

/* Which ring: the log line at open and the state say it. */
static const char *bs_ring_flavour(const struct bs_file *f)
{
	return f->ring_single ? "single_issuer" : "task_work";
}

static json_t *bs_file_status(struct bs *bs)
{
	struct bs_file *f = bs->priv;
	json_t *o;

	if (!f)
		return NULL;
	o = f->dm ? mp_dm_status(f->dm) : NULL;
	if (!o)
		o = json_object();
	if (!o)
		return NULL;
	json_object_set_new(o, "io_engine",
			    json_string(f->engine == BS_IO_URING ? "uring" : "threads"));
	if (f->engine == BS_IO_URING)
		json_object_set_new(o, "ring", json_string(bs_ring_flavour(f)));
	json_object_set_new(o, "queue_depth", json_integer(f->qd));
	json_object_set_new(o, "in_flight", json_integer(f->ring_inflight));
	json_object_set_new(o, "peak_in_flight", json_integer(f->ring_peak));
	json_object_set_new(o, "waiting", json_integer(f->nwaiting));
	json_object_set_new(o, "threads", json_integer(f->nthreads));
	json_object_set_new(o, "ring_ios", json_integer((json_int_t)f->ring_ios));
	json_object_set_new(o, "thread_ios", json_integer((json_int_t)f->thread_ios));
	json_object_set_new(o, "inline_ios", json_integer((json_int_t)f->inline_ios));
	return o;
}

static int bs_file_open(struct bs *bs)
{
	struct bs_file *f;
	struct stat st;
	int rc;

	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->bs = bs;
	f->fd = -1;
	f->direct = bs->conf.direct;
	f->nowait_read = true;
	f->nowait_write = true;
	f->dsync_ok = true;
	f->qd = bs->conf.queue_depth ? bs->conf.queue_depth : BS_RING_QD_DEFAULT;
	f->engine = BS_IO_THREADS;
	gw_list_init(&f->waitq);
	gw_defer_init(&f->submit_defer, bs_ring_submit_fn);
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	gw_list_init(&f->queue);
	gw_list_init(&f->done);

	rc = bs_file_open_fd(bs, f);
	if (rc < 0)
		goto fail;
	if (fstat(f->fd, &st) < 0) {
		rc = -errno;
		gw_err("bs", "%s: stat: %s", bs->conf.path, strerror(-rc));
		goto fail;
	}
	if (S_ISBLK(st.st_mode)) {
		f->is_block = true;
	} else if (!S_ISREG(st.st_mode)) {
		gw_err("bs", "%s: neither a regular file nor a block device", bs->conf.path);
		rc = -EINVAL;
		goto fail;
	}
	if (bs->conf.type == BS_TYPE_BLOCK && !f->is_block) {
		gw_err("bs", "%s: not a block device (use type file)", bs->conf.path);
		rc = -ENOTBLK;
		goto fail;
	}
	rc = bs_file_size(bs, f, &st);
	if (rc < 0)
		goto fail;
	f->align = bs->block_size;
	if (f->direct) {
		rc = bs_file_probe_direct(bs, f);
		if (rc < 0)
			goto fail;
	}
	bs_file_probe_unmap(bs, f, &st);
	if (!f->is_block) {
		struct statfs sfs;

		f->memfs = fstatfs(f->fd, &sfs) == 0 &&
			   (sfs.f_type == TMPFS_MAGIC || sfs.f_type == RAMFS_MAGIC);
		f->overlap = f->memfs && bs_file_start_cpus_ok &&
			     bs_file_overlap_cpus(&bs_file_start_cpus);
	}
	if (posix_memalign(&f->zeroes, BS_FILE_ALIGN, BS_FILE_ZEROES)) {
		f->zeroes = NULL;
		rc = -ENOMEM;
		goto fail;
	}
	memset(f->zeroes, 0, BS_FILE_ZEROES);
	rc = gw_notify_init(&f->notify, bs->loop, bs_file_notify_fn);
	if (rc < 0) {
		gw_err("bs", "%s: cannot create the completion notifier: %s", bs->conf.path,
		       strerror(-rc));
		goto fail;
	}
	f->notify_ok = true;
	if (bs->conf.io_engine != BS_IO_THREADS) {
		rc = bs_ring_open(bs, f);
		if (rc == 0) {
			f->engine = BS_IO_URING;
		} else if (bs->conf.io_engine == BS_IO_URING) {
			gw_err("bs", "%s: io_engine uring: cannot set up io_uring: %s",
			       bs->conf.path, strerror(-rc));
			goto fail;
		} else {
			gw_warn("bs", "%s: cannot set up io_uring (%s): I/O engine threads",
				bs->conf.path, strerror(-rc));
			bs_ring_close(f);
		}
	}
	if (f->engine == BS_IO_THREADS) {
		rc = bs_file_start_workers(bs, f);
		if (rc < 0)
			goto fail;
	}
	if (f->is_block)
		bs_file_watch_dm(bs, f, st.st_rdev);
	bs->priv = f;
	if (f->engine == BS_IO_URING)
		gw_info("bs", "%s: %s, %llu bytes, block %u%s%s%s, I/O engine io_uring (%s), "
			"queue depth %u", bs->conf.path, f->is_block ? "block device" : "file",
			(unsigned long long)bs->size, bs->block_size,
			bs->can_unmap ? ", thin" : "", f->direct ? ", direct" : "",
			bs_file_memfs_note(f), bs_ring_flavour(f), f->qd);
	else
		gw_info("bs", "%s: %s, %llu bytes, block %u%s%s%s, I/O engine threads (%u)",
			bs->conf.path, f->is_block ? "block device" : "file",
			(unsigned long long)bs->size, bs->block_size,
			bs->can_unmap ? ", thin" : "", f->direct ? ", direct" : "",
			bs_file_memfs_note(f),
			f->nthreads);
	return 0;
fail:
	bs_file_free(f);
	return rc;
}

static void bs_file_close(struct bs *bs)
{
	struct bs_file *f = bs->priv;

	if (!f)
		return;
	mp_dm_destroy(f->dm);
	f->dm = NULL;
	bs_ring_drain(f);
	bs_file_stop_workers(f);
	/* I/O finished but not yet handed to the loop: the owner drained, so only stragglers
	 * of a shutdown; complete them so nobody waits forever. */
	bs_file_notify_fn(&f->notify);
	bs_file_free(f);
	bs->priv = NULL;
}

/*
 * Holes of a sparse file, from SEEK_DATA/SEEK_HOLE (tmpfs, ext4, xfs, btrfs answer from their
 * extent maps without reading data). Block devices have no holes to report.
 */
static int bs_file_map(struct bs *bs, uint64_t off, uint64_t len, uint64_t *extent)
{
	struct bs_file *f = bs->priv;
	off_t data, hole;

	if (f->is_block)
		return BS_MAPPED;
	data = lseek(f->fd, (off_t)off, SEEK_DATA);
	if (data < 0) {
		if (errno != ENXIO)
			return -errno;
		/* No data from off to the end of the file: all of it reads as zeroes. */
		*extent = len;
		return BS_DEALLOCATED;
	}
	if ((uint64_t)data > off) {
		*extent = (uint64_t)data - off < len ? (uint64_t)data - off : len;
		return BS_DEALLOCATED;
	}
	hole = lseek(f->fd, (off_t)off, SEEK_HOLE);
	if (hole < 0)
		return -errno;
	*extent = (uint64_t)hole - off < len ? (uint64_t)hole - off : len;
	return BS_MAPPED;
}

/* Online resize (bs_resize_prepare). */
static int bs_file_measure(struct bs *bs, uint64_t *size)
{
	struct bs_file *f = bs->priv;
	struct stat st;

	if (f->is_block)
		return ioctl(f->fd, BLKGETSIZE64, size) < 0 ? -errno : 0;
	if (fstat(f->fd, &st) < 0)
		return -errno;
	*size = (uint64_t)st.st_size;
	return 0;
}

static int bs_file_grow(struct bs *bs, uint64_t size, bool allocate)
{
	struct bs_file *f = bs->priv;
	uint64_t have;
	int r;

	r = bs_file_measure(bs, &have);
	if (r < 0)
		return r;
	if (f->is_block)
		return size > have ? -ENOSPC : 0;
	if (size <= have)
		return 0;
	if (allocate) {
		/* A thick LU keeps its promise: the new range is allocated, not a hole. */
		r = bs_file_fallocate(f, 0, have, size - have);
		if (r != -EOPNOTSUPP)
			return r;
	}
	return ftruncate(f->fd, (off_t)size) < 0 ? -errno : 0;
}

static int bs_file_cut(struct bs *bs, uint64_t size)
{
	struct bs_file *f = bs->priv;

	if (f->is_block)
		return 0;
	return ftruncate(f->fd, (off_t)size) < 0 ? -errno : 0;
}

const struct bs_ops bs_file_ops = {
	.name = "file",
	.open = bs_file_open,
	.close = bs_file_close,
	.submit = bs_file_submit,
	.map = bs_file_map,
	.status = bs_file_status,
	.measure = bs_file_measure,
	.grow = bs_file_grow,
	.cut = bs_file_cut,
};
