/*
 * test_addr.c - the one "ADDR:PORT" parser (src/common/addr.h): a table
 * of accepted inputs with the host and port they give under each caller's
 * policy (default port or none, port 0 allowed or not), a table of
 * refused inputs that must leave the outputs alone and set a message, and
 * the formatter's round trip.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/addr.h"
#include "common/defaults.h"
#include "recstore/error.h"

#define HOSTLEN 64

struct ok_case {
	const char *in;
	uint16_t dflt;
	bool port0_ok;
	const char *host;
	uint16_t port;
};

static const struct ok_case oks[] = {
	{ "1.2.3.4:7471", 0, false, "1.2.3.4", 7471 },
	{ "10.0.0.1:1", 0, false, "10.0.0.1", 1 },
	{ "10.0.0.1:65535", 0, false, "10.0.0.1", 65535 },
	{ "10.0.0.1:00080", 0, false, "10.0.0.1", 80 },
	{ "host:0", 0, true, "host", 0 },
	{ "[fe80::1]:0", 0, true, "fe80::1", 0 },
	{ "[::1]:7471", 0, false, "::1", 7471 },
	{ "[fe80::1%eth0]:7471", 0, false, "fe80::1%eth0", 7471 },
	{ "[::ffff:10.0.0.1]:9", 0, false, "::ffff:10.0.0.1", 9 },
	{ "node-1.example_x:80", 0, false, "node-1.example_x", 80 },
	{ "10.0.0.1", RS_DEFAULT_PORT, false, "10.0.0.1", RS_DEFAULT_PORT },
	{ "[::1]", RS_DEFAULT_PORT, false, "::1", RS_DEFAULT_PORT },
	{ "10.0.0.1:5", RS_DEFAULT_PORT, false, "10.0.0.1", 5 },
};

struct bad_case {
	const char *in;
	uint16_t dflt;
	bool port0_ok;
};

static const struct bad_case bads[] = {
	{ "", 0, true },
	{ ":7471", 0, true },
	{ ":7471", RS_DEFAULT_PORT, true },
	{ "host:", 0, true },
	{ "host:", RS_DEFAULT_PORT, true },
	{ "host:0", 0, false },
	{ "host:0", RS_DEFAULT_PORT, false },
	{ "host:65536", 0, true },
	{ "host:99999", 0, true },
	{ "host:123456", 0, true },
	{ "host:12ab", 0, true },
	{ "host:+80", 0, true },
	{ "host:-1", 0, true },
	{ "host: 80", 0, true },
	{ " host:80", 0, true },
	{ "host :80", 0, true },
	{ "host:80 ", 0, true },
	{ "host:80\n", 0, true },
	{ "ho/st:80", 0, true },
	{ "host", 0, true },		/* no default port */
	{ "[::1]", 0, true },
	{ "fe80::1:7471", 0, true },	/* IPv6 without brackets */
	{ "fe80::1", RS_DEFAULT_PORT, true },
	{ "host:80:90", 0, true },
	{ "[::1]:", 0, true },
	{ "[::1]7471", 0, true },
	{ "[::1", 0, true },
	{ "[]:7471", 0, true },
	{ "[10.0.0.1]:7471", 0, true },	/* brackets are for IPv6 */
	{ "[::1]]:7471", 0, true },
	{ "[:: 1]:7471", 0, true },
	{ "[::1]:65536", 0, true },
};

static void test_accepted(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(oks) / sizeof(oks[0]); i++) {
		const struct ok_case *c = &oks[i];
		char host[HOSTLEN];
		uint16_t port = 1234;
		int rc;

		rc = rs_addr_parse(NULL, c->in, c->dflt, c->port0_ok, host,
				   sizeof(host), &port);
		if (rc)
			fail_msg("'%s' refused: %s", c->in, rs_errormsg());
		assert_string_equal(host, c->host);
		assert_int_equal(port, c->port);
	}
}

static void test_refused(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
		const struct bad_case *c = &bads[i];
		char host[HOSTLEN] = "untouched";
		uint16_t port = 1234;
		int rc;

		rc = rs_addr_parse(NULL, c->in, c->dflt, c->port0_ok, host,
				   sizeof(host), &port);
		if (rc != RS_E_INVAL)
			fail_msg("'%s' gave %d (host '%s' port %u), not "
				 "refused", c->in, rc, host, port);
		assert_string_equal(host, "untouched");
		assert_int_equal(port, 1234);
		assert_true(strlen(rs_errormsg()) > 0);
	}
}

static void test_null_and_lengths(void **state)
{
	char host[HOSTLEN], big[4096];
	uint16_t port;

	(void)state;
	assert_int_equal(rs_addr_parse(NULL, NULL, 0, true, host,
				       sizeof(host), &port), RS_E_INVAL);
	assert_int_equal(rs_addr_parse(NULL, "a:1", 0, true, NULL, 8, &port),
			 RS_E_INVAL);
	assert_int_equal(rs_addr_parse(NULL, "a:1", 0, true, host, 0, &port),
			 RS_E_INVAL);
	/* the host and its NUL must fit */
	assert_int_equal(rs_addr_parse(NULL, "abcd:1", 0, true, host, 5,
				       &port), 0);
	assert_string_equal(host, "abcd");
	assert_int_equal(rs_addr_parse(NULL, "abcde:1", 0, true, host, 5,
				       &port), RS_E_INVAL);
	assert_non_null(strstr(rs_errormsg(), "too long"));
	assert_int_equal(rs_addr_parse(NULL, "[::1:2]:1", 0, true, host, 5,
				       &port), RS_E_INVAL);
	/* very long input: refused, and the message quotes only its start */
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	big[sizeof(big) - 6] = ':';
	big[sizeof(big) - 5] = '1';
	assert_int_equal(rs_addr_parse(NULL, big, 0, true, host,
				       sizeof(host), &port), RS_E_INVAL);
	assert_true(strlen(rs_errormsg()) < 256);
	memset(big, '9', sizeof(big) - 1);
	big[0] = 'h';
	big[1] = ':';
	assert_int_equal(rs_addr_parse(NULL, big, 0, true, host,
				       sizeof(host), &port), RS_E_INVAL);
}

/* what the caller parses prefixes every message */
static void test_named(void **state)
{
	char host[HOSTLEN];
	uint16_t port;

	(void)state;
	assert_int_equal(rs_addr_parse(NULL, "h:x", 0, true, host,
				       sizeof(host), &port), RS_E_INVAL);
	assert_string_equal(rs_errormsg(), "address 'h:x': the port is not "
			    "a decimal number");
	assert_int_equal(rs_addr_parse("listen", "h:x", 0, true, host,
				       sizeof(host), &port), RS_E_INVAL);
	assert_string_equal(rs_errormsg(), "listen: address 'h:x': the port "
			    "is not a decimal number");
	assert_int_equal(rs_addr_parse("node", "", 0, false, host,
				       sizeof(host), &port), RS_E_INVAL);
	assert_string_equal(rs_errormsg(), "node: address: empty");
	assert_int_equal(rs_addr_parse("node", "h:1", 0, false, NULL, 8,
				       &port), RS_E_INVAL);
	assert_string_equal(rs_errormsg(), "node: address: no output buffer");
}

static void test_format(void **state)
{
	char buf[64], host[HOSTLEN];
	uint16_t port;

	(void)state;
	assert_int_equal(rs_addr_format("10.0.0.5", 7471, buf, sizeof(buf)),
			 13);
	assert_string_equal(buf, "10.0.0.5:7471");
	assert_int_equal(rs_addr_format("fe80::1", 0, buf, sizeof(buf)), 11);
	assert_string_equal(buf, "[fe80::1]:0");
	assert_int_equal(rs_addr_parse(NULL, buf, 0, true, host,
				       sizeof(host), &port), 0);
	assert_string_equal(host, "fe80::1");
	assert_int_equal(port, 0);
	assert_int_equal(rs_addr_format("10.0.0.5", 7471, buf, 13),
			 RS_E_INVAL);
	assert_int_equal(rs_addr_format(NULL, 1, buf, sizeof(buf)),
			 RS_E_INVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_accepted),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_null_and_lengths),
		cmocka_unit_test(test_named),
		cmocka_unit_test(test_format),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
