/*
 * rcache.c - a table's row cache on the client (see rcache.h).
 *
 * Layout: nsets sets of CLI_RCACHE_WAYS ways, each set a
 * spin lock, valid and reference bitmaps and a CLOCK hand; way w of set s
 * keeps its row at rows[(s * WAYS + w) * dim]. The sketch is an array of
 * byte counters (a power of two, 16 to 32 per row the cache holds), four
 * per key.
 *
 * Invariants (under the set's lock): a way is meaningful only if its
 * valid bit is set; at most one valid way per key in a set.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "client/clockset.h"
#include "client/rcache.h"
#include "common/rs_internal.h"

#define SKETCH_MAX 15	/* counters saturate: 4-bit-like, as TinyLFU */
#define SAMPLE_PER_ROW 10 /* sightings per cached row before halving */
#define SKETCH_DEPTH 4	/* counters per key (count-min) */
/* counters per row the cache holds: at 8 the sketch's collisions let cold
 * rows in and the hit rate under Zipf 0.99 fell 4.5 points below the
 * policy with exact counts; at 32 it is within 1 point, and higher for
 * the same budget though fewer rows fit (test_client_rcache) */
#define SKETCH_PER_ROW 32

struct rway {
	uint64_t key;
	struct cli_rentry e;
};

struct rset {
	atomic_flag lock;
	uint8_t valid, ref, hand;
	struct rway way[CLI_RCACHE_WAYS];
};

struct cli_rcache {
	uint32_t dim, max_stale;
	size_t nsets;
	struct rset *sets;
	float *rows;
	_Atomic uint8_t *sketch;
	size_t sketch_mask;
	uint64_t sample;	/* sightings between two halvings */
	atomic_uint_fast64_t seen;
	atomic_flag aging;
	size_t bytes;
	atomic_uint_fast64_t inserts, refreshes, evictions, rejects,
		invalidations;
};

/* Counters of the sketch for nsets sets: a power of two, SKETCH_PER_ROW / 2
 * to SKETCH_PER_ROW per row. */
static size_t sketch_size(size_t nsets)
{
	size_t n = 64;

	while (2 * n <= SKETCH_PER_ROW * CLI_RCACHE_WAYS * nsets)
		n *= 2;
	return n;
}

static size_t footprint(size_t nsets, uint32_t dim)
{
	size_t rows = nsets * CLI_RCACHE_WAYS;

	return sizeof(struct cli_rcache) + nsets * sizeof(struct rset) +
	       rows * dim * sizeof(float) + sketch_size(nsets);
}

int cli_rcache_new(struct cli_rcache **out, size_t bytes, uint32_t dim,
		   uint32_t max_stale)
{
	struct cli_rcache *rc;
	size_t nsets = 1;

	*out = NULL;
	if (!dim || dim > 65536)
		return rs_seterr(RS_E_INVAL, "row cache: dim %u", dim);
	if (footprint(1, dim) > bytes)
		return rs_seterr(RS_E_INVAL, "row cache: %zu bytes hold fewer "
				 "than %d rows of %u floats (%zu needed)",
				 bytes, CLI_RCACHE_WAYS, dim,
				 footprint(1, dim));
	/* the most sets that fit (a footprint grows with nsets) */
	for (size_t step = (size_t)1 << 30; step; step /= 2)
		if (footprint(nsets + step, dim) <= bytes)
			nsets += step;
	rc = calloc(1, sizeof(*rc));
	if (!rc)
		return rs_seterr(-ENOMEM, "row cache: out of memory");
	rc->dim = dim;
	rc->max_stale = max_stale;
	rc->nsets = nsets;
	rc->sketch_mask = sketch_size(nsets) - 1;
	rc->sample = (uint64_t)SAMPLE_PER_ROW * nsets * CLI_RCACHE_WAYS;
	rc->bytes = footprint(nsets, dim);
	rc->sets = calloc(nsets, sizeof(*rc->sets));
	rc->rows = malloc(nsets * CLI_RCACHE_WAYS * dim * sizeof(float));
	rc->sketch = calloc(rc->sketch_mask + 1, 1);
	if (!rc->sets || !rc->rows || !rc->sketch) {
		size_t b = rc->bytes;

		cli_rcache_delete(rc);
		return rs_seterr(-ENOMEM, "row cache: out of memory (%zu "
				 "bytes)", b);
	}
	for (size_t s = 0; s < nsets; s++)
		atomic_flag_clear(&rc->sets[s].lock);
	atomic_flag_clear(&rc->aging);
	*out = rc;
	return 0;
}

void cli_rcache_delete(struct cli_rcache *rc)
{
	if (!rc)
		return;
	free(rc->sets);
	free(rc->rows);
	free((void *)rc->sketch);
	free(rc);
}

uint32_t cli_rcache_dim(const struct cli_rcache *rc)
{
	return rc->dim;
}

uint32_t cli_rcache_max_stale(const struct cli_rcache *rc)
{
	return rc->max_stale;
}

/* ---- frequency sketch ---- */

static void halve(struct cli_rcache *rc)
{
	for (size_t i = 0; i <= rc->sketch_mask; i++)
		atomic_store_explicit(&rc->sketch[i],
				      atomic_load_explicit(&rc->sketch[i],
							   memory_order_relaxed)
					      >> 1,
				      memory_order_relaxed);
}

/* Counter d of a key (of its 64-bit hash h): four 16-bit slices. */
static _Atomic uint8_t *counter(const struct cli_rcache *rc, uint64_t h,
				int d)
{
	return &rc->sketch[((h >> (16 * d)) * 0x9e3779b1u + (unsigned)d) &
			   rc->sketch_mask];
}

static uint8_t freq(const struct cli_rcache *rc, uint64_t h)
{
	uint8_t f = SKETCH_MAX;

	for (int d = 0; d < SKETCH_DEPTH; d++) {
		uint8_t x = atomic_load_explicit(counter(rc, h, d),
						 memory_order_relaxed);

		f = x < f ? x : f;
	}
	return f;
}

/* One sighting (conservative update: only the smallest counters grow). */
static void sight(struct cli_rcache *rc, uint64_t h)
{
	uint8_t f = freq(rc, h);

	if (f < SKETCH_MAX)
		for (int d = 0; d < SKETCH_DEPTH; d++) {
			_Atomic uint8_t *c = counter(rc, h, d);

			if (atomic_load_explicit(c, memory_order_relaxed) == f)
				atomic_fetch_add_explicit(c, 1,
							  memory_order_relaxed);
		}
	if (atomic_fetch_add_explicit(&rc->seen, 1, memory_order_relaxed) + 1 <
	    rc->sample)
		return;
	/* one thread halves; the others go on (a few sightings lost) */
	if (atomic_flag_test_and_set(&rc->aging))
		return;
	atomic_store_explicit(&rc->seen, 0, memory_order_relaxed);
	halve(rc);
	atomic_flag_clear(&rc->aging);
}

/* ---- sets ---- */

static struct rset *set_of(struct cli_rcache *rc, uint64_t h)
{
	/* any count of sets: multiply-shift range reduction */
	return &rc->sets[(size_t)(((h >> 32) * (uint64_t)rc->nsets) >> 32)];
}

static void lock(struct rset *s)
{
	while (atomic_flag_test_and_set_explicit(&s->lock,
						 memory_order_acquire))
		;
}

static void unlock(struct rset *s)
{
	atomic_flag_clear_explicit(&s->lock, memory_order_release);
}

static int find(const struct rset *s, uint64_t key)
{
	for (int w = 0; w < CLI_RCACHE_WAYS; w++)
		if ((s->valid >> w & 1) && s->way[w].key == key)
			return w;
	return -1;
}

static float *row_at(struct cli_rcache *rc, const struct rset *s, int w)
{
	return rc->rows + ((size_t)(s - rc->sets) * CLI_RCACHE_WAYS +
			   (size_t)w) * rc->dim;
}

bool cli_rcache_get(struct cli_rcache *rc, uint64_t key,
		    struct cli_rentry *e, float *out)
{
	uint64_t h = cli_fmix64(key);
	struct rset *s = set_of(rc, h);
	int w;

	sight(rc, h);
	lock(s);
	w = find(s, key);
	if (w >= 0) {
		*e = s->way[w].e;
		memcpy(out, row_at(rc, s, w), rc->dim * sizeof(float));
		s->ref |= (uint8_t)(1u << w);
	}
	unlock(s);
	return w >= 0;
}

/* The way whose key was seen least often (*f: how often); ties go to
 * the first from the CLOCK hand whose reference bit is clear, the hand
 * moving past it (a full set only). */
static int victim(const struct cli_rcache *rc, struct rset *s, uint8_t *f)
{
	int best = -1;
	uint8_t bf = 0;

	for (int i = 0; i < CLI_RCACHE_WAYS; i++) {
		int w = (s->hand + i) % CLI_RCACHE_WAYS;
		uint8_t x = freq(rc, cli_fmix64(s->way[w].key));

		if (best < 0 || x < bf ||
		    (x == bf && (s->ref >> best & 1) && !(s->ref >> w & 1))) {
			best = w;
			bf = x;
		}
	}
	s->ref &= (uint8_t)~(1u << best);
	s->hand = (uint8_t)((best + 1) % CLI_RCACHE_WAYS);
	*f = bf;
	return best;
}

void cli_rcache_put(struct cli_rcache *rc, uint64_t key,
		    const struct cli_rentry *e, const float *row,
		    bool only_cached)
{
	uint64_t h = cli_fmix64(key);
	struct rset *s = set_of(rc, h);
	int w;

	lock(s);
	w = find(s, key);
	if (w >= 0) {
		atomic_fetch_add_explicit(&rc->refreshes, 1,
					  memory_order_relaxed);
	} else if (only_cached) {
		unlock(s);
		return;
	} else if (s->valid != (uint8_t)((1u << CLI_RCACHE_WAYS) - 1)) {
		w = __builtin_ctz((unsigned)(uint8_t)~s->valid);
		atomic_fetch_add_explicit(&rc->inserts, 1,
					  memory_order_relaxed);
	} else {
		uint8_t vf;

		w = victim(rc, s, &vf);
		if (freq(rc, h) <= vf) {
			unlock(s);
			atomic_fetch_add_explicit(&rc->rejects, 1,
						  memory_order_relaxed);
			return;
		}
		atomic_fetch_add_explicit(&rc->evictions, 1,
					  memory_order_relaxed);
		atomic_fetch_add_explicit(&rc->inserts, 1,
					  memory_order_relaxed);
	}
	s->way[w].key = key;
	s->way[w].e = *e;
	memcpy(row_at(rc, s, w), row, rc->dim * sizeof(float));
	s->valid |= (uint8_t)(1u << w);
	unlock(s);
}

void cli_rcache_drop(struct cli_rcache *rc, uint64_t key, uint64_t version)
{
	struct rset *s = set_of(rc, cli_fmix64(key));
	int w;

	lock(s);
	w = find(s, key);
	if (w >= 0 && (!version || s->way[w].e.version == version)) {
		s->valid &= (uint8_t)~(1u << w);
		s->ref &= (uint8_t)~(1u << w);
		atomic_fetch_add_explicit(&rc->invalidations, 1,
					  memory_order_relaxed);
	}
	unlock(s);
}

void cli_rcache_get_stats(const struct cli_rcache *rc,
			  struct cli_rcache_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!rc)
		return;
	out->inserts = atomic_load(&rc->inserts);
	out->refreshes = atomic_load(&rc->refreshes);
	out->evictions = atomic_load(&rc->evictions);
	out->rejects = atomic_load(&rc->rejects);
	out->invalidations = atomic_load(&rc->invalidations);
	out->bytes = rc->bytes;
	out->rows = rc->nsets * CLI_RCACHE_WAYS;
}
