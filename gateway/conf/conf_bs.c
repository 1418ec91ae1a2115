// SPDX-License-Identifier: MIT
/* A backstore object of the configuration: its type, path, size and I/O settings, and for a
 * remote backstore the paths and policies of conf_mp.c beside it. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "gw_list.h"

static const struct gw_conf_enum bs_type_enums[] = {
	{ "file", BS_TYPE_FILE },
	{ "block", BS_TYPE_BLOCK },
	{ "ram", BS_TYPE_RAM },
	{ "null", BS_TYPE_NULL },
	{ "remote", BS_TYPE_REMOTE },
	{ NULL, 0 },
};

static const struct gw_conf_enum bs_io_engine_enums[] = {
	{ "auto", BS_IO_AUTO },
	{ "uring", BS_IO_URING },
	{ "threads", BS_IO_THREADS },
	{ NULL, 0 },
};

static const char *bs_check_block_size(const void *field)
{
	uint32_t v = *(const uint32_t *)field;

	if (v != 512 && v != 4096)
		return "must be 512 or 4096";
	return NULL;
}

const struct gw_conf_key conf_bs_keys[] = {
	{ .name = "type", .type = GW_CONF_ENUM, .offset = offsetof(struct bs_conf, type),
	  .enums = bs_type_enums, .flags = GW_CONF_REQUIRED,
	  .help = "where the blocks live: file, block (device), ram, null, or remote (a back-end "
		  "LUN over several iSCSI paths: see paths and the multipath keys)" },
	{ .name = "path", .type = GW_CONF_STR, .offset = offsetof(struct bs_conf, path),
	  .min = 0, .max = 4095,
	  .help = "file or block device path (file and block types)" },
	{ .name = "size", .type = GW_CONF_SIZE, .offset = offsetof(struct bs_conf, size),
	  .min = 0, .max = 0,
	  .help = "bytes (\"100G\"); file: created sparse or extended to it; ram/null: required; "
		  "block: at most the device size (0: whole device)" },
	{ .name = "block_size", .type = GW_CONF_U32, .offset = offsetof(struct bs_conf, block_size),
	  .min = 512, .max = 4096, .def = "512", .check = bs_check_block_size,
	  .help = "logical block size, 512 or 4096" },
	{ .name = "direct", .type = GW_CONF_BOOL, .offset = offsetof(struct bs_conf, direct),
	  .def = "false", .help = "O_DIRECT: bypass the page cache (file and block types)" },
	{ .name = "readonly", .type = GW_CONF_BOOL, .offset = offsetof(struct bs_conf, readonly),
	  .def = "false", .help = "refuse writes" },
	{ .name = "threads", .type = GW_CONF_U32, .offset = offsetof(struct bs_conf, threads),
	  .min = 1, .max = 64, .def = "4",
	  .help = "I/O worker threads (file and block types, when they do not use io_uring)" },
	{ .name = "io_engine", .type = GW_CONF_ENUM, .offset = offsetof(struct bs_conf, io_engine),
	  .enums = bs_io_engine_enums, .def = "auto",
	  .help = "file and block types: auto (io_uring from the event loop when the kernel and "
		  "file system allow, else worker threads), uring (or refuse to open), threads" },
	{ .name = "queue_depth", .type = GW_CONF_U32,
	  .offset = offsetof(struct bs_conf, queue_depth), .min = 1, .max = 4096, .def = "128",
	  .help = "file and block types with io_uring: I/Os in flight to the device at most; "
		  "more wait in the backstore" },
	GW_CONF_END,
};

/* Configuration of the whole backstore object */

static bool bs_key_in(const struct gw_conf_key *tbl, const char *name)
{
	return gw_conf_find(tbl, name) != NULL || strcmp(name, "paths") == 0;
}

int conf_bs_parse(struct bs_conf *conf, const json_t *in, const char *path,
		  struct gw_errlist *errs)
{
	const char *ign_mp[64], *ign_bs[64];
	size_t n = 0, before = errs->n;
	const char *key;
	json_t *v;

	if (gw_conf_defaults(conf_bs_keys, conf) < 0) {
		gw_errlist_add(errs, path, "out of memory");
		return -ENOMEM;
	}
	conf->remote = NULL;
	if (!json_is_object(in)) {
		gw_errlist_add(errs, path, "expected an object");
		return -EINVAL;
	}
	for (const struct gw_conf_key *k = conf_mp_keys; k->name && n < 62; k++)
		ign_mp[n++] = k->name;
	ign_mp[n++] = "paths";
	ign_mp[n] = NULL;
	/* Keys the remote table does not know were reported by the first parse already. */
	n = 0;
	json_object_foreach((json_t *)in, key, v) {
		if (n < GW_ARRAY_SIZE(ign_bs) - 1 && !bs_key_in(conf_mp_keys, key))
			ign_bs[n++] = key;
	}
	ign_bs[n] = NULL;

	gw_conf_parse(conf_bs_keys, conf, in, path, ign_mp, errs);
	if (conf->type == BS_TYPE_REMOTE) {
		conf->remote = calloc(1, sizeof(*conf->remote));
		if (!conf->remote) {
			gw_errlist_add(errs, path, "out of memory");
			return -ENOMEM;
		}
		conf_mp_parse(conf->remote, in, path, ign_bs, errs);
	} else {
		json_object_foreach((json_t *)in, key, v) {
			(void)v;
			if (!gw_conf_find(conf_bs_keys, key) && bs_key_in(conf_mp_keys, key)) {
				char f[512];

				snprintf(f, sizeof(f), "%s%s%s", path, path && *path ? "." : "",
					 key);
				gw_errlist_add(errs, f, "only for a remote backstore (\"type\": "
					       "\"remote\")");
			}
		}
	}
	return errs->n == before ? 0 : -EINVAL;
}

void conf_bs_free(struct bs_conf *conf)
{
	gw_conf_free(conf_bs_keys, conf);
	if (conf->remote) {
		conf_mp_free(conf->remote);
		free(conf->remote);
		conf->remote = NULL;
	}
}

json_t *conf_bs_to_json(const struct bs_conf *conf, bool mask_secrets)
{
	json_t *o = gw_conf_to_json(conf_bs_keys, conf, mask_secrets);

	if (o && conf->remote) {
		json_t *r = conf_mp_to_json(conf->remote, mask_secrets);

		if (r)
			json_object_update(o, r);
		json_decref(r);
	}
	return o;
}
