/*
 * pool_path.h - a file pool's path for a unit test: $TMPDIR (or /tmp)
 * /rs-test-NAME-PID.pool, removed before and after each test.
 * POOL_PATH_FIXTURES(NAME) defines pool_path, setup_path and
 * teardown_path (cmocka setup and teardown functions).
 */
#ifndef RS_TEST_POOL_PATH_H
#define RS_TEST_POOL_PATH_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define POOL_PATH_FIXTURES(name)                                       \
	static char pool_path[256];                                    \
                                                                       \
	static int setup_path(void **state)                            \
	{                                                              \
		const char *d = getenv("TMPDIR");                      \
                                                                       \
		(void)state;                                           \
		snprintf(pool_path, sizeof(pool_path),                 \
			 "%s/rs-test-" name "-%d.pool",                \
			 d && *d ? d : "/tmp", (int)getpid());         \
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
