// SPDX-License-Identifier: MIT
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "api_err.h"

Test(api_err, every_error_has_a_distinct_code_and_a_documented_status)
{
	static const unsigned int allowed[] = { 400, 401, 403, 404, 405, 409, 412, 413, 414, 422,
						429, 431, 500, 503, 504 };
	int i, j;

	for (i = 0; i < API_E_COUNT; i++) {
		const struct api_err_info *e = api_err_info((enum api_err)i);
		bool ok = false;

		cr_assert_eq(e->err, (enum api_err)i, "table out of order at %d", i);
		cr_assert(e->code && *e->code && e->message && *e->message);
		for (j = 0; j < (int)(sizeof(allowed) / sizeof(allowed[0])); j++)
			ok |= e->status == allowed[j];
		cr_assert(ok, "%s has status %u", e->code, e->status);
		for (j = 0; j < i; j++)
			cr_assert_str_neq(e->code, api_err_code((enum api_err)j));
	}
}

Test(api_err, errno_values_map_to_the_statuses_clients_expect)
{
	cr_assert_eq(api_err_status(api_err_from_errno(-ENOENT)), 404);
	cr_assert_eq(api_err_status(api_err_from_errno(-EEXIST)), 409);
	cr_assert_eq(api_err_status(api_err_from_errno(-EBUSY)), 409);
	cr_assert_eq(api_err_status(api_err_from_errno(-ESTALE)), 412);
	cr_assert_eq(api_err_status(api_err_from_errno(-E2BIG)), 413);
	cr_assert_eq(api_err_status(api_err_from_errno(-ENOTCONN)), 503);
	cr_assert_eq(api_err_status(api_err_from_errno(-ECONNREFUSED)), 503);
	cr_assert_eq(api_err_status(api_err_from_errno(-ETIMEDOUT)), 504);
	cr_assert_eq(api_err_status(api_err_from_errno(-EACCES)), 401);
	cr_assert_eq(api_err_status(api_err_from_errno(-EPERM)), 403);
	/* Positive errno values are accepted too; unknown ones are internal, never bare. */
	cr_assert_eq(api_err_status(api_err_from_errno(ENOENT)), 404);
	cr_assert_eq(api_err_from_errno(-EXDEV), API_E_INTERNAL);
	cr_assert_eq(api_err_status(API_E_INTERNAL), 500);
}

Test(api_err, body_has_code_message_and_field)
{
	json_t *b = api_err_body(API_E_INVALID, "luns[0].lun", "too big");
	json_t *e = json_object_get(b, "error");

	cr_assert_str_eq(json_string_value(json_object_get(e, "code")), "invalid");
	cr_assert_str_eq(json_string_value(json_object_get(e, "message")), "too big");
	cr_assert_str_eq(json_string_value(json_object_get(e, "field")), "luns[0].lun");
	json_decref(b);
	b = api_err_body(API_E_NOT_FOUND, NULL, NULL);
	e = json_object_get(b, "error");
	cr_assert_null(json_object_get(e, "field"));
	cr_assert_str_eq(json_string_value(json_object_get(e, "message")), "no such resource");
	json_decref(b);
}
