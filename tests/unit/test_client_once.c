/*
 * test_client_once.c - the call sequence of exactly-once writes
 * (src/client/once.h): sequences 1, 2, ... in the order calls start;
 * done_below is the lowest sequence in flight, or the next one when none
 * is; calls leave in any order; done_below never passes a call in flight
 * and never decreases, also with threads entering and leaving at once.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "client/once.h"

static void test_empty(void **state)
{
	struct cli_once o;
	struct cli_once_slot s;
	uint64_t d = 0;

	(void)state;
	assert_int_equal(cli_once_init(&o), 0);
	assert_int_equal(cli_once_done_below(&o), 1);
	assert_int_equal(cli_once_enter(&o, &s, &d), 1);
	assert_int_equal(d, 1);
	assert_int_equal(cli_once_done_below(&o), 1);
	cli_once_leave(&o, &s);
	/* nothing in flight: the next sequence to be taken */
	assert_int_equal(cli_once_done_below(&o), 2);
	assert_int_equal(cli_once_enter(&o, &s, &d), 2);
	assert_int_equal(d, 2);
	cli_once_leave(&o, &s);
	assert_int_equal(cli_once_done_below(&o), 3);
	cli_once_destroy(&o);
}

static void test_leave_any_order(void **state)
{
	struct cli_once o;
	struct cli_once_slot s[6];
	uint64_t d;

	(void)state;
	assert_int_equal(cli_once_init(&o), 0);
	for (unsigned i = 1; i <= 5; i++) {
		assert_int_equal(cli_once_enter(&o, &s[i], &d), i);
		assert_int_equal(d, 1);
	}
	cli_once_leave(&o, &s[3]);	/* a middle one: nothing moves */
	assert_int_equal(cli_once_done_below(&o), 1);
	cli_once_leave(&o, &s[1]);	/* the head */
	assert_int_equal(cli_once_done_below(&o), 2);
	cli_once_leave(&o, &s[5]);	/* the tail */
	assert_int_equal(cli_once_done_below(&o), 2);
	assert_int_equal(cli_once_enter(&o, &s[0], &d), 6);
	assert_int_equal(d, 2);
	cli_once_leave(&o, &s[2]);	/* 3 left already: 4 is lowest */
	assert_int_equal(cli_once_done_below(&o), 4);
	cli_once_leave(&o, &s[4]);
	assert_int_equal(cli_once_done_below(&o), 6);
	cli_once_leave(&o, &s[0]);
	assert_int_equal(cli_once_done_below(&o), 7);
	cli_once_destroy(&o);
}

/* Random enters and leaves against a model (the set of sequences in
 * flight): done_below is its minimum, or next when empty. */
#define MODEL_SLOTS 64
static void test_random_model(void **state)
{
	struct cli_once o;
	struct cli_once_slot s[MODEL_SLOTS];
	bool live[MODEL_SLOTS] = { false };
	uint64_t next = 1, last = 1, d;
	unsigned rnd = 12345;

	(void)state;
	assert_int_equal(cli_once_init(&o), 0);
	for (unsigned step = 0; step < 200000; step++) {
		unsigned i;
		uint64_t want = next;

		rnd = rnd * 1103515245u + 12345u;
		i = (rnd >> 8) % MODEL_SLOTS;
		if (live[i]) {
			cli_once_leave(&o, &s[i]);
			live[i] = false;
		} else {
			assert_int_equal(cli_once_enter(&o, &s[i], &d), next);
			assert_true(d <= next);
			live[i] = true;
			next++;
		}
		for (unsigned j = 0; j < MODEL_SLOTS; j++)
			if (live[j] && s[j].seq < want)
				want = s[j].seq;
		d = cli_once_done_below(&o);
		assert_int_equal(d, want);
		assert_true(d >= last);	/* never decreases */
		last = d;
	}
	for (unsigned j = 0; j < MODEL_SLOTS; j++)
		if (live[j])
			cli_once_leave(&o, &s[j]);
	assert_int_equal(cli_once_done_below(&o), next);
	cli_once_destroy(&o);
}

/* Threads: every call reads done_below while in flight (from enter and
 * again later) and finds it at or below its own sequence; an observer
 * finds it never decreasing; every sequence is taken exactly once. */
#define THREADS 8
#define CALLS 20000
struct shared {
	struct cli_once o;
	atomic_uint_fast8_t *taken;	/* [THREADS * CALLS + 1] */
	atomic_uint bad_below, bad_dup, bad_order;
	atomic_bool stop;
};

static void *caller(void *arg)
{
	struct shared *sh = arg;
	struct cli_once_slot s[2];
	uint64_t d;

	for (unsigned i = 0; i < CALLS; i += 2) {
		/* two calls in flight at once, left in either order */
		uint64_t a = cli_once_enter(&sh->o, &s[0], &d);
		uint64_t b;

		if (d > a)
			atomic_fetch_add(&sh->bad_below, 1);
		b = cli_once_enter(&sh->o, &s[1], &d);
		if (d > a || b <= a)
			atomic_fetch_add(&sh->bad_order, 1);
		if (cli_once_done_below(&sh->o) > a)
			atomic_fetch_add(&sh->bad_below, 1);
		if (atomic_fetch_add(&sh->taken[a], 1) ||
		    atomic_fetch_add(&sh->taken[b], 1))
			atomic_fetch_add(&sh->bad_dup, 1);
		cli_once_leave(&sh->o, &s[i & 2 ? 0 : 1]);
		if (cli_once_done_below(&sh->o) > (i & 2 ? b : a))
			atomic_fetch_add(&sh->bad_below, 1);
		cli_once_leave(&sh->o, &s[i & 2 ? 1 : 0]);
	}
	return NULL;
}

static void *observer(void *arg)
{
	struct shared *sh = arg;
	uint64_t last = 0;

	while (!atomic_load(&sh->stop)) {
		uint64_t d = cli_once_done_below(&sh->o);

		if (d < last)
			atomic_fetch_add(&sh->bad_order, 1);
		last = d;
	}
	return NULL;
}

static void test_threads(void **state)
{
	struct shared *sh = calloc(1, sizeof(*sh));
	pthread_t t[THREADS], obs;
	size_t total = (size_t)THREADS * CALLS;

	(void)state;
	assert_non_null(sh);
	sh->taken = calloc(total + 1, sizeof(*sh->taken));
	assert_non_null(sh->taken);
	assert_int_equal(cli_once_init(&sh->o), 0);
	assert_int_equal(pthread_create(&obs, NULL, observer, sh), 0);
	for (unsigned i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, caller, sh), 0);
	for (unsigned i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	atomic_store(&sh->stop, true);
	pthread_join(obs, NULL);
	assert_int_equal(atomic_load(&sh->bad_below), 0);
	assert_int_equal(atomic_load(&sh->bad_order), 0);
	assert_int_equal(atomic_load(&sh->bad_dup), 0);
	for (size_t q = 1; q <= total; q++)
		assert_int_equal(atomic_load(&sh->taken[q]), 1);
	/* all returned: done_below is the next sequence */
	assert_int_equal(cli_once_done_below(&sh->o), total + 1);
	assert_null(sh->o.head);
	assert_null(sh->o.tail);
	cli_once_destroy(&sh->o);
	free(sh->taken);
	free(sh);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_leave_any_order),
		cmocka_unit_test(test_random_model),
		cmocka_unit_test(test_threads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
