/*
 * test_server_once.c - the node's exactly-once completion records
 * (src/server/srv_once.c) without a device: a resent key gets its
 * recorded status, records are per (call, table, key), done_below
 * forgets calls, a replica skips records of calls already declared done,
 * every bound refuses before anything is recorded, and a client evicted
 * while idle cannot have a call applied twice (its resend is refused) nor
 * grow the node's memory with fresh ids.
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
	struct srv_once_counts n;

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
	srv_once_stats(&o, &n);
	assert_int_equal(n.clients, 2);
	assert_int_equal(n.records, 2);
	assert_int_equal(n.deduplicated, 3);
	/* done_below 2 forgets call 1; a resend of it is refused */
	a2.done_below = 2;
	lookup(&o, &a2, 3, st, found);
	srv_once_stats(&o, &n);
	assert_int_equal(n.records, 0);
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
	struct srv_once_counts n;

	(void)state;
	assert_int_equal(srv_once_init(&o), 0);
	assert_int_equal(srv_once_record(&o, &late, 3, keys, st, 2), 0);
	assert_int_equal(srv_once_record(&o, &old, 3, keys + 2, st, 1), 0);
	srv_once_stats(&o, &n);
	assert_int_equal(n.obsolete, 1);
	assert_int_equal(n.records, 2);	/* call 5's two keys only */
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
	srv_once_stats(&o, &n);
	assert_int_equal(n.obsolete, 1);
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

/* A client silent past SRV_ONCE_IDLE_MS is evicted, but it may still
 * resend (its timeout can be longer): a resend of a call the node had
 * records of must be refused, not applied a second time; a fresh call of
 * the same client is taken (issue 27, fault 8). */
static void resend_after_eviction(void **state)
{
	struct srv_once o;
	struct srv_once_tag t = { .client = 7, .seq = 5, .done_below = 4 };
	struct srv_once_tag fresh = { .client = 7, .seq = 6, .done_below = 5 };
	struct srv_once_tag other = { .seq = 1, .done_below = 1 };
	int32_t st[4] = { 0, 1, 0, 0 };
	bool found[4];
	struct srv_once_counts n;

	(void)state;
	assert_int_equal(srv_once_init(&o), 0);
	lookup(&o, &t, 3, st, found);
	assert_int_equal(srv_once_add(&o, &t, 3, keys, st, 4), 0);
	/* a quiet hour later, 1024 new clients make the node evict */
	o.clock_ofs_ms += 3600000u;
	for (other.client = 100; other.client < 100 + 1024; other.client++)
		lookup(&o, &other, 3, st, found);
	srv_once_stats(&o, &n);
	assert_true(n.evicted >= 1);
	assert_int_equal(n.records, 0);
	/* the resend: refused, nothing applied */
	assert_int_equal(srv_once_lookup(&o, &t, 3, keys, 4, st, found),
			 RS_E_TIMEOUT);
	assert_non_null(strstr(rs_errormsg(), "forgot"));
	/* a new call of the client: taken, and the old one still refused */
	lookup(&o, &fresh, 3, st, found);
	assert_false(found[0] || found[1] || found[2] || found[3]);
	assert_int_equal(srv_once_lookup(&o, &t, 3, keys, 4, st, found),
			 RS_E_TIMEOUT);
	srv_once_fini(&o);
}

/* A lookup and a record of one key for a fresh call 1 of client id: 0
 * or the lookup's error. */
static int write_one(struct srv_once *o, uint64_t id, bool record)
{
	struct srv_once_tag t = { .client = id, .seq = 1, .done_below = 1 };
	int32_t st[1] = { 0 };
	bool found[1];
	int ret = srv_once_lookup(o, &t, 3, keys, 1, st, found);

	if (!ret && record)
		assert_int_equal(srv_once_add(o, &t, 3, keys, st, 1), 0);
	return ret;
}

/* Forgotten clients are bounded: past the bound an idle client with
 * records stays (new clients get RS_E_BUSY once the table is full)
 * rather than be forgotten early; forgotten ones go SRV_ONCE_FORGET_MS
 * after they were last heard of; a client with nothing a resend could
 * apply twice leaves no trace; fresh ids never grow either count past
 * its bound. */
static void forgotten_bounded(void **state)
{
	struct srv_once o;
	struct srv_once_counts n;
	unsigned answered = 0, busy = 0;

	(void)state;
	assert_int_equal(srv_once_init(&o), 0);
	o.max_clients = 8;
	o.max_forgot = 4;
	for (uint64_t id = 1; id <= 8; id++)
		assert_int_equal(write_one(&o, id, true), 0);
	o.clock_ofs_ms += SRV_ONCE_IDLE_MS;
	/* the table is full: four are forgotten, four stay */
	for (uint64_t id = 100; id < 104; id++)
		assert_int_equal(write_one(&o, id, false), 0);
	srv_once_stats(&o, &n);
	assert_int_equal(n.forgotten, 4);
	assert_int_equal(n.clients, 8);
	assert_int_equal(write_one(&o, 104, false), RS_E_BUSY);
	for (uint64_t id = 1; id <= 8; id++) {
		struct srv_once_tag t = { .client = id, .seq = 1,
					  .done_below = 1 };
		int32_t st[1];
		bool found[1] = { false };
		int ret = srv_once_lookup(&o, &t, 3, keys, 1, st, found);

		answered += !ret && found[0];
		busy += ret == RS_E_BUSY;
	}
	assert_int_equal(answered, 4);	/* kept: answered from the record */
	assert_int_equal(busy, 4);	/* forgotten: no room to come back */
	/* four hours on: the forgotten go, the rest are forgotten or, with
	 * no records (100..103), dropped */
	o.clock_ofs_ms += SRV_ONCE_FORGET_MS;
	assert_int_equal(write_one(&o, 105, false), 0);
	srv_once_stats(&o, &n);
	assert_int_equal(n.forgotten, 4);
	assert_int_equal(n.clients, 1);
	assert_int_equal(n.records, 0);
	/* a peer cycling fresh ids, each with a record */
	for (uint64_t id = 1000; id < 1400; id++) {
		int ret = write_one(&o, id, true);

		assert_true(ret == 0 || ret == RS_E_BUSY);
		if (id % 16 == 0)
			o.clock_ofs_ms += SRV_ONCE_IDLE_MS;
		if (id % 64 == 0)
			o.clock_ofs_ms += SRV_ONCE_FORGET_MS;
		srv_once_stats(&o, &n);
		assert_true(n.forgotten <= 4 && n.clients <= 8);
	}
	srv_once_fini(&o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(resend),
		cmocka_unit_test(obsolete),
		cmocka_unit_test(bounds),
		cmocka_unit_test(resend_after_eviction),
		cmocka_unit_test(forgotten_bounded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
