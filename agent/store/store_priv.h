/* SPDX-License-Identifier: MIT */
/*
 * Inside agent/store only: the store behind its handle. The backends (api_store.c's file,
 * api_store_etcd.c's etcd) fill an ops table; the configuration and its generation change only
 * here (a commit in api_store.c, or api_store_etcd_apply from the cluster's watch), and the
 * rest of the agent reads them through api_store_config and api_store_generation (api_store.h).
 */
#ifndef STORE_PRIV_H
#define STORE_PRIV_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "api_store.h"

struct api_store_ops {
	const char *name;
	/* *config (new reference) and *gen from the backend; -ENOENT when it has never been
	 * written. */
	int (*load)(struct api_store *s, json_t **config, uint64_t *gen);
	/* Persists config as generation gen, durably, before returning 0. */
	int (*save)(struct api_store *s, const json_t *config, uint64_t gen);
	void (*destroy)(struct api_store *s);
	/* Backends other agents write (etcd): re-reads the configuration; 1 when it changed
	 * (config and generation updated), 0 unchanged, -errno when the backend is away. NULL:
	 * only this agent writes it. */
	int (*refresh)(struct api_store *s);
	/* Backends reached over the network (etcd): save without blocking; done(ctx, 0 or
	 * -errno) runs once from the loop when this returned 0, or from destroy with
	 * -ECANCELED (the store is closing then). NULL: save is quick. */
	int (*save_async)(struct api_store *s, const json_t *config, uint64_t gen,
			  void (*done)(void *ctx, int err), void *ctx);
};

struct api_store {
	const struct api_store_ops *ops;
	json_t *config;			/* current desired configuration (owned) */
	uint64_t generation;		/* 0: never written (config is the empty one) */
	bool closing;			/* api_store_destroy is under way */
	void *priv;
};

#endif
