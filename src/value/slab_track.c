/*
 * slab_track.c - the rows of a table changed since its last checkpoint
 * (slab.h, "Change tracking"; docs/checkpoint.md, incremental checkpoints).
 *
 * Memory: one bit per row slot of the table's capacity (allocated zeroed:
 * pages of the bitmap that no write touched stay untouched), plus the keys
 * deleted since the reset, 8 bytes each, at most SLAB_TRACK_GONE_MAX (then
 * the list is dropped and the tracking flagged incomplete until the next
 * reset). A write costs the load of one word, and an atomic OR the first
 * time a slot changes after a reset (slab_track_row, slab_int.h); a delete
 * appends its key under the tracking lock.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/rs_internal.h"
#include "value/slab_int.h"

static uint64_t words_of(const struct slab_table *t)
{
	return (t->ent.capacity + 63) / 64;
}

int slab_track_init(struct slab_table *t)
{
	struct slab_track *k = &t->track;

	memset(k, 0, sizeof(*k));
	k->dirty = rs_calloc(words_of(t), sizeof(*k->dirty));
	if (!k->dirty)
		return -ENOMEM;
	if (pthread_mutex_init(&k->lock, NULL)) {
		free(k->dirty);
		k->dirty = NULL;
		return -ENOMEM;
	}
	return 0;
}

void slab_track_fini(struct slab_table *t)
{
	struct slab_track *k = &t->track;

	if (!k->dirty)
		return;
	pthread_mutex_destroy(&k->lock);
	free(k->dirty);
	free(k->gone);
	k->dirty = NULL;
	k->gone = NULL;
}

void slab_track_deleted_key(struct slab_table *t, uint64_t key)
{
	struct slab_track *k = &t->track;

	pthread_mutex_lock(&k->lock);
	if (!k->overflow && k->ngone == k->gone_cap) {
		uint32_t cap = k->gone_cap ? 2 * k->gone_cap : 256;
		uint64_t *g = NULL;

		if (cap <= SLAB_TRACK_GONE_MAX)
			g = rs_realloc(k->gone, (size_t)cap * sizeof(*g));
		if (g) {
			k->gone = g;
			k->gone_cap = cap;
		} else {	/* past the bound, or no memory: incomplete */
			free(k->gone);
			k->gone = NULL;
			k->ngone = k->gone_cap = 0;
			k->overflow = true;
		}
	}
	if (!k->overflow)
		k->gone[k->ngone++] = key;
	pthread_mutex_unlock(&k->lock);
}

void slab_track_reset(struct slab_table *t,
		      const uint8_t tag[SLAB_TRACK_TAG_BYTES])
{
	struct slab_track *k = &t->track;

	for (uint64_t i = 0, n = words_of(t); i < n; i++)
		if (atomic_load_explicit(&k->dirty[i], memory_order_relaxed))
			atomic_store_explicit(&k->dirty[i], 0,
					      memory_order_relaxed);
	pthread_mutex_lock(&k->lock);
	free(k->gone);
	k->gone = NULL;
	k->ngone = k->gone_cap = 0;
	k->overflow = false;
	k->tagged = true;
	memcpy(k->tag, tag, SLAB_TRACK_TAG_BYTES);
	pthread_mutex_unlock(&k->lock);
}

int slab_track_check(struct slab_table *t,
		     const uint8_t tag[SLAB_TRACK_TAG_BYTES])
{
	struct slab_track *k = &t->track;
	int rc = 0;

	pthread_mutex_lock(&k->lock);
	if (!k->tagged)
		rc = rs_seterr(RS_E_STALE, "table '%s': no checkpoint was "
			       "taken of it since this node started or the "
			       "table was created: take a full checkpoint",
			       t->ent.name);
	else if (memcmp(k->tag, tag, SLAB_TRACK_TAG_BYTES))
		rc = rs_seterr(RS_E_STALE, "table '%s': this node's changes "
			       "are relative to another checkpoint than the "
			       "base (one was taken since the base): take an "
			       "increment of the latest, or a full checkpoint",
			       t->ent.name);
	else if (k->overflow)
		rc = rs_seterr(RS_E_STALE, "table '%s': more than %u keys "
			       "deleted since the base, more than this node "
			       "keeps: take a full checkpoint", t->ent.name,
			       SLAB_TRACK_GONE_MAX);
	pthread_mutex_unlock(&k->lock);
	return rc;
}

int slab_track_changed(struct slab_table *t, slab_iter_fn fn, void *arg)
{
	uint64_t n = atomic_load_explicit(&t->next, memory_order_acquire);

	for (uint64_t i = 0; i < (n + 63) / 64; i++) {
		uint64_t w = atomic_load_explicit(&t->track.dirty[i],
						  memory_order_relaxed);

		while (w) {
			uint32_t r = (uint32_t)(i * 64 + (unsigned)
						__builtin_ctzll(w));
			uint64_t key;
			int rc;

			w &= w - 1;
			if (r >= n || !slab_slot_key(t, r, &key))
				continue;
			if ((rc = fn(arg, key, r)))
				return rc;
		}
	}
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int slab_track_gone(struct slab_table *t, slab_iter_fn fn, void *arg)
{
	struct slab_track *k = &t->track;
	uint64_t *keys = NULL;
	uint32_t n, row;
	int rc = 0;

	pthread_mutex_lock(&k->lock);
	n = k->ngone;
	if (n && (keys = rs_malloc((size_t)n * sizeof(*keys))))
		memcpy(keys, k->gone, (size_t)n * sizeof(*keys));
	pthread_mutex_unlock(&k->lock);
	if (!n)
		return 0;
	if (!keys)
		return rs_seterr(-ENOMEM, "table '%s': out of memory",
				 t->ent.name);
	qsort(keys, n, sizeof(*keys), cmp_u64);
	for (uint32_t i = 0; !rc && i < n; i++) {
		if (i && keys[i] == keys[i - 1])
			continue;
		if (pet_lookup(t->pet, keys[i], &row) == RS_E_NOTFOUND)
			rc = fn(arg, keys[i], 0);
	}
	free(keys);
	return rc;
}
