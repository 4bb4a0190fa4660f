/*
 * slab_evict.h - optional per-table eviction and admission (slab_ev_):
 * a cap on live rows with a victim policy (sampled LRU or decaying LFU), a
 * TTL on the last write, and admission after k sightings of a key.
 * Design, guarantees and limits: docs/eviction.md.
 *
 * Access information lives in node DRAM (one 64-bit word per row slot,
 * plus one 32-bit word per slot when a TTL is set), never in the READable
 * rows: one-sided readers are unchanged. It is fed by what the node sees:
 * inserts, in-place writes (UPDATE, PUT, LOAD) and server-side reads (RPC
 * GET / GET_OR_INIT). An eviction is a normal delete (index slot cleared,
 * row tombstoned, change tracking records the key), counted by cause.
 *
 * A table without slab_ev_attach() behaves exactly as before: each hook
 * in slab_table.c is one NULL test.
 *
 * Thread safety: slab_ev_attach() before the table is shared (no other
 * thread may use it); everything else from any thread.
 */
#ifndef RS_VALUE_SLAB_EVICT_H
#define RS_VALUE_SLAB_EVICT_H

#include <stdbool.h>
#include <stdint.h>

#include "value/slab.h"

enum slab_ev_policy {
	SLAB_EV_NONE = 0, /* no cap: a full table refuses (RS_E_FULL) */
	SLAB_EV_LRU = 1,  /* sampled LRU on a logical clock of accesses */
	SLAB_EV_LFU = 2,  /* sampled LFU, counts halved every decay period */
	SLAB_EV_POLICY_COUNT
};

#define SLAB_EV_ADMIT_MAX 255u		  /* admission k: 0..255 */
#define SLAB_EV_TTL_MAX (3650u * 86400u) /* ttl seconds: 10 years */
#define SLAB_EV_SAMPLE_DEFAULT 16u
#define SLAB_EV_SAMPLE_MAX 64u

struct slab_ev_cfg {
	unsigned policy;   /* enum slab_ev_policy */
	uint64_t max_rows; /* cap on live rows, 1..capacity; 0: capacity */
	uint32_t ttl_s;	   /* evict rows not written for ttl_s s; 0: none */
	uint32_t admit_k;  /* a key gets a row at its k-th sighting; 0, 1:
			      at the first */
	unsigned sample;   /* victim candidates per eviction; 0: default */
};

/* 0 if cfg makes sense for a table of `capacity` rows (a policy if a cap,
 * a cap within the capacity, ttl, k and sample in range), else RS_E_INVAL.
 * The values are those of the wire (common/proto.h, whose checks name the
 * field); a node checks specs there first. */
int slab_ev_cfg_validate(const struct slab_ev_cfg *cfg, uint64_t capacity);
/* Anything to do for cfg (a policy, a TTL or admission)? */
bool slab_ev_cfg_active(const struct slab_ev_cfg *cfg);

/* Give t eviction / admission state (DRAM, released with the table).
 * The live rows already there count against the cap and get the clock's
 * current time. 0, RS_E_INVAL, -ENOMEM. Before t is shared. */
int slab_ev_attach(struct slab_table *t, const struct slab_ev_cfg *cfg);
bool slab_ev_attached(const struct slab_table *t);

/*
 * Admission: one sighting of key (absent from the table). 1 if the key
 * may get a row now (its k-th sighting, or no admission set), 0 if not
 * yet. Sightings are counted in a count-min sketch (4 probes of 8-bit
 * counters, conservative update), halved every 8 x width sightings.
 */
int slab_ev_admit(struct slab_table *t, uint64_t key);

/* The table's coarse clock for TTLs: seconds since slab_ev_attach()
 * (CLOCK_MONOTONIC). slab_ev_tick() reads the clock into it; a test sets
 * it with slab_ev_set_now(), after which ticks leave it alone. */
void slab_ev_tick(struct slab_table *t);
void slab_ev_set_now(struct slab_table *t, uint32_t now_s);

/* TTL sweep: visit up to `budget` row slots from where the last sweep
 * stopped (wrapping), evicting rows whose last write is more than ttl_s
 * clock seconds old (so at least ttl_s and less than ttl_s + 1 seconds
 * of real time, plus the time the sweep takes to come by). Returns the
 * number evicted. Serialised per table (a sweep that finds another
 * running returns 0 at once). Rate: the caller's budget. With a sink set
 * on the thread, only rows whose key the sink's accept() takes go (a
 * cluster member expires only keys it is the primary of), and the sweep
 * stops early once the sink is full (it never overflows). */
uint64_t slab_ev_sweep(struct slab_table *t, uint64_t budget);
/* Count n TTL evictions made under a sink with defer_ttl (below). */
void slab_ev_count_ttl(struct slab_table *t, uint64_t n);

/*
 * Evicted-key sink: while set on a thread, every eviction that thread
 * makes appends the victim's key (so a primary can ship the deletion to
 * its backups). When full, further keys set `overflow`.
 */
struct slab_ev_sink {
	uint64_t *keys;
	uint32_t n, cap;
	bool overflow;
	/* optional: only keys accept() says yes to may be victims of this
	 * thread's inserts (a primary evicts only keys it is primary of) */
	bool (*accept)(void *arg, uint64_t key);
	void *arg;
	/* TTL evictions are not counted when made but by the caller
	 * (slab_ev_count_ttl), once its backups applied them */
	bool defer_ttl;
};
void slab_ev_sink_set(struct slab_ev_sink *s); /* NULL: none */

/* While on, inserts by this thread never evict: they may exceed the cap
 * (up to the capacity). For applying a primary's records on a backup and
 * for restores, where the source decided the evictions. */
void slab_ev_replica_mode(bool on);

struct slab_ev_stats {
	unsigned policy;
	uint64_t max_rows, ttl_s, admit_k;
	uint64_t used;		 /* rows counted against the cap */
	uint64_t evicted_capacity; /* victims of the cap (policy order) */
	uint64_t evicted_ttl;	 /* rows whose TTL ran out */
	uint64_t admitted;	 /* sightings that let a key in (k > 1) */
	uint64_t not_admitted;	 /* sightings below k */
	uint64_t over_cap;	 /* replica-mode inserts past the cap */
	uint64_t decay_period;	 /* LFU: accesses between halvings */
};
void slab_ev_stats(struct slab_table *t, struct slab_ev_stats *st);

#endif
