/* SPDX-License-Identifier: MIT */
/*
 * Byte buffers that grow, and fixed-size object pools with a free list (PDUs, tasks) so the
 * data path does not call malloc per I/O once warm.
 */
#ifndef GW_BUF_H
#define GW_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

struct gw_buf {
	uint8_t *data;
	size_t len;	/* bytes in use, from data[0] */
	size_t cap;
};

void gw_buf_init(struct gw_buf *b);
void gw_buf_fini(struct gw_buf *b);
/* Makes room for `extra` more bytes beyond len. 0 or -ENOMEM. */
int gw_buf_reserve(struct gw_buf *b, size_t extra);
int gw_buf_append(struct gw_buf *b, const void *p, size_t n);
int gw_buf_printf(struct gw_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Drops the first n bytes (n > len drops all). */
void gw_buf_consume(struct gw_buf *b, size_t n);
void gw_buf_reset(struct gw_buf *b);
/* Hands the memory to the caller (NUL-terminated) and leaves b empty. */
char *gw_buf_steal(struct gw_buf *b);

/*
 * Pool of objects of one size. Objects come from chunks that are never returned to malloc
 * until gw_pool_fini; `max` caps the objects handed out (0: no cap). get returns NULL at the cap
 * or on ENOMEM. Objects are not zeroed.
 */
struct gw_pool {
	size_t obj_size;
	size_t max;
	size_t in_use;
	size_t allocated;
	void *free_list;
	void *chunks;
};

void gw_pool_init(struct gw_pool *p, size_t obj_size, size_t max);
void gw_pool_fini(struct gw_pool *p);
void *gw_pool_get(struct gw_pool *p);
void gw_pool_put(struct gw_pool *p, void *obj);

/* The value of one hex digit (either case), -1 for anything else: CHAP values and
 * percent-escapes decode with it. */
static inline int gw_hex_val(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

#endif
