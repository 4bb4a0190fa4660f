/*
 * cluster_driver.h - what the workload programs of the cluster tests
 * (repl_driver.c, repl_grow_driver.c, ckpt_cluster_driver.c) share:
 * dying with a message, a client of a cluster found through its seed
 * nodes, its tables. Define DRIVER_NAME and DRIVER_TIMEOUT_MS (the
 * client's, per call) before including, and DRIVER_TABLE for
 * open_table().
 */
#ifndef RS_TESTS_CLUSTER_DRIVER_H
#define RS_TESTS_CLUSTER_DRIVER_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rs_internal.h"
#include "recstore/client.h"

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2),
						     noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, DRIVER_NAME ": ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

/* OUT.ready: the workload runs (the test script waits for it). */
static inline void ready(const char *out)
{
	char path[1024];
	FILE *f;

	snprintf(path, sizeof(path), "%s.ready", out);
	if ((f = fopen(path, "w")))
		fclose(f);
}

/* A client of the cluster found through SEEDS (addr:port,addr:port). */
static inline struct rs_client *open_client(const char *seeds)
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
	rs_client_config_set_timeout_ms(cfg, DRIVER_TIMEOUT_MS);
	ret = rs_client_open(&c, cfg);
	rs_client_config_delete(&cfg);
	if (ret)
		die("open: %s (%s)", rs_strerror(ret), rs_errormsg());
	return c;
}

static inline struct rs_table *open_table_named(struct rs_client *c,
						const char *name)
{
	struct rs_table *t;

	if (rs_table_open(c, name, &t))
		die("table %s: %s", name, rs_errormsg());
	return t;
}

#ifdef DRIVER_TABLE
static inline struct rs_table *open_table(struct rs_client *c)
{
	return open_table_named(c, DRIVER_TABLE);
}
#endif

#endif
