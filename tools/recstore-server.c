/*
 * recstore-server - run a RecStore memory node (include/recstore/server.h).
 *
 *   recstore-server [-c CONFIG.json] [--listen ADDR:PORT] [--workers N]
 *                   [--metrics-port PORT]
 *
 * Options on the command line override the config file. Once the node
 * listens it prints "recstore-server: listening on ADDR:PORT" (scripts and
 * tests wait for that line). SIGINT or SIGTERM stop it cleanly (clients are
 * disconnected, a file-backed pool is closed). Exit status: 0 after a
 * clean stop, 1 if the node failed, 2 for a bad command line or config
 * (the message names the field).
 */
#include <getopt.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recstore/server.h"

static struct rs_server *_Atomic g_srv;
static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
	struct rs_server *s = atomic_load(&g_srv);

	(void)sig;
	g_stop = 1;
	if (s)
		rs_server_stop(s);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: recstore-server [-c CONFIG.json] [--listen "
		   "ADDR:PORT] [--workers N]\n"
		   "                       [--metrics-port PORT]\n");
}

/* Messages of the library name the file or field already. */
static int fail(int code, const char *what)
{
	if (rs_errormsg()[0])
		fprintf(stderr, "recstore-server: %s\n", rs_errormsg());
	else
		fprintf(stderr, "recstore-server: %s: %s\n", what,
			rs_strerror(code));
	return 2;
}

static int unum(const char *s, unsigned long max, unsigned *out)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);

	if (!*s || *end || v > max)
		return -1;
	*out = (unsigned)v;
	return 0;
}

/* Build the config from the command line; 0 or an exit status. */
static int configure(int argc, char **argv, struct rs_server_config **cfg)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "listen", required_argument, NULL, 'l' },
		{ "workers", required_argument, NULL, 'w' },
		{ "metrics-port", required_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = NULL, *listen = NULL, *workers = NULL,
		   *mport = NULL;
	unsigned v;
	int c, ret;

	while ((c = getopt_long(argc, argv, "c:l:w:m:h", opts, NULL)) != -1) {
		switch (c) {
		case 'c': path = optarg; break;
		case 'l': listen = optarg; break;
		case 'w': workers = optarg; break;
		case 'm': mport = optarg; break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return 2;
	}
	ret = path ? rs_server_config_load(cfg, path)
		   : rs_server_config_new(cfg);
	if (ret)
		return fail(ret, path ? path : "config");
	if (listen && (ret = rs_server_config_set_listen(*cfg, listen)))
		return fail(ret, "--listen");
	if (workers && (unum(workers, 1000, &v) ||
			(ret = rs_server_config_set_workers(*cfg, v))))
		return fail(ret ? ret : -22, "--workers");
	if (mport && (unum(mport, 65535, &v) ||
		      (ret = rs_server_config_set_metrics_port(*cfg, v))))
		return fail(ret ? ret : -22, "--metrics-port");
	return 0;
}

int main(int argc, char **argv)
{
	struct rs_server_config *cfg = NULL;
	struct rs_server *s = NULL;
	struct sigaction sa;
	int ret;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	ret = configure(argc, argv, &cfg);
	if (ret) {
		rs_server_config_delete(&cfg);
		return ret;
	}
	ret = rs_server_open(&s, cfg);
	rs_server_config_delete(&cfg);
	if (ret) {
		fprintf(stderr, "recstore-server: %s\n",
			rs_errormsg()[0] ? rs_errormsg() : rs_strerror(ret));
		return ret == RS_E_INVAL ? 2 : 1;
	}
	atomic_store(&g_srv, s);
	if (g_stop)
		rs_server_stop(s);
	printf("recstore-server: listening on %s\n", rs_server_listen_addr(s));
	if (rs_server_metrics_port(s))
		printf("recstore-server: metrics on port %u\n",
		       rs_server_metrics_port(s));
	fflush(stdout);
	ret = rs_server_run(s);
	sigaddset(&sa.sa_mask, SIGINT);
	sigaddset(&sa.sa_mask, SIGTERM);
	sigprocmask(SIG_BLOCK, &sa.sa_mask, NULL); /* no handler during close */
	atomic_store(&g_srv, NULL);
	if (ret)
		fprintf(stderr, "recstore-server: %s\n",
			rs_errormsg()[0] ? rs_errormsg() : rs_strerror(ret));
	rs_server_close(&s);
	if (!ret)
		printf("recstore-server: stopped\n");
	return ret ? 1 : 0;
}
