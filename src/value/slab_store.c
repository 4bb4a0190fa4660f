/*
 * slab_store.c - the pool: backing memory, superblock, table directory and
 * table extents (layout in slab.h and slab_int.h; docs/storage.md).
 *
 * Backing. DRAM: an anonymous private mapping, on MAP_HUGETLB pages when
 * SLAB_F_HUGEPAGES is set and the kernel has them, else normal pages with
 * MADV_HUGEPAGE advice. File: pmem_map_file(); pmem_is_pmem() decides once
 * whether flushes are pmem_persist() (CPU cache flush + fence, real pmem /
 * DAX) or pmem_msync() (page cache), see slab_persist(). Power-failure
 * tests open a pool with a persist hook (slab_store_open_hooked) that
 * receives every flush instead: the media is then theirs to model.
 *
 * Crash consistency of the pool structure:
 *  - creating a pool: directory zeroed and persisted, then the superblock
 *    written and persisted; a pool without a valid superblock is refused;
 *  - creating a table: its extent is formatted (meta, empty index, zeroed
 *    redo log) and its catalog record (bound to the new uid, own checksum)
 *    written, both persisted, then its directory entry (own checksum) is
 *    written and persisted; a torn entry fails its checksum, so the table
 *    either exists completely, record included, or not at all (a record
 *    whose entry never made it names a uid no live entry has: ignored);
 *  - dropping a table: the entry's checksum word is zeroed (one failure-
 *    atomic store) and persisted first: from then on the entry is invalid;
 *    the record's checksum is cleared after that (hygiene only).
 * A catalog record is written once per table incarnation and never
 * replaced in place (a torn rewrite would lose the old one).
 *
 * Formatting: a new file; or an existing file or device dax without a
 * valid superblock whose first 2 MiB are blank (all zero), or any such
 * one with SLAB_F_FORMAT. Anything else is refused, never overwritten.
 * The boot count is one 8-byte word outside the superblock checksum.
 *
 * Extents are placed first fit between the live tables' extents, 2 MiB
 * aligned; the free space is what the valid directory entries leave, so a
 * drop frees its extent at once and nothing about free space is kept on
 * media (or needs recovering). A dropped table's rows stay in the file (or
 * are released with MADV_DONTNEED in DRAM, after which they read as
 * zeros, except on huge pages, which a pool keeps: slab_dram_release); a
 * new table on a file extent clears its whole READable range (index,
 * padding, every row slot) where it is not zero already and persists it
 * before the table exists, so no byte of the old table is readable
 * through the new table's registration. In DRAM the range is already
 * zero (fresh or released pages) unless a release failed or kept the
 * pages, which makes every later create clear it as in a file.
 *
 * Concurrency: st->lock serializes create, drop, get and info; table
 * operations do not take it.
 */
#include <errno.h>
#include <libpmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "common/rs_internal.h"
#include "index/pet_sync.h"
#include "value/slab_int.h"

#define ALIGN_UP(x, a) (((x) + (a) - 1) / (a) * (a))

static uint64_t rand64(void)
{
	uint64_t x;
	struct timespec ts;

	if (getrandom(&x, sizeof(x), 0) == (ssize_t)sizeof(x))
		return x;
	clock_gettime(CLOCK_REALTIME, &ts);
	return XXH3_64bits_withSeed(&ts, sizeof(ts), (uint64_t)getpid());
}

/* ---- persistence ---- */

void slab_persist(struct slab_store *st, const void *addr, size_t len)
{
	int zero = 0;

	if (!st->file_backed || (st->flags & SLAB_F_NOSYNC) || !len)
		return;
	if (__builtin_expect(st->persist_hook != NULL, 0)) {
		st->persist_hook(st->persist_ctx, st->base, addr, len);
		return;
	}
	if (st->is_pmem) {
		pmem_persist(addr, len);
		return;
	}
	if (pmem_msync(addr, len))
		atomic_compare_exchange_strong(&st->io_error, &zero,
					       errno ? errno : EIO);
}

void slab_persist_cb(void *ctx, const void *addr, size_t len)
{
	slab_persist(ctx, addr, len);
}

int slab_io_check(struct slab_store *st)
{
	int e = atomic_load_explicit(&st->io_error, memory_order_relaxed);

	if (!e)
		return 0;
	return rs_seterr(-e, "pool %s: flushing to the file failed: %s",
			 st->path ? st->path : "(dram)", strerror(e));
}

/* ---- superblock and directory ---- */

static uint64_t sb_checksum(const struct slab_super *sb)
{
	return XXH3_64bits(sb, offsetof(struct slab_super, checksum));
}

static uint64_t dirent_checksum(const struct slab_dirent *e)
{
	return XXH3_64bits((const uint8_t *)e + 8, sizeof(*e) - 8);
}

static bool dirent_valid(const struct slab_dirent *e)
{
	return e->state == SLAB_DIRENT_LIVE &&
	       e->checksum == dirent_checksum(e);
}

static bool sb_valid(const struct slab_super *sb)
{
	return sb->magic == SLAB_MAGIC && sb->checksum == sb_checksum(sb);
}

/* ---- catalog records ---- */

static struct slab_catrec *catrec_of(const struct slab_store *st, unsigned id)
{
	return (struct slab_catrec *)(st->cat + (uint64_t)id * SLAB_CAT_BYTES);
}

static uint64_t catrec_checksum(const struct slab_catrec *r, uint32_t len)
{
	return XXH3_64bits_withSeed(&r->uid, 16 + (size_t)len, r->uid);
}

/* Write and persist the record of slot id for incarnation uid. */
static void catrec_write(struct slab_store *st, unsigned id, uint64_t uid,
			 const void *data, uint32_t len)
{
	struct slab_catrec *r = catrec_of(st, id);

	pet_st(&r->checksum, 0);
	r->uid = uid;
	r->len = len;
	r->pad = 0;
	memcpy(r->data, data, len);
	r->checksum = catrec_checksum(r, len);
	slab_persist(st, r, offsetof(struct slab_catrec, data) + len);
}

/* The valid record of t copied into *out (its length), else -1. */
static int catrec_read(const struct slab_store *st, const struct slab_table *t,
		       struct slab_catrec *out)
{
	const struct slab_catrec *r = catrec_of(st, t->ent.table_id);

	memcpy(out, r, offsetof(struct slab_catrec, data));
	if (out->len > SLAB_CATALOG_MAX ||
	    out->uid != slab_dirent_cat_uid(&t->ent))
		return -1;
	memcpy(out->data, r->data, out->len);
	if (out->checksum != catrec_checksum(out, out->len))
		return -1;
	return (int)out->len;
}

int slab_table_catalog(struct slab_store *st, struct slab_table *t, void *buf,
		       size_t cap)
{
	struct slab_catrec r;
	int len;

	pthread_mutex_lock(&st->lock);
	len = catrec_read(st, t, &r);
	pthread_mutex_unlock(&st->lock);
	if (len < 0)
		return RS_E_NOTFOUND;
	if ((size_t)len > cap)
		return rs_seterr(RS_E_INVAL, "table '%.64s': catalog record "
				 "of %d bytes, buffer of %zu", t->ent.name,
				 len, cap);
	memcpy(buf, r.data, (size_t)len);
	return len;
}

int slab_table_set_catalog(struct slab_store *st, struct slab_table *t,
			   const void *rec, uint32_t len)
{
	struct slab_catrec r;
	int rc = 0;

	if (len > SLAB_CATALOG_MAX)
		return rs_seterr(RS_E_INVAL, "catalog record of %u bytes "
				 "(at most %d)", len, SLAB_CATALOG_MAX);
	pthread_mutex_lock(&st->lock);
	if (catrec_read(st, t, &r) >= 0)
		rc = rs_seterr(RS_E_EXISTS, "table '%.64s' has a catalog "
			       "record", t->ent.name);
	else
		catrec_write(st, t->ent.table_id,
			     slab_dirent_cat_uid(&t->ent), rec, len);
	pthread_mutex_unlock(&st->lock);
	return rc ? rc : slab_io_check(st);
}

/* ---- pool format ---- */

static void pool_format(struct slab_store *st)
{
	struct slab_super *sb = st->sb;
	size_t dir_len = SLAB_MAX_TABLES * SLAB_DIRENT_BYTES;
	size_t cat_len = SLAB_MAX_TABLES * SLAB_CAT_BYTES;

	/* a superblock first made invalid: a crash below leaves no pool (a
	 * blank one, or a torn old one), never an old directory or old
	 * records under a new superblock */
	pet_st(&sb->magic, 0);
	slab_persist(st, &sb->magic, sizeof(sb->magic));
	memset(st->dir, 0, dir_len);
	slab_persist(st, st->dir, dir_len);
	memset(st->cat, 0, cat_len);
	slab_persist(st, st->cat, cat_len);
	memset(sb, 0, SLAB_SB_BYTES);
	sb->magic = SLAB_MAGIC;
	sb->layout_version = SLAB_LAYOUT_VERSION;
	sb->max_tables = SLAB_MAX_TABLES;
	sb->pool_bytes = st->len;
	sb->dir_off = SLAB_DIR_OFF;
	sb->data_off = SLAB_DATA_OFF;
	sb->align = SLAB_ALIGN;
	sb->uuid[0] = rand64();
	sb->uuid[1] = rand64();
	sb->checksum = sb_checksum(sb);
	sb->boot_count = 1;
	slab_persist(st, sb, SLAB_SB_BYTES);
}

/* ---- table layout ---- */

static int mul_ok(uint64_t a, uint64_t b, uint64_t *r)
{
	return !__builtin_mul_overflow(a, b, r);
}

/* Fill e's geometry and extent-relative offsets for cfg. */
static int table_layout(const struct slab_table_cfg *cfg, bool file_backed,
			struct slab_dirent *e)
{
	unsigned dtype = cfg->dtype ? cfg->dtype : ROW_F32;
	double load = cfg->index_load > 0 ? cfg->index_load
					  : SLAB_DEFAULT_LOAD;
	struct row_geom rg;
	struct pet_geom g;
	uint64_t off, rows_len, state_len;
	size_t nlen;
	int rc;

	nlen = cfg->name ? strlen(cfg->name) : 0;
	if (nlen == 0 || nlen > SLAB_NAME_MAX)
		return rs_seterr(RS_E_INVAL, "table name must have 1 to %d "
				 "bytes", SLAB_NAME_MAX);
	if (cfg->capacity == 0 || cfg->capacity > UINT32_MAX - 1)
		return rs_seterr(RS_E_INVAL, "table '%s': capacity %llu not "
				 "in [1, 2^32 - 2]", cfg->name,
				 (unsigned long long)cfg->capacity);
	if (cfg->state_floats > 16 * ROW_MAX_DIM)
		return rs_seterr(RS_E_INVAL, "table '%s': %u state floats per "
				 "row is too many", cfg->name,
				 cfg->state_floats);
	rc = row_geom_init(&rg, cfg->dim, dtype, cfg->capacity, 0);
	if (!rc)
		rc = pet_geom_for(cfg->capacity, load, 1, 2, &g);
	if (rc) {
		char why[256];

		snprintf(why, sizeof(why), "%s", rs_errormsg());
		return rs_seterr(rc, "table '%s': %s", cfg->name, why);
	}

	memset(e, 0, sizeof(*e));
	memcpy(e->name, cfg->name, nlen);
	e->dtype = (uint8_t)dtype;
	e->dim = cfg->dim;
	e->state_floats = cfg->state_floats;
	e->capacity = cfg->capacity;
	e->row_stride = rg.stride;
	e->state_stride = (uint32_t)ALIGN_UP(cfg->state_floats * 4ULL, 64);
	e->nstripes = SLAB_NSTRIPES;
	e->log_entry = file_backed
			       ? (uint32_t)ALIGN_UP(SLAB_LOG_HDR + rg.stride +
							    cfg->state_floats *
								    4ULL,
						    64)
			       : 0;
	e->nbuckets = g.nbuckets;
	if (!mul_ok(cfg->capacity, rg.stride, &rows_len) ||
	    !mul_ok(cfg->capacity, e->state_stride, &state_len))
		return rs_seterr(RS_E_INVAL, "table '%s' too large",
				 cfg->name);
	off = SLAB_META_BYTES;
	e->index_off = off;
	off += ALIGN_UP(pet_region_bytes(g.nbuckets), SLAB_PAGE);
	e->rows_off = off;
	off += ALIGN_UP(rows_len, SLAB_PAGE);
	e->state_off = off;
	off += ALIGN_UP(state_len, SLAB_PAGE);
	e->log_off = off;
	off += ALIGN_UP((uint64_t)e->nstripes * e->log_entry, SLAB_PAGE);
	e->ext_len = ALIGN_UP(off, SLAB_ALIGN);
	return 0;
}

uint64_t slab_table_footprint(const struct slab_table_cfg *cfg,
			      bool file_backed)
{
	struct slab_dirent e;

	return table_layout(cfg, file_backed, &e) ? 0 : e.ext_len;
}

/* The footprint grows with the capacity (every term is a non-decreasing
 * function of it), so the largest capacity that fits is a bisection. */
uint64_t slab_table_fit(const struct slab_table_cfg *cfg, bool file_backed,
			uint64_t bytes)
{
	struct slab_table_cfg c = *cfg;
	uint64_t lo = 0, hi = cfg->capacity, fp;

	while (lo < hi) {
		c.capacity = lo + (hi - lo + 1) / 2;
		fp = slab_table_footprint(&c, file_backed);
		if (fp && fp <= bytes)
			lo = c.capacity;
		else
			hi = c.capacity - 1;
	}
	if (lo)
		rs_clearerr();
	return lo;
}

/* Extents of the live tables, sorted by offset; returns their number. */
static int live_extents(const struct slab_store *st, uint64_t off[],
			uint64_t len[])
{
	int n = 0;

	for (int i = 0; i < SLAB_MAX_TABLES; i++) {
		const struct slab_table *t = st->tables[i];
		int j;

		if (!t)
			continue;
		for (j = n; j > 0 && off[j - 1] > t->ent.ext_off; j--) {
			off[j] = off[j - 1];
			len[j] = len[j - 1];
		}
		off[j] = t->ent.ext_off;
		len[j] = t->ent.ext_len;
		n++;
	}
	return slab_grow_extents(st, off, len, n);
}

/* First fit for need bytes (need 0: just report the gaps): the largest gap
 * into *largest and (total may be NULL) all of them into *total. The free
 * space is what the live tables' extents leave: it is derived from the
 * directory, so a drop frees its extent at once and nothing about free
 * space needs to be kept (or recovered) on media. */
static uint64_t find_extent(const struct slab_store *st, uint64_t need,
			    uint64_t *largest, uint64_t *total)
{
	uint64_t off[2 * SLAB_MAX_TABLES + 1], len[2 * SLAB_MAX_TABLES + 1];
	uint64_t cur = SLAB_DATA_OFF, found = 0, best = 0, sum = 0;
	int n = live_extents(st, off, len);

	for (int i = 0; i <= n; i++) {
		uint64_t end = i < n ? off[i] : st->len;
		uint64_t gap = end > cur ? end - cur : 0;

		sum += gap;
		if (gap > best)
			best = gap;
		if (!found && need && gap >= need)
			found = cur;
		if (i < n && off[i] + len[i] > cur)
			cur = off[i] + len[i];
	}
	if (largest)
		*largest = best;
	if (total)
		*total = sum;
	return found;
}

/* ---- tables ---- */

static void table_free(struct slab_table *t)
{
	if (!t)
		return;
	pet_close(&t->pet);
	slab_table_fini(t);
	free(t);
}

/* Build the DRAM handle of directory entry e (already valid on media);
 * recover it when reopening a file. */
static int table_attach(struct slab_store *st, const struct slab_dirent *e,
			bool fresh, struct slab_table **out)
{
	struct slab_table *t;
	const struct pet_geom *g;
	uint64_t index_len;
	int rc;

	if (e->ext_off < SLAB_DATA_OFF || e->ext_len > st->len ||
	    e->ext_off > st->len - e->ext_len || e->rows_off < e->index_off ||
	    e->log_off + (uint64_t)e->nstripes * e->log_entry > e->ext_len ||
	    e->nstripes != SLAB_NSTRIPES ||
	    (st->file_backed && !e->log_entry))
		return rs_seterr(RS_E_CORRUPT, "table '%.64s': bad extent",
				 e->name);
	t = rs_calloc(1, sizeof(*t));
	if (!t)
		return rs_seterr(-ENOMEM, "out of memory");
	t->st = st;
	t->ent = *e;
	rc = row_geom_init(&t->rg, e->dim, e->dtype, e->capacity,
			   e->table_id);
	t->rg.incarnation = e->uid;
	if (rc || t->rg.stride != e->row_stride) {
		rc = rs_seterr(RS_E_CORRUPT, "table '%.64s': bad row geometry",
			       e->name);
		goto err_free;
	}
	t->ext = st->base + e->ext_off;
	t->meta = (struct slab_tmeta *)t->ext;
	t->index = t->ext + e->index_off;
	t->rows = t->ext + e->rows_off;
	t->state = t->ext + e->state_off;
	t->log = e->log_entry ? t->ext + e->log_off : NULL;
	if (t->meta->magic != SLAB_META_MAGIC || t->meta->uid != e->uid ||
	    t->meta->hwm > e->capacity) {
		rc = rs_seterr(RS_E_CORRUPT, "table '%.64s': bad meta block",
			       e->name);
		goto err_free;
	}
	index_len = e->rows_off - e->index_off;
	rc = pet_open(&t->pet, t->index, index_len, slab_persist_cb, st);
	if (rc)
		goto err_free;
	g = pet_geometry(t->pet);
	if (g->nbuckets != e->nbuckets || g->seed1 != e->seed1 ||
	    g->seed2 != e->seed2 || g->incarnation != e->uid) {
		rc = rs_seterr(RS_E_CORRUPT, "table '%.64s': index geometry "
			       "differs from the directory", e->name);
		goto err_pet;
	}
	rc = slab_table_init(t);
	if (rc)
		goto err_pet;
	if (!fresh) {
		rc = slab_recover(t);
		if (rc)
			goto err_init;
	}
	*out = t;
	return 0;

err_init:
	slab_table_fini(t);
err_pet:
	pet_close(&t->pet);
err_free:
	free(t);
	return rc;
}

static struct slab_table *find_name(const struct slab_store *st,
				    const char *name)
{
	for (int i = 0; i < SLAB_MAX_TABLES; i++)
		if (st->tables[i] && name &&
		    !strncmp(st->tables[i]->ent.name, name,
			     sizeof(st->tables[i]->ent.name)))
			return st->tables[i];
	return NULL;
}

/* Clear [p, p + len) where it is not zero already, persisting what was
 * written. Pages that read as zero are left alone, so the holes of a sparse
 * file and untouched anonymous memory are not allocated by the clearing. */
static void zero_range(struct slab_store *st, uint8_t *p, uint64_t len)
{
	while (len) {
		uint64_t n = len < SLAB_PAGE ? len : SLAB_PAGE, acc = 0, w;

		for (uint64_t i = 0; i + 8 <= n; i += 8) {
			memcpy(&w, p + i, 8);
			acc |= w;
		}
		for (uint64_t i = n & ~7ULL; i < n; i++)
			acc |= p[i];
		if (acc) {
			memset(p, 0, n);
			slab_persist(st, p, n);
		}
		p += n;
		len -= n;
	}
}

/* Format extent e (meta, index, log) and persist it. Every byte of the
 * READable range (index, the padding after it, all row slots with their
 * padding) is cleared first: a client may READ any of it, and an earlier
 * table on this extent must not show through. */
static int extent_format(struct slab_store *st, const struct slab_dirent *e)
{
	uint8_t *ext = st->base + e->ext_off;
	struct slab_tmeta *m = (struct slab_tmeta *)ext;
	struct pet_geom g = {.nbuckets = e->nbuckets,
			     .seed1 = e->seed1,
			     .seed2 = e->seed2,
			     .bucket_bytes = PET_BUCKET_BYTES,
			     .buckets_off = PET_HEADER_BYTES,
			     .incarnation = e->uid};
	uint64_t log_len = (uint64_t)e->nstripes * e->log_entry;
	uint64_t rd_len = e->rows_off + e->capacity * e->row_stride -
			  e->index_off;
	int rc;

	/* a DRAM extent is zero unless a drop kept its pages (a hugetlb
	 * pool, or a failed madvise: slab_dram_release): fresh anonymous
	 * memory, or pages a drop gave back (MADV_DONTNEED on a private
	 * mapping reads back as zeros) */
	if (st->file_backed || st->dram_dirty)
		zero_range(st, ext + e->index_off, rd_len);
	rc = pet_format(ext + e->index_off, e->rows_off - e->index_off, &g,
			slab_persist_cb, st);
	if (rc)
		return rc;
	if (log_len) {
		memset(ext + e->log_off, 0, log_len);
		slab_persist(st, ext + e->log_off, log_len);
	}
	memset(m, 0, SLAB_META_BYTES);
	m->magic = SLAB_META_MAGIC;
	m->uid = e->uid;
	m->hwm = 0;
	slab_persist(st, m, SLAB_META_BYTES);
	return slab_io_check(st);
}

/* RS_E_FULL for a table of layout e that found no extent: what it needs,
 * of which rows, optimizer state and index, and what is free. */
static int refuse_full(const struct slab_store *st, const struct slab_dirent *e,
		       uint64_t largest, uint64_t total)
{
	char frag[64] = "";

	if (total > largest)
		snprintf(frag, sizeof(frag), " in one piece, %llu in all",
			 (unsigned long long)total);
	return rs_seterr(RS_E_FULL, "table '%.64s' (%llu rows) needs %llu "
			 "bytes of storage (rows %llu, optimizer state %llu, "
			 "index %llu, rounded up to 2 MiB); %llu bytes are "
			 "free%s (storage size %zu)", e->name,
			 (unsigned long long)e->capacity,
			 (unsigned long long)e->ext_len,
			 (unsigned long long)(e->state_off - e->rows_off),
			 (unsigned long long)(e->log_off - e->state_off),
			 (unsigned long long)(e->rows_off - e->index_off),
			 (unsigned long long)largest, frag, st->len);
}

int slab_table_create(struct slab_store *st, const struct slab_table_cfg *cfg,
		      struct slab_table **out)
{
	struct slab_dirent e;
	struct slab_table *t = NULL;
	uint64_t largest, total;
	int slot, rc;

	if (out)
		*out = NULL;
	if (cfg->catalog_len > SLAB_CATALOG_MAX ||
	    (cfg->catalog_len && !cfg->catalog))
		return rs_seterr(RS_E_INVAL, "table '%s': catalog record of "
				 "%u bytes (at most %d)",
				 cfg->name ? cfg->name : "", cfg->catalog_len,
				 SLAB_CATALOG_MAX);
	rc = table_layout(cfg, st->file_backed, &e);
	if (rc)
		return rc;
	pthread_mutex_lock(&st->lock);
	if (find_name(st, cfg->name)) {
		rc = rs_seterr(RS_E_EXISTS, "table '%s' exists", cfg->name);
		goto out;
	}
	for (slot = 0; slot < SLAB_MAX_TABLES && st->tables[slot]; slot++)
		;
	if (slot == SLAB_MAX_TABLES) {
		rc = rs_seterr(RS_E_FULL, "pool holds %d tables already",
			       SLAB_MAX_TABLES);
		goto out;
	}
	e.ext_off = find_extent(st, e.ext_len, &largest, &total);
	if (!e.ext_off) {
		rc = refuse_full(st, &e, largest, total);
		goto out;
	}
	e.table_id = (uint16_t)slot;
	e.state = SLAB_DIRENT_LIVE;
	e.seed1 = rand64();
	do
		e.seed2 = rand64();
	while (e.seed2 == e.seed1);
	do /* the incarnation: seeds every checksum, never 0 */
		e.uid = rand64();
	while (!e.uid);
	rc = extent_format(st, &e);
	if (rc)
		goto out;
	if (cfg->catalog_len)
		catrec_write(st, (unsigned)slot, e.uid, cfg->catalog,
			     cfg->catalog_len);
	e.checksum = dirent_checksum(&e);
	memcpy(&st->dir[slot], &e, sizeof(e));
	slab_persist(st, &st->dir[slot], sizeof(e));
	rc = slab_io_check(st);
	if (rc)
		goto out;
	rc = table_attach(st, &e, true, &t);
	if (rc)
		goto out;
	st->tables[slot] = t;
	if (out)
		*out = t;
out:
	pthread_mutex_unlock(&st->lock);
	return rc;
}

struct slab_table *slab_table_get(struct slab_store *st, const char *name)
{
	struct slab_table *t;

	pthread_mutex_lock(&st->lock);
	t = find_name(st, name);
	pthread_mutex_unlock(&st->lock);
	return t;
}

struct slab_table *slab_table_by_id(struct slab_store *st, unsigned id)
{
	struct slab_table *t;

	if (id >= SLAB_MAX_TABLES)
		return NULL;
	pthread_mutex_lock(&st->lock);
	t = st->tables[id];
	pthread_mutex_unlock(&st->lock);
	return t;
}

int slab_table_drop(struct slab_store *st, const char *name)
{
	struct slab_dirent *e;
	struct slab_table *t;

	pthread_mutex_lock(&st->lock);
	t = find_name(st, name);
	if (!t) {
		pthread_mutex_unlock(&st->lock);
		return RS_E_NOTFOUND;
	}
	e = &st->dir[t->ent.table_id];
	pet_st(&e->checksum, 0); /* invalid from here on */
	slab_persist(st, &e->checksum, sizeof(e->checksum));
	memset(e, 0, sizeof(*e));
	slab_persist(st, e, sizeof(*e));
	pet_st(&catrec_of(st, t->ent.table_id)->checksum, 0);
	slab_persist(st, catrec_of(st, t->ent.table_id), 8);
	st->tables[t->ent.table_id] = NULL;
	slab_dram_release(st, t->ext, t->ent.ext_len);
	table_free(t);
	pthread_mutex_unlock(&st->lock);
	return slab_io_check(st);
}

/*
 * Give the pages of a DRAM extent nobody uses any more back to the system
 * (st->lock held). A MAP_HUGETLB pool keeps them instead: its huge pages
 * were reserved when it was mapped, and MADV_DONTNEED on a private hugetlb
 * mapping frees the page without restoring its reservation (Linux 6.1).
 * The next touch of that range would need an unreserved huge page, which
 * the connections' MAP_POPULATE buffers may all have taken: the kernel
 * then kills the node with SIGBUS (tests/rxe/test_pool_hugetlb.c). Kept
 * pages hold the old rows, so creates clear what they use (dram_dirty).
 */
void slab_dram_release(struct slab_store *st, void *addr, uint64_t len)
{
	if (st->file_backed)
		return;
	if (st->hugetlb || madvise(addr, len, MADV_DONTNEED))
		st->dram_dirty = true;
}

/* ---- pool open / close ---- */

static int map_dram(struct slab_store *st, uint64_t size)
{
	void *p = MAP_FAILED;

	st->len = ALIGN_UP(size, SLAB_ALIGN);
	if (st->flags & SLAB_F_HUGEPAGES) {
		p = mmap(NULL, st->len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
		st->hugetlb = p != MAP_FAILED;
	}
	if (p == MAP_FAILED) {
		p = mmap(NULL, st->len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p == MAP_FAILED)
			return rs_seterr(-errno, "mmap of %llu bytes: %s",
					 (unsigned long long)st->len,
					 strerror(errno));
		if (st->flags & SLAB_F_HUGEPAGES)
			madvise(p, st->len, MADV_HUGEPAGE);
	}
	st->base = p;
	return 0;
}

/* A device dax is mapped whole (libpmem maps a device only whole, with
 * its alignment): a size above the device's is refused. */
static int device_check(struct slab_store *st, uint64_t size)
{
	if (size > st->len)
		return rs_seterr(RS_E_INVAL, "device %s has %zu bytes (%zu "
				 "MiB), storage.size asks for %llu: the pool "
				 "is the whole device, give a size of at "
				 "most the device's", st->path, st->len,
				 st->len >> 20, (unsigned long long)size);
	if (st->len < SLAB_DATA_OFF + SLAB_ALIGN)
		return rs_seterr(RS_E_INVAL, "device %s has %zu bytes: a pool "
				 "needs at least %llu", st->path, st->len,
				 SLAB_DATA_OFF + SLAB_ALIGN);
	return 0;
}

/* Map the file; *created says whether it was created now. */
static int map_file(struct slab_store *st, uint64_t size, bool *created)
{
	int flags = PMEM_FILE_CREATE | PMEM_FILE_EXCL;
	int is_pmem = 0;
	size_t mlen = 0;
	struct stat sb;
	void *p;

	*created = false;
	st->device = !stat(st->path, &sb) && S_ISCHR(sb.st_mode);
	for (int tries = 0; tries < 2; tries++) {
		p = pmem_map_file(st->path, 0, 0, 0, &mlen, &is_pmem);
		if (p || errno != ENOENT || st->device)
			break;
		if (!size)
			return rs_seterr(-ENOENT, "pool %s does not exist and "
					 "no size was given", st->path);
		if (st->flags & SLAB_F_SPARSE)
			flags |= PMEM_FILE_SPARSE;
		p = pmem_map_file(st->path, ALIGN_UP(size, SLAB_ALIGN), flags,
				  0600, &mlen, &is_pmem);
		if (p) {
			*created = true;
			break;
		}
		if (errno != EEXIST) /* EEXIST: lost a race, open it */
			break;
	}
	if (!p)
		return rs_seterr(errno ? -errno : -EIO, "pool %s: %s",
				 st->path, pmem_errormsg());
	st->base = p;
	st->len = mlen;
	st->is_pmem = is_pmem != 0;
	st->file_backed = true;
	if (st->device)
		return device_check(st, size);
	if (!*created && size && ALIGN_UP(size, SLAB_ALIGN) != mlen)
		return rs_seterr(RS_E_INVAL, "pool %s has %zu bytes, not %llu",
				 st->path, mlen, (unsigned long long)size);
	return 0;
}

/* An existing file or device without a valid superblock: format it if it
 * is blank (its first 2 MiB all zero) or the caller asked to; else refuse. */
static int pool_adopt(struct slab_store *st, bool *format)
{
	const uint64_t *w = (const uint64_t *)st->base;
	uint64_t acc = 0;

	*format = false;
	if (st->len >= SLAB_DATA_OFF && sb_valid(st->sb))
		return 0;
	if (st->len < SLAB_DATA_OFF + SLAB_ALIGN)
		return rs_seterr(RS_E_CORRUPT, "%s is not a recstore pool "
				 "(%zu bytes)", st->path, st->len);
	for (size_t i = 0; i < SLAB_DATA_OFF / 8 && !acc; i++)
		acc |= w[i];
	if (acc && !(st->flags & SLAB_F_FORMAT))
		return rs_seterr(RS_E_CORRUPT, "%s holds no valid recstore "
				 "pool (%s) and is not blank: refusing to "
				 "format it (set storage.format to format it, "
				 "which destroys its content)", st->path,
				 st->sb->magic == SLAB_MAGIC
					 ? "damaged superblock"
					 : "no pool magic");
	*format = true;
	return 0;
}

static int pool_load(struct slab_store *st)
{
	struct slab_super *sb = st->sb;
	int rc;

	if (st->len < SLAB_DATA_OFF || !sb_valid(sb))
		return rs_seterr(RS_E_CORRUPT, "%s is not a recstore pool "
				 "(bad superblock)", st->path);
	if (sb->layout_version < SLAB_LAYOUT_OLDEST ||
	    sb->layout_version > SLAB_LAYOUT_VERSION ||
	    sb->max_tables != SLAB_MAX_TABLES ||
	    sb->dir_off != SLAB_DIR_OFF || sb->data_off != SLAB_DATA_OFF)
		return rs_seterr(RS_E_CORRUPT, "pool %s has layout %u, this "
				 "build reads %u to %u", st->path,
				 sb->layout_version, SLAB_LAYOUT_OLDEST,
				 SLAB_LAYOUT_VERSION);
	if (sb->pool_bytes != st->len)
		return rs_seterr(RS_E_CORRUPT, "pool %s: %zu bytes, superblock "
				 "says %llu (truncated?)", st->path, st->len,
				 (unsigned long long)sb->pool_bytes);
	pet_st(&sb->boot_count, sb->boot_count + 1);
	slab_persist(st, &sb->boot_count, sizeof(sb->boot_count));
	slab_grow_recover(st);
	for (int i = 0; i < SLAB_MAX_TABLES; i++) {
		struct slab_dirent e;

		memcpy(&e, &st->dir[i], sizeof(e));
		if (!dirent_valid(&e))
			continue;
		if (e.table_id != i)
			return rs_seterr(RS_E_CORRUPT, "directory slot %d "
					 "names table id %u", i, e.table_id);
		rc = table_attach(st, &e, false, &st->tables[i]);
		if (rc)
			return rc;
	}
	return slab_io_check(st);
}

int slab_store_open(struct slab_store **out, const struct slab_store_cfg *cfg)
{
	return slab_store_open_hooked(out, cfg, NULL, NULL);
}

int slab_store_open_hooked(struct slab_store **out,
			   const struct slab_store_cfg *cfg,
			   slab_persist_hook_fn hook, void *ctx)
{
	struct slab_store *st;
	bool created = true;
	int rc;

	*out = NULL;
	if (!cfg->path && cfg->size < SLAB_DATA_OFF + SLAB_ALIGN)
		return rs_seterr(RS_E_INVAL, "a DRAM pool needs a size of at "
				 "least %llu bytes",
				 SLAB_DATA_OFF + SLAB_ALIGN);
	if (cfg->flags & ~(SLAB_F_HUGEPAGES | SLAB_F_NOSYNC | SLAB_F_SPARSE |
			   SLAB_F_FORMAT))
		return rs_seterr(RS_E_INVAL, "unknown pool flags %#x",
				 cfg->flags);
	st = rs_calloc(1, sizeof(*st));
	if (!st)
		return rs_seterr(-ENOMEM, "out of memory");
	st->flags = cfg->flags;
	st->persist_hook = hook;
	st->persist_ctx = ctx;
	rc = pthread_mutex_init(&st->lock, NULL);
	if (rc) {
		free(st);
		return rs_seterr(-rc, "mutex: %s", strerror(rc));
	}
	if (cfg->path) {
		st->path = rs_strdup(cfg->path);
		rc = st->path ? map_file(st, cfg->size, &created)
			      : rs_seterr(-ENOMEM, "out of memory");
	} else {
		rc = map_dram(st, cfg->size);
	}
	if (rc)
		goto err;
	if (created && st->len < SLAB_DATA_OFF + SLAB_ALIGN) {
		rc = rs_seterr(RS_E_INVAL, "pool size %zu is too small",
			       st->len);
		goto err;
	}
	st->sb = (struct slab_super *)st->base;
	st->dir = (struct slab_dirent *)(st->base + SLAB_DIR_OFF);
	st->cat = st->base + SLAB_CAT_OFF;
	if (!created && cfg->path) {
		rc = pool_adopt(st, &created);
		if (rc)
			goto err;
	}
	if (created) {
		pool_format(st);
		rc = slab_io_check(st);
	} else {
		rc = pool_load(st);
	}
	if (rc)
		goto err;
	*out = st;
	return 0;
err:
	slab_store_close(&st);
	return rc;
}

void slab_store_close(struct slab_store **pst)
{
	struct slab_store *st = pst ? *pst : NULL;

	if (!st)
		return;
	for (int i = 0; i < SLAB_MAX_TABLES; i++) {
		table_free(st->tables[i]);
		table_free(st->retired[i]);
	}
	if (st->base) {
		if (st->file_backed)
			pmem_unmap(st->base, st->len);
		else
			munmap(st->base, st->len);
	}
	pthread_mutex_destroy(&st->lock);
	free(st->path);
	free(st);
	*pst = NULL;
}

void slab_store_info(struct slab_store *st, struct slab_store_info *info)
{
	pthread_mutex_lock(&st->lock);
	info->base = st->base;
	info->len = st->len;
	info->file_backed = st->file_backed;
	info->is_pmem = st->is_pmem;
	info->hugetlb = st->hugetlb;
	info->boot_count = pet_ld(&st->sb->boot_count);
	info->layout = st->sb->layout_version;
	info->device = st->device;
	find_extent(st, 0, &info->free_bytes, &info->free_total);
	info->ntables = 0;
	for (int i = 0; i < SLAB_MAX_TABLES; i++)
		info->ntables += st->tables[i] != NULL;
	pthread_mutex_unlock(&st->lock);
}

/* ---- for slab_grow.c (slab_int.h) ---- */

int slab_layout(const struct slab_table_cfg *cfg, bool file_backed,
		struct slab_dirent *e)
{
	return table_layout(cfg, file_backed, e);
}

uint64_t slab_extent_find(const struct slab_store *st, uint64_t need,
			  uint64_t *largest, uint64_t *total)
{
	return find_extent(st, need, largest, total);
}

int slab_extent_format(struct slab_store *st, const struct slab_dirent *e)
{
	return extent_format(st, e);
}

int slab_attach(struct slab_store *st, const struct slab_dirent *e,
		bool fresh, struct slab_table **out)
{
	return table_attach(st, e, fresh, out);
}

void slab_detach(struct slab_table *t)
{
	table_free(t);
}

int slab_refuse_full(const struct slab_store *st, const struct slab_dirent *e,
		     uint64_t largest, uint64_t total)
{
	return refuse_full(st, e, largest, total);
}

uint64_t slab_dirent_checksum(const struct slab_dirent *e)
{
	return dirent_checksum(e);
}

uint64_t slab_rand64(void)
{
	return rand64();
}
