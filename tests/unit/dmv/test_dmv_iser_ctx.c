// SPDX-License-Identifier: MIT
/* Letting go of a removed RDMA device's context (dmv_iser_ctx.c). A context here is a fake
 * ibv_context whose two kernel files are pipes: letting go must swap them for /dev/null in
 * place (the descriptor numbers stay valid for librdmacm to close later) so that the pipe's
 * other end sees its writer gone, exactly when nothing of the gateway holds the context any
 * more and rdma_cm has reported it removed. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "../../../gateway/dmv/dmv_iser_ctx.h"

struct fake {
	struct ibv_device dev;
	struct ibv_context ctx;
	int peer[2];			/* read ends of the pipes behind cmd_fd and async_fd */
};

static void fake_init(struct fake *f, const char *name)
{
	int p[2], q[2];

	memset(f, 0, sizeof(*f));
	snprintf(f->dev.name, sizeof(f->dev.name), "%s", name);
	f->ctx.device = &f->dev;
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	cr_assert_eq(pipe2(q, O_CLOEXEC), 0);
	f->ctx.cmd_fd = p[1];
	f->ctx.async_fd = q[1];
	f->peer[0] = p[0];
	f->peer[1] = q[0];
	cr_assert_eq(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
	cr_assert_eq(fcntl(q[0], F_SETFL, O_NONBLOCK), 0);
}

/* Whether fd is /dev/null now (the character device 1:3). */
static bool is_dev_null(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && major(st.st_rdev) == 1 &&
	       minor(st.st_rdev) == 3;
}

/* The pipe's writer is gone: read sees end of file rather than "would block". */
static bool writer_gone(int rd)
{
	char c;

	return read(rd, &c, 1) == 0;
}

static bool let_go(const struct fake *f)
{
	return is_dev_null(f->ctx.cmd_fd) && is_dev_null(f->ctx.async_fd) &&
	       writer_gone(f->peer[0]) && writer_gone(f->peer[1]);
}

static bool untouched(const struct fake *f)
{
	return !is_dev_null(f->ctx.cmd_fd) && !is_dev_null(f->ctx.async_fd) &&
	       !writer_gone(f->peer[0]) && !writer_gone(f->peer[1]);
}

static void fake_fini(struct fake *f)
{
	close(f->ctx.cmd_fd);
	close(f->ctx.async_fd);
	close(f->peer[0]);
	close(f->peer[1]);
}

Test(dmv_iser_ctx, a_removed_context_is_let_go_when_its_last_holder_drops_it)
{
	struct fake f;
	int cmd;

	fake_init(&f, "rxe0");
	cmd = f.ctx.cmd_fd;
	dmv_iser_ctx_hold(&f.ctx);		/* the portal's device pool */
	dmv_iser_ctx_hold(&f.ctx);		/* a listener bound on it */
	dmv_iser_ctx_removed(&f.ctx);
	cr_assert_eq(dmv_iser_ctx_waiting(), 1);
	cr_assert(untouched(&f), "let go while still held");
	dmv_iser_ctx_drop(&f.ctx);
	cr_assert(untouched(&f), "let go while one holder is left");
	dmv_iser_ctx_drop(&f.ctx);
	cr_assert(let_go(&f), "the device's files are still open after its last user went");
	cr_assert_eq(f.ctx.cmd_fd, cmd, "the descriptor number must stay what librdmacm knows");
	cr_assert(fcntl(f.ctx.cmd_fd, F_GETFD) & FD_CLOEXEC, "close-on-exec lost");
	cr_assert_eq(dmv_iser_ctx_waiting(), 0);
	fake_fini(&f);
}

Test(dmv_iser_ctx, a_context_that_was_not_removed_stays_open)
{
	struct fake f;

	fake_init(&f, "rxe0");
	dmv_iser_ctx_hold(&f.ctx);
	dmv_iser_ctx_drop(&f.ctx);
	cr_assert(untouched(&f), "a device that is still there must stay usable by librdmacm");
	/* A drop without a hold (nothing tracked) changes nothing either. */
	dmv_iser_ctx_drop(&f.ctx);
	cr_assert(untouched(&f));
	fake_fini(&f);
}

Test(dmv_iser_ctx, a_removal_with_no_holder_lets_go_at_once)
{
	struct fake f;

	fake_init(&f, "rxe1");
	dmv_iser_ctx_removed(&f.ctx);
	cr_assert(let_go(&f));
	cr_assert_eq(dmv_iser_ctx_waiting(), 0);
	dmv_iser_ctx_removed(NULL);		/* an id without a device: nothing to do */
	fake_fini(&f);
}

Test(dmv_iser_ctx, only_the_removed_device_is_let_go)
{
	struct fake a, b;

	fake_init(&a, "rxe0");
	fake_init(&b, "rxe1");
	dmv_iser_ctx_hold(&a.ctx);
	dmv_iser_ctx_hold(&b.ctx);
	dmv_iser_ctx_removed(&b.ctx);
	dmv_iser_ctx_drop(&a.ctx);
	dmv_iser_ctx_drop(&b.ctx);
	cr_assert(untouched(&a), "the device that stays was let go");
	cr_assert(let_go(&b));
	fake_fini(&a);
	fake_fini(&b);
}
