/*
 * test_server_once.c - the node's exactly-once completion records
 * (src/server/srv_once.c) without a device: a resent key gets its
 * recorded status, records are per (call, table, key), done_below
 * forgets calls, a replica skips records of calls already declared done,
 * and every bound refuses before anything is recorded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "server/srv_internal.h"

static const uint64_t keys[4] = { 11, 12, 13, 11 };

static void lookup(struct srv_once *o, const struct srv_once_tag *t,
		   uint32_t tid, int32_t *st, bool *found)
{
	assert_int_equal(srv_once_lookup(o, t, tid, keys, 4, st, found), 0);
}

static void resend(void **state)
{
	struct srv_once o;
	struct srv_once_tag a = { .client = 7, .seq = 1, .done_below = 1 };
	struct srv_once_tag a2 = { .client = 7, .seq = 2, .done_below = 1 };
	struct srv_once_tag b = { .client = 8, .seq = 1, .done_below = 1 };
	int32_t st[4] = { 0, 1, RS_E_NOTFOUND, 0 };
	bool found[4];
	uint64_t cl, en, dd, ev, ob;

	(void)state;
	assert_int_equal(srv_once_init(&o), 0);
	lookup(&o, &a, 3, st, found);
	for (int i = 0; i < 4; i++)
		assert_false(found[i]);
	/* key 13 failed: not recorded; key 11 twice: once */
	assert_int_equal(srv_once_add(&o, &a, 3, keys, st, 4), 0);
	memset(st, 0x55, sizeof(st));
	lookup(&o, &a, 3, st, found);
	assert_true(found[0] && found[1] && !found[2] && found[3]);
	assert_int_equal(st[0], 0);
	assert_int_equal(st[1], 1);
	assert_int_equal(st[3], 0);
	/* another table, another call, another client: nothing */
	lookup(&o, &a, 4, st, found);
	assert_false(found[0] || found[1]);
	lookup(&o, &a2, 3, st, found);
	assert_false(found[0] || found[1]);
	lookup(&o, &b, 3, st, found);
	assert_false(found[0] || found[1]);
	srv_once_stats(&o, &cl, &en, &dd, &ev, &ob);
	assert_int_equal(cl, 2);
	assert_int_equal(en, 2);
	assert_int_equal(dd, 3);
	/* done_below 2 forgets call 1; a resend of it is refused */
	a2.done_below = 2;
	lookup(&o, &a2, 3, st, found);
	srv_once_stats(&o, &cl, &en, &dd, &ev, &ob);
	assert_int_equal(en, 0);
	assert_int_equal(srv_once_lookup(&o, &a, 3, keys, 4, st, found),
			 RS_E_INVAL);
	srv_once_fini(&o);
}

/* A node gaining ranges gets a forwarded write of call 5 (done_below 3)
 * before its copy source's record of call 2 of the same client: the
 * record is obsolete, skipped, and the copy goes on; a client's own
 * resend of call 2 is still refused. */
static void obsolete(void **state)
{
	struct srv_once o;
	struct srv_once_tag late = { .client = 7, .seq = 5, .done_below = 3 };
	struct srv_once_tag old = { .client = 7, .seq = 2, .done_below = 1 };
	int32_t st[4] = { 0, 0, 0, 0 };
	bool found[4];
	uint64_t cl, en, dd, ev, ob;

	(void)state;
	assert_int_equal(srv_once_init(&o), 0);
	assert_int_equal(srv_once_record(&o, &late, 3, keys, st, 2), 0);
	assert_int_equal(srv_once_record(&o, &old, 3, keys + 2, st, 1), 0);
	srv_once_stats(&o, &cl, &en, &dd, &ev, &ob);
	assert_int_equal(ob, 1);
	assert_int_equal(en, 2);	/* call 5's two keys only */
	/* a primary's own record and a client's lookup of call 2: refused */
	assert_int_equal(srv_once_add(&o, &old, 3, keys + 2, st, 1),
			 RS_E_INVAL);
	assert_int_equal(srv_once_lookup(&o, &old, 3, keys, 4, st, found),
			 RS_E_INVAL);
	/* a current record still lands, and a resend of it is answered */
	assert_int_equal(srv_once_record(&o, &late, 3, keys + 2, st, 1), 0);
	memset(found, 0, sizeof(found));
	assert_int_equal(srv_once_lookup(&o, &late, 3, keys, 4, st, found),
			 0);
	assert_true(found[0] && found[1] && found[2] && found[3]);
	srv_once_stats(&o, &cl, &en, &dd, &ev, &ob);
	assert_int_equal(ob, 1);
	srv_once_fini(&o);
}

static void bounds(void **state)
{
	struct srv_once o;
	struct srv_once_tag t = { .client = 9, .done_below = 1 };
	int32_t st[4] = { 0 };
	bool found[4];

	(void)state;
	assert_int_equal(srv_once_init(&o), 0);
	for (uint64_t s = 1; s <= SRV_ONCE_MAX_CALLS; s++) {
		t.seq = s;
		lookup(&o, &t, 1, st, found);
	}
	t.seq = SRV_ONCE_MAX_CALLS + 1;
	assert_int_equal(srv_once_lookup(&o, &t, 1, keys, 4, st, found),
			 RS_E_BUSY);
	/* the client moves on: its old calls go, new ones fit */
	t.done_below = SRV_ONCE_MAX_CALLS;
	lookup(&o, &t, 1, st, found);
	/* a lookup that could exceed the records bound is refused */
	o.entries = SRV_ONCE_MAX_ENTRIES - 2;
	assert_int_equal(srv_once_lookup(&o, &t, 1, keys, 4, st, found),
			 RS_E_BUSY);
	assert_int_equal(srv_once_add(&o, &t, 1, keys, st, 4), RS_E_BUSY);
	o.entries = 0;
	srv_once_fini(&o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(resend),
		cmocka_unit_test(obsolete),
		cmocka_unit_test(bounds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
