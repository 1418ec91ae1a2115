/* SPDX-License-Identifier: MIT */
/*
 * Serialized answers of the hottest GETs, kept until what they were built from changes: a
 * scrape storm or a dashboard polling the target list then costs a memcpy, not a rebuild.
 * The key is a few numbers the builder names (a generation, the time of the last gateway
 * state); an optional maximum age bounds what the key does not cover.
 */
#ifndef API_RCACHE_H
#define API_RCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define API_RCACHE_KEYS 5

struct api_rcache {
	char *text;			/* NULL: empty */
	size_t len;
	uint64_t key[API_RCACHE_KEYS];
	uint64_t built_ms;
	uint64_t hits, builds;
};

/* A malloc'ed copy of the cached text when key matches and it is younger than max_age_ms
 * (0: no age limit); NULL otherwise (or on ENOMEM). */
char *api_rcache_get(struct api_rcache *c, const uint64_t key[API_RCACHE_KEYS],
		     uint64_t max_age_ms, uint64_t now_ms, size_t *len);
/* Keeps a copy of text under key. */
void api_rcache_put(struct api_rcache *c, const uint64_t key[API_RCACHE_KEYS], const char *text,
		    size_t len, uint64_t now_ms);
void api_rcache_fini(struct api_rcache *c);

#endif
