/*
 * evict_sim.c - the bodies of the helpers declared in evict_sim.h, which
 * says what they are for.
 */
#include "evict_sim.h"

uint64_t es_xs(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void *es_alloc(size_t n)
{
	void *p = malloc(n);

	if (!p)
		abort();
	return p;
}

uint32_t *es_zipf_trace(uint32_t universe, uint32_t n, double s,
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

static unsigned es_log2_up(uint64_t x)
{
	unsigned s = 0;

	while ((1ull << s) < x)
		s++;
	return s;
}

/* The policies' access words as slab_evict.c keeps them: LRU the clock of
 * the last access; LFU a count halved every 2^shift accesses (16 bits) over
 * that clock (48 bits), so ties go to the least recent. */
static uint64_t es_score(bool lfu, uint64_t acc, uint64_t clk,
			 unsigned shift)
{
	uint64_t d, m = (1ull << 48) - 1;

	if (!lfu)
		return acc;
	d = (clk >> shift) - ((acc & m) >> shift);
	return (d >= 16 ? 0 : (acc >> 48) >> d) << 48 | (acc & m);
}

static uint64_t es_touch(bool lfu, uint64_t acc, uint64_t c,
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

uint64_t es_simulate(const uint32_t *tr, uint32_t n,
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
