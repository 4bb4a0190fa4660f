/*
 * test_lockcheck.c - RS_ASSERT_HELD (src/common/rs_internal.h) fires when a
 * lock rule is broken and stays quiet when it is kept.
 *
 * Each broken rule runs in a forked child, which must die of SIGABRT with
 * the "lock rule broken" message (a death test); the kept rules run in the
 * test process. One case breaks the rule of a real library function,
 * rv_cq_take_events_locked() called without its CQ's lock. In a release
 * build (no RS_DEBUG_LOCKS) the assertions are compiled out and the test
 * checks only that nothing fires.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/rs_internal.h"
#include "verbs/rv_internal.h"

#if defined(RS_DEBUG_LOCKS) && defined(__GLIBC__)
#define CHECKED 1
#else
#define CHECKED 0
#endif

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t ready = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int held_by_other;

/* Run fn in a child; 1 if it died of SIGABRT, 0 if it exited 0. */
static int dies(void (*fn)(void))
{
	pid_t pid;
	int st;

	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		fn();
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	if (WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT)
		return 1;
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	return 0;
}

static void not_held(void)
{
	RS_ASSERT_HELD(&m);
}

static void *holder(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&m);
	pthread_mutex_lock(&ready);
	held_by_other = 1;
	pthread_cond_signal(&cv);
	pthread_mutex_unlock(&ready);
	pause();	/* keeps m until the child exits */
	return NULL;
}

static void held_by_another_thread(void)
{
	pthread_t t;

	pthread_create(&t, NULL, holder, NULL);
	pthread_mutex_lock(&ready);
	while (!held_by_other)
		pthread_cond_wait(&cv, &ready);
	pthread_mutex_unlock(&ready);
	RS_ASSERT_HELD(&m);
}

static void cq_without_lock(void)
{
	pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	struct rv_cq q = { .lock = &lock };

	rv_cq_take_events_locked(&q); /* must stop before touching q.ch */
}

static void kept(void **state)
{
	(void)state;
	pthread_mutex_lock(&m);
	RS_ASSERT_HELD(&m);
	pthread_mutex_unlock(&m);
}

static void broken(void **state)
{
	(void)state;
	assert_int_equal(dies(not_held), CHECKED);
	assert_int_equal(dies(held_by_another_thread), CHECKED);
}

static void broken_in_library(void **state)
{
	(void)state;
	if (!CHECKED)
		skip();	/* the call would dereference q.ch (NULL) */
	assert_int_equal(dies(cq_without_lock), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(kept),
		cmocka_unit_test(broken),
		cmocka_unit_test(broken_in_library),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
