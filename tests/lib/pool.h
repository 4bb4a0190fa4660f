/*
 * pool.h - slab stores for unit tests: a file pool's path, $TMPDIR (or
 * /tmp)/rs-test-NAME-PID.pool, removed before and after each test, and a
 * store opened or the test failed.
 *
 * POOL_PATH_FIXTURES(NAME) defines pool_path, setup_path and
 * teardown_path (cmocka setup and teardown functions).
 */
#ifndef RS_TEST_POOL_H
#define RS_TEST_POOL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/rs_internal.h"
#include "value/slab.h"

/* path (cap bytes) = the pool file of test NAME in this process. */
void tl_pool_path(char *path, size_t cap, const char *name);

/* slab_store_open of path (NULL: in DRAM) with size and flags; a failure
 * fails the test with rs_errormsg(). */
struct slab_store *tl_pool_open(const char *path, uint64_t size,
				unsigned flags);

#define POOL_PATH_FIXTURES(name)                                       \
	static char pool_path[256];                                    \
                                                                       \
	static int setup_path(void **state)                            \
	{                                                              \
		(void)state;                                           \
		tl_pool_path(pool_path, sizeof(pool_path), name);      \
		unlink(pool_path);                                     \
		return 0;                                              \
	}                                                              \
                                                                       \
	static int teardown_path(void **state)                         \
	{                                                              \
		(void)state;                                           \
		unlink(pool_path);                                     \
		return 0;                                              \
	}

#endif
