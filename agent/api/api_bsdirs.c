// SPDX-License-Identifier: MIT
/*
 * Where a file or block backstore given through the API may lie: inside one of the configured
 * folders once every symlink is resolved, so that an API token cannot export /etc/shadow (or
 * the agent's own token files) as a LUN. Only what arrives over REST is checked: a path the
 * stored configuration already holds (the gateway's own file, written by root, or an earlier
 * checked write) passes unchanged.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api_agent.h"
#include "gw_log.h"

#define BSDIRS_DEFAULT_DEV "/dev/disk/by-id"

/* path with its longest existing prefix resolved (realpath) and the rest appended as given:
 * what path would name once it exists. The caller has refused "." and ".." in the rest. */
static char *resolve_partial(const char *path)
{
	char *head = strdup(path), *res = NULL, *out = NULL, *slash;
	size_t cut;

	if (!head)
		return NULL;
	cut = strlen(head);
	for (;;) {
		res = realpath(*head ? head : "/", NULL);
		if (res || (errno != ENOENT && errno != ENOTDIR))
			break;
		slash = strrchr(head, '/');
		if (!slash) {
			/* A relative name with no existing part: resolve it under ".". */
			head[0] = 0;
			res = realpath(".", NULL);
			cut = 0;
			break;
		}
		*slash = 0;
		cut = (size_t)(slash - head);
	}
	if (res) {
		const char *rest = path + cut;

		while (*rest == '/')
			rest++;
		if (asprintf(&out, "%s%s%s", res, *rest && strcmp(res, "/") ? "/" : "", rest) < 0)
			out = NULL;
	}
	free(res);
	free(head);
	return out;
}

static int bsdirs_add(struct api_bsdirs *d, const char *dir)
{
	char **v, *r;

	if (!*dir)
		return 0;
	r = resolve_partial(dir);
	if (!r)
		return -errno ? -errno : -ENOMEM;
	/* "/" would allow everything; trailing slashes are gone after resolve_partial. */
	v = realloc(d->dir, (d->n + 1) * sizeof(*v));
	if (!v) {
		free(r);
		return -ENOMEM;
	}
	d->dir = v;
	d->dir[d->n++] = r;
	return 0;
}

int api_bsdirs_init(struct api_bsdirs *d, const char *list, const char *state_dir)
{
	char *copy = NULL, *tok, *save = NULL;
	int r = 0;

	memset(d, 0, sizeof(*d));
	d->state = resolve_partial(state_dir);
	if (!d->state)
		return -ENOMEM;
	if (!list) {
		r = bsdirs_add(d, state_dir);
		if (!r)
			r = bsdirs_add(d, BSDIRS_DEFAULT_DEV);
		goto out;
	}
	copy = strdup(list);
	if (!copy)
		return -ENOMEM;
	for (tok = strtok_r(copy, ",", &save); tok && !r; tok = strtok_r(NULL, ",", &save))
		r = bsdirs_add(d, tok);
out:
	free(copy);
	if (r)
		gw_err("agent", "--backstore-dirs %s: %s", list ? list : "(default)", strerror(-r));
	else
		gw_info("agent", "backstores through the API only in: %s",
			d->n ? api_bsdirs_list(d) : "(none: no file or block backstore)");
	return r;
}

void api_bsdirs_fini(struct api_bsdirs *d)
{
	size_t i;

	for (i = 0; i < d->n; i++)
		free(d->dir[i]);
	free(d->dir);
	free(d->state);
	free(d->text);
	memset(d, 0, sizeof(*d));
}

const char *api_bsdirs_list(struct api_bsdirs *d)
{
	struct gw_buf b;
	size_t i;

	if (d->text)
		return d->text;
	gw_buf_init(&b);
	for (i = 0; i < d->n; i++)
		gw_buf_printf(&b, "%s%s", i ? ", " : "", d->dir[i]);
	gw_buf_append(&b, "", 1);
	d->text = gw_buf_steal(&b);
	return d->text ? d->text : "?";
}

/* Strictly inside one of the folders. */
static bool bsdirs_inside(const struct api_bsdirs *d, const char *p)
{
	size_t i, n;

	for (i = 0; i < d->n; i++) {
		n = strlen(d->dir[i]);
		if (!strcmp(d->dir[i], "/") && p[0] == '/' && p[1])
			return true;
		if (!strncmp(p, d->dir[i], n) && p[n] == '/' && p[n + 1])
			return true;
	}
	return false;
}

/* The agent's own files in its state folder: never a backstore. */
static bool own_file(const struct api_bsdirs *d, const char *p)
{
	size_t n = strlen(d->state);
	const char *base = p + n + 1;
	size_t bl;

	if (strncmp(p, d->state, n) || p[n] != '/' || strchr(base, '/'))
		return false;
	bl = strlen(base);
	return (bl >= 5 && !strcmp(base + bl - 5, ".json")) ||
	       (bl >= 6 && !strcmp(base + bl - 6, ".token")) ||
	       (bl >= 4 && !strcmp(base + bl - 4, ".tmp"));
}

int api_bsdirs_check(struct api_bsdirs *d, const char *path, bool block, char *why,
		     size_t len)
{
	const char *s = path;
	char *full = NULL, *dir = NULL, *link = NULL, *slash;
	struct stat st;
	bool ok = false;

	if (path[0] != '/') {
		snprintf(why, len, "must be an absolute path");
		return -EACCES;
	}
	/* No "." or ".." segment: what the rest of a path that does not exist yet names must
	 * be plain. */
	while (*s) {
		size_t n;

		while (*s == '/')
			s++;
		n = strcspn(s, "/");
		if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.')) {
			snprintf(why, len, "must not hold a . or .. segment");
			return -EACCES;
		}
		s += n;
	}
	full = resolve_partial(path);
	if (!full) {
		snprintf(why, len, "cannot be resolved: %s", strerror(errno));
		return -EACCES;
	}
	ok = bsdirs_inside(d, full) && !own_file(d, full);
	/* /dev/disk/by-id/NAME is a symlink to /dev/sdX: a block backstore may be a link in an
	 * allowed folder to a block device wherever the device node lies. */
	if (!ok && block && !lstat(path, &st) && S_ISLNK(st.st_mode) && !stat(full, &st) &&
	    S_ISBLK(st.st_mode)) {
		dir = strdup(path);
		slash = dir ? strrchr(dir, '/') : NULL;
		if (slash) {
			*slash = 0;
			link = resolve_partial(*dir ? dir : "/");
			if (link) {
				char *cand = NULL;

				if (asprintf(&cand, "%s/%s", strcmp(link, "/") ? link : "", slash + 1)
				    >= 0) {
					ok = bsdirs_inside(d, cand);
					free(cand);
				}
			}
		}
	}
	if (!ok && bsdirs_inside(d, full) && own_file(d, full)) {
		snprintf(why, len, "%s is one of the agent's own files (its state folder's *.json, "
			 "*.token)", path);
	} else if (!ok) {
		if (strcmp(full, path))
			snprintf(why, len, "%s (resolved: %s) is not in a folder allowed for "
				 "backstores given through the API (allowed: %s)", path, full,
				 d->n ? api_bsdirs_list(d) : "none");
		else
			snprintf(why, len, "%s is not in a folder allowed for backstores given "
				 "through the API (allowed: %s)", path,
				 d->n ? api_bsdirs_list(d) : "none");
	}
	free(link);
	free(dir);
	free(full);
	return ok ? 0 : -EACCES;
}

/* Whether old (the stored configuration) already holds a file or block backstore at path. */
static bool stored_path(const json_t *old, const char *path)
{
	json_t *t, *l;
	size_t i, j;

	json_array_foreach(json_object_get(old, "targets"), i, t) {
		json_array_foreach(json_object_get(t, "luns"), j, l) {
			const char *p = json_string_value(
				json_object_get(json_object_get(l, "backstore"), "path"));

			if (p && !strcmp(p, path))
				return true;
		}
	}
	return false;
}

int api_bsdirs_check_config(struct api_bsdirs *d, const json_t *cfg, const json_t *old,
			    struct gw_errlist *errs)
{
	size_t before = errs->n, i, j;
	json_t *t, *l;
	char why[1024], field[128];

	json_array_foreach(json_object_get(cfg, "targets"), i, t) {
		json_array_foreach(json_object_get(t, "luns"), j, l) {
			json_t *bs = json_object_get(l, "backstore");
			const char *type = json_string_value(json_object_get(bs, "type"));
			const char *p = json_string_value(json_object_get(bs, "path"));
			bool block;

			if (!type || !p || (strcmp(type, "file") && strcmp(type, "block")))
				continue;
			block = !strcmp(type, "block");
			if (stored_path(old, p) || !api_bsdirs_check(d, p, block, why, sizeof(why)))
				continue;
			snprintf(field, sizeof(field), "targets[%zu].luns[%zu].backstore.path", i,
				 j);
			gw_errlist_add(errs, field, "%s", why);
		}
	}
	return errs->n == before ? 0 : -EACCES;
}
