/*
 * evict_sim.h - for the eviction tests (tests/unit/test_evict.c,
 * tests/rxe/test_server_evict.c): a Zipf key trace and an exact
 * simulation of the LRU and LFU policies of value/slab_evict.c (full scan
 * for the victim instead of a sample), or of random eviction, on a trace
 * and a cap: the "ideal" a sampled policy's hit rate is held against.
 * Test code: aborts on allocation failure.
 */
#ifndef RS_TESTS_EVICT_SIM_H
#define RS_TESTS_EVICT_SIM_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline uint64_t es_xs(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static inline void *es_alloc(size_t n)
{
	void *p = malloc(n);

	if (!p)
		abort();
	return p;
}

/* n accesses of keys 0..universe-1, key i with weight 1 / (i + 1)^s. */
static inline uint32_t *es_zipf_trace(uint32_t universe, uint32_t n, double s,
				      uint64_t seed)
{
	double *cdf = es_alloc(universe * sizeof(*cdf)), sum = 0;
	uint32_t *tr = es_alloc(n * sizeof(*tr));

	for (uint32_t i = 0; i < universe; i++)
		cdf[i] = sum += 1.0 / pow(i + 1, s);
	for (uint32_t a = 0; a < n; a++) {
		double u = (double)(es_xs(&seed) >> 11) / 9007199254740992.0 *
			   sum;
		uint32_t lo = 0, hi = universe - 1;

		while (lo < hi) {
			uint32_t mid = (lo + hi) / 2;

			if (cdf[mid] < u)
				lo = mid + 1;
			else
				hi = mid;
		}
		tr[a] = lo;
	}
	free(cdf);
	return tr;
}

static inline unsigned es_log2_up(uint64_t x)
{
	unsigned s = 0;

	while ((1ull << s) < x)
		s++;
	return s;
}

/* The policies' access words as slab_evict.c keeps them: LRU the clock of
 * the last access; LFU a count halved every 2^shift accesses (16 bits) over
 * that clock (48 bits), so ties go to the least recent. */
static inline uint64_t es_score(bool lfu, uint64_t acc, uint64_t clk,
				unsigned shift)
{
	uint64_t d, m = (1ull << 48) - 1;

	if (!lfu)
		return acc;
	d = (clk >> shift) - ((acc & m) >> shift);
	return (d >= 16 ? 0 : (acc >> 48) >> d) << 48 | (acc & m);
}

static inline uint64_t es_touch(bool lfu, uint64_t acc, uint64_t c,
				unsigned shift)
{
	uint64_t m = (1ull << 48) - 1, cnt = acc >> 48, d;

	if (!lfu)
		return c;
	d = (c >> shift) - ((acc & m) >> shift);
	cnt = d >= 16 ? 0 : cnt >> d;
	cnt += cnt < 0xffff;
	return cnt << 48 | (c & m);
}

/* Hits of the exact policy (full scan for the victim) over the trace with
 * `cap` rows, or of random eviction when random != 0 (its seed). Every
 * access advances the clock once, as a read or an insert does. */
static inline uint64_t es_simulate(const uint32_t *tr, uint32_t n,
				   uint32_t universe, uint32_t cap, bool lfu,
				   uint64_t random)
{
	int32_t *slot_of = es_alloc(universe * sizeof(*slot_of));
	uint32_t *keys = es_alloc(cap * sizeof(*keys)), used = 0;
	uint64_t *acc = es_alloc(cap * sizeof(*acc)), clk = 0, hits = 0;
	unsigned shift = es_log2_up(cap) + 2;

	memset(slot_of, 0xff, universe * sizeof(*slot_of));
	for (uint32_t a = 0; a < n; a++) {
		uint32_t k = tr[a], v = 0;

		clk++;
		if (slot_of[k] >= 0) {
			hits++;
			acc[slot_of[k]] = es_touch(lfu, acc[slot_of[k]], clk,
						   shift);
			continue;
		}
		if (used < cap) {
			v = used++;
		} else if (random) {
			v = (uint32_t)(es_xs(&random) % cap);
			slot_of[keys[v]] = -1;
		} else {
			uint64_t best = UINT64_MAX;

			for (uint32_t i = 0; i < cap; i++) {
				uint64_t sc = es_score(lfu, acc[i], clk - 1,
						       shift);

				if (sc < best) {
					best = sc;
					v = i;
				}
			}
			slot_of[keys[v]] = -1;
		}
		keys[v] = k;
		slot_of[k] = (int32_t)v;
		acc[v] = es_touch(lfu, 0, clk, shift);
	}
	free(slot_of);
	free(keys);
	free(acc);
	return hits;
}

#endif
