/*
 * test_evict.c - per-table eviction and admission (value/slab_evict.h,
 * docs/eviction.md): hit rate of the sampled LRU and LFU under a Zipf
 * stream against an exact simulation of the same policy on the same trace
 * and cap, the cap under concurrent inserters, TTL expiry by the sweep,
 * admission after k sightings, evicted rows seen as stale through a
 * cached location, tracking and the evicted-key sink, replica mode, and
 * tables without a policy still refusing with RS_E_FULL.
 */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/rs_internal.h"
#include "value/slab_evict.h"
#include "value/slab_int.h" /* white-box: the clock, row slots */
#include "evict_sim.h"

#define DIM 4
/* the measured hit rate is within 2 points of the exact policy's; random
 * eviction on the same trace is 4 (LRU) and 7 (LFU) points below it, so
 * the bound separates the policy from no policy */
#define HIT_BOUND 0.02

static struct slab_store *dram_pool(void)
{
	struct slab_store_cfg cfg = {.size = 64ull << 20};
	struct slab_store *st;

	assert_int_equal(slab_store_open(&st, &cfg), 0);
	return st;
}

static struct slab_table *mktable(struct slab_store *st, const char *name,
				  uint64_t cap, const struct slab_ev_cfg *ev)
{
	struct slab_table_cfg tc = {.name = name, .dim = DIM,
				    .capacity = cap};
	struct slab_table *t;

	assert_int_equal(slab_table_create(st, &tc, &t), 0);
	if (ev)
		assert_int_equal(slab_ev_attach(t, ev), 0);
	return t;
}


/* ---- Zipf trace and the exact policies (evict_sim.h) ---- */

#define UNIVERSE 100000u
#define ACCESSES 200000u
#define CAP 1000u

/* The same trace through a capped table: a hit is a key the table holds
 * (slab_read), a miss inserts it (as GET_OR_INIT does). */
static void zipf_policy(unsigned policy)
{
	struct slab_store *st = dram_pool();
	struct slab_ev_cfg ev = {.policy = policy, .max_rows = CAP};
	struct slab_table *t = mktable(st, "z", 4096, &ev);
	uint32_t *tr = es_zipf_trace(UNIVERSE, ACCESSES, 0.99, 42);
	uint64_t hits = 0, ideal, rnd, misses;
	struct slab_table_stats ts;
	struct slab_ev_stats es;
	float row[DIM] = {0};

	for (uint32_t a = 0; a < ACCESSES; a++) {
		int rc = slab_read(t, tr[a], row, NULL);

		if (rc == 0) {
			hits++;
			continue;
		}
		assert_int_equal(rc, RS_E_NOTFOUND);
		assert_int_equal(slab_insert(t, tr[a], NULL, NULL, NULL), 0);
		assert_true(atomic_load(&t->live) <= CAP);
	}
	ideal = es_simulate(tr, ACCESSES, UNIVERSE, CAP,
			    policy == SLAB_EV_LFU, 0);
	rnd = es_simulate(tr, ACCESSES, UNIVERSE, CAP, false, 7);
	misses = ACCESSES - hits;
	print_message("%s: hit rate %.4f, exact %s %.4f, random eviction "
		      "%.4f (Zipf 0.99, %u keys, cap %u, %u accesses)\n",
		      policy == SLAB_EV_LFU ? "lfu" : "lru",
		      (double)hits / ACCESSES,
		      policy == SLAB_EV_LFU ? "lfu" : "lru",
		      (double)ideal / ACCESSES,
		      (double)rnd / ACCESSES, UNIVERSE, CAP, ACCESSES);
	assert_true(fabs((double)hits - (double)ideal) <=
		    HIT_BOUND * ACCESSES);
	assert_true((double)ideal - (double)rnd > HIT_BOUND * ACCESSES);
	slab_table_stats(t, &ts);
	slab_ev_stats(t, &es);
	assert_int_equal(ts.live, CAP);
	assert_int_equal(es.used, CAP);
	assert_int_equal(es.evicted_capacity, misses - CAP);
	assert_int_equal(ts.deletes, misses - CAP);
	assert_int_equal(es.evicted_ttl, 0);
	free(tr);
	slab_store_close(&st);
}

static void zipf_lru_near_exact(void **state)
{
	(void)state;
	zipf_policy(SLAB_EV_LRU);
}

static void zipf_lfu_near_exact(void **state)
{
	(void)state;
	zipf_policy(SLAB_EV_LFU);
}

/* ---- what an eviction looks like ---- */

static int collect(void *arg, uint64_t key, uint32_t row)
{
	uint64_t *n = arg;

	(void)key;
	(void)row;
	(*n)++;
	return 0;
}

static void eviction_is_a_delete(void **state)
{
	struct slab_store *st = dram_pool();
	struct slab_ev_cfg ev = {.policy = SLAB_EV_LRU, .max_rows = 8};
	struct slab_table *t = mktable(st, "d", 64, &ev);
	uint8_t tag[SLAB_TRACK_TAG_BYTES] = {1};
	uint64_t sink_keys[4], v0, v, gone = 0;
	struct slab_ev_sink sink = {.keys = sink_keys, .cap = 4};
	uint8_t img[4096];
	uint32_t r0;
	float row[DIM];

	(void)state;
	for (uint64_t k = 0; k < 8; k++)
		assert_int_equal(slab_insert(t, k, NULL, NULL, NULL), 0);
	for (uint64_t k = 1; k < 8; k++) /* key 0 is the least recent */
		assert_int_equal(slab_read(t, k, row, NULL), 0);
	assert_int_equal(slab_lookup(t, 0, &r0), 0);
	slab_read_row(t, r0, img);
	assert_int_equal(row_validate(img, &t->rg, r0, 0, &v0), 0);
	slab_track_reset(t, tag);
	slab_ev_sink_set(&sink);
	/* the sample may miss key 0: insert until it went (the cap holds) */
	for (uint64_t k = 100; slab_lookup(t, 0, &r0) == 0; k++) {
		assert_true(k < 200);
		assert_int_equal(slab_insert(t, k, NULL, NULL, NULL), 0);
		assert_int_equal(atomic_load(&t->live), 8);
	}
	slab_ev_sink_set(NULL);
	/* a reader with key 0's cached location: stale, never data */
	slab_read_row(t, r0, img);
	assert_int_equal(row_validate(img, &t->rg, r0, 0, &v), RS_E_STALE);
	assert_int_equal(slab_read(t, 0, row, NULL), RS_E_NOTFOUND);
	/* tracked as a deletion, and handed to the sink */
	assert_int_equal(slab_track_check(t, tag), 0);
	assert_int_equal(slab_track_gone(t, collect, &gone), 0);
	assert_true(gone >= 1);
	assert_true(sink.n >= 1);
	assert_false(sink.overflow);
	assert_int_equal(sink.n, gone);
	{
		bool found = false;

		for (uint32_t i = 0; i < sink.n; i++)
			found |= sink_keys[i] == 0;
		assert_true(found);
	}
	slab_store_close(&st);
}

/* ---- no policy: never a silent drop ---- */

static void no_policy_refuses(void **state)
{
	struct slab_store *st = dram_pool();
	struct slab_ev_cfg adm = {.admit_k = 2}; /* state, but no policy */
	struct slab_table *a = mktable(st, "plain", 16, NULL);
	struct slab_table *b = mktable(st, "admit", 16, &adm);
	struct slab_ev_stats es;

	(void)state;
	for (uint64_t k = 0; k < 16; k++) {
		assert_int_equal(slab_insert(a, k, NULL, NULL, NULL), 0);
		assert_int_equal(slab_insert(b, k, NULL, NULL, NULL), 0);
	}
	assert_int_equal(slab_insert(a, 99, NULL, NULL, NULL), RS_E_FULL);
	assert_int_equal(slab_insert(b, 99, NULL, NULL, NULL), RS_E_FULL);
	for (uint64_t k = 0; k < 16; k++) {
		uint32_t r;

		assert_int_equal(slab_lookup(a, k, &r), 0);
		assert_int_equal(slab_lookup(b, k, &r), 0);
	}
	slab_ev_stats(b, &es);
	assert_int_equal(es.evicted_capacity + es.evicted_ttl, 0);
	/* a delete frees room again */
	assert_int_equal(slab_delete(b, 3), 0);
	assert_int_equal(slab_insert(b, 99, NULL, NULL, NULL), 0);
	slab_store_close(&st);
}

static void config_checked(void **state)
{
	struct slab_ev_cfg c = {.max_rows = 10};

	(void)state;
	assert_int_equal(slab_ev_cfg_validate(&c, 100), RS_E_INVAL);
	c.policy = SLAB_EV_LRU;
	assert_int_equal(slab_ev_cfg_validate(&c, 100), 0);
	c.max_rows = 101;
	assert_int_equal(slab_ev_cfg_validate(&c, 100), RS_E_INVAL);
	c.max_rows = 0;
	c.ttl_s = SLAB_EV_TTL_MAX + 1;
	assert_int_equal(slab_ev_cfg_validate(&c, 100), RS_E_INVAL);
	c.ttl_s = 0;
	c.admit_k = SLAB_EV_ADMIT_MAX + 1;
	assert_int_equal(slab_ev_cfg_validate(&c, 100), RS_E_INVAL);
	c.admit_k = 0;
	c.policy = SLAB_EV_POLICY_COUNT;
	assert_int_equal(slab_ev_cfg_validate(&c, 100), RS_E_INVAL);
}

/* ---- TTL ---- */

static void ttl_sweep_expires(void **state)
{
	struct slab_store *st = dram_pool();
	struct slab_ev_cfg ev = {.ttl_s = 10};
	struct slab_table *t = mktable(st, "ttl", 1024, &ev);
	struct slab_ev_stats es;
	float row[DIM] = {1, 2, 3, 4};
	uint32_t r;

	(void)state;
	slab_ev_set_now(t, 100);
	for (uint64_t k = 0; k < 100; k++)
		assert_int_equal(slab_insert(t, k, NULL, NULL, NULL), 0);
	slab_ev_set_now(t, 105);
	for (uint64_t k = 0; k < 100; k += 2) /* written again at 105 */
		assert_int_equal(slab_put(t, k, row, NULL), 0);
	slab_ev_tick(t); /* a test clock: ticks leave it alone */
	assert_int_equal(slab_ev_sweep(t, 1000), 0);
	slab_ev_set_now(t, 110); /* exactly ttl_s: not yet */
	assert_int_equal(slab_ev_sweep(t, 1000), 0);
	slab_ev_set_now(t, 112);
	/* a rate-limited sweep: 10 slots a call */
	for (int i = 0; i < 10; i++)
		assert_true(slab_ev_sweep(t, 10) <= 10);
	for (uint64_t k = 0; k < 100; k++)
		assert_int_equal(slab_lookup(t, k, &r),
				 k % 2 ? RS_E_NOTFOUND : 0);
	slab_ev_stats(t, &es);
	assert_int_equal(es.evicted_ttl, 50);
	assert_int_equal(es.evicted_capacity, 0);
	slab_ev_set_now(t, 115); /* exactly ttl_s: not yet */
	assert_int_equal(slab_ev_sweep(t, 1000), 0);
	slab_ev_set_now(t, 116);
	assert_int_equal(slab_ev_sweep(t, 1000), 50);
	assert_int_equal(atomic_load(&t->live), 0);
	slab_store_close(&st);
}

/* The sweep of a cluster member: only keys the sink accepts (those it is
 * the primary of) expire, it stops when its sink is full and goes on from
 * there next time, and its TTL evictions count only when the caller says
 * (once the backups applied them). */
static bool even_key(void *arg, uint64_t key)
{
	(*(unsigned *)arg)++;
	return key % 2 == 0;
}

static void ttl_sweep_primary_only(void **state)
{
	struct slab_store *st = dram_pool();
	struct slab_ev_cfg ev = {.ttl_s = 10};
	struct slab_table *t = mktable(st, "ttlc", 1024, &ev);
	struct slab_ev_stats es;
	uint64_t keys[8];
	unsigned asked = 0;
	struct slab_ev_sink sink = {.keys = keys, .cap = 8,
				    .accept = even_key, .arg = &asked,
				    .defer_ttl = true};
	uint64_t gone = 0;
	uint32_t r;

	(void)state;
	slab_ev_set_now(t, 100);
	for (uint64_t k = 0; k < 40; k++)
		assert_int_equal(slab_insert(t, k, NULL, NULL, NULL), 0);
	slab_ev_set_now(t, 111);
	slab_ev_sink_set(&sink);
	/* 20 even keys expire, 8 per full sink: the sweep stops early */
	for (int round = 0; round < 3; round++) {
		uint64_t n = slab_ev_sweep(t, 1000);

		assert_int_equal(n, sink.n);
		assert_true(n == (round < 2 ? 8u : 4u));
		assert_false(sink.overflow);
		for (uint32_t i = 0; i < sink.n; i++)
			assert_int_equal(keys[i] % 2, 0);
		gone += n;
		sink.n = 0;
	}
	assert_int_equal(slab_ev_sweep(t, 1000), 0);
	slab_ev_sink_set(NULL);
	assert_int_equal(gone, 20);
	assert_true(asked >= 40);
	/* odd keys (another node's primaries) stay, even ones went */
	for (uint64_t k = 0; k < 40; k++)
		assert_int_equal(slab_lookup(t, k, &r),
				 k % 2 ? 0 : RS_E_NOTFOUND);
	slab_ev_stats(t, &es);
	assert_int_equal(es.evicted_ttl, 0); /* not yet acknowledged */
	slab_ev_count_ttl(t, gone);
	slab_ev_stats(t, &es);
	assert_int_equal(es.evicted_ttl, 20);
	/* without a sink (one node) the rest goes and counts at once */
	assert_int_equal(slab_ev_sweep(t, 1000), 20);
	slab_ev_stats(t, &es);
	assert_int_equal(es.evicted_ttl, 40);
	slab_store_close(&st);
}

/* ---- admission ---- */

static void admission_after_k(void **state)
{
	struct slab_store *st = dram_pool();
	struct slab_ev_cfg ev = {.admit_k = 3};
	struct slab_table *t = mktable(st, "adm", 1024, &ev);
	struct slab_table *plain = mktable(st, "plain", 16, NULL);
	struct slab_ev_stats es;

	(void)state;
	for (uint64_t k = 1000; k < 1100; k++) {
		assert_int_equal(slab_ev_admit(t, k), 0);
		assert_int_equal(slab_ev_admit(t, k), 0);
	}
	for (uint64_t k = 1000; k < 1100; k++)
		assert_int_equal(slab_ev_admit(t, k), 1);
	slab_ev_stats(t, &es);
	assert_int_equal(es.not_admitted, 200);
	assert_int_equal(es.admitted, 100);
	assert_int_equal(slab_ev_admit(plain, 5), 1); /* no admission */
	slab_store_close(&st);
}

/* ---- the cap under concurrent inserters ---- */

struct churn {
	struct slab_table *t;
	uint64_t seed, inserted;
	atomic_bool *stop;
	uint64_t max_live;
};

static void *churn_thread(void *arg)
{
	struct churn *c = arg;
	float row[DIM];

	for (int i = 0; i < 20000; i++) {
		uint64_t k = es_xs(&c->seed) % 5000;

		if (slab_read(c->t, k, row, NULL) == RS_E_NOTFOUND &&
		    slab_insert(c->t, k, NULL, NULL, NULL) == 0)
			c->inserted++;
	}
	return NULL;
}

static void *watch_thread(void *arg)
{
	struct churn *c = arg;

	while (!atomic_load(c->stop)) {
		uint64_t l = atomic_load(&c->t->live);

		if (l > c->max_live)
			c->max_live = l;
	}
	return NULL;
}

static void cap_holds_concurrently(void **state)
{
	struct slab_store *st = dram_pool();
	struct slab_ev_cfg ev = {.policy = SLAB_EV_LFU, .max_rows = 300};
	struct slab_table *t = mktable(st, "c", 1024, &ev);
	struct churn c[4];
	pthread_t th[4], wt;
	atomic_bool stop = false;
	struct churn w = {.t = t, .stop = &stop};
	uint64_t inserted = 0;
	struct slab_ev_stats es;

	(void)state;
	assert_int_equal(pthread_create(&wt, NULL, watch_thread, &w), 0);
	for (int i = 0; i < 4; i++) {
		c[i] = (struct churn){.t = t, .seed = 11 + i};
		assert_int_equal(pthread_create(&th[i], NULL, churn_thread,
						&c[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		inserted += c[i].inserted;
	}
	atomic_store(&stop, true);
	pthread_join(wt, NULL);
	slab_ev_stats(t, &es);
	print_message("4 threads: %llu inserts, %llu evictions, most live "
		      "seen %llu (cap 300)\n", (unsigned long long)inserted,
		      (unsigned long long)es.evicted_capacity,
		      (unsigned long long)w.max_live);
	assert_true(w.max_live <= 300);
	assert_int_equal(atomic_load(&t->live), 300);
	assert_int_equal(es.used, 300);
	assert_int_equal(inserted - es.evicted_capacity, 300);
	assert_true(es.evicted_capacity > 1000);
	slab_store_close(&st);
}

/* ---- replica mode: the source decided the evictions ---- */

static void replica_mode_never_evicts(void **state)
{
	struct slab_store *st = dram_pool();
	struct slab_ev_cfg ev = {.policy = SLAB_EV_LRU, .max_rows = 4};
	struct slab_table *t = mktable(st, "r", 8, &ev);
	struct slab_ev_stats es;

	(void)state;
	slab_ev_replica_mode(true);
	for (uint64_t k = 0; k < 8; k++)
		assert_int_equal(slab_insert(t, k, NULL, NULL, NULL), 0);
	assert_int_equal(slab_insert(t, 8, NULL, NULL, NULL), RS_E_FULL);
	slab_ev_replica_mode(false);
	slab_ev_stats(t, &es);
	assert_int_equal(es.evicted_capacity, 0);
	assert_int_equal(es.over_cap, 4);
	/* the first insert out of replica mode evicts down to the cap */
	assert_int_equal(slab_insert(t, 9, NULL, NULL, NULL), 0);
	slab_ev_stats(t, &es);
	assert_int_equal(atomic_load(&t->live), 4);
	assert_int_equal(es.evicted_capacity, 5);
	slab_store_close(&st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(config_checked),
		cmocka_unit_test(zipf_lru_near_exact),
		cmocka_unit_test(zipf_lfu_near_exact),
		cmocka_unit_test(eviction_is_a_delete),
		cmocka_unit_test(no_policy_refuses),
		cmocka_unit_test(ttl_sweep_expires),
		cmocka_unit_test(ttl_sweep_primary_only),
		cmocka_unit_test(admission_after_k),
		cmocka_unit_test(cap_holds_concurrently),
		cmocka_unit_test(replica_mode_never_evicts),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
