/* SPDX-License-Identifier: MIT */
/*
 * The store's etcd side (docs/CLUSTER.md): a small client of etcd v3's JSON gateway (libcurl,
 * bounded timeouts, endpoints tried in turn) and the etcd backend of the desired configuration
 * store (compare-and-swap on the key's revision, so two agents never overwrite each other's
 * change). Membership is api_cluster.h's, over this client.
 *
 * The etcd calls are synchronous with short timeouts (connect 500 ms, whole call 1.5 s per
 * endpoint): the loop can stall that long when etcd is away, never longer.
 */
#ifndef API_ETCD_H
#define API_ETCD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api_store.h"

struct api_agent;

/* ---- pure helpers (unit-tested) -------------------------------------------------------- */

/* Standard base64 with padding; malloc'ed, NUL-terminated. */
char *api_b64_encode(const void *data, size_t len);
/* Decodes standard base64 (padding optional); malloc'ed with a NUL after *len bytes. NULL on
 * a character outside the alphabet. */
char *api_b64_decode(const char *s, size_t *len);
/* The range_end that selects every key starting with prefix (last byte + 1). */
char *api_etcd_prefix_end(const char *prefix);
/* {"key": b64(key)[, "range_end": b64(prefix_end(key))]} */
json_t *api_etcd_range_req(const char *key, bool prefix);
/* A put inside a txn or alone: {"key", "value"[, "lease"]}. */
json_t *api_etcd_put_req(const char *key, const char *value, int64_t lease);
/* An int64 field of an etcd JSON answer (the gateway writes them as strings); def if absent. */
int64_t api_etcd_int(const json_t *o, const char *key, int64_t def);
/* kvs[i] of a range answer: its key and value decoded (malloc'ed) and its mod_revision. */
int api_etcd_kv(const json_t *resp, size_t i, char **key, char **value, int64_t *mod_rev);

/* The owner of (target, lun) among live member ids: pref when it is live, otherwise the
 * highest of a hash of (member, target, lun) (rendezvous hashing: an owner only changes when
 * it leaves or a member that outranks it joins). NULL when no member is live. */
const char *api_cluster_owner(const char *target, uint64_t lun, const char *pref,
			      const char *const *live, size_t nlive);
/*
 * The configuration this gateway runs for desired (new reference): the cluster's port groups
 * ("cluster": {"groups"}: every registered member, unavailable when not live), every target's
 * tpgt set to self_group, every LU's owner resolved and its alua_group set to the owner's group,
 * and the portals replaced by local_portals when that is an array (portals are per gateway).
 * groups: {member id: group id}; live: {member id: anything}.
 */
json_t *api_cluster_effective(const json_t *desired, const json_t *groups, const json_t *live,
			      uint32_t self_group, const json_t *local_portals);

/* ---- the client and the store ---------------------------------------------------------- */

struct api_etcd;

/* endpoints: "http://127.0.0.1:2379[,http://...]". 0, -EINVAL or -ENOMEM. */
int api_etcd_create(const char *endpoints, struct api_etcd **out);
void api_etcd_destroy(struct api_etcd *e);
/* POSTs req (stolen) to path ("/v3/kv/range") and parses the answer into *resp (new ref).
 * 0; -EHOSTUNREACH / -ETIMEDOUT when no endpoint answered; -EPROTO on an error answer. */
int api_etcd_call(struct api_etcd *e, const char *path, json_t *req, json_t **resp);

/* The etcd backend: PREFIX/config holds {"generation": N, "config": {...}}; a copy of the last
 * value seen is kept in cache_path so an agent that starts while etcd is away serves it. The
 * store takes e over. Saving is a txn that only succeeds if the key has not changed since it
 * was read: -ESTALE otherwise; -EHOSTUNREACH / -ETIMEDOUT when etcd is away. */
int api_store_open_etcd(struct api_etcd *e, const char *prefix, const char *cache_path,
			struct api_store **out);
struct api_etcd *api_store_etcd_client(struct api_store *s);

#endif
