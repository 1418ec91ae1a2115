// SPDX-License-Identifier: MIT
/*
 * The transport registry, on top of the datamover's files: it names each transport's table
 * (dmv_tcp.c, dmv_iser.c) and maps a configured name to it. Nothing below calls back here: the
 * transports implement struct dmv_transport and share the bookkeeping of dmv_core.c.
 *
 * The stack: dmv.c (this registry) -> dmv_tcp.c, dmv_iser.c (with its ctx, pool and wire
 * files) -> dmv_core.c (what every transport shares).
 */
#include <errno.h>
#include <string.h>

#include "dmv.h"
#include "gw_list.h"

static const struct dmv_transport *const dmv_transports[] = {
	&dmv_tcp_transport,
	&dmv_iser_transport,
};

const struct dmv_transport *dmv_transport_find(const char *name)
{
	size_t i;

	for (i = 0; i < GW_ARRAY_SIZE(dmv_transports); i++)
		if (!strcmp(dmv_transports[i]->name, name))
			return dmv_transports[i];
	return NULL;
}

int dmv_listen(const char *transport, struct gw_loop *loop, const struct dmv_portal_conf *conf,
	       struct pdu_pool *pool, struct dmv_portal **out)
{
	const struct dmv_transport *tp = dmv_transport_find(transport);

	/* Not logged here: the caller decides whether a missing transport is fatal. */
	if (!tp)
		return -EPROTONOSUPPORT;
	return tp->listen(loop, conf, pool, out);
}
