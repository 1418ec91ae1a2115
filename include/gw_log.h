/* SPDX-License-Identifier: MIT */
/*
 * Logging: one line per message to stderr (journald adds time and unit), tagged with the
 * component that wrote it. Debug output is switched on per component ("iscsi,scsi" or "all"),
 * and data-path messages go through a rate limiter so a flood of bad PDUs cannot fill the disk.
 */
#ifndef GW_LOG_H
#define GW_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

enum gw_log_level {
	GW_LOG_ERR = 3,		/* syslog priorities, so journald's <N> prefixes line up */
	GW_LOG_WARN = 4,
	GW_LOG_INFO = 6,
	GW_LOG_DBG = 7,
};

/* Where lines go; the default writes to stderr. Tests install their own to capture lines. */
typedef void (*gw_log_sink_fn)(enum gw_log_level level, const char *comp, const char *msg,
			       void *arg);

void gw_log(enum gw_log_level level, const char *comp, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void gw_logv(enum gw_log_level level, const char *comp, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));

/* Messages above this level are dropped (debug ones still need their component switched on). */
void gw_log_set_level(enum gw_log_level max);
/* "iscsi,scsi", "all" or "" (none). Returns 0, or -EINVAL for an empty name in the list. */
int gw_log_set_debug(const char *list);
bool gw_log_debug_on(const char *comp);
/* NULL restores the stderr sink. */
void gw_log_set_sink(gw_log_sink_fn fn, void *arg);
/* Name printed before each stderr line, e.g. "isergwd". */
void gw_log_set_ident(const char *ident);

#define gw_err(comp, ...) gw_log(GW_LOG_ERR, comp, __VA_ARGS__)
#define gw_warn(comp, ...) gw_log(GW_LOG_WARN, comp, __VA_ARGS__)
#define gw_info(comp, ...) gw_log(GW_LOG_INFO, comp, __VA_ARGS__)
#define gw_dbg(comp, ...)                                      \
	do {                                                   \
		if (gw_log_debug_on(comp))                     \
			gw_log(GW_LOG_DBG, comp, __VA_ARGS__); \
	} while (0)

/*
 * At most `burst` messages per `interval_ms`; the first message after a quiet window reports
 * how many were suppressed. Embed one per message site: static struct gw_ratelimit rl =
 * GW_RATELIMIT_INIT(5000, 10);
 */
struct gw_ratelimit {
	uint32_t interval_ms;
	uint32_t burst;
	uint64_t window_start_ms;
	uint32_t printed;
	uint32_t missed;
};

#define GW_RATELIMIT_INIT(interval, n) { .interval_ms = (interval), .burst = (n) }

/* True when the caller may log; *missed (if not NULL) gets the count dropped before it. */
bool gw_ratelimit_ok(struct gw_ratelimit *rl, uint32_t *missed);

#define gw_log_rl(level, comp, ...)                                                    \
	do {                                                                           \
		static struct gw_ratelimit gw__rl = GW_RATELIMIT_INIT(5000, 10);       \
		uint32_t gw__missed;                                                   \
		if (gw_ratelimit_ok(&gw__rl, &gw__missed)) {                           \
			if (gw__missed)                                                \
				gw_log(level, comp, "%u similar messages suppressed", \
				       gw__missed);                                    \
			gw_log(level, comp, __VA_ARGS__);                              \
		}                                                                      \
	} while (0)

#define gw_err_rl(comp, ...) gw_log_rl(GW_LOG_ERR, comp, __VA_ARGS__)
#define gw_warn_rl(comp, ...) gw_log_rl(GW_LOG_WARN, comp, __VA_ARGS__)

#endif
