/*
 * coord_etcd_conformance.c - the conformance cases of the coordination
 * interface (tests/unit/coord_cases.h, the same ones the in-memory
 * backend passes) against a real etcd through its JSON gateway.
 *
 * Usage: coord_etcd_conformance URL[,URL...]. Run by
 * tests/rxe/test_coord_etcd.sh against the etcd it starts; also
 * checks the errors of an unreachable endpoint and of endpoint failover.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "coord/coord.h"
#include "recstore/error.h"

static const char *endpoints;

static struct coord *open_store(void)
{
	struct coord *c = NULL;

	if (coord_etcd_new(&c, endpoints, 5000)) {
		fprintf(stderr, "coord_etcd_new: %s\n", rs_errormsg());
		return NULL;
	}
	return c;
}

#include "coord_cases.h"

/* Nothing listens on port 1: refused at once, with the URL in the text. */
static void unreachable(void **state)
{
	struct coord *c = NULL;
	struct coord_kvs r;

	assert_int_equal(coord_etcd_new(&c, "http://127.0.0.1:1", 2000), 0);
	assert_int_equal(coord_range(c, "/x", false, &r), -ECONNREFUSED);
	assert_non_null(strstr(rs_errormsg(), "127.0.0.1:1"));
	assert_int_equal(coord_wait(c, "/x", 1, 100, NULL), -ECONNREFUSED);
	coord_close(&c);
}

/* A dead endpoint first: requests go to the live one. */
static void failover(void **state)
{
	char list[600];
	struct coord *c = NULL;
	struct coord_kvs r;

	snprintf(list, sizeof(list), "http://127.0.0.1:1,%s", endpoints);
	assert_int_equal(coord_etcd_new(&c, list, 2000), 0);
	assert_int_equal(coord_put(c, "/t/failover", "1", 1, 0, NULL), 0);
	assert_int_equal(coord_range(c, "/t/failover", false, &r), 0);
	assert_int_equal(r.n, 1);
	coord_kvs_free(&r);
	assert_int_equal(coord_del(c, "/t/failover", false, NULL), 1);
	coord_close(&c);
}

static void bad_endpoints(void **state)
{
	struct coord *c = NULL;

	assert_int_equal(coord_etcd_new(&c, "", 1000), RS_E_INVAL);
	assert_int_equal(coord_etcd_new(&c, "file:///etc/passwd", 1000),
			 RS_E_INVAL);
	assert_int_equal(coord_etcd_new(&c, "http://a:1", 0), RS_E_INVAL);
	assert_null(c);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		COORD_CASES,
		cmocka_unit_test(unreachable),
		cmocka_unit_test(failover),
		cmocka_unit_test(bad_endpoints),
	};

	if (argc != 2) {
		fprintf(stderr, "usage: %s ETCD_URL[,URL...]\n", argv[0]);
		return 2;
	}
	endpoints = argv[1];
	return cmocka_run_group_tests(tests, NULL, NULL);
}
