// SPDX-License-Identifier: MIT
/* Persistent reservations as they will live in etcd: the key, the state's checks (one
 * registration per I_T nexus, a registered holder, SPC's types) and the compare-and-swap. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api_cluster.h"
#include "api_etcd.h"

#define INI "iqn.2026-11.org.host:a,i,0x400001370000"

static json_t *state(const char *res_ini, int res_rel, int type)
{
	json_t *st = json_pack("{s:i, s:b, s:[{s:s, s:i, s:s}, {s:s, s:i, s:s}], s:n}",
			       "generation", 4, "aptpl", 0, "registrations",
			       "initiator", INI, "rel_id", 1, "key", "0x00000000000000ab",
			       "initiator", INI, "rel_id", 2, "key", "0x00000000000000ab",
			       "reservation");

	if (res_ini)
		json_object_set_new(st, "reservation", json_pack("{s:s, s:i, s:i}", "initiator",
								 res_ini, "rel_id", res_rel,
								 "type", type));
	return st;
}

Test(api_cluster_pr, the_key_names_the_lu)
{
	char *k = api_pr_key("/isergw/prod", "iqn.2026-11.org.isergw:t", 3);

	cr_assert_str_eq(k, "/isergw/prod/pr/iqn.2026-11.org.isergw:t/3");
	free(k);
}

Test(api_cluster_pr, one_initiator_through_two_gateways_is_two_nexuses)
{
	json_t *st = state(INI, 2, 1);
	const char *why;

	cr_assert_eq(api_pr_state_check(st, &why), 0, "%s", why ? why : "");
	json_decref(st);
}

Test(api_cluster_pr, bad_states_are_refused_with_the_field)
{
	json_t *st = state(INI, 3, 1);
	const char *why;

	cr_assert_eq(api_pr_state_check(st, &why), -EINVAL, "a holder through no registration");
	cr_assert(strstr(why, "reservation"), "%s", why);
	json_decref(st);
	st = state(INI, 1, 4);
	cr_assert_eq(api_pr_state_check(st, &why), -EINVAL, "type 4 is not an SPC-3 type");
	json_decref(st);
	st = state(NULL, 0, 0);
	json_array_append_new(json_object_get(st, "registrations"),
			      json_pack("{s:s, s:i, s:s}", "initiator", INI, "rel_id", 1, "key",
					"0x0000000000000001"));
	cr_assert_eq(api_pr_state_check(st, &why), -EINVAL);
	cr_assert(strstr(why, "one registration per I_T nexus"), "%s", why);
	json_decref(st);
	st = state(NULL, 0, 0);
	json_object_set_new(json_array_get(json_object_get(st, "registrations"), 0), "key",
			    json_integer(171));
	cr_assert_eq(api_pr_state_check(st, &why), -EINVAL, "keys travel as hex strings");
	json_decref(st);
}

Test(api_cluster_pr, the_commit_compares_the_revision_and_reads_back_on_loss)
{
	json_t *st = state(INI, 1, 3), *txn;
	char *k = api_pr_key("/c", "t", 0), *kb = api_b64_encode(k, strlen(k));
	json_t *cmp;

	txn = api_pr_cas_txn(k, st, 17);
	cmp = json_array_get(json_object_get(txn, "compare"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(cmp, "target")), "MOD");
	cr_assert_str_eq(json_string_value(json_object_get(cmp, "mod_revision")), "17");
	cr_assert_str_eq(json_string_value(json_object_get(cmp, "key")), kb);
	cr_assert_not_null(json_object_get(json_array_get(json_object_get(txn, "failure"), 0),
					   "request_range"));
	json_decref(txn);
	txn = api_pr_cas_txn(k, st, 0);
	cmp = json_array_get(json_object_get(txn, "compare"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(cmp, "target")), "CREATE",
			 "a first commit only creates");
	json_decref(txn);
	json_decref(st);
	free(k);
	free(kb);
}
