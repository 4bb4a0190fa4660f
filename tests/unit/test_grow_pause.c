/*
 * test_grow_pause.c - a growth's pause of the node's writes
 * (srv_writes_pause, src/server/srv_grow.c) without a device: it waits
 * for the writes inside to leave, but not for ever. A TABLE_CREATE or
 * TABLE_DROP counted as a write waits for tables.admin, which a growth
 * holds while it pauses; an unbounded wait was a deadlock of the node's
 * writes. A checkpoint's freeze refuses the pause.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "server/srv_internal.h"

static double mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static struct rs_server *server(void)
{
	struct rs_server *s = calloc(1, sizeof(*s));

	assert_non_null(s);
	srv_ckpt_init(s);
	return s;
}

static void done(struct rs_server *s)
{
	srv_ckpt_destroy(s);
	free(s);
}

/* A write that never leaves (a create waiting for the growth's admin
 * lock): the pause gives up after its wait, lifts its freeze, and new
 * writes enter again. */
static void stuck_writer(void **state)
{
	struct rs_server *s = server();
	double t0;

	(void)state;
	assert_true(srv_write_enter(s));
	t0 = mono_ms();
	assert_int_equal(srv_writes_pause(s, 50), RS_E_BUSY);
	assert_true(mono_ms() - t0 >= 50);
	assert_non_null(strstr(rs_errormsg(), "did not leave within 50 ms"));
	assert_int_equal(atomic_load(&s->ckpt.frozen), 0);
	assert_true(srv_write_enter(s));	/* writes go on */
	srv_write_leave(s);
	srv_write_leave(s);
	done(s);
}

static void *leave_later(void *arg)
{
	struct rs_server *s = arg;

	usleep(20000);
	srv_write_leave(s);
	return NULL;
}

/* Writes that leave in time: paused, new writes refused until resumed. */
static void drains(void **state)
{
	struct rs_server *s = server();
	pthread_t th;

	(void)state;
	assert_true(srv_write_enter(s));
	assert_int_equal(pthread_create(&th, NULL, leave_later, s), 0);
	assert_int_equal(srv_writes_pause(s, 10000), 0);
	assert_int_equal(atomic_load(&s->ckpt.writers), 0);
	assert_false(srv_write_enter(s));
	srv_writes_resume(s);
	assert_true(srv_write_enter(s));
	srv_write_leave(s);
	pthread_join(th, NULL);
	done(s);
}

/* A checkpoint's freeze: the growth waits for its end. */
static void checkpoint(void **state)
{
	struct rs_server *s = server();

	(void)state;
	atomic_store(&s->ckpt.frozen, SRV_FROZEN_CKPT);
	assert_int_equal(srv_writes_pause(s, 50), RS_E_BUSY);
	assert_int_equal(atomic_load(&s->ckpt.frozen), SRV_FROZEN_CKPT);
	done(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(stuck_writer),
		cmocka_unit_test(drains),
		cmocka_unit_test(checkpoint),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
