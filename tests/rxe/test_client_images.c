/*
 * test_client_images.c - the bucket-image cache over rxe (docs/client.md,
 * "Bucket images"): a reader whose location cache is off (every get is a
 * location-cache miss) and whose index images were prefetched
 * (rs_table_prefetch_index) gets existing keys in one READ each, at two
 * nodes; and falls back, with the same results as the two-round path:
 *   - missing keys are reported missing only after the buckets were READ
 *     (never on an image alone);
 *   - keys deleted by another client, and new keys put into their freed
 *     slots: the images name rows that are no longer the keys' (counted
 *     stale), the deleted keys are missing, the new ones found with their
 *     values, and a key put after the prefetch is found by its buckets;
 *   - rows rewritten in place are READ fresh (an image holds no row);
 *   - a table dropped and created again (same name and geometry, so the
 *     old images sit at the same bucket indexes): the new rows, never
 *     the old ones, never a false MISSING;
 *   - rows torn by a concurrent writer are READ again, never accepted
 *     (the test waits until it saw at least one torn READ).
 */
#include <pthread.h>
#include <stdatomic.h>

#include "client_harness.h"

#define DIM 16
#define N 3000
#define CAP 4096 /* rows per node (each node holds about half the keys) */
#define WIDE 2048
#define HOT 4
#define TORN_BUDGET_S 60.0





static uint64_t key_of(size_t i)
{
	return i * 2654435761ull + 5;
}

/* A client whose every get misses the location cache. */
static struct rs_client *reader(struct harness *h)
{
	return h_client_opts(h, -1, 0, 1);
}

static void one_round(struct harness *h, struct rs_client *w,
		      struct rs_table *tw)
{
	static uint64_t keys[N];
	static float rows[N * DIM];
	static int st[N];
	struct rs_client *r = reader(h);
	struct rs_client_stats s0, s1;
	struct rs_table *t;
	uint64_t got = 0;

	for (size_t i = 0; i < N; i++)
		keys[i] = key_of(i);
	h_fill(rows, keys, N, DIM, 1);
	H_CHECK(rs_put(tw, keys, N, rows, st, 0) == N, "put");
	H_OK(rs_table_open(r, "img", &t));
	s0 = h_stats(r);
	H_CHECK(s0.bucket_cache_capacity > 0, "cache enabled by default");
	H_OK(rs_table_prefetch_index(t, &got));
	s1 = h_stats(r);
	H_CHECK(got > 0 && s1.bucket_cache_fills - s0.bucket_cache_fills == got,
		"prefetch: %llu images", (unsigned long long)got);
	printf("prefetch: %llu bucket images in %llu READs\n",
	       (unsigned long long)got,
	       (unsigned long long)(s1.reads_posted - s0.reads_posted));
	/* a batch: one READ per key, all found through the images */
	s0 = h_stats(r);
	memset(rows, 0, sizeof(rows));
	H_CHECK(rs_get(t, keys, N, rows, st, 0) == N, "get");
	h_expect_rows(rows, st, keys, N, DIM, 1, "batch through the images");
	s1 = h_stats(r);
	H_CHECK(s1.reads_posted - s0.reads_posted == N &&
			s1.bucket_cache_hits - s0.bucket_cache_hits == N,
		"batch: %llu READs, %llu image hits for %d keys",
		(unsigned long long)(s1.reads_posted - s0.reads_posted),
		(unsigned long long)(s1.bucket_cache_hits -
				     s0.bucket_cache_hits), N);
	/* single keys: one READ per call */
	s0 = h_stats(r);
	for (size_t i = 0; i < 200; i++) {
		H_CHECK(rs_get(t, &keys[i * 7], 1, rows, st, 0) == 1, "get 1");
		h_expect_rows(rows, st, &keys[i * 7], 1, DIM, 1, "one key");
	}
	s1 = h_stats(r);
	H_CHECK(s1.reads_posted - s0.reads_posted == 200,
		"200 one-key gets: %llu READs",
		(unsigned long long)(s1.reads_posted - s0.reads_posted));
	/* RS_F_NOCACHE: the two-round path (2 bucket READs + the row) */
	s0 = h_stats(r);
	H_CHECK(rs_get(t, keys, 100, rows, st, RS_F_NOCACHE) == 100, "nc");
	h_expect_rows(rows, st, keys, 100, DIM, 1, "no cache");
	s1 = h_stats(r);
	H_CHECK(s1.reads_posted - s0.reads_posted == 300 &&
			s1.bucket_cache_hits == s0.bucket_cache_hits,
		"RS_F_NOCACHE: %llu READs for 100 keys",
		(unsigned long long)(s1.reads_posted - s0.reads_posted));
	printf("existing keys: one READ each (batch of %d, 200 single)\n", N);

	/* missing keys: never on an image alone */
	{
		uint64_t miss[64];

		for (size_t i = 0; i < 64; i++)
			miss[i] = (3ull << 50) + i;
		s0 = h_stats(r);
		H_CHECK(rs_get(t, miss, 64, rows, st, 0) == 0, "missing");
		for (size_t i = 0; i < 64; i++)
			H_CHECK(st[i] == RS_KEY_MISSING, "missing %zu", i);
		s1 = h_stats(r);
		H_CHECK(s1.reads_posted - s0.reads_posted >= 2 * 2 * 64,
			"missing keys confirmed by two bucket rounds");
	}
	/* delete half of the first 1000, put as many new keys into the
	 * freed slots, rewrite the other half in place */
	{
		static uint64_t fresh[500];

		H_CHECK(rs_delete(tw, keys, 500, st, 0) == 500, "delete");
		for (size_t i = 0; i < 500; i++)
			fresh[i] = (5ull << 50) + i;
		h_fill(rows, fresh, 500, DIM, 2);
		H_CHECK(rs_put(tw, fresh, 500, rows, st, 0) == 500, "fresh");
		h_fill(rows, keys + 500, N - 500, DIM, 3);
		H_CHECK(rs_put(tw, keys + 500, N - 500, rows, st, 0) ==
				N - 500, "rewrite");
		s0 = h_stats(r);
		H_CHECK(rs_get(t, keys, 500, rows, st, 0) == 0, "deleted");
		for (size_t i = 0; i < 500; i++)
			H_CHECK(st[i] == RS_KEY_MISSING, "deleted key %zu: %d",
				i, st[i]);
		s1 = h_stats(r);
		H_CHECK(s1.bucket_cache_stale - s0.bucket_cache_stale > 0,
			"deleted keys: no image found stale");
		printf("deleted keys: %llu images stale, all missing\n",
		       (unsigned long long)(s1.bucket_cache_stale -
					    s0.bucket_cache_stale));
		memset(rows, 0, sizeof(rows));
		H_CHECK(rs_get(t, fresh, 500, rows, st, 0) == 500, "fresh");
		h_expect_rows(rows, st, fresh, 500, DIM, 2, "keys put after the prefetch");
		memset(rows, 0, sizeof(rows));
		H_CHECK(rs_get(t, keys + 500, N - 500, rows, st, 0) == N - 500,
			"rewritten");
		h_expect_rows(rows, st, keys + 500, N - 500, DIM, 3, "rewritten rows");
	}
	/* dropped and created again with the same geometry */
	{
		struct rs_table *t2;

		H_OK(rs_table_drop(w, "img"));
		t2 = h_table(w, "img", DIM, "sgd", RS_DTYPE_FP32, CAP);
		h_fill(rows, keys + 500, 1000, DIM, 4);
		H_CHECK(rs_put(t2, keys + 500, 1000, rows, st, 0) == 1000,
			"put new");
		for (int f = 0; f < 2; f++) {
			memset(rows, 0, sizeof(rows));
			H_OK(rs_get(t, keys + 500, 1000, rows, st, 0));
			h_expect_rows(rows, st, keys + 500, 1000, DIM, 4,
			       "re-created table");
			H_CHECK(rs_get(t, keys + 1500, 100, rows, st, 0) == 0,
				"keys of the old table are missing");
		}
		s0 = h_stats(r);
		H_OK(rs_table_prefetch_index(t, &got));
		H_CHECK(rs_get(t, keys + 500, 1000, rows, st, 0) == 1000, "g");
		h_expect_rows(rows, st, keys + 500, 1000, DIM, 4, "after a new prefetch");
		s1 = h_stats(r);
		H_CHECK(s1.bucket_cache_hits - s0.bucket_cache_hits == 1000,
			"re-created table: %llu image hits",
			(unsigned long long)(s1.bucket_cache_hits -
					     s0.bucket_cache_hits));
	}
	rs_client_close(&r);
	printf("stale images, missing keys, re-created table: ok\n");
}

static struct rs_table *wide;
static atomic_int stop;

/* SGD with lr 1 and gradient 1: every consistent row has all its
 * elements equal. */
static void *writer(void *arg)
{
	static float g[HOT * WIDE];
	uint64_t keys[HOT];
	int st[HOT];

	(void)arg;
	for (int i = 0; i < HOT; i++)
		keys[i] = 77 + (uint64_t)i;
	for (size_t i = 0; i < HOT * WIDE; i++)
		g[i] = 1.0f;
	while (!atomic_load(&stop))
		H_CHECK(rs_update(wide, keys, HOT, g, st, 0) == HOT, "upd");
	return NULL;
}

static void torn(struct harness *h, struct rs_client *w)
{
	static float rows[HOT * WIDE];
	struct rs_client *r = reader(h);
	struct rs_client_stats s0, s1;
	struct rs_table *t;
	uint64_t keys[HOT];
	unsigned long gets = 0;
	struct timespec a, b;
	pthread_t th;
	int st[HOT];
	double el = 0;

	wide = h_table(w, "imgwide", WIDE, "sgd", RS_DTYPE_FP32, 64);
	for (int i = 0; i < HOT; i++)
		keys[i] = 77 + (uint64_t)i;
	memset(rows, 0, sizeof(rows));
	H_CHECK(rs_put(wide, keys, HOT, rows, st, 0) == HOT, "put wide");
	H_OK(rs_table_open(r, "imgwide", &t));
	H_OK(rs_table_prefetch_index(t, NULL));
	s0 = h_stats(r);
	H_CHECK(pthread_create(&th, NULL, writer, NULL) == 0, "writer");
	clock_gettime(CLOCK_MONOTONIC, &a);
	do {
		H_CHECK(rs_get(t, keys, HOT, rows, st, 0) == HOT, "get wide");
		for (int i = 0; i < HOT; i++)
			for (int e = 1; e < WIDE; e++)
				H_CHECK(rows[i * WIDE + e] == rows[i * WIDE],
					"key %d: torn row accepted (%g, %g)",
					i, rows[i * WIDE], rows[i * WIDE + e]);
		gets++;
		s1 = h_stats(r);
		clock_gettime(CLOCK_MONOTONIC, &b);
		el = (double)(b.tv_sec - a.tv_sec) +
		     (double)(b.tv_nsec - a.tv_nsec) / 1e9;
	} while ((s1.torn_retries == s0.torn_retries || gets < 50) &&
		 el < TORN_BUDGET_S);
	atomic_store(&stop, 1);
	pthread_join(th, NULL);
	H_CHECK(s1.torn_retries > s0.torn_retries,
		"no torn READ seen in %.0f s (%lu gets)", el, gets);
	H_CHECK(s1.bucket_cache_hits - s0.bucket_cache_hits >= gets * HOT,
		"wide rows not found through the images");
	printf("torn rows: %llu READs again in %lu gets, none accepted\n",
	       (unsigned long long)(s1.torn_retries - s0.torn_retries), gets);
	rs_client_close(&r);
}

int main(void)
{
	struct harness h;
	struct rs_client *w;
	struct rs_table *t;

	h_start(&h, 2);
	w = h_client(&h);
	t = h_table(w, "img", DIM, "sgd", RS_DTYPE_FP32, CAP);
	one_round(&h, w, t);
	torn(&h, w);
	rs_client_close(&w);
	h_stop(&h);
	printf("1 passed, 0 failed\n");
	return 0;
}
