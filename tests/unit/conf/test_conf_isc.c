// SPDX-License-Identifier: MIT
/* The one table of transport names (conf_isc.c): every name a portal's configuration accepts
 * reaches a datamover, and state and metrics print the name the configuration used. */
#include <criterion/criterion.h>
#include <string.h>

#include "conf.h"
#include "dmv.h"

Test(isc_conf, every_configurable_transport_has_a_datamover)
{
	int n = 0;

	for (const struct gw_conf_enum *e = conf_transport_enums; e->name; e++, n++) {
		const struct dmv_transport *t = dmv_transport_find(e->name);

		cr_assert_not_null(t, "config accepts \"%s\" but no datamover has that name",
				   e->name);
		cr_expect_str_eq(t->name, e->name);
		cr_expect_str_eq(conf_transport_name(e->value), e->name, "id %d", e->value);
	}
	cr_expect_eq(n, ISC_PORTAL_NR);
}

Test(isc_conf, ids_and_names)
{
	cr_expect_str_eq(conf_transport_name(ISC_PORTAL_TCP), "tcp");
	cr_expect_str_eq(conf_transport_name(ISC_PORTAL_ISER), "iser");
	cr_expect_null(conf_transport_name(ISC_PORTAL_NR));
	cr_expect_null(conf_transport_name(-1));
}
