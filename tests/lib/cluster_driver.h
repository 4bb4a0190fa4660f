/*
 * cluster_driver.h - what the workload programs of the cluster tests
 * (repl_driver.c, repl_grow_driver.c, ckpt_cluster_driver.c) share:
 * dying with a message, a client of a cluster found through its seed
 * nodes, its tables. Define DRIVER_NAME and DRIVER_TIMEOUT_MS (the
 * client's, per call) before including, and DRIVER_TABLE for
 * open_table(): the inline wrappers at the end pass them to the
 * library's cd_ functions.
 */
#ifndef RS_TESTS_CLUSTER_DRIVER_H
#define RS_TESTS_CLUSTER_DRIVER_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rs_internal.h"
#include "recstore/client.h"

/* Print "name: " and the message to stderr, exit 1. */
void cd_die(const char *name, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), noreturn));

/* OUT.ready: the workload runs (the test script waits for it). */
void cd_ready(const char *out);

/* A client of the cluster found through SEEDS (addr:port,addr:port),
 * timeout_ms per call; dies (as name) on an error. */
struct rs_client *cd_open_client(const char *name, const char *seeds,
				 unsigned timeout_ms);

/* Open table `table` through c; dies (as name) on an error. */
struct rs_table *cd_open_table(const char *name, struct rs_client *c,
			       const char *table);

/* The includer's spellings: its name and timeout are its macros. */
#ifdef DRIVER_NAME
#define die(...) cd_die(DRIVER_NAME, __VA_ARGS__)

static inline struct rs_client *open_client(const char *seeds)
{
	return cd_open_client(DRIVER_NAME, seeds, DRIVER_TIMEOUT_MS);
}

static inline struct rs_table *open_table_named(struct rs_client *c,
						const char *name)
{
	return cd_open_table(DRIVER_NAME, c, name);
}

#ifdef DRIVER_TABLE
static inline struct rs_table *open_table(struct rs_client *c)
{
	return cd_open_table(DRIVER_NAME, c, DRIVER_TABLE);
}
#endif
#endif /* DRIVER_NAME */

#endif
