/* SPDX-License-Identifier: MIT */
/*
 * The desired configuration store: the gateway's JSON configuration (the same schema as
 * isergwd.json) plus a generation number that goes up by one at every committed change and
 * serves as the HTTP ETag. Behind an ops table so a cluster can keep it in etcd instead of the
 * default file; the file backend survives kill -9 at any instant (temp file, fsync, rename,
 * fsync of the folder).
 */
#ifndef API_STORE_H
#define API_STORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

struct api_store;

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

/* The file backend in dir (config.json). Loads what is there. 0 or -errno (a corrupt file is
 * -EINVAL, logged with its line and column: the agent refuses to start on it). */
int api_store_open_file(const char *dir, struct api_store **out);
void api_store_destroy(struct api_store *s);
/* Makes config (stolen, also on failure) the desired configuration as generation + 1. On
 * failure nothing changes. 0 or -errno. */
int api_store_commit(struct api_store *s, json_t *config);
/* api_store_commit without blocking the loop: > 0 when done(ctx, 0 or -errno) will run once
 * the backend answered (the store changes then, on success), 0 when committed already, -errno
 * when it failed already (done never runs then). config is stolen in every case. A commit
 * still under way when the store is destroyed is freed there and done never runs. */
int api_store_commit_async(struct api_store *s, json_t *config, void (*done)(void *ctx, int err),
			   void *ctx);
/* ops->refresh when there is one, else 0. */
int api_store_refresh(struct api_store *s);
/* The configuration an agent starts with when nothing was ever stored (new reference). */
json_t *api_store_empty_config(void);

/* Writes data to path atomically and durably: path.tmp, fsync, rename, fsync of the folder. */
int api_write_atomic(const char *path, const void *data, size_t len, unsigned int mode);

#endif
