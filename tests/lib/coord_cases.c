/*
 * coord_cases.c - the bodies of the helpers declared in coord_cases.h, which
 * says what they are for.
 */
#include "coord_cases.h"

#include <stdlib.h>

#define K(t, k) k_((t), (k), (char[160]){ 0 }, 160)

int cc_setup(void **state)
{
	static int n;
	struct cc *t = calloc(1, sizeof(*t));

	if (!t || !(t->c = open_store()))
		return -1;
	snprintf(t->ns, sizeof(t->ns), "/t/%d/%d/", (int)getpid(), ++n);
	*state = t;
	return 0;
}

int cc_teardown(void **state)
{
	struct cc *t = *state;

	coord_del(t->c, t->ns, true, NULL);
	coord_close(&t->c);
	free(t);
	return 0;
}

static const char *k_(struct cc *t, const char *k, char *buf, size_t n)
{
	snprintf(buf, n, "%s%s", t->ns, k);
	return buf;
}

static void put_s(struct cc *t, const char *k, const char *v, int64_t *rev)
{
	assert_int_equal(coord_put(t->c, K(t, k), v, strlen(v), 0, rev), 0);
}

void cc_put_get(void **state)
{
	struct cc *t = *state;
	struct coord_kvs r;
	int64_t rev1, rev2;

	put_s(t, "a", "one", &rev1);
	assert_int_equal(coord_range(t->c, K(t, "a"), false, &r), 0);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.kv[0].key, K(t, "a"));
	assert_int_equal(r.kv[0].value_len, 3);
	assert_string_equal(r.kv[0].value, "one");
	assert_int_equal(r.kv[0].mod_rev, rev1);
	assert_int_equal(r.kv[0].create_rev, rev1);
	assert_int_equal(r.kv[0].lease, 0);
	assert_true(r.rev >= rev1);
	coord_kvs_free(&r);

	put_s(t, "a", "two!", &rev2);
	assert_true(rev2 > rev1);
	assert_int_equal(coord_range(t->c, K(t, "a"), false, &r), 0);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.kv[0].value, "two!");
	assert_int_equal(r.kv[0].mod_rev, rev2);
	assert_int_equal(r.kv[0].create_rev, rev1);
	coord_kvs_free(&r);

	/* binary values and the empty value round-trip */
	assert_int_equal(coord_put(t->c, K(t, "bin"), "\0\xff\n", 3, 0, NULL),
			 0);
	assert_int_equal(coord_put(t->c, K(t, "empty"), "", 0, 0, NULL), 0);
	assert_int_equal(coord_range(t->c, K(t, "bin"), false, &r), 0);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.kv[0].value_len, 3);
	assert_memory_equal(r.kv[0].value, "\0\xff\n", 3);
	coord_kvs_free(&r);
	assert_int_equal(coord_range(t->c, K(t, "empty"), false, &r), 0);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.kv[0].value_len, 0);
	coord_kvs_free(&r);

	/* a missing key: no kvs, still a revision */
	assert_int_equal(coord_range(t->c, K(t, "nothere"), false, &r), 0);
	assert_int_equal(r.n, 0);
	assert_true(r.rev >= rev2);
	coord_kvs_free(&r);
}

void cc_prefix(void **state)
{
	struct cc *t = *state;
	struct coord_kvs r;

	put_s(t, "p/3", "c", NULL);
	put_s(t, "p/1", "a", NULL);
	put_s(t, "p/2", "b", NULL);
	put_s(t, "p", "outside", NULL);
	put_s(t, "p0", "outside", NULL);
	put_s(t, "q/1", "outside", NULL);
	assert_int_equal(coord_range(t->c, K(t, "p/"), true, &r), 0);
	assert_int_equal(r.n, 3);
	assert_string_equal(r.kv[0].key, K(t, "p/1"));
	assert_string_equal(r.kv[1].key, K(t, "p/2"));
	assert_string_equal(r.kv[2].key, K(t, "p/3"));
	assert_string_equal(r.kv[2].value, "c");
	coord_kvs_free(&r);
	/* not a prefix: the one key */
	assert_int_equal(coord_range(t->c, K(t, "p/"), false, &r), 0);
	assert_int_equal(r.n, 0);
	coord_kvs_free(&r);
	assert_int_equal(coord_range(t->c, K(t, "zz/"), true, &r), 0);
	assert_int_equal(r.n, 0);
	coord_kvs_free(&r);

	assert_int_equal(coord_del(t->c, K(t, "p/2"), false, NULL), 1);
	assert_int_equal(coord_del(t->c, K(t, "p/2"), false, NULL), 0);
	assert_int_equal(coord_del(t->c, K(t, "p/"), true, NULL), 2);
	assert_int_equal(coord_range(t->c, t->ns, true, &r), 0);
	assert_int_equal(r.n, 3); /* p, p0, q/1 */
	coord_kvs_free(&r);
}

void cc_cas(void **state)
{
	struct cc *t = *state;
	struct coord_kvs r;
	int64_t rev, rev2, seen;
	const char *k = K(t, "cfg");

	/* expect 0: create only if absent */
	assert_int_equal(coord_cas(t->c, k, 0, "v1", 2, 0, &rev), 1);
	assert_int_equal(coord_cas(t->c, k, 0, "xx", 2, 0, NULL), 0);
	assert_int_equal(coord_range(t->c, k, false, &r), 0);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.kv[0].value, "v1");
	assert_int_equal(r.kv[0].mod_rev, rev);
	seen = r.kv[0].mod_rev;
	coord_kvs_free(&r);

	/* two deciders read the same revision: exactly one wins */
	assert_int_equal(coord_cas(t->c, k, seen, "A", 1, 0, &rev2), 1);
	assert_int_equal(coord_cas(t->c, k, seen, "B", 1, 0, NULL), 0);
	assert_true(rev2 > rev);
	assert_int_equal(coord_range(t->c, k, false, &r), 0);
	assert_string_equal(r.kv[0].value, "A");
	assert_int_equal(r.kv[0].mod_rev, rev2);
	coord_kvs_free(&r);

	/* a stale revision, then delete on the right one */
	assert_int_equal(coord_cas(t->c, k, rev, NULL, 0, 0, NULL), 0);
	assert_int_equal(coord_cas(t->c, k, rev2, NULL, 0, 0, NULL), 1);
	assert_int_equal(coord_range(t->c, k, false, &r), 0);
	assert_int_equal(r.n, 0);
	coord_kvs_free(&r);
	/* absent again: expect 0 creates */
	assert_int_equal(coord_cas(t->c, k, 0, "v2", 2, 0, NULL), 1);
}

void cc_lease(void **state)
{
	struct cc *t = *state;
	struct coord_kvs r;
	int64_t id, ttl = 0;

	assert_int_equal(coord_lease_grant(t->c, 30, &id), 0);
	assert_true(id != 0);
	assert_int_equal(coord_put(t->c, K(t, "n/1"), "x", 1, id, NULL), 0);
	put_s(t, "n/2", "y", NULL);
	assert_int_equal(coord_range(t->c, K(t, "n/1"), false, &r), 0);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.kv[0].lease, id);
	coord_kvs_free(&r);
	assert_int_equal(coord_lease_keepalive(t->c, id, &ttl), 0);
	assert_int_equal(ttl, 30);

	/* cas may attach a lease too (the decider key) */
	assert_int_equal(coord_cas(t->c, K(t, "d"), 0, "me", 2, id, NULL), 1);

	assert_int_equal(coord_lease_revoke(t->c, id), 0);
	assert_int_equal(coord_range(t->c, K(t, "n/"), true, &r), 0);
	assert_int_equal(r.n, 1); /* n/2 had no lease */
	assert_string_equal(r.kv[0].key, K(t, "n/2"));
	coord_kvs_free(&r);
	assert_int_equal(coord_range(t->c, K(t, "d"), false, &r), 0);
	assert_int_equal(r.n, 0);
	coord_kvs_free(&r);
	assert_int_equal(coord_lease_keepalive(t->c, id, &ttl), RS_E_NOTFOUND);
	assert_int_equal(coord_lease_revoke(t->c, id), RS_E_NOTFOUND);
	/* a put on a lease that is gone fails, and writes nothing */
	assert_int_equal(coord_put(t->c, K(t, "n/3"), "z", 1, id, NULL),
			 RS_E_NOTFOUND);
	assert_int_equal(coord_range(t->c, K(t, "n/3"), false, &r), 0);
	assert_int_equal(r.n, 0);
	coord_kvs_free(&r);
}

struct cc_putter {
	struct cc *t;
	int delay_ms;
	int64_t rev;
};

static void *cc_put_later(void *arg)
{
	struct cc_putter *p = arg;

	usleep((useconds_t)p->delay_ms * 1000);
	put_s(p->t, "w/late", "1", &p->rev);
	return NULL;
}

void cc_wait(void **state)
{
	struct cc *t = *state;
	struct cc_putter p = { .t = t, .delay_ms = 200 };
	struct coord_kvs r;
	int64_t base, rev, got = 0;
	pthread_t thr;

	assert_int_equal(coord_range(t->c, K(t, "w/"), true, &r), 0);
	base = r.rev;
	coord_kvs_free(&r);
	/* nothing under the prefix: times out */
	assert_int_equal(coord_wait(t->c, K(t, "w/"), base, 100, &got), 0);
	/* a change elsewhere does not wake it */
	put_s(t, "x/1", "other", NULL);
	assert_int_equal(coord_wait(t->c, K(t, "w/"), base, 100, &got), 0);
	/* a change made before the wait began is seen (history) */
	put_s(t, "w/1", "1", &rev);
	assert_int_equal(coord_wait(t->c, K(t, "w/"), base, 2000, &got), 1);
	assert_int_equal(got, rev);
	/* ... but not when the wait starts after it */
	assert_int_equal(coord_wait(t->c, K(t, "w/"), rev, 100, &got), 0);
	/* a change while waiting wakes it */
	assert_int_equal(pthread_create(&thr, NULL, cc_put_later, &p), 0);
	assert_int_equal(coord_wait(t->c, K(t, "w/"), rev, 10000, &got), 1);
	pthread_join(thr, NULL);
	assert_int_equal(got, p.rev);
	/* a delete is a change too */
	assert_int_equal(coord_del(t->c, K(t, "w/1"), false, &rev), 1);
	assert_int_equal(coord_wait(t->c, K(t, "w/"), p.rev, 2000, &got), 1);
	assert_int_equal(got, rev);
}

static void *cc_cancel_later(void *arg)
{
	usleep(200000);
	atomic_store((atomic_bool *)arg, true);
	return NULL;
}

void cc_cancel(void **state)
{
	struct cc *t = *state;
	atomic_bool stop = false;
	struct coord_kvs r;
	struct timespec a, b;
	pthread_t thr;
	double s;

	assert_int_equal(coord_range(t->c, K(t, "c/"), true, &r), 0);
	coord_kvs_free(&r);
	t->c->cancel = &stop;
	clock_gettime(CLOCK_MONOTONIC, &a);
	assert_int_equal(pthread_create(&thr, NULL, cc_cancel_later, &stop),
			 0);
	assert_int_equal(coord_wait(t->c, K(t, "c/"), r.rev, 20000, NULL), 0);
	clock_gettime(CLOCK_MONOTONIC, &b);
	pthread_join(thr, NULL);
	t->c->cancel = NULL;
	s = (double)(b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
	assert_true(s >= 0.15);
	assert_true(s < 5.0);
}

void cc_bad_args(void **state)
{
	struct cc *t = *state;
	static char big[COORD_VALUE_MAX + 1];
	char longkey[COORD_KEY_MAX + 2];
	struct coord_kvs r;
	int64_t id;

	memset(longkey, 'k', sizeof(longkey) - 1);
	longkey[sizeof(longkey) - 1] = '\0';
	assert_int_equal(coord_put(t->c, "", "v", 1, 0, NULL), RS_E_INVAL);
	assert_int_equal(coord_put(t->c, longkey, "v", 1, 0, NULL),
			 RS_E_TOOBIG);
	assert_int_equal(coord_range(t->c, longkey, true, &r), RS_E_TOOBIG);
	assert_int_equal(coord_put(t->c, K(t, "big"), big, sizeof(big), 0,
				   NULL), RS_E_TOOBIG);
	assert_int_equal(coord_lease_grant(t->c, 0, &id), RS_E_INVAL);
	assert_int_equal(coord_lease_grant(t->c, COORD_MAX_TTL_S + 1, &id),
			 RS_E_INVAL);
	/* the largest value passes */
	assert_int_equal(coord_put(t->c, K(t, "big"), big, sizeof(big) - 1,
				   0, NULL), 0);
	assert_int_equal(coord_range(t->c, K(t, "big"), false, &r), 0);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.kv[0].value_len, COORD_VALUE_MAX);
	coord_kvs_free(&r);
}
