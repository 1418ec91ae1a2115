// SPDX-License-Identifier: MIT
/*
 * A backstore opened, or closed, on the loop that owns its LU, and an LU added to a SCSI
 * device, with the lower layers' errors filed under the configuration's key paths. The bottom
 * of ctl's files: it calls none of the others.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_priv.h"
#include "gw_log.h"

/* Moves the errors of a lower layer, which names fields relative to its own object, into errs
 * under path ("targets[0].luns[1].backstore" + ".path"). */
void ctl_errs_prefix(struct gw_errlist *errs, const struct gw_errlist *sub, const char *path)
{
	char field[256];
	size_t i;

	for (i = 0; i < sub->n; i++) {
		if (sub->v[i].field && *sub->v[i].field)
			snprintf(field, sizeof(field), "%s.%s", path, sub->v[i].field);
		else
			snprintf(field, sizeof(field), "%s", path);
		gw_errlist_add(errs, field, "%s", sub->v[i].msg);
	}
}

struct ctl_bs_call {
	struct gw_loop *loop;
	const struct bs_conf *conf;
	struct bs **out;
	struct gw_errlist *errs;
};

static int ctl_bs_open_fn(void *arg)
{
	struct ctl_bs_call *c = arg;

	return bs_create(c->loop, c->conf, c->out, c->errs);
}

static int ctl_bs_close_fn(void *arg)
{
	bs_destroy(arg);
	return 0;
}

void ctl_bs_close(struct bs *bs)
{
	if (bs)
		gw_loop_call(bs->loop, ctl_bs_close_fn, bs);
}

int ctl_bs_open(struct gw_loop *loop, const struct bs_conf *conf, const char *path,
		struct gw_errlist *errs, struct bs **out)
{
	struct ctl_bs_call c = { .loop = loop, .conf = conf, .out = out };
	struct gw_errlist sub;
	int r;

	gw_errlist_init(&sub);
	c.errs = &sub;
	/* On the loop that will own it: its eventfds and ring join that loop's epoll set. */
	r = gw_loop_call(loop, ctl_bs_open_fn, &c);
	if (r) {
		if (sub.n)
			ctl_errs_prefix(errs, &sub, path);
		else
			gw_errlist_add(errs, path, "cannot open: %s", strerror(-r));
	}
	gw_errlist_fini(&sub);
	return r;
}

int ctl_lu_add(struct scsi_dev *dev, const struct scsi_lu_conf *conf, struct bs *bs,
	       const char *path, struct gw_errlist *errs)
{
	struct gw_errlist sub;
	int r;

	gw_errlist_init(&sub);
	r = scsi_dev_add_lu(dev, conf, bs, &sub);
	if (r) {
		if (sub.n)
			ctl_errs_prefix(errs, &sub, path);
		else
			gw_errlist_add(errs, path, "cannot add LUN %llu: %s",
				       (unsigned long long)conf->lun, strerror(-r));
	}
	gw_errlist_fini(&sub);
	return r;
}
