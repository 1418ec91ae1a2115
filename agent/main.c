// SPDX-License-Identifier: MIT
/*
 * isergw-agent: the REST agent (docs/REST.md).
 *
 *   isergw-agent --state-dir DIR [--listen ADDR:PORT] [--gateway-socket PATH]
 *                [--tls-cert FILE --tls-key FILE [--allow-remote]] [--body-max BYTES]
 *                [--debug LIST] [--webui-dir DIR] [--networkd-dir DIR] [limits: see usage()]
 *                [--store etcd --etcd-endpoints URL[,URL] --cluster-prefix /isergw/NAME
 *                 --gateway-id NAME --port-group N [--lease-ttl SECONDS]
 *                 [--etcd-ca PEM] [--etcd-cert PEM --etcd-key PEM]]
 *   isergw-agent --state-dir DIR --add-token NAME [--role admin|read]
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <systemd/sd-daemon.h>

#include "api_agent.h"
#include "api_auth.h"
#include "api_http.h"
#include "gw_log.h"
#include "gw_loop.h"

static struct gw_loop loop;
/* The agent and whether it serves: SIGHUP reloads its token list only then. */
static struct api_agent agent;
static bool agent_up;

static void usage(FILE *f)
{
	fprintf(f,
		"usage: isergw-agent --state-dir DIR [--listen ADDR:PORT] [--gateway-socket PATH]\n"
		"                    [--tls-cert FILE --tls-key FILE [--allow-remote]]\n"
		"                    [--body-max BYTES] [--backstore-dirs DIR[,DIR...]] [limits]\n"
		"                    [--webui-dir DIR] [--networkd-dir DIR] [--debug LIST]\n"
		"                    [--store etcd --etcd-endpoints URLS --cluster-prefix KEY\n"
		"                     --gateway-id NAME --port-group N [--lease-ttl SECONDS]\n"
		"                     [--etcd-ca PEM] [--etcd-cert PEM --etcd-key PEM]]\n"
		"       isergw-agent --state-dir DIR --add-token NAME [--role admin|read]\n"
		"       isergw-agent --state-dir DIR --init-tokens\n"
		"  --state-dir DIR        desired configuration, tokens (created 0700)\n"
		"  --listen ADDR:PORT     HTTP(S) address (default 127.0.0.1:8080)\n"
		"  --gateway-socket PATH  the gateway's control socket (none: store only)\n"
		"  --tls-cert/--tls-key   PEM files: serve HTTPS\n"
		"  --allow-remote         listen on a non-loopback address (HTTPS only)\n"
		"  --body-max BYTES       largest request body (default 1048576)\n"
		"  --backstore-dirs DIRS  folders a file or block backstore given through the API\n"
		"                         must lie in, \",\"-separated (default: the state folder\n"
		"                         and /dev/disk/by-id; \"\": none)\n"
		"  --webui-dir DIR        the dashboard's files, served at / (default "
		API_WEBUI_DIR "; \"\": none)\n"
		"  --networkd-dir DIR     where PUT /api/v1/bonds/{bond}?apply=true writes the\n"
		"                         bond's systemd-networkd files (default\n"
		"                         /etc/systemd/network)\n"
		"  --add-token NAME       create a token, print it once, and exit\n"
		"  --init-tokens          create the token list with the first admin token (in\n"
		"                         DIR/admin.token, mode 0600) unless it exists, and exit\n"
		"  --openapi              print the API's OpenAPI document and exit\n");
	/* What a hostile client meets (docs/REST.md, "Limits"). */
	fprintf(f,
		"limits:\n"
		"  --max-connections N         connections at once (default %u)\n"
		"  --max-connections-per-ip N  connections at once from one address (default %u)\n"
		"  --connection-timeout SECS   an idle connection is closed (default %u)\n"
		"  --request-timeout SECS      a request's headers and body must arrive within\n"
		"                              (default %u)\n"
		"  --header-max BYTES          request line and headers (default %u)\n"
		"  --auth-fail-max N           failed tokens from one address within the window\n"
		"                              before it gets 429 (default %u; 0: no limit)\n"
		"  --auth-fail-window SECS     (default %u)\n"
		"  --auth-backoff SECS         how long such an address gets 429 (default %u)\n",
		API_CONNS_DEFAULT, API_CONNS_PER_IP_DEFAULT, API_IDLE_TIMEOUT_DEFAULT,
		API_REQUEST_TIMEOUT_DEFAULT, API_HEADER_MAX_DEFAULT, API_AUTH_FAILS_DEFAULT,
		API_AUTH_WINDOW_DEFAULT, API_AUTH_BACKOFF_DEFAULT);
	/* A cluster of gateways (docs/CLUSTER.md). */
	fprintf(f,
		"  --store file|etcd      where the desired configuration lives (default file)\n"
		"  --etcd-endpoints URLS  etcd v3 JSON gateway, http://127.0.0.1:2379[,...]; the\n"
		"                         next is tried when one fails\n"
		"  --etcd-ca PEM          the CA that signed the https:// endpoints' certificates\n"
		"  --etcd-cert PEM        this agent's client certificate for etcd (with --etcd-key)\n"
		"  --etcd-key PEM         its private key\n"
		"  --cluster-prefix KEY   the cluster's etcd key prefix, /isergw/NAME\n"
		"  --gateway-id NAME      this gateway's member name in the cluster\n"
		"  --port-group N         this gateway's ALUA target port group (1..65535)\n"
		"  --lease-ttl SECONDS    membership lease (default 5, 2..60)\n");
}

/* The document GET /api/v1/openapi.json serves, for docs/openapi.json (make docs). */
static int print_openapi(void)
{
	json_t *doc = api_openapi_build(api_routes, api_version());
	int r = doc && json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_SORT_KEYS) == 0 ? 0 : 1;

	json_decref(doc);
	putchar('\n');
	return r;
}

/* --max-connections needs as many fds and some: the soft limit (often 1024) goes up to the
 * hard one, and a hard limit too low for it is said once. */
static void raise_nofile(unsigned int conns)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)conns + 64)
		gw_warn("agent", "open files limited to %llu: fewer than --max-connections %u "
			"allows (raise LimitNOFILE)", (unsigned long long)rl.rlim_cur, conns);
}

/* A numeric option in [min, max]; false (with a message) otherwise. */
static bool opt_uint(const char *name, const char *arg, unsigned long min, unsigned long max,
		     unsigned long *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (errno || end == arg || *end || arg[0] == '-' || v < min || v > max) {
		fprintf(stderr, "isergw-agent: --%s must be a number from %lu to %lu, not \"%s\"\n",
			name, min, max, arg);
		return false;
	}
	*out = v;
	return true;
}

static int check_cluster_opts(struct api_conf *c)
{
	if (!c->store || !strcmp(c->store, "file")) {
		if (c->etcd_endpoints || c->cluster_prefix || c->gateway_id || c->port_group ||
		    c->etcd_ca || c->etcd_cert || c->etcd_key) {
			fprintf(stderr, "isergw-agent: the cluster options need --store etcd\n");
			return -1;
		}
		return 0;
	}
	if (strcmp(c->store, "etcd")) {
		fprintf(stderr, "isergw-agent: --store must be file or etcd, not %s\n", c->store);
		return -1;
	}
	if (!c->etcd_endpoints || !c->cluster_prefix || !c->gateway_id) {
		fprintf(stderr, "isergw-agent: --store etcd needs --etcd-endpoints, "
			"--cluster-prefix and --gateway-id\n");
		return -1;
	}
	if (!!c->etcd_cert != !!c->etcd_key) {
		fprintf(stderr, "isergw-agent: --etcd-cert and --etcd-key go together\n");
		return -1;
	}
	if (c->cluster_prefix[0] != '/' || strlen(c->cluster_prefix) < 2) {
		fprintf(stderr, "isergw-agent: --cluster-prefix is a key path like /isergw/NAME\n");
		return -1;
	}
	if (!*c->gateway_id || strlen(c->gateway_id) > 63 || strchr(c->gateway_id, '/')) {
		fprintf(stderr, "isergw-agent: --gateway-id: 1..63 characters, no '/'\n");
		return -1;
	}
	if (c->port_group < 1 || c->port_group > 65535) {
		fprintf(stderr, "isergw-agent: --port-group must be 1..65535\n");
		return -1;
	}
	if (!c->lease_ttl)
		c->lease_ttl = 5;
	if (c->lease_ttl < 2 || c->lease_ttl > 60) {
		fprintf(stderr, "isergw-agent: --lease-ttl must be 2..60 seconds\n");
		return -1;
	}
	return 0;
}

/* SIGHUP: the token list is read again; a file that does not load keeps the tokens in use. */
static void reload_tokens(void)
{
	sd_notify(0, "RELOADING=1\nSTATUS=reloading the token list");
	api_agent_reload_tokens(&agent);
	sd_notify(0, "READY=1\nSTATUS=serving");
}

static void on_signal(struct gw_signal *s, int signo)
{
	(void)s;
	if (signo == SIGHUP) {
		if (agent_up)
			reload_tokens();
		return;
	}
	gw_info("agent", "%s received: stopping", strsignal(signo));
	gw_loop_stop(&loop, 0);
}

static int add_token(const char *dir, const char *name, const char *role)
{
	char token[API_TOKEN_LEN + 1];
	struct api_auth a;
	enum api_role rl;
	int r;

	if (api_role_parse(role, &rl)) {
		fprintf(stderr, "isergw-agent: --role must be admin or read\n");
		return 2;
	}
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		fprintf(stderr, "isergw-agent: %s: %s\n", dir, strerror(errno));
		return 1;
	}
	r = api_auth_open(&a, dir);
	if (!r)
		r = api_auth_add(&a, name, rl, token);
	api_auth_close(&a);
	if (r) {
		fprintf(stderr, "isergw-agent: cannot add token %s: %s\n", name,
			r == -EEXIST ? "the name is taken" : strerror(-r));
		return 1;
	}
	printf("%s\n", token);
	return 0;
}

/* --init-tokens: what the first start does to the token list (the first admin token, in
 * DIR/admin.token), done ahead of it: package installation, images built offline. */
static int init_tokens(const char *dir)
{
	struct api_auth a;
	int r;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		fprintf(stderr, "isergw-agent: %s: %s\n", dir, strerror(errno));
		return 1;
	}
	r = api_auth_open(&a, dir);
	api_auth_close(&a);
	if (r) {
		fprintf(stderr, "isergw-agent: %s/tokens.json: %s\n", dir, strerror(-r));
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "state-dir", required_argument, NULL, 's' },
		{ "listen", required_argument, NULL, 'l' },
		{ "gateway-socket", required_argument, NULL, 'g' },
		{ "tls-cert", required_argument, NULL, 'C' },
		{ "tls-key", required_argument, NULL, 'K' },
		{ "body-max", required_argument, NULL, 'b' },
		{ "debug", required_argument, NULL, 'd' },
		{ "add-token", required_argument, NULL, 'a' },
		{ "role", required_argument, NULL, 'r' },
		{ "allow-remote", no_argument, NULL, 'R' },
		{ "webui-dir", required_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{ "store", required_argument, NULL, 1001 },
		{ "etcd-endpoints", required_argument, NULL, 1002 },
		{ "cluster-prefix", required_argument, NULL, 1003 },
		{ "gateway-id", required_argument, NULL, 1004 },
		{ "port-group", required_argument, NULL, 1005 },
		{ "lease-ttl", required_argument, NULL, 1006 },
		{ "openapi", no_argument, NULL, 1007 },
		{ "init-tokens", no_argument, NULL, 1008 },
		{ "max-connections", required_argument, NULL, 1101 },
		{ "max-connections-per-ip", required_argument, NULL, 1102 },
		{ "connection-timeout", required_argument, NULL, 1103 },
		{ "request-timeout", required_argument, NULL, 1104 },
		{ "header-max", required_argument, NULL, 1105 },
		{ "auth-fail-max", required_argument, NULL, 1106 },
		{ "auth-fail-window", required_argument, NULL, 1107 },
		{ "auth-backoff", required_argument, NULL, 1108 },
		{ "backstore-dirs", required_argument, NULL, 1109 },
		{ "etcd-ca", required_argument, NULL, 1110 },
		{ "etcd-cert", required_argument, NULL, 1111 },
		{ "etcd-key", required_argument, NULL, 1112 },
		{ "networkd-dir", required_argument, NULL, 1113 },
		{ NULL, 0, NULL, 0 },
	};
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	struct api_conf conf = { .listen = "127.0.0.1:8080", .webui_dir = API_WEBUI_DIR };
	const char *token_name = NULL, *role = "admin";
	struct api_agent *ag = &agent;
	bool init_only = false;
	struct gw_signal sig;
	unsigned long v;
	int c, r;

	gw_log_set_ident("isergw-agent");
	while ((c = getopt_long(argc, argv, "s:l:g:C:K:b:d:a:r:Rw:h", opts, NULL)) != -1) {
		switch (c) {
		case 's': conf.state_dir = optarg; break;
		case 'l': conf.listen = optarg; break;
		case 'g': conf.gateway_socket = optarg; break;
		case 'C': conf.tls_cert = optarg; break;
		case 'K': conf.tls_key = optarg; break;
		case 'b': conf.body_max = strtoul(optarg, NULL, 10); break;
		case 'd':
			if (gw_log_set_debug(optarg)) {
				fprintf(stderr, "isergw-agent: bad --debug list\n");
				return 2;
			}
			break;
		case 'a': token_name = optarg; break;
		case 'r': role = optarg; break;
		case 'R': conf.allow_remote = true; break;
		case 'w': conf.webui_dir = optarg; break;
		case 'h': usage(stdout); return 0;
		case 1001: conf.store = optarg; break;
		case 1002: conf.etcd_endpoints = optarg; break;
		case 1003: conf.cluster_prefix = optarg; break;
		case 1004: conf.gateway_id = optarg; break;
		case 1005: conf.port_group = (unsigned int)strtoul(optarg, NULL, 10); break;
		case 1006: conf.lease_ttl = (unsigned int)strtoul(optarg, NULL, 10); break;
		case 1110: conf.etcd_ca = optarg; break;
		case 1111: conf.etcd_cert = optarg; break;
		case 1112: conf.etcd_key = optarg; break;
		case 1007: return print_openapi();
		case 1008: init_only = true; break;
		case 1101:
			if (!opt_uint("max-connections", optarg, 1, 65536, &v))
				return 2;
			conf.max_conns = (unsigned int)v;
			break;
		case 1102:
			if (!opt_uint("max-connections-per-ip", optarg, 1, 65536, &v))
				return 2;
			conf.max_conns_per_ip = (unsigned int)v;
			break;
		case 1103:
			if (!opt_uint("connection-timeout", optarg, 1, 86400, &v))
				return 2;
			conf.idle_timeout = (unsigned int)v;
			break;
		case 1104:
			if (!opt_uint("request-timeout", optarg, 1, 3600, &v))
				return 2;
			conf.request_timeout = (unsigned int)v;
			break;
		case 1105:
			if (!opt_uint("header-max", optarg, 4096, 16u << 20, &v))
				return 2;
			conf.header_max = v;
			break;
		case 1106:
			if (!opt_uint("auth-fail-max", optarg, 0, 1000000, &v))
				return 2;
			conf.auth_fails = v ? (unsigned int)v : UINT_MAX;
			break;
		case 1107:
			if (!opt_uint("auth-fail-window", optarg, 1, 86400, &v))
				return 2;
			conf.auth_window = (unsigned int)v;
			break;
		case 1108:
			if (!opt_uint("auth-backoff", optarg, 1, 86400, &v))
				return 2;
			conf.auth_backoff = (unsigned int)v;
			break;
		case 1109: conf.backstore_dirs = optarg; break;
		case 1113: conf.networkd_dir = optarg; break;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc || !conf.state_dir || (!conf.tls_cert != !conf.tls_key)) {
		usage(stderr);
		return 2;
	}
	if (init_only)
		return init_tokens(conf.state_dir);
	if (token_name)
		return add_token(conf.state_dir, token_name, role);
	if (check_cluster_opts(&conf))
		return 2;
	signal(SIGPIPE, SIG_IGN);
	raise_nofile(conf.max_conns ? conf.max_conns : API_CONNS_DEFAULT);
	if (gw_loop_init(&loop))
		return 1;
	if (gw_signal_init(&sig, &loop, sigs, 3, on_signal)) {
		gw_loop_fini(&loop);
		return 1;
	}
	r = api_agent_init(ag, &loop, &conf);
	if (r) {
		gw_signal_fini(&sig);
		gw_loop_fini(&loop);
		return 1;
	}
	if (conf.webui_dir && *conf.webui_dir && access(conf.webui_dir, R_OK | X_OK) < 0)
		gw_warn("agent", "no dashboard: --webui-dir %s: %s", conf.webui_dir,
			strerror(errno));
	else if (conf.webui_dir && *conf.webui_dir)
		gw_info("agent", "dashboard at %s://%s/ from %s", conf.tls_cert ? "https" : "http",
			conf.listen, conf.webui_dir);
	agent_up = true;
	sd_notify(0, "READY=1\nSTATUS=serving");
	r = gw_loop_run(&loop);
	sd_notify(0, "STOPPING=1");
	agent_up = false;
	api_agent_fini(ag);
	gw_signal_fini(&sig);
	gw_loop_fini(&loop);
	gw_info("agent", "stopped");
	return r < 0 ? 1 : 0;
}
