/*
 * lcache.c - set-associative CLOCK cache of row locations (see lcache.h).
 *
 * Layout: nsets (a power of two) sets of CLI_LCACHE_WAYS entries, each set
 * one spin lock + valid and reference bitmaps + a CLOCK hand (clockset.h).
 * The set of a (table, key) pair comes from a 64-bit mix of both, so a
 * table's keys spread over all sets. Replacement: CLOCK, per set.
 *
 * Invariants (under the set's lock): a way is meaningful only if its valid
 * bit is set; at most one valid way per (table, key) in a set.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "client/clockset.h"
#include "client/lcache.h"
#include "common/rs_internal.h"

struct way {
	uint64_t key;
	uint32_t table;
	struct cli_loc loc;
};

struct set {
	struct cli_clock h;
	struct way way[CLI_LCACHE_WAYS];
};

struct cli_lcache {
	size_t nsets; /* power of two */
	struct set *sets;
	atomic_uint_fast64_t hits, misses, inserts, evictions, invalidations;
};

static struct set *set_of(struct cli_lcache *c, uint32_t table, uint64_t key)
{
	return &c->sets[cli_clock_mix(table, key) & (c->nsets - 1)];
}

static void set_lock(struct set *s)
{
	cli_clock_lock(&s->h);
}

static void set_unlock(struct set *s)
{
	cli_clock_unlock(&s->h);
}

static int find_way(const struct set *s, uint32_t table, uint64_t key)
{
	for (int i = 0; i < CLI_LCACHE_WAYS; i++)
		if ((s->h.valid & (1u << i)) && s->way[i].key == key &&
		    s->way[i].table == table)
			return i;
	return -1;
}

int cli_lcache_new(struct cli_lcache **out, size_t entries)
{
	struct cli_lcache *c;
	size_t nsets = 1;

	*out = NULL;
	if (entries == 0)
		return 0;
	if (entries > ((size_t)1 << 36))
		return rs_seterr(RS_E_INVAL, "location cache: %zu entries",
				 entries);
	while (nsets * CLI_LCACHE_WAYS < entries)
		nsets <<= 1;
	c = calloc(1, sizeof(*c));
	if (!c)
		return rs_seterr(-ENOMEM, "location cache: out of memory");
	c->sets = calloc(nsets, sizeof(*c->sets));
	if (!c->sets) {
		free(c);
		return rs_seterr(-ENOMEM, "location cache: %zu sets", nsets);
	}
	/* the sets are not touched here: calloc's zeroes are clear flags
	 * (clockset.h), so the cache's pages are faulted in as it fills */
	c->nsets = nsets;
	*out = c;
	return 0;
}

void cli_lcache_delete(struct cli_lcache **c)
{
	if (!c || !*c)
		return;
	free((*c)->sets);
	free(*c);
	*c = NULL;
}

bool cli_lcache_get(struct cli_lcache *c, uint32_t table, uint64_t key,
		    struct cli_loc *out)
{
	struct set *s;
	int w;

	if (!c)
		return false;
	s = set_of(c, table, key);
	set_lock(s);
	w = find_way(s, table, key);
	if (w >= 0) {
		*out = s->way[w].loc;
		cli_clock_touch(&s->h, w);
	}
	set_unlock(s);
	atomic_fetch_add_explicit(w >= 0 ? &c->hits : &c->misses, 1,
				  memory_order_relaxed);
	return w >= 0;
}

/* Pick a way to fill in a set whose lock is held. */
static int victim(struct cli_lcache *c, struct set *s)
{
	bool evicted;
	int w = cli_clock_victim(&s->h, CLI_LCACHE_WAYS, &evicted);

	if (evicted)
		atomic_fetch_add_explicit(&c->evictions, 1,
					  memory_order_relaxed);
	return w;
}

void cli_lcache_put(struct cli_lcache *c, uint32_t table, uint64_t key,
		    const struct cli_loc *loc)
{
	struct set *s;
	int w;

	if (!c)
		return;
	s = set_of(c, table, key);
	set_lock(s);
	w = find_way(s, table, key);
	if (w < 0)
		w = victim(c, s);
	s->way[w].key = key;
	s->way[w].table = table;
	s->way[w].loc = *loc;
	cli_clock_fill(&s->h, w);
	set_unlock(s);
	atomic_fetch_add_explicit(&c->inserts, 1, memory_order_relaxed);
}

void cli_lcache_invalidate(struct cli_lcache *c, uint32_t table, uint64_t key,
			   uint64_t addr)
{
	struct set *s;
	int w;

	if (!c)
		return;
	s = set_of(c, table, key);
	set_lock(s);
	w = find_way(s, table, key);
	if (w >= 0 && (addr == 0 || s->way[w].loc.addr == addr))
		cli_clock_clear(&s->h, w);
	else
		w = -1;
	set_unlock(s);
	if (w >= 0)
		atomic_fetch_add_explicit(&c->invalidations, 1,
					  memory_order_relaxed);
}

void cli_lcache_invalidate_table(struct cli_lcache *c, uint32_t table)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nsets; i++) {
		struct set *s = &c->sets[i];

		set_lock(s);
		for (int w = 0; w < CLI_LCACHE_WAYS; w++)
			if ((s->h.valid & (1u << w)) &&
			    s->way[w].table == table)
				cli_clock_clear(&s->h, w);
		set_unlock(s);
	}
}

void cli_lcache_get_stats(const struct cli_lcache *c,
			  struct cli_lcache_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!c)
		return;
	out->hits = atomic_load_explicit(&c->hits, memory_order_relaxed);
	out->misses = atomic_load_explicit(&c->misses, memory_order_relaxed);
	out->inserts = atomic_load_explicit(&c->inserts, memory_order_relaxed);
	out->evictions =
		atomic_load_explicit(&c->evictions, memory_order_relaxed);
	out->invalidations =
		atomic_load_explicit(&c->invalidations, memory_order_relaxed);
	out->capacity = c->nsets * CLI_LCACHE_WAYS;
}
