/*
 * test_coord_mem.c - the in-memory coordination backend: the conformance
 * cases every backend passes (coord_cases.h), and what needs its fake
 * clock: lease expiry, keepalive, an outage, a compacted history.
 */
#include <stdlib.h>

#include "coord/coord.h"
#include "coord_cases.h"

struct coord *open_store(void)
{
	struct coord *c = NULL;

	return coord_mem_new(&c) ? NULL : c;
}

static void expiry(void **state)
{
	struct coord *c = open_store();
	struct coord_kvs r;
	int64_t a, b, ttl, rev, got;

	assert_non_null(c);
	assert_int_equal(coord_lease_grant(c, 2, &a), 0);
	assert_int_equal(coord_lease_grant(c, 5, &b), 0);
	assert_int_equal(coord_put(c, "/n/a", "a", 1, a, NULL), 0);
	assert_int_equal(coord_put(c, "/n/b", "b", 1, b, &rev), 0);
	coord_mem_advance(c, 1999);
	assert_int_equal(coord_range(c, "/n/", true, &r), 0);
	assert_int_equal(r.n, 2);
	coord_kvs_free(&r);
	/* a keepalive restarts the TTL */
	assert_int_equal(coord_lease_keepalive(c, a, &ttl), 0);
	assert_int_equal(ttl, 2);
	coord_mem_advance(c, 1999);
	assert_int_equal(coord_range(c, "/n/a", false, &r), 0);
	assert_int_equal(r.n, 1);
	coord_kvs_free(&r);
	/* the clock reaches a's deadline: its key goes, as a change */
	coord_mem_advance(c, 1);
	assert_int_equal(coord_range(c, "/n/", true, &r), 0);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.kv[0].key, "/n/b");
	assert_true(r.rev > rev);
	coord_kvs_free(&r);
	assert_int_equal(coord_wait(c, "/n/", rev, 10, &got), 1);
	assert_true(got > rev);
	assert_int_equal(coord_lease_keepalive(c, a, &ttl), RS_E_NOTFOUND);
	/* b: granted at 0 with 5 s, never kept alive; the clock is at 4999 */
	coord_mem_advance(c, 1000);
	assert_int_equal(coord_range(c, "/n/b", false, &r), 0);
	assert_int_equal(r.n, 1);
	coord_kvs_free(&r);
	coord_mem_advance(c, 1);
	assert_int_equal(coord_range(c, "/n/", true, &r), 0);
	assert_int_equal(r.n, 0);
	coord_kvs_free(&r);
	coord_close(&c);
}

static void outage(void **state)
{
	struct coord *c = open_store();
	struct coord_kvs r;
	int64_t id;

	assert_non_null(c);
	assert_int_equal(coord_lease_grant(c, 3, &id), 0);
	assert_int_equal(coord_put(c, "/n/a", "a", 1, id, NULL), 0);
	coord_mem_set_down(c, true);
	assert_int_equal(coord_range(c, "/n/", true, &r), -ECONNREFUSED);
	assert_int_equal(coord_put(c, "/x", "a", 1, 0, NULL), -ECONNREFUSED);
	assert_int_equal(coord_lease_keepalive(c, id, NULL), -ECONNREFUSED);
	assert_int_equal(coord_wait(c, "/n/", 1, 10, NULL), -ECONNREFUSED);
	/* leases run on while the store is unreachable to us */
	coord_mem_advance(c, 3000);
	coord_mem_set_down(c, false);
	assert_int_equal(coord_lease_keepalive(c, id, NULL), RS_E_NOTFOUND);
	assert_int_equal(coord_range(c, "/n/", true, &r), 0);
	assert_int_equal(r.n, 0);
	coord_kvs_free(&r);
	coord_close(&c);
}

static void compacted(void **state)
{
	struct coord *c = open_store();
	struct coord_kvs r;
	int64_t base, got = 0;

	assert_non_null(c);
	assert_int_equal(coord_range(c, "/w/", true, &r), 0);
	base = r.rev;
	coord_kvs_free(&r);
	/* many changes elsewhere push the history past base */
	for (int i = 0; i < 3000; i++)
		assert_int_equal(coord_put(c, "/other", "x", 1, 0, NULL), 0);
	/* nothing under /w/ changed, but the store cannot tell: changed */
	assert_int_equal(coord_wait(c, "/w/", base, 10, &got), 1);
	assert_true(got > base);
	coord_close(&c);
}

static void prefix_end(void **state)
{
	char out[COORD_KEY_MAX + 1];

	coord_prefix_end("/a/", out);
	assert_string_equal(out, "/a0");
	coord_prefix_end("a\xff\xff", out);
	assert_string_equal(out, "b");
	coord_prefix_end("\xff", out);
	assert_string_equal(out, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		COORD_CASES,
		cmocka_unit_test(expiry),
		cmocka_unit_test(outage),
		cmocka_unit_test(compacted),
		cmocka_unit_test(prefix_end),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
