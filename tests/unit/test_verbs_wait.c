/*
 * test_verbs_wait.c - the adaptive wait loop of src/verbs (rv_wait_until),
 * with no device: fake progress, arm and check callbacks and an eventfd in
 * place of a completion channel. The order of calls is recorded: a caller
 * that polled already (w.polled) arms and re-polls at once, without a
 * second poll in a row; a completion found by the first poll needs no
 * arming; nothing sleeps before an arm-then-poll found nothing (a
 * completion between the last poll and the arming must be found by the
 * poll after it); a wake-up is followed by a poll; deadlines hold.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <cmocka.h>

#include "verbs/rv_internal.h"

struct fake {
	atomic_int pending;	/* completions in the "CQ" */
	atomic_bool armed;	/* an arm-then-poll found nothing */
	int done;
	char log[256];		/* P progress, A arm+progress, W woken */
	size_t n;
	int efd;
	struct rv_stats st;
};

static void note(struct fake *f, char ch)
{
	if (f->n + 1 < sizeof(f->log))
		f->log[f->n++] = ch;
}

static int reap(struct fake *f)
{
	int k = atomic_exchange(&f->pending, 0);

	if (k)
		f->done = 1;
	return k;
}

static int f_progress(void *p)
{
	note(p, 'P');
	return reap(p);
}

static int f_arm_progress(void *p)
{
	struct fake *f = p;
	int k;

	note(f, 'A');
	k = reap(f);
	if (!k)
		atomic_store(&f->armed, true);
	return k;
}

static int f_check(void *p)
{
	return ((struct fake *)p)->done;
}

static void f_ready(void *p)
{
	struct fake *f = p;
	uint64_t v;

	note(f, 'W');
	if (read(f->efd, &v, sizeof(v)) < 0)
		return;
}

static void setup_wait(struct rv_wait *w, struct fake *f, bool polled)
{
	memset(f, 0, sizeof(*f));
	f->efd = eventfd(0, EFD_NONBLOCK);
	assert_true(f->efd >= 0);
	memset(w, 0, sizeof(*w));
	w->fds[w->nfds++] = (struct rv_waitfd){ .fd = f->efd,
						.on_ready = f_ready };
	w->progress = f_progress;
	w->arm_progress = f_arm_progress;
	w->check = f_check;
	w->arg = f;
	w->st = &f->st;
	w->polled = polled;
}

static int wait_ms(struct rv_wait *w, int ms)
{
	uint64_t now = rs_mono_ns();

	return rv_wait_until(w, now, ms < 0 ? UINT64_MAX :
			     now + (uint64_t)ms * 1000000ull);
}

/* Found by the first poll: no arming, no sleep. */
static void first_poll_finds(void **state)
{
	struct rv_wait w;
	struct fake f;

	(void)state;
	setup_wait(&w, &f, false);
	atomic_store(&f.pending, 1);
	assert_int_equal(wait_ms(&w, 1000), 0);
	assert_string_equal(f.log, "P");
	assert_int_equal(f.st.wakeups, 0);
	close(f.efd);
}

/* The caller polled: spin 0 goes straight to arm-then-poll, which finds
 * the completion that landed meanwhile (no event would come for it). */
static void polled_arms_first(void **state)
{
	struct rv_wait w;
	struct fake f;

	(void)state;
	setup_wait(&w, &f, true);
	atomic_store(&f.pending, 1);
	assert_int_equal(wait_ms(&w, 1000), 0);
	assert_string_equal(f.log, "A");
	assert_int_equal(f.st.wakeups, 0);
	close(f.efd);
}

struct late {
	struct fake *f;
	int delay_ms;
};

static void *complete_late(void *p)
{
	struct late *l = p;
	uint64_t one = 1;

	/* after the arm-then-poll, however late the waiter runs */
	while (!atomic_load(&l->f->armed))
		usleep(1000);
	usleep((useconds_t)l->delay_ms * 1000);
	atomic_store(&l->f->pending, 1);
	if (write(l->f->efd, &one, sizeof(one)) < 0)
		return NULL;
	return NULL;
}

/* Nothing yet: arm, poll, sleep; the event wakes the loop, which polls. */
static void sleeps_after_arm(void **state)
{
	struct late l;
	struct rv_wait w;
	struct fake f;
	pthread_t t;

	(void)state;
	setup_wait(&w, &f, true);
	l = (struct late){ .f = &f, .delay_ms = 30 };
	assert_int_equal(pthread_create(&t, NULL, complete_late, &l), 0);
	assert_int_equal(wait_ms(&w, 5000), 0);
	pthread_join(t, NULL);
	assert_string_equal(f.log, "AWP");
	assert_int_equal(f.st.wakeups, 1);
	close(f.efd);
}

/* Without arm_progress (the listener's wait, rx waits): arm_all then
 * progress, so the log shows the poll after the (CQ-less) arming. */
static void no_arm_progress(void **state)
{
	struct rv_wait w;
	struct fake f;

	(void)state;
	setup_wait(&w, &f, true);
	w.arm_progress = NULL;
	atomic_store(&f.pending, 1);
	assert_int_equal(wait_ms(&w, 1000), 0);
	assert_string_equal(f.log, "P");
	close(f.efd);
}

/* Nothing ever: RS_E_TIMEOUT at the deadline; every sleep came after an
 * arm-then-poll; a polled caller with a deadline already past times out
 * without another poll. */
static void deadlines(void **state)
{
	struct rv_wait w;
	struct fake f;
	uint64_t t0;

	(void)state;
	setup_wait(&w, &f, false);
	t0 = rs_mono_ns();
	assert_int_equal(wait_ms(&w, 30), RS_E_TIMEOUT);
	assert_true(rs_mono_ns() - t0 >= 30 * 1000000ull);
	assert_true(f.n >= 2);
	assert_int_equal(f.log[0], 'P');
	for (size_t i = 1; i < f.n; i++)
		assert_int_equal(f.log[i], i % 2 ? 'A' : 'P');
	assert_true(f.st.wakeups >= 1);
	close(f.efd);

	setup_wait(&w, &f, true);
	assert_int_equal(wait_ms(&w, 0), RS_E_TIMEOUT);
	assert_string_equal(f.log, "");
	close(f.efd);

	/* a deadline passed before the wait began (a follower that became
	 * the poller late): one poll, then a timeout of 0 ms, not a wrap */
	setup_wait(&w, &f, false);
	t0 = rs_mono_ns();
	assert_int_equal(rv_wait_until(&w, t0, t0 - 1000000ull),
			 RS_E_TIMEOUT);
	assert_string_equal(f.log, "P");
	assert_non_null(strstr(rs_errormsg(), "after 0 ms"));
	close(f.efd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(first_poll_finds),
		cmocka_unit_test(polled_arms_first),
		cmocka_unit_test(sleeps_after_arm),
		cmocka_unit_test(no_arm_progress),
		cmocka_unit_test(deadlines),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
