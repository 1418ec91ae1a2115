// SPDX-License-Identifier: MIT
/*
 * isergwd: reads and validates the configuration, builds targets and portals, serves until
 * SIGINT/SIGTERM, then stops accepting, closes sessions, drains in-flight I/O (bounded) and
 * frees everything. SIGHUP re-reads the configuration file and applies the difference, as the
 * control socket's apply does.
 *
 *   isergwd [--config FILE | --state-dir DIR] [--check] [--debug LIST] [--foreground]
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "conf.h"
#include "ctl.h"
#include "gw_log.h"
#include "gw_loop.h"
#include "isc.h"
#include "net.h"

#define DRAIN_MAX_MS 10000

static struct gw_loop loop;
static bool stop_requested;
/* What SIGHUP needs: the file, the running gateway and its control socket once they exist. */
static const char *reload_path;
static struct ctl_gw *reload_gw;
static struct ctl_sock *reload_ctl;

static void usage(FILE *f)
{
	fprintf(f,
		"usage: isergwd [--config FILE | --state-dir DIR] [--check] [--debug LIST] "
		"[--foreground] [--control-socket PATH]\n"
		"  --config FILE     JSON configuration (default /etc/isergw/isergwd.json)\n"
		"  --state-dir DIR   use DIR/isergwd.json, writing the demo configuration there "
		"first if missing\n"
		"  --check           validate the configuration, report every error, exit 0 or 1\n"
		"  --debug LIST      debug output for components: iscsi,dmv,scsi,bs,... or all\n"
		"  --foreground      stay in the foreground (the default, for init scripts)\n"
		"  --control-socket PATH  unix socket for the agent (default: gateway.control_socket)\n");
}

/* SIGHUP: the file through the control object's own apply, the one way a configuration is
 * applied (the gateway section, fencing and the network model's portals included). A file with
 * errors changes nothing. */
static void reload_config(void)
{
	json_error_t jerr;
	json_t *root, *req, *reply;

	if (!reload_gw) {
		/* Starting: the file was just read; stopping: nothing to apply to. */
		gw_warn("main", "SIGHUP while not serving: ignored");
		return;
	}
	if (ctl_sock_managed(reload_ctl)) {
		/* The agent's store is the truth: applying the file would be undone at the agent's
		 * next write or reconnect, silently. Say so instead, and change nothing. */
		gw_err("main", "SIGHUP: not applying %s: this gateway's configuration is managed by "
		       "its agent over the control socket; change it through the REST API "
		       "(isergwctl) instead", reload_path);
		sd_notify(0, "STATUS=serving; reload refused: configuration managed by the agent");
		return;
	}
	sd_notify(0, "RELOADING=1\nSTATUS=reloading the configuration");
	gw_info("main", "SIGHUP: reloading %s", reload_path);
	root = json_load_file(reload_path, 0, &jerr);
	if (!root) {
		gw_err("main", "%s: line %d: %s: nothing changed", reload_path, jerr.line, jerr.text);
	} else {
		req = json_pack("{s:s, s:O}", "op", "apply", "config", root);
		reply = req ? ctl_sock_handle(reload_ctl, req) : NULL;
		if (json_is_true(json_object_get(reply, "ok"))) {
			gw_info("main", "%s applied", reload_path);
		} else {
			const char *m = json_string_value(json_object_get(reply, "message"));

			gw_err("main", "%s not applied: %s", reload_path, m ? m : "out of memory");
		}
		json_decref(reply);
		json_decref(req);
	}
	json_decref(root);
	sd_notify(0, "READY=1\nSTATUS=serving");
}

static void on_signal(struct gw_signal *s, int signo)
{
	(void)s;
	if (signo == SIGHUP) {
		reload_config();
		return;
	}
	gw_info("main", "%s received: stopping", strsignal(signo));
	stop_requested = true;
	gw_loop_stop(&loop, 0);
}

static void print_errors(const struct gw_errlist *errs, const char *file)
{
	size_t i;

	for (i = 0; i < errs->n; i++) {
		if (errs->v[i].field && *errs->v[i].field)
			fprintf(stderr, "%s: %s: %s\n", file, errs->v[i].field, errs->v[i].msg);
		else
			fprintf(stderr, "%s: %s\n", file, errs->v[i].msg);
	}
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "state-dir", required_argument, NULL, 's' },
		{ "check", no_argument, NULL, 'k' },
		{ "debug", required_argument, NULL, 'd' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "control-socket", required_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	const char *config = NULL, *state_dir = NULL, *debug = NULL, *ctl_path = NULL;
	char *ctl_conf_path = NULL;
	struct ctl_gateway_conf ctl_gconf = { 0 };
	struct ctl_sock *ctl = NULL;
	struct net_mon *net = NULL;
	struct ctl_loops *loops = NULL;
	char *state_config = NULL, *dbg = NULL;
	struct ctl_gw *gw = NULL;
	struct ctl_config cfg;
	struct gw_errlist errs;
	struct gw_signal sig;
	bool check = false, sig_on = false;
	uint64_t deadline;
	uint32_t boot_wait = 0;
	int c, r, rc = 1;

	gw_log_set_ident("isergwd");
	while ((c = getopt_long(argc, argv, "c:s:kd:fS:h", opts, NULL)) != -1) {
		switch (c) {
		case 'c': config = optarg; break;
		case 's': state_dir = optarg; break;
		case 'k': check = true; break;
		case 'd': debug = optarg; break;
		case 'f': break;
		case 'S': ctl_path = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc || (config && state_dir)) {
		usage(stderr);
		return 2;
	}
	if (debug && gw_log_set_debug(debug)) {
		fprintf(stderr, "isergwd: bad --debug list \"%s\"\n", debug);
		return 2;
	}
	/* Writes and broken pipes are errors returned by write, not signals. */
	signal(SIGPIPE, SIG_IGN);
	if (state_dir) {
		if (check) {
			/* --check never writes: validate what is there, or the demo. */
			if (asprintf(&state_config, "%s/isergwd.json", state_dir) < 0)
				return 1;
		} else if (conf_ensure_state(state_dir, &state_config)) {
			return 1;
		}
		config = state_config;
	}
	if (!config)
		config = "/etc/isergw/isergwd.json";

	gw_errlist_init(&errs);
	if (check && state_dir && access(config, F_OK) != 0) {
		/* Nothing written yet: what would be written is what gets checked. */
		json_t *demo = conf_demo(state_dir);

		r = demo ? conf_parse(demo, &cfg, &errs) : -ENOMEM;
		json_decref(demo);
	} else {
		r = conf_load_file(config, &cfg, &errs);
	}
	if (r) {
		print_errors(&errs, config);
		fprintf(stderr, "isergwd: %zu error%s in %s\n", errs.n, errs.n == 1 ? "" : "s",
			config);
		goto out_errs;
	}
	if (check) {
		printf("%s: configuration is valid (%zu portal%s, %zu target%s)\n", config,
		       cfg.isc->nportals, cfg.isc->nportals == 1 ? "" : "s", cfg.isc->ntargets,
		       cfg.isc->ntargets == 1 ? "" : "s");
		conf_free(&cfg);
		rc = 0;
		goto out_errs;
	}
	/* The file's log_debug and --debug add up. */
	if (cfg.gateway.log_debug && *cfg.gateway.log_debug) {
		if (asprintf(&dbg, "%s%s%s", cfg.gateway.log_debug, debug ? "," : "",
			     debug ? debug : "") >= 0)
			gw_log_set_debug(dbg);
		free(dbg);
	}
	r = gw_loop_init(&loop);
	if (r) {
		conf_free(&cfg);
		goto out_errs;
	}
	if (gw_signal_init(&sig, &loop, sigs, 3, on_signal) == 0)
		sig_on = true;
	/* After the signalfd: the loop threads inherit the blocked signals. */
	r = ctl_loops_start(&loop, cfg.gateway.loops, &loops, &errs);
	if (r) {
		print_errors(&errs, config);
		conf_free(&cfg);
		goto out_loop;
	}
	r = ctl_gw_create_loops(&loop, &loops->set, cfg.isc, &gw, &errs);
	cfg.isc = NULL;		/* the gw owns it now, on success and failure */
	/* The control socket starts once the gateway serves; keep what it needs. */
	if (!r)
		ctl_gw_set_data_memory(gw, cfg.gateway.data_memory);
	ctl_gconf.log_debug = cfg.gateway.log_debug;
	ctl_gconf.boot_wait = cfg.gateway.boot_wait;
	boot_wait = cfg.gateway.boot_wait;
	ctl_gconf.fence_margin_ms = cfg.gateway.fence_margin_ms;
	ctl_gconf.loops = cfg.gateway.loops;	/* as configured: "config" shows it */
	ctl_gconf.poll_us = cfg.gateway.poll_us;
	ctl_loops_set_poll(loops, cfg.gateway.poll_us);
	cfg.gateway.log_debug = NULL;
	if (cfg.gateway.control_socket && *cfg.gateway.control_socket)
		ctl_conf_path = strdup(cfg.gateway.control_socket);
	conf_free(&cfg);
	if (r) {
		print_errors(&errs, config);
		gw = NULL;
		goto out_loop;
	}
	/* Remote backstores log in in parallel; READY=1 waits until each has a path or has had
	 * its first login (initial_login_retry_max), or gateway.boot_wait ran out, whichever comes
	 * first. LUNs still without a path answer NOT READY, becoming ready (02/04/01), which
	 * initiators retry, and keep logging in; their first login reports the size with a unit
	 * attention. */
	if (!ctl_gw_settled(gw)) {
		uint64_t t0 = gw_now_ms();

		sd_notify(0, "STATUS=logging in to back ends");
		r = ctl_gw_boot_wait(&loop, gw, (uint64_t)boot_wait * 1000);
		if (r == -ETIMEDOUT)
			gw_info("main", "boot_wait (%u s) reached after %llu ms: LUNs without a "
				"path answer NOT READY (becoming ready) and log in in the background",
				boot_wait, (unsigned long long)(gw_now_ms() - t0));
		else if (r == 0)
			gw_info("main", "back ends settled in %llu ms",
				(unsigned long long)(gw_now_ms() - t0));
		r = 0;
	}
	/* The network model: bonds, RDMA ports, each portal's chain, verdicts in the log. It only
	 * reads; without it (no rtnetlink) the gateway serves all the same. */
	r = net_mon_create(&loop, &net);
	if (r)
		gw_warn("main", "no network model: %s", strerror(-r));
	else
		net_mon_set_portals(net, ctl_gw_conf(gw)->portals, ctl_gw_conf(gw)->nportals);
	ctl_net_follow(gw, net);
	r = ctl_gw_listen(gw);
	if (r)
		goto out_gw;
	/* Without a path the control object still exists: SIGHUP applies through it. */
	r = ctl_sock_create(&loop, ctl_path ? ctl_path : ctl_conf_path, gw, &ctl_gconf, &ctl);
	if (r)
		goto out_gw;
	ctl_sock_set_net(ctl, net);
	ctl_sock_set_loops(ctl, loops);
	/* SIGHUP applies the file from now on: READY=1 is never sent before this one. */
	reload_path = config;
	reload_gw = gw;
	reload_ctl = ctl;
	sd_notify(0, "READY=1\nSTATUS=serving");
	gw_info("main", "ready");
	r = gw_loop_run(&loop);
	if (r < 0)
		goto out_gw;
	rc = 0;
out_gw:
	sd_notify(0, "STOPPING=1");
	/* No reconfiguration while draining. */
	reload_gw = NULL;
	reload_ctl = NULL;
	ctl_sock_destroy(ctl);
	net_mon_destroy(net);
	ctl_gw_stop(gw);
	/* Drain: commands still in the backstores complete and their sessions go away. */
	deadline = gw_now_ms() + DRAIN_MAX_MS;
	while (!ctl_gw_idle(gw) && gw_now_ms() < deadline)
		gw_loop_run_once(&loop, 100);
	if (!ctl_gw_idle(gw)) {
		gw_warn("main", "I/O still in flight after %u ms: exiting anyway", DRAIN_MAX_MS);
		rc = rc ? rc : 1;
		/* Freeing what backstore threads still use would be worse than a leak. */
		goto out_loop_nofree;
	}
	/* The other loops' threads stop (each runs what was posted to it first), so the main
	 * thread may free what they owned. */
	ctl_loops_stop(loops);
	/* Their last messages (a nexus every LU owner forgets) name the targets: run them while
	 * those still exist. */
	ctl_loops_drain(loops);
	ctl_gw_destroy(gw);
out_loop:
	ctl_loops_destroy(loops);
	if (sig_on)
		gw_signal_fini(&sig);
	gw_loop_fini(&loop);
out_loop_nofree:
	if (rc == 0)
		gw_info("main", "stopped");
out_errs:
	free(ctl_gconf.log_debug);
	free(ctl_conf_path);
	gw_errlist_fini(&errs);
	free(state_config);
	return rc;
}
