/*
 * test_client_ring.c - the consistent-hash ring the client shards keys with:
 * deterministic (any node order gives the same placement), balanced with
 * virtual nodes, minimal movement when a node joins or leaves, and stable
 * across versions (pinned placements), plus argument checking.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "place/ring.h"
#include "recstore/error.h"

#define NKEYS 200000

static const char *const four[] = { "10.77.0.1:7471", "10.77.0.2:7471",
				    "10.77.0.3:7471", "10.77.0.4:7471" };

static unsigned name_index(const char *const *names, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(names[i], s))
			return (unsigned)i;
	return ~0u;
}

static void order_does_not_matter(void **state)
{
	const char *const rev[] = { four[3], four[2], four[0], four[1] };
	struct place_ring *a, *b;

	assert_int_equal(place_ring_new(&a, four, 4, 160), 0);
	assert_int_equal(place_ring_new(&b, rev, 4, 160), 0);
	for (uint64_t k = 0; k < NKEYS; k++) {
		unsigned na = place_ring_node(a, k), nb = place_ring_node(b, k);

		assert_string_equal(four[na], rev[nb]);
	}
	place_ring_delete(&a);
	place_ring_delete(&b);
	assert_null(a);
	place_ring_delete(NULL);
}

static void balanced(void **state)
{
	struct place_ring *r;
	size_t count[4] = { 0 };

	assert_int_equal(place_ring_new(&r, four, 4, PLACE_RING_DEFAULT_VNODES),
			 0);
	assert_int_equal(place_ring_points(r), 4 * PLACE_RING_DEFAULT_VNODES);
	/* Sequential ids, as fused table ids produce them. */
	for (uint64_t k = 0; k < NKEYS; k++)
		count[place_ring_node(r, k)]++;
	for (int i = 0; i < 4; i++) {
		assert_true(count[i] > NKEYS / 4 * 80 / 100);
		assert_true(count[i] < NKEYS / 4 * 120 / 100);
	}
	/* Ids with the table in the high bits. */
	memset(count, 0, sizeof(count));
	for (uint64_t k = 0; k < NKEYS; k++)
		count[place_ring_node(r, (k % 26) << 56 | k / 26)]++;
	for (int i = 0; i < 4; i++) {
		assert_true(count[i] > NKEYS / 4 * 80 / 100);
		assert_true(count[i] < NKEYS / 4 * 120 / 100);
	}
	place_ring_delete(&r);
}

static void minimal_movement(void **state)
{
	struct place_ring *r3, *r4;
	size_t moved = 0;

	assert_int_equal(place_ring_new(&r3, four, 3, 160), 0);
	assert_int_equal(place_ring_new(&r4, four, 4, 160), 0);
	for (uint64_t k = 0; k < NKEYS; k++) {
		unsigned n3 = place_ring_node(r3, k);
		unsigned n4 = place_ring_node(r4, k);

		if (n3 != n4) {
			/* A key only ever moves to the new node. */
			assert_int_equal(n4, 3);
			moved++;
		}
	}
	assert_true(moved > NKEYS / 4 * 70 / 100);
	assert_true(moved < NKEYS / 4 * 130 / 100);
	place_ring_delete(&r3);
	place_ring_delete(&r4);
}

static void single_node(void **state)
{
	struct place_ring *r;

	assert_int_equal(place_ring_new(&r, four, 1, 1), 0);
	for (uint64_t k = 0; k < 1000; k++)
		assert_int_equal(place_ring_node(r, k * 0x12345), 0);
	assert_int_equal(place_ring_nodes(r), 1);
	place_ring_delete(&r);
}

/* Placement is part of the protocol between clients: pin it. */
static void placement_is_stable(void **state)
{
	static const struct {
		uint64_t key;
		const char *node;
	} pinned[] = {
#include "test_client_ring_pinned.h"
	};
	struct place_ring *r;

	assert_int_equal(place_ring_new(&r, four, 4, 160), 0);
	for (size_t i = 0; i < sizeof(pinned) / sizeof(pinned[0]); i++)
		assert_int_equal(place_ring_node(r, pinned[i].key),
				 name_index(four, 4, pinned[i].node));
	place_ring_delete(&r);
}

static void bad_arguments(void **state)
{
	const char *const dup[] = { "a:1", "b:1", "a:1" };
	const char *const empty[] = { "a:1", "" };
	struct place_ring *r = (struct place_ring *)1;

	assert_int_equal(place_ring_new(&r, dup, 3, 16), RS_E_INVAL);
	assert_null(r);
	assert_int_equal(place_ring_new(&r, empty, 2, 16), RS_E_INVAL);
	assert_int_equal(place_ring_new(&r, four, 0, 16), RS_E_INVAL);
	assert_int_equal(place_ring_new(&r, four, 4, 0), RS_E_INVAL);
	assert_int_equal(place_ring_new(&r, four, 4, PLACE_RING_MAX_VNODES + 1),
			 RS_E_INVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(order_does_not_matter),
		cmocka_unit_test(balanced),
		cmocka_unit_test(minimal_movement),
		cmocka_unit_test(single_node),
		cmocka_unit_test(placement_is_stable),
		cmocka_unit_test(bad_arguments),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
