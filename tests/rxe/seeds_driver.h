/*
 * seeds_driver.h - what the workload programs of the cluster tests share
 * (repl_driver.c, ckpt_cluster_driver.c): dying with a message, and a
 * client of a cluster found through its seed nodes.
 */
#ifndef RS_TESTS_SEEDS_DRIVER_H
#define RS_TESTS_SEEDS_DRIVER_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recstore/client.h"

/* The program's name in its messages (each driver defines it). */
extern const char driver_name[];

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2),
						     noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "%s: ", driver_name);
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

/* A client of the nodes in seeds (addr:port,addr:port), with a timeout
 * of timeout_ms per call. */
static struct rs_client *open_client_ms(const char *seeds,
					unsigned timeout_ms)
{
	struct rs_client_config *cfg;
	struct rs_client *c;
	char buf[1024], *tok, *save = NULL;
	int ret;

	if (rs_client_config_new(&cfg))
		die("config: %s", rs_errormsg());
	snprintf(buf, sizeof(buf), "%s", seeds);
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save))
		if (rs_client_config_add_node(cfg, tok))
			die("node %s: %s", tok, rs_errormsg());
	rs_client_config_set_timeout_ms(cfg, timeout_ms);
	ret = rs_client_open(&c, cfg);
	rs_client_config_delete(&cfg);
	if (ret)
		die("open: %s (%s)", rs_strerror(ret), rs_errormsg());
	return c;
}

#endif
