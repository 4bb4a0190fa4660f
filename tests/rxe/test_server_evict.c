/*
 * test_server_evict.c - per-table eviction and admission through the
 * client over real verbs (docs/eviction.md):
 *
 *   1. Specs: the eviction fields travel (rs_table_get_spec gives them
 *      back); nonsense is refused with a message naming the field (a cap
 *      without a policy, locally; a cap above the capacity, by the node).
 *   2. An LRU table capped at 80 rows under a Zipf stream of GET_OR_INIT
 *      RPCs, one key each (every access seen by the node, in the order of
 *      the trace): the hit rate is within 2
 *      points of an exact LRU on the same trace and cap; STATS counts one
 *      eviction per insert past the cap; live rows stay at the cap.
 *   3. One-sided gets through cached locations of keys evicted since:
 *      each is either missing or exactly its own row, never another key's
 *      (the slots were reused); get_or_init of an evicted key gives the
 *      initializer's row again.
 *   4. A table without a policy still refuses new keys with RS_E_FULL per
 *      key, keeps every row, evicts nothing.
 *   5. TTL: rows not written for 1 s go (the node's sweep), not before.
 *   6. Admission after 3 sightings: the first two GET_OR_INITs answer the
 *      initializer's row without storing it (counted), the third stores.
 *   7. A checkpoint of an evicting table and of a table that grows (with
 *      a TTL), both dropped and restored: the restore re-creates them
 *      with their eviction and growth settings (checkpoint-format.md,
 *      version 2) and their rows.
 * The node runs in-process (server_harness.h).
 */
#include <math.h>

#include "recstore/client.h"
#include "server_harness.h"
#include "stats.h"
#include "value/initializer.h"
#include "evict_sim.h"

#define DIM 8
#define CAP 80u
#define UNIVERSE 4000u
#define ACCESSES 4000u
#define BATCH 1u /* the node sees the trace in order */
#define HIT_BOUND 0.02

static void spec_of(struct rs_table_spec *s, const char *name, uint64_t cap)
{
	*s = (struct rs_table_spec)RS_TABLE_SPEC_INIT;
	SV_OK(rs_table_spec_init(s, name, DIM));
	s->capacity = cap;
	s->init.kind = RS_INIT_UNIFORM;
	s->init.a = 1.0f;
	s->init.seed = 7;
}

/* Create table name (capacity cap) with that eviction and open it. */
static struct rs_table *mk(struct rs_client *c, const char *name,
			   uint64_t cap, const char *policy, uint64_t max_rows,
			   uint32_t ttl_s, uint32_t admit_after)
{
	struct rs_table_spec s;
	struct rs_table *t;

	spec_of(&s, name, cap);
	SV_OK(rs_table_spec_set_eviction(&s, policy, max_rows, ttl_s,
					 admit_after));
	SV_OK(rs_table_create(c, &s));
	SV_OK(rs_table_open(c, name, &t));
	return t;
}

/* The initializer's row of key (what the node computes). */
static void init_of(uint64_t key, float *row)
{
	struct init_params p = { .kind = INIT_UNIFORM, .a = 1.0f, .seed = 7 };

	init_row(&p, key, row, DIM);
}

static bool is_init_row(uint64_t key, const float *row)
{
	float want[DIM];

	init_of(key, want);
	return !memcmp(want, row, sizeof(want));
}

/* One counter of a table (or of the node: table NULL) from STATS. */
static uint64_t stat(struct rs_client *c, const char *table, const char *key)
{
	struct tl_stat q[] = { { table, key, 0, 0 }, { 0 } };

	SV_OK(tl_stats_read(c, 0, q));
	SV_CHECK(q[0].seen, "STATS has no %s of %s", key,
		 table ? table : "node");
	return q[0].v;
}

static void specs(struct rs_client *c)
{
	struct rs_table_spec s, got = RS_TABLE_SPEC_INIT;
	int ret;

	spec_of(&s, "lru", 4096);
	ret = rs_table_spec_set_eviction(&s, "none", CAP, 0, 0);
	SV_CHECK(ret == RS_E_INVAL && strstr(rs_errormsg(), "needs a policy"),
		 "a cap without a policy: %d %s", ret, rs_errormsg());
	ret = rs_table_spec_set_eviction(&s, "fifo", 0, 0, 0);
	SV_CHECK(ret == RS_E_INVAL, "an unknown policy: %d", ret);
	s.capacity = 0; /* the setter checks the cap against a capacity */
	SV_OK(rs_table_spec_set_eviction(&s, "lru", 5000, 0, 0));
	s.capacity = 4096; /* the node refuses it too */
	ret = rs_table_create(c, &s);
	SV_CHECK(ret == RS_E_INVAL && strstr(rs_errormsg(),
					     "eviction.max_rows"),
		 "a cap over the capacity: %d %s", ret, rs_errormsg());
	SV_OK(rs_table_spec_set_eviction(&s, "lru", CAP, 0, 0));
	SV_OK(rs_table_create(c, &s));
	SV_OK(rs_table_get_spec(c, "lru", &got));
	SV_CHECK(got.evict.policy == RS_EVICT_LRU &&
			 got.evict.max_rows == CAP && !got.evict.ttl_s &&
			 !got.evict.admit_after,
		 "spec back: policy %u cap %" PRIu64, got.evict.policy,
		 got.evict.max_rows);
}

static void zipf_lru(struct rs_client *c)
{
	uint32_t *tr = es_zipf_trace(UNIVERSE, ACCESSES, 0.99, 1234);
	uint64_t keys[BATCH], hits = 0, created = 0, ideal, rnd, cached[CAP];
	float rows[CAP * DIM];
	int st[CAP], ncached = 0, missing = 0;
	struct rs_table *t;

	SV_OK(rs_table_open(c, "lru", &t));
	for (uint32_t a = 0; a < ACCESSES; a += BATCH) {
		for (uint32_t i = 0; i < BATCH; i++)
			keys[i] = tr[a + i];
		SV_CHECK(rs_get_or_init(t, keys, BATCH, rows, st, RS_F_RPC) ==
				 (int)BATCH, "get_or_init: %s", rs_errormsg());
		for (uint32_t i = 0; i < BATCH; i++) {
			SV_CHECK(st[i] == RS_KEY_FOUND ||
					 st[i] == RS_KEY_CREATED,
				 "key %" PRIu64 ": status %d", keys[i], st[i]);
			SV_CHECK(is_init_row(keys[i], rows + i * DIM),
				 "key %" PRIu64 ": not its row", keys[i]);
			hits += st[i] == RS_KEY_FOUND;
			created += st[i] == RS_KEY_CREATED;
		}
		/* mid-stream, remember keys just created; cache their
		 * locations with a one-sided get */
		if (a >= ACCESSES / 2 && ncached < 50 &&
		    st[0] == RS_KEY_CREATED) {
			cached[ncached] = keys[0];
			SV_CHECK(rs_get(t, &cached[ncached], 1, rows, st, 0) ==
					 1, "one-sided get of a fresh key");
			ncached++;
		}
	}
	ideal = es_simulate(tr, ACCESSES, UNIVERSE, CAP, false, 0);
	rnd = es_simulate(tr, ACCESSES, UNIVERSE, CAP, false, 99);
	printf("lru over the wire: hit rate %.4f, exact lru %.4f, random "
	       "%.4f (Zipf 0.99, %u keys, cap %u, %u accesses)\n",
	       (double)hits / ACCESSES, (double)ideal / ACCESSES,
	       (double)rnd / ACCESSES, UNIVERSE, CAP, ACCESSES);
	SV_CHECK(fabs((double)hits - (double)ideal) <= HIT_BOUND * ACCESSES,
		 "hit rate %.4f is not within %.2f of the exact lru's %.4f",
		 (double)hits / ACCESSES, HIT_BOUND, (double)ideal / ACCESSES);
	SV_CHECK(stat(c, "lru", "evictions.capacity") == created - CAP,
		 "evictions %" PRIu64 ", inserts past the cap %" PRIu64,
		 stat(c, "lru", "evictions.capacity"), created - CAP);
	SV_CHECK(stat(c, "lru", "rows") == CAP, "rows %" PRIu64,
		 stat(c, "lru", "rows"));
	SV_CHECK(stat(c, NULL, "evictions.capacity") == created - CAP,
		 "node evictions");
	/* cached locations of keys evicted since: missing or their own row */
	SV_CHECK(ncached > 0, "no key was created mid-stream");
	{
		int n = rs_get(t, cached, (size_t)ncached, rows, st, 0);

		SV_CHECK(n >= 0, "get: %s", rs_errormsg());
		for (int i = 0; i < ncached; i++) {
			SV_CHECK(st[i] == RS_KEY_MISSING ||
					 (st[i] == RS_KEY_FOUND &&
					  is_init_row(cached[i],
						      rows + i * DIM)),
				 "key %" PRIu64 ": status %d or another "
				 "key's row", cached[i], st[i]);
			missing += st[i] == RS_KEY_MISSING;
		}
		printf("one-sided gets of %d cached keys: %d evicted\n",
		       ncached, missing);
		SV_CHECK(missing > 0, "no cached key was evicted");
		/* an evicted key comes back as the initializer's row */
		for (int i = 0; i < ncached; i++) {
			if (st[i] != RS_KEY_MISSING)
				continue;
			SV_CHECK(rs_get_or_init(t, &cached[i], 1, rows, st,
						0) == 1 &&
					 st[0] == RS_KEY_CREATED &&
					 is_init_row(cached[i], rows),
				 "evicted key %" PRIu64 " back", cached[i]);
			break;
		}
	}
	SV_CHECK(stat(c, "lru", "rows") == CAP, "rows past the cap");
	free(tr);
}

static void no_policy_full(struct rs_client *c)
{
	struct rs_table *t = mk(c, "plain", 64, "none", 0, 0, 0);
	uint64_t keys[80];
	float rows[80 * DIM];
	int st[80], full = 0;

	for (int i = 0; i < 80; i++) {
		keys[i] = 1000 + (uint64_t)i;
		init_of(keys[i], rows + i * DIM);
	}
	SV_CHECK(rs_put(t, keys, 80, rows, st, 0) == 64, "put into 64 rows");
	for (int i = 0; i < 80; i++) {
		SV_CHECK(i < 64 ? st[i] == RS_KEY_CREATED : st[i] == RS_E_FULL,
			 "key %d: status %d", i, st[i]);
		full += st[i] == RS_E_FULL;
	}
	SV_CHECK(rs_get(t, keys, 64, rows, st, 0) == 64, "all 64 kept");
	SV_CHECK(stat(c, "plain", "rows") == 64, "rows");
	printf("no policy: %d keys refused with RS_E_FULL, 64 kept\n", full);
}

static void ttl(struct rs_client *c)
{
	struct rs_table *t = mk(c, "ttl", 256, "none", 0, 1, 0);
	uint64_t keys[20];
	float rows[20 * DIM];
	int st[20];
	double t0, gone_at = 0;

	for (int i = 0; i < 20; i++) {
		keys[i] = 5000 + (uint64_t)i;
		init_of(keys[i], rows + i * DIM);
	}
	t0 = sv_now(); /* before the writes: their TTL counts from them */
	SV_CHECK(rs_put(t, keys, 20, rows, st, 0) == 20, "put");
	SV_CHECK(rs_get(t, keys, 20, rows, st, RS_F_RPC) == 20 ||
			 sv_now() - t0 >= 1.0,
		 "rows gone before their TTL");
	while (sv_now() - t0 < 10) {
		if (stat(c, "ttl", "evictions.ttl") == 20) {
			gone_at = sv_now() - t0;
			break;
		}
		usleep(100 * 1000);
	}
	SV_CHECK(gone_at >= 1.0, "TTL 1 s: rows gone after %.2f s", gone_at);
	SV_CHECK(rs_get(t, keys, 20, rows, st, 0) == 0, "expired rows read");
	SV_CHECK(stat(c, "ttl", "rows") == 0, "rows left");
	printf("ttl 1 s: 20 rows gone after %.2f s\n", gone_at);
}

static void admission(struct rs_client *c)
{
	struct rs_table *t = mk(c, "adm", 1024, "lru", 512, 0, 3);
	uint64_t keys[10];
	float rows[10 * DIM];
	int st[10];

	for (int i = 0; i < 10; i++)
		keys[i] = 9000 + (uint64_t)i;
	for (int round = 1; round <= 3; round++) {
		SV_CHECK(rs_get_or_init(t, keys, 10, rows, st, 0) == 10,
			 "get_or_init round %d", round);
		for (int i = 0; i < 10; i++)
			SV_CHECK(is_init_row(keys[i], rows + i * DIM) &&
					 st[i] == (round < 3 ? RS_KEY_FOUND
							     : RS_KEY_CREATED),
				 "round %d key %d: status %d", round, i,
				 st[i]);
		SV_CHECK(stat(c, "adm", "rows") == (round < 3 ? 0u : 10u),
			 "round %d: rows %" PRIu64, round,
			 stat(c, "adm", "rows"));
	}
	SV_CHECK(stat(c, "adm", "admission.init_served_keys") == 20,
		 "served by the initializer");
	SV_CHECK(stat(c, "adm", "admission.not_admitted") == 20 &&
			 stat(c, "adm", "admission.admitted") == 10,
		 "admission counters");
}

static void same_evict(const struct rs_table_spec *a,
		       const struct rs_table_spec *b)
{
	SV_CHECK(a->evict.policy == b->evict.policy &&
			 a->evict.max_rows == b->evict.max_rows &&
			 a->evict.ttl_s == b->evict.ttl_s &&
			 a->evict.admit_after == b->evict.admit_after &&
			 a->max_capacity == b->max_capacity,
		 "table '%s': restored with eviction %u/%" PRIu64 "/%u/%u "
		 "max_capacity %" PRIu64 ", was %u/%" PRIu64 "/%u/%u, "
		 "%" PRIu64, a->name, b->evict.policy, b->evict.max_rows,
		 b->evict.ttl_s, b->evict.admit_after, b->max_capacity,
		 a->evict.policy, a->evict.max_rows, a->evict.ttl_s,
		 a->evict.admit_after, a->max_capacity);
}

static void restore_keeps_settings(struct rs_client *c, const char *root)
{
	static const char *const names[] = { "rlfu", "rgrow" };
	struct rs_ckpt_opts o = RS_CKPT_OPTS_INIT;
	struct rs_table_spec before[2], after;
	struct rs_table *t;
	uint64_t keys[16];
	float rows[16 * DIM], back[16 * DIM];
	char path[128];
	int st[16];

	t = mk(c, "rlfu", 256, "lfu", 100, 3600, 2);
	for (int i = 0; i < 16; i++) {
		keys[i] = 70000 + (uint64_t)i;
		for (int j = 0; j < DIM; j++)
			rows[i * DIM + j] = (float)(i * 10 + j);
	}
	SV_CHECK(rs_put(t, keys, 16, rows, st, 0) == 16, "put rlfu");
	spec_of(&before[1], "rgrow", 64);
	before[1].max_capacity = 1024;
	SV_OK(rs_table_spec_set_eviction(&before[1], "none", 0, 3600, 0));
	SV_OK(rs_table_create(c, &before[1]));
	SV_OK(rs_table_open(c, "rgrow", &t));
	SV_CHECK(rs_put(t, keys, 16, rows, st, 0) == 16, "put rgrow");
	for (int i = 0; i < 2; i++) {
		before[i] = (struct rs_table_spec)RS_TABLE_SPEC_INIT;
		SV_OK(rs_table_get_spec(c, names[i], &before[i]));
	}
	SV_CHECK(before[0].evict.policy == RS_EVICT_LFU &&
			 before[1].max_capacity == 1024,
		 "the specs as created");
	o.ntables = 2;
	o.tables = names;
	snprintf(path, sizeof(path), "%s/evict-ck", root);
	SV_OK(rs_checkpoint(c, path, &o, NULL));
	for (int i = 0; i < 2; i++)
		SV_OK(rs_table_drop(c, names[i]));
	SV_OK(rs_restore(c, path, NULL, NULL));
	for (int i = 0; i < 2; i++) {
		after = (struct rs_table_spec)RS_TABLE_SPEC_INIT;
		SV_OK(rs_table_get_spec(c, names[i], &after));
		same_evict(&before[i], &after);
		SV_OK(rs_table_open(c, names[i], &t));
		SV_CHECK(rs_get(t, keys, 16, back, st, RS_F_RPC) == 16 &&
				 !memcmp(back, rows, sizeof(rows)),
			 "table '%s': rows restored", names[i]);
	}
	printf("restore: an LFU table and a growing one with a TTL came "
	       "back with their settings and rows\n");
}

int main(void)
{
	const char *ip = sv_ip();
	struct rs_server_config *cfg;
	struct sv_node n;
	struct rs_client *c;
	char root[] = "/tmp/rs-evict-ck-XXXXXX";
	double t0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	sv_memlock();
	t0 = sv_now();
	SV_CHECK(mkdtemp(root), "mkdtemp");
	cfg = sv_config("{ \"workers\": 2, \"checkpoint_dir\": \"%s\" }\n",
			root);
	sv_node_start(&n, ip, cfg);
	rs_server_config_delete(&cfg);
	c = sv_client_of(&n);
	specs(c);
	zipf_lru(c);
	no_policy_full(c);
	ttl(c);
	admission(c);
	restore_keeps_settings(c, root);
	rs_client_close(&c);
	sv_node_stop(&n);
	printf("ok (%.1f s)\n", sv_now() - t0);
	return 0;
}
