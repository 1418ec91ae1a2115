// SPDX-License-Identifier: MIT
/*
 * dm-multipath awareness: multipathd's JSON parsed into the LUN status, the hang warning, the
 * sysfs probe, and the client against a stand-in multipathd speaking libmpathcmd's framing on
 * an abstract socket of its own.
 *
 * The sample is written by hand in the layout of multipathd's "show maps json" (format version
 * 0.1, the keys and value spellings of libmultipath's JSON printer), not captured from a live
 * multipathd: two maps over iSCSI paths, one healthy with a bounded no_path_retry, one with a
 * failed path and queue_if_no_path without a limit.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include "gw_log.h"
#include "mp_dm.h"

static const char sample_maps[] =
"{\n"
"   \"major_version\": 0,\n"
"   \"minor_version\": 1,\n"
"   \"maps\": [{\n"
"      \"name\" : \"mpatha\",\n"
"      \"uuid\" : \"360014052e4d5b7e0a1b4c8f9d3e2a101\",\n"
"      \"sysfs\" : \"dm-0\",\n"
"      \"failback\" : \"immediate\",\n"
"      \"queueing\" : \"5 chk\",\n"
"      \"paths\" : 2,\n"
"      \"write_prot\" : \"rw\",\n"
"      \"dm_st\" : \"active\",\n"
"      \"features\" : \"1 queue_if_no_path\",\n"
"      \"hwhandler\" : \"1 alua\",\n"
"      \"action\" : \"\",\n"
"      \"path_faults\" : 0,\n"
"      \"vend\" : \"LIO-ORG \",\n"
"      \"prod\" : \"disk0           \",\n"
"      \"rev\" : \"4.0 \",\n"
"      \"switch_grp\" : 0,\n"
"      \"map_loads\" : 1,\n"
"      \"total_q_time\" : 0,\n"
"      \"q_timeouts\" : 0,\n"
"      \"path_groups\": [{\n"
"         \"selector\" : \"service-time 0\",\n"
"         \"pri\" : 50,\n"
"         \"dm_st\" : \"active\",\n"
"         \"marginal_st\" : \"normal\",\n"
"         \"group\" : 1,\n"
"         \"paths\": [{\n"
"            \"dev\" : \"sda\",\n"
"            \"dev_t\" : \"8:0\",\n"
"            \"dm_st\" : \"active\",\n"
"            \"dev_st\" : \"running\",\n"
"            \"chk_st\" : \"ready\",\n"
"            \"checker\" : \"tur\",\n"
"            \"pri\" : 50,\n"
"            \"host_wwnn\" : \"[undef]\",\n"
"            \"target_wwnn\" : \"iqn.2026-11.org.isergw:vm\",\n"
"            \"host_wwpn\" : \"[undef]\",\n"
"            \"target_wwpn\" : \"[undef]\",\n"
"            \"host_adapter\" : \"10.77.1.1\",\n"
"            \"marginal_st\" : \"normal\"\n"
"         },{\n"
"            \"dev\" : \"sdb\",\n"
"            \"dev_t\" : \"8:16\",\n"
"            \"dm_st\" : \"active\",\n"
"            \"dev_st\" : \"running\",\n"
"            \"chk_st\" : \"ready\",\n"
"            \"checker\" : \"tur\",\n"
"            \"pri\" : 50,\n"
"            \"host_wwnn\" : \"[undef]\",\n"
"            \"target_wwnn\" : \"iqn.2026-11.org.isergw:vm\",\n"
"            \"host_wwpn\" : \"[undef]\",\n"
"            \"target_wwpn\" : \"[undef]\",\n"
"            \"host_adapter\" : \"10.77.2.1\",\n"
"            \"marginal_st\" : \"normal\"\n"
"         }]\n"
"      }]\n"
"   },{\n"
"      \"name\" : \"mpathb\",\n"
"      \"uuid\" : \"360014059c1e2d3f4a5b6c7d8e9f0a102\",\n"
"      \"sysfs\" : \"dm-1\",\n"
"      \"failback\" : \"-\",\n"
"      \"queueing\" : \"on\",\n"
"      \"paths\" : 1,\n"
"      \"write_prot\" : \"rw\",\n"
"      \"dm_st\" : \"active\",\n"
"      \"features\" : \"1 queue_if_no_path\",\n"
"      \"hwhandler\" : \"0\",\n"
"      \"action\" : \"\",\n"
"      \"path_faults\" : 3,\n"
"      \"vend\" : \"IET     \",\n"
"      \"prod\" : \"VIRTUAL-DISK    \",\n"
"      \"rev\" : \"0001\",\n"
"      \"switch_grp\" : 1,\n"
"      \"map_loads\" : 2,\n"
"      \"total_q_time\" : 0,\n"
"      \"q_timeouts\" : 0,\n"
"      \"path_groups\": [{\n"
"         \"selector\" : \"service-time 0\",\n"
"         \"pri\" : 1,\n"
"         \"dm_st\" : \"enabled\",\n"
"         \"marginal_st\" : \"normal\",\n"
"         \"group\" : 1,\n"
"         \"paths\": [{\n"
"            \"dev\" : \"sdc\",\n"
"            \"dev_t\" : \"8:32\",\n"
"            \"dm_st\" : \"failed\",\n"
"            \"dev_st\" : \"running\",\n"
"            \"chk_st\" : \"faulty\",\n"
"            \"checker\" : \"tur\",\n"
"            \"pri\" : 1,\n"
"            \"host_wwnn\" : \"[undef]\",\n"
"            \"target_wwnn\" : \"iqn.2001-04.com.example:b\",\n"
"            \"host_wwpn\" : \"[undef]\",\n"
"            \"target_wwpn\" : \"[undef]\",\n"
"            \"host_adapter\" : \"10.78.1.1\",\n"
"            \"marginal_st\" : \"normal\"\n"
"         }]\n"
"      },{\n"
"         \"selector\" : \"service-time 0\",\n"
"         \"pri\" : 1,\n"
"         \"dm_st\" : \"active\",\n"
"         \"marginal_st\" : \"normal\",\n"
"         \"group\" : 2,\n"
"         \"paths\": [{\n"
"            \"dev\" : \"sdd\",\n"
"            \"dev_t\" : \"8:48\",\n"
"            \"dm_st\" : \"active\",\n"
"            \"dev_st\" : \"running\",\n"
"            \"chk_st\" : \"ready\",\n"
"            \"checker\" : \"tur\",\n"
"            \"pri\" : 1,\n"
"            \"host_wwnn\" : \"[undef]\",\n"
"            \"target_wwnn\" : \"iqn.2001-04.com.example:b\",\n"
"            \"host_wwpn\" : \"[undef]\",\n"
"            \"target_wwpn\" : \"[undef]\",\n"
"            \"host_adapter\" : \"10.78.2.1\",\n"
"            \"marginal_st\" : \"normal\"\n"
"         }]\n"
"      }]\n"
"   }]\n"
"}\n";

/* Captured: "multipathd show maps json" of multipath-tools 0.9.4 in the VM rig's Debian 12 guest
 * (tests/vm/guest/suite-dm-mpath.sh keeps it in build/vm/run/share/logs/dm-mpath/), over tgtd
 * reached through two portals, no_path_retry queue. */
static const char captured_maps[] =
"{\n"
"   \"major_version\": 0,\n"
"   \"minor_version\": 1,\n"
"   \"maps\": [{\n"
"      \"name\" : \"mpatha\",\n"
"      \"uuid\" : \"3600000000000000000000000a0000001\",\n"
"      \"sysfs\" : \"dm-0\",\n"
"      \"failback\" : \"-\",\n"
"      \"queueing\" : \"on\",\n"
"      \"paths\" : 2,\n"
"      \"write_prot\" : \"rw\",\n"
"      \"dm_st\" : \"active\",\n"
"      \"features\" : \"1 queue_if_no_path\",\n"
"      \"hwhandler\" : \"0\",\n"
"      \"action\" : \"create\",\n"
"      \"path_faults\" : 0,\n"
"      \"vend\" : \"IET\",\n"
"      \"prod\" : \"VIRTUAL-DISK\",\n"
"      \"rev\" : \"0001\",\n"
"      \"switch_grp\" : 0,\n"
"      \"map_loads\" : 1,\n"
"      \"total_q_time\" : 0,\n"
"      \"q_timeouts\" : 0,\n"
"      \"path_groups\": [{\n"
"         \"selector\" : \"service-time 0\",\n"
"         \"pri\" : 1,\n"
"         \"dm_st\" : \"active\",\n"
"         \"marginal_st\" : \"normal\",\n"
"         \"group\" : 1,\n"
"         \"paths\": [{\n"
"            \"dev\" : \"sda\",\n"
"            \"dev_t\" : \"8:0\",\n"
"            \"dm_st\" : \"active\",\n"
"            \"dev_st\" : \"running\",\n"
"            \"chk_st\" : \"ready\",\n"
"            \"checker\" : \"tur\",\n"
"            \"pri\" : 1,\n"
"            \"host_wwnn\" : \"[undef]\",\n"
"            \"target_wwnn\" : \"iqn.2026-11.org.isergw:vm-mpath-be\",\n"
"            \"host_wwpn\" : \"[undef]\",\n"
"            \"target_wwpn\" : \"[undef]\",\n"
"            \"host_adapter\" : \"10.200.6.1\",\n"
"            \"lun_hex\" : \"0x0001000000000000\",\n"
"            \"marginal_st\" : \"normal\"\n"
"         }]\n"
"      },{\n"
"         \"selector\" : \"service-time 0\",\n"
"         \"pri\" : 1,\n"
"         \"dm_st\" : \"enabled\",\n"
"         \"marginal_st\" : \"normal\",\n"
"         \"group\" : 2,\n"
"         \"paths\": [{\n"
"            \"dev\" : \"sdb\",\n"
"            \"dev_t\" : \"8:16\",\n"
"            \"dm_st\" : \"active\",\n"
"            \"dev_st\" : \"running\",\n"
"            \"chk_st\" : \"ready\",\n"
"            \"checker\" : \"tur\",\n"
"            \"pri\" : 1,\n"
"            \"host_wwnn\" : \"[undef]\",\n"
"            \"target_wwnn\" : \"iqn.2026-11.org.isergw:vm-mpath-be\",\n"
"            \"host_wwpn\" : \"[undef]\",\n"
"            \"target_wwpn\" : \"[undef]\",\n"
"            \"host_adapter\" : \"10.200.6.1\",\n"
"            \"lun_hex\" : \"0x0001000000000000\",\n"
"            \"marginal_st\" : \"normal\"\n"
"         }]\n"
"      }]\n"
"   }]\n"
"}\n";

static const char *pstr(const json_t *st, size_t i, const char *key)
{
	return json_string_value(json_object_get(json_array_get(json_object_get(st, "paths"), i),
						 key));
}

Test(mp_dm, a_healthy_map_and_its_paths)
{
	const char *err = NULL;
	json_t *st = mp_dm_parse(sample_maps, sizeof(sample_maps), "mpatha", &err);

	cr_assert_not_null(st, "%s", err);
	cr_assert_str_eq(json_string_value(json_object_get(st, "map")), "mpatha");
	cr_assert_str_eq(json_string_value(json_object_get(st, "sysfs")), "dm-0");
	cr_assert_str_eq(json_string_value(json_object_get(st, "state")), "ready");
	cr_assert_str_eq(json_string_value(json_object_get(st, "features")), "1 queue_if_no_path");
	cr_assert_str_eq(json_string_value(json_object_get(st, "queueing")), "5 chk");
	cr_assert_null(json_object_get(st, "warning"), "a bounded no_path_retry never hangs");
	cr_assert_eq(json_array_size(json_object_get(st, "paths")), 2);
	cr_assert_str_eq(pstr(st, 0, "dev"), "sda");
	cr_assert_str_eq(pstr(st, 1, "dev"), "sdb");
	cr_assert_str_eq(pstr(st, 1, "dev_t"), "8:16");
	cr_assert_str_eq(pstr(st, 1, "dm_st"), "active");
	cr_assert_str_eq(pstr(st, 1, "chk_st"), "ready");
	cr_assert_str_eq(pstr(st, 1, "checker"), "tur");
	cr_assert_str_eq(pstr(st, 1, "state"), "active");
	cr_assert_eq(json_integer_value(json_object_get(json_array_get(
		json_object_get(st, "paths"), 0), "priority")), 50);
	json_decref(st);
}

Test(mp_dm, a_reply_captured_from_a_real_multipathd)
{
	const char *err = NULL;
	json_t *st = mp_dm_parse(captured_maps, sizeof(captured_maps), "mpatha", &err);

	cr_assert_not_null(st, "%s", err);
	cr_assert_str_eq(json_string_value(json_object_get(st, "state")), "ready");
	cr_assert_str_eq(json_string_value(json_object_get(st, "queueing")), "on");
	cr_assert_str_eq(json_string_value(json_object_get(st, "sysfs")), "dm-0");
	cr_assert_eq(json_array_size(json_object_get(st, "paths")), 2);
	cr_assert_str_eq(pstr(st, 0, "dev"), "sda");
	cr_assert_str_eq(pstr(st, 1, "dev"), "sdb");
	cr_assert_str_eq(pstr(st, 1, "group_state"), "enabled");
	cr_assert_eq(json_integer_value(json_object_get(json_array_get(
		json_object_get(st, "paths"), 1), "group")), 2);
	cr_assert_not_null(json_object_get(st, "warning"), "queue_if_no_path with queueing on");
	json_decref(st);
}

Test(mp_dm, a_failed_path_and_a_map_that_would_hang)
{
	json_t *st = mp_dm_parse(sample_maps, sizeof(sample_maps), "mpathb", NULL), *p;

	cr_assert_not_null(st);
	cr_assert_str_eq(json_string_value(json_object_get(st, "state")), "degraded");
	cr_assert_eq(json_integer_value(json_object_get(st, "path_faults")), 3);
	cr_assert_eq(json_array_size(json_object_get(st, "paths")), 2);
	cr_assert_str_eq(pstr(st, 0, "dev"), "sdc");
	cr_assert_str_eq(pstr(st, 0, "state"), "down");
	cr_assert_str_eq(pstr(st, 0, "dm_st"), "failed");
	cr_assert_str_eq(pstr(st, 0, "chk_st"), "faulty");
	cr_assert_str_eq(pstr(st, 0, "group_state"), "enabled");
	p = json_array_get(json_object_get(st, "paths"), 0);
	cr_assert(json_is_false(json_object_get(p, "up")));
	cr_assert_eq(json_integer_value(json_object_get(p, "group")), 1);
	cr_assert_str_eq(pstr(st, 1, "state"), "active");
	cr_assert_eq(json_integer_value(json_object_get(json_array_get(
		json_object_get(st, "paths"), 1), "group")), 2);
	cr_assert_not_null(strstr(json_string_value(json_object_get(st, "warning")),
				  "queue_if_no_path"), "queue forever must be warned about");
	json_decref(st);
}

Test(mp_dm, show_map_name_json_and_the_old_bracketed_states)
{
	static const char one[] =
		"{ \"major_version\": 0, \"minor_version\": 1, \"map\": { \"name\": \"mpathc\","
		" \"features\": \"0\", \"queueing\": \"off\", \"path_groups\": [ { \"dm_st\":"
		" \"active\", \"paths\": [ { \"dev\": \"sde\", \"dm_st\": \"[active]\","
		" \"chk_st\": \"[ready]\" }, { \"dev\": \"sdf\", \"dm_st\": \"[failed]\","
		" \"chk_st\": \"[faulty]\" } ] } ] } }\n";
	json_t *st = mp_dm_parse(one, sizeof(one), "mpathc", NULL);

	cr_assert_not_null(st);
	cr_assert_str_eq(pstr(st, 0, "state"), "active");
	cr_assert_str_eq(pstr(st, 1, "state"), "down");
	cr_assert_str_eq(json_string_value(json_object_get(st, "state")), "degraded");
	cr_assert_null(json_object_get(st, "warning"));
	json_decref(st);
}

Test(mp_dm, unknown_maps_and_refusals_are_named)
{
	const char *err = NULL;

	cr_assert_null(mp_dm_parse(sample_maps, sizeof(sample_maps), "mpathz", &err));
	cr_assert_str_eq(err, "multipathd does not know the map");
	err = NULL;
	cr_assert_null(mp_dm_parse("fail\n", 6, "mpatha", &err));
	cr_assert_str_eq(err, "multipathd refused the command");
	err = NULL;
	cr_assert_null(mp_dm_parse("{\"maps\": [", 10, "mpatha", &err));
	cr_assert_str_eq(err, "multipathd's answer is not JSON");
	cr_assert_null(mp_dm_parse("", 0, "mpatha", NULL));
}

Test(mp_dm, which_settings_hang)
{
	cr_assert_not_null(mp_dm_hang_warning("1 queue_if_no_path", "on"));
	cr_assert_not_null(mp_dm_hang_warning("1 queue_if_no_path", "-"));
	cr_assert_not_null(mp_dm_hang_warning("2 queue_if_no_path retain_attached_hw_handler",
					      NULL));
	cr_assert_null(mp_dm_hang_warning("1 queue_if_no_path", "12 chk"));
	cr_assert_null(mp_dm_hang_warning("1 queue_if_no_path", "25 sec"));
	cr_assert_null(mp_dm_hang_warning("1 queue_if_no_path", "off"));
	cr_assert_null(mp_dm_hang_warning("0", "on"));
	cr_assert_null(mp_dm_hang_warning(NULL, "on"));
}

/* ---- sysfs probe on a stand-in tree ---------------------------------------------------- */

static void put(const char *root, const char *rel, const char *text)
{
	char path[512], cmd[600];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", path);
	cr_assert_eq(system(cmd), 0);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
}

Test(mp_dm, probe_tells_multipath_maps_from_other_dm_devices)
{
	char root[] = "/tmp/mp-dm-sysfs.XXXXXX", name[64], cmd[128];

	cr_assert_not_null(mkdtemp(root));
	put(root, "dev/block/254:0/dm/uuid", "mpath-360014052e4d5b7e0a1b4c8f9d3e2a101\n");
	put(root, "dev/block/254:0/dm/name", "mpatha\n");
	put(root, "dev/block/254:1/dm/uuid", "LVM-abcdefABCDEF0123456789\n");
	put(root, "dev/block/254:1/dm/name", "vg0-lv0\n");
	cr_assert_eq(mp_dm_probe(root, makedev(254, 0), name, sizeof(name)), 1);
	cr_assert_str_eq(name, "mpatha");
	cr_assert_eq(mp_dm_probe(root, makedev(254, 1), name, sizeof(name)), 0, "LVM is not");
	cr_assert_eq(mp_dm_probe(root, makedev(8, 0), name, sizeof(name)), 0, "not dm at all");
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	cr_assert_eq(system(cmd), 0);
}

/* ---- the client against a stand-in multipathd ------------------------------------------ */

struct fake_mpd {
	int lfd;
	char cmd[256];
	int served;
};

static void *fake_mpd_serve(void *arg)
{
	struct fake_mpd *m = arg;
	size_t len, rlen = sizeof(sample_maps);
	int fd = accept(m->lfd, NULL, NULL);

	if (fd < 0)
		return NULL;
	if (recv(fd, &len, sizeof(len), MSG_WAITALL) == (ssize_t)sizeof(len) &&
	    len <= sizeof(m->cmd) && recv(fd, m->cmd, len, MSG_WAITALL) == (ssize_t)len) {
		/* The reply in two pieces, as a busy multipathd may send it. */
		send(fd, &rlen, sizeof(rlen), MSG_NOSIGNAL);
		send(fd, sample_maps, 100, MSG_NOSIGNAL);
		usleep(20000);
		send(fd, sample_maps + 100, rlen - 100, MSG_NOSIGNAL);
		m->served++;
	}
	close(fd);
	return NULL;
}

static int fake_listen(const char *name)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	memcpy(sa.sun_path + 1, name, strlen(name));
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa,
			  (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name))),
		     0, "%s", strerror(errno));
	cr_assert_eq(listen(fd, 4), 0);
	return fd;
}

Test(mp_dm, asks_multipathd_on_the_loop_and_shows_the_map)
{
	struct gw_loop loop;
	struct fake_mpd m = { 0 };
	struct mp_dm *dm;
	pthread_t th;
	char sock[64];
	json_t *st;
	int i;

	gw_log_set_level(GW_LOG_WARN - 1);
	snprintf(sock, sizeof(sock), "/isergw/test/multipathd.%d", getpid());
	m.lfd = fake_listen(sock);
	cr_assert_eq(pthread_create(&th, NULL, fake_mpd_serve, &m), 0);
	cr_assert_eq(gw_loop_init(&loop), 0);
	cr_assert_eq(mp_dm_create(&loop, "/dev/dm-1", "mpathb", sock, 60000, &dm), 0);
	for (i = 0; i < 500 && !mp_dm_answers(dm); i++)
		gw_loop_run_once(&loop, 10);
	pthread_join(th, NULL);
	cr_assert_eq(m.served, 1);
	cr_assert_str_eq(m.cmd, "show map mpathb json", "libmpathcmd framing: NUL included");
	cr_assert_eq(mp_dm_answers(dm), 1);
	st = mp_dm_status(dm);
	cr_assert_str_eq(json_string_value(json_object_get(st, "multipathd")), "ok");
	cr_assert_str_eq(json_string_value(json_object_get(st, "map")), "mpathb");
	cr_assert_str_eq(json_string_value(json_object_get(st, "state")), "degraded");
	cr_assert_str_eq(pstr(st, 0, "chk_st"), "faulty");
	cr_assert_not_null(json_object_get(st, "warning"));
	json_decref(st);
	mp_dm_destroy(dm);
	close(m.lfd);
	gw_loop_fini(&loop);
}

Test(mp_dm, without_multipathd_the_status_says_so)
{
	struct gw_loop loop;
	struct mp_dm *dm;
	char sock[64];
	json_t *st;
	int i;

	gw_log_set_level(GW_LOG_ERR);
	snprintf(sock, sizeof(sock), "/isergw/test/nobody.%d", getpid());
	cr_assert_eq(gw_loop_init(&loop), 0);
	cr_assert_eq(mp_dm_create(&loop, "/dev/dm-0", "mpatha", sock, 60000, &dm), 0);
	for (i = 0; i < 20; i++)
		gw_loop_run_once(&loop, 5);
	st = mp_dm_status(dm);
	cr_assert_str_eq(json_string_value(json_object_get(st, "state")), "unknown");
	cr_assert_str_eq(json_string_value(json_object_get(st, "map")), "mpatha");
	cr_assert_not_null(strstr(json_string_value(json_object_get(st, "multipathd")),
				  "refused"), "%s",
			   json_string_value(json_object_get(st, "multipathd")));
	cr_assert_eq(mp_dm_answers(dm), 0);
	json_decref(st);
	mp_dm_destroy(dm);
	gw_loop_fini(&loop);
}
