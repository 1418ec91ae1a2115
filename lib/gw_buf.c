// SPDX-License-Identifier: MIT
/*
 * Growing byte buffers and fixed-size object pools. Under AddressSanitizer, pooled objects are
 * poisoned while on the free list, so a use after gw_pool_put is caught as if it were free().
 */
#include <errno.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_buf.h"
#include "gw_log.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define GW_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define GW_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define GW_POISON(p, n) ((void)(p), (void)(n))
#define GW_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define GW_BUF_MIN 64

void gw_buf_init(struct gw_buf *b)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
}

void gw_buf_fini(struct gw_buf *b)
{
	free(b->data);
	gw_buf_init(b);
}

int gw_buf_reserve(struct gw_buf *b, size_t extra)
{
	size_t need, cap;
	uint8_t *p;

	if (extra > SIZE_MAX - b->len)
		return -ENOMEM;
	need = b->len + extra;
	if (need <= b->cap)
		return 0;
	cap = b->cap ? b->cap : GW_BUF_MIN;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	p = realloc(b->data, cap);
	if (!p)
		return -ENOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

int gw_buf_append(struct gw_buf *b, const void *p, size_t n)
{
	int r;

	if (n == 0)
		return 0;
	r = gw_buf_reserve(b, n);
	if (r)
		return r;
	memcpy(b->data + b->len, p, n);
	b->len += n;
	return 0;
}

int gw_buf_printf(struct gw_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n, r;

	/* Room for the NUL too, so the common short case formats once. */
	r = gw_buf_reserve(b, GW_BUF_MIN);
	if (r)
		return r;
	va_start(ap, fmt);
	n = vsnprintf((char *)b->data + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	if ((size_t)n >= b->cap - b->len) {
		r = gw_buf_reserve(b, (size_t)n + 1);
		if (r)
			return r;
		va_start(ap, fmt);
		n = vsnprintf((char *)b->data + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n < 0)
			return -EINVAL;
	}
	b->len += (size_t)n;
	return 0;
}

void gw_buf_consume(struct gw_buf *b, size_t n)
{
	if (n >= b->len) {
		b->len = 0;
		return;
	}
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
}

void gw_buf_reset(struct gw_buf *b)
{
	b->len = 0;
}

char *gw_buf_steal(struct gw_buf *b)
{
	char *s;

	if (gw_buf_reserve(b, 1))
		return NULL;
	b->data[b->len] = '\0';
	s = (char *)b->data;
	gw_buf_init(b);
	return s;
}

/* Pools. Free objects hold the free-list link in their first bytes; each chunk starts with a
 * header linking the chunks, padded so objects keep max_align_t alignment. */

#define GW_POOL_CHUNK_OBJS 64

struct gw_pool_chunk {
	struct gw_pool_chunk *next;
	size_t n;
	alignas(max_align_t) unsigned char objs[];
};

static size_t gw_pool_stride(const struct gw_pool *p)
{
	size_t a = alignof(max_align_t);
	size_t s = p->obj_size < sizeof(void *) ? sizeof(void *) : p->obj_size;

	return (s + a - 1) / a * a;
}

void gw_pool_init(struct gw_pool *p, size_t obj_size, size_t max)
{
	p->obj_size = obj_size;
	p->max = max;
	p->in_use = 0;
	p->allocated = 0;
	p->free_list = NULL;
	p->chunks = NULL;
}

void gw_pool_fini(struct gw_pool *p)
{
	struct gw_pool_chunk *c = p->chunks, *next;

	if (p->in_use)
		gw_warn("buf", "pool of %zu-byte objects freed with %zu still in use", p->obj_size,
			p->in_use);
	for (; c; c = next) {
		next = c->next;
		GW_UNPOISON(c->objs, c->n * gw_pool_stride(p));
		free(c);
	}
	p->chunks = NULL;
	p->free_list = NULL;
	p->allocated = 0;
	p->in_use = 0;
}

static int gw_pool_grow(struct gw_pool *p)
{
	size_t stride = gw_pool_stride(p), n = GW_POOL_CHUNK_OBJS, i;
	struct gw_pool_chunk *c;

	if (p->max && p->max - p->allocated < n)
		n = p->max - p->allocated;
	if (n == 0)
		return -ENOSPC;
	if (stride > (SIZE_MAX - sizeof(*c)) / n)
		return -ENOMEM;
	c = malloc(sizeof(*c) + n * stride);
	if (!c)
		return -ENOMEM;
	c->n = n;
	c->next = p->chunks;
	p->chunks = c;
	for (i = n; i-- > 0;) {
		void *obj = c->objs + i * stride;

		*(void **)obj = p->free_list;
		p->free_list = obj;
		GW_POISON(obj, stride);
	}
	p->allocated += n;
	return 0;
}

void *gw_pool_get(struct gw_pool *p)
{
	void *obj;

	if (p->max && p->in_use >= p->max)
		return NULL;
	if (!p->free_list && gw_pool_grow(p))
		return NULL;
	obj = p->free_list;
	GW_UNPOISON(obj, gw_pool_stride(p));
	p->free_list = *(void **)obj;
	p->in_use++;
	return obj;
}

void gw_pool_put(struct gw_pool *p, void *obj)
{
	if (!obj)
		return;
	*(void **)obj = p->free_list;
	p->free_list = obj;
	p->in_use--;
	GW_POISON(obj, gw_pool_stride(p));
}
