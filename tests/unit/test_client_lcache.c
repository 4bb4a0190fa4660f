/*
 * test_client_lcache.c - the client's location cache: hits and misses,
 * bounded size, CLOCK keeps hot entries through a scan, invalidation by
 * address and by table, disabled cache, and many threads at once (every hit
 * returns the location that was put for that very key, node, view uid and
 * epoch included).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "client/lcache.h"

static struct cli_loc loc_for(uint32_t table, uint64_t key)
{
	struct cli_loc l = {
		.addr = key * 64 + table,
		.version = (uint32_t)key ^ table,
		.len = 128,
		.node = table,
		.uid = (uint32_t)key * 7 + table,
		.epoch = key % 3 ? key : CLI_LOC_NO_EPOCH,
	};
	return l;
}

static int same(const struct cli_loc *a, const struct cli_loc *b)
{
	return a->addr == b->addr && a->version == b->version &&
	       a->len == b->len && a->node == b->node && a->uid == b->uid &&
	       a->epoch == b->epoch;
}

static void put_get(void **state)
{
	struct cli_lcache *c;
	struct cli_loc l, got;
	struct cli_lcache_stats st;

	assert_int_equal(cli_lcache_new(&c, 1000), 0);
	assert_false(cli_lcache_get(c, 1, 42, &got));
	l = loc_for(1, 42);
	cli_lcache_put(c, 1, 42, &l);
	assert_true(cli_lcache_get(c, 1, 42, &got));
	assert_true(same(&got, &l));
	assert_false(cli_lcache_get(c, 2, 42, &got));
	l.addr = 999;
	cli_lcache_put(c, 1, 42, &l); /* replace, not duplicate */
	assert_true(cli_lcache_get(c, 1, 42, &got));
	assert_int_equal(got.addr, 999);
	cli_lcache_get_stats(c, &st);
	assert_int_equal(st.hits, 2);
	assert_int_equal(st.misses, 2);
	assert_true(st.capacity >= 1000);
	cli_lcache_delete(&c);
	assert_null(c);
}

static void bounded_and_clock(void **state)
{
	struct cli_lcache *c;
	struct cli_lcache_stats st;
	struct cli_loc l, got;
	size_t hot_hits = 0, cold_present = 0;

	assert_int_equal(cli_lcache_new(&c, 4096), 0);
	cli_lcache_get_stats(c, &st);
	/* A hot set of 512 keys, referenced between scan chunks. */
	for (uint64_t k = 0; k < 512; k++) {
		l = loc_for(7, k);
		cli_lcache_put(c, 7, k, &l);
	}
	for (uint64_t k = 1000; k < 1000 + 20 * st.capacity; k++) {
		if (k % 1024 == 0)
			for (uint64_t h = 0; h < 512; h++)
				(void)cli_lcache_get(c, 7, h, &got);
		l = loc_for(7, k);
		cli_lcache_put(c, 7, k, &l);
	}
	for (uint64_t h = 0; h < 512; h++)
		hot_hits += cli_lcache_get(c, 7, h, &got);
	for (uint64_t k = 1000; k < 1000 + 20 * st.capacity; k++)
		cold_present += cli_lcache_get(c, 7, k, &got);
	/* CLOCK kept (nearly) all of the hot set. */
	assert_true(hot_hits > 512 * 9 / 10);
	assert_true(hot_hits + cold_present <= st.capacity);
	cli_lcache_get_stats(c, &st);
	assert_true(st.evictions > 0);
	cli_lcache_delete(&c);
}

static void invalidation(void **state)
{
	struct cli_lcache *c;
	struct cli_loc l, got;

	assert_int_equal(cli_lcache_new(&c, 64), 0);
	l = loc_for(3, 5);
	cli_lcache_put(c, 3, 5, &l);
	cli_lcache_invalidate(c, 3, 5, l.addr + 1); /* someone else's view */
	assert_true(cli_lcache_get(c, 3, 5, &got));
	cli_lcache_invalidate(c, 3, 5, l.addr);
	assert_false(cli_lcache_get(c, 3, 5, &got));
	for (uint64_t k = 0; k < 40; k++) {
		l = loc_for(3, k);
		cli_lcache_put(c, 3, k, &l);
		l = loc_for(4, k);
		cli_lcache_put(c, 4, k, &l);
	}
	cli_lcache_invalidate_table(c, 3);
	for (uint64_t k = 0; k < 40; k++)
		assert_false(cli_lcache_get(c, 3, k, &got));
	cli_lcache_invalidate(c, 4, 0, 0);
	assert_false(cli_lcache_get(c, 4, 0, &got));
	cli_lcache_delete(&c);
}

static void disabled(void **state)
{
	struct cli_lcache *c = (struct cli_lcache *)1;
	struct cli_loc l = loc_for(1, 1), got;
	struct cli_lcache_stats st;

	assert_int_equal(cli_lcache_new(&c, 0), 0);
	assert_null(c);
	cli_lcache_put(c, 1, 1, &l);
	assert_false(cli_lcache_get(c, 1, 1, &got));
	cli_lcache_invalidate(c, 1, 1, 0);
	cli_lcache_invalidate_table(c, 1);
	cli_lcache_get_stats(c, &st);
	assert_int_equal(st.capacity, 0);
	cli_lcache_delete(&c);
}

struct worker {
	struct cli_lcache *c;
	unsigned id;
	size_t bad;
};

static void *hammer(void *arg)
{
	struct worker *w = arg;
	uint64_t x = w->id * 7919 + 1;

	for (int i = 0; i < 200000; i++) {
		struct cli_loc l, got;
		uint64_t k;
		uint32_t t;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		k = x % 5000;
		t = (uint32_t)(x >> 40) % 3;
		switch (i % 4) {
		case 0:
			l = loc_for(t, k);
			cli_lcache_put(w->c, t, k, &l);
			break;
		case 3:
			cli_lcache_invalidate(w->c, t, k, 0);
			break;
		default:
			if (cli_lcache_get(w->c, t, k, &got)) {
				l = loc_for(t, k);
				w->bad += !same(&l, &got);
			}
		}
	}
	return NULL;
}

static void threads(void **state)
{
	struct worker w[4];
	pthread_t t[4];
	struct cli_lcache *c;

	assert_int_equal(cli_lcache_new(&c, 2048), 0);
	for (unsigned i = 0; i < 4; i++) {
		w[i] = (struct worker){ .c = c, .id = i };
		assert_int_equal(pthread_create(&t[i], NULL, hammer, &w[i]), 0);
	}
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(w[i].bad, 0);
	cli_lcache_delete(&c);
}

/* The decisions of a get about an entry (lcache.h): the node from the
 * entry while its epoch is the call's; a configuration change re-places
 * it (kept only where the key lands now, then re-stamped); a node move,
 * a re-created table, a slot beyond the rows or a replica choice never
 * READ the entry's node unplaced. */
static void placement(void **state)
{
	struct cli_loc l = { .addr = 10, .epoch = 5, .node = 2, .uid = 77 };

	/* the same configuration: READ at node 2, no placement */
	assert_true(cli_loc_here(&l, 5, true, 3, 77, 100));
	/* static mode: epoch 0 throughout */
	l.epoch = 0;
	assert_true(cli_loc_here(&l, 0, true, 3, 77, 100));
	l.epoch = 5;
	/* a configuration change: placed again */
	assert_false(cli_loc_here(&l, 6, true, 3, 77, 100));
	/* ... still on node 2: kept, re-stamped once its row validates */
	assert_int_equal(cli_loc_at(&l, 2, 6, true, 77, 100), 2);
	/* ... moved to node 1: the buckets there */
	assert_int_equal(cli_loc_at(&l, 1, 6, true, 77, 100), 0);
	/* same epoch, placed where the entry says: used as it is */
	assert_int_equal(cli_loc_at(&l, 2, 5, true, 77, 100), 1);
	/* the table re-created on node 2 (a new view uid) */
	assert_false(cli_loc_here(&l, 5, true, 3, 78, 100));
	assert_int_equal(cli_loc_at(&l, 2, 5, true, 78, 100), 0);
	/* a slot beyond the view's rows */
	assert_false(cli_loc_here(&l, 5, true, 3, 77, 10));
	assert_int_equal(cli_loc_at(&l, 2, 5, true, 77, 10), 0);
	/* a node beyond the call's node count */
	assert_false(cli_loc_here(&l, 5, true, 2, 77, 100));
	/* replica reads: always placed; an entry where the key lands now
	 * is used, never re-stamped */
	assert_false(cli_loc_here(&l, 5, false, 3, 77, 100));
	l.epoch = CLI_LOC_NO_EPOCH;
	assert_false(cli_loc_here(&l, 5, false, 3, 77, 100));
	assert_false(cli_loc_here(&l, CLI_LOC_NO_EPOCH - 1, true, 3, 77,
				  100));
	assert_int_equal(cli_loc_at(&l, 2, 5, false, 77, 100), 1);
	assert_int_equal(cli_loc_at(&l, 1, 5, false, 77, 100), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(put_get),
		cmocka_unit_test(bounded_and_clock),
		cmocka_unit_test(invalidation),
		cmocka_unit_test(disabled),
		cmocka_unit_test(threads),
		cmocka_unit_test(placement),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
