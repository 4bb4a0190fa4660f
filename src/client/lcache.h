/*
 * lcache.h - the client's location cache (internal, cli_lcache_).
 *
 * Maps (table handle, key) to where the key's row was last seen: the node
 * slot it was READ at, the remote address, the row's length and version,
 * the uid of the node's view of the table (struct cli_tloc: one table
 * incarnation on one node) and the configuration epoch the node was
 * placed by. A hit turns a one-sided GET into a single row READ instead of
 * bucket READs + row READ, and while the entry's epoch is the call's (0 in
 * static mode, whose ring never changes) the get takes the node from the
 * entry instead of placing the key on the ring. An entry is only a hint:
 * the get uses it only if the node's view still has the entry's uid (the
 * same incarnation), validates the row it READs (key, tombstone,
 * checksum) and, on any mismatch, drops the entry and re-resolves the key
 * through the index buckets. An entry of another epoch is used only if
 * the key placed by the current configuration lands on the entry's node
 * (get.c re-stamps it then). Nothing is ever returned to the user on the
 * strength of the cache alone.
 *
 * Bounded: a fixed number of 8-way sets, CLOCK replacement inside each set
 * (a reference bit per way, a hand per set). Entries of a dropped or
 * re-created table stop matching its views' uids (the client gives a view
 * a new uid when the node's directory says it changed) and age out.
 *
 * Concurrency: thread-safe. Each set has its own spin lock, held for a few
 * dozen instructions; there is no global lock. Counters are relaxed atomics.
 */
#ifndef CLI_LCACHE_H
#define CLI_LCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CLI_LCACHE_WAYS 8

/* The epoch of an entry that was not placed by its configuration alone
 * (a replica chosen per client): a hit always places the key again. */
#define CLI_LOC_NO_EPOCH UINT64_MAX

struct cli_loc {
	uint64_t addr;	  /* row slot in the node's rows region */
	uint64_t epoch;	  /* configuration the node was placed by (0:
			     static mode; CLI_LOC_NO_EPOCH) */
	uint32_t version; /* row version seen when the entry was made */
	uint32_t len;	  /* bytes to READ */
	uint32_t node;	  /* node slot it was READ at */
	uint32_t uid;	  /* struct cli_tloc uid of that node's view */
};

/*
 * What a get may do with an entry (get.c plan(); pure, so unit tested).
 * cli_loc_here(): READ the row at loc->node without placing the key: the
 * entry was placed by the call's configuration (`epoch`), keys are
 * placed by the ring alone (`ring_only`: not by a per-client replica
 * choice), the node is one of the call's nn, and its view `uid` (nrows
 * rows) is the entry's table incarnation. Otherwise the get places the
 * key on node `placed` and cli_loc_at() says whether the entry is still
 * good there: 0 no (READ the buckets), 1 yes, 2 yes but of another
 * epoch (the get re-stamps it once the row validates).
 */
static inline bool cli_loc_fits(const struct cli_loc *loc, uint32_t uid,
				uint64_t nrows)
{
	return loc->uid == uid && loc->addr < nrows;
}

static inline bool cli_loc_here(const struct cli_loc *loc, uint64_t epoch,
				bool ring_only, size_t nn, uint32_t uid,
				uint64_t nrows)
{
	return ring_only && loc->epoch == epoch && loc->node < nn &&
	       cli_loc_fits(loc, uid, nrows);
}

static inline int cli_loc_at(const struct cli_loc *loc, unsigned placed,
			     uint64_t epoch, bool ring_only, uint32_t uid,
			     uint64_t nrows)
{
	if (loc->node != placed || !cli_loc_fits(loc, uid, nrows))
		return 0;
	return loc->epoch == epoch || !ring_only ? 1 : 2;
}

struct cli_lcache_stats {
	uint64_t hits, misses, inserts, evictions, invalidations;
	size_t capacity;
};

struct cli_lcache;

/* A cache for at least `entries` locations; entries == 0 gives *out = NULL,
 * which every function below accepts as "caching disabled". */
int cli_lcache_new(struct cli_lcache **out, size_t entries);
void cli_lcache_delete(struct cli_lcache **c);

/* `table`: the handle's client-wide luid (struct rs_table). */
bool cli_lcache_get(struct cli_lcache *c, uint32_t table, uint64_t key,
		    struct cli_loc *out);
void cli_lcache_put(struct cli_lcache *c, uint32_t table, uint64_t key,
		    const struct cli_loc *loc);
/* Drop the entry if it still says `addr` (0: whatever it says). */
void cli_lcache_invalidate(struct cli_lcache *c, uint32_t table, uint64_t key,
			   uint64_t addr);
/* Drop every entry of a table (scans the whole cache). */
void cli_lcache_invalidate_table(struct cli_lcache *c, uint32_t table);
void cli_lcache_get_stats(const struct cli_lcache *c,
			  struct cli_lcache_stats *out);

#endif
