/*
 * test_netcut.c - the link-cutting test hook (src/common/netcut.h): off
 * without its variables; with them, the lines naming this process cut
 * their peers, a new file is read within its check period, and removing
 * it heals.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/netcut.h"

static char path[64];

static void write_cut(const char *text)
{
	char tmp[80];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(rename(tmp, path), 0);
}

static void settle(void)
{
	struct timespec ts = { 0, 60 * 1000 * 1000 };	/* > the 50 ms check */

	nanosleep(&ts, NULL);
}

static void cuts_and_heals(void **state)
{
	uint64_t before;

	(void)state;
	snprintf(path, sizeof(path), "/tmp/rs-netcut-%d", (int)getpid());
	unlink(path);
	setenv("RS_TEST_NET_CUT", path, 1);
	setenv("RS_TEST_NET_ID", "mem-1", 1);
	assert_true(rs_netcut_enabled());
	assert_false(rs_netcut("10.0.0.2:7471"));	/* no file: nothing */

	write_cut("mem-1 10.0.0.2:7471\nmem-2 10.0.0.1:7471\n"
		  "mem-1 etcd\ngarbage\n");
	settle();
	before = rs_netcut_count();
	assert_true(rs_netcut("10.0.0.2:7471"));
	assert_true(rs_netcut("etcd"));
	assert_false(rs_netcut("10.0.0.1:7471"));	/* mem-2's line */
	assert_false(rs_netcut("10.0.0.2:7472"));
	assert_int_equal(rs_netcut_count(), before + 2);

	write_cut("mem-1 etcd\n");	/* the pair heals, etcd stays cut */
	settle();
	assert_false(rs_netcut("10.0.0.2:7471"));
	assert_true(rs_netcut("etcd"));

	assert_int_equal(unlink(path), 0);
	settle();
	assert_false(rs_netcut("etcd"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(cuts_and_heals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
