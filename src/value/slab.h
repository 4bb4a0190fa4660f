/*
 * slab.h - the value store of a memory node: a pool (DRAM or a file through
 * libpmem) holding a directory of tables, each table a PET-hash index plus
 * a slab of fixed-size rows plus optimizer state (slab_).
 *
 * Layout, protocols and why they are correct: docs/storage.md. The bytes
 * one-sided readers see are described in index/pet_format.h and
 * value/row_format.h; both regions of a table are plain byte ranges to
 * register for REMOTE_READ (slab_table_regions()).
 *
 * Pool (one mapping, one backing):
 *   0        superblock (magic, layout version, size, checksum, boot count)
 *   4 KiB    table directory: SLAB_MAX_TABLES entries of 256 B, each with
 *            its own checksum (name, geometry, seeds, extent)
 *   64 KiB   catalog records: one of 1 KiB per directory slot, the owner's
 *            opaque description of the table (the node's table spec),
 *            checksummed and bound to the table's incarnation (layout 3)
 *   2 MiB    table extents, 2 MiB aligned, first fit:
 *              meta (4 KiB: high-water mark of used rows)
 *              index region   \  contiguous: one READable range
 *              rows region    /
 *              optimizer state (never READ by clients)
 *              redo log (file-backed pools only): one entry per row lock
 *
 * Ownership: a slab_store owns its mapping and its tables. Table handles
 * stay valid until slab_table_drop() of that table or slab_store_close().
 * Row pointers and region pointers stay valid as long as the table.
 *
 * Thread safety:
 *   - slab_lookup, slab_insert, slab_get_or_insert, slab_delete, slab_put,
 *     slab_read, slab_read_row, slab_write_*, slab_iterate and
 *     slab_table_stats may run concurrently from any threads on one table.
 *   - Writers of one row serialize on a striped row lock (256 per table):
 *     a thread holds at most one row lock at a time (one open slab_wr).
 *   - slab_table_create/get/drop and slab_store_info serialize on the store
 *     lock. Dropping a table, or closing the store, requires that no other
 *     thread uses that table any more.
 *   - Lock-free readers (server slab_read, client NICs) never block writers.
 *
 * Durability (file-backed pools; DRAM pools have none): every function
 * that changes a row or the index returns only after the change is
 * persisted (pmem_persist on real pmem, else pmem_msync), so a success
 * return is the acknowledgement: after a crash, slab_store_open() on the
 * same file finds every acknowledged insert, update and delete, and no
 * half-written row (recovery: redo-log replay, index repair, row scan).
 * SLAB_F_NOSYNC skips the flushes: still safe against a process crash
 * (SIGKILL), not against power loss.
 *
 * Errors: the convention of recstore/error.h. Per-key outcomes
 * (RS_E_NOTFOUND, RS_E_EXISTS) set no message; RS_E_FULL and failures do.
 */
#ifndef RS_VALUE_SLAB_H
#define RS_VALUE_SLAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "index/pet.h"
#include "value/row_format.h"

#define SLAB_MAX_TABLES 64
#define SLAB_NAME_MAX 63
#define SLAB_NSTRIPES 256

struct slab_store;
struct slab_table;

/* slab_store_cfg.flags */
#define SLAB_F_HUGEPAGES 0x1u /* DRAM: try MAP_HUGETLB, else THP advice */
#define SLAB_F_NOSYNC 0x2u    /* file: no flushes (process-crash safe only) */
#define SLAB_F_SPARSE 0x4u    /* file: create without preallocating blocks */
#define SLAB_F_FORMAT 0x8u    /* format a file or device that holds no
				 valid pool even if it is not blank */

/* Bytes of a table's catalog record (slab_table_cfg.catalog). */
#define SLAB_CATALOG_MAX 1000

struct slab_store_cfg {
	const char *path; /* NULL: DRAM pool; else the pool file or device */
	uint64_t size;	  /* bytes, to create; 0 opens an existing file */
	unsigned flags;	  /* SLAB_F_* */
};

/*
 * Open a pool. DRAM (path NULL): a fresh pool of cfg->size bytes. File: if
 * path exists it is opened and every table recovered (cfg->size must be 0
 * or the file's size); otherwise it is created with cfg->size bytes.
 * Device dax (path a character device): the pool is the whole device;
 * cfg->size, if not 0, must not exceed it.
 * An existing file or device without a valid superblock is formatted if
 * its first 2 MiB are all zero (blank), or if SLAB_F_FORMAT is set; any
 * other content is refused (RS_E_CORRUPT), never overwritten.
 * 0, RS_E_INVAL, RS_E_CORRUPT (not a pool, or damaged beyond recovery),
 * -errno. *out is owned by the caller (slab_store_close).
 */
int slab_store_open(struct slab_store **out, const struct slab_store_cfg *cfg);
/* Unmap and free everything (data stays in the file). Accepts NULL; sets
 * *st = NULL. */
void slab_store_close(struct slab_store **st);

struct slab_store_info {
	void *base;	     /* the whole pool mapping ... */
	size_t len;	     /* ... and its length */
	bool file_backed;
	bool is_pmem;	     /* flushes are pmem_persist (else msync) */
	bool hugetlb;	     /* DRAM pool on MAP_HUGETLB pages */
	uint64_t boot_count; /* file: times the pool was opened */
	unsigned layout;     /* pool layout version (2: no catalog records) */
	bool device;	     /* a device dax (the whole device is the pool) */
	uint64_t free_bytes; /* largest extent a new table could get */
	uint64_t free_total; /* all the gaps between tables together */
	unsigned ntables;
};
void slab_store_info(struct slab_store *st, struct slab_store_info *info);

struct slab_table_cfg {
	const char *name;      /* 1..SLAB_NAME_MAX bytes, unique */
	uint32_t dim;	       /* elements per row, 1..ROW_MAX_DIM */
	unsigned dtype;	       /* enum row_dtype; 0 means ROW_F32 */
	uint64_t capacity;     /* rows, 1 .. 2^32 - 2 */
	uint32_t state_floats; /* optimizer state slots per row, 0: none */
	double index_load;     /* index fill at capacity; 0: 0.85 */
	const void *catalog;   /* catalog record: opaque bytes kept with the */
	uint32_t catalog_len;  /* table (0..SLAB_CATALOG_MAX; 0: none) */
};

/* Bytes of pool a table of cfg takes (file_backed adds the redo log);
 * 0 if cfg is invalid. Never overflows: every product is checked. */
uint64_t slab_table_footprint(const struct slab_table_cfg *cfg,
			      bool file_backed);
/* The largest capacity in [1, cfg->capacity] whose footprint fits in
 * `bytes` (cfg's other fields as given), or 0 if not even one row fits. */
uint64_t slab_table_fit(const struct slab_table_cfg *cfg, bool file_backed,
			uint64_t bytes);

/* Create a table; *out (may be NULL) gets its handle (owned by the store).
 * 0, RS_E_INVAL, RS_E_EXISTS (name taken), RS_E_FULL (no directory slot or
 * pool space: the message says how many bytes the table needs, of which
 * rows, optimizer state and index, and how many are free). Persisted
 * before it returns. The space of a dropped table is free again at once
 * (extents are placed first fit between the live tables). */
int slab_table_create(struct slab_store *st, const struct slab_table_cfg *cfg,
		      struct slab_table **out);
/* The table's catalog record: its length (copied into buf, which holds
 * cap bytes, at most SLAB_CATALOG_MAX needed), or RS_E_NOTFOUND if the
 * table has no valid record (created without one, on a layout-2 pool, or
 * damaged); RS_E_INVAL if cap is too small. */
int slab_table_catalog(struct slab_store *st, struct slab_table *t, void *buf,
		       size_t cap);
/* Give a table that has no valid catalog record one (migration of specs
 * kept elsewhere); persisted before it returns. 0, RS_E_EXISTS (it has one:
 * records are written once per table, never replaced in place), RS_E_INVAL
 * (len), -errno (flush). */
int slab_table_set_catalog(struct slab_store *st, struct slab_table *t,
			   const void *rec, uint32_t len);
/* The table of that name or id, or NULL. */
struct slab_table *slab_table_get(struct slab_store *st, const char *name);
struct slab_table *slab_table_by_id(struct slab_store *st, unsigned id);
/* Drop a table: its directory entry is cleared (persisted) and its handle
 * freed. 0 or RS_E_NOTFOUND. */
int slab_table_drop(struct slab_store *st, const char *name);

const char *slab_table_name(const struct slab_table *t);
unsigned slab_table_id(const struct slab_table *t);
uint32_t slab_table_dim(const struct slab_table *t);
uint32_t slab_table_state_floats(const struct slab_table *t);

/* What a remote reader needs: index geometry, row geometry, and where the
 * two regions sit in the pool (offsets from the pool base). */
struct slab_table_geom {
	struct pet_geom index;
	struct row_geom rows;
	uint64_t index_off, index_len;
	uint64_t rows_off, rows_len;
	uint64_t uid; /* random id of this table incarnation, never 0; also
			 index.incarnation and rows.incarnation, the seed
			 every row and bucket checksum mixes in */
};
void slab_table_geom(const struct slab_table *t, struct slab_table_geom *g);

struct slab_region {
	void *addr;
	size_t len;
};
/* The index region, the rows region, and `readable`, the contiguous range
 * covering both (one MR per table). Optimizer state is in none of them. */
void slab_table_regions(const struct slab_table *t, struct slab_region *index,
			struct slab_region *rows, struct slab_region *readable);

/* ---- keys and rows ---- */

/* 0 and *row (its index; address: slab_row_ptr), or RS_E_NOTFOUND. */
int slab_lookup(struct slab_table *t, uint64_t key, uint32_t *row);
/* Address of row slot `row` (header first). Read it only through
 * slab_read_row() or while holding a write (slab_wr) on it. */
void *slab_row_ptr(const struct slab_table *t, uint32_t row);

/*
 * Insert key with payload init[dim] (NULL: zeros) and optimizer state
 * state_init[state_floats] (NULL: zeros). 0 and *row (may be NULL);
 * RS_E_EXISTS (nothing changed); RS_E_FULL (no free row, or the index has
 * no slot: nothing changed); -EIO if persisting failed.
 */
int slab_insert(struct slab_table *t, uint64_t key, const float *init,
		const float *state_init, uint32_t *row);
/* slab_insert, or find the existing row: *created tells which. */
int slab_get_or_insert(struct slab_table *t, uint64_t key, const float *init,
		       const float *state_init, uint32_t *row, bool *created);
/* Insert val[dim] (state zeros), or overwrite the payload of an existing
 * key (state kept). *created (may be NULL) tells which. */
int slab_put(struct slab_table *t, uint64_t key, const float *val,
	     bool *created);
/* Remove key: index slot cleared, then the row becomes a tombstone and its
 * slot is reused later. 0 or RS_E_NOTFOUND. */
int slab_delete(struct slab_table *t, uint64_t key);

/* Consistent copy of key's payload as fp32 (out[dim]); *version (may be
 * NULL) gets the row version. 0 or RS_E_NOTFOUND. Lock-free. */
int slab_read(struct slab_table *t, uint64_t key, float *out,
	      uint64_t *version);
/* Consistent copy of the raw row image of slot `row` (stride bytes) into
 * buf, as a reader would get it; validate it with row_validate(). */
void slab_read_row(struct slab_table *t, uint32_t row, void *buf);
/* Consistent copy of the optimizer state of key (state_floats floats). */
int slab_read_state(struct slab_table *t, uint64_t key, float *out);
/* What a backup needs of key (a replication or copy record): its payload
 * as fp32 (out[dim]) followed by its optimizer state (out[dim ..
 * dim + state_floats)), under the row's lock, with one index look-up.
 * 0 or RS_E_NOTFOUND (out untouched). Not an access for eviction. */
int slab_read_record(struct slab_table *t, uint64_t key, float *out);

/*
 * In-place update (the optimizer path). The caller owns val[dim] and
 * state[state_floats] (state NULL if state_floats is 0):
 *   struct slab_wr w = {.val = vbuf, .state = sbuf};
 *   rc = slab_write_begin(t, key, &w);  // locks the row, fills val/state
 *   ...modify w.val / w.state...
 *   rc = slab_write_commit(&w);         // publishes, persists, unlocks
 * or slab_write_abort(&w) to unlock without change. Readers never see the
 * row odd except for the short copy inside commit. begin: 0 or
 * RS_E_NOTFOUND; commit: 0 or -EIO. One open slab_wr per thread.
 */
struct slab_wr {
	float *val;	  /* caller buffer: dim floats */
	float *state;	  /* caller buffer: state_floats floats, or NULL */
	uint64_t version; /* out: row version at begin */
	uint32_t row;	  /* out: row slot */
	/* out of slab_write_commit(): the version and checksum the row was
	 * published with (what a one-sided reader of the slot sees until
	 * the next write) */
	uint64_t new_version, new_csum;
	/* private */
	struct slab_table *t;
	uint64_t key;
};
int slab_write_begin(struct slab_table *t, uint64_t key, struct slab_wr *w);
int slab_write_commit(struct slab_wr *w);
void slab_write_abort(struct slab_wr *w);

/*
 * Call fn(arg, key, row) for the keys of the table, by row slot order;
 * stops early when fn returns non-zero and returns that value. Lock-free
 * and not a snapshot: a key present (and not deleted) for the whole walk is
 * reported exactly once; keys inserted or deleted meanwhile may or may not
 * be. fn may call any slab function except slab_table_drop.
 */
typedef int (*slab_iter_fn)(void *arg, uint64_t key, uint32_t row);
int slab_iterate(struct slab_table *t, slab_iter_fn fn, void *arg);
/* The same from row slot *cursor on; *cursor becomes the slot after the
 * one fn stopped at, or the end of the walk (a walk resumed from there
 * goes on where this one stopped). */
int slab_iterate_from(struct slab_table *t, uint64_t *cursor, slab_iter_fn fn,
		      void *arg);

/*
 * Change tracking, for incremental checkpoints (docs/checkpoint.md): every
 * write of a row (insert, update, overwrite) sets the bit of its slot, a
 * delete records the key (at most SLAB_TRACK_GONE_MAX of them; past that
 * the tracking is incomplete and says so). slab_track_reset clears both
 * and tags them with the id of the checkpoint that cleared them. DRAM only:
 * a reopened table is untagged. Call reset and the walks while no write
 * runs on the table (a checkpoint's freeze).
 */
#define SLAB_TRACK_TAG_BYTES 16
#define SLAB_TRACK_GONE_MAX 65536u

void slab_track_reset(struct slab_table *t,
		      const uint8_t tag[SLAB_TRACK_TAG_BYTES]);
/* 0 when tracking is complete and tagged with tag; RS_E_STALE with a
 * message saying why not (untagged, another tag, too many deletions). */
int slab_track_check(struct slab_table *t,
		     const uint8_t tag[SLAB_TRACK_TAG_BYTES]);
/* fn(arg, key, row) for every live key whose slot was written since the
 * reset, by slot order (stops at fn's non-zero return). */
int slab_track_changed(struct slab_table *t, slab_iter_fn fn, void *arg);
/* fn(arg, key, 0) for every key deleted since the reset and absent now,
 * ascending, each once (a key deleted and inserted again is a change). */
int slab_track_gone(struct slab_table *t, slab_iter_fn fn, void *arg);

/*
 * ---- growth (slab_grow.c; docs/storage.md, "Growth") ----
 *
 * A table grows into a new extent with a new incarnation (uid): the caller
 * keeps every writer of t away from slab_grow_begin() to
 * slab_table_retire() (readers may go on until the retire):
 *   slab_grow_begin   builds the grown copy *out (capacity rows, same
 *                     slots, new index; not visible yet). RS_E_FULL with
 *                     the bytes needed and free when no extent fits,
 *                     RS_E_INVAL when capacity is not larger, RS_E_BUSY
 *                     when another growth of the pool is in progress.
 *   slab_grow_commit  switches the directory to it, crash-safe (a crash
 *                     leaves the old or the new table); from then on
 *                     slab_table_get/by_id give the new handle and t is
 *                     "retired" (still readable, its extent still used).
 *   slab_grow_abort   instead of commit: forget the copy.
 *   slab_table_retire makes every bucket and row of t fail validation for
 *                     ever (one-sided readers on the old incarnation fall
 *                     back to the RPC); no server thread may read t after.
 *   slab_table_release frees t and its extent.
 * slab_table_grow does all of it for a table nobody else uses.
 */
int slab_grow_begin(struct slab_store *st, struct slab_table *t,
		    uint64_t capacity, double index_load,
		    struct slab_table **out);
int slab_grow_commit(struct slab_store *st, struct slab_table *t,
		     struct slab_table *nt);
void slab_grow_abort(struct slab_store *st, struct slab_table *nt);
void slab_table_retire(struct slab_table *t);
void slab_table_release(struct slab_store *st, struct slab_table *t);
int slab_table_grow(struct slab_store *st, const char *name,
		    uint64_t capacity, double index_load,
		    struct slab_table **out);
uint64_t slab_table_capacity(const struct slab_table *t);
uint64_t slab_table_live(const struct slab_table *t); /* keys, relaxed */
/* White-box tests only: called at the cut points of a growth (0: copy
 * started, 1: new extent persisted, 2: record persisted, 3: directory slot
 * written, 4: done). */
extern void (*slab_grow_test_hook)(int point);

struct slab_recovery_stats {
	uint64_t log_replayed;	  /* rows (and state) redone from the log */
	uint64_t rows_scanned;	  /* row slots below the high-water mark */
	uint64_t rows_live;	  /* referenced by the index and valid */
	uint64_t rows_reclaimed;  /* rewritten as tombstones (unreferenced
				     LIVE rows: unacknowledged inserts) */
	uint64_t rows_torn;	  /* failing their checksum (among reclaimed) */
	struct pet_repair_stats index;
};

struct slab_table_stats {
	uint64_t capacity;
	uint64_t live;	   /* keys */
	uint64_t hwm;	   /* row slots ever used */
	uint64_t free_rows; /* reusable slots below hwm */
	uint64_t inserts, deletes, updates;
	uint64_t read_retries; /* server-side reads that met a writer */
	struct pet_stats index;
	struct slab_recovery_stats recovery; /* of the last open */
};
void slab_table_stats(struct slab_table *t, struct slab_table_stats *st);

#endif
