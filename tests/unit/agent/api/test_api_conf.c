// SPDX-License-Identifier: MIT
/* The agent's configuration helpers, with the gateway's parser doing the validation. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "../../../../agent/api/api_conf.c"
#include "gw_log.h"

static json_t *cfg(void)
{
	json_error_t e;
	json_t *j = json_loads(
	    "{\"portals\": [{\"name\": \"tcp0\", \"address\": \"127.0.0.1\", \"port\": 3260}],"
	    " \"discovery\": {\"auth\": \"chap\", \"chap\": {\"user\": \"d\","
	    "   \"secret\": \"discsecret123\"}},"
	    " \"targets\": [{\"name\": \"iqn.2026-11.org.isergw:a\", \"portals\": [\"tcp0\"],"
	    "   \"chap\": {\"user\": \"t\", \"secret\": \"targetsecret1\"},"
	    "   \"initiators\": [{\"name\": \"iqn.1994-05.com.example:h1\","
	    "     \"chap\": {\"user\": \"h1\", \"secret\": \"hostsecret123\","
	    "       \"mutual_user\": \"gw\", \"mutual_secret\": \"mutualsecret1\"}}],"
	    "   \"luns\": [{\"lun\": 0, \"backstore\": {\"type\": \"ram\", \"size\": \"1M\"}}]}]}",
	    0, &e);

	cr_assert_not_null(j, "%s", e.text);
	return j;
}

Test(api_conf, a_good_configuration_validates)
{
	struct gw_errlist errs;
	json_t *c = cfg();

	gw_errlist_init(&errs);
	cr_assert_eq(api_conf_validate(c, &errs), 0, "%s", errs.n ? errs.v[0].msg : "");
	gw_errlist_fini(&errs);
	json_decref(c);
}

Test(api_conf, validation_reports_every_error_at_once)
{
	struct gw_errlist errs;
	json_t *c = cfg(), *t = json_array_get(json_object_get(c, "targets"), 0);
	size_t i;
	bool iqn = false, size = false, unknown = false;

	gw_log_set_level(GW_LOG_ERR - 1);
	json_object_set_new(t, "name", json_string("not-an-iqn"));
	json_object_set_new(json_object_get(json_array_get(json_object_get(t, "luns"), 0),
					    "backstore"), "size", json_string("12Q"));
	json_object_set_new(c, "surprise", json_true());
	gw_errlist_init(&errs);
	cr_assert_eq(api_conf_validate(c, &errs), -EINVAL);
	for (i = 0; i < errs.n; i++) {
		iqn |= !strcmp(errs.v[i].field, "targets[0].name");
		size |= !strcmp(errs.v[i].field, "targets[0].luns[0].backstore.size");
		unknown |= !strcmp(errs.v[i].field, "surprise");
	}
	cr_assert(iqn && size && unknown, "got %zu errors", errs.n);
	gw_errlist_fini(&errs);
	json_decref(c);
}

Test(api_conf, masking_hides_every_secret_and_unmasking_restores_them)
{
	json_t *c = cfg(), *m = api_conf_mask(c);
	char *text = json_dumps(m, 0);

	cr_assert_null(strstr(text, "secret1"));
	cr_assert_null(strstr(text, "secret123"));
	cr_assert_not_null(strstr(text, "\"h1\""), "user names stay visible");
	free(text);
	/* Writing the masked export back changes no secret. */
	api_conf_unmask(m, c);
	cr_assert(json_equal(m, c));
	json_decref(m);
	json_decref(c);
}

Test(api_conf, a_mask_without_a_stored_secret_stays_and_fails_validation)
{
	json_t *c = cfg(), *empty = json_pack("{s:[]}", "portals");
	struct gw_errlist errs;
	json_t *m = api_conf_mask(c);

	gw_log_set_level(GW_LOG_ERR - 1);
	api_conf_unmask(m, empty);
	gw_errlist_init(&errs);
	cr_assert_eq(api_conf_validate(m, &errs), -EINVAL);
	gw_errlist_fini(&errs);
	json_decref(m);
	json_decref(c);
	json_decref(empty);
}

Test(api_conf, lun_numbers_parse_strictly)
{
	uint64_t l;

	cr_assert_eq(api_parse_lun("0", &l), 0);
	cr_assert_eq(l, 0);
	cr_assert_eq(api_parse_lun("16383", &l), 0);
	cr_assert_eq(api_parse_lun("16384", &l), -EINVAL);
	cr_assert_eq(api_parse_lun("-1", &l), -EINVAL);
	cr_assert_eq(api_parse_lun("1x", &l), -EINVAL);
	cr_assert_eq(api_parse_lun("", &l), -EINVAL);
}
