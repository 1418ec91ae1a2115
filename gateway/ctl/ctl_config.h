/* SPDX-License-Identifier: MIT */
/*
 * The gateway's JSON configuration file (docs/CONFIGURATION.md): the walk over the JSON tree
 * that hands each object to its own keyword table (gateway, portals, discovery, targets with
 * their initiators, chap, params and luns/backstore), collecting every error with its key path,
 * and the embedded demo configuration `isergwd --state-dir` starts from.
 */
#ifndef CTL_CONFIG_H
#define CTL_CONFIG_H

#include <jansson.h>

#include "gw_conf.h"
#include "isc.h"

struct ctl_gateway_conf {
	char *log_debug;		/* debug components, "iscsi,scsi" / "all" / "" */
	char *control_socket;		/* unix socket path, "" = none */
	uint64_t data_memory;		/* bytes of task data buffers, all sessions together */
};

extern const struct gw_conf_key ctl_gateway_conf_keys[];

struct ctl_config {
	struct ctl_gateway_conf gateway;
	struct isc_gw_conf *isc;	/* heap; hand it to ctl_gw_create */
};

/* Parses and checks root. On error errs holds every problem and *cfg is freed. 0 or -EINVAL
 * (or -ENOMEM). */
int ctl_config_parse(const json_t *root, struct ctl_config *cfg, struct gw_errlist *errs);
/* Reads a file and parses it; JSON syntax errors are reported with line and column. */
int ctl_config_load(const char *path, struct ctl_config *cfg, struct gw_errlist *errs);
void ctl_config_free(struct ctl_config *cfg);

/* The embedded demo configuration for a state directory (new reference). */
json_t *ctl_config_demo(const char *state_dir);
/* Writes DIR/isergwd.json from the demo unless it exists; *path gets its malloc'ed name. */
int ctl_config_ensure_state(const char *state_dir, char **path);

#endif
