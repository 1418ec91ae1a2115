/* SPDX-License-Identifier: MIT */
/*
 * The desired configuration store: the gateway's JSON configuration (the same schema as
 * isergwd.json) plus a generation number that goes up by one at every committed change and
 * serves as the HTTP ETag. Behind an ops table so a cluster can keep it in etcd instead of the
 * default file; the file backend survives kill -9 at any instant (temp file, fsync, rename,
 * fsync of the folder). The rest of the agent holds a handle and reads through the functions
 * below; the struct and the ops table are agent/store's (store_priv.h).
 */
#ifndef API_STORE_H
#define API_STORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* A handle: its fields and backends are agent/store's own (store_priv.h). */
struct api_store;

/* ---- what the rest of the agent reads ------------------------------------------------- */

/* The desired configuration, read-only and borrowed: valid until the next commit, or until a
 * refresh or the cluster's watch (api_store_etcd_apply) brings a newer one. To change it or
 * keep it longer, take a copy (api_store_copy). */
const json_t *api_store_config(const struct api_store *s);
/* Its generation (the ETag): 0 when nothing was ever stored. */
uint64_t api_store_generation(const struct api_store *s);
/* A private deep copy of the desired configuration to change and commit (new reference);
 * NULL when out of memory. */
json_t *api_store_copy(const struct api_store *s);
/* The backend's name, for messages and GET /health: "file" or "etcd". */
const char *api_store_name(const struct api_store *s);

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
