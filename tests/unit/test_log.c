/*
 * test_log.c - the library's log lines through rs_set_log_function and
 * rs_set_log_threshold (recstore/log.h, src/common/log.c).
 *
 * No device: the line provoked is the client config's warning about a
 * secret file others can read, written by the public call that reads it.
 * Checked: an installed function gets the level, the bare message and the
 * site; the threshold drops lines (and a dropped line of a rate-limited
 * site does not use up its burst); NULL brings back the stderr line of
 * old, byte for byte; switching functions under threads that log loses
 * no line.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "recstore/client.h"
#include "common/log.h"
#include "common/ratelimit.h"

static struct {
	int calls;
	enum rs_log_level level;
	char file[256], func[128], msg[1024];
	int line;
} got;

static void catch_line(enum rs_log_level level, const char *file, int line,
		       const char *func, const char *msg)
{
	got.calls++;
	got.level = level;
	got.line = line;
	snprintf(got.file, sizeof(got.file), "%s", file);
	snprintf(got.func, sizeof(got.func), "%s", func);
	snprintf(got.msg, sizeof(got.msg), "%s", msg);
}

static char secret_path[64];

static int setup(void **state)
{
	int fd;

	(void)state;
	strcpy(secret_path, "/tmp/rs-log-secret-XXXXXX");
	fd = mkstemp(secret_path);
	if (fd < 0 || write(fd, "0123456789abcdef0123\n", 21) != 21 ||
	    fchmod(fd, 0644))
		return -1;
	close(fd);
	memset(&got, 0, sizeof(got));
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(secret_path);
	rs_set_log_function(NULL);
	rs_set_log_threshold(RS_LOG_DEBUG);
	return 0;
}

/* The warning of a world-readable secret file: one line, logged. */
static void provoke(void)
{
	struct rs_client_config *cfg = NULL;

	assert_int_equal(rs_client_config_new(&cfg), 0);
	assert_int_equal(rs_client_config_set_credentials_file(cfg, 1,
							       secret_path),
			 0);
	rs_client_config_delete(&cfg);
}

static void function_gets_level_text_site(void **state)
{
	char want[512];

	(void)state;
	assert_int_equal(rs_set_log_function(catch_line), 0);
	provoke();
	assert_int_equal(got.calls, 1);
	assert_int_equal(got.level, RS_LOG_WARNING);
	snprintf(want, sizeof(want), "warning: secret file %s may be read by "
		 "other users (chmod 600 it)", secret_path);
	assert_string_equal(got.msg, want);
	assert_non_null(strstr(got.file, "src/client/config.c"));
	assert_true(got.line > 0);
	assert_string_equal(got.func, "rs_client_config_set_credentials_file");
}

static void threshold_filters(void **state)
{
	(void)state;
	rs_set_log_function(catch_line);
	assert_int_equal(rs_set_log_threshold(RS_LOG_ERROR), 0);
	provoke();
	assert_int_equal(got.calls, 0);
	assert_int_equal(rs_set_log_threshold(RS_LOG_WARNING), 0);
	provoke();
	assert_int_equal(got.calls, 1);
	assert_int_equal(rs_set_log_threshold((enum rs_log_level)99),
			 RS_E_INVAL);
	assert_int_equal(rs_set_log_threshold((enum rs_log_level)-1),
			 RS_E_INVAL);
}

/* A rate-limited site: the burst counts the lines let through, not those
 * the threshold dropped. */
static void limited_lines_go_through_the_function(void **state)
{
	static struct rs_ratelimit rl;

	(void)state;
	rs_set_log_function(catch_line);
	rs_set_log_threshold(RS_LOG_WARNING);
	for (int i = 0; i < 5; i++)
		rs_log_limited_from(&rl, 2, 3600ull * 1000000000ull, "t",
				    RS_LOG_NOTICE, "dropped %d", i);
	assert_int_equal(got.calls, 0);
	rs_set_log_threshold(RS_LOG_DEBUG);
	for (int i = 0; i < 5; i++)
		rs_log_limited_from(&rl, 2, 3600ull * 1000000000ull, "t",
				    RS_LOG_NOTICE, "line %d", i);
	assert_int_equal(got.calls, 2);
	assert_int_equal(got.level, RS_LOG_NOTICE);
	assert_string_equal(got.msg, "line 1");
}

/* NULL: the stderr line the library has always written. */
static void null_restores_stderr(void **state)
{
	char path[] = "/tmp/rs-log-err-XXXXXX", buf[1024], want[1024];
	int fd = mkstemp(path), saved = dup(2);
	FILE *f;

	(void)state;
	assert_true(fd >= 0 && saved >= 0);
	rs_set_log_function(catch_line);
	assert_int_equal(rs_set_log_function(NULL), 0);
	assert_int_equal(dup2(fd, 2), 2);
	provoke();
	rs_log_from("recstore-server", RS_LOG_NOTICE, "table '%s' dropped",
		    "t");
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	assert_int_equal(got.calls, 0);
	f = fopen(path, "r");
	assert_non_null(f);
	snprintf(want, sizeof(want), "recstore: warning: secret file %s may "
		 "be read by other users (chmod 600 it)\n", secret_path);
	assert_non_null(fgets(buf, sizeof(buf), f));
	assert_string_equal(buf, want);
	assert_non_null(fgets(buf, sizeof(buf), f));
	assert_string_equal(buf, "recstore-server: table 't' dropped\n");
	assert_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	close(fd);
	unlink(path);
}

static atomic_int count_a, count_b;

static void to_a(enum rs_log_level level, const char *file, int line,
		 const char *func, const char *msg)
{
	atomic_fetch_add(&count_a, 1);
}

static void to_b(enum rs_log_level level, const char *file, int line,
		 const char *func, const char *msg)
{
	atomic_fetch_add(&count_b, 1);
}

#define LOGGERS 4
#define LINES 20000

static void *logger(void *arg)
{
	for (int i = 0; i < LINES; i++)
		rs_log(RS_LOG_INFO, "line %d", i);
	return arg;
}

static void switching_under_threads_loses_nothing(void **state)
{
	pthread_t t[LOGGERS];

	(void)state;
	rs_set_log_function(to_a);
	for (int i = 0; i < LOGGERS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, logger, NULL), 0);
	for (int i = 0; i < 1000; i++)
		rs_set_log_function(i % 2 ? to_a : to_b);
	for (int i = 0; i < LOGGERS; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(atomic_load(&count_a) + atomic_load(&count_b),
			 LOGGERS * LINES);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(function_gets_level_text_site,
						setup, teardown),
		cmocka_unit_test_setup_teardown(threshold_filters, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			limited_lines_go_through_the_function, setup, teardown),
		cmocka_unit_test_setup_teardown(null_restores_stderr, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			switching_under_threads_loses_nothing, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
