// SPDX-License-Identifier: MIT
/*
 * Bond and RDMA port status from sysfs (api_sysfs.h). Every file is read with one small
 * read(2); a file that is missing or unreadable (a kernel without that attribute, an interface
 * going away while we look) leaves its field null rather than failing the whole answer.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api_sysfs.h"

const char *api_sysfs_root(void)
{
	const char *r = getenv("ISERGW_SYSFS");

	return r && *r ? r : "/sys";
}

bool api_ifname_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;
	const char *p;

	if (n == 0 || n > 15 || !strcmp(name, ".") || !strcmp(name, ".."))
		return false;
	for (p = name; *p; p++)
		if (*p == '/' || *p == ':' || (unsigned char)*p <= ' ' || *p == 0x7f)
			return false;
	return true;
}

/* The first line of a file, without its newline, in buf; false when it cannot be read. */
static bool read_line(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static bool read_line(char *buf, size_t len, const char *fmt, ...)
{
	char path[512];
	va_list ap;
	ssize_t n;
	int fd, w;

	va_start(ap, fmt);
	w = vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	if (w < 0 || (size_t)w >= sizeof(path))
		return false;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	do
		n = read(fd, buf, len - 1);
	while (n < 0 && errno == EINTR);
	close(fd);
	if (n < 0)
		return false;
	buf[n] = 0;
	buf[strcspn(buf, "\n")] = 0;
	return true;
}

/* A string field, or null when unreadable. */
static json_t *str_or_null(bool ok, const char *s)
{
	return ok ? json_string(s) : json_null();
}

/* "active-backup 1" -> "active-backup": the name without the kernel's number. */
static json_t *first_word(bool ok, char *s)
{
	if (!ok)
		return json_null();
	s[strcspn(s, " ")] = 0;
	return json_string(s);
}

static json_t *int_or_null(bool ok, const char *s)
{
	char *end;
	long long v;

	if (!ok)
		return json_null();
	errno = 0;
	v = strtoll(s, &end, 10);
	return errno || end == s ? json_null() : json_integer(v);
}

static json_t *bond_slave(const char *root, const char *bond, const char *slave,
			  long long *failures)
{
	char dir[400], v[128];
	json_t *o, *lf;
	bool ok;

	/* lower_<slave> is the bond's link to it; the slave's own folder has the same files. */
	snprintf(dir, sizeof(dir), "%s/class/net/%s/lower_%s/bonding_slave", root, bond, slave);
	if (!read_line(v, sizeof(v), "%s/state", dir))
		snprintf(dir, sizeof(dir), "%s/class/net/%s/bonding_slave", root, slave);
	o = json_object();
	json_object_set_new(o, "name", json_string(slave));
	ok = read_line(v, sizeof(v), "%s/state", dir);
	json_object_set_new(o, "state", str_or_null(ok, v));
	ok = read_line(v, sizeof(v), "%s/mii_status", dir);
	json_object_set_new(o, "mii_status", str_or_null(ok, v));
	ok = read_line(v, sizeof(v), "%s/link_failure_count", dir);
	lf = int_or_null(ok, v);
	if (json_is_integer(lf))
		*failures += json_integer_value(lf);
	json_object_set_new(o, "link_failure_count", lf);
	ok = read_line(v, sizeof(v), "%s/perm_hwaddr", dir);
	json_object_set_new(o, "perm_hwaddr", str_or_null(ok, v));
	return o;
}

json_t *api_sysfs_bond(const char *root, const char *name)
{
	char b[400], v[1024];
	long long failures = 0;
	json_t *o, *slaves;
	char *save = NULL, *s;
	bool ok;

	if (!api_ifname_ok(name))
		return NULL;
	snprintf(b, sizeof(b), "%s/class/net/%s/bonding", root, name);
	if (!read_line(v, sizeof(v), "%s/mode", b))
		return NULL;
	o = json_object();
	json_object_set_new(o, "name", json_string(name));
	json_object_set_new(o, "mode", first_word(true, v));
	ok = read_line(v, sizeof(v), "%s/fail_over_mac", b);
	json_object_set_new(o, "fail_over_mac", first_word(ok, v));
	ok = read_line(v, sizeof(v), "%s/miimon", b);
	json_object_set_new(o, "miimon", int_or_null(ok, v));
	ok = read_line(v, sizeof(v), "%s/mii_status", b);
	json_object_set_new(o, "mii_status", str_or_null(ok, v));
	ok = read_line(v, sizeof(v), "%s/active_slave", b);
	json_object_set_new(o, "active_slave", ok && *v ? json_string(v) : json_null());
	ok = read_line(v, sizeof(v), "%s/primary", b);
	json_object_set_new(o, "primary", str_or_null(ok, v));
	ok = read_line(v, sizeof(v), "%s/class/net/%s/address", root, name);
	json_object_set_new(o, "address", str_or_null(ok, v));
	slaves = json_array();
	if (read_line(v, sizeof(v), "%s/slaves", b))
		for (s = strtok_r(v, " ", &save); s; s = strtok_r(NULL, " ", &save))
			if (api_ifname_ok(s))
				json_array_append_new(slaves, bond_slave(root, name, s, &failures));
	json_object_set_new(o, "slaves", slaves);
	json_object_set_new(o, "failovers", json_integer(failures));
	return o;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Entry names of a folder, sorted; *n of them (malloc'ed array of malloc'ed names). */
static char **list_dir(const char *path, size_t *n)
{
	DIR *d = opendir(path);
	struct dirent *e;
	char **v = NULL, **nv;
	size_t cap = 0;

	*n = 0;
	if (!d)
		return NULL;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 16;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv)
				break;
			v = nv;
		}
		v[*n] = strdup(e->d_name);
		if (v[*n])
			(*n)++;
	}
	closedir(d);
	if (*n)
		qsort(v, *n, sizeof(*v), cmp_name);
	return v;
}

static void free_list(char **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

json_t *api_sysfs_bonds(const char *root)
{
	char path[400];
	json_t *a = json_array(), *b;
	char **names;
	size_t n, i;

	snprintf(path, sizeof(path), "%s/class/net", root);
	names = list_dir(path, &n);
	for (i = 0; i < n; i++) {
		b = api_sysfs_bond(root, names[i]);
		if (b)
			json_array_append_new(a, b);
	}
	free_list(names, n);
	return a;
}

/* "4: ACTIVE" -> 4 and "ACTIVE". */
static void numbered(json_t *o, const char *key, const char *numkey, bool ok, const char *v)
{
	const char *c = ok ? strchr(v, ':') : NULL;

	if (!ok) {
		json_object_set_new(o, key, json_null());
		if (numkey)
			json_object_set_new(o, numkey, json_null());
		return;
	}
	json_object_set_new(o, key, json_string(c ? c + 1 + strspn(c + 1, " ") : v));
	if (numkey)
		json_object_set_new(o, numkey, c ? json_integer(atoi(v)) : json_null());
}

/*
 * The netdev an RDMA device sits on, as `rdma link` reports it: rxe and siw name their parent
 * in "parent"; a RoCE port's first GID names its netdev (gid_attrs/ndevs/0); a PCI device has
 * its netdevs under device/net/.
 */
static json_t *rdma_netdev(const char *root, const char *dev, const char *port)
{
	char v[128], path[400];
	char **names;
	size_t n;
	json_t *r = json_null();

	if (port && read_line(v, sizeof(v), "%s/class/infiniband/%s/ports/%s/gid_attrs/ndevs/0",
			      root, dev, port) && api_ifname_ok(v))
		return json_string(v);
	if (read_line(v, sizeof(v), "%s/class/infiniband/%s/parent", root, dev) &&
	    api_ifname_ok(v))
		return json_string(v);
	snprintf(path, sizeof(path), "%s/class/infiniband/%s/device/net", root, dev);
	names = list_dir(path, &n);
	if (n) {
		json_decref(r);
		r = json_string(names[0]);
	}
	free_list(names, n);
	return r;
}

json_t *api_sysfs_rdma(const char *root)
{
	char path[400], v[128];
	json_t *a = json_array();
	char **devs, **ports;
	size_t nd, np, i, j;

	snprintf(path, sizeof(path), "%s/class/infiniband", root);
	devs = list_dir(path, &nd);
	for (i = 0; i < nd; i++) {
		json_t *d = json_object(), *pa = json_array();
		bool ok;

		json_object_set_new(d, "name", json_string(devs[i]));
		json_object_set_new(d, "netdev", rdma_netdev(root, devs[i], NULL));
		ok = read_line(v, sizeof(v), "%s/class/infiniband/%s/node_guid", root, devs[i]);
		json_object_set_new(d, "node_guid", str_or_null(ok, v));
		snprintf(path, sizeof(path), "%s/class/infiniband/%s/ports", root, devs[i]);
		ports = list_dir(path, &np);
		for (j = 0; j < np; j++) {
			json_t *p = json_object();
			char pp[400];

			snprintf(pp, sizeof(pp), "%s/class/infiniband/%s/ports/%s", root, devs[i],
				 ports[j]);
			json_object_set_new(p, "port", json_integer(atoi(ports[j])));
			ok = read_line(v, sizeof(v), "%s/state", pp);
			numbered(p, "state", "state_num", ok, v);
			ok = read_line(v, sizeof(v), "%s/phys_state", pp);
			numbered(p, "phys_state", NULL, ok, v);
			ok = read_line(v, sizeof(v), "%s/link_layer", pp);
			json_object_set_new(p, "link_layer", str_or_null(ok, v));
			ok = read_line(v, sizeof(v), "%s/rate", pp);
			json_object_set_new(p, "rate", str_or_null(ok, v));
			json_object_set_new(p, "netdev", rdma_netdev(root, devs[i], ports[j]));
			json_array_append_new(pa, p);
		}
		free_list(ports, np);
		/* The device's netdev is its first port's when it names none of its own. */
		if (json_is_null(json_object_get(d, "netdev")) && json_array_size(pa))
			json_object_set(d, "netdev",
					json_object_get(json_array_get(pa, 0), "netdev"));
		json_object_set_new(d, "ports", pa);
		json_array_append_new(a, d);
	}
	free_list(devs, nd);
	return a;
}
