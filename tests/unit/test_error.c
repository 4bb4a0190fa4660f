/* test_error.c - the error convention: codes, names, thread-local message. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

#include "recstore/error.h"
#include "common/rs_internal.h"

static void codes_have_names(void **state)
{
	for (int c = RS_E_INVAL; c > RS_E_LAST; c--) {
		const char *s = rs_strerror(c);
		assert_non_null(s);
		assert_string_not_equal(s, "unknown error");
	}
	assert_string_equal(rs_strerror(-ENOMEM), strerror(ENOMEM));
	assert_string_equal(rs_strerror(RS_E_LAST), "unknown error");
	assert_string_equal(rs_strerror(5), "unknown error");
}

static void *other_thread(void *arg)
{
	(void)arg;
	return (void *)(uintptr_t)(rs_errormsg()[0] == '\0');
}

static void message_is_thread_local(void **state)
{
	pthread_t t;
	void *empty;

	assert_int_equal(rs_seterr(RS_E_DIM, "dim %d != %d", 64, 128), RS_E_DIM);
	assert_string_equal(rs_errormsg(), "dim 64 != 128");
	assert_int_equal(pthread_create(&t, NULL, other_thread, NULL), 0);
	assert_int_equal(pthread_join(t, &empty), 0);
	assert_true((uintptr_t)empty);
	rs_clearerr();
	assert_string_equal(rs_errormsg(), "");
	assert_non_null(rs_version());
}

/* A message built from the previous one (rs_seterr(code, "...: %s",
 * rs_errormsg())) reads its argument before overwriting it. */
static void message_may_quote_itself(void **state)
{
	(void)state;
	rs_seterr(-ECONNREFUSED, "refused");
	rs_seterr(-ECONNREFUSED, "node a: connect: %s", rs_errormsg());
	assert_string_equal(rs_errormsg(), "node a: connect: refused");
	rs_seterr(-ECONNREFUSED, "%s (again)", rs_errormsg());
	assert_string_equal(rs_errormsg(), "node a: connect: refused (again)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(codes_have_names),
		cmocka_unit_test(message_is_thread_local),
		cmocka_unit_test(message_may_quote_itself),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
