// SPDX-License-Identifier: MIT
/* Which verbs contexts the iSER datamover holds, and letting go of removed ones: see
 * dmv_iser_ctx.h for why. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "dmv_iser_ctx.h"
#include "gw_log.h"

struct iser_ctx {
	struct iser_ctx *next;
	struct ibv_context *verbs;
	unsigned holds;
	bool removed;
};

static struct iser_ctx *ctxs;
/* Devices of every loop's pools share the list (holds and drops only: never per I/O). */
static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;

static struct iser_ctx **ctx_find(struct ibv_context *verbs)
{
	struct iser_ctx **p;

	for (p = &ctxs; *p; p = &(*p)->next)
		if ((*p)->verbs == verbs)
			return p;
	return NULL;
}

static const char *ctx_name(struct ibv_context *verbs)
{
	return verbs->device ? ibv_get_device_name(verbs->device) : "?";
}

/* The kernel files behind verbs become /dev/null: the descriptors librdmacm will close later
 * stay valid, and the device's last user in this process is gone. */
static void ctx_let_go(struct ibv_context *verbs)
{
	int fds[2] = { verbs->cmd_fd, verbs->async_fd };
	int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	unsigned i;

	if (nul < 0) {
		gw_err("dmv", "iser: %s was removed, but /dev/null cannot be opened (%s): the "
		       "kernel's removal waits until isergwd exits", ctx_name(verbs), strerror(errno));
		return;
	}
	for (i = 0; i < 2; i++) {
		if (fds[i] < 0 || fds[i] == nul)
			continue;
		if (dup3(nul, fds[i], O_CLOEXEC) < 0)
			gw_err("dmv", "iser: releasing %s's descriptor %d: %s", ctx_name(verbs),
			       fds[i], strerror(errno));
	}
	close(nul);
	gw_info("dmv", "iser: %s was removed and nothing uses it any more: its files are "
		"closed, the kernel can finish removing it", ctx_name(verbs));
}

void dmv_iser_ctx_hold(struct ibv_context *verbs)
{
	struct iser_ctx **p;
	struct iser_ctx *c;

	pthread_mutex_lock(&ctx_lock);
	p = ctx_find(verbs);
	if (p) {
		(*p)->holds++;
		goto out;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		/* Untracked: a removal of this device then waits for isergwd to exit. */
		gw_warn("dmv", "iser: out of memory tracking %s", ctx_name(verbs));
		goto out;
	}
	c->verbs = verbs;
	c->holds = 1;
	c->next = ctxs;
	ctxs = c;
out:
	pthread_mutex_unlock(&ctx_lock);
}

static void ctx_unlink(struct iser_ctx **p)
{
	struct iser_ctx *c = *p;

	*p = c->next;
	free(c);
}

void dmv_iser_ctx_drop(struct ibv_context *verbs)
{
	struct iser_ctx **p;
	bool removed;

	pthread_mutex_lock(&ctx_lock);
	p = ctx_find(verbs);
	if (!p || --(*p)->holds > 0)
		goto out;
	removed = (*p)->removed;
	ctx_unlink(p);
	if (removed)
		ctx_let_go(verbs);
out:
	pthread_mutex_unlock(&ctx_lock);
}

void dmv_iser_ctx_removed(struct ibv_context *verbs)
{
	struct iser_ctx **p;

	if (!verbs)
		return;
	pthread_mutex_lock(&ctx_lock);
	p = ctx_find(verbs);
	if (p)
		(*p)->removed = true;
	else
		ctx_let_go(verbs);
	pthread_mutex_unlock(&ctx_lock);
}

unsigned dmv_iser_ctx_waiting(void)
{
	const struct iser_ctx *c;
	unsigned n = 0;

	pthread_mutex_lock(&ctx_lock);
	for (c = ctxs; c; c = c->next)
		n += c->removed;
	pthread_mutex_unlock(&ctx_lock);
	return n;
}
