// SPDX-License-Identifier: MIT
/* The one table of transport names: every name a portal's configuration accepts reaches a
 * datamover, and state/metrics print the name the configuration used. */
#include <criterion/criterion.h>
#include <string.h>

#include "dmv.h"
#include "isc.h"

Test(dmv_name, every_configurable_transport_has_a_datamover)
{
	int n = 0;

	for (const struct gw_conf_enum *e = dmv_transport_enums; e->name; e++, n++) {
		const struct dmv_transport *t = dmv_transport_find(e->name);

		cr_assert_not_null(t, "config accepts \"%s\" but no datamover has that name",
				   e->name);
		cr_expect_str_eq(t->name, e->name);
		cr_expect_str_eq(dmv_transport_name(e->value), e->name, "id %d", e->value);
	}
	cr_expect_eq(n, DMV_TRANSPORT_NR);
}

Test(dmv_name, ids_and_names)
{
	cr_expect_str_eq(dmv_transport_name(DMV_TRANSPORT_TCP), "tcp");
	cr_expect_str_eq(dmv_transport_name(DMV_TRANSPORT_ISER), "iser");
	cr_expect_null(dmv_transport_name(DMV_TRANSPORT_NR));
	cr_expect_null(dmv_transport_name(-1));
}

Test(dmv_name, portal_config_ids_match)
{
	/* A portal's configuration stores the iSCSI layer's id; printing it takes this table. */
	cr_expect_eq((int)ISC_PORTAL_TCP, DMV_TRANSPORT_TCP);
	cr_expect_eq((int)ISC_PORTAL_ISER, DMV_TRANSPORT_ISER);
}
