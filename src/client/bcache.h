/*
 * bcache.h - the client's cache of index bucket images (internal,
 * cli_bcache_).
 *
 * Holds validated 128-byte images of PET-hash buckets (pet_format.h), per
 * node view of a table: the images a cold get's bucket READs brought
 * (get.c on_buckets()) and the ones rs_table_prefetch_index() READ in
 * bulk. A get whose key misses the location cache searches the images of
 * its two candidate buckets: if either holds the key, the get READs the
 * row at once (one round trip instead of two). Like a location-cache
 * entry, an image is only a hint: the row READ must validate for the key
 * (key, tombstone, checksum seeded by the table's incarnation) or the get
 * drops both images and READs the buckets; a key in neither image is
 * resolved by the buckets as before (a key is never reported missing on
 * the strength of an image).
 *
 * Keyed by (view uid, geometry tag, bucket index): a table created again
 * has new view uids, a grown index a new geometry tag (pet_geom seeds and
 * bucket count), so their images stop matching and age out.
 *
 * Bounded: the capacity in bytes is fixed at creation (4-way sets, CLOCK
 * inside each, clockset.h). Thread-safe: a spin lock per set, held while
 * an image is searched or copied (about 150 bytes). Counters are relaxed
 * atomics.
 */
#ifndef CLI_BCACHE_H
#define CLI_BCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "index/pet_format.h"

#define CLI_BCACHE_WAYS 4

struct cli_bcache;

struct cli_bcache_stats {
	uint64_t lookups, hits, fills, evictions, drops;
	size_t capacity; /* buckets */
};

/* The geometry tag of an index: images of another geometry never match. */
static inline uint64_t cli_bcache_gen(const struct pet_geom *g)
{
	return g->seed1 ^ (g->seed2 << 1) ^ (g->nbuckets * 0x9E3779B97F4A7C15ULL);
}

/* A cache of at most `bytes` (a power of two of 4-way sets of about 150
 * bytes per image; bytes at most 64 GiB); bytes < one set gives *out =
 * NULL, which every function below accepts as "disabled". */
int cli_bcache_new(struct cli_bcache **out, size_t bytes);
void cli_bcache_delete(struct cli_bcache **c);

/* Search the cached image of bucket b for key (tag: pet_loc.tag): 1 and
 * *ref if the image holds it, 0 if the image does not, -1 if no image of
 * bucket b is cached. */
int cli_bcache_find(struct cli_bcache *c, uint32_t uid, uint64_t gen,
		    uint64_t b, uint64_t key, uint8_t tag, uint32_t *ref);
/* Cache a VALIDATED image of bucket b (replaces an older one). */
void cli_bcache_put(struct cli_bcache *c, uint32_t uid, uint64_t gen,
		    uint64_t b, const void *img);
/* Forget the image of bucket b, if cached. */
void cli_bcache_drop(struct cli_bcache *c, uint32_t uid, uint64_t gen,
		     uint64_t b);
/* Buckets it can hold (0 when disabled). */
size_t cli_bcache_capacity(const struct cli_bcache *c);
void cli_bcache_get_stats(const struct cli_bcache *c,
			  struct cli_bcache_stats *out);

#endif
