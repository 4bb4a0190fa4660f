/*
 * coord_etcd_conformance.c - the conformance cases of the coordination
 * interface (tests/lib/coord_cases.c, the same ones the in-memory
 * backend passes) against a real etcd through its JSON gateway.
 *
 * Usage: coord_etcd_conformance URL[,URL...]. Run by
 * tests/rxe/test_coord_etcd.sh against the etcd it starts; also
 * checks the errors of an unreachable endpoint and of endpoint failover.
 *
 * With RS_ETCD_CA, RS_ETCD_CERT, RS_ETCD_KEY, RS_ETCD_USER and
 * RS_ETCD_PASSWORD_FILE (an https etcd with client certificates and
 * authentication, its token TTL 1 s) every case runs with them, and
 * `security` checks what is refused: a wrong password, a password over
 * http, a certificate without a user; and that a call
 * after the token expired still succeeds (a new token is fetched). The
 * failover case is skipped then (its dead endpoint is http).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coord/coord.h"
#include "recstore/error.h"
#include "coord_cases.h"

static const char *endpoints;
static struct coord_etcd_files sec;	/* from the environment */

struct coord *open_store(void)
{
	struct coord *c = NULL;
	bool world;

	if (coord_etcd_open_files(&c, endpoints, 5000, &sec, &world)) {
		fprintf(stderr, "coord_etcd_open: %s\n", rs_errormsg());
		return NULL;
	}
	return c;
}

/* Nothing listens on port 1: refused at once, with the URL in the text. */
static void unreachable(void **state)
{
	struct coord *c = NULL;
	struct coord_kvs r;

	assert_int_equal(coord_etcd_new(&c, "http://127.0.0.1:1", 2000), 0);
	assert_int_equal(coord_range(c, "/x", false, &r), -ECONNREFUSED);
	assert_non_null(strstr(rs_errormsg(), "127.0.0.1:1"));
	assert_int_equal(coord_wait(c, "/x", 1, 100, NULL), -ECONNREFUSED);
	coord_close(&c);
}

/* A dead endpoint first: requests go to the live one. */
static void failover(void **state)
{
	char list[600];
	struct coord *c = NULL;
	struct coord_kvs r;

	snprintf(list, sizeof(list), "http://127.0.0.1:1,%s", endpoints);
	if (sec.user) {
		skip();
		return;
	}
	assert_int_equal(coord_etcd_new(&c, list, 2000), 0);
	assert_int_equal(coord_put(c, "/t/failover", "1", 1, 0, NULL), 0);
	assert_int_equal(coord_range(c, "/t/failover", false, &r), 0);
	assert_int_equal(r.n, 1);
	coord_kvs_free(&r);
	assert_int_equal(coord_del(c, "/t/failover", false, NULL), 1);
	coord_close(&c);
}

static void security(void **state)
{
	struct coord_etcd_opts o = { .endpoints = endpoints,
				     .timeout_ms = 5000,
				     .ca_file = sec.ca_file,
				     .cert_file = sec.cert_file,
				     .key_file = sec.key_file,
				     .user = sec.user,
				     .password = "not the password" };
	struct coord *c = NULL;
	struct coord_kvs r;
	char other_cert[512], other_key[512];

	if (!sec.user) {
		skip();
		return;
	}
	/* a wrong password: refused, and said so */
	assert_int_equal(coord_etcd_open(&c, &o), 0);
	assert_int_equal(coord_range(c, "/t/sec", false, &r), RS_E_PERM);
	assert_non_null(strstr(rs_errormsg(), "could not authenticate"));
	coord_close(&c);
	/* a password is never sent over http */
	o.endpoints = "http://127.0.0.1:1";
	assert_int_equal(coord_etcd_open(&c, &o), RS_E_INVAL);
	assert_non_null(strstr(rs_errormsg(), "only over https"));
	/* a certificate admits the connection, not a user: without a
	 * password nothing may be written */
	snprintf(other_cert, sizeof(other_cert), "%s", sec.cert_file);
	snprintf(other_key, sizeof(other_key), "%s", sec.key_file);
	*strrchr(other_cert, '/') = '\0';
	*strrchr(other_key, '/') = '\0';
	strcat(other_cert, "/nobody.crt");
	strcat(other_key, "/nobody.key");
	o = (struct coord_etcd_opts){ .endpoints = endpoints,
				      .timeout_ms = 5000,
				      .ca_file = sec.ca_file,
				      .cert_file = other_cert,
				      .key_file = other_key };
	assert_int_equal(coord_etcd_open(&c, &o), 0);
	assert_int_equal(coord_put(c, "/t/sec", "1", 1, 0, NULL), RS_E_PERM);
	assert_non_null(strstr(rs_errormsg(), "no user was given"));
	coord_close(&c);
	/* the token outlives its TTL (1 s): a new one is fetched */
	c = open_store();
	assert_non_null(c);
	assert_int_equal(coord_put(c, "/t/sec", "1", 1, 0, NULL), 0);
	sleep(3);
	assert_int_equal(coord_range(c, "/t/sec", false, &r), 0);
	assert_int_equal(r.n, 1);
	coord_kvs_free(&r);
	assert_int_equal(coord_del(c, "/t/sec", false, NULL), 1);
	coord_close(&c);
}

static void bad_endpoints(void **state)
{
	struct coord *c = NULL;

	assert_int_equal(coord_etcd_new(&c, "", 1000), RS_E_INVAL);
	assert_int_equal(coord_etcd_new(&c, "file:///etc/passwd", 1000),
			 RS_E_INVAL);
	assert_int_equal(coord_etcd_new(&c, "http://a:1", 0), RS_E_INVAL);
	assert_null(c);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		COORD_CASES,
		cmocka_unit_test(unreachable),
		cmocka_unit_test(failover),
		cmocka_unit_test(security),
		cmocka_unit_test(bad_endpoints),
	};

	if (argc != 2) {
		fprintf(stderr, "usage: %s ETCD_URL[,URL...]\n", argv[0]);
		return 2;
	}
	endpoints = argv[1];
	sec.ca_file = getenv("RS_ETCD_CA");
	sec.cert_file = getenv("RS_ETCD_CERT");
	sec.key_file = getenv("RS_ETCD_KEY");
	sec.user = getenv("RS_ETCD_USER");
	sec.password_file = getenv("RS_ETCD_PASSWORD_FILE");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
