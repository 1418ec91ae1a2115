// SPDX-License-Identifier: MIT
/*
 * Transport names, by id. Kept apart from dmv.c so that whatever reads or prints a portal's
 * configuration (the config tables, the agent's metrics) needs this table and not the
 * datamovers themselves.
 */
#include <stddef.h>

#include "dmv.h"

const struct gw_conf_enum dmv_transport_enums[] = {
	{ "tcp", DMV_TRANSPORT_TCP },
	{ "iser", DMV_TRANSPORT_ISER },
	{ NULL, 0 },
};

const char *dmv_transport_name(int id)
{
	for (const struct gw_conf_enum *e = dmv_transport_enums; e->name; e++)
		if (e->value == id)
			return e->name;
	return NULL;
}
