// SPDX-License-Identifier: MIT
/* Cached serialized answers (api_rcache.h). */
#include <stdlib.h>
#include <string.h>

#include "api_rcache.h"

char *api_rcache_get(struct api_rcache *c, const uint64_t key[API_RCACHE_KEYS],
		     uint64_t max_age_ms, uint64_t now_ms, size_t *len)
{
	char *t;

	if (!c->text || memcmp(c->key, key, sizeof(c->key)) ||
	    (max_age_ms && now_ms - c->built_ms >= max_age_ms))
		return NULL;
	t = malloc(c->len + 1);
	if (!t)
		return NULL;
	memcpy(t, c->text, c->len + 1);
	*len = c->len;
	c->hits++;
	return t;
}

void api_rcache_put(struct api_rcache *c, const uint64_t key[API_RCACHE_KEYS], const char *text,
		    size_t len, uint64_t now_ms)
{
	char *t = malloc(len + 1);

	if (!t)
		return;
	memcpy(t, text, len);
	t[len] = 0;
	free(c->text);
	c->text = t;
	c->len = len;
	memcpy(c->key, key, sizeof(c->key));
	c->built_ms = now_ms;
	c->builds++;
}

void api_rcache_fini(struct api_rcache *c)
{
	free(c->text);
	memset(c, 0, sizeof(*c));
}
