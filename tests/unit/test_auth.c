/*
 * test_auth.c - connection credentials without a device (src/common/auth.c):
 * the role table, the connect request / accept / reject bytes, every node
 * check (missing, malformed, unknown key, clock window, MAC, replay, a full
 * share of the replay cache), one key's flood leaving the others alone, the
 * client's check of the node's proof, the replay cache against a simple
 * model, and secret files.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/auth.h"
#include "recstore/error.h"
#include "common/proto.h"
#include "common/rs_internal.h"

#define NOW 1800000000ull
static const char SECRET_A[] = "0123456789abcdef-admin-secret";
static const char SECRET_D[] = "data-secret-of-at-least-16";
static const char SECRET_R[] = "reader-secret-0123456789";

static void keys3(struct auth_key k[3])
{
	assert_int_equal(auth_key_init(&k[0], 1, AUTH_ROLE_ADMIN, SECRET_A,
				       strlen(SECRET_A)), 0);
	assert_int_equal(auth_key_init(&k[1], 7, AUTH_ROLE_DATA, SECRET_D,
				       strlen(SECRET_D)), 0);
	assert_int_equal(auth_key_init(&k[2], 3, AUTH_ROLE_READ, SECRET_R,
				       strlen(SECRET_R)), 0);
}

static void node3(struct auth_node *a, uint32_t cap)
{
	struct auth_key k[3];

	keys3(k);
	assert_int_equal(auth_node_init(a, k, 3, 60, cap), 0);
}

static void roles(void **state)
{
	static const unsigned reads[] = { PROTO_OP_HELLO, PROTO_OP_TABLE_DIR,
					  PROTO_OP_GET, PROTO_OP_STATS,
					  PROTO_OP_CONFIG };
	static const unsigned writes[] = { PROTO_OP_GET_OR_INIT, PROTO_OP_PUT,
					   PROTO_OP_UPDATE, PROTO_OP_DELETE };
	static const unsigned admins[] = { PROTO_OP_TABLE_CREATE,
					   PROTO_OP_TABLE_DROP, PROTO_OP_CKPT,
					   PROTO_OP_LOAD, PROTO_OP_REPL };

	(void)state;
	for (size_t i = 0; i < RS_ARRAY_SIZE(reads); i++) {
		assert_true(auth_role_allows(AUTH_ROLE_READ, reads[i]));
		assert_true(auth_role_allows(AUTH_ROLE_DATA, reads[i]));
		assert_true(auth_role_allows(AUTH_ROLE_ADMIN, reads[i]));
		assert_false(auth_role_allows(AUTH_ROLE_NONE, reads[i]));
		assert_int_equal(auth_role_needed(reads[i]), AUTH_ROLE_READ);
	}
	for (size_t i = 0; i < RS_ARRAY_SIZE(writes); i++) {
		assert_false(auth_role_allows(AUTH_ROLE_READ, writes[i]));
		assert_true(auth_role_allows(AUTH_ROLE_DATA, writes[i]));
		assert_true(auth_role_allows(AUTH_ROLE_ADMIN, writes[i]));
		assert_int_equal(auth_role_needed(writes[i]), AUTH_ROLE_DATA);
	}
	for (size_t i = 0; i < RS_ARRAY_SIZE(admins); i++) {
		assert_false(auth_role_allows(AUTH_ROLE_READ, admins[i]));
		assert_false(auth_role_allows(AUTH_ROLE_DATA, admins[i]));
		assert_true(auth_role_allows(AUTH_ROLE_ADMIN, admins[i]));
		assert_int_equal(auth_role_needed(admins[i]), AUTH_ROLE_ADMIN);
	}
	assert_false(auth_role_allows(AUTH_ROLE_ADMIN + 1, PROTO_OP_GET));
	assert_false(auth_role_allows(AUTH_ROLE_DATA, 40));
	assert_int_equal(auth_role_parse("read"), AUTH_ROLE_READ);
	assert_int_equal(auth_role_parse("data"), AUTH_ROLE_DATA);
	assert_int_equal(auth_role_parse("admin"), AUTH_ROLE_ADMIN);
	assert_int_equal(auth_role_parse("none"), -1);
	assert_int_equal(auth_role_parse("Admin"), -1);
	assert_int_equal(auth_role_parse(NULL), -1);
}

static void key_bounds(void **state)
{
	struct auth_key k;
	char big[AUTH_SECRET_MAX + 1];

	(void)state;
	memset(big, 'x', sizeof(big));
	assert_int_equal(auth_key_init(&k, 0, 1, SECRET_A, 20), RS_E_INVAL);
	assert_int_equal(auth_key_init(&k, 1, 1, SECRET_A, 15), RS_E_INVAL);
	assert_int_equal(auth_key_init(&k, 1, 1, big, sizeof(big)),
			 RS_E_INVAL);
	assert_int_equal(auth_key_init(&k, 1, 1, big, AUTH_SECRET_MAX), 0);
	assert_int_equal(auth_key_init(&k, 1, 9, SECRET_A, 20), RS_E_INVAL);
	auth_key_init(&k, 1, 1, SECRET_A, 16);
	auth_key_wipe(&k);
	assert_int_equal(k.len, 0);
	assert_int_equal(k.secret[0], 0);
}

static void round_trip(void **state)
{
	struct auth_node a;
	struct auth_key k[3];
	uint8_t req[AUTH_REQ_LEN], reply[64];
	size_t rlen = 0;
	unsigned role = 99, got = 99;

	(void)state;
	node3(&a, 0);
	keys3(k);
	for (int i = 0; i < 3; i++) {
		auth_request_make(&k[i], NOW, req);
		assert_int_equal(auth_node_check(&a, req, sizeof(req), NOW,
						 &role, reply, &rlen),
				 AUTH_W_OK);
		assert_int_equal(rlen, AUTH_ACC_LEN);
		assert_int_equal(role, k[i].role);
		assert_int_equal(auth_accept_check(&k[i], req, reply, rlen,
						   &got), 0);
		assert_int_equal(got, k[i].role);
		assert_int_equal(auth_node_role_of(&a, req, sizeof(req)),
				 k[i].role);
		/* an accept is not a reject */
		assert_int_equal(auth_reject_reason(reply, rlen), 0);
	}
	assert_int_equal(a.accepted, 3);
	auth_node_fini(&a);
}

/* A refused request: its reason in the reject bytes. */
static void expect_refused(struct auth_node *a, const uint8_t *req,
			   size_t len, uint64_t now, unsigned why,
			   unsigned reason)
{
	uint8_t reply[64], padded[148];
	size_t rlen = 0;
	unsigned role = 99;

	assert_int_equal(auth_node_check(a, req, len, now, &role, reply,
					 &rlen), why);
	assert_int_equal(role, 99);
	assert_int_equal(rlen, AUTH_REJ_LEN);
	/* rdma_cm pads a reject's data with zeros */
	memset(padded, 0, sizeof(padded));
	memcpy(padded, reply, rlen);
	assert_int_equal(auth_reject_reason(padded, sizeof(padded)), reason);
}

static void node_refusals(void **state)
{
	struct auth_node a;
	struct auth_key k[3], wrong, stranger;
	uint8_t req[AUTH_REQ_LEN], bad[AUTH_REQ_LEN];

	(void)state;
	node3(&a, 0);
	keys3(k);
	expect_refused(&a, req, 0, NOW, AUTH_W_MISSING, AUTH_REJ_REQUIRED);
	auth_request_make(&k[1], NOW, req);
	expect_refused(&a, req, AUTH_REQ_LEN - 1, NOW, AUTH_W_MALFORMED,
		       AUTH_REJ_FAILED);
	memcpy(bad, req, sizeof(bad));
	bad[0] = AUTH_VERSION + 1;
	expect_refused(&a, bad, sizeof(bad), NOW, AUTH_W_MALFORMED,
		       AUTH_REJ_FAILED);
	memcpy(bad, req, sizeof(bad));
	bad[2] = 1;
	expect_refused(&a, bad, sizeof(bad), NOW, AUTH_W_MALFORMED,
		       AUTH_REJ_FAILED);
	/* wrong secret for a known key id */
	auth_key_init(&wrong, 7, AUTH_ROLE_DATA, "not-the-data-secret!", 20);
	auth_request_make(&wrong, NOW, bad);
	expect_refused(&a, bad, sizeof(bad), NOW, AUTH_W_MAC,
		       AUTH_REJ_FAILED);
	/* unknown key id */
	auth_key_init(&stranger, 99, AUTH_ROLE_ADMIN, SECRET_A,
		      strlen(SECRET_A));
	auth_request_make(&stranger, NOW, bad);
	expect_refused(&a, bad, sizeof(bad), NOW, AUTH_W_UNKNOWN_KEY,
		       AUTH_REJ_FAILED);
	/* clock window: 60 s either way */
	auth_request_make(&k[1], NOW - 61, bad);
	expect_refused(&a, bad, sizeof(bad), NOW, AUTH_W_CLOCK,
		       AUTH_REJ_FAILED);
	auth_request_make(&k[1], NOW + 61, bad);
	expect_refused(&a, bad, sizeof(bad), NOW, AUTH_W_CLOCK,
		       AUTH_REJ_FAILED);
	/* every single-bit change of a good request is refused */
	for (size_t bit = 0; bit < AUTH_REQ_LEN * 8; bit++) {
		uint8_t reply[64];
		size_t rlen;
		unsigned role;

		memcpy(bad, req, sizeof(bad));
		bad[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		assert_int_not_equal(auth_node_check(&a, bad, sizeof(bad), NOW,
						     &role, reply, &rlen),
				     AUTH_W_OK);
	}
	assert_int_equal(a.accepted, 0);
	assert_int_equal(a.refused[AUTH_W_MISSING], 1);
	assert_int_equal(a.refused[AUTH_W_CLOCK] >= 2, 1);
	auth_node_fini(&a);
}

static void clock_edges_and_replay(void **state)
{
	struct auth_node a;
	struct auth_key k[3];
	uint8_t req[AUTH_REQ_LEN], reply[64];
	size_t rlen;
	unsigned role;

	(void)state;
	node3(&a, 0);
	keys3(k);
	auth_request_make(&k[0], NOW - 60, req);
	assert_int_equal(auth_node_check(&a, req, sizeof(req), NOW, &role,
					 reply, &rlen), AUTH_W_OK);
	auth_request_make(&k[0], NOW + 60, req);
	assert_int_equal(auth_node_check(&a, req, sizeof(req), NOW, &role,
					 reply, &rlen), AUTH_W_OK);
	/* the same bytes again, any time within the window: a replay while
	 * the entry lives (60 s after it came), then the key's floor */
	expect_refused(&a, req, sizeof(req), NOW, AUTH_W_REPLAY,
		       AUTH_REJ_FAILED);
	expect_refused(&a, req, sizeof(req), NOW + 60, AUTH_W_REPLAY,
		       AUTH_REJ_FAILED);
	expect_refused(&a, req, sizeof(req), NOW + 120, AUTH_W_BUSY,
		       AUTH_REJ_BUSY);
	/* after the window the clock check refuses it */
	expect_refused(&a, req, sizeof(req), NOW + 121, AUTH_W_CLOCK,
		       AUTH_REJ_FAILED);
	assert_int_equal(a.refused[AUTH_W_REPLAY], 2);
	auth_node_fini(&a);
}

static void client_checks_node(void **state)
{
	struct auth_node a;
	struct auth_key k[3], other;
	uint8_t req[AUTH_REQ_LEN], req2[AUTH_REQ_LEN], reply[64], t[64];
	size_t rlen;
	unsigned role;

	(void)state;
	node3(&a, 0);
	keys3(k);
	auth_request_make(&k[1], NOW, req);
	assert_int_equal(auth_node_check(&a, req, sizeof(req), NOW, &role,
					 reply, &rlen), AUTH_W_OK);
	/* a node without credentials (empty accept) proves nothing */
	assert_int_equal(auth_accept_check(&k[1], req, reply, 0, &role),
			 RS_E_AUTH);
	/* a node that raises our role, or any other change */
	for (size_t i = 0; i < AUTH_ACC_LEN; i++) {
		memcpy(t, reply, rlen);
		t[i] ^= 0x02;
		assert_int_equal(auth_accept_check(&k[1], req, t, rlen, &role),
				 RS_E_AUTH);
	}
	/* the accept of another handshake (an old one replayed) */
	auth_request_make(&k[1], NOW, req2);
	assert_int_equal(auth_accept_check(&k[1], req2, reply, rlen, &role),
			 RS_E_AUTH);
	/* a node that does not know the secret */
	auth_key_init(&other, 7, AUTH_ROLE_DATA, "another-secret-for-7", 20);
	assert_int_equal(auth_accept_check(&other, req, reply, rlen, &role),
			 RS_E_AUTH);
	/* truncated */
	assert_int_equal(auth_accept_check(&k[1], req, reply, rlen - 1,
					   &role), RS_E_AUTH);
	assert_int_equal(auth_accept_check(&k[1], req, reply, rlen, &role),
			 0);
	assert_int_equal(role, AUTH_ROLE_DATA);
	/* rejects: only our magic counts */
	memset(t, 0, sizeof(t));
	assert_int_equal(auth_reject_reason(t, sizeof(t)), 0);
	assert_int_equal(auth_reject_reason(NULL, 0), 0);
	auth_node_fini(&a);
}

/* A share full of entries dated now: busy for requests dated no later,
 * until the entries leave max_skew_s after they came. */
static void replay_share_full(void **state)
{
	struct auth_node a;
	struct auth_key k[3];
	uint8_t req[AUTH_REQ_LEN], reply[64];
	size_t rlen;
	unsigned role;

	(void)state;
	node3(&a, 4);
	keys3(k);
	for (int i = 0; i < 4; i++) {
		auth_request_make(&k[2], NOW, req);
		assert_int_equal(auth_node_check(&a, req, sizeof(req), NOW,
						 &role, reply, &rlen),
				 AUTH_W_OK);
	}
	assert_int_equal(auth_node_cached(&a, 3), 4);
	assert_int_equal(auth_node_cached(&a, 1), 0);
	assert_int_equal(auth_node_cached(&a, 99), 0);
	auth_request_make(&k[2], NOW, req);
	expect_refused(&a, req, sizeof(req), NOW, AUTH_W_BUSY, AUTH_REJ_BUSY);
	expect_refused(&a, req, sizeof(req), NOW + 60, AUTH_W_BUSY,
		       AUTH_REJ_BUSY);
	/* the entries expire once their window is over */
	auth_request_make(&k[2], NOW + 61, req);
	assert_int_equal(auth_node_check(&a, req, sizeof(req), NOW + 61,
					 &role, reply, &rlen), AUTH_W_OK);
	assert_int_equal(auth_node_cached(&a, 3), 1);
	auth_node_fini(&a);
}

/* One key's connects never lock the others out (issue 27, fault 4): a
 * read key fills its share with requests dated now + skew; the admin
 * key (the node's peers) and the data key still connect, the read key
 * itself is busy, and its future-dated entries do not pin the cache past
 * now + skew. */
static void replay_share_per_key(void **state)
{
	struct auth_node a;
	struct auth_key k[3];
	uint8_t req[AUTH_REQ_LEN], old[AUTH_REQ_LEN], reply[64];
	size_t rlen;
	unsigned role;

	(void)state;
	node3(&a, 8);
	keys3(k);
	for (int i = 0; i < 8; i++) {
		auth_request_make(&k[2], NOW + 60, req);
		assert_int_equal(auth_node_check(&a, req, sizeof(req), NOW,
						 &role, reply, &rlen),
				 AUTH_W_OK);
		if (!i)
			memcpy(old, req, sizeof(old));
	}
	/* the flooding key is busy itself ... */
	auth_request_make(&k[2], NOW, req);
	expect_refused(&a, req, sizeof(req), NOW, AUTH_W_BUSY, AUTH_REJ_BUSY);
	/* ... the others are not: admin (peers, operators) and data */
	for (int i = 0; i < 8; i++) {
		auth_request_make(&k[i % 2], NOW, req);
		assert_int_equal(auth_node_check(&a, req, sizeof(req), NOW,
						 &role, reply, &rlen),
				 AUTH_W_OK);
	}
	/* future-dated entries go skew seconds after they came; a replay of
	 * one is still refused until its own time + skew, then by the clock */
	auth_request_make(&k[2], NOW + 61, req);
	assert_int_equal(auth_node_check(&a, req, sizeof(req), NOW + 61, &role,
					 reply, &rlen), AUTH_W_OK);
	for (uint64_t t = NOW + 61; t <= NOW + 120; t += 59)
		assert_int_not_equal(auth_node_check(&a, old, sizeof(old), t,
						     &role, reply, &rlen),
				     AUTH_W_OK);
	expect_refused(&a, old, sizeof(old), NOW + 121, AUTH_W_CLOCK,
		       AUTH_REJ_FAILED);
	auth_node_fini(&a);
}

/* A key over its share with requests dated now is refused only for the
 * rest of that second: its oldest entry gives way, and the key's floor
 * (the newest time of an entry it gave up) refuses a replay of it. */
static void replay_share_overflow(void **state)
{
	struct auth_node a;
	struct auth_key k[3];
	uint8_t req[AUTH_REQ_LEN], first[AUTH_REQ_LEN], reply[64];
	size_t rlen;
	unsigned role;

	(void)state;
	node3(&a, 4);
	keys3(k);
	for (int i = 0; i < 4; i++) {
		auth_request_make(&k[1], NOW, req);
		assert_int_equal(auth_node_check(&a, req, sizeof(req), NOW,
						 &role, reply, &rlen),
				 AUTH_W_OK);
		if (!i)
			memcpy(first, req, sizeof(first));
	}
	auth_request_make(&k[1], NOW, req);
	expect_refused(&a, req, sizeof(req), NOW, AUTH_W_BUSY, AUTH_REJ_BUSY);
	auth_request_make(&k[1], NOW + 1, req);
	assert_int_equal(auth_node_check(&a, req, sizeof(req), NOW + 1, &role,
					 reply, &rlen), AUTH_W_OK);
	/* the entry that gave way: its replay is refused by the floor */
	expect_refused(&a, first, sizeof(first), NOW + 1, AUTH_W_BUSY,
		       AUTH_REJ_BUSY);
	expect_refused(&a, first, sizeof(first), NOW + 60, AUTH_W_BUSY,
		       AUTH_REJ_BUSY);
	expect_refused(&a, first, sizeof(first), NOW + 61, AUTH_W_CLOCK,
		       AUTH_REJ_FAILED);
	auth_node_fini(&a);
}

/* The cache against a model: random requests over a sliding clock, shares
 * small enough to overflow; every accepted request still inside its
 * window is refused again (found in its share, or at or below its key's
 * floor), whatever evictions and backward shifts happened in between, and
 * a fresh request is never taken for a replay. */
static void replay_model(void **state)
{
	enum { N = 3000, CAP = 12 };
	static uint8_t reqs[N][AUTH_REQ_LEN];
	static uint64_t ts[N];
	struct auth_node a;
	struct auth_key k[3];
	uint8_t reply[64];
	size_t rlen;
	unsigned role, ok = 0, busy = 0, replays = 0, floored = 0;
	uint64_t now = NOW;

	(void)state;
	node3(&a, CAP);
	keys3(k);
	srand(7);
	for (int i = 0; i < N; i++) {
		unsigned why;

		now += (unsigned)rand() % 2;
		ts[i] = now - (unsigned)rand() % 50;
		auth_request_make(&k[i % 3], ts[i], reqs[i]);
		why = auth_node_check(&a, reqs[i], AUTH_REQ_LEN, now, &role,
				      reply, &rlen);
		assert_true(why == AUTH_W_OK || why == AUTH_W_BUSY);
		if (why == AUTH_W_BUSY) {
			busy++;
			ts[i] = 0;	/* never recorded */
			continue;
		}
		ok++;
		/* a few earlier ones again */
		for (int r = 0; r < 4; r++) {
			int j = i - rand() % (i < 100 ? i + 1 : 100);

			why = auth_node_check(&a, reqs[j], AUTH_REQ_LEN, now,
					      &role, reply, &rlen);
			if (!ts[j])
				continue;
			if (now - ts[j] <= 60 || ts[j] > now) {
				assert_true(why == AUTH_W_REPLAY ||
					    why == AUTH_W_BUSY);
				replays += why == AUTH_W_REPLAY;
				floored += why == AUTH_W_BUSY;
			} else {
				assert_int_equal(why, AUTH_W_CLOCK);
			}
		}
		assert_true(auth_node_cached(&a, k[i % 3].id) <= CAP);
	}
	print_message("%u accepted, %u busy, %u replays found, %u below a "
		      "floor\n", ok, busy, replays, floored);
	assert_true(ok > N / 4);
	assert_true(busy > 0);	  /* full shares were exercised */
	assert_true(replays > N / 4); /* and so were the lookups */
	assert_true(floored > 0);     /* and the floors */
	auth_node_fini(&a);
}

static void node_init_checks(void **state)
{
	struct auth_node a;
	struct auth_key k[2];

	(void)state;
	auth_key_init(&k[0], 5, AUTH_ROLE_DATA, SECRET_D, strlen(SECRET_D));
	auth_key_init(&k[1], 5, AUTH_ROLE_READ, SECRET_R, strlen(SECRET_R));
	assert_int_equal(auth_node_init(&a, k, 2, 60, 0), RS_E_INVAL);
	assert_non_null(strstr(rs_errormsg(), "5"));
	assert_int_equal(auth_node_init(&a, k, 0, 60, 0), RS_E_INVAL);
	assert_int_equal(auth_node_init(&a, k, 1, AUTH_MAX_SKEW_S + 1, 0),
			 RS_E_INVAL);
	assert_int_equal(auth_node_init(&a, k, 1, 60, 0), 0);
	assert_non_null(auth_node_key(&a, 5));
	assert_null(auth_node_key(&a, 6));
	auth_node_fini(&a);
}

static void secret_files(void **state)
{
	char path[] = "/tmp/rs-auth-XXXXXX";
	uint8_t s[AUTH_SECRET_MAX];
	size_t len;
	bool world;
	int fd;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "0123456789abcdefXYZ\n", 20), 20);
	assert_int_equal(fchmod(fd, 0600), 0);
	assert_int_equal(auth_secret_file(path, s, &len, &world), 0);
	assert_int_equal(len, 19);
	assert_memory_equal(s, "0123456789abcdefXYZ", 19);
	assert_false(world);
	assert_int_equal(fchmod(fd, 0644), 0);
	assert_int_equal(auth_secret_file(path, s, &len, &world), 0);
	assert_true(world);
	assert_int_equal(ftruncate(fd, 10), 0);
	assert_int_equal(auth_secret_file(path, s, &len, &world), RS_E_INVAL);
	close(fd);
	unlink(path);
	assert_true(auth_secret_file(path, s, &len, &world) < 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(roles),
		cmocka_unit_test(key_bounds),
		cmocka_unit_test(round_trip),
		cmocka_unit_test(node_refusals),
		cmocka_unit_test(clock_edges_and_replay),
		cmocka_unit_test(client_checks_node),
		cmocka_unit_test(replay_share_full),
		cmocka_unit_test(replay_share_per_key),
		cmocka_unit_test(replay_share_overflow),
		cmocka_unit_test(replay_model),
		cmocka_unit_test(node_init_checks),
		cmocka_unit_test(secret_files),
	};

	auth_init();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
