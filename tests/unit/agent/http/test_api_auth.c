// SPDX-License-Identifier: MIT
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api_auth.h"
#include "gw_log.h"

static char dir[64];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/isergw-auth.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	gw_log_set_level(GW_LOG_WARN - 1);
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(api_auth, .init = setup, .fini = teardown);

static char *slurp(const char *name)
{
	static char buf[4096];
	char p[128];
	FILE *f;
	size_t n;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	f = fopen(p, "r");
	cr_assert_not_null(f, "%s missing", p);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = 0;
	fclose(f);
	return buf;
}

Test(api_auth, sha256_is_the_standard_digest)
{
	static const uint8_t abc[32] = {
		0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40, 0xde, 0x5d, 0xae,
		0x22, 0x23, 0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17, 0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61,
		0xf2, 0x00, 0x15, 0xad,
	};
	uint8_t d[32];

	cr_assert_eq(api_auth_digest("abc", d), 0);
	cr_assert_arr_eq(d, abc, 32);
}

Test(api_auth, first_start_creates_a_private_admin_token_that_works)
{
	struct api_auth a;
	enum api_role role;
	const char *name;
	char header[128], token[API_TOKEN_LEN + 1];
	struct stat st;
	char p[128];

	cr_assert_eq(api_auth_open(&a, dir), 0);
	snprintf(token, sizeof(token), "%s", slurp("admin.token"));
	token[strcspn(token, "\n")] = 0;
	cr_assert_eq(strlen(token), API_TOKEN_LEN);
	snprintf(p, sizeof(p), "%s/admin.token", dir);
	cr_assert_eq(stat(p, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0600);
	snprintf(p, sizeof(p), "%s/tokens.json", dir);
	cr_assert_eq(stat(p, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0600);
	/* Only the digest is stored. */
	cr_assert_null(strstr(slurp("tokens.json"), token + 4));
	snprintf(header, sizeof(header), "Bearer %s", token);
	cr_assert_eq(api_auth_check(&a, header, &role, &name), 0);
	cr_assert_eq(role, API_ROLE_ADMIN);
	cr_assert_str_eq(name, "admin");
	api_auth_close(&a);
}

Test(api_auth, wrong_missing_or_malformed_tokens_are_refused)
{
	struct api_auth a;
	enum api_role role;

	cr_assert_eq(api_auth_open(&a, dir), 0);
	cr_assert_eq(api_auth_check(&a, NULL, &role, NULL), -EACCES);
	cr_assert_eq(api_auth_check(&a, "", &role, NULL), -EACCES);
	cr_assert_eq(api_auth_check(&a, "Basic YWRtaW46YWRtaW4=", &role, NULL), -EACCES);
	cr_assert_eq(api_auth_check(&a, "Bearer ", &role, NULL), -EACCES);
	cr_assert_eq(api_auth_check(&a, "Bearer igw_0000", &role, NULL), -EACCES);
	api_auth_close(&a);
}

Test(api_auth, read_tokens_persist_with_their_role)
{
	struct api_auth a;
	enum api_role role;
	char tok[API_TOKEN_LEN + 1], hdr[128], tok2[API_TOKEN_LEN + 1];

	cr_assert_eq(api_auth_open(&a, dir), 0);
	cr_assert_eq(api_auth_add(&a, "monitor", API_ROLE_READ, tok), 0);
	cr_assert_eq(api_auth_add(&a, "monitor", API_ROLE_ADMIN, tok2), -EEXIST);
	api_auth_close(&a);
	cr_assert_eq(api_auth_open(&a, dir), 0);
	snprintf(hdr, sizeof(hdr), "bearer %s", tok);
	cr_assert_eq(api_auth_check(&a, hdr, &role, NULL), 0);
	cr_assert_eq(role, API_ROLE_READ);
	api_auth_close(&a);
}

/* ---- failed tokens per source address (api_gate) ------------------------------------- */

Test(api_gate, the_nth_failure_within_the_window_blocks_that_address_only)
{
	struct api_gate g;

	api_gate_init(&g, NULL, 3, 60, 30);
	cr_assert_eq(api_gate_fail(&g, "192.0.2.1", 1000), 0);
	cr_assert_eq(api_gate_fail(&g, "192.0.2.1", 2000), 0);
	cr_assert_eq(api_gate_blocked(&g, "192.0.2.1", 2000), 0);
	/* The third failure starts a 30 s block, for this address alone. */
	cr_assert_eq(api_gate_fail(&g, "192.0.2.1", 3000), 30);
	cr_assert_eq(api_gate_blocked(&g, "192.0.2.1", 3000), 30);
	cr_assert_eq(api_gate_blocked(&g, "192.0.2.1", 32500), 1, "rounded up");
	cr_assert_eq(api_gate_blocked(&g, "192.0.2.2", 3000), 0);
	cr_assert_eq(api_gate_blocked(&g, "192.0.2.1", 33000), 0, "the block ends");
	cr_assert_eq(g.src[0].total, 3);
	api_gate_fini(&g);
}

Test(api_gate, failures_spread_beyond_the_window_never_block)
{
	struct api_gate g;
	uint64_t t;

	api_gate_init(&g, NULL, 3, 10, 30);
	for (t = 0; t < 200000; t += 6000)
		cr_assert_eq(api_gate_fail(&g, "198.51.100.7", t), 0, "at %llu ms",
			     (unsigned long long)t);
	cr_assert_eq(api_gate_blocked(&g, "198.51.100.7", t), 0);
	api_gate_fini(&g);
}

Test(api_gate, zero_turns_the_limit_off_but_failures_are_still_counted)
{
	struct api_gate g;
	int i;

	api_gate_init(&g, NULL, UINT_MAX, 0, 0);
	for (i = 0; i < 100; i++)
		cr_assert_eq(api_gate_fail(&g, "203.0.113.9", 1000), 0);
	cr_assert_eq(api_gate_blocked(&g, "203.0.113.9", 1000), 0);
	cr_assert_eq(g.src[0].total, 100);
	api_gate_fini(&g);
}

Test(api_gate, a_flood_of_new_addresses_stays_bounded_and_keeps_a_block)
{
	struct api_gate g;
	char a[48];
	int i;

	api_gate_init(&g, NULL, 2, 60, 60);
	api_gate_fail(&g, "10.0.0.1", 1000);
	cr_assert_eq(api_gate_fail(&g, "10.0.0.1", 1000), 60);
	for (i = 0; i < 5000; i++) {
		snprintf(a, sizeof(a), "10.1.%d.%d", i / 250, i % 250);
		api_gate_fail(&g, a, 2000 + (uint64_t)i);
	}
	cr_assert_leq(g.nsrc, API_AUTHLIM_SOURCES);
	cr_assert_gt(api_gate_blocked(&g, "10.0.0.1", 10000), 0, "evicted while blocked");
	api_gate_fini(&g);
}
