// SPDX-License-Identifier: MIT
/*
 * The file backend of the desired configuration store: DIR/config.json holds
 * {"generation": N, "config": {...}}. A commit writes the whole file to a temporary name,
 * fsyncs it, renames it over the old one and fsyncs the folder, so after a crash the file is
 * either the old generation or the new one, never a mix; a leftover temporary file is ignored.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api_store.h"
#include "gw_log.h"
#include "store_priv.h"

struct api_store_file {
	char *path;
};

static int write_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int api_write_atomic(const char *path, const void *data, size_t len, unsigned int mode)
{
	char *tmp = NULL, *dcopy = NULL;
	int fd = -1, dfd = -1, r = 0;

	if (asprintf(&tmp, "%s.tmp", path) < 0)
		return -ENOMEM;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0) {
		r = -errno;
		goto out;
	}
	/* open() honours the umask; the mode is the contract (0600 for secrets). */
	if (fchmod(fd, mode) < 0 || (r = write_all(fd, data, len)) < 0 || fsync(fd) < 0) {
		r = r < 0 ? r : -errno;
		goto out_unlink;
	}
	if (close(fd) < 0) {
		fd = -1;
		r = -errno;
		goto out_unlink;
	}
	fd = -1;
	if (rename(tmp, path) < 0) {
		r = -errno;
		goto out_unlink;
	}
	dcopy = strdup(path);
	if (!dcopy) {
		r = -ENOMEM;
		goto out;
	}
	dfd = open(dirname(dcopy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fsync(dfd) < 0) {
		r = -errno;
		goto out;
	}
	r = 0;
	goto out;
out_unlink:
	unlink(tmp);
out:
	if (r)
		gw_err("store", "cannot write %s: %s", path, strerror(-r));
	if (fd >= 0)
		close(fd);
	if (dfd >= 0)
		close(dfd);
	free(dcopy);
	free(tmp);
	return r;
}

json_t *api_store_empty_config(void)
{
	return json_pack("{s:[], s:{s:s}, s:[]}", "portals", "discovery", "auth", "none",
			 "targets");
}

static int file_load(struct api_store *s, json_t **config, uint64_t *gen)
{
	struct api_store_file *f = s->priv;
	json_error_t jerr;
	json_t *root, *c, *g;

	root = json_load_file(f->path, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		if (access(f->path, F_OK) < 0 && errno == ENOENT)
			return -ENOENT;
		gw_err("store", "%s: line %d column %d: %s", f->path, jerr.line, jerr.column,
		       jerr.text);
		return -EINVAL;
	}
	c = json_object_get(root, "config");
	g = json_object_get(root, "generation");
	if (!json_is_object(c) || !json_is_integer(g) || json_integer_value(g) < 1) {
		gw_err("store", "%s: expected {\"generation\": N, \"config\": {...}}", f->path);
		json_decref(root);
		return -EINVAL;
	}
	*config = json_incref(c);
	*gen = (uint64_t)json_integer_value(g);
	json_decref(root);
	return 0;
}

static int file_save(struct api_store *s, const json_t *config, uint64_t gen)
{
	struct api_store_file *f = s->priv;
	json_t *root;
	char *text;
	int r;

	root = json_pack("{s:I, s:O}", "generation", (json_int_t)gen, "config", config);
	if (!root)
		return -ENOMEM;
	text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(root);
	if (!text)
		return -ENOMEM;
	r = api_write_atomic(f->path, text, strlen(text), 0600);
	free(text);
	return r;
}

static void file_destroy(struct api_store *s)
{
	struct api_store_file *f = s->priv;

	if (f)
		free(f->path);
	free(f);
}

static const struct api_store_ops api_store_file_ops = {
	.name = "file",
	.load = file_load,
	.save = file_save,
	.destroy = file_destroy,
};

int api_store_open_file(const char *dir, struct api_store **out)
{
	struct api_store *s = calloc(1, sizeof(*s));
	struct api_store_file *f = calloc(1, sizeof(*f));
	int r;

	if (!s || !f || asprintf(&f->path, "%s/config.json", dir) < 0) {
		free(s);
		free(f);
		return -ENOMEM;
	}
	s->ops = &api_store_file_ops;
	s->priv = f;
	r = s->ops->load(s, &s->config, &s->generation);
	if (r == -ENOENT) {
		s->config = api_store_empty_config();
		s->generation = 0;
		r = s->config ? 0 : -ENOMEM;
	}
	if (r) {
		api_store_destroy(s);
		return r;
	}
	*out = s;
	return 0;
}

void api_store_destroy(struct api_store *s)
{
	if (!s)
		return;
	s->closing = true;
	s->ops->destroy(s);
	json_decref(s->config);
	free(s);
}

int api_store_commit(struct api_store *s, json_t *config)
{
	int r;

	if (!config)
		return -ENOMEM;
	r = s->ops->save(s, config, s->generation + 1);
	if (r) {
		json_decref(config);
		return r;
	}
	json_decref(s->config);
	s->config = config;
	s->generation++;
	return 0;
}

struct commit_wait {
	struct api_store *s;
	json_t *config;
	uint64_t gen;
	void (*done)(void *ctx, int err);
	void *ctx;
};

static void commit_done(void *arg, int err)
{
	struct commit_wait *w = arg;

	if (w->s->closing) {
		/* The store is being destroyed: whoever asked is gone (the agent stops its
		 * server first), so only what the commit held is freed. */
		json_decref(w->config);
		free(w);
		return;
	}
	if (!err) {
		json_decref(w->s->config);
		w->s->config = w->config;
		w->s->generation = w->gen;
	} else {
		json_decref(w->config);
	}
	w->done(w->ctx, err);
	free(w);
}

int api_store_commit_async(struct api_store *s, json_t *config, void (*done)(void *ctx, int err),
			   void *ctx)
{
	struct commit_wait *w;
	int r;

	if (!s->ops->save_async)
		return api_store_commit(s, config);
	w = config ? calloc(1, sizeof(*w)) : NULL;
	if (!w) {
		json_decref(config);
		return -ENOMEM;
	}
	*w = (struct commit_wait){ s, config, s->generation + 1, done, ctx };
	r = s->ops->save_async(s, config, w->gen, commit_done, w);
	if (r) {
		json_decref(config);
		free(w);
		return r;
	}
	return 1;
}

const json_t *api_store_config(const struct api_store *s)
{
	return s->config;
}

uint64_t api_store_generation(const struct api_store *s)
{
	return s->generation;
}

json_t *api_store_copy(const struct api_store *s)
{
	return json_deep_copy(s->config);
}

const char *api_store_name(const struct api_store *s)
{
	return s->ops->name;
}

int api_store_refresh(struct api_store *s)
{
	return s->ops->refresh ? s->ops->refresh(s) : 0;
}
