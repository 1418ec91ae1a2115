/* SPDX-License-Identifier: MIT */
/*
 * Intrusive doubly linked lists and container_of: every queue in isergw embeds its node in the
 * object it links, so linking never allocates.
 */
#ifndef GW_LIST_H
#define GW_LIST_H

#include <stdbool.h>
#include <stddef.h>

#define gw_container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

#define GW_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

struct gw_list {
	struct gw_list *next, *prev;
};

#define GW_LIST_HEAD_INIT(name) { &(name), &(name) }

static inline void gw_list_init(struct gw_list *h)
{
	h->next = h;
	h->prev = h;
}

static inline bool gw_list_empty(const struct gw_list *h)
{
	return h->next == h;
}

static inline void gw_list__insert(struct gw_list *n, struct gw_list *prev, struct gw_list *next)
{
	next->prev = n;
	n->next = next;
	n->prev = prev;
	prev->next = n;
}

static inline void gw_list_add(struct gw_list *h, struct gw_list *n)
{
	gw_list__insert(n, h, h->next);
}

static inline void gw_list_add_tail(struct gw_list *h, struct gw_list *n)
{
	gw_list__insert(n, h->prev, h);
}

/* Unlinks n and leaves it pointing at itself, so a second del or an empty test is safe. */
static inline void gw_list_del(struct gw_list *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	gw_list_init(n);
}

#define gw_list_entry(ptr, type, member) gw_container_of(ptr, type, member)

#define gw_list_first_entry(head, type, member) gw_list_entry((head)->next, type, member)

#define gw_list_for_each_entry(pos, head, member)                                   \
	for (pos = gw_list_entry((head)->next, __typeof__(*pos), member);           \
	     &pos->member != (head);                                                \
	     pos = gw_list_entry(pos->member.next, __typeof__(*pos), member))

#define gw_list_for_each_entry_safe(pos, tmp, head, member)                         \
	for (pos = gw_list_entry((head)->next, __typeof__(*pos), member),           \
	    tmp = gw_list_entry(pos->member.next, __typeof__(*pos), member);        \
	     &pos->member != (head);                                                \
	     pos = tmp, tmp = gw_list_entry(tmp->member.next, __typeof__(*tmp), member))

#endif
