// SPDX-License-Identifier: MIT
/*
 * isergw-agent: the REST agent (docs/REST.md).
 *
 *   isergw-agent --state-dir DIR [--listen ADDR:PORT] [--gateway-socket PATH]
 *                [--tls-cert FILE --tls-key FILE] [--body-max BYTES] [--debug LIST]
 *                [--webui-dir DIR]
 *   isergw-agent --state-dir DIR --add-token NAME [--role admin|read]
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <systemd/sd-daemon.h>

#include "api.h"
#include "gw_log.h"
#include "gw_loop.h"

static struct gw_loop loop;

static void usage(FILE *f)
{
	fprintf(f,
		"usage: isergw-agent --state-dir DIR [--listen ADDR:PORT] [--gateway-socket PATH]\n"
		"                    [--tls-cert FILE --tls-key FILE] [--body-max BYTES]\n"
		"                    [--webui-dir DIR] [--debug LIST]\n"
		"       isergw-agent --state-dir DIR --add-token NAME [--role admin|read]\n"
		"  --state-dir DIR        desired configuration, tokens (created 0700)\n"
		"  --listen ADDR:PORT     HTTP(S) address (default 127.0.0.1:8080)\n"
		"  --gateway-socket PATH  the gateway's control socket (none: store only)\n"
		"  --tls-cert/--tls-key   PEM files: serve HTTPS\n"
		"  --body-max BYTES       largest request body (default 1048576)\n"
		"  --webui-dir DIR        the dashboard's files, served at / (default "
		API_WEBUI_DIR "; \"\": none)\n"
		"  --add-token NAME       create a token, print it once, and exit\n");
}

static void on_signal(struct gw_signal *s, int signo)
{
	(void)s;
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
		{ "webui-dir", required_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const int sigs[] = { SIGINT, SIGTERM };
	struct api_conf conf = { .listen = "127.0.0.1:8080", .webui_dir = API_WEBUI_DIR };
	const char *token_name = NULL, *role = "admin";
	struct api_agent ag;
	struct gw_signal sig;
	int c, r;

	gw_log_set_ident("isergw-agent");
	while ((c = getopt_long(argc, argv, "s:l:g:C:K:b:d:a:r:w:h", opts, NULL)) != -1) {
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
		case 'w': conf.webui_dir = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc || !conf.state_dir || (!conf.tls_cert != !conf.tls_key)) {
		usage(stderr);
		return 2;
	}
	if (token_name)
		return add_token(conf.state_dir, token_name, role);
	signal(SIGPIPE, SIG_IGN);
	if (gw_loop_init(&loop))
		return 1;
	if (gw_signal_init(&sig, &loop, sigs, 2, on_signal)) {
		gw_loop_fini(&loop);
		return 1;
	}
	r = api_agent_init(&ag, &loop, &conf);
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
	sd_notify(0, "READY=1\nSTATUS=serving");
	r = gw_loop_run(&loop);
	sd_notify(0, "STOPPING=1");
	api_agent_fini(&ag);
	gw_signal_fini(&sig);
	gw_loop_fini(&loop);
	gw_info("agent", "stopped");
	return r < 0 ? 1 : 0;
}
