// SPDX-License-Identifier: MIT
/* Prometheus text format helpers shared by the metrics writers (api_res.h). */
#include "api_agent.h"
#include "api_r.h"

void api_prom_label(struct gw_buf *b, const char *v)
{
	/* Label values escape backslash, double quote and newline. */
	for (; v && *v; v++) {
		if (*v == '\\' || *v == '"')
			gw_buf_printf(b, "\\%c", *v);
		else if (*v == '\n')
			gw_buf_append(b, "\\n", 2);
		else
			gw_buf_append(b, v, 1);
	}
}

void api_prom_head(struct gw_buf *b, const char *name, const char *type, const char *help)
{
	gw_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}
