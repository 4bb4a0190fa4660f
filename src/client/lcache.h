/*
 * lcache.h - the client's location cache (internal, cli_lcache_).
 *
 * Maps (table uid, key) to where the key's row was last seen on its memory
 * node: the remote address, the row's length and version. A hit turns a
 * one-sided GET into a single row READ instead of bucket READs + row READ.
 * An entry is only a hint: the reader validates the row it READs (key,
 * tombstone, checksum) and, on any mismatch, drops the entry and re-resolves
 * the key through the index buckets. Nothing is ever returned to the user on
 * the strength of the cache alone.
 *
 * Bounded: a fixed number of 8-way sets, CLOCK replacement inside each set
 * (a reference bit per way, a hand per set). Entries of a dropped or
 * re-created table die with its uid (the client gives a table a new uid when
 * the node's directory says it changed) and age out.
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

struct cli_loc {
	uint64_t addr;	  /* remote address of the row (node's rows region) */
	uint32_t version; /* row version seen when the entry was made */
	uint32_t len;	  /* bytes to READ */
	uint32_t node;	  /* node index (ring position) */
};

struct cli_lcache_stats {
	uint64_t hits, misses, inserts, evictions, invalidations;
	size_t capacity;
};

struct cli_lcache;

/* A cache for at least `entries` locations; entries == 0 gives *out = NULL,
 * which every function below accepts as "caching disabled". */
int cli_lcache_new(struct cli_lcache **out, size_t entries);
void cli_lcache_delete(struct cli_lcache **c);

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
