/*
 * bcache.c - set-associative CLOCK cache of bucket images (see bcache.h).
 *
 * Layout: nsets (a power of two) sets of CLI_BCACHE_WAYS ways, each way a
 * (uid, geometry tag, bucket index) tag and a 128-byte image; the set of a
 * tag comes from a 64-bit mix of uid and bucket index, so one table's
 * buckets spread over all sets. Invariants (under the set's lock): a way
 * is meaningful only if its valid bit is set; at most one valid way per
 * tag in a set.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "client/bcache.h"
#include "client/clockset.h"
#include "common/rs_internal.h"

struct way {
	uint64_t b;
	uint64_t gen;
	uint32_t uid;
	uint8_t img[PET_BUCKET_BYTES];
};

struct set {
	struct cli_clock h;
	struct way way[CLI_BCACHE_WAYS];
};

struct cli_bcache {
	size_t nsets; /* power of two */
	struct set *sets;
	atomic_uint_fast64_t lookups, hits, fills, evictions, drops;
};

static struct set *set_of(struct cli_bcache *c, uint32_t uid, uint64_t b)
{
	return &c->sets[cli_clock_mix(uid, b) & (c->nsets - 1)];
}

static int find_way(const struct set *s, uint32_t uid, uint64_t gen,
		    uint64_t b)
{
	for (int i = 0; i < CLI_BCACHE_WAYS; i++)
		if ((s->h.valid & (1u << i)) && s->way[i].b == b &&
		    s->way[i].uid == uid && s->way[i].gen == gen)
			return i;
	return -1;
}

int cli_bcache_new(struct cli_bcache **out, size_t bytes)
{
	struct cli_bcache *c;
	size_t nsets = 1;

	*out = NULL;
	if (bytes < sizeof(struct set))
		return 0;
	if (bytes > ((size_t)64 << 30))
		return rs_seterr(RS_E_INVAL, "bucket cache: %zu bytes", bytes);
	while (2 * nsets * sizeof(struct set) <= bytes)
		nsets <<= 1;
	c = calloc(1, sizeof(*c));
	if (!c)
		return rs_seterr(-ENOMEM, "bucket cache: out of memory");
	c->sets = calloc(nsets, sizeof(*c->sets));
	if (!c->sets) {
		free(c);
		return rs_seterr(-ENOMEM, "bucket cache: %zu sets", nsets);
	}
	/* untouched: calloc's zeroes are clear flags (clockset.h) */
	c->nsets = nsets;
	*out = c;
	return 0;
}

void cli_bcache_delete(struct cli_bcache **c)
{
	if (!c || !*c)
		return;
	free((*c)->sets);
	free(*c);
	*c = NULL;
}

int cli_bcache_find(struct cli_bcache *c, uint32_t uid, uint64_t gen,
		    uint64_t b, uint64_t key, uint8_t tag, uint32_t *ref)
{
	struct set *s;
	int w, ret = -1;

	if (!c)
		return -1;
	s = set_of(c, uid, b);
	cli_clock_lock(&s->h);
	w = find_way(s, uid, gen, b);
	if (w >= 0) {
		ret = pet_bucket_find(s->way[w].img, key, tag, ref) == 0;
		cli_clock_touch(&s->h, w);
	}
	cli_clock_unlock(&s->h);
	atomic_fetch_add_explicit(&c->lookups, 1, memory_order_relaxed);
	if (ret == 1)
		atomic_fetch_add_explicit(&c->hits, 1, memory_order_relaxed);
	return ret;
}

void cli_bcache_put(struct cli_bcache *c, uint32_t uid, uint64_t gen,
		    uint64_t b, const void *img)
{
	bool evicted = false;
	struct set *s;
	int w;

	if (!c)
		return;
	s = set_of(c, uid, b);
	cli_clock_lock(&s->h);
	w = find_way(s, uid, gen, b);
	if (w < 0)
		w = cli_clock_victim(&s->h, CLI_BCACHE_WAYS, &evicted);
	s->way[w].b = b;
	s->way[w].gen = gen;
	s->way[w].uid = uid;
	memcpy(s->way[w].img, img, PET_BUCKET_BYTES);
	cli_clock_fill(&s->h, w);
	cli_clock_unlock(&s->h);
	atomic_fetch_add_explicit(&c->fills, 1, memory_order_relaxed);
	if (evicted)
		atomic_fetch_add_explicit(&c->evictions, 1,
					  memory_order_relaxed);
}

void cli_bcache_drop(struct cli_bcache *c, uint32_t uid, uint64_t gen,
		     uint64_t b)
{
	struct set *s;
	int w;

	if (!c)
		return;
	s = set_of(c, uid, b);
	cli_clock_lock(&s->h);
	w = find_way(s, uid, gen, b);
	if (w >= 0)
		cli_clock_clear(&s->h, w);
	cli_clock_unlock(&s->h);
	if (w >= 0)
		atomic_fetch_add_explicit(&c->drops, 1, memory_order_relaxed);
}

size_t cli_bcache_capacity(const struct cli_bcache *c)
{
	return c ? c->nsets * CLI_BCACHE_WAYS : 0;
}

void cli_bcache_get_stats(const struct cli_bcache *c,
			  struct cli_bcache_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!c)
		return;
	out->lookups = atomic_load_explicit(&c->lookups, memory_order_relaxed);
	out->hits = atomic_load_explicit(&c->hits, memory_order_relaxed);
	out->fills = atomic_load_explicit(&c->fills, memory_order_relaxed);
	out->evictions =
		atomic_load_explicit(&c->evictions, memory_order_relaxed);
	out->drops = atomic_load_explicit(&c->drops, memory_order_relaxed);
	out->capacity = cli_bcache_capacity(c);
}
