/*
 * slab_grow.c - growing a table online (API in slab.h; design in
 * docs/storage.md, "Growth").
 *
 * A table grows into a NEW extent with a NEW incarnation; nothing of the
 * old table moves while it serves. The caller keeps writers away from the
 * table for the whole growth (readers may go on):
 *
 *   slab_grow_begin   reserve an extent for the larger table (it counts as
 *                     used, so no create takes it), format it, copy every
 *                     live row into the SAME slot (payload, key, version
 *                     and optimizer state bit for bit; the checksum
 *                     recomputed with the new incarnation), rebuild the
 *                     index by inserting every key (new seeds, more
 *                     buckets), persist all of it, then attach it like a
 *                     table found in a pool at open (recovery rebuilds the
 *                     free list and counters from the rows and the index
 *                     and checks them). Rows and readers of the old table
 *                     are untouched.
 *   slab_grow_commit  switch the directory entry: the new entry is written
 *                     first to the growth record in the superblock page
 *                     (own checksum) and persisted, then into the table's
 *                     directory slot, persisted, then the record is
 *                     cleared. A crash before the record is complete
 *                     leaves the old table (the new extent is free space:
 *                     no valid entry names it); a crash after it finishes
 *                     the switch at the next open (slab_grow_recover). So
 *                     the pool holds exactly the old or the new table, with
 *                     every acknowledged row. The old table stays attached
 *                     as "retired": its extent is still used, its handle
 *                     still valid for readers that had it.
 *   slab_table_retire make every bucket and row of the old extent fail
 *                     validation (odd version words: "a writer is
 *                     inside", for ever), so a one-sided reader still on
 *                     the old incarnation retries and falls back to the
 *                     RPC, which refuses its generation (RS_E_STALE); no
 *                     server thread may read the old table any more (its
 *                     seqlock readers would wait for ever).
 *   slab_table_release free the old handle and give its extent back.
 *
 * Change tracking (slab_track.c) is carried over: rows keep their slots,
 * so the dirty bits, the deleted keys and the tag move to the new table
 * and an incremental checkpoint after a growth is still exact.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/rs_internal.h"
#include "index/pet_sync.h"
#include "value/slab_int.h"

void (*slab_grow_test_hook)(int point);

static void hook(int point)
{
	if (slab_grow_test_hook)
		slab_grow_test_hook(point);
}

static void no_persist(void *ctx, const void *addr, size_t len)
{
	(void)ctx;
	(void)addr;
	(void)len;
}

static struct slab_dirent *grow_rec(struct slab_store *st)
{
	return (struct slab_dirent *)(st->base + SLAB_GROW_REC_OFF);
}

static void grow_rec_clear(struct slab_store *st)
{
	struct slab_dirent *g = grow_rec(st);

	pet_st(&g->checksum, 0); /* invalid from here on */
	slab_persist(st, &g->checksum, sizeof(g->checksum));
	memset(g, 0, sizeof(*g));
	slab_persist(st, g, sizeof(*g));
}

void slab_grow_recover(struct slab_store *st)
{
	struct slab_dirent e;

	memcpy(&e, grow_rec(st), sizeof(e));
	if (e.state == SLAB_DIRENT_LIVE && e.table_id < SLAB_MAX_TABLES &&
	    e.checksum == slab_dirent_checksum(&e)) {
		memcpy(&st->dir[e.table_id], &e, sizeof(e));
		slab_persist(st, &st->dir[e.table_id], sizeof(e));
	}
	if (e.checksum || e.state)
		grow_rec_clear(st);
}

int slab_grow_extents(const struct slab_store *st, uint64_t off[],
		      uint64_t len[], int n)
{
	for (int i = -1; i < SLAB_MAX_TABLES; i++) {
		uint64_t o = i < 0 ? st->grow_off
				   : st->retired[i] ? st->retired[i]->ent.ext_off
						    : 0;
		uint64_t l = i < 0 ? st->grow_len
				   : st->retired[i] ? st->retired[i]->ent.ext_len
						    : 0;
		int j;

		if (!l)
			continue;
		for (j = n; j > 0 && off[j - 1] > o; j--) {
			off[j] = off[j - 1];
			len[j] = len[j - 1];
		}
		off[j] = o;
		len[j] = l;
		n++;
	}
	return n;
}

uint64_t slab_table_capacity(const struct slab_table *t)
{
	return t->ent.capacity;
}

uint64_t slab_table_live(const struct slab_table *t)
{
	return atomic_load_explicit(&t->live, memory_order_relaxed);
}

/* Give the reserved extent back (DRAM: release its pages). */
static void unreserve(struct slab_store *st)
{
	pthread_mutex_lock(&st->lock);
	if (st->grow_len)
		slab_dram_release(st, st->base + st->grow_off, st->grow_len);
	st->grow_off = st->grow_len = 0;
	pthread_mutex_unlock(&st->lock);
}

/* Reserve and lay out the extent of t grown to capacity rows. */
static int reserve(struct slab_store *st, struct slab_table *t,
		   uint64_t capacity, double index_load, struct slab_dirent *e)
{
	struct slab_table_cfg cfg = {
		.name = t->ent.name,
		.dim = t->ent.dim,
		.dtype = t->ent.dtype,
		.capacity = capacity,
		.state_floats = t->ent.state_floats,
		.index_load = index_load,
	};
	uint64_t largest, total;
	int rc;

	if (capacity <= t->ent.capacity)
		return rs_seterr(RS_E_INVAL, "table '%.64s': cannot grow to "
				 "%llu rows, it has %llu", t->ent.name,
				 (unsigned long long)capacity,
				 (unsigned long long)t->ent.capacity);
	rc = slab_layout(&cfg, st->file_backed, e);
	if (rc)
		return rc;
	pthread_mutex_lock(&st->lock);
	if (st->tables[t->ent.table_id] != t) {
		rc = rs_seterr(RS_E_NOTFOUND, "table '%.64s' is not in the "
			       "pool any more", t->ent.name);
	} else if (st->grow_len) {
		rc = rs_seterr(RS_E_BUSY, "table '%.64s': another table of "
			       "the pool is growing", t->ent.name);
	} else {
		e->ext_off = slab_extent_find(st, e->ext_len, &largest,
					      &total);
		if (!e->ext_off) {
			rc = slab_refuse_full(st, e, largest, total);
		} else {
			st->grow_off = e->ext_off;
			st->grow_len = e->ext_len;
		}
	}
	pthread_mutex_unlock(&st->lock);
	if (rc)
		return rc;
	e->table_id = t->ent.table_id;
	e->state = SLAB_DIRENT_LIVE;
	e->seed1 = slab_rand64();
	do
		e->seed2 = slab_rand64();
	while (e->seed2 == e->seed1);
	do /* a new incarnation: every checksum of the new extent differs */
		e->uid = slab_rand64();
	while (!e->uid || e->uid == t->ent.uid);
	/* the catalog record stays the table's (layout 3): it is bound to
	 * this uid, which the new entry names as the old one did */
	e->cat_uid = slab_dirent_cat_uid(&t->ent);
	return 0;
}

/* Copy every live row of t (slots [0, next)) into the formatted extent e,
 * slot for slot, and index it there; *n gets the rows copied. */
static int copy_rows(struct slab_store *st, struct slab_table *t,
		     const struct slab_dirent *e, uint64_t *n)
{
	uint8_t *ext = st->base + e->ext_off;
	uint64_t used = atomic_load(&t->next), key;
	uint64_t *img = rs_malloc(t->rg.stride);
	struct pet_index *pet = NULL;
	struct row_geom rg;
	int rc;

	*n = 0;
	if (!img)
		return rs_seterr(-ENOMEM, "out of memory");
	rc = row_geom_init(&rg, e->dim, e->dtype, e->capacity, e->table_id);
	rg.incarnation = e->uid;
	if (!rc) /* the index is persisted once, below, not per bucket */
		rc = pet_open(&pet, ext + e->index_off,
			      e->rows_off - e->index_off, no_persist, NULL);
	for (uint64_t r = 0; !rc && r < used; r++) {
		if (!slab_slot_key(t, (uint32_t)r, &key))
			continue;
		slab_read_row(t, (uint32_t)r, img);
		img[ROW_W_CSUM] = row_checksum(img, &rg, (uint32_t)r,
					       img[ROW_W_VERSION]);
		memcpy(ext + e->rows_off + r * e->row_stride, img,
		       (size_t)t->row_words * 8);
		if (t->state_bytes)
			memcpy(ext + e->state_off + r * e->state_stride,
			       slab_state_of(t, (uint32_t)r), t->state_bytes);
		rc = pet_insert(pet, key, (uint32_t)r);
		if (rc)
			rc = rs_seterr(rc, "table '%.64s': indexing key %llu "
				       "in the grown table failed: %s",
				       t->ent.name, (unsigned long long)key,
				       rs_errormsg());
		++*n;
		if (*n == 1)
			hook(0); /* the copy started */
	}
	pet_close(&pet);
	free(img);
	if (rc)
		return rc;
	slab_persist(st, ext + e->index_off, e->rows_off - e->index_off);
	slab_persist(st, ext + e->rows_off, used * e->row_stride);
	slab_persist(st, ext + e->state_off, used * e->state_stride);
	pet_st(&((struct slab_tmeta *)ext)->hwm, t->meta->hwm);
	slab_persist(st, ext, SLAB_META_BYTES);
	return slab_io_check(st);
}

/* Move t's change tracking to nt (same slots). No writer on either. */
static void track_move(struct slab_table *t, struct slab_table *nt)
{
	struct slab_track *a = &t->track, *b = &nt->track;

	pthread_mutex_lock(&a->lock);
	pthread_mutex_lock(&b->lock);
	for (uint64_t w = 0; w < (t->ent.capacity + 63) / 64; w++)
		atomic_store_explicit(&b->dirty[w],
				      atomic_load_explicit(&a->dirty[w],
							   memory_order_relaxed),
				      memory_order_relaxed);
	free(b->gone);
	b->gone = a->gone;
	b->ngone = a->ngone;
	b->gone_cap = a->gone_cap;
	b->overflow = a->overflow;
	b->tagged = a->tagged;
	memcpy(b->tag, a->tag, sizeof(b->tag));
	a->gone = NULL;
	a->ngone = a->gone_cap = 0;
	pthread_mutex_unlock(&b->lock);
	pthread_mutex_unlock(&a->lock);
}

int slab_grow_begin(struct slab_store *st, struct slab_table *t,
		    uint64_t capacity, double index_load,
		    struct slab_table **out)
{
	struct slab_table *nt = NULL;
	struct slab_dirent e;
	uint64_t copied;
	int rc;

	*out = NULL;
	rc = reserve(st, t, capacity, index_load, &e);
	if (rc)
		return rc;
	rc = slab_extent_format(st, &e);
	if (!rc)
		rc = copy_rows(st, t, &e, &copied);
	if (!rc)
		rc = slab_attach(st, &e, false, &nt); /* recovers: checks */
	if (!rc && (nt->rec.rows_live != copied ||
		    nt->rec.rows_reclaimed || nt->rec.index.dropped)) {
		rc = rs_seterr(RS_E_CORRUPT, "table '%.64s': the grown table "
			       "holds %llu rows of the %llu copied",
			       t->ent.name,
			       (unsigned long long)nt->rec.rows_live,
			       (unsigned long long)copied);
		slab_detach(nt);
	}
	if (rc) {
		unreserve(st);
		return rc;
	}
	nt->rec = t->rec; /* the stats of the pool's last open */
	atomic_store(&nt->inserts, atomic_load(&t->inserts));
	atomic_store(&nt->deletes, atomic_load(&t->deletes));
	atomic_store(&nt->updates, atomic_load(&t->updates));
	atomic_store(&nt->read_retries, atomic_load(&t->read_retries));
	track_move(t, nt);
	hook(1); /* the new extent is complete and persisted */
	*out = nt;
	return 0;
}

void slab_grow_abort(struct slab_store *st, struct slab_table *nt)
{
	if (!nt)
		return;
	slab_detach(nt);
	unreserve(st);
}

int slab_grow_commit(struct slab_store *st, struct slab_table *t,
		     struct slab_table *nt)
{
	struct slab_dirent *rec = grow_rec(st);
	unsigned id = t->ent.table_id;
	int slot, rc;

	pthread_mutex_lock(&st->lock);
	for (slot = 0; slot < SLAB_MAX_TABLES && st->retired[slot]; slot++)
		;
	if (st->tables[id] != t || slot == SLAB_MAX_TABLES) {
		pthread_mutex_unlock(&st->lock);
		return rs_seterr(RS_E_BUSY, "table '%.64s': too many grown "
				 "tables not released yet", t->ent.name);
	}
	nt->ent.checksum = slab_dirent_checksum(&nt->ent);
	memcpy(rec, &nt->ent, sizeof(*rec));
	slab_persist(st, rec, sizeof(*rec));
	rc = slab_io_check(st);
	if (rc) { /* not known to hold: the old table stays */
		grow_rec_clear(st);
		pthread_mutex_unlock(&st->lock);
		return rc;
	}
	hook(2); /* the record holds: the growth is done */
	memcpy(&st->dir[id], &nt->ent, sizeof(nt->ent));
	slab_persist(st, &st->dir[id], sizeof(nt->ent));
	hook(3);
	grow_rec_clear(st);
	st->tables[id] = nt;
	st->retired[slot] = t;
	st->grow_off = st->grow_len = 0;
	pthread_mutex_unlock(&st->lock);
	hook(4);
	return 0; /* a later flush failure is sticky: the next write says so */
}

void slab_table_retire(struct slab_table *t)
{
	size_t len;
	uint8_t *b = pet_region(t->pet, &len);
	const struct pet_geom *g = pet_geometry(t->pet);
	uint64_t used = atomic_load(&t->next);

	for (uint64_t i = 0; i < g->nbuckets; i++) {
		uint64_t *v = (uint64_t *)(b + g->buckets_off +
					   i * g->bucket_bytes);

		pet_st(v, pet_ld(v) | 1);
	}
	for (uint64_t r = 0; r < used; r++) {
		uint64_t *v = slab_row_words(t, (uint32_t)r);

		pet_st(v, pet_ld(v) | 1);
	}
}

void slab_table_release(struct slab_store *st, struct slab_table *t)
{
	pthread_mutex_lock(&st->lock);
	for (int i = 0; i < SLAB_MAX_TABLES; i++)
		if (st->retired[i] == t)
			st->retired[i] = NULL;
	slab_dram_release(st, t->ext, t->ent.ext_len);
	slab_detach(t);
	pthread_mutex_unlock(&st->lock);
}

int slab_table_grow(struct slab_store *st, const char *name,
		    uint64_t capacity, double index_load,
		    struct slab_table **out)
{
	struct slab_table *t = slab_table_get(st, name), *nt;
	int rc;

	if (out)
		*out = NULL;
	if (!t)
		return rs_seterr(RS_E_NOTFOUND, "table '%s' not found", name);
	rc = slab_grow_begin(st, t, capacity, index_load, &nt);
	if (rc)
		return rc;
	rc = slab_grow_commit(st, t, nt);
	if (rc) {
		slab_grow_abort(st, nt);
		return rc;
	}
	slab_table_retire(t);
	slab_table_release(st, t);
	if (out)
		*out = nt;
	return 0;
}
