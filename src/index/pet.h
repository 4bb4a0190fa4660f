/*
 * pet.h - the PET-hash index, server side (pet_).
 *
 * A bucketized two-choice cuckoo hash from 64-bit keys to 32-bit refs (row
 * indices), laid out in ONE caller-provided byte range that one-sided RDMA
 * readers READ directly. Layout and reader rules: pet_format.h; design and
 * correctness: docs/storage.md.
 *
 * Ownership: the caller owns the region (DRAM or a pmem mapping) and must
 * keep it mapped until pet_close(). The index keeps DRAM-only side state:
 * one lock byte per bucket, BFS scratch and counters.
 *
 * Concurrency: pet_lookup/pet_insert/pet_remove are safe from any number
 * of threads at once. Lookups take no lock (per-bucket seqlock, pet_sync.h).
 * Writers lock the two buckets they touch, lower index first; cuckoo
 * displacement is serialized by one mutex per index and moves one key at a
 * time under the locks of its source and destination, adding it to the
 * destination before removing it from the source, so a key is always in at
 * least one of its buckets. pet_repair/pet_verify need exclusive use.
 *
 * Durability: every bucket write is followed by persist(ctx, bucket, 128)
 * (NULL persist: DRAM, nothing to do). Insert and remove return only after
 * the bucket they changed was persisted; a move persists the destination
 * before it touches the source.
 *
 * Statuses: RS_E_EXISTS and RS_E_NOTFOUND are per-key outcomes and set no
 * rs_errormsg(); RS_E_FULL sets a message.
 */
#ifndef RS_INDEX_PET_H
#define RS_INDEX_PET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "index/pet_format.h"

struct pet_index;

typedef void (*pet_persist_fn)(void *ctx, const void *addr, size_t len);

/* Recovery filter: keep slot (key, ref)? Called once per occupied slot. */
typedef bool (*pet_keep_fn)(void *arg, uint64_t key, uint32_t ref);

struct pet_stats {
	uint64_t nbuckets;
	uint64_t slots;		 /* nbuckets * PET_SLOTS */
	uint64_t used;		 /* occupied slots = keys */
	double fill;		 /* used / slots */
	uint64_t displacements;	 /* keys moved by cuckoo paths */
	uint64_t slow_inserts;	 /* inserts that needed a path */
	uint64_t full_refusals;	 /* RS_E_FULL returned */
	uint64_t lookup_retries; /* misses re-checked because of a move */
};

struct pet_repair_stats {
	uint64_t torn_buckets; /* checksum/version failed, rewritten */
	uint64_t dropped;      /* slots removed (bad tag, place, or keep()) */
	uint64_t kept;
};

/*
 * Geometry for `keys` keys at fill factor `load` (0 < load <= 1):
 * nbuckets = ceil(keys / (PET_SLOTS * load)), at least 2. seed1 != seed2.
 * g->incarnation is 0; the caller sets it before pet_format().
 * 0 or RS_E_INVAL.
 */
int pet_geom_for(uint64_t keys, double load, uint64_t seed1, uint64_t seed2,
		 struct pet_geom *g);

/* Format region [region, region + len) as an empty index of geometry g
 * (len >= pet_region_bytes(g->nbuckets)); persists it. 0 or RS_E_INVAL. */
int pet_format(void *region, size_t len, const struct pet_geom *g,
	       pet_persist_fn persist, void *ctx);

/* Attach to a formatted region. *out is owned by the caller (pet_close).
 * 0, RS_E_CORRUPT (bad header), RS_E_INVAL, -ENOMEM. */
int pet_open(struct pet_index **out, void *region, size_t len,
	     pet_persist_fn persist, void *ctx);
/* Detach (the region is untouched). Accepts NULL; sets *p = NULL. */
void pet_close(struct pet_index **p);

/* 0 and *ref, or RS_E_NOTFOUND. Lock-free; linearizable. */
int pet_lookup(struct pet_index *p, uint64_t key, uint32_t *ref);

/* 0, RS_E_EXISTS (key present: nothing changed), RS_E_FULL (no slot within
 * the displacement search: nothing changed). */
int pet_insert(struct pet_index *p, uint64_t key, uint32_t ref);

/* 0 and *ref (the removed ref; ref may be NULL), or RS_E_NOTFOUND. */
int pet_remove(struct pet_index *p, uint64_t key, uint32_t *ref);

/*
 * Recovery (exclusive use): for every bucket, rewrite it if its version is
 * odd or its checksum fails; drop each occupied slot whose tag or bucket do
 * not match its key, or for which keep(arg, key, ref) is false; recount.
 * The surviving slots of a torn bucket are those keep() vouches for.
 */
void pet_repair(struct pet_index *p, pet_keep_fn keep, void *arg,
		struct pet_repair_stats *st);

/* Exclusive use: 0 if every bucket validates and every key sits in one of
 * its candidate buckets exactly once; else RS_E_CORRUPT with a message.
 * *keys (may be NULL) gets the number of keys. */
int pet_verify(struct pet_index *p, uint64_t *keys);

void pet_get_stats(const struct pet_index *p, struct pet_stats *st);
const struct pet_geom *pet_geometry(const struct pet_index *p);
/* The region (base and byte length) to register for REMOTE_READ. */
void *pet_region(const struct pet_index *p, size_t *len);

#endif
