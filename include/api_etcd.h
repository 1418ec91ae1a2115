/* SPDX-License-Identifier: MIT */
/*
 * The store's etcd side (docs/CLUSTER.md): a client of etcd v3's JSON gateway (libcurl's
 * multi interface in the agent's loop: calls and watches never block it; http:// or https://
 * with a CA and a client certificate; several endpoints, the next tried when one fails) and the
 * etcd backend of the desired configuration store (compare-and-swap on the key's revision, so
 * two agents never overwrite each other's change). Membership is api_cluster.h's, over this
 * client.
 */
#ifndef API_ETCD_H
#define API_ETCD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api_store.h"

struct api_agent;
struct gw_loop;

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

/*
 * What an endpoint answered (pure): 0 with *resp (new reference) for an etcd answer; -EPROTO
 * when etcd refused the call (why says what it said); -EBADMSG when the answer is not etcd's
 * (a web server's 404 page, an etcd v2): why says so.
 */
int api_etcd_answer(long http, const char *body, size_t len, json_t **resp, char *why,
		    size_t whylen);
/* A watch's stream (pure): 1 with the next message (*msg, new reference) and *used bytes
 * taken; 0 when no whole message is there yet (*used: blanks to skip); -EPROTO on garbage. */
int api_etcd_stream_next(const char *buf, size_t len, json_t **msg, size_t *used);

struct api_etcd_conf {
	const char *endpoints;		/* "https://10.0.0.1:2379[,https://...]" */
	const char *ca_file;		/* PEM: the CA that signed etcd's certificate */
	const char *cert_file;		/* PEM: this agent's client certificate and key */
	const char *key_file;
};

/* 0, -EINVAL (a bad endpoint, a certificate without its key) or -ENOMEM. loop may be NULL
 * for a client that only makes synchronous calls. */
int api_etcd_create(const struct api_etcd_conf *conf, struct gw_loop *loop,
		    struct api_etcd **out);
/* Every call under way ends without its callback. */
void api_etcd_destroy(struct api_etcd *e);
/* POSTs req (stolen) to path ("/v3/kv/range") and parses the answer into *resp (new ref),
 * blocking: start-up and shutdown only. 0; -EHOSTUNREACH / -ETIMEDOUT when no endpoint
 * answered as etcd; -EPROTO when etcd refused it. */
int api_etcd_call(struct api_etcd *e, const char *path, json_t *req, json_t **resp);

/* err as api_etcd_call's; resp is borrowed (NULL on an error). */
typedef void (*api_etcd_done_fn)(void *ctx, int err, json_t *resp);
typedef void (*api_etcd_msg_fn)(void *ctx, json_t *msg);
struct api_etcd_op;

/* The same call without blocking: done runs once from the loop when it returned 0, never
 * when it returned < 0 (-ENOMEM). */
int api_etcd_post(struct api_etcd *e, const char *path, json_t *req, api_etcd_done_fn done,
		  void *ctx);
/* The same within timeout_ms in all (every endpoint tried shares it; 0: as api_etcd_post,
 * 2 s per endpoint, never more than that per endpoint): -ETIMEDOUT when it is spent. */
int api_etcd_post_within(struct api_etcd *e, const char *path, json_t *req,
			 uint64_t timeout_ms, api_etcd_done_fn done, void *ctx);
/* Watches every key under prefix from start_rev: each message of the stream goes to msg
 * ({"result": {"header", "events": [...]}}); end runs once when the watch is over (the
 * connection closed, no endpoint answered, etcd refused it). */
int api_etcd_watch(struct api_etcd *e, const char *prefix, int64_t start_rev,
		   api_etcd_msg_fn msg, api_etcd_done_fn end, void *ctx, struct api_etcd_op **op);
/* Ends a call or a watch without its callback. */
void api_etcd_cancel(struct api_etcd_op *op);
/* Ends every call whose ctx is ctx, without their callbacks. */
void api_etcd_cancel_ctx(struct api_etcd *e, void *ctx);
/* The last call reached no etcd at all. */
bool api_etcd_down(const struct api_etcd *e);
/* {"endpoint": the one in use, "tls", "endpoints": [{"url", "state", "error"}]} */
json_t *api_etcd_status(const struct api_etcd *e);

/* The etcd backend: PREFIX/config holds {"generation": N, "config": {...}}; a copy of the last
 * value seen is kept in cache_path so an agent that starts while etcd is away serves it. The
 * store takes e over. Saving is a txn that only succeeds if the key has not changed since it
 * was read: -ESTALE otherwise; -EHOSTUNREACH / -ETIMEDOUT when etcd is away. */
int api_store_open_etcd(struct api_etcd *e, const char *prefix, const char *cache_path,
			struct api_store **out);
struct api_etcd *api_store_etcd_client(struct api_store *s);
/* The watch saw PREFIX/config change to value (NULL: deleted) at mod_rev: 1 when the
 * configuration changed, 0 when not, -EINVAL on a value that is not one (logged). */
int api_store_etcd_apply(struct api_store *s, const char *value, int64_t mod_rev);
/* The prefix belongs to another cluster: every change is refused from now on. */
void api_store_etcd_refuse(struct api_store *s);

#endif
