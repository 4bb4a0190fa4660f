/*
 * coord_cases.h - conformance cases of the coordination interface
 * (src/coord/coord.h), run against every backend: tests/unit/
 * test_coord_mem.c (in memory) and tests/rxe/coord_etcd_conformance.c
 * (a real etcd). Only what needs no fake clock is here; lease expiry by
 * the clock is in test_coord_mem.c.
 *
 * The program that runs them defines `struct coord *open_store(void)`
 * (the library calls it). Each case works under its own key prefix
 * (/t/<pid>/<n>/), so the cases may share one etcd.
 */
#ifndef COORD_CASES_H
#define COORD_CASES_H

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "coord/coord.h"
#include "recstore/error.h"

/* Defined by the test that runs the cases: a store of its backend. */
struct coord *open_store(void);

struct cc {
	struct coord *c;
	char ns[64];
};

int cc_setup(void **state);

int cc_teardown(void **state);

void cc_put_get(void **state);

void cc_prefix(void **state);

void cc_cas(void **state);

void cc_lease(void **state);

void cc_wait(void **state);

/* A set cancel flag ends a wait early (about a second at most). */
void cc_cancel(void **state);

void cc_bad_args(void **state);

#define CC(f) cmocka_unit_test_setup_teardown(f, cc_setup, cc_teardown)
#define COORD_CASES                                                       \
	CC(cc_put_get), CC(cc_prefix), CC(cc_cas), CC(cc_lease), CC(cc_wait), \
		CC(cc_cancel), CC(cc_bad_args)

#endif
