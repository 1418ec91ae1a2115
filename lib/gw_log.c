// SPDX-License-Identifier: MIT
/*
 * Logging. The settings (level, debug components, sink, ident) are process-wide because every
 * component logs through the same sink; they are set once at start-up (or by a test) and then
 * only read, so the data path takes no lock to log. Each line is written with one write(2)
 * so lines from backstore threads do not interleave.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gw_log.h"

#define GW_LOG_MAX_DEBUG 32
#define GW_LOG_NAME_LEN 24
#define GW_LOG_LINE 2048

static enum gw_log_level log_max = GW_LOG_INFO;
static bool log_debug_all;
static unsigned int log_debug_n;
static char log_debug[GW_LOG_MAX_DEBUG][GW_LOG_NAME_LEN];
static gw_log_sink_fn log_sink;
static void *log_sink_arg;
static char log_ident[32] = "isergwd";

static void gw_log_stderr(enum gw_log_level level, const char *comp, const char *msg)
{
	char line[GW_LOG_LINE + 128];
	int n;

	/* Under systemd, stderr is a journal stream: "<N>" keeps the priority (sd-daemon(3)). */
	if (getenv("JOURNAL_STREAM"))
		n = snprintf(line, sizeof(line), "<%d>%s: %s: %s\n", (int)level, log_ident, comp,
			     msg);
	else
		n = snprintf(line, sizeof(line), "%s: %s: %s\n", log_ident, comp, msg);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line)) {
		n = sizeof(line) - 1;
		line[n - 1] = '\n';
	}
	/* Nowhere to report a failed write to stderr. */
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}

void gw_logv(enum gw_log_level level, const char *comp, const char *fmt, va_list ap)
{
	char msg[GW_LOG_LINE];
	int saved = errno;	/* callers log then return -errno */

	if (!comp)
		comp = "-";
	if (level > log_max)
		goto out;
	if (level >= GW_LOG_DBG && !gw_log_debug_on(comp))
		goto out;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (log_sink)
		log_sink(level, comp, msg, log_sink_arg);
	else
		gw_log_stderr(level, comp, msg);
out:
	errno = saved;
}

void gw_log(enum gw_log_level level, const char *comp, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	gw_logv(level, comp, fmt, ap);
	va_end(ap);
}

void gw_log_set_level(enum gw_log_level max)
{
	log_max = max;
}

int gw_log_set_debug(const char *list)
{
	char names[GW_LOG_MAX_DEBUG][GW_LOG_NAME_LEN];
	unsigned int n = 0;
	bool all = false;
	const char *p = list ? list : "";

	if (*p == '\0')
		goto apply;
	for (;;) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);

		if (len == 0 || len >= GW_LOG_NAME_LEN || n == GW_LOG_MAX_DEBUG)
			return -EINVAL;
		memcpy(names[n], p, len);
		names[n][len] = '\0';
		if (strcmp(names[n], "all") == 0)
			all = true;
		n++;
		if (!end)
			break;
		p = end + 1;
	}
apply:
	memcpy(log_debug, names, sizeof(names[0]) * n);
	log_debug_n = n;
	log_debug_all = all;
	/* Asking for a component's debug output is asking to see it: lift the level filter. */
	if (n && log_max < GW_LOG_DBG)
		log_max = GW_LOG_DBG;
	return 0;
}

bool gw_log_debug_on(const char *comp)
{
	unsigned int i;

	if (log_debug_all)
		return true;
	if (!comp)
		return false;
	for (i = 0; i < log_debug_n; i++)
		if (strcmp(log_debug[i], comp) == 0)
			return true;
	return false;
}

void gw_log_set_sink(gw_log_sink_fn fn, void *arg)
{
	log_sink = fn;
	log_sink_arg = fn ? arg : NULL;
}

void gw_log_set_ident(const char *ident)
{
	snprintf(log_ident, sizeof(log_ident), "%s", ident ? ident : "isergwd");
}

static uint64_t gw_log_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

bool gw_ratelimit_ok(struct gw_ratelimit *rl, uint32_t *missed)
{
	uint64_t now;

	if (missed)
		*missed = 0;
	if (rl->interval_ms == 0 || rl->burst == 0)
		return true;
	now = gw_log_now_ms();
	if (rl->printed == 0 || now - rl->window_start_ms >= rl->interval_ms) {
		/* New window: report what the last one dropped. */
		if (missed)
			*missed = rl->missed;
		rl->missed = 0;
		rl->window_start_ms = now;
		rl->printed = 1;
		return true;
	}
	if (rl->printed < rl->burst) {
		rl->printed++;
		return true;
	}
	rl->missed++;
	return false;
}
