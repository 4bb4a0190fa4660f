/*
 * test_ratelimit.c - the per-call-site log limiter (src/common/ratelimit.h)
 * and the node's rate-limited log (srv_log_limited): burst lines per
 * interval, the rest counted and reported once with the next line let
 * through; an injected clock.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/ratelimit.h"
#include "server/srv_internal.h"

#define SEC 1000000000ull

static void burst_then_silence_then_summary(void **state)
{
	struct rs_ratelimit rl = { 0 };
	unsigned sup = 99, ok = 0;
	uint64_t t = 5 * SEC;

	(void)state;
	for (int i = 0; i < 1000; i++)
		if (rs_ratelimit_ok(&rl, 10, SEC, t + (uint64_t)i, &sup)) {
			ok++;
			assert_int_equal(sup, 0);
		}
	assert_int_equal(ok, 10);
	/* still the same window: nothing */
	assert_false(rs_ratelimit_ok(&rl, 10, SEC, t + SEC - 1, &sup));
	/* a new window: the first line carries the 991 dropped ones */
	assert_true(rs_ratelimit_ok(&rl, 10, SEC, t + SEC, &sup));
	assert_int_equal(sup, 991);
	assert_true(rs_ratelimit_ok(&rl, 10, SEC, t + SEC + 1, &sup));
	assert_int_equal(sup, 0);
}

static void zero_clock_and_zero_struct(void **state)
{
	struct rs_ratelimit rl = { 0 };
	unsigned sup;

	(void)state;
	assert_true(rs_ratelimit_ok(&rl, 1, SEC, 0, &sup));
	assert_false(rs_ratelimit_ok(&rl, 1, SEC, 1, &sup));
	assert_true(rs_ratelimit_ok(&rl, 1, SEC, 2 * SEC, &sup));
	assert_int_equal(sup, 1);
}

/* The node's limited log: a peer that causes a line per message writes at
 * most SRV_LOG_BURST lines per interval, whatever it sends. */
static void node_log_is_limited(void **state)
{
	static struct rs_ratelimit rl;
	char path[] = "/tmp/rs-rl-XXXXXX", buf[65536];
	int fd = mkstemp(path), saved = dup(2), lines = 0;
	FILE *f;

	(void)state;
	assert_true(fd >= 0 && saved >= 0);
	assert_int_equal(dup2(fd, 2), 2);
	for (int i = 0; i < 10000; i++)
		srv_log_limited(&rl, "bad message %d", i);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	f = fopen(path, "r");
	assert_non_null(f);
	while (fgets(buf, sizeof(buf), f))
		lines++;
	fclose(f);
	close(fd);
	unlink(path);
	assert_true(lines >= 1);
	assert_true(lines <= SRV_LOG_BURST * 2); /* at most two windows */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(burst_then_silence_then_summary),
		cmocka_unit_test(zero_clock_and_zero_struct),
		cmocka_unit_test(node_log_is_limited),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
