// SPDX-License-Identifier: MIT
/*
 * Configuration walk. Each object's keys come from its own table in this library
 * (conf_isc.c, conf_scsi.c, conf_bs.c, conf_mp.c beside it); this file only knows the shape of
 * the tree and the path to name in errors ("targets[0].luns[1].backstore.size").
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf.h"
#include "gw_log.h"
#include "gw_loop.h"

const struct gw_conf_key conf_gateway_keys[] = {
	{ .name = "log_debug", .type = GW_CONF_STR,
	  .offset = offsetof(struct ctl_gateway_conf, log_debug), .min = 0, .max = 255, .def = "",
	  .help = "Components with debug output, comma separated (iscsi, scsi, bs, dmv, ...), "
		  "or all. --debug on the command line adds to it." },
	{ .name = "control_socket", .type = GW_CONF_STR,
	  .offset = offsetof(struct ctl_gateway_conf, control_socket), .min = 0, .max = 107,
	  .def = "", .help = "Unix socket for the agent; empty: none." },
	{ .name = "data_memory", .type = GW_CONF_SIZE,
	  .offset = offsetof(struct ctl_gateway_conf, data_memory), .min = 64ull << 20,
	  .max = 1ull << 40, .def = "1G",
	  .help = "Memory for command data buffers, all sessions together. A command that "
		  "would need more is answered TASK SET FULL, which initiators retry." },
	{ .name = "boot_wait", .type = GW_CONF_U32,
	  .offset = offsetof(struct ctl_gateway_conf, boot_wait), .min = 0, .max = 600,
	  .def = "2",
	  .help = "Seconds start-up waits at most for remote LUNs' first logins before the "
		  "portals listen and READY=1; 0: do not wait. LUNs not logged in yet answer "
		  "NOT READY, becoming ready (02/04/01) and keep logging in." },
	{ .name = "fence_margin_ms", .type = GW_CONF_U32,
	  .offset = offsetof(struct ctl_gateway_conf, fence_margin_ms), .min = 100, .max = 30000,
	  .def = "1000",
	  .help = "Cluster: a gateway whose agent stops renewing its ownership lease moves its "
		  "LUNs to ALUA standby this long before the lease's deadline; a taking gateway "
		  "waits the lease TTL plus this before it reports active/optimized "
		  "(docs/CLUSTER.md). A gateway never given a lease is not affected." },
	{ .name = "loops", .type = GW_CONF_U32,
	  .offset = offsetof(struct ctl_gateway_conf, loops), .min = 0, .max = GW_LOOPS_MAX,
	  .def = "0",
	  .help = "Event loops, each on a thread of its own pinned to one CPU of the process's "
		  "affinity mask, in order (loop 0 is the main thread). 0, the default: one per "
		  "CPU of that mask, at most 16; 1: no extra thread, nothing pinned. More loops "
		  "than the CPUs the process may run on is refused at start-up. Each new "
		  "session goes to the "
		  "least-loaded loop with all its connections (docs/ARCHITECTURE.md, \"Several "
		  "event loops\"). Read at start-up." },
	{ .name = "poll_us", .type = GW_CONF_U32,
	  .offset = offsetof(struct ctl_gateway_conf, poll_us), .min = 0, .max = 1000,
	  .def = "0",
	  .help = "Microseconds an event loop keeps checking for work, yielding the CPU "
		  "between checks, before it sleeps; only while 6 of its last 8 waits for work "
		  "were that short, so an idle loop sleeps at once. Saves a sleep and a wake-up "
		  "per burst of a busy session, for CPU spent spinning (docs/TUNING.md). 0, the "
		  "default: never poll. Applied live." },
	GW_CONF_END,
};

static const char *const ctl_top_keys[] = { "gateway", "portals", "discovery", "targets",
					     "cluster", NULL };

static void ctl_path(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void ctl_path(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

/* Applies an optional nested object: defaults always, then the JSON if present. */
static void ctl_parse_obj(const struct gw_conf_key *tbl, void *obj, const json_t *parent,
			  const char *key, const char *path, const char *const *ignore,
			  struct gw_errlist *errs, const json_t **out)
{
	const json_t *j = parent ? json_object_get(parent, key) : NULL;

	if (gw_conf_defaults(tbl, obj))
		gw_errlist_add(errs, path, "out of memory");
	if (out)
		*out = NULL;
	if (!j)
		return;
	if (!json_is_object(j)) {
		gw_errlist_add(errs, path, "expected an object");
		return;
	}
	gw_conf_parse(tbl, obj, j, path, ignore, errs);
	if (out)
		*out = j;
}

/* An array of objects under parent[key]: returns it (or NULL) with *n its size. */
static const json_t *ctl_array(const json_t *parent, const char *key, const char *path,
			       bool required, size_t *n, struct gw_errlist *errs)
{
	const json_t *a = parent ? json_object_get(parent, key) : NULL;

	*n = 0;
	if (!a) {
		if (required)
			gw_errlist_add(errs, path, "required");
		return NULL;
	}
	if (!json_is_array(a)) {
		gw_errlist_add(errs, path, "expected an array");
		return NULL;
	}
	*n = json_array_size(a);
	return a;
}

static void ctl_parse_chap(struct isc_chap_conf *c, const json_t *parent, const char *path,
			   struct gw_errlist *errs)
{
	char p[192];

	ctl_path(p, sizeof(p), "%s.chap", path);
	ctl_parse_obj(conf_chap_keys, c, parent, "chap", p, NULL, errs, NULL);
}

static void ctl_parse_target(struct isc_target_conf *t, const json_t *j, const char *path,
			     struct gw_errlist *errs)
{
	static const char *const ign_chap[] = { "chap", NULL };
	static const char *const ign_bs[] = { "backstore", NULL };
	const json_t *a;
	char p[192], q[224];
	size_t i, n;

	if (gw_conf_defaults(conf_target_keys, t))
		gw_errlist_add(errs, path, "out of memory");
	if (!json_is_object(j)) {
		gw_errlist_add(errs, path, "expected an object");
		return;
	}
	gw_conf_parse(conf_target_keys, t, j, path, conf_target_nested_keys, errs);
	ctl_parse_chap(&t->chap, j, path, errs);
	ctl_path(p, sizeof(p), "%s.params", path);
	ctl_parse_obj(conf_param_keys, &t->params, j, "params", p, NULL, errs, NULL);

	ctl_path(p, sizeof(p), "%s.initiators", path);
	a = ctl_array(j, "initiators", p, false, &n, errs);
	if (n) {
		t->initiators = calloc(n, sizeof(*t->initiators));
		if (!t->initiators) {
			gw_errlist_add(errs, p, "out of memory");
			return;
		}
		t->ninitiators = n;
	}
	for (i = 0; i < n; i++) {
		const json_t *e = json_array_get(a, i);

		ctl_path(p, sizeof(p), "%s.initiators[%zu]", path, i);
		gw_conf_defaults(conf_initiator_keys, &t->initiators[i]);
		if (!json_is_object(e)) {
			gw_errlist_add(errs, p, "expected an object");
			gw_conf_defaults(conf_chap_keys, &t->initiators[i].chap);
			continue;
		}
		gw_conf_parse(conf_initiator_keys, &t->initiators[i], e, p, ign_chap, errs);
		ctl_parse_chap(&t->initiators[i].chap, e, p, errs);
	}

	ctl_path(p, sizeof(p), "%s.luns", path);
	a = ctl_array(j, "luns", p, false, &n, errs);
	if (n) {
		t->luns = calloc(n, sizeof(*t->luns));
		if (!t->luns) {
			gw_errlist_add(errs, p, "out of memory");
			return;
		}
		t->nluns = n;
	}
	for (i = 0; i < n; i++) {
		const json_t *e = json_array_get(a, i);
		struct isc_lun_conf *l = &t->luns[i];

		ctl_path(p, sizeof(p), "%s.luns[%zu]", path, i);
		gw_conf_defaults(conf_lu_keys, &l->lu);
		gw_conf_defaults(conf_bs_keys, &l->bs);
		if (!json_is_object(e)) {
			gw_errlist_add(errs, p, "expected an object");
			continue;
		}
		gw_conf_parse(conf_lu_keys, &l->lu, e, p, ign_bs, errs);
		ctl_path(q, sizeof(q), "%s.backstore", p);
		if (!json_object_get(e, "backstore")) {
			gw_errlist_add(errs, q, "required");
			continue;
		}
		/* conf_bs_keys, and for "type": "remote" the paths and multipath keys. */
		conf_bs_parse(&l->bs, json_object_get(e, "backstore"), q, errs);
	}
}

/* "cluster": {"groups": [{"id", "name", "state"}, ...]}, written by the cluster agent. */
static void ctl_parse_cluster(struct isc_gw_conf *c, const json_t *j, struct gw_errlist *errs)
{
	const char *key;
	const json_t *a, *v;
	char p[64];
	size_t i, n;

	if (!json_is_object(j)) {
		gw_errlist_add(errs, "cluster", "expected an object");
		return;
	}
	json_object_foreach((json_t *)j, key, v)
		if (strcmp(key, "groups"))
			gw_errlist_add(errs, "cluster", "unknown key \"%s\" (allowed: groups)", key);
	a = ctl_array(j, "groups", "cluster.groups", true, &n, errs);
	if (!n)
		return;
	c->groups = calloc(n, sizeof(*c->groups));
	if (!c->groups) {
		gw_errlist_add(errs, "cluster.groups", "out of memory");
		return;
	}
	c->ngroups = n;
	for (i = 0; i < n; i++) {
		const json_t *e = json_array_get(a, i);

		ctl_path(p, sizeof(p), "cluster.groups[%zu]", i);
		gw_conf_defaults(conf_group_keys, &c->groups[i]);
		if (!json_is_object(e)) {
			gw_errlist_add(errs, p, "expected an object");
			continue;
		}
		gw_conf_parse(conf_group_keys, &c->groups[i], e, p, NULL, errs);
	}
}

void conf_free(struct ctl_config *cfg)
{
	gw_conf_free(conf_gateway_keys, &cfg->gateway);
	if (cfg->isc) {
		conf_gw_free(cfg->isc);
		free(cfg->isc);
	}
	memset(cfg, 0, sizeof(*cfg));
}

int conf_parse(const json_t *root, struct ctl_config *cfg, struct gw_errlist *errs)
{
	static const char *const ign_chap[] = { "chap", NULL };
	size_t before = errs->n, i, n;
	struct isc_gw_conf *c;
	const char *key;
	const json_t *a, *v;
	char p[96];

	memset(cfg, 0, sizeof(*cfg));
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	cfg->isc = c;
	if (!json_is_object(root)) {
		gw_errlist_add(errs, "", "the configuration must be a JSON object");
		goto fail;
	}
	json_object_foreach((json_t *)root, key, v) {
		size_t k;
		bool known = false;

		for (k = 0; ctl_top_keys[k]; k++)
			if (!strcmp(key, ctl_top_keys[k]))
				known = true;
		if (!known)
			gw_errlist_add(errs, key, "unknown key (allowed: gateway, portals, "
				       "discovery, targets, cluster)");
	}
	ctl_parse_obj(conf_gateway_keys, &cfg->gateway, root, "gateway", "gateway", NULL,
		      errs, NULL);

	a = ctl_array(root, "portals", "portals", true, &n, errs);
	if (n) {
		c->portals = calloc(n, sizeof(*c->portals));
		if (!c->portals)
			goto nomem;
		c->nportals = n;
	}
	for (i = 0; i < n; i++) {
		const json_t *e = json_array_get(a, i);

		ctl_path(p, sizeof(p), "portals[%zu]", i);
		gw_conf_defaults(conf_portal_keys, &c->portals[i]);
		if (!json_is_object(e)) {
			gw_errlist_add(errs, p, "expected an object");
			continue;
		}
		gw_conf_parse(conf_portal_keys, &c->portals[i], e, p, NULL, errs);
	}

	ctl_parse_obj(conf_discovery_keys, &c->discovery, root, "discovery", "discovery",
		      ign_chap, errs, &v);
	ctl_parse_chap(&c->discovery.chap, v, "discovery", errs);

	a = ctl_array(root, "targets", "targets", false, &n, errs);
	if (n) {
		c->targets = calloc(n, sizeof(*c->targets));
		if (!c->targets)
			goto nomem;
		c->ntargets = n;
	}
	for (i = 0; i < n; i++) {
		ctl_path(p, sizeof(p), "targets[%zu]", i);
		ctl_parse_target(&c->targets[i], json_array_get(a, i), p, errs);
	}
	v = json_object_get(root, "cluster");
	if (v)
		ctl_parse_cluster(c, v, errs);
	conf_gw_check(c, errs);
	if (errs->n > before)
		goto fail;
	return 0;
nomem:
	gw_errlist_add(errs, "", "out of memory");
fail:
	conf_free(cfg);
	return -EINVAL;
}

int conf_load_file(const char *path, struct ctl_config *cfg, struct gw_errlist *errs)
{
	json_error_t jerr;
	json_t *root;
	int r;

	memset(cfg, 0, sizeof(*cfg));
	root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		/* The caller names the file; jansson's line is -1 when it could not be read. */
		if (jerr.line > 0)
			gw_errlist_add(errs, "", "line %d column %d: %s", jerr.line, jerr.column,
				       jerr.text);
		else
			gw_errlist_add(errs, "", "%s", jerr.text);
		return -EINVAL;
	}
	r = conf_parse(root, cfg, errs);
	json_decref(root);
	return r;
}

json_t *conf_demo(const char *state_dir)
{
	char img[4096];

	snprintf(img, sizeof(img), "%s/demo.img", state_dir);
	return json_pack(
		"{s:{s:s, s:s}, s:[{s:s, s:s, s:s, s:i}], s:{s:s}, "
		"s:[{s:s, s:s, s:i, s:[s], s:b, s:[], "
		"s:{s:s, s:s, s:i, s:i, s:i, s:b, s:b, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i}, "
		"s:[{s:i, s:s, s:s, s:b, s:b, s:{s:s, s:s, s:s, s:i}}]}]}",
		"gateway", "log_debug", "", "control_socket", "",
		"portals", "name", "tcp0", "transport", "tcp", "address", "127.0.0.1", "port", 3260,
		"discovery", "auth", "none",
		"targets", "name", "iqn.2026-11.org.isergw:demo", "alias", "demo", "tpgt", 1,
		"portals", "tcp0", "allow_any_initiator", 1, "initiators",
		"params", "HeaderDigest", "CRC32C,None", "DataDigest", "CRC32C,None",
		"MaxRecvDataSegmentLength", 262144, "MaxBurstLength", 1048576,
		"FirstBurstLength", 65536, "InitialR2T", 0, "ImmediateData", 1,
		"MaxOutstandingR2T", 1, "MaxConnections", 1, "DefaultTime2Wait", 2,
		"DefaultTime2Retain", 20, "ErrorRecoveryLevel", 0, "queue_depth", 128,
		"nop_interval", 10, "nop_timeout", 30,
		"luns", "lun", 0, "vendor", "ISERGW", "product", "demo", "write_cache", 1,
		"thin", 1,
		"backstore", "type", "file", "path", img, "size", "1G", "block_size", 512);
}

int conf_ensure_state(const char *state_dir, char **path)
{
	char *p = NULL;
	json_t *demo;
	int r;

	if (mkdir(state_dir, 0755) < 0 && errno != EEXIST) {
		r = -errno;
		gw_err("ctl", "state directory %s: %s", state_dir, strerror(-r));
		return r;
	}
	if (asprintf(&p, "%s/isergwd.json", state_dir) < 0)
		return -ENOMEM;
	if (access(p, F_OK) == 0) {
		*path = p;
		return 0;
	}
	demo = conf_demo(state_dir);
	if (!demo) {
		free(p);
		return -ENOMEM;
	}
	r = json_dump_file(demo, p, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(demo);
	if (r) {
		gw_err("ctl", "cannot write %s: %s", p, strerror(errno));
		free(p);
		return -EIO;
	}
	gw_info("ctl", "wrote the demo configuration to %s", p);
	*path = p;
	return 0;
}
