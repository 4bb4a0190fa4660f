/*
 * slab_int.h - on-media layout and in-DRAM state of the slab store, shared
 * by slab_store.c (pool, directory, tables), slab_table.c (row operations)
 * and slab_recover.c (crash recovery). Not for other modules.
 *
 * Everything on media is little-endian, with 64-bit fields 8-byte aligned
 * (an aligned 8-byte store is failure-atomic on pmem and to a process
 * crash). Structures that are rewritten after creation carry a checksum;
 * the only field updated in place without one is an 8-byte counter.
 */
#ifndef RS_VALUE_SLAB_INT_H
#define RS_VALUE_SLAB_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "value/slab.h"

#define SLAB_MAGIC 0x313042414C535352ULL /* "RSSLAB01" */
#define SLAB_LAYOUT_VERSION 3 /* 2: checksums seeded by the table uid;
				  3: catalog records (layout 2 still opens) */
#define SLAB_LAYOUT_OLDEST 2
#define SLAB_SB_BYTES 4096
#define SLAB_DIR_OFF 4096
#define SLAB_DIRENT_BYTES 256
#define SLAB_DATA_OFF (2ULL << 20)
#define SLAB_ALIGN (2ULL << 20)
#define SLAB_PAGE 4096ULL
#define SLAB_META_BYTES 4096
#define SLAB_HWM_CHUNK 1024 /* rows by which the high-water mark grows */
#define SLAB_DIRENT_LIVE 0x4556494CU /* "LIVE" */
#define SLAB_META_MAGIC 0x4154454D424C5352ULL /* "RSLBMETA" */
#define SLAB_LOG_SEED 0x6C6F67726F7773ULL
#define SLAB_LOG_HDR 64
#define SLAB_DEFAULT_LOAD 0.85

#define SLAB_CAT_OFF (64ULL << 10)
#define SLAB_CAT_BYTES 1024

_Static_assert(SLAB_DIR_OFF + SLAB_MAX_TABLES * SLAB_DIRENT_BYTES <=
		       SLAB_CAT_OFF,
	       "directory fits before the catalog records");
_Static_assert(SLAB_CAT_OFF + SLAB_MAX_TABLES * SLAB_CAT_BYTES <=
		       SLAB_DATA_OFF,
	       "catalog records fit before the data");

/* Superblock, at pool offset 0. */
struct slab_super {
	uint64_t magic;
	uint32_t layout_version;
	uint32_t max_tables;
	uint64_t pool_bytes;
	uint64_t dir_off;
	uint64_t data_off;
	uint64_t align;
	uint64_t uuid[2];
	uint64_t checksum;   /* XXH3-64 of the fields above */
	uint64_t boot_count; /* not covered: one failure-atomic word */
};

/* Directory entry: valid iff its checksum matches and state is LIVE. */
struct slab_dirent {
	uint64_t checksum; /* XXH3-64 of bytes [8, 256) */
	uint32_t state;
	uint16_t table_id; /* == its directory slot */
	uint8_t dtype;
	uint8_t pad0;
	char name[64];
	uint32_t dim;
	uint32_t state_floats;
	uint64_t capacity;
	uint64_t ext_off, ext_len; /* pool offsets */
	uint64_t index_off;	   /* the rest: offsets inside the extent */
	uint64_t rows_off;
	uint64_t state_off;
	uint64_t log_off;
	uint32_t row_stride;
	uint32_t state_stride;
	uint32_t log_entry;
	uint32_t nstripes;
	uint64_t nbuckets;
	uint64_t seed1, seed2;
	uint64_t uid;
	/* the incarnation the table's catalog record is bound to: a grown
	 * table keeps its first one (slab_grow.c), so the switch of the
	 * directory entry carries the record along atomically; 0 (every
	 * table not grown, and pools written before): uid */
	uint64_t cat_uid;
	uint8_t reserved[56];
};
_Static_assert(sizeof(struct slab_dirent) == SLAB_DIRENT_BYTES, "dirent");

static inline uint64_t slab_dirent_cat_uid(const struct slab_dirent *e)
{
	return e->cat_uid ? e->cat_uid : e->uid;
}

/* Catalog record of directory slot i, at SLAB_CAT_OFF + i * 1 KiB: valid
 * iff len <= SLAB_CATALOG_MAX, uid is the slot's live entry's catalog uid
 * (slab_dirent_cat_uid) and the
 * checksum (XXH3-64 seeded by uid, of bytes [8, 24 + len)) matches. It is
 * persisted before the directory entry that makes the table exist. */
struct slab_catrec {
	uint64_t checksum;
	uint64_t uid;
	uint32_t len;
	uint32_t pad;
	uint8_t data[SLAB_CATALOG_MAX];
};
_Static_assert(sizeof(struct slab_catrec) <= SLAB_CAT_BYTES, "catrec");

/* Per-table meta block at the start of the extent. */
struct slab_tmeta {
	uint64_t magic;
	uint64_t uid; /* == dirent uid */
	uint64_t hwm; /* rows [0, hwm) may have been written; grows only */
};

/* Redo-log entry header; followed by the row image (row_stride bytes) and
 * the state image (state_floats * 4 bytes). One entry per row stripe. */
struct slab_log_hdr {
	uint64_t checksum; /* XXH3-64 (SLAB_LOG_SEED) of [8, log_entry) */
	uint64_t row;
	uint64_t seq;
};

struct slab_stripe {
	_Atomic uint8_t lock;
	uint8_t pad[63];
};

/* Rows changed since the last checkpoint of the table (slab_track_*, in
 * DRAM only: a restarted node has no tag, so no increment is relative to
 * anything it took before). */
struct slab_track {
	_Atomic uint64_t *dirty;	/* a bit per row slot */
	pthread_mutex_t lock;		/* the fields below */
	uint64_t *gone;			/* keys deleted, in order, duplicates */
	uint32_t ngone, gone_cap;
	bool overflow;			/* more than SLAB_TRACK_GONE_MAX */
	bool tagged;
	uint8_t tag[SLAB_TRACK_TAG_BYTES];
};

struct slab_table {
	struct slab_store *st;
	struct slab_dirent ent; /* DRAM copy of the directory entry */
	struct row_geom rg;
	struct pet_index *pet;
	uint8_t *ext;
	struct slab_tmeta *meta;
	uint8_t *index, *rows, *state, *log;
	uint32_t state_bytes;	/* state_floats * 4 */
	uint32_t row_words;	/* words of a row image that matter */
	struct slab_stripe *stripes;
	uint8_t *stage;		/* SLAB_NSTRIPES row images, DRAM */

	pthread_mutex_t alloc;	/* guards the allocator fields */
	uint32_t *free_rows;
	uint64_t nfree, free_cap;
	_Atomic uint64_t next;	/* rows [next, capacity) never used */
	uint64_t hwm;

	_Atomic uint64_t live, inserts, deletes, updates, read_retries;
	struct slab_recovery_stats rec;
	struct slab_track track;
	struct slab_ev *ev;	/* eviction / admission (slab_evict.c), or
				   NULL: none (the hooks below test it) */
};

/*
 * Power-failure tests only: a store opened with slab_store_open_hooked()
 * hands every flush of a file pool (the range slab_persist() was asked to
 * make durable; base is the pool mapping) to hook(ctx, ...) instead of
 * pmem_persist()/pmem_msync(), from the pool's creation or recovery on.
 * The hook decides what the media holds (tests/unit/test_powerfail.c).
 * Not called for DRAM pools or with SLAB_F_NOSYNC, so the flush-free paths
 * do not see it at all.
 */
typedef void (*slab_persist_hook_fn)(void *ctx, const uint8_t *base,
				     const void *addr, size_t len);
int slab_store_open_hooked(struct slab_store **out,
			   const struct slab_store_cfg *cfg,
			   slab_persist_hook_fn hook, void *ctx);

struct slab_store {
	uint8_t *base;
	size_t len;
	char *path;
	unsigned flags;
	bool file_backed, is_pmem, hugetlb;
	bool device;	      /* a device dax */
	bool dram_dirty;      /* DRAM: an extent was given up but not
				 released (madvise failed, or a hugetlb
				 pool, which keeps its pages), so creates
				 must clear */
	_Atomic int io_error; /* sticky errno of a failed msync */
	slab_persist_hook_fn persist_hook; /* tests only; NULL otherwise */
	void *persist_ctx;
	pthread_mutex_t lock; /* create/drop/get */
	struct slab_super *sb;
	struct slab_dirent *dir;
	uint8_t *cat;	      /* catalog records (layout 3) */
	struct slab_table *tables[SLAB_MAX_TABLES];
	/* growth (slab_grow.c): the extent of a table being built, and the
	 * tables a growth replaced, whose extents stay in use until
	 * slab_table_release(); both count as used by find_extent() */
	uint64_t grow_off, grow_len;
	struct slab_table *retired[SLAB_MAX_TABLES];
};

/* The growth record: a directory entry (own checksum, state LIVE) in the
 * superblock page, written before a growing table's directory slot is
 * rewritten and cleared after; see slab_grow.c. */
#define SLAB_GROW_REC_OFF 2048
_Static_assert(sizeof(struct slab_super) <= SLAB_GROW_REC_OFF &&
		       SLAB_GROW_REC_OFF + SLAB_DIRENT_BYTES <= SLAB_SB_BYTES,
	       "growth record fits in the superblock page");

/* Flush [addr, addr + len) to persistence (no-op for DRAM / NOSYNC). */
void slab_persist(struct slab_store *st, const void *addr, size_t len);
/* pet_persist_fn adapter (ctx = the store). */
void slab_persist_cb(void *ctx, const void *addr, size_t len);
/* -EIO with a message if a flush failed since the pool was opened. */
int slab_io_check(struct slab_store *st);

static inline uint64_t *slab_row_words(const struct slab_table *t,
				       uint32_t r)
{
	return (uint64_t *)(t->rows + (uint64_t)r * t->rg.stride);
}

static inline float *slab_state_of(const struct slab_table *t, uint32_t r)
{
	return (float *)(t->state + (uint64_t)r * t->ent.state_stride);
}

static inline uint8_t *slab_log_entry(const struct slab_table *t, unsigned s)
{
	return t->log + (uint64_t)s * t->ent.log_entry;
}

static inline unsigned slab_stripe_of(uint32_t r)
{
	return r & (SLAB_NSTRIPES - 1);
}

static inline uint64_t *slab_stage(const struct slab_table *t, unsigned s)
{
	return (uint64_t *)(t->stage + (uint64_t)s * t->rg.stride);
}

/* Mark row slot r changed (a write, under its row lock): one load, and
 * an atomic OR only the first time since the last slab_track_reset. */
static inline void slab_track_row(struct slab_table *t, uint32_t r)
{
	_Atomic uint64_t *w = &t->track.dirty[r >> 6];
	uint64_t bit = 1ull << (r & 63);

	if (!(atomic_load_explicit(w, memory_order_relaxed) & bit))
		atomic_fetch_or_explicit(w, bit, memory_order_relaxed);
}

/* slab_track.c */
int slab_track_init(struct slab_table *t);
void slab_track_fini(struct slab_table *t);
void slab_track_deleted_key(struct slab_table *t, uint64_t key);

/* slab_evict.c: hooks, called only when t->ev is set */
struct slab_ev;
void slab_ev_touch(struct slab_table *t, uint32_t r);	/* a read */
void slab_ev_wrote(struct slab_table *t, uint32_t r, bool fresh); /* a
						   write; fresh: a new row */
int slab_ev_reserve(struct slab_table *t);  /* before a new row: 0 or
					       RS_E_FULL (may evict) */
void slab_ev_release(struct slab_table *t); /* a row gone / not made */
void slab_ev_fini(struct slab_table *t);

/* slab_table.c */
/* the key of slot r if it holds a LIVE row (index not consulted) */
bool slab_slot_live_key(struct slab_table *t, uint32_t r, uint64_t *key);
/* the key of slot r if it holds a LIVE row the index points at */
bool slab_slot_key(struct slab_table *t, uint32_t r, uint64_t *key);
int slab_table_init(struct slab_table *t);	/* DRAM side state */
void slab_table_fini(struct slab_table *t);
void slab_row_prepare(struct slab_table *t, uint32_t r, uint64_t *img);
void slab_row_store(struct slab_table *t, uint32_t r, const uint64_t *img);
void slab_row_tombstone(struct slab_table *t, uint32_t r);
void slab_free_push(struct slab_table *t, uint32_t r);
/* Room for n more slots in the free list, so that the next n pushes
 * cannot fail (a push that cannot grow the list drops the slot until the
 * next recovery): 0 or -ENOMEM. Recovery reserves its rows first. */
int slab_free_reserve(struct slab_table *t, uint64_t n);

/* White-box tests only (NULL otherwise): called by slab_insert() with the
 * row lock held, after the new row was published (not yet LIVE) and before
 * its index slot is inserted. */
extern void (*slab_test_insert_hook)(struct slab_table *t, uint32_t row,
				     uint64_t key);

/* slab_store.c, for slab_grow.c (the caller holds st->lock where a
 * function reads the directory or the table array) */
int slab_layout(const struct slab_table_cfg *cfg, bool file_backed,
		struct slab_dirent *e);
uint64_t slab_extent_find(const struct slab_store *st, uint64_t need,
			  uint64_t *largest, uint64_t *total);
int slab_extent_format(struct slab_store *st, const struct slab_dirent *e);
int slab_attach(struct slab_store *st, const struct slab_dirent *e,
		bool fresh, struct slab_table **out);
void slab_detach(struct slab_table *t);	/* frees the DRAM handle */
/* A DRAM extent given up: its pages back to the system, or kept and the
 * pool marked dram_dirty (slab_store.c). st->lock held. */
void slab_dram_release(struct slab_store *st, void *addr, uint64_t len);
int slab_refuse_full(const struct slab_store *st, const struct slab_dirent *e,
		     uint64_t largest, uint64_t total);
uint64_t slab_dirent_checksum(const struct slab_dirent *e);
uint64_t slab_rand64(void);

/* slab_grow.c: at open, before the tables are attached: finish a growth
 * whose record is valid (the new entry goes into its slot). */
void slab_grow_recover(struct slab_store *st);
/* Adds the extents of a growth in progress and of retired tables (up to
 * SLAB_MAX_TABLES + 1) to the sorted list of n extents; the new number. */
int slab_grow_extents(const struct slab_store *st, uint64_t off[],
		      uint64_t len[], int n);

/* slab_recover.c: exclusive; rebuilds allocator and counters. */
int slab_recover(struct slab_table *t);
uint64_t slab_log_checksum(const struct slab_table *t, const uint8_t *entry);

#endif
