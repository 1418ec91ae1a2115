// SPDX-License-Identifier: MIT
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../../lib/gw_log.c"

struct capture {
	int n;
	enum gw_log_level level[16];
	char line[16][256];
};

static void capture_sink(enum gw_log_level level, const char *comp, const char *msg, void *arg)
{
	struct capture *c = arg;

	if (c->n < 16) {
		c->level[c->n] = level;
		snprintf(c->line[c->n], sizeof(c->line[0]), "%s: %s", comp, msg);
	}
	c->n++;
}

static struct capture cap;

static void setup(void)
{
	memset(&cap, 0, sizeof(cap));
	gw_log_set_sink(capture_sink, &cap);
	gw_log_set_level(GW_LOG_INFO);
	gw_log_set_debug("");
}

TestSuite(log, .init = setup);
TestSuite(ratelimit, .init = setup);

Test(log, sink_gets_formatted_message)
{
	gw_err("iscsi", "bad opcode 0x%02x from %s", 0x3f, "host1");
	gw_info("scsi", "lun %d ready", 3);
	cr_assert_eq(cap.n, 2);
	cr_expect_str_eq(cap.line[0], "iscsi: bad opcode 0x3f from host1");
	cr_expect_eq(cap.level[0], GW_LOG_ERR);
	cr_expect_str_eq(cap.line[1], "scsi: lun 3 ready");
}

Test(log, level_filter_drops_info)
{
	gw_log_set_level(GW_LOG_WARN);
	gw_info("scsi", "hidden");
	gw_warn("scsi", "shown");
	cr_assert_eq(cap.n, 1);
	cr_expect_str_eq(cap.line[0], "scsi: shown");
}

Test(log, debug_switches_per_component)
{
	gw_dbg("iscsi", "off by default");
	cr_expect_eq(cap.n, 0);
	cr_assert_eq(gw_log_set_debug("iscsi,mpath"), 0);
	cr_expect(gw_log_debug_on("iscsi"));
	cr_expect(gw_log_debug_on("mpath"));
	cr_expect_not(gw_log_debug_on("scsi"));
	cr_expect_not(gw_log_debug_on("iscs"));
	gw_dbg("iscsi", "login");
	gw_dbg("scsi", "cdb");
	gw_dbg("mpath", "path up");
	cr_assert_eq(cap.n, 2);
	cr_expect_str_eq(cap.line[0], "iscsi: login");
	cr_expect_str_eq(cap.line[1], "mpath: path up");

	cr_assert_eq(gw_log_set_debug("all"), 0);
	cr_expect(gw_log_debug_on("anything"));
	cr_assert_eq(gw_log_set_debug(""), 0);
	cr_expect_not(gw_log_debug_on("iscsi"));
}

Test(log, debug_list_rejects_empty_names)
{
	cr_assert_eq(gw_log_set_debug("iscsi"), 0);
	cr_expect_eq(gw_log_set_debug("iscsi,,scsi"), -EINVAL);
	cr_expect_eq(gw_log_set_debug("scsi,"), -EINVAL);
	/* A rejected list leaves the previous one in force. */
	cr_expect(gw_log_debug_on("iscsi"));
	cr_expect_not(gw_log_debug_on("scsi"));
}

Test(log, logging_preserves_errno)
{
	errno = EIO;
	gw_err("bs", "read failed");
	cr_expect_eq(errno, EIO);
}

static void check_stderr(const char *journal, const char *want)
{
	int pipefd[2], saved;
	char out[256] = "";
	ssize_t n;

	cr_assert_eq(pipe(pipefd), 0);
	saved = dup(STDERR_FILENO);
	dup2(pipefd[1], STDERR_FILENO);
	if (journal)
		setenv("JOURNAL_STREAM", journal, 1);
	else
		unsetenv("JOURNAL_STREAM");
	gw_log_set_sink(NULL, NULL);
	gw_log_set_ident("isergwd");
	gw_warn("net", "bond0: fail_over_mac is %s", "none");
	dup2(saved, STDERR_FILENO);
	close(pipefd[1]);
	n = read(pipefd[0], out, sizeof(out) - 1);
	close(pipefd[0]);
	cr_assert_gt(n, 0);
	out[n] = '\0';
	cr_expect_str_eq(out, want);
}

Test(log, stderr_line_format)
{
	check_stderr(NULL, "isergwd: net: bond0: fail_over_mac is none\n");
}

Test(log, stderr_journal_priority_prefix)
{
	check_stderr("8:1234", "<4>isergwd: net: bond0: fail_over_mac is none\n");
}

Test(ratelimit, burst_then_suppress_then_report)
{
	struct gw_ratelimit rl = GW_RATELIMIT_INIT(200, 3);
	uint32_t missed;
	int ok = 0;

	for (int i = 0; i < 10; i++)
		if (gw_ratelimit_ok(&rl, &missed)) {
			ok++;
			cr_expect_eq(missed, 0);
		}
	cr_expect_eq(ok, 3, "burst of 3 not enforced: %d passed", ok);
	usleep(250 * 1000);
	cr_assert(gw_ratelimit_ok(&rl, &missed));
	cr_expect_eq(missed, 7, "suppressed count %u, want 7", missed);
	cr_assert(gw_ratelimit_ok(&rl, &missed));
	cr_expect_eq(missed, 0);
}

Test(ratelimit, macro_caps_one_call_site)
{
	for (int i = 0; i < 15; i++)
		gw_err_rl("dmv", "bad pdu %d", i);
	cr_expect_eq(cap.n, 10, "%d lines from a flood of 15, want the burst of 10", cap.n);
	cr_expect_str_eq(cap.line[9], "dmv: bad pdu 9");
}
