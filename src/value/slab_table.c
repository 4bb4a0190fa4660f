/*
 * slab_table.c - row operations of one table: allocation, insert, delete,
 * in-place update, lock-free reads, iteration (API in slab.h).
 *
 * Row write protocol (holding the row's stripe lock, SLAB_NSTRIPES per
 * table, lock = row & (SLAB_NSTRIPES - 1)):
 *   1. build the complete new row image in the stripe's DRAM stage buffer:
 *      key, meta, payload; version = current + 2; checksum over the image;
 *   2. file-backed updates of a live row: copy image + new optimizer state
 *      into the stripe's redo-log entry, checksum it, persist it;
 *   3. publish with the seqlock writer (index/pet_sync.h): version odd,
 *      release fence, words 1.. with relaxed atomic stores, version even
 *      with a release store; persist the row;
 *   4. write the optimizer state (never READ remotely) and persist it.
 * The row is odd only during the word copy of step 3, not while the caller
 * computes (slab_write_begin hands out copies). Every accepted image has a
 * checksum computed over exactly its bytes, so a reader that mixes words of
 * two writes fails validation (docs/storage.md).
 *
 * Orders that make crashes safe (file-backed; "persist" = slab_persist):
 *   insert: row PENDING (+state) persisted -> index slot published,
 *           persisted -> row LIVE, persisted -> return 0. A crash before
 *           the LIVE image is persisted leaves a PENDING (or torn) row that
 *           no reader accepts: recovery drops its index slot, if any, and
 *           makes it a tombstone (the insert was not acknowledged).
 *   update: log entry persisted -> row persisted -> state persisted ->
 *           return. Recovery replays a valid log entry over a row whose
 *           version is not past the entry's (torn by this write, or not
 *           reached by it).
 *   delete: index slot cleared, persisted -> row tombstoned, persisted ->
 *           return; the slot goes on the free list.
 *
 * Allocation: a DRAM free stack of row slots (rebuilt by recovery) and a
 * bump pointer `next`; before `next` passes the persisted high-water mark,
 * the mark grows by SLAB_HWM_CHUNK rows (one 8-byte persisted store), so
 * recovery only scans rows below it. Row slots never move: a key keeps its
 * row until deleted, which is what client location caches rely on.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "common/rs_internal.h"
#include "index/pet_sync.h"
#include "value/slab_int.h"

#define RELAXED memory_order_relaxed

int slab_table_init(struct slab_table *t)
{
	size_t stage_len = (size_t)SLAB_NSTRIPES * t->rg.stride;
	int rc;

	t->state_bytes = t->ent.state_floats * 4;
	t->row_words = (ROW_HDR_BYTES + t->rg.payload_bytes + 7) / 8;
	t->stripes = rs_aligned_alloc(64, SLAB_NSTRIPES * sizeof(*t->stripes));
	if (!t->stripes)
		goto err_stripes;
	memset(t->stripes, 0, SLAB_NSTRIPES * sizeof(*t->stripes));
	t->stage = rs_aligned_alloc(64, stage_len);
	if (!t->stage)
		goto err_stage;
	memset(t->stage, 0, stage_len);
	rc = pthread_mutex_init(&t->alloc, NULL);
	if (rc)
		goto err_mutex;
	t->hwm = t->meta->hwm;
	atomic_init(&t->next, t->hwm);
	if (slab_track_init(t))
		goto err_track;
	return 0;

err_track:
	pthread_mutex_destroy(&t->alloc);
err_mutex:
	free(t->stage);
err_stage:
	free(t->stripes);
err_stripes:
	return rs_seterr(-ENOMEM, "table '%s': out of memory", t->ent.name);
}

void slab_table_fini(struct slab_table *t)
{
	if (t->ev) /* eviction hook */
		slab_ev_fini(t);
	slab_track_fini(t);
	pthread_mutex_destroy(&t->alloc);
	free(t->free_rows);
	free(t->stage);
	free(t->stripes);
}

/* ---- locks and allocation ---- */

static inline void row_lock(struct slab_table *t, uint32_t r)
{
	pet_lock(&t->stripes[slab_stripe_of(r)].lock);
}

static inline void row_unlock(struct slab_table *t, uint32_t r)
{
	pet_unlock(&t->stripes[slab_stripe_of(r)].lock);
}

static int row_alloc(struct slab_table *t, uint32_t *r)
{
	uint64_t n;

	pthread_mutex_lock(&t->alloc);
	if (t->nfree) {
		*r = t->free_rows[--t->nfree];
		pthread_mutex_unlock(&t->alloc);
		return 0;
	}
	n = atomic_load_explicit(&t->next, RELAXED);
	if (n >= t->ent.capacity) {
		pthread_mutex_unlock(&t->alloc);
		return rs_seterr(RS_E_FULL, "table '%s': all %llu rows in use",
				 t->ent.name,
				 (unsigned long long)t->ent.capacity);
	}
	if (n >= t->hwm) {
		uint64_t h = t->hwm + SLAB_HWM_CHUNK;

		t->hwm = h < t->ent.capacity ? h : t->ent.capacity;
		pet_st(&t->meta->hwm, t->hwm);
		slab_persist(t->st, &t->meta->hwm, sizeof(t->meta->hwm));
	}
	*r = (uint32_t)n;
	atomic_store_explicit(&t->next, n + 1, RELAXED);
	pthread_mutex_unlock(&t->alloc);
	return 0;
}

int slab_free_reserve(struct slab_table *t, uint64_t n)
{
	uint32_t *fr;
	int ret = 0;

	pthread_mutex_lock(&t->alloc);
	if (t->nfree + n > t->free_cap) {
		fr = rs_realloc(t->free_rows, (t->nfree + n) * sizeof(*fr));
		if (fr) {
			t->free_rows = fr;
			t->free_cap = t->nfree + n;
		} else {
			ret = rs_seterr(-ENOMEM, "table '%s': out of memory "
					"for the free list", t->ent.name);
		}
	}
	pthread_mutex_unlock(&t->alloc);
	return ret;
}

void slab_free_push(struct slab_table *t, uint32_t r)
{
	pthread_mutex_lock(&t->alloc);
	if (t->nfree == t->free_cap) {
		uint64_t cap = t->free_cap ? 2 * t->free_cap : 1024;
		uint32_t *fr = rs_realloc(t->free_rows, cap * sizeof(*fr));

		if (!fr) { /* the slot leaks until the next recovery */
			pthread_mutex_unlock(&t->alloc);
			return;
		}
		t->free_rows = fr;
		t->free_cap = cap;
	}
	t->free_rows[t->nfree++] = r;
	pthread_mutex_unlock(&t->alloc);
}

/* ---- publishing a row image (caller holds the row's lock) ---- */

/* Set img's version (current + 2) and checksum for slot r. */
void slab_row_prepare(struct slab_table *t, uint32_t r, uint64_t *img)
{
	uint64_t *w = slab_row_words(t, r);
	uint64_t v = pet_ld(&w[ROW_W_VERSION]);

	if (v & 1) /* garbage of a slot never published since (re)format */
		pet_st(&w[ROW_W_VERSION], ++v);
	img[ROW_W_VERSION] = v + 2;
	img[ROW_W_CSUM] = row_checksum(img, &t->rg, r, v + 2);
}

/* Publish a prepared image into slot r and persist it. */
void slab_row_store(struct slab_table *t, uint32_t r, const uint64_t *img)
{
	uint64_t *w = slab_row_words(t, r);
	uint64_t v = pet_write_open(&w[ROW_W_VERSION]);

	pet_copy_in(w + 1, img + 1, t->row_words - 1);
	pet_write_close(&w[ROW_W_VERSION], v);
	slab_persist(t->st, w, (size_t)t->row_words * 8);
}

/* Turn slot r into a valid tombstone (ROW_FREE), key and payload kept. */
void slab_row_tombstone(struct slab_table *t, uint32_t r)
{
	uint64_t *img = slab_stage(t, slab_stripe_of(r));

	pet_copy_out(img, slab_row_words(t, r), t->row_words);
	img[ROW_W_META] = row_meta(&t->rg, ROW_FREE);
	slab_row_prepare(t, r, img);
	slab_row_store(t, r, img);
}

static void fill_image(struct slab_table *t, uint64_t *img, uint64_t key,
		       const float *val)
{
	uint8_t *pl = (uint8_t *)img + ROW_HDR_BYTES;

	img[ROW_W_KEY] = key;
	img[ROW_W_META] = row_meta(&t->rg, ROW_LIVE);
	if (val)
		row_payload_from_f32(&t->rg, val, pl);
	else
		memset(pl, 0, t->rg.payload_bytes);
}

static void state_store(struct slab_table *t, uint32_t r, const float *src)
{
	float *sp = slab_state_of(t, r);

	if (!t->state_bytes)
		return;
	if (src)
		memcpy(sp, src, t->state_bytes);
	else
		memset(sp, 0, t->state_bytes);
	slab_persist(t->st, sp, t->state_bytes);
}

uint64_t slab_log_checksum(const struct slab_table *t, const uint8_t *entry)
{
	return XXH3_64bits_withSeed(entry + 8, t->ent.log_entry - 8,
				    SLAB_LOG_SEED);
}

/* Redo-log the prepared image (and the state the row will have: `state`,
 * or the current one if NULL) before overwriting a live row in place. */
static void log_write(struct slab_table *t, uint32_t r, const uint64_t *img,
		      const float *state)
{
	uint8_t *e = slab_log_entry(t, slab_stripe_of(r));
	struct slab_log_hdr *h = (struct slab_log_hdr *)e;

	memcpy(e + SLAB_LOG_HDR, img, t->rg.stride);
	if (t->state_bytes)
		memcpy(e + SLAB_LOG_HDR + t->rg.stride,
		       state ? state : slab_state_of(t, r), t->state_bytes);
	h->row = r;
	h->seq++;
	h->checksum = slab_log_checksum(t, e);
	slab_persist(t->st, e, t->ent.log_entry);
}

/* Overwrite live row r (locked) with val (NULL: keep) and state (NULL:
 * keep). */
static const uint64_t *row_update_locked(struct slab_table *t, uint32_t r,
					 uint64_t key, const float *val,
					 const float *state)
{
	uint64_t *img = slab_stage(t, slab_stripe_of(r));

	if (val) {
		fill_image(t, img, key, val);
	} else {
		pet_copy_out(img, slab_row_words(t, r), t->row_words);
	}
	slab_row_prepare(t, r, img);
	if (t->log)
		log_write(t, r, img, state);
	slab_row_store(t, r, img);
	if (state)
		state_store(t, r, state);
	slab_track_row(t, r);
	if (t->ev) /* eviction hook: access and TTL stamp */
		slab_ev_wrote(t, r, false);
	atomic_fetch_add_explicit(&t->updates, 1, RELAXED);
	return img;
}

/* Lock the row that holds key: 0 and *r (locked), or RS_E_NOTFOUND. */
static int lock_key(struct slab_table *t, uint64_t key, uint32_t *r)
{
	const uint64_t live = row_meta(&t->rg, ROW_LIVE);

	for (;;) {
		uint64_t *w;
		int rc = pet_lookup(t->pet, key, r);

		if (rc)
			return rc;
		w = slab_row_words(t, *r);
		for (uint32_t i = 0; i < t->row_words; i += 8)
			__builtin_prefetch(&w[i], 1);
		row_lock(t, *r);
		if (pet_ld(&w[ROW_W_KEY]) == key &&
		    pet_ld(&w[ROW_W_META]) == live)
			return 0;
		/* deleted (and maybe reused) since the lookup: look again */
		row_unlock(t, *r);
	}
}

/* ---- key operations ---- */

int slab_lookup(struct slab_table *t, uint64_t key, uint32_t *row)
{
	return pet_lookup(t->pet, key, row);
}

void *slab_row_ptr(const struct slab_table *t, uint32_t row)
{
	return slab_row_words(t, row);
}

void (*slab_test_insert_hook)(struct slab_table *t, uint32_t row,
			      uint64_t key);

/* Turn the PENDING image img of slot r (locked) LIVE: only the checksum and
 * the meta word change, so only they are stored (one line persisted). */
static void row_make_live(struct slab_table *t, uint32_t r, uint64_t *img)
{
	uint64_t *w = slab_row_words(t, r);
	uint64_t v;

	img[ROW_W_META] = row_meta(&t->rg, ROW_LIVE);
	slab_row_prepare(t, r, img);
	v = pet_write_open(&w[ROW_W_VERSION]);
	pet_st(&w[ROW_W_CSUM], img[ROW_W_CSUM]);
	pet_st(&w[ROW_W_META], img[ROW_W_META]);
	pet_write_close(&w[ROW_W_VERSION], v);
	slab_persist(t->st, w, ROW_HDR_BYTES);
}

/*
 * The row is published PENDING, then its index slot inserted, then it is
 * made LIVE, all under the row lock: a reader holding a cached location of
 * this slot (the key deleted and inserted again, possibly by two writers
 * at once) never accepts a payload before the index points at it, and an
 * insert that loses (RS_E_EXISTS, RS_E_FULL) turns its row into a
 * tombstone without it ever having been LIVE. Holding the lock across
 * pet_insert() makes a delete or update that finds the new slot wait for
 * the LIVE image (lock order: row lock, then bucket locks; nothing takes
 * them the other way round).
 */
int slab_insert(struct slab_table *t, uint64_t key, const float *init,
		const float *state_init, uint32_t *row)
{
	uint64_t *img;
	uint32_t r;
	int rc;

	if (pet_lookup(t->pet, key, &r) == 0)
		return RS_E_EXISTS;
	if (t->ev && (rc = slab_ev_reserve(t))) /* eviction hook: the cap */
		return rc;
	rc = row_alloc(t, &r);
	if (rc) {
		if (t->ev)
			slab_ev_release(t);
		return rc;
	}
	row_lock(t, r);
	img = slab_stage(t, slab_stripe_of(r));
	fill_image(t, img, key, init);
	img[ROW_W_META] = row_meta(&t->rg, ROW_PENDING);
	slab_row_prepare(t, r, img);
	slab_row_store(t, r, img);
	state_store(t, r, state_init);
	if (slab_test_insert_hook)
		slab_test_insert_hook(t, r, key);
	rc = pet_insert(t->pet, key, r);
	if (rc) { /* EXISTS (lost a race) or FULL: never was LIVE */
		slab_row_tombstone(t, r);
		row_unlock(t, r);
		slab_free_push(t, r);
		if (t->ev)
			slab_ev_release(t);
		return rc;
	}
	row_make_live(t, r, img);
	slab_track_row(t, r);
	if (t->ev) /* eviction hook: access and TTL stamp */
		slab_ev_wrote(t, r, true);
	row_unlock(t, r);
	atomic_fetch_add_explicit(&t->live, 1, RELAXED);
	atomic_fetch_add_explicit(&t->inserts, 1, RELAXED);
	if (row)
		*row = r;
	return slab_io_check(t->st);
}

int slab_get_or_insert(struct slab_table *t, uint64_t key, const float *init,
		       const float *state_init, uint32_t *row, bool *created)
{
	uint32_t r;
	int rc;

	for (;;) {
		if (pet_lookup(t->pet, key, &r) == 0) {
			*created = false;
			break;
		}
		rc = slab_insert(t, key, init, state_init, &r);
		if (rc == 0) {
			*created = true;
			break;
		}
		if (rc != RS_E_EXISTS)
			return rc;
	}
	if (row)
		*row = r;
	return 0;
}

int slab_put(struct slab_table *t, uint64_t key, const float *val,
	     bool *created)
{
	uint32_t r;
	int rc;

	if (!val)
		return rs_seterr(RS_E_INVAL, "slab_put: no value");
	for (;;) {
		if (lock_key(t, key, &r) == 0) {
			row_update_locked(t, r, key, val, NULL);
			row_unlock(t, r);
			if (created)
				*created = false;
			return slab_io_check(t->st);
		}
		rc = slab_insert(t, key, val, NULL, NULL);
		if (rc != RS_E_EXISTS) {
			if (created)
				*created = rc == 0;
			return rc;
		}
	}
}

int slab_delete(struct slab_table *t, uint64_t key)
{
	uint64_t *w;
	uint32_t r;
	int rc;

	rc = pet_remove(t->pet, key, &r);
	if (rc)
		return rc;
	row_lock(t, r);
	w = slab_row_words(t, r);
	if (pet_ld(&w[ROW_W_KEY]) == key &&
	    pet_ld(&w[ROW_W_META]) == row_meta(&t->rg, ROW_LIVE))
		slab_row_tombstone(t, r);
	row_unlock(t, r);
	slab_free_push(t, r);
	slab_track_deleted_key(t, key);
	atomic_fetch_sub_explicit(&t->live, 1, RELAXED);
	if (t->ev) /* eviction hook: the row no longer counts (after live,
		      so that live never passes the cap) */
		slab_ev_release(t);
	atomic_fetch_add_explicit(&t->deletes, 1, RELAXED);
	return slab_io_check(t->st);
}

int slab_write_begin(struct slab_table *t, uint64_t key, struct slab_wr *w)
{
	uint64_t *rw;
	uint32_t r;
	int rc;

	rc = lock_key(t, key, &r);
	if (rc)
		return rc;
	rw = slab_row_words(t, r);
	w->t = t;
	w->key = key;
	w->row = r;
	w->version = pet_ld(&rw[ROW_W_VERSION]);
	/* we hold the lock: no writer, plain reads race with nothing */
	row_payload_to_f32(&t->rg, (uint8_t *)rw + ROW_HDR_BYTES, w->val);
	if (t->state_bytes && w->state)
		memcpy(w->state, slab_state_of(t, r), t->state_bytes);
	return 0;
}

int slab_write_commit(struct slab_wr *w)
{
	struct slab_table *t = w->t;
	const uint64_t *img = row_update_locked(t, w->row, w->key, w->val,
						t->state_bytes ? w->state
							       : NULL);

	w->new_version = img[ROW_W_VERSION];
	w->new_csum = img[ROW_W_CSUM];
	row_unlock(t, w->row);
	w->t = NULL;
	return slab_io_check(t->st);
}

void slab_write_abort(struct slab_wr *w)
{
	if (w->t)
		row_unlock(w->t, w->row);
	w->t = NULL;
}

/* ---- lock-free reads ---- */

/* Payload words of a row (relaxed loads) converted to fp32. */
static void load_payload(const struct slab_table *t, const uint64_t *w,
			 float *out)
{
	const uint64_t *pw = w + ROW_HDR_BYTES / 8;
	uint32_t nb = t->rg.payload_bytes, dim = t->rg.dim, i;
	uint64_t x;

	if (t->rg.dtype == ROW_F32) {
		for (i = 0; i < nb / 8; i++) {
			x = pet_ld(&pw[i]);
			memcpy(out + 2 * i, &x, 8);
		}
		if (nb % 8) {
			x = pet_ld(&pw[i]);
			memcpy(out + 2 * i, &x, 4);
		}
		return;
	}
	for (i = 0; 8 * i < nb; i++) {
		x = pet_ld(&pw[i]);
		for (uint32_t j = 0; j < 4 && 4 * i + j < dim; j++) {
			uint16_t h = (uint16_t)(x >> (16 * j));

			out[4 * i + j] = t->rg.dtype == ROW_F16
						 ? row_f16_to_f32(h)
						 : row_bf16_to_f32(h);
		}
	}
}

/* Seqlock read of slot r's payload: 0, or RS_E_STALE if the slot does not
 * hold key (any more). */
static int read_slot(struct slab_table *t, uint32_t r, uint64_t key,
		     float *out, uint64_t *version)
{
	const uint64_t *w = slab_row_words(t, r);
	const uint64_t live = row_meta(&t->rg, ROW_LIVE);
	unsigned spins = 0;

	for (uint32_t i = 0; i < t->row_words; i += 8) /* all lines at once */
		__builtin_prefetch(&w[i]);
	for (;;) {
		uint64_t v = pet_ld_acq(&w[ROW_W_VERSION]), k, m;

		if (v & 1) {
			atomic_fetch_add_explicit(&t->read_retries, 1,
						  RELAXED);
			pet_backoff(&spins);
			continue;
		}
		k = pet_ld(&w[ROW_W_KEY]);
		m = pet_ld(&w[ROW_W_META]);
		if (k == key && m == live)
			load_payload(t, w, out);
		atomic_thread_fence(memory_order_acquire);
		if (pet_ld(&w[ROW_W_VERSION]) != v) {
			atomic_fetch_add_explicit(&t->read_retries, 1,
						  RELAXED);
			continue;
		}
		if (k != key || m != live)
			return RS_E_STALE;
		if (version)
			*version = v;
		if (t->ev) /* eviction hook: a read the node serves */
			slab_ev_touch(t, r);
		return 0;
	}
}

int slab_read(struct slab_table *t, uint64_t key, float *out,
	      uint64_t *version)
{
	for (;;) {
		uint32_t r;
		int rc = pet_lookup(t->pet, key, &r);

		if (rc)
			return rc;
		if (read_slot(t, r, key, out, version) == 0)
			return 0;
	}
}

void slab_read_row(struct slab_table *t, uint32_t row, void *buf)
{
	const uint64_t *w = slab_row_words(t, row);
	uint8_t *out = buf;
	unsigned spins = 0;

	memset(out + 8 * t->row_words, 0, t->rg.stride - 8 * t->row_words);
	for (;;) {
		uint64_t v = pet_ld_acq(&w[ROW_W_VERSION]);

		if (v & 1) {
			pet_backoff(&spins);
			continue;
		}
		for (uint32_t i = 1; i < t->row_words; i++) {
			uint64_t x = pet_ld(&w[i]);

			memcpy(out + 8 * i, &x, 8);
		}
		atomic_thread_fence(memory_order_acquire);
		if (pet_ld(&w[ROW_W_VERSION]) == v) {
			memcpy(out, &v, 8);
			return;
		}
	}
}

int slab_read_state(struct slab_table *t, uint64_t key, float *out)
{
	uint32_t r;
	int rc = lock_key(t, key, &r);

	if (rc)
		return rc;
	memcpy(out, slab_state_of(t, r), t->state_bytes);
	row_unlock(t, r);
	return 0;
}

int slab_read_record(struct slab_table *t, uint64_t key, float *out)
{
	uint32_t r;
	int rc = lock_key(t, key, &r);

	if (rc)
		return rc;
	load_payload(t, slab_row_words(t, r), out);
	if (t->state_bytes)
		memcpy(out + t->rg.dim, slab_state_of(t, r), t->state_bytes);
	row_unlock(t, r);
	return 0;
}

bool slab_slot_live_key(struct slab_table *t, uint32_t r, uint64_t *key)
{
	const uint64_t live = row_meta(&t->rg, ROW_LIVE);
	const uint64_t *w = slab_row_words(t, r);
	unsigned spins = 0;
	uint64_t v, k, m;

	for (;;) {
		v = pet_ld_acq(&w[ROW_W_VERSION]);
		if (v & 1) {
			pet_backoff(&spins);
			continue;
		}
		k = pet_ld(&w[ROW_W_KEY]);
		m = pet_ld(&w[ROW_W_META]);
		atomic_thread_fence(memory_order_acquire);
		if (pet_ld(&w[ROW_W_VERSION]) == v)
			break;
	}
	*key = k;
	return m == live;
}

bool slab_slot_key(struct slab_table *t, uint32_t r, uint64_t *key)
{
	uint64_t k;
	uint32_t ref;

	if (!slab_slot_live_key(t, r, &k) || pet_lookup(t->pet, k, &ref) ||
	    ref != r)
		return false;
	*key = k;
	return true;
}

int slab_iterate_from(struct slab_table *t, uint64_t *cursor, slab_iter_fn fn,
		      void *arg)
{
	uint64_t n = atomic_load_explicit(&t->next, memory_order_acquire);

	for (uint64_t r = *cursor; r < n; r++) {
		uint64_t k;
		int rc;

		if (!slab_slot_key(t, (uint32_t)r, &k))
			continue;
		rc = fn(arg, k, (uint32_t)r);
		if (rc) {
			*cursor = r + 1;
			return rc;
		}
	}
	*cursor = n > *cursor ? n : *cursor;
	return 0;
}

int slab_iterate(struct slab_table *t, slab_iter_fn fn, void *arg)
{
	uint64_t cursor = 0;

	return slab_iterate_from(t, &cursor, fn, arg);
}

/* ---- accessors ---- */

const char *slab_table_name(const struct slab_table *t)
{
	return t->ent.name;
}

unsigned slab_table_id(const struct slab_table *t)
{
	return t->ent.table_id;
}

uint32_t slab_table_dim(const struct slab_table *t)
{
	return t->ent.dim;
}

uint32_t slab_table_state_floats(const struct slab_table *t)
{
	return t->ent.state_floats;
}

void slab_table_geom(const struct slab_table *t, struct slab_table_geom *g)
{
	memset(g, 0, sizeof(*g));
	g->index = *pet_geometry(t->pet);
	g->rows = t->rg;
	g->index_off = t->ent.ext_off + t->ent.index_off;
	g->index_len = pet_region_bytes(g->index.nbuckets);
	g->rows_off = t->ent.ext_off + t->ent.rows_off;
	g->rows_len = t->ent.capacity * t->rg.stride;
	g->uid = t->ent.uid;
}

void slab_table_regions(const struct slab_table *t, struct slab_region *index,
			struct slab_region *rows, struct slab_region *readable)
{
	size_t ilen, rlen = (size_t)t->ent.capacity * t->rg.stride;
	void *ibase = pet_region(t->pet, &ilen);

	if (index)
		*index = (struct slab_region){ibase, ilen};
	if (rows)
		*rows = (struct slab_region){t->rows, rlen};
	if (readable)
		*readable = (struct slab_region){
			ibase, (size_t)(t->rows + rlen - (uint8_t *)ibase)};
}

void slab_table_stats(struct slab_table *t, struct slab_table_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->capacity = t->ent.capacity;
	st->live = atomic_load_explicit(&t->live, RELAXED);
	pthread_mutex_lock(&t->alloc);
	st->hwm = atomic_load_explicit(&t->next, RELAXED);
	st->free_rows = t->nfree;
	pthread_mutex_unlock(&t->alloc);
	st->inserts = atomic_load_explicit(&t->inserts, RELAXED);
	st->deletes = atomic_load_explicit(&t->deletes, RELAXED);
	st->updates = atomic_load_explicit(&t->updates, RELAXED);
	st->read_retries = atomic_load_explicit(&t->read_retries, RELAXED);
	pet_get_stats(t->pet, &st->index);
	st->recovery = t->rec;
}
