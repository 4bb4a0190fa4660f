/*
 * test_client_rcache.c - a table's row cache on the client: hit, refresh
 * and drop; the byte budget holds; admission by frequency keeps hot rows
 * through a scan; under Zipf 0.99 the hit rate comes close to that of the
 * ideal cache of the same size (the hottest rows, known in advance); many
 * threads at once (every hit returns the row and proof that were put
 * together for that key).
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

#include "client/rcache.h"
#include "recstore/error.h"

#define DIM 16

static void row_for(uint64_t key, uint64_t version, float *row)
{
	for (unsigned i = 0; i < DIM; i++)
		row[i] = (float)(key * 7 + version * 3 + i);
}

static struct cli_rentry entry_for(uint64_t key, uint64_t version)
{
	return (struct cli_rentry){ .version = version,
				    .csum = key ^ (version << 20),
				    .slot = (uint32_t)key,
				    .node = 1, .uid = 5, .stamp = 9 };
}

static bool row_is(const float *row, uint64_t key, uint64_t version)
{
	float want[DIM];

	row_for(key, version, want);
	return !memcmp(row, want, sizeof(want));
}

static void put_get_drop(void **state)
{
	struct cli_rcache *rc;
	struct cli_rentry e, got;
	struct cli_rcache_stats st;
	float row[DIM], out[DIM];

	(void)state;
	assert_int_equal(cli_rcache_new(&rc, 1 << 16, DIM, CLI_RCACHE_EXACT),
			 0);
	assert_int_equal(cli_rcache_dim(rc), DIM);
	assert_int_equal(cli_rcache_max_stale(rc), CLI_RCACHE_EXACT);
	assert_false(cli_rcache_get(rc, 42, &got, out));
	e = entry_for(42, 2);
	row_for(42, 2, row);
	cli_rcache_put(rc, 42, &e, row, false);
	assert_true(cli_rcache_get(rc, 42, &got, out));
	assert_true(row_is(out, 42, 2));
	assert_int_equal(got.version, 2);
	assert_int_equal(got.csum, e.csum);
	assert_int_equal(got.slot, 42);
	assert_int_equal(got.node, 1);
	assert_int_equal(got.uid, 5);
	assert_int_equal(got.stamp, 9);
	/* a refresh replaces the row and its proof */
	e = entry_for(42, 4);
	row_for(42, 4, row);
	cli_rcache_put(rc, 42, &e, row, true);
	assert_true(cli_rcache_get(rc, 42, &got, out));
	assert_true(row_is(out, 42, 4));
	assert_int_equal(got.version, 4);
	/* only_cached never enters a new key */
	cli_rcache_put(rc, 43, &e, row, true);
	assert_false(cli_rcache_get(rc, 43, &got, out));
	/* a drop naming an older version leaves the entry */
	cli_rcache_drop(rc, 42, 2);
	assert_true(cli_rcache_get(rc, 42, &got, out));
	cli_rcache_drop(rc, 42, 4);
	assert_false(cli_rcache_get(rc, 42, &got, out));
	cli_rcache_put(rc, 42, &e, row, false);
	cli_rcache_drop(rc, 42, 0);
	assert_false(cli_rcache_get(rc, 42, &got, out));
	cli_rcache_get_stats(rc, &st);
	assert_int_equal(st.inserts, 2);
	assert_int_equal(st.refreshes, 1);
	assert_int_equal(st.invalidations, 2);
	cli_rcache_delete(rc);
	cli_rcache_delete(NULL);
}

static void budget(void **state)
{
	static const size_t budgets[] = { 4096, 10000, 1 << 20, 3 << 20,
					  (1 << 24) + 17 };
	static const uint32_t dims[] = { 1, 16, 128, 1000 };
	struct cli_rcache *rc;
	struct cli_rcache_stats st;

	(void)state;
	for (size_t b = 0; b < sizeof(budgets) / sizeof(*budgets); b++)
		for (size_t d = 0; d < sizeof(dims) / sizeof(*dims); d++) {
			int ret = cli_rcache_new(&rc, budgets[b], dims[d],
						 CLI_RCACHE_EXACT);

			if (ret) {
				/* only a budget under 8 rows is refused */
				assert_int_equal(ret, RS_E_INVAL);
				assert_true(budgets[b] < 8 * (dims[d] * 4 +
							      64));
				continue;
			}
			cli_rcache_get_stats(rc, &st);
			assert_true(st.bytes <= budgets[b]);
			/* at least half the rows the budget could hold */
			assert_true(st.rows * (dims[d] * 4 + 48) * 2 >
				    budgets[b] - 256);
			cli_rcache_delete(rc);
		}
	assert_int_equal(cli_rcache_new(&rc, 100, DIM, CLI_RCACHE_EXACT),
			 RS_E_INVAL);
	assert_null(rc);
	assert_int_equal(cli_rcache_new(&rc, 1 << 20, 0, CLI_RCACHE_EXACT),
			 RS_E_INVAL);
}

/* Look key up; on a miss offer its row (what a get does). */
static bool lookup(struct cli_rcache *rc, uint64_t key)
{
	struct cli_rentry e;
	float out[DIM], row[DIM];

	if (cli_rcache_get(rc, key, &e, out))
		return true;
	e = entry_for(key, 2);
	row_for(key, 2, row);
	cli_rcache_put(rc, key, &e, row, false);
	return false;
}

static void scan_resistant(void **state)
{
	struct cli_rcache *rc;
	struct cli_rcache_stats st;
	unsigned hot = 0, nhot;

	(void)state;
	assert_int_equal(cli_rcache_new(&rc, 64 << 10, DIM, CLI_RCACHE_EXACT),
			 0);
	cli_rcache_get_stats(rc, &st);
	nhot = (unsigned)st.rows / 8;
	for (int round = 0; round < 4; round++)
		for (uint64_t k = 0; k < nhot; k++)
			lookup(rc, k);
	/* a scan of ten times the cache's rows, each seen once, while the
	 * hot keys are still looked up (a quarter of the lookups) */
	for (uint64_t k = 0; k < 10 * st.rows; k++) {
		lookup(rc, 1000000 + k);
		if (k % 3 == 0)
			lookup(rc, (k / 3) % nhot);
	}
	for (uint64_t k = 0; k < nhot; k++) {
		struct cli_rentry e;
		float out[DIM];

		hot += cli_rcache_get(rc, k, &e, out);
	}
	cli_rcache_get_stats(rc, &st);
	assert_true(st.rejects > 0); /* the scan was kept out */
	assert_int_equal(hot, nhot);
	cli_rcache_delete(rc);
}

/* Zipf(s) over n keys by inversion of the cumulative weights. */
struct zipf {
	double *cdf;
	size_t n;
};

static void zipf_init(struct zipf *z, size_t n, double s)
{
	double sum = 0;

	z->n = n;
	z->cdf = malloc(n * sizeof(double));
	assert_non_null(z->cdf);
	for (size_t i = 0; i < n; i++)
		z->cdf[i] = sum += 1.0 / pow((double)(i + 1), s);
	for (size_t i = 0; i < n; i++)
		z->cdf[i] /= sum;
}

/* The rank (0: hottest) of the next Zipf draw. */
static size_t zipf_rank(const struct zipf *z, uint64_t *seed)
{
	double u;
	size_t lo = 0, hi = z->n - 1;

	*seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
	u = (double)(*seed >> 11) / (double)(1ull << 53);
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (z->cdf[mid] < u)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* spread the ranks over the key space */
static uint64_t key_of(size_t rank)
{
	return rank * 0x9e3779b97f4a7c15ull;
}

/*
 * The policy simulated exactly on a trace of ranks: a fully associative
 * cache of `rows`, exact sighting counts (halved every 10 x rows
 * sightings, as the sketch), a miss admitted when there is room or when
 * its key was seen more often than the least-seen cached key, which it
 * replaces. Returns the hits after `warm` lookups.
 */
static uint64_t simulate(const size_t *trace, size_t n, size_t warm,
			 size_t nkeys, size_t rows)
{
	uint32_t *cnt = calloc(nkeys, sizeof(*cnt));
	size_t *slot = malloc(rows * sizeof(*slot)), used = 0, seen = 0;
	uint8_t *in = calloc(nkeys, 1);
	uint64_t hits = 0;

	assert_true(cnt && slot && in);
	for (size_t i = 0; i < n; i++) {
		size_t k = trace[i], v = 0;

		if (cnt[k] < 15)
			cnt[k]++;
		if (++seen == 10 * rows) {
			seen = 0;
			for (size_t j = 0; j < nkeys; j++)
				cnt[j] >>= 1;
		}
		if (in[k]) {
			hits += i >= warm;
			continue;
		}
		if (used < rows) {
			slot[used++] = k;
			in[k] = 1;
			continue;
		}
		for (size_t j = 1; j < rows; j++)
			if (cnt[slot[j]] < cnt[slot[v]])
				v = j;
		if (cnt[k] > cnt[slot[v]]) {
			in[slot[v]] = 0;
			slot[v] = k;
			in[k] = 1;
		}
	}
	free(cnt);
	free(slot);
	free(in);
	return hits;
}

/* Under Zipf 0.99 (1% of the keys cached) the hit rate is within 2
 * points of the policy simulated exactly on the same trace, and near the
 * ideal cache (the hottest keys, known in advance). */
static void zipf_hit_rate(void **state)
{
	const size_t nkeys = 100000, lookups = 600000, warm = 100000;
	struct cli_rcache *rc;
	struct cli_rcache_stats st;
	struct zipf z;
	uint64_t seed = 12345, hits = 0;
	size_t *trace = malloc(lookups * sizeof(*trace));
	double ideal, rate, sim;

	(void)state;
	assert_non_null(trace);
	zipf_init(&z, nkeys, 0.99);
	for (size_t i = 0; i < lookups; i++)
		trace[i] = zipf_rank(&z, &seed);
	/* about 1% of the keys */
	assert_int_equal(cli_rcache_new(&rc, 1000 * (DIM * 4 + 48), DIM,
					CLI_RCACHE_EXACT),
			 0);
	cli_rcache_get_stats(rc, &st);
	ideal = z.cdf[st.rows - 1]; /* the st.rows hottest keys, always */
	for (size_t i = 0; i < lookups; i++) {
		bool hit = lookup(rc, key_of(trace[i]));

		hits += i >= warm && hit;
	}
	rate = (double)hits / (double)(lookups - warm);
	sim = (double)simulate(trace, lookups, warm, nkeys, st.rows) /
	      (double)(lookups - warm);
	printf("row cache: %zu rows, Zipf 0.99 over %zu keys: hit rate "
	       "%.3f, the policy simulated exactly %.3f, ideal %.3f\n",
	       st.rows, nkeys, rate, sim, ideal);
	assert_true(fabs(rate - sim) <= 0.02);
	assert_true(rate >= 0.85 * ideal);
	free(trace);
	free(z.cdf);
	cli_rcache_delete(rc);
}

struct worker {
	struct cli_rcache *rc;
	unsigned id;
	unsigned bad, hits;
};

static void *hammer(void *arg)
{
	struct worker *w = arg;
	uint64_t seed = w->id + 1;

	for (unsigned i = 0; i < 200000; i++) {
		struct cli_rentry e;
		float row[DIM];
		uint64_t key, version;

		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		key = (seed >> 33) % 512;
		version = 2 + 2 * ((seed >> 20) % 8);
		switch ((seed >> 13) % 4) {
		case 0:
		case 1:
			if (cli_rcache_get(w->rc, key, &e, row)) {
				w->hits++;
				/* the row and proof were put together */
				if (e.csum != (key ^ (e.version << 20)) ||
				    !row_is(row, key, e.version))
					w->bad++;
			}
			break;
		case 2:
			e = entry_for(key, version);
			row_for(key, version, row);
			cli_rcache_put(w->rc, key, &e, row, false);
			break;
		default:
			cli_rcache_drop(w->rc, key, 0);
			break;
		}
	}
	return NULL;
}

static void threads(void **state)
{
	struct worker w[4];
	pthread_t t[4];
	struct cli_rcache *rc;

	(void)state;
	assert_int_equal(cli_rcache_new(&rc, 32 << 10, DIM, CLI_RCACHE_EXACT),
			 0);
	for (unsigned i = 0; i < 4; i++) {
		w[i] = (struct worker){ .rc = rc, .id = i };
		assert_int_equal(pthread_create(&t[i], NULL, hammer, &w[i]),
				 0);
	}
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	for (unsigned i = 0; i < 4; i++) {
		assert_int_equal(w[i].bad, 0);
		assert_true(w[i].hits > 0);
	}
	cli_rcache_delete(rc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(put_get_drop),
		cmocka_unit_test(budget),
		cmocka_unit_test(scan_resistant),
		cmocka_unit_test(zipf_hit_rate),
		cmocka_unit_test(threads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
